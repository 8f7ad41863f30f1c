/*
 * err.h: cairn's one error convention.
 *
 * Every fallible function returns 0 on success or a negative enum cairn_rc
 * value. Detail goes into a caller-owned `struct cairn_err` (which may be
 * NULL when the caller only wants the code). The message lives inside the
 * struct, so there is nothing to free and nothing to leak on any path.
 *
 *     struct cairn_err err = CAIRN_ERR_INIT;
 *     if (journal_open(path, &j, &err) < 0)
 *         fatal("%s", err.msg);
 *
 * cairn_err_set() returns the code it stored, so `return cairn_err_set(...)`
 * is the idiom; cairn_err_prefix() adds context on the way up
 * ("opening journal /x: disk full").
 */
#ifndef CAIRN_ERR_H
#define CAIRN_ERR_H

#include <stddef.h>

enum cairn_rc {
	CAIRN_OK = 0,
	CAIRN_EFAIL = -1,	/* generic failure, see message */
	CAIRN_EINVAL = -2,	/* bad input: flag, spec, file content */
	CAIRN_ENOTFOUND = -3,	/* object, key or file does not exist */
	CAIRN_EEXIST = -4,	/* already exists */
	CAIRN_ECONFLICT = -5,	/* optimistic-concurrency conflict (409) */
	CAIRN_EGONE = -6,	/* resource version or token expired (410) */
	CAIRN_EIO = -7,		/* local I/O error (disk, fsync, full) */
	CAIRN_ETOOBIG = -8,	/* a size cap was reached */
	CAIRN_ETIMEOUT = -9,	/* deadline passed */
	CAIRN_ENET = -10,	/* connection failed, reset, TLS error */
	CAIRN_EAUTH = -11,	/* 401/403, bad credentials */
	CAIRN_EPROTO = -12,	/* peer sent something malformed */
	CAIRN_EFENCED = -13,	/* ownership of an item was lost: stop now */
	CAIRN_ECANCELED = -14,	/* shutdown or caller asked to stop */
	CAIRN_EUNSUPPORTED = -15, /* not supported by this peer or backend */
	CAIRN_EBUSY = -16,	/* locked, rate limited, try later */
	CAIRN_ESERVER = -17,	/* peer reported an internal error (5xx) */
	CAIRN_EREADONLY = -18,	/* target may not be written (a ReadOnly location) */
};

#define CAIRN_ERR_MSG_MAX 1024

struct cairn_err {
	int code;			/* last enum cairn_rc stored, 0 if none */
	char msg[CAIRN_ERR_MSG_MAX];	/* NUL-terminated human-readable text */
};

#define CAIRN_ERR_INIT { 0, { 0 } }

#if defined(__GNUC__)
#define CAIRN_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CAIRN_PRINTF(a, b)
#endif

/* Store code and message in err (may be NULL); returns code. */
int cairn_err_set(struct cairn_err *err, int code, const char *fmt, ...)
	CAIRN_PRINTF(3, 4);
/* Prepend "context: " to err's message; keeps the code. Returns err->code. */
int cairn_err_prefix(struct cairn_err *err, const char *fmt, ...)
	CAIRN_PRINTF(2, 3);
/* Store code with the message of errno value errnum appended. */
int cairn_err_errno(struct cairn_err *err, int code, int errnum,
	const char *fmt, ...) CAIRN_PRINTF(4, 5);
void cairn_err_clear(struct cairn_err *err);
/* Copy src into dst (dst may be NULL); returns src->code. */
int cairn_err_copy(struct cairn_err *dst, const struct cairn_err *src);
/* Short fixed name of a code: "conflict", "not found"... */
const char *cairn_strerror(int code);

#endif
