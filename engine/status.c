/*
 * status.c: the server's published status: the status document from the
 * journal and a probe snapshot, readiness and liveness from the probe
 * thread, and outcome metrics derived from the journal. See status.h.
 */
#include "config.h"
#include "engine/status.h"

#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"
#include "engine/bsl.h"
#include "engine/lease.h"
#include "engine/volumes.h"
#include "journal/journal.h"
#include "kube/kube.h"
#include "storage/store.h"
#include "base/metrics.h"
#include "engine/status_cache.h"
#include "engine/status_doc.h"

#define STATUS_RECENT_MAX	20		/* finished items on the page */
#define STATUS_SLOW_PROBE_US	(10 * TIME_US_PER_SEC)	/* journal, storage */
#define STATUS_STALE_US		(60 * TIME_US_PER_SEC)	/* /healthz limit */
#define STATUS_PROBE_TIMEOUT_US	(3 * TIME_US_PER_SEC)	/* one probe request */

/* What the metrics pass remembers of one journal row. */
struct seen {
	int64_t id;
	int64_t attempt;
	int attempt_counted;	/* attempt metric counted for this attempt */
	int finished;		/* outcome counted for this attempt */
};

struct status {
	struct kube *kube;		/* owned: the probes' own client */
	struct kube *watch_kube;	/* owned: the cache's watches' client */
	struct status_cache *cache;	/* the cluster's work */
	struct journal *journal;
	char *id;
	char *ns;
	char *lease_name;
	int workers;
	int64_t period_us;
	int64_t started_us;
	struct lease_watch *leases;

	pthread_t thread;
	int running;
	atomic_int stop;

	pthread_mutex_t mu;		/* guards the snapshot below */
	int ready;
	char why[512];
	int64_t last_pass_mono;		/* /healthz: the probe loop is alive */
	cJSON *peers;			/* lease_watch_servers() */

	/* Probe thread only. */
	int journal_ok, storage_ok;
	char journal_why[256], storage_why[384];
	int64_t slow_probe_mono;
	struct seen *seen;
	size_t nseen;
	int primed;
};

/* ---- probes ---------------------------------------------------------- */

static void
probe_slow(struct status *s)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct bsl *l = NULL;

	/* The journal takes a write (a zero-delta counter update). */
	s->journal_ok = journal_counter_add(s->journal, "Probe", "Write", 0,
	    &err) == 0;
	snprintf(s->journal_why, sizeof s->journal_why, "journal: %.200s", err.msg);
	cairn_err_clear(&err);
	/* The default storage location answers. */
	s->storage_ok = bsl_open(s->kube, s->ns, NULL, &l, &err) == 0 &&
	    store_check(bsl_store(l), &err) == 0;
	snprintf(s->storage_why, sizeof s->storage_why,
	    "default storage location: %.300s", err.msg);
	bsl_free(l);
}

/* Totals of the cluster's objects (from the cache's watches). */
static void
probe_totals(struct status *s)
{
	struct status_cache_totals t;

	status_cache_totals(s->cache, &t);
	if (!t.synced)
		return;
	metrics_set(METRIC_BACKUP_TOTAL, (double)t.backups, NULL);
	metrics_set(METRIC_RESTORE_TOTAL, (double)t.restores, NULL);
	metrics_set(METRIC_WAITING_ITEMS, (double)t.backups_waiting,
	    METRIC_LABELS("backup"));
	metrics_set(METRIC_WAITING_ITEMS, (double)t.restores_waiting,
	    METRIC_LABELS("restore"));
}

/* ---- outcome metrics from the journal -------------------------------- */

static struct seen *
seen_get(struct status *s, int64_t id)
{
	for (size_t i = 0; i < s->nseen; i++)
		if (s->seen[i].id == id)
			return &s->seen[i];
	s->seen = xreallocarray(s->seen, s->nseen + 1, sizeof *s->seen);
	memset(&s->seen[s->nseen], 0, sizeof *s->seen);
	s->seen[s->nseen].id = id;
	return &s->seen[s->nseen++];
}

/*
 * Every schedule-labelled series of a schedule at zero, as Velero's
 * InitSchedule does: a dashboard sees "0 failures" for a schedule, not
 * a missing series. Idempotent (adding 0).
 */
