/*
 * verify.c: reading a backup back and checking it, see verify.h.
 *
 * The tarball check is one pass: a pull source over the store's get
 * stream (tarread_src_store()) wrapped by a partsrc (engine/partsrc.h),
 * which checks each recorded part's SHA-256 on the way, feeds the archive
 * reader (engine/archive_read.h). The reader checks the gzip
 * and tar structure; for each resource entry (legacy path) the item's
 * apiVersion, kind, namespace and name go into an order-independent
 * multiset hash that is compared with the same hash of the resource list
 * file at the end. When the reader fails, the part the source was in is
 * named, since a changed byte shows first as a gzip or tar error (or, in
 * an encrypted location, as a chunk that does not authenticate, which the
 * decrypting store names itself).
 *
 * The loop thread lists Backups each period and verifies those due,
 * oldest verification first; the result is written with a conditional
 * status write on the resourceVersion just read (a 409 re-reads and
 * retries, so a concurrent writer's fields are kept). Several servers may
 * verify the same backup; that costs reads, not correctness.
 */
#include "config.h"
#include "engine/verify.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"
#include "engine/archive_read.h"
#include "engine/bsl.h"
#include "engine/partsrc.h"
#include "kube/kube.h"
#include "storage/layout.h"
#include "storage/store.h"

#define VERIFY_META_MAX (16u << 20)	/* velero-backup.json */
#define VERIFY_FILE_MAX (256u << 20)	/* a gunzipped metadata file */

static const struct kube_gvr backups_gvr = { "cairn.io", "v1", "backups" };

/* ---- the multiset hash of items ---------------------------------------- */

/*
 * Sum (mod 2^64, four lanes) of the SHA-256 of each element, and a count:
 * equal multisets give equal sums whatever the order; a differing element
 * changes the sum but for a 2^-256 chance.
 */
struct mset {
	uint64_t sum[4];
	int64_t n;
};

static void
mset_add(struct mset *m, const char *a, const char *b)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	EVP_MD_CTX *c = EVP_MD_CTX_new();

	if (c == NULL)
		abort();
	EVP_DigestInit_ex(c, EVP_sha256(), NULL);
	EVP_DigestUpdate(c, a, strlen(a));
	EVP_DigestUpdate(c, "\n", 1);
	EVP_DigestUpdate(c, b, strlen(b));
	EVP_DigestFinal_ex(c, md, &len);
	EVP_MD_CTX_free(c);
	for (int l = 0; l < 4; l++) {
		uint64_t v = 0;

		for (int k = 0; k < 8; k++)
			v = v << 8 | md[8 * l + k];
		m->sum[l] += v;
	}
	m->n++;
}

/* ---- the checks --------------------------------------------------------- */

/* Resource list file -> multiset of (apiVersion/Kind, ns/name). */
static int
list_set(struct store *s, const char *key, struct mset *m, char *why,
    size_t whylen, struct cairn_err *err)
{
	char *text = NULL;
	size_t len = 0;
	cJSON *rl, *kind, *it;
	int rc;

	rc = store_get_gunzip(s, key, VERIFY_FILE_MAX, &text, &len, err);
	if (rc < 0)
		return rc;
	rl = json_parse(text, len, NULL);
	free(text);
	if (!cJSON_IsObject(rl)) {
		cJSON_Delete(rl);
		snprintf(why, whylen, "the resource list is not a JSON object");
		return 1;
	}
	cJSON_ArrayForEach(kind, rl)
		cJSON_ArrayForEach(it, kind)
			if (cJSON_IsString(it))
				mset_add(m, kind->string, it->valuestring);
	cJSON_Delete(rl);
	return 0;
}

static int
is_storage_error(int rc)
{
	return rc == CAIRN_ENET || rc == CAIRN_ETIMEOUT || rc == CAIRN_EAUTH ||
	    rc == CAIRN_ESERVER || rc == CAIRN_EBUSY || rc == CAIRN_ECANCELED ||
	    rc == CAIRN_EIO;
}

