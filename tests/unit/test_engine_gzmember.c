/*
 * test_engine_gzmember.c: whole gzip members by ISA-L. They read back
 * (zlib) to the input, fit the bound, and are the same bytes for the
 * same input from every gzmember, wherever its ISA-L stream lies (ISA-L
 * 2.30's levels 1 and 2 hash the stream's address; engine/gzmember.c).
 */
#include "config.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/mem.h"
#include "engine/gzmember.h"
#include "tests/unit/unit.h"

#define BLOCK (8u << 10)
#define NBLOCKS 400
#define NMEMBERS 200

/*
 * NBLOCKS blocks of text: cairn's own sources and docs, in name order
 * (what tests/helpers/isal_stack was run on). Returns the block count.
 */
static size_t
corpus(unsigned char *buf)
{
	static const char *dirs[] = { "kube", "engine", "docs", "tests/kubesim",
	    "base", "web", "storage" };
	size_t have = 0, cap = (size_t)NBLOCKS * BLOCK;

	for (size_t d = 0; d < sizeof dirs / sizeof dirs[0] && have < cap; d++) {
		char dir[600], path[1200];
		struct dirent **ents;
		int n;

		snprintf(dir, sizeof dir, "%s/%s", CAIRN_SRCDIR, dirs[d]);
		if ((n = scandir(dir, &ents, NULL, alphasort)) < 0)
			continue;
		for (int i = 0; i < n; i++) {
			FILE *f;
			const char *nm = ents[i]->d_name;
			size_t len = strlen(nm);

			if (len > 2 && (strcmp(nm + len - 2, ".c") == 0 ||
			    strcmp(nm + len - 2, ".h") == 0 ||
			    strcmp(nm + len - 3, ".md") == 0 ||
			    strcmp(nm + len - 3, ".py") == 0)) {
				snprintf(path, sizeof path, "%s/%s", dir, nm);
				if ((f = fopen(path, "rb")) != NULL) {
					have += fread(buf + have, 1, cap - have,
					    f);
					fclose(f);
				}
			}
			free(ents[i]);
		}
		free(ents);
	}
	return have / BLOCK;
}

/* gunzip one member; 0 if it holds exactly want[0..n). */
static int
gunzip_equals(const unsigned char *gz, size_t gzlen, const unsigned char *want,
	size_t n)
{
	unsigned char *out = xmalloc(n + 1);
	z_stream z;
	int rc, ok;

	memset(&z, 0, sizeof z);
	if (inflateInit2(&z, 15 + 16) != Z_OK)
		return -1;
	z.next_in = (unsigned char *)gz;
	z.avail_in = (uInt)gzlen;
	z.next_out = out;
	z.avail_out = (uInt)n + 1;
	rc = inflate(&z, Z_FINISH);
	ok = rc == Z_STREAM_END && z.total_out == n && z.avail_in == 0 &&
	    memcmp(out, want, n) == 0;
	inflateEnd(&z);
	free(out);
	return ok ? 0 : -1;
}

/* Members read back, at both ISA-L levels, and noise fits the bound. */
static void
test_members_read_back(void)
{
	static const int zlevels[] = { 1, 6 };
	unsigned char *in = xmalloc((size_t)NBLOCKS * BLOCK);
	size_t nb = corpus(in), cap = gzmember_bound(4 * BLOCK), outlen;
	unsigned char *out = xmalloc(cap);
	struct cairn_err err = CAIRN_ERR_INIT;
	uint64_t x = 88172645463325252ull;

	REQUIRE(nb >= 8);
	for (size_t l = 0; l < sizeof zlevels / sizeof zlevels[0]; l++) {
		struct gzmember *g = gzmember_new(zlevels[l]);

		CHECK(gzmember_pinned(g));
		for (size_t b = 0; b + 4 <= nb; b += 4) {
			REQUIRE(gzmember_compress(g, in + b * BLOCK, 4 * BLOCK,
			    out, cap, &outlen, &err) == 0);
			CHECK(outlen < 4 * BLOCK);
			CHECK(gunzip_equals(out, outlen, in + b * BLOCK,
			    4 * BLOCK) == 0);
		}
		for (size_t i = 0; i < 4 * BLOCK; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			in[i] = (unsigned char)x;
		}
		REQUIRE(gzmember_compress(g, in, 4 * BLOCK, out, cap, &outlen,
		    &err) == 0);
		CHECK(outlen <= cap);
		CHECK(gunzip_equals(out, outlen, in, 4 * BLOCK) == 0);
		CHECK(gzmember_compress(g, in, 4 * BLOCK, out, cap - 1, &outlen,
		    &err) == CAIRN_EFAIL);
		gzmember_free(g);
		nb = corpus(in);
	}
	free(out);
	free(in);
}

/*
 * NMEMBERS gzmembers at once (so their ISA-L streams lie at as many
 * addresses), each compressing every block: the same bytes as the
 * first. Without the pinning, about 1 stream in 50 gives other bytes for
 * some block of this corpus at level 2 (ISA-L 2.30).
 */
static void
test_same_bytes_anywhere(void)
{
	unsigned char *in = xmalloc((size_t)NBLOCKS * BLOCK);
	size_t nb = corpus(in), cap = gzmember_bound(BLOCK);
	unsigned char *ref = xmalloc(NBLOCKS * cap), *out = xmalloc(cap);
	size_t reflen[NBLOCKS], outlen;
	struct gzmember **g = xcalloc(NMEMBERS, sizeof(*g));
	struct cairn_err err = CAIRN_ERR_INIT;
	int differ = 0, pinned = 0;

	REQUIRE(nb >= 100);
	for (int m = 0; m < NMEMBERS; m++) {
		g[m] = gzmember_new(1);
		pinned += gzmember_pinned(g[m]);
	}
	for (size_t b = 0; b < nb; b++)
		REQUIRE(gzmember_compress(g[0], in + b * BLOCK, BLOCK,
		    ref + b * cap, cap, &reflen[b], &err) == 0);
	for (int m = 1; m < NMEMBERS; m++) {
		int d = 0;

		for (size_t b = 0; b < nb; b++) {
			REQUIRE(gzmember_compress(g[m], in + b * BLOCK, BLOCK,
			    out, cap, &outlen, &err) == 0);
			if (outlen != reflen[b] ||
			    memcmp(out, ref + b * cap, outlen) != 0)
				d = 1;
		}
		differ += d;
	}
	CHECK_INT(pinned, NMEMBERS);
	CHECK_INT(differ, 0);
	for (int m = 0; m < NMEMBERS; m++)
		gzmember_free(g[m]);
	free(g);
	free(out);
	free(ref);
	free(in);
}

int
main(void)
{
	RUN(test_members_read_back);
	RUN(test_same_bytes_anywhere);
	return unit_done();
}
