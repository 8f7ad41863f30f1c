/*
 * restore_item.c: what a restore does with one item (issue 18: restores
 * that come back alive on a real cluster).
 *
 * In order, for each item of a tier (worker threads):
 *   1. Velero's skip rules (restore_actions.h): finished pods, mirror
 *      pods, completed Jobs, APIServices Kubernetes manages, and the
 *      token Secrets a service account's controller makes again; kinds
 *      the cluster cannot create are skipped for the whole tier;
 *   2. the object is cleaned of what the cluster assigns (the actions),
 *      its metadata reset, its namespace mapped, the restore's labels set;
 *   3. volumes: Velero's rename of a PV whose claim moves to a mapped
 *      namespace while a PV of its name exists; a PV being deleted, or
 *      whose claim or its namespace is, is waited for (Velero's
 *      shouldRestore); a retained PV that outlived the claim being
 *      restored gets its claimRef uid dropped, so that the claim binds it
 *      again instead of it staying Released; data is restored only for a
 *      PV this restore creates; a PVC follows its PV's new name, and
 *      loses volumeName when that PV is neither restored nor in the
 *      cluster;
 *   4. create; a namespace being deleted (403 "being terminated") or an
 *      object being deleted (AlreadyExists with a deletionTimestamp) is
 *      waited for, up to the terminating-resource timeout, and the
 *      create is tried again; an existing object is compared with what
 *      would be created (the same cleaning applied to it) and left,
 *      reported or updated as the existingResourcePolicy says.
 *
 * Namespaces: a target namespace is made ready before its first item
 * (rs_ensure_ns, the main thread) and by the namespaces tier itself: a
 * namespace being deleted is waited for, then created again (Velero's
 * EnsureNamespaceExistsAndIsReady), instead of one 403 per item. One
 * that cannot be made ready is one error, and its items are not tried.
 */
#include "config.h"

#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"
#include "engine/hooks_restore.h"
#include "engine/restore.h"
#include "engine/restore_int.h"
#include "engine/volumes.h"
#include "kube/label.h"

#define RS_POLL_US (1000LL * 1000)	/* Velero polls each second */

static const struct kube_gvr ns_gvr = { "", "v1", "namespaces" };
static const struct kube_gvr pv_gvr = { "", "v1", "persistentvolumes" };
static const struct kube_gvr sa_gvr = { "", "v1", "serviceaccounts" };

void
restore_reset_metadata(cJSON *obj)
{
	static const char *const drop[] = {
		"generateName", "selfLink", "uid", "resourceVersion",
		"generation", "creationTimestamp", "deletionTimestamp",
		"deletionGracePeriodSeconds", "ownerReferences",
		"managedFields", NULL
	};
	cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");

	for (int i = 0; md != NULL && drop[i] != NULL; i++)
		cJSON_DeleteItemFromObjectCaseSensitive(md, drop[i]);
	cJSON_DeleteItemFromObjectCaseSensitive(obj, "status");
}

static void
set_label(cJSON *obj, const char *key, const char *value)
{
	cJSON *labels = json_ensure(obj, "metadata.labels");

	cJSON_DeleteItemFromObjectCaseSensitive(labels, key);
	cJSON_AddStringToObject(labels, key, value);
}

static void
restore_labels(struct rs *rs, cJSON *obj)
{
	set_label(obj, RESTORE_LABEL_BACKUP, rs->backup_lv);
	set_label(obj, RESTORE_LABEL_RESTORE, rs->name_lv);
}

/* Did this restore create obj (its restore label)? */
static int
ours(const struct rs *rs, const cJSON *obj)
{
	const cJSON *l = cJSON_GetObjectItemCaseSensitive(json_get(obj,
	    "metadata.labels"), RESTORE_LABEL_RESTORE);

	return cJSON_IsString(l) && strcmp(l->valuestring, rs->name_lv) == 0;
}

void
rs_reslist_add(struct rs *rs, const cJSON *obj, const char *ns,
    const char *name, enum journal_rstate st)
{
	char key[512], *v;
	cJSON *list;

	snprintf(key, sizeof key, "%s/%s", json_str_or(obj, "apiVersion", "v1"),
	    json_str_or(obj, "kind", "Unknown"));
	v = xasprintf("%s%s%s(%s)", ns, ns[0] ? "/" : "", name,
	    journal_rstate_name(st));
	pthread_mutex_lock(&rs->mu);
	list = cJSON_GetObjectItemCaseSensitive(rs->reslist, key);
	if (list == NULL)
		list = cJSON_AddArrayToObject(rs->reslist, key);
	cJSON_AddItemToArray(list, cJSON_CreateString(v));
	pthread_mutex_unlock(&rs->mu);
	free(v);
}

/* ---- waiting for what is being deleted ----------------------------------- */

static int
deleting(const cJSON *live)
{
	return json_get(live, "metadata.deletionTimestamp") != NULL;
}

static int
ns_terminating(const cJSON *live)
{
	return deleting(live) || strcmp(json_str_or(live, "status.phase", ""),
	    "Terminating") == 0;
}

