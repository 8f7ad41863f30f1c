/*
 * list.c: paged lists delivered item by item.
 *
 * Each page (limit/continue) is streamed: libcurl's write callback feeds
 * the bytes to the list splitter (stream.c), which hands over each element
 * of "items" as soon as its closing brace arrives; cJSON parses that one
 * item, the caller's callback gets it, and it is freed. Memory is one item
 * plus the envelope, however large the page or the list.
 *
 * Items get apiVersion and kind from the envelope when the server leaves
 * them out (kind = the list kind minus "List"), from the request's
 * group/version and the discovery cache if the envelope names them only
 * after the items.
 *
 * kube_list_text() also hands over each item's JSON text, so a caller
 * that stores items (the backup) writes what the server sent instead of
 * printing the parsed tree again: the text as it is when it is compact
 * and names apiVersion and kind; with apiVersion/kind missing (real API
 * servers omit them on list items) the same values as the tree gets are
 * inserted after the opening brace; only text with whitespace between
 * tokens (the splitter notes it while scanning) is replaced by cJSON's
 * compact print of the tree.
 *
 * Items come in key order (etcd's: the bytes of "namespace/name",
 * kube_key_cmp()), and the list remembers the key of the last item it
 * delivered. A page that breaks in the middle (connection drop, timeout)
 * is fetched again with the same continue token and its items up to that
 * key are skipped: by key, not by count, because a first page fetched
 * again is a new snapshot where an object created or deleted meanwhile
 * shifts every position. An expired continue token (410) ends the list
 * with CAIRN_EGONE, restarts it (KUBE_GONE_RESTART: the callback sees
 * items again after on_restart), or goes on past the last key delivered
 * (KUBE_GONE_RESUME): from the inconsistent continue token the API
 * server puts in the 410's Status (the rest of the collection at its
 * latest state), else from the first page of a new list, skipping by key.
 *
 * A list may start at a continue token an earlier list handed out
 * (opts.continue_token: a resumed backup goes on where it was), and
 * on_page tells the caller the token of each page before it is fetched,
 * which is what such a caller records.
 *
 * With opts.parse_only the tree of each item holds only the members the
 * caller named (json_parse_members): a backup reads names and labels,
 * and the text is what it stores, so the rest of the object is stepped
 * over instead of being parsed into a tree and freed. With the text, the
 * apiVersion and kind filled in go into the text only.
 *
 * With opts.prefetch the pages are fetched ahead by kube/lists.c (one
 * list in a struct kube_lists: pages fetched on another thread while the
 * callback works through this one, bounded in bytes) and delivered here
 * by the same code (struct lst, below), so a list reads the same either
 * way.
 */
#include "config.h"
#include "kube/internal.h"
#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"

#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * metadata.deletionTimestamp is missing from nearly every item, so the
 * member scan would go to the end of the metadata (past managedFields,
 * often most of it) to learn so. The API server writes a built-in
 * object's metadata in ObjectMeta's Go field order (name, ...,
 * deletionTimestamp, deletionGracePeriodSeconds, labels, annotations,
 * ownerReferences, finalizers, managedFields: apimachinery's
 * pkg/apis/meta/v1/types.go) and a custom resource's with its keys
 * sorted (unstructured/helpers.go encodes the object's map with
 * encoding/json, which sorts keys). The four members named come after
 * deletionTimestamp in both orders, so meeting one first means it is not
 * there. Were a server to use another order, an item being deleted would
 * be backed up (Velero leaves them out): the whole cost of a wrong guess.
 */
#define DELETION_KEY "metadata.deletionTimestamp<labels,ownerReferences," \
	"finalizers,managedFields"

#define LIST_DEFAULT_LIMIT 500
#define LIST_MAX_RESTARTS 3

