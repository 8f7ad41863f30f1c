/*
 * sync.c: location health and backup sync, see sync.h.
 *
 * A pass lists the locations; for each it decides from its own status
 * (lastValidationTime, lastSyncedTime) whether a check or a sync is due,
 * so servers that restart or run side by side need no memory of their
 * own. Status writes are conditional; a 409 means another server wrote
 * first and this pass leaves the location alone.
 */
#include "config.h"
#include "engine/sync.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/buf.h"
#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "engine/bsl.h"
#include "engine/claim.h"
#include "engine/gc.h"
#include "kube/kube.h"
#include "kube/label.h"
#include "storage/layout.h"
#include "storage/store.h"

#define SYNC_META_MAX (16u << 20)	/* one velero-backup.json */
#define SYNC_VPB_MAX (64u << 20)	/* volumepluginbackups, gunzipped */
#define SYNC_NAMES_MAX 100000		/* backups listed per location */

static const struct kube_gvr bsl_gvr = { "cairn.io", "v1",
	"backupstoragelocations" };
static const struct kube_gvr backups_gvr = { "cairn.io", "v1", "backups" };
static const struct kube_gvr vpb_gvr = { "cairn.io", "v1",
	"volumepluginbackups" };

struct names {
	char **v;
	size_t n, a;
};

static void
names_add(struct names *s, const char *name)
{
	if (s->n == s->a) {
		s->a = s->a ? 2 * s->a : 64;
		s->v = xreallocarray(s->v, s->a, sizeof *s->v);
	}
	s->v[s->n++] = xstrdup(name);
}

static int
names_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int
names_has(const struct names *s, const char *name)
{
	return s->n > 0 && bsearch(&name, s->v, s->n, sizeof *s->v,
	    names_cmp) != NULL;
}

static void
names_free(struct names *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	memset(s, 0, sizeof *s);
}

/* Created by a sync whose status write has not happened (or failed). */
static int
awaits_status(const cJSON *obj)
{
	return engine_is_synced(obj) && json_str(obj, "status.phase") == NULL;
}

/* A synced Backup still without its status counts as missing: repaired. */
static int
collect_backup(void *arg, cJSON *item)
{
	if (!awaits_status(item))
		names_add(arg, json_str_or(item, "metadata.name", ""));
	return 0;
}

static int
collect_stored(void *arg, const char *name)
{
	struct names *s = arg;

	if (s->n >= SYNC_NAMES_MAX)
		return 1;
	names_add(s, name);
	return 0;
}

/* Strip what the source cluster assigned; keep labels and annotations. */
static void
reset_metadata(cJSON *obj, const char *ns)
{
	cJSON *md = json_ensure(obj, "metadata");
	static const char *const drop[] = { "uid", "resourceVersion",
		"creationTimestamp", "deletionTimestamp",
		"deletionGracePeriodSeconds", "generation", "managedFields",
		"ownerReferences", "selfLink", "generateName", "finalizers" };

	for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++)
		cJSON_DeleteItemFromObjectCaseSensitive(md, drop[i]);
	json_set_str(md, "namespace", ns);
}

/*
 * Create obj (labelled synced; its status kept aside), then write its
 * status. If it exists already as a synced object that never got its
 * status (a failed write, or another server's create a moment ago),
 * write the status onto it: CAIRN_EEXIST is returned either way.
 */
