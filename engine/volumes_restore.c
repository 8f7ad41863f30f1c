/*
 * volumes_restore.c: the restore side of volume work. A restore reads the
 * backup's stored VolumePluginBackups, runs one VolumePluginRestore per
 * PV (here, or by the node-agent of the PV's node) into a fresh directory
 * "<old path>-<restore name>" (hostPath/local) and points the PV at it
 * before the PV (and then its claim) is created. Contract in volumes.h.
 */
#include "config.h"
#include "engine/volumes_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/util.h"
#include "base/timeutil.h"
#include "engine/bsl.h"
#include "engine/chunks.h"
#include "kube/kube.h"

/* ---- Running a VolumePluginRestore ------------------------------------- */

/* The built-in mover: the stored archive into directory dir. */
static int
vpr_hostpath(struct vop *v, const cJSON *obj, const cJSON *backup,
	const char *dir, struct cairn_err *err)
{
	const struct volumes_ctx *c = v->c;
	struct cairn_err e = CAIRN_ERR_INIT;
	struct bsl *loc = NULL;
	struct hostpath_opts ho;
	struct hostpath_stats hs;
	char *cdir;
	int rc;

	rc = bsl_open(c->kube, c->namespace,
	    json_str(backup, "spec.storageLocation"), &loc, &e);
	if (rc < 0)
		return vop_finish(v, "Failed", e.msg, err);
	memset(&ho, 0, sizeof ho);
	/* the chunks of a deduplicated copy (an older copy has none) */
	cdir = chunks_volume_dir(bsl_prefix(loc), v->volume);
	ho.chunk_dir = cdir;
	ho.progress = vop_hp_progress;
	ho.fence = vop_hp_fence;
	ho.arg = v;
	ho.stop = c->stop;
	ho.expect_total = v->total;
	/*
	 * A takeover extracts the whole archive again into the same
	 * directory: entries already there are replaced.
	 */
	rc = hostpath_restore(bsl_store(loc),
	    json_str_or(obj, "spec.snapshotID", ""), dir, &ho, &hs, &e);
	bsl_free(loc);
	free(cdir);
	if (rc == CAIRN_ECANCELED || rc == CAIRN_EFENCED || v->fenced) {
		cairn_err_copy(err, &e);
		return v->fenced ? CAIRN_EFENCED : rc;
	}
	if (rc < 0)
		return vop_finish(v, "Failed", e.msg, err);
	v->done = v->total = hs.bytes_done > v->total ? hs.bytes_done :
	    v->total;
	json_set_str(v->status, "volumeID", json_str(obj, "spec.targetPath"));
	return vop_finish(v, "Completed", NULL, err);
}

/*
 * Protocol 2's objects of a restore request: the PV from the backup and
 * the target claim (both stored in the VPR's spec when the restore knows
 * them), its StorageClass, and the scope of the plugin's API calls.
 */
static void
vpr_objects(const struct vop *v, const cJSON *obj, cJSON *req,
	struct vol_scope *sc)
{
	const cJSON *pv = json_get(obj, "spec.persistentVolume");
	const cJSON *pvc = json_get(obj, "spec.persistentVolumeClaim");
	const char *scn = json_str(pvc, "spec.storageClassName");
	cJSON *sco = NULL;

	memset(sc, 0, sizeof *sc);
	if (scn == NULL)
		scn = json_str(pv, "spec.storageClassName");
	if (scn != NULL && kube_get(v->c->kube, &vol_sc_gvr, NULL, scn, &sco,
	    NULL) == 0)
		sc->storage_class = xstrdup(scn);
	cJSON_AddStringToObject(req, "restoreName",
	    json_str_or(obj, "spec.restoreName", ""));
	cJSON_AddItemToObject(req, "persistentVolume", pv != NULL ?
	    cJSON_Duplicate(pv, 1) : cJSON_CreateNull());
	cJSON_AddItemToObject(req, "targetPersistentVolumeClaim", pvc != NULL ?
	    cJSON_Duplicate(pvc, 1) : cJSON_CreateNull());
	cJSON_AddItemToObject(req, "storageClass", sco != NULL ?
	    vol_plugin_object(sco) : cJSON_CreateNull());
	cJSON_Delete(sco);
	cJSON_AddStringToObject(req, "node", json_str_or(obj, "spec.node", ""));
	if (json_str(pvc, "metadata.namespace") != NULL) {
		sc->namespace = xstrdup(json_str(pvc, "metadata.namespace"));
		sc->pvc = xstrdup(json_str_or(pvc, "metadata.name", ""));
	}
}

