/*
 * hostpath.c: the built-in hostpath mover. Contract in hostpath.h.
 *
 * Backup data path: this file is a directory walker feeding the part
 * pipeline backups use too (engine/tarparts.h, engine/partsink.h):
 *   sorted depth-first walk (openat/fstatat, never following a symlink)
 *     -> archive_read_disk_entry_from_file() for metadata (modes, owners,
 *        times, xattrs, ACLs, the sparse map taken from the open fd)
 *     -> tarparts_add_header/_data/_end_entry(): a pax writer whose
 *        bytes tarparts deflates (gzip level 6) into the open part
 *     -> tarparts_boundary() after each file: once the part reached
 *        part_size it is a complete gzip member, and the partsink spools
 *        it, asks the fence, stores it with store_mpu_put_part() and
 *        calls hp_stored(): the caller's checkpoint().
 *   Holes of sparse files are found with SEEK_DATA/SEEK_HOLE and fed to
 *   libarchive as zeros it drops (the pax writer skips hole ranges), so a
 *   1 TiB sparse file with 1 MiB of data costs 1 MiB of reading.
 *   A deduplicated copy (opts.chunk_dir, engine/chunks.h) gives each
 *   regular file to chunks_file() instead (its data extents cut into
 *   chunks, stored in packs unless the parent holds them, or the parent's
 *   list when the file did not change) and writes the chunk list as the
 *   entry's data; hp_boundary() stores the open pack at a file boundary
 *   once it is a part's size, and on stores that take small parts ends the
 *   index part with it; the partsink's fence hook stores the open pack
 *   before any part is uploaded, so a stored part only names stored chunks.
 *
 * Order and resume: names in each directory are sorted bytewise, so the
 * walk order equals comparing paths component by component (str_path_cmp()).
 * A resumed copy re-walks the tree and skips every entry that compares
 * <= the checkpoint's last_file; the parts before it are kept as stored.
 *
 * Progress: a first walk sums the logical sizes of regular files
 * (bytes_total) and counts entries; bytes_done rises with every block
 * handed to libarchive (holes included), so it ends equal to bytes_total
 * unless files grew meanwhile (then the total is raised, never lowered).
 *
 * Restore: a pull source over the stored object (tarread_src_store(),
 * its own download thread) feeds archive_read (gzip, tar); every entry
 * name is checked (no absolute path, no "..") and prefixed with the
 * realpath of the target, and archive_write_disk extracts with
 * SECURE_NODOTDOT | SECURE_SYMLINKS (so no write goes through a symlink)
 * plus PERM, TIME, XATTR, ACL, SPARSE and, as root, OWNER. The archive's
 * root entry "." is applied to the target directory itself at the end.
 * libarchive's write_disk works on paths, not on a directory fd; the
 * realpath prefix plus SECURE_SYMLINKS is what confines it.
 */
#include "config.h"
#include "engine/hostpath.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <zlib.h>

#include "base/buf.h"
#include "base/fault.h"
#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/util.h"
#include "engine/archive_read.h"
#include "engine/chunks.h"
#include "engine/partsink.h"
#include "engine/tarparts.h"
#include "storage/layout.h"

#define HP_IOBUF	(1u << 20)	/* file read chunk */
#define HP_DIR_MAX	1000000		/* entries in one directory */
#define HP_DEPTH_MAX	256		/* directory nesting */

static const char hp_zeros_buf[64 << 10];

char *
hostpath_key(const char *prefix, const char *backup, const char *volume)
{
	char *dir, *key;

	if (!layout_name_ok(volume))
		return NULL;
	dir = layout_backup_dir(prefix, backup);
	if (dir == NULL)
		return NULL;
	key = xasprintf("%svolumes/%s" CHUNKS_INDEX_SUFFIX, dir, volume);
	free(dir);
	return key;
}

int
hostpath_ckpt_encode(const struct hostpath_ckpt *ck, char *out, size_t n)
{
	cJSON *o = cJSON_CreateObject();
	char *s;
	int rc = 0;

	cJSON_AddStringToObject(o, "u", ck->upload_id);
	cJSON_AddNumberToObject(o, "p", ck->parts);
	cJSON_AddStringToObject(o, "f", ck->last_file);
	cJSON_AddNumberToObject(o, "b", (double)ck->bytes_done);
	cJSON_AddNumberToObject(o, "n", (double)ck->files_done);
	if (ck->bytes_uploaded > 0)
		cJSON_AddNumberToObject(o, "U", (double)ck->bytes_uploaded);
	if (ck->gap_from > 0) {
		cJSON_AddNumberToObject(o, "g", ck->gap_from);
		cJSON_AddNumberToObject(o, "G", ck->gap_to);
	}
	s = json_print(o);
	cJSON_Delete(o);
	if (strlen(s) >= n)
		rc = CAIRN_ETOOBIG;
	else
		memcpy(out, s, strlen(s) + 1);
	free(s);
	return rc;
}

int
hostpath_ckpt_decode(const char *s, struct hostpath_ckpt *ck)
{
	cJSON *o;
	const char *u, *f;
	int rc = CAIRN_EINVAL;

	memset(ck, 0, sizeof *ck);
	if (s == NULL || s[0] != '{')
		return CAIRN_EINVAL;
	o = json_parse(s, strlen(s), NULL);
	if (o == NULL)
		return CAIRN_EINVAL;
	u = json_str(o, "u");
	f = json_str(o, "f");
	if (u != NULL && f != NULL && strlen(u) < sizeof ck->upload_id &&
	    strlen(f) < sizeof ck->last_file && json_int(o, "p", 0) >= 1) {
		snprintf(ck->upload_id, sizeof ck->upload_id, "%s", u);
		snprintf(ck->last_file, sizeof ck->last_file, "%s", f);
		ck->parts = (int)json_int(o, "p", 0);
		ck->bytes_done = (uint64_t)json_int(o, "b", 0);
		ck->files_done = (uint64_t)json_int(o, "n", 0);
		ck->bytes_uploaded = (uint64_t)json_int(o, "U", 0);
		ck->gap_from = (int)json_int(o, "g", 0);
		ck->gap_to = (int)json_int(o, "G", 0);
		if (ck->gap_from < 0 || ck->gap_to < ck->gap_from ||
		    ck->gap_to > ck->parts)
			ck->gap_from = ck->gap_to = -1;
		rc = ck->gap_from < 0 ? CAIRN_EINVAL : 0;
	}
	cJSON_Delete(o);
	return rc;
}

