/*
 * test_restore_archive.c: the safe tarball reader (engine/archive_read.c)
 * against good, multi-member, hostile, truncated, corrupt and bomb
 * archives built here with libarchive and zlib.
 */
#include "config.h"
#include "engine/archive_read.h"
#include "base/jsonutil.h"
#include "base/mem.h"
#include "tests/unit/unit.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

/* ---- building archives -------------------------------------------------- */

struct tb {
	struct archive *a;
	unsigned char *buf;
	size_t size, used;
	size_t marks[16];	/* tar offsets after entries, for splitting */
	int nmarks;
};

static void
tb_open(struct tb *t)
{
	t->size = 64u << 20;
	t->buf = xmalloc(t->size);
	t->used = 0;
	t->nmarks = 0;
	t->a = archive_write_new();
	archive_write_set_format_pax_restricted(t->a);
	archive_write_set_bytes_per_block(t->a, 0);
	archive_write_open_memory(t->a, t->buf, t->size, &t->used);
}

static void
tb_add(struct tb *t, const char *path, mode_t type, const char *link,
    const void *data, size_t len)
{
	struct archive_entry *e = archive_entry_new();

	archive_entry_set_pathname(e, path);
	archive_entry_set_filetype(e, type);
	archive_entry_set_perm(e, 0644);
	if (type == AE_IFREG)
		archive_entry_set_size(e, (la_int64_t)len);
	if (type == AE_IFLNK)
		archive_entry_set_symlink(e, link);
	if (link != NULL && type == AE_IFREG) {
		archive_entry_set_hardlink(e, link);
		archive_entry_set_size(e, 0);
		len = 0;
	}
	if (type == AE_IFCHR)
		archive_entry_set_rdev(e, 0x0101);
	archive_write_header(t->a, e);
	if (len > 0)
		archive_write_data(t->a, data, len);
	archive_write_finish_entry(t->a);
	archive_entry_free(e);
	if (t->nmarks < 16)
		t->marks[t->nmarks++] = t->used;
}

static void
tb_file(struct tb *t, const char *path, const char *text)
{
	tb_add(t, path, AE_IFREG, NULL, text, strlen(text));
}

/* Close the tar; returns its plain bytes (owned by t). */
static void
tb_close(struct tb *t)
{
	archive_write_close(t->a);
	archive_write_free(t->a);
}

/* gzip n bytes of p as one member, appended to out (grown). */
static void
gz_append(unsigned char **out, size_t *outlen, const void *p, size_t n)
{
	z_stream z;
	size_t cap = compressBound((uLong)n) + 64;

	*out = xrealloc(*out, *outlen + cap);
	memset(&z, 0, sizeof z);
	deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY);
	z.next_in = (Bytef *)(uintptr_t)p;
	z.avail_in = (uInt)n;
	z.next_out = *out + *outlen;
	z.avail_out = (uInt)cap;
	deflate(&z, Z_FINISH);
	*outlen += cap - z.avail_out;
	deflateEnd(&z);
}

static unsigned char *
tb_gzip(struct tb *t, size_t *len)
{
	unsigned char *out = NULL;

	*len = 0;
	gz_append(&out, len, t->buf, t->used);
	return out;
}

static void
tb_free(struct tb *t)
{
	free(t->buf);
}

