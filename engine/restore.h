/*
 * restore.h: the restore controller's work on one Restore (claim, run,
 * resume), on the same ownership protocol as backups (engine/backup.h,
 * docs/protocol.md): restore_claim() writes phase=InProgress and
 * status.claim with the resourceVersion read; every later status write is
 * conditional, and a 409 followed by a re-read showing another holder or
 * attempt stops the run at once with CAIRN_EFENCED.
 *
 * Journal first, cluster second: an item's outcome is recorded in the
 * journal (in batches) before status.progress counts it; a restarted
 * server skips the items its journal has. Items created but not yet
 * journaled when a server died, and every item on a takeover by another
 * server (whose journal is empty), come back as AlreadyExists: when the
 * live object equals the backed-up one (after the metadata reset) the item
 * counts as done.
 *
 * Wiring into engine/server.c: scan `restores` like `backups` (New ones
 * matching the shard selector; InProgress ones held by this server), and
 * in the worker call restore_take() (claim if New, then restore_run()).
 */
#ifndef CAIRN_RESTORE_H
#define CAIRN_RESTORE_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "base/err.h"
#include "engine/backup.h"

#define RESTORE_LABEL_BACKUP	"cairn.io/backup-name"
#define RESTORE_LABEL_RESTORE	"cairn.io/restore-name"
#define RESTORE_DEFAULT_WORKERS	8
#define RESTORE_CRD_WAIT_US	(60LL * 1000000)	/* CRD to become Established */

/*
 * Claim a Restore object as read (its resourceVersion is the condition):
 * phase=InProgress, claim{holder=env->server_id, worker, attempt,
 * claimedAt}. 0: claimed, *out (owned) is the object as written;
 * CAIRN_ECONFLICT: someone else changed it first (leave it alone).
 */
int restore_claim(const struct engine_env *env, const cJSON *obj,
	const char *worker, int64_t attempt, cJSON **out,
	struct cairn_err *err);

/*
 * Run a Restore this server holds (obj as returned by restore_claim, or as
 * read for a resume). Validates (FailedValidation: missing backup, backup
 * not Completed/PartiallyFailed, bad mapping/selector/policy), reads the
 * tarball once into the plan, creates the items tier by tier with
 * `workers` parallel creates per tier (<= 0: RESTORE_DEFAULT_WORKERS),
 * uploads results, logs and the resource list under restores/<name>/, and
 * writes the final phase (Completed, PartiallyFailed or Failed).
 * Returns 0 when the Restore reached a final phase (whichever),
 * CAIRN_EFENCED when ownership was lost, CAIRN_ECANCELED when stopped (it
 * stays InProgress and resumes later), or an error that left it
 * InProgress (retry later).
 */
int restore_run(const struct engine_env *env, const cJSON *obj,
	const char *worker, int workers, struct cairn_err *err);

/*
 * What a server worker does with a queued Restore name: re-read it; if New
 * (or no phase), claim it (attempt 1) and run it; if InProgress and held
 * by env->server_id, resume it; anything else is left alone (returns 0).
 * CAIRN_ECONFLICT: another worker claimed it first (leave it). Other
 * codes as restore_run().
 */
int restore_take(const struct engine_env *env, const char *name,
	const char *worker, int workers, struct cairn_err *err);

/*
 * The metadata reset applied before create, exposed for tests: drops
 * generateName, selfLink, uid, resourceVersion, generation,
 * creationTimestamp, deletionTimestamp, deletionGracePeriodSeconds,
 * ownerReferences, managedFields and status (in place).
 */
void restore_reset_metadata(cJSON *obj);

#endif
