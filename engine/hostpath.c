/*
 * hostpath.c: the built-in hostpath mover. Contract in hostpath.h.
 *
 * Backup data path:
 *   sorted depth-first walk (openat/fstatat, never following a symlink)
 *     -> archive_read_disk_entry_from_file() for metadata (modes, owners,
 *        times, xattrs, ACLs, the sparse map taken from the open fd)
 *     -> libarchive pax writer, bytes_per_block 0 (nothing held back)
 *     -> archive_cb(): zlib deflate, gzip-wrapped, into a spool file
 *     -> at a file boundary once the part reached part_size: Z_FINISH
 *        (a complete gzip member), store_mpu_put_part() of the spool,
 *        then the caller's checkpoint(), deflateReset(), spool truncated.
 *   Holes of sparse files are found with SEEK_DATA/SEEK_HOLE and fed to
 *   libarchive as zeros it drops (the pax writer skips hole ranges), so a
 *   1 TiB sparse file with 1 MiB of data costs 1 MiB of reading.
 *
 * Order and resume: names in each directory are sorted bytewise, so the
 * walk order equals comparing paths component by component (hostpath_path_cmp()).
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
#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/util.h"
#include "engine/archive_read.h"
#include "storage/layout.h"

#define HP_ZOUT		(256u << 10)	/* deflate output chunk */
#define HP_IOBUF	(1u << 20)	/* file read chunk */
#define HP_DIR_MAX	1000000		/* entries in one directory */
#define HP_DEPTH_MAX	256		/* directory nesting */

static const char hp_zeros[64 << 10];

