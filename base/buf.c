/* buf.c: size-capped growable buffers, see buf.h. */
#include "config.h"
#include "base/buf.h"
#include "base/mem.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
buf_init(struct buf *b, size_t cap)
{
	b->data = NULL;
	b->len = 0;
	b->alloc = 0;
	b->cap = cap;
}

static int
buf_reserve(struct buf *b, size_t n)
{
	size_t need, a;

	if (n > b->cap || b->len > b->cap - n)
		return CAIRN_ETOOBIG;
	need = b->len + n + 1;
	if (need <= b->alloc)
		return 0;
	a = b->alloc ? b->alloc : 64;
	while (a < need)
		a = a > ((size_t)-1) / 2 ? need : a * 2;
	if (a > b->cap + 1)
		a = b->cap + 1;
	if (a < need)
		a = need;
	b->data = xrealloc(b->data, a);
	b->alloc = a;
	return 0;
}

int
buf_append(struct buf *b, const void *p, size_t n)
{
	if (buf_reserve(b, n) < 0)
		return CAIRN_ETOOBIG;
	if (n > 0)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int
buf_puts(struct buf *b, const char *s)
{
	return buf_append(b, s, strlen(s));
}

int
buf_putc(struct buf *b, char c)
{
	return buf_append(b, &c, 1);
}

int
buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
	va_list cp;
	int n;

	va_copy(cp, ap);
	n = vsnprintf(NULL, 0, fmt, cp);
	va_end(cp);
	if (n < 0)
		return CAIRN_EINVAL;
	if (buf_reserve(b, (size_t)n) < 0)
		return CAIRN_ETOOBIG;
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return 0;
}

int
buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = buf_vprintf(b, fmt, ap);
	va_end(ap);
	return rc;
}

const char *
buf_cstr(const struct buf *b)
{
	return b->data ? b->data : "";
}

char *
buf_take(struct buf *b, size_t *len)
{
	char *p = b->data ? b->data : xstrdup("");

	if (len != NULL)
		*len = b->len;
	b->data = NULL;
	b->len = 0;
	b->alloc = 0;
	return p;
}

void
buf_consume(struct buf *b, size_t n)
{
	if (n >= b->len) {
		buf_reset(b);
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
	b->data[b->len] = '\0';
}

void
buf_reset(struct buf *b)
{
	b->len = 0;
	if (b->data != NULL)
		b->data[0] = '\0';
}

void
buf_free(struct buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = 0;
	b->alloc = 0;
}

int
buf_read_file(const char *path, size_t cap, const char *what, char **out,
	size_t *len, struct cairn_err *err)
{
	struct buf b;
	char tmp[8192];
	FILE *f;
	size_t n;
	int rc = 0;

	*out = NULL;
	f = fopen(path, "rbe");
	if (f == NULL)
		return cairn_err_errno(err, errno == ENOENT ? CAIRN_ENOTFOUND :
		    CAIRN_EIO, errno, "%s %s", what, path);
	buf_init(&b, cap);
	while (rc == 0 && (n = fread(tmp, 1, sizeof tmp, f)) > 0)
		if (buf_append(&b, tmp, n) < 0)
			rc = cairn_err_set(err, CAIRN_ETOOBIG, "%s %s: larger "
			    "than %zu bytes", what, path, cap);
	if (rc == 0 && ferror(f))
		rc = cairn_err_errno(err, CAIRN_EIO, errno, "%s %s", what,
		    path);
	fclose(f);
	if (rc < 0) {
		buf_free(&b);
		return rc;
	}
	*out = buf_take(&b, len);
	return 0;
}
