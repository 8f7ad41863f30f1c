/*
 * hostpath.h: the built-in `hostpath` volume mover, for hostPath and local
 * PersistentVolumes (what k3s's local-path provisioner creates).
 *
 * Backup: the volume's directory becomes one tar.gz object in storage,
 *   <prefix>/backups/<backup>/volumes/<volume>.tar.gz
 * (inside the backup's own folder, so Velero's top-level layout stays
 * valid and deleting a backup deletes its volume data). The archive is a
 * pax tar (long and odd names, sparse files as GNU sparse 1.0, symlinks
 * as links, never followed; modes, owners, times, xattrs), written as a
 * multipart upload whose parts each hold whole files and are complete
 * gzip members, so their concatenation is one ordinary .tar.gz that
 * `tar xzf` reads.
 *
 * Deduplicated copies (opts.chunk_dir, issue 25): the object is then the
 * copy's index, the same pax tar.gz where each regular file's data is its
 * chunk list (engine/chunks.h), and the data goes to chunk packs shared
 * by the volume's copies: a copy built on a parent stores only chunks
 * the parent does not hold and reads only files that changed. Packs are
 * stored before the index part naming them, so resume and takeover stay
 * as below; the copy's refs (the packs it uses) are made final once the
 * index is complete.
 *
 * Resume: after each part is stored the caller's checkpoint() gets the
 * upload id, the number of parts stored, the last file in them (walk
 * order: depth first, names sorted bytewise) and the byte and file counts.
 * Given that checkpoint back, hostpath_backup() keeps parts 1..k and
 * continues with the first file after last_file. Work redone after a
 * crash is at most one part.
 *
 * Takeover (another process's checkpoint, opts.resume_foreign): the
 * previous owner may have stored parts after the checkpoint it published
 * and may still have one upload in flight, so the parts kept are 1..k and
 * the copy continues at (highest part number the upload holds) + 2; the
 * numbers in between are a gap that never enters the object (recorded in
 * the checkpoint as gap_from..gap_to). Part numbers only ever grow, so a
 * late write of the old owner can never replace a part of the new one.
 *
 * Fencing: opts.fence is asked before every storage write (upload create,
 * each part, complete), between entries and every 4 MiB of file data; a
 * negative answer stops the copy with that error before anything more is
 * written (docs/protocol.md, volume work).
 *
 * Restore: the object is streamed through libarchive into a target
 * directory with modes, owners (when run as root), times, symlinks and
 * sparse files restored; names that are absolute or hold "..", and any
 * write through a symlink, are refused (ARCHIVE_EXTRACT_SECURE_*), so
 * nothing is written outside the target.
 *
 * Threads: each call is independent; any number may run at once.
 */
#ifndef CAIRN_HOSTPATH_H
#define CAIRN_HOSTPATH_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "storage/store.h"

#define HOSTPATH_PROVIDER	"cairn.io/hostpath"
#define HOSTPATH_PART_SIZE	(8u << 20)	/* default compressed part size */
#define HOSTPATH_PATH_MAX	4096		/* longest relative path walked */
#define HOSTPATH_CKPT_MAX	1024		/* encoded checkpoint (journal last_file) */

/*
 * Where a backup's copy of one volume lives:
 * "<prefix>/backups/<backup>/volumes/<volume>.index.tar.gz" (copies made
 * before deduplicated copies existed are "<volume>.tar.gz": restores find
 * them through the VolumePluginBackup's snapshotID). Owned; NULL for a
 * bad name.
 */
char *hostpath_key(const char *prefix, const char *backup, const char *volume);

/* Resume point of a volume copy. */
struct hostpath_ckpt {
	char upload_id[STORE_UPLOAD_ID_MAX];
	int parts;				/* highest part number stored */
	int gap_from, gap_to;			/* parts not in the object (0 0: none) */
	char last_file[HOSTPATH_PATH_MAX];	/* last path in part `parts` */
	uint64_t bytes_done;			/* file bytes in those parts */
	uint64_t files_done;			/* entries in those parts */
	uint64_t bytes_uploaded;		/* stored for them (parts, packs) */
};

/* Where a copy stands (progress callback). */
struct hostpath_progress {
	uint64_t bytes_done;		/* file bytes covered (read, or known unchanged) */
	uint64_t bytes_total;		/* file bytes to cover (raised, never lowered) */
	uint64_t files_done, files_total;
	uint64_t bytes_uploaded;	/* backup: bytes stored (index parts, packs) */
};

