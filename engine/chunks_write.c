/*
 * chunks_write.c: one deduplicated copy of a volume's file data.
 * Contract in chunks.h.
 *
 * Start (chunks_writer_open): the chunk names of this location, then the
 * refs pin (our refs, not final: the packs an earlier attempt of this
 * copy pinned and the parent's, written before anything else of ours),
 * then the parent's refs checked again (deleted meanwhile: no parent),
 * then the parent's index spooled to an unlinked temp file and read twice:
 * once whole, into the table of stored chunks (chunk name -> pack,
 * offset, length), then in step with the walk (both are in the walk's
 * order), so that an unchanged file's list is found without a lookup
 * structure as big as the tree.
 *
 * A file (chunks_file): its data extents (SEEK_DATA/SEEK_HOLE) are read 1
 * MiB at a time, cut (engine/chunker.h), each chunk named and looked up;
 * a new one is deflated (kept raw when that does not make it smaller) and
 * appended to the open pack, which is stored whole when the next record
 * would pass the pack size, and whenever the caller is about to upload an
 * index part (chunks_flush). Memory: one chunk (4 MiB), its deflated copy,
 * the open pack, the table (about 80 bytes a chunk).
 */
#include "config.h"
#include "engine/chunks_int.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "base/fault.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/util.h"
#include "engine/chunker.h"

#define CW_IO	(1u << 20)

struct chunks_writer {
	struct chunks_config c;		/* strings point at the copies */
	char *vol_dir, *backup, *parent, *parent_index, *spool_dir;
	char *refs_key;
	struct ch_hasher h;
	struct ch_table t;
	size_t npinned;			/* packs 0..npinned-1 are pinned */
	/* the open pack */
	unsigned char *pack;
	size_t pack_len, pack_cap;
	uint32_t pack_idx;
	int pack_open;
	unsigned char *dir;		/* the open pack's directory */
	size_t dir_len, dir_cap;
	/* a file being chunked */
	struct chunker ck;
	unsigned char *cbuf, *io, *zbuf;
	size_t clen, zcap;
	z_stream z;
	int z_ok;
	/* the parent's index, read in step with the walk */
	int pfd;
	struct archive *pa;
	struct archive_entry *pe;
	char *ppath;
	int peof;
	struct chunks_stats st;
};

/* ---- the open pack -------------------------------------------------------- */

static int
cw_fence(struct chunks_writer *w, struct cairn_err *err)
{
	if (w->c.stop != NULL && *w->c.stop)
		return cairn_err_set(err, CAIRN_ECANCELED, "stopped");
	return w->c.fence != NULL ? w->c.fence(w->c.arg, err) : 0;
}

int
chunks_flush(struct chunks_writer *w, struct cairn_err *err)
{
	char *key;
	int rc;

	if (!w->pack_open || w->pack_len == 0)
		return 0;
	rc = cw_fence(w, err);
	if (rc < 0)
		return rc;
	key = xasprintf("%spacks/%s", w->vol_dir, w->t.packs[w->pack_idx]);
	rc = store_put_mem(w->c.s, key, w->pack, w->pack_len, err);
	if (rc == 0) {
		/* its directory, for a resume: "<name>.pack" -> "<name>.dir" */
		strcpy(key + strlen(key) - strlen(CH_PACK_SUFFIX), CH_DIR_SUFFIX);
		rc = store_put_mem(w->c.s, key, w->dir, w->dir_len, err);
	}
	free(key);
	if (rc < 0)
		return rc;
	w->st.uploaded += w->pack_len + w->dir_len;
	w->st.packs++;
	fault_point("volume.after-pack");
	w->pack_open = 0;
	w->pack_len = 0;
	w->dir_len = 0;
	return 0;
}

/* A new pack, named after the backup and 8 random bytes. */
static void
pack_start(struct chunks_writer *w)
{
	unsigned char r[8];
	char hex[17], *name;

	rand_bytes(r, sizeof r);
	str_hex(r, sizeof r, hex);
	name = xasprintf("%s-%s" CH_PACK_SUFFIX, w->backup, hex);
	w->pack_idx = ch_table_pack(&w->t, name);
	free(name);
	if (w->pack == NULL) {
		w->pack_cap = 2 * w->c.pack_size + CH_REC_MAX;
		w->pack = xmalloc(w->pack_cap);
	}
	w->pack_open = 1;
	w->pack_len = 0;
	w->dir_len = 0;
}

