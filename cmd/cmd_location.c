/*
 * cmd_location.c: `cairn backup-location create|get`.
 *
 * create builds a BackupStorageLocation (cairn.io/v1, Velero's field
 * names) from the flags, checks it with location_check() as the server
 * will open it (without creating anything on this machine) (a bad provider, missing bucket or path, bad
 * endpoint or credentials file fails here, before anything is written),
 * stores --credential-file in a Secret "cairn-location-<NAME>" (key
 * "cloud") that spec.credential names, and creates the object. --default
 * also clears `default` on the other locations, as Velero does. No request
 * is made to the storage itself: the server validates reachability and
 * publishes status.phase.
 *
 * get prints the locations (or one) as a table like Velero's, or as JSON /
 * YAML with -o.
 */
#include "config.h"
#include "cmd/cli.h"
#include "engine/bsl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "base/buf.h"
#include "base/codec.h"
#include "base/jsonutil.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"
#include "cmd/output.h"
#include "kube/kube.h"
#include "kube/label.h"
#include "storage/layout.h"
#include "storage/location.h"

#define LOC_CRED_KEY "cloud"
#define LOC_CRED_MAX (64u << 10)	/* a credentials file, read whole */

static const struct kube_gvr gvr_locations = { "cairn.io", "v1",
	"backupstoragelocations" };
static const struct kube_gvr gvr_secrets = { "", "v1", "secrets" };

/* The location object the flags describe (owned), or NULL after a message. */
static cJSON *
build_location(const struct cli_command *cmd, const struct flagset *fs,
    const char *name, const char *ns, const char *secret, int *usage)
{
	const char *provider = flag_str(fs, F_PROVIDER);
	const char *bucket = flag_str(fs, F_BUCKET);
	const char *prefix = flag_str(fs, F_PREFIX);
	const char *mode;
	char *const *config = flag_list(fs, F_CONFIG);
	struct cairn_err err = CAIRN_ERR_INIT;
	cJSON *obj, *spec;

	*usage = 1;
	if (provider == NULL || *provider == '\0')
		return cli_usage_error(cmd, "--provider is required (fs or s3)"), NULL;
	if (strcmp(provider, "aws") == 0)
		provider = "s3";
	if (strcmp(provider, "fs") != 0 && strcmp(provider, "s3") != 0)
		return cli_usage_error(cmd, "--provider must be fs or s3, not \"%s\"",
		    provider), NULL;
	if (strcmp(provider, "s3") == 0 && (bucket == NULL || *bucket == '\0'))
		return cli_usage_error(cmd, "--provider s3 needs --bucket"), NULL;
	mode = flag_str(fs, F_ACCESS_MODE);
	if (mode != NULL && strcmp(mode, "ReadWrite") != 0 &&
	    strcmp(mode, "ReadOnly") != 0)
		return cli_usage_error(cmd, "--access-mode must be ReadWrite or "
		    "ReadOnly, not \"%s\"", mode), NULL;
	spec = cli_location_spec(provider, bucket, prefix, config, secret,
	    LOC_CRED_KEY, flag_bool(fs, F_DEFAULT), &err);
	if (spec == NULL)
		return cli_usage_error(cmd, "%s", err.msg), NULL;
	if (mode != NULL)
		json_set_str(spec, "accessMode", mode);
	obj = cJSON_CreateObject();
	cJSON_AddStringToObject(obj, "apiVersion", "cairn.io/v1");
	cJSON_AddStringToObject(obj, "kind", "BackupStorageLocation");
	json_set_str(obj, "metadata.name", name);
	json_set_str(obj, "metadata.namespace", ns);
	cJSON_AddItemToObject(obj, "spec", spec);
	*usage = 0;
	return obj;
}

/* Create or replace the credentials Secret. */
static int
put_secret(struct kube *k, const char *ns, const char *name, const char *loc,
    const char *creds, struct cairn_err *err)
{
	cJSON *sec = cJSON_CreateObject(), *old = NULL;
	char *data = codec_b64_encode(creds, strlen(creds)), *lv;
	int rc;

	cJSON_AddStringToObject(sec, "apiVersion", "v1");
	cJSON_AddStringToObject(sec, "kind", "Secret");
	json_set_str(sec, "metadata.name", name);
	json_set_str(sec, "metadata.namespace", ns);
	lv = kube_label_value(loc);
	cJSON_AddStringToObject(json_ensure(sec, "metadata.labels"),
	    "cairn.io/backup-location", lv);
	free(lv);
	cJSON_AddStringToObject(sec, "type", "Opaque");
	cJSON_AddStringToObject(json_ensure(sec, "data"), LOC_CRED_KEY, data);
	rc = kube_create(k, &gvr_secrets, ns, sec, NULL, err);
	if (rc == CAIRN_EEXIST) {
		rc = kube_get(k, &gvr_secrets, ns, name, &old, err);
		if (rc == 0) {
			json_set_str(sec, "metadata.resourceVersion",
			    json_str_or(old, "metadata.resourceVersion", ""));
			rc = kube_update(k, &gvr_secrets, ns, sec, NULL, err);
		}
	}
	explicit_bzero(data, strlen(data));
	free(data);
	cJSON_Delete(old);
	cJSON_Delete(sec);
	return rc;
}

