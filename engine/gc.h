/*
 * gc.h: retention and deletion of Backups.
 *
 *  - Finalizer: every Backup gets GC_FINALIZER (on the first pass that
 *    sees it without one, or at creation by schedules and sync). Deleting the
 *    object (kubectl delete, `cairn backup delete`, a namespace going, the
 *    GC below) only sets its deletionTimestamp; gc_tick() then has the
 *    plugins delete the backup's volume snapshots and deletes its
 *    VolumePluginBackups (engine/volumes.h volumes_delete_backup()), then
 *    removes every key under backups/<name>/ in its storage location and
 *    only then the finalizer, so the object never goes while its files
 *    remain. A snapshot that cannot be deleted keeps the folder (it holds
 *    the snapshot ids) and is retried on the next pass.
 *    A ReadOnly location is never written to: the finalizer is dropped and
 *    the files stay (sync will bring the Backup back, as Velero does).
 *    The deletion itself is gc_clean_backup(), which `cairn backup
 *    delete` uses too (it refuses a ReadOnly location instead).
 *  - Expiry: a finished Backup whose status.expiration has passed is
 *    deleted: storage first, then the object.
 *  - InProgress Backups are left alone until they finish; Restores are
 *    never touched.
 * Several servers may run this at once: deleting keys is idempotent and
 * object writes are conditional (a 409 means another server did it).
 */
#ifndef CAIRN_GC_H
#define CAIRN_GC_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "base/err.h"

#define GC_FINALIZER "cairn.io/backup-cleanup"

struct kube;
struct volumes;
struct volumes_ctx;

/* What one pass did (for logs and tests). */
struct gc_stats {
	int finalized;		/* deleted Backups whose storage was cleaned */
	int expired;		/* expired Backups deleted */
	int finalizers_added;
	int errors;
};

/*
 * One pass over the Backups of ns at time now_us (vol: volume work's
 * configuration, for the plugins that delete snapshots). expire: also delete
 * expired Backups (the caller does this every --gc-period; finalizers are
 * handled on every pass). stats may be NULL. Returns 0, or an error when
 * the Backups could not be listed; per-Backup failures are logged,
 * counted and retried on the next pass.
 */
int gc_tick(struct kube *k, const char *ns, struct volumes *vol,
	int64_t now_us, int expire, struct gc_stats *stats,
	struct cairn_err *err);

/* What gc_clean_backup() did. */
struct gc_clean {
	char location[254];	/* the location's name ("" when none opened) */
	char lost[512];		/* lost_ok: why the location could not be opened */
	size_t removed;		/* keys deleted under backups/<name>/ */
	size_t packs_removed;	/* volume chunk packs no other backup used */
	uint64_t pack_bytes;	/* their bytes */
	int snapshots_failed;	/* volume snapshots the plugins could not delete */
};

/*
 * The one way a backup's stored data is deleted, used by the cleanup
 * finalizer, expiry and `cairn backup delete`: the plugins delete its
 * volume snapshots, its VolumePluginBackups go (engine/volumes.h
 * volumes_delete_backup(), with c's client, namespace and stop flag), the
 * hostpath mover's chunk packs that no other backup uses
 * (engine/chunks.h chunks_release(): its refs, then the unused packs),
 * then every key under backups/<name>/ of its storage location. In that
 * order, so that a failure half way leaves what is needed to try again.
 * out is always filled.
 *
 * Returns 0 when done (out->removed keys deleted), and otherwise deletes
 * nothing more than the message says:
 *  - CAIRN_EREADONLY: the location's accessMode is ReadOnly; nothing at
 *    all is deleted (a ReadOnly location is never written to);
 *  - the location cannot be opened: CAIRN_ENOTFOUND / CAIRN_EINVAL (it or
 *    its Secret is gone or unusable) or an API error, nothing deleted.
 *    With lost_ok, ENOTFOUND and EINVAL instead delete the backup's
 *    VolumePluginBackups only (its files cannot be reached) and return 0
 *    with the reason in out->lost;
 *  - CAIRN_EFAIL with out->snapshots_failed > 0: a snapshot could not be
 *    deleted; the files stay (their -volumepluginbackups.json.gz is the
 *    only record of the snapshot ids);
 *  - other errors: listing the volume objects or deleting keys failed.
 */
int gc_clean_backup(const struct volumes_ctx *c, const cJSON *b, int lost_ok,
	struct gc_clean *out, struct cairn_err *err);

/* 1 when Backup b carries GC_FINALIZER. */
int gc_has_finalizer(const cJSON *b);
/*
 * Add (present 1) or remove GC_FINALIZER on Backup b with a merge patch
 * conditional on b's resourceVersion: CAIRN_ECONFLICT when it changed (re-read
 * and decide again), CAIRN_ENOTFOUND when it is gone. Other finalizers are
 * kept. For the CLI too: `backup delete` releases the object itself once
 * storage is clean.
 */
int gc_set_finalizer(struct kube *k, const char *ns, const cJSON *b,
	int present, struct cairn_err *err);

/* 1 for Completed, PartiallyFailed, Failed, FailedValidation. */
int gc_phase_final(const char *phase);

#endif
