/*
 * test_kube_discovery.c: which version of each resource discovery
 * chooses (client-go ServerPreferredResources), and what a group-version
 * that answers 503 costs (an aggregated API whose service is down).
 *
 * The fake API server (unit_http.h) serves:
 *   core v1: configmaps;
 *   example.io, versions v1 (preferred) and v1alpha1: widgets in both,
 *     envoyfilters only in v1alpha1 (as Istio's EnvoyFilter);
 *   two.io, versions v1beta1 then v2 (preferred second): things in both,
 *     olds only in v1beta1;
 *   metrics.k8s.io v1beta1: 503 ServiceUnavailable, always;
 *   gone.io v1: 404 (a CRD deleted between /apis and /apis/G/V).
 * With `aggregated` set, /api and /apis answer the same as aggregated
 * discovery (apidiscovery.k8s.io/v2) would, metrics.k8s.io Stale, and
 * widgets with a status subresource, short names and a category.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stdatomic.h>

#include "base/timeutil.h"
#include "kube/kube.h"
#include "unit.h"
#include "unit_http.h"
#include "unit_kube.h"

#define RES(name, kind) "{\"name\":\"" name "\",\"singularName\":\"\"," \
	"\"namespaced\":true,\"kind\":\"" kind "\",\"verbs\":[\"get\"," \
	"\"list\",\"create\",\"delete\"]}"

static atomic_int hiccups;	/* two.io/v2 answers 500 this many times */
static atomic_int aggregated;	/* /api and /apis: APIGroupDiscoveryList */

#define AGG_RES(name, kind, group, version, extra) "{\"resource\":\"" \
	name "\",\"responseKind\":{\"group\":\"" group "\",\"version\":\"" \
	version "\",\"kind\":\"" kind "\"},\"scope\":\"Namespaced\"," \
	"\"singularResource\":\"\",\"verbs\":[\"get\",\"list\",\"create\"," \
	"\"delete\"]" extra "}"
#define AGG_WIDGETS(version) AGG_RES("widgets", "Widget", "example.io", \
	version, ",\"shortNames\":[\"wd\"],\"categories\":[\"all\"]," \
	"\"subresources\":[{\"subresource\":\"status\",\"responseKind\":" \
	"{\"group\":\"example.io\",\"version\":\"" version "\",\"kind\":" \
	"\"Widget\"},\"verbs\":[\"get\",\"patch\",\"update\"]}]")

/* What aggregated discovery answers for /api (core) or /apis. */
static void
agg_body(struct uh_resp *rs, int core)
{
	if (core) {
		uh_body(rs, "{\"kind\":\"APIGroupDiscoveryList\",\"apiVersion\":"
		    "\"apidiscovery.k8s.io/v2\",\"metadata\":{},\"items\":["
		    "{\"metadata\":{\"creationTimestamp\":null},\"versions\":"
		    "[{\"version\":\"v1\",\"resources\":[" AGG_RES("configmaps",
		    "ConfigMap", "", "v1", "") "],\"freshness\":\"Current\"}]}]}");
		return;
	}
	uh_body(rs, "{\"kind\":\"APIGroupDiscoveryList\",\"apiVersion\":"
	    "\"apidiscovery.k8s.io/v2\",\"metadata\":{},\"items\":["
	    "{\"metadata\":{\"name\":\"example.io\"},\"versions\":["
	    "{\"version\":\"v1\",\"resources\":[" AGG_WIDGETS("v1") "],"
	    "\"freshness\":\"Current\"},"
	    "{\"version\":\"v1alpha1\",\"resources\":[" AGG_WIDGETS("v1alpha1")
	    "," AGG_RES("envoyfilters", "EnvoyFilter", "example.io", "v1alpha1",
	    "") "],\"freshness\":\"Current\"}]},"
	    "{\"metadata\":{\"name\":\"two.io\"},\"versions\":["
	    "{\"version\":\"v2\",\"resources\":[" AGG_RES("things", "Thing",
	    "two.io", "v2", "") "],\"freshness\":\"Current\"},"
	    "{\"version\":\"v1beta1\",\"resources\":[" AGG_RES("things",
	    "Thing", "two.io", "v1beta1", "") "," AGG_RES("olds", "Old",
	    "two.io", "v1beta1", "") "],\"freshness\":\"Current\"}]},"
	    "{\"metadata\":{\"name\":\"metrics.k8s.io\"},\"versions\":["
	    "{\"version\":\"v1beta1\",\"freshness\":\"Stale\"}]}]}");
}

