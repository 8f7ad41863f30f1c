/*
 * volumes_agent.c: one pass of `cairn node-agent` (and of a server for
 * node-less work left behind): claim and run what this process may run,
 * resume its own, take over the dead's. Contract in volumes.h.
 */
#include "config.h"
#include "engine/volumes_int.h"

#include <string.h>

#include "base/jsonutil.h"
#include "base/log.h"

static int
poll_kind(const struct volumes_ctx *c, const struct kube_gvr *gvr,
    int (*run)(const struct volumes_ctx *, const cJSON *, struct cairn_err *),
    int *ran, struct cairn_err *err)
{
	const char *node = c->vol->node_name;
	cJSON *items = NULL, *op;
	const char *phase;
	int rc;

	rc = vol_list_ops(c, gvr, node ? VOLUMES_LABEL_NODE : NULL, node,
	    &items, err);
	if (rc < 0)
		return rc;
	cJSON_ArrayForEach(op, items) {
		if (c->stop != NULL && *c->stop)
			break;
		phase = json_str_or(op, "status.phase", "New");
		/* synced: done elsewhere, its stored status is on the way */
		if (vol_is_final(phase) || engine_is_synced(op) ||
		    !vol_may_run(c->vol, vol_label_of(op, VOLUMES_LABEL_NODE)))
			continue;
		if (strcmp(phase, "InProgress") == 0 && strcmp(json_str_or(op,
		    "status.claim.holder", ""), c->server_id) != 0 &&
		    !vol_holder_gone(c, json_str_or(op, "status.claim.holder",
		    "")))
			continue;	/* its holder is alive */
		if (c->may_write != NULL && c->may_write(c->may_write_arg) == 0)
			break;		/* no Lease: no claims, no writes */
		rc = run(c, op, err);
		if (ran != NULL)
			(*ran)++;
		if (rc == CAIRN_ECANCELED)
			break;
		if (rc < 0)
			log_warn("%s", err->msg);
		rc = 0;
	}
	cJSON_Delete(items);
	return rc;
}

int
volumes_poll(const struct volumes_ctx *c, int *ran, struct cairn_err *err)
{
	int rc;

	if (ran != NULL)
		*ran = 0;
	if (c->vol == NULL)
		return cairn_err_set(err, CAIRN_EINVAL, "volume work is not "
		    "configured");
	rc = poll_kind(c, &vol_vpb_gvr, vol_vpb_run, ran, err);
	if (rc == 0)
		rc = poll_kind(c, &vol_vpr_gvr, vol_vpr_run, ran, err);
	return rc;
}
