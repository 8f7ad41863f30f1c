/*
 * test_kube_lists.c: several lists fetched at once (kube/lists.c) give
 * each list's items exactly as one list at a time would: same items,
 * same order, each once, whatever the concurrency, the page sizes, the
 * memory bounds, broken pages and expired tokens; and more than one
 * request is in flight while they are fetched.
 *
 * The fake API server (unit_http.h, a thread per connection) serves
 * ConfigMaps and Secrets per namespace (built-in lists: metadata before
 * items), Widgets of x.io (a custom resource list: keys sorted, metadata
 * after items) and Namespaces by name. Tokens name the last key of their
 * page and the generation they were issued in, as in
 * test_kube_list_keys.c.
 */
#include "config.h"

#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/jsonutil.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "kube/kube.h"
#include "unit.h"
#include "unit_http.h"
#include "unit_kube.h"

#define NCOLL 9
#define MAXN 64

static const char *const nss[] = { "ns-a", "ns-b", "ns-c" };
static const char *const res[] = { "configmaps", "secrets", "widgets" };

struct coll {
	char ns[16];
	int res;			/* index into res[] */
	char names[MAXN][16];		/* sorted */
	int n;
};

static struct {
	pthread_mutex_t mu;
	struct coll c[NCOLL];
	size_t pad;			/* bytes of data per item */
	int64_t delay_us;		/* each reply */
	int gen, expire_below, inconsistent;
	int cut_coll, cut_items;	/* cut the next page of c after N */
	int expire_coll, expire_at;	/* expire tokens at that request */
	int deep;			/* i01 of ns-a's configmaps nests 600 deep */
	void (*on_cut)(void);
	void (*pending)(void);
	int requests[NCOLL];		/* list requests per collection */
} fk;

static void
coll_put(struct coll *c, const char *name)
{
	int i;

	for (i = 0; i < c->n && strcmp(c->names[i], name) < 0; i++)
		;
	if (i < c->n && strcmp(c->names[i], name) == 0)
		return;
	memmove(c->names[i + 1], c->names[i], (size_t)(c->n - i) *
	    sizeof c->names[0]);
	snprintf(c->names[i], sizeof c->names[i], "%s", name);
	c->n++;
}

static void
coll_del(struct coll *c, const char *name)
{
	for (int i = 0; i < c->n; i++)
		if (strcmp(c->names[i], name) == 0) {
			memmove(c->names[i], c->names[i + 1], (size_t)(c->n -
			    i - 1) * sizeof c->names[0]);
			c->n--;
			return;
		}
}

/* Collection i holds counts[i] items i00, i01... */
static void
fk_reset(const int *counts, size_t pad)
{
	pthread_mutex_lock(&fk.mu);
	for (int i = 0; i < NCOLL; i++) {
		struct coll *c = &fk.c[i];

		snprintf(c->ns, sizeof c->ns, "%s", nss[i / 3]);
		c->res = i % 3;
		c->n = 0;
		for (int k = 0; k < counts[i]; k++) {
			char nm[16];

			snprintf(nm, sizeof nm, "i%02d", k);
			coll_put(c, nm);
		}
		fk.requests[i] = 0;
	}
	fk.pad = pad;
	fk.delay_us = 0;
	fk.gen = 1;
	fk.expire_below = 0;
	fk.inconsistent = 1;
	fk.cut_coll = -1;
	fk.cut_items = 0;
	fk.expire_coll = -1;
	fk.deep = 0;
	fk.on_cut = fk.pending = NULL;
	pthread_mutex_unlock(&fk.mu);
	uh_log_clear();
}

static int
find_coll(const char *path)
{
	for (int i = 0; i < NCOLL; i++) {
		char want[128];

		snprintf(want, sizeof want, fk.c[i].res == 2 ?
		    "/apis/x.io/v1/namespaces/%s/widgets" :
		    "/api/v1/namespaces/%s/%s", fk.c[i].ns, res[fk.c[i].res]);
		if (strcmp(path, want) == 0)
			return i;
	}
	return -1;
}

