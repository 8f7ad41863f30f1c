/*
 * test_restore_plan.c: item paths, Velero's restore order, the Restore
 * spec filters and their validation, and the spilled plan built from a
 * tarball (preferred over legacy paths, never-restored kinds, filters,
 * bad entries reported by name).
 */
#include "config.h"
#include "engine/restore_plan.h"
#include "engine/archive_read.h"
#include "base/jsonutil.h"
#include "base/mem.h"
#include "tests/unit/unit.h"

#include <archive.h>
#include <archive_entry.h>

static void
test_path_parse(void)
{
	struct restore_path p;

	CHECK_INT(restore_path_parse("resources/deployments.apps/v1-preferredversion/namespaces/ns1/web.json", &p), 0);
	CHECK_STR(p.resgroup, "deployments.apps");
	CHECK_STR(p.resource, "deployments");
	CHECK_STR(p.group, "apps");
	CHECK_STR(p.version, "v1");
	CHECK_STR(p.ns, "ns1");
	CHECK_STR(p.name, "web");
	CHECK_INT(p.preferred, 1);

	CHECK_INT(restore_path_parse("resources/customresourcedefinitions.apiextensions.k8s.io/cluster/widgets.example.io.json", &p), 0);
	CHECK_STR(p.group, "apiextensions.k8s.io");
	CHECK_STR(p.ns, "");
	CHECK_STR(p.name, "widgets.example.io");
	CHECK_INT(p.preferred, 0);

	CHECK_INT(restore_path_parse("resources/secrets/namespaces/a/s.json", &p), 0);
	CHECK_STR(p.group, "");
	CHECK_STR(p.version, "");

	CHECK_INT(restore_path_parse("metadata/version", &p), CAIRN_ENOTFOUND);
	CHECK_INT(restore_path_parse("resources/secrets/namespaces/a/s.txt", &p), CAIRN_EINVAL);
	CHECK_INT(restore_path_parse("resources/secrets/namespaces/s.json", &p), CAIRN_EINVAL);
	CHECK_INT(restore_path_parse("resources/secrets/cluster/x/s.json", &p), CAIRN_EINVAL);
	CHECK_INT(restore_path_parse("resources/secrets/-preferredversion/cluster/s.json", &p), CAIRN_EINVAL);
	CHECK_INT(restore_path_parse("resources//cluster/s.json", &p), CAIRN_EINVAL);
}

static void
test_tiers(void)
{
	char a[300], b[300];

	restore_tier_key("customresourcedefinitions.apiextensions.k8s.io", a);
	restore_tier_key("namespaces", b);
	CHECK(strcmp(a, b) < 0);
	restore_tier_key("services", a);
	restore_tier_key("deployments.apps", b);
	CHECK(strcmp(a, b) < 0);		/* high list before the rest */
	restore_tier_key("statefulsets.apps", a);
	CHECK(strcmp(b, a) < 0);		/* the rest alphabetically */
	restore_tier_key("clusters.cluster.x-k8s.io", b);
	CHECK(strcmp(a, b) < 0);		/* low list last */
	CHECK(restore_never_restored("events"));
	CHECK(restore_never_restored("nodes"));
	CHECK(restore_never_restored("restores.cairn.io"));
	CHECK(!restore_never_restored("secrets"));
}

static struct restore_filter *
filter(const char *spec_text, cJSON **errs_out)
{
	cJSON *spec = cJSON_Parse(spec_text), *errs = cJSON_CreateArray();
	struct restore_filter *f = NULL;

	restore_filter_new(spec, NULL, &f, errs);
	cJSON_Delete(spec);
	if (errs_out != NULL)
		*errs_out = errs;
	else
		cJSON_Delete(errs);
	return f;
}

