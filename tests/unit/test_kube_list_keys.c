/*
 * test_kube_list_keys.c: a list delivers each item once, in key order,
 * when pages break or continue tokens expire while objects come and go.
 *
 * The fake API server (unit_http.h) keeps one collection of ConfigMaps
 * sorted in etcd's key order and answers pages as kubesim does (a
 * continue token names the last key of its page; the next page is the
 * current state after it). A test can cut a page after N items (headers
 * and part of the body, then the connection closes), change the
 * collection before the next request (an object deleted or created
 * between the broken page and its retry), and expire every token issued
 * so far (410 Expired, with or without the inconsistent continue token a
 * real API server puts in the Status).
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/jsonutil.h"
#include "base/mem.h"
#include "kube/kube.h"
#include "unit.h"
#include "unit_http.h"
#include "unit_kube.h"

#define MAXI 128

struct it {
	char ns[32];
	char name[32];
};

static struct {
	pthread_mutex_t mu;
	struct it v[MAXI];
	int n;
	int gen;		/* tokens carry it */
	int expire_below;	/* tokens of older generations: 410 */
	int inconsistent;	/* the 410 carries a continue token */
	int always_gone;	/* every continued request: 410 */
	int cut_items;		/* cut the next list reply after N items */
	void (*on_cut)(void);	/* run before the request after a cut */
	void (*pending)(void);
	void (*on_continue)(void);	/* run before the first continued page */
	int gone_replies;
} fk;

static int
it_cmp(const struct it *a, const struct it *b)
{
	return kube_key_cmp(a->ns, a->name, b->ns, b->name);
}

/* Insert (sorted) or delete ns/name; the caller holds fk.mu. */
static void
fk_put(const char *ns, const char *name)
{
	struct it x;
	int i;

	memset(&x, 0, sizeof x);
	snprintf(x.ns, sizeof x.ns, "%s", ns);
	snprintf(x.name, sizeof x.name, "%s", name);
	for (i = 0; i < fk.n && it_cmp(&fk.v[i], &x) < 0; i++)
		;
	if (i < fk.n && it_cmp(&fk.v[i], &x) == 0)
		return;
	memmove(&fk.v[i + 1], &fk.v[i], (size_t)(fk.n - i) * sizeof x);
	fk.v[i] = x;
	fk.n++;
}

static void
fk_del(const char *ns, const char *name)
{
	for (int i = 0; i < fk.n; i++) {
		if (strcmp(fk.v[i].ns, ns) == 0 &&
		    strcmp(fk.v[i].name, name) == 0) {
			memmove(&fk.v[i], &fk.v[i + 1], (size_t)(fk.n - i - 1) *
			    sizeof fk.v[0]);
			fk.n--;
			return;
		}
	}
}

static void
fk_reset(void)
{
	static const char *const names[] = { "a", "b", "c", "d", "e", "f", "g",
	    "h", "i", "j" };

	pthread_mutex_lock(&fk.mu);
	fk.n = 0;
	fk.gen = 1;
	fk.expire_below = 0;
	fk.inconsistent = 0;
	fk.always_gone = 0;
	fk.cut_items = 0;
	fk.on_cut = fk.pending = fk.on_continue = NULL;
	fk.gone_replies = 0;
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		fk_put("n", names[i]);
	pthread_mutex_unlock(&fk.mu);
	uh_log_clear();
}

/* Token "g<gen>~<ns>~<name>": continue after that key. */
static int
parse_token(const char *t, int *gen, struct it *after)
{
	char buf[128], *a, *b;

	snprintf(buf, sizeof buf, "%s", t);
	if (buf[0] != 'g' || (a = strchr(buf, '~')) == NULL ||
	    (b = strchr(a + 1, '~')) == NULL)
		return -1;
	*a = *b = '\0';
	*gen = atoi(buf + 1);
	memset(after, 0, sizeof *after);
	snprintf(after->ns, sizeof after->ns, "%s", a + 1);
	snprintf(after->name, sizeof after->name, "%s", b + 1);
	return 0;
}

