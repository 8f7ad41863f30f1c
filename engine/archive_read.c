/*
 * archive_read.c: safe streaming reader of backup tarballs.
 *
 * Design. A restore reads a tarball that anyone with write access to the
 * bucket could have made, so the reader treats every byte as hostile:
 *
 *  - zlib undoes the gzip layer and libarchive parses the tar inside
 *    (tar formats only, no filter), fed through a read callback from a
 *    pull source. We never call archive_read_extract() or anything that
 *    touches the filesystem: entry names are strings we check and hand on.
 *  - Why zlib and not libarchive's gzip filter: that filter does not
 *    check a member's CRC-32 and length (a corrupt tarball would read as
 *    good), and neither layer says where a stream ended. zlib's inflate
 *    (gzip framing only) checks each member's trailer, the callback knows
 *    when the input ends inside a member (truncated) and what follows a
 *    member (another member, or nothing: anything else is refused).
 *  - Integrity of the tar stream: the archive must end with the
 *    end-of-archive blocks (two 512-byte blocks of zeros). A tarball cut
 *    at a gzip-member boundary, which is also an entry boundary in what
 *    tarparts writes, decompresses cleanly and libarchive takes the end
 *    of input at a block boundary as a normal end; we compare how far
 *    libarchive's tar reader consumed before and after its end-of-archive
 *    answer, and fewer than 1024 bytes of end blocks is a truncation.
 *  - Entry data is only ever read through read_block(), which checks the
 *    total uncompressed bytes and the expansion ratio after every block.
 *    Entries we refuse or the caller does not read are drained with the
 *    same loop before the next header, because libarchive's own skip of a
 *    compressed stream would expand the data unchecked (a bomb hidden
 *    behind a header we refused).
 *  - Any libarchive ARCHIVE_FATAL, a cap, a source error or a stall is a
 *    sticky stream error: the reader answers it from then on.
 *  - Memory: libarchive's own buffers, one entry (capped) when the caller
 *    reads data, and the source's queue.
 *
 * The store source (archive_read_store.c, apart so that programs reading
 * local files need not link storage/) bridges store_get()'s push callback
 * to libarchive's pull model with a helper thread and a bounded queue.
 */
#include "config.h"
#include "engine/archive_read.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"

#define READ_BLOCK (64u << 10)
#define INFLATE_OUT (256u << 10)	/* tar bytes handed to libarchive at once */
#define TAR_END_BLOCKS 1024		/* two 512-byte blocks of zeros */

struct tarread {
	struct archive *a;
	struct tarread_src src;
	struct tarread_opts o;
	uint64_t bytes_in;		/* compressed bytes from the source */
	uint64_t bytes_out;		/* tar bytes inflated */
	/* the gzip layer (zlib) */
	z_stream z;
	int z_ready;			/* inflateInit2 done */
	int in_member;			/* inside a gzip member */
	int src_eof;			/* the source said end */
	uint64_t members;		/* gzip members started */
	unsigned char *zout;		/* INFLATE_OUT bytes */
	int64_t tar_pos;		/* tar bytes consumed after the last entry */
	uint64_t index;			/* ordinal of the next entry */
	int have_entry;			/* an entry is current */
	int entry_read;			/* its data was consumed */
	int done;			/* clean end reached */
	char cur[TARREAD_PATH_MAX + 1];	/* current (or last) entry, escaped */
	uint64_t cur_size;
	struct cairn_err fatal;		/* sticky stream error */
	struct cairn_err src_err;	/* why the source failed */
};

/* ---- sources ---------------------------------------------------------- */

struct mem_src {
	const unsigned char *p;
	size_t len;
	size_t pos;
};

static ssize_t
mem_read(void *arg, const void **p, struct cairn_err *err)
{
	struct mem_src *m = arg;
	size_t n = m->len - m->pos;

	(void)err;
	if (n > READ_BLOCK)
		n = READ_BLOCK;
	*p = m->p + m->pos;
	m->pos += n;
	return (ssize_t)n;
}

