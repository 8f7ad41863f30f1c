/*
 * fuzz_archive.c: libFuzzer target for the safe tarball reader
 * (engine/archive_read.c): any bytes as a .tar.gz, every entry read as
 * JSON. The reader must end cleanly or with an error, never crash, leak or
 * loop; caps are small so hostile expansion is cut quickly.
 *   ./configure CC=clang --enable-fuzzing && make tests/fuzz/fuzz_archive
 *   ./tests/fuzz/fuzz_archive -max_total_time=60
 */
#include "config.h"
#include "engine/archive_read.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tarread_opts o = { .entry_cap = 1u << 20, .total_cap = 16u << 20,
	    .ratio_min = 1u << 20 };
	struct tarread_src src;
	struct tarread *r;
	struct tarread_entry e;
	int n = 0;

	tarread_src_mem(&src, data, size);
	if (tarread_open(&src, &o, &r, NULL) < 0)
		return 0;
	while (tarread_next(r, &e, NULL) == 1 && n++ < 10000) {
		cJSON *j;

		if (e.verdict == TARREAD_OK && tarread_json(r, &j, NULL) == 0)
			cJSON_Delete(j);
	}
	tarread_free(r);
	return 0;
}
