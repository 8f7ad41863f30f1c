/*
 * test_journal.c: unit tests of journal/ (the SQLite journal).
 *
 * Each test opens its own journal file under $CAIRN_TMP. The error tests
 * (read-only path, full disk) run the journal in a forked child whose
 * privileges or file-size limit are reduced, then check the file from the
 * parent. The migration test builds a version-1 journal from the version-1
 * step of schema/journal.sql in the source tree, with SQLite directly.
 */
#include "config.h"
#include "journal/journal.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "tests/unit/unit.h"

#include <stdatomic.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int test_seq;

/* A fresh journal path for this test. Returns a static buffer. */
static const char *
tpath(const char *name)
{
	static char p[512];

	snprintf(p, sizeof p, "%s/j%d-%s.db", UNIT_TMPDIR(), ++test_seq, name);
	return p;
}

static void
fill_item(struct journal_item *it, const char *kind, const char *ns,
    const char *name, int attempt)
{
	memset(it, 0, sizeof *it);
	snprintf(it->kind, sizeof it->kind, "%s", kind);
	snprintf(it->namespace, sizeof it->namespace, "%s", ns);
	snprintf(it->name, sizeof it->name, "%s", name);
	snprintf(it->uid, sizeof it->uid, "uid-%s", name);
	it->attempt = attempt;
	snprintf(it->holder, sizeof it->holder, "server-a");
	snprintf(it->worker, sizeof it->worker, "server-a/1");
}

static void
fill_part(struct journal_part *p, int64_t n)
{
	memset(p, 0, sizeof *p);
	p->part_number = n;
	snprintf(p->upload_id, sizeof p->upload_id, "upload-1");
	snprintf(p->etag, sizeof p->etag, "\"etag-%lld\"", (long long)n);
	snprintf(p->last_key, sizeof p->last_key, "resources/pods/ns/p%04lld",
	    (long long)n);
	if (n > 1)	/* part 1 ends in the first list page */
		snprintf(p->list_continue, sizeof p->list_continue,
		    "eyJydiI6%lld", (long long)n);
	p->items = n * 10;
	p->bytes = n * 1000;
}

/* Open a journal or fail the test. */
#define OPEN(path, jp) do {						\
	struct cairn_err oe_ = CAIRN_ERR_INIT;				\
	if (journal_open((path), 0, (jp), &oe_) < 0) {			\
		char om_[300];						\
		snprintf(om_, sizeof om_, "%.280s", oe_.msg);		\
		UNIT_FAIL_AT(om_);					\
		return;							\
	}								\
} while (0)

/* One value from SQLite directly (independent of journal.c). */
static int64_t
raw_int(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	int64_t v = -1;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) ==
	    SQLITE_OK && sqlite3_prepare_v2(db, sql, -1, &st, NULL) ==
	    SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

static void
test_schema_steps(void)
{
	CHECK(journal_schema_version() >= 2);
}

static void
test_open_create(void)
{
	const char *path = tpath("create");
	struct journal *j = NULL;
	struct cairn_err err = CAIRN_ERR_INIT;
	char p[600];

	OPEN(path, &j);
	CHECK_STR(journal_path(j), path);
	CHECK_INT(journal_check(j, &err), 0);
	journal_close(j);
	CHECK_INT(raw_int(path, "PRAGMA user_version"),
	    journal_schema_version());
	CHECK_INT(raw_int(path, "PRAGMA auto_vacuum"), 2);	/* incremental */
	CHECK_INT(raw_int(path, "SELECT count(*) FROM sqlite_schema "
	    "WHERE name = 'items'"), 1);
	/* WAL mode is persistent in the file. */
	{
		sqlite3 *db = NULL;
		sqlite3_stmt *st = NULL;

		sqlite3_open(path, &db);
		sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL);
		CHECK(sqlite3_step(st) == SQLITE_ROW);
		CHECK_STR((const char *)sqlite3_column_text(st, 0), "wal");
		sqlite3_finalize(st);
		sqlite3_close(db);
	}
	/* Reopening an existing journal works and changes nothing. */
	OPEN(path, &j);
	journal_close(j);
	snprintf(p, sizeof p, "%s-wal", path);
	CHECK(access(p, F_OK) != 0);	/* clean close removes the WAL */
}

