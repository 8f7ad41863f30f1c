/* test_base.c: unit tests of base/: errors, buffers, time, flags, JSON,
 * base64 and YAML. */
#include "config.h"
#include "base/buf.h"
#include "base/codec.h"
#include "base/err.h"
#include "base/flags.h"
#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"
#include "tests/unit/unit.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void
test_err_set_prefix(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;

	CHECK_INT(cairn_err_set(&err, CAIRN_ENOTFOUND, "key %s", "a/b"),
	    CAIRN_ENOTFOUND);
	cairn_err_prefix(&err, "reading %s", "bucket");
	CHECK_STR(err.msg, "reading bucket: key a/b");
	CHECK_INT(err.code, CAIRN_ENOTFOUND);
	CHECK_INT(cairn_err_set(NULL, CAIRN_EIO, "x"), CAIRN_EIO);
	CHECK_STR(cairn_strerror(CAIRN_ECONFLICT), "conflict");
	cairn_err_errno(&err, CAIRN_EIO, 2, "open %s", "/x");
	CHECK_STR(err.msg, "open /x: No such file or directory");
}

static void
test_buf_cap(void)
{
	struct buf b;

	buf_init(&b, 8);
	CHECK_INT(buf_puts(&b, "12345"), 0);
	CHECK_INT(buf_puts(&b, "6789"), CAIRN_ETOOBIG);
	CHECK_STR(buf_cstr(&b), "12345");	/* unchanged on refusal */
	CHECK_INT(buf_printf(&b, "%d", 678), 0);
	CHECK_STR(buf_cstr(&b), "12345678");
	CHECK_INT(buf_putc(&b, 'x'), CAIRN_ETOOBIG);
	CHECK_INT(buf_printf(&b, "%s", "y"), CAIRN_ETOOBIG);
	buf_consume(&b, 3);
	CHECK_STR(buf_cstr(&b), "45678");
	buf_free(&b);
	CHECK_STR(buf_cstr(&b), "");
}

static void
test_buf_take(void)
{
	struct buf b;
	size_t len;
	char *s;

	buf_init(&b, 1 << 20);
	for (int i = 0; i < 1000; i++)
		buf_printf(&b, "%04d", i);
	s = buf_take(&b, &len);
	CHECK_INT(len, 4000);
	CHECK(strncmp(s + 3996, "0999", 4) == 0);
	CHECK_INT(b.len, 0);
	free(s);
	buf_free(&b);
}

static void
test_time_format(void)
{
	char out[TIME_STR_MAX];
	int64_t us = 1764676800LL * TIME_US_PER_SEC + 123456;	/* 2025-12-02T12:00:00 */

	time_format_rfc3339(us, out);
	CHECK_STR(out, "2025-12-02T12:00:00Z");
	time_format_micro(us, out);
	CHECK_STR(out, "2025-12-02T12:00:00.123456Z");
	time_format_micro(1764676800LL * TIME_US_PER_SEC, out);
	CHECK_STR(out, "2025-12-02T12:00:00.000000Z");
}

static void
test_time_parse(void)
{
	int64_t us = 0;

	CHECK_INT(time_parse("2025-12-02T12:00:00Z", &us), 0);
	CHECK_INT(us, 1764676800LL * TIME_US_PER_SEC);
	CHECK_INT(time_parse("2025-12-02T12:00:00.123456Z", &us), 0);
	CHECK_INT(us % TIME_US_PER_SEC, 123456);
	CHECK_INT(time_parse("2025-12-02T14:00:00+02:00", &us), 0);
	CHECK_INT(us, 1764676800LL * TIME_US_PER_SEC);
	CHECK_INT(time_parse("2025-12-02T12:00:00.5Z", &us), 0);
	CHECK_INT(us % TIME_US_PER_SEC, 500000);
	/* Bad input is refused and leaves the output alone. */
	us = 42;
	CHECK_INT(time_parse("2025-13-02T12:00:00Z", &us), CAIRN_EINVAL);
	CHECK_INT(time_parse("2025-02-30T12:00:00Z", &us), CAIRN_EINVAL);
	CHECK_INT(time_parse("2025-12-02 12:00:00Z", &us), CAIRN_EINVAL);
	CHECK_INT(time_parse("2025-12-02T12:00:00", &us), CAIRN_EINVAL);
	CHECK_INT(time_parse("2025-12-02T12:00:00Zjunk", &us), CAIRN_EINVAL);
	CHECK_INT(time_parse("2025-12-02T12:00:00.Z", &us), CAIRN_EINVAL);
	CHECK_INT(time_parse("", &us), CAIRN_EINVAL);
	CHECK_INT(time_parse(NULL, &us), CAIRN_EINVAL);
	CHECK_INT(us, 42);
}

static void
test_time_deadline(void)
{
	struct timespec now, ts;
	int64_t d;

	clock_gettime(CLOCK_REALTIME, &now);
	time_deadline(&ts, 2500000);	/* 2.5 s: carries into tv_sec */
	CHECK(ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000L);
	d = (int64_t)(ts.tv_sec - now.tv_sec) * 1000000 +
	    (ts.tv_nsec - now.tv_nsec) / 1000;
	CHECK(d >= 2500000 && d < 2600000);
	time_deadline(&ts, 999999);
	CHECK(ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000L);
}

