/*
 * hooks.c: the hook spec, which hooks a pod gets, and running one.
 * See hooks.h; Velero's internal/hook/item_hook_handler.go and
 * pkg/podexec are the reference for names, defaults and precedence.
 */
#include "config.h"
#include "engine/hooks.h"

#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/buf.h"
#include "base/jsonutil.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"
#include "kube/kube.h"

#define HOOK_MAX_ERRS 32
#define HOOK_OUT_LOG 1024		/* bytes of stdout/stderr logged */

/* Append a formatted message to the array a (at most HOOK_MAX_ERRS). */
#define add_msg(a, ...) json_add_msgf((a), HOOK_MAX_ERRS, __VA_ARGS__)

const char *
hook_phase_name(enum hook_phase p)
{
	return p == HOOK_PRE ? "pre" : p == HOOK_POST ? "post" : "post-restore";
}

/* ---- the spec ---------------------------------------------------------- */

/* Refuse members of obj not in the NULL-terminated list known. */
static void
check_known(const cJSON *obj, const char *const *known, const char *where,
	cJSON *errs)
{
	const cJSON *it;

	cJSON_ArrayForEach(it, obj) {
		size_t i;

		for (i = 0; known[i] != NULL; i++)
			if (strcmp(it->string, known[i]) == 0)
				break;
		if (known[i] == NULL)
			add_msg(errs, "%s.%s: unknown field (cairn implements "
			    "every hook field Velero defines; this is not one)",
			    where, it->string);
	}
}

static char **
strs(const cJSON *obj, const char *field, const char *where, cJSON *errs)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(obj, field), *it;
	char **v;
	size_t n = 0;

	if (a == NULL || cJSON_IsNull(a))
		return xcalloc(1, sizeof *v);
	if (!cJSON_IsArray(a)) {
		add_msg(errs, "%s.%s must be a list of strings", where, field);
		return xcalloc(1, sizeof *v);
	}
	v = xcalloc((size_t)cJSON_GetArraySize(a) + 1, sizeof *v);
	cJSON_ArrayForEach(it, a) {
		if (!cJSON_IsString(it)) {
			add_msg(errs, "%s.%s must be a list of strings", where,
			    field);
			continue;
		}
		v[n++] = xstrdup(it->valuestring);
	}
	return v;
}

static int
parse_duration(const cJSON *obj, const char *field, const char *where,
	int64_t *out, cJSON *errs)
{
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(obj, field);

	*out = 0;
	if (d == NULL || cJSON_IsNull(d))
		return 0;
	if (!cJSON_IsString(d) || (d->valuestring[0] != '\0' &&
	    duration_parse(d->valuestring, out) < 0) || *out < 0) {
		add_msg(errs, "%s.%s: invalid duration %s%s%s: want a duration "
		    "such as 30s or 2m", where, field, cJSON_IsString(d) ? "\"" :
		    "", cJSON_IsString(d) ? d->valuestring : "(not a string)",
		    cJSON_IsString(d) ? "\"" : "");
		return -1;
	}
	return 0;
}

/* spec.hooks.resources[i].pre[j].exec (or postHooks[j].exec). */
static int
parse_exec(const cJSON *e, const char *rule, int restore, const char *where,
	struct hook_exec *h, cJSON *errs)
{
	static const char *const known_b[] = { "container", "command",
	    "onError", "timeout", NULL };
	static const char *const known_r[] = { "container", "command",
	    "onError", "execTimeout", "waitTimeout", "waitForReady", NULL };
	const cJSON *cont = cJSON_GetObjectItemCaseSensitive(e, "container");
	const cJSON *oe = cJSON_GetObjectItemCaseSensitive(e, "onError");
	const cJSON *wfr = cJSON_GetObjectItemCaseSensitive(e, "waitForReady");
	int nerr = cJSON_GetArraySize(errs);

