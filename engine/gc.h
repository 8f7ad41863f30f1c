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
 *  - Expiry: a finished Backup whose status.expiration has passed is
 *    deleted: storage first, then the object.
 *  - InProgress Backups are left alone until they finish; Restores are
 *    never touched.
 * Several servers may run this at once: deleting keys is idempotent and
 * object writes are conditional (a 409 means another server did it).
 */
#ifndef CAIRN_GC_H
#define CAIRN_GC_H

#include <stdint.h>
#include <cjson/cJSON.h>
#include "base/err.h"

#define GC_FINALIZER "cairn.io/backup-cleanup"

struct kube;
struct bsl;

/* What one pass did (for logs and tests). */
struct gc_stats {
	int finalized;		/* deleted Backups whose storage was cleaned */
	int expired;		/* expired Backups deleted */
	int finalizers_added;
	int errors;
};

/*
 * One pass over the Backups of ns at time now_us. expire: also delete
 * expired Backups (the caller does this every --gc-period; finalizers are
 * handled on every pass). stats may be NULL. Returns 0, or an error when
 * the Backups could not be listed; per-Backup failures are logged,
 * counted and retried on the next pass.
 */
int gc_tick(struct kube *k, const char *ns, int64_t now_us, int expire,
	struct gc_stats *stats, struct cairn_err *err);

/*
 * Open a storage location by name (NULL or "": the default) in ns, the
 * way upkeep needs it: *bsl_obj (owned, may be NULL) gets the object,
 * *readonly its accessMode. Codes as bsl_open().
 */
int gc_open_location(struct kube *k, const char *ns, const char *name,
	struct bsl **out, cJSON **bsl_obj, int *readonly,
	struct cairn_err *err);

/*
 * The key prefix of one backup's folder ("<prefix>/backups/<name>/");
 * owned, NULL for a name that cannot be a key. The location's own prefix
 * is bsl_prefix().
 */
char *gc_backup_dir(const struct bsl *l, const char *name);

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