static void
test_filter_validation(void)
{
	cJSON *errs;
	struct restore_filter *f;
	char *t;

	f = filter("{\"namespaceMapping\":{\"a\":\"B_bad\"}}", &errs);
	CHECK(f == NULL);
	t = cJSON_PrintUnformatted(errs);
	CHECK(strstr(t, "invalid namespace mapping a:B_bad") != NULL);
	free(t);
	cJSON_Delete(errs);

	f = filter("{\"existingResourcePolicy\":\"replace\"}", &errs);
	CHECK(f == NULL);
	CHECK_INT(cJSON_GetArraySize(errs), 1);
	cJSON_Delete(errs);

	f = filter("{\"labelSelector\":{\"matchExpressions\":[{\"key\":\"a\","
	    "\"operator\":\"Sometimes\"}]}}", &errs);
	CHECK(f == NULL);
	CHECK_INT(cJSON_GetArraySize(errs), 1);
	cJSON_Delete(errs);

	f = filter("{\"includedNamespaces\":[\"a\"],\"excludedNamespaces\":[\"a\"]}",
	    &errs);
	CHECK(f == NULL);
	cJSON_Delete(errs);

	f = filter("{\"namespaceMapping\":{\"a\":\"x\",\"b\":\"x\"}}", &errs);
	CHECK(f == NULL);
	cJSON_Delete(errs);
}

/* The text of the i-th string of a, or "". */
static const char *
nth(const cJSON *a, int i)
{
	const cJSON *x = cJSON_GetArrayItem(a, i);

	return cJSON_IsString(x) ? x->valuestring : "";
}

static void
test_spec_fields(void)
{
	cJSON *spec = cJSON_Parse("{\"backupName\":\"b\",\"scheduleName\":"
	    "\"nightly\",\"resourceModifier\":{\"kind\":\"ConfigMap\","
	    "\"name\":\"m\"},\"itemOperationTimeout\":\"1h\","
	    "\"uploaderConfig\":{\"writeSparseFiles\":true},"
	    "\"restorPVs\":true,\"resourcePolicy\":null}");
	cJSON *errs = cJSON_CreateArray(), *warns = cJSON_CreateArray();

	restore_spec_check(spec, errs, warns);
	CHECK_INT(cJSON_GetArraySize(errs), 2);
	CHECK(strstr(nth(errs, 0), "spec.resourceModifier is not supported by "
	    "cairn") != NULL);
	CHECK_STR(nth(errs, 1), "spec.restorPVs: unknown field");
	CHECK_INT(cJSON_GetArraySize(warns), 2);
	CHECK(strstr(nth(warns, 0), "spec.itemOperationTimeout is ignored") !=
	    NULL);
	CHECK(strstr(nth(warns, 1), "spec.uploaderConfig is ignored") != NULL);
	cJSON_Delete(spec);
	cJSON_Delete(errs);
	cJSON_Delete(warns);

	/* a schedule's latest backup is not picked: refused, not ignored */
	spec = cJSON_Parse("{\"scheduleName\":\"nightly\"}");
	errs = cJSON_CreateArray();
	warns = cJSON_CreateArray();
	restore_spec_check(spec, errs, warns);
	CHECK_INT(cJSON_GetArraySize(errs), 1);
	CHECK(strstr(nth(errs, 0), "spec.scheduleName is not supported by "
	    "cairn") != NULL);
	CHECK(strstr(nth(errs, 0), "--from-schedule nightly") != NULL);
	CHECK_INT(cJSON_GetArraySize(warns), 0);
	cJSON_Delete(spec);
	cJSON_Delete(errs);
	cJSON_Delete(warns);
}