/*
 * The tarball pass. 0 with r filled (passed or a problem in r->message),
 * < 0 when storage could not be read.
 */
static int
check_tarball(struct store *s, const char *key, const cJSON *backup,
    struct mset *items, const atomic_int *stop, struct verify_report *r,
    struct cairn_err *err)
{
	struct partsrc *ps;
	struct tarread_src inner, src;
	struct tarread_opts o;
	struct tarread *tr = NULL;
	struct tarread_entry e;
	char where[160];
	cJSON *obj;
	int rc;

	rc = tarread_src_store(&inner, s, key, 0, err);
	if (rc < 0)
		return rc;
	ps = partsrc_new(json_get(backup, "status.checkpoint.parts"), &inner);
	if (ps == NULL) {
		str_format(r->message, sizeof r->message, "more than %d parts "
		    "recorded", PARTSRC_MAX);
		return 0;
	}
	r->parts = partsrc_parts(ps);
	partsrc_source(ps, &src);
	memset(&o, 0, sizeof o);
	o.stop = stop;
	rc = tarread_open(&src, &o, &tr, err);
	if (rc < 0)
		goto out;
	while ((rc = tarread_next(tr, &e, err)) == 1) {
		if (e.verdict == TARREAD_BAD) {
			str_format(r->message, sizeof r->message, "tarball entry "
			    "%llu: %s", (unsigned long long)e.index, e.why);
			rc = 0;
			goto out;
		}
		if (e.verdict != TARREAD_OK ||
		    !str_has_prefix(e.path, "resources/") ||
		    strstr(e.path, "-preferredversion/") != NULL)
			continue;
		obj = NULL;
		rc = tarread_json(tr, &obj, err);
		if (rc == CAIRN_EINVAL || rc == CAIRN_ETOOBIG) {
			str_format(r->message, sizeof r->message, "tarball entry "
			    "%s: %s", e.path, err ? err->msg : "unreadable");
			cairn_err_clear(err);
			rc = 0;
			goto out;
		}
		if (rc < 0)
			break;
		{
			const char *av = json_str_or(obj, "apiVersion", "");
			const char *kd = json_str_or(obj, "kind", "");
			const char *ns = json_str_or(obj, "metadata.namespace", "");
			const char *nm = json_str_or(obj, "metadata.name", "");
			char *gvk = xasprintf("%s/%s", av, kd);
			char *item = *ns ? xasprintf("%s/%s", ns, nm) : xstrdup(nm);

			mset_add(items, gvk, item);
			free(gvk);
			free(item);
		}
		cJSON_Delete(obj);
		r->items++;
	}
	if (rc < 0) {
		partsrc_where(ps, where, sizeof where);
		if (is_storage_error(rc) && partsrc_problem(ps) == NULL)
			goto out;	/* could not read: no verdict */
		str_format(r->message, sizeof r->message, "%s: %s", where,
		    partsrc_problem(ps) != NULL ? partsrc_problem(ps) :
		    err ? err->msg : cairn_strerror(rc));
		cairn_err_clear(err);
		rc = 0;
		goto out;
	}
	/* the archive ended: drain what the source still has, close parts */
	rc = 0;
	r->bytes += tarread_bytes_in(tr);
	partsrc_end(ps);
	if (partsrc_problem(ps) != NULL) {
		str_format(r->message, sizeof r->message, "%s",
		    partsrc_problem(ps));
		goto out;
	}
	r->parts_checked = partsrc_checked(ps);
	r->passed = 1;
out:
	tarread_free(tr);
	partsrc_free(ps);
	return rc;
}

