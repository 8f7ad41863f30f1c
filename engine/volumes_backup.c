/*
 * volumes_backup.c: the backup side of volume work: one
 * VolumePluginBackup per PV of the backup, run here (the built-in
 * hostpath mover or a plugin's create_snapshot) or by the node-agent of
 * the volume's node, waited for, and stored with the backup; and their
 * deletion with the backup. Contract in volumes.h.
 *
 * The backup waits for every operation of its own to end, then uploads
 * the objects as they ended in <name>-volumepluginbackups.json.gz, and
 * Velero's Volume snapshot list in <name>-volumesnapshots.json.gz. A
 * failed operation makes the backup PartiallyFailed, never Failed: the
 * objects and the other volumes are still good.
 */
#include "config.h"
#include "engine/schedule.h"
#include "engine/volumes_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "engine/bsl.h"
#include "engine/bspec.h"
#include "engine/chunks.h"
#include "kube/kube.h"
#include "storage/layout.h"
#include "storage/store.h"

static const struct kube_gvr pv_gvr = { "", "v1", "persistentvolumes" };
static const struct kube_gvr pod_gvr = { "", "v1", "pods" };

/* ---- Where and how a PV's data is copied -------------------------------- */

struct pod_find {
	const char *claim;
	char *node;
};

static int
pod_cb(void *arg, cJSON *pod)
{
	struct pod_find *f = arg;
	const cJSON *v;
	const char *node = json_str(pod, "spec.nodeName");

	if (f->node != NULL || node == NULL || node[0] == '\0')
		return 0;
	cJSON_ArrayForEach(v, json_get(pod, "spec.volumes")) {
		if (strcmp(json_str_or(v, "persistentVolumeClaim.claimName", ""),
		    f->claim) == 0) {
			f->node = xstrdup(node);
			break;
		}
	}
	return 0;
}

/* The node holding pv, or NULL when unknown. Owned. */
static char *
pv_node(struct kube *k, const cJSON *pv)
{
	struct pod_find f = { NULL, NULL };
	const char *n = vol_pv_affinity_node(pv);
	const char *ns = json_str(pv, "spec.claimRef.namespace");

	if (n != NULL)
		return xstrdup(n);
	f.claim = json_str(pv, "spec.claimRef.name");
	if (ns == NULL || f.claim == NULL)
		return NULL;
	(void)kube_list(k, &pod_gvr, ns, NULL, pod_cb, &f, NULL, NULL);
	return f.node;
}


/* Which mover: -1 built-in, >= 0 plugin index, -2 none, -3 named but missing. */
static int
pick_mover(const struct volumes *vol, const cJSON *pv, const char *type,
	const char **provider)
{
	const cJSON *ann = json_get(pv, "metadata.annotations");
	const cJSON *w = cJSON_GetObjectItemCaseSensitive(ann,
	    VOLUMES_ANN_PLUGIN);
	const char *want = cJSON_IsString(w) ? w->valuestring : NULL;
	int i;
	int builtin_ok = strcmp(type, "hostPath") == 0 ||
	    strcmp(type, "local") == 0;

	if (want != NULL && strcmp(want, VOLUMES_BUILTIN) != 0 &&
	    strcmp(want, HOSTPATH_PROVIDER) != 0) {
		i = plugin_dir_find(vol->pd, want, NULL);
		*provider = i >= 0 ? plugin_dir_name(vol->pd, (size_t)i) : want;
		return i >= 0 ? i : -3;
	}
	if (want == NULL) {
		i = plugin_dir_find(vol->pd, NULL, type);
		if (i >= 0) {
			*provider = plugin_dir_name(vol->pd, (size_t)i);
			return i;
		}
	}
	*provider = HOSTPATH_PROVIDER;
	return builtin_ok ? -1 : -2;
}

/* ---- Running a VolumePluginBackup -------------------------------------- */

