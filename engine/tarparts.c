/*
 * tarparts.c: tar entries from libarchive, gzip members from zlib, cut
 * into parts at the caller's boundaries. See tarparts.h for the contract.
 *
 * Data path: tarparts_add() -> libarchive (bytes_per_block 0, so nothing
 * is held back) -> archive_cb() copies the tar bytes into the batch being
 * filled -> a full batch is deflated (gzip-wrapped: windowBits 15 + 16)
 * and the output goes to sink->write(). Unthreaded, one gzip member runs
 * through a part: a part boundary runs Z_FINISH and deflateReset(), so
 * the next part starts a new member.
 *
 * Where the CPU goes (issue 7's benchmark, 100k small objects, two
 * entries each): deflate over the tar bytes, then libarchive. Hence:
 *  - Two libarchive writers share archive_cb: ustar for the common path
 *    (printable ASCII, <= 100 bytes: every item path of normal length),
 *    and pax_restricted, created on first need, for any other path (its
 *    pax header carries the path as UTF-8; no "hdrcharset" record, which
 *    GNU tar does not know and warns about on every such entry). The
 *    ustar writer does no locale conversion and no extended header: a
 *    512-byte header per entry where the pax writer wrote three blocks
 *    (pax header, its records, the ustar header), i.e. half the tar
 *    bytes to deflate and a quarter of libarchive's time. Tar entries are
 *    self-contained, so entries of the two writers interleave freely.
 *    Only the ustar writer's end-of-archive blocks end the tarball; the
 *    pax writer is closed first with its output dropped (mute).
 *  - Tar bytes reach deflate in batches (512 KiB) instead of one call per
 *    header, data and padding.
 *  - tarparts_start_thread(): deflate runs on compression threads while
 *    the caller lists, parses and adds the next entries, each batch a
 *    whole gzip member compressed by ISA-L's stateless deflate (level 2:
 *    on JSON about a quarter of libdeflate's time at its level 1, and a
 *    thirteenth on small objects' tar headers and padding; issues 26,
 *    27), through gzmember.c, which keeps ISA-L 2.30's output the same
 *    bytes for the same batch in every thread (part cuts follow
 *    compressed sizes, so the tarball's bytes depend on it).
 *  - The threads also make the tar of item entries from records of
 *    their path and data (TP_REC_ENTRY): libarchive's two headers an
 *    item had become the listing thread's largest cost.
 *
 * The compression threads. Each batch becomes a gzip member of its own,
 * so batches are independent and several threads compress several
 * batches at once; a gzip file may hold any number of members, and a
 * batch of 256 KiB starting with an empty window costs under 2% of
 * compressed size. nbatch slots: the caller fills one; full ones get the
 * next sequence number and go into a ring (queue) under mu; any thread
 * takes the oldest, compresses it into the slot's output buffer, and
 * then hands every finished slot to the sink in sequence order (tp_emit:
 * one thread at a time, the writing flag), noting the running total of
 * compressed bytes after each batch (csum), and puts the slots back on
 * the free stack. The caller blocks only when every slot is in flight
 * (bounded memory, backpressure from a slow sink). A part boundary cuts
 * when the part's batches up to cut_lag before the one being filled
 * reached part_size (tp_lagged_bytes: from csum, waiting until they are
 * written): a fixed rule on the batches' contents and the part size,
 * so where parts end is the same at any thread count and speed. begin()
 * and end() stay on the caller's thread, after tp_drain() waited until
 * every batch was handed over. A thread error is kept in trc/terr and merged into the
 * sticky rc by the caller at the next handoff, boundary or finish; after
 * an error, and when the writer is freed (drop), batches are still taken
 * and put back without being compressed or written, so a caller waiting
 * for a free slot is always woken.
 */
#include "config.h"
#include "engine/tarparts.h"

#include <archive.h>
#include <archive_entry.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/log.h"
#include "base/mem.h"
#include "base/util.h"
#include "engine/gzmember.h"

#define TP_OUTBUF (64u << 10)	/* deflate output chunk */
#define TP_BATCH (512u << 10)	/* tar bytes handed to deflate at once */
#define TP_TBATCH (256u << 10)	/* ... with threads: one gzip member each */
/*
 * Batches with threads: one being filled, one per thread being
 * compressed, one done waiting to be written. Each is TP_TBATCH of tar
 * and as much again for its gzip member, so 2 threads hold 2 MiB, not
 * the 4 MiB of a fixed 8 (issue 27's peak RSS), at the same speed.
 */
#define TP_NBATCH_SPARE 2
#define TP_NBATCH_MAX 64
#define TP_THREADS_MAX 64
/*
 * With threads, a part boundary looks at the compressed size of the
 * part's batches up to a lag of batches before the one being filled
 * (waiting for them if need be), never at what happens to be done: so
 * where parts end, and the bytes of the tarball, do not depend on how
 * many threads there are or how fast they went. The lag is one batch
 * per MiB of part size, at most TP_CUT_LAG: parts of the usual sizes end
 * at most that many batches late and their boundaries hardly ever wait;
 * small parts end where the batches say.
 */
#define TP_CUT_LAG 7
#define TP_CSUM_RING 256	/* > TP_NBATCH_MAX + TP_CUT_LAG */
#define TP_USTAR_PATH_MAX 100	/* ustar name field, no prefix split */
/*
 * With threads, a batch holds records rather than tar bytes: an item's
 * entry (a ustar path and data up to TP_DEFER_MAX) as its path and data,
 * which the compression thread that deflates the batch turns into tar
 * with a libarchive writer of its own (two headers an item were the
 * listing thread's largest cost), and runs of tar bytes made on the
 * caller's thread (other paths, bigger items, files, the end blocks).
 * A batch is handed on once its records stand for batch_size tar bytes,
 * an entry for the 512 + data rounded up to 512 that ustar writes: a
 * rule on the contents alone, as the part cuts need.
 */
