/*
 * watch.c: watch streams and the informer built on them.
 *
 * A watch reply is chunked HTTP carrying one JSON event per line; chunk
 * borders fall anywhere (inside a string, between the two bytes of an
 * escape). libcurl's write callback feeds the JSON splitter (stream.c),
 * which hands complete events to cJSON. The last resourceVersion seen (from
 * any event, bookmarks included) is kept so a dropped connection resumes
 * where it stopped; a 410 (as HTTP status or as an ERROR event carrying a
 * Status with code 410) means that version is gone and the caller must
 * relist: kube_watch returns CAIRN_EGONE.
 *
 * The informer: list (streamed, paged), then watch from the list's
 * resourceVersion with bookmarks, reconnecting on drops and relisting on
 * 410. It keeps a cache (hash map keyed "namespace/name") so it can give
 * the old object with each update and find what disappeared across a
 * relist. Only the informer's thread changes the cache; other threads read
 * copies under its mutex; callbacks run without the mutex held.
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

#define WATCH_DEFAULT_TIMEOUT_S 300
#define WATCH_GRACE_S 30		/* client-side margin over timeoutSeconds */
#define WATCH_BACKOFF_MAX_US (10 * TIME_US_PER_SEC)

static const char *const ev_names[] = {
	"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR",
};

const char *
kube_event_name(enum kube_event_type t)
{
	if ((unsigned)t < sizeof ev_names / sizeof ev_names[0])
		return ev_names[t];
	return "?";
}

int
kube_event_type_parse(const char *s, enum kube_event_type *out)
{
	size_t i;

	for (i = 0; s != NULL && i < sizeof ev_names / sizeof ev_names[0];
	    i++) {
		if (strcmp(s, ev_names[i]) == 0) {
			*out = (enum kube_event_type)i;
			return 0;
		}
	}
	return CAIRN_EPROTO;
}

struct wst {
	kube_event_fn fn;
	void *arg;
	struct jsplit js;
	char *rv;		/* last resourceVersion seen, owned */
	int gone;		/* an ERROR event with 410 arrived */
	char gone_reason[KUBE_REASON_MAX];
	char gone_msg[KUBE_MESSAGE_MAX];
	int cb_stopped;		/* fn returned non-zero: cb_rc */
	int cb_rc;
	uint64_t events;	/* events on this connection */
	int error_code;		/* an ERROR event other than 410 came: its code */
	char error_msg[KUBE_MESSAGE_MAX];
	struct cairn_err *err;
};

static int
on_event(void *arg, const char *text, size_t len)
{
	struct wst *w = arg;
	enum kube_event_type t;
	cJSON *ev, *obj;
	const char *rv;
	int rc;

	ev = json_parse(text, len, w->err);
	if (ev == NULL)
		return cairn_err_prefix(w->err, "watch event");
	if (kube_event_type_parse(json_str(ev, "type"), &t) < 0 ||
	    !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(ev, "object"))) {
		cJSON_Delete(ev);
		return cairn_err_set(w->err, CAIRN_EPROTO,
		    "watch event without a known type and an object");
	}
	obj = cJSON_DetachItemFromObjectCaseSensitive(ev, "object");
	cJSON_Delete(ev);
	w->events++;
	if (t == KUBE_EV_ERROR) {
		int64_t code = json_int(obj, "code", 0);

		kube_status_set((int)code, kube_http_rc((long)code,
		    json_str(obj, "reason")), json_str(obj, "reason"),
		    json_str(obj, "message"), -1);
		if (code == 410) {
			snprintf(w->gone_reason, sizeof w->gone_reason, "%.*s",
			    (int)sizeof w->gone_reason - 1,
			    json_str_or(obj, "reason", "Expired"));
			snprintf(w->gone_msg, sizeof w->gone_msg, "%.*s",
			    (int)sizeof w->gone_msg - 1,
			    json_str_or(obj, "message", ""));
			cairn_err_set(w->err, CAIRN_EGONE, "watch: %s (410): %s",
			    json_str_or(obj, "reason", "Expired"),
			    json_str_or(obj, "message", ""));
			cJSON_Delete(obj);
			w->gone = 1;
			return CAIRN_EGONE;
		}
		/* the server ends the stream after it: back off, then resume */
		w->error_code = code >= 400 ? (int)code : 500;
		snprintf(w->error_msg, sizeof w->error_msg, "%s: %s",
		    json_str_or(obj, "reason", "InternalError"),
		    json_str_or(obj, "message", ""));
	} else {
		rv = json_str(obj, "metadata.resourceVersion");
		if (rv != NULL && *rv != '\0') {
			free(w->rv);
			w->rv = xstrdup(rv);
		}
	}
	rc = w->fn(w->arg, t, obj);
	if (rc != KUBE_TAKE)
		cJSON_Delete(obj);
	if (rc != 0 && rc != KUBE_TAKE) {
		w->cb_stopped = 1;
		w->cb_rc = rc;
		return rc;
	}
	return 0;
}

