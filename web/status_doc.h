/*
 * status_doc.h: builders for the /status.json document (docs/status-json.md).
 *
 * The server's status() callback (struct web_source) returns a cJSON tree;
 * these functions build one that matches docs/status.schema.json from plain
 * structs, and compute the derived figures (percent, rates, ETA) the same
 * way everywhere. All strings are copied; NULL strings and negative
 * "unknown" numbers are written as null or left out, as the schema says.
 * The caller owns the document until it returns it from status().
 *
 *     cJSON *doc = web_doc_new(&server_info, now);
 *     web_doc_add_server(doc, &peer);           per Lease seen
 *     web_doc_add_op(doc, WEB_OP_BACKUP, &op, now);   per running backup
 *     web_doc_add_recent(doc, &result);         per finished item
 *     return doc;
 *
 * Threading: no shared state; call from any thread.
 */
#ifndef CAIRN_STATUS_DOC_H
#define CAIRN_STATUS_DOC_H

#include <stdint.h>
#include <cjson/cJSON.h>

#define WEB_UNKNOWN (-1)	/* an unknown count, total or time */

enum web_op_kind { WEB_OP_BACKUP, WEB_OP_RESTORE };

struct web_server_info {
	const char *id;			/* server id */
	const char *namespace;		/* may be NULL */
	int64_t started_us;		/* wall clock, process start */
	int workers;			/* WEB_UNKNOWN to leave out */
	const char *lease_name;		/* "cairn-<id>" */
	const char *lease_state;	/* held, acquiring, lost, released, unknown */
	int64_t lease_renewed_us;	/* last successful renewal, or WEB_UNKNOWN */
	int64_t lease_duration_us;	/* or WEB_UNKNOWN */
	const char *lease_error;	/* last renewal error or NULL */
};

struct web_peer {
	const char *id;
	const char *lease_name;		/* may be NULL */
	int64_t renewed_us;		/* renewTime written in the Lease, or WEB_UNKNOWN */
	int64_t duration_us;		/* or WEB_UNKNOWN */
	int expired;			/* judged on the local observation clock */
	int self;
	int running;			/* items it holds, or WEB_UNKNOWN */
};

struct web_progress {
	int64_t total_items;		/* WEB_UNKNOWN while not counted yet */
	int64_t items_done;
	int64_t bytes_done;
	int64_t total_bytes;		/* WEB_UNKNOWN when not known */
	int64_t since_us;		/* when this attempt's counting started
					   (rates are done / elapsed), or WEB_UNKNOWN */
	int64_t items_at_since;		/* items already done at since_us (resume) */
	int64_t bytes_at_since;
};

struct web_op {
	const char *name;
	const char *namespace;		/* may be NULL */
	const char *phase;
	const char *holder;		/* server id */
	const char *worker;		/* "<server-id>/<n>", may be NULL */
	int attempt;			/* >= 1 */
	int64_t claimed_us;		/* or WEB_UNKNOWN */
	int64_t started_us;		/* or WEB_UNKNOWN */
	const char *storage_location;	/* may be NULL */
	const char *backup;		/* restore: the backup it reads */
	const char *schedule;		/* may be NULL */
	const cJSON *labels;		/* metadata.labels, borrowed (copied) or NULL */
	int errors, warnings;
	const char *last_error;		/* may be NULL */
	struct web_progress progress;
};

struct web_volume_op {
	enum web_op_kind kind;
	const char *name;		/* VolumePluginBackup/Restore name */
	const char *owner;		/* backup (or restore) name */
	const char *volume;
	const char *plugin;
	const char *phase;
	const char *holder;
	int attempt;			/* 0 to leave out */
	int64_t bytes_done;
	int64_t total_bytes;		/* or WEB_UNKNOWN */
	int64_t since_us;		/* or WEB_UNKNOWN */
	const char *last_error;
};

struct web_waiting {
	enum web_op_kind kind;
	const char *name;
	const char *namespace;
	int64_t created_us;		/* or WEB_UNKNOWN */
	const char *reason;		/* may be NULL */
};

struct web_result {
	enum web_op_kind kind;
	const char *name;
	const char *namespace;
	const char *phase;		/* Completed, PartiallyFailed, Failed, FailedValidation */
	int64_t started_us;		/* or WEB_UNKNOWN */
	int64_t completed_us;		/* or WEB_UNKNOWN */
	const char *holder;
	int attempt;			/* 0 to leave out */
	int64_t items_done;
	int64_t total_items;		/* or WEB_UNKNOWN */
	int64_t bytes_done;
	int errors, warnings;
	const cJSON *labels;		/* borrowed (copied) or NULL */
	const char *const *messages;	/* NULL-terminated, or NULL */
};

/* A new document with "server" and every list present and empty. Owned. */
cJSON *web_doc_new(const struct web_server_info *s, int64_t now_us);
void web_doc_add_server(cJSON *doc, const struct web_peer *p);
/* A running backup (WEB_OP_BACKUP) or restore, with percent, rates and ETA. */
void web_doc_add_op(cJSON *doc, enum web_op_kind kind, const struct web_op *op,
	int64_t now_us);
void web_doc_add_volume(cJSON *doc, const struct web_volume_op *v,
	int64_t now_us);
void web_doc_add_waiting(cJSON *doc, const struct web_waiting *w);
/* A finished item; the list keeps the order of the calls (newest first). */
void web_doc_add_recent(cJSON *doc, const struct web_result *r);

#endif
