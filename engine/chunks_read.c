/*
 * chunks_read.c: restoring chunked files. Contract in chunks.h.
 *
 * A chunked entry's list is read line by line from the index: its header
 * gives the file's size (the entry's header is then written to disk with
 * it, the marker dropped), each chunk line names a record in a pack. Packs
 * are fetched whole (a pack is one encrypted segment in an encrypting
 * location, so a range could not be read without reading the rest) and
 * the last three are kept: a restore walks the index in the order the
 * first copy stored the chunks, so most lines hit the pack of the line
 * before, and files that changed later come from a newer pack in between.
 * Every chunk is checked: the record's header (magic, lengths, name)
 * against the line, and its bytes, inflated, against its name (SHA-256,
 * or HMAC-SHA256 with the location's content key named in the list), so a
 * damaged or swapped pack fails the restore naming the file.
 */
#include "config.h"
#include "engine/chunks_int.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/mem.h"
#include "engine/chunker.h"

#define CR_SLOTS 3

struct pack_slot {
	char *name;
	char *data;
	size_t len;
	uint64_t used;			/* clock of the last use */
};

struct chunks_reader {
	struct store *s;
	char *vol_dir;
	struct pack_slot slot[CR_SLOTS];
	uint64_t clock;
	struct ch_hasher h;
	int h_ok;
	unsigned char *buf;		/* one chunk, inflated */
	z_stream z;
	int z_ok;
};

struct chunks_reader *
chunks_reader_new(struct store *s, const char *vol_dir)
{
	struct chunks_reader *r = xcalloc(1, sizeof *r);

	r->s = s;
	r->vol_dir = vol_dir != NULL ? xstrdup(vol_dir) : NULL;
	r->buf = xmalloc(CH_REC_MAX);
	r->z_ok = inflateInit(&r->z) == Z_OK;
	return r;
}

void
chunks_reader_free(struct chunks_reader *r)
{
	if (r == NULL)
		return;
	for (int i = 0; i < CR_SLOTS; i++) {
		free(r->slot[i].name);
		free(r->slot[i].data);
	}
	if (r->h_ok)
		ch_hasher_free(&r->h);
	if (r->z_ok)
		inflateEnd(&r->z);
	free(r->buf);
	free(r->vol_dir);
	free(r);
}

int
chunks_entry_is_list(struct archive_entry *e)
{
	const char *name;
	const void *val;
	size_t sz;

	if (archive_entry_filetype(e) != AE_IFREG ||
	    archive_entry_xattr_reset(e) == 0)
		return 0;
	while (archive_entry_xattr_next(e, &name, &val, &sz) == ARCHIVE_OK)
		if (strcmp(name, CHUNKS_MARKER) == 0)
			return 1;
	return 0;
}

/* e's xattrs without the marker. */
static void
drop_marker(struct archive_entry *e)
{
	struct { char *name; void *val; size_t sz; } *keep;
	const char *name;
	const void *val;
	size_t sz, n = 0, cap = (size_t)archive_entry_xattr_reset(e);

	keep = xcalloc(cap + 1, sizeof *keep);
	while (archive_entry_xattr_next(e, &name, &val, &sz) == ARCHIVE_OK &&
	    n < cap) {
		if (strcmp(name, CHUNKS_MARKER) == 0)
			continue;
		keep[n].name = xstrdup(name);
		keep[n].val = xmalloc(sz + 1);
		memcpy(keep[n].val, val, sz);
		keep[n++].sz = sz;
	}
	archive_entry_xattr_clear(e);
	for (size_t i = 0; i < n; i++) {
		archive_entry_xattr_add_entry(e, keep[i].name, keep[i].val,
		    keep[i].sz);
		free(keep[i].name);
		free(keep[i].val);
	}
	free(keep);
}

/* The pack name, fetched whole or from the cache. */
static int
pack_get(struct chunks_reader *r, const char *name, struct pack_slot **out,
    struct cairn_err *err)
{
	struct pack_slot *victim = &r->slot[0];
	char *key;
	int rc;

	r->clock++;
	for (int i = 0; i < CR_SLOTS; i++) {
		if (r->slot[i].name != NULL &&
		    strcmp(r->slot[i].name, name) == 0) {
			r->slot[i].used = r->clock;
			*out = &r->slot[i];
			return 0;
		}
		if (r->slot[i].used < victim->used)
			victim = &r->slot[i];
	}
	FREE_NULL(victim->name);
	FREE_NULL(victim->data);
	key = xasprintf("%spacks/%s", r->vol_dir, name);
	rc = store_get_mem(r->s, key, CH_PACK_MAX, &victim->data, &victim->len,
	    err);
	free(key);
	if (rc < 0)
		return rc;
	victim->name = xstrdup(name);
	victim->used = r->clock;
	*out = victim;
	return 0;
}

/* The chunk of ref into r->buf, checked. */
static int
chunk_fetch(struct chunks_reader *r, const struct ch_ref *ref, const char *rel,
    struct cairn_err *err)
{
	struct pack_slot *ps;
	const unsigned char *rec;
	unsigned char hash[CH_HASH_LEN];
	uint32_t plen;
	int rc;

