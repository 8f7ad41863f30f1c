/*
 * cmd_schedule.c: `cairn schedule create|get|describe|pause|unpause|delete`.
 *
 * A Schedule is a cron expression plus a Backup spec template; the
 * servers turn each due time into a Backup named
 * `<schedule>-<YYYYMMDDhhmmss>` (engine/schedule.h). The CLI only writes
 * and reads Schedule objects: the cron expression and the label selector
 * are checked here first (exit 2) with the same parser the servers use.
 */
#include "config.h"
#include "cmd/cli.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/jsonutil.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"
#include "cmd/output.h"
#include "engine/cron.h"
#include "engine/schedule.h"
#include "kube/kube.h"
#include "kube/label.h"

static const struct kube_gvr sched_gvr = { "cairn.io", "v1", "schedules" };
static const struct kube_gvr backups_gvr = { "cairn.io", "v1", "backups" };

int
cmd_schedule_create(const struct cli_command *cmd, struct flagset *fs)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *ns = flag_str(fs, F_NAMESPACE), *expr;
	struct cron *c = NULL;
	struct kube *k = NULL;
	cJSON *s = NULL, *md, *spec, *tmpl, *labels = NULL;
	int rc;

	if (fs->nargs != 1)
		return cli_usage_error(cmd, "schedule create needs one NAME");
	if (strlen(fs->args[0]) > SCHEDULE_NAME_MAX)
		return cli_usage_error(cmd, "schedule names are at most %d "
		    "characters (the name labels its backups)",
		    SCHEDULE_NAME_MAX);
	expr = flag_str(fs, F_SCHEDULE);
	if (expr == NULL)
		return cli_usage_error(cmd, "--schedule is required, e.g. "
		    "--schedule \"0 */6 * * *\" or --schedule \"@every 6h\"");
	if (cron_parse(expr, &c, &err) < 0)
		return cli_usage_error(cmd, "--schedule: %s", err.msg);
	cron_free(c);
	rc = cli_labels(cmd, fs, &labels);
	if (rc != 0)
		return rc;
	s = cJSON_CreateObject();
	cJSON_AddStringToObject(s, "apiVersion", "cairn.io/v1");
	cJSON_AddStringToObject(s, "kind", "Schedule");
	md = cJSON_AddObjectToObject(s, "metadata");
	cJSON_AddStringToObject(md, "name", fs->args[0]);
	cJSON_AddStringToObject(md, "namespace", ns);
	spec = cJSON_AddObjectToObject(s, "spec");
	cJSON_AddStringToObject(spec, "schedule", expr);
	tmpl = cJSON_AddObjectToObject(spec, "template");
	rc = cli_backup_spec(cmd, fs, tmpl);
	if (rc != 0)
		goto out;
	/* Velero: on the Schedule, and in its template for every Backup */
	if (labels != NULL) {
		json_set_item(tmpl, "metadata.labels", cJSON_Duplicate(labels, 1));
		cJSON_AddItemToObject(md, "labels", labels);
		labels = NULL;
	}
	cJSON_AddBoolToObject(spec, "paused", flag_bool(fs, F_PAUSED));
	if (flag_bool(fs, F_SKIP_IMMEDIATELY))
		cJSON_AddTrueToObject(spec, "skipImmediately");
	if (flag_bool(fs, F_USE_OWNER_REFERENCES))
		cJSON_AddTrueToObject(spec, "useOwnerReferencesInBackup");
	if (cli_open_kube(fs, &k) < 0) {
		rc = CLI_EXIT_FAIL;
		goto out;
	}
	rc = kube_create(k, &sched_gvr, ns, s, NULL, &err);
	if (rc == CAIRN_EEXIST)
		rc = cli_fail("schedule \"%s\" already exists in namespace %s",
		    fs->args[0], ns);
	else if (rc < 0)
		rc = cli_fail("%s", err.msg);
	else {
		printf("Schedule \"%s\" created (%s, UTC)%s.\n", fs->args[0],
		    expr, flag_bool(fs, F_PAUSED) ? ", paused" : "");
		rc = CLI_EXIT_OK;
	}
out:
	cJSON_Delete(labels);
	cJSON_Delete(s);
	kube_free(k);
	return rc;
}

