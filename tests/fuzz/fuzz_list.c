/*
 * fuzz_list.c: libFuzzer target for the list splitter (kube/list.c's
 * lsplit): a list response cut into chunks (first byte: chunk size), each
 * item handed over as text and parsed, the envelope parsed at the end.
 *   ./tests/fuzz/fuzz_list -max_total_time=600 tests/fuzz/corpus/list
 */
#include "config.h"
#include "kube/internal.h"
#include "base/jsonutil.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
item(void *arg, const char *text, size_t len)
{
	cJSON *j = json_parse(text, len, NULL);

	cJSON_Delete(j);
	return ++*(int *)arg > 100000;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lsplit l;
	size_t chunk, off;
	int n = 0, rc = 0;
	cJSON *env;

	if (size == 0)
		return 0;
	chunk = 1 + data[0] % 64;
	lsplit_init(&l, 1u << 20);
	for (off = 1; off < size && rc == 0; off += chunk)
		rc = lsplit_feed(&l, (const char *)data + off,
		    size - off < chunk ? size - off : chunk, item, &n);
	if (rc == 0) {
		env = lsplit_finish(&l, NULL);
		cJSON_Delete(env);
	}
	lsplit_free(&l);
	return 0;
}