static void
test_duration(void)
{
	int64_t us;
	char out[TIME_STR_MAX];

	CHECK_INT(duration_parse("500ms", &us), 0);
	CHECK_INT(us, 500000);
	CHECK_INT(duration_parse("3s", &us), 0);
	CHECK_INT(us, 3 * TIME_US_PER_SEC);
	CHECK_INT(duration_parse("72h", &us), 0);
	CHECK_INT(us, 72LL * 3600 * TIME_US_PER_SEC);
	CHECK_INT(duration_parse("1h30m", &us), 0);
	CHECK_INT(us, 5400LL * TIME_US_PER_SEC);
	CHECK_INT(duration_parse("1.5s", &us), 0);
	CHECK_INT(us, 1500000);
	CHECK_INT(duration_parse("0", &us), 0);
	CHECK_INT(us, 0);
	CHECK_INT(duration_parse("10", &us), CAIRN_EINVAL);
	CHECK_INT(duration_parse("-3s", &us), CAIRN_EINVAL);
	CHECK_INT(duration_parse("3x", &us), CAIRN_EINVAL);
	CHECK_INT(duration_parse("", &us), CAIRN_EINVAL);
	CHECK_INT(duration_parse("h", &us), CAIRN_EINVAL);
	duration_format(500000, out);
	CHECK_STR(out, "500ms");
	duration_format(5400LL * TIME_US_PER_SEC, out);
	CHECK_STR(out, "1h30m");
	duration_format(72LL * 3600 * TIME_US_PER_SEC, out);
	CHECK_STR(out, "72h");
	duration_format(1500000, out);
	CHECK_STR(out, "1.5s");
}

static void
test_flags_parse(void)
{
	static const enum flag_id fl[] = { F_WORKERS, F_LEASE_DURATION, F_WAIT,
	    F_INCLUDE_NAMESPACES, F_NAMESPACE, F_LOG_LEVEL, F__END };
	const enum flag_id *lists[] = { fl, NULL };
	const char *argv[] = { "b1", "--workers=4", "--lease-duration", "3s", "--wait",
	    "--include-namespaces", "a,b", "--include-namespaces=c", "-n", "x",
	    "--", "--not-a-flag" };
	struct cairn_err err = CAIRN_ERR_INIT;
	struct flagset fs;
	char **l;

	setenv("CAIRN_LOG_LEVEL", "debug", 1);
	REQUIRE(flags_parse(&fs, lists, 12, argv, &err) == 0);
	CHECK_INT(flag_int(&fs, F_WORKERS), 4);
	CHECK_INT(flag_duration_us(&fs, F_LEASE_DURATION), 3 * TIME_US_PER_SEC);
	CHECK(flag_bool(&fs, F_WAIT));
	l = flag_list(&fs, F_INCLUDE_NAMESPACES);
	CHECK_INT(strv_len(l), 3);
	CHECK_STR(l[2], "c");
	CHECK_STR(flag_str(&fs, F_NAMESPACE), "x");
	CHECK_STR(flag_str(&fs, F_LOG_LEVEL), "debug");	/* from env */
	CHECK_INT(fs.nargs, 2);
	CHECK_STR(fs.args[1], "--not-a-flag");
	flags_free(&fs);
	unsetenv("CAIRN_LOG_LEVEL");
}

static void
test_flags_errors(void)
{
	static const enum flag_id fl[] = { F_WORKERS, F_LEASE_DURATION, F_WAIT,
	    F__END };
	const enum flag_id *lists[] = { fl, NULL };
	struct cairn_err err = CAIRN_ERR_INIT;
	struct flagset fs;
	const char *bad_int[] = { "--workers=four" };
	const char *bad_dur[] = { "--lease-duration", "15" };
	const char *unknown[] = { "--bogus" };
	const char *foreign[] = { "--bucket=x" };	/* real flag, not accepted here */
	const char *missing[] = { "--workers" };
	const char *bad_bool[] = { "--wait=maybe" };

	CHECK_INT(flags_parse(&fs, lists, 1, bad_int, &err), CAIRN_EINVAL);
	CHECK(strstr(err.msg, "--workers") != NULL);
	flags_free(&fs);
	CHECK_INT(flags_parse(&fs, lists, 2, bad_dur, &err), CAIRN_EINVAL);
	CHECK(strstr(err.msg, "invalid duration \"15\"") != NULL);
	flags_free(&fs);
	CHECK_INT(flags_parse(&fs, lists, 1, unknown, &err), CAIRN_EINVAL);
	CHECK_STR(err.msg, "unknown flag --bogus");
	flags_free(&fs);
	CHECK_INT(flags_parse(&fs, lists, 1, foreign, &err), CAIRN_EINVAL);
	flags_free(&fs);
	CHECK_INT(flags_parse(&fs, lists, 1, missing, &err), CAIRN_EINVAL);
	CHECK(strstr(err.msg, "needs a value") != NULL);
	flags_free(&fs);
	CHECK_INT(flags_parse(&fs, lists, 1, bad_bool, &err), CAIRN_EINVAL);
	flags_free(&fs);
	setenv("CAIRN_WORKERS", "-1", 1);
	CHECK_INT(flags_parse(&fs, lists, 0, NULL, &err), CAIRN_EINVAL);
	CHECK(strstr(err.msg, "$CAIRN_WORKERS") != NULL);
	flags_free(&fs);
	unsetenv("CAIRN_WORKERS");
}

