/*
 * discovery.c: which group-versions and resources the server serves.
 *
 * Aggregated discovery (apidiscovery.k8s.io v2, GA in Kubernetes 1.30;
 * v2beta1 since 1.26) first, as kubectl asks: /api and /apis answer with
 * every group-version's resources, two requests in all. A server that
 * does not speak it answers the plain (legacy) documents, application/json
 * being the last type accepted, and discovery goes on as every server
 * allows: GET /api/<v> and /apis/<g>/<v> for every served group-version.
 * Both build the same snapshot (an aggregated resource is turned into the
 * APIResourceList entries plain discovery gives for it); a group-version
 * the aggregated answer marks Stale (its API service did not answer) is a
 * failure, as client-go counts it, like a 503 of its plain request.
 * The result is an immutable, reference-counted snapshot; the client keeps
 * the latest one and replaces it on refresh, so readers never see a
 * snapshot change under them. Subresources ("backups/status") are folded
 * into their parent's `subresources` list.
 *
 * Refresh: explicitly (kube_discovery_get(k, 1, ...)), when the snapshot is
 * older than 10 minutes, and by kube_resolve() when a name is unknown (a
 * CRD created since) unless another thread refreshed meanwhile.
 *
 * Which version of a resource: as client-go's ServerPreferredResources,
 * the group's preferred version when it serves the resource, else the
 * first version of the group (server order) that does. That version's
 * entry is `chosen`; lookups without a version and the backup's walk use
 * it, so a kind served only in a non-preferred version (Istio's
 * EnvoyFilter in v1alpha3 next to v1) is found.
 *
 * Failures: a group-version that does not answer (an aggregated API whose
 * service is down answers 503) is left out of the snapshot and recorded
 * in its failure list, as client-go's ErrGroupDiscoveryFailed; a 404 (a
 * CRD deleted since /apis) is no failure. A 503 is retried at most once
 * (other transient failures, a 500 or a dropped connection, up to three
 * calls more, 0.7 s of backoff) and never waits long (the discovery lock is held, and every
 * backup refreshes at its start), and a group-version that failed less
 * than DISC_FAIL_TTL_US ago is not asked again: the new snapshot carries
 * the failure over.
 *
 * Round trips: /api and /apis are asked at once; plain discovery then asks
 * every group-version at once (up to DISC_PARALLEL requests in flight),
 * and their answers are taken in server order, so the snapshot is the one
 * a serial walk would build: against an API server 20 ms away a discovery
 * of 16 group-versions took 16 round trips, now 2 (issue 27); aggregated
 * discovery takes 1, and opens no connection per group-version (a new
 * process paid a TLS handshake for each of up to DISC_PARALLEL).
 */
#include "config.h"
#include "kube/internal.h"
#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DISC_MAX_AGE_US (600 * TIME_US_PER_SEC)
#define DISC_FAIL_TTL_US (30 * TIME_US_PER_SEC)	/* not asked again before */
#define DISC_GV_RETRIES 1			/* one group-version request */
#define DISC_GV_HICCUP_TRIES 3		/* more calls after a non-503 failure */
#define DISC_GV_MAX_DELAY_US TIME_US_PER_SEC	/* no longer Retry-After */
#define DISC_PARALLEL 8				/* group-versions asked at once */
/* kubectl's order: aggregated v2, v2beta1, else the plain documents */
#define DISC_ACCEPT "application/json;g=apidiscovery.k8s.io;v=v2;" \
	"as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;" \
	"v=v2beta1;as=APIGroupDiscoveryList,application/json"

struct kube_discovery {
	atomic_int refs;
	struct kube_resource **res;	/* owned, subresources folded in */
	size_t nres, ares;
	struct kube_group *groups;	/* owned; core ("") first */
	size_t ngroups, agroups;
	struct kube_disc_failure *failed;	/* owned */
	size_t nfailed;
};

static char **
strv_new(void)
{
	return xcalloc(1, sizeof(char *));
}


