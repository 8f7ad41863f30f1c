/*
 * kube.h: cairn's Kubernetes REST client (libcurl + cJSON + libyaml).
 *
 * One `struct kube` per process talks to one API server. It is safe to use
 * from several threads at once: connections, DNS and TLS sessions are shared
 * through a libcurl share object, easy handles come from a small pool.
 *
 *     struct kube *k;
 *     struct cairn_err err = CAIRN_ERR_INIT;
 *     if (kube_open_flags(fs, &k, &err) < 0)
 *         return cli_fail("%s", err.msg);
 *     cJSON *obj;
 *     if (kube_get(k, &KUBE_GVR("cairn.io", "v1", "backups"), "ns", "b1",
 *         &obj, &err) == CAIRN_ENOTFOUND) ...
 *
 * Errors: every function returns 0 or a negative enum cairn_rc and fills an
 * optional struct cairn_err. API errors map to codes: 404 CAIRN_ENOTFOUND,
 * 409 AlreadyExists CAIRN_EEXIST, other 409 CAIRN_ECONFLICT, 410
 * CAIRN_EGONE, 401/403 CAIRN_EAUTH, 400/422 CAIRN_EINVAL, 415
 * CAIRN_EUNSUPPORTED, 429 CAIRN_EBUSY, 5xx CAIRN_ESERVER, transport
 * failures CAIRN_ENET / CAIRN_ETIMEOUT, a reply over its cap CAIRN_ETOOBIG.
 * The message reads `<reason> (HTTP <code>): <Status.message>`. The full
 * Status of the last request made by the calling thread is available from
 * kube_last_status().
 *
 * Objects returned through `cJSON **out` are owned by the caller (cJSON_Delete);
 * objects passed in are borrowed and never modified.
 */
#ifndef CAIRN_KUBE_H
#define CAIRN_KUBE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "base/err.h"
#include "base/flags.h"

struct kube;
struct kube_config;
struct kube_discovery;
struct kube_informer;
struct kube_selector;

/* ------------------------------------------------------------------ */
/* Configuration (kube/config.c)                                       */
/* ------------------------------------------------------------------ */

struct kube_config_opts {
	const char *kubeconfig;	/* --kubeconfig; NULL: $KUBECONFIG, ~/.kube/config, in-cluster */
	const char *context;	/* --context; NULL: current-context */
};

/*
 * Resolve the configuration: --kubeconfig path, else the $KUBECONFIG colon
 * list merged as kubectl does (the first file that sets a value wins), else
 * ~/.kube/config, else in-cluster (KUBERNETES_SERVICE_HOST/PORT and the
 * service-account directory, $CAIRN_SERVICEACCOUNT_DIR overriding
 * /var/run/secrets/kubernetes.io/serviceaccount). Certificates given as
 * files are read and checked here; `-data` blobs are decoded in memory and
 * never written to disk. On failure *out is NULL and err names the file
 * and the field (CAIRN_EINVAL, or CAIRN_ENOTFOUND when no config exists).
 */
int kube_config_load(const struct kube_config_opts *o,
	struct kube_config **out, struct cairn_err *err);
void kube_config_free(struct kube_config *cfg);
/* Borrowed strings, valid for the life of cfg. */
const char *kube_config_server(const struct kube_config *cfg);	/* "https://h:p" */
const char *kube_config_namespace(const struct kube_config *cfg); /* "default" if none */
const char *kube_config_source(const struct kube_config *cfg);	/* "/path" or "in-cluster" */
const char *kube_config_context(const struct kube_config *cfg);	/* "" in-cluster */
/*
 * Describe the configuration as JSON, secrets replaced by "<redacted N
 * bytes>": {source, context, cluster, user, server, namespace, tlsServerName,
 * insecure, ca, clientCert, clientKey, token, tokenFile}. Owned.
 */
cJSON *kube_config_describe(const struct kube_config *cfg);

/* ------------------------------------------------------------------ */
/* The client (kube/kube.c)                                            */
/* ------------------------------------------------------------------ */

struct kube_client_opts {
	double qps;		/* client-side rate limit; <= 0: none (the
				   server's 429s still hold flows: flow.c) */
	int burst;		/* token bucket size; < 1: max(1, qps) */
	int64_t timeout_us;	/* one request (one list page); 0: 30 s */
	int max_retries;	/* 429 / 5xx / connection retries; 0: 10;
				   KUBE_RETRIES_NONE: none */
	int pool_size;		/* idle easy handles kept; 0: 8 */
	int64_t connect_wait_us; /* failing to connect is retried this long;
				   0: 2 s (servers: kube_set_connect_wait) */
	const char *user_agent;	/* NULL: "cairn/<version>" */
};
#define KUBE_RETRIES_NONE (-1)

