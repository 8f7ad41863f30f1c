/*
 * crypt.c: the encryption format of crypt.h on libcrypto.
 *
 * Segment (docs/backup-format.md, "Encryption", is the reference):
 *
 *   header, 64 bytes
 *     0  magic "cairnenc"          8
 *     8  version 1                 1
 *     9  algorithm 1               1   AES-256-GCM, HKDF-SHA256 segment key
 *    10  chunk size, log2: 16      1
 *    11  key id length 1..32       1
 *    12  part number, big-endian   4   0 for a whole object
 *    16  salt                      16  random per segment
 *    32  key id, zero-padded       32
 *   chunks, i = 0, 1, ...
 *     word  big-endian u32: bit 31 final, bits 0..30 plaintext length L
 *           (L = 65536 for every chunk but the final one, which has
 *           0..65536)
 *     ciphertext, L bytes
 *     GCM tag, 16 bytes
 *
 *   segment key = HKDF-SHA256(ikm = master key, salt = header[16..32],
 *                             info = "cairn segment key v1"), 32 bytes
 *   nonce of chunk i = 4 zero bytes || i as a big-endian u64
 *   associated data of chunk i = the 64 header bytes || its 4 word bytes
 *
 * Why this shape: a fresh segment key per segment means nonces never
 * repeat under one key whatever the number of objects (a random 96-bit
 * nonce per object would bound the number of objects per key); the counter
 * nonce orders the chunks; the final flag in the associated data makes a
 * segment cut at a chunk boundary fail; the header in the associated data
 * makes its key id and part number tamper-evident. Only authenticated
 * plaintext is ever handed on: a chunk is opened whole before its bytes go
 * to the writer.
 */
#include "config.h"
#include "storage/crypt.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>

#include "base/mem.h"

#define MAGIC		"cairnenc"
#define MAGIC_LEN	8
#define FMT_VERSION		1
#define ALG_AES_GCM	1
#define CHUNK_LOG2	16
#define SALT_OFF	16
#define SALT_LEN	16
#define KEYID_OFF	32
#define FINAL_BIT	0x80000000u
#define HKDF_INFO	"cairn segment key v1"

/* ---- keys ------------------------------------------------------------- */

struct crypt_key {
	char *id;			/* NULL: any id */
	unsigned char key[CRYPT_KEY_LEN];
};

struct crypt_keyring {
	struct crypt_key *v;
	size_t n;
	char *current;			/* id new segments use, or NULL */
};

