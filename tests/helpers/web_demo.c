/*
 * web_demo.c: the web endpoint with a fake server behind it, for the web
 * tests and benchmark before (and besides) the real `cairn server`.
 *
 *   web_demo [--listen ADDR:PORT] [--port-file F] [--token-file F]
 *            [--not-ready-file F] [--unhealthy-file F] [--tick-ms N]
 *            [--status-interval-ms N] [--threads N] [--max-connections N]
 *            [--idle-timeout N] [--work-mb N --work-report F]
 *
 * The fake state: one running backup whose items and bytes grow every tick
 * (held by "demo-1", worker "demo-1/0", attempt 2), a running restore, a
 * volume operation, waiting items, three servers seen through Leases and a
 * few recent results. A label value and the error messages contain
 * <script> and other markup, for the escaping tests.
 *
 * Readiness: not ready while --not-ready-file exists (its first line is the
 * reason); unhealthy while --unhealthy-file exists.
 * SIGUSR1 records one successful, one failed and one validation-failed
 * backup of schedule "nightly" in the metrics and the recent results, as
 * the engine will. SIGTERM / SIGINT stop it. The bound port is written to
 * --port-file (atomically) once it serves.
 *
 * --work-mb N gives the benchmark a real backup-like load inside this
 * process: a thread generates N MiB of Kubernetes-like JSON items and
 * gzip-compresses them (zlib, level 6) as a backup does, its progress shown
 * as the running backup, then writes the seconds it took to --work-report
 * (the backup's duration, with or without load on the web endpoint).
 */
#include "config.h"

#include <stdatomic.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>
#include <sys/stat.h>
#include <zlib.h>

#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/metrics.h"
#include "engine/status_doc.h"
#include "web/web.h"

#define DEMO_TOTAL_ITEMS	4000
#define DEMO_ITEMS_PER_TICK	13
#define DEMO_BYTES_PER_ITEM	(37 * 1024)
#define DEMO_MAX_RECENT		12
#define SCRIPT_LABEL		"<script>window.__pwned=1</script>"
#define SCRIPT_ERROR \
	"upload failed: <img src=x onerror=\"window.__pwned=2\"><script>window.__pwned=3</script> & more"

struct recent {
	char *name;
	const char *phase;
	int64_t completed_us;
	double duration_s;
	long items, total, bytes, errors;
	char *message;		/* NULL: none */
};

static struct {
	pthread_mutex_t mu;
	int64_t started_us;
	int64_t backup_started_us;
	int run;		/* number of the running backup */
	int attempt;
	long items;
	long items_at_start;	/* done by the previous attempt */
	long bytes;
	int64_t volume_started_us;
	long restore_items;
	long volume_bytes;
	struct recent recent[DEMO_MAX_RECENT];
	int nrecent;
	int outcomes;		/* SIGUSR1 rounds handled */
	const char *not_ready_file;
	const char *unhealthy_file;
} demo = { .mu = PTHREAD_MUTEX_INITIALIZER };

static long work_mb;
static const char *work_report;

static atomic_int stop_flag;
static atomic_int usr1_count;

static void
on_signal(int sig)
{
	if (sig == SIGUSR1)
		usr1_count++;
	else
		stop_flag = 1;
}

/* Newest first; the oldest entry falls off. Mutex held. */
static void
recent_push(const char *name, const char *phase, double dur, long items,
    long total, long bytes, long errors, const char *message)
{
	struct recent *r;

	if (demo.nrecent == DEMO_MAX_RECENT) {
		r = &demo.recent[DEMO_MAX_RECENT - 1];
		free(r->name);
		free(r->message);
		demo.nrecent--;
	}
	memmove(&demo.recent[1], &demo.recent[0],
	    (size_t)demo.nrecent * sizeof demo.recent[0]);
	r = &demo.recent[0];
	r->name = xstrdup(name);
	r->phase = phase;
	r->completed_us = time_now_us();
	r->duration_s = dur;
	r->items = items;
	r->total = total;
	r->bytes = bytes;
	r->errors = errors;
	r->message = xstrdup(message);
	demo.nrecent++;
}