static int
hp_ckpt_cb(void *arg, const struct hostpath_ckpt *ck, struct cairn_err *err)
{
	struct vop *v = arg;
	char enc[HOSTPATH_CKPT_MAX];
	cJSON *cp;

	v->done = ck->bytes_done > v->done ? ck->bytes_done : v->done;
	if (ck->bytes_uploaded > v->uploaded)
		v->uploaded = ck->bytes_uploaded;
	if (hostpath_ckpt_encode(ck, enc, sizeof enc) < 0)
		return 0;	/* too long to keep: the next part will do */
	/* Journal first, cluster second. */
	snprintf(v->ckpt, sizeof v->ckpt, "%s", enc);
	vop_journal(v, "InProgress", enc);
	if (ck->gap_from > 0) {
		/*
		 * Parts with a gap (we took the copy over): status keeps the
		 * old owner's gapless checkpoint, from which any later owner
		 * can resume (its parts are still in the upload).
		 */
		vop_set_progress(v);
		if (time_mono_us() - v->last_write < VOL_STATUS_EVERY_US)
			return 0;
		return vop_write(v, err) == CAIRN_EFENCED ? CAIRN_EFENCED : 0;
	}
	cp = cJSON_CreateObject();
	cJSON_AddStringToObject(cp, "uploadID", ck->upload_id);
	cJSON_AddNumberToObject(cp, "parts", ck->parts);
	cJSON_AddStringToObject(cp, "lastFile", ck->last_file);
	cJSON_AddNumberToObject(cp, "bytesDone", (double)ck->bytes_done);
	cJSON_AddNumberToObject(cp, "filesDone", (double)ck->files_done);
	if (ck->bytes_uploaded > 0)
		cJSON_AddNumberToObject(cp, "bytesUploaded",
		    (double)ck->bytes_uploaded);
	json_set_item(v->status, "checkpoint", cp);
	vop_set_progress(v);
	/* The status copy follows at most once a second (the journal has it). */
	if (time_mono_us() - v->last_write < VOL_STATUS_EVERY_US)
		return 0;
	if (vop_write(v, err) == CAIRN_EFENCED)
		return CAIRN_EFENCED;
	return 0;
}

/*
 * The resume point of volume v: our journal when we resume our own claim
 * (*foreign 0), else the checkpoint published in status.checkpoint
 * (*foreign 1: a takeover, or our journal lost).
 */
static int
find_resume(struct vop *v, struct hostpath_ckpt *ck, int *foreign)
{
	struct journal_volume *vols = NULL;
	size_t n = 0, i;
	int found = 0;
	const cJSON *cp;

	*foreign = 0;
	if (!v->claimed && v->jid > 0 && journal_volumes(v->c->journal,
	    v->jid, &vols, &n, NULL) == 0) {
		for (i = 0; i < n; i++)
			if (strcmp(vols[i].volume, v->volume) == 0 &&
			    hostpath_ckpt_decode(vols[i].last_file, ck) == 0)
				found = 1;
		free(vols);
	}
	if (found) {
		snprintf(v->ckpt, sizeof v->ckpt, "%s", "");
		(void)hostpath_ckpt_encode(ck, v->ckpt, sizeof v->ckpt);
		return 1;
	}
	*foreign = 1;
	cp = json_get(v->obj, "status.checkpoint");
	if (cp != NULL && json_str(cp, "uploadID") != NULL &&
	    json_str(cp, "lastFile") != NULL && json_int(cp, "parts", 0) > 0) {
		memset(ck, 0, sizeof *ck);
		snprintf(ck->upload_id, sizeof ck->upload_id, "%s",
		    json_str(cp, "uploadID"));
		snprintf(ck->last_file, sizeof ck->last_file, "%s",
		    json_str(cp, "lastFile"));
		ck->parts = (int)json_int(cp, "parts", 0);
		ck->bytes_done = (uint64_t)json_int(cp, "bytesDone", 0);
		ck->files_done = (uint64_t)json_int(cp, "filesDone", 0);
		ck->bytes_uploaded = (uint64_t)json_int(cp, "bytesUploaded", 0);
		return 1;
	}
	return 0;
}

/*
 * The copy to build on: the newest Completed VolumePluginBackup of the
 * same volume by the built-in mover, deduplicated, in the same location,
 * of another backup. *backup and *index owned, NULL when there is none.
 */
