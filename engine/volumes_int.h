/*
 * volumes_int.h: what the files of the volume module share; not for other
 * modules (their interface is volumes.h).
 *
 *   volumes_op.c       the configuration (struct volumes), the operation
 *                      object (struct vop): claim, takeover, fenced status
 *                      writes, progress, journal, plugin runs
 *   volumes_backup.c   VolumePluginBackups: created per PV, run, waited
 *                      for, stored; deleted with their backup
 *   volumes_restore.c  VolumePluginRestores: one per PV, run, waited for
 *   volumes_agent.c    the node-agent's pass
 *   volumes_status.c   the running operations in the status document
 *
 * Internal names: vol_* (helpers), vop_* (one operation).
 */
#ifndef CAIRN_VOLUMES_INT_H
#define CAIRN_VOLUMES_INT_H

#include <pthread.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "base/err.h"
#include "base/timeutil.h"
#include "engine/claim.h"
#include "engine/hostpath.h"
#include "engine/plugin.h"
#include "engine/volumes.h"
#include "journal/journal.h"

#define VOL_STATUS_EVERY_US	TIME_US_PER_SEC	/* status.progress writes */
#define VOL_WAIT_POLL_US	(500LL * 1000)
#define VOL_CLAIM_TIMEOUT_US	(600LL * TIME_US_PER_SEC)
#define VOL_NAME_MAX		253
#define VOL_FILE_CAP		(64u << 20)	/* a -volumepluginbackups file */
#define VOL_WATCH_EVERY_US	(250LL * 1000)	/* lease_watch refreshes */
#define VOL_LEASE_DEFAULT_US	(15LL * TIME_US_PER_SEC)
#define VOL_CHUNKS_FORMAT	"chunks/1"	/* backupProperties.format */

struct kube_gvr;
struct lease_watch;

extern const struct kube_gvr vol_vpb_gvr, vol_vpr_gvr, vol_backups_gvr,
	vol_restores_gvr, vol_sc_gvr;

/* The process's volume configuration (volumes_open), read-only but watch. */
struct volumes {
	struct volumes_config c;	/* strings point at the copies below */
	char *plugin_dir, *node_name, *volume_root, *spool_dir;
	struct plugin_dir *pd;		/* NULL: built-in mover only */
	struct plugin_limits lim;
	/* Other processes' Leases, for takeover (vol_holder_gone). */
	pthread_mutex_t watch_mu;
	struct lease_watch *watch;
	struct kube *watch_kube;
	int64_t watch_at;
};

/* ---- helpers (volumes_op.c) ---- */

/* "<a>-<b>" as an object name (<= 253 bytes, hashed when longer). Owned. */
char *vol_op_name(const char *a, const char *b);
/* metadata.labels[key] of obj, borrowed, or NULL. */
const char *vol_label_of(const cJSON *obj, const char *key);
/* Volume type ("hostPath", "local", "csi", "nfs", "other") and host path. */
const char *vol_pv_type(const cJSON *pv, const char **path);
/* The node of a PV's required node affinity on kubernetes.io/hostname. */
const char *vol_pv_affinity_node(const cJSON *pv);
/*
 * A new operation object (kind "VolumePluginBackup"/"VolumePluginRestore")
 * named name in ns, labelled from labels (key, value pairs ended by a
 * NULL key; a NULL value leaves its key out; values shortened as label
 * values), with an empty spec (*spec, borrowed). Owned.
 */
cJSON *vol_op_new(const char *kind, const char *name, const char *ns,
	const char *const *labels, cJSON **spec);
/* The plugin of provider: -1 the built-in mover, >= 0 an index, else -1. */
int vol_plugin_index(const struct volumes *vol, const char *provider);
/* A volume path as seen here (under --volume-root). Owned. */
char *vol_host_path(const struct volumes *vol, const char *p);
/* May this process run an operation whose node label is node (or NULL)? */
int vol_may_run(const struct volumes *vol, const char *node);
/* Completed, Failed or PartiallyFailed. */
int vol_is_final(const char *phase);
/* Is the process holder gone (Lease released or expired)? */
int vol_holder_gone(const struct volumes_ctx *c, const char *holder);
/*
 * The fence of the claim found on obj (holder, attempt; "" holder: the
 * Lease only), with c's Lease hook and stop flag.
 */
void vol_fence_init(struct engine_fence *f, const struct volumes_ctx *c,
	const struct kube_gvr *gvr, const char *what, const cJSON *obj);
/* The operations of gvr in c's namespace, label=value when label is set. */
int vol_list_ops(const struct volumes_ctx *c, const struct kube_gvr *gvr,
	const char *label, const char *value, cJSON **items,
	struct cairn_err *err);
/* Fail a New operation nobody claimed in time (for the claim f). */
void vol_expire_unclaimed(const struct volumes_ctx *c,
	const struct kube_gvr *gvr, cJSON *op, struct engine_fence *f);
