/*
 * chunks.c: the chunks module's common pieces: keys, chunk names
 * (hashes), chunk lists, the table of stored chunks and refs files.
 * Contract in chunks.h; the module's files in chunks_int.h.
 *
 * A chunk list (the data of a chunked index entry) is text, one line
 * each, so that `tar xzf` of an index shows what a file is made of:
 *
 *   cairn-chunks 1 <hash name>
 *   size <bytes> mtime <s>.<ns> ctime <s>.<ns> ino <n> dev <n>
 *   c <file offset> <bytes> <chunk name, 64 hex> <pack> <pack offset> <record length>
 *   ...
 *
 * Offsets are those of the file's data extents: a hole is a range no
 * line covers. The second line is what decides that a file is unchanged
 * (size, mtime, ctime, inode, device: ctime cannot be set back by user
 * space, so a rewrite that restores the mtime is still seen).
 */
#include "config.h"
#include "engine/chunks_int.h"

#include <archive.h>
#include <archive_entry.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/core_names.h>

#include "base/jsonutil.h"
#include "base/mem.h"
#include "base/util.h"
#include "storage/layout.h"

/* ---- keys ------------------------------------------------------------- */

/* The location's root: "<prefix>/" or "" (layout's normalisation). Owned. */
static char *
root_of(const char *prefix)
{
	char *b = layout_backups_prefix(prefix);
	size_t n = strlen(b);

	b[n - strlen("backups/")] = '\0';
	return b;
}

char *
ch_chunks_root(const char *prefix)
{
	char *root = root_of(prefix), *d;

	d = xasprintf("%s" CHUNKS_DIR "/", root);
	free(root);
	return d;
}

char *
chunks_volume_dir(const char *prefix, const char *volume)
{
	char *root, *d;

	if (volume == NULL || !layout_name_ok(volume))
		return NULL;
	root = ch_chunks_root(prefix);
	d = xasprintf("%s%s/", root, volume);
	free(root);
	return d;
}

char *
ch_refs_key(const char *vol_dir, const char *backup)
{
	return xasprintf("%srefs/%s.json", vol_dir, backup);
}

void
ch_put_be(unsigned char *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (unsigned char)(v >> (8 * (n - 1 - i)));
}

uint64_t
ch_get_be(const unsigned char *p, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

/* ---- chunk names ------------------------------------------------------ */

int
ch_hasher_init(struct ch_hasher *h, struct store *s, const char *name,
    struct cairn_err *err)
{
	unsigned char key[32];
	const char *id = NULL;
	OSSL_PARAM params[2];
	EVP_MAC *mac;
	int rc;

	memset(h, 0, sizeof *h);
	if (name != NULL && name[0] != '\0') {
		if (strcmp(name, "sha256") == 0)
			goto plain;
		if (strncmp(name, "hmac-sha256:", 12) != 0)
			return cairn_err_set(err, CAIRN_EPROTO, "unknown chunk "
			    "hash \"%.64s\"", name);
		id = name + 12;
	}
	rc = store_content_key(s, id, key, err);
	if (rc < 0)
		return rc;
	if (rc == 0) {
		if (id != NULL)
			return cairn_err_set(err, CAIRN_EINVAL, "chunks are "
			    "named with encryption key %s, but the location "
			    "does not encrypt", id);
		goto plain;
	}
	if (id == NULL)
		id = store_encryption_key_id(s);
	snprintf(h->name, sizeof h->name, "hmac-sha256:%s", id);
	h->keyed = 1;
	mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	h->mac = mac != NULL ? EVP_MAC_CTX_new(mac) : NULL;
	EVP_MAC_free(mac);
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
	    (char *)(uintptr_t)"SHA256", 0);
	params[1] = OSSL_PARAM_construct_end();
	if (h->mac == NULL || EVP_MAC_init(h->mac, key, sizeof key,
	    params) != 1) {
		OPENSSL_cleanse(key, sizeof key);
		ch_hasher_free(h);
		return cairn_err_set(err, CAIRN_EFAIL, "HMAC-SHA256 is not "
		    "available (libcrypto)");
	}
	OPENSSL_cleanse(key, sizeof key);
	return 0;
plain:
	snprintf(h->name, sizeof h->name, "sha256");
	h->md = EVP_MD_CTX_new();
	if (h->md == NULL)
		return cairn_err_set(err, CAIRN_EFAIL, "SHA-256 (libcrypto)");
	return 0;
}

