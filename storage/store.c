/*
 * store.c: the storage interface and what both backends share.
 *
 * Design. The engine writes tarball parts, metadata files and logs, and
 * reads them back; it must not care whether they land in a directory on an
 * edge node or in an S3 bucket. So storage/ offers one small vocabulary
 * (put, get with range, head, list with delimiter, delete, multipart) and
 * two backends behind a table of function pointers (store_int.h).
 *
 * This file owns the rules both backends share, checked before a backend
 * is called: the key grammar (no empty, "." or ".." segment, no leading
 * '/', at most STORE_KEY_MAX bytes), part numbers 1..10000, non-NULL
 * required arguments. A key that passes is safe to join to an fs root and
 * to put in an S3 URL after percent-encoding. The fs backend additionally
 * refuses segments starting with ".cairn-" (its own temp and upload names).
 *
 * Sources (struct store_src) are how bytes enter: memory and fd sources are
 * rewindable so a failed S3 request can be re-sent; a caller's own read
 * callback may be rewindable too. Sinks are plain write callbacks.
 *
 * Generic operations built from the primitives live here too:
 * store_delete_prefix (list, then delete: one by one, or in batches where
 * the backend has them, S3's DeleteObjects), store_put_mem, store_put_gzip,
 * store_get_mem.
 */
#include "config.h"
#include "storage/store_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <openssl/evp.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"

/* ---- sources ---------------------------------------------------------- */

static ssize_t
src_mem_read(void *arg, void *buf, size_t n)
{
	struct store_src *src = arg;
	int64_t left = src->len - src->p_pos;

	if (left <= 0)
		return 0;
	if ((int64_t)n > left)
		n = (size_t)left;
	memcpy(buf, src->p_mem + src->p_pos, n);
	src->p_pos += (int64_t)n;
	return (ssize_t)n;
}

static int
src_rewind_pos(void *arg)
{
	struct store_src *src = arg;

	src->p_pos = 0;
	return 0;
}

void
store_src_mem(struct store_src *src, const void *data, size_t len)
{
	memset(src, 0, sizeof *src);
	src->read = src_mem_read;
	src->rewind = src_rewind_pos;
	src->arg = src;
	src->len = (int64_t)len;
	src->p_mem = data;
	src->p_fd = -1;
}

static ssize_t
src_fd_read(void *arg, void *buf, size_t n)
{
	struct store_src *src = arg;
	int64_t left = src->len - src->p_pos;
	ssize_t r;

	if (left <= 0)
		return 0;
	if ((int64_t)n > left)
		n = (size_t)left;
	do {
		r = pread(src->p_fd, buf, n, (off_t)(src->p_base + src->p_pos));
	} while (r < 0 && errno == EINTR);
	if (r < 0)
		return -1;
	if (r == 0)
		return -1;	/* file shrank under us: never send short data */
	src->p_pos += r;
	return r;
}

int
store_src_fd(struct store_src *src, int fd, int64_t off, int64_t len,
    struct cairn_err *err)
{
	struct stat st;

	memset(src, 0, sizeof *src);
	if (len < 0) {
		if (fstat(fd, &st) < 0)
			return cairn_err_errno(err, CAIRN_EIO, errno, "fstat");
		len = (int64_t)st.st_size - off;
		if (len < 0)
			return cairn_err_set(err, CAIRN_EINVAL,
			    "offset %lld past the end of the file", (long long)off);
	}
	src->read = src_fd_read;
	src->rewind = src_rewind_pos;
	src->arg = src;
	src->len = len;
	src->p_fd = fd;
	src->p_base = off;
	return 0;
}

ssize_t
store_src_read(struct store_src *src, void *buf, size_t n)
{
	return src->read(src->arg, buf, n);
}

int
store_src_rewind(struct store_src *src)
{
	if (src->rewind == NULL)
		return -1;
	return src->rewind(src->arg);
}

void
store_progress_report(const struct store_progress *prog, uint64_t done,
    int64_t total)
{
	if (prog != NULL && prog->fn != NULL)
		prog->fn(prog->arg, done, total);
}

/* ---- argument checks -------------------------------------------------- */

