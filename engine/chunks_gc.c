/*
 * chunks_gc.c: freeing the chunks of a deleted backup. Contract (and why
 * the order is safe against copies running at the same time) in
 * chunks.h.
 *
 * For each volume the backup holds chunk data of (an index in its folder,
 * or refs of its own in the volume's directory): its refs file goes
 * first (from then on no new copy can build on it), then the volume's
 * refs are all read (the packs they name are kept, and the backups whose
 * refs are not final are copies in progress, whose packs are kept too),
 * then its packs are listed and every other one is deleted. Everything
 * is idempotent, so a deletion that stopped half way is simply run again.
 * A refs file that cannot be read stops the sweep of its volume (nothing
 * is deleted on a guess).
 */
#include "config.h"
#include "engine/chunks_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/mem.h"
#include "base/util.h"
#include "storage/layout.h"

/*
 * What the volume's refs protect: packs they name (t, flagged used) and
 * the backups whose copy is in progress (running, into t too, as names
 * prefixed with "/" so they can never be a pack name).
 */
static int
refs_load(struct store *s, const char *vdir, struct ch_table *t,
    struct cairn_err *err)
{
	char *rdir = xasprintf("%srefs/", vdir), *key, **packs, hash[64];
	struct ch_keys k;
	int final, rc;

	rc = ch_keys_list(s, rdir, ".json", &k, err);
	for (size_t i = 0; rc == 0 && i < k.n; i++) {
		key = xasprintf("%s%s.json", rdir, k.v[i]);
		rc = ch_refs_read(s, key, &packs, &final, hash, sizeof hash,
		    err);
		free(key);
		if (rc == CAIRN_ENOTFOUND) {	/* deleted meanwhile */
			cairn_err_clear(err);
			rc = 0;
			continue;
		}
		if (rc < 0)
			break;
		for (size_t j = 0; packs[j] != NULL; j++) {
			uint32_t pi = ch_table_pack(t, packs[j]);

			t->pack_used[pi] = 1;
		}
		if (!final) {
			char *run = xasprintf("/%s", k.v[i]);

			ch_table_pack(t, run);
			free(run);
		}
		strv_free(packs);
	}
	ch_keys_free(&k);
	free(rdir);
	return rc;
}

/* Is pack `name` protected by t (named, or of a copy in progress)? */
static int
pack_protected(const struct ch_table *t, const char *name)
{
	char b[CH_PACK_NAME_MAX + 1];
	int64_t i = ch_table_pack_find(t, name);

	if (i >= 0 && t->pack_used[i])
		return 1;
	b[0] = '/';
	if (ch_pack_backup(name, b + 1, sizeof b - 1) < 0)
		return 1;	/* not a name we make: not ours to delete */
	return ch_table_pack_find(t, b) >= 0;
}

/* Delete the packs of vdir that nothing protects. */
static int
sweep(struct store *s, const char *vdir, size_t *packs, uint64_t *bytes,
    struct cairn_err *err)
{
	char *pdir = xasprintf("%spacks/", vdir), *key;
	struct ch_table t;
	struct ch_keys k;
	int rc;

	ch_table_init(&t);
	memset(&k, 0, sizeof k);
	rc = refs_load(s, vdir, &t, err);
	if (rc < 0) {
		cairn_err_prefix(err, "reading the refs of %s (no pack deleted)",
		    vdir);
		goto out;
	}
	rc = ch_keys_list(s, pdir, CH_PACK_SUFFIX, &k, err);
	for (size_t i = 0; rc == 0 && i < k.n; i++) {
		char *name = xasprintf("%s" CH_PACK_SUFFIX, k.v[i]);

		if (!pack_protected(&t, name)) {
			/* its directory first: a directory always has its pack */
			key = xasprintf("%s%s" CH_DIR_SUFFIX, pdir, k.v[i]);
			rc = store_delete(s, key, err);
			free(key);
			key = xasprintf("%s%s", pdir, name);
			if (rc == 0)
				rc = store_delete(s, key, err);
			free(key);
			if (rc == 0) {
				(*packs)++;
				*bytes += k.sizes[i];
			}
		}
		free(name);
	}
out:
	ch_keys_free(&k);
	ch_table_free(&t);
	free(pdir);
	return rc;
}

