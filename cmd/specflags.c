/*
 * specflags.c: what several commands build from the same flags, and the
 * one lookup they all start with.
 *
 * A Backup's spec and a Schedule's spec.template take the same flags
 * (`backup create` and `schedule create`), and a Restore takes the same
 * namespace and resource lists; `get`, `describe` and `delete` of one
 * named object report a missing one alike, and `get` collects a list
 * the same way. `location create` and `install` build a storage
 * location's spec from the same storage flags.
 */
#include "config.h"
#include "cmd/cli.h"

#include <stdlib.h>
#include <string.h>

#include "base/jsonutil.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "kube/kube.h"

void
cli_add_scope(cJSON *spec, const struct flagset *fs)
{
	cli_add_list(spec, "includedNamespaces",
	    flag_list(fs, F_INCLUDE_NAMESPACES));
	cli_add_list(spec, "excludedNamespaces",
	    flag_list(fs, F_EXCLUDE_NAMESPACES));
	cli_add_list(spec, "includedResources",
	    flag_list(fs, F_INCLUDE_RESOURCES));
	cli_add_list(spec, "excludedResources",
	    flag_list(fs, F_EXCLUDE_RESOURCES));
}

/* A true|false flag into spec[key] when given; 2 on a bad word. */
static int
add_bool_flag(const struct cli_command *cmd, const struct flagset *fs,
    enum flag_id id, cJSON *spec, const char *key)
{
	int v;

	if (!flag_given(fs, id) || flag_str(fs, id) == NULL)
		return 0;
	if (flags_parse_bool(flag_str(fs, id), &v) < 0)
		return cli_usage_error(cmd, "--%s wants true or false, not \"%s\"",
		    flag_table[id].name, flag_str(fs, id));
	cJSON_AddBoolToObject(spec, key, v);
	return 0;
}

int
cli_backup_spec(const struct cli_command *cmd, const struct flagset *fs,
    cJSON *spec)
{
	const char *selstr = flag_str(fs, F_SELECTOR);
	const char *loc = flag_str(fs, F_STORAGE_LOCATION);
	char ttl[TIME_STR_MAX];
	int rc;

	cli_add_scope(spec, fs);
	rc = add_bool_flag(cmd, fs, F_INCLUDE_CLUSTER_RESOURCES, spec,
	    "includeClusterResources");
	if (rc == 0 && selstr != NULL && selstr[0] != '\0') {
		struct cairn_err err = CAIRN_ERR_INIT;
		cJSON *sel;

		if (kube_selector_object(selstr, &sel, &err) < 0)
			rc = cli_usage_error(cmd, "invalid label selector "
			    "\"%s\": %s", selstr, err.msg);
		else
			cJSON_AddItemToObject(spec, "labelSelector", sel);
	}
	if (rc != 0)
		return rc;
	duration_format(flag_duration_us(fs, F_TTL), ttl);
	cJSON_AddStringToObject(spec, "ttl", ttl);
	if (loc != NULL && loc[0] != '\0')
		cJSON_AddStringToObject(spec, "storageLocation", loc);
	return add_bool_flag(cmd, fs, F_SNAPSHOT_VOLUMES, spec,
	    "snapshotVolumes");
}

/* A label name part: 1-63 of [A-Za-z0-9_.-], alphanumeric at both ends. */
static int
label_part_ok(const char *s, size_t n)
{
	if (n == 0 || n > 63)
		return 0;
	for (size_t i = 0; i < n; i++) {
		int alnum = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' &&
		    s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9');

		if (!alnum && s[i] != '-' && s[i] != '_' && s[i] != '.')
			return 0;
		if (!alnum && (i == 0 || i == n - 1))
			return 0;
	}
	return 1;
}

