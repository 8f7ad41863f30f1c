/*
 * journal.c: the SQLite journal (see journal.h for the API).
 *
 * Why a journal. cairn tells the cluster about its work (a claim, a
 * checkpoint, a finished item) only after the same fact is durable here.
 * So after any crash the journal is never behind what the cluster
 * believes, and a restarted server with the same id resumes its items from
 * the journal without asking anyone.
 *
 * Durability. The database runs in WAL mode with synchronous=FULL: a
 * commit returns only after its WAL frames are fsync'ed, so a commit that
 * returned survives both a killed process and a power loss. A kill -9 in
 * the middle of a commit leaves a WAL whose last frames carry no valid
 * commit record; SQLite ignores them at the next open, so a write either
 * happened entirely or not at all. docs/journal.md discusses the cost and
 * the checkpointing.
 *
 * Schema. schema/journal.sql is the source of truth, embedded at build
 * time as journal_schema_sql (journal/schema_sql.h, generated). It is a list
 * of steps introduced by "-- @version N"; PRAGMA user_version says which
 * steps a file has. journal_open() applies the missing steps in one
 * transaction and refuses a file from a newer cairn.
 *
 * Threads. One handle serves every thread through two connections:
 *  - the writer (j->w), guarded by a recursive mutex. A batch
 *    (journal_begin .. journal_commit) holds that mutex from begin to
 *    commit, so a batch is one thread's transaction and other threads'
 *    writes wait for it rather than slipping into it. Every single write
 *    function is itself a small batch, so nesting is the normal case.
 *  - the reader (j->r), read-only, with its own mutex. Reads from threads
 *    that have no batch open go there and never wait for the writer (WAL
 *    readers see the last commit). A thread with a batch open reads through
 *    the writer so that it sees its own uncommitted rows.
 * Which batch the calling thread holds is kept in a thread-local pointer.
 * Each connection caches its prepared statements (stmt_sql[] below), used
 * only under that connection's mutex.
 *
 * Errors. The first failed write in a batch poisons it: later commits of
 * that batch roll it back and return the first error, so a caller can never
 * be told "committed" for a transaction that lost a row.
 */
#include "config.h"
#include "journal/journal.h"
#include "journal/schema_sql.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define JOURNAL_BUSY_MS		10000		/* wait for another writer */
#define JOURNAL_WAL_LIMIT	(64 << 20)	/* WAL size kept after a checkpoint */
#define JOURNAL_FREE_MIN	(1u << 20)	/* to count as writable again */
#define SCHEMA_MARK		"-- @version "

enum stmt_id {
	ST_CLAIM,
	ST_COUNTER_ADD,
	ST_SET_PHASE,
	ST_SET_PROGRESS,
	ST_SET_COUNTS,
	ST_SET_SCHEDULE,
	ST_FINISH,
	ST_ITEM_GET,
	ST_ITEM_FIND,
	ST_ITEMS,
	ST_PART_ADD,
	ST_PARTS,
	ST_PARTS_CLEAR,
	ST_RESTORE_MARK,
	ST_RESTORE_GET,
	ST_RESTORE_COUNTS,
	ST_VOLUME_SET,
	ST_VOLUMES,
	ST_EVENT_ADD,
	ST_EVENTS,
	ST_COUNTERS,
	ST_PRUNE,
	ST_HOOKS_SET,
	ST_HOOKS_GET,
	ST__COUNT
};

#define ITEM_COLS "id, kind, namespace, name, uid, attempt, phase, holder, " \
	"worker, claimed_at, updated_at, finished_at, total_items, items_done, " \
	"bytes_done, message, warnings, errors, schedule"

static const char *const stmt_sql[ST__COUNT] = {
	[ST_CLAIM] = "INSERT INTO items (kind, namespace, name, uid, attempt, "
	    "phase, holder, worker, claimed_at, updated_at, schedule) "
	    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) "
	    "ON CONFLICT (kind, namespace, name, uid) DO UPDATE SET "
	    "attempt = excluded.attempt, phase = excluded.phase, "
	    "schedule = CASE WHEN excluded.schedule = '' THEN schedule "
	    "ELSE excluded.schedule END, "
	    "holder = excluded.holder, worker = excluded.worker, "
	    "claimed_at = excluded.claimed_at, "
	    "updated_at = excluded.updated_at, finished_at = NULL, "
	    "message = '' RETURNING id",
	[ST_COUNTER_ADD] = "INSERT INTO counters (kind, outcome, n) "
	    "VALUES (?1, ?2, ?3) ON CONFLICT (kind, outcome) DO UPDATE SET "
	    "n = n + excluded.n",
	[ST_SET_PHASE] = "UPDATE items SET phase = ?2, updated_at = ?3 "
	    "WHERE id = ?1",
	[ST_SET_PROGRESS] = "UPDATE items SET total_items = ?2, "
	    "items_done = ?3, bytes_done = ?4, updated_at = ?5 WHERE id = ?1",
	[ST_SET_COUNTS] = "UPDATE items SET warnings = ?2, errors = ?3, "
	    "updated_at = ?4 WHERE id = ?1",
	[ST_SET_SCHEDULE] = "UPDATE items SET schedule = ?2 WHERE id = ?1",
	[ST_FINISH] = "UPDATE items SET phase = ?2, message = ?3, "
	    "finished_at = ?4, updated_at = ?4 WHERE id = ?1 RETURNING kind",
	[ST_ITEM_GET] = "SELECT " ITEM_COLS " FROM items WHERE id = ?1",
	[ST_ITEM_FIND] = "SELECT " ITEM_COLS " FROM items WHERE kind = ?1 "
	    "AND namespace = ?2 AND name = ?3 AND (?4 IS NULL OR uid = ?4) "
	    "ORDER BY claimed_at DESC, id DESC LIMIT 1",
	[ST_ITEMS] = "SELECT " ITEM_COLS " FROM items WHERE "
	    "(?1 IS NULL OR kind = ?1) AND (?2 IS NULL OR phase = ?2) AND "
	    "(?3 IS NULL OR holder = ?3) AND (?4 = 0 OR finished_at IS NULL) "
	    "ORDER BY claimed_at, id LIMIT ?5",
	[ST_PART_ADD] = "INSERT INTO parts (item_id, part_number, upload_id, "
	    "etag, last_key, items, bytes, created_at, list_continue, sha256) "
	    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
	[ST_PARTS] = "SELECT part_number, upload_id, etag, last_key, items, "
	    "bytes, created_at, list_continue, sha256 FROM parts "
	    "WHERE item_id = ?1 ORDER BY part_number",
	[ST_PARTS_CLEAR] = "DELETE FROM parts WHERE item_id = ?1",
	[ST_RESTORE_MARK] = "INSERT INTO restore_items (item_id, key, state, "
	    "at) VALUES (?1, ?2, ?3, ?4) ON CONFLICT (item_id, key) DO UPDATE "
	    "SET state = excluded.state, at = excluded.at",
	[ST_RESTORE_GET] = "SELECT state FROM restore_items "
	    "WHERE item_id = ?1 AND key = ?2",
	[ST_RESTORE_COUNTS] = "SELECT state, count(*) FROM restore_items "
	    "WHERE item_id = ?1 GROUP BY state",
	[ST_VOLUME_SET] = "INSERT INTO volume_ops (item_id, volume, phase, "
	    "bytes_done, bytes_total, files_done, files_total, last_file, "
	    "updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
	    "ON CONFLICT (item_id, volume) DO UPDATE SET "
	    "phase = excluded.phase, bytes_done = excluded.bytes_done, "
	    "bytes_total = excluded.bytes_total, "
	    "files_done = excluded.files_done, "
	    "files_total = excluded.files_total, "
	    "last_file = excluded.last_file, updated_at = excluded.updated_at",
	[ST_VOLUMES] = "SELECT volume, phase, bytes_done, bytes_total, "
	    "files_done, files_total, last_file, updated_at FROM volume_ops "
	    "WHERE item_id = ?1 ORDER BY volume",
	[ST_EVENT_ADD] = "INSERT INTO events (item_id, at, level, line, "
	    "fields) VALUES (?1, ?2, ?3, ?4, ?5)",
	[ST_EVENTS] = "SELECT at, level, line, fields FROM events "
	    "WHERE item_id = ?1 "
	    "ORDER BY id",
	[ST_COUNTERS] = "SELECT kind, outcome, n FROM counters "
	    "ORDER BY kind, outcome",
	[ST_PRUNE] = "DELETE FROM items WHERE finished_at IS NOT NULL "
	    "AND finished_at < ?1",
	[ST_HOOKS_SET] = "INSERT INTO hook_state (item_id, state, updated_at) "
	    "VALUES (?1, ?2, ?3) ON CONFLICT (item_id) DO UPDATE SET "
	    "state = excluded.state, updated_at = excluded.updated_at",
	[ST_HOOKS_GET] = "SELECT state FROM hook_state WHERE item_id = ?1",
};