static void
item(struct buf *b, const struct coll *c, const char *name)
{
	if (c->res == 2)
		buf_printf(b, "{\"apiVersion\":\"x.io/v1\",\"kind\":\"Widget\",");
	else
		buf_putc(b, '{');
	buf_printf(b, "\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\"},"
	    "\"data\":{\"k\":\"%s/%s/", name, c->ns, c->ns, name);
	for (size_t i = 0; i < fk.pad; i++)
		buf_putc(b, (char)('a' + (i % 26)));
	buf_puts(b, "\"");
	if (fk.deep && c == &fk.c[0] && strcmp(name, "i01") == 0) {
		buf_puts(b, ",\"deep\":");
		for (int i = 0; i < 600; i++)
			buf_putc(b, '[');
		for (int i = 0; i < 600; i++)
			buf_putc(b, ']');
	}
	buf_puts(b, "}}");
}

static void
expire_all(void)
{
	fk.gen++;
	fk.expire_below = fk.gen;
	coll_put(&fk.c[0], "i000");	/* before the list's place: not seen */
	coll_put(&fk.c[0], "i99");	/* after it: seen */
	coll_del(&fk.c[0], "i05");	/* not yet listed: gone */
}

static void
handler(void *arg, const struct uh_req *rq, struct uh_resp *rs)
{
	char lim[16], tok[128], meta[256];
	struct buf b;
	struct coll *c;
	int ci, limit = 500, start = 0, n, cut = 0;
	size_t cut_at = 0;

	(void)arg;
	pthread_mutex_lock(&fk.mu);
	rs->delay_us = fk.delay_us;
	if (fk.pending != NULL) {
		fk.pending();
		fk.pending = NULL;
	}
	if (strncmp(rq->path, "/api/v1/namespaces/", 19) == 0 &&
	    strchr(rq->path + 19, '/') == NULL) {
		const char *nm = rq->path + 19;

		if (strcmp(nm, "ns-a") == 0 || strcmp(nm, "ns-b") == 0 ||
		    strcmp(nm, "ns-c") == 0) {
			char o[256];

			snprintf(o, sizeof o, "{\"kind\":\"Namespace\","
			    "\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"%s\"}}",
			    nm);
			uh_body(rs, o);
		} else {
			rs->code = 404;
			uh_body(rs, "{\"kind\":\"Status\",\"code\":404,"
			    "\"reason\":\"NotFound\"}");
		}
		goto out;
	}
	ci = find_coll(rq->path);
	if (ci < 0) {
		rs->code = 404;
		uh_body(rs, "{\"kind\":\"Status\",\"code\":404}");
		goto out;
	}
	c = &fk.c[ci];
	fk.requests[ci]++;
	if (ci == fk.expire_coll && fk.requests[ci] == fk.expire_at)
		expire_all();
	if (uh_qparam(rq->query, "limit", lim, sizeof lim) != NULL)
		limit = atoi(lim);
	if (uh_qparam(rq->query, "continue", tok, sizeof tok) != NULL) {
		char *t = strchr(tok, '~');
		int gen = atoi(tok + 1);

		if (t == NULL) {
			rs->code = 400;
			uh_body(rs, "{\"kind\":\"Status\",\"code\":400}");
			goto out;
		}
		if (gen < fk.expire_below) {
			char body[512];

			rs->code = 410;
			snprintf(body, sizeof body, "{\"kind\":\"Status\","
			    "\"apiVersion\":\"v1\",\"metadata\":{%s%d~%s%s},"
			    "\"reason\":\"Expired\",\"code\":410}",
			    fk.inconsistent ? "\"continue\":\"g" : "", fk.gen,
			    t + 1, fk.inconsistent ? "\"" : "");
			if (!fk.inconsistent)
				snprintf(body, sizeof body, "{\"kind\":\"Status\","
				    "\"metadata\":{},\"reason\":\"Expired\","
				    "\"code\":410}");
			uh_body(rs, body);
			goto out;
		}
		for (start = 0; start < c->n && strcmp(c->names[start], t + 1) <=
		    0; start++)
			;
	}
	n = c->n - start < limit ? c->n - start : limit;
	meta[0] = '\0';
	if (start + n < c->n)
		snprintf(meta, sizeof meta, ",\"continue\":\"g%d~%s\","
		    "\"remainingItemCount\":%d", fk.gen, c->names[start + n - 1],
		    c->n - start - n);
	buf_init(&b, 64u << 20);
	if (c->res == 2)
		buf_puts(&b, "{\"apiVersion\":\"x.io/v1\",\"items\":[");
	else
		buf_printf(&b, "{\"kind\":\"%sList\",\"apiVersion\":\"v1\","
		    "\"metadata\":{\"resourceVersion\":\"%d\"%s},\"items\":[",
		    c->res == 0 ? "ConfigMap" : "Secret", 100 + fk.gen, meta);
	for (int i = 0; i < n; i++) {
		if (i)
			buf_putc(&b, ',');
		item(&b, c, c->names[start + i]);
		if (fk.cut_coll == ci && i + 1 == fk.cut_items) {
			cut = 1;
			cut_at = b.len;
		}
	}
	buf_putc(&b, ']');
	if (c->res == 2)
		buf_printf(&b, ",\"kind\":\"WidgetList\",\"metadata\":{"
		    "\"resourceVersion\":\"%d\"%s}", 100 + fk.gen, meta);
	buf_putc(&b, '}');
	uh_body(rs, buf_cstr(&b));
	buf_free(&b);
	if (cut) {
		rs->cut = cut_at;
		fk.cut_coll = -1;
		fk.pending = fk.on_cut;
	}
out:
	pthread_mutex_unlock(&fk.mu);
}

