/*
 * server.h: `cairn server`'s controller loop: find Backups to work on,
 * claim them, run them on a pool of worker threads.
 */
#ifndef CAIRN_SERVER_H
#define CAIRN_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include "base/err.h"

struct kube;
struct journal;
struct kube_selector;

struct server_opts {
	struct kube *kube;		/* borrowed, thread-safe */
	struct journal *journal;	/* borrowed, thread-safe */
	const char *server_id;
	const char *namespace;		/* where cairn's objects live */
	int workers;			/* items processed at once (>= 1) */
	size_t part_size;		/* tarball part size */
	int64_t scan_period_us;		/* how often Backups are listed */
	int64_t gc_period_us;		/* upkeep: expiry of Backups; 0: 1 h */
	const struct kube_selector *shard;	/* NULL: every item */
	const volatile int *stop;	/* set by the signal handler */
};

/*
 * Run until *stop: scan, claim, work. Workers finish (or reach a stop
 * point in) their current item before this returns. 0 on a clean stop,
 * or an error that prevented starting.
 */
int server_run(const struct server_opts *o, struct cairn_err *err);

#endif
