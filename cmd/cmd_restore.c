/*
 * cmd_restore.c: `cairn restore create|get|describe|logs`.
 *
 * create writes a Restore object (Velero's spec fields) and, with --wait,
 * follows it to its final phase with a progress bar; a cairn server
 * (engine/restore.c) does the work. describe prints the status and, when
 * the storage location is reachable, the warnings and errors from
 * restores/NAME/restore-NAME-results.gz; logs streams
 * restore-NAME-logs.gz.
 */
#include "config.h"
#include "cmd/cli.h"

#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/buf.h"
#include "base/jsonutil.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"
#include "cmd/output.h"
#include "cmd/progress.h"
#include "engine/bsl.h"
#include "kube/kube.h"
#include "kube/label.h"
#include "storage/layout.h"
#include "storage/store.h"

#define RS_POLL_US		500000
#define RS_UNCLAIMED_US		(3 * TIME_US_PER_SEC)
#define RS_NAME_MAX		253
#define RS_CAP_RESULTS		(16u << 20)	/* results file, uncompressed */
#define RS_ESC_MAX		(64u << 10)

static const struct kube_gvr gvr_restores = { "cairn.io", "v1", "restores" };
static const struct kube_gvr gvr_backups = { "cairn.io", "v1", "backups" };

static atomic_int rs_interrupted;

static void
rs_on_signal(int sig)
{
	(void)sig;
	rs_interrupted = 1;
}

/* Escaped copy of untrusted text for printing (owned). */
static char *
esc(const char *s)
{
	struct buf b;

	buf_init(&b, RS_ESC_MAX);
	if (str_escape_text(&b, s != NULL ? s : "") < 0)
		(void)buf_puts(&b, "...");
	{
		char *out = buf_take(&b, NULL);

		buf_free(&b);
		return out != NULL ? out : xstrdup("");
	}
}

static int
is_final(const char *phase)
{
	static const char *const f[] = { "Completed", "PartiallyFailed",
	    "Failed", "FailedValidation", NULL };

	for (int i = 0; phase != NULL && f[i] != NULL; i++)
		if (strcmp(phase, f[i]) == 0)
			return 1;
	return 0;
}

static int
build_restore(const struct cli_command *cmd, const struct flagset *fs,
    const char *name, const char *ns, const char *backup, cJSON **out)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *sched = flag_str(fs, F_FROM_SCHEDULE);
	const char *policy = flag_str(fs, F_EXISTING_RESOURCE_POLICY);
	const char *icr = flag_str(fs, F_INCLUDE_CLUSTER_RESOURCES);
	const char *sel = flag_str(fs, F_SELECTOR);
	char **maps = flag_list(fs, F_NAMESPACE_MAPPINGS);
	cJSON *r, *spec, *labels;
	int rc;

	*out = NULL;
	if (policy != NULL && strcmp(policy, "none") != 0 &&
	    strcmp(policy, "update") != 0)
		return cli_usage_error(cmd, "--existing-resource-policy must be "
		    "none or update, not \"%s\"", policy);
	rc = cli_labels(cmd, fs, &labels);
	if (rc != 0)
		return rc;
	r = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "apiVersion", "cairn.io/v1");
	cJSON_AddStringToObject(r, "kind", "Restore");
	json_set_str(r, "metadata.name", name);
	json_set_str(r, "metadata.namespace", ns);
	if (labels != NULL)
		json_set_item(r, "metadata.labels", labels);
	spec = cJSON_AddObjectToObject(r, "spec");
	cJSON_AddStringToObject(spec, "backupName", backup);
	if (sched != NULL && sched[0] != '\0')
		cJSON_AddStringToObject(spec, "scheduleName", sched);
	cli_add_scope(spec, fs);
	if (maps[0] != NULL) {
		cJSON *m = cJSON_AddObjectToObject(spec, "namespaceMapping");

		for (size_t i = 0; maps[i] != NULL; i++) {
			char *c = strchr(maps[i], ':');

			if (c == NULL || c == maps[i] || c[1] == '\0') {
				cJSON_Delete(r);
				return cli_usage_error(cmd, "bad namespace "
				    "mapping \"%s\": use SRC:DST", maps[i]);
			}
			*c = '\0';
			cJSON_DeleteItemFromObjectCaseSensitive(m, maps[i]);
			cJSON_AddStringToObject(m, maps[i], c + 1);
			*c = ':';
		}
	}
	if (sel != NULL && sel[0] != '\0') {
		cJSON *so;

		if (kube_selector_object(sel, &so, &err) < 0) {
			cJSON_Delete(r);
			return cli_usage_error(cmd, "bad --selector: %s", err.msg);
		}
		cJSON_AddItemToObject(spec, "labelSelector", so);
	}
	if (icr != NULL && icr[0] != '\0') {
		int v;

		if (flags_parse_bool(icr, &v) < 0) {
			cJSON_Delete(r);
			return cli_usage_error(cmd, "--include-cluster-resources "
			    "must be true or false");
		}
		cJSON_AddBoolToObject(spec, "includeClusterResources", v);
	}
	if (policy != NULL && flag_given(fs, F_EXISTING_RESOURCE_POLICY))
		cJSON_AddStringToObject(spec, "existingResourcePolicy", policy);
	if (flag_list(fs, F_RESTORE_STATUS)[0] != NULL) {
		cJSON *st = cJSON_AddObjectToObject(spec, "restoreStatus");

		cli_add_list(st, "includedResources",
		    flag_list(fs, F_RESTORE_STATUS));
	}
	*out = r;
	return 0;
}

