/*
 * stream.c: cutting JSON byte streams into values, whatever the chunks.
 *
 * The API server sends two kinds of large streams: a watch (one JSON object
 * per line, chunked by HTTP however it likes) and a List page (one object
 * with an "items" array that may hold thousands of objects). Neither is
 * parsed whole here: a small scanner that knows only strings, escapes and
 * bracket depth finds where each value ends, and cJSON parses that one
 * value. Only one value is buffered at a time (capped), so memory does not
 * grow with the size of the list.
 *
 * This is not a JSON parser: malformed text inside a value is left for
 * cJSON to reject. The scanner only guarantees that it never reads past
 * what it was given and never buffers past the cap.
 */
#include "config.h"
#include "kube/internal.h"
#include "base/jsonutil.h"
#include "base/mem.h"

#include <string.h>

void
jsplit_init(struct jsplit *s, size_t cap)
{
	memset(s, 0, sizeof *s);
	buf_init(&s->cur, cap);
}

void
jsplit_reset(struct jsplit *s)
{
	buf_reset(&s->cur);
	s->depth = 0;
	s->in_str = 0;
	s->esc = 0;
	s->active = 0;
	s->ws = 0;
	s->maxdepth = 0;
}

void
jsplit_free(struct jsplit *s)
{
	buf_free(&s->cur);
}

/*
 * Consume bytes of the value being collected (s->active) until it ends or
 * the input does. *used gets the bytes consumed, *done 1 when the value
 * is complete (its text is s->cur).
 */
static int
jsplit_scan(struct jsplit *s, const char *p, size_t n, size_t *used,
    int *done)
{
	size_t i = 0;

	*done = 0;
	while (i < n) {
		char c = p[i];

		if (s->in_str) {
			const char *q;

			if (s->esc) {	/* the byte after a chunk's last '\\' */
				s->esc = 0;
				i++;
				continue;
			}
			q = json_string_end(p + i, p + n, &s->esc);
			if (q == NULL) {
				i = n;
				break;
			}
			s->in_str = 0;
			i = (size_t)(q - p) + 1;
			continue;
		}
		switch (c) {
		case '"':
			s->in_str = 1;
			break;
		case '{':
		case '[':
			if (++s->depth > s->maxdepth)
				s->maxdepth = s->depth;
			break;
		case '}':
		case ']':
			s->depth--;
			if (s->depth == 0) {
				i++;
				if (buf_append(&s->cur, p, i) < 0)
					return CAIRN_ETOOBIG;
				*used = i;
				*done = 1;
				return 0;
			}
			break;
		case ' ':
		case '\n':
		case '\r':
		case '\t':
			s->ws = 1;	/* not compact: kube_list_text prints */
			break;
		default:
			break;
		}
		i++;
	}
	if (buf_append(&s->cur, p, n) < 0)
		return CAIRN_ETOOBIG;
	*used = n;
	return 0;
}