static void
handler(void *arg, const struct uh_req *rq, struct uh_resp *rs)
{
	char lim[16], tok[128];
	struct it after;
	struct buf b;
	int limit = 500, gen = 0, start = 0, cut = 0, i, n;
	size_t cut_at = 0;

	(void)arg;
	if (strcmp(rq->path, "/api/v1/configmaps") != 0) {
		rs->code = 404;
		uh_body(rs, "{\"kind\":\"Status\",\"code\":404}");
		return;
	}
	pthread_mutex_lock(&fk.mu);
	if (fk.pending != NULL) {
		fk.pending();
		fk.pending = NULL;
	}
	if (uh_qparam(rq->query, "limit", lim, sizeof lim) != NULL)
		limit = atoi(lim);
	if (uh_qparam(rq->query, "continue", tok, sizeof tok) != NULL) {
		if (fk.on_continue != NULL) {
			fk.on_continue();
			fk.on_continue = NULL;
		}
		if (parse_token(tok, &gen, &after) < 0) {
			rs->code = 400;
			uh_body(rs, "{\"kind\":\"Status\",\"code\":400}");
			goto out;
		}
		if (gen < fk.expire_below || fk.always_gone) {
			char body[512];

			fk.gone_replies++;
			rs->code = 410;
			snprintf(body, sizeof body, "{\"kind\":\"Status\","
			    "\"apiVersion\":\"v1\",\"metadata\":{%s%d~%s~%s%s},"
			    "\"status\":\"Failure\",\"message\":\"The provided "
			    "continue parameter is too old\",\"reason\":"
			    "\"Expired\",\"code\":410}", fk.inconsistent ?
			    "\"continue\":\"g" : "", fk.gen, after.ns,
			    after.name, fk.inconsistent ? "\"" : "");
			if (!fk.inconsistent)	/* no token: empty metadata */
				snprintf(body, sizeof body, "{\"kind\":\"Status\","
				    "\"apiVersion\":\"v1\",\"metadata\":{},"
				    "\"status\":\"Failure\",\"reason\":"
				    "\"Expired\",\"code\":410}");
			uh_body(rs, body);
			goto out;
		}
		for (start = 0; start < fk.n && it_cmp(&fk.v[start], &after) <=
		    0; start++)
			;
	}
	buf_init(&b, 1u << 20);
	buf_printf(&b, "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\","
	    "\"metadata\":{\"resourceVersion\":\"%d\"", 100 + fk.gen);
	n = fk.n - start < limit ? fk.n - start : limit;
	if (start + n < fk.n)
		buf_printf(&b, ",\"continue\":\"g%d~%s~%s\","
		    "\"remainingItemCount\":%d", fk.gen, fk.v[start + n - 1].ns,
		    fk.v[start + n - 1].name, fk.n - start - n);
	buf_puts(&b, "},\"items\":[");
	for (i = 0; i < n; i++) {
		const struct it *x = &fk.v[start + i];

		buf_printf(&b, "%s{\"metadata\":{\"name\":\"%s\","
		    "\"namespace\":\"%s\"},\"data\":{\"k\":\"%s/%s\"}}",
		    i ? "," : "", x->name, x->ns, x->ns, x->name);
		if (fk.cut_items > 0 && i + 1 == fk.cut_items) {
			cut = 1;
			cut_at = b.len;
		}
	}
	buf_puts(&b, "]}");
	rs->code = 200;
	uh_body(rs, buf_cstr(&b));
	buf_free(&b);
	if (cut) {
		rs->cut = cut_at;
		fk.cut_items = 0;
		fk.pending = fk.on_cut;
	}
out:
	pthread_mutex_unlock(&fk.mu);
}

/* ---- the client side ---- */

#define MAXGOT 256

static struct {
	char key[MAXGOT][80];
	int n;
	int at;			/* run hook after this many items */
	void (*hook)(void);
} got;