/* A PV on its way out: deleted, or released to a Delete reclaim policy. */
static int
pv_going(const cJSON *live)
{
	return deleting(live) || (strcmp(json_str_or(live, "status.phase", ""),
	    "Released") == 0 && strcmp(json_str_or(live,
	    "spec.persistentVolumeReclaimPolicy", ""), "Delete") == 0);
}

/*
 * Wait while the object g ns/name exists and busy() says it is on its way
 * out, polling each second up to rs->term_wait_us. 0: *live (owned) is
 * the object, no longer busy, or NULL when it is gone. CAIRN_ETIMEOUT
 * (err says how long), CAIRN_ECANCELED, or a read error. what names it
 * in the event logged when the wait starts. main: the main thread
 * (status progress is written while it waits).
 */
static int
wait_while(struct rs *rs, const struct kube_gvr *g, const char *ns,
    const char *name, int (*busy)(const cJSON *), const char *what, int main,
    cJSON **live, struct cairn_err *err)
{
	int64_t start = time_mono_us();
	int waited = 0;

	*live = NULL;
	for (;;) {
		int rc = kube_get(rs->env->kube, g, ns, name, live, err);

		if (rc == CAIRN_ENOTFOUND) {
			*live = NULL;
			if (waited)
				rs_event(rs, "info", "%s is gone after %.1f s",
				    what, (double)(time_mono_us() - start) / 1e6);
			return 0;
		}
		if (rc < 0)
			return rc;
		if (!busy(*live))
			return 0;
		cJSON_Delete(*live);
		*live = NULL;
		if (time_mono_us() - start >= rs->term_wait_us) {
			char d[64];

			duration_format(rs->term_wait_us, d);
			return cairn_err_set(err, CAIRN_ETIMEOUT, "%s is still "
			    "being deleted after %s (--terminating-resource-"
			    "timeout)", what, d);
		}
		if (!waited)
			rs_event(rs, "info", "waiting for %s to finish being "
			    "deleted before restoring it", what);
		waited = 1;
		if (rs->env->stop != NULL && *rs->env->stop)
			return cairn_err_set(err, CAIRN_ECANCELED, "stopped");
		if (main)
			(void)rs_progress(rs, 0, NULL);
		time_sleep_us(RS_POLL_US, rs->env->stop);
	}
}

/* ---- namespaces ----------------------------------------------------------- */

static int
in_list(char **v, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i], s) == 0)
			return 1;
	return 0;
}

static void
list_add(char ***v, size_t *n, const char *s)
{
	if (in_list(*v, *n, s))
		return;
	*v = xreallocarray(*v, *n + 1, sizeof **v);
	(*v)[(*n)++] = xstrdup(s);
}

int
rs_ns_failed(struct rs *rs, const char *t)
{
	int f;

	pthread_mutex_lock(&rs->mu);
	f = in_list(rs->ns_failed, rs->nns_failed, t);
	pthread_mutex_unlock(&rs->mu);
	return f;
}

/* Namespace t could not be made ready: one error, its items not tried. */
static void
ns_fail(struct rs *rs, const char *t, const char *why)
{
	pthread_mutex_lock(&rs->mu);
	if (in_list(rs->ns_failed, rs->nns_failed, t)) {
		pthread_mutex_unlock(&rs->mu);
		return;
	}
	list_add(&rs->ns_failed, &rs->nns_failed, t);
	pthread_mutex_unlock(&rs->mu);
	rs_recordf(rs, 1, t, "error restoring namespace %s: %s: its items are "
	    "not restored", t, why);
}

static void
ns_ready(struct rs *rs, const char *t)
{
	pthread_mutex_lock(&rs->mu);
	list_add(&rs->ensured, &rs->nensured, t);
	pthread_mutex_unlock(&rs->mu);
}

/* Forget that t was ready (it is being deleted after all). */
static void
ns_unready(struct rs *rs, const char *t)
{
	pthread_mutex_lock(&rs->mu);
	for (size_t i = 0; i < rs->nensured; i++)
		if (strcmp(rs->ensured[i], t) == 0) {
			free(rs->ensured[i]);
			rs->ensured[i] = rs->ensured[--rs->nensured];
			break;
		}
	pthread_mutex_unlock(&rs->mu);
}