static void
find_parent(const struct vop *v, const char *location, const char *bname,
	char **backup, char **index)
{
	struct cairn_err e = CAIRN_ERR_INIT;
	const cJSON *op, *best = NULL;
	cJSON *items = NULL;

	*backup = *index = NULL;
	if (vol_list_ops(v->c, &vol_vpb_gvr, VOLUMES_LABEL_VOLUME, v->volume,
	    &items, &e) < 0) {
		log_warn("VolumePluginBackup %s: looking for an earlier copy: %s",
		    v->name, e.msg);
		return;
	}
	cJSON_ArrayForEach(op, items) {
		if (strcmp(json_str_or(op, "spec.volume", ""), v->volume) != 0 ||
		    strcmp(json_str_or(op, "spec.provider", ""),
		    HOSTPATH_PROVIDER) != 0 ||
		    strcmp(json_str_or(op, "status.phase", ""), "Completed") != 0 ||
		    strcmp(json_str_or(op, "status.backupProperties.format", ""),
		    VOL_CHUNKS_FORMAT) != 0 ||
		    strcmp(json_str_or(op, "status.backupProperties.location",
		    ""), location) != 0 ||
		    strcmp(json_str_or(op, "spec.backup", ""), bname) == 0 ||
		    json_str(op, "status.backupProperties.key") == NULL)
			continue;
		if (best == NULL || strcmp(json_str_or(op,
		    "status.completionTimestamp", ""), json_str_or(best,
		    "status.completionTimestamp", "")) > 0)
			best = op;
	}
	if (best != NULL) {
		*backup = xstrdup(json_str(best, "spec.backup"));
		*index = xstrdup(json_str(best, "status.backupProperties.key"));
	}
	cJSON_Delete(items);
}

/* backupProperties of a completed deduplicated copy. */
static void
hp_properties(struct vop *v, const char *key, const char *location,
	const struct hostpath_stats *hs)
{
	const struct { const char *k; uint64_t n; } nums[] = {
		{ "storedBytes", hs->compressed },
		{ "parts", (uint64_t)hs->parts },
		{ "uploadedBytes", hs->bytes_uploaded },
		{ "readBytes", hs->bytes_read },
		{ "reusedBytes", hs->bytes_reused },
		{ "newChunks", hs->chunks_new },
		{ "reusedChunks", hs->chunks_reused },
		{ "unchangedFiles", hs->files_unchanged },
	};
	char n[32], path[64];

	json_set_str(v->status, "snapshotID", key);
	json_set_str(v->status, "backupProperties.key", key);
	json_set_str(v->status, "backupProperties.format", VOL_CHUNKS_FORMAT);
	json_set_str(v->status, "backupProperties.location", location);
	json_set_str(v->status, "backupProperties.chunkHash", hs->hash_name);
	json_set_str(v->status, "backupProperties.parent", hs->parent);
	for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
		snprintf(n, sizeof n, "%llu", (unsigned long long)nums[i].n);
		snprintf(path, sizeof path, "backupProperties.%s", nums[i].k);
		json_set_str(v->status, path, n);
	}
}

/* The built-in mover: the volume's directory into the backup's folder. */
static int
vpb_hostpath(struct vop *v, const cJSON *obj, const cJSON *backup,
	struct cairn_err *err)
{
	const struct volumes_ctx *c = v->c;
	struct cairn_err e = CAIRN_ERR_INIT;
	struct bsl *loc = NULL;
	struct hostpath_opts ho;
	struct hostpath_stats hs;
	struct hostpath_ckpt ck;
	const char *vpath = json_str(obj, "spec.volumePath");
	const char *bname = json_str_or(obj, "spec.backup", "");
	char *key = NULL, *dir = NULL, *cdir = NULL, *parent = NULL;
	char *pindex = NULL;
	int rc;

