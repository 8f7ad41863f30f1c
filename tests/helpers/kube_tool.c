/*
 * kube_tool: drives the kube client from tests (not part of cairn).
 *
 *   kube_tool [options] COMMAND ARGS...
 *
 * Options: --kubeconfig F, --context C, --qps N, --burst N, --timeout-ms N,
 * --retries N, --stats (print client stats and the peak RSS to stderr at
 * the end),
 * --log-level L.
 * G is a group ("core" or "" for the core group), NS a namespace ("-" for
 * none / all namespaces).
 *
 *   config                               resolved configuration as JSON
 *   request METHOD PATH [BODY]           raw request, reply JSON
 *   get G V R NS NAME                    object JSON
 *   create G V R NS FILE|-               created object JSON
 *   update G V R NS FILE|-               (PUT) updated object JSON
 *   update-status G V R NS FILE|-        (PUT .../status)
 *   patch G V R NS NAME merge|json|strategic PATCH [status]
 *   delete G V R NS NAME [uid=U] [rv=RV] [propagation=P]
 *   list G V R NS [limit=N] [labels=S] [fields=S] [names] [restart] [prefetch] [maxitems=N]
 *        [sleepms=N] (the callback sleeps N ms per item: a slow consumer)
 *                                        "items=N pages=P rv=RV restarts=R"
 *   watch G V R NS [rv=RV] [bookmarks] [reconnect] [max=N] [timeout=S] [labels=S]
 *                                        one line per event: TYPE NS/NAME RV
 *   informer G V R NS [max=N]            ADD/UPDATE/DELETE/SYNCED lines
 *   discovery                            one line per resource ("chosen": the
 *                                        version used when none is named), then
 *                                        "failed G/V: why" per failed group-version
 *   resolve ARG [VERSION]                group version resource kind namespaced
 *   resolve-wait ARG TRIES MS            resolve in one client until found
 *                                        (discovery refresh): "found after N"
 *   repeat-get G V R NS NAME COUNT       COUNT sequential GETs, then stats
 *   parallel-get G V R NS NAME THREADS COUNT   COUNT GETs in each of THREADS
 *                                        threads on one client: "gets=N failed=F"
 *   poll-get G V R NS NAME COUNT MS      a GET every MS ms: "ok I" or an error line
 *
 * Errors print "error: <code name> http=<H> reason=<R>: <message>" on
 * stdout and exit 1 (3 for gone, 4 for conflict, 5 not found, 6 exists).
 * SIGTERM/SIGINT stop watches and informers cleanly.
 */
#include "config.h"
#include "kube/kube.h"
#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"

#include <stdatomic.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static atomic_int stop_flag;
static long max_events = -1;
static long n_events;
static int print_names;
static long item_sleep_ms;

static void
on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static int
fail_rc(int rc, const struct cairn_err *err)
{
	const struct kube_status *st = kube_last_status();

	printf("error: %s http=%d reason=%s: %s\n", cairn_strerror(rc),
	    st->http, st->reason[0] ? st->reason : "-", err->msg);
	fflush(stdout);
	switch (rc) {
	case CAIRN_EGONE:
		return 3;
	case CAIRN_ECONFLICT:
		return 4;
	case CAIRN_ENOTFOUND:
		return 5;
	case CAIRN_EEXIST:
		return 6;
	default:
		return 1;
	}
}

static void
print_json(const cJSON *j)
{
	char *s = j ? json_print(j) : xstrdup("null");

	printf("%s\n", s);
	free(s);
	fflush(stdout);
}

static cJSON *
read_json(const char *path, struct cairn_err *err)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	struct buf b;
	char tmp[8192];
	size_t n;
	cJSON *j;

	if (f == NULL) {
		cairn_err_set(err, CAIRN_EIO, "cannot open %s", path);
		return NULL;
	}
	buf_init(&b, CAIRN_CAP_API_BODY);
	for (;;) {
		n = fread(tmp, 1, sizeof tmp, f);
		if (n == 0)
			break;
		buf_append(&b, tmp, n);
	}
	if (f != stdin)
		fclose(f);
	j = json_parse(b.data ? b.data : "", b.len, err);
	buf_free(&b);
	return j;
}

static const char *
opt(int argc, char **argv, int from, const char *key)
{
	size_t kl = strlen(key);
	int i;

	for (i = from; i < argc; i++) {
		if (strncmp(argv[i], key, kl) == 0 && argv[i][kl] == '=')
			return argv[i] + kl + 1;
	}
	return NULL;
}

