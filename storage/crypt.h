/*
 * crypt.h: cairn's client-side encryption format (format 1), as streams.
 *
 * An encrypted object is one or more *segments* back to back; each segment
 * is one put, or one part of a multipart upload, encrypted on its own, so
 * a multipart object (the concatenation of its parts) decrypts as a stream
 * and each part can be written, retried and resumed alone. A segment is a
 * 64-byte header, then chunks of at most 64 KiB of plaintext, each sealed
 * with AES-256-GCM under a key derived for the segment (HKDF-SHA256 of the
 * master key with the header's random salt); the chunk counter is the
 * nonce, and the header plus a length word carrying a final-chunk flag are
 * the associated data, so a changed, reordered, dropped or added chunk,
 * a truncated segment and a changed header all fail. The exact layout is
 * in docs/backup-format.md ("Encryption"), so anyone can decrypt without
 * cairn.
 *
 * Keys are 32 random bytes named by a key id ([A-Za-z0-9._-], 1..32
 * bytes) that every segment header carries: a keyring holds any number of
 * keys (old ones for reading) and one current key for writing, which is
 * how keys rotate.
 *
 * Memory: an encryptor or decryptor holds one chunk (64 KiB + 20 bytes).
 * Not thread-safe per object; keyrings are read-only once built and may be
 * shared by threads.
 */
#ifndef CAIRN_CRYPT_H
#define CAIRN_CRYPT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "base/err.h"

#define CRYPT_KEY_LEN		32		/* AES-256 */
#define CRYPT_KEYID_MAX		32		/* bytes of a key id */
#define CRYPT_HEADER_LEN	64		/* segment header */
#define CRYPT_CHUNK		(64u << 10)	/* plaintext bytes per chunk */
#define CRYPT_TAG_LEN		16
#define CRYPT_CHUNK_OVERHEAD	(4 + CRYPT_TAG_LEN)	/* length word + tag */
#define CRYPT_ALGORITHM		"AES-256-GCM"	/* what status and describe say */

struct crypt_keyring;
struct crypt_enc;
struct crypt_dec;

/* ---- keys ------------------------------------------------------------- */

/* 1 if id can be a key id: 1..CRYPT_KEYID_MAX of [A-Za-z0-9._-]. */
int crypt_keyid_ok(const char *id);

/*
 * Read a key from data (len bytes): exactly 32 raw bytes, or 64 hex digits,
 * or base64 of 32 bytes (the text forms may end in whitespace). key gets
 * the 32 bytes. CAIRN_EINVAL naming `what` (a file, a Secret key) if it is
 * none of those.
 */
int crypt_key_parse(const void *data, size_t len, const char *what,
	unsigned char key[CRYPT_KEY_LEN], struct cairn_err *err);

/* A new, empty keyring; owned by the caller (crypt_keyring_free). */
struct crypt_keyring *crypt_keyring_new(void);
/* Free kr (NULL is fine); key bytes are wiped. */
void crypt_keyring_free(struct crypt_keyring *kr);
/*
 * Add a key under id (copied). id NULL adds a key for any id: it opens
 * segments whose id no other key has (`cairn decrypt --key-file K`) and
 * cannot be current. A second key with the same id is CAIRN_EEXIST.
 */
int crypt_keyring_add(struct crypt_keyring *kr, const char *id,
	const unsigned char key[CRYPT_KEY_LEN], struct cairn_err *err);
/* Make id the key new segments are written with; CAIRN_ENOTFOUND if absent. */
int crypt_keyring_set_current(struct crypt_keyring *kr, const char *id,
	struct cairn_err *err);
/* The current key id, or NULL (then the ring can only decrypt). Borrowed. */
const char *crypt_keyring_current(const struct crypt_keyring *kr);
/* Number of keys. */
size_t crypt_keyring_count(const struct crypt_keyring *kr);
/*
 * A key for another purpose than segments, derived from kr's key `id`
 * (NULL: the current one): HKDF-SHA256(ikm = that master key, no salt,
 * info). Different infos give unrelated keys, and nothing about the
 * master key can be learnt from one. CAIRN_ENOTFOUND when kr has no such
 * key (or no current one), CAIRN_EFAIL when libcrypto fails.
 */
