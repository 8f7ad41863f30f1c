/*
 * backup.c: one Backup, from claim to Completed, streaming and resumable.
 *
 * Design. Items are visited in a deterministic order: resources sorted by
 * (walk pass, group, plural), items within a resource as the paged list
 * returns them (namespace, then name: the API server's key order). Each
 * item is written twice (legacy and -preferredversion paths), as the
 * compact text the API server sent (kube_list_text), into a tarparts
 * writer; between items the writer may cut a part once its
 * compressed size passed --part-size. A cut part goes through the part
 * pipeline shared with the hostpath mover (engine/partsink.h): spooled to
 * an unlinked temp file (so RSS stays flat and the upload can be
 * retried), uploaded as part N of a multipart upload (S3: UploadPart; fs:
 * a part file under .cairn-uploads), then bk_part_stored() records it in
 * the journal (journal first) and mirrors it into status.checkpoint with
 * a conditional status write.
 *
 * Resume. The checkpoint is the list of stored parts with the last item
 * key in each, and (journal only) the continue token of the list page
 * that held that item. A resumed run checks those parts are still in the
 * upload (list parts, ETags equal), skips the resources before the last
 * key's resource without listing them, starts the list of that resource
 * at the recorded page (the rest of the original list's snapshot), skips
 * the items of that page up to the last key, and continues with part
 * last+1. Everything after the last checkpoint is redone (at most one
 * part); of the items stored before, at most one list page is listed
 * again. Without a token (a first page, a checkpoint from status, a
 * journal from before schema version 3, a resource whose earlier items
 * feed the related cluster-scoped set) the resource is listed from the
 * start and skipped by key, as a fresh list; when it expired (410) the
 * list goes on from the API server's inconsistent token or a new list
 * (KUBE_GONE_RESUME), skipped by key (docs/protocol.md, "What a resumed
 * backup contains"). Keys compare in etcd's order (kube_key_cmp).
 *
 * Plan: the resources discovery chose (ServerPreferredResources) that
 * have list, create, get and delete, one of each pair of cohabiting
 * resources, what the filters take; failed group-versions and names
 * that match nothing are warnings (a failed group also an error). With
 * includedNamespaces each namespaced resource is listed namespace by
 * namespace (in key order), and Namespaces, related PVs and CRDs are
 * read by name, so a small backup of a big cluster asks only about its
 * part of it.
 *
 * Memory: one item at a time from the list stream, one tar entry at a
 * time through libarchive, the tarparts batches (4 x 512 KiB), their
 * gzip members and the part spool on disk. What grows: the checkpoint's
 * part list (<= 10000 entries), the names of PVs bound to included PVCs
 * and the custom resource kinds seen (only when includeClusterResources
 * is unset and some namespaces are filtered out) and the error messages
 * of the results file (capped). The resource list file is gzipped into
 * an unlinked temporary file as items go into the tarball (struct rlgz:
 * a few bytes an item on disk, none in memory). A run that resumed (so
 * did not write the items of the kept parts) reads the stored tarball
 * back for it instead, which is right whoever wrote the parts.
 *
 * Threads: a run is one worker thread, plus the tarparts compression
 * threads, which only append to the part spool (one thread at a time);
 * the upload and bk_part_stored() run on the worker with the queue
 * drained.
 * struct kube, journal and store are shared thread-safe handles.
 */
#include "config.h"
#include "engine/backup.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "base/buf.h"
#include "base/fault.h"
#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"
#include "engine/bspec.h"
#include "engine/claim.h"
#include "engine/hooks_backup.h"
#include "engine/itemlog.h"
#include "engine/volumes.h"
#include "engine/bsl.h"
#include "engine/partsink.h"
#include "engine/schedule.h"
#include "engine/tarparts.h"
#include "journal/journal.h"
#include "kube/kube.h"
#include "storage/crypt.h"
#include "storage/store.h"

#define BK_MAX_RESULTS 1000		/* error/warning lines kept for results */
#define BK_CARRY_MAX 100		/* ... and carried over by a checkpoint */
#define BK_PROGRESS_US TIME_US_PER_SEC	/* status.progress at most this often */

static const struct kube_gvr backups_gvr = { "cairn.io", "v1", "backups" };

/* One resource of the walk, in order. */
struct bk_res {
	struct kube_resource *r;	/* owned copy */
	int pass;			/* 0 normal, 1 related cluster-scoped */
	/* the walk (bk_queue_res) */
	int c;				/* place against the checkpoint */
	int skip;			/* not visited at all */
	int walked;
	size_t u0, nu;			/* its units in struct bk's */
};

/*
 * Item paths and key up to the item name, for one resource and namespace
 * (bspec_item_paths/bspec_item_key with an empty name): the list hands
 * over runs of items of one namespace, so write_item() only appends the
 * name instead of formatting four strings per item.
 */
struct bk_pfx {
	const struct bk_res *res;	/* the prefixes are for this resource */
	char ns[256];			/* ... and this namespace */
	int ok;				/* 0: format per item (too long, odd) */
	char legacy[768], preferred[768], key[768];
	size_t legacy_len, preferred_len, key_len;
	size_t last_key_cap;		/* bytes allocated for last_key */
};

struct bk_unit;

struct bk {
	const struct engine_env *env;
	const char *worker;
	char *ns, *name, *uid;
	cJSON *obj;			/* latest object known (owned) */
	cJSON *status;			/* the status we own and write (owned) */
	int64_t attempt;
	int64_t jid;			/* journal row */
	struct engine_fence f;		/* our claim */
	struct bspec *spec;
	struct bsl *loc;
	struct store *store;		/* borrowed from loc */
	char *tar_key;
	char *upload_id;
	struct journal_part *parts;	/* stored parts, ascending */
	size_t nparts, aparts;
	/* resume point */
	char *resume[4];		/* group, resource, ns, name or NULLs */
	int resume_pass;
	char *resume_cont;		/* list token of its page; NULL: start */
	/* where the list is: continue token of the page being delivered */
	char *page_cont;		/* owned; "" for a first page */
	uint64_t page_gen;		/* bumped per page announced */
	char *item_cont;		/* page_cont of last_key's item (owned) */
	uint64_t item_cont_gen;		/* page_gen item_cont was copied at */
	/* the walk */
	struct bk_res *res;
	size_t nres;
	int per_ns;			/* list namespace by namespace */
	char **nslist;			/* ... these, in key order (owned) */
	size_t nns;
	int wide;			/* ... but list across them: BK_WIDE */
	size_t nns_all;			/* the cluster's (0: not listed) */
	int64_t res_items;		/* items the current resource wrote */
	char *const *ordered;		/* its orderedResources (spec), or NULL */
	int in_ordered;			/* ... being written first, by name */
	int64_t res_deleting;		/* ... skipped: being deleted */
	struct kube_lists *lists;	/* the walk's requests, fetched ahead */
	struct bk_unit *units;		/* ... in the order taken */
	size_t nunits, aunits;
	struct tarparts *tp;
	struct partsink *ps;		/* spool and upload of the parts */
	char *last_key;			/* last item written (owned) */
	uint64_t part_items;
	int64_t items_done;		/* in stored parts + current */
	int64_t items_stored;		/* in stored parts */
	int64_t bytes_stored;
	int64_t total_items;
	int64_t shown_total;		/* totalItems last written: never less */
	int64_t last_progress_us;
	int64_t start_us;
	struct buf legacy, preferred;
	struct bk_pfx pfx;		/* item paths: cached prefixes */
	char inc_ns[256];		/* bspec_ns_included(inc_ns) is inc_ok */
	int inc_ok;			/* -1: inc_ns not set */
	/* related cluster-scoped items (includeClusterResources unset) */
	char **pv_names;		/* sorted at use; NULL-terminated */
	size_t npv, apv;
	char **cr_kinds;		/* "plural.group" with included items */
	size_t ncr, acr;
	/* results */
	cJSON *errors;			/* array of strings */
	cJSON *warnings;
	int nerrors, nwarnings;
	/*
	 * status.checkpoint.results: the counts and (first BK_CARRY_MAX)
	 * messages as of the last stored part, so a resumed run starts from
	 * them; carried: those messages, each taken off when this run
	 * records it again (its re-walk, its volume step), never counted
	 * twice.
	 */
	cJSON *ck_results;
	cJSON *carried[2];		/* [0] warnings, [1] errors */
	/* the resource list of the items this run wrote (all, unless resumed) */
	struct rlgz *rl;
	int resumed;			/* parts were kept from an earlier run */
	size_t nkept;			/* ... that many: parts[0..nkept) */
	int lists_ok, lists_failed;	/* resource lists of this run */
	char *first_list_err;		/* the first list's failure */
	int tar_done;			/* the tarball is complete in storage */
	int from_status;		/* ... vouched for by status, not our journal */
	char *cur_gvk;			/* "apps/v1/Deployment" of cur */
	/* current resource while listing */
	const struct bk_res *cur;
	int skipping;			/* resume: still before the last key */
	int observe_only;		/* rebuilding related sets, no writes */
	int cur_rc;			/* first error inside a list callback */
	struct cairn_err cur_err;
	struct hooks_backup *hooks;	/* pre/post hooks around pods */
	struct itemlog log;		/* the backup's log (journal events) */
	struct buf empty;		/* resources listed with no items */
};

/* ------------------------------------------------------------------ */
/* Status writes, conditional on resourceVersion, with fencing.        */
/* ------------------------------------------------------------------ */

/*
 * Write b->status through the status subresource with the RV of b->obj,
 * fenced (engine/claim.h): another claim -> CAIRN_EFENCED.
 */
static int
bk_status_write(struct bk *b, struct cairn_err *err)
{
	return engine_status_write(&b->f, &b->obj, b->status, err);
}

int
backup_claim(const struct engine_env *env, const cJSON *obj,
	const char *worker, int64_t attempt, cJSON **out,
	struct cairn_err *err)
{
	return engine_claim(env, &backups_gvr, obj, worker, attempt, out, err);
}

/* ------------------------------------------------------------------ */
/* Events, errors, progress.                                           */
/* ------------------------------------------------------------------ */

static void
bk_event(struct bk *b, const char *level, const char *fmt, ...)
	CAIRN_PRINTF(3, 4);

