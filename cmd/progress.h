/*
 * progress.h: progress of a long operation (a backup, a restore, a
 * download) on stderr, for people.
 *
 * On a terminal one line is redrawn in place ("\r", erase line): a bar,
 * items done/total, bytes, the rate and a detail text (holder, attempt).
 * Elsewhere (a pipe, a CI log) plain lines are printed, at most one per
 * interval (1 s) unless the phase or the detail changes, so logs stay
 * readable. Messages in between (progress_note) never garble the bar.
 *
 *     struct progress *p = progress_new(stderr, PROGRESS_AUTO, "backup b1");
 *     progress_update(p, &(struct progress_state){ .phase = "InProgress",
 *         .done = 10, .total = 100, .bytes = 4096, .bytes_total = -1 });
 *     progress_end(p, "Completed");
 *     progress_free(p);
 *
 * Not thread-safe: one thread drives one progress.
 */
#ifndef CAIRN_PROGRESS_H
#define CAIRN_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

#include "base/err.h"

#define PROGRESS_AUTO -1	/* terminal mode if isatty(fileno(f)) */
#define PROGRESS_PLAIN 0
#define PROGRESS_TTY 1

#define PROGRESS_INTERVAL_US 1000000	/* plain lines: at most one a second */
#define PROGRESS_LINE_MAX 512		/* bytes of one drawn line */

struct progress;

/* One observation. -1 in a number means unknown. */
struct progress_state {
	const char *phase;	/* "InProgress"; NULL: unchanged text omitted */
	int64_t done;		/* items done */
	int64_t total;		/* items expected */
	int64_t bytes;		/* bytes moved */
	int64_t bytes_total;	/* bytes expected (downloads) */
	const char *detail;	/* "holder srv-a, attempt 2"; may be NULL */
};

/*
 * Start showing progress of `label` ("backup b1") on f (borrowed). mode is
 * PROGRESS_AUTO, PROGRESS_PLAIN or PROGRESS_TTY. Owned by the caller.
 */
struct progress *progress_new(FILE *f, int mode, const char *label);
/* PROGRESS_TTY or PROGRESS_PLAIN, as decided. */
int progress_mode(const struct progress *p);
/*
 * Record an observation and draw it: redrawn at once on a terminal (at
 * most every 100 ms), printed as a line in plain mode when the phase or
 * detail changed or PROGRESS_INTERVAL_US passed since the last line.
 * st is copied.
 */
void progress_update(struct progress *p, const struct progress_state *st);
/* Print a message on its own line (the bar is redrawn after it). */
void progress_note(struct progress *p, const char *fmt, ...) CAIRN_PRINTF(2, 3);
/*
 * Draw the final state, whatever the interval, and end the line; final
 * NULL only ends a bar left on screen (an error message follows). final
 * is copied.
 */
void progress_end(struct progress *p, const struct progress_state *final);
/* Format the line of st as drawn (rate from the recorded history). */
void progress_format(struct progress *p, const struct progress_state *st,
	int width, char *out, size_t outlen);
void progress_free(struct progress *p);

#endif