	memset(h, 0, sizeof *h);
	h->name = xstrdup(rule);
	if (!cJSON_IsObject(e)) {
		add_msg(errs, "%s must be an object", where);
		return -1;
	}
	check_known(e, restore ? known_r : known_b, where, errs);
	if (cont != NULL && !cJSON_IsNull(cont)) {
		if (!cJSON_IsString(cont))
			add_msg(errs, "%s.container must be a string", where);
		else if (cont->valuestring[0] != '\0')
			h->container = xstrdup(cont->valuestring);
	}
	h->command = strs(e, "command", where, errs);
	if (h->command[0] == NULL)
		add_msg(errs, "%s.command: Required value: at least one "
		    "element", where);
	h->on_error = HOOK_FAIL;
	if (oe != NULL && !cJSON_IsNull(oe)) {
		if (cJSON_IsString(oe) && strcmp(oe->valuestring, "Continue") == 0)
			h->on_error = HOOK_CONTINUE;
		else if (!cJSON_IsString(oe) || (strcmp(oe->valuestring,
		    "Fail") != 0 && oe->valuestring[0] != '\0'))
			add_msg(errs, "%s.onError: Unsupported value: want "
			    "\"Continue\" or \"Fail\"", where);
	}
	if (restore) {
		parse_duration(e, "execTimeout", where, &h->timeout_us, errs);
		parse_duration(e, "waitTimeout", where, &h->wait_timeout_us,
		    errs);
		if (wfr != NULL && !cJSON_IsNull(wfr) && !cJSON_IsBool(wfr))
			add_msg(errs, "%s.waitForReady must be true or false",
			    where);
		h->wait_for_ready = cJSON_IsTrue(wfr);
	} else {
		parse_duration(e, "timeout", where, &h->timeout_us, errs);
	}
	return cJSON_GetArraySize(errs) > nerr ? -1 : 0;
}

/* pre[] / post[] of a backup rule: [{exec: {...}}]. */
static void
parse_backup_hooks(const cJSON *rule, const char *field, const char *name,
	const char *where, struct hook_exec **out, size_t *n, cJSON *errs)
{
	static const char *const known[] = { "exec", NULL };
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(rule, field), *it;
	char w[256];
	int i = 0;

	*out = NULL;
	*n = 0;
	if (a == NULL || cJSON_IsNull(a))
		return;
	if (!cJSON_IsArray(a)) {
		add_msg(errs, "%s.%s must be a list", where, field);
		return;
	}
	*out = xcalloc((size_t)cJSON_GetArraySize(a) + 1, sizeof **out);
	cJSON_ArrayForEach(it, a) {
		snprintf(w, sizeof w, "%s.%s[%d]", where, field, i++);
		if (!cJSON_IsObject(it)) {
			add_msg(errs, "%s must be an object", w);
			continue;
		}
		check_known(it, known, w, errs);
		if (cJSON_GetObjectItemCaseSensitive(it, "exec") == NULL) {
			add_msg(errs, "%s.exec: Required value", w);
			continue;
		}
		strncat(w, ".exec", sizeof w - strlen(w) - 1);
		if (parse_exec(cJSON_GetObjectItemCaseSensitive(it, "exec"),
		    name, 0, w, &(*out)[*n], errs) == 0)
			(*n)++;
		else
			hook_exec_clear(&(*out)[*n]);
	}
}

/* postHooks[] of a restore rule: [{init: {...}} | {exec: {...}}]. */
static void
parse_restore_hooks(const cJSON *rule, const char *name, const char *where,
	struct hook_rule *r, cJSON *errs, cJSON *warns)
{
	static const char *const known[] = { "init", "exec", NULL };
	static const char *const known_init[] = { "initContainers", "timeout",
	    NULL };
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(rule, "postHooks");
	const cJSON *it, *init, *c;
	char w[256];
	int i = 0;