/* What the engine's status() will build from its own state. */
static cJSON *
demo_status(void *arg)
{
	static const char *const no_messages[] = { NULL };
	int64_t now = time_now_us();
	cJSON *doc, *labels, *rlabels;
	char name[64], owner[64];
	struct status_server_info si = {
		.id = "demo-1", .namespace = "cairn-system",
		.started_us = demo.started_us, .workers = 2,
		.lease_name = "cairn-demo-1", .lease_state = "held",
		.lease_renewed_us = now - 1500000,
		.lease_duration_us = 15 * TIME_US_PER_SEC,
	};
	struct status_peer peers[] = {
		{ "demo-1", "cairn-demo-1", now - 1500000, 15 * TIME_US_PER_SEC, 0, 1, 3,
		  1500000 },
		{ "demo-2", "cairn-demo-2", now - 4000000, 15 * TIME_US_PER_SEC, 0, 0, 0,
		  4000000 },
		{ "demo-old", "cairn-demo-old", demo.started_us - 3600 * TIME_US_PER_SEC,
		  15 * TIME_US_PER_SEC, 1, 0, 0, 3600 * TIME_US_PER_SEC },
	};
	struct status_op op;
	struct status_volume_op vol;
	struct status_waiting wait = { STATUS_BACKUP, "hourly-20261202-1300", "cairn-system",
		now - 42 * TIME_US_PER_SEC, "all 2 workers busy" };

	(void)arg;
	labels = cJSON_CreateObject();
	cJSON_AddStringToObject(labels, "app", "shop");
	cJSON_AddStringToObject(labels, "note", SCRIPT_LABEL);
	rlabels = cJSON_CreateObject();
	cJSON_AddStringToObject(rlabels, "note", SCRIPT_LABEL);

	pthread_mutex_lock(&demo.mu);
	doc = status_doc_new(&si, now);
	for (size_t i = 0; i < sizeof peers / sizeof peers[0]; i++)
		status_doc_add_server(doc, &peers[i]);

	/* The running backup, resumed (attempt 2) with 250 items done before. */
	snprintf(name, sizeof name, "nightly-20261202-%03d", demo.run);
	memset(&op, 0, sizeof op);
	op.name = name;
	op.namespace = "cairn-system";
	op.phase = "InProgress";
	op.holder = "demo-1";
	op.worker = "demo-1/0";
	op.attempt = demo.attempt;
	op.claimed_us = op.started_us = demo.backup_started_us;
	op.storage_location = "default";
	op.schedule = "nightly";
	op.labels = labels;
	op.warnings = 1;
	op.progress.total_items = DEMO_TOTAL_ITEMS;
	op.progress.items_done = demo.items;
	op.progress.bytes_done = demo.bytes;
	op.progress.total_bytes = STATUS_UNKNOWN;
	op.progress.since_us = demo.backup_started_us;
	op.progress.items_at_since = demo.items_at_start;
	op.progress.bytes_at_since = demo.items_at_start * DEMO_BYTES_PER_ITEM;
	op.local = 1;
	status_doc_add_op(doc, STATUS_BACKUP, &op, now);

	/* A running restore whose total is not known yet. */
	memset(&op, 0, sizeof op);
	op.name = "restore-shop";
	op.phase = "InProgress";
	op.holder = "demo-1";
	op.worker = "demo-1/1";
	op.attempt = 1;
	op.claimed_us = op.started_us = demo.started_us + 3700 * TIME_US_PER_SEC;
	op.backup = "nightly-20261201-000";
	op.progress.total_items = STATUS_UNKNOWN;
	op.progress.items_done = demo.restore_items;
	op.progress.bytes_done = demo.restore_items * 2048;
	op.progress.total_bytes = STATUS_UNKNOWN;
	op.progress.since_us = STATUS_UNKNOWN;
	status_doc_add_op(doc, STATUS_RESTORE, &op, now);

	snprintf(owner, sizeof owner, "nightly-20261202-%03d", demo.run);
	memset(&vol, 0, sizeof vol);
	vol.kind = STATUS_BACKUP;
	vol.name = "vpb-shop-data";
	vol.owner = owner;
	vol.volume = "shop-data";
	vol.plugin = "cairn.io/hostpath";
	vol.phase = "InProgress";
	vol.holder = "demo-1";
	vol.attempt = 1;
	vol.bytes_done = demo.volume_bytes;
	vol.total_bytes = 2048LL * 1024 * 1024;
	vol.since_us = demo.volume_started_us;
	vol.started_us = demo.volume_started_us;
	status_doc_add_volume(doc, &vol, now);
	/* A volume copy that finished, with its final size. */
	memset(&vol, 0, sizeof vol);
	vol.kind = STATUS_BACKUP;
	vol.name = "vpb-shop-logs";
	vol.owner = "nightly-20261201-000";
	vol.volume = "shop-logs";
	vol.plugin = "cairn.io/hostpath";
	vol.phase = "Completed";
	vol.holder = "demo-2";
	vol.attempt = 1;
	vol.bytes_done = vol.total_bytes = 512LL * 1024 * 1024;
	vol.since_us = STATUS_UNKNOWN;
	vol.started_us = demo.started_us;
	vol.completed_us = demo.started_us + 60 * TIME_US_PER_SEC;
	status_doc_add_volume(doc, &vol, now);
	{
		struct status_schedule sch = {
			.name = "nightly", .schedule = "0 2 * * *",
			.phase = "Enabled", .storage_location = "default",
			.last_backup_us = demo.backup_started_us,
			.next_run_us = now + 3600 * TIME_US_PER_SEC,
		};
		struct status_totals tot = { .synced = 1, .backups = 7,
			.restores = 1, .schedules = 1, .waiting = 1, .running = 2,
			.volumes_running = 1 };

		status_doc_add_schedule(doc, &sch);
		status_doc_set_totals(doc, &tot);
	}

	status_doc_add_waiting(doc, &wait);

	for (int i = 0; i < demo.nrecent; i++) {
		const struct recent *r = &demo.recent[i];
		const char *msgs[] = { r->message, NULL };
		struct status_result res = {
			.kind = STATUS_BACKUP, .name = r->name, .phase = r->phase,
			.started_us = r->completed_us - (int64_t)(r->duration_s * TIME_US_PER_SEC),
			.completed_us = r->completed_us, .holder = "demo-1",
			.attempt = 1, .items_done = r->items, .total_items = r->total,
			.bytes_done = r->bytes, .errors = (int)r->errors,
			.labels = rlabels,
			.messages = r->message != NULL ? msgs : no_messages,
		};

		status_doc_add_recent(doc, &res);
	}
	pthread_mutex_unlock(&demo.mu);
	cJSON_Delete(labels);
	cJSON_Delete(rlabels);
	return doc;
}