void
tarread_src_mem(struct tarread_src *src, const void *data, size_t len)
{
	struct mem_src *m = xcalloc(1, sizeof *m);

	m->p = data;
	m->len = len;
	src->read = mem_read;
	src->close = free;
	src->arg = m;
}

struct fd_src {
	int fd;
	unsigned char buf[READ_BLOCK];
};

static ssize_t
fd_read(void *arg, const void **p, struct cairn_err *err)
{
	struct fd_src *f = arg;
	ssize_t n;

	do
		n = read(f->fd, f->buf, sizeof f->buf);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return cairn_err_errno(err, CAIRN_EIO, errno, "reading tarball");
	*p = f->buf;
	return n;
}

void
tarread_src_fd(struct tarread_src *src, int fd)
{
	struct fd_src *f = xcalloc(1, sizeof *f);

	f->fd = fd;
	src->read = fd_read;
	src->close = free;
	src->arg = f;
}

/* ---- names ------------------------------------------------------------ */

int
tarread_check_path(const char *path, char *why)
{
	const char *p = path, *seg;
	size_t len = strlen(path);

	why[0] = '\0';
	if (len == 0) {
		snprintf(why, TARREAD_WHY_MAX, "empty entry name");
		return CAIRN_EINVAL;
	}
	if (len > TARREAD_PATH_MAX) {
		snprintf(why, TARREAD_WHY_MAX, "entry name is %zu bytes, "
		    "over %d", len, TARREAD_PATH_MAX);
		return CAIRN_EINVAL;
	}
	if (path[0] == '/') {
		snprintf(why, TARREAD_WHY_MAX, "absolute path");
		return CAIRN_EINVAL;
	}
	for (const unsigned char *c = (const unsigned char *)path; *c; c++)
		if (*c < 0x20 || *c == 0x7f || *c == '\\') {
			snprintf(why, TARREAD_WHY_MAX,
			    "control character or backslash in the name");
			return CAIRN_EINVAL;
		}
	while (*p != '\0') {
		size_t n;

		seg = p;
		n = strcspn(seg, "/");
		if (n == 2 && seg[0] == '.' && seg[1] == '.') {
			snprintf(why, TARREAD_WHY_MAX, "'..' in the path");
			return CAIRN_EINVAL;
		}
		if (n == 0 || (n == 1 && seg[0] == '.')) {
			snprintf(why, TARREAD_WHY_MAX,
			    "empty or '.' segment in the path");
			return CAIRN_EINVAL;
		}
		p = seg + n;
		if (*p == '/')
			p++;
	}
	return 0;
}

/* Keep an escaped copy of name in r->cur for messages. */
static void
set_current(struct tarread *r, const char *name)
{
	struct buf b;

	buf_init(&b, TARREAD_PATH_MAX);
	if (str_escape_text(&b, name) < 0 || b.len > TARREAD_PATH_MAX) {
		buf_reset(&b);
		(void)buf_append(&b, name, strnlen(name, 200));
		(void)buf_puts(&b, "...");
	}
	snprintf(r->cur, sizeof r->cur, "%s", buf_cstr(&b));
	buf_free(&b);
}

/* ---- the libarchive side ---------------------------------------------- */

static int caps_exceeded(const struct tarread *r, char *why, size_t whysz);

/* A gzip-layer failure: stored as the source's error, -1 to libarchive. */
static la_ssize_t gz_fail(struct tarread *r, struct archive *a, int code,
    const char *fmt, ...) CAIRN_PRINTF(4, 5);

static la_ssize_t
gz_fail(struct tarread *r, struct archive *a, int code, const char *fmt, ...)
{
	va_list ap;
	char msg[CAIRN_ERR_MSG_MAX];

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	cairn_err_set(&r->src_err, code, "%s", msg);
	archive_set_error(a, EIO, "%s", msg);
	return -1;
}

/*
 * libarchive's read callback: the next run of tar bytes, inflated from
 * the source's gzip members. Ends (0) only at the end of the input after
 * a complete member; input that ends inside a member, a member whose
 * CRC-32 or length does not match, and bytes after a member that are not
 * another member are errors naming the member.
 */