/* Each hostpath volume archive reads whole with the size it recorded. */
static int
check_volumes(struct store *s, const char *prefix, const char *name,
    const atomic_int *stop, struct verify_report *r, struct cairn_err *err)
{
	char *key = layout_backup_key(prefix, name,
	    LAYOUT_BACKUP_VOLUMEPLUGINBACKUPS), *text = NULL;
	size_t len = 0;
	cJSON *list, *it;
	int rc;

	rc = store_get_gunzip(s, key, VERIFY_FILE_MAX, &text, &len, err);
	free(key);
	if (rc == CAIRN_ENOTFOUND) {	/* a backup without volumes */
		cairn_err_clear(err);
		return 0;
	}
	if (rc < 0)
		return rc;
	list = json_parse(text, len, NULL);
	free(text);
	cJSON_ArrayForEach(it, list) {
		const char *vkey = json_str(it, "status.backupProperties.key");
		const char *stored = json_str(it,
		    "status.backupProperties.storedBytes");
		struct tarread_src src;
		struct tarread_opts o;
		struct tarread *tr = NULL;
		struct tarread_entry e;

		if (vkey == NULL || strcmp(json_str_or(it, "status.phase", ""),
		    "Completed") != 0)
			continue;
		rc = tarread_src_store(&src, s, vkey, 0, err);
		if (rc == 0) {
			memset(&o, 0, sizeof o);
			o.ratio_cap = 1u << 30;	/* zeros compress well */
			o.stop = stop;
			rc = tarread_open(&src, &o, &tr, err);
		}
		while (rc == 0 && (rc = tarread_next(tr, &e, err)) == 1)
			rc = 0;
		if (rc == 0 && stored != NULL &&
		    tarread_bytes_in(tr) != strtoull(stored, NULL, 10)) {
			str_format(r->message, sizeof r->message, "volume %s (%s): "
			    "%llu bytes stored, %s recorded",
			    json_str_or(it, "spec.volume", "?"), vkey,
			    (unsigned long long)tarread_bytes_in(tr), stored);
			rc = 1;
		}
		if (tr != NULL)
			r->bytes += tarread_bytes_in(tr);
		tarread_free(tr);
		if (rc < 0 && !is_storage_error(rc)) {
			str_format(r->message, sizeof r->message, "volume %s (%s): %s",
			    json_str_or(it, "spec.volume", "?"), vkey,
			    err ? err->msg : cairn_strerror(rc));
			cairn_err_clear(err);
			rc = 1;
		}
		if (rc != 0)
			break;
		r->volumes++;
	}
	cJSON_Delete(list);
	return rc;
}

int
verify_backup(struct store *s, const char *prefix, const char *name,
    const cJSON *backup, const atomic_int *stop, struct verify_report *r,
    struct cairn_err *err)
{
	static const enum layout_backup_file files[] = { LAYOUT_BACKUP_LOGS,
	    LAYOUT_BACKUP_RESULTS };
	struct mset in_tar, in_list;
	cJSON *stored = NULL;
	char *key = NULL, *text = NULL, why[256] = "";
	size_t len = 0;
	int rc;

	memset(r, 0, sizeof *r);
	memset(&in_tar, 0, sizeof in_tar);
	memset(&in_list, 0, sizeof in_list);
	if (!layout_name_ok(name))
		return cairn_err_set(err, CAIRN_EINVAL, "\"%.100s\" cannot be a "
		    "backup name", name);
	/* velero-backup.json: present, whole, this backup */
	key = layout_backup_key(prefix, name, LAYOUT_BACKUP_METADATA);
	rc = store_get_mem(s, key, VERIFY_META_MAX, &text, &len, err);
	if (rc < 0 && !is_storage_error(rc)) {
		str_format(r->message, sizeof r->message, "%s: %s", key, err->msg);
		cairn_err_clear(err);
		rc = 0;
		goto out;
	}
	if (rc < 0)
		goto out;
	stored = json_parse(text, len, NULL);
	if (stored == NULL || strcmp(json_str_or(stored, "metadata.name", ""),
	    name) != 0) {
		str_format(r->message, sizeof r->message, "%s is not the Backup "
		    "%s as JSON", key, name);
		goto out;
	}
	if (backup == NULL)
		backup = stored;
	/* the small files read whole */
	for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
		char *data = NULL;