static const char *const rstate_names[JOURNAL_R_COUNT] = {
	"created", "updated", "skipped", "failed"
};

/* One SQLite connection with its statement cache, used under its mutex. */
struct jconn {
	sqlite3		*db;
	sqlite3_stmt	*st[ST__COUNT];		/* prepared on first use */
	pthread_mutex_t	 lock;			/* recursive */
};

struct journal {
	char		*path;		/* as given to journal_open() */
	struct jconn	 w;		/* the writer */
	struct jconn	 r;		/* read-only, for threads without a batch */
	/* Under w.lock, meaningful while a batch is open: */
	int		 depth;		/* batch nesting, 0: none */
	int		 poisoned;	/* a write in this batch failed */
	struct cairn_err first;		/* that first failure */
	/*
	 * The last write failed for want of disk (full, I/O error, read
	 * only) and none has succeeded since: set by jfail() on the writer,
	 * cleared by a commit (journal_writable()).
	 */
	atomic_int	 unwritable;
	atomic_llong	 probe_mono;	/* last journal_writable() try */
	char		 unwritable_why[CAIRN_ERR_MSG_MAX];	/* under w.lock */
};

static int free_enough(const struct journal *j);

/* The journal whose batch this thread holds (NULL: none). */
static _Thread_local struct journal *tl_batch;

/* ---- Errors ------------------------------------------------------------- */

static int
map_rc(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return CAIRN_EBUSY;
	case SQLITE_CONSTRAINT:
		if (rc == SQLITE_CONSTRAINT_PRIMARYKEY ||
		    rc == SQLITE_CONSTRAINT_UNIQUE)
			return CAIRN_EEXIST;
		return CAIRN_EINVAL;
	case SQLITE_NOTADB:
		return CAIRN_EINVAL;
	case SQLITE_FULL:
	case SQLITE_IOERR:
	case SQLITE_READONLY:
	case SQLITE_CANTOPEN:
	case SQLITE_CORRUPT:
	case SQLITE_PERM:
		return CAIRN_EIO;
	}
	return CAIRN_EFAIL;
}

/*
 * Store the error of connection db (rc from the failed call) in err:
 * "journal PATH: WHAT: sqlite message (sqlite code N, errno text)".
 */
static int
jfail(struct journal *j, sqlite3 *db, int rc, struct cairn_err *err,
    const char *what)
{
	struct cairn_err local = CAIRN_ERR_INIT;
	const char *msg;
	int sys, ret;

	if (err == NULL)
		err = &local;
	msg = db != NULL ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
	sys = db != NULL ? sqlite3_system_errno(db) : 0;
	if (sys != 0)
		ret = cairn_err_set(err, map_rc(rc),
		    "journal %s: %s: %s (sqlite code %d, %s)", j->path, what,
		    msg, rc, strerror(sys));
	else if ((rc & 0xff) == SQLITE_FULL || rc == SQLITE_IOERR_WRITE ||
	    rc == SQLITE_IOERR_FSYNC)
		ret = cairn_err_set(err, map_rc(rc), "journal %s: %s: %s "
		    "(sqlite code %d; is the disk full?)", j->path, what, msg,
		    rc);
	else
		ret = cairn_err_set(err, map_rc(rc),
		    "journal %s: %s: %s (sqlite code %d)", j->path, what, msg,
		    rc);
	/* The writer cannot write: remember it until a commit succeeds. */
	if (db != NULL && db == j->w.db && ((rc & 0xff) == SQLITE_FULL ||
	    (rc & 0xff) == SQLITE_IOERR || (rc & 0xff) == SQLITE_READONLY ||
	    (rc & 0xff) == SQLITE_CANTOPEN || (rc & 0xff) == SQLITE_PERM)) {
		pthread_mutex_lock(&j->w.lock);
		snprintf(j->unwritable_why, sizeof j->unwritable_why, "%s",
		    err->msg);
		atomic_store(&j->unwritable, 1);
		/* the first probe a second from now, not at once */
		atomic_store(&j->probe_mono, time_mono_us());
		pthread_mutex_unlock(&j->w.lock);
	}
	return ret;
}

/* A required text argument s fits in cap bytes, else EINVAL. */
static int
check_text(const struct journal *j, const char *s, size_t cap,
    const char *what, struct cairn_err *err)
{
	if (s == NULL)
		return cairn_err_set(err, CAIRN_EINVAL, "journal %s: %s missing",
		    j->path, what);
	if (strlen(s) >= cap)
		return cairn_err_set(err, CAIRN_EINVAL,
		    "journal %s: %s longer than %zu bytes", j->path, what,
		    cap - 1);
	return 0;
}

static int
check_kind(const struct journal *j, const char *kind, struct cairn_err *err)
{
	if (kind == NULL || (strcmp(kind, JOURNAL_KIND_BACKUP) != 0 &&
	    strcmp(kind, JOURNAL_KIND_RESTORE) != 0))
		return cairn_err_set(err, CAIRN_EINVAL,
		    "journal %s: kind must be Backup or Restore", j->path);
	return 0;
}

/* ---- Statements ----------------------------------------------------------- */

/* The cached statement id of connection c (prepared now if needed). */
static int
stmt(struct journal *j, struct jconn *c, enum stmt_id id, sqlite3_stmt **out,
    struct cairn_err *err)
{
	int rc;

	if (c->st[id] == NULL) {
		rc = sqlite3_prepare_v3(c->db, stmt_sql[id], -1,
		    SQLITE_PREPARE_PERSISTENT, &c->st[id], NULL);
		if (rc != SQLITE_OK) {
			c->st[id] = NULL;
			return jfail(j, c->db, rc, err, "preparing a statement");
		}
	}
	*out = c->st[id];
	return 0;
}

static void
bind_text(sqlite3_stmt *st, int i, const char *s)
{
	if (s == NULL)
		sqlite3_bind_null(st, i);
	else
		sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
}

/* Run a statement that returns no rows; reset it either way. */
static int
step_done(struct journal *j, struct jconn *c, sqlite3_stmt *st,
    struct cairn_err *err, const char *what)
{
	int rc, ret = 0;

	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		ret = jfail(j, c->db, rc, err, what);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return ret;
}

static void
end_stmt(sqlite3_stmt *st)
{
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

/* Copy column i of the current row into dst of cap bytes ("" for NULL). */
static void
col_text(sqlite3_stmt *st, int i, char *dst, size_t cap)
{
	const unsigned char *s = sqlite3_column_text(st, i);

	snprintf(dst, cap, "%s", s != NULL ? (const char *)s : "");
}

static int
exec_sql(struct journal *j, sqlite3 *db, const char *sql,
    struct cairn_err *err, const char *what)
{
	int rc;

	rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		return jfail(j, db, rc, err, what);
	return 0;
}

/* Run a one-value query (a PRAGMA); *v gets the first column. */
static int
query_int(struct journal *j, sqlite3 *db, const char *sql, int64_t *v,
    struct cairn_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc;

	rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	if (rc == SQLITE_OK) {
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW) {
			*v = sqlite3_column_int64(st, 0);
			rc = SQLITE_OK;
		} else if (rc == SQLITE_DONE) {
			*v = 0;
			rc = SQLITE_OK;
		}
	}
	if (rc != SQLITE_OK)
		rc = jfail(j, db, rc, err, sql);
	sqlite3_finalize(st);
	return rc;
}