void
ch_hasher_free(struct ch_hasher *h)
{
	EVP_MAC_CTX_free(h->mac);
	EVP_MD_CTX_free(h->md);
	h->mac = NULL;
	h->md = NULL;
}

int
ch_hash(struct ch_hasher *h, const void *p, size_t n,
    unsigned char out[CH_HASH_LEN])
{
	size_t outl = 0;
	unsigned int mdl = 0;

	if (h->keyed)
		return EVP_MAC_init(h->mac, NULL, 0, NULL) == 1 &&
		    EVP_MAC_update(h->mac, p, n) == 1 &&
		    EVP_MAC_final(h->mac, out, &outl, CH_HASH_LEN) == 1 &&
		    outl == CH_HASH_LEN ? 0 : -1;
	return EVP_DigestInit_ex(h->md, EVP_sha256(), NULL) == 1 &&
	    EVP_DigestUpdate(h->md, p, n) == 1 &&
	    EVP_DigestFinal_ex(h->md, out, &mdl) == 1 ? 0 : -1;
}

/* ---- chunk lists -------------------------------------------------------- */

void
ch_head_print(struct buf *b, const char *hash_name, const struct stat *st)
{
	buf_printf(b, CH_LIST_MAGIC " %s\nsize %" PRIu64 " mtime %" PRId64
	    ".%09ld ctime %" PRId64 ".%09ld ino %" PRIu64 " dev %" PRIu64 "\n",
	    hash_name, (uint64_t)st->st_size, (int64_t)st->st_mtim.tv_sec,
	    (long)st->st_mtim.tv_nsec, (int64_t)st->st_ctim.tv_sec,
	    (long)st->st_ctim.tv_nsec, (uint64_t)st->st_ino,
	    (uint64_t)st->st_dev);
}

int
ch_head_parse(const char *line, int n, struct ch_head *h)
{
	char name[CHUNKS_HASH_NAME_MAX];
	int used = 0;

	if (n == 1) {
		if (strncmp(line, CH_LIST_MAGIC " ", sizeof CH_LIST_MAGIC) != 0 ||
		    sscanf(line + sizeof CH_LIST_MAGIC, "%63s%n", name,
		    &used) != 1 || line[sizeof CH_LIST_MAGIC + used] != '\0')
			return CAIRN_EPROTO;
		snprintf(h->hash_name, sizeof h->hash_name, "%s", name);
		return 0;
	}
	if (sscanf(line, "size %" SCNu64 " mtime %" SCNd64 ".%" SCNd64
	    " ctime %" SCNd64 ".%" SCNd64 " ino %" SCNu64 " dev %" SCNu64 "%n",
	    &h->size, &h->mtime_s, &h->mtime_ns, &h->ctime_s, &h->ctime_ns,
	    &h->ino, &h->dev, &used) != 7 || line[used] != '\0')
		return CAIRN_EPROTO;
	return 0;
}

void
ch_ref_print(struct buf *b, const struct ch_ref *r)
{
	char hex[2 * CH_HASH_LEN + 1];

	str_hex(r->hash, CH_HASH_LEN, hex);
	buf_printf(b, "c %" PRIu64 " %" PRIu32 " %s %s %" PRIu64 " %" PRIu32
	    "\n", r->off, r->plain, hex, r->pack, r->pack_off, r->rec_len);
}