	if (a == NULL || cJSON_IsNull(a))
		return;
	if (!cJSON_IsArray(a)) {
		add_msg(errs, "%s.postHooks must be a list", where);
		return;
	}
	r->exec = xcalloc((size_t)cJSON_GetArraySize(a) + 1, sizeof *r->exec);
	cJSON_ArrayForEach(it, a) {
		snprintf(w, sizeof w, "%s.postHooks[%d]", where, i++);
		if (!cJSON_IsObject(it)) {
			add_msg(errs, "%s must be an object", w);
			continue;
		}
		check_known(it, known, w, errs);
		init = cJSON_GetObjectItemCaseSensitive(it, "init");
		if (init != NULL && !cJSON_IsNull(init)) {
			const cJSON *ic = cJSON_GetObjectItemCaseSensitive(init,
			    "initContainers");
			int64_t t;

			check_known(init, known_init, w, errs);
			if (!cJSON_IsArray(ic) || cJSON_GetArraySize(ic) == 0) {
				add_msg(errs, "%s.init.initContainers: Required "
				    "value: a list of containers", w);
				continue;
			}
			cJSON_ArrayForEach(c, ic)
				if (!cJSON_IsObject(c) || json_str(c, "name") ==
				    NULL || json_str(c, "image") == NULL)
					add_msg(errs, "%s.init.initContainers: "
					    "each container needs a name and an "
					    "image", w);
			if (parse_duration(init, "timeout", w, &t, errs) == 0 &&
			    t > 0)
				add_msg(warns, "%s.init.timeout is not enforced: "
				    "init containers run under the kubelet, and "
				    "the restore does not wait for them (Velero "
				    "does not either)", w);
			if (r->init == NULL)
				r->init = cJSON_CreateArray();
			cJSON_ArrayForEach(c, ic)
				cJSON_AddItemToArray(r->init,
				    cJSON_Duplicate(c, 1));
		}
		if (cJSON_GetObjectItemCaseSensitive(it, "exec") != NULL) {
			strncat(w, ".exec", sizeof w - strlen(w) - 1);
			if (parse_exec(cJSON_GetObjectItemCaseSensitive(it,
			    "exec"), name, 1, w, &r->exec[r->nexec], errs) == 0)
				r->nexec++;
			else
				hook_exec_clear(&r->exec[r->nexec]);
		}
	}
}

int
hook_spec_parse(const cJSON *hooks, int restore, struct hook_spec **out,
	cJSON *errs)
{
	static const char *const known_top[] = { "resources", NULL };
	static const char *const known_b[] = { "name", "includedNamespaces",
	    "excludedNamespaces", "includedResources", "excludedResources",
	    "labelSelector", "pre", "post", NULL };
	static const char *const known_r[] = { "name", "includedNamespaces",
	    "excludedNamespaces", "includedResources", "excludedResources",
	    "labelSelector", "postHooks", NULL };
	const cJSON *res, *it, *ls;
	struct hook_spec *s;
	cJSON *warns = cJSON_CreateArray();
	int nerr = cJSON_GetArraySize(errs), i = 0;
	char w[128];

	*out = NULL;
	s = xcalloc(1, sizeof *s);
	if (hooks == NULL || cJSON_IsNull(hooks)) {
		cJSON_Delete(warns);
		*out = s;
		return 0;
	}
	if (!cJSON_IsObject(hooks)) {
		add_msg(errs, "spec.hooks must be an object");
		goto done;
	}
	check_known(hooks, known_top, "spec.hooks", errs);
	res = cJSON_GetObjectItemCaseSensitive(hooks, "resources");
	if (res != NULL && !cJSON_IsNull(res) && !cJSON_IsArray(res)) {
		add_msg(errs, "spec.hooks.resources must be a list");
		goto done;
	}
	s->rules = xcalloc((size_t)cJSON_GetArraySize(res) + 1,
	    sizeof *s->rules);
	cJSON_ArrayForEach(it, res) {
		struct hook_rule *r = &s->rules[s->nrules++];
		const char *name = json_str(it, "name");

		snprintf(w, sizeof w, "spec.hooks.resources[%d]", i++);
		if (!cJSON_IsObject(it)) {
			add_msg(errs, "%s must be an object", w);
			continue;
		}
		check_known(it, restore ? known_r : known_b, w, errs);
		if (name == NULL || name[0] == '\0')
			add_msg(errs, "%s.name: Required value", w);
		r->name = xstrdup(name != NULL ? name : "");
		r->f.inc_ns = strs(it, "includedNamespaces", w, errs);
		r->f.exc_ns = strs(it, "excludedNamespaces", w, errs);
		r->f.inc_res = strs(it, "includedResources", w, errs);
		r->f.exc_res = strs(it, "excludedResources", w, errs);
		ls = cJSON_GetObjectItemCaseSensitive(it, "labelSelector");
		if (ls != NULL && !cJSON_IsNull(ls)) {
			struct cairn_err e = CAIRN_ERR_INIT;
			char *text = NULL;

			if (kube_selector_text(ls, &text, &e) < 0 ||
			    kube_selector_parse(text, &r->f.sel, &e) < 0)
				add_msg(errs, "%s.labelSelector: %s", w, e.msg);
			free(text);
		}
		if (restore) {
			parse_restore_hooks(it, r->name, w, r, errs, warns);
		} else {
			parse_backup_hooks(it, "pre", r->name, w, &r->pre,
			    &r->npre, errs);
			parse_backup_hooks(it, "post", r->name, w, &r->post,
			    &r->npost, errs);
		}
	}
done:
	if (cJSON_GetArraySize(errs) > nerr) {
		cJSON_Delete(warns);
		hook_spec_free(s);
		return 0;
	}
	s->warnings = warns;
	*out = s;
	return 0;
}