int
rs_ensure_ns(struct rs *rs, const char *orig, const char *t, int main)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	char what[300];
	int known, rc = 0;

	pthread_mutex_lock(&rs->mu);
	known = in_list(rs->ensured, rs->nensured, t);
	if (!known && in_list(rs->ns_failed, rs->nns_failed, t))
		rc = -1;
	pthread_mutex_unlock(&rs->mu);
	if (known || rc < 0)
		return rc;
	snprintf(what, sizeof what, "namespace %s", t);
	/* created by someone else meanwhile: look again (a few times) */
	for (int i = 0; i < 3; i++) {
		cJSON *live = NULL, *obj;

		rc = wait_while(rs, &ns_gvr, NULL, t, ns_terminating, what,
		    main, &live, &err);
		if (rc < 0)
			break;
		if (live != NULL) {
			cJSON_Delete(live);
			ns_ready(rs, t);
			return 0;
		}
		obj = restore_plan_namespace(rs->plan, orig);
		if (obj == NULL) {
			obj = cJSON_CreateObject();
			cJSON_AddStringToObject(obj, "apiVersion", "v1");
			cJSON_AddStringToObject(obj, "kind", "Namespace");
		}
		restore_reset_metadata(obj);
		json_set_str(obj, "metadata.name", t);
		restore_labels(rs, obj);
		rc = kube_create(rs->env->kube, &ns_gvr, NULL, obj, NULL, &err);
		cJSON_Delete(obj);
		if (rc == 0) {
			rs_event(rs, "info", "created namespace %s", t);
			ns_ready(rs, t);
			return 0;
		}
		if (rc != CAIRN_EEXIST)
			break;
	}
	if (rc == CAIRN_ECANCELED)
		return -1;
	ns_fail(rs, t, rc == CAIRN_EEXIST ? "it keeps coming back while "
	    "being deleted" : err.msg);
	return -1;
}

/* Was the last request refused because its namespace is terminating? */
static int
ns_terminating_refusal(int rc)
{
	const struct kube_status *s = kube_last_status();

	return rc == CAIRN_EAUTH && s->http == 403 &&
	    strstr(s->message, "because it is being terminated") != NULL;
}

/* ---- service-account tokens ------------------------------------------------ */

struct sa_scan {
	const char *secret;
	char *sa;		/* the account whose token it is (owned) */
};

static int
sa_cb(void *arg, cJSON *item)
{
	struct sa_scan *s = arg;
	char *prefix = xasprintf("%s-token-", json_str_or(item,
	    "metadata.name", ""));

	if (s->sa == NULL && str_has_prefix(s->secret, prefix))
		s->sa = xstrdup(json_str_or(item, "metadata.name", ""));
	free(prefix);
	return 0;
}

/*
 * Velero's secret_action: a token Secret named "<sa>-token-..." of a
 * service account of its namespace is the token controller's to make
 * again; the name of that account (owned), or NULL.
 */
static char *
sa_token_owner(struct rs *rs, const char *ns, const char *name)
{
	struct sa_scan s = { name, NULL };

	if (kube_list(rs->env->kube, &sa_gvr, ns, NULL, sa_cb, &s, NULL,
	    NULL) < 0) {
		free(s.sa);
		return NULL;	/* then it is restored, cleaned */
	}
	return s.sa;
}

/* ---- volumes -------------------------------------------------------------- */

/* Velero gives a renamed PV "velero-clone-<uuid>"; ours is the same for
 * every attempt of this restore, so a resume finds what it made. */
static char *
clone_name(const struct rs *rs, const char *pv)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char *in = xasprintf("%s/%s", rs->uid, pv), hex[33];

	EVP_Digest(in, strlen(in), md, &mdlen, EVP_sha256(), NULL);
	for (int i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	free(in);
	return xasprintf("cairn-clone-%s", hex);
}

/*
 * The name the backed-up PV pv gets in this restore (owned), NULL with
 * err on a read failure. Velero's rule: renamed when its claim is in a
 * mapped namespace and a PV of its name exists (that this restore did not
 * create). Decided once and remembered, so a PVC follows its PV.
 */
static char *
pv_target(struct rs *rs, const char *pv, struct cairn_err *err)
{
	char *text, *to = NULL;
	cJSON *obj = NULL, *live = NULL;
	const char *cns;
	int rc;

	pthread_mutex_lock(&rs->pv_mu);
	for (size_t i = 0; i < rs->npvnames && to == NULL; i++)
		if (strcmp(rs->pvnames[i].from, pv) == 0)
			to = xstrdup(rs->pvnames[i].to);
	pthread_mutex_unlock(&rs->pv_mu);
	if (to != NULL)
		return to;
	text = restore_plan_item(rs->plan, "persistentvolumes", "", pv);
	if (text != NULL)
		obj = json_parse(text, strlen(text), NULL);
	free(text);
	cns = json_str(obj, "spec.claimRef.namespace");
	if (cns != NULL && strcmp(restore_filter_map_ns(rs->filter, cns),
	    cns) != 0) {
		rc = kube_get(rs->env->kube, &pv_gvr, NULL, pv, &live, err);
		if (rc < 0 && rc != CAIRN_ENOTFOUND) {
			cJSON_Delete(obj);
			return NULL;
		}
		if (rc == 0 && !ours(rs, live))
			to = clone_name(rs, pv);
		cJSON_Delete(live);
	}
	cJSON_Delete(obj);
	if (to == NULL)
		to = xstrdup(pv);
	pthread_mutex_lock(&rs->pv_mu);
	rs->pvnames = xreallocarray(rs->pvnames, rs->npvnames + 1,
	    sizeof *rs->pvnames);
	rs->pvnames[rs->npvnames].from = xstrdup(pv);
	rs->pvnames[rs->npvnames++].to = xstrdup(to);
	pthread_mutex_unlock(&rs->pv_mu);
	return to;
}

