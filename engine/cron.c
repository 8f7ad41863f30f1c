/*
 * cron.c: cron expressions and next-fire computation, see cron.h.
 *
 * Each field is a bit set of the values it allows (minutes 0-59, hours
 * 0-23, days 1-31, months 1-12, weekdays 0-6); a field written as `*` or
 * `?` also records that it was unrestricted, which decides how day of
 * month and day of week combine. cron_next() walks forward as robfig/cron
 * does: fix the month, then the day, the hour, the minute, each time
 * resetting the smaller units, so it takes at most a few hundred steps per
 * year searched. Calendar arithmetic is gmtime_r/timegm: UTC only.
 */
#include "config.h"
#include "engine/cron.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/mem.h"
#include "base/timeutil.h"

#define CRON_SEARCH_YEARS 5

struct cron {
	uint64_t min;		/* bit m: minute m allowed */
	uint32_t hour;
	uint32_t dom;		/* bits 1..31 */
	uint32_t mon;		/* bits 1..12 */
	uint32_t dow;		/* bits 0..6, Sunday = 0 */
	int dom_star;		/* day-of-month was `*` or `?` */
	int dow_star;
	int64_t every_us;	/* @every: the interval (whole seconds); 0 otherwise */
};

struct cron_field {
	const char *what;
	int lo, hi;
	const char *const *names;	/* names[i] is value lo_name + i */
	int names_base;
};

static const char *const month_names[] = { "jan", "feb", "mar", "apr", "may",
	"jun", "jul", "aug", "sep", "oct", "nov", "dec", NULL };
static const char *const dow_names[] = { "sun", "mon", "tue", "wed", "thu",
	"fri", "sat", NULL };

static const struct cron_field fields[5] = {
	{ "minute", 0, 59, NULL, 0 },
	{ "hour", 0, 23, NULL, 0 },
	{ "day of month", 1, 31, NULL, 0 },
	{ "month", 1, 12, month_names, 1 },
	{ "day of week", 0, 7, dow_names, 0 },
};

/* A number or a name of field f; CAIRN_EINVAL otherwise. */
static int
cron_value(const struct cron_field *f, const char *s, size_t n, int *out,
	struct cairn_err *err)
{
	int v = 0;

	if (n == 0)
		return cairn_err_set(err, CAIRN_EINVAL, "empty value in the %s "
		    "field", f->what);
	if (isdigit((unsigned char)s[0])) {
		for (size_t i = 0; i < n; i++) {
			if (!isdigit((unsigned char)s[i]) || v > 1000)
				return cairn_err_set(err, CAIRN_EINVAL,
				    "\"%.*s\" is not a number in the %s field",
				    (int)n, s, f->what);
			v = v * 10 + (s[i] - '0');
		}
	} else {
		int found = 0;

		for (int i = 0; f->names != NULL && f->names[i] != NULL; i++) {
			if (n == 3 && strncasecmp(s, f->names[i], 3) == 0) {
				v = f->names_base + i;
				found = 1;
				break;
			}
		}
		if (!found)
			return cairn_err_set(err, CAIRN_EINVAL,
			    "\"%.*s\" is not a value of the %s field", (int)n, s,
			    f->what);
	}
	if (v < f->lo || v > f->hi)
		return cairn_err_set(err, CAIRN_EINVAL, "%d is out of range "
		    "%d-%d in the %s field", v, f->lo, f->hi, f->what);
	*out = v;
	return 0;
}