static int
watch_sink(void *arg, const char *p, size_t n)
{
	struct wst *w = arg;

	return jsplit_feed(&w->js, p, n, on_event, w);
}

/* Errors after which a reconnecting watch tries again. */
static int
transient(int rc)
{
	return rc == CAIRN_ENET || rc == CAIRN_ETIMEOUT ||
	    rc == CAIRN_ESERVER || rc == CAIRN_EBUSY || rc == CAIRN_EPROTO;
}

int
kube_watch(struct kube *k, const struct kube_gvr *r, const char *ns,
    const struct kube_watch_opts *opts, kube_event_fn fn, void *arg,
    char **rv_out, struct cairn_err *err)
{
	struct kube_watch_opts o;
	struct kube_call c;
	struct wst w;
	struct buf q;
	char *base;
	int rc, failures = 0, timeout_s;
	int64_t delay;

	if (rv_out != NULL)
		*rv_out = NULL;
	if (opts != NULL)
		o = *opts;
	else
		memset(&o, 0, sizeof o);
	if (r == NULL || r->version == NULL || r->resource == NULL)
		return cairn_err_set(err, CAIRN_EINVAL,
		    "watch: version and resource are required");
	timeout_s = o.timeout_s > 0 ? o.timeout_s : WATCH_DEFAULT_TIMEOUT_S;
	memset(&w, 0, sizeof w);
	w.fn = fn;
	w.arg = arg;
	w.err = err;
	w.rv = o.resource_version && *o.resource_version ?
	    xstrdup(o.resource_version) : NULL;
	jsplit_init(&w.js, CAIRN_CAP_API_BODY);
	base = kube_path(r, ns, NULL, NULL);
	buf_init(&q, 64u << 10);

	for (;;) {
		buf_reset(&q);
		buf_printf(&q, "%s?watch=1", base);
		kube_query_add(&q, "resourceVersion", w.rv);
		if (o.bookmarks)
			buf_puts(&q, "&allowWatchBookmarks=true");
		buf_printf(&q, "&timeoutSeconds=%d", timeout_s);
		kube_query_add(&q, "labelSelector", o.label_selector);
		kube_query_add(&q, "fieldSelector", o.field_selector);
		jsplit_reset(&w.js);
		w.events = 0;
		w.error_code = 0;
		memset(&c, 0, sizeof c);
		c.method = "GET";
		c.path = buf_cstr(&q);
		c.idempotent = 1;
		c.no_retry = 1;
		c.watch = 1;
		c.timeout_us = (int64_t)(timeout_s + WATCH_GRACE_S) *
		    TIME_US_PER_SEC;
		c.stop = o.stop;
		c.sink = watch_sink;
		c.sink_arg = &w;
		rc = kube_call_do(k, &c, err);
		kube_call_done(&c);
		if (w.cb_stopped) {
			rc = w.cb_rc;
			break;
		}
		if (w.gone || rc == CAIRN_EGONE) {
			rc = CAIRN_EGONE;
			if (w.gone)
				kube_status_set(410, rc, w.gone_reason,
				    w.gone_msg, -1);
			if (err != NULL && err->code != CAIRN_EGONE)
				cairn_err_set(err, rc, "watch %s: gone", base);
			break;
		}
		if (rc == CAIRN_ECANCELED)
			break;
		if (rc == 0 && w.js.active) {
			/* The stream ended inside an event: a drop. */
			rc = cairn_err_set(err, CAIRN_ENET, "watch %s: stream "
			    "ended inside an event", base);
		}
		if (rc == 0 && w.error_code != 0) {
			/* an ERROR event (not 410): a failure, not an end */
			rc = cairn_err_set(err, kube_http_rc(w.error_code,
			    NULL), "watch %s: ERROR event (%d) %s", base,
			    w.error_code, w.error_msg);
		}
		if (!o.reconnect)
			break;
		if (rc == 0) {
			failures = 0;
			log_debug("watch %s ended after %llu events; resuming "
			    "from %s", base, (unsigned long long)w.events,
			    w.rv ? w.rv : "(now)");
			delay = 0;
		} else if (transient(rc)) {
			/* events before a drop show the server works; an
			 * ERROR event does not */
			if (w.events > 0 && w.error_code == 0)
				failures = 0;
			delay = (int64_t)100000 << (failures < 7 ? failures :
			    7);
			if (delay > WATCH_BACKOFF_MAX_US)
				delay = WATCH_BACKOFF_MAX_US;
			delay = delay / 2 + (int64_t)rand_below(
			    (uint64_t)delay / 2 + 1);
			failures++;
			log_info("watch %s: %s; reconnecting from %s in %lld ms",
			    base, err ? err->msg : cairn_strerror(rc),
			    w.rv ? w.rv : "(now)", (long long)(delay / 1000));
		} else {
			break;
		}
		if (delay > 0)
			time_sleep_us(delay, o.stop);
		if (o.stop != NULL && *o.stop) {
			rc = cairn_err_set(err, CAIRN_ECANCELED,
			    "watch %s: canceled", base);
			break;
		}
	}
	if (rv_out != NULL)
		*rv_out = w.rv;
	else
		free(w.rv);
	jsplit_free(&w.js);
	free(base);
	buf_free(&q);
	return rc;
}

