/*
 * test_kube_list_text.c: kube_list_text() against a small in-process API
 * (libmicrohttpd) that answers list pages as written here: the text each
 * item arrives with is the server's bytes when they are compact and carry
 * apiVersion and kind, gets apiVersion/kind inserted after the opening
 * brace when the server left them out (as real API servers do on list
 * items), and is cJSON's print when the server put spaces between tokens;
 * in every case the text parses to the same tree the callback gets.
 * With parse_only, the tree holds only the members named (apiVersion and
 * kind as the server sent them) while the text stays whole and filled in.
 * Also: a list that starts at a continue token (a resumed backup), the
 * tokens on_page announces, and an expired starting token (410).
 */
#include "config.h"

#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonutil.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "kube/kube.h"
#include "unit.h"
#include "unit_kube.h"

#define NGOT 16

/* Page 1 names apiVersion/kind before the items; page 2 after them. */
static const char page1[] =
    "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\","
    "\"metadata\":{\"resourceVersion\":\"7\",\"continue\":\"p2\"},\"items\":["
    "{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\"},"
	"\"data\":{\"k\":\"v w, {x}\"}},"
    "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"b\"}},"
    "{},"
    "{ \"metadata\" : {\"name\":\"c\"} },"
    "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"d\"}}"
    "]}";
static const char page2[] =
    "{\"metadata\":{\"resourceVersion\":\"8\"},\"items\":["
    "{\"metadata\":{\"name\":\"e\"}}"
    "],\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\"}";

static struct {
	char *text[NGOT];
	cJSON *item[NGOT];
	int n;
	int take;		/* return KUBE_TAKE for every item */
} got;

static enum MHD_Result
handler(void *cls, struct MHD_Connection *c, const char *url,
	const char *method, const char *version, const char *data,
	size_t *data_len, void **con_cls)
{
	const char *cont, *body;
	struct MHD_Response *r;
	enum MHD_Result ret;
	unsigned code = 200;

	(void)cls;
	(void)method;
	(void)version;
	(void)data;
	(void)data_len;
	if (*con_cls == NULL) {
		*con_cls = c;
		return MHD_YES;
	}
	if (strcmp(url, "/api/v1/configmaps") != 0) {
		body = "{\"kind\":\"Status\",\"code\":404}";
		code = 404;
	} else {
		cont = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND,
		    "continue");
		body = cont != NULL && strcmp(cont, "p2") == 0 ? page2 : page1;
		if (cont != NULL && strcmp(cont, "old") == 0) {
			/* what an API server answers after compaction */
			body = "{\"kind\":\"Status\",\"apiVersion\":\"v1\","
			    "\"status\":\"Failure\",\"reason\":\"Expired\","
			    "\"message\":\"too old\",\"code\":410}";
			code = 410;
		}
	}
	r = MHD_create_response_from_buffer(strlen(body), (void *)body,
	    MHD_RESPMEM_PERSISTENT);
	MHD_add_response_header(r, "Content-Type", "application/json");
	ret = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return ret;
}

static int
on_text(void *arg, cJSON *item, const char *text, size_t len)
{
	(void)arg;
	if (got.n >= NGOT)
		return CAIRN_EFAIL;
	/* Borrowed for the call: keep a copy; NUL at len. */
	if (text[len] != '\0')
		return CAIRN_EPROTO;
	got.text[got.n] = xstrdup(text);
	if (got.take) {
		got.item[got.n++] = item;
		return KUBE_TAKE;
	}
	got.item[got.n++] = cJSON_Duplicate(item, 1);
	return 0;
}

static void
got_clear(void)
{
	for (int i = 0; i < got.n; i++) {
		free(got.text[i]);
		cJSON_Delete(got.item[i]);
	}
	memset(&got, 0, sizeof got);
}

static struct MHD_Daemon *daemon_;
static struct kube *kube_;
static int prefetch_;		/* second round: pages fetched ahead (lists.c) */

