/*
 * verify.h: is a backup in storage whole? (`cairn backup verify`, and the
 * server's periodic verification.)
 *
 * verify_backup() reads the backup back from its store, through the
 * decrypting layer when the location encrypts (so every byte is
 * authenticated on the way), and checks:
 *   - velero-backup.json, the logs, results and resource list read whole;
 *   - the tarball: its bytes split into the parts the backup recorded
 *     (status.checkpoint.parts: number, bytes, sha256), each part's
 *     SHA-256 as recorded, the total size as recorded, and the archive
 *     reads to its end (gzip CRCs, tar headers);
 *   - the items: every resource entry of the tarball against the resource
 *     list (same apiVersion/Kind and namespace/name, as multisets);
 *   - the volume data: each hostpath VolumePluginBackup's archive (from
 *     the stored -volumepluginbackups file) reads to its end with the
 *     stored size it recorded.
 * The first problem found is named: the part (number and byte range) or
 * the file. Memory stays flat: the tarball streams, the item sets are
 * compared through an order-independent hash (counts and a sum of
 * SHA-256s), not kept.
 *
 * verify_loop_start() runs the periodic check in a thread of `cairn
 * server` (--verify-period): each period it verifies the Completed and
 * PartiallyFailed Backups whose status.verification is older than the
 * period, one at a time, and writes the result into their status.
 */
#ifndef CAIRN_VERIFY_H
#define CAIRN_VERIFY_H

#include <stdatomic.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "base/err.h"

struct kube;
struct store;

struct verify_report {
	int passed;			/* 1: every check passed */
	int64_t parts;			/* parts the backup recorded */
	int64_t parts_checked;		/* ... whose SHA-256 was checked */
	int64_t items;			/* resource entries (legacy paths) */
	int64_t volumes;		/* volume archives read */
	uint64_t bytes;			/* stored bytes read */
	char message[CAIRN_ERR_MSG_MAX]; /* what passed, or the problem */
};

/*
 * Verify backup `name` under prefix in s. backup is its object (the
 * cluster's) or NULL: then velero-backup.json from the store is used.
 * Returns 0 when the checks ran (r->passed says how they went: a damaged
 * or incomplete backup is a result, not an error), < 0 when they could
 * not run to a verdict (storage unreachable, credentials refused, stop
 * asked: CAIRN_ECANCELED), with err. stop (may be NULL): non-zero ends it.
 */
int verify_backup(struct store *s, const char *prefix, const char *name,
	const cJSON *backup, const atomic_int *stop, struct verify_report *r,
	struct cairn_err *err);

/*
 * The status.verification object for r (owned): lastVerified now, result
 * Passed or Failed, message, partsChecked, itemsChecked, verifiedBy.
 */
cJSON *verify_status(const struct verify_report *r, const char *by);

struct verify_loop;
struct verify_loop_opts {
	struct kube *kube;		/* borrowed, thread-safe */
	const char *namespace;		/* borrowed for the thread's life */
	const char *server_id;		/* borrowed: status.verification.verifiedBy */
	int64_t period_us;		/* > 0 */
};
/* Start the periodic verification thread; *out owned (verify_loop_stop). */
int verify_loop_start(const struct verify_loop_opts *o,
	struct verify_loop **out, struct cairn_err *err);
/* Stop it (a verification in progress is abandoned), join, free. NULL ok. */
void verify_loop_stop(struct verify_loop *v);

#endif