/* ---- the informer's cache: string-keyed hash map ---- */

struct ent {
	char *key;		/* "ns/name", owned */
	cJSON *obj;		/* owned */
	struct ent *next;
};

struct cache {
	struct ent **b;
	size_t nb;
	size_t n;
};

static uint64_t
hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	while (*s != '\0') {
		h ^= (unsigned char)*s++;
		h *= 1099511628211ULL;
	}
	return h;
}

static void
cache_init(struct cache *c)
{
	c->nb = 64;
	c->b = xcalloc(c->nb, sizeof *c->b);
	c->n = 0;
}

static void
cache_free(struct cache *c)
{
	struct ent *e, *nx;
	size_t i;

	for (i = 0; i < c->nb; i++) {
		for (e = c->b[i]; e != NULL; e = nx) {
			nx = e->next;
			free(e->key);
			cJSON_Delete(e->obj);
			free(e);
		}
	}
	free(c->b);
	c->b = NULL;
	c->nb = c->n = 0;
}

static struct ent **
cache_slot(struct cache *c, const char *key)
{
	struct ent **p = &c->b[hash_str(key) % c->nb];

	while (*p != NULL && strcmp((*p)->key, key) != 0)
		p = &(*p)->next;
	return p;
}

static cJSON *
cache_get(struct cache *c, const char *key)
{
	struct ent **p = cache_slot(c, key);

	return *p ? (*p)->obj : NULL;
}

