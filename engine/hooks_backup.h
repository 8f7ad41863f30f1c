/*
 * hooks_backup.h: a Backup's pre and post hooks, run around each pod's
 * items as Velero does, and never leaving a pod frozen.
 *
 * Around a pod (engine/backup.c's walk calls these three in a row):
 *   hooks_backup_pre()   record the pod as frozen (journal, then the
 *                        Backup's status.checkpoint.hooks), then run its
 *                        pre hooks;
 *   (the pod's item is written, or fails to be)
 *   hooks_backup_post()  run its post hooks, whatever happened to the
 *                        item or the pre hooks, and record it thawed.
 * A pod that mounts claims, in a backup that copies volumes, stays frozen
 * until its volumes are copied: its post hooks run in
 * hooks_backup_volumes_end() (after volumes_backup()), as Velero runs a
 * pod's post hooks after its volume backups.
 *
 * Crash safety. The state (frozen pods with the post hooks decided when
 * they were frozen, pods waiting for the volume step with their pre
 * hooks, the counters) is written to the journal and then to
 * status.checkpoint.hooks before any pre hook runs and after post hooks
 * ran. hooks_backup_open() takes it from our journal when it was written
 * by this attempt (our own restart), else from status.checkpoint (a
 * takeover); hooks_backup_recover() then runs the pending post hooks of
 * every pod left frozen. A pod whose item is listed again gets its pre
 * hooks again, so a pre hook runs once per attempt that froze the pod,
 * and never twice without its post hook between. A post hook may run
 * twice (a crash after it ran, before it was recorded): post hooks should
 * tolerate an already thawed pod.
 *
 * Failures: a hook with onError Fail that fails (non-zero exit, timeout,
 * no such container, pod gone) makes pre/post/volumes_begin/volumes_end
 * return CAIRN_EFAIL with a message naming the hook, the phase, the pod
 * and the container: the backup fails with it (cairn fails the whole
 * backup where Velero leaves the pod out and ends PartiallyFailed), after
 * the post hooks of every frozen pod ran. onError Continue records a
 * warning. Post hooks run after a restart record warnings whatever their
 * onError (they may be thawing a pod that was thawed already).
 *
 * Threads: one backup's worker thread.
 */
#ifndef CAIRN_HOOKS_BACKUP_H
#define CAIRN_HOOKS_BACKUP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "base/err.h"
#include "engine/hooks.h"

struct kube;
struct journal;
struct hooks_backup;

#define HOOKS_MAX_DEFERRED 128	/* pods kept frozen until the volume step */

/* What the hooks need from the backup run; borrowed for its life. */
struct hooks_backup_env {
	struct kube *kube;
	struct journal *journal;
	int64_t jid;			/* the backup's journal row */
	int64_t attempt;		/* status.claim.attempt */
	const atomic_int *stop;	/* cancels pre hooks (post hooks always run) */
	void *arg;
	/*
	 * Write the state out: status.checkpoint.hooks (hooks_backup_
	 * checkpoint() gives it) with a fenced status write. Called after
	 * the journal has it. CAIRN_EFENCED stops all hooks.
	 */
	int (*persist)(void *arg, struct cairn_err *err);
	/* A line for the backup's log (level "info", "warning", "error"). */
	hook_event_fn event;
	/* A warning (is_error 0) or an error for the results and counters. */
	void (*record)(void *arg, int is_error, const char *msg);
};

/*
 * The hook runner of one backup run: spec is the Backup's parsed
 * spec.hooks (borrowed, may be NULL: annotations only), backup the
 * Backup object as claimed (its spec.snapshotVolumes and
 * status.checkpoint.hooks). The state is loaded as described above; no
 * hook runs yet. *out owned (hooks_backup_free).
 */
int hooks_backup_open(const struct hooks_backup_env *env,
	const struct hook_spec *spec, const cJSON *backup,
	struct hooks_backup **out, struct cairn_err *err);
void hooks_backup_free(struct hooks_backup *h);

/*
 * After a restart or takeover: run the post hooks of every pod the
 * earlier attempt left frozen (warnings on failure), record them thawed.
 * 0, or CAIRN_EFENCED / a persist error.
 */
int hooks_backup_recover(struct hooks_backup *h, struct cairn_err *err);

/*
 * Before pod ns/name's item (text/len: the pod as listed) is written.
 * meta: a tree of the pod holding at least metadata.name, .labels and
 * .annotations (the list's parse), which decide whether hooks apply:
 * only a pod that has some is parsed whole (borrowed for the call).
 * 0: write it. < 0: do not (CAIRN_EFAIL: a Fail hook failed, the
 * message names it; CAIRN_EFENCED; CAIRN_ECANCELED). Either way call
 * hooks_backup_post() next.
 */
int hooks_backup_pre(struct hooks_backup *h, const cJSON *meta,
	const char *ns, const char *name, const char *text, size_t len,
	struct cairn_err *err);
/*
 * After the pod's item (item_ok: it was written). Runs its post hooks
 * now, or leaves it frozen for the volume step. 0 or CAIRN_EFAIL (a Fail
 * post hook failed) / CAIRN_EFENCED.
 */
int hooks_backup_post(struct hooks_backup *h, int item_ok,
	struct cairn_err *err);

/*
 * Around volumes_backup(): begin freezes again the pods a resumed run
 * found waiting for the volume step (their pre hooks, attempt counted);
 * end runs the post hooks of every pod still frozen. Call end whatever
 * begin or the volume step returned.
 */
int hooks_backup_volumes_begin(struct hooks_backup *h, struct cairn_err *err);
int hooks_backup_volumes_end(struct hooks_backup *h, struct cairn_err *err);

/*
 * The backup is failing or stopping: run the post hooks of every frozen
 * pod (warnings on failure) and record them thawed. resumable: the
 * backup stopped and will be resumed: pods waiting for the volume step
 * stay listed, to be frozen again before it. Does nothing once fenced.
 * Safe to call more than once and with h NULL.
 */
void hooks_backup_thaw_all(struct hooks_backup *h, int resumable);

/*
 * Put the state into a status.checkpoint being built (member "hooks",
 * only when some pod has hooks) and the counters into status.hookStatus
 * {hooksAttempted, hooksFailed}. h NULL: nothing.
 */
void hooks_backup_checkpoint(const struct hooks_backup *h, cJSON *checkpoint,
	cJSON *status);

#endif
