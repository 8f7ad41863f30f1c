/*
 * test_hostpath.c: the hostpath mover against a local-directory store:
 * a tree with sparse files, symlinks, odd names and modes goes up in
 * several parts and comes back identical (tests/helpers/volume_tree.py
 * compares); GNU tar reads the object; a copy stopped after two parts
 * resumes from its checkpoint; hostile archives write nothing outside
 * the target.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/mem.h"
#include "base/util.h"
#include "engine/hostpath.h"
#include "storage/store.h"
#include "tests/unit/unit.h"

static char tmp[1024];

/* Run a shell command (owned text). */
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

struct rec {
	uint64_t last, total, calls, files;
	int monotonic;
	int stop_after;		/* checkpoint: fail after this many parts */
	struct hostpath_ckpt ck;
	int nck;
};

static void
rec_progress(void *arg, const struct hostpath_progress *p)
{
	struct rec *r = arg;

	if (p->bytes_done < r->last)
		r->monotonic = 0;
	r->last = p->bytes_done;
	r->total = p->bytes_total;
	r->files = p->files_done;
	r->calls++;
}

static int
rec_ckpt(void *arg, const struct hostpath_ckpt *ck, struct cairn_err *err)
{
	struct rec *r = arg;
	char enc[HOSTPATH_CKPT_MAX];

	r->nck++;
	/* Round-trip through the journal encoding, as volumes_backup.c does. */
	if (hostpath_ckpt_encode(ck, enc, sizeof enc) == 0)
		hostpath_ckpt_decode(enc, &r->ck);
	if (r->stop_after > 0 && r->nck >= r->stop_after)
		return cairn_err_set(err, CAIRN_ECANCELED, "simulated crash");
	return 0;
}

static void
test_path_cmp_and_key(void)
{
	char *k;

	CHECK(str_path_cmp("a", "a/x") < 0);
	CHECK(str_path_cmp("a/x", "a.b") < 0);	/* walk order, not strcmp */
	CHECK(strcmp("a/x", "a.b") > 0);
	CHECK(str_path_cmp("a/x", "a/x") == 0);
	CHECK(str_path_cmp("b", "a/z/z") > 0);
	CHECK(str_path_cmp("a/b/c", "a/b") > 0);
	k = hostpath_key("pre", "b1", "pv-1");
	CHECK_STR(k, "pre/backups/b1/volumes/pv-1.index.tar.gz");
	free(k);
	k = hostpath_key(NULL, "b1", "pv-1");
	CHECK_STR(k, "backups/b1/volumes/pv-1.index.tar.gz");
	free(k);
	CHECK(hostpath_key(NULL, "b1", "../x") == NULL);
	CHECK(hostpath_key(NULL, "a/b", "x") == NULL);
}

static void
test_ckpt_encoding(void)
{
	struct hostpath_ckpt a, b;
	char enc[HOSTPATH_CKPT_MAX];

	memset(&a, 0, sizeof a);
	snprintf(a.upload_id, sizeof a.upload_id, "up-1");
	a.parts = 3;
	snprintf(a.last_file, sizeof a.last_file, "odd names/new\nline");
	a.bytes_done = 123456789012ULL;
	a.files_done = 42;
	CHECK_INT(hostpath_ckpt_encode(&a, enc, sizeof enc), 0);
	CHECK_INT(hostpath_ckpt_decode(enc, &b), 0);
	CHECK_STR(b.upload_id, "up-1");
	CHECK_STR(b.last_file, "odd names/new\nline");
	CHECK_INT(b.parts, 3);
	CHECK(b.bytes_done == 123456789012ULL);
	CHECK_INT(b.files_done, 42);
	CHECK_INT(b.gap_from, 0);
	CHECK_INT(b.gap_to, 0);
	a.gap_from = 2;
	a.gap_to = 3;
	CHECK_INT(hostpath_ckpt_encode(&a, enc, sizeof enc), 0);
	CHECK_INT(hostpath_ckpt_decode(enc, &b), 0);
	CHECK_INT(b.gap_from, 2);
	CHECK_INT(b.gap_to, 3);
	CHECK_INT(hostpath_ckpt_decode("{\"u\":\"x\",\"p\":3,\"f\":\"a\","
	    "\"g\":2,\"G\":4}", &b), CAIRN_EINVAL);	/* gap past the parts */
	CHECK_INT(hostpath_ckpt_decode("", &b), CAIRN_EINVAL);
	CHECK_INT(hostpath_ckpt_decode("plain/path", &b), CAIRN_EINVAL);
	memset(a.last_file, 'x', 2000);
	a.last_file[2000] = '\0';
	CHECK_INT(hostpath_ckpt_encode(&a, enc, sizeof enc), CAIRN_ETOOBIG);
}

