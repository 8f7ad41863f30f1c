/*
 * cmd_server.c: `cairn server`: the controller process. Opens the
 * Kubernetes client and the journal, starts the web endpoint when --listen
 * is given (wiring the engine's published status, engine/status.h, to
 * web/web.h's source callbacks: the engine and the web know nothing of
 * each other), configures the volume movers,
 * then runs engine/server.c until SIGTERM or SIGINT. On a signal the server
 * stops claiming, gives running items --shutdown-grace to reach their next
 * checkpoint, releases their claims and its Lease so another server takes
 * over at once, and exits 0 (docs/protocol.md, rule 9).
 */
#include "config.h"
#include "cmd/cli.h"

#include <stdatomic.h>
#include <cjson/cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "engine/server.h"
#include "engine/status.h"
#include "engine/volumes.h"
#include "base/signals.h"
#include "journal/journal.h"
#include "kube/kube.h"
#include "web/web.h"

static atomic_int server_stop;

/* The web endpoint's source: the engine's status (engine/status.h). */
static cJSON *
web_status(void *arg)
{
	return status_document(arg);
}

static int
web_healthy(void *arg)
{
	return status_healthy(arg);
}

static int
web_ready(void *arg, struct buf *why)
{
	return status_ready(arg, why);
}

int
cmd_server(const struct cli_command *cmd, struct flagset *fs)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct server_opts o;
	struct kube *k = NULL;
	struct journal *j = NULL;
	struct kube_selector *shard = NULL;
	struct status *st = NULL;
	struct volumes *vol = NULL;
	struct web *web = NULL;
	char host[256];
	const char *id, *sel;
	int64_t part, period;
	int rc = CLI_EXIT_FAIL;

	if (fs->nargs > 0)
		return cli_usage_error(cmd, "unexpected argument \"%s\"",
		    fs->args[0]);
	id = flag_str(fs, F_SERVER_ID);
	if (id == NULL || id[0] == '\0')
		id = getenv("POD_NAME");
	if (id == NULL || id[0] == '\0') {
		if (gethostname(host, sizeof host) < 0)
			snprintf(host, sizeof host, "cairn");
		host[sizeof host - 1] = '\0';
		id = host;
	}
	part = flag_int(fs, F_PART_SIZE);
	if (part < 4096)
		return cli_usage_error(cmd, "--part-size must be at least 4096");
	if (flag_int(fs, F_WORKERS) < 1)
		return cli_usage_error(cmd, "--workers must be at least 1");
	if (flag_int(fs, F_LIST_CONCURRENCY) < 1 ||
	    flag_int(fs, F_LIST_CONCURRENCY) > 64)
		return cli_usage_error(cmd, "--list-concurrency must be 1 to 64");
	if (flag_int(fs, F_COMPRESSION_THREADS) < 0 ||
	    flag_int(fs, F_COMPRESSION_THREADS) > 64)
		return cli_usage_error(cmd, "--compression-threads must be 0 "
		    "(as many as CPUs) to 64");
	sel = flag_str(fs, F_SHARD_SELECTOR);
	if (sel != NULL && kube_selector_parse(sel, &shard, &err) < 0)
		return cli_usage_error(cmd, "--shard-selector: %s", err.msg);
	if (flag_str(fs, F_DEFAULT_LOCATION) != NULL) {
		cJSON *spec = cJSON_Parse(flag_str(fs, F_DEFAULT_LOCATION));
		int ok = cJSON_IsObject(spec);

		cJSON_Delete(spec);
		if (!ok) {
			kube_selector_free(shard);
			return cli_usage_error(cmd, "--default-location: not a "
			    "JSON object");
		}
	}
	log_set_component(id);

	/* SIGTERM/SIGINT on a thread of their own: workers only read the flag */
	if (signals_stop_flag(&server_stop, &err) < 0) {
		cli_fail("%s", err.msg);
		kube_selector_free(shard);
		return CLI_EXIT_FAIL;
	}

	if (kube_open_flags(fs, &k, &err) < 0) {
		cli_fail("%s", err.msg);
		goto done;
	}
	/* the work rides out an API server restart (docs/protocol.md) */
	kube_set_connect_wait(k, 30 * TIME_US_PER_SEC);
	{
		/*
		 * Descriptors: as Go programs do, take the hard open-file
		 * limit (a soft 1024 is the usual default, and a server with
		 * many workers, watches and a web endpoint needs more).
		 */
		struct rlimit rl;

		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
		    rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			(void)setrlimit(RLIMIT_NOFILE, &rl);
		}
	}
	if (journal_open(flag_str(fs, F_JOURNAL), 0, &j, &err) < 0) {
		cli_fail("%s", err.msg);
		goto done;
	}
	if (flag_str(fs, F_LISTEN) != NULL) {
		struct status_opts so;
		struct web_opts wo;
		struct web_source src;

		memset(&so, 0, sizeof so);
		so.kubeconfig = flag_str(fs, F_KUBECONFIG);
		so.context = flag_str(fs, F_CONTEXT);
		so.journal = j;
		so.server_id = id;
		so.namespace = flag_str(fs, F_NAMESPACE);
		so.workers = (int)flag_int(fs, F_WORKERS);
		so.lease_duration_us = flag_duration_us(fs, F_LEASE_DURATION);
		if (status_start(&so, &st, &err) < 0) {
			cli_fail("%s", err.msg);
			goto done;
		}
		memset(&src, 0, sizeof src);
		src.status = web_status;
		src.healthy = web_healthy;
		src.ready = web_ready;
		src.arg = st;
		memset(&wo, 0, sizeof wo);
		wo.listen = flag_str(fs, F_LISTEN);
		wo.token_file = flag_str(fs, F_WEB_TOKEN_FILE);
		if (web_start(&wo, &src, &web, &err) < 0) {
			cli_fail("%s", err.msg);
			goto done;
		}
		log_info("web endpoint on http://%s (/status, /status.json, "
		    "/healthz, /readyz, /metrics)", wo.listen);
	}
	{
		struct volumes_config vc;	/* volume movers (issue 11) */

		memset(&vc, 0, sizeof vc);
		vc.plugin_dir = flag_str(fs, F_PLUGIN_DIR);
		vc.volume_root = flag_str(fs, F_VOLUME_ROOT);
		vc.plugin_timeout_us = flag_duration_us(fs, F_PLUGIN_TIMEOUT);
		vc.claim_timeout_us = flag_duration_us(fs,
		    F_VOLUME_CLAIM_TIMEOUT);
		vc.part_size = (size_t)part;
		vc.lease_duration_us = flag_duration_us(fs, F_LEASE_DURATION);
		if (volumes_open(&vc, &vol, &err) < 0) {
			cli_fail("%s", err.msg);
			goto done;
		}
	}
	period = flag_duration_us(fs, F_RETRY_PERIOD);
	if (period > TIME_US_PER_SEC || period <= 0)
		period = TIME_US_PER_SEC;
	memset(&o, 0, sizeof o);
	o.kube = k;
	o.journal = j;
	o.server_id = id;
	o.namespace = flag_str(fs, F_NAMESPACE);
	o.workers = (int)flag_int(fs, F_WORKERS);
	o.part_size = (size_t)part;
	o.list_concurrency = (int)flag_int(fs, F_LIST_CONCURRENCY);
	o.compression_threads = (int)flag_int(fs, F_COMPRESSION_THREADS);
	o.scan_period_us = period;
	o.gc_period_us = flag_duration_us(fs, F_GC_PERIOD);
	o.verify_period_us = flag_duration_us(fs, F_VERIFY_PERIOD);
	o.shard = shard;
	o.stop = &server_stop;
	o.restore_workers = (int)flag_int(fs, F_RESTORE_WORKERS);
	o.terminating_timeout_us = flag_duration_us(fs,
	    F_TERMINATING_RESOURCE_TIMEOUT);
	o.lease_duration_us = flag_duration_us(fs, F_LEASE_DURATION);
	o.renew_deadline_us = flag_duration_us(fs, F_RENEW_DEADLINE);
	o.retry_period_us = flag_duration_us(fs, F_RETRY_PERIOD);
	o.shutdown_grace_us = flag_duration_us(fs, F_SHUTDOWN_GRACE);
	o.kubeconfig = flag_str(fs, F_KUBECONFIG);
	o.context = flag_str(fs, F_CONTEXT);
	o.default_location = flag_str(fs, F_DEFAULT_LOCATION);
	o.volumes = vol;
	log_info("cairn server %s starting: api %s, namespace %s, journal %s",
	    id, kube_server(k), o.namespace, journal_path(j));
	if (server_run(&o, &err) < 0)
		cli_fail("%s", err.msg);
	else
		rc = CLI_EXIT_OK;
done:
	web_stop(web);		/* before the state its callbacks read */
	status_stop(st);
	volumes_free(vol);
	journal_close(j);
	kube_free(k);
	kube_selector_free(shard);
	return rc;
}
