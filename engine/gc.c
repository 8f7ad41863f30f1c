/*
 * gc.c: the cleanup finalizer and expiry of Backups, see gc.h.
 *
 * Order matters and is the whole design: storage is cleaned before the
 * object may go, so a crash at any point leaves either an object with its
 * files, an object whose files are partly gone (cleaned again on the next
 * pass, deleting keys is idempotent), or nothing; never files without an
 * object that could delete them. The finalizer is added on the first pass
 * that sees a Backup without it, whatever its phase (and at creation by
 * the schedule and sync controllers); it is written with the
 * resourceVersion read, so a 409 here only means "next pass", and the
 * owner's next conditional status write re-reads and finds its claim
 * intact.
 */
#include "config.h"
#include "engine/gc.h"

#include <stdlib.h>
#include <string.h>

#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "engine/bsl.h"
#include "engine/volumes.h"
#include "kube/kube.h"
#include "storage/layout.h"
#include "storage/store.h"

static const struct kube_gvr backups_gvr = { "cairn.io", "v1", "backups" };
static const struct kube_gvr bsl_gvr = { "cairn.io", "v1",
	"backupstoragelocations" };

int
gc_phase_final(const char *phase)
{
	return phase != NULL && (strcmp(phase, "Completed") == 0 ||
	    strcmp(phase, "PartiallyFailed") == 0 ||
	    strcmp(phase, "Failed") == 0 ||
	    strcmp(phase, "FailedValidation") == 0);
}

char *
gc_backup_dir(const struct bsl *l, const char *name)
{
	return layout_backup_dir(bsl_prefix(l), name);
}

struct pick_default {
	cJSON *found;
};

static int
pick_default(void *arg, cJSON *item)
{
	struct pick_default *p = arg;

	if (p->found == NULL && json_bool(item, "spec.default", 0)) {
		p->found = item;
		return KUBE_TAKE;
	}
	return 0;
}

int
gc_open_location(struct kube *k, const char *ns, const char *name,
	struct bsl **out, cJSON **bsl_obj, int *readonly,
	struct cairn_err *err)
{
	cJSON *obj = NULL;
	int rc;

	*out = NULL;
	if (bsl_obj != NULL)
		*bsl_obj = NULL;
	if (readonly != NULL)
		*readonly = 0;
	if (name != NULL && name[0] != '\0') {
		rc = kube_get(k, &bsl_gvr, ns, name, &obj, err);
		if (rc < 0)
			return rc;
	} else {
		struct pick_default p = { NULL };

		rc = kube_list(k, &bsl_gvr, ns, NULL, pick_default, &p, NULL,
		    err);
		if (rc < 0)
			return rc;
		if (p.found == NULL)
			return cairn_err_set(err, CAIRN_ENOTFOUND, "no "
			    "BackupStorageLocation in %s is marked default", ns);
		obj = p.found;
	}
	rc = bsl_open_object(k, ns, obj, out, err);
	if (rc == 0 && readonly != NULL)
		*readonly = bsl_read_only(*out);
	if (rc == 0 && bsl_obj != NULL)
		*bsl_obj = obj;
	else
		cJSON_Delete(obj);
	return rc;
}

/*
 * Delete the backup's volume snapshots (plugins) and VolumePluginBackups.
 * 0 when done; CAIRN_EFAIL when a snapshot could not be deleted: the
 * caller keeps the folder, whose -volumepluginbackups.json.gz is the only
 * record of the snapshot ids, and retries on a later pass.
 */
static int
clean_volumes(struct kube *k, const char *ns, const cJSON *b,
	struct cairn_err *err)
{
	struct volumes_ctx c;
	int failed = 0, rc;

	memset(&c, 0, sizeof c);
	c.kube = k;
	c.namespace = ns;
	c.server_id = "gc";
	rc = volumes_delete_backup(&c, b, &failed, err);
	if (rc < 0)
		return rc;
	if (failed > 0)
		return cairn_err_set(err, CAIRN_EFAIL, "%d volume snapshot%s "
		    "could not be deleted (logged above); the backup's files are "
		    "kept until they are (remove finalizer " GC_FINALIZER " to "
		    "give up on them)", failed, failed == 1 ? "" : "s");
	return 0;
}

/*
 * Remove the backup's volume snapshots, then backups/<name>/ from its
 * location. 0 when clean (or nothing can be cleaned: no such location,
 * read-only), < 0 to retry.
 */
static int
clean_storage(struct kube *k, const char *ns, const cJSON *b,
	struct cairn_err *err)
{
	const char *name = json_str_or(b, "metadata.name", "");
	const char *loc = json_str(b, "spec.storageLocation");
	struct bsl *l = NULL;
	char *dir = NULL;
	size_t n = 0;
	int ro = 0, rc;

	rc = gc_open_location(k, ns, loc, &l, NULL, &ro, err);
	if (rc == CAIRN_ENOTFOUND || rc == CAIRN_EINVAL) {
		log_warn("backup %s/%s: storage location %s: %s; nothing to "
		    "clean", ns, name, loc != NULL ? loc : "(default)", err->msg);
		cairn_err_clear(err);
		/* The snapshot ids are unreadable; its objects still go. */
		return clean_volumes(k, ns, b, err);
	}
	if (rc < 0)
		return rc;
	if (ro) {
		log_info("backup %s/%s: location %s is ReadOnly; its files are "
		    "kept", ns, name, bsl_name(l));
		bsl_free(l);
		return 0;
	}
	dir = gc_backup_dir(l, name);
	if (dir == NULL) {
		bsl_free(l);
		return 0;
	}
	rc = clean_volumes(k, ns, b, err);
	if (rc == 0)
		rc = store_delete_prefix(bsl_store(l), dir, &n, err);
	if (rc == 0)
		log_info("backup %s/%s: %zu objects removed from %s (%s)", ns,
		    name, n, bsl_name(l), dir);
	free(dir);
	bsl_free(l);
	return rc;
}

