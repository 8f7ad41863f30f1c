/*
 * lease.c: per-server Leases renewed as client-go's leader election does,
 * and the observation clock that judges other servers' Leases. The
 * safety argument is in lease.h and docs/protocol.md.
 */
#include "config.h"
#include "engine/lease.h"
#include "kube/kube.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/jsonutil.h"
#include "base/timeutil.h"
#include "base/util.h"
#include "base/metrics.h"

#include <stdatomic.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define LEASE_GVR KUBE_GVR("coordination.k8s.io", "v1", "leases")

struct lease {
	struct kube *kube;		/* borrowed */
	char *ns;
	char *identity;
	char *name;			/* cairn-<identity> */
	int64_t duration_us, deadline_us, retry_us;

	pthread_mutex_t mu;		/* guards everything below */
	cJSON *record;			/* last Lease we read or wrote, owned */
	int leader;			/* our identity is the holder of record */
	int64_t last_renew_mono;	/* monotonic time of last success, 0 none */
	int64_t last_renew_wall;
	uint64_t renewals, failures, lost;
	uint64_t epoch;			/* holding periods begun (lease_write_epoch) */
	int was_held;			/* for logging the loss once */

	pthread_t thread;
	int running;
	atomic_int stop;
	pthread_mutex_t wake_mu;
	pthread_cond_t wake;
};

static int64_t
dur_seconds(int64_t us)
{
	int64_t s = (us + TIME_US_PER_SEC - 1) / TIME_US_PER_SEC;

	return s < 1 ? 1 : s;
}

int
lease_new(struct kube *k, const struct lease_opts *o, struct lease **out,
    struct cairn_err *err)
{
	struct lease *l;
	int64_t dur = o->lease_duration_us ? o->lease_duration_us : 15 * TIME_US_PER_SEC;
	int64_t dl = o->renew_deadline_us ? o->renew_deadline_us : 10 * TIME_US_PER_SEC;
	int64_t rp = o->retry_period_us ? o->retry_period_us : 2 * TIME_US_PER_SEC;

	*out = NULL;
	if (o->identity == NULL || o->identity[0] == '\0' ||
	    strlen(o->identity) > 200)
		return cairn_err_set(err, CAIRN_EINVAL,
		    "server id must be 1 to 200 characters");
	if (!(rp < dl && dl < dur))
		return cairn_err_set(err, CAIRN_EINVAL,
		    "lease timings must satisfy retry-period < renew-deadline < lease-duration");
	l = xcalloc(1, sizeof *l);
	l->kube = k;
	l->ns = xstrdup(o->namespace);
	l->identity = xstrdup(o->identity);
	l->name = xasprintf("%s%s", LEASE_NAME_PREFIX, o->identity);
	l->duration_us = dur;
	l->deadline_us = dl;
	l->retry_us = rp;
	pthread_mutex_init(&l->mu, NULL);
	pthread_mutex_init(&l->wake_mu, NULL);
	pthread_cond_init(&l->wake, NULL);
	*out = l;
	return 0;
}

/* The spec we write when we (re)take or renew; acquire/transitions kept. */
static cJSON *
make_record(struct lease *l, const cJSON *prev, int takeover, int64_t now)
{
	char ts[TIME_STR_MAX];
	cJSON *obj = prev ? cJSON_Duplicate(prev, 1) : cJSON_CreateObject();
	cJSON *spec;

	time_format_micro(now, ts);
	if (prev == NULL) {
		json_set_str(obj, "apiVersion", "coordination.k8s.io/v1");
		json_set_str(obj, "kind", "Lease");
		json_set_str(obj, "metadata.name", l->name);
		json_set_str(obj, "metadata.namespace", l->ns);
		json_set_item(obj, "metadata.labels", cJSON_CreateObject());
		cJSON_AddStringToObject(json_get(obj, "metadata.labels"),
		    LEASE_LABEL_KEY, "true");
	}
	spec = json_ensure(obj, "spec");
	json_set_str(spec, "holderIdentity", l->identity);
	json_set_int(spec, "leaseDurationSeconds", dur_seconds(l->duration_us));
	json_set_str(spec, "renewTime", ts);
	if (prev == NULL || takeover) {
		json_set_str(spec, "acquireTime", ts);
		json_set_int(spec, "leaseTransitions", prev == NULL ? 0 :
		    json_int(prev, "spec.leaseTransitions", 0) + 1);
	}
	return obj;
}

