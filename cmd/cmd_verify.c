/*
 * cmd_verify.c: `cairn backup verify NAME`: read a backup back from
 * storage and check it (engine/verify.h says what is checked).
 *
 * With a cluster, the Backup object and its storage location (with the
 * Secrets it names: credentials, encryption keys) are read from it.
 * Without one, --location-from-file names a BackupStorageLocation as JSON
 * or YAML (e.g. `kubectl get bsl default -o yaml` saved earlier), its
 * credentials come from --credential-file and its keys from --key-file,
 * and the Backup is the velero-backup.json stored with the backup: what a
 * user has left after losing the cluster.
 *
 * The CLI prints the result and never writes it into the Backup (the
 * servers' periodic verification does, `cairn server --verify-period`).
 * Exit 0: every check passed; 1: a check failed (the message names the
 * part or file) or the backup could not be read.
 */
#include "config.h"
#include "cmd/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/codec.h"
#include "base/jsonutil.h"
#include "base/mem.h"
#include "base/util.h"
#include "engine/bsl.h"
#include "engine/verify.h"
#include "kube/kube.h"
#include "storage/crypt.h"
#include "storage/location.h"
#include "storage/store.h"

#define VERIFY_BSL_FILE_MAX (1u << 20)
#define VERIFY_CRED_FILE_MAX (64u << 10)

static const struct kube_gvr gvr_backups = { "cairn.io", "v1", "backups" };

/* A whole small file; owned text or NULL with err. */
static char *
slurp(const char *path, size_t cap, size_t *len, struct cairn_err *err)
{
	FILE *f = fopen(path, "rb");
	struct buf b;
	char tmp[4096];
	size_t n;

	if (f == NULL) {
		cairn_err_errno(err, CAIRN_EINVAL, errno, "%s", path);
		return NULL;
	}
	buf_init(&b, cap);
	while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) {
		if (buf_append(&b, tmp, n) < 0) {
			fclose(f);
			buf_free(&b);
			cairn_err_set(err, CAIRN_ETOOBIG, "%s is larger than %zu "
			    "bytes", path, cap);
			return NULL;
		}
	}
	fclose(f);
	if (b.data == NULL)
		buf_append(&b, "", 0);
	return buf_take(&b, len);
}

/* The location of --location-from-file, opened with the offline Secrets. */
static int
open_offline(const struct flagset *fs, struct store **s, char **prefix,
    struct cairn_err *err)
{
	const char *path = flag_str(fs, F_LOCATION_FROM_FILE), *sname, *kid;
	struct crypt_keyring *kr = NULL;
	char *text, *creds = NULL;
	size_t len = 0;
	cJSON *bsl;
	int rc;

	text = slurp(path, VERIFY_BSL_FILE_MAX, &len, err);
	if (text == NULL)
		return err->code;
	bsl = json_parse(text, len, NULL);
	if (bsl == NULL)	/* YAML (JSON is YAML too, but its errors are clearer) */
		bsl = codec_yaml_doc(text, len, CODEC_YAML_TYPED, path, err);
	free(text);
	if (!cJSON_IsObject(bsl) || json_get(bsl, "spec") == NULL) {
		cJSON_Delete(bsl);
		return cairn_err_set(err, CAIRN_EINVAL, "%s is not a "
		    "BackupStorageLocation (JSON or YAML with a spec)", path);
	}
	if (flag_str(fs, F_CREDENTIAL_FILE) != NULL) {
		creds = slurp(flag_str(fs, F_CREDENTIAL_FILE),
		    VERIFY_CRED_FILE_MAX, &len, err);
		if (creds == NULL) {
			cJSON_Delete(bsl);
			return err->code;
		}
	}
	rc = cli_keyring(fs, &kr, err);
	if (rc >= 0 && location_encryption_ref(bsl, &sname, &kid, err) == 1 &&
	    kr == NULL)
		rc = cairn_err_set(err, CAIRN_EINVAL, "the location encrypts "
		    "(key %s of Secret %s): give its keys with --key-file", kid,
		    sname);
	if (rc >= 0)
		rc = location_open_keys(bsl, creds, kr, s, prefix, err);
	else
		crypt_keyring_free(kr);
	cJSON_Delete(bsl);
	free(creds);
	return rc < 0 ? rc : 0;
}

int
cmd_backup_verify(const struct cli_command *cmd, struct flagset *fs)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct verify_report r;
	struct buf msg;
	struct kube *k = NULL;
	struct bsl *loc = NULL;
	struct store *s = NULL;
	cJSON *b = NULL;
	char *prefix = NULL;
	const char *name, *ns = flag_str(fs, F_NAMESPACE);
	int rc;

	if (fs->nargs != 1)
		return cli_usage_error(cmd, "backup verify needs one NAME");
	name = fs->args[0];
	if (flag_str(fs, F_LOCATION_FROM_FILE) != NULL) {
		if (open_offline(fs, &s, &prefix, &err) < 0) {
			rc = cli_fail("%s", err.msg);
			goto out;
		}
	} else {
		if (flag_given(fs, F_KEY_FILE) || flag_given(fs, F_CREDENTIAL_FILE)) {
			rc = cli_usage_error(cmd, "--key-file and --credential-file "
			    "go with --location-from-file (with a cluster, the "
			    "location's Secrets are used)");
			goto out;
		}
		if (cli_open_kube(fs, &k) < 0) {
			rc = CLI_EXIT_FAIL;
			goto out;
		}
		rc = cli_get_named(k, &gvr_backups, ns, "backup", name, &b);
		if (rc != 0)
			goto out;
		if (bsl_open(k, ns, json_str(b, "spec.storageLocation"), &loc,
		    &err) < 0) {
			rc = cli_fail("backup %s: %s", name, err.msg);
			goto out;
		}
		s = bsl_store(loc);
		prefix = xstrdup(bsl_prefix(loc));
	}
	fprintf(stderr, "verifying backup %s in %s ...\n", name,
	    store_describe(s));
	if (verify_backup(s, prefix, name, b, NULL, &r, &err) < 0) {
		rc = cli_fail("backup %s could not be verified: %s", name, err.msg);
		goto out;
	}
	/* names and keys come from outside: control characters escaped */
	buf_init(&msg, sizeof r.message * 4);
	if (str_escape_text(&msg, r.message) < 0)
		buf_puts(&msg, "(message not printable)");
	printf("Backup %s: %s: %s\n", name, r.passed ? "verified" :
	    "FAILED verification", buf_cstr(&msg));
	buf_free(&msg);
	rc = r.passed ? CLI_EXIT_OK : CLI_EXIT_FAIL;
out:
	if (loc == NULL)
		store_free(s);
	bsl_free(loc);
	free(prefix);
	cJSON_Delete(b);
	kube_free(k);
	return rc;
}
