/*
 * test_chunks.c: deduplicated copies of the hostpath mover (issue 25)
 * against local-directory stores, plain and encrypting:
 *  - cut points are content-defined: an insertion moves only the chunks
 *    around it;
 *  - a copy restores byte-identical (sparse files stay sparse, modes,
 *    links, odd names: tests/helpers/volume_tree.py compares);
 *  - a second copy built on the first stores only what changed (a file
 *    rewritten with its mtime set back is still seen, by its ctime), and
 *    both restore;
 *  - a copy stopped after two parts and resumed, and one taken over, end
 *    with exact refs and restore;
 *  - deleting the older backup frees only the packs nothing else uses
 *    and the newer one still restores; a copy in progress keeps its packs;
 *  - in an encrypting location chunk names are keyed (no plain SHA-256 of
 *    a chunk anywhere in storage) and every pack is encrypted.
 */
#include "config.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/evp.h>

#include "base/mem.h"
#include "base/util.h"
#include "engine/chunker.h"
#include "engine/chunks.h"
#include "engine/hostpath.h"
#include "storage/crypt.h"
#include "storage/store.h"
#include "tests/unit/unit.h"

static char tmp[1024];

static int
sh_run(char *cmd)
{
	int rc = system(cmd);

	free(cmd);
	return rc;
}
#define sh(...) sh_run(xasprintf(__VA_ARGS__))

static int
tree_same(const char *a, const char *b)
{
	return sh("python3 " CAIRN_SRCDIR "/tests/helpers/volume_tree.py "
	    "compare '%s' '%s'", a, b) == 0;
}

/* ---- cut points ------------------------------------------------------- */

struct cuts {
	size_t n;
	size_t len[64];
	unsigned char md[64][32];
};

static void
cut_all(const unsigned char *p, size_t n, size_t step, struct cuts *c)
{
	struct chunker ck;
	size_t start = 0, i = 0, used, k;
	int cut;

	memset(c, 0, sizeof *c);
	chunker_reset(&ck);
	while (i < n) {
		k = n - i < step ? n - i : step;
		used = chunker_scan(&ck, p + i, k, &cut);
		i += used;
		if (cut || i == n) {
			unsigned int l;

			c->len[c->n] = i - start;
			EVP_Digest(p + start, i - start, c->md[c->n], &l,
			    EVP_sha256(), NULL);
			c->n++;
			start = i;
		}
	}
}

static void
test_cut_points(void)
{
	size_t n = 24u << 20, same = 0;
	unsigned char *a = xmalloc(n), *b = xmalloc(n + 100);
	struct cuts *ca = xcalloc(1, sizeof *ca), *cb = xcalloc(1, sizeof *cb);
	FILE *f = fopen("/dev/urandom", "rb");

	REQUIRE(f != NULL && fread(a, 1, n, f) == n);
	fclose(f);
	/* Read in any steps: the same cuts. */
	cut_all(a, n, 1u << 20, ca);
	cut_all(a, n, 4093, cb);
	CHECK(ca->n == cb->n);
	CHECK(memcmp(ca->md, cb->md, sizeof ca->md) == 0);
	CHECK(ca->n >= 6 && ca->n <= 64);
	for (size_t i = 0; i + 1 < ca->n; i++)
		CHECK(ca->len[i] >= CHUNKER_MIN && ca->len[i] <= CHUNKER_MAX);
	/* 100 bytes inserted in the middle: the chunks away from it stay. */
	memcpy(b, a, n / 2);
	memset(b + n / 2, 'x', 100);
	memcpy(b + n / 2 + 100, a + n / 2, n - n / 2);
	cut_all(b, n + 100, 1u << 20, cb);
	for (size_t i = 0; i < ca->n; i++)
		for (size_t j = 0; j < cb->n; j++)
			if (memcmp(ca->md[i], cb->md[j], 32) == 0) {
				same++;
				break;
			}
	CHECK(same + 2 >= ca->n);
	/* Zeros: the longest chunks. */
	memset(a, 0, n);
	cut_all(a, n, 1u << 20, ca);
	CHECK(ca->len[0] == CHUNKER_MAX);
	free(a);
	free(b);
	free(ca);
	free(cb);
}

/* ---- copies ------------------------------------------------------------- */

struct world {
	struct store *s;
	char *root;		/* fs store root */
	const char *prefix;
	char *cdir;		/* chunks_volume_dir(prefix, "pv") */
};

