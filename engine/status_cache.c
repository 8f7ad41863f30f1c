/*
 * status_cache.c: watches of cairn's objects for the status document. See
 * status_cache.h.
 *
 * Per kind a "set": the records kept (struct rec, what the page shows)
 * and an index of every object (name hash -> class) for exact totals. A
 * kind's thread lists into a fresh set (no lock: it is the thread's), swaps
 * it in under the mutex, then applies watch events to the live set under
 * the mutex. A 410 or a watch that keeps failing starts over with a list.
 *
 * What is kept of a kind: every record of class running; finished ones
 * while fewer than recent_max are kept, else only when newer than the
 * oldest kept (which is dropped); waiting ones while fewer than
 * waiting_max are kept; Schedules all. A waiting item not kept shows in
 * the totals only until the next list.
 */
#include "config.h"
#include "engine/status_cache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"
#include "engine/cron.h"
#include "engine/schedule.h"
#include "kube/kube.h"

#define SC_MESSAGES_MAX	5		/* messages kept per finished item */
#define SC_MESSAGE_MAX	1024		/* bytes of one message */
#define SC_RETRY_MIN_US	(1 * TIME_US_PER_SEC)
#define SC_RETRY_MAX_US	(30 * TIME_US_PER_SEC)

enum sc_kind { SC_BACKUP, SC_RESTORE, SC_VPB, SC_VPR, SC_SCHEDULE, SC__COUNT };
enum sc_class { SC_NONE, SC_WAITING, SC_RUNNING, SC_FINISHED };

static const struct kube_gvr sc_gvrs[SC__COUNT] = {
	{ "cairn.io", "v1", "backups" },
	{ "cairn.io", "v1", "restores" },
	{ "cairn.io", "v1", "volumepluginbackups" },
	{ "cairn.io", "v1", "volumepluginrestores" },
	{ "cairn.io", "v1", "schedules" },
};
static const char *const sc_names[SC__COUNT] = { "Backup", "Restore",
	"VolumePluginBackup", "VolumePluginRestore", "Schedule" };

/* What the page shows of one object (strings owned, NULL: absent). */
struct rec {
	char *name;
	enum sc_class cls;
	char *phase, *holder, *worker, *location, *backup, *schedule;
	char *volume, *plugin, *cron;
	int attempt, paused;
	int64_t created, claimed, started, completed, last_backup;
	int64_t total_items, items_done, bytes_done, total_bytes;
	int64_t warnings, errors, hooks_attempted, hooks_failed;
	cJSON *labels;			/* metadata.labels (strings) or NULL */
	cJSON *security;		/* Backup: {encryption, verification} */
	cJSON *messages;		/* array of strings, or NULL */
	/* rates: this attempt as first seen here */
	int seen_attempt;
	int64_t seen_us, items0, bytes0;
};

/* Index of every object of a kind: open addressing, linear probing. */
struct slot {
	uint64_t h;			/* 0: empty */
	uint8_t cls;
};

struct set {
	struct rec **recs;
	size_t nrecs, arecs;
	struct slot *slots;
	size_t nslots, used;		/* nslots a power of 2 (or 0) */
	int64_t count[4];		/* objects by class */
};

struct status_cache;

struct watcher {
	struct status_cache *c;
	enum sc_kind kind;
	pthread_t thread;
	int running;
};

struct status_cache {
	struct kube *kube;
	char *ns;
	int recent_max, waiting_max;
	atomic_int stop;
	pthread_mutex_t mu;		/* guards sets[] and synced[] */
	struct set sets[SC__COUNT];
	int synced[SC__COUNT];
	struct watcher w[SC__COUNT];
};

/* ---- records -------------------------------------------------------- */

static void
rec_free(struct rec *r)
{
	if (r == NULL)
		return;
	free(r->name);
	free(r->phase);
	free(r->holder);
	free(r->worker);
	free(r->location);
	free(r->backup);
	free(r->schedule);
	free(r->volume);
	free(r->plugin);
	free(r->cron);
	cJSON_Delete(r->labels);
	cJSON_Delete(r->security);
	cJSON_Delete(r->messages);
	free(r);
}

static char *
dup_or_null(const char *s)
{
	return s != NULL ? xstrdup(s) : NULL;
}

