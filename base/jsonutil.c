/* jsonutil.c: dotted-path access to cJSON trees, see jsonutil.h. */
#include "config.h"
#include "base/jsonutil.h"
#include "base/buf.h"
#include "base/mem.h"
#include "base/util.h"

#include <stdarg.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Copy one path segment into seg; return pointer past it (or NULL at end). */
static const char *
next_seg(const char *p, char *seg, size_t segsz)
{
	const char *dot = strchr(p, '.');
	size_t n = dot ? (size_t)(dot - p) : strlen(p);

	if (n >= segsz)
		n = segsz - 1;
	memcpy(seg, p, n);
	seg[n] = '\0';
	return dot ? dot + 1 : NULL;
}

cJSON *
json_get(const cJSON *root, const char *path)
{
	char seg[256];
	const char *p = path;
	const cJSON *cur = root;

	/* one segment (a member of root): no copy (hot: items' names) */
	if (cur != NULL && strchr(path, '.') == NULL &&
	    strlen(path) < sizeof seg)
		return cJSON_IsObject(cur) ?
		    cJSON_GetObjectItemCaseSensitive(cur, path) : NULL;
	while (cur != NULL && p != NULL) {
		p = next_seg(p, seg, sizeof seg);
		if (!cJSON_IsObject(cur))
			return NULL;
		cur = cJSON_GetObjectItemCaseSensitive(cur, seg);
	}
	return (cJSON *)cur;
}

const char *
json_str(const cJSON *root, const char *path)
{
	const cJSON *n = json_get(root, path);

	return cJSON_IsString(n) ? n->valuestring : NULL;
}

const char *
json_str_or(const cJSON *root, const char *path, const char *def)
{
	const char *s = json_str(root, path);

	return s ? s : def;
}

int64_t
json_int(const cJSON *root, const char *path, int64_t def)
{
	const cJSON *n = json_get(root, path);

	if (!cJSON_IsNumber(n))
		return def;
	return (int64_t)n->valuedouble;
}

int
json_bool(const cJSON *root, const char *path, int def)
{
	const cJSON *n = json_get(root, path);

	if (cJSON_IsTrue(n))
		return 1;
	if (cJSON_IsFalse(n))
		return 0;
	return def;
}

cJSON *
json_ensure(cJSON *root, const char *path)
{
	char seg[256];
	const char *p = path;
	cJSON *cur = root;

	while (p != NULL) {
		cJSON *next;

		p = next_seg(p, seg, sizeof seg);
		next = cJSON_GetObjectItemCaseSensitive(cur, seg);
		if (!cJSON_IsObject(next)) {
			next = cJSON_CreateObject();
			if (cJSON_GetObjectItemCaseSensitive(cur, seg) != NULL)
				cJSON_ReplaceItemInObjectCaseSensitive(cur, seg, next);
			else
				cJSON_AddItemToObject(cur, seg, next);
		}
		cur = next;
	}
	return cur;
}

void
json_set_item(cJSON *root, const char *path, cJSON *item)
{
	const char *last = strrchr(path, '.');
	cJSON *parent = root;

	if (last != NULL) {
		char *head = xstrndup(path, (size_t)(last - path));

		parent = json_ensure(root, head);
		free(head);
		last++;
	} else {
		last = path;
	}
	if (cJSON_GetObjectItemCaseSensitive(parent, last) != NULL)
		cJSON_ReplaceItemInObjectCaseSensitive(parent, last, item);
	else
		cJSON_AddItemToObject(parent, last, item);
}

void
json_set_str(cJSON *root, const char *path, const char *value)
{
	json_set_item(root, path, cJSON_CreateString(value));
}

void
json_set_int(cJSON *root, const char *path, int64_t value)
{
	json_set_item(root, path, cJSON_CreateNumber((double)value));
}

void
json_set_bool(cJSON *root, const char *path, int value)
{
	json_set_item(root, path, cJSON_CreateBool(value));
}

void
json_delete(cJSON *root, const char *path)
{
	const char *last = strrchr(path, '.');
	cJSON *parent = root;

	if (last != NULL) {
		char *head = xstrndup(path, (size_t)(last - path));

		parent = json_get(root, head);
		free(head);
		last++;
	} else {
		last = path;
	}
	if (cJSON_IsObject(parent))
		cJSON_DeleteItemFromObjectCaseSensitive(parent, last);
}