static void
test_claim_and_list(void)
{
	struct journal *j = NULL;
	struct journal_item it, got, *list = NULL;
	struct journal_filter f;
	struct journal_counter *cs = NULL;
	struct cairn_err err = CAIRN_ERR_INIT;
	int64_t id1 = 0, id2 = 0, id3 = 0, again = 0;
	size_t n = 0, i;

	OPEN(tpath("claim"), &j);
	fill_item(&it, "Backup", "cairn-system", "b1", 1);
	CHECK_INT(journal_claim(j, &it, &id1, &err), 0);
	fill_item(&it, "Restore", "cairn-system", "r1", 1);
	CHECK_INT(journal_claim(j, &it, &id2, &err), 0);
	fill_item(&it, "Backup", "cairn-system", "b2", 1);
	snprintf(it.holder, sizeof it.holder, "server-b");
	CHECK_INT(journal_claim(j, &it, &id3, &err), 0);
	CHECK(id1 > 0 && id2 > id1 && id3 > id2);

	CHECK_INT(journal_item_get(j, id1, &got, &err), 0);
	CHECK_STR(got.kind, "Backup");
	CHECK_STR(got.name, "b1");
	CHECK_STR(got.uid, "uid-b1");
	CHECK_STR(got.phase, "InProgress");
	CHECK_STR(got.worker, "server-a/1");
	CHECK_INT(got.attempt, 1);
	CHECK(got.claimed_at > 0 && got.finished_at == 0);
	CHECK_INT(journal_item_get(j, 9999, &got, &err), CAIRN_ENOTFOUND);

	/* A new attempt of the same object keeps its row. */
	fill_item(&it, "Backup", "cairn-system", "b1", 2);
	snprintf(it.worker, sizeof it.worker, "server-a/2");
	CHECK_INT(journal_claim(j, &it, &again, &err), 0);
	CHECK_INT(again, id1);
	CHECK_INT(journal_item_find(j, "Backup", "cairn-system", "b1", NULL,
	    &got, &err), 0);
	CHECK_INT(got.attempt, 2);
	CHECK_STR(got.worker, "server-a/2");
	CHECK_INT(journal_item_find(j, "Backup", "cairn-system", "b1",
	    "other-uid", &got, &err), CAIRN_ENOTFOUND);

	/* Resume at start: what server-a holds in progress. */
	CHECK_INT(journal_set_phase(j, id2, "Completed", &err), 0);
	memset(&f, 0, sizeof f);
	f.phase = "InProgress";
	f.holder = "server-a";
	CHECK_INT(journal_items(j, &f, &list, &n, &err), 0);
	CHECK_INT(n, 1);
	if (n == 1)
		CHECK_STR(list[0].name, "b1");
	free(list);
	CHECK_INT(journal_items(j, NULL, &list, &n, &err), 0);
	CHECK_INT(n, 3);
	free(list);
	memset(&f, 0, sizeof f);
	f.kind = "Backup";
	f.limit = 1;
	CHECK_INT(journal_items(j, &f, &list, &n, &err), 0);
	CHECK_INT(n, 1);
	free(list);

	CHECK_INT(journal_set_progress(j, id1, 100, 40, 12345, &err), 0);
	CHECK_INT(journal_item_get(j, id1, &got, &err), 0);
	CHECK_INT(got.total_items, 100);
	CHECK_INT(got.items_done, 40);
	CHECK_INT(got.bytes_done, 12345);
	CHECK_INT(journal_set_progress(j, 777, 1, 1, 1, &err),
	    CAIRN_ENOTFOUND);

	/* Bad input is refused before anything is written. */
	fill_item(&it, "Schedule", "ns", "s", 1);
	CHECK_INT(journal_claim(j, &it, NULL, &err), CAIRN_EINVAL);
	fill_item(&it, "Backup", "ns", "b", 0);
	CHECK_INT(journal_claim(j, &it, NULL, &err), CAIRN_EINVAL);

	CHECK_INT(journal_counters(j, &cs, &n, &err), 0);
	for (i = 0; i < n; i++) {
		if (strcmp(cs[i].kind, "Backup") == 0 &&
		    strcmp(cs[i].outcome, "Claimed") == 0)
			CHECK_INT(cs[i].n, 3);
	}
	CHECK_INT(n, 2);
	free(cs);
	journal_close(j);
}

static void
test_parts(void)
{
	struct journal *j = NULL;
	struct journal_item it;
	struct journal_part p, *parts = NULL;
	struct cairn_err err = CAIRN_ERR_INIT;
	int64_t id = 0, i;
	size_t n = 0;

	OPEN(tpath("parts"), &j);
	fill_item(&it, "Backup", "ns", "b1", 1);
	REQUIRE(journal_claim(j, &it, &id, &err) == 0);
	for (i = 3; i >= 1; i--) {
		fill_part(&p, i);
		CHECK_INT(journal_part_add(j, id, &p, &err), 0);
	}
	CHECK_INT(journal_parts(j, id, &parts, &n, &err), 0);
	REQUIRE(n == 3);
	for (i = 0; i < 3; i++) {
		CHECK_INT(parts[i].part_number, i + 1);
		CHECK_INT(parts[i].bytes, (i + 1) * 1000);
		CHECK(parts[i].created_at > 0);
	}
	CHECK_STR(parts[1].etag, "\"etag-2\"");
	CHECK_STR(parts[2].last_key, "resources/pods/ns/p0003");
	CHECK_STR(parts[0].upload_id, "upload-1");
	CHECK_STR(parts[0].list_continue, "");
	CHECK_STR(parts[2].list_continue, "eyJydiI63");
	free(parts);

	/* The same part twice: EEXIST, and nothing changed. */
	fill_part(&p, 2);
	snprintf(p.etag, sizeof p.etag, "other");
	CHECK_INT(journal_part_add(j, id, &p, &err), CAIRN_EEXIST);
	CHECK(strstr(err.msg, journal_path(j)) != NULL);
	/* A part of an unknown item: the foreign key refuses it. */
	fill_part(&p, 1);
	CHECK_INT(journal_part_add(j, id + 100, &p, &err), CAIRN_EINVAL);
	CHECK_INT(journal_parts(j, id, &parts, &n, &err), 0);
	CHECK_INT(n, 3);
	if (n == 3)
		CHECK_STR(parts[1].etag, "\"etag-2\"");
	free(parts);
	CHECK_INT(journal_parts(j, id + 100, &parts, &n, &err), 0);
	CHECK_INT(n, 0);
	CHECK(parts == NULL);
	journal_close(j);
}