static int64_t
time_at(const cJSON *o, const char *path)
{
	int64_t us;
	const char *t = json_str(o, path);

	return t != NULL && time_parse(t, &us) == 0 ? us : STATUS_UNKNOWN;
}

static int64_t
count_at(const cJSON *o, const char *path)
{
	const cJSON *v = json_get(o, path);

	return cJSON_IsNumber(v) && v->valuedouble >= 0 ?
	    (int64_t)v->valuedouble : STATUS_UNKNOWN;
}

static int
is_final(enum sc_kind k, const char *phase)
{
	static const char *const finals[] = { "Completed", "PartiallyFailed",
		"Failed", "FailedValidation", "Deleting", NULL };

	(void)k;
	for (size_t i = 0; finals[i] != NULL; i++)
		if (strcmp(phase, finals[i]) == 0)
			return 1;
	return 0;
}

/* The class of an object of kind k in phase phase. */
static enum sc_class
class_of(enum sc_kind k, const char *phase)
{
	if (k == SC_SCHEDULE)
		return SC_RUNNING;	/* shown whatever its phase */
	if (is_final(k, phase))
		return SC_FINISHED;
	/* a volume operation not claimed yet is the backup's work already */
	if (k == SC_VPB || k == SC_VPR)
		return SC_RUNNING;
	if (phase[0] == '\0' || strcmp(phase, "New") == 0 ||
	    strcmp(phase, "Queued") == 0 || strcmp(phase, "ReadyToStart") == 0)
		return SC_WAITING;
	return SC_RUNNING;
}

static void
add_message(struct rec *r, const char *m)
{
	char cut[SC_MESSAGE_MAX];

	if (m == NULL || m[0] == '\0')
		return;
	if (r->messages == NULL)
		r->messages = cJSON_CreateArray();
	if (cJSON_GetArraySize(r->messages) >= SC_MESSAGES_MAX)
		return;
	str_format(cut, sizeof cut, "%s", m);
	cJSON_AddItemToArray(r->messages, cJSON_CreateString(cut));
}

/* String label values only; NULL when there are none. */
static cJSON *
labels_copy(const cJSON *labels)
{
	cJSON *out = NULL;
	const cJSON *l;

	cJSON_ArrayForEach(l, labels) {
		if (l->string == NULL || !cJSON_IsString(l))
			continue;
		if (out == NULL)
			out = cJSON_CreateObject();
		cJSON_AddStringToObject(out, l->string, l->valuestring);
	}
	return out;
}

