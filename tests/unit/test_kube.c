/*
 * test_kube.c: unit tests of the kube client's offline parts: the JSON
 * stream splitters at every split point, kubeconfig and in-cluster
 * configuration, label selectors, paths and error mapping.
 */
#include "config.h"
#include "kube/internal.h"
#include "kube/label.h"
#include "base/jsonutil.h"
#include "base/mem.h"
#include "unit.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- splitters ---- */

struct coll {
	char *texts[64];
	int n;
};

static int
coll_fn(void *arg, const char *text, size_t len)
{
	struct coll *c = arg;

	if (c->n < 64)
		c->texts[c->n++] = xstrndup(text, len);
	return 0;
}

static void
coll_free(struct coll *c)
{
	int i;

	for (i = 0; i < c->n; i++)
		free(c->texts[i]);
	c->n = 0;
}

static const char *watch_stream =
    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a}{\\\"\","
    "\"resourceVersion\":\"5\"},\"data\":{\"k\":\"\\\\\"}}}\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"x\":[1,{\"y\":\"]\"}],"
    "\"u\":\"\\u00e9\\n\"}}\r\n"
    "  {\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":"
    "\"9\"}}}\n";

static void
check_watch_texts(struct coll *c)
{
	int i;

	CHECK_INT(c->n, 3);
	for (i = 0; i < c->n; i++) {
		cJSON *j = json_parse(c->texts[i], strlen(c->texts[i]), NULL);

		CHECK(j != NULL);
		cJSON_Delete(j);
	}
	if (c->n == 3) {
		cJSON *j = json_parse(c->texts[0], strlen(c->texts[0]), NULL);

		CHECK_STR(json_str(j, "object.metadata.name"), "a}{\"");
		CHECK_STR(json_str(j, "object.data.k"), "\\");
		cJSON_Delete(j);
		j = json_parse(c->texts[2], strlen(c->texts[2]), NULL);
		CHECK_STR(json_str(j, "type"), "BOOKMARK");
		cJSON_Delete(j);
	}
}

static void
test_jsplit_every_split(void)
{
	size_t len = strlen(watch_stream), cut, cut2;
	struct jsplit s;
	struct coll c = { { 0 }, 0 };

	for (cut = 0; cut <= len; cut++) {
		jsplit_init(&s, 1 << 16);
		CHECK(jsplit_feed(&s, watch_stream, cut, coll_fn, &c) == 0);
		CHECK(jsplit_feed(&s, watch_stream + cut, len - cut, coll_fn,
		    &c) == 0);
		check_watch_texts(&c);
		coll_free(&c);
		jsplit_free(&s);
	}
	/* Three pieces, every pair of cut points. */
	for (cut = 0; cut <= len; cut += 3) {
		for (cut2 = cut; cut2 <= len; cut2 += 5) {
			jsplit_init(&s, 1 << 16);
			CHECK(jsplit_feed(&s, watch_stream, cut, coll_fn,
			    &c) == 0);
			CHECK(jsplit_feed(&s, watch_stream + cut, cut2 - cut,
			    coll_fn, &c) == 0);
			CHECK(jsplit_feed(&s, watch_stream + cut2, len - cut2,
			    coll_fn, &c) == 0);
			check_watch_texts(&c);
			coll_free(&c);
			jsplit_free(&s);
		}
	}
	/* One byte at a time. */
	jsplit_init(&s, 1 << 16);
	for (cut = 0; cut < len; cut++)
		CHECK(jsplit_feed(&s, watch_stream + cut, 1, coll_fn, &c) == 0);
	check_watch_texts(&c);
	coll_free(&c);
	jsplit_free(&s);
}

static void
test_jsplit_cap_and_garbage(void)
{
	struct jsplit s;
	struct coll c = { { 0 }, 0 };
	const char *big = "{\"a\":\"0123456789012345678901234567890123456789\"}";

	jsplit_init(&s, 16);
	CHECK_INT(jsplit_feed(&s, big, strlen(big), coll_fn, &c),
	    CAIRN_ETOOBIG);
	jsplit_free(&s);
	jsplit_init(&s, 1024);
	CHECK_INT(jsplit_feed(&s, "42\n", 3, coll_fn, &c), CAIRN_EPROTO);
	jsplit_free(&s);
	CHECK_INT(c.n, 0);
}

struct litems {
	int n;
	char names[8][32];
};

static int
litem_fn(void *arg, const char *text, size_t len)
{
	struct litems *li = arg;
	cJSON *j = json_parse(text, len, NULL);

	if (j == NULL)
		return CAIRN_EPROTO;
	if (li->n < 8)
		snprintf(li->names[li->n], sizeof li->names[0], "%s",
		    json_str_or(j, "metadata.name", "?"));
	li->n++;
	cJSON_Delete(j);
	return 0;
}

static void
lsplit_check(const char *doc, int want_items, const char *want_cont,
    const char *want_kind)
{
	size_t len = strlen(doc), cut;
	struct lsplit l;
	struct litems li;
	cJSON *env;
	int mode;

	for (mode = 0; mode < 2; mode++) {
		for (cut = 0; cut <= len; cut++) {
			memset(&li, 0, sizeof li);
			lsplit_init(&l, 1 << 16);
			if (mode == 0) {
				CHECK(lsplit_feed(&l, doc, cut, litem_fn,
				    &li) == 0);
				CHECK(lsplit_feed(&l, doc + cut, len - cut,
				    litem_fn, &li) == 0);
			} else {
				size_t i;

				for (i = 0; i < len; i++)
					CHECK(lsplit_feed(&l, doc + i, 1,
					    litem_fn, &li) == 0);
				cut = len;
			}
			CHECK_INT(li.n, want_items);
			env = lsplit_finish(&l, NULL);
			CHECK(env != NULL);
			if (want_cont != NULL)
				CHECK_STR(json_str(env, "metadata.continue"),
				    want_cont);
			CHECK(cJSON_IsArray(cJSON_GetObjectItem(env,
			    "items")) || want_items == 0);
			if (want_kind != NULL)
				CHECK_STR(l.kind, want_kind);
			cJSON_Delete(env);
			lsplit_free(&l);
		}
	}
}

static void
test_lsplit_every_split(void)
{
	/* Metadata before the items. */
	lsplit_check("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMapList\","
	    "\"metadata\":{\"resourceVersion\":\"77\",\"continue\":\"c]{\\\"x\"},"
	    "\"items\":[{\"metadata\":{\"name\":\"a\"},\"data\":{\"items\":"
	    "\"[{\"}},\n {\"metadata\":{\"name\":\"b\\\\\"}} , {\"metadata\":"
	    "{\"name\":\"c\"},\"x\":[[],{}]}]}", 3, "c]{\"x", "ConfigMapList");
	/* Items first, metadata after; nested "items" keys elsewhere. */
	lsplit_check("  {\"items\" : [ {\"metadata\":{\"name\":\"a\"}} ],"
	    "\"metadata\":{\"continue\":\"tok\",\"items\":[1,2]},"
	    "\"kind\":\"XList\"} \n", 1, "tok", "XList");
	/* Empty and null items. */
	lsplit_check("{\"kind\":\"L\",\"items\":[],\"metadata\":{}}", 0, NULL,
	    "L");
	lsplit_check("{\"kind\":\"L\",\"items\":null,\"metadata\":{}}", 0,
	    NULL, "L");
}

static void
test_lsplit_truncated(void)
{
	const char *doc = "{\"kind\":\"L\",\"items\":[{\"a\":1},{\"b\":";
	struct lsplit l;
	struct litems li;

	memset(&li, 0, sizeof li);
	lsplit_init(&l, 1 << 16);
	CHECK(lsplit_feed(&l, doc, strlen(doc), litem_fn, &li) == 0);
	CHECK_INT(li.n, 1);
	CHECK(lsplit_finish(&l, NULL) == NULL);
	lsplit_free(&l);
	lsplit_init(&l, 1 << 16);
	CHECK_INT(lsplit_feed(&l, "[1,2]", 5, litem_fn, &li), CAIRN_EPROTO);
	lsplit_free(&l);
}

/* ---- selectors ---- */

static int
sel_matches(const char *sel, const char *labels_json)
{
	struct kube_selector *s;
	cJSON *l = labels_json ? cJSON_Parse(labels_json) : NULL;
	int m;

	if (kube_selector_parse(sel, &s, NULL) < 0) {
		cJSON_Delete(l);
		return -1;
	}
	m = kube_selector_match(s, l);
	kube_selector_free(s);
	cJSON_Delete(l);
	return m;
}

static void
test_selector_match(void)
{
	const char *L = "{\"app\":\"web\",\"tier\":\"front\",\"n\":\"7\","
	    "\"example.com/owner\":\"x\"}";

	CHECK_INT(sel_matches("", L), 1);
	CHECK_INT(sel_matches(NULL, NULL), 1);
	CHECK_INT(sel_matches("app=web", L), 1);
	CHECK_INT(sel_matches("app==web", L), 1);
	CHECK_INT(sel_matches("app = web , tier=front", L), 1);
	CHECK_INT(sel_matches("app=db", L), 0);
	CHECK_INT(sel_matches("app!=db", L), 1);
	CHECK_INT(sel_matches("app!=web", L), 0);
	CHECK_INT(sel_matches("missing!=x", L), 1);
	CHECK_INT(sel_matches("app in (db, web)", L), 1);
	CHECK_INT(sel_matches("app in (db)", L), 0);
	CHECK_INT(sel_matches("app notin (db)", L), 1);
	CHECK_INT(sel_matches("missing notin (db)", L), 1);
	CHECK_INT(sel_matches("app notin (web,db)", L), 0);
	CHECK_INT(sel_matches("app", L), 1);
	CHECK_INT(sel_matches("missing", L), 0);
	CHECK_INT(sel_matches("!missing", L), 1);
	CHECK_INT(sel_matches("!app", L), 0);
	CHECK_INT(sel_matches("example.com/owner=x", L), 1);
	CHECK_INT(sel_matches("n>5,n<8", L), 1);
	CHECK_INT(sel_matches("n>7", L), 0);
	CHECK_INT(sel_matches("app=web", NULL), 0);
	CHECK_INT(sel_matches("!app", NULL), 1);
	CHECK_INT(sel_matches("app=", "{\"app\":\"\"}"), 1);
}

static void
test_selector_errors(void)
{
	static const char *bad[] = {
		"app=web,", ",app", "app in (a", "app in a", "app=we b",
		"app notin ()", "-app=x", "app=-x", "a/b/c=1", "app>x",
		"app=" "0123456789012345678901234567890123456789012345678901234567890123",
		"Example.com/x=1", "!", "app=(x)", "=x",
	};
	struct cairn_err err = CAIRN_ERR_INIT;
	struct kube_selector *s;
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cairn_err_clear(&err);
		if (kube_selector_parse(bad[i], &s, &err) != CAIRN_EINVAL ||
		    s != NULL || strstr(err.msg, "label selector") == NULL) {
			char w[200];

			snprintf(w, sizeof w, "selector \"%s\" accepted", bad[i]);
			UNIT_FAIL_AT(w);
			kube_selector_free(s);
		}
	}
}

