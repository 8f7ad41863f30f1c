/*
 * restore_plan.c: selecting and ordering the items of a restore.
 *
 * Why a spill. The tarball is a stream in the backup's order (group,
 * resource, namespace, name); a restore must go in Velero's priority
 * order, which differs. Three ways keep memory bounded:
 *   1. one pass per tier, streaming the archive again from storage each
 *      time: no local disk, but N downloads of the whole tarball for N
 *      resources (a tarball with 60 resources is read 60 times);
 *   2. an index pass (names and sizes) then per-tier passes: same cost;
 *   3. one pass that keeps the selected items in a private temporary
 *      SQLite database, then per-tier queries in order.
 * We take 3: one download whatever the number of tiers, the order and the
 * preferred-over-legacy choice become SQL (an upsert keyed by resource,
 * namespace and name), SQLite is already a dependency (the journal), and
 * its page cache bounds memory (a few MiB) while the data goes to a file
 * that SQLite itself creates and deletes (sqlite3_open("") makes a
 * private, unnamed temporary database). The cost is local disk of about
 * the uncompressed size of the selected JSON, in $TMPDIR (SQLITE_TMPDIR).
 * No entry name is ever used as a file name: names are column values.
 *
 * Order (Velero's restore priorities): tier keys "a<n>" for the
 * high-priority list in its order, "b<resource.group>" for every other
 * resource (alphabetical), "c<n>" for the low list. Each resource is one
 * tier; items of a tier may be created in parallel, tiers never overlap.
 */
#include "config.h"
#include "engine/restore_plan.h"

#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/util.h"
#include "engine/archive_read.h"
#include "engine/spec_fields.h"
#include "kube/kube.h"

/* Velero's restore priorities, group-qualified as tarball folders are. */
static const char *const high_priority[] = {
	"customresourcedefinitions.apiextensions.k8s.io",
	"namespaces",
	"storageclasses.storage.k8s.io",
	"volumesnapshotclasses.snapshot.storage.k8s.io",
	"volumesnapshotcontents.snapshot.storage.k8s.io",
	"volumesnapshots.snapshot.storage.k8s.io",
	"persistentvolumes",
	"persistentvolumeclaims",
	"clusterroles.rbac.authorization.k8s.io",
	"roles.rbac.authorization.k8s.io",
	"serviceaccounts",
	"clusterrolebindings.rbac.authorization.k8s.io",
	"rolebindings.rbac.authorization.k8s.io",
	"secrets",
	"configmaps",
	"limitranges",
	"priorityclasses.scheduling.k8s.io",
	"pods",
	"replicasets.apps",
	"endpoints",
	"services",
	NULL
};

static const char *const low_priority[] = {
	"clusterbootstraps.run.tanzu.vmware.com",
	"clusters.cluster.x-k8s.io",
	"clusterresourcesets.addons.cluster.x-k8s.io",
	NULL
};

static const char *const never_restored[] = {
	"nodes",
	"events",
	"events.events.k8s.io",
	"backups.cairn.io",
	"restores.cairn.io",
	"volumepluginbackups.cairn.io",
	"volumepluginrestores.cairn.io",
	"backups.velero.io",
	"restores.velero.io",
	"resticrepositories.velero.io",
	"backuprepositories.velero.io",
	"csinodes.storage.k8s.io",
	"volumeattachments.storage.k8s.io",
	NULL
};

int
restore_never_restored(const char *resgroup)
{
	return strv_contains((char *const *)never_restored, resgroup);
}

void
restore_tier_key(const char *resgroup, char *out)
{
	for (int i = 0; high_priority[i] != NULL; i++)
		if (strcmp(high_priority[i], resgroup) == 0) {
			snprintf(out, 300, "a%03d", i);
			return;
		}
	for (int i = 0; low_priority[i] != NULL; i++)
		if (strcmp(low_priority[i], resgroup) == 0) {
			snprintf(out, 300, "c%03d", i);
			return;
		}
	snprintf(out, 300, "b%.290s", resgroup);
}

/* ---- paths ---------------------------------------------------------- */

static int
dot_name(const char *s)
{
	return strcmp(s, ".") == 0 || strcmp(s, "..") == 0;
}

int
restore_path_parse(const char *path, struct restore_path *out)
{
	char *seg[8];
	int n = 0, i = 0;
	char *p, *dot;
	size_t len;

	memset(out, 0, sizeof *out);
	if (!str_has_prefix(path, "resources/"))
		return CAIRN_ENOTFOUND;
	if (strlen(path) >= sizeof out->buf)
		return CAIRN_EINVAL;
	snprintf(out->buf, sizeof out->buf, "%s", path);
	p = out->buf;
	while (p != NULL && n < 8) {
		seg[n++] = p;
		p = strchr(p, '/');
		if (p != NULL)
			*p++ = '\0';
	}
	if (p != NULL)
		return CAIRN_EINVAL;
	/* resources/<rg>/[<v>-preferredversion/](cluster|namespaces/<ns>)/<n>.json */
	if (n < 4 || seg[1][0] == '\0')
		return CAIRN_EINVAL;
	out->resgroup = seg[1];
	i = 2;
	if (str_has_suffix(seg[i], "-preferredversion")) {
		len = strlen(seg[i]) - strlen("-preferredversion");
		if (len == 0)
			return CAIRN_EINVAL;
		seg[i][len] = '\0';
		out->version = seg[i];
		out->preferred = 1;
		i++;
	} else {
		out->version = "";
	}
	if (i < n && strcmp(seg[i], "cluster") == 0 && n == i + 2) {
		out->ns = "";
		i++;
	} else if (i < n && strcmp(seg[i], "namespaces") == 0 && n == i + 3 &&
	    seg[i + 1][0] != '\0') {
		out->ns = seg[i + 1];
		i += 2;
	} else {
		return CAIRN_EINVAL;
	}
	if (!str_has_suffix(seg[i], ".json") || strlen(seg[i]) <= 5)
		return CAIRN_EINVAL;
	seg[i][strlen(seg[i]) - 5] = '\0';
	out->name = seg[i];
	/* resource and group: the group is everything after the first dot */
	len = strlen(out->resgroup);
	if (len >= sizeof out->rbuf)
		return CAIRN_EINVAL;
	memcpy(out->rbuf, out->resgroup, len + 1);
	out->resource = out->rbuf;
	dot = strchr(out->rbuf, '.');
	if (dot != NULL) {
		*dot = '\0';
		out->group = dot + 1;
	} else {
		out->group = "";
	}
	if (out->resource[0] == '\0')
		return CAIRN_EINVAL;
	/*
	 * Kubernetes names are never "." or ".." (path segment names): such
	 * an entry is not an item, and its name would walk the API's URL.
	 */
	if (dot_name(out->name) || dot_name(out->ns) || dot_name(out->resgroup))
		return CAIRN_EINVAL;
	return 0;
}

