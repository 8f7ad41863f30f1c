/*
 * lease.h: liveness of cairn servers through coordination.k8s.io Leases.
 *
 * Every server holds its own Lease `cairn-<server-id>` in its namespace and
 * renews it with client-go's leader-election algorithm (tryAcquireOrRenew,
 * see shared/reference/kubernetes-api.md): every retry period (with
 * jitter) it PUTs the Lease with the resourceVersion it last saw. Two
 * questions are answered here:
 *
 *  - "May I still write?" (self-fencing): lease_held() is true only while
 *    this server's last successful renewal is younger than the renew
 *    deadline, measured on the local monotonic clock. A worker checks it
 *    before every part upload and status write.
 *
 *  - "Is that holder dead?" (takeover): a lease_watch observes every
 *    cairn Lease and remembers, on the local monotonic clock, when each
 *    record last changed (the observation clock, never the renewTime
 *    written by the other machine, so clock skew between machines does not
 *    matter). A holder is expired when its record has not changed for its
 *    leaseDurationSeconds, when it released the Lease (empty holder), or
 *    when its Lease has been missing for a lease duration.
 *
 * Safety margin: a server stops writing at last_renew + renew_deadline; an
 * observer can only see that renewal at or after last_renew, so it takes
 * over no earlier than last_renew + lease_duration. With renew_deadline <
 * lease_duration (checked at start) the old owner is quiet first, as long
 * as the two clocks' rates differ by less than the margin.
 *
 * Threads: lease_start() runs the renewal loop in its own thread;
 * lease_held() and lease_snapshot() may be called from any thread.
 * A lease_watch is refreshed by whoever calls lease_watch_refresh() (the
 * server's scan loop) and read from any thread.
 */
#ifndef CAIRN_LEASE_H
#define CAIRN_LEASE_H

#include <stdint.h>
#include <cjson/cJSON.h>
#include "base/err.h"

struct kube;
struct lease;
struct lease_watch;

/* Label put on every cairn server Lease, so observers can list them. */
#define LEASE_LABEL_KEY "cairn.io/server-lease"
#define LEASE_NAME_PREFIX "cairn-"

struct lease_opts {
	const char *namespace;		/* where the Lease lives */
	const char *identity;		/* server id; the Lease is cairn-<identity> */
	int64_t lease_duration_us;	/* default 15 s */
	int64_t renew_deadline_us;	/* default 10 s; < lease_duration */
	int64_t retry_period_us;	/* default 2 s; < renew_deadline */
};

/*
 * The Lease's own API client, from the same kubeconfig/context as the main
 * one (NULL: the usual search): a request timeout of renew deadline minus
 * retry period (at least 500 ms) and no retries, so a hung renewal cannot
 * hide a lost Lease. NULL (logged) when it cannot be made: the caller
 * renews through its main client then.
 */
struct kube *lease_client_new(const char *kubeconfig, const char *context,
	int64_t renew_deadline_us, int64_t retry_period_us);

/*
 * Validate opts (durations ordered retry < renew deadline < lease
 * duration; identity a valid name part) and make a lease; nothing is sent
 * yet. k is borrowed and must outlive the lease.
 */
int lease_new(struct kube *k, const struct lease_opts *opts,
	struct lease **out, struct cairn_err *err);
/*
 * One tryAcquireOrRenew round, in the calling thread: 0 when this server
 * holds the Lease afterwards, CAIRN_EBUSY when someone else holds a valid
 * one, or the API error.
 */
int lease_try(struct lease *l, struct cairn_err *err);
/* Run lease_try() every retry period (jittered) in a new thread. */
int lease_start(struct lease *l, struct cairn_err *err);
/* Held and renewed within the renew deadline: writing is allowed. */
int lease_held(struct lease *l);
/*
 * 0 when not held, else a positive number naming the current holding
 * period: it changes whenever the Lease was lost (renew deadline passed,
 * even if nobody looked) and held again. A writer that remembers the
 * value of its last check knows from a different one that others may
 * have taken its items over meanwhile and must re-check its claims
 * before writing (engine_env.may_write).
 */
int lease_write_epoch(struct lease *l);
/*
 * Stop the loop and release the Lease (holderIdentity "", duration 1 s)
 * so others may take over at once. Safe to call twice.
 */
int lease_release(struct lease *l, struct cairn_err *err);
/* Stop the loop without releasing (a crash as others see it). */
void lease_stop(struct lease *l);
void lease_free(struct lease *l);

struct lease_state {
	int held;			/* lease_held() */
	int64_t last_renew_us;		/* wall clock of the last renewal, 0 none */
	uint64_t renewals;		/* successful rounds */
	uint64_t failures;		/* failed rounds */
	uint64_t lost;			/* times the renew deadline passed */
	int transitions;		/* leaseTransitions of the record */
};
void lease_snapshot(struct lease *l, struct lease_state *out);

/* ---- observing other servers ---- */

/* default_duration_us judges Leases that are missing (never seen). */
struct lease_watch *lease_watch_new(struct kube *k, const char *namespace,
	int64_t default_duration_us);
/* List the cairn Leases and update the observation clock of each. */
int lease_watch_refresh(struct lease_watch *w, struct cairn_err *err);
/*
 * Is server `holder` gone? 1 when its Lease is released, expired on the
 * observation clock, or missing for a default lease duration since this
 * watch first looked for it; 0 otherwise (also before the first refresh).
 */
int lease_watch_expired(struct lease_watch *w, const char *holder);
/*
 * The servers seen, as a JSON array (owned) of
 * {id, holder, renewTime, leaseDurationSeconds, expired, observedAgeSeconds}.
 */
cJSON *lease_watch_servers(struct lease_watch *w);
void lease_watch_free(struct lease_watch *w);

#endif
