/*
 * archive_read.h: safe, streaming reading of a backup tarball (.tar.gz).
 *
 * The restore side of tarparts.h. A `struct tarread` pulls compressed bytes
 * from a source (the storage get stream, a memory buffer, a file) through
 * libarchive (gzip filter, tar formats only) and hands out entries one at a
 * time. Nothing is ever written to the local filesystem: entry names are
 * only strings to compare.
 *
 * What the reader refuses, naming the entry each time:
 *   - per entry (the entry is marked bad, reading goes on): absolute
 *     paths, `..` or empty segments, hard and symbolic links, devices,
 *     fifos, sockets, directories (a warning: they carry nothing), names
 *     over TARREAD_PATH_MAX, data over the entry cap, JSON that does not
 *     parse or nests deeper than CAIRN_JSON_MAX_DEPTH (tarread_json());
 *   - for the whole stream (sticky, fatal): input that is not gzip,
 *     truncated or corrupt gzip or tar, more than the total cap of
 *     uncompressed bytes, or a compression ratio over the ratio cap once
 *     ratio_min bytes were expanded (a gzip bomb), a source that stalls
 *     past its timeout or fails.
 * Multi-member gzip (what tarparts writes) is one stream.
 *
 * Bounded work: data of refused or unread entries is drained in blocks
 * with the caps checked between blocks, never skipped blindly, so a
 * hostile header cannot make the reader expand unbounded data.
 *
 * Threading: one reader is used by one thread. tarread_src_store() runs
 * the storage download in a helper thread of its own (see there).
 */
#ifndef CAIRN_ARCHIVE_READ_H
#define CAIRN_ARCHIVE_READ_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <cjson/cJSON.h>

#include "base/buf.h"
#include "base/err.h"

struct tarread;
struct store;

#define TARREAD_PATH_MAX	1024		/* longest entry name accepted */
#define TARREAD_WHY_MAX		256
/* Defaults of struct tarread_opts (0 there means these). */
#define CAIRN_CAP_TAR_TOTAL	(64ull << 30)	/* uncompressed bytes of one archive */
#define CAIRN_CAP_TAR_RATIO	200u		/* uncompressed / compressed */
#define CAIRN_CAP_TAR_RATIO_MIN	(32ull << 20)	/* ratio checked past this many bytes */
#define TARREAD_STALL_US	(120ll * 1000000) /* no byte from the source for this long */

/*
 * A pull source of compressed bytes. read() points *p at up to some bytes
 * it owns (valid until the next read or close) and returns their count,
 * 0 at the end, or a negative enum cairn_rc with err filled. close() (may
 * be NULL) frees the source; called once by tarread_free().
 */
struct tarread_src {
	ssize_t (*read)(void *arg, const void **p, struct cairn_err *err);
	void (*close)(void *arg);
	void *arg;
};

struct tarread_opts {
	uint64_t entry_cap;	/* 0: CAIRN_CAP_TAR_ENTRY */
	uint64_t total_cap;	/* 0: CAIRN_CAP_TAR_TOTAL */
	unsigned ratio_cap;	/* 0: CAIRN_CAP_TAR_RATIO */
	uint64_t ratio_min;	/* 0: CAIRN_CAP_TAR_RATIO_MIN */
	const atomic_int *stop; /* non-zero: fail with CAIRN_ECANCELED */
};

enum tarread_verdict {
	TARREAD_OK = 0,		/* a regular file with a safe name */
	TARREAD_WARN,		/* ignored, worth a warning (directory) */
	TARREAD_BAD,		/* refused: an error naming the entry */
};

struct tarread_entry {
	const char *path;	/* borrowed until the next tarread_next(); escaped
				   text is in why when the name itself is bad */
	uint64_t size;		/* size from the header */
	uint64_t index;		/* 0-based ordinal in the archive */
	enum tarread_verdict verdict;
	char why[TARREAD_WHY_MAX]; /* "" when OK */
};

/* Source over len bytes of memory (borrowed for the reader's life). */
void tarread_src_mem(struct tarread_src *src, const void *data, size_t len);
/* Source over a file descriptor (borrowed; not closed). */
void tarread_src_fd(struct tarread_src *src, int fd);
/*
 * Source streaming key of store s: a helper thread runs store_get() and
 * hands chunks over through a small bounded queue (memory stays at a few
 * hundred KiB whatever the size). When no byte arrives for stall_us (0:
 * TARREAD_STALL_US) read() fails with CAIRN_ETIMEOUT; closing early makes
 * the download stop (its sink refuses more) and joins the thread. A
 * missing key shows as CAIRN_ENOTFOUND on the first read.
 */
int tarread_src_store(struct tarread_src *src, struct store *s,
	const char *key, int64_t stall_us, struct cairn_err *err);

/*
 * Open a reader over src (taken: closed by tarread_free, also when this
 * fails). opts may be NULL. Nothing is read yet. On failure *out is NULL.
 */
int tarread_open(struct tarread_src *src, const struct tarread_opts *opts,
	struct tarread **out, struct cairn_err *err);

/*
 * Move to the next entry, draining what is left of the current one.
 * Returns 1 with *e filled, 0 at the clean end of the archive, or a
 * negative code for a fatal stream error (err names the entry being read
 * or the last good one); after that every call returns the same error.
 */
int tarread_next(struct tarread *r, struct tarread_entry *e,
	struct cairn_err *err);

/*
 * Read the current entry's data (verdict OK only) into out (reset first,
 * NUL-terminated). CAIRN_ETOOBIG when over the entry cap (not fatal: the
 * stream goes on), other codes are fatal stream errors.
 */
int tarread_data(struct tarread *r, struct buf *out, struct cairn_err *err);
/*
 * tarread_data() then json_parse(): *out owned by the caller. Not JSON or
 * too deep: CAIRN_EINVAL naming the entry (not fatal).
 */
int tarread_json(struct tarread *r, cJSON **out, struct cairn_err *err);
/*
 * tarread_json() keeping the entry's bytes in text (reset first, reused
 * across entries by a caller that stores them: the bytes as they came
 * are the object, where printing the parsed tree again would cost as
 * much as the parse and round numbers to doubles).
 */
int tarread_json_text(struct tarread *r, cJSON **out, struct buf *text,
    struct cairn_err *err);

/* Compressed bytes taken from the source so far. */
uint64_t tarread_bytes_in(const struct tarread *r);
/* Uncompressed bytes produced so far. */
uint64_t tarread_bytes_out(const struct tarread *r);
/* Free; closes the source. NULL is fine. */
void tarread_free(struct tarread *r);

/*
 * Check one entry name as tarread_next() does: 0 and nothing in why, or
 * CAIRN_EINVAL with the reason in why (TARREAD_WHY_MAX bytes).
 */
int tarread_check_path(const char *path, char *why);

#endif