/*
 * What a claim restore's plugin answered: the dataSource the claim gets
 * (an object naming kind and name, apiGroup optional) and its size.
 */
static int
vpr_data_source(struct vop *v, const cJSON *res)
{
	const cJSON *ds = json_get(res, "dataSource");
	cJSON *o;

	if (!cJSON_IsObject(ds) || json_str(ds, "kind") == NULL ||
	    json_str(ds, "name") == NULL)
		return -1;
	o = cJSON_CreateObject();
	if (json_str(ds, "apiGroup") != NULL)
		cJSON_AddStringToObject(o, "apiGroup", json_str(ds, "apiGroup"));
	cJSON_AddStringToObject(o, "kind", json_str(ds, "kind"));
	cJSON_AddStringToObject(o, "name", json_str(ds, "name"));
	json_set_item(v->status, "dataSource", o);
	if (json_str(res, "restoreSize") != NULL)
		json_set_str(v->status, "restoreSize", json_str(res,
		    "restoreSize"));
	return 0;
}

/*
 * An external plugin: one restore_volume run into directory dir, or
 * (dir NULL) for the target claim of the VPR's spec.
 */
static int
vpr_plugin(struct vop *v, const cJSON *obj, int pi, const char *dir,
	struct cairn_err *err)
{
	struct cairn_err e = CAIRN_ERR_INIT;
	cJSON *req = cJSON_CreateObject(), *res = NULL;
	struct vol_scope scope;
	int rc, stopped;

	cJSON_AddStringToObject(req, "type", "restore_volume");
	cJSON_AddStringToObject(req, "snapshotID",
	    json_str_or(obj, "spec.snapshotID", ""));
	cJSON_AddStringToObject(req, "volumeName", v->volume);
	cJSON_AddStringToObject(req, "volumeType",
	    json_str_or(obj, "spec.volumeType", ""));
	if (dir != NULL)
		cJSON_AddStringToObject(req, "targetPath", dir);
	cJSON_AddStringToObject(req, "backupName",
	    json_str_or(obj, "spec.backupName", ""));
	if (json_get(obj, "spec.backupProperties") != NULL)
		cJSON_AddItemToObject(req, "backupProperties", cJSON_Duplicate(
		    json_get(obj, "spec.backupProperties"), 1));
	vpr_objects(v, obj, req, &scope);
	rc = vop_plugin(v, pi, req, "restoreProperties", &scope, &res,
	    &stopped, &e);
	vol_scope_free(&scope);
	if (stopped) {
		cairn_err_copy(err, &e);
		goto out;	/* stays InProgress */
	}
	if (rc == 0 && dir == NULL && vpr_data_source(v, res) < 0)
		rc = cairn_err_set(&e, CAIRN_EPROTO, "the plugin restored a "
		    "claim without naming its dataSource (kind, name)");
	if (rc < 0) {
		rc = vop_finish(v, "Failed", e.msg, err);
		goto out;
	}
	if (json_str(res, "volumeID") != NULL || dir != NULL)
		json_set_str(v->status, "volumeID", json_str(res, "volumeID") ?
		    json_str(res, "volumeID") : dir);
	v->done = v->total;
	rc = vop_finish(v, "Completed", NULL, err);
out:
	cJSON_Delete(req);
	cJSON_Delete(res);
	return rc;
}

int
vol_vpr_run(const struct volumes_ctx *c, const cJSON *obj,
	struct cairn_err *err)
{
	struct cairn_err e = CAIRN_ERR_INIT;
	struct vop v;
	cJSON *backup = NULL, *restore = NULL;
	const char *provider = json_str_or(obj, "spec.provider", "");
	const char *target = json_str(obj, "spec.targetPath");
	char *dir = NULL;
	char done[JOURNAL_PHASE_MAX];
	int rc, pi;