static void
world_open(struct world *w, const char *name, struct crypt_keyring *kr)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct store *fs = NULL;

	memset(w, 0, sizeof *w);
	w->root = xasprintf("%s/%s", tmp, name);
	w->prefix = "pfx";
	w->cdir = chunks_volume_dir(w->prefix, "pv");
	REQUIRE(store_open_fs(w->root, 1, &fs, &err) == 0);
	if (kr == NULL) {
		w->s = fs;
		return;
	}
	REQUIRE(store_open_crypt(fs, kr, 0, &w->s, &err) == 0);
}

static void
world_close(struct world *w)
{
	store_free(w->s);
	free(w->root);
	free(w->cdir);
}

struct stopper {
	int stop_after, n;
	struct hostpath_ckpt ck;
};

static int
stop_ckpt(void *arg, const struct hostpath_ckpt *ck, struct cairn_err *err)
{
	struct stopper *sp = arg;
	char enc[HOSTPATH_CKPT_MAX];

	sp->n++;
	if (hostpath_ckpt_encode(ck, enc, sizeof enc) == 0)
		hostpath_ckpt_decode(enc, &sp->ck);
	if (sp->stop_after > 0 && sp->n >= sp->stop_after)
		return cairn_err_set(err, CAIRN_ECANCELED, "simulated crash");
	return 0;
}

/* Options of a copy of backup b (parent p or NULL) of volume "pv". */
static void
copy_opts(struct world *w, struct hostpath_opts *o, const char *b,
    const char *p, char **pindex)
{
	memset(o, 0, sizeof *o);
	o->part_size = 64 << 10;
	o->spool_dir = tmp;
	o->chunk_dir = w->cdir;
	o->backup = b;
	o->parent = p;
	*pindex = p != NULL ? hostpath_key(w->prefix, p, "pv") : NULL;
	o->parent_index = *pindex;
}

static int
copy(struct world *w, const char *src, const char *b, const char *p,
    struct hostpath_stats *st)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct hostpath_opts o;
	char *key = hostpath_key(w->prefix, b, "pv"), *pindex;
	int rc;

	copy_opts(w, &o, b, p, &pindex);
	rc = hostpath_backup(w->s, key, src, &o, st, &err);
	if (rc < 0)
		fprintf(stderr, "copy %s: %s\n", b, err.msg);
	free(key);
	free(pindex);
	return rc;
}

static int
restore(struct world *w, const char *b, const char *dst)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct hostpath_opts o;
	char *key = hostpath_key(w->prefix, b, "pv");
	int rc;

	memset(&o, 0, sizeof o);
	o.chunk_dir = w->cdir;
	rc = hostpath_restore(w->s, key, dst, &o, NULL, &err);
	if (rc < 0)
		fprintf(stderr, "restore %s: %s\n", b, err.msg);
	free(key);
	return rc;
}

/* Packs and their bytes under root/sub (recursive). */
static void
du(const char *root, const char *sub, size_t *files, uint64_t *bytes)
{
	char *p = xasprintf("%s/%s", root, sub), *cmd, line[128];
	FILE *f;

	*files = 0;
	*bytes = 0;
	cmd = xasprintf("find '%s' -type f -name '*.pack' -printf '%%s\\n' "
	    "2>/dev/null", p);
	f = popen(cmd, "r");
	while (f != NULL && fgets(line, sizeof line, f) != NULL) {
		(*files)++;
		*bytes += strtoull(line, NULL, 10);
	}
	if (f != NULL)
		pclose(f);
	free(cmd);
	free(p);
}

