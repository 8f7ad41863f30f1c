/*
 * buf.h: growable byte buffers with a hard size cap (like curl's dynbuf).
 *
 * Every buffer filled from the network or a file is created with a named
 * cap; appending past it fails with CAIRN_ETOOBIG and leaves the buffer as
 * it was, never crashes. The data is always NUL-terminated so text can be
 * used in place. A zeroed struct buf is not valid: call buf_init().
 */
#ifndef CAIRN_BUF_H
#define CAIRN_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include "base/err.h"

/* Named caps used across modules. */
#define CAIRN_CAP_API_BODY	(64u << 20)	/* one buffered API reply */
#define CAIRN_CAP_S3_XML	(8u << 20)	/* one S3 XML reply */
#define CAIRN_CAP_TAR_ENTRY	(32u << 20)	/* one tar entry read on restore */
#define CAIRN_CAP_HTTP_REQ	(16u << 10)	/* one web request's headers */
#define CAIRN_CAP_FILE		(16u << 20)	/* a config file read whole */

struct buf {
	char *data;	/* owned; NUL-terminated; NULL until first append */
	size_t len;	/* bytes used, excluding the NUL */
	size_t alloc;	/* bytes allocated */
	size_t cap;	/* the most len may ever be */
};

void buf_init(struct buf *b, size_t cap);
/* Append n bytes; CAIRN_ETOOBIG (buffer unchanged) past the cap. */
int buf_append(struct buf *b, const void *p, size_t n);
int buf_puts(struct buf *b, const char *s);
int buf_putc(struct buf *b, char c);
int buf_printf(struct buf *b, const char *fmt, ...) CAIRN_PRINTF(2, 3);
int buf_vprintf(struct buf *b, const char *fmt, va_list ap);
/* Text view, "" when empty; valid until the next change. */
const char *buf_cstr(const struct buf *b);
/* Hand over the data (NUL-terminated, caller frees); buffer becomes empty. */
char *buf_take(struct buf *b, size_t *len);
/* Drop the first n bytes (consumed input). */
void buf_consume(struct buf *b, size_t n);
void buf_reset(struct buf *b);		/* len = 0, keeps memory */
void buf_free(struct buf *b);		/* releases memory, keeps cap */

/*
 * Read the whole file path, at most cap bytes. On success *out (owned,
 * NUL-terminated, "" for an empty file) and *len (may be NULL). Errors,
 * with "<what> <path>: ..." in err: CAIRN_ENOTFOUND (no such file),
 * CAIRN_EIO (cannot open or read), CAIRN_ETOOBIG (larger than cap); *out
 * is NULL then.
 */
int buf_read_file(const char *path, size_t cap, const char *what, char **out,
	size_t *len, struct cairn_err *err);

#endif