static int
is_ws(char c)
{
	return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

int
jsplit_feed(struct jsplit *s, const char *p, size_t n,
    int (*fn)(void *arg, const char *text, size_t len), void *arg)
{
	size_t used;
	int done, rc;

	while (n > 0) {
		if (!s->active) {
			if (is_ws(*p)) {
				p++;
				n--;
				continue;
			}
			if (*p != '{' && *p != '[')
				return CAIRN_EPROTO;
			s->active = 1;
			s->depth = 0;
			s->in_str = 0;
			s->esc = 0;
			s->ws = 0;
			s->maxdepth = 0;
			buf_reset(&s->cur);
		}
		rc = jsplit_scan(s, p, n, &used, &done);
		if (rc < 0)
			return rc;
		p += used;
		n -= used;
		if (done) {
			s->active = 0;
			rc = fn(arg, s->cur.data, s->cur.len);
			buf_reset(&s->cur);
			if (rc != 0)
				return rc;
		}
	}
	return 0;
}

/* ---- List envelopes ---- */

enum { LS_START, LS_ENV, LS_ITEMS_WAIT, LS_ITEMS, LS_DONE };

void
lsplit_init(struct lsplit *l, size_t item_cap)
{
	memset(l, 0, sizeof *l);
	jsplit_init(&l->item, item_cap);
	buf_init(&l->env, 1u << 20);
	buf_init(&l->key, 256);
}

void
lsplit_reset(struct lsplit *l)
{
	jsplit_reset(&l->item);
	buf_reset(&l->env);
	buf_reset(&l->key);
	l->state = LS_START;
	l->depth = 0;
	l->in_str = l->esc = 0;
	l->key_mode = 0;
	l->expect_key = 0;
	l->in_items = 0;
	l->items_seen = 0;
	l->api_version[0] = '\0';
	l->kind[0] = '\0';
}

void
lsplit_free(struct lsplit *l)
{
	jsplit_free(&l->item);
	buf_free(&l->env);
	buf_free(&l->key);
}

/* A depth-1 string ended: was it a key, or the value of apiVersion/kind? */
static void
lsplit_string_done(struct lsplit *l)
{
	const char *k;
	char *dst = NULL;
	size_t dstlen = 0;

	if (l->key_mode) {
		l->key_mode = 0;
		return;
	}
	k = buf_cstr(&l->key);
	if (strcmp(k, "apiVersion") == 0) {
		dst = l->api_version;
		dstlen = sizeof l->api_version;
	} else if (strcmp(k, "kind") == 0) {
		dst = l->kind;
		dstlen = sizeof l->kind;
	}
	if (dst != NULL) {
		/* The value's text is at the end of env: "....\"X\"". */
		const char *e = l->env.data + l->env.len - 1;	/* closing quote */
		const char *b = e - 1;

		while (b >= l->env.data && *b != '"')
			b--;
		if (b >= l->env.data && (size_t)(e - b - 1) < dstlen &&
		    memchr(b + 1, '\\', (size_t)(e - b - 1)) == NULL) {
			memcpy(dst, b + 1, (size_t)(e - b - 1));
			dst[e - b - 1] = '\0';
		}
	}
}

int
lsplit_feed(struct lsplit *l, const char *p, size_t n,
    int (*fn)(void *arg, const char *text, size_t len), void *arg)
{
	size_t used;
	int done, rc;

	while (n > 0) {
		char c = *p;

		switch (l->state) {
		case LS_START:
			if (is_ws(c))
				break;
			if (c != '{')
				return CAIRN_EPROTO;
			if (buf_putc(&l->env, c) < 0)
				return CAIRN_ETOOBIG;
			l->depth = 1;
			l->expect_key = 1;
			l->state = LS_ENV;
			break;
		case LS_ENV:
			if (buf_putc(&l->env, c) < 0)
				return CAIRN_ETOOBIG;
			if (l->in_str) {
				if (l->esc)
					l->esc = 0;
				else if (c == '\\')
					l->esc = 1;
				else if (c == '"') {
					l->in_str = 0;
					if (l->depth == 1)
						lsplit_string_done(l);
					break;
				}
				if (l->key_mode && buf_putc(&l->key, c) < 0)
					return CAIRN_ETOOBIG;
				break;
			}
			switch (c) {
			case '"':
				l->in_str = 1;
				if (l->depth == 1 && l->expect_key) {
					l->key_mode = 1;
					buf_reset(&l->key);
				}
				break;
			case ':':
				if (l->depth == 1) {
					l->expect_key = 0;
					if (strcmp(buf_cstr(&l->key), "items") == 0)
						l->state = LS_ITEMS_WAIT;
				}
				break;
			case ',':
				if (l->depth == 1)
					l->expect_key = 1;
				break;
			case '{':
			case '[':
				l->depth++;
				break;
			case '}':
			case ']':
				l->depth--;
				if (l->depth == 0)
					l->state = LS_DONE;
				break;
			default:
				break;
			}
			break;
		case LS_ITEMS_WAIT:
			if (is_ws(c))
				break;
			if (c != '[') {
				/* "items": null or similar: an ordinary value. */
				l->state = LS_ENV;
				continue;
			}
			if (buf_putc(&l->env, '[') < 0)
				return CAIRN_ETOOBIG;
			l->items_seen = 1;
			l->state = LS_ITEMS;
			break;
		case LS_ITEMS:
			if (!l->item.active) {
				if (is_ws(c) || c == ',')
					break;
				if (c == ']') {
					if (buf_putc(&l->env, ']') < 0)
						return CAIRN_ETOOBIG;
					l->state = LS_ENV;
					break;
				}
				if (c != '{' && c != '[')
					return CAIRN_EPROTO;
				l->item.active = 1;
				l->item.depth = 0;
				l->item.in_str = 0;
				l->item.esc = 0;
				l->item.ws = 0;
				l->item.maxdepth = 0;
				buf_reset(&l->item.cur);
			}
			rc = jsplit_scan(&l->item, p, n, &used, &done);
			if (rc < 0)
				return rc;
			p += used;
			n -= used;
			if (done) {
				l->item.active = 0;
				rc = fn(arg, l->item.cur.data, l->item.cur.len);
				buf_reset(&l->item.cur);
				if (rc != 0)
					return rc;
			}
			continue;
		case LS_DONE:
			if (!is_ws(c))
				return CAIRN_EPROTO;
			break;
		}
		p++;
		n--;
	}
	return 0;
}

cJSON *
lsplit_finish(struct lsplit *l, struct cairn_err *err)
{
	if (l->state != LS_DONE) {
		cairn_err_set(err, CAIRN_EPROTO,
		    "list reply ended before its closing brace");
		return NULL;
	}
	return json_parse(l->env.data, l->env.len, err);
}
