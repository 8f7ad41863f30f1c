/*
 * chunks.h: deduplicated file data of the hostpath mover (issue 25:
 * incremental copies for thin uplinks).
 *
 * A volume copy is an index plus chunks. The index is the mover's pax
 * tar.gz (engine/hostpath.h), one entry per file with every piece of
 * metadata, where a regular file's data is replaced by its chunk list
 * (the entry carries the marker xattr "cairn.chunks"); the file's bytes
 * are cut into content-defined chunks (engine/chunker.h), each named by
 * its hash and stored once, compressed, in a pack. A later copy of the
 * same volume stores only the chunks its parent (the last completed copy
 * of the volume) does not hold, and reuses the parent's list of a file
 * whose size, mtime, ctime, inode and device did not change without
 * reading it. A restore reads one index and fetches the chunks it names:
 * one step, whatever the number of copies before it.
 *
 * Keys, in the backup's location (Velero's layout keeps its top level:
 * plugins/ is the place for a plugin's own data):
 *   <prefix>/backups/<b>/volumes/<pv>.index.tar.gz        the index
 *   <prefix>/plugins/cairn-hostpath/<pv>/packs/<b>-<16 hex>.pack
 *   <prefix>/plugins/cairn-hostpath/<pv>/refs/<b>.json     packs <b> uses
 * Pack names are random, so no key says anything about the content.
 *
 * Chunk names: SHA-256 of the chunk's bytes; in an encrypting location
 * (store_content_key()) HMAC-SHA256 under a key derived from the
 * location's encryption key, so that nothing stored, not even inside the
 * encrypted index, is a plain hash of user data that could confirm a
 * guess. The name of the hash ("sha256", "hmac-sha256:<key id>") is in
 * every chunk list and refs file; a parent hashed otherwise is not used.
 *
 * Packs: records "CCK1", flags (1: deflate), 3 zero bytes, plaintext
 * length and payload length (32-bit big-endian), the 32-byte chunk name,
 * the payload; a pack is stored whole (one put, encrypted as one segment
 * when the location encrypts) once it reaches the pack size, and always
 * before any index part that names its chunks is uploaded (the caller's
 * chunks_flush()), so a stored index part only ever names stored chunks.
 *
 * Deleting a backup (chunks_release(), from gc_clean_backup()) frees a
 * pack when no other backup's refs name it. The refs protocol that makes
 * this safe while other copies run and build on the backup being
 * deleted:
 *  - a copy writes its refs first (not final: the parent's packs, plus
 *    what an earlier attempt of the same copy pinned), then checks that
 *    the parent's refs still exist (else it builds on nothing), and only
 *    then writes packs; at the end its refs become final and exact (the
 *    packs its index names);
 *  - a deletion removes the backup's refs first, then lists all refs and
 *    packs of the volume, and deletes a pack that no refs name unless it
 *    belongs to (is named after) a backup whose refs are not final: a
 *    copy in progress.
 * A copy that saw the parent's refs after pinning was pinned before the
 * deletion listed refs, so the listing sees the pin. (docs/plugins.md,
 * "Incremental copies".)
 *
 * Threads: a writer or a reader is used by one thread; any number at once.
 */
#ifndef CAIRN_CHUNKS_H
#define CAIRN_CHUNKS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "base/buf.h"
#include "base/err.h"
#include "storage/store.h"

struct archive;
struct archive_entry;
struct chunks_writer;
struct chunks_reader;

#define CHUNKS_DIR		"plugins/cairn-hostpath"
#define CHUNKS_PACK_SIZE	(8u << 20)	/* default pack size */
#define CHUNKS_MARKER		"cairn.chunks"	/* xattr of a chunked entry */
#define CHUNKS_LIST_LINE_MAX	512		/* one line of a chunk list */
#define CHUNKS_HASH_NAME_MAX	64
#define CHUNKS_INDEX_SUFFIX	".index.tar.gz"	/* hostpath_key() */

/* "<prefix>/plugins/cairn-hostpath/<volume>/", NULL for a bad name. Owned. */
char *chunks_volume_dir(const char *prefix, const char *volume);

/* What a copy moved. */
struct chunks_stats {
	uint64_t read;		/* file bytes read and hashed */
	uint64_t reused;	/* file bytes found stored (chunks, unchanged files) */
	uint64_t uploaded;	/* pack bytes stored (as given to the store) */
	uint64_t chunks_new, chunks_reused;
	uint64_t packs;		/* packs stored */
	uint64_t files_unchanged;	/* lists taken from the parent unread */
};