static int
create_with_status(struct kube *k, const struct kube_gvr *g, const char *ns,
	cJSON *obj, struct cairn_err *err)
{
	cJSON *status = cJSON_DetachItemFromObjectCaseSensitive(obj, "status");
	cJSON *cur = NULL, *labels;
	int rc, rc2;

	labels = json_ensure(obj, "metadata.labels");
	cJSON_DeleteItemFromObjectCaseSensitive(labels, ENGINE_LABEL_SYNCED);
	cJSON_AddStringToObject(labels, ENGINE_LABEL_SYNCED, "true");
	rc = kube_create(k, g, ns, obj, &cur, err);
	if (rc == CAIRN_EEXIST) {
		struct cairn_err gerr = CAIRN_ERR_INIT;

		cJSON_Delete(cur);
		cur = NULL;
		if (status == NULL || kube_get(k, g, ns, json_str_or(obj,
		    "metadata.name", ""), &cur, &gerr) < 0 ||
		    !awaits_status(cur)) {
			cJSON_Delete(cur);
			cJSON_Delete(status);
			return rc;
		}
		log_info("sync: %s %s had no status yet: writing it", g->resource,
		    json_str_or(obj, "metadata.name", ""));
	} else if (rc < 0 || status == NULL) {
		cJSON_Delete(cur);
		cJSON_Delete(status);
		return rc;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(cur, "status");
	cJSON_AddItemToObject(cur, "status", status);
	rc2 = kube_update_status(k, g, ns, cur, NULL, err);
	cJSON_Delete(cur);
	if (rc == CAIRN_EEXIST && rc2 == CAIRN_ECONFLICT)
		cairn_err_clear(err);	/* its creator wrote it first */
	else if (rc2 < 0)
		return rc2;
	return rc;
}

static void
sync_vpbs(struct kube *k, const char *ns, struct bsl *l, const char *name,
	const char *loc)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	char *key = bsl_backup_key(l, name, LAYOUT_BACKUP_VOLUMEPLUGINBACKUPS);
	char *text = NULL;
	size_t len = 0;
	cJSON *list = NULL, *it;
	int rc;

	if (key == NULL)
		goto out;
	rc = store_get_gunzip(bsl_store(l), key, SYNC_VPB_MAX, &text, &len,
	    &err);
	if (rc == CAIRN_ENOTFOUND)
		goto out;
	if (rc < 0 || (list = json_parse(text, len, &err)) == NULL) {
		log_warn("sync %s: %s: %s", loc, key, err.msg);
		goto out;
	}
	cJSON_ArrayForEach(it, list) {
		cJSON *o = cJSON_Duplicate(it, 1);

		reset_metadata(o, ns);
		rc = create_with_status(k, &vpb_gvr, ns, o, &err);
		if (rc < 0 && rc != CAIRN_EEXIST)
			log_warn("sync %s: volume plugin backup %s: %s", loc,
			    json_str_or(o, "metadata.name", "?"), err.msg);
		cJSON_Delete(o);
	}
out:
	cJSON_Delete(list);
	free(text);
	free(key);
}

/* Create the Backup `name` from its velero-backup.json. 1 created, 0 skipped. */
static int
sync_one(struct kube *k, const char *ns, struct bsl *l, const char *loc,
	const char *name, struct cairn_err *err)
{
	char *key = bsl_backup_key(l, name, LAYOUT_BACKUP_METADATA);
	char *data = NULL, *lv;
	size_t len = 0;
	cJSON *obj = NULL, *labels;
	int rc;

	if (key == NULL)
		return 0;
	rc = store_get_mem(bsl_store(l), key, SYNC_META_MAX, &data, &len, err);
	if (rc == CAIRN_ENOTFOUND) {
		rc = 0;		/* a folder without metadata: not a backup (yet) */
		goto out;
	}
	if (rc < 0)
		goto out;
	obj = json_parse(data, len, err);
	if (obj == NULL) {
		rc = cairn_err_prefix(err, "%s", key);
		goto out;
	}
	if (strcmp(json_str_or(obj, "metadata.name", ""), name) != 0 ||
	    !gc_phase_final(json_str(obj, "status.phase"))) {
		log_info("sync %s: %s skipped (name differs or not finished)",
		    loc, key);
		rc = 0;
		goto out;
	}
	reset_metadata(obj, ns);
	cJSON_ReplaceItemInObjectCaseSensitive(obj, "apiVersion",
	    cJSON_CreateString("cairn.io/v1"));
	json_set_str(obj, "kind", "Backup");
	labels = json_ensure(obj, "metadata.labels");
	cJSON_DeleteItemFromObjectCaseSensitive(labels, SYNC_LOCATION_LABEL);
	lv = kube_label_value(loc);
	cJSON_AddStringToObject(labels, SYNC_LOCATION_LABEL, lv);
	free(lv);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(json_ensure(obj,
	    "metadata"), "finalizers"), cJSON_CreateString(GC_FINALIZER));
	json_set_str(json_ensure(obj, "spec"), "storageLocation", loc);
	rc = create_with_status(k, &backups_gvr, ns, obj, err);
	if (rc == CAIRN_EEXIST) {	/* there already (its status now written) */
		sync_vpbs(k, ns, l, name, loc);
		rc = 0;
		goto out;
	}
	if (rc < 0)
		goto out;
	log_info("sync %s: backup %s created from storage", loc, name);
	sync_vpbs(k, ns, l, name, loc);
	rc = 1;
out:
	cJSON_Delete(obj);
	free(data);
	free(key);
	return rc;
}

struct sync_pass {
	struct kube *k;
	const char *ns;
	int64_t now;
	struct names cluster;	/* Backup names in the cluster, sorted */
	int have_cluster;
	struct sync_stats st;
};

