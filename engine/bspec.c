/*
 * bspec.c: Backup spec validation, filters, item order and tarball paths.
 * See bspec.h; messages follow Velero's where Velero has one, so users
 * moving between the tools read the same words.
 */
#include "config.h"
#include "engine/bspec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/jsonutil.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"
#include "engine/spec_fields.h"

/* Append a formatted message to the array a (at most BSPEC_MAX_VALIDATION). */
#define add_err(a, ...) json_add_msgf((a), BSPEC_MAX_VALIDATION, __VA_ARGS__)

/* A spec list of strings; non-strings are validation errors. */
static char **
str_list(const cJSON *spec, const char *field, cJSON *errs)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(spec, field);
	const cJSON *it;
	char **v;
	size_t n = 0;

	if (a == NULL || cJSON_IsNull(a))
		return xcalloc(1, sizeof *v);
	if (!cJSON_IsArray(a)) {
		add_err(errs, "spec.%s must be a list of strings", field);
		return xcalloc(1, sizeof *v);
	}
	v = xcalloc((size_t)cJSON_GetArraySize(a) + 1, sizeof *v);
	cJSON_ArrayForEach(it, a) {
		if (!cJSON_IsString(it)) {
			add_err(errs, "spec.%s must be a list of strings", field);
			continue;
		}
		v[n++] = xstrdup(it->valuestring);
	}
	return v;
}

/* Velero's ValidateIncludesExcludes. */
static void
check_inc_exc(char **inc, char **exc, const char *what, cJSON *errs)
{
	if (strv_contains(inc, "*") && strv_len(inc) > 1)
		add_err(errs, "Invalid included/excluded %s lists: includes list "
		    "must either contain '*' only, or a non-empty list of items",
		    what);
	if (strv_contains(exc, "*"))
		add_err(errs, "Invalid included/excluded %s lists: excludes list "
		    "cannot contain '*'", what);
	for (size_t i = 0; exc[i] != NULL; i++)
		if (strv_contains(inc, exc[i]))
			add_err(errs, "Invalid included/excluded %s lists: "
			    "excludes list cannot contain an item in the includes "
			    "list: %s", what, exc[i]);
}

/* Parse a metav1.LabelSelector; errors go to errs. */
static struct kube_selector *
parse_selector(const cJSON *sel, const char *field, char **text, cJSON *errs)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct kube_selector *ks = NULL;
	char *t = NULL;

	if (kube_selector_text(sel, &t, &err) < 0 ||
	    kube_selector_parse(t, &ks, &err) < 0) {
		add_err(errs, "Invalid %s: %s", field, err.msg);
		free(t);
		return NULL;
	}
	if (text != NULL)
		*text = t;
	else
		free(t);
	return ks;
}

static void
add_warning(struct bspec *s, size_t *n, const char *fmt, ...)
	CAIRN_PRINTF(3, 4);

