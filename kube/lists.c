/*
 * lists.c: several paged lists (and single objects) fetched at once and
 * delivered in order. Contract in kube.h ("Several lists at once").
 *
 * Why. A backup reads hundreds of collections (every resource, and with
 * a namespace filter every resource of every namespace), most of them
 * small or empty. One at a time, each costs a round trip during which
 * the API server and cairn both wait; a remote API server (5-20 ms away)
 * made backups several times slower than the bytes needed. Here the
 * collections are queued up front, in the order the caller will read
 * them, and fetched by `concurrency` threads, each working on the
 * earliest list that needs a page; the caller reads them in order, so
 * what it sees (and writes) is the same at any concurrency.
 *
 * Pages, items and chunks. A fetcher splits the page it streams into
 * items as it arrives (stream.c's lsplit: the one scan of the text,
 * which also notes whitespace and nesting depth) and packs them as
 * records, {length, whitespace, depth, text, NUL}, into chunks of about
 * LISTS_CHUNK bytes published to the page as they fill; the caller takes
 * chunks as they come and hands each record to struct lst (list.c),
 * which parses what its caller asked for. So the caller's thread does
 * not scan the bytes (the fetchers do, in parallel), a page is read
 * while it arrives (even a very large page passes through once, in
 * bounded memory), and the fetcher knows, from the page's envelope,
 * the next continue token, the resourceVersion and how many items the
 * list holds (this page's plus remainingItemCount: progress totals come
 * from the first pages, kube_lists_pending()). A chunk lives in memory
 * while the chunks in memory stay under mem_max, else in the lists'
 * spool (below), an unlinked temporary file read back with pread().
 * Bounds, all under the one mutex:
 *  - a list after the one being taken (the head) starts no page while
 *    `ahead` (bytes published, not taken, of every list) is over
 *    ahead_max;
 *  - a page ahead of the head that grows past ahead_max alone is
 *    dropped (its list `defer`s the page until it is the head): memory
 *    and disk stay bounded whatever one page holds;
 *  - the head's fetcher waits while more than half of mem_max of its own
 *    bytes are waiting for the caller (backpressure, as a streamed list).
 * So memory is at most mem_max of chunks plus, per fetcher, a chunk
 * being filled and the item being split, and disk at most ahead_max plus
 * the pages in flight.
 *
 * Errors and restarts. A page whose fetch breaks is sent again by
 * kube_call_do(): its chunks not yet taken are dropped, the split starts
 * over and the page's `gen` is bumped; the caller, seeing a new gen,
 * starts the page over and skips by key what it had delivered
 * (lst_page_rewind). A 410 on a later page
 * (KUBE_GONE_RESUME) goes on at the Status's inconsistent token or the
 * first page, the page marked after_gone so the caller skips by key. Any
 * other failure ends the list with that error, delivered to the caller
 * after the pages fetched before it.
 *
 * Threads: `concurrency` fetchers (fetch_main) and the caller. Units,
 * pages and counters are under mu; a chunk taken by the caller is its
 * own. `work` wakes fetchers, `data` the caller and a waiting head
 * fetcher.
 */
#include "config.h"
#include "kube/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"

#define LISTS_CHUNK (64u << 10)		/* bytes published at once */
#define LISTS_REC_HDR 8			/* u32 length, u16 depth, u8 ws, pad */
#define LISTS_MAX_GONE 3		/* 410s in a row before giving up */
#define LISTS_CONCURRENCY_MAX 64

/*
 * The spool: one unlinked temporary file holds every chunk spooled (a
 * file per page cost a create, an unlink and a close each, with ext4's
 * inode allocation: about 5% of a 100k backup's CPU; punching holes as
 * chunks were taken cost nearly as much). The file is cut in slots of
 * LISTS_SLOT bytes; a chunk (LISTS_CHUNK and one record at most, unless
 * a record is larger) takes a free slot, the one freed last first, or a
 * new one at the end, and gives it back when it is taken or dropped, so
 * its blocks and page cache are written again instead of freed and
 * allocated. A larger chunk goes at the end and its space is given back
 * by punching a hole. So the file holds at most the most chunks ever
 * spooled at once (what `ahead` bounds) in slots, with only the bytes
 * written allocated. Under mu.
 */
#define LISTS_SLOT (2 * LISTS_CHUNK)
#define LISTS_SPOOL_ALIGN 4096

struct lspool {
	int fd;				/* -1: not opened yet */
	int64_t end;			/* the file's slots and larger chunks */
	int64_t *free;			/* offsets of free slots, a stack */
	size_t nfree, afree;
};

struct lchunk {
	struct lchunk *next;
	char *mem;			/* NULL: in the spool at off */
	int spooled;			/* in the spool at off */
	size_t len;
	int64_t off;
	unsigned gen;			/* the attempt that fetched it */
};

struct lpage {
	struct lpage *next;
	char *tok;			/* token that fetches it; NULL: first */
	char api_version[128];		/* the list's, before its items */
	char kind[128];
	char rv[64];			/* its resourceVersion, once complete */
	int after_gone;			/* after a 410: skip by key */
	unsigned gen;			/* the current attempt */
	struct lchunk *first, *last;	/* published, not taken */
	int complete;			/* every chunk published */
	int failed;			/* ... and the fetch failed: u->rc */
};