	rc = bsl_open(c->kube, c->namespace,
	    json_str(backup, "spec.storageLocation"), &loc, &e);
	if (rc == 0) {
		key = hostpath_key(bsl_prefix(loc), bname, v->volume);
		cdir = chunks_volume_dir(bsl_prefix(loc), v->volume);
	}
	if (rc < 0 || key == NULL || cdir == NULL || vpath == NULL) {
		rc = vop_finish(v, "Failed", rc < 0 ? e.msg :
		    "no storage key or volume path", err);
		goto out;
	}
	dir = vol_host_path(c->vol, vpath);
	find_parent(v, bsl_name(loc), bname, &parent, &pindex);
	memset(&ho, 0, sizeof ho);
	ho.part_size = c->vol->c.part_size;
	ho.spool_dir = c->vol->spool_dir;
	ho.progress = vop_hp_progress;
	ho.checkpoint = hp_ckpt_cb;
	ho.fence = vop_hp_fence;
	ho.arg = v;
	ho.stop = c->stop;
	ho.chunk_dir = cdir;
	ho.backup = bname;
	ho.parent = parent;
	ho.parent_index = pindex;
	v->has_uploaded = 1;
	if (find_resume(v, &ck, &ho.resume_foreign))
		ho.resume = &ck;
	rc = hostpath_backup(bsl_store(loc), key, dir, &ho, &hs, &e);
	if (rc == CAIRN_ENOTFOUND && ho.resume != NULL && !v->fenced) {
		log_warn("VolumePluginBackup %s: cannot resume (%s): "
		    "starting again", v->name, e.msg);
		ho.resume = NULL;
		ho.resume_foreign = 0;
		v->done = 0;
		v->ckpt[0] = '\0';
		rc = hostpath_backup(bsl_store(loc), key, dir, &ho, &hs, &e);
	}
	if (rc == CAIRN_ECANCELED || rc == CAIRN_EFENCED || v->fenced) {
		cairn_err_copy(err, &e);
		if (v->fenced)
			rc = CAIRN_EFENCED;
		goto out;	/* stays InProgress: resumes later */
	}
	if (rc < 0) {
		rc = vop_finish(v, "Failed", e.msg, err);
		goto out;
	}
	v->done = hs.bytes_done;
	v->total = hs.bytes_total;
	v->files = v->files_total = hs.files_total;
	v->uploaded = hs.bytes_uploaded;
	hp_properties(v, key, bsl_name(loc), &hs);
	json_delete(v->status, "checkpoint");
	rc = vop_finish(v, "Completed", NULL, err);
out:
	bsl_free(loc);
	free(key);
	free(dir);
	free(cdir);
	free(parent);
	free(pindex);
	return rc;
}

/* An external plugin: one create_snapshot run. */
static int
vpb_plugin(struct vop *v, const cJSON *obj, const cJSON *backup, int pi,
	struct cairn_err *err)
{
	struct cairn_err e = CAIRN_ERR_INIT;
	const char *vpath = json_str(obj, "spec.volumePath");
	const char *node = vol_label_of(obj, VOLUMES_LABEL_NODE);
	cJSON *req = cJSON_CreateObject(), *res = NULL;
	struct vol_scope scope;
	char *dir = NULL;
	int rc, stopped;

	cJSON_AddStringToObject(req, "type", "create_snapshot");
	cJSON_AddStringToObject(req, "volumeName", v->volume);
	cJSON_AddStringToObject(req, "volumeType",
	    json_str_or(obj, "spec.volumeType", ""));
	if (vpath != NULL) {
		dir = vol_host_path(v->c->vol, vpath);
		cJSON_AddStringToObject(req, "volumePath", dir);
	}
	cJSON_AddStringToObject(req, "backupName",
	    json_str_or(obj, "spec.backup", ""));
	cJSON_AddStringToObject(req, "node", node != NULL ? node : "");
	vol_plugin_backup_objects(v->c, v->volume, req, &scope);
	if (json_str(backup, "spec.csiSnapshotTimeout") != NULL)
		cJSON_AddStringToObject(req, "csiSnapshotTimeout",
		    json_str(backup, "spec.csiSnapshotTimeout"));
	rc = vop_plugin(v, pi, req, "backupProperties", &scope, &res, &stopped,
	    &e);
	vol_scope_free(&scope);
	if (stopped) {
		cairn_err_copy(err, &e);
		goto out;	/* stays InProgress */
	}
	if (rc < 0 || json_str(res, "snapshotID") == NULL) {
		rc = vop_finish(v, "Failed", rc < 0 ? e.msg :
		    "plugin result without snapshotID", err);
		goto out;
	}
	json_set_str(v->status, "snapshotID", json_str(res, "snapshotID"));
	if (v->total == 0)
		v->total = v->done;
	v->done = v->total;
	rc = vop_finish(v, "Completed", NULL, err);
out:
	cJSON_Delete(req);
	cJSON_Delete(res);
	free(dir);
	return rc;
}

int
vol_vpb_run(const struct volumes_ctx *c, const cJSON *obj,
	struct cairn_err *err)
{
	struct cairn_err e = CAIRN_ERR_INIT;
	struct vop v;
	cJSON *backup = NULL;
	const char *provider = json_str_or(obj, "spec.provider", "");
	char done[JOURNAL_PHASE_MAX];
	int rc, pi;