/* A record of obj (kind k). Owned. */
static struct rec *
rec_new(enum sc_kind k, const cJSON *obj)
{
	struct rec *r = xcalloc(1, sizeof *r);
	const char *phase = json_str_or(obj, "status.phase", "");
	const cJSON *labels = json_get(obj, "metadata.labels");
	const cJSON *sched = cJSON_GetObjectItemCaseSensitive(labels,
	    SCHEDULE_LABEL);
	const cJSON *e;

	r->name = xstrdup(json_str_or(obj, "metadata.name", ""));
	r->phase = xstrdup(phase[0] ? phase : "New");
	r->cls = class_of(k, phase);
	r->holder = dup_or_null(json_str(obj, "status.claim.holder"));
	if (r->holder != NULL && r->holder[0] == '\0')
		FREE_NULL(r->holder);
	r->worker = dup_or_null(json_str(obj, "status.claim.worker"));
	r->attempt = (int)json_int(obj, "status.claim.attempt", 0);
	r->created = time_at(obj, "metadata.creationTimestamp");
	r->claimed = time_at(obj, "status.claim.claimedAt");
	r->started = time_at(obj, "status.startTimestamp");
	r->completed = time_at(obj, "status.completionTimestamp");
	r->last_backup = STATUS_UNKNOWN;
	r->total_items = count_at(obj, "status.progress.totalItems");
	r->items_done = json_int(obj, k == SC_RESTORE ?
	    "status.progress.itemsRestored" : "status.progress.itemsBackedUp",
	    0);
	r->bytes_done = json_int(obj, "status.progress.bytesDone", 0);
	r->total_bytes = count_at(obj, "status.progress.totalBytes");
	r->warnings = json_int(obj, "status.warnings", 0);
	r->errors = json_int(obj, "status.errors", 0);
	r->hooks_attempted = count_at(obj, "status.hookStatus.hooksAttempted");
	r->hooks_failed = count_at(obj, "status.hookStatus.hooksFailed");
	r->labels = labels_copy(labels);
	r->schedule = cJSON_IsString(sched) ? xstrdup(sched->valuestring) :
	    NULL;
	switch (k) {
	case SC_BACKUP:
		r->location = dup_or_null(json_str(obj, "spec.storageLocation"));
		if (json_get(obj, "status.encryption") != NULL ||
		    json_get(obj, "status.verification") != NULL) {
			r->security = cJSON_CreateObject();
			json_set_item(r->security, "encryption", cJSON_Duplicate(
			    json_get(obj, "status.encryption"), 1));
			json_set_item(r->security, "verification",
			    cJSON_Duplicate(json_get(obj,
			    "status.verification"), 1));
		}
		break;
	case SC_RESTORE:
		r->backup = dup_or_null(json_str(obj, "spec.backupName"));
		break;
	case SC_VPB:
	case SC_VPR:	/* the owner: its backup, or its restore */
		r->backup = dup_or_null(json_str(obj, k == SC_VPB ?
		    "spec.backup" : "spec.restoreName"));
		r->volume = dup_or_null(json_str(obj, "spec.volume"));
		r->plugin = dup_or_null(json_str(obj, "spec.provider"));
		add_message(r, json_str(obj, "status.message"));
		break;
	case SC_SCHEDULE:
		r->cron = dup_or_null(json_str(obj, "spec.schedule"));
		r->paused = json_bool(obj, "spec.paused", 0);
		r->location = dup_or_null(json_str(obj,
		    "spec.template.storageLocation"));
		r->last_backup = time_at(obj, "status.lastBackup");
		break;
	default:
		break;
	}
	if (k != SC_VPB && k != SC_VPR)
		add_message(r, json_str(obj, "status.failureReason"));
	cJSON_ArrayForEach(e, json_get(obj, "status.validationErrors"))
		if (cJSON_IsString(e))
			add_message(r, e->valuestring);
	return r;
}

/* ---- the index ------------------------------------------------------ */

static uint64_t
name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;	/* FNV-1a */

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return h != 0 ? h : 1;
}

static struct slot *
idx_find(struct set *s, uint64_t h)
{
	size_t mask, i;

	if (s->nslots == 0)
		return NULL;
	mask = s->nslots - 1;
	for (i = h & mask; s->slots[i].h != 0; i = (i + 1) & mask)
		if (s->slots[i].h == h)
			return &s->slots[i];
	return NULL;
}

static void idx_put(struct set *s, uint64_t h, uint8_t cls);

static void
idx_grow(struct set *s)
{
	struct slot *old = s->slots;
	size_t n = s->nslots;

	s->nslots = n ? 2 * n : 64;
	s->slots = xcalloc(s->nslots, sizeof *s->slots);
	s->used = 0;
	for (size_t i = 0; i < n; i++)
		if (old[i].h != 0)
			idx_put(s, old[i].h, old[i].cls);
	free(old);
}

/* Insert or update (counts are the caller's). */
static void
idx_put(struct set *s, uint64_t h, uint8_t cls)
{
	struct slot *sl = idx_find(s, h);
	size_t mask, i;

	if (sl != NULL) {
		sl->cls = cls;
		return;
	}
	if ((s->used + 1) * 2 > s->nslots)
		idx_grow(s);
	mask = s->nslots - 1;
	for (i = h & mask; s->slots[i].h != 0; i = (i + 1) & mask)
		;
	s->slots[i].h = h;
	s->slots[i].cls = cls;
	s->used++;
}

/* Remove with backward shift (no tombstones). */
static void
idx_del(struct set *s, uint64_t h)
{
	struct slot *sl = idx_find(s, h);
	size_t mask, i, j;

	if (sl == NULL)
		return;
	mask = s->nslots - 1;
	i = (size_t)(sl - s->slots);
	s->slots[i].h = 0;
	s->used--;
	for (j = (i + 1) & mask; s->slots[j].h != 0; j = (j + 1) & mask) {
		size_t home = s->slots[j].h & mask;

		/* may slot j move into hole i? (home not in (i, j]) */
		if ((j > i && (home <= i || home > j)) ||
		    (j < i && (home <= i && home > j))) {
			s->slots[i] = s->slots[j];
			s->slots[j].h = 0;
			i = j;
		}
	}
}

