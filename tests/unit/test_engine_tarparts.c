/*
 * test_engine_tarparts.c: the multi-member tar.gz part writer. Parts are
 * written as files, concatenated, and read back with libarchive, GNU tar
 * and Python's tarfile; a writer resumed after part k completes a valid
 * whole. The tests that hold for both modes run twice: deflate on the
 * caller's thread, then on the compression thread (small batches, so
 * parts are cut often).
 */
#include "config.h"

#include <archive.h>
#include <archive_entry.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/mem.h"
#include "engine/tarparts.h"
#include "tests/unit/unit.h"

#define MAXPARTS 256

/* Second round: every writer from open_writer() compresses in a thread. */
static int threaded;

struct fsink {
	char dir[512];
	FILE *f;
	int nparts;
	uint64_t bytes[MAXPARTS];
	int fail_at;		/* part number whose end() fails, 0: never */
	int opened;
	/* threading checks */
	pthread_t caller;	/* thread that calls tarparts_* */
	int check_threads;	/* record the checks below */
	atomic_int in_begin_end;	/* inside begin() or end() */
	atomic_int overlap;	/* write() ran during begin()/end() */
	atomic_int begin_end_elsewhere;	/* begin()/end() off the caller */
	atomic_int writes_off_caller;	/* write() calls on another thread */
	long fail_write_after;	/* write() fails past this many bytes; 0: never */
	atomic_long written;
	int write_sleep_us;	/* slow sink */
	atomic_int closed;	/* set by the test once the writer is freed */
	atomic_int late;	/* sink calls after closed */
};

static void
note_begin_end(struct fsink *s, int enter)
{
	if (atomic_load(&s->closed))
		atomic_store(&s->late, 1);
	if (!s->check_threads)
		return;
	if (!pthread_equal(pthread_self(), s->caller))
		atomic_store(&s->begin_end_elsewhere, 1);
	atomic_store(&s->in_begin_end, enter);
}

static int
fs_begin(void *arg, int part, struct cairn_err *err)
{
	struct fsink *s = arg;
	char path[600];

	note_begin_end(s, 1);
	snprintf(path, sizeof path, "%s/part-%05d", s->dir, part);
	s->f = fopen(path, "wb");
	if (s->f == NULL)
		return cairn_err_set(err, CAIRN_EIO, "open %s", path);
	s->opened++;
	note_begin_end(s, 0);
	return 0;
}

static int
fs_write(void *arg, const void *p, size_t n, struct cairn_err *err)
{
	struct fsink *s = arg;

	if (atomic_load(&s->closed))
		atomic_store(&s->late, 1);
	if (s->check_threads) {
		if (atomic_load(&s->in_begin_end))
			atomic_store(&s->overlap, 1);
		if (!pthread_equal(pthread_self(), s->caller))
			atomic_fetch_add(&s->writes_off_caller, 1);
	}
	if (s->write_sleep_us > 0)
		usleep((useconds_t)s->write_sleep_us);
	if (s->fail_write_after > 0 &&
	    atomic_fetch_add(&s->written, (long)n) + (long)n >
	    s->fail_write_after)
		return cairn_err_set(err, CAIRN_EIO, "disk full");
	if (fwrite(p, 1, n, s->f) != n)
		return cairn_err_set(err, CAIRN_EIO, "write");
	return 0;
}

static int
fs_end(void *arg, int part, uint64_t bytes, uint64_t entries,
	struct cairn_err *err)
{
	struct fsink *s = arg;

	(void)entries;
	note_begin_end(s, 1);
	fclose(s->f);
	s->f = NULL;
	note_begin_end(s, 0);
	if (part == s->fail_at)
		return cairn_err_set(err, CAIRN_ENET, "storage down");
	if (part < MAXPARTS)
		s->bytes[part] = bytes;
	if (part > s->nparts)
		s->nparts = part;
	return 0;
}

static void
sink_init(struct fsink *s, struct tarparts_sink *ts, const char *name)
{
	memset(s, 0, sizeof *s);
	s->caller = pthread_self();
	snprintf(s->dir, sizeof s->dir, "%s/%s%s", UNIT_TMPDIR(), name,
	    threaded ? "-thr" : "");
	mkdir(s->dir, 0755);
	ts->begin = fs_begin;
	ts->write = fs_write;
	ts->end = fs_end;
	ts->arg = s;
}