/*
 * Store a new chunk: deflated (or raw) as a record of the open pack; loc
 * gets where it is.
 */
static int
chunk_store(struct chunks_writer *w, const unsigned char *p, size_t n,
    const unsigned char hash[CH_HASH_LEN], struct ch_loc *loc,
    struct cairn_err *err)
{
	const unsigned char *payload = p;
	size_t plen = n;
	unsigned char *rec;
	int flags = 0, zr, rc;

	if (w->z_ok && deflateReset(&w->z) == Z_OK) {
		w->z.next_in = (Bytef *)(uintptr_t)p;
		w->z.avail_in = (uInt)n;
		w->z.next_out = w->zbuf;
		w->z.avail_out = (uInt)w->zcap;
		zr = deflate(&w->z, Z_FINISH);
		if (zr == Z_STREAM_END && w->z.total_out < n) {
			payload = w->zbuf;
			plen = w->z.total_out;
			flags = CH_FLAG_DEFLATE;
		}
	}
	/* a file larger than a pack: cut it, at twice the pack size */
	if (w->pack_open && w->pack_len > 0 &&
	    w->pack_len + CH_REC_HDR + plen > 2 * w->c.pack_size) {
		rc = chunks_flush(w, err);
		if (rc < 0)
			return rc;
	}
	if (!w->pack_open)
		pack_start(w);
	rec = w->pack + w->pack_len;
	memcpy(rec, CH_REC_MAGIC, 4);
	rec[4] = (unsigned char)flags;
	rec[5] = rec[6] = rec[7] = 0;
	ch_put_be(rec + 8, n, 4);
	ch_put_be(rec + 12, plen, 4);
	memcpy(rec + 16, hash, CH_HASH_LEN);
	memcpy(rec + CH_REC_HDR, payload, plen);
	loc->pack = w->pack_idx;
	loc->plain = (uint32_t)n;
	loc->rec_len = (uint32_t)(CH_REC_HDR + plen);
	loc->pack_off = w->pack_len;
	w->pack_len += loc->rec_len;
	if (w->dir_len + CH_DIR_REC > w->dir_cap) {
		w->dir_cap = w->dir_cap ? w->dir_cap * 2 : 64 * CH_DIR_REC;
		w->dir = xrealloc(w->dir, w->dir_cap);
	}
	rec = w->dir + w->dir_len;
	memcpy(rec, hash, CH_HASH_LEN);
	ch_put_be(rec + CH_HASH_LEN, loc->pack_off, 8);
	ch_put_be(rec + CH_HASH_LEN + 8, loc->rec_len, 4);
	ch_put_be(rec + CH_HASH_LEN + 12, loc->plain, 4);
	w->dir_len += CH_DIR_REC;
	return 0;
}

/* One chunk of a file at offset off: named, stored unless known, listed. */
static int
chunk_emit(struct chunks_writer *w, uint64_t off, const unsigned char *p,
    size_t n, struct buf *out, struct cairn_err *err)
{
	struct ch_ref r;
	struct ch_loc nl;
	const struct ch_loc *loc;
	int rc;

	memset(&r, 0, sizeof r);
	if (ch_hash(&w->h, p, n, r.hash) < 0)
		return cairn_err_set(err, CAIRN_EFAIL, "hashing a chunk "
		    "(libcrypto)");
	loc = ch_table_find(&w->t, r.hash);
	if (loc != NULL) {
		w->st.reused += n;
		w->st.chunks_reused++;
	} else {
		rc = chunk_store(w, p, n, r.hash, &nl, err);
		if (rc < 0)
			return rc;
		ch_table_put(&w->t, r.hash, &nl);
		loc = &nl;
		w->st.chunks_new++;
	}
	w->t.pack_used[loc->pack] = 1;
	r.off = off;
	r.plain = loc->plain;
	snprintf(r.pack, sizeof r.pack, "%s", w->t.packs[loc->pack]);
	r.pack_off = loc->pack_off;
	r.rec_len = loc->rec_len;
	ch_ref_print(out, &r);
	return 0;
}

/* ---- a file ---------------------------------------------------------------- */

