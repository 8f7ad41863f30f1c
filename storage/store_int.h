/*
 * store_int.h: what a storage backend implements (private to storage/).
 * store.c checks keys and arguments before calling in, so backends see only
 * valid keys, part numbers in range and non-NULL required pointers.
 */
#ifndef CAIRN_STORE_INT_H
#define CAIRN_STORE_INT_H

#include "base/util.h"
#include "storage/store.h"

struct store_ops {
	const char *kind;
	void (*free)(struct store *s);
	int (*check)(struct store *s, struct cairn_err *err);
	int (*put)(struct store *s, const char *key, struct store_src *src,
	    char *etag, const struct store_progress *prog, struct cairn_err *err);
	int (*get)(struct store *s, const char *key, uint64_t off, int64_t len,
	    store_write_fn sink, void *arg, const struct store_progress *prog,
	    struct cairn_err *err);
	int (*head)(struct store *s, const char *key, struct store_stat *st,
	    struct cairn_err *err);
	int (*list)(struct store *s, const char *prefix, const char *delim,
	    store_list_fn fn, void *arg, struct cairn_err *err);
	int (*del)(struct store *s, const char *key, struct cairn_err *err);
	/* optional: delete n keys in batches; NULL: del() one by one */
	int (*del_many)(struct store *s, char *const *keys, size_t n,
	    size_t *deleted, struct cairn_err *err);
	int (*mpu_create)(struct store *s, const char *key, char **id,
	    struct cairn_err *err);
	int (*mpu_put_part)(struct store *s, const char *key, const char *id,
	    int number, struct store_src *src, char *etag,
	    const struct store_progress *prog, struct cairn_err *err);
	int (*mpu_list_parts)(struct store *s, const char *key, const char *id,
	    store_part_fn fn, void *arg, struct cairn_err *err);
	int (*mpu_complete)(struct store *s, const char *key, const char *id,
	    const struct store_part *parts, size_t n, char *etag,
	    struct cairn_err *err);
	int (*mpu_abort)(struct store *s, const char *key, const char *id,
	    struct cairn_err *err);
	/* optional: store_mpu_joined() for a layer over another store */
	int (*mpu_joined)(struct store *s, const char *key,
	    const struct store_part *parts, size_t n, struct cairn_err *err);
};

/* Every backend's struct starts with this. */
struct store {
	const struct store_ops *ops;
	char *desc;			/* store_describe() */
};

/* Helpers shared by the backends (store.c). */
/*
 * Sleep us between two tries: 0, or CAIRN_ECANCELED (err says why, after
 * "what") when the process is stopping (store_set_process_stop()).
 */
int store_retry_sleep(int64_t us, const char *what, struct cairn_err *err);
ssize_t store_src_read(struct store_src *src, void *buf, size_t n);
int store_src_rewind(struct store_src *src);
void store_progress_report(const struct store_progress *prog, uint64_t done,
	int64_t total);
/* Lower-case hex of n bytes into out (2n+1 bytes): base/util.h's. */
#define store_hex str_hex
/*
 * S3's ETag of a multipart object from its parts' ETags (32 hex digits
 * each): "<hex MD5 of the ETags as bytes>-<n>". -1 when an ETag is not
 * 32 hex digits.
 */
int store_mpu_etag(const struct store_part *parts, size_t n,
	char out[STORE_ETAG_MAX]);

#endif