/* ---- the client side ---- */

static unsigned port_;
static struct kube *kube_;

static struct {
	struct buf keys;		/* "ns/name " of each item, in order */
	int n;
	int stop_at;			/* > 0: fail the callback at this item */
	int bad;			/* an item's data is not its own */
	int ahead_requests;		/* requests before any take */
	const char *spool_dir;		/* set: watch the spool files there */
	int spool_files;		/* the most open at once */
	int64_t spool_bytes;		/* the most allocated at once */
	int64_t spool_size;		/* the largest file length */
} got;

/*
 * The spool files (cairn-list.*, unlinked) this process has open in
 * got.spool_dir: how many, and the bytes they hold and span.
 */
static int
spool_scan(int64_t *bytes, int64_t *size)
{
	char link[PATH_MAX], fd[300];
	size_t dl = strlen(got.spool_dir);
	struct dirent *e;
	struct stat st;
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	*bytes = *size = 0;
	while (d != NULL && (e = readdir(d)) != NULL) {
		ssize_t k;

		snprintf(fd, sizeof fd, "/proc/self/fd/%s", e->d_name);
		k = readlink(fd, link, sizeof link - 1);
		if (k <= 0)
			continue;
		link[k] = '\0';
		if (strncmp(link, got.spool_dir, dl) != 0 ||
		    strncmp(link + dl, "/cairn-list.", 12) != 0 ||
		    stat(fd, &st) < 0)
			continue;
		n++;
		*bytes += (int64_t)st.st_blocks * 512;
		*size += (int64_t)st.st_size;
	}
	if (d != NULL)
		closedir(d);
	return n;
}

static int
on_text(void *arg, cJSON *it, const char *text, size_t len)
{
	const char *ns = json_str_or(it, "metadata.namespace", "");
	const char *nm = json_str_or(it, "metadata.name", "");
	char want[64];

	(void)arg;
	(void)len;
	got.n++;
	if (got.spool_dir != NULL) {
		int64_t bytes, size;
		int n = spool_scan(&bytes, &size);

		if (n > got.spool_files)
			got.spool_files = n;
		if (bytes > got.spool_bytes)
			got.spool_bytes = bytes;
		if (size > got.spool_size)
			got.spool_size = size;
	}
	if (got.stop_at > 0 && got.n == got.stop_at)
		return CAIRN_EFAIL;
	snprintf(want, sizeof want, "\"k\":\"%s/%s/", ns, nm);
	if (ns[0] != '\0' && strstr(text, want) == NULL)
		got.bad++;
	buf_printf(&got.keys, "%s/%s ", ns, nm);
	return 0;
}

