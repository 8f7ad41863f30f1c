/*
 * restore.c: running one Restore.
 *
 * Shape of a run:
 *   1. claim bookkeeping: journal row (kind Restore), startTimestamp;
 *   2. validation -> FailedValidation: the Backup exists and is Completed
 *      or PartiallyFailed, its storage location opens, the spec's
 *      filters, mapping, selectors and policy are well-formed;
 *   3. the plan (restore_plan.c): the tarball is streamed once from
 *      storage through the safe reader into a temporary SQLite spill; a
 *      fatal archive problem (truncated, corrupt, bomb, stall) ends the
 *      restore Failed before anything is created;
 *   4. tiers in Velero's order; in each tier the main thread hands items
 *      to a pool of `workers` threads through a bounded queue and waits
 *      for the tier to drain before the next one starts (parallel within a
 *      tier, never across). Target namespaces are ensured by the main
 *      thread before the first item that needs them. Custom resources
 *      wait for their CRD to be Established (discovery refreshed);
 *   5. item outcomes are batched into the journal by the main thread
 *      (one transaction per 256 items or 200 ms); status.progress and
 *      status.checkpoint follow at most once a second;
 *   6. results, logs and the resource list go to restores/<name>/ and the
 *      final phase is written (journal first).
 *
 * Memory: the plan lives on disk; in memory are the queue (2 x workers
 * rows), pending journal marks, the results (capped at RS_MAX_RESULTS
 * messages per list) and the resource list (one short string per item).
 *
 * Threads: workers touch only the kube client (thread-safe), their rows,
 * and the shared state under rs->mu.
 */
#include "config.h"
#include "engine/restore.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/buf.h"
#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"
#include "engine/archive_read.h"
#include "engine/bsl.h"
#include "engine/claim.h"
#include "engine/hooks_restore.h"
#include "engine/itemlog.h"
#include "engine/partsrc.h"
#include "engine/restore_int.h"
#include "engine/restore_plan.h"
#include "engine/schedule.h"
#include "engine/volumes.h"
#include "journal/journal.h"
#include "kube/kube.h"
#include "kube/label.h"
#include "storage/layout.h"
#include "storage/store.h"

#define RS_MAX_RESULTS 1000		/* messages kept per results list */
#define RS_PROGRESS_US TIME_US_PER_SEC
#define RS_FLUSH_ITEMS 256
#define RS_FLUSH_US (200 * 1000)
#define RS_MAX_WORKERS 64
#define RS_LIST_CAP (256u << 20)	/* the backup's resource list, gunzipped */

static const struct kube_gvr restores_gvr = { "cairn.io", "v1", "restores" };
static const struct kube_gvr backups_gvr = { "cairn.io", "v1", "backups" };
static const struct kube_gvr crd_gvr = { "apiextensions.k8s.io", "v1",
	"customresourcedefinitions" };

/* ------------------------------------------------------------------ */
/* Results and events.                                                 */
/* ------------------------------------------------------------------ */

static cJSON *
results_new(void)
{
	cJSON *r = cJSON_CreateObject();

	cJSON_AddArrayToObject(r, "velero");
	cJSON_AddArrayToObject(r, "cluster");
	cJSON_AddObjectToObject(r, "namespaces");
	return r;
}

