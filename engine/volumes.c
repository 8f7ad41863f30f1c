/*
 * volumes.c: VolumePluginBackup / VolumePluginRestore orchestration.
 * Contract in volumes.h.
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
 * holder's Lease expired (this module's lease_watch, refreshed at most
 * every 250 ms when a decision needs it) is claimed again with attempt+1
 * through engine_claim() and resumed from status.checkpoint: the
 * hostpath mover keeps the parts the checkpoint vouches for and leaves
 * every later number of the upload, plus one, unused (hostpath.h,
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
 * The backup waits for every operation of its own to end, then uploads
 * the objects as they ended in <name>-volumepluginbackups.json.gz, and
 * Velero's Volume snapshot list in <name>-volumesnapshots.json.gz. A
 * failed operation makes the backup PartiallyFailed, never Failed: the
 * objects and the other volumes are still good.
 *
 * Restores read that file back, run one VolumePluginRestore per PV into a
 * fresh directory "<old path>-<restore name>" (hostPath/local) and point
 * the PV at it before the PV (and then its claim) is created.
 */
#include "config.h"
#include "engine/volumes.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/buf.h"
#include "base/jsonutil.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"
#include "engine/bsl.h"
#include "engine/claim.h"
#include "engine/bspec.h"
#include "engine/hostpath.h"
#include "engine/lease.h"
#include "engine/plugin.h"
#include "journal/journal.h"
#include "kube/kube.h"
#include "storage/store.h"

#define VOL_STATUS_EVERY_US	TIME_US_PER_SEC	/* status.progress writes */
#define VOL_WAIT_POLL_US	(500LL * 1000)
#define VOL_CLAIM_TIMEOUT_US	(600LL * TIME_US_PER_SEC)
#define VOL_NAME_MAX		253
#define VOL_LABEL_MAX		63
#define VOL_FILE_CAP		(64u << 20)	/* a -volumepluginbackups file */
#define VOL_WATCH_EVERY_US	(250LL * 1000)	/* lease_watch refreshes */
#define VOL_LEASE_DEFAULT_US	(15LL * TIME_US_PER_SEC)

static const struct kube_gvr vpb_gvr = { "cairn.io", "v1", "volumepluginbackups" };
static const struct kube_gvr vpr_gvr = { "cairn.io", "v1", "volumepluginrestores" };
static const struct kube_gvr backups_gvr = { "cairn.io", "v1", "backups" };
static const struct kube_gvr restores_gvr = { "cairn.io", "v1", "restores" };
static const struct kube_gvr pv_gvr = { "", "v1", "persistentvolumes" };
static const struct kube_gvr pod_gvr = { "", "v1", "pods" };

/* Process-wide settings (read-only after volumes_configure). */
static struct {
	struct volumes_config c;
	char *plugin_dir, *node_name, *volume_root, *spool_dir;
	struct plugin_dir *pd;
	struct plugin_limits lim;
	int set;
} vcfg;

/* Other processes' Leases, for takeover (see holder_gone). */
static pthread_mutex_t vwatch_mu = PTHREAD_MUTEX_INITIALIZER;
static struct lease_watch *vwatch;
static struct kube *vwatch_kube;
static int64_t vwatch_at;

/*
 * The cairn_volume_* metrics: event "attempt" at a claim, else the final
 * phase (Completed, Failed) with the bytes this process moved.
 */
static void
vol_count(int restore, const char *event, int64_t bytes)
{
	const char *kind = restore ? "restore" : "backup";

	if (strcmp(event, "attempt") == 0) {
		metrics_inc(restore ? METRIC_VOLUME_RESTORE_ATTEMPT_TOTAL :
		    METRIC_VOLUME_SNAPSHOT_ATTEMPT_TOTAL, NULL);
		metrics_add(METRIC_VOLUME_OPERATIONS_IN_PROGRESS, 1,
		    METRIC_LABELS(kind));
		return;
	}
	metrics_add(METRIC_VOLUME_OPERATIONS_IN_PROGRESS, -1,
	    METRIC_LABELS(kind));
	if (bytes > 0)
		metrics_add(METRIC_VOLUME_BYTES_TOTAL, (double)bytes,
		    METRIC_LABELS(kind));
	if (strcmp(event, "Completed") == 0)
		metrics_inc(restore ? METRIC_VOLUME_RESTORE_SUCCESS_TOTAL :
		    METRIC_VOLUME_SNAPSHOT_SUCCESS_TOTAL, NULL);
	else
		metrics_inc(restore ? METRIC_VOLUME_RESTORE_FAILURE_TOTAL :
		    METRIC_VOLUME_SNAPSHOT_FAILURE_TOTAL, NULL);
}