/* What one list at a time gives for collections ids, in this order. */
static const char *
expected(const int *ids, int n)
{
	static struct buf e;

	if (e.cap == 0)
		buf_init(&e, 1u << 20);
	buf_reset(&e);
	pthread_mutex_lock(&fk.mu);
	for (int i = 0; i < n; i++) {
		const struct coll *c = &fk.c[ids[i]];

		for (int k = 0; k < c->n; k++)
			buf_printf(&e, "%s/%s ", c->ns, c->names[k]);
	}
	pthread_mutex_unlock(&fk.mu);
	return buf_cstr(&e);
}

static struct kube_gvr
gvr_of(int ci)
{
	struct kube_gvr g = { "", "v1", res[ci % 3] };

	if (ci % 3 == 2)
		g.group = "x.io";
	return g;
}

static void
got_reset(void)
{
	if (got.keys.cap == 0)
		buf_init(&got.keys, 16u << 20);
	buf_reset(&got.keys);
	got.n = got.stop_at = got.bad = got.ahead_requests = 0;
	got.spool_files = 0;
	got.spool_bytes = got.spool_size = 0;
}

/*
 * Queue every collection (namespace by namespace) and the namespace
 * objects ns-a and ns-x (missing) around them, take them in order; the
 * items as text "ns/name ...". Returns 0 or the first take's error.
 */
static int
run_all(const struct kube_lists_opts *mo, int limit, int wait_ahead)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct kube_list_opts lo;
	struct kube_lists *m = NULL;
	struct kube_gvr nsg = { "", "v1", "namespaces" };
	int ids[NCOLL + 2], rc = 0;

	memset(&lo, 0, sizeof lo);
	lo.limit = limit;
	lo.restart_on_gone = KUBE_GONE_RESUME;
	got_reset();
	if (kube_lists_open(kube_, mo, &m, &err) < 0)
		return CAIRN_EFAIL;
	ids[0] = kube_lists_add_get(m, &nsg, NULL, "ns-a", &lo, 0);
	for (int i = 0; i < NCOLL; i++) {
		struct kube_gvr g = gvr_of(i);

		ids[i + 1] = kube_lists_add(m, &g, fk.c[i].ns, &lo,
		    KUBE_LISTS_COUNT);
	}
	ids[NCOLL + 1] = kube_lists_add_get(m, &nsg, NULL, "ns-x", &lo, 0);
	if (wait_ahead) {	/* let the fetchers run as far as they may */
		usleep(300000);
		got.ahead_requests = uh_log_total();
	}
	for (int i = 0; i < NCOLL + 2 && rc == 0; i++) {
		rc = kube_lists_take(m, ids[i], on_text, NULL, NULL, &err);
		if (rc < 0)
			fprintf(stderr, "take %d: %d %s\n", i, rc, err.msg);
	}
	kube_lists_free(m);
	return rc;
}

static const char *
expected_all(void)
{
	static char s[1 << 20];
	int ids[NCOLL];

	for (int i = 0; i < NCOLL; i++)
		ids[i] = i;
	snprintf(s, sizeof s, "/ns-a %s", expected(ids, NCOLL));
	return s;
}

static const int counts_small[NCOLL] = { 7, 0, 5, 1, 3, 9, 0, 4, 2 };

/* Same items, same order, at every concurrency; requests overlap. */
static void
test_order_any_concurrency(void)
{
	int conc[] = { 1, 2, 4, 8 };

	for (size_t i = 0; i < sizeof conc / sizeof conc[0]; i++) {
		struct kube_lists_opts mo;

		fk_reset(counts_small, 10);
		pthread_mutex_lock(&fk.mu);
		fk.delay_us = 20000;
		pthread_mutex_unlock(&fk.mu);
		uh_threaded(1);
		memset(&mo, 0, sizeof mo);
		mo.concurrency = conc[i];
		REQUIRE(run_all(&mo, 3, 0) == 0);
		CHECK_STR(buf_cstr(&got.keys), expected_all());
		CHECK_INT(got.bad, 0);
		if (conc[i] > 1)
			CHECK(uh_max_inflight() > 1);
		else
			CHECK_INT(uh_max_inflight(), 1);
	}
	uh_threaded(0);
}

/*
 * Pages fetched ahead: every page once (the custom resource lists' tokens
 * come from their last bytes), before anything is taken.
 */
