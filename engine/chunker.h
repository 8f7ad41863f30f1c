/*
 * chunker.h: content-defined chunking (FastCDC's gear hash with
 * normalized chunking), the cut points of the hostpath mover's
 * deduplicated copies (engine/chunks.h).
 *
 * A chunk ends where the gear hash of the bytes before (a rolling hash
 * over about the last 64 bytes: h = (h << 1) + gear[byte]) has its top
 * bits zero. Where a cut falls depends only on the bytes around it, so an
 * insertion or deletion in a file moves the cuts next to it and leaves
 * every other chunk (and its hash) as it was: a second copy of a slightly
 * changed file finds most of its chunks stored already.
 *
 * Sizes: no cut before CHUNKER_MIN bytes, a harder test (more bits) below
 * CHUNKER_AVG and an easier one above it (FastCDC's normalization, which
 * narrows the spread around the average), a forced cut at CHUNKER_MAX.
 * The gear table is 256 values fixed by this file (SHA-256 of "cairn gear
 * v1" and the byte, see chunker.c): cut points must never change between
 * versions, or a new cairn would find nothing of what an older one
 * stored.
 *
 * Pure; one struct chunker per stream, any number at once.
 */
#ifndef CAIRN_CHUNKER_H
#define CAIRN_CHUNKER_H

#include <stddef.h>
#include <stdint.h>

#define CHUNKER_MIN	(256u << 10)
#define CHUNKER_AVG	(1u << 20)
#define CHUNKER_MAX	(4u << 20)

struct chunker {
	uint64_t h;		/* gear hash */
	size_t len;		/* bytes of the current chunk so far */
};

/* A new stream (a file, or a data extent of one): the next byte starts a chunk. */
void chunker_reset(struct chunker *c);

/*
 * Scan n bytes of the stream. Returns how many of them belong to the
 * current chunk: fewer than n, or n with *cut 1, when the chunk ends after
 * them (the state is then reset for the next chunk); n with *cut 0 when
 * the chunk goes on past them.
 */
size_t chunker_scan(struct chunker *c, const unsigned char *p, size_t n,
	int *cut);

#endif