	rc = vop_claim(&v, c, &vol_vpr_gvr, "VolumePluginRestore", obj, err);
	if (rc != 0) {
		vop_free(&v);
		return rc > 0 ? 0 : rc;
	}
	snprintf(v.volume, sizeof v.volume, "%s",
	    json_str_or(obj, "spec.volume", ""));
	if (kube_get(c->kube, &vol_restores_gvr, c->namespace,
	    json_str_or(obj, "spec.restoreName", ""), &restore, NULL) == 0)
		v.jid = vop_item_jid(c, JOURNAL_KIND_RESTORE, restore);
	if (vop_finished_before(&v, done, sizeof done)) {
		/* Ended before; only its status did not go through. */
		rc = vop_write_final(&v, done, err);
		goto out;
	}
	v.total = (uint64_t)json_int(obj, "spec.expectBytes", 0);
	rc = kube_get(c->kube, &vol_backups_gvr, c->namespace,
	    json_str_or(obj, "spec.backupName", ""), &backup, &e);
	if (rc < 0 || (target == NULL && (strcmp(provider,
	    HOSTPATH_PROVIDER) == 0 ||
	    json_get(obj, "spec.persistentVolumeClaim") == NULL))) {
		rc = vop_finish(&v, "Failed", rc < 0 ? e.msg :
		    "no target path or claim", err);
		goto out;
	}
	if (target != NULL)
		dir = vol_host_path(c->vol, target);
	pi = vol_plugin_index(c->vol, provider);
	if (strcmp(provider, HOSTPATH_PROVIDER) == 0) {
		rc = vpr_hostpath(&v, obj, backup, dir, err);
	} else if (pi < 0) {
		char *m = xasprintf("no plugin \"%s\" in the plugin directory",
		    provider);

		rc = vop_finish(&v, "Failed", m, err);
		free(m);
	} else {
		rc = vpr_plugin(&v, obj, pi, dir, err);
	}
out:
	cJSON_Delete(backup);
	cJSON_Delete(restore);
	free(dir);
	vop_free(&v);
	return rc;
}

/* ---- The restore side ----------------------------------------------------- */

/* The Completed VPB of volume pv in the backup's stored file; owned or NULL. */
static cJSON *
stored_vpb(const struct volumes_ctx *c, const cJSON *backup, const char *pv,
    struct cairn_err *err)
{
	cJSON *arr = vol_stored_vpbs(c, backup, err), *v, *found = NULL;

	cJSON_ArrayForEach(v, arr) {
		if (strcmp(json_str_or(v, "spec.volume", ""), pv) == 0 &&
		    strcmp(json_str_or(v, "status.phase", ""), "Completed") ==
		    0) {
			found = cJSON_Duplicate(v, 1);
			break;
		}
	}
	cJSON_Delete(arr);
	return found;
}

/* The VolumePluginRestore of pv from its stored VPB. Owned. */
static cJSON *
vpr_object(const struct volumes_ctx *c, const cJSON *restore,
	const char *backup_name, const cJSON *pv, const cJSON *vpb,
	const char *name, const char *target, const char *node)
{
	const char *rname = json_str_or(restore, "metadata.name", "");
	const char *pvname = json_str_or(pv, "metadata.name", "");
	const char *path, *type = vol_pv_type(pv, &path);
	cJSON *pvo;
	const char *const labels[] = { VOLUMES_LABEL_RESTORE, rname,
	    VOLUMES_LABEL_BACKUP, backup_name, VOLUMES_LABEL_VOLUME, pvname,
	    VOLUMES_LABEL_NODE, node, NULL };
	cJSON *spec, *o;

	o = vol_op_new("VolumePluginRestore", name, c->namespace, labels,
	    &spec);
	cJSON_AddStringToObject(spec, "snapshotID",
	    json_str_or(vpb, "status.snapshotID", ""));
	cJSON_AddStringToObject(spec, "backupName", backup_name);
	cJSON_AddStringToObject(spec, "restoreName", rname);
	cJSON_AddStringToObject(spec, "provider",
	    json_str_or(vpb, "spec.provider", ""));
	cJSON_AddStringToObject(spec, "volumeType", type);
	cJSON_AddStringToObject(spec, "volumeAZ", "");
	cJSON_AddStringToObject(spec, "volume", pvname);
	if (target != NULL)
		cJSON_AddStringToObject(spec, "targetPath", target);
	if (node != NULL)
		cJSON_AddStringToObject(spec, "node", node);
	if (json_get(pv, "spec") != NULL) {	/* a PV, not a name only */
		pvo = vol_plugin_object(pv);
		json_delete(pvo, "status");
		cJSON_AddItemToObject(spec, "persistentVolume", pvo);
	}
	cJSON_AddNumberToObject(spec, "expectBytes",
	    (double)json_int(vpb, "status.progress.totalBytes", 0));
	if (json_get(vpb, "status.backupProperties") != NULL)
		cJSON_AddItemToObject(spec, "backupProperties", cJSON_Duplicate(
		    json_get(vpb, "status.backupProperties"), 1));
	return o;
}

/*
 * Run VPR name here if we may, else wait for the node-agent, until it
 * ended; *cur (owned) is it as it ended.
 */