static void
test_filter_semantics(void)
{
	struct restore_filter *f;
	cJSON *obj;

	f = filter("{}", NULL);
	REQUIRE(f != NULL);
	CHECK(restore_filter_ns(f, "anything"));
	CHECK(restore_filter_cluster(f, "persistentvolumes"));	/* all ns */
	CHECK(!restore_filter_status(f, "deployments.apps"));
	CHECK(!restore_filter_update(f));
	restore_filter_free(f);

	f = filter("{\"includedNamespaces\":[\"app-*\"],\"excludedNamespaces\":"
	    "[\"app-tmp\"],\"excludedResources\":[\"secrets\"],"
	    "\"namespaceMapping\":{\"app-1\":\"copy-1\"},"
	    "\"existingResourcePolicy\":\"update\","
	    "\"restoreStatus\":{\"includedResources\":[\"widgets.example.io\"]},"
	    "\"labelSelector\":{\"matchLabels\":{\"tier\":\"web\"}}}", NULL);
	REQUIRE(f != NULL);
	CHECK(restore_filter_ns(f, "app-1"));
	CHECK(!restore_filter_ns(f, "app-tmp"));
	CHECK(!restore_filter_ns(f, "kube-system"));
	CHECK(!restore_filter_resource(f, "secrets"));
	CHECK(restore_filter_resource(f, "configmaps"));
	CHECK(!restore_filter_cluster(f, "persistentvolumes"));	/* not all ns */
	CHECK_STR(restore_filter_map_ns(f, "app-1"), "copy-1");
	CHECK_STR(restore_filter_map_ns(f, "app-2"), "app-2");
	CHECK(restore_filter_update(f));
	CHECK(restore_filter_status(f, "widgets.example.io"));
	CHECK(!restore_filter_status(f, "deployments.apps"));
	obj = cJSON_Parse("{\"metadata\":{\"labels\":{\"tier\":\"web\"}}}");
	CHECK(restore_filter_labels(f, obj));
	cJSON_Delete(obj);
	obj = cJSON_Parse("{\"metadata\":{\"labels\":{\"tier\":\"db\"}}}");
	CHECK(!restore_filter_labels(f, obj));
	cJSON_Delete(obj);
	restore_filter_free(f);

	f = filter("{\"includedNamespaces\":[\"a\"],"
	    "\"includeClusterResources\":true}", NULL);
	REQUIRE(f != NULL);
	CHECK(restore_filter_cluster(f, "persistentvolumes"));
	restore_filter_free(f);
}

/* ---- plans from a tarball -------------------------------------------- */

static unsigned char tarbuf[1 << 20];

static struct archive *
tar_new(size_t *used)
{
	struct archive *a = archive_write_new();

	archive_write_set_format_pax_restricted(a);
	archive_write_add_filter_gzip(a);
	archive_write_open_memory(a, tarbuf, sizeof tarbuf, used);
	return a;
}

static void
tar_add(struct archive *a, const char *path, const char *text)
{
	struct archive_entry *e = archive_entry_new();

	archive_entry_set_pathname(e, path);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, (la_int64_t)strlen(text));
	archive_write_header(a, e);
	archive_write_data(a, text, strlen(text));
	archive_entry_free(e);
}

static void
tar_obj(struct archive *a, const char *path, const char *apiversion,
    const char *kind, const char *ns, const char *name, const char *extra)
{
	char text[2048];

	snprintf(text, sizeof text, "{\"apiVersion\":\"%s\",\"kind\":\"%s\","
	    "\"metadata\":{\"name\":\"%s\"%s%s%s%s}}", apiversion, kind, name,
	    ns ? ",\"namespace\":\"" : "", ns ? ns : "", ns ? "\"" : "",
	    extra ? extra : "");
	tar_add(a, path, text);
}

static char problems[8192];

static void
on_problem(void *arg, int error, const char *ns, const char *msg)
{
	char line[2048];

	(void)arg;
	snprintf(line, sizeof line, "%s [%s] %s\n", error ? "E" : "W", ns, msg);
	strncat(problems, line, sizeof problems - strlen(problems) - 1);
}

struct collect {
	char text[8192];
};

static int
collect_row(void *arg, struct restore_row *row)
{
	struct collect *c = arg;
	char line[512];

	snprintf(line, sizeof line, "%s %s %s\n", row->key, row->version,
	    strstr(row->json, "\"v\":\"new\"") ? "new" : "old");
	strncat(c->text, line, sizeof c->text - strlen(c->text) - 1);
	restore_row_free(row);
	return 0;
}

/*
 * Close archive a (its size lands in *used) and build its plan with spec;
 * problems holds what the build reported.
 */
static struct restore_plan *
plan_from(struct archive *a, const size_t *used, const char *spec,
    struct cairn_err *err)
{
	struct tarread_src src;
	struct tarread *r;
	struct restore_filter *f = filter(spec, NULL);
	struct restore_plan *p = NULL;

	archive_write_close(a);
	archive_write_free(a);
	problems[0] = '\0';
	tarread_src_mem(&src, tarbuf, *used);
	if (tarread_open(&src, NULL, &r, err) == 0) {
		(void)restore_plan_build(r, f, on_problem, NULL, &p, err);
		tarread_free(r);
	}
	restore_filter_free(f);
	return p;
}

