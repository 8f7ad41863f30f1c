/*
 * server.c: the controller loop of `cairn server`: many servers, one
 * owner per item. The protocol and why it is safe: docs/protocol.md.
 *
 * Start. The server's Lease `cairn-<server-id>` (engine/lease.h) is
 * acquired before any worker starts: a server that cannot get it claims
 * nothing. The Lease is then renewed in its own thread, and every worker
 * write (part upload, status write, restored item) first asks
 * lease_held() through engine_env.may_write: a server that has not
 * renewed within the renew deadline pauses its writes (self-fencing) and,
 * once renewed, re-reads the item before writing again (engine/backup.c).
 *
 * Scan. One thread (the caller of server_run) refreshes the observation
 * clock of every cairn Lease (lease_watch) and lists the Backups and
 * Restores of the namespace every scan period, and sooner when one of
 * two watches (Backups, Restores) sees a New or released item: pickup is
 * immediate, the periodic scan is the safety net. It queues, oldest first
 * (creation time, then kind and name), what this server may work on:
 *   - New items matching --shard-selector (claim, attempt 1);
 *   - InProgress items it holds itself: a restart with the same id
 *     resumes them from its journal at once (the Lease is its own);
 *   - InProgress items matching the shard whose holder is "" (released at
 *     a clean shutdown) or whose holder's Lease lease_watch_expired():
 *     takeover, claimed with attempt+1.
 * Every server queues in the same order; contention is settled by the
 * conditional claim, and a worker re-reads first, so an item claimed
 * meanwhile costs one GET, not a failed write.
 *
 * Work. N worker threads (`<server-id>/<n>`) pop the oldest item, re-read
 * it, decide again on the fresh object (the scan may be a period old),
 * claim it with a status write conditional on the resourceVersion read
 * (a 409 means another worker won: drop it) and run backup_run() or
 * restore_run(). A run that returns CAIRN_EFENCED lost its claim and
 * wrote nothing more; an error leaves the item InProgress and held, so
 * the next scan queues it again (resume).
 *
 * Stop (SIGTERM). Claiming ends at once; backups are asked to stop after
 * their next checkpoint (engine_env.drain) and restores at their next
 * item; after --shutdown-grace whatever still runs is stopped hard. Each
 * worker whose run stopped releases its claim (claim.holder "", attempt
 * and checkpoint kept, conditional write), then the Lease is released
 * (empty holder): other servers take over at once.
 *
 * Threads: the queue and the running set are guarded by one mutex; the
 * kube clients, the journal, the Lease and the lease_watch are
 * thread-safe handles.
 */
#include "config.h"
#include "engine/server.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"
#include "engine/backup.h"
#include "engine/claim.h"
#include "engine/lease.h"
#include "engine/restore.h"
#include "engine/upkeep.h"
#include "engine/verify.h"
#include "journal/journal.h"
#include "kube/kube.h"
#include "storage/store.h"
#include "base/metrics.h"

#define SERVER_QUEUE_MAX	10000
#define SERVER_GRACE_DEFAULT_US	(30 * TIME_US_PER_SEC)
#define SERVER_RELEASE_TRIES	3
#define SERVER_NUDGE_GAP_US	(50 * 1000)	/* scans woken by the watches */

enum server_kind { SK_BACKUP, SK_RESTORE, SK__COUNT };

static const struct kube_gvr server_gvrs[SK__COUNT] = {
	{ "cairn.io", "v1", "backups" },
	{ "cairn.io", "v1", "restores" },
};
static const char *const server_kind_names[SK__COUNT] = { "backup", "restore" };

struct qitem {
	char *name;
	int kind;			/* enum server_kind */
	int64_t created_us;
	uint32_t spread;		/* tie-break: hash of server id and name */
};

struct server {
	const struct server_opts *o;
	struct engine_env env;		/* backups: stop = hard, drain = drain */
	struct engine_env renv;		/* restores: stop = drain */
	struct lease *lease;
	struct lease_watch *watch;
	struct kube *lease_kube;	/* owned when not o->kube */
	atomic_int drain;		/* SIGTERM: stop at the next checkpoint */
	atomic_int hard;		/* grace over: stop now */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct qitem *q;		/* queued, oldest first */
	size_t nq, aq;
	struct qitem *running;		/* per worker; name NULL: idle */
	int nworkers;
	/* scan scratch */
	struct qitem *cand;
	size_t ncand, acand;
	int scan_kind;
	atomic_int journal_down;	/* logged: the journal cannot be written */
	struct upkeep *upkeep;		/* schedules, sync, GC thread */
	struct verify_loop *verify;	/* periodic verification thread */
	int watch_failing;		/* scan thread only */
	/*
	 * Watches of Backups and Restores wake the scan loop as soon as
	 * claimable work appears (pickup without waiting for the next
	 * periodic scan, which stays the safety net).
	 */
	pthread_t item_watch[SK__COUNT];
	int item_watching[SK__COUNT];
	atomic_int item_watch_stop;
	pthread_mutex_t nudge_mu;
	pthread_cond_t nudge_cv;
	int nudged;			/* under nudge_mu */
};

