/* test_cmd_output.c: tables, YAML quoting, ages and progress lines of the CLI. */
#include "config.h"
#include "cmd/output.h"
#include "cmd/progress.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "tests/unit/unit.h"

#include <stdlib.h>
#include <string.h>

static char *
read_stream(FILE *f)
{
	long n;
	char *s;

	fflush(f);
	n = ftell(f);
	rewind(f);
	s = xmalloc((size_t)n + 1);
	s[fread(s, 1, (size_t)n, f)] = '\0';
	return s;
}

static void
test_durations(void)
{
	static const struct { int64_t s; const char *want; } cases[] = {
		{ -5, "<invalid>" }, { -1, "0s" }, { 0, "0s" }, { 45, "45s" },
		{ 119, "119s" }, { 120, "2m" }, { 330, "5m30s" }, { 600, "10m" },
		{ 179 * 60, "179m" }, { 3 * 3600, "3h" }, { 3 * 3600 + 60, "3h1m" },
		{ 8 * 3600 + 60, "8h" }, { 47 * 3600, "47h" }, { 48 * 3600, "2d" },
		{ 52 * 3600, "2d4h" }, { 8 * 86400, "8d" }, { 400 * 86400, "400d" },
		{ 730 * 86400, "2y" }, { 750 * 86400, "2y20d" },
		{ 3000 * 86400LL, "8y" },
	};
	char out[OUT_AGE_MAX];

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		out_duration(cases[i].s * TIME_US_PER_SEC, out);
		CHECK_STR(out, cases[i].want);
	}
	out_age("2026-12-02T12:00:00Z", 1796213100LL * TIME_US_PER_SEC, out);
	CHECK_STR(out, "5m");
	out_age("not a time", 0, out);
	CHECK_STR(out, "<unknown>");
	out_age(NULL, 0, out);
	CHECK_STR(out, "<unknown>");
}

static void
test_table(void)
{
	FILE *f = tmpfile();
	struct out_table *t;
	char *s;

	REQUIRE(f != NULL);
	t = out_table_new((const char *const[]){ "NAME", "STATUS", "HOLDER",
	    NULL });
	out_table_row(t, (const char *const[]){ "b1", "Completed", "srv-a" });
	out_table_row(t, (const char *const[]){ "long-name", "New", "" });
	out_table_row(t, (const char *const[]){ "x\n\033[2J", "é", "z" });
	CHECK_INT(out_table_rows(t), 3);
	out_table_print(t, f);
	out_table_free(t);
	s = read_stream(f);
	CHECK_STR(s,
	    "NAME         STATUS      HOLDER\n"
	    "b1           Completed   srv-a\n"
	    "long-name    New\n"
	    "x\\n\\x1b[2J   é           z\n");
	free(s);
	fclose(f);
}

static void
test_yaml_quoting(void)
{
	const char *json = "{\"name\":\"b1\",\"t\":\"true\",\"n\":\"123\","
	    "\"ts\":\"2026-12-02T12:00:00Z\",\"e\":\"\",\"nul\":\"null\","
	    "\"num\":42,\"f\":1.5,\"b\":false,\"z\":null,\"list\":[\"a\",1],"
	    "\"empty\":{},\"none\":[],\"nested\":{\"k\":\"v: x\"},"
	    "\"ttl\":\"720h\",\"hex\":\"9f3e\",\"ver\":\"1.1.0\",\"neg\":\"-5\","
	    "\"ninf\":\"-.inf\"}";
	cJSON *obj = cJSON_Parse(json);
	struct cairn_err err = CAIRN_ERR_INIT;
	struct buf b;

	REQUIRE(obj != NULL);
	buf_init(&b, 1 << 16);
	CHECK_INT(out_yaml(&b, obj, &err), 0);
	CHECK_STR(buf_cstr(&b),
	    "name: b1\n"
	    "t: 'true'\n"
	    "'n': '123'\n"
	    "ts: '2026-12-02T12:00:00Z'\n"
	    "e: ''\n"
	    "nul: 'null'\n"
	    "num: 42\n"
	    "f: 1.5\n"
	    "b: false\n"
	    "z: null\n"
	    "list:\n"
	    "- a\n"
	    "- 1\n"
	    "empty: {}\n"
	    "none: []\n"
	    "nested:\n"
	    "  k: 'v: x'\n"
	    "ttl: 720h\n"
	    "hex: '9f3e'\n"
	    "ver: '1.1.0'\n"
	    "neg: '-5'\n"
	    "ninf: '-.inf'\n");
	buf_free(&b);
	/* The cap is an error, not a crash. */
	buf_init(&b, 16);
	CHECK_INT(out_yaml(&b, obj, &err), CAIRN_ETOOBIG);
	buf_free(&b);
	buf_init(&b, 1 << 16);
	CHECK_INT(out_json(&b, obj, &err), 0);
	CHECK(strstr(buf_cstr(&b), "\n  \"name\": \"b1\",\n") != NULL);
	buf_free(&b);
	cJSON_Delete(obj);
}