	rc = vop_claim(&v, c, &vol_vpb_gvr, "VolumePluginBackup", obj, err);
	if (rc != 0) {
		vop_free(&v);
		return rc > 0 ? 0 : rc;
	}
	snprintf(v.volume, sizeof v.volume, "%s",
	    json_str_or(obj, "spec.volume", ""));
	rc = kube_get(c->kube, &vol_backups_gvr, c->namespace,
	    json_str_or(obj, "spec.backup", ""), &backup, &e);
	if (rc < 0) {
		rc = vop_finish(&v, "Failed", e.msg, err);
		goto out;
	}
	v.jid = vop_item_jid(c, JOURNAL_KIND_BACKUP, backup);
	if (v.claimed)
		vop_journal(&v, "InProgress", NULL);	/* forget older attempts */
	else if (vop_finished_before(&v, done, sizeof done)) {
		/* Ended before; only its status did not go through. */
		rc = vop_write_final(&v, done, err);
		goto out;
	}
	v.done = (uint64_t)json_int(v.obj, "status.progress.bytesDone", 0);
	v.total = (uint64_t)json_int(v.obj, "status.progress.totalBytes", 0);
	v.uploaded = (uint64_t)json_int(v.obj, "status.progress.bytesUploaded",
	    0);
	pi = vol_plugin_index(c->vol, provider);
	if (strcmp(provider, HOSTPATH_PROVIDER) == 0) {
		rc = vpb_hostpath(&v, obj, backup, err);
	} else if (pi < 0) {
		char *m = xasprintf("no plugin \"%s\" in the plugin directory",
		    provider);

		rc = vop_finish(&v, "Failed", m, err);
		free(m);
	} else {
		rc = vpb_plugin(&v, obj, backup, pi, err);
	}
out:
	cJSON_Delete(backup);
	vop_free(&v);
	return rc;
}

/* ---- The backup side ----------------------------------------------------- */

struct pv_walk {
	const struct volumes_ctx *c;
	const cJSON *backup;
	struct engine_fence *bf;	/* the Backup's claim */
	const struct bspec *spec;
	int rc;
	struct cairn_err err;
};

/* The VolumePluginBackup of pv for the walk's backup. Owned. */
static cJSON *
vpb_object(const struct pv_walk *w, const cJSON *pv, const char *name,
	const char *node, const char *provider)
{
	const char *pvname = json_str_or(pv, "metadata.name", "");
	const char *bname = json_str_or(w->backup, "metadata.name", "");
	const char *path, *type = vol_pv_type(pv, &path);
	/* the schedule label too: volume metrics are labelled with it */
	const char *const labels[] = { VOLUMES_LABEL_BACKUP, bname,
	    VOLUMES_LABEL_VOLUME, pvname, VOLUMES_LABEL_NODE, node,
	    SCHEDULE_LABEL, vol_label_of(w->backup, SCHEDULE_LABEL), NULL };
	cJSON *spec, *o;

	o = vol_op_new("VolumePluginBackup", name, w->c->namespace, labels,
	    &spec);
	cJSON_AddStringToObject(spec, "volume", pvname);
	cJSON_AddStringToObject(spec, "backup", bname);
	cJSON_AddStringToObject(spec, "provider", provider);
	cJSON_AddStringToObject(spec, "volumeType", type);
	if (path != NULL)
		cJSON_AddStringToObject(spec, "volumePath", path);
	if (node != NULL)
		cJSON_AddStringToObject(spec, "node", node);
	cJSON_AddStringToObject(spec, "backupUID",
	    json_str_or(w->backup, "metadata.uid", ""));
	return o;
}