static void
handler(void *arg, const struct uh_req *rq, struct uh_resp *rs)
{
	const char *p = rq->path;

	(void)arg;
	rs->code = 200;
	if (strcmp(p, "/apis/two.io/v2") == 0 && atomic_load(&hiccups) > 0) {
		atomic_fetch_sub(&hiccups, 1);
		rs->code = 500;
		uh_body(rs, "{\"kind\":\"Status\",\"apiVersion\":\"v1\","
		    "\"status\":\"Failure\",\"reason\":\"InternalError\","
		    "\"code\":500}");
	} else if (atomic_load(&aggregated) && (strcmp(p, "/api") == 0 ||
	    strcmp(p, "/apis") == 0)) {
		agg_body(rs, strcmp(p, "/api") == 0);
	} else if (strcmp(p, "/api") == 0)
		uh_body(rs, "{\"kind\":\"APIVersions\",\"versions\":[\"v1\"]}");
	else if (strcmp(p, "/api/v1") == 0)
		uh_body(rs, "{\"kind\":\"APIResourceList\",\"groupVersion\":"
		    "\"v1\",\"resources\":[" RES("configmaps", "ConfigMap")
		    "]}");
	else if (strcmp(p, "/apis") == 0)
		uh_body(rs, "{\"kind\":\"APIGroupList\",\"groups\":["
		    "{\"name\":\"example.io\",\"versions\":["
		    "{\"groupVersion\":\"example.io/v1\",\"version\":\"v1\"},"
		    "{\"groupVersion\":\"example.io/v1alpha1\",\"version\":"
		    "\"v1alpha1\"}],\"preferredVersion\":{\"groupVersion\":"
		    "\"example.io/v1\",\"version\":\"v1\"}},"
		    "{\"name\":\"two.io\",\"versions\":["
		    "{\"groupVersion\":\"two.io/v1beta1\",\"version\":"
		    "\"v1beta1\"},{\"groupVersion\":\"two.io/v2\",\"version\":"
		    "\"v2\"}],\"preferredVersion\":{\"groupVersion\":"
		    "\"two.io/v2\",\"version\":\"v2\"}},"
		    "{\"name\":\"metrics.k8s.io\",\"versions\":[{\"groupVersion\":"
		    "\"metrics.k8s.io/v1beta1\",\"version\":\"v1beta1\"}],"
		    "\"preferredVersion\":{\"groupVersion\":"
		    "\"metrics.k8s.io/v1beta1\",\"version\":\"v1beta1\"}},"
		    "{\"name\":\"gone.io\",\"versions\":[{\"groupVersion\":"
		    "\"gone.io/v1\",\"version\":\"v1\"}],\"preferredVersion\":"
		    "{\"groupVersion\":\"gone.io/v1\",\"version\":\"v1\"}}]}");
	else if (strcmp(p, "/apis/example.io/v1") == 0)
		uh_body(rs, "{\"kind\":\"APIResourceList\",\"resources\":["
		    RES("widgets", "Widget") "]}");
	else if (strcmp(p, "/apis/example.io/v1alpha1") == 0)
		uh_body(rs, "{\"kind\":\"APIResourceList\",\"resources\":["
		    RES("widgets", "Widget") "," RES("envoyfilters",
		    "EnvoyFilter") "]}");
	else if (strcmp(p, "/apis/two.io/v1beta1") == 0)
		uh_body(rs, "{\"kind\":\"APIResourceList\",\"resources\":["
		    RES("things", "Thing") "," RES("olds", "Old") "]}");
	else if (strcmp(p, "/apis/two.io/v2") == 0)
		uh_body(rs, "{\"kind\":\"APIResourceList\",\"resources\":["
		    RES("things", "Thing") "]}");
	else if (strcmp(p, "/apis/metrics.k8s.io/v1beta1") == 0) {
		rs->code = 503;
		uh_body(rs, "{\"kind\":\"Status\",\"apiVersion\":\"v1\","
		    "\"status\":\"Failure\",\"message\":\"service unavailable\","
		    "\"reason\":\"ServiceUnavailable\",\"code\":503}");
	} else {
		rs->code = 404;
		uh_body(rs, "{\"kind\":\"Status\",\"apiVersion\":\"v1\","
		    "\"status\":\"Failure\",\"reason\":\"NotFound\","
		    "\"code\":404}");
	}
}