void
kube_resource_free(struct kube_resource *r)
{
	if (r == NULL)
		return;
	free(r->group);
	free(r->version);
	free(r->group_version);
	free(r->resource);
	free(r->singular);
	free(r->kind);
	strv_free(r->short_names);
	strv_free(r->categories);
	strv_free(r->subresources);
	free(r);
}

static char **
strv_dup(char *const *v)
{
	char **o = strv_new();
	size_t i;

	for (i = 0; v != NULL && v[i] != NULL; i++)
		o = strv_push(o, v[i]);
	return o;
}

struct kube_resource *
kube_resource_dup(const struct kube_resource *r)
{
	struct kube_resource *o = xcalloc(1, sizeof *o);

	o->group = xstrdup(r->group);
	o->version = xstrdup(r->version);
	o->group_version = xstrdup(r->group_version);
	o->resource = xstrdup(r->resource);
	o->singular = xstrdup(r->singular);
	o->kind = xstrdup(r->kind);
	o->short_names = strv_dup(r->short_names);
	o->categories = strv_dup(r->categories);
	o->subresources = strv_dup(r->subresources);
	o->verbs = r->verbs;
	o->namespaced = r->namespaced;
	o->preferred = r->preferred;
	o->chosen = r->chosen;
	return o;
}

struct kube_gvr
kube_resource_gvr(const struct kube_resource *r)
{
	return KUBE_GVR(r->group, r->version, r->resource);
}

int
kube_resource_has_sub(const struct kube_resource *r, const char *sub)
{
	return strv_contains(r->subresources, sub);
}

static void
disc_free(struct kube_discovery *d)
{
	size_t i;

	for (i = 0; i < d->nres; i++)
		kube_resource_free(d->res[i]);
	free(d->res);
	for (i = 0; i < d->ngroups; i++) {
		free(d->groups[i].name);
		free(d->groups[i].preferred);
		strv_free(d->groups[i].versions);
	}
	free(d->groups);
	for (i = 0; i < d->nfailed; i++) {
		free(d->failed[i].group);
		free(d->failed[i].version);
		free(d->failed[i].message);
	}
	free(d->failed);
	free(d);
}

static void
add_failure(struct kube_discovery *d, const char *group, const char *version,
    const char *message, int64_t at_us)
{
	struct kube_disc_failure *f;

	d->failed = xreallocarray(d->failed, d->nfailed + 1, sizeof *d->failed);
	f = &d->failed[d->nfailed++];
	f->group = xstrdup(group);
	f->version = xstrdup(version);
	f->message = xstrdup(message);
	f->at_us = at_us;
}

static const struct kube_disc_failure *
find_failure(const struct kube_discovery *d, const char *group,
    const char *version)
{
	for (size_t i = 0; d != NULL && i < d->nfailed; i++)
		if (strcmp(d->failed[i].group, group) == 0 &&
		    strcmp(d->failed[i].version, version) == 0)
			return &d->failed[i];
	return NULL;
}

/*
 * Mark each resource's chosen version (client-go ServerPreferredResources):
 * the preferred version's entry, else the first version of its group, in
 * server order, that serves it. Resources are in group order, then the
 * group's version order.
 */
static void
choose_versions(struct kube_discovery *d)
{
	for (size_t i = 0; i < d->nres; i++) {
		struct kube_resource *r = d->res[i];
		int chosen = 1;

		if (r->preferred) {
			r->chosen = 1;
			continue;
		}
		for (size_t j = 0; j < d->nres && chosen; j++) {
			const struct kube_resource *o = d->res[j];

			if (j == i || strcmp(o->group, r->group) != 0 ||
			    strcmp(o->resource, r->resource) != 0)
				continue;
			if (o->preferred || j < i)
				chosen = 0;
		}
		r->chosen = chosen;
	}
}

void
kube_disc_ref(struct kube_discovery *d)
{
	atomic_fetch_add(&d->refs, 1);
}

