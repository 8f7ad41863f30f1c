/*
 * volumes_web.c: what the web endpoint shows of volume operations. Kept
 * apart from volumes.c so that programs linking the engine without web/
 * (test helpers) do not need it: only callers of these two functions pull
 * in web/metrics and web/status_doc.
 */
#include "config.h"
#include "engine/volumes.h"

#include <stdlib.h>
#include <string.h>

#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "kube/kube.h"
#include "web/metrics.h"
#include "web/status_doc.h"

static void
metrics_observer(int restore, const char *event, int64_t bytes)
{
	const char *kind = restore ? "restore" : "backup";

	if (strcmp(event, "attempt") == 0) {
		metrics_inc(restore ? METRIC_VOLUME_RESTORE_ATTEMPT_TOTAL :
		    METRIC_VOLUME_SNAPSHOT_ATTEMPT_TOTAL, NULL);
		metrics_add(METRIC_VOLUME_OPERATIONS_IN_PROGRESS, 1,
		    METRIC_LABELS(kind));
		return;
	}
	metrics_add(METRIC_VOLUME_OPERATIONS_IN_PROGRESS, -1,
	    METRIC_LABELS(kind));
	if (bytes > 0)
		metrics_add(METRIC_VOLUME_BYTES_TOTAL, (double)bytes,
		    METRIC_LABELS(kind));
	if (strcmp(event, "Completed") == 0)
		metrics_inc(restore ? METRIC_VOLUME_RESTORE_SUCCESS_TOTAL :
		    METRIC_VOLUME_SNAPSHOT_SUCCESS_TOTAL, NULL);
	else
		metrics_inc(restore ? METRIC_VOLUME_RESTORE_FAILURE_TOTAL :
		    METRIC_VOLUME_SNAPSHOT_FAILURE_TOTAL, NULL);
}

void
volumes_web_install_metrics(void)
{
	volumes_set_observer(metrics_observer);
}

struct vw {
	cJSON *doc;
	int64_t now;
	int restore;
};

static int
vw_item(void *arg, cJSON *o)
{
	struct vw *w = arg;
	struct web_volume_op v;
	const char *phase = json_str_or(o, "status.phase", "New");
	int64_t start = 0;

	if (strcmp(phase, "Completed") == 0 || strcmp(phase, "Failed") == 0 ||
	    strcmp(phase, "PartiallyFailed") == 0)
		return 0;
	memset(&v, 0, sizeof v);
	v.kind = w->restore ? WEB_OP_RESTORE : WEB_OP_BACKUP;
	v.name = json_str_or(o, "metadata.name", "");
	v.owner = json_str_or(o, w->restore ? "spec.restoreName" :
	    "spec.backup", "");
	v.volume = json_str_or(o, "spec.volume", "");
	v.plugin = json_str_or(o, "spec.provider", "");
	v.phase = phase;
	v.holder = json_str(o, "status.claim.holder");
	v.attempt = (int)json_int(o, "status.claim.attempt", 0);
	v.bytes_done = json_int(o, "status.progress.bytesDone", 0);
	v.total_bytes = json_get(o, "status.progress.totalBytes") != NULL ?
	    json_int(o, "status.progress.totalBytes", 0) : WEB_UNKNOWN;
	v.since_us = time_parse(json_str_or(o, "status.startTimestamp", ""),
	    &start) == 0 ? start : WEB_UNKNOWN;
	v.last_error = json_str(o, "status.message");
	web_doc_add_volume(w->doc, &v, w->now);
	return 0;
}

void
volumes_web_status(cJSON *doc, struct kube *k, const char *ns,
    int64_t now_us)
{
	static const struct kube_gvr vpb = { "cairn.io", "v1",
	    "volumepluginbackups" };
	static const struct kube_gvr vpr = { "cairn.io", "v1",
	    "volumepluginrestores" };
	struct cairn_err err = CAIRN_ERR_INIT;
	struct vw w = { doc, now_us, 0 };

	if (kube_list(k, &vpb, ns, NULL, vw_item, &w, NULL, &err) < 0)
		log_warn("listing VolumePluginBackups: %s", err.msg);
	w.restore = 1;
	if (kube_list(k, &vpr, ns, NULL, vw_item, &w, NULL, &err) < 0)
		log_warn("listing VolumePluginRestores: %s", err.msg);
}
