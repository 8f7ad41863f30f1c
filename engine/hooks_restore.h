/*
 * hooks_restore.h: a Restore's hooks, as Velero runs them.
 *
 * Init container hooks: a restored pod gets, before its own init
 * containers, the init containers of its init.hook.restore.velero.io/...
 * annotations (container-image, container-name, command) or else of
 * every spec.hooks.resources[] rule that selects it (in the target
 * namespace), in order. hooks_restore_prepare_pod() adds them to the pod
 * before it is created; the kubelet runs them.
 *
 * Exec hooks: post.hook.restore.velero.io/... annotations, or the rules'
 * postHooks[].exec, run in each pod this restore created once the
 * restore's items are all created (hooks_restore_run()): for each hook in
 * order, wait until its container is running (ready, with waitForReady),
 * at most waitTimeout (unset: no limit, as Velero; the stop flag still
 * ends the wait), then run it with execTimeout (default 30s). A failure
 * with onError Fail is an error (the restore ends PartiallyFailed, as in
 * Velero) and stops that pod's remaining hooks; with Continue it is a
 * warning. status.hookStatus counts them.
 *
 * Crash safety: which pods' hooks have run (and how far) is kept in the
 * journal and in status.checkpoint.hooks after each hook, so a restarted
 * or taking-over restore runs each remaining hook once and the ones that
 * ran not again (a crash while one runs runs that one again).
 *
 * Threads: prepare_pod may be called from the restore's workers at once;
 * the rest from the restore's main thread.
 */
#ifndef CAIRN_HOOKS_RESTORE_H
#define CAIRN_HOOKS_RESTORE_H

#include <stdatomic.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "base/err.h"
#include "engine/hooks.h"

struct kube;
struct journal;
struct restore_plan;
struct restore_filter;
struct hooks_restore;

#define HOOKS_RESTORE_INIT_NAME "cairn-restore-init"	/* unnamed annotation init container */
#define HOOKS_RESTORE_POLL_US (500 * 1000)		/* pod readiness polls */

struct hooks_restore_env {
	struct kube *kube;
	struct journal *journal;
	int64_t jid;
	int64_t attempt;
	const atomic_int *stop;
	void *arg;
	/* status.checkpoint.hooks out (hooks_restore_checkpoint()), fenced */
	int (*persist)(void *arg, struct cairn_err *err);
	hook_event_fn event;
	/* a warning (is_error 0) or error, filed under namespace ns */
	void (*record)(void *arg, int is_error, const char *ns,
	    const char *msg);
};

/*
 * Parse the Restore's spec.hooks (problems appended to errs: then *out is
 * NULL) and load the state (journal of this attempt, else
 * status.checkpoint.hooks). Spec warnings are recorded. *out owned.
 */
int hooks_restore_open(const struct hooks_restore_env *env,
	const cJSON *restore, struct hooks_restore **out, cJSON *errs);
void hooks_restore_free(struct hooks_restore *h);

/* Add pod's init container hooks (ns: the namespace it is restored into). */
void hooks_restore_prepare_pod(const struct hooks_restore *h, cJSON *pod,
	const char *ns);

/*
 * After every item: the exec hooks of every pod of the plan this restore
 * created (journal state created). map_ns gives a backed-up namespace's
 * target. 0, CAIRN_ECANCELED (stopped; resumes), CAIRN_EFENCED or a
 * persist error.
 */
int hooks_restore_run(struct hooks_restore *h, struct restore_plan *plan,
	const char *(*map_ns)(void *arg, const char *ns), void *map_arg,
	struct cairn_err *err);

/* status.checkpoint.hooks and status.hookStatus. h NULL: nothing. */
void hooks_restore_checkpoint(const struct hooks_restore *h,
	cJSON *checkpoint, cJSON *status);

#endif