void
rs_event(struct rs *rs, const char *level, const char *fmt, ...)
{
	char line[JOURNAL_EVENT_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	rs->log.jid = rs->jid;
	itemlog_event(&rs->log, level, NULL, "%s", line);
}

/*
 * Record a warning or error in the results: ns NULL general ("velero"
 * list, Velero's name), "" cluster-scoped, else that namespace.
 */
void
rs_record(struct rs *rs, int is_error, const char *ns, const char *msg)
{
	cJSON *r, *list;

	pthread_mutex_lock(&rs->mu);
	r = is_error ? rs->errors : rs->warnings;
	if (is_error)
		rs->nerrors++;
	else
		rs->nwarnings++;
	if (ns == NULL)
		list = cJSON_GetObjectItemCaseSensitive(r, "velero");
	else if (ns[0] == '\0')
		list = cJSON_GetObjectItemCaseSensitive(r, "cluster");
	else {
		cJSON *m = cJSON_GetObjectItemCaseSensitive(r, "namespaces");

		list = cJSON_GetObjectItemCaseSensitive(m, ns);
		if (list == NULL)
			list = cJSON_AddArrayToObject(m, ns);
	}
	if (cJSON_GetArraySize(list) < RS_MAX_RESULTS)
		cJSON_AddItemToArray(list, cJSON_CreateString(msg));
	pthread_mutex_unlock(&rs->mu);
	rs_event(rs, is_error ? "error" : "warning", "%s", msg);
}

void
rs_recordf(struct rs *rs, int is_error, const char *ns, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	rs_record(rs, is_error, ns, msg);
}

/* Problems from the plan: entry errors are general unless namespaced. */
static void
plan_problem(void *arg, int error, const char *ns, const char *msg)
{
	struct rs *rs = arg;

	rs_record(rs, error, ns[0] != '\0' ? ns : NULL, msg);
}

/* ------------------------------------------------------------------ */
/* Status writes, conditional on resourceVersion, with fencing.        */
/* ------------------------------------------------------------------ */

/* Write rs->status with the RV of rs->obj, fenced (engine/claim.h). */
static int
rs_status_write(struct rs *rs, struct cairn_err *err)
{
	return engine_status_write(&rs->f, &rs->obj, rs->status, err);
}

int
restore_claim(const struct engine_env *env, const cJSON *obj,
	const char *worker, int64_t attempt, cJSON **out,
	struct cairn_err *err)
{
	return engine_claim(env, &restores_gvr, obj, worker, attempt, out, err);
}

static void
rs_set_progress(struct rs *rs)
{
	cJSON *p = cJSON_CreateObject(), *c = cJSON_CreateObject();
	int64_t total = rs->total > rs->done ? rs->total : rs->done;

	cJSON_AddNumberToObject(p, "totalItems", (double)total);
	cJSON_AddNumberToObject(p, "itemsRestored", (double)rs->done);
	cJSON_AddNumberToObject(p, "bytesDone", (double)rs->bytes_read);
	json_set_item(rs->status, "progress", p);
	cJSON_AddNumberToObject(c, "itemsDone", (double)rs->done);
	cJSON_AddStringToObject(c, "lastItem", rs->last_key ? rs->last_key : "");
	cJSON_AddNumberToObject(c, "tier", (double)rs->tier);
	hooks_restore_checkpoint(rs->hooks, c, rs->status);
	json_set_item(rs->status, "checkpoint", c);
	pthread_mutex_lock(&rs->mu);
	json_set_int(rs->status, "warnings", rs->nwarnings);
	json_set_int(rs->status, "errors", rs->nerrors);
	pthread_mutex_unlock(&rs->mu);
}

/* ------------------------------------------------------------------ */
/* Journal batches.                                                     */
/* ------------------------------------------------------------------ */

/* The journal's copy of status.progress and the counts. */
static void
rs_journal_progress(struct rs *rs)
{
	int64_t w, e;

	pthread_mutex_lock(&rs->mu);
	w = rs->nwarnings;
	e = rs->nerrors;
	pthread_mutex_unlock(&rs->mu);
	if (journal_begin(rs->env->journal, NULL) < 0)
		return;
	(void)journal_set_progress(rs->env->journal, rs->jid, rs->total >
	    rs->done ? rs->total : rs->done, rs->done, rs->bytes_read, NULL);
	(void)journal_set_counts(rs->env->journal, rs->jid, w, e, NULL);
	(void)journal_commit(rs->env->journal, NULL);
}

/* Write the pending marks in one transaction (main thread only). */
static int
rs_flush(struct rs *rs, int force, struct cairn_err *err)
{
	struct mark *m;
	size_t n;
	int rc = 0;
	int64_t now = time_mono_us();

	pthread_mutex_lock(&rs->mu);
	if (rs->npending == 0 || (!force && rs->npending < RS_FLUSH_ITEMS &&
	    now - rs->last_flush_us < RS_FLUSH_US)) {
		pthread_mutex_unlock(&rs->mu);
		return 0;
	}
	m = rs->pending;
	n = rs->npending;
	rs->pending = NULL;
	rs->npending = rs->apending = 0;
	pthread_mutex_unlock(&rs->mu);
	rs->last_flush_us = now;
	rc = journal_begin(rs->env->journal, err);
	if (rc == 0) {
		for (size_t i = 0; i < n; i++)
			(void)journal_restore_mark(rs->env->journal, rs->jid,
			    m[i].key, m[i].state, NULL);
		rc = journal_commit(rs->env->journal, err);
	}
	if (rc == 0) {
		rs->done += (int64_t)n;
		free(rs->last_key);
		rs->last_key = xstrdup(m[n - 1].key);
		rs_journal_progress(rs);
	}
	for (size_t i = 0; i < n; i++)
		free(m[i].key);
	free(m);
	return rc;
}

int
rs_progress(struct rs *rs, int force, struct cairn_err *err)
{
	int64_t now = time_mono_us();
	int rc;

	rc = rs_flush(rs, force, err);
	if (rc < 0)
		return rc;
	if (!force && now - rs->last_progress_us < RS_PROGRESS_US)
		return 0;
	rs->last_progress_us = now;
	rs_set_progress(rs);
	return rs_status_write(rs, err);
}

/* ------------------------------------------------------------------ */
/* The pool.                                                           */
/* ------------------------------------------------------------------ */

/* A journal mark to write with the next batch (under rs->mu). */
static void
add_pending(struct rs *rs, const char *key, enum journal_rstate st)
{
	if (rs->npending == rs->apending) {
		rs->apending = rs->apending ? 2 * rs->apending : 64;
		rs->pending = xreallocarray(rs->pending, rs->apending,
		    sizeof *rs->pending);
	}
	rs->pending[rs->npending].key = xstrdup(key);
	rs->pending[rs->npending].state = st;
	rs->npending++;
}

/* ------------------------------------------------------------------ */
/* Restore hooks: engine/hooks_restore.h's callbacks.                  */
/* ------------------------------------------------------------------ */

static int
hk_persist(void *arg, struct cairn_err *err)
{
	struct rs *rs = arg;

	rs_set_progress(rs);
	return rs_status_write(rs, err);
}

static void
hk_event(void *arg, const char *level, const char *line)
{
	rs_event(arg, level, "%s", line);
}

static void
hk_record(void *arg, int is_error, const char *ns, const char *msg)
{
	rs_record(arg, is_error, ns, msg);
}

static const char *
hk_map_ns(void *arg, const char *ns)
{
	struct rs *rs = arg;

	return restore_filter_map_ns(rs->filter, ns);
}

/*
 * An item not sent to the workers: its state for the journal and the
 * resource list (the item's apiVersion and kind name its entry).
 */
static void
rs_mark(struct rs *rs, const struct restore_row *row, enum journal_rstate st)
{
	cJSON *obj = json_parse(row->json, strlen(row->json), NULL);
	const char *ns = row->ns[0] ? restore_filter_map_ns(rs->filter,
	    row->ns) : "";

	rs_reslist_add(rs, obj, ns, row->name, st);
	cJSON_Delete(obj);
	pthread_mutex_lock(&rs->mu);
	add_pending(rs, row->key, st);
	pthread_mutex_unlock(&rs->mu);
}

static void *
worker_main(void *arg)
{
	struct rs *rs = arg;

	util_thread_name("restore");

	for (;;) {
		struct restore_row *row;
		enum journal_rstate st;
		int skip;

		pthread_mutex_lock(&rs->mu);
		while (rs->qcount == 0 && !rs->quit)
			pthread_cond_wait(&rs->cv_items, &rs->mu);
		if (rs->qcount == 0 && rs->quit) {
			pthread_mutex_unlock(&rs->mu);
			return NULL;
		}
		row = rs->q[rs->qhead];
		rs->qhead = (rs->qhead + 1) % rs->qcap;
		rs->qcount--;
		rs->inflight++;
		skip = rs->abort_tier;
		/* the feeder refills from half empty: one wake per qcap/2 */
		if (rs->qcount <= rs->qcap / 2)
			pthread_cond_signal(&rs->cv_space);
		pthread_mutex_unlock(&rs->mu);

		if (!skip && !(rs->env->stop != NULL && *rs->env->stop)) {
			st = rs_apply_item(rs, row);
			pthread_mutex_lock(&rs->mu);
			add_pending(rs, row->key, st);
			pthread_mutex_unlock(&rs->mu);
		}
		restore_row_free(row);
		pthread_mutex_lock(&rs->mu);
		rs->inflight--;
		if (rs->inflight == 0 && rs->qcount == 0)
			pthread_cond_broadcast(&rs->cv_idle);
		pthread_mutex_unlock(&rs->mu);
	}
}

static int
pool_start(struct rs *rs, int n)
{
	rs->nworkers = 0;
	rs->qcap = (size_t)n * 2;
	rs->q = xcalloc(rs->qcap, sizeof *rs->q);
	rs->threads = xcalloc((size_t)n, sizeof *rs->threads);
	for (int i = 0; i < n; i++) {
		if (pthread_create(&rs->threads[i], NULL, worker_main, rs) != 0)
			break;
		rs->nworkers++;
	}
	return rs->nworkers > 0 ? 0 : CAIRN_EFAIL;
}

static void
pool_stop(struct rs *rs)
{
	pthread_mutex_lock(&rs->mu);
	rs->quit = 1;
	pthread_cond_broadcast(&rs->cv_items);
	pthread_mutex_unlock(&rs->mu);
	for (int i = 0; i < rs->nworkers; i++)
		pthread_join(rs->threads[i], NULL);
	while (rs->qcount > 0) {
		restore_row_free(rs->q[rs->qhead]);
		rs->qhead = (rs->qhead + 1) % rs->qcap;
		rs->qcount--;
	}
	free(rs->q);
	free(rs->threads);
	rs->q = NULL;
	rs->threads = NULL;
	rs->nworkers = 0;
}

/* Wait until the queue is empty and nothing is in flight, flushing. */
static int
pool_drain(struct rs *rs, struct cairn_err *err)
{
	int rc = 0;

	for (;;) {
		struct timespec ts;

		pthread_mutex_lock(&rs->mu);
		if (rs->qcount == 0 && rs->inflight == 0) {
			pthread_mutex_unlock(&rs->mu);
			break;
		}
		time_deadline(&ts, 100000);
		pthread_cond_timedwait(&rs->cv_idle, &rs->mu, &ts);
		pthread_mutex_unlock(&rs->mu);
		if (rc == 0)
			rc = rs_progress(rs, 0, err);
		if (rc < 0) {
			pthread_mutex_lock(&rs->mu);
			rs->abort_tier = 1;
			pthread_mutex_unlock(&rs->mu);
		}
	}
	if (rc == 0)
		rc = rs_flush(rs, 1, err);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Tiers.                                                              */
/* ------------------------------------------------------------------ */

/* Wait for CRD name to be Established; 0 when it is. */
static int
wait_crd(struct rs *rs, const char *name)
{
	int64_t end = time_mono_us() + RESTORE_CRD_WAIT_US;

	while (time_mono_us() < end) {
		cJSON *crd = NULL, *c;
		int ok = 0;

		int grc = kube_get(rs->env->kube, &crd_gvr, NULL, name, &crd,
		    NULL);

		if (grc == CAIRN_ENOTFOUND)
			return grc;	/* neither restored nor present */
		if (grc == 0) {
			cJSON_ArrayForEach(c, json_get(crd, "status.conditions"))
				if (strcmp(json_str_or(c, "type", ""),
				    "Established") == 0 && strcmp(json_str_or(c,
				    "status", ""), "True") == 0)
					ok = 1;
		}
		cJSON_Delete(crd);
		if (ok)
			return 0;
		if (rs->env->stop != NULL && *rs->env->stop)
			return CAIRN_ECANCELED;
		time_sleep_us(200000, rs->env->stop);
	}
	return CAIRN_ETIMEOUT;
}

static struct kube_resource *
resolve_tier(struct rs *rs, const char *resgroup)
{
	struct kube_resource *r = NULL;
	const char *dot = strchr(resgroup, '.');

	if (kube_resolve(rs->env->kube, resgroup, NULL, &r, NULL) == 0)
		return r;
	if (dot == NULL)
		return NULL;
	/* a custom resource: its CRD may have been restored just now */
	if (wait_crd(rs, resgroup) < 0)
		return NULL;
	for (int i = 0; i < 20; i++) {
		if (kube_resolve(rs->env->kube, resgroup, NULL, &r, NULL) == 0)
			return r;
		time_sleep_us(250000, rs->env->stop);
	}
	return NULL;
}

struct feed {
	struct rs *rs;
	int64_t skipped;
	struct cairn_err *err;
	int rc;
};

static int
feed_row(void *arg, struct restore_row *row)
{
	struct feed *f = arg;
	struct rs *rs = f->rs;
	enum journal_rstate st;
	int rc;

	/* self-fencing: no item is created while the Lease is not renewed */
	(void)engine_fence_check(&rs->f, NULL);
	if (rs->f.fenced || (rs->env->stop != NULL && *rs->env->stop)) {
		restore_row_free(row);
		f->rc = cairn_err_set(f->err, rs->f.fenced ? CAIRN_EFENCED :
		    CAIRN_ECANCELED, rs->f.fenced ? "ownership lost" :
		    "stopped");
		return 1;
	}
	/* done by an earlier run of this server: skip */
	if (rs->restored_before > 0 && journal_restore_lookup(rs->env->journal,
	    rs->jid, row->key, &st, NULL) == 0) {
		f->skipped++;
		restore_row_free(row);
		return 0;
	}
	if (row->ns[0] != '\0' && rs_ensure_ns(rs, row->ns,
	    restore_filter_map_ns(rs->filter, row->ns), 1) < 0) {
		/* its namespace cannot be made: one error said so */
		rs_mark(rs, row, JOURNAL_R_FAILED);
		restore_row_free(row);
		return 0;
	}
	pthread_mutex_lock(&rs->mu);
	while (rs->qcount == rs->qcap) {
		struct timespec ts;

		time_deadline(&ts, 50000);
		pthread_cond_timedwait(&rs->cv_space, &rs->mu, &ts);
		if (rs->qcount == rs->qcap) {
			pthread_mutex_unlock(&rs->mu);
			rc = rs_progress(rs, 0, f->err);
			pthread_mutex_lock(&rs->mu);
			if (rc < 0) {
				rs->abort_tier = 1;
				pthread_mutex_unlock(&rs->mu);
				restore_row_free(row);
				f->rc = rc;
				return 1;
			}
		}
	}
	rs->q[(rs->qhead + rs->qcount) % rs->qcap] = row;
	rs->qcount++;
	pthread_cond_signal(&rs->cv_items);
	pthread_mutex_unlock(&rs->mu);
	rc = rs_progress(rs, 0, f->err);
	if (rc < 0) {
		f->rc = rc;
		return 1;
	}
	return 0;
}

static int
run_tiers(struct rs *rs, struct cairn_err *err)
{
	size_t nt = restore_plan_ntiers(rs->plan);
	int rc = 0;

	for (size_t i = 0; i < nt && rc == 0; i++) {
		struct tierinfo ti;
		struct feed f;

		memset(&ti, 0, sizeof ti);
		ti.resgroup = restore_plan_tier(rs->plan, i);
		ti.status = restore_filter_status(rs->filter, ti.resgroup);
		ti.r = resolve_tier(rs, ti.resgroup);
		if (ti.r == NULL)
			rs_recordf(rs, 1, NULL, "the cluster does not serve %s: "
			    "its %lld items are not restored", ti.resgroup,
			    (long long)restore_plan_tier_count(rs->plan, i));
		else if (!(ti.r->verbs & KUBE_VERB_CREATE)) {
			/* list-only kinds (metrics, componentstatuses...) */
			ti.nocreate = 1;
			rs_event(rs, "info", "not restoring the %lld items of "
			    "%s: the cluster does not allow creating them (no "
			    "create verb)", (long long)restore_plan_tier_count(
			    rs->plan, i), ti.resgroup);
		}
		rs->tier = i;
		rs->ti = &ti;
		rs->abort_tier = 0;
		rs_event(rs, "info", "restoring %s (%lld items)", ti.resgroup,
		    (long long)restore_plan_tier_count(rs->plan, i));
		memset(&f, 0, sizeof f);
		f.rs = rs;
		f.err = err;
		rc = restore_plan_foreach(rs->plan, i, feed_row, &f, err);
		if (rc == 1)
			rc = f.rc;
		{
			int drc = pool_drain(rs, err);

			if (rc == 0)
				rc = drc;
		}
		rs->ti = NULL;
		kube_resource_free(ti.r);
		if (rc == 0 && rs->f.fenced)
			rc = CAIRN_EFENCED;
		if (rc == 0 && rs->env->stop != NULL && *rs->env->stop)
			rc = cairn_err_set(err, CAIRN_ECANCELED, "stopped");
	}
	return rc;
}

/* ------------------------------------------------------------------ */
/* Metadata files.                                                     */
/* ------------------------------------------------------------------ */

static int
put_gz(struct rs *rs, enum layout_restore_file f, const char *text,
    struct cairn_err *err)
{
	char *key;
	int rc;

	key = layout_restore_key(rs->prefix, rs->name, f);
	if (key == NULL)
		return cairn_err_set(err, CAIRN_EINVAL, "bad restore name");
	rc = store_put_gzip(bsl_store(rs->loc), key, text, strlen(text),
	    Z_DEFAULT_COMPRESSION, err);
	free(key);
	return rc;
}


/* results, logs and the resource list; failures are warnings. */
static void
rs_upload(struct rs *rs)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	cJSON *res;
	char *text;
	struct buf lb;

	if (rs->loc == NULL)
		return;
	res = cJSON_CreateObject();
	cJSON_AddItemToObject(res, "warnings", cJSON_Duplicate(rs->warnings, 1));
	cJSON_AddItemToObject(res, "errors", cJSON_Duplicate(rs->errors, 1));
	text = json_print(res);
	if (put_gz(rs, LAYOUT_RESTORE_RESULTS, text, &err) < 0)
		log_warn("restore %s/%s: uploading results: %s", rs->ns,
		    rs->name, err.msg);
	free(text);
	cJSON_Delete(res);
	text = json_print(rs->reslist);
	if (put_gz(rs, LAYOUT_RESTORE_RESOURCE_LIST, text, &err) < 0)
		log_warn("restore %s/%s: uploading the resource list: %s",
		    rs->ns, rs->name, err.msg);
	free(text);
	buf_init(&lb, 256u << 20);
	rs->log.jid = rs->jid;
	(void)itemlog_render(&rs->log, &lb, NULL);
	if (put_gz(rs, LAYOUT_RESTORE_LOGS, buf_cstr(&lb), &err) < 0)
		log_warn("restore %s/%s: uploading logs: %s", rs->ns, rs->name,
		    err.msg);
	buf_free(&lb);
}

/* ------------------------------------------------------------------ */
/* The run.                                                            */
/* ------------------------------------------------------------------ */

static int
rs_finish(struct rs *rs, const char *phase, const char *reason,
    struct cairn_err *err)
{
	char now[TIME_STR_MAX];
	int rc;

	rs_event(rs, "info", "restore ended %s%s%s", phase,
	    reason ? ": " : "", reason ? reason : "");
	rs_upload(rs);
	/* the final numbers and phase in one journal transaction */
	rc = journal_begin(rs->env->journal, err);
	if (rc == 0) {
		rs_journal_progress(rs);
		(void)journal_finish(rs->env->journal, rs->jid, phase, reason,
		    NULL);
		rc = journal_commit(rs->env->journal, err);
	}
	if (rc < 0)
		return rc;
	time_format_rfc3339(time_now_us(), now);
	rs_set_progress(rs);
	json_set_str(rs->status, "phase", phase);
	json_set_str(rs->status, "completionTimestamp", now);
	if (reason != NULL)
		json_set_str(rs->status, "failureReason", reason);
	return rs_status_write(rs, err);
}

static int
rs_validation_failed(struct rs *rs, cJSON *errs, struct cairn_err *err)
{
	char now[TIME_STR_MAX];
	cJSON *e;
	int rc;

	cJSON_ArrayForEach(e, errs)
		rs_event(rs, "error", "validation: %s", e->valuestring);
	rc = journal_finish(rs->env->journal, rs->jid, "FailedValidation",
	    NULL, err);
	if (rc < 0)
		return rc;
	time_format_rfc3339(time_now_us(), now);
	json_set_str(rs->status, "phase", "FailedValidation");
	json_set_item(rs->status, "validationErrors", cJSON_Duplicate(errs, 1));
	json_set_str(rs->status, "completionTimestamp", now);
	return rs_status_write(rs, err);
}

static int
rs_journal_claim(struct rs *rs, struct cairn_err *err)
{
	struct journal_item it;

	memset(&it, 0, sizeof it);
	if (journal_item_find(rs->env->journal, JOURNAL_KIND_RESTORE, rs->ns,
	    rs->name, rs->uid, &it, NULL) == 0 && it.finished_at == 0) {
		/* our own restart (any attempt of ours): keep the row */
		rs->jid = it.id;
		return 0;
	}
	memset(&it, 0, sizeof it);
	snprintf(it.kind, sizeof it.kind, "%s", JOURNAL_KIND_RESTORE);
	snprintf(it.namespace, sizeof it.namespace, "%s", rs->ns);
	snprintf(it.name, sizeof it.name, "%s", rs->name);
	snprintf(it.uid, sizeof it.uid, "%s", rs->uid);
	it.attempt = rs->attempt;
	snprintf(it.holder, sizeof it.holder, "%s", rs->env->server_id);
	snprintf(it.worker, sizeof it.worker, "%s", rs->worker);
	snprintf(it.phase, sizeof it.phase, "InProgress");
	return journal_claim(rs->env->journal, &it, &rs->jid, err);
}

static void
rs_free(struct rs *rs)
{
	restore_plan_free(rs->plan);
	restore_filter_free(rs->filter);
	cJSON_Delete(rs->parts);
	hooks_restore_free(rs->hooks);
	bsl_free(rs->loc);
	cJSON_Delete(rs->obj);
	cJSON_Delete(rs->status);
	cJSON_Delete(rs->warnings);
	cJSON_Delete(rs->errors);
	cJSON_Delete(rs->reslist);
	for (size_t i = 0; i < rs->nensured; i++)
		free(rs->ensured[i]);
	free(rs->ensured);
	for (size_t i = 0; i < rs->npending; i++)
		free(rs->pending[i].key);
	free(rs->pending);
	free(rs->prefix);
	free(rs->last_key);
	free(rs->ns);
	free(rs->name);
	free(rs->uid);
	free(rs->backup);
	free(rs->name_lv);
	free(rs->backup_lv);
	for (size_t i = 0; i < rs->nns_failed; i++)
		free(rs->ns_failed[i]);
	free(rs->ns_failed);
	for (size_t i = 0; i < rs->npvnames; i++) {
		free(rs->pvnames[i].from);
		free(rs->pvnames[i].to);
	}
	free(rs->pvnames);
	pthread_mutex_destroy(&rs->pv_mu);
	pthread_mutex_destroy(&rs->mu);
	pthread_cond_destroy(&rs->cv_items);
	pthread_cond_destroy(&rs->cv_space);
	pthread_cond_destroy(&rs->cv_idle);
}

/*
 * The archive against the backup's resource list (restore_plan.h):
 * differences are errors in the results. A backup without a list (an old
 * writer) is a warning; 0, or an error that leaves the restore to retry.
 */
static int
rs_check_list(struct rs *rs, struct cairn_err *err)
{
	struct cairn_err e2 = CAIRN_ERR_INIT;
	char *key, *text = NULL;
	size_t len = 0;
	cJSON *rl = NULL;
	int64_t n;
	int rc;

	key = bsl_backup_key(rs->loc, rs->backup, LAYOUT_BACKUP_RESOURCE_LIST);
	rc = store_get_gunzip(bsl_store(rs->loc), key, RS_LIST_CAP, &text,
	    &len, &e2);
	if (rc == CAIRN_ENOTFOUND) {
		rs_recordf(rs, 0, NULL, "the backup has no resource list (%s): "
		    "the tarball's item count is not checked", key);
		rc = 0;
		goto out;
	}
	if (rc == 0)
		rl = json_parse(text, len, &e2);
	if (rc == CAIRN_EPROTO || rc == CAIRN_ETOOBIG || (rc == 0 && rl == NULL)) {
		rs_recordf(rs, 1, NULL, "the backup's resource list %s cannot "
		    "be read (%s): the tarball's item count is not checked",
		    key, e2.msg);
		rc = 0;
		goto out;
	}
	if (rc < 0) {
		rc = cairn_err_copy(err, &e2);
		goto out;
	}
	n = restore_plan_check_list(rs->plan, rl, plan_problem, rs, &e2);
	if (n == CAIRN_EPROTO) {
		rs_recordf(rs, 1, NULL, "the backup's resource list %s: %s", key,
		    e2.msg);
		n = 0;
	}
	rc = n < 0 ? cairn_err_copy(err, &e2) : 0;
out:
	cJSON_Delete(rl);
	free(text);
	free(key);
	return rc;
}

/* Validation; 1 when it failed (status written), 0 to go on, < 0 error. */
static int
rs_validate(struct rs *rs, struct cairn_err *err)
{
	struct cairn_err e2 = CAIRN_ERR_INIT;
	struct kube_discovery *disc = NULL;
	cJSON *errs = cJSON_CreateArray(), *bk = NULL;
	cJSON *warns = cJSON_CreateArray();
	const cJSON *w;
	const char *phase;
	int rc = 0;

	restore_spec_check(json_get(rs->obj, "spec"), errs, warns);
	if (rs->backup[0] == '\0')
		cJSON_AddItemToArray(errs, cJSON_CreateString(
		    "spec.backupName is required"));
	else {
		rc = kube_get(rs->env->kube, &backups_gvr, rs->ns, rs->backup,
		    &bk, &e2);
		if (rc == CAIRN_ENOTFOUND) {
			char *m = xasprintf("backup %s not found", rs->backup);

			cJSON_AddItemToArray(errs, cJSON_CreateString(m));
			free(m);
			rc = 0;
		} else if (rc < 0) {
			cairn_err_copy(err, &e2);
			goto out;
		} else {
			const cJSON *sch = cJSON_GetObjectItemCaseSensitive(
			    json_get(bk, "metadata.labels"), SCHEDULE_LABEL);

			/* metrics: labelled with the backup's schedule (Velero) */
			if (cJSON_IsString(sch))
				(void)journal_set_schedule(rs->env->journal,
				    rs->jid, sch->valuestring, NULL);
			phase = json_str_or(bk, "status.phase", "");
			rs->parts = cJSON_DetachItemFromObjectCaseSensitive(
			    json_get(bk, "status.checkpoint"), "parts");
			if (strcmp(phase, "Completed") != 0 &&
			    strcmp(phase, "PartiallyFailed") != 0) {
				char *m = xasprintf("backup %s is %s: only "
				    "Completed or PartiallyFailed backups can "
				    "be restored", rs->backup, phase[0] ?
				    phase : "New");

				cJSON_AddItemToArray(errs, cJSON_CreateString(m));
				free(m);
			}
		}
	}
	(void)kube_discovery_get(rs->env->kube, 0, &disc, NULL);
	rc = restore_filter_new(json_get(rs->obj, "spec"), disc, &rs->filter,
	    errs);
	kube_discovery_release(disc);
	if (rc < 0)
		goto out;
	{
		struct hooks_restore_env he = { rs->env->kube,
		    rs->env->journal, rs->jid, rs->attempt, rs->env->stop, rs,
		    hk_persist, hk_event, hk_record };

		hooks_restore_open(&he, rs->obj, &rs->hooks, errs);
	}
	if (bk != NULL && cJSON_GetArraySize(errs) == 0) {
		rc = bsl_open(rs->env->kube, rs->ns,
		    json_str(bk, "spec.storageLocation"), &rs->loc, &e2);
		if (rc == CAIRN_ENOTFOUND || rc == CAIRN_EINVAL) {
			cJSON_AddItemToArray(errs, cJSON_CreateString(e2.msg));
			rc = 0;
		} else if (rc < 0) {
			cairn_err_copy(err, &e2);
			goto out;
		} else {
			rs->prefix = xstrdup(bsl_prefix(rs->loc));
		}
	}
	if (cJSON_GetArraySize(errs) > 0) {
		rc = rs_validation_failed(rs, errs, err);
		if (rc == 0)
			rc = 1;
	} else {
		cJSON_ArrayForEach(w, warns)
			rs_record(rs, 0, NULL, w->valuestring);
	}
out:
	cJSON_Delete(errs);
	cJSON_Delete(warns);
	cJSON_Delete(bk);
	return rc;
}

/* Items an earlier attempt restored (the journal's): counted as done now. */
static void
rs_count_before(struct rs *rs)
{
	int64_t counts[JOURNAL_R_COUNT] = { 0 };

	if (journal_restore_counts(rs->env->journal, rs->jid, counts, NULL) ==
	    0)
		rs->restored_before = counts[0] + counts[1] + counts[2] +
		    counts[3];
	rs->done = rs->restored_before;	/* skipped below, counted now */
}

/* A run's state for the Restore obj as claimed (rs_free() undoes it). */
static void
rs_init(struct rs *rs, const struct engine_env *env, const cJSON *obj,
    const char *worker)
{
	memset(rs, 0, sizeof *rs);
	pthread_mutex_init(&rs->mu, NULL);
	pthread_mutex_init(&rs->pv_mu, NULL);
	pthread_cond_init(&rs->cv_items, NULL);
	pthread_cond_init(&rs->cv_space, NULL);
	pthread_cond_init(&rs->cv_idle, NULL);
	rs->env = env;
	rs->worker = worker;
	rs->obj = cJSON_Duplicate(obj, 1);
	rs->status = cJSON_Duplicate(json_get(obj, "status"), 1);
	if (rs->status == NULL)
		rs->status = cJSON_CreateObject();
	rs->ns = xstrdup(json_str_or(obj, "metadata.namespace", env->namespace));
	rs->name = xstrdup(json_str_or(obj, "metadata.name", ""));
	rs->uid = xstrdup(json_str_or(obj, "metadata.uid", ""));
	rs->backup = xstrdup(json_str_or(obj, "spec.backupName", ""));
	rs->name_lv = kube_label_value(rs->name);
	rs->restore_pvs = !cJSON_IsFalse(json_get(obj, "spec.restorePVs"));
	rs->ract.preserve_node_ports = json_bool(obj, "spec.preserveNodePorts",
	    0);
	rs->term_wait_us = env->terminating_timeout_us > 0 ?
	    env->terminating_timeout_us : RESTORE_TERMINATING_WAIT_US;
	rs->backup_lv = kube_label_value(rs->backup);
	rs->attempt = json_int(obj, "status.claim.attempt", 1);
	engine_fence_env(&rs->f, env, &restores_gvr, "restore", rs->ns, rs->name,
	    rs->attempt, rs->uid);
	rs->warnings = results_new();
	rs->errors = results_new();
	rs->log.journal = env->journal;
	rs->log.kind = "restore";
	rs->log.namespace = rs->ns;
	rs->log.name = rs->name;
	rs->reslist = cJSON_CreateObject();
}

/*
 * The plan: one streaming read of the tarball, checking the parts the
 * backup recorded (engine/partsrc.h). The whole tarball is read before
 * the first create, so a changed part creates nothing: a part's problem
 * is given as the cause of whatever the reader saw.
 */
static int
rs_plan(struct rs *rs, const char *tarkey, struct cairn_err *perr)
{
	struct tarread_src inner, src;
	struct tarread *tr = NULL;
	struct tarread_opts to;
	struct partsrc *ps = NULL;
	char where[160];
	int rc;

	memset(&to, 0, sizeof to);
	to.stop = rs->env->stop;
	rc = tarread_src_store(&inner, bsl_store(rs->loc), tarkey, 0, perr);
	if (rc == 0 && (ps = partsrc_new(rs->parts, &inner)) == NULL)
		rc = cairn_err_set(perr, CAIRN_EPROTO, "the backup records "
		    "more than %d parts", PARTSRC_MAX);
	if (rc == 0) {
		partsrc_source(ps, &src);
		rc = tarread_open(&src, &to, &tr, perr);
	}
	if (rc == 0)
		rc = restore_plan_build(tr, rs->filter, plan_problem, rs,
		    &rs->plan, perr);
	if (tr != NULL)
		rs->bytes_read = (int64_t)tarread_bytes_in(tr);
	tarread_free(tr);
	if (ps == NULL || rc == CAIRN_ECANCELED)
		goto out;
	if (rc == 0)
		partsrc_end(ps);
	if (partsrc_problem(ps) != NULL) {
		rc = cairn_err_set(perr, CAIRN_EPROTO, "%s",
		    partsrc_problem(ps));
	} else if (rc < 0 && partsrc_parts(ps) > 0) {
		size_t n = strlen(perr->msg);

		partsrc_where(ps, where, sizeof where);
		str_format(perr->msg + n, sizeof perr->msg - n, " (in %s)",
		    where);
	}
out:
	partsrc_free(ps);
	return rc;
}

int
restore_run(const struct engine_env *env, const cJSON *obj,
	const char *worker, int workers, struct cairn_err *err)
{
	struct rs rs;
	char *tarkey = NULL;
	struct cairn_err perr = CAIRN_ERR_INIT;
	int rc;
	char now[TIME_STR_MAX];

	rs_init(&rs, env, obj, worker);
	if (workers <= 0)
		workers = RESTORE_DEFAULT_WORKERS;
	if (workers > RS_MAX_WORKERS)
		workers = RS_MAX_WORKERS;

	rc = rs_journal_claim(&rs, err);
	if (rc < 0)
		goto out;
	if (json_str(rs.status, "startTimestamp") == NULL) {
		time_format_rfc3339(time_now_us(), now);
		json_set_str(rs.status, "startTimestamp", now);
	}
	rc = rs_validate(&rs, err);
	if (rc != 0) {
		if (rc == 1)
			rc = 0;
		goto out;
	}
	rs_event(&rs, "info", "restoring backup %s (attempt %lld, %d "
	    "parallel creates per tier)", rs.backup, (long long)rs.attempt,
	    workers);

	tarkey = bsl_backup_key(rs.loc, rs.backup, LAYOUT_BACKUP_TARBALL);
	rc = rs_plan(&rs, tarkey, &perr);
	if (rc == CAIRN_ECANCELED || (env->stop != NULL && *env->stop)) {
		rc = cairn_err_set(err, CAIRN_ECANCELED, "stopped");
		goto out;
	}
	if (rc < 0) {
		char reason[1200];

		snprintf(reason, sizeof reason, "reading tarball %s: %s",
		    tarkey, perr.msg);
		rs_record(&rs, 1, NULL, reason);
		rc = rs_finish(&rs, "Failed", reason, err);
		goto out;
	}
	rc = rs_check_list(&rs, err);
	if (rc < 0)
		goto out;
	rs.total = restore_plan_count(rs.plan);
	rs_count_before(&rs);
	rs_event(&rs, "info", "plan: %lld items in %zu tiers (%lld done "
	    "before)", (long long)rs.total, restore_plan_ntiers(rs.plan),
	    (long long)rs.restored_before);
	rc = rs_progress(&rs, 1, err);
	if (rc < 0)
		goto out;

	rc = pool_start(&rs, workers);
	if (rc < 0) {
		cairn_err_set(err, rc, "cannot start restore workers");
		goto out;
	}
	rc = run_tiers(&rs, err);
	pool_stop(&rs);
	if (rc < 0) {
		if (rc != CAIRN_EFENCED && rc != CAIRN_ECANCELED)
			(void)rs_flush(&rs, 1, NULL);
		goto out;
	}
	rc = rs_flush(&rs, 1, err);
	if (rc == 0)	/* every item is in: post-restore exec hooks */
		rc = hooks_restore_run(rs.hooks, rs.plan, hk_map_ns, &rs, err);
	if (rc < 0)
		goto out;
	rc = rs_finish(&rs, rs.nerrors > 0 ? "PartiallyFailed" : "Completed",
	    NULL, err);
out:
	if (rs.f.fenced && rc != CAIRN_EFENCED)
		rc = cairn_err_set(err, CAIRN_EFENCED, "ownership lost");
	free(tarkey);
	rs_free(&rs);
	return rc;
}

int
restore_take(const struct engine_env *env, const char *name,
	const char *worker, int workers, struct cairn_err *err)
{
	cJSON *obj = NULL, *claimed = NULL;
	const char *phase;
	int rc;

	rc = kube_get(env->kube, &restores_gvr, env->namespace, name, &obj, err);
	if (rc == CAIRN_ENOTFOUND)
		return 0;
	if (rc < 0)
		return rc;
	phase = json_str_or(obj, "status.phase", "");
	if (phase[0] == '\0' || strcmp(phase, "New") == 0) {
		rc = restore_claim(env, obj, worker, 1, &claimed, err);
		cJSON_Delete(obj);
		if (rc < 0)
			return rc;
		log_info("restore %s/%s: claimed by %s", env->namespace, name,
		    worker);
		obj = claimed;
	} else if (strcmp(phase, "InProgress") != 0 ||
	    strcmp(json_str_or(obj, "status.claim.holder", ""),
	    env->server_id) != 0) {
		cJSON_Delete(obj);
		return 0;
	} else {
		log_info("restore %s/%s: resuming (attempt %lld)",
		    env->namespace, name,
		    (long long)json_int(obj, "status.claim.attempt", 1));
	}
	rc = restore_run(env, obj, worker, workers, err);
	cJSON_Delete(obj);
	return rc;
}
