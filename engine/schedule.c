/*
 * schedule.c: the Schedule controller, see schedule.h for the semantics.
 *
 * Every write is conditional: status through the status subresource with
 * the resourceVersion read, the one spec change (consuming
 * skipImmediately) through a merge patch carrying it. A 409 means another
 * server acted on this Schedule since we read it; we drop what we were
 * doing and the next pass starts from the new state. The Backup create is
 * the only step that must not happen twice, and its deterministic name
 * makes the API server refuse the second one.
 */
#include "config.h"
#include "engine/schedule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "engine/bspec.h"
#include "engine/cron.h"
#include "engine/gc.h"
#include "kube/kube.h"
#include "kube/label.h"

static const struct kube_gvr schedules_gvr = { "cairn.io", "v1", "schedules" };
static const struct kube_gvr backups_gvr = { "cairn.io", "v1", "backups" };

void
schedule_backup_name(const char *schedule, int64_t due_us, char *out,
	size_t len)
{
	time_t t = (time_t)(due_us / TIME_US_PER_SEC);
	struct tm tm;
	char ts[32];

	gmtime_r(&t, &tm);
	strftime(ts, sizeof ts, "%Y%m%d%H%M%S", &tm);
	snprintf(out, len, "%s-%s", schedule, ts);
}

struct sched_pass {
	struct kube *k;
	const char *ns;
	int64_t now;
	struct schedule_stats st;
};

/* Write obj's status (conditional). 0, CAIRN_ECONFLICT or an error. */
static int
put_status(struct sched_pass *p, cJSON *obj, struct cairn_err *err)
{
	return kube_update_status(p->k, &schedules_gvr, p->ns, obj, NULL, err);
}

/* Validation errors of a Schedule (cJSON array, owned); *c gets the cron. */
static cJSON *
sched_validate(const cJSON *s, struct cron **c)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *name = json_str_or(s, "metadata.name", "");
	cJSON *errs = cJSON_CreateArray(), *fake, *tmpl;
	struct bspec *spec = NULL;

	*c = NULL;
	if (cron_parse(json_str_or(s, "spec.schedule", ""), c, &err) < 0) {
		char *m = xasprintf("invalid schedule: %s", err.msg);

		cJSON_AddItemToArray(errs, cJSON_CreateString(m));
		free(m);
	}
	if (strlen(name) > SCHEDULE_NAME_MAX)
		cJSON_AddItemToArray(errs, cJSON_CreateString("schedule name "
		    "longer than 63 characters cannot label its backups"));
	/* The template is checked as the Backups will be. */
	fake = cJSON_CreateObject();
	cJSON_AddItemToObject(cJSON_AddObjectToObject(fake, "metadata"), "name",
	    cJSON_CreateString(name));
	tmpl = cJSON_Duplicate(json_get(s, "spec.template"), 1);
	if (tmpl == NULL)
		tmpl = cJSON_CreateObject();
	cJSON_DeleteItemFromObjectCaseSensitive(tmpl, "metadata");
	cJSON_AddItemToObject(fake, "spec", tmpl);
	if (bspec_parse(fake, &spec, errs) == 0)
		bspec_free(spec);
	cJSON_Delete(fake);
	return errs;
}

/* The Backup for due time due_us, made from the template. Owned. */
static cJSON *
sched_backup(const cJSON *s, const char *bname)
{
	const char *sname = json_str_or(s, "metadata.name", "");
	cJSON *b = cJSON_CreateObject(), *md, *labels, *spec;
	char *lv;
	const cJSON *l;

	cJSON_AddStringToObject(b, "apiVersion", "cairn.io/v1");
	cJSON_AddStringToObject(b, "kind", "Backup");
	md = cJSON_AddObjectToObject(b, "metadata");
	cJSON_AddStringToObject(md, "name", bname);
	labels = cJSON_AddObjectToObject(md, "labels");
	cJSON_ArrayForEach(l, json_get(s, "spec.template.metadata.labels"))
		if (cJSON_IsString(l))
			cJSON_AddStringToObject(labels, l->string, l->valuestring);
	cJSON_DeleteItemFromObjectCaseSensitive(labels, SCHEDULE_LABEL);
	lv = kube_label_value(sname);
	cJSON_AddStringToObject(labels, SCHEDULE_LABEL, lv);
	free(lv);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(md, "finalizers"),
	    cJSON_CreateString(GC_FINALIZER));
	if (json_bool(s, "spec.useOwnerReferencesInBackup", 0)) {
		cJSON *ref = cJSON_CreateObject();

		cJSON_AddStringToObject(ref, "apiVersion", "cairn.io/v1");
		cJSON_AddStringToObject(ref, "kind", "Schedule");
		cJSON_AddStringToObject(ref, "name", sname);
		cJSON_AddStringToObject(ref, "uid",
		    json_str_or(s, "metadata.uid", ""));
		cJSON_AddTrueToObject(ref, "controller");
		cJSON_AddItemToArray(cJSON_AddArrayToObject(md,
		    "ownerReferences"), ref);
	}
	spec = cJSON_Duplicate(json_get(s, "spec.template"), 1);
	if (spec == NULL)
		spec = cJSON_CreateObject();
	cJSON_DeleteItemFromObjectCaseSensitive(spec, "metadata");
	cJSON_AddItemToObject(b, "spec", spec);
	return b;
}

