/*
 * test_engine_hooks.c: the hook spec (validation), which hooks a pod
 * gets (annotations win, legacy keys, spec order, filters), the JSON
 * form kept in status.checkpoint, and Backup spec fields cairn refuses
 * or warns about.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/util.h"
#include "engine/bspec.h"
#include "engine/hooks.h"
#include "tests/unit/unit.h"

static int
contains(const cJSON *a, const char *needle)
{
	const cJSON *e;

	cJSON_ArrayForEach(e, a)
		if (strstr(e->valuestring, needle) != NULL)
			return 1;
	return 0;
}

static struct hook_spec *
spec(const char *json, int restore, cJSON **errs_out)
{
	cJSON *h = cJSON_Parse(json);
	cJSON *errs = cJSON_CreateArray();
	struct hook_spec *s = NULL;

	hook_spec_parse(h, restore, &s, errs);
	cJSON_Delete(h);
	if (errs_out != NULL)
		*errs_out = errs;
	else
		cJSON_Delete(errs);
	return s;
}

static void
test_spec_validation(void)
{
	cJSON *errs;
	struct hook_spec *s;

	s = spec("{\"resources\":[{\"name\":\"q\",\"pre\":[{\"exec\":"
	    "{\"command\":[],\"onError\":\"Maybe\",\"timeout\":\"soon\"}}],"
	    "\"post\":[{\"run\":{}}],\"labelSelector\":{\"matchExpressions\":"
	    "[{\"key\":\"a\",\"operator\":\"Near\"}]}},{\"pre\":[]}],"
	    "\"extra\":1}", 0, &errs);
	CHECK(s == NULL);
	CHECK(contains(errs, "spec.hooks.resources[0].pre[0].exec.command: "
	    "Required value"));
	CHECK(contains(errs, "spec.hooks.resources[0].pre[0].exec.onError: "
	    "Unsupported value"));
	CHECK(contains(errs, "spec.hooks.resources[0].pre[0].exec.timeout: "
	    "invalid duration \"soon\""));
	CHECK(contains(errs, "spec.hooks.resources[0].post[0].run: unknown "
	    "field"));
	CHECK(contains(errs, "spec.hooks.resources[0].labelSelector"));
	CHECK(contains(errs, "spec.hooks.resources[1].name: Required value"));
	CHECK(contains(errs, "spec.hooks.extra: unknown field"));
	cJSON_Delete(errs);

	/* a restore's fields are not a backup's */
	s = spec("{\"resources\":[{\"name\":\"r\",\"postHooks\":[{\"exec\":"
	    "{\"command\":[\"x\"],\"timeout\":\"1s\"}}]}]}", 1, &errs);
	CHECK(s == NULL);
	CHECK(contains(errs, "exec.timeout: unknown field"));
	cJSON_Delete(errs);

	s = spec("{\"resources\":[{\"name\":\"r\",\"postHooks\":[{\"init\":"
	    "{\"initContainers\":[{\"name\":\"i\",\"image\":\"busybox\"}],"
	    "\"timeout\":\"2m\"}},{\"exec\":{\"command\":[\"x\"],"
	    "\"execTimeout\":\"1s\",\"waitTimeout\":\"2m\",\"waitForReady\":"
	    "true}}]}]}", 1, &errs);
	REQUIRE(s != NULL);
	CHECK_INT(cJSON_GetArraySize(errs), 0);
	CHECK_INT(s->rules[0].nexec, 1);
	CHECK_INT(s->rules[0].exec[0].timeout_us, 1000000);
	CHECK_INT(s->rules[0].exec[0].wait_timeout_us, 120000000);
	CHECK(s->rules[0].exec[0].wait_for_ready);
	CHECK_INT(cJSON_GetArraySize(s->rules[0].init), 1);
	CHECK(contains(s->warnings, "init.timeout is not enforced"));
	hook_spec_free(s);
	cJSON_Delete(errs);

	s = spec("null", 0, NULL);
	REQUIRE(s != NULL);
	CHECK_INT(s->nrules, 0);
	hook_spec_free(s);
}

