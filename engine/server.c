/*
 * server.c: the controller loop of `cairn server`.
 *
 * One scan thread (the caller of server_run) lists the Backups of the
 * namespace every scan period and queues, oldest first, those this server
 * may work on: New ones (matching --shard-selector) and InProgress ones
 * whose claim.holder is this server (a restart resumes its own items at
 * once, its journal holds their checkpoints). N worker threads take items
 * from the queue, re-read each, claim New ones with backup_claim() (a
 * conditional status write: a 409 means another worker won, the item is
 * dropped) and run them with backup_run().
 *
 * Where issue 8 plugs in:
 *  - Leases: create the server's Lease before the workers start and set
 *    env.may_write to lease_held() (self-fencing before every part upload
 *    and status write); release it after the workers joined.
 *  - Takeover: in scan_cb(), an InProgress item whose holder is another
 *    server and whose Lease lease_watch_expired() says is gone becomes a
 *    candidate; worker_take() then claims it with attempt+1 (the same
 *    conditional write) and backup_run() resumes from status.checkpoint.
 *  - SIGTERM grace and claim release: at stop, workers get
 *    --shutdown-grace to reach a checkpoint before stop is raised for them.
 *
 * Threads: the queue and the running set are guarded by one mutex; the
 * kube client and the journal are thread-safe handles.
 */
#include "config.h"
#include "engine/server.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "engine/backup.h"
#include "engine/upkeep.h"
#include "kube/kube.h"

#define SERVER_QUEUE_MAX 10000

static const struct kube_gvr backups_gvr = { "cairn.io", "v1", "backups" };

struct qitem {
	char *name;
	int64_t created_us;
};

struct server {
	const struct server_opts *o;
	struct engine_env env;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct qitem *q;		/* queued names */
	size_t nq, aq;
	char **running;			/* names being worked on, per worker */
	int nworkers;
	/* scan scratch */
	struct qitem *cand;
	size_t ncand, acand;
	struct upkeep *upkeep;		/* schedules, sync, GC thread */
};

static int
busy_locked(struct server *s, const char *name)
{
	for (size_t i = 0; i < s->nq; i++)
		if (strcmp(s->q[i].name, name) == 0)
			return 1;
	for (int i = 0; i < s->nworkers; i++)
		if (s->running[i] != NULL && strcmp(s->running[i], name) == 0)
			return 1;
	return 0;
}

static int
scan_cb(void *arg, cJSON *item)
{
	struct server *s = arg;
	const char *phase = json_str_or(item, "status.phase", "");
	const char *holder = json_str_or(item, "status.claim.holder", "");
	const char *ts = json_str(item, "metadata.creationTimestamp");
	int64_t created = 0;
	int want = 0;

	if (phase[0] == '\0' || strcmp(phase, "New") == 0)
		want = s->o->shard == NULL ||
		    kube_selector_match_object(s->o->shard, item);
	else if (strcmp(phase, "InProgress") == 0 &&
	    strcmp(holder, s->o->server_id) == 0)
		want = 1;
	/* issue 8: takeover candidates (holder's Lease expired) go here. */
	if (!want)
		return 0;
	if (ts != NULL)
		(void)time_parse(ts, &created);
	if (s->ncand == s->acand) {
		s->acand = s->acand ? 2 * s->acand : 16;
		s->cand = xreallocarray(s->cand, s->acand, sizeof *s->cand);
	}
	s->cand[s->ncand].name = xstrdup(json_str_or(item, "metadata.name", ""));
	s->cand[s->ncand].created_us = created;
	s->ncand++;
	return 0;
}

static int
qitem_cmp(const void *a, const void *b)
{
	const struct qitem *x = a, *y = b;

	if (x->created_us != y->created_us)
		return x->created_us < y->created_us ? -1 : 1;
	return strcmp(x->name, y->name);
}