int
crypt_keyid_ok(const char *id)
{
	size_t i, n;

	if (id == NULL)
		return 0;
	n = strlen(id);
	if (n < 1 || n > CRYPT_KEYID_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (!isalnum((unsigned char)id[i]) && id[i] != '.' &&
		    id[i] != '_' && id[i] != '-')
			return 0;
	return 1;
}

static int
hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int
crypt_key_parse(const void *data, size_t len, const char *what,
    unsigned char key[CRYPT_KEY_LEN], struct cairn_err *err)
{
	const unsigned char *p = data;
	unsigned char tmp[64];
	size_t n = len, i;
	int got;

	if (len == CRYPT_KEY_LEN) {
		memcpy(key, p, CRYPT_KEY_LEN);
		return 0;
	}
	while (n > 0 && isspace(p[n - 1]))
		n--;
	if (n == 2 * CRYPT_KEY_LEN) {
		for (i = 0; i < CRYPT_KEY_LEN; i++) {
			int hi = hexval(p[2 * i]), lo = hexval(p[2 * i + 1]);

			if (hi < 0 || lo < 0)
				break;
			key[i] = (unsigned char)(hi << 4 | lo);
		}
		if (i == CRYPT_KEY_LEN)
			return 0;
	}
	/* base64 of 32 bytes: 44 characters ending in one '=' */
	if (n == 44 && p[43] == '=' && p[42] != '=') {
		got = EVP_DecodeBlock(tmp, p, 44);
		if (got == 33) {
			memcpy(key, tmp, CRYPT_KEY_LEN);
			OPENSSL_cleanse(tmp, sizeof tmp);
			return 0;
		}
	}
	OPENSSL_cleanse(tmp, sizeof tmp);
	return cairn_err_set(err, CAIRN_EINVAL, "%s is not an encryption key: "
	    "give 32 random bytes, raw, as 64 hex digits or in base64 (e.g. "
	    "`openssl rand -base64 32`); it has %zu bytes", what, len);
}

struct crypt_keyring *
crypt_keyring_new(void)
{
	return xcalloc(1, sizeof(struct crypt_keyring));
}

void
crypt_keyring_free(struct crypt_keyring *kr)
{
	size_t i;

	if (kr == NULL)
		return;
	for (i = 0; i < kr->n; i++) {
		OPENSSL_cleanse(kr->v[i].key, CRYPT_KEY_LEN);
		free(kr->v[i].id);
	}
	free(kr->v);
	free(kr->current);
	free(kr);
}

static const struct crypt_key *
key_find(const struct crypt_keyring *kr, const char *id)
{
	const struct crypt_key *any = NULL;
	size_t i;

	for (i = 0; i < kr->n; i++) {
		if (kr->v[i].id == NULL)
			any = &kr->v[i];
		else if (id != NULL && strcmp(kr->v[i].id, id) == 0)
			return &kr->v[i];
	}
	return any;
}

int
crypt_keyring_add(struct crypt_keyring *kr, const char *id,
    const unsigned char key[CRYPT_KEY_LEN], struct cairn_err *err)
{
	size_t i;

	if (id != NULL && !crypt_keyid_ok(id))
		return cairn_err_set(err, CAIRN_EINVAL, "\"%.80s\" is not a key "
		    "id: 1 to %d of A-Z a-z 0-9 . _ -", id, CRYPT_KEYID_MAX);
	for (i = 0; i < kr->n; i++)
		if ((id == NULL && kr->v[i].id == NULL) || (id != NULL &&
		    kr->v[i].id != NULL && strcmp(kr->v[i].id, id) == 0))
			return cairn_err_set(err, CAIRN_EEXIST, "key %s is given "
			    "twice", id ? id : "(any id)");
	kr->v = xreallocarray(kr->v, kr->n + 1, sizeof *kr->v);
	kr->v[kr->n].id = id ? xstrdup(id) : NULL;
	memcpy(kr->v[kr->n].key, key, CRYPT_KEY_LEN);
	kr->n++;
	return 0;
}

int
crypt_keyring_set_current(struct crypt_keyring *kr, const char *id,
    struct cairn_err *err)
{
	size_t i;

	for (i = 0; id != NULL && i < kr->n; i++) {
		if (kr->v[i].id != NULL && strcmp(kr->v[i].id, id) == 0) {
			free(kr->current);
			kr->current = xstrdup(id);
			return 0;
		}
	}
	return cairn_err_set(err, CAIRN_ENOTFOUND, "no key with id \"%.80s\"",
	    id ? id : "");
}

const char *
crypt_keyring_current(const struct crypt_keyring *kr)
{
	return kr->current;
}

size_t
crypt_keyring_count(const struct crypt_keyring *kr)
{
	return kr->n;
}

int
crypt_keyring_derive(const struct crypt_keyring *kr, const char *id,
    const char *info, unsigned char out[CRYPT_KEY_LEN], struct cairn_err *err)
{
	const struct crypt_key *k;
	EVP_PKEY_CTX *pc;
	size_t len = CRYPT_KEY_LEN;
	int ok;

	if (id == NULL)
		id = kr->current;
	k = id != NULL ? key_find(kr, id) : NULL;
	if (k == NULL)
		return cairn_err_set(err, CAIRN_ENOTFOUND, "no encryption key "
		    "%s", id != NULL ? id : "to write with");
	pc = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
	ok = pc != NULL && EVP_PKEY_derive_init(pc) > 0 &&
	    EVP_PKEY_CTX_set_hkdf_md(pc, EVP_sha256()) > 0 &&
	    EVP_PKEY_CTX_set1_hkdf_key(pc, k->key, CRYPT_KEY_LEN) > 0 &&
	    EVP_PKEY_CTX_add1_hkdf_info(pc, (const unsigned char *)info,
	    (int)strlen(info)) > 0 &&
	    EVP_PKEY_derive(pc, out, &len) > 0 && len == CRYPT_KEY_LEN;
	EVP_PKEY_CTX_free(pc);
	if (!ok) {
		OPENSSL_cleanse(out, CRYPT_KEY_LEN);
		return cairn_err_set(err, CAIRN_EFAIL, "deriving a key from "
		    "encryption key %s failed (libcrypto)", id);
	}
	return 0;
}

/* ---- sizes ------------------------------------------------------------ */

uint64_t
crypt_stored_size(uint64_t plain)
{
	uint64_t chunks = plain == 0 ? 1 : (plain + CRYPT_CHUNK - 1) / CRYPT_CHUNK;

	return CRYPT_HEADER_LEN + plain + chunks * CRYPT_CHUNK_OVERHEAD;
}

int64_t
crypt_plain_size(uint64_t stored)
{
	uint64_t body, chunks, plain;

	if (stored < CRYPT_HEADER_LEN + CRYPT_CHUNK_OVERHEAD)
		return -1;
	body = stored - CRYPT_HEADER_LEN;
	chunks = (body + CRYPT_CHUNK + CRYPT_CHUNK_OVERHEAD - 1) /
	    (CRYPT_CHUNK + CRYPT_CHUNK_OVERHEAD);
	plain = body - chunks * CRYPT_CHUNK_OVERHEAD;
	if (crypt_stored_size(plain) != stored)
		return -1;
	return (int64_t)plain;
}

/* ---- shared ----------------------------------------------------------- */

static void
put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

static uint32_t
get_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

static void
chunk_nonce(uint64_t i, unsigned char nonce[12])
{
	int k;

	memset(nonce, 0, 4);
	for (k = 0; k < 8; k++)
		nonce[4 + k] = (unsigned char)(i >> (56 - 8 * k));
}

/* The segment key and a GCM context keyed with it; NULL on failure. */
static EVP_CIPHER_CTX *
segment_cipher(const unsigned char master[CRYPT_KEY_LEN],
    const unsigned char *salt, int enc)
{
	EVP_PKEY_CTX *pc = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
	EVP_CIPHER_CTX *cc = NULL;
	unsigned char sk[CRYPT_KEY_LEN];
	size_t sklen = sizeof sk;
	int ok;

	ok = pc != NULL && EVP_PKEY_derive_init(pc) > 0 &&
	    EVP_PKEY_CTX_set_hkdf_md(pc, EVP_sha256()) > 0 &&
	    EVP_PKEY_CTX_set1_hkdf_salt(pc, salt, SALT_LEN) > 0 &&
	    EVP_PKEY_CTX_set1_hkdf_key(pc, master, CRYPT_KEY_LEN) > 0 &&
	    EVP_PKEY_CTX_add1_hkdf_info(pc, (const unsigned char *)HKDF_INFO,
	    (int)strlen(HKDF_INFO)) > 0 &&
	    EVP_PKEY_derive(pc, sk, &sklen) > 0 && sklen == sizeof sk;
	EVP_PKEY_CTX_free(pc);
	if (ok) {
		cc = EVP_CIPHER_CTX_new();
		ok = cc != NULL && EVP_CipherInit_ex(cc, EVP_aes_256_gcm(), NULL,
		    sk, NULL, enc) == 1;
	}
	OPENSSL_cleanse(sk, sizeof sk);
	if (!ok) {
		EVP_CIPHER_CTX_free(cc);
		return NULL;
	}
	return cc;
}

/*
 * Seal or open one chunk in place: in/out len bytes, tag 16 bytes (written
 * when sealing, checked when opening). 0, or -1 (opening: the chunk does
 * not authenticate).
 */
static int
chunk_crypt(EVP_CIPHER_CTX *cc, int enc, uint64_t i, const unsigned char *hdr,
    const unsigned char word[4], unsigned char *buf, size_t len,
    unsigned char *tag)
{
	unsigned char nonce[12], aad[CRYPT_HEADER_LEN + 4];
	int outl = 0, fin = 0;

	chunk_nonce(i, nonce);
	memcpy(aad, hdr, CRYPT_HEADER_LEN);
	memcpy(aad + CRYPT_HEADER_LEN, word, 4);
	if (EVP_CipherInit_ex(cc, NULL, NULL, NULL, nonce, enc) != 1 ||
	    EVP_CipherUpdate(cc, NULL, &outl, aad, (int)sizeof aad) != 1)
		return -1;
	if (len > 0 && EVP_CipherUpdate(cc, buf, &outl, buf, (int)len) != 1)
		return -1;
	if (!enc && EVP_CIPHER_CTX_ctrl(cc, EVP_CTRL_GCM_SET_TAG, CRYPT_TAG_LEN,
	    tag) != 1)
		return -1;
	if (EVP_CipherFinal_ex(cc, buf + len, &fin) != 1)
		return -1;
	if (enc && EVP_CIPHER_CTX_ctrl(cc, EVP_CTRL_GCM_GET_TAG, CRYPT_TAG_LEN,
	    tag) != 1)
		return -1;
	return 0;
}

int
crypt_is_encrypted(const void *p, size_t n)
{
	const unsigned char *b = p;

	return n > MAGIC_LEN && memcmp(b, MAGIC, MAGIC_LEN) == 0 &&
	    b[MAGIC_LEN] == FMT_VERSION;
}

/* ---- encrypting ------------------------------------------------------- */

struct crypt_enc {
	crypt_read_fn rd;
	void *rd_arg;
	EVP_CIPHER_CTX *cc;
	unsigned char hdr[CRYPT_HEADER_LEN];
	unsigned char *pbuf;		/* plaintext: one chunk + 1 lookahead */
	size_t have;
	int eof;			/* rd said 0 */
	unsigned char *obuf;		/* sealed bytes waiting to be read */
	size_t olen, opos;
	int hdr_out;			/* header handed out */
	int done;			/* final chunk sealed */
	uint64_t chunk;
	struct cairn_err err;
};

int
crypt_enc_new(const struct crypt_keyring *kr, uint32_t part, crypt_read_fn rd,
    void *rd_arg, struct crypt_enc **out, struct cairn_err *err)
{
	const struct crypt_key *k;
	struct crypt_enc *e;
	size_t idlen;

	*out = NULL;
	if (kr->current == NULL || (k = key_find(kr, kr->current)) == NULL)
		return cairn_err_set(err, CAIRN_EINVAL, "no key to encrypt with");
	e = xcalloc(1, sizeof *e);
	e->rd = rd;
	e->rd_arg = rd_arg;
	idlen = strlen(kr->current);
	memcpy(e->hdr, MAGIC, MAGIC_LEN);
	e->hdr[8] = FMT_VERSION;
	e->hdr[9] = ALG_AES_GCM;
	e->hdr[10] = CHUNK_LOG2;
	e->hdr[11] = (unsigned char)idlen;
	put_be32(e->hdr + 12, part);
	if (RAND_bytes(e->hdr + SALT_OFF, SALT_LEN) != 1) {
		free(e);
		return cairn_err_set(err, CAIRN_EFAIL, "no random bytes for a "
		    "salt (libcrypto RAND_bytes failed)");
	}
	memcpy(e->hdr + KEYID_OFF, kr->current, idlen);
	e->cc = segment_cipher(k->key, e->hdr + SALT_OFF, 1);
	if (e->cc == NULL) {
		free(e);
		return cairn_err_set(err, CAIRN_EFAIL, "libcrypto could not set "
		    "up AES-256-GCM");
	}
	e->pbuf = xmalloc(CRYPT_CHUNK + 1);
	e->obuf = xmalloc(CRYPT_CHUNK + CRYPT_CHUNK_OVERHEAD);
	*out = e;
	return 0;
}

/* Seal the next chunk into obuf. 0, or < 0 with e->err set. */
static int
enc_next(struct crypt_enc *e)
{
	ssize_t r;
	size_t len;
	int final;

	if (!e->hdr_out) {
		memcpy(e->obuf, e->hdr, CRYPT_HEADER_LEN);
		e->olen = CRYPT_HEADER_LEN;
		e->opos = 0;
		e->hdr_out = 1;
		return 0;
	}
	while (!e->eof && e->have < CRYPT_CHUNK + 1) {
		r = e->rd(e->rd_arg, e->pbuf + e->have, CRYPT_CHUNK + 1 - e->have);
		if (r < 0)
			return cairn_err_set(&e->err, CAIRN_ECANCELED,
			    "reading the data to encrypt failed");
		if (r == 0)
			e->eof = 1;
		e->have += (size_t)r;
	}
	final = e->have <= CRYPT_CHUNK;
	len = final ? e->have : CRYPT_CHUNK;
	put_be32(e->obuf, (final ? FINAL_BIT : 0) | (uint32_t)len);
	memcpy(e->obuf + 4, e->pbuf, len);
	if (chunk_crypt(e->cc, 1, e->chunk, e->hdr, e->obuf, e->obuf + 4, len,
	    e->obuf + 4 + len) < 0)
		return cairn_err_set(&e->err, CAIRN_EFAIL, "libcrypto failed "
		    "to encrypt");
	e->chunk++;
	e->olen = 4 + len + CRYPT_TAG_LEN;
	e->opos = 0;
	memmove(e->pbuf, e->pbuf + len, e->have - len);
	e->have -= len;
	e->done = final;
	return 0;
}

ssize_t
crypt_enc_read(struct crypt_enc *e, void *buf, size_t n)
{
	unsigned char *out = buf;
	size_t got = 0, take;

	if (e->err.code < 0)
		return e->err.code;
	while (got < n) {
		if (e->opos == e->olen) {
			if (e->done && e->hdr_out)
				break;
			if (enc_next(e) < 0)
				return e->err.code;
		}
		take = e->olen - e->opos;
		if (take > n - got)
			take = n - got;
		memcpy(out + got, e->obuf + e->opos, take);
		e->opos += take;
		got += take;
	}
	return (ssize_t)got;
}

void
crypt_enc_restart(struct crypt_enc *e)
{
	e->have = 0;
	e->eof = 0;
	e->olen = e->opos = 0;
	e->hdr_out = 0;
	e->done = 0;
	e->chunk = 0;
	cairn_err_clear(&e->err);
}

const struct cairn_err *
crypt_enc_error(const struct crypt_enc *e)
{
	return &e->err;
}

void
crypt_enc_free(struct crypt_enc *e)
{
	if (e == NULL)
		return;
	EVP_CIPHER_CTX_free(e->cc);
	OPENSSL_cleanse(e->pbuf, CRYPT_CHUNK + 1);
	free(e->pbuf);
	free(e->obuf);
	free(e);
}

/* ---- decrypting ------------------------------------------------------- */

enum dec_state {
	D_START,		/* nothing yet: header or (allowed) plaintext */
	D_HEADER,		/* inside a header */
	D_WORD,			/* inside a chunk's length word */
	D_CHUNK,		/* inside a chunk's ciphertext + tag */
	D_BETWEEN,		/* a segment ended: next header or the end */
	D_PLAIN,		/* passing plaintext through */
	D_FAILED,
};

struct crypt_dec {
	const struct crypt_keyring *kr;
	char *name;
	int allow_plain;
	crypt_write_fn wr;
	void *wr_arg;
	enum dec_state st;
	unsigned char hdr[CRYPT_HEADER_LEN];
	unsigned char word[4];
	size_t fill;			/* bytes of the current unit so far */
	size_t need;			/* chunk: ciphertext + tag bytes */
	int final;
	unsigned char *cbuf;
	EVP_CIPHER_CTX *cc;
	uint64_t chunk;			/* in the current segment */
	uint64_t segments;		/* whole segments read */
	uint64_t off;			/* stored bytes consumed */
	uint64_t seg_off;		/* where the current segment started */
	struct cairn_err err;		/* sticky */
};

struct crypt_dec *
crypt_dec_new(const struct crypt_keyring *kr, const char *name, int allow_plain,
    crypt_write_fn wr, void *wr_arg)
{
	struct crypt_dec *d = xcalloc(1, sizeof *d);

	d->kr = kr;
	d->name = xstrdup(name ? name : "(stream)");
	d->allow_plain = allow_plain;
	d->wr = wr;
	d->wr_arg = wr_arg;
	d->st = D_START;
	d->cbuf = xmalloc(CRYPT_CHUNK + CRYPT_TAG_LEN);
	return d;
}

void
crypt_dec_free(struct crypt_dec *d)
{
	if (d == NULL)
		return;
	EVP_CIPHER_CTX_free(d->cc);
	OPENSSL_cleanse(d->cbuf, CRYPT_CHUNK + CRYPT_TAG_LEN);
	free(d->cbuf);
	free(d->name);
	free(d);
}

/* "part 3 (segment 4, from byte 123)" or "" for a one-segment object. */
static void
where(const struct crypt_dec *d, char *out, size_t n)
{
	uint32_t part = get_be32(d->hdr + 12);

	if (part > 0)
		snprintf(out, n, "part %u (bytes from %llu)", part,
		    (unsigned long long)d->seg_off);
	else if (d->segments > 0)
		snprintf(out, n, "segment %llu (bytes from %llu)",
		    (unsigned long long)d->segments + 1,
		    (unsigned long long)d->seg_off);
	else
		snprintf(out, n, "the object");
}

static int
dec_fail(struct crypt_dec *d, int code, const char *what, struct cairn_err *err)
{
	char w[96];

	where(d, w, sizeof w);
	cairn_err_set(&d->err, code, "%s: %s: %s", d->name, w, what);
	d->st = D_FAILED;
	return cairn_err_copy(err, &d->err);
}

/* A whole header is in d->hdr: check it, find the key, key the cipher. */
static int
dec_header(struct crypt_dec *d, struct cairn_err *err)
{
	const struct crypt_key *k;
	char id[CRYPT_KEYID_MAX + 1], msg[200];
	size_t idlen = d->hdr[11], i;

	if (d->hdr[8] != FMT_VERSION || d->hdr[9] != ALG_AES_GCM ||
	    d->hdr[10] != CHUNK_LOG2) {
		snprintf(msg, sizeof msg, "encryption format %u, algorithm %u, "
		    "chunk size 2^%u: this cairn reads format 1, algorithm 1, "
		    "2^16 (or the header was changed)", d->hdr[8], d->hdr[9],
		    d->hdr[10]);
		return dec_fail(d, CAIRN_EPROTO, msg, err);
	}
	for (i = idlen; i < CRYPT_KEYID_MAX && d->hdr[KEYID_OFF + i] == 0; i++)
		;
	memcpy(id, d->hdr + KEYID_OFF, idlen <= CRYPT_KEYID_MAX ? idlen : 0);
	id[idlen <= CRYPT_KEYID_MAX ? idlen : 0] = '\0';
	if (idlen < 1 || idlen > CRYPT_KEYID_MAX || i != CRYPT_KEYID_MAX ||
	    !crypt_keyid_ok(id))
		return dec_fail(d, CAIRN_EPROTO, "the segment header's key id "
		    "is malformed (the header was changed)", err);
	k = key_find(d->kr, id);
	if (k == NULL) {
		snprintf(msg, sizeof msg, "encrypted with key \"%s\", which is "
		    "not among the keys given", id);
		return dec_fail(d, CAIRN_ENOTFOUND, msg, err);
	}
	EVP_CIPHER_CTX_free(d->cc);
	d->cc = segment_cipher(k->key, d->hdr + SALT_OFF, 0);
	if (d->cc == NULL)
		return dec_fail(d, CAIRN_EFAIL, "libcrypto could not set up "
		    "AES-256-GCM", err);
	d->chunk = 0;
	return 0;
}

/* A whole chunk is in d->cbuf: open it and hand the plaintext on. */
static int
dec_chunk(struct crypt_dec *d, struct cairn_err *err)
{
	size_t len = d->need - CRYPT_TAG_LEN;
	char msg[300], id[CRYPT_KEYID_MAX + 1];

	if (chunk_crypt(d->cc, 0, d->chunk, d->hdr, d->word, d->cbuf, len,
	    d->cbuf + len) < 0) {
		snprintf(id, sizeof id, "%.*s", (int)d->hdr[11],
		    (const char *)d->hdr + KEYID_OFF);
		snprintf(msg, sizeof msg, "chunk %llu (stored bytes %llu..%llu) "
		    "does not authenticate: the data was changed, or key \"%s\" "
		    "is not the key it was encrypted with",
		    (unsigned long long)d->chunk,
		    (unsigned long long)(d->off - d->need - 4),
		    (unsigned long long)d->off, id);
		return dec_fail(d, CAIRN_EPROTO, msg, err);
	}
	d->chunk++;
	if (len > 0 && d->wr(d->wr_arg, d->cbuf, len) < 0)
		return dec_fail(d, CAIRN_ECANCELED, "the reader stopped", err);
	return 0;
}

/*
 * Move bytes from (*p, *n) into dst until it holds want bytes (d->fill
 * counts them). 1 when it is full, 0 when the input ran out first.
 */
static int
gather(struct crypt_dec *d, unsigned char *dst, size_t want,
    const unsigned char **p, size_t *n)
{
	size_t take = want - d->fill;

	if (take > *n)
		take = *n;
	memcpy(dst + d->fill, *p, take);
	d->fill += take;
	d->off += take;
	*p += take;
	*n -= take;
	return d->fill == want;
}

int
crypt_dec_push(struct crypt_dec *d, const void *buf, size_t n,
    struct cairn_err *err)
{
	const unsigned char *p = buf;
	size_t before;
	uint32_t w;

	while (n > 0) {
		switch (d->st) {
		case D_FAILED:
			return cairn_err_copy(err, &d->err);
		case D_PLAIN:
			d->off += n;
			if (d->wr(d->wr_arg, p, n) < 0)
				return dec_fail(d, CAIRN_ECANCELED,
				    "the reader stopped", err);
			return 0;
		case D_START:
		case D_BETWEEN:
			d->seg_off = d->off;
			d->fill = 0;
			d->st = D_HEADER;
			/* FALLTHROUGH */
		case D_HEADER:
			before = d->fill;
			(void)gather(d, d->hdr, CRYPT_HEADER_LEN, &p, &n);
			/* the magic decides as soon as it is in */
			if (d->fill >= MAGIC_LEN && before < MAGIC_LEN &&
			    memcmp(d->hdr, MAGIC, MAGIC_LEN) != 0) {
				if (d->segments == 0 && d->seg_off == 0 &&
				    d->allow_plain) {
					d->st = D_PLAIN;
					if (d->wr(d->wr_arg, d->hdr, d->fill) < 0)
						return dec_fail(d,
						    CAIRN_ECANCELED,
						    "the reader stopped", err);
					continue;
				}
				return dec_fail(d, CAIRN_EPROTO, d->segments == 0 ?
				    "not encrypted (no cairn encryption header), "
				    "but the location requires encryption" :
				    "bytes after the end of the last segment are "
				    "not a segment header (the data was changed)",
				    err);
			}
			if (d->fill == CRYPT_HEADER_LEN) {
				if (dec_header(d, err) < 0)
					return d->err.code;
				d->st = D_WORD;
				d->fill = 0;
			}
			break;
		case D_WORD:
			if (!gather(d, d->word, 4, &p, &n))
				break;
			w = get_be32(d->word);
			d->final = (w & FINAL_BIT) != 0;
			w &= ~FINAL_BIT;
			if (w > CRYPT_CHUNK || (!d->final && w != CRYPT_CHUNK))
				return dec_fail(d, CAIRN_EPROTO, "a chunk's "
				    "length word is impossible (the data was "
				    "changed)", err);
			d->need = w + CRYPT_TAG_LEN;
			d->fill = 0;
			d->st = D_CHUNK;
			break;
		case D_CHUNK:
			if (!gather(d, d->cbuf, d->need, &p, &n))
				break;
			if (dec_chunk(d, err) < 0)
				return d->err.code;
			d->fill = 0;
			if (d->final) {
				d->segments++;
				d->st = D_BETWEEN;
			} else {
				d->st = D_WORD;
			}
			break;
		}
	}
	return 0;
}

int
crypt_dec_finish(struct crypt_dec *d, struct cairn_err *err)
{
	switch (d->st) {
	case D_FAILED:
		return cairn_err_copy(err, &d->err);
	case D_PLAIN:
	case D_BETWEEN:
		return 0;
	case D_START:
		if (d->allow_plain) {
			d->st = D_PLAIN;
			return 0;
		}
		return dec_fail(d, CAIRN_EPROTO, "empty, so not encrypted, but "
		    "the location requires encryption", err);
	case D_HEADER:
		if (d->segments == 0 && d->fill < MAGIC_LEN && !d->allow_plain &&
		    memcmp(d->hdr, MAGIC, d->fill) != 0)
			return dec_fail(d, CAIRN_EPROTO, "not encrypted (no cairn "
			    "encryption header), but the location requires "
			    "encryption", err);
		if (d->segments == 0 && d->fill < MAGIC_LEN && d->allow_plain) {
			d->st = D_PLAIN;
			return d->wr(d->wr_arg, d->hdr, d->fill) < 0 ?
			    dec_fail(d, CAIRN_ECANCELED, "the reader stopped",
			    err) : 0;
		}
		/* FALLTHROUGH */
	default:
		return dec_fail(d, CAIRN_EPROTO, "the data ends inside a segment "
		    "(it was cut short)", err);
	}
}

int
crypt_dec_was_plain(const struct crypt_dec *d)
{
	return d->st == D_PLAIN;
}

uint64_t
crypt_dec_segments(const struct crypt_dec *d)
{
	return d->segments;
}
