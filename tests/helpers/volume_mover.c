/*
 * volume_mover.c: run the hostpath mover outside the server, for the
 * benchmarks, the integration tests and by hand.
 *
 *   volume_mover backup  STORE_DIR KEY SRC_DIR [PART_SIZE] [OPTIONS]
 *   volume_mover restore STORE_DIR KEY DST_DIR [OPTIONS]
 *   volume_mover release STORE_DIR BACKUP
 *
 * OPTIONS (deduplicated copies, engine/chunks.h):
 *   --chunks DIR        the volume's chunk directory key
 *                       ("plugins/cairn-hostpath/<pv>/"); without it a
 *                       backup is the plain tar.gz of issue 11
 *   --backup NAME       this copy's backup (names its packs and refs)
 *   --parent NAME KEY   build on backup NAME's copy, whose index is KEY
 *
 * backup/restore print one line: "<op> <bytes> bytes <files> files
 * <stored> stored <parts> parts <seconds> s uploaded <n> read <n> reused
 * <n> new-chunks <n> unchanged-files <n>" and exit 0, or print the error
 * and exit 1. release deletes the chunk packs only BACKUP used
 * (chunks_release(), as deleting a backup does) and prints "released
 * <packs> packs <bytes> bytes".
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timeutil.h"
#include "engine/chunks.h"
#include "engine/hostpath.h"
#include "storage/store.h"

static int
usage(void)
{
	fprintf(stderr, "usage: volume_mover backup|restore STORE KEY DIR "
	    "[PART_SIZE] [--chunks DIR --backup NAME [--parent NAME KEY]]\n"
	    "       volume_mover release STORE BACKUP\n");
	return 2;
}

static int
release(struct store *s, const char *backup)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	size_t packs = 0;
	uint64_t bytes = 0;

	if (chunks_release(s, "", backup, &packs, &bytes, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	printf("released %zu packs %llu bytes\n", packs,
	    (unsigned long long)bytes);
	return 0;
}

int
main(int argc, char **argv)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct hostpath_opts o;
	struct hostpath_stats st;
	struct store *s = NULL;
	int64_t t0;
	int rc, i;

	signal(SIGPIPE, SIG_IGN);
	if (argc == 4 && strcmp(argv[1], "release") == 0) {
		if (store_open_fs(argv[2], 0, &s, &err) < 0) {
			fprintf(stderr, "%s\n", err.msg);
			return 1;
		}
		rc = release(s, argv[3]);
		store_free(s);
		return rc;
	}
	if (argc < 5 || (strcmp(argv[1], "backup") != 0 &&
	    strcmp(argv[1], "restore") != 0))
		return usage();
	memset(&o, 0, sizeof o);
	memset(&st, 0, sizeof st);
	for (i = 5; i < argc; i++) {
		if (strcmp(argv[i], "--chunks") == 0 && i + 1 < argc)
			o.chunk_dir = argv[++i];
		else if (strcmp(argv[i], "--backup") == 0 && i + 1 < argc)
			o.backup = argv[++i];
		else if (strcmp(argv[i], "--parent") == 0 && i + 2 < argc) {
			o.parent = argv[++i];
			o.parent_index = argv[++i];
		} else if (argv[i][0] >= '0' && argv[i][0] <= '9')
			o.part_size = (size_t)strtoull(argv[i], NULL, 10);
		else
			return usage();
	}
	if (o.chunk_dir != NULL && o.backup == NULL &&
	    strcmp(argv[1], "backup") == 0)
		return usage();
	if (store_open_fs(argv[2], 1, &s, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	t0 = time_mono_us();
	if (strcmp(argv[1], "backup") == 0)
		rc = hostpath_backup(s, argv[3], argv[4], &o, &st, &err);
	else
		rc = hostpath_restore(s, argv[3], argv[4], &o, &st, &err);
	if (rc < 0) {
		fprintf(stderr, "%s\n", err.msg);
		store_free(s);
		return 1;
	}
	printf("%s %llu bytes %llu files %llu stored %d parts %.3f s "
	    "uploaded %llu read %llu reused %llu new-chunks %llu "
	    "unchanged-files %llu\n", argv[1],
	    (unsigned long long)st.bytes_done,
	    (unsigned long long)st.files_total,
	    (unsigned long long)st.compressed, st.parts,
	    (double)(time_mono_us() - t0) / 1e6,
	    (unsigned long long)st.bytes_uploaded,
	    (unsigned long long)st.bytes_read,
	    (unsigned long long)st.bytes_reused,
	    (unsigned long long)st.chunks_new,
	    (unsigned long long)st.files_unchanged);
	store_free(s);
	return 0;
}
