/*
 * cmd_node_agent.c: `cairn node-agent`: the same binary run as a DaemonSet
 * on every node, with the node's volume directory mounted. It claims only
 * the VolumePluginBackup / VolumePluginRestore objects labelled with its
 * node (cairn.io/node=<--node-name>) and runs them (engine/volumes.h):
 * the hostpath mover or a plugin from --plugin-dir. Restarted with the
 * same --server-id and journal, it resumes its InProgress copies after
 * their last checkpointed file. SIGTERM/SIGINT stop it at the next file.
 *
 * Like a server it holds the Lease cairn-<server-id> (engine/lease.h,
 * --lease-duration/--renew-deadline/--retry-period), acquired before it
 * claims anything and renewed in its own thread with its own API client;
 * every status and storage write of its volume work asks the Lease first
 * (volumes_ctx.may_write), so an agent that cannot renew stops writing,
 * and another agent of the same node takes its work over once the Lease
 * expired (docs/protocol.md, "Volume work"). At a clean stop the Lease
 * is released, so that happens at once.
 *
 * With --listen it serves the web endpoint for the kubelet's probes and
 * for Prometheus: /healthz (the process answers), /readyz (the Lease is
 * held: this agent may claim and write), /metrics (the process's
 * metrics: its volume copies), with --web-token-file as the server. Its
 * /status.json carries only the document's version and time: the
 * agent's work is in the VolumePluginBackup/Restore objects and in the
 * servers' documents.
 */
#include "config.h"
#include "cmd/cli.h"

#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "engine/lease.h"
#include "engine/volumes.h"
#include "base/signals.h"
#include "journal/journal.h"
#include "kube/kube.h"
#include "web/web.h"

static atomic_int agent_stop;

static int
agent_may_write(void *arg)
{
	return lease_write_epoch(arg);
}

/* /readyz: ready while the Lease is held (claims and writes allowed). */
static int
agent_ready(void *arg, struct buf *why)
{
	if (lease_held(arg))
		return 1;
	buf_puts(why, "the node-agent does not hold its Lease yet");
	return 0;
}