/* ---- filters ---------------------------------------------------------- */

struct restore_filter {
	char **inc_ns, **exc_ns;
	char **inc_res, **exc_res;	/* resolved to resource.group when known */
	char **st_inc, **st_exc;	/* restoreStatus */
	int all_ns;			/* namespace filter takes everything */
	int cluster;			/* -1 unset, 0, 1 */
	int update;			/* existingResourcePolicy=update */
	int node_ports;			/* preserveNodePorts */
	struct kube_selector *sel;
	struct kube_selector **or_sels;	/* NULL-terminated or NULL */
	char **map_from, **map_to;	/* namespaceMapping, parallel arrays */
};

/* A string array at key of spec, NULL-terminated, owned. */
static char **
str_array(const cJSON *spec, const char *key, cJSON *errs)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(spec, key), *it;
	char **v;
	size_t n = 0;

	v = xcalloc(1, sizeof *v);
	if (a == NULL || cJSON_IsNull(a))
		return v;
	if (!cJSON_IsArray(a)) {
		char *m = xasprintf("spec.%s must be a list of strings", key);

		cJSON_AddItemToArray(errs, cJSON_CreateString(m));
		free(m);
		return v;
	}
	cJSON_ArrayForEach(it, a) {
		if (!cJSON_IsString(it) || it->valuestring[0] == '\0')
			continue;
		v = xreallocarray(v, n + 2, sizeof *v);
		v[n++] = xstrdup(it->valuestring);
		v[n] = NULL;
	}
	return v;
}

/* Append a formatted message to the array a. */
#define add_err(a, ...) json_add_msgf((a), 0, __VA_ARGS__)

/* Resolve resource names through discovery to resource[.group]. */
static void
resolve_resources(char **v, const struct kube_discovery *disc)
{
	if (disc == NULL)
		return;
	for (size_t i = 0; v[i] != NULL; i++) {
		const struct kube_resource *r;

		if (strcmp(v[i], "*") == 0)
			continue;
		r = kube_discovery_lookup(disc, v[i]);
		if (r == NULL)
			continue;
		free(v[i]);
		if (r->group[0] == '\0')
			v[i] = xstrdup(r->resource);
		else
			v[i] = xasprintf("%s.%s", r->resource, r->group);
	}
}

static int
dns_label(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' &&
		    s[i] <= '9') || s[i] == '-'))
			return 0;
	return 1;
}

static struct kube_selector *
parse_selector(const cJSON *sel, const char *what, cJSON *errs)
{
	struct kube_selector *ks = NULL;
	struct cairn_err err = CAIRN_ERR_INIT;
	char *text = NULL;

	if (sel == NULL || cJSON_IsNull(sel))
		return NULL;
	if (kube_selector_text(sel, &text, &err) < 0 ||
	    kube_selector_parse(text, &ks, &err) < 0) {
		add_err(errs, "invalid %s: %s", what, err.msg);
		ks = NULL;
	}
	free(text);
	return ks;
}

static void
check_overlap(char **inc, char **exc, const char *what, cJSON *errs)
{
	for (size_t i = 0; exc[i] != NULL; i++)
		if (strv_contains(inc, exc[i]))
			add_err(errs, "Invalid included/excluded %s lists: "
			    "excludes list cannot contain an item in the "
			    "includes list: %s", what, exc[i]);
}

/* Velero's RestoreSpec, field by field (declared in schema/gen_crds.py). */
static const struct spec_field restore_fields[] = {
	{ "backupName", SPEC_DONE, NULL },
	{ "scheduleName", SPEC_DONE, NULL },	/* see restore_spec_check */
	{ "includedNamespaces", SPEC_DONE, NULL },
	{ "excludedNamespaces", SPEC_DONE, NULL },
	{ "includedResources", SPEC_DONE, NULL },
	{ "excludedResources", SPEC_DONE, NULL },
	{ "namespaceMapping", SPEC_DONE, NULL },
	{ "labelSelector", SPEC_DONE, NULL },
	{ "orLabelSelectors", SPEC_DONE, NULL },
	{ "restorePVs", SPEC_DONE, NULL },
	{ "restoreStatus", SPEC_DONE, NULL },
	{ "preserveNodePorts", SPEC_DONE, NULL },
	{ "includeClusterResources", SPEC_DONE, NULL },
	{ "existingResourcePolicy", SPEC_DONE, NULL },
	{ "hooks", SPEC_DONE, NULL },
	{ "resourceModifier", SPEC_REFUSE, "resource modifiers are not "
	    "implemented: the objects would be restored unmodified" },
	{ "resourcePolicy", SPEC_REFUSE, "resource policies are not "
	    "implemented; filter with the include/exclude lists and label "
	    "selectors" },
	{ "itemOperationTimeout", SPEC_WARN, "cairn runs no asynchronous item "
	    "operations; volume plugins have their own idle timeout "
	    "(--plugin-timeout)" },
	{ "uploaderConfig", SPEC_WARN, "there is no pod volume uploader; "
	    "cairn's volume plugins restore volume data" },
};