/* Read every entry; records verdicts and JSON results into a text log. */
static int
read_all(const void *data, size_t len, const struct tarread_opts *o,
    char *log, size_t logsz, struct cairn_err *err)
{
	struct tarread_src src;
	struct tarread *r;
	struct tarread_entry e;
	int rc;

	log[0] = '\0';
	tarread_src_mem(&src, data, len);
	rc = tarread_open(&src, o, &r, err);
	if (rc < 0)
		return rc;
	while ((rc = tarread_next(r, &e, err)) == 1) {
		char line[2048];

		if (e.verdict == TARREAD_OK) {
			cJSON *j;
			struct cairn_err jerr = CAIRN_ERR_INIT;
			int jrc = tarread_json(r, &j, &jerr);

			if (jrc == 0)
				snprintf(line, sizeof line, "ok %s\n", e.path);
			else if (jrc == CAIRN_EINVAL || jrc == CAIRN_ETOOBIG)
				snprintf(line, sizeof line, "json %s: %s\n",
				    e.path, jerr.msg);
			else {
				cairn_err_copy(err, &jerr);
				rc = jrc;
				cJSON_Delete(j);
				break;
			}
			cJSON_Delete(j);
		} else {
			snprintf(line, sizeof line, "%s %s: %s\n",
			    e.verdict == TARREAD_WARN ? "warn" : "bad", e.path,
			    e.why);
		}
		strncat(log, line, logsz - strlen(log) - 1);
	}
	tarread_free(r);
	return rc;
}

static const char obj1[] = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
	"\"metadata\":{\"name\":\"a\",\"namespace\":\"ns1\"}}";
static const char obj2[] = "{\"apiVersion\":\"v1\",\"kind\":\"Secret\","
	"\"metadata\":{\"name\":\"b\",\"namespace\":\"ns1\"}}";

static void
test_good(void)
{
	struct tb t;
	unsigned char *gz;
	size_t len;
	char log[4096];
	struct cairn_err err = CAIRN_ERR_INIT;

	tb_open(&t);
	tb_file(&t, "metadata/version", "\"1.1.0\"");
	tb_file(&t, "resources/configmaps/namespaces/ns1/a.json", obj1);
	tb_file(&t, "resources/secrets/v1-preferredversion/namespaces/ns1/b.json", obj2);
	tb_close(&t);
	gz = tb_gzip(&t, &len);
	CHECK_INT(read_all(gz, len, NULL, log, sizeof log, &err), 0);
	CHECK_STR(log, "ok metadata/version\n"
	    "ok resources/configmaps/namespaces/ns1/a.json\n"
	    "ok resources/secrets/v1-preferredversion/namespaces/ns1/b.json\n");
	free(gz);
	tb_free(&t);
}

static void
test_multi_member(void)
{
	struct tb t;
	unsigned char *gz = NULL;
	size_t len = 0;
	char log[4096];
	struct cairn_err err = CAIRN_ERR_INIT;

	tb_open(&t);
	tb_file(&t, "resources/configmaps/namespaces/ns1/a.json", obj1);
	tb_file(&t, "resources/secrets/namespaces/ns1/b.json", obj2);
	tb_close(&t);
	/* member 1: first entry; member 2: second entry and the end blocks */
	gz_append(&gz, &len, t.buf, t.marks[0]);
	gz_append(&gz, &len, t.buf + t.marks[0], t.used - t.marks[0]);
	CHECK_INT(read_all(gz, len, NULL, log, sizeof log, &err), 0);
	CHECK_STR(log, "ok resources/configmaps/namespaces/ns1/a.json\n"
	    "ok resources/secrets/namespaces/ns1/b.json\n");
	free(gz);
	tb_free(&t);
}

