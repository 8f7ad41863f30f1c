/*
 * store_crypt.c: a store that encrypts what it writes and decrypts what it
 * reads, over any other store (see store_open_crypt() in store.h).
 *
 * Design. Encryption is a layer of storage/, not of the engine: a
 * BackupStorageLocation with spec.encryption is opened as this decorator
 * around its fs or S3 store, and every object cairn writes through it
 * (tarball parts, metadata files, logs, volume data) is encrypted on the
 * way, without the engine knowing. The format is crypt.h's: each put and
 * each multipart part is one segment, so parts stay independent (resume,
 * retry, takeover) and the completed object, the concatenation of the
 * parts, decrypts as one stream. Memory per call is one chunk.
 *
 * Sizes. A segment's stored size is a function of its plaintext size
 * (crypt_stored_size()), so a part of known length stays of known length
 * (S3 needs it), and part sizes convert both ways: mpu_list_parts reports
 * plaintext sizes and mpu_complete passes stored sizes down (its "already
 * completed" check compares sizes). head and list report stored sizes:
 * the plaintext size of a many-part object is not known without reading
 * it.
 *
 * Reads decrypt the whole stream; a ranged get reads from the start and
 * drops the bytes before the range (nothing in cairn reads ranges of
 * encrypted objects today). A chunk that does not authenticate fails the
 * get with CAIRN_EPROTO naming the part, before any of its bytes reach
 * the caller. An object without the encryption header is refused
 * (CAIRN_EPROTO) unless allow_plain: a location that turned encryption on
 * may then still read what it wrote before.
 *
 * Threads: like any store. Per-call state lives on the caller's stack;
 * the keyring is read-only.
 */
#include "config.h"
#include "storage/store_int.h"

#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "storage/crypt.h"

struct store_crypt {
	struct store base;
	struct store *inner;		/* owned */
	struct crypt_keyring *kr;	/* owned */
	int allow_plain;
};

static const struct store_ops crypt_ops;

/* ---- writing ---------------------------------------------------------- */

/* An encrypting source over the caller's plaintext source. */
struct enc_src {
	struct store_src src;		/* what the inner store reads */
	struct store_src *plain;	/* the caller's */
	struct crypt_enc *e;
};

static ssize_t
enc_plain_read(void *arg, void *buf, size_t n)
{
	struct enc_src *es = arg;

	return store_src_read(es->plain, buf, n);
}

static ssize_t
enc_src_read(void *arg, void *buf, size_t n)
{
	struct enc_src *es = arg;
	ssize_t r = crypt_enc_read(es->e, buf, n);

	return r < 0 ? -1 : r;
}

static int
enc_src_rewind(void *arg)
{
	struct enc_src *es = arg;

	if (store_src_rewind(es->plain) < 0)
		return -1;
	crypt_enc_restart(es->e);
	return 0;
}

static int
enc_src_open(struct store_crypt *sc, uint32_t part, struct store_src *plain,
    struct enc_src *es, struct cairn_err *err)
{
	int rc;

	memset(es, 0, sizeof *es);
	es->plain = plain;
	rc = crypt_enc_new(sc->kr, part, enc_plain_read, es, &es->e, err);
	if (rc < 0)
		return rc;
	es->src.read = enc_src_read;
	es->src.rewind = plain->rewind != NULL ? enc_src_rewind : NULL;
	es->src.arg = es;
	es->src.len = plain->len < 0 ? -1 :
	    (int64_t)crypt_stored_size((uint64_t)plain->len);
	es->src.p_fd = -1;
	return 0;
}

/* The error of a write through es: the encryptor's if it failed. */
static int
enc_src_close(struct enc_src *es, int rc, const char *key,
    struct cairn_err *err)
{
	const struct cairn_err *ee = es->e ? crypt_enc_error(es->e) : NULL;

	if (rc < 0 && ee != NULL && ee->code < 0 && ee->code != CAIRN_ECANCELED)
		rc = cairn_err_set(err, ee->code, "encrypting \"%.300s\": %s",
		    key, ee->msg);
	crypt_enc_free(es->e);
	es->e = NULL;
	return rc;
}

static int
crypt_put(struct store *s, const char *key, struct store_src *src, char *etag,
    const struct store_progress *prog, struct cairn_err *err)
{
	struct store_crypt *sc = (struct store_crypt *)s;
	struct enc_src es;
	int rc;

	rc = enc_src_open(sc, 0, src, &es, err);
	if (rc < 0)
		return rc;
	rc = store_put(sc->inner, key, &es.src, etag, prog, err);
	return enc_src_close(&es, rc, key, err);
}

