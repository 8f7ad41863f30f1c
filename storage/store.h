/*
 * store.h: cairn's object storage, one small interface over two backends.
 *
 * A `struct store` is an opened bucket (S3) or directory (fs). Keys are
 * '/'-separated C strings, at most STORE_KEY_MAX bytes, with no empty, "."
 * or ".." segment and no leading '/': anything else is CAIRN_EINVAL on both
 * backends (so the same key works everywhere and cannot escape an fs root).
 *
 * Every call returns 0 or a negative enum cairn_rc and fills an optional
 * `struct cairn_err` whose message names the store, the bucket and the key.
 * Codes: CAIRN_ENOTFOUND (no such key, bucket, upload or directory),
 * CAIRN_EAUTH (credentials refused), CAIRN_ENET (could not connect),
 * CAIRN_ESERVER (5xx after all retries), CAIRN_EIO (local disk),
 * CAIRN_EPROTO (peer sent garbage), CAIRN_ETOOBIG (a cap was reached),
 * CAIRN_EINVAL (bad key, config or argument), CAIRN_ECANCELED (a callback
 * asked to stop, or the process is stopping: store_set_process_stop()).
 *
 * Threads: a store may be used by any number of threads at once; each call
 * is independent (see storage/README.md for how each backend does it).
 * store_free() must not race with calls in flight.
 */
#ifndef CAIRN_STORE_H
#define CAIRN_STORE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "base/err.h"

#define STORE_KEY_MAX 1024		/* S3's limit on a key, in bytes */
#define STORE_ETAG_MAX 80		/* ETag text without quotes, + NUL */
#define STORE_UPLOAD_ID_MAX 1024	/* multipart upload id + NUL */
#define STORE_PART_MIN (5u << 20)	/* S3: every part but the last */
#define STORE_PART_MAX_NUMBER 10000	/* S3: part numbers are 1..10000 */
#define STORE_S3_PUT_PART (8u << 20)	/* part size of store_put's own multipart */

struct store;

/*
 * The process stops when *stop becomes non-zero (`cairn server`: when its
 * shutdown grace is over). From then on a wait between tries (a read-only
 * filesystem's, S3's backoff) ends at once and the call fails with
 * CAIRN_ECANCELED, so a shutdown is not held for a retry budget
 * (config.readOnlyWait can be minutes, longer than a pod's grace period);
 * what was stored stays for the resume. Set before stores are used and
 * back to NULL (the default: never stops) before *stop goes away.
 */
void store_set_process_stop(const atomic_int *stop);

/*
 * Progress: called as bytes move, with the bytes moved so far by this call
 * and the total expected (-1 unknown). A retried request starts its count
 * again from what is safely done, so `done` can go down. Optional.
 */
struct store_progress {
	void (*fn)(void *arg, uint64_t done, int64_t total);
	void *arg;
};

/*
 * A source of bytes for put and part uploads. read() returns the number of
 * bytes stored (0 at the end, < 0 to abort with CAIRN_ECANCELED). rewind()
 * (optional) restarts from the first byte; a source without it cannot be
 * re-sent, so a failed request after it was read is not retried. `len` is
 * the exact length or -1 when unknown. Use store_src_mem() / store_src_fd()
 * for the common cases; the p_ fields are theirs.
 */
struct store_src {
	ssize_t (*read)(void *arg, void *buf, size_t n);
	int (*rewind)(void *arg);
	void *arg;
	int64_t len;
	const unsigned char *p_mem;	/* store_src_mem: the bytes (borrowed) */
	int p_fd;			/* store_src_fd: the file (borrowed) */
	int64_t p_base;			/* store_src_fd: first offset */
	int64_t p_pos;			/* bytes consumed so far */
	/*
	 * Hex SHA-256 of the bytes this source gives, when the caller took
	 * it on the way (NULL: unknown): a store that needs a digest of a
	 * part uses it instead of hashing the bytes again (fs: part ETags).
	 */
	const char *sha256;
};

/* A source over len bytes in memory (borrowed until the call returns). */
void store_src_mem(struct store_src *src, const void *data, size_t len);
/*
 * A source over len bytes of fd from offset off (pread: rewindable, the fd's
 * own offset is not moved); len -1 means "to the end of the file" and is
 * resolved with fstat. Returns 0 or CAIRN_EIO.
 */
