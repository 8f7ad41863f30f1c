/*
 * fuzz_volume.h: the shared part of the volume-restore fuzz targets
 * (fuzz_voltar.c, fuzz_chunks.c).
 */
#ifndef CAIRN_FUZZ_VOLUME_H
#define CAIRN_FUZZ_VOLUME_H

#include <stddef.h>

/*
 * Store archive (n bytes) as a volume copy, and extra (nextra bytes) at
 * extra_key when extra_key is not NULL, in a fresh fs store under a
 * per-process temp directory; restore it with hostpath_restore() (chunk
 * location chunk_dir, or NULL) into a fresh directory; abort() if anything
 * appeared next to that directory; remove it all. tag names the directory.
 */
void fuzz_volume_restore(const char *tag, const void *archive, size_t n,
	const char *chunk_dir, const char *extra_key, const void *extra,
	size_t nextra);

#endif
