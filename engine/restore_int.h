/*
 * restore_int.h: the state of one running Restore, shared by restore.c
 * (claim, plan, tiers, the worker pool, journal, status, uploads) and
 * restore_item.c (what is done with one item: actions, waits, volumes,
 * create or reconcile). Not for use outside these two files.
 *
 * Threads: fields marked "main" are touched by the main thread only;
 * "mu" under rs->mu; "pv_mu" under rs->pv_mu; the rest is set before
 * the workers start and only read after.
 */
#ifndef CAIRN_RESTORE_INT_H
#define CAIRN_RESTORE_INT_H

#include <pthread.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "base/err.h"
#include "engine/itemlog.h"
#include "engine/backup.h"
#include "engine/claim.h"
#include "engine/restore_actions.h"
#include "engine/restore_plan.h"
#include "journal/journal.h"
#include "kube/kube.h"

/* Waits for something being deleted (0 in engine_env: this). */
#define RESTORE_TERMINATING_WAIT_US (600LL * 1000000)	/* Velero: 10 min */
#define RESTORE_ANN_ORIGINAL_PV	"cairn.io/original-pv-name"

struct hooks_restore;

struct mark {
	char *key;
	enum journal_rstate state;
};

/* What one tier's items need to know about their resource. */
struct tierinfo {
	const char *resgroup;
	struct kube_resource *r;	/* resolved, owned; NULL: unknown */
	int status;			/* restoreStatus takes it */
	int nocreate;			/* the cluster has no create verb for it */
};

/* A PV's name in this restore (Velero's rename under namespace mapping). */
struct pvname {
	char *from, *to;
};

struct rs {
	const struct engine_env *env;
	const char *worker;
	char *ns, *name, *uid, *backup;
	char *name_lv, *backup_lv;	/* the names as label values */
	cJSON *obj;			/* latest object known (owned; main) */
	cJSON *status;			/* the status we own and write (main) */
	int64_t attempt;
	int64_t jid;
	int restore_pvs;		/* spec.restorePVs is not false */
	int64_t term_wait_us;		/* terminating-resource timeout */
	struct ract_opts ract;
	struct engine_fence f;		/* our claim (main) */
	struct restore_filter *filter;
	struct restore_plan *plan;
	struct bsl *loc;
	char *prefix;			/* the location's key prefix */
	cJSON *parts;			/* the backup's recorded tarball parts */
	int64_t total, done, restored_before;	/* main */
	int64_t bytes_read;		/* compressed tarball bytes read */
	int64_t last_progress_us;	/* main */
	char *last_key;			/* main */
	size_t tier;			/* main */
	/* results: {"velero":[],"cluster":[],"namespaces":{}} each (mu) */
	cJSON *warnings, *errors;
	int64_t nwarnings, nerrors;
	cJSON *reslist;			/* "<gv>/<Kind>" -> ["ns/name(state)"] (mu) */
	char **ensured;			/* target namespaces known to exist (mu) */
	size_t nensured;
	char **ns_failed;		/* namespaces that could not be made (mu) */
	size_t nns_failed;
	pthread_mutex_t pv_mu;
	struct pvname *pvnames;		/* decided PV names (pv_mu) */
	size_t npvnames;
	/* the pool */
	pthread_mutex_t mu;
	pthread_cond_t cv_items, cv_space, cv_idle;
	struct restore_row **q;
	size_t qhead, qcount, qcap;
	int inflight;
	int quit;
	int abort_tier;			/* fenced or stopped: drop the rest */
	const struct tierinfo *ti;
	struct mark *pending;
	size_t npending, apending;
	int64_t last_flush_us;
	int nworkers;
	pthread_t *threads;
	struct hooks_restore *hooks;	/* init containers, exec hooks */
	struct itemlog log;		/* the restore's log (journal events) */
};

/* restore.c: an event in the journal and the log (any thread). */
void rs_event(struct rs *rs, const char *level, const char *fmt, ...)
	CAIRN_PRINTF(3, 4);
/*
 * restore.c: a warning (is_error 0) or error in the results (any
 * thread): ns NULL general ("velero" list), "" cluster-scoped, else that
 * namespace.
 */
void rs_record(struct rs *rs, int is_error, const char *ns, const char *msg);
void rs_recordf(struct rs *rs, int is_error, const char *ns,
	const char *fmt, ...) CAIRN_PRINTF(4, 5);

/*
 * restore_item.c: create or reconcile one item of the current tier
 * (a worker thread); the outcome is recorded in the results and the
 * resource list, and returned for the journal.
 */
enum journal_rstate rs_apply_item(struct rs *rs, const struct restore_row *row);
/*
 * restore_item.c: make sure target namespace t (backed up as orig)
 * exists and is not being deleted: waits while it terminates (up to
 * rs->term_wait_us), creates it from the backed-up Namespace when absent.
 * 0, or -1 when it could not be (an error was recorded once, and its
 * items are not restored: rs_ns_failed()). main: 1 on the main thread
 * (status progress goes on while it waits).
 */
int rs_ensure_ns(struct rs *rs, const char *orig, const char *t, int main);
/* restore_item.c: did namespace t fail rs_ensure_ns()? */
int rs_ns_failed(struct rs *rs, const char *t);
/* restore_item.c: add "ns/name(state)" for obj to the resource list. */
void rs_reslist_add(struct rs *rs, const cJSON *obj, const char *ns,
	const char *name, enum journal_rstate st);
/* restore.c: write progress and status now if due (main thread). */
int rs_progress(struct rs *rs, int force, struct cairn_err *err);

#endif