/*
 * Make a client from cfg, which is taken (freed on failure too). opts may
 * be NULL for defaults. Nothing is sent to the server yet.
 */
int kube_new(struct kube_config *cfg, const struct kube_client_opts *opts,
	struct kube **out, struct cairn_err *err);
/*
 * kube_config_load + kube_new from the cluster flags: F_KUBECONFIG,
 * F_CONTEXT, F_QPS, F_BURST, F_REQUEST_TIMEOUT.
 */
int kube_open_flags(const struct flagset *fs, struct kube **out,
	struct cairn_err *err);
/*
 * How long a request keeps retrying when it cannot connect at all (set
 * before the client is shared between threads). A CLI answers within the
 * default 2 s; a server rides out an API server restart with more.
 */
void kube_set_connect_wait(struct kube *k, int64_t us);
/*
 * Ask the server to refuse fields its schema does not declare in this
 * client's kube_create/kube_update/kube_update_status/kube_patch
 * (fieldValidation=Strict: 400 "strict decoding error: unknown field
 * ..."), as kubectl does, instead of the server's default (Warn: dropped,
 * with only a Warning header). Set before the client is shared between
 * threads. The CLI sets it: what a user asked for is never dropped.
 */
void kube_set_strict_fields(struct kube *k, int on);
/* Free the client; no request may be running. NULL is fine. */
void kube_free(struct kube *k);

/* Borrowed, valid for the life of k. */
const char *kube_server(const struct kube *k);
/* The context's (or service account's) namespace, "default" if none. */
const char *kube_namespace(const struct kube *k);
const struct kube_config *kube_config(const struct kube *k);

struct kube_stats {
	uint64_t requests;	/* HTTP requests sent (attempts) */
	uint64_t retries;	/* attempts that were retries */
	uint64_t throttled_us;	/* time spent waiting for the rate limiter */
	uint64_t connections;	/* new TCP connections libcurl opened */
	uint64_t pushed_back;	/* 429 replies (the server's push-back) */
	uint64_t held_us;	/* time requests waited on a held flow */
};
void kube_stats(struct kube *k, struct kube_stats *out);

/* The API Status of a failed (or the code of a successful) request. */
#define KUBE_REASON_MAX 64
#define KUBE_MESSAGE_MAX 512
struct kube_status {
	int http;			/* HTTP status; 0: no reply (transport) */
	int rc;				/* the enum cairn_rc returned */
	char reason[KUBE_REASON_MAX];	/* Status.reason: "Conflict", "" */
	char message[KUBE_MESSAGE_MAX];	/* Status.message, or curl's error */
	int64_t retry_after_s;		/* Retry-After seen, -1 none */
};
/*
 * Status of the last request completed by the calling thread (through any
 * client). Borrowed, thread-local; overwritten by the next request.
 */
const struct kube_status *kube_last_status(void);

/*
 * A raw request: method, path with query ("/version", "/apis"), optional
 * body (content_type NULL means application/json). On 2xx *out (may be
 * NULL) gets the parsed reply (NULL for an empty body). idempotent: may the
 * request be re-sent after a connection failure (GET always is).
 */
int kube_request(struct kube *k, const char *method, const char *path,
	const char *content_type, const char *body, size_t body_len,
	int idempotent, cJSON **out, struct cairn_err *err);

/* ------------------------------------------------------------------ */
/* Resources and discovery (kube/discovery.c)                          */
/* ------------------------------------------------------------------ */

/* What a request addresses: group ("" or NULL: core), version, plural. */
struct kube_gvr {
	const char *group;
	const char *version;
	const char *resource;
};
#define KUBE_GVR(g, v, r) ((struct kube_gvr){ (g), (v), (r) })

/* Verb bits of a discovered resource. */
#define KUBE_VERB_GET		0x001u
#define KUBE_VERB_LIST		0x002u
#define KUBE_VERB_WATCH		0x004u
#define KUBE_VERB_CREATE	0x008u
#define KUBE_VERB_UPDATE	0x010u
#define KUBE_VERB_PATCH		0x020u
#define KUBE_VERB_DELETE	0x040u
#define KUBE_VERB_DELETECOLLECTION 0x080u