static void
test_pod_hooks(void)
{
	struct hook_spec *s = spec("{\"resources\":["
	    "{\"name\":\"data\",\"includedNamespaces\":[\"shop*\"],"
	    "\"labelSelector\":{\"matchLabels\":{\"tier\":\"data\"}},"
	    "\"pre\":[{\"exec\":{\"command\":[\"a\"]}},{\"exec\":"
	    "{\"container\":\"side\",\"command\":[\"b\"],\"onError\":"
	    "\"Continue\",\"timeout\":\"5s\"}}],"
	    "\"post\":[{\"exec\":{\"command\":[\"c\"]}}]},"
	    "{\"name\":\"notpods\",\"includedResources\":[\"deployments\"],"
	    "\"pre\":[{\"exec\":{\"command\":[\"never\"]}}]},"
	    "{\"name\":\"excluded\",\"excludedNamespaces\":[\"shop\"],"
	    "\"pre\":[{\"exec\":{\"command\":[\"never\"]}}]},"
	    "{\"name\":\"all\",\"includedResources\":[\"pods\"],"
	    "\"pre\":[{\"exec\":{\"command\":[\"d\"]}}]}]}", 0, NULL);
	cJSON *pod = cJSON_Parse("{\"metadata\":{\"name\":\"p\",\"labels\":"
	    "{\"tier\":\"data\"}}}");
	cJSON *ann = cJSON_Parse("{\"metadata\":{\"name\":\"q\",\"labels\":"
	    "{\"tier\":\"data\"},\"annotations\":{"
	    "\"pre.hook.backup.velero.io/command\":\"[\\\"sh\\\",\\\"-c\\\","
	    "\\\"x\\\"]\",\"pre.hook.backup.velero.io/on-error\":\"Continue\","
	    "\"pre.hook.backup.velero.io/timeout\":\"later\","
	    "\"hook.backup.velero.io/command\":\"legacy\"}}}");
	cJSON *legacy = cJSON_Parse("{\"metadata\":{\"name\":\"r\","
	    "\"annotations\":{\"hook.backup.velero.io/command\":\"/freeze\","
	    "\"hook.backup.velero.io/container\":\"db\"}}}");
	cJSON *warns = cJSON_CreateArray();
	struct hook_list l = { 0 };

	REQUIRE(s != NULL && pod != NULL && ann != NULL && legacy != NULL);
	hook_list_for_pod(s, pod, "shop", HOOK_PRE, &l, warns);
	REQUIRE(l.n == 3);
	CHECK_STR(l.v[0].command[0], "a");
	CHECK_STR(l.v[0].name, "data");
	CHECK(l.v[0].container == NULL && l.v[0].on_error == HOOK_FAIL);
	CHECK_STR(l.v[1].container, "side");
	CHECK(l.v[1].on_error == HOOK_CONTINUE);
	CHECK_INT(l.v[1].timeout_us, 5000000);
	CHECK_STR(l.v[2].command[0], "d");
	hook_list_for_pod(s, pod, "shop", HOOK_POST, &l, warns);
	REQUIRE(l.n == 1);
	CHECK_STR(l.v[0].command[0], "c");
	/* another namespace: only "all" applies, "excluded" too */
	hook_list_for_pod(s, pod, "other", HOOK_PRE, &l, warns);
	CHECK_INT(l.n, 2);
	/* annotations win over the spec; a bad timeout is a warning */
	hook_list_for_pod(s, ann, "shop", HOOK_PRE, &l, warns);
	REQUIRE(l.n == 1);
	CHECK_STR(l.v[0].name, HOOK_NAME_ANNOTATION);
	CHECK_STR(l.v[0].command[2], "x");
	CHECK(l.v[0].on_error == HOOK_CONTINUE);
	CHECK_INT(l.v[0].timeout_us, 0);
	CHECK(contains(warns, "pre.hook.backup.velero.io/timeout"));
	/* ...but only for their phase */
	hook_list_for_pod(s, ann, "shop", HOOK_POST, &l, warns);
	REQUIRE(l.n == 1);
	CHECK_STR(l.v[0].command[0], "c");
	/* legacy unphased keys are pre hooks; one word, no JSON */
	hook_list_for_pod(NULL, legacy, "x", HOOK_PRE, &l, warns);
	REQUIRE(l.n == 1);
	CHECK_STR(l.v[0].command[0], "/freeze");
	CHECK(l.v[0].command[1] == NULL);
	CHECK_STR(l.v[0].container, "db");
	hook_list_for_pod(NULL, legacy, "x", HOOK_POST, &l, warns);
	CHECK_INT(l.n, 0);
	hook_list_free(&l);
	cJSON_Delete(pod);
	cJSON_Delete(ann);
	cJSON_Delete(legacy);
	cJSON_Delete(warns);
	hook_spec_free(s);
}

static void
test_json_round_trip(void)
{
	char *cmd[] = { "sh", "-c", "echo 'a b'", NULL };
	struct hook_exec h = { "freeze", "db", cmd, HOOK_CONTINUE, 7000000, 0,
	    0 }, back;
	cJSON *j = hook_exec_json(&h);

	REQUIRE(hook_exec_from_json(j, &back) == 0);
	CHECK_STR(back.name, "freeze");
	CHECK_STR(back.container, "db");
	CHECK_STR(back.command[2], "echo 'a b'");
	CHECK(back.command[3] == NULL);
	CHECK(back.on_error == HOOK_CONTINUE);
	CHECK_INT(back.timeout_us, 7000000);
	hook_exec_clear(&back);
	cJSON_Delete(j);
	j = cJSON_Parse("{\"command\":[]}");
	CHECK(hook_exec_from_json(j, &back) == CAIRN_EINVAL);
	cJSON_Delete(j);
}

