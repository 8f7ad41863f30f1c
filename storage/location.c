/*
 * location.c: BackupStorageLocation -> struct store (see location.h).
 */
#include "config.h"
#include "storage/location.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "base/buf.h"
#include "base/codec.h"
#include "base/jsonutil.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "storage/crypt.h"

int
location_credential_ref(const cJSON *bsl, const char **name, const char **key)
{
	*name = json_str(bsl, "spec.credential.name");
	*key = json_str_or(bsl, "spec.credential.key", "cloud");
	if (*name == NULL || **name == '\0') {
		*name = NULL;
		*key = NULL;
		return 0;
	}
	return 1;
}

/* A config value: string, or a bool/number written as one. Borrowed. */
static const char *
cfg_str(const cJSON *bsl, const char *k1, const char *k2)
{
	const cJSON *config = json_get(bsl, "spec.config");
	const cJSON *v = NULL;

	if (config == NULL)
		return NULL;
	v = cJSON_GetObjectItemCaseSensitive(config, k1);
	if (v == NULL && k2 != NULL)
		v = cJSON_GetObjectItemCaseSensitive(config, k2);
	if (cJSON_IsString(v))
		return v->valuestring;
	if (cJSON_IsTrue(v))
		return "true";
	if (cJSON_IsFalse(v))
		return "false";
	return NULL;
}

static int
truthy(const char *s)
{
	return s != NULL && (strcasecmp(s, "true") == 0 || strcmp(s, "1") == 0);
}

/* A 32-byte key from a file (raw, hex or base64), read whole. */
static int
read_key(const char *path, unsigned char key[CRYPT_KEY_LEN],
    struct cairn_err *err)
{
	unsigned char data[4097];
	size_t n;
	FILE *f = fopen(path, "rbe");
	int rc;

	if (f == NULL)
		return cairn_err_errno(err, CAIRN_EINVAL, errno, "%s", path);
	n = fread(data, 1, sizeof data, f);
	fclose(f);
	if (n == sizeof data)
		return cairn_err_set(err, CAIRN_EINVAL, "%s is too large to be a "
		    "key", path);
	rc = crypt_key_parse(data, n, path, key, err);
	OPENSSL_cleanse(data, sizeof data);
	return rc;
}

/* fs: config.readOnlyWait, a Go duration ("2m"; "0": do not wait). */
static int
fs_readonly_wait(const cJSON *bsl, const char *name, int64_t *us,
    struct cairn_err *err)
{
	const char *v = cfg_str(bsl, "readOnlyWait", NULL);

	*us = STORE_FS_READONLY_WAIT_US;
	if (v == NULL || *v == '\0')
		return 0;
	if (duration_parse(v, us) < 0)
		return cairn_err_set(err, CAIRN_EINVAL, "BackupStorageLocation "
		    "%s: config.readOnlyWait \"%.100s\" is not a duration "
		    "(like 2m or 30s)", name, v);
	return 0;
}

static int
open_or_check(const cJSON *bsl, const char *credentials, int dry,
    struct store **out, char **prefix_out, struct cairn_err *err)
{
	const char *name = json_str_or(bsl, "metadata.name", "(unnamed)");
	const char *provider = json_str(bsl, "spec.provider");
	const char *prefix = json_str_or(bsl, "spec.objectStorage.prefix", "");
	const char *path, *ca_b64;
	struct store_s3_config c;
	unsigned char ssec[CRYPT_KEY_LEN];
	const char *ssec_file;
	char *ca_pem = NULL;
	int64_t ro_wait;
	int rc;

