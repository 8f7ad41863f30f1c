/*
 * fuzz_volume.c: see fuzz_volume.h.
 */
#include "config.h"
#include "tests/fuzz/fuzz_volume.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/hostpath.h"
#include "storage/store.h"

static int
rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	chmod(p, 0700);
	return remove(p);
}

void
fuzz_volume_restore(const char *tag, const void *archive, size_t n,
    const char *chunk_dir, const char *extra_key, const void *extra,
    size_t nextra)
{
	/* <root>/store: the store; <root>/sub/out: the target */
	char root[128], store_dir[200], out[200], outside[200];
	struct store *s = NULL;
	struct hostpath_opts o;
	struct stat st;

	snprintf(root, sizeof root, "/tmp/cairn-fuzz-%s.%d", tag,
	    (int)getpid());
	snprintf(store_dir, sizeof store_dir, "%s/store", root);
	snprintf(out, sizeof out, "%s/sub", root);
	mkdir(root, 0700);
	mkdir(out, 0700);
	snprintf(out, sizeof out, "%s/sub/out", root);
	snprintf(outside, sizeof outside, "%s/sub/escaped", root);
	if (store_open_fs(store_dir, 1, &s, NULL) == 0 &&
	    store_put_mem(s, "vol.tar.gz", archive, n, NULL) == 0 &&
	    (extra_key == NULL || store_put_mem(s, extra_key, extra, nextra,
	    NULL) == 0)) {
		memset(&o, 0, sizeof o);
		o.chunk_dir = chunk_dir;
		(void)hostpath_restore(s, "vol.tar.gz", out, &o, NULL, NULL);
	}
	store_free(s);
	/* nothing next to the target directory */
	if (lstat(outside, &st) == 0)
		abort();
	nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
