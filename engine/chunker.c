/*
 * chunker.c: FastCDC cut points. Contract in chunker.h.
 *
 * The gear table: gear[i] is the first 8 bytes (big-endian) of
 * SHA-256("cairn gear v1" followed by the byte i), computed once. Masks
 * test the top bits of the hash (the bits that depend on the last 64
 * bytes; the low bits depend only on the last few): 22 bits below the
 * average size, 18 above (FastCDC's normalization level 2 around
 * 2^20). Bytes before CHUNKER_MIN - 64 cannot influence the hash at the
 * first place a cut is allowed, so they are skipped unhashed (FastCDC's
 * "sub-minimum skip"): most of the cost is the hashing of the bytes
 * between the minimum and the cut.
 */
#include "config.h"
#include "engine/chunker.h"

#include <pthread.h>
#include <string.h>
#include <openssl/evp.h>

#define MASK_HARD	(~0ULL << (64 - 22))
#define MASK_EASY	(~0ULL << (64 - 18))
#define WINDOW		64

static uint64_t gear[256];
static pthread_once_t gear_once = PTHREAD_ONCE_INIT;

static void
gear_init(void)
{
	static const char tag[] = "cairn gear v1";
	unsigned char in[sizeof tag], md[EVP_MAX_MD_SIZE];
	unsigned int mdlen;

	memcpy(in, tag, sizeof tag - 1);
	for (int i = 0; i < 256; i++) {
		uint64_t v = 0;

		in[sizeof tag - 1] = (unsigned char)i;
		EVP_Digest(in, sizeof in, md, &mdlen, EVP_sha256(), NULL);
		for (int k = 0; k < 8; k++)
			v = v << 8 | md[k];
		gear[i] = v;
	}
}

void
chunker_reset(struct chunker *c)
{
	pthread_once(&gear_once, gear_init);
	c->h = 0;
	c->len = 0;
}

size_t
chunker_scan(struct chunker *c, const unsigned char *p, size_t n, int *cut)
{
	size_t i = 0, skip;
	uint64_t h = c->h;

	*cut = 0;
	/* Bytes that cannot reach the hash at the first allowed cut. */
	if (c->len < CHUNKER_MIN - WINDOW) {
		skip = CHUNKER_MIN - WINDOW - c->len;
		if (skip >= n) {
			c->len += n;
			return n;
		}
		i = skip;
		c->len += skip;
		h = 0;
	}
	for (; i < n; i++) {
		h = (h << 1) + gear[p[i]];
		c->len++;
		if (c->len < CHUNKER_MIN)
			continue;
		if ((h & (c->len < CHUNKER_AVG ? MASK_HARD : MASK_EASY)) == 0 ||
		    c->len >= CHUNKER_MAX) {
			*cut = 1;
			c->h = 0;
			c->len = 0;
			return i + 1;
		}
	}
	c->h = h;
	return n;
}
