/* timeutil.c: clocks, RFC 3339 and Go durations, see timeutil.h. */
#include "config.h"
#include "base/timeutil.h"
#include "base/err.h"

#include <stdatomic.h>
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int64_t
time_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * TIME_US_PER_SEC + ts.tv_nsec / 1000;
}

int64_t
time_mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * TIME_US_PER_SEC + ts.tv_nsec / 1000;
}

static void
split(int64_t us, struct tm *tm, long *frac)
{
	int64_t sec = us / TIME_US_PER_SEC;
	long f = (long)(us % TIME_US_PER_SEC);
	time_t t;

	if (f < 0) {
		f += TIME_US_PER_SEC;
		sec--;
	}
	t = (time_t)sec;
	gmtime_r(&t, tm);
	*frac = f;
}

void
time_format_rfc3339(int64_t us, char *out)
{
	struct tm tm;
	long frac;

	split(us, &tm, &frac);
	strftime(out, TIME_STR_MAX, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void
time_format_micro(int64_t us, char *out)
{
	struct tm tm;
	long frac;
	char base[24];

	split(us, &tm, &frac);
	strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, TIME_STR_MAX, "%.20s.%06ldZ", base, frac);
}

static int
digits(const char **p, int n, int *out)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (!isdigit((unsigned char)(*p)[i]))
			return -1;
		v = v * 10 + ((*p)[i] - '0');
	}
	*p += n;
	*out = v;
	return 0;
}

static int
days_in_month(int y, int m)
{
	static const int d[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

	return m == 2 && leap ? 29 : d[m - 1];
}

int
time_parse(const char *s, int64_t *us)
{
	const char *p = s;
	int y, mo, d, h, mi, sec, oh = 0, om = 0, sign = 0;
	long frac = 0;
	struct tm tm;
	time_t t;

	if (s == NULL)
		return CAIRN_EINVAL;
	if (digits(&p, 4, &y) < 0 || *p++ != '-' || digits(&p, 2, &mo) < 0 ||
	    *p++ != '-' || digits(&p, 2, &d) < 0 || (*p != 'T' && *p != 't'))
		return CAIRN_EINVAL;
	p++;
	if (digits(&p, 2, &h) < 0 || *p++ != ':' || digits(&p, 2, &mi) < 0 ||
	    *p++ != ':' || digits(&p, 2, &sec) < 0)
		return CAIRN_EINVAL;
	if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 ||
	    mi > 59 || sec > 60)
		return CAIRN_EINVAL;
	if (*p == '.') {
		int n = 0;
		long scale = 100000;

		p++;
		while (isdigit((unsigned char)*p)) {
			if (n < 6) {
				frac += (*p - '0') * scale;
				scale /= 10;
			}
			n++;
			p++;
		}
		if (n == 0 || n > 9)
			return CAIRN_EINVAL;
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		sign = *p == '+' ? 1 : -1;
		p++;
		if (digits(&p, 2, &oh) < 0 || *p++ != ':' ||
		    digits(&p, 2, &om) < 0 || oh > 23 || om > 59)
			return CAIRN_EINVAL;
	} else {
		return CAIRN_EINVAL;
	}
	if (*p != '\0')
		return CAIRN_EINVAL;
	memset(&tm, 0, sizeof tm);
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	t = timegm(&tm);
	t -= sign * (oh * 3600 + om * 60);
	*us = (int64_t)t * TIME_US_PER_SEC + frac;
	return 0;
}

int
duration_parse(const char *s, int64_t *us)
{
	static const struct { const char *name; double us; } units[] = {
		{ "ns", 0.001 }, { "us", 1 }, { "\xc2\xb5s", 1 }, { "ms", 1000 },
		{ "s", 1e6 }, { "m", 60e6 }, { "h", 3600e6 },
	};
	const char *p = s;
	double total = 0;

	if (s == NULL || *s == '\0')
		return CAIRN_EINVAL;
	if (strcmp(s, "0") == 0) {
		*us = 0;
		return 0;
	}
	while (*p != '\0') {
		double v = 0, scale = 1;
		int seen = 0;
		size_t best = 0, len;
		double mult = 0;

		while (isdigit((unsigned char)*p)) {
			v = v * 10 + (*p++ - '0');
			seen = 1;
		}
		if (*p == '.') {
			p++;
			while (isdigit((unsigned char)*p)) {
				scale /= 10;
				v += (*p++ - '0') * scale;
				seen = 1;
			}
		}
		if (!seen)
			return CAIRN_EINVAL;
		for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
			len = strlen(units[i].name);
			if (strncmp(p, units[i].name, len) == 0 && len > best) {
				best = len;
				mult = units[i].us;
			}
		}
		if (best == 0)
			return CAIRN_EINVAL;
		p += best;
		total += v * mult;
		if (total > (double)INT64_MAX / 2)
			return CAIRN_EINVAL;
	}
	*us = (int64_t)(total + 0.5);
	return 0;
}

void
duration_format(int64_t us, char *out)
{
	int64_t h, m, s, rem;
	int n = 0;

	if (us == 0) {
		snprintf(out, TIME_STR_MAX, "0s");
		return;
	}
	if (us < 0) {
		out[n++] = '-';
		us = -us;
	}
	if (us < TIME_US_PER_SEC) {
		if (us % 1000 == 0)
			snprintf(out + n, TIME_STR_MAX - n, "%lldms",
			    (long long)(us / 1000));
		else
			snprintf(out + n, TIME_STR_MAX - n, "%lldus",
			    (long long)us);
		return;
	}
	h = us / (3600 * TIME_US_PER_SEC);
	rem = us % (3600 * TIME_US_PER_SEC);
	m = rem / (60 * TIME_US_PER_SEC);
	rem %= 60 * TIME_US_PER_SEC;
	s = rem / TIME_US_PER_SEC;
	rem %= TIME_US_PER_SEC;
	if (h > 0)
		n += snprintf(out + n, TIME_STR_MAX - n, "%lldh", (long long)h);
	if (m > 0)
		n += snprintf(out + n, TIME_STR_MAX - n, "%lldm", (long long)m);
	if (s > 0 || rem > 0) {
		if (rem > 0) {
			char frac[8];
			int fl;

			snprintf(frac, sizeof frac, "%06lld", (long long)rem);
			fl = 6;
			while (fl > 0 && frac[fl - 1] == '0')
				frac[--fl] = '\0';
			snprintf(out + n, TIME_STR_MAX - n, "%lld.%ss",
			    (long long)s, frac);
		} else {
			snprintf(out + n, TIME_STR_MAX - n, "%llds",
			    (long long)s);
		}
	}
}

void
time_deadline(struct timespec *ts, int64_t us)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += (time_t)(us / TIME_US_PER_SEC);
	ts->tv_nsec += (long)(us % TIME_US_PER_SEC) * 1000;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

void
time_sleep_us(int64_t us, const atomic_int *stop)
{
	int64_t end = time_mono_us() + us;

	for (;;) {
		int64_t left = end - time_mono_us();
		struct timespec ts;

		if (left <= 0 || (stop != NULL && *stop))
			return;
		if (left > 50000)
			left = 50000;
		ts.tv_sec = 0;
		ts.tv_nsec = (long)(left * 1000);
		nanosleep(&ts, NULL);
	}
}