static int
demo_healthy(void *arg)
{
	(void)arg;
	return demo.unhealthy_file == NULL || access(demo.unhealthy_file, F_OK) != 0;
}

static int
demo_ready(void *arg, struct buf *why)
{
	char line[512];
	FILE *f;

	(void)arg;
	if (demo.not_ready_file == NULL)
		return 1;
	f = fopen(demo.not_ready_file, "r");
	if (f == NULL)
		return 1;
	if (fgets(line, sizeof line, f) == NULL)
		snprintf(line, sizeof line, "not ready");
	fclose(f);
	line[strcspn(line, "\n")] = '\0';
	(void)buf_puts(why, line);
	return 0;
}

/* One SIGUSR1: a success, a failure and a validation failure (Velero's rules). */
static void
record_outcomes(void)
{
	static const char *const nightly[] = { "nightly", NULL };
	char name[64];
	double now_s = (double)(time_now_us() / TIME_US_PER_SEC);

	pthread_mutex_lock(&demo.mu);
	demo.outcomes++;
	metrics_inc(METRIC_BACKUP_ATTEMPT_TOTAL, nightly);
	metrics_inc(METRIC_BACKUP_SUCCESS_TOTAL, nightly);
	metrics_observe(METRIC_BACKUP_DURATION_SECONDS, 42.5, nightly);
	metrics_set(METRIC_BACKUP_TARBALL_SIZE_BYTES, 3.0 * 1024 * 1024, nightly);
	metrics_set(METRIC_BACKUP_LAST_SUCCESSFUL_TIMESTAMP, now_s, nightly);
	metrics_set(METRIC_BACKUP_ITEMS_TOTAL, 1234, nightly);
	metrics_set(METRIC_BACKUP_ITEMS_ERRORS, 0, nightly);
	snprintf(name, sizeof name, "nightly-ok-%d", demo.outcomes);
	recent_push(name, "Completed", 42.5, 1234, 1234, 3L << 20, 0, NULL);

	metrics_inc(METRIC_BACKUP_ATTEMPT_TOTAL, nightly);
	metrics_inc(METRIC_BACKUP_FAILURE_TOTAL, nightly);
	metrics_observe(METRIC_BACKUP_DURATION_SECONDS, 7, nightly);
	metrics_set(METRIC_BACKUP_LAST_STATUS, 0, nightly);
	snprintf(name, sizeof name, "nightly-failed-%d", demo.outcomes);
	recent_push(name, "Failed", 7, 200, 1234, 1L << 20, 1, SCRIPT_ERROR);

	metrics_inc(METRIC_BACKUP_VALIDATION_FAILURE_TOTAL, nightly);
	snprintf(name, sizeof name, "nightly-invalid-%d", demo.outcomes);
	recent_push(name, "FailedValidation", 0, 0, 0, 0, 1,
	    "spec.includedNamespaces: <b>bad</b> glob \"[\"");
	metrics_set(METRIC_BACKUP_TOTAL, 3.0 * demo.outcomes + 1, NULL);
	pthread_mutex_unlock(&demo.mu);
}