#define TP_REC_ENTRY 'E'	/* u32 path bytes with NUL, u32 data bytes,
				   path, data */
#define TP_REC_RAW 'R'		/* u32 bytes, tar bytes */
#define TP_REC_HDR 9		/* an entry record's tag and lengths */
#define TP_RAW_HDR 5
#define TP_DEFER_MAX (16u << 10)
#define TP_FILL_SLACK (TP_REC_HDR + TP_USTAR_PATH_MAX + 1 + TP_DEFER_MAX)
/*
 * zlib level 1: deflate is most of a backup's CPU (Kubernetes JSON
 * compresses about as well at 1 as at 6, for a third of the time).
 */
#define TP_LEVEL Z_BEST_SPEED

struct tarparts {
	struct tarparts_sink sink;
	struct archive *ustar;		/* tar writer, ustar-safe paths */
	struct archive *pax;		/* tar writer, the rest (lazily) */
	struct archive *files;		/* full pax writer, entries given as
					   archive_entry (lazily) */
	int level;			/* zlib level */
	struct archive_entry *entry;	/* reused for every entry */
	z_stream z;
	int zinit;			/* deflateInit2 done */
	unsigned char *out;		/* TP_OUTBUF bytes */
	size_t part_size;
	int64_t mtime;
	int part;			/* open part number, 0 if none */
	int next_part;			/* number of the next part to open */
	int last_closed;
	uint64_t part_entries;
	/* compressed bytes, written by whichever thread deflates */
	_Atomic uint64_t part_bytes;	/* of the open part */
	_Atomic uint64_t total_bytes;
	int finished;
	int abandoned;			/* drop bytes: writer being freed */
	int mute;			/* drop bytes: pax writer closing */
	int rc;				/* sticky error */
	struct cairn_err err;		/* detail of rc, also for archive_cb */

	/*
	 * The batch being filled: tar bytes waiting for deflate, or with
	 * threads records (tp_rec_entry, tp_rec_raw) of fill_tar tar bytes
	 */
	size_t batch_size;
	unsigned char *fill;		/* batch the caller fills */
	size_t fill_len;
	size_t fill_cap;		/* of fill (threaded: + slack) */
	size_t fill_tar;		/* tar bytes the records stand for */
	size_t raw_at;			/* length field of the open raw
					   record (0: none open) */

	/* the compression threads (tarparts_start_thread) */
	int threaded;			/* started (and not yet joined) */
	int nthreads;
	pthread_t *thr;
	pthread_mutex_t mu;
	pthread_cond_t work_cv;		/* queue not empty, or quit */
	pthread_cond_t idle_cv;		/* a slot was handed over and freed */
	int nbatch;
	struct tp_slot *slots;		/* nbatch of them */
	int *queue;			/* ring of full slots, oldest first */
	int qhead, qlen;
	int *freeq;			/* stack of free slots */
	int nfree;
	int *order;			/* slot of sequence s: order[s % nbatch] */
	uint64_t seq_next;		/* sequence number of the next full batch */
	uint64_t seq_out;		/* next one for the sink */
	int fill_idx;			/* index of fill in slots */
	int writing;			/* a thread is in tp_emit's sink loop */
	int quit;			/* threads: exit once queue is empty */
	int drop;			/* threads: consume without deflating */
	int trc;			/* threads' sticky error ... */
	struct cairn_err terr;		/* ... and its detail */
	/* total_bytes after batch s was written: csum[s % TP_CSUM_RING] */
	uint64_t csum[TP_CSUM_RING];
	uint64_t part_seq;		/* first batch of the open part */
	uint64_t part_base;		/* total_bytes when it opened */
	uint64_t cut_lag;		/* batches a boundary looks back */
};

/* A batch of tar bytes and, once deflated, its gzip member. */
struct tp_slot {
	unsigned char *in;		/* fill_cap bytes: the records */
	size_t len;
	unsigned char *out;		/* deflateBound(batch_size) bytes */
	size_t outcap, outlen;
	int done;			/* deflated (or dropped): may go out */
};

static int
tp_fail(struct tarparts *tp, struct cairn_err *err)
{
	if (tp->rc == 0)
		tp->rc = CAIRN_EFAIL;
	cairn_err_copy(err, &tp->err);
	return tp->rc;
}

static int
tp_set(struct tarparts *tp, int code, const char *what)
{
	if (tp->rc == 0) {
		tp->rc = code;
		cairn_err_set(&tp->err, code, "%s", what);
	}
	return tp->rc;
}

/* Caller's thread: take over the compression thread's error, if any. */
static int
tp_merge(struct tarparts *tp)
{
	if (!tp->threaded)
		return tp->rc;
	pthread_mutex_lock(&tp->mu);
	if (tp->trc < 0 && tp->rc == 0) {
		tp->rc = tp->trc;
		cairn_err_copy(&tp->err, &tp->terr);
		if (tp->err.code == 0)
			cairn_err_set(&tp->err, tp->rc,
			    "compressing the tarball");
	}
	pthread_mutex_unlock(&tp->mu);
	return tp->rc;
}