static int
vpr_wait(const struct volumes_ctx *c, const char *name, struct engine_fence *rf,
	cJSON **cur, struct cairn_err *err)
{
	const char *phase;
	int rc;

	for (;;) {
		cJSON_Delete(*cur);
		*cur = NULL;
		rc = kube_get(c->kube, &vol_vpr_gvr, c->namespace, name, cur,
		    err);
		if (rc < 0)
			return rc;
		phase = json_str_or(*cur, "status.phase", "New");
		if (vol_is_final(phase))
			return 0;
		rc = engine_fence_check(rf, err);	/* still the Restore's owner? */
		if (rc < 0)
			return rc;
		if (vol_may_run(c->vol, vol_label_of(*cur,
		    VOLUMES_LABEL_NODE))) {
			rc = vol_vpr_run(c, *cur, err);
			if (rc == CAIRN_ECANCELED)
				return rc;
			/* EFENCED: the operation is someone else's now */
			if (rc < 0 && rc != CAIRN_EFENCED)
				log_warn("%s: %s", name, err->msg);
			if (rc < 0 || strcmp(phase, "InProgress") == 0)
				time_sleep_us(VOL_WAIT_POLL_US, c->stop);
			continue;
		}
		if (strcmp(phase, "New") == 0)
			vol_expire_unclaimed(c, &vol_vpr_gvr, *cur, rf);
		if (c->stop != NULL && *c->stop)
			return cairn_err_set(err, CAIRN_ECANCELED, "stopped");
		time_sleep_us(VOL_WAIT_POLL_US, c->stop);
	}
}

/*
 * Create VPR o (named name; kept when it exists: resume) for the Restore
 * fenced by rf, run or wait for it; *cur (owned) is it as it ended.
 * CAIRN_EFAIL with its message when it did not complete.
 */
static int
vpr_do(const struct volumes_ctx *c, cJSON *o, const char *name,
	const char *pvname, struct engine_fence *rf, cJSON **cur,
	struct cairn_err *err)
{
	int rc;

	rc = engine_fence_check(rf, err);
	if (rc == 0)
		rc = kube_create(c->kube, &vol_vpr_gvr, c->namespace, o, NULL,
		    err);
	if (rc < 0 && rc != CAIRN_EEXIST)
		return rc;
	rc = vpr_wait(c, name, rf, cur, err);
	if (rc < 0)
		return rc;
	if (strcmp(json_str_or(*cur, "status.phase", ""), "Completed") != 0)
		return cairn_err_set(err, CAIRN_EFAIL, "volume %s: %s", pvname,
		    json_str_or(*cur, "status.message", "restore failed"));
	return 0;
}

/* The backup's stored VPB of pvname (owned), or NULL with err set. */
static cJSON *
backup_vpb(const struct volumes_ctx *c, const char *backup_name,
	const char *pvname, struct cairn_err *err)
{
	struct cairn_err e = CAIRN_ERR_INIT;
	cJSON *backup = NULL, *vpb;

	if (kube_get(c->kube, &vol_backups_gvr, c->namespace, backup_name,
	    &backup, err) < 0)
		return NULL;
	vpb = stored_vpb(c, backup, pvname, &e);
	cJSON_Delete(backup);
	if (vpb == NULL)
		cairn_err_set(err, CAIRN_ENOTFOUND, "backup %s holds no data "
		    "for volume %s", backup_name, pvname);
	return vpb;
}

/* Is vpb's copy restored through its claim (a provisioning snapshotter)? */
static int
by_claim(const struct volumes_ctx *c, const cJSON *vpb)
{
	const char *type = json_str_or(vpb, "spec.volumeType", "");
	int pi = vol_plugin_index(c->vol, json_str_or(vpb, "spec.provider",
	    HOSTPATH_PROVIDER));

	return pi >= 0 && strcmp(type, "hostPath") != 0 &&
	    strcmp(type, "local") != 0 &&
	    plugin_dir_protocol(c->vol->pd, (size_t)pi) >= 2;
}

