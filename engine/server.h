/*
 * server.h: `cairn server`'s controller loop: find Backups and Restores
 * to work on, claim them (or take them over from dead servers), run them
 * on a pool of worker threads, all under this server's Lease
 * (engine/lease.h). The protocol and its safety argument:
 * docs/protocol.md.
 */
#ifndef CAIRN_SERVER_H
#define CAIRN_SERVER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "base/err.h"

struct kube;
struct journal;
struct kube_selector;
struct volumes;

struct server_opts {
	struct kube *kube;		/* borrowed, thread-safe */
	struct journal *journal;	/* borrowed, thread-safe */
	const char *server_id;		/* Lease cairn-<id>, claim.holder */
	const char *namespace;		/* where cairn's objects live */
	int workers;			/* items processed at once (>= 1) */
	int restore_workers;		/* creates per restore tier; 0: default */
	int64_t terminating_timeout_us;	/* restores: 0: default (10 min) */
	size_t part_size;		/* tarball part size */
	int list_concurrency;		/* backups' lists in flight; 0: 8 */
	int compression_threads;	/* per tarball; 0: util_cpus() */
	int64_t scan_period_us;		/* how often items are listed */
	int64_t gc_period_us;		/* upkeep: expiry of Backups; 0: 1 h */
	int64_t verify_period_us;	/* engine/verify.h's loop; 0: none */
	const struct kube_selector *shard;	/* NULL: every item */
	const atomic_int *stop;	/* set by the signal handler */
	/* Leases (0: the defaults 15 s, 10 s, 2 s) and shutdown. */
	int64_t lease_duration_us;
	int64_t renew_deadline_us;
	int64_t retry_period_us;
	int64_t shutdown_grace_us;	/* 0: 30 s */
	/*
	 * Where the Lease's own client connects (the same cluster as kube;
	 * NULL: the usual kubeconfig search). The Lease gets a client with
	 * a request timeout below the renew deadline and no retries, so a
	 * hung renewal cannot hide a lost Lease; if it cannot be made, kube
	 * is used.
	 */
	const char *kubeconfig;
	const char *context;
	int no_upkeep;			/* tests/benchmarks: no schedules/GC */
	const char *default_location;	/* upkeep_opts.default_location */
	struct volumes *volumes;	/* volume work's configuration, borrowed */
};

/*
 * Acquire the Lease (retrying every retry period until it is held or
 * *stop), then run until *stop: scan, claim, take over, work. On stop:
 * claiming ends, running backups get shutdown_grace to reach their next
 * checkpoint, their claims are released (claim.holder "", so another
 * server takes over at once) and so is the Lease. 0 on a clean stop, or
 * an error that prevented starting (bad Lease timings, no threads).
 */
int server_run(const struct server_opts *o, struct cairn_err *err);

#endif