static const char *
skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' ||
	    *p == '\t'))
		p++;
	return p;
}

/*
 * The first '"' or '\\' in [p, end), or end. A JSON scan spends most of
 * its time here (every key and value of every listed object): with SSE2
 * (every x86-64) 16 bytes are compared at once, otherwise 8 at a time in
 * a 64-bit word (bytes equal to '"' or '\\' found as zero bytes of the
 * word XOR the pattern), then byte by byte.
 */
static const char *
quote_or_backslash(const char *p, const char *end)
{
#if defined(__SSE2__)
	const __m128i dq = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\');

	while (end - p >= 16) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
		unsigned m = (unsigned)_mm_movemask_epi8(_mm_or_si128(
		    _mm_cmpeq_epi8(v, dq), _mm_cmpeq_epi8(v, bs)));

		if (m != 0)
			return p + __builtin_ctz(m);
		p += 16;
	}
#else
	const uint64_t ones = 0x0101010101010101ull;
	const uint64_t highs = 0x8080808080808080ull;

	while (end - p >= 8) {
		uint64_t w, a, b;

		memcpy(&w, p, 8);
		a = w ^ (ones * '"');
		b = w ^ (ones * '\\');
		if ((((a - ones) & ~a) | ((b - ones) & ~b)) & highs)
			break;		/* one of them is in these 8 */
		p += 8;
	}
#endif
	while (p < end && *p != '"' && *p != '\\')
		p++;
	return p;
}

/*
 * The closing quote of a string whose text starts at p (just past its
 * opening quote, or anywhere inside it not right after a backslash): the
 * first quote or backslash, where a backslash skips the byte it escapes
 * and the scan goes on after it. NULL if the string goes on past end;
 * *esc (if not NULL) then says whether the text ends in an unfinished
 * escape.
 */
const char *
json_string_end(const char *p, const char *end, int *esc)
{
	for (;;) {
		p = quote_or_backslash(p, end);
		if (p == end) {
			if (esc != NULL)
				*esc = 0;
			return NULL;
		}
		if (*p == '"')
			return p;
		/* a backslash: skip what it escapes */
		if (p + 1 == end) {
			if (esc != NULL)
				*esc = 1;
			return NULL;
		}
		p += 2;
	}
}

/* Past the string opening at p (a quote); NULL if it does not end. */
static const char *
skip_string(const char *p, const char *end)
{
	const char *q = json_string_end(p + 1, end, NULL);

	return q != NULL ? q + 1 : NULL;
}

/*
 * Past the value starting at p; NULL if it does not end before end.
 * *depth gets how deep its brackets nest.
 */
static const char *
skip_value(const char *p, const char *end, int *depth)
{
	int d = 0;

	*depth = 0;
	if (*p == '"')
		return skip_string(p, end);
	if (*p != '{' && *p != '[') {	/* number, true, false, null */
		while (p < end && *p != ',' && *p != '}' && *p != ']' &&
		    *p != ' ' && *p != '\n' && *p != '\r' && *p != '\t')
			p++;
		return p;
	}
	while (p < end) {
		if (*p == '"') {
			p = skip_string(p, end);
			if (p == NULL)
				return NULL;
			continue;
		}
		if (*p == '{' || *p == '[') {
			if (++d > *depth)
				*depth = d;
		} else if ((*p == '}' || *p == ']') && --d == 0) {
			return p + 1;
		}
		p++;
	}
	return NULL;
}

/* Nesting depth check before handing the text to cJSON. */
static int
too_deep(const char *p, size_t len)
{
	/* cJSON reads one value: that one's depth */
	return json_depth(p, len) > CAIRN_JSON_MAX_DEPTH;
}

static cJSON *
deep_fail(struct cairn_err *err)
{
	cairn_err_set(err, CAIRN_EINVAL, "JSON nests deeper than %d levels",
	    CAIRN_JSON_MAX_DEPTH);
	return NULL;
}

/*
 * Strings holding U+0000. cJSON decodes "\u0000" into a NUL byte and
 * its strings are C strings, so such a string would be cut there (a
 * restored object silently different from the backed-up one). Before
 * parsing, each "\u0000" escape becomes the escaped pair of U+10FFFF
 * (a noncharacter, called S here) followed by '0', and each S already in
 * the text (raw, or escaped in any case) gets a '1' after it; json_print
 * turns S '0' back into "\u0000" and S '1' into S. The mapping is
 * one-to-one, so every string comes back byte for byte; in the tree such
 * a string holds S '0' where the NUL was (names and label values never
 * hold NUL).
 */
