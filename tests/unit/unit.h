/*
 * unit.h: the tiny unit-test frame of cairn's C tests.
 *
 *   static void test_buf_cap(void) { CHECK(buf_append(...) == CAIRN_ETOOBIG); }
 *   int main(void) { RUN(test_buf_cap); return unit_done(); }
 *
 * Each RUN prints "PASS: <file>:<test>" or "FAIL: <file>:<test>: <where>"
 * (the lines tests/run.sh counts). XRUN(fn, "#N: the bug") runs a test that
 * fails because of a known bug an issue will fix: it prints
 * "XFAIL: <file>:<test>: <reason>" when it fails (not a failure) and
 * "XPASS: <file>:<test>: <reason>" when it passes (a failure: take the
 * marker off). A failed CHECK records the first failure
 * and the test goes on; REQUIRE returns from the test at once.
 * UNIT_TMPDIR() gives the private temp directory the runner made
 * ($CAIRN_TMP, else /tmp).
 */
#ifndef CAIRN_UNIT_H
#define CAIRN_UNIT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int unit_failed_total;
static int unit_cur_failed;
static char unit_cur_why[512];

#define UNIT_FAIL_AT(what) do {						\
	if (!unit_cur_failed)						\
		snprintf(unit_cur_why, sizeof unit_cur_why,		\
		    "%s:%d: %s", __FILE__, __LINE__, what);		\
	unit_cur_failed = 1;						\
} while (0)

#define CHECK(cond) do { if (!(cond)) UNIT_FAIL_AT("CHECK(" #cond ")"); } while (0)
#define REQUIRE(cond) do {						\
	if (!(cond)) { UNIT_FAIL_AT("REQUIRE(" #cond ")"); return; }	\
} while (0)
#define CHECK_STR(a, b) do {						\
	const char *ua_ = (a), *ub_ = (b);				\
	if (ua_ == NULL || ub_ == NULL || strcmp(ua_, ub_) != 0) {	\
		char w_[400];						\
		snprintf(w_, sizeof w_, "%s == \"%.150s\", want \"%.150s\"", \
		    #a, ua_ ? ua_ : "(null)", ub_ ? ub_ : "(null)");	\
		UNIT_FAIL_AT(w_);					\
	}								\
} while (0)
#define CHECK_INT(a, b) do {						\
	long long ua_ = (long long)(a), ub_ = (long long)(b);		\
	if (ua_ != ub_) {						\
		char w_[300];						\
		snprintf(w_, sizeof w_, "%s == %lld, want %lld", #a, ua_, ub_); \
		UNIT_FAIL_AT(w_);					\
	}								\
} while (0)

#define RUN(fn) do {							\
	unit_cur_failed = 0;						\
	unit_cur_why[0] = '\0';						\
	fn();								\
	if (unit_cur_failed) {						\
		unit_failed_total++;					\
		printf("FAIL: %s:%s: %s\n", unit_name(__FILE__), #fn,	\
		    unit_cur_why);					\
	} else {							\
		printf("PASS: %s:%s\n", unit_name(__FILE__), #fn);	\
	}								\
	fflush(stdout);							\
} while (0)

#define XRUN(fn, reason) do {						\
	unit_cur_failed = 0;						\
	unit_cur_why[0] = '\0';						\
	fn();								\
	if (unit_cur_failed) {						\
		printf("expected failure of %s:%s: %s\n",		\
		    unit_name(__FILE__), #fn, unit_cur_why);		\
		printf("XFAIL: %s:%s: %s\n", unit_name(__FILE__), #fn,	\
		    reason);						\
	} else {							\
		unit_failed_total++;					\
		printf("XPASS: %s:%s: %s\n", unit_name(__FILE__), #fn,	\
		    reason);						\
	}								\
	fflush(stdout);							\
} while (0)

static inline const char *
unit_name(const char *file)
{
	const char *s = strrchr(file, '/');

	return s ? s + 1 : file;
}

static inline const char *
UNIT_TMPDIR(void)
{
	const char *t = getenv("CAIRN_TMP");

	return t && *t ? t : "/tmp";
}

static inline int
unit_done(void)
{
	return unit_failed_total ? 1 : 0;
}

#endif