static int
server_may_write(void *arg)
{
	struct server *s = arg;

	return lease_write_epoch(s->lease);
}

static int
busy_locked(struct server *s, int kind, const char *name)
{
	for (size_t i = 0; i < s->nq; i++)
		if (s->q[i].kind == kind && strcmp(s->q[i].name, name) == 0)
			return 1;
	for (int i = 0; i < s->nworkers; i++)
		if (s->running[i].name != NULL && s->running[i].kind == kind &&
		    strcmp(s->running[i].name, name) == 0)
			return 1;
	return 0;
}

/* What may this server do with the item as read? */
enum take_mode { TAKE_NONE, TAKE_CLAIM, TAKE_RESUME, TAKE_OVER };

static enum take_mode
take_mode(struct server *s, const cJSON *item)
{
	const char *phase = json_str_or(item, "status.phase", "");
	const char *holder = json_str_or(item, "status.claim.holder", "");
	int in_shard = s->o->shard == NULL ||
	    kube_selector_match_object(s->o->shard, item);

	/*
	 * A synced Backup describes one already in storage: it is created
	 * first and given its stored status next, so for a moment it looks
	 * New. Running it would write over the stored backup.
	 */
	if (engine_is_synced(item))
		return TAKE_NONE;
	if (phase[0] == '\0' || strcmp(phase, "New") == 0)
		return in_shard ? TAKE_CLAIM : TAKE_NONE;
	if (strcmp(phase, "InProgress") != 0)
		return TAKE_NONE;
	if (strcmp(holder, s->o->server_id) == 0)
		return TAKE_RESUME;	/* ours, whatever the shard says now */
	if (!in_shard)
		return TAKE_NONE;
	if (holder[0] == '\0' || lease_watch_expired(s->watch, holder))
		return TAKE_OVER;
	return TAKE_NONE;
}

/*
 * Items created in the same second (timestamps have second resolution)
 * are taken in an order particular to each server (FNV-1a of id and
 * name), so servers polling the same backlog start on different items
 * instead of racing for the same claim; across seconds it stays oldest
 * first.
 */