/* Concatenate parts 1..n of dir into dir/all.tar.gz. */
static int
concat(const char *dir, int n, char *out, size_t outlen)
{
	FILE *o, *in;
	char path[600], buf[8192];
	size_t k;

	snprintf(out, outlen, "%s/all.tar.gz", dir);
	o = fopen(out, "wb");
	if (o == NULL)
		return -1;
	for (int i = 1; i <= n; i++) {
		snprintf(path, sizeof path, "%s/part-%05d", dir, i);
		in = fopen(path, "rb");
		if (in == NULL) {
			fclose(o);
			return -1;
		}
		while ((k = fread(buf, 1, sizeof buf, in)) > 0)
			fwrite(buf, 1, k, o);
		fclose(in);
	}
	fclose(o);
	return 0;
}

static void
item_json(int i, char *buf, size_t len)
{
	/* Some variety so compression does not hide everything. */
	snprintf(buf, len, "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
	    "\"cm-%06d\",\"uid\":\"%08x-%04x\"},\"data\":{\"k\":\"%d-%x\"}}",
	    i, (unsigned)(i * 2654435761u), (unsigned)(i * 40503u) & 0xffff,
	    i * 7, (unsigned)(i * 97u));
}

/*
 * Add item i as two entries (like a backup item), then a boundary. Returns
 * the writer's error code.
 */
static int
add_item(struct tarparts *tp, int i, int *cut)
{
	char path[128], json[256];
	struct cairn_err err = CAIRN_ERR_INIT;
	int rc;

	item_json(i, json, sizeof json);
	snprintf(path, sizeof path, "resources/configmaps/namespaces/ns/"
	    "cm-%06d.json", i);
	rc = tarparts_add(tp, path, json, strlen(json), &err);
	if (rc < 0)
		return rc;
	snprintf(path, sizeof path, "resources/configmaps/v1-preferredversion/"
	    "namespaces/ns/cm-%06d.json", i);
	rc = tarparts_add(tp, path, json, strlen(json), &err);
	if (rc < 0)
		return rc;
	return tarparts_boundary(tp, cut, &err);
}

/*
 * Read a tar.gz with libarchive: check metadata/version first, then the
 * items in order 0..n-1 each twice with the right content. Returns the
 * number of items found or -1 on any mismatch.
 */
static int
read_back(const char *file, int n)
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	char want[256], got[512];
	int idx = 0, second = 0, first = 1, bad = 0;

	archive_read_support_filter_gzip(a);
	archive_read_support_format_tar(a);
	if (archive_read_open_filename(a, file, 16384) != ARCHIVE_OK) {
		archive_read_free(a);
		return -1;
	}
	while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
		la_ssize_t k = archive_read_data(a, got, sizeof got - 1);

		if (k < 0) {
			bad = 1;
			break;
		}
		got[k] = '\0';
		if (first) {
			first = 0;
			if (strcmp(archive_entry_pathname(e),
			    "metadata/version") != 0 ||
			    strcmp(got, "1.1.0\n") != 0)
				bad = 1;
			continue;
		}
		item_json(idx, want, sizeof want);
		if (strcmp(got, want) != 0 || idx >= n) {
			bad = 1;
			break;
		}
		if (second) {
			idx++;
			second = 0;
		} else
			second = 1;
	}
	archive_read_free(a);
	return bad ? -1 : idx;
}

/* Run "pre'file'post" in a shell; 0 if its first output line is expect. */
static int
run_cmd(const char *pre, const char *file, const char *post,
	const char *expect)
{
	char cmd[1400], out[256] = "";
	FILE *p;

	snprintf(cmd, sizeof cmd, "%s'%s'%s", pre, file, post);
	p = popen(cmd, "r");
	if (p == NULL)
		return -1;
	if (fgets(out, sizeof out, p) == NULL)
		out[0] = '\0';
	if (pclose(p) != 0)
		return -1;
	out[strcspn(out, "\n")] = '\0';
	return strcmp(out, expect) == 0 ? 0 : -1;
}

/* n bytes of xorshift noise (incompressible) from state *x. */
static void
noise(char *p, size_t n, uint64_t *x)
{
	for (size_t j = 0; j < n; j++) {
		*x ^= *x << 13;
		*x ^= *x >> 7;
		*x ^= *x << 17;
		p[j] = (char)*x;
	}
}