#define NUL_S		"\xf4\x8f\xbf\xbf"	/* U+10FFFF in UTF-8 */
#define NUL_S_LEN	4
#define NUL_S_ESC	"\\udbff\\udfff"	/* its escaped surrogate pair */
#define NUL_S_ESC_LEN	12

/* The 4 hex digits at p (case-insensitive) are h (lower case)? */
static int
hex4_is(const char *p, const char *h)
{
	for (int i = 0; i < 4; i++) {
		char c = p[i];

		if (c >= 'A' && c <= 'F')
			c = (char)(c - 'A' + 'a');
		if (c != h[i])
			return 0;
	}
	return 1;
}

/*
 * Where the next part of text that json_parse must rewrite starts (a
 * "\u0000", or an S raw or escaped), or NULL. *what: 0 NUL escape, 1 raw
 * S, 2 escaped S. *raw caches the next raw S at or after p (NULL: none
 * left).
 */
static const char *
nul_next(const char *p, const char *end, const char **raw, int *what)
{
	const char *b, *lim;

	if (*raw != NULL && *raw < p)
		*raw = end - p >= NUL_S_LEN ? memmem(p, (size_t)(end - p),
		    NUL_S, NUL_S_LEN) : NULL;
	lim = *raw != NULL ? *raw : end;
	/* backslashes come in escapes of 2 or 6 bytes from the text's start */
	for (b = p; b < lim; b += 2) {
		b = memchr(b, '\\', (size_t)(lim - b));
		if (b == NULL)
			break;
		if (end - b >= 6 && b[1] == 'u' && hex4_is(b + 2, "0000")) {
			*what = 0;
			return b;
		}
		if (end - b >= NUL_S_ESC_LEN && b[1] == 'u' &&
		    hex4_is(b + 2, "dbff") && b[6] == '\\' && b[7] == 'u' &&
		    hex4_is(b + 8, "dfff")) {
			*what = 2;
			return b;
		}
	}
	*what = 1;
	return *raw;
}

/* data with the rewrites above, or NULL when it needs none. Owned. */
static char *
nul_encode(const char *data, size_t len, size_t *outlen)
{
	const char *p = data, *end = data + len, *q, *raw;
	struct buf b;
	int what;

	raw = len >= NUL_S_LEN ? memmem(data, len, NUL_S, NUL_S_LEN) : NULL;
	q = nul_next(p, end, &raw, &what);
	if (q == NULL)
		return NULL;
	buf_init(&b, SIZE_MAX);
	do {
		(void)buf_append(&b, p, (size_t)(q - p));
		if (what == 0) {
			(void)buf_puts(&b, NUL_S_ESC "0");
			p = q + 6;
		} else if (what == 1) {
			(void)buf_puts(&b, NUL_S "1");
			p = q + NUL_S_LEN;
		} else {
			(void)buf_append(&b, q, NUL_S_ESC_LEN);
			(void)buf_putc(&b, '1');
			p = q + NUL_S_ESC_LEN;
		}
	} while ((q = nul_next(p, end, &raw, &what)) != NULL);
	(void)buf_append(&b, p, (size_t)(end - p));
	return buf_take(&b, outlen);
}

/* json_parse() of text known not to nest too deep. */
static cJSON *
parse_shallow(const char *data, size_t len, struct cairn_err *err)
{
	const char *end = NULL;
	size_t elen = 0;
	char *enc = nul_encode(data, len, &elen);
	cJSON *j;

	j = cJSON_ParseWithLengthOpts(enc != NULL ? enc : data,
	    enc != NULL ? elen : len, &end, 0);
	if (j == NULL) {
		size_t off = end && end >= data ? (size_t)(end - data) : 0;

		if (enc != NULL)	/* near enough: shifted by the rewrites */
			off = end && end >= enc ? (size_t)(end - enc) : 0;
		cairn_err_set(err, CAIRN_EPROTO,
		    "JSON does not parse (near byte %zu of %zu)", off, len);
	}
	free(enc);
	return j;
}

cJSON *
json_parse(const char *data, size_t len, struct cairn_err *err)
{
	if (too_deep(data, len))
		return deep_fail(err);
	return parse_shallow(data, len, err);
}

/*
 * The members of a JSON object's text, one by one, without parsing them:
 * mi_first() at the opening brace, then each mi_next() gives a member's
 * key (as written, without the quotes) and value text.
 */
