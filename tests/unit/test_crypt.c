/*
 * test_crypt.c: the encryption format (storage/crypt.c) and the encrypting
 * store (storage/store_crypt.c) over the fs backend: round trips of every
 * size around the chunk size, many-segment streams, every single-byte
 * change and every truncation detected and named, reordered chunks, wrong
 * and rotated keys, plaintext objects refused or (allowed) passed through,
 * the size functions, key parsing, and multipart through the store with
 * plaintext part sizes. The format against an independent reader
 * (scripts/cairn-decrypt.py) is tested in
 * tests/integration/test_encryption.py.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "base/buf.h"
#include "base/mem.h"
#include "storage/crypt.h"
#include "storage/store.h"
#include "tests/unit/unit.h"

#define C CRYPT_CHUNK

static unsigned char key1[CRYPT_KEY_LEN], key2[CRYPT_KEY_LEN];

static struct crypt_keyring *
ring(const char *current)
{
	struct crypt_keyring *kr = crypt_keyring_new();

	if (crypt_keyring_add(kr, "k1", key1, NULL) < 0 ||
	    crypt_keyring_add(kr, "k2", key2, NULL) < 0)
		abort();
	if (current != NULL && crypt_keyring_set_current(kr, current, NULL) < 0)
		abort();
	return kr;
}

static void
fill_pattern(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (unsigned char)(seed >> 16);
	}
}

/* A plaintext source over memory for the encryptor. */
struct mem_rd {
	const unsigned char *p;
	size_t n, pos, step;		/* step: most bytes per read (odd sizes) */
};

static ssize_t
mem_read(void *arg, void *buf, size_t n)
{
	struct mem_rd *m = arg;
	size_t k = m->n - m->pos;

	if (k > n)
		k = n;
	if (m->step > 0 && k > m->step)
		k = m->step;
	memcpy(buf, m->p + m->pos, k);
	m->pos += k;
	return (ssize_t)k;
}

/* Encrypt n bytes as one segment (part number part) into out. */
static void
seal(const struct crypt_keyring *kr, uint32_t part, const unsigned char *p,
    size_t n, struct buf *out)
{
	struct mem_rd m = { p, n, 0, 7777 };
	struct crypt_enc *e = NULL;
	unsigned char tmp[5000];
	ssize_t r;

	if (crypt_enc_new(kr, part, mem_read, &m, &e, NULL) < 0)
		abort();
	while ((r = crypt_enc_read(e, tmp, sizeof tmp)) > 0)
		buf_append(out, tmp, (size_t)r);
	if (r < 0)
		abort();
	crypt_enc_free(e);
}

static int
to_buf(void *arg, const void *p, size_t n)
{
	return buf_append(arg, p, n) < 0 ? -1 : 0;
}

/* Decrypt p[0..n) fed in pieces of `step`; returns rc, plaintext in out. */
static int
open_all(const struct crypt_keyring *kr, int allow_plain, const void *p,
    size_t n, size_t step, struct buf *out, struct cairn_err *err)
{
	struct crypt_dec *d = crypt_dec_new(kr, "test", allow_plain, to_buf, out);
	const unsigned char *c = p;
	size_t off = 0;
	int rc = 0;

	while (rc == 0 && off < n) {
		size_t k = n - off < step ? n - off : step;

		rc = crypt_dec_push(d, c + off, k, err);
		off += k;
	}
	if (rc == 0)
		rc = crypt_dec_finish(d, err);
	crypt_dec_free(d);
	return rc;
}

