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
#include "engine/claim.h"
#include "base/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "engine/bsl.h"
#include "engine/chunks.h"
#include "engine/volumes.h"
#include "kube/kube.h"
#include "storage/layout.h"
#include "storage/store.h"

static const struct kube_gvr backups_gvr = { "cairn.io", "v1", "backups" };

int
gc_phase_final(const char *phase)
{
	return phase != NULL && (strcmp(phase, "Completed") == 0 ||
	    strcmp(phase, "PartiallyFailed") == 0 ||
	    strcmp(phase, "Failed") == 0 ||
	    strcmp(phase, "FailedValidation") == 0);
}

/*
 * The plugins delete the backup's volume snapshots, then its
 * VolumePluginBackups go. 0, CAIRN_EFAIL when a snapshot could not be
 * deleted (out->snapshots_failed), or the error of listing them.
 */
static int
clean_volumes(const struct volumes_ctx *c, const cJSON *b,
	struct gc_clean *out, struct cairn_err *err)
{
	int failed = 0, rc;

	rc = volumes_delete_backup(c, b, &failed, err);
	if (rc < 0)
		return cairn_err_prefix(err, "volume snapshots");
	out->snapshots_failed = failed;
	if (failed > 0)
		return cairn_err_set(err, CAIRN_EFAIL, "%d volume snapshot%s "
		    "could not be deleted (logged above): the backup's files "
		    "are kept", failed, failed == 1 ? "" : "s");
	return 0;
}

static int
clean_backup(const struct volumes_ctx *c, const cJSON *b, int lost_ok,
	struct gc_clean *out, struct cairn_err *err)
{
	const char *name = json_str_or(b, "metadata.name", "");
	const char *loc = json_str(b, "spec.storageLocation");
	struct bsl *l = NULL;
	char *dir = NULL;
	int rc;

	memset(out, 0, sizeof *out);
	rc = bsl_open(c->kube, c->namespace, loc, &l, err);
	if ((rc == CAIRN_ENOTFOUND || rc == CAIRN_EINVAL) && lost_ok) {
		snprintf(out->lost, sizeof out->lost, "%.500s", err->msg);
		cairn_err_clear(err);
		/* The snapshot ids are unreadable; its objects still go. */
		return clean_volumes(c, b, out, err);
	}
	if (rc < 0)
		return rc;
	snprintf(out->location, sizeof out->location, "%s", bsl_name(l));
	if (bsl_read_only(l)) {
		rc = cairn_err_set(err, CAIRN_EREADONLY, "storage location %s "
		    "is ReadOnly (spec.accessMode): nothing deleted",
		    bsl_name(l));
		goto out;
	}
	dir = layout_backup_dir(bsl_prefix(l), name);
	if (dir == NULL)
		goto out;	/* no key can hold it: nothing stored */
	rc = clean_volumes(c, b, out, err);
	/* chunk packs only this backup used, while its folder says which */
	if (rc == 0)
		rc = chunks_release(bsl_store(l), bsl_prefix(l), name,
		    &out->packs_removed, &out->pack_bytes, err);
	if (rc == 0)
		rc = store_delete_prefix(bsl_store(l), dir, &out->removed, err);
	if (rc == 0)
		log_info("backup %s/%s: %zu objects removed from %s (%s)",
		    c->namespace, name, out->removed, bsl_name(l), dir);
	else if (out->snapshots_failed == 0)
		cairn_err_prefix(err, "deleting %s in storage location %s",
		    dir, bsl_name(l));
out:
	free(dir);
	bsl_free(l);
	return rc;
}

/* Counted as Velero's backup_deletion_* (schedule label of the backup). */
int
gc_clean_backup(const struct volumes_ctx *c, const cJSON *b, int lost_ok,
	struct gc_clean *out, struct cairn_err *err)
{
	const cJSON *sched = cJSON_GetObjectItemCaseSensitive(json_get(b,
	    "metadata.labels"), ENGINE_LABEL_SCHEDULE);
	const char *const *l = METRIC_LABELS(cJSON_IsString(sched) ?
	    sched->valuestring : "");
	int rc;

	metrics_inc(METRIC_BACKUP_DELETION_ATTEMPT_TOTAL, l);
	rc = clean_backup(c, b, lost_ok, out, err);
	metrics_inc(rc == 0 ? METRIC_BACKUP_DELETION_SUCCESS_TOTAL :
	    METRIC_BACKUP_DELETION_FAILURE_TOTAL, l);
	return rc;
}

/*
 * The collector's cleaning of Backup b: gc_clean_backup() with the
 * collector's policy: a location that is gone leaves nothing to clean,
 * a ReadOnly one keeps its files (1: the object may go all the same).
 * 0 when the object may go, < 0 to retry on the next pass.
 */
static int
clean_storage(struct kube *k, const char *ns, struct volumes *vol,
	const cJSON *b, struct cairn_err *err)
{
	struct volumes_ctx c;
	struct gc_clean cl;
	int rc;

	memset(&c, 0, sizeof c);
	c.kube = k;
	c.namespace = ns;
	c.server_id = "gc";
	c.vol = vol;
	rc = gc_clean_backup(&c, b, 1, &cl, err);
	if (cl.lost[0] != '\0')
		log_warn("backup %s/%s: storage location %s: %s; nothing to "
		    "clean there", ns, json_str_or(b, "metadata.name", ""),
		    json_str_or(b, "spec.storageLocation", "(default)"),
		    cl.lost);
	if (rc == CAIRN_EREADONLY) {
		log_info("backup %s/%s: location %s is ReadOnly; its files are "
		    "kept", ns, json_str_or(b, "metadata.name", ""),
		    cl.location);
		cairn_err_clear(err);
		return 1;
	}
	if (rc < 0 && cl.snapshots_failed > 0)
		rc = cairn_err_set(err, rc, "%d volume snapshot%s could not be "
		    "deleted (logged above); the backup's files are kept until "
		    "they are (remove finalizer " GC_FINALIZER " to give up on "
		    "them)", cl.snapshots_failed,
		    cl.snapshots_failed == 1 ? "" : "s");
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
	struct volumes *vol;
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
		if (clean_storage(g->k, g->ns, g->vol, b, &err) < 0)
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

		rc = clean_storage(g->k, g->ns, g->vol, b, &err);
		if (rc < 0)
			goto fail;
		if (rc > 0) {
			log_info("backup %s/%s expired but its location is "
			    "ReadOnly: kept", g->ns, name);
			return;
		}
		log_info("backup %s/%s expired at %s: storage cleaned, deleting",
		    g->ns, name, exp);
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
gc_tick(struct kube *k, const char *ns, struct volumes *vol, int64_t now_us,
	int expire, struct gc_stats *stats, struct cairn_err *err)
{
	struct gc_pass g;
	int rc;

	memset(&g, 0, sizeof g);
	g.k = k;
	g.ns = ns;
	g.vol = vol;
	g.now = now_us;
	g.expire = expire;
	rc = kube_list(k, &backups_gvr, ns, NULL, gc_item, &g, NULL, err);
	if (stats != NULL)
		*stats = g.st;
	return rc;
}