/* The claim the volume work fences on (rs->obj is the main thread's). */
static cJSON *
volume_fence_obj(struct rs *rs)
{
	cJSON *me = cJSON_CreateObject();

	json_set_str(me, "metadata.name", rs->name);
	json_set_str(me, "status.claim.holder", rs->env->server_id);
	json_set_int(me, "status.claim.attempt", rs->attempt);
	return me;
}

/*
 * restorePVs: the volume's data first, the PV then points at it
 * (volumes_restore_pv). pv still has its backed-up name. A volume the
 * backup holds no data for is restored as it is. 1: the PV is not to be
 * created, its claim is provisioned from the volume's snapshot
 * (pvc_snapshot()).
 */
static int
pv_data(struct rs *rs, cJSON *pv)
{
	struct volumes_ctx vc;
	struct cairn_err ve = CAIRN_ERR_INIT;
	cJSON *me;
	int vrc;

	if (!rs->restore_pvs)
		return 0;
	volumes_ctx_env(&vc, rs->env, rs->jid);
	me = volume_fence_obj(rs);
	vrc = volumes_restore_pv(&vc, me, rs->backup, pv, &ve);
	cJSON_Delete(me);
	if (vrc < 0 && vrc != CAIRN_ENOTFOUND)
		rs_recordf(rs, 1, "", "%s", ve.msg);
	return vrc == VOLUMES_BY_CLAIM;
}

/*
 * A claim whose volume a snapshotter holds (pv_data() said so): the
 * plugin makes the snapshot available and pvc gets it as dataSource
 * (volumes_restore_claim). -1 to go on and create pvc, or the item's
 * final state when that failed.
 */
static int
pvc_snapshot(struct rs *rs, cJSON *pvc, const char *what, const char *bucket)
{
	struct volumes_ctx vc;
	struct cairn_err ve = CAIRN_ERR_INIT;
	const char *vn = json_str(pvc, "spec.volumeName");
	char *pv;
	cJSON *me;
	int vrc;

	if (!rs->restore_pvs || vn == NULL || vn[0] == '\0')
		return -1;
	volumes_ctx_env(&vc, rs->env, rs->jid);
	me = volume_fence_obj(rs);
	pv = xstrdup(vn);
	vrc = volumes_restore_claim(&vc, me, rs->backup, pv, pvc, &ve);
	cJSON_Delete(me);
	if (vrc == 0)
		rs_event(rs, "info", "%s is provisioned from the snapshot of "
		    "volume %s", what, pv);
	free(pv);
	if (vrc == 0 || vrc == CAIRN_ENOTFOUND)
		return -1;
	rs_recordf(rs, 1, bucket, "error restoring %s: %s", what, ve.msg);
	return JOURNAL_R_FAILED;
}

/* Same claim (namespace and name) in both PVs' claimRef? */
static int
same_claim(const cJSON *a, const cJSON *b)
{
	const char *an = json_str(a, "spec.claimRef.name");
	const char *bn = json_str(b, "spec.claimRef.name");
	const char *as = json_str(a, "spec.claimRef.namespace");
	const char *bs = json_str(b, "spec.claimRef.namespace");

	return an != NULL && bn != NULL && as != NULL && bs != NULL &&
	    strcmp(an, bn) == 0 && strcmp(as, bs) == 0;
}

enum claim_state { CLAIM_LIVE, CLAIM_GOING, CLAIM_GONE };

/*
 * The claim a live PV's claimRef names (with its uid): still there
 * (CLAIM_LIVE), being deleted or in a namespace being deleted
 * (CLAIM_GOING), or gone / made again with another uid (CLAIM_GONE).
 * A negative code on a read error.
 */
static int
claim_state(struct rs *rs, const cJSON *live, struct cairn_err *err)
{
	static const struct kube_gvr pvc_gvr = { "", "v1",
	    "persistentvolumeclaims" };
	const char *cns = json_str_or(live, "spec.claimRef.namespace", "");
	const char *cn = json_str_or(live, "spec.claimRef.name", "");
	const char *uid = json_str_or(live, "spec.claimRef.uid", "");
	cJSON *pvc = NULL, *nso = NULL;
	int rc, st;

	rc = kube_get(rs->env->kube, &pvc_gvr, cns, cn, &pvc, err);
	if (rc == CAIRN_ENOTFOUND)
		return CLAIM_GONE;
	if (rc < 0)
		return rc;
	if (strcmp(json_str_or(pvc, "metadata.uid", ""), uid) != 0)
		st = CLAIM_GONE;
	else if (deleting(pvc))
		st = CLAIM_GOING;
	else {
		rc = kube_get(rs->env->kube, &ns_gvr, NULL, cns, &nso, err);
		st = rc == 0 && ns_terminating(nso) ? CLAIM_GOING : CLAIM_LIVE;
		if (rc < 0 && rc != CAIRN_ENOTFOUND)
			st = rc;
	}
	cJSON_Delete(pvc);
	cJSON_Delete(nso);
	return st;
}