int
cli_labels(const struct cli_command *cmd, const struct flagset *fs,
    cJSON **out)
{
	char **l = flag_list(fs, F_LABELS);

	*out = NULL;
	for (size_t i = 0; l != NULL && l[i] != NULL; i++) {
		const char *eq = strchr(l[i], '='), *slash;
		size_t klen;

		if (eq == NULL || eq == l[i])
			goto bad;
		klen = (size_t)(eq - l[i]);
		slash = memchr(l[i], '/', klen);
		/* [prefix/]name=value: the API server's rules */
		if (slash != NULL && (slash == l[i] ||
		    (size_t)(slash - l[i]) > 253 || !label_part_ok(slash + 1,
		    klen - (size_t)(slash - l[i]) - 1)))
			goto bad;
		if (slash == NULL && !label_part_ok(l[i], klen))
			goto bad;
		if (eq[1] != '\0' && !label_part_ok(eq + 1, strlen(eq + 1)))
			goto bad;
		if (*out == NULL)
			*out = cJSON_CreateObject();
		{
			char *k = xstrndup(l[i], klen);

			cJSON_DeleteItemFromObjectCaseSensitive(*out, k);
			cJSON_AddStringToObject(*out, k, eq + 1);
			free(k);
		}
		continue;
bad:
		cJSON_Delete(*out);
		*out = NULL;
		return cli_usage_error(cmd, "--labels: \"%s\" is not KEY=VALUE "
		    "with a valid label key and value (up to 63 of letters, "
		    "digits, '-', '_' and '.', beginning and ending with a "
		    "letter or digit; a key may have a DNS prefix/)", l[i]);
	}
	return 0;
}

int
cli_get_named(struct kube *k, const struct kube_gvr *gvr, const char *ns,
    const char *kind, const char *name, cJSON **obj)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	int rc;

	rc = kube_get(k, gvr, ns, name, obj, &err);
	if (rc == CAIRN_ENOTFOUND)
		return cli_fail("%s \"%s\" not found in namespace %s", kind,
		    name, ns);
	if (rc < 0)
		return cli_fail("%s", err.msg);
	return 0;
}

int
cli_collect_item(void *arg, cJSON *item)
{
	struct cli_collect *c = arg;

	if (c->cap > 0 && c->n >= c->cap)
		return CAIRN_ETOOBIG;
	if (c->n == c->alloc) {
		c->alloc = c->alloc ? c->alloc * 2 : 32;
		c->items = xreallocarray(c->items, c->alloc, sizeof *c->items);
	}
	c->items[c->n++] = item;
	return KUBE_TAKE;
}

void
cli_collect_free(struct cli_collect *c)
{
	for (size_t i = 0; i < c->n; i++)
		cJSON_Delete(c->items[i]);
	free(c->items);
}

cJSON *
cli_location_spec(const char *provider, const char *bucket, const char *prefix,
    char *const *config, const char *secret, const char *key, int is_default,
    struct cairn_err *err)
{
	cJSON *spec = cJSON_CreateObject(), *os, *cfg;

	cJSON_AddStringToObject(spec, "provider", provider);
	os = cJSON_AddObjectToObject(spec, "objectStorage");
	cJSON_AddStringToObject(os, "bucket", bucket != NULL && *bucket != '\0' ?
	    bucket : "local");
	if (prefix != NULL && *prefix != '\0')
		cJSON_AddStringToObject(os, "prefix", prefix);
	cfg = cJSON_AddObjectToObject(spec, "config");
	for (size_t i = 0; config != NULL && config[i] != NULL; i++) {
		const char *eq = strchr(config[i], '=');
		char *k;

		if (eq == NULL || eq == config[i]) {
			cJSON_Delete(spec);
			cairn_err_set(err, CAIRN_EINVAL, "--config: \"%s\" is not "
			    "KEY=VALUE", config[i]);
			return NULL;
		}
		k = xstrndup(config[i], (size_t)(eq - config[i]));
		cJSON_DeleteItemFromObjectCaseSensitive(cfg, k);
		cJSON_AddStringToObject(cfg, k, eq + 1);
		free(k);
	}
	if (secret != NULL) {
		cJSON *cr = cJSON_AddObjectToObject(spec, "credential");

		cJSON_AddStringToObject(cr, "name", secret);
		cJSON_AddStringToObject(cr, "key", key);
	}
	cJSON_AddBoolToObject(spec, "default", is_default);
	cJSON_AddStringToObject(spec, "accessMode", "ReadWrite");
	return spec;
}