int
store_key_check(const char *key, struct cairn_err *err)
{
	const char *seg, *slash;
	size_t len, n;

	if (key == NULL || *key == '\0')
		return cairn_err_set(err, CAIRN_EINVAL, "empty object key");
	len = strlen(key);
	if (len > STORE_KEY_MAX)
		return cairn_err_set(err, CAIRN_EINVAL,
		    "object key of %zu bytes is longer than %d", len, STORE_KEY_MAX);
	if (key[0] == '/')
		return cairn_err_set(err, CAIRN_EINVAL,
		    "object key \"%.200s\" is absolute (starts with '/')", key);
	for (seg = key;; seg = slash + 1) {
		slash = strchr(seg, '/');
		n = slash ? (size_t)(slash - seg) : strlen(seg);
		if (n == 0)
			return cairn_err_set(err, CAIRN_EINVAL,
			    "object key \"%.200s\" has an empty segment", key);
		if ((n == 1 && seg[0] == '.') ||
		    (n == 2 && seg[0] == '.' && seg[1] == '.'))
			return cairn_err_set(err, CAIRN_EINVAL,
			    "object key \"%.200s\" has a \"%.*s\" segment", key,
			    (int)n, seg);
		if (slash == NULL)
			break;
	}
	return 0;
}

/* A prefix is "" or a key, optionally ending in '/'. */
static int
prefix_check(const char *prefix, struct cairn_err *err)
{
	char tmp[STORE_KEY_MAX + 2];
	size_t n;

	if (prefix == NULL || *prefix == '\0')
		return 0;
	n = strlen(prefix);
	if (n > STORE_KEY_MAX)
		return store_key_check(prefix, err);
	memcpy(tmp, prefix, n + 1);
	if (tmp[n - 1] == '/')
		tmp[n - 1] = '\0';
	if (store_key_check(tmp, err) < 0)
		return cairn_err_prefix(err, "prefix");
	return 0;
}

static int
upload_check(const char *key, const char *id, struct cairn_err *err)
{
	if (store_key_check(key, err) < 0)
		return err ? err->code : CAIRN_EINVAL;
	if (id == NULL || *id == '\0' || strlen(id) >= STORE_UPLOAD_ID_MAX)
		return cairn_err_set(err, CAIRN_EINVAL,
		    "bad multipart upload id for key \"%.200s\"", key);
	return 0;
}

/* ---- the interface ---------------------------------------------------- */

void
store_free(struct store *s)
{
	char *desc;

	if (s == NULL)
		return;
	desc = s->desc;
	s->ops->free(s);
	free(desc);
}

static const atomic_int *process_stop;

void
store_set_process_stop(const atomic_int *stop)
{
	process_stop = stop;
}

int
store_retry_sleep(int64_t us, const char *what, struct cairn_err *err)
{
	time_sleep_us(us, process_stop);
	if (process_stop != NULL && atomic_load(process_stop))
		return cairn_err_set(err, CAIRN_ECANCELED, "%s: stopped while "
		    "waiting to try again (the process is stopping)", what);
	return 0;
}

const char *
store_describe(const struct store *s)
{
	return s->desc;
}

const char *
store_kind(const struct store *s)
{
	return s->ops->kind;
}

size_t
store_part_min(const struct store *s)
{
	return strcmp(s->ops->kind, "fs") == 0 ? 0 : STORE_PART_MIN;
}

int
store_check(struct store *s, struct cairn_err *err)
{
	return s->ops->check(s, err);
}

int
store_put(struct store *s, const char *key, struct store_src *src,
    char etag_out[STORE_ETAG_MAX], const struct store_progress *prog,
    struct cairn_err *err)
{
	char etag[STORE_ETAG_MAX] = "";
	int rc;

	rc = store_key_check(key, err);
	if (rc < 0)
		return rc;
	rc = s->ops->put(s, key, src, etag, prog, err);
	if (rc == 0 && etag_out != NULL)
		memcpy(etag_out, etag, STORE_ETAG_MAX);
	return rc;
}

int
store_put_mem(struct store *s, const char *key, const void *data, size_t len,
    struct cairn_err *err)
{
	struct store_src src;

	store_src_mem(&src, data, len);
	return store_put(s, key, &src, NULL, NULL, err);
}