static struct tarparts *
open_writer(struct tarparts_sink *ts, int first, size_t psize)
{
	struct tarparts *tp = NULL;
	struct cairn_err err = CAIRN_ERR_INIT;

	if (tarparts_open(ts, first, psize, 1764676800, &tp, &err) < 0)
		return NULL;
	/* 16 KiB batches, 3 of them: the lag behind the caller is small. */
	if (threaded && tarparts_start_thread(tp, 16 << 10, 3, 2, &err) < 0) {
		tarparts_free(tp);
		return NULL;
	}
	if (first == 1 && tarparts_add(tp, "metadata/version", "1.1.0\n", 6,
	    &err) < 0) {
		tarparts_free(tp);
		return NULL;
	}
	return tp;
}

static void
test_many_parts_read_back(void)
{
	struct fsink s;
	struct tarparts_sink ts;
	struct tarparts *tp;
	struct cairn_err err = CAIRN_ERR_INIT;
	char all[700];
	int cuts = 0, cut, n = 3000;

	sink_init(&s, &ts, "many");
	tp = open_writer(&ts, 1, 16 << 10);
	REQUIRE(tp != NULL);
	for (int i = 0; i < n; i++) {
		REQUIRE(add_item(tp, i, &cut) == 0);
		cuts += cut;
	}
	REQUIRE(tarparts_finish(tp, &err) == 0);
	CHECK(cuts >= 3);
	CHECK_INT(s.nparts, cuts + 1);
	/* Every part except the last reached the part size. */
	for (int p = 1; p < s.nparts; p++)
		CHECK(s.bytes[p] >= (16u << 10));
	CHECK(tarparts_bytes_out(tp) > 0);
	tarparts_free(tp);
	REQUIRE(concat(s.dir, s.nparts, all, sizeof all) == 0);
	CHECK_INT(read_back(all, n), n);
	/* GNU tar and Python's tarfile read the multi-member stream. */
	CHECK(run_cmd("tar tzf ", all, " | wc -l", "6001") == 0);
	CHECK(run_cmd("python3 -c 'import sys,tarfile; "
	    "print(len(tarfile.open(sys.argv[1],\"r:gz\").getnames()))' ",
	    all, "", "6001") == 0);
	CHECK(run_cmd("gzip -t ", all, " && echo ok", "ok") == 0);
}

static void
test_each_part_is_whole_member(void)
{
	struct fsink s;
	struct tarparts_sink ts;
	struct tarparts *tp;
	struct cairn_err err = CAIRN_ERR_INIT;
	char path[700];
	int cut;

	sink_init(&s, &ts, "members");
	tp = open_writer(&ts, 1, 8 << 10);
	REQUIRE(tp != NULL);
	for (int i = 0; i < 1000; i++)
		REQUIRE(add_item(tp, i, &cut) == 0);
	REQUIRE(tarparts_finish(tp, &err) == 0);
	tarparts_free(tp);
	REQUIRE(s.nparts >= 2);
	/* Each part alone gunzips to whole 512-byte tar blocks. */
	for (int p = 1; p <= s.nparts; p++) {
		gzFile g;
		char blk[4096];
		long total = 0;
		int k;

		snprintf(path, sizeof path, "%s/part-%05d", s.dir, p);
		g = gzopen(path, "rb");
		REQUIRE(g != NULL);
		while ((k = gzread(g, blk, sizeof blk)) > 0)
			total += k;
		gzclose(g);
		CHECK(total > 0 && total % 512 == 0);
	}
}

static void
test_resume_after_part_k(void)
{
	struct fsink s;
	struct tarparts_sink ts;
	struct tarparts *tp;
	struct cairn_err err = CAIRN_ERR_INIT;
	char all[700], path[700];
	int cut, n = 2000, last_in_part2 = -1, i, k;

	sink_init(&s, &ts, "resume");
	tp = open_writer(&ts, 1, 12 << 10);
	REQUIRE(tp != NULL);
	/* First writer: run until part 2 is closed, then further into part 3. */
	for (i = 0; i < n; i++) {
		REQUIRE(add_item(tp, i, &cut) == 0);
		if (cut && tarparts_last_closed(tp) == 2) {
			last_in_part2 = i;
			break;
		}
	}
	REQUIRE(last_in_part2 > 0);
	for (k = 0; k < 50; k++)
		REQUIRE(add_item(tp, last_in_part2 + 1 + k, &cut) == 0);
	CHECK_INT(tarparts_current_part(tp), 3);
	/* Crash: the writer is dropped with part 3 half written. */
	tarparts_free(tp);
	snprintf(path, sizeof path, "%s/part-%05d", s.dir, 3);
	unlink(path);

	/* Second writer continues with part 3 after the checkpointed item. */
	tp = open_writer(&ts, 3, 12 << 10);
	REQUIRE(tp != NULL);
	for (i = last_in_part2 + 1; i < n; i++)
		REQUIRE(add_item(tp, i, &cut) == 0);
	REQUIRE(tarparts_finish(tp, &err) == 0);
	tarparts_free(tp);
	REQUIRE(s.nparts >= 3);
	REQUIRE(concat(s.dir, s.nparts, all, sizeof all) == 0);
	CHECK_INT(read_back(all, n), n);
	CHECK(run_cmd("tar tzf ", all, " | wc -l", "4001") == 0);
}

