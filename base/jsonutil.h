/*
 * jsonutil.h: borrowed access into cJSON trees by dotted path, and a few
 * builders. Returned pointers are BORROWED from the tree: valid until the
 * tree is freed or that node is changed. Paths are "metadata.name",
 * "status.claim.holder"; a key containing a dot cannot be addressed (use
 * cJSON_GetObjectItemCaseSensitive directly for label keys).
 */
#ifndef CAIRN_JSONUTIL_H
#define CAIRN_JSONUTIL_H

#include <stdint.h>
#include <cjson/cJSON.h>
#include "base/err.h"

#define CAIRN_JSON_MAX_DEPTH 64	/* deeper documents are refused */

/* Node at path, or NULL. */
cJSON *json_get(const cJSON *root, const char *path);
/* String at path, or NULL when absent or not a string. Borrowed. */
const char *json_str(const cJSON *root, const char *path);
/* String at path or def. */
const char *json_str_or(const cJSON *root, const char *path, const char *def);
/* Number at path as int64, or def. */
int64_t json_int(const cJSON *root, const char *path, int64_t def);
/* Boolean at path, or def. */
int json_bool(const cJSON *root, const char *path, int def);

/*
 * Get the object at path, creating empty objects on the way (replacing
 * non-objects). Borrowed.
 */
cJSON *json_ensure(cJSON *root, const char *path);
/* Set (replace) a string / number / bool / item at path. item is taken. */
void json_set_str(cJSON *root, const char *path, const char *value);
void json_set_int(cJSON *root, const char *path, int64_t value);
void json_set_bool(cJSON *root, const char *path, int value);
void json_set_item(cJSON *root, const char *path, cJSON *item);
void json_delete(cJSON *root, const char *path);

/*
 * Parse len bytes of untrusted JSON: refuses documents nested deeper than
 * CAIRN_JSON_MAX_DEPTH or not parsing, with a message naming what. Owned
 * result, NULL on error.
 */
cJSON *json_parse(const char *data, size_t len, struct cairn_err *err);
/* Compact text, owned (free()). */
char *json_print(const cJSON *item);

#endif