int
store_put_gzip(struct store *s, const char *key, const void *data,
    size_t len, int level, struct cairn_err *err)
{
	z_stream z;
	size_t cap = compressBound((uLong)len) + 64;	/* + gzip wrapper */
	unsigned char *gz = xmalloc(cap);
	int rc;

	memset(&z, 0, sizeof z);
	if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8,
	    Z_DEFAULT_STRATEGY) != Z_OK) {
		free(gz);
		return cairn_err_set(err, CAIRN_EFAIL, "gzip of %s: zlib init "
		    "failed", key);
	}
	z.next_in = (Bytef *)(uintptr_t)data;
	z.avail_in = (uInt)len;
	z.next_out = gz;
	z.avail_out = (uInt)cap;
	rc = deflate(&z, Z_FINISH);
	deflateEnd(&z);
	if (rc != Z_STREAM_END)
		rc = cairn_err_set(err, CAIRN_EFAIL, "gzip of %s failed", key);
	else
		rc = store_put_mem(s, key, gz, cap - z.avail_out, err);
	free(gz);
	return rc;
}

int
store_get(struct store *s, const char *key, uint64_t off, int64_t len,
    store_write_fn sink, void *arg, const struct store_progress *prog,
    struct cairn_err *err)
{
	int rc;

	rc = store_key_check(key, err);
	if (rc < 0)
		return rc;
	if (sink == NULL)
		return cairn_err_set(err, CAIRN_EINVAL, "store_get: no sink");
	return s->ops->get(s, key, off, len, sink, arg, prog, err);
}

static int
get_mem_sink(void *arg, const void *p, size_t n)
{
	return buf_append(arg, p, n) < 0 ? -1 : 0;
}

int
store_get_mem(struct store *s, const char *key, size_t cap, char **data,
    size_t *len, struct cairn_err *err)
{
	struct buf b;
	int rc;

	buf_init(&b, cap);
	rc = store_get(s, key, 0, -1, get_mem_sink, &b, NULL, err);
	if (rc == CAIRN_ECANCELED) {
		rc = cairn_err_set(err, CAIRN_ETOOBIG,
		    "%s: object \"%.200s\" is larger than %zu bytes",
		    store_describe(s), key, cap);
	}
	if (rc < 0) {
		buf_free(&b);
		return rc;
	}
	if (b.data == NULL)
		buf_append(&b, "", 0);
	*data = buf_take(&b, len);
	if (*data == NULL)
		*data = xstrdup("");
	return 0;
}

/* Streaming gunzip of a get into another sink. */
struct gunzip {
	z_stream z;
	store_write_fn sink;
	void *arg;
	int rc;				/* 0, CAIRN_EPROTO or CAIRN_ECANCELED */
	int ended;			/* the last member ended */
};

static int
gunzip_sink(void *arg, const void *p, size_t n)
{
	struct gunzip *g = arg;
	unsigned char tmp[16384];
	int zr;

	g->z.next_in = (Bytef *)(uintptr_t)p;
	g->z.avail_in = (uInt)n;
	while (g->z.avail_in > 0) {
		if (g->ended) {		/* another gzip member follows */
			inflateReset(&g->z);
			g->ended = 0;
		}
		g->z.next_out = tmp;
		g->z.avail_out = sizeof tmp;
		zr = inflate(&g->z, Z_NO_FLUSH);
		if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
			g->rc = CAIRN_EPROTO;
			return -1;
		}
		if (sizeof tmp > g->z.avail_out && g->sink(g->arg, tmp,
		    sizeof tmp - g->z.avail_out) < 0) {
			g->rc = CAIRN_ECANCELED;
			return -1;
		}
		if (zr == Z_STREAM_END)
			g->ended = 1;
		else if (zr == Z_BUF_ERROR && g->z.avail_out != 0)
			break;
	}
	return 0;
}

int
store_get_gunzip_to(struct store *s, const char *key, store_write_fn sink,
    void *arg, struct cairn_err *err)
{
	struct gunzip g;
	int rc;

	memset(&g, 0, sizeof g);
	g.sink = sink;
	g.arg = arg;
	if (inflateInit2(&g.z, 15 + 16) != Z_OK)
		return cairn_err_set(err, CAIRN_EFAIL, "zlib init failed");
	rc = store_get(s, key, 0, -1, gunzip_sink, &g, NULL, err);
	if (rc == 0 && !g.ended)
		g.rc = CAIRN_EPROTO;
	inflateEnd(&g.z);
	if (g.rc == CAIRN_ECANCELED)
		rc = cairn_err_set(err, CAIRN_ECANCELED, "%s: reading \"%.200s\": "
		    "its reader stopped", store_describe(s), key);
	else if (g.rc < 0)
		rc = cairn_err_set(err, CAIRN_EPROTO, "%s: \"%.200s\" is not "
		    "whole gzip data", store_describe(s), key);
	return rc;
}