static int
unhex(const char *s, unsigned char *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int v = 0;

		for (int k = 0; k < 2; k++) {
			char c = s[2 * i + k];

			v <<= 4;
			if (c >= '0' && c <= '9')
				v |= c - '0';
			else if (c >= 'a' && c <= 'f')
				v |= c - 'a' + 10;
			else
				return -1;
		}
		out[i] = (unsigned char)v;
	}
	return 0;
}

int
ch_ref_parse(const char *line, struct ch_ref *r)
{
	char hex[2 * CH_HASH_LEN + 2];
	uint64_t plain, rec;
	int used = 0;

	memset(r, 0, sizeof *r);
	if (sscanf(line, "c %" SCNu64 " %" SCNu64 " %65s %299s %" SCNu64 " %"
	    SCNu64 "%n", &r->off, &plain, hex, r->pack, &r->pack_off, &rec,
	    &used) != 6 || line[used] != '\0' ||
	    strlen(hex) != 2 * CH_HASH_LEN || unhex(hex, r->hash,
	    CH_HASH_LEN) < 0 || plain == 0 || plain > CH_REC_MAX ||
	    rec <= CH_REC_HDR || rec > CH_REC_MAX ||
	    !ch_pack_name_ok(r->pack))
		return CAIRN_EPROTO;
	r->plain = (uint32_t)plain;
	r->rec_len = (uint32_t)rec;
	return 0;
}

int
ch_pack_name_ok(const char *name)
{
	size_t n = strlen(name), sl = strlen(CH_PACK_SUFFIX);
	const char *dash;

	if (n <= sl + 17 || n >= CH_PACK_NAME_MAX ||
	    !str_has_suffix(name, CH_PACK_SUFFIX) || strchr(name, '/') != NULL)
		return 0;
	dash = name + n - sl - 17;
	if (*dash != '-')
		return 0;
	for (const char *p = dash + 1; p < name + n - sl; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return 0;
	return 1;
}

int
ch_pack_backup(const char *name, char *out, size_t n)
{
	size_t len;

	if (!ch_pack_name_ok(name))
		return -1;
	len = strlen(name) - strlen(CH_PACK_SUFFIX) - 17;
	if (len + 1 > n)
		return -1;
	memcpy(out, name, len);
	out[len] = '\0';
	return 0;
}

int
ch_list_read(struct archive *a, const char *what,
    int (*fn)(void *arg, char *line, int n, struct cairn_err *err),
    void *arg, struct cairn_err *err)
{
	char line[CHUNKS_LIST_LINE_MAX + 1], blk[16384];
	size_t ll = 0;
	la_ssize_t got;
	int n = 0, rc;

	for (;;) {
		got = archive_read_data(a, blk, sizeof blk);
		if (got < 0)
			return cairn_err_set(err, CAIRN_EPROTO, "%s: reading its "
			    "chunk list: %s", what, archive_error_string(a));
		if (got == 0)
			break;
		for (la_ssize_t i = 0; i < got; i++) {
			if (blk[i] != '\n') {
				if (ll >= CHUNKS_LIST_LINE_MAX)
					return cairn_err_set(err, CAIRN_EPROTO,
					    "%s: a chunk list line is longer "
					    "than %d bytes", what,
					    CHUNKS_LIST_LINE_MAX);
				line[ll++] = blk[i];
				continue;
			}
			line[ll] = '\0';
			ll = 0;
			rc = fn(arg, line, ++n, err);
			if (rc < 0)
				return rc;
		}
	}
	if (ll != 0)
		return cairn_err_set(err, CAIRN_EPROTO, "%s: its chunk list "
		    "ends inside a line", what);
	return 0;
}

/* ---- the table ---------------------------------------------------------- */

void
ch_table_init(struct ch_table *t)
{
	memset(t, 0, sizeof *t);
}

void
ch_table_free(struct ch_table *t)
{
	free(t->keys);
	free(t->locs);
	free(t->full);
	for (size_t i = 0; i < t->npacks; i++)
		free(t->packs[i]);
	free(t->packs);
	free(t->pack_used);
	free(t->pslots);
	memset(t, 0, sizeof *t);
}

static uint64_t
slot_of(const unsigned char *hash)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | hash[i];
	return v;
}

