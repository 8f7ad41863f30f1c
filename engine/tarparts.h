/*
 * tarparts.h: a tar.gz written as a series of independent gzip members.
 *
 * libarchive produces plain tar (no libarchive compression filter, no
 * block buffering), so after each entry every byte of it has been handed
 * to us; we deflate those bytes with zlib ourselves and finish a gzip
 * member (Z_FINISH) at a part boundary at the latest (with compression
 * threads, at every batch). Each part is therefore one or more complete
 * gzip members holding whole tar entries, and the concatenation of parts
 * 1..n is one valid .tar.gz (GNU tar, libarchive, Python's tarfile and
 * Go's gzip reader all read multi-member streams). Only the last part
 * carries the tar end-of-archive blocks.
 *
 * The caller decides where a part may end (between items, never between
 * the two entries of one item) by calling tarparts_boundary(); a part is
 * cut there once its compressed size reached part_size. Compressed bytes
 * go to a sink (begin/write/end per part): the backup engine and the
 * hostpath mover both give it engine/partsink.h's, which streams them to
 * storage, never to a whole local tarball. Entries are either items
 * (tarparts_add: a path and bytes in memory) or files described by
 * libarchive (tarparts_add_header/_data/_end_entry: the mover's).
 *
 * Resume: a new writer opened with first_part = k + 1 continues a tarball
 * whose parts 1..k are stored; tar entries carry no state between them,
 * so parts 1..k followed by the new writer's parts form one valid whole.
 *
 * Threading: one writer is used by one thread (the caller). After
 * tarparts_start_thread(), deflate runs on compression threads the writer
 * owns, fed with batches through a bounded queue, so that producing
 * entries and compressing them overlap; the threads also make the tar
 * headers of tarparts_add()'s entries (the usual ones: ustar paths, data
 * up to 16 KiB), whose data the batch holds until then. Each batch is then a
 * gzip member of its own, compressed whole by ISA-L (so several
 * threads deflate several batches at once); the parts are still whole
 * members, and the stream reads as before. The bytes written, and where
 * parts end, are the same whatever the number of threads and however
 * fast they go (see tarparts_start_thread()). The sink's write() is
 * then called on one compression thread at a time, in order; begin() and
 * end() are always called on the caller's thread while no write() is in
 * flight (every batch is written out before a part is closed), so a sink
 * needs no lock as long as write() only touches state that begin() and
 * end() also own.
 */
#ifndef CAIRN_TARPARTS_H
#define CAIRN_TARPARTS_H

#include <stddef.h>
#include <stdint.h>
#include "base/err.h"

struct tarparts;
struct archive_entry;

struct tarparts_sink {
	/* A new part starts (1-based number). */
	int (*begin)(void *arg, int part, struct cairn_err *err);
	/* Compressed bytes of the current part, in order. */
	int (*write)(void *arg, const void *p, size_t n, struct cairn_err *err);
	/*
	 * The current part is complete: bytes compressed bytes, entries tar
	 * entries in it. The sink stores it (e.g. uploads the part) and
	 * returns 0, or an error that the writer passes up unchanged.
	 */
	int (*end)(void *arg, int part, uint64_t bytes, uint64_t entries,
	    struct cairn_err *err);
	void *arg;
};

/*
 * Open a writer whose first part gets number first_part (1 for a new
 * tarball, k+1 to continue after k stored parts). part_size is the
 * compressed size after which tarparts_boundary() cuts a part. mtime
 * (seconds) is stamped on every entry, so a resumed writer produces the
 * same bytes. The sink is copied. On failure *out is NULL.
 */
int tarparts_open(const struct tarparts_sink *sink, int first_part,
	size_t part_size, int64_t mtime, struct tarparts **out,
	struct cairn_err *err);

/*
 * Append one regular-file entry (mode 0644) holding len bytes of data.
 * A path of printable ASCII up to 100 bytes (every Kubernetes item path
 * short enough) gets a plain ustar header; any other path (UTF-8) a pax
 * extended header with its path record before the ustar one, and no
 * hdrcharset record (GNU tar warns about that keyword).
 * The data is copied before the call returns. The first entry opens part
 * first_part through the sink. Errors from the
 * sink, libarchive or zlib are returned; the writer is then unusable
 * (sticky error) and should be freed.
 */
