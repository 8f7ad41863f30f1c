/*
 * isal_stack.c: does ISA-L's deflate give the same bytes for the same
 * input wherever its stream struct is? The finding behind
 * engine/gzmember.c (docs/architecture.md, "Dependencies").
 *
 * The file is cut in 8 KiB blocks (at most 400), each compressed once on
 * the main thread's stack (the reference), then again, block after block,
 * on a stack mapped at a pseudo-random address (makecontext: the same
 * thread, nothing else running), with the same input, output and working
 * buffers; the stream struct is a local, so it moves with the stack. A
 * stack is "different" when any block's member differs from its
 * reference. Run it with ASLR off (setarch -R) so that only the stack
 * moves; the seed picks the addresses, so a run can be repeated.
 *
 * usage: isal_stack FILE LEVEL STACKS [SEED]
 *   LEVEL: ISA-L's level, 0-3.
 * Prints each different stack and a last line "different=N stacks=M".
 * Exit 0 whatever it finds (a finding, not a test); 2 on bad usage.
 *
 * Seen with Debian's ISA-L 2.30: at level 2, 7 of 400 stacks differ, for
 * 1 to 3 blocks each, the same ones on every run (`setarch -R isal_stack
 * some.tar 2 400 7`, a tar of source text); none at level 3. The cause:
 * levels 1 and 2 hash bits 16-47 of the struct's address where they mean
 * to hash the input's third byte (engine/gzmember.c says where).
 */
#include <isa-l.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#define BLOCK 8192
#define MAXBLOCKS 400
#define OUTCAP (2 * BLOCK + 1024)
#define STACK (256u << 10)

static unsigned char *data;
static size_t nblocks;
static unsigned char *ref[MAXBLOCKS];
static size_t reflen[MAXBLOCKS];
static unsigned char *levbuf, *out;
static size_t levbuf_size;
static int level;
static long ndiff;			/* blocks of this stack that differ */
static long different, tried;		/* stacks (statics: swapcontext) */
static ucontext_t main_ctx, pass_ctx;

static size_t
compress_block(const unsigned char *in, unsigned char *dst)
{
	struct isal_zstream z;

	memset(&z, 0, sizeof z);
	isal_deflate_stateless_init(&z);
	z.level = (uint32_t)level;
	z.level_buf = levbuf;
	z.level_buf_size = (uint32_t)levbuf_size;
	z.gzip_flag = IGZIP_GZIP;
	z.end_of_stream = 1;
	z.flush = NO_FLUSH;
	z.next_in = (unsigned char *)in;
	z.avail_in = BLOCK;
	z.next_out = dst;
	z.avail_out = OUTCAP;
	if (isal_deflate_stateless(&z) != COMP_OK) {
		fprintf(stderr, "isal_stack: compressing failed\n");
		exit(1);
	}
	return z.total_out;
}

/* Every block again, on the stack being tried. */
static void
pass(void)
{
	size_t n;

	ndiff = 0;
	for (size_t b = 0; b < nblocks; b++) {
		n = compress_block(data + b * BLOCK, out);
		if (n != reflen[b] || memcmp(out, ref[b], n) != 0)
			ndiff++;
	}
}

static size_t
level_buf_size(int lvl)
{
	switch (lvl) {
	case 0:
		return 0;
	case 1:
		return ISAL_DEF_LVL1_DEFAULT;
	case 2:
		return ISAL_DEF_LVL2_DEFAULT;
	default:
		return ISAL_DEF_LVL3_DEFAULT;
	}
}

int
main(int argc, char **argv)
{
	FILE *f;
	long size, stacks;
	unsigned seed;

	if (argc < 4 || argc > 5) {
		fprintf(stderr, "usage: isal_stack FILE LEVEL STACKS [SEED]\n");
		return 2;
	}
	level = atoi(argv[2]);
	stacks = atol(argv[3]);
	seed = argc == 5 ? (unsigned)strtoul(argv[4], NULL, 10) : 1;
	if (level < 0 || level > 3 || stacks < 1) {
		fprintf(stderr, "isal_stack: LEVEL 0-3, STACKS >= 1\n");
		return 2;
	}
	if ((f = fopen(argv[1], "rb")) == NULL || fseek(f, 0, SEEK_END) != 0 ||
	    (size = ftell(f)) < BLOCK) {
		fprintf(stderr, "isal_stack: %s: cannot read %d bytes\n",
		    argv[1], BLOCK);
		return 2;
	}
	nblocks = (size_t)size / BLOCK;
	if (nblocks > MAXBLOCKS)
		nblocks = MAXBLOCKS;
	data = malloc(nblocks * BLOCK);
	rewind(f);
	if (data == NULL || fread(data, BLOCK, nblocks, f) != nblocks) {
		fprintf(stderr, "isal_stack: %s: read failed\n", argv[1]);
		return 2;
	}
	fclose(f);
	levbuf_size = level_buf_size(level);
	levbuf = levbuf_size ? malloc(levbuf_size) : NULL;
	out = malloc(OUTCAP);
	for (size_t b = 0; b < nblocks; b++) {
		ref[b] = malloc(OUTCAP);
		reflen[b] = compress_block(data + b * BLOCK, ref[b]);
	}

	srand(seed);
	while (tried < stacks) {
		unsigned long a = (((unsigned long)rand() << 12) ^
		    ((unsigned long)rand() << 28)) & 0x7ffffffff000UL;
		void *st;

		if (a < 0x100000000UL)
			continue;
		st = mmap((void *)a, STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE |
		    MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (st == MAP_FAILED)
			continue;	/* taken: another address */
		if (st != (void *)a) {	/* kernels before 4.17: only a hint */
			munmap(st, STACK);
			continue;
		}
		tried++;
		getcontext(&pass_ctx);
		pass_ctx.uc_stack.ss_sp = st;
		pass_ctx.uc_stack.ss_size = STACK;
		pass_ctx.uc_link = &main_ctx;
		makecontext(&pass_ctx, pass, 0);
		swapcontext(&main_ctx, &pass_ctx);
		if (ndiff > 0) {
			different++;
			printf("stack %p: %ld of %zu blocks differ\n", st, ndiff,
			    nblocks);
		}
		munmap(st, STACK);
	}
	printf("different=%ld stacks=%ld\n", different, stacks);
	return 0;
}