/* The volumes with chunk data in the location (common prefixes). */
static int
vol_cb(void *arg, const struct store_entry *e)
{
	struct ch_keys *k = arg;
	size_t pl = strlen(k->prefix), kl = strlen(e->key);

	if (!e->is_prefix || kl <= pl + 1)
		return 0;
	if (k->n + 1 >= k->cap) {
		k->cap = k->cap ? k->cap * 2 : 32;
		k->v = xreallocarray(k->v, k->cap, sizeof *k->v);
	}
	k->v[k->n++] = xstrndup(e->key + pl, kl - pl - 1);
	k->v[k->n] = NULL;
	return 0;
}

/*
 * The volumes backup b has chunk data of: an index in its folder, or
 * refs of its own (a copy that never completed). Owned list.
 */
static int
release_volumes(struct store *s, const char *prefix, const char *backup,
    char ***out, struct cairn_err *err)
{
	char *bdir = layout_backup_dir(prefix, backup), *vlist, *root, *vdir,
	    *rkey, **vols = NULL;
	struct store_stat ss;
	struct ch_keys k, d;
	int rc;

	*out = NULL;
	vlist = xasprintf("%svolumes/", bdir);
	rc = ch_keys_list(s, vlist, CHUNKS_INDEX_SUFFIX, &k, err);
	free(vlist);
	free(bdir);
	for (size_t i = 0; rc == 0 && i < k.n; i++)
		vols = strv_push(vols, k.v[i]);
	ch_keys_free(&k);
	root = ch_chunks_root(prefix);
	memset(&d, 0, sizeof d);
	d.prefix = root;
	if (rc == 0)
		rc = store_list(s, root, "/", vol_cb, &d, err);
	for (size_t i = 0; rc == 0 && i < d.n; i++) {
		if (strv_contains(vols, d.v[i]) || !layout_name_ok(d.v[i]))
			continue;
		vdir = xasprintf("%s%s/", root, d.v[i]);
		rkey = ch_refs_key(vdir, backup);
		rc = store_head(s, rkey, &ss, err);
		if (rc == 0)
			vols = strv_push(vols, d.v[i]);
		else if (rc == CAIRN_ENOTFOUND) {
			cairn_err_clear(err);
			rc = 0;
		}
		free(rkey);
		free(vdir);
	}
	ch_keys_free(&d);
	free(root);
	if (rc < 0)
		strv_free(vols);
	else
		*out = vols;
	return rc;
}

int
chunks_release(struct store *s, const char *prefix, const char *backup,
    size_t *packs, uint64_t *bytes, struct cairn_err *err)
{
	char **vols = NULL, *vdir, *rkey;
	size_t np = 0;
	uint64_t nb = 0;
	int rc;

	if (packs != NULL)
		*packs = 0;
	if (bytes != NULL)
		*bytes = 0;
	if (!layout_name_ok(backup))
		return 0;	/* no key can hold it */
	rc = release_volumes(s, prefix, backup, &vols, err);
	for (size_t i = 0; rc == 0 && vols != NULL && vols[i] != NULL; i++) {
		vdir = chunks_volume_dir(prefix, vols[i]);
		rkey = ch_refs_key(vdir, backup);
		rc = store_delete(s, rkey, err);
		free(rkey);
		if (rc == 0)
			rc = sweep(s, vdir, &np, &nb, err);
		free(vdir);
	}
	strv_free(vols);
	if (np > 0)
		log_info("backup %s: %zu chunk packs (%llu bytes) that no other "
		    "backup uses deleted", backup, np, (unsigned long long)nb);
	if (packs != NULL)
		*packs = np;
	if (bytes != NULL)
		*bytes = nb;
	return rc;
}
