/*
 * bsl.c: BackupStorageLocation object -> opened store, through
 * storage/location.h; the credentials Secret is read here because
 * storage/ does not talk to Kubernetes.
 */
#include "config.h"
#include "engine/bsl.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/codec.h"
#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"
#include "kube/kube.h"
#include "storage/location.h"
#include "storage/store.h"

#define BSL_SECRET_MAX (1u << 20)	/* a credentials file */

static const struct kube_gvr bsl_gvr = { "cairn.io", "v1",
	"backupstoragelocations" };

struct bsl {
	char *name;
	char *prefix;		/* owned, "" when none */
	struct store *store;
	int read_only;		/* spec.accessMode ReadOnly */
};

/*
 * The keys of a location with spec.encryption, from its Secret: *out NULL
 * when it does not encrypt. A missing Secret or key is CAIRN_EINVAL (a
 * Backup's validation error), an API failure its own code.
 */
static int
bsl_keys(struct kube *k, const char *ns, const cJSON *obj, const char *name,
	struct crypt_keyring **out, struct cairn_err *err)
{
	const char *sname, *key_id;
	cJSON *sec = NULL;
	char *what;
	int rc;

	*out = NULL;
	rc = location_encryption_ref(obj, &sname, &key_id, err);
	if (rc <= 0)
		return rc;
	rc = kube_get(k, &KUBE_GVR("", "v1", "secrets"), ns, sname, &sec, err);
	if (rc < 0) {
		cairn_err_prefix(err, "storage location \"%s\": encryption "
		    "key Secret", name);
		return rc == CAIRN_ENOTFOUND ? CAIRN_EINVAL : rc;
	}
	what = xasprintf("storage location \"%s\": Secret %s/%s", name, ns,
	    sname);
	rc = location_keyring(json_get(sec, "data"), key_id, what, out, err);
	free(what);
	cJSON_Delete(sec);
	return rc;
}

int
bsl_open_object(struct kube *k, const char *ns, const cJSON *obj,
	struct bsl **out, struct cairn_err *err)
{
	const char *sname = NULL, *skey = NULL;
	struct crypt_keyring *keys = NULL;
	char *creds = NULL;
	struct bsl *l;
	int rc;

	*out = NULL;
	l = xcalloc(1, sizeof *l);
	l->name = xstrdup(json_str_or(obj, "metadata.name", ""));
	l->read_only = strcmp(json_str_or(obj, "spec.accessMode", "ReadWrite"),
	    "ReadOnly") == 0;
	if (location_credential_ref(obj, &sname, &skey)) {
		cJSON *sec = NULL;
		const cJSON *v;

		rc = kube_get(k, &KUBE_GVR("", "v1", "secrets"), ns, sname,
		    &sec, err);
		if (rc < 0) {
			cairn_err_prefix(err, "storage location \"%s\": "
			    "credential Secret", l->name);
			if (rc == CAIRN_ENOTFOUND)
				rc = CAIRN_EINVAL;
			goto fail;
		}
		v = cJSON_GetObjectItemCaseSensitive(json_get(sec, "data"),
		    skey);
		if (cJSON_IsString(v) && codec_b64_decode(v->valuestring,
		    BSL_SECRET_MAX, &creds, NULL) < 0)
			creds = NULL;
		cJSON_Delete(sec);
		if (creds == NULL) {
			rc = cairn_err_set(err, CAIRN_EINVAL, "storage location "
			    "\"%s\": Secret %s has no usable key \"%s\"",
			    l->name, sname, skey);
			goto fail;
		}
	}
	rc = bsl_keys(k, ns, obj, l->name, &keys, err);
	if (rc == 0)
		rc = location_open_keys(obj, creds, keys, &l->store, &l->prefix,
		    err);
	free(creds);
	if (rc < 0)
		goto fail;
	if (l->prefix == NULL)
		l->prefix = xstrdup("");
	*out = l;
	return 0;
fail:
	bsl_free(l);
	return rc;
}

int
bsl_open(struct kube *k, const char *ns, const char *name, struct bsl **out,
	struct cairn_err *err)
{
	struct kube_gvr g = bsl_gvr;
	cJSON *obj = NULL, *list = NULL;
	char *path;
	const cJSON *it;
	int rc;

	*out = NULL;
	if (name != NULL && name[0] != '\0') {
		rc = kube_get(k, &g, ns, name, &obj, err);
		if (rc == CAIRN_ENOTFOUND)
			return cairn_err_set(err, CAIRN_ENOTFOUND,
			    "a BackupStorageLocation CRD with the name "
			    "specified in the backup spec needs to be created "
			    "before this backup can be executed. Error: "
			    "backupstoragelocations.cairn.io \"%s\" not found",
			    name);
		if (rc < 0)
			return rc;
		rc = bsl_open_object(k, ns, obj, out, err);
		cJSON_Delete(obj);
		return rc;
	}
	path = kube_path(&g, ns, NULL, NULL);
	rc = kube_request(k, "GET", path, NULL, NULL, 0, 1, &list, err);
	free(path);
	if (rc < 0)
		return rc;
	cJSON_ArrayForEach(it, json_get(list, "items")) {
		if (json_bool(it, "spec.default", 0)) {
			rc = bsl_open_object(k, ns, it, out, err);
			cJSON_Delete(list);
			return rc;
		}
	}
	/* None marked default: the one named "default", as Velero does. */
	cJSON_ArrayForEach(it, json_get(list, "items")) {
		if (strcmp(json_str_or(it, "metadata.name", ""),
		    BSL_DEFAULT_NAME) == 0) {
			rc = bsl_open_object(k, ns, it, out, err);
			cJSON_Delete(list);
			return rc;
		}
	}
	cJSON_Delete(list);
	return cairn_err_set(err, CAIRN_ENOTFOUND, "no storage location "
	    "given, no BackupStorageLocation in %s is marked default and "
	    "none is named \"%s\"", ns, BSL_DEFAULT_NAME);
}

