/*
 * hooks.h: Velero's backup and restore hooks: commands run in pods'
 * containers through the API server (kube_exec), so an application can
 * be quiesced while its objects and volumes are copied, and prepared
 * after a restore.
 *
 * Where hooks come from (as Velero, pkg/backup/item_hook_handlers.go and
 * pkg/restore):
 *
 * - Pod annotations, which win over the spec for that pod and phase:
 *   backup `pre.hook.backup.velero.io/{container,command,on-error,timeout}`
 *   (the legacy unphased `hook.backup.velero.io/...` counts as pre) and
 *   `post.hook.backup.velero.io/...`; restore
 *   `post.hook.restore.velero.io/{container,command,on-error,exec-timeout,
 *   wait-timeout,wait-for-ready}` and `init.hook.restore.velero.io/
 *   {container-image,container-name,command}`. A command is a JSON array
 *   or one word.
 * - spec.hooks.resources[]: name, includedNamespaces, excludedNamespaces,
 *   includedResources, excludedResources, labelSelector; for backups
 *   pre[] and post[] of {exec: {container, command, onError, timeout}};
 *   for restores postHooks[] of {init: {initContainers, timeout}} or
 *   {exec: {container, command, onError, execTimeout, waitTimeout,
 *   waitForReady}}. Hooks apply to pods only.
 *
 * This file: the spec (parsed and validated with the rest of the spec),
 * which hooks a pod gets, and running one exec hook. The backup's state
 * machine (frozen pods, crash safety) is engine/hooks_backup.c; restore
 * hooks are engine/hooks_restore.c. Pure but for hook_exec_run().
 */
#ifndef CAIRN_HOOKS_H
#define CAIRN_HOOKS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "base/err.h"

struct kube;
struct kube_selector;

#define HOOK_DEFAULT_TIMEOUT_US (30LL * 1000000)	/* Velero's exec default */
#define HOOK_NAME_ANNOTATION "<from-annotation>"	/* as Velero names them */

enum hook_on_error { HOOK_FAIL = 0, HOOK_CONTINUE = 1 };

/* One exec hook. */
struct hook_exec {
	char *name;			/* spec.hooks.resources[].name or HOOK_NAME_ANNOTATION */
	char *container;		/* NULL: the pod's first container */
	char **command;			/* argv, NULL-terminated, at least one */
	enum hook_on_error on_error;	/* Fail unless Continue is written */
	int64_t timeout_us;		/* exec timeout; 0: HOOK_DEFAULT_TIMEOUT_US */
	int64_t wait_timeout_us;	/* restore: wait for the container; 0: no limit */
	int wait_for_ready;		/* restore: wait for the pod's Ready too */
};

/* Which pods a spec.hooks.resources[] entry applies to. */
struct hook_filter {
	char **inc_ns, **exc_ns;	/* NULL-terminated, never NULL; globs */
	char **inc_res, **exc_res;	/* resources; hooks only apply to pods */
	struct kube_selector *sel;	/* NULL: any labels */
};

/* One spec.hooks.resources[] entry. */
struct hook_rule {
	char *name;
	struct hook_filter f;
	struct hook_exec *pre, *post;	/* backup */
	size_t npre, npost;
	struct hook_exec *exec;		/* restore: postHooks[].exec, in order */
	size_t nexec;
	cJSON *init;			/* restore: init containers to add (array), or NULL */
};

struct hook_spec {
	struct hook_rule *rules;
	size_t nrules;
	cJSON *warnings;		/* strings: accepted but not enforced */
};

/*
 * Parse spec.hooks of a Backup (restore 0) or a Restore (restore 1):
 * hooks NULL or null is an empty spec. Problems a user must fix are
 * appended to errs (strings naming the field) and *out is NULL; 0 is
 * still returned. Unknown fields are refused there too, so nothing a
 * user wrote is silently ignored; fields accepted but not enforced are
 * in (*out)->warnings. *out owned (hook_spec_free).
 */
int hook_spec_parse(const cJSON *hooks, int restore, struct hook_spec **out,
	cJSON *errs);
void hook_spec_free(struct hook_spec *s);

/* Does rule f apply to a pod in namespace ns with these labels? */
int hook_filter_match(const struct hook_filter *f, const char *ns,
	const cJSON *labels);

/* A list of hooks (copies, owned). */
struct hook_list {
	struct hook_exec *v;
	size_t n;
	size_t alloc;
};
void hook_list_free(struct hook_list *l);
void hook_list_add(struct hook_list *l, const struct hook_exec *h);

enum hook_phase { HOOK_PRE, HOOK_POST, HOOK_RESTORE_EXEC };
const char *hook_phase_name(enum hook_phase p);	/* "pre", "post", "post-restore" */

/*
 * The exec hooks pod gets in phase p: its annotation hook when it has one
 * for that phase (Velero: annotations win), else those of every spec
 * rule that applies, in spec order. ns: the namespace the pod is matched
 * in (a restore's target namespace). Problems with annotations (a bad
 * timeout) are appended to warns (may be NULL) as Velero logs them.
 * out is reset first.
 */
void hook_list_for_pod(const struct hook_spec *s, const cJSON *pod,
	const char *ns, enum hook_phase p, struct hook_list *out, cJSON *warns);

/* JSON form of a hook (status.checkpoint.hooks) and back. */
cJSON *hook_exec_json(const struct hook_exec *h);
int hook_exec_from_json(const cJSON *j, struct hook_exec *h);
void hook_exec_clear(struct hook_exec *h);

/* A line for a Backup's or Restore's log (level "info", "warning"...). */
typedef void (*hook_event_fn)(void *arg, const char *level, const char *line);

/* The line formatted, to fn (NULL: nowhere). */
void hook_eventf(hook_event_fn fn, void *arg, const char *level,
	const char *fmt, ...) CAIRN_PRINTF(4, 5);

/* What running one hook gave. */
struct hook_outcome {
	int ok;				/* ran and exited 0 */
	int rc;				/* kube_exec()'s: CAIRN_ENOTFOUND, the pod is gone */
	int exit_code;			/* -1: did not run to an end */
	int64_t took_us;
	char summary[1024];		/* "exit code 3: <stderr>" / the error */
};

/*
 * Run hook h in pod ns/name (pod: the object as read, or NULL to GET it
 * first). The outcome says how it went; lines for the item's log (the
 * command, its exit code, stdout and stderr, escaped and cut) go to
 * logf. Returns 0 whether or not the command succeeded; CAIRN_ECANCELED
 * when stop was set.
 */
int hook_exec_run(struct kube *k, const cJSON *pod, const char *ns,
	const char *name, const struct hook_exec *h, enum hook_phase p,
	const atomic_int *stop, struct hook_outcome *out,
	void (*logf)(void *arg, const char *line), void *arg);

#endif
