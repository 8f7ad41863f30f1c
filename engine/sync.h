/*
 * sync.h: BackupStorageLocation health and backup sync from storage.
 *
 * Health: every spec.validationFrequency (default 1m, "0" disables) a
 * location is opened and checked (store_check: the directory exists and
 * is readable and writable / one ListObjectsV2 of the bucket): status.phase
 * becomes Available or Unavailable with status.message saying why, and
 * status.lastValidationTime is set. Backups to an Unavailable location
 * fail in the backup engine with the same reason (it checks the store
 * before writing).
 *
 * Sync: every spec.backupSyncPeriod (default 1m, "0" disables) an
 * Available location is listed (the common prefixes of backups/, Velero's
 * way); for each backups/<name>/velero-backup.json whose Backup is not in
 * the cluster, the Backup is created from it with labels
 * cairn.io/synced=true and cairn.io/storage-location, the cleanup
 * finalizer and spec.storageLocation naming this location; its status is
 * then written as stored (phase, timestamps, progress...). Its
 * VolumePluginBackups from <name>-volumepluginbackups.json.gz are created
 * the same way (also labelled cairn.io/synced). A synced object found
 * without a phase (its status write failed, or the create raced with
 * another server's) gets the stored status on the next pass; until then
 * nothing claims it (engine_is_synced(), engine/claim.h, with the label
 * ENGINE_LABEL_SYNCED). Only finished backups are synced (an unfinished one could
 * otherwise be "taken over" here and overwrite the other cluster's files).
 * Sync only reads storage, so a ReadOnly location is never written to.
 * The due times come from the status fields, so several servers share the
 * work: whoever sees a location due first does it, creates are idempotent
 * (AlreadyExists is fine).
 */
#ifndef CAIRN_SYNC_H
#define CAIRN_SYNC_H

#include <stdint.h>
#include <cjson/cJSON.h>
#include "base/err.h"

#define SYNC_LOCATION_LABEL "cairn.io/storage-location"
#define SYNC_DEFAULT_PERIOD_US (60LL * 1000000)

struct kube;

struct sync_stats {
	int validated;		/* locations checked */
	int unavailable;	/* of which Unavailable */
	int synced;		/* Backups created from storage */
	int errors;
};

/*
 * One pass over the BackupStorageLocations of ns at now_us: validate and
 * sync those that are due. stats may be NULL. Returns 0, or an error when
 * the locations could not be listed.
 */
int sync_tick(struct kube *k, const char *ns, int64_t now_us,
	struct sync_stats *stats, struct cairn_err *err);

#endif
