/*
 * fuzz_chunks.c: libFuzzer target for the readers of deduplicated volume
 * copies (engine/chunks_read.c, engine/chunks.c): a file's chunk list and
 * the pack its lines point into, both from the input, restored through
 * hostpath_restore() as a restore reads them from storage. Bad headers,
 * lines, offsets, lengths, record headers, deflate data and hashes must be
 * refused with an error; nothing may be written outside the target, read
 * out of bounds or leaked.
 *
 * Input: the chunk list, then the separator "\n--pack--\n", then the pack
 * (no separator: all list, empty pack). The volume archive around the list
 * is made here: a root directory and one regular file "f" marked as a
 * chunked entry (chunks_mark_entry()), as a deduplicating backup writes it.
 *   ./tests/fuzz/fuzz_chunks -max_total_time=600 tests/fuzz/corpus/chunks
 */
#include "config.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdint.h>
#include <string.h>

#include "engine/chunks.h"
#include "tests/fuzz/fuzz_volume.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SEP "\n--pack--\n"
#define CHUNK_DIR "chunks/v/"
#define PACK "b-0123456789abcdef.pack"	/* the name the seeds' lines use */

/* The volume archive: "." and "f", whose data is the chunk list. */
static int
index_tar(const uint8_t *list, size_t n, void *out, size_t cap, size_t *len)
{
	struct archive *a = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	int ok;

	ok = archive_write_set_format_pax(a) == ARCHIVE_OK &&
	    archive_write_add_filter_gzip(a) == ARCHIVE_OK &&
	    archive_write_open_memory(a, out, cap, len) == ARCHIVE_OK;
	if (ok) {
		archive_entry_set_pathname(e, ".");
		archive_entry_set_filetype(e, AE_IFDIR);
		archive_entry_set_perm(e, 0755);
		ok = archive_write_header(a, e) == ARCHIVE_OK;
	}
	if (ok) {
		archive_entry_clear(e);
		archive_entry_set_pathname(e, "f");
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_perm(e, 0644);
		chunks_mark_entry(e, n);
		ok = archive_write_header(a, e) == ARCHIVE_OK &&
		    (n == 0 || archive_write_data(a, list, n) == (la_ssize_t)n);
	}
	ok = archive_write_close(a) == ARCHIVE_OK && ok;
	archive_entry_free(e);
	archive_write_free(a);
	return ok ? 0 : -1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char tar[1 << 20];
	const uint8_t *pack = NULL;
	size_t nlist = size, npack = 0, ntar = 0;

	if (size > (512u << 10))
		return 0;
	for (size_t i = 0; i + sizeof SEP - 1 <= size; i++)
		if (memcmp(data + i, SEP, sizeof SEP - 1) == 0) {
			nlist = i;
			pack = data + i + sizeof SEP - 1;
			npack = size - i - (sizeof SEP - 1);
			break;
		}
	if (index_tar(data, nlist, tar, sizeof tar, &ntar) == 0)
		fuzz_volume_restore("chunks", tar, ntar, CHUNK_DIR,
		    pack != NULL ? CHUNK_DIR "packs/" PACK : NULL, pack, npack);
	return 0;
}