void
restore_spec_check(const cJSON *spec, cJSON *errs, cJSON *warnings)
{
	const char *bk = json_str(spec, "backupName");
	const char *sched = json_str(spec, "scheduleName");

	spec_fields_check(spec, "spec", restore_fields,
	    sizeof restore_fields / sizeof restore_fields[0], errs, warnings);
	if ((bk == NULL || bk[0] == '\0') && sched != NULL && sched[0] != '\0')
		add_err(errs, "spec.scheduleName is not supported by cairn: "
		    "name the backup to restore in spec.backupName ('cairn "
		    "restore create --from-schedule %s' picks the schedule's "
		    "latest Completed backup)", sched);
}

int
restore_filter_new(const cJSON *spec, const struct kube_discovery *disc,
    struct restore_filter **out, cJSON *errs)
{
	struct restore_filter *f = xcalloc(1, sizeof *f);
	const cJSON *x, *it;
	int nerrs = cJSON_GetArraySize(errs);
	size_t n = 0;

	*out = NULL;
	if (!cJSON_IsObject(spec)) {
		add_err(errs, "spec is missing");
		spec = NULL;
	}
	f->inc_ns = str_array(spec, "includedNamespaces", errs);
	f->exc_ns = str_array(spec, "excludedNamespaces", errs);
	f->inc_res = str_array(spec, "includedResources", errs);
	f->exc_res = str_array(spec, "excludedResources", errs);
	x = cJSON_GetObjectItemCaseSensitive(spec, "restoreStatus");
	f->st_inc = str_array(x, "includedResources", errs);
	f->st_exc = str_array(x, "excludedResources", errs);
	resolve_resources(f->inc_res, disc);
	resolve_resources(f->exc_res, disc);
	resolve_resources(f->st_inc, disc);
	resolve_resources(f->st_exc, disc);
	check_overlap(f->inc_ns, f->exc_ns, "namespace", errs);
	check_overlap(f->inc_res, f->exc_res, "resource", errs);
	f->all_ns = f->exc_ns[0] == NULL && (f->inc_ns[0] == NULL ||
	    (strcmp(f->inc_ns[0], "*") == 0 && f->inc_ns[1] == NULL));
	x = cJSON_GetObjectItemCaseSensitive(spec, "includeClusterResources");
	f->cluster = cJSON_IsBool(x) ? cJSON_IsTrue(x) : -1;
	x = cJSON_GetObjectItemCaseSensitive(spec, "preserveNodePorts");
	f->node_ports = cJSON_IsTrue(x);
	x = cJSON_GetObjectItemCaseSensitive(spec, "existingResourcePolicy");
	if (cJSON_IsString(x) && strcmp(x->valuestring, "update") == 0)
		f->update = 1;
	else if (x != NULL && !cJSON_IsNull(x) && !(cJSON_IsString(x) &&
	    (x->valuestring[0] == '\0' || strcmp(x->valuestring, "none") == 0)))
		add_err(errs, "invalid existingResourcePolicy %s: must be "
		    "none or update", cJSON_IsString(x) ? x->valuestring :
		    "(not a string)");
	f->sel = parse_selector(cJSON_GetObjectItemCaseSensitive(spec,
	    "labelSelector"), "labelSelector", errs);
	x = cJSON_GetObjectItemCaseSensitive(spec, "orLabelSelectors");
	if (cJSON_IsArray(x) && cJSON_GetArraySize(x) > 0) {
		if (f->sel != NULL)
			add_err(errs, "encountered labelSelector as well as "
			    "orLabelSelectors in restore spec, only one can "
			    "be specified");
		f->or_sels = xcalloc((size_t)cJSON_GetArraySize(x) + 1,
		    sizeof *f->or_sels);
		cJSON_ArrayForEach(it, x) {
			struct kube_selector *s = parse_selector(it,
			    "orLabelSelectors", errs);

			if (s != NULL)
				f->or_sels[n++] = s;
		}
	}
	f->map_from = xcalloc(1, sizeof *f->map_from);
	f->map_to = xcalloc(1, sizeof *f->map_to);
	x = cJSON_GetObjectItemCaseSensitive(spec, "namespaceMapping");
	n = 0;
	if (x != NULL && !cJSON_IsNull(x) && !cJSON_IsObject(x))
		add_err(errs, "spec.namespaceMapping must be an object");
	else if (x != NULL) {
		cJSON_ArrayForEach(it, x) {
			if (!cJSON_IsString(it) || !dns_label(it->string) ||
			    !dns_label(it->valuestring)) {
				add_err(errs, "invalid namespace mapping "
				    "%.100s:%.100s: both sides must be "
				    "namespace names (RFC 1123 labels)",
				    it->string, cJSON_IsString(it) ?
				    it->valuestring : "(not a string)");
				continue;
			}
			if (strv_contains(f->map_to, it->valuestring)) {
				add_err(errs, "invalid namespace mapping: "
				    "more than one namespace maps to %s",
				    it->valuestring);
				continue;
			}
			f->map_from = xreallocarray(f->map_from, n + 2,
			    sizeof *f->map_from);
			f->map_to = xreallocarray(f->map_to, n + 2,
			    sizeof *f->map_to);
			f->map_from[n] = xstrdup(it->string);
			f->map_to[n] = xstrdup(it->valuestring);
			n++;
			f->map_from[n] = NULL;
			f->map_to[n] = NULL;
		}
	}
	if (cJSON_GetArraySize(errs) > nerrs) {
		restore_filter_free(f);
		return 0;
	}
	*out = f;
	return 0;
}

