/*
 * store_fs.c: the local-directory backend.
 *
 * An object is the file <root>/<key>; key segments are directories, made on
 * demand (0700) and removed again when a delete leaves them empty. Files
 * are created 0600: backups hold Secrets.
 *
 * Every publish is atomic: bytes go to <dir>/.cairn-tmp-<random> in the
 * object's own directory, then fsync, rename over the key, fsync of the
 * directory. A reader sees the old object or the new one, never a part; a
 * crash leaves at worst a .cairn-tmp-* file, which listing ignores.
 *
 * ETags are the lower-case hex MD5 of the content (libcrypto), as S3 gives
 * for single-part uploads. The value is computed while writing and kept in
 * the extended attribute user.cairn.etag together with the size and mtime
 * it was computed for; when the attribute is missing (filesystem without
 * user xattrs, file written by someone else) or stale, head/list compute
 * the MD5 by reading the file. An upload's parts are hashed once: their
 * ETag is the first 32 hex digits of their SHA-256, the one the caller
 * took on the way (store_src.sha256: the part pipeline records it) or
 * else computed while writing. A completed multipart object's ETag is,
 * as S3's, "<md5 of the parts' ETags as bytes>-N", from the part ETags:
 * completing copies the parts without reading them through a hash.
 *
 * Multipart uploads live in <root>/.cairn-uploads/<id>/: `key` holds the
 * object key, `part-00001`... the parts (each published atomically, ETag
 * as above). Everything is on disk, so a new process finds an upload by its
 * id, lists its parts and completes it. Complete copies the parts in order
 * into a temp file next to the key (checking each part's ETag), publishes it
 * atomically and removes the upload directory; a single part, already the
 * whole object, is published by a hard link instead of a copy.
 *
 * Only regular files are objects. Every open for reading goes through
 * open_regular(): O_NONBLOCK (a fifo planted at a key would otherwise block
 * the reading thread forever in open()), O_NOFOLLOW (the store never writes
 * symlinks; following one would read outside the root), fstat, refuse
 * anything that is not a regular file, then clear O_NONBLOCK.
 *
 * A read-only filesystem is a transient failure, as a 503 is for S3: a
 * filesystem remounted read-only (an NFS server restarting, an fsck, an
 * operator's remount) usually comes back. Every writing call (put, part,
 * upload start, complete, delete) that fails with EROFS is run again with
 * capped exponential backoff (100 ms doubling to 5 s, jitter over the upper
 * half) until it succeeds or readonly_wait_us (BackupStorageLocation
 * config.readOnlyWait, default STORE_FS_READONLY_WAIT_US) has passed since
 * its first failure; then it fails with CAIRN_EIO saying how long it
 * waited. A put whose source was read is re-sent only when the source can
 * rewind. EACCES and EPERM are not waited for: a remount gives EROFS, and
 * those two mean permissions or attributes, which an operator has to fix,
 * so the clear error comes at once. store_check() does not wait either (it
 * is a probe): it answers CAIRN_EREADONLY, and opening tolerates that.
 * Which errno made a call fail is kept per thread (tl_errno, set by
 * fs_fail()), so the retry loop does not parse messages.
 *
 * Threads: there is no mutable state in the struct after open; temp names
 * are random, so concurrent calls are safe (two puts of one key: the last
 * rename wins, both complete).
 */
#include "config.h"
#include "storage/store_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"

#define FS_HIDDEN	".cairn-"
#define FS_UPLOADS	".cairn-uploads"
#define FS_TMP		".cairn-tmp-"
#define FS_XATTR	"user.cairn.etag"
#define FS_IO_CHUNK	(1u << 20)
#define FS_RO_BACKOFF_US	(100 * 1000)
#define FS_RO_BACKOFF_CAP_US	(5 * 1000 * 1000)

struct store_fs {
	struct store base;
	char *root;		/* absolute or as given, no trailing '/' */
	int64_t ro_wait_us;	/* how long writes wait for a read-only fs */
};

/* The errno behind this thread's last fs_fail() (0: none). */
static _Thread_local int tl_errno;

static const struct store_ops fs_ops;

/* ---- small helpers ---------------------------------------------------- */

static char *
fs_path(struct store_fs *fs, const char *key)
{
	return xasprintf("%s/%s", fs->root, key);
}

static int
fs_fail(struct store_fs *fs, struct cairn_err *err, int code, int errnum,
    const char *what, const char *key)
{
	tl_errno = errnum;
	return cairn_err_errno(err, code, errnum, "%s: %s \"%.300s\"",
	    fs->base.desc, what, key);
}

/* One writing call's wait for a read-only filesystem (file comment). */
struct fs_wait {
	int64_t since_us;	/* monotonic time of the first EROFS; 0: none */
	int tries;		/* failed tries so far */
};

/* Before a writing call: no wait yet, no errno left from an earlier call. */
static struct fs_wait
fs_wait_start(void)
{
	struct fs_wait w = { 0, 0 };

	tl_errno = 0;
	return w;
}

/*
 * The writing call `op` on key just returned *rc (on failure err is filled
 * and its errno, if any, is in tl_errno). 1: run it again, after a pause
 * (it failed on a read-only filesystem, the wait is not over, and src, when
 * given and read from, was rewound). 0: return *rc; when the call had
 * waited, err then says for how long (or the log that it went through).
 * A stop during the pause (store_set_process_stop()) makes *rc
 * CAIRN_ECANCELED.
 */
static int
fs_again(struct store_fs *fs, struct fs_wait *w, int *rc, const char *op,
    const char *key, struct store_src *src, uint64_t src_read,
    struct cairn_err *err)
{
	char waited[TIME_STR_MAX], bound[TIME_STR_MAX];
	int64_t now = time_mono_us(), delay;
	int ro = *rc < 0 && tl_errno == EROFS;

