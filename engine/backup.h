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

struct kube;
struct journal;

#define BACKUP_GVR_GROUP "cairn.io"
#define BACKUP_GVR_VERSION "v1"

/* What every run needs; borrowed by the run, owned by the server. */
struct engine_env {
	struct kube *kube;
	struct journal *journal;
	const char *server_id;		/* claim.holder */
	const char *namespace;		/* where Backups and BSLs live */
	size_t part_size;		/* --part-size */
	const volatile int *stop;	/* non-zero: stop at the next item */
	/*
	 * Non-zero: stop after the next checkpoint (a clean shutdown's
	 * grace); NULL: never. The run returns CAIRN_ECANCELED then.
	 */
	const volatile int *drain;
	/*
	 * Self-fencing hook (the server's Lease, lease_write_epoch()):
	 * called before each part upload and status write; 0 means "do
	 * not write now" (the run waits, re-checking, until it is non-zero
	 * or stop is set). A non-zero value names the Lease's holding
	 * period: after a pause, or when the value differs from the last
	 * one seen, the run re-reads the item and stops with CAIRN_EFENCED
	 * if the claim is no longer its own. NULL: always allowed.
	 */
	int (*may_write)(void *arg);
	void *may_write_arg;
};

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
