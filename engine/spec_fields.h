/*
 * spec_fields.h: what cairn does with each field of a Velero spec, so that
 * nothing a user writes is silently ignored (issue 21).
 *
 * On a real cluster the CRD schema decides first: a field the schema does
 * not declare is dropped by the API server (with a Warning header, or a
 * 400 "strict decoding error" when the client asks for strict field
 * validation, as kubectl and cairn's CLI do) and never reaches cairn, and
 * enums and required fields are the API server's 422. So every field
 * Velero defines is declared in schema/gen_crds.py and listed in a table
 * here as implemented, refused or warned about; a field missing from the
 * table (a CRD newer than this server) is refused.
 */
#ifndef CAIRN_SPEC_FIELDS_H
#define CAIRN_SPEC_FIELDS_H

#include <stddef.h>
#include <cjson/cJSON.h>

#define SPEC_FIELDS_MAX_MSGS 32		/* entries appended to errs/warnings */

enum spec_use {
	SPEC_DONE,		/* implemented (checked elsewhere) */
	SPEC_REFUSE,		/* set: a validation error */
	SPEC_WARN,		/* set: a warning, the rest runs */
};

struct spec_field {
	const char *name;	/* Velero's JSON name */
	enum spec_use use;
	const char *why;	/* SPEC_REFUSE / SPEC_WARN: what to do instead */
};

/*
 * Check each member of obj, the object at path where ("spec"), against the
 * n entries of table. Appended to errs: "WHERE.NAME: unknown field" for a
 * member not in the table, "WHERE.NAME is not supported by cairn: WHY" for
 * a SPEC_REFUSE member that is set; to warnings: "WHERE.NAME is ignored:
 * WHY" for a SPEC_WARN member that is set. errs and warnings are cJSON
 * arrays of strings, each grown to at most SPEC_FIELDS_MAX_MSGS entries.
 * obj NULL or not an object: nothing.
 */
void spec_fields_check(const cJSON *obj, const char *where,
	const struct spec_field *table, size_t n, cJSON *errs, cJSON *warnings);

/* Does v ask for nothing: absent, null, false, "", [] or {}? */
int spec_value_unset(const cJSON *v);

#endif
