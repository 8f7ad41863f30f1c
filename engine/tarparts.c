/*
 * tarparts.c: tar entries from libarchive, gzip members from zlib, cut
 * into parts at the caller's boundaries. See tarparts.h for the contract.
 *
 * Data path: tarparts_add() -> libarchive (pax-restricted tar, i.e. ustar
 * unless a path needs pax; bytes_per_block 0 so nothing is held back) ->
 * archive_cb() -> deflate() -> sink->write(). The deflate stream is
 * gzip-wrapped (windowBits 15 + 16); a part boundary runs Z_FINISH and
 * deflateReset(), so the next part starts a new gzip member.
 */
#include "config.h"
#include "engine/tarparts.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/log.h"
#include "base/mem.h"

#define TP_OUTBUF (64u << 10)	/* deflate output chunk */
/*
 * zlib level 1: deflate is most of a backup's CPU (Kubernetes JSON
 * compresses about as well at 1 as at 6, for a third of the time).
 */
#define TP_LEVEL Z_BEST_SPEED

struct tarparts {
	struct tarparts_sink sink;
	struct archive *a;		/* libarchive tar writer */
	struct archive_entry *entry;	/* reused for every entry */
	z_stream z;
	int zinit;			/* deflateInit2 done */
	unsigned char *out;		/* TP_OUTBUF bytes */
	size_t part_size;
	int64_t mtime;
	int part;			/* open part number, 0 if none */
	int next_part;			/* number of the next part to open */
	int last_closed;
	uint64_t part_bytes;		/* compressed bytes of the open part */
	uint64_t part_entries;
	uint64_t total_bytes;
	int finished;
	int closing;			/* archive_write_close in progress */
	int abandoned;			/* drop bytes: writer being freed */
	int rc;				/* sticky error */
	struct cairn_err err;		/* detail of rc, also for archive_cb */
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

/* Open the next part if none is open. */
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
	tp->part_bytes = 0;
	tp->part_entries = 0;
	return 0;
}

/* Run deflate with flush over the pending input, pushing output to sink. */
static int
tp_deflate(struct tarparts *tp, int flush)
{
	int zrc, rc;
	size_t have;

	do {
		tp->z.next_out = tp->out;
		tp->z.avail_out = TP_OUTBUF;
		zrc = deflate(&tp->z, flush);
		if (zrc == Z_STREAM_ERROR)
			return tp_set(tp, CAIRN_EFAIL, "zlib deflate failed");
		have = TP_OUTBUF - tp->z.avail_out;
		if (have > 0) {
			rc = tp->sink.write(tp->sink.arg, tp->out, have, &tp->err);
			if (rc < 0) {
				tp->rc = rc;
				return rc;
			}
			tp->part_bytes += have;
			tp->total_bytes += have;
		}
	} while (tp->z.avail_out == 0 ||
	    (flush == Z_FINISH && zrc != Z_STREAM_END));
	return 0;
}

/* libarchive's write callback: every tar byte arrives here at once. */
static la_ssize_t
archive_cb(struct archive *a, void *arg, const void *buf, size_t len)
{
	struct tarparts *tp = arg;

	(void)a;
	if (tp->abandoned)
		return (la_ssize_t)len;
	if (tp->rc < 0)
		return -1;
	if (tp_begin(tp) < 0)
		return -1;
	tp->z.next_in = (Bytef *)(uintptr_t)buf;
	tp->z.avail_in = (uInt)len;
	if (tp_deflate(tp, Z_NO_FLUSH) < 0)
		return -1;
	return (la_ssize_t)len;
}