static void
test_empty_and_finish_after_cut(void)
{
	struct fsink s;
	struct tarparts_sink ts;
	struct tarparts *tp;
	struct cairn_err err = CAIRN_ERR_INIT;
	char all[700];
	int cut;

	/* Nothing but metadata/version: one part. */
	sink_init(&s, &ts, "empty");
	tp = open_writer(&ts, 1, 1 << 20);
	REQUIRE(tp != NULL);
	REQUIRE(tarparts_finish(tp, &err) == 0);
	tarparts_free(tp);
	CHECK_INT(s.nparts, 1);
	REQUIRE(concat(s.dir, 1, all, sizeof all) == 0);
	CHECK_INT(read_back(all, 0), 0);

	if (threaded)
		return;		/* the cut below needs exact sizes */
	/* A part cut right before finish: the end blocks get their own part. */
	sink_init(&s, &ts, "cutlast");
	tp = open_writer(&ts, 1, 1);
	REQUIRE(tp != NULL);
	REQUIRE(add_item(tp, 0, &cut) == 0);
	CHECK_INT(cut, 1);
	REQUIRE(tarparts_finish(tp, &err) == 0);
	tarparts_free(tp);
	CHECK_INT(s.nparts, 2);
	REQUIRE(concat(s.dir, 2, all, sizeof all) == 0);
	CHECK_INT(read_back(all, 1), 1);
}

static void
test_sink_error_is_sticky(void)
{
	struct fsink s;
	struct tarparts_sink ts;
	struct tarparts *tp;
	struct cairn_err err = CAIRN_ERR_INIT;
	int cut, rc = 0, i;

	sink_init(&s, &ts, "fail");
	s.fail_at = 1;
	tp = open_writer(&ts, 1, 4 << 10);
	REQUIRE(tp != NULL);
	for (i = 0; i < 1000 && rc == 0; i++)
		rc = add_item(tp, i, &cut);
	CHECK_INT(rc, CAIRN_ENET);
	CHECK(tarparts_add(tp, "x", "y", 1, &err) == CAIRN_ENET);
	CHECK(strstr(err.msg, "storage down") != NULL);
	CHECK(tarparts_finish(tp, &err) < 0);
	tarparts_free(tp);
}

static void
test_long_path_uses_pax(void)
{
	struct fsink s;
	struct tarparts_sink ts;
	struct tarparts *tp;
	struct cairn_err err = CAIRN_ERR_INIT;
	struct archive *a;
	struct archive_entry *e;
	char name[400], all[700];
	int found = 0;

	memset(name, 'x', 300);
	memcpy(name, "resources/", 10);
	strcpy(name + 300, ".json");
	sink_init(&s, &ts, "longpath");
	tp = open_writer(&ts, 1, 1 << 20);
	REQUIRE(tp != NULL);
	REQUIRE(tarparts_add(tp, name, "{}", 2, &err) == 0);
	REQUIRE(tarparts_finish(tp, &err) == 0);
	tarparts_free(tp);
	REQUIRE(concat(s.dir, 1, all, sizeof all) == 0);
	a = archive_read_new();
	archive_read_support_filter_gzip(a);
	archive_read_support_format_tar(a);
	REQUIRE(archive_read_open_filename(a, all, 16384) == ARCHIVE_OK);
	while (archive_read_next_header(a, &e) == ARCHIVE_OK)
		if (strcmp(archive_entry_pathname(e), name) == 0)
			found = 1;
	archive_read_free(a);
	CHECK(found);
	/*
	 * The pax header holds a UTF-8 path record and no hdrcharset
	 * record: GNU tar warns "Ignoring unknown extended header keyword
	 * 'hdrcharset'" for every entry that has one.
	 */
	{
		gzFile gz = gzopen(all, "rb");
		static char tar[64 << 10];
		int n;

		REQUIRE(gz != NULL);
		n = gzread(gz, tar, sizeof tar);
		gzclose(gz);
		REQUIRE(n > 0);
		CHECK(memmem(tar, (size_t)n, "hdrcharset", 10) == NULL);
		CHECK(memmem(tar, (size_t)n, " path=resources/xxx", 19) != NULL);
	}
}