/* A PV of the walk: its VolumePluginBackup, created (kept if it exists). */
static int
pv_cb(void *arg, cJSON *pv)
{
	struct pv_walk *w = arg;
	const char *ns = json_str(pv, "spec.claimRef.namespace");
	const char *pvname = json_str_or(pv, "metadata.name", "");
	const char *bname = json_str_or(w->backup, "metadata.name", "");
	const char *type, *path, *provider = NULL;
	char *name, *node;
	cJSON *o, *out = NULL;
	int rc, mover;

	if (ns == NULL || json_str(pv, "spec.claimRef.name") == NULL)
		return 0;
	if (w->spec != NULL && !bspec_ns_included(w->spec, ns))
		return 0;
	type = vol_pv_type(pv, &path);
	mover = pick_mover(w->c->vol, pv, type, &provider);
	if (mover == -2) {
		log_info("backup %s: volume %s (%s) has no plugin: skipped",
		    bname, pvname, type);
		return 0;
	}
	rc = engine_fence_check(w->bf, &w->err);
	if (rc < 0) {
		w->rc = rc;
		return rc;
	}
	name = vol_op_name(bname, pvname);
	node = mover >= 0 && !plugin_dir_node_local(w->c->vol->pd,
	    (size_t)mover) ? NULL : pv_node(w->c->kube, pv);
	o = vpb_object(w, pv, name, node, provider);
	rc = kube_create(w->c->kube, &vol_vpb_gvr, w->c->namespace, o, &out,
	    &w->err);
	if (rc == CAIRN_EEXIST)
		rc = 0;
	else if (rc == 0)
		log_info("backup %s: volume %s -> VolumePluginBackup %s "
		    "(provider %s, node %s)", bname, pvname, name, provider,
		    node ? node : "none");
	cJSON_Delete(out);
	cJSON_Delete(o);
	free(node);
	free(name);
	if (rc < 0)
		w->rc = rc;
	return rc;
}

/* Velero's volume.Snapshot list from the VPBs as they ended. Owned. */
static cJSON *
velero_snapshots(const cJSON *backup, const cJSON *vpbs)
{
	cJSON *arr = cJSON_CreateArray(), *s, *spec, *st;
	const cJSON *v;

	cJSON_ArrayForEach(v, vpbs) {
		s = cJSON_CreateObject();
		spec = cJSON_AddObjectToObject(s, "spec");
		cJSON_AddStringToObject(spec, "backupName",
		    json_str_or(backup, "metadata.name", ""));
		cJSON_AddStringToObject(spec, "backupUID",
		    json_str_or(backup, "metadata.uid", ""));
		cJSON_AddStringToObject(spec, "location",
		    json_str_or(backup, "spec.storageLocation", ""));
		cJSON_AddStringToObject(spec, "persistentVolumeName",
		    json_str_or(v, "spec.volume", ""));
		cJSON_AddStringToObject(spec, "providerVolumeID",
		    json_str_or(v, "spec.volumePath", ""));
		cJSON_AddStringToObject(spec, "volumeType",
		    json_str_or(v, "spec.volumeType", ""));
		cJSON_AddStringToObject(spec, "volumeAZ", "");
		cJSON_AddNullToObject(spec, "volumeIOPS");
		st = cJSON_AddObjectToObject(s, "status");
		cJSON_AddStringToObject(st, "providerSnapshotID",
		    json_str_or(v, "status.snapshotID", ""));
		cJSON_AddStringToObject(st, "phase",
		    strcmp(json_str_or(v, "status.phase", ""), "Completed") ==
		    0 ? "Completed" : "Failed");
		cJSON_AddItemToArray(arr, s);
	}
	return arr;
}

/*
 * Run this backup's operations that this process may run, wait for the
 * others (node-agents), fail those nobody claimed in time, until all
 * ended. *items (owned) is the last listing of them.
 */
static int
vpb_wait(const struct volumes_ctx *c, const char *bname,
	struct engine_fence *bf, cJSON **items, struct cairn_err *err)
{
	cJSON *op;
	int rc, pending;

	*items = NULL;
	for (;;) {
		if (c->stop != NULL && *c->stop)
			return cairn_err_set(err, CAIRN_ECANCELED, "stopped");
		rc = engine_fence_check(bf, err);	/* still the Backup's owner? */
		if (rc < 0)
			return rc;
		cJSON_Delete(*items);
		*items = NULL;
		rc = vol_list_ops(c, &vol_vpb_gvr, VOLUMES_LABEL_BACKUP, bname,
		    items, err);
		if (rc < 0)
			return rc;
		pending = 0;
		cJSON_ArrayForEach(op, *items) {
			const char *phase = json_str_or(op, "status.phase",
			    "New");

			if (strcmp(json_str_or(op, "spec.backup", ""), bname) !=
			    0 || vol_is_final(phase))
				continue;
			pending++;
			if (vol_may_run(c->vol, vol_label_of(op,
			    VOLUMES_LABEL_NODE))) {
				rc = vol_vpb_run(c, op, err);
				if (rc == CAIRN_ECANCELED)
					return rc;
				/* EFENCED: the operation is someone else's now */
				if (rc < 0)
					log_warn("backup %s: %s", bname,
					    err->msg);
			} else if (strcmp(phase, "New") == 0) {
				vol_expire_unclaimed(c, &vol_vpb_gvr, op, bf);
			}
		}
		if (pending == 0)
			return 0;
		time_sleep_us(VOL_WAIT_POLL_US, c->stop);
	}
}