/*
 * Encode ck as compact JSON for the journal's volume last_file column
 * (at most HOSTPATH_CKPT_MAX bytes with the NUL). CAIRN_ETOOBIG when it
 * does not fit (a very long path or upload id): that checkpoint is then
 * simply not taken, the next one will be.
 */
int hostpath_ckpt_encode(const struct hostpath_ckpt *ck, char *out, size_t n);
/* Decode; CAIRN_EINVAL when s is not one (e.g. "" or a plain path). */
int hostpath_ckpt_decode(const char *s, struct hostpath_ckpt *ck);

struct hostpath_opts {
	size_t part_size;		/* compressed; 0: HOSTPATH_PART_SIZE */
	const char *spool_dir;		/* where a part is staged; NULL: $TMPDIR or /tmp */
	/* Where the copy stands; bytes_done never goes down. */
	void (*progress)(void *arg, const struct hostpath_progress *p);
	/*
	 * A part is stored (backup only). Return 0 to go on; an error stops
	 * the copy with that error (the upload is kept for a resume).
	 */
	int (*checkpoint)(void *arg, const struct hostpath_ckpt *ck,
	    struct cairn_err *err);
	/*
	 * Asked before every storage write, between entries and every
	 * 4 MiB of data (backup and restore); < 0 stops the copy with that
	 * error (err filled). NULL: never stops.
	 */
	int (*fence)(void *arg, struct cairn_err *err);
	void *arg;
	const struct hostpath_ckpt *resume;	/* NULL: start afresh */
	/*
	 * resume is another owner's published checkpoint (takeover, or a
	 * restart without its journal): keep parts 1..resume->parts only and
	 * continue after every number the upload holds, plus one. It must
	 * have no gap.
	 */
	int resume_foreign;
	const atomic_int *stop;	/* non-zero: CAIRN_ECANCELED at the next file */
	uint64_t expect_total;		/* restore: file bytes the backup had (progress total) */
	/*
	 * Deduplicated copies (engine/chunks.h): regular files' data goes to
	 * the chunk packs of chunk_dir (chunks_volume_dir()) and the object
	 * at key is the copy's index; a restore fetches the chunks an index
	 * names from there. NULL: the whole data inside the tar.gz (issue 11's
	 * format, which restores always read).
	 */
	const char *chunk_dir;
	const char *backup;		/* backup: this copy's backup (names packs) */
	const char *parent;		/* backup: a completed copy to build on, or NULL */
	const char *parent_index;	/* its index key */
};

struct hostpath_stats {
	uint64_t bytes_total;		/* file bytes (logical sizes) */
	uint64_t files_total;		/* entries (files, dirs, links...) */
	uint64_t bytes_done;
	uint64_t compressed;		/* bytes of the object's parts */
	int parts;			/* parts of the finished object */
	char etag[STORE_ETAG_MAX];	/* of the finished object */
	/* deduplicated copies */
	uint64_t bytes_uploaded;	/* parts and packs stored, all attempts */
	uint64_t bytes_read;		/* file bytes read by this call */
	uint64_t bytes_reused;		/* file bytes found stored (this call) */
	uint64_t chunks_new, chunks_reused, files_unchanged;
	char parent[254];		/* the copy built on, "" when none */
	char hash_name[64];		/* how its chunks are named */
};

/*
 * Copy directory dir to key in s (see above). 0 when the object is
 * complete. CAIRN_ECANCELED (stop) and errors after the upload started
 * leave the upload in place for a resume with the last checkpoint; a
 * resume whose upload is gone fails with CAIRN_ENOTFOUND (start afresh).
 * A file that cannot be read fails the copy naming it. st may be NULL.
 */
int hostpath_backup(struct store *s, const char *key, const char *dir,
	const struct hostpath_opts *o, struct hostpath_stats *st,
	struct cairn_err *err);

/*
 * Restore key of s into directory dir (created if missing, 0700 until
 * the archive's own root entry sets its mode). Unsafe entries fail the
 * restore naming them. progress() gets file bytes written against
 * o->expect_total (raised when passed). st may be NULL.
 */
int hostpath_restore(struct store *s, const char *key, const char *dir,
	const struct hostpath_opts *o, struct hostpath_stats *st,
	struct cairn_err *err);

#endif