static void
test_ahead_each_page_once(void)
{
	struct kube_lists_opts mo;
	int pages = 0;

	fk_reset(counts_small, 10);
	uh_threaded(1);
	memset(&mo, 0, sizeof mo);
	mo.concurrency = 3;
	REQUIRE(run_all(&mo, 2, 1) == 0);
	CHECK_STR(buf_cstr(&got.keys), expected_all());
	for (int i = 0; i < NCOLL; i++) {
		int want = fk.c[i].n == 0 ? 1 : (fk.c[i].n + 1) / 2;

		CHECK_INT(fk.requests[i], want);
		pages += want;
	}
	CHECK_INT(uh_log_total(), pages + 2);
	CHECK_INT(got.ahead_requests, pages + 2);	/* all before a take */
	uh_threaded(0);
}

/*
 * Large items, little memory: pages go to the spool and come back
 * whole; pages larger than the bytes allowed ahead are fetched again
 * only once their list is taken.
 */
static void
test_bounds(void)
{
	static const int counts[NCOLL] = { 30, 2, 25, 0, 12, 40, 3, 0, 20 };
	struct kube_lists_opts mo;

	fk_reset(counts, 40000);	/* pages of 10 items: ~400 KB */
	uh_threaded(1);
	memset(&mo, 0, sizeof mo);
	mo.concurrency = 4;
	mo.mem_max = 512u << 10;
	mo.ahead_max = 8u << 20;
	REQUIRE(run_all(&mo, 10, 1) == 0);
	CHECK_STR(buf_cstr(&got.keys), expected_all());
	CHECK_INT(got.bad, 0);
	for (int i = 0; i < NCOLL; i++)		/* each page once */
		CHECK_INT(fk.requests[i], fk.c[i].n == 0 ? 1 :
		    (fk.c[i].n + 9) / 10);

	/* 300 KB allowed ahead: the 400 KB pages wait for their list */
	fk_reset(counts, 40000);
	mo.ahead_max = 300u << 10;
	REQUIRE(run_all(&mo, 10, 1) == 0);
	CHECK_STR(buf_cstr(&got.keys), expected_all());
	CHECK_INT(got.bad, 0);
	for (int i = 0; i < NCOLL; i++)
		CHECK(fk.requests[i] <= 1 + (fk.c[i].n == 0 ? 1 :
		    (fk.c[i].n + 9) / 10));
	uh_threaded(0);
}

/*
 * Pages spooled (memory bound 256 KiB, 40 KB items): one spool file for
 * all of them, whatever the number of pages and fetchers, holding and
 * spanning no more than what may be ahead plus the pages in flight;
 * closed with the lists.
 */
static void
test_one_spool(void)
{
	static const int counts[NCOLL] = { 30, 2, 25, 0, 12, 40, 3, 0, 20 };
	char dir[] = "/tmp/test-kube-lists-XXXXXX";
	struct kube_lists_opts mo;
	int64_t bytes, size, bound;

	REQUIRE(mkdtemp(dir) != NULL);
	fk_reset(counts, 40000);	/* pages of 10 items: ~400 KB */
	uh_threaded(1);
	memset(&mo, 0, sizeof mo);
	mo.concurrency = 4;
	mo.mem_max = 256u << 10;
	mo.ahead_max = 1u << 20;
	mo.spool_dir = dir;
	got.spool_dir = dir;
	REQUIRE(run_all(&mo, 10, 1) == 0);
	got.spool_dir = NULL;
	CHECK_STR(buf_cstr(&got.keys), expected_all());
	CHECK_INT(got.bad, 0);
	CHECK_INT(got.spool_files, 1);
	/* ahead, a page per fetcher in flight, the head's chunks */
	bound = (int64_t)mo.ahead_max + 4 * (512 << 10) + (1 << 20);
	CHECK(got.spool_bytes > 0);
	CHECK(got.spool_bytes <= bound);
	CHECK(got.spool_size <= bound);
	got.spool_dir = dir;
	CHECK_INT(spool_scan(&bytes, &size), 0);	/* closed */
	got.spool_dir = NULL;
	uh_threaded(0);
	CHECK(rmdir(dir) == 0);
}

