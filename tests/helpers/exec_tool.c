/*
 * exec_tool: runs kube_exec() from tests (not part of cairn).
 *
 *   exec_tool [--kubeconfig F] [--context C] [--container C]
 *             [--timeout-ms N] [--cap BYTES] [--log-level L]
 *             [--no-get CONTAINER] NS POD CMD [ARG...]
 *
 * --no-get: hand kube_exec() a stand-in pod with that one container, so
 * nothing but the WebSocket connection reaches the server.
 *
 * Prints one JSON object on stdout: {"rc": "ok" | cairn_strerror name,
 * "message", "exit", "out", "err", "outTotal", "errTotal", "protocol",
 * "container"}; exits 0 unless the arguments are wrong (2). SIGTERM and
 * SIGINT cancel a running exec.
 */
#include "config.h"
#include "kube/kube.h"
#include "base/log.h"

#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_int stop_flag;

static void
on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static int
usage(void)
{
	fprintf(stderr, "usage: exec_tool [--kubeconfig F] [--context C] "
	    "[--container C] [--timeout-ms N] [--cap BYTES] [--no-get C] "
	    "NS POD CMD...\n");
	return 2;
}

int
main(int argc, char **argv)
{
	struct kube_config_opts co;
	struct kube_exec_opts eo;
	struct kube_exec_result res;
	struct kube_config *cfg = NULL;
	struct kube *k = NULL;
	struct cairn_err err = CAIRN_ERR_INIT;
	cJSON *out, *pod = NULL, *c;
	char *text;
	int i, rc;

	memset(&co, 0, sizeof co);
	memset(&eo, 0, sizeof eo);
	memset(&res, 0, sizeof res);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	log_set_level(LOG_WARN);
	for (i = 1; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		if (i + 1 >= argc)
			return usage();
		if (strcmp(argv[i], "--kubeconfig") == 0)
			co.kubeconfig = argv[++i];
		else if (strcmp(argv[i], "--context") == 0)
			co.context = argv[++i];
		else if (strcmp(argv[i], "--container") == 0)
			eo.container = argv[++i];
		else if (strcmp(argv[i], "--timeout-ms") == 0)
			eo.timeout_us = atoll(argv[++i]) * 1000;
		else if (strcmp(argv[i], "--no-get") == 0) {
			/* a stand-in pod: no GET before the upgrade */
			pod = cJSON_CreateObject();
			c = cJSON_CreateObject();
			cJSON_AddStringToObject(c, "name", argv[++i]);
			cJSON_AddItemToArray(cJSON_AddArrayToObject(
			    cJSON_AddObjectToObject(pod, "spec"), "containers"), c);
			eo.pod = pod;
		} else if (strcmp(argv[i], "--cap") == 0)
			eo.output_cap = (size_t)atoll(argv[++i]);
		else if (strcmp(argv[i], "--log-level") == 0) {
			if (log_configure(argv[++i], "text", &err) < 0)
				return usage();
		} else
			return usage();
	}
	if (argc - i < 3)
		return usage();
	eo.command = (const char *const *)&argv[i + 2];
	eo.stop = &stop_flag;
	rc = kube_config_load(&co, &cfg, &err);
	if (rc == 0)
		rc = kube_new(cfg, NULL, &k, &err);
	if (rc == 0)
		rc = kube_exec(k, argv[i], argv[i + 1], &eo, &res, &err);
	out = cJSON_CreateObject();
	cJSON_AddStringToObject(out, "rc", rc == 0 ? "ok" : cairn_strerror(rc));
	cJSON_AddStringToObject(out, "message", err.msg);
	cJSON_AddNumberToObject(out, "exit", res.exit_code);
	cJSON_AddStringToObject(out, "out", res.out ? res.out : "");
	cJSON_AddStringToObject(out, "err", res.err ? res.err : "");
	cJSON_AddNumberToObject(out, "outTotal", (double)res.out_total);
	cJSON_AddNumberToObject(out, "errTotal", (double)res.err_total);
	cJSON_AddStringToObject(out, "protocol", res.protocol);
	cJSON_AddStringToObject(out, "container", res.container);
	text = cJSON_PrintUnformatted(out);
	printf("%s\n", text);
	free(text);
	cJSON_Delete(out);
	cJSON_Delete(pod);
	kube_exec_result_free(&res);
	kube_free(k);
	return 0;
}