void
restore_filter_free(struct restore_filter *f)
{
	if (f == NULL)
		return;
	strv_free(f->inc_ns);
	strv_free(f->exc_ns);
	strv_free(f->inc_res);
	strv_free(f->exc_res);
	strv_free(f->st_inc);
	strv_free(f->st_exc);
	strv_free(f->map_from);
	strv_free(f->map_to);
	kube_selector_free(f->sel);
	if (f->or_sels != NULL)
		for (size_t i = 0; f->or_sels[i] != NULL; i++)
			kube_selector_free(f->or_sels[i]);
	free(f->or_sels);
	free(f);
}

int
restore_filter_ns(const struct restore_filter *f, const char *ns)
{
	if (strv_glob_any(f->exc_ns, ns))
		return 0;
	return f->inc_ns[0] == NULL || strv_glob_any(f->inc_ns, ns);
}

/* Does a list entry name resgroup? "*", "res.group", or "res" alone. */
static int
res_match(char **v, const char *resgroup)
{
	size_t plen = strcspn(resgroup, ".");

	for (size_t i = 0; v[i] != NULL; i++) {
		if (strcmp(v[i], "*") == 0 || strcmp(v[i], resgroup) == 0)
			return 1;
		if (strlen(v[i]) == plen && strncmp(v[i], resgroup, plen) == 0)
			return 1;
	}
	return 0;
}

int
restore_filter_resource(const struct restore_filter *f, const char *resgroup)
{
	if (res_match(f->exc_res, resgroup))
		return 0;
	return f->inc_res[0] == NULL || res_match(f->inc_res, resgroup);
}

int
restore_filter_cluster(const struct restore_filter *f, const char *resgroup)
{
	if (!restore_filter_resource(f, resgroup))
		return 0;
	if (f->cluster >= 0)
		return f->cluster;
	return f->all_ns;
}

int
restore_filter_labels(const struct restore_filter *f, const cJSON *obj)
{
	if (f->or_sels != NULL && f->or_sels[0] != NULL) {
		for (size_t i = 0; f->or_sels[i] != NULL; i++)
			if (kube_selector_match_object(f->or_sels[i], obj))
				return 1;
		return 0;
	}
	return f->sel == NULL || kube_selector_match_object(f->sel, obj);
}

const char *
restore_filter_map_ns(const struct restore_filter *f, const char *ns)
{
	for (size_t i = 0; f->map_from[i] != NULL; i++)
		if (strcmp(f->map_from[i], ns) == 0)
			return f->map_to[i];
	return ns;
}

int
restore_filter_status(const struct restore_filter *f, const char *resgroup)
{
	if (res_match(f->st_exc, resgroup))
		return 0;
	return res_match(f->st_inc, resgroup);
}

int
restore_filter_update(const struct restore_filter *f)
{
	return f->update;
}

int
restore_filter_node_ports(const struct restore_filter *f)
{
	return f->node_ports;
}

/* ---- the spill -------------------------------------------------------- */

struct restore_plan {
	sqlite3 *db;
	int64_t count;
	size_t ntiers;
	char **tiers;		/* resgroup per tier */
	char **tier_keys;	/* order key per tier */
	int64_t *tier_counts;
};

static const char plan_schema[] =
	"PRAGMA journal_mode=OFF;"
	"PRAGMA synchronous=OFF;"
	"PRAGMA cache_size=-4096;"	/* 4 MiB page cache */
	"CREATE TABLE items(tier TEXT NOT NULL, resgroup TEXT NOT NULL,"
	" ns TEXT NOT NULL, name TEXT NOT NULL, path TEXT NOT NULL,"
	" version TEXT NOT NULL, preferred INTEGER NOT NULL, data BLOB NOT NULL,"
	" related INTEGER NOT NULL DEFAULT 0,"
	" PRIMARY KEY(resgroup, ns, name));"
	"CREATE TABLE nsobjs(name TEXT PRIMARY KEY, data BLOB NOT NULL);"
	/* every item entry read, selected or not: duplicates, counts */
	"CREATE TABLE paths(path TEXT PRIMARY KEY, resgroup TEXT NOT NULL,"
	" grp TEXT NOT NULL, ns TEXT NOT NULL, name TEXT NOT NULL)"
	" WITHOUT ROWID;";

static int
db_fail(struct restore_plan *p, struct cairn_err *err, const char *what)
{
	return cairn_err_set(err, CAIRN_EIO, "restore plan (temporary "
	    "database): %s: %s", what, sqlite3_errmsg(p->db));
}

void
restore_plan_free(struct restore_plan *p)
{
	if (p == NULL)
		return;
	sqlite3_close(p->db);
	strv_free(p->tiers);
	strv_free(p->tier_keys);
	free(p->tier_counts);
	free(p);
}

/* an item's key: parts of its entry name, so no longer than that */
#define PLAN_KEY_MAX (TARREAD_PATH_MAX + 8)

struct build {
	struct restore_plan *p;
	const struct restore_filter *f;
	restore_problem_fn problem;
	void *arg;
	sqlite3_stmt *has_pref, *upsert, *nsput, *pathput;
	struct buf text;	/* the current entry's bytes, stored as they are */
	/* a legacy entry kept until the next entry shows its preferred copy */
	struct buf pend;	/* its bytes, unparsed */
	char pend_path[TARREAD_PATH_MAX + 1];	/* "": none kept */
	char pend_key[PLAN_KEY_MAX];
	uint64_t n_in;
};

static void
problem(struct build *b, int error, const char *ns, const char *fmt, ...)
    CAIRN_PRINTF(4, 5);

static void
problem(struct build *b, int error, const char *ns, const char *fmt, ...)
{
	va_list ap;
	char msg[1600];

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (b->problem != NULL)
		b->problem(b->arg, error, ns, msg);
}

#define CRD_RG "customresourcedefinitions.apiextensions.k8s.io"

