/*
 * describe_store.c: what `backup describe` and `restore describe` read
 * from object storage: the files an item really has there (a listing, so
 * describe never names a key that was not written) and its resource list
 * (--details), printed as Velero's describe --details prints it.
 */
#include "config.h"
#include "cmd/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/jsonutil.h"
#include "base/mem.h"
#include "base/util.h"
#include "cmd/output.h"
#include "storage/store.h"

#define DS_CAP_FILES		1000		/* files listed under one item */
#define DS_CAP_RESLIST		(256u << 20)	/* a resource list, gunzipped */

static int
file_entry(void *arg, const struct store_entry *e)
{
	cJSON *a = arg, *o;

	if (cJSON_GetArraySize(a) >= DS_CAP_FILES)
		return 1;
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "key", e->key);
	cJSON_AddNumberToObject(o, "size", (double)e->stat.size);
	cJSON_AddItemToArray(a, o);
	return 0;
}

int
cli_stored_files(struct store *s, const char *dir, cJSON **out,
    struct cairn_err *err)
{
	cJSON *a = cJSON_CreateArray();
	int rc;

	*out = NULL;
	rc = store_list(s, dir, NULL, file_entry, a, err);
	if (rc < 0) {
		cJSON_Delete(a);
		return rc;
	}
	*out = a;
	return 0;
}

void
cli_print_files(FILE *f, const cJSON *files)
{
	static const char *const hdr[] = { "  KEY", "SIZE", NULL };
	struct out_table *t = out_table_new(hdr);
	const cJSON *e;

	cJSON_ArrayForEach(e, files) {
		char key[1100], sz[32];
		struct buf b;

		buf_init(&b, 1024);
		str_escape_text(&b, json_str_or(e, "key", ""));
		snprintf(key, sizeof key, "  %s", buf_cstr(&b));
		buf_free(&b);
		fmt_bytes((uint64_t)json_int(e, "size", 0), sz);
		out_table_row(t, (const char *const[]){ key, sz });
	}
	if (out_table_rows(t) == 0)
		fprintf(f, "  <none>\n");
	else
		out_table_print(t, f);
	out_table_free(t);
}

int
cli_resource_list(struct store *s, const char *key, cJSON **out,
    struct cairn_err *err)
{
	char *text = NULL;
	size_t len = 0;
	int rc;

	*out = NULL;
	rc = store_get_gunzip(s, key, DS_CAP_RESLIST, &text, &len, err);
	if (rc < 0)
		return rc;
	*out = json_parse(text, len, err);
	free(text);
	if (*out == NULL || !cJSON_IsObject(*out)) {
		cJSON_Delete(*out);
		*out = NULL;
		return cairn_err_set(err, CAIRN_EPROTO, "%s: not a resource "
		    "list", key);
	}
	return 0;
}

void
cli_print_resource_list(FILE *f, const cJSON *rl)
{
	const cJSON *kind, *it;
	struct buf b;

	buf_init(&b, 64u << 10);
	fprintf(f, "\nResource List:\n");
	if (cJSON_GetArraySize(rl) == 0)
		fprintf(f, "  <none>\n");
	cJSON_ArrayForEach(kind, rl) {
		buf_reset(&b);
		str_escape_text(&b, kind->string != NULL ? kind->string : "");
		fprintf(f, "  %s: (%d)\n", buf_cstr(&b),
		    cJSON_GetArraySize(kind));
		cJSON_ArrayForEach(it, kind) {
			if (!cJSON_IsString(it))
				continue;
			buf_reset(&b);
			str_escape_text(&b, it->valuestring);
			fprintf(f, "    - %s\n", buf_cstr(&b));
		}
	}
	buf_free(&b);
}

int
cli_print_describe(enum out_format fmt, const char *kind, const cJSON *obj,
    const char *key2, const cJSON *v2, cJSON *vols, const cJSON *rl)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	cJSON *doc = cJSON_CreateObject();
	int rc;

	cJSON_AddItemReferenceToObject(doc, kind, (cJSON *)obj);
	if (v2 != NULL)
		cJSON_AddItemReferenceToObject(doc, key2, (cJSON *)v2);
	if (vols != NULL)
		cJSON_AddItemToObject(doc, "volumes", vols);
	if (rl != NULL)
		cJSON_AddItemReferenceToObject(doc, "resourceList", (cJSON *)rl);
	rc = out_print_doc(stdout, fmt, doc, &err) < 0 ?
	    cli_fail("%s", err.msg) : CLI_EXIT_OK;
	cJSON_Delete(doc);
	return rc;
}
