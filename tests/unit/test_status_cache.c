/*
 * test_status_cache.c: the status cache's records and index without the
 * watches (engine/status_cache.c included): exact totals however many
 * objects, at most recent_max finished and waiting_max waiting records
 * kept (the newest finished, the oldest waiting), deletions that keep the
 * index's probe chains whole, and the document a page is drawn from.
 */
#include "config.h"

#include "engine/status_cache.c"
#include "tests/unit/unit.h"

static cJSON *
obj(const char *name, const char *phase, const char *completed, int items)
{
	cJSON *o = cJSON_CreateObject();

	json_set_str(o, "metadata.name", name);
	json_set_str(o, "metadata.creationTimestamp", "2026-12-01T00:00:00Z");
	if (phase != NULL)
		json_set_str(o, "status.phase", phase);
	if (completed != NULL)
		json_set_str(o, "status.completionTimestamp", completed);
	json_set_int(o, "status.progress.itemsBackedUp", items);
	json_set_int(o, "status.progress.totalItems", items);
	json_set_str(o, "status.claim.holder", "s1");
	return o;
}

static void
cache_init(struct status_cache *c, int recent, int waiting)
{
	memset(c, 0, sizeof *c);
	c->recent_max = recent;
	c->waiting_max = waiting;
	c->ns = xstrdup("ns");
	pthread_mutex_init(&c->mu, NULL);
	for (int k = 0; k < SC__COUNT; k++)
		c->synced[k] = 1;
}

static void
cache_done(struct status_cache *c)
{
	for (int k = 0; k < SC__COUNT; k++)
		set_free(&c->sets[k]);
	pthread_mutex_destroy(&c->mu);
	free(c->ns);
}

static void
put(struct status_cache *c, cJSON *o)
{
	set_upsert(c, &c->sets[SC_BACKUP], rec_new(SC_BACKUP, o));
	cJSON_Delete(o);
}

static void
test_totals_and_caps(void)
{
	struct status_cache c;
	struct status_cache_totals t;
	char name[64], ts[64];

	cache_init(&c, 3, 2);
	/* 1000 finished, 5 waiting, 2 running */
	for (int i = 0; i < 1000; i++) {
		snprintf(name, sizeof name, "done-%04d", i);
		snprintf(ts, sizeof ts, "2026-12-02T%02d:%02d:%02dZ", i / 3600,
		    i / 60 % 60, i % 60);
		put(&c, obj(name, "Completed", ts, i));
	}
	for (int i = 0; i < 5; i++) {
		snprintf(name, sizeof name, "new-%d", i);
		put(&c, obj(name, i % 2 ? "New" : NULL, NULL, 0));
	}
	put(&c, obj("run-1", "InProgress", NULL, 7));
	put(&c, obj("run-2", "InProgress", NULL, 8));
	status_cache_totals(&c, &t);
	CHECK_INT(t.backups, 1007);
	CHECK_INT(t.backups_waiting, 5);
	CHECK_INT(t.backups_running, 2);
	/* kept: 3 newest finished, 2 waiting, 2 running */
	CHECK_INT(c.sets[SC_BACKUP].nrecs, 7);
	CHECK(set_find(&c.sets[SC_BACKUP], "done-0999") >= 0);
	CHECK(set_find(&c.sets[SC_BACKUP], "done-0997") >= 0);
	CHECK(set_find(&c.sets[SC_BACKUP], "done-0996") < 0);
	/* an old one modified again is not kept; a running one finishing is */
	put(&c, obj("done-0001", "Completed", "2026-12-02T00:00:01Z", 1));
	CHECK(set_find(&c.sets[SC_BACKUP], "done-0001") < 0);
	put(&c, obj("run-1", "Completed", "2026-12-03T00:00:00Z", 7));
	CHECK(set_find(&c.sets[SC_BACKUP], "run-1") >= 0);
	CHECK(set_find(&c.sets[SC_BACKUP], "done-0997") < 0);
	status_cache_totals(&c, &t);
	CHECK_INT(t.backups, 1007);
	CHECK_INT(t.backups_running, 1);
	/* deleting every other object keeps the others findable */
	for (int i = 0; i < 1000; i += 2) {
		snprintf(name, sizeof name, "done-%04d", i);
		set_remove(&c.sets[SC_BACKUP], name);
	}
	for (int i = 1; i < 1000; i += 2) {
		snprintf(name, sizeof name, "done-%04d", i);
		CHECK(idx_find(&c.sets[SC_BACKUP], name_hash(name)) != NULL);
	}
	status_cache_totals(&c, &t);
	CHECK_INT(t.backups, 507);
	/* removing an unknown name changes nothing */
	set_remove(&c.sets[SC_BACKUP], "nope");
	status_cache_totals(&c, &t);
	CHECK_INT(t.backups, 507);
	cache_done(&c);
}

static void
test_render(void)
{
	struct status_cache c;
	struct status_server_info si = { .id = "s2", .lease_state = "held",
	    .lease_renewed_us = STATUS_UNKNOWN,
	    .lease_duration_us = STATUS_UNKNOWN };
	int64_t now = time_now_us();
	cJSON *doc, *o, *b;

	cache_init(&c, 20, 100);
	put(&c, obj("b-done", "PartiallyFailed", "2026-12-02T00:00:00Z", 41));
	o = obj("b-run", "InProgress", NULL, 10);
	json_set_int(o, "status.warnings", 2);
	put(&c, o);
	o = cJSON_CreateObject();
	json_set_str(o, "metadata.name", "nightly");
	json_set_str(o, "spec.schedule", "@every 1h");
	json_set_str(o, "status.phase", "Enabled");
	json_set_str(o, "status.lastBackup", "2026-12-02T00:00:00Z");
	set_upsert(&c, &c.sets[SC_SCHEDULE], rec_new(SC_SCHEDULE, o));
	cJSON_Delete(o);
	doc = status_doc_new(&si, now);
	status_cache_render(&c, doc, "s1", NULL, NULL, now);
	b = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "backups"), 0);
	REQUIRE(b != NULL);
	CHECK_STR(json_str_or(b, "name", ""), "b-run");
	CHECK_STR(json_str_or(b, "holder", ""), "s1");
	CHECK(json_bool(b, "local", 0));	/* held by self */
	CHECK_INT(json_int(b, "warnings", 0), 2);
	CHECK_INT(json_int(b, "progress.itemsDone", 0), 10);
	b = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "recent"), 0);
	REQUIRE(b != NULL);
	CHECK_STR(json_str_or(b, "phase", ""), "PartiallyFailed");
	CHECK_INT(json_int(b, "itemsDone", 0), 41);
	b = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "schedules"), 0);
	REQUIRE(b != NULL);
	CHECK_STR(json_str_or(b, "nextRunAt", ""), "2026-12-02T01:00:00Z");
	CHECK_INT(json_int(doc, "totals.backups", 0), 2);
	CHECK_INT(json_int(doc, "totals.running", 0), 1);
	CHECK(json_bool(doc, "totals.synced", 0));
	cJSON_Delete(doc);
	cache_done(&c);
}

int
main(void)
{
	RUN(test_totals_and_caps);
	RUN(test_render);
	return unit_done();
}