static int64_t
time_at(const cJSON *obj, const char *path)
{
	const char *s = json_str(obj, path);
	int64_t us;

	if (s == NULL || time_parse(s, &us) < 0)
		return -1;
	return us;
}

static void
sched_one(struct sched_pass *p, cJSON *s)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *name = json_str_or(s, "metadata.name", "");
	const char *phase = json_str_or(s, "status.phase", "");
	struct cron *c = NULL;
	cJSON *errs, *st, *b = NULL;
	char ts[TIME_STR_MAX], bname[300];
	int64_t last, skipped, base, due;
	int rc;

	if (json_get(s, "metadata.deletionTimestamp") != NULL)
		return;
	errs = sched_validate(s, &c);
	st = json_ensure(s, "status");
	if (cJSON_GetArraySize(errs) > 0) {
		if (strcmp(phase, "FailedValidation") != 0 ||
		    !cJSON_Compare(errs, json_get(s, "status.validationErrors"),
		    1)) {
			json_set_str(st, "phase", "FailedValidation");
			json_set_item(st, "validationErrors", errs);
			errs = NULL;
			log_warn("schedule %s/%s: failed validation", p->ns, name);
			rc = put_status(p, s, &err);
			if (rc < 0 && rc != CAIRN_ECONFLICT)
				goto fail;
		}
		goto out;
	}
	if (strcmp(phase, "Enabled") != 0) {
		json_set_str(st, "phase", "Enabled");
		json_delete(st, "validationErrors");
		rc = put_status(p, s, &err);
		if (rc < 0 && rc != CAIRN_ECONFLICT)
			goto fail;
		log_info("schedule %s/%s: enabled (%s)", p->ns, name,
		    json_str_or(s, "spec.schedule", ""));
		goto out;	/* the next pass starts from the new version */
	}
	if (json_bool(s, "spec.paused", 0))
		goto out;
	if (json_bool(s, "spec.skipImmediately", 0)) {
		char *patch;

		time_format_rfc3339(p->now, ts);
		json_set_str(st, "lastSkipped", ts);
		rc = put_status(p, s, &err);
		if (rc < 0) {
			if (rc != CAIRN_ECONFLICT)
				goto fail;
			goto out;
		}
		/* Consume the flag (status first: a crash in between skips). */
		patch = xasprintf("{\"spec\":{\"skipImmediately\":false}}");
		rc = kube_patch(p->k, &schedules_gvr, p->ns, name, NULL,
		    KUBE_PATCH_MERGE, patch, NULL, &err);
		free(patch);
		if (rc < 0 && rc != CAIRN_ECONFLICT)
			goto fail;
		log_info("schedule %s/%s: skipping the immediate backup", p->ns,
		    name);
		goto out;
	}
	last = time_at(s, "status.lastBackup");
	skipped = time_at(s, "status.lastSkipped");
	base = last > skipped ? last : skipped;
	if (base < 0) {
		/* Never ran: back up at once, due at the creation time. */
		due = time_at(s, "metadata.creationTimestamp");
		if (due < 0)
			due = p->now;
		due -= due % TIME_US_PER_SEC;
	} else
		due = cron_latest(c, base, p->now);
	if (due < 0)
		goto out;
	schedule_backup_name(name, due, bname, sizeof bname);
	b = sched_backup(s, bname);
	rc = kube_create(p->k, &backups_gvr, p->ns, b, NULL, &err);
	if (rc == CAIRN_EEXIST) {
		p->st.already++;
		log_debug("schedule %s/%s: backup %s exists (another server)",
		    p->ns, name, bname);
	} else if (rc < 0)
		goto fail;
	else {
		p->st.created++;
		log_info("schedule %s/%s: created backup %s", p->ns, name, bname);
	}
	time_format_rfc3339(due, ts);
	json_set_str(st, "lastBackup", ts);
	rc = put_status(p, s, &err);
	if (rc < 0 && rc != CAIRN_ECONFLICT)
		goto fail;
	goto out;
fail:
	p->st.errors++;
	log_warn("schedule %s/%s: %s (retried on the next pass)", p->ns, name,
	    err.msg);
out:
	cJSON_Delete(errs);
	cJSON_Delete(b);
	cron_free(c);
}

static int
sched_item(void *arg, cJSON *item)
{
	sched_one(arg, item);
	return 0;
}

int
schedule_tick(struct kube *k, const char *ns, int64_t now_us,
	struct schedule_stats *stats, struct cairn_err *err)
{
	struct sched_pass p;
	int rc;

	memset(&p, 0, sizeof p);
	p.k = k;
	p.ns = ns;
	p.now = now_us;
	rc = kube_list(k, &schedules_gvr, ns, NULL, sched_item, &p, NULL, err);
	if (stats != NULL)
		*stats = p.st;
	return rc;
}