/* ---- sets ----------------------------------------------------------- */

static void
set_free(struct set *s)
{
	for (size_t i = 0; i < s->nrecs; i++)
		rec_free(s->recs[i]);
	free(s->recs);
	free(s->slots);
	memset(s, 0, sizeof *s);
}

static ssize_t
set_find(const struct set *s, const char *name)
{
	for (size_t i = 0; i < s->nrecs; i++)
		if (strcmp(s->recs[i]->name, name) == 0)
			return (ssize_t)i;
	return -1;
}

static void
set_drop(struct set *s, size_t i)
{
	rec_free(s->recs[i]);
	s->recs[i] = s->recs[--s->nrecs];
}

static size_t
set_kept(const struct set *s, enum sc_class cls, ssize_t *oldest)
{
	size_t n = 0;
	int64_t t = INT64_MAX;

	*oldest = -1;
	for (size_t i = 0; i < s->nrecs; i++) {
		const struct rec *r = s->recs[i];
		int64_t when = r->completed >= 0 ? r->completed : r->created;

		if (r->cls != cls)
			continue;
		n++;
		if (when < t) {
			t = when;
			*oldest = (ssize_t)i;
		}
	}
	return n;
}

/* The record of an object as it is now (r taken). */
static void
set_upsert(struct status_cache *c, struct set *s, struct rec *r)
{
	uint64_t h = name_hash(r->name);
	struct slot *sl = idx_find(s, h);
	ssize_t at = set_find(s, r->name), oldest;
	int keep = 1;
	int64_t now = time_now_us();

	if (sl != NULL)
		s->count[sl->cls]--;
	s->count[r->cls]++;
	idx_put(s, h, (uint8_t)r->cls);
	if (at >= 0) {
		const struct rec *o = s->recs[at];

		/* the rate base of this attempt stays */
		if (o->seen_attempt == r->attempt) {
			r->seen_attempt = o->seen_attempt;
			r->seen_us = o->seen_us;
			r->items0 = o->items0;
			r->bytes0 = o->bytes0;
		}
		set_drop(s, (size_t)at);
	}
	if (r->seen_us == 0) {
		r->seen_attempt = r->attempt;
		r->seen_us = now;
		r->items0 = r->items_done;
		r->bytes0 = r->bytes_done;
	}
	if (r->cls == SC_FINISHED) {
		int64_t when = r->completed >= 0 ? r->completed : r->created;

		if (set_kept(s, SC_FINISHED, &oldest) >= (size_t)c->recent_max) {
			const struct rec *o = s->recs[oldest];

			if ((o->completed >= 0 ? o->completed : o->created) >
			    when)
				keep = 0;
			else
				set_drop(s, (size_t)oldest);
		}
	} else if (r->cls == SC_WAITING) {
		keep = set_kept(s, SC_WAITING, &oldest) <
		    (size_t)c->waiting_max;
	}
	if (!keep) {
		rec_free(r);
		return;
	}
	if (s->nrecs == s->arecs) {
		s->arecs = s->arecs ? 2 * s->arecs : 16;
		s->recs = xreallocarray(s->recs, s->arecs, sizeof *s->recs);
	}
	s->recs[s->nrecs++] = r;
}

static void
set_remove(struct set *s, const char *name)
{
	struct slot *sl = idx_find(s, name_hash(name));
	ssize_t at = set_find(s, name);

	if (sl != NULL) {
		s->count[sl->cls]--;
		idx_del(s, name_hash(name));
	}
	if (at >= 0)
		set_drop(s, (size_t)at);
}

/* ---- the watches ---------------------------------------------------- */

struct listing {
	struct status_cache *c;
	enum sc_kind kind;
	struct set fresh;
};

static int
list_item(void *arg, cJSON *obj)
{
	struct listing *l = arg;

	set_upsert(l->c, &l->fresh, rec_new(l->kind, obj));
	return 0;
}