		free(key);
		key = layout_backup_key(prefix, name, files[i]);
		rc = store_get_gunzip(s, key, VERIFY_FILE_MAX, &data, &len, err);
		free(data);
		if (rc < 0 && !is_storage_error(rc)) {
			str_format(r->message, sizeof r->message, "%s: %s", key,
			    err->msg);
			cairn_err_clear(err);
			rc = 0;
			goto out;
		}
		if (rc < 0)
			goto out;
	}
	free(key);
	key = layout_backup_key(prefix, name, LAYOUT_BACKUP_RESOURCE_LIST);
	rc = list_set(s, key, &in_list, why, sizeof why, err);
	if (rc != 0) {
		if (rc < 0 && is_storage_error(rc))
			goto out;
		str_format(r->message, sizeof r->message, "%s: %s", key,
		    rc > 0 ? why : err->msg);
		cairn_err_clear(err);
		rc = 0;
		goto out;
	}
	/* the tarball, part by part, and its items */
	free(key);
	key = layout_backup_key(prefix, name, LAYOUT_BACKUP_TARBALL);
	rc = check_tarball(s, key, backup, &in_tar, stop, r, err);
	if (rc < 0 || !r->passed)
		goto out;
	if (in_tar.n != in_list.n || memcmp(in_tar.sum, in_list.sum,
	    sizeof in_tar.sum) != 0) {
		r->passed = 0;
		str_format(r->message, sizeof r->message, in_tar.n != in_list.n ?
		    "the tarball holds %lld items, the resource list names %lld" :
		    "the tarball's %lld items are not the %lld the resource list "
		    "names", (long long)in_tar.n, (long long)in_list.n);
		goto out;
	}
	r->passed = 0;
	rc = check_volumes(s, prefix, name, stop, r, err);
	if (rc != 0) {
		if (rc > 0)
			rc = 0;
		goto out;
	}
	r->passed = 1;
	str_format(r->message, sizeof r->message, "%lld parts (%lld with a "
	    "recorded SHA-256, all equal), %lld items as the resource list "
	    "names them, %lld volume archives, %llu bytes read%s",
	    (long long)r->parts, (long long)r->parts_checked,
	    (long long)r->items, (long long)r->volumes,
	    (unsigned long long)r->bytes, r->parts_checked < r->parts ?
	    "; parts without a recorded SHA-256 were checked by their gzip "
	    "CRCs only" : "");
out:
	cJSON_Delete(stored);
	free(text);
	free(key);
	return rc;
}

cJSON *
verify_status(const struct verify_report *r, const char *by)
{
	cJSON *v = cJSON_CreateObject();
	char ts[TIME_STR_MAX];

	time_format_rfc3339(time_now_us(), ts);
	cJSON_AddStringToObject(v, "lastVerified", ts);
	cJSON_AddStringToObject(v, "result", r->passed ? "Passed" : "Failed");
	cJSON_AddStringToObject(v, "message", r->message);
	cJSON_AddNumberToObject(v, "partsChecked", (double)r->parts_checked);
	cJSON_AddNumberToObject(v, "itemsChecked", (double)r->items);
	cJSON_AddStringToObject(v, "verifiedBy", by);
	return v;
}

/* ---- the periodic loop -------------------------------------------------- */

struct verify_loop {
	struct verify_loop_opts o;
	atomic_int stop;
	pthread_t th;
};

/* 1 when b is due: final with a tarball, never verified or too long ago. */
static int
due(const cJSON *b, int64_t now, int64_t period)
{
	const char *phase = json_str_or(b, "status.phase", "");
	const char *last = json_str(b, "status.verification.lastVerified");
	int64_t at = 0;

	if (strcmp(phase, "Completed") != 0 &&
	    strcmp(phase, "PartiallyFailed") != 0)
		return 0;
	if (json_get(b, "metadata.deletionTimestamp") != NULL)
		return 0;
	return last == NULL || time_parse(last, &at) < 0 || now - at >= period;
}