struct members {
	const char *p, *end;
	const char *key, *val;
	size_t klen, vlen;
	int vdepth;		/* how deep val nests */
	int closed;		/* the closing brace was read */
};

/* 0, or -1 if data is not an object. */
static int
mi_first(struct members *mi, const char *data, size_t len)
{
	memset(mi, 0, sizeof *mi);
	mi->end = data + len;
	mi->p = skip_ws(data, mi->end);
	if (mi->p == mi->end || *mi->p != '{')
		return -1;
	mi->p = skip_ws(mi->p + 1, mi->end);
	if (mi->p < mi->end && *mi->p == '}') {
		mi->p++;
		mi->closed = 1;
	}
	return 0;
}

/*
 * The next member's key, and where its value starts (mi->val): 1; 0 when
 * the object ended; -1 if malformed at mi->p.
 */
static int
mi_key(struct members *mi)
{
	const char *p = mi->p, *end = mi->end, *q;

	if (mi->closed)
		return 0;
	if (p == end || *p != '"' || (q = skip_string(p, end)) == NULL)
		return -1;
	mi->key = p + 1;
	mi->klen = (size_t)(q - 1 - mi->key);
	p = skip_ws(q, end);
	if (p == end || *p != ':')
		return mi->p = p, -1;
	mi->val = skip_ws(p + 1, end);
	if (mi->val == end)
		return mi->p = mi->val, -1;
	return 1;
}

/* The member's value ended before q: past it and what follows it. */
static int
mi_past(struct members *mi, const char *q)
{
	const char *p = skip_ws(q, mi->end);

	mi->vlen = (size_t)(q - mi->val);
	if (p < mi->end && *p == ',') {
		p = skip_ws(p + 1, mi->end);
	} else if (p < mi->end && *p == '}') {
		p++;
		mi->closed = 1;
	} else {
		return mi->p = p, -1;
	}
	mi->p = p;
	return 1;
}

/* Past the member's value, scanned (its length and depth noted). */
static int
mi_skip(struct members *mi)
{
	const char *q = skip_value(mi->val, mi->end, &mi->vdepth);

	if (q == NULL)
		return mi->p = mi->val, -1;
	return mi_past(mi, q);
}

/* 1: the next member is in mi; 0: the object ended; -1: malformed at mi->p. */
static int
mi_next(struct members *mi)
{
	int rc = mi_key(mi);

	return rc > 0 ? mi_skip(mi) : rc;
}

static int
mi_is(const struct members *mi, const char *key)
{
	return strlen(key) == mi->klen && memcmp(key, mi->key, mi->klen) == 0;
}

/*
 * The member's value, parsed: its depth is known from the scan. A short
 * string with no escape and no byte of NUL_S (names, namespaces: most of
 * what a list's caller asks for) is the bytes between its quotes, as
 * cJSON's parse would give them (skip_value checked where it ends),
 * without nul_encode's scans and the parser's set-up.
 */
static cJSON *
mi_parse(const struct members *mi, struct cairn_err *err)
{
	char s[256];
	size_t n = mi->vlen - 2;

	if (mi->vdepth > CAIRN_JSON_MAX_DEPTH)
		return deep_fail(err);
	if (mi->val[0] == '"' && mi->vlen >= 2 && n < sizeof s &&
	    memchr(mi->val + 1, '\\', n) == NULL &&
	    memchr(mi->val + 1, NUL_S[0], n) == NULL) {
		memcpy(s, mi->val + 1, n);
		s[n] = '\0';
		return cJSON_CreateString(s);
	}
	return parse_shallow(mi->val, mi->vlen, err);
}

/* The text of len bytes at data does not parse at at: NULL. */
static cJSON *
parse_fail(const char *at, const char *data, size_t len,
	struct cairn_err *err)
{
	cairn_err_set(err, CAIRN_EPROTO, "JSON does not parse (near byte %zu "
	    "of %zu)", (size_t)(at - data), len);
	return NULL;
}

static cJSON *
mi_fail(const struct members *mi, const char *data, size_t len,
	struct cairn_err *err)
{
	return parse_fail(mi->p, data, len, err);
}

/*
 * Is key the member in mi ("metadata", "deletionTimestamp<labels"), or a
 * path into it ("metadata.name": *rest = "name")?
 */
