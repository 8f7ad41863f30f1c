/*
 * fuzz_restore_path.c: libFuzzer target for restore item paths
 * (engine/restore_plan.c): any tar entry name as a backup may hold it.
 * A path accepted as an item must name a resource, a name, and no
 * traversal.
 *   ./tests/fuzz/fuzz_restore_path -max_total_time=600 tests/fuzz/corpus/restore_path
 */
#include "config.h"
#include "engine/restore_plan.h"
#include "base/mem.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = xstrndup((const char *)data, size);
	struct restore_path rp;
	char tier[600];

	if (restore_path_parse(s, &rp) == 0) {
		assert(rp.resgroup != NULL && rp.resgroup[0] != '\0');
		assert(rp.name != NULL && rp.name[0] != '\0');
		assert(strchr(rp.name, '/') == NULL);
		assert(strcmp(rp.name, ".") != 0 && strcmp(rp.name, "..") != 0);
		(void)restore_never_restored(rp.resgroup);
		if (strlen(rp.resgroup) < 250)
			restore_tier_key(rp.resgroup, tier);
	}
	free(s);
	return 0;
}