static int
on_item(void *arg, cJSON *item)
{
	(void)arg;
	if (got.n >= MAXGOT)
		return CAIRN_EFAIL;
	snprintf(got.key[got.n], sizeof got.key[0], "%s/%s",
	    json_str_or(item, "metadata.namespace", ""),
	    json_str_or(item, "metadata.name", ""));
	got.n++;
	if (got.hook != NULL && got.n == got.at) {
		pthread_mutex_lock(&fk.mu);
		got.hook();
		pthread_mutex_unlock(&fk.mu);
	}
	return 0;
}

static int
on_text(void *arg, cJSON *item, const char *text, size_t len)
{
	(void)text;
	(void)len;
	return on_item(arg, item);
}

/* The keys delivered, joined by ' '. */
static const char *
got_str(void)
{
	static char s[MAXGOT * 8];

	s[0] = '\0';
	for (int i = 0; i < got.n; i++) {
		const char *k = strchr(got.key[i], '/') + 1;

		if (strlen(s) + strlen(k) + 2 < sizeof s) {
			if (i)
				strcat(s, " ");
			strcat(s, k);
		}
	}
	return s;
}

static unsigned port_;
static struct kube *kube_;

static int
list(int limit, int gone, int prefetch, int text, struct kube_list_info *info)
{
	static const char *const members[] = { "metadata.labels", NULL };
	struct kube_gvr g = { "", "v1", "configmaps" };
	struct kube_list_opts lo;
	struct cairn_err err = CAIRN_ERR_INIT;
	int rc;

	memset(&lo, 0, sizeof lo);
	lo.limit = limit;
	lo.restart_on_gone = gone;
	lo.prefetch = prefetch;
	if (text)
		lo.parse_only = members;	/* the key is parsed anyway */
	got.n = 0;
	rc = text ? kube_list_text(kube_, &g, NULL, &lo, on_text, NULL, info,
	    &err) : kube_list(kube_, &g, NULL, &lo, on_item, NULL, info, &err);
	if (rc < 0)
		fprintf(stderr, "list: %s\n", err.msg);
	return rc;
}

static void
test_key_order(void)
{
	/* etcd's order: the bytes of "ns/name", not (ns, name) in turn */
	CHECK(kube_key_cmp("a-b", "x", "a", "x") < 0);
	CHECK(kube_key_cmp("a", "x", "a-b", "a") > 0);
	CHECK(kube_key_cmp("a", "x", "a0", "a") < 0);
	CHECK(kube_key_cmp("a", "x", "a", "y") < 0);
	CHECK(kube_key_cmp("ns", "n", "ns", "n") == 0);
	CHECK(kube_key_cmp("b", "a", "a", "z") > 0);
	/* cluster-scoped: by name */
	CHECK(kube_key_cmp("", "pv-2", NULL, "pv-10") > 0);
	CHECK(kube_key_cmp(NULL, "a", "", "a") == 0);
}

static void del_b(void) { fk_del("n", "b"); }
static void del_f(void) { fk_del("n", "f"); }
static void ins_aa(void) { fk_put("n", "aa"); }
static void ins_ee(void) { fk_put("n", "ee"); }
static void arm_cut2(void) { fk.cut_items = 2; }

/* A first page cut after 3 items; b deleted before it is fetched again. */
static void
test_cut_first_page_earlier_deleted(void)
{
	struct kube_list_info info;

	for (int text = 0; text < 2; text++) {
		fk_reset();
		fk.cut_items = 3;
		fk.on_cut = del_b;
		REQUIRE(list(5, 0, 0, text, &info) == 0);
		/* by count, the retry would skip a c d and lose d */
		CHECK_STR(got_str(), "a b c d e f g h i j");
		CHECK_INT(info.items, 10);
		CHECK_INT(uh_log_count_exact("GET /api/v1/configmaps?limit=5"),
		    2);	/* the cut page and its retry */
	}
}