static struct restore_plan *
plan_of(const char *spec, struct cairn_err *err)
{
	size_t used = 0;
	struct archive *a = tar_new(&used);

	tar_add(a, "metadata/version", "1.1.0\n");
	/* legacy first, then preferred: preferred wins */
	tar_obj(a, "resources/configmaps/namespaces/ns1/cm.json", "v1",
	    "ConfigMap", "ns1", "cm", NULL);
	tar_obj(a, "resources/configmaps/v1-preferredversion/namespaces/ns1/cm.json",
	    "v1", "ConfigMap", "ns1", "cm", ",\"v\":\"new\"");
	/* preferred first, then legacy: preferred still wins */
	tar_obj(a, "resources/deployments.apps/v1-preferredversion/namespaces/ns1/web.json",
	    "apps/v1", "Deployment", "ns1", "web",
	    ",\"v\":\"new\",\"labels\":{\"tier\":\"web\"}");
	tar_obj(a, "resources/deployments.apps/namespaces/ns1/web.json",
	    "apps/v1", "Deployment", "ns1", "web", NULL);
	/* legacy only */
	tar_obj(a, "resources/widgets.example.io/namespaces/ns2/w1.json",
	    "example.io/v1", "Widget", "ns2", "w1", NULL);
	tar_obj(a, "resources/namespaces/cluster/ns1.json", "v1", "Namespace",
	    NULL, "ns1", NULL);
	tar_obj(a, "resources/namespaces/cluster/ns2.json", "v1", "Namespace",
	    NULL, "ns2", NULL);
	tar_obj(a, "resources/customresourcedefinitions.apiextensions.k8s.io/cluster/widgets.example.io.json",
	    "apiextensions.k8s.io/v1", "CustomResourceDefinition", NULL,
	    "widgets.example.io", NULL);
	tar_obj(a, "resources/persistentvolumes/cluster/pv1.json", "v1",
	    "PersistentVolume", NULL, "pv1", NULL);
	tar_obj(a, "resources/events/namespaces/ns1/e1.json", "v1", "Event",
	    "ns1", "e1", NULL);
	tar_obj(a, "resources/nodes/cluster/n1.json", "v1", "Node", NULL, "n1",
	    NULL);
	tar_obj(a, "resources/statefulsets.apps/namespaces/ns1/db.json",
	    "apps/v1", "StatefulSet", "ns1", "db", NULL);
	tar_obj(a, "resources/secrets/namespaces/ns1/wrong.json", "v1",
	    "Secret", "ns1", "other-name", NULL);
	tar_add(a, "resources/secrets/namespaces/ns1/broken.json", "{not json");
	tar_add(a, "../escape.json", "{}");
	return plan_from(a, &used, spec, err);
}

static void
test_plan_all(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct restore_plan *p = plan_of("{}", &err);
	struct collect c = { { 0 } };
	cJSON *ns;

	REQUIRE(p != NULL);
	CHECK_INT(restore_plan_count(p), 8);
	CHECK_INT(restore_plan_ntiers(p), 7);
	CHECK_STR(restore_plan_tier(p, 0),
	    "customresourcedefinitions.apiextensions.k8s.io");
	CHECK_STR(restore_plan_tier(p, 1), "namespaces");
	CHECK_STR(restore_plan_tier(p, 2), "persistentvolumes");
	CHECK_STR(restore_plan_tier(p, 3), "configmaps");
	CHECK_STR(restore_plan_tier(p, 4), "deployments.apps");
	CHECK_STR(restore_plan_tier(p, 5), "statefulsets.apps");
	CHECK_STR(restore_plan_tier(p, 6), "widgets.example.io");
	for (size_t i = 0; i < restore_plan_ntiers(p); i++)
		CHECK_INT(restore_plan_foreach(p, i, collect_row, &c, &err), 0);
	CHECK_STR(c.text,
	    "customresourcedefinitions.apiextensions.k8s.io//widgets.example.io  old\n"
	    "namespaces//ns1  old\n"
	    "namespaces//ns2  old\n"
	    "persistentvolumes//pv1  old\n"
	    "configmaps/ns1/cm v1 new\n"
	    "deployments.apps/ns1/web v1 new\n"
	    "statefulsets.apps/ns1/db  old\n"
	    "widgets.example.io/ns2/w1  old\n");
	CHECK(strstr(problems, "E [] tarball entry \"../escape.json\" refused: "
	    "'..' in the path") != NULL);
	CHECK(strstr(problems, "E [ns1] entry \"resources/secrets/namespaces/"
	    "ns1/broken.json\"") != NULL);
	CHECK(strstr(problems, "E [ns1] tarball entry \"resources/secrets/"
	    "namespaces/ns1/wrong.json\": the object's metadata.name") != NULL);
	ns = restore_plan_namespace(p, "ns2");
	CHECK(ns != NULL);
	CHECK_STR(json_str(ns, "metadata.name"), "ns2");
	cJSON_Delete(ns);
	if (unit_cur_failed)
		fprintf(stderr, "%s\n%s", c.text, problems);
	restore_plan_free(p);
}

