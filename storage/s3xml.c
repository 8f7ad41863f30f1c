/*
 * s3xml.c: the bounded XML reader of S3 replies (see s3xml.h).
 *
 * One pass over the bytes with an explicit element stack; no recursion, no
 * allocation proportional to anything but the current element's text
 * (capped). The generic reader emits OPEN / LEAF / CLOSE events with the
 * element path; the shape readers below pick the fields they need.
 */
#include "config.h"
#include "storage/s3xml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/mem.h"

#define NAME_MAX_LEN 255

struct xstate {
	const char *d;
	size_t n, pos;
	int depth;
	char names[S3XML_MAX_DEPTH][NAME_MAX_LEN + 1];	/* qualified names */
	int has_child[S3XML_MAX_DEPTH];
	char path[S3XML_MAX_DEPTH * (NAME_MAX_LEN + 1) + 1];
	size_t path_off[S3XML_MAX_DEPTH];	/* path length before each level */
	struct buf text;
};

static int
bad(struct cairn_err *err, struct xstate *x, const char *why)
{
	return cairn_err_set(err, CAIRN_EPROTO,
	    "malformed XML reply at byte %zu: %s", x->pos, why);
}

static int
is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static int
starts(struct xstate *x, const char *s)
{
	size_t l = strlen(s);

	return x->n - x->pos >= l && memcmp(x->d + x->pos, s, l) == 0;
}

/* Position of s at or after pos, or (size_t)-1. */
static size_t
find(struct xstate *x, const char *s)
{
	size_t l = strlen(s), i;

	for (i = x->pos; i + l <= x->n; i++)
		if (memcmp(x->d + i, s, l) == 0)
			return i;
	return (size_t)-1;
}

