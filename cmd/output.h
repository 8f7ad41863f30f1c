/*
 * output.h: how CLI commands print objects: aligned tables for people,
 * JSON and YAML for programs, and kubectl-style ages.
 *
 *     struct out_table *t = out_table_new((const char *[]){ "NAME", "AGE", NULL });
 *     out_table_row(t, (const char *[]){ name, age });
 *     out_table_print(t, stdout);
 *     out_table_free(t);
 *
 * Cell text may come from the cluster, so control characters are escaped
 * when a cell is added: a name cannot move the cursor or forge a line.
 * YAML is written with libyaml's emitter (never by hand); strings that
 * would read back as something else (true, 123, a timestamp, null...) are
 * quoted, so `yaml.safe_load` of the output equals the JSON.
 */
#ifndef CAIRN_OUTPUT_H
#define CAIRN_OUTPUT_H

#include <stdint.h>
#include <stdio.h>
#include <cjson/cJSON.h>

#include "base/buf.h"
#include "base/err.h"

#define OUT_CAP_DOC (64u << 20)	/* one JSON or YAML document printed */
#define OUT_AGE_MAX 32		/* room for any age string */

enum out_format { OUT_TABLE, OUT_JSON, OUT_YAML };

/* "table", "json", "yaml" (also "wide" -> table); CAIRN_EINVAL otherwise. */
int out_parse_format(const char *s, enum out_format *out, struct cairn_err *err);

/* ---- tables ----------------------------------------------------------- */

struct out_table;

/* A table with these column headers (NULL-terminated, copied). */
struct out_table *out_table_new(const char *const *headers);
/* Add a row of exactly as many cells as headers; NULL cells print "". Copied. */
void out_table_row(struct out_table *t, const char *const *cells);
size_t out_table_rows(const struct out_table *t);
/*
 * Print headers and rows, columns left-aligned and separated by three
 * spaces (as kubectl), trailing blanks trimmed.
 */
void out_table_print(const struct out_table *t, FILE *f);
void out_table_free(struct out_table *t);

/* ---- documents -------------------------------------------------------- */

/*
 * Append obj as indented JSON (two spaces, as kubectl) or as one YAML
 * document to out. Errors: CAIRN_ETOOBIG past out's cap, CAIRN_EFAIL if
 * libyaml refuses (message from it). obj is borrowed.
 */
int out_json(struct buf *out, const cJSON *obj, struct cairn_err *err);
int out_yaml(struct buf *out, const cJSON *obj, struct cairn_err *err);
/* out_json / out_yaml by format, written to f. OUT_TABLE is CAIRN_EINVAL. */
int out_print_doc(FILE *f, enum out_format fmt, const cJSON *obj,
	struct cairn_err *err);
/*
 * Wrap borrowed items in kubectl's `{"apiVersion":"v1","kind":"List",
 * "items":[...],"metadata":{}}`. Owned result; the items are duplicated.
 */
cJSON *out_list_wrap(cJSON *const *items, size_t n);

/* ---- times and sizes -------------------------------------------------- */

/*
 * kubectl's HumanDuration of d microseconds: "45s", "5m30s", "3h", "2d4h",
 * "400d", "3y20d"; "<invalid>" below -1 s.
 */
void out_duration(int64_t d_us, char out[OUT_AGE_MAX]);
/* Age of an RFC 3339 timestamp relative to now_us; "<unknown>" if absent or bad. */
void out_age(const char *rfc3339, int64_t now_us, char out[OUT_AGE_MAX]);

#endif