static void
add_warning(struct bspec *s, size_t *n, const char *fmt, ...)
{
	char msg[CAIRN_ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	s->warnings = xreallocarray(s->warnings, *n + 2, sizeof *s->warnings);
	s->warnings[(*n)++] = xstrdup(msg);
	s->warnings[*n] = NULL;
}

/*
 * Every field a Backup spec may carry (Velero's BackupSpec) and what cairn
 * does with it: nothing a user writes is silently ignored. Each is
 * declared in the CRD (schema/gen_crds.py), so a cluster keeps it.
 */
static const struct spec_field spec_fields[] = {
	{ "includedNamespaces", SPEC_DONE, NULL },
	{ "excludedNamespaces", SPEC_DONE, NULL },
	{ "includedResources", SPEC_DONE, NULL },
	{ "excludedResources", SPEC_DONE, NULL },
	{ "includeClusterResources", SPEC_DONE, NULL },
	{ "labelSelector", SPEC_DONE, NULL },
	{ "orLabelSelectors", SPEC_DONE, NULL },
	{ "ttl", SPEC_DONE, NULL },
	{ "storageLocation", SPEC_DONE, NULL },
	{ "snapshotVolumes", SPEC_DONE, NULL },
	{ "hooks", SPEC_DONE, NULL },
	{ "orderedResources", SPEC_DONE, NULL },
	{ "csiSnapshotTimeout", SPEC_DONE, NULL },	/* to snapshotter plugins */
	{ "metadata", SPEC_DONE, NULL },	/* checked below */
	{ "includedClusterScopedResources", SPEC_REFUSE, "use "
	    "includedResources with includeClusterResources" },
	{ "excludedClusterScopedResources", SPEC_REFUSE, "use "
	    "excludedResources with includeClusterResources" },
	{ "includedNamespaceScopedResources", SPEC_REFUSE, "use "
	    "includedResources" },
	{ "excludedNamespaceScopedResources", SPEC_REFUSE, "use "
	    "excludedResources" },
	{ "resourcePolicy", SPEC_REFUSE, "resource policies are not "
	    "implemented; filter with the include/exclude lists and label "
	    "selectors" },
	{ "snapshotMoveData", SPEC_REFUSE, "CSI snapshot data movement is not "
	    "implemented; cairn copies volume data with its volume plugins "
	    "(docs/plugins.md)" },
	{ "volumeSnapshotLocations", SPEC_WARN, "cairn's volume plugins decide "
	    "where volume data goes (docs/plugins.md)" },
	{ "defaultVolumesToFsBackup", SPEC_WARN, "pod volume file-system "
	    "backup is not implemented; volumes are copied by cairn's volume "
	    "plugins" },
	{ "defaultVolumesToRestic", SPEC_WARN, "pod volume file-system backup "
	    "is not implemented; volumes are copied by cairn's volume plugins" },
	{ "volumeGroupSnapshotLabelKey", SPEC_WARN, "cairn's CSI snapshot "
	    "plugin snapshots each volume on its own, not volume groups" },
	{ "itemOperationTimeout", SPEC_WARN, "cairn runs no asynchronous item "
	    "operations; volume plugins have their own idle timeout "
	    "(--plugin-timeout)" },
	{ "datamover", SPEC_WARN, "no data mover is used (snapshotMoveData is "
	    "not implemented)" },
	{ "uploaderConfig", SPEC_WARN, "there is no pod volume uploader" },
	{ "backupType", SPEC_WARN, "cairn's volume plugins decide how volume "
	    "data is copied (docs/plugins.md)" },
};

/* Refuse or warn about every field cairn does not implement. */
static void
check_fields(const cJSON *spec, struct bspec *s, cJSON *errs)
{
	cJSON *warns = cJSON_CreateArray();
	const cJSON *it, *md;
	size_t nw = 0;

	spec_fields_check(spec, "spec", spec_fields,
	    sizeof spec_fields / sizeof spec_fields[0], errs, warns);
	cJSON_ArrayForEach(it, warns)
		add_warning(s, &nw, "%s", it->valuestring);
	cJSON_Delete(warns);
	md = cJSON_GetObjectItemCaseSensitive(spec, "metadata");
	cJSON_ArrayForEach(it, md) {
		if (strcmp(it->string, "labels") != 0)
			add_err(errs, "spec.metadata.%s: unknown field",
			    it->string);
		else if (!spec_value_unset(it))
			add_warning(s, &nw, "spec.metadata.labels is ignored on "
			    "a Backup: it labels the Backups a Schedule creates "
			    "from its template; label the Backup's own metadata");
	}
}

/* spec.orderedResources: {"pods": "ns/a,ns/b", "persistentvolumes": "pv1"}. */
static void
parse_ordered(const cJSON *spec, struct bspec *s, cJSON *errs)
{
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(spec,
	    "orderedResources"), *it;

	if (o == NULL || cJSON_IsNull(o))
		return;
	if (!cJSON_IsObject(o)) {
		add_err(errs, "spec.orderedResources must be a map of resource "
		    "to comma-separated names");
		return;
	}
	s->ordered = xcalloc((size_t)cJSON_GetArraySize(o) + 1,
	    sizeof *s->ordered);
	cJSON_ArrayForEach(it, o) {
		struct bspec_order *e;

		if (!cJSON_IsString(it)) {
			add_err(errs, "spec.orderedResources.%s must be a string "
			    "of comma-separated names (namespace/name for "
			    "namespaced resources)", it->string);
			continue;
		}
		e = &s->ordered[s->nordered++];
		e->key = xstrdup(it->string);
		e->names = str_split(it->valuestring, ',', NULL);
		for (size_t i = 0; e->names[i] != NULL; i++) {
			const char *p = e->names[i], *sl = strchr(p, '/');

			if (sl != NULL && (sl == p || sl[1] == '\0' ||
			    strchr(sl + 1, '/') != NULL))
				add_err(errs, "spec.orderedResources.%s: \"%s\" is "
				    "not namespace/name or name", it->string, p);
		}
	}
}

char *const *
bspec_ordered(const struct bspec *s, const struct kube_resource *r)
{
	for (size_t i = 0; i < s->nordered; i++) {
		const char *k = s->ordered[i].key;
		size_t rl = strlen(r->resource);

		if (strcmp(k, r->resource) == 0 || (strncmp(k, r->resource,
		    rl) == 0 && k[rl] == '.' && strcmp(k + rl + 1, r->group) ==
		    0))
			return s->ordered[i].names[0] != NULL ?
			    s->ordered[i].names : NULL;
	}
	return NULL;
}

int
bspec_parse(const cJSON *backup, struct bspec **out, cJSON *errs)
{
	const cJSON *spec = json_get(backup, "spec");
	const cJSON *icr, *ls, *ols, *it;
	const char *ttl, *loc;
	struct bspec *s;
	size_t n = 0;
	int nerr0 = cJSON_GetArraySize(errs);

	*out = NULL;
	s = xcalloc(1, sizeof *s);
	s->inc_ns = str_list(spec, "includedNamespaces", errs);
	s->exc_ns = str_list(spec, "excludedNamespaces", errs);
	s->inc_res = str_list(spec, "includedResources", errs);
	s->exc_res = str_list(spec, "excludedResources", errs);
	check_inc_exc(s->inc_ns, s->exc_ns, "namespace", errs);
	check_inc_exc(s->inc_res, s->exc_res, "resource", errs);
	s->all_namespaces = (s->inc_ns[0] == NULL ||
	    strv_contains(s->inc_ns, "*")) && s->exc_ns[0] == NULL;

	s->cluster = BSPEC_CLUSTER_AUTO;
	icr = cJSON_GetObjectItemCaseSensitive(spec, "includeClusterResources");
	if (cJSON_IsBool(icr))
		s->cluster = cJSON_IsTrue(icr) ? BSPEC_CLUSTER_YES :
		    BSPEC_CLUSTER_NO;
	else if (icr != NULL && !cJSON_IsNull(icr))
		add_err(errs, "spec.includeClusterResources must be true, "
		    "false or unset");

	ls = cJSON_GetObjectItemCaseSensitive(spec, "labelSelector");
	ols = cJSON_GetObjectItemCaseSensitive(spec, "orLabelSelectors");
	if (ls != NULL && !cJSON_IsNull(ls) && cJSON_GetArraySize(ols) > 0)
		add_err(errs, "encountered labelSelector as well as "
		    "orLabelSelectors in backup spec, only one can be specified");
	if (ls != NULL && !cJSON_IsNull(ls)) {
		s->sel = parse_selector(ls, "label selector",
		    &s->selector_text, errs);
		if (s->sel != NULL && kube_selector_empty(s->sel)) {
			kube_selector_free(s->sel);
			s->sel = NULL;
			FREE_NULL(s->selector_text);
		}
	}
	if (cJSON_GetArraySize(ols) > 0) {
		s->or_sels = xcalloc((size_t)cJSON_GetArraySize(ols) + 1,
		    sizeof *s->or_sels);
		cJSON_ArrayForEach(it, ols) {
			struct kube_selector *k = parse_selector(it,
			    "orLabelSelectors entry", NULL, errs);

			if (k != NULL)
				s->or_sels[n++] = k;
		}
	}

	s->ttl_us = BSPEC_DEFAULT_TTL_US;
	ttl = json_str(spec, "ttl");
	if (ttl != NULL && ttl[0] != '\0' &&
	    duration_parse(ttl, &s->ttl_us) < 0)
		add_err(errs, "Invalid TTL \"%s\": want a duration such as "
		    "72h, 30m or 1h30m", ttl);
	else if (json_get(spec, "ttl") != NULL && ttl == NULL &&
	    !cJSON_IsNull(json_get(spec, "ttl")))
		add_err(errs, "Invalid TTL: spec.ttl must be a string");
	loc = json_str(spec, "storageLocation");
	if (loc != NULL && loc[0] != '\0')
		s->location = xstrdup(loc);
	s->warnings = xcalloc(1, sizeof *s->warnings);
	check_fields(spec, s, errs);
	parse_ordered(spec, s, errs);
	hook_spec_parse(json_get(spec, "hooks"), 0, &s->hooks, errs);

	if (cJSON_GetArraySize(errs) > nerr0) {
		bspec_free(s);
		return 0;
	}
	*out = s;
	return 0;
}

void
bspec_free(struct bspec *s)
{
	if (s == NULL)
		return;
	strv_free(s->inc_ns);
	strv_free(s->exc_ns);
	strv_free(s->inc_res);
	strv_free(s->exc_res);
	kube_selector_free(s->sel);
	if (s->or_sels != NULL)
		for (size_t i = 0; s->or_sels[i] != NULL; i++)
			kube_selector_free(s->or_sels[i]);
	free(s->or_sels);
	free(s->selector_text);
	free(s->location);
	hook_spec_free(s->hooks);
	strv_free(s->warnings);
	for (size_t i = 0; i < s->nordered; i++) {
		free(s->ordered[i].key);
		strv_free(s->ordered[i].names);
	}
	free(s->ordered);
	free(s);
}

int
bspec_ns_included(const struct bspec *s, const char *ns)
{
	if (strv_glob_any(s->exc_ns, ns))
		return 0;
	if (s->inc_ns[0] == NULL)
		return 1;
	return strv_glob_any(s->inc_ns, ns);
}

int
bspec_names_resource(const char *e, const struct kube_resource *r)
{
	size_t rl = strlen(r->resource);
	const char *dot;

	if (strcmp(e, "*") == 0)
		return 1;
	dot = strchr(e, '.');
	if (dot != NULL) {
		/* "deployments.apps" or "deployments.v1.apps" */
		if ((size_t)(dot - e) != rl || strncmp(e, r->resource, rl) != 0)
			return 0;
		if (strcmp(dot + 1, r->group) == 0)
			return 1;
		return str_has_prefix(dot + 1, r->version) &&
		    dot[1 + strlen(r->version)] == '.' &&
		    strcmp(dot + 2 + strlen(r->version), r->group) == 0;
	}
	if (strcmp(e, r->resource) == 0 || strcasecmp(e, r->kind) == 0 ||
	    (r->singular != NULL && r->singular[0] != '\0' &&
	    strcmp(e, r->singular) == 0))
		return 1;
	return strv_contains(r->short_names, e);
}

int
bspec_resource_included(const struct bspec *s, const struct kube_resource *r)
{
	for (size_t i = 0; s->exc_res[i] != NULL; i++)
		if (bspec_names_resource(s->exc_res[i], r))
			return 0;
	if (s->inc_res[0] == NULL)
		return 1;
	for (size_t i = 0; s->inc_res[i] != NULL; i++)
		if (bspec_names_resource(s->inc_res[i], r))
			return 1;
	return 0;
}

int
bspec_labels_match(const struct bspec *s, const cJSON *obj)
{
	if (s->or_sels != NULL && s->or_sels[0] != NULL) {
		for (size_t i = 0; s->or_sels[i] != NULL; i++)
			if (kube_selector_match_object(s->or_sels[i], obj))
				return 1;
		return 0;
	}
	if (s->sel != NULL)
		return kube_selector_match_object(s->sel, obj);
	return 1;
}

enum bspec_walk
bspec_walk_of(const struct bspec *s, const struct kube_resource *r)
{
	int is_ns = r->group[0] == '\0' && strcmp(r->resource, "namespaces") == 0;

	if (!(r->verbs & KUBE_VERB_LIST) || !bspec_resource_included(s, r))
		return BSPEC_WALK_SKIP;
	/* Namespaces follow the namespace filter, whatever the cluster flag. */
	if (r->namespaced || is_ns)
		return BSPEC_WALK_ALL;
	switch (s->cluster) {
	case BSPEC_CLUSTER_YES:
		return BSPEC_WALK_ALL;
	case BSPEC_CLUSTER_NO:
		return BSPEC_WALK_SKIP;
	case BSPEC_CLUSTER_AUTO:
		break;
	}
	/* An explicitly included cluster resource is taken as a whole. */
	if (s->inc_res[0] != NULL && !strv_contains(s->inc_res, "*"))
		return BSPEC_WALK_ALL;
	if (s->all_namespaces)
		return BSPEC_WALK_ALL;
	if ((r->group[0] == '\0' && strcmp(r->resource, "persistentvolumes") == 0) ||
	    (strcmp(r->group, "apiextensions.k8s.io") == 0 &&
	    strcmp(r->resource, "customresourcedefinitions") == 0))
		return BSPEC_WALK_RELATED;
	return BSPEC_WALK_SKIP;
}

int
bspec_resource_cmp(int pass_a, const char *group_a, const char *res_a,
	int pass_b, const char *group_b, const char *res_b)
{
	int c;

	if (pass_a != pass_b)
		return pass_a < pass_b ? -1 : 1;
	c = strcmp(group_a, group_b);
	if (c != 0)
		return c;
	return strcmp(res_a, res_b);
}

char *
bspec_item_key(const char *group, const char *resource, const char *ns,
	const char *name)
{
	return xasprintf("%s/%s/%s/%s", group, resource, ns ? ns : "", name);
}

int
bspec_key_split(const char *key, char *parts[4])
{
	const char *p = key;

	for (int i = 0; i < 4; i++)
		parts[i] = NULL;
	for (int i = 0; i < 4; i++) {
		size_t len = strcspn(p, "/");

		if ((i < 3 && p[len] != '/') || (i == 3 && p[len] != '\0')) {
			for (int k = 0; k < i; k++)
				FREE_NULL(parts[k]);
			return CAIRN_EINVAL;
		}
		parts[i] = xstrndup(p, len);
		p += len + 1;
	}
	return 0;
}

int
bspec_item_paths(const char *group, const char *version,
	const char *resource, const char *ns, const char *name,
	struct buf *legacy, struct buf *preferred)
{
	char scope[600];
	char res[600];
	int rc = 0;

	if (ns != NULL && ns[0] != '\0')
		snprintf(scope, sizeof scope, "namespaces/%s", ns);
	else
		snprintf(scope, sizeof scope, "cluster");
	if (group != NULL && group[0] != '\0')
		snprintf(res, sizeof res, "%s.%s", resource, group);
	else
		snprintf(res, sizeof res, "%s", resource);
	buf_reset(legacy);
	buf_reset(preferred);
	rc |= buf_printf(legacy, "resources/%s/%s/%s.json", res, scope, name);
	rc |= buf_printf(preferred, "resources/%s/%s-preferredversion/%s/%s.json",
	    res, version, scope, name);
	return rc < 0 ? CAIRN_ETOOBIG : 0;
}