static int
report_final(const char *name, const cJSON *r)
{
	const char *phase = json_str_or(r, "status.phase", "");
	long long done = (long long)json_int(r, "status.progress.itemsRestored", 0);
	long long total = (long long)json_int(r, "status.progress.totalItems", 0);
	long long nw = (long long)json_int(r, "status.warnings", 0);
	long long ne = (long long)json_int(r, "status.errors", 0);
	char *e;
	int rc;

	if (strcmp(phase, "Completed") == 0) {
		printf("Restore %s completed: %lld/%lld items, %lld warnings. "
		    "Run 'cairn restore describe %s' for details.\n", name,
		    done, total, nw, name);
		return CLI_EXIT_OK;
	}
	if (strcmp(phase, "PartiallyFailed") == 0)
		return cli_fail("restore %s partially failed: %lld errors, %lld "
		    "warnings, %lld/%lld items (see 'cairn restore describe "
		    "%s')", name, ne, nw, done, total, name);
	if (strcmp(phase, "FailedValidation") == 0) {
		struct buf msg;
		const cJSON *v;

		buf_init(&msg, 65536);
		cJSON_ArrayForEach(v, json_get(r, "status.validationErrors"))
			if (cJSON_IsString(v)) {
				(void)buf_puts(&msg, msg.len ? "; " : "");
				(void)str_escape_text(&msg, v->valuestring);
			}
		rc = cli_fail("restore %s failed validation: %s", name,
		    msg.len ? buf_cstr(&msg) : "(no message)");
		buf_free(&msg);
		return rc;
	}
	e = esc(json_str_or(r, "status.failureReason", "(no reason given)"));
	rc = cli_fail("restore %s %s: %s", name, strcmp(phase, "Failed") == 0 ?
	    "failed" : "ended", e);
	free(e);
	return rc;
}

