/*
 * hooks_backup.c: a Backup's hooks around each pod, crash-safe.
 * See hooks_backup.h for the protocol; the state's JSON form is
 *
 *   {"attempt": N, "attempted": A, "failed": F,
 *    "pods": [{"pod": "ns/name", "frozen": true|false, "attempt": N,
 *              "volumes": true|false, "pre": [hook...], "post": [hook...]}]}
 *
 * where a pod is listed while it is frozen (pre hooks may have run, post
 * hooks not yet) or, with "volumes", while it waits for the volume step;
 * "pre" is kept only for the latter (to freeze it again after a restart).
 * The same text goes to the journal (journal_hooks_set) and, as an
 * object, to status.checkpoint.hooks.
 */
#include "config.h"
#include "engine/hooks_backup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "journal/journal.h"
#include "kube/kube.h"

static const struct kube_gvr pods_gvr = { "", "v1", "pods" };

struct hb_pod {
	char *key;			/* "ns/name" */
	int frozen;			/* pre hooks may have run, post not yet */
	int64_t attempt;		/* attempt that froze it last */
	int volumes;			/* post hooks wait for the volume step */
	struct hook_list pre, post;
};

struct hooks_backup {
	struct hooks_backup_env env;
	const struct hook_spec *spec;
	int copy_volumes;		/* the volume step copies data */
	struct hb_pod *pods;
	size_t n, alloc;
	int64_t attempted, failed;
	int fenced;
	int warned_cap;
	/* the pod between hooks_backup_pre() and hooks_backup_post() */
	struct hb_pod *cur;		/* NULL: the listed pod has no hooks */
	cJSON *cur_pod;			/* the pod as listed */
	char cur_ns[254], cur_name[254];
};

static void
hb_log(void *arg, const char *line)
{
	struct hooks_backup *h = arg;

	if (h->env.event != NULL)
		h->env.event(h->env.arg, "info", line);
}

/* ---- the state --------------------------------------------------------- */

static struct hb_pod *
hb_find(struct hooks_backup *h, const char *key)
{
	for (size_t i = 0; i < h->n; i++)
		if (strcmp(h->pods[i].key, key) == 0)
			return &h->pods[i];
	return NULL;
}

static struct hb_pod *
hb_add(struct hooks_backup *h, const char *key)
{
	struct hb_pod *p = hb_find(h, key);
	size_t cur_i = h->cur != NULL ? (size_t)(h->cur - h->pods) : 0;

	if (p != NULL)
		return p;
	if (h->n == h->alloc) {
		h->alloc = h->alloc ? 2 * h->alloc : 8;
		h->pods = xreallocarray(h->pods, h->alloc, sizeof *h->pods);
		if (h->cur != NULL)
			h->cur = &h->pods[cur_i];
	}
	p = &h->pods[h->n++];
	memset(p, 0, sizeof *p);
	p->key = xstrdup(key);
	return p;
}

static void
hb_pod_clear(struct hb_pod *p)
{
	free(p->key);
	hook_list_free(&p->pre);
	hook_list_free(&p->post);
}

static void
hb_remove(struct hooks_backup *h, struct hb_pod *p)
{
	size_t i = (size_t)(p - h->pods);

	if (h->cur == p)
		h->cur = NULL;
	hb_pod_clear(p);
	memmove(&h->pods[i], &h->pods[i + 1], (h->n - i - 1) * sizeof *p);
	h->n--;
}

static cJSON *
list_json(const struct hook_list *l)
{
	cJSON *a = cJSON_CreateArray();

	for (size_t i = 0; i < l->n; i++)
		cJSON_AddItemToArray(a, hook_exec_json(&l->v[i]));
	return a;
}

static void
list_from_json(const cJSON *a, struct hook_list *l)
{
	const cJSON *it;

	cJSON_ArrayForEach(it, a) {
		struct hook_exec e;

		if (hook_exec_from_json(it, &e) == 0) {
			hook_list_add(l, &e);
			hook_exec_clear(&e);
		}
	}
}

