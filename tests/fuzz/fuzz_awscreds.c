/*
 * fuzz_awscreds.c: libFuzzer target for the AWS shared credentials file
 * (storage/sigv4.c): sections, [profile x], comments, keys, with the
 * default profile and a named one.
 *   ./tests/fuzz/fuzz_awscreds -max_total_time=600 tests/fuzz/corpus/awscreds
 */
#include "config.h"
#include "storage/sigv4.h"
#include "base/mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = xstrndup((const char *)data, size);
	struct sigv4_creds c;
	static const char *const profiles[] = { "default", "backup", NULL };

	for (int i = 0; profiles[i] != NULL; i++) {
		memset(&c, 0, sizeof c);
		if (sigv4_creds_parse(text, profiles[i], "fuzz", &c, NULL) == 0)
			sigv4_creds_free(&c);
	}
	free(text);
	return 0;
}