static int
follow(struct kube *k, const char *ns, const char *name)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct progress *p;
	char label[RS_NAME_MAX + 16], detail[400];
	int64_t start = time_mono_us();
	int said_waiting = 0, rc;
	cJSON *r = NULL;

	snprintf(label, sizeof label, "restore %s", name);
	p = progress_new(stderr, PROGRESS_AUTO, label);
	signal(SIGINT, rs_on_signal);
	signal(SIGTERM, rs_on_signal);
	for (;;) {
		struct progress_state st;
		const char *holder;

		if (rs_interrupted) {
			progress_end(p, NULL);
			rc = cli_fail("stopped waiting; restore %s goes on", name);
			break;
		}
		cJSON_Delete(r);
		r = NULL;
		rc = kube_get(k, &gvr_restores, ns, name, &r, &err);
		if (rc == CAIRN_ENOTFOUND) {
			progress_end(p, NULL);
			rc = cli_fail("restore %s was deleted while waiting", name);
			break;
		}
		if (rc < 0) {
			time_sleep_us(RS_POLL_US, &rs_interrupted);
			continue;
		}
		holder = json_str(r, "status.claim.holder");
		if (holder != NULL)
			snprintf(detail, sizeof detail, "holder %.200s, attempt %lld",
			    holder, (long long)json_int(r, "status.claim.attempt",
			    1));
		else
			snprintf(detail, sizeof detail, "waiting for a cairn "
			    "server to claim it");
		if (holder == NULL && !said_waiting &&
		    time_mono_us() - start >= RS_UNCLAIMED_US) {
			progress_note(p, "restore %s is waiting: no cairn server "
			    "has claimed it yet (is 'cairn server' running for "
			    "namespace %s?)", name, ns);
			said_waiting = 1;
		}
		memset(&st, 0, sizeof st);
		st.phase = json_str_or(r, "status.phase", "New");
		st.done = json_int(r, "status.progress.itemsRestored", 0);
		st.total = json_int(r, "status.progress.totalItems", -1);
		st.bytes = -1;
		st.bytes_total = -1;
		st.detail = detail;
		if (is_final(json_str(r, "status.phase"))) {
			progress_end(p, &st);
			rc = report_final(name, r);
			break;
		}
		progress_update(p, &st);
		time_sleep_us(RS_POLL_US, &rs_interrupted);
	}
	cJSON_Delete(r);
	progress_free(p);
	return rc;
}

/* The newest Completed backup of a schedule. */
struct newest {
	char name[RS_NAME_MAX + 1];
	int64_t when;
};

static int
newest_item(void *arg, cJSON *b)
{
	struct newest *n = arg;
	int64_t t;

	if (strcmp(json_str_or(b, "status.phase", ""), "Completed") != 0 ||
	    time_parse(json_str_or(b, "status.completionTimestamp", ""),
	    &t) < 0)
		return 0;
	if (t > n->when || (t == n->when && strcmp(json_str_or(b,
	    "metadata.name", ""), n->name) > 0)) {
		n->when = t;
		snprintf(n->name, sizeof n->name, "%s", json_str_or(b,
		    "metadata.name", ""));
	}
	return 0;
}

/*
 * The backup to restore from: --from-backup, or the latest Completed
 * backup of --from-schedule (labelled cairn.io/schedule-name, as Velero
 * picks it). 0 with out filled, or the exit code after the message.
 */
static int
restore_source(const struct cli_command *cmd, const struct flagset *fs,
    struct kube *k, const char *ns, char *out, size_t cap)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *backup = flag_str(fs, F_FROM_BACKUP);
	const char *sched = flag_str(fs, F_FROM_SCHEDULE);
	struct kube_list_opts lo;
	struct newest n = { "", -1 };
	char *lv, *sel;
	cJSON *b = NULL;
	int rc;

	if (backup != NULL && backup[0] != '\0') {
		rc = kube_get(k, &gvr_backups, ns, backup, &b, &err);
		cJSON_Delete(b);
		if (rc == CAIRN_ENOTFOUND)
			return cli_fail("backup \"%s\" not found in namespace %s",
			    backup, ns);
		if (rc < 0)
			return cli_fail("%s", err.msg);
		snprintf(out, cap, "%s", backup);
		return 0;
	}
	(void)cmd;
	lv = kube_label_value(sched);
	sel = xasprintf("cairn.io/schedule-name=%s", lv);
	memset(&lo, 0, sizeof lo);
	lo.label_selector = sel;
	rc = kube_list(k, &gvr_backups, ns, &lo, newest_item, &n, NULL, &err);
	free(sel);
	free(lv);
	if (rc < 0)
		return cli_fail("listing the backups of schedule %s: %s", sched,
		    err.msg);
	if (n.name[0] == '\0')
		return cli_fail("schedule \"%s\" has no Completed backup in "
		    "namespace %s", sched, ns);
	printf("Restoring from backup \"%s\", the latest Completed backup of "
	    "schedule \"%s\".\n", n.name, sched);
	snprintf(out, cap, "%s", n.name);
	return 0;
}

