/*
 * status.h: what `cairn server` publishes about itself: the status
 * document (docs/status-json.md), liveness and readiness. This is the
 * engine's own interface; it knows nothing of HTTP. cmd/cmd_server.c
 * wires it to the web endpoint (web/web.h), which serves it as
 * /status.json, /healthz and /readyz.
 *
 * A status keeps one probe thread that, every period, (1) checks what
 * /readyz reports (the API server answers, the journal takes a write, the
 * default storage location answers), (2) lists cairn's Leases to see the
 * other servers and this one's own Lease as others see it, (3) sets the
 * totals metrics from the status cache, and (4) turns what the journal
 * recorded since the last pass into the outcome metrics (attempts,
 * successes, failures, durations, sizes). Deriving outcome metrics from
 * the journal keeps them in one place and exactly as durable as the
 * record they count: a worker never has to remember to count, and the
 * row holds the numbers the object's final status says.
 *
 * The cluster's work (every Backup, Restore, volume operation and
 * Schedule, whoever holds it) comes from a status cache
 * (engine/status_cache.h: watches with a client of their own), so every
 * server's page shows the same; this server's journal adds detail for
 * its own items.
 *
 * status_document(), status_healthy() and status_ready() may be called
 * from any thread (the web endpoint's): they read the journal (its read
 * connection never waits for writers) and the probe thread's snapshot
 * under a mutex, so they never slow a backup.
 */
#ifndef CAIRN_STATUS_H
#define CAIRN_STATUS_H

#include <stdint.h>
#include <cjson/cJSON.h>
#include "base/err.h"

struct buf;
struct kube;
struct journal;
struct status;

struct status_opts {
	/*
	 * The probes use a client of their own, made from this configuration
	 * with no retries and a short timeout: readiness must say "not
	 * ready" within seconds, not after the main client's patient retries.
	 */
	const char *kubeconfig;		/* --kubeconfig, NULL: default lookup */
	const char *context;		/* --context, NULL: current */
	struct journal *journal;	/* borrowed, thread-safe */
	const char *server_id;		/* copied */
	const char *namespace;		/* copied */
	int workers;
	int64_t lease_duration_us;	/* judges Leases not seen yet */
	int64_t period_us;		/* probe period; 0: 2 s */
};

/* Start the probe thread. On failure *out is NULL. */
int status_start(const struct status_opts *o, struct status **out,
	struct cairn_err *err);
/*
 * A new status document (docs/status-json.md, built with
 * engine/status_doc.h): this server, its Lease and the others seen,
 * the cluster's running backups, restores and volume operations, waiting
 * items, recent results and schedules (from the status cache; from this
 * server's journal until the cache has listed everything once). Owned by
 * the caller; the serving side adds "version" and "generatedAt".
 */
cJSON *status_document(struct status *s);
/* Non-zero while the probe loop is alive (a pass in the last minute). */
int status_healthy(struct status *s);
/*
 * Non-zero when ready (API server answers, journal takes a write, default
 * storage location answers); else the first failing reason is appended
 * to why ("starting" before the first probe) and 0 returned.
 */
int status_ready(struct status *s, struct buf *why);
/* Stop the thread and free. NULL is fine. */
void status_stop(struct status *s);

#endif
