/*
 * hooks_restore.c: init container hooks and post-restore exec hooks.
 * See hooks_restore.h. The state's JSON form (journal hook_state row and
 * status.checkpoint.hooks):
 *
 *   {"attempt": N, "attempted": A, "failed": F,
 *    "pods": [{"pod": "ns/name", "next": K, "done": true|false}]}
 *
 * next: hooks of the pod that ran (in order); done: none left to run.
 */
#include "config.h"
#include "engine/hooks_restore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"
#include "engine/restore_plan.h"
#include "journal/journal.h"
#include "kube/kube.h"

static const struct kube_gvr pods_gvr = { "", "v1", "pods" };

/* A pod whose exec hooks are being run. */
struct hr_pod {
	char *key;			/* "ns/name" (target namespace) */
	struct hook_list hooks;		/* empty while only loaded from state */
	size_t next;			/* hooks run so far */
	int done;
	int64_t since_us;		/* waiting for hooks[next]'s container since */
};

struct hooks_restore {
	struct hooks_restore_env env;
	struct hook_spec *spec;
	struct hr_pod *pods;
	size_t n, alloc;
	int64_t attempted, failed;
};

static void
hr_log(void *arg, const char *line)
{
	struct hooks_restore *h = arg;

	if (h->env.event != NULL)
		h->env.event(h->env.arg, "info", line);
}

static struct hr_pod *
hr_find(struct hooks_restore *h, const char *key)
{
	for (size_t i = 0; i < h->n; i++)
		if (strcmp(h->pods[i].key, key) == 0)
			return &h->pods[i];
	return NULL;
}

static struct hr_pod *
hr_add(struct hooks_restore *h, const char *key)
{
	struct hr_pod *p = hr_find(h, key);

	if (p != NULL)
		return p;
	if (h->n == h->alloc) {
		h->alloc = h->alloc ? 2 * h->alloc : 8;
		h->pods = xreallocarray(h->pods, h->alloc, sizeof *h->pods);
	}
	p = &h->pods[h->n++];
	memset(p, 0, sizeof *p);
	p->key = xstrdup(key);
	return p;
}

static cJSON *
hr_state(const struct hooks_restore *h)
{
	cJSON *s = cJSON_CreateObject(), *pods;

	cJSON_AddNumberToObject(s, "attempt", (double)h->env.attempt);
	cJSON_AddNumberToObject(s, "attempted", (double)h->attempted);
	cJSON_AddNumberToObject(s, "failed", (double)h->failed);
	pods = cJSON_AddArrayToObject(s, "pods");
	for (size_t i = 0; i < h->n; i++) {
		cJSON *o = cJSON_CreateObject();

		cJSON_AddStringToObject(o, "pod", h->pods[i].key);
		cJSON_AddNumberToObject(o, "next", (double)h->pods[i].next);
		cJSON_AddBoolToObject(o, "done", h->pods[i].done);
		cJSON_AddItemToArray(pods, o);
	}
	return s;
}

static int
hr_persist(struct hooks_restore *h, struct cairn_err *err)
{
	cJSON *s = hr_state(h);
	char *text = cJSON_PrintUnformatted(s);
	int rc;

	cJSON_Delete(s);
	rc = journal_hooks_set(h->env.journal, h->env.jid, text, err);
	free(text);
	if (rc < 0)
		return cairn_err_prefix(err, "journal: hook state");
	return h->env.persist != NULL ? h->env.persist(h->env.arg, err) : 0;
}

int
hooks_restore_open(const struct hooks_restore_env *env, const cJSON *restore,
	struct hooks_restore **out, cJSON *errs)
{
	struct hooks_restore *h;
	struct hook_spec *spec = NULL;
	const cJSON *st, *it;
	cJSON *js = NULL;
	char *text = NULL;

