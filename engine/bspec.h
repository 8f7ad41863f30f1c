/*
 * bspec.h: a Backup's spec as the engine uses it: validation (Velero's
 * rules and messages), the namespace / resource / label filters with
 * Velero's includeClusterResources semantics, the deterministic item order
 * and the tarball paths of format 1.1.0.
 *
 * Pure functions over cJSON and kube discovery; no I/O. Unit-tested in
 * tests/unit/test_engine_bspec.c.
 */
#ifndef CAIRN_BSPEC_H
#define CAIRN_BSPEC_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "base/buf.h"
#include "base/err.h"
#include "engine/hooks.h"
#include "kube/kube.h"

#define BSPEC_DEFAULT_TTL_US (720LL * 3600 * 1000000)	/* Velero's 30 days */
#define BSPEC_TAR_VERSION "1.1.0"
#define BSPEC_MAX_VALIDATION 32		/* validation messages kept */

/* includeClusterResources: unset, false, true. */
enum bspec_cluster { BSPEC_CLUSTER_AUTO = -1, BSPEC_CLUSTER_NO = 0,
	BSPEC_CLUSTER_YES = 1 };

struct bspec {
	char **inc_ns;			/* NULL-terminated, never NULL */
	char **exc_ns;
	char **inc_res;			/* as written in the spec */
	char **exc_res;
	int all_namespaces;		/* every namespace is included */
	enum bspec_cluster cluster;
	struct kube_selector *sel;	/* labelSelector, NULL: none */
	struct kube_selector **or_sels;	/* orLabelSelectors, NULL-terminated or NULL */
	char *selector_text;		/* canonical text of sel for ?labelSelector=, or NULL */
	int64_t ttl_us;
	char *location;			/* spec.storageLocation, NULL: the default */
	struct hook_spec *hooks;	/* spec.hooks (engine/hooks.h), never NULL */
	/* spec.orderedResources: per resource key, names to back up first */
	struct bspec_order {
		char *key;		/* "pods", "deployments.apps" */
		char **names;		/* "ns/name" or "name", in order */
	} *ordered;
	size_t nordered;
	/*
	 * Fields cairn accepts but does not act on (Velero's names), one
	 * message each: the run records them as warnings. NULL-terminated,
	 * never NULL.
	 */
	char **warnings;
};

/*
 * Parse and validate the spec of a Backup object. Problems a user must fix
 * are appended to errs (a cJSON array of strings, Velero's
 * validationErrors) and 0 is still returned with *out NULL when errs got
 * any; only an internal failure returns < 0. Every spec field is either
 * implemented, refused here (fields that would change what is backed up:
 * the *ScopedResources filters, resourcePolicy, snapshotMoveData, and
 * unknown fields) or listed in (*out)->warnings (fields about how volume
 * data moves, which cairn's volume plugins decide). The storage location
 * is not checked here (the caller looks it up). *out is owned
 * (bspec_free).
 */
int bspec_parse(const cJSON *backup, struct bspec **out, cJSON *errs);
void bspec_free(struct bspec *s);

/* Does the namespace filter take namespace ns? */
int bspec_ns_included(const struct bspec *s, const char *ns);
/*
 * Does the resource filter take resource r (by plural, plural.group,
 * kind or short name as Velero resolves them)? Cluster scope is separate.
 */
int bspec_resource_included(const struct bspec *s,
	const struct kube_resource *r);
/*
 * Does one includedResources/excludedResources entry name r: "*", its
 * plural, kind (any case), singular or a short name, "plural.group" or
 * "plural.version.group" (r's version)?
 */
int bspec_names_resource(const char *entry, const struct kube_resource *r);
/*
 * The spec.orderedResources list for resource r (key: its plural, or
 * plural.group), NULL-terminated "ns/name" (namespaced) or "name"
 * (cluster-scoped) entries in the order they are backed up, before the
 * resource's other items. NULL when r has none. Borrowed.
 */
char *const *bspec_ordered(const struct bspec *s,
	const struct kube_resource *r);

/* Do the labels of obj match labelSelector / orLabelSelectors? */
int bspec_labels_match(const struct bspec *s, const cJSON *obj);

/*
 * How a resource is walked. BSPEC_WALK_SKIP: not at all;
 * BSPEC_WALK_ALL: list and take what passes the filters;
 * BSPEC_WALK_RELATED: cluster-scoped, only items related to the included
 * namespaces (PVs bound to included PVCs, CRDs of included custom
 * resources); walked after everything else.
 */
enum bspec_walk { BSPEC_WALK_SKIP = 0, BSPEC_WALK_ALL, BSPEC_WALK_RELATED };
enum bspec_walk bspec_walk_of(const struct bspec *s,
	const struct kube_resource *r);

/*
 * Rank of a resource in the item order: walk pass (0, then 1 for RELATED),
 * then group, then plural. Negative, 0, positive as strcmp.
 */
int bspec_resource_cmp(int pass_a, const char *group_a, const char *res_a,
	int pass_b, const char *group_b, const char *res_b);

/* Item key written in checkpoints: "group/resource/namespace/name". */
char *bspec_item_key(const char *group, const char *resource,
	const char *ns, const char *name);
/*
 * Split an item key into its four parts (owned strings in parts[4]).
 * CAIRN_EINVAL if it has not exactly four '/'-separated parts.
 */
int bspec_key_split(const char *key, char *parts[4]);

/*
 * Tarball paths of an item (Velero 1.1.0): legacy
 * "resources/<res>[.<group>]/(cluster|namespaces/<ns>)/<name>.json" and
 * preferred "resources/<res>[.<group>]/<ver>-preferredversion/...". ns
 * NULL or "" means cluster-scoped. Appended to the buffers (reset first).
 */
int bspec_item_paths(const char *group, const char *version,
	const char *resource, const char *ns, const char *name,
	struct buf *legacy, struct buf *preferred);

#endif
