/*
 * metrics.h: cairn's metrics registry, rendered (by web/ on /metrics) in
 * the Prometheus text exposition format 0.0.4. It lives in base/ because
 * it is not HTTP: any module may count, and only the web endpoint renders.
 *
 * Every metric is declared once in base/metrics.def (name, type, label names,
 * help); there is no run-time registration. The engine updates them with
 * the functions below, passing the label VALUES in the order of the label
 * names of the table, as a NULL-terminated array (METRIC_LABELS) or NULL
 * when the metric has no labels:
 *
 *     metrics_inc(METRIC_BACKUP_ATTEMPT_TOTAL, METRIC_LABELS(schedule));
 *     metrics_observe(METRIC_BACKUP_DURATION_SECONDS, secs, METRIC_LABELS(schedule));
 *     metrics_inc(METRIC_LEASE_RENEW_FAILURES_TOTAL, NULL);
 *
 * Threading: every function may be called from any thread at any time
 * (one short mutex per metric; an update is a lookup among that metric's
 * series and an addition: no allocation after a series exists). Misuse never
 * crashes: a wrong number of label values, a negative counter increment or
 * a new series past METRICS_MAX_SERIES is dropped and logged once per metric.
 * The registry is process-wide and lives until exit; metrics_init() is
 * implied by the first call and is idempotent.
 */
#ifndef CAIRN_METRICS_H
#define CAIRN_METRICS_H

#include <stddef.h>
#include "base/buf.h"

enum metric_id {
#define METRIC(id, name, type, labels, buckets, init, help) METRIC_##id,
#include "base/metrics.def"
#undef METRIC
	METRIC__COUNT
};

#define METRICS_PREFIX		"cairn_"
#define METRICS_MAX_LABELS	4	/* label names per metric */
#define METRICS_MAX_SERIES	256	/* label sets per metric */
#define METRICS_LABEL_VALUE_MAX	256	/* longer values are cut (bytes) */
#define METRICS_CAP_RENDER	(8u << 20) /* the whole /metrics text */

/* A NULL-terminated array of label values, for the functions below. */
#define METRIC_LABELS(...) ((const char *const []){ __VA_ARGS__, NULL })

/* Add 1 to a counter or gauge. */
void metrics_inc(enum metric_id id, const char *const *labels);
/* Add v (>= 0 for counters) to a counter or gauge. */
void metrics_add(enum metric_id id, double v, const char *const *labels);
/* Set a gauge to v. */
void metrics_set(enum metric_id id, double v, const char *const *labels);
/* Record one observation v in a histogram. */
void metrics_observe(enum metric_id id, double v, const char *const *labels);

/*
 * Current value of one series of a counter or gauge (the count of a
 * histogram); 0 when the series does not exist. For tests and the status
 * document.
 */
double metrics_get(enum metric_id id, const char *const *labels);

/* Full metric name ("cairn_backup_attempt_total"); static storage. */
const char *metrics_name(enum metric_id id);

/*
 * Append the whole registry to out in text format 0.0.4 (HELP and TYPE for
 * every metric, even one without series). CAIRN_ETOOBIG if out's cap is
 * reached (out then holds a prefix).
 */
int metrics_render(struct buf *out);

/* Create the table's initial series (idempotent; implied by any call). */
void metrics_init(void);
/* Drop every series and recreate the initial ones (tests only). */
void metrics_reset(void);

#endif