	*out = NULL;
	hook_spec_parse(json_get(restore, "spec.hooks"), 1, &spec, errs);
	if (spec == NULL)
		return 0;
	h = xcalloc(1, sizeof *h);
	h->env = *env;
	h->spec = spec;
	cJSON_ArrayForEach(it, spec->warnings)
		if (env->record != NULL)
			env->record(env->arg, 0, "", it->valuestring);
	if (journal_hooks_get(env->journal, env->jid, &text, NULL) == 0)
		js = cJSON_Parse(text);
	free(text);
	st = js != NULL && json_int(js, "attempt", 0) == env->attempt ? js :
	    json_get(restore, "status.checkpoint.hooks");
	h->attempted = json_int(st, "attempted", 0);
	h->failed = json_int(st, "failed", 0);
	cJSON_ArrayForEach(it, json_get(st, "pods")) {
		const char *key = json_str(it, "pod");
		struct hr_pod *p;

		if (key == NULL)
			continue;
		p = hr_add(h, key);
		p->next = (size_t)json_int(it, "next", 0);
		p->done = json_bool(it, "done", 0);
	}
	cJSON_Delete(js);
	*out = h;
	return 0;
}

void
hooks_restore_free(struct hooks_restore *h)
{
	if (h == NULL)
		return;
	for (size_t i = 0; i < h->n; i++) {
		free(h->pods[i].key);
		hook_list_free(&h->pods[i].hooks);
	}
	free(h->pods);
	hook_spec_free(h->spec);
	free(h);
}

/* ---- init containers ----------------------------------------------------- */

/* Velero's getInitRestoreHookFromAnnotation: image required. */
static cJSON *
init_from_annotations(const cJSON *pod)
{
	const cJSON *anns = json_get(pod, "metadata.annotations");
	const cJSON *img = cJSON_GetObjectItemCaseSensitive(anns,
	    "init.hook.restore.velero.io/container-image");
	const cJSON *nm = cJSON_GetObjectItemCaseSensitive(anns,
	    "init.hook.restore.velero.io/container-name");
	const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(anns,
	    "init.hook.restore.velero.io/command");
	cJSON *c, *a, *parsed;

	if (!cJSON_IsString(img) || img->valuestring[0] == '\0')
		return NULL;
	c = cJSON_CreateObject();
	cJSON_AddStringToObject(c, "name", cJSON_IsString(nm) &&
	    nm->valuestring[0] != '\0' ? nm->valuestring :
	    HOOKS_RESTORE_INIT_NAME);
	cJSON_AddStringToObject(c, "image", img->valuestring);
	if (cJSON_IsString(cmd) && cmd->valuestring[0] != '\0') {
		parsed = cmd->valuestring[0] == '[' ?
		    cJSON_Parse(cmd->valuestring) : NULL;
		if (cJSON_IsArray(parsed)) {
			cJSON_AddItemToObject(c, "command", parsed);
		} else {
			cJSON_Delete(parsed);
			a = cJSON_AddArrayToObject(c, "command");
			cJSON_AddItemToArray(a,
			    cJSON_CreateString(cmd->valuestring));
		}
	}
	return c;
}

void
hooks_restore_prepare_pod(const struct hooks_restore *h, cJSON *pod,
	const char *ns)
{
	cJSON *add = cJSON_CreateArray(), *c, *spec, *old, *all;
	const cJSON *labels = json_get(pod, "metadata.labels");

	if (h == NULL) {
		cJSON_Delete(add);
		return;
	}
	c = init_from_annotations(pod);
	if (c != NULL) {
		cJSON_AddItemToArray(add, c);
	} else {
		for (size_t i = 0; i < h->spec->nrules; i++) {
			const struct hook_rule *r = &h->spec->rules[i];
			const cJSON *it;

			if (r->init == NULL ||
			    !hook_filter_match(&r->f, ns, labels))
				continue;
			cJSON_ArrayForEach(it, r->init)
				cJSON_AddItemToArray(add,
				    cJSON_Duplicate(it, 1));
		}
	}
	if (cJSON_GetArraySize(add) == 0) {
		cJSON_Delete(add);
		return;
	}
	spec = json_ensure(pod, "spec");
	old = cJSON_DetachItemFromObjectCaseSensitive(spec, "initContainers");
	all = add;
	while (cJSON_GetArraySize(old) > 0)
		cJSON_AddItemToArray(all, cJSON_DetachItemFromArray(old, 0));
	cJSON_Delete(old);
	cJSON_AddItemToObject(spec, "initContainers", all);
}

/* ---- exec hooks ---------------------------------------------------------- */

struct collect {
	struct hooks_restore *h;
	const char *(*map_ns)(void *arg, const char *ns);
	void *map_arg;
	cJSON *warns;
};

