/*
 * gzmember.c: whole gzip members by ISA-L, the same bytes wherever the
 * stream struct lies. See gzmember.h for the contract.
 *
 * The ISA-L fault (2.30, Debian 12's; tests/helpers/isal_stack shows it).
 * Levels 1 and 2 run isal_deflate_icf_body_hash_hist_{01,02,04} (one per
 * instruction set, all from igzip_icf_body_h1_gr_bt.asm). On a stream's
 * first call the routine writes the first byte through its
 * write_first_byte path, which hashes the third byte's 4-byte window to
 * file position 2 in the hash table. That hash is taken from rcx (tmp2),
 * which the prologue was meant to load with the input (as it loads rsi,
 * tmp1) but does not: rcx still holds the stream pointer, copied there
 * from rdi at entry. So position 2 is filed under
 *
 *	crc32c(0, (uint32_t)(stream address >> 16)) & hash_mask
 *
 * instead of under the hash of its bytes. The member stays valid (every
 * match is checked against the bytes), but a later position that hashes
 * to that slot may match against position 2 where it would not have,
 * and a later position with position 2's bytes misses it: a few bytes
 * more or less, for 1 to 3 % of stream addresses on a given batch, the
 * same for the same address. Found by tracing the routine's registers
 * for one batch with the struct at two addresses (the first value that
 * differed was rcx >> 16 fed to crc32); structs at unrelated addresses
 * that hash to the same slot give the same bytes.
 *
 * The remedy: each gzmember's struct is mapped at an address whose bits
 * 16-47 hash to GZ_SLOT in the low 16 bits, so the fault files position
 * 2 in the same slot of any hash table up to 64 Ki slots (ISA-L's are at
 * most 32 Ki), in every thread and process. The output is then a fixed
 * function of the batch. An ISA-L without the fault ignores the address
 * anyway; levels 3 and above run other code and have no such read. The
 * hash is ISA-L's own crc32_iscsi(), the CRC-32C the crc32 instruction
 * computes (same seed, no inversion).
 *
 * Finding such an address: walk 64 KiB windows down from where the
 * kernel would map (the mmap area grows downwards, so they are usually
 * free) and, for each window whose hash matches, map there with the
 * window as a hint; a hint is honoured when the range is free, and
 * whatever address comes back is checked again. One window in 65,536
 * matches: about 65,536 CRCs of 4 bytes per struct, well under a
 * millisecond, a few GiB of address space apart. The next walk goes on
 * below the last match, and a freed gzmember's struct is kept for the
 * next one (a server starts compression threads for every backup), so a
 * process maps at most as many structs as it ever had gzmembers at once.
 */
#include "config.h"
#include "engine/gzmember.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <isa-l/crc.h>
#include <isa-l/igzip_lib.h>

#include "base/log.h"
#include "base/mem.h"

/* The slot (low 16 bits of the hash) every struct's address hashes to. */
#define GZ_SLOT		0x5a17u
/* Matching windows tried, per struct, before giving up on pinning. */
#define GZ_TRIES	64
/* Freed structs kept for reuse. */
#define GZ_POOL		64

struct gzmember {
	struct isal_zstream *z;		/* pinned (mapped) or xmalloc'd */
	int pinned;
	int level;			/* ISA-L's */
	unsigned char *levbuf;		/* ISA-L's working memory */
	size_t levbuf_size;
};

/* The pinned structs: how they are found and kept (see above). */
static pthread_mutex_t gz_mu = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t gz_next;		/* next window to look at; 0: none */
static void *gz_pool[GZ_POOL];		/* free ones */
static int gz_npool;

/* Bytes mapped for one struct. */
static size_t
gz_map_size(void)
{
	return (sizeof(struct isal_zstream) + 4095) & ~(size_t)4095;
}

/* Whether a 64 KiB window number (address >> 16) hashes to GZ_SLOT. */
static int
gz_window_ok(uintptr_t win)
{
	uint32_t w = (uint32_t)win;
	unsigned char b[4];

	/* the instruction reads the register: its bytes, little-endian */
	b[0] = (unsigned char)w;
	b[1] = (unsigned char)(w >> 8);
	b[2] = (unsigned char)(w >> 16);
	b[3] = (unsigned char)(w >> 24);
	return (crc32_iscsi(b, 4, 0) & 0xffffu) == GZ_SLOT;
}

