/*
 * volumes_status.c: the running volume operations in the status document
 * (volumeOperations of docs/status-json.md), read from the cluster.
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
#include "engine/status_doc.h"

struct vw {
	cJSON *doc;
	int64_t now;
	int restore;
};

static int
vw_item(void *arg, cJSON *o)
{
	struct vw *w = arg;
	struct status_volume_op v;
	const char *phase = json_str_or(o, "status.phase", "New");
	int64_t start = 0;

	if (strcmp(phase, "Completed") == 0 || strcmp(phase, "Failed") == 0 ||
	    strcmp(phase, "PartiallyFailed") == 0)
		return 0;
	memset(&v, 0, sizeof v);
	v.kind = w->restore ? STATUS_RESTORE : STATUS_BACKUP;
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
	    json_int(o, "status.progress.totalBytes", 0) : STATUS_UNKNOWN;
	v.since_us = time_parse(json_str_or(o, "status.startTimestamp", ""),
	    &start) == 0 ? start : STATUS_UNKNOWN;
	v.last_error = json_str(o, "status.message");
	status_doc_add_volume(w->doc, &v, w->now);
	return 0;
}

void
volumes_status_add(cJSON *doc, struct kube *k, const char *ns,
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