static void
test_roundtrip_and_incremental(void)
{
	struct world w;
	struct hostpath_stats s1, s2, s3;
	char *src = xasprintf("%s/src", tmp), *v1 = xasprintf("%s/src-v1", tmp);
	char *d1 = xasprintf("%s/d1", tmp), *d2 = xasprintf("%s/d2", tmp);
	char *sparse;
	struct stat sb;

	REQUIRE(sh("python3 " CAIRN_SRCDIR "/tests/helpers/volume_tree.py "
	    "make '%s' --mb 12", src) == 0);
	REQUIRE(sh("cp -a '%s' '%s'", src, v1) == 0);
	world_open(&w, "store-plain", NULL);
	CHECK_INT(copy(&w, src, "b1", NULL, &s1), 0);
	CHECK(s1.bytes_done == s1.bytes_total);
	CHECK(s1.bytes_read > (10u << 20));	/* holes are not read */
	CHECK(s1.chunks_new > 10);
	CHECK_STR(s1.hash_name, "sha256");
	CHECK_STR(s1.parent, "");
	/* A second copy of the unchanged tree: nothing read, the index only. */
	CHECK_INT(copy(&w, src, "b2", "b1", &s2), 0);
	CHECK_STR(s2.parent, "b1");
	CHECK(s2.bytes_read == 0);
	CHECK(s2.chunks_new == 0);
	CHECK(s2.files_unchanged > 20);
	CHECK(s2.bytes_uploaded == s2.compressed);	/* no pack */
	/* Change a few files (mtimes set back): only those are read and sent. */
	REQUIRE(sh("python3 " CAIRN_SRCDIR "/tests/helpers/volume_tree.py "
	    "change '%s' --percent 10 >/dev/null", src) == 0);
	CHECK_INT(copy(&w, src, "b3", "b2", &s3), 0);
	CHECK(s3.bytes_read > 0);
	CHECK(s3.bytes_read < s1.bytes_read / 2);
	CHECK(s3.chunks_new > 0);
	CHECK(s3.chunks_new <= s3.chunks_new + s3.chunks_reused);
	CHECK(s3.bytes_uploaded < s1.bytes_uploaded / 3);
	fprintf(stderr, "first copy %llu bytes stored, after 10%% of files "
	    "changed %llu\n", (unsigned long long)s1.bytes_uploaded,
	    (unsigned long long)s3.bytes_uploaded);
	/* Each restores to its own tree. */
	CHECK_INT(restore(&w, "b1", d1), 0);
	CHECK(tree_same(v1, d1));
	CHECK_INT(restore(&w, "b3", d2), 0);
	CHECK(tree_same(src, d2));
	sparse = xasprintf("%s/sparse.img", d2);
	CHECK(stat(sparse, &sb) == 0);
	CHECK(sb.st_size == (64 << 20));
	CHECK((uint64_t)sb.st_blocks * 512 < (4u << 20));
	/* Without the chunk location a chunked index is refused clearly. */
	{
		struct cairn_err err = CAIRN_ERR_INIT;
		char *key = hostpath_key(w.prefix, "b1", "pv");
		char *d3 = xasprintf("%s/d3", tmp);

		CHECK(hostpath_restore(w.s, key, d3, NULL, NULL, &err) < 0);
		CHECK(strstr(err.msg, "no chunk location") != NULL);
		free(key);
		free(d3);
	}
	free(sparse);
	world_close(&w);
	free(src);
	free(v1);
	free(d1);
	free(d2);
}

/* Delete backup b as gc_clean_backup() does: release, then its folder. */
static int
delete_backup(struct world *w, const char *b, size_t *packs)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	char *dir = xasprintf("%s/backups/%s/", w->prefix, b);
	int rc;

	rc = chunks_release(w->s, w->prefix, b, packs, NULL, &err);
	if (rc == 0)
		rc = store_delete_prefix(w->s, dir, NULL, &err);
	if (rc < 0)
		fprintf(stderr, "delete %s: %s\n", b, err.msg);
	free(dir);
	return rc;
}

static void
test_delete_frees_only_unused(void)
{
	struct world w;
	struct hostpath_stats st;
	char *src = xasprintf("%s/src-del", tmp), *d = xasprintf("%s/d-del", tmp);
	char *packdir, *orphan, *refs;
	size_t n0, n1, n2, freed = 0;
	uint64_t b0, b1, b2;

	REQUIRE(sh("python3 " CAIRN_SRCDIR "/tests/helpers/volume_tree.py "
	    "make '%s' --mb 6 --seed 3", src) == 0);
	world_open(&w, "store-del", NULL);
	packdir = xasprintf("%s/packs", w.cdir);
	CHECK_INT(copy(&w, src, "old", NULL, &st), 0);
	du(w.root, packdir, &n0, &b0);
	REQUIRE(sh("python3 " CAIRN_SRCDIR "/tests/helpers/volume_tree.py "
	    "change '%s' --percent 20 --seed 9 >/dev/null", src) == 0);
	CHECK_INT(copy(&w, src, "new", "old", &st), 0);
	du(w.root, packdir, &n1, &b1);
	CHECK(n1 > n0);
	/* A copy in progress (refs not final) owns an unnamed pack. */
	orphan = xasprintf("%s/%s/busy-00112233aabbccdd.pack", w.root, packdir);
	refs = xasprintf("%s/%s/refs/busy.json", w.root, w.cdir);
	CHECK(sh("printf x > '%s' && printf '{\"version\":1,\"final\":false,"
	    "\"hash\":\"sha256\",\"packs\":[]}' > '%s'", orphan, refs) == 0);
	du(w.root, packdir, &n1, &b1);
	/* Deleting the older backup frees the packs only it used. */
	CHECK_INT(delete_backup(&w, "old", &freed), 0);
	du(w.root, packdir, &n2, &b2);
	CHECK(freed > 0);
	CHECK(n2 == n1 - freed);
	CHECK(n2 < n1);
	CHECK(access(orphan, F_OK) == 0);
	CHECK_INT(restore(&w, "new", d), 0);
	CHECK(tree_same(src, d));
	/* Deleting it again changes nothing (idempotent). */
	CHECK_INT(delete_backup(&w, "old", &freed), 0);
	CHECK(freed == 0);
	/* Once the busy copy is gone too, deleting the last frees the rest. */
	CHECK(unlink(refs) == 0);
	CHECK_INT(delete_backup(&w, "new", &freed), 0);
	du(w.root, packdir, &n2, &b2);
	CHECK(n2 == 0);
	free(orphan);
	free(refs);
	free(packdir);
	world_close(&w);
	free(src);
	free(d);
}