	*out = NULL;
	if (prefix_out != NULL)
		*prefix_out = NULL;
	if (provider == NULL)
		return cairn_err_set(err, CAIRN_EINVAL,
		    "BackupStorageLocation %s: spec.provider is missing (fs or s3)",
		    name);
	if (*prefix != '\0' && store_key_check(prefix, NULL) < 0 &&
	    !(prefix[strlen(prefix) - 1] == '/'))
		return cairn_err_set(err, CAIRN_EINVAL,
		    "BackupStorageLocation %s: spec.objectStorage.prefix \"%.200s\" "
		    "is not a valid key prefix", name, prefix);
	if (strcmp(provider, "fs") == 0) {
		path = cfg_str(bsl, "path", NULL);
		if (path == NULL || *path == '\0')
			return cairn_err_set(err, CAIRN_EINVAL,
			    "BackupStorageLocation %s: provider fs needs spec.config.path",
			    name);
		rc = fs_readonly_wait(bsl, name, &ro_wait, err);
		if (rc < 0)
			return rc;
		rc = dry ? 0 : store_open_fs_wait(path, 1, ro_wait, out, err);
	} else if (strcmp(provider, "s3") == 0 || strcmp(provider, "aws") == 0 ||
	    strcmp(provider, "velero.io/aws") == 0) {
		memset(&c, 0, sizeof c);
		c.bucket = json_str(bsl, "spec.objectStorage.bucket");
		if (c.bucket == NULL || *c.bucket == '\0')
			return cairn_err_set(err, CAIRN_EINVAL,
			    "BackupStorageLocation %s: provider s3 needs "
			    "spec.objectStorage.bucket", name);
		c.endpoint = cfg_str(bsl, "endpoint", "s3Url");
		c.region = cfg_str(bsl, "region", NULL);
		c.force_path_style = truthy(cfg_str(bsl, "forcePathStyle",
		    "s3ForcePathStyle"));
		c.insecure_skip_verify = truthy(cfg_str(bsl, "insecureSkipTLSVerify",
		    NULL));
		c.profile = cfg_str(bsl, "profile", NULL);
		c.ca_file = cfg_str(bsl, "caCertFile", NULL);
		ca_b64 = json_str(bsl, "spec.objectStorage.caCert");
		if (ca_b64 != NULL && *ca_b64 != '\0') {
			if (codec_b64_decode(ca_b64, CAIRN_CAP_FILE, &ca_pem,
			    NULL) < 0)
				ca_pem = NULL;
			if (ca_pem == NULL)
				return cairn_err_set(err, CAIRN_EINVAL,
				    "BackupStorageLocation %s: "
				    "spec.objectStorage.caCert is not base64", name);
			c.ca_pem = ca_pem;
		}
		c.credentials = credentials;
		c.sse = cfg_str(bsl, "serverSideEncryption", NULL);
		c.sse_kms_key_id = cfg_str(bsl, "kmsKeyId", NULL);
		ssec_file = cfg_str(bsl, "customerKeyEncryptionFile", NULL);
		if (ssec_file != NULL && *ssec_file != '\0') {
			rc = read_key(ssec_file, ssec, err);
			if (rc < 0) {
				free(ca_pem);
				return cairn_err_prefix(err, "BackupStorageLocation "
				    "%s: config.customerKeyEncryptionFile", name);
			}
			c.sse_c_key = ssec;
		}
		rc = store_open_s3(&c, out, err);
		OPENSSL_cleanse(ssec, sizeof ssec);
		free(ca_pem);
		if (rc == 0 && dry) {
			store_free(*out);
			*out = NULL;
		}
	} else {
		return cairn_err_set(err, CAIRN_EINVAL,
		    "BackupStorageLocation %s: unknown provider \"%.100s\" "
		    "(cairn knows fs and s3)", name, provider);
	}
	if (rc < 0)
		return cairn_err_prefix(err, "BackupStorageLocation %s", name);
	if (prefix_out != NULL)
		*prefix_out = xstrdup(prefix);
	return 0;
}