static void del_i03(void) { coll_del(&fk.c[0], "i03"); }
static void ins_i025(void) { coll_put(&fk.c[0], "i025"); }

/*
 * The page being read breaks after 20 of its 40 items (large ones, so
 * part of it was published and may have been read); an earlier item is
 * deleted, or one inserted, before it is fetched again: the list's items
 * in key order, each once, every item that was there throughout, the
 * one that changed at most once; the lists after it as they are.
 */
static void
test_cut_while_reading(void)
{
	static const int counts[NCOLL] = { 40, 1, 1, 1, 1, 1, 1, 1, 1 };
	void (*change[2])(void) = { del_i03, ins_i025 };
	struct kube_lists_opts mo;

	for (int i = 0; i < 2; i++) {
		char prev[16] = "", *save = NULL, *k, *keys;
		int ids[NCOLL - 1], seen[40], n = 0;
		const char *rest;

		fk_reset(counts, 30000);
		pthread_mutex_lock(&fk.mu);
		fk.cut_coll = 0;
		fk.cut_items = 20;
		fk.on_cut = change[i];
		pthread_mutex_unlock(&fk.mu);
		memset(&mo, 0, sizeof mo);
		mo.concurrency = 2;
		REQUIRE(run_all(&mo, 100, 0) == 0);
		CHECK_INT(got.bad, 0);
		CHECK_INT(fk.requests[0], 2);
		memset(seen, 0, sizeof seen);
		for (int x = 0; x < NCOLL - 1; x++)
			ids[x] = x + 1;
		rest = expected(ids, NCOLL - 1);
		keys = xstrdup(buf_cstr(&got.keys));
		/* "/ns-a " + the first list + the others as they are */
		REQUIRE(strlen(keys) > strlen(rest) + 6);
		CHECK_STR(keys + strlen(keys) - strlen(rest), rest);
		keys[strlen(keys) - strlen(rest)] = '\0';
		k = strtok_r(keys, " ", &save);
		CHECK_STR(k, "/ns-a");
		while ((k = strtok_r(NULL, " ", &save)) != NULL) {
			CHECK(strncmp(k, "ns-a/", 5) == 0);
			CHECK(strcmp(k + 5, prev) > 0);	/* in order, once */
			snprintf(prev, sizeof prev, "%s", k + 5);
			if (strlen(k + 5) == 3)
				seen[atoi(k + 6) % 40]++;
			n++;
		}
		CHECK(n >= 39 && n <= 41);
		for (int x = 0; x < 40; x++)
			if (!(i == 0 && x == 3))
				CHECK_INT(seen[x], 1);
		free(keys);
	}
}

/*
 * Tokens expire when the list's second page is asked for (and objects
 * come and go): it goes on past the last key given, at any concurrency,
 * from the Status's token or from a new list.
 */
static void
test_gone_resume(void)
{
	static const int counts[NCOLL] = { 9, 1, 1, 1, 1, 1, 1, 1, 1 };

	for (int mode = 0; mode < 4; mode++) {
		struct kube_lists_opts mo;
		struct buf w;
		int ids[NCOLL - 1];

		fk_reset(counts, 10);
		pthread_mutex_lock(&fk.mu);
		fk.inconsistent = mode & 1;
		fk.expire_coll = 0;
		fk.expire_at = 2;
		pthread_mutex_unlock(&fk.mu);
		buf_init(&w, 1u << 20);
		buf_puts(&w, "/ns-a ns-a/i00 ns-a/i01 ns-a/i02 ns-a/i03 "
		    "ns-a/i04 ns-a/i06 ns-a/i07 ns-a/i08 ns-a/i99 ");
		for (int i = 0; i < NCOLL - 1; i++)
			ids[i] = i + 1;
		buf_puts(&w, expected(ids, NCOLL - 1));
		memset(&mo, 0, sizeof mo);
		mo.concurrency = mode & 2 ? 4 : 1;
		REQUIRE(run_all(&mo, 3, 0) == 0);
		CHECK_STR(buf_cstr(&got.keys), buf_cstr(&w));
		buf_free(&w);
	}
}