static void
test_selector_string(void)
{
	struct kube_selector *s;
	char *t;

	REQUIRE(kube_selector_parse(" a == 1 ,b in ( x , y ),!c, d ,e!=2",
	    &s, NULL) == 0);
	t = kube_selector_string(s);
	CHECK_STR(t, "a=1,b in (x,y),!c,d,e!=2");
	free(t);
	kube_selector_free(s);
	REQUIRE(kube_selector_parse("", &s, NULL) == 0);
	CHECK(kube_selector_empty(s));
	kube_selector_free(s);
}

/* Selector text -> metav1.LabelSelector, as the CLI writes it into specs. */
static void
test_selector_object(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	cJSON *o = NULL;
	char *t;

	REQUIRE(kube_selector_object("app=web, tier in (a,b),!old,env!=dev,"
	    "zone,app==api,x notin (p)", &o, &err) == 0);
	t = cJSON_PrintUnformatted(o);
	CHECK_STR(t, "{\"matchLabels\":{\"app\":\"web\"},\"matchExpressions\":["
	    "{\"key\":\"tier\",\"operator\":\"In\",\"values\":[\"a\",\"b\"]},"
	    "{\"key\":\"old\",\"operator\":\"DoesNotExist\"},"
	    "{\"key\":\"env\",\"operator\":\"NotIn\",\"values\":[\"dev\"]},"
	    "{\"key\":\"zone\",\"operator\":\"Exists\"},"
	    "{\"key\":\"app\",\"operator\":\"In\",\"values\":[\"api\"]},"
	    "{\"key\":\"x\",\"operator\":\"NotIn\",\"values\":[\"p\"]}]}");
	free(t);
	cJSON_Delete(o);
	CHECK(kube_selector_object("a in (b", &o, &err) == CAIRN_EINVAL);
	CHECK(o == NULL);
	CHECK(kube_selector_object("n>3", &o, &err) == CAIRN_EINVAL);
	CHECK(o == NULL && strstr(err.msg, "n>3") != NULL);
}