static void
test_escape(void)
{
	struct buf b;

	buf_init(&b, 1024);
	str_escape_text(&b, "a\nb\x01\xff\\");
	CHECK_STR(buf_cstr(&b), "a\\nb\\x01\\xff\\\\");
	buf_reset(&b);
	str_escape_json(&b, "q\"\n\x02\xc3\xa9");
	CHECK_STR(buf_cstr(&b), "\"q\\\"\\n\\u0002\xc3\xa9\"");
	buf_reset(&b);
	str_escape_html(&b, "<script>\"x\"&'");
	CHECK_STR(buf_cstr(&b), "&lt;script&gt;&quot;x&quot;&amp;&#39;");
	buf_free(&b);
}

static void
test_glob_split(void)
{
	char **v;
	size_t n;

	CHECK(str_glob("*", "anything"));
	CHECK(str_glob("kube-*", "kube-system"));
	CHECK(!str_glob("kube-*", "default"));
	CHECK(str_glob("a?c*z", "abcxyz"));
	CHECK(!str_glob("a?c", "ac"));
	v = str_split(" a, b ,,c ", ',', &n);
	CHECK_INT(n, 3);
	CHECK_STR(v[1], "b");
	CHECK(strv_contains(v, "c"));
	strv_free(v);
}

static void
test_json_paths(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *doc = "{\"metadata\":{\"name\":\"b1\",\"generation\":3},"
	    "\"spec\":{\"wait\":true}}";
	cJSON *j = json_parse(doc, strlen(doc), &err);
	char deep[CAIRN_JSON_MAX_DEPTH + 1];

	REQUIRE(j != NULL);
	CHECK_STR(json_str(j, "metadata.name"), "b1");
	CHECK_INT(json_int(j, "metadata.generation", -1), 3);
	CHECK(json_bool(j, "spec.wait", 0));
	CHECK(json_str(j, "metadata.missing.x") == NULL);
	json_set_str(j, "status.claim.holder", "s1");
	CHECK_STR(json_str(j, "status.claim.holder"), "s1");
	json_delete(j, "status.claim");
	CHECK(json_get(j, "status.claim") == NULL);
	cJSON_Delete(j);
	memset(deep, '[', sizeof deep);
	CHECK(json_parse(deep, sizeof deep, &err) == NULL);
	CHECK(strstr(err.msg, "deeper") != NULL);
	CHECK(json_parse("{\"a\":", 5, &err) == NULL);
	CHECK_INT(err.code, CAIRN_EPROTO);
}

static void
test_json_parse_members(void)
{
	static const char *const keys[] = { "metadata", "n", NULL };
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *doc = " { \"data\" : {\"a\":\"}],\\\"{\",\"b\":[1,{\"c\":[]}]},"
	    "\"n\":-1.5e3,\"metadata\":{\"name\":\"x\"},\"t\":true,"
	    "\"meta\\u0064ata\":1,\"s\":\"q\"} ";
	enum { D = CAIRN_JSON_MAX_DEPTH + 1 };	/* one level too deep */
	char deep[2 * D + 12];
	cJSON *j;

	j = json_parse_members(doc, strlen(doc), keys, &err);
	REQUIRE(j != NULL);
	CHECK_STR(json_str(j, "metadata.name"), "x");
	CHECK(json_int(j, "n", 0) == -1500);
	CHECK(json_get(j, "data") == NULL && json_get(j, "t") == NULL);
	CHECK(cJSON_GetArraySize(j) == 2);	/* the escaped key is not "metadata" */
	cJSON_Delete(j);
	j = json_parse_members("{}", 2, keys, &err);
	REQUIRE(j != NULL && cJSON_GetArraySize(j) == 0);
	cJSON_Delete(j);
	/* Not an object, cut short, a wanted member that does not parse. */
	CHECK(json_parse_members("[1]", 3, keys, &err) == NULL);
	CHECK(json_parse_members("{\"data\":{\"a\":1}", 15, keys, &err) == NULL);
	CHECK_INT(err.code, CAIRN_EPROTO);
	CHECK(json_parse_members("{\"data\":\"x", 10, keys, &err) == NULL);
	CHECK(json_parse_members("{\"n\":tru}", 10, keys, &err) == NULL);
	CHECK(strstr(err.msg, "member n") != NULL);
	CHECK(json_parse_members("{\"n\":1} x", 10, keys, &err) == NULL);
	/* Depth is checked where it is parsed, not where it is skipped. */
	memcpy(deep, "{\"s\":", 5);
	memset(deep + 5, '[', D);
	memset(deep + 5 + D, ']', D);
	memcpy(deep + 5 + 2 * D, ",\"n\":2}", 7);
	j = json_parse_members(deep, 2 * D + 12, keys, &err);
	REQUIRE(j != NULL);
	CHECK(json_int(j, "n", 0) == 2);
	cJSON_Delete(j);
	memcpy(deep, "{\"n\":", 5);
	CHECK(json_parse_members(deep, 2 * D + 12, keys, &err) == NULL);
	CHECK(strstr(err.msg, "deeper") != NULL);
}

/*
 * Once every key's member is read the rest is not scanned (a list item's
 * spec and data); a '?' key ("?kind", absent from a built-in list's
 * items) is taken when it comes first and not waited for.
 */