enum { LU_LIST, LU_GET };

struct lunit {
	size_t idx;
	int kind;
	struct kube_gvr r;		/* owned strings */
	char *base;			/* collection or object path */
	struct kube_list_opts o;	/* strings owned */
	int limit;
	int flags;
	/* under mu */
	int64_t count;			/* -1 unknown */
	int taking;			/* the caller reads it */
	char *next;			/* token of the next page; NULL: first */
	int fetched;			/* a page was fetched */
	int busy;			/* a fetcher works on it */
	int done;			/* no more pages to fetch */
	int defer;			/* fetch only as the head */
	int dropped;			/* not wanted any more */
	int rc;				/* how fetching ended; 0 fine */
	struct cairn_err err;
	int gone_streak;
	int restarts;
	struct lpage *pfirst, *plast;
	size_t bytes;			/* published, not taken */
};

struct kube_lists {
	struct kube *k;
	struct kube_lists_opts o;
	pthread_mutex_t mu;
	pthread_cond_t work;
	pthread_cond_t data;
	pthread_t *th;
	int nth;
	struct lunit **u;
	size_t nu, au;
	size_t head;			/* next unit to take */
	size_t scan;			/* units before it fetch nothing more */
	size_t mem;			/* bytes of chunks in memory */
	size_t ahead;			/* bytes published, not taken */
	int64_t pending;		/* counts of KUBE_LISTS_COUNT units */
	int bp_waiting;			/* head fetchers held by publish() */
	atomic_int quit;
	struct lspool spool;
	char *rbuf;			/* the caller's, for spooled chunks */
	size_t rcap;
};

/* ---- units, pages, chunks (under mu) ---- */

/* Chunk c leaves the spool: its slot is free, or its space a hole. */
static void
spool_release(struct kube_lists *m, const struct lchunk *c)
{
	struct lspool *sp = &m->spool;

	if (c->len > LISTS_SLOT) {
		/* a failure only leaves the blocks until the file closes */
		(void)fallocate(sp->fd, FALLOC_FL_PUNCH_HOLE |
		    FALLOC_FL_KEEP_SIZE, (off_t)c->off, (off_t)((c->len +
		    LISTS_SPOOL_ALIGN - 1) & ~(size_t)(LISTS_SPOOL_ALIGN - 1)));
		return;
	}
	if (sp->nfree == sp->afree) {
		sp->afree = sp->afree ? 2 * sp->afree : 64;
		sp->free = xreallocarray(sp->free, sp->afree,
		    sizeof *sp->free);
	}
	sp->free[sp->nfree++] = c->off;
}

static void
chunk_free(struct kube_lists *m, struct lunit *u, struct lchunk *c)
{
	if (c->mem != NULL)
		m->mem -= c->len;
	else if (c->spooled)
		spool_release(m, c);
	m->ahead -= c->len;
	u->bytes -= c->len;
	free(c->mem);
	free(c);
}

/* Drop the chunks of p not taken yet. */
static void
page_drop_chunks(struct kube_lists *m, struct lunit *u, struct lpage *p)
{
	struct lchunk *c, *n;

	for (c = p->first; c != NULL; c = n) {
		n = c->next;
		chunk_free(m, u, c);
	}
	p->first = p->last = NULL;
}

static void
page_free(struct kube_lists *m, struct lunit *u, struct lpage *p)
{
	page_drop_chunks(m, u, p);
	free(p->tok);
	free(p);
}

static void
unit_unlink_page(struct lunit *u, struct lpage *p)
{
	struct lpage **pp = &u->pfirst;

	while (*pp != p)
		pp = &(*pp)->next;
	*pp = p->next;
	if (u->plast == p) {
		u->plast = NULL;
		for (struct lpage *q = u->pfirst; q != NULL; q = q->next)
			u->plast = q;
	}
}

static void
unit_free(struct kube_lists *m, struct lunit *u)
{
	struct lpage *p, *n;

	if (u == NULL)
		return;
	for (p = u->pfirst; p != NULL; p = n) {
		n = p->next;
		page_free(m, u, p);
	}
	free((char *)u->r.group);
	free((char *)u->r.version);
	free((char *)u->r.resource);
	free(u->base);
	free((char *)u->o.label_selector);
	free((char *)u->o.field_selector);
	free((char *)u->o.resource_version);
	free((char *)u->o.continue_token);
	free(u->next);
	free(u);
}

/* The earliest unit a fetcher may work on, or NULL. */
static struct lunit *
pick(struct kube_lists *m)
{
	size_t i;

	while (m->scan < m->nu && (m->u[m->scan] == NULL ||
	    m->u[m->scan]->done))
		m->scan++;
	for (i = m->scan > m->head ? m->scan : m->head; i < m->nu; i++) {
		struct lunit *u = m->u[i];

		if (u == NULL || u->busy || u->done)
			continue;
		if (i == m->head)
			return u;
		if (m->ahead >= m->o.ahead_max)
			return NULL;	/* nothing ahead now */
		if (!u->defer)
			return u;
	}
	return NULL;
}