/* ---- Reads: which connection -------------------------------------------- */

/*
 * The connection a read uses, locked: the writer if this thread holds a
 * batch on j (to see its own rows), else the reader. Unlock with runlock().
 */
static struct jconn *
rlock(struct journal *j)
{
	struct jconn *c = tl_batch == j ? &j->w : &j->r;

	pthread_mutex_lock(&c->lock);
	return c;
}

static void
runlock(struct jconn *c)
{
	pthread_mutex_unlock(&c->lock);
}

/* ---- Schema ----------------------------------------------------------------- */

/*
 * Find step `version` of the embedded schema: *sql and *len get its text.
 * Returns 0, or -1 if there is no such step.
 */
static int
schema_step(int version, const char **sql, size_t *len)
{
	const char *p = journal_schema_sql, *start = NULL, *line;
	size_t mark = strlen(SCHEMA_MARK);

	for (line = p; *line != '\0'; line = p) {
		p = strchr(line, '\n');
		p = p != NULL ? p + 1 : line + strlen(line);
		if (strncmp(line, SCHEMA_MARK, mark) != 0)
			continue;
		if (start != NULL) {
			*sql = start;
			*len = (size_t)(line - start);
			return 0;
		}
		if (atoi(line + mark) == version)
			start = p;
	}
	if (start == NULL)
		return -1;
	*sql = start;
	*len = strlen(start);
	return 0;
}

int
journal_schema_version(void)
{
	const char *p = journal_schema_sql;
	size_t mark = strlen(SCHEMA_MARK);
	int last = 0;

	while (*p != '\0') {
		if (strncmp(p, SCHEMA_MARK, mark) == 0) {
			if (atoi(p + mark) != last + 1)
				return -1;	/* steps must be 1, 2, 3... */
			last++;
		}
		p = strchr(p, '\n');
		if (p == NULL)
			break;
		p++;
	}
	return last;
}

/*
 * Bring the writer's file from version `from` to `to` in one transaction.
 * Re-reads the version inside the transaction: another process may have
 * migrated meanwhile.
 */
static int
migrate(struct journal *j, int64_t from, int to, struct cairn_err *err)
{
	sqlite3 *db = j->w.db;
	const char *sql;
	char *text, *pragma;
	size_t len;
	int64_t v;
	int rc, s;

	rc = exec_sql(j, db, "BEGIN IMMEDIATE", err, "starting the migration");
	if (rc < 0)
		return rc;
	rc = query_int(j, db, "PRAGMA user_version", &v, err);
	if (rc < 0)
		goto fail;
	for (s = (int)v + 1; s <= to; s++) {
		if (schema_step(s, &sql, &len) < 0) {
			rc = cairn_err_set(err, CAIRN_EFAIL, "journal %s: the "
			    "embedded schema has no step %d", j->path, s);
			goto fail;
		}
		text = xstrndup(sql, len);
		rc = sqlite3_exec(db, text, NULL, NULL, NULL);
		free(text);
		if (rc != SQLITE_OK) {
			char what[64];

			snprintf(what, sizeof what,
			    "migrating the schema to version %d", s);
			rc = jfail(j, db, rc, err, what);
			goto fail;
		}
	}
	pragma = xasprintf("PRAGMA user_version = %d", to);
	rc = exec_sql(j, db, pragma, err, "setting the schema version");
	free(pragma);
	if (rc < 0)
		goto fail;
	rc = exec_sql(j, db, "COMMIT", err, "committing the migration");
	if (rc < 0)
		goto fail;
	if (from == 0)
		log_debug("journal %s: created at schema version %d", j->path,
		    to);
	else
		log_info("journal %s: migrated schema version %lld -> %d",
		    j->path, (long long)from, to);
	return 0;
fail:
	if (!sqlite3_get_autocommit(db))
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}

/* ---- Open and close --------------------------------------------------------- */

static void
conn_init(struct jconn *c)
{
	pthread_mutexattr_t a;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&c->lock, &a);
	pthread_mutexattr_destroy(&a);
}

static void
conn_close(struct jconn *c)
{
	int i;

	for (i = 0; i < ST__COUNT; i++) {
		sqlite3_finalize(c->st[i]);
		c->st[i] = NULL;
	}
	sqlite3_close_v2(c->db);
	c->db = NULL;
	pthread_mutex_destroy(&c->lock);
}

/*
 * SQLite's errno after a failed open is often that of a later probe
 * ("No such file or directory" for a directory that is read-only), so
 * say ourselves why the file or its directory cannot be written.
 */
static void
diagnose_open(const char *path, struct cairn_err *err)
{
	const char *slash = strrchr(path, '/');
	char *dir, msg[CAIRN_ERR_MSG_MAX];

	if (err == NULL)
		return;
	memcpy(msg, err->msg, sizeof msg);
	if (access(path, F_OK) == 0) {
		if (access(path, R_OK | W_OK) < 0)
			cairn_err_errno(err, err->code, errno, "%s: file", msg);
		return;
	}
	dir = slash == NULL ? xstrdup(".") : slash == path ? xstrdup("/") :
	    xstrndup(path, (size_t)(slash - path));
	if (access(dir, W_OK | X_OK) < 0)
		cairn_err_errno(err, err->code, errno, "%s: directory %s", msg,
		    dir);
	free(dir);
}

/* Open the writer, check what the file is, set it up, migrate it. */
static int
open_writer(struct journal *j, int flags, struct cairn_err *err)
{
	sqlite3_stmt *st = NULL;
	const unsigned char *mode;
	int64_t v, tables;
	int rc, cur = journal_schema_version();

	if (cur < 1)
		return cairn_err_set(err, CAIRN_EFAIL, "journal %s: the schema "
		    "built into cairn is malformed", j->path);
	rc = sqlite3_open_v2(j->path, &j->w.db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		rc = jfail(j, NULL, rc, err, "cannot open");
		diagnose_open(j->path, err);
		return rc;
	}
	sqlite3_extended_result_codes(j->w.db, 1);
	if (sqlite3_db_readonly(j->w.db, "main") == 1)
		return cairn_err_set(err, CAIRN_EIO, "journal %s: the file is "
		    "read-only; cairn must be able to write its journal (check "
		    "the permissions of the file and its directory, and the "
		    "mount)", j->path);
	sqlite3_busy_timeout(j->w.db, JOURNAL_BUSY_MS);

	rc = query_int(j, j->w.db, "PRAGMA user_version", &v, err);
	if (rc == CAIRN_EINVAL)
		cairn_err_prefix(err, "not a cairn journal");
	if (rc < 0)
		return rc;
	if (v > cur)
		return cairn_err_set(err, CAIRN_EUNSUPPORTED, "journal %s has "
		    "schema version %lld but this cairn knows versions up to "
		    "%d: it was written by a newer cairn; run that version or "
		    "move the file away", j->path, (long long)v, cur);
	if (v == 0) {
		rc = query_int(j, j->w.db, "SELECT count(*) FROM sqlite_schema",
		    &tables, err);
		if (rc < 0)
			return rc;
		if (tables > 0)
			return cairn_err_set(err, CAIRN_EINVAL, "journal %s: not "
			    "a cairn journal (an SQLite database with tables "
			    "but no schema version)", j->path);
		/* Only possible before the first table exists. */
		rc = exec_sql(j, j->w.db, "PRAGMA auto_vacuum = INCREMENTAL",
		    err, "setting auto_vacuum");
		if (rc < 0)
			return rc;
	}

	rc = sqlite3_prepare_v2(j->w.db, "PRAGMA journal_mode = WAL", -1, &st,
	    NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		rc = jfail(j, j->w.db, rc, err, "switching to WAL mode");
		sqlite3_finalize(st);
		return rc;
	}
	mode = sqlite3_column_text(st, 0);
	if (mode == NULL || strcmp((const char *)mode, "wal") != 0) {
		rc = cairn_err_set(err, CAIRN_EIO, "journal %s: cannot use WAL "
		    "mode here (journal_mode is %s)", j->path,
		    mode != NULL ? (const char *)mode : "unknown");
		sqlite3_finalize(st);
		return rc;
	}
	sqlite3_finalize(st);

	rc = exec_sql(j, j->w.db, (flags & JOURNAL_OPEN_SYNC_NORMAL) ?
	    "PRAGMA synchronous = NORMAL" : "PRAGMA synchronous = FULL", err,
	    "setting synchronous");
	if (rc == 0)
		rc = exec_sql(j, j->w.db, "PRAGMA foreign_keys = ON", err,
		    "enabling foreign keys");
	if (rc == 0) {
		char *sql = xasprintf("PRAGMA journal_size_limit = %d",
		    JOURNAL_WAL_LIMIT);

		rc = exec_sql(j, j->w.db, sql, err, "setting the WAL limit");
		free(sql);
	}
	if (rc == 0 && v < cur)
		rc = migrate(j, v, cur, err);
	return rc;
}