/* ---- The walk ---------------------------------------------------------- */

typedef int (*walk_fn)(void *arg, int dirfd, const char *name,
    const char *rel, const struct stat *st, struct cairn_err *err);

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Visit every entry under dirfd (borrowed) in sorted depth-first order;
 * rel is the relative path of dirfd ("" for the root).
 */
static int
walk(int dirfd, const char *rel, int depth, walk_fn fn, void *arg,
    struct cairn_err *err)
{
	struct dirent *de;
	struct stat st;
	char **names = NULL, *path;
	size_t n = 0, cap = 0, i;
	DIR *d;
	int fd, sub, rc = 0, e;

	if (depth > HP_DEPTH_MAX)
		return cairn_err_set(err, CAIRN_ETOOBIG, "%s: directories "
		    "nested deeper than %d", rel, HP_DEPTH_MAX);
	fd = dup(dirfd);
	if (fd < 0 || (d = fdopendir(fd)) == NULL) {
		e = errno;
		if (fd >= 0)
			close(fd);
		return cairn_err_errno(err, CAIRN_EIO, e, "reading directory "
		    "\"%s\"", rel[0] ? rel : ".");
	}
	rewinddir(d);
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (n >= HP_DIR_MAX) {
			rc = cairn_err_set(err, CAIRN_ETOOBIG, "directory \"%s\" "
			    "has more than %d entries", rel, HP_DIR_MAX);
			break;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			names = xreallocarray(names, cap, sizeof *names);
		}
		names[n++] = xstrdup(de->d_name);
	}
	closedir(d);
	if (rc < 0)
		goto out;
	if (n > 0)
		qsort(names, n, sizeof *names, cmp_str);
	for (i = 0; i < n && rc == 0; i++) {
		path = rel[0] ? xasprintf("%s/%s", rel, names[i]) :
		    xstrdup(names[i]);
		if (strlen(path) >= HOSTPATH_PATH_MAX) {
			rc = cairn_err_set(err, CAIRN_ETOOBIG, "path longer than "
			    "%d bytes: %.200s...", HOSTPATH_PATH_MAX, path);
			free(path);
			break;
		}
		if (fstatat(dirfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
			e = errno;
			if (e != ENOENT)	/* vanished meanwhile: skip */
				rc = cairn_err_errno(err, CAIRN_EIO, e,
				    "stat \"%s\"", path);
			free(path);
			continue;
		}
		rc = fn(arg, dirfd, names[i], path, &st, err);
		if (rc == 0 && S_ISDIR(st.st_mode)) {
			sub = openat(dirfd, names[i], O_RDONLY | O_DIRECTORY |
			    O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0) {
				e = errno;
				rc = cairn_err_errno(err, CAIRN_EIO, e,
				    "opening directory \"%s\"", path);
			} else {
				rc = walk(sub, path, depth + 1, fn, arg, err);
				close(sub);
			}
		}
		free(path);
	}
out:
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

struct totals {
	uint64_t bytes, files;
};

static int
count_fn(void *arg, int dirfd, const char *name, const char *rel,
    const struct stat *st, struct cairn_err *err)
{
	struct totals *t = arg;

	(void)dirfd; (void)name; (void)rel; (void)err;
	t->files++;
	if (S_ISREG(st->st_mode))
		t->bytes += (uint64_t)st->st_size;
	return 0;
}

/* ---- Backup ------------------------------------------------------------ */

/*
 * The walker's state. The bytes go through the part pipeline shared with
 * backups: tarparts (pax entries, gzip members cut at file boundaries)
 * into a partsink (spool, upload part, then hp_stored: the checkpoint).
 */
struct hp_writer {
	struct store *s;
	const char *key;
	const struct hostpath_opts *o;
	char upload_id[STORE_UPLOAD_ID_MAX];
	struct tarparts *tp;
	struct partsink *ps;
	struct archive *disk;		/* metadata of files from disk */
	struct archive_entry *e;
	unsigned char *io;
	struct store_part *parts;	/* stored, ascending */
	size_t nparts, aparts;
	int next;			/* number of the first part to write */
	int gap_from, gap_to;		/* numbers left out (takeover), 0 0: none */
	uint64_t bytes_done, bytes_total, files_done, files_total;
	uint64_t compressed;
	uint64_t uploaded_before;	/* by earlier attempts (checkpoint) */
	uint64_t since_fence;		/* file bytes since the last fence ask */
	uint64_t packs_at_cut;		/* chunk packs stored when the last part ended */
	uint64_t done_at_cut;		/* bytes_done then */
	struct chunks_writer *cw;	/* deduplicated copy, else NULL */
	struct buf list;		/* a file's chunk list */
	char last_file[HOSTPATH_PATH_MAX];
	const char *skip_until;		/* resume: skip entries <= this */
	int closing;			/* the last part: no checkpoint */
	int writing;			/* the upload is set up: abort it on failure */
	int rc;
	struct cairn_err err;
};

/* Bytes stored for this copy: earlier attempts', parts, packs. */
static uint64_t
hp_uploaded(const struct hp_writer *w)
{
	struct chunks_stats cs;

	memset(&cs, 0, sizeof cs);
	if (w->cw != NULL)
		chunks_writer_stats(w->cw, &cs);
	return w->uploaded_before + w->compressed + cs.uploaded;
}

static void
hp_progress(struct hp_writer *w)
{
	struct hostpath_progress p;

	if (w->bytes_done > w->bytes_total)
		w->bytes_total = w->bytes_done;
	if (w->files_done > w->files_total)
		w->files_total = w->files_done;
	if (w->o->progress == NULL)
		return;
	p.bytes_done = w->bytes_done;
	p.bytes_total = w->bytes_total;
	p.files_done = w->files_done;
	p.files_total = w->files_total;
	p.bytes_uploaded = hp_uploaded(w);
	w->o->progress(w->o->arg, &p);
}

/* Ask the caller's fence (before writes, between entries, every 4 MiB). */
static int
hp_fence(struct hp_writer *w)
{
	int rc;

	if (w->o->fence == NULL)
		return 0;
	rc = w->o->fence(w->o->arg, &w->err);
	if (rc < 0 && w->rc == 0)
		w->rc = rc;
	return rc < 0 ? rc : 0;
}

static void
hp_add_part(struct hp_writer *w, const struct store_part *p)
{
	if (w->nparts == w->aparts) {
		w->aparts = w->aparts ? w->aparts * 2 : 16;
		w->parts = xreallocarray(w->parts, w->aparts, sizeof *w->parts);
	}
	w->parts[w->nparts++] = *p;
}

/* partsink: before a part is uploaded. */
static int
hp_part_fence(void *arg, int part, struct cairn_err *err)
{
	struct hp_writer *w = arg;
	int rc;

	(void)part;
	rc = hp_fence(w);
	if (rc < 0)
		return cairn_err_copy(err, &w->err);
	/* the chunks this part names are stored before it */
	if (w->cw != NULL && (rc = chunks_flush(w->cw, err)) < 0 && w->rc == 0)
		w->rc = rc;
	return rc;
}

/* partsink: a part is stored; the caller's checkpoint, but for the last. */
static int
hp_stored(void *arg, const struct store_part *p, uint64_t entries,
	struct cairn_err *err)
{
	struct hp_writer *w = arg;
	struct hostpath_ckpt ck;
	int rc;

	(void)entries;
	hp_add_part(w, p);
	w->compressed += p->size;
	if (w->cw != NULL) {
		struct chunks_stats cs;

		chunks_writer_stats(w->cw, &cs);
		w->packs_at_cut = cs.packs;
		w->done_at_cut = w->bytes_done;
	}
	if (w->closing || w->o->checkpoint == NULL)
		return 0;
	memset(&ck, 0, sizeof ck);
	snprintf(ck.upload_id, sizeof ck.upload_id, "%s", w->upload_id);
	ck.parts = p->number;
	ck.gap_from = w->gap_from;
	ck.gap_to = w->gap_to;
	snprintf(ck.last_file, sizeof ck.last_file, "%s", w->last_file);
	ck.bytes_done = w->bytes_done;
	ck.files_done = w->files_done;
	ck.bytes_uploaded = hp_uploaded(w);
	rc = w->o->checkpoint(w->o->arg, &ck, err);
	if (rc == 0)
		fault_point("volume.after-part");
	return rc;
}

/* The pipeline's error: its message in w->err, the code returned. */
static int
hp_fail(struct hp_writer *w, int rc, const struct cairn_err *e)
{
	if (w->rc < 0)
		return w->rc;	/* our own callback failed first: its message */
	w->rc = rc;
	cairn_err_copy(&w->err, e);
	return rc;
}

/* n bytes of zeros (a hole, or a file that shrank) into the entry. */
static int
hp_zeros(struct hp_writer *w, uint64_t n, struct cairn_err *e)
{
	size_t chunk;
	int rc;

	while (n > 0) {
		chunk = n < sizeof hp_zeros_buf ? (size_t)n : sizeof hp_zeros_buf;
		rc = tarparts_add_data(w->tp, hp_zeros_buf, chunk, e);
		if (rc < 0)
			return rc;
		n -= chunk;
		w->bytes_done += chunk;
	}
	return 0;
}

/* Feed the file's bytes, holes as zeros found with SEEK_DATA/SEEK_HOLE. */
static int
hp_file_data(struct hp_writer *w, int fd, const char *rel, off_t size)
{
	struct cairn_err e = CAIRN_ERR_INIT;
	off_t pos = 0, data, hole, want;
	ssize_t n;
	uint64_t since = 0;

	while (pos < size) {
		if (w->o->stop != NULL && *w->o->stop)
			return cairn_err_set(&w->err, CAIRN_ECANCELED,
			    "stopped");
		data = lseek(fd, pos, SEEK_DATA);
		if (data < 0)
			data = errno == ENXIO ? size : pos;
		if (data > size)
			data = size;
		if (data > pos && hp_zeros(w, (uint64_t)(data - pos), &e) < 0)
			return hp_fail(w, e.code, &e);
		since += (uint64_t)(data - pos);
		pos = data;
		if (pos >= size)
			break;
		hole = lseek(fd, pos, SEEK_HOLE);
		if (hole <= pos || hole > size)
			hole = size;
		while (pos < hole) {
			want = hole - pos < HP_IOBUF ? hole - pos : HP_IOBUF;
			n = pread(fd, w->io, (size_t)want, pos);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				return cairn_err_errno(&w->err, CAIRN_EIO, errno,
				    "reading \"%s\"", rel);
			if (n == 0) {
				/* Shrank while we read: pad to the header size. */
				if (hp_zeros(w, (uint64_t)(size - pos), &e) < 0)
					return hp_fail(w, e.code, &e);
				return 0;
			}
			if (tarparts_add_data(w->tp, w->io, (size_t)n, &e) < 0)
				return hp_fail(w, e.code, &e);
			pos += n;
			w->bytes_done += (uint64_t)n;
			since += (uint64_t)n;
			if (since >= (4u << 20)) {
				hp_progress(w);
				since = 0;
				if (hp_fence(w) < 0)
					return w->rc;
			}
		}
	}
	return 0;
}

/* The entry's metadata into w->e; 1: nothing to archive (socket, gone). */
static int
hp_describe(struct hp_writer *w, int dirfd, const char *name, const char *rel,
    const struct stat *st, int *fd)
{
	char target[PATH_MAX + 1];
	ssize_t tl;
	int e;

	if (S_ISSOCK(st->st_mode))
		return 1;	/* tar cannot hold a socket; nothing to keep */
	archive_entry_clear(w->e);
	archive_entry_copy_pathname(w->e, rel);
	if (S_ISLNK(st->st_mode)) {
		tl = readlinkat(dirfd, name, target, sizeof target - 1);
		if (tl < 0)
			return cairn_err_errno(&w->err, CAIRN_EIO, errno,
			    "reading symlink \"%s\"", rel);
		target[tl] = '\0';
		archive_entry_copy_stat(w->e, st);
		archive_entry_copy_symlink(w->e, target);
		archive_entry_copy_uname(w->e, archive_read_disk_uname(w->disk,
		    (la_int64_t)st->st_uid));
		archive_entry_copy_gname(w->e, archive_read_disk_gname(w->disk,
		    (la_int64_t)st->st_gid));
		return 0;
	}
	if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode)) {
		archive_entry_copy_stat(w->e, st);	/* fifo, device */
		return 0;
	}
	*fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC |
	    O_NOCTTY | O_NONBLOCK);
	if (*fd < 0) {
		e = errno;
		if (e == ENOENT)
			return 1;	/* vanished since the stat */
		return cairn_err_errno(&w->err, CAIRN_EIO, e, "opening \"%s\"",
		    rel);
	}
	if (archive_read_disk_entry_from_file(w->disk, w->e, *fd, st) <
	    ARCHIVE_WARN)
		return cairn_err_set(&w->err, CAIRN_EIO, "metadata of \"%s\": "
		    "%s", rel, archive_error_string(w->disk));
	archive_entry_copy_pathname(w->e, rel);
	return 0;
}