/* Bytes [pos, end) of fd, one data extent: read, cut, emitted. */
static int
file_extent(struct chunks_writer *w, int fd, const char *rel, off_t pos,
    off_t end, struct buf *out, struct cairn_err *err)
{
	uint64_t cstart = (uint64_t)pos;
	size_t used, want;
	ssize_t n;
	int cut, rc;

	chunker_reset(&w->ck);
	w->clen = 0;
	while (pos < end) {
		if (w->c.stop != NULL && *w->c.stop)
			return cairn_err_set(err, CAIRN_ECANCELED, "stopped");
		want = end - pos < CW_IO ? (size_t)(end - pos) : CW_IO;
		n = pread(fd, w->io, want, pos);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return cairn_err_errno(err, CAIRN_EIO, errno, "reading "
			    "\"%s\"", rel);
		if (n == 0)
			break;		/* shrank while we read: the rest is a hole */
		for (size_t i = 0; i < (size_t)n; i += used) {
			used = chunker_scan(&w->ck, w->io + i, (size_t)n - i,
			    &cut);
			memcpy(w->cbuf + w->clen, w->io + i, used);
			w->clen += used;
			if (!cut)
				continue;
			rc = chunk_emit(w, cstart, w->cbuf, w->clen, out, err);
			if (rc < 0)
				return rc;
			cstart += w->clen;
			w->clen = 0;
		}
		pos += n;
		w->st.read += (uint64_t)n;
		if (w->c.tick != NULL && (rc = w->c.tick(w->c.arg, (uint64_t)n,
		    err)) < 0)
			return rc;
	}
	if (w->clen > 0)
		return chunk_emit(w, cstart, w->cbuf, w->clen, out, err);
	return 0;
}

/* The whole file read, its extents found with SEEK_DATA / SEEK_HOLE. */
static int
file_read(struct chunks_writer *w, int fd, const char *rel,
    const struct stat *st, struct buf *out, struct cairn_err *err)
{
	off_t size = st->st_size, pos = 0, data, hole;
	int rc;

	ch_head_print(out, w->h.name, st);
	while (pos < size) {
		data = lseek(fd, pos, SEEK_DATA);
		if (data < 0)
			data = errno == ENXIO ? size : pos;
		if (data >= size)
			break;
		if (data > pos && w->c.tick != NULL &&
		    (rc = w->c.tick(w->c.arg, (uint64_t)(data - pos), err)) < 0)
			return rc;	/* a hole counts as covered */
		hole = lseek(fd, data, SEEK_HOLE);
		if (hole <= data || hole > size)
			hole = size;
		rc = file_extent(w, fd, rel, data, hole, out, err);
		if (rc < 0)
			return rc;
		pos = hole;
	}
	if (pos < size && w->c.tick != NULL)
		return w->c.tick(w->c.arg, (uint64_t)(size - pos), err);
	return 0;
}

/* ---- the parent, in step with the walk -------------------------------------- */

/* Move the parent's index to the first entry >= rel; 1 if it is rel. */
static int
parent_seek(struct chunks_writer *w, const char *rel)
{
	int c;

	while (!w->peof) {
		if (w->ppath != NULL && (c = str_path_cmp(w->ppath, rel)) >= 0)
			return c == 0;
		FREE_NULL(w->ppath);
		if (archive_read_next_header(w->pa, &w->pe) != ARCHIVE_OK) {
			w->peof = 1;	/* the end, or damage: no more reuse */
			break;
		}
		if (strcmp(archive_entry_pathname(w->pe), ".") != 0)
			w->ppath = xstrdup(archive_entry_pathname(w->pe));
	}
	return 0;
}

struct reuse {
	struct chunks_writer *w;
	const struct stat *st;
	struct buf *out;
	int differs;
};