void
hook_exec_clear(struct hook_exec *h)
{
	if (h == NULL)
		return;
	free(h->name);
	free(h->container);
	strv_free(h->command);
	memset(h, 0, sizeof *h);
}

void
hook_spec_free(struct hook_spec *s)
{
	if (s == NULL)
		return;
	for (size_t i = 0; i < s->nrules; i++) {
		struct hook_rule *r = &s->rules[i];

		free(r->name);
		strv_free(r->f.inc_ns);
		strv_free(r->f.exc_ns);
		strv_free(r->f.inc_res);
		strv_free(r->f.exc_res);
		kube_selector_free(r->f.sel);
		for (size_t j = 0; j < r->npre; j++)
			hook_exec_clear(&r->pre[j]);
		for (size_t j = 0; j < r->npost; j++)
			hook_exec_clear(&r->post[j]);
		for (size_t j = 0; j < r->nexec; j++)
			hook_exec_clear(&r->exec[j]);
		free(r->pre);
		free(r->post);
		free(r->exec);
		cJSON_Delete(r->init);
	}
	free(s->rules);
	cJSON_Delete(s->warnings);
	free(s);
}

/* ---- matching ---------------------------------------------------------- */

/* Is this resource name one of the spellings of pods? */
static int
names_pods(const char *r)
{
	return strcmp(r, "*") == 0 || strcasecmp(r, "pods") == 0 ||
	    strcasecmp(r, "pod") == 0 || strcasecmp(r, "po") == 0 ||
	    strcasecmp(r, "pods.") == 0;
}

int
hook_filter_match(const struct hook_filter *f, const char *ns,
	const cJSON *labels)
{
	size_t i;
	int inc = f->inc_res[0] == NULL;

	if (strv_glob_any(f->exc_ns, ns))
		return 0;
	if (f->inc_ns[0] != NULL && !strv_glob_any(f->inc_ns, ns))
		return 0;
	for (i = 0; f->exc_res[i] != NULL; i++)
		if (strcmp(f->exc_res[i], "*") != 0 && names_pods(f->exc_res[i]))
			return 0;
	for (i = 0; !inc && f->inc_res[i] != NULL; i++)
		if (names_pods(f->inc_res[i]))
			inc = 1;
	if (!inc)
		return 0;
	return f->sel == NULL || kube_selector_match(f->sel, labels);
}

/* ---- lists ------------------------------------------------------------- */