struct lst {
	struct kube *k;
	const struct kube_gvr *r;
	struct lsplit ls;
	kube_item_fn fn;
	kube_item_text_fn tfn;		/* kube_list_text: instead of fn */
	void *arg;
	struct buf text;		/* item text, apiVersion/kind added */
	struct kube_list_info *info;
	struct cairn_err *err;
	int (*on_too_deep)(void *arg, cJSON *item, int depth);
	char *gv;			/* "group/version" of the request */
	char *disc_kind;		/* kind from discovery, lazily */
	int disc_tried;
	const char **keys;		/* opts.parse_only + apiVersion, kind, name */
	uint64_t page_seen;		/* items of this page parsed, this attempt */
	struct buf last;		/* key of the last item delivered: ns NUL name */
	size_t last_ns_len;
	int have_last;			/* last is set */
	int skip;			/* skip items up to last (refetch, resume) */
	int gone_streak;		/* 410s since an item was last delivered */
};

int
kube_key_cmp(const char *ns_a, const char *name_a, const char *ns_b,
    const char *name_b)
{
	size_t i = 0;
	unsigned char ca, cb;

	if (ns_a == NULL)
		ns_a = "";
	if (ns_b == NULL)
		ns_b = "";
	/* "ns_a/" against "ns_b/": names hold no '/', so this decides */
	while (ns_a[i] != '\0' && ns_a[i] == ns_b[i])
		i++;
	ca = ns_a[i] != '\0' ? (unsigned char)ns_a[i] : '/';
	cb = ns_b[i] != '\0' ? (unsigned char)ns_b[i] : '/';
	if (ca != cb)
		return ca < cb ? -1 : 1;
	if (ns_a[i] != ns_b[i])		/* "a/" vs "a//...": not a namespace */
		return ns_a[i] == '\0' ? -1 : 1;
	return strcmp(name_a != NULL ? name_a : "", name_b != NULL ?
	    name_b : "");
}

/* Remember ns/name as the last key delivered. */
static void
last_set(struct lst *l, const char *ns, const char *name)
{
	size_t n = strlen(ns);

	buf_reset(&l->last);
	if (buf_append(&l->last, ns, n + 1) < 0 ||
	    buf_puts(&l->last, name) < 0) {
		l->have_last = 0;	/* beyond any real key: no skipping */
		return;
	}
	l->last_ns_len = n;
	l->have_last = 1;
}

static const char *
item_kind(struct lst *l)
{
	size_t n = strlen(l->ls.kind);
	struct kube_discovery *d;
	const struct kube_resource *r;

	if (n > 4 && strcmp(l->ls.kind + n - 4, "List") == 0) {
		l->ls.kind[n - 4] = '\0';
		return l->ls.kind;
	}
	if (n > 0)
		return l->ls.kind;
	if (!l->disc_tried) {
		l->disc_tried = 1;
		kube_disc_lock(l->k);
		d = kube_disc_cached(l->k);
		if (d != NULL) {
			r = kube_discovery_find(d, l->r->group ? l->r->group :
			    "", l->r->version, l->r->resource);
			if (r != NULL)
				l->disc_kind = xstrdup(r->kind);
		}
		kube_disc_unlock(l->k);
	}
	return l->disc_kind;
}

/* "key":"value", into b, the value escaped as JSON needs. */
static void
text_member(struct buf *b, const char *key, size_t klen, const char *value)
{
	buf_append(b, key, klen);
	str_escape_json(b, value);
	buf_putc(b, ',');
}

/*
 * kube_list_text's delivery: the item's text as sent, with the apiVersion
 * (av) and kind on_item found missing (NULL: present already) inserted
 * after the opening brace; cJSON's print of the (whole) tree when the
 * text is not compact.
 */
