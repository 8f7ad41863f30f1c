/*
 * test_engine_bspec.c: Backup spec validation, Velero's filters and
 * includeClusterResources rules, item keys and tarball paths.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "engine/bspec.h"
#include "tests/unit/unit.h"

static struct bspec *
parse(const char *json, cJSON **errs_out)
{
	cJSON *b = cJSON_Parse(json);
	cJSON *errs = cJSON_CreateArray();
	struct bspec *s = NULL;

	if (b == NULL || bspec_parse(b, &s, errs) < 0)
		s = NULL;
	cJSON_Delete(b);
	if (errs_out != NULL)
		*errs_out = errs;
	else
		cJSON_Delete(errs);
	return s;
}

static int
errs_contain(const cJSON *errs, const char *needle)
{
	const cJSON *e;

	cJSON_ArrayForEach(e, errs)
		if (strstr(e->valuestring, needle) != NULL)
			return 1;
	return 0;
}

static struct kube_resource
res(const char *group, const char *version, const char *plural,
	const char *kind, int namespaced)
{
	static char *empty[] = { NULL };
	struct kube_resource r;

	memset(&r, 0, sizeof r);
	r.group = (char *)group;
	r.version = (char *)version;
	r.resource = (char *)plural;
	r.kind = (char *)kind;
	r.singular = (char *)"";
	r.short_names = empty;
	r.categories = empty;
	r.subresources = empty;
	r.verbs = KUBE_VERB_LIST | KUBE_VERB_GET;
	r.namespaced = namespaced;
	return r;
}

static void
test_validation_errors(void)
{
	cJSON *errs;
	struct bspec *s;

	s = parse("{\"spec\":{\"includedNamespaces\":[\"a\",\"b\"],"
	    "\"excludedNamespaces\":[\"b\"]}}", &errs);
	CHECK(s == NULL);
	CHECK(errs_contain(errs, "excludes list cannot contain an item in "
	    "the includes list: b"));
	cJSON_Delete(errs);

	s = parse("{\"spec\":{\"ttl\":\"3 days\"}}", &errs);
	CHECK(s == NULL);
	CHECK(errs_contain(errs, "Invalid TTL \"3 days\""));
	cJSON_Delete(errs);

	s = parse("{\"spec\":{\"labelSelector\":{\"matchExpressions\":"
	    "[{\"key\":\"app\",\"operator\":\"Like\",\"values\":[\"x\"]}]}}}",
	    &errs);
	CHECK(s == NULL);
	CHECK(errs_contain(errs, "Invalid label selector"));
	cJSON_Delete(errs);

	s = parse("{\"spec\":{\"labelSelector\":{\"matchLabels\":"
	    "{\"bad key!\":\"x\"}}}}", &errs);
	CHECK(s == NULL);
	CHECK(errs_contain(errs, "Invalid label selector"));
	cJSON_Delete(errs);

	s = parse("{\"spec\":{\"labelSelector\":{\"matchLabels\":{\"a\":\"b\"}},"
	    "\"orLabelSelectors\":[{\"matchLabels\":{\"c\":\"d\"}}]}}", &errs);
	CHECK(s == NULL);
	CHECK(errs_contain(errs, "only one can be specified"));
	cJSON_Delete(errs);

	s = parse("{\"spec\":{\"excludedResources\":[\"*\"]}}", &errs);
	CHECK(s == NULL);
	CHECK(errs_contain(errs, "excludes list cannot contain '*'"));
	cJSON_Delete(errs);
}

static void
test_defaults_and_selector(void)
{
	cJSON *errs, *o;
	struct bspec *s;

	s = parse("{\"spec\":{}}", &errs);
	REQUIRE(s != NULL);
	CHECK_INT(cJSON_GetArraySize(errs), 0);
	CHECK_INT(s->ttl_us, BSPEC_DEFAULT_TTL_US);
	CHECK(s->all_namespaces);
	CHECK_INT(s->cluster, BSPEC_CLUSTER_AUTO);
	CHECK(s->location == NULL);
	bspec_free(s);
	cJSON_Delete(errs);

	s = parse("{\"spec\":{\"ttl\":\"72h\",\"storageLocation\":\"loc\","
	    "\"includeClusterResources\":false,\"labelSelector\":{"
	    "\"matchLabels\":{\"app\":\"web\"},\"matchExpressions\":[{\"key\":"
	    "\"tier\",\"operator\":\"NotIn\",\"values\":[\"db\",\"cache\"]}]}}}",
	    NULL);
	REQUIRE(s != NULL);
	CHECK_INT(s->ttl_us, 72LL * 3600 * 1000000);
	CHECK_STR(s->location, "loc");
	CHECK_INT(s->cluster, BSPEC_CLUSTER_NO);
	CHECK_STR(s->selector_text, "app=web,tier notin (db,cache)");
	o = cJSON_Parse("{\"metadata\":{\"labels\":{\"app\":\"web\"}}}");
	CHECK(bspec_labels_match(s, o));
	cJSON_Delete(o);
	o = cJSON_Parse("{\"metadata\":{\"labels\":{\"app\":\"web\","
	    "\"tier\":\"db\"}}}");
	CHECK(!bspec_labels_match(s, o));
	cJSON_Delete(o);
	bspec_free(s);

	s = parse("{\"spec\":{\"orLabelSelectors\":[{\"matchLabels\":{\"a\":"
	    "\"1\"}},{\"matchLabels\":{\"b\":\"2\"}}]}}", NULL);
	REQUIRE(s != NULL);
	o = cJSON_Parse("{\"metadata\":{\"labels\":{\"b\":\"2\"}}}");
	CHECK(bspec_labels_match(s, o));
	cJSON_Delete(o);
	o = cJSON_Parse("{\"metadata\":{\"labels\":{\"c\":\"2\"}}}");
	CHECK(!bspec_labels_match(s, o));
	cJSON_Delete(o);
	bspec_free(s);
}

static void
test_namespace_and_resource_filters(void)
{
	struct bspec *s;
	struct kube_resource deploy = res("apps", "v1", "deployments",
	    "Deployment", 1);
	struct kube_resource cm = res("", "v1", "configmaps", "ConfigMap", 1);

	s = parse("{\"spec\":{\"includedNamespaces\":[\"app-*\",\"db\"],"
	    "\"excludedNamespaces\":[\"app-test*\"],\"includedResources\":"
	    "[\"deployments.apps\",\"ConfigMap\"]}}", NULL);
	REQUIRE(s != NULL);
	CHECK(!s->all_namespaces);
	CHECK(bspec_ns_included(s, "app-web"));
	CHECK(bspec_ns_included(s, "db"));
	CHECK(!bspec_ns_included(s, "app-test1"));
	CHECK(!bspec_ns_included(s, "kube-system"));
	CHECK(bspec_resource_included(s, &deploy));
	CHECK(bspec_resource_included(s, &cm));
	bspec_free(s);

	s = parse("{\"spec\":{\"excludedResources\":[\"configmaps\"]}}", NULL);
	REQUIRE(s != NULL);
	CHECK(!bspec_resource_included(s, &cm));
	CHECK(bspec_resource_included(s, &deploy));
	bspec_free(s);
}

static void
test_cluster_resources(void)
{
	struct bspec *s;
	struct kube_resource pv = res("", "v1", "persistentvolumes",
	    "PersistentVolume", 0);
	struct kube_resource crd = res("apiextensions.k8s.io", "v1",
	    "customresourcedefinitions", "CustomResourceDefinition", 0);
	struct kube_resource sc = res("storage.k8s.io", "v1", "storageclasses",
	    "StorageClass", 0);
	struct kube_resource ns = res("", "v1", "namespaces", "Namespace", 0);
	struct kube_resource pod = res("", "v1", "pods", "Pod", 1);

	/* nil + all namespaces: all cluster-scoped. */
	s = parse("{\"spec\":{}}", NULL);
	REQUIRE(s != NULL);
	CHECK_INT(bspec_walk_of(s, &sc), BSPEC_WALK_ALL);
	CHECK_INT(bspec_walk_of(s, &pv), BSPEC_WALK_ALL);
	bspec_free(s);
	/* nil + some namespaces: only related ones. */
	s = parse("{\"spec\":{\"includedNamespaces\":[\"a\"]}}", NULL);
	REQUIRE(s != NULL);
	CHECK_INT(bspec_walk_of(s, &sc), BSPEC_WALK_SKIP);
	CHECK_INT(bspec_walk_of(s, &pv), BSPEC_WALK_RELATED);
	CHECK_INT(bspec_walk_of(s, &crd), BSPEC_WALK_RELATED);
	CHECK_INT(bspec_walk_of(s, &ns), BSPEC_WALK_ALL);
	CHECK_INT(bspec_walk_of(s, &pod), BSPEC_WALK_ALL);
	bspec_free(s);
	/* true: all; false: none (namespaces still follow the ns filter). */
	s = parse("{\"spec\":{\"includedNamespaces\":[\"a\"],"
	    "\"includeClusterResources\":true}}", NULL);
	REQUIRE(s != NULL);
	CHECK_INT(bspec_walk_of(s, &sc), BSPEC_WALK_ALL);
	bspec_free(s);
	s = parse("{\"spec\":{\"includeClusterResources\":false}}", NULL);
	REQUIRE(s != NULL);
	CHECK_INT(bspec_walk_of(s, &sc), BSPEC_WALK_SKIP);
	CHECK_INT(bspec_walk_of(s, &pv), BSPEC_WALK_SKIP);
	CHECK_INT(bspec_walk_of(s, &ns), BSPEC_WALK_ALL);
	bspec_free(s);
}

