/*
 * unit_kube.h: a Kubernetes client for unit tests that fake the API server
 * in-process (libmicrohttpd on a random loopback port, plain HTTP).
 *
 * unit_kube_at() writes a kubeconfig naming http://127.0.0.1:<port> (and
 * the context namespace ns, or none) into the runner's temp directory and
 * makes a client from it: 3 s request timeout, no retries, so a test sees
 * every reply its fake gives. unit_kube_opts() takes other client
 * options (retries, for tests of what is retried).
 */
#ifndef CAIRN_UNIT_KUBE_H
#define CAIRN_UNIT_KUBE_H

#include <stdio.h>

#include "base/timeutil.h"
#include "kube/kube.h"
#include "unit.h"

/* As unit_kube_at() with these client options (NULL: its own). */
static inline struct kube *
unit_kube_opts(unsigned port, const char *ns, const char *name,
	const struct kube_client_opts *kopts)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct kube_config_opts co = { NULL, NULL };
	struct kube_client_opts ko;
	struct kube_config *cfg = NULL;
	struct kube *k = NULL;
	char path[512];
	FILE *f;

	snprintf(path, sizeof path, "%s/%s-kubeconfig", UNIT_TMPDIR(), name);
	f = fopen(path, "w");
	if (f == NULL)
		return NULL;
	fprintf(f, "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
	    "clusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:%u\n"
	    "users:\n- name: u\n  user: {}\n"
	    "contexts:\n- name: t\n  context: {cluster: c, user: u%s%s}\n",
	    port, ns != NULL ? ", namespace: " : "", ns != NULL ? ns : "");
	fclose(f);
	co.kubeconfig = path;
	memset(&ko, 0, sizeof ko);
	ko.timeout_us = 3 * TIME_US_PER_SEC;
	ko.max_retries = KUBE_RETRIES_NONE;
	if (kopts != NULL)
		ko = *kopts;
	if (kube_config_load(&co, &cfg, &err) < 0 ||
	    kube_new(cfg, &ko, &k, &err) < 0) {	/* takes cfg */
		fprintf(stderr, "kube: %s\n", err.msg);
		return NULL;
	}
	return k;
}

static inline struct kube *
unit_kube_at(unsigned port, const char *ns, const char *name)
{
	return unit_kube_opts(port, ns, name, NULL);
}

#endif
