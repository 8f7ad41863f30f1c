/*
 * volumes_plugin.c: what a plugin is told (protocol 2: the volume's
 * objects) and the API calls cairn makes on its behalf. Contract in
 * volumes_int.h; the protocol in docs/plugins.md.
 *
 * Why a channel and not credentials: plugins never hold Kubernetes
 * credentials (docs/plugins.md, "The answer to the seed design's open
 * question"). A snapshotter that drives the cluster's own snapshot API
 * (the CSI plugin) asks cairn to make each call, over the same stdin/stdout
 * it already speaks, and cairn makes it with its own client only when it
 * is in the operation's scope:
 *   - snapshot.storage.k8s.io/v1: VolumeSnapshotClasses (read),
 *     VolumeSnapshotContents (any verb: they are cluster-scoped handles of
 *     snapshots) and VolumeSnapshots in the operation's namespace (the
 *     claim's on a backup, the target claim's on a restore);
 *   - read-only: the operation's PersistentVolume, claim and StorageClass.
 * Anything else is answered 403 without reaching the API server. A
 * scoped kubeconfig would need a ServiceAccount, RBAC and a token per
 * plugin, a token that outlives the operation and can be copied; the
 * channel needs nothing installed, ends with the operation, and every call
 * is logged by cairn under its own identity.
 */
#include "config.h"
#include "engine/volumes_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "kube/kube.h"

static const struct kube_gvr pv_gvr = { "", "v1", "persistentvolumes" };
static const struct kube_gvr pvc_gvr = { "", "v1", "persistentvolumeclaims" };
static const struct kube_gvr node_gvr = { "", "v1", "nodes" };

#define SNAP_API "/apis/snapshot.storage.k8s.io/v1/"

void
vol_scope_free(struct vol_scope *sc)
{
	free(sc->namespace);
	free(sc->pv);
	free(sc->pvc);
	free(sc->storage_class);
	memset(sc, 0, sizeof *sc);
}

/*
 * An object as a plugin sees it: apiVersion, kind, the metadata that
 * says something (name, namespace, uid, labels, annotations), spec and
 * status. Owned; NULL for NULL.
 */
cJSON *
vol_plugin_object(const cJSON *o)
{
	static const char *const md_keep[] = { "name", "namespace", "uid",
	    "labels", "annotations", NULL };
	static const char *const keep[] = { "apiVersion", "kind", "spec",
	    "status", "provisioner", "parameters", "reclaimPolicy",
	    "volumeBindingMode", "allowVolumeExpansion", NULL };
	cJSON *out, *md;
	const cJSON *it;

	if (o == NULL)
		return NULL;
	out = cJSON_CreateObject();
	md = cJSON_AddObjectToObject(out, "metadata");
	for (int i = 0; md_keep[i] != NULL; i++)
		if ((it = json_get(json_get(o, "metadata"), md_keep[i])) != NULL)
			cJSON_AddItemToObject(md, md_keep[i],
			    cJSON_Duplicate(it, 1));
	for (int i = 0; keep[i] != NULL; i++)
		if ((it = cJSON_GetObjectItemCaseSensitive(o, keep[i])) != NULL)
			cJSON_AddItemToObject(out, keep[i],
			    cJSON_Duplicate(it, 1));
	return out;
}

/* GET of one object, or NULL (logged at debug when it fails). */
static cJSON *
get_or_null(const struct volumes_ctx *c, const struct kube_gvr *gvr,
    const char *ns, const char *name)
{
	struct cairn_err e = CAIRN_ERR_INIT;
	cJSON *o = NULL;

	if (name == NULL || name[0] == '\0')
		return NULL;
	if (kube_get(c->kube, gvr, ns, name, &o, &e) < 0) {
		log_debug("plugin request: %s %s: %s", gvr->resource, name, e.msg);
		return NULL;
	}
	return o;
}

/* Add key: a plugin's view of o (owned, may be NULL: JSON null). */
static void
add_object(cJSON *req, const char *key, cJSON *o)
{
	cJSON *v = vol_plugin_object(o);

	cJSON_AddItemToObject(req, key, v != NULL ? v : cJSON_CreateNull());
	cJSON_Delete(o);
}