static void
test_format_names(void)
{
	enum out_format f;
	struct cairn_err err = CAIRN_ERR_INIT;

	CHECK_INT(out_parse_format("json", &f, &err), 0);
	CHECK_INT(f, OUT_JSON);
	CHECK_INT(out_parse_format("yaml", &f, &err), 0);
	CHECK_INT(f, OUT_YAML);
	CHECK_INT(out_parse_format("table", &f, &err), 0);
	CHECK_INT(f, OUT_TABLE);
	CHECK_INT(out_parse_format("xml", &f, &err), CAIRN_EINVAL);
	CHECK(strstr(err.msg, "xml") != NULL);
}

static void
test_progress_plain(void)
{
	FILE *f = tmpfile();
	struct progress *p;
	struct progress_state st = { "InProgress", 10, 100, 4096, -1,
		"holder srv-a" };
	char *s;

	REQUIRE(f != NULL);
	p = progress_new(f, PROGRESS_PLAIN, "backup b1");
	CHECK_INT(progress_mode(p), PROGRESS_PLAIN);
	progress_update(p, &st);
	/* Same phase and detail within the interval: no new line. */
	st.done = 20;
	progress_update(p, &st);
	/* A new detail is printed at once. */
	st.detail = "holder srv-b, attempt 2";
	progress_update(p, &st);
	progress_note(p, "a note");
	st.done = 100;
	st.phase = "Completed";
	progress_end(p, &st);
	progress_free(p);
	s = read_stream(f);
	CHECK_STR(s,
	    "backup b1: InProgress, 10/100 items, 4.0 KiB (10%), holder srv-a\n"
	    "backup b1: InProgress, 20/100 items, 4.0 KiB (20%), holder srv-b, attempt 2\n"
	    "a note\n"
	    "backup b1: Completed, 100/100 items, 4.0 KiB (100%), holder srv-b, attempt 2\n");
	free(s);
	fclose(f);
}

static void
test_progress_tty(void)
{
	FILE *f = tmpfile();
	struct progress *p;
	struct progress_state st = { "InProgress", 6, 24, -1, -1, NULL };
	char line[PROGRESS_LINE_MAX];
	char *s;

	REQUIRE(f != NULL);
	setenv("COLUMNS", "60", 1);
	p = progress_new(f, PROGRESS_TTY, "backup b1");
	progress_format(p, &st, 0, line, sizeof line);
	CHECK_STR(line, "backup b1 InProgress [######..................]  "
	    "25% 6/24 items");
	progress_format(p, &st, 20, line, sizeof line);
	CHECK_INT(strlen(line), 20);
	progress_free(p);
	/* A cut never splits a UTF-8 character; width counts characters. */
	p = progress_new(f, PROGRESS_TTY, "sauvegarde \xc3\xa9t\xc3\xa9");
	progress_format(p, &st, 12, line, sizeof line);
	CHECK_STR(line, "sauvegarde \xc3\xa9");
	progress_format(p, &st, 40, line, 13);
	CHECK_STR(line, "sauvegarde ");
	progress_update(p, &st);
	st.phase = "Completed";
	st.done = 24;
	progress_end(p, &st);
	progress_free(p);
	s = read_stream(f);
	CHECK(strstr(s, "[########################] 100%") != NULL);
	CHECK(strncmp(s, "\r\033[K", 4) == 0);
	CHECK(strstr(s, "Completed") != NULL);
	CHECK(s[strlen(s) - 1] == '\n');
	free(s);
	fclose(f);
}

int
main(void)
{
	RUN(test_durations);
	RUN(test_table);
	RUN(test_yaml_quoting);
	RUN(test_format_names);
	RUN(test_progress_plain);
	RUN(test_progress_tty);
	return unit_done();
}
