/*
 * upkeep.c: the housekeeping thread, see upkeep.h. One loop, one pass per
 * tick: the default location until it exists, then schedules (their due times are the most time-sensitive),
 * then locations (each decides from its status whether it is due), then
 * the Backups (finalizers every tick, expiry every gc period). A failing
 * part is logged and retried next tick; it never stops the others.
 */
#include "config.h"
#include "engine/upkeep.h"

#include <stdatomic.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"
#include "engine/bsl.h"
#include "engine/gc.h"
#include "engine/schedule.h"
#include "engine/sync.h"

struct upkeep {
	struct upkeep_opts o;
	char *ns;
	atomic_int stop;
	pthread_t th;
};

static void *
upkeep_main(void *arg)
{
	struct upkeep *u = arg;
	int64_t next_gc = time_mono_us();
	const char *location = u->o.default_location;

	util_thread_name("upkeep");

	while (!u->stop) {
		struct cairn_err err = CAIRN_ERR_INIT;
		int64_t start = time_mono_us(), now = time_now_us();
		int expire = start >= next_gc;

		if (location != NULL) {
			int made = bsl_ensure(u->o.kube, u->ns, "default",
			    location, &err);

			if (made < 0)
				log_warn("default storage location in %s: %s",
				    u->ns, err.msg);
			else
				location = NULL;
			if (made > 0)
				log_info("created BackupStorageLocation "
				    "%s/default from --default-location", u->ns);
			cairn_err_clear(&err);
		}
		if (schedule_tick(u->o.kube, u->ns, now, NULL, &err) < 0)
			log_warn("schedules in %s: %s", u->ns, err.msg);
		cairn_err_clear(&err);
		if (u->stop)
			break;
		if (sync_tick(u->o.kube, u->ns, time_now_us(), NULL, &err) < 0)
			log_warn("storage locations in %s: %s", u->ns, err.msg);
		cairn_err_clear(&err);
		if (u->stop)
			break;
		if (gc_tick(u->o.kube, u->ns, u->o.volumes, time_now_us(), expire, NULL,
		    &err) < 0)
			log_warn("backups in %s: %s", u->ns, err.msg);
		else if (expire)
			next_gc = start + u->o.gc_period_us;
		time_sleep_us(u->o.tick_us - (time_mono_us() - start), &u->stop);
	}
	return NULL;
}

int
upkeep_start(const struct upkeep_opts *o, struct upkeep **out,
	struct cairn_err *err)
{
	struct upkeep *u = xcalloc(1, sizeof *u);

	u->o = *o;
	u->ns = xstrdup(o->namespace);
	if (u->o.tick_us <= 0)
		u->o.tick_us = TIME_US_PER_SEC;
	if (u->o.gc_period_us <= 0)
		u->o.gc_period_us = 3600 * TIME_US_PER_SEC;
	if (pthread_create(&u->th, NULL, upkeep_main, u) != 0) {
		free(u->ns);
		free(u);
		*out = NULL;
		return cairn_err_set(err, CAIRN_EFAIL, "cannot start the upkeep "
		    "thread");
	}
	*out = u;
	return 0;
}

void
upkeep_stop(struct upkeep *u)
{
	if (u == NULL)
		return;
	u->stop = 1;
	pthread_join(u->th, NULL);
	free(u->ns);
	free(u);
}