void
bsl_free(struct bsl *l)
{
	if (l == NULL)
		return;
	store_free(l->store);
	free(l->name);
	free(l->prefix);
	free(l);
}

struct store *
bsl_store(struct bsl *l)
{
	return l->store;
}

const char *
bsl_name(const struct bsl *l)
{
	return l->name;
}

int
bsl_read_only(const struct bsl *l)
{
	return l->read_only;
}

const char *
bsl_key_id(const struct bsl *l)
{
	return store_encryption_key_id(l->store);
}

const char *
bsl_prefix(const struct bsl *l)
{
	return l->prefix;
}

char *
bsl_backup_key(const struct bsl *l, const char *backup,
	enum layout_backup_file f)
{
	return layout_backup_key(l->prefix, backup, f);
}

int
bsl_ensure(struct kube *k, const char *ns, const char *name,
	const char *spec_json, struct cairn_err *err)
{
	cJSON *spec = cJSON_Parse(spec_json), *obj, *md;
	int rc;

	if (!cJSON_IsObject(spec)) {
		cJSON_Delete(spec);
		return cairn_err_set(err, CAIRN_EINVAL, "the location spec is "
		    "not a JSON object");
	}
	obj = cJSON_CreateObject();
	cJSON_AddStringToObject(obj, "apiVersion", "cairn.io/v1");
	cJSON_AddStringToObject(obj, "kind", "BackupStorageLocation");
	md = cJSON_AddObjectToObject(obj, "metadata");
	cJSON_AddStringToObject(md, "name", name);
	cJSON_AddStringToObject(md, "namespace", ns);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(md, "labels"),
	    "app.kubernetes.io/name", "cairn");
	cJSON_AddItemToObject(obj, "spec", spec);
	rc = kube_create(k, &bsl_gvr, ns, obj, NULL, err);
	cJSON_Delete(obj);
	if (rc == CAIRN_EEXIST) {
		cairn_err_clear(err);
		return 0;
	}
	return rc < 0 ? rc : 1;
}

/* ---- health from the backups' own storage outcomes ------------------- */

#define BSL_TRACK_MAX	64	/* locations remembered */

static pthread_mutex_t health_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char name[254];
	int fails;		/* consecutive storage failures */
} health[BSL_TRACK_MAX];

/* Write phase (and message) into the location's status; best effort. */
static void
bsl_set_phase(struct kube *k, const char *ns, const char *name,
	const char *phase, const char *message)
{
	struct kube_gvr g = bsl_gvr;
	struct cairn_err err = CAIRN_ERR_INIT;
	cJSON *obj = NULL;

	if (kube_get(k, &g, ns, name, &obj, &err) < 0)
		goto out;
	if (strcmp(json_str_or(obj, "status.phase", ""), phase) == 0)
		goto out;
	json_ensure(obj, "status");
	json_set_str(obj, "status.phase", phase);
	if (message != NULL)
		json_set_str(obj, "status.message", message);
	else
		json_delete(obj, "status.message");
	if (kube_update_status(k, &g, ns, obj, NULL, &err) == 0) {
		if (strcmp(phase, "Available") == 0)
			log_info("storage location %s/%s is Available", ns, name);
		else
			log_warn("storage location %s/%s is %s: %s", ns, name,
			    phase, message != NULL ? message : "");
	}
out:
	if (err.code != 0 && err.code != CAIRN_ECONFLICT)
		log_debug("storage location %s/%s: %s", ns, name, err.msg);
	cJSON_Delete(obj);
}

void
bsl_note_storage(struct kube *k, const char *ns, const char *name, int ok,
	const char *why)
{
	int i, slot = -1, fails = 0;
	char msg[CAIRN_ERR_MSG_MAX + 100];

	if (name == NULL || name[0] == '\0' || strlen(name) >= sizeof health[0].name)
		return;
	pthread_mutex_lock(&health_mu);
	for (i = 0; i < BSL_TRACK_MAX; i++) {
		if (strcmp(health[i].name, name) == 0) {
			slot = i;
			break;
		}
		if (slot < 0 && health[i].name[0] == '\0')
			slot = i;
	}
	if (slot >= 0) {
		snprintf(health[slot].name, sizeof health[slot].name, "%s", name);
		fails = health[slot].fails;
		health[slot].fails = ok ? 0 : fails + 1;
	}
	pthread_mutex_unlock(&health_mu);
	if (slot < 0)
		return;
	if (ok && fails >= BSL_FAILURES_UNAVAILABLE)
		bsl_set_phase(k, ns, name, "Available", NULL);
	else if (!ok && fails + 1 >= BSL_FAILURES_UNAVAILABLE) {
		str_format(msg, sizeof msg, "%d backups in a row failed on this "
		    "storage; the last: %s", fails + 1, why != NULL ? why : "");
		bsl_set_phase(k, ns, name, "Unavailable", msg);
	}
}