	tl_errno = 0;
	if ((!ro && w->since_us == 0) || fs->ro_wait_us == 0)
		return 0;
	if (w->since_us == 0) {
		w->since_us = now;
		duration_format(fs->ro_wait_us, bound);
		log_warn("%s: %s \"%.300s\": the filesystem is read-only; "
		    "waiting up to %s for it to be writable again",
		    fs->base.desc, op, key, bound);
	}
	if (ro && now - w->since_us < fs->ro_wait_us &&
	    (src == NULL || src_read == 0 || store_src_rewind(src) == 0)) {
		delay = FS_RO_BACKOFF_US << (w->tries < 6 ? w->tries : 6);
		if (delay > FS_RO_BACKOFF_CAP_US)
			delay = FS_RO_BACKOFF_CAP_US;
		delay = delay / 2 + (int64_t)rand_below((uint64_t)delay / 2 + 1);
		if (now + delay - w->since_us > fs->ro_wait_us)
			delay = w->since_us + fs->ro_wait_us - now;
		w->tries++;
		cairn_err_clear(err);
		if (store_retry_sleep(delay > 0 ? delay : 0, fs->base.desc,
		    err) < 0) {
			*rc = CAIRN_ECANCELED;
			return 0;
		}
		return 1;
	}
	duration_format(now - w->since_us, waited);
	duration_format(fs->ro_wait_us, bound);
	if (*rc == 0)
		log_info("%s: %s \"%.300s\": writable again after %s",
		    fs->base.desc, op, key, waited);
	else if (ro)
		cairn_err_prefix(err, "the filesystem stayed read-only for %s "
		    "(%d tries; the wait is config.readOnlyWait, %s)", waited,
		    w->tries + 1, bound);
	return 0;
}

/* fsync the directory holding path. */
static int
fsync_dir_of(const char *path)
{
	char *dir = xstrdup(path), *slash;
	int fd, rc = 0;

	slash = strrchr(dir, '/');
	if (slash == NULL)
		strcpy(dir, ".");
	else if (slash == dir)
		slash[1] = '\0';
	else
		*slash = '\0';
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		rc = -1;
	if (fd >= 0)
		close(fd);
	free(dir);
	return rc;
}

/* mkdir -p of the directory holding path, below root (which exists). */
static int
mkdirs_for(const char *root, const char *path)
{
	char *p = xstrdup(path), *q;
	size_t rl = strlen(root);
	int rc = 0;

	for (q = strchr(p + rl + 1, '/'); q != NULL; q = strchr(q + 1, '/')) {
		*q = '\0';
		if (mkdir(p, 0700) < 0 && errno != EEXIST) {
			rc = -1;
			break;
		}
		*q = '/';
	}
	free(p);
	return rc;
}

/* Remove empty directories from path's parent up to (not incl.) root. */
static void
rmdirs_for(const char *root, const char *path)
{
	char *p = xstrdup(path), *slash;
	size_t rl = strlen(root);

	for (;;) {
		slash = strrchr(p, '/');
		if (slash == NULL || (size_t)(slash - p) <= rl)
			break;
		*slash = '\0';
		if (rmdir(p) < 0)
			break;
	}
	free(p);
}

static void
tmp_name_in(const char *path, char *out, size_t outsz)
{
	const char *slash = strrchr(path, '/');
	unsigned char r[8];
	char hx[17];

	rand_bytes(r, sizeof r);
	store_hex(r, sizeof r, hx);
	snprintf(out, outsz, "%.*s/" FS_TMP "%s", (int)(slash - path), path, hx);
}

/*
 * Open path read-only without blocking and without following a symlink at
 * its last component. Returns the fd of a regular file (O_NONBLOCK cleared,
 * *st filled); -1 with errno from open() (ENOENT, ENOTDIR, ELOOP for a
 * symlink, ENXIO for a socket...); or -2 when path exists but is not a
 * regular file (*st tells what it is). Nothing is left open on failure.
 */
static int
open_regular(const char *path, struct stat *st)
{
	int fd, fl;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	if (fstat(fd, st) < 0)
		goto fail;
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return -2;
	}
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
		goto fail;
	return fd;
fail:
	fl = errno;
	close(fd);
	errno = fl;
	return -1;
}

/* What a non-regular file is, for messages. */
static const char *
file_kind(mode_t mode)
{
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISFIFO(mode))
		return "a fifo";
	if (S_ISSOCK(mode))
		return "a socket";
	if (S_ISCHR(mode) || S_ISBLK(mode))
		return "a device";
	if (S_ISLNK(mode))
		return "a symlink";
	return "not a regular file";
}

