/*
 * output.c: tables, JSON, YAML and ages for the CLI (see output.h).
 *
 * Tables are buffered whole (a CLI prints tens or thousands of rows, never
 * millions) so column widths can be measured; widths count UTF-8 code
 * points, not bytes. YAML goes through libyaml's event emitter: we only
 * choose, for each string, whether a plain scalar would be read back as a
 * string (YAML 1.1 resolvers as PyYAML and Go's yaml use them); if not,
 * the scalar is marked non-plain and libyaml quotes it.
 */
#include "config.h"
#include "cmd/output.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#define OUT_CELL_MAX 4096	/* bytes of one table cell after escaping */

struct out_table {
	size_t ncols;		/* columns */
	char **headers;		/* ncols owned strings */
	char **cells;		/* nrows * ncols owned strings, row-major */
	size_t nrows;
	size_t alloc;		/* rows allocated in cells */
};

int
out_parse_format(const char *s, enum out_format *out, struct cairn_err *err)
{
	if (s == NULL || strcmp(s, "table") == 0 || strcmp(s, "wide") == 0)
		*out = OUT_TABLE;
	else if (strcmp(s, "json") == 0)
		*out = OUT_JSON;
	else if (strcmp(s, "yaml") == 0)
		*out = OUT_YAML;
	else
		return cairn_err_set(err, CAIRN_EINVAL,
		    "unknown output format \"%s\" (table, json or yaml)", s);
	return 0;
}

/* Cell text with control characters escaped, owned. */
static char *
cell_dup(const char *s)
{
	struct buf b;

	if (s == NULL || *s == '\0')
		return xstrdup("");
	buf_init(&b, OUT_CELL_MAX);
	if (str_escape_text(&b, s) < 0) {
		buf_free(&b);
		return xstrndup(s, 64);
	}
	if (b.data == NULL) {
		buf_free(&b);
		return xstrdup("");
	}
	return buf_take(&b, NULL);
}

struct out_table *
out_table_new(const char *const *headers)
{
	struct out_table *t = xcalloc(1, sizeof *t);

	while (headers[t->ncols] != NULL)
		t->ncols++;
	t->headers = xcalloc(t->ncols, sizeof *t->headers);
	for (size_t i = 0; i < t->ncols; i++)
		t->headers[i] = xstrdup(headers[i]);
	return t;
}

void
out_table_row(struct out_table *t, const char *const *cells)
{
	if (t->nrows == t->alloc) {
		t->alloc = t->alloc ? t->alloc * 2 : 16;
		t->cells = xreallocarray(t->cells, t->alloc * t->ncols,
		    sizeof *t->cells);
	}
	for (size_t i = 0; i < t->ncols; i++)
		t->cells[t->nrows * t->ncols + i] = cell_dup(cells[i]);
	t->nrows++;
}

size_t
out_table_rows(const struct out_table *t)
{
	return t->nrows;
}

/* Display width: UTF-8 code points (continuation bytes do not count). */
static size_t
text_width(const char *s)
{
	size_t n = 0;

	for (; *s != '\0'; s++)
		if (((unsigned char)*s & 0xC0) != 0x80)
			n++;
	return n;
}

static void
print_row(FILE *f, char *const *row, const size_t *width, size_t ncols)
{
	size_t last = ncols;

	/* Trailing empty cells add nothing but blanks. */
	while (last > 0 && row[last - 1][0] == '\0')
		last--;
	for (size_t i = 0; i < last; i++) {
		fputs(row[i], f);
		if (i + 1 < last)
			for (size_t w = text_width(row[i]); w < width[i] + 3; w++)
				fputc(' ', f);
	}
	fputc('\n', f);
}

void
out_table_print(const struct out_table *t, FILE *f)
{
	size_t *width = xcalloc(t->ncols ? t->ncols : 1, sizeof *width);

	for (size_t c = 0; c < t->ncols; c++) {
		width[c] = text_width(t->headers[c]);
		for (size_t r = 0; r < t->nrows; r++) {
			size_t w = text_width(t->cells[r * t->ncols + c]);

			if (w > width[c])
				width[c] = w;
		}
	}
	print_row(f, t->headers, width, t->ncols);
	for (size_t r = 0; r < t->nrows; r++)
		print_row(f, t->cells + r * t->ncols, width, t->ncols);
	free(width);
}

void
out_table_free(struct out_table *t)
{
	if (t == NULL)
		return;
	for (size_t i = 0; i < t->ncols; i++)
		free(t->headers[i]);
	for (size_t i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->headers);
	free(t->cells);
	free(t);
}

/* ---- JSON ------------------------------------------------------------- */