static uint32_t
spread_hash(const char *id, const char *name)
{
	uint32_t h = 2166136261u;

	for (const char *p = id; *p != '\0'; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	h = (h ^ '/') * 16777619u;
	for (const char *p = name; *p != '\0'; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	return h;
}

/*
 * May this server take work? Not while its journal cannot be written
 * (disk full, read-only): a claim it cannot journal would stall the item
 * (docs/protocol.md rule 3). Logged once per outage; /readyz says the
 * same (engine/status.c).
 */
static int
server_journal_ok(struct server *s, struct cairn_err *err)
{
	if (journal_writable(s->env.journal, err)) {
		if (atomic_exchange(&s->journal_down, 0))
			log_info("server %s: the journal is writable again: "
			    "taking work again", s->o->server_id);
		return 1;
	}
	if (!atomic_exchange(&s->journal_down, 1))
		log_error("server %s: %s: taking no new work until the journal "
		    "can be written", s->o->server_id, err->msg);
	return 0;
}

#define JOURNAL_COND	"JournalWritable"

/*
 * Tell an item of ours, in status.conditions[type=JournalWritable], that
 * this server cannot write its journal (writable 0, why) or can again
 * (writable 1; only where the condition said False). A write conditional
 * on the item's resourceVersion, only while the claim is ours and the
 * Lease held; a lost race is left to the next scan. *obj is replaced by
 * the object as written.
 */
static void
server_note_journal(struct server *s, int kind, cJSON **obj, int writable,
	const char *why)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	cJSON *conds, *c = NULL, *it, *out = NULL;
	char ts[TIME_STR_MAX], msg[CAIRN_ERR_MSG_MAX + 128];
	const char *want = writable ? "True" : "False";

	if (strcmp(json_str_or(*obj, "status.claim.holder", ""),
	    s->o->server_id) != 0 || !lease_held(s->lease))
		return;
	conds = json_get(*obj, "status.conditions");
	cJSON_ArrayForEach(it, conds)
		if (strcmp(json_str_or(it, "type", ""), JOURNAL_COND) == 0)
			c = it;
	if (writable && (c == NULL ||
	    strcmp(json_str_or(c, "status", ""), "False") != 0))
		return;
	if (writable)
		str_format(msg, sizeof msg, "the journal of server %s is "
		    "writable again", s->o->server_id);
	else
		str_format(msg, sizeof msg, "server %s cannot write its journal "
		    "(%s): the work waits until it can, nothing is lost",
		    s->o->server_id, why);
	if (c != NULL && strcmp(json_str_or(c, "status", ""), want) == 0 &&
	    strcmp(json_str_or(c, "message", ""), msg) == 0)
		return;		/* said already */
	if (!cJSON_IsArray(conds)) {
		conds = cJSON_CreateArray();
		json_set_item(*obj, "status.conditions", conds);
	}
	if (c == NULL) {
		c = cJSON_CreateObject();
		cJSON_AddItemToArray(conds, c);
		json_set_str(c, "type", JOURNAL_COND);
	}
	if (strcmp(json_str_or(c, "status", ""), want) != 0) {
		time_format_rfc3339(time_now_us(), ts);
		json_set_str(c, "lastTransitionTime", ts);
	}
	json_set_str(c, "status", want);
	json_set_str(c, "reason", writable ? "Writable" : "JournalUnwritable");
	json_set_str(c, "message", msg);
	json_set_int(c, "observedGeneration",
	    json_int(*obj, "metadata.generation", 0));
	if (kube_update_status(s->o->kube, &server_gvrs[kind],
	    s->o->namespace, *obj, &out, &err) < 0) {
		log_warn("%s %s/%s: cannot note the journal state: %s",
		    server_kind_names[kind], s->o->namespace,
		    json_str_or(*obj, "metadata.name", ""), err.msg);
		return;
	}
	cJSON_Delete(*obj);
	*obj = out;
}

static int
scan_cb(void *arg, cJSON *item)
{
	struct server *s = arg;
	const char *ts = json_str(item, "metadata.creationTimestamp");
	int64_t created = 0;

	if (take_mode(s, item) == TAKE_NONE)
		return 0;
	if (ts != NULL)
		(void)time_parse(ts, &created);
	if (s->ncand == s->acand) {
		s->acand = s->acand ? 2 * s->acand : 16;
		s->cand = xreallocarray(s->cand, s->acand, sizeof *s->cand);
	}
	s->cand[s->ncand].name = xstrdup(json_str_or(item, "metadata.name", ""));
	s->cand[s->ncand].kind = s->scan_kind;
	s->cand[s->ncand].created_us = created;
	s->cand[s->ncand].spread = spread_hash(s->o->server_id,
	    s->cand[s->ncand].name);
	s->ncand++;
	return 0;
}

static int
qitem_cmp(const void *a, const void *b)
{
	const struct qitem *x = a, *y = b;

	if (x->created_us != y->created_us)
		return x->created_us < y->created_us ? -1 : 1;
	if (x->spread != y->spread)
		return x->spread < y->spread ? -1 : 1;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	return strcmp(x->name, y->name);
}

static void
server_scan(struct server *s)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct kube_list_opts lo;
	size_t added = 0;
	int rc;

	s->ncand = 0;
	for (int k = 0; k < SK__COUNT; k++) {
		memset(&lo, 0, sizeof lo);
		lo.limit = 500;
		lo.stop = s->o->stop;
		s->scan_kind = k;
		rc = kube_list(s->o->kube, &server_gvrs[k], s->o->namespace, &lo,
		    scan_cb, s, NULL, &err);
		if (rc < 0 && rc != CAIRN_ECANCELED)
			log_warn("listing %ss in %s: %s", server_kind_names[k],
			    s->o->namespace, err.msg);
		cairn_err_clear(&err);
	}
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->ncand; i++) {
		if (busy_locked(s, s->cand[i].kind, s->cand[i].name) ||
		    s->nq >= SERVER_QUEUE_MAX) {
			free(s->cand[i].name);
			continue;
		}
		if (s->nq == s->aq) {
			s->aq = s->aq ? 2 * s->aq : 16;
			s->q = xreallocarray(s->q, s->aq, sizeof *s->q);
		}
		s->q[s->nq++] = s->cand[i];
		added++;
	}
	if (added > 0) {
		/* Oldest first (qsort(NULL, 0) is undefined: UBSan). */
		if (s->nq > 1)
			qsort(s->q, s->nq, sizeof *s->q, qitem_cmp);
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	s->ncand = 0;
}