/* Open the next part if none is open (caller's thread, nothing queued). */
static int
tp_begin(struct tarparts *tp)
{
	int rc;

	if (tp->part != 0)
		return 0;
	rc = tp->sink.begin(tp->sink.arg, tp->next_part, &tp->err);
	if (rc < 0) {
		tp->rc = rc;
		return rc;
	}
	tp->part = tp->next_part++;
	atomic_store(&tp->part_bytes, 0);
	tp->part_entries = 0;
	/* every batch before this one belongs to closed parts, written */
	tp->part_seq = tp->seq_next;
	tp->part_base = atomic_load(&tp->total_bytes);
	return 0;
}

/* Compressed bytes of the open part to the sink, counted. */
static int
tp_write(struct tarparts *tp, const void *p, size_t n, struct cairn_err *e)
{
	int rc = tp->sink.write(tp->sink.arg, p, n, e);

	if (rc < 0)
		return rc;
	atomic_fetch_add(&tp->part_bytes, n);
	atomic_fetch_add(&tp->total_bytes, n);
	return 0;
}

/*
 * Unthreaded: deflate n bytes (may be 0) with flush into the part's
 * gzip member, pushing output to the sink.
 */
static int
tp_deflate(struct tarparts *tp, const void *in, size_t n, int flush,
	struct cairn_err *e)
{
	int zrc, rc;
	size_t have;

	tp->z.next_in = (Bytef *)(uintptr_t)in;
	tp->z.avail_in = (uInt)n;
	do {
		tp->z.next_out = tp->out;
		tp->z.avail_out = TP_OUTBUF;
		zrc = deflate(&tp->z, flush);
		if (zrc == Z_STREAM_ERROR)
			return cairn_err_set(e, CAIRN_EFAIL,
			    "zlib deflate failed");
		have = TP_OUTBUF - tp->z.avail_out;
		if (have > 0 && (rc = tp_write(tp, tp->out, have, e)) < 0)
			return rc;
	} while (tp->z.avail_out == 0 ||
	    (flush == Z_FINISH && zrc != Z_STREAM_END));
	return 0;
}

/*
 * A tar writer into cb(arg): ustar (pax 0), restricted pax with UTF-8
 * names (1), or full pax (2: sparse files, xattrs, ACLs, long links, the
 * names converted as libarchive does for files from disk).
 */
static struct archive *
la_writer(int pax, void *arg, archive_write_callback *cb,
	struct cairn_err *err)
{
	struct archive *a = archive_write_new();
	int r;

	if (a == NULL) {
		cairn_err_set(err, CAIRN_EFAIL, "libarchive: out of memory");
		return NULL;
	}
	if (pax == 2)
		r = archive_write_set_format_pax(a) != ARCHIVE_OK;
	else if (pax)
		/*
		 * Names are UTF-8 already (Kubernetes names are ASCII) and
		 * are handed over as UTF-8 (tarparts_add), so the pax path
		 * record is plain UTF-8 with no hdrcharset record: GNU tar
		 * warns "Ignoring unknown extended header keyword" for one.
		 */
		r = archive_write_set_format_pax_restricted(a) != ARCHIVE_OK;
	else
		r = archive_write_set_format_ustar(a) != ARCHIVE_OK;
	if (r || archive_write_add_filter_none(a) != ARCHIVE_OK ||
	    archive_write_set_bytes_per_block(a, 0) != ARCHIVE_OK ||
	    archive_write_open2(a, arg, NULL, cb, NULL, NULL) !=
	    ARCHIVE_OK) {
		cairn_err_set(err, CAIRN_EFAIL, "libarchive: %s",
		    archive_error_string(a) ? archive_error_string(a) :
		    "cannot open tar writer");
		archive_write_free(a);
		return NULL;
	}
	return a;
}

/* The entry every item gets: a regular file, 0644, stamped mtime. */
static struct archive_entry *
tp_entry_new(int64_t mtime)
{
	struct archive_entry *e = archive_entry_new();

	if (e == NULL)
		return NULL;
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_mtime(e, (time_t)mtime, 0);
	return e;
}

static void
rec_put32(unsigned char *p, size_t v)
{
	uint32_t u = (uint32_t)v;

	memcpy(p, &u, sizeof u);
}

static size_t
rec_get32(const unsigned char *p)
{
	uint32_t u;

	memcpy(&u, p, sizeof u);
	return u;
}

/* A compression thread's tar writer: a batch's records to tar bytes. */
struct tp_fmt {
	struct archive *a;		/* ustar, into buf */
	struct archive_entry *entry;
	unsigned char *buf;
	size_t len, cap;
};

static la_ssize_t
fmt_cb(struct archive *a, void *arg, const void *p, size_t n)
{
	struct tp_fmt *f = arg;

	(void)a;
	if (f->len + n > f->cap) {
		f->cap = 2 * (f->len + n);
		f->buf = xrealloc(f->buf, f->cap);
	}
	memcpy(f->buf + f->len, p, n);
	f->len += n;
	return (la_ssize_t)n;
}

static int
fmt_fail(struct tp_fmt *f, struct cairn_err *e)
{
	return cairn_err_set(e, CAIRN_EFAIL, "libarchive: %s",
	    archive_error_string(f->a) ? archive_error_string(f->a) :
	    "tar entry failed");
}