struct chunks_config {
	struct store *s;
	const char *vol_dir;		/* chunks_volume_dir() */
	const char *backup;		/* this copy's backup: names packs, refs */
	const char *parent;		/* backup to build on, or NULL */
	const char *parent_index;	/* its index key (with parent) */
	size_t pack_size;		/* 0: CHUNKS_PACK_SIZE */
	const char *spool_dir;		/* the parent's index is spooled here */
	/*
	 * The copy resumes an earlier attempt: the chunks that attempt stored
	 * (its packs' directories) are known, not stored again.
	 */
	int resume;
	/* Asked before every storage write; < 0 stops with that error. */
	int (*fence)(void *arg, struct cairn_err *err);
	/*
	 * n more file bytes are covered (read, or known unchanged); < 0
	 * stops (the caller's progress and fence every few MiB).
	 */
	int (*tick)(void *arg, uint64_t n, struct cairn_err *err);
	void *arg;
	const atomic_int *stop;
};

/*
 * Start a copy: the chunk naming of the store, the refs pin (see above),
 * and the parent's index read (spooled to a temp file) into the table of
 * stored chunks. A parent that cannot be used (gone, other hash, its refs
 * or index unreadable as data) is logged and dropped: the copy then
 * stores everything; storage errors are errors. cfg's strings are copied.
 * *out owned (chunks_writer_free).
 */
int chunks_writer_open(const struct chunks_config *cfg,
	struct chunks_writer **out, struct cairn_err *err);
/* The parent in use, or NULL; borrowed. */
const char *chunks_writer_parent(const struct chunks_writer *w);
/* "sha256" or "hmac-sha256:<key id>"; borrowed. */
const char *chunks_writer_hash_name(const struct chunks_writer *w);

/*
 * The chunk list of regular file fd (path rel in the volume, stat st)
 * into out (reset first): the parent's list when the file is unchanged,
 * else the file read (its data extents, holes left out), cut into chunks,
 * each stored unless known. Then mark the index entry e with
 * chunks_mark_entry(e, out->len) and write out as its data.
 */
int chunks_file(struct chunks_writer *w, int fd, const char *rel,
	const struct stat *st, struct buf *out, struct cairn_err *err);
/* Make e (a regular file of the index) a chunked entry of list_len bytes. */
void chunks_mark_entry(struct archive_entry *e, size_t list_len);

/*
 * Store the open pack, if any: before an index part is uploaded, and by
 * the caller at a file boundary once chunks_open_bytes() reached the pack
 * size (a pack is only cut inside a file past twice the pack size).
 */
int chunks_flush(struct chunks_writer *w, struct cairn_err *err);
size_t chunks_open_bytes(const struct chunks_writer *w);
/*
 * The copy's index is complete at index_key: store the open pack and
 * make the refs final with the packs the index names (read back from
 * storage when resumed, i.e. when parts of the index were written by an
 * earlier attempt).
 */
int chunks_writer_finish(struct chunks_writer *w, const char *index_key,
	int resumed, struct cairn_err *err);
/* The copy failed for good: drop its refs, its packs become garbage. */
void chunks_writer_abandon(struct chunks_writer *w);
void chunks_writer_stats(const struct chunks_writer *w,
	struct chunks_stats *st);
void chunks_writer_free(struct chunks_writer *w);

/* ---- restore ---------------------------------------------------------- */

/* A reader of the chunks under vol_dir of s (borrowed). Owned. */
struct chunks_reader *chunks_reader_new(struct store *s, const char *vol_dir);
void chunks_reader_free(struct chunks_reader *r);
/* 1 if e (read from an index) is a chunked entry. */
int chunks_entry_is_list(struct archive_entry *e);
/*
 * Restore chunked entry e, whose data (its chunk list) is next in archive
 * in: the marker dropped, the file's size set, its header written to out
 * (archive_write_disk), then every chunk fetched, checked against its
 * name and written at its offset (holes stay holes). tick() gets the file
 * bytes written. The caller finishes the entry. Errors name rel.
 */
int chunks_restore_entry(struct chunks_reader *r, struct archive *in,
	struct archive_entry *e, struct archive *out, const char *rel,
	int (*tick)(void *arg, uint64_t n, struct cairn_err *err), void *arg,
	struct cairn_err *err);

/* ---- deletion ----------------------------------------------------------- */

/*
 * Backup `backup` is being deleted (its folder still in place): for each
 * volume it has chunk data of (an index in its folder, or refs of its own
 * in the volume's directory), its refs go, then every pack of the volume
 * that no refs name and no copy in progress owns. Idempotent: run it again
 * after a crash. *packs / *bytes (may be NULL) count what was deleted.
 */
int chunks_release(struct store *s, const char *prefix, const char *backup,
	size_t *packs, uint64_t *bytes, struct cairn_err *err);

#endif