/* Refresh the observation clock; the number of expired Leases seen. */
static int
watch_refresh(struct server *s)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	cJSON *servers, *it;
	int expired = 0, live = 0;

	if (lease_watch_refresh(s->watch, &err) < 0) {
		if (!s->watch_failing)	/* once per outage, not per tick */
			log_warn("listing server Leases in %s: %s",
			    s->o->namespace, err.msg);
		s->watch_failing = 1;
		return 0;
	}
	s->watch_failing = 0;
	servers = lease_watch_servers(s->watch);
	cJSON_ArrayForEach(it, servers) {
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it,
		    "expired")))
			expired++;
		else
			live++;
	}
	cJSON_Delete(servers);
	metrics_set(METRIC_SERVERS_SEEN, live, NULL);
	return expired;
}

/* Wake the scan loop now. */
static void
server_nudge(struct server *s)
{
	pthread_mutex_lock(&s->nudge_mu);
	s->nudged = 1;
	pthread_cond_signal(&s->nudge_cv);
	pthread_mutex_unlock(&s->nudge_mu);
}

/* Sleep up to us, less if nudged (or stopping). */
static void
server_wait(struct server *s, int64_t us)
{
	struct timespec ts;

	time_deadline(&ts, us);
	pthread_mutex_lock(&s->nudge_mu);
	while (!s->nudged && !*s->o->stop &&
	    pthread_cond_timedwait(&s->nudge_cv, &s->nudge_mu, &ts) == 0)
		;
	pthread_mutex_unlock(&s->nudge_mu);
}

struct item_watch_arg {
	struct server *s;
	int kind;
};

/*
 * An item worth a scan: new, or InProgress and released (holder "").
 * Takeovers of dead holders come from the Lease watch instead.
 */
static int
item_event(void *arg, enum kube_event_type type, cJSON *obj)
{
	struct server *s = arg;
	const char *phase = json_str_or(obj, "status.phase", "");

	if (type != KUBE_EV_ADDED && type != KUBE_EV_MODIFIED)
		return 0;
	if (phase[0] == '\0' || strcmp(phase, "New") == 0 ||
	    (strcmp(phase, "InProgress") == 0 &&
	    json_str_or(obj, "status.claim.holder", "")[0] == '\0'))
		server_nudge(s);
	return 0;
}

/*
 * Watch Backups or Restores and nudge the scan loop. With bookmarks the
 * last resourceVersion stays fresh while nothing changes, so a watch the
 * server ended (timeoutSeconds) or a dropped connection resumes where it
 * was without replaying every object; kube_watch() reconnects itself and
 * backs off after drops and ERROR events. It returns on 410 (resume
 * from now: the periodic scan covers the gap) or a lasting failure (try
 * again after a scan period, from the last resourceVersion).
 */
static void *
item_watch_main(void *arg)
{
	struct server *s = ((struct item_watch_arg *)arg)->s;
	int kind = ((struct item_watch_arg *)arg)->kind;
	struct kube_watch_opts wo;
	char *rv = NULL;
	int gone = 0;

	util_thread_name("watch");

	free(arg);
	memset(&wo, 0, sizeof wo);
	wo.reconnect = 1;
	wo.bookmarks = 1;
	wo.stop = &s->item_watch_stop;
	while (!s->item_watch_stop) {
		struct cairn_err err = CAIRN_ERR_INIT;
		char *last = NULL;
		int64_t t0 = time_mono_us();
		int rc;

		wo.resource_version = rv;
		rc = kube_watch(s->o->kube, &server_gvrs[kind],
		    s->o->namespace, &wo, item_event, s, &last, &err);
		if (time_mono_us() - t0 > 5 * TIME_US_PER_SEC)
			gone = 0;	/* it ran: a 410 now is not a loop */
		if (last != NULL) {
			free(rv);
			rv = last;
		}
		if (rc == CAIRN_ECANCELED || s->item_watch_stop)
			break;
		if (rc == CAIRN_EGONE && gone++ == 0) {
			FREE_NULL(rv);
			server_nudge(s);	/* events may have been missed */
			log_debug("watch of %ss in %s: resourceVersion gone; "
			    "watching from now", server_kind_names[kind],
			    s->o->namespace);
			continue;
		}
		if (rc != CAIRN_EGONE)
			gone = 0;
		else
			FREE_NULL(rv);	/* gone again at once: wait first */
		log_debug("watch of %ss in %s ended: %s; restarting",
		    server_kind_names[kind], s->o->namespace,
		    err.msg[0] ? err.msg : "closed");
		time_sleep_us(s->o->scan_period_us, &s->item_watch_stop);
	}
	free(rv);
	return NULL;
}