static void
test_roundtrip(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct store *s = NULL;
	struct hostpath_opts o;
	struct hostpath_stats st;
	struct rec r;
	struct stat sb;
	char *src, *dst, *root, *key, *obj, *x;

	src = xasprintf("%s/src", tmp);
	dst = xasprintf("%s/dst", tmp);
	root = xasprintf("%s/store", tmp);
	x = xasprintf("%s/tar-x", tmp);
	REQUIRE(sh("python3 " CAIRN_SRCDIR "/tests/helpers/volume_tree.py "
	    "make '%s' --mb 3", src) == 0);
	REQUIRE(store_open_fs(root, 1, &s, &err) == 0);
	key = hostpath_key(NULL, "b1", "pv-a");

	memset(&r, 0, sizeof r);
	r.monotonic = 1;
	memset(&o, 0, sizeof o);
	o.part_size = 48 << 10;
	o.progress = rec_progress;
	o.checkpoint = rec_ckpt;
	o.arg = &r;
	o.spool_dir = tmp;
	CHECK_INT(hostpath_backup(s, key, src, &o, &st, &err), 0);
	if (err.code)
		fprintf(stderr, "backup: %s\n", err.msg);
	CHECK(st.parts >= 3);
	CHECK_INT(r.nck, st.parts - 1);
	CHECK(r.monotonic);
	CHECK(st.bytes_total > (64u << 20));	/* the sparse file counts whole */
	CHECK(st.bytes_done == st.bytes_total);
	CHECK(r.last == st.bytes_total);
	CHECK(r.files == st.files_total);
	CHECK(st.compressed < (8u << 20));	/* holes were not stored */
	CHECK(st.etag[0] != '\0');

	/* Any tar reads it: GNU tar gives the same tree. */
	obj = xasprintf("%s/%s", root, key);
	CHECK(sh("mkdir -p '%s'", x) == 0);
	{
		char *cmd = xasprintf("tar -C '%s' --same-permissions -xzf '%s'",
		    x, obj);
		CHECK(system(cmd) == 0);
		free(cmd);
	}
	CHECK(tree_same(src, x));

	/* Our restore gives the same tree too, sparse files stay sparse. */
	memset(&r, 0, sizeof r);
	r.monotonic = 1;
	o.checkpoint = NULL;
	o.expect_total = st.bytes_total;
	CHECK_INT(hostpath_restore(s, key, dst, &o, &st, &err), 0);
	if (err.code)
		fprintf(stderr, "restore: %s\n", err.msg);
	CHECK(tree_same(src, dst));
	CHECK(r.monotonic);
	CHECK(r.last == r.total);
	x = (free(x), xasprintf("%s/sparse.img", dst));
	CHECK(stat(x, &sb) == 0);
	CHECK(sb.st_size == (64 << 20));
	CHECK((uint64_t)sb.st_blocks * 512 < (4u << 20));
	free(x);
	free(obj);
	free(key);
	free(src);
	free(dst);
	free(root);
	store_free(s);
}