/* A pod of the plan: its exec hooks when this restore created it. */
static int
collect_row(void *arg, struct restore_row *row)
{
	struct collect *c = arg;
	struct hooks_restore *h = c->h;
	enum journal_rstate st;
	struct hook_list l = { 0 };
	struct hr_pod *p;
	const char *ns = c->map_ns(c->map_arg, row->ns);
	cJSON *pod;
	char key[512];

	if (journal_restore_lookup(h->env.journal, h->env.jid, row->key, &st,
	    NULL) < 0 || st != JOURNAL_R_CREATED)
		goto out;
	pod = json_parse(row->json, strlen(row->json), NULL);
	if (pod != NULL)
		hook_list_for_pod(h->spec, pod, ns, HOOK_RESTORE_EXEC, &l,
		    c->warns);
	cJSON_Delete(pod);
	if (l.n == 0)
		goto out;
	snprintf(key, sizeof key, "%s/%s", ns, row->name);
	p = hr_add(h, key);
	hook_list_free(&p->hooks);
	p->hooks = l;
	memset(&l, 0, sizeof l);
	if (p->next >= p->hooks.n)
		p->done = 1;
out:
	hook_list_free(&l);
	restore_row_free(row);
	return 0;
}

/* Is the container up? 1 yes, 0 not yet, -1 never (the pod ended). */
static int
container_up(const cJSON *pod, const char *container, int want_ready)
{
	const char *phase = json_str_or(pod, "status.phase", "");
	const cJSON *cs = json_get(pod, "status.containerStatuses"), *c;

	if (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0)
		return -1;
	if (cJSON_GetArraySize(cs) > 0) {
		cJSON_ArrayForEach(c, cs) {
			if (strcmp(json_str_or(c, "name", ""), container) != 0)
				continue;
			if (json_get(c, "state.running") == NULL)
				return 0;
			return !want_ready || json_bool(c, "ready", 0);
		}
		return 0;
	}
	/* no container statuses at all: the pod's phase and Ready condition */
	if (strcmp(phase, "Running") != 0)
		return 0;
	if (want_ready) {
		cJSON_ArrayForEach(c, json_get(pod, "status.conditions"))
			if (strcmp(json_str_or(c, "type", ""), "Ready") == 0)
				return strcmp(json_str_or(c, "status", ""),
				    "True") == 0;
		return 0;
	}
	return 1;
}

static void
hr_fail(struct hooks_restore *h, struct hr_pod *p, const char *ns,
	const struct hook_exec *e, const char *what)
{
	char msg[CAIRN_ERR_MSG_MAX + 1100];

	h->failed++;
	snprintf(msg, sizeof msg, "post-restore hook \"%s\" in pod %s "
	    "container %s failed (onError %s): %s", e->name, p->key,
	    e->container ? e->container : "(first)",
	    e->on_error == HOOK_FAIL ? "Fail" : "Continue", what);
	if (h->env.record != NULL)
		h->env.record(h->env.arg, e->on_error == HOOK_FAIL, ns, msg);
	if (e->on_error == HOOK_FAIL)
		p->done = 1;	/* Velero stops the pod's other hooks */
}