int store_src_fd(struct store_src *src, int fd, int64_t off, int64_t len,
	struct cairn_err *err);

/*
 * Sink for get: write() consumes n bytes, returns 0, or < 0 to stop (the
 * call then fails with CAIRN_ECANCELED).
 */
typedef int (*store_write_fn)(void *arg, const void *buf, size_t n);

/* What head and list report about one object. */
struct store_stat {
	uint64_t size;
	char etag[STORE_ETAG_MAX];	/* without quotes; "" when unknown */
	int64_t mtime_us;		/* last modified, microseconds since epoch */
};

/* One list result: an object, or a common prefix (when a delimiter was given). */
struct store_entry {
	const char *key;		/* borrowed for the callback's duration */
	int is_prefix;			/* 1: a common prefix, stat is zero */
	struct store_stat stat;
};
/* Return 0 to go on, non-zero to stop listing (store_list then returns 0). */
typedef int (*store_list_fn)(void *arg, const struct store_entry *e);

/* One stored part of a multipart upload. */
struct store_part {
	int number;			/* 1..STORE_PART_MAX_NUMBER */
	char etag[STORE_ETAG_MAX];	/* without quotes */
	uint64_t size;
};
/* Called in ascending part order; return non-zero to stop. */
typedef int (*store_part_fn)(void *arg, const struct store_part *p);

/* ---- opening ---------------------------------------------------------- */

/*
 * Open the local-directory store rooted at root. With create, missing
 * directories are made (0700); otherwise a missing root is CAIRN_ENOTFOUND.
 * A root that is not a readable, writable directory is CAIRN_EIO naming it;
 * one on a read-only filesystem opens (store_check() then answers
 * CAIRN_EREADONLY). Writes that fail because the filesystem is read-only
 * are retried with backoff for up to readonly_wait_us (store_open_fs:
 * STORE_FS_READONLY_WAIT_US; 0: fail at once), then fail with CAIRN_EIO
 * saying how long they waited (store_fs.c). *out is owned by the caller
 * (store_free).
 */
#define STORE_FS_READONLY_WAIT_US	(120LL * 1000 * 1000)
int store_open_fs(const char *root, int create, struct store **out,
	struct cairn_err *err);
int store_open_fs_wait(const char *root, int create, int64_t readonly_wait_us,
	struct store **out, struct cairn_err *err);

/* S3 settings. Strings are copied by store_open_s3. */
struct store_s3_config {
	const char *bucket;		/* required */
	const char *endpoint;		/* "http(s)://host[:port]"; NULL: AWS for region */
	const char *region;		/* NULL: $AWS_REGION, $AWS_DEFAULT_REGION, us-east-1 */
	int force_path_style;		/* 1: endpoint/bucket/key; 0: bucket.host/key
					   (IP addresses and localhost always use path style) */
	const char *ca_file;		/* PEM bundle file to trust, or NULL */
	const char *ca_pem;		/* PEM bundle text to trust, or NULL */
	int insecure_skip_verify;	/* do not verify TLS peers (tests only) */
	const char *credentials;	/* AWS-format credentials file *content*, or NULL */
	const char *credentials_file;	/* path of one, or NULL */
	const char *profile;		/* NULL: $AWS_PROFILE, else "default" */
	long timeout_ms;		/* connect+stall timeout of one request; 0: 30 s */
	int max_attempts;		/* per request, including the first; 0: 6 */
	int64_t backoff_base_ms;	/* first retry delay; 0: 100 ms (cap 5 s) */
	/*
	 * Storage-side encryption, sent on every write (and, for SSE-C, every
	 * read) and signed: sse "AES256" (SSE-S3) or "aws:kms" (SSE-KMS, with
	 * sse_kms_key_id or the bucket's default key), or NULL; sse_c_key a
	 * 32-byte customer key (SSE-C; not with sse), or NULL.
	 */
	const char *sse;
	const char *sse_kms_key_id;
	const unsigned char *sse_c_key;
};

/*
 * Open an S3 bucket. Credentials come from cfg->credentials, else
 * cfg->credentials_file, else $AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY
 * (+ $AWS_SESSION_TOKEN), else $AWS_SHARED_CREDENTIALS_FILE or
 * ~/.aws/credentials, with profile cfg->profile / $AWS_PROFILE / default.
 * No request is made: bad credentials text is CAIRN_EINVAL here, a missing
 * bucket is found by the first call (store_check() checks at once).
 */