static int
open_reader(struct journal *j, struct cairn_err *err)
{
	int rc;

	rc = sqlite3_open_v2(j->path, &j->r.db, SQLITE_OPEN_READONLY |
	    SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK)
		return jfail(j, j->r.db, rc, err, "cannot open for reading");
	sqlite3_extended_result_codes(j->r.db, 1);
	sqlite3_busy_timeout(j->r.db, JOURNAL_BUSY_MS);
	return exec_sql(j, j->r.db, "PRAGMA query_only = ON", err,
	    "setting query_only");
}

int
journal_open(const char *path, int flags, struct journal **out,
    struct cairn_err *err)
{
	struct journal *j;
	int rc;

	*out = NULL;
	if (path == NULL || *path == '\0')
		return cairn_err_set(err, CAIRN_EINVAL, "journal: empty path");
	j = xcalloc(1, sizeof *j);
	j->path = xstrdup(path);
	conn_init(&j->w);
	conn_init(&j->r);
	rc = open_writer(j, flags, err);
	if (rc == 0)
		rc = open_reader(j, err);
	if (rc < 0) {
		journal_close(j);
		return rc;
	}
	*out = j;
	return 0;
}

void
journal_close(struct journal *j)
{
	if (j == NULL)
		return;
	while (tl_batch == j && j->depth > 0)
		journal_rollback(j);
	/* The reader first: the writer's close then checkpoints the WAL. */
	conn_close(&j->r);
	conn_close(&j->w);
	free(j->path);
	free(j);
}

const char *
journal_path(const struct journal *j)
{
	return j->path;
}

int
journal_check(struct journal *j, struct cairn_err *err)
{
	struct jconn *c = rlock(j);
	sqlite3_stmt *st = NULL;
	char msg[600];
	size_t used = 0;
	int rc, n = 0, ok = 0;

	msg[0] = '\0';
	rc = sqlite3_prepare_v2(c->db, "PRAGMA integrity_check", -1, &st, NULL);
	while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		const unsigned char *line = sqlite3_column_text(st, 0);

		rc = SQLITE_OK;
		if (n++ == 0 && line != NULL &&
		    strcmp((const char *)line, "ok") == 0)
			ok = 1;
		if (n <= 5 && used < sizeof msg) {
			int w = snprintf(msg + used, sizeof msg - used, "%s%s",
			    n > 1 ? "; " : "", line != NULL ?
			    (const char *)line : "");

			if (w > 0)
				used += (size_t)w;
		}
	}
	if (rc != SQLITE_DONE)
		rc = jfail(j, c->db, rc, err, "integrity_check");
	else if (!ok)
		rc = cairn_err_set(err, CAIRN_EIO, "journal %s: integrity_check "
		    "failed: %s", j->path, msg);
	else
		rc = 0;
	sqlite3_finalize(st);
	runlock(c);
	return rc;
}

/* ---- Batches ---------------------------------------------------------------- */

/* Remember the first failure of the open batch (under w.lock). */
static void
poison(struct journal *j, const struct cairn_err *why)
{
	if (j->poisoned)
		return;
	j->poisoned = 1;
	if (why != NULL && why->code != 0)
		cairn_err_copy(&j->first, why);
	else
		cairn_err_set(&j->first, CAIRN_EFAIL, "journal %s: a write in "
		    "this batch failed", j->path);
}

int
journal_begin(struct journal *j, struct cairn_err *err)
{
	int rc;

	pthread_mutex_lock(&j->w.lock);
	if (j->depth == 0) {
		rc = sqlite3_exec(j->w.db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
		if (rc != SQLITE_OK) {
			rc = jfail(j, j->w.db, rc, err,
			    "starting a transaction");
			pthread_mutex_unlock(&j->w.lock);
			return rc;
		}
		j->poisoned = 0;
		cairn_err_clear(&j->first);
		tl_batch = j;
	}
	j->depth++;
	return 0;
}

/* The outermost batch ends: roll back whatever is open (under w.lock). */
static void
batch_rollback(struct journal *j)
{
	if (!sqlite3_get_autocommit(j->w.db))
		sqlite3_exec(j->w.db, "ROLLBACK", NULL, NULL, NULL);
	j->poisoned = 0;
	tl_batch = NULL;
}

int
journal_commit(struct journal *j, struct cairn_err *err)
{
	int rc = 0;

	if (tl_batch != j || j->depth <= 0)
		return cairn_err_set(err, CAIRN_EINVAL, "journal %s: commit "
		    "without journal_begin() in this thread", j->path);
	if (--j->depth > 0) {
		if (j->poisoned)
			rc = cairn_err_copy(err, &j->first);
		pthread_mutex_unlock(&j->w.lock);
		return rc;
	}
	if (j->poisoned) {
		rc = cairn_err_copy(err, &j->first);
		batch_rollback(j);
		cairn_err_prefix(err, "transaction rolled back");
	} else {
		rc = sqlite3_exec(j->w.db, "COMMIT", NULL, NULL, NULL);
		if (rc != SQLITE_OK) {
			rc = jfail(j, j->w.db, rc, err, "commit failed, "
			    "transaction rolled back");
			batch_rollback(j);
		} else {
			tl_batch = NULL;
			if (atomic_load(&j->unwritable) && free_enough(j))
				atomic_store(&j->unwritable, 0);
		}
	}
	pthread_mutex_unlock(&j->w.lock);
	return rc;
}

void
journal_rollback(struct journal *j)
{
	if (tl_batch != j || j->depth <= 0)
		return;
	if (--j->depth > 0)
		poison(j, NULL);
	else
		batch_rollback(j);
	pthread_mutex_unlock(&j->w.lock);
}

/*
 * End the small batch of one write function: commit if rc is 0, else
 * poison the enclosing batch with err and roll back. Returns the result.
 */
static int
wdone(struct journal *j, int rc, struct cairn_err *err)
{
	if (rc < 0) {
		poison(j, err);
		journal_rollback(j);
		return rc;
	}
	return journal_commit(j, err);
}

/*
 * A write through prepared statement id: the transaction begun (or the
 * caller's batch joined) and the statement in *st. 0, or < 0 with
 * nothing left open. The caller binds, steps and ends with wdone().
 */
static int
wbegin(struct journal *j, enum stmt_id id, sqlite3_stmt **st,
    struct cairn_err *err)
{
	int rc;

	rc = journal_begin(j, err);
	if (rc < 0)
		return rc;
	rc = stmt(j, &j->w, id, st, err);
	return rc < 0 ? wdone(j, rc, err) : 0;
}

/* ---- Items ------------------------------------------------------------------ */

static int
counter_add_locked(struct journal *j, const char *kind, const char *outcome,
    int64_t delta, struct cairn_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc;

	rc = stmt(j, &j->w, ST_COUNTER_ADD, &st, err);
	if (rc < 0)
		return rc;
	bind_text(st, 1, kind);
	bind_text(st, 2, outcome);
	sqlite3_bind_int64(st, 3, delta);
	return step_done(j, &j->w, st, err, "counting");
}

int
journal_claim(struct journal *j, const struct journal_item *it, int64_t *id,
    struct cairn_err *err)
{
	struct cairn_err local = CAIRN_ERR_INIT;
	sqlite3_stmt *st = NULL;
	const char *phase = it->phase[0] != '\0' ? it->phase : "InProgress";
	int64_t now = time_now_us();
	int rc;

	if (err == NULL)
		err = &local;
	rc = check_kind(j, it->kind, err);
	if (rc == 0 && (it->namespace[0] == '\0' || it->name[0] == '\0'))
		rc = cairn_err_set(err, CAIRN_EINVAL, "journal %s: claim "
		    "without namespace or name", j->path);
	if (rc == 0 && it->attempt < 1)
		rc = cairn_err_set(err, CAIRN_EINVAL, "journal %s: attempt "
		    "must be >= 1", j->path);
	if (rc < 0)
		return rc;
	rc = wbegin(j, ST_CLAIM, &st, err);
	if (rc < 0)
		return rc;
	bind_text(st, 1, it->kind);
	bind_text(st, 2, it->namespace);
	bind_text(st, 3, it->name);
	bind_text(st, 4, it->uid);
	sqlite3_bind_int64(st, 5, it->attempt);
	bind_text(st, 6, phase);
	bind_text(st, 7, it->holder);
	bind_text(st, 8, it->worker);
	sqlite3_bind_int64(st, 9, it->claimed_at != 0 ? it->claimed_at : now);
	sqlite3_bind_int64(st, 10, now);
	bind_text(st, 11, it->schedule);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		if (id != NULL)
			*id = sqlite3_column_int64(st, 0);
		rc = sqlite3_step(st);
	}
	rc = rc == SQLITE_DONE ? 0 : jfail(j, j->w.db, rc, err, "claiming");
	end_stmt(st);
	if (rc == 0)
		rc = counter_add_locked(j, it->kind, JOURNAL_OUTCOME_CLAIMED, 1,
		    err);
	return wdone(j, rc, err);
}