/*
 * A PV before its create (pv prepared: claimRef mapped and without uid).
 * Returns -1 to go on and create pv (renamed when Velero's rule says so,
 * its data restored first), or the item's final state. Like Velero's
 * shouldRestore, a PV on its way out, or whose claim or namespace is, is
 * waited for (up to rs->term_wait_us).
 */
static int
pv_step(struct rs *rs, const struct restore_row *row, cJSON *pv,
    const char *what)
{
	static const char *const bind_ann[] = {
	    "pv.kubernetes.io/bind-completed",
	    "pv.kubernetes.io/bound-by-controller", NULL };
	struct cairn_err err = CAIRN_ERR_INIT;
	cJSON *live = NULL, *body, *ann;
	int64_t start = time_mono_us();
	int rc, cs, said = 0;
	char *to;

	to = pv_target(rs, row->name, &err);
	if (to == NULL) {
		rs_recordf(rs, 1, "", "error restoring %s: %s", what, err.msg);
		return JOURNAL_R_FAILED;
	}
	if (strcmp(to, row->name) != 0) {
		if (pv_data(rs, pv) > 0) {
			free(to);
			return JOURNAL_R_SKIPPED;	/* its claim brings it */
		}
		json_set_str(pv, "metadata.name", to);
		cJSON_AddStringToObject(json_ensure(pv, "metadata.annotations"),
		    RESTORE_ANN_ORIGINAL_PV, row->name);
		rs_event(rs, "info", "%s is restored as %s: the namespace "
		    "mapping moves its claim and a volume of its name exists",
		    what, to);
		free(to);
		return -1;
	}
	free(to);
	for (;;) {
		rc = wait_while(rs, &pv_gvr, NULL, row->name, pv_going, what, 0,
		    &live, &err);
		if (rc < 0)
			goto fail;
		if (live == NULL)	/* ours to create: its data too */
			return pv_data(rs, pv) > 0 ? JOURNAL_R_SKIPPED : -1;
		if (!same_claim(live, pv) ||
		    json_str(live, "spec.claimRef.uid") == NULL) {
			cJSON_Delete(live);
			return -1;	/* exists: compared after the create */
		}
		cs = claim_state(rs, live, &err);
		if (cs < 0) {
			rc = cs;
			goto fail;
		}
		if (cs == CLAIM_LIVE) {
			cJSON_Delete(live);
			return -1;	/* bound to the claim it names */
		}
		if (cs == CLAIM_GOING) {
			cJSON_Delete(live);
			live = NULL;
			if (time_mono_us() - start >= rs->term_wait_us) {
				rc = cairn_err_set(&err, CAIRN_ETIMEOUT, "its "
				    "claim is still being deleted");
				goto fail;
			}
			if (!said)
				rs_event(rs, "info", "waiting for the claim of "
				    "%s to finish being deleted", what);
			said = 1;
			if (rs->env->stop != NULL && *rs->env->stop)
				return JOURNAL_R_FAILED;
			time_sleep_us(RS_POLL_US, rs->env->stop);
			continue;
		}
		/*
		 * Retained, and its claim is gone: the PV controller would
		 * keep it Released (claimRef holds the old claim's uid).
		 * Drop the uid, as an admin would, so the claim this
		 * restore brings back binds it again. Its data is the data.
		 */
		body = cJSON_Duplicate(live, 1);
		cJSON_Delete(live);
		live = NULL;
		json_delete(body, "spec.claimRef.uid");
		json_delete(body, "spec.claimRef.resourceVersion");
		cJSON_DeleteItemFromObjectCaseSensitive(body, "status");
		ann = json_get(body, "metadata.annotations");
		for (int i = 0; bind_ann[i] != NULL; i++)
			cJSON_DeleteItemFromObjectCaseSensitive(ann, bind_ann[i]);
		restore_labels(rs, body);
		rc = kube_update(rs->env->kube, &pv_gvr, NULL, body, NULL, &err);
		cJSON_Delete(body);
		if (rc == CAIRN_ECONFLICT)
			continue;	/* it changed meanwhile: look again */
		if (rc < 0)
			goto fail;
		rs_event(rs, "info", "%s outlived its claim (retained): its "
		    "claim reference is reset so that the restored claim "
		    "binds it again", what);
		return JOURNAL_R_UPDATED;
	}
fail:
	cJSON_Delete(live);
	if (rc != CAIRN_ECANCELED)
		rs_recordf(rs, 1, "", "error restoring %s: %s", what, err.msg);
	return JOURNAL_R_FAILED;
}

/*
 * A PVC before its create: its volumeName follows the PV's name in this
 * restore; a PV neither restored nor in the cluster is dropped (the
 * claim is provisioned anew) instead of leaving the claim Pending.
 */
