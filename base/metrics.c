/*
 * metrics.c: the process-wide metrics registry behind /metrics.
 *
 * The table in metrics.def is compiled into defs[]; each metric has one
 * run-time slot in reg[] with its own mutex and a small array of series
 * (one per label-value set), created on first use and never removed, so a
 * series' address inside the array is only stable under the mutex. The hot
 * path (metrics_inc from a worker) is: lock, linear search among at most
 * METRICS_MAX_SERIES series comparing a few short strings, add, unlock.
 * Label sets are bounded by what the engine passes (schedule names, phases,
 * kinds); METRICS_MAX_SERIES is the guard against a runaway label.
 *
 * Rendering walks the table in order and takes each metric's mutex while
 * it writes that metric's lines, so one metric's series are consistent with
 * each other (a histogram's buckets, sum and count agree), and a slow
 * scraper never holds more than one metric at a time.
 */
#include "config.h"
#include "base/metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"

enum mtype { MT_COUNTER, MT_GAUGE, MT_HISTOGRAM };
enum mbuckets { MB_NONE, MB_DURATION };

struct mdef {
	const char *name;	/* full name, prefix included */
	enum mtype type;
	const char *labels;	/* "a,b" or "" */
	enum mbuckets buckets;
	const char *init;	/* initial series, see metrics.def, or NULL */
	const char *help;
};

