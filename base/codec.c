/*
 * codec.c: base64 and YAML to cJSON, see codec.h. The work is the
 * libraries' (libcrypto, libyaml); this file only adapts them: whitespace
 * and padding for EVP_DecodeBlock (which counts '=' as zero bytes), and
 * libyaml's document tree to cJSON with a depth cap.
 */
#include "config.h"
#include "base/codec.h"

#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>
#include <yaml.h>

#include "base/jsonutil.h"
#include "base/mem.h"

/* ---- base64 ------------------------------------------------------------- */

char *
codec_b64_encode(const void *data, size_t len)
{
	char *out = xmalloc(4 * (len / 3 + 1) + 1);

	EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)data,
	    (int)len);
	return out;
}

int
codec_b64_decode(const char *s, size_t max, char **out, size_t *len)
{
	size_t n = 0, pad = 0, i;
	char *clean;
	unsigned char *dec;
	int r;

	*out = NULL;
	clean = xmalloc(strlen(s) + 1);
	for (i = 0; s[i] != '\0'; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
			clean[n++] = s[i];
	clean[n] = '\0';
	if (n == 0 || n % 4 != 0 || n / 4 * 3 > max + 2) {
		free(clean);
		return n / 4 * 3 > max + 2 ? CAIRN_ETOOBIG : CAIRN_EINVAL;
	}
	pad = (clean[n - 1] == '=') + (clean[n - 2] == '=');
	dec = xmalloc(n / 4 * 3 + 1);
	r = EVP_DecodeBlock(dec, (const unsigned char *)clean, (int)n);
	free(clean);
	if (r < 0 || (size_t)r < pad) {
		free(dec);
		return CAIRN_EINVAL;
	}
	if ((size_t)r - pad > max) {
		free(dec);
		return CAIRN_ETOOBIG;
	}
	dec[(size_t)r - pad] = '\0';
	if (len != NULL)
		*len = (size_t)r - pad;
	*out = (char *)dec;
	return 0;
}

/* ---- YAML to cJSON --------------------------------------------------------- */

/*
 * Aliases make a YAML document a graph: a 1 KB file of nested aliases
 * expands into gigabytes. The tree built from a document may have at most
 * YAML_EXPAND_RATIO times its own node count plus YAML_EXPAND_SLACK nodes
 * (kubeconfigs and manifests use few aliases, if any); past that it is
 * refused.
 */
#define YAML_EXPAND_RATIO	16
#define YAML_EXPAND_SLACK	10000

/* A plain scalar under YAML 1.2's core schema: null, bool, int, else string. */
static cJSON *
scalar_typed(const char *s, size_t len)
{
	size_t i = s[0] == '-' ? 1 : 0, j;

	if (strcmp(s, "true") == 0)
		return cJSON_CreateTrue();
	if (strcmp(s, "false") == 0)
		return cJSON_CreateFalse();
	if (i < len && len - i <= 15) {
		for (j = i; j < len; j++)
			if (s[j] < '0' || s[j] > '9')
				break;
		if (j == len)
			return cJSON_CreateNumber((double)strtoll(s, NULL, 10));
	}
	return cJSON_CreateString(s);
}

static cJSON *
scalar(const yaml_node_t *n, enum codec_yaml mode)
{
	const char *s = (const char *)n->data.scalar.value;
	size_t len = n->data.scalar.length;

	if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return cJSON_CreateString(s);
	if (len == 0 || strcmp(s, "null") == 0 || strcmp(s, "~") == 0)
		return cJSON_CreateNull();
	return mode == CODEC_YAML_TYPED ? scalar_typed(s, len) :
	    cJSON_CreateString(s);
}

static cJSON *
node_json(yaml_document_t *doc, yaml_node_t *n, enum codec_yaml mode,
	int depth, size_t *budget)
{
	yaml_node_item_t *it;
	yaml_node_pair_t *pr;
	yaml_node_t *k;
	cJSON *j = NULL, *v;

	if (n == NULL || depth > CAIRN_JSON_MAX_DEPTH || *budget == 0)
		return NULL;
	(*budget)--;
	switch (n->type) {
	case YAML_SCALAR_NODE:
		return scalar(n, mode);
	case YAML_SEQUENCE_NODE:
		j = cJSON_CreateArray();
		for (it = n->data.sequence.items.start;
		    it < n->data.sequence.items.top; it++) {
			v = node_json(doc, yaml_document_get_node(doc, *it),
			    mode, depth + 1, budget);
			if (v == NULL)
				goto fail;
			cJSON_AddItemToArray(j, v);
		}
		return j;
	case YAML_MAPPING_NODE:
		j = cJSON_CreateObject();
		for (pr = n->data.mapping.pairs.start;
		    pr < n->data.mapping.pairs.top; pr++) {
			k = yaml_document_get_node(doc, pr->key);
			if (k == NULL || k->type != YAML_SCALAR_NODE)
				goto fail;
			v = node_json(doc, yaml_document_get_node(doc,
			    pr->value), mode, depth + 1, budget);
			if (v == NULL)
				goto fail;
			cJSON_DeleteItemFromObjectCaseSensitive(j,
			    (const char *)k->data.scalar.value);
			cJSON_AddItemToObject(j, (const char *)k->data.scalar.value,
			    v);
		}
		return j;
	default:
		return NULL;
	}
fail:
	cJSON_Delete(j);
	return NULL;
}

/*
 * The next document of p: 1 with *out set (NULL root: *out NULL), 0 at
 * the end of the stream, < 0 on an error.
 */
static int
next_doc(yaml_parser_t *p, enum codec_yaml mode, const char *what,
	cJSON **out, struct cairn_err *err)
{
	yaml_document_t doc;
	yaml_node_t *root;
	size_t budget;

	*out = NULL;
	if (!yaml_parser_load(p, &doc))
		return cairn_err_set(err, CAIRN_EINVAL, "%s: YAML error at line "
		    "%zu column %zu: %s", what, p->problem_mark.line + 1,
		    p->problem_mark.column + 1,
		    p->problem != NULL ? p->problem : "unknown");
	root = yaml_document_get_root_node(&doc);
	if (root == NULL) {
		yaml_document_delete(&doc);
		return 0;
	}
	budget = YAML_EXPAND_RATIO * (size_t)(doc.nodes.top -
	    doc.nodes.start) + YAML_EXPAND_SLACK;
	*out = node_json(&doc, root, mode, 0, &budget);
	yaml_document_delete(&doc);
	if (*out == NULL && budget == 0)
		return cairn_err_set(err, CAIRN_EINVAL, "%s: YAML aliases expand "
		    "to more than %d times the document's size: refused", what,
		    YAML_EXPAND_RATIO);
	if (*out == NULL)
		return cairn_err_set(err, CAIRN_EINVAL, "%s: unsupported YAML "
		    "(a non-scalar key, or nested deeper than %d)", what,
		    CAIRN_JSON_MAX_DEPTH);
	return 1;
}

int
codec_yaml_stream(const char *data, size_t len, enum codec_yaml mode,
	const char *what, cJSON *arr, struct cairn_err *err)
{
	yaml_parser_t p;
	cJSON *j;
	int rc;

	if (!yaml_parser_initialize(&p))
		return cairn_err_set(err, CAIRN_EFAIL, "%s: libyaml init failed",
		    what);
	yaml_parser_set_input_string(&p, (const unsigned char *)data, len);
	while ((rc = next_doc(&p, mode, what, &j, err)) > 0)
		cJSON_AddItemToArray(arr, j);
	yaml_parser_delete(&p);
	return rc < 0 ? rc : 0;
}

cJSON *
codec_yaml_doc(const char *data, size_t len, enum codec_yaml mode,
	const char *what, struct cairn_err *err)
{
	yaml_parser_t p;
	cJSON *j = NULL;
	int rc;

	if (!yaml_parser_initialize(&p)) {
		cairn_err_set(err, CAIRN_EFAIL, "%s: libyaml init failed", what);
		return NULL;
	}
	yaml_parser_set_input_string(&p, (const unsigned char *)data, len);
	rc = next_doc(&p, mode, what, &j, err);
	yaml_parser_delete(&p);
	if (rc == 0)
		return cJSON_CreateObject();	/* empty text */
	return j;
}
