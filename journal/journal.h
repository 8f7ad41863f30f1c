/*
 * journal.h: cairn's local SQLite journal of claimed work, backup
 * checkpoints, restore progress, volume progress, per-item event logs and
 * counters. See journal/README.md and docs/journal.md.
 *
 * The rule every caller keeps: write to the journal first, and tell the
 * cluster (status.checkpoint, status.phase...) only after the journal
 * function returned 0. A function that returns an error has written
 * nothing that a later open will see (its transaction was rolled back), so
 * the cluster must not be told.
 *
 * Threads: one struct journal is shared by every engine worker and the web
 * endpoint. Every function may be called from any thread. Writes are
 * serialized; reads do not wait for writes (WAL) unless the calling thread
 * has a batch open, in which case they see the batch's own writes.
 *
 * Errors: 0 or a negative enum cairn_rc; the message in `err` (may be NULL)
 * names the journal path and SQLite's own error text. CAIRN_EIO: disk full,
 * I/O error, read-only file; CAIRN_EBUSY: another process holds the
 * journal's write lock longer than the busy timeout; CAIRN_EEXIST: the row
 * already exists; CAIRN_ENOTFOUND: no such row; CAIRN_EINVAL: bad argument
 * (too long, unknown kind, unknown item id).
 */
#ifndef CAIRN_JOURNAL_H
#define CAIRN_JOURNAL_H

#include <stddef.h>
#include <stdint.h>
#include "base/err.h"

struct journal;

/* Caps of the text fields (bytes including the NUL). Longer input: EINVAL. */
#define JOURNAL_KIND_MAX	16	/* "Backup" | "Restore" */
#define JOURNAL_NAME_MAX	254	/* namespace, name: DNS subdomain */
#define JOURNAL_UID_MAX		64
#define JOURNAL_PHASE_MAX	32
#define JOURNAL_ID_MAX		320	/* holder (server id), worker */
#define JOURNAL_KEY_MAX		1024	/* item key in a tarball, file path */
#define JOURNAL_TEXT_MAX	1024	/* upload id, ETag, message */
#define JOURNAL_TOKEN_MAX	1024	/* list continue token */
#define JOURNAL_EVENT_MAX	4096	/* one event line; longer is cut */
#define JOURNAL_HOOKS_MAX	(256 << 10) /* hook state JSON of an item */

#define JOURNAL_KIND_BACKUP	"Backup"
#define JOURNAL_KIND_RESTORE	"Restore"
/* Counter outcome bumped by every claim (see journal_counters()). */
#define JOURNAL_OUTCOME_CLAIMED	"Claimed"

/* journal_open() flags. */
#define JOURNAL_OPEN_SYNC_NORMAL 0x1	/* benchmarks only: see docs/journal.md */

/* A claimed item. Used as input of journal_claim() and output of reads. */
struct journal_item {
	int64_t	id;				/* journal row id */
	char	kind[JOURNAL_KIND_MAX];		/* "Backup" or "Restore" */
	char	namespace[JOURNAL_NAME_MAX];
	char	name[JOURNAL_NAME_MAX];
	char	uid[JOURNAL_UID_MAX];
	int64_t	attempt;			/* >= 1 */
	char	phase[JOURNAL_PHASE_MAX];	/* "InProgress" if empty on claim */
	char	holder[JOURNAL_ID_MAX];		/* server id */
	char	worker[JOURNAL_ID_MAX];		/* "<server-id>/<n>" */
	int64_t	claimed_at;			/* us; 0 on claim: now */
	int64_t	updated_at;			/* us */
	int64_t	finished_at;			/* us; 0 while running */
	int64_t	total_items;			/* progress for status/bars */
	int64_t	items_done;
	int64_t	bytes_done;
	char	message[JOURNAL_TEXT_MAX];	/* why it ended so; "" */
	int64_t	warnings;			/* status.warnings so far */
	int64_t	errors;				/* status.errors so far */
	/*
	 * Schedule its metrics are labelled with ("" none); journal_claim()
	 * keeps an earlier one when given "".
	 */
	char	schedule[JOURNAL_NAME_MAX];
};