static void
test_json_parse_members_stop(void)
{
	static const char *const keys[] = { "?kind", "metadata.name", NULL };
	static const char *const all[] = { "kind", "metadata.name", NULL };
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *cut = "{\"metadata\":{\"name\":\"x\"},\"data\":{\"a\":\"";
	const char *typed = "{\"kind\":\"K\",\"metadata\":{\"name\":\"y\"},"
	    "\"spec\":{}}";
	cJSON *j;

	/* the text after metadata is cut short: never reached */
	j = json_parse_members(cut, strlen(cut), keys, &err);
	REQUIRE(j != NULL);
	CHECK_STR(json_str(j, "metadata.name"), "x");
	CHECK(json_get(j, "kind") == NULL && json_get(j, "data") == NULL);
	cJSON_Delete(j);
	/* kind required: waited for, so the cut is found */
	CHECK(json_parse_members(cut, strlen(cut), all, &err) == NULL);
	/* a '?' key that is there is read like any other */
	j = json_parse_members(typed, strlen(typed), keys, &err);
	REQUIRE(j != NULL);
	CHECK_STR(json_str(j, "kind"), "K");
	CHECK_STR(json_str(j, "metadata.name"), "y");
	CHECK(json_get(j, "spec") == NULL);
	cJSON_Delete(j);
}

/*
 * A path into a member: the member is parsed in the scan that finds its
 * end. When its own keys are read before its end, the scan goes on past
 * it for the keys after; what follows it is checked either way.
 */
static void
test_json_parse_members_nested(void)
{
	static const char *const keys[] = { "metadata.name", "n", NULL };
	static const char *const deep[] = { "a.b.c", "z", NULL };
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *early = "{\"metadata\":{\"name\":\"x\",\"m\":[{\"}\":\"{\"}]},"
	    "\"n\":7}";
	const char *nested = "{\"a\":{\"q\":1,\"b\":{\"c\":[1],\"d\":{}}},"
	    "\"z\":\"y\"}";
	static const char *const bad[] = { "{\"metadata\":{\"x\":1",
	    "{\"metadata\":{\"x\":1}\"n\":2}", "{\"metadata\":{\"x\":1}}x" };
	cJSON *j;

	j = json_parse_members(early, strlen(early), keys, &err);
	REQUIRE(j != NULL);
	CHECK_STR(json_str(j, "metadata.name"), "x");
	CHECK(json_get(j, "metadata.m") == NULL);
	CHECK(json_int(j, "n", 0) == 7);
	cJSON_Delete(j);
	j = json_parse_members(nested, strlen(nested), deep, &err);
	REQUIRE(j != NULL);
	CHECK(cJSON_GetArraySize(json_get(j, "a.b.c")) == 1);
	CHECK(json_get(j, "a.q") == NULL && json_get(j, "a.b.d") == NULL);
	CHECK_STR(json_str(j, "z"), "y");
	cJSON_Delete(j);
	/*
	 * Cut inside the member, no comma after it, junk after the object
	 * (with a key still wanted: once all are read, nothing after them
	 * is looked at)
	 */
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err.code = 0;
		CHECK(json_parse_members(bad[i], strlen(bad[i]), keys,
		    &err) == NULL);
		CHECK_INT(err.code, CAIRN_EPROTO);
	}
}

/*
 * A key with '<' and the members that come after it: met first, they say
 * it is missing, and the scan stops there once nothing else is wanted;
 * the key's own member is read when it comes first.
 */
static void
test_json_parse_members_fence(void)
{
	static const char *const keys[] = { "metadata.name",
	    "metadata.gone<labels,managedFields", NULL };
	static const char *const also[] = { "metadata.name",
	    "metadata.gone<labels,managedFields", "metadata.labels", NULL };
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *live = "{\"metadata\":{\"name\":\"a\",\"labels\":{\"x\":\"1\"},"
	    "\"managedFields\":[{\"m\":\"";	/* cut: never reached */
	const char *going = "{\"metadata\":{\"name\":\"b\",\"gone\":\"t\","
	    "\"labels\":{}}}";
	const char *bare = "{\"metadata\":{\"name\":\"c\"},\"data\":{\"k\":1}}";
	cJSON *j;

	j = json_parse_members(live, strlen(live), keys, &err);
	REQUIRE(j != NULL);
	CHECK_STR(json_str(j, "metadata.name"), "a");
	CHECK(json_get(j, "metadata.gone") == NULL);
	CHECK(json_get(j, "metadata.labels") == NULL);
	cJSON_Delete(j);
	/* the fence member itself wanted: read, then the scan stops */
	j = json_parse_members(live, strlen(live), also, &err);
	REQUIRE(j != NULL);
	CHECK_STR(json_str(j, "metadata.labels.x"), "1");
	cJSON_Delete(j);
	j = json_parse_members(going, strlen(going), keys, &err);
	REQUIRE(j != NULL);
	CHECK_STR(json_str(j, "metadata.gone"), "t");
	cJSON_Delete(j);
	/* no fence member: the end of the object says it */
	j = json_parse_members(bare, strlen(bare), keys, &err);
	REQUIRE(j != NULL);
	CHECK_STR(json_str(j, "metadata.name"), "c");
	CHECK(json_get(j, "metadata.gone") == NULL);
	cJSON_Delete(j);
	/* without the fence the cut text is scanned, and found cut */
	{
		static const char *const plain[] = { "metadata.name",
		    "metadata.gone", NULL };

		CHECK(json_parse_members(live, strlen(live), plain, &err) ==
		    NULL);
	}
}