void
kube_discovery_release(struct kube_discovery *d)
{
	if (d != NULL && atomic_fetch_sub(&d->refs, 1) == 1)
		disc_free(d);
}

static unsigned
parse_verbs(const cJSON *arr)
{
	static const struct { const char *n; unsigned bit; } tab[] = {
		{ "get", KUBE_VERB_GET }, { "list", KUBE_VERB_LIST },
		{ "watch", KUBE_VERB_WATCH }, { "create", KUBE_VERB_CREATE },
		{ "update", KUBE_VERB_UPDATE }, { "patch", KUBE_VERB_PATCH },
		{ "delete", KUBE_VERB_DELETE },
		{ "deletecollection", KUBE_VERB_DELETECOLLECTION },
	};
	const cJSON *v;
	unsigned bits = 0;
	size_t i;

	cJSON_ArrayForEach(v, arr) {
		if (!cJSON_IsString(v))
			continue;
		for (i = 0; i < sizeof tab / sizeof tab[0]; i++)
			if (strcmp(v->valuestring, tab[i].n) == 0)
				bits |= tab[i].bit;
	}
	return bits;
}

static char **
parse_strv(const cJSON *arr)
{
	char **v = strv_new();
	const cJSON *e;

	cJSON_ArrayForEach(e, arr)
		if (cJSON_IsString(e))
			v = strv_push(v, e->valuestring);
	return v;
}

/* Add the resources of one APIResourceList. */
static void
add_resource_list(struct kube_discovery *d, const char *group,
    const char *version, int preferred, const cJSON *list)
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(list, "resources");
	const cJSON *e;
	size_t first = d->nres, i;
	int pass;

	/* Pass 0: resources; pass 1: subresources onto their parents. */
	for (pass = 0; pass < 2; pass++) {
		cJSON_ArrayForEach(e, arr) {
			const char *name = json_str(e, "name");
			const char *slash;
			struct kube_resource *r;

			if (name == NULL || *name == '\0')
				continue;
			slash = strchr(name, '/');
			if (pass == 1) {
				if (slash == NULL)
					continue;
				for (i = first; i < d->nres; i++) {
					r = d->res[i];
					if (strlen(r->resource) ==
					    (size_t)(slash - name) &&
					    strncmp(r->resource, name,
					    (size_t)(slash - name)) == 0 &&
					    !strv_contains(r->subresources,
					    slash + 1))
						r->subresources = strv_push(
						    r->subresources, slash + 1);
				}
				continue;
			}
			if (slash != NULL)
				continue;
			r = xcalloc(1, sizeof *r);
			r->group = xstrdup(group);
			r->version = xstrdup(version);
			r->group_version = *group ? xasprintf("%s/%s", group,
			    version) : xstrdup(version);
			r->resource = xstrdup(name);
			r->singular = xstrdup(json_str_or(e, "singularName",
			    ""));
			r->kind = xstrdup(json_str_or(e, "kind", ""));
			r->short_names = parse_strv(
			    cJSON_GetObjectItemCaseSensitive(e, "shortNames"));
			r->categories = parse_strv(
			    cJSON_GetObjectItemCaseSensitive(e, "categories"));
			r->subresources = strv_new();
			r->verbs = parse_verbs(
			    cJSON_GetObjectItemCaseSensitive(e, "verbs"));
			r->namespaced = json_bool(e, "namespaced", 0);
			r->preferred = preferred;
			if (d->nres == d->ares) {
				d->ares = d->ares ? d->ares * 2 : 64;
				d->res = xreallocarray(d->res, d->ares,
				    sizeof *d->res);
			}
			d->res[d->nres++] = r;
		}
	}
}

