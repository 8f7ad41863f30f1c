/*
 * codec.h: the text encodings several modules read or write, done once:
 * base64 (through libcrypto's EVP_EncodeBlock/EVP_DecodeBlock) and YAML
 * to cJSON (through libyaml), for kubeconfigs, Secrets, CA bundles,
 * credentials files and install manifests.
 *
 * Threading: no shared state; call from any thread.
 */
#ifndef CAIRN_CODEC_H
#define CAIRN_CODEC_H

#include <stddef.h>
#include <cjson/cJSON.h>
#include "base/err.h"

/* Standard base64 of len bytes, NUL-terminated, no line breaks. Owned. */
char *codec_b64_encode(const void *data, size_t len);

/*
 * Decode standard base64 text; whitespace (space, tab, CR, LF) is
 * ignored, padding is required. On success *out (owned) holds *len bytes
 * plus a NUL (so text can be used in place); len may be NULL.
 * CAIRN_EINVAL when s is not base64 (nothing left but whitespace
 * included), CAIRN_ETOOBIG when it would decode to more than max bytes;
 * *out is NULL then.
 */
int codec_b64_decode(const char *s, size_t max, char **out, size_t *len);

/*
 * Plain YAML scalars: CODEC_YAML_STRINGS keeps every one a string except
 * an empty one, "null" and "~" (JSON null) -- what a kubeconfig reader
 * wants, which parses booleans itself; CODEC_YAML_TYPED reads them as
 * YAML 1.2's core schema does: null, true/false and integers (up to 15
 * digits) too, as Kubernetes manifests mean them. Quoted scalars are
 * always strings. A key given twice: the last one wins.
 */
enum codec_yaml { CODEC_YAML_STRINGS, CODEC_YAML_TYPED };

/*
 * The first document of YAML text as cJSON (owned); an empty text is an
 * empty object. NULL on a YAML error ("<what>: YAML error at line L
 * column C: ...") or YAML that JSON cannot hold (a non-scalar key,
 * nesting deeper than CAIRN_JSON_MAX_DEPTH, aliases that expand to more
 * than 16 times the document's own nodes plus 10000), CAIRN_EINVAL in
 * err.
 */
cJSON *codec_yaml_doc(const char *data, size_t len, enum codec_yaml mode,
	const char *what, struct cairn_err *err);

/*
 * Append every document of a YAML stream ("---" separated) to the cJSON
 * array arr. Errors as codec_yaml_doc(); the documents before the bad one
 * stay appended.
 */
int codec_yaml_stream(const char *data, size_t len, enum codec_yaml mode,
	const char *what, cJSON *arr, struct cairn_err *err);

#endif
