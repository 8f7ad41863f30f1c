/*
 * claim.h: the claim on a cairn.io item (Backup, Restore, volume
 * operations) and its fence, shared by the controllers, with what every
 * run needs (struct engine_env). It is the bottom of the controllers:
 * it includes no other engine/ header.
 *
 * Ownership protocol (docs/protocol.md): engine_claim() writes
 * phase=InProgress and status.claim conditionally on the resourceVersion
 * read. After that every write is guarded by a struct engine_fence:
 * engine_fence_check() waits while the server's Lease is not renewed
 * (self-fencing, rule 5) and, after such a pause or when the Lease's
 * write epoch changed, re-reads the item and stops with CAIRN_EFENCED
 * unless the claim still stands; engine_status_write() is the
 * conditional status write, which re-reads on 409 and stops with
 * CAIRN_EFENCED when another claim won (or the item was deleted).
 * A fence is used by one thread at a time.
 */
#ifndef CAIRN_CLAIM_H
#define CAIRN_CLAIM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "base/err.h"

struct kube;
struct kube_gvr;
struct journal;
struct volumes;

/* What every run needs; borrowed by the run, owned by the server. */
struct engine_env {
	struct kube *kube;
	struct journal *journal;
	const char *server_id;		/* claim.holder */
	const char *namespace;		/* where Backups and BSLs live */
	size_t part_size;		/* --part-size */
	int list_concurrency;		/* --list-concurrency; 0: default */
	int compression_threads;	/* --compression-threads; 0: default */
	const atomic_int *stop;	/* non-zero: stop at the next item */
	/*
	 * Non-zero: stop after the next checkpoint (a clean shutdown's
	 * grace); NULL: never. The run returns CAIRN_ECANCELED then.
	 */
	const atomic_int *drain;
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
	/* Volume work's configuration (engine/volumes.h volumes_open()). */
	struct volumes *volumes;
	/*
	 * Restores: how long to wait for a namespace or volume that is
	 * being deleted before creating it again (Velero's
	 * --terminating-resource-timeout); 0: RESTORE_TERMINATING_WAIT_US.
	 */
	int64_t terminating_timeout_us;
};

/* Label of objects created from storage by a sync (engine/sync.h). */
#define ENGINE_LABEL_SYNCED "cairn.io/synced"
/* The Schedule that made a Backup (Velero's velero.io/schedule-name). */
#define ENGINE_LABEL_SCHEDULE	"cairn.io/schedule-name"

/*
 * Was obj created by a sync (label cairn.io/synced=true)? Such objects
 * describe work done elsewhere and are never claimed or run: between the
 * create and the status write they have no phase, and running one would
 * write over what is stored.
 */
int engine_is_synced(const cJSON *obj);

/*
 * The claim write itself, for any cairn.io resource (backups, restores,
 * volume operations): phase=InProgress, claim{holder=env->server_id,
 * worker, attempt, claimedAt}, conditional on obj's resourceVersion.
 * 0: claimed, *out (owned) is the object as written. CAIRN_ECONFLICT:
 * someone else changed it first (leave it alone). Other errors: API.
 */
int engine_claim(const struct engine_env *env, const struct kube_gvr *gvr,
	const cJSON *obj, const char *worker, int64_t attempt, cJSON **out,
	struct cairn_err *err);

#define ENGINE_FENCE_NAME_MAX 253
/* epoch value: take the next write epoch seen as ours without a re-read */
#define ENGINE_FENCE_TRUST (-1)

/* The fence of one claim. Fields may be set directly after init. */
struct engine_fence {
	struct kube *kube;
	const struct kube_gvr *gvr;
	char ns[ENGINE_FENCE_NAME_MAX + 1];	/* "": cluster-scoped */
	char name[ENGINE_FENCE_NAME_MAX + 1];
	char label[2 * ENGINE_FENCE_NAME_MAX + 40]; /* "backup ns/name" */
	/* The claim that must stand on the object. */
	char holder[ENGINE_FENCE_NAME_MAX + 1];	/* "": the Lease only */
	int64_t attempt;
	char uid[ENGINE_FENCE_NAME_MAX + 1];	/* "": not compared */
	/* The Lease hook, as engine_env.may_write; NULL: always allowed. */
	int (*may_write)(void *arg);
	void *may_write_arg;
	const atomic_int *stop;
	/*
	 * may_write() value of the last check; 0: re-read the object at
	 * the next check; ENGINE_FENCE_TRUST: the next value is ours.
	 */
	int epoch;
	int fenced;		/* ownership lost: nothing more is written */
};

/*
 * Clear f and name its object; label (printf format) prefixes the log
 * lines and error messages ("backup ns/name: writes paused").
 */
void engine_fence_init(struct engine_fence *f, struct kube *kube,
	const struct kube_gvr *gvr, const char *ns, const char *name,
	const char *label, ...) CAIRN_PRINTF(6, 7);

/*
 * The fence of a run under env (backups, restores): label "<kind>
 * ns/name", the claim env->server_id/attempt/uid, env's Lease hook and
 * stop flag; the first epoch seen is taken as ours (the run starts from
 * an object just claimed or read).
 */
void engine_fence_env(struct engine_fence *f, const struct engine_env *env,
	const struct kube_gvr *gvr, const char *kind, const char *ns,
	const char *name, int64_t attempt, const char *uid);

/* The claim that must stand: holder, attempt and (uid != NULL) uid. */
void engine_fence_claim(struct engine_fence *f, const char *holder,
	int64_t attempt, const char *uid);

/* Does obj still carry f's claim (holder, attempt, uid when set)? */
int engine_fence_ours(const struct engine_fence *f, const cJSON *obj);

/*
 * May the holder of f write now? Waits while the Lease is not renewed;
 * after such a pause, a new epoch, or when epoch is 0, re-reads the
 * object and stops with CAIRN_EFENCED (f->fenced set) unless the claim
 * is still the same. CAIRN_ECANCELED when stopped meanwhile. API errors
 * while re-reading are retried. err may be NULL.
 */
int engine_fence_check(struct engine_fence *f, struct cairn_err *err);

/*
 * Write status on *obj through the status subresource, conditional on
 * (*obj)'s resourceVersion, after engine_fence_check(). On success *obj
 * is replaced by the object as written. On 409 re-read: another claim ->
 * CAIRN_EFENCED, else retry on the fresh object (a few times); 404 ->
 * CAIRN_EFENCED ("was deleted"). Other errors: as the API returned them.
 */
int engine_status_write(struct engine_fence *f, cJSON **obj,
	const cJSON *status, struct cairn_err *err);

#endif