/*
 * After a whole file. A deduplicated copy stores its open pack once it
 * reached the part size and, where the store takes parts of any size,
 * ends the index part with it, so the checkpoint follows the data (at
 * most about HP_CUTS_MAX such parts). Otherwise, and always, a part ends
 * once it reached the part size.
 */
#define HP_CUTS_MAX 4000
static int
hp_boundary(struct hp_writer *w, struct cairn_err *e)
{
	struct chunks_stats cs;
	size_t psize = w->o->part_size ? w->o->part_size : HOSTPATH_PART_SIZE;

	if (w->cw == NULL)
		return tarparts_boundary(w->tp, NULL, e);
	chunks_writer_stats(w->cw, &cs);
	if (chunks_open_bytes(w->cw) < psize && cs.packs == w->packs_at_cut)
		return tarparts_boundary(w->tp, NULL, e);
	if (store_part_min(w->s) == 0 &&
	    w->bytes_done - w->done_at_cut >= w->bytes_total / HP_CUTS_MAX)
		return tarparts_cut(w->tp, e);	/* the fence stores the pack */
	if (chunks_open_bytes(w->cw) >= psize && chunks_flush(w->cw, e) < 0)
		return e->code;
	return tarparts_boundary(w->tp, NULL, e);
}

/* chunks: n more file bytes covered; progress, and the fence every 4 MiB. */
static int
hp_tick(void *arg, uint64_t n, struct cairn_err *err)
{
	struct hp_writer *w = arg;

	w->bytes_done += n;
	w->since_fence += n;
	if (w->since_fence < (4u << 20))
		return 0;
	w->since_fence = 0;
	hp_progress(w);
	if (hp_fence(w) < 0)
		return cairn_err_copy(err, &w->err);
	return 0;
}