static void
cache_grow(struct cache *c)
{
	struct ent **nb, *e, *nx;
	size_t i, n = c->nb * 2;

	nb = xcalloc(n, sizeof *nb);
	for (i = 0; i < c->nb; i++) {
		for (e = c->b[i]; e != NULL; e = nx) {
			nx = e->next;
			e->next = nb[hash_str(e->key) % n];
			nb[hash_str(e->key) % n] = e;
		}
	}
	free(c->b);
	c->b = nb;
	c->nb = n;
}

/* Put obj (taken) under key; returns the previous object (owned) or NULL. */
static cJSON *
cache_put(struct cache *c, const char *key, cJSON *obj)
{
	struct ent **p = cache_slot(c, key), *e;
	cJSON *old;

	if (*p != NULL) {
		old = (*p)->obj;
		(*p)->obj = obj;
		return old;
	}
	e = xcalloc(1, sizeof *e);
	e->key = xstrdup(key);
	e->obj = obj;
	*p = e;
	c->n++;
	if (c->n > c->nb)
		cache_grow(c);
	return NULL;
}

/* Remove key; returns its object (owned) or NULL. */
static cJSON *
cache_del(struct cache *c, const char *key)
{
	struct ent **p = cache_slot(c, key), *e;
	cJSON *obj;

	if (*p == NULL)
		return NULL;
	e = *p;
	*p = e->next;
	obj = e->obj;
	free(e->key);
	free(e);
	c->n--;
	return obj;
}

static char *
obj_key(const cJSON *obj)
{
	return xasprintf("%s/%s", json_str_or(obj, "metadata.namespace", ""),
	    json_str_or(obj, "metadata.name", ""));
}

/* ---- the informer ---- */

struct kube_informer {
	struct kube *k;
	char *group, *version, *resource, *ns;
	char *label_selector, *field_selector;
	int page_size, watch_timeout_s;
	struct kube_informer_cbs cbs;
	void *arg;

	pthread_mutex_t lock;	/* guards cache (writes by the run thread) */
	struct cache cache;
	struct cache fresh;	/* being filled by a relist (run thread only) */
	atomic_int stop;
	atomic_int synced;
	pthread_t thread;
	int started;
	int run_rc;
	struct cairn_err run_err;
};

int
kube_informer_new(struct kube *k, const struct kube_gvr *r, const char *ns,
    const struct kube_informer_opts *opts,
    const struct kube_informer_cbs *cbs, void *arg,
    struct kube_informer **out, struct cairn_err *err)
{
	struct kube_informer *inf;

	*out = NULL;
	if (r == NULL || r->version == NULL || r->resource == NULL)
		return cairn_err_set(err, CAIRN_EINVAL,
		    "informer: version and resource are required");
	inf = xcalloc(1, sizeof *inf);
	inf->k = k;
	inf->group = xstrdup(r->group ? r->group : "");
	inf->version = xstrdup(r->version);
	inf->resource = xstrdup(r->resource);
	inf->ns = xstrdup(ns);
	if (opts != NULL) {
		inf->label_selector = xstrdup(opts->label_selector);
		inf->field_selector = xstrdup(opts->field_selector);
		inf->page_size = opts->page_size;
		inf->watch_timeout_s = opts->watch_timeout_s;
	}
	if (cbs != NULL)
		inf->cbs = *cbs;
	inf->arg = arg;
	pthread_mutex_init(&inf->lock, NULL);
	cache_init(&inf->cache);
	*out = inf;
	return 0;
}

static int
relist_item(void *arg, cJSON *item)
{
	struct kube_informer *inf = arg;
	char *key = obj_key(item);
	cJSON *old;

	old = cache_put(&inf->fresh, key, item);
	cJSON_Delete(old);
	free(key);
	return KUBE_TAKE;
}

static int
relist_restart(void *arg)
{
	struct kube_informer *inf = arg;

	cache_free(&inf->fresh);
	cache_init(&inf->fresh);
	return 0;
}