static int
pvc_step(struct rs *rs, cJSON *pvc, const char *what, const char *bucket)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *vn;
	cJSON *live = NULL;
	char *text, *to;
	int rc;

	rc = pvc_snapshot(rs, pvc, what, bucket);
	if (rc >= 0)
		return rc;
	vn = json_str(pvc, "spec.volumeName");
	if (vn == NULL || vn[0] == '\0')
		return -1;
	text = restore_plan_item(rs->plan, "persistentvolumes", "", vn);
	if (text != NULL) {
		free(text);
		to = pv_target(rs, vn, &err);
		if (to == NULL) {
			rs_recordf(rs, 1, bucket, "error restoring %s: %s", what,
			    err.msg);
			return JOURNAL_R_FAILED;
		}
		if (strcmp(to, vn) != 0)
			json_set_str(pvc, "spec.volumeName", to);
		free(to);
		return -1;
	}
	rc = kube_get(rs->env->kube, &pv_gvr, NULL, vn, &live, &err);
	cJSON_Delete(live);
	if (rc == CAIRN_ENOTFOUND) {
		rs_event(rs, "info", "%s: its volume %s is neither restored nor "
		    "in the cluster: the claim gets a new one", what, vn);
		json_delete(pvc, "spec.volumeName");
	} else if (rc < 0) {
		rs_recordf(rs, 1, bucket, "error restoring %s: %s", what,
		    err.msg);
		return JOURNAL_R_FAILED;
	}
	return -1;
}

/* ---- preparing objects ------------------------------------------------------ */

/* The object to create for a row, in place; *status_out when restored. */
static void
prepare(struct rs *rs, const struct restore_row *row, cJSON *obj,
    cJSON **status_out)
{
	const char *target = restore_filter_map_ns(rs->filter, row->ns);
	cJSON *status;

	*status_out = NULL;
	/* before the reset: managedFields say which node ports were chosen */
	ract_clean(row->resgroup, obj, &rs->ract);
	status = cJSON_DetachItemFromObjectCaseSensitive(obj, "status");
	restore_reset_metadata(obj);
	if (rs->ti != NULL && rs->ti->status && status != NULL)
		*status_out = status;
	else
		cJSON_Delete(status);
	if (row->ns[0] != '\0')
		json_set_str(obj, "metadata.namespace", target);
	else
		json_delete(obj, "metadata.namespace");
	if (strcmp(row->resgroup, "namespaces") == 0)
		json_set_str(obj, "metadata.name",
		    restore_filter_map_ns(rs->filter, row->name));
	if (strcmp(row->resgroup, "persistentvolumes") == 0) {
		const char *cns = json_str(obj, "spec.claimRef.namespace");

		if (cns != NULL)
			json_set_str(obj, "spec.claimRef.namespace",
			    restore_filter_map_ns(rs->filter, cns));
	}
	if (strcmp(row->resgroup, "rolebindings.rbac.authorization.k8s.io") == 0 ||
	    strcmp(row->resgroup,
	    "clusterrolebindings.rbac.authorization.k8s.io") == 0) {
		cJSON *s, *subjects = cJSON_GetObjectItemCaseSensitive(obj,
		    "subjects");

		cJSON_ArrayForEach(s, subjects) {
			const char *sns = json_str(s, "namespace");

			if (sns != NULL)
				json_set_str(s, "namespace",
				    restore_filter_map_ns(rs->filter, sns));
		}
	}
	if (strcmp(row->resgroup, "pods") == 0)
		hooks_restore_prepare_pod(rs->hooks, obj, target);
	restore_labels(rs, obj);
}

/*
 * The live object as comparable to a prepared one: the same cleaning, its
 * metadata reset and status dropped, this restore's labels added
 * (Velero's comparison). Owned.
 */
static cJSON *
comparable(struct rs *rs, const char *resgroup, const cJSON *live)
{
	cJSON *c = cJSON_Duplicate(live, 1);

	ract_clean(resgroup, c, &rs->ract);
	restore_reset_metadata(c);
	restore_labels(rs, c);
	return c;
}

static void
write_status(struct rs *rs, const struct kube_gvr *g, const char *ns,
    const cJSON *created, cJSON *status, const char *what)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	cJSON *body;

	if (status == NULL || !kube_resource_has_sub(rs->ti->r, "status"))
		return;
	body = cJSON_Duplicate(created, 1);
	cJSON_DeleteItemFromObjectCaseSensitive(body, "status");
	cJSON_AddItemToObject(body, "status", cJSON_Duplicate(status, 1));
	if (kube_update_status(rs->env->kube, g, ns, body, NULL, &err) < 0)
		rs_recordf(rs, 0, ns, "could not restore the status of %s: %s",
		    what, err.msg);
	cJSON_Delete(body);
}

/*
 * The version to send obj to: its own, when its apiVersion is of the
 * tier's group (an archive's apiVersion never chooses the URL's group,
 * and its version is a plain token); owned in *buf. NULL with why.
 */
static const char *
item_version(const struct tierinfo *ti, const cJSON *obj, char **buf,
    char *why, size_t whysz)
{
	const char *av = json_str_or(obj, "apiVersion", "");
	const char *slash = strchr(av, '/');
	size_t glen = slash != NULL ? (size_t)(slash - av) : 0;
	const char *v = slash != NULL ? slash + 1 : av;

	*buf = NULL;
	if (glen != strlen(ti->r->group) || strncmp(av, ti->r->group, glen) != 0) {
		snprintf(why, whysz, "its apiVersion \"%.100s\" is not of the "
		    "API group of %s", av, ti->resgroup);
		return NULL;
	}
	if (v[0] == '\0')
		return ti->r->version;
	for (const char *c = v; *c != '\0'; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9'))) {
			snprintf(why, whysz, "its apiVersion \"%.100s\" names "
			    "no version", av);
			return NULL;
		}
	*buf = xstrdup(v);
	return *buf;
}

