/*
 * upkeep.h: the housekeeping thread of `cairn server`: Schedules
 * (engine/schedule.h), storage location health and backup sync
 * (engine/sync.h), the cleanup finalizer and expiry of Backups
 * (engine/gc.h). It runs beside the backup workers so that a slow bucket
 * never delays a claim. Every pass of each part is safe to run on several
 * servers at once (deterministic names, conditional writes, idempotent
 * deletes), so every replica runs it; no leader is needed.
 */
#ifndef CAIRN_UPKEEP_H
#define CAIRN_UPKEEP_H

#include <stdint.h>
#include "base/err.h"

struct kube;
struct upkeep;
struct volumes;

struct upkeep_opts {
	struct kube *kube;		/* borrowed, thread-safe */
	const char *namespace;		/* borrowed for the thread's life */
	int64_t tick_us;		/* schedules, health, sync, finalizers; 0: 1 s */
	int64_t gc_period_us;		/* expiry of Backups; 0: 1 h */
	/*
	 * A BackupStorageLocation spec (JSON) created as "default" when that
	 * name does not exist (retried each tick until it is there); NULL:
	 * none. Borrowed for the thread's life.
	 */
	const char *default_location;
	/* Volume work's configuration (snapshots deleted with a backup). */
	struct volumes *volumes;
};

/* Start the thread. *out is owned: upkeep_stop() joins and frees it. */
int upkeep_start(const struct upkeep_opts *o, struct upkeep **out,
	struct cairn_err *err);
/* Ask the thread to stop, wait for its current pass, free. NULL is fine. */
void upkeep_stop(struct upkeep *u);

#endif