static la_ssize_t
la_read(struct archive *a, void *client, const void **buff)
{
	struct tarread *r = client;

	for (;;) {
		uLong before;
		size_t got;
		int zrc;

		if (r->o.stop != NULL && *r->o.stop) {
			cairn_err_set(&r->src_err, CAIRN_ECANCELED,
			    "restore stopped");
			archive_set_error(a, ECANCELED, "stopped");
			return -1;
		}
		if (r->z.avail_in == 0 && !r->src_eof) {
			const void *p = NULL;
			ssize_t n = r->src.read(r->src.arg, &p, &r->src_err);

			if (n < 0) {
				if (r->src_err.code == 0)
					cairn_err_set(&r->src_err, (int)n,
					    "source failed");
				archive_set_error(a, EIO, "%s", r->src_err.msg);
				return -1;
			}
			if (n == 0)
				r->src_eof = 1;
			r->z.next_in = (Bytef *)(uintptr_t)p;
			r->z.avail_in = (uInt)n;
			r->bytes_in += (uint64_t)n;
		}
		if (r->z.avail_in == 0) {
			if (r->in_member)
				return gz_fail(r, a, CAIRN_EPROTO, "the tarball "
				    "is truncated: its data ends inside gzip "
				    "member %llu, after %llu compressed bytes",
				    (unsigned long long)r->members,
				    (unsigned long long)r->bytes_in);
			if (r->members == 0)
				return gz_fail(r, a, CAIRN_EPROTO,
				    "empty tarball");
			return 0;
		}
		if (!r->in_member) {
			if (r->members > 0 && r->z.avail_in > 0 &&
			    r->z.next_in[0] != 0x1f)
				return gz_fail(r, a, CAIRN_EPROTO, "the tarball "
				    "is corrupt: %u bytes after gzip member "
				    "%llu are not another gzip member",
				    r->z.avail_in,
				    (unsigned long long)r->members);
			if (inflateReset2(&r->z, 15 + 16) != Z_OK)
				return gz_fail(r, a, CAIRN_EFAIL,
				    "zlib: inflateReset2 failed");
			r->in_member = 1;
			r->members++;
		}
		r->z.next_out = r->zout;
		r->z.avail_out = INFLATE_OUT;
		before = r->z.total_out;
		zrc = inflate(&r->z, Z_NO_FLUSH);
		got = (size_t)(r->z.total_out - before);
		if (zrc == Z_STREAM_END) {
			r->in_member = 0;
		} else if (zrc == Z_DATA_ERROR) {
			if (r->members == 1 && r->bytes_out == 0 && got == 0)
				return gz_fail(r, a, CAIRN_EPROTO,
				    "not a gzip-compressed tarball (%s)",
				    r->z.msg ? r->z.msg : "bad header");
			return gz_fail(r, a, CAIRN_EPROTO, "the tarball is "
			    "corrupt: gzip member %llu: %s%s",
			    (unsigned long long)r->members,
			    r->z.msg ? r->z.msg : "bad data",
			    r->z.msg != NULL && strstr(r->z.msg, "check") ?
			    " (the CRC-32 or length in its trailer does not "
			    "match its data)" : "");
		} else if (zrc != Z_OK && zrc != Z_BUF_ERROR) {
			return gz_fail(r, a, CAIRN_EFAIL, "zlib: inflate: %s",
			    r->z.msg ? r->z.msg : "error");
		}
		r->bytes_out += got;
		{
			/* also here: libarchive reads headers ahead */
			char why[200];

			if (caps_exceeded(r, why, sizeof why))
				return gz_fail(r, a, CAIRN_ETOOBIG, "%s", why);
		}
		if (got > 0) {
			*buff = r->zout;
			return (la_ssize_t)got;
		}
	}
}

uint64_t
tarread_bytes_in(const struct tarread *r)
{
	return r->bytes_in;
}

uint64_t
tarread_bytes_out(const struct tarread *r)
{
	return r->bytes_out;
}

/* Set the sticky error: err gets it too. */
static int set_fatal(struct tarread *r, struct cairn_err *err, int code,
    const char *fmt, ...) CAIRN_PRINTF(4, 5);