/* List everything into a fresh map, then diff it against the cache. */
static int
relist(struct kube_informer *inf, char *rv, size_t rvlen,
    struct cairn_err *err)
{
	struct kube_gvr g = KUBE_GVR(inf->group, inf->version, inf->resource);
	struct kube_list_opts lo;
	struct kube_list_info info;
	struct cache old;
	struct ent *e;
	size_t i;
	int rc;

	memset(&lo, 0, sizeof lo);
	lo.label_selector = inf->label_selector;
	lo.field_selector = inf->field_selector;
	lo.limit = inf->page_size;
	lo.restart_on_gone = 1;
	lo.on_restart = relist_restart;
	lo.stop = &inf->stop;
	cache_init(&inf->fresh);
	rc = kube_list(inf->k, &g, inf->ns, &lo, relist_item, inf, &info, err);
	if (rc != 0) {
		cache_free(&inf->fresh);
		return rc;
	}
	snprintf(rv, rvlen, "%s", info.resource_version);

	/* Swap in the new map, then report the differences. */
	pthread_mutex_lock(&inf->lock);
	old = inf->cache;
	inf->cache = inf->fresh;
	pthread_mutex_unlock(&inf->lock);
	memset(&inf->fresh, 0, sizeof inf->fresh);
	for (i = 0; i < inf->cache.nb; i++) {
		for (e = inf->cache.b[i]; e != NULL; e = e->next) {
			cJSON *o = cache_get(&old, e->key);

			if (o == NULL) {
				if (inf->cbs.on_add)
					inf->cbs.on_add(inf->arg, e->obj);
			} else if (strcmp(json_str_or(o,
			    "metadata.resourceVersion", ""), json_str_or(e->obj,
			    "metadata.resourceVersion", "")) != 0) {
				if (inf->cbs.on_update)
					inf->cbs.on_update(inf->arg, o, e->obj);
			}
		}
	}
	for (i = 0; i < old.nb; i++)
		for (e = old.b[i]; e != NULL; e = e->next)
			if (cache_get(&inf->cache, e->key) == NULL &&
			    inf->cbs.on_delete)
				inf->cbs.on_delete(inf->arg, e->obj);
	cache_free(&old);
	return 0;
}

static int
informer_event(void *arg, enum kube_event_type t, cJSON *obj)
{
	struct kube_informer *inf = arg;
	char *key;
	cJSON *old;

	if (t == KUBE_EV_BOOKMARK)
		return 0;
	if (t == KUBE_EV_ERROR) {
		log_warn("informer %s: watch error: %s", inf->resource,
		    json_str_or(obj, "message", "?"));
		return 0;
	}
	key = obj_key(obj);
	if (t == KUBE_EV_DELETED) {
		pthread_mutex_lock(&inf->lock);
		old = cache_del(&inf->cache, key);
		pthread_mutex_unlock(&inf->lock);
		free(key);
		if (inf->cbs.on_delete)
			inf->cbs.on_delete(inf->arg, old ? old : obj);
		cJSON_Delete(old);
		return 0;
	}
	pthread_mutex_lock(&inf->lock);
	old = cache_put(&inf->cache, key, obj);
	pthread_mutex_unlock(&inf->lock);
	free(key);
	if (old == NULL) {
		if (inf->cbs.on_add)
			inf->cbs.on_add(inf->arg, obj);
	} else {
		if (inf->cbs.on_update && strcmp(json_str_or(old,
		    "metadata.resourceVersion", ""), json_str_or(obj,
		    "metadata.resourceVersion", "")) != 0)
			inf->cbs.on_update(inf->arg, old, obj);
		cJSON_Delete(old);
	}
	return KUBE_TAKE;
}

static int
fatal_rc(int rc)
{
	return rc == CAIRN_EAUTH || rc == CAIRN_ENOTFOUND ||
	    rc == CAIRN_EINVAL || rc == CAIRN_EUNSUPPORTED;
}