static void
test_hostile_entries(void)
{
	struct tb t;
	unsigned char *gz;
	size_t len;
	char log[8192];
	struct cairn_err err = CAIRN_ERR_INIT;

	tb_open(&t);
	tb_file(&t, "/etc/evil.json", obj1);
	tb_file(&t, "resources/../../evil.json", obj1);
	tb_add(&t, "resources/secrets/namespaces/ns1/sym.json", AE_IFLNK,
	    "/etc/passwd", NULL, 0);
	tb_add(&t, "resources/secrets/namespaces/ns1/hard.json", AE_IFREG,
	    "resources/configmaps/namespaces/ns1/a.json", NULL, 0);
	tb_add(&t, "resources/dev", AE_IFCHR, NULL, NULL, 0);
	tb_add(&t, "resources/fifo", AE_IFIFO, NULL, NULL, 0);
	tb_add(&t, "resources/dir", AE_IFDIR, NULL, NULL, 0);
	tb_file(&t, "resources/configmaps/namespaces/ns1/bad.json", "{\"a\":");
	{
		/* one level over the limit, and one at it (issue 18) */
		enum { D = CAIRN_JSON_MAX_DEPTH };
		char deep[2 * D + 3];
		int i;

		for (i = 0; i < D + 1; i++)
			deep[i] = '[';
		for (; i < 2 * D + 2; i++)
			deep[i] = ']';
		deep[i] = '\0';
		tb_file(&t, "resources/configmaps/namespaces/ns1/deep.json",
		    deep);
		deep[2 * D + 1] = '\0';
		tb_file(&t, "resources/configmaps/namespaces/ns1/limit.json",
		    deep + 1);
	}
	tb_file(&t, "resources/configmaps/namespaces/ns1/a.json", obj1);
	tb_close(&t);
	gz = tb_gzip(&t, &len);
	CHECK_INT(read_all(gz, len, NULL, log, sizeof log, &err), 0);
	CHECK(strstr(log, "bad /etc/evil.json: absolute path\n") != NULL);
	CHECK(strstr(log, "bad resources/../../evil.json: '..' in the path\n")
	    != NULL);
	CHECK(strstr(log, "bad resources/secrets/namespaces/ns1/sym.json: "
	    "symbolic link\n") != NULL);
	CHECK(strstr(log, "bad resources/secrets/namespaces/ns1/hard.json: "
	    "hard link") != NULL);
	CHECK(strstr(log, "bad resources/dev: device node\n") != NULL);
	CHECK(strstr(log, "bad resources/fifo: fifo or socket\n") != NULL);
	CHECK(strstr(log, "warn resources/dir") != NULL);
	CHECK(strstr(log, "json resources/configmaps/namespaces/ns1/bad.json: "
	    "entry \"resources/configmaps/namespaces/ns1/bad.json\"") != NULL);
	CHECK(strstr(log, "json resources/configmaps/namespaces/ns1/deep.json: "
	    "entry \"resources/configmaps/namespaces/ns1/deep.json\"") != NULL);
	CHECK(strstr(log, "ok resources/configmaps/namespaces/ns1/limit.json\n")
	    != NULL);
	/* the good entry after all of them is still read */
	CHECK(strstr(log, "ok resources/configmaps/namespaces/ns1/a.json\n")
	    != NULL);
	if (unit_cur_failed)
		fprintf(stderr, "%s", log);
	free(gz);
	tb_free(&t);
}

static void
test_oversize(void)
{
	struct tb t;
	unsigned char *gz;
	size_t len;
	char log[4096], *big;
	struct tarread_opts o = { .entry_cap = 1000 };
	struct cairn_err err = CAIRN_ERR_INIT;

	big = xmalloc(5000);
	memset(big, ' ', 4999);
	big[0] = '{';
	big[4998] = '}';
	big[4999] = '\0';
	tb_open(&t);
	tb_file(&t, "resources/configmaps/namespaces/ns1/big.json", big);
	tb_file(&t, "resources/configmaps/namespaces/ns1/a.json", obj1);
	tb_close(&t);
	gz = tb_gzip(&t, &len);
	CHECK_INT(read_all(gz, len, &o, log, sizeof log, &err), 0);
	CHECK_STR(log, "bad resources/configmaps/namespaces/ns1/big.json: "
	    "entry is 4999 bytes, over the cap of 1000\n"
	    "ok resources/configmaps/namespaces/ns1/a.json\n");
	free(big);
	free(gz);
	tb_free(&t);
}