int
out_json(struct buf *out, const cJSON *obj, struct cairn_err *err)
{
	char *text = cJSON_Print(obj);
	int rc;

	if (text == NULL)
		return cairn_err_set(err, CAIRN_EFAIL, "cannot print JSON");
	/*
	 * cJSON indents with tabs and puts one after each colon (strings
	 * carry theirs escaped); kubectl indents with two spaces.
	 */
	rc = 0;
	for (const char *p = text; *p != '\0' && rc == 0; p++) {
		if (*p != '\t')
			rc = buf_putc(out, *p);
		else if (p == text || p[-1] == '\n' || p[-1] == '\t')
			rc = buf_puts(out, "  ");
		else
			rc = buf_putc(out, ' ');
	}
	if (rc == 0)
		rc = buf_putc(out, '\n');
	free(text);
	if (rc < 0)
		return cairn_err_set(err, rc, "JSON output is larger than %zu bytes",
		    out->cap);
	return 0;
}

/* ---- YAML ------------------------------------------------------------- */

/*
 * Would a plain scalar s be resolved to something other than a string by a
 * YAML 1.1 reader (null, bool, int, float, timestamp)? Conservative: any
 * scalar starting like a number, or one of the special words, is quoted.
 */
static int
yaml_needs_quotes(const char *s)
{
	static const char *const words[] = {
		"", "~", "null", "true", "false", "yes", "no", "on", "off",
		"y", "n", "<<", "=", NULL
	};
	const char *p = s;

	for (size_t i = 0; words[i] != NULL; i++)
		if (strcasecmp(s, words[i]) == 0)
			return 1;
	if (*p == '+' || *p == '-')
		p++;
	if (*p == '.')
		p++;
	if (strcasecmp(p, "inf") == 0 || strcasecmp(p, "nan") == 0)
		return 1;
	if (!isdigit((unsigned char)*p))
		return 0;
	/*
	 * Starts like a number: quote unless a character no int, float,
	 * sexagesimal or timestamp form can hold shows it is text ("720h").
	 */
	for (; *p != '\0'; p++)
		if (strchr("0123456789abcdefABCDEF_.:+-xXoOtTzZ ", *p) == NULL)
			return 0;
	return 1;
}

static int
yaml_write_handler(void *data, unsigned char *buffer, size_t size)
{
	struct buf *b = data;

	return buf_append(b, buffer, size) == 0;
}

static int
emit_scalar(yaml_emitter_t *em, const char *text, int plain_ok)
{
	yaml_event_t ev;

	if (!yaml_scalar_event_initialize(&ev, NULL, NULL,
	    (yaml_char_t *)text, (int)strlen(text), plain_ok, 1,
	    YAML_ANY_SCALAR_STYLE))
		return -1;
	return yaml_emitter_emit(em, &ev) ? 0 : -1;
}

static int
emit_node(yaml_emitter_t *em, const cJSON *node, int depth)
{
	yaml_event_t ev;
	char num[64];

	if (depth > 128)
		return -1;
	if (cJSON_IsObject(node)) {
		int empty = node->child == NULL;

		if (!yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
		    empty ? YAML_FLOW_MAPPING_STYLE : YAML_BLOCK_MAPPING_STYLE) ||
		    !yaml_emitter_emit(em, &ev))
			return -1;
		for (const cJSON *c = node->child; c != NULL; c = c->next) {
			const char *key = c->string ? c->string : "";

			if (emit_scalar(em, key, !yaml_needs_quotes(key)) < 0 ||
			    emit_node(em, c, depth + 1) < 0)
				return -1;
		}
		if (!yaml_mapping_end_event_initialize(&ev) ||
		    !yaml_emitter_emit(em, &ev))
			return -1;
		return 0;
	}
	if (cJSON_IsArray(node)) {
		int empty = node->child == NULL;

		if (!yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
		    empty ? YAML_FLOW_SEQUENCE_STYLE : YAML_BLOCK_SEQUENCE_STYLE) ||
		    !yaml_emitter_emit(em, &ev))
			return -1;
		for (const cJSON *c = node->child; c != NULL; c = c->next)
			if (emit_node(em, c, depth + 1) < 0)
				return -1;
		if (!yaml_sequence_end_event_initialize(&ev) ||
		    !yaml_emitter_emit(em, &ev))
			return -1;
		return 0;
	}
	if (cJSON_IsString(node))
		return emit_scalar(em, node->valuestring,
		    !yaml_needs_quotes(node->valuestring));
	if (cJSON_IsBool(node))
		return emit_scalar(em, cJSON_IsTrue(node) ? "true" : "false", 1);
	if (cJSON_IsNumber(node)) {
		double v = node->valuedouble;

		if (isfinite(v) && v == floor(v) && fabs(v) < 9.0e15)
			snprintf(num, sizeof num, "%.0f", v);
		else if (isfinite(v))
			snprintf(num, sizeof num, "%.17g", v);
		else
			snprintf(num, sizeof num, "null");
		return emit_scalar(em, num, 1);
	}
	return emit_scalar(em, "null", 1);
}