static uint64_t
name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static void
pslots_grow(struct ch_table *t)
{
	size_t n = t->npslots ? t->npslots * 2 : 64;

	free(t->pslots);
	t->pslots = xcalloc(n, sizeof *t->pslots);
	t->npslots = n;
	for (size_t i = 0; i < t->npacks; i++) {
		size_t j = name_hash(t->packs[i]) & (n - 1);

		while (t->pslots[j] != 0)
			j = (j + 1) & (n - 1);
		t->pslots[j] = (uint32_t)i + 1;
	}
}

int64_t
ch_table_pack_find(const struct ch_table *t, const char *name)
{
	size_t j;

	if (t->npslots == 0)
		return -1;
	j = name_hash(name) & (t->npslots - 1);
	while (t->pslots[j] != 0) {
		if (strcmp(t->packs[t->pslots[j] - 1], name) == 0)
			return t->pslots[j] - 1;
		j = (j + 1) & (t->npslots - 1);
	}
	return -1;
}

uint32_t
ch_table_pack(struct ch_table *t, const char *name)
{
	size_t j;

	if ((t->npacks + 1) * 2 > t->npslots)
		pslots_grow(t);
	j = name_hash(name) & (t->npslots - 1);
	while (t->pslots[j] != 0) {
		if (strcmp(t->packs[t->pslots[j] - 1], name) == 0)
			return t->pslots[j] - 1;
		j = (j + 1) & (t->npslots - 1);
	}
	if (t->npacks == t->apacks) {
		t->apacks = t->apacks ? t->apacks * 2 : 16;
		t->packs = xreallocarray(t->packs, t->apacks, sizeof *t->packs);
		t->pack_used = xreallocarray(t->pack_used, t->apacks,
		    sizeof *t->pack_used);
	}
	t->packs[t->npacks] = xstrdup(name);
	t->pack_used[t->npacks] = 0;
	t->pslots[j] = (uint32_t)++t->npacks;
	return (uint32_t)(t->npacks - 1);
}

const struct ch_loc *
ch_table_find(const struct ch_table *t, const unsigned char hash[CH_HASH_LEN])
{
	size_t j;

	if (t->slots == 0)
		return NULL;
	j = slot_of(hash) & (t->slots - 1);
	while (t->full[j]) {
		if (memcmp(t->keys[j], hash, CH_HASH_LEN) == 0)
			return &t->locs[j];
		j = (j + 1) & (t->slots - 1);
	}
	return NULL;
}

static void
table_insert(struct ch_table *t, const unsigned char *hash,
    const struct ch_loc *loc)
{
	size_t j = slot_of(hash) & (t->slots - 1);

	while (t->full[j]) {
		if (memcmp(t->keys[j], hash, CH_HASH_LEN) == 0)
			return;		/* the first copy stays */
		j = (j + 1) & (t->slots - 1);
	}
	memcpy(t->keys[j], hash, CH_HASH_LEN);
	t->locs[j] = *loc;
	t->full[j] = 1;
	t->used++;
}

void
ch_table_put(struct ch_table *t, const unsigned char hash[CH_HASH_LEN],
    const struct ch_loc *loc)
{
	if ((t->used + 1) * 2 > t->slots) {
		struct ch_table old = *t;

		t->slots = t->slots ? t->slots * 2 : 1024;
		t->keys = xcalloc(t->slots, sizeof *t->keys);
		t->locs = xcalloc(t->slots, sizeof *t->locs);
		t->full = xcalloc(t->slots, 1);
		t->used = 0;
		for (size_t i = 0; i < old.slots; i++)
			if (old.full[i])
				table_insert(t, old.keys[i], &old.locs[i]);
		free(old.keys);
		free(old.locs);
		free(old.full);
	}
	table_insert(t, hash, loc);
}