int
kube_informer_run(struct kube_informer *inf, struct cairn_err *err)
{
	struct kube_gvr g = KUBE_GVR(inf->group, inf->version, inf->resource);
	struct kube_watch_opts wo;
	struct cairn_err e2 = CAIRN_ERR_INIT;
	char rv[64];
	int rc, failures = 0;
	int64_t delay;

	while (!inf->stop) {
		rc = relist(inf, rv, sizeof rv, &e2);
		if (rc == 0) {
			failures = 0;
			inf->synced = 1;
			if (inf->cbs.on_synced)
				inf->cbs.on_synced(inf->arg);
			memset(&wo, 0, sizeof wo);
			wo.label_selector = inf->label_selector;
			wo.field_selector = inf->field_selector;
			wo.resource_version = rv;
			wo.bookmarks = 1;
			wo.timeout_s = inf->watch_timeout_s;
			wo.reconnect = 1;
			wo.stop = &inf->stop;
			rc = kube_watch(inf->k, &g, inf->ns, &wo,
			    informer_event, inf, NULL, &e2);
			if (rc == CAIRN_EGONE) {
				log_info("informer %s: %s; relisting",
				    inf->resource, e2.msg);
				continue;
			}
		}
		if (rc == CAIRN_ECANCELED || inf->stop)
			break;
		if (fatal_rc(rc)) {
			log_error("informer %s: %s", inf->resource, e2.msg);
			return cairn_err_copy(err, &e2);
		}
		delay = (int64_t)200000 << (failures < 6 ? failures : 6);
		failures++;
		log_warn("informer %s: %s; again in %lld ms", inf->resource,
		    e2.msg, (long long)(delay / 1000));
		time_sleep_us(delay, &inf->stop);
	}
	return 0;
}

static void *
informer_thread(void *arg)
{
	struct kube_informer *inf = arg;

	util_thread_name("informer");

	inf->run_rc = kube_informer_run(inf, &inf->run_err);
	return NULL;
}

int
kube_informer_start(struct kube_informer *inf, struct cairn_err *err)
{
	int e;

	if (inf->started)
		return cairn_err_set(err, CAIRN_EINVAL,
		    "informer already started");
	e = pthread_create(&inf->thread, NULL, informer_thread, inf);
	if (e != 0)
		return cairn_err_errno(err, CAIRN_EFAIL, e,
		    "informer: pthread_create");
	inf->started = 1;
	return 0;
}

void
kube_informer_stop(struct kube_informer *inf)
{
	if (inf != NULL)
		inf->stop = 1;
}

int
kube_informer_synced(struct kube_informer *inf)
{
	return inf->synced;
}

cJSON *
kube_informer_get(struct kube_informer *inf, const char *ns,
    const char *name)
{
	char *key = xasprintf("%s/%s", ns ? ns : "", name);
	cJSON *o, *res = NULL;

	pthread_mutex_lock(&inf->lock);
	o = cache_get(&inf->cache, key);
	if (o != NULL)
		res = cJSON_Duplicate(o, 1);
	pthread_mutex_unlock(&inf->lock);
	free(key);
	return res;
}

size_t
kube_informer_count(struct kube_informer *inf)
{
	size_t n;

	pthread_mutex_lock(&inf->lock);
	n = inf->cache.n;
	pthread_mutex_unlock(&inf->lock);
	return n;
}

void
kube_informer_free(struct kube_informer *inf)
{
	if (inf == NULL)
		return;
	inf->stop = 1;
	if (inf->started)
		pthread_join(inf->thread, NULL);
	cache_free(&inf->cache);
	pthread_mutex_destroy(&inf->lock);
	free(inf->group);
	free(inf->version);
	free(inf->resource);
	free(inf->ns);
	free(inf->label_selector);
	free(inf->field_selector);
	free(inf);
}