static int
has(int argc, char **argv, int from, const char *word)
{
	int i;

	for (i = from; i < argc; i++)
		if (strcmp(argv[i], word) == 0)
			return 1;
	return 0;
}

static int
list_item(void *arg, cJSON *item)
{
	long *maxitems = arg;

	if (print_names)
		printf("%s %s/%s %s\n", json_str_or(item, "kind", "-"),
		    json_str_or(item, "metadata.namespace", ""),
		    json_str_or(item, "metadata.name", ""),
		    json_str_or(item, "apiVersion", "-"));
	n_events++;
	if (item_sleep_ms > 0) {
		struct timespec ts = { item_sleep_ms / 1000,
		    (item_sleep_ms % 1000) * 1000000 };

		nanosleep(&ts, NULL);
	}
	if (*maxitems > 0 && n_events >= *maxitems)
		return 100;
	return 0;
}

static int
list_restart(void *arg)
{
	(void)arg;
	printf("RESTART\n");
	return 0;
}

static int
watch_event(void *arg, enum kube_event_type t, cJSON *obj)
{
	(void)arg;
	if (t == KUBE_EV_ERROR)
		printf("ERROR %s %s\n", json_str_or(obj, "reason", "-"),
		    json_str_or(obj, "message", "-"));
	else
		printf("%s %s/%s %s\n", kube_event_name(t),
		    json_str_or(obj, "metadata.namespace", ""),
		    json_str_or(obj, "metadata.name", ""),
		    json_str_or(obj, "metadata.resourceVersion", ""));
	fflush(stdout);
	n_events++;
	if (max_events > 0 && n_events >= max_events)
		return 100;
	return 0;
}

static void
inf_add(void *arg, const cJSON *o)
{
	struct kube_informer *inf = *(struct kube_informer **)arg;

	printf("ADD %s/%s %s\n", json_str_or(o, "metadata.namespace", ""),
	    json_str_or(o, "metadata.name", ""),
	    json_str_or(o, "metadata.resourceVersion", ""));
	fflush(stdout);
	if (max_events > 0 && ++n_events >= max_events)
		kube_informer_stop(inf);
}

static void
inf_update(void *arg, const cJSON *old, const cJSON *o)
{
	struct kube_informer *inf = *(struct kube_informer **)arg;

	printf("UPDATE %s/%s %s->%s\n", json_str_or(o, "metadata.namespace",
	    ""), json_str_or(o, "metadata.name", ""),
	    json_str_or(old, "metadata.resourceVersion", ""),
	    json_str_or(o, "metadata.resourceVersion", ""));
	fflush(stdout);
	if (max_events > 0 && ++n_events >= max_events)
		kube_informer_stop(inf);
}

static void
inf_delete(void *arg, const cJSON *o)
{
	struct kube_informer *inf = *(struct kube_informer **)arg;

	printf("DELETE %s/%s\n", json_str_or(o, "metadata.namespace", ""),
	    json_str_or(o, "metadata.name", ""));
	fflush(stdout);
	if (max_events > 0 && ++n_events >= max_events)
		kube_informer_stop(inf);
}

static void
inf_synced(void *arg)
{
	struct kube_informer *inf = *(struct kube_informer **)arg;

	printf("SYNCED %zu\n", kube_informer_count(inf));
	fflush(stdout);
}

static const char *
grp(const char *g)
{
	return strcmp(g, "core") == 0 ? "" : g;
}

static const char *
nsarg(const char *ns)
{
	return strcmp(ns, "-") == 0 ? NULL : ns;
}

struct pget {
	struct kube *k;
	struct kube_gvr g;
	const char *ns, *name;
	long count;
	long ok, failed;
	pthread_t th;
};

static void *
pget_thread(void *arg)
{
	struct pget *p = arg;
	struct cairn_err err = CAIRN_ERR_INIT;
	cJSON *res;
	long i;

	for (i = 0; i < p->count; i++) {
		if (kube_get(p->k, &p->g, p->ns, p->name, &res, &err) == 0)
			p->ok++;
		else
			p->failed++;
		cJSON_Delete(res);
	}
	return NULL;
}

/* Peak RSS of this process image (VmHWM: not inherited across exec). */
static long
peak_rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL)
		if (strncmp(line, "VmHWM:", 6) == 0)
			kb = atol(line + 6);
	fclose(f);
	return kb;
}