static int
crypt_mpu_put_part(struct store *s, const char *key, const char *id,
    int number, struct store_src *src, char *etag,
    const struct store_progress *prog, struct cairn_err *err)
{
	struct store_crypt *sc = (struct store_crypt *)s;
	struct enc_src es;
	int rc;

	rc = enc_src_open(sc, (uint32_t)number, src, &es, err);
	if (rc < 0)
		return rc;
	rc = store_mpu_put_part(sc->inner, key, id, number, &es.src, etag, prog,
	    err);
	return enc_src_close(&es, rc, key, err);
}

struct parts_map {
	store_part_fn fn;
	void *arg;
};

static int
parts_plain(void *arg, const struct store_part *p)
{
	struct parts_map *pm = arg;
	struct store_part q = *p;
	int64_t plain = crypt_plain_size(p->size);

	q.size = plain >= 0 ? (uint64_t)plain : 0;
	return pm->fn(pm->arg, &q);
}

static int
crypt_mpu_list_parts(struct store *s, const char *key, const char *id,
    store_part_fn fn, void *arg, struct cairn_err *err)
{
	struct store_crypt *sc = (struct store_crypt *)s;
	struct parts_map pm = { fn, arg };

	return store_mpu_list_parts(sc->inner, key, id, parts_plain, &pm, err);
}

/* The parts as the inner store has them: stored sizes. Owned. */
static struct store_part *
parts_stored(const struct store_part *parts, size_t n)
{
	struct store_part *sp = xcalloc(n ? n : 1, sizeof *sp);
	size_t i;

	for (i = 0; i < n; i++) {
		sp[i] = parts[i];
		sp[i].size = parts[i].size > 0 ?
		    crypt_stored_size(parts[i].size) : 0;
	}
	return sp;
}

static int
crypt_mpu_complete(struct store *s, const char *key, const char *id,
    const struct store_part *parts, size_t n, char *etag,
    struct cairn_err *err)
{
	struct store_crypt *sc = (struct store_crypt *)s;
	struct store_part *sp = parts_stored(parts, n);
	int rc;

	rc = store_mpu_complete(sc->inner, key, id, sp, n, etag, err);
	free(sp);
	return rc;
}

/* ETags are of the stored parts: ask the inner store, in stored sizes. */
static int
crypt_mpu_joined(struct store *s, const char *key,
    const struct store_part *parts, size_t n, struct cairn_err *err)
{
	struct store_crypt *sc = (struct store_crypt *)s;
	struct store_part *sp = parts_stored(parts, n);
	int rc;

	rc = store_mpu_joined(sc->inner, key, sp, n, err);
	free(sp);
	return rc;
}

/* ---- reading ---------------------------------------------------------- */

struct dec_sink {
	store_write_fn sink;
	void *arg;
	uint64_t skip;			/* plaintext bytes before the range */
	int64_t left;			/* bytes of the range to deliver, -1: all */
	int done;			/* the range is delivered */
	struct crypt_dec *d;
	struct cairn_err err;		/* the decryptor's failure */
	int failed;
};

static int
dec_plain(void *arg, const void *buf, size_t n)
{
	struct dec_sink *ds = arg;
	const char *p = buf;

	if (ds->skip > 0) {
		size_t k = ds->skip < n ? (size_t)ds->skip : n;

		ds->skip -= k;
		p += k;
		n -= k;
	}
	if (ds->left >= 0 && (int64_t)n > ds->left)
		n = (size_t)ds->left;
	if (n > 0 && ds->sink(ds->arg, p, n) < 0)
		return -1;
	if (ds->left >= 0) {
		ds->left -= (int64_t)n;
		if (ds->left == 0)
			ds->done = 1;
	}
	return 0;
}

static int
dec_stored(void *arg, const void *buf, size_t n)
{
	struct dec_sink *ds = arg;

	if (ds->done)
		return -1;	/* the range is complete: stop downloading */
	if (crypt_dec_push(ds->d, buf, n, &ds->err) < 0) {
		ds->failed = 1;
		return -1;
	}
	return ds->done ? -1 : 0;
}

static int
crypt_get(struct store *s, const char *key, uint64_t off, int64_t len,
    store_write_fn sink, void *arg, const struct store_progress *prog,
    struct cairn_err *err)
{
	struct store_crypt *sc = (struct store_crypt *)s;
	struct dec_sink ds;
	char *name;
	int rc;

