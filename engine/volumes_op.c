/*
 * volumes_op.c: the volume module's configuration and one volume
 * operation: its claim, takeover, fenced status writes, progress, journal
 * rows and plugin runs. Contract in volumes.h; how the module's files
 * share the work in volumes_int.h.
 *
 * Design. A volume operation is an object of its own with the same
 * ownership protocol as a Backup: created by the backup (or restore)
 * engine in phase New, claimed by a conditional status write
 * (phase=InProgress, status.claim{holder,attempt}) by whichever process
 * may run it (the node-agent of the node named in its cairn.io/node
 * label, or the server when no node is known), then updated only by its
 * holder, every write conditional on the resourceVersion it read. A 409
 * whose re-read shows another holder stops the operation (fencing).
 * Before every status write and storage write the process's Lease is
 * asked (volumes_ctx.may_write, the same hook as engine_env.may_write);
 * after a pause or a new holding period the object is re-read first
 * (struct engine_fence, engine/claim.h). An InProgress operation whose
 * holder's Lease expired (the configuration's lease_watch, refreshed at
 * most every 250 ms when a decision needs it) is claimed again with
 * attempt+1 through engine_claim() and resumed from status.checkpoint:
 * the hostpath mover keeps the parts the checkpoint vouches for and
 * leaves every later number of the upload, plus one, unused (hostpath.h,
 * "Takeover").
 *
 * Progress from the mover (hostpath) or the plugin (progress lines) goes
 * to status.progress at most once a second; the hostpath mover's
 * checkpoints (after each stored part) go first to the journal
 * (journal_volume_set: bytes, files, and the encoded checkpoint in
 * last_file), then to status.checkpoint. A restarted process with the
 * same server id finds its InProgress operations (volumes_poll, or the
 * backup engine calling volumes_backup again) and resumes the copy after
 * the last checkpointed file.
 *
 * Configuration (struct volumes, volumes_open()) travels in every
 * volumes_ctx: nothing here is global.
 */
#include "config.h"
#include "engine/schedule.h"
#include "engine/volumes_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/metrics.h"
#include "base/timeutil.h"
#include "base/util.h"
#include "engine/bsl.h"
#include "engine/lease.h"
#include "kube/kube.h"
#include "kube/label.h"
#include "storage/store.h"

const struct kube_gvr vol_vpb_gvr = { "cairn.io", "v1", "volumepluginbackups" };
const struct kube_gvr vol_vpr_gvr = { "cairn.io", "v1", "volumepluginrestores" };
const struct kube_gvr vol_backups_gvr = { "cairn.io", "v1", "backups" };
const struct kube_gvr vol_restores_gvr = { "cairn.io", "v1", "restores" };
const struct kube_gvr vol_sc_gvr = { "storage.k8s.io", "v1", "storageclasses" };

/* ---- The configuration -------------------------------------------------- */

int
volumes_open(const struct volumes_config *c, struct volumes **out,
	struct cairn_err *err)
{
	struct volumes *v = xcalloc(1, sizeof *v);
	int rc;

	*out = NULL;
	v->c = *c;
	v->plugin_dir = c->plugin_dir ? xstrdup(c->plugin_dir) : NULL;
	v->node_name = c->node_name && c->node_name[0] ?
	    xstrdup(c->node_name) : NULL;
	v->volume_root = xstrdup(c->volume_root ? c->volume_root : "");
	v->spool_dir = c->spool_dir ? xstrdup(c->spool_dir) : NULL;
	v->c.plugin_dir = v->plugin_dir;
	v->c.node_name = v->node_name;
	v->c.volume_root = v->volume_root;
	v->c.spool_dir = v->spool_dir;
	if (v->c.claim_timeout_us <= 0)
		v->c.claim_timeout_us = VOL_CLAIM_TIMEOUT_US;
	if (v->c.lease_duration_us <= 0)
		v->c.lease_duration_us = VOL_LEASE_DEFAULT_US;
	v->lim.idle_us = c->plugin_timeout_us;
	pthread_mutex_init(&v->watch_mu, NULL);
	if (v->plugin_dir != NULL && v->plugin_dir[0] != '\0') {
		rc = plugin_dir_open(v->plugin_dir, &v->lim, &v->pd, err);
		if (rc < 0) {
			volumes_free(v);
			return rc;
		}
	}
	*out = v;
	return 0;
}