/* ---- configuration ---- */

static const char *PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n"
    "-----END CERTIFICATE-----\n";
/* base64 of PEM above */
static char pem_b64[256];

static void
b64(const char *in, char *out)
{
	static const char t[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t n = strlen(in), i, o = 0;

	for (i = 0; i < n; i += 3) {
		unsigned v = (unsigned char)in[i] << 16;

		if (i + 1 < n)
			v |= (unsigned char)in[i + 1] << 8;
		if (i + 2 < n)
			v |= (unsigned char)in[i + 2];
		out[o++] = t[(v >> 18) & 63];
		out[o++] = t[(v >> 12) & 63];
		out[o++] = i + 1 < n ? t[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < n ? t[v & 63] : '=';
	}
	out[o] = '\0';
}

static char *
write_tmp(const char *name, const char *content)
{
	char *p = xasprintf("%s/%s", UNIT_TMPDIR(), name);
	FILE *f = fopen(p, "w");

	if (f != NULL) {
		fputs(content, f);
		fclose(f);
	}
	return p;
}

static int
load(const char *kubeconfig, const char *ctx, struct kube_config **cfg,
    struct cairn_err *err)
{
	struct kube_config_opts o = { kubeconfig, ctx };

	cairn_err_clear(err);
	return kube_config_load(&o, cfg, err);
}

static void
test_kubeconfig_basic(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct kube_config *cfg;
	struct kcfg_tls tls;
	char *p, *y, *t;

	b64(PEM, pem_b64);
	y = xasprintf(
	    "apiVersion: v1\nkind: Config\ncurrent-context: one\n"
	    "clusters:\n"
	    "- name: c1\n  cluster:\n    server: https://127.0.0.1:6443/\n"
	    "    certificate-authority-data: %s\n"
	    "    tls-server-name: kubernetes\n"
	    "- name: c2\n  cluster:\n    server: https://127.0.0.2:443\n"
	    "    insecure-skip-tls-verify: true\n"
	    "contexts:\n"
	    "- name: one\n  context: {cluster: c1, user: u1, namespace: team}\n"
	    "- name: two\n  context:\n    cluster: c2\n    user: u2\n"
	    "users:\n"
	    "- name: u1\n  user:\n    token: \"tok-1\"\n"
	    "    client-certificate-data: %s\n    client-key-data: %s\n"
	    "- name: u2\n  user:\n    tokenFile: tok2.txt\n", pem_b64, pem_b64,
	    pem_b64);
	p = write_tmp("kc-basic.yaml", y);
	free(y);
	free(write_tmp("tok2.txt", "tok-2\n"));

	REQUIRE(load(p, NULL, &cfg, &err) == 0);
	CHECK_STR(kube_config_server(cfg), "https://127.0.0.1:6443");
	CHECK_STR(kube_config_namespace(cfg), "team");
	CHECK_STR(kube_config_context(cfg), "one");
	kcfg_tls(cfg, &tls);
	CHECK(tls.ca_data != NULL && tls.ca_len == strlen(PEM) &&
	    memcmp(tls.ca_data, PEM, tls.ca_len) == 0);
	CHECK(tls.cert_data != NULL && tls.key_data != NULL);
	CHECK_STR(tls.tls_server_name, "kubernetes");
	CHECK(!tls.insecure);
	t = kcfg_token(cfg, 0);
	CHECK_STR(t, "tok-1");
	free(t);
	{
		cJSON *d = kube_config_describe(cfg);
		char *s = json_print(d);

		CHECK(strstr(s, "tok-1") == NULL);
		CHECK(strstr(s, "redacted") != NULL);
		free(s);
		cJSON_Delete(d);
	}
	kube_config_free(cfg);

	/* --context, insecure, tokenFile relative to the kubeconfig. */
	REQUIRE(load(p, "two", &cfg, &err) == 0);
	CHECK_STR(kube_config_namespace(cfg), "default");
	kcfg_tls(cfg, &tls);
	CHECK(tls.insecure);
	t = kcfg_token(cfg, 0);
	CHECK_STR(t, "tok-2");
	free(t);
	kube_config_free(cfg);

	CHECK_INT(load(p, "three", &cfg, &err), CAIRN_EINVAL);
	CHECK(strstr(err.msg, "context \"three\" not found") != NULL);
	CHECK(strstr(err.msg, p) != NULL);
	free(p);
}

static void
test_kubeconfig_errors(void)
{
	static const struct {
		const char *yaml;
		const char *want;	/* substring of the error */
	} cases[] = {
		{ "current-context: x\ncontexts:\n- name: x\n  context: "
		  "{cluster: c}\nclusters:\n- name: c\n  cluster: {}\n",
		  "cluster \"c\": server: missing" },
		{ "current-context: x\ncontexts:\n- name: x\n  context: "
		  "{cluster: nope}\n", "cluster: \"nope\" not found" },
		{ "contexts: []\n", "current-context: not set" },
		{ "current-context: x\ncontexts:\n- name: x\n  context: "
		  "{cluster: c, user: u}\nclusters:\n- name: c\n  cluster: "
		  "{server: 'https://h:1'}\n", "user: \"u\" not found" },
		{ "current-context: x\ncontexts:\n- name: x\n  context: "
		  "{cluster: c}\nclusters:\n- name: c\n  cluster: "
		  "{server: 'https://h:1', certificate-authority-data: '!!!'}\n",
		  "certificate-authority-data: not valid base64" },
		{ "current-context: x\ncontexts:\n- name: x\n  context: "
		  "{cluster: c}\nclusters:\n- name: c\n  cluster: "
		  "{server: 'https://h:1', certificate-authority: /nonexistent/ca}\n",
		  "certificate-authority" },
		{ "current-context: x\ncontexts:\n- name: x\n  context: "
		  "{cluster: c}\nclusters:\n- name: c\n  cluster: "
		  "{server: 'ftp://h:1'}\n", "server: \"ftp://h:1\" is not" },
		{ "current-context: x\ncontexts:\n- name: x\n  context: "
		  "{cluster: c}\nclusters:\n- name: c\n  cluster: "
		  "{server: 'https://h:1', insecure-skip-tls-verify: maybe}\n",
		  "insecure-skip-tls-verify: not a boolean" },
		{ "a: [b\n", "YAML error at line" },
	};
	struct cairn_err err = CAIRN_ERR_INIT;
	struct kube_config *cfg;
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char name[32], *p;

		snprintf(name, sizeof name, "kc-bad-%zu.yaml", i);
		p = write_tmp(name, cases[i].yaml);
		if (load(p, NULL, &cfg, &err) == 0 || cfg != NULL ||
		    strstr(err.msg, cases[i].want) == NULL ||
		    strstr(err.msg, p) == NULL) {
			char w[300];

			snprintf(w, sizeof w, "case %zu: got \"%.200s\"", i,
			    err.msg);
			UNIT_FAIL_AT(w);
			kube_config_free(cfg);
		}
		free(p);
	}
	CHECK_INT(load("/nonexistent/kubeconfig", NULL, &cfg, &err),
	    CAIRN_ENOTFOUND);
	CHECK(strstr(err.msg, "/nonexistent/kubeconfig") != NULL);
}

static void
test_kubeconfig_merge(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct kube_config *cfg;
	char *a, *b, *env;
	char *t;
	const char *old = getenv("KUBECONFIG");
	char *saved = old ? xstrdup(old) : NULL;

	a = write_tmp("kc-a.yaml",
	    "current-context: ctx-a\n"
	    "clusters:\n- name: shared\n  cluster: {server: 'https://a:1'}\n"
	    "users:\n- name: u\n  user: {token: from-a}\n");
	b = write_tmp("kc-b.yaml",
	    "current-context: ctx-b\n"
	    "contexts:\n- name: ctx-a\n  context: {cluster: shared, user: u, "
	    "namespace: nb}\n- name: ctx-b\n  context: {cluster: only-b, user: u}\n"
	    "clusters:\n- name: shared\n  cluster: {server: 'https://b:2'}\n"
	    "- name: only-b\n  cluster: {server: 'https://only-b:3'}\n"
	    "users:\n- name: u\n  user: {token: from-b}\n");
	env = xasprintf("%s:/nonexistent/x:%s", a, b);
	setenv("KUBECONFIG", env, 1);
	REQUIRE(load(NULL, NULL, &cfg, &err) == 0);
	/* current-context from a, context from b, cluster and user from a. */
	CHECK_STR(kube_config_context(cfg), "ctx-a");
	CHECK_STR(kube_config_server(cfg), "https://a:1");
	CHECK_STR(kube_config_namespace(cfg), "nb");
	t = kcfg_token(cfg, 0);
	CHECK_STR(t, "from-a");
	free(t);
	kube_config_free(cfg);
	REQUIRE(load(NULL, "ctx-b", &cfg, &err) == 0);
	CHECK_STR(kube_config_server(cfg), "https://only-b:3");
	kube_config_free(cfg);
	/* --kubeconfig wins over KUBECONFIG. */
	REQUIRE(load(b, NULL, &cfg, &err) == 0);
	CHECK_STR(kube_config_server(cfg), "https://only-b:3");
	kube_config_free(cfg);
	setenv("KUBECONFIG", "/nonexistent/1:/nonexistent/2", 1);
	CHECK_INT(load(NULL, NULL, &cfg, &err), CAIRN_ENOTFOUND);
	CHECK(strstr(err.msg, "/nonexistent/1") != NULL);
	if (saved) {
		setenv("KUBECONFIG", saved, 1);
		free(saved);
	} else {
		unsetenv("KUBECONFIG");
	}
	free(a);
	free(b);
	free(env);
}

static void
test_in_cluster(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct kube_config *cfg;
	char *dir, *p, *t;
	const char *home = getenv("HOME");
	char *saved_home = home ? xstrdup(home) : NULL;
	struct timespec ts = { 1, 100000000 };

	dir = xasprintf("%s/sa", UNIT_TMPDIR());
	mkdir(dir, 0700);
	free(write_tmp("sa/token", "sa-token-1\n"));
	free(write_tmp("sa/ca.crt", PEM));
	free(write_tmp("sa/namespace", "apps\n"));
	unsetenv("KUBECONFIG");
	setenv("HOME", dir, 1);		/* no ~/.kube/config there */
	setenv("CAIRN_SERVICEACCOUNT_DIR", dir, 1);
	setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	unsetenv("POD_NAMESPACE");
	REQUIRE(load(NULL, NULL, &cfg, &err) == 0);
	CHECK_STR(kube_config_source(cfg), "in-cluster");
	CHECK_STR(kube_config_server(cfg), "https://10.0.0.1:443");
	CHECK_STR(kube_config_namespace(cfg), "apps");
	t = kcfg_token(cfg, 0);
	CHECK_STR(t, "sa-token-1");
	free(t);
	/* Rotation: a new file is picked up after the check interval. */
	p = write_tmp("sa/token.new", "sa-token-2\n");
	t = xasprintf("%s/token", dir);
	CHECK(rename(p, t) == 0);
	free(p);
	free(t);
	nanosleep(&ts, NULL);
	t = kcfg_token(cfg, 0);
	CHECK_STR(t, "sa-token-2");
	free(t);
	kube_config_free(cfg);

	setenv("POD_NAMESPACE", "from-env", 1);
	setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
	REQUIRE(load(NULL, NULL, &cfg, &err) == 0);
	CHECK_STR(kube_config_namespace(cfg), "from-env");
	CHECK_STR(kube_config_server(cfg), "https://[fd00::1]:443");
	kube_config_free(cfg);

	p = xasprintf("%s/token", dir);
	unlink(p);
	free(p);
	CHECK_INT(load(NULL, NULL, &cfg, &err), CAIRN_EINVAL);
	CHECK(strstr(err.msg, "in-cluster config: token") != NULL);
	unsetenv("KUBERNETES_SERVICE_HOST");
	CHECK_INT(load(NULL, NULL, &cfg, &err), CAIRN_ENOTFOUND);
	CHECK(strstr(err.msg, "no cluster configuration") != NULL);
	unsetenv("KUBERNETES_SERVICE_PORT");
	unsetenv("CAIRN_SERVICEACCOUNT_DIR");
	unsetenv("POD_NAMESPACE");
	if (saved_home) {
		setenv("HOME", saved_home, 1);
		free(saved_home);
	}
	free(dir);
}

/* ---- paths and codes ---- */

static void
test_paths_and_codes(void)
{
	char *p;

	p = kube_path(&KUBE_GVR("", "v1", "configmaps"), "ns 1", "a/b", NULL);
	CHECK_STR(p, "/api/v1/namespaces/ns%201/configmaps/a%2Fb");
	free(p);
	p = kube_path(&KUBE_GVR("cairn.io", "v1", "backups"), "x", "b1",
	    "status");
	CHECK_STR(p, "/apis/cairn.io/v1/namespaces/x/backups/b1/status");
	free(p);
	p = kube_path(&KUBE_GVR("apiextensions.k8s.io", "v1",
	    "customresourcedefinitions"), NULL, NULL, NULL);
	CHECK_STR(p, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions");
	free(p);
	/* names that would move the request elsewhere (issue 18) */
	p = kube_path(&KUBE_GVR("", "v1", "configmaps"), "..", "..", NULL);
	CHECK_STR(p, "/api/v1/namespaces/%2E%2E/configmaps/%2E%2E");
	free(p);
	p = kube_path(&KUBE_GVR("", "v1", "configmaps"), ".", "a?b#c%d", NULL);
	CHECK_STR(p, "/api/v1/namespaces/%2E/configmaps/a%3Fb%23c%25d");
	free(p);
	{
		struct cairn_err err = CAIRN_ERR_INIT;
		cJSON *out = NULL;

		CHECK_INT(kube_get(NULL, &KUBE_GVR("apps", "v1/../../api/v1",
		    "secrets"), "x", "y", &out, &err), CAIRN_EINVAL);
		CHECK(strstr(err.msg, "not a group, version and resource") != NULL);
		CHECK_INT(kube_get(NULL, &KUBE_GVR("apps?x=1", "v1",
		    "deployments"), "x", "y", &out, &err), CAIRN_EINVAL);
		CHECK_INT(kube_get(NULL, &KUBE_GVR("..", "v1", "deployments"),
		    "x", "y", &out, &err), CAIRN_EINVAL);
		CHECK_INT(kube_get(NULL, &KUBE_GVR("", "v1#", "pods"), "x",
		    "y", &out, &err), CAIRN_EINVAL);
	}
	CHECK_INT(kube_http_rc(409, "Conflict"), CAIRN_ECONFLICT);
	CHECK_INT(kube_http_rc(409, "AlreadyExists"), CAIRN_EEXIST);
	CHECK_INT(kube_http_rc(404, "NotFound"), CAIRN_ENOTFOUND);
	CHECK_INT(kube_http_rc(410, "Expired"), CAIRN_EGONE);
	CHECK_INT(kube_http_rc(401, ""), CAIRN_EAUTH);
	CHECK_INT(kube_http_rc(403, ""), CAIRN_EAUTH);
	CHECK_INT(kube_http_rc(422, "Invalid"), CAIRN_EINVAL);
	CHECK_INT(kube_http_rc(429, ""), CAIRN_EBUSY);
	CHECK_INT(kube_http_rc(503, ""), CAIRN_ESERVER);
	CHECK_INT(kube_http_rc(201, ""), 0);
}

/* Velero's GetValidName: expected values computed with Python's hashlib. */
static void
test_label_value(void)
{
	char name[100], *v;

	v = kube_label_value("b1");
	CHECK_STR(v, "b1");
	free(v);
	memset(name, 'a', 63);
	name[63] = '\0';
	v = kube_label_value(name);
	CHECK_STR(v, name);
	free(v);
	memset(name, 'a', 64);
	name[64] = '\0';
	v = kube_label_value(name);
	CHECK_STR(v, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaffe054");
	CHECK_INT((int)strlen(v), 63);
	free(v);
	v = kube_label_value("my-very-long-schedule-name-that-is-exactly-sixty-"
	    "characte-20240101000000");
	CHECK_STR(v, "my-very-long-schedule-name-that-is-exactly-sixty-charactef34329");
	CHECK(kube_label_value_is(v, "my-very-long-schedule-name-that-is-"
	    "exactly-sixty-characte-20240101000000"));
	CHECK(!kube_label_value_is(v, "my-very-long-schedule-name-that-is-"
	    "exactly-sixty-characte-20240101000001"));
	free(v);
}

int
main(void)
{
	RUN(test_jsplit_every_split);
	RUN(test_jsplit_cap_and_garbage);
	RUN(test_lsplit_every_split);
	RUN(test_lsplit_truncated);
	RUN(test_selector_match);
	RUN(test_selector_errors);
	RUN(test_selector_string);
	RUN(test_selector_object);
	RUN(test_kubeconfig_basic);
	RUN(test_kubeconfig_errors);
	RUN(test_kubeconfig_merge);
	RUN(test_in_cluster);
	RUN(test_paths_and_codes);
	RUN(test_label_value);
	return unit_done();
}