static void
test_restore_progress(void)
{
	struct journal *j = NULL;
	struct journal_item it;
	struct cairn_err err = CAIRN_ERR_INIT;
	enum journal_rstate s = JOURNAL_R_COUNT;
	int64_t id = 0, counts[JOURNAL_R_COUNT];
	char key[64];
	int i;

	OPEN(tpath("restore"), &j);
	fill_item(&it, "Restore", "ns", "r1", 1);
	REQUIRE(journal_claim(j, &it, &id, &err) == 0);
	REQUIRE(journal_begin(j, &err) == 0);
	for (i = 0; i < 500; i++) {
		snprintf(key, sizeof key, "v1/configmaps/ns/cm%03d", i);
		CHECK_INT(journal_restore_mark(j, id, key, (enum journal_rstate)
		    (i % 3), &err), 0);
	}
	/* Inside the batch this thread sees its own rows. */
	CHECK_INT(journal_restore_lookup(j, id, "v1/configmaps/ns/cm001", &s,
	    &err), 0);
	CHECK_INT(journal_commit(j, &err), 0);

	CHECK_INT(journal_restore_lookup(j, id, "v1/configmaps/ns/cm004", &s,
	    &err), 0);
	CHECK_INT(s, JOURNAL_R_UPDATED);
	CHECK_INT(journal_restore_lookup(j, id, "v1/configmaps/ns/nope", &s,
	    &err), CAIRN_ENOTFOUND);
	CHECK_INT(journal_restore_mark(j, id, "v1/configmaps/ns/cm004",
	    JOURNAL_R_FAILED, &err), 0);
	CHECK_INT(journal_restore_lookup(j, id, "v1/configmaps/ns/cm004", &s,
	    &err), 0);
	CHECK_INT(s, JOURNAL_R_FAILED);
	CHECK_INT(journal_restore_counts(j, id, counts, &err), 0);
	CHECK_INT(counts[JOURNAL_R_CREATED], 167);
	CHECK_INT(counts[JOURNAL_R_UPDATED], 166);
	CHECK_INT(counts[JOURNAL_R_SKIPPED], 166);
	CHECK_INT(counts[JOURNAL_R_FAILED], 1);
	CHECK_INT(journal_restore_mark(j, id, "k", JOURNAL_R_COUNT, &err),
	    CAIRN_EINVAL);
	CHECK_STR(journal_rstate_name(JOURNAL_R_SKIPPED), "skipped");
	journal_close(j);
}

static void
test_volumes(void)
{
	struct journal *j = NULL;
	struct journal_item it;
	struct journal_volume v, *vs = NULL;
	struct cairn_err err = CAIRN_ERR_INIT;
	int64_t id = 0;
	size_t n = 0;

	OPEN(tpath("volumes"), &j);
	fill_item(&it, "Backup", "ns", "b1", 1);
	REQUIRE(journal_claim(j, &it, &id, &err) == 0);
	memset(&v, 0, sizeof v);
	snprintf(v.volume, sizeof v.volume, "pvc-b");
	snprintf(v.phase, sizeof v.phase, "InProgress");
	v.bytes_total = 1000;
	v.bytes_done = 10;
	v.files_done = 1;
	snprintf(v.last_file, sizeof v.last_file, "data/a.bin");
	CHECK_INT(journal_volume_set(j, id, &v, &err), 0);
	snprintf(v.volume, sizeof v.volume, "pvc-a");
	CHECK_INT(journal_volume_set(j, id, &v, &err), 0);
	snprintf(v.volume, sizeof v.volume, "pvc-b");
	v.bytes_done = 900;
	v.files_done = 7;
	snprintf(v.last_file, sizeof v.last_file, "data/z.bin");
	CHECK_INT(journal_volume_set(j, id, &v, &err), 0);
	CHECK_INT(journal_volumes(j, id, &vs, &n, &err), 0);
	REQUIRE(n == 2);
	CHECK_STR(vs[0].volume, "pvc-a");
	CHECK_STR(vs[1].volume, "pvc-b");
	CHECK_INT(vs[1].bytes_done, 900);
	CHECK_INT(vs[1].bytes_total, 1000);
	CHECK_INT(vs[1].files_done, 7);
	CHECK_STR(vs[1].last_file, "data/z.bin");
	free(vs);
	journal_close(j);
}

struct ev_seen {
	int	n;
	int	stop_at;
	char	first[64];
	char	last_fields[64];
	size_t	longest;
};

static int
ev_cb(int64_t at, const char *level, const char *line, const char *fields,
    void *arg)
{
	struct ev_seen *s = arg;

	if (s->n == 0)
		snprintf(s->first, sizeof s->first, "%s %s", level, line);
	snprintf(s->last_fields, sizeof s->last_fields, "%s", fields);
	if (strlen(line) > s->longest)
		s->longest = strlen(line);
	if (at <= 0)
		return 1;
	return ++s->n == s->stop_at;
}

/* Warnings, errors and the schedule label live with the item (v6). */
static void
test_counts_schedule(void)
{
	struct journal *j = NULL;
	struct journal_item it, got;
	struct cairn_err err = CAIRN_ERR_INIT;
	int64_t id = 0, id2 = 0;

	OPEN(tpath("counts"), &j);
	fill_item(&it, "Backup", "ns", "nightly-1", 1);
	snprintf(it.schedule, sizeof it.schedule, "nightly");
	REQUIRE(journal_claim(j, &it, &id, &err) == 0);
	CHECK_INT(journal_set_progress(j, id, 10, 10, 4096, &err), 0);
	CHECK_INT(journal_set_counts(j, id, 2, 1, &err), 0);
	CHECK_INT(journal_item_get(j, id, &got, &err), 0);
	CHECK_INT(got.warnings, 2);
	CHECK_INT(got.errors, 1);
	CHECK_STR(got.schedule, "nightly");
	/* a later claim without a schedule keeps it */
	it.attempt = 2;
	it.schedule[0] = '\0';
	REQUIRE(journal_claim(j, &it, &id2, &err) == 0);
	CHECK_INT(id2, id);
	CHECK_INT(journal_item_get(j, id, &got, &err), 0);
	CHECK_STR(got.schedule, "nightly");
	CHECK_INT(got.warnings, 2);
	CHECK_INT(journal_set_schedule(j, id, "weekly", &err), 0);
	CHECK_INT(journal_item_get(j, id, &got, &err), 0);
	CHECK_STR(got.schedule, "weekly");
	CHECK_INT(journal_set_counts(j, 9999, 1, 1, &err), CAIRN_ENOTFOUND);
	journal_close(j);
}