static void
init_schedule_series(const char *sched)
{
	static const enum metric_id ids[] = {
		METRIC_BACKUP_ATTEMPT_TOTAL, METRIC_BACKUP_SUCCESS_TOTAL,
		METRIC_BACKUP_PARTIAL_FAILURE_TOTAL, METRIC_BACKUP_FAILURE_TOTAL,
		METRIC_BACKUP_VALIDATION_FAILURE_TOTAL,
		METRIC_BACKUP_WARNING_TOTAL, METRIC_BACKUP_ITEMS_TOTAL,
		METRIC_BACKUP_ITEMS_ERRORS, METRIC_BACKUP_LAST_STATUS,
		METRIC_BACKUP_DELETION_ATTEMPT_TOTAL,
		METRIC_BACKUP_DELETION_SUCCESS_TOTAL,
		METRIC_BACKUP_DELETION_FAILURE_TOTAL,
		METRIC_RESTORE_ATTEMPT_TOTAL, METRIC_RESTORE_SUCCESS_TOTAL,
		METRIC_RESTORE_PARTIAL_FAILURE_TOTAL, METRIC_RESTORE_FAILED_TOTAL,
		METRIC_RESTORE_VALIDATION_FAILED_TOTAL,
		METRIC_VOLUME_SNAPSHOT_ATTEMPT_TOTAL,
		METRIC_VOLUME_SNAPSHOT_SUCCESS_TOTAL,
		METRIC_VOLUME_SNAPSHOT_FAILURE_TOTAL,
	};

	for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
		metrics_add(ids[i], 0, METRIC_LABELS(sched));
}

/*
 * One finished attempt, from the journal row its worker wrote with the
 * same numbers as the object's final status (Velero's rules: items and
 * tarball size of what was stored, errors as status.errors, a warning
 * counted per backup that had any).
 */
static void
count_outcome(const struct journal_item *it)
{
	int backup = strcmp(it->kind, JOURNAL_KIND_BACKUP) == 0;
	int stored = strcmp(it->phase, "Completed") == 0 ||
	    strcmp(it->phase, "PartiallyFailed") == 0;
	const char *const *l = METRIC_LABELS(it->schedule);
	double secs = (double)(it->finished_at - it->claimed_at) /
	    TIME_US_PER_SEC;

	if (strcmp(it->phase, "FailedValidation") == 0) {
		metrics_inc(backup ? METRIC_BACKUP_VALIDATION_FAILURE_TOTAL :
		    METRIC_RESTORE_VALIDATION_FAILED_TOTAL, l);
		return;
	}
	metrics_observe(backup ? METRIC_BACKUP_DURATION_SECONDS :
	    METRIC_RESTORE_DURATION_SECONDS, secs < 0 ? 0 : secs, l);
	if (!backup) {
		metrics_set(METRIC_RESTORE_ITEMS_TOTAL, (double)it->items_done, l);
		metrics_inc(strcmp(it->phase, "Completed") == 0 ?
		    METRIC_RESTORE_SUCCESS_TOTAL :
		    strcmp(it->phase, "PartiallyFailed") == 0 ?
		    METRIC_RESTORE_PARTIAL_FAILURE_TOTAL :
		    METRIC_RESTORE_FAILED_TOTAL, l);
		return;
	}
	metrics_set(METRIC_BACKUP_ITEMS_ERRORS, (double)it->errors, l);
	if (it->warnings > 0)
		metrics_inc(METRIC_BACKUP_WARNING_TOTAL, l);
	if (stored) {
		metrics_set(METRIC_BACKUP_ITEMS_TOTAL, (double)it->total_items,
		    l);
		metrics_set(METRIC_BACKUP_TARBALL_SIZE_BYTES,
		    (double)it->bytes_done, l);
		metrics_add(METRIC_BACKUP_BYTES_TOTAL, (double)it->bytes_done,
		    NULL);
	}
	if (strcmp(it->phase, "Completed") == 0) {
		metrics_inc(METRIC_BACKUP_SUCCESS_TOTAL, l);
		metrics_set(METRIC_BACKUP_LAST_SUCCESSFUL_TIMESTAMP,
		    (double)(it->finished_at / TIME_US_PER_SEC), l);
		metrics_set(METRIC_BACKUP_LAST_STATUS, 1, l);
		return;
	}
	metrics_inc(strcmp(it->phase, "PartiallyFailed") == 0 ?
	    METRIC_BACKUP_PARTIAL_FAILURE_TOTAL : METRIC_BACKUP_FAILURE_TOTAL, l);
	metrics_set(METRIC_BACKUP_LAST_STATUS, 0, l);
}