/* The backup's stored VolumePluginBackups (an array, owned) or NULL. */
cJSON *vol_stored_vpbs(const struct volumes_ctx *c, const cJSON *backup,
	struct cairn_err *err);

/* ---- what plugins are told, what they may ask (volumes_plugin.c) ---- */

/* What a plugin's API calls may reach (vol_plugin_kube). */
struct vol_scope {
	char *namespace;		/* VolumeSnapshots there; the claim's */
	char *pv, *pvc;			/* readable: the PV, the claim (namespace) */
	char *storage_class;		/* readable */
};
void vol_scope_free(struct vol_scope *sc);
/* o as a plugin sees it (metadata that matters, spec, status). Owned. */
cJSON *vol_plugin_object(const cJSON *o);
/*
 * Protocol 2's objects of a backup request for PV pv_name (its claim,
 * StorageClass, the labels of the node named in req's "node"), added to
 * req; sc gets the operation's scope (vol_scope_free()).
 */
void vol_plugin_backup_objects(const struct volumes_ctx *c,
	const char *pv_name, cJSON *req, struct vol_scope *sc);
/*
 * A plugin's API call (plugin_cbs.kube): made with c's client when sc
 * allows it (see volumes_plugin.c), answered {status, body}; NULL (403)
 * otherwise. what names the operation in logs.
 */
cJSON *vol_plugin_kube(const struct volumes_ctx *c, const struct vol_scope *sc,
	const char *what, const char *method, const char *path,
	const cJSON *body);

/* ---- one operation (volumes_op.c) ---- */

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
	uint64_t uploaded;		/* bytes stored (deduplicated copies) */
	int has_uploaded;		/* status.progress.bytesUploaded written */
	struct cairn_err werr;		/* first failed write inside a callback */
	int wrc;
};

/*
 * Claim obj: New (attempt 1), ours after a restart (resume, same
 * attempt), or InProgress under a holder whose Lease is gone (takeover,
 * attempt+1). 0: ours now (v filled), 1: not ours to run, < 0: error.
 * v is always filled enough for vop_free().
 */
int vop_claim(struct vop *v, const struct volumes_ctx *c,
	const struct kube_gvr *gvr, const char *what, const cJSON *obj,
	struct cairn_err *err);
/* v->status with the RV of v->obj, fenced by our claim. */
int vop_write(struct vop *v, struct cairn_err *err);
void vop_free(struct vop *v);
/* status.progress from v's counters (not written). */
void vop_set_progress(struct vop *v);
/* The journal's row of this volume: phase, counters, ckpt or v->ckpt. */
void vop_journal(struct vop *v, const char *phase, const char *ckpt);
/* Progress from the mover or the plugin; status written at most 1/s. */
void vop_progress(struct vop *v, uint64_t done, uint64_t total,
	uint64_t files, uint64_t ftotal, int force);
/* The final phase (journal, status, metrics, log). */
int vop_finish(struct vop *v, const char *phase, const char *message,
	struct cairn_err *err);
/*
 * Write the final status v->status (phase already set); a status the API
 * server refuses for good is written again smaller (properties dropped),
 * then as a bare Failed: finished work is never run again for its report.
 */
int vop_write_final(struct vop *v, const char *phase, struct cairn_err *err);
/*
 * A resume of our own claim whose journal row already holds a final phase
 * (the work ended, its status write did not go through): 1, the phase,
 * and v->status set to it; the caller writes it (vop_write_final())
 * instead of running the work again.
 */
int vop_finished_before(struct vop *v, char *phase, size_t n);
/* The journal row of the Backup/Restore item this operation belongs to. */
int64_t vop_item_jid(const struct volumes_ctx *c, const char *kind,
	const cJSON *item);
/* hostpath_opts callbacks with arg = the vop: progress and fence. */
void vop_hp_progress(void *arg, const struct hostpath_progress *p);
int vop_hp_fence(void *arg, struct cairn_err *err);
/*
 * Run plugin pi of the configuration with req (its "config" added here),
 * relaying progress and the properties it reports (into
 * status.<props_key>), making the API calls scope allows (protocol 2;
 * NULL: none), and stopping it when the claim or the Lease is
 * lost. Returns the plugin's answer (0 with *res owned, or its error);
 * when it was stopped, *stopped is 1 and the operation stays InProgress:
 * CAIRN_EFENCED, CAIRN_ECANCELED, or CAIRN_EFAIL after a Lease lapse
 * (run it again).
 */
int vop_plugin(struct vop *v, int pi, cJSON *req, const char *props_key,
	const struct vol_scope *scope, cJSON **res, int *stopped,
	struct cairn_err *err);

/* ---- the runs (volumes_backup.c, volumes_restore.c) ---- */

/* Run (or resume) one VPB / VPR this process may run. 0 also when not ours. */
int vol_vpb_run(const struct volumes_ctx *c, const cJSON *obj,
	struct cairn_err *err);
int vol_vpr_run(const struct volumes_ctx *c, const cJSON *obj,
	struct cairn_err *err);

#endif