static void
test_events(void)
{
	struct journal *j = NULL;
	struct journal_item it;
	struct cairn_err err = CAIRN_ERR_INIT;
	struct ev_seen seen;
	char *big;
	int64_t id = 0;
	int i;

	OPEN(tpath("events"), &j);
	fill_item(&it, "Backup", "ns", "b1", 1);
	REQUIRE(journal_claim(j, &it, &id, &err) == 0);
	for (i = 0; i < 20; i++)
		CHECK_INT(journal_event(j, id, "info", &err, "line %d of %s",
		    i, "b1"), 0);
	big = xmalloc(3 * JOURNAL_EVENT_MAX);
	memset(big, 'x', 3 * JOURNAL_EVENT_MAX - 1);
	big[3 * JOURNAL_EVENT_MAX - 1] = '\0';
	CHECK_INT(journal_event(j, id, "warning", &err, "%s", big), 0);
	free(big);
	CHECK_INT(journal_event_kv(j, id, "info", "resource=pods namespace=a",
	    &err, "listed %d items", 3), 0);
	memset(&seen, 0, sizeof seen);
	CHECK_INT(journal_events_foreach(j, id, ev_cb, &seen, &err), 0);
	CHECK_INT(seen.n, 22);
	CHECK_STR(seen.last_fields, "resource=pods namespace=a");
	CHECK_STR(seen.first, "info line 0 of b1");
	CHECK_INT(seen.longest, JOURNAL_EVENT_MAX - 1);
	memset(&seen, 0, sizeof seen);
	seen.stop_at = 5;
	CHECK_INT(journal_events_foreach(j, id, ev_cb, &seen, &err), 0);
	CHECK_INT(seen.n, 5);
	journal_close(j);
}

static void
test_finish_counters_prune(void)
{
	const char *path = tpath("prune");
	struct journal *j = NULL;
	struct journal_item it, got, *list = NULL;
	struct journal_part p;
	struct journal_counter *cs = NULL;
	struct cairn_err err = CAIRN_ERR_INIT;
	int64_t done = 0, running = 0, pruned = -1, counts[JOURNAL_R_COUNT];
	char key[32];
	size_t n = 0, i;
	int k, completed = 0;

	OPEN(path, &j);
	fill_item(&it, "Backup", "ns", "done", 1);
	REQUIRE(journal_claim(j, &it, &done, &err) == 0);
	fill_item(&it, "Backup", "ns", "running", 1);
	REQUIRE(journal_claim(j, &it, &running, &err) == 0);
	REQUIRE(journal_begin(j, &err) == 0);
	for (k = 1; k <= 200; k++) {
		fill_part(&p, k);
		CHECK_INT(journal_part_add(j, done, &p, &err), 0);
		CHECK_INT(journal_part_add(j, running, &p, &err), 0);
		snprintf(key, sizeof key, "key-%d", k);
		CHECK_INT(journal_restore_mark(j, done, key, JOURNAL_R_CREATED,
		    &err), 0);
		CHECK_INT(journal_event(j, done, "info", &err, "event %d", k),
		    0);
	}
	REQUIRE(journal_commit(j, &err) == 0);
	CHECK_INT(journal_finish(j, done, "Completed", "all good", &err), 0);
	CHECK_INT(journal_finish(j, 4242, "Completed", NULL, &err),
	    CAIRN_ENOTFOUND);
	CHECK_INT(journal_item_get(j, done, &got, &err), 0);
	CHECK_STR(got.phase, "Completed");
	CHECK_STR(got.message, "all good");
	CHECK(got.finished_at > 0);

	/* Not old enough yet: nothing goes. */
	CHECK_INT(journal_prune(j, got.finished_at - 1, &pruned, &err), 0);
	CHECK_INT(pruned, 0);
	CHECK_INT(journal_prune(j, time_now_us() + 1, &pruned, &err), 0);
	CHECK_INT(pruned, 1);
	CHECK_INT(journal_item_get(j, done, &got, &err), CAIRN_ENOTFOUND);
	CHECK_INT(journal_restore_counts(j, done, counts, &err), 0);
	CHECK_INT(counts[JOURNAL_R_CREATED], 0);
	CHECK_INT(journal_items(j, NULL, &list, &n, &err), 0);
	CHECK_INT(n, 1);
	free(list);
	CHECK_INT(journal_counters(j, &cs, &n, &err), 0);
	for (i = 0; i < n; i++)
		if (strcmp(cs[i].outcome, "Completed") == 0)
			completed = (int)cs[i].n;
	CHECK_INT(completed, 1);	/* counters outlive pruning */
	free(cs);
	CHECK_INT(journal_counter_add(j, "Backup", "Deleted", 5, &err), 0);
	CHECK_INT(journal_check(j, &err), 0);
	/* Prune inside a batch is refused. */
	REQUIRE(journal_begin(j, &err) == 0);
	CHECK_INT(journal_prune(j, 0, NULL, &err), CAIRN_EINVAL);
	journal_rollback(j);
	journal_close(j);
	CHECK_INT(raw_int(path, "SELECT count(*) FROM parts"), 200);
	CHECK_INT(raw_int(path, "SELECT count(*) FROM events"), 0);
	CHECK_INT(raw_int(path, "SELECT count(*) FROM restore_items"), 0);
	CHECK_INT(raw_int(path, "PRAGMA freelist_count"), 0);
}