/*
 * Count what the journal recorded since the last pass. The first pass
 * only remembers what was claimed before this process started (a restart
 * does not count old outcomes again); work claimed since counts even when
 * the first pass comes late. An attempt counts once work started
 * (progress or a non-validation end), so a spec rejected at once is a
 * validation failure only, as in Velero.
 */
static void
probe_metrics(struct status *s)
{
	static const char *const phases[] = { "InProgress",
	    "WaitingForPluginOperations", "Finalizing" };
	struct journal_item *it = NULL;
	struct journal_filter f = { 0 };
	double running[2][3] = { { 0 } };
	size_t n = 0;

	if (journal_items(s->journal, &f, &it, &n, NULL) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct seen *sn = seen_get(s, it[i].id);
		int backup = strcmp(it[i].kind, JOURNAL_KIND_BACKUP) == 0;
		int done = it[i].finished_at != 0;
		int started = it[i].total_items > 0 || it[i].items_done > 0 ||
		    (done && strcmp(it[i].phase, "FailedValidation") != 0);
		const char *sched = it[i].schedule;

		init_schedule_series(sched);
		if (sn->attempt != it[i].attempt) {
			/* claimed before this process: counted by the last one */
			int old = !s->primed &&
			    it[i].claimed_at < s->started_us;

			sn->attempt = it[i].attempt;
			sn->attempt_counted = old;
			sn->finished = old && done;
		}
		if (!sn->attempt_counted && started) {
			metrics_inc(backup ? METRIC_BACKUP_ATTEMPT_TOTAL :
			    METRIC_RESTORE_ATTEMPT_TOTAL, METRIC_LABELS(sched));
			sn->attempt_counted = 1;
		}
		if (done && !sn->finished) {
			count_outcome(&it[i]);
			sn->finished = 1;
		}
		if (!done && strcmp(it[i].holder, s->id) == 0)
			for (size_t p = 0; p < 3; p++)
				if (strcmp(it[i].phase, phases[p]) == 0)
					running[!backup][p]++;
	}
	for (size_t p = 0; p < 3; p++) {
		metrics_set(METRIC_BACKUP_IN_PROGRESS, running[0][p],
		    METRIC_LABELS(phases[p]));
		metrics_set(METRIC_RESTORE_IN_PROGRESS, running[1][p],
		    METRIC_LABELS(phases[p]));
	}
	s->primed = 1;
	free(it);
}