/* ---- one item ------------------------------------------------------------- */

/* One item on its way in (a worker's). */
struct item {
	struct rs *rs;
	const struct restore_row *row;
	cJSON *obj;			/* prepared: what is sent */
	cJSON *status;			/* restored after the create, or NULL */
	struct kube_gvr g;
	const char *ns;			/* target namespace, "" cluster scope */
	const char *bucket;		/* its results list */
	char what[700];			/* "resgroup ns/name" for messages */
};

/* Why the item is not restored at all, or NULL; why[] may hold the text. */
static const char *
item_skip(struct rs *rs, const struct restore_row *row, const cJSON *obj,
    const char *ns, char *why, size_t whysz)
{
	const char *skip = ract_skip(row->resgroup, obj);
	char *owner;

	if (skip != NULL || strcmp(row->resgroup, "secrets") != 0 ||
	    strcmp(json_str_or(obj, "type", ""), RACT_SA_TOKEN_TYPE) != 0)
		return skip;
	owner = sa_token_owner(rs, ns, row->name);
	if (owner == NULL)
		return NULL;
	snprintf(why, whysz, "the token controller of service account %s "
	    "makes it again", owner);
	free(owner);
	return why;
}

/*
 * What comes before the create for volumes and namespaces: -1 to go on,
 * or the item's final state.
 */
static int
item_before(struct item *it)
{
	struct rs *rs = it->rs;
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *rg = it->row->resgroup, *name;
	cJSON *live = NULL;
	char nw[300];
	int rc;

	if (strcmp(rg, "persistentvolumes") == 0)
		return pv_step(rs, it->row, it->obj, it->what);
	if (strcmp(rg, "persistentvolumeclaims") == 0)
		return pvc_step(rs, it->obj, it->what, it->bucket);
	if (strcmp(rg, "namespaces") != 0)
		return -1;
	name = json_str_or(it->obj, "metadata.name", "");
	snprintf(nw, sizeof nw, "namespace %s", name);
	rc = wait_while(rs, &ns_gvr, NULL, name, ns_terminating, nw, 0, &live,
	    &err);
	cJSON_Delete(live);
	if (rc < 0) {
		if (rc != CAIRN_ECANCELED)
			ns_fail(rs, name, err.msg);
		return JOURNAL_R_FAILED;
	}
	return -1;
}

/*
 * The item exists as live: equal once cleaned (done), else left with a
 * warning or updated, as the existingResourcePolicy says.
 */
static enum journal_rstate
item_exists(struct item *it, cJSON *live)
{
	struct rs *rs = it->rs;
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *ns = it->ns[0] ? it->ns : NULL;
	const char *name = json_str_or(it->obj, "metadata.name", "");
	cJSON *cmp, *out = NULL;
	enum journal_rstate st;
	int rc = 0, equal;

	cmp = comparable(rs, it->row->resgroup, live);
	equal = cJSON_Compare(cmp, it->obj, 1);
	cJSON_Delete(cmp);
	if (strcmp(it->row->resgroup, "namespaces") == 0)
		ns_ready(rs, name);
	if (equal)	/* created by an earlier attempt when labelled so */
		return ours(rs, live) ? JOURNAL_R_CREATED : JOURNAL_R_SKIPPED;
	if (!restore_filter_update(rs->filter)) {
		rs_recordf(rs, 0, it->bucket, "could not restore, %s already "
		    "exists. Warning: the in-cluster version is different "
		    "than the backed-up version", it->what);
		return JOURNAL_R_SKIPPED;
	}
	live = cJSON_Duplicate(live, 1);
	for (int i = 0; i < 3 && live != NULL; i++) {
		cJSON *body = cJSON_Duplicate(it->obj, 1);

		json_set_str(body, "metadata.resourceVersion",
		    json_str_or(live, "metadata.resourceVersion", ""));
		cJSON_Delete(out);
		out = NULL;
		rc = kube_update(rs->env->kube, &it->g, ns, body, &out, &err);
		cJSON_Delete(body);
		if (rc != CAIRN_ECONFLICT)
			break;
		cJSON_Delete(live);
		live = NULL;
		rc = kube_get(rs->env->kube, &it->g, ns, name, &live, &err);
	}
	if (rc == 0) {
		st = JOURNAL_R_UPDATED;
		write_status(rs, &it->g, it->ns, out, it->status, it->what);
	} else {
		st = JOURNAL_R_FAILED;
		rs_recordf(rs, 1, it->bucket, "error updating %s: %s", it->what,
		    err.msg);
	}
	cJSON_Delete(live);
	cJSON_Delete(out);
	return st;
}

/*
 * Create the item. Its namespace starting to terminate (403), or an
 * object of its name on its way out, is waited for and the create tried
 * again once; an object that exists goes to item_exists().
 */