static int
setup(void)
{
	const union MHD_DaemonInfo *di;

	daemon_ = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL,
	    NULL, handler, NULL, MHD_OPTION_END);
	if (daemon_ == NULL)
		return -1;
	di = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT);
	kube_ = unit_kube_at(di->port, NULL, "list-text");
	return kube_ != NULL ? 0 : -1;
}

static int
list_all(int take)
{
	struct kube_gvr g = { "", "v1", "configmaps" };
	struct kube_list_info info;
	struct cairn_err err = CAIRN_ERR_INIT;
	int rc;

	struct kube_list_opts lo;

	got_clear();
	got.take = take;
	memset(&lo, 0, sizeof lo);
	lo.prefetch = prefetch_;
	rc = kube_list_text(kube_, &g, NULL, &lo, on_text, NULL, &info,
	    &err);
	if (rc < 0)
		fprintf(stderr, "list: %s\n", err.msg);
	return rc;
}

/* The text parses to the tree the callback got. */
static int
same_tree(int i)
{
	cJSON *t = cJSON_Parse(got.text[i]);
	int eq = t != NULL && cJSON_Compare(t, got.item[i], 1);

	cJSON_Delete(t);
	return eq;
}

static void
test_text_as_sent_or_filled(void)
{
	REQUIRE(list_all(0) == 0);
	REQUIRE(got.n == 6);
	for (int i = 0; i < got.n; i++)
		CHECK(same_tree(i));
	/* Missing both: inserted after the brace; spaces in strings kept. */
	CHECK_STR(got.text[0], "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
	    "\"metadata\":{\"name\":\"a\",\"namespace\":\"n\"},"
	    "\"data\":{\"k\":\"v w, {x}\"}}");
	/* Complete and compact: the server's bytes. */
	CHECK_STR(got.text[1], "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
	    "\"metadata\":{\"name\":\"b\"}}");
	/* An empty object gets no trailing comma. */
	CHECK_STR(got.text[2],
	    "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\"}");
	/* Spaces between tokens: cJSON's compact print of the tree. */
	CHECK(strchr(got.text[3], ' ') == NULL);
	CHECK_STR(json_str(got.item[3], "metadata.name"), "c");
	/* Only apiVersion missing: only apiVersion inserted. */
	CHECK_STR(got.text[4], "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
	    "\"metadata\":{\"name\":\"d\"}}");
	/*
	 * Page 2 names the list kind after its items and there is no
	 * discovery cache: apiVersion from the request, no kind, as the tree.
	 */
	CHECK_STR(got.text[5], "{\"apiVersion\":\"v1\","
	    "\"metadata\":{\"name\":\"e\"}}");
	CHECK(cJSON_GetObjectItemCaseSensitive(got.item[5], "kind") == NULL);
}

static void
test_take_keeps_item(void)
{
	REQUIRE(list_all(1) == 0);
	REQUIRE(got.n == 6);
	/* Taken items outlive the list; they are freed by got_clear(). */
	CHECK_STR(json_str(got.item[0], "apiVersion"), "v1");
	CHECK_STR(json_str(got.item[0], "data.k"), "v w, {x}");
	CHECK(same_tree(0));
	got_clear();
}

/* on_page's record: the tokens announced, joined with '|'. */
static char pages_seen[256];

static int
on_page(void *arg, const char *cont)
{
	(void)arg;
	if (strlen(pages_seen) + strlen(cont) + 2 > sizeof pages_seen)
		return CAIRN_EFAIL;
	strcat(pages_seen, "|");
	strcat(pages_seen, cont);
	return 0;
}

static int
list_from(const char *token, int restart, struct kube_list_info *info,
	struct cairn_err *err)
{
	struct kube_gvr g = { "", "v1", "configmaps" };
	struct kube_list_opts lo;

	got_clear();
	pages_seen[0] = '\0';
	memset(&lo, 0, sizeof lo);
	lo.continue_token = token;
	lo.on_page = on_page;
	lo.restart_on_gone = restart;
	lo.prefetch = prefetch_;
	return kube_list_text(kube_, &g, NULL, &lo, on_text, NULL, info, err);
}