static void *
probe_loop(void *arg)
{
	struct status *s = arg;

	util_thread_name("probe");

	while (!s->stop) {
		struct cairn_err err = CAIRN_ERR_INIT;
		cJSON *peers = NULL;
		int api_ok, ready, valid = 0;
		char why[sizeof s->why];

		api_ok = kube_request(s->kube, "GET", "/version", NULL, NULL, 0,
		    1, NULL, &err) == 0;
		snprintf(why, sizeof why, "API server %.100s: %.300s",
		    kube_server(s->kube), err.msg);
		if (time_mono_us() - s->slow_probe_mono >= STATUS_SLOW_PROBE_US ||
		    !s->journal_ok || !s->storage_ok) {
			probe_slow(s);
			s->slow_probe_mono = time_mono_us();
		}
		/* A worker's failed journal write counts at once. */
		if (s->journal_ok && !journal_writable(s->journal, &err)) {
			s->journal_ok = 0;
			snprintf(s->journal_why, sizeof s->journal_why,
			    "journal: %.200s", err.msg);
		}
		ready = api_ok && s->journal_ok && s->storage_ok;
		if (api_ok && !s->journal_ok)
			snprintf(why, sizeof why, "%s", s->journal_why);
		else if (api_ok && !s->storage_ok)
			snprintf(why, sizeof why, "%s", s->storage_why);
		if (api_ok) {
			if (lease_watch_refresh(s->leases, NULL) == 0) {
				peers = lease_watch_servers(s->leases);
				for (int i = 0; i < cJSON_GetArraySize(peers); i++)
					valid += !json_bool(cJSON_GetArrayItem(
					    peers, i), "expired", 1);
				metrics_set(METRIC_SERVERS_SEEN, valid, NULL);
			}
		}
		probe_totals(s);
		probe_metrics(s);
		pthread_mutex_lock(&s->mu);
		if (s->ready != ready)
			log_info("readiness: %s%s%s", ready ? "ready" : "not ready",
			    ready ? "" : ": ", ready ? "" : why);
		s->ready = ready;
		memcpy(s->why, why, sizeof s->why);
		s->last_pass_mono = time_mono_us();
		if (peers != NULL) {
			cJSON_Delete(s->peers);
			s->peers = peers;
		}
		pthread_mutex_unlock(&s->mu);
		time_sleep_us(s->period_us, &s->stop);
	}
	return NULL;
}

/* ---- what the status shows ------------------------------------------- */

static int64_t
parse_time(const char *t)
{
	int64_t us;

	return t != NULL && time_parse(t, &us) == 0 ? us : STATUS_UNKNOWN;
}

static void
add_self_and_peers(struct status *s, cJSON *doc)
{
	for (int i = 0; i < cJSON_GetArraySize(s->peers); i++) {
		const cJSON *p = cJSON_GetArrayItem(s->peers, i);
		const char *id = json_str_or(p, "id", "");
		const cJSON *age = cJSON_GetObjectItemCaseSensitive(p,
		    "observedAgeSeconds");
		char lname[300];
		struct status_peer peer = { 0 };

		snprintf(lname, sizeof lname, "%s%s", LEASE_NAME_PREFIX, id);
		peer.id = id;
		peer.lease_name = lname;
		peer.renewed_us = parse_time(json_str(p, "renewTime"));
		peer.duration_us = json_int(p, "leaseDurationSeconds", -1) < 0 ?
		    STATUS_UNKNOWN : json_int(p, "leaseDurationSeconds", 0) *
		    TIME_US_PER_SEC;
		peer.expired = json_bool(p, "expired", 1);
		peer.self = strcmp(id, s->id) == 0;
		peer.running = status_cache_running(s->cache, id);
		peer.observed_age_us = cJSON_IsNumber(age) ?
		    (int64_t)(age->valuedouble * TIME_US_PER_SEC) :
		    STATUS_UNKNOWN;
		status_doc_add_server(doc, &peer);
	}
}

/* The journal's detail of one of this server's items: its last error. */
struct local_detail {
	struct status *s;
	char **kept;			/* strings handed out, freed after */
	size_t nkept;
};

struct last_error {
	char line[JOURNAL_EVENT_MAX];
};

static int
last_error_cb(int64_t at_us, const char *level, const char *line,
    const char *fields, void *arg)
{
	struct last_error *le = arg;

	(void)at_us;
	if (strcmp(level, "error") == 0)
		snprintf(le->line, sizeof le->line, "%s%s%s", line,
		    fields[0] ? " " : "", fields);
	return 0;
}

static void
local_detail(void *arg, const char *kind, const char *name,
    struct status_op *op)
{
	struct local_detail *d = arg;
	struct journal_item it;
	struct last_error le;

	if (journal_item_find(d->s->journal, kind, d->s->ns, name, NULL, &it,
	    NULL) < 0 || it.finished_at != 0)
		return;
	le.line[0] = '\0';
	(void)journal_events_foreach(d->s->journal, it.id, last_error_cb, &le,
	    NULL);
	if (le.line[0] == '\0')
		return;
	d->kept = xreallocarray(d->kept, d->nkept + 1, sizeof *d->kept);
	d->kept[d->nkept] = xstrdup(le.line);
	op->last_error = d->kept[d->nkept++];
}