struct kube_resource {
	char *group;		/* "" for core */
	char *version;		/* "v1" */
	char *group_version;	/* "apps/v1", "v1" for core */
	char *resource;		/* plural: "deployments" */
	char *singular;		/* "deployment" (may be "") */
	char *kind;		/* "Deployment" */
	char **short_names;	/* NULL-terminated, never NULL */
	char **categories;	/* NULL-terminated, never NULL */
	char **subresources;	/* "status", "scale"... NULL-terminated, never NULL */
	unsigned verbs;		/* KUBE_VERB_* */
	int namespaced;
	int preferred;		/* version is the group's preferred version */
	/*
	 * The version used when none is named (client-go
	 * ServerPreferredResources): the preferred version if it serves
	 * the resource, else the first version of the group that does.
	 */
	int chosen;
};
/* The gvr of r (borrowed strings). */
struct kube_gvr kube_resource_gvr(const struct kube_resource *r);
int kube_resource_has_sub(const struct kube_resource *r, const char *sub);
struct kube_resource *kube_resource_dup(const struct kube_resource *r);
void kube_resource_free(struct kube_resource *r);

struct kube_group {
	char *name;		/* "" for core */
	char *preferred;	/* preferred version */
	char **versions;	/* served versions, server order, NULL-terminated */
};

/*
 * The client's discovery snapshot: loaded on first use, reloaded when
 * refresh is non-zero (or it is older than 10 minutes). The snapshot is
 * immutable and reference-counted: release it with
 * kube_discovery_release(); it stays valid while others refresh.
 * Group-versions that fail to load (503 of an aggregated API) are left
 * out, logged and listed in kube_discovery_failed_at(); such a request is
 * retried at most once, and one that failed less than 30 s ago is not
 * sent again (its failure is carried over), so a dead aggregated API
 * costs every refresh at most one quick request. A 404 (a CRD deleted
 * meanwhile) is no failure. Failure of /api or /apis, and 401/403 on any
 * group-version, is an error.
 */
int kube_discovery_get(struct kube *k, int refresh,
	struct kube_discovery **out, struct cairn_err *err);
void kube_discovery_release(struct kube_discovery *d);

/* Every resource of every served group-version, subresources excluded. */
size_t kube_discovery_count(const struct kube_discovery *d);
const struct kube_resource *kube_discovery_at(const struct kube_discovery *d,
	size_t i);
size_t kube_discovery_group_count(const struct kube_discovery *d);
const struct kube_group *kube_discovery_group_at(
	const struct kube_discovery *d, size_t i);

/* A group-version whose discovery failed (client-go ErrGroupDiscoveryFailed). */
struct kube_disc_failure {
	char *group;		/* "" for core */
	char *version;
	char *message;		/* "GET /apis/G/V: ServiceUnavailable (HTTP 503): ..." */
	int64_t at_us;		/* monotonic time of the request that failed */
};
size_t kube_discovery_failed_count(const struct kube_discovery *d);
const struct kube_disc_failure *kube_discovery_failed_at(
	const struct kube_discovery *d, size_t i);

/*
 * Find a resource. group NULL: any group (core first, then server order);
 * version NULL: its chosen version (the group's preferred one, else the
 * first that serves it). name matches the plural, singular, kind
 * (case-insensitive) or a short name. Borrowed or NULL.
 */
const struct kube_resource *kube_discovery_find(const struct kube_discovery *d,
	const char *group, const char *version, const char *name);
/*
 * Find by a kubectl-style argument: "deployments", "deployments.apps",
 * "deployments.v1.apps", "Deployment", "deploy". Borrowed or NULL.
 */
const struct kube_resource *kube_discovery_lookup(
	const struct kube_discovery *d, const char *arg);
/*
 * Call fn for every resource in its chosen version (ServerPreferredResources)
 * that has the list verb (what a backup walks), in discovery order. fn
 * returning non-zero stops the walk and that value is returned.
 */
int kube_discovery_foreach_listable(const struct kube_discovery *d,
	int (*fn)(void *arg, const struct kube_resource *r), void *arg);

/*
 * Resolve with the client's snapshot, refreshing it once when the name or
 * group-version is unknown (e.g. a CRD created since). *out is an owned
 * copy (kube_resource_free). CAIRN_ENOTFOUND when still unknown.
 * arg as kube_discovery_lookup; version NULL: the chosen version, as
 * ServerPreferredResources (backups and restores resolve kinds alike).
 */
int kube_resolve(struct kube *k, const char *arg, const char *version,
	struct kube_resource **out, struct cairn_err *err);

/* ------------------------------------------------------------------ */
/* Objects (kube/objects.c)                                            */
/* ------------------------------------------------------------------ */

/*
 * The URL path of a collection or item: "/apis/G/V[/namespaces/NS]/R[/NAME[/SUB]]".
 * ns NULL or "": cluster scope or all namespaces; name NULL: collection.
 * Path segments are percent-escaped. Owned.
 */
char *kube_path(const struct kube_gvr *r, const char *ns, const char *name,
	const char *sub);

/* GET one object. */
int kube_get(struct kube *k, const struct kube_gvr *r, const char *ns,
	const char *name, cJSON **out, struct cairn_err *err);