static void
bk_event(struct bk *b, const char *level, const char *fmt, ...)
{
	char line[JOURNAL_EVENT_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	b->log.jid = b->jid;
	itemlog_event(&b->log, level, NULL, "%s", line);
}

/* A log line about one resource (and namespace: NULL for none). */
static void
bk_res_event(struct bk *b, const char *level, const struct kube_resource *r,
	const char *ns, const char *fmt, ...) CAIRN_PRINTF(5, 6);

static void
bk_res_event(struct bk *b, const char *level, const struct kube_resource *r,
	const char *ns, const char *fmt, ...)
{
	char line[JOURNAL_EVENT_MAX], res[600];
	struct buf kv;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	snprintf(res, sizeof res, "%s%s%s", r->resource, r->group[0] ? "." :
	    "", r->group);
	buf_init(&kv, JOURNAL_EVENT_MAX - 1);
	if (ns != NULL)
		itemlog_kv(&kv, "namespace", ns);
	itemlog_kv(&kv, "resource", res);
	b->log.jid = b->jid;
	itemlog_event(&b->log, level, buf_cstr(&kv), "%s", line);
	buf_free(&kv);
}

static void
bk_record(struct bk *b, int is_error, const char *msg)
{
	cJSON *a = is_error ? b->errors : b->warnings;
	cJSON *c = b->carried[is_error ? 1 : 0], *m;
	int i = 0;

	cJSON_ArrayForEach(m, c) {
		if (strcmp(m->valuestring, msg) == 0) {
			/* recorded before the restart: counted already */
			cJSON_DeleteItemFromArray(c, i);
			bk_event(b, is_error ? "error" : "warning", "%s", msg);
			return;
		}
		i++;
	}
	if (is_error)
		b->nerrors++;
	else
		b->nwarnings++;
	if (cJSON_GetArraySize(a) < BK_MAX_RESULTS)
		cJSON_AddItemToArray(a, cJSON_CreateString(msg));
	bk_event(b, is_error ? "error" : "warning", "%s", msg);
}

/*
 * Compressed tarball bytes so far: the stored parts and what the open
 * part holds (a closed part is in bytes_stored already). At the end, the
 * tarball's size.
 */
static int64_t
bk_bytes(const struct bk *b)
{
	int64_t bytes = b->bytes_stored;
	int open = b->tp != NULL ? tarparts_current_part(b->tp) : 0;

	/* while the sink stores a part, that part is still "open" there */
	if (open != 0 && (b->nparts == 0 ||
	    b->parts[b->nparts - 1].part_number != open))
		bytes += (int64_t)tarparts_part_bytes(b->tp);
	return bytes;
}

/*
 * status.progress. While the backup runs totalItems never goes down (an
 * estimate that gave way to a smaller count keeps the larger total until
 * the end); final (Completed, PartiallyFailed): the items in the backup,
 * as Velero writes it.
 */
static void bk_count_ahead(struct bk *b);

static void
bk_set_progress_final(struct bk *b, int final)
{
	cJSON *p = cJSON_CreateObject();
	int64_t total;

	bk_count_ahead(b);
	total = b->total_items > b->items_done ? b->total_items :
	    b->items_done;

	if (final)
		total = b->items_done;
	else if (total < b->shown_total)
		total = b->shown_total;
	b->shown_total = total;
	cJSON_AddNumberToObject(p, "totalItems", (double)total);
	cJSON_AddNumberToObject(p, "itemsBackedUp", (double)b->items_done);
	cJSON_AddNumberToObject(p, "bytesDone", (double)bk_bytes(b));
	json_set_item(b->status, "progress", p);
}

static void
bk_set_progress(struct bk *b)
{
	bk_set_progress_final(b, 0);
}

/* The journal's copy of what status.progress and the counts say. */
static int
bk_journal_progress(struct bk *b, struct cairn_err *err)
{
	int rc;

	rc = journal_begin(b->env->journal, err);
	if (rc < 0)
		return rc;
	(void)journal_set_progress(b->env->journal, b->jid, b->shown_total,
	    b->items_done, bk_bytes(b), NULL);
	(void)journal_set_counts(b->env->journal, b->jid, b->nwarnings,
	    b->nerrors, NULL);
	return journal_commit(b->env->journal, err);
}

/* status.progress at most once a second. */
static int
bk_progress(struct bk *b, int force, struct cairn_err *err)
{
	int64_t now = time_mono_us();

	if (!force && now - b->last_progress_us < BK_PROGRESS_US)
		return 0;
	b->last_progress_us = now;
	bk_set_progress(b);
	(void)bk_journal_progress(b, NULL);
	return bk_status_write(b, err);
}

static void
bk_set_checkpoint(struct bk *b)
{
	cJSON *c = cJSON_CreateObject();
	cJSON *parts = cJSON_AddArrayToObject(c, "parts");

	cJSON_AddStringToObject(c, "uploadID", b->upload_id ? b->upload_id : "");
	for (size_t i = 0; i < b->nparts; i++) {
		cJSON *p = cJSON_CreateObject();

		cJSON_AddNumberToObject(p, "number",
		    (double)b->parts[i].part_number);
		cJSON_AddStringToObject(p, "etag", b->parts[i].etag);
		cJSON_AddStringToObject(p, "lastItem", b->parts[i].last_key);
		cJSON_AddNumberToObject(p, "items", (double)b->parts[i].items);
		cJSON_AddNumberToObject(p, "bytes", (double)b->parts[i].bytes);
		if (b->parts[i].sha256[0] != '\0')
			cJSON_AddStringToObject(p, "sha256", b->parts[i].sha256);
		cJSON_AddItemToArray(parts, p);
	}
	cJSON_AddNumberToObject(c, "itemsDone", (double)b->items_stored);
	/* Only the last part's token: a taker-over goes on from there. */
	if (b->nparts > 0 && b->parts[b->nparts - 1].list_continue[0] != '\0')
		cJSON_AddStringToObject(c, "listContinue",
		    b->parts[b->nparts - 1].list_continue);
	if (b->ck_results != NULL)
		cJSON_AddItemToObject(c, "results",
		    cJSON_Duplicate(b->ck_results, 1));
	hooks_backup_checkpoint(b->hooks, c, b->status);
	json_set_item(b->status, "checkpoint", c);
}

/* The first BK_CARRY_MAX strings of a. */
static cJSON *
bk_first_msgs(const cJSON *a)
{
	cJSON *out = cJSON_CreateArray(), *m;
	int n = 0;

	cJSON_ArrayForEach(m, a)
		if (n++ < BK_CARRY_MAX && cJSON_IsString(m))
			cJSON_AddItemToArray(out, cJSON_CreateString(m->valuestring));
	return out;
}

/* A part is stored: what was recorded so far is covered by it. */
static void
bk_snapshot_results(struct bk *b)
{
	cJSON *r = cJSON_CreateObject();

	cJSON_AddNumberToObject(r, "errors", b->nerrors);
	cJSON_AddNumberToObject(r, "warnings", b->nwarnings);
	cJSON_AddItemToObject(r, "errorMessages", bk_first_msgs(b->errors));
	cJSON_AddItemToObject(r, "warningMessages",
	    bk_first_msgs(b->warnings));
	cJSON_Delete(b->ck_results);
	b->ck_results = r;
}

/*
 * A resumed run keeps the earlier parts: it starts from the results
 * recorded up to them (status.checkpoint.results), as counted then.
 */
static void
bk_carry_results(struct bk *b)
{
	const cJSON *r = json_get(b->obj, "status.checkpoint.results"), *m;

	if (r == NULL)
		return;
	b->nerrors = (int)json_int(r, "errors", 0);
	b->nwarnings = (int)json_int(r, "warnings", 0);
	for (int e = 0; e < 2; e++) {
		cJSON *a = e ? b->errors : b->warnings;

		b->carried[e] = cJSON_CreateArray();
		cJSON_ArrayForEach(m, json_get(r, e ? "errorMessages" :
		    "warningMessages")) {
			if (!cJSON_IsString(m))
				continue;
			cJSON_AddItemToArray(a, cJSON_CreateString(m->valuestring));
			cJSON_AddItemToArray(b->carried[e],
			    cJSON_CreateString(m->valuestring));
		}
	}
	b->ck_results = cJSON_Duplicate(r, 1);
}

/* engine/hooks_backup.h's callbacks: state into status, log, results. */
static int
hk_persist(void *arg, struct cairn_err *err)
{
	struct bk *b = arg;

	bk_set_checkpoint(b);
	return bk_status_write(b, err);
}

static void
hk_event(void *arg, const char *level, const char *line)
{
	bk_event(arg, level, "%s", line);
}

static void
hk_record(void *arg, int is_error, const char *msg)
{
	bk_record(arg, is_error, msg);
}

/* ------------------------------------------------------------------ */
/* The part sink: spool, upload, journal, status.                     */
/* ------------------------------------------------------------------ */

static int bk_completed_meanwhile(struct bk *b);

static void
bk_add_part(struct bk *b, const struct journal_part *p)
{
	if (b->nparts == b->aparts) {
		b->aparts = b->aparts ? 2 * b->aparts : 16;
		b->parts = xreallocarray(b->parts, b->aparts, sizeof *b->parts);
	}
	b->parts[b->nparts++] = *p;
}

/* partsink: before a part is uploaded, ownership is checked. */
static int
bk_part_fence(void *arg, int part, struct cairn_err *err)
{
	struct bk *b = arg;

	(void)part;
	if (b->f.fenced)
		return cairn_err_set(err, CAIRN_EFENCED, "ownership lost");
	return engine_fence_check(&b->f, err);
}

/* partsink: the upload is gone because an earlier attempt completed it. */
static int
bk_part_failed(void *arg, int part, int rc, struct cairn_err *err)
{
	struct bk *b = arg;

	(void)part;
	if (rc == CAIRN_ENOTFOUND && bk_completed_meanwhile(b))
		return cairn_err_set(err, CAIRN_EEXIST, "tarball complete");
	return rc;
}

/* partsink: part p is stored: journal first, then status.checkpoint. */
static int
bk_part_stored(void *arg, const struct store_part *p, uint64_t entries,
	struct cairn_err *err)
{
	struct bk *b = arg;
	struct journal_part jp;
	int rc, part = p->number;
	uint64_t bytes = p->size;

	(void)entries;
	memset(&jp, 0, sizeof jp);
	jp.part_number = part;
	snprintf(jp.upload_id, sizeof jp.upload_id, "%s", b->upload_id);
	snprintf(jp.etag, sizeof jp.etag, "%s", p->etag);
	snprintf(jp.last_key, sizeof jp.last_key, "%s",
	    b->last_key ? b->last_key : "");
	/* A token that does not fit is left out: resume lists from the start. */
	if (b->item_cont != NULL && strlen(b->item_cont) < sizeof jp.list_continue)
		strcpy(jp.list_continue, b->item_cont);
	jp.items = (int64_t)b->part_items;
	jp.bytes = (int64_t)bytes;
	snprintf(jp.sha256, sizeof jp.sha256, "%s", partsink_sha256(b->ps));
	/* Journal first ... */
	rc = journal_part_add(b->env->journal, b->jid, &jp, err);
	if (rc < 0)
		return cairn_err_prefix(err, "journal checkpoint of part %d",
		    part);
	bk_add_part(b, &jp);
	b->items_stored += (int64_t)b->part_items;
	b->bytes_stored += (int64_t)bytes;
	b->part_items = 0;
	bk_snapshot_results(b);
	/* ... then the cluster. */
	bk_set_checkpoint(b);
	bk_set_progress(b);
	b->last_progress_us = time_mono_us();
	rc = bk_status_write(b, err);
	if (rc < 0)
		return rc;
	fault_point("backup.after-part");
	log_info("backup %s/%s: part %d stored (%llu bytes, %lld items, "
	    "last %s)", b->ns, b->name, part, (unsigned long long)bytes,
	    (long long)jp.items, jp.last_key);
	if (b->env->drain != NULL && *b->env->drain) {
		bk_event(b, "info", "stopped at the checkpoint of part %d for "
		    "shutdown", part);
		return cairn_err_set(err, CAIRN_ECANCELED, "stopped at a "
		    "checkpoint");
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* The walk.                                                           */
/* ------------------------------------------------------------------ */

static int
strv_add_sorted_unique(char ***v, size_t *n, size_t *a, const char *s)
{
	size_t lo = 0, hi = *n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp((*v)[mid], s);

		if (c == 0)
			return 0;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (*n + 2 > *a) {
		*a = *a ? 2 * *a : 16;
		*v = xreallocarray(*v, *a, sizeof **v);
	}
	memmove(*v + lo + 1, *v + lo, (*n - lo) * sizeof **v);
	(*v)[lo] = xstrdup(s);
	(*n)++;
	(*v)[*n] = NULL;
	return 1;
}

static int
strv_sorted_has(char **v, size_t n, const char *s)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(v[mid], s);

		if (c == 0)
			return 1;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

static int ns_cmp(const void *pa, const void *pb);

/* Is namespace ns one of the plan's (b->nslist, key order)? */
static int
nslist_has(const struct bk *b, const char *ns)
{
	return b->nns > 0 && bsearch(&ns, b->nslist, b->nns, sizeof *b->nslist,
	    ns_cmp) != NULL;
}

/* bspec_ns_included, asked once per run of items of one namespace */
static int
bk_ns_included(struct bk *b, const char *ns)
{
	if (b->inc_ok >= 0 && strcmp(b->inc_ns, ns) == 0)
		return b->inc_ok;
	if (strlen(ns) >= sizeof b->inc_ns)
		return bspec_ns_included(b->spec, ns);
	strcpy(b->inc_ns, ns);
	b->inc_ok = bspec_ns_included(b->spec, ns);
	return b->inc_ok;
}

/* Does this item pass the filters of the resource being walked? */
static int
item_selected(struct bk *b, const struct kube_resource *r, const cJSON *item,
	const cJSON *md, const char *ns, const char *name)
{
	int is_ns = r->group[0] == '\0' && strcmp(r->resource, "namespaces") == 0;
	const cJSON *del = cJSON_GetObjectItemCaseSensitive(md,
	    "deletionTimestamp");

	if (del != NULL && !cJSON_IsNull(del)) {
		b->res_deleting++;
		return 0;	/* Velero: "being deleted" items are skipped */
	}
	if (is_ns)
		return bspec_ns_included(b->spec, name);
	if (r->namespaced && !bk_ns_included(b, ns))
		return 0;
	/* a list across namespaces: only those of the plan (BK_WIDE) */
	if (r->namespaced && b->wide && !nslist_has(b, ns))
		return 0;
	if (!bspec_labels_match(b->spec, item))
		return 0;
	if (b->cur->pass == 1) {
		if (strcmp(r->resource, "persistentvolumes") == 0)
			return strv_sorted_has(b->pv_names, b->npv, name);
		/* CRD "plural.group" of an included custom resource */
		return strv_sorted_has(b->cr_kinds, b->ncr, name);
	}
	return 1;
}

/*
 * Can items of r add to the related cluster-scoped sets (PV names of
 * PVCs, CRDs of custom resources)? Only when includeClusterResources is
 * unset and some namespaces are filtered out.
 */
static int
feeds_related(const struct bk *b, const struct kube_resource *r)
{
	if (b->spec->cluster != BSPEC_CLUSTER_AUTO || b->spec->all_namespaces ||
	    !r->namespaced)
		return 0;
	if (r->group[0] == '\0')
		return strcmp(r->resource, "persistentvolumeclaims") == 0;
	/* built-in groups have no CRD */
	return strchr(r->group, '.') != NULL &&
	    !str_has_suffix(r->group, ".k8s.io");
}

/* Remember what related cluster-scoped items an included item needs. */
static void
note_related(struct bk *b, const struct kube_resource *r, const cJSON *item)
{
	const char *vol;
	char *kind;

	if (!feeds_related(b, r))
		return;
	if (r->group[0] == '\0') {	/* persistentvolumeclaims */
		vol = json_str(item, "spec.volumeName");
		if (vol != NULL && vol[0] != '\0')
			strv_add_sorted_unique(&b->pv_names, &b->npv, &b->apv,
			    vol);
		return;
	}
	kind = xasprintf("%s.%s", r->resource, r->group);
	strv_add_sorted_unique(&b->cr_kinds, &b->ncr, &b->acr, kind);
	free(kind);
}

/* Copy s without its suffix sfx into dst (cap bytes); 0 if it does not fit. */
static int
pfx_cut(char *dst, size_t cap, size_t *len, const char *s, const char *sfx)
{
	size_t n = strlen(s), k = strlen(sfx);

	if (n < k || strcmp(s + n - k, sfx) != 0 || n - k >= cap)
		return 0;
	memcpy(dst, s, n - k);
	dst[n - k] = '\0';
	*len = n - k;
	return 1;
}

/* Prefixes of b->cur and ns, from bspec's own layout functions. */
static void
pfx_set(struct bk *b, const struct kube_resource *r, const char *ns)
{
	struct bk_pfx *x = &b->pfx;
	char *key;

	x->res = b->cur;
	x->ok = 0;
	if (strlen(ns) >= sizeof x->ns) {
		x->ns[0] = '\0';
		x->res = NULL;	/* never matches: per item */
		return;
	}
	strcpy(x->ns, ns);
	if (bspec_item_paths(r->group, r->version, r->resource, ns, "",
	    &b->legacy, &b->preferred) < 0)
		return;
	key = bspec_item_key(r->group, r->resource, ns, "");
	x->ok = pfx_cut(x->legacy, sizeof x->legacy, &x->legacy_len,
	    buf_cstr(&b->legacy), "/.json") &&
	    pfx_cut(x->preferred, sizeof x->preferred, &x->preferred_len,
	    buf_cstr(&b->preferred), "/.json") &&
	    pfx_cut(x->key, sizeof x->key, &x->key_len, key, "/");
	free(key);
}

/* dst = prefix "/" name sfx */
static int
pfx_join(struct buf *dst, const char *pfx, size_t plen, const char *name,
	size_t nlen, const char *sfx)
{
	buf_reset(dst);
	if (buf_append(dst, pfx, plen) < 0 || buf_putc(dst, '/') < 0 ||
	    buf_append(dst, name, nlen) < 0 || buf_puts(dst, sfx) < 0)
		return CAIRN_ETOOBIG;
	return 0;
}

/* The item's paths in b->legacy / b->preferred and its key in last_key. */
static int
item_names(struct bk *b, const struct kube_resource *r, const char *ns,
	const char *name)
{
	struct bk_pfx *x = &b->pfx;
	size_t nlen = strlen(name), klen;

	if (x->res != b->cur || strcmp(x->ns, ns) != 0)
		pfx_set(b, r, ns);
	if (!x->ok) {
		free(b->last_key);
		b->last_key = bspec_item_key(r->group, r->resource, ns, name);
		x->last_key_cap = strlen(b->last_key) + 1;
		return bspec_item_paths(r->group, r->version, r->resource, ns,
		    name, &b->legacy, &b->preferred);
	}
	if (pfx_join(&b->legacy, x->legacy, x->legacy_len, name, nlen,
	    ".json") < 0 || pfx_join(&b->preferred, x->preferred,
	    x->preferred_len, name, nlen, ".json") < 0)
		return CAIRN_ETOOBIG;
	klen = x->key_len + 1 + nlen;
	if (b->last_key == NULL || x->last_key_cap < klen + 1) {
		free(b->last_key);
		x->last_key_cap = klen + 1 > 256 ? klen + 1 : 256;
		b->last_key = xmalloc(x->last_key_cap);
	}
	memcpy(b->last_key, x->key, x->key_len);
	b->last_key[x->key_len] = '/';
	memcpy(b->last_key + x->key_len + 1, name, nlen + 1);
	return 0;
}

/* Streams {"<gvk>":["ns/name",...],...} from (gvk, item) pairs in order. */
struct rl_emit {
	struct buf *out;
	char *cur;		/* gvk of the open array, owned */
	int first_key;
	int first_item;
	int rc;
};

static void
rl_pair(struct rl_emit *e, const char *key, const char *item)
{
	if (e->cur == NULL || strcmp(e->cur, key) != 0) {
		if (e->cur != NULL)
			buf_putc(e->out, ']');
		buf_puts(e->out, e->first_key ? "" : ",");
		str_escape_json(e->out, key);
		buf_puts(e->out, ":[");
		e->first_key = 0;
		e->first_item = 1;
		free(e->cur);
		e->cur = xstrdup(key);
	}
	buf_puts(e->out, e->first_item ? "" : ",");
	e->first_item = 0;
	if (str_escape_json(e->out, item) < 0)
		e->rc = CAIRN_ETOOBIG;
}

static int
rl_end(struct rl_emit *e)
{
	if ((e->cur != NULL && buf_putc(e->out, ']') < 0) ||
	    buf_putc(e->out, '}') < 0)
		e->rc = CAIRN_ETOOBIG;
	FREE_NULL(e->cur);
	return e->rc;
}

/*
 * The resource list file, gzipped as the items go into the tarball: the
 * JSON text rl_pair() writes is deflated 64 KiB at a time into an
 * unlinked temporary file (a few bytes an item: megabytes for a big
 * cluster, which memory would hold to the end), so the end of the backup
 * only finishes it and stores the file.
 */
struct rlgz {
	struct rl_emit e;
	struct buf text;		/* JSON not deflated yet */
	int fd;				/* the gzip file so far */
	int64_t len;
	struct buf item;		/* "ns/name" */
	z_stream z;
	int rc;
};

/* NULL when no temporary file: the end reads the tarball back instead. */
static struct rlgz *
rlgz_new(void)
{
	struct rlgz *r = xcalloc(1, sizeof *r);

	r->fd = util_tmpfd(NULL, "rlist");
	/* level 1, as the tarball: this is megabytes of names for big ones */
	if (r->fd < 0 || deflateInit2(&r->z, Z_BEST_SPEED, Z_DEFLATED,
	    15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
		if (r->fd >= 0)
			close(r->fd);
		free(r);
		return NULL;
	}
	buf_init(&r->text, 1u << 20);
	buf_init(&r->item, 64u << 10);
	r->e.out = &r->text;
	r->e.first_key = r->e.first_item = 1;
	buf_putc(&r->text, '{');
	return r;
}

static void
rlgz_free(struct rlgz *r)
{
	if (r == NULL)
		return;
	deflateEnd(&r->z);
	free(r->e.cur);
	buf_free(&r->text);
	close(r->fd);
	buf_free(&r->item);
	free(r);
}

/* Deflate the text so far (flush: Z_NO_FLUSH or Z_FINISH) onto the file. */
static int
rlgz_deflate(struct rlgz *r, int flush)
{
	unsigned char out[64u << 10];
	size_t n;
	int zrc;

	r->z.next_in = (Bytef *)r->text.data;
	r->z.avail_in = (uInt)r->text.len;
	do {
		r->z.next_out = out;
		r->z.avail_out = sizeof out;
		zrc = deflate(&r->z, flush);
		n = sizeof out - r->z.avail_out;
		if (zrc == Z_STREAM_ERROR)
			return r->rc = CAIRN_EFAIL;
		if (util_pwrite_all(r->fd, out, n, r->len) < 0)
			return r->rc = CAIRN_EIO;
		r->len += (int64_t)n;
	} while (r->z.avail_out == 0 ||
	    (flush == Z_FINISH && zrc != Z_STREAM_END));
	buf_reset(&r->text);
	return 0;
}

static void
rlgz_add(struct rlgz *r, const char *gvk, const char *ns, const char *name)
{
	if (r->rc < 0)
		return;
	buf_reset(&r->item);
	if (ns[0] != '\0' && (buf_puts(&r->item, ns) < 0 ||
	    buf_putc(&r->item, '/') < 0))
		r->rc = CAIRN_ETOOBIG;
	if (buf_puts(&r->item, name) < 0)
		r->rc = CAIRN_ETOOBIG;
	if (r->rc == 0)
		rl_pair(&r->e, gvk, buf_cstr(&r->item));
	if (r->e.rc < 0)
		r->rc = r->e.rc;
	if (r->rc == 0 && r->text.len >= (64u << 10))
		rlgz_deflate(r, Z_NO_FLUSH);
}

/*
 * The item's compact JSON (json, len: from kube_list_text, as the API
 * server sent it) goes into both tar entries from the one buffer.
 */
static int
write_item(struct bk *b, const struct kube_resource *r, const char *json,
	size_t len, const char *ns, const char *name, struct cairn_err *err)
{
	int rc, cut;

	rc = item_names(b, r, ns, name);
	if (rc < 0)
		return cairn_err_set(err, rc, "item path too long: %s/%s", ns,
		    name);
	rc = tarparts_add(b->tp, buf_cstr(&b->legacy), json, len, err);
	if (rc == 0)
		rc = tarparts_add(b->tp, buf_cstr(&b->preferred), json, len,
		    err);
	if (rc < 0)
		return rc;
	if (b->rl != NULL)
		rlgz_add(b->rl, b->cur_gvk, ns, name);
	if (b->item_cont_gen != b->page_gen) {	/* once per page */
		free(b->item_cont);
		b->item_cont = xstrdup(b->page_cont != NULL ? b->page_cont : "");
		b->item_cont_gen = b->page_gen;
	}
	b->part_items++;
	b->items_done++;
	rc = tarparts_boundary(b->tp, &cut, err);
	if (rc < 0)
		return rc;
	return bk_progress(b, 0, err);
}

/* Where ns/name is in an orderedResources list ("ns/name" or "name"), or -1. */
static int
ordered_index(char *const *o, const struct kube_resource *r, const char *ns,
	const char *name)
{
	for (int i = 0; o[i] != NULL; i++) {
		const char *sl = strchr(o[i], '/');

		if (!r->namespaced ? sl == NULL && strcmp(o[i], name) == 0 :
		    sl != NULL && strlen(ns) == (size_t)(sl - o[i]) &&
		    strncmp(o[i], ns, (size_t)(sl - o[i])) == 0 &&
		    strcmp(sl + 1, name) == 0)
			return i;
	}
	return -1;
}

/*
 * One item of the walk (a list's, or a GET's for the resources taken by
 * name): the filters, the related sets, the resume skip, the tarball.
 */
static int
bk_item(struct bk *b, cJSON *item, const char *text, size_t len, int depth)
{
	const struct kube_resource *r = b->cur->r;
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(item, "metadata");
	const char *ns = json_str_or(md, "namespace", "");
	const char *name = json_str_or(md, "name", "");
	int rc;

	if (b->env->stop != NULL && *b->env->stop) {
		b->cur_rc = cairn_err_set(&b->cur_err, CAIRN_ECANCELED,
		    "stopped");
		return b->cur_rc;
	}
	if (!r->namespaced)
		ns = "";
	if (!item_selected(b, r, item, md, ns, name))
		return 0;
	if (r->namespaced)
		note_related(b, r, item);
	if (b->observe_only)
		return 0;
	if (b->ordered != NULL && !b->in_ordered &&
	    ordered_index(b->ordered, r, ns, name) >= 0)
		return 0;	/* orderedResources: written first */
	if (b->skipping) {
		/* resume: everything up to the last stored key is stored */
		if (kube_key_cmp(ns, name, b->resume[2], b->resume[3]) <= 0)
			return 0;
		b->skipping = 0;
	}
	if (depth > CAIRN_JSON_MAX_DEPTH) {
		/* a restore could not read it: say so now (issue 18) */
		char msg[1024];

		snprintf(msg, sizeof msg, "%s %s%s%s: not backed up: it nests "
		    "deeper than %d levels, more than a restore can read",
		    r->resource, ns, ns[0] ? "/" : "", name,
		    CAIRN_JSON_MAX_DEPTH);
		bk_record(b, 1, msg);
		return 0;
	}
	if (b->hooks != NULL && r->group[0] == '\0' &&
	    strcmp(r->resource, "pods") == 0) {
		/* pre hooks, the item, post hooks: whatever fails on the way */
		struct cairn_err perr = CAIRN_ERR_INIT;
		int prc;

		rc = hooks_backup_pre(b->hooks, item, ns, name, text, len,
		    &b->cur_err);
		if (rc == 0)
			rc = write_item(b, r, text, len, ns, name, &b->cur_err);
		prc = hooks_backup_post(b->hooks, rc == 0, &perr);
		if (rc == 0 && prc < 0)
			rc = cairn_err_copy(&b->cur_err, &perr);
	} else {
		rc = write_item(b, r, text, len, ns, name, &b->cur_err);
	}
	if (rc < 0) {
		b->cur_rc = rc;
		return rc;
	}
	b->res_items++;
	return 0;
}

static int
list_cb(void *arg, cJSON *item, const char *text, size_t len)
{
	return bk_item(arg, item, text, len, 0);
}

/* An item the list's scan found nested too deep: recorded, not written. */
static int
too_deep_cb(void *arg, cJSON *item, int depth)
{
	return bk_item(arg, item, NULL, 0, depth);
}

static int
res_cmp(const void *pa, const void *pb)
{
	const struct bk_res *a = pa, *c = pb;

	return bspec_resource_cmp(a->pass, a->r->group, a->r->resource,
	    c->pass, c->r->group, c->r->resource);
}

/* "plural" or "plural.group", as users and Velero name resources. */
static char *
res_name(const struct kube_resource *r)
{
	return r->group[0] ? xasprintf("%s.%s", r->resource, r->group) :
	    xstrdup(r->resource);
}

/* Does an entry of includedResources name r explicitly (not "*")? */
static int
named_in_includes(const struct bspec *s, const struct kube_resource *r)
{
	for (size_t i = 0; s->inc_res[i] != NULL; i++)
		if (strcmp(s->inc_res[i], "*") != 0 &&
		    bspec_names_resource(s->inc_res[i], r))
			return 1;
	return 0;
}

/*
 * What a backup needs of a resource to restore it later (Velero's
 * discovery helper): list, create, get and delete. List-only types
 * (componentstatuses, metrics.k8s.io pods and nodes) are skipped.
 */
#define BK_VERBS (KUBE_VERB_LIST | KUBE_VERB_CREATE | KUBE_VERB_GET | \
	KUBE_VERB_DELETE)

/*
 * Resources that serve the same objects under two groups ("cohabiting",
 * Velero pkg/backup): backed up once, from `keep` when it is walked too.
 * Velero keeps the twin it meets first, core events and apps before
 * extensions in discovery order; the modern group is kept here too.
 */
static const struct {
	const char *resource, *keep, *drop;
} bk_twins[] = {
	{ "events", "", "events.k8s.io" },
	{ "deployments", "apps", "extensions" },
	{ "daemonsets", "apps", "extensions" },
	{ "replicasets", "apps", "extensions" },
	{ "networkpolicies", "networking.k8s.io", "extensions" },
	{ "ingresses", "networking.k8s.io", "extensions" },
};

static int
plan_has(const struct bk *b, const char *group, const char *resource)
{
	for (size_t i = 0; i < b->nres; i++)
		if (strcmp(b->res[i].r->group, group) == 0 &&
		    strcmp(b->res[i].r->resource, resource) == 0)
			return 1;
	return 0;
}

/* Drop the second of each pair of cohabiting resources; say so in skipped. */
static void
plan_drop_twins(struct bk *b, struct buf *skipped)
{
	size_t i, j = 0;

	for (i = 0; i < b->nres; i++) {
		const struct kube_resource *r = b->res[i].r;
		const char *keep = NULL;

		for (size_t t = 0; t < sizeof bk_twins / sizeof bk_twins[0];
		    t++)
			if (strcmp(r->resource, bk_twins[t].resource) == 0 &&
			    strcmp(r->group, bk_twins[t].drop) == 0 &&
			    plan_has(b, bk_twins[t].keep, r->resource))
				keep = bk_twins[t].keep;
		if (keep != NULL) {
			buf_printf(skipped, "%s%s.%s (the same objects as "
			    "%s%s%s)", skipped->len ? ", " : "", r->resource,
			    r->group, r->resource, keep[0] ? "." : "", keep);
			kube_resource_free(b->res[i].r);
			continue;
		}
		b->res[j++] = b->res[i];
	}
	b->nres = j;
}

/*
 * Group-versions whose discovery failed (an aggregated API answering
 * 503): their resources are unknown, so the backup may lack some. A
 * warning says what failed; an error (PartiallyFailed) says the backup is
 * incomplete, unless includedResources names only resources that were
 * found (then nothing it asked for can be missing).
 */
static void
plan_failed_groups(struct bk *b, const struct kube_discovery *d)
{
	size_t nf = kube_discovery_failed_count(d);
	int complete = b->spec->inc_res[0] != NULL &&
	    !strv_contains(b->spec->inc_res, "*");

	for (size_t i = 0; complete && b->spec->inc_res[i] != NULL; i++)
		if (kube_discovery_lookup(d, b->spec->inc_res[i]) == NULL)
			complete = 0;
	for (size_t i = 0; i < nf; i++) {
		const struct kube_disc_failure *f = kube_discovery_failed_at(d,
		    i);
		char msg[CAIRN_ERR_MSG_MAX + 200];
		const char *gv = f->group[0] ? f->group : "core";

		snprintf(msg, sizeof msg, "API group %s/%s is unavailable: %s",
		    gv, f->version, f->message);
		bk_record(b, 0, msg);
		if (complete)
			continue;
		snprintf(msg, sizeof msg, "the resources of API group %s/%s "
		    "are not in this backup: its discovery failed (the API "
		    "service is unavailable)", gv, f->version);
		bk_record(b, 1, msg);
	}
}

/* includedResources entries that name nothing the server serves: warn. */
static void
plan_unknown_includes(struct bk *b, const struct kube_discovery *d)
{
	for (size_t i = 0; b->spec->inc_res[i] != NULL; i++) {
		const char *e = b->spec->inc_res[i];
		const struct kube_resource *other = NULL;
		int found = 0;
		char *msg;

		if (strcmp(e, "*") == 0)
			continue;
		for (size_t j = 0; j < kube_discovery_count(d) && !found; j++) {
			const struct kube_resource *r = kube_discovery_at(d, j);

			if (!r->chosen) {
				if (other == NULL && strchr(e, '.') != NULL &&
				    bspec_names_resource(e, r))
					other = r;
				continue;
			}
			found = bspec_names_resource(e, r);
		}
		if (found)
			continue;
		if (other != NULL)
			msg = xasprintf("includedResources entry \"%s\" names "
			    "version %s of %s.%s, which backups do not take "
			    "(they take the preferred version): nothing of it "
			    "is backed up", e, other->version, other->resource,
			    other->group);
		else
			msg = xasprintf("includedResources entry \"%s\" names no "
			    "resource the API server serves: nothing of it is "
			    "backed up", e);
		bk_record(b, 0, msg);
		free(msg);
	}
}

static int
ns_cmp(const void *pa, const void *pb)
{
	return kube_key_cmp(*(char *const *)pa, "", *(char *const *)pb, "");
}

static int
has_glob(const char *s)
{
	return strpbrk(s, "*?") != NULL;
}

/*
 * List namespaced resources across the cluster, not namespace by
 * namespace, when includedNamespaces' patterns take at least this share
 * of the cluster's namespaces (bk_namespaces). Names without patterns
 * are always listed one by one: the cluster's namespaces are not listed
 * for them, and a backup of a few named namespaces asks only about them.
 */
#define BK_WIDE_NUM 3
#define BK_WIDE_DEN 4
/*
 * A checkpoint token of such a list starts with this (Kubernetes tokens
 * are base64url, never '~'): a token of one kind of list means nothing
 * to the other (its key is relative to the list's path).
 */
#define BK_WIDE_TOKEN '~'

/* Collects namespace names that pass the filter (from a list). */
struct ns_collect {
	struct bk *b;
	size_t alloc;
};

/* Appended as they come; nslist_sort() orders them and drops repeats. */
static void
nslist_add(struct bk *b, size_t *alloc, const char *ns)
{
	if (b->nns + 1 >= *alloc) {
		*alloc = *alloc ? 2 * *alloc : 16;
		b->nslist = xreallocarray(b->nslist, *alloc, sizeof *b->nslist);
	}
	b->nslist[b->nns++] = xstrdup(ns);
	b->nslist[b->nns] = NULL;
}

/*
 * Key order, each name once (a plain name may also match a pattern): a
 * sort, not a search per name added, for clusters of many namespaces.
 */
static void
nslist_sort(struct bk *b)
{
	size_t n = 0;

	qsort(b->nslist, b->nns, sizeof *b->nslist, ns_cmp);
	for (size_t i = 0; i < b->nns; i++) {
		if (n > 0 && strcmp(b->nslist[n - 1], b->nslist[i]) == 0)
			free(b->nslist[i]);
		else
			b->nslist[n++] = b->nslist[i];
	}
	b->nns = n;
	b->nslist[n] = NULL;
}

static int
ns_collect_cb(void *arg, cJSON *item)
{
	struct ns_collect *c = arg;
	const char *name = json_str_or(item, "metadata.name", "");

	c->b->nns_all++;
	if (bspec_ns_included(c->b->spec, name))
		nslist_add(c->b, &c->alloc, name);
	return 0;
}

/*
 * With includedNamespaces (and not "*"), resources are listed namespace
 * by namespace, as Velero does: a one-namespace backup asks only about
 * that namespace, whatever else the cluster holds. b->nslist gets the
 * included namespaces that exist, in key order (so items come in the
 * order one list across namespaces would give). A name that does not
 * exist, or a pattern that matches none, is a warning.
 *
 * Unless patterns include most of the cluster's namespaces (b->wide:
 * at least BK_WIDE_NUM/BK_WIDE_DEN of those listed, and two or more):
 * then each namespaced resource is listed once across the cluster and
 * the items outside b->nslist are dropped, as many requests and gzip
 * streams for a few small replies each cost more bytes and round trips
 * than the few namespaces left out (issue 27). Both plans give the same
 * items in the same key order, so the same tarball; only the continue
 * tokens differ, and a resumed run uses the checkpoint's token only if
 * it came from a list of the same kind (BK_WIDE_TOKEN).
 */
static int
bk_namespaces(struct bk *b, struct cairn_err *err)
{
	const struct kube_gvr nsg = { "", "v1", "namespaces" };
	struct ns_collect c = { b, 0 };
	char **inc = b->spec->inc_ns;
	int globs = 0, rc;

	b->nns_all = 0;
	b->per_ns = inc[0] != NULL && !strv_contains(inc, "*");
	if (!b->per_ns)
		return 0;
	b->nslist = xcalloc(1, sizeof *b->nslist);
	for (size_t i = 0; inc[i] != NULL; i++)
		globs |= has_glob(inc[i]);
	if (globs) {
		struct kube_list_opts lo;

		memset(&lo, 0, sizeof lo);
		lo.stop = b->env->stop;
		rc = kube_list(b->env->kube, &nsg, NULL, &lo, ns_collect_cb, &c,
		    NULL, err);
		if (rc < 0)
			return cairn_err_prefix(err, "listing namespaces for "
			    "the includedNamespaces patterns");
	}
	for (size_t i = 0; inc[i] != NULL; i++) {
		char *msg = NULL;
		cJSON *obj = NULL;
		struct cairn_err gerr = CAIRN_ERR_INIT;
		int matched = 0;

		if (has_glob(inc[i])) {
			for (size_t j = 0; j < b->nns && !matched; j++)
				matched = str_glob(inc[i], b->nslist[j]);
			if (!matched)
				msg = xasprintf("includedNamespaces pattern "
				    "\"%s\" matches no namespace", inc[i]);
		} else if (bspec_ns_included(b->spec, inc[i])) {
			rc = kube_get(b->env->kube, &nsg, NULL, inc[i], &obj,
			    &gerr);
			if (rc == CAIRN_ENOTFOUND)
				msg = xasprintf("includedNamespaces: namespace "
				    "\"%s\" does not exist: nothing of it is "
				    "backed up", inc[i]);
			else if (rc == CAIRN_ECANCELED)
				return cairn_err_copy(err, &gerr);
			else	/* other failures: its lists will say */
				nslist_add(b, &c.alloc, inc[i]);
			cJSON_Delete(obj);
		}
		if (msg != NULL) {
			bk_record(b, 0, msg);
			free(msg);
		}
	}
	nslist_sort(b);
	b->wide = globs && b->nns >= 2 && b->nns * BK_WIDE_DEN >= b->nns_all *
	    BK_WIDE_NUM;
	return 0;
}

/* Builds the plan from discovery's chosen listable resources. */
struct plan_ctx {
	struct bk *b;
	size_t alloc;
	struct buf verbs;	/* what lacks a verb, for the log */
};

static int
plan_cb(void *arg, const struct kube_resource *r)
{
	struct plan_ctx *pc = arg;
	struct bk *b = pc->b;
	enum bspec_walk w = bspec_walk_of(b->spec, r);

	if (w == BSPEC_WALK_SKIP)
		return 0;
	if ((r->verbs & BK_VERBS) != BK_VERBS) {
		char *n = res_name(r);

		buf_printf(&pc->verbs, "%s%s (%s%s%s%s)", pc->verbs.len ? ", " :
		    "", n, r->verbs & KUBE_VERB_LIST ? "list" : "",
		    r->verbs & KUBE_VERB_GET ? " get" : "",
		    r->verbs & KUBE_VERB_CREATE ? " create" : "",
		    r->verbs & KUBE_VERB_DELETE ? " delete" : "");
		if (named_in_includes(b->spec, r)) {
			char *m = xasprintf("includedResources names %s, which "
			    "cannot be backed up: it lacks some of the list, "
			    "create, get and delete verbs", n);

			bk_record(b, 0, m);
			free(m);
		}
		free(n);
		return 0;
	}
	if (b->nres == pc->alloc) {
		pc->alloc = pc->alloc ? 2 * pc->alloc : 64;
		b->res = xreallocarray(b->res, pc->alloc, sizeof *b->res);
	}
	b->res[b->nres].r = kube_resource_dup(r);
	b->res[b->nres].pass = w == BSPEC_WALK_RELATED ? 1 : 0;
	b->nres++;
	return 0;
}

/* ", "-joined, or dflt for an empty list. */
static void
strv_join(struct buf *o, char **v, const char *dflt)
{
	if (v == NULL || v[0] == NULL) {
		buf_puts(o, dflt);
		return;
	}
	for (size_t i = 0; v[i] != NULL; i++)
		buf_printf(o, "%s%s", i ? ", " : "", v[i]);
}

/* The first log line of the walk: what the backup takes, and where to. */
static void
bk_log_scope(struct bk *b)
{
	static const char *const cl[] = { "auto (only those related to the "
	    "included namespaces)", "yes", "no" };
	struct buf t;

	buf_init(&t, JOURNAL_EVENT_MAX - 1);
	buf_puts(&t, "backing up to storage location ");
	buf_puts(&t, bsl_name(b->loc));
	buf_puts(&t, "; namespaces: ");
	strv_join(&t, b->spec->inc_ns, "*");
	buf_puts(&t, " (excluded: ");
	strv_join(&t, b->spec->exc_ns, "none");
	buf_puts(&t, "); resources: ");
	strv_join(&t, b->spec->inc_res, "*");
	buf_puts(&t, " (excluded: ");
	strv_join(&t, b->spec->exc_res, "none");
	buf_printf(&t, "); cluster-scoped resources: %s; label selector: %s",
	    cl[b->spec->cluster == BSPEC_CLUSTER_AUTO ? 0 :
	    b->spec->cluster == BSPEC_CLUSTER_YES ? 1 : 2],
	    b->spec->selector_text != NULL ? b->spec->selector_text : "none");
	bk_event(b, "info", "%s", buf_cstr(&t));
	buf_free(&t);
}

static int
bk_plan(struct bk *b, struct cairn_err *err)
{
	struct kube_discovery *d = NULL;
	struct plan_ctx pc = { b, 0, { 0 } };
	struct buf twins;
	int rc;

	rc = kube_discovery_get(b->env->kube, 1, &d, err);
	if (rc < 0)
		return cairn_err_prefix(err, "discovery");
	buf_init(&pc.verbs, 64u << 10);
	buf_init(&twins, 64u << 10);
	(void)kube_discovery_foreach_listable(d, plan_cb, &pc);
	plan_drop_twins(b, &twins);
	if (pc.verbs.len > 0)
		bk_event(b, "info", "not backed up: %s: a backup takes only "
		    "resources with the list, create, get and delete verbs",
		    buf_cstr(&pc.verbs));
	if (twins.len > 0)
		bk_event(b, "info", "not backed up: %s: each object is backed "
		    "up once", buf_cstr(&twins));
	plan_failed_groups(b, d);
	plan_unknown_includes(b, d);
	kube_discovery_release(d);
	buf_free(&pc.verbs);
	buf_free(&twins);
	qsort(b->res, b->nres, sizeof *b->res, res_cmp);
	return bk_namespaces(b, err);
}

static const char *
res_selector(const struct bk *b, const struct kube_resource *r)
{
	/* namespaces follow the namespace filter, not the label selector */
	if (r->group[0] == '\0' && strcmp(r->resource, "namespaces") == 0)
		return NULL;
	return b->spec->selector_text;
}

static int
on_page(void *arg, const char *cont)
{
	struct bk *b = arg;

	free(b->page_cont);
	/* a namespaced list across the plan's namespaces: say so (BK_WIDE) */
	b->page_cont = b->wide && b->cur->r->namespaced && cont[0] != '\0' ?
	    xasprintf("%c%s", BK_WIDE_TOKEN, cont) : xstrdup(cont);
	b->page_gen++;
	return 0;
}

/* Take the related items by name when there are at most this many. */
#define BK_GET_MAX 200

/*
 * What list_cb reads of an item (item_selected, note_related): names,
 * labels, deletionTimestamp, and a PVC's spec.volumeName when PVs follow
 * their claims; a pod's annotations (its hooks). The text stored is
 * whole; the rest (managedFields, spec, data...) is not parsed.
 */
#define ITEM_MEMBERS "metadata.name", "metadata.namespace", \
	"metadata.labels", "metadata.deletionTimestamp"
static const char *const item_members[] = { ITEM_MEMBERS, NULL };
static const char *const item_members_pvc[] = { ITEM_MEMBERS,
	"spec.volumeName", NULL };
static const char *const item_members_pod[] = { ITEM_MEMBERS,
	"metadata.annotations", NULL };
/* without a label filter no one reads the labels (pods: their hooks do) */
static const char *const item_members_nolabels[] = { "metadata.name",
	"metadata.namespace", "metadata.deletionTimestamp", NULL };

/* Does the spec filter items by their labels (bspec_labels_match)? */
static int
bk_label_filter(const struct bk *b)
{
	return b->spec->sel != NULL || (b->spec->or_sels != NULL &&
	    b->spec->or_sels[0] != NULL);
}

/*
 * The walk's requests. Every list and GET the walk will make is queued
 * in b->lists before it starts (kube/lists.c fetches them ahead, several
 * at once, within a byte bound) in the order the walk takes them, so the
 * tarball is the same whatever the concurrency. The related
 * cluster-scoped items (pass 1) are queued once the walk reaches them:
 * which ones follows from what pass 0 gave.
 */
enum bk_unit_kind { BK_U_LIST, BK_U_GET, BK_U_ORDERED, BK_U_BAD };

struct bk_unit {
	int id;				/* kube_lists id; -1 none (BAD) */
	enum bk_unit_kind kind;
	const char *ns;			/* per-namespace list: its namespace */
	const char *name;		/* ordered: the entry (borrowed) */
};

static void
unit_push(struct bk *b, int id, enum bk_unit_kind kind, const char *ns,
	const char *name)
{
	if (b->nunits == b->aunits) {
		b->aunits = b->aunits ? 2 * b->aunits : 64;
		b->units = xreallocarray(b->units, b->aunits,
		    sizeof *b->units);
	}
	b->units[b->nunits].id = id;
	b->units[b->nunits].kind = kind;
	b->units[b->nunits].ns = ns;
	b->units[b->nunits].name = name;
	b->nunits++;
}

/* The list options of resource br's lists. */
static void
bk_list_opts(const struct bk *b, const struct bk_res *br,
	struct kube_list_opts *lo)
{
	const struct kube_resource *r = br->r;

	memset(lo, 0, sizeof *lo);
	lo->parse_only = feeds_related(b, r) && r->group[0] == '\0' ?
	    item_members_pvc : r->group[0] == '\0' && strcmp(r->resource,
	    "pods") == 0 ? item_members_pod : bk_label_filter(b) ?
	    item_members : item_members_nolabels;
	lo->label_selector = res_selector(b, r);
	lo->limit = 500;
	lo->restart_on_gone = KUBE_GONE_RESUME;
	lo->stop = b->env->stop;
	lo->on_page = on_page;
	lo->on_too_deep = too_deep_cb;
}

/*
 * Does a list of br give exactly what the backup takes of it (no
 * namespace filter applied here, no related-name filter), so that the
 * count of its first page is part of the progress total?
 */
static int
bk_list_counts(const struct bk *b, const struct bk_res *br, int per_ns)
{
	const struct kube_resource *r = br->r;
	int is_ns = r->group[0] == '\0' && strcmp(r->resource, "namespaces") ==
	    0;

	if (br->pass != 0 || b->spec->selector_text != NULL)
		return 0;
	if (per_ns || b->spec->all_namespaces)
		return 1;
	return !r->namespaced && !is_ns;
}

/*
 * Queue br's GETs of spec.orderedResources (c: as for bk_walk_res);
 * *c becomes 1 when the checkpoint is among them (the rest of the
 * resource is listed from its start).
 */
static void
bk_queue_ordered(struct bk *b, const struct bk_res *br, int *c)
{
	const struct kube_resource *r = br->r;
	struct kube_gvr g = kube_resource_gvr(r);
	char *const *o = bspec_ordered(b->spec, r);
	struct kube_list_opts lo;
	int from = 0;

	if (o == NULL || *c < 0)
		return;
	bk_list_opts(b, br, &lo);
	if (*c == 0) {
		from = ordered_index(o, r, b->resume[2], b->resume[3]) + 1;
		if (from == 0)
			return;		/* all stored before the checkpoint */
		*c = 1;
	}
	for (int i = from; o[i] != NULL; i++) {
		const char *sl = strchr(o[i], '/');
		char ns[254];
		int id;

		if ((sl != NULL) != (r->namespaced != 0)) {
			unit_push(b, -1, BK_U_BAD, NULL, o[i]);
			continue;
		}
		snprintf(ns, sizeof ns, "%.*s", sl ? (int)(sl - o[i]) : 0,
		    o[i]);
		id = kube_lists_add_get(b->lists, &g, sl ? ns : NULL, sl ?
		    sl + 1 : o[i], &lo, 0);
		unit_push(b, id, BK_U_ORDERED, NULL, o[i]);
	}
}

/*
 * The checkpoint's continue token for a list across namespaces of the
 * plan (wide: BK_WIDE) or not, or NULL: none, or one of the other kind
 * (a resumed run whose plan changed with the cluster's namespaces; the
 * list starts over and the walk skips by key what is stored).
 */
static const char *
resume_token(const struct bk *b, int wide)
{
	const char *t = b->resume_cont;

	if (t == NULL || t[0] == '\0' || (t[0] == BK_WIDE_TOKEN) != wide)
		return NULL;
	return wide ? t + 1 : t;
}

/*
 * Queue what the walk of br asks for, with c as for bk_walk_res() (the
 * resource's place against the checkpoint). Sets br's units.
 */
static void
bk_queue_res(struct bk *b, struct bk_res *br, int c)
{
	const struct kube_resource *r = br->r;
	struct kube_gvr g = kube_resource_gvr(r);
	struct kube_list_opts lo;
	int is_ns = r->group[0] == '\0' && strcmp(r->resource, "namespaces") ==
	    0;
	int flags, wide;

	br->u0 = b->nunits;
	br->c = c;
	bk_list_opts(b, br, &lo);
	bk_queue_ordered(b, br, &br->c);
	c = br->c;
	if (br->pass == 1 || (is_ns && b->per_ns)) {
		char **names = is_ns ? b->nslist : strcmp(r->resource,
		    "persistentvolumes") == 0 ? b->pv_names : b->cr_kinds;
		size_t n = is_ns ? b->nns : names == b->pv_names ? b->npv :
		    b->ncr;

		if (br->pass == 0 || n <= BK_GET_MAX) {
			for (size_t i = 0; i < n; i++) {
				int id;

				/* stored before the checkpoint */
				if (c == 0 && kube_key_cmp("", names[i], "",
				    b->resume[3]) <= 0)
					continue;
				id = kube_lists_add_get(b->lists, &g, NULL,
				    names[i], &lo, c >= 0 ? KUBE_LISTS_COUNT :
				    0);
				unit_push(b, id, BK_U_GET, NULL, NULL);
			}
			br->nu = b->nunits - br->u0;
			return;
		}
	}
	wide = b->wide && r->namespaced;
	flags = c >= 0 && bk_list_counts(b, br, b->per_ns && r->namespaced &&
	    !wide) ? KUBE_LISTS_COUNT : 0;
	if (b->per_ns && r->namespaced && !wide) {
		for (size_t i = 0; i < b->nns; i++) {
			const char *ns = b->nslist[i];
			int nc = c == 0 ? kube_key_cmp(ns, "", b->resume[2],
			    "") : 1;

			/* before the last stored item: stored (or observed) */
			if (c == 0 && nc < 0 && !feeds_related(b, r))
				continue;
			lo.continue_token = NULL;
			if (c == 0 && nc == 0 && !feeds_related(b, r))
				lo.continue_token = resume_token(b, 0);
			/* a list resumed at a token counts only what is left */
			unit_push(b, kube_lists_add(b->lists, &g, ns, &lo,
			    lo.continue_token != NULL ? 0 : flags), BK_U_LIST, ns,
			    NULL);
		}
		br->nu = b->nunits - br->u0;
		return;
	}
	/*
	 * Go on in the original list's snapshot at the page of the last
	 * stored item, unless the items before it must be seen for the
	 * related sets.
	 */
	lo.continue_token = NULL;
	if (c == 0 && !feeds_related(b, r))
		lo.continue_token = resume_token(b, wide);
	unit_push(b, kube_lists_add(b->lists, &g, NULL, &lo,
	    lo.continue_token != NULL ? 0 : flags), BK_U_LIST, NULL, NULL);
	br->nu = b->nunits - br->u0;
}

/* Where br stands to the checkpoint: < 0 before, 0 at, > 0 after. */
static int
bk_res_place(const struct bk *b, const struct bk_res *br)
{
	if (b->resume[1] == NULL)
		return 1;
	return bspec_resource_cmp(br->pass, br->r->group, br->r->resource,
	    b->resume_pass, b->resume[0], b->resume[1]);
}

/* Queue every resource of pass (0 or 1) that the walk visits. */
static void
bk_queue_pass(struct bk *b, int pass)
{
	for (size_t i = 0; i < b->nres; i++) {
		struct bk_res *br = &b->res[i];
		int c = bk_res_place(b, br);

		br->walked = 0;
		if (br->pass != pass)
			continue;
		/* before the checkpoint: rebuild related sets only */
		if (c < 0 && !feeds_related(b, br->r)) {
			br->u0 = b->nunits;
			br->nu = 0;
			br->skip = 1;
			continue;
		}
		br->skip = 0;
		bk_queue_res(b, br, c);
	}
}

/* The progress total so far: what is stored and what is counted ahead. */
static void
bk_count_ahead(struct bk *b)
{
	int64_t ahead = b->lists != NULL ? kube_lists_pending(b->lists) : 0;

	b->total_items = b->items_done + ahead;
}

/* Record a list's failure as an error of the backup. */
static void
bk_list_failed(struct bk *b, const struct kube_resource *r, const char *ns,
	const struct cairn_err *lerr)
{
	char msg[CAIRN_ERR_MSG_MAX + 400];

	snprintf(msg, sizeof msg, "error listing %s%s%s%s%s: %s", r->resource,
	    r->group[0] ? "." : "", r->group, ns != NULL ? " in namespace " :
	    "", ns != NULL ? ns : "", lerr->msg);
	bk_record(b, 1, msg);
	b->lists_failed++;
	if (b->first_list_err == NULL)
		b->first_list_err = xstrdup(msg);
}

/* The log line of a walked resource: what it gave, skipped, retried. */
static void
bk_res_log(struct bk *b, const struct kube_resource *r,
	const struct kube_stats *k0, const struct kube_stats *k1)
{
	char extra[256] = "";
	size_t n = 0;

	if (b->res_deleting > 0)
		n += (size_t)snprintf(extra + n, sizeof extra - n, "; skipped "
		    "%lld being deleted", (long long)b->res_deleting);
	if (k1->retries > k0->retries && n < sizeof extra)
		n += (size_t)snprintf(extra + n, sizeof extra - n, "; %llu "
		    "API requests of this server were retried meanwhile "
		    "(429, 5xx, dropped connections)",
		    (unsigned long long)(k1->retries - k0->retries));
	/* nothing to say about a resource with nothing: one line for all */
	if (b->res_items == 0 && n == 0) {
		if (b->empty.len > 0)
			(void)buf_puts(&b->empty, ", ");
		(void)buf_printf(&b->empty, "%s%s%s", r->resource,
		    r->group[0] ? "." : "", r->group);
		return;
	}
	bk_res_event(b, "info", r, NULL, "backed up %lld items%s%s",
	    (long long)b->res_items, !(b->per_ns && r->namespaced) ? "" :
	    b->wide ? " (listed across the cluster's namespaces, those of the "
	    "backup kept)" : " (listed namespace by namespace)", extra);
}

/*
 * Take one queued unit into list_cb. A 410 in the middle of a list goes
 * on past the last item delivered (KUBE_GONE_RESUME), so nothing is lost
 * or written twice whatever expires while the backup works. The unit's
 * failure is recorded (the walk goes on); 0, or what stops the walk.
 */
static int
bk_take(struct bk *b, const struct bk_unit *u)
{
	const struct kube_resource *r = b->cur->r;
	struct cairn_err lerr = CAIRN_ERR_INIT;
	struct kube_list_info info;
	int rc;

	b->cur_rc = 0;
	cairn_err_clear(&b->cur_err);
	if (u->kind == BK_U_BAD) {
		char *m = xasprintf("orderedResources: \"%s\" is not %s for "
		    "%s, which is %s", u->name, r->namespaced ?
		    "namespace/name" : "a name", r->resource, r->namespaced ?
		    "namespaced" : "cluster-scoped");

		bk_record(b, 0, m);
		free(m);
		return 0;
	}
	b->in_ordered = u->kind == BK_U_ORDERED;
	if (u->kind != BK_U_LIST) {
		/* no list page: a checkpoint here records no continue token */
		FREE_NULL(b->page_cont);
		b->page_gen++;
	}
	rc = kube_lists_take(b->lists, u->id, list_cb, b, &info, &lerr);
	b->in_ordered = 0;
	if (info.restarts > 0)
		bk_event(b, "info", "list of %s%s%s%s%s: its continue token "
		    "expired %d time(s) (410); the list went on past the last "
		    "item it had given, so nothing is lost or written twice",
		    r->resource, r->group[0] ? "." : "", r->group, u->ns !=
		    NULL ? " in namespace " : "", u->ns != NULL ? u->ns : "",
		    info.restarts);
	if (b->cur_rc < 0)
		return b->cur_rc;
	if (rc == CAIRN_ECANCELED)
		return cairn_err_set(&b->cur_err, rc, "stopped");
	if (rc == 0 && u->kind == BK_U_ORDERED && info.items == 0) {
		char *m = xasprintf("orderedResources: %s %s not found",
		    r->resource, u->name);

		bk_record(b, 0, m);
		free(m);
	}
	if (rc < 0)
		bk_list_failed(b, r, u->ns, &lerr);
	else if (u->kind == BK_U_LIST)
		b->lists_ok++;
	return 0;
}

/* Walk one resource: its queued units, in order. */
static int
bk_walk_res(struct bk *b, struct bk_res *br, struct cairn_err *err)
{
	const struct kube_resource *r = br->r;
	struct kube_stats ks0, ks1;
	int rc = 0, gets = 0, get_ok = 0;

	kube_stats(b->env->kube, &ks0);
	b->cur = br;
	b->res_items = b->res_deleting = 0;
	b->observe_only = br->c < 0;
	b->skipping = br->c == 0;
	b->ordered = br->c >= 0 ? bspec_ordered(b->spec, r) : NULL;
	free(b->cur_gvk);
	b->cur_gvk = r->group[0] ? xasprintf("%s/%s/%s", r->group,
	    r->version, r->kind) : xasprintf("%s/%s", r->version, r->kind);
	for (size_t i = 0; i < br->nu && rc == 0; i++) {
		const struct bk_unit *u = &b->units[br->u0 + i];
		int f0 = b->lists_failed;

		rc = bk_take(b, u);
		if (u->kind == BK_U_GET) {
			gets++;
			get_ok += b->lists_failed == f0;
		}
	}
	/* the GETs of one resource count as one list */
	if (rc == 0 && gets > 0 && get_ok == gets)
		b->lists_ok++;
	br->walked = 1;
	if (rc < 0)
		return cairn_err_copy(err, &b->cur_err);
	if (!b->observe_only) {
		kube_stats(b->env->kube, &ks1);
		bk_res_log(b, r, &ks0, &ks1);
	}
	return 0;
}

/* Stop fetching what is queued for the resources still ahead. */
static void
bk_unqueue_rest(struct bk *b)
{
	kube_lists_free(b->lists);
	b->lists = NULL;
}

/*
 * Queue the walk's requests (the related items of pass 1 come later),
 * so the API server works from now on; the progress total then comes
 * from their first pages (waiting at most BK_COUNT_WAIT_US for them).
 */
#define BK_COUNT_WAIT_US (2 * TIME_US_PER_SEC)
static int
bk_walk_queue(struct bk *b, struct cairn_err *err)
{
	struct kube_lists_opts mo;
	int rc;

	memset(&mo, 0, sizeof mo);
	mo.concurrency = b->env->list_concurrency;
	mo.stop = b->env->stop;
	rc = kube_lists_open(b->env->kube, &mo, &b->lists, err);
	if (rc < 0)
		return cairn_err_prefix(err, "listing");
	bk_queue_pass(b, 0);
	kube_lists_wait_counted(b->lists, BK_COUNT_WAIT_US);
	return 0;
}

static int
bk_walk(struct bk *b, struct cairn_err *err)
{
	int rc, pass1 = 0;

	for (size_t k = 0; k < b->spec->nordered; k++) {
		size_t i = 0;

		while (i < b->nres && bspec_ordered(b->spec, b->res[i].r) !=
		    b->spec->ordered[k].names)
			i++;
		if (i == b->nres && b->spec->ordered[k].names[0] != NULL) {
			char *m = xasprintf("orderedResources: \"%s\" names no "
			    "resource of this backup", b->spec->ordered[k].key);

			bk_record(b, 0, m);
			free(m);
		}
	}
	for (size_t i = 0; i < b->nres; i++) {
		struct bk_res *br = &b->res[i];

		if (br->pass == 1 && !pass1) {
			pass1 = 1;	/* the related names are all known */
			bk_queue_pass(b, 1);
		}
		if (br->skip)
			continue;
		rc = bk_walk_res(b, br, err);
		if (rc < 0) {
			bk_unqueue_rest(b);
			return rc;
		}
	}
	if (b->empty.len > 0)
		bk_event(b, "info", "listed, no items to back up: %s",
		    buf_cstr(&b->empty));
	/*
	 * Every list is taken: the lists are freed with the run (bk_free),
	 * after the final status. Closing their spool frees its blocks
	 * (3.8 ms for the 32 MB a 100k ConfigMap backup spooled, ext4) and
	 * joins the idle fetchers: not on the way to Completed.
	 */
	return 0;
}

/* ------------------------------------------------------------------ */
/* Resume.                                                             */
/* ------------------------------------------------------------------ */

struct part_check {
	const struct journal_part *want;
	size_t n;
	size_t matched;
};

static int
part_check_cb(void *arg, const struct store_part *p)
{
	struct part_check *pc = arg;

	for (size_t i = 0; i < pc->n; i++)
		if (pc->want[i].part_number == p->number &&
		    strcmp(pc->want[i].etag, p->etag) == 0)
			pc->matched++;
	return 0;
}

/* Load the checkpoint: journal rows, else status.checkpoint. */
static void
bk_load_checkpoint(struct bk *b)
{
	struct journal_part *jp = NULL;
	size_t n = 0;
	const cJSON *cp, *p;
	int idx = 0, last;

	if (journal_parts(b->env->journal, b->jid, &jp, &n, NULL) == 0 &&
	    n > 0) {
		for (size_t i = 0; i < n; i++)
			bk_add_part(b, &jp[i]);
		free(jp);
		b->upload_id = xstrdup(b->parts[0].upload_id);
		b->resume_cont = xstrdup(b->parts[n - 1].list_continue);
		return;
	}
	free(jp);
	cp = json_get(b->obj, "status.checkpoint");
	if (cp == NULL || json_str(cp, "uploadID") == NULL)
		return;
	last = cJSON_GetArraySize(json_get(cp, "parts")) - 1;
	cJSON_ArrayForEach(p, json_get(cp, "parts")) {
		struct journal_part x;

		memset(&x, 0, sizeof x);
		x.part_number = json_int(p, "number", 0);
		snprintf(x.upload_id, sizeof x.upload_id, "%s",
		    json_str_or(cp, "uploadID", ""));
		snprintf(x.etag, sizeof x.etag, "%s", json_str_or(p, "etag", ""));
		snprintf(x.last_key, sizeof x.last_key, "%s",
		    json_str_or(p, "lastItem", ""));
		x.items = json_int(p, "items", 0);
		x.bytes = json_int(p, "bytes", 0);
		snprintf(x.sha256, sizeof x.sha256, "%s",
		    json_str_or(p, "sha256", ""));
		if (x.part_number < 1 || x.etag[0] == '\0')
			break;
		if (idx++ == last && strlen(json_str_or(cp, "listContinue", "")) <
		    sizeof x.list_continue)
			snprintf(x.list_continue, sizeof x.list_continue, "%s",
			    json_str_or(cp, "listContinue", ""));
		/*
		 * Vouched for by the checkpoint in status (another server's,
		 * or a journal that lost it): recorded in ours too. EEXIST
		 * means it is there already.
		 */
		(void)journal_part_add(b->env->journal, b->jid, &x, NULL);
		bk_add_part(b, &x);
	}
	if (b->nparts > 0) {
		b->upload_id = xstrdup(json_str_or(cp, "uploadID", ""));
		b->resume_cont = xstrdup(b->parts[b->nparts - 1].list_continue);
		b->from_status = 1;
	}
}

/*
 * The first part number of a resumed run (docs/protocol.md rule 7): last+1
 * when our own journal vouches for the parts (a restart of this server:
 * nothing of ours is in flight), last+2 when they came from another
 * owner's status.checkpoint, whose one un-checkpointed part may still be
 * landing under number last+1. A journal of a later attempt whose last
 * part is still the status's last may hold only parts imported at a
 * takeover: skip one number there too (gaps are allowed, collisions not).
 */
static int
bk_next_part(const struct bk *b)
{
	int64_t last = b->parts[b->nparts - 1].part_number;
	const cJSON *sp = json_get(b->obj, "status.checkpoint.parts");
	int n = cJSON_GetArraySize(sp);

	if (b->from_status)
		return (int)last + 2;
	if (b->attempt > 1 && n > 0 &&
	    json_int(cJSON_GetArrayItem(sp, n - 1), "number", 0) == last)
		return (int)last + 2;
	return (int)last + 1;
}

/*
 * Whether the tarball key holds the join of parts[0..n): an earlier
 * attempt completed the upload and died before it could say so (or its
 * complete landed late, docs/protocol.md "Writes in flight"). 0 when it
 * cannot tell (the upload is then started again: wasted work, never a
 * lost or mixed tarball).
 */
static int
bk_tarball_is_join(struct bk *b, size_t n)
{
	struct store_part *sp;
	struct cairn_err e = CAIRN_ERR_INIT;
	int rc;

	if (n == 0)
		return 0;
	sp = xcalloc(n, sizeof *sp);
	for (size_t i = 0; i < n; i++) {
		sp[i].number = (int)b->parts[i].part_number;
		snprintf(sp[i].etag, sizeof sp[i].etag, "%.*s",
		    (int)sizeof sp[i].etag - 1, b->parts[i].etag);
		sp[i].size = (uint64_t)b->parts[i].bytes;
	}
	rc = store_mpu_joined(b->store, b->tar_key, sp, n, &e);
	free(sp);
	if (rc < 0)
		bk_event(b, "warning", "cannot tell whether %s is complete: %s",
		    b->tar_key, e.msg);
	return rc == 1;
}

/*
 * The upload vanished under a resumed run: the earlier owner's complete of
 * the kept parts landed after we listed them. Then the tarball is whole
 * and ours to finish (sets tar_done).
 */
static int
bk_completed_meanwhile(struct bk *b)
{
	if (!b->resumed || b->tar_done || !bk_tarball_is_join(b, b->nkept))
		return b->tar_done;
	bk_event(b, "info", "upload %s was completed meanwhile by the earlier "
	    "attempt with the %zu checkpointed parts: finishing from there",
	    b->upload_id, b->nkept);
	b->tar_done = 1;
	return 1;
}

/* Forget the parts (memory and journal): the tarball starts again. */
static void
bk_drop_checkpoint(struct bk *b)
{
	struct cairn_err e = CAIRN_ERR_INIT;

	b->nparts = 0;
	FREE_NULL(b->upload_id);
	FREE_NULL(b->resume_cont);
	if (journal_parts_clear(b->env->journal, b->jid, &e) < 0)
		bk_event(b, "warning", "%s", e.msg);
}

/* Set up the upload and the resume point. */
static int
bk_prepare_upload(struct bk *b, struct cairn_err *err)
{
	struct part_check pc;
	int rc;

	bk_load_checkpoint(b);
	if (b->nparts > 0) {
		pc.want = b->parts;
		pc.n = b->nparts;
		pc.matched = 0;
		rc = store_mpu_list_parts(b->store, b->tar_key, b->upload_id,
		    part_check_cb, &pc, err);
		if (rc == CAIRN_ENOTFOUND && bk_tarball_is_join(b, b->nparts)) {
			/* Completed by an attempt that died before Completed. */
			cairn_err_clear(err);
			bk_event(b, "info", "upload %s was completed with the %zu "
			    "checkpointed parts before the earlier attempt "
			    "stopped: finishing from there", b->upload_id,
			    b->nparts);
			b->tar_done = 1;
		} else if (rc < 0 || pc.matched != b->nparts) {
			bk_event(b, "warning", "checkpointed parts are not all in "
			    "upload %s (%s): starting the tarball again",
			    b->upload_id, rc < 0 ? err->msg : "ETag mismatch");
			cairn_err_clear(err);
			bk_drop_checkpoint(b);
		}
	}
	if (b->nparts == 0) {
		const char *old = json_str(b->obj, "status.checkpoint.uploadID");

		rc = engine_fence_check(&b->f, err);
		if (rc < 0)
			return rc;
		/*
		 * An upload started by an earlier attempt with nothing usable
		 * in it: drop it rather than leave it behind (we hold the
		 * claim, so nobody else writes to this key).
		 */
		if (old != NULL && old[0] != '\0' &&
		    store_mpu_abort(b->store, b->tar_key, old, NULL) == 0)
			bk_event(b, "info", "aborted the earlier upload %s", old);
		rc = store_mpu_create(b->store, b->tar_key, &b->upload_id, err);
		if (rc < 0)
			return rc;
		return 0;
	}
	for (size_t i = 0; i < b->nparts; i++) {
		b->items_stored += b->parts[i].items;
		b->bytes_stored += b->parts[i].bytes;
	}
	b->items_done = b->items_stored;
	b->nkept = b->nparts;
	if (b->tar_done) {
		bk_carry_results(b);
		return 0;
	}
	if (bspec_key_split(b->parts[b->nparts - 1].last_key, b->resume) < 0) {
		bk_event(b, "warning", "bad checkpoint key \"%s\": starting "
		    "again", b->parts[b->nparts - 1].last_key);
		bk_drop_checkpoint(b);
		b->items_stored = b->bytes_stored = b->items_done = 0;
		return store_mpu_create(b->store, b->tar_key, &b->upload_id, err);
	}
	/* The pass of the key's resource follows from the spec. */
	b->resume_pass = 0;
	for (size_t i = 0; i < b->nres; i++)
		if (strcmp(b->res[i].r->group, b->resume[0]) == 0 &&
		    strcmp(b->res[i].r->resource, b->resume[1]) == 0)
			b->resume_pass = b->res[i].pass;
	bk_carry_results(b);
	bk_event(b, "info", "resuming after part %lld (item %s, %lld items "
	    "stored; %s)", (long long)b->parts[b->nparts - 1].part_number,
	    b->parts[b->nparts - 1].last_key, (long long)b->items_stored,
	    b->resume_cont != NULL && b->resume_cont[0] != '\0' ?
	    "the list continue token of its page is recorded" :
	    "no list continue token: its resource is listed from the start");
	return 0;
}

/* ------------------------------------------------------------------ */
/* Metadata files.                                                     */
/* ------------------------------------------------------------------ */

/*
 * Store file f of the backup, fenced as every storage write: from src,
 * or gzdata gzipped at zlib level 1 as the tarball (a resource list read
 * back after a resume is megabytes of names).
 */
static int
put_any(struct bk *b, enum layout_backup_file f, struct store_src *src,
	const void *gzdata, size_t gzlen, struct cairn_err *err)
{
	char *key;
	int rc;

	rc = engine_fence_check(&b->f, err);
	if (rc < 0)
		return cairn_err_prefix(err, "not writing");
	key = bsl_backup_key(b->loc, b->name, f);
	rc = src != NULL ? store_put(b->store, key, src, NULL, NULL, err) :
	    store_put_gzip(b->store, key, gzdata, gzlen, Z_BEST_SPEED, err);
	free(key);
	return rc;
}

static int
put_file(struct bk *b, enum layout_backup_file f, const void *data,
	size_t len, int gzip, struct cairn_err *err)
{
	struct store_src src;

	if (gzip)
		return put_any(b, f, NULL, data, len, err);
	store_src_mem(&src, data, len);
	return put_any(b, f, &src, NULL, 0, err);
}

static int
put_gz(struct bk *b, enum layout_backup_file f, const char *text,
	struct cairn_err *err)
{
	return put_file(b, f, text, strlen(text), 1, err);
}

static cJSON *
results_tree(const cJSON *list)
{
	cJSON *r = cJSON_CreateObject();

	cJSON_AddItemToObject(r, "velero", cJSON_Duplicate(list, 1));
	cJSON_AddArrayToObject(r, "cluster");
	cJSON_AddObjectToObject(r, "namespaces");
	return r;
}

/* Reader thread for the read-back: store_get into a pipe. */
struct readback {
	struct store *store;
	const char *key;
	int wfd;
	int rc;
	struct cairn_err err;
};

static int
rb_sink(void *arg, const void *p, size_t n)
{
	const struct readback *rb = arg;

	return util_write_all(rb->wfd, p, n);
}

static void *
rb_thread(void *arg)
{
	struct readback *rb = arg;

	util_thread_name("readback");

	rb->rc = store_get(rb->store, rb->key, 0, -1, rb_sink, rb, NULL,
	    &rb->err);
	close(rb->wfd);
	return NULL;
}

/*
 * The resource list: read the stored tarball back and collect the legacy
 * entries "resources/<res>[.<group>]/(cluster|namespaces/<ns>)/<n>.json"
 * under "<group/version>/<Kind>". Items of one resource are contiguous, so
 * the JSON is streamed out; key order is the tarball's.
 */
static int
bk_resource_list(struct bk *b, struct buf *out, struct cairn_err *err)
{
	struct readback rb;
	struct archive *a = NULL;
	struct archive_entry *e;
	pthread_t th;
	struct rl_emit em = { out, NULL, 1, 1, 0 };
	int fds[2], rc = 0;

	if (pipe(fds) < 0)
		return cairn_err_errno(err, CAIRN_EIO, errno, "pipe");
	memset(&rb, 0, sizeof rb);
	rb.store = b->store;
	rb.key = b->tar_key;
	rb.wfd = fds[1];
	if (pthread_create(&th, NULL, rb_thread, &rb) != 0) {
		close(fds[0]);
		close(fds[1]);
		return cairn_err_set(err, CAIRN_EFAIL, "thread");
	}
	a = archive_read_new();
	archive_read_support_filter_gzip(a);
	archive_read_support_format_tar(a);
	buf_putc(out, '{');
	if (archive_read_open_fd(a, fds[0], 65536) != ARCHIVE_OK) {
		rc = cairn_err_set(err, CAIRN_EPROTO, "reading back tarball: %s",
		    archive_error_string(a));
		goto done;
	}
	while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
		const char *path = archive_entry_pathname(e);
		char *res = NULL, *rest, *slash, *item, *key;
		const char *group = "", *kind = "", *version = "v1";

		if (!str_has_prefix(path, "resources/") ||
		    strstr(path, "-preferredversion/") != NULL)
			continue;
		res = xstrdup(path + 10);
		slash = strchr(res, '/');
		if (slash == NULL) {
			free(res);
			continue;
		}
		*slash = '\0';
		rest = slash + 1;
		if (str_has_prefix(rest, "cluster/"))
			item = xstrdup(rest + 8);
		else if (str_has_prefix(rest, "namespaces/"))
			item = xstrdup(rest + 11);
		else {
			free(res);
			continue;
		}
		if (str_has_suffix(item, ".json"))
			item[strlen(item) - 5] = '\0';
		for (size_t i = 0; i < b->nres; i++) {
			const struct kube_resource *r = b->res[i].r;
			char *full = r->group[0] ? xasprintf("%s.%s",
			    r->resource, r->group) : xstrdup(r->resource);
			int m = strcmp(full, res) == 0;

			free(full);
			if (m) {
				group = r->group;
				kind = r->kind;
				version = r->version;
				break;
			}
		}
		key = group[0] ? xasprintf("%s/%s/%s", group, version, kind) :
		    xasprintf("%s/%s", version, kind);
		rl_pair(&em, key, item);
		if (em.rc < 0)
			rc = cairn_err_set(err, CAIRN_ETOOBIG,
			    "resource list too big");
		free(key);
		free(item);
		free(res);
		if (rc < 0)
			break;
	}
done:
	rl_end(&em);
	archive_read_free(a);	/* closes fds[0]: the writer sees EPIPE */
	pthread_join(th, NULL);
	if (rc == 0 && rb.rc < 0)
		rc = cairn_err_copy(err, &rb.err);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Final phases.                                                       */
/* ------------------------------------------------------------------ */

/*
 * Set condition `type` in status.conditions (Kubernetes style);
 * lastTransitionTime moves only when the status value changes.
 */
static void
bk_condition(struct bk *b, const char *type, const char *status,
	const char *reason, const char *message)
{
	cJSON *conds = json_get(b->status, "conditions");
	cJSON *c = NULL, *it;
	char ts[TIME_STR_MAX];

	if (!cJSON_IsArray(conds)) {
		conds = cJSON_CreateArray();
		json_set_item(b->status, "conditions", conds);
	}
	cJSON_ArrayForEach(it, conds)
		if (strcmp(json_str_or(it, "type", ""), type) == 0)
			c = it;
	if (c == NULL) {
		c = cJSON_CreateObject();
		cJSON_AddItemToArray(conds, c);
		json_set_str(c, "type", type);
	}
	if (strcmp(json_str_or(c, "status", ""), status) != 0) {
		time_format_rfc3339(time_now_us(), ts);
		json_set_str(c, "lastTransitionTime", ts);
	}
	json_set_str(c, "status", status);
	json_set_str(c, "reason", reason);
	json_set_str(c, "message", message != NULL ? message : "");
	json_set_int(c, "observedGeneration",
	    json_int(b->obj, "metadata.generation", 0));
}

static int
bk_finish_status(struct bk *b, const char *phase, const char *reason,
	struct cairn_err *err)
{
	char ts[TIME_STR_MAX];
	char partial[CAIRN_ERR_MSG_MAX + 200];
	const cJSON *first = cJSON_GetArrayItem(b->errors, 0);
	int final = strcmp(phase, "Completed") == 0 ||
	    strcmp(phase, "PartiallyFailed") == 0;
	int rc;

	/* The final numbers and phase in one journal transaction. */
	bk_set_progress_final(b, final);
	rc = journal_begin(b->env->journal, err);
	if (rc == 0) {
		(void)bk_journal_progress(b, NULL);
		(void)journal_finish(b->env->journal, b->jid, phase, reason,
		    NULL);
		rc = journal_commit(b->env->journal, err);
	}
	if (rc < 0)
		return rc;
	json_set_str(b->status, "phase", phase);
	/* the first error says what is missing (a group, a list) */
	snprintf(partial, sizeof partial, "some resources could not be backed "
	    "up%s%.*s%s: see the results file", cJSON_IsString(first) ?
	    " (" : "", CAIRN_ERR_MSG_MAX, cJSON_IsString(first) ?
	    first->valuestring : "", cJSON_IsString(first) ? ")" : "");
	bk_condition(b, "Ready", strcmp(phase, "Completed") == 0 ? "True" :
	    "False", phase, reason != NULL ? reason :
	    strcmp(phase, "PartiallyFailed") == 0 ? partial :
	    strcmp(phase, "FailedValidation") == 0 ? "see validationErrors" :
	    "the backup is complete");
	time_format_rfc3339(time_now_us(), ts);
	json_set_str(b->status, "completionTimestamp", ts);
	if (reason != NULL)
		json_set_str(b->status, "failureReason", reason);
	json_set_int(b->status, "errors", b->nerrors);
	json_set_int(b->status, "warnings", b->nwarnings);
	rc = bk_status_write(b, err);
	if (rc == 0)
		log_info("backup %s/%s: %s%s%s (%lld items, %lld errors)",
		    b->ns, b->name, phase, reason ? ": " : "",
		    reason ? reason : "", (long long)b->items_done,
		    (long long)b->nerrors);
	return rc;
}

/*
 * Failed, for good: then its tarball upload is dropped (S3 keeps and bills
 * the parts of an upload nobody completes; fs keeps them under
 * .cairn-uploads). Only after the Failed status is written: that write is
 * conditional, so no other owner can be resuming the upload by then.
 */
static int
bk_fail(struct bk *b, const char *reason, struct cairn_err *err)
{
	struct cairn_err ae = CAIRN_ERR_INIT;
	int rc;

	bk_event(b, "error", "%s", reason);
	rc = bk_finish_status(b, "Failed", reason, err);
	if (rc == 0 && b->upload_id != NULL && b->tar_key != NULL &&
	    store_mpu_abort(b->store, b->tar_key, b->upload_id, &ae) < 0 &&
	    ae.code != CAIRN_ENOTFOUND)
		log_warn("backup %s/%s: failed, and its upload %s could not be "
		    "aborted: %s", b->ns, b->name, b->upload_id, ae.msg);
	return rc;
}

/* Upload the metadata files (velero-backup.json last: its presence means done). */
static int
bk_upload_metadata(struct bk *b, const char *phase, struct cairn_err *err)
{
	struct buf lb, rl;
	cJSON *res = NULL, *final = NULL;
	char *text = NULL;
	char ts[TIME_STR_MAX];
	int rc;

	buf_init(&lb, 64u << 20);
	buf_init(&rl, 256u << 20);
	b->log.jid = b->jid;
	(void)itemlog_render(&b->log, &lb, NULL);
	rc = put_gz(b, LAYOUT_BACKUP_LOGS, buf_cstr(&lb), err);
	if (rc < 0)
		goto done;
	/* This run's list when it wrote every item, else read back. */
	if (b->rl != NULL && b->rl->rc == 0 && rl_end(&b->rl->e) == 0 &&
	    rlgz_deflate(b->rl, Z_FINISH) == 0) {
		struct store_src src;

		rc = store_src_fd(&src, b->rl->fd, 0, b->rl->len, err);
		if (rc == 0)
			rc = put_any(b, LAYOUT_BACKUP_RESOURCE_LIST, &src,
			    NULL, 0, err);
	} else {
		rc = bk_resource_list(b, &rl, err);
		if (rc == 0)
			rc = put_gz(b, LAYOUT_BACKUP_RESOURCE_LIST,
			    buf_cstr(&rl), err);
	}
	if (rc < 0)
		goto done;
	res = cJSON_CreateObject();
	cJSON_AddItemToObject(res, "errors", results_tree(b->errors));
	cJSON_AddItemToObject(res, "warnings", results_tree(b->warnings));
	text = cJSON_PrintUnformatted(res);
	rc = put_gz(b, LAYOUT_BACKUP_RESULTS, text, err);
	if (rc < 0)
		goto done;
	/* -volumesnapshots / -volumepluginbackups: volumes_backup() wrote them. */
	/* The Backup as it will read once final. */
	final = cJSON_Duplicate(b->obj, 1);
	cJSON_DeleteItemFromObjectCaseSensitive(final, "status");
	json_set_item(final, "status", cJSON_Duplicate(b->status, 1));
	json_set_str(final, "status.phase", phase);
	time_format_rfc3339(time_now_us(), ts);
	json_set_str(final, "status.completionTimestamp", ts);
	json_set_int(final, "status.errors", b->nerrors);
	json_set_int(final, "status.warnings", b->nwarnings);
	json_set_int(final, "status.progress.totalItems", b->items_done);
	json_set_int(final, "status.progress.itemsBackedUp", b->items_done);
	json_set_int(final, "status.progress.bytesDone", bk_bytes(b));
	free(text);
	text = cJSON_PrintUnformatted(final);
	rc = put_file(b, LAYOUT_BACKUP_METADATA, text, strlen(text), 0, err);
done:
	buf_free(&lb);
	buf_free(&rl);
	cJSON_Delete(res);
	cJSON_Delete(final);
	free(text);
	return rc;
}

/* Everything after the walk: last part, complete, metadata, phase. */
static int
bk_complete(struct bk *b, struct cairn_err *err)
{
	struct store_part *sp;
	const char *phase;
	int rc;

	/* Volumes before the tarball completes: a crash resumes both. */
	{
		struct cairn_err herr = CAIRN_ERR_INIT;
		struct volumes_ctx vc;
		struct volumes_result vr;
		int hrc;

		volumes_ctx_env(&vc, b->env, b->jid);
		/* the items are all in: say so before the volumes take long */
		rc = bk_progress(b, 1, err);
		if (rc < 0)
			return rc;
		/* pods that mount claims stay frozen while volumes are copied */
		rc = hooks_backup_volumes_begin(b->hooks, err);
		if (rc == 0)
			rc = volumes_backup(&vc, b->obj, b->spec, &vr, err);
		else
			memset(&vr, 0, sizeof vr);
		hrc = hooks_backup_volumes_end(b->hooks, &herr);
		if (rc == 0 && hrc < 0)
			rc = cairn_err_copy(err, &herr);
		if (rc < 0)
			return cairn_err_prefix(err, "volumes");
		for (int i = 0; i < vr.failed; i++)
			bk_record(b, 1, i == 0 ? vr.message : "another volume "
			    "failed (see its VolumePluginBackup)");
	}
	if (b->tar_done)
		goto metadata;
	rc = tarparts_finish(b->tp, err);
	if (rc < 0 && b->tar_done) {
		cairn_err_clear(err);
		goto metadata;
	}
	if (rc < 0)
		return rc;
	sp = xcalloc(b->nparts ? b->nparts : 1, sizeof *sp);
	for (size_t i = 0; i < b->nparts; i++) {
		sp[i].number = (int)b->parts[i].part_number;
		snprintf(sp[i].etag, sizeof sp[i].etag, "%.*s",
		    (int)sizeof sp[i].etag - 1, b->parts[i].etag);
		sp[i].size = (uint64_t)b->parts[i].bytes;
	}
	rc = engine_fence_check(&b->f, err);
	fault_point("backup.before-complete");	/* the complete in flight */
	if (rc == 0)
		rc = store_mpu_complete(b->store, b->tar_key, b->upload_id, sp,
		    b->nparts, NULL, err);
	free(sp);
	if (rc == CAIRN_ENOTFOUND && bk_completed_meanwhile(b))
		cairn_err_clear(err);
	else if (rc < 0)
		return cairn_err_prefix(err, "completing %s", b->tar_key);
	fault_point("backup.after-complete");
metadata:
	phase = b->nerrors > 0 ? "PartiallyFailed" : "Completed";
	rc = bk_upload_metadata(b, phase, err);
	if (rc < 0)
		return cairn_err_prefix(err, "metadata files");
	fault_point("backup.after-metadata");
	rc = bk_finish_status(b, phase, NULL, err);
	if (rc == 0)
		bsl_note_storage(b->env->kube, b->ns, bsl_name(b->loc), 1, NULL);
	return rc;
}

/* ------------------------------------------------------------------ */
/* The run.                                                            */
/* The run's state from the object as claimed or read; status fields set. */
static void
bk_init(struct bk *b, const struct engine_env *env, const cJSON *obj,
	const char *worker)
{
	char ts[TIME_STR_MAX];
	const char *st;

	memset(b, 0, sizeof *b);
	b->env = env;
	b->worker = worker;
	b->inc_ok = -1;
	b->ns = xstrdup(json_str_or(obj, "metadata.namespace", env->namespace));
	b->name = xstrdup(json_str_or(obj, "metadata.name", ""));
	b->uid = xstrdup(json_str_or(obj, "metadata.uid", ""));
	b->obj = cJSON_Duplicate(obj, 1);
	b->status = cJSON_Duplicate(json_get(obj, "status"), 1);
	if (b->status == NULL)
		b->status = cJSON_CreateObject();
	b->attempt = json_int(obj, "status.claim.attempt", 1);
	engine_fence_env(&b->f, env, &backups_gvr, "backup", b->ns, b->name,
	    b->attempt, b->uid);
	b->errors = cJSON_CreateArray();
	b->warnings = cJSON_CreateArray();
	b->log.journal = env->journal;
	b->log.kind = "backup";
	b->log.namespace = b->ns;
	b->log.name = b->name;
	buf_init(&b->legacy, 4096);
	buf_init(&b->empty, JOURNAL_EVENT_MAX / 2);
	buf_init(&b->preferred, 4096);
	b->last_progress_us = time_mono_us();

	st = json_str(b->status, "startTimestamp");
	if (st == NULL || time_parse(st, &b->start_us) < 0) {
		b->start_us = time_now_us();
		time_format_rfc3339(b->start_us, ts);
		json_set_str(b->status, "startTimestamp", ts);
	}
	json_set_int(b->status, "version", 1);
	json_set_str(b->status, "formatVersion", BSPEC_TAR_VERSION);
	bk_condition(b, "Ready", "False", "InProgress", "claimed by the worker "
	    "named in status.claim");
}

/*
 * Validation: the spec, the storage location (found, not ReadOnly). 0
 * when valid (expiration, store and spec warnings then set); *invalid 1
 * when not: FailedValidation is written and its result returned. < 0: an
 * API error, the backup is retried.
 */
static int
bk_validate(struct bk *b, int *invalid, struct cairn_err *err)
{
	const struct engine_env *env = b->env;
	char ts[TIME_STR_MAX];
	cJSON *verrs;
	int rc;

	*invalid = 0;
	verrs = cJSON_CreateArray();
	rc = bspec_parse(b->obj, &b->spec, verrs);
	if (rc == 0 && b->spec != NULL) {
		struct cairn_err le = CAIRN_ERR_INIT;

		rc = bsl_open(env->kube, b->ns, b->spec->location, &b->loc, &le);
		if (rc == CAIRN_ENOTFOUND || rc == CAIRN_EINVAL) {
			cJSON_AddItemToArray(verrs, cJSON_CreateString(le.msg));
			rc = 0;
		} else if (rc == 0 && bsl_read_only(b->loc)) {
			char *m = xasprintf("backup can't be created because "
			    "backup storage location %s is currently in "
			    "read-only mode", bsl_name(b->loc));

			cJSON_AddItemToArray(verrs, cJSON_CreateString(m));
			free(m);
		} else if (rc < 0) {
			cJSON_Delete(verrs);
			return cairn_err_copy(err, &le);
		}
	}
	if (rc < 0) {
		cJSON_Delete(verrs);
		return rc;
	}
	if (cJSON_GetArraySize(verrs) > 0) {
		const cJSON *ve;

		cJSON_ArrayForEach(ve, verrs)
			bk_event(b, "error", "validation failed: %s",
			    ve->valuestring);
		json_set_item(b->status, "validationErrors", verrs);
		*invalid = 1;
		return bk_finish_status(b, "FailedValidation", NULL, err);
	}
	cJSON_Delete(verrs);
	time_format_rfc3339(b->start_us + b->spec->ttl_us, ts);
	json_set_str(b->status, "expiration", ts);
	b->store = bsl_store(b->loc);
	for (size_t i = 0; b->spec->warnings[i] != NULL; i++)
		bk_record(b, 0, b->spec->warnings[i]);
	return 0;
}

/*
 * The tarball: the part pipeline (tarparts into the partsink, whose
 * stored() is bk_part_stored) fed by the walk, from part 1 or after the
 * kept parts. Returns the walk's result.
 */
static int
bk_tarball(struct bk *b, struct cairn_err *err)
{
	struct partsink_hooks hooks = { bk_part_fence, bk_part_failed,
	    bk_part_stored, b };
	struct tarparts_sink sink;
	int rc, first_part;

	rc = partsink_open(b->store, b->tar_key, b->upload_id, NULL, &hooks,
	    &b->ps, err);
	if (rc < 0)
		return rc;
	partsink_sink(b->ps, &sink);
	first_part = b->nparts > 0 ? bk_next_part(b) : 1;
	b->resumed = b->nparts > 0;
	if (!b->resumed)	/* else (or NULL): read the tarball back at the end */
		b->rl = rlgz_new();
	rc = tarparts_open(&sink, first_part, b->env->part_size,
	    b->start_us / TIME_US_PER_SEC, &b->tp, err);
	if (rc < 0)
		return rc;
	/* Deflate on a second thread: listing and compressing overlap. */
	if (tarparts_start_thread(b->tp, 0, 0, b->env->compression_threads,
	    err) < 0) {
		log_warn("backup %s/%s: %s; compressing on this thread",
		    b->ns, b->name, err->msg);
		cairn_err_clear(err);
	}
	if (first_part == 1) {
		rc = tarparts_add(b->tp, "metadata/version",
		    BSPEC_TAR_VERSION "\n", strlen(BSPEC_TAR_VERSION) + 1, err);
		if (rc < 0)
			return rc;
	}
	return bk_walk(b, err);
}

/*
 * The run failed on storage (or the walk): Failed with the error as the
 * reason, unless ownership is gone, the server is stopping or our journal
 * is full (then nothing is written: resumed later).
 */
static int
bk_storage_fail(struct bk *b, int rc, struct cairn_err *err)
{
	const struct engine_env *env = b->env;
	char reason[CAIRN_ERR_MSG_MAX + 100];

	if (b->f.fenced || rc == CAIRN_EFENCED)
		return rc;
	/* A shutdown is not the backup's fault: the next owner resumes it. */
	if (env->stop != NULL && atomic_load(env->stop))
		return CAIRN_ECANCELED;
	/* Our journal is full: not the backup's fault; resumed when it is not. */
	if (!journal_writable(env->journal, NULL))
		return rc;
	snprintf(reason, sizeof reason, "%s", err->msg);
	if (err->code == CAIRN_EIO || err->code == CAIRN_ENET ||
	    err->code == CAIRN_ESERVER || err->code == CAIRN_ETIMEOUT ||
	    err->code == CAIRN_EAUTH)
		bsl_note_storage(env->kube, b->ns, bsl_name(b->loc), 0, reason);
	cairn_err_clear(err);
	hooks_backup_thaw_all(b->hooks, 0);	/* before the final status */
	return bk_fail(b, reason, err);
}

/* ------------------------------------------------------------------ */

static void
bk_free(struct bk *b)
{
	kube_lists_free(b->lists);
	free(b->units);
	tarparts_free(b->tp);
	hooks_backup_free(b->hooks);
	partsink_free(b->ps);
	rlgz_free(b->rl);
	free(b->cur_gvk);
	for (size_t i = 0; i < b->nres; i++)
		kube_resource_free(b->res[i].r);
	free(b->res);
	for (size_t i = 0; i < b->nns; i++)
		free(b->nslist[i]);
	free(b->nslist);
	for (size_t i = 0; i < b->npv; i++)
		free(b->pv_names[i]);
	free(b->pv_names);
	for (size_t i = 0; i < b->ncr; i++)
		free(b->cr_kinds[i]);
	free(b->cr_kinds);
	for (int i = 0; i < 4; i++)
		free(b->resume[i]);
	free(b->resume_cont);
	free(b->page_cont);
	free(b->item_cont);
	free(b->parts);
	free(b->upload_id);
	free(b->first_list_err);
	free(b->tar_key);
	free(b->last_key);
	bsl_free(b->loc);
	bspec_free(b->spec);
	cJSON_Delete(b->obj);
	cJSON_Delete(b->status);
	cJSON_Delete(b->errors);
	cJSON_Delete(b->warnings);
	cJSON_Delete(b->ck_results);
	cJSON_Delete(b->carried[0]);
	cJSON_Delete(b->carried[1]);
	buf_free(&b->legacy);
	buf_free(&b->empty);
	buf_free(&b->preferred);
	free(b->ns);
	free(b->name);
	free(b->uid);
}

/* The schedule that made the backup (its label), or "". Borrowed. */
static const char *
bk_schedule(const struct bk *b)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(json_get(b->obj,
	    "metadata.labels"), SCHEDULE_LABEL);

	return cJSON_IsString(v) ? v->valuestring : "";
}

static int
bk_journal_claim(struct bk *b, struct cairn_err *err)
{
	struct journal_item it;

	memset(&it, 0, sizeof it);
	snprintf(it.kind, sizeof it.kind, "%s", JOURNAL_KIND_BACKUP);
	snprintf(it.namespace, sizeof it.namespace, "%s", b->ns);
	snprintf(it.name, sizeof it.name, "%s", b->name);
	snprintf(it.uid, sizeof it.uid, "%s", b->uid);
	it.attempt = b->attempt;
	snprintf(it.holder, sizeof it.holder, "%s", b->env->server_id);
	snprintf(it.worker, sizeof it.worker, "%s", b->worker);
	/* metrics are labelled with the schedule that made the backup */
	snprintf(it.schedule, sizeof it.schedule, "%s", bk_schedule(b));
	if (journal_item_find(b->env->journal, JOURNAL_KIND_BACKUP, b->ns,
	    b->name, b->uid, &it, NULL) == 0 && it.attempt == b->attempt &&
	    it.finished_at == 0) {
		b->jid = it.id;		/* our own restart: keep the row */
		return 0;
	}
	it.attempt = b->attempt;
	snprintf(it.holder, sizeof it.holder, "%s", b->env->server_id);
	snprintf(it.worker, sizeof it.worker, "%s", b->worker);
	snprintf(it.schedule, sizeof it.schedule, "%s", bk_schedule(b));
	snprintf(it.phase, sizeof it.phase, "InProgress");
	it.claimed_at = 0;
	return journal_claim(b->env->journal, &it, &b->jid, err);
}

int
backup_run(const struct engine_env *env, const cJSON *obj,
	const char *worker, struct cairn_err *err)
{
	struct bk b;
	char reason[CAIRN_ERR_MSG_MAX + 100];
	int rc, invalid;

	bk_init(&b, env, obj, worker);
	rc = bk_journal_claim(&b, err);
	if (rc < 0)
		goto out;
	bk_event(&b, "info", "backup started by %s (attempt %lld)", worker,
	    (long long)b.attempt);

	rc = bk_validate(&b, &invalid, err);
	if (rc < 0 || invalid)
		goto out;
	{
		/* Hooks: first thaw what an earlier attempt left frozen. */
		struct hooks_backup_env he = { env->kube, env->journal, b.jid,
		    b.attempt, env->stop, &b, hk_persist, hk_event, hk_record };

		hooks_backup_open(&he, b.spec->hooks, b.obj, &b.hooks, err);
		rc = hooks_backup_recover(b.hooks, err);
		if (rc < 0)
			goto out;
	}
	if (bsl_key_id(b.loc) != NULL) {
		json_set_str(b.status, "encryption.keyID", bsl_key_id(b.loc));
		json_set_str(b.status, "encryption.algorithm", CRYPT_ALGORITHM);
	}

	/* Storage reachable? (A read-only fs: its writes wait, bounded.) */
	rc = store_check(b.store, err);
	if (rc == CAIRN_EREADONLY) {
		log_warn("backup %s/%s: %s", b.ns, b.name, err->msg);
		cairn_err_clear(err);
		rc = 0;
	}
	if (rc < 0) {
		snprintf(reason, sizeof reason, "storage location %s (%s) is "
		    "unreachable: %s", bsl_name(b.loc), store_describe(b.store),
		    err->msg);
		cairn_err_clear(err);
		bsl_note_storage(env->kube, b.ns, bsl_name(b.loc), 0, reason);
		rc = bk_fail(&b, reason, err);
		goto out;
	}
	b.tar_key = bsl_backup_key(b.loc, b.name, LAYOUT_BACKUP_TARBALL);
	if (b.tar_key == NULL) {
		rc = bk_fail(&b, "backup name cannot be used as a storage key", err);
		goto out;
	}

	bk_log_scope(&b);
	rc = bk_plan(&b, err);
	if (rc < 0)
		goto out;
	rc = bk_prepare_upload(&b, err);
	if (rc == CAIRN_EFENCED || rc == CAIRN_ECANCELED)
		goto out;
	if (rc < 0) {
		snprintf(reason, sizeof reason, "cannot start the tarball "
		    "upload to %s: %s", store_describe(b.store), err->msg);
		cairn_err_clear(err);
		bsl_note_storage(env->kube, b.ns, bsl_name(b.loc), 0, reason);
		rc = bk_fail(&b, reason, err);
		goto out;
	}
	bk_set_checkpoint(&b);
	if (!b.tar_done) {
		rc = bk_walk_queue(&b, err);
		if (rc < 0)
			goto out;
	}
	rc = bk_progress(&b, 1, err);
	if (rc < 0)
		goto out;
	if (b.tar_done) {
		b.resumed = 1;	/* the resource list is read back */
		goto complete;
	}

	rc = bk_tarball(&b, err);
	if (rc == CAIRN_EFENCED || rc == CAIRN_ECANCELED)
		goto out;
	if (rc < 0 && !b.tar_done)
		goto storage_fail;
	cairn_err_clear(err);
	/*
	 * Nothing could be listed at all (every list failed, nothing stored
	 * by an earlier attempt): a backup of nothing is not a partial one.
	 */
	if (b.lists_ok == 0 && b.lists_failed > 0 && b.items_stored == 0) {
		snprintf(reason, sizeof reason, "every resource list failed "
		    "(%d lists); the first: %s", b.lists_failed,
		    b.first_list_err);
		rc = bk_fail(&b, reason, err);
		goto out;
	}
complete:
	rc = bk_complete(&b, err);
	if (rc == CAIRN_EFENCED || rc == CAIRN_ECANCELED)
		goto out;
	if (rc < 0)
		goto storage_fail;
	goto out;

storage_fail:
	rc = bk_storage_fail(&b, rc, err);
out:
	if (!b.f.fenced && rc != CAIRN_EFENCED)
		hooks_backup_thaw_all(b.hooks, 1);	/* stopped: thaw, recorded */
	if (b.f.fenced && rc != CAIRN_EFENCED)
		rc = cairn_err_set(err, CAIRN_EFENCED, "ownership lost");
	bk_free(&b);
	return rc;
}