static const struct mdef defs[METRIC__COUNT] = {
#define METRIC(id, name, type, labels, buckets, init, help) \
	{ METRICS_PREFIX name, MT_##type, labels, MB_##buckets, init, help },
#include "base/metrics.def"
#undef METRIC
};

/* Upper bounds of the duration histograms, in seconds (+Inf is implied). */
static const double buckets_duration[] = {
	1, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800,
	14400, 28800, 86400
};
#define NBUCKETS_DURATION (sizeof buckets_duration / sizeof buckets_duration[0])

struct series {
	char *values[METRICS_MAX_LABELS];	/* owned label values */
	double value;		/* counter or gauge value; histogram sum */
	uint64_t count;		/* histogram: observations */
	uint64_t *bucket;	/* histogram: per-bucket (not cumulative) counts */
};

struct metric {
	pthread_mutex_t mu;
	char **label_names;	/* owned, NULL-terminated */
	int nlabels;
	const double *bounds;	/* histogram bucket bounds or NULL */
	size_t nbounds;
	struct series *series;	/* owned array */
	size_t nseries;
	size_t alloc;
	int warned;		/* misuse already logged once */
};

static struct metric reg[METRIC__COUNT];
static pthread_once_t reg_once = PTHREAD_ONCE_INIT;

static void metrics_create_initial(enum metric_id id);
static void metrics_set_process(void);
static int64_t process_start_us;

static void
metrics_once(void)
{
	for (int i = 0; i < METRIC__COUNT; i++) {
		struct metric *m = &reg[i];

		pthread_mutex_init(&m->mu, NULL);
		m->label_names = str_split(defs[i].labels, ',', NULL);
		m->nlabels = (int)strv_len(m->label_names);
		if (m->nlabels > METRICS_MAX_LABELS)
			abort();	/* a bug in metrics.def */
		if (defs[i].type == MT_HISTOGRAM) {
			m->bounds = buckets_duration;
			m->nbounds = NBUCKETS_DURATION;
		}
		metrics_create_initial((enum metric_id)i);
	}
	process_start_us = time_now_us();
	metrics_set_process();
}

void
metrics_init(void)
{
	pthread_once(&reg_once, metrics_once);
}

/* Count label values; -1 when more than METRICS_MAX_LABELS. */
static int
count_labels(const char *const *labels)
{
	int n = 0;

	if (labels == NULL)
		return 0;
	while (labels[n] != NULL) {
		if (++n > METRICS_MAX_LABELS)
			return -1;
	}
	return n;
}

/* Length of s cut to METRICS_LABEL_VALUE_MAX at a UTF-8 boundary. */
static size_t
value_len(const char *s)
{
	size_t n = strlen(s);

	if (n <= METRICS_LABEL_VALUE_MAX)
		return n;
	n = METRICS_LABEL_VALUE_MAX;
	while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
		n--;
	return n;
}

static int
series_matches(const struct metric *m, const struct series *s,
    const char *const *labels)
{
	for (int i = 0; i < m->nlabels; i++) {
		size_t n = value_len(labels[i]);

		if (strlen(s->values[i]) != n ||
		    memcmp(s->values[i], labels[i], n) != 0)
			return 0;
	}
	return 1;
}

/*
 * Find or create the series for labels; mutex held. NULL (logged once) when
 * the label count is wrong or the metric has METRICS_MAX_SERIES series.
 */
static struct series *
series_get(enum metric_id id, const char *const *labels, int create)
{
	struct metric *m = &reg[id];
	struct series *s;

	if (count_labels(labels) != m->nlabels) {
		if (!m->warned)
			log_warn("%s: wrong number of label values (want %d)",
			    defs[id].name, m->nlabels);
		m->warned = 1;
		return NULL;
	}
	for (size_t i = 0; i < m->nseries; i++) {
		if (series_matches(m, &m->series[i], labels))
			return &m->series[i];
	}
	if (!create)
		return NULL;
	if (m->nseries >= METRICS_MAX_SERIES) {
		if (!m->warned)
			log_warn("%s: more than %d label sets, new ones dropped",
			    defs[id].name, METRICS_MAX_SERIES);
		m->warned = 1;
		return NULL;
	}
	if (m->nseries == m->alloc) {
		m->alloc = m->alloc ? m->alloc * 2 : 4;
		m->series = xreallocarray(m->series, m->alloc, sizeof *m->series);
	}
	s = &m->series[m->nseries++];
	memset(s, 0, sizeof *s);
	for (int i = 0; i < m->nlabels; i++)
		s->values[i] = xstrndup(labels[i], value_len(labels[i]));
	if (m->bounds != NULL)
		s->bucket = xcalloc(m->nbounds, sizeof *s->bucket);
	return s;
}

/* Series listed in the table's init column (or the only one), at zero. */
static void
metrics_create_initial(enum metric_id id)
{
	struct metric *m = &reg[id];
	const char *init = defs[id].init;
	const char *p, *end;

	if (m->nlabels == 0) {
		/* The one series of a metric without labels starts at 0. */
		pthread_mutex_lock(&m->mu);
		(void)series_get(id, NULL, 1);
		pthread_mutex_unlock(&m->mu);
		return;
	}
	if (init == NULL)
		return;
	pthread_mutex_lock(&m->mu);
	for (p = init; ; p = end + 1) {
		const char *vals[METRICS_MAX_LABELS + 1] = { NULL };
		char *one, **parts = NULL;
		int n = 0;

		end = strchr(p, ';');
		if (end == NULL)
			end = p + strlen(p);
		one = xstrndup(p, (size_t)(end - p));
		/* str_split drops empty fields: one empty value is "". */
		if (m->nlabels == 1) {
			vals[n++] = one;
		} else {
			parts = str_split(one, ',', NULL);
			for (; parts[n] != NULL && n < METRICS_MAX_LABELS; n++)
				vals[n] = parts[n];
		}
		vals[n] = NULL;
		(void)series_get(id, vals, 1);
		strv_free(parts);
		free(one);
		if (*end == '\0')
			break;
	}
	pthread_mutex_unlock(&m->mu);
}

/* The process's own series (build info, start time); registry ready. */
static void
metrics_set_process(void)
{
	static const char *const version[] = { PACKAGE_VERSION, NULL };
	struct series *s;

	pthread_mutex_lock(&reg[METRIC_BUILD_INFO].mu);
	s = series_get(METRIC_BUILD_INFO, version, 1);
	if (s != NULL)
		s->value = 1;
	pthread_mutex_unlock(&reg[METRIC_BUILD_INFO].mu);
	pthread_mutex_lock(&reg[METRIC_START_TIME_SECONDS].mu);
	s = series_get(METRIC_START_TIME_SECONDS, NULL, 1);
	if (s != NULL)
		s->value = (double)(process_start_us / TIME_US_PER_SEC);
	pthread_mutex_unlock(&reg[METRIC_START_TIME_SECONDS].mu);
}

static void
update(enum metric_id id, double v, const char *const *labels, int how)
{
	struct metric *m;
	struct series *s;

	if ((int)id < 0 || id >= METRIC__COUNT)
		return;
	metrics_init();
	m = &reg[id];
	pthread_mutex_lock(&m->mu);
	if ((how == 'a' && defs[id].type == MT_COUNTER && !(v >= 0)) ||
	    (how == 's' && defs[id].type != MT_GAUGE) ||
	    (how == 'o' && defs[id].type != MT_HISTOGRAM) ||
	    (how != 'o' && defs[id].type == MT_HISTOGRAM) || isnan(v)) {
		if (!m->warned)
			log_warn("%s: invalid update ignored", defs[id].name);
		m->warned = 1;
		goto out;
	}
	s = series_get(id, labels, 1);
	if (s == NULL)
		goto out;
	switch (how) {
	case 'a':
		s->value += v;
		break;
	case 's':
		s->value = v;
		break;
	case 'o':
		s->value += v;
		s->count++;
		for (size_t i = 0; i < m->nbounds; i++) {
			if (v <= m->bounds[i]) {
				s->bucket[i]++;
				break;
			}
		}
		break;
	}
out:
	pthread_mutex_unlock(&m->mu);
}

void
metrics_inc(enum metric_id id, const char *const *labels)
{
	update(id, 1.0, labels, 'a');
}

void
metrics_add(enum metric_id id, double v, const char *const *labels)
{
	update(id, v, labels, 'a');
}

void
metrics_set(enum metric_id id, double v, const char *const *labels)
{
	update(id, v, labels, 's');
}

void
metrics_observe(enum metric_id id, double v, const char *const *labels)
{
	update(id, v, labels, 'o');
}

double
metrics_get(enum metric_id id, const char *const *labels)
{
	struct metric *m;
	struct series *s;
	double v = 0;

	if ((int)id < 0 || id >= METRIC__COUNT)
		return 0;
	metrics_init();
	m = &reg[id];
	pthread_mutex_lock(&m->mu);
	s = series_get(id, labels, 0);
	if (s != NULL)
		v = defs[id].type == MT_HISTOGRAM ? (double)s->count : s->value;
	pthread_mutex_unlock(&m->mu);
	return v;
}

const char *
metrics_name(enum metric_id id)
{
	if ((int)id < 0 || id >= METRIC__COUNT)
		return "";
	return defs[id].name;
}

/* A sample value as Prometheus writes it: integers without a fraction. */
static int
put_number(struct buf *out, double v)
{
	if (isnan(v))
		return buf_puts(out, "NaN");
	if (isinf(v))
		return buf_puts(out, v > 0 ? "+Inf" : "-Inf");
	if (v == floor(v) && fabs(v) < 1e15)
		return buf_printf(out, "%.0f", v);
	return buf_printf(out, "%.17g", v);
}

/* HELP text: backslash and newline escaped. */
static int
put_help(struct buf *out, const char *s)
{
	int rc = 0;

	for (; *s != '\0' && rc == 0; s++) {
		if (*s == '\\')
			rc = buf_puts(out, "\\\\");
		else if (*s == '\n')
			rc = buf_puts(out, "\\n");
		else
			rc = buf_putc(out, *s);
	}
	return rc;
}

/* Label value: backslash, double quote and newline escaped. */
static int
put_label_value(struct buf *out, const char *s)
{
	int rc = 0;

	for (; *s != '\0' && rc == 0; s++) {
		if (*s == '\\')
			rc = buf_puts(out, "\\\\");
		else if (*s == '"')
			rc = buf_puts(out, "\\\"");
		else if (*s == '\n')
			rc = buf_puts(out, "\\n");
		else
			rc = buf_putc(out, *s);
	}
	return rc;
}

/* "{a="x",b="y"" plus le when given, then "}"; nothing without labels. */
static int
put_labels(struct buf *out, const struct metric *m, const struct series *s,
    const char *le)
{
	int rc = 0;

	if (m->nlabels == 0 && le == NULL)
		return 0;
	rc = buf_putc(out, '{');
	for (int i = 0; i < m->nlabels && rc == 0; i++) {
		rc = buf_printf(out, "%s%s=\"", i ? "," : "", m->label_names[i]);
		if (rc == 0)
			rc = put_label_value(out, s->values[i]);
		if (rc == 0)
			rc = buf_putc(out, '"');
	}
	if (rc == 0 && le != NULL)
		rc = buf_printf(out, "%sle=\"%s\"", m->nlabels ? "," : "", le);
	if (rc == 0)
		rc = buf_putc(out, '}');
	return rc;
}

static int
render_one(struct buf *out, enum metric_id id)
{
	static const char *const type_names[] = { "counter", "gauge", "histogram" };
	const struct mdef *d = &defs[id];
	struct metric *m = &reg[id];
	int rc;

	rc = buf_printf(out, "# HELP %s ", d->name);
	if (rc == 0)
		rc = put_help(out, d->help);
	if (rc == 0)
		rc = buf_printf(out, "\n# TYPE %s %s\n", d->name, type_names[d->type]);
	for (size_t i = 0; i < m->nseries && rc == 0; i++) {
		const struct series *s = &m->series[i];

		if (d->type != MT_HISTOGRAM) {
			rc = buf_puts(out, d->name);
			if (rc == 0)
				rc = put_labels(out, m, s, NULL);
			if (rc == 0)
				rc = buf_putc(out, ' ');
			if (rc == 0)
				rc = put_number(out, s->value);
			if (rc == 0)
				rc = buf_putc(out, '\n');
			continue;
		}
		uint64_t cum = 0;
		for (size_t b = 0; b <= m->nbounds && rc == 0; b++) {
			char le[64];

			if (b < m->nbounds) {
				struct buf t;

				cum += s->bucket[b];
				buf_init(&t, sizeof le - 1);
				(void)put_number(&t, m->bounds[b]);
				snprintf(le, sizeof le, "%s", buf_cstr(&t));
				buf_free(&t);
			} else {
				cum = s->count;
				snprintf(le, sizeof le, "+Inf");
			}
			rc = buf_printf(out, "%s_bucket", d->name);
			if (rc == 0)
				rc = put_labels(out, m, s, le);
			if (rc == 0)
				rc = buf_printf(out, " %llu\n", (unsigned long long)cum);
		}
		if (rc == 0)
			rc = buf_printf(out, "%s_sum", d->name);
		if (rc == 0)
			rc = put_labels(out, m, s, NULL);
		if (rc == 0)
			rc = buf_putc(out, ' ');
		if (rc == 0)
			rc = put_number(out, s->value);
		if (rc == 0)
			rc = buf_printf(out, "\n%s_count", d->name);
		if (rc == 0)
			rc = put_labels(out, m, s, NULL);
		if (rc == 0)
			rc = buf_printf(out, " %llu\n", (unsigned long long)s->count);
	}
	return rc;
}

int
metrics_render(struct buf *out)
{
	int rc = 0;

	metrics_init();
	for (int i = 0; i < METRIC__COUNT && rc == 0; i++) {
		pthread_mutex_lock(&reg[i].mu);
		rc = render_one(out, (enum metric_id)i);
		pthread_mutex_unlock(&reg[i].mu);
	}
	return rc;
}

void
metrics_reset(void)
{
	metrics_init();
	for (int i = 0; i < METRIC__COUNT; i++) {
		struct metric *m = &reg[i];

		pthread_mutex_lock(&m->mu);
		for (size_t j = 0; j < m->nseries; j++) {
			for (int k = 0; k < m->nlabels; k++)
				free(m->series[j].values[k]);
			free(m->series[j].bucket);
		}
		m->nseries = 0;
		m->warned = 0;
		pthread_mutex_unlock(&m->mu);
		metrics_create_initial((enum metric_id)i);
	}
	metrics_set_process();
}