/* ---- refs files ------------------------------------------------------------ */

int
ch_refs_read(struct store *s, const char *key, char ***packs, int *final,
    char *hash, size_t n, struct cairn_err *err)
{
	char *text = NULL, **v;
	size_t len = 0, n_v = 0;
	cJSON *o, *p;
	int rc;

	*packs = NULL;
	rc = store_get_mem(s, key, CH_REFS_MAX, &text, &len, err);
	if (rc < 0)
		return rc;
	o = json_parse(text, len, NULL);
	free(text);
	if (!cJSON_IsObject(o) || json_int(o, "version", 0) != 1 ||
	    !cJSON_IsArray(json_get(o, "packs"))) {
		cJSON_Delete(o);
		return cairn_err_set(err, CAIRN_EPROTO, "%s: not a refs file",
		    key);
	}
	v = xcalloc((size_t)cJSON_GetArraySize(json_get(o, "packs")) + 1,
	    sizeof *v);
	cJSON_ArrayForEach(p, json_get(o, "packs"))
		if (cJSON_IsString(p) && ch_pack_name_ok(p->valuestring))
			v[n_v++] = xstrdup(p->valuestring);
	*final = cJSON_IsTrue(json_get(o, "final"));
	snprintf(hash, n, "%s", json_str_or(o, "hash", ""));
	cJSON_Delete(o);
	*packs = v;
	return 0;
}

int
ch_refs_write(struct store *s, const char *key, const char *backup,
    int final, const char *hash, char *const *packs, struct cairn_err *err)
{
	cJSON *o = cJSON_CreateObject(), *a;
	char *text;
	int rc;

	cJSON_AddNumberToObject(o, "version", 1);
	cJSON_AddStringToObject(o, "backup", backup);
	cJSON_AddBoolToObject(o, "final", final);
	cJSON_AddStringToObject(o, "hash", hash);
	a = cJSON_AddArrayToObject(o, "packs");
	for (size_t i = 0; packs != NULL && packs[i] != NULL; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(packs[i]));
	text = json_print(o);
	cJSON_Delete(o);
	rc = store_put_mem(s, key, text, strlen(text), err);
	free(text);
	return rc;
}

/* ---- listing ---------------------------------------------------------------- */

static int
keys_cb(void *arg, const struct store_entry *e)
{
	struct ch_keys *k = arg;
	size_t pl = strlen(k->prefix), sl = strlen(k->suffix), kl;

	if (e->is_prefix)
		return 0;
	kl = strlen(e->key);
	if (kl <= pl + sl || !str_has_suffix(e->key, k->suffix) ||
	    memchr(e->key + pl, '/', kl - pl - sl) != NULL)
		return 0;
	if (k->n + 1 >= k->cap) {
		k->cap = k->cap ? k->cap * 2 : 32;
		k->v = xreallocarray(k->v, k->cap, sizeof *k->v);
		k->sizes = xreallocarray(k->sizes, k->cap, sizeof *k->sizes);
	}
	k->v[k->n] = xstrndup(e->key + pl, kl - pl - sl);
	k->sizes[k->n++] = e->stat.size;
	k->v[k->n] = NULL;
	return 0;
}

/* Names of the keys "<prefix><name><suffix>" (no further '/'). */
int
ch_keys_list(struct store *s, const char *prefix, const char *suffix,
    struct ch_keys *k, struct cairn_err *err)
{
	memset(k, 0, sizeof *k);
	k->prefix = prefix;
	k->suffix = suffix;
	return store_list(s, prefix, NULL, keys_cb, k, err);
}

void
ch_keys_free(struct ch_keys *k)
{
	strv_free(k->v);
	free(k->sizes);
	memset(k, 0, sizeof *k);
}