	rc = pack_get(r, ref->pack, &ps, err);
	if (rc < 0)
		return cairn_err_prefix(err, "\"%.200s\": chunk of pack %s", rel,
		    ref->pack);
	if (ref->pack_off > ps->len || ps->len - ref->pack_off < ref->rec_len)
		return cairn_err_set(err, CAIRN_EPROTO, "\"%.200s\": pack %s "
		    "is shorter than its chunk list says", rel, ref->pack);
	rec = (const unsigned char *)ps->data + ref->pack_off;
	plen = ref->rec_len - CH_REC_HDR;
	if (memcmp(rec, CH_REC_MAGIC, 4) != 0 ||
	    ch_get_be(rec + 8, 4) != ref->plain || ch_get_be(rec + 12, 4) != plen ||
	    memcmp(rec + 16, ref->hash, CH_HASH_LEN) != 0 ||
	    (rec[4] & ~CH_FLAG_DEFLATE) != 0)
		return cairn_err_set(err, CAIRN_EPROTO, "\"%.200s\": pack %s "
		    "holds another chunk at %llu", rel, ref->pack,
		    (unsigned long long)ref->pack_off);
	if (rec[4] & CH_FLAG_DEFLATE) {
		if (!r->z_ok || inflateReset(&r->z) != Z_OK)
			return cairn_err_set(err, CAIRN_EFAIL, "zlib");
		r->z.next_in = (Bytef *)(uintptr_t)(rec + CH_REC_HDR);
		r->z.avail_in = plen;
		r->z.next_out = r->buf;
		r->z.avail_out = ref->plain;
		if (inflate(&r->z, Z_FINISH) != Z_STREAM_END ||
		    r->z.total_out != ref->plain)
			return cairn_err_set(err, CAIRN_EPROTO, "\"%.200s\": a "
			    "chunk of pack %s does not inflate", rel,
			    ref->pack);
	} else {
		if (plen != ref->plain)
			return cairn_err_set(err, CAIRN_EPROTO, "\"%.200s\": a "
			    "raw chunk of pack %s has the wrong length", rel,
			    ref->pack);
		memcpy(r->buf, rec + CH_REC_HDR, plen);
	}
	if (ch_hash(&r->h, r->buf, ref->plain, hash) < 0 ||
	    memcmp(hash, ref->hash, CH_HASH_LEN) != 0)
		return cairn_err_set(err, CAIRN_EPROTO, "\"%.200s\": a chunk of "
		    "pack %s does not match its name (damaged or replaced)",
		    rel, ref->pack);
	return 0;
}

struct rst {
	struct chunks_reader *r;
	struct archive_entry *e;
	struct archive *out;
	const char *rel;
	int (*tick)(void *arg, uint64_t n, struct cairn_err *err);
	void *arg;
	struct ch_head head;
	int written;
};

/* The list's hash: the reader's hasher switched to it if needed. */
static int
use_hash(struct chunks_reader *r, const char *name, struct cairn_err *err)
{
	int rc;

	if (r->h_ok && strcmp(r->h.name, name) == 0)
		return 0;
	if (r->h_ok)
		ch_hasher_free(&r->h);
	r->h_ok = 0;
	rc = ch_hasher_init(&r->h, r->s, name, err);
	if (rc < 0)
		return rc;
	r->h_ok = 1;
	return 0;
}

static int
restore_line(void *arg, char *line, int n, struct cairn_err *err)
{
	struct rst *t = arg;
	struct ch_ref ref;
	int rc;

	if (n <= 2) {
		if (ch_head_parse(line, n, &t->head) < 0)
			return cairn_err_set(err, CAIRN_EPROTO, "\"%.200s\": "
			    "its chunk list has a bad header", t->rel);
		if (n == 1)
			return use_hash(t->r, t->head.hash_name, err);
		drop_marker(t->e);
		archive_entry_set_size(t->e, (la_int64_t)t->head.size);
		if (archive_write_header(t->out, t->e) < ARCHIVE_WARN)
			return cairn_err_set(err, CAIRN_EIO, "extracting "
			    "\"%.200s\": %s", t->rel,
			    archive_error_string(t->out));
		t->written = 1;
		return 0;
	}
	if (ch_ref_parse(line, &ref) < 0 || ref.off > t->head.size ||
	    t->head.size - ref.off < ref.plain || ref.plain > CHUNKER_MAX)
		return cairn_err_set(err, CAIRN_EPROTO, "\"%.200s\": bad chunk "
		    "list line: %.100s", t->rel, line);
	rc = chunk_fetch(t->r, &ref, t->rel, err);
	if (rc < 0)
		return rc;
	if (archive_write_data_block(t->out, t->r->buf, ref.plain,
	    (la_int64_t)ref.off) < ARCHIVE_WARN)
		return cairn_err_set(err, CAIRN_EIO, "writing \"%.200s\": %s",
		    t->rel, archive_error_string(t->out));
	return t->tick != NULL ? t->tick(t->arg, ref.plain, err) : 0;
}

int
chunks_restore_entry(struct chunks_reader *r, struct archive *in,
    struct archive_entry *e, struct archive *out, const char *rel,
    int (*tick)(void *arg, uint64_t n, struct cairn_err *err), void *arg,
    struct cairn_err *err)
{
	struct rst t;
	int rc;

	if (r == NULL || r->vol_dir == NULL)
		return cairn_err_set(err, CAIRN_EINVAL, "\"%.200s\" is stored "
		    "as chunks, but no chunk location was given", rel);
	memset(&t, 0, sizeof t);
	t.r = r;
	t.e = e;
	t.out = out;
	t.rel = rel;
	t.tick = tick;
	t.arg = arg;
	rc = ch_list_read(in, rel, restore_line, &t, err);
	if (rc == 0 && !t.written)
		rc = cairn_err_set(err, CAIRN_EPROTO, "\"%.200s\": its chunk "
		    "list is empty", rel);
	return rc;
}