/* chunks: before a pack is stored. */
static int
hp_chunk_fence(void *arg, struct cairn_err *err)
{
	struct hp_writer *w = arg;

	return hp_fence(w) < 0 ? cairn_err_copy(err, &w->err) : 0;
}

/* A regular file of a deduplicated copy: its chunk list as the entry's data. */
static int
hp_chunked_file(struct hp_writer *w, int fd, const char *rel,
    const struct stat *st)
{
	struct cairn_err e = CAIRN_ERR_INIT;
	int rc;

	rc = chunks_file(w->cw, fd, rel, st, &w->list, &e);
	if (rc < 0)
		return hp_fail(w, rc, &e);
	chunks_mark_entry(w->e, w->list.len);
	if (tarparts_add_header(w->tp, w->e, &e) < 0 ||
	    tarparts_add_data(w->tp, w->list.data, w->list.len, &e) < 0)
		return hp_fail(w, e.code, &e);
	return 0;
}

/* One entry of the walk (also the root, with name "." and rel "."). */
static int
hp_entry(void *arg, int dirfd, const char *name, const char *rel,
    const struct stat *st, struct cairn_err *err)
{
	struct hp_writer *w = arg;
	struct cairn_err e = CAIRN_ERR_INIT;
	int fd = -1, rc;

	(void)err;
	if (w->o->stop != NULL && *w->o->stop)
		return cairn_err_set(&w->err, CAIRN_ECANCELED, "stopped");
	if (w->skip_until != NULL && (strcmp(rel, ".") == 0 ||
	    str_path_cmp(rel, w->skip_until) <= 0))
		return 0;
	if (hp_fence(w) < 0)
		return w->rc;
	rc = hp_describe(w, dirfd, name, rel, st, &fd);
	if (rc != 0)
		goto out;
	if (w->cw != NULL && S_ISREG(st->st_mode) && st->st_size > 0) {
		rc = hp_chunked_file(w, fd, rel, st);
		if (rc < 0)
			goto out;
	} else if (tarparts_add_header(w->tp, w->e, &e) < 0) {
		rc = hp_fail(w, e.code, &e);
		goto out;
	} else if (S_ISREG(st->st_mode) && st->st_size > 0) {
		rc = hp_file_data(w, fd, rel, st->st_size);
		if (rc < 0)
			goto out;
	}
	if (tarparts_end_entry(w->tp, &e) < 0) {
		rc = hp_fail(w, e.code, &e);
		goto out;
	}
	w->files_done++;
	snprintf(w->last_file, sizeof w->last_file, "%s", rel);
	hp_progress(w);
	/* A part ends after a whole file once it reached the part size. */
	if (strcmp(rel, ".") != 0 && hp_boundary(w, &e) < 0)
		rc = hp_fail(w, e.code, &e);
out:
	if (fd >= 0)
		close(fd);
	return rc < 0 ? rc : 0;
}