static struct kube *kube_;

/* The chosen version of group/resource in d, or "" if none is chosen. */
static const char *
chosen(const struct kube_discovery *d, const char *group, const char *res)
{
	for (size_t i = 0; i < kube_discovery_count(d); i++) {
		const struct kube_resource *r = kube_discovery_at(d, i);

		if (r->chosen && strcmp(r->group, group) == 0 &&
		    strcmp(r->resource, res) == 0)
			return r->version;
	}
	return "";
}

static int
count_listable(void *arg, const struct kube_resource *r)
{
	(void)r;
	(*(int *)arg)++;
	return 0;
}

/* The versions chosen from what the fake server serves. */
static void
check_chosen(const struct kube_discovery *d)
{
	int n = 0;

	CHECK_STR(chosen(d, "", "configmaps"), "v1");
	CHECK_STR(chosen(d, "example.io", "widgets"), "v1");
	CHECK_STR(chosen(d, "example.io", "envoyfilters"), "v1alpha1");
	/* the preferred version wins even when listed second */
	CHECK_STR(chosen(d, "two.io", "things"), "v2");
	CHECK_STR(chosen(d, "two.io", "olds"), "v1beta1");
	/* one chosen entry per resource: what a backup walks */
	kube_discovery_foreach_listable(d, count_listable, &n);
	CHECK_INT(n, 5);
}

static void
test_chosen_versions(void)
{
	struct kube_discovery *d;
	struct kube_resource *r;
	struct cairn_err err = CAIRN_ERR_INIT;

	REQUIRE(kube_discovery_get(kube_, 1, &d, &err) == 0);
	check_chosen(d);
	/* lookups by name find the kind served only in v1alpha1 */
	CHECK(kube_discovery_lookup(d, "envoyfilters.example.io") != NULL);
	CHECK(kube_discovery_lookup(d, "EnvoyFilter") != NULL);
	CHECK(kube_discovery_find(d, "example.io", "v1alpha1", "widgets") !=
	    NULL);
	kube_discovery_release(d);
	REQUIRE(kube_resolve(kube_, "envoyfilters", NULL, &r, &err) == 0);
	CHECK_STR(r->version, "v1alpha1");
	kube_resource_free(r);
	REQUIRE(kube_resolve(kube_, "things.two.io", NULL, &r, &err) == 0);
	CHECK_STR(r->version, "v2");
	kube_resource_free(r);
	REQUIRE(kube_resolve(kube_, "things.v1beta1.two.io", NULL, &r,
	    &err) == 0);
	CHECK_STR(r->version, "v1beta1");
	kube_resource_free(r);
}

static void
test_failed_group_quick_and_cached(void)
{
	struct kube_discovery *d;
	const struct kube_disc_failure *f;
	struct cairn_err err = CAIRN_ERR_INIT;
	int64_t t0;

	uh_log_clear();
	t0 = time_mono_us();
	REQUIRE(kube_discovery_get(kube_, 1, &d, &err) == 0);
	/* no 25 s of retries under the discovery lock */
	CHECK(time_mono_us() - t0 < 3 * TIME_US_PER_SEC);
	CHECK(uh_log_count("GET /apis/metrics.k8s.io/v1beta1") <= 2);
	/* the 503 is a failure; the 404 is not */
	REQUIRE(kube_discovery_failed_count(d) == 1);
	f = kube_discovery_failed_at(d, 0);
	CHECK_STR(f->group, "metrics.k8s.io");
	CHECK_STR(f->version, "v1beta1");
	CHECK(strstr(f->message, "503") != NULL);
	CHECK_STR(chosen(d, "example.io", "widgets"), "v1");
	kube_discovery_release(d);
	/* A refresh a moment later does not ask the failed group again. */
	uh_log_clear();
	REQUIRE(kube_discovery_get(kube_, 1, &d, &err) == 0);
	CHECK_INT(uh_log_count("metrics.k8s.io"), 0);
	CHECK(uh_log_count("GET /apis/example.io/v1") >= 1);
	CHECK_INT(kube_discovery_failed_count(d), 1);
	kube_discovery_release(d);
}