void
vol_plugin_backup_objects(const struct volumes_ctx *c, const char *pv_name,
    cJSON *req, struct vol_scope *sc)
{
	cJSON *pv = get_or_null(c, &pv_gvr, NULL, pv_name), *pvc = NULL;
	cJSON *node = NULL;
	const char *ns = json_str(pv, "spec.claimRef.namespace");
	const char *claim = json_str(pv, "spec.claimRef.name");
	const char *scn = json_str(pv, "spec.storageClassName");
	const char *nn = json_str(req, "node");

	memset(sc, 0, sizeof *sc);
	sc->pv = xstrdup(pv_name);
	if (ns != NULL && claim != NULL) {
		sc->namespace = xstrdup(ns);
		sc->pvc = xstrdup(claim);
		pvc = get_or_null(c, &pvc_gvr, ns, claim);
	}
	if (scn == NULL)
		scn = json_str(pvc, "spec.storageClassName");
	if (scn != NULL)
		sc->storage_class = xstrdup(scn);
	add_object(req, "storageClass", scn ? get_or_null(c, &vol_sc_gvr, NULL,
	    scn) : NULL);
	add_object(req, "persistentVolume", pv);
	add_object(req, "persistentVolumeClaim", pvc);
	if (nn != NULL && nn[0] != '\0')
		node = get_or_null(c, &node_gvr, NULL, nn);
	cJSON_AddItemToObject(req, "nodeLabels", json_get(node,
	    "metadata.labels") ? cJSON_Duplicate(json_get(node,
	    "metadata.labels"), 1) : cJSON_CreateObject());
	cJSON_Delete(node);
}

/* Path of a request, without its query, split: does it name what sc allows? */
static int
in_scope(const struct vol_scope *sc, const char *method, const char *full)
{
	char path[2100], *q, ns[260], rest[2100];
	int get = strcmp(method, "GET") == 0;

	snprintf(path, sizeof path, "%s", full);
	if ((q = strchr(path, '?')) != NULL)
		*q = '\0';
	if (strstr(path, "/..") != NULL || strstr(path, "//") != NULL ||
	    strchr(path, '%') != NULL)
		return 0;
	if (strncmp(path, SNAP_API, strlen(SNAP_API)) == 0) {
		const char *p = path + strlen(SNAP_API);

		if (strncmp(p, "volumesnapshotclasses", 21) == 0 &&
		    (p[21] == '\0' || p[21] == '/'))
			return get;
		if (strncmp(p, "volumesnapshotcontents", 22) == 0 &&
		    (p[22] == '\0' || p[22] == '/'))
			return 1;
		if (sc->namespace != NULL && sscanf(p, "namespaces/%259[^/]/%2099s",
		    ns, rest) == 2 && strcmp(ns, sc->namespace) == 0 &&
		    strncmp(rest, "volumesnapshots", 15) == 0 &&
		    (rest[15] == '\0' || rest[15] == '/'))
			return 1;
		return 0;
	}
	if (!get)
		return 0;
	if (sc->pv != NULL && strncmp(path, "/api/v1/persistentvolumes/", 26) ==
	    0 && strcmp(path + 26, sc->pv) == 0)
		return 1;
	if (sc->storage_class != NULL && strncmp(path,
	    "/apis/storage.k8s.io/v1/storageclasses/", 39) == 0 &&
	    strcmp(path + 39, sc->storage_class) == 0)
		return 1;
	if (sc->namespace != NULL && sc->pvc != NULL) {
		char *want = xasprintf("/api/v1/namespaces/%s/"
		    "persistentvolumeclaims/%s", sc->namespace, sc->pvc);
		int ok = strcmp(path, want) == 0;

		free(want);
		return ok;
	}
	return 0;
}

cJSON *
vol_plugin_kube(const struct volumes_ctx *c, const struct vol_scope *sc,
    const char *what, const char *method, const char *path,
    const cJSON *body)
{
	struct cairn_err e = CAIRN_ERR_INIT;
	const struct kube_status *ks;
	cJSON *ans, *reply = NULL;
	char *text = NULL;
	int rc;

	if (sc == NULL || !in_scope(sc, method, path)) {
		log_info("%s: plugin's API call %s %s refused (outside its "
		    "scope)", what, method, path);
		return NULL;
	}
	if (body != NULL)
		text = json_print(body);
	rc = kube_request(c->kube, method, path, strcmp(method, "PATCH") == 0 ?
	    "application/merge-patch+json" : NULL, text, text ? strlen(text) : 0,
	    strcmp(method, "GET") == 0 || strcmp(method, "PUT") == 0 ||
	    strcmp(method, "DELETE") == 0, &reply, &e);
	free(text);
	ks = kube_last_status();
	ans = cJSON_CreateObject();
	if (rc == 0) {
		cJSON_AddNumberToObject(ans, "status", ks->http ? ks->http : 200);
		cJSON_AddItemToObject(ans, "body", reply != NULL ? reply :
		    cJSON_CreateNull());
		log_debug("%s: plugin's API call %s %s: %d", what, method, path,
		    ks->http);
		return ans;
	}
	cJSON_Delete(reply);
	/* the API server's Status, as a client would see it */
	cJSON_AddNumberToObject(ans, "status", ks->http ? ks->http : 503);
	json_set_str(ans, "body.kind", "Status");
	json_set_str(ans, "body.status", "Failure");
	json_set_str(ans, "body.reason", ks->reason[0] ? ks->reason :
	    "ServiceUnavailable");
	json_set_str(ans, "body.message", ks->message[0] ? ks->message : e.msg);
	json_set_int(ans, "body.code", ks->http ? ks->http : 503);
	log_info("%s: plugin's API call %s %s: %d %s", what, method, path,
	    ks->http, ks->message);
	return ans;
}