/*
 * POST obj to the collection (ns from the argument, not the object).
 * *out (may be NULL) gets the created object. Exists: CAIRN_EEXIST.
 */
int kube_create(struct kube *k, const struct kube_gvr *r, const char *ns,
	const cJSON *obj, cJSON **out, struct cairn_err *err);
/*
 * PUT obj (name from metadata.name). The server checks
 * metadata.resourceVersion when set (it must be for custom resources and
 * Leases): stale -> CAIRN_ECONFLICT. Retried after a connection failure
 * only when obj carries a resourceVersion (then a repeat cannot apply twice).
 */
int kube_update(struct kube *k, const struct kube_gvr *r, const char *ns,
	const cJSON *obj, cJSON **out, struct cairn_err *err);
/* PUT to the status subresource: only .status is taken by the server. */
int kube_update_status(struct kube *k, const struct kube_gvr *r,
	const char *ns, const cJSON *obj, cJSON **out, struct cairn_err *err);

enum kube_patch_type {
	KUBE_PATCH_MERGE,	/* application/merge-patch+json (RFC 7386) */
	KUBE_PATCH_JSON,	/* application/json-patch+json (RFC 6902) */
	KUBE_PATCH_STRATEGIC,	/* application/strategic-merge-patch+json */
};
/*
 * PATCH an object (sub NULL) or a subresource ("status"). patch is JSON
 * text. A failed JSON-patch op -> CAIRN_EINVAL; a resourceVersion in the
 * patch that is stale -> CAIRN_ECONFLICT. Never retried after a
 * connection failure.
 */
int kube_patch(struct kube *k, const struct kube_gvr *r, const char *ns,
	const char *name, const char *sub, enum kube_patch_type type,
	const char *patch, cJSON **out, struct cairn_err *err);

struct kube_delete_opts {
	const char *uid;		/* precondition, NULL: none */
	const char *resource_version;	/* precondition, NULL: none */
	const char *propagation;	/* "Background", "Foreground", "Orphan", NULL */
	int64_t grace_seconds;		/* 0: server default; > 0: seconds;
					   KUBE_GRACE_NOW: immediately (0) */
};
#define KUBE_GRACE_NOW (-1)
/*
 * DELETE with optional preconditions (mismatch: CAIRN_ECONFLICT). opts may
 * be NULL. *out (may be NULL) gets the reply: the object (custom resources,
 * or with finalizers pending) or a Success Status.
 */
int kube_delete(struct kube *k, const struct kube_gvr *r, const char *ns,
	const char *name, const struct kube_delete_opts *opts, cJSON **out,
	struct cairn_err *err);

/* ------------------------------------------------------------------ */
/* Paged, streamed lists (kube/list.c)                                 */
/* ------------------------------------------------------------------ */

/*
 * Item callback: item is complete (apiVersion and kind filled from the list
 * envelope if the server left them out) and owned by kube_list, freed
 * after the call, unless the callback returns KUBE_TAKE (then the callback
 * owns it). Any other non-zero return stops the list; kube_list returns it.
 */
#define KUBE_TAKE 1
typedef int (*kube_item_fn)(void *arg, cJSON *item);

#define KUBE_GONE_FAIL 0
#define KUBE_GONE_RESTART 1
#define KUBE_GONE_RESUME 2

/*
 * The order items of a list come in: etcd's key order, the bytes of
 * "namespace/name" (ns NULL or "" for cluster-scoped objects: by name).
 * Note "a-b/x" < "a/x": it is not (namespace, name) compared in turn.
 * Negative, 0, positive as strcmp.
 */
int kube_key_cmp(const char *ns_a, const char *name_a, const char *ns_b,
	const char *name_b);