static int
set_fatal(struct tarread *r, struct cairn_err *err, int code,
    const char *fmt, ...)
{
	va_list ap;
	char msg[CAIRN_ERR_MSG_MAX];

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	cairn_err_set(&r->fatal, code, "%s", msg);
	return cairn_err_copy(err, &r->fatal);
}

/* A libarchive failure: the source's error wins when it caused it. */
static int
fail_archive(struct tarread *r, struct cairn_err *err, const char *where)
{
	if (r->src_err.code != 0)
		return set_fatal(r, err, r->src_err.code, "%s: %s", where,
		    r->src_err.msg);
	return set_fatal(r, err, CAIRN_EPROTO, "%s: corrupt or truncated tarball: %s",
	    where, archive_error_string(r->a) ? archive_error_string(r->a) :
	    "unknown libarchive error");
}

/* Over the total or the ratio cap? Then why says which, else "". */
static int
caps_exceeded(const struct tarread *r, char *why, size_t whysz)
{
	uint64_t out = r->bytes_out, in = r->bytes_in;

	why[0] = '\0';
	if (out > r->o.total_cap)
		snprintf(why, whysz, "tarball expands past %llu bytes (cap): "
		    "refusing it", (unsigned long long)r->o.total_cap);
	else if (out > r->o.ratio_min && in > 0 && out / in > r->o.ratio_cap)
		snprintf(why, whysz, "compression ratio over %u:1 after %llu "
		    "bytes (gzip bomb?): refusing the tarball",
		    r->o.ratio_cap, (unsigned long long)out);
	return why[0] != '\0';
}

/* Check the total and ratio caps; the message names the entry. */
static int
check_caps(struct tarread *r, struct cairn_err *err)
{
	char why[200];

	if (caps_exceeded(r, why, sizeof why))
		return set_fatal(r, err, CAIRN_ETOOBIG, "entry \"%s\": %s",
		    r->cur, why);
	if (r->o.stop != NULL && *r->o.stop)
		return set_fatal(r, err, CAIRN_ECANCELED, "restore stopped");
	return 0;
}

/*
 * One data block of the current entry: 1 with *p and *n, 0 at its end, or a
 * fatal error.
 */
static int
read_block(struct tarread *r, const void **p, size_t *n,
    struct cairn_err *err)
{
	la_int64_t off;
	int rc;

	rc = archive_read_data_block(r->a, p, n, &off);
	if (rc == ARCHIVE_EOF)
		return 0;
	if (rc < ARCHIVE_WARN) {
		char where[TARREAD_PATH_MAX + 32];

		snprintf(where, sizeof where, "entry \"%s\"", r->cur);
		return fail_archive(r, err, where);
	}
	rc = check_caps(r, err);
	if (rc < 0)
		return rc;
	return 1;
}

static int
drain(struct tarread *r, struct cairn_err *err)
{
	const void *p;
	size_t n;
	int rc;

	if (!r->have_entry || r->entry_read)
		return 0;
	r->entry_read = 1;
	do
		rc = read_block(r, &p, &n, err);
	while (rc == 1);
	return rc;
}

int
tarread_open(struct tarread_src *src, const struct tarread_opts *opts,
    struct tarread **out, struct cairn_err *err)
{
	struct tarread *r = xcalloc(1, sizeof *r);