static void
hook_exec_copy(struct hook_exec *dst, const struct hook_exec *src)
{
	size_t n = strv_len(src->command);

	*dst = *src;
	dst->name = xstrdup(src->name ? src->name : "");
	dst->container = src->container ? xstrdup(src->container) : NULL;
	dst->command = xcalloc(n + 1, sizeof *dst->command);
	for (size_t i = 0; i < n; i++)
		dst->command[i] = xstrdup(src->command[i]);
}

void
hook_list_add(struct hook_list *l, const struct hook_exec *h)
{
	if (l->n == l->alloc) {
		l->alloc = l->alloc ? 2 * l->alloc : 4;
		l->v = xreallocarray(l->v, l->alloc, sizeof *l->v);
	}
	hook_exec_copy(&l->v[l->n++], h);
}

void
hook_list_free(struct hook_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		hook_exec_clear(&l->v[i]);
	free(l->v);
	memset(l, 0, sizeof *l);
}

/* Velero's parseStringToCommand: a JSON array, or the one word. */
static char **
parse_command(const char *v)
{
	char **out;
	cJSON *a, *it;
	size_t n = 0;

	if (v[0] == '[') {
		a = cJSON_Parse(v);
		if (cJSON_IsArray(a)) {
			out = xcalloc((size_t)cJSON_GetArraySize(a) + 1,
			    sizeof *out);
			cJSON_ArrayForEach(it, a) {
				if (!cJSON_IsString(it))
					break;
				out[n++] = xstrdup(it->valuestring);
			}
			if (it == NULL && n > 0) {
				cJSON_Delete(a);
				return out;
			}
			strv_free(out);
		}
		cJSON_Delete(a);
	}
	out = xcalloc(2, sizeof *out);
	out[0] = xstrdup(v);
	return out;
}

