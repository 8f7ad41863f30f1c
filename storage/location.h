/*
 * location.h: a BackupStorageLocation object (cairn.io/v1, Velero's field
 * names) mapped onto an opened store.
 *
 *   spec.provider            "fs" or "s3" ("aws" is taken as "s3")
 *   spec.objectStorage       bucket (s3), prefix, caCert (base64 PEM, s3)
 *   spec.config              fs: path; s3: endpoint (or Velero's s3Url),
 *                            region, forcePathStyle (or s3ForcePathStyle),
 *                            insecureSkipTLSVerify, profile, caCertFile,
 *                            serverSideEncryption (AES256 | aws:kms),
 *                            kmsKeyId, customerKeyEncryptionFile (SSE-C:
 *                            a file with a 32-byte key; Velero's names)
 *   spec.credential          {name, key}: a Secret whose data[key] is an
 *                            AWS-format credentials file (s3)
 *   spec.encryption          {keyID, secretRef.name, allowUnencryptedReads}:
 *                            client-side encryption (storage/crypt.h) with
 *                            the keys in that Secret's data, one per key id
 *
 * Secrets are not fetched here (storage/ does not talk to Kubernetes):
 * the caller reads location_credential_ref() and location_encryption_ref(),
 * fetches the Secrets and passes the decoded credentials file and the
 * keyring (location_keyring()) to location_open_keys().
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

struct crypt_keyring;

/*
 * The Secret a location's encryption keys live in and the id of the key
 * to write with, both BORROWED from bsl. 1 when spec.encryption is set,
 * 0 when not, CAIRN_EINVAL (naming the field) when it is incomplete.
 */
int location_encryption_ref(const cJSON *bsl, const char **secret,
	const char **key_id, struct cairn_err *err);

/*
 * A keyring from a Secret's `data` (base64 values as the API returns
 * them): every entry whose name is a key id is a key (32 bytes, raw, hex
 * or base64), the one named key_id is current. *out is owned. CAIRN_EINVAL
 * naming `what` (e.g. "Secret cairn-system/keys") for a bad value or when
 * key_id is missing.
 */
int location_keyring(const cJSON *data, const char *key_id, const char *what,
	struct crypt_keyring **out, struct cairn_err *err);

/*
 * Open the store bsl describes. With spec.encryption the store is wrapped
 * in the encrypting store (store_open_crypt()) with keys, which this takes
 * (freed on failure too); keys NULL there is CAIRN_EINVAL. keys given for
 * a location without spec.encryption are freed and unused.
 */
int location_open_keys(const cJSON *bsl, const char *credentials,
	struct crypt_keyring *keys, struct store **out, char **prefix_out,
	struct cairn_err *err);

/*
 * Open the store bsl describes (one without spec.encryption: see
 * location_open_keys()). credentials is the content of the
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