static void
item_watches_start(struct server *s)
{
	for (int k = 0; k < SK__COUNT; k++) {
		struct item_watch_arg *a = xmalloc(sizeof *a);

		a->s = s;
		a->kind = k;
		if (pthread_create(&s->item_watch[k], NULL, item_watch_main,
		    a) == 0)
			s->item_watching[k] = 1;
		else {
			free(a);
			log_warn("cannot start the watch of %ss; new ones are "
			    "picked up by the periodic scan",
			    server_kind_names[k]);
		}
	}
}

static void
item_watches_stop(struct server *s)
{
	s->item_watch_stop = 1;
	for (int k = 0; k < SK__COUNT; k++)
		if (s->item_watching[k])
			pthread_join(s->item_watch[k], NULL);
}

struct worker {
	struct server *s;
	int n;
	char id[320];
	pthread_t th;
};

/*
 * After a run stopped for shutdown: give the item back (claim.holder "",
 * phase, attempt and checkpoint kept) with a write conditional on the
 * resourceVersion read, and only while we still hold our claim and Lease.
 */
static void
server_release(struct server *s, int kind, const char *name, int64_t attempt)
{
	const struct kube_gvr *g = &server_gvrs[kind];
	struct cairn_err err = CAIRN_ERR_INIT;
	cJSON *obj = NULL;
	int rc;

	for (int i = 0; i < SERVER_RELEASE_TRIES; i++) {
		if (!lease_held(s->lease))
			return;		/* fenced: the Lease expiry frees it */
		rc = kube_get(s->o->kube, g, s->o->namespace, name, &obj, &err);
		if (rc < 0)
			break;
		if (strcmp(json_str_or(obj, "status.phase", ""), "InProgress") ||
		    strcmp(json_str_or(obj, "status.claim.holder", ""),
		    s->o->server_id) != 0 ||
		    json_int(obj, "status.claim.attempt", 0) != attempt) {
			cJSON_Delete(obj);
			return;		/* finished, or no longer ours */
		}
		json_set_str(obj, "status.claim.holder", "");
		json_set_str(obj, "status.claim.worker", "");
		rc = kube_update_status(s->o->kube, g, s->o->namespace, obj,
		    NULL, &err);
		cJSON_Delete(obj);
		obj = NULL;
		if (rc == 0) {
			log_info("%s %s/%s: claim released (attempt %lld) for "
			    "another server to resume", server_kind_names[kind],
			    s->o->namespace, name, (long long)attempt);
			return;
		}
		if (rc != CAIRN_ECONFLICT)
			break;
		cairn_err_clear(&err);
	}
	log_warn("%s %s/%s: could not release the claim (%s); it is taken "
	    "over when this server's Lease expires", server_kind_names[kind],
	    s->o->namespace, name, err.msg[0] ? err.msg : "conflicts");
}