static void
test_resume(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct store *s = NULL;
	struct hostpath_opts o;
	struct hostpath_stats st;
	struct rec r;
	struct hostpath_ckpt ck;
	char *src, *dst, *root, *key;
	uint64_t first_done;

	src = xasprintf("%s/src", tmp);	/* made by test_roundtrip */
	dst = xasprintf("%s/dst-resume", tmp);
	root = xasprintf("%s/store-resume", tmp);
	REQUIRE(store_open_fs(root, 1, &s, &err) == 0);
	key = hostpath_key("pfx", "b2", "pv-b");

	memset(&r, 0, sizeof r);
	r.monotonic = 1;
	r.stop_after = 2;
	memset(&o, 0, sizeof o);
	o.part_size = 48 << 10;
	o.checkpoint = rec_ckpt;
	o.progress = rec_progress;
	o.arg = &r;
	CHECK_INT(hostpath_backup(s, key, src, &o, &st, &err), CAIRN_ECANCELED);
	CHECK_INT(r.ck.parts, 2);
	CHECK(r.ck.last_file[0] != '\0');
	CHECK(r.ck.bytes_done > 0);
	first_done = r.ck.bytes_done;
	ck = r.ck;

	/* A new call from the checkpoint (as after a restart). */
	memset(&r, 0, sizeof r);
	r.monotonic = 1;
	o.resume = &ck;
	CHECK_INT(hostpath_backup(s, key, src, &o, &st, &err), 0);
	if (err.code)
		fprintf(stderr, "resume: %s\n", err.msg);
	CHECK(r.monotonic);
	CHECK(r.calls > 0);
	CHECK(st.bytes_done == st.bytes_total);
	CHECK(st.bytes_done > first_done);
	o.resume = NULL;
	o.checkpoint = NULL;
	CHECK_INT(hostpath_restore(s, key, dst, &o, NULL, &err), 0);
	CHECK(tree_same(src, dst));

	/* A checkpoint whose upload is gone: a clear not-found. */
	snprintf(ck.upload_id, sizeof ck.upload_id, "no-such-upload");
	o.resume = &ck;
	CHECK(hostpath_backup(s, key, src, &o, &st, &err) < 0);
	free(key);
	free(src);
	free(dst);
	free(root);
	store_free(s);
}

/*
 * Takeover: another owner published checkpoint 1 but stored part 2 too
 * (and may have more in flight); resuming its checkpoint as foreign keeps
 * part 1, leaves 2..3 unused and continues at 4; a restart of the new
 * owner from its own checkpoint (with the gap) finishes the object.
 */
static void
test_takeover_resume(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct store *s = NULL;
	struct hostpath_opts o;
	struct hostpath_stats st;
	struct rec r;
	struct hostpath_ckpt published, ck;
	char *src, *dst, *root, *key;

	src = xasprintf("%s/src-takeover", tmp);
	dst = xasprintf("%s/dst-takeover", tmp);
	/* Incompressible files larger than a part: one part per file. */
	REQUIRE(sh("mkdir -p '%s' && for i in 1 2 3 4 5 6 7 8; do "
	    "head -c 100000 /dev/urandom > '%s'/f$i || exit 1; done", src,
	    src) == 0);
	root = xasprintf("%s/store-takeover", tmp);
	REQUIRE(store_open_fs(root, 1, &s, &err) == 0);
	key = hostpath_key("pfx", "b3", "pv-c");
	memset(&r, 0, sizeof r);
	r.monotonic = 1;
	r.stop_after = 1;
	memset(&o, 0, sizeof o);
	o.part_size = 8 << 10;
	o.checkpoint = rec_ckpt;
	o.progress = rec_progress;
	o.arg = &r;
	CHECK_INT(hostpath_backup(s, key, src, &o, &st, &err), CAIRN_ECANCELED);
	published = r.ck;
	CHECK_INT(published.parts, 1);
	/* The old owner goes on to store part 2, unpublished. */
	memset(&r, 0, sizeof r);
	r.stop_after = 1;
	o.resume = &published;
	CHECK_INT(hostpath_backup(s, key, src, &o, &st, &err), CAIRN_ECANCELED);
	CHECK_INT(r.ck.parts, 2);
	/* The new owner: from the published checkpoint, as foreign. */
	memset(&r, 0, sizeof r);
	r.stop_after = 1;
	o.resume_foreign = 1;
	CHECK_INT(hostpath_backup(s, key, src, &o, &st, &err), CAIRN_ECANCELED);
	CHECK_INT(r.ck.parts, 4);
	CHECK_INT(r.ck.gap_from, 2);
	CHECK_INT(r.ck.gap_to, 3);
	ck = r.ck;
	/* A foreign checkpoint with a gap is refused (status never has one). */
	o.resume = &ck;
	CHECK_INT(hostpath_backup(s, key, src, &o, &st, &err), CAIRN_ENOTFOUND);
	/* The new owner restarts from its own checkpoint and finishes. */
	memset(&r, 0, sizeof r);
	r.monotonic = 1;
	o.resume = &ck;
	o.resume_foreign = 0;
	cairn_err_clear(&err);
	CHECK_INT(hostpath_backup(s, key, src, &o, &st, &err), 0);
	if (err.code)
		fprintf(stderr, "takeover resume: %s\n", err.msg);
	CHECK(st.bytes_done == st.bytes_total);
	o.resume = NULL;
	o.checkpoint = NULL;
	CHECK_INT(hostpath_restore(s, key, dst, &o, NULL, &err), 0);
	CHECK(tree_same(src, dst));
	free(key);
	free(src);
	free(dst);
	free(root);
	store_free(s);
}

