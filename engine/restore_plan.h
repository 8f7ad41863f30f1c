/*
 * restore_plan.h: what a restore will create, and in which order.
 *
 * A restore reads its tarball once (engine/archive_read.h) and spills the
 * items it selects into a private temporary SQLite database (deleted when
 * closed; see the essay in restore_plan.c for why a spill rather than a
 * pass per tier). The plan then hands the items out tier by tier in
 * Velero's order: the high-priority list, every other resource
 * alphabetically, then the low-priority list. One resource is one tier.
 *
 * Selection (Velero's rules): never-restored kinds are dropped;
 * include/exclude namespaces ('*' globs) and resources; includeClusterResources
 * (unset: cluster-scoped items only when every namespace is included,
 * plus the CRDs of custom resources that are restored; Namespace objects
 * follow the namespace filter); labelSelector and
 * orLabelSelectors; the preferred-version path of an item wins over its
 * legacy path, which is used only when the archive has no preferred one.
 *
 * Threads: a plan is built by one thread; restore_plan_foreach() may run
 * while other threads hold rows it handed out (rows are copies).
 */
#ifndef CAIRN_RESTORE_PLAN_H
#define CAIRN_RESTORE_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "base/err.h"

struct tarread;
struct kube_discovery;
struct kube_selector;
struct restore_filter;
struct restore_plan;

/* An item path of format 1.1.0, split (strings point into buf). */
struct restore_path {
	char buf[1100];
	char rbuf[300];
	const char *resgroup;	/* "deployments.apps", "secrets" */
	const char *resource;	/* "deployments" */
	const char *group;	/* "apps", "" for core */
	const char *version;	/* "v1" for a preferred-version path, else "" */
	const char *ns;		/* "" for cluster scope */
	const char *name;	/* without ".json" */
	int preferred;		/* a <ver>-preferredversion path */
};

/*
 * Split path. 0: an item path; CAIRN_ENOTFOUND: not under resources/
 * (metadata files: skip quietly); CAIRN_EINVAL: under resources/ but not
 * an item path of format 1.1.0.
 */
int restore_path_parse(const char *path, struct restore_path *out);

/* Velero's non-restorable resources (nodes, events, backups...). */
int restore_never_restored(const char *resgroup);
/*
 * Order key of a resource's tier: "a<nnn>" for the high-priority list,
 * "b<resgroup>" for the rest, "c<nnn>" for the low list. out has 300 bytes.
 */
void restore_tier_key(const char *resgroup, char *out);

/*
 * Every field of a Restore spec is implemented, refused or warned about
 * (engine/spec_fields.h): refusals and unknown fields are appended to errs
 * (validationErrors), warnings to warnings (both cJSON arrays of strings).
 * spec.scheduleName without spec.backupName is refused (the server does
 * not pick a schedule's latest backup; the CLI's --from-schedule does and
 * records the schedule next to backupName).
 */
void restore_spec_check(const cJSON *spec, cJSON *errs, cJSON *warnings);

/*
 * The filters of a Restore spec. Validation problems a user must fix
 * (bad mapping, bad selector, unknown policy) are appended to errs (Velero's
 * validationErrors) and *out is NULL; 0 is still returned. disc (may be
 * NULL) resolves resource names ("deploy", "Deployment") to resource.group.
 */
int restore_filter_new(const cJSON *spec, const struct kube_discovery *disc,
	struct restore_filter **out, cJSON *errs);
void restore_filter_free(struct restore_filter *f);
int restore_filter_ns(const struct restore_filter *f, const char *ns);
int restore_filter_resource(const struct restore_filter *f,
	const char *resgroup);
/* Cluster-scoped resgroup taken? (namespaces are judged per name) */
int restore_filter_cluster(const struct restore_filter *f,
	const char *resgroup);
int restore_filter_labels(const struct restore_filter *f, const cJSON *obj);
/* Target namespace of ns (mapping applied); borrowed, ns itself if none. */
const char *restore_filter_map_ns(const struct restore_filter *f,
	const char *ns);
/* Is the status of resgroup restored (restoreStatus)? */
int restore_filter_status(const struct restore_filter *f, const char *resgroup);
/* existingResourcePolicy is "update". */
int restore_filter_update(const struct restore_filter *f);
/* preserveNodePorts is true. */
int restore_filter_node_ports(const struct restore_filter *f);

/* Problems found while reading: level 0 warning, 1 error; ns "" = general. */
typedef void (*restore_problem_fn)(void *arg, int error, const char *ns,
	const char *msg);

/*
 * Read the whole archive from r and build the plan: every selected item
 * (its JSON re-checked: metadata.name must match the path), and every
 * backed-up Namespace object whatever the filters (to create mapped or
 * needed namespaces). Bad entries and bad JSON go to problem() and are
 * left out; a fatal stream error (truncated, corrupt, bomb, stall) is
 * returned with *out NULL. Owned result (restore_plan_free).
 */
int restore_plan_build(struct tarread *r, const struct restore_filter *f,
	restore_problem_fn problem, void *arg, struct restore_plan **out,
	struct cairn_err *err);
void restore_plan_free(struct restore_plan *p);

/* Items selected. */
int64_t restore_plan_count(const struct restore_plan *p);
/* Number of tiers and, for tier i (0-based, in order), its resgroup. */
size_t restore_plan_ntiers(const struct restore_plan *p);
const char *restore_plan_tier(const struct restore_plan *p, size_t i);
/* Items in tier i. */
int64_t restore_plan_tier_count(const struct restore_plan *p, size_t i);

/* One item handed out by restore_plan_foreach (all fields owned by it). */
struct restore_row {
	char *resgroup;
	char *version;	/* from the preferred path, "" for legacy */
	char *ns;	/* original namespace, "" for cluster scope */
	char *name;
	char *path;	/* the tar entry it came from */
	char *key;	/* journal key: "<resgroup>/<ns>/<name>" */
	char *json;	/* the object text */
};
void restore_row_free(struct restore_row *row);

/*
 * Call fn for each item of tier i in namespace, name order. fn owns the
 * row (restore_row_free). fn returning non-zero stops and is returned.
 */
int restore_plan_foreach(struct restore_plan *p, size_t i,
	int (*fn)(void *arg, struct restore_row *row), void *arg,
	struct cairn_err *err);

/*
 * Check the archive against the backup's resource list rl (the
 * <backup>-resource-list.json.gz object: {"<group/version>/<Kind>":
 * ["ns/name" or "name", ...]}): every item the list names must have an
 * entry in the archive (selected or not) and every item entry must be
 * named by the list. Items are compared by API group, namespace and name
 * (the archive's paths name resources, the list kinds). Each difference
 * goes to problem() as an error (the first RESTORE_LIST_SHOWN of each
 * side named). Returns the number of differences, or a negative code
 * (database failure; rl that is not such an object is CAIRN_EPROTO).
 */
#define RESTORE_LIST_SHOWN 5
int64_t restore_plan_check_list(struct restore_plan *p, const cJSON *rl,
	restore_problem_fn problem, void *arg, struct cairn_err *err);

/*
 * The JSON text (owned) of the selected item resgroup ns/name ("" for
 * cluster scope), or NULL when the plan does not have it. May be called
 * from any thread, also while restore_plan_foreach() runs.
 */
char *restore_plan_item(struct restore_plan *p, const char *resgroup,
	const char *ns, const char *name);

/* The backed-up Namespace object called name (owned), or NULL. */
cJSON *restore_plan_namespace(struct restore_plan *p, const char *name);

#endif