static int
watch_event(void *arg, enum kube_event_type type, cJSON *obj)
{
	struct watcher *w = arg;
	struct status_cache *c = w->c;
	struct set *s = &c->sets[w->kind];

	if (type != KUBE_EV_ADDED && type != KUBE_EV_MODIFIED &&
	    type != KUBE_EV_DELETED)
		return 0;
	pthread_mutex_lock(&c->mu);
	if (type == KUBE_EV_DELETED)
		set_remove(s, json_str_or(obj, "metadata.name", ""));
	else
		set_upsert(c, s, rec_new(w->kind, obj));
	pthread_mutex_unlock(&c->mu);
	return 0;
}

/*
 * What a list reads of each object: the status fields shown, not the
 * checkpoint (up to 10000 parts) nor the spec's hooks and filters.
 */
static const char *const list_members[] = {
	"metadata.name", "metadata.labels", "metadata.creationTimestamp",
	"spec", "status.phase", "status.claim", "status.progress",
	"status.warnings", "status.errors", "status.startTimestamp",
	"status.completionTimestamp", "status.failureReason",
	"status.validationErrors", "status.encryption", "status.verification",
	"status.hookStatus", "status.lastBackup", "status.message", NULL
};

static void *
watcher_main(void *arg)
{
	struct watcher *w = arg;
	struct status_cache *c = w->c;
	const struct kube_gvr *gvr = &sc_gvrs[w->kind];
	int64_t backoff = SC_RETRY_MIN_US;

	util_thread_name("cache");

	while (!c->stop) {
		struct cairn_err err = CAIRN_ERR_INIT;
		struct listing l;
		struct kube_list_opts lo;
		struct kube_list_info info;
		struct kube_watch_opts wo;
		int64_t t0;
		int rc;

		memset(&l, 0, sizeof l);
		l.c = c;
		l.kind = w->kind;
		memset(&lo, 0, sizeof lo);
		lo.stop = &c->stop;
		lo.parse_only = list_members;
		lo.restart_on_gone = KUBE_GONE_RESTART;
		rc = kube_list(c->kube, gvr, c->ns, &lo, list_item, &l, &info,
		    &err);
		if (rc < 0) {
			set_free(&l.fresh);
			if (rc == CAIRN_ECANCELED)
				break;
			log_debug("status: listing %ss: %s", sc_names[w->kind],
			    err.msg);
			time_sleep_us(backoff, &c->stop);
			backoff = backoff * 2 > SC_RETRY_MAX_US ?
			    SC_RETRY_MAX_US : backoff * 2;
			continue;
		}
		pthread_mutex_lock(&c->mu);
		set_free(&c->sets[w->kind]);
		c->sets[w->kind] = l.fresh;
		c->synced[w->kind] = 1;
		pthread_mutex_unlock(&c->mu);
		memset(&wo, 0, sizeof wo);
		wo.resource_version = info.resource_version;
		wo.bookmarks = 1;
		wo.reconnect = 1;
		wo.stop = &c->stop;
		t0 = time_mono_us();
		rc = kube_watch(c->kube, gvr, c->ns, &wo, watch_event, w, NULL,
		    &err);
		if (rc == CAIRN_ECANCELED || c->stop)
			break;
		/* 410: relist now; a watch that keeps failing: back off */
		if (rc == CAIRN_EGONE || time_mono_us() - t0 > SC_RETRY_MAX_US)
			backoff = SC_RETRY_MIN_US;
		log_debug("status: watch of %ss ended: %s; listing again",
		    sc_names[w->kind], err.msg[0] ? err.msg : "closed");
		if (rc != CAIRN_EGONE) {
			time_sleep_us(backoff, &c->stop);
			backoff = backoff * 2 > SC_RETRY_MAX_US ?
			    SC_RETRY_MAX_US : backoff * 2;
		}
	}
	return NULL;
}

int
status_cache_start(const struct status_cache_opts *o, struct status_cache **out,
    struct cairn_err *err)
{
	struct status_cache *c = xcalloc(1, sizeof *c);