/* Short item paths get a plain ustar header: no pax extended header. */
static void
test_short_paths_are_plain_ustar(void)
{
	struct fsink s;
	struct tarparts_sink ts;
	struct tarparts *tp;
	struct cairn_err err = CAIRN_ERR_INIT;
	char path[700], blk[512 * 8];
	gzFile g;
	int cut, k;

	sink_init(&s, &ts, "ustar");
	tp = open_writer(&ts, 1, 1 << 20);
	REQUIRE(tp != NULL);
	REQUIRE(add_item(tp, 0, &cut) == 0);
	REQUIRE(tarparts_finish(tp, &err) == 0);
	tarparts_free(tp);
	snprintf(path, sizeof path, "%s/part-%05d", s.dir, 1);
	g = gzopen(path, "rb");
	REQUIRE(g != NULL);
	k = gzread(g, blk, sizeof blk);
	gzclose(g);
	/* metadata/version: header + one data block, then the item. */
	REQUIRE(k >= 512 * 6);
	CHECK_STR(blk, "metadata/version");
	CHECK(blk[156] == '0');
	CHECK(memcmp(blk + 257, "ustar", 5) == 0);
	CHECK(strncmp(blk + 1024, "resources/configmaps/namespaces/ns/"
	    "cm-000000.json", 100) == 0);
	CHECK(blk[1024 + 156] == '0');
	CHECK(strncmp(blk + 2048, "resources/configmaps/v1-preferredversion/"
	    "namespaces/ns/cm-000000.json", 100) == 0);
	CHECK(blk[2048 + 156] == '0');
}

/*
 * Threaded: write() runs on the compression thread, begin() and end() on
 * the caller's, never while a write() is in flight.
 */
static void
test_thread_callbacks(void)
{
	struct fsink s;
	struct tarparts_sink ts;
	struct tarparts *tp;
	struct cairn_err err = CAIRN_ERR_INIT;
	char all[700];
	int cut, n = 1500;

	sink_init(&s, &ts, "callbacks");
	s.check_threads = 1;
	tp = open_writer(&ts, 1, 8 << 10);
	REQUIRE(tp != NULL);
	for (int i = 0; i < n; i++)
		REQUIRE(add_item(tp, i, &cut) == 0);
	REQUIRE(tarparts_finish(tp, &err) == 0);
	tarparts_free(tp);
	CHECK(s.nparts >= 2);
	CHECK(atomic_load(&s.writes_off_caller) > 0);
	CHECK_INT(atomic_load(&s.overlap), 0);
	CHECK_INT(atomic_load(&s.begin_end_elsewhere), 0);
	REQUIRE(concat(s.dir, s.nparts, all, sizeof all) == 0);
	CHECK_INT(read_back(all, n), n);
}

/* Threaded: a failing write() on the thread stops the caller, no hang. */
static void
test_thread_write_error(void)
{
	struct fsink s;
	struct tarparts_sink ts;
	struct tarparts *tp;
	struct cairn_err err = CAIRN_ERR_INIT;
	int cut, rc = 0, i;

	sink_init(&s, &ts, "wfail");
	s.fail_write_after = 20000;
	tp = open_writer(&ts, 1, 1 << 30);
	REQUIRE(tp != NULL);
	for (i = 0; i < 20000 && rc == 0; i++)
		rc = add_item(tp, i, &cut);
	CHECK_INT(rc, CAIRN_EIO);
	CHECK(i < 20000);
	CHECK(tarparts_add(tp, "x", "y", 1, &err) == CAIRN_EIO);
	CHECK(strstr(err.msg, "disk full") != NULL);
	CHECK(tarparts_boundary(tp, &cut, &err) == CAIRN_EIO);
	CHECK(tarparts_finish(tp, &err) == CAIRN_EIO);
	tarparts_free(tp);
	CHECK_INT(s.nparts, 0);		/* no end(): nothing was stored */
}