/* The tar bytes of the slot's records, in f->buf. */
static int
tp_format(struct tp_fmt *f, const struct tp_slot *sl, struct cairn_err *e)
{
	const unsigned char *p = sl->in, *end = sl->in + sl->len;
	size_t n, dlen;

	f->len = 0;
	while (p < end) {
		n = rec_get32(p + 1);
		if (p[0] == TP_REC_RAW) {
			fmt_cb(NULL, f, p + TP_RAW_HDR, n);
			p += TP_RAW_HDR + n;
			continue;
		}
		dlen = rec_get32(p + 5);
		archive_entry_set_pathname(f->entry,
		    (const char *)p + TP_REC_HDR);
		archive_entry_set_size(f->entry, (la_int64_t)dlen);
		if (archive_write_header(f->a, f->entry) != ARCHIVE_OK ||
		    (dlen > 0 && archive_write_data(f->a, p + TP_REC_HDR + n,
		    dlen) != (la_ssize_t)dlen) ||
		    archive_write_finish_entry(f->a) != ARCHIVE_OK)
			return fmt_fail(f, e);
		p += TP_REC_HDR + n + dlen;
	}
	return 0;
}

/* A compression thread: the slot's batch as one whole gzip member. */
static int
tp_member(struct gzmember *g, struct tp_fmt *f, struct tp_slot *sl,
	struct cairn_err *e)
{
	size_t bound;
	int rc = tp_format(f, sl, e);

	if (rc < 0)
		return rc;
	bound = gzmember_bound(f->len);
	if (sl->outcap < bound) {
		free(sl->out);
		sl->out = xmalloc(bound);
		sl->outcap = bound;
	}
	return gzmember_compress(g, f->buf, f->len, sl->out, sl->outcap,
	    &sl->outlen, e);
}

/* Under mu: a thread's error, the first one kept. */
static void
tp_thread_error(struct tarparts *tp, int rc, const struct cairn_err *e)
{
	if (rc < 0 && tp->trc == 0) {
		tp->trc = rc;
		cairn_err_copy(&tp->terr, e);
	}
}

/*
 * Under mu: hand the finished slots to the sink in sequence order and
 * free them, unless another thread is already doing so (it will see this
 * thread's slot too: it looks again after each write).
 */
static void
tp_emit(struct tarparts *tp)
{
	struct cairn_err e = CAIRN_ERR_INIT;
	struct tp_slot *sl;
	int idx, rc;

	if (tp->writing)
		return;
	tp->writing = 1;
	while (tp->seq_out != tp->seq_next) {
		idx = tp->order[tp->seq_out % (uint64_t)tp->nbatch];
		sl = &tp->slots[idx];
		if (!sl->done)
			break;
		rc = 0;
		if (!tp->drop && tp->trc == 0) {
			pthread_mutex_unlock(&tp->mu);
			rc = tp_write(tp, sl->out, sl->outlen, &e);
			pthread_mutex_lock(&tp->mu);
		}
		tp_thread_error(tp, rc, &e);
		tp->csum[tp->seq_out % TP_CSUM_RING] =
		    atomic_load(&tp->total_bytes);
		sl->done = 0;
		tp->freeq[tp->nfree++] = idx;
		tp->seq_out++;
		pthread_cond_broadcast(&tp->idle_cv);
	}
	tp->writing = 0;
}

/* A compression thread: deflate the oldest queued batch, hand out, again. */
static void *
tp_thread(void *arg)
{
	struct tarparts *tp = arg;
	struct cairn_err e = CAIRN_ERR_INIT;
	struct gzmember *g = gzmember_new(tp->level);
	struct tp_fmt f;
	int idx, skip, rc = 0;

	util_thread_name("gzip");
	memset(&f, 0, sizeof f);
	f.a = la_writer(0, &f, fmt_cb, &e);
	f.entry = tp_entry_new(tp->mtime);
	if (f.a != NULL && f.entry == NULL)
		cairn_err_set(&e, CAIRN_EFAIL, "libarchive: out of memory");
	pthread_mutex_lock(&tp->mu);
	if (f.a == NULL || f.entry == NULL)
		tp_thread_error(tp, CAIRN_EFAIL, &e);	/* skips batches */
	for (;;) {
		while (tp->qlen == 0 && !tp->quit)
			pthread_cond_wait(&tp->work_cv, &tp->mu);
		if (tp->qlen == 0)
			break;
		idx = tp->queue[tp->qhead];
		tp->qhead = (tp->qhead + 1) % tp->nbatch;
		tp->qlen--;
		skip = tp->drop || tp->trc < 0;
		pthread_mutex_unlock(&tp->mu);
		rc = 0;
		if (!skip)
			rc = tp_member(g, &f, &tp->slots[idx], &e);
		pthread_mutex_lock(&tp->mu);
		tp_thread_error(tp, rc, &e);
		tp->slots[idx].done = 1;
		tp_emit(tp);
	}
	pthread_mutex_unlock(&tp->mu);
	gzmember_free(g);
	if (f.a != NULL)
		archive_write_free(f.a);	/* its end blocks: into f.buf */
	if (f.entry != NULL)
		archive_entry_free(f.entry);
	free(f.buf);
	return NULL;
}

/*
 * Hand the filled batch on: deflate it here, or queue it for the threads
 * and take a free slot (waiting for one if all are in flight).
 */
static int
tp_handoff(struct tarparts *tp)
{
	int rc;

	if (tp->fill_len == 0)
		return tp_merge(tp);
	if (!tp->threaded) {
		rc = tp_deflate(tp, tp->fill, tp->fill_len, Z_NO_FLUSH,
		    &tp->err);
		tp->fill_len = tp->fill_tar = 0;
		if (rc < 0 && tp->rc == 0)
			tp->rc = rc;
		return tp->rc;
	}
	pthread_mutex_lock(&tp->mu);
	tp->slots[tp->fill_idx].len = tp->fill_len;
	tp->order[tp->seq_next++ % (uint64_t)tp->nbatch] = tp->fill_idx;
	tp->queue[(tp->qhead + tp->qlen) % tp->nbatch] = tp->fill_idx;
	tp->qlen++;
	pthread_cond_signal(&tp->work_cv);
	while (tp->nfree == 0)
		pthread_cond_wait(&tp->idle_cv, &tp->mu);
	tp->fill_idx = tp->freeq[--tp->nfree];
	tp->fill = tp->slots[tp->fill_idx].in;
	tp->fill_len = tp->fill_tar = tp->raw_at = 0;
	pthread_mutex_unlock(&tp->mu);
	return tp_merge(tp);
}