/* Counts from first pages (its items, plus remainingItemCount). */
static void
test_pending(void)
{
	static const int counts[NCOLL] = { 10, 2, 7, 0, 0, 0, 0, 0, 0 };
	struct cairn_err err = CAIRN_ERR_INIT;
	struct kube_list_opts lo;
	struct kube_lists *m = NULL;
	int ids[3];

	fk_reset(counts, 10);
	memset(&lo, 0, sizeof lo);
	lo.limit = 3;
	got_reset();
	REQUIRE(kube_lists_open(kube_, NULL, &m, &err) == 0);
	for (int i = 0; i < 3; i++) {
		struct kube_gvr g = gvr_of(i);

		ids[i] = kube_lists_add(m, &g, "ns-a", &lo, KUBE_LISTS_COUNT);
	}
	for (int i = 0; i < 100 && kube_lists_pending(m) < 19; i++)
		usleep(20000);
	CHECK_INT(kube_lists_pending(m), 19);	/* 10 + 2 + 7 */
	CHECK(kube_lists_take(m, ids[0], on_text, NULL, NULL, &err) == 0);
	CHECK_INT(kube_lists_pending(m), 9);
	kube_lists_skip(m, ids[1]);
	CHECK_INT(kube_lists_pending(m), 7);
	CHECK(kube_lists_take(m, ids[2], on_text, NULL, NULL, &err) == 0);
	CHECK_INT(kube_lists_pending(m), 0);
	CHECK_INT(got.n, 17);
	kube_lists_free(m);
}

/*
 * One fetcher, a first list of pages larger than the head may hold for
 * the caller: waiting for the counts ends once that fetcher waits for
 * the caller (before, it waited for its whole timeout: 2 s per backup
 * at --list-concurrency 1), and every item still comes, in order.
 */
static void
test_counted_one_fetcher(void)
{
	static const int counts[NCOLL] = { 30, 2, 25, 0, 12, 40, 3, 0, 20 };
	struct cairn_err err = CAIRN_ERR_INIT;
	struct kube_lists_opts mo;
	struct kube_list_opts lo;
	struct kube_lists *m = NULL;
	int ids[NCOLL], ok = 1;
	int64_t t0;

	fk_reset(counts, 40000);	/* pages of 10 items: ~400 KB */
	memset(&mo, 0, sizeof mo);
	mo.concurrency = 1;
	mo.mem_max = 256u << 10;	/* the head holds 128 KiB */
	memset(&lo, 0, sizeof lo);
	lo.limit = 10;
	got_reset();
	REQUIRE(kube_lists_open(kube_, &mo, &m, &err) == 0);
	for (int i = 0; i < NCOLL; i++) {
		struct kube_gvr g = gvr_of(i);

		ids[i] = kube_lists_add(m, &g, fk.c[i].ns, &lo,
		    KUBE_LISTS_COUNT);
	}
	t0 = time_mono_us();
	kube_lists_wait_counted(m, 60 * TIME_US_PER_SEC);
	/* a hang, not a speed: the fetcher stopped within a page */
	CHECK(time_mono_us() - t0 < 20 * TIME_US_PER_SEC);
	for (int i = 0; i < NCOLL && ok; i++)
		ok = kube_lists_take(m, ids[i], on_text, NULL, NULL,
		    &err) == 0;
	CHECK(ok);
	kube_lists_free(m);
	CHECK_STR(buf_cstr(&got.keys), expected(ids, NCOLL));
	CHECK_INT(got.bad, 0);
}

static int deep_calls, deep_depth;

static int
on_deep(void *arg, cJSON *it, int depth)
{
	(void)arg;
	if (strcmp(json_str_or(it, "metadata.name", ""), "i01") == 0)
		deep_calls++;
	deep_depth = depth;
	return 0;
}

/*
 * An item nested deeper than CAIRN_JSON_MAX_DEPTH goes to on_too_deep,
 * not to the item callback, told by the scan that split the page: the
 * same whether the page was fetched ahead or streamed.
 */