int
location_encryption_ref(const cJSON *bsl, const char **secret,
    const char **key_id, struct cairn_err *err)
{
	const cJSON *enc = json_get(bsl, "spec.encryption");
	const char *name = json_str_or(bsl, "metadata.name", "(unnamed)");

	*secret = NULL;
	*key_id = NULL;
	if (enc == NULL || cJSON_IsNull(enc))
		return 0;
	*key_id = json_str(enc, "keyID");
	*secret = json_str(enc, "secretRef.name");
	if (*key_id == NULL || !crypt_keyid_ok(*key_id))
		return cairn_err_set(err, CAIRN_EINVAL, "BackupStorageLocation "
		    "%s: spec.encryption.keyID must be 1 to %d of A-Z a-z 0-9 "
		    ". _ -", name, CRYPT_KEYID_MAX);
	if (*secret == NULL || **secret == '\0')
		return cairn_err_set(err, CAIRN_EINVAL, "BackupStorageLocation "
		    "%s: spec.encryption.secretRef.name names no Secret", name);
	return 1;
}

int
location_keyring(const cJSON *data, const char *key_id, const char *what,
    struct crypt_keyring **out, struct cairn_err *err)
{
	struct crypt_keyring *kr = crypt_keyring_new();
	unsigned char key[CRYPT_KEY_LEN];
	char *raw;
	const cJSON *it;
	char *label;
	size_t len = 0;
	int rc = 0;

	*out = NULL;
	cJSON_ArrayForEach(it, data) {
		if (!crypt_keyid_ok(it->string))
			continue;
		raw = NULL;
		if (cJSON_IsString(it))
			(void)codec_b64_decode(it->valuestring, 4096, &raw, &len);
		label = xasprintf("%s key \"%s\"", what, it->string);
		rc = raw == NULL ? cairn_err_set(err, CAIRN_EINVAL, "%s is not "
		    "base64", label) : crypt_key_parse(raw, len, label, key, err);
		if (raw != NULL)
			OPENSSL_cleanse(raw, len);
		free(raw);
		free(label);
		if (rc == 0)
			rc = crypt_keyring_add(kr, it->string, key, err);
		OPENSSL_cleanse(key, sizeof key);
		if (rc < 0)
			break;
	}
	if (rc == 0 && crypt_keyring_set_current(kr, key_id, NULL) < 0)
		rc = cairn_err_set(err, CAIRN_EINVAL, "%s has no key \"%s\" "
		    "(spec.encryption.keyID)", what, key_id);
	if (rc < 0) {
		crypt_keyring_free(kr);
		return rc;
	}
	*out = kr;
	return 0;
}

int
location_open_keys(const cJSON *bsl, const char *credentials,
    struct crypt_keyring *keys, struct store **out, char **prefix_out,
    struct cairn_err *err)
{
	const char *secret, *key_id;
	struct store *inner = NULL;
	int rc, enc;

	*out = NULL;
	if (prefix_out != NULL)
		*prefix_out = NULL;
	enc = location_encryption_ref(bsl, &secret, &key_id, err);
	if (enc < 0 || (enc == 1 && keys == NULL)) {
		crypt_keyring_free(keys);
		if (enc < 0)
			return enc;
		return cairn_err_set(err, CAIRN_EINVAL, "BackupStorageLocation "
		    "%s encrypts with key %s of Secret %s: the keys were not "
		    "given", json_str_or(bsl, "metadata.name", "(unnamed)"),
		    key_id, secret);
	}
	rc = open_or_check(bsl, credentials, 0, &inner, prefix_out, err);
	if (rc < 0 || enc == 0) {
		crypt_keyring_free(keys);
		*out = inner;
		return rc;
	}
	rc = store_open_crypt(inner, keys, json_bool(bsl,
	    "spec.encryption.allowUnencryptedReads", 0), out, err);
	if (rc < 0 && prefix_out != NULL)
		FREE_NULL(*prefix_out);
	return rc;
}

int
location_open(const cJSON *bsl, const char *credentials, struct store **out,
    char **prefix_out, struct cairn_err *err)
{
	return location_open_keys(bsl, credentials, NULL, out, prefix_out, err);
}

int
location_check(const cJSON *bsl, const char *credentials,
    struct cairn_err *err)
{
	const char *secret, *key_id;
	struct store *s = NULL;

	if (location_encryption_ref(bsl, &secret, &key_id, err) < 0)
		return err ? err->code : CAIRN_EINVAL;
	return open_or_check(bsl, credentials, 1, &s, NULL, err);
}
