/*
 * s3xml.h: a small, bounded reader for the few XML replies S3 sends.
 *
 * There is no XML library among cairn's dependencies, and S3 replies are
 * simple: elements, text, an XML declaration, namespace attributes. This
 * reader handles exactly that (plus comments, CDATA, self-closing tags and
 * the five named and numeric character references) and refuses anything
 * else with CAIRN_EPROTO: documents over CAIRN_CAP_S3_XML, nesting deeper
 * than S3XML_MAX_DEPTH, names or texts over S3XML_MAX_TEXT, mismatched
 * tags, DOCTYPEs (no entity expansion of any kind). Fuzzed by
 * tests/fuzz/fuzz_s3xml.c.
 */
#ifndef CAIRN_S3XML_H
#define CAIRN_S3XML_H

#include <stddef.h>
#include <stdint.h>
#include "base/err.h"

#define S3XML_MAX_DEPTH 16
#define S3XML_MAX_TEXT (64u << 10)	/* one element's text or name, decoded */

enum s3xml_event {
	S3XML_OPEN,	/* element opened; text NULL */
	S3XML_LEAF,	/* element without child elements closed: text decoded */
	S3XML_CLOSE,	/* element closed (after LEAF for leaves) */
};

/*
 * Called per event with the path of local names from the root
 * ("ListBucketResult/Contents/Key"), and for LEAF the decoded text
 * (NUL-terminated, len bytes; may contain no NUL). Return non-zero to stop
 * (s3xml_parse then returns CAIRN_ECANCELED).
 */
typedef int (*s3xml_fn)(void *arg, enum s3xml_event ev, const char *path,
	const char *text, size_t len);

int s3xml_parse(const char *doc, size_t len, s3xml_fn fn, void *arg,
	struct cairn_err *err);

/* <Error><Code>..</Code><Message>..</Message></Error>; fields "" when absent. */
struct s3xml_error {
	char code[64];
	char message[512];
};
/* 1 if doc is an Error document (filled), 0 if not, < 0 if not XML. */
int s3xml_error(const char *doc, size_t len, struct s3xml_error *out);

/* InitiateMultipartUploadResult/UploadId, owned; CAIRN_EPROTO if absent. */
int s3xml_upload_id(const char *doc, size_t len, char **id,
	struct cairn_err *err);

/* CompleteMultipartUploadResult/ETag (quotes stripped) into etag (cap n). */
int s3xml_complete_etag(const char *doc, size_t len, char *etag, size_t n,
	struct cairn_err *err);

/* One ListBucketResult row: a Contents entry or a CommonPrefixes entry. */
struct s3xml_object {
	const char *key;	/* decoded */
	int is_prefix;
	uint64_t size;
	const char *etag;	/* quotes stripped, "" if absent */
	const char *last_modified;	/* RFC 3339 text, "" if absent */
};
typedef int (*s3xml_object_fn)(void *arg, const struct s3xml_object *o);
/*
 * ListObjectsV2: call fn per Contents / CommonPrefixes in document order;
 * *truncated and *next_token (owned, NULL when none) describe the next page.
 * fn returning non-zero stops with CAIRN_ECANCELED.
 */
int s3xml_list_objects(const char *doc, size_t len, s3xml_object_fn fn,
	void *arg, int *truncated, char **next_token, struct cairn_err *err);

struct s3xml_part {
	int number;
	const char *etag;	/* quotes stripped */
	uint64_t size;
};
typedef int (*s3xml_part_fn)(void *arg, const struct s3xml_part *p);
/* ListPartsResult: fn per Part; *truncated, *next_marker (0 if none). */
int s3xml_list_parts(const char *doc, size_t len, s3xml_part_fn fn, void *arg,
	int *truncated, int *next_marker, struct cairn_err *err);

/*
 * DeleteResult (DeleteObjects, quiet mode): fn per <Error> entry with its
 * Key, Code and Message; *deleted counts <Deleted> entries.
 */
typedef int (*s3xml_delete_error_fn)(void *arg, const char *key,
	const char *code, const char *message);
int s3xml_delete_result(const char *doc, size_t len, s3xml_delete_error_fn fn,
	void *arg, size_t *deleted, struct cairn_err *err);

#endif