/* Finish the gzip member of the open part and hand it to the sink. */
static int
tp_cut(struct tarparts *tp)
{
	int rc;

	if (tp->part == 0)
		return 0;
	tp->z.next_in = NULL;
	tp->z.avail_in = 0;
	if (tp_deflate(tp, Z_FINISH) < 0)
		return tp->rc;
	if (deflateReset(&tp->z) != Z_OK)
		return tp_set(tp, CAIRN_EFAIL, "zlib deflateReset failed");
	rc = tp->sink.end(tp->sink.arg, tp->part, tp->part_bytes,
	    tp->part_entries, &tp->err);
	if (rc < 0) {
		tp->rc = rc;
		return rc;
	}
	log_debug("part %d closed: %llu bytes, %llu entries", tp->part,
	    (unsigned long long)tp->part_bytes,
	    (unsigned long long)tp->part_entries);
	tp->last_closed = tp->part;
	tp->part = 0;
	return 0;
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
	tp->out = xmalloc(TP_OUTBUF);
	/* windowBits 15 + 16: gzip wrapper; memLevel 8 as gzip(1). */
	if (deflateInit2(&tp->z, TP_LEVEL, Z_DEFLATED, 15 + 16, 8,
	    Z_DEFAULT_STRATEGY) != Z_OK) {
		cairn_err_set(err, CAIRN_EFAIL, "zlib deflateInit2 failed");
		goto fail;
	}
	tp->zinit = 1;
	tp->a = archive_write_new();
	tp->entry = archive_entry_new();
	if (tp->a == NULL || tp->entry == NULL) {
		cairn_err_set(err, CAIRN_EFAIL, "libarchive: out of memory");
		goto fail;
	}
	/*
	 * Names are UTF-8 already (Kubernetes names are ASCII): hdrcharset
	 * BINARY skips libarchive's locale conversion of every path.
	 */
	if (archive_write_set_format_pax_restricted(tp->a) != ARCHIVE_OK ||
	    archive_write_set_format_option(tp->a, "pax", "hdrcharset",
	    "BINARY") != ARCHIVE_OK ||
	    archive_write_add_filter_none(tp->a) != ARCHIVE_OK ||
	    archive_write_set_bytes_per_block(tp->a, 0) != ARCHIVE_OK ||
	    archive_write_open2(tp->a, tp, NULL, archive_cb, NULL, NULL) !=
	    ARCHIVE_OK) {
		cairn_err_set(err, CAIRN_EFAIL, "libarchive: %s",
		    archive_error_string(tp->a) ? archive_error_string(tp->a) :
		    "cannot open tar writer");
		goto fail;
	}
	*out = tp;
	return 0;
fail:
	tp->abandoned = 1;
	tarparts_free(tp);
	return err != NULL && err->code != 0 ? err->code : CAIRN_EFAIL;
}

int
tarparts_add(struct tarparts *tp, const char *path, const void *data,
	size_t len, struct cairn_err *err)
{
	la_ssize_t n;

	if (tp->rc < 0)
		return tp_fail(tp, err);
	if (tp->finished)
		return cairn_err_set(err, CAIRN_EINVAL, "tarparts: finished");
	archive_entry_clear(tp->entry);
	archive_entry_set_pathname(tp->entry, path);
	archive_entry_set_filetype(tp->entry, AE_IFREG);
	archive_entry_set_perm(tp->entry, 0644);
	archive_entry_set_size(tp->entry, (la_int64_t)len);
	archive_entry_set_mtime(tp->entry, (time_t)tp->mtime, 0);
	if (archive_write_header(tp->a, tp->entry) != ARCHIVE_OK) {
		tp_set(tp, CAIRN_EFAIL, archive_error_string(tp->a) ?
		    archive_error_string(tp->a) : "tar header failed");
		return tp_fail(tp, err);
	}
	if (len > 0) {
		n = archive_write_data(tp->a, data, len);
		if (n < 0 || (size_t)n != len) {
			tp_set(tp, CAIRN_EFAIL, archive_error_string(tp->a) ?
			    archive_error_string(tp->a) : "tar data failed");
			return tp_fail(tp, err);
		}
	}
	/* Header and data are out; finish_entry writes the padding. */
	if (archive_write_finish_entry(tp->a) != ARCHIVE_OK) {
		tp_set(tp, CAIRN_EFAIL, "tar entry padding failed");
		return tp_fail(tp, err);
	}
	if (tp->rc < 0)
		return tp_fail(tp, err);
	tp->part_entries++;
	return 0;
}

int
tarparts_boundary(struct tarparts *tp, int *cut, struct cairn_err *err)
{
	if (cut != NULL)
		*cut = 0;
	if (tp->rc < 0)
		return tp_fail(tp, err);
	if (tp->part == 0 || tp->part_bytes < tp->part_size)
		return 0;
	if (tp_cut(tp) < 0)
		return tp_fail(tp, err);
	if (cut != NULL)
		*cut = 1;
	return 0;
}

int
tarparts_finish(struct tarparts *tp, struct cairn_err *err)
{
	if (tp->rc < 0)
		return tp_fail(tp, err);
	if (tp->finished)
		return 0;
	/* The end-of-archive blocks go through archive_cb into a part. */
	tp->closing = 1;
	if (archive_write_close(tp->a) != ARCHIVE_OK || tp->rc < 0) {
		tp_set(tp, CAIRN_EFAIL, "tar end-of-archive failed");
		return tp_fail(tp, err);
	}
	if (tp_begin(tp) < 0 || tp_cut(tp) < 0)
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
	if (tp->a != NULL)
		archive_write_free(tp->a);
	if (tp->entry != NULL)
		archive_entry_free(tp->entry);
	if (tp->zinit)
		deflateEnd(&tp->z);
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
	return tp->total_bytes;
}

uint64_t
tarparts_part_bytes(const struct tarparts *tp)
{
	return tp->part_bytes;
}
