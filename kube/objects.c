/*
 * objects.c: get, create, update, patch and delete of one object of any
 * resource, addressed by group/version/resource, namespace and name.
 *
 * Retry rules (see kube.c): GET is idempotent; PUT is treated as
 * idempotent only when the object carries metadata.resourceVersion (a
 * repeat of an applied PUT then fails with 409 instead of applying twice);
 * POST and PATCH are never re-sent after the connection dropped.
 */
#include "config.h"
#include "kube/internal.h"
#include "base/jsonutil.h"
#include "base/mem.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

/*
 * One path segment, percent-escaped ("/", "?", "#", "%"...). "." and ".."
 * are escaped too: curl would otherwise resolve them as dot segments and
 * send the request to another URL.
 */
static void
put_seg(struct buf *b, const char *s)
{
	char *e;

	if (strcmp(s, ".") == 0 || strcmp(s, "..") == 0) {
		buf_puts(b, s[1] == '\0' ? "/%2E" : "/%2E%2E");
		return;
	}
	e = curl_easy_escape(NULL, s, 0);
	buf_printf(b, "/%s", e ? e : "");
	curl_free(e);
}

/* A group, version or resource: lower-case letters, digits, '-', '.'. */
static int
gvr_token(const char *s, int dots)
{
	if (*s == '.' || (*s == '\0' && !dots))
		return 0;
	for (; *s != '\0'; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
		    *s == '-' || (dots && *s == '.')))
			return 0;
	return 1;
}

char *
kube_path(const struct kube_gvr *r, const char *ns, const char *name,
    const char *sub)
{
	struct buf b;

	buf_init(&b, 8192);
	if (r->group == NULL || *r->group == '\0')
		buf_printf(&b, "/api/%s", r->version);
	else
		buf_printf(&b, "/apis/%s/%s", r->group, r->version);
	if (ns != NULL && *ns != '\0') {
		buf_puts(&b, "/namespaces");
		put_seg(&b, ns);
	}
	buf_printf(&b, "/%s", r->resource);
	if (name != NULL) {
		put_seg(&b, name);
		if (sub != NULL && *sub != '\0')
			put_seg(&b, sub);
	}
	return buf_take(&b, NULL);
}

static int
check_gvr(const struct kube_gvr *r, const char *name, int need_name,
    struct cairn_err *err)
{
	if (r == NULL || r->version == NULL || *r->version == '\0' ||
	    r->resource == NULL || *r->resource == '\0')
		return cairn_err_set(err, CAIRN_EINVAL,
		    "resource: version and plural resource name are required");
	/* they go into the URL as they are: no '/', '?', '#', ".." */
	if (!gvr_token(r->group != NULL ? r->group : "", 1) ||
	    strstr(r->group != NULL ? r->group : "", "..") != NULL ||
	    !gvr_token(r->version, 0) || !gvr_token(r->resource, 0))
		return cairn_err_set(err, CAIRN_EINVAL, "resource %.64s/%.64s/"
		    "%.64s: not a group, version and resource name",
		    r->group != NULL ? r->group : "", r->version, r->resource);
	if (need_name && (name == NULL || *name == '\0'))
		return cairn_err_set(err, CAIRN_EINVAL,
		    "%s: object name is empty", r->resource);
	return 0;
}

/*
 * The path of a write to an object or collection: with
 * ?fieldValidation=Strict when the client asks for it
 * (kube_set_strict_fields). Owned.
 */
static char *
write_path(struct kube *k, const struct kube_gvr *r, const char *ns,
    const char *name, const char *sub)
{
	char *p = kube_path(r, ns, name, sub), *q;

	if (!kube_strict_fields(k))
		return p;
	q = xasprintf("%s?fieldValidation=Strict", p);
	free(p);
	return q;
}

/* Run one request with a JSON body (may be NULL); owned reply in *out. */
static int
call(struct kube *k, const char *method, char *path, const char *ctype,
    const char *body, int idempotent, cJSON **out, struct cairn_err *err)
{
	struct kube_call c;
	cJSON *res = NULL;
	int rc;

	memset(&c, 0, sizeof c);
	c.method = method;
	c.path = path;
	c.content_type = ctype;
	c.body = body;
	c.body_len = body ? strlen(body) : 0;
	c.idempotent = idempotent;
	rc = kube_call_json(k, &c, out ? &res : NULL, err);
	kube_call_done(&c);
	free(path);
	if (out != NULL)
		*out = res;
	return rc;
}