static int
usage(void)
{
	fprintf(stderr, "usage: kube_tool [options] COMMAND ARGS (see the "
	    "comment at the top of tests/helpers/kube_tool.c)\n");
	return 2;
}

int
main(int argc, char **argv)
{
	struct kube_config_opts co;
	struct kube_client_opts ko;
	struct kube_config *cfg = NULL;
	struct kube *k = NULL;
	struct cairn_err err = CAIRN_ERR_INIT;
	struct kube_gvr g;
	cJSON *obj = NULL, *res = NULL;
	const char *cmd;
	int i, rc = 0, stats = 0, ret = 0;

	memset(&co, 0, sizeof co);
	memset(&ko, 0, sizeof ko);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	log_set_level(LOG_WARN);
	for (i = 1; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		if (strcmp(argv[i], "--stats") == 0)
			stats = 1;
		else if (i + 1 >= argc)
			return usage();
		else if (strcmp(argv[i], "--kubeconfig") == 0)
			co.kubeconfig = argv[++i];
		else if (strcmp(argv[i], "--context") == 0)
			co.context = argv[++i];
		else if (strcmp(argv[i], "--qps") == 0)
			ko.qps = atof(argv[++i]);
		else if (strcmp(argv[i], "--burst") == 0)
			ko.burst = atoi(argv[++i]);
		else if (strcmp(argv[i], "--timeout-ms") == 0)
			ko.timeout_us = atoll(argv[++i]) * 1000;
		else if (strcmp(argv[i], "--retries") == 0)
			ko.max_retries = atoi(argv[++i]) > 0 ?
			    atoi(argv[i]) : KUBE_RETRIES_NONE;
		else if (strcmp(argv[i], "--log-level") == 0) {
			if (log_configure(argv[++i], "text", &err) < 0)
				return usage();
		} else
			return usage();
	}
	if (i >= argc)
		return usage();
	cmd = argv[i++];
	argc -= i;
	argv += i;

	rc = kube_config_load(&co, &cfg, &err);
	if (rc < 0)
		return fail_rc(rc, &err);
	if (strcmp(cmd, "config") == 0) {
		obj = kube_config_describe(cfg);
		print_json(obj);
		cJSON_Delete(obj);
		kube_config_free(cfg);
		return 0;
	}
	rc = kube_new(cfg, &ko, &k, &err);
	if (rc < 0)
		return fail_rc(rc, &err);

	if (strcmp(cmd, "request") == 0 && argc >= 2) {
		rc = kube_request(k, argv[0], argv[1], NULL, argc > 2 ?
		    argv[2] : NULL, argc > 2 ? strlen(argv[2]) : 0, 0, &res,
		    &err);
		if (rc == 0)
			print_json(res);
	} else if (strcmp(cmd, "discovery") == 0) {
		struct kube_discovery *d;
		size_t n;

		rc = kube_discovery_get(k, 0, &d, &err);
		if (rc == 0) {
			for (n = 0; n < kube_discovery_count(d); n++) {
				const struct kube_resource *r =
				    kube_discovery_at(d, n);
				char **s;

				printf("%s %s %s %s %s verbs=%#x%s", r->group_version,
				    r->resource, r->kind, r->namespaced ?
				    "namespaced" : "cluster", r->preferred ?
				    "preferred" : "-", r->verbs, r->chosen ?
				    " chosen" : "");
				for (s = r->subresources; *s; s++)
					printf(" sub=%s", *s);
				printf("\n");
			}
			for (n = 0; n < kube_discovery_failed_count(d); n++) {
				const struct kube_disc_failure *f =
				    kube_discovery_failed_at(d, n);

				printf("failed %s%s%s: %s\n", f->group,
				    f->group[0] ? "/" : "", f->version,
				    f->message);
			}
			kube_discovery_release(d);
		}
	} else if (strcmp(cmd, "resolve") == 0 && argc >= 1) {
		struct kube_resource *r;

		rc = kube_resolve(k, argv[0], argc > 1 ? argv[1] : NULL, &r,
		    &err);
		if (rc == 0) {
			printf("%s %s %s %s %s\n", r->group[0] ? r->group :
			    "core", r->version, r->resource, r->kind,
			    r->namespaced ? "namespaced" : "cluster");
			kube_resource_free(r);
		}
	} else if (strcmp(cmd, "resolve-wait") == 0 && argc >= 3) {
		struct kube_resource *r = NULL;
		long n = atol(argv[1]), ms = atol(argv[2]), j;
		struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

		for (j = 0; j < n && !stop_flag; j++) {
			rc = kube_resolve(k, argv[0], NULL, &r, &err);
			if (rc != CAIRN_ENOTFOUND)
				break;
			if (j == 0) {
				printf("missing\n");
				fflush(stdout);
			}
			nanosleep(&ts, NULL);
		}
		if (rc == 0) {
			printf("found after %ld: %s %s %s %s\n", j, r->group,
			    r->version, r->resource, r->kind);
			kube_resource_free(r);
		}
	} else if (argc < 4) {
		kube_free(k);
		return usage();
	} else {
		g = KUBE_GVR(grp(argv[0]), argv[1], argv[2]);
		const char *ns = nsarg(argv[3]);

		if (strcmp(cmd, "get") == 0 && argc >= 5) {
			rc = kube_get(k, &g, ns, argv[4], &res, &err);
			if (rc == 0)
				print_json(res);
		} else if ((strcmp(cmd, "create") == 0 ||
		    strcmp(cmd, "update") == 0 ||
		    strcmp(cmd, "update-status") == 0) && argc >= 5) {
			obj = read_json(argv[4], &err);
			if (obj == NULL)
				rc = err.code;
			else if (cmd[0] == 'c')
				rc = kube_create(k, &g, ns, obj, &res, &err);
			else if (strcmp(cmd, "update") == 0)
				rc = kube_update(k, &g, ns, obj, &res, &err);
			else
				rc = kube_update_status(k, &g, ns, obj, &res,
				    &err);
			if (rc == 0)
				print_json(res);
		} else if (strcmp(cmd, "patch") == 0 && argc >= 7) {
			enum kube_patch_type pt = strcmp(argv[5], "json") == 0 ?
			    KUBE_PATCH_JSON : strcmp(argv[5], "strategic") == 0 ?
			    KUBE_PATCH_STRATEGIC : KUBE_PATCH_MERGE;

			rc = kube_patch(k, &g, ns, argv[4], argc > 7 ? argv[7] :
			    NULL, pt, argv[6], &res, &err);
			if (rc == 0)
				print_json(res);
		} else if (strcmp(cmd, "delete") == 0 && argc >= 5) {
			struct kube_delete_opts d;

			memset(&d, 0, sizeof d);
			d.uid = opt(argc, argv, 5, "uid");
			d.resource_version = opt(argc, argv, 5, "rv");
			d.propagation = opt(argc, argv, 5, "propagation");
			rc = kube_delete(k, &g, ns, argv[4], &d, &res, &err);
			if (rc == 0)
				print_json(res);
		} else if (strcmp(cmd, "list") == 0) {
			struct kube_list_opts lo;
			struct kube_list_info info;
			long maxitems = 0;

			memset(&lo, 0, sizeof lo);
			if (opt(argc, argv, 4, "limit"))
				lo.limit = atoi(opt(argc, argv, 4, "limit"));
			if (opt(argc, argv, 4, "maxitems"))
				maxitems = atol(opt(argc, argv, 4, "maxitems"));
			lo.label_selector = opt(argc, argv, 4, "labels");
			lo.field_selector = opt(argc, argv, 4, "fields");
			lo.resource_version = opt(argc, argv, 4, "rv");
			lo.restart_on_gone = has(argc, argv, 4, "restart");
			lo.prefetch = has(argc, argv, 4, "prefetch");
			lo.on_restart = list_restart;
			lo.stop = &stop_flag;
			print_names = has(argc, argv, 4, "names");
			if (opt(argc, argv, 4, "sleepms"))
				item_sleep_ms = atol(opt(argc, argv, 4,
				    "sleepms"));
			rc = kube_list(k, &g, ns, &lo, list_item, &maxitems,
			    &info, &err);
			if (rc == 100)
				rc = 0;
			printf("items=%llu pages=%llu rv=%s restarts=%d\n",
			    (unsigned long long)info.items,
			    (unsigned long long)info.pages,
			    info.resource_version, info.restarts);
		} else if (strcmp(cmd, "watch") == 0) {
			struct kube_watch_opts wo;
			char *rv = NULL;

			memset(&wo, 0, sizeof wo);
			wo.resource_version = opt(argc, argv, 4, "rv");
			wo.label_selector = opt(argc, argv, 4, "labels");
			wo.bookmarks = has(argc, argv, 4, "bookmarks");
			wo.reconnect = has(argc, argv, 4, "reconnect");
			if (opt(argc, argv, 4, "timeout"))
				wo.timeout_s = atoi(opt(argc, argv, 4,
				    "timeout"));
			if (opt(argc, argv, 4, "max"))
				max_events = atol(opt(argc, argv, 4, "max"));
			wo.stop = &stop_flag;
			printf("WATCHING\n");
			fflush(stdout);
			rc = kube_watch(k, &g, ns, &wo, watch_event, NULL, &rv,
			    &err);
			if (rc == 100 || rc == CAIRN_ECANCELED)
				rc = 0;
			printf("END rv=%s\n", rv ? rv : "");
			free(rv);
		} else if (strcmp(cmd, "informer") == 0) {
			struct kube_informer *inf = NULL;
			struct kube_informer_cbs cbs = { inf_add, inf_update,
			    inf_delete, inf_synced };
			struct kube_informer_opts io;

			memset(&io, 0, sizeof io);
			if (opt(argc, argv, 4, "max"))
				max_events = atol(opt(argc, argv, 4, "max"));
			if (opt(argc, argv, 4, "limit"))
				io.page_size = atoi(opt(argc, argv, 4, "limit"));
			if (opt(argc, argv, 4, "timeout"))
				io.watch_timeout_s = atoi(opt(argc, argv, 4,
				    "timeout"));
			rc = kube_informer_new(k, &g, ns, &io, &cbs, &inf, &inf,
			    &err);
			if (rc == 0) {
				rc = kube_informer_start(inf, &err);
				while (rc == 0 && !stop_flag) {
					struct timespec ts = { 0, 50000000 };

					nanosleep(&ts, NULL);
					if (max_events > 0 && n_events >=
					    max_events)
						break;
				}
				kube_informer_free(inf);
				printf("END\n");
			}
		} else if (strcmp(cmd, "repeat-get") == 0 && argc >= 6) {
			long n = atol(argv[5]), j;

			for (j = 0; j < n && rc == 0; j++) {
				rc = kube_get(k, &g, ns, argv[4], &res, &err);
				cJSON_Delete(res);
				res = NULL;
			}
			if (rc == 0)
				printf("gets=%ld\n", n);
		} else if (strcmp(cmd, "parallel-get") == 0 && argc >= 7) {
			long nt = atol(argv[5]), j, okn = 0, bad = 0;
			struct pget *pg;

			if (nt < 1 || nt > 64)
				nt = 1;
			pg = xcalloc((size_t)nt, sizeof *pg);
			for (j = 0; j < nt; j++) {
				pg[j].k = k;
				pg[j].g = g;
				pg[j].ns = ns;
				pg[j].name = argv[4];
				pg[j].count = atol(argv[6]);
				pthread_create(&pg[j].th, NULL, pget_thread, &pg[j]);
			}
			for (j = 0; j < nt; j++) {
				pthread_join(pg[j].th, NULL);
				okn += pg[j].ok;
				bad += pg[j].failed;
			}
			free(pg);
			printf("gets=%ld failed=%ld\n", okn, bad);
		} else if (strcmp(cmd, "poll-get") == 0 && argc >= 7) {
			long n = atol(argv[5]), ms = atol(argv[6]), j;
			struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

			for (j = 0; j < n && !stop_flag; j++) {
				rc = kube_get(k, &g, ns, argv[4], &res, &err);
				cJSON_Delete(res);
				res = NULL;
				if (rc == 0)
					printf("ok %ld\n", j);
				else
					fail_rc(rc, &err);
				fflush(stdout);
				nanosleep(&ts, NULL);
			}
			rc = 0;
		} else {
			kube_free(k);
			return usage();
		}
	}
	if (rc != 0)
		ret = fail_rc(rc, &err);
	if (stats) {
		struct kube_stats s;

		kube_stats(k, &s);
		fprintf(stderr, "stats: requests=%llu retries=%llu "
		    "connections=%llu throttled_ms=%llu pushed_back=%llu "
		    "held_ms=%llu peak_rss_kb=%ld\n",
		    (unsigned long long)s.requests,
		    (unsigned long long)s.retries,
		    (unsigned long long)s.connections,
		    (unsigned long long)(s.throttled_us / 1000),
		    (unsigned long long)s.pushed_back,
		    (unsigned long long)(s.held_us / 1000), peak_rss_kb());
	}
	cJSON_Delete(obj);
	cJSON_Delete(res);
	kube_free(k);
	return ret;
}