/* One group-version's APIResourceList (*out owned, NULL on failure). */
static int
fetch_gv(struct kube *k, const char *group, const char *version,
    cJSON **out, struct cairn_err *err)
{
	struct kube_call c;
	char *path;
	cJSON *j = NULL;
	int rc;

	path = *group ? xasprintf("/apis/%s/%s", group, version) :
	    xasprintf("/api/%s", version);
	for (int tries = 0;; tries++) {
		memset(&c, 0, sizeof c);
		c.method = "GET";
		c.path = path;
		c.idempotent = 1;
		c.max_retries = DISC_GV_RETRIES;
		c.max_delay_us = DISC_GV_MAX_DELAY_US;
		rc = kube_call_json(k, &c, &j, err);
		kube_call_done(&c);
		/*
		 * A 503 is an aggregated API that is down: quick, as above. Any
		 * other transient failure (a 500, a dropped connection) is the
		 * API server's own hiccup and must not drop a whole group from
		 * a backup: asked a few times more (found by tests/chaos, 15%
		 * injected 500s lost batch/v1 from about one backup in five).
		 */
		if (rc == 0 || tries >= DISC_GV_HICCUP_TRIES ||
		    kube_last_status()->http == 503 ||
		    (rc != CAIRN_ESERVER && rc != CAIRN_ENET &&
		    rc != CAIRN_ETIMEOUT && rc != CAIRN_EBUSY))
			break;
		cairn_err_clear(err);
		time_sleep_us(100000LL << tries, NULL);
	}
	if (rc == 0 && !cJSON_IsObject(j)) {
		cJSON_Delete(j);
		j = NULL;
	}
	*out = j;
	free(path);
	return rc;
}

/* Group-versions fetched at once, answers kept in their order. */
struct gv_job {
	const char *group, *version;
	int preferred;
	int skip;			/* failed a moment ago: not asked */
	int answered;			/* by aggregated discovery: not asked */
	int rc;
	cJSON *list;
	struct cairn_err err;
};

struct gv_jobs {
	struct kube *k;
	struct gv_job *v;
	size_t n, a;
	atomic_size_t next;
};

static void *
gv_worker(void *arg)
{
	struct gv_jobs *js = arg;
	size_t i;

	while ((i = atomic_fetch_add(&js->next, 1)) < js->n) {
		struct gv_job *j = &js->v[i];

		if (!j->skip && !j->answered)
			j->rc = fetch_gv(js->k, j->group, j->version, &j->list,
			    &j->err);
	}
	return NULL;
}

/* gv_worker on a thread of its own (the caller runs it too, unnamed). */
static void *
gv_thread(void *arg)
{
	util_thread_name("discovery");
	return gv_worker(arg);
}

/* Run every job, on up to DISC_PARALLEL threads (this one included). */
static void
gv_run(struct gv_jobs *js)
{
	pthread_t th[DISC_PARALLEL];
	size_t nth = 0, ask = 0;

	for (size_t i = 0; i < js->n; i++)
		ask += !js->v[i].skip && !js->v[i].answered;
	atomic_init(&js->next, 0);
	while (nth + 1 < DISC_PARALLEL && nth + 1 < ask &&
	    pthread_create(&th[nth], NULL, gv_thread, js) == 0)
		nth++;
	gv_worker(js);
	for (size_t i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
}

/* GET path into *out, on a thread of its own (discovery's /api). */
struct req_job {
	struct kube *k;
	const char *path;
	cJSON *out;
	int rc;
	struct cairn_err err;
};

static void *
req_worker(void *arg)
{
	struct req_job *r = arg;
	struct kube_call c;

	memset(&c, 0, sizeof c);
	c.method = "GET";
	c.path = r->path;
	c.accept = DISC_ACCEPT;
	c.idempotent = 1;
	r->rc = kube_call_json(r->k, &c, &r->out, &r->err);
	kube_call_done(&c);
	return NULL;
}

static void *
req_thread(void *arg)
{
	util_thread_name("discovery");
	return req_worker(arg);
}

/* A new group of d, named name (copied), no versions yet. */
static struct kube_group *
group_add(struct kube_discovery *d, const char *name)
{
	struct kube_group *kg;

	if (d->ngroups == d->agroups) {
		d->agroups = d->agroups ? 2 * d->agroups : 16;
		d->groups = xreallocarray(d->groups, d->agroups,
		    sizeof *d->groups);
	}
	kg = &d->groups[d->ngroups++];
	memset(kg, 0, sizeof *kg);
	kg->name = xstrdup(name);
	kg->versions = strv_new();
	return kg;
}

/* A new job of js, zeroed. */
static struct gv_job *
job_add(struct gv_jobs *js)
{
	if (js->n == js->a) {
		js->a = js->a ? 2 * js->a : 32;
		js->v = xreallocarray(js->v, js->a, sizeof *js->v);
	}
	memset(&js->v[js->n], 0, sizeof js->v[0]);
	return &js->v[js->n++];
}

static int
is_aggregated(const cJSON *doc)
{
	const char *kind = json_str(doc, "kind");

	return kind != NULL && strcmp(kind, "APIGroupDiscoveryList") == 0;
}

static void
copy_member(cJSON *to, const char *key, const cJSON *from, const char *fkey)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(from, fkey);

	if (v != NULL)
		cJSON_AddItemToObject(to, key, cJSON_Duplicate(v, 1));
}