static int
mi_wanted(const struct members *mi, const char *key, const char **rest)
{
	if (mi->klen == 0 || key[0] != mi->key[0] ||
	    strncmp(key, mi->key, mi->klen) != 0 ||
	    memchr(mi->key, '\0', mi->klen) != NULL)
		return 0;
	if (key[mi->klen] == '\0' || key[mi->klen] == '<')
		*rest = NULL;
	else if (key[mi->klen] == '.')
		*rest = key + mi->klen + 1;
	else
		return 0;
	return 1;
}

/* A bit for names starting with c: lower-case letters, the rest share one. */
static uint32_t
first_bit(char c)
{
	return c >= 'a' && c <= 'z' ? (uint32_t)1 << (c - 'a') :
	    (uint32_t)1 << 31;
}

/* Is the member in mi one of the comma-separated names in list? */
static int
mi_in(const struct members *mi, const char *list)
{
	for (const char *p = list; *p != '\0'; ) {
		size_t n = strcspn(p, ",");

		if (n == mi->klen && memcmp(p, mi->key, n) == 0)
			return 1;
		p += n + (p[n] == ',');
	}
	return 0;
}

/*
 * The member in mi follows the place of the keys whose fence lists it:
 * they are missing, so read (bits in *got). How many were new.
 */
static size_t
mi_fences(const struct members *mi, const char *const *fence, size_t n,
	uint64_t *got)
{
	size_t met = 0;

	for (size_t k = 0; k < n; k++) {
		if (fence[k] == NULL || (*got & ((uint64_t)1 << k)) ||
		    !mi_in(mi, fence[k]))
			continue;
		*got |= (uint64_t)1 << k;
		met++;
	}
	return met;
}

/*
 * json_parse_members() of the object at data (len: as far as the text
 * goes, the object may end before). *endp: past its closing brace, or
 * NULL when it stopped once every required key was read.
 */
static cJSON *
members_parse(const char *data, size_t len, const char *const *keys,
	const char **endp, struct cairn_err *err)
{
	struct members mi;
	const char *sub[JSON_MEMBERS_MAX + 1], *rest, *key, *vend;
	const char *fence[64];		/* key k is missing past these */
	char name[128];
	size_t nsub, nkeys = 0, nmust = 0, nread = 0, nfence = 0, enough;
	uint64_t got = 0;		/* required keys whose member was read */
	uint32_t firsts = 0;		/* first_bit() of the fences' names */
	cJSON *obj, *item;
	int rc, whole;

	*endp = NULL;
	for (; keys[nkeys] != NULL; nkeys++) {
		const char *f = strpbrk(keys[nkeys], ".<");

		if (keys[nkeys][0] != '?')
			nmust++;
		if (nkeys < 64) {
			fence[nkeys] = f != NULL && *f == '<' &&
			    keys[nkeys][0] != '?' ? f + 1 : NULL;
			nfence += fence[nkeys] != NULL;
			for (f = fence[nkeys]; f != NULL; f = strchr(f, ',')) {
				if (*f == ',')
					f++;
				firsts |= first_bit(*f);
			}
		}
	}
	/* every required key read, the rest is not looked at (if counted) */
	enough = nmust > 0 && nmust <= 64 ? nmust : SIZE_MAX;
	if (mi_first(&mi, data, len) < 0)
		return mi_fail(&mi, data, len, err);
	obj = cJSON_CreateObject();
	while ((rc = mi_key(&mi)) > 0) {
		if (nfence > 0 && mi.klen > 0 &&
		    (firsts & first_bit(mi.key[0]))) {
			size_t met = mi_fences(&mi, fence, nkeys < 64 ? nkeys :
			    64, &got);

			nread += met;
			nfence -= met;
		}
		whole = 0;
		nsub = 0;
		for (size_t k = 0; k < nkeys && !whole; k++) {
			key = keys[k] + (keys[k][0] == '?');
			if (!mi_wanted(&mi, key, &rest))
				continue;
			if (key == keys[k] && k < 64 &&
			    !(got & ((uint64_t)1 << k))) {
				got |= (uint64_t)1 << k;
				nread++;
				nfence -= fence[k] != NULL;
			}
			if (rest == NULL)
				whole = 1;
			else if (nsub < JSON_MEMBERS_MAX)
				sub[nsub++] = rest;
		}
		if (!whole && nsub == 0 && nread == enough)
			return obj;	/* the fences did it: nothing more */
		if ((!whole && nsub == 0) || mi.klen >= sizeof name) {
			if ((rc = mi_skip(&mi)) < 0)
				break;
			continue;
		}
		sub[nsub] = NULL;
		memcpy(name, mi.key, mi.klen);
		name[mi.klen] = '\0';
		/*
		 * Only part of an object: parsed in the one scan that finds
		 * its end. Anything else whole.
		 */
		vend = NULL;
		if (!whole && mi.val[0] == '{') {
			item = members_parse(mi.val, (size_t)(mi.end - mi.val),
			    sub, &vend, err);
		} else if ((rc = mi_skip(&mi)) < 0) {
			break;
		} else {
			item = mi_parse(&mi, err);
		}
		if (item == NULL) {
			cairn_err_prefix(err, "member %s", name);
			cJSON_Delete(obj);
			return NULL;
		}
		cJSON_AddItemToObject(obj, name, item);
		if (nread == enough)
			return obj;
		if (vend != NULL)
			rc = mi_past(&mi, vend);
		else if (!whole && mi.val[0] == '{')
			rc = mi_skip(&mi);	/* it stopped inside */
		if (rc < 0)
			break;
	}
	if (rc == 0) {
		*endp = mi.p;
		return obj;
	}
	cJSON_Delete(obj);
	return mi_fail(&mi, data, len, err);
}

