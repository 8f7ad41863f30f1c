/*
 * schedule.h: the Schedule controller (cairn.io/v1 Schedule, Velero's
 * fields): turns due times of spec.schedule into Backups made from
 * spec.template.
 *
 * Exactly one Backup per due time, however many servers run this: the
 * Backup's name is deterministic, `<schedule>-<YYYYMMDDhhmmss>` of the due
 * time in UTC, and creating it is the claim: the API server accepts one
 * create of a name, every other server gets AlreadyExists and moves on.
 * status.lastBackup records the due time (not the clock of whoever got
 * there), so every server computes the same next due time from it.
 *
 * Semantics (Velero's): a new Schedule backs up at once (its due time is
 * its creationTimestamp) unless spec.skipImmediately, which is consumed:
 * lastSkipped is set to now, the flag reset to false, and the next due
 * time counts from lastSkipped; `schedule unpause --skip-immediately` sets
 * it again. A paused Schedule creates nothing; when unpaused after missing
 * due times it backs up once, at once. After downtime only the latest
 * missed due time runs. Invalid cron or template: phase FailedValidation
 * with validationErrors.
 */
#ifndef CAIRN_SCHEDULE_H
#define CAIRN_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>
#include "base/err.h"
#include "engine/claim.h"

#define SCHEDULE_LABEL ENGINE_LABEL_SCHEDULE
#define SCHEDULE_NAME_MAX 63	/* the schedule name is a label value */

struct kube;

struct schedule_stats {
	int created;		/* Backups created by this call */
	int already;		/* due Backups another server created first */
	int errors;
};

/*
 * One pass over the Schedules of ns at time now_us (microseconds, UTC):
 * validate, enable, create due Backups. stats may be NULL. Returns 0, or
 * an error when Schedules could not be listed; per-Schedule failures are
 * logged and retried on the next pass.
 */
int schedule_tick(struct kube *k, const char *ns, int64_t now_us,
	struct schedule_stats *stats, struct cairn_err *err);

/* "<schedule>-<YYYYMMDDhhmmss>" of due_us into out (len >= 254). */
void schedule_backup_name(const char *schedule, int64_t due_us, char *out,
	size_t len);

#endif