static int
part_number_cmp(const void *a, const void *b)
{
	const struct store_part *x = a, *y = b;

	return (x->number > y->number) - (x->number < y->number);
}

struct part_list {
	struct hp_writer *w;
	int want;		/* keep 1..want ... */
	int gap_from, gap_to;	/* ... except these */
	int highest;		/* highest number the upload holds */
};

static int
part_cb(void *arg, const struct store_part *p)
{
	struct part_list *pl = arg;

	if (p->number > pl->highest)
		pl->highest = p->number;
	if (p->number > pl->want || (p->number >= pl->gap_from &&
	    p->number <= pl->gap_to))
		return 0;
	hp_add_part(pl->w, p);
	return 0;
}

/*
 * Resume the checkpoint's upload: its parts 1..k kept, the copy goes on
 * after its last file (and, for another owner's checkpoint, after every
 * part number the upload holds, plus one). CAIRN_ENOTFOUND when it cannot.
 */
static int
hp_resume(struct hp_writer *w, const struct hostpath_ckpt *ck, int foreign)
{
	struct part_list pl;
	int rc, want;

	snprintf(w->upload_id, sizeof w->upload_id, "%s", ck->upload_id);
	if (foreign && ck->gap_from > 0)
		return cairn_err_set(&w->err, CAIRN_ENOTFOUND, "a published "
		    "checkpoint of %s with a gap cannot be resumed", w->key);
	memset(&pl, 0, sizeof pl);
	pl.w = w;
	pl.want = ck->parts;
	pl.gap_from = ck->gap_from > 0 ? ck->gap_from : INT_MAX;
	pl.gap_to = ck->gap_to;
	rc = store_mpu_list_parts(w->s, w->key, w->upload_id, part_cb, &pl,
	    &w->err);
	if (rc < 0)
		return rc;
	want = ck->parts - (ck->gap_from > 0 ? ck->gap_to - ck->gap_from + 1 :
	    0);
	if ((int)w->nparts != want)
		return cairn_err_set(&w->err, CAIRN_ENOTFOUND, "upload of %s has "
		    "%zu of the %d checkpointed parts", w->key, w->nparts, want);
	qsort(w->parts, w->nparts, sizeof *w->parts, part_number_cmp);
	w->gap_from = ck->gap_from;
	w->gap_to = ck->gap_to;
	w->next = ck->parts + 1;
	if (foreign) {
		/*
		 * The old owner may have stored parts after the checkpoint it
		 * published and have one more in flight: leave all those
		 * numbers unused.
		 */
		w->gap_from = ck->parts + 1;
		w->gap_to = (pl.highest > ck->parts ? pl.highest : ck->parts) +
		    1;
		w->next = w->gap_to + 1;
	}
	for (size_t i = 0; i < w->nparts; i++)
		w->compressed += w->parts[i].size;
	w->uploaded_before = ck->bytes_uploaded > w->compressed ?
	    ck->bytes_uploaded - w->compressed : 0;
	w->skip_until = ck->last_file;
	w->bytes_done = ck->bytes_done;
	w->files_done = ck->files_done;
	snprintf(w->last_file, sizeof w->last_file, "%s", ck->last_file);
	log_info("resuming %s after part %d (last file %s)", w->key, ck->parts,
	    ck->last_file);
	if (foreign)
		log_info("%s: another owner's upload: parts %d..%d left out, "
		    "continuing at part %d", w->key, w->gap_from, w->gap_to,
		    w->next);
	return 0;
}

/* A new upload. */
static int
hp_create(struct hp_writer *w)
{
	char *id = NULL;
	int rc;

	w->next = 1;
	rc = hp_fence(w);
	if (rc < 0)
		return rc;
	rc = store_mpu_create(w->s, w->key, &id, &w->err);
	if (rc == 0 && strlen(id) >= sizeof w->upload_id)
		rc = cairn_err_set(&w->err, CAIRN_ETOOBIG, "upload id too long");
	if (rc == 0)
		snprintf(w->upload_id, sizeof w->upload_id, "%s", id);
	free(id);
	return rc;
}