/* ---- the fetcher ---- */

struct fetch {
	struct kube_lists *m;
	struct lunit *u;
	struct lpage *p;
	unsigned gen;			/* of the attempt being streamed */
	struct lsplit ls;		/* a list page into items */
	struct jsplit js;		/* a GET's object */
	struct buf stage;		/* records of the chunk being filled */
	uint64_t page_bytes;		/* of this attempt */
	int64_t items;			/* ... split out */
	struct buf q;			/* the request's path and query */
	int deferred;			/* publish() gave the page up */
};

/* Where chunk c goes in the spool, opened on first need (mu held). */
static int
spool_place(struct kube_lists *m, struct lchunk *c)
{
	struct lspool *sp = &m->spool;

	if (sp->fd < 0 && (sp->fd = util_tmpfd(m->o.spool_dir, "list")) < 0)
		return CAIRN_EIO;
	if (c->len <= LISTS_SLOT && sp->nfree > 0) {
		c->off = sp->free[--sp->nfree];
	} else {
		c->off = sp->end;
		sp->end += c->len <= LISTS_SLOT ? LISTS_SLOT : (int64_t)((c->len +
		    LISTS_SPOOL_ALIGN - 1) & ~(size_t)(LISTS_SPOOL_ALIGN - 1));
	}
	c->spooled = 1;
	return 0;
}

/*
 * Publish the staged bytes as a chunk of the page (memory or spool),
 * then apply the bounds: the head's fetcher waits while its bytes pile
 * up; a page ahead that outgrew ahead_max is given up (CAIRN_EBUSY).
 * CAIRN_ECANCELED when the unit is dropped or the lists freed.
 */
static int
publish(struct fetch *f)
{
	struct kube_lists *m = f->m;
	struct lunit *u = f->u;
	struct lchunk *c;
	int in_mem, rc = 0;

	if (f->stage.len == 0)
		return 0;
	c = xcalloc(1, sizeof *c);
	c->len = f->stage.len;
	c->gen = f->gen;
	pthread_mutex_lock(&m->mu);
	in_mem = m->mem + c->len <= m->o.mem_max;
	if (in_mem)
		m->mem += c->len;	/* reserved */
	else if (spool_place(m, c) < 0)
		rc = CAIRN_EIO;
	pthread_mutex_unlock(&m->mu);
	if (rc == 0 && in_mem) {
		c->mem = xmalloc(c->len);
		memcpy(c->mem, f->stage.data, c->len);
	} else if (rc == 0 && util_pwrite_all(m->spool.fd, f->stage.data, c->len,
	    c->off) < 0) {
		rc = CAIRN_EIO;
	}
	buf_reset(&f->stage);
	pthread_mutex_lock(&m->mu);
	if (rc < 0 || m->quit || u->dropped) {
		if (in_mem)
			m->mem -= c->len;
		else if (c->spooled)
			spool_release(m, c);
		free(c->mem);
		free(c);
		if (rc == 0 && (m->quit || u->dropped))
			rc = CAIRN_ECANCELED;
		pthread_mutex_unlock(&m->mu);
		return rc;
	}
	if (f->p->last != NULL)
		f->p->last->next = c;
	else
		f->p->first = c;
	f->p->last = c;
	m->ahead += c->len;
	u->bytes += c->len;
	pthread_cond_broadcast(&m->data);
	for (;;) {
		if (m->quit || u->dropped) {
			rc = CAIRN_ECANCELED;
			break;
		}
		if (u->idx != m->head) {
			if (f->page_bytes > m->o.ahead_max)
				rc = CAIRN_EBUSY;	/* deferred */
			break;
		}
		if (u->bytes <= m->o.mem_max / 2)
			break;
		m->bp_waiting++;
		pthread_cond_wait(&m->data, &m->mu);
		m->bp_waiting--;
	}
	if (rc == CAIRN_EBUSY)
		f->deferred = 1;
	pthread_mutex_unlock(&m->mu);
	return rc;
}

/* An item split out of the page: a record of the chunk being filled. */
static int
fetch_item(void *arg, const char *text, size_t len)
{
	struct fetch *f = arg;
	const struct jsplit *js = f->u->kind == LU_GET ? &f->js : &f->ls.item;
	unsigned char hdr[LISTS_REC_HDR];
	uint32_t n = (uint32_t)len;
	uint16_t depth = js->maxdepth > 65535 ? 65535 : (uint16_t)js->maxdepth;
	static const char zeros[8];

	if (f->items++ == 0 && f->u->kind == LU_LIST) {
		/* the caller reads these before the first record */
		snprintf(f->p->api_version, sizeof f->p->api_version, "%s",
		    f->ls.api_version);
		snprintf(f->p->kind, sizeof f->p->kind, "%s", f->ls.kind);
	}
	memcpy(hdr, &n, 4);
	memcpy(hdr + 4, &depth, 2);
	hdr[6] = (unsigned char)(js->ws != 0);
	hdr[7] = 0;
	if (buf_append(&f->stage, hdr, sizeof hdr) < 0 ||
	    buf_append(&f->stage, text, len) < 0 ||
	    buf_append(&f->stage, zeros, 8 - (len & 7)) < 0)
		return CAIRN_ETOOBIG;
	if (f->stage.len >= LISTS_CHUNK)
		return publish(f);
	return 0;
}

