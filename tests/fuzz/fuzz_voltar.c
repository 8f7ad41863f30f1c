/*
 * fuzz_voltar.c: libFuzzer target for the volume tar extraction
 * (engine/hostpath.c): any bytes stored as a volume archive, restored into
 * a fresh directory. Unsafe entries (absolute, "..", links out of the
 * tree, devices) must be refused; nothing may land outside the directory.
 *   ./tests/fuzz/fuzz_voltar -max_total_time=600 tests/fuzz/corpus/voltar
 */
#include "config.h"
#include "engine/hostpath.h"
#include "storage/store.h"
#include "base/mem.h"

#include <dirent.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char root[128];		/* <tmp>/store: the archive; <tmp>/out: target */

static int
rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	chmod(p, 0700);
	return remove(p);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct store *s = NULL;
	struct hostpath_opts o;
	char out[200], store_dir[200], outside[200];
	struct stat st;

	if (root[0] == '\0')
		snprintf(root, sizeof root, "/tmp/cairn-fuzz-voltar.%d",
		    (int)getpid());
	/* made for every input: the previous one's were removed */
	snprintf(out, sizeof out, "%s/sub", root);
	mkdir(root, 0700);
	mkdir(out, 0700);
	snprintf(store_dir, sizeof store_dir, "%s/store", root);
	snprintf(out, sizeof out, "%s/sub/out", root);
	snprintf(outside, sizeof outside, "%s/sub/escaped", root);
	if (store_open_fs(store_dir, 1, &s, NULL) < 0)
		return 0;
	if (store_put_mem(s, "vol.tar.gz", data, size, NULL) == 0) {
		memset(&o, 0, sizeof o);
		(void)hostpath_restore(s, "vol.tar.gz", out, &o, NULL, NULL);
	}
	store_free(s);
	/* nothing next to the target directory */
	if (lstat(outside, &st) == 0)
		abort();
	nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}
