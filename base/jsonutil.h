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

/*
 * Deeper documents are refused. One limit for everything cairn parses,
 * and the backup refuses objects deeper than it, so that whatever it
 * backs up a restore can read. cJSON itself stops at 1000 levels.
 */
#define CAIRN_JSON_MAX_DEPTH 512

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
 * Append the formatted string to the array arr, unless arr is NULL or
 * already holds max entries (max 0: no cap). For lists of validation
 * errors and warnings that must stay bounded whatever the input.
 */
void json_add_msgf(cJSON *arr, int max, const char *fmt, ...)
	CAIRN_PRINTF(3, 4);

/*
 * Parse len bytes of untrusted JSON: refuses documents nested deeper than
 * CAIRN_JSON_MAX_DEPTH or not parsing, with a message naming what. Owned
 * result, NULL on error.
 */
cJSON *json_parse(const char *data, size_t len, struct cairn_err *err);
/*
 * json_parse() of only some members of the object in data: the tree
 * holds the members named in keys (NULL-terminated), each whole
 * ("metadata") or only the parts a dotted path names ("metadata.name",
 * "metadata.labels": an object "metadata" holding just those, at most
 * JSON_MEMBERS_MAX paths into one member). The other members are stepped
 * over by a scan that follows only strings and brackets, and are neither
 * parsed nor checked. Once every key's member was read, the text after
 * it is not even scanned, so its end is not checked either: for text
 * whose brackets and strings are known to close, such as a list item
 * split by kube/stream.c. A key starting with '?' ("?kind") names a
 * member that may be missing and, when there, comes before the others:
 * the scan does not wait for it. A key with '<' and a comma-separated
 * list after its name ("metadata.deletionTimestamp<labels,managedFields")
 * names a member that may be missing and, when there, comes before each
 * member listed: once one of those is met, it is known to be missing.
 * For a caller that needs a few fields of large objects (a backup reads
 * names and labels and stores the text as it is, whatever managedFields,
 * annotations, spec and data hold). Owned result, NULL on error (not an
 * object, a member that does not parse or nests too deep).
 */
#define JSON_MEMBERS_MAX 16
cJSON *json_parse_members(const char *data, size_t len,
	const char *const *keys, struct cairn_err *err);
/*
 * json_parse() of the first top-level member named key of the object in
 * data, found without parsing the members before it; the rest of the text
 * is not looked at. NULL with CAIRN_ENOTFOUND if there is none.
 */
cJSON *json_parse_member(const char *data, size_t len, const char *key,
	struct cairn_err *err);
/*
 * Where the JSON string whose text starts at p ends: its closing quote,
 * or NULL if that is not before end (then *esc, if not NULL, is 1 when
 * the text ends inside an escape: the next byte is escaped). For scanners
 * of streams that must not parse; p must not follow a lone backslash.
 */
const char *json_string_end(const char *p, const char *end, int *esc);
/*
 * Compact text, owned (free()), always valid UTF-8 (bad bytes -> U+FFFD).
 * Strings that held U+0000 in the text json_parse() read come out as they
 * were ("\u0000").
 */
char *json_print(const cJSON *item);
/* How deep the first JSON value in data nests (0 for a scalar). */
int json_depth(const char *data, size_t len);

#endif