/* Under gz_mu: map a new pinned struct, or NULL. */
static void *
gz_map_pinned(void)
{
	size_t size = gz_map_size();
	void *p;
	int tries = 0;

	if (gz_next == 0) {
		p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE |
		    MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return NULL;
		gz_next = ((uintptr_t)p >> 16) - 1;
		munmap(p, size);
	}
	/* down to 4 GiB at most */
	for (; tries < GZ_TRIES && gz_next > 0x10000; gz_next--) {
		if (!gz_window_ok(gz_next))
			continue;
		tries++;
		p = mmap((void *)(gz_next << 16), size, PROT_READ |
		    PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return NULL;
		if (gz_window_ok((uintptr_t)p >> 16)) {
			gz_next--;
			return p;
		}
		munmap(p, size);
	}
	return NULL;
}

/* A pinned struct, reused or mapped; NULL if none could be mapped. */
static struct isal_zstream *
gz_take(void)
{
	void *p;

	pthread_mutex_lock(&gz_mu);
	p = gz_npool > 0 ? gz_pool[--gz_npool] : gz_map_pinned();
	pthread_mutex_unlock(&gz_mu);
	return p;
}

static void
gz_give(struct isal_zstream *z)
{
	pthread_mutex_lock(&gz_mu);
	if (gz_npool < GZ_POOL) {
		gz_pool[gz_npool++] = z;
		z = NULL;
	}
	pthread_mutex_unlock(&gz_mu);
	if (z != NULL)
		munmap(z, gz_map_size());
}

struct gzmember *
gzmember_new(int zlevel)
{
	static atomic_int warned;
	struct gzmember *g = xcalloc(1, sizeof(*g));

	g->level = zlevel >= 0 && zlevel <= 3 ? 2 : 3;
	g->levbuf_size = g->level == 2 ? ISAL_DEF_LVL2_DEFAULT :
	    ISAL_DEF_LVL3_DEFAULT;
	g->levbuf = xmalloc(g->levbuf_size);
	if ((g->z = gz_take()) != NULL) {
		g->pinned = 1;
	} else {
		g->z = xmalloc(sizeof(*g->z));
		if (!atomic_exchange(&warned, 1))
			log_warn("no pinned address for ISA-L's stream: "
			    "tarballs stay valid, but their bytes may differ "
			    "between runs of the same backup");
	}
	return g;
}

size_t
gzmember_bound(size_t len)
{
	/* deflate's stored blocks at worst, with the gzip header/trailer */
	return len + (len >> 6) + 1024;
}

int
gzmember_compress(struct gzmember *g, const void *in, size_t len,
	void *out, size_t outcap, size_t *outlen, struct cairn_err *err)
{
	struct isal_zstream *z = g->z;
	int rc;

	if (len > UINT32_MAX || outcap < gzmember_bound(len))
		return cairn_err_set(err, CAIRN_EFAIL, "ISA-L: a batch of %zu "
		    "bytes into %zu", len, outcap);
	/* zeroed first: the same state whatever the last batch left */
	memset(z, 0, sizeof(*z));
	isal_deflate_stateless_init(z);
	z->level = (uint32_t)g->level;
	z->level_buf = g->levbuf;
	z->level_buf_size = (uint32_t)g->levbuf_size;
	z->gzip_flag = IGZIP_GZIP;
	z->end_of_stream = 1;
	z->flush = NO_FLUSH;
	z->next_in = (uint8_t *)(uintptr_t)in;
	z->avail_in = (uint32_t)len;
	z->next_out = out;
	z->avail_out = outcap > UINT32_MAX ? UINT32_MAX : (uint32_t)outcap;
	rc = isal_deflate_stateless(z);
	if (rc != COMP_OK)
		return cairn_err_set(err, CAIRN_EFAIL, "ISA-L: compressing a "
		    "batch failed (%d)", rc);
	*outlen = z->total_out;
	return 0;
}

int
gzmember_pinned(const struct gzmember *g)
{
	return g->pinned;
}

void
gzmember_free(struct gzmember *g)
{
	if (g == NULL)
		return;
	if (g->pinned)
		gz_give(g->z);
	else
		free(g->z);
	free(g->levbuf);
	free(g);
}