/* Advance one pod as far as its containers allow. 1: it moved. */
static int
hr_step(struct hooks_restore *h, struct hr_pod *p, struct cairn_err *err)
{
	char ns[254], name[254];
	const char *slash = strchr(p->key, '/');
	cJSON *pod = NULL;
	int moved = 0, rc;

	snprintf(ns, sizeof ns, "%.*s", (int)(slash - p->key), p->key);
	snprintf(name, sizeof name, "%s", slash + 1);
	rc = kube_get(h->env.kube, &pods_gvr, ns, name, &pod, err);
	if (rc == CAIRN_ENOTFOUND) {
		cairn_err_clear(err);
		for (; p->next < p->hooks.n && !p->done; p->next++) {
			h->attempted++;
			hr_fail(h, p, ns, &p->hooks.v[p->next], "the pod no "
			    "longer exists");
		}
		p->done = 1;
		return 1;
	}
	if (rc < 0)
		return rc;
	while (!p->done && p->next < p->hooks.n) {
		const struct hook_exec *e = &p->hooks.v[p->next];
		const char *c = e->container != NULL ? e->container :
		    json_str_or(cJSON_GetArrayItem(json_get(pod,
		    "spec.containers"), 0), "name", "");
		struct hook_outcome o;
		int up = container_up(pod, c, e->wait_for_ready);
		int64_t now = time_mono_us();

		if (p->since_us == 0)
			p->since_us = now;
		if (up == 0 && (e->wait_timeout_us == 0 ||
		    now - p->since_us < e->wait_timeout_us))
			break;		/* wait on */
		h->attempted++;
		moved = 1;
		if (up <= 0) {
			char d[32], what[128];

			duration_format(e->wait_timeout_us, d);
			if (up < 0)
				snprintf(what, sizeof what, "the pod ended "
				    "(%s) before the hook ran",
				    json_str_or(pod, "status.phase", ""));
			else
				snprintf(what, sizeof what, "container %s was "
				    "not %s within the wait timeout (%s)", c,
				    e->wait_for_ready ? "ready" : "running", d);
			hr_fail(h, p, ns, e, what);
		} else {
			rc = hook_exec_run(h->env.kube, pod, ns, name, e,
			    HOOK_RESTORE_EXEC, h->env.stop, &o, hr_log, h);
			if (rc == CAIRN_ECANCELED) {
				h->attempted--;
				cJSON_Delete(pod);
				return cairn_err_set(err, rc, "stopped");
			}
			if (!o.ok)
				hr_fail(h, p, ns, e, o.summary);
		}
		p->next++;
		p->since_us = 0;
		rc = hr_persist(h, err);
		if (rc < 0) {
			cJSON_Delete(pod);
			return rc;
		}
	}
	if (p->next >= p->hooks.n)
		p->done = 1;
	cJSON_Delete(pod);
	return moved;
}

int
hooks_restore_run(struct hooks_restore *h, struct restore_plan *plan,
	const char *(*map_ns)(void *arg, const char *ns), void *map_arg,
	struct cairn_err *err)
{
	struct collect c = { h, map_ns, map_arg, cJSON_CreateArray() };
	const cJSON *w;
	size_t pending = 0, waiting;
	int rc = 0;

	if (h == NULL) {
		cJSON_Delete(c.warns);
		return 0;
	}
	for (size_t i = 0; i < restore_plan_ntiers(plan) && rc == 0; i++)
		if (strcmp(restore_plan_tier(plan, i), "pods") == 0)
			rc = restore_plan_foreach(plan, i, collect_row, &c, err);
	cJSON_ArrayForEach(w, c.warns)
		if (h->env.record != NULL)
			h->env.record(h->env.arg, 0, "", w->valuestring);
	cJSON_Delete(c.warns);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < h->n; i++)
		pending += !h->pods[i].done && h->pods[i].hooks.n > 0;
	if (pending == 0)
		return 0;
	hook_eventf(h->env.event, h->env.arg, "info", "running the "
	    "post-restore exec hooks of %zu pods", pending);
	for (;;) {
		waiting = 0;
		for (size_t i = 0; i < h->n; i++) {
			struct hr_pod *p = &h->pods[i];

			if (p->done || p->hooks.n == 0)
				continue;
			rc = hr_step(h, p, err);
			if (rc < 0)
				return rc;
			waiting += !p->done;
		}
		if (waiting == 0)
			break;
		if (h->env.stop != NULL && *h->env.stop)
			return cairn_err_set(err, CAIRN_ECANCELED, "stopped "
			    "while waiting for pods to run their hooks");
		time_sleep_us(HOOKS_RESTORE_POLL_US, h->env.stop);
	}
	return hr_persist(h, err);
}

void
hooks_restore_checkpoint(const struct hooks_restore *h, cJSON *checkpoint,
	cJSON *status)
{
	cJSON *hs;

	if (h == NULL || (h->n == 0 && h->attempted == 0))
		return;
	cJSON_AddItemToObject(checkpoint, "hooks", hr_state(h));
	if (h->attempted > 0) {
		hs = cJSON_CreateObject();
		cJSON_AddNumberToObject(hs, "hooksAttempted",
		    (double)h->attempted);
		cJSON_AddNumberToObject(hs, "hooksFailed", (double)h->failed);
		json_set_item(status, "hookStatus", hs);
	}
}