static const char *
ann(const cJSON *anns, const char *prefix, const char *key)
{
	char k[128];
	const cJSON *v;

	snprintf(k, sizeof k, "%s%s", prefix, key);
	v = cJSON_GetObjectItemCaseSensitive(anns, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void
ann_duration(const cJSON *anns, const char *prefix, const char *key,
	const char *pod, int64_t *out, cJSON *warns)
{
	const char *v = ann(anns, prefix, key);

	*out = 0;
	if (v != NULL && v[0] != '\0' && (duration_parse(v, out) < 0 ||
	    *out < 0)) {
		*out = 0;
		add_msg(warns, "pod %s: annotation %s%s: unable to parse "
		    "\"%s\" as a duration, using the default", pod, prefix,
		    key, v);
	}
}

/* An exec hook from annotations with this prefix, or 0 when none. */
static int
hook_from_annotations(const cJSON *anns, const char *prefix, int restore,
	const char *pod, struct hook_exec *h, cJSON *warns)
{
	const char *cmd = ann(anns, prefix, "command");
	const char *c, *oe, *wfr;

	if (cmd == NULL || cmd[0] == '\0')
		return 0;
	memset(h, 0, sizeof *h);
	h->name = xstrdup(HOOK_NAME_ANNOTATION);
	c = ann(anns, prefix, "container");
	if (c != NULL && c[0] != '\0')
		h->container = xstrdup(c);
	h->command = parse_command(cmd);
	oe = ann(anns, prefix, "on-error");
	h->on_error = oe != NULL && strcmp(oe, "Continue") == 0 ?
	    HOOK_CONTINUE : HOOK_FAIL;
	if (restore) {
		ann_duration(anns, prefix, "exec-timeout", pod, &h->timeout_us,
		    warns);
		ann_duration(anns, prefix, "wait-timeout", pod,
		    &h->wait_timeout_us, warns);
		wfr = ann(anns, prefix, "wait-for-ready");
		h->wait_for_ready = wfr != NULL && strcasecmp(wfr, "true") == 0;
	} else {
		ann_duration(anns, prefix, "timeout", pod, &h->timeout_us,
		    warns);
	}
	return 1;
}

void
hook_list_for_pod(const struct hook_spec *s, const cJSON *pod,
	const char *ns, enum hook_phase p, struct hook_list *out, cJSON *warns)
{
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	const cJSON *anns = cJSON_GetObjectItemCaseSensitive(md, "annotations");
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(md, "labels");
	char who[600];
	struct hook_exec h;
	int got;

	hook_list_free(out);
	snprintf(who, sizeof who, "%s/%s", ns, json_str_or(md, "name", ""));
	if (p == HOOK_PRE) {
		got = hook_from_annotations(anns, "pre.hook.backup.velero.io/",
		    0, who, &h, warns);
		if (!got)	/* the legacy keys without a phase */
			got = hook_from_annotations(anns,
			    "hook.backup.velero.io/", 0, who, &h, warns);
	} else if (p == HOOK_POST) {
		got = hook_from_annotations(anns, "post.hook.backup.velero.io/",
		    0, who, &h, warns);
	} else {
		got = hook_from_annotations(anns,
		    "post.hook.restore.velero.io/", 1, who, &h, warns);
	}
	if (got) {
		hook_list_add(out, &h);
		hook_exec_clear(&h);
		return;
	}
	for (size_t i = 0; s != NULL && i < s->nrules; i++) {
		const struct hook_rule *r = &s->rules[i];
		const struct hook_exec *v = p == HOOK_PRE ? r->pre :
		    p == HOOK_POST ? r->post : r->exec;
		size_t n = p == HOOK_PRE ? r->npre : p == HOOK_POST ? r->npost :
		    r->nexec;

		if (n == 0 || !hook_filter_match(&r->f, ns, labels))
			continue;
		for (size_t j = 0; j < n; j++)
			hook_list_add(out, &v[j]);
	}
}

/* ---- JSON form --------------------------------------------------------- */

cJSON *
hook_exec_json(const struct hook_exec *h)
{
	cJSON *j = cJSON_CreateObject(), *c;

	cJSON_AddStringToObject(j, "name", h->name ? h->name : "");
	if (h->container != NULL)
		cJSON_AddStringToObject(j, "container", h->container);
	c = cJSON_AddArrayToObject(j, "command");
	for (size_t i = 0; h->command != NULL && h->command[i] != NULL; i++)
		cJSON_AddItemToArray(c, cJSON_CreateString(h->command[i]));
	cJSON_AddStringToObject(j, "onError", h->on_error == HOOK_CONTINUE ?
	    "Continue" : "Fail");
	if (h->timeout_us > 0)
		cJSON_AddNumberToObject(j, "timeoutSeconds",
		    (double)(h->timeout_us / 1000000));
	return j;
}

int
hook_exec_from_json(const cJSON *j, struct hook_exec *h)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "command"), *it;
	size_t n = 0;

	memset(h, 0, sizeof *h);
	if (!cJSON_IsArray(c) || cJSON_GetArraySize(c) == 0)
		return CAIRN_EINVAL;
	h->name = xstrdup(json_str_or(j, "name", ""));
	if (json_str(j, "container") != NULL)
		h->container = xstrdup(json_str(j, "container"));
	h->command = xcalloc((size_t)cJSON_GetArraySize(c) + 1,
	    sizeof *h->command);
	cJSON_ArrayForEach(it, c)
		if (cJSON_IsString(it))
			h->command[n++] = xstrdup(it->valuestring);
	h->on_error = strcmp(json_str_or(j, "onError", "Fail"), "Continue") ==
	    0 ? HOOK_CONTINUE : HOOK_FAIL;
	h->timeout_us = json_int(j, "timeoutSeconds", 0) * 1000000;
	if (n == 0) {
		hook_exec_clear(h);
		return CAIRN_EINVAL;
	}
	return 0;
}

/* ---- running one ------------------------------------------------------- */

