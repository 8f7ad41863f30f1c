/*
 * status_doc.c: builders of the /status.json document, see status_doc.h
 * and docs/status-json.md. The shape here and docs/status.schema.json must
 * agree: tests/integration/test_web_endpoint.py validates the document the
 * demo helper builds with these functions against the schema.
 */
#include "config.h"
#include "engine/status_doc.h"

#include <string.h>

#include "base/jsonutil.h"
#include "base/timeutil.h"

static const char *const kind_names[] = { "backup", "restore" };

static void
add_str(cJSON *o, const char *key, const char *v)
{
	if (v != NULL)
		cJSON_AddStringToObject(o, key, v);
}

static void
add_str_or_null(cJSON *o, const char *key, const char *v)
{
	if (v != NULL)
		cJSON_AddStringToObject(o, key, v);
	else
		cJSON_AddNullToObject(o, key);
}

/* RFC 3339 time; unknown (< 0) written as null when null_ok, else left out. */
static void
add_time(cJSON *o, const char *key, int64_t us, int null_ok)
{
	char ts[TIME_STR_MAX];

	if (us < 0) {
		if (null_ok)
			cJSON_AddNullToObject(o, key);
		return;
	}
	time_format_rfc3339(us, ts);
	cJSON_AddStringToObject(o, key, ts);
}

static void
add_count(cJSON *o, const char *key, int64_t v)
{
	cJSON_AddNumberToObject(o, key, (double)(v < 0 ? 0 : v));
}

static void
add_count_or_null(cJSON *o, const char *key, int64_t v)
{
	if (v < 0)
		cJSON_AddNullToObject(o, key);
	else
		cJSON_AddNumberToObject(o, key, (double)v);
}

static void
add_labels(cJSON *o, const cJSON *labels)
{
	cJSON *copy, *l;
	const cJSON *it;

	if (labels == NULL || !cJSON_IsObject(labels))
		return;
	copy = cJSON_CreateObject();
	cJSON_ArrayForEach(it, labels) {
		if (it->string != NULL && cJSON_IsString(it)) {
			l = cJSON_CreateString(it->valuestring);
			cJSON_AddItemToObject(copy, it->string, l);
		}
	}
	cJSON_AddItemToObject(o, "labels", copy);
}

static cJSON *
list(cJSON *doc, const char *name)
{
	cJSON *a = cJSON_GetObjectItemCaseSensitive(doc, name);

	if (!cJSON_IsArray(a)) {
		cJSON_DeleteItemFromObjectCaseSensitive(doc, name);
		a = cJSON_AddArrayToObject(doc, name);
	}
	return a;
}

cJSON *
status_doc_new(const struct status_server_info *s, int64_t now_us)
{
	cJSON *doc = cJSON_CreateObject();
	cJSON *srv, *lease;
	int64_t up;

	srv = cJSON_AddObjectToObject(doc, "server");
	add_str(srv, "id", s->id != NULL ? s->id : "");
	add_time(srv, "startedAt", s->started_us >= 0 ? s->started_us : now_us, 0);
	up = s->started_us >= 0 && now_us > s->started_us ?
	    (now_us - s->started_us) / TIME_US_PER_SEC : 0;
	cJSON_AddNumberToObject(srv, "uptimeSeconds", (double)up);
	if (s->workers >= 0)
		cJSON_AddNumberToObject(srv, "workers", s->workers);
	add_str(srv, "namespace", s->namespace);
	lease = cJSON_AddObjectToObject(srv, "lease");
	add_str(lease, "name", s->lease_name != NULL ? s->lease_name : "");
	add_str(lease, "state", s->lease_state != NULL ? s->lease_state : "unknown");
	add_time(lease, "renewedAt", s->lease_renewed_us, 1);
	if (s->lease_duration_us >= 0)
		cJSON_AddNumberToObject(lease, "durationSeconds",
		    (double)s->lease_duration_us / TIME_US_PER_SEC);
	add_str_or_null(lease, "lastError", s->lease_error);
	(void)list(doc, "servers");
	(void)list(doc, "backups");
	(void)list(doc, "restores");
	(void)list(doc, "volumeOperations");
	(void)list(doc, "waiting");
	(void)list(doc, "recent");
	(void)list(doc, "schedules");
	status_doc_set_totals(doc, &(struct status_totals){ 0 });
	return doc;
}