/* Record the ETag of an open, fully written file in its xattr. */
static void
etag_save(int fd, const char *etag)
{
	struct stat st;
	char v[160];

	if (fstat(fd, &st) < 0)
		return;
	snprintf(v, sizeof v, "%lld %lld.%09ld %s", (long long)st.st_size,
	    (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec, etag);
	(void)fsetxattr(fd, FS_XATTR, v, strlen(v), 0);	/* optional cache */
}

/*
 * ETag of an open file: the xattr when it still matches, else the MD5 of
 * it (sha: the SHA-256 prefix of an upload part).
 */
static int
etag_of(int fd, const struct stat *st, char etag[STORE_ETAG_MAX], int sha)
{
	char v[160], want[80], *sp;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen;
	EVP_MD_CTX *ctx;
	ssize_t n;
	char *chunk;
	off_t off = 0;

	n = fgetxattr(fd, FS_XATTR, v, sizeof v - 1);
	if (n > 0) {
		v[n] = '\0';
		snprintf(want, sizeof want, "%lld %lld.%09ld ",
		    (long long)st->st_size, (long long)st->st_mtim.tv_sec,
		    st->st_mtim.tv_nsec);
		sp = v + strlen(want);
		/* an MD5 (or SHA-256 half), or a multipart "<md5>-N" */
		if (strncmp(v, want, strlen(want)) == 0 && (strlen(sp) == 32 ||
		    (strlen(sp) > 33 && strlen(sp) < STORE_ETAG_MAX &&
		    sp[32] == '-'))) {
			memcpy(etag, sp, strlen(sp) + 1);
			return 0;
		}
	}
	ctx = EVP_MD_CTX_new();
	if (ctx == NULL || !EVP_DigestInit_ex(ctx, sha ? EVP_sha256() :
	    EVP_md5(), NULL)) {
		EVP_MD_CTX_free(ctx);
		return -1;
	}
	chunk = xmalloc(FS_IO_CHUNK);
	for (;;) {
		n = pread(fd, chunk, FS_IO_CHUNK, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		EVP_DigestUpdate(ctx, chunk, (size_t)n);
		off += n;
	}
	free(chunk);
	EVP_DigestFinal_ex(ctx, md, &mdlen);
	EVP_MD_CTX_free(ctx);
	if (n < 0)
		return -1;
	store_hex(md, 16, etag);	/* MD5, or SHA-256's first half */
	return 0;
}

/*
 * File in onto out from their offsets with copy_file_range() (no pass
 * through user space; a clone where the filesystem shares extents).
 * *copied: the bytes it copied. 0 at the end of in; -1 when the kernel
 * stopped (another filesystem, an old kernel, an error): the caller goes
 * on with read/write from where it stopped.
 */
static int
kernel_copy(int in, int out, uint64_t *copied)
{
	for (;;) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, 1u << 30, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			return 0;
		*copied += (uint64_t)n;
	}
}

/*
 * Publish: write everything from src (or from the files in parts, when
 * src is NULL) to a temp file next to path, fsync, rename, fsync dir.
 */
struct fs_publish {
	struct store_src *src;		/* or: */
	char **part_paths;		/* n paths concatenated in order */
	size_t nparts;
	const struct store_progress *prog;
	char *etag;			/* out: MD5 hex */
	const char *what;		/* for messages: "object", "part" */
	const char *key;
	uint64_t src_read;		/* out: bytes read from src */
	int part;			/* an upload part: SHA-256 ETag */
	const char *etag_in;		/* the ETag, known: no hashing */
};

static int
fs_publish(struct store_fs *fs, const char *path, struct fs_publish *pb,
    struct cairn_err *err)
{
	char tmp[PATH_MAX + 64];
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen;
	EVP_MD_CTX *ctx = NULL;
	struct stat st;
	char *chunk = xmalloc(FS_IO_CHUNK);
	uint64_t done = 0;
	int64_t total = pb->src ? pb->src->len : -1;
	size_t i;
	ssize_t n;
	int fd = -1, in = -1, rc;

	tmp[0] = '\0';
	if (mkdirs_for(fs->root, path) < 0) {
		rc = fs_fail(fs, err, CAIRN_EIO, errno,
		    "making the directories of", pb->key);
		goto fail;
	}
	tmp_name_in(path, tmp, sizeof tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = fs_fail(fs, err, CAIRN_EIO, errno, "creating a temp file for",
		    pb->key);
		tmp[0] = '\0';
		goto fail;
	}
	if (pb->part && pb->src != NULL && pb->src->sha256 != NULL &&
	    strlen(pb->src->sha256) == 64)
		pb->etag_in = pb->src->sha256;	/* hashed once, by the caller */
	ctx = pb->etag_in != NULL ? NULL : EVP_MD_CTX_new();
	if (pb->etag_in == NULL && (ctx == NULL || !EVP_DigestInit_ex(ctx,
	    pb->part ? EVP_sha256() : EVP_md5(), NULL))) {
		rc = cairn_err_set(err, CAIRN_EFAIL, "%s unavailable",
		    pb->part ? "SHA-256" : "MD5");
		goto fail;
	}
	for (i = 0; pb->src != NULL || i < pb->nparts; i++) {
		int kcopy = pb->src == NULL && ctx == NULL;

		if (pb->src == NULL) {
			in = open_regular(pb->part_paths[i], &st);
			if (in == -2) {
				rc = cairn_err_set(err, CAIRN_EIO,
				    "%s: a part of \"%.300s\" is %s, not a file",
				    fs->base.desc, pb->key, file_kind(st.st_mode));
				goto fail;
			}
			if (in < 0) {
				rc = fs_fail(fs, err, CAIRN_EIO, errno,
				    "opening a part of", pb->key);
				goto fail;
			}
		}
		for (;;) {
			/* parts joined unhashed: the kernel copies (or clones) */
			if (kcopy && kernel_copy(in, fd, &done) == 0)
				break;
			kcopy = 0;
			if (pb->src != NULL)
				n = store_src_read(pb->src, chunk, FS_IO_CHUNK);
			else
				n = read(in, chunk, FS_IO_CHUNK);
			if (n < 0 && pb->src == NULL && errno == EINTR)
				continue;
			if (n < 0) {
				rc = pb->src ? cairn_err_set(err, CAIRN_ECANCELED,
				    "%s: reading the data of %s \"%.300s\" failed",
				    fs->base.desc, pb->what, pb->key) :
				    fs_fail(fs, err, CAIRN_EIO, errno,
				    "reading a part of", pb->key);
				goto fail;
			}
			if (n == 0)
				break;
			if (pb->src != NULL)
				pb->src_read += (uint64_t)n;
			if (util_write_all(fd, chunk, (size_t)n) < 0) {
				rc = fs_fail(fs, err, CAIRN_EIO, errno, "writing",
				    pb->key);
				goto fail;
			}
			if (ctx != NULL)
				EVP_DigestUpdate(ctx, chunk, (size_t)n);
			done += (uint64_t)n;
			store_progress_report(pb->prog, done, total);
		}
		if (pb->src != NULL)
			break;
		close(in);
		in = -1;
	}
	if (pb->src != NULL && pb->src->len >= 0 &&
	    done != (uint64_t)pb->src->len) {
		rc = cairn_err_set(err, CAIRN_EINVAL,
		    "%s: %s \"%.300s\": source gave %llu bytes, %lld announced",
		    fs->base.desc, pb->what, pb->key, (unsigned long long)done,
		    (long long)pb->src->len);
		goto fail;
	}
	if (ctx != NULL) {
		EVP_DigestFinal_ex(ctx, md, &mdlen);
		store_hex(md, 16, pb->etag);	/* MD5, or SHA-256: first half */
	} else if (pb->part) {	/* the caller's SHA-256: its first half */
		snprintf(pb->etag, STORE_ETAG_MAX, "%.32s", pb->etag_in);
	} else {
		snprintf(pb->etag, STORE_ETAG_MAX, "%s", pb->etag_in);
	}
	if (fsync(fd) < 0) {
		rc = fs_fail(fs, err, CAIRN_EIO, errno, "fsync of", pb->key);
		goto fail;
	}
	etag_save(fd, pb->etag);
	if (close(fd) < 0) {
		fd = -1;
		rc = fs_fail(fs, err, CAIRN_EIO, errno, "closing", pb->key);
		goto fail;
	}
	fd = -1;
	if (rename(tmp, path) < 0) {
		rc = fs_fail(fs, err, CAIRN_EIO, errno, "renaming into place",
		    pb->key);
		goto fail;
	}
	if (fsync_dir_of(path) < 0) {
		rc = fs_fail(fs, err, CAIRN_EIO, errno,
		    "fsync of the directory of", pb->key);
		goto out;	/* renamed: nothing to undo */
	}
	rc = 0;
	goto out;
fail:
	if (fd >= 0)
		close(fd);
	if (tmp[0] != '\0')
		unlink(tmp);	/* may fail too on a read-only fs: listing skips it */
out:
	if (in >= 0)
		close(in);
	EVP_MD_CTX_free(ctx);
	free(chunk);
	return rc;
}

/* ---- objects ---------------------------------------------------------- */

static int
fs_hidden_key(struct store_fs *fs, const char *key, struct cairn_err *err)
{
	const char *seg;

	for (seg = key; seg != NULL; seg = strchr(seg, '/')) {
		if (*seg == '/')
			seg++;
		if (str_has_prefix(seg, FS_HIDDEN))
			return cairn_err_set(err, CAIRN_EINVAL,
			    "%s: key \"%.300s\" uses the reserved name prefix "
			    "\"" FS_HIDDEN "\"", fs->base.desc, key);
	}
	return 0;
}

static int
fs_put(struct store *s, const char *key, struct store_src *src, char *etag,
    const struct store_progress *prog, struct cairn_err *err)
{
	struct store_fs *fs = (struct store_fs *)s;
	struct fs_publish pb = { src, NULL, 0, prog, etag, "object", key, 0, 0,
	    NULL };
	struct fs_wait w = fs_wait_start();
	char *path;
	int rc;

	rc = fs_hidden_key(fs, key, err);
	if (rc < 0)
		return rc;
	path = fs_path(fs, key);
	do {
		pb.src_read = 0;
		rc = fs_publish(fs, path, &pb, err);
	} while (fs_again(fs, &w, &rc, "writing", key, src, pb.src_read,
	    err));
	free(path);
	return rc;
}

/*
 * Open key for reading: regular files only. A directory is "not found" (a
 * prefix is not an object); a fifo, socket, device or symlink at the key is
 * refused with CAIRN_EINVAL naming the key, without blocking on it.
 */
static int
fs_open_obj(struct store_fs *fs, const char *key, struct stat *st,
    struct cairn_err *err)
{
	char *path;
	int fd, rc;

	rc = fs_hidden_key(fs, key, err);
	if (rc < 0)
		return rc;
	path = fs_path(fs, key);
	fd = open_regular(path, st);
	if (fd == -1 && (errno == ELOOP || errno == ENXIO) &&
	    lstat(path, st) == 0)
		fd = -2;	/* a symlink, a socket: say what it is */
	free(path);
	if ((fd == -1 && (errno == ENOENT || errno == ENOTDIR)) ||
	    (fd == -2 && S_ISDIR(st->st_mode)))
		return cairn_err_set(err, CAIRN_ENOTFOUND,
		    "%s: no object \"%.300s\"", fs->base.desc, key);
	if (fd == -2)
		return cairn_err_set(err, CAIRN_EINVAL,
		    "%s: \"%.300s\" is %s, not a regular file: refused",
		    fs->base.desc, key, file_kind(st->st_mode));
	if (fd < 0)
		return fs_fail(fs, err, CAIRN_EIO, errno, "opening", key);
	return fd;
}

static int
fs_get(struct store *s, const char *key, uint64_t off, int64_t len,
    store_write_fn sink, void *arg, const struct store_progress *prog,
    struct cairn_err *err)
{
	struct store_fs *fs = (struct store_fs *)s;
	struct stat st;
	char *chunk = NULL;
	uint64_t left, done = 0;
	ssize_t n;
	int fd, rc = 0;

	fd = fs_open_obj(fs, key, &st, err);
	if (fd < 0)
		return fd;
	if (off > (uint64_t)st.st_size ||
	    (off == (uint64_t)st.st_size && off > 0) ||
	    (len >= 0 && off + (uint64_t)len > (uint64_t)st.st_size)) {
		rc = cairn_err_set(err, CAIRN_EINVAL,
		    "%s: range %llu+%lld is outside object \"%.300s\" of %lld bytes",
		    fs->base.desc, (unsigned long long)off, (long long)len, key,
		    (long long)st.st_size);
		goto out;
	}
	left = len >= 0 ? (uint64_t)len : (uint64_t)st.st_size - off;
	chunk = xmalloc(FS_IO_CHUNK);
	while (left > 0) {
		n = pread(fd, chunk, left < FS_IO_CHUNK ? left : FS_IO_CHUNK,
		    (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = fs_fail(fs, err, CAIRN_EIO, n < 0 ? errno : EIO,
			    "reading", key);
			goto out;
		}
		if (sink(arg, chunk, (size_t)n) < 0) {
			rc = cairn_err_set(err, CAIRN_ECANCELED,
			    "%s: download of \"%.300s\" stopped by its reader",
			    fs->base.desc, key);
			goto out;
		}
		done += (uint64_t)n;
		left -= (uint64_t)n;
		store_progress_report(prog, done, (int64_t)(done + left));
	}
out:
	free(chunk);
	close(fd);
	return rc;
}

static void
fill_stat(const struct stat *st, struct store_stat *out)
{
	out->size = (uint64_t)st->st_size;
	out->mtime_us = (int64_t)st->st_mtim.tv_sec * 1000000 +
	    st->st_mtim.tv_nsec / 1000;
}

static int
fs_head(struct store *s, const char *key, struct store_stat *out,
    struct cairn_err *err)
{
	struct store_fs *fs = (struct store_fs *)s;
	struct stat st;
	int fd, rc = 0;

	fd = fs_open_obj(fs, key, &st, err);
	if (fd < 0)
		return fd;
	fill_stat(&st, out);
	if (etag_of(fd, &st, out->etag, 0) < 0)
		rc = fs_fail(fs, err, CAIRN_EIO, errno, "reading", key);
	close(fd);
	return rc;
}

static int
fs_del_once(struct store_fs *fs, const char *key, struct cairn_err *err)
{
	struct stat st;
	char *path;
	int rc;

	rc = fs_hidden_key(fs, key, err);
	if (rc < 0)
		return rc;
	path = fs_path(fs, key);
	if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		free(path);
		return 0;	/* a "directory" is no object: nothing to do */
	}
	if (unlink(path) < 0 && errno != ENOENT && errno != ENOTDIR) {
		rc = fs_fail(fs, err, CAIRN_EIO, errno, "deleting", key);
		free(path);
		return rc;
	}
	(void)fsync_dir_of(path);
	rmdirs_for(fs->root, path);
	free(path);
	return 0;
}

static int
fs_del(struct store *s, const char *key, struct cairn_err *err)
{
	struct store_fs *fs = (struct store_fs *)s;
	struct fs_wait w = fs_wait_start();
	int rc;

	do
		rc = fs_del_once(fs, key, err);
	while (fs_again(fs, &w, &rc, "deleting", key, NULL, 0, err));
	return rc;
}

/* ---- listing ---------------------------------------------------------- */

struct fs_ent {
	char *key;
	int is_prefix;
};

struct fs_walk {
	struct store_fs *fs;
	struct fs_ent *v;
	size_t n, alloc;
	int err_no;
	char *err_path;
};

static void
walk_add(struct fs_walk *w, char *key, int is_prefix)
{
	if (w->n == w->alloc) {
		w->alloc = w->alloc ? 2 * w->alloc : 64;
		w->v = xreallocarray(w->v, w->alloc, sizeof *w->v);
	}
	w->v[w->n].key = key;
	w->v[w->n].is_prefix = is_prefix;
	w->n++;
}

/* Does directory path hold at least one object (recursively)? */
static int
dir_has_object(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	struct stat st;
	char *sub;
	int found = 0;

	if (d == NULL)
		return 0;
	while (!found) {
		de = readdir(d);
		if (de == NULL)
			break;
		if (de->d_name[0] == '.' && (de->d_name[1] == '\0' ||
		    strcmp(de->d_name, "..") == 0 ||
		    str_has_prefix(de->d_name, FS_HIDDEN)))
			continue;
		sub = xasprintf("%s/%s", path, de->d_name);
		if (lstat(sub, &st) == 0) {
			if (S_ISREG(st.st_mode))
				found = 1;
			else if (S_ISDIR(st.st_mode))
				found = dir_has_object(sub);
		}
		free(sub);
	}
	closedir(d);
	return found;
}

/*
 * Walk dir (the directory of key prefix `base`, "" or ending in '/'),
 * adding entries whose name starts with filter (only at this level).
 */
static void
walk_dir(struct fs_walk *w, const char *base, const char *filter, int delim)
{
	char *dpath = xasprintf("%s/%s", w->fs->root, base);
	DIR *d = opendir(dpath);
	struct dirent *de;
	struct stat st;
	char *sub, *key;

	if (d == NULL) {
		if (errno != ENOENT && errno != ENOTDIR && w->err_no == 0) {
			w->err_no = errno;
			w->err_path = xstrdup(base);
		}
		free(dpath);
		return;
	}
	for (;;) {
		de = readdir(d);
		if (de == NULL)
			break;
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    str_has_prefix(de->d_name, FS_HIDDEN))
			continue;
		if (!str_has_prefix(de->d_name, filter))
			continue;
		sub = xasprintf("%s/%s", dpath, de->d_name);
		if (lstat(sub, &st) < 0) {
			free(sub);
			continue;
		}
		if (S_ISREG(st.st_mode)) {
			walk_add(w, xasprintf("%s%s", base, de->d_name), 0);
		} else if (S_ISDIR(st.st_mode)) {
			key = xasprintf("%s%s/", base, de->d_name);
			if (delim) {
				if (dir_has_object(sub))
					walk_add(w, key, 1);
				else
					free(key);
			} else {
				walk_dir(w, key, "", 0);
				free(key);
			}
		}
		free(sub);
	}
	closedir(d);
	free(dpath);
}