int
out_yaml(struct buf *out, const cJSON *obj, struct cairn_err *err)
{
	yaml_emitter_t em;
	yaml_event_t ev;
	int rc = CAIRN_EFAIL;

	if (!yaml_emitter_initialize(&em))
		return cairn_err_set(err, CAIRN_EFAIL, "cannot start YAML emitter");
	yaml_emitter_set_output(&em, yaml_write_handler, out);
	yaml_emitter_set_unicode(&em, 1);
	yaml_emitter_set_width(&em, -1);
	yaml_emitter_set_indent(&em, 2);
	if (!yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) ||
	    !yaml_emitter_emit(&em, &ev))
		goto fail;
	if (!yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1) ||
	    !yaml_emitter_emit(&em, &ev))
		goto fail;
	if (emit_node(&em, obj, 0) < 0)
		goto fail;
	if (!yaml_document_end_event_initialize(&ev, 1) ||
	    !yaml_emitter_emit(&em, &ev))
		goto fail;
	if (!yaml_stream_end_event_initialize(&ev) ||
	    !yaml_emitter_emit(&em, &ev) || !yaml_emitter_flush(&em))
		goto fail;
	rc = 0;
	yaml_emitter_delete(&em);
	return rc;
fail:
	if (em.error == YAML_WRITER_ERROR)
		cairn_err_set(err, CAIRN_ETOOBIG,
		    "YAML output is larger than %zu bytes", out->cap);
	else
		cairn_err_set(err, CAIRN_EFAIL, "YAML emitter: %s",
		    em.problem ? em.problem : "document too deep");
	yaml_emitter_delete(&em);
	return err ? err->code : CAIRN_EFAIL;
}

int
out_print_doc(FILE *f, enum out_format fmt, const cJSON *obj,
    struct cairn_err *err)
{
	struct buf b;
	int rc;

	buf_init(&b, OUT_CAP_DOC);
	if (fmt == OUT_JSON)
		rc = out_json(&b, obj, err);
	else if (fmt == OUT_YAML)
		rc = out_yaml(&b, obj, err);
	else
		rc = cairn_err_set(err, CAIRN_EINVAL, "not a document format");
	if (rc == 0 && fwrite(buf_cstr(&b), 1, b.len, f) != b.len)
		rc = cairn_err_set(err, CAIRN_EIO, "cannot write output");
	buf_free(&b);
	return rc;
}

cJSON *
out_list_wrap(cJSON *const *items, size_t n)
{
	cJSON *list = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(list, "items");

	cJSON_AddStringToObject(list, "apiVersion", "v1");
	cJSON_AddStringToObject(list, "kind", "List");
	for (size_t i = 0; i < n; i++)
		cJSON_AddItemToArray(arr, cJSON_Duplicate(items[i], 1));
	cJSON_AddItemToObject(list, "metadata", cJSON_CreateObject());
	return list;
}

/* ---- times ------------------------------------------------------------ */

void
out_duration(int64_t d_us, char out[OUT_AGE_MAX])
{
	int64_t secs = d_us / TIME_US_PER_SEC;
	int64_t mins = secs / 60, hours = secs / 3600, days = hours / 24;

	if (secs < -1)
		snprintf(out, OUT_AGE_MAX, "<invalid>");
	else if (secs < 0)
		snprintf(out, OUT_AGE_MAX, "0s");
	else if (secs < 120)
		snprintf(out, OUT_AGE_MAX, "%llds", (long long)secs);
	else if (mins < 10 && secs % 60 != 0)
		snprintf(out, OUT_AGE_MAX, "%lldm%llds", (long long)mins,
		    (long long)(secs % 60));
	else if (mins < 180)
		snprintf(out, OUT_AGE_MAX, "%lldm", (long long)mins);
	else if (hours < 8 && mins % 60 != 0)
		snprintf(out, OUT_AGE_MAX, "%lldh%lldm", (long long)hours,
		    (long long)(mins % 60));
	else if (hours < 48)
		snprintf(out, OUT_AGE_MAX, "%lldh", (long long)hours);
	else if (hours < 24 * 8 && hours % 24 != 0)
		snprintf(out, OUT_AGE_MAX, "%lldd%lldh", (long long)days,
		    (long long)(hours % 24));
	else if (hours < 24 * 365 * 2)
		snprintf(out, OUT_AGE_MAX, "%lldd", (long long)days);
	else if (hours < 24 * 365 * 8 && days % 365 != 0)
		snprintf(out, OUT_AGE_MAX, "%lldy%lldd", (long long)(days / 365),
		    (long long)(days % 365));
	else
		snprintf(out, OUT_AGE_MAX, "%lldy", (long long)(days / 365));
}

void
out_age(const char *rfc3339, int64_t now_us, char out[OUT_AGE_MAX])
{
	int64_t t;

	if (rfc3339 == NULL || time_parse(rfc3339, &t) < 0) {
		snprintf(out, OUT_AGE_MAX, "<unknown>");
		return;
	}
	out_duration(now_us - t, out);
}