static enum journal_rstate
item_create(struct item *it)
{
	struct rs *rs = it->rs;
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *ns = it->ns[0] ? it->ns : NULL;
	const char *name = json_str_or(it->obj, "metadata.name", "");
	cJSON *out = NULL, *live = NULL;
	enum journal_rstate st;
	int rc, retried_ns = 0, retried_gone = 0;
	/* the created object is read only to write a status over it */
	int want_out = it->status != NULL &&
	    kube_resource_has_sub(rs->ti->r, "status");

	for (;;) {
		rc = kube_create(rs->env->kube, &it->g, ns, it->obj,
		    want_out ? &out : NULL, &err);
		if (rc == 0) {
			if (strcmp(it->row->resgroup, "namespaces") == 0)
				ns_ready(rs, name);
			write_status(rs, &it->g, it->ns, out, it->status,
			    it->what);
			cJSON_Delete(out);
			return JOURNAL_R_CREATED;
		}
		if (!retried_ns && ns != NULL && ns_terminating_refusal(rc)) {
			/* its namespace started terminating since it was
			 * made ready: the namespace's error says why not */
			retried_ns = 1;
			ns_unready(rs, ns);
			if (rs_ensure_ns(rs, it->row->ns, ns, 0) == 0)
				continue;
			return JOURNAL_R_FAILED;
		}
		if (rc != CAIRN_EEXIST)
			break;
		rc = kube_get(rs->env->kube, &it->g, ns, name, &live, &err);
		if (rc == CAIRN_ENOTFOUND && !retried_gone) {
			retried_gone = 1;	/* gone since the create */
			continue;
		}
		if (rc < 0) {
			rs_recordf(rs, 1, it->bucket, "error restoring %s: exists "
			    "but cannot be read: %s", it->what, err.msg);
			return JOURNAL_R_FAILED;
		}
		if (!deleting(live) || retried_gone) {
			st = item_exists(it, live);
			cJSON_Delete(live);
			return st;
		}
		/* on its way out (a pod in its grace period, a PVC held by
		 * its protection finalizer): wait, then create it again */
		cJSON_Delete(live);
		live = NULL;
		retried_gone = 1;
		rc = wait_while(rs, &it->g, ns, name, deleting, it->what, 0,
		    &live, &err);
		cJSON_Delete(live);
		live = NULL;
		if (rc < 0)
			break;
	}
	if (rc != CAIRN_ECANCELED)
		rs_recordf(rs, 1, it->bucket, "error restoring %s: %s", it->what,
		    err.msg);
	return JOURNAL_R_FAILED;
}

enum journal_rstate
rs_apply_item(struct rs *rs, const struct restore_row *row)
{
	const struct tierinfo *ti = rs->ti;
	struct cairn_err err = CAIRN_ERR_INIT;
	struct item it;
	const char *skip, *v;
	char why[300], *vbuf = NULL;
	enum journal_rstate st = JOURNAL_R_FAILED;
	int rc;

	memset(&it, 0, sizeof it);
	it.rs = rs;
	it.row = row;
	it.bucket = row->ns[0] ? restore_filter_map_ns(rs->filter, row->ns) :
	    "";
	it.obj = json_parse(row->json, strlen(row->json), &err);
	if (it.obj == NULL) {
		rs_recordf(rs, 1, it.bucket, "%s: %s", row->path, err.msg);
		return JOURNAL_R_FAILED;
	}
	snprintf(it.what, sizeof it.what, "%s %s%s%s", row->resgroup,
	    it.bucket, it.bucket[0] ? "/" : "", row->name);
	if (ti->nocreate) {
		st = JOURNAL_R_SKIPPED;	/* said once for the tier */
		goto done;
	}
	skip = item_skip(rs, row, it.obj, it.bucket, why, sizeof why);
	if (skip != NULL) {
		rs_event(rs, "info", "not restoring %s: %s", it.what, skip);
		st = JOURNAL_R_SKIPPED;
		goto done;
	}
	prepare(rs, row, it.obj, &it.status);
	if (ti->r == NULL) {
		rs_recordf(rs, 1, it.bucket, "error restoring %s: the cluster "
		    "does not serve %s", it.what, row->resgroup);
		goto done;
	}
	it.g = kube_resource_gvr(ti->r);
	v = item_version(ti, it.obj, &vbuf, why, sizeof why);
	if (v == NULL) {
		rs_recordf(rs, 1, it.bucket, "error restoring %s: %s", it.what,
		    why);
		goto done;
	}
	it.g.version = v;
	it.ns = ti->r->namespaced ? json_str_or(it.obj, "metadata.namespace",
	    "") : "";
	rc = item_before(&it);
	st = rc >= 0 ? (enum journal_rstate)rc : item_create(&it);
done:
	rs_reslist_add(rs, it.obj, it.bucket, json_str_or(it.obj,
	    "metadata.name", row->name), st);
	free(vbuf);
	cJSON_Delete(it.status);
	cJSON_Delete(it.obj);
	return st;
}