int
store_get_gunzip(struct store *s, const char *key, size_t cap, char **data,
    size_t *len, struct cairn_err *err)
{
	struct buf b;
	int rc;

	*data = NULL;
	buf_init(&b, cap);
	rc = store_get_gunzip_to(s, key, get_mem_sink, &b, err);
	if (rc == CAIRN_ECANCELED)	/* only the buffer refuses: its cap */
		rc = cairn_err_set(err, CAIRN_ETOOBIG, "%s: \"%.200s\" is larger "
		    "than %zu bytes gunzipped", store_describe(s), key, cap);
	if (rc < 0) {
		buf_free(&b);
		return rc;
	}
	if (b.data == NULL)
		buf_append(&b, "", 0);
	*data = buf_take(&b, len);
	return 0;
}

int
store_head(struct store *s, const char *key, struct store_stat *st,
    struct cairn_err *err)
{
	int rc;

	rc = store_key_check(key, err);
	if (rc < 0)
		return rc;
	memset(st, 0, sizeof *st);
	return s->ops->head(s, key, st, err);
}

int
store_list(struct store *s, const char *prefix, const char *delimiter,
    store_list_fn fn, void *arg, struct cairn_err *err)
{
	int rc;

	rc = prefix_check(prefix, err);
	if (rc < 0)
		return rc;
	if (delimiter != NULL && *delimiter == '\0')
		delimiter = NULL;
	if (delimiter != NULL && strcmp(delimiter, "/") != 0)
		return cairn_err_set(err, CAIRN_EINVAL,
		    "only \"/\" is supported as a list delimiter");
	return s->ops->list(s, prefix ? prefix : "", delimiter, fn, arg, err);
}

int
store_delete(struct store *s, const char *key, struct cairn_err *err)
{
	int rc;

	rc = store_key_check(key, err);
	if (rc < 0)
		return rc;
	return s->ops->del(s, key, err);
}

struct collect {
	char **keys;
	size_t n, alloc;
};

static int
collect_key(void *arg, const struct store_entry *e)
{
	struct collect *c = arg;

	if (e->is_prefix)
		return 0;
	if (c->n == c->alloc) {
		c->alloc = c->alloc ? 2 * c->alloc : 64;
		c->keys = xreallocarray(c->keys, c->alloc, sizeof *c->keys);
	}
	c->keys[c->n++] = xstrdup(e->key);
	return 0;
}

int
store_delete_prefix(struct store *s, const char *prefix, size_t *n,
    struct cairn_err *err)
{
	struct collect c = { NULL, 0, 0 };
	size_t i;
	int rc;

	if (n != NULL)
		*n = 0;
	if (prefix == NULL || *prefix == '\0')
		return cairn_err_set(err, CAIRN_EINVAL,
		    "refusing to delete every key of %s (empty prefix)",
		    store_describe(s));
	/* Collect first: deleting while a listing pages is not stable. */
	rc = store_list(s, prefix, NULL, collect_key, &c, err);
	if (rc == 0 && s->ops->del_many != NULL && c.n > 0) {
		rc = s->ops->del_many(s, c.keys, c.n, n, err);
	} else {
		for (i = 0; rc == 0 && i < c.n; i++) {
			rc = s->ops->del(s, c.keys[i], err);
			if (rc == 0 && n != NULL)
				(*n)++;
		}
	}
	for (i = 0; i < c.n; i++)
		free(c.keys[i]);
	free(c.keys);
	return rc;
}

int
store_mpu_create(struct store *s, const char *key, char **upload_id,
    struct cairn_err *err)
{
	int rc;

	*upload_id = NULL;
	rc = store_key_check(key, err);
	if (rc < 0)
		return rc;
	return s->ops->mpu_create(s, key, upload_id, err);
}

int
store_mpu_put_part(struct store *s, const char *key, const char *upload_id,
    int number, struct store_src *src, char etag_out[STORE_ETAG_MAX],
    const struct store_progress *prog, struct cairn_err *err)
{
	char etag[STORE_ETAG_MAX] = "";
	int rc;

	rc = upload_check(key, upload_id, err);
	if (rc < 0)
		return rc;
	if (number < 1 || number > STORE_PART_MAX_NUMBER)
		return cairn_err_set(err, CAIRN_EINVAL,
		    "part number %d of \"%.200s\" is outside 1..%d", number,
		    key, STORE_PART_MAX_NUMBER);
	rc = s->ops->mpu_put_part(s, key, upload_id, number, src, etag, prog,
	    err);
	if (rc == 0 && etag_out != NULL)
		memcpy(etag_out, etag, STORE_ETAG_MAX);
	return rc;
}

