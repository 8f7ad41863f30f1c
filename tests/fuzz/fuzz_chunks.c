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
#include "engine/chunks.h"
#include "engine/hostpath.h"
#include "storage/store.h"

#include <archive.h>
#include <archive_entry.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SEP "\n--pack--\n"
#define CHUNK_DIR "chunks/v/"
#define PACK "b-0123456789abcdef.pack"	/* the name the seeds' lines use */

static char root[128];		/* <tmp>/store, <tmp>/sub/out */

static int
rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	chmod(p, 0700);
	return remove(p);
}

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
	struct store *s = NULL;
	struct hostpath_opts o;
	char out[200], store_dir[200], outside[200];
	const uint8_t *pack = NULL;
	size_t nlist = size, npack = 0, ntar = 0;
	struct stat st;

	if (size > (512u << 10))
		return 0;
	for (size_t i = 0; i + sizeof SEP - 1 <= size; i++)
		if (memcmp(data + i, SEP, sizeof SEP - 1) == 0) {
			nlist = i;
			pack = data + i + sizeof SEP - 1;
			npack = size - i - (sizeof SEP - 1);
			break;
		}
	if (root[0] == '\0')
		snprintf(root, sizeof root, "/tmp/cairn-fuzz-chunks.%d",
		    (int)getpid());
	/* made for every input: the previous one's were removed */
	snprintf(out, sizeof out, "%s/sub", root);
	mkdir(root, 0700);
	mkdir(out, 0700);
	snprintf(store_dir, sizeof store_dir, "%s/store", root);
	snprintf(out, sizeof out, "%s/sub/out", root);
	snprintf(outside, sizeof outside, "%s/sub/escaped", root);
	if (index_tar(data, nlist, tar, sizeof tar, &ntar) < 0 ||
	    store_open_fs(store_dir, 1, &s, NULL) < 0)
		goto out;
	if (store_put_mem(s, "vol.tar.gz", tar, ntar, NULL) == 0 &&
	    (pack == NULL || store_put_mem(s, CHUNK_DIR "packs/" PACK, pack,
	    npack, NULL) == 0)) {
		memset(&o, 0, sizeof o);
		o.chunk_dir = CHUNK_DIR;
		(void)hostpath_restore(s, "vol.tar.gz", out, &o, NULL, NULL);
	}
out:
	store_free(s);
	if (lstat(outside, &st) == 0)
		abort();
	nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}