/* Run an UPDATE of item id; CAIRN_ENOTFOUND if no row changed. */
static int
update_item(struct journal *j, sqlite3_stmt *st, int64_t id,
    struct cairn_err *err, const char *what)
{
	int rc;

	rc = step_done(j, &j->w, st, err, what);
	if (rc == 0 && sqlite3_changes(j->w.db) == 0)
		rc = cairn_err_set(err, CAIRN_ENOTFOUND, "journal %s: no item "
		    "%lld", j->path, (long long)id);
	return rc;
}

int
journal_set_phase(struct journal *j, int64_t id, const char *phase,
    struct cairn_err *err)
{
	struct cairn_err local = CAIRN_ERR_INIT;
	sqlite3_stmt *st = NULL;
	int rc;

	if (err == NULL)
		err = &local;
	rc = check_text(j, phase, JOURNAL_PHASE_MAX, "phase", err);
	if (rc < 0)
		return rc;
	rc = wbegin(j, ST_SET_PHASE, &st, err);
	if (rc < 0)
		return rc;
	sqlite3_bind_int64(st, 1, id);
	bind_text(st, 2, phase);
	sqlite3_bind_int64(st, 3, time_now_us());
	rc = update_item(j, st, id, err, "setting the phase");
	return wdone(j, rc, err);
}

int
journal_set_progress(struct journal *j, int64_t id, int64_t total_items,
    int64_t items_done, int64_t bytes_done, struct cairn_err *err)
{
	struct cairn_err local = CAIRN_ERR_INIT;
	sqlite3_stmt *st = NULL;
	int rc;

	if (err == NULL)
		err = &local;
	rc = wbegin(j, ST_SET_PROGRESS, &st, err);
	if (rc < 0)
		return rc;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, total_items);
	sqlite3_bind_int64(st, 3, items_done);
	sqlite3_bind_int64(st, 4, bytes_done);
	sqlite3_bind_int64(st, 5, time_now_us());
	rc = update_item(j, st, id, err, "setting progress");
	return wdone(j, rc, err);
}

int
journal_set_counts(struct journal *j, int64_t id, int64_t warnings,
    int64_t errors, struct cairn_err *err)
{
	struct cairn_err local = CAIRN_ERR_INIT;
	sqlite3_stmt *st = NULL;
	int rc;

	if (err == NULL)
		err = &local;
	rc = wbegin(j, ST_SET_COUNTS, &st, err);
	if (rc < 0)
		return rc;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, warnings);
	sqlite3_bind_int64(st, 3, errors);
	sqlite3_bind_int64(st, 4, time_now_us());
	rc = update_item(j, st, id, err, "setting counts");
	return wdone(j, rc, err);
}

int
journal_set_schedule(struct journal *j, int64_t id, const char *schedule,
    struct cairn_err *err)
{
	struct cairn_err local = CAIRN_ERR_INIT;
	sqlite3_stmt *st = NULL;
	int rc;

	if (err == NULL)
		err = &local;
	rc = check_text(j, schedule, JOURNAL_NAME_MAX, "schedule", err);
	if (rc < 0)
		return rc;
	rc = wbegin(j, ST_SET_SCHEDULE, &st, err);
	if (rc < 0)
		return rc;
	sqlite3_bind_int64(st, 1, id);
	bind_text(st, 2, schedule);
	rc = update_item(j, st, id, err, "setting the schedule");
	return wdone(j, rc, err);
}

int
journal_finish(struct journal *j, int64_t id, const char *phase,
    const char *message, struct cairn_err *err)
{
	struct cairn_err local = CAIRN_ERR_INIT;
	char kind[JOURNAL_KIND_MAX];
	sqlite3_stmt *st = NULL;
	int rc;

	if (err == NULL)
		err = &local;
	if (message == NULL)
		message = "";
	rc = check_text(j, phase, JOURNAL_PHASE_MAX, "phase", err);
	if (rc == 0)
		rc = check_text(j, message, JOURNAL_TEXT_MAX, "message", err);
	if (rc < 0)
		return rc;
	rc = wbegin(j, ST_FINISH, &st, err);
	if (rc < 0)
		return rc;
	sqlite3_bind_int64(st, 1, id);
	bind_text(st, 2, phase);
	bind_text(st, 3, message);
	sqlite3_bind_int64(st, 4, time_now_us());
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		col_text(st, 0, kind, sizeof kind);
		rc = sqlite3_step(st);
		rc = rc == SQLITE_DONE ? 0 : jfail(j, j->w.db, rc, err,
		    "finishing");
	} else if (rc == SQLITE_DONE) {
		rc = cairn_err_set(err, CAIRN_ENOTFOUND, "journal %s: no item "
		    "%lld", j->path, (long long)id);
	} else {
		rc = jfail(j, j->w.db, rc, err, "finishing");
	}
	end_stmt(st);
	if (rc == 0)
		rc = counter_add_locked(j, kind, phase, 1, err);
	return wdone(j, rc, err);
}

/*
 * Reading rows: a list statement's columns, in SELECT order, map to the
 * fields of its row struct. A text column (cap > 0) is copied into a
 * char[cap] field, an integer one (cap 0) into an int64_t field (NULL
 * reads 0).
 */
struct col {
	size_t	off;
	size_t	cap;
};

#define COL_I(T, f)	{ offsetof(T, f), 0 }
#define COL_T(T, f)	{ offsetof(T, f), sizeof ((T *)0)->f }