int
store_mpu_list_parts(struct store *s, const char *key, const char *upload_id,
    store_part_fn fn, void *arg, struct cairn_err *err)
{
	int rc;

	rc = upload_check(key, upload_id, err);
	if (rc < 0)
		return rc;
	return s->ops->mpu_list_parts(s, key, upload_id, fn, arg, err);
}

static int completed_already(struct store *s, const char *key,
    const struct store_part *parts, size_t n, char *etag);

int
store_mpu_complete(struct store *s, const char *key, const char *upload_id,
    const struct store_part *parts, size_t nparts,
    char etag_out[STORE_ETAG_MAX], struct cairn_err *err)
{
	char etag[STORE_ETAG_MAX] = "";
	size_t i;
	int rc;

	rc = upload_check(key, upload_id, err);
	if (rc < 0)
		return rc;
	if (nparts == 0)
		return cairn_err_set(err, CAIRN_EINVAL,
		    "completing \"%.200s\" with no parts", key);
	for (i = 0; i < nparts; i++) {
		if (parts[i].number < 1 || parts[i].number > STORE_PART_MAX_NUMBER ||
		    (i > 0 && parts[i].number <= parts[i - 1].number))
			return cairn_err_set(err, CAIRN_EINVAL,
			    "completing \"%.200s\": part numbers must ascend "
			    "within 1..%d", key, STORE_PART_MAX_NUMBER);
	}
	rc = s->ops->mpu_complete(s, key, upload_id, parts, nparts, etag, err);
	if (rc == CAIRN_ENOTFOUND && completed_already(s, key, parts, nparts,
	    etag)) {
		cairn_err_clear(err);
		log_info("%s: the upload of \"%.200s\" is gone and the object "
		    "is the join of its %zu parts: an earlier complete went "
		    "through", s->desc, key, nparts);
		rc = 0;
	}
	if (rc == 0 && etag_out != NULL)
		memcpy(etag_out, etag, STORE_ETAG_MAX);
	return rc;
}

int
store_mpu_abort(struct store *s, const char *key, const char *upload_id,
    struct cairn_err *err)
{
	int rc;

	rc = upload_check(key, upload_id, err);
	if (rc < 0)
		return rc;
	return s->ops->mpu_abort(s, key, upload_id, err);
}

/* ---- recognising a completed upload ---------------------------------- */

/* 1 if s is 32 hex digits (an MD5), else 0. */
static int
is_md5_hex(const char *s)
{
	size_t i;

	for (i = 0; i < 32; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		    (s[i] >= 'a' && s[i] <= 'f') || (s[i] >= 'A' && s[i] <= 'F')))
			return 0;
	return s[32] == '\0';
}

static int
hex_byte(const char *p)
{
	int v = 0;

	for (int i = 0; i < 2; i++) {
		char c = p[i];

		v = v * 16 + (c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
	}
	return v;
}

int
store_mpu_etag(const struct store_part *parts, size_t n,
    char out[STORE_ETAG_MAX])
{
	unsigned char bin[16], md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	EVP_MD_CTX *ctx;

	for (size_t i = 0; i < n; i++)
		if (!is_md5_hex(parts[i].etag))
			return -1;
	ctx = EVP_MD_CTX_new();
	if (ctx == NULL || !EVP_DigestInit_ex(ctx, EVP_md5(), NULL)) {
		EVP_MD_CTX_free(ctx);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		for (int k = 0; k < 16; k++)
			bin[k] = (unsigned char)hex_byte(parts[i].etag + 2 * k);
		EVP_DigestUpdate(ctx, bin, sizeof bin);
	}
	EVP_DigestFinal_ex(ctx, md, &len);
	EVP_MD_CTX_free(ctx);
	store_hex(md, len, out);
	snprintf(out + strlen(out), STORE_ETAG_MAX - strlen(out), "-%zu", n);
	return 0;
}

/* Reading the object back, one MD5 per part-sized slice. */
struct join_check {
	const struct store_part *parts;
	size_t n, i;			/* part being hashed */
	uint64_t left;			/* its bytes still to come */
	EVP_MD_CTX *ctx;
	int mismatch;
};

static int
join_slice_end(struct join_check *jc)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	char hex[2 * EVP_MAX_MD_SIZE + 1];

	EVP_DigestFinal_ex(jc->ctx, md, &len);
	store_hex(md, len, hex);
	if (strcasecmp(hex, jc->parts[jc->i].etag) != 0)
		jc->mismatch = 1;
	jc->i++;
	if (jc->i < jc->n) {
		jc->left = jc->parts[jc->i].size;
		EVP_DigestInit_ex(jc->ctx, EVP_md5(), NULL);
	}
	return jc->mismatch ? -1 : 0;
}