/* Stopped after two parts, resumed; taken over; both exact and restorable. */
static void
test_resume_and_takeover(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct world w;
	struct hostpath_opts o;
	struct hostpath_stats st;
	struct stopper sp;
	struct hostpath_ckpt ck;
	char *src = xasprintf("%s/src-res", tmp), *d = xasprintf("%s/d-res", tmp);
	char *key, *pindex, *d2 = xasprintf("%s/d-take", tmp);
	size_t freed;

	REQUIRE(sh("python3 " CAIRN_SRCDIR "/tests/helpers/volume_tree.py "
	    "make '%s' --mb 6 --seed 5", src) == 0);
	/* many small files: an index of many parts */
	REQUIRE(sh("python3 -c 'import os\n"
	    "os.makedirs(\"%s/many\")\n"
	    "for i in range(1500): open(\"%s/many/f%%d\" %% i, \"wb\")"
	    ".write(os.urandom(3000))'", src, src) == 0);
	world_open(&w, "store-res", NULL);
	CHECK_INT(copy(&w, src, "base", NULL, &st), 0);
	REQUIRE(sh("python3 " CAIRN_SRCDIR "/tests/helpers/volume_tree.py "
	    "change '%s' --percent 30 --seed 11 >/dev/null", src) == 0);
	/* An incremental copy stopped after its second index part. */
	key = hostpath_key(w.prefix, "inc", "pv");
	copy_opts(&w, &o, "inc", "base", &pindex);
	o.part_size = 4 << 10;		/* many index parts */
	memset(&sp, 0, sizeof sp);
	sp.stop_after = 2;
	o.checkpoint = stop_ckpt;
	o.arg = &sp;
	CHECK_INT(hostpath_backup(w.s, key, src, &o, &st, &err),
	    CAIRN_ECANCELED);
	ck = sp.ck;
	CHECK(ck.bytes_uploaded > 0);
	/* The older backup goes while the copy is stopped: its pin holds. */
	CHECK_INT(delete_backup(&w, "base", &freed), 0);
	/* Resumed (a restart): finishes, its refs read back from the index. */
	memset(&sp, 0, sizeof sp);
	o.resume = &ck;
	cairn_err_clear(&err);
	CHECK_INT(hostpath_backup(w.s, key, src, &o, &st, &err), 0);
	if (err.code)
		fprintf(stderr, "resume: %s\n", err.msg);
	CHECK(st.bytes_uploaded >= ck.bytes_uploaded);
	CHECK_INT(restore(&w, "inc", d), 0);
	CHECK(tree_same(src, d));
	/* Nothing it uses was freed; deleting it frees everything. */
	CHECK_INT(delete_backup(&w, "inc", &freed), 0);
	CHECK(freed > 0);
	free(key);
	free(pindex);

	/* Takeover: another owner's published checkpoint resumed as foreign. */
	CHECK_INT(copy(&w, src, "t0", NULL, &st), 0);
	REQUIRE(sh("python3 " CAIRN_SRCDIR "/tests/helpers/volume_tree.py "
	    "change '%s' --percent 30 --seed 12 >/dev/null", src) == 0);
	key = hostpath_key(w.prefix, "t1", "pv");
	copy_opts(&w, &o, "t1", "t0", &pindex);
	o.part_size = 4 << 10;
	memset(&sp, 0, sizeof sp);
	sp.stop_after = 1;
	o.checkpoint = stop_ckpt;
	o.arg = &sp;
	CHECK_INT(hostpath_backup(w.s, key, src, &o, &st, &err),
	    CAIRN_ECANCELED);
	ck = sp.ck;
	/* the old owner goes on a little (unpublished) */
	memset(&sp, 0, sizeof sp);
	sp.stop_after = 1;
	o.resume = &ck;
	CHECK_INT(hostpath_backup(w.s, key, src, &o, &st, &err),
	    CAIRN_ECANCELED);
	/* the new owner, from the published checkpoint */
	memset(&sp, 0, sizeof sp);
	o.resume_foreign = 1;
	cairn_err_clear(&err);
	CHECK_INT(hostpath_backup(w.s, key, src, &o, &st, &err), 0);
	if (err.code)
		fprintf(stderr, "takeover: %s\n", err.msg);
	CHECK_INT(delete_backup(&w, "t0", &freed), 0);
	CHECK_INT(restore(&w, "t1", d2), 0);
	CHECK(tree_same(src, d2));
	free(key);
	free(pindex);
	world_close(&w);
	free(src);
	free(d);
	free(d2);
}