static void
test_keys_order_paths(void)
{
	struct buf a, b;
	char *k, *parts[4];

	buf_init(&a, 4096);
	buf_init(&b, 4096);
	CHECK(bspec_item_paths("apps", "v1", "deployments", "web", "d1", &a,
	    &b) == 0);
	CHECK_STR(buf_cstr(&a), "resources/deployments.apps/namespaces/web/"
	    "d1.json");
	CHECK_STR(buf_cstr(&b), "resources/deployments.apps/v1-preferredversion/"
	    "namespaces/web/d1.json");
	CHECK(bspec_item_paths("", "v1", "persistentvolumes", NULL, "pv1", &a,
	    &b) == 0);
	CHECK_STR(buf_cstr(&a), "resources/persistentvolumes/cluster/pv1.json");
	CHECK_STR(buf_cstr(&b), "resources/persistentvolumes/v1-preferredversion/"
	    "cluster/pv1.json");
	buf_free(&a);
	buf_free(&b);

	k = bspec_item_key("", "pods", "ns1", "p1");
	CHECK_STR(k, "/pods/ns1/p1");
	REQUIRE(bspec_key_split(k, parts) == 0);
	CHECK_STR(parts[0], "");
	CHECK_STR(parts[1], "pods");
	CHECK_STR(parts[2], "ns1");
	CHECK_STR(parts[3], "p1");
	for (int i = 0; i < 4; i++)
		free(parts[i]);
	free(k);
	CHECK(bspec_key_split("a/b/c", parts) == CAIRN_EINVAL);

	/* pass first, then group ("" core first), then plural. */
	CHECK(bspec_resource_cmp(0, "", "pods", 0, "apps", "deployments") < 0);
	CHECK(bspec_resource_cmp(0, "", "persistentvolumeclaims", 0, "",
	    "persistentvolumes") < 0);
	CHECK(bspec_resource_cmp(1, "", "persistentvolumes", 0, "zz.io",
	    "x") > 0);
}

int
main(void)
{
	RUN(test_validation_errors);
	RUN(test_defaults_and_selector);
	RUN(test_namespace_and_resource_filters);
	RUN(test_cluster_resources);
	RUN(test_keys_order_paths);
	return unit_done();
}