/*
 * Threaded: freeing an unfinished writer while batches are queued behind
 * a slow sink returns, and nothing reaches the sink after that.
 */
static void
test_thread_free_unfinished(void)
{
	struct fsink s;
	struct tarparts_sink ts;
	struct tarparts *tp;
	struct cairn_err err = CAIRN_ERR_INIT;
	int cut;

	sink_init(&s, &ts, "abandon");
	s.write_sleep_us = 3000;
	tp = open_writer(&ts, 1, 1 << 30);
	REQUIRE(tp != NULL);
	for (int i = 0; i < 400; i++)
		REQUIRE(add_item(tp, i, &cut) == 0);
	CHECK_INT(tarparts_current_part(tp), 1);
	tarparts_free(tp);
	atomic_store(&s.closed, 1);
	usleep(50 * 1000);
	CHECK_INT(atomic_load(&s.late), 0);
	CHECK_INT(s.nparts, 0);
	if (s.f != NULL)
		fclose(s.f);
	/* The thread must start before the first entry. */
	sink_init(&s, &ts, "latestart");
	REQUIRE(tarparts_open(&ts, 1, 1 << 20, 0, &tp, &err) == 0);
	REQUIRE(tarparts_add(tp, "a", "b", 1, &err) == 0);
	CHECK_INT(tarparts_start_thread(tp, 0, 0, 0, &err), CAIRN_EINVAL);
	REQUIRE(tarparts_finish(tp, &err) == 0);
	tarparts_free(tp);
	CHECK_INT(s.nparts, 1);
}

/*
 * Entries described by an archive_entry (the hostpath mover's): a
 * directory, a file given in several data calls and a symlink, between
 * ordinary item entries, at gzip level 6, cut into parts at boundaries;
 * GNU tar reads types, modes and content back.
 */
static void
test_file_entries(void)
{
	struct fsink s;
	struct tarparts_sink ts;
	struct tarparts *tp;
	struct cairn_err err = CAIRN_ERR_INIT;
	struct archive_entry *e = archive_entry_new();
	char all[700], data[4096];
	uint64_t x = 88172645463325252ull;
	int cut, cuts = 0;

	sink_init(&s, &ts, "files");
	REQUIRE(tarparts_open(&ts, 1, 4 << 10, 1764676800, &tp, &err) == 0);
	CHECK_INT(tarparts_set_level(tp, 10, &err), CAIRN_EINVAL);
	REQUIRE(tarparts_set_level(tp, Z_DEFAULT_COMPRESSION, &err) == 0);
	if (threaded)
		REQUIRE(tarparts_start_thread(tp, 16 << 10, 3, 2, &err) == 0);
	REQUIRE(tarparts_add(tp, "metadata/version", "1.1.0\n", 6, &err) == 0);
	archive_entry_set_pathname(e, "vol");
	archive_entry_set_filetype(e, AE_IFDIR);
	archive_entry_set_perm(e, 0750);
	REQUIRE(tarparts_add_header(tp, e, &err) == 0);
	REQUIRE(tarparts_end_entry(tp, &err) == 0);
	for (int f = 0; f < 20; f++) {
		char name[64];

		snprintf(name, sizeof name, "vol/file-%02d", f);
		archive_entry_clear(e);
		archive_entry_set_pathname(e, name);
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_perm(e, 0640);
		archive_entry_set_size(e, 3 * (la_int64_t)sizeof data);
		REQUIRE(tarparts_add_header(tp, e, &err) == 0);
		for (int k = 0; k < 3; k++) {
			/* incompressible, so parts fill up */
			noise(data, sizeof data, &x);
			REQUIRE(tarparts_add_data(tp, data, sizeof data, &err) == 0);
		}
		REQUIRE(tarparts_end_entry(tp, &err) == 0);
		REQUIRE(tarparts_boundary(tp, &cut, &err) == 0);
		cuts += cut;
	}
	archive_entry_clear(e);
	archive_entry_set_pathname(e, "vol/link");
	archive_entry_set_filetype(e, AE_IFLNK);
	archive_entry_set_perm(e, 0777);
	archive_entry_set_symlink(e, "file-00");
	REQUIRE(tarparts_add_header(tp, e, &err) == 0);
	REQUIRE(tarparts_end_entry(tp, &err) == 0);
	REQUIRE(tarparts_finish(tp, &err) == 0);
	tarparts_free(tp);
	archive_entry_free(e);
	CHECK(cuts >= 3);
	CHECK_INT(s.nparts, cuts + 1);
	REQUIRE(concat(s.dir, s.nparts, all, sizeof all) == 0);
	CHECK(run_cmd("tar tzf ", all, " | wc -l", "23") == 0);
	CHECK(run_cmd("tar tvzf ", all, " | grep ' vol/link -> file-00' | cut -c1",
	    "l") == 0);
	CHECK(run_cmd("tar tvzf ", all, " | grep ' vol/file-07$' | cut -c1-10",
	    "-rw-r-----") == 0);
	CHECK(run_cmd("tar xzOf ", all, " vol/file-19 | wc -c", "12288") == 0);
	CHECK(run_cmd("gzip -t ", all, " && echo ok", "ok") == 0);
}