/*
 * sent_mono is when the successful request was sent, not when its answer
 * came: observers may have seen the new record as early as that, so the
 * renew deadline counts from there (a slow answer must not stretch it).
 */
static void
record_success(struct lease *l, cJSON *obj, int64_t sent_mono)
{
	pthread_mutex_lock(&l->mu);
	/* A new holding period unless the previous one never lapsed. */
	if (!l->leader || l->last_renew_mono == 0 ||
	    time_mono_us() - l->last_renew_mono >= l->deadline_us)
		l->epoch++;
	cJSON_Delete(l->record);
	l->record = obj;
	l->leader = 1;
	l->last_renew_mono = sent_mono;
	l->last_renew_wall = time_now_us();
	l->renewals++;
	if (!l->was_held)
		log_info("lease %s/%s held by %s", l->ns, l->name, l->identity);
	l->was_held = 1;
	pthread_mutex_unlock(&l->mu);
}

int
lease_try(struct lease *l, struct cairn_err *err)
{
	const struct kube_gvr gvr = LEASE_GVR;
	int64_t now = time_now_us(), sent;
	cJSON *cached = NULL, *cur = NULL, *next = NULL, *out = NULL;
	const char *holder;
	int rc;

	/* 1. Leader with a cached record: renew it directly. */
	pthread_mutex_lock(&l->mu);
	if (l->leader && l->record != NULL)
		cached = cJSON_Duplicate(l->record, 1);
	pthread_mutex_unlock(&l->mu);
	if (cached != NULL) {
		next = make_record(l, cached, 0, now);
		cJSON_Delete(cached);
		sent = time_mono_us();
		rc = kube_update(l->kube, &gvr, l->ns, next, &out, NULL);
		cJSON_Delete(next);
		if (rc == 0) {
			record_success(l, out, sent);
			return 0;
		}
		/* Fall through to a fresh read, as client-go does. */
	}

	/* 2. Read; create when missing. */
	rc = kube_get(l->kube, &gvr, l->ns, l->name, &cur, err);
	if (rc == CAIRN_ENOTFOUND) {
		next = make_record(l, NULL, 1, now);
		sent = time_mono_us();
		rc = kube_create(l->kube, &gvr, l->ns, next, &out, err);
		cJSON_Delete(next);
		if (rc < 0)
			goto fail;
		record_success(l, out, sent);
		return 0;
	}
	if (rc < 0)
		goto fail;

	/*
	 * 3. Someone else holds it? Our own Lease is only contested when two
	 * servers are misconfigured with one id; the observation-clock rule
	 * still keeps them from both acting at once.
	 */
	holder = json_str_or(cur, "spec.holderIdentity", "");
	if (holder[0] != '\0' && strcmp(holder, l->identity) != 0) {
		rc = cairn_err_set(err, CAIRN_EBUSY,
		    "lease %s/%s is held by %s", l->ns, l->name, holder);
		cJSON_Delete(cur);
		goto fail;
	}

	/* 4. Update with the resourceVersion we read. */
	next = make_record(l, cur, holder[0] == '\0' ||
	    strcmp(holder, l->identity) != 0, now);
	cJSON_Delete(cur);
	sent = time_mono_us();
	rc = kube_update(l->kube, &gvr, l->ns, next, &out, err);
	cJSON_Delete(next);
	if (rc < 0)
		goto fail;
	record_success(l, out, sent);
	return 0;
fail:
	metrics_inc(METRIC_LEASE_RENEW_FAILURES_TOTAL, NULL);
	pthread_mutex_lock(&l->mu);
	l->failures++;
	if (rc == CAIRN_ECONFLICT || rc == CAIRN_EBUSY)
		l->leader = 0;
	pthread_mutex_unlock(&l->mu);
	return rc;
}