static int
fetch_sink(void *arg, const char *p, size_t n)
{
	struct fetch *f = arg;

	f->page_bytes += n;
	if (f->u->kind == LU_GET)
		return jsplit_feed(&f->js, p, n, fetch_item, f);
	return lsplit_feed(&f->ls, p, n, fetch_item, f);
}

/* Start an attempt at the page: nothing split, nothing staged. */
static void
fetch_reset(struct fetch *f)
{
	lsplit_reset(&f->ls);
	jsplit_reset(&f->js);
	buf_reset(&f->stage);
	f->page_bytes = 0;
	f->items = 0;
	f->deferred = 0;
}

/* The fetch starts over (a retry): what it published is void. */
static int
fetch_rewind(void *arg)
{
	struct fetch *f = arg;
	struct kube_lists *m = f->m;

	pthread_mutex_lock(&m->mu);
	page_drop_chunks(m, f->u, f->p);
	f->gen = ++f->p->gen;
	pthread_cond_broadcast(&m->data);
	pthread_mutex_unlock(&m->mu);
	fetch_reset(f);
	return 0;
}

/* The unit's fetch ended (mu held): no more pages, with rc. */
static void
unit_end(struct lunit *u, int rc, const struct cairn_err *err)
{
	u->done = 1;
	if (rc != 0 && u->rc == 0) {
		u->rc = rc;
		if (err != NULL)
			cairn_err_copy(&u->err, err);
	}
}

/*
 * A list page was fetched whole: its envelope (mu not held). 0 with
 * *next (owned, NULL on the last page), *remain (-1 unknown) and the
 * page's rv set, or CAIRN_EPROTO with err.
 */
static int
page_envelope(struct fetch *f, char **next, int64_t *remain,
    struct cairn_err *err)
{
	cJSON *env = lsplit_finish(&f->ls, err);
	const cJSON *rem;
	const char *c;

	*next = NULL;
	*remain = -1;
	if (env == NULL)
		return cairn_err_prefix(err, "list %s", f->u->base);
	c = json_str(env, "metadata.continue");
	if (c != NULL && *c != '\0')
		*next = xstrdup(c);
	rem = json_get(env, "metadata.remainingItemCount");
	if (cJSON_IsNumber(rem) && rem->valuedouble >= 0)
		*remain = (int64_t)rem->valuedouble;
	snprintf(f->p->rv, sizeof f->p->rv, "%s", json_str_or(env,
	    "metadata.resourceVersion", ""));
	cJSON_Delete(env);
	return 0;
}

/* A page was fetched whole (mu held): where the list goes on. */
static void
page_fetched(struct kube_lists *m, struct fetch *f, char *next,
    int64_t remain)
{
	struct lunit *u = f->u;

	f->p->complete = 1;
	u->gone_streak = 0;
	if (u->kind == LU_GET) {
		unit_end(u, 0, NULL);
		return;
	}
	/* what the list holds, from its first page */
	if (!u->fetched && f->p->tok == NULL && (next == NULL || remain >= 0)) {
		u->count = f->items + (next != NULL ? remain : 0);
		if ((u->flags & KUBE_LISTS_COUNT) && !u->taking)
			m->pending += u->count;
	}
	u->fetched = 1;
	free(u->next);
	u->next = next;
	if (next == NULL)
		unit_end(u, 0, NULL);
}

/*
 * Fetch one page of u (mu held on entry and exit; not held while the
 * request runs).
 */
static void
fetch_page(struct kube_lists *m, struct fetch *f, struct lunit *u)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct kube_call c;
	struct lpage *p = xcalloc(1, sizeof *p);
	char *gone = NULL, *next = NULL;
	int64_t remain = -1;
	int rc;

	p->tok = u->next != NULL ? xstrdup(u->next) : NULL;
	if (u->plast != NULL)
		u->plast->next = p;
	else
		u->pfirst = p;
	u->plast = p;
	u->busy = 1;
	/*
	 * Fetchers wake one at a time: the one that takes work wakes the
	 * next while more is there. Waking all idle fetchers at every page's
	 * end woke (with 8 of them and two lists) six threads per page for
	 * nothing, each taking mu against the walk.
	 */
	if (pick(m) != NULL)
		pthread_cond_signal(&m->work);
	f->u = u;
	f->p = p;
