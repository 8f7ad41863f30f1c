/*
 * status_doc.h: builders for the /status.json document (docs/status-json.md).
 *
 * The engine publishes its status as one cJSON tree (status_document(),
 * engine/status.h), which cmd/ hands to the web endpoint; these functions
 * build one that matches docs/status.schema.json from plain structs, and
 * compute the derived figures (percent, rates, ETA) the same way
 * everywhere. All strings are copied; NULL strings and negative "unknown"
 * numbers are written as null or left out, as the schema says. The caller
 * owns the document.
 *
 *     cJSON *doc = status_doc_new(&server_info, now);
 *     status_doc_add_server(doc, &peer);           per Lease seen
 *     status_doc_add_op(doc, STATUS_BACKUP, &op, now);   per running backup
 *     status_doc_add_recent(doc, &result);         per finished item
 *     return doc;
 *
 * Threading: no shared state; call from any thread.
 */
#ifndef CAIRN_STATUS_DOC_H
#define CAIRN_STATUS_DOC_H

#include <stdint.h>
#include <cjson/cJSON.h>

#define STATUS_UNKNOWN (-1)	/* an unknown count, total or time */

enum status_kind { STATUS_BACKUP, STATUS_RESTORE };

struct status_server_info {
	const char *id;			/* server id */
	const char *namespace;		/* may be NULL */
	int64_t started_us;		/* wall clock, process start */
	int workers;			/* STATUS_UNKNOWN to leave out */
	const char *lease_name;		/* "cairn-<id>" */
	const char *lease_state;	/* held, acquiring, lost, released, unknown */
	int64_t lease_renewed_us;	/* last successful renewal, or STATUS_UNKNOWN */
	int64_t lease_duration_us;	/* or STATUS_UNKNOWN */
	const char *lease_error;	/* last renewal error or NULL */
};

struct status_peer {
	const char *id;
	const char *lease_name;		/* may be NULL */
	int64_t renewed_us;		/* renewTime written in the Lease, or STATUS_UNKNOWN */
	int64_t duration_us;		/* or STATUS_UNKNOWN */
	int expired;			/* judged on the local observation clock */
	int self;
	int running;			/* items it holds, or STATUS_UNKNOWN */
	int64_t observed_age_us;	/* since its Lease last changed here,
					   or STATUS_UNKNOWN */
};

struct status_progress {
	int64_t total_items;		/* STATUS_UNKNOWN while not counted yet */
	int64_t items_done;
	int64_t bytes_done;
	int64_t total_bytes;		/* STATUS_UNKNOWN when not known */
	int64_t since_us;		/* when this attempt's counting started
					   (rates are done / elapsed), or STATUS_UNKNOWN */
	int64_t items_at_since;		/* items already done at since_us (resume) */
	int64_t bytes_at_since;
};

struct status_op {
	const char *name;
	const char *namespace;		/* may be NULL */
	const char *phase;
	const char *holder;		/* server id */
	const char *worker;		/* "<server-id>/<n>", may be NULL */
	int attempt;			/* >= 1 */
	int64_t claimed_us;		/* or STATUS_UNKNOWN */
	int64_t started_us;		/* or STATUS_UNKNOWN */
	const char *storage_location;	/* may be NULL */
	const char *backup;		/* restore: the backup it reads */
	const char *schedule;		/* may be NULL */
	const cJSON *labels;		/* metadata.labels, borrowed (copied) or NULL */
	int errors, warnings;
	const char *last_error;		/* may be NULL */
	struct status_progress progress;
	const cJSON *security;		/* backup: {encryption, verification}
					   as in its status, borrowed, or NULL */
	int64_t hooks_attempted;	/* status.hookStatus; <= 0: left out */
	int64_t hooks_failed;
	int local;			/* held by the server answering */
};

struct status_volume_op {
	enum status_kind kind;
	const char *name;		/* VolumePluginBackup/Restore name */
	const char *owner;		/* backup (or restore) name */
	const char *volume;
	const char *plugin;
	const char *phase;
	const char *holder;
	const char *worker;		/* may be NULL */
	int attempt;			/* 0 to leave out */
	int64_t bytes_done;
	int64_t total_bytes;		/* or STATUS_UNKNOWN */
	int64_t since_us;		/* rates are measured from here, or
					   STATUS_UNKNOWN (no rate) */
	int64_t bytes_at_since;		/* bytes done at since_us */
	int64_t started_us;		/* or STATUS_UNKNOWN */
	int64_t completed_us;		/* finished: when; else STATUS_UNKNOWN */
	const char *last_error;
};

struct status_waiting {
	enum status_kind kind;
	const char *name;
	const char *namespace;
	int64_t created_us;		/* or STATUS_UNKNOWN */
	const char *reason;		/* may be NULL */
};

struct status_result {
	enum status_kind kind;
	const char *name;
	const char *namespace;
	const char *phase;		/* Completed, PartiallyFailed, Failed, FailedValidation */
	int64_t started_us;		/* or STATUS_UNKNOWN */
	int64_t completed_us;		/* or STATUS_UNKNOWN */
	const char *holder;
	int attempt;			/* 0 to leave out */
	int64_t items_done;
	int64_t total_items;		/* or STATUS_UNKNOWN */
	int64_t bytes_done;
	int errors, warnings;
	const cJSON *labels;		/* borrowed (copied) or NULL */
	const char *const *messages;	/* NULL-terminated, or NULL */
	const cJSON *security;		/* as in struct status_op */
	const char *worker;		/* may be NULL */
	const char *storage_location;	/* may be NULL */
	const char *backup;		/* restore: its backup, or NULL */
	const char *schedule;		/* may be NULL */
	int64_t hooks_attempted;	/* <= 0: left out */
	int64_t hooks_failed;
};

struct status_schedule {
	const char *name;
	const char *schedule;		/* cron expression */
	const char *phase;		/* New, Enabled, FailedValidation */
	int paused;
	const char *storage_location;	/* its template's, may be NULL */
	int64_t last_backup_us;		/* or STATUS_UNKNOWN */
	int64_t next_run_us;		/* or STATUS_UNKNOWN */
	const char *const *messages;	/* validation errors, or NULL */
	const cJSON *labels;		/* borrowed (copied) or NULL */
};

/* Exact counts of the cluster's objects (the lists are capped). */
struct status_totals {
	int synced;			/* Backups and Restores listed once */
	int64_t backups, restores, schedules;
	int64_t waiting, running, volumes_running;
};

/* A new document with "server" and every list present and empty. Owned. */
cJSON *status_doc_new(const struct status_server_info *s, int64_t now_us);
void status_doc_add_server(cJSON *doc, const struct status_peer *p);
/* A running backup (STATUS_BACKUP) or restore, with percent, rates and ETA. */
void status_doc_add_op(cJSON *doc, enum status_kind kind, const struct status_op *op,
	int64_t now_us);
void status_doc_add_volume(cJSON *doc, const struct status_volume_op *v,
	int64_t now_us);
void status_doc_add_waiting(cJSON *doc, const struct status_waiting *w);
/* A finished item; the list keeps the order of the calls (newest first). */
void status_doc_add_recent(cJSON *doc, const struct status_result *r);
void status_doc_add_schedule(cJSON *doc, const struct status_schedule *s);
/* "totals" (replaces an earlier one). */
void status_doc_set_totals(cJSON *doc, const struct status_totals *t);

#endif