/* Write status.verification of backup name, conditional, re-read on 409. */
static int
record(struct verify_loop *v, const char *name, cJSON *ver,
    struct cairn_err *err)
{
	cJSON *b = NULL;
	int rc = CAIRN_ECONFLICT;

	for (int tries = 0; tries < 5 && rc == CAIRN_ECONFLICT; tries++) {
		cJSON_Delete(b);
		b = NULL;
		cairn_err_clear(err);
		rc = kube_get(v->o.kube, &backups_gvr, v->o.namespace, name, &b,
		    err);
		if (rc < 0)
			break;
		json_set_item(b, "status.verification", cJSON_Duplicate(ver, 1));
		rc = kube_update_status(v->o.kube, &backups_gvr, v->o.namespace,
		    b, NULL, err);
	}
	cJSON_Delete(b);
	return rc;
}

static void
verify_one(struct verify_loop *v, const cJSON *b)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct verify_report r;
	struct bsl *loc = NULL;
	const char *name = json_str_or(b, "metadata.name", "");
	cJSON *ver;
	int rc;

	rc = bsl_open(v->o.kube, v->o.namespace,
	    json_str(b, "spec.storageLocation"), &loc, &err);
	if (rc == 0)
		rc = verify_backup(bsl_store(loc), bsl_prefix(loc), name, b,
		    &v->stop, &r, &err);
	bsl_free(loc);
	if (rc < 0) {
		if (rc != CAIRN_ECANCELED)
			log_warn("verifying backup %s/%s: %s (will retry)",
			    v->o.namespace, name, err.msg);
		return;
	}
	if (r.passed)
		log_info("backup %s/%s verified: %s", v->o.namespace, name,
		    r.message);
	else
		log_error("backup %s/%s failed verification: %s",
		    v->o.namespace, name, r.message);
	ver = verify_status(&r, v->o.server_id);
	if (record(v, name, ver, &err) < 0 && err.code != CAIRN_ENOTFOUND)
		log_warn("recording the verification of backup %s/%s: %s",
		    v->o.namespace, name, err.msg);
	cJSON_Delete(ver);
}

static void *
verify_main(void *arg)
{
	struct verify_loop *v = arg;

	util_thread_name("verify");

	while (!v->stop) {
		struct cairn_err err = CAIRN_ERR_INIT;
		cJSON *list = NULL;
		const cJSON *it;
		char *path = kube_path(&backups_gvr, v->o.namespace, NULL, NULL);
		int64_t start = time_mono_us();

		if (kube_request(v->o.kube, "GET", path, NULL, NULL, 0, 1, &list,
		    &err) < 0)
			log_warn("verification: listing backups in %s: %s",
			    v->o.namespace, err.msg);
		free(path);
		cJSON_ArrayForEach(it, json_get(list, "items")) {
			if (v->stop)
				break;
			if (due(it, time_now_us(), v->o.period_us))
				verify_one(v, it);
		}
		cJSON_Delete(list);
		/* look again after a tenth of the period (at most a minute) */
		{
			int64_t pause = v->o.period_us / 10;

			if (pause > 60 * TIME_US_PER_SEC)
				pause = 60 * TIME_US_PER_SEC;
			if (pause < TIME_US_PER_SEC)
				pause = TIME_US_PER_SEC;
			time_sleep_us(pause - (time_mono_us() - start), &v->stop);
		}
	}
	return NULL;
}

int
verify_loop_start(const struct verify_loop_opts *o, struct verify_loop **out,
    struct cairn_err *err)
{
	struct verify_loop *v = xcalloc(1, sizeof *v);

	*out = NULL;
	v->o = *o;
	if (pthread_create(&v->th, NULL, verify_main, v) != 0) {
		free(v);
		return cairn_err_set(err, CAIRN_EFAIL, "cannot start the "
		    "verification thread");
	}
	*out = v;
	return 0;
}

void
verify_loop_stop(struct verify_loop *v)
{
	if (v == NULL)
		return;
	v->stop = 1;
	pthread_join(v->th, NULL);
	free(v);
}
