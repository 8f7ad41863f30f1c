/*
 * status_cache.h: the cluster's work as every server's /status shows it.
 *
 * A status cache watches the Backups, Restores, VolumePluginBackups,
 * VolumePluginRestores and Schedules of cairn's namespace (a list, then a
 * watch from its resourceVersion, relisted after a 410) and keeps what
 * the status document shows of them, as compact records taken from each
 * object's status: running items (their holder, worker, attempt and
 * progress), the newest finished ones (at most recent_max of each kind),
 * the oldest waiting ones (at most waiting_max) and every Schedule. Every
 * other object is remembered only as a 16-byte entry (a hash of its name
 * and its class), so the totals are exact and memory stays bounded by
 * what the page shows, whatever the number of objects.
 *
 * Every server runs one, so every server's page lists the same work:
 * the numbers come from the objects' status, the same ones the CLI and
 * kubectl read. The server's journal adds detail for its own items
 * (status_cache_render()'s local callback).
 *
 * Threading: one thread per watched kind; status_cache_render() and
 * status_cache_totals() may be called from any thread (one mutex, held
 * while records are copied into the document).
 */
#ifndef CAIRN_STATUS_CACHE_H
#define CAIRN_STATUS_CACHE_H

#include <stdint.h>
#include <cjson/cJSON.h>
#include "base/err.h"
#include "engine/status_doc.h"

struct kube;
struct status_cache;

#define STATUS_CACHE_RECENT_MAX		20	/* finished items kept per kind */
#define STATUS_CACHE_WAITING_MAX	100	/* waiting items kept per kind */

struct status_cache_opts {
	struct kube *kube;		/* borrowed, shared by the watches */
	const char *namespace;		/* copied */
	int recent_max;			/* 0: STATUS_CACHE_RECENT_MAX */
	int waiting_max;		/* 0: STATUS_CACHE_WAITING_MAX */
};

/* Start the watches. On failure *out is NULL (nothing runs). */
int status_cache_start(const struct status_cache_opts *o,
	struct status_cache **out, struct cairn_err *err);
/* Stop the watches, join their threads, free. NULL is fine. */
void status_cache_stop(struct status_cache *c);

/* Exact counts of the objects seen (for totals and metrics). */
struct status_cache_totals {
	int synced;			/* Backups and Restores listed once */
	int64_t backups, restores, schedules;
	int64_t backups_waiting, restores_waiting;
	int64_t backups_running, restores_running, volumes_running;
};
void status_cache_totals(struct status_cache *c, struct status_cache_totals *t);

/*
 * Extra detail of an item held by this server (the journal's), filled
 * by the caller for each running backup or restore whose holder is
 * `self`: kind "Backup" or "Restore". May set op->last_error (a string
 * that must stay valid until status_cache_render() returns).
 */
typedef void (*status_cache_local_fn)(void *arg, const char *kind,
	const char *name, struct status_op *op);

/*
 * Add to doc (status_doc_new()'s): backups[] and restores[] running in
 * the cluster, volumeOperations[] (running, then recently finished),
 * waiting[], recent[] (newest first), schedules[] and totals. Running
 * items held by self are marked "local" and given to local (may be NULL)
 * for the journal's detail first.
 */
void status_cache_render(struct status_cache *c, cJSON *doc, const char *self,
	status_cache_local_fn local, void *arg, int64_t now_us);

/* Items (backups, restores, volume operations) running under holder. */
int status_cache_running(struct status_cache *c, const char *holder);

#endif