static cJSON *
hb_state(const struct hooks_backup *h)
{
	cJSON *s = cJSON_CreateObject(), *pods;

	cJSON_AddNumberToObject(s, "attempt", (double)h->env.attempt);
	cJSON_AddNumberToObject(s, "attempted", (double)h->attempted);
	cJSON_AddNumberToObject(s, "failed", (double)h->failed);
	pods = cJSON_AddArrayToObject(s, "pods");
	for (size_t i = 0; i < h->n; i++) {
		const struct hb_pod *p = &h->pods[i];
		cJSON *o = cJSON_CreateObject();

		cJSON_AddStringToObject(o, "pod", p->key);
		cJSON_AddBoolToObject(o, "frozen", p->frozen);
		cJSON_AddNumberToObject(o, "attempt", (double)p->attempt);
		cJSON_AddBoolToObject(o, "volumes", p->volumes);
		if (p->volumes)
			cJSON_AddItemToObject(o, "pre", list_json(&p->pre));
		cJSON_AddItemToObject(o, "post", list_json(&p->post));
		cJSON_AddItemToArray(pods, o);
	}
	return s;
}

static void
hb_load(struct hooks_backup *h, const cJSON *s)
{
	const cJSON *it;

	h->attempted = json_int(s, "attempted", 0);
	h->failed = json_int(s, "failed", 0);
	cJSON_ArrayForEach(it, json_get(s, "pods")) {
		const char *key = json_str(it, "pod");
		struct hb_pod *p;

		if (key == NULL || strchr(key, '/') == NULL)
			continue;
		p = hb_add(h, key);
		p->frozen = json_bool(it, "frozen", 0);
		p->attempt = json_int(it, "attempt", 0);
		p->volumes = json_bool(it, "volumes", 0);
		list_from_json(json_get(it, "pre"), &p->pre);
		list_from_json(json_get(it, "post"), &p->post);
	}
}

/* Journal first, then status.checkpoint.hooks. err may be NULL. */
static int
hb_persist(struct hooks_backup *h, struct cairn_err *err)
{
	struct cairn_err e = CAIRN_ERR_INIT;
	cJSON *s;
	char *text;
	int rc;

	if (h->fenced)
		return cairn_err_set(err, CAIRN_EFENCED, "ownership lost");
	s = hb_state(h);
	text = cJSON_PrintUnformatted(s);
	cJSON_Delete(s);
	rc = journal_hooks_set(h->env.journal, h->env.jid, text, &e);
	free(text);
	if (rc < 0) {
		cairn_err_prefix(&e, "journal: hook state");
	} else if (h->env.persist != NULL) {
		rc = h->env.persist(h->env.arg, &e);
		if (rc == CAIRN_EFENCED)
			h->fenced = 1;
	}
	if (rc < 0)
		cairn_err_copy(err, &e);
	return rc;
}

int
hooks_backup_open(const struct hooks_backup_env *env,
	const struct hook_spec *spec, const cJSON *backup,
	struct hooks_backup **out, struct cairn_err *err)
{
	struct hooks_backup *h = xcalloc(1, sizeof *h);
	const cJSON *sv = json_get(backup, "spec.snapshotVolumes");
	char *text = NULL;
	cJSON *js = NULL;

	(void)err;
	h->env = *env;
	h->spec = spec;
	h->copy_volumes = !cJSON_IsFalse(sv);
	/* Ours when this attempt wrote it (a restart); else the status's. */
	if (journal_hooks_get(env->journal, env->jid, &text, NULL) == 0)
		js = cJSON_Parse(text);
	free(text);
	if (js != NULL && json_int(js, "attempt", 0) == env->attempt)
		hb_load(h, js);
	else
		hb_load(h, json_get(backup, "status.checkpoint.hooks"));
	cJSON_Delete(js);
	*out = h;
	return 0;
}