	memset(&ds, 0, sizeof ds);
	ds.sink = sink;
	ds.arg = arg;
	ds.skip = off;
	ds.left = len;
	if (len == 0)
		return store_head(sc->inner, key, &(struct store_stat){ 0 }, err);
	name = xasprintf("%s/%s", store_describe(sc->inner), key);
	ds.d = crypt_dec_new(sc->kr, name, sc->allow_plain, dec_plain, &ds);
	free(name);
	rc = store_get(sc->inner, key, 0, -1, dec_stored, &ds, prog, err);
	if (ds.failed) {
		rc = cairn_err_copy(err, &ds.err);
	} else if (rc == CAIRN_ECANCELED && ds.done) {
		rc = 0;		/* we stopped it: the range was delivered */
		cairn_err_clear(err);
	} else if (rc == 0) {
		rc = crypt_dec_finish(ds.d, err);
		if (rc == 0 && (ds.skip > 0 || ds.left > 0))
			rc = cairn_err_set(err, CAIRN_EINVAL, "%s: range %llu+%lld "
			    "of \"%.300s\" is outside the object", s->desc,
			    (unsigned long long)off, (long long)len, key);
	}
	crypt_dec_free(ds.d);
	return rc;
}

/* ---- the rest passes through ------------------------------------------ */

static void
crypt_free(struct store *s)
{
	struct store_crypt *sc = (struct store_crypt *)s;

	store_free(sc->inner);
	crypt_keyring_free(sc->kr);
	free(sc);
}

static int
crypt_check(struct store *s, struct cairn_err *err)
{
	return store_check(((struct store_crypt *)s)->inner, err);
}

static int
crypt_head(struct store *s, const char *key, struct store_stat *st,
    struct cairn_err *err)
{
	return store_head(((struct store_crypt *)s)->inner, key, st, err);
}

static int
crypt_list(struct store *s, const char *prefix, const char *delim,
    store_list_fn fn, void *arg, struct cairn_err *err)
{
	return store_list(((struct store_crypt *)s)->inner, prefix, delim, fn,
	    arg, err);
}

static int
crypt_del(struct store *s, const char *key, struct cairn_err *err)
{
	return store_delete(((struct store_crypt *)s)->inner, key, err);
}

static int
crypt_del_many(struct store *s, char *const *keys, size_t n, size_t *deleted,
    struct cairn_err *err)
{
	struct store *in = ((struct store_crypt *)s)->inner;
	size_t i;
	int rc = 0;

	if (in->ops->del_many != NULL)
		return in->ops->del_many(in, keys, n, deleted, err);
	for (i = 0; rc == 0 && i < n; i++) {
		rc = store_delete(in, keys[i], err);
		if (rc == 0 && deleted != NULL)
			(*deleted)++;
	}
	return rc;
}

static int
crypt_mpu_create(struct store *s, const char *key, char **id,
    struct cairn_err *err)
{
	return store_mpu_create(((struct store_crypt *)s)->inner, key, id, err);
}

static int
crypt_mpu_abort(struct store *s, const char *key, const char *id,
    struct cairn_err *err)
{
	return store_mpu_abort(((struct store_crypt *)s)->inner, key, id, err);
}

static const struct store_ops crypt_ops = {
	"encrypted", crypt_free, crypt_check, crypt_put, crypt_get, crypt_head,
	crypt_list, crypt_del, crypt_del_many, crypt_mpu_create,
	crypt_mpu_put_part, crypt_mpu_list_parts, crypt_mpu_complete,
	crypt_mpu_abort, crypt_mpu_joined,
};

int
store_open_crypt(struct store *inner, struct crypt_keyring *kr,
    int allow_plain, struct store **out, struct cairn_err *err)
{
	struct store_crypt *sc;

	(void)err;
	*out = NULL;
	sc = xcalloc(1, sizeof *sc);
	sc->base.ops = &crypt_ops;
	if (crypt_keyring_current(kr) != NULL)
		sc->base.desc = xasprintf("%s, encrypted with key %s",
		    store_describe(inner), crypt_keyring_current(kr));
	else
		sc->base.desc = xasprintf("%s, encrypted (no key to write with)",
		    store_describe(inner));
	sc->inner = inner;
	sc->kr = kr;
	sc->allow_plain = allow_plain;
	*out = &sc->base;
	return 0;
}

const char *
store_encryption_key_id(const struct store *s)
{
	if (s->ops != &crypt_ops)
		return NULL;
	return crypt_keyring_current(((const struct store_crypt *)s)->kr);
}

int
store_content_key(const struct store *s, const char *key_id,
    unsigned char out[32], struct cairn_err *err)
{
	int rc;

	if (s->ops != &crypt_ops)
		return 0;
	rc = crypt_keyring_derive(((const struct store_crypt *)s)->kr, key_id,
	    "cairn content names v1", out, err);
	return rc < 0 ? rc : 1;
}