struct kube_list_opts {
	const char *label_selector;	/* NULL: all */
	const char *field_selector;	/* NULL: all */
	int limit;			/* page size; 0: 500; < 0: no paging */
	const char *resource_version;	/* NULL: most recent; "0": any */
	/*
	 * An expired continue token (410) in the middle:
	 * KUBE_GONE_FAIL (0): return CAIRN_EGONE (items seen so far were
	 *   delivered; the caller relists);
	 * KUBE_GONE_RESTART (1): call on_restart (if set) and list again
	 *   from the start, so the callback sees items again (at most 3
	 *   restarts);
	 * KUBE_GONE_RESUME (2): go on past the last item delivered, from
	 *   the inconsistent continue token of the 410's Status (the rest
	 *   of the collection at its latest state) or else from the first
	 *   page of a new list, skipping every item up to that key: each
	 *   item once, in key order. Objects created meanwhile before that
	 *   key are not seen (the list had passed their place), deleted
	 *   ones are gone. CAIRN_EGONE after 3 expiries in a row with no
	 *   item delivered between them.
	 */
	int restart_on_gone;
	int (*on_restart)(void *arg);
	const atomic_int *stop;	/* non-zero: stop with CAIRN_ECANCELED */
	/*
	 * Start at this continue token (from an earlier list of the same
	 * collection and selectors) instead of the first page: the list goes
	 * on as that earlier one would have, in its snapshot. NULL or "":
	 * the first page. An expired token is handled as any other 410
	 * (restart_on_gone), and a restart begins at the first page.
	 */
	const char *continue_token;
	/*
	 * Called before each page is requested (with prefetch: before its
	 * items are delivered) with the continue token that fetches it (""
	 * for the first page), so a caller can record where each item came
	 * from; a page fetched again after a break is not announced again.
	 * Non-zero stops the list with that value. NULL: not called.
	 */
	int (*on_page)(void *arg, const char *cont);
	/*
	 * Fetch pages ahead on another thread while the callback works
	 * through this one (kube/lists.c, within its memory bounds), so the
	 * API server's time and the caller's overlap. on_page is then
	 * called before each page's items are delivered. Not with
	 * KUBE_GONE_RESTART (that list is streamed as without it).
	 */
	int prefetch;
	/*
	 * Parse only these members of each item (NULL-terminated, as
	 * json_parse_members: "metadata" or paths such as
	 * "metadata.labels"; apiVersion and kind always for kube_list):
	 * the callback's tree holds nothing else, which saves most of the
	 * parsing for a caller that needs little of each object.
	 * kube_list_text still hands over the whole text, and only the text
	 * carries the apiVersion and kind filled in (the tree has them when
	 * the server sent them). Items sent with spaces between tokens are
	 * parsed whole, and filled in, since their text is printed from the
	 * tree. NULL: whole items.
	 */
	const char *const *parse_only;
	/*
	 * Items nested deeper than CAIRN_JSON_MAX_DEPTH (what json_parse()
	 * and restores refuse) are not given to the item callback when this
	 * is set: it gets the item's tree (as parse_only has it) and depth
	 * instead; a non-zero return stops the list. NULL: such items are
	 * delivered as any other (kube_list_text) or refused by the parse
	 * (kube_list). The depth comes from the scan that splits the page,
	 * so no item is scanned again for it.
	 */
	int (*on_too_deep)(void *arg, cJSON *item, int depth);
};

struct kube_list_info {
	char resource_version[64];	/* list RV of the last page: start a watch here */
	uint64_t items;			/* items delivered */
	uint64_t pages;			/* pages fetched */
	int restarts;			/* restarts or resumes after 410 */
};

/*
 * List a collection page by page, delivering items one by one while each
 * page streams in: memory stays flat however many objects there are (one
 * item is buffered at a time, capped by CAIRN_CAP_API_BODY). ns NULL: all
 * namespaces. opts and info may be NULL. A page that fails mid-way is
 * fetched again (same continue token) and its items up to the key of the
 * last one delivered (kube_key_cmp) are skipped, so each item is
 * delivered once even when objects came or went between the fetches. The callback runs while
 * the page is streaming and may take its time: the request timeout applies
 * to inactivity (no byte received and no callback returning), not to the
 * whole page.
 */
int kube_list(struct kube *k, const struct kube_gvr *r, const char *ns,
	const struct kube_list_opts *opts, kube_item_fn fn, void *arg,
	struct kube_list_info *info, struct cairn_err *err);


/*
 * Item callback of kube_list_text(): item as for kube_item_fn (owned by
 * the list and freed after the call unless the callback returns
 * KUBE_TAKE), plus text/len: the item as compact JSON, borrowed for the
 * call only, NUL-terminated. It is the text the server sent when that was
 * compact, with apiVersion and kind inserted after the opening brace when
 * the server left them out (the same values item got); otherwise (spaces
 * between tokens) cJSON's compact print of item.
 */
typedef int (*kube_item_text_fn)(void *arg, cJSON *item, const char *text,
	size_t len);

/*
 * kube_list() that also hands over each item's JSON text, so a caller
 * that stores items need not print the tree again. Same paging, retries,
 * restarts and errors as kube_list().
 */
int kube_list_text(struct kube *k, const struct kube_gvr *r, const char *ns,
	const struct kube_list_opts *opts, kube_item_text_fn fn, void *arg,
	struct kube_list_info *info, struct cairn_err *err);

/* ------------------------------------------------------------------ */
/* Several lists at once (kube/lists.c)                                */
/* ------------------------------------------------------------------ */