/* One stored tarball part of a backup: a checkpoint. */
struct journal_part {
	int64_t	part_number;			/* 1, 2, ... */
	char	upload_id[JOURNAL_TEXT_MAX];	/* S3 upload id, "" for fs */
	char	etag[JOURNAL_TEXT_MAX];
	char	last_key[JOURNAL_KEY_MAX];	/* last item key in the part */
	/*
	 * The continue token that fetched the list page holding last_key's
	 * item; "" for a first page (or unknown: list from the start).
	 */
	char	list_continue[JOURNAL_TOKEN_MAX];
	int64_t	items;				/* items in this part */
	int64_t	bytes;				/* bytes of this part */
	char	sha256[65];			/* hex SHA-256 of them, or "" */
	int64_t	created_at;			/* us; output only */
};

/* Outcome of one restored item key. */
enum journal_rstate {
	JOURNAL_R_CREATED = 0,
	JOURNAL_R_UPDATED,
	JOURNAL_R_SKIPPED,
	JOURNAL_R_FAILED,
	JOURNAL_R_COUNT
};

/* Progress of one volume operation of an item. */
struct journal_volume {
	char	volume[JOURNAL_NAME_MAX];
	char	phase[JOURNAL_PHASE_MAX];
	int64_t	bytes_done;
	int64_t	bytes_total;
	int64_t	files_done;
	int64_t	files_total;
	char	last_file[JOURNAL_KEY_MAX];
	int64_t	updated_at;			/* us; output only */
};

/* One counter: how many items of a kind ended with an outcome. */
struct journal_counter {
	char	kind[JOURNAL_KIND_MAX];
	char	outcome[JOURNAL_PHASE_MAX];	/* final phase, or "Claimed" */
	int64_t	n;
};

/* Which items journal_items() lists; NULL/0 fields match everything. */
struct journal_filter {
	const char *kind;
	const char *phase;
	const char *holder;
	int	running_only;		/* only items not finished */
	size_t	limit;			/* 0: no limit */
};

/*
 * Called for each event line in order (fields: its logfmt fields, "" for
 * none); return non-zero to stop early.
 */
typedef int (*journal_event_fn)(int64_t at_us, const char *level,
    const char *line, const char *fields, void *arg);

/* ---- Opening and closing ------------------------------------------------ */

/*
 * Open (creating if needed) the journal at path, migrate its schema to the
 * current version and return the handle in *out (caller frees with
 * journal_close()). flags: 0, or JOURNAL_OPEN_SYNC_NORMAL. Refused with a
 * message naming the path: a file that is not a journal (CAIRN_EINVAL), a
 * journal written by a newer cairn (CAIRN_EUNSUPPORTED, naming both schema
 * versions), a read-only file or directory, full disk, I/O error
 * (CAIRN_EIO). On failure *out is NULL and the file is unchanged, except
 * that a new, empty file may remain.
 */
int	journal_open(const char *path, int flags, struct journal **out,
	    struct cairn_err *err);
/* Close; NULL is fine. An open batch is rolled back. */
void	journal_close(struct journal *j);
/* The path given to journal_open(); borrowed, valid until close. */
const char *journal_path(const struct journal *j);
/* The schema version this build writes (the last step of journal.sql). */
int	journal_schema_version(void);
/* PRAGMA integrity_check: 0 if "ok", else CAIRN_EIO with its first lines. */
int	journal_check(struct journal *j, struct cairn_err *err);
/*
 * 1 if the journal can be written, 0 if its last write failed for want of
 * disk (full, I/O error, read-only) and no write has succeeded since; err
 * then says why. While it cannot, a call at most once a second tries a
 * tiny write (and, after a full disk, wants 1 MiB free on the journal's
 * filesystem), so the answer turns 1 again by itself once space is back.
 * Servers stop claiming work and /readyz says false meanwhile.
 */