int
cmd_restore_create(const struct cli_command *cmd, struct flagset *fs)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *ns = flag_str(fs, F_NAMESPACE);
	const char *from = flag_str(fs, F_FROM_BACKUP);
	const char *sched = flag_str(fs, F_FROM_SCHEDULE);
	struct kube *k = NULL;
	char name[RS_NAME_MAX + 1], backup[RS_NAME_MAX + 1];
	cJSON *r = NULL;
	int rc, by_sched = sched != NULL && sched[0] != '\0';

	if (fs->nargs > 1)
		return cli_usage_error(cmd, "restore create takes at most one "
		    "NAME");
	if ((from == NULL || from[0] == '\0') && !by_sched)
		return cli_usage_error(cmd, "--from-backup or --from-schedule is "
		    "required");
	if (from != NULL && from[0] != '\0' && by_sched)
		return cli_usage_error(cmd, "give --from-backup or "
		    "--from-schedule, not both");
	if (fs->nargs == 1)
		snprintf(name, sizeof name, "%s", fs->args[0]);
	else {
		/* Velero's default: <backup or schedule>-<YYYYMMDDhhmmss> */
		char ts[TIME_STR_MAX], *o = name;

		time_format_rfc3339(time_now_us(), ts);
		o += snprintf(name, sizeof name - 16, "%.200s-",
		    by_sched ? sched : from);
		for (const char *c = ts; *c && *c != 'Z'; c++)
			if (*c >= '0' && *c <= '9')
				*o++ = *c;
		*o = '\0';
	}
	if (!cli_valid_name(name))
		return cli_usage_error(cmd, "invalid restore name \"%s\": use "
		    "lowercase letters, digits, '-' and '.'", name);
	/* usage errors first, then the cluster */
	rc = build_restore(cmd, fs, name, ns, "", &r);
	cJSON_Delete(r);
	r = NULL;
	if (rc != 0)
		return rc;
	if (cli_open_kube(fs, &k) < 0)
		return CLI_EXIT_FAIL;
	rc = restore_source(cmd, fs, k, ns, backup, sizeof backup);
	if (rc != 0)
		goto out;
	rc = build_restore(cmd, fs, name, ns, backup, &r);
	if (rc != 0)
		goto out;
	rc = kube_create(k, &gvr_restores, ns, r, NULL, &err);
	if (rc == CAIRN_EEXIST) {
		rc = cli_fail("restore %s already exists in namespace %s", name,
		    ns);
		goto out;
	}
	if (rc < 0) {
		rc = cli_fail("creating restore %s: %s", name, err.msg);
		goto out;
	}
	printf("Restore request \"%s\" submitted successfully.\n", name);
	fflush(stdout);
	rc = flag_bool(fs, F_WAIT) ? follow(k, ns, name) : CLI_EXIT_OK;
out:
	cJSON_Delete(r);
	kube_free(k);
	return rc;
}

struct get_ctx {
	struct out_table *t;
	cJSON *items;
	int64_t now;
};

static void
table_row(struct get_ctx *g, const cJSON *r)
{
	char items[64], age[OUT_AGE_MAX], w[24], e[24];
	char *n = esc(json_str_or(r, "metadata.name", ""));
	char *b = esc(json_str_or(r, "spec.backupName", ""));
	char *ph = esc(json_str_or(r, "status.phase", "New"));
	char *h = esc(json_str_or(r, "status.claim.holder", ""));

	snprintf(items, sizeof items, "%lld/%lld",
	    (long long)json_int(r, "status.progress.itemsRestored", 0),
	    (long long)json_int(r, "status.progress.totalItems", 0));
	snprintf(w, sizeof w, "%lld", (long long)json_int(r, "status.warnings", 0));
	snprintf(e, sizeof e, "%lld", (long long)json_int(r, "status.errors", 0));
	out_age(json_str(r, "metadata.creationTimestamp"), g->now, age);
	out_table_row(g->t, (const char *[]){ n, b, ph, items, e, w, h, age });
	free(n);
	free(b);
	free(ph);
	free(h);
}