static int
reuse_line(void *arg, char *line, int n, struct cairn_err *err)
{
	struct reuse *u = arg;
	const struct stat *st = u->st;
	struct ch_head h;
	struct ch_ref r;
	uint32_t pi;

	(void)err;
	memset(&h, 0, sizeof h);
	if (n == 1 && (ch_head_parse(line, 1, &h) < 0 ||
	    strcmp(h.hash_name, u->w->h.name) != 0))
		goto differs;
	if (n == 2 && (ch_head_parse(line, 2, &h) < 0 ||
	    h.size != (uint64_t)st->st_size ||
	    h.mtime_s != st->st_mtim.tv_sec ||
	    h.mtime_ns != st->st_mtim.tv_nsec ||
	    h.ctime_s != st->st_ctim.tv_sec ||
	    h.ctime_ns != st->st_ctim.tv_nsec ||
	    h.ino != (uint64_t)st->st_ino || h.dev != (uint64_t)st->st_dev))
		goto differs;
	if (n > 2) {
		/* only packs the pin protects */
		if (ch_ref_parse(line, &r) < 0)
			goto differs;
		pi = ch_table_pack(&u->w->t, r.pack);
		if (pi >= u->w->npinned)
			goto differs;
		u->w->t.pack_used[pi] = 1;
	}
	buf_puts(u->out, line);
	buf_putc(u->out, '\n');
	return 0;
differs:
	u->differs = 1;
	return CAIRN_ECANCELED;
}

/* 1 when the parent's list of an unchanged rel is in out, 0 if not. */
static int
file_unchanged(struct chunks_writer *w, const char *rel,
    const struct stat *st, struct buf *out, struct cairn_err *err)
{
	struct cairn_err e = CAIRN_ERR_INIT;
	struct reuse u = { w, st, out, 0 };
	int rc;

	(void)err;
	if (w->pa == NULL || !parent_seek(w, rel) ||
	    !chunks_entry_is_list(w->pe))
		return 0;
	rc = ch_list_read(w->pa, rel, reuse_line, &u, &e);
	FREE_NULL(w->ppath);	/* its data is consumed: move on next time */
	if (rc < 0 || u.differs) {
		buf_reset(out);
		return 0;
	}
	w->st.reused += (uint64_t)st->st_size;
	w->st.files_unchanged++;
	return 1;
}

int
chunks_file(struct chunks_writer *w, int fd, const char *rel,
    const struct stat *st, struct buf *out, struct cairn_err *err)
{
	buf_reset(out);
	if (file_unchanged(w, rel, st, out, err)) {
		if (w->c.tick != NULL)
			return w->c.tick(w->c.arg, (uint64_t)st->st_size, err);
		return 0;
	}
	return file_read(w, fd, rel, st, out, err);
}

void
chunks_mark_entry(struct archive_entry *e, size_t list_len)
{
	archive_entry_sparse_clear(e);
	archive_entry_set_size(e, (la_int64_t)list_len);
	archive_entry_xattr_add_entry(e, CHUNKS_MARKER, "1", 1);
}

/* ---- the parent's index -------------------------------------------------- */

static int
spool_write(void *arg, const void *p, size_t n)
{
	return util_write_all(*(int *)arg, p, n);
}

/* key downloaded into an unlinked temp file (*fd, at offset 0). */
static int
spool_object(struct chunks_writer *w, const char *key, int *fd,
    struct cairn_err *err)
{
	int rc;

	*fd = util_tmpfd(w->spool_dir, "index");
	if (*fd < 0)
		return cairn_err_errno(err, CAIRN_EIO, errno, "spool file in "
		    "%s", util_tmpdir_label(w->spool_dir));
	rc = store_get(w->c.s, key, 0, -1, spool_write, fd, NULL, err);
	if (rc == CAIRN_ECANCELED)
		rc = cairn_err_set(err, CAIRN_EIO, "spooling %s: %s", key,
		    "writing the spool file failed");
	if (rc == 0 && lseek(*fd, 0, SEEK_SET) < 0)
		rc = cairn_err_errno(err, CAIRN_EIO, errno, "spool file");
	if (rc < 0) {
		close(*fd);
		*fd = -1;
	}
	return rc;
}

/* A libarchive reader of the tar.gz in fd from its start. */
static struct archive *
index_open(int fd)
{
	struct archive *a = archive_read_new();

	archive_read_support_filter_gzip(a);
	archive_read_support_format_tar(a);
	if (lseek(fd, 0, SEEK_SET) < 0 ||
	    archive_read_open_fd(a, fd, 65536) != ARCHIVE_OK) {
		archive_read_free(a);
		return NULL;
	}
	return a;
}

struct scan {
	struct chunks_writer *w;
	int fill;		/* put chunks in the table (else: mark packs used) */
	int foreign;		/* a pack the pin does not protect */
};