int	journal_writable(struct journal *j, struct cairn_err *err);

/* ---- Batches -------------------------------------------------------------- */

/*
 * Group many writes into one transaction (one fsync). journal_begin()
 * reserves the journal's writer for the calling thread: other threads'
 * writes wait until this thread calls journal_commit() or
 * journal_rollback(), so keep batches short and never wait for another
 * thread that writes to the journal while holding one. Batches nest; only
 * the outermost commit writes. If any write inside the batch failed, the
 * batch is poisoned: later writes in it return that first error, and the
 * outermost journal_commit() rolls everything back and returns it too. journal_commit() returning 0 means every
 * write of the batch is durable; anything else means none is.
 */
int	journal_begin(struct journal *j, struct cairn_err *err);
int	journal_commit(struct journal *j, struct cairn_err *err);
/* Undo the batch (an inner rollback poisons the outer batch). */
void	journal_rollback(struct journal *j);

/* ---- Items ---------------------------------------------------------------- */

/*
 * Record a claim of it->kind/namespace/name/uid with it->attempt, holder,
 * worker, claimed_at (0: now) and phase ("" = "InProgress"). A new claim of
 * an object already in the journal updates its row (clearing finished_at
 * and message) and keeps its parts and progress. Bumps the counter
 * (kind, "Claimed"). *id (may be NULL) gets the row id.
 */
int	journal_claim(struct journal *j, const struct journal_item *it,
	    int64_t *id, struct cairn_err *err);
int	journal_set_phase(struct journal *j, int64_t id, const char *phase,
	    struct cairn_err *err);
/* Progress shown in status and on /status. */
int	journal_set_progress(struct journal *j, int64_t id, int64_t total_items,
	    int64_t items_done, int64_t bytes_done, struct cairn_err *err);
/* Warnings and errors recorded so far (as status.warnings/.errors say). */
int	journal_set_counts(struct journal *j, int64_t id, int64_t warnings,
	    int64_t errors, struct cairn_err *err);
/* The schedule its metrics are labelled with (a Restore learns it late). */
int	journal_set_schedule(struct journal *j, int64_t id,
	    const char *schedule, struct cairn_err *err);
/*
 * The item ended: phase (Completed, PartiallyFailed, Failed...), message
 * (may be NULL), finished_at = now; bumps the counter (kind, phase).
 */
int	journal_finish(struct journal *j, int64_t id, const char *phase,
	    const char *message, struct cairn_err *err);
/* Read one item by row id; CAIRN_ENOTFOUND if none. */
int	journal_item_get(struct journal *j, int64_t id, struct journal_item *out,
	    struct cairn_err *err);
/* Find by kind, namespace, name and uid (uid NULL: the latest claimed). */
int	journal_item_find(struct journal *j, const char *kind,
	    const char *namespace, const char *name, const char *uid,
	    struct journal_item *out, struct cairn_err *err);
/*
 * List the items matching f (NULL: all), oldest claim first, into a new
 * array *out of *n items (caller frees *out with free(); NULL when none).
 * Resume at start: {.phase = "InProgress", .holder = server_id}.
 */
int	journal_items(struct journal *j, const struct journal_filter *f,
	    struct journal_item **out, size_t *n, struct cairn_err *err);

/* ---- Backup checkpoints --------------------------------------------------- */

/*
 * Record that part p->part_number of item id is stored. CAIRN_EEXIST if
 * that part number is already recorded (nothing changes).
 */
int	journal_part_add(struct journal *j, int64_t id,
	    const struct journal_part *p, struct cairn_err *err);
/* All parts of item id by part number, as journal_items() returns lists. */
int	journal_parts(struct journal *j, int64_t id, struct journal_part **out,
	    size_t *n, struct cairn_err *err);