/* Paths into members: only the parts named, the rest stepped over. */
static void
test_json_parse_member_paths(void)
{
	static const char *const keys[] = { "metadata.name",
	    "metadata.labels", "spec.volumeName", "kind", NULL };
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *doc = "{\"kind\":\"PVC\",\"metadata\":{\"name\":\"a\","
	    "\"managedFields\":[{\"x\":\"}\"}],\"labels\":{\"k\":\"v\"},"
	    "\"names\":1},\"spec\":\"not an object\",\"status\":{}}";
	const char *bad = "{\"metadata\":{\"name\":nope}}";
	cJSON *j, *md;

	j = json_parse_members(doc, strlen(doc), keys, &err);
	REQUIRE(j != NULL);
	md = json_get(j, "metadata");
	CHECK_STR(json_str(md, "name"), "a");
	CHECK_STR(json_str(md, "labels.k"), "v");
	CHECK(cJSON_GetArraySize(md) == 2);	/* not managedFields, names */
	CHECK_STR(json_str(j, "kind"), "PVC");
	/* A path into what is not an object: the value whole. */
	CHECK_STR(json_str(j, "spec"), "not an object");
	CHECK(json_get(j, "status") == NULL);
	cJSON_Delete(j);
	CHECK(json_parse_members(bad, strlen(bad), keys, &err) == NULL);
	CHECK(strstr(err.msg, "member metadata: member name") != NULL);
}

static void
test_json_parse_member(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *page = "{\"kind\":\"L\",\"metadata\":{\"continue\":\"t\"},"
	    "\"items\":[{\"metadata\":{}}, not even JSON";
	const char *after = "{\"items\":[{\"metadata\":{\"continue\":\"no\"}}],"
	    "\"metadata\":{\"continue\":\"t2\"}}";
	cJSON *j;

	/* Found before the rest is looked at. */
	j = json_parse_member(page, strlen(page), "metadata", &err);
	REQUIRE(j != NULL);
	CHECK_STR(json_str(j, "continue"), "t");
	cJSON_Delete(j);
	/* Only top-level members count. */
	j = json_parse_member(after, strlen(after), "metadata", &err);
	REQUIRE(j != NULL);
	CHECK_STR(json_str(j, "continue"), "t2");
	cJSON_Delete(j);
	CHECK(json_parse_member(after, strlen(after), "kind", &err) == NULL);
	CHECK_INT(err.code, CAIRN_ENOTFOUND);
	CHECK(json_parse_member(page, strlen(page), "kind2", &err) == NULL);
	CHECK_INT(err.code, CAIRN_EPROTO);
}

/* Runs of backslashes before a quote: odd escapes it, even does not. */
static void
test_json_string_end(void)
{
	static const struct {
		const char *text;
		int end;	/* offset of the closing quote, -1: none */
		int esc;	/* with -1: ends inside an escape */
	} c[] = {
		{ "abc\"x", 3, 0 },
		{ "a\\\"b\"", 4, 0 },		/* a\"b": escaped quote */
		{ "a\\\\\"b", 3, 0 },		/* a\\" : even run */
		{ "\\\\\\\"\"", 4, 0 },	/* \\\"" */
		{ "", -1, 0 },
		{ "abc", -1, 0 },
		{ "ab\\", -1, 1 },
		{ "ab\\\\", -1, 0 },
		{ "\\\"\\", -1, 1 },
	};

	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		const char *t = c[i].text, *e = t + strlen(t), *q;
		int esc = -1;

		q = json_string_end(t, e, &esc);
		if (c[i].end < 0) {
			CHECK(q == NULL);
			CHECK_INT(esc, c[i].esc);
		} else {
			CHECK(q == t + c[i].end);
		}
	}
}

/* A byte-by-byte reading of where a string ends, to check the fast one. */
static const char *
string_end_slow(const char *p, const char *end, int *esc)
{
	int e = 0;

	for (; p < end; p++) {
		if (e)
			e = 0;
		else if (*p == '\\')
			e = 1;
		else if (*p == '"')
			return p;
	}
	*esc = e;
	return NULL;
}