again:
	f->gen = p->gen;
	fetch_reset(f);
	rc = 0;
	if (u->kind == LU_LIST)
		rc = kube_list_query(&f->q, u->base, u->limit, &u->o, p->tok,
		    &err);
	else {
		buf_reset(&f->q);
		buf_puts(&f->q, u->base);
	}
	pthread_mutex_unlock(&m->mu);
	memset(&c, 0, sizeof c);
	if (rc == 0) {
		c.method = "GET";
		c.path = buf_cstr(&f->q);
		c.idempotent = 1;
		c.idle_timeout = 1;
		c.stop = &m->quit;
		c.sink = fetch_sink;
		c.rewind = fetch_rewind;
		c.sink_arg = f;
		rc = kube_call_do(m->k, &c, &err);
		if (rc == 0 && u->kind == LU_LIST)
			rc = page_envelope(f, &next, &remain, &err);
		else if (rc == 0 && f->js.active)
			rc = cairn_err_set(&err, CAIRN_EPROTO, "%s: the reply "
			    "ends inside its object", u->base);
		if (rc == 0)
			rc = publish(f);
		if (rc == CAIRN_EGONE && u->kind == LU_LIST)
			gone = kube_list_gone_token(&c.reply);
		kube_call_done(&c);
	}
	pthread_mutex_lock(&m->mu);
	if (rc != 0)
		FREE_NULL(next);
	if (m->quit || u->dropped) {
		free(gone);
		free(next);
		u->busy = 0;
		unit_end(u, CAIRN_ECANCELED, NULL);
		if (u->dropped)		/* retired meanwhile: ours to free */
			unit_free(m, u);
		pthread_cond_broadcast(&m->data);
		return;
	}
	if (rc == 0) {
		page_fetched(m, f, next, remain);
	} else if (rc == CAIRN_EGONE && u->kind == LU_LIST && p->tok != NULL &&
	    u->o.restart_on_gone == KUBE_GONE_RESUME &&
	    u->gone_streak < LISTS_MAX_GONE) {
		/* go on past the last item delivered, on the same page */
		log_info("list %s: continue token expired; going on %s, past "
		    "the last item delivered", u->base, gone != NULL ?
		    "at the API server's latest state" : "with a new list");
		u->gone_streak++;
		u->restarts++;
		page_drop_chunks(m, u, p);
		free(p->tok);
		p->tok = gone;
		gone = NULL;
		p->after_gone = 1;
		p->gen++;
		pthread_cond_broadcast(&m->data);
		goto again;
	} else if (rc == CAIRN_ENOTFOUND && u->kind == LU_GET) {
		page_drop_chunks(m, u, p);
		p->complete = 1;	/* no such object: nothing */
		unit_end(u, 0, NULL);
	} else if (rc == CAIRN_EBUSY && f->deferred) {
		/* too big to hold ahead: again once it is the head */
		page_drop_chunks(m, u, p);
		if (u->taking) {	/* it is now: the caller is on it */
			p->gen++;
			pthread_cond_broadcast(&m->data);
			goto again;
		}
		unit_unlink_page(u, p);
		page_free(m, u, p);
		u->defer = 1;
	} else {
		if (rc == CAIRN_EGONE)
			cairn_err_prefix(&err, "list %s: continue token "
			    "expired; list again", u->base);
		else if (rc == CAIRN_EIO && c.sink_rc == CAIRN_EIO)
			cairn_err_set(&err, rc, "list %s: cannot spool a page "
			    "in %s", u->base, m->o.spool_dir != NULL ?
			    m->o.spool_dir : "$TMPDIR");
		p->complete = 1;
		p->failed = 1;
		unit_end(u, rc, &err);
	}
	free(gone);
	u->busy = 0;
	pthread_cond_broadcast(&m->data);
	/* no wake: this fetcher picks again at once, and passes it on */
}

static void *
fetch_main(void *arg)
{
	struct kube_lists *m = arg;
	struct fetch f;

	util_thread_name("list");

	memset(&f, 0, sizeof f);
	f.m = m;
	lsplit_init(&f.ls, CAIRN_CAP_API_BODY);
	jsplit_init(&f.js, CAIRN_CAP_API_BODY);
	buf_init(&f.stage, CAIRN_CAP_API_BODY + LISTS_CHUNK);
	buf_init(&f.q, 64u << 10);
	pthread_mutex_lock(&m->mu);
	for (;;) {
		struct lunit *u = NULL;

		while (!m->quit && (u = pick(m)) == NULL)
			pthread_cond_wait(&m->work, &m->mu);
		if (m->quit)
			break;
		fetch_page(m, &f, u);
	}
	pthread_mutex_unlock(&m->mu);
	lsplit_free(&f.ls);
	jsplit_free(&f.js);
	buf_free(&f.stage);
	buf_free(&f.q);
	return NULL;
}

/* ---- the caller ---- */

int
kube_lists_open(struct kube *k, const struct kube_lists_opts *o,
    struct kube_lists **out, struct cairn_err *err)
{
	struct kube_lists *m = xcalloc(1, sizeof *m);
	int n, rc = 0;

