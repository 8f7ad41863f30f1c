/*
 * volumes.h: volume operations of backups and restores: one
 * VolumePluginBackup (VPB) / VolumePluginRestore (VPR) per volume, run by
 * the built-in hostpath mover or an external plugin (engine/plugin.h),
 * with progress in the object's status (at most once a second), in the
 * journal (volume_ops rows, with the mover's checkpoint) and on /status.
 *
 * Who runs a volume operation: the object names the node holding the
 * volume when it is known (label cairn.io/node: the PV's node affinity,
 * else the node of a pod mounting its claim). Only a process configured
 * with that node name (`cairn node-agent --node-name`) claims it; with no
 * node known, `cairn server` runs it itself. The claim is the same as for
 * backups: a status write phase=InProgress + status.claim with the
 * resourceVersion read; 409 means someone else has it.
 *
 * Fencing and takeover (docs/protocol.md, "Volume work"): the holder is
 * the process's server id, whose Lease is cairn-<id>. Every storage
 * write and status write of an operation first asks volumes_ctx.may_write
 * (the Lease's write epoch, as engine_env.may_write); after a pause or a
 * new epoch the object is re-read and the work stops (CAIRN_EFENCED)
 * unless the claim is still ours. Status writes are conditional on the
 * resourceVersion read; a 409 whose re-read shows another holder stops
 * the work too. The hostpath mover asks between files and every 4 MiB.
 * An InProgress operation whose holder's Lease expired (lease_watch, the
 * test the server uses for Backups) or was released is claimed again with
 * attempt+1 by a process that may run it (same node; no node: a server)
 * and resumed from its published status.checkpoint.
 *
 * Plugins never see cluster credentials; cairn writes the objects on
 * their behalf from what they report (docs/plugins.md).
 *
 * Threads: volumes_open() once at start; everything else may be called
 * from any worker thread with a context carrying that configuration.
 *
 * Files: volumes_op.c (the configuration, one operation's claim and
 * writes), volumes_backup.c, volumes_restore.c, volumes_agent.c,
 * volumes_status.c; see volumes_int.h.
 */
#ifndef CAIRN_VOLUMES_H
#define CAIRN_VOLUMES_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "base/err.h"

struct kube;
struct journal;
struct bspec;
struct engine_env;
struct volumes;

#define VOLUMES_LABEL_BACKUP	"cairn.io/backup-name"
#define VOLUMES_LABEL_RESTORE	"cairn.io/restore-name"
#define VOLUMES_LABEL_VOLUME	"cairn.io/volume-name"
#define VOLUMES_LABEL_NODE	"cairn.io/node"
#define VOLUMES_ANN_PLUGIN	"cairn.io/volume-plugin"	/* on a PV: which plugin */
#define VOLUMES_BUILTIN		"hostpath"	/* name of the built-in mover */

/* Settings (flags of cairn server / node-agent), copied by volumes_open(). */
struct volumes_config {
	const char *plugin_dir;		/* NULL: built-in mover only */
	const char *node_name;		/* node-agent: its node; server: NULL */
	const char *volume_root;	/* hostPath paths live under this prefix here ("" or NULL: as is) */
	int64_t plugin_timeout_us;	/* plugin idle timeout; 0: plugin.h default */
	int64_t claim_timeout_us;	/* node-named work not claimed by then fails; 0: 10 min */
	size_t part_size;		/* hostpath part size; 0: HOSTPATH_PART_SIZE */
	const char *spool_dir;		/* hostpath part spool; NULL: $TMPDIR */
	/* judges holders whose Lease is missing (takeover); 0: 15 s */
	int64_t lease_duration_us;
};

/*
 * The process's volume configuration: the settings copied, the plugin
 * directory scanned (see plugin_dir_open; a missing directory is an
 * error), and the cache of other processes' Leases used to judge
 * takeovers. Every volumes_ctx carries it (vol); nothing of it is global,
 * so one process may hold several (tests). *out owned: volumes_free().
 */
int volumes_open(const struct volumes_config *c, struct volumes **out,
	struct cairn_err *err);
/* Free; NULL is fine. No call using it may be running. */
void volumes_free(struct volumes *v);

/* What every call needs; borrowed. */
struct volumes_ctx {
	struct kube *kube;
	struct journal *journal;
	const char *namespace;		/* where cairn's objects live */
	const char *server_id;		/* claim holder */
	int64_t jid;			/* journal item of the Backup/Restore; 0: make one */
	const atomic_int *stop;
	/*
	 * Self-fencing hook, as engine_env.may_write (the Lease's
	 * lease_write_epoch()): 0 pauses writes; a new value makes the work
	 * re-read its claim before writing. NULL: always allowed (tools).
	 */
	int (*may_write)(void *arg);
	void *may_write_arg;
	/* The configuration (volumes_open); required by every call below. */
	struct volumes *vol;
};