/* Re-read, decide, claim or take over, run. */
static void
worker_take(struct worker *w, int kind, const char *name)
{
	struct server *s = w->s;
	const struct kube_gvr *g = &server_gvrs[kind];
	const char *kn = server_kind_names[kind];
	const char *kl[] = { kn, NULL };
	struct cairn_err err = CAIRN_ERR_INIT;
	cJSON *obj = NULL, *claimed = NULL;
	enum take_mode mode;
	int64_t attempt;
	int rc;

	rc = kube_get(s->o->kube, g, s->o->namespace, name, &obj, &err);
	if (rc < 0) {
		if (rc != CAIRN_ENOTFOUND)
			log_warn("reading %s %s/%s: %s", kn, s->o->namespace,
			    name, err.msg);
		return;
	}
	mode = take_mode(s, obj);
	attempt = json_int(obj, "status.claim.attempt", 0);
	if (mode == TAKE_NONE || (mode != TAKE_RESUME &&
	    (s->drain || !lease_held(s->lease)))) {
		cJSON_Delete(obj);
		return;
	}
	if (!server_journal_ok(s, &err)) {
		if (mode == TAKE_RESUME)
			server_note_journal(s, kind, &obj, 0, err.msg);
		cJSON_Delete(obj);
		return;
	}
	if (mode == TAKE_RESUME)
		server_note_journal(s, kind, &obj, 1, NULL);
	if (mode == TAKE_CLAIM || mode == TAKE_OVER) {
		const char *prev = json_str_or(obj, "status.claim.holder", "");
		char *was = xstrdup(prev[0] ? prev : "(released)");

		attempt = mode == TAKE_CLAIM ? 1 : (attempt > 0 ? attempt : 1) + 1;
		if (kind == SK_BACKUP)
			rc = backup_claim(&s->env, obj, w->id, attempt, &claimed,
			    &err);
		else
			rc = restore_claim(&s->renv, obj, w->id, attempt,
			    &claimed, &err);
		cJSON_Delete(obj);
		obj = NULL;
		if (rc == CAIRN_ECONFLICT) {
			metrics_inc(METRIC_CLAIM_CONFLICTS_TOTAL, kl);
			log_info("%s %s/%s: claimed by someone else first", kn,
			    s->o->namespace, name);
			free(was);
			return;
		}
		if (rc < 0) {
			log_warn("claiming %s %s/%s: %s", kn, s->o->namespace,
			    name, err.msg);
			free(was);
			return;
		}
		metrics_inc(METRIC_CLAIMS_TOTAL, kl);
		if (mode == TAKE_OVER) {
			metrics_inc(METRIC_TAKEOVERS_TOTAL, kl);
			log_info("%s %s/%s: taken over from %s by %s (attempt "
			    "%lld)", kn, s->o->namespace, name, was, w->id,
			    (long long)attempt);
		} else
			log_info("%s %s/%s: claimed by %s", kn, s->o->namespace,
			    name, w->id);
		free(was);
		obj = claimed;
	} else {
		metrics_inc(METRIC_RESUMES_TOTAL, kl);
		log_info("%s %s/%s: resuming (attempt %lld)", kn,
		    s->o->namespace, name, (long long)attempt);
	}
	if (kind == SK_BACKUP)
		rc = backup_run(&s->env, obj, w->id, &err);
	else
		rc = restore_run(&s->renv, obj, w->id, s->o->restore_workers,
		    &err);
	cJSON_Delete(obj);
	obj = NULL;
	if (rc < 0 && rc != CAIRN_EFENCED && rc != CAIRN_ECANCELED) {
		struct cairn_err jerr = CAIRN_ERR_INIT;

		/* Stopped by the journal: the item says so until it resumes. */
		if (!server_journal_ok(s, &jerr) && kube_get(s->o->kube, g,
		    s->o->namespace, name, &obj, NULL) == 0) {
			server_note_journal(s, kind, &obj, 0, jerr.msg);
			cJSON_Delete(obj);
		}
	}
	if (rc == CAIRN_EFENCED) {
		metrics_inc(METRIC_FENCED_TOTAL, METRIC_LABELS("conflict"));
		log_warn("%s %s/%s: ownership lost, stopped without writing "
		    "more", kn, s->o->namespace, name);
	} else if (rc == CAIRN_ECANCELED) {
		if (s->drain)
			server_release(s, kind, name, attempt);
		else
			log_info("%s %s/%s: stopped", kn, s->o->namespace, name);
	} else if (rc < 0)
		log_error("%s %s/%s: %s (will retry)", kn, s->o->namespace,
		    name, err.msg);
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	struct server *s = w->s;
	struct qitem it;

	util_thread_name("worker");

	for (;;) {
		pthread_mutex_lock(&s->mu);
		while (s->nq == 0 && !s->drain) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += 1;
			pthread_cond_timedwait(&s->cv, &s->mu, &ts);
		}
		if (s->drain) {
			pthread_mutex_unlock(&s->mu);
			break;
		}
		it = s->q[0];
		memmove(s->q, s->q + 1, (s->nq - 1) * sizeof *s->q);
		s->nq--;
		s->running[w->n] = it;
		pthread_mutex_unlock(&s->mu);

		worker_take(w, it.kind, it.name);

		pthread_mutex_lock(&s->mu);
		s->running[w->n].name = NULL;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
		free(it.name);
	}
	return NULL;
}