int tarparts_add(struct tarparts *tp, const char *path, const void *data,
	size_t len, struct cairn_err *err);

/*
 * The zlib level of the gzip members (default 1, Z_BEST_SPEED: most of a
 * backup's CPU; the hostpath mover keeps 6, gzip's). Before the first
 * entry and tarparts_start_thread(); CAIRN_EINVAL otherwise.
 */
int tarparts_set_level(struct tarparts *tp, int level, struct cairn_err *err);

/*
 * An entry as libarchive describes a file from disk (the hostpath mover:
 * directories, symlinks, devices, sparse files, xattrs, ACLs), written
 * with a full pax writer: the header now, then its data in any number of
 * tarparts_add_data() calls (size as the header says; holes of a sparse
 * entry are given as zeros, which the writer drops), then
 * tarparts_end_entry() (the padding). Entries of both kinds may follow
 * each other. Errors are sticky as tarparts_add()'s.
 */
int tarparts_add_header(struct tarparts *tp, struct archive_entry *e,
	struct cairn_err *err);
int tarparts_add_data(struct tarparts *tp, const void *data, size_t len,
	struct cairn_err *err);
int tarparts_end_entry(struct tarparts *tp, struct cairn_err *err);

/*
 * A point where a part may end. If the current part's compressed size
 * reached part_size, its gzip member is finished and the part handed to
 * the sink's end(); *cut (may be NULL) is then 1, else 0.
 */
int tarparts_boundary(struct tarparts *tp, int *cut, struct cairn_err *err);

/*
 * End the open part here, whatever its size (a point where a part may
 * end, as for tarparts_boundary()); nothing when no part is open. For a
 * writer whose parts follow something else than their size: the
 * deduplicating mover ends an index part once chunk packs were stored, so
 * that a checkpoint follows them.
 */
int tarparts_cut(struct tarparts *tp, struct cairn_err *err);

/*
 * Write the tar end-of-archive blocks and close the last part (a part is
 * opened for them if the previous one was just cut). After success the
 * writer only answers the getters below.
 */
int tarparts_finish(struct tarparts *tp, struct cairn_err *err);

/*
 * Compress on nthreads threads (0: as many as this process may use,
 * util_cpus()) from now on; call right after tarparts_open(), before the
 * first entry. Tar bytes go to the threads in batches of batch_size
 * bytes (0: 256 KiB), each compressed whole into a gzip member of its
 * own (ISA-L through gzmember.h, for the writer's zlib level), at most
 * nbatch (0: nthreads + 2, at least nthreads + 1) batches allocated, so
 * memory stays bounded and a slow sink slows the caller down instead of
 * queueing. A part boundary then looks at the compressed size of the
 * part's batches up to a few batches before the one being filled (one
 * per MiB of part_size, at most 7), waiting for them if need be: parts
 * end a little later than in the unthreaded mode, at the same places
 * whatever the threads do, so a tarball's bytes do not depend on the
 * number of threads or their timing. Errors of the threads
 * (compression, the sink's write()) are sticky and returned by the next
 * tarparts_add(), tarparts_boundary() or tarparts_finish(). Fails
 * (writer unchanged) only if no thread can be created or entries were
 * already added.
 */
int tarparts_start_thread(struct tarparts *tp, size_t batch_size, int nbatch,
	int nthreads, struct cairn_err *err);

/*
 * Free; a writer not finished is abandoned: nothing more reaches the sink
 * (the compression thread, if any, drops what is queued and is joined).
 */
void tarparts_free(struct tarparts *tp);

int tarparts_current_part(const struct tarparts *tp);	/* 0 if none open */
int tarparts_last_closed(const struct tarparts *tp);	/* 0 if none */
uint64_t tarparts_bytes_out(const struct tarparts *tp);	/* all parts */
/* Compressed bytes of the open part handed to the sink so far. */
uint64_t tarparts_part_bytes(const struct tarparts *tp);

#endif