int
cmd_node_agent(const struct cli_command *cmd, struct flagset *fs)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct volumes_config vc;
	struct volumes_ctx ctx;
	struct volumes *vol = NULL;
	struct kube *k = NULL, *lk = NULL;
	struct journal *j = NULL;
	struct lease *lease = NULL;
	struct lease_opts lo;
	struct web *web = NULL;
	const char *node, *id;
	char *idbuf = NULL;
	int64_t period;
	int rc = CLI_EXIT_FAIL, ran;

	if (fs->nargs > 0)
		return cli_usage_error(cmd, "unexpected argument \"%s\"",
		    fs->args[0]);
	node = flag_str(fs, F_NODE_NAME);
	if (node == NULL || node[0] == '\0')
		return cli_usage_error(cmd, "--node-name (or $NODE_NAME) is "
		    "required");
	id = flag_str(fs, F_SERVER_ID);
	if (id == NULL || id[0] == '\0')
		id = getenv("POD_NAME");
	if (id == NULL || id[0] == '\0') {
		idbuf = xasprintf("node-agent-%s", node);
		id = idbuf;
	}
	log_set_component(id);
	/* SIGTERM/SIGINT on a thread of their own: workers only read the flag */
	if (signals_stop_flag(&agent_stop, &err) < 0) {
		cli_fail("%s", err.msg);
		free(idbuf);
		return CLI_EXIT_FAIL;
	}

	memset(&vc, 0, sizeof vc);
	vc.plugin_dir = flag_str(fs, F_PLUGIN_DIR);
	vc.node_name = node;
	vc.volume_root = flag_str(fs, F_VOLUME_ROOT);
	vc.plugin_timeout_us = flag_duration_us(fs, F_PLUGIN_TIMEOUT);
	vc.claim_timeout_us = flag_duration_us(fs, F_VOLUME_CLAIM_TIMEOUT);
	vc.part_size = (size_t)flag_int(fs, F_PART_SIZE);
	memset(&lo, 0, sizeof lo);
	lo.namespace = flag_str(fs, F_NAMESPACE);
	lo.identity = id;
	lo.lease_duration_us = flag_duration_us(fs, F_LEASE_DURATION);
	lo.renew_deadline_us = flag_duration_us(fs, F_RENEW_DEADLINE);
	lo.retry_period_us = flag_duration_us(fs, F_RETRY_PERIOD);
	vc.lease_duration_us = lo.lease_duration_us;
	if (volumes_open(&vc, &vol, &err) < 0) {
		cli_fail("%s", err.msg);
		goto done;
	}
	if (kube_open_flags(fs, &k, &err) < 0) {
		cli_fail("%s", err.msg);
		goto done;
	}
	/* the work rides out an API server restart (docs/protocol.md) */
	kube_set_connect_wait(k, 30 * TIME_US_PER_SEC);
	if (journal_open(flag_str(fs, F_JOURNAL), 0, &j, &err) < 0) {
		cli_fail("%s", err.msg);
		goto done;
	}
	lk = lease_client_new(flag_str(fs, F_KUBECONFIG),
	    flag_str(fs, F_CONTEXT), lo.renew_deadline_us, lo.retry_period_us);
	if (lease_new(lk ? lk : k, &lo, &lease, &err) < 0) {
		cli_fail("%s", err.msg);
		goto done;
	}
	if (flag_str(fs, F_LISTEN) != NULL) {
		struct web_opts wo;
		struct web_source src;

		memset(&wo, 0, sizeof wo);
		wo.listen = flag_str(fs, F_LISTEN);
		wo.token_file = flag_str(fs, F_WEB_TOKEN_FILE);
		memset(&src, 0, sizeof src);
		src.ready = agent_ready;
		src.arg = lease;
		if (web_start(&wo, &src, &web, &err) < 0) {
			cli_fail("%s", err.msg);
			goto done;
		}
		log_info("web endpoint on http://%s (/healthz, /readyz, "
		    "/metrics)", wo.listen);
	}
	period = flag_duration_us(fs, F_RETRY_PERIOD);
	if (period <= 0 || period > 2 * TIME_US_PER_SEC)
		period = TIME_US_PER_SEC;
	/* No Lease, no claims. */
	for (ran = 0; !agent_stop; ran = 1) {
		cairn_err_clear(&err);
		if (lease_try(lease, &err) == 0)
			break;
		if (!ran)
			log_warn("node-agent %s: cannot hold Lease %s%s yet: %s "
			    "(claiming nothing until it can)", id,
			    LEASE_NAME_PREFIX, id, err.msg);
		time_sleep_us(lo.retry_period_us, &agent_stop);
	}
	if (agent_stop) {
		rc = CLI_EXIT_OK;
		goto done;
	}
	if (lease_start(lease, &err) < 0) {
		cli_fail("%s", err.msg);
		goto done;
	}
	memset(&ctx, 0, sizeof ctx);
	ctx.kube = k;
	ctx.journal = j;
	ctx.namespace = flag_str(fs, F_NAMESPACE);
	ctx.server_id = id;
	ctx.stop = &agent_stop;
	ctx.may_write = agent_may_write;
	ctx.may_write_arg = lease;
	ctx.vol = vol;
	log_info("cairn node-agent %s on node %s: api %s, namespace %s, "
	    "journal %s", id, node, kube_server(k), ctx.namespace,
	    journal_path(j));
	while (!agent_stop) {
		cairn_err_clear(&err);
		if (volumes_poll(&ctx, &ran, &err) < 0)
			log_warn("%s", err.msg);
		if (ran == 0)
			time_sleep_us(period, &agent_stop);
	}
	log_info("cairn node-agent %s stopping", id);
	rc = CLI_EXIT_OK;
done:
	web_stop(web);		/* before the Lease its /readyz reads */
	if (lease != NULL) {
		/* Others of this node may take over at once. */
		if (rc == CLI_EXIT_OK && lease_release(lease, &err) < 0)
			log_warn("releasing the Lease: %s", err.msg);
		lease_free(lease);
	}
	journal_close(j);
	kube_free(lk);
	kube_free(k);
	volumes_free(vol);
	free(idbuf);
	return rc;
}