static void
test_json_string_end_random(void)
{
	/* runs of plain bytes long enough for both the short and memchr paths */
	static const char alphabet[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaab\\\"";
	char s[96];
	unsigned seed = 7;
	int bad = 0;

	for (int it = 0; it < 200000 && !bad; it++) {
		int n, e1 = -1, e2 = -1;
		const char *q1, *q2;

		seed = seed * 1103515245u + 12345u;
		n = (int)((seed >> 16) % sizeof s);
		for (int i = 0; i < n; i++) {
			seed = seed * 1103515245u + 12345u;
			s[i] = alphabet[(seed >> 16) % (sizeof alphabet - 1)];
		}
		q1 = json_string_end(s, s + n, &e1);
		q2 = string_end_slow(s, s + n, &e2);
		bad = q1 != q2 || (q1 == NULL && e1 != e2);
	}
	CHECK(!bad);
}

static void
test_log_config(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;

	CHECK_INT(log_configure("loud", NULL, &err), CAIRN_EINVAL);
	CHECK(strstr(err.msg, "loud") != NULL);
	CHECK_INT(log_configure(NULL, "xml", &err), CAIRN_EINVAL);
	CHECK_INT(log_configure("warn", "text", &err), 0);
	CHECK(!log_enabled(LOG_INFO));
	CHECK(log_enabled(LOG_ERROR));
	log_configure("info", NULL, &err);
}

static void
test_uuid(void)
{
	char a[37], b[37];

	rand_uuid(a);
	rand_uuid(b);
	CHECK_INT(strlen(a), 36);
	CHECK(a[14] == '4');
	CHECK(strcmp(a, b) != 0);
}

/* Issue 19: caps never cut a character; invalid UTF-8 never leaves cairn. */
static void
test_utf8(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	char small[8], big[CAIRN_ERR_MSG_MAX + 64];
	char *fixed, *printed;
	cJSON *o;

	/* cut points */
	CHECK_INT((int)str_utf8_cut("ab\xe2\x82\xac", 5), 5);
	CHECK_INT((int)str_utf8_cut("ab\xe2\x82\xac", 4), 2);
	CHECK_INT((int)str_utf8_cut("ab\xe2\x82\xac", 3), 2);
	CHECK_INT((int)str_utf8_cut("\xf0\x9f\x98\x80", 3), 0);
	CHECK_INT((int)str_utf8_cut("\xf0\x9f\x98\x80", 4), 4);
	CHECK_INT((int)str_utf8_cut("a\xc3\xa9", 2), 1);
	/* validity: strict RFC 3629 */
	CHECK(str_utf8_valid("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14));
	CHECK(!str_utf8_valid("\xc0\xaf", 2));		/* overlong '/' */
	CHECK(!str_utf8_valid("\xe0\x80\xaf", 3));		/* overlong */
	CHECK(!str_utf8_valid("\xed\xa0\x80", 3));		/* surrogate */
	CHECK(!str_utf8_valid("\xf4\x90\x80\x80", 4));	/* > U+10FFFF */
	CHECK(!str_utf8_valid("\xe2\x82", 2));		/* cut */
	CHECK(!str_utf8_valid("\xff", 1));
	fixed = str_utf8_fix("a\xff" "b\xe2\x82", 5);
	CHECK_STR(fixed, "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd");
	free(fixed);
	/* formatting that truncates backs off to a whole character */
	CHECK_INT((int)str_format(small, sizeof small, "%s", "ab\xe2\x82\xac\xe2\x82\xac"), 5);
	CHECK_STR(small, "ab\xe2\x82\xac");
	memset(big, 'x', sizeof big);
	for (size_t i = 0; i + 3 < sizeof big; i += 3)
		memcpy(big + i, "\xe2\x82\xac", 3);
	big[sizeof big - 1] = '\0';
	for (int shift = 0; shift < 3; shift++) {
		cairn_err_set(&err, CAIRN_EFAIL, "%.*s%s", shift, "ab", big);
		CHECK(str_utf8_valid(err.msg, strlen(err.msg)));
		cairn_err_prefix(&err, "%.*s%s", shift, "ab", big);
		CHECK(str_utf8_valid(err.msg, strlen(err.msg)));
		cairn_err_errno(&err, CAIRN_EIO, 2, "%.*s%s", shift, "ab", big);
		CHECK(str_utf8_valid(err.msg, strlen(err.msg)));
	}
	/* json_print never emits invalid UTF-8 */
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "m", "d\xe9" "fectueux \xed\xa0\x80");
	printed = json_print(o);
	CHECK(str_utf8_valid(printed, strlen(printed)));
	CHECK(strstr(printed, "d\xef\xbf\xbd" "fectueux") != NULL);
	free(printed);
	cJSON_Delete(o);
}

static void
test_b64(void)
{
	static const struct { const char *plain, *enc; } v[] = {
		{ "", "" }, { "f", "Zg==" }, { "fo", "Zm8=" }, { "foo", "Zm9v" },
		{ "foob", "Zm9vYg==" }, { "fooba", "Zm9vYmE=" },
		{ "foobar", "Zm9vYmFy" },
	};
	char *e, *d;
	size_t len;

	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		e = codec_b64_encode(v[i].plain, strlen(v[i].plain));
		CHECK_STR(e, v[i].enc);
		free(e);
		if (v[i].enc[0] == '\0')
			continue;
		CHECK_INT(codec_b64_decode(v[i].enc, 64, &d, &len), 0);
		CHECK_INT((int)len, (int)strlen(v[i].plain));
		CHECK_STR(d, v[i].plain);
		free(d);
	}
	/* Whitespace and line breaks (a PEM bundle, a Secret from YAML). */
	CHECK_INT(codec_b64_decode(" Zm9v\nYmE=\r\n", 64, &d, NULL), 0);
	CHECK_STR(d, "fooba");
	free(d);
	/* Binary data keeps its length. */
	CHECK_INT(codec_b64_decode("AAEA", 64, &d, &len), 0);
	CHECK_INT((int)len, 3);
	CHECK(d[0] == 0 && d[1] == 1 && d[2] == 0);
	free(d);
	CHECK_INT(codec_b64_decode("", 64, &d, NULL), CAIRN_EINVAL);
	CHECK(d == NULL);
	CHECK_INT(codec_b64_decode(" \n", 64, &d, NULL), CAIRN_EINVAL);
	CHECK_INT(codec_b64_decode("Zm9", 64, &d, NULL), CAIRN_EINVAL);
	CHECK_INT(codec_b64_decode("Zm9*", 64, &d, NULL), CAIRN_EINVAL);
	CHECK_INT(codec_b64_decode("Zm9vYmFy", 5, &d, NULL), CAIRN_ETOOBIG);
	CHECK_INT(codec_b64_decode("Zm9vYmE=", 5, &d, NULL), 0);
	free(d);
}

static void
test_yaml(void)
{
	const char *y = "a: 1\nb: [x, 'y', \"true\"]\nc:\nd: {e: true, f: ~}\n"
	    "a: -12\n";
	struct cairn_err err = CAIRN_ERR_INIT;
	cJSON *j, *arr;

	j = codec_yaml_doc(y, strlen(y), CODEC_YAML_STRINGS, "t", NULL);
	REQUIRE(j != NULL);
	CHECK_STR(json_str(j, "a"), "-12");	/* the last of a key given twice */
	CHECK_STR(json_str(j, "d.e"), "true");
	CHECK(cJSON_IsNull(cJSON_GetObjectItem(j, "c")));
	CHECK(cJSON_IsNull(json_get(j, "d.f")));
	CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(j, "b")), 3);
	cJSON_Delete(j);
	j = codec_yaml_doc(y, strlen(y), CODEC_YAML_TYPED, "t", NULL);
	REQUIRE(j != NULL);
	CHECK_INT(json_int(j, "a", 0), -12);
	CHECK(cJSON_IsTrue(json_get(j, "d.e")));
	CHECK(cJSON_IsString(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "b"), 2)));
	cJSON_Delete(j);
	/* Empty text: an empty object; errors name what and where. */
	j = codec_yaml_doc("", 0, CODEC_YAML_STRINGS, "t", NULL);
	CHECK(cJSON_IsObject(j) && cJSON_GetArraySize(j) == 0);
	cJSON_Delete(j);
	CHECK(codec_yaml_doc("a: [1\n", 6, CODEC_YAML_STRINGS, "conf", &err) ==
	    NULL);
	CHECK_INT(err.code, CAIRN_EINVAL);
	CHECK(strncmp(err.msg, "conf: YAML error at line ", 25) == 0);
	CHECK(codec_yaml_doc("[a]: 1\n", 7, CODEC_YAML_STRINGS, "conf", &err) ==
	    NULL);
	CHECK(strstr(err.msg, "unsupported YAML") != NULL);
	/* A stream: every document, in order. */
	arr = cJSON_CreateArray();
	y = "a: 1\n---\nb: 2\n";
	CHECK_INT(codec_yaml_stream(y, strlen(y), CODEC_YAML_TYPED, "s", arr,
	    NULL), 0);
	CHECK_INT(cJSON_GetArraySize(arr), 2);
	CHECK_INT(json_int(cJSON_GetArrayItem(arr, 1), "b", 0), 2);
	cJSON_Delete(arr);
}