static int
ent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct fs_ent *)a)->key,
	    ((const struct fs_ent *)b)->key);
}

static int
fs_list(struct store *s, const char *prefix, const char *delim,
    store_list_fn fn, void *arg, struct cairn_err *err)
{
	struct store_fs *fs = (struct store_fs *)s;
	struct fs_walk w = { fs, NULL, 0, 0, 0, NULL };
	struct store_entry e;
	struct stat st;
	const char *slash = strrchr(prefix, '/');
	char *base, *path;
	size_t i;
	int fd, rc = 0, stop = 0;

	if (*prefix != '\0') {
		rc = fs_hidden_key(fs, prefix, err);
		if (rc < 0)
			return rc;
	}
	base = slash ? xstrndup(prefix, (size_t)(slash - prefix) + 1) : xstrdup("");
	walk_dir(&w, base, slash ? slash + 1 : prefix, delim != NULL);
	free(base);
	if (w.err_no != 0) {
		rc = cairn_err_errno(err, CAIRN_EIO, w.err_no,
		    "%s: listing \"%.300s\"", fs->base.desc, w.err_path);
		goto out;
	}
	if (w.n > 0)
		qsort(w.v, w.n, sizeof *w.v, ent_cmp);
	for (i = 0; i < w.n && !stop; i++) {
		memset(&e, 0, sizeof e);
		e.key = w.v[i].key;
		e.is_prefix = w.v[i].is_prefix;
		if (!e.is_prefix) {
			path = fs_path(fs, e.key);
			fd = open_regular(path, &st);
			free(path);
			if (fd < 0)
				continue;	/* deleted or replaced meanwhile */
			fill_stat(&st, &e.stat);
			(void)etag_of(fd, &st, e.stat.etag, 0);
			close(fd);
		}
		stop = fn(arg, &e);
	}
out:
	for (i = 0; i < w.n; i++)
		free(w.v[i].key);
	free(w.v);
	free(w.err_path);
	return rc;
}