/*
 * The resources of an aggregated group-version as the APIResourceList
 * plain discovery gives: each resource, then a "resource/sub" entry per
 * subresource.
 */
static cJSON *
agg_resource_list(const cJSON *version)
{
	cJSON *list = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(list, "resources");
	const cJSON *r, *sub;

	cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(version,
	    "resources")) {
		const char *name = json_str(r, "resource");
		const char *scope = json_str_or(r, "scope", "");
		cJSON *e;

		if (name == NULL)
			continue;
		e = cJSON_CreateObject();
		cJSON_AddItemToArray(arr, e);
		cJSON_AddStringToObject(e, "name", name);
		cJSON_AddStringToObject(e, "singularName",
		    json_str_or(r, "singularResource", ""));
		cJSON_AddBoolToObject(e, "namespaced",
		    strcmp(scope, "Namespaced") == 0);
		cJSON_AddStringToObject(e, "kind",
		    json_str_or(r, "responseKind.kind", ""));
		copy_member(e, "verbs", r, "verbs");
		copy_member(e, "shortNames", r, "shortNames");
		copy_member(e, "categories", r, "categories");
		cJSON_ArrayForEach(sub, cJSON_GetObjectItemCaseSensitive(r,
		    "subresources")) {
			const char *sn = json_str(sub, "subresource");
			char *full;

			if (sn == NULL)
				continue;
			e = cJSON_CreateObject();
			cJSON_AddItemToArray(arr, e);
			full = xasprintf("%s/%s", name, sn);
			cJSON_AddStringToObject(e, "name", full);
			free(full);
			cJSON_AddStringToObject(e, "kind",
			    json_str_or(sub, "responseKind.kind", ""));
			copy_member(e, "verbs", sub, "verbs");
		}
	}
	return list;
}

/*
 * The groups of an aggregated answer (/api's: core) and a job for each of
 * their versions, answered already: its resources, or a failure when
 * Stale. As client-go: a Stale version is left out of its group, whose
 * preferred version is its first version not Stale.
 */
static void
agg_groups(struct kube_discovery *d, struct gv_jobs *js, const cJSON *doc,
    int core)
{
	const cJSON *it, *v;

	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(doc,
	    "items")) {
		const char *name = core ? "" : json_str(it, "metadata.name");
		struct kube_group *kg;

		if (name == NULL || (!core && *name == '\0'))
			continue;
		kg = group_add(d, name);
		/* in order of preference */
		cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(it,
		    "versions")) {
			const char *ver = json_str(v, "version");
			struct gv_job *gj;

			if (ver == NULL)
				continue;
			gj = job_add(js);
			gj->group = kg->name;
			gj->version = ver;	/* doc outlives the jobs */
			gj->answered = 1;
			if (strcmp(json_str_or(v, "freshness", ""),
			    "Stale") == 0) {
				gj->rc = cairn_err_set(&gj->err, CAIRN_ESERVER,
				    "GET %s: %s%s%s is Stale in aggregated "
				    "discovery (its API service does not "
				    "answer)", core ? "/api" : "/apis",
				    kg->name, *kg->name ? "/" : "", ver);
				continue;
			}
			kg->versions = strv_push(kg->versions, ver);
			gj->preferred = kg->versions[1] == NULL;
			gj->list = agg_resource_list(v);
		}
		kg->preferred = xstrdup(kg->versions[0] ? kg->versions[0] :
		    "");
		if (core)
			break;		/* /api has the core group alone */
	}
}