void
hooks_backup_free(struct hooks_backup *h)
{
	if (h == NULL)
		return;
	for (size_t i = 0; i < h->n; i++)
		hb_pod_clear(&h->pods[i]);
	free(h->pods);
	cJSON_Delete(h->cur_pod);
	free(h);
}

/* ---- running ----------------------------------------------------------- */

static void
split_key(const char *key, char *ns, size_t nl, char *name, size_t ml)
{
	const char *slash = strchr(key, '/');
	size_t n = slash != NULL ? (size_t)(slash - key) : 0;

	snprintf(ns, nl, "%.*s", (int)n, key);
	snprintf(name, ml, "%s", slash != NULL ? slash + 1 : key);
}

/*
 * Run list l in phase p for pod ns/name. strict: a Fail hook that fails
 * stops the list and returns CAIRN_EFAIL (else every failure is a
 * warning). The message names the hook. stop: cancels (pre only).
 * counted: the hooks were counted as attempted already (pre hooks are,
 * in the state recorded before they run, so a crash during one still
 * counts it).
 */
static int
hb_run_list(struct hooks_backup *h, const cJSON *pod, const char *ns,
	const char *name, const struct hook_list *l, enum hook_phase p,
	int strict, int counted, const char *why, struct cairn_err *err)
{
	int rc = 0;

	if (!counted)
		h->attempted += (int64_t)l->n;
	for (size_t i = 0; i < l->n; i++) {
		const struct hook_exec *e = &l->v[i];
		struct hook_outcome o;
		char msg[CAIRN_ERR_MSG_MAX + sizeof o.summary];
		int crc;

		crc = hook_exec_run(h->env.kube, pod, ns, name, e, p,
		    p == HOOK_PRE ? h->env.stop : NULL, &o, hb_log, h);
		if (crc == CAIRN_ECANCELED) {
			h->failed++;
			return cairn_err_set(err, crc, "stopped during the %s "
			    "hook \"%s\" of pod %s/%s", hook_phase_name(p),
			    e->name, ns, name);
		}
		if (o.ok)
			continue;
		h->failed++;
		if (o.rc == CAIRN_ENOTFOUND && pod == NULL) {
			/* gone since it was listed: nothing left to run in */
			if (h->env.record != NULL) {
				snprintf(msg, sizeof msg, "%s hooks of pod %s/%s "
				    "not run: %s", hook_phase_name(p), ns, name,
				    o.summary);
				h->env.record(h->env.arg, 0, msg);
			}
			break;
		}
		snprintf(msg, sizeof msg, "%s hook \"%s\" in pod %s/%s "
		    "container %s failed%s (onError %s): %s", hook_phase_name(p),
		    e->name, ns, name, e->container ? e->container : "(first)",
		    why, e->on_error == HOOK_FAIL ? "Fail" : "Continue",
		    o.summary);
		if (strict && e->on_error == HOOK_FAIL) {
			rc = cairn_err_set(err, CAIRN_EFAIL, "%s", msg);
			break;
		}
		if (h->env.record != NULL)
			h->env.record(h->env.arg, 0, msg);
	}
	return rc;
}

/*
 * Post hooks of p (pod: its JSON, or NULL to GET it), then forget it; or,
 * with keep_waiting, keep a pod that waits for the volume step, thawed,
 * to be frozen again before its volumes are copied (a resumed run).
 */
static int
hb_thaw(struct hooks_backup *h, struct hb_pod *p, const cJSON *pod,
	int strict, int keep_waiting, const char *why, struct cairn_err *err)
{
	char ns[254], name[254];
	int rc, prc;

	split_key(p->key, ns, sizeof ns, name, sizeof name);
	rc = hb_run_list(h, pod, ns, name, &p->post, HOOK_POST, strict, 0, why,
	    err);
	if (keep_waiting && p->volumes)
		p->frozen = 0;
	else
		hb_remove(h, p);
	prc = hb_persist(h, rc < 0 ? NULL : err);
	return rc < 0 ? rc : prc;
}