static int
deliver_text(struct lst *l, cJSON *item, const char *text, size_t len,
    const char *av, const char *kind)
{
	char *printed = NULL;
	const char *t = text;
	size_t tlen = len;
	int rc;

	if (l->ls.item.ws) {
		printed = json_print(item);	/* keeps strings with U+0000 */
		t = printed;
		tlen = strlen(printed);
	} else if (av != NULL || kind != NULL) {
		/* text is "{...}": on_item only delivers objects */
		buf_reset(&l->text);
		buf_putc(&l->text, '{');
		if (av != NULL)
			text_member(&l->text, "\"apiVersion\":", 13, av);
		if (kind != NULL)
			text_member(&l->text, "\"kind\":", 7, kind);
		if (len == 2)	/* "{}": no comma before the brace */
			l->text.len--;
		if (buf_append(&l->text, text + 1, len - 1) < 0) {
			cJSON_Delete(item);
			return cairn_err_set(l->err, CAIRN_ETOOBIG,
			    "list item %llu too large",
			    (unsigned long long)l->page_seen);
		}
		t = l->text.data;
		tlen = l->text.len;
	}
	rc = l->tfn(l->arg, item, t, tlen);
	free(printed);
	if (rc != KUBE_TAKE)
		cJSON_Delete(item);
	return rc == KUBE_TAKE ? 0 : rc;
}

static int
on_item(void *arg, const char *text, size_t len)
{
	struct lst *l = arg;
	cJSON *item;
	const char *av = NULL, *kind = NULL;
	int rc;

	const cJSON *md;
	const char *ns, *name;

	l->page_seen++;
	/* spaced-out text is printed from the tree: it must be whole */
	if (l->keys != NULL && !l->ls.item.ws)
		item = json_parse_members(text, len, l->keys, l->err);
	else
		item = json_parse(text, len, l->err);
	if (item == NULL) {
		cairn_err_prefix(l->err, "list item %llu",
		    (unsigned long long)l->page_seen);
		return CAIRN_EPROTO;
	}
	if (!cJSON_IsObject(item)) {
		cJSON_Delete(item);
		return cairn_err_set(l->err, CAIRN_EPROTO,
		    "list item %llu is not an object",
		    (unsigned long long)l->page_seen);
	}
	md = cJSON_GetObjectItemCaseSensitive(item, "metadata");
	ns = json_str_or(md, "namespace", "");
	name = json_str_or(md, "name", "");
	if (l->skip) {
		if (kube_key_cmp(ns, name, l->last.data, l->last.data +
		    l->last_ns_len + 1) <= 0) {
			cJSON_Delete(item);	/* delivered before */
			return 0;
		}
		l->skip = 0;
	}
	last_set(l, ns, name);
	l->gone_streak = 0;
	if (cJSON_GetObjectItemCaseSensitive(item, "apiVersion") == NULL)
		av = l->ls.api_version[0] ? l->ls.api_version : l->gv;
	if (cJSON_GetObjectItemCaseSensitive(item, "kind") == NULL)
		kind = item_kind(l);
	/*
	 * Into the tree too, unless it is a part for the text's callback
	 * (the text has them). The keys are literals: kept without a copy.
	 */
	if (l->tfn == NULL || l->keys == NULL || l->ls.item.ws) {
		if (av != NULL)
			cJSON_AddItemToObjectCS(item, "apiVersion",
			    cJSON_CreateString(av));
		if (kind != NULL)
			cJSON_AddItemToObjectCS(item, "kind",
			    cJSON_CreateString(kind));
	}
	l->info->items++;
	if (l->on_too_deep != NULL && l->ls.item.maxdepth >
	    CAIRN_JSON_MAX_DEPTH) {
		rc = l->on_too_deep(l->arg, item, l->ls.item.maxdepth);
		cJSON_Delete(item);
		return rc;
	}
	if (l->tfn != NULL)
		return deliver_text(l, item, text, len, av, kind);
	rc = l->fn(l->arg, item);
	if (rc != KUBE_TAKE)
		cJSON_Delete(item);
	return rc == KUBE_TAKE ? 0 : rc;
}

static int
sink(void *arg, const char *p, size_t n)
{
	struct lst *l = arg;

	return lsplit_feed(&l->ls, p, n, on_item, l);
}

static int
rewind_page(void *arg)
{
	struct lst *l = arg;

	lsplit_reset(&l->ls);
	l->page_seen = 0;
	l->skip = l->have_last;	/* what this page gave before, by key */
	return 0;
}