/* The groups of a plain answer: /api's APIVersions, /apis's APIGroupList. */
static void
plain_groups(struct kube_discovery *d, const cJSON *doc, int core)
{
	const cJSON *g, *v;

	if (core) {
		struct kube_group *kg = group_add(d, "");

		strv_free(kg->versions);
		kg->versions = parse_strv(
		    cJSON_GetObjectItemCaseSensitive(doc, "versions"));
		kg->preferred = xstrdup(kg->versions[0] ? kg->versions[0] :
		    "v1");
		return;
	}
	cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(doc, "groups")) {
		struct kube_group *kg;
		const char *name = json_str(g, "name");

		if (name == NULL)
			continue;
		kg = group_add(d, name);
		cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(g,
		    "versions")) {
			const char *ver = json_str(v, "version");

			if (ver != NULL)
				kg->versions = strv_push(kg->versions, ver);
		}
		kg->preferred = xstrdup(json_str_or(g,
		    "preferredVersion.version", kg->versions[0] ?
		    kg->versions[0] : ""));
	}
}

/*
 * A job to ask for each version of the groups from index first on (unless
 * it failed a moment ago in prev).
 */
static void
plain_jobs(struct kube_discovery *d, size_t first, struct gv_jobs *js,
    const struct kube_discovery *prev)
{
	for (size_t i = first; i < d->ngroups; i++) {
		struct kube_group *kg = &d->groups[i];

		for (size_t j = 0; kg->versions[j] != NULL; j++) {
			const struct kube_disc_failure *pf;
			struct gv_job *gj = job_add(js);

			gj->group = kg->name;
			gj->version = kg->versions[j];
			gj->preferred = strcmp(gj->version, kg->preferred) == 0;
			pf = find_failure(prev, kg->name, gj->version);
			gj->skip = pf != NULL &&
			    time_mono_us() - pf->at_us < DISC_FAIL_TTL_US;
		}
	}
}

/* The groups of /api (core) or /apis from its answer, and their jobs. */
static void
root_groups(struct kube_discovery *d, struct gv_jobs *js, const cJSON *doc,
    int core, const struct kube_discovery *prev)
{
	size_t first = d->ngroups;

	if (is_aggregated(doc)) {
		agg_groups(d, js, doc, core);
		if (core && d->ngroups == first)	/* core comes first */
			group_add(d, "")->preferred = xstrdup("v1");
		return;
	}
	plain_groups(d, doc, core);
	plain_jobs(d, first, js, prev);
}

/* Load a snapshot; prev (may be NULL): the one it replaces. */
static int
disc_load(struct kube *k, const struct kube_discovery *prev,
    struct kube_discovery **out, struct cairn_err *err)
{
	struct kube_discovery *d = xcalloc(1, sizeof *d);
	struct req_job aj = { k, "/api", NULL, 0, CAIRN_ERR_INIT };
	struct req_job gr = { k, "/apis", NULL, 0, CAIRN_ERR_INIT };
	struct gv_jobs js = { k, NULL, 0, 0, 0 };
	pthread_t ath;
	size_t i;
	int rc, athr;