	*out = NULL;
	r->src = *src;
	if (opts != NULL)
		r->o = *opts;
	if (r->o.entry_cap == 0)
		r->o.entry_cap = CAIRN_CAP_TAR_ENTRY;
	if (r->o.total_cap == 0)
		r->o.total_cap = CAIRN_CAP_TAR_TOTAL;
	if (r->o.ratio_cap == 0)
		r->o.ratio_cap = CAIRN_CAP_TAR_RATIO;
	if (r->o.ratio_min == 0)
		r->o.ratio_min = CAIRN_CAP_TAR_RATIO_MIN;
	snprintf(r->cur, sizeof r->cur, "(start of tarball)");
	r->zout = xmalloc(INFLATE_OUT);
	if (inflateInit2(&r->z, 15 + 16) != Z_OK) {
		cairn_err_set(err, CAIRN_EFAIL, "zlib: inflateInit2 failed");
		goto fail;
	}
	r->z_ready = 1;
	r->a = archive_read_new();
	if (r->a == NULL) {
		cairn_err_set(err, CAIRN_EFAIL, "archive_read_new failed");
		goto fail;
	}
	if (archive_read_support_format_tar(r->a) != ARCHIVE_OK) {
		cairn_err_set(err, CAIRN_EFAIL, "libarchive: %s",
		    archive_error_string(r->a));
		goto fail;
	}
	if (archive_read_open(r->a, r, NULL, la_read, NULL) != ARCHIVE_OK) {
		/* The first read failed: report it at tarread_next(). */
		fail_archive(r, NULL, "opening tarball");
	}
	*out = r;
	return 0;
fail:
	tarread_free(r);
	return err != NULL ? err->code : CAIRN_EFAIL;
}

/* Classify the current header into e. */
static void
classify(struct tarread *r, struct archive_entry *ae, struct tarread_entry *e)
{
	const char *path = archive_entry_pathname(ae);
	mode_t type = archive_entry_filetype(ae);
	int64_t size = archive_entry_size(ae);

	e->verdict = TARREAD_OK;
	e->why[0] = '\0';
	e->size = size > 0 ? (uint64_t)size : 0;
	e->index = r->index;
	if (path == NULL)
		path = "";
	set_current(r, path);
	e->path = path;
	if (archive_entry_hardlink(ae) != NULL) {
		e->verdict = TARREAD_BAD;
		snprintf(e->why, sizeof e->why, "hard link (to \"%.100s\")",
		    archive_entry_hardlink(ae));
	} else if (type == AE_IFLNK || archive_entry_symlink(ae) != NULL) {
		e->verdict = TARREAD_BAD;
		snprintf(e->why, sizeof e->why, "symbolic link");
	} else if (type == AE_IFDIR) {
		e->verdict = TARREAD_WARN;
		snprintf(e->why, sizeof e->why,
		    "directory entry (ignored: tarballs carry files only)");
	} else if (type == AE_IFCHR || type == AE_IFBLK) {
		e->verdict = TARREAD_BAD;
		snprintf(e->why, sizeof e->why, "device node");
	} else if (type == AE_IFIFO || type == AE_IFSOCK) {
		e->verdict = TARREAD_BAD;
		snprintf(e->why, sizeof e->why, "fifo or socket");
	} else if (type != AE_IFREG) {
		e->verdict = TARREAD_BAD;
		snprintf(e->why, sizeof e->why, "not a regular file");
	} else if (tarread_check_path(path, e->why) < 0) {
		e->verdict = TARREAD_BAD;
	} else if (e->size > r->o.entry_cap) {
		e->verdict = TARREAD_BAD;
		snprintf(e->why, sizeof e->why, "entry is %llu bytes, over the "
		    "cap of %llu", (unsigned long long)e->size,
		    (unsigned long long)r->o.entry_cap);
	}
	if (e->verdict != TARREAD_OK) {
		/* Bad names are shown escaped. */
		e->path = r->cur;
	}
}

int
tarread_next(struct tarread *r, struct tarread_entry *e,
    struct cairn_err *err)
{
	struct archive_entry *ae;
	int rc;