/* A row shape: its struct's size and columns, and the statement reading it. */
struct rowshape {
	enum stmt_id	sid;
	size_t		sz;
	const struct col *cols;
	size_t		ncols;
	const char	*what;		/* "listing items", for errors */
};

#define SHAPE(id, type, cols, what) \
	{ id, sizeof(type), cols, sizeof cols / sizeof cols[0], what }

#define IT struct journal_item
static const struct col item_cols[] = {
	COL_I(IT, id),
	COL_T(IT, kind), COL_T(IT, namespace), COL_T(IT, name), COL_T(IT, uid),
	COL_I(IT, attempt),
	COL_T(IT, phase), COL_T(IT, holder), COL_T(IT, worker),
	COL_I(IT, claimed_at), COL_I(IT, updated_at), COL_I(IT, finished_at),
	COL_I(IT, total_items), COL_I(IT, items_done), COL_I(IT, bytes_done),
	COL_T(IT, message),
	COL_I(IT, warnings), COL_I(IT, errors), COL_T(IT, schedule),
};
static const struct rowshape items_shape = SHAPE(ST_ITEMS, IT, item_cols,
    "listing items");
#undef IT

#define CT struct journal_counter
static const struct col counter_cols[] = {
	COL_T(CT, kind), COL_T(CT, outcome), COL_I(CT, n),
};
static const struct rowshape counters_shape = SHAPE(ST_COUNTERS, CT,
    counter_cols, "reading counters");
#undef CT

#define PT struct journal_part
static const struct col part_cols[] = {
	COL_I(PT, part_number),
	COL_T(PT, upload_id), COL_T(PT, etag), COL_T(PT, last_key),
	COL_I(PT, items), COL_I(PT, bytes),
	COL_I(PT, created_at), COL_T(PT, list_continue), COL_T(PT, sha256),
};
static const struct rowshape parts_shape = SHAPE(ST_PARTS, PT, part_cols,
    "listing parts");
#undef PT

#define VT struct journal_volume
static const struct col volume_cols[] = {
	COL_T(VT, volume), COL_T(VT, phase),
	COL_I(VT, bytes_done), COL_I(VT, bytes_total), COL_I(VT, files_done),
	COL_I(VT, files_total),
	COL_T(VT, last_file), COL_I(VT, updated_at),
};
static const struct rowshape volumes_shape = SHAPE(ST_VOLUMES, VT,
    volume_cols, "listing volumes");
#undef VT
#undef SHAPE

/* Copy the current row of st into row, a zeroed struct of shape sh. */
static void
read_row(sqlite3_stmt *st, const struct rowshape *sh, void *row)
{
	memset(row, 0, sh->sz);
	for (size_t i = 0; i < sh->ncols; i++) {
		char *dst = (char *)row + sh->cols[i].off;

		if (sh->cols[i].cap > 0)
			col_text(st, (int)i, dst, sh->cols[i].cap);
		else
			*(int64_t *)(void *)dst = sqlite3_column_int64(st,
			    (int)i);
	}
}

/* Step a statement expected to give at most one item row. */
static int
one_item(struct journal *j, struct jconn *c, sqlite3_stmt *st,
    struct journal_item *out, struct cairn_err *err, const char *what)
{
	int rc;

	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		read_row(st, &items_shape, out);
		rc = 0;
	} else if (rc == SQLITE_DONE) {
		rc = cairn_err_set(err, CAIRN_ENOTFOUND, "journal %s: %s: no "
		    "such item", j->path, what);
	} else {
		rc = jfail(j, c->db, rc, err, what);
	}
	end_stmt(st);
	return rc;
}

int
journal_item_get(struct journal *j, int64_t id, struct journal_item *out,
    struct cairn_err *err)
{
	struct jconn *c = rlock(j);
	sqlite3_stmt *st = NULL;
	int rc;

	rc = stmt(j, c, ST_ITEM_GET, &st, err);
	if (rc == 0) {
		sqlite3_bind_int64(st, 1, id);
		rc = one_item(j, c, st, out, err, "reading an item");
	}
	runlock(c);
	return rc;
}

int
journal_item_find(struct journal *j, const char *kind, const char *namespace,
    const char *name, const char *uid, struct journal_item *out,
    struct cairn_err *err)
{
	struct jconn *c;
	sqlite3_stmt *st = NULL;
	int rc;

	if (namespace == NULL || name == NULL)
		return cairn_err_set(err, CAIRN_EINVAL, "journal %s: find "
		    "without namespace or name", j->path);
	c = rlock(j);
	rc = stmt(j, c, ST_ITEM_FIND, &st, err);
	if (rc == 0) {
		bind_text(st, 1, kind);
		bind_text(st, 2, namespace);
		bind_text(st, 3, name);
		bind_text(st, 4, uid);
		rc = one_item(j, c, st, out, err, "finding an item");
	}
	runlock(c);
	return rc;
}

/* Grow a list array by one element of size sz (doubling). */
static void *
list_grow(void *arr, size_t n, size_t *alloc, size_t sz)
{
	if (n < *alloc)
		return arr;
	*alloc = *alloc ? *alloc * 2 : 16;
	return xreallocarray(arr, *alloc, sz);
}

/* Binds a read statement's parameters from arg. */
typedef void (*bind_fn)(sqlite3_stmt *st, const void *arg);
/* Takes one result row; nonzero ends the walk early (not an error). */
typedef int (*each_fn)(sqlite3_stmt *st, void *arg);

/* Parameter 1: the item id at arg. */
static void
bind_id(sqlite3_stmt *st, const void *arg)
{
	sqlite3_bind_int64(st, 1, *(const int64_t *)arg);
}

/*
 * Run read statement sid on a reader connection: bind(st, barg) when bind
 * is given, then fn(st, arg) for each row until fn returns nonzero or the
 * rows end. 0, or the journal error of `what`.
 */
static int
each_row(struct journal *j, enum stmt_id sid, bind_fn bind,
    const void *barg, each_fn fn, void *arg, struct cairn_err *err,
    const char *what)
{
	struct jconn *c = rlock(j);
	sqlite3_stmt *st = NULL;
	int rc;

	rc = stmt(j, c, sid, &st, err);
	if (rc == 0) {
		if (bind != NULL)
			bind(st, barg);
		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			if (fn(st, arg) != 0) {
				rc = SQLITE_DONE;
				break;
			}
		}
		rc = rc == SQLITE_DONE ? 0 : jfail(j, c->db, rc, err, what);
		end_stmt(st);
	}
	runlock(c);
	return rc;
}

/* A list being read. */
struct rowlist {
	const struct rowshape *sh;
	char	*arr;
	size_t	n, alloc;		/* rows, room */
};

static int
list_row(sqlite3_stmt *st, void *arg)
{
	struct rowlist *l = arg;

	l->arr = list_grow(l->arr, l->n, &l->alloc, l->sh->sz);
	read_row(st, l->sh, l->arr + l->n++ * l->sh->sz);
	return 0;
}

/*
 * Every row of shape sh as a new array: stored at out, the address of the
 * caller's element pointer (free() it), with the count at *n; NULL and 0
 * after an error.
 */
static int
read_list(struct journal *j, const struct rowshape *sh, bind_fn bind,
    const void *barg, void *out, size_t *n, struct cairn_err *err)
{
	struct rowlist l = { sh, NULL, 0, 0 };
	int rc;

	rc = each_row(j, sh->sid, bind, barg, list_row, &l, err, sh->what);
	if (rc < 0) {
		free(l.arr);
		l.arr = NULL;
		l.n = 0;
	}
	memcpy(out, &l.arr, sizeof l.arr);	/* a T *, whatever T */
	*n = l.n;
	return rc;
}

/* The parameters of ST_ITEMS from a filter (NULL: everything). */
static void
bind_filter(sqlite3_stmt *st, const void *arg)
{
	const struct journal_filter *f = arg;

	if (f != NULL) {
		bind_text(st, 1, f->kind);
		bind_text(st, 2, f->phase);
		bind_text(st, 3, f->holder);
	}
	sqlite3_bind_int(st, 4, f != NULL && f->running_only);
	sqlite3_bind_int64(st, 5, f != NULL && f->limit > 0 ?
	    (int64_t)f->limit : -1);
}