	atomic_init(&d->refs, 1);
	/* /api and /apis at once */
	athr = pthread_create(&ath, NULL, req_thread, &aj) == 0;
	if (!athr)
		req_worker(&aj);
	req_worker(&gr);
	if (athr)
		pthread_join(ath, NULL);
	rc = aj.rc < 0 ? cairn_err_copy(err, &aj.err) : gr.rc < 0 ?
	    cairn_err_copy(err, &gr.err) : 0;
	if (rc < 0)
		goto fail;
	root_groups(d, &js, aj.out, 1, prev);
	root_groups(d, &js, gr.out, 0, prev);
	gv_run(&js);
	/* in server order, as one request after the other would have */
	rc = 0;
	for (i = 0; i < js.n && rc == 0; i++) {
		struct gv_job *gj = &js.v[i];
		const struct kube_disc_failure *pf;

		if (gj->skip) {		/* failed a moment ago */
			pf = find_failure(prev, gj->group, gj->version);
			add_failure(d, gj->group, gj->version, pf->message,
			    pf->at_us);
		} else if (gj->rc == CAIRN_EAUTH || gj->rc == CAIRN_ECANCELED) {
			rc = cairn_err_copy(err, &gj->err);
		} else if (gj->rc == CAIRN_ENOTFOUND) {
			log_debug("discovery: %s%s%s is gone since /apis",
			    gj->group, *gj->group ? "/" : "", gj->version);
		} else if (gj->rc < 0) {
			log_warn("discovery of %s%s%s failed (its resources "
			    "are left out): %s", gj->group, *gj->group ? "/" :
			    "", gj->version, gj->err.msg);
			add_failure(d, gj->group, gj->version, gj->err.msg,
			    time_mono_us());
		} else if (gj->list != NULL) {
			add_resource_list(d, gj->group, gj->version,
			    gj->preferred, gj->list);
		}
	}
	if (rc < 0)
		goto fail;
	choose_versions(d);
	log_debug("discovered %zu groups, %zu resources (%s discovery)",
	    d->ngroups, d->nres, is_aggregated(gr.out) ? "aggregated" :
	    "plain");
	*out = d;
	d = NULL;
fail:
	for (i = 0; i < js.n; i++)
		cJSON_Delete(js.v[i].list);
	free(js.v);
	cJSON_Delete(aj.out);
	cJSON_Delete(gr.out);
	if (d == NULL)
		return 0;
	disc_free(d);
	cairn_err_prefix(err, "discovery");
	return rc;
}

int
kube_discovery_get(struct kube *k, int refresh, struct kube_discovery **out,
    struct cairn_err *err)
{
	struct kube_discovery *d;
	int rc = 0;

	*out = NULL;
	kube_disc_lock(k);
	d = kube_disc_cached(k);
	if (d == NULL || refresh ||
	    time_mono_us() - kube_disc_loaded_at(k) > DISC_MAX_AGE_US) {
		rc = disc_load(k, d, &d, err);
		if (rc == 0)
			kube_disc_set(k, d);
	}
	if (rc == 0) {
		kube_disc_ref(d);
		*out = d;
	}
	kube_disc_unlock(k);
	return rc;
}

size_t
kube_discovery_count(const struct kube_discovery *d)
{
	return d->nres;
}

const struct kube_resource *
kube_discovery_at(const struct kube_discovery *d, size_t i)
{
	return i < d->nres ? d->res[i] : NULL;
}

size_t
kube_discovery_group_count(const struct kube_discovery *d)
{
	return d->ngroups;
}

const struct kube_group *
kube_discovery_group_at(const struct kube_discovery *d, size_t i)
{
	return i < d->ngroups ? &d->groups[i] : NULL;
}

size_t
kube_discovery_failed_count(const struct kube_discovery *d)
{
	return d->nfailed;
}

const struct kube_disc_failure *
kube_discovery_failed_at(const struct kube_discovery *d, size_t i)
{
	return i < d->nfailed ? &d->failed[i] : NULL;
}

