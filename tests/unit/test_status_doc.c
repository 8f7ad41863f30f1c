/*
 * test_status_doc.c: unit tests of engine/status_doc: the /status.json
 * builders and their derived figures (percent, rates, ETA).
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "base/timeutil.h"
#include "engine/status_doc.h"
#include "tests/unit/unit.h"

/* ---- the status document builders ---- */

static double
num_at(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsNumber(v) ? v->valuedouble : -999;
}

static void
test_status_doc_progress(void)
{
	int64_t now = 1800000000LL * TIME_US_PER_SEC;
	struct status_server_info si = { .id = "s1", .started_us = now - 90 * TIME_US_PER_SEC,
	    .workers = 2, .lease_name = "cairn-s1", .lease_state = "held",
	    .lease_renewed_us = STATUS_UNKNOWN, .lease_duration_us = STATUS_UNKNOWN };
	struct status_op op = { .name = "b1", .holder = "s1", .attempt = 3,
	    .claimed_us = STATUS_UNKNOWN, .started_us = STATUS_UNKNOWN };
	cJSON *doc, *b, *p;

	doc = status_doc_new(&si, now);
	REQUIRE(doc != NULL);
	CHECK(num_at(cJSON_GetObjectItem(doc, "server"), "uptimeSeconds") == 90);
	CHECK(cJSON_IsArray(cJSON_GetObjectItem(doc, "recent")));
	/* Resumed at 100 items 10 s ago, now 500 of 1000: 40 items/s, 12.5 s left. */
	op.progress.total_items = 1000;
	op.progress.items_done = 500;
	op.progress.items_at_since = 100;
	op.progress.bytes_done = 4000;
	op.progress.total_bytes = STATUS_UNKNOWN;
	op.progress.since_us = now - 10 * TIME_US_PER_SEC;
	status_doc_add_op(doc, STATUS_BACKUP, &op, now);
	/* Unknown total, nothing measurable yet. */
	op.name = "r1";
	op.progress.total_items = STATUS_UNKNOWN;
	op.progress.since_us = now - 100000;
	status_doc_add_op(doc, STATUS_RESTORE, &op, now);

	b = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "backups"), 0);
	REQUIRE(b != NULL);
	CHECK_STR(cJSON_GetObjectItem(b, "name")->valuestring, "b1");
	CHECK(num_at(b, "attempt") == 3);
	CHECK(cJSON_IsNull(cJSON_GetObjectItem(b, "claimedAt")));
	p = cJSON_GetObjectItem(b, "progress");
	CHECK(num_at(p, "percent") == 50);
	CHECK(num_at(p, "rateItemsPerSecond") == 40);
	CHECK(num_at(p, "rateBytesPerSecond") == 400);
	CHECK(num_at(p, "etaSeconds") == 12.5);
	CHECK(cJSON_IsNull(cJSON_GetObjectItem(p, "totalBytes")));
	b = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "restores"), 0);
	REQUIRE(b != NULL);
	p = cJSON_GetObjectItem(b, "progress");
	CHECK(cJSON_IsNull(cJSON_GetObjectItem(p, "percent")));
	CHECK(cJSON_IsNull(cJSON_GetObjectItem(p, "rateItemsPerSecond")));
	CHECK(cJSON_IsNull(cJSON_GetObjectItem(p, "etaSeconds")));
	cJSON_Delete(doc);
}

int
main(void)
{
	RUN(test_status_doc_progress);
	return unit_done();
}