/* ---- multipart -------------------------------------------------------- */

static int
id_ok(const char *id)
{
	size_t i;

	for (i = 0; id[i] != '\0'; i++)
		if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
			return 0;
	return i == 32;
}

/* The upload directory of id, checked to exist and to be for key. */
static int
upload_dir(struct store_fs *fs, const char *key, const char *id, char **out,
    struct cairn_err *err)
{
	char *dir, *kpath, *stored = NULL;
	struct stat st;
	struct buf b;
	FILE *f = NULL;
	char tmp[4096];
	size_t n;
	int fd, rc = 0;

	*out = NULL;
	if (!id_ok(id))
		return cairn_err_set(err, CAIRN_ENOTFOUND,
		    "%s: no multipart upload \"%.100s\" for \"%.300s\"",
		    fs->base.desc, id, key);
	dir = xasprintf("%s/" FS_UPLOADS "/%s", fs->root, id);
	kpath = xasprintf("%s/key", dir);
	fd = open_regular(kpath, &st);
	free(kpath);
	if (fd >= 0) {
		f = fdopen(fd, "r");
		if (f == NULL)
			close(fd);
	}
	if (f == NULL) {
		free(dir);
		return cairn_err_set(err, CAIRN_ENOTFOUND,
		    "%s: no multipart upload \"%s\" for \"%.300s\"",
		    fs->base.desc, id, key);
	}
	buf_init(&b, STORE_KEY_MAX + 1);
	for (;;) {
		n = fread(tmp, 1, sizeof tmp, f);
		if (n == 0 || buf_append(&b, tmp, n) < 0)
			break;
	}
	fclose(f);
	stored = buf_take(&b, NULL);
	if (stored == NULL || strcmp(stored, key) != 0)
		rc = cairn_err_set(err, CAIRN_ENOTFOUND,
		    "%s: multipart upload \"%s\" is not for \"%.300s\"",
		    fs->base.desc, id, key);
	free(stored);
	if (rc < 0) {
		free(dir);
		return rc;
	}
	*out = dir;
	return 0;
}