static void
test_backup_fields(void)
{
	cJSON *b = cJSON_Parse("{\"spec\":{\"includedNamespaces\":[\"a\"],"
	    "\"resourcePolicy\":{\"kind\":\"configmap\",\"name\":\"p\"},"
	    "\"includeNamespaces\":[\"typo\"],\"snapshotMoveData\":true,"
	    "\"excludedNamespaceScopedResources\":[\"x\"]}}");
	cJSON *errs = cJSON_CreateArray();
	struct bspec *s = NULL;

	REQUIRE(bspec_parse(b, &s, errs) == 0);
	CHECK(s == NULL);
	CHECK(contains(errs, "spec.resourcePolicy is not supported by cairn"));
	CHECK(contains(errs, "spec.includeNamespaces: unknown field"));
	CHECK(contains(errs, "spec.snapshotMoveData is not supported"));
	CHECK(contains(errs, "spec.excludedNamespaceScopedResources is not "
	    "supported"));
	cJSON_Delete(b);
	cJSON_Delete(errs);

	/* unset values ask for nothing; set ones are warned about */
	b = cJSON_Parse("{\"spec\":{\"snapshotMoveData\":false,"
	    "\"resourcePolicy\":null,\"volumeSnapshotLocations\":[\"x\"],"
	    "\"defaultVolumesToFsBackup\":false,\"itemOperationTimeout\":\"1m\","
	    "\"metadata\":{\"labels\":{\"a\":\"b\"}},\"datamover\":\"\","
	    "\"volumeGroupSnapshotLabelKey\":\"group\",\"backupType\":\"Full\"}}");
	errs = cJSON_CreateArray();
	REQUIRE(bspec_parse(b, &s, errs) == 0);
	REQUIRE(s != NULL);
	CHECK_INT(cJSON_GetArraySize(errs), 0);
	REQUIRE(strv_len(s->warnings) == 5);
	CHECK(strstr(s->warnings[0], "spec.volumeSnapshotLocations is "
	    "ignored") != NULL);
	CHECK(strstr(s->warnings[1], "spec.itemOperationTimeout is "
	    "ignored") != NULL);
	CHECK(strstr(s->warnings[2], "spec.volumeGroupSnapshotLabelKey is "
	    "ignored") != NULL);
	CHECK(strstr(s->warnings[3], "spec.backupType is ignored") != NULL);
	CHECK(strstr(s->warnings[4], "spec.metadata.labels is ignored") !=
	    NULL);
	bspec_free(s);
	cJSON_Delete(b);
	cJSON_Delete(errs);
}

static void
test_ordered_resources(void)
{
	static char *empty[] = { NULL };
	struct kube_resource pods = { 0 }, deps = { 0 };
	cJSON *b = cJSON_Parse("{\"spec\":{\"orderedResources\":{"
	    "\"pods\":\" db/primary , db/replica-0,,db/replica-1 \","
	    "\"deployments.apps\":\"web/front\"}}}");
	cJSON *errs = cJSON_CreateArray();
	struct bspec *s = NULL;
	char *const *o;

	pods.group = (char *)"";
	pods.resource = (char *)"pods";
	deps.group = (char *)"apps";
	deps.resource = (char *)"deployments";
	pods.short_names = deps.short_names = empty;
	REQUIRE(bspec_parse(b, &s, errs) == 0 && s != NULL);
	o = bspec_ordered(s, &pods);
	REQUIRE(o != NULL);
	CHECK_STR(o[0], "db/primary");
	CHECK_STR(o[1], "db/replica-0");
	CHECK_STR(o[2], "db/replica-1");
	CHECK(o[3] == NULL);
	o = bspec_ordered(s, &deps);
	REQUIRE(o != NULL);
	CHECK_STR(o[0], "web/front");
	deps.group = (char *)"extensions";
	CHECK(bspec_ordered(s, &deps) == NULL);
	bspec_free(s);
	cJSON_Delete(b);
	cJSON_Delete(errs);

	b = cJSON_Parse("{\"spec\":{\"orderedResources\":{\"pods\":"
	    "\"a/b/c,/x\",\"secrets\":[\"x\"]}}}");
	errs = cJSON_CreateArray();
	REQUIRE(bspec_parse(b, &s, errs) == 0);
	CHECK(s == NULL);
	CHECK(contains(errs, "spec.orderedResources.pods: \"a/b/c\" is not"));
	CHECK(contains(errs, "spec.orderedResources.pods: \"/x\" is not"));
	CHECK(contains(errs, "spec.orderedResources.secrets must be a string"));
	cJSON_Delete(b);
	cJSON_Delete(errs);
}

int
main(void)
{
	RUN(test_spec_validation);
	RUN(test_pod_hooks);
	RUN(test_json_round_trip);
	RUN(test_backup_fields);
	RUN(test_ordered_resources);
	return unit_done();
}
