/*
 * replay.c: runs a fuzz target's LLVMFuzzerTestOneInput over its seed
 * corpus without libFuzzer, so the normal suite (`make check`) replays
 * every committed input through every target (under ASan too in an
 * --enable-asan build). Built as tests/unit/test_fuzz_<target> with
 * -DFUZZ_TARGET='"<target>"'; reads $CAIRN_SRCDIR/tests/fuzz/corpus/<target>/
 * (or the files and directories given as arguments) and prints one
 * PASS line per corpus.
 */
#include "config.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;

	if (f == NULL)
		return -1;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc(n > 0 ? (size_t)n : 1);
	if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	return 0;
}

static int
run_path(const char *path, int *count)
{
	struct stat st;
	DIR *d;
	struct dirent *de;

	if (stat(path, &st) < 0)
		return -1;
	if (!S_ISDIR(st.st_mode)) {
		(*count)++;
		return run_file(path);
	}
	d = opendir(path);
	if (d == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		char p[4096];

		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof p, "%s/%s", path, de->d_name);
		if (run_path(p, count) < 0) {
			closedir(d);
			return -1;
		}
	}
	closedir(d);
	return 0;
}

int
main(int argc, char **argv)
{
	char dflt[4096];
	const char *src = getenv("CAIRN_SRCDIR");
	int count = 0;

	if (argc < 2) {
		snprintf(dflt, sizeof dflt, "%s/tests/fuzz/corpus/%s",
		    src != NULL ? src : CAIRN_SRCDIR, FUZZ_TARGET);
		if (run_path(dflt, &count) < 0 || count == 0) {
			printf("FAIL: fuzz_%s:corpus: cannot read %s\n",
			    FUZZ_TARGET, dflt);
			return 1;
		}
	} else {
		for (int i = 1; i < argc; i++)
			if (run_path(argv[i], &count) < 0) {
				printf("FAIL: fuzz_%s: cannot read %s\n",
				    FUZZ_TARGET, argv[i]);
				return 1;
			}
	}
	printf("PASS: fuzz_%s:corpus (%d inputs replayed)\n", FUZZ_TARGET,
	    count);
	return 0;
}