/* The pipeline: a partsink on the upload, tarparts feeding it. */
static int
hp_pipeline(struct hp_writer *w)
{
	struct partsink_hooks h = { hp_part_fence, NULL, hp_stored, w };
	struct tarparts_sink sink;
	int rc;

	rc = partsink_open(w->s, w->key, w->upload_id, w->o->spool_dir, &h,
	    &w->ps, &w->err);
	if (rc < 0)
		return rc;
	partsink_sink(w->ps, &sink);
	rc = tarparts_open(&sink, w->next, w->o->part_size ? w->o->part_size :
	    HOSTPATH_PART_SIZE, 0, &w->tp, &w->err);
	if (rc == 0)
		rc = tarparts_set_level(w->tp, Z_DEFAULT_COMPRESSION, &w->err);
	if (rc < 0)
		return rc;
	if (w->o->chunk_dir != NULL) {
		struct chunks_config cc;

		memset(&cc, 0, sizeof cc);
		cc.s = w->s;
		cc.vol_dir = w->o->chunk_dir;
		cc.backup = w->o->backup;
		cc.parent = w->o->parent;
		cc.parent_index = w->o->parent_index;
		cc.pack_size = w->o->part_size;
		cc.spool_dir = w->o->spool_dir;
		cc.resume = w->o->resume != NULL;
		cc.fence = hp_chunk_fence;
		cc.tick = hp_tick;
		cc.arg = w;
		cc.stop = w->o->stop;
		rc = chunks_writer_open(&cc, &w->cw, &w->err);
		if (rc < 0)
			return rc;
	}
	w->e = archive_entry_new();
	w->disk = archive_read_disk_new();
	archive_read_disk_set_standard_lookup(w->disk);
	archive_read_disk_set_symlink_physical(w->disk);
	w->io = xmalloc(HP_IOBUF);
	return 0;
}

/* Walk dir into the pipeline, end the archive and complete the upload. */
static int
hp_copy(struct hp_writer *w, int root, const struct stat *rst,
    struct hostpath_stats *st)
{
	struct cairn_err e = CAIRN_ERR_INIT;
	int rc;

	rc = hp_entry(w, root, ".", ".", rst, &w->err);
	if (rc == 0)
		rc = walk(root, "", 0, hp_entry, w, &w->err);
	if (rc < 0)
		return rc;
	w->closing = 1;
	if (tarparts_finish(w->tp, &e) < 0)
		return hp_fail(w, e.code, &e);
	rc = hp_fence(w);
	if (rc < 0)
		return rc;
	rc = store_mpu_complete(w->s, w->key, w->upload_id, w->parts,
	    w->nparts, st != NULL ? st->etag : NULL, &w->err);
	if (rc < 0)
		return rc;
	if (w->cw != NULL) {
		rc = chunks_writer_finish(w->cw, w->key, w->skip_until != NULL,
		    &w->err);
		if (rc < 0)
			return rc;
	}
	hp_progress(w);
	return 0;
}

static void
hp_stats(const struct hp_writer *w, struct hostpath_stats *st)
{
	struct chunks_stats cs;
	char etag[STORE_ETAG_MAX];

	memcpy(etag, st->etag, sizeof etag);	/* set by the complete */
	memset(st, 0, sizeof *st);
	memcpy(st->etag, etag, sizeof etag);
	memset(&cs, 0, sizeof cs);
	st->bytes_total = w->bytes_total;
	st->files_total = w->files_total;
	st->bytes_done = w->bytes_done;
	st->compressed = w->compressed;
	st->parts = (int)w->nparts;
	st->bytes_uploaded = hp_uploaded(w);
	if (w->cw == NULL)
		return;
	chunks_writer_stats(w->cw, &cs);
	st->bytes_read = cs.read;
	st->bytes_reused = cs.reused;
	st->chunks_new = cs.chunks_new;
	st->chunks_reused = cs.chunks_reused;
	st->files_unchanged = cs.files_unchanged;
	snprintf(st->parent, sizeof st->parent, "%s",
	    chunks_writer_parent(w->cw) ? chunks_writer_parent(w->cw) : "");
	snprintf(st->hash_name, sizeof st->hash_name, "%s",
	    chunks_writer_hash_name(w->cw));
}

int
hostpath_backup(struct store *s, const char *key, const char *dir,
    const struct hostpath_opts *o, struct hostpath_stats *st,
    struct cairn_err *err)
{
	struct hostpath_opts defaults;
	struct hp_writer w;
	struct totals t = { 1, 0 };
	struct stat rst;
	int root, rc;

	if (o == NULL) {
		memset(&defaults, 0, sizeof defaults);
		o = &defaults;
	}
	if (st != NULL)
		memset(st, 0, sizeof *st);
	memset(&w, 0, sizeof w);
	w.s = s;
	w.key = key;
	w.o = o;
	buf_init(&w.list, (size_t)1 << 30);
	root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0) {
		rc = cairn_err_errno(&w.err, errno == ENOENT ? CAIRN_ENOTFOUND :
		    CAIRN_EIO, errno, "volume directory %s", dir);
		goto out;
	}
	if (fstat(root, &rst) < 0) {
		rc = cairn_err_errno(&w.err, CAIRN_EIO, errno, "stat %s", dir);
		goto out;
	}
	/* First walk: what there is to move. */
	t.files = 1;
	t.bytes = 0;
	rc = walk(root, "", 0, count_fn, &t, &w.err);
	if (rc < 0)
		goto out;
	w.bytes_total = t.bytes;
	w.files_total = t.files;
	/* The upload: a new one, or the checkpoint's with its parts. */
	rc = o->resume != NULL ? hp_resume(&w, o->resume, o->resume_foreign) :
	    hp_create(&w);
	if (rc < 0)
		goto out;
	w.writing = 1;
	hp_progress(&w);
	rc = hp_pipeline(&w);
	if (rc == 0)
		rc = hp_copy(&w, root, &rst, st);
out:
	/*
	 * Failed for good (not stopped, not fenced, not a refused resume):
	 * drop the upload, its parts are of no use to anyone (the caller
	 * marks the volume Failed).
	 */
	if (rc < 0 && rc != CAIRN_ECANCELED && rc != CAIRN_EFENCED &&
	    w.writing && hp_fence(&w) == 0) {
		(void)store_mpu_abort(s, key, w.upload_id, NULL);
		chunks_writer_abandon(w.cw);
	}
	if (st != NULL)
		hp_stats(&w, st);
	tarparts_free(w.tp);	/* unfinished: nothing more reaches the sink */
	partsink_free(w.ps);
	chunks_writer_free(w.cw);
	buf_free(&w.list);
	if (w.disk != NULL)
		archive_read_free(w.disk);
	if (w.e != NULL)
		archive_entry_free(w.e);
	if (root >= 0)
		close(root);
	free(w.io);
	free(w.parts);
	if (rc < 0)
		cairn_err_copy(err, &w.err);
	return rc;
}