/*
 * Everything added so far has been deflated and handed to the sink (the
 * threads, if any, have nothing queued, in hand or unwritten).
 */
static int
tp_drain(struct tarparts *tp)
{
	if (tp_handoff(tp) < 0)
		return tp->rc;
	if (!tp->threaded)
		return tp->rc;
	pthread_mutex_lock(&tp->mu);
	while (tp->seq_out != tp->seq_next || tp->writing)
		pthread_cond_wait(&tp->idle_cv, &tp->mu);
	pthread_mutex_unlock(&tp->mu);
	return tp_merge(tp);
}

/* libarchive's write callback: every tar byte arrives here at once. */
static la_ssize_t
archive_cb(struct archive *a, void *arg, const void *buf, size_t len)
{
	struct tarparts *tp = arg;
	const unsigned char *p = buf;
	size_t left = len, k;

	(void)a;
	if (tp->abandoned || tp->mute)
		return (la_ssize_t)len;
	if (tp->rc < 0)
		return -1;
	if (tp_begin(tp) < 0)
		return -1;
	while (left > 0) {
		if (tp->threaded && tp->raw_at == 0) {	/* a raw record */
			if (tp->fill_len + TP_RAW_HDR >= tp->fill_cap &&
			    tp_handoff(tp) < 0)
				return -1;
			tp->fill[tp->fill_len] = TP_REC_RAW;
			rec_put32(tp->fill + tp->fill_len + 1, 0);
			tp->raw_at = tp->fill_len + 1;
			tp->fill_len += TP_RAW_HDR;
		}
		k = tp->batch_size - tp->fill_tar;
		if (k > tp->fill_cap - tp->fill_len)
			k = tp->fill_cap - tp->fill_len;
		if (k > left)
			k = left;
		memcpy(tp->fill + tp->fill_len, p, k);
		tp->fill_len += k;
		tp->fill_tar += k;
		if (tp->threaded)
			rec_put32(tp->fill + tp->raw_at,
			    rec_get32(tp->fill + tp->raw_at) + k);
		p += k;
		left -= k;
		if ((tp->fill_tar == tp->batch_size ||
		    tp->fill_len == tp->fill_cap) && tp_handoff(tp) < 0)
			return -1;
	}
	return (la_ssize_t)len;
}

/*
 * Finish the open part and hand it to the sink: the gzip member running
 * through it, unthreaded; with threads every batch already is one.
 */
static int
tp_cut(struct tarparts *tp)
{
	int rc;

	if (tp->part == 0)
		return 0;
	if (tp_drain(tp) < 0)
		return tp->rc;
	if (!tp->threaded) {
		rc = tp_deflate(tp, NULL, 0, Z_FINISH, &tp->err);
		if (rc < 0) {
			tp->rc = rc;
			return rc;
		}
		if (deflateReset(&tp->z) != Z_OK)
			return tp_set(tp, CAIRN_EFAIL,
			    "zlib deflateReset failed");
	}
	rc = tp->sink.end(tp->sink.arg, tp->part, atomic_load(&tp->part_bytes),
	    tp->part_entries, &tp->err);
	if (rc < 0) {
		tp->rc = rc;
		return rc;
	}
	log_debug("part %d closed: %llu bytes, %llu entries", tp->part,
	    (unsigned long long)atomic_load(&tp->part_bytes),
	    (unsigned long long)tp->part_entries);
	tp->last_closed = tp->part;
	tp->part = 0;
	return 0;
}

/* A tar writer into archive_cb (la_writer()'s pax). */
static struct archive *
tp_writer(struct tarparts *tp, int pax, struct cairn_err *err)
{
	return la_writer(pax, tp, archive_cb, err);
}

/*
 * Can a plain ustar header (name field only) hold this path as is?
 * Printable ASCII, 8 bytes at a time (two entries per item: it showed):
 * a byte under 0x20 or over 0x7e sets its high bit in one of the word
 * tests (each byte's sum stays under 0x100: no carry between bytes).
 */
static int
tp_ustar_ok(const char *path)
{
	const uint64_t ones = 0x0101010101010101ull;
	const uint64_t highs = 0x8080808080808080ull;
	size_t n = strnlen(path, TP_USTAR_PATH_MAX + 1), i = 0;

	if (n == 0 || n > TP_USTAR_PATH_MAX)
		return 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w, low;

		memcpy(&w, path + i, 8);
		low = w & ~highs;
		/* >= 0x80; < 0x20 (+0x60 stays under 0x80); 0x7f (+1) */
		if ((w | ~(low + ones * 0x60) | (low + ones)) & highs)
			break;	/* the bytes one by one say which */
	}
	for (; i < n; i++)
		if ((unsigned char)path[i] < 0x20 ||
		    (unsigned char)path[i] > 0x7e)
			return 0;
	return 1;
}

int
tarparts_open(const struct tarparts_sink *sink, int first_part,
	size_t part_size, int64_t mtime, struct tarparts **out,
	struct cairn_err *err)
{
	struct tarparts *tp;