void
status_doc_add_server(cJSON *doc, const struct status_peer *p)
{
	cJSON *o = cJSON_CreateObject();

	add_str(o, "id", p->id != NULL ? p->id : "");
	add_str(o, "leaseName", p->lease_name);
	add_time(o, "renewedAt", p->renewed_us, 1);
	if (p->duration_us >= 0)
		cJSON_AddNumberToObject(o, "durationSeconds",
		    (double)p->duration_us / TIME_US_PER_SEC);
	cJSON_AddBoolToObject(o, "expired", p->expired != 0);
	cJSON_AddBoolToObject(o, "self", p->self != 0);
	if (p->running >= 0)
		cJSON_AddNumberToObject(o, "running", p->running);
	if (p->observed_age_us >= 0)
		cJSON_AddNumberToObject(o, "observedAgeSeconds",
		    (double)p->observed_age_us / TIME_US_PER_SEC);
	cJSON_AddItemToArray(list(doc, "servers"), o);
}

/*
 * Rate of change since since_us (per second), or -1 when not measurable
 * yet (under half a second, or nothing moved).
 */
static double
rate(int64_t now_done, int64_t base_done, int64_t since_us, int64_t now_us)
{
	double secs;

	if (since_us < 0 || now_us - since_us < TIME_US_PER_SEC / 2 ||
	    now_done <= base_done)
		return -1;
	secs = (double)(now_us - since_us) / TIME_US_PER_SEC;
	return (double)(now_done - base_done) / secs;
}

static void
add_rate(cJSON *o, const char *key, double r)
{
	if (r < 0)
		cJSON_AddNullToObject(o, key);
	else
		cJSON_AddNumberToObject(o, key, r);
}

/*
 * A backup's "encryption" ({keyID, algorithm} or null: not encrypted) and
 * "verification" ({result, lastVerified, message} or null: never).
 */
static void
add_security(cJSON *o, enum status_kind kind, const cJSON *sec)
{
	const cJSON *e = json_get(sec, "encryption");
	const cJSON *v = json_get(sec, "verification");
	cJSON *x;

	if (kind == STATUS_RESTORE)
		return;
	if (json_str(e, "keyID") != NULL) {
		x = cJSON_AddObjectToObject(o, "encryption");
		add_str(x, "keyID", json_str(e, "keyID"));
		add_str(x, "algorithm", json_str_or(e, "algorithm", ""));
	} else {
		cJSON_AddNullToObject(o, "encryption");
	}
	if (json_str(v, "lastVerified") != NULL) {
		x = cJSON_AddObjectToObject(o, "verification");
		add_str(x, "result", json_str_or(v, "result", "Failed"));
		add_str(x, "lastVerified", json_str(v, "lastVerified"));
		add_str(x, "message", json_str_or(v, "message", ""));
	} else {
		cJSON_AddNullToObject(o, "verification");
	}
}

static void
add_hooks(cJSON *o, int64_t attempted, int64_t failed)
{
	cJSON *h;

	if (attempted <= 0)
		return;
	h = cJSON_AddObjectToObject(o, "hooks");
	cJSON_AddNumberToObject(h, "attempted", (double)attempted);
	cJSON_AddNumberToObject(h, "failed", (double)(failed > 0 ? failed : 0));
}

