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

static void
add_msg(cJSON *a, const char *fmt, ...) CAIRN_PRINTF(2, 3);

static void
add_msg(cJSON *a, const char *fmt, ...)
{
	char msg[CAIRN_ERR_MSG_MAX];
	va_list ap;

	if (a == NULL || cJSON_GetArraySize(a) >= SPEC_FIELDS_MAX_MSGS)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	cJSON_AddItemToArray(a, cJSON_CreateString(msg));
}

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