/*
 * Before the watches listed everything once: this server's own items
 * from its journal, so a page right after a start is not empty.
 */
static void
add_from_journal(struct status *s, cJSON *doc, int64_t now)
{
	struct journal_item *it = NULL;
	struct journal_filter f = { 0 };
	size_t n = 0, recent = 0;

	(void)journal_items(s->journal, &f, &it, &n, NULL);
	for (size_t i = 0; i < n; i++) {
		struct status_op op = { 0 };

		if (it[i].finished_at != 0)
			continue;
		op.name = it[i].name;
		op.namespace = it[i].namespace;
		op.phase = it[i].phase;
		op.holder = it[i].holder;
		op.worker = it[i].worker[0] ? it[i].worker : NULL;
		op.attempt = (int)(it[i].attempt > 0 ? it[i].attempt : 1);
		op.claimed_us = it[i].claimed_at;
		op.started_us = it[i].claimed_at;
		op.schedule = it[i].schedule[0] ? it[i].schedule : NULL;
		op.progress.total_items = it[i].total_items > 0 ?
		    it[i].total_items : STATUS_UNKNOWN;
		op.progress.items_done = it[i].items_done;
		op.progress.bytes_done = it[i].bytes_done;
		op.progress.total_bytes = STATUS_UNKNOWN;
		op.progress.since_us = it[i].claimed_at;
		op.errors = (int)it[i].errors;
		op.warnings = (int)it[i].warnings;
		op.local = 1;
		status_doc_add_op(doc, strcmp(it[i].kind, JOURNAL_KIND_RESTORE) == 0 ?
		    STATUS_RESTORE : STATUS_BACKUP, &op, now);
	}
	for (size_t i = n; i-- > 0 && recent < STATUS_RECENT_MAX;) {
		const char *msgs[] = { it[i].message, NULL };
		struct status_result r = { 0 };

		if (it[i].finished_at == 0)
			continue;
		r.kind = strcmp(it[i].kind, JOURNAL_KIND_RESTORE) == 0 ?
		    STATUS_RESTORE : STATUS_BACKUP;
		r.name = it[i].name;
		r.namespace = it[i].namespace;
		r.phase = it[i].phase;
		r.started_us = it[i].claimed_at;
		r.completed_us = it[i].finished_at;
		r.holder = it[i].holder;
		r.attempt = (int)it[i].attempt;
		r.items_done = it[i].items_done;
		r.total_items = it[i].total_items > 0 ? it[i].total_items :
		    STATUS_UNKNOWN;
		r.bytes_done = it[i].bytes_done;
		r.errors = (int)it[i].errors;
		r.warnings = (int)it[i].warnings;
		r.schedule = it[i].schedule[0] ? it[i].schedule : NULL;
		r.messages = it[i].message[0] ? msgs : NULL;
		status_doc_add_recent(doc, &r);
		recent++;
	}
	free(it);
}

cJSON *
status_document(struct status *s)
{
	struct status_server_info si = { 0 };
	struct status_cache_totals t;
	struct local_detail d = { s, NULL, 0 };
	const cJSON *self = NULL;
	int64_t now = time_now_us();
	cJSON *doc;

	pthread_mutex_lock(&s->mu);
	for (int i = 0; i < cJSON_GetArraySize(s->peers); i++)
		if (strcmp(json_str_or(cJSON_GetArrayItem(s->peers, i), "id", ""),
		    s->id) == 0)
			self = cJSON_GetArrayItem(s->peers, i);
	si.id = s->id;
	si.namespace = s->ns;
	si.started_us = s->started_us;
	si.workers = s->workers;
	si.lease_name = s->lease_name;
	si.lease_state = self == NULL ? "acquiring" :
	    json_bool(self, "expired", 1) ? "lost" : "held";
	si.lease_renewed_us = self ? parse_time(json_str(self, "renewTime")) :
	    STATUS_UNKNOWN;
	si.lease_duration_us = self ? json_int(self, "leaseDurationSeconds", 0) *
	    TIME_US_PER_SEC : STATUS_UNKNOWN;
	doc = status_doc_new(&si, now);
	add_self_and_peers(s, doc);
	pthread_mutex_unlock(&s->mu);

	status_cache_totals(s->cache, &t);
	if (t.synced) {
		status_cache_render(s->cache, doc, s->id, local_detail, &d, now);
	} else {
		add_from_journal(s, doc, now);
		status_doc_set_totals(doc, &(struct status_totals){ 0 });
	}
	for (size_t i = 0; i < d.nkept; i++)
		free(d.kept[i]);
	free(d.kept);
	return doc;
}

