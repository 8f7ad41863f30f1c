/*
 * test_cron.c: cron expressions (five fields and descriptors), next-fire
 * and latest-due computation in UTC, and the messages of bad expressions.
 * Expected times were worked out by hand from a calendar (2026-12-02 is a
 * Wednesday; 2028 is a leap year).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "base/timeutil.h"
#include "engine/cron.h"
#include "tests/unit/unit.h"

static int64_t
T(const char *s)
{
	int64_t us = -2;

	if (time_parse(s, &us) < 0)
		abort();
	return us;
}

/* Next fire after `after` as RFC 3339, "none" or "parse error: ...". */
static const char *
next_of(const char *expr, const char *after)
{
	static char out[CAIRN_ERR_MSG_MAX + 20];
	struct cairn_err err = CAIRN_ERR_INIT;
	struct cron *c;
	int64_t n;

	if (cron_parse(expr, &c, &err) < 0) {
		snprintf(out, sizeof out, "parse error: %s", err.msg);
		return out;
	}
	n = cron_next(c, T(after));
	cron_free(c);
	if (n < 0)
		return "none";
	time_format_rfc3339(n, out);
	return out;
}

static void
test_cron_fields(void)
{
	CHECK_STR(next_of("*/5 * * * *", "2026-12-02T12:03:10Z"),
	    "2026-12-02T12:05:00Z");
	CHECK_STR(next_of("*/5 * * * *", "2026-12-02T12:05:00Z"),
	    "2026-12-02T12:10:00Z");	/* strictly after */
	CHECK_STR(next_of("* * * * *", "2026-12-02T12:05:59.9Z"),
	    "2026-12-02T12:06:00Z");
	CHECK_STR(next_of("30 2 * * *", "2026-12-02T12:00:00Z"),
	    "2026-12-03T02:30:00Z");
	CHECK_STR(next_of("0 0 1 1 *", "2026-12-02T00:00:00Z"),
	    "2027-01-01T00:00:00Z");
	CHECK_STR(next_of("15 10-12/2 * * *", "2026-12-02T10:20:00Z"),
	    "2026-12-02T12:15:00Z");
	CHECK_STR(next_of("0 9 * * MON-FRI", "2026-12-04T10:00:00Z"),
	    "2026-12-07T09:00:00Z");	/* Friday after 9 -> Monday */
	CHECK_STR(next_of("0 0 * * 7", "2026-12-02T00:00:00Z"),
	    "2026-12-06T00:00:00Z");	/* 7 is Sunday */
	CHECK_STR(next_of("0 0 * jan,Jul *", "2026-12-02T00:00:00Z"),
	    "2027-01-01T00:00:00Z");
	CHECK_STR(next_of("0 0 29 2 *", "2026-12-02T00:00:00Z"),
	    "2028-02-29T00:00:00Z");
	CHECK_STR(next_of("0 0 31 * *", "2026-12-31T00:00:00Z"),
	    "2027-01-31T00:00:00Z");
	CHECK_STR(next_of("0 0 30 2 *", "2026-12-02T00:00:00Z"), "none");
	/* Both day fields restricted: either matches (cron's OR). */
	CHECK_STR(next_of("0 0 13 * 5", "2026-12-02T00:00:00Z"),
	    "2026-12-04T00:00:00Z");	/* Friday the 4th before the 13th */
	/* One restricted, one `*`: AND (the `*` matches everything). */
	CHECK_STR(next_of("0 0 13 * *", "2026-12-02T00:00:00Z"),
	    "2026-12-13T00:00:00Z");
	CHECK_STR(next_of("0 0 ? * 3", "2026-12-02T00:00:00Z"),
	    "2026-12-09T00:00:00Z");
	CHECK_STR(next_of("5/20 * * * *", "2026-12-02T12:46:00Z"),
	    "2026-12-02T13:05:00Z");
	CHECK_STR(next_of("1,2,58 23 31 12 *", "2026-12-31T23:03:00Z"),
	    "2026-12-31T23:58:00Z");
	CHECK_STR(next_of("59 23 31 12 *", "2026-12-31T23:59:00Z"),
	    "2027-12-31T23:59:00Z");
}

static void
test_cron_descriptors(void)
{
	CHECK_STR(next_of("@hourly", "2026-12-02T12:00:00Z"),
	    "2026-12-02T13:00:00Z");
	CHECK_STR(next_of("@daily", "2026-12-02T12:00:00Z"),
	    "2026-12-03T00:00:00Z");
	CHECK_STR(next_of("@midnight", "2026-12-02T12:00:00Z"),
	    "2026-12-03T00:00:00Z");
	CHECK_STR(next_of("@weekly", "2026-12-02T12:00:00Z"),
	    "2026-12-06T00:00:00Z");
	CHECK_STR(next_of("@monthly", "2026-12-02T12:00:00Z"),
	    "2027-01-01T00:00:00Z");
	CHECK_STR(next_of("@yearly", "2026-12-02T12:00:00Z"),
	    "2027-01-01T00:00:00Z");
	CHECK_STR(next_of("@annually", "2026-12-02T12:00:00Z"),
	    "2027-01-01T00:00:00Z");
	/* @every: whole seconds after the (truncated) start, as robfig/cron. */
	CHECK_STR(next_of("@every 2s", "2026-12-02T12:00:00.7Z"),
	    "2026-12-02T12:00:02Z");
	CHECK_STR(next_of("@every 1h30m", "2026-12-02T12:00:00Z"),
	    "2026-12-02T13:30:00Z");
	CHECK_STR(next_of("@every 2.5s", "2026-12-02T12:00:00Z"),
	    "2026-12-02T12:00:02Z");
}