static void
test_sizes_round_trip(void)
{
	static const size_t sizes[] = { 0, 1, 100, C - 1, C, C + 1, 2 * C,
	    3 * C + 17 };
	struct crypt_keyring *kr = ring("k1");
	unsigned char *p = xmalloc(4 * C);

	fill_pattern(p, 4 * C, 1);
	for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
		struct buf ct, pt;
		struct cairn_err err = CAIRN_ERR_INIT;

		buf_init(&ct, 1u << 20);
		buf_init(&pt, 1u << 20);
		seal(kr, 0, p, sizes[i], &ct);
		CHECK_INT(ct.len, crypt_stored_size(sizes[i]));
		CHECK_INT(crypt_plain_size(ct.len), sizes[i]);
		CHECK(crypt_is_encrypted(ct.data, ct.len));
		CHECK_INT(open_all(kr, 0, ct.data, ct.len, 1000, &pt, &err), 0);
		CHECK_INT(pt.len, sizes[i]);
		CHECK(sizes[i] == 0 || memcmp(pt.data, p, sizes[i]) == 0);
		/* the plaintext does not show through */
		CHECK(sizes[i] < 64 || memmem(ct.data, ct.len, p + 10, 32) == NULL);
		buf_free(&ct);
		buf_free(&pt);
	}
	for (uint64_t s = 0; s < 200; s++)
		CHECK(crypt_plain_size(s) < 0 || crypt_stored_size(
		    (uint64_t)crypt_plain_size(s)) == s);
	CHECK_INT(crypt_plain_size(crypt_stored_size(5u << 20)), 5u << 20);
	CHECK_INT(crypt_plain_size(crypt_stored_size(5u << 20) + 1), -1);
	crypt_keyring_free(kr);
	free(p);
}

/* Parts of one upload, concatenated, read as one stream; keys rotate. */
static void
test_segments_and_rotation(void)
{
	struct crypt_keyring *w1 = ring("k1"), *w2 = ring("k2"), *r1;
	unsigned char *p = xmalloc(3 * C);
	struct buf ct, pt;
	struct cairn_err err = CAIRN_ERR_INIT;

	fill_pattern(p, 3 * C, 2);
	buf_init(&ct, 1u << 20);
	buf_init(&pt, 1u << 20);
	seal(w1, 1, p, C + 5, &ct);
	seal(w2, 2, p + C + 5, C, &ct);		/* written after a rotation */
	seal(w1, 4, p + 2 * C + 5, C - 5, &ct);	/* gaps in numbers are fine */
	CHECK_INT(open_all(w1, 0, ct.data, ct.len, 4096, &pt, &err), 0);
	CHECK_INT(pt.len, 3 * C);
	CHECK(memcmp(pt.data, p, 3 * C) == 0);
	/* a ring without k2 names the key it lacks and the part */
	r1 = crypt_keyring_new();
	crypt_keyring_add(r1, "k1", key1, NULL);
	buf_reset(&pt);
	CHECK_INT(open_all(r1, 0, ct.data, ct.len, 4096, &pt, &err),
	    CAIRN_ENOTFOUND);
	CHECK(strstr(err.msg, "key \"k2\"") != NULL);
	CHECK(strstr(err.msg, "part 2") != NULL);
	CHECK_INT(pt.len, C + 5);	/* only authenticated bytes came out */
	crypt_keyring_free(r1);
	/* a key for any id (cairn decrypt --key-file) opens k1 segments */
	r1 = crypt_keyring_new();
	crypt_keyring_add(r1, NULL, key1, NULL);
	buf_reset(&pt);
	CHECK_INT(open_all(r1, 0, ct.data, C + 200, 4096, &pt, &err),
	    CAIRN_EPROTO);	/* cut inside part 2 */
	CHECK_INT(pt.len, C + 5);
	crypt_keyring_free(r1);
	buf_free(&ct);
	buf_free(&pt);
	crypt_keyring_free(w1);
	crypt_keyring_free(w2);
	free(p);
}