int
hooks_backup_recover(struct hooks_backup *h, struct cairn_err *err)
{
	size_t i = 0;
	int rc;

	while (i < h->n) {
		struct hb_pod *p = &h->pods[i];

		if (!p->frozen) {
			i++;
			continue;
		}
		hook_eventf(h->env.event, h->env.arg, "info", "pod %s was left "
		    "frozen by attempt %lld: running its post hooks", p->key,
		    (long long)p->attempt);
		rc = hb_thaw(h, p, NULL, 0, 1, " after a restart", err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Does the pod mount a claim (whose volume the volume step may copy)? */
static int
mounts_claims(const cJSON *pod)
{
	const cJSON *v;

	cJSON_ArrayForEach(v, json_get(pod, "spec.volumes"))
		if (cJSON_GetObjectItemCaseSensitive(v, "persistentVolumeClaim"))
			return 1;
	return 0;
}

int
hooks_backup_pre(struct hooks_backup *h, const cJSON *meta, const char *ns,
	const char *name, const char *text, size_t len, struct cairn_err *err)
{
	struct hook_list pre = { 0 }, post = { 0 };
	cJSON *warns = cJSON_CreateArray(), *w;
	const char *phase;
	struct hb_pod *p;
	char key[512];
	int rc;

	h->cur = NULL;
	cJSON_Delete(h->cur_pod);
	h->cur_pod = NULL;
	if (h->fenced)
		return cairn_err_set(err, CAIRN_EFENCED, "ownership lost");
	/* annotations and labels decide: most pods have no hooks */
	hook_list_for_pod(h->spec, meta, ns, HOOK_PRE, &pre, warns);
	hook_list_for_pod(h->spec, meta, ns, HOOK_POST, &post, warns);
	cJSON_ArrayForEach(w, warns)
		if (h->env.record != NULL)
			h->env.record(h->env.arg, 0, w->valuestring);
	cJSON_Delete(warns);
	if (pre.n == 0 && post.n == 0)
		goto none;
	h->cur_pod = json_parse(text, len, NULL);	/* phase, containers */
	if (h->cur_pod == NULL)
		goto none;
	phase = json_str_or(h->cur_pod, "status.phase", "");
	if (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0) {
		hook_eventf(h->env.event, h->env.arg, "info", "pod %s/%s has "
		    "ended (%s): its hooks are not run", ns, name, phase);
		goto none;
	}
	snprintf(key, sizeof key, "%s/%s", ns, name);
	snprintf(h->cur_ns, sizeof h->cur_ns, "%s", ns);
	snprintf(h->cur_name, sizeof h->cur_name, "%s", name);
	p = hb_add(h, key);
	hook_list_free(&p->pre);
	hook_list_free(&p->post);
	p->frozen = 1;
	p->attempt = h->env.attempt;
	p->pre = pre;
	p->post = post;
	p->volumes = 0;
	if (h->copy_volumes && mounts_claims(h->cur_pod)) {
		size_t waiting = 0;

		for (size_t i = 0; i < h->n; i++)
			waiting += h->pods[i].volumes;
		if (waiting < HOOKS_MAX_DEFERRED) {
			p->volumes = 1;
		} else if (!h->warned_cap) {
			h->warned_cap = 1;
			if (h->env.record != NULL)
				h->env.record(h->env.arg, 0, "more than "
				    "128 pods with hooks mount claims: the post "
				    "hooks of the others run right after their "
				    "items, before their volumes are copied");
		}
	}
	h->cur = p;
	/* Recorded frozen (and its pre hooks counted) before any runs. */
	h->attempted += (int64_t)p->pre.n;
	rc = hb_persist(h, err);
	if (rc < 0)
		return rc;
	return hb_run_list(h, h->cur_pod, ns, name, &p->pre, HOOK_PRE, 1, 1,
	    "", err);
none:
	hook_list_free(&pre);
	hook_list_free(&post);
	return 0;
}

int
hooks_backup_post(struct hooks_backup *h, int item_ok, struct cairn_err *err)
{
	struct hb_pod *p = h->cur;

	h->cur = NULL;
	if (p == NULL || h->fenced)
		return 0;
	if (item_ok)
		hook_eventf(h->env.event, h->env.arg, "info", "pod %s/%s: item "
		    "written between its pre and post hooks", h->cur_ns,
		    h->cur_name);
	if (item_ok && p->volumes) {
		hook_eventf(h->env.event, h->env.arg, "info", "pod %s/%s mounts "
		    "claims: its post hooks run once its volumes are copied",
		    h->cur_ns, h->cur_name);
		return 0;
	}
	return hb_thaw(h, p, h->cur_pod, 1, 0, "", err);
}

int
hooks_backup_volumes_begin(struct hooks_backup *h, struct cairn_err *err)
{
	int rc = 0;

	if (h == NULL || h->fenced)
		return 0;
	for (size_t i = 0; i < h->n && rc == 0; i++) {
		struct hb_pod *p = &h->pods[i];
		char ns[254], name[254];

		cJSON *pod = NULL;

		if (p->frozen || !p->volumes)
			continue;
		split_key(p->key, ns, sizeof ns, name, sizeof name);
		if (kube_get(h->env.kube, &pods_gvr, ns, name, &pod, NULL) ==
		    CAIRN_ENOTFOUND) {
			hook_eventf(h->env.event, h->env.arg, "info", "pod %s is "
			    "gone: not frozen again for the volume step",
			    p->key);
			hb_remove(h, p);
			i--;
			continue;
		}
		hook_eventf(h->env.event, h->env.arg, "info", "pod %s: "
		    "freezing it again before its volumes are copied",
		    p->key);
		p->frozen = 1;
		p->attempt = h->env.attempt;
		h->attempted += (int64_t)p->pre.n;
		rc = hb_persist(h, err);
		if (rc == 0)
			rc = hb_run_list(h, pod, ns, name, &p->pre, HOOK_PRE,
			    1, 1, "", err);
		cJSON_Delete(pod);
	}
	return rc;
}

int
hooks_backup_volumes_end(struct hooks_backup *h, struct cairn_err *err)
{
	struct cairn_err e = CAIRN_ERR_INIT;
	int rc = 0, r;

	if (h == NULL)
		return 0;
	while (h->n > 0 && !h->fenced) {
		struct hb_pod *p = &h->pods[0];

		if (!p->frozen) {	/* never frozen again: nothing to run */
			hb_remove(h, p);
			continue;
		}
		r = hb_thaw(h, p, NULL, 1, 0, "", &e);
		if (r < 0 && rc == 0) {
			rc = r;
			cairn_err_copy(err, &e);
		}
		cairn_err_clear(&e);
	}
	return rc;
}

void
hooks_backup_thaw_all(struct hooks_backup *h, int resumable)
{
	struct cairn_err e = CAIRN_ERR_INIT;
	size_t i = 0;

	if (h == NULL)
		return;
	h->cur = NULL;
	while (i < h->n && !h->fenced) {
		struct hb_pod *p = &h->pods[i];

		if (!p->frozen) {
			i++;
			continue;
		}
		(void)hb_thaw(h, p, NULL, 0, resumable, resumable ? " while the "
		    "backup stopped" : " while the backup failed", &e);
		cairn_err_clear(&e);
	}
}

void
hooks_backup_checkpoint(const struct hooks_backup *h, cJSON *checkpoint,
	cJSON *status)
{
	cJSON *hs;

	if (h == NULL)
		return;
	if (h->n > 0 || h->attempted > 0)
		cJSON_AddItemToObject(checkpoint, "hooks", hb_state(h));
	if (h->attempted > 0) {
		hs = cJSON_CreateObject();
		cJSON_AddNumberToObject(hs, "hooksAttempted",
		    (double)h->attempted);
		cJSON_AddNumberToObject(hs, "hooksFailed", (double)h->failed);
		json_set_item(status, "hookStatus", hs);
	}
}