static int
join_sink(void *arg, const void *p, size_t n)
{
	struct join_check *jc = arg;
	const unsigned char *c = p;

	while (n > 0) {
		size_t k;

		if (jc->i >= jc->n)
			return jc->mismatch = 1, -1;
		k = n < jc->left ? n : (size_t)jc->left;
		EVP_DigestUpdate(jc->ctx, c, k);
		c += k;
		n -= k;
		jc->left -= k;
		if (jc->left == 0 && join_slice_end(jc) < 0)
			return -1;
	}
	return 0;
}

int
store_mpu_joined(struct store *s, const char *key,
    const struct store_part *parts, size_t nparts, struct cairn_err *err)
{
	struct store_stat st;
	struct join_check jc;
	uint64_t total = 0;
	char want[STORE_ETAG_MAX];
	int rc;

	if (nparts == 0)
		return 0;
	if (s->ops->mpu_joined != NULL)
		return s->ops->mpu_joined(s, key, parts, nparts, err);
	for (size_t i = 0; i < nparts; i++) {
		if (!is_md5_hex(parts[i].etag))
			return 0;	/* not an MD5: nothing to compare with */
		total += parts[i].size;
	}
	rc = store_head(s, key, &st, err);
	if (rc == CAIRN_ENOTFOUND) {
		cairn_err_clear(err);
		return 0;
	}
	if (rc < 0)
		return rc;
	if (st.size != total)
		return 0;
	/* S3 (and fs): "<MD5 of the parts' binary MD5s>-<parts>". */
	if (strchr(st.etag, '-') != NULL)
		return store_mpu_etag(parts, nparts, want) == 0 &&
		    strcasecmp(want, st.etag) == 0;
	/* One part: its MD5 is the object's. */
	if (nparts == 1 && st.etag[0] != '\0')
		return strcasecmp(parts[0].etag, st.etag) == 0;
	/* Else (fs: the MD5 of the whole): read back, one MD5 per part. */
	memset(&jc, 0, sizeof jc);
	jc.parts = parts;
	jc.n = nparts;
	jc.left = parts[0].size;
	jc.ctx = EVP_MD_CTX_new();
	if (jc.ctx == NULL)
		return cairn_err_set(err, CAIRN_EFAIL, "EVP_MD_CTX_new");
	EVP_DigestInit_ex(jc.ctx, EVP_md5(), NULL);
	/* Empty parts at the start end at once. */
	while (jc.i < jc.n && jc.left == 0 && join_slice_end(&jc) == 0)
		;
	rc = store_get(s, key, 0, -1, join_sink, &jc, NULL, err);
	EVP_MD_CTX_free(jc.ctx);
	if (jc.mismatch) {
		cairn_err_clear(err);
		return 0;
	}
	if (rc < 0)
		return rc;
	return jc.i == jc.n;
}

/*
 * A complete failed with "not found": did an earlier complete of these
 * same parts go through (its reply lost to a broken connection, or its
 * caller gone before recording it)? Then the upload is gone and its object
 * is at key: store_mpu_joined() tells when the part ETags are MD5s; where
 * they are not (SSE-KMS, SSE-C), the total size of the parts, all known,
 * has to do. 1: yes (etag filled), 0: no.
 */
static int
completed_already(struct store *s, const char *key,
    const struct store_part *parts, size_t n, char *etag)
{
	struct store_stat st;
	uint64_t total = 0;
	int md5s = 1, sizes = 1;
	size_t i;

	for (i = 0; i < n; i++) {
		md5s = md5s && is_md5_hex(parts[i].etag);
		sizes = sizes && parts[i].size > 0;
		total += parts[i].size;
	}
	if (md5s ? store_mpu_joined(s, key, parts, n, NULL) != 1 : !sizes)
		return 0;
	if (store_head(s, key, &st, NULL) < 0 || (!md5s && st.size != total))
		return 0;
	snprintf(etag, STORE_ETAG_MAX, "%s", st.etag);
	return 1;
}
