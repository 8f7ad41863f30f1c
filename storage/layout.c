/*
 * layout.c: Velero's key layout (see layout.h and
 * ../shared/reference/velero.md, "Object storage layout").
 */
#include "config.h"
#include "storage/layout.h"

#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

static const char *const backup_suffix[] = {
	[LAYOUT_BACKUP_METADATA] = NULL,
	[LAYOUT_BACKUP_TARBALL] = ".tar.gz",
	[LAYOUT_BACKUP_LOGS] = "-logs.gz",
	[LAYOUT_BACKUP_RESOURCE_LIST] = "-resource-list.json.gz",
	[LAYOUT_BACKUP_RESULTS] = "-results.gz",
	[LAYOUT_BACKUP_VOLUMESNAPSHOTS] = "-volumesnapshots.json.gz",
	[LAYOUT_BACKUP_VOLUMEPLUGINBACKUPS] = "-volumepluginbackups.json.gz",
	[LAYOUT_BACKUP_PODVOLUMEBACKUPS] = "-podvolumebackups.json.gz",
	[LAYOUT_BACKUP_ITEMOPERATIONS] = "-itemoperations.json.gz",
	[LAYOUT_BACKUP_VOLUMEINFO] = "-volumeinfo.json.gz",
};

static const char *const restore_suffix[] = {
	[LAYOUT_RESTORE_LOGS] = "-logs.gz",
	[LAYOUT_RESTORE_RESULTS] = "-results.gz",
	[LAYOUT_RESTORE_RESOURCE_LIST] = "-resource-list.json.gz",
};

int
layout_name_ok(const char *name)
{
	size_t n;

	if (name == NULL)
		return 0;
	n = strlen(name);
	if (n == 0 || n > 253 || strchr(name, '/') != NULL ||
	    strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return 0;
	return 1;
}

/* "<prefix>/" or "" */
static char *
pfx(const char *prefix)
{
	size_t n;

	if (prefix == NULL || *prefix == '\0')
		return xstrdup("");
	n = strlen(prefix);
	while (n > 0 && prefix[n - 1] == '/')
		n--;
	if (n == 0)
		return xstrdup("");
	return xasprintf("%.*s/", (int)n, prefix);
}

char *
layout_backups_prefix(const char *prefix)
{
	char *p = pfx(prefix), *r = xasprintf("%sbackups/", p);

	free(p);
	return r;
}

char *
layout_backup_dir(const char *prefix, const char *name)
{
	char *p, *r;

	if (!layout_name_ok(name))
		return NULL;
	p = pfx(prefix);
	r = xasprintf("%sbackups/%s/", p, name);
	free(p);
	return r;
}

char *
layout_backup_key(const char *prefix, const char *name,
    enum layout_backup_file f)
{
	char *d = layout_backup_dir(prefix, name), *r;

	if (d == NULL || (unsigned)f >= sizeof backup_suffix / sizeof backup_suffix[0]) {
		free(d);
		return NULL;
	}
	if (f == LAYOUT_BACKUP_METADATA)
		r = xasprintf("%svelero-backup.json", d);
	else
		r = xasprintf("%s%s%s", d, name, backup_suffix[f]);
	free(d);
	return r;
}

char *
layout_restore_dir(const char *prefix, const char *name)
{
	char *p, *r;

	if (!layout_name_ok(name))
		return NULL;
	p = pfx(prefix);
	r = xasprintf("%srestores/%s/", p, name);
	free(p);
	return r;
}

char *
layout_restore_key(const char *prefix, const char *name,
    enum layout_restore_file f)
{
	char *d = layout_restore_dir(prefix, name), *r;

	if (d == NULL || (unsigned)f >= sizeof restore_suffix / sizeof restore_suffix[0]) {
		free(d);
		return NULL;
	}
	r = xasprintf("%srestore-%s%s", d, name, restore_suffix[f]);
	free(d);
	return r;
}

struct lb_ctx {
	const char *base;
	size_t baselen;
	int (*fn)(void *arg, const char *name);
	void *arg;
};

static int
lb_row(void *arg, const struct store_entry *e)
{
	struct lb_ctx *c = arg;
	char *name;
	size_t n;
	int r;

	if (!e->is_prefix || strncmp(e->key, c->base, c->baselen) != 0)
		return 0;
	n = strlen(e->key + c->baselen);
	if (n < 2)
		return 0;
	name = xstrndup(e->key + c->baselen, n - 1);	/* drop the '/' */
	r = layout_name_ok(name) ? c->fn(c->arg, name) : 0;
	free(name);
	return r;
}

int
layout_list_backups(struct store *s, const char *prefix,
    int (*fn)(void *arg, const char *name), void *arg, struct cairn_err *err)
{
	char *base = layout_backups_prefix(prefix);
	struct lb_ctx c = { base, strlen(base), fn, arg };
	int rc;

	rc = store_list(s, base, "/", lb_row, &c, err);
	free(base);
	return rc;
}