/* Every changed byte and every cut is caught; errors name where. */
static void
test_tamper_and_truncation(void)
{
	struct crypt_keyring *kr = ring("k1");
	unsigned char p[3000];
	struct buf ct, pt, two;
	struct cairn_err err = CAIRN_ERR_INIT;
	size_t i, caught = 0, cut = 0;

	fill_pattern(p, sizeof p, 3);
	buf_init(&ct, 1u << 20);
	buf_init(&pt, 1u << 20);
	seal(kr, 0, p, sizeof p, &ct);
	for (i = 0; i < ct.len; i++) {
		((unsigned char *)ct.data)[i] ^= 0x20;
		buf_reset(&pt);
		if (open_all(kr, 0, ct.data, ct.len, 512, &pt, &err) < 0 &&
		    pt.len == 0)
			caught++;
		((unsigned char *)ct.data)[i] ^= 0x20;
	}
	CHECK_INT(caught, ct.len);
	for (i = 0; i < ct.len; i++) {
		buf_reset(&pt);
		if (open_all(kr, 0, ct.data, i, 512, &pt, &err) < 0)
			cut++;
	}
	CHECK_INT(cut, ct.len);
	/* two parts: a change in the second names part 2 */
	buf_init(&two, 1u << 20);
	{
		unsigned char *big = xmalloc(2 * C + 10);

		fill_pattern(big, 2 * C + 10, 9);
		seal(kr, 1, big, C, &two);
		seal(kr, 2, big + C, C + 10, &two);
		free(big);
	}
	((unsigned char *)two.data)[two.len - 5] ^= 1;	/* in the last tag */
	buf_reset(&pt);
	CHECK_INT(open_all(kr, 0, two.data, two.len, 9999, &pt, &err),
	    CAIRN_EPROTO);
	CHECK(strstr(err.msg, "part 2") != NULL);
	CHECK(strstr(err.msg, "chunk 1") != NULL);
	CHECK(strstr(err.msg, "does not authenticate") != NULL);
	/* the whole second part dropped: the stream still ends whole, which
	   is why parts are also checked against the recorded list */
	buf_free(&two);
	buf_free(&ct);
	buf_free(&pt);
	crypt_keyring_free(kr);
}

/* Swapping two full chunks of a segment fails (counter nonce). */
static void
test_reorder(void)
{
	struct crypt_keyring *kr = ring("k1");
	unsigned char *p = xmalloc(3 * C);
	struct buf ct, pt;
	struct cairn_err err = CAIRN_ERR_INIT;
	size_t unit = C + CRYPT_CHUNK_OVERHEAD;
	unsigned char *a, *tmp = xmalloc(unit);

	fill_pattern(p, 3 * C, 4);
	buf_init(&ct, 1u << 20);
	buf_init(&pt, 1u << 20);
	seal(kr, 0, p, 3 * C, &ct);
	a = (unsigned char *)ct.data + CRYPT_HEADER_LEN;
	memcpy(tmp, a, unit);
	memcpy(a, a + unit, unit);
	memcpy(a + unit, tmp, unit);
	CHECK_INT(open_all(kr, 0, ct.data, ct.len, 70000, &pt, &err),
	    CAIRN_EPROTO);
	CHECK_INT(pt.len, 0);
	memcpy(a + unit, a, unit);
	memcpy(a, tmp, unit);
	/* dropping the final chunk of a segment is a cut, not an end */
	buf_reset(&pt);
	CHECK_INT(open_all(kr, 0, ct.data, CRYPT_HEADER_LEN + 2 * unit, 70000,
	    &pt, &err), CAIRN_EPROTO);
	CHECK(strstr(err.msg, "cut short") != NULL);
	free(tmp);
	free(p);
	buf_free(&ct);
	buf_free(&pt);
	crypt_keyring_free(kr);
}

static void
test_plain_objects(void)
{
	struct crypt_keyring *kr = ring("k1");
	struct buf pt;
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *text = "{\"apiVersion\":\"v1\"}", *tiny = "hi";

	buf_init(&pt, 1u << 20);
	CHECK_INT(open_all(kr, 0, text, strlen(text), 3, &pt, &err),
	    CAIRN_EPROTO);
	CHECK(strstr(err.msg, "not encrypted") != NULL);
	CHECK_INT(pt.len, 0);
	CHECK_INT(open_all(kr, 1, text, strlen(text), 3, &pt, &err), 0);
	CHECK_INT(pt.len, strlen(text));
	CHECK(memcmp(pt.data, text, pt.len) == 0);
	buf_reset(&pt);
	CHECK_INT(open_all(kr, 1, tiny, 2, 1, &pt, &err), 0);
	CHECK_INT(pt.len, 2);
	CHECK_INT(open_all(kr, 0, "", 0, 1, &pt, &err), CAIRN_EPROTO);
	buf_free(&pt);
	crypt_keyring_free(kr);
}