/* The query of one page: base?limit=&selectors&continue= (or RV). */
int
kube_list_query(struct buf *q, const char *base, int limit,
    const struct kube_list_opts *o, const char *cont, struct cairn_err *err)
{
	buf_reset(q);
	buf_puts(q, base);
	if (limit > 0)
		buf_printf(q, "?limit=%d", limit);
	kube_query_add(q, "labelSelector", o->label_selector);
	kube_query_add(q, "fieldSelector", o->field_selector);
	if (cont != NULL)
		kube_query_add(q, "continue", cont);
	else
		kube_query_add(q, "resourceVersion", o->resource_version);
	if (q->len >= q->cap)
		return cairn_err_set(err, CAIRN_ETOOBIG, "list %s: query too "
		    "long", base);
	return 0;
}

/*
 * The continue token of a 410's Status (metadata.continue): the API
 * server's inconsistent continue token, which lists the rest of the
 * collection at its latest state. Owned, or NULL.
 */
char *
kube_list_gone_token(const struct buf *reply)
{
	cJSON *st;
	const char *t;
	char *out = NULL;

	if (reply->len == 0)
		return NULL;
	st = json_parse(reply->data, reply->len, NULL);
	t = json_str(st, "metadata.continue");
	if (t != NULL && *t != '\0')
		out = xstrdup(t);
	cJSON_Delete(st);
	return out;
}

/*
 * The continue token *cont expired (410). *gone_cont: the inconsistent
 * continue token of the 410's Status, or NULL (taken). Returns 0 with
 * *cont set to where the list goes on, or the error that ends it.
 */
static int
list_gone(struct lst *l, const struct kube_list_opts *o, const char *base,
    char **cont, char **gone_cont, struct cairn_err *err)
{
	struct kube_list_info *info = l->info;

	FREE_NULL(*cont);
	if (o->restart_on_gone == KUBE_GONE_RESUME &&
	    l->gone_streak < LIST_MAX_RESTARTS) {
		log_info("list %s: continue token expired after %llu items; "
		    "going on %s, past the last item delivered", base,
		    (unsigned long long)info->items, *gone_cont != NULL ?
		    "at the API server's latest state" : "with a new list");
		cairn_err_clear(err);
		l->gone_streak++;
		info->restarts++;
		*cont = *gone_cont;	/* NULL: from the first page */
		*gone_cont = NULL;
		l->skip = l->have_last;
		return 0;
	}
	FREE_NULL(*gone_cont);
	if (o->restart_on_gone != KUBE_GONE_RESTART ||
	    info->restarts >= LIST_MAX_RESTARTS) {
		cairn_err_prefix(err, "list %s: continue token expired after "
		    "%llu items; list again", base,
		    (unsigned long long)info->items);
		return CAIRN_EGONE;
	}
	log_info("list %s: continue token expired after %llu items; "
	    "restarting", base, (unsigned long long)info->items);
	cairn_err_clear(err);
	info->restarts++;
	l->have_last = 0;	/* the callback sees everything again */
	l->skip = 0;
	if (o->on_restart != NULL)
		return o->on_restart(l->arg);
	return 0;
}

/* ---- One list's delivery, also for kube/lists.c ---- */

