/*
 * describe_volumes.c: the "Volumes:" section of `cairn backup describe`
 * (and of `restore describe`): one line per VolumePluginBackup /
 * VolumePluginRestore of the item, with a bar, bytes done of total (and
 * the bytes sent, for the built-in mover's deduplicated copies), the
 * average rate since the operation started, its node and mover, and the
 * message of a failed one. Reads the objects by their label
 * (cairn.io/backup-name or cairn.io/restore-name).
 */
#include "config.h"
#include "cmd/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/jsonutil.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"
#include "cmd/output.h"
#include "kube/kube.h"
#include "kube/label.h"

#define DV_BAR 20

static const struct kube_gvr dv_vpb = { "cairn.io", "v1", "volumepluginbackups" };
static const struct kube_gvr dv_vpr = { "cairn.io", "v1", "volumepluginrestores" };

struct dv_rows {
	struct out_table *t;
	FILE *f;
	struct buf notes;	/* messages of failed operations */
	int n;
	const char *owner;	/* the item's name: labels are cut at 63 bytes */
	int restore;
};

static void
dv_text(const char *s, char *out, size_t n)
{
	struct buf b;

	buf_init(&b, 1024);
	str_escape_text(&b, s != NULL ? s : "");
	snprintf(out, n, "%s", buf_cstr(&b));
	buf_free(&b);
}

static int
dv_row(void *arg, cJSON *o)
{
	struct dv_rows *r = arg;
	int64_t done = json_int(o, "status.progress.bytesDone", 0);
	int64_t total = json_int(o, "status.progress.totalBytes", 0);
	int64_t start = 0, end = 0;
	char bar[DV_BAR + 16], bytes[80], rate[48], d[32], t[32], r32[32];
	char vol[128], phase[40], node[80], prov[80];
	const char *owner = json_str_or(o, r->restore ? "spec.restoreName" :
	    "spec.backup", "");
	int fill, pct;

	if (strcmp(owner, r->owner) != 0)
		return 0;
	pct = total > 0 ? (int)(done * 100 / total) : (strcmp(json_str_or(o,
	    "status.phase", ""), "Completed") == 0 ? 100 : 0);
	if (pct > 100)
		pct = 100;
	fill = pct * DV_BAR / 100;
	bar[0] = '[';
	for (int i = 0; i < DV_BAR; i++)
		bar[1 + i] = i < fill ? '#' : '.';
	snprintf(bar + 1 + DV_BAR, sizeof bar - 1 - DV_BAR, "] %3d%%", pct);
	fmt_bytes((uint64_t)done, d);
	fmt_bytes((uint64_t)total, t);
	snprintf(bytes, sizeof bytes, "%s / %s", d, total > 0 ? t : "?");
	if (json_get(o, "status.progress.bytesUploaded") != NULL) {
		/* a deduplicated copy: what it sent, beside what it covered */
		fmt_bytes((uint64_t)json_int(o, "status.progress.bytesUploaded",
		    0), r32);
		snprintf(bytes + strlen(bytes), sizeof bytes - strlen(bytes),
		    " (%s sent)", r32);
	}
	snprintf(rate, sizeof rate, "-");
	if (time_parse(json_str_or(o, "status.startTimestamp", ""), &start) ==
	    0) {
		if (time_parse(json_str_or(o, "status.completionTimestamp", ""),
		    &end) < 0)
			end = time_now_us();
		if (end - start >= TIME_US_PER_SEC) {
			fmt_bytes((uint64_t)(done * TIME_US_PER_SEC /
			    (end - start)), r32);
			snprintf(rate, sizeof rate, "%s/s", r32);
		}
	}
	/* indented as its header, "  VOLUME" */
	vol[0] = vol[1] = ' ';
	dv_text(json_str_or(o, "spec.volume", "?"), vol + 2, sizeof vol - 2);
	dv_text(json_str_or(o, "status.phase", "New"), phase, sizeof phase);
	dv_text(json_str_or(o, "spec.node", "-"), node, sizeof node);
	dv_text(json_str_or(o, "spec.provider", "?"), prov, sizeof prov);
	out_table_row(r->t, (const char *const[]){ vol, phase, bar, bytes,
	    rate, node, prov });
	if (json_str(o, "status.message") != NULL) {
		buf_printf(&r->notes, "%s: ", vol);
		str_escape_text(&r->notes, json_str(o, "status.message"));
		buf_putc(&r->notes, '\n');
	}
	r->n++;
	return 0;
}

struct dv_objs {
	cJSON *a;
	const char *owner;
	int restore;
};

static int
dv_obj(void *arg, cJSON *o)
{
	struct dv_objs *d = arg;

	if (strcmp(json_str_or(o, d->restore ? "spec.restoreName" :
	    "spec.backup", ""), d->owner) != 0)
		return 0;
	cJSON_AddItemToArray(d->a, o);
	return KUBE_TAKE;
}

cJSON *
cli_volume_objects(struct kube *k, const char *ns, int restore,
    const char *name)
{
	struct kube_list_opts lo;
	struct dv_objs d = { cJSON_CreateArray(), name, restore };
	char *lv = kube_label_value(name), *sel;
	int rc;

	sel = xasprintf("%s=%s", restore ? "cairn.io/restore-name" :
	    "cairn.io/backup-name", lv);
	memset(&lo, 0, sizeof lo);
	lo.label_selector = sel;
	rc = kube_list(k, restore ? &dv_vpr : &dv_vpb, ns, &lo, dv_obj, &d,
	    NULL, NULL);
	free(sel);
	free(lv);
	if (rc < 0) {
		cJSON_Delete(d.a);
		return NULL;
	}
	return d.a;
}

void
cli_describe_volumes(FILE *f, struct kube *k, const char *ns, int restore,
    const char *name)
{
	static const char *const hdr[] = { "  VOLUME", "PHASE", "PROGRESS",
	    "BYTES", "RATE", "NODE", "MOVER", NULL };
	struct kube_list_opts lo;
	struct dv_rows r;
	char *sel, *lv;
	int rc;

	memset(&r, 0, sizeof r);
	r.f = f;
	r.owner = name;
	r.restore = restore;
	r.t = out_table_new(hdr);
	buf_init(&r.notes, 64u << 10);
	lv = kube_label_value(name);
	sel = xasprintf("%s=%s", restore ? "cairn.io/restore-name" :
	    "cairn.io/backup-name", lv);
	memset(&lo, 0, sizeof lo);
	lo.label_selector = sel;
	rc = kube_list(k, restore ? &dv_vpr : &dv_vpb, ns, &lo,
	    dv_row, &r, NULL, NULL);
	fprintf(f, "\nVolumes:");
	if (rc < 0)
		fprintf(f, " (cannot list them)\n");
	else if (r.n == 0)
		fprintf(f, " <none>\n");
	else {
		fprintf(f, "\n");
		out_table_print(r.t, f);
		if (r.notes.len > 0)
			fprintf(f, "Volume messages:\n%s", buf_cstr(&r.notes));
	}
	out_table_free(r.t);
	buf_free(&r.notes);
	free(sel);
	free(lv);
}