void
status_doc_add_op(cJSON *doc, enum status_kind kind, const struct status_op *op,
    int64_t now_us)
{
	const struct status_progress *pr = &op->progress;
	cJSON *o = cJSON_CreateObject(), *p;
	double ir, br, eta = -1, pct = -1;

	add_str(o, "name", op->name != NULL ? op->name : "");
	add_str(o, "namespace", op->namespace);
	add_str(o, "phase", op->phase != NULL ? op->phase : "InProgress");
	add_str(o, "holder", op->holder != NULL ? op->holder : "");
	add_str(o, "worker", op->worker);
	cJSON_AddNumberToObject(o, "attempt", op->attempt >= 1 ? op->attempt : 1);
	add_time(o, "claimedAt", op->claimed_us, 1);
	add_time(o, "startedAt", op->started_us, 1);
	add_str(o, "storageLocation", op->storage_location);
	add_str(o, "backup", op->backup);
	add_str(o, "schedule", op->schedule);
	add_labels(o, op->labels);
	cJSON_AddNumberToObject(o, "errors", op->errors > 0 ? op->errors : 0);
	cJSON_AddNumberToObject(o, "warnings", op->warnings > 0 ? op->warnings : 0);
	add_str_or_null(o, "lastError", op->last_error);
	add_security(o, kind, op->security);
	add_hooks(o, op->hooks_attempted, op->hooks_failed);
	cJSON_AddBoolToObject(o, "local", op->local != 0);

	p = cJSON_AddObjectToObject(o, "progress");
	add_count_or_null(p, "totalItems", pr->total_items);
	add_count(p, "itemsDone", pr->items_done);
	add_count(p, "bytesDone", pr->bytes_done);
	add_count_or_null(p, "totalBytes", pr->total_bytes);
	if (pr->total_items > 0) {
		pct = 100.0 * (double)pr->items_done / (double)pr->total_items;
		if (pct > 100)
			pct = 100;
	} else if (pr->total_items == 0) {
		pct = 100;
	}
	if (pct >= 0)
		cJSON_AddNumberToObject(p, "percent", pct);
	else
		cJSON_AddNullToObject(p, "percent");
	ir = rate(pr->items_done, pr->items_at_since, pr->since_us, now_us);
	br = rate(pr->bytes_done, pr->bytes_at_since, pr->since_us, now_us);
	add_rate(p, "rateItemsPerSecond", ir);
	add_rate(p, "rateBytesPerSecond", br);
	if (ir > 0 && pr->total_items >= pr->items_done)
		eta = (double)(pr->total_items - pr->items_done) / ir;
	else if (br > 0 && pr->total_bytes >= pr->bytes_done)
		eta = (double)(pr->total_bytes - pr->bytes_done) / br;
	add_rate(p, "etaSeconds", eta);
	cJSON_AddItemToArray(list(doc, kind == STATUS_RESTORE ? "restores" :
	    "backups"), o);
}

void
status_doc_add_volume(cJSON *doc, const struct status_volume_op *v, int64_t now_us)
{
	cJSON *o = cJSON_CreateObject();
	double br;

	add_str(o, "kind", kind_names[v->kind == STATUS_RESTORE]);
	add_str(o, "name", v->name != NULL ? v->name : "");
	add_str(o, v->kind == STATUS_RESTORE ? "restore" : "backup", v->owner);
	add_str(o, "volume", v->volume);
	add_str(o, "plugin", v->plugin);
	add_str(o, "phase", v->phase != NULL ? v->phase : "InProgress");
	add_str(o, "holder", v->holder);
	add_str(o, "worker", v->worker);
	if (v->attempt >= 1)
		cJSON_AddNumberToObject(o, "attempt", v->attempt);
	/* 0 (a zeroed struct) is unknown too */
	add_time(o, "startedAt", v->started_us > 0 ? v->started_us :
	    STATUS_UNKNOWN, 1);
	add_time(o, "completedAt", v->completed_us > 0 ? v->completed_us :
	    STATUS_UNKNOWN, 1);
	add_count(o, "bytesDone", v->bytes_done);
	add_count_or_null(o, "totalBytes", v->total_bytes);
	br = rate(v->bytes_done, v->bytes_at_since, v->since_us, now_us);
	add_rate(o, "rateBytesPerSecond", br);
	if (br > 0 && v->total_bytes >= v->bytes_done)
		add_rate(o, "etaSeconds", (double)(v->total_bytes - v->bytes_done) / br);
	else
		cJSON_AddNullToObject(o, "etaSeconds");
	add_str_or_null(o, "lastError", v->last_error);
	cJSON_AddItemToArray(list(doc, "volumeOperations"), o);
}