int
gc_has_finalizer(const cJSON *b)
{
	const cJSON *f;

	cJSON_ArrayForEach(f, json_get(b, "metadata.finalizers"))
		if (cJSON_IsString(f) && strcmp(f->valuestring, GC_FINALIZER) == 0)
			return 1;
	return 0;
}

int
gc_set_finalizer(struct kube *k, const char *ns, const cJSON *b, int present,
	struct cairn_err *err)
{
	cJSON *patch = cJSON_CreateObject(), *md, *list;
	const cJSON *f;
	char *text;
	int rc;

	md = cJSON_AddObjectToObject(patch, "metadata");
	list = cJSON_AddArrayToObject(md, "finalizers");
	cJSON_ArrayForEach(f, json_get(b, "metadata.finalizers"))
		if (!cJSON_IsString(f) || strcmp(f->valuestring, GC_FINALIZER) != 0)
			cJSON_AddItemToArray(list, cJSON_Duplicate(f, 1));
	if (present)
		cJSON_AddItemToArray(list, cJSON_CreateString(GC_FINALIZER));
	cJSON_AddStringToObject(md, "resourceVersion",
	    json_str_or(b, "metadata.resourceVersion", ""));
	text = json_print(patch);
	cJSON_Delete(patch);
	rc = kube_patch(k, &backups_gvr, ns, json_str_or(b, "metadata.name", ""),
	    NULL, KUBE_PATCH_MERGE, text, NULL, err);
	free(text);
	return rc;
}

struct gc_pass {
	struct kube *k;
	const char *ns;
	int64_t now;
	int expire;
	struct gc_stats st;
};

static void
gc_one(struct gc_pass *g, const cJSON *b)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *name = json_str_or(b, "metadata.name", "");
	const char *phase = json_str_or(b, "status.phase", "");
	const char *exp = json_str(b, "status.expiration");
	int deleting = json_get(b, "metadata.deletionTimestamp") != NULL;
	int fin = gc_has_finalizer(b), rc;
	int64_t exp_us;

	if (deleting && fin) {
		if (strcmp(phase, "InProgress") == 0)
			return;		/* cleaned once it stops writing */
		if (clean_storage(g->k, g->ns, b, &err) < 0)
			goto fail;
		rc = gc_set_finalizer(g->k, g->ns, b, 0, &err);
		if (rc < 0 && rc != CAIRN_ENOTFOUND && rc != CAIRN_ECONFLICT)
			goto fail;
		if (rc == 0) {
			g->st.finalized++;
			log_info("backup %s/%s: finalizer removed, object released",
			    g->ns, name);
		}
		return;
	}
	if (deleting)
		return;
	if (!fin) {
		/*
		 * Any phase: a Backup deleted while it runs must still have
		 * its files cleaned. The owner's next status write gets a 409,
		 * re-reads, sees its own claim and goes on.
		 */
		rc = gc_set_finalizer(g->k, g->ns, b, 1, &err);
		if (rc == 0)
			g->st.finalizers_added++;
		else if (rc != CAIRN_ECONFLICT && rc != CAIRN_ENOTFOUND)
			goto fail;
		return;
	}
	if (!gc_phase_final(phase))
		return;
	if (g->expire && exp != NULL && time_parse(exp, &exp_us) == 0 &&
	    exp_us <= g->now) {
		struct kube_delete_opts d;
		cJSON *reply = NULL;
		int ro = 0;
		struct bsl *l = NULL;

		if (gc_open_location(g->k, g->ns, json_str(b,
		    "spec.storageLocation"), &l, NULL, &ro, &err) == 0) {
			bsl_free(l);
			if (ro) {
				log_info("backup %s/%s expired but its location is "
				    "ReadOnly: kept", g->ns, name);
				return;
			}
		}
		cairn_err_clear(&err);
		log_info("backup %s/%s expired at %s: deleting", g->ns, name, exp);
		if (clean_storage(g->k, g->ns, b, &err) < 0)
			goto fail;
		memset(&d, 0, sizeof d);
		d.uid = json_str(b, "metadata.uid");
		d.propagation = "Background";
		rc = kube_delete(g->k, &backups_gvr, g->ns, name, &d, &reply, &err);
		if (rc == CAIRN_ENOTFOUND || rc == CAIRN_ECONFLICT) {
			cJSON_Delete(reply);
			return;
		}
		if (rc < 0)
			goto fail;
		g->st.expired++;
		/* Storage is already clean: release the object at once. */
		if (json_get(reply, "metadata.deletionTimestamp") != NULL &&
		    gc_has_finalizer(reply))
			(void)gc_set_finalizer(g->k, g->ns, reply, 0, NULL);
		cJSON_Delete(reply);
	}
	return;
fail:
	g->st.errors++;
	log_warn("backup %s/%s: %s (retried on the next pass)", g->ns, name,
	    err.msg);
}

static int
gc_item(void *arg, cJSON *item)
{
	gc_one(arg, item);
	return 0;
}

int
gc_tick(struct kube *k, const char *ns, int64_t now_us, int expire,
	struct gc_stats *stats, struct cairn_err *err)
{
	struct gc_pass g;
	int rc;

	memset(&g, 0, sizeof g);
	g.k = k;
	g.ns = ns;
	g.now = now_us;
	g.expire = expire;
	rc = kube_list(k, &backups_gvr, ns, NULL, gc_item, &g, NULL, err);
	if (stats != NULL)
		*stats = g.st;
	return rc;
}