int
kube_get(struct kube *k, const struct kube_gvr *r, const char *ns,
    const char *name, cJSON **out, struct cairn_err *err)
{
	int rc;

	*out = NULL;
	rc = check_gvr(r, name, 1, err);
	if (rc < 0)
		return rc;
	return call(k, "GET", kube_path(r, ns, name, NULL), NULL, NULL, 1, out,
	    err);
}

int
kube_create(struct kube *k, const struct kube_gvr *r, const char *ns,
    const cJSON *obj, cJSON **out, struct cairn_err *err)
{
	char *body;
	int rc;

	if (out != NULL)
		*out = NULL;
	rc = check_gvr(r, NULL, 0, err);
	if (rc < 0)
		return rc;
	body = json_print(obj);
	rc = call(k, "POST", write_path(k, r, ns, NULL, NULL), NULL, body, 0,
	    out, err);
	free(body);
	return rc;
}

static int
put(struct kube *k, const struct kube_gvr *r, const char *ns,
    const cJSON *obj, const char *sub, cJSON **out, struct cairn_err *err)
{
	const char *name = json_str(obj, "metadata.name");
	const char *rv = json_str(obj, "metadata.resourceVersion");
	char *body;
	int rc;

	if (out != NULL)
		*out = NULL;
	rc = check_gvr(r, name, 1, err);
	if (rc < 0)
		return rc;
	body = json_print(obj);
	rc = call(k, "PUT", write_path(k, r, ns, name, sub), NULL, body,
	    rv != NULL && *rv != '\0', out, err);
	free(body);
	return rc;
}

int
kube_update(struct kube *k, const struct kube_gvr *r, const char *ns,
    const cJSON *obj, cJSON **out, struct cairn_err *err)
{
	return put(k, r, ns, obj, NULL, out, err);
}

int
kube_update_status(struct kube *k, const struct kube_gvr *r, const char *ns,
    const cJSON *obj, cJSON **out, struct cairn_err *err)
{
	return put(k, r, ns, obj, "status", out, err);
}

int
kube_patch(struct kube *k, const struct kube_gvr *r, const char *ns,
    const char *name, const char *sub, enum kube_patch_type type,
    const char *patch, cJSON **out, struct cairn_err *err)
{
	const char *ct;
	int rc;

	if (out != NULL)
		*out = NULL;
	rc = check_gvr(r, name, 1, err);
	if (rc < 0)
		return rc;
	switch (type) {
	case KUBE_PATCH_MERGE:
		ct = "application/merge-patch+json";
		break;
	case KUBE_PATCH_JSON:
		ct = "application/json-patch+json";
		break;
	case KUBE_PATCH_STRATEGIC:
		ct = "application/strategic-merge-patch+json";
		break;
	default:
		return cairn_err_set(err, CAIRN_EINVAL, "unknown patch type");
	}
	return call(k, "PATCH", write_path(k, r, ns, name, sub), ct, patch, 0,
	    out, err);
}

int
kube_delete(struct kube *k, const struct kube_gvr *r, const char *ns,
    const char *name, const struct kube_delete_opts *opts, cJSON **out,
    struct cairn_err *err)
{
	cJSON *b;
	char *body;
	int rc;

	if (out != NULL)
		*out = NULL;
	rc = check_gvr(r, name, 1, err);
	if (rc < 0)
		return rc;
	b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "kind", "DeleteOptions");
	cJSON_AddStringToObject(b, "apiVersion", "v1");
	if (opts != NULL) {
		if (opts->uid != NULL)
			json_set_str(b, "preconditions.uid", opts->uid);
		if (opts->resource_version != NULL)
			json_set_str(b, "preconditions.resourceVersion",
			    opts->resource_version);
		if (opts->propagation != NULL)
			cJSON_AddStringToObject(b, "propagationPolicy",
			    opts->propagation);
		if (opts->grace_seconds != 0)
			cJSON_AddNumberToObject(b, "gracePeriodSeconds",
			    opts->grace_seconds == KUBE_GRACE_NOW ? 0.0 :
			    (double)opts->grace_seconds);
	}
	body = json_print(b);
	cJSON_Delete(b);
	/*
	 * A repeated DELETE cannot delete twice (the second gets 404), but
	 * it would turn a success into an error; with preconditions it is
	 * safe. Retried only then.
	 */
	rc = call(k, "DELETE", kube_path(r, ns, name, NULL), NULL, body,
	    opts != NULL && (opts->uid != NULL || opts->resource_version !=
	    NULL), out, err);
	free(body);
	return rc;
}
