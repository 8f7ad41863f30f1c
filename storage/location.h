/*
 * location.h: a BackupStorageLocation object (cairn.io/v1, Velero's field
 * names) mapped onto an opened store.
 *
 *   spec.provider            "fs" or "s3" ("aws" is taken as "s3")
 *   spec.objectStorage       bucket (s3), prefix, caCert (base64 PEM, s3)
 *   spec.config              fs: path; s3: endpoint (or Velero's s3Url),
 *                            region, forcePathStyle (or s3ForcePathStyle),
 *                            insecureSkipTLSVerify, profile, caCertFile
 *   spec.credential          {name, key}: a Secret whose data[key] is an
 *                            AWS-format credentials file (s3)
 *
 * The Secret is not fetched here (storage/ does not talk to Kubernetes):
 * the caller reads location_credential_ref(), fetches the Secret and
 * passes the decoded file content to location_open().
 */
#ifndef CAIRN_LOCATION_H
#define CAIRN_LOCATION_H

#include <cjson/cJSON.h>
#include "storage/store.h"

/*
 * The Secret a location's credentials live in: *name and *key are BORROWED
 * from bsl (NULL when spec.credential is absent; key defaults to "cloud").
 * Returns 1 when there is a reference, 0 when none.
 */
int location_credential_ref(const cJSON *bsl, const char **name,
	const char **key);

/*
 * Open the store bsl describes. credentials is the content of the
 * credentials file (NULL: environment / default file, as store_open_s3).
 * *prefix_out (may be NULL) gets the key prefix, owned ("" when none).
 * A bad or incomplete spec is CAIRN_EINVAL with a message naming the
 * location and the field. No request is made (use store_check()).
 */
int location_open(const cJSON *bsl, const char *credentials,
	struct store **out, char **prefix_out, struct cairn_err *err);

/*
 * Check bsl as location_open would, without side effects: no directory is
 * created, no file but a credentials file named in the spec is read, no
 * request is made. For `cairn backup-location create` on a machine that is
 * not the server's node. Same errors as location_open.
 */
int location_check(const cJSON *bsl, const char *credentials,
	struct cairn_err *err);

#endif