/* ---- Restore ----------------------------------------------------------- */

struct hp_reader {
	struct tarread_src src;
	struct cairn_err err;
	int rc;
};

static la_ssize_t
hp_read_cb(struct archive *a, void *arg, const void **buf)
{
	struct hp_reader *r = arg;
	ssize_t n;

	(void)a;
	n = r->src.read(r->src.arg, buf, &r->err);
	if (n < 0) {
		r->rc = (int)n;
		archive_set_error(a, EIO, "%s", r->err.msg);
		return -1;
	}
	return (la_ssize_t)n;
}

/* 0 if rel is a safe relative name: not absolute, no ".." segment. */
static int
name_safe(const char *rel)
{
	const char *p = rel;
	size_t n;

	if (rel[0] == '/' || rel[0] == '\0')
		return -1;
	for (;;) {
		n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return -1;
		if (p[n] == '\0')
			return 0;
		p += n + 1;
	}
}

static int
is_root_name(const char *rel)
{
	return strcmp(rel, ".") == 0 || strcmp(rel, "./") == 0;
}

/*
 * One restore: the archive read from storage, the disk writer, where
 * bytes stand, and the archive's root entry (applied to dir at the end).
 */
struct hp_restore {
	struct hp_reader r;
	const struct hostpath_opts *o;
	const char *key;
	char *abs;			/* realpath of the target, owned */
	struct archive *a, *out;
	struct chunks_reader *cr;	/* chunked entries' data, or NULL */
	uint64_t done, total, files, since;
	int have_root;
	mode_t root_mode;
	uid_t root_uid;
	gid_t root_gid;
	struct timespec ts[2];
};

/* Open the stored archive and the confined disk writer. */
static int
hr_open(struct hp_restore *h, struct store *s, const char *dir)
{
	int flags, rc;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return cairn_err_errno(&h->r.err, CAIRN_EIO, errno, "creating %s",
		    dir);
	h->abs = realpath(dir, NULL);
	if (h->abs == NULL)
		return cairn_err_errno(&h->r.err, CAIRN_EIO, errno,
		    "resolving %s", dir);
	rc = tarread_src_store(&h->r.src, s, h->key, 0, &h->r.err);
	if (rc < 0)
		return rc;
	h->a = archive_read_new();
	archive_read_support_filter_gzip(h->a);
	archive_read_support_format_tar(h->a);
	if (archive_read_open(h->a, &h->r, NULL, hp_read_cb, NULL) != ARCHIVE_OK)
		return cairn_err_set(&h->r.err, h->r.rc ? h->r.rc : CAIRN_EPROTO,
		    "reading %s: %s", h->key, archive_error_string(h->a));
	flags = ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME |
	    ARCHIVE_EXTRACT_ACL | ARCHIVE_EXTRACT_XATTR |
	    ARCHIVE_EXTRACT_SPARSE | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
	    ARCHIVE_EXTRACT_SECURE_SYMLINKS;
	if (geteuid() == 0)
		flags |= ARCHIVE_EXTRACT_OWNER;
	h->out = archive_write_disk_new();
	archive_write_disk_set_options(h->out, flags);
	archive_write_disk_set_standard_lookup(h->out);
	if (h->o->chunk_dir != NULL)
		h->cr = chunks_reader_new(s, h->o->chunk_dir);
	return 0;
}

static void
hr_progress(struct hp_restore *h)
{
	struct hostpath_progress p;

	if (h->done > h->total)
		h->total = h->done;
	if (h->o->progress == NULL)
		return;
	memset(&p, 0, sizeof p);
	p.bytes_done = h->done;
	p.bytes_total = h->total;
	p.files_done = h->files;
	h->o->progress(h->o->arg, &p);
}

/* chunks: n more file bytes written; the fence every 4 MiB. */
static int
hr_tick(void *arg, uint64_t n, struct cairn_err *err)
{
	struct hp_restore *h = arg;
	int rc;

	h->done += n;
	hr_progress(h);
	h->since += n;
	if (h->since < (4u << 20) || h->o->fence == NULL)
		return 0;
	h->since = 0;
	rc = h->o->fence(h->o->arg, &h->r.err);
	return rc < 0 ? cairn_err_copy(err, &h->r.err) : 0;
}

/* The entry's data blocks to disk. */
static int
hr_data(struct hp_restore *h, struct archive_entry *e, const char *rel)
{
	uint64_t base = h->done;
	const void *blk;
	size_t blen;
	la_int64_t off;
	int lr, rc;

	for (;;) {
		lr = archive_read_data_block(h->a, &blk, &blen, &off);
		if (lr == ARCHIVE_EOF)
			break;
		if (lr < ARCHIVE_WARN)
			return cairn_err_set(&h->r.err, h->r.rc ? h->r.rc :
			    CAIRN_EPROTO, "%s: reading data: %s", h->key,
			    archive_error_string(h->a));
		if (archive_write_data_block(h->out, blk, blen, off) <
		    ARCHIVE_WARN)
			return cairn_err_set(&h->r.err, CAIRN_EIO, "%s: writing "
			    "\"%.200s\": %s", h->key, rel,
			    archive_error_string(h->out));
		h->done = base + (uint64_t)off + blen;
		hr_progress(h);
		h->since += blen;
		if (h->since >= (4u << 20) && h->o->fence != NULL) {
			h->since = 0;
			rc = h->o->fence(h->o->arg, &h->r.err);
			if (rc < 0)
				return rc;
		}
	}
	h->done = base + (uint64_t)archive_entry_size(e);
	return 0;
}