void
status_doc_add_waiting(cJSON *doc, const struct status_waiting *w)
{
	cJSON *o = cJSON_CreateObject();

	add_str(o, "kind", kind_names[w->kind == STATUS_RESTORE]);
	add_str(o, "name", w->name != NULL ? w->name : "");
	add_str(o, "namespace", w->namespace);
	add_time(o, "createdAt", w->created_us, 1);
	add_str(o, "reason", w->reason);
	cJSON_AddItemToArray(list(doc, "waiting"), o);
}

void
status_doc_add_recent(cJSON *doc, const struct status_result *r)
{
	cJSON *o = cJSON_CreateObject(), *m;

	add_str(o, "kind", kind_names[r->kind == STATUS_RESTORE]);
	add_str(o, "name", r->name != NULL ? r->name : "");
	add_str(o, "namespace", r->namespace);
	add_str(o, "phase", r->phase != NULL ? r->phase : "Failed");
	add_time(o, "startedAt", r->started_us, 1);
	add_time(o, "completedAt", r->completed_us, 1);
	if (r->started_us >= 0 && r->completed_us >= r->started_us)
		cJSON_AddNumberToObject(o, "durationSeconds",
		    (double)(r->completed_us - r->started_us) / TIME_US_PER_SEC);
	else
		cJSON_AddNullToObject(o, "durationSeconds");
	add_str(o, "holder", r->holder);
	if (r->attempt >= 1)
		cJSON_AddNumberToObject(o, "attempt", r->attempt);
	add_count(o, "itemsDone", r->items_done);
	add_count_or_null(o, "totalItems", r->total_items);
	add_count(o, "bytesDone", r->bytes_done);
	cJSON_AddNumberToObject(o, "errors", r->errors > 0 ? r->errors : 0);
	cJSON_AddNumberToObject(o, "warnings", r->warnings > 0 ? r->warnings : 0);
	add_labels(o, r->labels);
	m = cJSON_AddArrayToObject(o, "messages");
	for (size_t i = 0; r->messages != NULL && r->messages[i] != NULL; i++)
		cJSON_AddItemToArray(m, cJSON_CreateString(r->messages[i]));
	add_security(o, r->kind, r->security);
	add_str(o, "worker", r->worker);
	add_str(o, "storageLocation", r->storage_location);
	add_str(o, "backup", r->backup);
	add_str(o, "schedule", r->schedule);
	add_hooks(o, r->hooks_attempted, r->hooks_failed);
	cJSON_AddItemToArray(list(doc, "recent"), o);
}

void
status_doc_add_schedule(cJSON *doc, const struct status_schedule *s)
{
	cJSON *o = cJSON_CreateObject(), *m;

	add_str(o, "name", s->name != NULL ? s->name : "");
	add_str(o, "schedule", s->schedule != NULL ? s->schedule : "");
	add_str(o, "phase", s->phase != NULL ? s->phase : "New");
	cJSON_AddBoolToObject(o, "paused", s->paused != 0);
	add_str(o, "storageLocation", s->storage_location);
	add_time(o, "lastBackup", s->last_backup_us, 1);
	add_time(o, "nextRunAt", s->next_run_us, 1);
	add_labels(o, s->labels);
	m = cJSON_AddArrayToObject(o, "messages");
	for (size_t i = 0; s->messages != NULL && s->messages[i] != NULL; i++)
		cJSON_AddItemToArray(m, cJSON_CreateString(s->messages[i]));
	cJSON_AddItemToArray(list(doc, "schedules"), o);
}

void
status_doc_set_totals(cJSON *doc, const struct status_totals *t)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddBoolToObject(o, "synced", t->synced != 0);
	add_count(o, "backups", t->backups);
	add_count(o, "restores", t->restores);
	add_count(o, "schedules", t->schedules);
	add_count(o, "waiting", t->waiting);
	add_count(o, "running", t->running);
	add_count(o, "volumeOperationsRunning", t->volumes_running);
	cJSON_DeleteItemFromObjectCaseSensitive(doc, "totals");
	cJSON_AddItemToObject(doc, "totals", o);
}