/*
 * A caller that reads many collections in a fixed order (a backup: each
 * resource, and with a namespace filter each namespace of each) queues
 * them all in a struct kube_lists: their pages (and single objects, by
 * name) are fetched on up to `concurrency` requests at once, ahead of the
 * caller, in the order queued, and kube_lists_take() delivers one list's
 * items on the caller's thread exactly as kube_list_text() does (key
 * order, skip by key after a broken page or a 410 with
 * KUBE_GONE_RESUME, on_page before each page's items), so what the
 * caller sees does not depend on the concurrency, only how long it
 * waits. A page is fetched once however large: the list being taken
 * is read while its page arrives; pages fetched ahead are held in memory
 * up to mem_max bytes in all, and beyond that in an unlinked temporary
 * file; no list after the one being taken starts a page while ahead_max
 * bytes are buffered, and a page ahead that grows past ahead_max on its
 * own is dropped and fetched again once its list is taken (the only
 * bytes ever fetched twice). The fetcher of the list being taken waits
 * when more than half of mem_max of it is buffered (the caller is
 * slower than the network), as a streamed list does.
 */
#define KUBE_LISTS_CONCURRENCY	8		/* requests in flight */
#define KUBE_LISTS_MEM_MAX	(2u << 20)	/* pages held in memory */
#define KUBE_LISTS_AHEAD_MAX	(32u << 20)	/* pages fetched ahead */
struct kube_lists_opts {
	int concurrency;	/* requests in flight; 0: the default */
	size_t mem_max;		/* 0: KUBE_LISTS_MEM_MAX */
	size_t ahead_max;	/* 0: KUBE_LISTS_AHEAD_MAX */
	const char *spool_dir;	/* NULL: $TMPDIR, else /tmp */
	const atomic_int *stop;	/* non-zero: stop (CAIRN_ECANCELED) */
};
struct kube_lists;

/* Start the fetchers. On failure *out is NULL. */
int kube_lists_open(struct kube *k, const struct kube_lists_opts *o,
	struct kube_lists **out, struct cairn_err *err);
/*
 * Queue a list of r in ns (NULL: all namespaces) with opts as for
 * kube_list_text() (copied; parse_only and the callbacks are borrowed
 * until it is taken; prefetch, on_restart and KUBE_GONE_RESTART do not
 * apply). flags: KUBE_LISTS_COUNT adds its count to kube_lists_pending().
 * Returns its number: 0, 1, 2... in the order queued.
 */
#define KUBE_LISTS_COUNT 1
int kube_lists_add(struct kube_lists *m, const struct kube_gvr *r,
	const char *ns, const struct kube_list_opts *opts, int flags);
/*
 * Queue the one object r/ns/name as a list of one item (none when it
 * does not exist); opts as for kube_lists_add() (selectors and paging
 * do not apply); with KUBE_LISTS_COUNT it counts as 1 at once.
 */
int kube_lists_add_get(struct kube_lists *m, const struct kube_gvr *r,
	const char *ns, const char *name, const struct kube_list_opts *opts,
	int flags);
/*
 * Deliver list id's items to fn (arg) as kube_list_text() would; id must
 * be the next in order (every earlier one taken or skipped). Returns
 * what kube_list_text() would; the list is done with either way.
 */
int kube_lists_take(struct kube_lists *m, int id, kube_item_text_fn fn,
	void *arg, struct kube_list_info *info, struct cairn_err *err);
/* List id (the next in order) is not wanted: dropped unread. */
void kube_lists_skip(struct kube_lists *m, int id);
/*
 * Items the KUBE_LISTS_COUNT lists not yet taken will give, as far as
 * their first pages said (the page's items plus remainingItemCount; a
 * list the server does not count, under a label selector, adds
 * nothing). Grows as first pages arrive.
 */
int64_t kube_lists_pending(struct kube_lists *m);
/*
 * Wait (at most timeout_us) until the first page of every
 * KUBE_LISTS_COUNT list queued so far is in (so kube_lists_pending() is
 * the whole count), or no more can come before the caller takes some
 * (the bytes ahead are at their bound, or every fetcher waits for the
 * caller to read the first list: concurrency 1).
 */
void kube_lists_wait_counted(struct kube_lists *m, int64_t timeout_us);
/* Stop the fetchers and free everything. NULL is fine. */
void kube_lists_free(struct kube_lists *m);

/* ------------------------------------------------------------------ */
/* Watches and informers (kube/watch.c)                                */
/* ------------------------------------------------------------------ */

enum kube_event_type {
	KUBE_EV_ADDED,
	KUBE_EV_MODIFIED,
	KUBE_EV_DELETED,
	KUBE_EV_BOOKMARK,
	KUBE_EV_ERROR,		/* object is a Status */
};
const char *kube_event_name(enum kube_event_type t);	/* "ADDED"... */