	*out = NULL;
	c->kube = o->kube;
	c->ns = xstrdup(o->namespace);
	c->recent_max = o->recent_max > 0 ? o->recent_max :
	    STATUS_CACHE_RECENT_MAX;
	c->waiting_max = o->waiting_max > 0 ? o->waiting_max :
	    STATUS_CACHE_WAITING_MAX;
	pthread_mutex_init(&c->mu, NULL);
	for (int k = 0; k < SC__COUNT; k++) {
		c->w[k].c = c;
		c->w[k].kind = (enum sc_kind)k;
		if (pthread_create(&c->w[k].thread, NULL, watcher_main,
		    &c->w[k]) != 0) {
			status_cache_stop(c);
			return cairn_err_set(err, CAIRN_EFAIL, "cannot start "
			    "the status watches");
		}
		c->w[k].running = 1;
	}
	*out = c;
	return 0;
}

void
status_cache_stop(struct status_cache *c)
{
	if (c == NULL)
		return;
	c->stop = 1;
	for (int k = 0; k < SC__COUNT; k++)
		if (c->w[k].running)
			pthread_join(c->w[k].thread, NULL);
	for (int k = 0; k < SC__COUNT; k++)
		set_free(&c->sets[k]);
	pthread_mutex_destroy(&c->mu);
	free(c->ns);
	free(c);
}

/* ---- what the document shows ---------------------------------------- */

void
status_cache_totals(struct status_cache *c, struct status_cache_totals *t)
{
	memset(t, 0, sizeof *t);
	pthread_mutex_lock(&c->mu);
	/* the lists that matter: a kind the API refuses must not hide them */
	t->synced = c->synced[SC_BACKUP] && c->synced[SC_RESTORE];
	for (int i = SC_WAITING; i <= SC_FINISHED; i++) {
		t->backups += c->sets[SC_BACKUP].count[i];
		t->restores += c->sets[SC_RESTORE].count[i];
		t->schedules += c->sets[SC_SCHEDULE].count[i];
	}
	t->backups_waiting = c->sets[SC_BACKUP].count[SC_WAITING];
	t->restores_waiting = c->sets[SC_RESTORE].count[SC_WAITING];
	t->backups_running = c->sets[SC_BACKUP].count[SC_RUNNING];
	t->restores_running = c->sets[SC_RESTORE].count[SC_RUNNING];
	t->volumes_running = c->sets[SC_VPB].count[SC_RUNNING] +
	    c->sets[SC_VPR].count[SC_RUNNING];
	pthread_mutex_unlock(&c->mu);
}

int
status_cache_running(struct status_cache *c, const char *holder)
{
	int n = 0;

	pthread_mutex_lock(&c->mu);
	for (int k = SC_BACKUP; k <= SC_VPR; k++) {
		const struct set *s = &c->sets[k];

		for (size_t i = 0; i < s->nrecs; i++)
			n += s->recs[i]->cls == SC_RUNNING &&
			    s->recs[i]->holder != NULL &&
			    strcmp(s->recs[i]->holder, holder) == 0;
	}
	pthread_mutex_unlock(&c->mu);
	return n;
}

static void
render_op(cJSON *doc, enum sc_kind k, const struct rec *r, const char *self,
    status_cache_local_fn local, void *arg, int64_t now)
{
	struct status_op op;

	memset(&op, 0, sizeof op);
	op.name = r->name;
	op.phase = r->phase;
	op.holder = r->holder != NULL ? r->holder : "";
	op.worker = r->worker;
	op.attempt = r->attempt > 0 ? r->attempt : 1;
	op.claimed_us = r->claimed;
	op.started_us = r->started;
	op.storage_location = r->location;
	op.backup = r->backup;
	op.schedule = r->schedule;
	op.labels = r->labels;
	op.errors = (int)r->errors;
	op.warnings = (int)r->warnings;
	op.hooks_attempted = r->hooks_attempted;
	op.hooks_failed = r->hooks_failed;
	op.security = r->security;
	op.progress.total_items = r->total_items;
	op.progress.items_done = r->items_done;
	op.progress.bytes_done = r->bytes_done;
	op.progress.total_bytes = STATUS_UNKNOWN;
	op.progress.since_us = r->seen_us;
	op.progress.items_at_since = r->items0;
	op.progress.bytes_at_since = r->bytes0;
	op.local = self != NULL && r->holder != NULL &&
	    strcmp(r->holder, self) == 0;
	if (op.local && local != NULL)
		local(arg, sc_names[k], r->name, &op);
	status_doc_add_op(doc, k == SC_RESTORE ? STATUS_RESTORE :
	    STATUS_BACKUP, &op, now);
}