static void
server_scan(struct server *s)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct kube_list_opts lo;
	size_t added = 0;
	int rc;

	memset(&lo, 0, sizeof lo);
	lo.limit = 500;
	lo.stop = s->o->stop;
	s->ncand = 0;
	rc = kube_list(s->o->kube, &backups_gvr, s->o->namespace, &lo, scan_cb,
	    s, NULL, &err);
	if (rc < 0 && rc != CAIRN_ECANCELED)
		log_warn("listing backups in %s: %s", s->o->namespace, err.msg);
	if (s->ncand > 1)	/* qsort(NULL, 0) is undefined (UBSan) */
		qsort(s->cand, s->ncand, sizeof *s->cand, qitem_cmp);
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->ncand; i++) {
		if (busy_locked(s, s->cand[i].name) || s->nq >= SERVER_QUEUE_MAX) {
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
		/* Keep the queue oldest first. */
		qsort(s->q, s->nq, sizeof *s->q, qitem_cmp);
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	s->ncand = 0;
}

struct worker {
	struct server *s;
	int n;
	char id[320];
	pthread_t th;
};

/* Re-read, claim if New, run. */
static void
worker_take(struct worker *w, const char *name)
{
	struct server *s = w->s;
	struct cairn_err err = CAIRN_ERR_INIT;
	cJSON *obj = NULL, *claimed = NULL;
	const char *phase;
	int rc;

	rc = kube_get(s->o->kube, &backups_gvr, s->o->namespace, name, &obj,
	    &err);
	if (rc < 0) {
		if (rc != CAIRN_ENOTFOUND)
			log_warn("reading backup %s/%s: %s", s->o->namespace,
			    name, err.msg);
		return;
	}
	phase = json_str_or(obj, "status.phase", "");
	if (phase[0] == '\0' || strcmp(phase, "New") == 0) {
		rc = backup_claim(&s->env, obj, w->id, 1, &claimed, &err);
		cJSON_Delete(obj);
		if (rc == CAIRN_ECONFLICT) {
			log_info("backup %s/%s: claimed by someone else first",
			    s->o->namespace, name);
			return;
		}
		if (rc < 0) {
			log_warn("claiming backup %s/%s: %s", s->o->namespace,
			    name, err.msg);
			return;
		}
		log_info("backup %s/%s: claimed by %s", s->o->namespace, name,
		    w->id);
		obj = claimed;
	} else if (strcmp(phase, "InProgress") != 0 ||
	    strcmp(json_str_or(obj, "status.claim.holder", ""),
	    s->o->server_id) != 0) {
		cJSON_Delete(obj);
		return;
	} else
		log_info("backup %s/%s: resuming (attempt %lld)",
		    s->o->namespace, name,
		    (long long)json_int(obj, "status.claim.attempt", 1));
	rc = backup_run(&s->env, obj, w->id, &err);
	cJSON_Delete(obj);
	if (rc == CAIRN_EFENCED)
		log_warn("backup %s/%s: ownership lost, stopped", s->o->namespace,
		    name);
	else if (rc == CAIRN_ECANCELED)
		log_info("backup %s/%s: stopped; it resumes on restart",
		    s->o->namespace, name);
	else if (rc < 0)
		log_error("backup %s/%s: %s (will retry)", s->o->namespace,
		    name, err.msg);
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	struct server *s = w->s;
	char *name;

	for (;;) {
		pthread_mutex_lock(&s->mu);
		while (s->nq == 0 && !*s->o->stop) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += 1;
			pthread_cond_timedwait(&s->cv, &s->mu, &ts);
		}
		if (*s->o->stop) {
			pthread_mutex_unlock(&s->mu);
			break;
		}
		name = s->q[0].name;
		memmove(s->q, s->q + 1, (s->nq - 1) * sizeof *s->q);
		s->nq--;
		s->running[w->n] = name;
		pthread_mutex_unlock(&s->mu);

		worker_take(w, name);

		pthread_mutex_lock(&s->mu);
		s->running[w->n] = NULL;
		pthread_mutex_unlock(&s->mu);
		free(name);
	}
	return NULL;
}

int
server_run(const struct server_opts *o, struct cairn_err *err)
{
	struct server s;
	struct worker *w;
	int started = 0;

	memset(&s, 0, sizeof s);
	s.o = o;
	s.nworkers = o->workers > 0 ? o->workers : 1;
	s.env.kube = o->kube;
	s.env.journal = o->journal;
	s.env.server_id = o->server_id;
	s.env.namespace = o->namespace;
	s.env.part_size = o->part_size;
	s.env.stop = o->stop;
	s.running = xcalloc((size_t)s.nworkers, sizeof *s.running);
	pthread_mutex_init(&s.mu, NULL);
	pthread_cond_init(&s.cv, NULL);
	w = xcalloc((size_t)s.nworkers, sizeof *w);
	for (int i = 0; i < s.nworkers; i++) {
		w[i].s = &s;
		w[i].n = i;
		snprintf(w[i].id, sizeof w[i].id, "%s/%d", o->server_id, i);
		if (pthread_create(&w[i].th, NULL, worker_main, &w[i]) != 0) {
			cairn_err_set(err, CAIRN_EFAIL, "cannot start worker %d",
			    i);
			break;
		}
		started++;
	}
	log_info("server %s: watching backups in %s with %d workers",
	    o->server_id, o->namespace, started);
	/* Schedules, location health and sync, GC (engine/upkeep.h). */
	{
		struct upkeep_opts uo = { o->kube, o->namespace, 0,
		    o->gc_period_us };
		struct cairn_err uerr = CAIRN_ERR_INIT;

		if (started == s.nworkers &&
		    upkeep_start(&uo, &s.upkeep, &uerr) < 0)
			log_error("%s; schedules, sync and GC will not run",
			    uerr.msg);
	}
	while (started == s.nworkers && !*o->stop) {
		server_scan(&s);
		time_sleep_us(o->scan_period_us, o->stop);
	}
	upkeep_stop(s.upkeep);
	pthread_mutex_lock(&s.mu);
	pthread_cond_broadcast(&s.cv);
	pthread_mutex_unlock(&s.mu);
	for (int i = 0; i < started; i++)
		pthread_join(w[i].th, NULL);
	for (size_t i = 0; i < s.nq; i++)
		free(s.q[i].name);
	free(s.q);
	free(s.cand);
	free(s.running);
	free(w);
	pthread_mutex_destroy(&s.mu);
	pthread_cond_destroy(&s.cv);
	log_info("server %s: stopped", o->server_id);
	return started == s.nworkers ? 0 : CAIRN_EFAIL;
}