/*
 * Forget every part of item id (its tarball starts again under a new
 * upload, whose part numbers start at 1 again).
 */
int	journal_parts_clear(struct journal *j, int64_t id,
	    struct cairn_err *err);

/* ---- Restore progress ----------------------------------------------------- */

/* Record the outcome of one item key (replaces an earlier outcome). */
int	journal_restore_mark(struct journal *j, int64_t id, const char *key,
	    enum journal_rstate state, struct cairn_err *err);
/* "Was this key done?": 0 and *state, or CAIRN_ENOTFOUND. */
int	journal_restore_lookup(struct journal *j, int64_t id, const char *key,
	    enum journal_rstate *state, struct cairn_err *err);
/* Number of keys in each state. */
int	journal_restore_counts(struct journal *j, int64_t id,
	    int64_t counts[JOURNAL_R_COUNT], struct cairn_err *err);
/* "created", "updated", "skipped", "failed"; NULL for anything else. */
const char *journal_rstate_name(enum journal_rstate s);

/* ---- Volume operations ---------------------------------------------------- */

/* Insert or update the progress of v->volume of item id. */
int	journal_volume_set(struct journal *j, int64_t id,
	    const struct journal_volume *v, struct cairn_err *err);
/* All volumes of item id by name, as journal_items() returns lists. */
int	journal_volumes(struct journal *j, int64_t id,
	    struct journal_volume **out, size_t *n, struct cairn_err *err);

/* ---- Backup hook state ---------------------------------------------------- */

/*
 * The hook state of item id (engine/hooks_backup.c's JSON: pods frozen by
 * a pre hook, counters), replaced whole. At most JOURNAL_HOOKS_MAX bytes.
 */
int	journal_hooks_set(struct journal *j, int64_t id, const char *state,
	    struct cairn_err *err);
/* The state last set (owned), or CAIRN_ENOTFOUND with *out NULL. */
int	journal_hooks_get(struct journal *j, int64_t id, char **out,
	    struct cairn_err *err);

/* ---- Event log ------------------------------------------------------------ */

/* Append a timestamped line (cut at JOURNAL_EVENT_MAX) to item id's log. */
int	journal_event(struct journal *j, int64_t id, const char *level,
	    struct cairn_err *err, const char *fmt, ...) CAIRN_PRINTF(5, 6);
/*
 * journal_event() with fields: logfmt text ("resource=pods namespace=a")
 * written after the message in the uploaded log (cut at JOURNAL_EVENT_MAX).
 */
int	journal_event_kv(struct journal *j, int64_t id, const char *level,
	    const char *fields, struct cairn_err *err, const char *fmt, ...)
	    CAIRN_PRINTF(6, 7);
/*
 * Call fn for each event of item id, oldest first. fn runs with a journal
 * lock held and must not call into the journal. Strings are borrowed for
 * the duration of the call.
 */
int	journal_events_foreach(struct journal *j, int64_t id,
	    journal_event_fn fn, void *arg, struct cairn_err *err);

/* ---- Counters ------------------------------------------------------------- */

int	journal_counter_add(struct journal *j, const char *kind,
	    const char *outcome, int64_t delta, struct cairn_err *err);
/* Snapshot of all counters by kind and outcome; list as journal_items(). */
int	journal_counters(struct journal *j, struct journal_counter **out,
	    size_t *n, struct cairn_err *err);

/* ---- Housekeeping --------------------------------------------------------- */

/*
 * Delete the items finished before `before_us` with all their rows, then
 * give free pages back (incremental vacuum) and truncate the WAL. Not
 * inside a batch (CAIRN_EINVAL). *pruned (may be NULL) gets the count.
 */
int	journal_prune(struct journal *j, int64_t before_us, int64_t *pruned,
	    struct cairn_err *err);

#endif