static void
test_batches(void)
{
	const char *path = tpath("batch");
	struct journal *j = NULL;
	struct journal_item it;
	struct journal_part p, *parts = NULL;
	struct cairn_err err = CAIRN_ERR_INIT;
	int64_t id = 0;
	size_t n = 0;

	OPEN(path, &j);
	fill_item(&it, "Backup", "ns", "b1", 1);
	REQUIRE(journal_claim(j, &it, &id, &err) == 0);

	/* Rolled back: nothing stays. */
	REQUIRE(journal_begin(j, &err) == 0);
	fill_part(&p, 1);
	CHECK_INT(journal_part_add(j, id, &p, &err), 0);
	journal_rollback(j);
	CHECK_INT(journal_parts(j, id, &parts, &n, &err), 0);
	CHECK_INT(n, 0);

	/* Nested batches: only the outer commit writes. */
	REQUIRE(journal_begin(j, &err) == 0);
	REQUIRE(journal_begin(j, &err) == 0);
	CHECK_INT(journal_part_add(j, id, &p, &err), 0);
	CHECK_INT(journal_commit(j, &err), 0);
	CHECK_INT(raw_int(path, "SELECT count(*) FROM parts"), 0);
	CHECK_INT(journal_commit(j, &err), 0);
	CHECK_INT(raw_int(path, "SELECT count(*) FROM parts"), 1);

	/* A failed write poisons the batch: the commit rolls all back. */
	REQUIRE(journal_begin(j, &err) == 0);
	fill_part(&p, 2);
	CHECK_INT(journal_part_add(j, id, &p, &err), 0);
	fill_part(&p, 1);
	CHECK_INT(journal_part_add(j, id, &p, &err), CAIRN_EEXIST);
	fill_part(&p, 3);	/* later writes report the first error */
	CHECK_INT(journal_part_add(j, id, &p, &err), CAIRN_EEXIST);
	CHECK_INT(journal_commit(j, &err), CAIRN_EEXIST);
	CHECK(strstr(err.msg, "rolled back") != NULL);
	CHECK_INT(journal_parts(j, id, &parts, &n, &err), 0);
	CHECK_INT(n, 1);
	free(parts);

	/* Commit without begin. */
	CHECK_INT(journal_commit(j, &err), CAIRN_EINVAL);
	/* Closing with a batch open rolls it back. */
	REQUIRE(journal_begin(j, &err) == 0);
	fill_part(&p, 9);
	CHECK_INT(journal_part_add(j, id, &p, &err), 0);
	journal_close(j);
	CHECK_INT(raw_int(path, "SELECT count(*) FROM parts"), 1);
}

/* ---- Threads ---------------------------------------------------------------- */

struct thr {
	struct journal	*j;
	int64_t		 id;
	int		 base;
	int		 fails;
	atomic_int	*go;
};

static void *
thr_writer(void *arg)
{
	struct thr *t = arg;
	struct journal_part p;
	struct cairn_err err = CAIRN_ERR_INIT;
	char key[32];
	int i;

	for (i = 0; i < 50; i++) {
		fill_part(&p, t->base + i);
		if (journal_part_add(t->j, t->id, &p, &err) < 0)
			t->fails++;
		if (journal_begin(t->j, &err) < 0) {
			t->fails++;
			continue;
		}
		snprintf(key, sizeof key, "k-%d-%d", t->base, i);
		if (journal_restore_mark(t->j, t->id, key, JOURNAL_R_CREATED,
		    &err) < 0 || journal_event(t->j, t->id, "info", &err,
		    "w%d %d", t->base, i) < 0)
			t->fails++;
		if (journal_commit(t->j, &err) < 0)
			t->fails++;
	}
	return NULL;
}

static void *
thr_reader(void *arg)
{
	struct thr *t = arg;
	struct journal_item *items = NULL;
	struct journal_part *parts = NULL;
	struct cairn_err err = CAIRN_ERR_INIT;
	size_t n = 0, last = 0;

	while (!*t->go) {
		if (journal_parts(t->j, t->id, &parts, &n, &err) < 0 ||
		    n < last)
			t->fails++;
		last = n;
		free(parts);
		if (journal_items(t->j, NULL, &items, &n, &err) < 0)
			t->fails++;
		free(items);
	}
	return NULL;
}

static void
test_threads(void)
{
	struct journal *j = NULL;
	struct journal_item it;
	struct journal_part *parts = NULL;
	struct cairn_err err = CAIRN_ERR_INIT;
	struct thr w[4], r;
	pthread_t tw[4], tr;
	atomic_int stop = 0;
	int64_t id = 0, counts[JOURNAL_R_COUNT];
	size_t n = 0;
	int i;

	OPEN(tpath("threads"), &j);
	fill_item(&it, "Backup", "ns", "b1", 1);
	REQUIRE(journal_claim(j, &it, &id, &err) == 0);
	memset(&r, 0, sizeof r);
	r.j = j;
	r.id = id;
	r.go = &stop;
	pthread_create(&tr, NULL, thr_reader, &r);
	for (i = 0; i < 4; i++) {
		memset(&w[i], 0, sizeof w[i]);
		w[i].j = j;
		w[i].id = id;
		w[i].base = 1 + i * 1000;
		pthread_create(&tw[i], NULL, thr_writer, &w[i]);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(tw[i], NULL);
		CHECK_INT(w[i].fails, 0);
	}
	stop = 1;
	pthread_join(tr, NULL);
	CHECK_INT(r.fails, 0);
	CHECK_INT(journal_parts(j, id, &parts, &n, &err), 0);
	CHECK_INT(n, 200);
	free(parts);
	CHECK_INT(journal_restore_counts(j, id, counts, &err), 0);
	CHECK_INT(counts[JOURNAL_R_CREATED], 200);
	journal_close(j);
}

/* A batch of one thread is its own: another thread's write waits. */
struct iso {
	struct journal	*j;
	int64_t		 id;
	atomic_int	 started, done;
	int		 rc;
};

static void *
iso_writer(void *arg)
{
	struct iso *s = arg;
	struct journal_part p;
	struct cairn_err err = CAIRN_ERR_INIT;

	fill_part(&p, 50);
	s->started = 1;
	s->rc = journal_part_add(s->j, s->id, &p, &err);
	s->done = 1;
	return NULL;
}