/* The same with aa created before it: aa was passed, c is not repeated. */
static void
test_cut_first_page_earlier_inserted(void)
{
	struct kube_list_info info;

	fk_reset();
	fk.cut_items = 3;
	fk.on_cut = ins_aa;
	REQUIRE(list(5, 0, 0, 0, &info) == 0);
	CHECK_STR(got_str(), "a b c d e f g h i j");
}

/*
 * A continued page (f..j) cut after g; f deleted, or ee created before
 * the page is fetched again: h is neither lost nor g repeated.
 */
static void
test_cut_continued_page(void)
{
	struct kube_list_info info;
	void (*change[2])(void) = { del_f, ins_ee };

	for (int i = 0; i < 2; i++) {
		fk_reset();
		fk.on_cut = change[i];
		got.at = 5;		/* page 1 delivered: cut page 2 */
		got.hook = arm_cut2;
		REQUIRE(list(5, 0, 0, 0, &info) == 0);
		got.hook = NULL;
		CHECK_STR(got_str(), "a b c d e f g h i j");
	}
}

static void
expire_all(void)
{
	fk.gen++;
	fk.expire_below = fk.gen;
}

/*
 * The token of page 2 expires before page 2 is asked for (page 1 is
 * being processed, or the pages are fetched ahead); meanwhile bb (before
 * the list's place) and zz are created and e deleted.
 */
static void
change_and_expire(void)
{
	expire_all();
	fk_put("n", "bb");
	fk_put("n", "zz");
	fk_del("n", "e");
}

static void
test_gone_resume(void)
{
	struct kube_list_info info;

	for (int mode = 0; mode < 4; mode++) {
		int inconsistent = mode & 1, prefetch = (mode >> 1) & 1;

		fk_reset();
		fk.inconsistent = inconsistent;
		fk.on_continue = change_and_expire;
		REQUIRE(list(3, KUBE_GONE_RESUME, prefetch, prefetch, &info) ==
		    0);
		CHECK_STR(got_str(), "a b c d f g h i j zz");
		CHECK_INT(info.restarts, 1);
		/* without the Status's token: a new list from the start */
		CHECK_INT(uh_log_count_exact("GET /api/v1/configmaps?limit=3"),
		    inconsistent ? 1 : 2);
	}
}

/* KUBE_GONE_FAIL: CAIRN_EGONE after what was delivered. */
static void
test_gone_fail(void)
{
	struct kube_list_info info;

	fk_reset();
	got.at = 3;
	got.hook = expire_all;
	CHECK(list(3, KUBE_GONE_FAIL, 0, 0, &info) == CAIRN_EGONE);
	got.hook = NULL;
	CHECK_STR(got_str(), "a b c");
}

/* A server that expires every token at once: no endless loop. */
static void
test_gone_every_time(void)
{
	struct kube_list_info info;

	fk_reset();
	fk.always_gone = 1;
	fk.inconsistent = 1;
	CHECK(list(3, KUBE_GONE_RESUME, 0, 0, &info) == CAIRN_EGONE);
	CHECK_STR(got_str(), "a b c");
	CHECK_INT(fk.gone_replies, 4);
}

int
main(void)
{
	struct kube_client_opts ko;

	pthread_mutex_init(&fk.mu, NULL);
	memset(&ko, 0, sizeof ko);
	ko.timeout_us = 3 * TIME_US_PER_SEC;
	ko.max_retries = 3;		/* a broken page is fetched again */
	if (uh_start(handler, NULL, &port_) < 0 ||
	    (kube_ = unit_kube_opts(port_, NULL, "list-keys", &ko)) == NULL) {
		printf("FAIL: test_kube_list_keys.c:setup\n");
		return 1;
	}
	RUN(test_key_order);
	RUN(test_cut_first_page_earlier_deleted);
	RUN(test_cut_first_page_earlier_inserted);
	RUN(test_cut_continued_page);
	RUN(test_gone_resume);
	RUN(test_gone_fail);
	RUN(test_gone_every_time);
	kube_free(kube_);
	uh_stop();
	return unit_done();
}