static void
test_truncated_and_corrupt(void)
{
	struct tb t;
	unsigned char *gz;
	size_t len;
	char log[4096], *filler;
	struct cairn_err err = CAIRN_ERR_INIT;
	int rc;

	/* incompressible-ish filler so the cut lands inside entry data */
	filler = xmalloc(200001);
	filler[0] = '"';
	for (int i = 1; i < 200000; i++)
		filler[i] = (char)('a' + (rand() % 26));
	filler[199999] = '"';
	filler[200000] = '\0';
	tb_open(&t);
	tb_file(&t, "resources/configmaps/namespaces/ns1/a.json", obj1);
	tb_file(&t, "resources/configmaps/namespaces/ns1/filler.json", filler);
	tb_file(&t, "resources/configmaps/namespaces/ns1/c.json", obj1);
	tb_close(&t);
	gz = tb_gzip(&t, &len);

	rc = read_all(gz, len / 2, NULL, log, sizeof log, &err);
	CHECK(rc < 0);
	CHECK(strstr(err.msg, "filler.json") != NULL);
	CHECK(strstr(log, "ok resources/configmaps/namespaces/ns1/a.json")
	    != NULL);

	/* flip bytes in the middle of the deflate data */
	for (size_t i = len / 2; i < len / 2 + 64; i++)
		gz[i] ^= 0x5a;
	cairn_err_clear(&err);
	rc = read_all(gz, len, NULL, log, sizeof log, &err);
	CHECK(rc < 0);
	CHECK(strstr(err.msg, "corrupt") != NULL);

	/* a plain tar is refused */
	cairn_err_clear(&err);
	rc = read_all(t.buf, t.used, NULL, log, sizeof log, &err);
	CHECK_INT(rc, CAIRN_EPROTO);
	CHECK(strstr(err.msg, "not a gzip") != NULL);

	/* garbage */
	cairn_err_clear(&err);
	rc = read_all("hello, world, not a tarball", 27, NULL, log, sizeof log,
	    &err);
	CHECK(rc < 0);

	/* empty input */
	cairn_err_clear(&err);
	rc = read_all("", 0, NULL, log, sizeof log, &err);
	CHECK(rc < 0);
	free(filler);
	free(gz);
	tb_free(&t);
}

static void
test_bomb(void)
{
	struct tb t;
	unsigned char *gz;
	size_t len;
	char log[4096], *zeros;
	struct tarread_opts ratio = { .ratio_min = 1u << 20 };
	struct tarread_opts total = { .total_cap = 3u << 20 };
	struct cairn_err err = CAIRN_ERR_INIT;
	int rc;

	zeros = xcalloc(1, 8u << 20);
	tb_open(&t);
	tb_file(&t, "resources/configmaps/namespaces/ns1/a.json", obj1);
	tb_add(&t, "resources/configmaps/namespaces/ns1/zeros.json", AE_IFREG,
	    NULL, zeros, 8u << 20);
	tb_close(&t);
	gz = tb_gzip(&t, &len);
	rc = read_all(gz, len, &ratio, log, sizeof log, &err);
	CHECK_INT(rc, CAIRN_ETOOBIG);
	CHECK(strstr(err.msg, "zeros.json") != NULL);
	CHECK(strstr(err.msg, "ratio") != NULL);

	cairn_err_clear(&err);
	rc = read_all(gz, len, &total, log, sizeof log, &err);
	CHECK_INT(rc, CAIRN_ETOOBIG);
	CHECK(strstr(err.msg, "zeros.json") != NULL);
	free(zeros);
	free(gz);
	tb_free(&t);
}

static void
test_fd_source(void)
{
	struct tb t;
	unsigned char *gz;
	size_t len;
	char path[512];
	struct tarread_src src;
	struct tarread *r;
	struct tarread_entry e;
	struct cairn_err err = CAIRN_ERR_INIT;
	cJSON *j = NULL;
	int fd, n = 0;

	tb_open(&t);
	tb_file(&t, "resources/configmaps/namespaces/ns1/a.json", obj1);
	tb_close(&t);
	gz = tb_gzip(&t, &len);
	snprintf(path, sizeof path, "%s/fd-src.tar.gz", UNIT_TMPDIR());
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	REQUIRE(fd >= 0);
	REQUIRE(write(fd, gz, len) == (ssize_t)len);
	lseek(fd, 0, SEEK_SET);
	tarread_src_fd(&src, fd);
	REQUIRE(tarread_open(&src, NULL, &r, &err) == 0);
	while (tarread_next(r, &e, &err) == 1) {
		n++;
		CHECK_INT(tarread_json(r, &j, &err), 0);
		CHECK_STR(json_str(j, "metadata.name"), "a");
		cJSON_Delete(j);
	}
	CHECK_INT(n, 1);
	CHECK(tarread_bytes_in(r) == len);
	CHECK(tarread_bytes_out(r) >= 1024);
	tarread_free(r);
	close(fd);
	unlink(path);
	free(gz);
	tb_free(&t);
}