	*out = NULL;
	if (first_part < 1 || part_size == 0)
		return cairn_err_set(err, CAIRN_EINVAL,
		    "tarparts: bad first part %d or part size %zu",
		    first_part, part_size);
	tp = xcalloc(1, sizeof *tp);
	tp->sink = *sink;
	tp->part_size = part_size;
	tp->mtime = mtime;
	tp->next_part = first_part;
	tp->level = TP_LEVEL;
	tp->out = xmalloc(TP_OUTBUF);
	tp->batch_size = tp->fill_cap = TP_BATCH;
	tp->fill = xmalloc(tp->batch_size);
	tp->cut_lag = part_size >> 20 < TP_CUT_LAG ? part_size >> 20 :
	    TP_CUT_LAG;
	atomic_init(&tp->part_bytes, 0);
	atomic_init(&tp->total_bytes, 0);
	/* windowBits 15 + 16: gzip wrapper; memLevel 8 as gzip(1). */
	if (deflateInit2(&tp->z, TP_LEVEL, Z_DEFLATED, 15 + 16, 8,
	    Z_DEFAULT_STRATEGY) != Z_OK) {
		cairn_err_set(err, CAIRN_EFAIL, "zlib deflateInit2 failed");
		goto fail;
	}
	tp->zinit = 1;
	tp->entry = tp_entry_new(mtime);
	if (tp->entry == NULL) {
		cairn_err_set(err, CAIRN_EFAIL, "libarchive: out of memory");
		goto fail;
	}
	tp->ustar = tp_writer(tp, 0, err);
	if (tp->ustar == NULL)
		goto fail;
	*out = tp;
	return 0;
fail:
	tp->abandoned = 1;
	tarparts_free(tp);
	return err != NULL && err->code != 0 ? err->code : CAIRN_EFAIL;
}

static void tp_stop_thread(struct tarparts *tp, int drop);

int
tarparts_start_thread(struct tarparts *tp, size_t batch_size, int nbatch,
	int nthreads, struct cairn_err *err)
{
	int rc = 0, n;

	if (tp->threaded || tp->part != 0 || tp->last_closed != 0 ||
	    tp->fill_len != 0 || tp->finished || tp->rc < 0)
		return cairn_err_set(err, CAIRN_EINVAL,
		    "tarparts: threads must start before the first entry");
	if (batch_size == 0)
		batch_size = TP_TBATCH;
	if (nthreads <= 0)
		nthreads = util_cpus();
	if (nthreads > TP_THREADS_MAX)
		nthreads = TP_THREADS_MAX;
	if (nbatch == 0)
		nbatch = nthreads + TP_NBATCH_SPARE;
	if (nbatch < nthreads + 1)
		nbatch = nthreads + 1;	/* one to fill, one per thread */
	if (nbatch > TP_NBATCH_MAX)
		nbatch = TP_NBATCH_MAX;
	tp->nbatch = nbatch;
	tp->slots = xcalloc((size_t)nbatch, sizeof *tp->slots);
	tp->queue = xcalloc((size_t)nbatch, sizeof *tp->queue);
	tp->freeq = xcalloc((size_t)nbatch, sizeof *tp->freeq);
	tp->order = xcalloc((size_t)nbatch, sizeof *tp->order);
	for (int i = 0; i < nbatch; i++)
		tp->slots[i].in = xmalloc(batch_size + TP_FILL_SLACK);
	for (int i = nbatch - 1; i >= 1; i--)
		tp->freeq[tp->nfree++] = i;
	tp->qhead = tp->qlen = 0;
	tp->seq_next = tp->seq_out = 0;
	tp->writing = tp->quit = tp->drop = tp->trc = 0;
	tp->thr = xcalloc((size_t)nthreads, sizeof *tp->thr);
	pthread_mutex_init(&tp->mu, NULL);
	pthread_cond_init(&tp->work_cv, NULL);
	pthread_cond_init(&tp->idle_cv, NULL);
	free(tp->fill);
	tp->batch_size = batch_size;
	tp->fill_cap = batch_size + TP_FILL_SLACK;
	tp->fill_idx = 0;
	tp->fill = tp->slots[0].in;
	tp->fill_len = 0;
	tp->threaded = 1;
	for (n = 0; n < nthreads; n++) {
		rc = pthread_create(&tp->thr[n], NULL, tp_thread, tp);
		if (rc != 0)
			break;
		tp->nthreads++;
	}
	if (n == 0) {	/* none: back to deflating on the caller's thread */
		tp_stop_thread(tp, 1);
		return cairn_err_errno(err, CAIRN_EFAIL, rc,
		    "tarparts: compression thread");
	}
	return 0;
}

/* Stop and join the compression threads; drop: discard what is queued. */
static void
tp_stop_thread(struct tarparts *tp, int drop)
{
	if (!tp->threaded)
		return;
	pthread_mutex_lock(&tp->mu);
	tp->quit = 1;
	if (drop)
		tp->drop = 1;
	pthread_cond_broadcast(&tp->work_cv);
	pthread_mutex_unlock(&tp->mu);
	for (int i = 0; i < tp->nthreads; i++)
		pthread_join(tp->thr[i], NULL);
	/* Keep a late error; the fill buffer stays valid (slots). */
	tp_merge(tp);
	tp->threaded = 0;
	tp->nthreads = 0;
	FREE_NULL(tp->thr);
	pthread_mutex_destroy(&tp->mu);
	pthread_cond_destroy(&tp->work_cv);
	pthread_cond_destroy(&tp->idle_cv);
}