void
volumes_free(struct volumes *v)
{
	if (v == NULL)
		return;
	lease_watch_free(v->watch);
	pthread_mutex_destroy(&v->watch_mu);
	plugin_dir_free(v->pd);
	free(v->plugin_dir);
	free(v->node_name);
	free(v->volume_root);
	free(v->spool_dir);
	free(v);
}

void
volumes_ctx_env(struct volumes_ctx *c, const struct engine_env *env,
	int64_t jid)
{
	memset(c, 0, sizeof *c);
	c->kube = env->kube;
	c->journal = env->journal;
	c->namespace = env->namespace;
	c->server_id = env->server_id;
	c->jid = jid;
	c->stop = env->stop;
	c->may_write = env->may_write;
	c->may_write_arg = env->may_write_arg;
	c->vol = env->volumes;
}

/*
 * The cairn_volume_* metrics: event "attempt" at a claim, else the final
 * phase (Completed, Failed) with the bytes this process moved.
 */
static void
vol_count(int restore, const cJSON *obj, const char *event, int64_t bytes)
{
	const char *kind = restore ? "restore" : "backup";
	const char *sched = vol_label_of(obj, SCHEDULE_LABEL);
	/* Velero's volume_snapshot_* carry the schedule label */
	const char *const *sl = METRIC_LABELS(sched != NULL ? sched : "");

	if (strcmp(event, "attempt") == 0) {
		if (restore)
			metrics_inc(METRIC_VOLUME_RESTORE_ATTEMPT_TOTAL, NULL);
		else
			metrics_inc(METRIC_VOLUME_SNAPSHOT_ATTEMPT_TOTAL, sl);
		metrics_add(METRIC_VOLUME_OPERATIONS_IN_PROGRESS, 1,
		    METRIC_LABELS(kind));
		return;
	}
	metrics_add(METRIC_VOLUME_OPERATIONS_IN_PROGRESS, -1,
	    METRIC_LABELS(kind));
	if (bytes > 0)
		metrics_add(METRIC_VOLUME_BYTES_TOTAL, (double)bytes,
		    METRIC_LABELS(kind));
	if (restore)
		metrics_inc(strcmp(event, "Completed") == 0 ?
		    METRIC_VOLUME_RESTORE_SUCCESS_TOTAL :
		    METRIC_VOLUME_RESTORE_FAILURE_TOTAL, NULL);
	else
		metrics_inc(strcmp(event, "Completed") == 0 ?
		    METRIC_VOLUME_SNAPSHOT_SUCCESS_TOTAL :
		    METRIC_VOLUME_SNAPSHOT_FAILURE_TOTAL, sl);
}

/* ---- Small helpers ------------------------------------------------------ */