static void
test_batch_isolation(void)
{
	const char *path = tpath("iso");
	struct journal *j = NULL;
	struct journal_item it;
	struct journal_part p;
	struct cairn_err err = CAIRN_ERR_INIT;
	struct iso s;
	pthread_t t;
	int64_t id = 0;

	OPEN(path, &j);
	fill_item(&it, "Backup", "ns", "b1", 1);
	REQUIRE(journal_claim(j, &it, &id, &err) == 0);
	memset(&s, 0, sizeof s);
	s.j = j;
	s.id = id;
	REQUIRE(journal_begin(j, &err) == 0);
	fill_part(&p, 1);
	CHECK_INT(journal_part_add(j, id, &p, &err), 0);
	pthread_create(&t, NULL, iso_writer, &s);
	while (!s.started)
		usleep(1000);
	usleep(50000);
	CHECK(!s.done);		/* waits for our batch */
	journal_rollback(j);
	pthread_join(t, NULL);
	CHECK_INT(s.rc, 0);
	journal_close(j);
	/* Our rolled-back part is gone, the other thread's part stayed. */
	CHECK_INT(raw_int(path, "SELECT count(*) FROM parts"), 1);
	CHECK_INT(raw_int(path, "SELECT part_number FROM parts"), 50);
}

/* ---- Versions and migration ---------------------------------------------- */

static void
test_newer_version_refused(void)
{
	const char *path = tpath("newer");
	struct journal *j = NULL;
	struct cairn_err err = CAIRN_ERR_INIT;
	sqlite3 *db = NULL;
	char *sql, want[64];
	int v = journal_schema_version() + 5;

	OPEN(path, &j);
	journal_close(j);
	sqlite3_open(path, &db);
	sql = xasprintf("PRAGMA user_version = %d", v);
	CHECK(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK);
	free(sql);
	sqlite3_close(db);
	CHECK_INT(journal_open(path, 0, &j, &err), CAIRN_EUNSUPPORTED);
	CHECK(j == NULL);
	CHECK(strstr(err.msg, path) != NULL);
	snprintf(want, sizeof want, "schema version %d", v);
	CHECK(strstr(err.msg, want) != NULL);
	snprintf(want, sizeof want, "versions up to %d",
	    journal_schema_version());
	CHECK(strstr(err.msg, want) != NULL);
	CHECK(strstr(err.msg, "newer cairn") != NULL);
	CHECK_INT(raw_int(path, "PRAGMA user_version"), v);	/* untouched */
}

static void
test_not_a_journal(void)
{
	const char *path = tpath("garbage");
	struct journal *j = NULL;
	struct cairn_err err = CAIRN_ERR_INIT;
	sqlite3 *db = NULL;
	FILE *f;
	int i;

	f = fopen(path, "w");
	REQUIRE(f != NULL);
	for (i = 0; i < 1000; i++)
		fputs("this is not a database\n", f);
	fclose(f);
	CHECK_INT(journal_open(path, 0, &j, &err), CAIRN_EINVAL);
	CHECK(strstr(err.msg, path) != NULL);
	CHECK(strstr(err.msg, "not a") != NULL);

	path = tpath("otherdb");
	sqlite3_open(path, &db);
	sqlite3_exec(db, "CREATE TABLE t (x)", NULL, NULL, NULL);
	sqlite3_close(db);
	CHECK_INT(journal_open(path, 0, &j, &err), CAIRN_EINVAL);
	CHECK(strstr(err.msg, "not a cairn journal") != NULL);
}

/* The version-1 step of schema/journal.sql in the source tree. */
static char *
schema_v1(void)
{
	const char *src = getenv("CAIRN_SRCDIR");
	char path[512], *text, *a, *b;
	FILE *f;
	size_t n;

	snprintf(path, sizeof path, "%s/schema/journal.sql",
	    src != NULL && *src ? src : CAIRN_SRCDIR);
	f = fopen(path, "r");
	if (f == NULL)
		return NULL;
	text = xcalloc(1, 1 << 20);
	n = fread(text, 1, (1 << 20) - 1, f);
	fclose(f);
	text[n] = '\0';
	a = strstr(text, "\n-- @version 1\n");
	b = a != NULL ? strstr(a, "\n-- @version 2\n") : NULL;
	if (b == NULL) {
		free(text);
		return NULL;
	}
	*b = '\0';
	memmove(text, a, strlen(a) + 1);
	return text;
}

static void
test_migrate_v1(void)
{
	const char *path = tpath("v1");
	struct journal *j = NULL;
	struct journal_item got;
	struct journal_part *parts = NULL;
	struct cairn_err err = CAIRN_ERR_INIT;
	enum journal_rstate s;
	sqlite3 *db = NULL;
	char *v1 = schema_v1();
	size_t n = 0;
	int64_t fin = 0;

	REQUIRE(v1 != NULL);
	REQUIRE(sqlite3_open(path, &db) == SQLITE_OK);
	CHECK(sqlite3_exec(db, v1, NULL, NULL, NULL) == SQLITE_OK);
	free(v1);
	CHECK(sqlite3_exec(db,
	    "PRAGMA user_version = 1;"
	    "INSERT INTO items (id, kind, namespace, name, uid, attempt, phase,"
	    " holder, worker, claimed_at, updated_at) VALUES (7, 'Backup', "
	    "'ns', 'old', 'u1', 3, 'InProgress', 'srv', 'srv/1', 1, 2);"
	    "INSERT INTO parts VALUES (7, 1, 'up', '\"e1\"', 'k1', 5, 500, 3);"
	    "INSERT INTO restore_items VALUES (7, 'key', 'skipped', 4);",
	    NULL, NULL, NULL) == SQLITE_OK);
	sqlite3_close(db);
	CHECK_INT(raw_int(path, "SELECT count(*) FROM pragma_table_info"
	    "('items') WHERE name = 'message'"), 0);

	OPEN(path, &j);
	CHECK_INT(journal_check(j, &err), 0);
	CHECK_INT(journal_item_get(j, 7, &got, &err), 0);
	CHECK_STR(got.name, "old");
	CHECK_INT(got.attempt, 3);
	CHECK_STR(got.message, "");		/* the new column's default */
	CHECK_INT(journal_parts(j, 7, &parts, &n, &err), 0);
	CHECK_INT(n, 1);
	if (n == 1) {
		CHECK_STR(parts[0].etag, "\"e1\"");
		/* version 3's column: no token, so a resume lists from the start */
		CHECK_STR(parts[0].list_continue, "");
	}
	free(parts);
	CHECK_INT(journal_restore_lookup(j, 7, "key", &s, &err), 0);
	CHECK_INT(s, JOURNAL_R_SKIPPED);
	CHECK_INT(journal_finish(j, 7, "Failed", "node lost", &err), 0);
	CHECK_INT(journal_item_get(j, 7, &got, &err), 0);
	CHECK_STR(got.message, "node lost");
	fin = got.finished_at;
	journal_close(j);
	CHECK_INT(raw_int(path, "PRAGMA user_version"),
	    journal_schema_version());
	CHECK_INT(raw_int(path, "SELECT count(*) FROM sqlite_schema WHERE "
	    "name = 'items_finished'"), 1);
	CHECK(fin > 0);
}

