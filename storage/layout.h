/*
 * layout.h: Velero's object keys, under an optional prefix.
 *
 *   <prefix>/backups/<name>/velero-backup.json
 *   <prefix>/backups/<name>/<name>.tar.gz, <name>-logs.gz, ...
 *   <prefix>/restores/<name>/restore-<name>-logs.gz, ...
 *
 * The prefix may be NULL or "" (keys start at "backups/"); a trailing '/'
 * on it is ignored. Names are Kubernetes object names; a name that could
 * not be one (empty, '/', "..", over 253 bytes) gives NULL, so a bad name
 * can never address another backup's keys. Returned keys are owned.
 */
#ifndef CAIRN_LAYOUT_H
#define CAIRN_LAYOUT_H

#include "storage/store.h"

enum layout_backup_file {
	LAYOUT_BACKUP_METADATA,		/* velero-backup.json */
	LAYOUT_BACKUP_TARBALL,		/* <name>.tar.gz */
	LAYOUT_BACKUP_LOGS,		/* <name>-logs.gz */
	LAYOUT_BACKUP_RESOURCE_LIST,	/* <name>-resource-list.json.gz */
	LAYOUT_BACKUP_RESULTS,		/* <name>-results.gz */
	LAYOUT_BACKUP_VOLUMESNAPSHOTS,	/* <name>-volumesnapshots.json.gz */
	LAYOUT_BACKUP_VOLUMEPLUGINBACKUPS, /* <name>-volumepluginbackups.json.gz */
	LAYOUT_BACKUP_PODVOLUMEBACKUPS,	/* <name>-podvolumebackups.json.gz */
	LAYOUT_BACKUP_ITEMOPERATIONS,	/* <name>-itemoperations.json.gz */
	LAYOUT_BACKUP_VOLUMEINFO,	/* <name>-volumeinfo.json.gz */
};

enum layout_restore_file {
	LAYOUT_RESTORE_LOGS,		/* restore-<name>-logs.gz */
	LAYOUT_RESTORE_RESULTS,		/* restore-<name>-results.gz */
	LAYOUT_RESTORE_RESOURCE_LIST,	/* restore-<name>-resource-list.json.gz */
};

/* 1 if name can be a backup or restore name in a key. */
int layout_name_ok(const char *name);
/* "<prefix>/backups/" */
char *layout_backups_prefix(const char *prefix);
/* "<prefix>/backups/<name>/" or NULL for a bad name. */
char *layout_backup_dir(const char *prefix, const char *name);
char *layout_backup_key(const char *prefix, const char *name,
	enum layout_backup_file f);
/* "<prefix>/restores/<name>/" and its files. */
char *layout_restore_dir(const char *prefix, const char *name);
char *layout_restore_key(const char *prefix, const char *name,
	enum layout_restore_file f);

/*
 * Call fn(arg, name) for each backup in the store: the common prefixes of
 * "<prefix>/backups/" (Velero's way), in byte order. fn returns non-zero to
 * stop.
 */
int layout_list_backups(struct store *s, const char *prefix,
	int (*fn)(void *arg, const char *name), void *arg,
	struct cairn_err *err);

#endif