	*out = NULL;
	m->k = k;
	m->spool.fd = -1;
	if (o != NULL)
		m->o = *o;
	if (m->o.concurrency <= 0)
		m->o.concurrency = KUBE_LISTS_CONCURRENCY;
	if (m->o.concurrency > LISTS_CONCURRENCY_MAX)
		m->o.concurrency = LISTS_CONCURRENCY_MAX;
	if (m->o.mem_max == 0)
		m->o.mem_max = KUBE_LISTS_MEM_MAX;
	if (m->o.mem_max < 2 * LISTS_CHUNK)
		m->o.mem_max = 2 * LISTS_CHUNK;
	if (m->o.ahead_max == 0)
		m->o.ahead_max = KUBE_LISTS_AHEAD_MAX;
	pthread_mutex_init(&m->mu, NULL);
	pthread_cond_init(&m->work, NULL);
	pthread_cond_init(&m->data, NULL);
	atomic_init(&m->quit, 0);
	m->th = xcalloc((size_t)m->o.concurrency, sizeof *m->th);
	for (n = 0; n < m->o.concurrency; n++) {
		rc = pthread_create(&m->th[n], NULL, fetch_main, m);
		if (rc != 0)
			break;
		m->nth++;
	}
	if (m->nth == 0) {
		kube_lists_free(m);
		return cairn_err_errno(err, CAIRN_EFAIL, rc, "list fetcher "
		    "thread");
	}
	*out = m;
	return 0;
}

static int
unit_add(struct kube_lists *m, int kind, const struct kube_gvr *r,
    const char *ns, const char *name, const struct kube_list_opts *opts,
    int flags)
{
	struct lunit *u = xcalloc(1, sizeof *u);
	int id;

	u->kind = kind;
	u->r.group = xstrdup(r->group != NULL ? r->group : "");
	u->r.version = xstrdup(r->version);
	u->r.resource = xstrdup(r->resource);
	u->base = kube_path(&u->r, ns, name, NULL);
	if (opts != NULL)
		u->o = *opts;
	u->o.label_selector = opts != NULL && opts->label_selector != NULL ?
	    xstrdup(opts->label_selector) : NULL;
	u->o.field_selector = opts != NULL && opts->field_selector != NULL ?
	    xstrdup(opts->field_selector) : NULL;
	u->o.resource_version = opts != NULL && opts->resource_version !=
	    NULL ? xstrdup(opts->resource_version) : NULL;
	u->o.continue_token = NULL;
	u->limit = u->o.limit == 0 ? 500 : u->o.limit;
	u->flags = flags;
	u->count = -1;
	if (kind == LU_LIST && opts != NULL && opts->continue_token != NULL &&
	    opts->continue_token[0] != '\0')
		u->next = xstrdup(opts->continue_token);
	pthread_mutex_lock(&m->mu);
	if (kind == LU_GET && (flags & KUBE_LISTS_COUNT)) {
		u->count = 1;		/* one object (unless it is gone) */
		m->pending++;
	}
	if (m->nu == m->au) {
		m->au = m->au ? 2 * m->au : 64;
		m->u = xreallocarray(m->u, m->au, sizeof *m->u);
	}
	u->idx = m->nu;
	id = (int)m->nu;
	m->u[m->nu++] = u;
	pthread_cond_signal(&m->work);
	pthread_mutex_unlock(&m->mu);
	return id;
}

int
kube_lists_add(struct kube_lists *m, const struct kube_gvr *r,
    const char *ns, const struct kube_list_opts *opts, int flags)
{
	return unit_add(m, LU_LIST, r, ns, NULL, opts, flags);
}

int
kube_lists_add_get(struct kube_lists *m, const struct kube_gvr *r,
    const char *ns, const char *name, const struct kube_list_opts *opts,
    int flags)
{
	return unit_add(m, LU_GET, r, ns, name, opts, flags);
}

/* Unit id is done with (taken or skipped): the next one is the head. */
static void
unit_retire(struct kube_lists *m, struct lunit *u)
{
	pthread_mutex_lock(&m->mu);
	u->dropped = 1;
	if (!u->taking && u->count >= 0 && (u->flags & KUBE_LISTS_COUNT))
		m->pending -= u->count;
	m->u[u->idx] = NULL;
	m->head = u->idx + 1;
	if (!u->busy)		/* else its fetcher frees it, at once */
		unit_free(m, u);
	pthread_cond_signal(&m->work);
	pthread_cond_broadcast(&m->data);
	pthread_mutex_unlock(&m->mu);
}

void
kube_lists_skip(struct kube_lists *m, int id)
{
	if (id < 0 || (size_t)id >= m->nu || m->u[id] == NULL)
		return;
	unit_retire(m, m->u[id]);
}

/*
 * Wait (mu held) until pred holds or the caller's stop is set; 100 ms
 * steps so stop is seen.
 */
static int
wait_data(struct kube_lists *m)
{
	struct timespec ts;

	if (m->o.stop != NULL && *m->o.stop)
		return CAIRN_ECANCELED;
	time_deadline(&ts, 100000);
	pthread_cond_timedwait(&m->data, &m->mu, &ts);
	return 0;
}