static int
scan_line(void *arg, char *line, int n, struct cairn_err *err)
{
	struct scan *sc = arg;
	struct ch_loc loc;
	struct ch_ref r;

	if (n <= 2)
		return 0;
	if (ch_ref_parse(line, &r) < 0)
		return cairn_err_set(err, CAIRN_EPROTO, "a chunk list line is "
		    "not one: %.100s", line);
	loc.pack = ch_table_pack(&sc->w->t, r.pack);
	if (!sc->fill) {
		sc->w->t.pack_used[loc.pack] = 1;
		return 0;
	}
	if (loc.pack >= sc->w->npinned) {
		sc->foreign = 1;
		return CAIRN_EPROTO;
	}
	loc.plain = r.plain;
	loc.rec_len = r.rec_len;
	loc.pack_off = r.pack_off;
	ch_table_put(&sc->w->t, r.hash, &loc);
	return 0;
}

/*
 * Every chunk list of the index in fd: into the table (fill), or its
 * packs marked used.
 */
static int
index_scan(struct chunks_writer *w, int fd, const char *key, int fill,
    struct cairn_err *err)
{
	struct scan sc = { w, fill, 0 };
	struct archive *a = index_open(fd);
	struct archive_entry *e;
	int lr, rc = 0;

	if (a == NULL)
		return cairn_err_set(err, CAIRN_EPROTO, "%s: not readable",
		    key);
	while ((lr = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		if (w->c.stop != NULL && *w->c.stop) {
			rc = cairn_err_set(err, CAIRN_ECANCELED, "stopped");
			break;
		}
		if (!chunks_entry_is_list(e))
			continue;
		rc = ch_list_read(a, archive_entry_pathname(e), scan_line, &sc,
		    err);
		if (rc < 0)
			break;
	}
	if (rc == 0 && lr != ARCHIVE_EOF)
		rc = cairn_err_set(err, CAIRN_EPROTO, "%s: %s", key,
		    archive_error_string(a));
	if (sc.foreign)
		rc = cairn_err_set(err, CAIRN_EPROTO, "%s names a pack its "
		    "refs do not", key);
	archive_read_free(a);
	return rc;
}

/* ---- start and end ------------------------------------------------------------ */

/* Add the packs of refs key to the pin (interned first). 0, or its error. */
static int
pin_refs(struct chunks_writer *w, const char *key, int need_hash,
    struct cairn_err *err)
{
	char **packs = NULL, hash[CHUNKS_HASH_NAME_MAX];
	int final = 0, rc;