int
journal_items(struct journal *j, const struct journal_filter *f,
    struct journal_item **out, size_t *n, struct cairn_err *err)
{
	return read_list(j, &items_shape, bind_filter, f, out, n, err);
}

/* ---- Backup checkpoints ----------------------------------------------------- */

int
journal_part_add(struct journal *j, int64_t id, const struct journal_part *p,
    struct cairn_err *err)
{
	struct cairn_err local = CAIRN_ERR_INIT;
	sqlite3_stmt *st = NULL;
	char what[64];
	int rc;

	if (err == NULL)
		err = &local;
	if (p->part_number < 1)
		return cairn_err_set(err, CAIRN_EINVAL, "journal %s: part "
		    "number must be >= 1", j->path);
	rc = wbegin(j, ST_PART_ADD, &st, err);
	if (rc < 0)
		return rc;
	snprintf(what, sizeof what, "recording part %lld",
	    (long long)p->part_number);
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, p->part_number);
	bind_text(st, 3, p->upload_id);
	bind_text(st, 4, p->etag);
	bind_text(st, 5, p->last_key);
	sqlite3_bind_int64(st, 6, p->items);
	sqlite3_bind_int64(st, 7, p->bytes);
	sqlite3_bind_int64(st, 8, time_now_us());
	bind_text(st, 9, p->list_continue);
	bind_text(st, 10, p->sha256);
	rc = step_done(j, &j->w, st, err, what);
	return wdone(j, rc, err);
}

int
journal_parts(struct journal *j, int64_t id, struct journal_part **out,
    size_t *n, struct cairn_err *err)
{
	return read_list(j, &parts_shape, bind_id, &id, out, n, err);
}

/* 1 unless the journal's filesystem has less than JOURNAL_FREE_MIN free. */
static int
free_enough(const struct journal *j)
{
	struct statvfs sv;
	char *dir = xstrdup(j->path), *slash = strrchr(dir, '/');
	int rc;

	if (slash == dir)
		dir[1] = '\0';
	else if (slash != NULL)
		*slash = '\0';
	else
		strcpy(dir, ".");
	rc = statvfs(dir, &sv);
	free(dir);
	if (rc < 0)
		return 1;	/* cannot tell: the probe write decides */
	return (uint64_t)sv.f_bavail * sv.f_frsize >= JOURNAL_FREE_MIN;
}

int
journal_writable(struct journal *j, struct cairn_err *err)
{
	int64_t now = time_mono_us();
	struct cairn_err pe = CAIRN_ERR_INIT;

	if (!atomic_load(&j->unwritable))
		return 1;
	/*
	 * At most one probe a second, whoever asks. A small write can
	 * succeed on a full disk (SQLite reuses the WAL file's space), so
	 * "writable again" also needs JOURNAL_FREE_MIN free on the
	 * journal's filesystem: otherwise claims and failures would
	 * alternate every second.
	 */
	if (now - atomic_load(&j->probe_mono) >= TIME_US_PER_SEC) {
		atomic_store(&j->probe_mono, now);
		if (free_enough(j) &&
		    journal_counter_add(j, "Probe", "Write", 0, &pe) == 0)
			return 1;
	}
	if (err != NULL) {
		pthread_mutex_lock(&j->w.lock);
		cairn_err_set(err, CAIRN_EIO, "%s", j->unwritable_why);
		pthread_mutex_unlock(&j->w.lock);
	}
	return 0;
}

int
journal_parts_clear(struct journal *j, int64_t id, struct cairn_err *err)
{
	struct cairn_err local = CAIRN_ERR_INIT;
	sqlite3_stmt *st = NULL;
	int rc;

	if (err == NULL)
		err = &local;
	rc = wbegin(j, ST_PARTS_CLEAR, &st, err);
	if (rc < 0)
		return rc;
	sqlite3_bind_int64(st, 1, id);
	rc = step_done(j, &j->w, st, err, "clearing the parts");
	return wdone(j, rc, err);
}

/* ---- Restore progress ------------------------------------------------------- */

const char *
journal_rstate_name(enum journal_rstate s)
{
	if ((int)s < 0 || s >= JOURNAL_R_COUNT)
		return NULL;
	return rstate_names[s];
}

static int
rstate_parse(const char *s, enum journal_rstate *out)
{
	int i;

	for (i = 0; i < JOURNAL_R_COUNT; i++) {
		if (s != NULL && strcmp(s, rstate_names[i]) == 0) {
			*out = (enum journal_rstate)i;
			return 0;
		}
	}
	return -1;
}

int
journal_restore_mark(struct journal *j, int64_t id, const char *key,
    enum journal_rstate state, struct cairn_err *err)
{
	struct cairn_err local = CAIRN_ERR_INIT;
	sqlite3_stmt *st = NULL;
	int rc;

	if (err == NULL)
		err = &local;
	rc = check_text(j, key, JOURNAL_KEY_MAX, "item key", err);
	if (rc == 0 && journal_rstate_name(state) == NULL)
		rc = cairn_err_set(err, CAIRN_EINVAL, "journal %s: bad restore "
		    "state %d", j->path, (int)state);
	if (rc < 0)
		return rc;
	rc = wbegin(j, ST_RESTORE_MARK, &st, err);
	if (rc < 0)
		return rc;
	sqlite3_bind_int64(st, 1, id);
	bind_text(st, 2, key);
	bind_text(st, 3, rstate_names[state]);
	sqlite3_bind_int64(st, 4, time_now_us());
	rc = step_done(j, &j->w, st, err, "recording restore progress");
	return wdone(j, rc, err);
}

int
journal_restore_lookup(struct journal *j, int64_t id, const char *key,
    enum journal_rstate *state, struct cairn_err *err)
{
	struct jconn *c;
	sqlite3_stmt *st = NULL;
	int rc;

	rc = check_text(j, key, JOURNAL_KEY_MAX, "item key", err);
	if (rc < 0)
		return rc;
	c = rlock(j);
	rc = stmt(j, c, ST_RESTORE_GET, &st, err);
	if (rc == 0) {
		sqlite3_bind_int64(st, 1, id);
		bind_text(st, 2, key);
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW) {
			rc = 0;
			if (rstate_parse((const char *)sqlite3_column_text(st,
			    0), state) < 0)
				rc = cairn_err_set(err, CAIRN_EIO, "journal %s: "
				    "unknown restore state", j->path);
		} else if (rc == SQLITE_DONE) {
			rc = CAIRN_ENOTFOUND;
			cairn_err_set(err, rc, "journal %s: key not done",
			    j->path);
		} else {
			rc = jfail(j, c->db, rc, err,
			    "reading restore progress");
		}
		end_stmt(st);
	}
	runlock(c);
	return rc;
}

static int
count_row(sqlite3_stmt *st, void *arg)
{
	int64_t *counts = arg;
	enum journal_rstate s;

	if (rstate_parse((const char *)sqlite3_column_text(st, 0), &s) == 0)
		counts[s] = sqlite3_column_int64(st, 1);
	return 0;
}

int
journal_restore_counts(struct journal *j, int64_t id,
    int64_t counts[JOURNAL_R_COUNT], struct cairn_err *err)
{
	memset(counts, 0, sizeof(int64_t) * JOURNAL_R_COUNT);
	return each_row(j, ST_RESTORE_COUNTS, bind_id, &id, count_row, counts,
	    err, "counting restore progress");
}

/* ---- Volume operations ------------------------------------------------------ */