/*
 * Issue 19: aliases are expanded within a budget: six levels of ten
 * aliases (a million nodes from 300 bytes) are refused at once, a
 * document using a few aliases is read as before.
 */
static void
test_yaml_alias_budget(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *ok = "a: &x {k: v}\nb: *x\nc: [*x, *x]\n";
	struct buf b;
	char *bomb;
	cJSON *j;

	j = codec_yaml_doc(ok, strlen(ok), CODEC_YAML_STRINGS, "t", &err);
	REQUIRE(j != NULL);
	CHECK_STR(json_str_or(cJSON_GetArrayItem(json_get(j, "c"), 1), "k",
	    ""), "v");
	cJSON_Delete(j);
	buf_init(&b, 1 << 16);
	buf_puts(&b, "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n");
	for (int i = 1; i <= 6; i++) {
		buf_printf(&b, "l%d: &l%d [", i, i);
		for (int k = 0; k < 10; k++)
			buf_printf(&b, "%s*l%d", k ? ", " : "", i - 1);
		buf_puts(&b, "]\n");
	}
	bomb = buf_take(&b, NULL);
	j = codec_yaml_doc(bomb, strlen(bomb), CODEC_YAML_TYPED, "bomb", &err);
	CHECK(j == NULL);
	CHECK(strstr(err.msg, "aliases expand") != NULL);
	cJSON_Delete(j);
	free(bomb);
}

static void
test_read_file(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *dir = getenv("CAIRN_TMP");
	char path[512], *out;
	size_t len;
	FILE *f;

	snprintf(path, sizeof path, "%s/base-read-file", dir ? dir : "/tmp");
	f = fopen(path, "w");
	REQUIRE(f != NULL);
	fputs("0123456789", f);
	fclose(f);
	CHECK_INT(buf_read_file(path, 10, "conf", &out, &len, &err), 0);
	CHECK_STR(out, "0123456789");
	CHECK_INT((int)len, 10);
	free(out);
	CHECK_INT(buf_read_file(path, 9, "conf", &out, &len, &err),
	    CAIRN_ETOOBIG);
	CHECK(out == NULL && strstr(err.msg, "larger than 9 bytes") != NULL);
	CHECK(strncmp(err.msg, "conf ", 5) == 0);
	remove(path);
	CHECK_INT(buf_read_file(path, 9, "conf", &out, NULL, &err),
	    CAIRN_ENOTFOUND);
}

/* Whole writes: big buffers through a pipe, pwrite at an offset. */
static void
test_write_all(void)
{
	const char *dir = getenv("CAIRN_TMP");
	char path[512], got[16] = { 0 };
	static char big[1 << 20];
	int fds[2], fd, st = -1;
	size_t total = 0;
	ssize_t r;
	pid_t pid;

	/* a pipe takes 64 KiB at a time: 1 MiB goes out in short writes */
	memset(big, 'x', sizeof big);
	REQUIRE(pipe(fds) == 0);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		_exit(util_write_all(fds[1], big, sizeof big) == 0 ? 0 : 1);
	}
	close(fds[1]);
	while ((r = read(fds[0], big, sizeof big)) > 0)
		total += (size_t)r;
	close(fds[0]);
	CHECK_INT((int)total, (int)sizeof big);
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
	    WEXITSTATUS(st) == 0);

	snprintf(path, sizeof path, "%s/base-write-all", dir ? dir : "/tmp");
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	REQUIRE(fd >= 0);
	CHECK_INT(util_write_all(fd, "0123456789", 10), 0);
	CHECK_INT(util_pwrite_all(fd, "ab", 2, 3), 0);
	CHECK_INT((int)lseek(fd, 0, SEEK_CUR), 10);	/* offset untouched */
	CHECK_INT((int)pread(fd, got, 10, 0), 10);
	CHECK_STR(got, "012ab56789");
	errno = 0;
	CHECK_INT(util_pwrite_all(fd, "ab", 2, -1), -1);
	CHECK_INT(errno, EINVAL);
	close(fd);
	remove(path);
	CHECK_INT(util_write_all(fd, "x", 1), -1);	/* closed: EBADF */
	CHECK_INT(errno, EBADF);
}