int store_open_s3(const struct store_s3_config *cfg, struct store **out,
	struct cairn_err *err);

struct crypt_keyring;
/*
 * Client-side encryption: wrap inner in a store that encrypts every object
 * it writes with kr's current key and decrypts what it reads (one segment
 * per put and per multipart part; format in storage/crypt.h and
 * docs/backup-format.md). Takes ownership of inner and kr. A kr without a
 * current key only reads (writes fail with CAIRN_EINVAL). Reads fail with
 * CAIRN_EPROTO naming the part when any stored byte was changed, and for
 * an object without the encryption header unless allow_plain. head and
 * list report stored sizes; mpu_list_parts plaintext sizes.
 */
int store_open_crypt(struct store *inner, struct crypt_keyring *kr,
	int allow_plain, struct store **out, struct cairn_err *err);
/*
 * The key id new objects are encrypted with; NULL if s does not encrypt
 * (or has no key to write with).
 */
const char *store_encryption_key_id(const struct store *s);
/*
 * The secret for naming content stored in s without revealing it (the
 * hostpath mover's keyed chunk hashes): a key derived (crypt.h
 * crypt_keyring_derive(), info "cairn content names v1") from s's key
 * key_id, NULL meaning the one new objects are encrypted with. 1 with out
 * filled; 0 when s does not encrypt (out untouched: plain hashes are
 * fine there); CAIRN_ENOTFOUND when s has no such key.
 */
int store_content_key(const struct store *s, const char *key_id,
	unsigned char out[32], struct cairn_err *err);

/* Free a store (NULL is fine). No call may be in flight. */
void store_free(struct store *s);

/* "fs:/path" or "s3://bucket (endpoint)"; borrowed, lives with the store. */
const char *store_describe(const struct store *s);
/* "fs" or "s3". */
const char *store_kind(const struct store *s);
/*
 * The smallest multipart part (all but the last) the store accepts at
 * completion: 0 for a local directory, STORE_PART_MIN otherwise (S3, and
 * any layer over another store, which is not looked through).
 */
size_t store_part_min(const struct store *s);

/*
 * Check that the store is reachable and usable: the directory exists and is
 * writable, or the bucket exists and the credentials are accepted (one
 * ListObjectsV2 of at most one key). The error is the clear one to show.
 * A directory on a read-only filesystem is CAIRN_EREADONLY at once (a
 * probe does not wait; writes do, see store_open_fs).
 */
int store_check(struct store *s, struct cairn_err *err);

/* ---- objects ---------------------------------------------------------- */

/*
 * Store the bytes of src under key, replacing any object there. The object
 * appears whole or not at all. On S3, a source longer than
 * STORE_S3_PUT_PART with unknown length goes up as a multipart upload of
 * STORE_S3_PUT_PART-sized buffered parts. etag_out (may be NULL) gets the
 * new ETag.
 */
int store_put(struct store *s, const char *key, struct store_src *src,
	char etag_out[STORE_ETAG_MAX], const struct store_progress *prog,
	struct cairn_err *err);
/* Convenience: store len bytes of memory. */
int store_put_mem(struct store *s, const char *key, const void *data,
	size_t len, struct cairn_err *err);
/* Store len bytes of memory gzipped at zlib level (Velero's .gz files). */
int store_put_gzip(struct store *s, const char *key, const void *data,
	size_t len, int level, struct cairn_err *err);

/*
 * Stream the object into sink: bytes [off, off+len) (len -1: to the end).
 * A range past the end is CAIRN_EINVAL. Missing key: CAIRN_ENOTFOUND.
 * On S3 a dropped download is resumed with a Range request, so sink sees
 * every byte exactly once.
 */
int store_get(struct store *s, const char *key, uint64_t off, int64_t len,
	store_write_fn sink, void *arg, const struct store_progress *prog,
	struct cairn_err *err);
/*
 * Convenience: the whole object into *data (owned, NUL-terminated), refused
 * with CAIRN_ETOOBIG past cap bytes.
 */
int store_get_mem(struct store *s, const char *key, size_t cap, char **data,
	size_t *len, struct cairn_err *err);

