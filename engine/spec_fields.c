/*
 * spec_fields.c: refuse or warn about the Velero spec fields cairn does
 * not implement; see spec_fields.h.
 */
#include "config.h"
#include "engine/spec_fields.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "base/jsonutil.h"

/* Append a formatted message to the array a (at most SPEC_FIELDS_MAX_MSGS). */
#define add_msg(a, ...) json_add_msgf((a), SPEC_FIELDS_MAX_MSGS, __VA_ARGS__)

int
spec_value_unset(const cJSON *v)
{
	return v == NULL || cJSON_IsNull(v) || cJSON_IsFalse(v) ||
	    (cJSON_IsString(v) && v->valuestring[0] == '\0') ||
	    ((cJSON_IsArray(v) || cJSON_IsObject(v)) &&
	    cJSON_GetArraySize(v) == 0);
}

void
spec_fields_check(const cJSON *obj, const char *where,
	const struct spec_field *table, size_t n, cJSON *errs, cJSON *warnings)
{
	const cJSON *it;

	if (!cJSON_IsObject(obj))
		return;
	cJSON_ArrayForEach(it, obj) {
		size_t i;

		for (i = 0; i < n; i++)
			if (strcmp(it->string, table[i].name) == 0)
				break;
		if (i == n) {
			add_msg(errs, "%s.%.200s: unknown field", where,
			    it->string);
			continue;
		}
		if (table[i].use == SPEC_DONE || spec_value_unset(it))
			continue;
		if (table[i].use == SPEC_REFUSE)
			add_msg(errs, "%s.%s is not supported by cairn: %s",
			    where, it->string, table[i].why);
		else
			add_msg(warnings, "%s.%s is ignored: %s", where,
			    it->string, table[i].why);
	}
}