static int
get_cb(void *arg, cJSON *item)
{
	struct get_ctx *g = arg;

	if (g->items != NULL) {
		cJSON_AddItemToArray(g->items, item);
		return KUBE_TAKE;
	}
	table_row(g, item);
	return 0;
}

int
cmd_restore_get(const struct cli_command *cmd, struct flagset *fs)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *ns = flag_str(fs, F_NAMESPACE);
	enum out_format fmt;
	struct get_ctx g;
	struct kube *k = NULL;
	cJSON *one = NULL;
	int rc;

	if (out_parse_format(flag_str(fs, F_OUTPUT), &fmt, &err) < 0)
		return cli_usage_error(cmd, "%s", err.msg);
	if (fs->nargs > 1)
		return cli_usage_error(cmd, "restore get takes at most one NAME");
	if (cli_open_kube(fs, &k) < 0)
		return CLI_EXIT_FAIL;
	memset(&g, 0, sizeof g);
	g.now = time_now_us();
	g.t = out_table_new((const char *[]){ "NAME", "BACKUP", "STATUS",
	    "ITEMS", "ERRORS", "WARNINGS", "HOLDER", "AGE", NULL });
	if (fmt != OUT_TABLE)
		g.items = cJSON_CreateArray();
	if (fs->nargs == 1) {
		rc = cli_get_named(k, &gvr_restores, ns, "restore", fs->args[0],
		    &one);
		if (rc != 0)
			goto out;
		if (fmt != OUT_TABLE) {
			rc = out_print_doc(stdout, fmt, one, &err) < 0 ?
			    cli_fail("%s", err.msg) : CLI_EXIT_OK;
			goto out;
		}
		table_row(&g, one);
	} else {
		rc = kube_list(k, &gvr_restores, ns, NULL, get_cb, &g, NULL, &err);
		if (rc < 0) {
			rc = cli_fail("listing restores: %s", err.msg);
			goto out;
		}
		if (fmt != OUT_TABLE) {
			cJSON *list;
			size_t n = (size_t)cJSON_GetArraySize(g.items);
			cJSON **v = xcalloc(n + 1, sizeof *v);
			size_t i = 0;
			cJSON *it;

			cJSON_ArrayForEach(it, g.items)
				v[i++] = it;
			list = out_list_wrap(v, n);
			free(v);
			rc = out_print_doc(stdout, fmt, list, &err) < 0 ?
			    cli_fail("%s", err.msg) : CLI_EXIT_OK;
			cJSON_Delete(list);
			goto out;
		}
	}
	if (out_table_rows(g.t) == 0)
		fprintf(stderr, "No restores found in namespace %s.\n", ns);
	else
		out_table_print(g.t, stdout);
	rc = CLI_EXIT_OK;
out:
	out_table_free(g.t);
	cJSON_Delete(g.items);
	cJSON_Delete(one);
	kube_free(k);
	return rc;
}

/* The Restore and its backup's location (for the files under restores/). */
static int
open_restore(const struct cli_command *cmd, struct flagset *fs,
    struct kube **k, cJSON **r, struct bsl **loc, char **prefix)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *ns = flag_str(fs, F_NAMESPACE);
	cJSON *b = NULL;
	int rc;

	*k = NULL;
	*r = NULL;
	*loc = NULL;
	*prefix = NULL;
	if (fs->nargs != 1)
		return cli_usage_error(cmd, "needs exactly one NAME");
	if (cli_open_kube(fs, k) < 0)
		return CLI_EXIT_FAIL;
	rc = cli_get_named(*k, &gvr_restores, ns, "restore", fs->args[0], r);
	if (rc != 0)
		return rc;
	rc = kube_get(*k, &gvr_backups, ns, json_str_or(*r, "spec.backupName",
	    ""), &b, &err);
	if (rc == 0)
		rc = bsl_open(*k, ns, json_str(b, "spec.storageLocation"), loc,
		    &err);
	if (rc == 0)
		*prefix = xstrdup(bsl_prefix(*loc));
	cJSON_Delete(b);
	if (rc < 0)
		return cli_fail("storage of restore %s: %s", fs->args[0], err.msg);
	return 0;
}

