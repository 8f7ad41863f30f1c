/*
 * journal_bench: figures for tests/bench/bench_journal.sh.
 *
 *   journal_bench DIR [SECONDS]
 *
 * Measures, each for about SECONDS (default 1) on a fresh journal in DIR:
 * checkpoints (journal_part_add) per second, one commit each and batched;
 * restore progress writes (journal_restore_mark) per second, one commit
 * each and batched; "was this key done?" lookups per second; and the
 * unbatched figures again with synchronous=NORMAL, to show what FULL costs
 * (docs/journal.md). Prints one line per figure; never fails on timing.
 */
#include "config.h"
#include "journal/journal.h"
#include "base/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *dir;
static double secs = 1.0;
static int seq;

enum what { PARTS, RESTORE, LOOKUP };

/* Run writes of kind w in batches of `batch` (1: each its own commit). */
static void
measure(const char *label, enum what w, int batch, int flags)
{
	struct journal *j = NULL;
	struct journal_item it;
	struct journal_part p;
	struct cairn_err err = CAIRN_ERR_INIT;
	enum journal_rstate st;
	char path[512], key[96];
	int64_t id = 0, n = 0, t0, t1, k;
	int rc = 0;

	snprintf(path, sizeof path, "%s/bench-%d.db", dir, ++seq);
	if (journal_open(path, flags, &j, &err) < 0)
		goto fail;
	memset(&it, 0, sizeof it);
	snprintf(it.kind, sizeof it.kind, "%s", w == PARTS ? "Backup" :
	    "Restore");
	snprintf(it.namespace, sizeof it.namespace, "cairn-system");
	snprintf(it.name, sizeof it.name, "bench");
	snprintf(it.uid, sizeof it.uid, "uid");
	it.attempt = 1;
	snprintf(it.holder, sizeof it.holder, "bench");
	snprintf(it.worker, sizeof it.worker, "bench/1");
	if (journal_claim(j, &it, &id, &err) < 0)
		goto fail;
	if (w == LOOKUP) {
		/* 20000 keys to look up in, written in big batches. */
		for (k = 0; k < 20000 && rc == 0; k++) {
			if (k % 1000 == 0 && (rc = journal_begin(j, &err)) < 0)
				break;
			snprintf(key, sizeof key, "apps/deployments/ns/d%06lld",
			    (long long)k);
			rc = journal_restore_mark(j, id, key, JOURNAL_R_CREATED,
			    &err);
			if (k % 1000 == 999 && rc == 0)
				rc = journal_commit(j, &err);
		}
		if (rc < 0)
			goto fail;
	}
	t0 = time_mono_us();
	do {
		if (batch > 1 && journal_begin(j, &err) < 0)
			goto fail;
		for (k = 0; k < batch; k++, n++) {
			switch (w) {
			case PARTS:
				memset(&p, 0, sizeof p);
				p.part_number = n + 1;
				snprintf(p.upload_id, sizeof p.upload_id,
				    "2~bench-upload-id");
				snprintf(p.etag, sizeof p.etag,
				    "\"9b2cf535f27731c974343645a3985328\"");
				snprintf(p.last_key, sizeof p.last_key,
				    "resources/pods/namespaces/ns/p%08lld.json",
				    (long long)n);
				p.items = 500;
				p.bytes = 8 << 20;
				rc = journal_part_add(j, id, &p, &err);
				break;
			case RESTORE:
				snprintf(key, sizeof key,
				    "apps/deployments/ns/d%08lld", (long long)n);
				rc = journal_restore_mark(j, id, key,
				    JOURNAL_R_CREATED, &err);
				break;
			case LOOKUP:
				snprintf(key, sizeof key,
				    "apps/deployments/ns/d%06lld",
				    (long long)(n % 20000));
				rc = journal_restore_lookup(j, id, key, &st,
				    &err);
				break;
			}
			if (rc < 0)
				goto fail;
		}
		if (batch > 1 && journal_commit(j, &err) < 0)
			goto fail;
		t1 = time_mono_us();
	} while (t1 - t0 < (int64_t)(secs * 1e6));
	printf("%-52s %10.0f /s  (%lld in %.2fs)\n", label,
	    (double)n * 1e6 / (double)(t1 - t0), (long long)n,
	    (double)(t1 - t0) / 1e6);
	fflush(stdout);
	journal_close(j);
	return;
fail:
	printf("%-52s failed: %s\n", label, err.msg);
	journal_close(j);
}

int
main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: journal_bench DIR [SECONDS]\n");
		return 2;
	}
	dir = argv[1];
	if (argc > 2)
		secs = atof(argv[2]);
	measure("checkpoints, one commit each (synchronous=FULL)", PARTS, 1, 0);
	measure("checkpoints, 50 per commit", PARTS, 50, 0);
	measure("restore progress writes, one commit each", RESTORE, 1, 0);
	measure("restore progress writes, 500 per commit", RESTORE, 500, 0);
	measure("restore \"was this key done?\" lookups", LOOKUP, 1, 0);
	measure("checkpoints, one commit each, synchronous=NORMAL", PARTS, 1,
	    JOURNAL_OPEN_SYNC_NORMAL);
	measure("restore progress writes, one each, sync=NORMAL", RESTORE, 1,
	    JOURNAL_OPEN_SYNC_NORMAL);
	return 0;
}