struct clear_default {
	struct kube *k;
	const char *ns;
	const char *keep;
	int rc;
	struct cairn_err *err;
};

static int
clear_default_item(void *arg, cJSON *item)
{
	struct clear_default *c = arg;
	const char *name = json_str_or(item, "metadata.name", "");

	if (strcmp(name, c->keep) == 0 || !json_bool(item, "spec.default", 0))
		return 0;
	c->rc = kube_patch(c->k, &gvr_locations, c->ns, name, NULL,
	    KUBE_PATCH_MERGE, "{\"spec\":{\"default\":false}}", NULL, c->err);
	if (c->rc == 0)
		printf("Backup storage location \"%s\" is no longer the default.\n",
		    name);
	return c->rc < 0 ? 1 : 0;
}

int
cmd_location_create(const struct cli_command *cmd, struct flagset *fs)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *ns = flag_str(fs, F_NAMESPACE), *name, *cred_path;
	char *creds = NULL, *secret = NULL;
	struct kube *k = NULL;
	cJSON *obj = NULL;
	int rc, usage;

	if (fs->nargs != 1)
		return cli_usage_error(cmd, "backup-location create needs one NAME");
	name = fs->args[0];
	if (!layout_name_ok(name))
		return cli_usage_error(cmd, "\"%s\" is not a valid name", name);
	cred_path = flag_str(fs, F_CREDENTIAL_FILE);
	if (cred_path != NULL && *cred_path != '\0') {
		if (buf_read_file(cred_path, LOC_CRED_MAX, "--credential-file",
		    &creds, NULL, &err) < 0)
			return cli_fail("%s", err.msg);
		secret = xasprintf("cairn-location-%s", name);
	}
	obj = build_location(cmd, fs, name, ns, secret, &usage);
	if (obj == NULL) {
		rc = CLI_EXIT_USAGE;
		goto out;
	}
	/* Check it as the server will open it (no side effect here). */
	rc = location_check(obj, creds, &err);
	if (rc < 0) {
		rc = cli_fail("%s", err.msg);
		goto out;
	}
	if (cli_open_kube(fs, &k) < 0) {
		rc = CLI_EXIT_FAIL;
		goto out;
	}
	if (creds != NULL) {
		rc = put_secret(k, ns, secret, name, creds, &err);
		if (rc < 0) {
			rc = cli_fail("storing --credential-file in Secret %s/%s: %s",
			    ns, secret, err.msg);
			goto out;
		}
	}
	rc = kube_create(k, &gvr_locations, ns, obj, NULL, &err);
	if (rc == CAIRN_EEXIST) {
		rc = cli_fail("backup-location \"%s\" already exists in namespace %s",
		    name, ns);
		goto out;
	}
	if (rc < 0) {
		rc = cli_fail("creating backup-location \"%s\": %s", name, err.msg);
		goto out;
	}
	printf("Backup storage location \"%s\" created (%s%s%s%s).\n", name,
	    json_str_or(obj, "spec.provider", ""),
	    json_str(obj, "spec.config.path") ? " " : " bucket ",
	    json_str(obj, "spec.config.path") ? json_str(obj, "spec.config.path") :
	    json_str_or(obj, "spec.objectStorage.bucket", ""),
	    json_str(obj, "spec.objectStorage.prefix") ? ", with prefix" : "");
	if (strcmp(json_str_or(obj, "spec.accessMode", ""), "ReadOnly") == 0)
		printf("It is ReadOnly: backups are read from it, never written "
		    "or deleted there.\n");
	if (flag_bool(fs, F_DEFAULT)) {
		struct clear_default c = { k, ns, name, 0, &err };

		rc = kube_list(k, &gvr_locations, ns, NULL, clear_default_item, &c,
		    NULL, &err);
		if (rc < 0 || c.rc < 0) {
			rc = cli_fail("clearing the default flag of other locations: %s",
			    err.msg);
			goto out;
		}
	}
	rc = CLI_EXIT_OK;
out:
	if (creds != NULL) {
		explicit_bzero(creds, strlen(creds));
		free(creds);
	}
	free(secret);
	cJSON_Delete(obj);
	kube_free(k);
	return rc;
}

/* ---- get -------------------------------------------------------------- */