static void
test_plan_filtered(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct restore_plan *p;
	struct collect c = { { 0 } };
	cJSON *ns;

	p = plan_of("{\"includedNamespaces\":[\"ns1\"],"
	    "\"excludedResources\":[\"statefulsets.apps\"],"
	    "\"labelSelector\":{\"matchLabels\":{\"tier\":\"web\"}}}", &err);
	REQUIRE(p != NULL);
	for (size_t i = 0; i < restore_plan_ntiers(p); i++)
		restore_plan_foreach(p, i, collect_row, &c, &err);
	CHECK_STR(c.text, "deployments.apps/ns1/web v1 new\n");
	/* namespace objects are kept for creating namespaces anyway */
	ns = restore_plan_namespace(p, "ns1");
	CHECK(ns != NULL);
	cJSON_Delete(ns);
	restore_plan_free(p);
}

/*
 * A legacy entry is kept aside until the next entry: dropped unparsed when
 * that is its preferred copy (a broken legacy copy then says nothing),
 * put into the plan when anything else comes, or the archive ends.
 */
static void
test_plan_legacy_kept_aside(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct restore_plan *p = NULL;
	struct collect c = { { 0 } };
	size_t used = 0;
	struct archive *a = tar_new(&used);

	tar_add(a, "resources/configmaps/namespaces/ns1/a.json", "{broken");
	tar_obj(a, "resources/configmaps/v1-preferredversion/namespaces/ns1/a.json",
	    "v1", "ConfigMap", "ns1", "a", ",\"v\":\"new\"");
	/* b's preferred copy comes after c's legacy one: both kept */
	tar_obj(a, "resources/configmaps/namespaces/ns1/b.json", "v1",
	    "ConfigMap", "ns1", "b", NULL);
	tar_obj(a, "resources/configmaps/namespaces/ns1/c.json", "v1",
	    "ConfigMap", "ns1", "c", NULL);
	tar_obj(a, "resources/configmaps/v1-preferredversion/namespaces/ns1/b.json",
	    "v1", "ConfigMap", "ns1", "b", ",\"v\":\"new\"");
	/* the last entry of the archive is a legacy one */
	tar_obj(a, "resources/configmaps/namespaces/ns1/d.json", "v1",
	    "ConfigMap", "ns1", "d", NULL);
	p = plan_from(a, &used, "{}", &err);
	REQUIRE(p != NULL);
	CHECK_STR(problems, "");
	CHECK_INT(restore_plan_count(p), 4);
	CHECK_INT(restore_plan_foreach(p, 0, collect_row, &c, &err), 0);
	CHECK_STR(c.text, "configmaps/ns1/a v1 new\nconfigmaps/ns1/b v1 new\n"
	    "configmaps/ns1/c  old\nconfigmaps/ns1/d  old\n");
	restore_plan_free(p);
}

/*
 * Issue 18: duplicate entries are reported (the last copy wins, as tar
 * extraction has it); names "." and ".." are refused; the archive is
 * checked against the backup's resource list both ways.
 */