static void *
named_thread(void *arg)
{
	util_thread_name(arg);
	pthread_getname_np(pthread_self(), (char *)arg, 16);
	return NULL;
}

/* A thread's name is "cairn-<role>", cut to what the kernel keeps. */
static void
test_thread_name(void)
{
	char a[32] = "list", b[32] = "a-much-longer-role";
	pthread_t t;

	REQUIRE(pthread_create(&t, NULL, named_thread, a) == 0);
	pthread_join(t, NULL);
	CHECK_STR(a, "cairn-list");
	REQUIRE(pthread_create(&t, NULL, named_thread, b) == 0);
	pthread_join(t, NULL);
	CHECK_STR(b, "cairn-a-much-lo");
}

/* Issue 18: strings holding U+0000 survive parse and print byte for byte. */
static void
test_json_nul_strings(void)
{
	static const char *const docs[] = {
		"{\"a\":\"x\\u0000y\",\"b\":\"\\u0000\"}",
		"{\"k\\u0000ey\":[\"\\u0000\\u0000\",\"tail\\u0000\"]}",
		/* U+10FFFF raw and escaped, next to NULs */
		"{\"s\":\"\xf4\x8f\xbf\xbf\",\"t\":\"\xf4\x8f\xbf\xbf\\u0000\xf4\x8f\xbf\xbf\"}",
		"{\"e\":\"\\udbff\\udfff\\u0000\"}",
		/* an escaped backslash then "u0000": no NUL at all */
		"{\"lit\":\"\\\\u0000\",\"n\":\"\\u0000\"}",
		NULL
	};
	/* what json_print gives back (escaped U+10FFFF comes back raw) */
	static const char *const want[] = {
		"{\"a\":\"x\\u0000y\",\"b\":\"\\u0000\"}",
		"{\"k\\u0000ey\":[\"\\u0000\\u0000\",\"tail\\u0000\"]}",
		"{\"s\":\"\xf4\x8f\xbf\xbf\",\"t\":\"\xf4\x8f\xbf\xbf\\u0000\xf4\x8f\xbf\xbf\"}",
		"{\"e\":\"\xf4\x8f\xbf\xbf\\u0000\"}",
		"{\"lit\":\"\\\\u0000\",\"n\":\"\\u0000\"}",
	};
	struct cairn_err err = CAIRN_ERR_INIT;

	for (int i = 0; docs[i] != NULL; i++) {
		cJSON *j = json_parse(docs[i], strlen(docs[i]), &err), *d;
		char *t, *t2;

		REQUIRE(j != NULL);
		t = json_print(j);
		CHECK_STR(t, want[i]);
		/* a copy compares equal, a copy with the NUL string cut does not */
		d = json_parse(t, strlen(t), &err);
		REQUIRE(d != NULL);
		CHECK(cJSON_Compare(j, d, 1));
		t2 = json_print(d);
		CHECK_STR(t2, want[i]);
		free(t2);
		free(t);
		cJSON_Delete(d);
		cJSON_Delete(j);
	}
	{
		const char *a = "{\"a\":\"x\\u0000y\"}", *b = "{\"a\":\"x\\u0000z\"}";
		cJSON *ja = json_parse(a, strlen(a), &err);
		cJSON *jb = json_parse(b, strlen(b), &err);

		CHECK(!cJSON_Compare(ja, jb, 1));
		cJSON_Delete(ja);
		cJSON_Delete(jb);
	}
	CHECK_INT(json_depth("[[{\"a\":[1]}]]", 13), 4);
	CHECK_INT(json_depth(" 12", 3), 0);
}

int
main(void)
{
	RUN(test_err_set_prefix);
	RUN(test_buf_cap);
	RUN(test_buf_take);
	RUN(test_time_format);
	RUN(test_time_parse);
	RUN(test_duration);
	RUN(test_time_deadline);
	RUN(test_flags_parse);
	RUN(test_flags_errors);
	RUN(test_escape);
	RUN(test_glob_split);
	RUN(test_json_paths);
	RUN(test_json_parse_members);
	RUN(test_json_nul_strings);
	RUN(test_json_parse_members_stop);
	RUN(test_json_parse_members_nested);
	RUN(test_json_parse_members_fence);
	RUN(test_json_parse_member_paths);
	RUN(test_json_parse_member);
	RUN(test_json_string_end);
	RUN(test_json_string_end_random);
	RUN(test_log_config);
	RUN(test_uuid);
	RUN(test_utf8);
	RUN(test_b64);
	RUN(test_yaml);
	RUN(test_yaml_alias_budget);
	RUN(test_read_file);
	RUN(test_write_all);
	RUN(test_thread_name);
	return unit_done();
}
