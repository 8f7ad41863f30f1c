/*
 * chunks_int.h: what the files of the chunks module share (its interface
 * is chunks.h):
 *
 *   chunks.c        names, keys, chunk lists, the table of stored chunks,
 *                   refs files
 *   chunks_write.c  a copy: packs, files, the parent, the refs pin
 *   chunks_read.c   restores: packs fetched and cached, chunks checked
 *   chunks_gc.c     deletion: refs dropped, unused packs deleted
 */
#ifndef CAIRN_CHUNKS_INT_H
#define CAIRN_CHUNKS_INT_H

#include <stdint.h>
#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "engine/chunks.h"

#define CH_HASH_LEN	32
#define CH_REC_HDR	48		/* pack record header */
#define CH_REC_MAGIC	"CCK1"
#define CH_FLAG_DEFLATE	1
#define CH_REC_MAX	(CH_REC_HDR + (5u << 20))	/* header + payload bound */
#define CH_PACK_MAX	(64u << 20)	/* largest pack a reader fetches */
#define CH_REFS_MAX	(64u << 20)	/* a refs file */
#define CH_INDEX_MAX	((uint64_t)16 << 30)	/* a spooled index */
#define CH_LIST_MAGIC	"cairn-chunks 1"
#define CH_PACK_SUFFIX	".pack"
#define CH_PACK_NAME_MAX	300

/* Hashing: SHA-256, or HMAC-SHA256 with a content key. */
struct ch_hasher {
	char name[CHUNKS_HASH_NAME_MAX];	/* "sha256", "hmac-sha256:<id>" */
	int keyed;
	EVP_MAC_CTX *mac;		/* keyed */
	EVP_MD_CTX *md;			/* plain */
};

/*
 * The hasher of hash name `name` for store s ("" or NULL: the store's own
 * for new copies: keyed with its current key when it encrypts). Errors:
 * an unknown name, a key the store does not have.
 */
int ch_hasher_init(struct ch_hasher *h, struct store *s, const char *name,
	struct cairn_err *err);
void ch_hasher_free(struct ch_hasher *h);
int ch_hash(struct ch_hasher *h, const void *p, size_t n,
	unsigned char out[CH_HASH_LEN]);

/* One reference of a chunk list: "c off plain hash pack packoff reclen". */
struct ch_ref {
	uint64_t off;			/* in the file */
	uint32_t plain;			/* bytes of file data */
	unsigned char hash[CH_HASH_LEN];
	char pack[CH_PACK_NAME_MAX];
	uint64_t pack_off;		/* record start in the pack */
	uint32_t rec_len;		/* header + payload */
};

/* Header of a chunk list (its first two lines). */
struct ch_head {
	char hash_name[CHUNKS_HASH_NAME_MAX];
	uint64_t size;
	int64_t mtime_s, mtime_ns, ctime_s, ctime_ns;
	uint64_t ino, dev;
};

/* The header lines of a list for a file with stat st. */
void ch_head_print(struct buf *b, const char *hash_name,
	const struct stat *st);
/* Parse header line 1 (n 1) or 2 (n 2) into h. 0 or CAIRN_EPROTO. */
int ch_head_parse(const char *line, int n, struct ch_head *h);
void ch_ref_print(struct buf *b, const struct ch_ref *r);
int ch_ref_parse(const char *line, struct ch_ref *r);
/* 1 if name can be a pack file name ("<backup>-<16 hex>.pack"). */
int ch_pack_name_ok(const char *name);
/* The backup a pack name belongs to, into out. 0 or -1. */
int ch_pack_backup(const char *name, char *out, size_t n);

/*
 * Read a chunk list line by line from archive entry data (the entry's
 * next data), calling fn for each line (NUL-terminated, no '\n'); fn < 0
 * stops with that. Lines over CHUNKS_LIST_LINE_MAX are CAIRN_EPROTO.
 */
int ch_list_read(struct archive *a, const char *what,
	int (*fn)(void *arg, char *line, int n, struct cairn_err *err),
	void *arg, struct cairn_err *err);

/* ---- the table of stored chunks ---- */

struct ch_loc {
	uint32_t pack;			/* index into the pack names */
	uint32_t plain, rec_len;
	uint64_t pack_off;
};

struct ch_table {
	/* open addressing, power-of-two slots, used < slots / 2 */
	unsigned char (*keys)[CH_HASH_LEN];
	struct ch_loc *locs;
	uint8_t *full;
	size_t slots, used;
	/* pack names, interned, with a flag each: named by this copy */
	char **packs;
	uint8_t *pack_used;
	size_t npacks, apacks;
	uint32_t *pslots;		/* name hash -> index + 1 */
	size_t npslots;
};

void ch_table_init(struct ch_table *t);
void ch_table_free(struct ch_table *t);
/* The index of pack name (added when new). */
uint32_t ch_table_pack(struct ch_table *t, const char *name);
/* The index of pack name, or -1 when it is not there. */
int64_t ch_table_pack_find(const struct ch_table *t, const char *name);
/* The location of chunk hash, or NULL. */
const struct ch_loc *ch_table_find(const struct ch_table *t,
	const unsigned char hash[CH_HASH_LEN]);
void ch_table_put(struct ch_table *t, const unsigned char hash[CH_HASH_LEN],
	const struct ch_loc *loc);

/* ---- refs files ---- */

/* ---- listing ---- */

/* The names of keys "<prefix><name><suffix>" (name without '/'). */
struct ch_keys {
	const char *prefix;		/* the listing's prefix */
	const char *suffix;		/* keep keys ending so */
	char **v;			/* names, NULL-terminated (owned) */
	uint64_t *sizes;		/* their stored sizes */
	size_t n, cap;
};
int ch_keys_list(struct store *s, const char *prefix, const char *suffix,
	struct ch_keys *k, struct cairn_err *err);
void ch_keys_free(struct ch_keys *k);

/*
 * A pack's directory "<pack name minus .pack>.dir", stored right after
 * the pack: CH_DIR_REC bytes per record (chunk name, record offset, record
 * length, plaintext length, big-endian), so that a copy resumed after a
 * crash finds the chunks its earlier attempt stored without reading the
 * packs back.
 */
#define CH_DIR_SUFFIX	".dir"
#define CH_DIR_REC	(CH_HASH_LEN + 16)

/* Big-endian fields of pack records and directories (n bytes). */
void ch_put_be(unsigned char *p, uint64_t v, int n);
uint64_t ch_get_be(const unsigned char *p, int n);

/* "<prefix>/plugins/cairn-hostpath/". Owned. */
char *ch_chunks_root(const char *prefix);
/* The refs key of backup b under vol_dir. Owned. */
char *ch_refs_key(const char *vol_dir, const char *backup);
/*
 * Read refs key: 0 with *packs (owned NULL-terminated list), *final and
 * hash name (into hash, n bytes); CAIRN_ENOTFOUND when missing;
 * CAIRN_EPROTO when not a refs file.
 */
int ch_refs_read(struct store *s, const char *key, char ***packs, int *final,
	char *hash, size_t n, struct cairn_err *err);
/* Write refs key (packs NULL-terminated). */
int ch_refs_write(struct store *s, const char *key, const char *backup,
	int final, const char *hash, char *const *packs, struct cairn_err *err);

#endif