	rc = ch_refs_read(w->c.s, key, &packs, &final, hash, sizeof hash, err);
	if (rc < 0)
		return rc;
	if (need_hash && strcmp(hash, w->h.name) != 0) {
		strv_free(packs);
		return cairn_err_set(err, CAIRN_EPROTO, "its chunks are named "
		    "with %s, this copy's with %s", hash, w->h.name);
	}
	for (size_t i = 0; packs[i] != NULL; i++)
		ch_table_pack(&w->t, packs[i]);
	w->npinned = w->t.npacks;
	strv_free(packs);
	return 0;
}

/* Drop the parent (why logged); the copy stores everything. */
static void
parent_drop(struct chunks_writer *w, const char *why)
{
	log_warn("volume copy %s: not building on backup %s (%s): storing "
	    "every chunk", w->refs_key, w->parent, why);
	FREE_NULL(w->parent);
	if (w->pa != NULL)
		archive_read_free(w->pa);
	w->pa = NULL;
	if (w->pfd >= 0)
		close(w->pfd);
	w->pfd = -1;
	/* the table forgets the parent's chunks; the pin stays */
	for (size_t i = 0; i < w->t.slots; i++)
		w->t.full[i] = 0;
	w->t.used = 0;
}

/* The parent: pinned, checked again, its index read. */
static int
parent_open(struct chunks_writer *w, struct cairn_err *err)
{
	struct cairn_err e = CAIRN_ERR_INIT;
	struct store_stat ss;
	char *pkey = ch_refs_key(w->vol_dir, w->parent);
	int rc;

	rc = store_head(w->c.s, pkey, &ss, &e);
	free(pkey);
	if (rc == CAIRN_ENOTFOUND) {
		parent_drop(w, "it is being deleted");
		return 0;
	}
	if (rc < 0)
		return cairn_err_copy(err, &e);
	rc = spool_object(w, w->parent_index, &w->pfd, &e);
	if (rc == 0)
		rc = index_scan(w, w->pfd, w->parent_index, 1, &e);
	if (rc == CAIRN_ENOTFOUND || rc == CAIRN_EPROTO) {
		parent_drop(w, e.msg);
		return 0;
	}
	if (rc < 0)
		return cairn_err_copy(err, &e);
	w->pa = index_open(w->pfd);
	if (w->pa == NULL)
		parent_drop(w, "its index cannot be read again");
	return 0;
}

/*
 * A resumed copy: the chunks its earlier attempts stored (the directories
 * of the packs named after this backup) go into the table, so the files
 * after the checkpoint are read again but not sent again.
 */
static int
resume_load(struct chunks_writer *w, struct cairn_err *err)
{
	char *prefix = xasprintf("%spacks/%s-", w->vol_dir, w->backup);
	char *key, *data, *name;
	struct ch_keys k;
	struct ch_loc loc;
	size_t len, n = 0;
	int rc;

	rc = ch_keys_list(w->c.s, prefix, CH_DIR_SUFFIX, &k, err);
	for (size_t i = 0; rc == 0 && i < k.n; i++) {
		key = xasprintf("%s%s" CH_DIR_SUFFIX, prefix, k.v[i]);
		rc = store_get_mem(w->c.s, key, CH_PACK_MAX, &data, &len, err);
		free(key);
		if (rc == CAIRN_ENOTFOUND) {
			cairn_err_clear(err);
			rc = 0;
			continue;
		}
		if (rc < 0)
			break;
		name = xasprintf("%s-%s" CH_PACK_SUFFIX, w->backup, k.v[i]);
		if (ch_pack_name_ok(name) && len % CH_DIR_REC == 0) {
			loc.pack = ch_table_pack(&w->t, name);
			for (size_t off = 0; off < len; off += CH_DIR_REC) {
				const unsigned char *r =
				    (const unsigned char *)data + off;

				loc.pack_off = ch_get_be(r + CH_HASH_LEN, 8);
				loc.rec_len = (uint32_t)ch_get_be(r + CH_HASH_LEN +
				    8, 4);
				loc.plain = (uint32_t)ch_get_be(r + CH_HASH_LEN +
				    12, 4);
				if (loc.rec_len <= CH_REC_HDR ||
				    loc.rec_len > CH_REC_MAX ||
				    loc.plain > CHUNKER_MAX)
					continue;
				ch_table_put(&w->t, r, &loc);
				n++;
			}
		}
		free(name);
		free(data);
	}
	ch_keys_free(&k);
	free(prefix);
	if (rc == 0 && n > 0)
		log_info("volume copy %s: %zu chunks stored by an earlier attempt",
		    w->refs_key, n);
	return rc;
}

/* Our refs, not final: what we pinned before, and the parent's packs. */
static int
pin(struct chunks_writer *w, struct cairn_err *err)
{
	struct cairn_err e = CAIRN_ERR_INIT;
	char **v;
	int rc;

	rc = pin_refs(w, w->refs_key, 0, &e);
	if (rc < 0 && rc != CAIRN_ENOTFOUND && rc != CAIRN_EPROTO)
		return cairn_err_copy(err, &e);
	if (w->parent != NULL) {
		char *pkey = ch_refs_key(w->vol_dir, w->parent);

		cairn_err_clear(&e);
		rc = pin_refs(w, pkey, 1, &e);
		free(pkey);
		if (rc == CAIRN_ENOTFOUND || rc == CAIRN_EPROTO)
			parent_drop(w, e.msg);
		else if (rc < 0)
			return cairn_err_copy(err, &e);
	}
	rc = cw_fence(w, err);
	if (rc < 0)
		return rc;
	v = xcalloc(w->t.npacks + 1, sizeof *v);
	for (size_t i = 0; i < w->t.npacks; i++)
		v[i] = w->t.packs[i];
	rc = ch_refs_write(w->c.s, w->refs_key, w->backup, 0, w->h.name, v,
	    err);
	free(v);
	return rc;
}

int
chunks_writer_open(const struct chunks_config *cfg, struct chunks_writer **out,
    struct cairn_err *err)
{
	struct chunks_writer *w = xcalloc(1, sizeof *w);
	int rc;