static void
test_check_path(void)
{
	char why[TARREAD_WHY_MAX];

	CHECK_INT(tarread_check_path("resources/pods/namespaces/a/b.json", why), 0);
	CHECK(tarread_check_path("", why) < 0);
	CHECK(tarread_check_path("a//b", why) < 0);
	CHECK(tarread_check_path("./a", why) < 0);
	CHECK(tarread_check_path("a/..", why) < 0);
	CHECK(tarread_check_path("a/b\n", why) < 0);
	CHECK_INT(tarread_check_path("a/..b/c", why), 0);
}

/* deflate p into one gzip member with a full flush after each cut point;
 * *flush_at gets the compressed length at each cut (ncut of them). */
static unsigned char *
gz_flushed(const unsigned char *p, size_t n, const size_t *cuts, int ncut,
    size_t *flush_at, size_t *len)
{
	z_stream z;
	size_t cap = compressBound((uLong)n) + 64 * (size_t)(ncut + 2);
	unsigned char *out = xmalloc(cap);
	size_t at = 0;

	memset(&z, 0, sizeof z);
	deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY);
	z.next_out = out;
	z.avail_out = (uInt)cap;
	for (int i = 0; i <= ncut; i++) {
		size_t upto = i < ncut ? cuts[i] : n;

		z.next_in = (Bytef *)(uintptr_t)(p + at);
		z.avail_in = (uInt)(upto - at);
		deflate(&z, i < ncut ? Z_FULL_FLUSH : Z_FINISH);
		at = upto;
		if (i < ncut)
			flush_at[i] = cap - z.avail_out;
	}
	*len = cap - z.avail_out;
	deflateEnd(&z);
	return out;
}

/*
 * Issue 18: every way a tarball can be cut or damaged is a fatal error
 * naming the problem, never a clean end after fewer entries.
 */