/* Block until the Lease is held (0) or stop (CAIRN_ECANCELED). */
static int
server_acquire(struct server *s, int64_t retry_us)
{
	int warned = 0;

	for (;;) {
		struct cairn_err err = CAIRN_ERR_INIT;

		if (lease_try(s->lease, &err) == 0)
			return 0;
		if (!warned)
			log_warn("server %s: cannot hold Lease %s%s yet: %s "
			    "(claiming nothing until it can)", s->o->server_id,
			    LEASE_NAME_PREFIX, s->o->server_id, err.msg);
		warned = 1;
		time_sleep_us(retry_us, s->o->stop);
		if (*s->o->stop)
			return CAIRN_ECANCELED;
	}
}

static int
running_count(struct server *s)
{
	int n = 0;

	for (int i = 0; i < s->nworkers; i++)
		n += s->running[i].name != NULL;
	return n;
}

/*
 * The threads beside the workers: schedules, location health and sync,
 * GC (engine/upkeep.h), and backup verification. A failure to start one
 * is logged; the server runs without it.
 */
static void
server_side_threads(struct server *s)
{
	const struct server_opts *o = s->o;

	if (!o->no_upkeep) {
		struct upkeep_opts uo = { o->kube, o->namespace, 0,
		    o->gc_period_us, o->default_location, o->volumes };
		struct cairn_err uerr = CAIRN_ERR_INIT;

		if (upkeep_start(&uo, &s->upkeep, &uerr) < 0)
			log_error("%s; schedules, sync and GC will not run",
			    uerr.msg);
	}
	if (o->verify_period_us > 0) {
		struct verify_loop_opts vo = { o->kube, o->namespace,
		    o->server_id, o->verify_period_us };
		struct cairn_err verr = CAIRN_ERR_INIT;

		if (verify_loop_start(&vo, &s->verify, &verr) < 0)
			log_error("%s; backups will not be verified", verr.msg);
	}
}

/*
 * The scan loop, until *stop. The Leases are watched four times a scan
 * period (a few small objects), so a holder's death is seen soon after
 * its Lease expires; a newly expired holder triggers a scan at once.
 */
static void
server_loop(struct server *s)
{
	int64_t tick = s->o->scan_period_us / 4, next_scan = 0;
	int64_t last_nudged = 0;	/* a periodic scan does not count */
	int expired_before = 0;

	if (tick < 20000)
		tick = 20000;
	item_watches_start(s);
	while (!*s->o->stop) {
		int expired = watch_refresh(s), nudged, pending;
		int64_t now = time_mono_us();

		/* A burst of new items: one scan per SERVER_NUDGE_GAP_US. */
		pthread_mutex_lock(&s->nudge_mu);
		nudged = s->nudged &&
		    now - last_nudged >= SERVER_NUDGE_GAP_US;
		if (nudged)
			s->nudged = 0;
		pending = s->nudged;
		pthread_mutex_unlock(&s->nudge_mu);
		if (nudged)
			last_nudged = now;
		if (nudged || expired > expired_before ||
		    now >= next_scan) {
			server_scan(s);
			next_scan = time_mono_us() + s->o->scan_period_us;
		}
		expired_before = expired;
		if (pending)
			time_sleep_us(SERVER_NUDGE_GAP_US - (time_mono_us()
			    - last_nudged), s->o->stop);
		else
			server_wait(s, tick);
	}
	item_watches_stop(s);
}

/*
 * Shutdown: no more claims; running items get the grace to reach their
 * next checkpoint, then are stopped (hard).
 */
static void
server_drain(struct server *s)
{
	int64_t grace, t0;

	grace = s->o->shutdown_grace_us > 0 ? s->o->shutdown_grace_us :
	    SERVER_GRACE_DEFAULT_US;
	t0 = time_mono_us();
	s->drain = 1;
	pthread_mutex_lock(&s->mu);
	pthread_cond_broadcast(&s->cv);
	if (running_count(s) > 0)
		log_info("server %s: stopping: %d running item(s) get %.1f s to "
		    "reach a checkpoint", s->o->server_id, running_count(s),
		    (double)grace / TIME_US_PER_SEC);
	while (running_count(s) > 0 && time_mono_us() - t0 < grace) {
		struct timespec ts;

		time_deadline(&ts, 100000);
		pthread_cond_timedwait(&s->cv, &s->mu, &ts);
	}
	if (running_count(s) > 0)
		log_warn("server %s: shutdown grace over: stopping %d item(s) "
		    "now", s->o->server_id, running_count(s));
	s->hard = 1;
	pthread_mutex_unlock(&s->mu);
}