/* Threaded: the entry as a record, made tar by a compression thread. */
static int
tp_defer(struct tarparts *tp, const char *path, const void *data,
	size_t len)
{
	size_t plen = strlen(path) + 1, need = TP_REC_HDR + plen + len;
	unsigned char *p;

	if (tp_begin(tp) < 0)
		return tp->rc;
	if (tp->fill_len + need > tp->fill_cap && tp_handoff(tp) < 0)
		return tp->rc;
	p = tp->fill + tp->fill_len;
	p[0] = TP_REC_ENTRY;
	rec_put32(p + 1, plen);
	rec_put32(p + 5, len);
	memcpy(p + TP_REC_HDR, path, plen);
	if (len > 0)
		memcpy(p + TP_REC_HDR + plen, data, len);
	tp->fill_len += need;
	tp->fill_tar += 512 + ((len + 511) & ~(size_t)511);
	tp->raw_at = 0;
	tp->part_entries++;
	if (tp->fill_tar >= tp->batch_size && tp_handoff(tp) < 0)
		return tp->rc;
	return 0;
}

int
tarparts_add(struct tarparts *tp, const char *path, const void *data,
	size_t len, struct cairn_err *err)
{
	struct archive *a;
	la_ssize_t n;
	int ustar;

	if (tp->rc < 0)
		return tp_fail(tp, err);
	if (tp->finished)
		return cairn_err_set(err, CAIRN_EINVAL, "tarparts: finished");
	ustar = tp_ustar_ok(path);
	if (ustar && tp->threaded && len <= TP_DEFER_MAX)
		return tp_defer(tp, path, data, len) < 0 ?
		    tp_fail(tp, err) : 0;
	if (ustar)
		a = tp->ustar;
	else {
		if (tp->pax == NULL) {
			tp->pax = tp_writer(tp, 1, &tp->err);
			if (tp->pax == NULL) {
				tp->rc = tp->err.code ? tp->err.code :
				    CAIRN_EFAIL;
				return tp_fail(tp, err);
			}
		}
		a = tp->pax;
	}
	/* type, mode and mtime were set once (tarparts_open) */
	if (a == tp->ustar)
		archive_entry_set_pathname(tp->entry, path);
	else if (!archive_entry_update_pathname_utf8(tp->entry, path))
		/* not UTF-8: libarchive then writes the bytes as BINARY */
		archive_entry_set_pathname(tp->entry, path);
	archive_entry_set_size(tp->entry, (la_int64_t)len);
	if (archive_write_header(a, tp->entry) != ARCHIVE_OK) {
		tp_set(tp, CAIRN_EFAIL, archive_error_string(a) ?
		    archive_error_string(a) : "tar header failed");
		return tp_fail(tp, err);
	}
	if (len > 0) {
		n = archive_write_data(a, data, len);
		if (n < 0 || (size_t)n != len) {
			tp_set(tp, CAIRN_EFAIL, archive_error_string(a) ?
			    archive_error_string(a) : "tar data failed");
			return tp_fail(tp, err);
		}
	}
	/* Header and data are out; finish_entry writes the padding. */
	if (archive_write_finish_entry(a) != ARCHIVE_OK) {
		tp_set(tp, CAIRN_EFAIL, "tar entry padding failed");
		return tp_fail(tp, err);
	}
	if (tp->rc < 0)
		return tp_fail(tp, err);
	tp->part_entries++;
	return 0;
}

int
tarparts_set_level(struct tarparts *tp, int level, struct cairn_err *err)
{
	if (tp->threaded || tp->part != 0 || tp->last_closed != 0 ||
	    tp->fill_len != 0 || tp->finished || tp->rc < 0)
		return cairn_err_set(err, CAIRN_EINVAL, "tarparts: the level "
		    "is set before the first entry and the threads");
	if (level < Z_DEFAULT_COMPRESSION || level > Z_BEST_COMPRESSION ||
	    deflateParams(&tp->z, level, Z_DEFAULT_STRATEGY) != Z_OK)
		return cairn_err_set(err, CAIRN_EINVAL, "tarparts: zlib level "
		    "%d", level);
	tp->level = level;
	return 0;
}

/* libarchive's answer on the files writer: < ARCHIVE_WARN is a failure. */
static int
tp_files_fail(struct tarparts *tp, const char *what, const char *path,
	struct cairn_err *err)
{
	if (tp->rc == 0) {
		tp->rc = CAIRN_EIO;
		cairn_err_set(&tp->err, CAIRN_EIO, "%s \"%s\": %s", what, path,
		    archive_error_string(tp->files) ?
		    archive_error_string(tp->files) : "failed");
	}
	return tp_fail(tp, err);
}

int
tarparts_add_header(struct tarparts *tp, struct archive_entry *e,
	struct cairn_err *err)
{
	if (tp->rc < 0)
		return tp_fail(tp, err);
	if (tp->finished)
		return cairn_err_set(err, CAIRN_EINVAL, "tarparts: finished");
	if (tp->files == NULL) {
		tp->files = tp_writer(tp, 2, &tp->err);
		if (tp->files == NULL) {
			tp->rc = tp->err.code ? tp->err.code : CAIRN_EFAIL;
			return tp_fail(tp, err);
		}
	}
	if (archive_write_header(tp->files, e) < ARCHIVE_WARN)
		return tp_files_fail(tp, "archiving",
		    archive_entry_pathname(e), err);
	return tp->rc < 0 ? tp_fail(tp, err) : 0;
}

