/*
 * cron.h: schedules as Velero's Schedule objects write them (robfig/cron's
 * standard parser): five fields "minute hour day-of-month month
 * day-of-week", or a descriptor: @yearly (@annually), @monthly, @weekly,
 * @daily (@midnight), @hourly, @every <Go duration>.
 *
 * Fields take `*`, `?` (same as `*`), numbers, ranges `a-b`, steps `*\/n`
 * and `a-b/n` and `a/n` (a to the field's maximum), lists `a,b-c`, month
 * names JAN..DEC and weekday names SUN..SAT (case-insensitive); weekday 7
 * is Sunday too. Day-of-month and day-of-week follow cron: when both are
 * restricted (neither starts with `*`), a day matching either fires.
 *
 * All times are microseconds since the epoch and all arithmetic is in UTC
 * (Velero's servers run in UTC; schedules with a CRON_TZ are refused).
 * Resolution is one second: fire times are whole seconds (whole minutes
 * for five-field expressions).
 */
#ifndef CAIRN_CRON_H
#define CAIRN_CRON_H

#include <stdint.h>
#include "base/err.h"

#define CRON_EXPR_MAX 256	/* longest expression accepted */

struct cron;

/*
 * Parse expr. On error *out is NULL and err says which field and why
 * (CAIRN_EINVAL); the message is meant for a Schedule's validationErrors.
 * *out is owned (cron_free).
 */
int cron_parse(const char *expr, struct cron **out, struct cairn_err *err);
void cron_free(struct cron *c);

/*
 * The first fire time strictly after after_us (whole seconds), or -1 when
 * there is none in the next five years (e.g. "0 0 30 2 *").
 */
int64_t cron_next(const struct cron *c, int64_t after_us);

/*
 * The last fire time t with after_us < t <= now_us, or -1 when none is
 * due. A server that was down for a while gets one run, the latest, as
 * Velero does, not one per missed time.
 */
int64_t cron_latest(const struct cron *c, int64_t after_us, int64_t now_us);

/* The @every interval in microseconds, or 0 for calendar schedules. */
int64_t cron_interval(const struct cron *c);

#endif