static void
test_hostile_archives(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct store *s = NULL;
	char *root, *dst, *out, *f;
	const char *names[] = { "../up-one", "/abs-path", "a/../../up-two" };
	size_t i;

	root = xasprintf("%s/store-evil", tmp);
	REQUIRE(store_open_fs(root, 1, &s, &err) == 0);
	f = xasprintf("%s/evil.tar.gz", root);
	CHECK(sh("python3 " CAIRN_SRCDIR "/tests/helpers/volume_tree.py "
	    "evil '%s'", f) == 0);
	dst = xasprintf("%s/evil-target/vol", tmp);
	out = xasprintf("%s/evil-target/outside-dir", tmp);
	mkdir(out, 0755);	/* fails: parent missing; made below */
	CHECK(sh("mkdir -p '%s' '%s'", dst, out) == 0);
	CHECK(hostpath_restore(s, "evil.tar.gz", dst, NULL, NULL, &err) < 0);
	CHECK(strstr(err.msg, "escape") != NULL);
	free(f);
	f = xasprintf("%s/pwned", out);
	CHECK(access(f, F_OK) != 0);	/* nothing went through the link */
	free(f);
	for (i = 0; i < sizeof names / sizeof names[0]; i++) {
		f = xasprintf("%s/evil-name.tar.gz", root);
		CHECK(sh("python3 " CAIRN_SRCDIR "/tests/helpers/volume_tree.py "
		    "evil-name '%s' '%s'", f, names[i]) == 0);
		cairn_err_clear(&err);
		CHECK_INT(hostpath_restore(s, "evil-name.tar.gz", dst, NULL,
		    NULL, &err), CAIRN_EPROTO);
		CHECK(strstr(err.msg, "unsafe entry name") != NULL);
		free(f);
	}
	f = xasprintf("%s/evil-target/up-one", tmp);
	CHECK(access(f, F_OK) != 0);
	free(f);
	CHECK(access("/abs-path", F_OK) != 0);
	/* Not gzip at all: a clear error, not a crash. */
	CHECK(store_put_mem(s, "junk.tar.gz", "not an archive", 14, &err) == 0);
	CHECK(hostpath_restore(s, "junk.tar.gz", dst, NULL, NULL, &err) < 0);
	CHECK(hostpath_restore(s, "missing.tar.gz", dst, NULL, NULL, &err) < 0);
	free(dst);
	free(out);
	free(root);
	store_free(s);
}

static void
test_missing_dir(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct store *s = NULL;
	char *root = xasprintf("%s/store-missing", tmp);

	REQUIRE(store_open_fs(root, 1, &s, &err) == 0);
	CHECK_INT(hostpath_backup(s, "k.tar.gz", "/nonexistent/vol", NULL,
	    NULL, &err), CAIRN_ENOTFOUND);
	CHECK(strstr(err.msg, "/nonexistent/vol") != NULL);
	store_free(s);
	free(root);
}

int
main(void)
{
	signal(SIGPIPE, SIG_IGN);
	snprintf(tmp, sizeof tmp, "%s/hostpath-%d", UNIT_TMPDIR(),
	    (int)getpid());
	mkdir(tmp, 0700);
	RUN(test_path_cmp_and_key);
	RUN(test_ckpt_encoding);
	RUN(test_roundtrip);
	RUN(test_resume);
	RUN(test_takeover_resume);
	RUN(test_hostile_archives);
	RUN(test_missing_dir);
	return unit_done();
}