int
volumes_configure(const struct volumes_config *c, struct cairn_err *err)
{
	int rc;

	volumes_shutdown();
	vcfg.c = *c;
	vcfg.plugin_dir = xstrdup(c->plugin_dir);
	vcfg.node_name = c->node_name && c->node_name[0] ?
	    xstrdup(c->node_name) : NULL;
	vcfg.volume_root = xstrdup(c->volume_root ? c->volume_root : "");
	vcfg.spool_dir = xstrdup(c->spool_dir);
	vcfg.c.plugin_dir = vcfg.plugin_dir;
	vcfg.c.node_name = vcfg.node_name;
	vcfg.c.volume_root = vcfg.volume_root;
	vcfg.c.spool_dir = vcfg.spool_dir;
	if (vcfg.c.claim_timeout_us <= 0)
		vcfg.c.claim_timeout_us = VOL_CLAIM_TIMEOUT_US;
	memset(&vcfg.lim, 0, sizeof vcfg.lim);
	vcfg.lim.idle_us = c->plugin_timeout_us;
	vcfg.set = 1;
	if (vcfg.plugin_dir != NULL && vcfg.plugin_dir[0] != '\0') {
		rc = plugin_dir_open(vcfg.plugin_dir, &vcfg.lim, &vcfg.pd, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

void
volumes_shutdown(void)
{
	pthread_mutex_lock(&vwatch_mu);
	lease_watch_free(vwatch);
	vwatch = NULL;
	vwatch_kube = NULL;
	vwatch_at = 0;
	pthread_mutex_unlock(&vwatch_mu);
	plugin_dir_free(vcfg.pd);
	free(vcfg.plugin_dir);
	free(vcfg.node_name);
	free(vcfg.volume_root);
	free(vcfg.spool_dir);
	memset(&vcfg, 0, sizeof vcfg);
}

/* ---- Small helpers ------------------------------------------------------ */

/* "<a>-<b>" as an object name (<= 253 bytes, hashed when longer). Owned. */
static char *
op_name(const char *a, const char *b)
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

/* A label value: at most 63 bytes, ending alphanumeric. Owned. */
static char *
label_value(const char *s)
{
	char *v = xstrndup(s, VOL_LABEL_MAX);
	size_t n = strlen(v);

	while (n > 0 && !((v[n - 1] >= 'a' && v[n - 1] <= 'z') ||
	    (v[n - 1] >= 'A' && v[n - 1] <= 'Z') ||
	    (v[n - 1] >= '0' && v[n - 1] <= '9')))
		v[--n] = '\0';
	return v;
}

static const char *
label_of(const cJSON *obj, const char *key)
{
	const cJSON *l = json_get(obj, "metadata.labels");
	const cJSON *v = l ? cJSON_GetObjectItemCaseSensitive(l, key) : NULL;

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const char *
annotation_of(const cJSON *obj, const char *key)
{
	const cJSON *l = json_get(obj, "metadata.annotations");
	const cJSON *v = l ? cJSON_GetObjectItemCaseSensitive(l, key) : NULL;

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Volume type and (borrowed) host path of a PV. */
static const char *
pv_type(const cJSON *pv, const char **path)
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
static const char *
pv_affinity_node(const cJSON *pv)
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
	const char *n = pv_affinity_node(pv);
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
pick_mover(const cJSON *pv, const char *type, const char **provider)
{
	const char *want = annotation_of(pv, VOLUMES_ANN_PLUGIN);
	int i;
	int builtin_ok = strcmp(type, "hostPath") == 0 ||
	    strcmp(type, "local") == 0;

	if (want != NULL && strcmp(want, VOLUMES_BUILTIN) != 0 &&
	    strcmp(want, HOSTPATH_PROVIDER) != 0) {
		i = plugin_dir_find(vcfg.pd, want, NULL);
		*provider = i >= 0 ? plugin_dir_name(vcfg.pd, (size_t)i) : want;
		return i >= 0 ? i : -3;
	}
	if (want == NULL) {
		i = plugin_dir_find(vcfg.pd, NULL, type);
		if (i >= 0) {
			*provider = plugin_dir_name(vcfg.pd, (size_t)i);
			return i;
		}
	}
	*provider = HOSTPATH_PROVIDER;
	return builtin_ok ? -1 : -2;
}

static int
plugin_index(const char *provider)
{
	if (provider == NULL || strcmp(provider, HOSTPATH_PROVIDER) == 0)
		return -1;
	return plugin_dir_find(vcfg.pd, provider, NULL);
}

/* "/root" + "/path", or the path itself when no root is set. Owned. */
static char *
host_path(const char *p)
{
	if (vcfg.volume_root == NULL || vcfg.volume_root[0] == '\0')
		return xstrdup(p);
	return xasprintf("%s%s%s", vcfg.volume_root, p[0] == '/' ? "" : "/", p);
}

/* May this process run an operation whose node label is node (may be NULL)? */
static int
may_run(const char *node)
{
	if (vcfg.node_name == NULL)
		return node == NULL || node[0] == '\0';
	return node != NULL && strcmp(node, vcfg.node_name) == 0;
}

static int
is_final(const char *phase)
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
static int
holder_gone(const struct volumes_ctx *c, const char *holder)
{
	struct cairn_err e = CAIRN_ERR_INIT;
	int64_t now = time_mono_us();
	int gone;

	if (holder == NULL || holder[0] == '\0')
		return 1;	/* released at a clean shutdown */
	pthread_mutex_lock(&vwatch_mu);
	if (vwatch == NULL || vwatch_kube != c->kube) {
		lease_watch_free(vwatch);
		vwatch = lease_watch_new(c->kube, c->namespace,
		    vcfg.c.lease_duration_us > 0 ? vcfg.c.lease_duration_us :
		    VOL_LEASE_DEFAULT_US);
		vwatch_kube = c->kube;
		vwatch_at = 0;
	}
	if (vwatch_at == 0 || now - vwatch_at >= VOL_WATCH_EVERY_US) {
		if (lease_watch_refresh(vwatch, &e) == 0)
			vwatch_at = now;
		else
			log_warn("volume work: listing Leases: %s", e.msg);
	}
	gone = lease_watch_expired(vwatch, holder);
	pthread_mutex_unlock(&vwatch_mu);
	return gone;
}

/*
 * The fence of one claim (engine/claim.h): the Lease's write epoch, and
 * the claim (holder, attempt, as found on obj) that must still stand on
 * the object when the Lease lapsed or its epoch changed since the last
 * check. An empty holder: the Lease only. The first check re-reads.
 */
static void
vf_init(struct engine_fence *f, const struct volumes_ctx *c,
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

/* ---- One operation: status writes with fencing ------------------------- */

struct vop {
	const struct volumes_ctx *c;
	const struct kube_gvr *gvr;
	const char *what;		/* "VolumePluginBackup" ... */
	char *name;
	cJSON *obj;			/* latest as written/read (owned) */
	cJSON *status;			/* ours (owned) */
	int64_t attempt;
	int fenced;
	int claimed;			/* claimed by this call (not a resume of ours) */
	struct engine_fence f;		/* our claim */
	char ckpt[HOSTPATH_CKPT_MAX];	/* last mover checkpoint (journal) */
	int64_t last_write;		/* mono us */
	int64_t jid;
	char volume[JOURNAL_NAME_MAX];
	/* progress */
	uint64_t done, total, files, files_total;
	int64_t rate_t0;		/* for bytes/s in logs */
	struct cairn_err werr;		/* first failed write inside a callback */
	int wrc;
};

/* v->status with the RV of v->obj, fenced by our claim (v->f). */
static int
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

static void
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
static int
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
	vf_init(&v->f, c, gvr, what, obj);
	if (is_final(phase))
		return 1;
	if (strcmp(phase, "InProgress") == 0 &&
	    strcmp(holder, c->server_id) == 0) {
		v->attempt = json_int(obj, "status.claim.attempt", 1);
		log_info("%s %s: resuming (attempt %lld)", what, v->name,
		    (long long)v->attempt);
		vol_count(gvr == &vpr_gvr, "attempt", 0);
		return 0;	/* the fence re-reads before the first write */
	}
	if (strcmp(phase, "InProgress") == 0) {
		if (!holder_gone(c, holder))
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
	vf_init(&v->f, c, gvr, what, out);
	v->f.epoch = ep;
	v->claimed = 1;
	if (takeover)
		log_info("%s %s: taken over from %s (attempt %lld)", what,
		    v->name, holder[0] ? holder : "(released)",
		    (long long)v->attempt);
	else
		log_info("%s %s: claimed (attempt %lld)", what, v->name,
		    (long long)v->attempt);
	vol_count(gvr == &vpr_gvr, "attempt", 0);
	return 0;
}

static void
vop_set_progress(struct vop *v)
{
	json_set_int(v->status, "progress.totalBytes", (int64_t)v->total);
	json_set_int(v->status, "progress.bytesDone", (int64_t)v->done);
}

static void
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
static void
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

static int
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
	vol_count(v->gvr == &vpr_gvr, phase, (int64_t)v->done);
	log_info("%s %s: %s%s%s (%llu of %llu bytes)", v->what, v->name,
	    phase, message ? ": " : "", message ? message : "",
	    (unsigned long long)v->done, (unsigned long long)v->total);
	return vop_write(v, err);
}

/* The journal row of the item (Backup/Restore) this operation belongs to. */
static int64_t
item_jid(const struct volumes_ctx *c, const char *kind, const cJSON *item)
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

/* ---- Running a VolumePluginBackup -------------------------------------- */

static void
hp_progress_cb(void *arg, uint64_t done, uint64_t total, uint64_t files,
    uint64_t ftotal)
{
	vop_progress(arg, done, total, files, ftotal, 0);
}

static int
hp_ckpt_cb(void *arg, const struct hostpath_ckpt *ck, struct cairn_err *err)
{
	struct vop *v = arg;
	char enc[HOSTPATH_CKPT_MAX];
	cJSON *cp;

	v->done = ck->bytes_done > v->done ? ck->bytes_done : v->done;
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
	json_set_item(v->status, "checkpoint", cp);
	vop_set_progress(v);
	/* The status copy follows at most once a second (the journal has it). */
	if (time_mono_us() - v->last_write < VOL_STATUS_EVERY_US)
		return 0;
	if (vop_write(v, err) == CAIRN_EFENCED)
		return CAIRN_EFENCED;
	return 0;
}

/* The mover asks before every write, between files and every 4 MiB. */
static int
hp_fence_cb(void *arg, struct cairn_err *err)
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
		return 1;
	}
	return 0;
}

struct plug_arg {
	struct vop *v;
	cJSON *props;		/* backupProperties / restoreProperties */
};

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

/* Run (or resume) one VPB this process may run. 0 also when not ours. */
static int
vpb_run(const struct volumes_ctx *c, const cJSON *obj, struct cairn_err *err)
{
	struct cairn_err e = CAIRN_ERR_INIT;
	struct vop v;
	struct bsl *loc = NULL;
	struct hostpath_opts ho;
	struct hostpath_stats hs;
	struct hostpath_ckpt ck;
	struct plugin_cbs cbs;
	struct plug_arg pa;
	cJSON *backup = NULL, *req = NULL, *res = NULL;
	const char *bname = json_str_or(obj, "spec.backup", "");
	const char *provider = json_str_or(obj, "spec.provider", "");
	const char *vpath = json_str(obj, "spec.volumePath");
	char *key = NULL, *dir = NULL;
	int rc, pi, canceled;

	rc = vop_claim(&v, c, &vpb_gvr, "VolumePluginBackup", obj, err);
	if (rc != 0) {
		vop_free(&v);
		return rc > 0 ? 0 : rc;
	}
	snprintf(v.volume, sizeof v.volume, "%s",
	    json_str_or(obj, "spec.volume", ""));
	rc = kube_get(c->kube, &backups_gvr, c->namespace, bname, &backup, &e);
	if (rc < 0) {
		rc = vop_finish(&v, "Failed", e.msg, err);
		goto out;
	}
	v.jid = item_jid(c, JOURNAL_KIND_BACKUP, backup);
	if (v.claimed)
		vop_journal(&v, "InProgress", NULL);	/* forget older attempts */
	v.done = (uint64_t)json_int(v.obj, "status.progress.bytesDone", 0);
	v.total = (uint64_t)json_int(v.obj, "status.progress.totalBytes", 0);
	pi = plugin_index(provider);
	if (strcmp(provider, HOSTPATH_PROVIDER) == 0) {
		rc = bsl_open(c->kube, c->namespace,
		    json_str(backup, "spec.storageLocation"), &loc, &e);
		key = rc == 0 ? hostpath_key(bsl_prefix(loc), bname, v.volume) : NULL;
		if (rc < 0 || key == NULL || vpath == NULL) {
			rc = vop_finish(&v, "Failed", rc < 0 ? e.msg :
			    "no storage key or volume path", err);
			goto out;
		}
		dir = host_path(vpath);
		memset(&ho, 0, sizeof ho);
		ho.part_size = vcfg.c.part_size;
		ho.spool_dir = vcfg.spool_dir;
		ho.progress = hp_progress_cb;
		ho.checkpoint = hp_ckpt_cb;
		ho.fence = hp_fence_cb;
		ho.arg = &v;
		ho.stop = c->stop;
		if (find_resume(&v, &ck, &ho.resume_foreign))
			ho.resume = &ck;
		rc = hostpath_backup(bsl_store(loc), key, dir, &ho, &hs, &e);
		if (rc == CAIRN_ENOTFOUND && ho.resume != NULL && !v.fenced) {
			log_warn("VolumePluginBackup %s: cannot resume (%s): "
			    "starting again", v.name, e.msg);
			ho.resume = NULL;
			ho.resume_foreign = 0;
			v.done = 0;
			v.ckpt[0] = '\0';
			rc = hostpath_backup(bsl_store(loc), key, dir, &ho, &hs,
			    &e);
		}
		if (rc == CAIRN_ECANCELED || rc == CAIRN_EFENCED || v.fenced) {
			cairn_err_copy(err, &e);
			if (v.fenced)
				rc = CAIRN_EFENCED;
			goto out;	/* stays InProgress: resumes later */
		}
		if (rc < 0) {
			rc = vop_finish(&v, "Failed", e.msg, err);
			goto out;
		}
		v.done = hs.bytes_done;
		v.total = hs.bytes_total;
		v.files = v.files_total = hs.files_total;
		json_set_str(v.status, "snapshotID", key);
		json_set_str(v.status, "backupProperties.key", key);
		{
			char n[32];

			snprintf(n, sizeof n, "%llu",
			    (unsigned long long)hs.compressed);
			json_set_str(v.status, "backupProperties.storedBytes",
			    n);
			snprintf(n, sizeof n, "%d", hs.parts);
			json_set_str(v.status, "backupProperties.parts", n);
		}
		json_delete(v.status, "checkpoint");
		rc = vop_finish(&v, "Completed", NULL, err);
		goto out;
	}
	if (pi < 0) {
		char *m = xasprintf("no plugin \"%s\" in the plugin directory",
		    provider);

		rc = vop_finish(&v, "Failed", m, err);
		free(m);
		goto out;
	}
	/* An external plugin: one create_snapshot run. */
	req = cJSON_CreateObject();
	cJSON_AddStringToObject(req, "type", "create_snapshot");
	cJSON_AddStringToObject(req, "volumeName", v.volume);
	cJSON_AddStringToObject(req, "volumeType",
	    json_str_or(obj, "spec.volumeType", ""));
	if (vpath != NULL) {
		dir = host_path(vpath);
		cJSON_AddStringToObject(req, "volumePath", dir);
	}
	cJSON_AddStringToObject(req, "backupName", bname);
	cJSON_AddStringToObject(req, "node", label_of(obj, VOLUMES_LABEL_NODE) ?
	    label_of(obj, VOLUMES_LABEL_NODE) : "");
	if (plugin_dir_config(vcfg.pd, (size_t)pi) != NULL)
		cJSON_AddItemToObject(req, "config", cJSON_Duplicate(
		    plugin_dir_config(vcfg.pd, (size_t)pi), 1));
	pa.v = &v;
	pa.props = cJSON_CreateObject();
	cbs.progress = plug_progress;
	cbs.property = plug_property;
	cbs.cancel = plug_cancel;
	cbs.arg = &pa;
	rc = plugin_run(plugin_dir_path(vcfg.pd, (size_t)pi), req, &vcfg.lim,
	    &cbs, NULL, c->stop, NULL, &res, &e);
	canceled = rc == CAIRN_ECANCELED;
	if (canceled)
		rc = plug_canceled(&v, rc, &e);
	json_set_item(v.status, "backupProperties", pa.props);
	if (canceled) {
		cairn_err_copy(err, &e);
		goto out;	/* stays InProgress */
	}
	if (rc < 0 || json_str(res, "snapshotID") == NULL) {
		rc = vop_finish(&v, "Failed", rc < 0 ? e.msg :
		    "plugin result without snapshotID", err);
		goto out;
	}
	json_set_str(v.status, "snapshotID", json_str(res, "snapshotID"));
	if (v.total == 0)
		v.total = v.done;
	v.done = v.total;
	rc = vop_finish(&v, "Completed", NULL, err);
out:
	cJSON_Delete(backup);
	cJSON_Delete(req);
	cJSON_Delete(res);
	bsl_free(loc);
	free(key);
	free(dir);
	vop_free(&v);
	return rc;
}

/* ---- The backup side ----------------------------------------------------- */

struct pv_walk {
	const struct volumes_ctx *c;
	const cJSON *backup;
	struct engine_fence *bf;	/* the Backup's claim */
	const struct bspec *spec;
	cJSON *made;		/* array of VPB names created or found */
	int rc;
	struct cairn_err err;
};

static int
pv_cb(void *arg, cJSON *pv)
{
	struct pv_walk *w = arg;
	const char *ns = json_str(pv, "spec.claimRef.namespace");
	const char *pvname = json_str_or(pv, "metadata.name", "");
	const char *bname = json_str_or(w->backup, "metadata.name", "");
	const char *type, *path, *provider = NULL;
	char *name, *node, *lv;
	cJSON *o, *md, *labels, *spec, *out = NULL;
	int m, rc;

	if (ns == NULL || json_str(pv, "spec.claimRef.name") == NULL)
		return 0;
	if (w->spec != NULL && !bspec_ns_included(w->spec, ns))
		return 0;
	type = pv_type(pv, &path);
	m = pick_mover(pv, type, &provider);
	if (m == -2) {
		log_info("backup %s: volume %s (%s) has no plugin: skipped",
		    bname, pvname, type);
		return 0;
	}
	rc = engine_fence_check(w->bf, &w->err);
	if (rc < 0) {
		w->rc = rc;
		return rc;
	}
	name = op_name(bname, pvname);
	node = pv_node(w->c->kube, pv);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "apiVersion", "cairn.io/v1");
	cJSON_AddStringToObject(o, "kind", "VolumePluginBackup");
	md = cJSON_AddObjectToObject(o, "metadata");
	cJSON_AddStringToObject(md, "name", name);
	cJSON_AddStringToObject(md, "namespace", w->c->namespace);
	labels = cJSON_AddObjectToObject(md, "labels");
	lv = label_value(bname);
	cJSON_AddStringToObject(labels, VOLUMES_LABEL_BACKUP, lv);
	free(lv);
	lv = label_value(pvname);
	cJSON_AddStringToObject(labels, VOLUMES_LABEL_VOLUME, lv);
	free(lv);
	if (node != NULL) {
		lv = label_value(node);
		cJSON_AddStringToObject(labels, VOLUMES_LABEL_NODE, lv);
		free(lv);
	}
	spec = cJSON_AddObjectToObject(o, "spec");
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
	rc = kube_create(w->c->kube, &vpb_gvr, w->c->namespace, o, &out,
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
	if (rc < 0) {
		w->rc = rc;
		free(name);
		return rc;
	}
	cJSON_AddItemToArray(w->made, cJSON_CreateString(name));
	free(name);
	return 0;
}

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

static int
list_ops(const struct volumes_ctx *c, const struct kube_gvr *gvr,
    const char *label, const char *value, cJSON **items,
    struct cairn_err *err)
{
	struct kube_list_opts lo;
	struct vpb_list l;
	char *sel = NULL;
	int rc;

	memset(&lo, 0, sizeof lo);
	if (label != NULL) {
		char *lv = label_value(value);

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
static void
expire_unclaimed(const struct volumes_ctx *c, const struct kube_gvr *gvr,
    cJSON *op, struct engine_fence *f)
{
	int64_t created = 0, limit = vcfg.c.claim_timeout_us > 0 ?
	    vcfg.c.claim_timeout_us : VOL_CLAIM_TIMEOUT_US;
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

int
volumes_backup(const struct volumes_ctx *c, const cJSON *backup,
    const struct bspec *spec, struct volumes_result *res,
    struct cairn_err *err)
{
	struct pv_walk w;
	struct bsl *loc = NULL;
	struct engine_fence bf;
	const char *bname = json_str_or(backup, "metadata.name", "");
	const cJSON *sv = json_get(backup, "spec.snapshotVolumes");
	cJSON *items = NULL, *op;
	char *key = NULL, *text = NULL;
	int rc, pending;

	memset(res, 0, sizeof *res);
	memset(&w, 0, sizeof w);
	vf_init(&bf, c, &backups_gvr, "Backup", backup);
	w.made = cJSON_CreateArray();
	w.bf = &bf;
	if (!cJSON_IsFalse(sv)) {
		w.c = c;
		w.backup = backup;
		w.spec = spec;
		rc = kube_list(c->kube, &pv_gvr, NULL, NULL, pv_cb, &w, NULL,
		    &w.err);
		if (rc < 0 || w.rc < 0) {
			rc = cairn_err_copy(err, &w.err);
			goto out;
		}
	}
	/* Run ours, wait for the others (and take over the dead's). */
	for (;;) {
		if (c->stop != NULL && *c->stop) {
			rc = cairn_err_set(err, CAIRN_ECANCELED, "stopped");
			goto out;
		}
		rc = engine_fence_check(&bf, err);	/* still the Backup's owner? */
		if (rc < 0)
			goto out;
		cJSON_Delete(items);
		items = NULL;
		rc = list_ops(c, &vpb_gvr, VOLUMES_LABEL_BACKUP, bname, &items,
		    err);
		if (rc < 0)
			goto out;
		pending = 0;
		cJSON_ArrayForEach(op, items) {
			const char *phase = json_str_or(op, "status.phase",
			    "New");

			if (strcmp(json_str_or(op, "spec.backup", ""), bname) !=
			    0 || is_final(phase))
				continue;
			pending++;
			if (may_run(label_of(op, VOLUMES_LABEL_NODE))) {
				rc = vpb_run(c, op, err);
				if (rc == CAIRN_ECANCELED)
					goto out;
				/* EFENCED: the operation is someone else's now */
				if (rc < 0)
					log_warn("backup %s: %s", bname,
					    err->msg);
			} else if (strcmp(phase, "New") == 0) {
				expire_unclaimed(c, &vpb_gvr, op, &bf);
			}
		}
		if (pending == 0)
			break;
		time_sleep_us(VOL_WAIT_POLL_US, c->stop);
	}
	/* Count and persist the objects as they ended. */
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
	rc = bsl_open(c->kube, c->namespace,
	    json_str(backup, "spec.storageLocation"), &loc, err);
	if (rc < 0)
		goto out;
	text = cJSON_PrintUnformatted(items);
	key = bsl_backup_key(loc, bname, LAYOUT_BACKUP_VOLUMEPLUGINBACKUPS);
	rc = engine_fence_check(&bf, err);
	if (rc == 0)
		rc = store_put_gzip(bsl_store(loc), key, text, strlen(text),
		    Z_DEFAULT_COMPRESSION, err);
	if (rc < 0)
		goto out;
	free(text);
	free(key);
	{
		cJSON *snaps = velero_snapshots(backup, items);

		text = cJSON_PrintUnformatted(snaps);
		cJSON_Delete(snaps);
	}
	key = bsl_backup_key(loc, bname, LAYOUT_BACKUP_VOLUMESNAPSHOTS);
	rc = engine_fence_check(&bf, err);
	if (rc == 0)
		rc = store_put_gzip(bsl_store(loc), key, text, strlen(text),
		    Z_DEFAULT_COMPRESSION, err);
	if (rc == 0 && res->total > 0)
		log_info("backup %s: %d volume(s): %d completed, %d failed",
		    bname, res->total, res->completed, res->failed);
out:
	cJSON_Delete(items);
	cJSON_Delete(w.made);
	bsl_free(loc);
	free(key);
	free(text);
	return rc;
}

/* ---- Restores ------------------------------------------------------------ */

static int
vpr_run(const struct volumes_ctx *c, const cJSON *obj, struct cairn_err *err)
{
	struct cairn_err e = CAIRN_ERR_INIT;
	struct vop v;
	struct bsl *loc = NULL;
	struct hostpath_opts ho;
	struct hostpath_stats hs;
	struct plugin_cbs cbs;
	struct plug_arg pa;
	cJSON *backup = NULL, *restore = NULL, *req = NULL, *res = NULL;
	const char *bname = json_str_or(obj, "spec.backupName", "");
	const char *provider = json_str_or(obj, "spec.provider", "");
	const char *target = json_str(obj, "spec.targetPath");
	char *dir = NULL;
	int rc, pi, canceled;

	rc = vop_claim(&v, c, &vpr_gvr, "VolumePluginRestore", obj, err);
	if (rc != 0) {
		vop_free(&v);
		return rc > 0 ? 0 : rc;
	}
	snprintf(v.volume, sizeof v.volume, "%s",
	    json_str_or(obj, "spec.volume", ""));
	if (kube_get(c->kube, &restores_gvr, c->namespace,
	    json_str_or(obj, "spec.restoreName", ""), &restore, NULL) == 0)
		v.jid = item_jid(c, JOURNAL_KIND_RESTORE, restore);
	v.total = (uint64_t)json_int(obj, "spec.expectBytes", 0);
	rc = kube_get(c->kube, &backups_gvr, c->namespace, bname, &backup, &e);
	if (rc < 0 || target == NULL) {
		rc = vop_finish(&v, "Failed", rc < 0 ? e.msg :
		    "no target path", err);
		goto out;
	}
	dir = host_path(target);
	pi = plugin_index(provider);
	if (strcmp(provider, HOSTPATH_PROVIDER) == 0) {
		rc = bsl_open(c->kube, c->namespace,
		    json_str(backup, "spec.storageLocation"), &loc, &e);
		if (rc < 0) {
			rc = vop_finish(&v, "Failed", e.msg, err);
			goto out;
		}
		memset(&ho, 0, sizeof ho);
		ho.progress = hp_progress_cb;
		ho.fence = hp_fence_cb;
		ho.arg = &v;
		ho.stop = c->stop;
		ho.expect_total = v.total;
		/*
		 * A takeover extracts the whole archive again into the same
		 * directory: entries already there are replaced.
		 */
		rc = hostpath_restore(bsl_store(loc),
		    json_str_or(obj, "spec.snapshotID", ""), dir, &ho, &hs, &e);
		if (rc == CAIRN_ECANCELED || rc == CAIRN_EFENCED || v.fenced) {
			cairn_err_copy(err, &e);
			if (v.fenced)
				rc = CAIRN_EFENCED;
			goto out;
		}
		if (rc < 0) {
			rc = vop_finish(&v, "Failed", e.msg, err);
			goto out;
		}
		v.done = v.total = hs.bytes_done > v.total ? hs.bytes_done :
		    v.total;
		json_set_str(v.status, "volumeID", target);
		rc = vop_finish(&v, "Completed", NULL, err);
		goto out;
	}
	if (pi < 0) {
		char *m = xasprintf("no plugin \"%s\" in the plugin directory",
		    provider);

		rc = vop_finish(&v, "Failed", m, err);
		free(m);
		goto out;
	}
	req = cJSON_CreateObject();
	cJSON_AddStringToObject(req, "type", "restore_volume");
	cJSON_AddStringToObject(req, "snapshotID",
	    json_str_or(obj, "spec.snapshotID", ""));
	cJSON_AddStringToObject(req, "volumeName", v.volume);
	cJSON_AddStringToObject(req, "volumeType",
	    json_str_or(obj, "spec.volumeType", ""));
	cJSON_AddStringToObject(req, "targetPath", dir);
	cJSON_AddStringToObject(req, "backupName", bname);
	if (json_get(obj, "spec.backupProperties") != NULL)
		cJSON_AddItemToObject(req, "backupProperties", cJSON_Duplicate(
		    json_get(obj, "spec.backupProperties"), 1));
	if (plugin_dir_config(vcfg.pd, (size_t)pi) != NULL)
		cJSON_AddItemToObject(req, "config", cJSON_Duplicate(
		    plugin_dir_config(vcfg.pd, (size_t)pi), 1));
	pa.v = &v;
	pa.props = cJSON_CreateObject();
	cbs.progress = plug_progress;
	cbs.property = plug_property;
	cbs.cancel = plug_cancel;
	cbs.arg = &pa;
	rc = plugin_run(plugin_dir_path(vcfg.pd, (size_t)pi), req, &vcfg.lim,
	    &cbs, NULL, c->stop, NULL, &res, &e);
	canceled = rc == CAIRN_ECANCELED;
	if (canceled)
		rc = plug_canceled(&v, rc, &e);
	json_set_item(v.status, "restoreProperties", pa.props);
	if (canceled) {
		cairn_err_copy(err, &e);
		goto out;	/* stays InProgress */
	}
	if (rc < 0) {
		rc = vop_finish(&v, "Failed", e.msg, err);
		goto out;
	}
	json_set_str(v.status, "volumeID", json_str(res, "volumeID") ?
	    json_str(res, "volumeID") : target);
	v.done = v.total;
	rc = vop_finish(&v, "Completed", NULL, err);
out:
	cJSON_Delete(backup);
	cJSON_Delete(restore);
	cJSON_Delete(req);
	cJSON_Delete(res);
	bsl_free(loc);
	free(dir);
	vop_free(&v);
	return rc;
}

/* The backup's stored VolumePluginBackups (an array, owned) or NULL. */
static cJSON *
stored_vpbs(const struct volumes_ctx *c, const cJSON *backup,
    struct cairn_err *err)
{
	struct bsl *loc = NULL;
	char *key = NULL, *gz = NULL;
	size_t len = 0;
	cJSON *arr = NULL;
	z_stream z;
	struct buf b;
	unsigned char chunk[65536];
	int zrc;

	if (bsl_open(c->kube, c->namespace,
	    json_str(backup, "spec.storageLocation"), &loc, err) < 0)
		return NULL;
	key = bsl_backup_key(loc, json_str_or(backup, "metadata.name", ""),
	    LAYOUT_BACKUP_VOLUMEPLUGINBACKUPS);
	if (store_get_mem(bsl_store(loc), key, VOL_FILE_CAP, &gz, &len,
	    err) < 0)
		goto out;
	buf_init(&b, VOL_FILE_CAP);
	memset(&z, 0, sizeof z);
	inflateInit2(&z, 15 + 16);
	z.next_in = (Bytef *)gz;
	z.avail_in = (uInt)len;
	do {
		z.next_out = chunk;
		z.avail_out = sizeof chunk;
		zrc = inflate(&z, Z_NO_FLUSH);
		if (buf_append(&b, chunk, sizeof chunk - z.avail_out) < 0)
			zrc = Z_MEM_ERROR;
	} while (zrc == Z_OK);
	inflateEnd(&z);
	if (zrc == Z_STREAM_END)
		arr = json_parse(buf_cstr(&b), b.len, err);
	else
		cairn_err_set(err, CAIRN_EPROTO, "%s: not gzip", key);
	buf_free(&b);
	if (arr != NULL && !cJSON_IsArray(arr)) {
		cairn_err_set(err, CAIRN_EPROTO, "%s: not a JSON array", key);
		cJSON_Delete(arr);
		arr = NULL;
	}
out:
	free(gz);
	free(key);
	bsl_free(loc);
	return arr;
}

/* The Completed VPB of volume pv in the backup's stored file; owned or NULL. */
static cJSON *
stored_vpb(const struct volumes_ctx *c, const cJSON *backup, const char *pv,
    struct cairn_err *err)
{
	cJSON *arr = stored_vpbs(c, backup, err), *v, *found = NULL;

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

int
volumes_delete_backup(const struct volumes_ctx *c, const cJSON *backup,
    int *failed, struct cairn_err *err)
{
	struct cairn_err e = CAIRN_ERR_INIT;
	const char *bname = json_str_or(backup, "metadata.name", "");
	cJSON *arr, *v, *req, *items = NULL;
	const char *provider, *id;
	int pi, rc;

	*failed = 0;
	arr = stored_vpbs(c, backup, &e);
	cJSON_ArrayForEach(v, arr) {
		provider = json_str_or(v, "spec.provider", "");
		id = json_str(v, "status.snapshotID");
		if (strcmp(provider, HOSTPATH_PROVIDER) == 0 || id == NULL ||
		    strcmp(json_str_or(v, "status.phase", ""), "Completed") != 0)
			continue;	/* hostpath data goes with the folder */
		pi = plugin_index(provider);
		if (pi < 0) {
			log_warn("backup %s: snapshot %s of plugin %s not "
			    "deleted: plugin not installed", bname, id,
			    provider);
			(*failed)++;
			continue;
		}
		req = cJSON_CreateObject();
		cJSON_AddStringToObject(req, "type", "delete_snapshot");
		cJSON_AddStringToObject(req, "snapshotID", id);
		cJSON_AddStringToObject(req, "volumeName",
		    json_str_or(v, "spec.volume", ""));
		if (plugin_dir_config(vcfg.pd, (size_t)pi) != NULL)
			cJSON_AddItemToObject(req, "config", cJSON_Duplicate(
			    plugin_dir_config(vcfg.pd, (size_t)pi), 1));
		rc = plugin_run(plugin_dir_path(vcfg.pd, (size_t)pi), req,
		    &vcfg.lim, NULL, NULL, c->stop, NULL, NULL, &e);
		cJSON_Delete(req);
		if (rc < 0) {
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
	rc = list_ops(c, &vpb_gvr, VOLUMES_LABEL_BACKUP, bname, &items, err);
	if (rc < 0)
		return rc;
	cJSON_ArrayForEach(v, items) {
		if (strcmp(json_str_or(v, "spec.backup", ""), bname) != 0)
			continue;
		rc = kube_delete(c->kube, &vpb_gvr, c->namespace,
		    json_str_or(v, "metadata.name", ""), NULL, NULL, &e);
		if (rc < 0 && rc != CAIRN_ENOTFOUND)
			log_warn("deleting %s: %s", json_str_or(v,
			    "metadata.name", ""), e.msg);
	}
	cJSON_Delete(items);
	return 0;
}

int
volumes_restore_pv(const struct volumes_ctx *c, const cJSON *restore,
    const char *backup_name, cJSON *pv, struct cairn_err *err)
{
	struct cairn_err e = CAIRN_ERR_INIT;
	cJSON *backup = NULL, *vpb = NULL, *o, *md, *labels, *spec, *cur = NULL;
	const char *rname = json_str_or(restore, "metadata.name", "");
	const char *pvname = json_str_or(pv, "metadata.name", "");
	const char *type, *path, *phase;
	char *name = NULL, *target = NULL, *node = NULL, *lv;
	struct engine_fence rf;
	int rc;

	vf_init(&rf, c, &restores_gvr, "Restore", restore);
	rc = kube_get(c->kube, &backups_gvr, c->namespace, backup_name, &backup,
	    err);
	if (rc < 0)
		return rc;
	vpb = stored_vpb(c, backup, pvname, &e);
	if (vpb == NULL) {
		cJSON_Delete(backup);
		return cairn_err_set(err, CAIRN_ENOTFOUND, "backup %s holds no "
		    "data for volume %s", backup_name, pvname);
	}
	type = pv_type(pv, &path);
	if (path == NULL) {
		rc = cairn_err_set(err, CAIRN_EUNSUPPORTED, "volume %s: type %s "
		    "has no path to restore into", pvname, type);
		goto out;
	}
	target = xasprintf("%s-%s", path, rname);
	node = pv_affinity_node(pv) ? xstrdup(pv_affinity_node(pv)) :
	    xstrdup(label_of(vpb, VOLUMES_LABEL_NODE));
	name = op_name(rname, pvname);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "apiVersion", "cairn.io/v1");
	cJSON_AddStringToObject(o, "kind", "VolumePluginRestore");
	md = cJSON_AddObjectToObject(o, "metadata");
	cJSON_AddStringToObject(md, "name", name);
	cJSON_AddStringToObject(md, "namespace", c->namespace);
	labels = cJSON_AddObjectToObject(md, "labels");
	lv = label_value(rname);
	cJSON_AddStringToObject(labels, VOLUMES_LABEL_RESTORE, lv);
	free(lv);
	lv = label_value(backup_name);
	cJSON_AddStringToObject(labels, VOLUMES_LABEL_BACKUP, lv);
	free(lv);
	lv = label_value(pvname);
	cJSON_AddStringToObject(labels, VOLUMES_LABEL_VOLUME, lv);
	free(lv);
	if (node != NULL) {
		lv = label_value(node);
		cJSON_AddStringToObject(labels, VOLUMES_LABEL_NODE, lv);
		free(lv);
	}
	spec = cJSON_AddObjectToObject(o, "spec");
	cJSON_AddStringToObject(spec, "snapshotID",
	    json_str_or(vpb, "status.snapshotID", ""));
	cJSON_AddStringToObject(spec, "backupName", backup_name);
	cJSON_AddStringToObject(spec, "restoreName", rname);
	cJSON_AddStringToObject(spec, "provider",
	    json_str_or(vpb, "spec.provider", ""));
	cJSON_AddStringToObject(spec, "volumeType", type);
	cJSON_AddStringToObject(spec, "volumeAZ", "");
	cJSON_AddStringToObject(spec, "volume", pvname);
	cJSON_AddStringToObject(spec, "targetPath", target);
	if (node != NULL)
		cJSON_AddStringToObject(spec, "node", node);
	cJSON_AddNumberToObject(spec, "expectBytes",
	    (double)json_int(vpb, "status.progress.totalBytes", 0));
	if (json_get(vpb, "status.backupProperties") != NULL)
		cJSON_AddItemToObject(spec, "backupProperties", cJSON_Duplicate(
		    json_get(vpb, "status.backupProperties"), 1));
	rc = engine_fence_check(&rf, err);
	if (rc == 0)
		rc = kube_create(c->kube, &vpr_gvr, c->namespace, o, NULL, err);
	cJSON_Delete(o);
	if (rc < 0 && rc != CAIRN_EEXIST)
		goto out;
	/* Run it here if we may, else wait for the node-agent. */
	for (;;) {
		cJSON_Delete(cur);
		cur = NULL;
		rc = kube_get(c->kube, &vpr_gvr, c->namespace, name, &cur, err);
		if (rc < 0)
			goto out;
		phase = json_str_or(cur, "status.phase", "New");
		if (is_final(phase))
			break;
		rc = engine_fence_check(&rf, err);	/* still the Restore's owner? */
		if (rc < 0)
			goto out;
		if (may_run(label_of(cur, VOLUMES_LABEL_NODE))) {
			rc = vpr_run(c, cur, err);
			if (rc == CAIRN_ECANCELED)
				goto out;
			/* EFENCED: the operation is someone else's now */
			if (rc < 0 && rc != CAIRN_EFENCED)
				log_warn("%s: %s", name, err->msg);
			if (rc < 0 || strcmp(phase, "InProgress") == 0)
				time_sleep_us(VOL_WAIT_POLL_US, c->stop);
			continue;
		}
		if (strcmp(phase, "New") == 0)
			expire_unclaimed(c, &vpr_gvr, cur, &rf);
		if (c->stop != NULL && *c->stop) {
			rc = cairn_err_set(err, CAIRN_ECANCELED, "stopped");
			goto out;
		}
		time_sleep_us(VOL_WAIT_POLL_US, c->stop);
	}
	if (strcmp(phase, "Completed") != 0) {
		rc = cairn_err_set(err, CAIRN_EFAIL, "volume %s: %s", pvname,
		    json_str_or(cur, "status.message", "restore failed"));
		goto out;
	}
	/* Point the PV at the restored data. */
	if (strcmp(type, "hostPath") == 0)
		json_set_str(pv, "spec.hostPath.path",
		    json_str_or(cur, "status.volumeID", target));
	else
		json_set_str(pv, "spec.local.path",
		    json_str_or(cur, "status.volumeID", target));
	rc = 0;
out:
	cJSON_Delete(cur);
	cJSON_Delete(vpb);
	cJSON_Delete(backup);
	free(name);
	free(target);
	free(node);
	return rc;
}

/* ---- The node-agent pass --------------------------------------------------- */

static int
poll_kind(const struct volumes_ctx *c, const struct kube_gvr *gvr,
    int (*run)(const struct volumes_ctx *, const cJSON *, struct cairn_err *),
    int *ran, struct cairn_err *err)
{
	cJSON *items = NULL, *op;
	const char *phase;
	int rc;

	rc = list_ops(c, gvr, vcfg.node_name ? VOLUMES_LABEL_NODE : NULL,
	    vcfg.node_name, &items, err);
	if (rc < 0)
		return rc;
	cJSON_ArrayForEach(op, items) {
		if (c->stop != NULL && *c->stop)
			break;
		phase = json_str_or(op, "status.phase", "New");
		/* synced: done elsewhere, its stored status is on the way */
		if (is_final(phase) || engine_is_synced(op) ||
		    !may_run(label_of(op, VOLUMES_LABEL_NODE)))
			continue;
		if (strcmp(phase, "InProgress") == 0 && strcmp(json_str_or(op,
		    "status.claim.holder", ""), c->server_id) != 0 &&
		    !holder_gone(c, json_str_or(op, "status.claim.holder", "")))
			continue;	/* its holder is alive */
		if (c->may_write != NULL && c->may_write(c->may_write_arg) == 0)
			break;		/* no Lease: no claims, no writes */
		rc = run(c, op, err);
		if (ran != NULL)
			(*ran)++;
		if (rc == CAIRN_ECANCELED)
			break;
		if (rc < 0)
			log_warn("%s", err->msg);
		rc = 0;
	}
	cJSON_Delete(items);
	return rc;
}

int
volumes_poll(const struct volumes_ctx *c, int *ran, struct cairn_err *err)
{
	int rc;

	if (ran != NULL)
		*ran = 0;
	rc = poll_kind(c, &vpb_gvr, vpb_run, ran, err);
	if (rc == 0)
		rc = poll_kind(c, &vpr_gvr, vpr_run, ran, err);
	return rc;
}