/* Remember the archive's root entry: applied to the target at the end. */
static void
hr_root(struct hp_restore *h, struct archive_entry *e)
{
	h->have_root = 1;
	h->root_mode = archive_entry_perm(e);
	h->root_uid = (uid_t)archive_entry_uid(e);
	h->root_gid = (gid_t)archive_entry_gid(e);
	h->ts[0].tv_sec = archive_entry_atime(e);
	h->ts[0].tv_nsec = archive_entry_atime_nsec(e);
	h->ts[1].tv_sec = archive_entry_mtime(e);
	h->ts[1].tv_nsec = archive_entry_mtime_nsec(e);
}

/* One entry: checked, put under the target, extracted. */
static int
hr_entry(struct hp_restore *h, struct archive_entry *e)
{
	char *rel = xstrdup(archive_entry_pathname(e)), *full;
	const char *hl;
	int rc = 0;

	/* rel is a copy: the entry's own name changes below. */
	if (rel == NULL || name_safe(rel) < 0) {
		rc = cairn_err_set(&h->r.err, CAIRN_EPROTO, "%s: unsafe entry "
		    "name \"%.200s\" refused", h->key, rel ? rel : "(none)");
		goto out;
	}
	if (is_root_name(rel)) {
		hr_root(h, e);
		goto out;
	}
	full = xasprintf("%s/%s", h->abs, rel);
	archive_entry_copy_pathname(e, full);
	free(full);
	hl = archive_entry_hardlink(e);
	if (hl != NULL) {
		if (name_safe(hl) < 0) {
			rc = cairn_err_set(&h->r.err, CAIRN_EPROTO, "%s: unsafe "
			    "link target \"%.200s\" refused", h->key, hl);
			goto out;
		}
		full = xasprintf("%s/%s", h->abs, hl);
		archive_entry_copy_hardlink(e, full);
		free(full);
	}
	if (chunks_entry_is_list(e)) {
		struct cairn_err ce = CAIRN_ERR_INIT;

		rc = chunks_restore_entry(h->cr, h->a, e, h->out, rel, hr_tick,
		    h, &ce);
		if (rc < 0) {
			cairn_err_copy(&h->r.err, &ce);
			cairn_err_prefix(&h->r.err, "%s", h->key);
			goto out;
		}
	} else if (archive_write_header(h->out, e) < ARCHIVE_WARN) {
		rc = cairn_err_set(&h->r.err, CAIRN_EIO, "%s: extracting "
		    "\"%.200s\": %s", h->key, rel, archive_error_string(h->out));
		goto out;
	} else if (archive_entry_size(e) > 0 &&
	    (rc = hr_data(h, e, rel)) < 0) {
		goto out;
	}
	if (archive_write_finish_entry(h->out) < ARCHIVE_WARN) {
		rc = cairn_err_set(&h->r.err, CAIRN_EIO, "%s: finishing "
		    "\"%.200s\": %s", h->key, rel, archive_error_string(h->out));
		goto out;
	}
	h->files++;
	hr_progress(h);
out:
	free(rel);
	return rc;
}

/* Every entry, then the archive's root entry applied to the target. */
static int
hr_extract(struct hp_restore *h)
{
	struct archive_entry *e;
	int lr, rc;

	for (;;) {
		if (h->o->stop != NULL && *h->o->stop)
			return cairn_err_set(&h->r.err, CAIRN_ECANCELED,
			    "stopped");
		if (h->o->fence != NULL &&
		    (rc = h->o->fence(h->o->arg, &h->r.err)) < 0)
			return rc;
		lr = archive_read_next_header(h->a, &e);
		if (lr == ARCHIVE_EOF)
			break;
		if (lr < ARCHIVE_WARN)
			return cairn_err_set(&h->r.err, h->r.rc ? h->r.rc :
			    CAIRN_EPROTO, "reading %s: %s", h->key,
			    archive_error_string(h->a));
		rc = hr_entry(h, e);
		if (rc < 0)
			return rc;
	}
	if (archive_write_close(h->out) != ARCHIVE_OK)
		return cairn_err_set(&h->r.err, CAIRN_EIO, "%s: %s", h->key,
		    archive_error_string(h->out));
	if (!h->have_root)
		return 0;
	if (geteuid() == 0 && chown(h->abs, h->root_uid, h->root_gid) < 0)
		log_warn("chown %s: %s", h->abs, strerror(errno));
	if (chmod(h->abs, h->root_mode) < 0 ||
	    utimensat(AT_FDCWD, h->abs, h->ts, 0) < 0)
		return cairn_err_errno(&h->r.err, CAIRN_EIO, errno, "setting "
		    "mode and times of %s", h->abs);
	return 0;
}

int
hostpath_restore(struct store *s, const char *key, const char *dir,
    const struct hostpath_opts *o, struct hostpath_stats *st,
    struct cairn_err *err)
{
	struct hostpath_opts defaults;
	struct hp_restore h;
	int rc;

	if (o == NULL) {
		memset(&defaults, 0, sizeof defaults);
		o = &defaults;
	}
	memset(&h, 0, sizeof h);
	h.o = o;
	h.key = key;
	h.total = o->expect_total;
	rc = hr_open(&h, s, dir);
	if (rc == 0)
		rc = hr_extract(&h);
	if (st != NULL) {
		memset(st, 0, sizeof *st);
		st->bytes_total = h.total;
		st->bytes_done = h.done;
		st->files_total = h.files;
	}
	if (h.out != NULL)
		archive_write_free(h.out);
	chunks_reader_free(h.cr);
	if (h.a != NULL)
		archive_read_free(h.a);	/* closes nothing of ours */
	if (h.r.src.close != NULL)
		h.r.src.close(h.r.src.arg);
	free(h.abs);
	if (rc < 0)
		cairn_err_copy(err, &h.r.err);
	return rc;
}