int
status_healthy(struct status *s)
{
	int ok;

	pthread_mutex_lock(&s->mu);
	ok = s->last_pass_mono == 0 ||
	    time_mono_us() - s->last_pass_mono < STATUS_STALE_US;
	pthread_mutex_unlock(&s->mu);
	return ok;
}

int
status_ready(struct status *s, struct buf *why)
{
	int ok;

	pthread_mutex_lock(&s->mu);
	ok = s->ready;
	if (!ok)
		buf_puts(why, s->last_pass_mono ? s->why : "starting");
	pthread_mutex_unlock(&s->mu);
	return ok;
}

/* ---- life cycle ------------------------------------------------------ */

int
status_start(const struct status_opts *o, struct status **out,
    struct cairn_err *err)
{
	struct status *s;
	struct kube_config_opts co = { o->kubeconfig, o->context };
	struct kube_client_opts ko = { 0 };
	struct kube_config *cfg;
	struct kube *k;

	*out = NULL;
	ko.max_retries = KUBE_RETRIES_NONE;
	ko.timeout_us = STATUS_PROBE_TIMEOUT_US;
	if (kube_config_load(&co, &cfg, err) < 0 ||
	    kube_new(cfg, &ko, &k, err) < 0)
		return cairn_err_prefix(err, "status probes");
	s = xcalloc(1, sizeof *s);
	s->kube = k;
	s->journal = o->journal;
	s->id = xstrdup(o->server_id);
	s->ns = xstrdup(o->namespace);
	s->lease_name = xasprintf("%s%s", LEASE_NAME_PREFIX, o->server_id);
	s->workers = o->workers;
	s->period_us = o->period_us > 0 ? o->period_us : 2 * TIME_US_PER_SEC;
	s->started_us = time_now_us();
	s->leases = lease_watch_new(k, o->namespace,
	    o->lease_duration_us > 0 ? o->lease_duration_us :
	    15 * TIME_US_PER_SEC);
	s->journal_ok = s->storage_ok = 1;	/* until the first probe */
	s->peers = cJSON_CreateArray();
	pthread_mutex_init(&s->mu, NULL);
	{
		/* the watches: a client of their own, with the usual patience */
		struct kube_config *wcfg;
		struct status_cache_opts co2 = { 0 };

		if (kube_config_load(&co, &wcfg, err) < 0 ||
		    kube_new(wcfg, NULL, &s->watch_kube, err) < 0) {
			status_stop(s);
			return cairn_err_prefix(err, "status watches");
		}
		co2.kube = s->watch_kube;
		co2.namespace = o->namespace;
		co2.recent_max = STATUS_RECENT_MAX;
		if (status_cache_start(&co2, &s->cache, err) < 0) {
			status_stop(s);
			return cairn_err_prefix(err, "status watches");
		}
	}
	metrics_set(METRIC_START_TIME_SECONDS,
	    (double)(s->started_us / TIME_US_PER_SEC), NULL);
	if (pthread_create(&s->thread, NULL, probe_loop, s) != 0) {
		status_stop(s);
		return cairn_err_set(err, CAIRN_EFAIL,
		    "cannot start the status thread");
	}
	s->running = 1;
	*out = s;
	return 0;
}

void
status_stop(struct status *s)
{
	if (s == NULL)
		return;
	s->stop = 1;
	if (s->running)
		pthread_join(s->thread, NULL);
	status_cache_stop(s->cache);
	kube_free(s->watch_kube);
	lease_watch_free(s->leases);
	kube_free(s->kube);
	cJSON_Delete(s->peers);
	pthread_mutex_destroy(&s->mu);
	free(s->seen);
	free(s->id);
	free(s->ns);
	free(s->lease_name);
	free(s);
}
