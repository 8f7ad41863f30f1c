/*
 * test_metrics.c: unit tests of base/metrics: the registry, its text
 * format, histograms and concurrent updates.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/metrics.h"
#include "tests/unit/unit.h"

/* ---- metrics ---- */

static char *
render(void)
{
	struct buf b;

	buf_init(&b, METRICS_CAP_RENDER);
	if (metrics_render(&b) < 0)
		return NULL;
	return buf_take(&b, NULL);
}

static void
test_metrics_complete_at_start(void)
{
	char *t;

	metrics_reset();
	t = render();
	REQUIRE(t != NULL);
	CHECK(strstr(t, "# HELP cairn_backup_attempt_total ") != NULL);
	CHECK(strstr(t, "# TYPE cairn_backup_attempt_total counter\n") != NULL);
	CHECK(strstr(t, "cairn_backup_attempt_total{schedule=\"\"} 0\n") != NULL);
	CHECK(strstr(t, "# TYPE cairn_backup_duration_seconds histogram\n") != NULL);
	CHECK(strstr(t, "cairn_backup_duration_seconds_bucket{schedule=\"\",le=\"+Inf\"} 0\n") != NULL);
	CHECK(strstr(t, "cairn_backup_in_progress{phase=\"Finalizing\"} 0\n") != NULL);
	CHECK(strstr(t, "cairn_lease_renew_failures_total 0\n") != NULL);
	CHECK(strstr(t, "cairn_build_info{version=\"" PACKAGE_VERSION "\"} 1\n") != NULL);
	/* Every metric of the table is declared. */
	for (int i = 0; i < METRIC__COUNT; i++) {
		char want[200];

		snprintf(want, sizeof want, "# TYPE %s ", metrics_name((enum metric_id)i));
		CHECK(strstr(t, want) != NULL);
	}
	free(t);
}

static void
test_metrics_counts_and_labels(void)
{
	char *t;

	metrics_reset();
	metrics_inc(METRIC_BACKUP_ATTEMPT_TOTAL, METRIC_LABELS("nightly"));
	metrics_inc(METRIC_BACKUP_ATTEMPT_TOTAL, METRIC_LABELS("nightly"));
	metrics_add(METRIC_BACKUP_BYTES_TOTAL, 1.5, NULL);
	metrics_set(METRIC_LEASE_HELD, 1, NULL);
	metrics_inc(METRIC_BACKUP_SUCCESS_TOTAL, METRIC_LABELS("we\"ird\\na\nme"));
	CHECK(metrics_get(METRIC_BACKUP_ATTEMPT_TOTAL, METRIC_LABELS("nightly")) == 2);
	CHECK(metrics_get(METRIC_BACKUP_ATTEMPT_TOTAL, METRIC_LABELS("none")) == 0);
	t = render();
	REQUIRE(t != NULL);
	CHECK(strstr(t, "cairn_backup_attempt_total{schedule=\"nightly\"} 2\n") != NULL);
	CHECK(strstr(t, "cairn_backup_bytes_total 1.5\n") != NULL);
	CHECK(strstr(t, "cairn_lease_held 1\n") != NULL);
	CHECK(strstr(t, "cairn_backup_success_total{schedule=\"we\\\"ird\\\\na\\nme\"} 1\n") != NULL);
	free(t);
}

static void
test_metrics_misuse_ignored(void)
{
	metrics_reset();
	/* Wrong label count, negative counter step, set on a counter. */
	metrics_inc(METRIC_BACKUP_ATTEMPT_TOTAL, NULL);
	metrics_inc(METRIC_BACKUP_ATTEMPT_TOTAL, METRIC_LABELS("a", "b"));
	metrics_add(METRIC_BACKUP_ATTEMPT_TOTAL, -1, METRIC_LABELS(""));
	metrics_set(METRIC_BACKUP_ATTEMPT_TOTAL, 5, METRIC_LABELS(""));
	metrics_observe(METRIC_BACKUP_ATTEMPT_TOTAL, 5, METRIC_LABELS(""));
	metrics_inc(METRIC__COUNT, NULL);
	CHECK(metrics_get(METRIC_BACKUP_ATTEMPT_TOTAL, METRIC_LABELS("")) == 0);
	/* Series cap. */
	for (int i = 0; i < METRICS_MAX_SERIES + 20; i++) {
		char s[32];

		snprintf(s, sizeof s, "s%d", i);
		metrics_inc(METRIC_BACKUP_FAILURE_TOTAL, METRIC_LABELS(s));
	}
	CHECK(metrics_get(METRIC_BACKUP_FAILURE_TOTAL, METRIC_LABELS("s10")) == 1);
	CHECK(metrics_get(METRIC_BACKUP_FAILURE_TOTAL,
	    METRIC_LABELS("s" "270")) == 0);
}

static void
test_metrics_histogram(void)
{
	char *t;

	metrics_reset();
	metrics_observe(METRIC_BACKUP_DURATION_SECONDS, 0.5, METRIC_LABELS("x"));
	metrics_observe(METRIC_BACKUP_DURATION_SECONDS, 12, METRIC_LABELS("x"));
	metrics_observe(METRIC_BACKUP_DURATION_SECONDS, 1e9, METRIC_LABELS("x"));
	t = render();
	REQUIRE(t != NULL);
	CHECK(strstr(t, "cairn_backup_duration_seconds_bucket{schedule=\"x\",le=\"1\"} 1\n") != NULL);
	CHECK(strstr(t, "cairn_backup_duration_seconds_bucket{schedule=\"x\",le=\"10\"} 1\n") != NULL);
	CHECK(strstr(t, "cairn_backup_duration_seconds_bucket{schedule=\"x\",le=\"15\"} 2\n") != NULL);
	CHECK(strstr(t, "cairn_backup_duration_seconds_bucket{schedule=\"x\",le=\"86400\"} 2\n") != NULL);
	CHECK(strstr(t, "cairn_backup_duration_seconds_bucket{schedule=\"x\",le=\"+Inf\"} 3\n") != NULL);
	CHECK(strstr(t, "cairn_backup_duration_seconds_count{schedule=\"x\"} 3\n") != NULL);
	CHECK(strstr(t, "cairn_backup_duration_seconds_sum{schedule=\"x\"} 1000000012.5\n") != NULL);
	CHECK(metrics_get(METRIC_BACKUP_DURATION_SECONDS, METRIC_LABELS("x")) == 3);
	free(t);
}

static void *
inc_thread(void *arg)
{
	(void)arg;
	for (int i = 0; i < 20000; i++)
		metrics_inc(METRIC_CLAIMS_TOTAL, METRIC_LABELS("backup"));
	return NULL;
}

static void
test_metrics_threads(void)
{
	pthread_t th[4];

	metrics_reset();
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, inc_thread, NULL);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	CHECK_INT(metrics_get(METRIC_CLAIMS_TOTAL, METRIC_LABELS("backup")), 80000);
}

int
main(void)
{
	RUN(test_metrics_complete_at_start);
	RUN(test_metrics_counts_and_labels);
	RUN(test_metrics_misuse_ignored);
	RUN(test_metrics_histogram);
	RUN(test_metrics_threads);
	return unit_done();
}