static void
test_integrity(void)
{
	struct tb t;
	unsigned char *gz = NULL, *one;
	size_t len = 0, flush_at[4], olen;
	char log[4096];
	struct cairn_err err = CAIRN_ERR_INIT;
	int rc;

	tb_open(&t);
	tb_file(&t, "resources/configmaps/namespaces/ns1/a.json", obj1);
	tb_file(&t, "resources/secrets/namespaces/ns1/b.json", obj2);
	tb_file(&t, "resources/configmaps/namespaces/ns1/c.json", obj1);
	tb_close(&t);
	REQUIRE(t.nmarks == 3 && t.used == t.marks[2] + 1024);

	/* cut at a gzip-member boundary: members a | b | c + end blocks,
	 * the last one lost (an upload that stopped after part 2) */
	gz_append(&gz, &len, t.buf, t.marks[0]);
	gz_append(&gz, &len, t.buf + t.marks[0], t.marks[1] - t.marks[0]);
	rc = read_all(gz, len, NULL, log, sizeof log, &err);
	CHECK_INT(rc, CAIRN_EPROTO);
	CHECK_STR(err.msg, "the tarball is truncated: it ends after entry "
	    "\"resources/secrets/namespaces/ns1/b.json\" without the tar "
	    "end-of-archive blocks");
	CHECK_STR(log, "ok resources/configmaps/namespaces/ns1/a.json\n"
	    "ok resources/secrets/namespaces/ns1/b.json\n");
	/* the whole three members read fine */
	gz_append(&gz, &len, t.buf + t.marks[1], t.used - t.marks[1]);
	cairn_err_clear(&err);
	CHECK_INT(read_all(gz, len, NULL, log, sizeof log, &err), 0);
	free(gz);

	/* cut at a tar-header boundary inside one gzip member */
	one = gz_flushed(t.buf, t.used, t.marks, 2, flush_at, &olen);
	cairn_err_clear(&err);
	rc = read_all(one, flush_at[1], NULL, log, sizeof log, &err);
	CHECK_INT(rc, CAIRN_EPROTO);
	CHECK(strstr(err.msg, "the tarball is truncated: its data ends inside "
	    "gzip member 1") != NULL);
	CHECK(strstr(err.msg, "b.json") != NULL);
	cairn_err_clear(&err);
	CHECK_INT(read_all(one, olen, NULL, log, sizeof log, &err), 0);

	/* a bad CRC-32 in the member's trailer */
	one[olen - 8] ^= 0x01;
	cairn_err_clear(&err);
	rc = read_all(one, olen, NULL, log, sizeof log, &err);
	CHECK_INT(rc, CAIRN_EPROTO);
	CHECK(strstr(err.msg, "the tarball is corrupt: gzip member 1: "
	    "incorrect data check (the CRC-32 or length in its trailer does "
	    "not match its data)") != NULL);
	one[olen - 8] ^= 0x01;
	/* and a bad length */
	one[olen - 1] ^= 0x01;
	cairn_err_clear(&err);
	rc = read_all(one, olen, NULL, log, sizeof log, &err);
	CHECK_INT(rc, CAIRN_EPROTO);
	CHECK(strstr(err.msg, "incorrect length check") != NULL);
	free(one);

	/* a complete gzip stream whose tar lacks the end-of-archive blocks,
	 * and one with a single end block */
	gz = NULL;
	len = 0;
	gz_append(&gz, &len, t.buf, t.marks[2]);
	cairn_err_clear(&err);
	rc = read_all(gz, len, NULL, log, sizeof log, &err);
	CHECK_INT(rc, CAIRN_EPROTO);
	CHECK(strstr(err.msg, "ends after entry \"resources/configmaps/"
	    "namespaces/ns1/c.json\" without the tar end-of-archive blocks")
	    != NULL);
	free(gz);
	gz = NULL;
	len = 0;
	gz_append(&gz, &len, t.buf, t.marks[2] + 512);
	cairn_err_clear(&err);
	CHECK_INT(read_all(gz, len, NULL, log, sizeof log, &err), CAIRN_EPROTO);

	/* bytes after the last member that are not a member */
	free(gz);
	gz = NULL;
	len = 0;
	gz_append(&gz, &len, t.buf, t.used);
	gz = xrealloc(gz, len + 16);
	memcpy(gz + len, "garbage-garbage!", 16);
	cairn_err_clear(&err);
	rc = read_all(gz, len + 16, NULL, log, sizeof log, &err);
	CHECK_INT(rc, CAIRN_EPROTO);
	CHECK(strstr(err.msg, "16 bytes after gzip member 1 are not another "
	    "gzip member") != NULL);
	free(gz);
	tb_free(&t);

	/* end blocks followed by padding to a 10240-byte record (GNU tar,
	 * Python's tarfile) are a clean end */
	tb_open(&t);
	tb_file(&t, "resources/configmaps/namespaces/ns1/a.json", obj1);
	tb_close(&t);
	memset(t.buf + t.used, 0, 10240 - t.used % 10240);
	t.used += 10240 - t.used % 10240;
	gz = tb_gzip(&t, &len);
	cairn_err_clear(&err);
	CHECK_INT(read_all(gz, len, NULL, log, sizeof log, &err), 0);
	if (unit_cur_failed)
		fprintf(stderr, "%s / %s\n", err.msg, log);
	free(gz);
	tb_free(&t);
}

int
main(void)
{
	RUN(test_good);
	RUN(test_multi_member);
	RUN(test_hostile_entries);
	RUN(test_oversize);
	RUN(test_truncated_and_corrupt);
	RUN(test_bomb);
	RUN(test_fd_source);
	RUN(test_check_path);
	RUN(test_integrity);
	return unit_done();
}