static void
test_too_deep(void)
{
	static const int counts[NCOLL] = { 3, 0, 0, 0, 0, 0, 0, 0, 0 };
	static const char *const members[] = { "metadata.labels", NULL };

	for (int prefetch = 0; prefetch < 2; prefetch++) {
		struct cairn_err err = CAIRN_ERR_INIT;
		struct kube_list_opts lo;
		struct kube_gvr g = gvr_of(0);

		fk_reset(counts, 10);
		pthread_mutex_lock(&fk.mu);
		fk.deep = 1;
		pthread_mutex_unlock(&fk.mu);
		got_reset();
		deep_calls = deep_depth = 0;
		memset(&lo, 0, sizeof lo);
		lo.prefetch = prefetch;
		lo.parse_only = members;
		lo.on_too_deep = on_deep;
		REQUIRE(kube_list_text(kube_, &g, "ns-a", &lo, on_text, NULL,
		    NULL, &err) == 0);
		CHECK_STR(buf_cstr(&got.keys), "ns-a/i00 ns-a/i02 ");
		CHECK_INT(deep_calls, 1);
		CHECK_INT(deep_depth, 602);
	}
}

/* Out of order is refused; a callback's error ends only its list. */
static void
test_order_and_errors(void)
{
	static const int counts[NCOLL] = { 10, 2, 7, 0, 0, 0, 0, 0, 0 };
	struct cairn_err err = CAIRN_ERR_INIT;
	struct kube_list_opts lo;
	struct kube_lists *m = NULL;
	int ids[3];

	fk_reset(counts, 10);
	memset(&lo, 0, sizeof lo);
	lo.limit = 3;
	got_reset();
	REQUIRE(kube_lists_open(kube_, NULL, &m, &err) == 0);
	for (int i = 0; i < 3; i++) {
		struct kube_gvr g = gvr_of(i);

		ids[i] = kube_lists_add(m, &g, "ns-a", &lo, 0);
	}
	CHECK_INT(kube_lists_take(m, ids[1], on_text, NULL, NULL, &err),
	    CAIRN_EINVAL);
	got.stop_at = 4;
	CHECK_INT(kube_lists_take(m, ids[0], on_text, NULL, NULL, &err),
	    CAIRN_EFAIL);
	got_reset();
	CHECK(kube_lists_take(m, ids[1], on_text, NULL, NULL, &err) == 0);
	CHECK(kube_lists_take(m, ids[2], on_text, NULL, NULL, &err) == 0);
	CHECK_STR(buf_cstr(&got.keys), "ns-a/i00 ns-a/i01 ns-a/i00 ns-a/i01 "
	    "ns-a/i02 ns-a/i03 ns-a/i04 ns-a/i05 ns-a/i06 ");
	/* a list that fails: its error, after what it gave */
	{
		struct kube_gvr g = { "", "v1", "nothing" };
		int id;

		id = kube_lists_add(m, &g, "ns-a", &lo, 0);
		CHECK(kube_lists_take(m, id, on_text, NULL, NULL, &err) ==
		    CAIRN_ENOTFOUND);
	}
	kube_lists_free(m);
	/* freed with lists still queued and in flight */
	REQUIRE(kube_lists_open(kube_, NULL, &m, &err) == 0);
	for (int i = 0; i < 3; i++) {
		struct kube_gvr g = gvr_of(i);

		kube_lists_add(m, &g, "ns-a", &lo, 0);
	}
	kube_lists_free(m);
}

int
main(void)
{
	struct kube_client_opts ko;

	pthread_mutex_init(&fk.mu, NULL);
	memset(&ko, 0, sizeof ko);
	ko.timeout_us = 5 * TIME_US_PER_SEC;
	ko.max_retries = 3;		/* a broken page is fetched again */
	if (uh_start(handler, NULL, &port_) < 0 ||
	    (kube_ = unit_kube_opts(port_, NULL, "lists", &ko)) == NULL) {
		printf("FAIL: test_kube_lists.c:setup\n");
		return 1;
	}
	RUN(test_order_any_concurrency);
	RUN(test_ahead_each_page_once);
	RUN(test_bounds);
	RUN(test_one_spool);
	RUN(test_cut_while_reading);
	RUN(test_gone_resume);
	RUN(test_pending);
	RUN(test_counted_one_fetcher);
	RUN(test_order_and_errors);
	RUN(test_too_deep);
	kube_free(kube_);
	uh_stop();
	return unit_done();
}