int
journal_volume_set(struct journal *j, int64_t id,
    const struct journal_volume *v, struct cairn_err *err)
{
	struct cairn_err local = CAIRN_ERR_INIT;
	sqlite3_stmt *st = NULL;
	int rc;

	if (err == NULL)
		err = &local;
	if (v->volume[0] == '\0')
		return cairn_err_set(err, CAIRN_EINVAL, "journal %s: volume "
		    "without a name", j->path);
	rc = wbegin(j, ST_VOLUME_SET, &st, err);
	if (rc < 0)
		return rc;
	sqlite3_bind_int64(st, 1, id);
	bind_text(st, 2, v->volume);
	bind_text(st, 3, v->phase);
	sqlite3_bind_int64(st, 4, v->bytes_done);
	sqlite3_bind_int64(st, 5, v->bytes_total);
	sqlite3_bind_int64(st, 6, v->files_done);
	sqlite3_bind_int64(st, 7, v->files_total);
	bind_text(st, 8, v->last_file);
	sqlite3_bind_int64(st, 9, time_now_us());
	rc = step_done(j, &j->w, st, err, "recording volume progress");
	return wdone(j, rc, err);
}

int
journal_volumes(struct journal *j, int64_t id, struct journal_volume **out,
    size_t *n, struct cairn_err *err)
{
	return read_list(j, &volumes_shape, bind_id, &id, out, n, err);
}

/* ---- Hook state ------------------------------------------------------------- */

int
journal_hooks_set(struct journal *j, int64_t id, const char *state,
    struct cairn_err *err)
{
	struct cairn_err local = CAIRN_ERR_INIT;
	sqlite3_stmt *st = NULL;
	int rc;

	if (err == NULL)
		err = &local;
	rc = check_text(j, state, JOURNAL_HOOKS_MAX, "hook state", err);
	if (rc < 0)
		return rc;
	rc = wbegin(j, ST_HOOKS_SET, &st, err);
	if (rc < 0)
		return rc;
	sqlite3_bind_int64(st, 1, id);
	bind_text(st, 2, state);
	sqlite3_bind_int64(st, 3, time_now_us());
	rc = step_done(j, &j->w, st, err, "recording hook state");
	return wdone(j, rc, err);
}

int
journal_hooks_get(struct journal *j, int64_t id, char **out,
    struct cairn_err *err)
{
	struct jconn *c;
	sqlite3_stmt *st = NULL;
	int rc;

	*out = NULL;
	c = rlock(j);
	rc = stmt(j, c, ST_HOOKS_GET, &st, err);
	if (rc == 0) {
		sqlite3_bind_int64(st, 1, id);
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW) {
			rc = 0;
			*out = xstrdup((const char *)sqlite3_column_text(st, 0));
		} else if (rc == SQLITE_DONE) {
			rc = cairn_err_set(err, CAIRN_ENOTFOUND, "journal %s: no "
			    "hook state", j->path);
		} else {
			rc = jfail(j, c->db, rc, err, "reading hook state");
		}
		end_stmt(st);
	}
	runlock(c);
	return rc;
}

/* ---- Event log -------------------------------------------------------------- */

static int
event_add(struct journal *j, int64_t id, const char *level,
    const char *fields, const char *line, struct cairn_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc;

	rc = check_text(j, level, JOURNAL_PHASE_MAX, "event level", err);
	if (rc < 0)
		return rc;
	rc = wbegin(j, ST_EVENT_ADD, &st, err);
	if (rc < 0)
		return rc;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, time_now_us());
	bind_text(st, 3, level);
	bind_text(st, 4, line);
	bind_text(st, 5, fields != NULL ? fields : "");
	rc = step_done(j, &j->w, st, err, "recording an event");
	return wdone(j, rc, err);
}

int
journal_event(struct journal *j, int64_t id, const char *level,
    struct cairn_err *err, const char *fmt, ...)
{
	struct cairn_err local = CAIRN_ERR_INIT;
	char line[JOURNAL_EVENT_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);	/* cut at the cap */
	va_end(ap);
	return event_add(j, id, level, NULL, line, err ? err : &local);
}

int
journal_event_kv(struct journal *j, int64_t id, const char *level,
    const char *fields, struct cairn_err *err, const char *fmt, ...)
{
	struct cairn_err local = CAIRN_ERR_INIT;
	char line[JOURNAL_EVENT_MAX], kv[JOURNAL_EVENT_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);	/* cut at the cap */
	va_end(ap);
	snprintf(kv, sizeof kv, "%s", fields != NULL ? fields : "");
	return event_add(j, id, level, kv, line, err ? err : &local);
}

/* The callback of a journal_events_foreach() walk. */
struct event_walk {
	journal_event_fn fn;
	void	*arg;
};

static int
event_row(sqlite3_stmt *st, void *arg)
{
	const struct event_walk *w = arg;
	const unsigned char *lvl = sqlite3_column_text(st, 1);
	const unsigned char *line = sqlite3_column_text(st, 2);
	const unsigned char *kv = sqlite3_column_text(st, 3);

	return w->fn(sqlite3_column_int64(st, 0),
	    lvl != NULL ? (const char *)lvl : "",
	    line != NULL ? (const char *)line : "",
	    kv != NULL ? (const char *)kv : "", w->arg) != 0;
}

int
journal_events_foreach(struct journal *j, int64_t id, journal_event_fn fn,
    void *arg, struct cairn_err *err)
{
	struct event_walk w = { fn, arg };

	return each_row(j, ST_EVENTS, bind_id, &id, event_row, &w, err,
	    "reading events");
}

/* ---- Counters --------------------------------------------------------------- */

int
journal_counter_add(struct journal *j, const char *kind, const char *outcome,
    int64_t delta, struct cairn_err *err)
{
	struct cairn_err local = CAIRN_ERR_INIT;
	int rc;

	if (err == NULL)
		err = &local;
	rc = check_text(j, kind, JOURNAL_KIND_MAX, "counter kind", err);
	if (rc == 0)
		rc = check_text(j, outcome, JOURNAL_PHASE_MAX,
		    "counter outcome", err);
	if (rc < 0)
		return rc;
	rc = journal_begin(j, err);
	if (rc < 0)
		return rc;
	rc = counter_add_locked(j, kind, outcome, delta, err);
	return wdone(j, rc, err);
}

int
journal_counters(struct journal *j, struct journal_counter **out, size_t *n,
    struct cairn_err *err)
{
	return read_list(j, &counters_shape, NULL, NULL, out, n, err);
}

/* ---- Housekeeping ------------------------------------------------------------ */

int
journal_prune(struct journal *j, int64_t before_us, int64_t *pruned,
    struct cairn_err *err)
{
	struct cairn_err local = CAIRN_ERR_INIT;
	sqlite3_stmt *st = NULL;
	int64_t n = 0;
	int rc;

	if (err == NULL)
		err = &local;
	if (pruned != NULL)
		*pruned = 0;
	if (tl_batch == j)
		return cairn_err_set(err, CAIRN_EINVAL, "journal %s: prune "
		    "inside a batch", j->path);
	rc = wbegin(j, ST_PRUNE, &st, err);
	if (rc < 0)
		return rc;
	sqlite3_bind_int64(st, 1, before_us);
	rc = step_done(j, &j->w, st, err, "pruning finished items");
	n = sqlite3_changes(j->w.db);
	rc = wdone(j, rc, err);
	if (rc < 0)
		return rc;

	/*
	 * Outside any transaction: give the freed pages back to the file
	 * system, then copy the WAL into the database and truncate it. A
	 * checkpoint that cannot finish because a reader is active is not an
	 * error: the next one will.
	 */
	pthread_mutex_lock(&j->w.lock);
	rc = exec_sql(j, j->w.db, "PRAGMA incremental_vacuum", err,
	    "vacuuming");
	if (rc == 0)
		rc = exec_sql(j, j->w.db, "PRAGMA wal_checkpoint(TRUNCATE)",
		    err, "checkpointing the WAL");
	pthread_mutex_unlock(&j->w.lock);
	if (rc < 0)
		return rc;
	if (n > 0)
		log_info("journal %s: pruned %lld finished items", j->path,
		    (long long)n);
	if (pruned != NULL)
		*pruned = n;
	return 0;
}