static void
render_volume(cJSON *doc, enum sc_kind k, const struct rec *r, int64_t now)
{
	struct status_volume_op v;

	memset(&v, 0, sizeof v);
	v.kind = k == SC_VPR ? STATUS_RESTORE : STATUS_BACKUP;
	v.name = r->name;
	v.owner = r->backup;
	v.volume = r->volume;
	v.plugin = r->plugin;
	v.phase = r->phase;
	v.holder = r->holder;
	v.worker = r->worker;
	v.attempt = r->attempt;
	v.bytes_done = r->bytes_done;
	v.total_bytes = r->total_bytes;
	v.since_us = r->cls == SC_RUNNING ? r->seen_us : STATUS_UNKNOWN;
	v.bytes_at_since = r->bytes0;
	v.started_us = r->started;
	v.completed_us = r->cls == SC_FINISHED ? r->completed : STATUS_UNKNOWN;
	v.last_error = cJSON_IsString(cJSON_GetArrayItem(r->messages, 0)) &&
	    strcmp(r->phase, "Completed") != 0 ?
	    cJSON_GetArrayItem(r->messages, 0)->valuestring : NULL;
	status_doc_add_volume(doc, &v, now);
}

/* r's messages into msgs (SC_MESSAGES_MAX + 1 slots), NULL-terminated. */
static void
rec_messages(const struct rec *r, const char **msgs)
{
	int n = 0;

	for (int i = 0; i < cJSON_GetArraySize(r->messages) &&
	    n < SC_MESSAGES_MAX; i++)
		if (cJSON_IsString(cJSON_GetArrayItem(r->messages, i)))
			msgs[n++] = cJSON_GetArrayItem(r->messages,
			    i)->valuestring;
	msgs[n] = NULL;
}

static void
render_result(struct status_result *res, enum sc_kind k, const struct rec *r,
    const char **msgs)
{
	memset(res, 0, sizeof *res);
	res->kind = k == SC_RESTORE ? STATUS_RESTORE : STATUS_BACKUP;
	res->name = r->name;
	res->phase = r->phase;
	res->started_us = r->started;
	res->completed_us = r->completed;
	res->holder = r->holder;
	res->worker = r->worker;
	res->attempt = r->attempt;
	res->items_done = r->items_done;
	res->total_items = r->total_items;
	res->bytes_done = r->bytes_done;
	res->errors = (int)r->errors;
	res->warnings = (int)r->warnings;
	res->hooks_attempted = r->hooks_attempted;
	res->hooks_failed = r->hooks_failed;
	res->storage_location = r->location;
	res->backup = r->backup;
	res->schedule = r->schedule;
	res->labels = r->labels;
	res->security = r->security;
	rec_messages(r, msgs);
	res->messages = msgs;
}

/* A record and its kind, for the lists the document shows. */
struct pick {
	const struct rec *r;
	enum sc_kind k;
};

static int64_t
rec_when(const struct rec *r)
{
	return r->completed >= 0 ? r->completed : r->created;
}

static int
newest_first(const void *a, const void *b)
{
	int64_t x = rec_when(((const struct pick *)a)->r);
	int64_t y = rec_when(((const struct pick *)b)->r);

	return x > y ? -1 : x < y;
}

static int
oldest_first(const void *a, const void *b)
{
	const struct rec *x = ((const struct pick *)a)->r;
	const struct rec *y = ((const struct pick *)b)->r;
	int c = x->created < y->created ? -1 : x->created > y->created;

	return c != 0 ? c : strcmp(x->name, y->name);
}

/* Records of kinds ks of class cls, sorted by cmp (under mu). Owned. */
static struct pick *
pick(struct status_cache *c, const enum sc_kind *ks, size_t nk,
    enum sc_class cls, int (*cmp)(const void *, const void *), size_t *n)
{
	struct pick *v = NULL;
	size_t a = 0;