/* Is a period (Go duration text, default def_us) due since the time at path? */
static int
due(const cJSON *bsl, const char *period_path, const char *last_path,
	int64_t now, int64_t *period_out)
{
	const char *ps = json_str(bsl, period_path);
	const char *ls = json_str(bsl, last_path);
	int64_t period = SYNC_DEFAULT_PERIOD_US, last;

	if (ps != NULL && duration_parse(ps, &period) < 0)
		period = SYNC_DEFAULT_PERIOD_US;
	*period_out = period;
	if (period == 0)
		return 0;	/* disabled */
	if (ls == NULL || time_parse(ls, &last) < 0)
		return 1;
	/* Status times have whole seconds: allow for the truncation. */
	return now - last + TIME_US_PER_SEC / 2 >= period;
}

static void
sync_location(struct sync_pass *p, cJSON *obj)
{
	struct cairn_err err = CAIRN_ERR_INIT, cerr = CAIRN_ERR_INIT;
	const char *loc = json_str_or(obj, "metadata.name", "");
	struct bsl *l = NULL;
	struct names stored = { 0 };
	cJSON *st;
	char ts[TIME_STR_MAX];
	int64_t vper, sper;
	int do_validate, do_sync, rc, ok;

	do_validate = due(obj, "spec.validationFrequency",
	    "status.lastValidationTime", p->now, &vper);
	do_sync = due(obj, "spec.backupSyncPeriod", "status.lastSyncedTime",
	    p->now, &sper) && strcmp(json_str_or(obj, "status.phase", ""),
	    "Unavailable") != 0;
	if (!do_validate && !do_sync)
		return;
	rc = bsl_open_object(p->k, p->ns, obj, &l, &cerr);
	if (rc == 0)
		rc = store_check(bsl_store(l), &cerr);
	ok = rc == 0;
	st = json_ensure(obj, "status");
	if (do_validate) {
		/* A copy: setting status.phase below frees the old string. */
		char old[32];

		snprintf(old, sizeof old, "%s", json_str_or(obj, "status.phase",
		    ""));
		p->st.validated++;
		time_format_rfc3339(p->now, ts);
		json_set_str(st, "lastValidationTime", ts);
		json_set_str(st, "phase", ok ? "Available" : "Unavailable");
		if (ok)
			json_delete(st, "message");
		else {
			p->st.unavailable++;
			json_set_str(st, "message", cerr.msg);
		}
		if (strcmp(old, ok ? "Available" : "Unavailable") != 0) {
			if (ok)
				log_info("storage location %s/%s is Available",
				    p->ns, loc);
			else
				log_warn("storage location %s/%s is Unavailable: "
				    "%s", p->ns, loc, cerr.msg);
		}
	}
	if (do_sync && ok) {
		if (!p->have_cluster) {
			rc = kube_list(p->k, &backups_gvr, p->ns, NULL,
			    collect_backup, &p->cluster, NULL, &err);
			if (rc < 0)
				goto fail;
			if (p->cluster.n > 1)
				qsort(p->cluster.v, p->cluster.n,
				    sizeof *p->cluster.v, names_cmp);
			p->have_cluster = 1;
		}
		rc = layout_list_backups(bsl_store(l), bsl_prefix(l), collect_stored,
		    &stored, &err);
		if (rc < 0)
			goto fail;
		for (size_t i = 0; i < stored.n; i++) {
			if (names_has(&p->cluster, stored.v[i]))
				continue;
			rc = sync_one(p->k, p->ns, l, loc, stored.v[i], &err);
			if (rc < 0) {
				log_warn("sync %s: backup %s: %s", loc,
				    stored.v[i], err.msg);
				p->st.errors++;
				cairn_err_clear(&err);
			} else
				p->st.synced += rc;
		}
		time_format_rfc3339(p->now, ts);
		json_set_str(st, "lastSyncedTime", ts);
	}
	rc = kube_update_status(p->k, &bsl_gvr, p->ns, obj, NULL, &err);
	if (rc < 0 && rc != CAIRN_ECONFLICT)
		goto fail;
	goto out;
fail:
	p->st.errors++;
	log_warn("storage location %s/%s: %s", p->ns, loc, err.msg);
out:
	names_free(&stored);
	bsl_free(l);
}

static int
sync_item(void *arg, cJSON *item)
{
	sync_location(arg, item);
	return 0;
}

int
sync_tick(struct kube *k, const char *ns, int64_t now_us,
	struct sync_stats *stats, struct cairn_err *err)
{
	struct sync_pass p;
	int rc;

	memset(&p, 0, sizeof p);
	p.k = k;
	p.ns = ns;
	p.now = now_us;
	rc = kube_list(k, &bsl_gvr, ns, NULL, sync_item, &p, NULL, err);
	names_free(&p.cluster);
	if (stats != NULL)
		*stats = p.st;
	return rc;
}