struct loc_collect {
	cJSON **items;
	size_t n, alloc;
};

static int
collect(void *arg, cJSON *item)
{
	struct loc_collect *c = arg;

	if (c->n == c->alloc) {
		c->alloc = c->alloc ? 2 * c->alloc : 16;
		c->items = xreallocarray(c->items, c->alloc, sizeof *c->items);
	}
	c->items[c->n++] = item;
	return KUBE_TAKE;
}

static void
table_row(struct out_table *t, const cJSON *o, int64_t now, int by_name)
{
	const char *bucket = json_str_or(o, "spec.objectStorage.bucket", "");
	const char *prefix = json_str_or(o, "spec.objectStorage.prefix", "");
	const char *provider = json_str_or(o, "spec.provider", "");
	const char *path = json_str(o, "spec.config.path");
	char where[600], age[OUT_AGE_MAX];
	const char *validated = json_str(o, "status.lastValidationTime");

	if (strcmp(provider, "fs") == 0 && path != NULL)
		snprintf(where, sizeof where, "%s%s%s", path, *prefix ? "/" : "",
		    prefix);
	else
		snprintf(where, sizeof where, "%s%s%s", bucket, *prefix ? "/" : "",
		    prefix);
	if (validated != NULL)
		out_age(validated, now, age);
	else
		snprintf(age, sizeof age, "<none>");
	out_table_row(t, (const char *[]){
	    json_str_or(o, "metadata.name", ""), provider, where,
	    json_str_or(o, "status.phase", "Unknown"),
	    validated ? age : "<none>",
	    json_str_or(o, "spec.accessMode", "ReadWrite"),
	    json_bool(o, "spec.default", 0) ? "true" : by_name &&
	    strcmp(json_str_or(o, "metadata.name", ""), BSL_DEFAULT_NAME) == 0 ?
	    "true (by its name)" : "false" });
}

int
cmd_location_get(const struct cli_command *cmd, struct flagset *fs)
{
	static const char *const headers[] = { "NAME", "PROVIDER",
		"BUCKET/PREFIX", "PHASE", "LAST VALIDATED", "ACCESS MODE",
		"DEFAULT", NULL };
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *ns = flag_str(fs, F_NAMESPACE);
	struct loc_collect c = { NULL, 0, 0 };
	struct out_table *t;
	enum out_format fmt;
	struct kube *k = NULL;
	cJSON *one = NULL, *doc;
	size_t i;
	int rc;

	if (fs->nargs > 1)
		return cli_usage_error(cmd, "backup-location get takes at most one NAME");
	if (out_parse_format(flag_str(fs, F_OUTPUT), &fmt, &err) < 0)
		return cli_usage_error(cmd, "%s", err.msg);
	if (kube_open_flags(fs, &k, &err) < 0)
		return cli_fail("%s", err.msg);
	if (fs->nargs == 1) {
		rc = kube_get(k, &gvr_locations, ns, fs->args[0], &one, &err);
		if (rc == CAIRN_ENOTFOUND) {
			rc = cli_fail("backup-location \"%s\" not found in namespace %s",
			    fs->args[0], ns);
			goto out;
		}
		if (rc < 0) {
			rc = cli_fail("%s", err.msg);
			goto out;
		}
		collect(&c, one);
	} else {
		rc = kube_list(k, &gvr_locations, ns, NULL, collect, &c, NULL, &err);
		if (rc < 0) {
			rc = cli_fail("listing backup-locations in namespace %s: %s",
			    ns, err.msg);
			goto out;
		}
	}
	if (fmt != OUT_TABLE) {
		doc = fs->nargs == 1 ? c.items[0] : out_list_wrap(c.items, c.n);
		rc = out_print_doc(stdout, fmt, doc, &err) < 0 ?
		    cli_fail("%s", err.msg) : CLI_EXIT_OK;
		if (fs->nargs != 1)
			cJSON_Delete(doc);
	} else if (c.n == 0) {
		fprintf(stderr, "No backup storage locations found in namespace %s.\n",
		    ns);
		rc = CLI_EXIT_OK;
	} else {
		int marked = 0;

		/* none marked default: "default" is (Velero's rule, bsl_open) */
		for (i = 0; i < c.n; i++)
			marked |= json_bool(c.items[i], "spec.default", 0);
		t = out_table_new(headers);
		for (i = 0; i < c.n; i++)
			table_row(t, c.items[i], time_now_us(),
			    !marked && fs->nargs == 0);
		out_table_print(t, stdout);
		out_table_free(t);
		rc = CLI_EXIT_OK;
	}
out:
	for (i = 0; i < c.n; i++)
		cJSON_Delete(c.items[i]);
	free(c.items);
	kube_free(k);
	return rc;
}