/* Does the item pass the path-only filters? */
static int
selected_by_path(const struct restore_filter *f, const struct restore_path *rp)
{
	if (restore_never_restored(rp->resgroup))
		return 0;
	if (strcmp(rp->resgroup, "namespaces") == 0)
		return restore_filter_resource(f, "namespaces") &&
		    restore_filter_ns(f, rp->name);
	if (rp->ns[0] == '\0')
		return restore_filter_cluster(f, rp->resgroup);
	return restore_filter_resource(f, rp->resgroup) &&
	    restore_filter_ns(f, rp->ns);
}

static int
step_done(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : -1;
}

/*
 * The object of an item entry (parsed: obj; its bytes: text) into the
 * plan, if it is restored or may be needed (namespaces, CRDs).
 */
static int
item_put(struct build *b, const struct restore_path *rp, const char *path,
    cJSON *obj, struct buf *text, struct cairn_err *err)
{
	char tier[300];
	const char *name, *ons;
	int is_ns, want, related, crd_ok;

	is_ns = strcmp(rp->resgroup, "namespaces") == 0 && rp->ns[0] == '\0';
	want = selected_by_path(b->f, rp);
	crd_ok = b->f->cluster != 0 && strcmp(rp->resgroup, CRD_RG) == 0 &&
	    restore_filter_resource(b->f, CRD_RG);
	name = json_str(obj, "metadata.name");
	ons = json_str_or(obj, "metadata.namespace", "");
	if (!cJSON_IsObject(obj) || name == NULL || strcmp(name, rp->name) != 0 ||
	    (rp->ns[0] != '\0' && ons[0] != '\0' && strcmp(ons, rp->ns) != 0)) {
		problem(b, 1, rp->ns, "tarball entry \"%s\": the object's "
		    "metadata.name/namespace do not match its path", path);
		return 0;
	}
	if (memchr(text->data, '\0', text->len) != NULL) {
		/* a raw NUL (not JSON, but the parser takes it): store the
		 * tree as parsed, as rows are read back as C strings */
		char *printed = json_print(obj);

		buf_reset(text);
		buf_puts(text, printed);
		free(printed);
	}
	if (is_ns) {
		sqlite3_bind_text(b->nsput, 1, rp->name, -1, SQLITE_STATIC);
		sqlite3_bind_blob(b->nsput, 2, text->data, (int)text->len,
		    SQLITE_STATIC);
		if (step_done(b->nsput) < 0)
			return db_fail(b->p, err, "storing a namespace");
	}
	if (want && restore_filter_labels(b->f, obj))
		related = 0;
	else if (crd_ok)
		related = 1;
	else
		return 0;
	restore_tier_key(rp->resgroup, tier);
	sqlite3_bind_text(b->upsert, 1, tier, -1, SQLITE_STATIC);
	sqlite3_bind_text(b->upsert, 2, rp->resgroup, -1, SQLITE_STATIC);
	sqlite3_bind_text(b->upsert, 3, rp->ns, -1, SQLITE_STATIC);
	sqlite3_bind_text(b->upsert, 4, rp->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(b->upsert, 5, path, -1, SQLITE_STATIC);
	sqlite3_bind_text(b->upsert, 6, rp->version, -1, SQLITE_STATIC);
	sqlite3_bind_int(b->upsert, 7, rp->preferred);
	sqlite3_bind_blob(b->upsert, 8, text->data, (int)text->len,
	    SQLITE_STATIC);
	sqlite3_bind_int(b->upsert, 9, related);
	if (step_done(b->upsert) < 0)
		return db_fail(b->p, err, "storing an item");
	return 0;
}

/* "<resgroup>/<ns>/<name>" of rp into out (PLAN_KEY_MAX bytes). */
static void
item_key(const struct restore_path *rp, char *out)
{
	snprintf(out, PLAN_KEY_MAX, "%s/%s/%s", rp->resgroup, rp->ns,
	    rp->name);
}

/* The legacy entry kept aside, if any, into the plan. */
static int
pending_flush(struct build *b, struct cairn_err *err)
{
	struct restore_path rp;
	struct cairn_err perr = CAIRN_ERR_INIT;
	cJSON *obj;
	int rc;

	if (b->pend_path[0] == '\0')
		return 0;
	if (restore_path_parse(b->pend_path, &rp) < 0)
		abort();	/* it parsed when it was kept */
	obj = json_parse(b->pend.data != NULL ? b->pend.data : "",
	    b->pend.len, &perr);
	if (obj == NULL)
		problem(b, 1, rp.ns, "entry \"%s\": %s", b->pend_path,
		    perr.msg);
	rc = obj != NULL ? item_put(b, &rp, b->pend_path, obj, &b->pend, err) :
	    0;
	cJSON_Delete(obj);
	b->pend_path[0] = '\0';
	return rc;
}

/*
 * One entry of the tarball. An item stored at both paths (Velero's, and
 * cairn's, layout) comes as the legacy entry and then, right after it,
 * the preferred-version one, which wins: the legacy entry's bytes are kept
 * aside unparsed and dropped when its preferred copy follows, so each
 * object is parsed and stored once. Any other order is taken as it comes
 * (the kept entry goes into the plan first), with the same result.
 */
static int
build_entry(struct build *b, struct tarread *r, const struct tarread_entry *e,
    struct cairn_err *err)
{
	struct restore_path rp;
	struct cairn_err jerr = CAIRN_ERR_INIT;
	char key[PLAN_KEY_MAX];
	cJSON *obj = NULL;
	int rc, is_ns, want, crd_ok;

	if (e->verdict == TARREAD_BAD) {
		problem(b, 1, "", "tarball entry \"%s\" refused: %s", e->path,
		    e->why);
		return 0;
	}
	if (e->verdict == TARREAD_WARN) {
		problem(b, 0, "", "tarball entry \"%s\": %s", e->path, e->why);
		return 0;
	}
	rc = restore_path_parse(e->path, &rp);
	if (rc == CAIRN_ENOTFOUND)
		return 0;
	if (rc < 0) {
		problem(b, 0, "", "tarball entry \"%s\" ignored: not an item "
		    "path of format 1.1.0", e->path);
		return 0;
	}
	sqlite3_bind_text(b->pathput, 1, e->path, -1, SQLITE_STATIC);
	sqlite3_bind_text(b->pathput, 2, rp.resgroup, -1, SQLITE_STATIC);
	sqlite3_bind_text(b->pathput, 3, rp.group, -1, SQLITE_STATIC);
	sqlite3_bind_text(b->pathput, 4, rp.ns, -1, SQLITE_STATIC);
	sqlite3_bind_text(b->pathput, 5, rp.name, -1, SQLITE_STATIC);
	if (step_done(b->pathput) < 0)
		return db_fail(b->p, err, "storing an entry name");
	if (sqlite3_changes(b->p->db) == 0)
		problem(b, 1, rp.ns, "tarball entry \"%s\" appears more than "
		    "once: the last copy is used", e->path);
	is_ns = strcmp(rp.resgroup, "namespaces") == 0 && rp.ns[0] == '\0';
	want = selected_by_path(b->f, &rp);
	/* CRDs come along for the custom resources restored (item_put) */
	crd_ok = b->f->cluster != 0 && strcmp(rp.resgroup, CRD_RG) == 0 &&
	    restore_filter_resource(b->f, CRD_RG);
	if (!want && !is_ns && !crd_ok)
		return 0;
	item_key(&rp, key);
	if (!rp.preferred) {
		/* legacy path: unneeded when the preferred one is stored */
		sqlite3_bind_text(b->has_pref, 1, rp.resgroup, -1, SQLITE_STATIC);
		sqlite3_bind_text(b->has_pref, 2, rp.ns, -1, SQLITE_STATIC);
		sqlite3_bind_text(b->has_pref, 3, rp.name, -1, SQLITE_STATIC);
		rc = sqlite3_step(b->has_pref);
		sqlite3_reset(b->has_pref);
		sqlite3_clear_bindings(b->has_pref);
		if (rc == SQLITE_ROW)
			return 0;
		rc = pending_flush(b, err);
		if (rc < 0)
			return rc;
		rc = tarread_data(r, &b->pend, &jerr);
		if (rc == CAIRN_ETOOBIG) {
			problem(b, 1, rp.ns, "%s", jerr.msg);
			return 0;
		}
		if (rc < 0)
			return cairn_err_copy(err, &jerr);
		snprintf(b->pend_path, sizeof b->pend_path, "%s", e->path);
		snprintf(b->pend_key, sizeof b->pend_key, "%s", key);
		return 0;
	}
	if (b->pend_path[0] != '\0' && strcmp(b->pend_key, key) == 0)
		b->pend_path[0] = '\0';		/* its preferred copy: this */
	rc = pending_flush(b, err);
	if (rc < 0)
		return rc;
	rc = tarread_json_text(r, &obj, &b->text, &jerr);
	if (rc == CAIRN_EINVAL || rc == CAIRN_ETOOBIG) {
		problem(b, 1, rp.ns, "%s", jerr.msg);
		return 0;
	}
	if (rc < 0)
		return cairn_err_copy(err, &jerr);
	rc = item_put(b, &rp, e->path, obj, &b->text, err);
	cJSON_Delete(obj);
	return rc;
}

static int
load_tiers(struct restore_plan *p, struct cairn_err *err)
{
	sqlite3_stmt *st = NULL;
	size_t n = 0;
	int rc;

	if (sqlite3_prepare_v2(p->db, "SELECT tier, resgroup, count(*) FROM "
	    "items GROUP BY tier, resgroup ORDER BY tier, resgroup", -1, &st,
	    NULL) != SQLITE_OK)
		return db_fail(p, err, "listing tiers");
	p->tiers = xcalloc(1, sizeof *p->tiers);
	p->tier_keys = xcalloc(1, sizeof *p->tier_keys);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		p->tiers = xreallocarray(p->tiers, n + 2, sizeof *p->tiers);
		p->tier_keys = xreallocarray(p->tier_keys, n + 2,
		    sizeof *p->tier_keys);
		p->tier_counts = xreallocarray(p->tier_counts, n + 1,
		    sizeof *p->tier_counts);
		p->tier_keys[n] = xstrdup((const char *)sqlite3_column_text(st, 0));
		p->tiers[n] = xstrdup((const char *)sqlite3_column_text(st, 1));
		p->tier_counts[n] = sqlite3_column_int64(st, 2);
		p->count += p->tier_counts[n];
		n++;
		p->tiers[n] = NULL;
		p->tier_keys[n] = NULL;
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return db_fail(p, err, "listing tiers");
	p->ntiers = n;
	return 0;
}

int
restore_plan_build(struct tarread *r, const struct restore_filter *f,
    restore_problem_fn problem_fn, void *arg, struct restore_plan **out,
    struct cairn_err *err)
{
	struct restore_plan *p = xcalloc(1, sizeof *p);
	struct build b;
	struct tarread_entry e;
	int rc;

	*out = NULL;
	memset(&b, 0, sizeof b);
	b.p = p;
	b.f = f;
	b.problem = problem_fn;
	b.arg = arg;
	buf_init(&b.text, SIZE_MAX);	/* tarread_data() caps each entry */
	buf_init(&b.pend, SIZE_MAX);
	/* serialized: restore workers look items up while the main thread
	 * hands a tier out */
	if (sqlite3_open_v2("", &p->db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL) != SQLITE_OK) {
		rc = db_fail(p, err, "opening");
		goto fail;
	}
	if (sqlite3_exec(p->db, plan_schema, NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_exec(p->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
		rc = db_fail(p, err, "creating tables");
		goto fail;
	}
	if (sqlite3_prepare_v2(p->db, "SELECT 1 FROM items WHERE resgroup=?1 "
	    "AND ns=?2 AND name=?3 AND preferred=1", -1, &b.has_pref, NULL) !=
	    SQLITE_OK ||
	    sqlite3_prepare_v2(p->db, "INSERT INTO items(tier, resgroup, ns, "
	    "name, path, version, preferred, data, related) VALUES(?1,?2,?3,?4,"
	    "?5,?6,?7,?8,?9) ON CONFLICT(resgroup, ns, name) DO UPDATE SET "
	    "path=excluded.path, version=excluded.version, "
	    "preferred=excluded.preferred, data=excluded.data "
	    "WHERE excluded.preferred >= items.preferred", -1, &b.upsert,
	    NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(p->db, "INSERT OR IGNORE INTO paths(path, "
	    "resgroup, grp, ns, name) VALUES(?1,?2,?3,?4,?5)", -1, &b.pathput,
	    NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(p->db, "INSERT OR REPLACE INTO nsobjs(name, data) "
	    "VALUES(?1, ?2)", -1, &b.nsput, NULL) != SQLITE_OK) {
		rc = db_fail(p, err, "preparing");
		goto fail;
	}
	while ((rc = tarread_next(r, &e, err)) == 1) {
		rc = build_entry(&b, r, &e, err);
		if (rc < 0)
			goto fail;
	}
	if (rc == 0)
		rc = pending_flush(&b, err);
	if (rc < 0)
		goto fail;
	/* CRDs kept as related: only those of custom resources restored */
	if (sqlite3_exec(p->db, "DELETE FROM items WHERE related=1 AND name "
	    "NOT IN (SELECT resgroup FROM items WHERE related=0)", NULL, NULL,
	    NULL) != SQLITE_OK ||
	    sqlite3_exec(p->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		rc = db_fail(p, err, "commit");
		goto fail;
	}
	rc = load_tiers(p, err);
fail:
	sqlite3_finalize(b.has_pref);
	sqlite3_finalize(b.upsert);
	sqlite3_finalize(b.nsput);
	sqlite3_finalize(b.pathput);
	buf_free(&b.text);
	buf_free(&b.pend);
	if (rc == 0) {
		*out = p;
		return 0;
	}
	restore_plan_free(p);
	return rc < 0 ? rc : CAIRN_EFAIL;
}

int64_t
restore_plan_count(const struct restore_plan *p)
{
	return p->count;
}

size_t
restore_plan_ntiers(const struct restore_plan *p)
{
	return p->ntiers;
}

const char *
restore_plan_tier(const struct restore_plan *p, size_t i)
{
	return i < p->ntiers ? p->tiers[i] : NULL;
}

int64_t
restore_plan_tier_count(const struct restore_plan *p, size_t i)
{
	return i < p->ntiers ? p->tier_counts[i] : 0;
}

void
restore_row_free(struct restore_row *row)
{
	if (row == NULL)
		return;
	free(row->resgroup);
	free(row->version);
	free(row->ns);
	free(row->name);
	free(row->path);
	free(row->key);
	free(row->json);
	free(row);
}

static char *
col_text(sqlite3_stmt *st, int i)
{
	const unsigned char *t = sqlite3_column_text(st, i);
	int n = sqlite3_column_bytes(st, i);

	return xstrndup(t != NULL ? (const char *)t : "", (size_t)n);
}

int
restore_plan_foreach(struct restore_plan *p, size_t i,
    int (*fn)(void *arg, struct restore_row *row), void *arg,
    struct cairn_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc, src;

	if (i >= p->ntiers)
		return cairn_err_set(err, CAIRN_EINVAL, "no tier %zu", i);
	if (sqlite3_prepare_v2(p->db, "SELECT resgroup, version, ns, name, "
	    "path, data FROM items WHERE tier=?1 AND resgroup=?2 "
	    "ORDER BY ns, name", -1, &st, NULL) != SQLITE_OK)
		return db_fail(p, err, "reading items");
	sqlite3_bind_text(st, 1, p->tier_keys[i], -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, p->tiers[i], -1, SQLITE_STATIC);
	rc = 0;
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		struct restore_row *row = xcalloc(1, sizeof *row);

		row->resgroup = col_text(st, 0);
		row->version = col_text(st, 1);
		row->ns = col_text(st, 2);
		row->name = col_text(st, 3);
		row->path = col_text(st, 4);
		row->json = col_text(st, 5);
		row->key = xasprintf("%s/%s/%s", row->resgroup, row->ns,
		    row->name);
		rc = fn(arg, row);
		if (rc != 0)
			break;
	}
	if (rc == 0 && src != SQLITE_DONE)
		rc = db_fail(p, err, "reading items");
	sqlite3_finalize(st);
	return rc;
}

char *
restore_plan_item(struct restore_plan *p, const char *resgroup,
    const char *ns, const char *name)
{
	sqlite3_stmt *st = NULL;
	char *text = NULL;

	if (sqlite3_prepare_v2(p->db, "SELECT data FROM items WHERE "
	    "resgroup=?1 AND ns=?2 AND name=?3", -1, &st, NULL) != SQLITE_OK)
		return NULL;
	sqlite3_bind_text(st, 1, resgroup, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, ns, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, name, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		text = col_text(st, 0);
	sqlite3_finalize(st);
	return text;
}

cJSON *
restore_plan_namespace(struct restore_plan *p, const char *name)
{
	sqlite3_stmt *st = NULL;
	cJSON *obj = NULL;

	if (sqlite3_prepare_v2(p->db, "SELECT data FROM nsobjs WHERE name=?1",
	    -1, &st, NULL) != SQLITE_OK)
		return NULL;
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		obj = json_parse(sqlite3_column_blob(st, 0),
		    (size_t)sqlite3_column_bytes(st, 0), NULL);
	sqlite3_finalize(st);
	return obj;
}

/* ---- the backup's resource list ------------------------------------- */

/* Fill table rl from the resource list object. */
static int
list_load(struct restore_plan *p, const cJSON *rl, struct cairn_err *err)
{
	sqlite3_stmt *st = NULL;
	const cJSON *gvk, *it;
	int rc = 0;

	if (!cJSON_IsObject(rl))
		return cairn_err_set(err, CAIRN_EPROTO, "the resource list is "
		    "not a JSON object");
	if (sqlite3_exec(p->db, "CREATE TEMP TABLE rl(gvk TEXT NOT NULL, "
	    "grp TEXT NOT NULL, ns TEXT NOT NULL, name TEXT NOT NULL);"
	    "BEGIN", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(p->db, "INSERT INTO rl(gvk, grp, ns, name) "
	    "VALUES(?1,?2,?3,?4)", -1, &st, NULL) != SQLITE_OK)
		return db_fail(p, err, "loading the resource list");
	cJSON_ArrayForEach(gvk, rl) {
		/* "apps/v1/Deployment": group apps; "v1/Secret": core */
		const char *k = gvk->string, *s1 = strchr(k, '/');
		const char *s2 = s1 != NULL ? strchr(s1 + 1, '/') : NULL;
		size_t glen = s2 != NULL ? (size_t)(s1 - k) : 0;

		if (!cJSON_IsArray(gvk)) {
			rc = cairn_err_set(err, CAIRN_EPROTO, "the resource "
			    "list's %s is not a list", k);
			break;
		}
		cJSON_ArrayForEach(it, gvk) {
			const char *v = cJSON_IsString(it) ? it->valuestring : "";
			const char *slash = strchr(v, '/');

			sqlite3_bind_text(st, 1, k, -1, SQLITE_STATIC);
			sqlite3_bind_text(st, 2, k, (int)glen, SQLITE_STATIC);
			sqlite3_bind_text(st, 3, v, slash != NULL ?
			    (int)(slash - v) : 0, SQLITE_STATIC);
			sqlite3_bind_text(st, 4, slash != NULL ? slash + 1 : v,
			    -1, SQLITE_STATIC);
			if (step_done(st) < 0) {
				rc = db_fail(p, err, "loading the resource list");
				break;
			}
		}
		if (rc < 0)
			break;
	}
	sqlite3_finalize(st);
	if (sqlite3_exec(p->db, rc == 0 ? "COMMIT" : "ROLLBACK", NULL, NULL,
	    NULL) != SQLITE_OK && rc == 0)
		rc = db_fail(p, err, "loading the resource list");
	return rc;
}

/*
 * One side of the comparison: items of `more` (per group, namespace and
 * name) beyond those of `less`. Reports them as one error; returns their
 * number or a negative code.
 */
static int64_t
list_diff(struct restore_plan *p, const char *sql, const char *what,
    restore_problem_fn problem_fn, void *arg, struct cairn_err *err)
{
	sqlite3_stmt *st = NULL;
	struct buf b;
	int64_t n = 0;
	int src;

	if (sqlite3_prepare_v2(p->db, sql, -1, &st, NULL) != SQLITE_OK)
		return db_fail(p, err, "comparing with the resource list");
	buf_init(&b, 8192);
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		const char *ns = (const char *)sqlite3_column_text(st, 1);
		int64_t c = sqlite3_column_int64(st, 3);

		if (n < RESTORE_LIST_SHOWN)
			(void)buf_printf(&b, "%s%s %s%s%s", n > 0 ? ", " : "",
			    (const char *)sqlite3_column_text(st, 0), ns,
			    ns[0] != '\0' ? "/" : "",
			    (const char *)sqlite3_column_text(st, 2));
		n += c;
	}
	sqlite3_finalize(st);
	if (src != SQLITE_DONE) {
		buf_free(&b);
		return db_fail(p, err, "comparing with the resource list");
	}
	if (n > 0 && problem_fn != NULL) {
		char *msg = xasprintf("%s: %s%s (%lld in all)", what, buf_cstr(&b),
		    n > RESTORE_LIST_SHOWN ? ", ..." : "", (long long)n);

		problem_fn(arg, 1, "", msg);
		free(msg);
	}
	buf_free(&b);
	return n;
}

int64_t
restore_plan_check_list(struct restore_plan *p, const cJSON *rl,
    restore_problem_fn problem_fn, void *arg, struct cairn_err *err)
{
	/*
	 * Per (group, ns, name): how many items each side has, both sides
	 * in one sort; only the keys where they differ are kept (none, when
	 * the tarball is whole).
	 */
	static const char diff[] =
	    "CREATE TEMP TABLE d AS SELECT grp, ns, name, min(wa) wa, "
	    " min(wr) wr, count(DISTINCT wa) ca, count(wr) cr FROM ("
	    "  SELECT grp, ns, name, resgroup wa, NULL wr FROM paths"
	    "  UNION ALL SELECT grp, ns, name, NULL, gvk FROM rl) "
	    "GROUP BY grp, ns, name HAVING ca <> cr";
	int64_t n1, n2;
	int rc;

	rc = list_load(p, rl, err);
	if (rc < 0)
		return rc;
	if (sqlite3_exec(p->db, diff, NULL, NULL, NULL) != SQLITE_OK) {
		(void)sqlite3_exec(p->db, "DROP TABLE temp.rl", NULL, NULL,
		    NULL);
		return db_fail(p, err, "comparing with the resource list");
	}
	n1 = list_diff(p, "SELECT wr, ns, name, cr - ca FROM d WHERE cr > ca "
	    "ORDER BY 1, 2, 3", "the tarball lacks items the backup's "
	    "resource list names", problem_fn, arg, err);
	n2 = n1 < 0 ? 0 : list_diff(p, "SELECT wa, ns, name, ca - cr FROM d "
	    "WHERE ca > cr ORDER BY 1, 2, 3", "the tarball holds items the "
	    "backup's resource list does not name", problem_fn, arg, err);
	(void)sqlite3_exec(p->db, "DROP TABLE temp.rl; DROP TABLE temp.d",
	    NULL, NULL, NULL);
	if (n1 < 0)
		return n1;
	if (n2 < 0)
		return n2;
	return n1 + n2;
}