/*
 * Event callback: object owned by the watch unless KUBE_TAKE is returned;
 * other non-zero returns stop the watch and are returned. ERROR events
 * with code 410 are not delivered: the watch returns CAIRN_EGONE; other
 * ERROR events are delivered, and the end of the stream that follows is
 * a failure (see reconnect).
 */
typedef int (*kube_event_fn)(void *arg, enum kube_event_type type,
	cJSON *object);

struct kube_watch_opts {
	const char *label_selector;
	const char *field_selector;
	/*
	 * Start after this RV. NULL/"": the current state arrives as ADDED
	 * events first; a reconnect then resumes from the last object's RV,
	 * which may replay a few events. For an exact resume start from a
	 * list's resourceVersion (as the informer does).
	 */
	const char *resource_version;
	int bookmarks;			/* ask for BOOKMARK events */
	int timeout_s;			/* server-side timeoutSeconds per connection; 0: 300 */
	/*
	 * 0: one connection; returns 0 when the server ends it, the mapped
	 *    error when it ended it with an ERROR event (other than 410).
	 * 1: reconnect after an end or a dropped connection, resuming from
	 *    the last resourceVersion seen (events and bookmarks): at once
	 *    after a clean end, with backoff (100 ms doubling to 10 s,
	 *    jittered) after a drop or an ERROR event such as a 500 or 429.
	 */
	int reconnect;
	const atomic_int *stop;	/* non-zero: return CAIRN_ECANCELED within ~1 s */
};

/*
 * Watch a collection, calling fn per event as lines arrive, however chunks
 * split them. rv_out (may be NULL) receives the last resourceVersion seen
 * (owned, also on failure; NULL if none). Returns 0 (server ended, no
 * reconnect), CAIRN_EGONE (410 as HTTP status or ERROR event: relist),
 * CAIRN_ECANCELED (stop), a callback's value, or an error.
 */
int kube_watch(struct kube *k, const struct kube_gvr *r, const char *ns,
	const struct kube_watch_opts *opts, kube_event_fn fn, void *arg,
	char **rv_out, struct cairn_err *err);

/*
 * Informer: list, then watch from the list's resourceVersion, relist on
 * 410 Gone, reconnect on dropped connections; keeps a cache keyed by
 * namespace/name and calls back on changes. Callbacks run on the thread
 * that runs the informer, one at a time; objects are borrowed (valid for
 * the call). After a relist, objects that vanished get on_delete and
 * changed ones on_update (update is skipped when the resourceVersion did
 * not change).
 */
struct kube_informer_cbs {
	void (*on_add)(void *arg, const cJSON *obj);
	void (*on_update)(void *arg, const cJSON *old_obj, const cJSON *obj);
	void (*on_delete)(void *arg, const cJSON *obj);
	void (*on_synced)(void *arg);	/* after each complete (re)list */
};

struct kube_informer_opts {
	const char *label_selector;
	const char *field_selector;
	int page_size;			/* list page; 0: 500 */
	int watch_timeout_s;		/* per watch connection; 0: 300 */
};

/* Create (nothing runs yet); opts may be NULL; strings are copied. */
int kube_informer_new(struct kube *k, const struct kube_gvr *r,
	const char *ns, const struct kube_informer_opts *opts,
	const struct kube_informer_cbs *cbs, void *arg,
	struct kube_informer **out, struct cairn_err *err);
/*
 * Run in the calling thread until kube_informer_stop() (returns 0) or a
 * fatal error (401/403, resource gone from the server: returns it).
 * Transient failures are retried with backoff.
 */
int kube_informer_run(struct kube_informer *inf, struct cairn_err *err);
/* Run in a new thread. */
int kube_informer_start(struct kube_informer *inf, struct cairn_err *err);
/* Ask to stop; safe from any thread and from a callback. */
void kube_informer_stop(struct kube_informer *inf);
/* Non-zero once the first list completed. */
int kube_informer_synced(struct kube_informer *inf);
/* Cached copy of an object (owned) or NULL. Thread-safe. */
cJSON *kube_informer_get(struct kube_informer *inf, const char *ns,
	const char *name);
size_t kube_informer_count(struct kube_informer *inf);
/* Stop, join the thread if started, free. NULL is fine. */
void kube_informer_free(struct kube_informer *inf);

/* ------------------------------------------------------------------ */
/* Exec in a pod's container (kube/exec.c)                             */
/* ------------------------------------------------------------------ */

#define KUBE_EXEC_OUTPUT_CAP (64u << 10)	/* bytes kept per stream */
#define KUBE_EXEC_TIMEOUT_US (30LL * 1000000)	/* default whole-exec timeout */