static int
put_utf8(struct buf *b, unsigned long cp)
{
	char u[4];
	size_t n;

	if (cp < 0x80) {
		u[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (char)(0xC0 | (cp >> 6));
		u[1] = (char)(0x80 | (cp & 0x3F));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (char)(0xE0 | (cp >> 12));
		u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		u[2] = (char)(0x80 | (cp & 0x3F));
		n = 3;
	} else {
		u[0] = (char)(0xF0 | (cp >> 18));
		u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
		u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
		u[3] = (char)(0x80 | (cp & 0x3F));
		n = 4;
	}
	return buf_append(b, u, n);
}

/* Decode one reference at x->pos ('&'); appends to text. */
static int
entity(struct xstate *x, struct cairn_err *err)
{
	static const struct { const char *name; char c; } named[] = {
		{ "amp;", '&' }, { "lt;", '<' }, { "gt;", '>' },
		{ "quot;", '"' }, { "apos;", '\'' },
	};
	unsigned long cp = 0;
	size_t i, digits = 0;
	int hexa;
	char c;

	x->pos++;	/* '&' */
	for (i = 0; i < sizeof named / sizeof named[0]; i++) {
		if (starts(x, named[i].name)) {
			x->pos += strlen(named[i].name);
			return buf_putc(&x->text, named[i].c) < 0 ?
			    bad(err, x, "text too long") : 0;
		}
	}
	if (!starts(x, "#"))
		return bad(err, x, "unknown entity");
	x->pos++;
	hexa = starts(x, "x");
	if (hexa)
		x->pos++;
	for (; x->pos < x->n && x->d[x->pos] != ';'; x->pos++) {
		c = x->d[x->pos];
		if (c >= '0' && c <= '9')
			cp = cp * (hexa ? 16 : 10) + (unsigned long)(c - '0');
		else if (hexa && c >= 'a' && c <= 'f')
			cp = cp * 16 + (unsigned long)(c - 'a' + 10);
		else if (hexa && c >= 'A' && c <= 'F')
			cp = cp * 16 + (unsigned long)(c - 'A' + 10);
		else
			return bad(err, x, "bad character reference");
		if (++digits > 8)
			return bad(err, x, "character reference too long");
	}
	if (x->pos >= x->n || digits == 0)
		return bad(err, x, "unterminated character reference");
	x->pos++;	/* ';' */
	if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return bad(err, x, "character reference out of range");
	return put_utf8(&x->text, cp) < 0 ? bad(err, x, "text too long") : 0;
}

static const char *
local_name(const char *q)
{
	const char *c = strchr(q, ':');

	return c ? c + 1 : q;
}

static int
open_tag(struct xstate *x, s3xml_fn fn, void *arg, struct cairn_err *err)
{
	size_t start, l, off;
	char quote = 0;
	int selfclose = 0;
	const char *ln;

	x->pos++;	/* '<' */
	start = x->pos;
	while (x->pos < x->n && !is_space(x->d[x->pos]) &&
	    x->d[x->pos] != '>' && x->d[x->pos] != '/')
		x->pos++;
	l = x->pos - start;
	if (l == 0 || l > NAME_MAX_LEN)
		return bad(err, x, "bad element name");
	for (; x->pos < x->n; x->pos++) {
		if (quote) {
			if (x->d[x->pos] == quote)
				quote = 0;
			continue;
		}
		if (x->d[x->pos] == '"' || x->d[x->pos] == '\'')
			quote = x->d[x->pos];
		else if (x->d[x->pos] == '<')
			return bad(err, x, "'<' inside a tag");
		else if (x->d[x->pos] == '>')
			break;
	}
	if (x->pos >= x->n)
		return bad(err, x, "unterminated tag");
	selfclose = x->d[x->pos - 1] == '/' && !quote;
	x->pos++;	/* '>' */
	if (x->depth >= S3XML_MAX_DEPTH)
		return bad(err, x, "nested too deep");
	if (x->depth > 0)
		x->has_child[x->depth - 1] = 1;
	memcpy(x->names[x->depth], x->d + start, l);
	x->names[x->depth][l] = '\0';
	if (memchr(x->names[x->depth], '\0', l) != NULL)
		return bad(err, x, "NUL in a name");
	x->has_child[x->depth] = 0;
	off = strlen(x->path);
	x->path_off[x->depth] = off;
	ln = local_name(x->names[x->depth]);
	snprintf(x->path + off, sizeof x->path - off, "%s%s", off ? "/" : "", ln);
	x->depth++;
	buf_reset(&x->text);
	if (fn(arg, S3XML_OPEN, x->path, NULL, 0) != 0)
		return CAIRN_ECANCELED;
	if (selfclose) {
		x->depth--;
		if (fn(arg, S3XML_LEAF, x->path, "", 0) != 0 ||
		    fn(arg, S3XML_CLOSE, x->path, NULL, 0) != 0)
			return CAIRN_ECANCELED;
		x->path[x->path_off[x->depth]] = '\0';
	}
	return 0;
}

static int
close_tag(struct xstate *x, s3xml_fn fn, void *arg, struct cairn_err *err)
{
	size_t start, l, end;
	int top;

	x->pos += 2;	/* "</" */
	start = x->pos;
	while (x->pos < x->n && !is_space(x->d[x->pos]) && x->d[x->pos] != '>')
		x->pos++;
	end = x->pos;
	while (x->pos < x->n && is_space(x->d[x->pos]))
		x->pos++;
	if (x->pos >= x->n || x->d[x->pos] != '>')
		return bad(err, x, "unterminated closing tag");
	x->pos++;
	l = end - start;
	if (x->depth == 0)
		return bad(err, x, "closing tag without an open element");
	top = x->depth - 1;
	if (l != strlen(x->names[top]) || memcmp(x->d + start, x->names[top], l) != 0)
		return bad(err, x, "mismatched closing tag");
	if (!x->has_child[top]) {
		if (x->text.data == NULL)
			buf_append(&x->text, "", 0);
		if (fn(arg, S3XML_LEAF, x->path, buf_cstr(&x->text), x->text.len) != 0)
			return CAIRN_ECANCELED;
	}
	if (fn(arg, S3XML_CLOSE, x->path, NULL, 0) != 0)
		return CAIRN_ECANCELED;
	x->depth--;
	x->path[x->path_off[x->depth]] = '\0';
	buf_reset(&x->text);
	return 0;
}

int
s3xml_parse(const char *doc, size_t len, s3xml_fn fn, void *arg,
    struct cairn_err *err)
{
	struct xstate *x;
	size_t e, seen_root = 0;
	int rc = 0;
	char c;

	if (len > CAIRN_CAP_S3_XML)
		return cairn_err_set(err, CAIRN_ETOOBIG,
		    "XML reply of %zu bytes is over the %u byte cap", len,
		    CAIRN_CAP_S3_XML);
	x = xcalloc(1, sizeof *x);
	x->d = doc;
	x->n = len;
	buf_init(&x->text, S3XML_MAX_TEXT);
	if (starts(x, "\xEF\xBB\xBF"))
		x->pos = 3;
	while (rc == 0 && x->pos < x->n) {
		c = x->d[x->pos];
		if (c == '\0') {
			rc = bad(err, x, "NUL byte");
		} else if (c == '<') {
			if (starts(x, "<?")) {
				e = find(x, "?>");
				if (e == (size_t)-1)
					rc = bad(err, x, "unterminated declaration");
				else
					x->pos = e + 2;
			} else if (starts(x, "<!--")) {
				e = find(x, "-->");
				if (e == (size_t)-1)
					rc = bad(err, x, "unterminated comment");
				else
					x->pos = e + 3;
			} else if (starts(x, "<![CDATA[")) {
				x->pos += 9;
				e = find(x, "]]>");
				if (e == (size_t)-1 || x->depth == 0)
					rc = bad(err, x, "bad CDATA section");
				else if (buf_append(&x->text, x->d + x->pos,
				    e - x->pos) < 0)
					rc = bad(err, x, "text too long");
				else
					x->pos = e + 3;
			} else if (starts(x, "<!")) {
				rc = bad(err, x, "DOCTYPE and declarations are refused");
			} else if (starts(x, "</")) {
				rc = close_tag(x, fn, arg, err);
			} else {
				if (x->depth == 0 && seen_root++)
					rc = bad(err, x, "more than one root element");
				else
					rc = open_tag(x, fn, arg, err);
			}
		} else if (c == '&') {
			if (x->depth == 0)
				rc = bad(err, x, "text outside the root element");
			else
				rc = entity(x, err);
		} else {
			if (x->depth == 0 && !is_space(c))
				rc = bad(err, x, "text outside the root element");
			else if (x->depth > 0 && buf_putc(&x->text, c) < 0)
				rc = bad(err, x, "text too long");
			else
				x->pos++;
		}
	}
	if (rc == CAIRN_ECANCELED)
		cairn_err_set(err, rc, "XML reply reading stopped");
	else if (rc == 0 && (x->depth != 0 || !seen_root))
		rc = bad(err, x, x->depth ? "document ends inside an element" :
		    "no root element");
	buf_free(&x->text);
	free(x);
	return rc;
}

/* ---- shapes ----------------------------------------------------------- */

static void
copy_field(char *dst, size_t cap, const char *text)
{
	snprintf(dst, cap, "%s", text);
}

/* Strip the quotes S3 puts around ETags ("&quot;abc&quot;" or "\"abc\""). */
static void
copy_etag(char *dst, size_t cap, const char *t, size_t len)
{
	if (len >= 2 && t[0] == '"' && t[len - 1] == '"') {
		t++;
		len -= 2;
	}
	snprintf(dst, cap, "%.*s", (int)len, t);
}

struct err_ctx {
	struct s3xml_error *out;
	int is_error;
};

static int
err_cb(void *arg, enum s3xml_event ev, const char *path, const char *text,
    size_t len)
{
	struct err_ctx *c = arg;

	(void)len;
	if (ev == S3XML_OPEN && strcmp(path, "Error") == 0)
		c->is_error = 1;
	if (ev != S3XML_LEAF)
		return 0;
	if (strcmp(path, "Error/Code") == 0)
		copy_field(c->out->code, sizeof c->out->code, text);
	else if (strcmp(path, "Error/Message") == 0)
		copy_field(c->out->message, sizeof c->out->message, text);
	return 0;
}

int
s3xml_error(const char *doc, size_t len, struct s3xml_error *out)
{
	struct err_ctx c = { out, 0 };
	int rc;

	memset(out, 0, sizeof *out);
	rc = s3xml_parse(doc, len, err_cb, &c, NULL);
	if (rc < 0)
		return rc;
	return c.is_error;
}

struct leaf_ctx {
	const char *want;
	char *value;
};

static int
leaf_cb(void *arg, enum s3xml_event ev, const char *path, const char *text,
    size_t len)
{
	struct leaf_ctx *c = arg;

	if (ev == S3XML_LEAF && strcmp(path, c->want) == 0 && c->value == NULL)
		c->value = xstrndup(text, len);
	return 0;
}

int
s3xml_upload_id(const char *doc, size_t len, char **id, struct cairn_err *err)
{
	struct leaf_ctx c = { "InitiateMultipartUploadResult/UploadId", NULL };
	int rc;

	*id = NULL;
	rc = s3xml_parse(doc, len, leaf_cb, &c, err);
	if (rc < 0) {
		free(c.value);
		return rc;
	}
	if (c.value == NULL || *c.value == '\0' ||
	    strlen(c.value) >= 1024) {
		free(c.value);
		return cairn_err_set(err, CAIRN_EPROTO,
		    "reply to CreateMultipartUpload has no UploadId");
	}
	*id = c.value;
	return 0;
}

int
s3xml_complete_etag(const char *doc, size_t len, char *etag, size_t n,
    struct cairn_err *err)
{
	struct leaf_ctx c = { "CompleteMultipartUploadResult/ETag", NULL };
	int rc;

	rc = s3xml_parse(doc, len, leaf_cb, &c, err);
	if (rc == 0 && c.value == NULL)
		rc = cairn_err_set(err, CAIRN_EPROTO,
		    "reply to CompleteMultipartUpload has no ETag");
	if (rc == 0)
		copy_etag(etag, n, c.value, strlen(c.value));
	free(c.value);
	return rc;
}

struct list_ctx {
	s3xml_object_fn fn;
	void *arg;
	struct s3xml_object o;
	char *key, *etag, *lm;
	int truncated;
	char *token;
	int stopped;
};

static void
list_reset(struct list_ctx *c)
{
	FREE_NULL(c->key);
	FREE_NULL(c->etag);
	FREE_NULL(c->lm);
	memset(&c->o, 0, sizeof c->o);
}

static int
list_cb(void *arg, enum s3xml_event ev, const char *path, const char *text,
    size_t len)
{
	struct list_ctx *c = arg;
	int is_contents = strcmp(path, "ListBucketResult/Contents") == 0;
	int is_prefix = strcmp(path, "ListBucketResult/CommonPrefixes") == 0;

	if (ev == S3XML_OPEN && (is_contents || is_prefix)) {
		list_reset(c);
		return 0;
	}
	if (ev == S3XML_CLOSE && (is_contents || is_prefix)) {
		if (c->key == NULL)
			return 0;	/* no Key: skip the row */
		c->o.key = c->key;
		c->o.is_prefix = is_prefix;
		c->o.etag = c->etag ? c->etag : "";
		c->o.last_modified = c->lm ? c->lm : "";
		if (c->fn(c->arg, &c->o) != 0) {
			c->stopped = 1;
			return 1;
		}
		return 0;
	}
	if (ev != S3XML_LEAF)
		return 0;
	if (strcmp(path, "ListBucketResult/Contents/Key") == 0 ||
	    strcmp(path, "ListBucketResult/CommonPrefixes/Prefix") == 0) {
		free(c->key);
		c->key = xstrndup(text, len);
	} else if (strcmp(path, "ListBucketResult/Contents/Size") == 0) {
		c->o.size = strtoull(text, NULL, 10);
	} else if (strcmp(path, "ListBucketResult/Contents/ETag") == 0) {
		free(c->etag);
		c->etag = xmalloc(len + 1);
		copy_etag(c->etag, len + 1, text, len);
	} else if (strcmp(path, "ListBucketResult/Contents/LastModified") == 0) {
		free(c->lm);
		c->lm = xstrndup(text, len);
	} else if (strcmp(path, "ListBucketResult/IsTruncated") == 0) {
		c->truncated = strcmp(text, "true") == 0;
	} else if (strcmp(path, "ListBucketResult/NextContinuationToken") == 0) {
		free(c->token);
		c->token = xstrndup(text, len);
	}
	return 0;
}

int
s3xml_list_objects(const char *doc, size_t len, s3xml_object_fn fn, void *arg,
    int *truncated, char **next_token, struct cairn_err *err)
{
	struct list_ctx c;
	int rc;

	memset(&c, 0, sizeof c);
	c.fn = fn;
	c.arg = arg;
	*truncated = 0;
	*next_token = NULL;
	rc = s3xml_parse(doc, len, list_cb, &c, err);
	list_reset(&c);
	if (rc < 0) {
		free(c.token);
		return rc;
	}
	*truncated = c.truncated;
	*next_token = c.token;
	return 0;
}

struct parts_ctx {
	s3xml_part_fn fn;
	void *arg;
	struct s3xml_part p;
	char *etag;
	int truncated, marker;
};

static int
parts_cb(void *arg, enum s3xml_event ev, const char *path, const char *text,
    size_t len)
{
	struct parts_ctx *c = arg;
	int is_part = strcmp(path, "ListPartsResult/Part") == 0;
	long v;

	if (ev == S3XML_OPEN && is_part) {
		FREE_NULL(c->etag);
		memset(&c->p, 0, sizeof c->p);
		return 0;
	}
	if (ev == S3XML_CLOSE && is_part) {
		if (c->p.number < 1 || c->p.number > 10000 || c->etag == NULL)
			return 0;
		c->p.etag = c->etag;
		return c->fn(c->arg, &c->p);
	}
	if (ev != S3XML_LEAF)
		return 0;
	if (strcmp(path, "ListPartsResult/Part/PartNumber") == 0) {
		v = strtol(text, NULL, 10);
		c->p.number = v >= 1 && v <= 10000 ? (int)v : 0;
	} else if (strcmp(path, "ListPartsResult/Part/ETag") == 0) {
		free(c->etag);
		c->etag = xmalloc(len + 1);
		copy_etag(c->etag, len + 1, text, len);
	} else if (strcmp(path, "ListPartsResult/Part/Size") == 0) {
		c->p.size = strtoull(text, NULL, 10);
	} else if (strcmp(path, "ListPartsResult/IsTruncated") == 0) {
		c->truncated = strcmp(text, "true") == 0;
	} else if (strcmp(path, "ListPartsResult/NextPartNumberMarker") == 0) {
		v = strtol(text, NULL, 10);
		c->marker = v >= 0 && v <= 10000 ? (int)v : 0;
	}
	return 0;
}

int
s3xml_list_parts(const char *doc, size_t len, s3xml_part_fn fn, void *arg,
    int *truncated, int *next_marker, struct cairn_err *err)
{
	struct parts_ctx c;
	int rc;

	memset(&c, 0, sizeof c);
	c.fn = fn;
	c.arg = arg;
	rc = s3xml_parse(doc, len, parts_cb, &c, err);
	free(c.etag);
	*truncated = c.truncated;
	*next_marker = c.marker;
	return rc;
}

struct del_ctx {
	s3xml_delete_error_fn fn;
	void *arg;
	char *key, *code, *msg;
	size_t deleted;
};

static int
del_cb(void *arg, enum s3xml_event ev, const char *path, const char *text,
    size_t len)
{
	struct del_ctx *c = arg;
	int is_err = strcmp(path, "DeleteResult/Error") == 0;

	if (ev == S3XML_OPEN && is_err) {
		FREE_NULL(c->key);
		FREE_NULL(c->code);
		FREE_NULL(c->msg);
		return 0;
	}
	if (ev == S3XML_CLOSE && is_err)
		return c->fn(c->arg, c->key ? c->key : "", c->code ? c->code : "",
		    c->msg ? c->msg : "");
	if (ev == S3XML_CLOSE && strcmp(path, "DeleteResult/Deleted") == 0) {
		c->deleted++;
		return 0;
	}
	if (ev != S3XML_LEAF)
		return 0;
	if (strcmp(path, "DeleteResult/Error/Key") == 0) {
		free(c->key);
		c->key = xstrndup(text, len);
	} else if (strcmp(path, "DeleteResult/Error/Code") == 0) {
		free(c->code);
		c->code = xstrndup(text, len);
	} else if (strcmp(path, "DeleteResult/Error/Message") == 0) {
		free(c->msg);
		c->msg = xstrndup(text, len);
	}
	return 0;
}

int
s3xml_delete_result(const char *doc, size_t len, s3xml_delete_error_fn fn,
    void *arg, size_t *deleted, struct cairn_err *err)
{
	struct del_ctx c;
	int rc;

	memset(&c, 0, sizeof c);
	c.fn = fn;
	c.arg = arg;
	rc = s3xml_parse(doc, len, del_cb, &c, err);
	free(c.key);
	free(c.code);
	free(c.msg);
	if (deleted != NULL)
		*deleted = c.deleted;
	return rc;
}