/* The bytes of chunk c (the caller's now): in memory or read back. */
static int
chunk_bytes(struct kube_lists *m, struct lchunk *c, const char **data)
{
	size_t got = 0;

	if (c->mem != NULL) {
		*data = c->mem;
		return 0;
	}
	if (m->rcap < c->len) {
		free(m->rbuf);
		m->rbuf = xmalloc(c->len);
		m->rcap = c->len;
	}
	while (got < c->len) {
		ssize_t n = pread(m->spool.fd, m->rbuf + got, c->len - got,
		    (off_t)(c->off + (int64_t)got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return CAIRN_EIO;
		got += (size_t)n;
	}
	*data = m->rbuf;
	return 0;
}

/* Each record of a chunk to the list's delivery. */
static int
chunk_records(struct lst *l, const char *data, size_t len)
{
	size_t off = 0;
	int rc = 0;

	while (rc == 0 && off + LISTS_REC_HDR <= len) {
		uint32_t n;
		uint16_t depth;

		memcpy(&n, data + off, 4);
		memcpy(&depth, data + off + 4, 2);
		if (off + LISTS_REC_HDR + n + 1 > len)
			return CAIRN_EPROTO;	/* cannot be: we wrote it */
		rc = lst_record(l, data + off + LISTS_REC_HDR, n,
		    data[off + 6] != 0, depth);
		off += LISTS_REC_HDR + n + (8 - (n & 7));
	}
	return rc;
}

/* The caller's side of list u. */
struct take {
	struct kube_lists *m;
	struct lunit *u;
	struct lst *l;
	void *arg;
	char *announced;		/* token given to on_page */
	int first;
	struct cairn_err *err;
};

static int
announce(struct take *t, const char *tok)
{
	const char *a = tok != NULL ? tok : "";

	if (!t->first && t->announced != NULL && strcmp(t->announced, a) == 0)
		return 0;
	t->first = 0;
	free(t->announced);
	t->announced = xstrdup(a);
	if (t->u->o.on_page != NULL)
		return t->u->o.on_page(t->arg, a);
	return 0;
}

/* Deliver page p of t's list, chunk by chunk as they come. */
static int
take_page(struct take *t, struct lpage *p)
{
	struct kube_lists *m = t->m;
	struct lunit *u = t->u;
	unsigned gen;
	char *tok;
	int after_gone, env = 0, rc = 0;

	pthread_mutex_lock(&m->mu);
	gen = p->gen;
	tok = p->tok != NULL ? xstrdup(p->tok) : NULL;
	after_gone = p->after_gone;
	pthread_mutex_unlock(&m->mu);
	if (after_gone)
		lst_skip_delivered(t->l);
	t->first = 1;
	rc = announce(t, tok);
	lst_page_begin(t->l);
	while (rc == 0) {
		struct lchunk *c;
		const char *data = NULL;

		pthread_mutex_lock(&m->mu);
		while (p->first == NULL && !p->complete && p->gen == gen &&
		    (rc = wait_data(m)) == 0)
			;
		if (rc == 0 && p->gen != gen) {
			/* sent again (or after a 410): start over, by key */
			gen = p->gen;
			free(tok);
			tok = p->tok != NULL ? xstrdup(p->tok) : NULL;
			pthread_mutex_unlock(&m->mu);
			lst_page_rewind(t->l);
			env = 0;
			rc = announce(t, tok);
			continue;
		}
		c = rc == 0 ? p->first : NULL;
		if (c == NULL) {
			pthread_mutex_unlock(&m->mu);
			if (rc < 0)
				cairn_err_set(t->err, rc, "list %s: canceled",
				    u->base);
			break;
		}
		p->first = c->next;
		if (p->first == NULL)
			p->last = NULL;
		/* the caller owns c now; its bytes leave the accounts */
		if (c->mem != NULL)
			m->mem -= c->len;
		/*
		 * Wake only those who can go on now: idle fetchers when
		 * `ahead` falls below its bound (pick() refuses lists ahead
		 * above it), the head's fetcher when its bytes fall to
		 * half of mem_max (publish()). A wake per chunk woke every
		 * idle fetcher for nothing, a futex call each, on this
		 * thread: the walk's.
		 */
		if (m->ahead >= m->o.ahead_max &&
		    m->ahead - c->len < m->o.ahead_max)
			pthread_cond_signal(&m->work);
		m->ahead -= c->len;
		u->bytes -= c->len;
		if (m->bp_waiting && u->bytes <= m->o.mem_max / 2)
			pthread_cond_broadcast(&m->data);
		if (!env) {	/* set before the page's first chunk went out */
			lst_page_env(t->l, p->api_version, p->kind);
			env = 1;
		}
		pthread_mutex_unlock(&m->mu);
		if (c->gen == gen) {
			rc = chunk_bytes(m, c, &data);
			if (rc < 0)
				cairn_err_set(t->err, rc, "list %s: reading a "
				    "spooled page back", u->base);
		}
		if (c->spooled) {	/* read: its slot is free now */
			pthread_mutex_lock(&m->mu);
			spool_release(m, c);
			pthread_mutex_unlock(&m->mu);
		}
		if (c->gen == gen && rc == 0)
			rc = chunk_records(t->l, data, c->len);
		free(c->mem);
		free(c);
	}
	pthread_mutex_lock(&m->mu);
	if (rc == 0 && p->failed) {
		rc = u->rc;
		cairn_err_copy(t->err, &u->err);
	} else if (rc == 0 && u->kind == LU_LIST) {
		lst_page_done(t->l, p->rv);
	}
	pthread_mutex_unlock(&m->mu);
	free(tok);
	return rc;
}

int
lists_take(struct kube_lists *m, int id, kube_item_fn fn,
    kube_item_text_fn tfn, void *arg, struct kube_list_info *info,
    struct cairn_err *err)
{
	struct kube_list_info info0;
	struct take t;
	struct lunit *u;
	int rc = 0;

	if (info == NULL)
		info = &info0;
	memset(info, 0, sizeof *info);
	pthread_mutex_lock(&m->mu);
	if (id < 0 || (size_t)id >= m->nu || m->u[id] == NULL ||
	    (size_t)id != m->head) {
		pthread_mutex_unlock(&m->mu);
		return cairn_err_set(err, CAIRN_EINVAL, "lists: %d is not the "
		    "next list", id);
	}
	u = m->u[id];
	u->taking = 1;
	if (u->count >= 0 && (u->flags & KUBE_LISTS_COUNT))
		m->pending -= u->count;
	pthread_cond_signal(&m->work);	/* the head may go ahead */
	pthread_cond_broadcast(&m->data);
	pthread_mutex_unlock(&m->mu);

	memset(&t, 0, sizeof t);
	t.m = m;
	t.u = u;
	t.arg = arg;
	t.err = err;
	t.l = lst_new(m->k, &u->r, &u->o, fn, tfn, arg, info, err);
	for (;;) {
		struct lpage *p;

		pthread_mutex_lock(&m->mu);
		while ((p = u->pfirst) == NULL && !(u->done && !u->busy) &&
		    (rc = wait_data(m)) == 0)
			;
		pthread_mutex_unlock(&m->mu);
		if (rc < 0) {
			cairn_err_set(err, rc, "list %s: canceled", u->base);
			break;
		}
		if (p == NULL) {	/* fetched to its end */
			pthread_mutex_lock(&m->mu);
			rc = u->rc;
			if (rc != 0)
				cairn_err_copy(err, &u->err);
			pthread_mutex_unlock(&m->mu);
			break;
		}
		rc = take_page(&t, p);
		if (rc != 0)
			break;
		pthread_mutex_lock(&m->mu);
		unit_unlink_page(u, p);
		page_free(m, u, p);
		pthread_mutex_unlock(&m->mu);
		if (m->o.stop != NULL && *m->o.stop) {
			rc = cairn_err_set(err, CAIRN_ECANCELED, "list %s: "
			    "canceled", u->base);
			break;
		}
	}
	pthread_mutex_lock(&m->mu);
	info->restarts = u->restarts;
	pthread_mutex_unlock(&m->mu);
	if (info->restarts > 0)
		log_info("list %s: its continue token expired %d time(s); it "
		    "went on past the last item delivered", u->base,
		    info->restarts);
	free(t.announced);
	lst_free(t.l);
	unit_retire(m, u);
	return rc;
}

int
kube_lists_take(struct kube_lists *m, int id, kube_item_text_fn fn,
    void *arg, struct kube_list_info *info, struct cairn_err *err)
{
	return lists_take(m, id, NULL, fn, arg, info, err);
}

int64_t
kube_lists_pending(struct kube_lists *m)
{
	int64_t n;

	pthread_mutex_lock(&m->mu);
	n = m->pending;
	pthread_mutex_unlock(&m->mu);
	return n;
}

void
kube_lists_wait_counted(struct kube_lists *m, int64_t timeout_us)
{
	int64_t end = time_mono_us() + timeout_us;

	pthread_mutex_lock(&m->mu);
	for (;;) {
		struct timespec ts;
		size_t i;

		for (i = m->head; i < m->nu; i++) {
			const struct lunit *u = m->u[i];

			if (u != NULL && (u->flags & KUBE_LISTS_COUNT) &&
			    u->kind == LU_LIST && !u->fetched && !u->done)
				break;
		}
		/*
		 * Nor while every fetcher waits for the caller to take the
		 * head's bytes (one fetcher, on a long head list): nothing
		 * more can be counted until the caller reads.
		 */
		if (i == m->nu || m->ahead >= m->o.ahead_max ||
		    m->bp_waiting >= m->nth ||
		    time_mono_us() >= end || (m->o.stop != NULL &&
		    *m->o.stop))
			break;
		time_deadline(&ts, 50000);
		pthread_cond_timedwait(&m->data, &m->mu, &ts);
	}
	pthread_mutex_unlock(&m->mu);
}

void
kube_lists_free(struct kube_lists *m)
{
	if (m == NULL)
		return;
	pthread_mutex_lock(&m->mu);
	atomic_store(&m->quit, 1);
	pthread_cond_broadcast(&m->work);
	pthread_cond_broadcast(&m->data);
	pthread_mutex_unlock(&m->mu);
	for (int i = 0; i < m->nth; i++)
		pthread_join(m->th[i], NULL);
	for (size_t i = 0; i < m->nu; i++)
		unit_free(m, m->u[i]);
	free(m->u);
	free(m->th);
	free(m->rbuf);
	if (m->spool.fd >= 0)
		close(m->spool.fd);
	free(m->spool.free);
	pthread_mutex_destroy(&m->mu);
	pthread_cond_destroy(&m->work);
	pthread_cond_destroy(&m->data);
	free(m);
}