/* Count the operations of bname in items as they ended. */
static void
vpb_count(const cJSON *items, const char *bname, struct volumes_result *res)
{
	const cJSON *op;

	cJSON_ArrayForEach(op, items) {
		if (strcmp(json_str_or(op, "spec.backup", ""), bname) != 0)
			continue;
		res->total++;
		if (strcmp(json_str_or(op, "status.phase", ""), "Completed") ==
		    0) {
			res->completed++;
		} else {
			res->failed++;
			if (res->message[0] == '\0')
				snprintf(res->message, sizeof res->message,
				    "volume %s: %s", json_str_or(op,
				    "spec.volume", "?"), json_str_or(op,
				    "status.message", "failed"));
		}
	}
}

/* One JSON document gzipped to file f of the backup, fenced by bf. */
static int
vpb_put(struct bsl *loc, const char *bname, enum layout_backup_file f,
	const cJSON *doc, struct engine_fence *bf, struct cairn_err *err)
{
	char *text = cJSON_PrintUnformatted(doc);
	char *key = bsl_backup_key(loc, bname, f);
	int rc;

	rc = engine_fence_check(bf, err);
	if (rc == 0)
		rc = store_put_gzip(bsl_store(loc), key, text, strlen(text),
		    Z_DEFAULT_COMPRESSION, err);
	free(text);
	free(key);
	return rc;
}

int
volumes_backup(const struct volumes_ctx *c, const cJSON *backup,
    const struct bspec *spec, struct volumes_result *res,
    struct cairn_err *err)
{
	struct pv_walk w;
	struct bsl *loc = NULL;
	struct engine_fence bf;
	const char *bname = json_str_or(backup, "metadata.name", "");
	cJSON *items = NULL, *snaps = NULL;
	int rc;

	memset(res, 0, sizeof *res);
	memset(&w, 0, sizeof w);
	if (c->vol == NULL)
		return cairn_err_set(err, CAIRN_EINVAL, "volume work is not "
		    "configured");
	vol_fence_init(&bf, c, &vol_backups_gvr, "Backup", backup);
	if (!cJSON_IsFalse(json_get(backup, "spec.snapshotVolumes"))) {
		w.c = c;
		w.backup = backup;
		w.spec = spec;
		w.bf = &bf;
		rc = kube_list(c->kube, &pv_gvr, NULL, NULL, pv_cb, &w, NULL,
		    &w.err);
		if (rc < 0 || w.rc < 0)
			return cairn_err_copy(err, &w.err);
	}
	/* Run ours, wait for the others (and take over the dead's). */
	rc = vpb_wait(c, bname, &bf, &items, err);
	if (rc < 0)
		goto out;
	/* Count and persist the objects as they ended. */
	vpb_count(items, bname, res);
	rc = bsl_open(c->kube, c->namespace,
	    json_str(backup, "spec.storageLocation"), &loc, err);
	if (rc < 0)
		goto out;
	rc = vpb_put(loc, bname, LAYOUT_BACKUP_VOLUMEPLUGINBACKUPS, items, &bf,
	    err);
	if (rc < 0)
		goto out;
	snaps = velero_snapshots(backup, items);
	rc = vpb_put(loc, bname, LAYOUT_BACKUP_VOLUMESNAPSHOTS, snaps, &bf, err);
	if (rc == 0 && res->total > 0)
		log_info("backup %s: %d volume(s): %d completed, %d failed",
		    bname, res->total, res->completed, res->failed);
out:
	cJSON_Delete(items);
	cJSON_Delete(snaps);
	bsl_free(loc);
	return rc;
}

/* ---- Deletion with the backup ---------------------------------------------- */