int
cmd_schedule_get(const struct cli_command *cmd, struct flagset *fs)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *ns = flag_str(fs, F_NAMESPACE);
	enum out_format fmt;
	struct cli_collect c = { NULL, 0, 0, 0 };
	struct kube *k = NULL;
	int rc;

	if (fs->nargs > 1)
		return cli_usage_error(cmd, "schedule get takes at most one NAME");
	if (out_parse_format(flag_str(fs, F_OUTPUT), &fmt, &err) < 0)
		return cli_usage_error(cmd, "%s", err.msg);
	if (cli_open_kube(fs, &k) < 0)
		return CLI_EXIT_FAIL;
	if (fs->nargs == 1) {
		cJSON *one = NULL;

		rc = cli_get_named(k, &sched_gvr, ns, "schedule", fs->args[0],
		    &one);
		if (rc != 0)
			goto out;
		cli_collect_item(&c, one);
	} else if (kube_list(k, &sched_gvr, ns, NULL, cli_collect_item, &c,
	    NULL, &err) < 0) {
		rc = cli_fail("%s", err.msg);
		goto out;
	}
	if (fmt != OUT_TABLE) {
		cJSON *doc = fs->nargs == 1 ? cJSON_Duplicate(c.items[0], 1) :
		    out_list_wrap(c.items, c.n);

		rc = out_print_doc(stdout, fmt, doc, &err) < 0 ?
		    cli_fail("%s", err.msg) : CLI_EXIT_OK;
		cJSON_Delete(doc);
		goto out;
	}
	{
		struct out_table *t = out_table_new((const char *[]){ "NAME",
		    "STATUS", "SCHEDULE", "LAST BACKUP", "TTL", "PAUSED", "AGE",
		    NULL });
		int64_t now = time_now_us();

		for (size_t i = 0; i < c.n; i++) {
			char last[OUT_AGE_MAX], age[OUT_AGE_MAX];
			const cJSON *s = c.items[i];

			if (json_str(s, "status.lastBackup") != NULL)
				out_age(json_str(s, "status.lastBackup"), now, last);
			else
				snprintf(last, sizeof last, "n/a");
			out_age(json_str(s, "metadata.creationTimestamp"), now, age);
			out_table_row(t, (const char *[]){
			    json_str_or(s, "metadata.name", ""),
			    json_str_or(s, "status.phase", "New"),
			    json_str_or(s, "spec.schedule", ""), last,
			    json_str_or(s, "spec.template.ttl", "720h"),
			    json_bool(s, "spec.paused", 0) ? "true" : "false",
			    age });
		}
		if (out_table_rows(t) == 0)
			fprintf(stderr, "No schedules found in namespace %s.\n", ns);
		else
			out_table_print(t, stdout);
		out_table_free(t);
	}
	rc = CLI_EXIT_OK;
out:
	cli_collect_free(&c);
	kube_free(k);
	return rc;
}

int
cmd_schedule_describe(const struct cli_command *cmd, struct flagset *fs)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *ns = flag_str(fs, F_NAMESPACE);
	struct cli_collect bk = { NULL, 0, 0, 0 };
	struct kube_list_opts lo;
	struct kube *k = NULL;
	struct cron *c = NULL;
	cJSON *s = NULL;
	char *sel = NULL, *tmpl = NULL, *lv, ts[TIME_STR_MAX];
	const cJSON *e;
	int rc;

	if (fs->nargs != 1)
		return cli_usage_error(cmd, "schedule describe needs one NAME");
	if (cli_open_kube(fs, &k) < 0)
		return CLI_EXIT_FAIL;
	rc = kube_get(k, &sched_gvr, ns, fs->args[0], &s, &err);
	if (rc < 0) {
		rc = cli_fail("%s", rc == CAIRN_ENOTFOUND ? "schedule not found" :
		    err.msg);
		goto out;
	}
	printf("Name:         %s\n", json_str_or(s, "metadata.name", ""));
	printf("Namespace:    %s\n", ns);
	printf("Phase:        %s\n", json_str_or(s, "status.phase", "New"));
	cJSON_ArrayForEach(e, json_get(s, "status.validationErrors"))
		if (cJSON_IsString(e))
			printf("  Validation error: %s\n", e->valuestring);
	printf("Schedule:     %s (UTC)\n", json_str_or(s, "spec.schedule", ""));
	printf("Paused:       %s\n", json_bool(s, "spec.paused", 0) ? "true" :
	    "false");
	printf("Skip at once: %s\n", json_bool(s, "spec.skipImmediately", 0) ?
	    "true" : "false");
	printf("Owner refs:   %s\n", json_bool(s,
	    "spec.useOwnerReferencesInBackup", 0) ? "true" : "false");
	printf("Last backup:  %s\n", json_str_or(s, "status.lastBackup", "<none>"));
	printf("Last skipped: %s\n", json_str_or(s, "status.lastSkipped",
	    "<none>"));
	if (cron_parse(json_str_or(s, "spec.schedule", ""), &c, NULL) == 0 &&
	    !json_bool(s, "spec.paused", 0)) {
		const char *lb = json_str(s, "status.lastBackup");
		int64_t base = time_now_us(), n;

		if (lb != NULL)
			(void)time_parse(lb, &base);
		n = cron_next(c, base);
		if (n >= 0) {
			time_format_rfc3339(n < time_now_us() ? time_now_us() : n,
			    ts);
			printf("Next backup:  %s\n", ts);
		}
	}
	tmpl = json_print(json_get(s, "spec.template"));
	printf("Template:     %s\n", tmpl != NULL ? tmpl : "{}");
	memset(&lo, 0, sizeof lo);
	lv = kube_label_value(fs->args[0]);
	sel = xasprintf("%s=%s", SCHEDULE_LABEL, lv);
	free(lv);
	lo.label_selector = sel;
	if (kube_list(k, &backups_gvr, ns, &lo, cli_collect_item, &bk, NULL,
	    &err) == 0) {
		printf("Backups:      %zu\n", bk.n);
		for (size_t i = 0; i < bk.n; i++)
			printf("  %s  %s\n", json_str_or(bk.items[i], "metadata.name",
			    ""), json_str_or(bk.items[i], "status.phase", "New"));
	}
	rc = CLI_EXIT_OK;