static void
print_results(const char *title, const cJSON *res)
{
	const cJSON *l, *m;
	int any = 0;

	printf("%s:\n", title);
	cJSON_ArrayForEach(l, json_get(res, "velero")) {
		char *e = esc(l->valuestring);

		printf("  cairn:     %s\n", e);
		free(e);
		any = 1;
	}
	cJSON_ArrayForEach(l, json_get(res, "cluster")) {
		char *e = esc(l->valuestring);

		printf("  cluster:   %s\n", e);
		free(e);
		any = 1;
	}
	cJSON_ArrayForEach(m, json_get(res, "namespaces")) {
		char *ns = esc(m->string);

		cJSON_ArrayForEach(l, m) {
			char *e = esc(l->valuestring);

			printf("  %s:  %s\n", ns, e);
			free(e);
			any = 1;
		}
		free(ns);
	}
	if (!any)
		printf("  <none>\n");
}

/* restores/NAME/restore-NAME-results.gz, parsed; NULL when not there. */
static cJSON *
restore_results(struct bsl *loc, const char *prefix, const char *name)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	char *key = layout_restore_key(prefix, name, LAYOUT_RESTORE_RESULTS);
	char *text = NULL;
	size_t len = 0;
	cJSON *res = NULL;

	if (key != NULL && store_get_gunzip(bsl_store(loc), key,
	    RS_CAP_RESULTS, &text, &len, &err) == 0)
		res = json_parse(text, len, NULL);
	free(text);
	free(key);
	return res;
}

static void
describe_restore(const cJSON *r)
{
	const cJSON *v;
	const char *fields[][2] = {
		{ "Name", "metadata.name" },
		{ "Namespace", "metadata.namespace" },
		{ "Backup", "spec.backupName" },
		{ "Schedule", "spec.scheduleName" },
		{ "Phase", "status.phase" },
		{ "Started", "status.startTimestamp" },
		{ "Completed", "status.completionTimestamp" },
		{ "Holder", "status.claim.holder" },
		{ "Worker", "status.claim.worker" },
		{ "Failure reason", "status.failureReason" },
		{ "Existing resource policy", "spec.existingResourcePolicy" },
	};

	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
		char *e;

		if (i == 3 && json_str(r, fields[i][1]) == NULL)
			continue;	/* no schedule: no line */
		e = esc(json_str_or(r, fields[i][1], "<none>"));
		printf("%-26s%s\n", fields[i][0], e);
		free(e);
	}
	printf("%-26s%lld\n", "Attempt", (long long)json_int(r,
	    "status.claim.attempt", 0));
	printf("%-26s%lld of %lld\n", "Items restored", (long long)json_int(r,
	    "status.progress.itemsRestored", 0), (long long)json_int(r,
	    "status.progress.totalItems", 0));
	printf("%-26s%lld\n%-26s%lld\n", "Warnings", (long long)json_int(r,
	    "status.warnings", 0), "Errors", (long long)json_int(r,
	    "status.errors", 0));
	if (json_get(r, "status.hookStatus") != NULL)
		printf("%-26s%lld run, %lld failed\n", "Hooks",
		    (long long)json_int(r, "status.hookStatus.hooksAttempted",
		    0), (long long)json_int(r, "status.hookStatus.hooksFailed",
		    0));
	cJSON_ArrayForEach(v, json_get(r, "status.validationErrors")) {
		char *e = esc(v->valuestring);

		printf("%-26s%s\n", "Validation error", e);
		free(e);
	}
	cJSON_ArrayForEach(v, json_get(r, "spec.namespaceMapping")) {
		char *a = esc(v->string), *b = esc(v->valuestring);

		printf("%-26s%s -> %s\n", "Namespace mapping", a, b);
		free(a);
		free(b);
	}
}