int
volumes_restore_pv(const struct volumes_ctx *c, const cJSON *restore,
    const char *backup_name, cJSON *pv, struct cairn_err *err)
{
	cJSON *vpb, *o, *cur = NULL;
	const char *rname = json_str_or(restore, "metadata.name", "");
	const char *pvname = json_str_or(pv, "metadata.name", "");
	const char *type, *path;
	char *name = NULL, *target = NULL, *node = NULL;
	struct engine_fence rf;
	int rc;

	if (c->vol == NULL)
		return cairn_err_set(err, CAIRN_EINVAL, "volume work is not "
		    "configured");
	vol_fence_init(&rf, c, &vol_restores_gvr, "Restore", restore);
	vpb = backup_vpb(c, backup_name, pvname, err);
	if (vpb == NULL)
		return err->code;
	type = vol_pv_type(pv, &path);
	if (path == NULL && by_claim(c, vpb)) {
		rc = VOLUMES_BY_CLAIM;	/* volumes_restore_claim() does it */
		goto out;
	}
	if (path == NULL) {
		rc = cairn_err_set(err, CAIRN_EUNSUPPORTED, "volume %s: type %s "
		    "has no path to restore into", pvname, type);
		goto out;
	}
	target = xasprintf("%s-%s", path, rname);
	node = vol_pv_affinity_node(pv) ? xstrdup(vol_pv_affinity_node(pv)) :
	    xstrdup(vol_label_of(vpb, VOLUMES_LABEL_NODE));
	name = vol_op_name(rname, pvname);
	o = vpr_object(c, restore, backup_name, pv, vpb, name, target, node);
	rc = vpr_do(c, o, name, pvname, &rf, &cur, err);
	cJSON_Delete(o);
	if (rc < 0)
		goto out;
	/* Point the PV at the restored data. */
	json_set_str(pv, strcmp(type, "hostPath") == 0 ? "spec.hostPath.path" :
	    "spec.local.path", json_str_or(cur, "status.volumeID", target));
out:
	cJSON_Delete(cur);
	cJSON_Delete(vpb);
	free(name);
	free(target);
	free(node);
	return rc;
}

/* pvc gets the restored dataSource instead of its old volume. */
static void
claim_from(cJSON *pvc, const cJSON *vpr)
{
	static const char *const ann[] = { "pv.kubernetes.io/bind-completed",
	    "pv.kubernetes.io/bound-by-controller",
	    "volume.beta.kubernetes.io/storage-provisioner",
	    "volume.kubernetes.io/storage-provisioner",
	    "volume.kubernetes.io/selected-node", NULL };
	const char *size = json_str(vpr, "status.restoreSize");
	const char *req = json_str(pvc, "spec.resources.requests.storage");
	uint64_t want = 0, have = 0;

	json_set_item(pvc, "spec.dataSource", cJSON_Duplicate(json_get(vpr,
	    "status.dataSource"), 1));
	json_delete(pvc, "spec.dataSourceRef");
	json_delete(pvc, "spec.volumeName");
	for (int i = 0; ann[i] != NULL; i++)
		cJSON_DeleteItemFromObjectCaseSensitive(json_get(pvc,
		    "metadata.annotations"), ann[i]);
	/* a claim smaller than the snapshot cannot be provisioned from it */
	if (size != NULL && str_parse_quantity(size, &want) == 0 &&
	    (req == NULL || (str_parse_quantity(req, &have) == 0 &&
	    have < want)))
		json_set_str(pvc, "spec.resources.requests.storage", size);
}

int
volumes_restore_claim(const struct volumes_ctx *c, const cJSON *restore,
    const char *backup_name, const char *pv_name, cJSON *pvc,
    struct cairn_err *err)
{
	struct cairn_err e = CAIRN_ERR_INIT;
	const char *rname = json_str_or(restore, "metadata.name", "");
	cJSON *vpb, *o, *pvo, *pvco, *cur = NULL;
	struct engine_fence rf;
	char *name;
	int rc;

	if (c->vol == NULL)
		return cairn_err_set(err, CAIRN_EINVAL, "volume work is not "
		    "configured");
	vpb = backup_vpb(c, backup_name, pv_name, &e);
	if (vpb == NULL || !by_claim(c, vpb)) {
		cJSON_Delete(vpb);
		return cairn_err_set(err, CAIRN_ENOTFOUND, "volume %s is not "
		    "restored through its claim", pv_name);
	}
	vol_fence_init(&rf, c, &vol_restores_gvr, "Restore", restore);
	pvo = cJSON_CreateObject();
	json_set_str(pvo, "metadata.name", pv_name);
	name = vol_op_name(rname, pv_name);
	o = vpr_object(c, restore, backup_name, pvo, vpb, name, NULL, NULL);
	json_set_str(o, "spec.volumeType", json_str_or(vpb, "spec.volumeType",
	    ""));
	pvco = vol_plugin_object(pvc);
	json_delete(pvco, "status");
	json_set_item(o, "spec.persistentVolumeClaim", pvco);
	rc = vpr_do(c, o, name, pv_name, &rf, &cur, err);
	cJSON_Delete(o);
	cJSON_Delete(pvo);
	if (rc == 0)
		claim_from(pvc, cur);
	cJSON_Delete(cur);
	cJSON_Delete(vpb);
	free(name);
	return rc;
}