static void
test_cron_latest(void)
{
	struct cron *c;

	REQUIRE(cron_parse("*/5 * * * *", &c, NULL) == 0);
	CHECK_INT(cron_latest(c, T("2026-12-02T12:00:00Z"),
	    T("2026-12-02T12:04:59Z")), -1);
	CHECK_INT(cron_latest(c, T("2026-12-02T12:00:00Z"),
	    T("2026-12-02T12:05:00Z")), T("2026-12-02T12:05:00Z"));
	CHECK_INT(cron_latest(c, T("2026-12-02T12:00:00Z"),
	    T("2026-12-02T12:17:30Z")), T("2026-12-02T12:15:00Z"));
	/* A server down for a year gets the latest due time only. */
	CHECK_INT(cron_latest(c, T("2025-12-02T12:00:00Z"),
	    T("2026-12-02T12:17:30Z")), T("2026-12-02T12:15:00Z"));
	cron_free(c);

	REQUIRE(cron_parse("@yearly", &c, NULL) == 0);
	CHECK_INT(cron_latest(c, T("2020-06-01T00:00:00Z"),
	    T("2026-12-02T12:00:00Z")), T("2026-01-01T00:00:00Z"));
	cron_free(c);

	REQUIRE(cron_parse("@every 2s", &c, NULL) == 0);
	CHECK_INT(cron_interval(c), 2 * TIME_US_PER_SEC);
	CHECK_INT(cron_latest(c, T("2026-12-02T12:00:00Z"),
	    T("2026-12-02T12:00:01Z")), -1);
	CHECK_INT(cron_latest(c, T("2026-12-02T12:00:00Z"),
	    T("2026-12-02T12:00:07.5Z")), T("2026-12-02T12:00:06Z"));
	CHECK_INT(cron_latest(c, T("2016-12-02T12:00:00Z"),
	    T("2026-12-02T12:00:07.5Z")), T("2026-12-02T12:00:06Z"));
	cron_free(c);
}

static void
test_cron_errors(void)
{
	CHECK(strstr(next_of("", "2026-12-02T00:00:00Z"), "empty") != NULL);
	CHECK(strstr(next_of("* * * *", "2026-12-02T00:00:00Z"),
	    "expected 5 fields") != NULL);
	CHECK(strstr(next_of("* * * * * *", "2026-12-02T00:00:00Z"),
	    "found more") != NULL);
	CHECK(strstr(next_of("60 * * * *", "2026-12-02T00:00:00Z"),
	    "60 is out of range 0-59 in the minute field") != NULL);
	CHECK(strstr(next_of("* 24 * * *", "2026-12-02T00:00:00Z"),
	    "hour") != NULL);
	CHECK(strstr(next_of("* * 0 * *", "2026-12-02T00:00:00Z"),
	    "day of month") != NULL);
	CHECK(strstr(next_of("* * * foo *", "2026-12-02T00:00:00Z"),
	    "\"foo\" is not a value of the month field") != NULL);
	CHECK(strstr(next_of("* * * * 8", "2026-12-02T00:00:00Z"),
	    "day of week") != NULL);
	CHECK(strstr(next_of("5-1 * * * *", "2026-12-02T00:00:00Z"),
	    "backwards") != NULL);
	CHECK(strstr(next_of("*/0 * * * *", "2026-12-02T00:00:00Z"),
	    "step") != NULL);
	CHECK(strstr(next_of("1,,2 * * * *", "2026-12-02T00:00:00Z"),
	    "empty value") != NULL);
	CHECK(strstr(next_of("@every", "2026-12-02T00:00:00Z"),
	    "unknown descriptor") != NULL);
	CHECK(strstr(next_of("@every 500ms", "2026-12-02T00:00:00Z"),
	    "at least 1s") != NULL);
	CHECK(strstr(next_of("@every soon", "2026-12-02T00:00:00Z"),
	    "not a duration") != NULL);
	CHECK(strstr(next_of("@fortnightly", "2026-12-02T00:00:00Z"),
	    "unknown descriptor") != NULL);
	CHECK(strstr(next_of("CRON_TZ=Europe/Paris 0 0 * * *",
	    "2026-12-02T00:00:00Z"), "UTC") != NULL);
	CHECK(strstr(next_of("*/99999999999 * * * *", "2026-12-02T00:00:00Z"),
	    "step") != NULL);
}

int
main(void)
{
	RUN(test_cron_fields);
	RUN(test_cron_descriptors);
	RUN(test_cron_latest);
	RUN(test_cron_errors);
	return unit_done();
}