static void
test_start_at_token(void)
{
	struct kube_list_info info;
	struct cairn_err err = CAIRN_ERR_INIT;

	/* From the start: every page announced with the token fetching it. */
	REQUIRE(list_from(NULL, 0, &info, &err) == 0);
	CHECK(got.n == 6);
	CHECK_STR(pages_seen, "||p2");
	REQUIRE(list_from("", 0, &info, &err) == 0);
	CHECK(got.n == 6);
	/* From the second page: only its items, as the full list had them. */
	REQUIRE(list_from("p2", 0, &info, &err) == 0);
	REQUIRE(got.n == 1);
	CHECK_STR(got.text[0], "{\"apiVersion\":\"v1\","
	    "\"metadata\":{\"name\":\"e\"}}");
	CHECK_STR(pages_seen, "|p2");
	CHECK(info.items == 1 && info.pages == 1);
	got_clear();
}

static void
test_start_at_expired_token(void)
{
	struct kube_list_info info;
	struct cairn_err err = CAIRN_ERR_INIT;

	/* No restart: CAIRN_EGONE before any item; the caller lists again. */
	CHECK(list_from("old", 0, &info, &err) == CAIRN_EGONE);
	CHECK(got.n == 0 && info.items == 0 && info.pages == 0);
	CHECK(err.code == CAIRN_EGONE);
	CHECK_STR(pages_seen, "|old");
	/* restart_on_gone: from the first page, every item once. */
	cairn_err_clear(&err);
	REQUIRE(list_from("old", 1, &info, &err) == 0);
	CHECK(got.n == 6 && info.restarts == 1);
	CHECK_STR(pages_seen, "|old||p2");
	got_clear();
}

static void
test_parse_only_metadata(void)
{
	static const char *const members[] = { "metadata", NULL };
	struct kube_gvr g = { "", "v1", "configmaps" };
	struct kube_list_opts lo;
	struct cairn_err err = CAIRN_ERR_INIT;

	got_clear();
	memset(&lo, 0, sizeof lo);
	lo.parse_only = members;
	lo.prefetch = prefetch_;
	REQUIRE(kube_list_text(kube_, &g, NULL, &lo, on_text, NULL, NULL,
	    &err) == 0);
	REQUIRE(got.n == 6);
	/* The text is whole, as without parse_only... */
	CHECK_STR(got.text[0], "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
	    "\"metadata\":{\"name\":\"a\",\"namespace\":\"n\"},"
	    "\"data\":{\"k\":\"v w, {x}\"}}");
	/*
	 * ...the tree has metadata, not data, and apiVersion and kind only
	 * where the server sent them (the text has them filled in).
	 */
	CHECK_STR(json_str(got.item[0], "metadata.namespace"), "n");
	CHECK(json_get(got.item[0], "kind") == NULL);
	CHECK(json_get(got.item[0], "apiVersion") == NULL);
	CHECK(json_get(got.item[0], "data") == NULL);
	CHECK_STR(json_str(got.item[1], "apiVersion"), "v1");
	CHECK_STR(json_str(got.item[1], "kind"), "ConfigMap");
	CHECK(same_tree(1));
	CHECK_STR(got.text[2],
	    "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\"}");
	CHECK(got.item[2] != NULL && got.item[2]->child == NULL);
	/* Spaced-out text is printed from the tree: parsed whole. */
	CHECK(same_tree(3));
	CHECK_STR(json_str(got.item[5], "metadata.name"), "e");
	got_clear();
}

int
main(void)
{
	if (setup() < 0) {
		printf("FAIL: test_kube_list_text.c:setup\n");
		return 1;
	}
	RUN(test_text_as_sent_or_filled);
	RUN(test_take_keeps_item);
	RUN(test_start_at_token);
	RUN(test_start_at_expired_token);
	RUN(test_parse_only_metadata);
	prefetch_ = 1;		/* the same through kube/lists.c */
	RUN(test_text_as_sent_or_filled);
	RUN(test_take_keeps_item);
	RUN(test_start_at_token);
	RUN(test_start_at_expired_token);
	RUN(test_parse_only_metadata);
	got_clear();
	kube_free(kube_);
	MHD_stop_daemon(daemon_);
	return unit_done();
}