/* ---- Read-only path and full disk ------------------------------------------ */

/* Run fn(arg) in a child; returns its exit status (or -1). */
static int
in_child(int (*fn)(void *), void *arg)
{
	pid_t pid;
	int st;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0)
		_exit(fn(arg));
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

struct ro_case {
	char	dir[400];
	char	msg[CAIRN_ERR_MSG_MAX];
	int	code;
};

/* Shared between child and parent through a file next to the journal. */
static void
ro_report(const char *dir, int code, const char *msg)
{
	char p[600];
	FILE *f;

	snprintf(p, sizeof p, "%s/../ro-report", dir);
	f = fopen(p, "w");
	if (f != NULL) {
		fprintf(f, "%d\n%s\n", code, msg);
		fclose(f);
	}
}

/*
 * Child: make the directory read-only, then open "existing.db" (a journal
 * made before) and "new.db" there. Root writes through any permission, so
 * as root the child makes the directory a read-only bind mount in a mount
 * namespace of its own (gone when it exits), as a read-only root file
 * system in a pod would be; otherwise file modes are enough.
 */
static int
ro_child(void *arg)
{
	struct ro_case *c = arg;
	struct journal *j = NULL;
	struct cairn_err e1 = CAIRN_ERR_INIT, e2 = CAIRN_ERR_INIT;
	char msg[2 * CAIRN_ERR_MSG_MAX + 8], p[600];

	if (geteuid() == 0) {
		if (unshare(CLONE_NEWNS) < 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		    mount(c->dir, c->dir, NULL, MS_BIND, NULL) < 0 ||
		    mount(NULL, c->dir, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY,
		    NULL) < 0) {
			ro_report(c->dir, 2, strerror(errno));
			return 0;
		}
	} else {
		snprintf(p, sizeof p, "%s/existing.db", c->dir);
		if (chmod(p, 0444) < 0 || chmod(c->dir, 0555) < 0)
			return 10;
	}
	snprintf(p, sizeof p, "%s/existing.db", c->dir);
	journal_open(p, 0, &j, &e1);
	journal_close(j);
	snprintf(p, sizeof p, "%s/new.db", c->dir);
	journal_open(p, 0, &j, &e2);
	journal_close(j);
	snprintf(msg, sizeof msg, "%s\n%s", e1.msg, e2.msg);
	ro_report(c->dir, e1.code == CAIRN_EIO && e2.code == CAIRN_EIO ? 0 : 1,
	    msg);
	return 0;
}

static void
test_read_only(void)
{
	struct ro_case c;
	struct journal *j = NULL;
	struct journal_item it;
	struct cairn_err err = CAIRN_ERR_INIT;
	char p[512], line[CAIRN_ERR_MSG_MAX + 8];
	FILE *f;
	int code = -1;

	memset(&c, 0, sizeof c);
	snprintf(p, sizeof p, "%s/ro%d", UNIT_TMPDIR(), ++test_seq);
	REQUIRE(mkdir(p, 0700) == 0);
	snprintf(c.dir, sizeof c.dir, "%.380s/d", p);
	REQUIRE(mkdir(c.dir, 0755) == 0);
	snprintf(p, sizeof p, "%s/existing.db", c.dir);
	OPEN(p, &j);
	fill_item(&it, "Backup", "ns", "b1", 1);
	CHECK_INT(journal_claim(j, &it, NULL, &err), 0);
	journal_close(j);
	CHECK_INT(in_child(ro_child, &c), 0);
	chmod(c.dir, 0755);
	snprintf(p, sizeof p, "%s/../ro-report", c.dir);
	f = fopen(p, "r");
	REQUIRE(f != NULL);
	if (fgets(line, sizeof line, f) != NULL)
		code = atoi(line);
	CHECK_INT(code, 0);
	/* Both messages name the file and say what is wrong. */
	if (fgets(line, sizeof line, f) != NULL) {
		CHECK(strstr(line, c.dir) != NULL);
		CHECK(strstr(line, "existing.db: the file is read-only") !=
		    NULL);
	} else
		CHECK(!"no first message");
	if (fgets(line, sizeof line, f) != NULL) {
		CHECK(strstr(line, "new.db") != NULL);
		CHECK(strstr(line, "unable to open") != NULL);
		CHECK(strstr(line, "Read-only file system") != NULL ||
		    strstr(line, "Permission denied") != NULL);
	} else
		CHECK(!"no second message");
	fclose(f);
	/* The journal is as it was. */
	snprintf(p, sizeof p, "%s/existing.db", c.dir);
	CHECK_INT(raw_int(p, "SELECT count(*) FROM items"), 1);
}

