/*
 * restore_actions.c: Velero's restore item actions, as pure functions of
 * the object (see restore_actions.h for what each does and why).
 *
 * Every rule here is one Velero applies, and for the same reason: the
 * field is the cluster's to assign (a node, a cluster IP, a controller
 * uid, a binding), and a create that carries the old value is refused
 * (a Job's generated selector: 422 from the batch strategy), binds to the
 * wrong thing (a PVC marked bind-completed whose PV has another uid goes
 * Lost), or runs something that had finished (a Succeeded pod).
 */
#include "config.h"
#include "engine/restore_actions.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonutil.h"
#include "base/mem.h"
#include "base/util.h"

#define ANN_MIRROR		"kubernetes.io/config.mirror"
#define ANN_LAST_APPLIED	"kubectl.kubernetes.io/last-applied-configuration"
#define ANN_SA_UID		"kubernetes.io/service-account.uid"
#define LABEL_AUTOMANAGED	"kube-aggregator.kubernetes.io/automanaged"

/* The key's member of obj's object at path, or NULL. Borrowed. */
static cJSON *
member(const cJSON *obj, const char *path, const char *key)
{
	cJSON *o = json_get(obj, path);

	return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) :
	    NULL;
}

static const char *
str_member(const cJSON *obj, const char *path, const char *key)
{
	const cJSON *v = member(obj, path, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Delete keys (NULL-terminated) from the object at path. */
static void
drop_keys(cJSON *obj, const char *path, const char *const *keys)
{
	cJSON *o = json_get(obj, path);

	if (!cJSON_IsObject(o))
		return;
	for (; *keys != NULL; keys++)
		cJSON_DeleteItemFromObjectCaseSensitive(o, *keys);
}

const char *
ract_skip(const char *resgroup, const cJSON *obj)
{
	if (strcmp(resgroup, "pods") == 0) {
		const char *phase = json_str_or(obj, "status.phase", "");
		const char *mirror = str_member(obj, "metadata.annotations",
		    ANN_MIRROR);

		if (strcmp(phase, "Succeeded") == 0)
			return "the pod has finished (phase Succeeded)";
		if (strcmp(phase, "Failed") == 0)
			return "the pod has finished (phase Failed)";
		if (mirror != NULL && mirror[0] != '\0')
			return "a mirror pod (the kubelet makes it from a "
			    "static pod manifest)";
	} else if (strcmp(resgroup, "jobs.batch") == 0) {
		const char *done = json_str(obj, "status.completionTime");

		if (done != NULL && done[0] != '\0')
			return "the job has completed";
	} else if (strcmp(resgroup, "apiservices.apiregistration.k8s.io") == 0) {
		if (member(obj, "metadata.labels", LABEL_AUTOMANAGED) != NULL)
			return "an APIService Kubernetes manages itself";
	}
	return NULL;
}

/* ---- pods ---------------------------------------------------------------- */

/* Is v a volume the service account admission adds to every pod? */
static int
token_volume(const cJSON *v, const char *prefix)
{
	const char *name = json_str_or(v, "name", "");
	const cJSON *src;

	if (str_has_prefix(name, prefix))
		return 1;		/* the legacy secret-based token */
	if (!str_has_prefix(name, "kube-api-access-"))
		return 0;
	cJSON_ArrayForEach(src, json_get(v, "projected.sources"))
		if (cJSON_GetObjectItemCaseSensitive(src,
		    "serviceAccountToken") != NULL)
			return 1;
	return 0;
}

/* Remove the mounts of the dropped volumes from each container of list. */
static void
drop_mounts(cJSON *spec, const char *list, char **dropped)
{
	cJSON *c, *mounts, *m, *next;

	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(spec, list)) {
		mounts = cJSON_GetObjectItemCaseSensitive(c, "volumeMounts");
		if (!cJSON_IsArray(mounts))
			continue;
		for (m = mounts->child; m != NULL; m = next) {
			next = m->next;
			if (strv_contains(dropped, json_str_or(m, "name", "")))
				cJSON_Delete(cJSON_DetachItemViaPointer(mounts, m));
		}
		if (cJSON_GetArraySize(mounts) == 0)
			cJSON_DeleteItemFromObjectCaseSensitive(c,
			    "volumeMounts");
	}
}

static void
clean_pod(cJSON *obj)
{
	cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
	cJSON *vols, *v, *next;
	const char *sa;
	char *prefix, **dropped;
	size_t n = 0;

	if (!cJSON_IsObject(spec))
		return;
	cJSON_DeleteItemFromObjectCaseSensitive(spec, "nodeName");
	cJSON_DeleteItemFromObjectCaseSensitive(spec, "priority");
	sa = json_str(spec, "serviceAccountName");
	if (sa == NULL || sa[0] == '\0')
		sa = json_str_or(spec, "serviceAccount", "default");
	prefix = xasprintf("%s-token-", sa);
	dropped = xcalloc(1, sizeof *dropped);
	vols = cJSON_GetObjectItemCaseSensitive(spec, "volumes");
	for (v = cJSON_IsArray(vols) ? vols->child : NULL; v != NULL; v = next) {
		next = v->next;
		if (!token_volume(v, prefix))
			continue;
		dropped = xreallocarray(dropped, n + 2, sizeof *dropped);
		dropped[n++] = xstrdup(json_str_or(v, "name", ""));
		dropped[n] = NULL;
		cJSON_Delete(cJSON_DetachItemViaPointer(vols, v));
	}
	if (n > 0) {
		if (cJSON_GetArraySize(vols) == 0)
			cJSON_DeleteItemFromObjectCaseSensitive(spec, "volumes");
		drop_mounts(spec, "containers", dropped);
		drop_mounts(spec, "initContainers", dropped);
		drop_mounts(spec, "ephemeralContainers", dropped);
	}
	strv_free(dropped);
	free(prefix);
}

/* ---- jobs ---------------------------------------------------------------- */

static void
clean_job(cJSON *obj)
{
	static const char *const uid_labels[] = { "controller-uid",
		"batch.kubernetes.io/controller-uid", NULL };
	cJSON *sel = json_get(obj, "spec.selector");
	cJSON *ml = json_get(obj, "spec.selector.matchLabels");
	cJSON *me = json_get(obj, "spec.selector.matchExpressions");

	drop_keys(obj, "spec.selector.matchLabels", uid_labels);
	drop_keys(obj, "spec.template.metadata.labels", uid_labels);
	/*
	 * Without manualSelector the batch strategy generates the selector
	 * itself and refuses one it did not make: leave none behind.
	 */
	if (cJSON_IsObject(sel) && !json_bool(obj, "spec.manualSelector", 0) &&
	    cJSON_GetArraySize(ml) == 0 && cJSON_GetArraySize(me) == 0)
		json_delete(obj, "spec.selector");
}

/* ---- services ------------------------------------------------------------ */

/* A node port value (number or string) as an int; 0 if none. */
static int
port_number(const cJSON *v)
{
	if (cJSON_IsNumber(v))
		return (int)v->valuedouble;
	if (cJSON_IsString(v))
		return atoi(v->valuestring);
	return 0;
}

/*
 * The node ports a user chose, from the last-applied-configuration
 * annotation (kubectl apply) or, when there is none, from managedFields
 * (server-side apply and other managers): *named gets port names,
 * *numbers the node ports of unnamed ports, *keys managedFields port keys
 * ('k:{"port":80,"protocol":"TCP"}'), hc whether healthCheckNodePort was
 * chosen; *from_applied says which source decided (Velero's order).
 */
struct explicit_ports {
	char **named, **keys;
	int *numbers;
	size_t nnum;
	int hc;
};

static void
explicit_ports(const cJSON *obj, struct explicit_ports *e, int *from_applied)
{
	const char *la = str_member(obj, "metadata.annotations",
	    ANN_LAST_APPLIED);
	cJSON *applied = NULL, *p, *mf;

	memset(e, 0, sizeof *e);
	e->named = xcalloc(1, sizeof *e->named);
	e->keys = xcalloc(1, sizeof *e->keys);
	*from_applied = 0;
	if (la != NULL)
		applied = json_parse(la, strlen(la), NULL);
	if (cJSON_IsObject(applied)) {
		size_t nn = 0;

		*from_applied = 1;
		cJSON_ArrayForEach(p, json_get(applied, "spec.ports")) {
			const char *name = json_str(p, "name");
			int np = port_number(cJSON_GetObjectItemCaseSensitive(p,
			    "nodePort"));

			if (np <= 0)
				continue;
			if (name != NULL) {
				e->named = xreallocarray(e->named, nn + 2,
				    sizeof *e->named);
				e->named[nn++] = xstrdup(name);
				e->named[nn] = NULL;
			} else {
				e->numbers = xreallocarray(e->numbers,
				    e->nnum + 1, sizeof *e->numbers);
				e->numbers[e->nnum++] = np;
			}
		}
		e->hc = port_number(json_get(applied,
		    "spec.healthCheckNodePort")) > 0;
		cJSON_Delete(applied);
		return;
	}
	cJSON_Delete(applied);
	cJSON_ArrayForEach(mf, json_get(obj, "metadata.managedFields")) {
		cJSON *fs = cJSON_GetObjectItemCaseSensitive(mf, "fieldsV1");
		cJSON *spec = cJSON_GetObjectItemCaseSensitive(fs, "f:spec");
		cJSON *ports = cJSON_GetObjectItemCaseSensitive(spec, "f:ports");
		size_t nk = 0;

		while (e->keys[nk] != NULL)
			nk++;
		if (cJSON_GetObjectItemCaseSensitive(spec,
		    "f:healthCheckNodePort") != NULL)
			e->hc = 1;
		cJSON_ArrayForEach(p, ports) {
			if (p->string == NULL ||
			    cJSON_GetObjectItemCaseSensitive(p, "f:nodePort") ==
			    NULL)
				continue;
			e->keys = xreallocarray(e->keys, nk + 2, sizeof *e->keys);
			e->keys[nk++] = xstrdup(p->string);
			e->keys[nk] = NULL;
		}
	}
}

static void
clean_service(cJSON *obj, const struct ract_opts *o)
{
	cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec"), *p;
	const char *ip = json_str(spec, "clusterIP");
	const char *type = json_str_or(spec, "type", "ClusterIP");
	struct explicit_ports e;
	int from_applied;

	if (!cJSON_IsObject(spec))
		return;
	if (ip == NULL || strcmp(ip, "None") != 0) {
		cJSON_DeleteItemFromObjectCaseSensitive(spec, "clusterIP");
		cJSON_DeleteItemFromObjectCaseSensitive(spec, "clusterIPs");
	}
	if ((o != NULL && o->preserve_node_ports) ||
	    strcmp(type, "ExternalName") == 0)
		return;
	explicit_ports(obj, &e, &from_applied);
	cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(spec, "ports")) {
		const char *name = json_str(p, "name");
		int np = port_number(cJSON_GetObjectItemCaseSensitive(p,
		    "nodePort"));
		int keep = 0;

		if (from_applied && name != NULL && name[0] != '\0') {
			keep = strv_contains(e.named, name);
		} else if (from_applied) {
			for (size_t i = 0; i < e.nnum && !keep; i++)
				keep = e.numbers[i] == np;
		} else {
			char *key = xasprintf("k:{\"port\":%d,\"protocol\":"
			    "\"%s\"}", port_number(
			    cJSON_GetObjectItemCaseSensitive(p, "port")),
			    json_str_or(p, "protocol", ""));

			keep = strv_contains(e.keys, key);
			free(key);
		}
		if (!keep)
			cJSON_DeleteItemFromObjectCaseSensitive(p, "nodePort");
	}
	if (strcmp(type, "LoadBalancer") == 0 && strcmp(json_str_or(spec,
	    "externalTrafficPolicy", ""), "Local") == 0 && !e.hc)
		cJSON_DeleteItemFromObjectCaseSensitive(spec,
		    "healthCheckNodePort");
	strv_free(e.named);
	strv_free(e.keys);
	free(e.numbers);
}