cJSON *
json_parse_members(const char *data, size_t len, const char *const *keys,
	struct cairn_err *err)
{
	const char *end = NULL;
	cJSON *obj = members_parse(data, len, keys, &end, err);

	if (obj == NULL || end == NULL || skip_ws(end, data + len) == data + len)
		return obj;
	cJSON_Delete(obj);
	return parse_fail(end, data, len, err);
}

cJSON *
json_parse_member(const char *data, size_t len, const char *key,
	struct cairn_err *err)
{
	struct members mi;
	int rc;

	if (mi_first(&mi, data, len) < 0)
		return mi_fail(&mi, data, len, err);
	while ((rc = mi_next(&mi)) > 0)
		if (mi_is(&mi, key))
			return mi_parse(&mi, err);
	if (rc < 0)
		return mi_fail(&mi, data, len, err);
	cairn_err_set(err, CAIRN_ENOTFOUND, "no member \"%s\"", key);
	return NULL;
}

char *
json_print(const cJSON *item)
{
	char *s = cJSON_PrintUnformatted(item), *q, *fixed;
	const char *p;
	struct buf b;
	size_t len;

	if (s == NULL)
		return xstrdup("null");
	p = s;
	if ((q = strstr(p, NUL_S)) != NULL) {
		/* undo parse_shallow's rewrites: S '0' -> \u0000, S '1' -> S */
		buf_init(&b, SIZE_MAX);
		do {
			(void)buf_append(&b, p, (size_t)(q - p));
			p = q + NUL_S_LEN;
			if (*p == '0') {
				(void)buf_puts(&b, "\\u0000");
				p++;
			} else {
				(void)buf_puts(&b, NUL_S);
				if (*p == '1')
					p++;
			}
		} while ((q = strstr(p, NUL_S)) != NULL);
		(void)buf_puts(&b, p);
		cJSON_free(s);
		s = buf_take(&b, NULL);
	}
	/*
	 * cJSON copies string bytes as they are: text from outside (a
	 * plugin's message) may hold invalid UTF-8, which an API server
	 * refuses or mangles. Only string contents can be non-ASCII, so
	 * replacing each bad byte by U+FFFD keeps the JSON well formed.
	 */
	len = strlen(s);
	if (str_utf8_valid(s, len))
		return s;
	fixed = str_utf8_fix(s, len);
	free(s);
	return fixed;
}

int
json_depth(const char *data, size_t len)
{
	const char *end = data + len, *p = skip_ws(data, end);
	int depth = 0;

	if (p < end)
		(void)skip_value(p, end, &depth);
	return depth;
}

void
json_add_msgf(cJSON *arr, int max, const char *fmt, ...)
{
	struct buf b;
	va_list ap;

	if (arr == NULL || (max > 0 && cJSON_GetArraySize(arr) >= max))
		return;
	buf_init(&b, 256);
	va_start(ap, fmt);
	(void)buf_vprintf(&b, fmt, ap);
	va_end(ap);
	cJSON_AddItemToArray(arr, cJSON_CreateString(buf_cstr(&b)));
	buf_free(&b);
}