char *
hostpath_key(const char *prefix, const char *backup, const char *volume)
{
	char *dir, *key;

	if (!layout_name_ok(volume))
		return NULL;
	dir = layout_backup_dir(prefix, backup);
	if (dir == NULL)
		return NULL;
	key = xasprintf("%svolumes/%s.tar.gz", dir, volume);
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

int
hostpath_path_cmp(const char *a, const char *b)
{
	size_t la, lb;
	int c;

	for (;;) {
		la = strcspn(a, "/");
		lb = strcspn(b, "/");
		c = memcmp(a, b, la < lb ? la : lb);
		if (c != 0)
			return c;
		if (la != lb)
			return la < lb ? -1 : 1;
		a += la;
		b += lb;
		if (*a == '\0' || *b == '\0')
			return (*a != '\0') - (*b != '\0');
		a++;
		b++;
	}
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

struct hp_writer {
	struct store *s;
	const char *key;
	const struct hostpath_opts *o;
	size_t part_size;
	char upload_id[STORE_UPLOAD_ID_MAX];
	struct archive *a;
	struct archive *disk;
	struct archive_entry *e;
	z_stream z;
	int zinit;
	unsigned char *zout;
	unsigned char *io;
	int spool;		/* staged part, -1 none */
	uint64_t part_bytes;	/* compressed bytes in the spool */
	struct store_part *parts;
	size_t nparts, aparts;
	int next;		/* number of the next part */
	int gap_from, gap_to;	/* numbers left out (takeover), 0 0: none */
	uint64_t bytes_done, bytes_total, files_done, files_total;
	uint64_t compressed;
	char last_file[HOSTPATH_PATH_MAX];
	const char *skip_until;	/* resume: skip entries <= this */
	int closing;
	int rc;
	struct cairn_err err;
};

static void
hp_progress(struct hp_writer *w)
{
	if (w->bytes_done > w->bytes_total)
		w->bytes_total = w->bytes_done;
	if (w->files_done > w->files_total)
		w->files_total = w->files_done;
	if (w->o->progress != NULL)
		w->o->progress(w->o->arg, w->bytes_done, w->bytes_total,
		    w->files_done, w->files_total);
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

static int
spool_write(struct hp_writer *w, const void *p, size_t n)
{
	const char *c = p;
	ssize_t k;

	while (n > 0) {
		k = write(w->spool, c, n);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (w->rc == 0)
				w->rc = cairn_err_errno(&w->err, CAIRN_EIO, errno,
				    "writing the part spool file");
			return -1;
		}
		c += k;
		n -= (size_t)k;
		w->part_bytes += (uint64_t)k;
	}
	return 0;
}

static int
hp_deflate(struct hp_writer *w, int flush)
{
	int zrc;
	size_t have;

	do {
		w->z.next_out = w->zout;
		w->z.avail_out = HP_ZOUT;
		zrc = deflate(&w->z, flush);
		if (zrc == Z_STREAM_ERROR) {
			if (w->rc == 0)
				w->rc = cairn_err_set(&w->err, CAIRN_EFAIL,
				    "zlib deflate failed");
			return -1;
		}
		have = HP_ZOUT - w->z.avail_out;
		if (have > 0 && spool_write(w, w->zout, have) < 0)
			return -1;
	} while (w->z.avail_out == 0 ||
	    (flush == Z_FINISH && zrc != Z_STREAM_END));
	return 0;
}

static la_ssize_t
hp_archive_cb(struct archive *a, void *arg, const void *buf, size_t len)
{
	struct hp_writer *w = arg;

	(void)a;
	if (w->rc < 0)
		return -1;
	w->z.next_in = (Bytef *)(uintptr_t)buf;
	w->z.avail_in = (uInt)len;
	if (hp_deflate(w, Z_NO_FLUSH) < 0)
		return -1;
	return (la_ssize_t)len;
}

/* Finish the gzip member in the spool and store it as the next part. */
static int
hp_cut(struct hp_writer *w, int last)
{
	struct store_src src;
	struct store_part *p;
	struct hostpath_ckpt ck;
	char etag[STORE_ETAG_MAX];
	int rc, number = w->next;

	if (hp_deflate(w, Z_FINISH) < 0)
		return w->rc;
	if (number > STORE_PART_MAX_NUMBER)
		return cairn_err_set(&w->err, CAIRN_ETOOBIG, "more than %d "
		    "parts: raise the part size", STORE_PART_MAX_NUMBER);
	rc = hp_fence(w);
	if (rc < 0)
		return rc;
	rc = store_src_fd(&src, w->spool, 0, (int64_t)w->part_bytes, &w->err);
	if (rc == 0)
		rc = store_mpu_put_part(w->s, w->key, w->upload_id, number,
		    &src, etag, NULL, &w->err);
	if (rc < 0)
		return rc;
	if (w->nparts == w->aparts) {
		w->aparts = w->aparts ? w->aparts * 2 : 16;
		w->parts = xreallocarray(w->parts, w->aparts, sizeof *w->parts);
	}
	p = &w->parts[w->nparts++];
	w->next = number + 1;
	memset(p, 0, sizeof *p);
	p->number = number;
	snprintf(p->etag, sizeof p->etag, "%s", etag);
	p->size = w->part_bytes;
	w->compressed += w->part_bytes;
	log_debug("part %d of %s stored (%llu bytes, last file %s)",
	    number, w->key, (unsigned long long)w->part_bytes,
	    w->last_file);
	if (ftruncate(w->spool, 0) < 0 || lseek(w->spool, 0, SEEK_SET) < 0)
		return cairn_err_errno(&w->err, CAIRN_EIO, errno,
		    "truncating the part spool file");
	w->part_bytes = 0;
	deflateReset(&w->z);
	if (!last && w->o->checkpoint != NULL) {
		memset(&ck, 0, sizeof ck);
		snprintf(ck.upload_id, sizeof ck.upload_id, "%s", w->upload_id);
		ck.parts = number;
		ck.gap_from = w->gap_from;
		ck.gap_to = w->gap_to;
		snprintf(ck.last_file, sizeof ck.last_file, "%s", w->last_file);
		ck.bytes_done = w->bytes_done;
		ck.files_done = w->files_done;
		rc = w->o->checkpoint(w->o->arg, &ck, &w->err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int
la_fail(struct hp_writer *w, struct archive *a, const char *what,
    const char *rel)
{
	if (w->rc < 0)
		return w->rc;	/* our own callback failed: its message */
	return cairn_err_set(&w->err, CAIRN_EIO, "%s \"%s\": %s", what, rel,
	    archive_error_string(a) ? archive_error_string(a) : "failed");
}

/* Feed the file's bytes, holes as zeros found with SEEK_DATA/SEEK_HOLE. */
static int
hp_file_data(struct hp_writer *w, int fd, const char *rel, off_t size)
{
	off_t pos = 0, data, hole, want;
	ssize_t n;
	size_t chunk;
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
		while (pos < data) {
			chunk = (size_t)(data - pos) < sizeof hp_zeros ?
			    (size_t)(data - pos) : sizeof hp_zeros;
			if (archive_write_data(w->a, hp_zeros, chunk) < 0)
				return la_fail(w, w->a, "writing", rel);
			pos += (off_t)chunk;
			w->bytes_done += chunk;
			since += chunk;
		}
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
				hole = size;
				data = size;
				while (pos < size) {
					chunk = (size_t)(size - pos) <
					    sizeof hp_zeros ? (size_t)(size -
					    pos) : sizeof hp_zeros;
					if (archive_write_data(w->a, hp_zeros,
					    chunk) < 0)
						return la_fail(w, w->a,
						    "writing", rel);
					pos += (off_t)chunk;
					w->bytes_done += chunk;
				}
				break;
			}
			if (archive_write_data(w->a, w->io, (size_t)n) < 0)
				return la_fail(w, w->a, "writing", rel);
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

/* One entry of the walk (also the root, with name "." and rel "."). */
static int
hp_entry(void *arg, int dirfd, const char *name, const char *rel,
    const struct stat *st, struct cairn_err *err)
{
	struct hp_writer *w = arg;
	char target[PATH_MAX + 1];
	ssize_t tl;
	int fd = -1, rc = 0, e;

	(void)err;
	if (w->o->stop != NULL && *w->o->stop)
		return cairn_err_set(&w->err, CAIRN_ECANCELED, "stopped");
	if (w->skip_until != NULL && (strcmp(rel, ".") == 0 ||
	    hostpath_path_cmp(rel, w->skip_until) <= 0))
		return 0;
	if (hp_fence(w) < 0)
		return w->rc;
	if (S_ISSOCK(st->st_mode))
		return 0;	/* tar cannot hold a socket; nothing to keep */
	archive_entry_clear(w->e);
	archive_entry_copy_pathname(w->e, rel);
	if (S_ISLNK(st->st_mode)) {
		tl = readlinkat(dirfd, name, target, sizeof target - 1);
		if (tl < 0) {
			e = errno;
			return cairn_err_errno(&w->err, CAIRN_EIO, e,
			    "reading symlink \"%s\"", rel);
		}
		target[tl] = '\0';
		archive_entry_copy_stat(w->e, st);
		archive_entry_copy_symlink(w->e, target);
		archive_entry_copy_uname(w->e, archive_read_disk_uname(w->disk,
		    (la_int64_t)st->st_uid));
		archive_entry_copy_gname(w->e, archive_read_disk_gname(w->disk,
		    (la_int64_t)st->st_gid));
	} else if (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode)) {
		fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC |
		    O_NOCTTY | O_NONBLOCK);
		if (fd < 0) {
			e = errno;
			if (e == ENOENT)
				return 0;	/* vanished since the stat */
			return cairn_err_errno(&w->err, CAIRN_EIO, e,
			    "opening \"%s\"", rel);
		}
		if (archive_read_disk_entry_from_file(w->disk, w->e, fd, st) <
		    ARCHIVE_WARN) {
			rc = cairn_err_set(&w->err, CAIRN_EIO, "metadata of "
			    "\"%s\": %s", rel, archive_error_string(w->disk));
			goto out;
		}
		archive_entry_copy_pathname(w->e, rel);
	} else {
		archive_entry_copy_stat(w->e, st);	/* fifo, device */
	}
	if (archive_write_header(w->a, w->e) < ARCHIVE_WARN) {
		rc = la_fail(w, w->a, "archiving", rel);
		goto out;
	}
	if (S_ISREG(st->st_mode) && st->st_size > 0) {
		rc = hp_file_data(w, fd, rel, st->st_size);
		if (rc < 0)
			goto out;
	}
	if (archive_write_finish_entry(w->a) < ARCHIVE_WARN) {
		rc = la_fail(w, w->a, "archiving", rel);
		goto out;
	}
	w->files_done++;
	snprintf(w->last_file, sizeof w->last_file, "%s", rel);
	hp_progress(w);
	if (w->part_bytes >= w->part_size && strcmp(rel, ".") != 0)
		rc = hp_cut(w, 0);
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

static int
hp_spool_open(struct hp_writer *w)
{
	const char *d = w->o->spool_dir;
	char *tmpl;

	if (d == NULL || d[0] == '\0')
		d = getenv("TMPDIR");
	if (d == NULL || d[0] == '\0')
		d = "/tmp";
	tmpl = xasprintf("%s/cairn-volume-part.XXXXXX", d);
	w->spool = mkostemp(tmpl, O_CLOEXEC);
	if (w->spool < 0) {
		cairn_err_errno(&w->err, CAIRN_EIO, errno, "creating a spool "
		    "file in %s", d);
		free(tmpl);
		return CAIRN_EIO;
	}
	unlink(tmpl);
	free(tmpl);
	return 0;
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
	struct hp_writer *w = pl->w;

	if (p->number > pl->highest)
		pl->highest = p->number;
	if (p->number > pl->want || (p->number >= pl->gap_from &&
	    p->number <= pl->gap_to))
		return 0;
	if (w->nparts == w->aparts) {
		w->aparts = w->aparts ? w->aparts * 2 : 16;
		w->parts = xreallocarray(w->parts, w->aparts, sizeof *w->parts);
	}
	w->parts[w->nparts++] = *p;
	return 0;
}

int
hostpath_backup(struct store *s, const char *key, const char *dir,
    const struct hostpath_opts *o, struct hostpath_stats *st,
    struct cairn_err *err)
{
	struct hostpath_opts defaults;
	struct hp_writer w;
	struct totals t = { 0, 0 };
	struct stat rst;
	struct part_list pl;
	char *id = NULL;
	int root = -1, rc;

	if (o == NULL) {
		memset(&defaults, 0, sizeof defaults);
		o = &defaults;
	}
	memset(&w, 0, sizeof w);
	w.s = s;
	w.key = key;
	w.o = o;
	w.spool = -1;
	w.part_size = o->part_size ? o->part_size : HOSTPATH_PART_SIZE;
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
	rc = walk(root, "", 0, count_fn, &t, &w.err);
	if (rc < 0)
		goto out;
	w.bytes_total = t.bytes;
	w.files_total = t.files;

	/* The upload: a new one, or the checkpoint's with its parts. */
	if (o->resume != NULL) {
		snprintf(w.upload_id, sizeof w.upload_id, "%s",
		    o->resume->upload_id);
		int want;

		if (o->resume_foreign && o->resume->gap_from > 0) {
			rc = cairn_err_set(&w.err, CAIRN_ENOTFOUND, "a published "
			    "checkpoint of %s with a gap cannot be resumed", key);
			goto out;
		}
		memset(&pl, 0, sizeof pl);
		pl.w = &w;
		pl.want = o->resume->parts;
		pl.gap_from = o->resume->gap_from > 0 ? o->resume->gap_from :
		    INT_MAX;
		pl.gap_to = o->resume->gap_to;
		rc = store_mpu_list_parts(s, key, w.upload_id, part_cb, &pl,
		    &w.err);
		if (rc < 0)
			goto out;
		want = o->resume->parts - (o->resume->gap_from > 0 ?
		    o->resume->gap_to - o->resume->gap_from + 1 : 0);
		if ((int)w.nparts != want) {
			rc = cairn_err_set(&w.err, CAIRN_ENOTFOUND, "upload of "
			    "%s has %zu of the %d checkpointed parts", key,
			    w.nparts, want);
			goto out;
		}
		qsort(w.parts, w.nparts, sizeof *w.parts, part_number_cmp);
		w.gap_from = o->resume->gap_from;
		w.gap_to = o->resume->gap_to;
		w.next = o->resume->parts + 1;
		if (o->resume_foreign) {
			/*
			 * The old owner may have stored parts after the
			 * checkpoint it published and have one more in
			 * flight: leave all those numbers unused.
			 */
			w.gap_from = o->resume->parts + 1;
			w.gap_to = (pl.highest > o->resume->parts ?
			    pl.highest : o->resume->parts) + 1;
			w.next = w.gap_to + 1;
		}
		for (size_t i = 0; i < w.nparts; i++)
			w.compressed += w.parts[i].size;
		w.skip_until = o->resume->last_file;
		w.bytes_done = o->resume->bytes_done;
		w.files_done = o->resume->files_done;
		snprintf(w.last_file, sizeof w.last_file, "%s",
		    o->resume->last_file);
		log_info("resuming %s after part %d (last file %s)",
		    key, o->resume->parts, o->resume->last_file);
		if (o->resume_foreign)
			log_info("%s: another owner's upload: parts %d..%d "
			    "left out, continuing at part %d", key, w.gap_from,
			    w.gap_to, w.next);
	} else {
		w.next = 1;
		rc = hp_fence(&w);
		if (rc < 0)
			goto out;
		rc = store_mpu_create(s, key, &id, &w.err);
		if (rc < 0)
			goto out;
		if (strlen(id) >= sizeof w.upload_id) {
			rc = cairn_err_set(&w.err, CAIRN_ETOOBIG, "upload id "
			    "too long");
			goto out;
		}
		snprintf(w.upload_id, sizeof w.upload_id, "%s", id);
	}
	hp_progress(&w);

	rc = hp_spool_open(&w);
	if (rc < 0)
		goto out;
	w.zout = xmalloc(HP_ZOUT);
	w.io = xmalloc(HP_IOBUF);
	if (deflateInit2(&w.z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
	    Z_DEFAULT_STRATEGY) != Z_OK) {
		rc = cairn_err_set(&w.err, CAIRN_EFAIL, "zlib init failed");
		goto out;
	}
	w.zinit = 1;
	w.e = archive_entry_new();
	w.disk = archive_read_disk_new();
	archive_read_disk_set_standard_lookup(w.disk);
	archive_read_disk_set_symlink_physical(w.disk);
	w.a = archive_write_new();
	if (archive_write_set_format_pax(w.a) != ARCHIVE_OK ||
	    archive_write_set_bytes_per_block(w.a, 0) != ARCHIVE_OK ||
	    archive_write_open2(w.a, &w, NULL, hp_archive_cb, NULL, NULL) !=
	    ARCHIVE_OK) {
		rc = cairn_err_set(&w.err, CAIRN_EFAIL, "libarchive: %s",
		    archive_error_string(w.a));
		goto out;
	}
	rc = hp_entry(&w, root, ".", ".", &rst, &w.err);
	if (rc == 0)
		rc = walk(root, "", 0, hp_entry, &w, &w.err);
	if (rc < 0)
		goto out;
	w.closing = 1;
	if (archive_write_close(w.a) != ARCHIVE_OK) {
		rc = la_fail(&w, w.a, "closing", key);
		goto out;
	}
	rc = hp_cut(&w, 1);
	if (rc < 0)
		goto out;
	rc = hp_fence(&w);
	if (rc < 0)
		goto out;
	rc = store_mpu_complete(s, key, w.upload_id, w.parts, w.nparts,
	    st != NULL ? st->etag : NULL, &w.err);
	if (rc < 0)
		goto out;
	hp_progress(&w);
out:
	/*
	 * Failed for good (not stopped, not fenced): drop the upload, its
	 * parts are of no use to anyone (the caller marks the volume Failed).
	 */
	if (rc < 0 && rc != CAIRN_ECANCELED && rc != CAIRN_EFENCED &&
	    w.upload_id[0] != '\0' && hp_fence(&w) == 0)
		(void)store_mpu_abort(s, key, w.upload_id, NULL);
	if (st != NULL) {
		st->bytes_total = w.bytes_total;
		st->files_total = w.files_total;
		st->bytes_done = w.bytes_done;
		st->compressed = w.compressed;
		st->parts = (int)w.nparts;
	}
	if (w.a != NULL)
		archive_write_free(w.a);	/* after close: nothing more */
	if (w.disk != NULL)
		archive_read_free(w.disk);
	if (w.e != NULL)
		archive_entry_free(w.e);
	if (w.zinit)
		deflateEnd(&w.z);
	if (w.spool >= 0)
		close(w.spool);
	if (root >= 0)
		close(root);
	free(w.zout);
	free(w.io);
	free(w.parts);
	free(id);
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

int
hostpath_restore(struct store *s, const char *key, const char *dir,
    const struct hostpath_opts *o, struct hostpath_stats *st,
    struct cairn_err *err)
{
	struct hostpath_opts defaults;
	struct hp_reader r;
	struct archive *a = NULL, *out = NULL;
	struct archive_entry *e;
	struct timespec ts[2];
	char *abs = NULL, *full = NULL, *relc = NULL;
	const char *rel, *hl;
	const void *blk;
	size_t blen;
	la_int64_t off;
	uint64_t done = 0, total, files = 0, entry_base, since = 0;
	int flags, rc = 0, have_root = 0, lr;
	mode_t root_mode = 0;
	uid_t root_uid = 0;
	gid_t root_gid = 0;

	if (o == NULL) {
		memset(&defaults, 0, sizeof defaults);
		o = &defaults;
	}
	memset(&r, 0, sizeof r);
	total = o->expect_total;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return cairn_err_errno(err, CAIRN_EIO, errno, "creating %s",
		    dir);
	abs = realpath(dir, NULL);
	if (abs == NULL)
		return cairn_err_errno(err, CAIRN_EIO, errno, "resolving %s",
		    dir);
	rc = tarread_src_store(&r.src, s, key, 0, &r.err);
	if (rc < 0) {
		cairn_err_copy(err, &r.err);
		free(abs);
		return rc;
	}
	a = archive_read_new();
	archive_read_support_filter_gzip(a);
	archive_read_support_format_tar(a);
	if (archive_read_open(a, &r, NULL, hp_read_cb, NULL) != ARCHIVE_OK) {
		rc = cairn_err_set(&r.err, r.rc ? r.rc : CAIRN_EPROTO,
		    "reading %s: %s", key, archive_error_string(a));
		goto out;
	}
	flags = ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME |
	    ARCHIVE_EXTRACT_ACL | ARCHIVE_EXTRACT_XATTR |
	    ARCHIVE_EXTRACT_SPARSE | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
	    ARCHIVE_EXTRACT_SECURE_SYMLINKS;
	if (geteuid() == 0)
		flags |= ARCHIVE_EXTRACT_OWNER;
	out = archive_write_disk_new();
	archive_write_disk_set_options(out, flags);
	archive_write_disk_set_standard_lookup(out);
	for (;;) {
		if (o->stop != NULL && *o->stop) {
			rc = cairn_err_set(&r.err, CAIRN_ECANCELED, "stopped");
			goto out;
		}
		if (o->fence != NULL && (rc = o->fence(o->arg, &r.err)) < 0)
			goto out;
		lr = archive_read_next_header(a, &e);
		if (lr == ARCHIVE_EOF)
			break;
		if (lr < ARCHIVE_WARN) {
			rc = cairn_err_set(&r.err, r.rc ? r.rc : CAIRN_EPROTO,
			    "reading %s: %s", key, archive_error_string(a));
			goto out;
		}
		free(relc);
		relc = xstrdup(archive_entry_pathname(e));
		rel = relc;	/* the entry's own copy changes below */
		if (rel == NULL || name_safe(rel) < 0) {
			rc = cairn_err_set(&r.err, CAIRN_EPROTO, "%s: unsafe "
			    "entry name \"%.200s\" refused", key,
			    rel ? rel : "(none)");
			goto out;
		}
		if (is_root_name(rel)) {
			have_root = 1;
			root_mode = archive_entry_perm(e);
			root_uid = (uid_t)archive_entry_uid(e);
			root_gid = (gid_t)archive_entry_gid(e);
			ts[0].tv_sec = archive_entry_atime(e);
			ts[0].tv_nsec = archive_entry_atime_nsec(e);
			ts[1].tv_sec = archive_entry_mtime(e);
			ts[1].tv_nsec = archive_entry_mtime_nsec(e);
			continue;
		}
		full = xasprintf("%s/%s", abs, rel);
		archive_entry_copy_pathname(e, full);
		FREE_NULL(full);
		hl = archive_entry_hardlink(e);
		if (hl != NULL) {
			if (name_safe(hl) < 0) {
				rc = cairn_err_set(&r.err, CAIRN_EPROTO, "%s: "
				    "unsafe link target \"%.200s\" refused",
				    key, hl);
				goto out;
			}
			full = xasprintf("%s/%s", abs, hl);
			archive_entry_copy_hardlink(e, full);
			FREE_NULL(full);
		}
		if (archive_write_header(out, e) < ARCHIVE_WARN) {
			rc = cairn_err_set(&r.err, CAIRN_EIO, "%s: extracting "
			    "\"%.200s\": %s", key, rel,
			    archive_error_string(out));
			goto out;
		}
		entry_base = done;
		if (archive_entry_size(e) > 0) {
			for (;;) {
				lr = archive_read_data_block(a, &blk, &blen,
				    &off);
				if (lr == ARCHIVE_EOF)
					break;
				if (lr < ARCHIVE_WARN) {
					rc = cairn_err_set(&r.err, r.rc ? r.rc :
					    CAIRN_EPROTO, "%s: reading data: %s",
					    key, archive_error_string(a));
					goto out;
				}
				if (archive_write_data_block(out, blk, blen,
				    off) < ARCHIVE_WARN) {
					rc = cairn_err_set(&r.err, CAIRN_EIO,
					    "%s: writing \"%.200s\": %s", key,
					    rel, archive_error_string(out));
					goto out;
				}
				done = entry_base + (uint64_t)off + blen;
				if (done > total)
					total = done;
				if (o->progress != NULL)
					o->progress(o->arg, done, total, files,
					    0);
				since += blen;
				if (since >= (4u << 20) && o->fence != NULL) {
					since = 0;
					rc = o->fence(o->arg, &r.err);
					if (rc < 0)
						goto out;
				}
			}
			done = entry_base + (uint64_t)archive_entry_size(e);
		}
		if (archive_write_finish_entry(out) < ARCHIVE_WARN) {
			rc = cairn_err_set(&r.err, CAIRN_EIO, "%s: finishing "
			    "\"%.200s\": %s", key, rel,
			    archive_error_string(out));
			goto out;
		}
		files++;
		if (done > total)
			total = done;
		if (o->progress != NULL)
			o->progress(o->arg, done, total, files, 0);
	}
	if (archive_write_close(out) != ARCHIVE_OK) {
		rc = cairn_err_set(&r.err, CAIRN_EIO, "%s: %s", key,
		    archive_error_string(out));
		goto out;
	}
	if (have_root) {
		if (geteuid() == 0 && chown(abs, root_uid, root_gid) < 0)
			log_warn("chown %s: %s", abs,
			    strerror(errno));
		if (chmod(abs, root_mode) < 0 ||
		    utimensat(AT_FDCWD, abs, ts, 0) < 0) {
			rc = cairn_err_errno(&r.err, CAIRN_EIO, errno,
			    "setting mode and times of %s", abs);
			goto out;
		}
	}
out:
	if (st != NULL) {
		memset(st, 0, sizeof *st);
		st->bytes_total = total;
		st->bytes_done = done;
		st->files_total = files;
	}
	if (out != NULL)
		archive_write_free(out);
	if (a != NULL)
		archive_read_free(a);	/* closes nothing of ours */
	if (r.src.close != NULL)
		r.src.close(r.src.arg);
	free(abs);
	free(relc);
	if (rc < 0)
		cairn_err_copy(err, &r.err);
	return rc;
}