static int
fs_mpu_create_once(struct store_fs *fs, const char *key, char **id,
    struct cairn_err *err)
{
	unsigned char r[16];
	char hx[33], *dir = NULL, *up = NULL, *kpath = NULL;
	struct store_src src;
	char etag[STORE_ETAG_MAX];
	struct fs_publish pb = { &src, NULL, 0, NULL, etag, "upload key", key,
	    0, 0, NULL };
	int rc;

	rc = fs_hidden_key(fs, key, err);
	if (rc < 0)
		return rc;
	rand_bytes(r, sizeof r);
	store_hex(r, sizeof r, hx);
	up = xasprintf("%s/" FS_UPLOADS, fs->root);
	if (mkdir(up, 0700) < 0 && errno != EEXIST) {
		rc = fs_fail(fs, err, CAIRN_EIO, errno,
		    "making the uploads directory for", key);
		goto out;
	}
	dir = xasprintf("%s/%s", up, hx);
	if (mkdir(dir, 0700) < 0) {
		rc = fs_fail(fs, err, CAIRN_EIO, errno,
		    "making an upload directory for", key);
		goto out;
	}
	kpath = xasprintf("%s/key", dir);
	store_src_mem(&src, key, strlen(key));
	rc = fs_publish(fs, kpath, &pb, err);
	if (rc == 0)
		*id = xstrdup(hx);
out:
	free(up);
	free(dir);
	free(kpath);
	return rc;
}

static int
fs_mpu_create(struct store *s, const char *key, char **id,
    struct cairn_err *err)
{
	struct store_fs *fs = (struct store_fs *)s;
	struct fs_wait w = fs_wait_start();
	int rc;