/* One field's text (s, n bytes) into bits; *star set for `*` / `?`. */
static int
cron_field_parse(const struct cron_field *f, const char *s, size_t n,
	uint64_t *bits, int *star, struct cairn_err *err)
{
	size_t pos = 0;

	*bits = 0;
	*star = n > 0 && (s[0] == '*' || s[0] == '?');
	while (pos <= n) {
		const char *part = s + pos, *comma, *slash, *dash;
		size_t plen, rlen;
		int lo, hi, step = 1, rc;

		comma = memchr(part, ',', n - pos);
		plen = comma != NULL ? (size_t)(comma - part) : n - pos;
		slash = memchr(part, '/', plen);
		rlen = slash != NULL ? (size_t)(slash - part) : plen;
		if (slash != NULL) {
			int maxstep = f->hi - f->lo + 1;
			struct cron_field sf = { "step", 1, maxstep, NULL, 0 };

			rc = cron_value(&sf, slash + 1, plen - rlen - 1, &step, err);
			if (rc < 0)
				return cairn_err_prefix(err, "%s field", f->what);
		}
		if (rlen == 1 && (part[0] == '*' || part[0] == '?')) {
			lo = f->lo;
			hi = f->hi;
			if (f->hi == 7)	/* day of week: 7 is Sunday again */
				hi = 6;
		} else {
			dash = memchr(part, '-', rlen);
			rc = cron_value(f, part, dash != NULL ?
			    (size_t)(dash - part) : rlen, &lo, err);
			if (rc < 0)
				return rc;
			if (dash != NULL) {
				rc = cron_value(f, dash + 1,
				    rlen - (size_t)(dash - part) - 1, &hi, err);
				if (rc < 0)
					return rc;
			} else
				hi = slash != NULL ? f->hi : lo;
			if (hi < lo)
				return cairn_err_set(err, CAIRN_EINVAL,
				    "range %d-%d goes backwards in the %s field",
				    lo, hi, f->what);
		}
		for (int v = lo; v <= hi; v += step)
			*bits |= 1ULL << (f->hi == 7 && v == 7 ? 0 : v);
		if (comma == NULL)
			break;
		pos += plen + 1;
	}
	return 0;
}

static int
cron_parse_fields(struct cron *c, const char *expr, struct cairn_err *err)
{
	const char *p = expr, *start[5];
	size_t len[5];
	uint64_t bits[5];
	int stars[5], nf = 0, rc;

	while (*p != '\0') {
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\0')
			break;
		if (nf == 5)
			return cairn_err_set(err, CAIRN_EINVAL, "expected 5 "
			    "fields (minute hour day-of-month month day-of-week), "
			    "found more");
		start[nf] = p;
		while (*p != '\0' && *p != ' ' && *p != '\t')
			p++;
		len[nf] = (size_t)(p - start[nf]);
		nf++;
	}
	if (nf != 5)
		return cairn_err_set(err, CAIRN_EINVAL, "expected 5 fields "
		    "(minute hour day-of-month month day-of-week), found %d", nf);
	for (int i = 0; i < 5; i++) {
		rc = cron_field_parse(&fields[i], start[i], len[i], &bits[i],
		    &stars[i], err);
		if (rc < 0)
			return rc;
	}
	c->min = bits[0];
	c->hour = (uint32_t)bits[1];
	c->dom = (uint32_t)bits[2];
	c->mon = (uint32_t)bits[3];
	c->dow = (uint32_t)bits[4];
	c->dom_star = stars[2];
	c->dow_star = stars[4];
	return 0;
}

int
cron_parse(const char *expr, struct cron **out, struct cairn_err *err)
{
	static const struct { const char *name, *fields; } desc[] = {
		{ "@yearly", "0 0 1 1 *" }, { "@annually", "0 0 1 1 *" },
		{ "@monthly", "0 0 1 * *" }, { "@weekly", "0 0 * * 0" },
		{ "@daily", "0 0 * * *" }, { "@midnight", "0 0 * * *" },
		{ "@hourly", "0 * * * *" },
	};
	struct cron *c;
	int rc;

	*out = NULL;
	if (expr == NULL || expr[0] == '\0')
		return cairn_err_set(err, CAIRN_EINVAL, "empty schedule");
	if (strlen(expr) > CRON_EXPR_MAX)
		return cairn_err_set(err, CAIRN_EINVAL, "schedule longer than "
		    "%d characters", CRON_EXPR_MAX);
	while (*expr == ' ' || *expr == '\t')
		expr++;
	if (strncmp(expr, "TZ=", 3) == 0 || strncmp(expr, "CRON_TZ=", 8) == 0)
		return cairn_err_set(err, CAIRN_EINVAL, "time zones are not "
		    "supported: schedules run in UTC");
	c = xcalloc(1, sizeof *c);
	if (expr[0] == '@') {
		if (strncmp(expr, "@every", 6) == 0 &&
		    (expr[6] == ' ' || expr[6] == '\t')) {
			const char *d = expr + 7;
			int64_t us;

			while (*d == ' ' || *d == '\t')
				d++;
			rc = duration_parse(d, &us);
			if (rc < 0) {
				rc = cairn_err_set(err, CAIRN_EINVAL, "@every: "
				    "\"%s\" is not a duration (e.g. 90s, 5m, 1h30m)",
				    d);
				goto fail;
			}
			us -= us % TIME_US_PER_SEC;	/* as robfig/cron */
			if (us < TIME_US_PER_SEC) {
				rc = cairn_err_set(err, CAIRN_EINVAL, "@every: the "
				    "interval must be at least 1s");
				goto fail;
			}
			c->every_us = us;
			*out = c;
			return 0;
		}
		for (size_t i = 0; i < sizeof desc / sizeof desc[0]; i++) {
			if (strcmp(expr, desc[i].name) == 0) {
				rc = cron_parse_fields(c, desc[i].fields, err);
				if (rc < 0)
					goto fail;
				*out = c;
				return 0;
			}
		}
		rc = cairn_err_set(err, CAIRN_EINVAL, "unknown descriptor \"%s\" "
		    "(@yearly, @monthly, @weekly, @daily, @midnight, @hourly, "
		    "@every <duration>)", expr);
		goto fail;
	}
	rc = cron_parse_fields(c, expr, err);
	if (rc < 0)
		goto fail;
	*out = c;
	return 0;
fail:
	free(c);
	return rc;
}