	if (r->fatal.code != 0)
		return cairn_err_copy(err, &r->fatal);
	if (r->done)
		return 0;
	rc = drain(r, err);
	if (rc < 0)
		return rc;
	r->have_entry = 0;
	r->tar_pos = archive_filter_bytes(r->a, 0);
	rc = archive_read_next_header(r->a, &ae);
	if (rc == ARCHIVE_EOF) {
		if (r->src_err.code != 0)
			return set_fatal(r, err, r->src_err.code, "after entry "
			    "\"%s\": %s", r->cur, r->src_err.msg);
		if (r->index == 0 && r->bytes_in == 0)
			return set_fatal(r, err, CAIRN_EPROTO, "empty tarball");
		/* libarchive also ends quietly at the end of the input */
		if (archive_filter_bytes(r->a, 0) - r->tar_pos < TAR_END_BLOCKS)
			return set_fatal(r, err, CAIRN_EPROTO, "the tarball is "
			    "truncated: it ends after entry \"%s\" without "
			    "the tar end-of-archive blocks", r->index > 0 ?
			    r->cur : "(none)");
		/* the rest of the input (record padding) must be whole gzip
		 * too: its last member's CRC is checked only when read */
		for (;;) {
			const void *p;
			la_ssize_t n = la_read(r->a, r, &p);

			if (n == 0)
				break;
			if (n < 0)
				return set_fatal(r, err, r->src_err.code,
				    "after the end of the tarball: %s",
				    r->src_err.msg);
		}
		r->done = 1;
		return 0;
	}
	if (rc < ARCHIVE_WARN) {
		char where[TARREAD_PATH_MAX + 32];

		if (r->index == 0)
			snprintf(where, sizeof where, "start of tarball");
		else
			snprintf(where, sizeof where, "after entry \"%s\"",
			    r->cur);
		return fail_archive(r, err, where);
	}
	rc = check_caps(r, err);
	if (rc < 0)
		return rc;
	classify(r, ae, e);
	r->index++;
	r->have_entry = 1;
	r->entry_read = 0;
	r->cur_size = e->size;
	return 1;
}

int
tarread_data(struct tarread *r, struct buf *out, struct cairn_err *err)
{
	const void *p;
	size_t n;
	int rc;

	buf_reset(out);
	if (r->fatal.code != 0)
		return cairn_err_copy(err, &r->fatal);
	if (!r->have_entry || r->entry_read)
		return cairn_err_set(err, CAIRN_EINVAL, "no entry to read");
	if (r->cur_size > r->o.entry_cap) {
		rc = drain(r, err);
		if (rc < 0)
			return rc;
		return cairn_err_set(err, CAIRN_ETOOBIG, "entry \"%s\" is "
		    "over the cap of %llu bytes", r->cur,
		    (unsigned long long)r->o.entry_cap);
	}
	r->entry_read = 1;
	for (;;) {
		rc = read_block(r, &p, &n, err);
		if (rc <= 0)
			break;
		if (out->len + n > r->o.entry_cap || buf_append(out, p, n) < 0) {
			/* The header lied about the size: drain the rest. */
			r->entry_read = 0;
			rc = drain(r, err);
			buf_reset(out);
			if (rc < 0)
				return rc;
			return cairn_err_set(err, CAIRN_ETOOBIG, "entry \"%s\" "
			    "is over the cap of %llu bytes", r->cur,
			    (unsigned long long)r->o.entry_cap);
		}
	}
	if (rc < 0) {
		buf_reset(out);
		return rc;
	}
	if (out->data == NULL)
		(void)buf_append(out, "", 0);
	return 0;
}

int
tarread_json_text(struct tarread *r, cJSON **out, struct buf *text,
    struct cairn_err *err)
{
	struct cairn_err perr = CAIRN_ERR_INIT;
	int rc;

	*out = NULL;
	rc = tarread_data(r, text, err);
	if (rc < 0)
		return rc;
	*out = json_parse(text->data != NULL ? text->data : "", text->len,
	    &perr);
	if (*out == NULL)
		return cairn_err_set(err, CAIRN_EINVAL, "entry \"%s\": %s",
		    r->cur, perr.msg);
	return 0;
}

int
tarread_json(struct tarread *r, cJSON **out, struct cairn_err *err)
{
	struct buf b;
	int rc;

	buf_init(&b, r->o.entry_cap + 1);
	rc = tarread_json_text(r, out, &b, err);
	buf_free(&b);
	return rc;
}

void
tarread_free(struct tarread *r)
{
	if (r == NULL)
		return;
	if (r->a != NULL)
		archive_read_free(r->a);
	if (r->z_ready)
		inflateEnd(&r->z);
	free(r->zout);
	if (r->src.close != NULL)
		r->src.close(r->src.arg);
	free(r);
}
