/*
 * partsink.h: the part pipeline's sink, shared by backups (the tarball)
 * and the hostpath mover (a volume's copy):
 *
 *   tarparts (tar entries -> gzip members, cut into parts)
 *     -> partsink: the part's bytes spooled to an unlinked temporary file
 *     -> fence(): the owner may still write (Lease, claim)
 *     -> store_mpu_put_part() of the spool as part N of the upload
 *        (its SHA-256 taken on the way into the spool: partsink_sha256(),
 *        and handed to the store with it, so no store hashes it again)
 *     -> stored(): the owner's checkpoint (journal first, then status)
 *
 * partsink_sink() gives the struct tarparts_sink that tarparts_open()
 * takes: begin() truncates the spool, write() appends to it (on
 * tarparts' compression thread, one at a time, see tarparts.h), end()
 * uploads and calls the owner back. A part is never held in memory.
 *
 * Threading: one partsink serves one tarparts writer; the callbacks run
 * on the writer's caller thread.
 */
#ifndef CAIRN_PARTSINK_H
#define CAIRN_PARTSINK_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "storage/store.h"

struct partsink;
struct tarparts_sink;

#define PARTSINK_SPOOL_BUF	(64u << 10)	/* stdio buffer of the spool */

/* The owner's side of the pipeline. Only stored is required. */
struct partsink_hooks {
	/*
	 * Before each part is uploaded: 0 to go on, < 0 stops the pipeline
	 * with that error before anything is written (fencing). NULL: go.
	 */
	int (*fence)(void *arg, int part, struct cairn_err *err);
	/*
	 * The upload of part failed with rc (err says "uploading part N of
	 * KEY: ..."): return the error to pass up, rc or another one. NULL:
	 * rc.
	 */
	int (*failed)(void *arg, int part, int rc, struct cairn_err *err);
	/*
	 * Part p (number, ETag, compressed size) is stored and holds entries
	 * tar entries: record it (the checkpoint). < 0 stops the pipeline
	 * with that error; the part stays in the upload.
	 */
	int (*stored)(void *arg, const struct store_part *p, uint64_t entries,
	    struct cairn_err *err);
	void *arg;
};

/*
 * A sink uploading parts of key in store s (borrowed) to the multipart
 * upload upload_id (copied), spooling in spool_dir (NULL or "": $TMPDIR,
 * else /tmp). hooks is copied. The spool file is created here (unlinked
 * at once, so nothing is left behind); CAIRN_EIO when it cannot be. On
 * failure *out is NULL.
 */
int partsink_open(struct store *s, const char *key, const char *upload_id,
	const char *spool_dir, const struct partsink_hooks *hooks,
	struct partsink **out, struct cairn_err *err);

/*
 * Hex SHA-256 of the bytes of the part stored last (what stored() is
 * told about: valid from then until the next part begins), "" before the
 * first. Recorded with the checkpoint so that verify and restores can
 * check each part (docs/backup-format.md). Borrowed.
 */
const char *partsink_sha256(const struct partsink *ps);

/* The tarparts sink of ps (ps must outlive the tarparts writer). */
void partsink_sink(struct partsink *ps, struct tarparts_sink *out);

/* Close the spool and free. NULL is fine. */
void partsink_free(struct partsink *ps);

#endif