out:
	cron_free(c);
	cli_collect_free(&bk);
	free(sel);
	free(tmpl);
	cJSON_Delete(s);
	kube_free(k);
	return rc;
}

static int
patch_schedule(const struct cli_command *cmd, struct flagset *fs,
	const char *patch, const char *done)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct kube *k = NULL;
	int rc;

	if (fs->nargs != 1)
		return cli_usage_error(cmd, "needs one schedule NAME");
	if (cli_open_kube(fs, &k) < 0)
		return CLI_EXIT_FAIL;
	rc = kube_patch(k, &sched_gvr, flag_str(fs, F_NAMESPACE), fs->args[0],
	    NULL, KUBE_PATCH_MERGE, patch, NULL, &err);
	if (rc == CAIRN_ENOTFOUND)
		rc = cli_fail("schedule \"%s\" not found in namespace %s",
		    fs->args[0], flag_str(fs, F_NAMESPACE));
	else if (rc < 0)
		rc = cli_fail("%s", err.msg);
	else {
		printf("Schedule \"%s\" %s.\n", fs->args[0], done);
		rc = CLI_EXIT_OK;
	}
	kube_free(k);
	return rc;
}

int
cmd_schedule_pause(const struct cli_command *cmd, struct flagset *fs)
{
	return patch_schedule(cmd, fs, "{\"spec\":{\"paused\":true}}", "paused");
}

int
cmd_schedule_unpause(const struct cli_command *cmd, struct flagset *fs)
{
	if (flag_bool(fs, F_SKIP_IMMEDIATELY))
		return patch_schedule(cmd, fs, "{\"spec\":{\"paused\":false,"
		    "\"skipImmediately\":true}}", "unpaused (next backup at the "
		    "next due time)");
	return patch_schedule(cmd, fs, "{\"spec\":{\"paused\":false}}",
	    "unpaused");
}

int
cmd_schedule_delete(const struct cli_command *cmd, struct flagset *fs)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct kube *k = NULL;
	int rc;

	if (fs->nargs != 1)
		return cli_usage_error(cmd, "schedule delete needs one NAME");
	if (!flag_bool(fs, F_CONFIRM)) {
		char line[16];

		if (!isatty(STDIN_FILENO))
			return cli_usage_error(cmd, "deleting schedule %s needs "
			    "--confirm when not asked on a terminal", fs->args[0]);
		fprintf(stderr, "Delete schedule %s? Its backups are kept "
		    "[y/N] ", fs->args[0]);
		if (fgets(line, sizeof line, stdin) == NULL ||
		    (line[0] != 'y' && line[0] != 'Y')) {
			fprintf(stderr, "Nothing deleted.\n");
			return CLI_EXIT_FAIL;
		}
	}
	if (cli_open_kube(fs, &k) < 0)
		return CLI_EXIT_FAIL;
	rc = kube_delete(k, &sched_gvr, flag_str(fs, F_NAMESPACE), fs->args[0],
	    NULL, NULL, &err);
	if (rc == CAIRN_ENOTFOUND)
		rc = cli_fail("schedule \"%s\" not found", fs->args[0]);
	else if (rc < 0)
		rc = cli_fail("%s", err.msg);
	else {
		printf("Schedule \"%s\" deleted; its backups are kept.\n",
		    fs->args[0]);
		rc = CLI_EXIT_OK;
	}
	kube_free(k);
	return rc;
}