int crypt_keyring_derive(const struct crypt_keyring *kr, const char *id,
	const char *info, unsigned char out[CRYPT_KEY_LEN],
	struct cairn_err *err);

/* ---- sizes ------------------------------------------------------------ */

/* Stored size of a segment holding plain bytes of plaintext. */
uint64_t crypt_stored_size(uint64_t plain);
/*
 * Plaintext size of a segment of stored bytes; -1 if no segment has that
 * size (shorter than a header and one chunk, or a leftover no chunk has).
 */
int64_t crypt_plain_size(uint64_t stored);

/* ---- encrypting ------------------------------------------------------- */

/*
 * A source of plaintext for an encryptor: returns bytes read, 0 at the
 * end, < 0 on failure (the encryptor then fails with CAIRN_ECANCELED).
 */
typedef ssize_t (*crypt_read_fn)(void *arg, void *buf, size_t n);

/*
 * An encryptor of one segment under kr's current key, reading plaintext
 * from rd. part is the part number written into the header (0 for a whole
 * object). A fresh random salt is drawn here; crypt_enc_restart() keeps it,
 * so the segment re-encrypts to the very same bytes (a resent request).
 * CAIRN_EINVAL if kr has no current key.
 */
int crypt_enc_new(const struct crypt_keyring *kr, uint32_t part,
	crypt_read_fn rd, void *rd_arg, struct crypt_enc **out,
	struct cairn_err *err);
/*
 * Fill buf with up to n bytes of the segment: returns bytes (0 at the end
 * of the segment) or < 0 (the plaintext source failed, or libcrypto did:
 * CAIRN_ECANCELED / CAIRN_EFAIL, detail in crypt_enc_error()).
 */
ssize_t crypt_enc_read(struct crypt_enc *e, void *buf, size_t n);
/* Start the segment again from its first byte (the caller rewound rd). */
void crypt_enc_restart(struct crypt_enc *e);
const struct cairn_err *crypt_enc_error(const struct crypt_enc *e);
void crypt_enc_free(struct crypt_enc *e);

/* ---- decrypting ------------------------------------------------------- */

/* Where plaintext goes: 0, or < 0 to stop (crypt_dec_push then fails). */
typedef int (*crypt_write_fn)(void *arg, const void *buf, size_t n);

/*
 * A decryptor of a stream of segments (one object), keys from kr
 * (borrowed, must outlive it), plaintext to wr. name (copied) is what
 * messages call the stream ("s3://b/k.tar.gz"). With allow_plain, a stream
 * that does not start with a segment header is passed through unchanged
 * (an object written before encryption was turned on); without, it is
 * CAIRN_EPROTO.
 */
struct crypt_dec *crypt_dec_new(const struct crypt_keyring *kr,
	const char *name, int allow_plain, crypt_write_fn wr, void *wr_arg);
/*
 * Feed n stored bytes. Fails (and stays failed) with CAIRN_EPROTO when a
 * chunk does not authenticate or the stream is malformed, naming the part
 * (header's part number), the segment's index and the byte offset;
 * CAIRN_ENOTFOUND when a segment's key id is not in kr; CAIRN_ECANCELED
 * when wr refused.
 */
int crypt_dec_push(struct crypt_dec *d, const void *buf, size_t n,
	struct cairn_err *err);
/* The stream ended: CAIRN_EPROTO if it stopped inside a segment. */
int crypt_dec_finish(struct crypt_dec *d, struct cairn_err *err);
/* 1 if the stream was passed through as plaintext (allow_plain). */
int crypt_dec_was_plain(const struct crypt_dec *d);
/* Segments fully read so far. */
uint64_t crypt_dec_segments(const struct crypt_dec *d);
void crypt_dec_free(struct crypt_dec *d);

/* 1 if the first n bytes of p start a segment header (magic and version). */
int crypt_is_encrypted(const void *p, size_t n);

#endif