void
cron_free(struct cron *c)
{
	free(c);
}

int64_t
cron_interval(const struct cron *c)
{
	return c->every_us;
}

static int
cron_day_ok(const struct cron *c, const struct tm *tm)
{
	int dom = (c->dom >> tm->tm_mday) & 1;
	int dow = (c->dow >> tm->tm_wday) & 1;

	if (c->dom_star || c->dow_star)
		return dom && dow;
	return dom || dow;
}

int64_t
cron_next(const struct cron *c, int64_t after_us)
{
	struct tm tm;
	time_t t;
	int limit_year;

	/* Whole seconds, strictly after. */
	t = (time_t)(after_us / TIME_US_PER_SEC);
	if (after_us < 0 && after_us % TIME_US_PER_SEC != 0)
		t--;
	if (c->every_us > 0)
		return ((int64_t)t + c->every_us / TIME_US_PER_SEC) *
		    TIME_US_PER_SEC;
	t += 1;
	if (t % 60 != 0)
		t += 60 - t % 60;	/* the next whole minute */
	gmtime_r(&t, &tm);
	limit_year = tm.tm_year + CRON_SEARCH_YEARS;
	while (tm.tm_year <= limit_year) {
		if (!((c->mon >> (tm.tm_mon + 1)) & 1)) {
			tm.tm_mon++;
			tm.tm_mday = 1;
			tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
		} else if (!cron_day_ok(c, &tm)) {
			tm.tm_mday++;
			tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
		} else if (!((c->hour >> tm.tm_hour) & 1)) {
			tm.tm_hour++;
			tm.tm_min = tm.tm_sec = 0;
		} else if (!((c->min >> tm.tm_min) & 1)) {
			tm.tm_min++;
			tm.tm_sec = 0;
		} else
			return (int64_t)timegm(&tm) * TIME_US_PER_SEC;
		/* Normalise (month 12 -> next year, day 32 -> next month). */
		t = timegm(&tm);
		gmtime_r(&t, &tm);
	}
	return -1;
}

int64_t
cron_latest(const struct cron *c, int64_t after_us, int64_t now_us)
{
	int64_t t, n;

	t = cron_next(c, after_us);
	if (t < 0 || t > now_us)
		return -1;
	if (c->every_us > 0)
		return t + (now_us - t) / c->every_us * c->every_us;
	/*
	 * Walk forward one fire at a time; after a long downtime start from
	 * the last eight days when something fires in them (every schedule
	 * but monthly and yearly ones), so the walk stays short.
	 */
	n = cron_next(c, now_us - 8 * 86400 * TIME_US_PER_SEC);
	if (n > t && n <= now_us)
		t = n;
	for (;;) {
		n = cron_next(c, t);
		if (n < 0 || n > now_us)
			return t;
		t = n;
	}
}
