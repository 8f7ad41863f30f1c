/*
 * journal_crasher: the child of the journal crash test
 * (tests/integration/test_journal_crash.py).
 *
 *   journal_crasher write PATH
 *	Open the journal, claim one backup, and record checkpoints (parts)
 *	as fast as it can, continuing after the last part already in the
 *	journal, as a resumed backup does. Every third round is a batch of
 *	four parts with restore progress and events in one transaction.
 *	After each commit returned 0 it prints "committed N" for each part
 *	of it and flushes stdout. Runs until killed.
 *   journal_crasher verify PATH
 *	Open the journal (migrations, recovery), run integrity_check, and
 *	check that the parts are exactly 1..max with the content the writer
 *	gives part N. Prints "ok parts=MAX" and exits 0, or prints
 *	"error: ..." and exits 1.
 */
#include "config.h"
#include "journal/journal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
fill_item(struct journal_item *it)
{
	memset(it, 0, sizeof *it);
	snprintf(it->kind, sizeof it->kind, "Backup");
	snprintf(it->namespace, sizeof it->namespace, "cairn-system");
	snprintf(it->name, sizeof it->name, "crash-backup");
	snprintf(it->uid, sizeof it->uid, "0b0e8c52-6a8e-4a77-9d0c-000000000001");
	it->attempt = 1;
	snprintf(it->holder, sizeof it->holder, "crasher");
	snprintf(it->worker, sizeof it->worker, "crasher/1");
}

/* What part n holds, so verify can check every field. */
static void
fill_part(struct journal_part *p, int64_t n)
{
	memset(p, 0, sizeof *p);
	p->part_number = n;
	snprintf(p->upload_id, sizeof p->upload_id, "upload-crash");
	snprintf(p->etag, sizeof p->etag, "\"etag-%lld\"", (long long)n);
	snprintf(p->last_key, sizeof p->last_key,
	    "resources/configmaps/namespaces/ns/cm-%08lld.json", (long long)n);
	p->items = n;
	p->bytes = n * 1000;
}

static int
do_write(const char *path)
{
	struct journal *j = NULL;
	struct journal_item it;
	struct journal_part p, *parts = NULL;
	struct cairn_err err = CAIRN_ERR_INIT;
	int64_t id = 0, next, round, k;
	size_t n = 0;
	char key[64];
	int rc;

	if (journal_open(path, 0, &j, &err) < 0)
		goto fail;
	fill_item(&it);
	if (journal_item_find(j, it.kind, it.namespace, it.name, it.uid, &it,
	    &err) == 0)
		id = it.id;
	else if (journal_claim(j, &it, &id, &err) < 0)
		goto fail;
	if (journal_parts(j, id, &parts, &n, &err) < 0)
		goto fail;
	next = n > 0 ? parts[n - 1].part_number + 1 : 1;
	free(parts);
	for (round = 0;; round++) {
		if (round % 3 != 2) {
			fill_part(&p, next);
			if (journal_part_add(j, id, &p, &err) < 0)
				goto fail;
			printf("committed %lld\n", (long long)next);
			fflush(stdout);
			next++;
			continue;
		}
		if (journal_begin(j, &err) < 0)
			goto fail;
		rc = 0;
		for (k = 0; rc == 0 && k < 4; k++) {
			fill_part(&p, next + k);
			rc = journal_part_add(j, id, &p, &err);
			snprintf(key, sizeof key, "v1/configmaps/ns/cm-%lld",
			    (long long)(next + k));
			if (rc == 0)
				rc = journal_restore_mark(j, id, key,
				    JOURNAL_R_CREATED, &err);
			if (rc == 0)
				rc = journal_event(j, id, "info", &err,
				    "stored part %lld", (long long)(next + k));
		}
		if (rc == 0)
			rc = journal_commit(j, &err);
		else
			journal_rollback(j);
		if (rc < 0)
			goto fail;
		for (k = 0; k < 4; k++)
			printf("committed %lld\n", (long long)(next + k));
		fflush(stdout);
		next += 4;
	}
fail:
	printf("error: %s\n", err.msg);
	journal_close(j);
	return 1;
}

static int
do_verify(const char *path)
{
	struct journal *j = NULL;
	struct journal_item it;
	struct journal_part want, *parts = NULL;
	struct cairn_err err = CAIRN_ERR_INIT;
	size_t n = 0, i;

	if (journal_open(path, 0, &j, &err) < 0 || journal_check(j, &err) < 0)
		goto fail;
	fill_item(&it);
	if (journal_item_find(j, it.kind, it.namespace, it.name, it.uid, &it,
	    &err) < 0) {
		/* Killed before the claim committed: nothing to check. */
		if (err.code != CAIRN_ENOTFOUND)
			goto fail;
		printf("ok parts=0\n");
		journal_close(j);
		return 0;
	}
	if (journal_parts(j, it.id, &parts, &n, &err) < 0)
		goto fail;
	for (i = 0; i < n; i++) {
		fill_part(&want, (int64_t)i + 1);
		if (parts[i].part_number != want.part_number ||
		    strcmp(parts[i].etag, want.etag) != 0 ||
		    strcmp(parts[i].last_key, want.last_key) != 0 ||
		    strcmp(parts[i].upload_id, want.upload_id) != 0 ||
		    parts[i].items != want.items ||
		    parts[i].bytes != want.bytes) {
			printf("error: part %zu of %zu is wrong (number %lld, "
			    "etag %s)\n", i + 1, n,
			    (long long)parts[i].part_number, parts[i].etag);
			free(parts);
			journal_close(j);
			return 1;
		}
	}
	free(parts);
	printf("ok parts=%zu\n", n);
	journal_close(j);
	return 0;
fail:
	printf("error: %s\n", err.msg);
	journal_close(j);
	return 1;
}

int
main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "write") == 0)
		return do_write(argv[2]);
	if (argc == 3 && strcmp(argv[1], "verify") == 0)
		return do_verify(argv[2]);
	fprintf(stderr, "usage: journal_crasher write|verify PATH\n");
	return 2;
}