	do
		rc = fs_mpu_create_once(fs, key, id, err);
	while (fs_again(fs, &w, &rc, "starting an upload of", key, NULL,
	    0, err));
	return rc;
}

static int
fs_mpu_put_part(struct store *s, const char *key, const char *id, int number,
    struct store_src *src, char *etag, const struct store_progress *prog,
    struct cairn_err *err)
{
	struct store_fs *fs = (struct store_fs *)s;
	struct fs_publish pb = { src, NULL, 0, prog, etag, "part", key, 0, 1,
	    NULL };
	struct fs_wait w = fs_wait_start();
	char *dir, *path;
	int rc;

	rc = upload_dir(fs, key, id, &dir, err);
	if (rc < 0)
		return rc;
	path = xasprintf("%s/part-%05d", dir, number);
	do {
		pb.src_read = 0;
		rc = fs_publish(fs, path, &pb, err);
	} while (fs_again(fs, &w, &rc, "writing a part of", key, src,
	    pb.src_read, err));
	if (rc < 0)
		cairn_err_prefix(err, "part %d", number);
	free(path);
	free(dir);
	return rc;
}

struct fs_parts {
	struct store_part *v;
	size_t n, alloc;
};

static int
part_cmp(const void *a, const void *b)
{
	return ((const struct store_part *)a)->number -
	    ((const struct store_part *)b)->number;
}

/* Read the parts of an upload directory, ascending. */
static int
read_parts(struct store_fs *fs, const char *key, const char *dir,
    struct fs_parts *ps, struct cairn_err *err)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	struct stat st;
	struct store_part p;
	char *path, *end;
	long num;
	int fd;

	if (d == NULL)
		return fs_fail(fs, err, CAIRN_EIO, errno,
		    "listing the parts of", key);
	for (;;) {
		de = readdir(d);
		if (de == NULL)
			break;
		if (!str_has_prefix(de->d_name, "part-"))
			continue;
		num = strtol(de->d_name + 5, &end, 10);
		if (*end != '\0' || num < 1 || num > STORE_PART_MAX_NUMBER)
			continue;
		path = xasprintf("%s/%s", dir, de->d_name);
		fd = open_regular(path, &st);
		free(path);
		if (fd < 0)
			continue;	/* not a part this store wrote */
		memset(&p, 0, sizeof p);
		p.number = (int)num;
		if (etag_of(fd, &st, p.etag, 1) < 0) {
			close(fd);
			closedir(d);
			return fs_fail(fs, err, CAIRN_EIO, errno,
			    "reading a part of", key);
		}
		p.size = (uint64_t)st.st_size;
		close(fd);
		if (ps->n == ps->alloc) {
			ps->alloc = ps->alloc ? 2 * ps->alloc : 16;
			ps->v = xreallocarray(ps->v, ps->alloc, sizeof *ps->v);
		}
		ps->v[ps->n++] = p;
	}
	closedir(d);
	if (ps->n > 0)
		qsort(ps->v, ps->n, sizeof *ps->v, part_cmp);
	return 0;
}

static int
fs_mpu_list_parts(struct store *s, const char *key, const char *id,
    store_part_fn fn, void *arg, struct cairn_err *err)
{
	struct store_fs *fs = (struct store_fs *)s;
	struct fs_parts ps = { NULL, 0, 0 };
	char *dir;
	size_t i;
	int rc;

	rc = upload_dir(fs, key, id, &dir, err);
	if (rc < 0)
		return rc;
	rc = read_parts(fs, key, dir, &ps, err);
	for (i = 0; rc == 0 && i < ps.n; i++) {
		if (fn(arg, &ps.v[i]) != 0)
			break;
	}
	free(ps.v);
	free(dir);
	return rc;
}

static void
rm_upload(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char *p;

	if (d != NULL) {
		for (;;) {
			de = readdir(d);
			if (de == NULL)
				break;
			if (strcmp(de->d_name, ".") == 0 ||
			    strcmp(de->d_name, "..") == 0)
				continue;
			p = xasprintf("%s/%s", dir, de->d_name);
			unlink(p);
			free(p);
		}
		closedir(d);
	}
	rmdir(dir);
	(void)fsync_dir_of(dir);
}

/*
 * One part is the whole object, stored and fsynced already, with its MD5
 * as ETag: publish it by a hard link (temp name, then rename into place)
 * instead of copying it. The part keeps its own link until rm_upload(),
 * so a complete retried after a crash finds it again. 1: no hard link
 * here (another filesystem, no link support): copy instead.
 */
static int
fs_publish_link(struct store_fs *fs, const char *key, const char *path,
    const char *part, struct cairn_err *err)
{
	char tmp[PATH_MAX + 64];

	if (mkdirs_for(fs->root, path) < 0)
		return fs_fail(fs, err, CAIRN_EIO, errno,
		    "making the directories of", key);
	tmp_name_in(path, tmp, sizeof tmp);
	if (link(part, tmp) < 0)
		return 1;
	if (rename(tmp, path) < 0) {
		unlink(tmp);
		return 1;
	}
	if (fsync_dir_of(path) < 0)
		return fs_fail(fs, err, CAIRN_EIO, errno,
		    "fsync of the directory of", key);
	return 0;
}

static int
fs_mpu_complete_once(struct store_fs *fs, const char *key, const char *id,
    const struct store_part *parts, size_t n, char *etag,
    struct cairn_err *err)
{
	struct fs_parts ps = { NULL, 0, 0 };
	struct fs_publish pb = { NULL, NULL, 0, NULL, etag, "object", key, 0, 0,
	    NULL };
	char *dir, *path = NULL, joined[STORE_ETAG_MAX];
	size_t i, j;
	int rc;