	*out = NULL;
	w->c = *cfg;
	w->vol_dir = xstrdup(cfg->vol_dir);
	w->backup = xstrdup(cfg->backup);
	w->parent = cfg->parent != NULL && cfg->parent_index != NULL ?
	    xstrdup(cfg->parent) : NULL;
	w->parent_index = cfg->parent_index ? xstrdup(cfg->parent_index) : NULL;
	w->spool_dir = cfg->spool_dir ? xstrdup(cfg->spool_dir) : NULL;
	if (w->c.pack_size == 0)
		w->c.pack_size = CHUNKS_PACK_SIZE;
	w->refs_key = ch_refs_key(w->vol_dir, w->backup);
	w->pfd = -1;
	ch_table_init(&w->t);
	w->cbuf = xmalloc(CHUNKER_MAX);
	w->io = xmalloc(CW_IO);
	w->zcap = compressBound(CHUNKER_MAX);
	w->zbuf = xmalloc(w->zcap);
	w->z_ok = deflateInit(&w->z, Z_DEFAULT_COMPRESSION) == Z_OK;
	rc = ch_hasher_init(&w->h, w->c.s, NULL, err);
	if (rc == 0)
		rc = pin(w, err);
	if (rc == 0 && w->parent != NULL)
		rc = parent_open(w, err);
	if (rc == 0 && cfg->resume)
		rc = resume_load(w, err);
	if (rc < 0) {
		chunks_writer_free(w);
		return rc;
	}
	if (w->parent != NULL)
		log_info("volume copy %s: building on backup %s (%zu chunks "
		    "stored)", w->refs_key, w->parent, w->t.used);
	*out = w;
	return 0;
}

size_t
chunks_open_bytes(const struct chunks_writer *w)
{
	return w->pack_open ? w->pack_len : 0;
}

const char *
chunks_writer_parent(const struct chunks_writer *w)
{
	return w->parent;
}

const char *
chunks_writer_hash_name(const struct chunks_writer *w)
{
	return w->h.name;
}

int
chunks_writer_finish(struct chunks_writer *w, const char *index_key,
    int resumed, struct cairn_err *err)
{
	char **v;
	size_t n = 0;
	int fd = -1, rc;

	rc = chunks_flush(w, err);
	if (rc < 0)
		return rc;
	if (resumed) {
		/* parts of the index are an earlier attempt's: read it back */
		rc = spool_object(w, index_key, &fd, err);
		if (rc == 0)
			rc = index_scan(w, fd, index_key, 0, err);
		if (fd >= 0)
			close(fd);
		if (rc < 0)
			return rc;
	}
	v = xcalloc(w->t.npacks + 1, sizeof *v);
	for (size_t i = 0; i < w->t.npacks; i++)
		if (w->t.pack_used[i])
			v[n++] = w->t.packs[i];
	rc = cw_fence(w, err);
	if (rc == 0)
		rc = ch_refs_write(w->c.s, w->refs_key, w->backup, 1, w->h.name,
		    v, err);
	free(v);
	return rc;
}

void
chunks_writer_abandon(struct chunks_writer *w)
{
	struct cairn_err e = CAIRN_ERR_INIT;

	if (w == NULL || cw_fence(w, &e) < 0)
		return;
	if (store_delete(w->c.s, w->refs_key, &e) < 0)
		log_warn("volume copy: dropping %s: %s", w->refs_key, e.msg);
}

void
chunks_writer_stats(const struct chunks_writer *w, struct chunks_stats *st)
{
	*st = w->st;
}

void
chunks_writer_free(struct chunks_writer *w)
{
	if (w == NULL)
		return;
	if (w->pa != NULL)
		archive_read_free(w->pa);
	if (w->pfd >= 0)
		close(w->pfd);
	if (w->z_ok)
		deflateEnd(&w->z);
	ch_hasher_free(&w->h);
	ch_table_free(&w->t);
	free(w->ppath);
	free(w->pack);
	free(w->dir);
	free(w->cbuf);
	free(w->io);
	free(w->zbuf);
	free(w->vol_dir);
	free(w->backup);
	free(w->parent);
	free(w->parent_index);
	free(w->spool_dir);
	free(w->refs_key);
	free(w);
}