struct lst *
lst_new(struct kube *k, const struct kube_gvr *r,
    const struct kube_list_opts *o, kube_item_fn fn, kube_item_text_fn tfn,
    void *arg, struct kube_list_info *info, struct cairn_err *err)
{
	struct lst *l = xcalloc(1, sizeof *l);

	l->k = k;
	l->r = r;
	l->fn = fn;
	l->tfn = tfn;
	l->arg = arg;
	l->info = info;
	l->err = err;
	l->on_too_deep = o->on_too_deep;
	memset(info, 0, sizeof *info);
	l->gv = r->group && *r->group ? xasprintf("%s/%s", r->group,
	    r->version) : xstrdup(r->version);
	if (o->parse_only != NULL) {
		size_t n = 0;

		while (o->parse_only[n] != NULL)
			n++;
		/* and the key, for skipping by key */
		l->keys = xcalloc(n + 5, sizeof *l->keys);
		/*
		 * apiVersion and kind: not in a built-in list's items, and
		 * first when there (Go writes TypeMeta first, and a custom
		 * resource's keys sorted): the scan stops after the rest
		 */
		l->keys[0] = "?apiVersion";
		l->keys[1] = "?kind";
		l->keys[2] = "metadata.name";
		l->keys[3] = "metadata.namespace";
		/* each once: every member of an item is matched against all */
		for (size_t i = 0, k = 4; i < n; i++) {
			const char *key = strcmp(o->parse_only[i],
			    "metadata.deletionTimestamp") == 0 ? DELETION_KEY :
			    o->parse_only[i];
			size_t j = 0;

			while (j < k && strcmp(l->keys[j], key) != 0)
				j++;
			if (j == k)
				l->keys[k++] = key;
		}
	}
	buf_init(&l->last, 4096);
	lsplit_init(&l->ls, CAIRN_CAP_API_BODY);
	buf_init(&l->text, CAIRN_CAP_API_BODY + 1024);
	return l;
}

void
lst_free(struct lst *l)
{
	if (l == NULL)
		return;
	buf_free(&l->last);
	free(l->gv);
	free(l->disc_kind);
	free(l->keys);
	buf_free(&l->text);
	lsplit_free(&l->ls);
	free(l);
}

void
lst_page_begin(struct lst *l)
{
	lsplit_reset(&l->ls);
	l->page_seen = 0;
}

void
lst_page_rewind(struct lst *l)
{
	(void)rewind_page(l);
}

void
lst_skip_delivered(struct lst *l)
{
	l->skip = l->have_last;
}

int
lst_record(struct lst *l, const char *text, size_t len, int ws, int depth)
{
	l->ls.item.ws = ws;
	l->ls.item.maxdepth = depth;
	return on_item(l, text, len);
}

void
lst_page_env(struct lst *l, const char *api_version, const char *kind)
{
	snprintf(l->ls.api_version, sizeof l->ls.api_version, "%s",
	    api_version);
	snprintf(l->ls.kind, sizeof l->ls.kind, "%s", kind);
}

void
lst_page_done(struct lst *l, const char *resource_version)
{
	l->info->pages++;
	snprintf(l->info->resource_version, sizeof l->info->resource_version,
	    "%s", resource_version);
}

/*
 * The streamed page is complete: its envelope parsed (info's
 * resourceVersion, pages) and *next its continue token (owned; NULL on
 * the last page).
 */
static int
page_end(struct lst *l, const char *base, char **next)
{
	cJSON *env;
	const char *c;

	*next = NULL;
	env = lsplit_finish(&l->ls, l->err);
	if (env == NULL)
		return cairn_err_prefix(l->err, "list %s", base);
	lst_page_done(l, json_str_or(env, "metadata.resourceVersion", ""));
	c = json_str(env, "metadata.continue");
	if (c != NULL && *c != '\0')
		*next = xstrdup(c);
	cJSON_Delete(env);
	return 0;
}

