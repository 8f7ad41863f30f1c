/*
 * partsrc.h: a tarball source that checks the parts a backup recorded.
 *
 * A backup records its tarball as parts (status.checkpoint.parts: number,
 * bytes, sha256, in order; docs/backup-format.md). A partsrc wraps the
 * source the archive reader pulls from (engine/archive_read.h), hashes the
 * bytes going by and closes each part's SHA-256 at its recorded boundary,
 * so one streaming read both parses the tarball and checks every part.
 * Used by `backup verify` (engine/verify.c) and by restores, whose plan
 * reads the whole tarball before anything is created (engine/restore.c):
 * a part that was changed, swapped for another attempt's or cut out fails
 * the restore before its first create, and names the part.
 *
 * A backup with no recorded parts (a Velero tarball, an older cairn)
 * passes through unchecked. The wrapper owns the inner source: closing
 * it (through the archive reader, or partsrc_free()) closes the inner one.
 */
#ifndef CAIRN_PARTSRC_H
#define CAIRN_PARTSRC_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "engine/archive_read.h"
#include "storage/store.h"

#define PARTSRC_MAX STORE_PART_MAX_NUMBER	/* parts a backup may record */

struct partsrc;

/*
 * A checker for the parts recorded in `parts` (the JSON array
 * status.checkpoint.parts; NULL or empty for none) around `inner`, whose
 * ownership it takes. NULL (inner closed) when more than PARTSRC_MAX
 * parts are recorded.
 */
struct partsrc *partsrc_new(const cJSON *parts, const struct tarread_src *inner);
/* The source to hand to tarread_open(): reads inner, checking. */
void partsrc_source(struct partsrc *ps, struct tarread_src *out);
/*
 * The first problem seen, or NULL: a part whose SHA-256 differs, bytes
 * beyond the recorded parts, the tarball ending inside a part. Call
 * partsrc_end() first once the reader reached the archive's end.
 */
const char *partsrc_problem(const struct partsrc *ps);
/* The reader reached the end: every recorded part must have been read. */
void partsrc_end(struct partsrc *ps);
/* "part 3 (tarball bytes 100..200)" for where the source is now. */
void partsrc_where(const struct partsrc *ps, char *out, size_t n);
/* Parts recorded; parts whose recorded SHA-256 matched. */
int64_t partsrc_parts(const struct partsrc *ps);
int64_t partsrc_checked(const struct partsrc *ps);
/* Frees ps, and closes the inner source if no reader closed it. */
void partsrc_free(struct partsrc *ps);

#endif