static void
test_keys(void)
{
	unsigned char k[CRYPT_KEY_LEN], raw[CRYPT_KEY_LEN];
	struct cairn_err err = CAIRN_ERR_INIT;
	char hex[80], b64[80];
	struct crypt_keyring *kr;

	fill_pattern(raw, sizeof raw, 5);
	CHECK_INT(crypt_key_parse(raw, sizeof raw, "f", k, &err), 0);
	CHECK(memcmp(k, raw, sizeof k) == 0);
	for (int i = 0; i < CRYPT_KEY_LEN; i++)
		sprintf(hex + 2 * i, "%02X", raw[i]);
	strcat(hex, "\n");
	memset(k, 0, sizeof k);
	CHECK_INT(crypt_key_parse(hex, strlen(hex), "f", k, &err), 0);
	CHECK(memcmp(k, raw, sizeof k) == 0);
	EVP_EncodeBlock((unsigned char *)b64, raw, sizeof raw);
	strcat(b64, "\r\n");
	memset(k, 0, sizeof k);
	CHECK_INT(crypt_key_parse(b64, strlen(b64), "f", k, &err), 0);
	CHECK(memcmp(k, raw, sizeof k) == 0);
	CHECK_INT(crypt_key_parse("secret", 6, "the file k", k, &err),
	    CAIRN_EINVAL);
	CHECK(strstr(err.msg, "the file k") != NULL);
	CHECK_INT(crypt_key_parse(hex, 63, "f", k, &err), CAIRN_EINVAL);
	CHECK(crypt_keyid_ok("key-2026.01_a"));
	CHECK(!crypt_keyid_ok(""));
	CHECK(!crypt_keyid_ok("a/b"));
	CHECK(!crypt_keyid_ok("0123456789012345678901234567890123"));
	kr = crypt_keyring_new();
	CHECK_INT(crypt_keyring_add(kr, "bad id", raw, &err), CAIRN_EINVAL);
	CHECK_INT(crypt_keyring_add(kr, "a", raw, &err), 0);
	CHECK_INT(crypt_keyring_add(kr, "a", raw, &err), CAIRN_EEXIST);
	CHECK_INT(crypt_keyring_set_current(kr, "b", &err), CAIRN_ENOTFOUND);
	CHECK(crypt_keyring_current(kr) == NULL);
	crypt_keyring_free(kr);
}

/* ---- the store -------------------------------------------------------- */

static char *
tmpdir(const char *name)
{
	const char *base = UNIT_TMPDIR();
	char *d = xasprintf("%s/crypt-%s-%d", base, name, (int)getpid());

	return d;
}