int
lease_held(struct lease *l)
{
	int held;

	pthread_mutex_lock(&l->mu);
	held = l->leader && l->last_renew_mono != 0 &&
	    time_mono_us() - l->last_renew_mono < l->deadline_us;
	if (!held && l->was_held) {
		l->was_held = 0;
		l->lost++;
		metrics_inc(METRIC_FENCED_TOTAL, METRIC_LABELS("lease"));
		log_warn("lease %s/%s not renewed within %.1fs: stop writing "
		    "until it is", l->ns, l->name,
		    (double)l->deadline_us / TIME_US_PER_SEC);
	}
	pthread_mutex_unlock(&l->mu);
	return held;
}

int
lease_write_epoch(struct lease *l)
{
	uint64_t e;

	if (!lease_held(l))
		return 0;
	pthread_mutex_lock(&l->mu);
	e = l->epoch;
	pthread_mutex_unlock(&l->mu);
	return (int)((e - 1) % 0x7ffffffe) + 1;
}

static void *
lease_loop(void *arg)
{
	struct lease *l = arg;

	util_thread_name("lease");

	while (!l->stop) {
		struct cairn_err err = CAIRN_ERR_INIT;
		/* client-go JitterUntil: period * (1 + rand * 0.2). */
		int64_t wait = l->retry_us + (int64_t)rand_below(
		    (uint64_t)(l->retry_us / 5 + 1));
		struct timespec ts;
		int64_t deadline;

		if (lease_try(l, &err) < 0)
			log_debug("lease %s renewal failed: %s", l->name, err.msg);
		/* logs a loss once */
		metrics_set(METRIC_LEASE_HELD, lease_held(l) ? 1 : 0, NULL);
		deadline = time_now_us() + wait;
		ts.tv_sec = deadline / TIME_US_PER_SEC;
		ts.tv_nsec = (long)(deadline % TIME_US_PER_SEC) * 1000;
		pthread_mutex_lock(&l->wake_mu);
		if (!l->stop)
			pthread_cond_timedwait(&l->wake, &l->wake_mu, &ts);
		pthread_mutex_unlock(&l->wake_mu);
	}
	return NULL;
}

int
lease_start(struct lease *l, struct cairn_err *err)
{
	if (l->running)
		return 0;
	l->stop = 0;
	if (pthread_create(&l->thread, NULL, lease_loop, l) != 0)
		return cairn_err_set(err, CAIRN_EFAIL,
		    "cannot start the lease thread");
	l->running = 1;
	return 0;
}

void
lease_stop(struct lease *l)
{
	if (l == NULL || !l->running)
		return;
	pthread_mutex_lock(&l->wake_mu);
	l->stop = 1;
	pthread_cond_broadcast(&l->wake);
	pthread_mutex_unlock(&l->wake_mu);
	pthread_join(l->thread, NULL);
	l->running = 0;
}

int
lease_release(struct lease *l, struct cairn_err *err)
{
	const struct kube_gvr gvr = LEASE_GVR;
	cJSON *rec = NULL;
	int rc;

	lease_stop(l);
	pthread_mutex_lock(&l->mu);
	if (l->leader && l->record != NULL)
		rec = cJSON_Duplicate(l->record, 1);
	l->leader = 0;
	l->was_held = 0;
	pthread_mutex_unlock(&l->mu);
	if (rec == NULL)
		return 0;
	/* client-go ReleaseOnCancel: empty holder, 1 s duration. */
	json_set_str(rec, "spec.holderIdentity", "");
	json_set_int(rec, "spec.leaseDurationSeconds", 1);
	rc = kube_update(l->kube, &gvr, l->ns, rec, NULL, err);
	cJSON_Delete(rec);
	if (rc == 0)
		log_info("lease %s/%s released", l->ns, l->name);
	return rc;
}

