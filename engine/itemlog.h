/*
 * itemlog.h: the log of one Backup or Restore, in Velero's line format.
 *
 * A line is what the user reads with `cairn backup logs` / `restore logs`:
 *
 *   time="2026-12-02T12:00:01.250000Z" level=info msg="listed 412 items" \
 *       backup=cairn-system/nightly namespace=app resource=configmaps
 *
 * time, level and msg first, then the object (backup= or restore=
 * NAMESPACE/NAME) and the line's own fields in logfmt, as Velero's logrus
 * text formatter writes them (values with spaces, quotes or '=' quoted as
 * JSON strings). Lines are recorded in the journal as they happen (the
 * item's events, journal first) and also written to the server's log; the
 * uploaded log file is rendered from the journal at the end, so a resumed
 * run's log holds every attempt's lines.
 *
 * Threading: no state of its own; the journal is thread-safe.
 */
#ifndef CAIRN_ITEMLOG_H
#define CAIRN_ITEMLOG_H

#include <stdint.h>
#include "base/buf.h"
#include "base/util.h"

struct journal;

/* Which object a log belongs to. Strings are borrowed. */
struct itemlog {
	struct journal *journal;
	int64_t jid;			/* journal row; <= 0: server log only */
	const char *kind;		/* "backup" or "restore" */
	const char *namespace;
	const char *name;
};

/*
 * Record one line: level "info", "warning" or "error"; fields logfmt text
 * built with itemlog_kv() (NULL or "" for none). A journal failure is not
 * the caller's: the line still reaches the server's log.
 */
void itemlog_event(const struct itemlog *l, const char *level,
	const char *fields, const char *fmt, ...) CAIRN_PRINTF(4, 5);

/*
 * Append key=value to a logfmt buffer (a space first unless empty); the
 * value is quoted when it is empty or holds a space, quote, '=' or a
 * control character. Returns buf_*()'s result (CAIRN_ETOOBIG past the cap).
 */
int itemlog_kv(struct buf *b, const char *key, const char *value);

/*
 * Append the whole log of l's item, oldest line first, to out (the
 * uploaded log file's text). 0, or the journal's error.
 */
int itemlog_render(const struct itemlog *l, struct buf *out,
	struct cairn_err *err);

#endif
