/*
 * timeutil.h: clocks, Kubernetes timestamps and Go-style durations.
 *
 * Times are int64 microseconds since the Unix epoch (wall clock) or since
 * an arbitrary start (monotonic). Kubernetes writes `metav1.Time` as RFC 3339
 * seconds ("2026-12-02T12:00:00Z") and `metav1.MicroTime` (Lease renewTime)
 * with exactly six fractional digits ("2026-12-02T12:00:00.000000Z").
 * Durations are written as Go does: "500ms", "3s", "1h30m", "72h".
 */
#ifndef CAIRN_TIMEUTIL_H
#define CAIRN_TIMEUTIL_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#define TIME_US_PER_SEC 1000000LL
#define TIME_STR_MAX 40		/* room for any string formatted here */

int64_t time_now_us(void);		/* wall clock */
int64_t time_mono_us(void);		/* monotonic clock, for timeouts */

/* "2006-01-02T15:04:05Z" (fraction dropped). out has TIME_STR_MAX bytes. */
void time_format_rfc3339(int64_t us, char *out);
/* "2006-01-02T15:04:05.000000Z". out has TIME_STR_MAX bytes. */
void time_format_micro(int64_t us, char *out);
/*
 * Parse RFC 3339: date, 'T' or 't', time, optional fraction (up to 9
 * digits), 'Z' or +hh:mm/-hh:mm. Returns 0 or CAIRN_EINVAL for anything else
 * (out untouched).
 */
int time_parse(const char *s, int64_t *us);

/*
 * Parse a Go duration: one or more <number><unit> with units ns, us, ms, s,
 * m, h (decimal fractions allowed: "1.5h"); "0" alone is zero. Negative
 * values, missing units, overflow: CAIRN_EINVAL. Result in microseconds.
 */
int duration_parse(const char *s, int64_t *us);
/* Shortest Go-like form: "500ms", "3s", "1h30m0s" is written "1h30m". */
void duration_format(int64_t us, char *out);

/*
 * The CLOCK_REALTIME instant us from now, as pthread_cond_timedwait()
 * takes its deadline.
 */
void time_deadline(struct timespec *ts, int64_t us);

/* Sleep, returning early if *stop becomes non-zero (checked every 50 ms). */
void time_sleep_us(int64_t us, const atomic_int *stop);

#endif