/* One tarball at 1, 2, 5 and 9 threads, slow and fast sinks: same bytes. */
static void
same_bytes(size_t part_size, int items, int min_parts)
{
	static const int nthreads[] = { 1, 2, 5, 9 };
	static const int sleeps[] = { 0, 300, 0, 50 };
	char first[700], all[700], cmd[1500];
	int nparts0 = 0;

	for (size_t t = 0; t < sizeof nthreads / sizeof nthreads[0]; t++) {
		struct fsink s;
		struct tarparts_sink ts;
		struct tarparts *tp;
		struct cairn_err err = CAIRN_ERR_INIT;
		char name[48];
		uint64_t x = 88172645463325252ull;

		snprintf(name, sizeof name, "same-%zu-%zu", part_size, t);
		sink_init(&s, &ts, name);
		s.write_sleep_us = sleeps[t];
		REQUIRE(tarparts_open(&ts, 1, part_size, 1764676800, &tp,
		    &err) == 0);
		REQUIRE(tarparts_start_thread(tp, 8 << 10, 0, nthreads[t],
		    &err) == 0);
		for (int i = 0; i < items; i++) {
			char path[64], data[1500];
			size_t n = 200 + (size_t)(i * 37 % 1200);

			/* half text, half noise: members differ in size */
			for (size_t j = 0; j < n / 2; j++)
				data[j] = (char)('a' + j % 7);
			noise(data + n / 2, n - n / 2, &x);
			snprintf(path, sizeof path, "resources/x/%05d.json", i);
			REQUIRE(tarparts_add(tp, path, data, n, &err) == 0);
			REQUIRE(tarparts_boundary(tp, NULL, &err) == 0);
		}
		REQUIRE(tarparts_finish(tp, &err) == 0);
		tarparts_free(tp);
		CHECK(s.nparts >= min_parts);
		REQUIRE(concat(s.dir, s.nparts, all, sizeof all) == 0);
		if (t == 0) {
			snprintf(first, sizeof first, "%s", all);
			nparts0 = s.nparts;
			continue;
		}
		CHECK_INT(s.nparts, nparts0);
		snprintf(cmd, sizeof cmd, "cmp -s %s %s && echo same", first,
		    all);
		CHECK(run_cmd(cmd, "", "", "same") == 0);
	}
}

/*
 * With compression threads the tarball's bytes, parts included, do not
 * depend on the number of threads or on their timing (a slow sink, a
 * fast one): part boundaries look at sizes a fixed number of batches
 * back (none for small parts, one per MiB of part size), never at what
 * happens to be compressed.
 */
static void
test_threads_same_bytes(void)
{
	same_bytes(20 << 10, 600, 5);
	same_bytes((1 << 20) + 1, 6000, 2);
}

/*
 * Threaded, item entries are made tar on the compression threads from
 * records, the others on the caller's thread: the tar stream (inflated)
 * is byte for byte the one the unthreaded writer makes, with every kind
 * of entry interleaved: short paths, empty data, long paths (pax),
 * items over the size that is deferred, file entries.
 */
