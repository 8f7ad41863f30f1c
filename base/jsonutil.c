/* jsonutil.c: dotted-path access to cJSON trees, see jsonutil.h. */
#include "config.h"
#include "base/jsonutil.h"
#include "base/mem.h"

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

/* Nesting depth check before handing the text to cJSON (strings skipped). */
static int
too_deep(const char *p, size_t len)
{
	int depth = 0, in_str = 0;

	for (size_t i = 0; i < len; i++) {
		char c = p[i];

		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = 0;
		} else if (c == '"') {
			in_str = 1;
		} else if (c == '{' || c == '[') {
			if (++depth > CAIRN_JSON_MAX_DEPTH)
				return 1;
		} else if (c == '}' || c == ']') {
			depth--;
		}
	}
	return 0;
}

cJSON *
json_parse(const char *data, size_t len, struct cairn_err *err)
{
	const char *end = NULL;
	cJSON *j;

	if (too_deep(data, len)) {
		cairn_err_set(err, CAIRN_EINVAL,
		    "JSON nests deeper than %d levels", CAIRN_JSON_MAX_DEPTH);
		return NULL;
	}
	j = cJSON_ParseWithLengthOpts(data, len, &end, 0);
	if (j == NULL) {
		size_t off = end && end >= data ? (size_t)(end - data) : 0;

		cairn_err_set(err, CAIRN_EPROTO,
		    "JSON does not parse (near byte %zu of %zu)", off, len);
		return NULL;
	}
	return j;
}

char *
json_print(const cJSON *item)
{
	char *s = cJSON_PrintUnformatted(item);

	if (s == NULL)
		s = xstrdup("null");
	return s;
}