int
tarparts_add_data(struct tarparts *tp, const void *data, size_t len,
	struct cairn_err *err)
{
	if (tp->rc < 0)
		return tp_fail(tp, err);
	if (tp->files == NULL)
		return cairn_err_set(err, CAIRN_EINVAL, "tarparts: no entry");
	if (archive_write_data(tp->files, data, len) < 0)
		return tp_files_fail(tp, "writing", "entry data", err);
	return tp->rc < 0 ? tp_fail(tp, err) : 0;
}

int
tarparts_end_entry(struct tarparts *tp, struct cairn_err *err)
{
	if (tp->rc < 0)
		return tp_fail(tp, err);
	if (tp->files == NULL)
		return cairn_err_set(err, CAIRN_EINVAL, "tarparts: no entry");
	if (archive_write_finish_entry(tp->files) < ARCHIVE_WARN)
		return tp_files_fail(tp, "archiving", "entry", err);
	if (tp->rc < 0)
		return tp_fail(tp, err);
	tp->part_entries++;
	return 0;
}

/*
 * Threaded: the compressed bytes of the open part's batches before
 * seq_next - cut_lag, once they are written (waiting if need be).
 */
static uint64_t
tp_lagged_bytes(struct tarparts *tp)
{
	uint64_t t, bytes = 0;

	if (tp->seq_next < tp->cut_lag ||
	    (t = tp->seq_next - tp->cut_lag) <= tp->part_seq)
		return 0;
	pthread_mutex_lock(&tp->mu);
	while (tp->seq_out < t && tp->trc == 0)
		pthread_cond_wait(&tp->idle_cv, &tp->mu);
	if (tp->trc == 0)
		bytes = tp->csum[(t - 1) % TP_CSUM_RING] - tp->part_base;
	pthread_mutex_unlock(&tp->mu);
	return bytes;
}

int
tarparts_boundary(struct tarparts *tp, int *cut, struct cairn_err *err)
{
	if (cut != NULL)
		*cut = 0;
	if (tp->rc < 0)
		return tp_fail(tp, err);
	/*
	 * Unthreaded: deflate what is batched, so the compressed size is
	 * exact here. Threaded: the size up to cut_lag batches back.
	 */
	if (tp->threaded ? tp_merge(tp) < 0 : tp_handoff(tp) < 0)
		return tp_fail(tp, err);
	if (tp->part == 0 || (tp->threaded ? tp_lagged_bytes(tp) :
	    atomic_load(&tp->part_bytes)) < tp->part_size)
		return 0;
	if (tp_cut(tp) < 0)
		return tp_fail(tp, err);
	if (cut != NULL)
		*cut = 1;
	return 0;
}

int
tarparts_cut(struct tarparts *tp, struct cairn_err *err)
{
	if (tp->rc < 0)
		return tp_fail(tp, err);
	if (tp->threaded ? tp_merge(tp) < 0 : tp_handoff(tp) < 0)
		return tp_fail(tp, err);
	if (tp_cut(tp) < 0)
		return tp_fail(tp, err);
	return 0;
}

int
tarparts_finish(struct tarparts *tp, struct cairn_err *err)
{
	if (tp->rc < 0 || tp_merge(tp) < 0)
		return tp_fail(tp, err);
	if (tp->finished)
		return 0;
	/* The pax writers' end blocks are dropped (mute): ustar's end it. */
	if (tp->pax != NULL || tp->files != NULL) {
		tp->mute = 1;
		if (tp->pax != NULL)
			archive_write_free(tp->pax);
		if (tp->files != NULL)
			archive_write_free(tp->files);
		tp->pax = tp->files = NULL;
		tp->mute = 0;
	}
	/* The end-of-archive blocks go through archive_cb into a part. */
	if (archive_write_close(tp->ustar) != ARCHIVE_OK || tp->rc < 0) {
		tp_set(tp, CAIRN_EFAIL, "tar end-of-archive failed");
		return tp_fail(tp, err);
	}
	if (tp_begin(tp) < 0 || tp_cut(tp) < 0)
		return tp_fail(tp, err);
	tp_stop_thread(tp, 0);
	if (tp->rc < 0)
		return tp_fail(tp, err);
	tp->finished = 1;
	return 0;
}

void
tarparts_free(struct tarparts *tp)
{
	if (tp == NULL)
		return;
	/* An unfinished writer must not push end blocks into a part. */
	tp->abandoned = 1;
	tp_stop_thread(tp, 1);
	if (tp->pax != NULL)
		archive_write_free(tp->pax);
	if (tp->files != NULL)
		archive_write_free(tp->files);
	if (tp->ustar != NULL)
		archive_write_free(tp->ustar);
	if (tp->entry != NULL)
		archive_entry_free(tp->entry);
	if (tp->zinit)
		deflateEnd(&tp->z);
	if (tp->slots != NULL) {
		for (int i = 0; i < tp->nbatch; i++) {
			free(tp->slots[i].in);
			free(tp->slots[i].out);
		}
		free(tp->slots);
		free(tp->queue);
		free(tp->freeq);
		free(tp->order);
	} else
		free(tp->fill);
	free(tp->out);
	free(tp);
}

int
tarparts_current_part(const struct tarparts *tp)
{
	return tp->part;
}

int
tarparts_last_closed(const struct tarparts *tp)
{
	return tp->last_closed;
}

uint64_t
tarparts_bytes_out(const struct tarparts *tp)
{
	return atomic_load(&tp->total_bytes);
}

uint64_t
tarparts_part_bytes(const struct tarparts *tp)
{
	return atomic_load(&tp->part_bytes);
}