/* "<a>-<b>" as an object name (<= 253 bytes, hashed when longer). Owned. */
char *
vol_op_name(const char *a, const char *b)
{
	char *n = xasprintf("%s-%s", a, b);
	uint32_t h = 2166136261u;
	const char *p;

	if (strlen(n) <= VOL_NAME_MAX)
		return n;
	for (p = n; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	n[VOL_NAME_MAX - 9] = '\0';
	p = xasprintf("%s-%08x", n, h);
	free(n);
	return (char *)(uintptr_t)p;
}

const char *
vol_label_of(const cJSON *obj, const char *key)
{
	const cJSON *l = json_get(obj, "metadata.labels");
	const cJSON *v = l ? cJSON_GetObjectItemCaseSensitive(l, key) : NULL;

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Volume type and (borrowed) host path of a PV. */
const char *
vol_pv_type(const cJSON *pv, const char **path)
{
	*path = NULL;
	if ((*path = json_str(pv, "spec.hostPath.path")) != NULL)
		return "hostPath";
	if ((*path = json_str(pv, "spec.local.path")) != NULL)
		return "local";
	if (json_get(pv, "spec.csi") != NULL)
		return "csi";
	if (json_get(pv, "spec.nfs") != NULL)
		return "nfs";
	return "other";
}

/* The node of a PV's required node affinity on kubernetes.io/hostname. */
const char *
vol_pv_affinity_node(const cJSON *pv)
{
	const cJSON *terms, *t, *exprs, *e, *vals;

	terms = json_get(pv, "spec.nodeAffinity.required.nodeSelectorTerms");
	cJSON_ArrayForEach(t, terms) {
		exprs = cJSON_GetObjectItemCaseSensitive(t, "matchExpressions");
		cJSON_ArrayForEach(e, exprs) {
			vals = cJSON_GetObjectItemCaseSensitive(e, "values");
			if (strcmp(json_str_or(e, "key", ""),
			    "kubernetes.io/hostname") == 0 &&
			    strcmp(json_str_or(e, "operator", ""), "In") == 0 &&
			    cJSON_GetArraySize(vals) == 1 &&
			    cJSON_IsString(cJSON_GetArrayItem(vals, 0)))
				return cJSON_GetArrayItem(vals, 0)->valuestring;
		}
	}
	return NULL;
}

cJSON *
vol_op_new(const char *kind, const char *name, const char *ns,
	const char *const *labels, cJSON **spec)
{
	cJSON *o = cJSON_CreateObject(), *md, *l;
	char *lv;

	cJSON_AddStringToObject(o, "apiVersion", "cairn.io/v1");
	cJSON_AddStringToObject(o, "kind", kind);
	md = cJSON_AddObjectToObject(o, "metadata");
	cJSON_AddStringToObject(md, "name", name);
	cJSON_AddStringToObject(md, "namespace", ns);
	l = cJSON_AddObjectToObject(md, "labels");
	for (; labels[0] != NULL; labels += 2) {
		if (labels[1] == NULL)
			continue;
		lv = kube_label_value(labels[1]);
		cJSON_AddStringToObject(l, labels[0], lv);
		free(lv);
	}
	*spec = cJSON_AddObjectToObject(o, "spec");
	return o;
}

int
vol_plugin_index(const struct volumes *vol, const char *provider)
{
	if (provider == NULL || strcmp(provider, HOSTPATH_PROVIDER) == 0)
		return -1;
	return plugin_dir_find(vol->pd, provider, NULL);
}

/* "/root" + "/path", or the path itself when no root is set. Owned. */
char *
vol_host_path(const struct volumes *vol, const char *p)
{
	if (vol->volume_root == NULL || vol->volume_root[0] == '\0')
		return xstrdup(p);
	return xasprintf("%s%s%s", vol->volume_root, p[0] == '/' ? "" : "/",
	    p);
}

int
vol_may_run(const struct volumes *vol, const char *node)
{
	if (vol->node_name == NULL)
		return node == NULL || node[0] == '\0';
	return node != NULL && strcmp(node, vol->node_name) == 0;
}

int
vol_is_final(const char *phase)
{
	return phase != NULL && (strcmp(phase, "Completed") == 0 ||
	    strcmp(phase, "Failed") == 0 ||
	    strcmp(phase, "PartiallyFailed") == 0);
}

/* ---- Fencing and takeover ---------------------------------------------- */

/*
 * Is the process `holder` gone: its Lease released, unchanged for its
 * leaseDurationSeconds on our observation clock, or missing for a lease
 * duration (lease_watch_expired(), the server's takeover test)?
 */
int
vol_holder_gone(const struct volumes_ctx *c, const char *holder)
{
	struct volumes *vol = c->vol;
	struct cairn_err e = CAIRN_ERR_INIT;
	int64_t now = time_mono_us();
	int gone;

	if (holder == NULL || holder[0] == '\0')
		return 1;	/* released at a clean shutdown */
	pthread_mutex_lock(&vol->watch_mu);
	if (vol->watch == NULL || vol->watch_kube != c->kube) {
		lease_watch_free(vol->watch);
		vol->watch = lease_watch_new(c->kube, c->namespace,
		    vol->c.lease_duration_us);
		vol->watch_kube = c->kube;
		vol->watch_at = 0;
	}
	if (vol->watch_at == 0 || now - vol->watch_at >= VOL_WATCH_EVERY_US) {
		if (lease_watch_refresh(vol->watch, &e) == 0)
			vol->watch_at = now;
		else
			log_warn("volume work: listing Leases: %s", e.msg);
	}
	gone = lease_watch_expired(vol->watch, holder);
	pthread_mutex_unlock(&vol->watch_mu);
	return gone;
}

/*
 * The fence of one claim (engine/claim.h): the Lease's write epoch, and
 * the claim (holder, attempt, as found on obj) that must still stand on
 * the object when the Lease lapsed or its epoch changed since the last
 * check. An empty holder: the Lease only. The first check re-reads.
 */
void
vol_fence_init(struct engine_fence *f, const struct volumes_ctx *c,
    const struct kube_gvr *gvr, const char *what, const cJSON *obj)
{
	const char *name = json_str_or(obj, "metadata.name", "");

	engine_fence_init(f, c->kube, gvr, c->namespace, name, "%s %s", what,
	    name);
	engine_fence_claim(f, json_str_or(obj, "status.claim.holder", ""),
	    json_int(obj, "status.claim.attempt", 0), NULL);
	f->may_write = c->may_write;
	f->may_write_arg = c->may_write_arg;
	f->stop = c->stop;
}

/* ---- One operation: claim, status writes, progress ----------------------- */

/* v->status with the RV of v->obj, fenced by our claim (v->f). */
int
vop_write(struct vop *v, struct cairn_err *err)
{
	int rc;

	if (v->fenced)
		v->f.fenced = 1;
	rc = engine_status_write(&v->f, &v->obj, v->status, err);
	if (v->f.fenced)
		v->fenced = 1;
	if (rc == 0)
		v->last_write = time_mono_us();
	return rc;
}

void
vop_free(struct vop *v)
{
	cJSON_Delete(v->obj);
	cJSON_Delete(v->status);
	free(v->name);
}

/*
 * Claim obj: New (attempt 1), ours after a restart (resume, same
 * attempt), or InProgress under a holder whose Lease is gone (takeover,
 * attempt+1). The claim write is engine_claim(), conditional on the
 * resourceVersion read, and only made while our Lease is held. 0: ours
 * now (v filled), 1: not ours to run (someone else, final, or no Lease
 * now), < 0: error.
 */
int
vop_claim(struct vop *v, const struct volumes_ctx *c,
    const struct kube_gvr *gvr, const char *what, const cJSON *obj,
    struct cairn_err *err)
{
	const char *phase = json_str_or(obj, "status.phase", "New");
	const char *holder = json_str_or(obj, "status.claim.holder", "");
	struct engine_env env;
	char ts[TIME_STR_MAX], *worker;
	cJSON *body, *out = NULL;
	int rc, ep = 0, takeover = 0;

	memset(v, 0, sizeof *v);
	v->c = c;
	v->gvr = gvr;
	v->what = what;
	v->name = xstrdup(json_str_or(obj, "metadata.name", ""));
	v->obj = cJSON_Duplicate(obj, 1);
	v->status = cJSON_Duplicate(json_get(obj, "status"), 1);
	if (v->status == NULL)
		v->status = cJSON_CreateObject();
	vol_fence_init(&v->f, c, gvr, what, obj);
	if (vol_is_final(phase))
		return 1;
	if (strcmp(phase, "InProgress") == 0 &&
	    strcmp(holder, c->server_id) == 0) {
		v->attempt = json_int(obj, "status.claim.attempt", 1);
		log_info("%s %s: resuming (attempt %lld)", what, v->name,
		    (long long)v->attempt);
		vol_count(gvr == &vol_vpr_gvr, v->obj, "attempt", 0);
		return 0;	/* the fence re-reads before the first write */
	}
	if (strcmp(phase, "InProgress") == 0) {
		if (!vol_holder_gone(c, holder))
			return 1;	/* alive: its work */
		takeover = 1;
	}
	/* No Lease, no claim. */
	if (c->may_write != NULL && (ep = c->may_write(c->may_write_arg)) == 0)
		return 1;
	v->attempt = json_int(obj, "status.claim.attempt", 0) + 1;
	body = cJSON_Duplicate(v->obj, 1);
	if (!takeover) {
		time_format_rfc3339(time_now_us(), ts);
		json_set_str(body, "status.startTimestamp", ts);
	}
	memset(&env, 0, sizeof env);
	env.kube = c->kube;
	env.journal = c->journal;
	env.server_id = c->server_id;
	env.namespace = c->namespace;
	worker = xasprintf("%s/volumes", c->server_id);
	rc = engine_claim(&env, gvr, body, worker, v->attempt, &out, err);
	free(worker);
	cJSON_Delete(body);
	if (rc == CAIRN_ECONFLICT) {
		cJSON_Delete(out);
		return 1;	/* someone else won */
	}
	if (rc < 0) {
		cJSON_Delete(out);
		return rc;
	}
	cJSON_Delete(v->obj);
	v->obj = out;
	cJSON_Delete(v->status);
	v->status = cJSON_Duplicate(json_get(out, "status"), 1);
	vol_fence_init(&v->f, c, gvr, what, out);
	v->f.epoch = ep;
	v->claimed = 1;
	if (takeover)
		log_info("%s %s: taken over from %s (attempt %lld)", what,
		    v->name, holder[0] ? holder : "(released)",
		    (long long)v->attempt);
	else
		log_info("%s %s: claimed (attempt %lld)", what, v->name,
		    (long long)v->attempt);
	vol_count(gvr == &vol_vpr_gvr, v->obj, "attempt", 0);
	return 0;
}

void
vop_set_progress(struct vop *v)
{
	json_set_int(v->status, "progress.totalBytes", (int64_t)v->total);
	json_set_int(v->status, "progress.bytesDone", (int64_t)v->done);
	if (v->has_uploaded)
		json_set_int(v->status, "progress.bytesUploaded",
		    (int64_t)v->uploaded);
}

void
vop_journal(struct vop *v, const char *phase, const char *ckpt)
{
	struct journal_volume jv;
	struct cairn_err e = CAIRN_ERR_INIT;

	if (v->jid <= 0 || v->c->journal == NULL)
		return;
	memset(&jv, 0, sizeof jv);
	snprintf(jv.volume, sizeof jv.volume, "%s", v->volume);
	snprintf(jv.phase, sizeof jv.phase, "%s", phase);
	jv.bytes_done = (int64_t)v->done;
	jv.bytes_total = (int64_t)v->total;
	jv.files_done = (int64_t)v->files;
	jv.files_total = (int64_t)v->files_total;
	/* Progress rows keep the last checkpoint: it is the resume point. */
	snprintf(jv.last_file, sizeof jv.last_file, "%s",
	    ckpt != NULL ? ckpt : v->ckpt);
	if (journal_volume_set(v->c->journal, v->jid, &jv, &e) < 0)
		log_warn("%s %s: journal: %s", v->what, v->name, e.msg);
}

/* Progress from the mover or the plugin; writes status at most 1/s. */
void
vop_progress(struct vop *v, uint64_t done, uint64_t total, uint64_t files,
    uint64_t ftotal, int force)
{
	if (done < v->done)
		done = v->done;		/* never backwards */
	v->done = done;
	v->total = total > done ? total : done;
	v->files = files;
	v->files_total = ftotal;
	if (!force && time_mono_us() - v->last_write < VOL_STATUS_EVERY_US)
		return;
	vop_set_progress(v);
	if (v->wrc == 0) {
		v->wrc = vop_write(v, &v->werr);
		if (v->wrc == CAIRN_EFENCED)
			return;
		if (v->wrc < 0) {	/* a transient API error: go on */
			log_warn("%s %s: progress write: %s", v->what, v->name,
			    v->werr.msg);
			v->wrc = 0;
		}
	}
	vop_journal(v, "InProgress", NULL);
}

int
vop_finish(struct vop *v, const char *phase, const char *message,
    struct cairn_err *err)
{
	char ts[TIME_STR_MAX];

	vop_journal(v, phase, NULL);
	json_set_str(v->status, "phase", phase);
	time_format_rfc3339(time_now_us(), ts);
	json_set_str(v->status, "completionTimestamp", ts);
	if (message != NULL)
		json_set_str(v->status, "message", message);
	vop_set_progress(v);
	vol_count(v->gvr == &vol_vpr_gvr, v->obj, phase,
	    (int64_t)v->done);
	log_info("%s %s: %s%s%s (%llu of %llu bytes)", v->what, v->name,
	    phase, message ? ": " : "", message ? message : "",
	    (unsigned long long)v->done, (unsigned long long)v->total);
	return vop_write_final(v, phase, err);
}

/*
 * A status write the API server refuses for good (400/422 invalid, 413
 * too large, 403): asking again with the same body changes nothing.
 */
static int
refused_for_good(int rc)
{
	return rc == CAIRN_EINVAL || rc == CAIRN_EFAIL || rc == CAIRN_EAUTH ||
	    rc == CAIRN_ETOOBIG || rc == CAIRN_EUNSUPPORTED;
}

/*
 * Write the final status; when the API server refuses it for good, write
 * less (the plugin's properties and extra fields dropped, then only the
 * phase Failed and why): the work is done and must never run again
 * because its report did not fit (issue 19: a refused status made the
 * node-agent run a plugin 435 times). The journal row already holds the
 * final phase, so a restart does not run it again either
 * (vop_finished_before()).
 */
int
vop_write_final(struct vop *v, const char *phase, struct cairn_err *err)
{
	struct cairn_err e = CAIRN_ERR_INIT;
	char msg[CAIRN_ERR_MSG_MAX + 128];
	static const char *const keep[] = { "phase", "claim", "startTimestamp",
	    "completionTimestamp", "progress", "snapshotID", NULL };
	cJSON *slim;
	int rc;

	rc = vop_write(v, &e);
	if (rc == 0 || !refused_for_good(rc)) {
		if (rc < 0)
			cairn_err_copy(err, &e);
		return rc;
	}
	log_warn("%s %s: the API server refused the final status (%s): "
	    "writing it without the plugin's properties", v->what, v->name,
	    e.msg);
	str_format(msg, sizeof msg, "%s; its full status was refused by the "
	    "API server (%s), so the plugin's properties are left out",
	    strcmp(phase, "Completed") == 0 ? "completed" : "ended", e.msg);
	slim = cJSON_CreateObject();
	for (int i = 0; keep[i] != NULL; i++) {
		const cJSON *it = cJSON_GetObjectItemCaseSensitive(v->status,
		    keep[i]);
		const char *sv = cJSON_IsString(it) ? it->valuestring : NULL;

		/* an oversized snapshotID is what may have been refused */
		if (it != NULL && (sv == NULL || strlen(sv) <= 1024))
			cJSON_AddItemToObject(slim, keep[i],
			    cJSON_Duplicate(it, 1));
	}
	cJSON_AddStringToObject(slim, "message", msg);
	cJSON_Delete(v->status);
	v->status = slim;
	cairn_err_clear(&e);
	rc = vop_write(v, &e);
	if (rc == 0 || !refused_for_good(rc)) {
		if (rc < 0)
			cairn_err_copy(err, &e);
		return rc;
	}
	/* Still refused: the bare minimum, Failed. */
	json_delete(v->status, "snapshotID");
	json_set_str(v->status, "phase", "Failed");
	str_format(msg, sizeof msg, "the API server refuses this operation's "
	    "status: %s", e.msg);
	json_set_str(v->status, "message", msg);
	cairn_err_clear(&e);
	rc = vop_write(v, &e);
	if (rc < 0) {
		log_error("%s %s: the API server refuses even a minimal status "
		    "(%s); the work is not run again (the journal says %s)",
		    v->what, v->name, e.msg, phase);
		cairn_err_copy(err, &e);
	}
	return rc;
}

int
vop_finished_before(struct vop *v, char *phase, size_t n)
{
	struct journal_volume *vols = NULL;
	size_t nv = 0;
	int found = 0;

	if (v->claimed || v->jid <= 0 || v->c->journal == NULL ||
	    journal_volumes(v->c->journal, v->jid, &vols, &nv, NULL) < 0)
		return 0;
	for (size_t i = 0; i < nv; i++)
		if (strcmp(vols[i].volume, v->volume) == 0 &&
		    vol_is_final(vols[i].phase)) {
			snprintf(phase, n, "%s", vols[i].phase);
			found = 1;
		}
	free(vols);
	if (found) {
		char ts[TIME_STR_MAX];

		json_set_str(v->status, "phase", phase);
		time_format_rfc3339(time_now_us(), ts);
		json_set_str(v->status, "completionTimestamp", ts);
		log_warn("%s %s: ended %s before this restart, its status was not "
		    "written: writing it, not running it again", v->what,
		    v->name, phase);
	}
	return found;
}

/* The journal row of the item (Backup/Restore) this operation belongs to. */
int64_t
vop_item_jid(const struct volumes_ctx *c, const char *kind, const cJSON *item)
{
	struct journal_item it;
	struct cairn_err e = CAIRN_ERR_INIT;
	int64_t id = 0;

	if (c->jid > 0)
		return c->jid;
	if (c->journal == NULL || item == NULL)
		return 0;
	if (journal_item_find(c->journal, kind, c->namespace,
	    json_str_or(item, "metadata.name", ""),
	    json_str_or(item, "metadata.uid", ""), &it, NULL) == 0)
		return it.id;
	memset(&it, 0, sizeof it);
	snprintf(it.kind, sizeof it.kind, "%s", kind);
	snprintf(it.namespace, sizeof it.namespace, "%s", c->namespace);
	snprintf(it.name, sizeof it.name, "%s",
	    json_str_or(item, "metadata.name", ""));
	snprintf(it.uid, sizeof it.uid, "%s",
	    json_str_or(item, "metadata.uid", ""));
	it.attempt = 1;
	snprintf(it.holder, sizeof it.holder, "%s", c->server_id);
	snprintf(it.worker, sizeof it.worker, "%s/volumes", c->server_id);
	if (journal_claim(c->journal, &it, &id, &e) < 0)
		log_warn("journal: %s", e.msg);
	return id;
}

/* ---- The hostpath mover's callbacks ----------------------------------- */

void
vop_hp_progress(void *arg, const struct hostpath_progress *p)
{
	struct vop *v = arg;

	if (p->bytes_uploaded > v->uploaded)
		v->uploaded = p->bytes_uploaded;
	vop_progress(v, p->bytes_done, p->bytes_total, p->files_done,
	    p->files_total, 0);
}

/* The mover asks before every write, between files and every 4 MiB. */
int
vop_hp_fence(void *arg, struct cairn_err *err)
{
	struct vop *v = arg;
	int rc;

	if (v->fenced)
		return cairn_err_set(err, CAIRN_EFENCED, "ownership of %s %s "
		    "lost", v->what, v->name);
	rc = engine_fence_check(&v->f, err);
	if (rc == CAIRN_EFENCED)
		v->fenced = 1;
	return rc;
}

/* ---- Plugin runs ---------------------------------------------------------- */

struct plug_arg {
	struct vop *v;
	cJSON *props;		/* backupProperties / restoreProperties */
	const struct vol_scope *scope;
};

static cJSON *
plug_kube(void *arg, const char *method, const char *path, const cJSON *body)
{
	struct plug_arg *p = arg;
	char what[VOL_NAME_MAX + 32];

	snprintf(what, sizeof what, "%s %s", p->v->what, p->v->name);
	return vol_plugin_kube(p->v->c, p->scope, what, method, path, body);
}

static void
plug_progress(void *arg, int64_t done, int64_t total)
{
	struct plug_arg *p = arg;

	vop_progress(p->v, (uint64_t)done, (uint64_t)total, 0, 0, 0);
}

/* Stop the plugin when the claim is lost or the Lease lapsed. */
static int
plug_cancel(void *arg)
{
	struct plug_arg *p = arg;
	const struct volumes_ctx *c = p->v->c;
	int ep;

	if (p->v->fenced)
		return 1;
	if (c->may_write == NULL)
		return 0;
	ep = c->may_write(c->may_write_arg);
	return ep == 0 || (p->v->f.epoch != 0 && ep != p->v->f.epoch);
}

/*
 * A plugin run ended by plug_cancel or stop: CAIRN_EFENCED when the claim
 * is gone, CAIRN_ECANCELED when stopped, else (the Lease came back and
 * the claim is still ours) an error that leaves the operation InProgress
 * to be run again.
 */
static int
plug_canceled(struct vop *v, int rc, struct cairn_err *e)
{
	struct cairn_err e2 = CAIRN_ERR_INIT;

	if (v->c->stop != NULL && *v->c->stop)
		return rc;
	rc = engine_fence_check(&v->f, &e2);
	if (rc == CAIRN_EFENCED || rc == CAIRN_ECANCELED) {
		if (rc == CAIRN_EFENCED)
			v->fenced = 1;
		return cairn_err_copy(e, &e2);
	}
	return cairn_err_set(e, CAIRN_EFAIL, "%s %s: the plugin was stopped "
	    "while the Lease lapsed; it runs again", v->what, v->name);
}

static void
plug_property(void *arg, const char *k, const char *val)
{
	struct plug_arg *p = arg;

	cJSON_DeleteItemFromObjectCaseSensitive(p->props, k);
	cJSON_AddStringToObject(p->props, k, val);
}

int
vop_plugin(struct vop *v, int pi, cJSON *req, const char *props_key,
	const struct vol_scope *scope, cJSON **res, int *stopped,
	struct cairn_err *err)
{
	const struct volumes *vol = v->c->vol;
	struct plugin_cbs cbs;
	struct plug_arg pa;
	int rc;

	*res = NULL;
	*stopped = 0;
	if (plugin_dir_config(vol->pd, (size_t)pi) != NULL)
		cJSON_AddItemToObject(req, "config", cJSON_Duplicate(
		    plugin_dir_config(vol->pd, (size_t)pi), 1));
	pa.v = v;
	pa.props = cJSON_CreateObject();
	pa.scope = scope;
	cbs.progress = plug_progress;
	cbs.property = plug_property;
	cbs.cancel = plug_cancel;
	cbs.kube = plug_kube;
	cbs.arg = &pa;
	rc = plugin_run(plugin_dir_path(vol->pd, (size_t)pi), req, &vol->lim,
	    &cbs, NULL, v->c->stop, NULL, res, err);
	json_set_item(v->status, props_key, pa.props);
	if (rc != CAIRN_ECANCELED)
		return rc;
	*stopped = 1;	/* stays InProgress */
	return plug_canceled(v, rc, err);
}

/* ---- Shared by the backup and restore sides --------------------------------- */

struct vpb_list {
	cJSON *items;		/* array, owned */
};

static int
collect_cb(void *arg, cJSON *item)
{
	struct vpb_list *l = arg;

	cJSON_AddItemToArray(l->items, item);
	return KUBE_TAKE;
}

int
vol_list_ops(const struct volumes_ctx *c, const struct kube_gvr *gvr,
    const char *label, const char *value, cJSON **items,
    struct cairn_err *err)
{
	struct kube_list_opts lo;
	struct vpb_list l;
	char *sel = NULL;
	int rc;

	memset(&lo, 0, sizeof lo);
	if (label != NULL) {
		char *lv = kube_label_value(value);

		sel = xasprintf("%s=%s", label, lv);
		free(lv);
		lo.label_selector = sel;
	}
	l.items = cJSON_CreateArray();
	rc = kube_list(c->kube, gvr, c->namespace, &lo, collect_cb, &l, NULL,
	    err);
	free(sel);
	if (rc < 0) {
		cJSON_Delete(l.items);
		return rc;
	}
	*items = l.items;
	return 0;
}

/*
 * Fail a New operation nobody claimed in time (conditional write, made
 * for the Backup/Restore whose claim f is).
 */
void
vol_expire_unclaimed(const struct volumes_ctx *c, const struct kube_gvr *gvr,
    cJSON *op, struct engine_fence *f)
{
	int64_t created = 0, limit = c->vol->c.claim_timeout_us;
	char ts[TIME_STR_MAX];
	char *msg;
	cJSON *body;

	if (time_parse(json_str_or(op, "metadata.creationTimestamp", ""),
	    &created) < 0 || time_now_us() - created < limit)
		return;
	if (engine_fence_check(f, NULL) < 0)
		return;
	msg = xasprintf("no cairn node-agent on node %s claimed it",
	    json_str_or(op, "spec.node", "(none)"));
	body = cJSON_Duplicate(op, 1);
	json_set_str(body, "status.phase", "Failed");
	json_set_str(body, "status.message", msg);
	time_format_rfc3339(time_now_us(), ts);
	json_set_str(body, "status.completionTimestamp", ts);
	if (kube_update_status(c->kube, gvr, c->namespace, body, NULL, NULL) ==
	    0)
		log_warn("%s: %s", json_str_or(op, "metadata.name", ""), msg);
	cJSON_Delete(body);
	free(msg);
}

/* The backup's stored VolumePluginBackups (an array, owned) or NULL. */
cJSON *
vol_stored_vpbs(const struct volumes_ctx *c, const cJSON *backup,
    struct cairn_err *err)
{
	struct bsl *loc = NULL;
	char *key = NULL, *text = NULL;
	size_t len = 0;
	cJSON *arr = NULL;

	if (bsl_open(c->kube, c->namespace,
	    json_str(backup, "spec.storageLocation"), &loc, err) < 0)
		return NULL;
	key = bsl_backup_key(loc, json_str_or(backup, "metadata.name", ""),
	    LAYOUT_BACKUP_VOLUMEPLUGINBACKUPS);
	if (store_get_gunzip(bsl_store(loc), key, VOL_FILE_CAP, &text, &len,
	    err) < 0)
		goto out;
	arr = json_parse(text, len, err);
	if (arr != NULL && !cJSON_IsArray(arr)) {
		cairn_err_set(err, CAIRN_EPROTO, "%s: not a JSON array", key);
		cJSON_Delete(arr);
		arr = NULL;
	}
out:
	free(text);
	free(key);
	bsl_free(loc);
	return arr;
}