void
lease_snapshot(struct lease *l, struct lease_state *out)
{
	out->held = lease_held(l);
	pthread_mutex_lock(&l->mu);
	out->last_renew_us = l->last_renew_wall;
	out->renewals = l->renewals;
	out->failures = l->failures;
	out->lost = l->lost;
	out->transitions = (int)json_int(l->record, "spec.leaseTransitions", 0);
	pthread_mutex_unlock(&l->mu);
}

void
lease_free(struct lease *l)
{
	if (l == NULL)
		return;
	lease_stop(l);
	cJSON_Delete(l->record);
	pthread_mutex_destroy(&l->mu);
	pthread_mutex_destroy(&l->wake_mu);
	pthread_cond_destroy(&l->wake);
	free(l->ns);
	free(l->identity);
	free(l->name);
	free(l);
}

/* ---- observing other servers' Leases ---- */

struct observed {
	char *holder_id;	/* server id: the Lease name without cairn- */
	char *rv;		/* resourceVersion last seen */
	char *holder;		/* spec.holderIdentity */
	char *renew_time;
	int64_t duration_us;
	int64_t observed_mono;	/* when rv last changed (local clock) */
	int64_t missing_since;	/* 0 present; else first time not found */
	int seen;		/* present in the last refresh */
};

struct lease_watch {
	struct kube *kube;
	char *ns;
	int64_t default_duration_us;
	int refreshed;
	pthread_mutex_t mu;
	struct observed *v;
	size_t n;
};

struct lease_watch *
lease_watch_new(struct kube *k, const char *ns, int64_t default_duration_us)
{
	struct lease_watch *w = xcalloc(1, sizeof *w);

	w->kube = k;
	w->ns = xstrdup(ns);
	w->default_duration_us = default_duration_us;
	pthread_mutex_init(&w->mu, NULL);
	return w;
}

static struct observed *
find_observed(struct lease_watch *w, const char *id, int create)
{
	for (size_t i = 0; i < w->n; i++)
		if (strcmp(w->v[i].holder_id, id) == 0)
			return &w->v[i];
	if (!create)
		return NULL;
	w->v = xreallocarray(w->v, w->n + 1, sizeof *w->v);
	memset(&w->v[w->n], 0, sizeof w->v[w->n]);
	w->v[w->n].holder_id = xstrdup(id);
	return &w->v[w->n++];
}

static int
observe_item(void *arg, cJSON *item)
{
	struct lease_watch *w = arg;
	const char *name = json_str_or(item, "metadata.name", "");
	const char *rv = json_str_or(item, "metadata.resourceVersion", "");
	struct observed *o;

	if (!str_has_prefix(name, LEASE_NAME_PREFIX))
		return 0;
	pthread_mutex_lock(&w->mu);
	o = find_observed(w, name + strlen(LEASE_NAME_PREFIX), 1);
	if (o->rv == NULL || strcmp(o->rv, rv) != 0) {
		free(o->rv);
		o->rv = xstrdup(rv);
		o->observed_mono = time_mono_us();
	}
	free(o->holder);
	o->holder = xstrdup(json_str_or(item, "spec.holderIdentity", ""));
	free(o->renew_time);
	o->renew_time = xstrdup(json_str_or(item, "spec.renewTime", ""));
	o->duration_us = json_int(item, "spec.leaseDurationSeconds", 15) *
	    TIME_US_PER_SEC;
	o->missing_since = 0;
	o->seen = 1;
	pthread_mutex_unlock(&w->mu);
	return 0;
}

