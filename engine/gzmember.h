/*
 * gzmember.h: one buffer of tar bytes -> one whole gzip member, by
 * ISA-L's stateless deflate, with the same bytes for the same buffer in
 * every thread and every process.
 *
 * Why a module of its own: ISA-L 2.30's level 1 and 2 deflate reads the
 * address of its stream struct as if it were input (gzmember.c says
 * how), so its output for the same buffer could differ by a few bytes
 * from one struct to another. A backup's part cuts follow compressed
 * sizes, so the tarball's bytes would follow chance. A gzmember keeps its
 * struct where that address always gives the same answer.
 *
 * Threading: a gzmember belongs to one thread at a time; several
 * gzmembers run at once on several threads.
 */
#ifndef CAIRN_GZMEMBER_H
#define CAIRN_GZMEMBER_H

#include <stddef.h>
#include "base/err.h"

struct gzmember;

/*
 * A compressor for zlib's level zlevel (-1: its default, 6): ISA-L's
 * level 2 for zlib's 0-3 (on Kubernetes JSON both faster and smaller
 * than zlib's level 1; zlib's 0, store only, is compressed too: no caller
 * asks for it), ISA-L's level 3 above. Never NULL (out of memory aborts).
 */
struct gzmember *gzmember_new(int zlevel);

/* Output bytes that always suffice for a member of len input bytes. */
size_t gzmember_bound(size_t len);

/*
 * Compress len bytes into out (outcap >= gzmember_bound(len)) as one
 * gzip member (standard: gzip, zlib and Go read it); *outlen its size.
 * CAIRN_EFAIL if ISA-L fails.
 */
int gzmember_compress(struct gzmember *g, const void *in, size_t len,
	void *out, size_t outcap, size_t *outlen, struct cairn_err *err);

/*
 * Whether the stream struct sits where ISA-L's output does not depend on
 * it (see gzmember.c); 0 only if no such place could be mapped, when the
 * members are still valid but their bytes may vary between runs. For
 * tests.
 */
int gzmember_pinned(const struct gzmember *g);

void gzmember_free(struct gzmember *g);

#endif