/*
 * Issue 19 (found by tests/chaos): three 500s in a row from the API server
 * itself do not drop a group from the snapshot (a 503, an aggregated API
 * that is down, still fails quickly: above).
 */
static void
test_hiccup_does_not_drop_a_group(void)
{
	struct kube_discovery *d;
	struct cairn_err err = CAIRN_ERR_INIT;

	atomic_store(&hiccups, 3);
	REQUIRE(kube_discovery_get(kube_, 1, &d, &err) == 0);
	CHECK_INT(atomic_load(&hiccups), 0);
	CHECK_STR(chosen(d, "two.io", "things"), "v2");
	for (size_t i = 0; i < kube_discovery_failed_count(d); i++)
		CHECK(strcmp(kube_discovery_failed_at(d, i)->group, "two.io") != 0);
	kube_discovery_release(d);
}

/*
 * Aggregated discovery: the same snapshot from /api and /apis alone (no
 * group-version asked), subresources folded in, the Stale group-version a
 * failure as a 503 is; a server that answers the plain documents to the
 * same Accept header (every test above) gets plain discovery.
 */
static void
test_aggregated(void)
{
	struct kube_discovery *d;
	const struct kube_resource *r;
	const struct kube_disc_failure *f;
	struct cairn_err err = CAIRN_ERR_INIT;

	atomic_store(&aggregated, 1);
	uh_log_clear();
	REQUIRE(kube_discovery_get(kube_, 1, &d, &err) == 0);
	CHECK_INT(uh_log_total(), 2);
	CHECK_INT(uh_log_count("GET /apis/"), 0);
	check_chosen(d);
	r = kube_discovery_lookup(d, "wd");
	REQUIRE(r != NULL);
	CHECK_STR(r->resource, "widgets");
	CHECK_STR(r->kind, "Widget");
	CHECK(r->namespaced);
	CHECK(kube_resource_has_sub(r, "status"));
	CHECK(r->verbs & KUBE_VERB_LIST);
	REQUIRE(kube_discovery_failed_count(d) == 1);
	f = kube_discovery_failed_at(d, 0);
	CHECK_STR(f->group, "metrics.k8s.io");
	CHECK_STR(f->version, "v1beta1");
	CHECK(strstr(f->message, "Stale") != NULL);
	/* the stale version is not the group's: as client-go */
	for (size_t i = 0; i < kube_discovery_group_count(d); i++) {
		const struct kube_group *g = kube_discovery_group_at(d, i);

		if (strcmp(g->name, "metrics.k8s.io") == 0)
			CHECK(g->versions[0] == NULL);
		if (strcmp(g->name, "two.io") == 0)
			CHECK_STR(g->preferred, "v2");
	}
	CHECK_STR(kube_discovery_group_at(d, 0)->name, "");
	kube_discovery_release(d);
	atomic_store(&aggregated, 0);
}

int
main(void)
{
	struct kube_client_opts ko;
	unsigned port;

	memset(&ko, 0, sizeof ko);
	ko.timeout_us = 3 * TIME_US_PER_SEC;	/* default retries (10) */
	if (uh_start(handler, NULL, &port) < 0 ||
	    (kube_ = unit_kube_opts(port, NULL, "discovery", &ko)) == NULL) {
		printf("FAIL: test_kube_discovery.c:setup\n");
		return 1;
	}
	RUN(test_chosen_versions);
	RUN(test_failed_group_quick_and_cached);
	RUN(test_hiccup_does_not_drop_a_group);
	RUN(test_aggregated);
	kube_free(kube_);
	uh_stop();
	return unit_done();
}