/* ---- volumes and secrets ------------------------------------------------- */

static void
clean_pv(cJSON *obj)
{
	static const char *const ref[] = { "uid", "resourceVersion", NULL };
	static const char *const ann[] = { "pv.kubernetes.io/bind-completed",
		"pv.kubernetes.io/bound-by-controller", NULL };

	drop_keys(obj, "spec.claimRef", ref);
	drop_keys(obj, "metadata.annotations", ann);
}

static void
clean_pvc(cJSON *obj)
{
	static const char *const ann[] = { "pv.kubernetes.io/bind-completed",
		"pv.kubernetes.io/bound-by-controller",
		"volume.kubernetes.io/storage-provisioner",
		"volume.beta.kubernetes.io/storage-provisioner",
		"volume.kubernetes.io/selected-node", NULL };

	drop_keys(obj, "metadata.annotations", ann);
}

static void
clean_secret(cJSON *obj)
{
	static const char *const ann[] = { ANN_SA_UID, NULL };
	static const char *const data[] = { "token", "ca.crt", NULL };

	if (strcmp(json_str_or(obj, "type", ""), RACT_SA_TOKEN_TYPE) != 0)
		return;
	drop_keys(obj, "metadata.annotations", ann);
	drop_keys(obj, "data", data);
}

void
ract_clean(const char *resgroup, cJSON *obj, const struct ract_opts *o)
{
	if (strcmp(resgroup, "pods") == 0)
		clean_pod(obj);
	else if (strcmp(resgroup, "jobs.batch") == 0)
		clean_job(obj);
	else if (strcmp(resgroup, "services") == 0)
		clean_service(obj, o);
	else if (strcmp(resgroup, "persistentvolumes") == 0)
		clean_pv(obj);
	else if (strcmp(resgroup, "persistentvolumeclaims") == 0)
		clean_pvc(obj);
	else if (strcmp(resgroup, "secrets") == 0)
		clean_secret(obj);
}