struct del_arg {
	const struct volumes_ctx *c;
	struct vol_scope scope;		/* snapshot objects only */
	const char *what;
};

static cJSON *
del_kube(void *arg, const char *method, const char *path, const cJSON *body)
{
	struct del_arg *d = arg;

	return vol_plugin_kube(d->c, &d->scope, d->what, method, path, body);
}

/* Have plugin pi delete snapshot id of stored VPB v. 0 or its error. */
static int
delete_snapshot(const struct volumes_ctx *c, int pi, const cJSON *v,
	const char *id, struct cairn_err *err)
{
	const struct volumes *vol = c->vol;
	cJSON *req = cJSON_CreateObject();
	struct plugin_cbs cbs;
	struct del_arg d;
	int rc;

	cJSON_AddStringToObject(req, "type", "delete_snapshot");
	cJSON_AddStringToObject(req, "snapshotID", id);
	cJSON_AddStringToObject(req, "volumeName",
	    json_str_or(v, "spec.volume", ""));
	cJSON_AddStringToObject(req, "backupName",
	    json_str_or(v, "spec.backup", ""));
	if (json_get(v, "status.backupProperties") != NULL)
		cJSON_AddItemToObject(req, "backupProperties", cJSON_Duplicate(
		    json_get(v, "status.backupProperties"), 1));
	if (plugin_dir_config(vol->pd, (size_t)pi) != NULL)
		cJSON_AddItemToObject(req, "config", cJSON_Duplicate(
		    plugin_dir_config(vol->pd, (size_t)pi), 1));
	memset(&cbs, 0, sizeof cbs);
	memset(&d, 0, sizeof d);
	d.c = c;
	d.what = json_str_or(v, "metadata.name", "VolumePluginBackup");
	cbs.kube = del_kube;
	cbs.arg = &d;
	rc = plugin_run(plugin_dir_path(vol->pd, (size_t)pi), req, &vol->lim,
	    &cbs, NULL, c->stop, NULL, NULL, err);
	cJSON_Delete(req);
	return rc;
}

int
volumes_delete_backup(const struct volumes_ctx *c, const cJSON *backup,
    int *failed, struct cairn_err *err)
{
	struct cairn_err e = CAIRN_ERR_INIT;
	const char *bname = json_str_or(backup, "metadata.name", "");
	cJSON *arr, *v, *items = NULL;
	const char *provider, *id;
	int pi, rc;

	*failed = 0;
	if (c->vol == NULL)
		return cairn_err_set(err, CAIRN_EINVAL, "volume work is not "
		    "configured");
	arr = vol_stored_vpbs(c, backup, &e);
	cJSON_ArrayForEach(v, arr) {
		provider = json_str_or(v, "spec.provider", "");
		id = json_str(v, "status.snapshotID");
		if (strcmp(provider, HOSTPATH_PROVIDER) == 0 || id == NULL ||
		    strcmp(json_str_or(v, "status.phase", ""), "Completed") != 0)
			continue;	/* hostpath data goes with the folder */
		pi = vol_plugin_index(c->vol, provider);
		if (pi < 0) {
			log_warn("backup %s: snapshot %s of plugin %s not "
			    "deleted: plugin not installed", bname, id,
			    provider);
			(*failed)++;
		} else if (delete_snapshot(c, pi, v, id, &e) < 0) {
			log_warn("backup %s: deleting snapshot %s: %s", bname,
			    id, e.msg);
			(*failed)++;
		} else {
			log_info("backup %s: snapshot %s deleted by %s", bname,
			    id, provider);
		}
	}
	cJSON_Delete(arr);
	/* The objects themselves. */
	rc = vol_list_ops(c, &vol_vpb_gvr, VOLUMES_LABEL_BACKUP, bname, &items,
	    err);
	if (rc < 0)
		return rc;
	cJSON_ArrayForEach(v, items) {
		if (strcmp(json_str_or(v, "spec.backup", ""), bname) != 0)
			continue;
		rc = kube_delete(c->kube, &vol_vpb_gvr, c->namespace,
		    json_str_or(v, "metadata.name", ""), NULL, NULL, &e);
		if (rc < 0 && rc != CAIRN_ENOTFOUND)
			log_warn("deleting %s: %s", json_str_or(v,
			    "metadata.name", ""), e.msg);
	}
	cJSON_Delete(items);
	return 0;
}