static void
mixed_tarball(int thr, char *all, size_t alllen)
{
	static char big[30000];
	struct fsink s;
	struct tarparts_sink ts;
	struct tarparts *tp;
	struct cairn_err err = CAIRN_ERR_INIT;
	struct archive_entry *e = archive_entry_new();
	char path[300], data[900];
	uint64_t x = 88172645463325252ull;

	for (size_t j = 0; j < sizeof big; j++)
		big[j] = (char)('A' + j * 7 % 26);
	sink_init(&s, &ts, thr ? "mixed-thr" : "mixed");
	REQUIRE(tarparts_open(&ts, 1, 4 << 10, 1764676800, &tp, &err) == 0);
	if (thr)
		REQUIRE(tarparts_start_thread(tp, 8 << 10, 0, 2, &err) == 0);
	for (int i = 0; i < 400; i++) {
		size_t n = (size_t)(i * 53 % 900);

		noise(data, n, &x);	/* parts fill up */
		if (i % 37 == 5)
			snprintf(path, sizeof path, "resources/%0150d.json", i);
		else
			snprintf(path, sizeof path, "resources/x/%05d.json", i);
		if (i % 53 == 9) {
			REQUIRE(tarparts_add(tp, path, big, sizeof big,
			    &err) == 0);
		} else if (i % 59 == 11) {
			archive_entry_clear(e);
			archive_entry_set_pathname(e, path);
			archive_entry_set_filetype(e, AE_IFREG);
			archive_entry_set_perm(e, 0600);
			archive_entry_set_size(e, (la_int64_t)n);
			REQUIRE(tarparts_add_header(tp, e, &err) == 0);
			REQUIRE(tarparts_add_data(tp, data, n, &err) == 0);
			REQUIRE(tarparts_end_entry(tp, &err) == 0);
		} else {
			REQUIRE(tarparts_add(tp, path, data, i % 10 == 3 ? 0 :
			    n, &err) == 0);
		}
		if (i % 2 == 1)
			REQUIRE(tarparts_boundary(tp, NULL, &err) == 0);
	}
	REQUIRE(tarparts_finish(tp, &err) == 0);
	tarparts_free(tp);
	archive_entry_free(e);
	CHECK(s.nparts >= 3);
	REQUIRE(concat(s.dir, s.nparts, all, alllen) == 0);
}

static void
test_threaded_tar_is_unthreaded_tar(void)
{
	char a[700], b[700], cmd[3000];

	mixed_tarball(0, a, sizeof a);
	mixed_tarball(1, b, sizeof b);
	snprintf(cmd, sizeof cmd, "gzip -dc %s > %s.tar && gzip -dc %s | "
	    "cmp -s - %s.tar && echo same", a, a, b, a);
	CHECK(run_cmd(cmd, "", "", "same") == 0);
	CHECK(run_cmd("tar tf ", a, ".tar | wc -l", "400") == 0);
	CHECK(run_cmd("tar xOf ", a, ".tar resources/x/00009.json | wc -c",
	    "30000") == 0);
}

/* The tests above that hold in both modes, with a compression thread. */
#define THREADED(fn)							\
static void								\
fn##_threaded(void)							\
{									\
	threaded = 1;							\
	fn();								\
	threaded = 0;							\
}
THREADED(test_many_parts_read_back)
THREADED(test_each_part_is_whole_member)
THREADED(test_resume_after_part_k)
THREADED(test_empty_and_finish_after_cut)
THREADED(test_sink_error_is_sticky)
THREADED(test_long_path_uses_pax)
THREADED(test_short_paths_are_plain_ustar)
THREADED(test_thread_callbacks)
THREADED(test_thread_write_error)
THREADED(test_thread_free_unfinished)
THREADED(test_file_entries)

int
main(void)
{
	RUN(test_many_parts_read_back);
	RUN(test_each_part_is_whole_member);
	RUN(test_resume_after_part_k);
	RUN(test_empty_and_finish_after_cut);
	RUN(test_sink_error_is_sticky);
	RUN(test_long_path_uses_pax);
	RUN(test_short_paths_are_plain_ustar);
	RUN(test_file_entries);
	RUN(test_threads_same_bytes);
	RUN(test_threaded_tar_is_unthreaded_tar);
	RUN(test_many_parts_read_back_threaded);
	RUN(test_each_part_is_whole_member_threaded);
	RUN(test_resume_after_part_k_threaded);
	RUN(test_empty_and_finish_after_cut_threaded);
	RUN(test_sink_error_is_sticky_threaded);
	RUN(test_long_path_uses_pax_threaded);
	RUN(test_short_paths_are_plain_ustar_threaded);
	RUN(test_thread_callbacks_threaded);
	RUN(test_file_entries_threaded);
	RUN(test_thread_write_error_threaded);
	RUN(test_thread_free_unfinished_threaded);
	return unit_done();
}