	*n = 0;
	for (size_t i = 0; i < nk; i++) {
		const struct set *s = &c->sets[ks[i]];

		for (size_t j = 0; j < s->nrecs; j++) {
			if (s->recs[j]->cls != cls)
				continue;
			if (*n == a) {
				a = a ? 2 * a : 16;
				v = xreallocarray(v, a, sizeof *v);
			}
			v[*n].r = s->recs[j];
			v[(*n)++].k = ks[i];
		}
	}
	if (*n > 1)
		qsort(v, *n, sizeof *v, cmp);
	return v;
}

static void
render_schedule(cJSON *doc, const struct rec *r, int64_t now)
{
	struct status_schedule s;
	const char *msgs[SC_MESSAGES_MAX + 1];
	struct cron *cr = NULL;

	memset(&s, 0, sizeof s);
	s.name = r->name;
	s.schedule = r->cron;
	s.phase = r->phase;
	s.paused = r->paused;
	s.storage_location = r->location;
	s.last_backup_us = r->last_backup;
	s.next_run_us = STATUS_UNKNOWN;
	if (!r->paused && r->cron != NULL && strcmp(r->phase, "Enabled") == 0 &&
	    cron_parse(r->cron, &cr, NULL) == 0) {
		int64_t every = cron_interval(cr);

		if (every > 0)
			s.next_run_us = r->last_backup >= 0 ?
			    r->last_backup + every : STATUS_UNKNOWN;
		else
			s.next_run_us = cron_next(cr, now);
		cron_free(cr);
	}
	rec_messages(r, msgs);
	s.messages = msgs;
	s.labels = r->labels;
	status_doc_add_schedule(doc, &s);
}

void
status_cache_render(struct status_cache *c, cJSON *doc, const char *self,
    status_cache_local_fn local, void *arg, int64_t now_us)
{
	static const enum sc_kind ops[] = { SC_BACKUP, SC_RESTORE };
	static const enum sc_kind vols[] = { SC_VPB, SC_VPR };
	struct status_cache_totals t;
	struct pick *v;
	size_t n;

	status_cache_totals(c, &t);
	pthread_mutex_lock(&c->mu);
	/* running backups and restores, oldest first */
	v = pick(c, ops, 2, SC_RUNNING, oldest_first, &n);
	for (size_t i = 0; i < n; i++)
		render_op(doc, v[i].k, v[i].r, self, local, arg, now_us);
	free(v);
	/* volume operations: running (oldest first), then finished */
	v = pick(c, vols, 2, SC_RUNNING, oldest_first, &n);
	for (size_t i = 0; i < n; i++)
		render_volume(doc, v[i].k, v[i].r, now_us);
	free(v);
	v = pick(c, vols, 2, SC_FINISHED, newest_first, &n);
	for (size_t i = 0; i < n; i++)
		render_volume(doc, v[i].k, v[i].r, now_us);
	free(v);
	/* waiting, oldest first */
	v = pick(c, ops, 2, SC_WAITING, oldest_first, &n);
	for (size_t i = 0; i < n; i++) {
		struct status_waiting w;

		memset(&w, 0, sizeof w);
		w.kind = v[i].k == SC_RESTORE ? STATUS_RESTORE : STATUS_BACKUP;
		w.name = v[i].r->name;
		w.namespace = c->ns;
		w.created_us = v[i].r->created;
		w.reason = "not claimed yet";
		status_doc_add_waiting(doc, &w);
	}
	free(v);
	/* finished, newest first */
	v = pick(c, ops, 2, SC_FINISHED, newest_first, &n);
	for (size_t i = 0; i < n; i++) {
		struct status_result res;
		const char *msgs[SC_MESSAGES_MAX + 1];

		render_result(&res, v[i].k, v[i].r, msgs);
		res.namespace = c->ns;
		status_doc_add_recent(doc, &res);
	}
	free(v);
	for (size_t i = 0; i < c->sets[SC_SCHEDULE].nrecs; i++)
		render_schedule(doc, c->sets[SC_SCHEDULE].recs[i], now_us);
	pthread_mutex_unlock(&c->mu);
	status_doc_set_totals(doc, &(struct status_totals){
	    .synced = t.synced, .backups = t.backups, .restores = t.restores,
	    .schedules = t.schedules,
	    .waiting = t.backups_waiting + t.restores_waiting,
	    .running = t.backups_running + t.restores_running,
	    .volumes_running = t.volumes_running });
}