static void
test_plan_duplicates_and_list(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct restore_plan *p = NULL;
	struct collect c = { { 0 } };
	size_t used = 0;
	struct archive *a = tar_new(&used);
	cJSON *rl;

	tar_obj(a, "resources/configmaps/v1-preferredversion/namespaces/ns1/cm.json",
	    "v1", "ConfigMap", "ns1", "cm", NULL);
	tar_obj(a, "resources/configmaps/v1-preferredversion/namespaces/ns1/cm.json",
	    "v1", "ConfigMap", "ns1", "cm", ",\"v\":\"new\"");
	tar_obj(a, "resources/secrets/namespaces/ns1/cm.json", "v1", "Secret",
	    "ns1", "cm", NULL);
	tar_obj(a, "resources/deployments.apps/namespaces/ns1/web.json",
	    "apps/v1", "Deployment", "ns1", "web", NULL);
	tar_obj(a, "resources/deployments.apps/namespaces/ns1/web.json",
	    "apps/v1", "Deployment", "ns1", "web", NULL);
	tar_obj(a, "resources/persistentvolumes/cluster/pv1.json", "v1",
	    "PersistentVolume", NULL, "pv1", NULL);
	tar_obj(a, "resources/configmaps/namespaces/ns1/...json", "v1",
	    "ConfigMap", "ns1", "..", NULL);
	p = plan_from(a, &used, "{}", &err);
	REQUIRE(p != NULL);
	CHECK_INT(restore_plan_count(p), 4);
	for (size_t i = 0; i < restore_plan_ntiers(p); i++)
		restore_plan_foreach(p, i, collect_row, &c, &err);
	CHECK_STR(c.text, "persistentvolumes//pv1  old\n"
	    "secrets/ns1/cm  old\n"
	    "configmaps/ns1/cm v1 new\n"
	    "deployments.apps/ns1/web  old\n");
	CHECK_STR(problems,
	    "E [ns1] tarball entry \"resources/configmaps/v1-preferredversion/"
	    "namespaces/ns1/cm.json\" appears more than once: the last copy is "
	    "used\n"
	    "E [ns1] tarball entry \"resources/deployments.apps/namespaces/ns1/"
	    "web.json\" appears more than once: the last copy is used\n"
	    "W [] tarball entry \"resources/configmaps/namespaces/ns1/...json\" "
	    "ignored: not an item path of format 1.1.0\n");

	/* the list as the backup wrote it: no difference (a ConfigMap and a
	 * Secret of one name are two items of the core group) */
	problems[0] = '\0';
	rl = cJSON_Parse("{\"apps/v1/Deployment\":[\"ns1/web\"],"
	    "\"v1/ConfigMap\":[\"ns1/cm\"],\"v1/PersistentVolume\":[\"pv1\"],"
	    "\"v1/Secret\":[\"ns1/cm\"]}");
	CHECK_INT(restore_plan_check_list(p, rl, on_problem, NULL, &err), 0);
	CHECK_STR(problems, "");
	cJSON_Delete(rl);
	/* the list names more than the tarball holds, and less */
	rl = cJSON_Parse("{\"apps/v1/Deployment\":[\"ns1/web\",\"ns1/api\"],"
	    "\"v1/ConfigMap\":[\"ns1/cm\"],\"v1/PersistentVolume\":[\"pv1\"],"
	    "\"batch/v1/Job\":[\"ns2/j1\"]}");
	CHECK_INT(restore_plan_check_list(p, rl, on_problem, NULL, &err), 3);
	CHECK_STR(problems,
	    "E [] the tarball lacks items the backup's resource list names: "
	    "apps/v1/Deployment ns1/api, batch/v1/Job ns2/j1 (2 in all)\n"
	    "E [] the tarball holds items the backup's resource list does not "
	    "name: configmaps ns1/cm (1 in all)\n");
	cJSON_Delete(rl);
	/* not a resource list */
	rl = cJSON_Parse("[1]");
	CHECK_INT(restore_plan_check_list(p, rl, on_problem, NULL, &err),
	    CAIRN_EPROTO);
	cJSON_Delete(rl);
	if (unit_cur_failed)
		fprintf(stderr, "%s\n%s", c.text, problems);
	restore_plan_free(p);
}

int
main(void)
{
	RUN(test_path_parse);
	RUN(test_tiers);
	RUN(test_filter_validation);
	RUN(test_spec_fields);
	RUN(test_filter_semantics);
	RUN(test_plan_all);
	RUN(test_plan_filtered);
	RUN(test_plan_legacy_kept_aside);
	RUN(test_plan_duplicates_and_list);
	return unit_done();
}