static int
name_matches(const struct kube_resource *r, const char *name, int pass)
{
	if (pass == 0)
		return strcmp(r->resource, name) == 0;
	return (*r->singular && strcmp(r->singular, name) == 0) ||
	    strcasecmp(r->kind, name) == 0 ||
	    strv_contains(r->short_names, name) ||
	    strcasecmp(r->resource, name) == 0;
}

const struct kube_resource *
kube_discovery_find(const struct kube_discovery *d, const char *group,
    const char *version, const char *name)
{
	size_t i;
	int pass;

	if (name == NULL)
		return NULL;
	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < d->nres; i++) {
			const struct kube_resource *r = d->res[i];

			if (group != NULL && strcmp(r->group, group) != 0)
				continue;
			if (version != NULL ? strcmp(r->version, version) != 0 :
			    !r->chosen)
				continue;
			if (name_matches(r, name, pass))
				return r;
		}
	}
	return NULL;
}

const struct kube_resource *
kube_discovery_lookup(const struct kube_discovery *d, const char *arg)
{
	const struct kube_resource *r;
	const char *dot, *dot2;
	char *name, *ver;

	if (arg == NULL || *arg == '\0')
		return NULL;
	dot = strchr(arg, '.');
	if (dot == NULL)
		return kube_discovery_find(d, NULL, NULL, arg);
	name = xstrndup(arg, (size_t)(dot - arg));
	r = kube_discovery_find(d, dot + 1, NULL, name);
	if (r == NULL) {
		dot2 = strchr(dot + 1, '.');
		if (dot2 != NULL) {
			ver = xstrndup(dot + 1, (size_t)(dot2 - dot - 1));
			r = kube_discovery_find(d, dot2 + 1, ver, name);
			free(ver);
		}
	}
	free(name);
	return r;
}

int
kube_discovery_foreach_listable(const struct kube_discovery *d,
    int (*fn)(void *arg, const struct kube_resource *r), void *arg)
{
	size_t i;
	int rc;

	for (i = 0; i < d->nres; i++) {
		if (!d->res[i]->chosen ||
		    !(d->res[i]->verbs & KUBE_VERB_LIST))
			continue;
		rc = fn(arg, d->res[i]);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* Lookup with an optional explicit version. */
static const struct kube_resource *
lookup_version(const struct kube_discovery *d, const char *arg,
    const char *version)
{
	const struct kube_resource *r;
	const char *dot;
	char *name;

	if (version == NULL)
		return kube_discovery_lookup(d, arg);
	dot = strchr(arg, '.');
	if (dot == NULL)
		return kube_discovery_find(d, NULL, version, arg);
	name = xstrndup(arg, (size_t)(dot - arg));
	r = kube_discovery_find(d, dot + 1, version, name);
	free(name);
	return r;
}

int
kube_resolve(struct kube *k, const char *arg, const char *version,
    struct kube_resource **out, struct cairn_err *err)
{
	struct kube_discovery *d;
	const struct kube_resource *r;
	const void *seen;
	int rc, refreshed = 0;

	*out = NULL;
	rc = kube_discovery_get(k, 0, &d, err);
	if (rc < 0)
		return rc;
	for (;;) {
		seen = d;
		r = lookup_version(d, arg, version);
		if (r != NULL) {
			*out = kube_resource_dup(r);
			kube_discovery_release(d);
			return 0;
		}
		kube_discovery_release(d);
		if (refreshed)
			break;
		refreshed = 1;
		kube_disc_lock(k);
		if (kube_disc_cached(k) != seen) {
			/* Someone refreshed meanwhile: look in theirs. */
			d = kube_disc_cached(k);
			kube_disc_ref(d);
			kube_disc_unlock(k);
			continue;
		}
		kube_disc_unlock(k);
		rc = kube_discovery_get(k, 1, &d, err);
		if (rc < 0)
			return rc;
	}
	return cairn_err_set(err, CAIRN_ENOTFOUND,
	    "the server has no resource type \"%s\"%s%s", arg,
	    version ? " in version " : "", version ? version : "");
}
