/*
 * claim.c: the claim write and the fence of a claimed item (see
 * claim.h): one implementation of self-fencing and of the conditional
 * status write for backups, restores and volume operations.
 */
#include "config.h"
#include "engine/claim.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/jsonutil.h"
#include "base/log.h"
#include "base/timeutil.h"
#include "kube/kube.h"

#define ENGINE_STATUS_RETRIES 5

int
engine_is_synced(const cJSON *obj)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(json_get(obj,
	    "metadata.labels"), ENGINE_LABEL_SYNCED);

	return cJSON_IsString(v) && strcmp(v->valuestring, "true") == 0;
}

int
engine_claim(const struct engine_env *env, const struct kube_gvr *gvr,
	const cJSON *obj, const char *worker, int64_t attempt, cJSON **out,
	struct cairn_err *err)
{
	cJSON *body = cJSON_Duplicate(obj, 1);
	cJSON *claim = cJSON_CreateObject();
	char now[TIME_STR_MAX];
	int rc;

	*out = NULL;
	time_format_rfc3339(time_now_us(), now);
	json_set_str(body, "status.phase", "InProgress");
	cJSON_AddStringToObject(claim, "holder", env->server_id);
	cJSON_AddStringToObject(claim, "worker", worker);
	cJSON_AddNumberToObject(claim, "attempt", (double)attempt);
	cJSON_AddStringToObject(claim, "claimedAt", now);
	json_set_item(body, "status.claim", claim);
	rc = kube_update_status(env->kube, gvr,
	    json_str_or(obj, "metadata.namespace", env->namespace), body, out,
	    err);
	cJSON_Delete(body);
	return rc;
}

void
engine_fence_init(struct engine_fence *f, struct kube *kube,
	const struct kube_gvr *gvr, const char *ns, const char *name,
	const char *label, ...)
{
	va_list ap;

	memset(f, 0, sizeof *f);
	f->kube = kube;
	f->gvr = gvr;
	snprintf(f->ns, sizeof f->ns, "%s", ns != NULL ? ns : "");
	snprintf(f->name, sizeof f->name, "%s", name);
	va_start(ap, label);
	vsnprintf(f->label, sizeof f->label, label, ap);
	va_end(ap);
}

void
engine_fence_claim(struct engine_fence *f, const char *holder,
	int64_t attempt, const char *uid)
{
	snprintf(f->holder, sizeof f->holder, "%s", holder);
	f->attempt = attempt;
	snprintf(f->uid, sizeof f->uid, "%s", uid != NULL ? uid : "");
}

void
engine_fence_env(struct engine_fence *f, const struct engine_env *env,
	const struct kube_gvr *gvr, const char *kind, const char *ns,
	const char *name, int64_t attempt, const char *uid)
{
	engine_fence_init(f, env->kube, gvr, ns, name, "%s %s/%s", kind, ns,
	    name);
	engine_fence_claim(f, env->server_id, attempt, uid);
	f->may_write = env->may_write;
	f->may_write_arg = env->may_write_arg;
	f->stop = env->stop;
	f->epoch = ENGINE_FENCE_TRUST;
}

int
engine_fence_ours(const struct engine_fence *f, const cJSON *obj)
{
	const char *holder = json_str(obj, "status.claim.holder");

	return holder != NULL && strcmp(holder, f->holder) == 0 &&
	    json_int(obj, "status.claim.attempt", 0) == f->attempt &&
	    (f->uid[0] == '\0' ||
	    strcmp(json_str_or(obj, "metadata.uid", ""), f->uid) == 0);
}

static int
fence_stopped(const struct engine_fence *f)
{
	return f->stop != NULL && *f->stop;
}

static int
fence_get(struct engine_fence *f, cJSON **out, struct cairn_err *err)
{
	return kube_get(f->kube, f->gvr, f->ns[0] != '\0' ? f->ns : NULL,
	    f->name, out, err);
}