int
lease_watch_refresh(struct lease_watch *w, struct cairn_err *err)
{
	const struct kube_gvr gvr = LEASE_GVR;
	struct kube_list_opts lo = { 0 };
	int rc;

	lo.label_selector = LEASE_LABEL_KEY;
	pthread_mutex_lock(&w->mu);
	for (size_t i = 0; i < w->n; i++)
		w->v[i].seen = 0;
	pthread_mutex_unlock(&w->mu);
	rc = kube_list(w->kube, &gvr, w->ns, &lo, observe_item, w, NULL, err);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&w->mu);
	for (size_t i = 0; i < w->n; i++)
		if (!w->v[i].seen && w->v[i].missing_since == 0) {
			w->v[i].missing_since = time_mono_us();
			free(w->v[i].rv);
			w->v[i].rv = NULL;
		}
	w->refreshed = 1;
	pthread_mutex_unlock(&w->mu);
	return 0;
}

int
lease_watch_expired(struct lease_watch *w, const char *holder)
{
	int64_t now = time_mono_us();
	struct observed *o;
	int expired = 0;

	pthread_mutex_lock(&w->mu);
	if (!w->refreshed)
		goto out;
	o = find_observed(w, holder, 1);
	if (o->rv == NULL) {
		/* Never seen or gone: start (or keep) the missing clock. */
		if (o->missing_since == 0)
			o->missing_since = now;
		expired = now - o->missing_since > w->default_duration_us;
	} else if (o->holder == NULL || strcmp(o->holder, holder) != 0) {
		expired = 1;	/* released ("") or handed to someone else */
	} else {
		expired = now - o->observed_mono > o->duration_us;
	}
out:
	pthread_mutex_unlock(&w->mu);
	return expired;
}

cJSON *
lease_watch_servers(struct lease_watch *w)
{
	cJSON *arr = cJSON_CreateArray();
	int64_t now = time_mono_us();

	pthread_mutex_lock(&w->mu);
	for (size_t i = 0; i < w->n; i++) {
		struct observed *o = &w->v[i];
		cJSON *s;

		if (o->rv == NULL)
			continue;
		s = cJSON_CreateObject();
		cJSON_AddStringToObject(s, "id", o->holder_id);
		cJSON_AddStringToObject(s, "holder", o->holder ? o->holder : "");
		cJSON_AddStringToObject(s, "renewTime",
		    o->renew_time ? o->renew_time : "");
		cJSON_AddNumberToObject(s, "leaseDurationSeconds",
		    (double)(o->duration_us / TIME_US_PER_SEC));
		cJSON_AddBoolToObject(s, "expired",
		    o->holder == NULL || o->holder[0] == '\0' ||
		    now - o->observed_mono > o->duration_us);
		cJSON_AddNumberToObject(s, "observedAgeSeconds",
		    (double)(now - o->observed_mono) / TIME_US_PER_SEC);
		cJSON_AddItemToArray(arr, s);
	}
	pthread_mutex_unlock(&w->mu);
	return arr;
}

void
lease_watch_free(struct lease_watch *w)
{
	if (w == NULL)
		return;
	for (size_t i = 0; i < w->n; i++) {
		free(w->v[i].holder_id);
		free(w->v[i].rv);
		free(w->v[i].holder);
		free(w->v[i].renew_time);
	}
	free(w->v);
	free(w->ns);
	pthread_mutex_destroy(&w->mu);
	free(w);
}

struct kube *
lease_client_new(const char *kubeconfig, const char *context,
	int64_t renew_deadline_us, int64_t retry_period_us)
{
	struct kube_config_opts co;
	struct kube_client_opts ko;
	struct kube_config *cfg = NULL;
	struct cairn_err err = CAIRN_ERR_INIT;
	struct kube *k = NULL;

	memset(&co, 0, sizeof co);
	co.kubeconfig = kubeconfig;
	co.context = context;
	memset(&ko, 0, sizeof ko);
	ko.timeout_us = renew_deadline_us - retry_period_us;
	if (ko.timeout_us < 500000)
		ko.timeout_us = 500000;
	ko.max_retries = KUBE_RETRIES_NONE;
	if (kube_config_load(&co, &cfg, &err) < 0 ||
	    kube_new(cfg, &ko, &k, &err) < 0) {
		log_warn("lease client: %s; renewing through the main client",
		    err.msg);
		return NULL;
	}
	return k;
}