static void
tick(void)
{
	pthread_mutex_lock(&demo.mu);
	demo.items += DEMO_ITEMS_PER_TICK;
	demo.bytes += DEMO_ITEMS_PER_TICK * DEMO_BYTES_PER_ITEM;
	metrics_add(METRIC_BACKUP_BYTES_TOTAL,
	    DEMO_ITEMS_PER_TICK * DEMO_BYTES_PER_ITEM, NULL);
	if (demo.items >= DEMO_TOTAL_ITEMS) {
		demo.items = 0;
		demo.items_at_start = 0;
		demo.bytes = 0;
		demo.run++;
		demo.backup_started_us = time_now_us();
	}
	demo.restore_items += 3;
	demo.volume_bytes += 1600 * 1024;
	if (demo.volume_bytes > 2048L * 1024 * 1024) {
		demo.volume_bytes = 0;
		demo.volume_started_us = time_now_us();
	}
	pthread_mutex_unlock(&demo.mu);
}

/* The --work-mb load: generate and compress like a backup does. */
static void *
work_thread(void *arg)
{
	static unsigned char out[1 << 16];
	char item[1024];
	uint64_t x = 88172645463325252ULL;
	size_t total = (size_t)work_mb << 20, done = 0;
	int64_t start = time_mono_us();
	z_stream z;
	FILE *f;
	long n = 0;

	(void)arg;
	memset(&z, 0, sizeof z);
	if (deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return NULL;
	pthread_mutex_lock(&demo.mu);
	demo.items = demo.items_at_start = 0;
	demo.bytes = 0;
	demo.backup_started_us = time_now_us();
	pthread_mutex_unlock(&demo.mu);
	while (done < total && !stop_flag) {
		int len;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		len = snprintf(item, sizeof item,
		    "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
		    "{\"name\":\"cm-%08lx\",\"namespace\":\"ns-%02lu\",\"uid\":"
		    "\"%016llx-%04lx\",\"resourceVersion\":\"%lu\",\"labels\":"
		    "{\"app\":\"shop\"}},\"data\":{\"config\":\"%016llx%016llx"
		    "%016llx\",\"mode\":\"%s\"}}\n", n, (unsigned long)(x % 40),
		    (unsigned long long)x, (unsigned long)(x >> 48),
		    (unsigned long)(x % 1000000), (unsigned long long)(x * 3),
		    (unsigned long long)(x * 7), (unsigned long long)(x * 11),
		    x & 1 ? "strict" : "relaxed");
		z.next_in = (unsigned char *)item;
		z.avail_in = (unsigned)len;
		do {
			z.next_out = out;
			z.avail_out = sizeof out;
			deflate(&z, Z_NO_FLUSH);
		} while (z.avail_out == 0);
		done += (size_t)len;
		if (++n % 1024 == 0) {
			pthread_mutex_lock(&demo.mu);
			demo.items = n;
			demo.bytes = (long)z.total_out;
			pthread_mutex_unlock(&demo.mu);
		}
	}
	do {
		z.next_out = out;
		z.avail_out = sizeof out;
	} while (deflate(&z, Z_FINISH) == Z_OK);
	deflateEnd(&z);
	f = fopen(work_report, "w");
	if (f != NULL) {
		fprintf(f, "%.6f\n", (double)(time_mono_us() - start) / TIME_US_PER_SEC);
		fclose(f);
	}
	return NULL;
}

static int
write_port_file(const char *path, int port)
{
	char *tmp = xasprintf("%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	int rc = -1;

	if (f != NULL) {
		fprintf(f, "%d\n", port);
		if (fclose(f) == 0 && rename(tmp, path) == 0)
			rc = 0;
	}
	free(tmp);
	return rc;
}

static void
usage(void)
{
	fprintf(stderr, "usage: web_demo [--listen ADDR:PORT] [--port-file F] "
	    "[--token-file F] [--not-ready-file F] [--unhealthy-file F] "
	    "[--tick-ms N] [--status-interval-ms N] [--threads N] "
	    "[--max-connections N] [--idle-timeout S] "
	    "[--work-mb N --work-report F]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	struct web_opts opts = { .listen = "127.0.0.1:0" };
	struct web_source src = { demo_status, demo_healthy, demo_ready, NULL };
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *port_file = NULL;
	struct sigaction sa;
	struct web *w = NULL;
	int tick_ms = 200, seen_usr1 = 0;
	pthread_t worker;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (v == NULL)
			usage();
		i++;
		if (strcmp(a, "--listen") == 0)
			opts.listen = v;
		else if (strcmp(a, "--port-file") == 0)
			port_file = v;
		else if (strcmp(a, "--token-file") == 0)
			opts.token_file = v;
		else if (strcmp(a, "--not-ready-file") == 0)
			demo.not_ready_file = v;
		else if (strcmp(a, "--unhealthy-file") == 0)
			demo.unhealthy_file = v;
		else if (strcmp(a, "--tick-ms") == 0)
			tick_ms = atoi(v);
		else if (strcmp(a, "--status-interval-ms") == 0)
			opts.status_interval_ms = (unsigned)atoi(v);
		else if (strcmp(a, "--threads") == 0)
			opts.threads = (unsigned)atoi(v);
		else if (strcmp(a, "--max-connections") == 0)
			opts.max_connections = (unsigned)atoi(v);
		else if (strcmp(a, "--idle-timeout") == 0)
			opts.idle_timeout_s = (unsigned)atoi(v);
		else if (strcmp(a, "--work-mb") == 0)
			work_mb = atol(v);
		else if (strcmp(a, "--work-report") == 0)
			work_report = v;
		else
			usage();
	}
	if (tick_ms <= 0 || (work_mb > 0) != (work_report != NULL))
		usage();

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	demo.started_us = time_now_us() - 3723 * TIME_US_PER_SEC;
	demo.backup_started_us = time_now_us();
	demo.attempt = 2;
	demo.items = demo.items_at_start = 250;
	demo.volume_started_us = time_now_us();
	demo.bytes = 250L * DEMO_BYTES_PER_ITEM;
	pthread_mutex_lock(&demo.mu);
	recent_push("nightly-20261201-000", "Completed", 3725, 3890, 3890,
	    (long)612 << 20, 0, NULL);
	recent_push("adhoc-before-upgrade", "PartiallyFailed", 95, 410, 412,
	    (long)18 << 20, 2, SCRIPT_ERROR);
	pthread_mutex_unlock(&demo.mu);
	metrics_set(METRIC_BACKUP_IN_PROGRESS, 1, METRIC_LABELS("InProgress"));
	metrics_set(METRIC_RESTORE_IN_PROGRESS, 1, METRIC_LABELS("InProgress"));
	metrics_set(METRIC_VOLUME_OPERATIONS_IN_PROGRESS, 1, METRIC_LABELS("backup"));
	metrics_set(METRIC_LEASE_HELD, 1, NULL);
	metrics_set(METRIC_SERVERS_SEEN, 2, NULL);
	metrics_set(METRIC_BACKUP_TOTAL, 1, NULL);
	metrics_set(METRIC_WAITING_ITEMS, 1, METRIC_LABELS("backup"));
	metrics_inc(METRIC_CLAIMS_TOTAL, METRIC_LABELS("backup"));
	metrics_inc(METRIC_TAKEOVERS_TOTAL, METRIC_LABELS("backup"));

	if (web_start(&opts, &src, &w, &err) < 0) {
		fprintf(stderr, "web_demo: %s\n", err.msg);
		return 1;
	}
	if (port_file != NULL && write_port_file(port_file, web_port(w)) < 0) {
		fprintf(stderr, "web_demo: cannot write %s\n", port_file);
		web_stop(w);
		return 1;
	}
	if (work_mb > 0 && pthread_create(&worker, NULL, work_thread, NULL) != 0) {
		fprintf(stderr, "web_demo: cannot start the work thread\n");
		web_stop(w);
		return 1;
	}
	while (!stop_flag) {
		time_sleep_us((int64_t)tick_ms * 1000, (atomic_int *)&stop_flag);
		while (seen_usr1 != usr1_count) {
			seen_usr1++;
			record_outcomes();
		}
		if (work_mb == 0)
			tick();
	}
	if (work_mb > 0)
		pthread_join(worker, NULL);
	web_stop(w);
	for (int i = 0; i < demo.nrecent; i++) {
		free(demo.recent[i].name);
		free(demo.recent[i].message);
	}
	return 0;
}