int
cmd_restore_describe(const struct cli_command *cmd, struct flagset *fs)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *ns = flag_str(fs, F_NAMESPACE);
	enum out_format fmt;
	struct kube *k;
	struct bsl *loc;
	cJSON *r, *res = NULL, *rl = NULL;
	char *prefix, *key = NULL;
	int rc;

	if (out_parse_format(flag_str(fs, F_OUTPUT), &fmt, &err) < 0)
		return cli_usage_error(cmd, "%s", err.msg);
	rc = open_restore(cmd, fs, &k, &r, &loc, &prefix);
	if (r == NULL)
		goto out;
	if (loc != NULL) {
		res = restore_results(loc, prefix, fs->args[0]);
		key = layout_restore_key(prefix, fs->args[0],
		    LAYOUT_RESTORE_RESOURCE_LIST);
		if (flag_bool(fs, F_DETAILS) && key != NULL &&
		    cli_resource_list(bsl_store(loc), key, &rl, &err) < 0)
			fprintf(stderr, "cairn: no resource list for restore %s "
			    "(%s): %s\n", fs->args[0], key, err.code ==
			    CAIRN_ENOTFOUND ? "it has not finished" : err.msg);
	}
	if (fmt != OUT_TABLE) {
		rc = cli_print_describe(fmt, "restore", r, "results", res,
		    cli_volume_objects(k, ns, 1, fs->args[0]), rl);
		goto out;
	}
	describe_restore(r);
	cli_describe_volumes(stdout, k, ns, 1, json_str_or(r, "metadata.name",
	    ""));
	if (res != NULL) {
		printf("\n");
		print_results("Warnings", json_get(res, "warnings"));
		print_results("Errors", json_get(res, "errors"));
	} else if (loc != NULL) {
		printf("\n(results not in storage yet)\n");
	}
	if (rl != NULL)
		cli_print_resource_list(stdout, rl);
	rc = CLI_EXIT_OK;
out:
	free(key);
	free(prefix);
	bsl_free(loc);
	cJSON_Delete(res);
	cJSON_Delete(rl);
	cJSON_Delete(r);
	kube_free(k);
	return rc;
}

struct gunzip {
	z_stream z;
	int bad;
};

static int
gunzip_write(void *arg, const void *p, size_t n)
{
	struct gunzip *g = arg;
	unsigned char out[65536];

	g->z.next_in = (Bytef *)(uintptr_t)p;
	g->z.avail_in = (uInt)n;
	while (g->z.avail_in > 0) {
		int zr;

		g->z.next_out = out;
		g->z.avail_out = sizeof out;
		zr = inflate(&g->z, Z_NO_FLUSH);
		if (zr != Z_OK && zr != Z_STREAM_END) {
			g->bad = 1;
			return -1;
		}
		fwrite(out, 1, sizeof out - g->z.avail_out, stdout);
		if (zr == Z_STREAM_END && g->z.avail_in > 0)
			inflateReset(&g->z);	/* next member */
		else if (zr == Z_STREAM_END)
			break;
	}
	return 0;
}

int
cmd_restore_logs(const struct cli_command *cmd, struct flagset *fs)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct gunzip g;
	struct kube *k;
	struct bsl *loc;
	cJSON *r;
	char *prefix, *key = NULL;
	int rc;

	rc = open_restore(cmd, fs, &k, &r, &loc, &prefix);
	if (rc != 0 || loc == NULL)
		goto out;
	key = layout_restore_key(prefix, fs->args[0], LAYOUT_RESTORE_LOGS);
	memset(&g, 0, sizeof g);
	if (key == NULL || inflateInit2(&g.z, 16 + MAX_WBITS) != Z_OK) {
		rc = cli_fail("cannot read logs of restore %s", fs->args[0]);
		goto out;
	}
	rc = store_get(bsl_store(loc), key, 0, -1, gunzip_write, &g, NULL, &err);
	fflush(stdout);
	inflateEnd(&g.z);
	if (rc == CAIRN_ENOTFOUND)
		rc = cli_fail("no logs for restore %s yet: it has not finished",
		    fs->args[0]);
	else if (rc < 0)
		rc = cli_fail("reading %s: %s", key, g.bad ? "not valid gzip" :
		    err.msg);
	else
		rc = CLI_EXIT_OK;
out:
	free(key);
	free(prefix);
	bsl_free(loc);
	cJSON_Delete(r);
	kube_free(k);
	return rc;
}
