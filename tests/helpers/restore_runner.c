/*
 * restore_runner.c: a minimal restore controller for the integration
 * tests of issue 9, until engine/server.c scans Restores too. It does what
 * the server's loop does for backups: every period, list the Restores of
 * the namespace and hand each New one, and each InProgress one this server
 * id holds, to restore_take() (claim with a conditional status write, then
 * run or resume; the journal says what was done).
 *
 *   restore_runner --kubeconfig F --namespace NS --journal DB
 *                  --server-id ID [--restore-workers N] [--period-ms N]
 *                  [--terminating-timeout-ms N]
 *
 * SIGTERM/SIGINT stop it at the next item.
 */
#include "config.h"

#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "engine/restore.h"
#include "engine/volumes.h"
#include "journal/journal.h"
#include "kube/kube.h"

static atomic_int stop_flag;

static void
on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static const struct kube_gvr restores_gvr = { "cairn.io", "v1", "restores" };

struct scan {
	char **names;
	size_t n;
	const char *server_id;
};

static int
scan_cb(void *arg, cJSON *item)
{
	struct scan *s = arg;
	const char *phase = json_str_or(item, "status.phase", "");
	const char *holder = json_str_or(item, "status.claim.holder", "");

	if (phase[0] == '\0' || strcmp(phase, "New") == 0 ||
	    (strcmp(phase, "InProgress") == 0 &&
	    strcmp(holder, s->server_id) == 0)) {
		s->names = xreallocarray(s->names, s->n + 1, sizeof *s->names);
		s->names[s->n++] = xstrdup(json_str_or(item, "metadata.name",
		    ""));
	}
	return 0;
}

static void
take(const struct engine_env *env, const char *name, int workers)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	char worker[400];
	int rc;

	snprintf(worker, sizeof worker, "%s/0", env->server_id);
	rc = restore_take(env, name, worker, workers, &err);
	if (rc == CAIRN_ECONFLICT)
		log_info("restore %s: claimed by someone else first", name);
	else if (rc < 0)
		log_warn("restore %s: %s", name, err.msg);
}

int
main(int argc, char **argv)
{
	struct kube_config_opts co = { NULL, NULL };
	struct kube_config *cfg = NULL;
	struct kube *k = NULL;
	struct journal *j = NULL;
	struct engine_env env;
	struct volumes_config vc;
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *ns = "cairn-system", *jpath = "journal.db", *id = "runner";
	int workers = 0, period_ms = 200;
	long long term_ms = 0;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--kubeconfig") == 0)
			co.kubeconfig = argv[i + 1];
		else if (strcmp(argv[i], "--namespace") == 0)
			ns = argv[i + 1];
		else if (strcmp(argv[i], "--journal") == 0)
			jpath = argv[i + 1];
		else if (strcmp(argv[i], "--server-id") == 0)
			id = argv[i + 1];
		else if (strcmp(argv[i], "--restore-workers") == 0)
			workers = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--period-ms") == 0)
			period_ms = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--terminating-timeout-ms") == 0)
			term_ms = atoll(argv[i + 1]);
		else {
			fprintf(stderr, "restore_runner: unknown %s\n", argv[i]);
			return 2;
		}
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	log_configure(getenv("CAIRN_LOG_LEVEL") ? getenv("CAIRN_LOG_LEVEL") :
	    "info", "text", NULL);
	memset(&env, 0, sizeof env);
	memset(&vc, 0, sizeof vc);	/* the built-in mover, defaults */
	if (kube_config_load(&co, &cfg, &err) < 0 ||
	    kube_new(cfg, NULL, &k, &err) < 0 ||
	    journal_open(jpath, 0, &j, &err) < 0 ||
	    volumes_open(&vc, &env.volumes, &err) < 0) {
		fprintf(stderr, "restore_runner: %s\n", err.msg);
		journal_close(j);
		kube_free(k);
		return 1;
	}
	env.kube = k;
	env.journal = j;
	env.server_id = id;
	env.namespace = ns;
	env.stop = &stop_flag;
	env.terminating_timeout_us = term_ms * 1000;
	fprintf(stderr, "restore_runner: ready\n");
	while (!stop_flag) {
		struct scan s = { NULL, 0, id };

		if (kube_list(k, &restores_gvr, ns, NULL, scan_cb, &s, NULL,
		    &err) < 0)
			log_warn("listing restores: %s", err.msg);
		for (size_t i = 0; i < s.n; i++) {
			if (!stop_flag)
				take(&env, s.names[i], workers);
			free(s.names[i]);
		}
		free(s.names);
		time_sleep_us((int64_t)period_ms * 1000, &stop_flag);
	}
	volumes_free(env.volumes);
	journal_close(j);
	kube_free(k);
	return 0;
}
