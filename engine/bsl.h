/*
 * bsl.h: a BackupStorageLocation, resolved to an opened store and its
 * Velero key layout (<prefix>/backups/<name>/<name>.tar.gz ...).
 *
 * A thin layer over storage/location.h and storage/layout.h that adds
 * what storage/ must not do: finding the object (by name or the default)
 * and reading its credentials Secret through the Kubernetes client.
 */
#ifndef CAIRN_BSL_H
#define CAIRN_BSL_H

#include <cjson/cJSON.h>
#include "base/err.h"
#include "storage/layout.h"

struct kube;
struct store;
struct bsl;

/* The location used when none is marked default (Velero's rule). */
#define BSL_DEFAULT_NAME "default"

/*
 * Find the BackupStorageLocation `name` in ns (NULL or "": the one with
 * spec.default true, else the one named BSL_DEFAULT_NAME) and open its
 * store. CAIRN_ENOTFOUND / CAIRN_EINVAL
 * carry a message meant for a Backup's validationErrors; other codes are
 * API failures. The store is not contacted (store_check() does that).
 */
int bsl_open(struct kube *k, const char *ns, const char *name,
	struct bsl **out, struct cairn_err *err);
/* Open from a BSL object already read (credentials Secret read from ns). */
int bsl_open_object(struct kube *k, const char *ns, const cJSON *obj,
	struct bsl **out, struct cairn_err *err);
void bsl_free(struct bsl *l);
struct store *bsl_store(struct bsl *l);	/* borrowed */
const char *bsl_name(const struct bsl *l);
/*
 * The key id the location encrypts new objects with (spec.encryption:
 * its keys come from the Secret it names, read at open), or NULL when it
 * does not encrypt. Borrowed for l's lifetime.
 */
const char *bsl_key_id(const struct bsl *l);
/* spec.accessMode is ReadOnly: nothing may write to it (Velero's rule). */
int bsl_read_only(const struct bsl *l);
/*
 * The location's key prefix as configured (spec.objectStorage.prefix, ""
 * when none), borrowed for l's lifetime. storage/layout.h's functions take
 * it as is (a trailing '/' or none).
 */
const char *bsl_prefix(const struct bsl *l);
/*
 * What a backup's storage writes came to, for the location's health:
 * BSL_FAILURES_UNAVAILABLE failures in a row (in this process) set the
 * location's status.phase Unavailable with the last error as message; the
 * next success sets it Available again (the periodic validation does too
 * when its check passes). Best effort: errors are logged at debug.
 */
#define BSL_FAILURES_UNAVAILABLE 3
void bsl_note_storage(struct kube *k, const char *ns, const char *name,
	int ok, const char *why);

/*
 * Create the BackupStorageLocation `name` in ns with spec_json (a JSON
 * object) unless one of that name exists: 1 created, 0 already there (it
 * is never changed: the cluster's copy wins over the server's flag).
 */
int bsl_ensure(struct kube *k, const char *ns, const char *name,
	const char *spec_json, struct cairn_err *err);
/* Key of one of a backup's files (Velero layout under the prefix). Owned. */
char *bsl_backup_key(const struct bsl *l, const char *backup,
	enum layout_backup_file f);

#endif