	rc = upload_dir(fs, key, id, &dir, err);
	if (rc < 0)
		return rc;
	rc = read_parts(fs, key, dir, &ps, err);
	if (rc < 0)
		goto out;
	pb.part_paths = xcalloc(n, sizeof *pb.part_paths);
	pb.nparts = n;
	for (i = 0; i < n; i++) {
		for (j = 0; j < ps.n && ps.v[j].number != parts[i].number; j++)
			;
		if (j == ps.n || strcmp(ps.v[j].etag, parts[i].etag) != 0) {
			rc = cairn_err_set(err, CAIRN_EINVAL,
			    "%s: completing \"%.300s\": part %d %s", fs->base.desc,
			    key, parts[i].number, j == ps.n ? "was never uploaded" :
			    "has a different ETag than given");
			goto out;
		}
		pb.part_paths[i] = xasprintf("%s/part-%05d", dir, parts[i].number);
	}
	path = fs_path(fs, key);
	/* S3's multipart ETag, from the part ETags: the data is not hashed */
	if (store_mpu_etag(parts, n, joined) == 0)
		pb.etag_in = joined;
	rc = n == 1 ? fs_publish_link(fs, key, path, pb.part_paths[0], err) :
	    1;
	if (rc == 0 && etag != NULL)
		snprintf(etag, STORE_ETAG_MAX, "%s", parts[0].etag);
	else if (rc > 0)
		rc = fs_publish(fs, path, &pb, err);
	if (rc == 0)
		rm_upload(dir);
out:
	if (pb.part_paths != NULL)
		for (i = 0; i < n; i++)
			free(pb.part_paths[i]);
	free(pb.part_paths);
	free(ps.v);
	free(path);
	free(dir);
	return rc;
}

static int
fs_mpu_complete(struct store *s, const char *key, const char *id,
    const struct store_part *parts, size_t n, char *etag,
    struct cairn_err *err)
{
	struct store_fs *fs = (struct store_fs *)s;
	struct fs_wait w = fs_wait_start();
	int rc;

	do
		rc = fs_mpu_complete_once(fs, key, id, parts, n, etag, err);
	while (fs_again(fs, &w, &rc, "completing", key, NULL, 0, err));
	return rc;
}

static int
fs_mpu_abort(struct store *s, const char *key, const char *id,
    struct cairn_err *err)
{
	struct store_fs *fs = (struct store_fs *)s;
	char *dir;
	int rc;

	rc = upload_dir(fs, key, id, &dir, err);
	if (rc < 0)
		return rc;
	rm_upload(dir);
	free(dir);
	return 0;
}

/* ---- open / check ----------------------------------------------------- */

static int
fs_check(struct store *s, struct cairn_err *err)
{
	struct store_fs *fs = (struct store_fs *)s;
	struct stat st;

	if (stat(fs->root, &st) < 0)
		return cairn_err_errno(err, errno == ENOENT ? CAIRN_ENOTFOUND :
		    CAIRN_EIO, errno, "%s: storage directory", fs->base.desc);
	if (!S_ISDIR(st.st_mode))
		return cairn_err_set(err, CAIRN_EIO,
		    "%s: storage path is not a directory", fs->base.desc);
	if (access(fs->root, R_OK | W_OK | X_OK) < 0 && errno == EROFS)
		return cairn_err_set(err, CAIRN_EREADONLY, "%s: the storage "
		    "directory's filesystem is read-only (writes wait up to "
		    "config.readOnlyWait for it)", fs->base.desc);
	if (access(fs->root, R_OK | W_OK | X_OK) < 0)
		return cairn_err_errno(err, CAIRN_EIO, errno,
		    "%s: storage directory is not readable and writable",
		    fs->base.desc);
	return 0;
}

static void
fs_free(struct store *s)
{
	struct store_fs *fs = (struct store_fs *)s;

	free(fs->root);
	free(fs);
}

int
store_open_fs(const char *root, int create, struct store **out,
    struct cairn_err *err)
{
	return store_open_fs_wait(root, create, STORE_FS_READONLY_WAIT_US, out,
	    err);
}

int
store_open_fs_wait(const char *root, int create, int64_t readonly_wait_us,
    struct store **out, struct cairn_err *err)
{
	struct store_fs *fs;
	size_t n;
	char *p, *q;
	int rc;

	*out = NULL;
	if (root == NULL || *root == '\0')
		return cairn_err_set(err, CAIRN_EINVAL,
		    "local storage needs a directory path");
	fs = xcalloc(1, sizeof *fs);
	fs->base.ops = &fs_ops;
	fs->root = xstrdup(root);
	fs->ro_wait_us = readonly_wait_us > 0 ? readonly_wait_us : 0;
	n = strlen(fs->root);
	while (n > 1 && fs->root[n - 1] == '/')
		fs->root[--n] = '\0';
	fs->base.desc = xasprintf("fs:%s", fs->root);
	if (create) {
		p = xstrdup(fs->root);
		for (q = strchr(p + 1, '/'); q != NULL; q = strchr(q + 1, '/')) {
			*q = '\0';
			(void)mkdir(p, 0700);
			*q = '/';
		}
		(void)mkdir(p, 0700);
		free(p);
	}
	rc = fs_check(&fs->base, err);
	if (rc == CAIRN_EREADONLY) {
		cairn_err_clear(err);	/* opens; writes wait for it */
		rc = 0;
	}
	if (rc < 0) {
		store_free(&fs->base);
		return rc;
	}
	*out = &fs->base;
	return 0;
}

static const struct store_ops fs_ops = {
	"fs", fs_free, fs_check, fs_put, fs_get, fs_head, fs_list, fs_del, NULL,
	fs_mpu_create, fs_mpu_put_part, fs_mpu_list_parts, fs_mpu_complete,
	fs_mpu_abort, NULL,
};
