/*
 * volume_mover.c: run the hostpath mover outside the server, for the
 * benchmark and by hand.
 *
 *   volume_mover backup  STORE_DIR KEY SRC_DIR [PART_SIZE]
 *   volume_mover restore STORE_DIR KEY DST_DIR
 *
 * Prints one line: "<op> <bytes> bytes <files> files <stored> stored
 * <parts> parts <seconds> s" and exits 0, or prints the error and exits 1.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timeutil.h"
#include "engine/hostpath.h"
#include "storage/store.h"

int
main(int argc, char **argv)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct hostpath_opts o;
	struct hostpath_stats st;
	struct store *s = NULL;
	int64_t t0;
	int rc;

	signal(SIGPIPE, SIG_IGN);
	if (argc < 5 || (strcmp(argv[1], "backup") != 0 &&
	    strcmp(argv[1], "restore") != 0)) {
		fprintf(stderr, "usage: volume_mover backup|restore STORE KEY "
		    "DIR [PART_SIZE]\n");
		return 2;
	}
	if (store_open_fs(argv[2], 1, &s, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	memset(&o, 0, sizeof o);
	memset(&st, 0, sizeof st);
	if (argc > 5)
		o.part_size = (size_t)strtoull(argv[5], NULL, 10);
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
	printf("%s %llu bytes %llu files %llu stored %d parts %.3f s\n",
	    argv[1], (unsigned long long)st.bytes_done,
	    (unsigned long long)st.files_total,
	    (unsigned long long)st.compressed, st.parts,
	    (double)(time_mono_us() - t0) / 1e6);
	store_free(s);
	return 0;
}