struct kube_exec_opts {
	const char *container;		/* NULL or "": the pod's first container */
	/*
	 * The pod as the caller read it (borrowed): its containers and phase
	 * are checked instead of GETting it first. NULL: GET it.
	 */
	const cJSON *pod;
	const char *const *command;	/* argv, NULL-terminated, at least one */
	size_t output_cap;		/* bytes kept of stdout and of stderr
					   each; 0: KUBE_EXEC_OUTPUT_CAP */
	int64_t timeout_us;		/* the whole exec, connect included;
					   0: KUBE_EXEC_TIMEOUT_US */
	const atomic_int *stop;	/* non-zero: CAIRN_ECANCELED within ~0.1 s */
};

struct kube_exec_result {
	int exit_code;			/* the command's exit code; -1 unknown */
	char *out, *err;		/* stdout / stderr as received, the first
					   output_cap bytes, NUL-terminated, owned */
	size_t out_len, err_len;	/* bytes kept */
	uint64_t out_total, err_total;	/* bytes received */
	char container[254];		/* the container it ran in */
	char protocol[32];		/* "v5.channel.k8s.io", "v4.channel.k8s.io" */
};

/*
 * Run a command in a container of pod ns/name through the API server, as
 * `kubectl exec` does: a GET of the pod first, unless o->pod is given (so
 * a missing pod or container, or a pod that has ended, is a clear
 * CAIRN_ENOTFOUND / CAIRN_EINVAL), then the pods/exec subresource upgraded to a WebSocket
 * (libwebsockets) offering v5.channel.k8s.io, then v4.channel.k8s.io;
 * stdout and stderr are captured (capped), no stdin, no TTY. The
 * connection authenticates as every other request of k does (bearer
 * token, client certificate, CA, tls-server-name; a 401 re-reads the
 * token once).
 *
 * Returns 0 when the command ran to its end: res->exit_code is its exit
 * code (0 or not; the Status on the error channel says). Otherwise res
 * keeps what arrived and: CAIRN_ETIMEOUT (o->timeout_us passed; the
 * connection is closed), CAIRN_ECANCELED (stop), CAIRN_EAUTH (the
 * upgrade was refused with 401/403: RBAC needs get and create on
 * pods/exec), CAIRN_ENET (connection or TLS), CAIRN_ESERVER (the server
 * reported a failure without an exit code, e.g. the container is not
 * running or the command could not start: its message is in err),
 * CAIRN_EPROTO (the stream ended without a Status). res is always filled
 * (free with kube_exec_result_free).
 */
int kube_exec(struct kube *k, const char *ns, const char *name,
	const struct kube_exec_opts *o, struct kube_exec_result *res,
	struct cairn_err *err);
void kube_exec_result_free(struct kube_exec_result *res);

/* ------------------------------------------------------------------ */
/* Label selectors (kube/selector.c)                                   */
/* ------------------------------------------------------------------ */

/*
 * Parse a label selector: `k=v`, `k==v`, `k!=v`, `k in (a,b)`,
 * `k notin (a,b)`, `k`, `!k`, comma = AND; keys and values validated as
 * Kubernetes does (qualified names, values <= 63 chars). "" or NULL
 * matches everything. On error *out is NULL and err says where
 * (CAIRN_EINVAL).
 */
int kube_selector_parse(const char *s, struct kube_selector **out,
	struct cairn_err *err);
/* Match a labels object (NULL or not an object: no labels). */
int kube_selector_match(const struct kube_selector *sel, const cJSON *labels);
/* Match obj's metadata.labels. */
int kube_selector_match_object(const struct kube_selector *sel,
	const cJSON *obj);
int kube_selector_empty(const struct kube_selector *sel);
/* Canonical text, suitable for ?labelSelector=. Owned. */
char *kube_selector_string(const struct kube_selector *sel);
/*
 * Parse selector text (as kube_selector_parse()) into the
 * metav1.LabelSelector object a spec holds: k=v and k==v in matchLabels
 * (a second value for one key as an In expression), k!=v as NotIn [v],
 * in, notin, k and !k as In, NotIn, Exists, DoesNotExist. k>N and k<N have
 * no LabelSelector form: CAIRN_EINVAL. *out owned by the caller; NULL on
 * error.
 */
int kube_selector_object(const char *text, cJSON **out,
	struct cairn_err *err);
/*
 * The reverse: a metav1.LabelSelector JSON object as selector text
 * ("a=b,c in (x,y),!d"). NULL sel gives "". CAIRN_EINVAL with a message
 * for an unknown operator or a malformed part. *out owned.
 */
int kube_selector_text(const cJSON *sel, char **out, struct cairn_err *err);
void kube_selector_free(struct kube_selector *sel);

#endif
