/*
 * test_kube_flow.c: the client's push-back per flow (kube/flow.c): flow
 * classes of request paths, holds after a 429 (nothing of the flow before
 * its Retry-After; other flows untouched unless the server names the same
 * priority level), the in-flight window's cut and reopening, and stop.
 */
#include "unit.h"
#include "kube/internal.h"
#include "base/timeutil.h"

#include <pthread.h>

static void
test_keys(void)
{
	char k[96];

	kube_flow_key("POST", "/api/v1/namespaces/ns/secrets", k, sizeof k);
	CHECK_STR(k, "POST /secrets");
	kube_flow_key("POST", "/api/v1/namespaces/other/secrets?x=1", k,
	    sizeof k);
	CHECK_STR(k, "POST /secrets");
	kube_flow_key("GET", "/api/v1/namespaces/ns", k, sizeof k);
	CHECK_STR(k, "GET /namespaces");
	kube_flow_key("GET", "/api/v1/namespaces?limit=500", k, sizeof k);
	CHECK_STR(k, "GET /namespaces");
	kube_flow_key("PUT", "/apis/apps/v1/namespaces/ns/deployments/d/status",
	    k, sizeof k);
	CHECK_STR(k, "PUT apps/deployments/status");
	kube_flow_key("GET", "/apis/apps/v1/deployments?limit=500&continue=x",
	    k, sizeof k);
	CHECK_STR(k, "GET apps/deployments");
	kube_flow_key("PUT", "/api/v1/namespaces/ns/pods/p/status", k,
	    sizeof k);
	CHECK_STR(k, "PUT /pods/status");
	kube_flow_key("GET", "/apis/cairn.io/v1/backupstoragelocations", k,
	    sizeof k);
	CHECK_STR(k, "GET cairn.io/backupstoragelocations");
	kube_flow_key("GET", "/apis/apps/v1", k, sizeof k);
	CHECK_STR(k, "GET (discovery)");
	kube_flow_key("GET", "/api", k, sizeof k);
	CHECK_STR(k, "GET (discovery)");
	kube_flow_key("GET", "/version", k, sizeof k);
	CHECK_STR(k, "GET version");
}

/* Enter + leave one request; returns microseconds enter waited. */
static int64_t
one(struct kube_flows *f, const char *method, const char *path, long http,
    int64_t hold_us, const char *pl)
{
	int64_t t0 = time_mono_us();
	int s = kube_flow_enter(f, method, path, 1, NULL);
	int64_t waited = time_mono_us() - t0;

	if (s >= 0)
		kube_flow_leave(f, s, 1, http, hold_us, pl);
	return waited;
}

static void
test_hold(void)
{
	struct kube_flows *f = kube_flows_new();
	uint64_t pb, held;
	int64_t t0, w;

	CHECK(one(f, "POST", "/api/v1/namespaces/a/secrets", 201, 0, NULL) <
	    100000);
	/* a 429 holding 300 ms: the next create waits it out */
	t0 = time_mono_us();
	one(f, "POST", "/api/v1/namespaces/a/secrets", 429, 300000, NULL);
	/* another flow is not held */
	CHECK(one(f, "GET", "/api/v1/namespaces/a/configmaps", 200, 0, NULL) <
	    100000);
	w = one(f, "POST", "/api/v1/namespaces/b/secrets", 201, 0, NULL);
	CHECK(time_mono_us() - t0 >= 300000);
	CHECK(w >= 250000);
	/* and after the hold, no wait */
	CHECK(one(f, "POST", "/api/v1/namespaces/a/secrets", 201, 0, NULL) <
	    100000);
	kube_flows_stats(f, &pb, &held);
	CHECK_INT(pb, 1);
	CHECK(held >= 250000);
	kube_flows_free(f);
}

static void
test_priority_level(void)
{
	struct kube_flows *f = kube_flows_new();
	int64_t t0;

	/* both classes were answered under priority level "pl-1" */
	one(f, "POST", "/api/v1/namespaces/a/secrets", 201, 0, "pl-1");
	one(f, "GET", "/api/v1/configmaps", 200, 0, "pl-1");
	one(f, "GET", "/api/v1/pods", 200, 0, "pl-2");
	t0 = time_mono_us();
	one(f, "POST", "/api/v1/namespaces/a/secrets", 429, 300000, "pl-1");
	/* the level is held: its other class waits too, pl-2 does not */
	CHECK(one(f, "GET", "/api/v1/pods", 200, 0, "pl-2") < 100000);
	one(f, "GET", "/api/v1/configmaps", 200, 0, "pl-1");
	CHECK(time_mono_us() - t0 >= 300000);
	kube_flows_free(f);
}

struct held {
	struct kube_flows *f;
	int slot;
	atomic_int entered;
};

static void *
enter_th(void *arg)
{
	struct held *h = arg;

	h->slot = kube_flow_enter(h->f, "POST", "/api/v1/namespaces/a/pods", 1,
	    NULL);
	h->entered = 1;
	return NULL;
}

static void
test_window(void)
{
	struct kube_flows *f = kube_flows_new();
	const char *p = "/api/v1/namespaces/a/pods";
	int s[4], i;
	struct held h = { f, -1, 0 };
	pthread_t th;

	/* four in flight, one comes back 429 with a short hold */
	for (i = 0; i < 4; i++)
		s[i] = kube_flow_enter(f, "POST", p, 1, NULL);
	kube_flow_leave(f, s[0], 1, 429, 10000, NULL);
	/* a second 429 of the same burst does not cut again */
	kube_flow_leave(f, s[1], 1, 429, 10000, NULL);
	time_sleep_us(20000, NULL);
	/* window 2 and 2 in flight: a third waits */
	pthread_create(&th, NULL, enter_th, &h);
	time_sleep_us(150000, NULL);
	CHECK_INT(h.entered, 0);
	/* a success while the window is full opens it by one */
	kube_flow_leave(f, s[2], 1, 201, 0, NULL);
	pthread_join(th, NULL);
	CHECK_INT(h.entered, 1);
	kube_flow_leave(f, s[3], 1, 201, 0, NULL);
	kube_flow_leave(f, h.slot, 1, 201, 0, NULL);
	kube_flows_free(f);
}

static void
test_stop(void)
{
	struct kube_flows *f = kube_flows_new();
	atomic_int stop = 1;
	int64_t t0;

	one(f, "GET", "/api/v1/pods", 429, 60 * 1000000LL, NULL);
	t0 = time_mono_us();
	CHECK_INT(kube_flow_enter(f, "GET", "/api/v1/pods", 1, &stop),
	    CAIRN_ECANCELED);
	CHECK(time_mono_us() - t0 < 1000000);
	/* watches honour the hold too, but a stop ends the wait */
	CHECK_INT(kube_flow_enter(f, "GET", "/api/v1/pods?watch=1", 0, &stop),
	    CAIRN_ECANCELED);
	kube_flows_free(f);
}

static void
test_many_classes(void)
{
	struct kube_flows *f = kube_flows_new();
	char p[64];
	int i;

	/* more classes than slots: old idle ones are reused, nothing waits */
	for (i = 0; i < 500; i++) {
		snprintf(p, sizeof p, "/apis/g%d.io/v1/things", i);
		CHECK(one(f, "GET", p, 200, 0, NULL) < 100000);
	}
	kube_flows_free(f);
}

int
main(void)
{
	RUN(test_keys);
	RUN(test_hold);
	RUN(test_priority_level);
	RUN(test_window);
	RUN(test_stop);
	RUN(test_many_classes);
	return unit_done();
}