struct full_case {
	char	path[512];
	int64_t	item;
	char	out[600];	/* the child's report: one line per commit */
};

/*
 * Child: cap the size of any file it writes, ignore SIGXFSZ (writes then
 * fail with EFBIG), and add parts until the journal refuses. Reports each
 * part whose commit returned 0, then the error.
 */
static int
full_child(void *arg)
{
	struct full_case *c = arg;
	struct journal *j = NULL;
	struct journal_part p;
	struct cairn_err err = CAIRN_ERR_INIT;
	struct rlimit rl;
	FILE *out;
	int64_t n;
	int rc = 0, i;

	out = fopen(c->out, "w");
	if (out == NULL)
		return 10;
	if (journal_open(c->path, 0, &j, &err) < 0) {
		fprintf(out, "open-error %s\n", err.msg);
		return 11;
	}
	fflush(out);
	signal(SIGXFSZ, SIG_IGN);
	rl.rlim_cur = rl.rlim_max = 256 << 10;
	if (setrlimit(RLIMIT_FSIZE, &rl) < 0)
		return 12;
	for (n = 1; n < 100000; n++) {
		fill_part(&p, n);
		memset(p.last_key, 'k', sizeof p.last_key - 1);
		memset(p.upload_id, 'u', sizeof p.upload_id - 1);
		if (n % 2 == 0) {
			/* A batch: two parts in one transaction. */
			rc = journal_begin(j, &err);
			if (rc == 0)
				rc = journal_part_add(j, c->item, &p, &err);
			for (i = 0; rc == 0 && i < 20; i++)
				rc = journal_event(j, c->item, "info", &err,
				    "%0900d", i);
			if (rc == 0) {
				rc = journal_commit(j, &err);
			} else {
				journal_commit(j, NULL);
			}
		} else {
			rc = journal_part_add(j, c->item, &p, &err);
		}
		if (rc < 0)
			break;
		fprintf(out, "ok %lld\n", (long long)n);
		fflush(out);
	}
	fprintf(out, "error %lld %d %s\n", (long long)n, rc, err.msg);
	fflush(out);
	/* Still failing after that, or working again: never a lie. */
	fill_part(&p, n);
	rc = journal_part_add(j, c->item, &p, &err);
	fprintf(out, "retry %lld %d\n", (long long)n, rc);
	fclose(out);
	journal_close(j);
	return 0;
}

static void
test_full_disk(void)
{
	struct full_case c;
	struct journal *j = NULL;
	struct journal_item it;
	struct journal_part *parts = NULL;
	struct cairn_err err = CAIRN_ERR_INIT;
	char line[CAIRN_ERR_MSG_MAX + 100];
	int64_t last_ok = 0, failed = 0, retried = -1;
	int retry_rc = 1, err_rc = 0;
	size_t n = 0, i;
	FILE *f;

	memset(&c, 0, sizeof c);
	snprintf(c.path, sizeof c.path, "%s", tpath("full"));
	snprintf(c.out, sizeof c.out, "%s.out", c.path);
	OPEN(c.path, &j);
	fill_item(&it, "Backup", "ns", "big", 1);
	REQUIRE(journal_claim(j, &it, &c.item, &err) == 0);
	journal_close(j);

	CHECK_INT(in_child(full_child, &c), 0);
	f = fopen(c.out, "r");
	REQUIRE(f != NULL);
	while (fgets(line, sizeof line, f) != NULL) {
		long long a;
		int b;

		if (sscanf(line, "ok %lld", &a) == 1) {
			CHECK_INT(a, last_ok + 1);
			last_ok = a;
		} else if (sscanf(line, "error %lld %d", &a, &b) == 2) {
			failed = a;
			err_rc = b;
			CHECK(strstr(line, c.path) != NULL);
			CHECK(strstr(line, "full") != NULL ||
			    strstr(line, "too large") != NULL ||
			    strstr(line, "I/O") != NULL);
		} else if (sscanf(line, "retry %lld %d", &a, &b) == 2) {
			retried = a;
			retry_rc = b;
		}
	}
	fclose(f);
	CHECK(last_ok >= 1);
	CHECK_INT(failed, last_ok + 1);
	CHECK_INT(err_rc, CAIRN_EIO);

	/* Without the limit: the journal is whole and holds exactly what
	 * the child was told was committed (plus the retry if it said so). */
	OPEN(c.path, &j);
	CHECK_INT(journal_check(j, &err), 0);
	CHECK_INT(journal_parts(j, c.item, &parts, &n, &err), 0);
	for (i = 0; i < n; i++)
		CHECK_INT(parts[i].part_number, (int64_t)i + 1);
	/*
	 * Everything reported is there. The failed part may be there too:
	 * when the retry worked, or when only the automatic checkpoint after
	 * a commit failed (the safe direction: ahead of what was reported).
	 */
	CHECK((int64_t)n == last_ok || (int64_t)n == last_ok + 1);
	if (retried == failed && retry_rc == 0)
		CHECK_INT(n, last_ok + 1);
	free(parts);
	journal_close(j);
}

int
main(void)
{
	RUN(test_schema_steps);
	RUN(test_open_create);
	RUN(test_claim_and_list);
	RUN(test_parts);
	RUN(test_restore_progress);
	RUN(test_volumes);
	RUN(test_events);
	RUN(test_counts_schedule);
	RUN(test_finish_counters_prune);
	RUN(test_batches);
	RUN(test_threads);
	RUN(test_batch_isolation);
	RUN(test_newer_version_refused);
	RUN(test_not_a_journal);
	RUN(test_migrate_v1);
	RUN(test_read_only);
	RUN(test_full_disk);
	return unit_done();
}
