/*
 * fuzz_voltar.c: libFuzzer target for the volume tar extraction
 * (engine/hostpath.c): any bytes stored as a volume archive, restored into
 * a fresh directory. Unsafe entries (absolute, "..", links out of the
 * tree, devices) must be refused; nothing may land outside the directory.
 *   ./tests/fuzz/fuzz_voltar -max_total_time=600 tests/fuzz/corpus/voltar
 */
#include "config.h"

#include <stddef.h>
#include <stdint.h>

#include "tests/fuzz/fuzz_volume.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_volume_restore("voltar", data, size, NULL, NULL, NULL, 0);
	return 0;
}
