/*
 * fuzz_base.c: libFuzzer target for the base parsers that read outside
 * input: RFC 3339 times, Go durations, depth-capped JSON.
 *   ./configure CC=clang --enable-fuzzing && make tests/fuzz/fuzz_base
 *   ./tests/fuzz/fuzz_base -max_total_time=60
 */
#include "config.h"
#include "base/jsonutil.h"
#include "base/mem.h"
#include "base/timeutil.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = xstrndup((const char *)data, size);
	char out[TIME_STR_MAX];
	int64_t v;
	cJSON *j;

	if (time_parse(s, &v) == 0)
		time_format_micro(v, out);
	if (duration_parse(s, &v) == 0)
		duration_format(v, out);
	j = json_parse((const char *)data, size, NULL);
	cJSON_Delete(j);
	free(s);
	return 0;
}