/* "text" escaped and cut to HOOK_OUT_LOG bytes, into b. */
static void
escaped_cut(struct buf *b, const char *text, size_t len)
{
	char cut[HOOK_OUT_LOG + 1];
	size_t n = len > HOOK_OUT_LOG ? HOOK_OUT_LOG : len;

	memcpy(cut, text, n);
	cut[n] = '\0';
	while (n > 0 && (cut[n - 1] == '\n' || cut[n - 1] == '\r'))
		cut[--n] = '\0';
	str_escape_text(b, cut);
	if (len > HOOK_OUT_LOG)
		buf_puts(b, "...");
}

int
hook_exec_run(struct kube *k, const cJSON *pod, const char *ns,
	const char *name, const struct hook_exec *h, enum hook_phase p,
	const atomic_int *stop, struct hook_outcome *out,
	void (*logf)(void *arg, const char *line), void *arg)
{
	struct kube_exec_opts o;
	struct kube_exec_result res;
	struct cairn_err err = CAIRN_ERR_INIT;
	struct buf line;
	int64_t t0 = time_mono_us();
	int rc;

	memset(out, 0, sizeof *out);
	out->exit_code = -1;
	memset(&o, 0, sizeof o);
	o.container = h->container;
	o.pod = pod;
	o.command = (const char *const *)h->command;
	o.timeout_us = h->timeout_us > 0 ? h->timeout_us :
	    HOOK_DEFAULT_TIMEOUT_US;
	o.stop = stop;
	rc = kube_exec(k, ns, name, &o, &res, &err);
	out->took_us = time_mono_us() - t0;
	out->rc = rc;
	out->exit_code = res.exit_code;
	out->ok = rc == 0 && res.exit_code == 0;
	buf_init(&line, 4 * HOOK_OUT_LOG + 1024);
	buf_printf(&line, "%s hook \"%s\" in pod %s/%s container %s: [",
	    hook_phase_name(p), h->name, ns, name, res.container[0] ?
	    res.container : (h->container ? h->container : "(first)"));
	for (size_t i = 0; h->command[i] != NULL; i++) {
		if (i > 0)
			buf_putc(&line, ' ');
		str_escape_text(&line, h->command[i]);
	}
	buf_puts(&line, "]: ");
	if (rc == 0)
		buf_printf(&line, "exit code %d", res.exit_code);
	else if (rc == CAIRN_ETIMEOUT) {
		char d[32];

		duration_format(o.timeout_us, d);
		buf_printf(&line, "timed out after %s", d);
	} else
		str_escape_text(&line, err.msg);
	buf_printf(&line, " (%.2f s)", (double)out->took_us / 1e6);
	if (rc == 0 && res.out_len > 0) {
		buf_puts(&line, "; stdout: ");
		escaped_cut(&line, res.out, res.out_len);
	}
	if (rc == 0 && res.err_len > 0) {
		buf_puts(&line, "; stderr: ");
		escaped_cut(&line, res.err, res.err_len);
	}
	if (logf != NULL)
		logf(arg, buf_cstr(&line));
	buf_free(&line);
	/* the summary a failure is reported with */
	buf_init(&line, sizeof out->summary - 1);
	if (rc == 0) {
		buf_printf(&line, "exit code %d", res.exit_code);
		if (res.exit_code != 0 && res.err_len > 0) {
			buf_puts(&line, ": ");
			escaped_cut(&line, res.err, res.err_len > 300 ? 300 :
			    res.err_len);
		}
	} else if (rc == CAIRN_ETIMEOUT) {
		char d[32];

		duration_format(o.timeout_us, d);
		buf_printf(&line, "timed out after %s", d);
	} else {
		str_escape_text(&line, err.msg);
	}
	snprintf(out->summary, sizeof out->summary, "%s", buf_cstr(&line));
	buf_free(&line);
	kube_exec_result_free(&res);
	return rc == CAIRN_ECANCELED ? rc : 0;
}

void
hook_eventf(hook_event_fn fn, void *arg, const char *level, const char *fmt,
    ...)
{
	char line[2048];
	va_list ap;

	if (fn == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	fn(arg, level, line);
}