int
engine_fence_check(struct engine_fence *f, struct cairn_err *err)
{
	cJSON *fresh = NULL;
	int waited = 0, ep, rc;

	if (f->fenced)
		return cairn_err_set(err, CAIRN_EFENCED, "ownership of %s lost",
		    f->label);
	if (f->may_write == NULL)
		return 0;
	for (;;) {
		while ((ep = f->may_write(f->may_write_arg)) == 0) {
			if (fence_stopped(f))
				return cairn_err_set(err, CAIRN_ECANCELED,
				    "stopped");
			if (!waited)
				log_warn("%s: Lease not renewed in time: writes "
				    "paused", f->label);
			waited = 1;
			time_sleep_us(100000, f->stop);
		}
		/* Held all along since the last check: write. */
		if (!waited && (f->epoch == ENGINE_FENCE_TRUST ||
		    (f->epoch != 0 && ep == f->epoch))) {
			f->epoch = ep;
			return 0;
		}
		if (f->holder[0] == '\0') {
			f->epoch = ep;
			return 0;
		}
		rc = fence_get(f, &fresh, NULL);
		if (rc == 0 && engine_fence_ours(f, fresh)) {
			cJSON_Delete(fresh);
			if (waited || f->epoch != 0)
				log_info("%s: Lease renewed, claim still ours: "
				    "writes resume", f->label);
			f->epoch = ep;
			return 0;
		}
		if (rc == 0 || rc == CAIRN_ENOTFOUND) {
			log_warn("%s: claim lost to %s attempt %lld while writes "
			    "were paused: stopping", f->label,
			    json_str_or(fresh, "status.claim.holder", "(none)"),
			    (long long)json_int(fresh, "status.claim.attempt",
			    0));
			cJSON_Delete(fresh);
			f->fenced = 1;
			return cairn_err_set(err, CAIRN_EFENCED, "ownership of "
			    "%s lost", f->label);
		}
		/* Not verified yet (API error): keep waiting. */
		time_sleep_us(200000, f->stop);
		if (fence_stopped(f))
			return cairn_err_set(err, CAIRN_ECANCELED, "stopped");
	}
}

int
engine_status_write(struct engine_fence *f, cJSON **obj,
	const cJSON *status, struct cairn_err *err)
{
	struct cairn_err e2 = CAIRN_ERR_INIT;
	cJSON *body, *out = NULL, *fresh = NULL;
	int rc = CAIRN_EFAIL;

	for (int i = 0; i < ENGINE_STATUS_RETRIES; i++) {
		rc = engine_fence_check(f, err);
		if (rc < 0)
			return rc;
		body = cJSON_Duplicate(*obj, 1);
		cJSON_DeleteItemFromObjectCaseSensitive(body, "status");
		cJSON_AddItemToObject(body, "status",
		    cJSON_Duplicate(status, 1));
		rc = kube_update_status(f->kube, f->gvr,
		    f->ns[0] != '\0' ? f->ns : NULL, body, &out, err);
		cJSON_Delete(body);
		if (rc == 0) {
			cJSON_Delete(*obj);
			*obj = out;
			return 0;
		}
		if (rc != CAIRN_ENOTFOUND && rc != CAIRN_ECONFLICT)
			return rc;
		if (rc == CAIRN_ECONFLICT)
			rc = fence_get(f, &fresh, &e2);
		if (rc == CAIRN_ENOTFOUND) {
			f->fenced = 1;
			return cairn_err_set(err, CAIRN_EFENCED, "%s was deleted",
			    f->label);
		}
		if (rc < 0)
			return cairn_err_copy(err, &e2);
		if (!engine_fence_ours(f, fresh)) {
			log_warn("%s: claim lost to %s attempt %lld: stopping",
			    f->label, json_str_or(fresh, "status.claim.holder",
			    "(none)"), (long long)json_int(fresh,
			    "status.claim.attempt", 0));
			cJSON_Delete(fresh);
			f->fenced = 1;
			return cairn_err_set(err, CAIRN_EFENCED, "ownership of "
			    "%s lost", f->label);
		}
		cJSON_Delete(*obj);
		*obj = fresh;
		fresh = NULL;
	}
	return rc;
}