/*
 * Convenience: the whole object gunzipped (one or more gzip members) into
 * *data (owned, NUL-terminated); CAIRN_ETOOBIG past cap bytes gunzipped,
 * CAIRN_EPROTO when it is not whole gzip data (a cut or a changed byte).
 */
int store_get_gunzip(struct store *s, const char *key, size_t cap,
	char **data, size_t *len, struct cairn_err *err);
/*
 * The object gunzipped (one or more gzip members), streamed into sink.
 * CAIRN_EPROTO when it is not whole gzip data; a sink that returns -1
 * stops the get with CAIRN_ECANCELED (err says the sink refused).
 */
int store_get_gunzip_to(struct store *s, const char *key,
	store_write_fn sink, void *arg, struct cairn_err *err);

/* Size, ETag and mtime of key; CAIRN_ENOTFOUND when missing. */
int store_head(struct store *s, const char *key, struct store_stat *st,
	struct cairn_err *err);

/*
 * List keys that start with prefix ("" for all), in byte order. With
 * delimiter "/" keys with a further '/' after the prefix are rolled up into
 * one common-prefix entry each ("backups/b1/"). Pages are fetched as needed
 * (S3: ListObjectsV2 with continuation tokens).
 */
int store_list(struct store *s, const char *prefix, const char *delimiter,
	store_list_fn fn, void *arg, struct cairn_err *err);

/* Delete key. A missing key is success (as on S3). */
int store_delete(struct store *s, const char *key, struct cairn_err *err);
/* Delete every key starting with prefix (non-empty); *n (may be NULL) counts them. */
int store_delete_prefix(struct store *s, const char *prefix, size_t *n,
	struct cairn_err *err);

/* ---- multipart uploads ------------------------------------------------ */

/*
 * Start a multipart upload of key; *upload_id is owned by the caller. The
 * id survives the process: another process can list its parts, add more,
 * complete or abort it (fs: files under <root>/.cairn-uploads/<id>/).
 */
int store_mpu_create(struct store *s, const char *key, char **upload_id,
	struct cairn_err *err);
/*
 * Store part `number` (1..10000) from src; re-sending a number replaces
 * that part. etag_out gets its ETag (needed for complete). Sizes below
 * STORE_PART_MIN are accepted here but refused by S3 at complete unless it
 * is the last part.
 */
int store_mpu_put_part(struct store *s, const char *key, const char *upload_id,
	int number, struct store_src *src, char etag_out[STORE_ETAG_MAX],
	const struct store_progress *prog, struct cairn_err *err);
/* The parts stored so far, ascending. Unknown upload: CAIRN_ENOTFOUND. */
int store_mpu_list_parts(struct store *s, const char *key,
	const char *upload_id, store_part_fn fn, void *arg,
	struct cairn_err *err);
/*
 * Join parts (ascending numbers, ETags as returned) into the object key,
 * atomically; the upload is gone afterwards. etag_out may be NULL.
 * Safe to repeat: when the upload is gone because an earlier complete of
 * the same parts went through (its reply lost, or its caller gone before
 * it recorded it), the object at key is recognised and this succeeds: by
 * store_mpu_joined() when the part ETags are MD5s, else (SSE-KMS, SSE-C)
 * by the sum of the parts' sizes (so give `size` when known).
 */
int store_mpu_complete(struct store *s, const char *key, const char *upload_id,
	const struct store_part *parts, size_t nparts,
	char etag_out[STORE_ETAG_MAX], struct cairn_err *err);
/* Drop the upload and its parts. Unknown upload: CAIRN_ENOTFOUND. */
int store_mpu_abort(struct store *s, const char *key, const char *upload_id,
	struct cairn_err *err);

/*
 * Whether key holds exactly the join of parts (each part's size and MD5
 * ETag, in order): 1 yes, 0 no (missing, other size or content, or an
 * ETag that is not an MD5 so there is nothing to compare), < 0 could not
 * tell (the error). Recognises an upload that was completed by a process
 * that died before it could record that: from the S3 multipart ETag when
 * the store gives one, else by reading the object back.
 */
int store_mpu_joined(struct store *s, const char *key,
	const struct store_part *parts, size_t nparts, struct cairn_err *err);

/* ---- helpers ---------------------------------------------------------- */

/* 0 if key is a valid key (rules above), else CAIRN_EINVAL with why. */
int store_key_check(const char *key, struct cairn_err *err);

#endif