/*
 * The context of a Backup's or Restore's run (engine/claim.h): its
 * client, journal (row jid), namespace, server id, stop flag, Lease hook
 * and volume configuration (env->volumes).
 */
void volumes_ctx_env(struct volumes_ctx *c, const struct engine_env *env,
	int64_t jid);

struct volumes_result {
	int total;			/* volume operations of the backup */
	int completed;
	int failed;
	char message[512];		/* first failure, "" if none */
};

/*
 * The volume part of a backup (call it after the item walk, before the
 * tarball is completed, so a crash resumes both): for each PV bound to a
 * claim in an included namespace (spec.snapshotVolumes false: none), find
 * its mover (PV annotation cairn.io/volume-plugin, else a plugin that
 * handles its type, else the built-in mover for hostPath/local; none:
 * skipped with a log line), create its VPB (kept when it exists: resume),
 * run those this process may run, wait for the others (node-agents) to
 * end, and upload <name>-volumepluginbackups.json.gz (the VPBs as they
 * ended) and <name>-volumesnapshots.json.gz (Velero's Volume snapshot
 * list). res counts the outcomes: the backup is PartiallyFailed when
 * res->failed > 0. Returns 0, CAIRN_ECANCELED when stopped (VPBs stay
 * InProgress and resume), CAIRN_EFENCED when the Backup's claim
 * (backup's status.claim) or an operation's was lost, or an error (API,
 * storage) that leaves the backup to be retried.
 */
int volumes_backup(const struct volumes_ctx *c, const cJSON *backup,
	const struct bspec *spec, struct volumes_result *res,
	struct cairn_err *err);

/*
 * Restore one PV's data before the PV is created (restorePVs): pv is the
 * PV from the backup tarball, changed in place to point at the restored
 * data (hostPath/local path). Creates the VPR
 * (<restore>-<pv>), runs it here or waits for the node-agent of the
 * PV's node. 0 when restored; VOLUMES_BY_CLAIM when the volume has no
 * directory and a snapshotter that provisions (protocol 2, e.g. CSI)
 * holds its data: the PV is not to be created, its claim is restored
 * from the snapshot instead (volumes_restore_claim()); CAIRN_ENOTFOUND
 * when the backup holds no data for this PV (pv unchanged: restore it as
 * is); other errors fail this volume only (the caller records it and
 * goes on).
 */
#define VOLUMES_BY_CLAIM 1
int volumes_restore_pv(const struct volumes_ctx *c, const cJSON *restore,
	const char *backup_name, cJSON *pv, struct cairn_err *err);

/*
 * Restore a claim whose volume (backed-up PV pv_name) a snapshotter holds
 * (volumes_restore_pv() said VOLUMES_BY_CLAIM): pvc is the claim about to
 * be created (namespace mapped). The VPR <restore>-<pv> gives the plugin
 * the target claim; the plugin makes the snapshot available there and
 * names a dataSource, which pvc gets (its volumeName and binding
 * annotations dropped, its request raised to the snapshot's size), so
 * the cluster provisions a new volume from the snapshot. 0 when pvc was
 * changed; CAIRN_ENOTFOUND when pv_name is not such a volume (pvc
 * unchanged); other errors fail this claim's volume.
 */
int volumes_restore_claim(const struct volumes_ctx *c, const cJSON *restore,
	const char *backup_name, const char *pv_name, cJSON *pvc,
	struct cairn_err *err);

/*
 * A backup is being deleted (GC, before its folder goes): ask each
 * external plugin to delete the snapshots it made for it
 * (delete_snapshot; hostpath copies live in the folder), then delete the
 * backup's VolumePluginBackup objects. *failed counts snapshots that could
 * not be deleted (logged; the caller may go on). Errors: listing the
 * objects failed.
 */
int volumes_delete_backup(const struct volumes_ctx *c, const cJSON *backup,
	int *failed, struct cairn_err *err);

/*
 * One pass of the node-agent (and of the server for node-less work left
 * behind): claim and run every New VPB/VPR this process may run, resume
 * those it holds, and take over those whose holder's Lease expired.
 * *ran (may be NULL) counts the operations run.
 */
int volumes_poll(const struct volumes_ctx *c, int *ran, struct cairn_err *err);

#endif