/* Does any file under root hold the 32 bytes needle (or its hex)? */
static int
store_holds(const char *root, const unsigned char *needle)
{
	char hex[65], *cmd;
	int found;

	str_hex(needle, 32, hex);
	cmd = xasprintf("grep -rqa -e '%s' '%s' || find '%s' -name '*%s*' | "
	    "grep -q . || python3 -c 'import os,sys\n"
	    "n=bytes.fromhex(\"%s\")\n"
	    "for d,_,fs in os.walk(\"%s\"):\n"
	    " for f in fs:\n"
	    "  if n in open(os.path.join(d,f),\"rb\").read(): sys.exit(0)\n"
	    "sys.exit(1)'", hex, root, root, hex, hex, root);
	found = system(cmd) == 0;
	free(cmd);
	return found;
}

static void
test_encrypted_location(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct crypt_keyring *kr = crypt_keyring_new();
	unsigned char key[CRYPT_KEY_LEN], md[32];
	unsigned int mdl;
	struct world w, plain;
	struct hostpath_stats s1, s2;
	char *src = xasprintf("%s/src-enc", tmp), *d = xasprintf("%s/d-enc", tmp);
	char *f, *data;
	size_t len;

	memset(key, 7, sizeof key);
	REQUIRE(crypt_keyring_add(kr, "k1", key, &err) == 0);
	REQUIRE(crypt_keyring_set_current(kr, "k1", &err) == 0);
	REQUIRE(sh("mkdir -p '%s' && head -c 200000 /dev/urandom > '%s/small' "
	    "&& head -c 3000000 /dev/urandom > '%s/big'", src, src, src) == 0);
	world_open(&w, "store-enc", kr);
	CHECK_INT(copy(&w, src, "e1", NULL, &s1), 0);
	CHECK(strncmp(s1.hash_name, "hmac-sha256:k1", 14) == 0);
	/* A small file is one chunk: its plain SHA-256 is nowhere stored. */
	f = xasprintf("%s/small", src);
	REQUIRE(buf_read_file(f, 1u << 20, "file", &data, &len, &err) == 0);
	EVP_Digest(data, len, md, &mdl, EVP_sha256(), NULL);
	CHECK(!store_holds(w.root, md));
	/* ... while a plain location names the chunk by it (the check works). */
	world_open(&plain, "store-enc-plain", NULL);
	CHECK_INT(copy(&plain, src, "p1", NULL, &s2), 0);
	CHECK(store_holds(plain.root, md));
	world_close(&plain);
	/* Packs are encrypted: the file's bytes are nowhere in the clear. */
	CHECK(sh("python3 -c 'import os,sys\n"
	    "n=open(\"%s\",\"rb\").read()[1000:1064]\n"
	    "for dp,_,fs in os.walk(\"%s\"):\n"
	    " for x in fs:\n"
	    "  if n in open(os.path.join(dp,x),\"rb\").read(): sys.exit(1)\n'",
	    f, w.root) == 0);
	/* Incremental there too, and restorable. */
	CHECK_INT(copy(&w, src, "e2", "e1", &s2), 0);
	CHECK_STR(s2.parent, "e1");
	CHECK(s2.chunks_new == 0);
	CHECK_INT(restore(&w, "e2", d), 0);
	CHECK(tree_same(src, d));
	free(data);
	free(f);
	world_close(&w);
	free(src);
	free(d);
}

int
main(void)
{
	signal(SIGPIPE, SIG_IGN);
	snprintf(tmp, sizeof tmp, "%s/chunks-%d", UNIT_TMPDIR(), (int)getpid());
	mkdir(tmp, 0700);
	RUN(test_cut_points);
	RUN(test_roundtrip_and_incremental);
	RUN(test_delete_frees_only_unused);
	RUN(test_resume_and_takeover);
	RUN(test_encrypted_location);
	return unit_done();
}