/* A list streamed on the caller's thread, page by page. */
static int
list_stream(struct lst *l, struct kube *k, const char *base, int limit,
    const struct kube_list_opts *o, struct cairn_err *err)
{
	struct kube_call c;
	struct buf q;
	char *cont = NULL, *gone_cont = NULL;
	int rc = 0;

	if (o->continue_token != NULL && o->continue_token[0] != '\0')
		cont = xstrdup(o->continue_token);
	buf_init(&q, 64u << 10);
	for (;;) {
		char *next = NULL;

		rc = kube_list_query(&q, base, limit, o, cont, err);
		if (rc != 0)
			break;
		if (o->on_page != NULL) {
			rc = o->on_page(l->arg, cont != NULL ? cont : "");
			if (rc != 0)
				break;
		}
		lst_page_begin(l);
		memset(&c, 0, sizeof c);
		c.method = "GET";
		c.path = buf_cstr(&q);
		c.idempotent = 1;
		c.idle_timeout = 1;
		c.stop = o->stop;
		c.sink = sink;
		c.rewind = rewind_page;
		c.sink_arg = l;
		rc = kube_call_do(k, &c, err);
		if (rc == CAIRN_EGONE)
			gone_cont = kube_list_gone_token(&c.reply);
		kube_call_done(&c);
		if (rc == CAIRN_EGONE && cont != NULL) {
			rc = list_gone(l, o, base, &cont, &gone_cont, err);
			if (rc != 0)
				break;
			continue;
		}
		if (rc != 0)
			break;
		rc = page_end(l, base, &next);
		if (rc != 0)
			break;
		free(cont);
		cont = next;
		if (cont == NULL)
			break;
		if (o->stop != NULL && *o->stop) {
			rc = cairn_err_set(err, CAIRN_ECANCELED,
			    "list %s: canceled", base);
			break;
		}
	}
	free(cont);
	free(gone_cont);
	buf_free(&q);
	return rc;
}

/* A list fetched ahead by kube/lists.c (opts.prefetch). */
static int
list_prefetched(struct kube *k, const struct kube_gvr *r, const char *ns,
    const struct kube_list_opts *o, kube_item_fn fn, kube_item_text_fn tfn,
    void *arg, struct kube_list_info *info, struct cairn_err *err)
{
	struct kube_lists_opts mo;
	struct kube_lists *m = NULL;
	int rc, id;

	memset(&mo, 0, sizeof mo);
	mo.concurrency = 1;
	mo.stop = o->stop;
	rc = kube_lists_open(k, &mo, &m, err);
	if (rc < 0)
		return rc;
	id = kube_lists_add(m, r, ns, o, 0);
	rc = lists_take(m, id, fn, tfn, arg, info, err);
	kube_lists_free(m);
	return rc;
}

static int
list_run(struct kube *k, const struct kube_gvr *r, const char *ns,
    const struct kube_list_opts *opts, kube_item_fn fn, kube_item_text_fn tfn,
    void *arg, struct kube_list_info *info, struct cairn_err *err)
{
	struct kube_list_opts o;
	struct kube_list_info info0;
	struct lst *l;
	char *base;
	int rc, limit;

	if (opts != NULL)
		o = *opts;
	else
		memset(&o, 0, sizeof o);
	if (info == NULL)
		info = &info0;
	memset(info, 0, sizeof *info);
	if (r == NULL || r->version == NULL || r->resource == NULL)
		return cairn_err_set(err, CAIRN_EINVAL,
		    "list: version and resource are required");
	limit = o.limit == 0 ? LIST_DEFAULT_LIMIT : o.limit;
	/* kube/lists.c goes on after a 410, it does not start over */
	if (o.prefetch && limit > 0 && o.restart_on_gone != KUBE_GONE_RESTART)
		return list_prefetched(k, r, ns, &o, fn, tfn, arg, info, err);
	l = lst_new(k, r, &o, fn, tfn, arg, info, err);
	base = kube_path(r, ns, NULL, NULL);
	rc = list_stream(l, k, base, limit, &o, err);
	free(base);
	lst_free(l);
	return rc;
}

int
kube_list(struct kube *k, const struct kube_gvr *r, const char *ns,
    const struct kube_list_opts *opts, kube_item_fn fn, void *arg,
    struct kube_list_info *info, struct cairn_err *err)
{
	return list_run(k, r, ns, opts, fn, NULL, arg, info, err);
}

int
kube_list_text(struct kube *k, const struct kube_gvr *r, const char *ns,
    const struct kube_list_opts *opts, kube_item_text_fn fn, void *arg,
    struct kube_list_info *info, struct cairn_err *err)
{
	return list_run(k, r, ns, opts, NULL, fn, arg, info, err);
}
