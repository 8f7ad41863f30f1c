/*
 * test_kube_watch.c: how a reconnecting watch resumes and backs off.
 *
 * The fake API server (unit_http.h) answers each watch request with a
 * whole body and closes, as an API server ending a watch:
 *   - mode BOOKMARK: one BOOKMARK at resourceVersion 40 + n (n = the
 *     request's number), so the next request must resume from it;
 *   - mode ERROR: one ERROR event carrying a 500 Status (what a real API
 *     server sends when its watch cache fails), which ends the stream;
 *     reconnecting at once would hammer the server.
 */
#include "config.h"

#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timeutil.h"
#include "kube/kube.h"
#include "unit.h"
#include "unit_http.h"
#include "unit_kube.h"

enum { M_BOOKMARK, M_ERROR };

static struct {
	int mode;
	atomic_int n;		/* watch requests answered */
} fk;

static void
handler(void *arg, const struct uh_req *rq, struct uh_resp *rs)
{
	char body[512];

	(void)arg;
	if (strcmp(rq->path, "/api/v1/configmaps") != 0 ||
	    strstr(rq->query, "watch=1") == NULL) {
		rs->code = 404;
		uh_body(rs, "{\"kind\":\"Status\",\"code\":404}");
		return;
	}
	fk.n++;
	if (fk.mode == M_BOOKMARK)
		snprintf(body, sizeof body, "{\"type\":\"BOOKMARK\",\"object\":"
		    "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":"
		    "{\"resourceVersion\":\"%d\"}}}\n", 40 + fk.n);
	else
		snprintf(body, sizeof body, "{\"type\":\"ERROR\",\"object\":"
		    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
		    "\"status\":\"Failure\",\"message\":\"Internal error "
		    "occurred: etcd cluster is unavailable\",\"reason\":"
		    "\"InternalError\",\"code\":500}}\n");
	rs->code = 200;
	uh_body(rs, body);
}

static struct kube *kube_;
static atomic_int stop_;
static int errors_seen;

static int
on_event(void *arg, enum kube_event_type t, cJSON *obj)
{
	(void)arg;
	(void)obj;
	if (t == KUBE_EV_ERROR)
		errors_seen++;
	return 0;
}

static struct {
	int64_t us;		/* stop after this long */
	int until_n;		/* > 0: or once this many requests came */
} stop_at;

static void *
stopper(void *arg)
{
	int64_t end = time_mono_us() + stop_at.us;

	(void)arg;
	while (time_mono_us() < end &&
	    (stop_at.until_n <= 0 || fk.n < stop_at.until_n))
		time_sleep_us(1000, NULL);
	stop_ = 1;
	return NULL;
}

/*
 * Watch with reconnect for us microseconds, or (until_n > 0) until the
 * server answered until_n requests; the watch's rc.
 */
static int
watch_for(int64_t us, int until_n, int bookmarks, char **rv)
{
	struct kube_gvr g = { "", "v1", "configmaps" };
	struct kube_watch_opts wo;
	struct cairn_err err = CAIRN_ERR_INIT;
	pthread_t th;
	int rc;

	memset(&wo, 0, sizeof wo);
	wo.reconnect = 1;
	wo.bookmarks = bookmarks;
	wo.resource_version = "40";
	wo.stop = &stop_;
	stop_ = 0;
	fk.n = 0;
	uh_log_clear();
	stop_at.us = us;
	stop_at.until_n = until_n;
	pthread_create(&th, NULL, stopper, NULL);
	rc = kube_watch(kube_, &g, NULL, &wo, on_event, NULL, rv, &err);
	pthread_join(th, NULL);
	return rc;
}

static void
test_resume_from_bookmark(void)
{
	char *rv = NULL;

	fk.mode = M_BOOKMARK;
	/* a condition, not a time: three reconnects, however slow the host */
	CHECK(watch_for(60000000, 3, 1, &rv) == CAIRN_ECANCELED);
	REQUIRE(fk.n >= 3);
	/* each reconnect starts at the bookmark the one before brought */
	CHECK(uh_log_count("resourceVersion=40&allowWatchBookmarks=true") ==
	    1);
	CHECK(uh_log_count("resourceVersion=41&allowWatchBookmarks=true") ==
	    1);
	CHECK(uh_log_count("resourceVersion=42&allowWatchBookmarks=true") ==
	    1);
	REQUIRE(rv != NULL);
	/* the last bookmark read: the stop may fall after the server counted
	 * a request whose reply was never read */
	CHECK(atoi(rv) == 40 + fk.n || atoi(rv) == 40 + fk.n - 1);
	free(rv);
}

static void
test_error_event_backs_off(void)
{
	fk.mode = M_ERROR;
	errors_seen = 0;
	CHECK(watch_for(1500000, 0, 1, NULL) == CAIRN_ECANCELED);
	/*
	 * Backoff from 100 ms doubling (jittered to half): at most about 6
	 * connections in 1.5 s; at once would be hundreds.
	 */
	CHECK(fk.n >= 2);
	CHECK(fk.n <= 7);
	/* delivered to the callback as before, one per connection */
	CHECK_INT(errors_seen, fk.n);
}

/* Without reconnect the ERROR event is the watch's error. */
static void
test_error_event_is_the_error(void)
{
	struct kube_gvr g = { "", "v1", "configmaps" };
	struct kube_watch_opts wo;
	struct cairn_err err = CAIRN_ERR_INIT;

	fk.mode = M_ERROR;
	memset(&wo, 0, sizeof wo);
	CHECK(kube_watch(kube_, &g, NULL, &wo, on_event, NULL, NULL, &err) ==
	    CAIRN_ESERVER);
	CHECK(strstr(err.msg, "etcd cluster is unavailable") != NULL);
}

int
main(void)
{
	unsigned port;

	if (uh_start(handler, NULL, &port) < 0 ||
	    (kube_ = unit_kube_at(port, NULL, "watch")) == NULL) {
		printf("FAIL: test_kube_watch.c:setup\n");
		return 1;
	}
	RUN(test_resume_from_bookmark);
	RUN(test_error_event_backs_off);
	RUN(test_error_event_is_the_error);
	kube_free(kube_);
	uh_stop();
	return unit_done();
}