int
server_run(const struct server_opts *o, struct cairn_err *err)
{
	struct server s;
	struct lease_opts lopts;
	struct worker *w = NULL;
	int started = 0, rc;

	memset(&s, 0, sizeof s);
	s.o = o;
	s.nworkers = o->workers > 0 ? o->workers : 1;
	memset(&lopts, 0, sizeof lopts);
	lopts.namespace = o->namespace;
	lopts.identity = o->server_id;
	lopts.lease_duration_us = o->lease_duration_us > 0 ?
	    o->lease_duration_us : 15 * TIME_US_PER_SEC;
	lopts.renew_deadline_us = o->renew_deadline_us > 0 ?
	    o->renew_deadline_us : 10 * TIME_US_PER_SEC;
	lopts.retry_period_us = o->retry_period_us > 0 ?
	    o->retry_period_us : 2 * TIME_US_PER_SEC;
	s.lease_kube = lease_client_new(o->kubeconfig, o->context,
	    lopts.renew_deadline_us, lopts.retry_period_us);
	rc = lease_new(s.lease_kube ? s.lease_kube : o->kube, &lopts, &s.lease,
	    err);
	if (rc < 0) {
		kube_free(s.lease_kube);
		return rc;
	}
	s.watch = lease_watch_new(o->kube, o->namespace,
	    lopts.lease_duration_us);

	s.env.kube = o->kube;
	s.env.journal = o->journal;
	s.env.server_id = o->server_id;
	s.env.namespace = o->namespace;
	s.env.part_size = o->part_size;
	s.env.list_concurrency = o->list_concurrency;
	s.env.compression_threads = o->compression_threads;
	s.env.stop = &s.hard;
	s.env.drain = &s.drain;
	s.env.may_write = server_may_write;
	s.env.may_write_arg = &s;
	s.env.volumes = o->volumes;
	s.renv = s.env;
	s.renv.stop = &s.drain;		/* a restore's items are its checkpoints */
	s.renv.drain = NULL;
	s.renv.terminating_timeout_us = o->terminating_timeout_us;
	/* storage waits between tries end when the grace is over, too */
	store_set_process_stop(&s.hard);
	s.running = xcalloc((size_t)s.nworkers, sizeof *s.running);
	pthread_mutex_init(&s.mu, NULL);
	pthread_cond_init(&s.cv, NULL);
	pthread_mutex_init(&s.nudge_mu, NULL);
	pthread_cond_init(&s.nudge_cv, NULL);

	/* No Lease, no claims. */
	if (server_acquire(&s, lopts.retry_period_us) < 0)
		goto stopped;
	rc = lease_start(s.lease, err);
	if (rc < 0)
		goto stopped;

	w = xcalloc((size_t)s.nworkers, sizeof *w);
	for (int i = 0; i < s.nworkers; i++) {
		w[i].s = &s;
		w[i].n = i;
		snprintf(w[i].id, sizeof w[i].id, "%s/%d", o->server_id, i);
		if (pthread_create(&w[i].th, NULL, worker_main, &w[i]) != 0) {
			rc = cairn_err_set(err, CAIRN_EFAIL,
			    "cannot start worker %d", i);
			break;
		}
		started++;
	}
	log_info("server %s: watching backups and restores in %s with %d "
	    "workers", o->server_id, o->namespace, started);
	if (started == s.nworkers) {
		server_side_threads(&s);
		server_loop(&s);
	}
	server_drain(&s);
	for (int i = 0; i < started; i++)
		pthread_join(w[i].th, NULL);
	store_set_process_stop(NULL);
	upkeep_stop(s.upkeep);
	verify_loop_stop(s.verify);
	if (started == s.nworkers)
		rc = 0;
stopped:
	{
		struct cairn_err lerr = CAIRN_ERR_INIT;

		if (lease_release(s.lease, &lerr) < 0)
			log_warn("releasing the Lease: %s (it expires by itself)",
			    lerr.msg);
	}
	metrics_set(METRIC_LEASE_HELD, 0, NULL);
	for (size_t i = 0; i < s.nq; i++)
		free(s.q[i].name);
	free(s.q);
	free(s.cand);
	free(s.running);
	free(w);
	pthread_mutex_destroy(&s.mu);
	pthread_cond_destroy(&s.cv);
	pthread_mutex_destroy(&s.nudge_mu);
	pthread_cond_destroy(&s.nudge_cv);
	lease_free(s.lease);
	lease_watch_free(s.watch);
	kube_free(s.lease_kube);
	log_info("server %s: stopped", o->server_id);
	return rc < 0 ? rc : 0;
}