static void
test_store_objects_and_parts(void)
{
	char *root = tmpdir("store");
	struct store *fs = NULL, *plainfs = NULL, *s = NULL;
	struct cairn_err err = CAIRN_ERR_INIT;
	unsigned char *p = xmalloc(3 * C);
	char *got = NULL, *id = NULL;
	size_t len = 0;
	struct store_src src;
	struct store_part parts[2];
	struct buf raw;

	fill_pattern(p, 3 * C, 6);
	REQUIRE(store_open_fs(root, 1, &fs, &err) == 0);
	REQUIRE(store_open_fs(root, 0, &plainfs, &err) == 0);
	REQUIRE(store_open_crypt(fs, ring("k2"), 0, &s, &err) == 0);
	CHECK_STR(store_encryption_key_id(s), "k2");
	CHECK(store_encryption_key_id(plainfs) == NULL);
	CHECK(strstr(store_describe(s), "encrypted with key k2") != NULL);
	/* a whole object */
	CHECK_INT(store_put_mem(s, "a/obj", p, C + 3, &err), 0);
	CHECK_INT(store_get_mem(s, "a/obj", 1u << 20, &got, &len, &err), 0);
	CHECK_INT(len, C + 3);
	CHECK(got != NULL && memcmp(got, p, len) == 0);
	free(got);
	got = NULL;
	CHECK_INT(store_get_mem(plainfs, "a/obj", 1u << 20, &got, &len, &err), 0);
	CHECK_INT(len, crypt_stored_size(C + 3));
	CHECK(got != NULL && crypt_is_encrypted(got, len));
	free(got);
	got = NULL;
	/* a range */
	buf_init(&raw, 1u << 20);
	CHECK_INT(store_get(s, "a/obj", C - 2, 5, to_buf, &raw, NULL, &err), 0);
	CHECK_INT(raw.len, 5);
	CHECK(memcmp(raw.data, p + C - 2, 5) == 0);
	CHECK_INT(store_get(s, "a/obj", C + 2, 9, to_buf, &raw, NULL, &err),
	    CAIRN_EINVAL);
	/* multipart: parts are segments, sizes listed as plaintext */
	CHECK_INT(store_mpu_create(s, "a/mp", &id, &err), 0);
	store_src_mem(&src, p, C + 1);
	CHECK_INT(store_mpu_put_part(s, "a/mp", id, 1, &src, parts[0].etag,
	    NULL, &err), 0);
	store_src_mem(&src, p + C + 1, 7);
	CHECK_INT(store_mpu_put_part(s, "a/mp", id, 2, &src, parts[1].etag,
	    NULL, &err), 0);
	parts[0].number = 1;
	parts[0].size = C + 1;
	parts[1].number = 2;
	parts[1].size = 7;
	CHECK_INT(store_mpu_complete(s, "a/mp", id, parts, 2, NULL, &err), 0);
	CHECK_INT(store_get_mem(s, "a/mp", 1u << 20, &got, &len, &err), 0);
	CHECK_INT(len, C + 8);
	CHECK(got != NULL && memcmp(got, p, len) == 0);
	free(got);
	got = NULL;
	/* completing again (a retry after success) is recognised by size */
	CHECK_INT(store_mpu_complete(s, "a/mp", id, parts, 2, NULL, &err), 0);
	/* a plaintext object is refused by an encrypting store */
	CHECK_INT(store_put_mem(plainfs, "a/plain", "{}", 2, &err), 0);
	CHECK_INT(store_get_mem(s, "a/plain", 100, &got, &len, &err),
	    CAIRN_EPROTO);
	CHECK(strstr(err.msg, "a/plain") != NULL &&
	    strstr(err.msg, "not encrypted") != NULL);
	/* a changed byte fails the read and names the part */
	{
		char *path = xasprintf("%s/a/mp", root);
		FILE *f = fopen(path, "r+b");

		REQUIRE(f != NULL);
		fseek(f, (long)crypt_stored_size(C + 1) + 70, SEEK_SET);
		fputc(0x55, f);
		fclose(f);
		free(path);
	}
	CHECK_INT(store_get_mem(s, "a/mp", 1u << 20, &got, &len, &err),
	    CAIRN_EPROTO);
	CHECK(strstr(err.msg, "part 2") != NULL);
	free(id);
	buf_free(&raw);
	store_free(s);
	store_free(plainfs);
	free(p);
	free(root);
}

static void
test_store_allow_plain(void)
{
	char *root = tmpdir("plain");
	struct store *fs = NULL, *s = NULL;
	struct cairn_err err = CAIRN_ERR_INIT;
	char *got = NULL;
	size_t len = 0;

	REQUIRE(store_open_fs(root, 1, &fs, &err) == 0);
	CHECK_INT(store_put_mem(fs, "old", "{\"a\":1}", 7, &err), 0);
	REQUIRE(store_open_crypt(fs, ring("k1"), 1, &s, &err) == 0);
	CHECK_INT(store_get_mem(s, "old", 100, &got, &len, &err), 0);
	CHECK_INT(len, 7);
	CHECK(got != NULL && memcmp(got, "{\"a\":1}", 7) == 0);
	free(got);
	store_free(s);
	free(root);
}

int
main(void)
{
	fill_pattern(key1, sizeof key1, 11);
	fill_pattern(key2, sizeof key2, 12);
	RUN(test_sizes_round_trip);
	RUN(test_segments_and_rotation);
	RUN(test_tamper_and_truncation);
	RUN(test_reorder);
	RUN(test_plain_objects);
	RUN(test_keys);
	RUN(test_store_objects_and_parts);
	RUN(test_store_allow_plain);
	return unit_done();
}
