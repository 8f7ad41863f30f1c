/*
 * backup.h: the backup controller's work on one Backup (claim, run,
 * resume). The server (engine/server.h) decides what to work on and
 * calls these from its worker threads.
 *
 * Ownership protocol (docs/protocol.md): backup_claim() writes
 * phase=InProgress and status.claim with the resourceVersion read; every
 * later status write is conditional too, and a 409 followed by a re-read
 * showing another holder (or attempt) makes the run stop at once with
 * CAIRN_EFENCED, writing nothing more to the cluster or to storage.
 * Journal first, cluster second: a part is recorded with
 * journal_part_add() before status.checkpoint names it.
 */
#ifndef CAIRN_BACKUP_H
#define CAIRN_BACKUP_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "base/err.h"
#include "engine/claim.h"	/* struct engine_env */

#define BACKUP_GVR_GROUP "cairn.io"
#define BACKUP_GVR_VERSION "v1"

/*
 * Claim a Backup object as read (its resourceVersion is the condition):
 * phase=InProgress, claim{holder=server_id, worker, attempt, claimedAt}.
 * 0: claimed, *out (owned) is the object as written. CAIRN_ECONFLICT:
 * someone else changed it first (leave it alone). Other errors: API.
 */
int backup_claim(const struct engine_env *env, const cJSON *obj,
	const char *worker, int64_t attempt, cJSON **out,
	struct cairn_err *err);

/*
 * Run a Backup this server holds (obj as returned by backup_claim, or as
 * read for a resume: status.claim.holder == server_id). Validates the
 * spec (FailedValidation), writes the tarball in parts, the metadata
 * files, and the final phase. Resumes from the journal (same uid) or,
 * failing that, from status.checkpoint when parts are recorded.
 * Returns 0 when the Backup reached a final phase (whichever),
 * CAIRN_EFENCED when ownership was lost, CAIRN_ECANCELED when stopped
 * (the backup stays InProgress and resumes later), or an error that left
 * it InProgress (the server retries later).
 */
int backup_run(const struct engine_env *env, const cJSON *obj,
	const char *worker, struct cairn_err *err);

#endif
