/*
 * cmd_backup.c: `cairn backup create|get|describe|logs|download|delete`,
 * Velero's verbs over cairn.io/v1 Backups.
 *
 * The CLI never does a server's work: `create` writes a Backup object and
 * (with --wait) follows its status until a final phase; the numbers shown
 * are the ones the owning server publishes in status.progress, the rate is
 * measured here. A Backup that stays New with no claim is reported as
 * waiting, since that is what a user sees when no `cairn server` runs (or
 * none whose --shard-selector matches).
 *
 * `logs`, `download` and `delete` go to object storage directly: the
 * Backup's storage location (spec.storageLocation, else the location
 * marked default) is read from the cluster and opened here, its Secret
 * credentials read through the API. Keys follow Velero's layout
 * (backups/<name>/...). `delete` deletes what the backup stored exactly as
 * the server's collector does (engine/gc.h gc_clean_backup(): volume
 * snapshots through the plugins, VolumePluginBackups, every key under
 * backups/<name>/; a ReadOnly location is refused, nothing deleted) and
 * the Backup object last, so a failure half way leaves the object to
 * retry with. A Backup is created with the cleanup finalizer
 * (engine/gc.h) so that `kubectl delete` goes through the server's GC;
 * `delete` has cleaned storage itself, so it removes the finalizer and the
 * object goes at once, with or without a running server.
 *
 * Following a backup polls the object (GET every 500 ms): the status
 * changes at most once a second, a poll keeps the "waiting" timer and the
 * rate display simple, and it survives API server restarts unchanged.
 */
#include "config.h"
#include "cmd/cli.h"
#include "cmd/output.h"
#include "cmd/progress.h"
#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"
#include "engine/bsl.h"
#include "engine/gc.h"
#include "engine/volumes.h"
#include "kube/kube.h"
#include "storage/layout.h"
#include "storage/location.h"
#include "storage/store.h"

#include <stdatomic.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/evp.h>

#define BK_POLL_US		500000		/* --wait: one GET per interval */
#define BK_UNCLAIMED_US		(3 * TIME_US_PER_SEC)	/* New this long: say waiting */
#define BK_NAME_MAX		253		/* DNS-1123 subdomain */
#define BK_CAP_LIST_ITEMS	100000		/* backups printed by get */

static const struct kube_gvr gvr_backups = { "cairn.io", "v1", "backups" };
static const struct kube_gvr gvr_bsl = { "cairn.io", "v1",
	"backupstoragelocations" };

static atomic_int bk_interrupted;

static void
bk_on_signal(int sig)
{
	(void)sig;
	bk_interrupted = 1;
}

/* ---- small helpers ---------------------------------------------------- */

/*
 * Untrusted text from the cluster (names, labels, messages) is printed
 * through esc(): control characters escaped, so a value cannot move the
 * cursor or forge a line. The result lives in a small ring of buffers
 * (the CLI is single-threaded): valid for the next BK_ESC_RING - 1 calls.
 */
#define BK_ESC_RING	8
#define BK_ESC_MAX	(64u << 10)	/* bytes of one escaped value */

static struct buf bk_esc[BK_ESC_RING];
static int bk_esc_init, bk_esc_next;

static const char *
esc(const char *s)
{
	struct buf *b;

	if (s == NULL)
		return "";
	if (!bk_esc_init) {
		for (int i = 0; i < BK_ESC_RING; i++)
			buf_init(&bk_esc[i], BK_ESC_MAX);
		bk_esc_init = 1;
	}
	b = &bk_esc[bk_esc_next];
	bk_esc_next = (bk_esc_next + 1) % BK_ESC_RING;
	buf_reset(b);
	if (str_escape_text(b, s) < 0) {
		buf_reset(b);
		buf_puts(b, "<value too long>");
	}
	return buf_cstr(b);
}

static void
esc_free(void)
{
	for (int i = 0; bk_esc_init && i < BK_ESC_RING; i++)
		buf_free(&bk_esc[i]);
	bk_esc_init = 0;
}

static int
is_final_phase(const char *phase)
{
	static const char *const finals[] = { "Completed", "PartiallyFailed",
		"Failed", "FailedValidation", "Deleting", NULL };

	for (size_t i = 0; finals[i] != NULL; i++)
		if (phase != NULL && strcmp(phase, finals[i]) == 0)
			return 1;
	return 0;
}

/* New (or no phase yet) and nobody holds it. */
static int
is_unclaimed(const cJSON *b)
{
	const char *phase = json_str(b, "status.phase");
	const char *holder = json_str(b, "status.claim.holder");

	return (phase == NULL || strcmp(phase, "New") == 0 ||
	    strcmp(phase, "Queued") == 0) &&
	    (holder == NULL || holder[0] == '\0');
}

/* Phase as shown to people: "Waiting" for unclaimed New backups. */
static const char *
shown_phase(const cJSON *b)
{
	if (is_unclaimed(b))
		return "Waiting";
	return json_str_or(b, "status.phase", "New");
}

static void
fmt_count(const cJSON *b, const char *path, char out[32])
{
	cJSON *n = json_get(b, path);

	if (cJSON_IsNumber(n))
		snprintf(out, 32, "%lld", (long long)n->valuedouble);
	else
		snprintf(out, 32, "-");
}

/* "120/500", "120/?", "-". */
static void
fmt_items(const cJSON *b, char out[64])
{
	cJSON *done = json_get(b, "status.progress.itemsBackedUp");
	cJSON *total = json_get(b, "status.progress.totalItems");

	if (!cJSON_IsNumber(done) && !cJSON_IsNumber(total))
		snprintf(out, 64, "-");
	else if (cJSON_IsNumber(total) && total->valuedouble > 0)
		snprintf(out, 64, "%lld/%lld",
		    (long long)(cJSON_IsNumber(done) ? done->valuedouble : 0),
		    (long long)total->valuedouble);
	else
		snprintf(out, 64, "%lld/?",
		    (long long)(cJSON_IsNumber(done) ? done->valuedouble : 0));
}

/* Time until an RFC 3339 timestamp: "29d", "expired", "n/a". */
static void
fmt_expires(const char *ts, int64_t now, char out[OUT_AGE_MAX])
{
	int64_t t;

	if (ts == NULL || time_parse(ts, &t) < 0)
		snprintf(out, OUT_AGE_MAX, "n/a");
	else if (t <= now)
		snprintf(out, OUT_AGE_MAX, "expired");
	else
		out_duration(t - now, out);
}

/* A metav1.LabelSelector object as selector text, for people. */
static void
selector_text(const cJSON *sel, struct buf *b)
{
	const cJSON *c;
	const char *sep = "";

	if (!cJSON_IsObject(sel)) {
		buf_puts(b, "<none>");
		return;
	}
	cJSON_ArrayForEach(c, cJSON_GetObjectItem(sel, "matchLabels")) {
		buf_printf(b, "%s%s=%s", sep, c->string,
		    cJSON_IsString(c) ? c->valuestring : "");
		sep = ",";
	}
	cJSON_ArrayForEach(c, cJSON_GetObjectItem(sel, "matchExpressions")) {
		const char *key = json_str_or(c, "key", "");
		const char *op = json_str_or(c, "operator", "");
		const cJSON *v;
		const char *vsep = "";

		buf_puts(b, sep);
		sep = ",";
		if (strcmp(op, "Exists") == 0) {
			buf_puts(b, key);
			continue;
		}
		if (strcmp(op, "DoesNotExist") == 0) {
			buf_printf(b, "!%s", key);
			continue;
		}
		buf_printf(b, "%s %s (", key, strcmp(op, "NotIn") == 0 ?
		    "notin" : "in");
		cJSON_ArrayForEach(v, cJSON_GetObjectItem(c, "values")) {
			buf_printf(b, "%s%s", vsep,
			    cJSON_IsString(v) ? v->valuestring : "");
			vsep = ",";
		}
		buf_putc(b, ')');
	}
	if (sep[0] == '\0')
		buf_puts(b, "<none>");
}

/* ---- storage locations ------------------------------------------------ */

/*
 * The Backup's storage location, opened by engine/bsl.h exactly as the
 * server opens it (spec.storageLocation, else the one marked default; the
 * credentials Secret read through the API). The other fields are borrowed
 * from bsl.
 */
struct bk_location {
	struct bsl *bsl;	/* owned */
	struct store *store;
	const char *name;	/* the BackupStorageLocation's name */
	const char *prefix;	/* key prefix, "" for none (layout.h adds the /) */
};

static void
location_free(struct bk_location *loc)
{
	bsl_free(loc->bsl);
	memset(loc, 0, sizeof *loc);
}

/* Open the storage location of backup b; loc is filled on success. */
static int
bk_location_open(struct kube *k, const char *ns, const cJSON *b,
    struct bk_location *loc, struct cairn_err *err)
{
	int rc;

	memset(loc, 0, sizeof *loc);
	rc = bsl_open(k, ns, json_str(b, "spec.storageLocation"), &loc->bsl,
	    err);
	if (rc < 0)
		return rc;
	loc->store = bsl_store(loc->bsl);
	loc->name = bsl_name(loc->bsl);
	loc->prefix = bsl_prefix(loc->bsl);
	return 0;
}

/* ---- backup create ---------------------------------------------------- */

/*
 * Build the Backup object from the flags. Returns 0 with *out owned, or
 * the exit code (2) after printing the usage error.
 */
static int
build_backup(const struct cli_command *cmd, const struct flagset *fs,
    const char *name, const char *ns, cJSON **out)
{
	cJSON *b, *meta, *labels;
	int rc;

	rc = cli_labels(cmd, fs, &labels);
	if (rc != 0)
		return rc;
	b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "apiVersion", "cairn.io/v1");
	cJSON_AddStringToObject(b, "kind", "Backup");
	meta = cJSON_AddObjectToObject(b, "metadata");
	cJSON_AddStringToObject(meta, "name", name);
	cJSON_AddStringToObject(meta, "namespace", ns);
	/* on the object from the start: --shard-selector sees them at once */
	if (labels != NULL)
		cJSON_AddItemToObject(meta, "labels", labels);
	/* Storage is cleaned before the object goes, however it is deleted. */
	cJSON_AddItemToArray(cJSON_AddArrayToObject(meta, "finalizers"),
	    cJSON_CreateString(GC_FINALIZER));
	rc = cli_backup_spec(cmd, fs, cJSON_AddObjectToObject(b, "spec"));
	if (rc != 0) {
		cJSON_Delete(b);
		return rc;
	}
	*out = b;
	return 0;
}

/* The detail text of a running backup: holder and attempt. */
static void
claim_detail(const cJSON *b, char *out, size_t len)
{
	const char *holder = json_str(b, "status.claim.holder");
	int64_t attempt = json_int(b, "status.claim.attempt", 0);

	if (holder == NULL || holder[0] == '\0')
		out[0] = '\0';
	else if (attempt > 0)
		snprintf(out, len, "holder %s, attempt %lld", esc(holder),
		    (long long)attempt);
	else
		snprintf(out, len, "holder %s", esc(holder));
}

/* One line about the end of a backup; returns the exit code. */
static int
report_final(const char *name, const cJSON *b)
{
	const char *phase = json_str_or(b, "status.phase", "");
	char items[64], sz[32];

	fmt_items(b, items);
	fmt_bytes((uint64_t)json_int(b, "status.progress.bytesDone", 0), sz);
	if (strcmp(phase, "Completed") == 0) {
		printf("Backup %s completed: %s items, %s stored. Run 'cairn "
		    "backup describe %s' or 'cairn backup logs %s' for details.\n",
		    name, items, sz, name, name);
		return CLI_EXIT_OK;
	}
	if (strcmp(phase, "PartiallyFailed") == 0)
		return cli_fail("backup %s partially failed: %lld errors, %lld "
		    "warnings, %s items (see 'cairn backup logs %s')", name,
		    (long long)json_int(b, "status.errors", 0),
		    (long long)json_int(b, "status.warnings", 0), items, name);
	if (strcmp(phase, "FailedValidation") == 0) {
		struct buf msg;
		const cJSON *e;
		const char *sep = "";
		int rc;

		buf_init(&msg, 8192);
		cJSON_ArrayForEach(e, json_get(b, "status.validationErrors")) {
			if (cJSON_IsString(e)) {
				buf_printf(&msg, "%s%s", sep,
				    esc(e->valuestring));
				sep = "; ";
			}
		}
		rc = cli_fail("backup %s failed validation: %s", name,
		    msg.len ? buf_cstr(&msg) : "(no message)");
		buf_free(&msg);
		return rc;
	}
	if (strcmp(phase, "Failed") == 0)
		return cli_fail("backup %s failed: %s", name,
		    esc(json_str_or(b, "status.failureReason",
		    "(no reason given)")));
	return cli_fail("backup %s ended in phase %s", name, esc(phase));
}

/*
 * Follow backup name until a final phase, drawing progress on stderr.
 * Returns the exit code.
 */
static int
follow_backup(struct kube *k, const char *ns, const char *name)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct progress *p;
	struct sigaction sa, old_int, old_term;
	char label[BK_NAME_MAX + 16], detail[256];
	int64_t start = time_mono_us();
	int said_waiting = 0, said_trouble = 0, rc;
	cJSON *b = NULL;

	snprintf(label, sizeof label, "backup %s", name);
	p = progress_new(stderr, PROGRESS_AUTO, label);
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = bk_on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	for (;;) {
		struct progress_state st;

		if (bk_interrupted) {
			progress_end(p, NULL);
			rc = cli_fail("stopped waiting; backup %s goes on (follow "
			    "it with 'cairn backup describe %s')", name, name);
			break;
		}
		cJSON_Delete(b);
		b = NULL;
		rc = kube_get(k, &gvr_backups, ns, name, &b, &err);
		if (rc == CAIRN_ENOTFOUND || (rc == 0 && json_get(b,
		    "metadata.deletionTimestamp") != NULL)) {
			/* Gone, or going once its files are cleaned. */
			progress_end(p, NULL);
			rc = cli_fail("backup %s was deleted while waiting", name);
			break;
		}
		if (rc == CAIRN_ENET || rc == CAIRN_ETIMEOUT ||
		    rc == CAIRN_ESERVER || rc == CAIRN_EBUSY) {
			if (!said_trouble)
				progress_note(p, "cannot read backup %s (%s); "
				    "retrying", name, err.msg);
			said_trouble = 1;
			time_sleep_us(BK_POLL_US * 2, &bk_interrupted);
			continue;
		}
		if (rc < 0) {
			progress_end(p, NULL);
			rc = cli_fail("%s", err.msg);
			break;
		}
		said_trouble = 0;
		claim_detail(b, detail, sizeof detail);
		if (is_unclaimed(b) && time_mono_us() - start >= BK_UNCLAIMED_US) {
			snprintf(detail, sizeof detail, "waiting for a cairn "
			    "server to claim it");
			if (!said_waiting)
				progress_note(p, "backup %s is waiting: no cairn "
				    "server has claimed it yet (is 'cairn server' "
				    "running for namespace %s, and does its "
				    "--shard-selector match the backup's labels?)",
				    name, ns);
			said_waiting = 1;
		}
		st.phase = shown_phase(b);
		st.done = json_int(b, "status.progress.itemsBackedUp", -1);
		st.total = json_int(b, "status.progress.totalItems", -1);
		st.bytes = json_int(b, "status.progress.bytesDone", -1);
		st.bytes_total = -1;
		st.detail = detail;
		if (st.done < 0 && st.total >= 0)
			st.done = 0;
		if (is_final_phase(json_str(b, "status.phase"))) {
			progress_end(p, &st);
			rc = report_final(name, b);
			break;
		}
		progress_update(p, &st);
		time_sleep_us(BK_POLL_US, &bk_interrupted);
	}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	cJSON_Delete(b);
	progress_free(p);
	return rc;
}

int
cmd_backup_create(const struct cli_command *cmd, struct flagset *fs)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *ns = flag_str(fs, F_NAMESPACE);
	const char *loc = flag_str(fs, F_STORAGE_LOCATION);
	struct kube *k = NULL;
	cJSON *b = NULL;
	int rc;

	if (fs->nargs != 1)
		return cli_usage_error(cmd, "backup create needs exactly one "
		    "NAME");
	if (!cli_valid_name(fs->args[0]))
		return cli_usage_error(cmd, "invalid backup name \"%s\": use "
		    "lowercase letters, digits, '-' and '.' (at most %d)",
		    fs->args[0], BK_NAME_MAX);
	rc = build_backup(cmd, fs, fs->args[0], ns, &b);
	if (rc != 0)
		return rc;
	if (cli_open_kube(fs, &k) < 0) {
		cJSON_Delete(b);
		return CLI_EXIT_FAIL;
	}
	if (loc != NULL && loc[0] != '\0') {
		cJSON *bsl = NULL;

		rc = kube_get(k, &gvr_bsl, ns, loc, &bsl, &err);
		cJSON_Delete(bsl);
		if (rc == CAIRN_ENOTFOUND) {
			rc = cli_fail("storage location \"%s\" not found in "
			    "namespace %s", loc, ns);
			goto out;
		}
		if (rc < 0) {
			rc = cli_fail("%s", err.msg);
			goto out;
		}
	}
	rc = kube_create(k, &gvr_backups, ns, b, NULL, &err);
	if (rc == CAIRN_EEXIST) {
		rc = cli_fail("backup %s already exists in namespace %s",
		    fs->args[0], ns);
		goto out;
	}
	if (rc < 0) {
		rc = cli_fail("creating backup %s: %s", fs->args[0], err.msg);
		goto out;
	}
	printf("Backup request \"%s\" submitted successfully.\n", fs->args[0]);
	if (!flag_bool(fs, F_WAIT)) {
		printf("Run 'cairn backup describe %s' or 'cairn backup logs %s' "
		    "for more details.\n", fs->args[0], fs->args[0]);
		rc = CLI_EXIT_OK;
		goto out;
	}
	fflush(stdout);
	rc = follow_backup(k, ns, fs->args[0]);
out:
	cJSON_Delete(b);
	kube_free(k);
	esc_free();
	return rc;
}

/* ---- backup get ------------------------------------------------------- */

static void
table_add_backup(struct out_table *t, const cJSON *b, int64_t now)
{
	char items[64], attempt[32], errs[32], warns[32];
	char age[OUT_AGE_MAX], exp[OUT_AGE_MAX];
	const char *holder = json_str(b, "status.claim.holder");

	fmt_items(b, items);
	fmt_count(b, "status.claim.attempt", attempt);
	fmt_count(b, "status.errors", errs);
	fmt_count(b, "status.warnings", warns);
	out_age(json_str(b, "metadata.creationTimestamp"), now, age);
	fmt_expires(json_str(b, "status.expiration"), now, exp);
	out_table_row(t, (const char *const[]){
	    json_str_or(b, "metadata.name", ""),
	    shown_phase(b),
	    items,
	    holder && holder[0] ? holder : "<none>",
	    attempt,
	    errs,
	    warns,
	    json_str_or(b, "spec.storageLocation", "<default>"),
	    age,
	    exp,
	});
}

int
cmd_backup_get(const struct cli_command *cmd, struct flagset *fs)
{
	static const char *const headers[] = { "NAME", "STATUS", "ITEMS",
		"HOLDER", "ATTEMPT", "ERRORS", "WARNINGS", "STORAGE LOCATION",
		"AGE", "EXPIRES", NULL };
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *ns = flag_str(fs, F_NAMESPACE);
	enum out_format fmt;
	struct cli_collect c;
	struct kube *k = NULL;
	cJSON *one = NULL, *doc = NULL;
	int rc;

	memset(&c, 0, sizeof c);
	c.cap = BK_CAP_LIST_ITEMS;
	if (fs->nargs > 1)
		return cli_usage_error(cmd, "backup get takes at most one NAME");
	if (out_parse_format(flag_str(fs, F_OUTPUT), &fmt, &err) < 0)
		return cli_usage_error(cmd, "%s", err.msg);
	if (cli_open_kube(fs, &k) < 0)
		return CLI_EXIT_FAIL;
	if (fs->nargs == 1) {
		rc = cli_get_named(k, &gvr_backups, ns, "backup", fs->args[0],
		    &one);
		if (rc != 0)
			goto out;
		cli_collect_item(&c, one);
	} else {
		rc = kube_list(k, &gvr_backups, ns, NULL, cli_collect_item, &c,
		    NULL, &err);
		if (rc < 0) {
			rc = cli_fail("listing backups in namespace %s: %s", ns,
			    rc == CAIRN_ETOOBIG ? "too many backups" : err.msg);
			goto out;
		}
	}
	if (fmt != OUT_TABLE) {
		doc = fs->nargs == 1 ? one : out_list_wrap(c.items, c.n);
		rc = out_print_doc(stdout, fmt, doc, &err) < 0 ?
		    cli_fail("%s", err.msg) : CLI_EXIT_OK;
		if (doc != one)
			cJSON_Delete(doc);
	} else if (c.n == 0) {
		fprintf(stderr, "No backups found in namespace %s.\n", ns);
		rc = CLI_EXIT_OK;
	} else {
		struct out_table *t = out_table_new(headers);
		int64_t now = time_now_us();

		for (size_t i = 0; i < c.n; i++)
			table_add_backup(t, c.items[i], now);
		out_table_print(t, stdout);
		out_table_free(t);
		rc = CLI_EXIT_OK;
	}
out:
	cli_collect_free(&c);
	kube_free(k);
	esc_free();
	return rc;
}

/* ---- backup describe -------------------------------------------------- */

static void
print_list_field(FILE *f, const char *label, const cJSON *arr,
    const char *if_empty)
{
	const cJSON *e;
	const char *sep = "";

	fprintf(f, "  %-16s", label);
	if (cJSON_GetArraySize(arr) == 0) {
		fprintf(f, "%s\n", if_empty);
		return;
	}
	cJSON_ArrayForEach(e, arr) {
		fprintf(f, "%s%s", sep, cJSON_IsString(e) ? esc(e->valuestring) :
		    "?");
		sep = ", ";
	}
	fputc('\n', f);
}

static const char *
tristate(const cJSON *b, const char *path, const char *unset)
{
	cJSON *v = json_get(b, path);

	if (cJSON_IsTrue(v))
		return "true";
	if (cJSON_IsFalse(v))
		return "false";
	return unset;
}

/* Values longer than this are cut (last-applied-configuration...). */
#define BK_VALUE_SHOWN	100

static void
print_labels(FILE *f, const char *title, const cJSON *obj)
{
	const cJSON *c;
	int first = 1;

	fprintf(f, "%-13s", title);
	cJSON_ArrayForEach(c, obj) {
		const char *v = cJSON_IsString(c) ? c->valuestring : "";
		size_t len = strlen(v);

		fprintf(f, "%s%s=", first ? "" : "             ",
		    esc(c->string));
		if (len > BK_VALUE_SHOWN) {
			char cut[BK_VALUE_SHOWN + 1];

			str_format(cut, sizeof cut, "%s", v);
			fprintf(f, "%s... (%zu bytes; -o json shows all)\n",
			    esc(cut), len);
		} else {
			fprintf(f, "%s\n", esc(v));
		}
		first = 0;
	}
	if (first)
		fprintf(f, "<none>\n");
}

static void
print_time(FILE *f, const char *label, const cJSON *b, const char *path,
    int64_t now)
{
	const char *ts = json_str(b, path);
	char age[OUT_AGE_MAX];

	if (ts == NULL) {
		fprintf(f, "  %-13s<n/a>\n", label);
		return;
	}
	out_age(ts, now, age);
	fprintf(f, "  %-13s%s (%s ago)\n", label, esc(ts), age);
}

/* Describe backup b on f (untrusted text escaped by the caller's buf). */
static void
describe_backup(FILE *f, const cJSON *b, const char *ns,
    const struct bk_location *loc, const char *loc_problem,
    const cJSON *files)
{
	const char *name = json_str_or(b, "metadata.name", "");
	const char *phase = json_str_or(b, "status.phase", "New");
	const cJSON *c, *parts;
	int64_t now = time_now_us();
	char items[64], sz[32], exp[OUT_AGE_MAX];
	struct buf sel;

	fprintf(f, "Name:        %s\n", esc(name));
	fprintf(f, "Namespace:   %s\n",
	    esc(json_str_or(b, "metadata.namespace", ns)));
	print_labels(f, "Labels:", json_get(b, "metadata.labels"));
	print_labels(f, "Annotations:", json_get(b, "metadata.annotations"));
	fprintf(f, "\nPhase:  %s%s\n", phase, is_unclaimed(b) ?
	    " (waiting: no cairn server has claimed it)" : "");
	if (json_get(b, "status.failureReason") != NULL)
		fprintf(f, "Failure reason:  %s\n",
		    esc(json_str_or(b, "status.failureReason", "")));
	if (cJSON_GetArraySize(json_get(b, "status.validationErrors")) > 0) {
		fprintf(f, "Validation errors:\n");
		cJSON_ArrayForEach(c, json_get(b, "status.validationErrors"))
			fprintf(f, "  - %s\n", cJSON_IsString(c) ?
			    esc(c->valuestring) : "?");
	}
	fprintf(f, "Errors:    %lld\nWarnings:  %lld\n",
	    (long long)json_int(b, "status.errors", 0),
	    (long long)json_int(b, "status.warnings", 0));
	if (json_get(b, "status.hookStatus") != NULL)
		fprintf(f, "Hooks:     %lld run, %lld failed\n",
		    (long long)json_int(b, "status.hookStatus.hooksAttempted", 0),
		    (long long)json_int(b, "status.hookStatus.hooksFailed", 0));
	cJSON_ArrayForEach(c, json_get(b, "status.checkpoint.hooks.pods"))
		if (json_bool(c, "frozen", 0))
			fprintf(f, "Frozen by a pre hook:  %s\n",
			    esc(json_str_or(c, "pod", "")));

	fprintf(f, "\nNamespaces:\n");
	print_list_field(f, "Included:", json_get(b, "spec.includedNamespaces"), "*");
	print_list_field(f, "Excluded:", json_get(b, "spec.excludedNamespaces"),
	    "<none>");
	fprintf(f, "\nResources:\n");
	print_list_field(f, "Included:", json_get(b, "spec.includedResources"), "*");
	print_list_field(f, "Excluded:", json_get(b, "spec.excludedResources"),
	    "<none>");
	fprintf(f, "  %-16s%s\n", "Cluster-scoped:",
	    tristate(b, "spec.includeClusterResources", "auto"));
	buf_init(&sel, 64 * 1024);
	selector_text(json_get(b, "spec.labelSelector"), &sel);
	fprintf(f, "\nLabel selector:    %s\n", esc(buf_cstr(&sel)));
	buf_free(&sel);
	fprintf(f, "Storage location:  %s\n",
	    esc(json_str_or(b, "spec.storageLocation", "<default>")));
	fprintf(f, "Snapshot volumes:  %s\n",
	    tristate(b, "spec.snapshotVolumes", "auto"));
	fprintf(f, "TTL:               %s\n",
	    esc(json_str_or(b, "spec.ttl", "720h")));
	if (json_get(b, "status.encryption.keyID") != NULL)
		fprintf(f, "Encryption:        %s, key %s\n",
		    esc(json_str_or(b, "status.encryption.algorithm", "?")),
		    esc(json_str(b, "status.encryption.keyID")));
	else
		fprintf(f, "Encryption:        <none> (the location does not "
		    "encrypt)\n");
	if (json_get(b, "status.verification.lastVerified") != NULL) {
		fprintf(f, "Verified:          %s by %s\n",
		    esc(json_str_or(b, "status.verification.result", "?")),
		    esc(json_str_or(b, "status.verification.verifiedBy", "?")));
		print_time(f, "  At:", b, "status.verification.lastVerified",
		    now);
		fprintf(f, "  %s\n", esc(json_str_or(b,
		    "status.verification.message", "")));
	} else {
		fprintf(f, "Verified:          never (cairn backup verify %s, or "
		    "cairn server --verify-period)\n", esc(name));
	}

	fmt_items(b, items);
	fmt_bytes((uint64_t)json_int(b, "status.progress.bytesDone", 0), sz);
	fprintf(f, "\nProgress:\n  Items:  %s\n  Bytes:  %s\n", items, sz);

	fprintf(f, "\nClaim:\n");
	if (json_get(b, "status.claim") == NULL)
		fprintf(f, "  <none>\n");
	else {
		char att[32];

		fmt_count(b, "status.claim.attempt", att);
		fprintf(f, "  Holder:      %s\n",
		    esc(json_str_or(b, "status.claim.holder", "<none>")));
		fprintf(f, "  Worker:      %s\n",
		    esc(json_str_or(b, "status.claim.worker", "<none>")));
		fprintf(f, "  Attempt:     %s\n", att);
		print_time(f, "Claimed at:", b, "status.claim.claimedAt", now);
	}

	fprintf(f, "\nCheckpoint:\n");
	if (json_get(b, "status.checkpoint") == NULL)
		fprintf(f, "  <none>\n");
	else {
		fprintf(f, "  Upload ID:   %s\n",
		    esc(json_str_or(b, "status.checkpoint.uploadID", "<none>")));
		fprintf(f, "  Items done:  %lld\n",
		    (long long)json_int(b, "status.checkpoint.itemsDone", 0));
		parts = json_get(b, "status.checkpoint.parts");
		fprintf(f, "  Parts:       %d\n", cJSON_GetArraySize(parts));
		if (cJSON_GetArraySize(parts) > 0) {
			static const char *const hdr[] = { "    PART", "ETAG",
				"ITEMS", "BYTES", "LAST ITEM", NULL };
			struct out_table *t = out_table_new(hdr);

			cJSON_ArrayForEach(c, parts) {
				char num[32], it[32], by[32];

				snprintf(num, sizeof num, "    %lld",
				    (long long)json_int(c, "number", 0));
				fmt_count(c, "items", it);
				if (cJSON_IsNumber(json_get(c, "bytes")))
					fmt_bytes((uint64_t)json_int(c, "bytes",
					    0), by);
				else
					snprintf(by, sizeof by, "-");
				/* the key is group/resource/ns/name: a core
				 * resource's starts with the empty group */
				const char *last = json_str_or(c, "lastItem",
				    "-");

				if (last[0] == '/')
					last++;
				out_table_row(t, (const char *const[]){ num,
				    json_str_or(c, "etag", "-"), it, by, last });
			}
			out_table_print(t, f);
			out_table_free(t);
		}
	}

	if (cJSON_GetArraySize(json_get(b, "status.conditions")) > 0) {
		static const char *const hdr[] = { "  TYPE", "STATUS", "REASON",
			"AGE", "MESSAGE", NULL };
		struct out_table *t = out_table_new(hdr);

		fprintf(f, "\nConditions:\n");
		cJSON_ArrayForEach(c, json_get(b, "status.conditions")) {
			char ty[128], age[OUT_AGE_MAX];

			snprintf(ty, sizeof ty, "  %s", json_str_or(c, "type", ""));
			out_age(json_str(c, "lastTransitionTime"), now, age);
			out_table_row(t, (const char *const[]){ ty,
			    json_str_or(c, "status", ""),
			    json_str_or(c, "reason", ""), age,
			    json_str_or(c, "message", "") });
		}
		out_table_print(t, f);
		out_table_free(t);
	}

	fprintf(f, "\nTimes:\n");
	print_time(f, "Created:", b, "metadata.creationTimestamp", now);
	print_time(f, "Started:", b, "status.startTimestamp", now);
	print_time(f, "Completed:", b, "status.completionTimestamp", now);
	fmt_expires(json_str(b, "status.expiration"), now, exp);
	fprintf(f, "  %-13s%s%s%s%s\n", "Expiration:",
	    esc(json_str_or(b, "status.expiration", "<n/a>")),
	    json_str(b, "status.expiration") ? " (" : "",
	    json_str(b, "status.expiration") ? exp : "",
	    json_str(b, "status.expiration") ? ")" : "");

	/* Only the files that exist: a listing, not the layout's names. */
	fprintf(f, "\nFiles in storage");
	if (loc != NULL)
		fprintf(f, " (location %s, %s):\n", esc(loc->name),
		    esc(store_describe(loc->store)));
	else
		fprintf(f, ":\n  (cannot read the storage location%s%s)\n",
		    loc_problem ? ": " : "", loc_problem ? esc(loc_problem) : "");
	if (loc != NULL && files != NULL)
		cli_print_files(f, files);
	else if (loc != NULL)
		fprintf(f, "  (cannot list them%s%s)\n", loc_problem ? ": " : "",
		    loc_problem ? esc(loc_problem) : "");
}

int
cmd_backup_describe(const struct cli_command *cmd, struct flagset *fs)
{
	struct cairn_err lerr = CAIRN_ERR_INIT, err = CAIRN_ERR_INIT;
	const char *ns = flag_str(fs, F_NAMESPACE);
	struct bk_location loc;
	enum out_format fmt;
	struct kube *k = NULL;
	cJSON *b = NULL, *files = NULL, *rl = NULL;
	char *dir = NULL, *key = NULL;
	const char *problem = NULL;
	int rc, have_loc;

	if (fs->nargs != 1)
		return cli_usage_error(cmd, "backup describe needs one NAME");
	if (out_parse_format(flag_str(fs, F_OUTPUT), &fmt, &err) < 0)
		return cli_usage_error(cmd, "%s", err.msg);
	if (cli_open_kube(fs, &k) < 0)
		return CLI_EXIT_FAIL;
	rc = cli_get_named(k, &gvr_backups, ns, "backup", fs->args[0], &b);
	if (rc != 0)
		goto out;
	/* The location names the files: never fatal. */
	have_loc = bk_location_open(k, ns, b, &loc, &lerr) == 0;
	if (!have_loc)
		problem = lerr.msg;
	dir = have_loc ? layout_backup_key(loc.prefix, fs->args[0],
	    LAYOUT_BACKUP_METADATA) : NULL;
	if (dir != NULL) {
		*(strrchr(dir, '/') + 1) = '\0';	/* backups/NAME/ */
		if (cli_stored_files(loc.store, dir, &files, &lerr) < 0)
			problem = lerr.msg;
	}
	if (flag_bool(fs, F_DETAILS) && have_loc) {
		key = layout_backup_key(loc.prefix, fs->args[0],
		    LAYOUT_BACKUP_RESOURCE_LIST);
		if (key != NULL && cli_resource_list(loc.store, key, &rl,
		    &err) < 0)
			fprintf(stderr, "cairn: no resource list for backup %s "
			    "(%s): %s\n", fs->args[0], key, err.code ==
			    CAIRN_ENOTFOUND ? "it has not finished" : err.msg);
	}
	if (fmt == OUT_TABLE) {
		describe_backup(stdout, b, ns, have_loc ? &loc : NULL, problem,
		    files);
		cli_describe_volumes(stdout, k, ns, 0, fs->args[0]);
		if (rl != NULL)
			cli_print_resource_list(stdout, rl);
		rc = CLI_EXIT_OK;
	} else {
		rc = cli_print_describe(fmt, "backup", b, "storageFiles", files,
		    cli_volume_objects(k, ns, 0, fs->args[0]), rl);
	}
	if (have_loc)
		location_free(&loc);
out:
	free(dir);
	free(key);
	cJSON_Delete(files);
	cJSON_Delete(rl);
	cJSON_Delete(b);
	kube_free(k);
	esc_free();
	return rc;
}

/* ---- backup logs ------------------------------------------------------ */

/* Common start of logs / download / delete: client, object, location. */
static int
open_backup(const struct cli_command *cmd, const struct flagset *fs,
    const char *verb, struct kube **k, cJSON **b, struct bk_location *loc)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *ns = flag_str(fs, F_NAMESPACE);
	int rc;

	*k = NULL;
	*b = NULL;
	memset(loc, 0, sizeof *loc);
	if (fs->nargs != 1)
		return cli_usage_error(cmd, "backup %s needs one NAME", verb);
	if (cli_open_kube(fs, k) < 0)
		return CLI_EXIT_FAIL;
	rc = cli_get_named(*k, &gvr_backups, ns, "backup", fs->args[0], b);
	if (rc != 0)
		return rc;
	if (bk_location_open(*k, ns, *b, loc, &err) < 0)
		return cli_fail("backup %s: %s", fs->args[0], err.msg);
	return 0;
}

/* Sink: the gunzipped logs to stdout; a write error stops the get. */
static int
logs_write(void *arg, const void *data, size_t n)
{
	int *write_failed = arg;

	if (fwrite(data, 1, n, stdout) != n) {
		*write_failed = 1;
		return -1;
	}
	return 0;
}

int
cmd_backup_logs(const struct cli_command *cmd, struct flagset *fs)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct bk_location loc;
	int write_failed = 0;
	struct kube *k;
	cJSON *b;
	char *key = NULL;
	int rc;

	rc = open_backup(cmd, fs, "logs", &k, &b, &loc);
	if (rc != 0)
		goto out;
	key = layout_backup_key(loc.prefix, fs->args[0], LAYOUT_BACKUP_LOGS);
	if (key == NULL) {
		rc = cli_fail("\"%s\" cannot be a backup name", fs->args[0]);
		goto out;
	}
	rc = store_get_gunzip_to(loc.store, key, logs_write, &write_failed,
	    &err);
	fflush(stdout);
	if (rc == CAIRN_ENOTFOUND)
		rc = cli_fail("no logs for backup %s in storage location %s "
		    "(%s): the backup has not finished yet, or failed before "
		    "uploading", fs->args[0], loc.name, key);
	else if (rc < 0 && write_failed)
		rc = cli_fail("%s: cannot write output", key);
	else if (rc < 0)
		rc = cli_fail("reading logs of backup %s: %s", fs->args[0],
		    err.msg);
	else
		rc = CLI_EXIT_OK;
out:
	free(key);
	location_free(&loc);
	cJSON_Delete(b);
	kube_free(k);
	esc_free();
	return rc;
}

/* ---- backup download -------------------------------------------------- */

struct dl {
	int fd;
	struct progress *p;
	int64_t total;
};

static int
dl_write(void *arg, const void *data, size_t n)
{
	const struct dl *d = arg;

	return util_write_all(d->fd, data, n);
}

static void
dl_progress(void *arg, uint64_t done, int64_t total)
{
	struct dl *d = arg;
	struct progress_state st = { "downloading", -1, -1, (int64_t)done,
		total >= 0 ? total : d->total, NULL };

	progress_update(d->p, &st);
}

/* fsync the directory holding path, so a rename into it is durable. */
static void
fsync_dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash == NULL ? xstrdup(".") :
	    xstrndup(path, slash == path ? 1 : (size_t)(slash - path));
	int fd = open(dir, O_RDONLY | O_DIRECTORY);

	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
	free(dir);
}

/*
 * tmp becomes path: replacing an existing path only when force (else
 * -1 with errno EEXIST, tmp left for the caller to remove).
 */
static int
publish(const char *tmp, const char *path, int force)
{
	if (force)
		return rename(tmp, path);
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -1;
	/* a file system without RENAME_NOREPLACE: link fails on EEXIST */
	if (link(tmp, path) < 0)
		return -1;
	(void)unlink(tmp);
	return 0;
}

int
cmd_backup_download(const struct cli_command *cmd, struct flagset *fs)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct bk_location loc;
	struct store_stat stt;
	struct store_progress prog;
	struct kube *k;
	struct dl d;
	cJSON *b;
	char *key = NULL, *file = NULL, *tmp = NULL, label[BK_NAME_MAX + 32];
	char sz[32];
	int rc;

	memset(&d, 0, sizeof d);
	d.fd = -1;
	rc = open_backup(cmd, fs, "download", &k, &b, &loc);
	if (rc != 0)
		goto out;
	/* --output-file, or -o FILE as Velero's `backup download -o`. */
	if (flag_str(fs, F_OUTPUT_FILE) != NULL)
		file = xstrdup(flag_str(fs, F_OUTPUT_FILE));
	else if (flag_given(fs, F_OUTPUT))
		file = xstrdup(flag_str(fs, F_OUTPUT));
	else
		file = xasprintf("%s.tar.gz", fs->args[0]);
	key = layout_backup_key(loc.prefix, fs->args[0],
	    LAYOUT_BACKUP_TARBALL);
	if (key == NULL) {
		rc = cli_fail("\"%s\" cannot be a backup name", fs->args[0]);
		goto out;
	}
	if (strcmp(file, "-") != 0 && !flag_bool(fs, F_FORCE) &&
	    access(file, F_OK) == 0) {
		rc = cli_fail("%s exists: not overwritten (--force to replace "
		    "it)", file);
		goto out;
	}
	rc = store_head(loc.store, key, &stt, &err);
	if (rc == CAIRN_ENOTFOUND) {
		rc = cli_fail("backup %s has no tarball in storage location %s "
		    "(%s): it has not completed", fs->args[0], loc.name, key);
		goto out;
	}
	if (rc < 0) {
		rc = cli_fail("%s", err.msg);
		goto out;
	}
	if (strcmp(file, "-") == 0)
		d.fd = STDOUT_FILENO;	/* "-": stream to stdout (a pipe) */
	else {
		/* Published atomically: temp file next to FILE, fsync, rename. */
		tmp = xasprintf("%s.part-XXXXXX", file);
		d.fd = mkstemp(tmp);
		if (d.fd < 0) {
			rc = cli_fail("cannot create %s: %s", tmp,
			    strerror(errno));
			FREE_NULL(tmp);
			goto out;
		}
		(void)fchmod(d.fd, 0644);
	}
	d.total = (int64_t)stt.size;
	snprintf(label, sizeof label, "download %s", fs->args[0]);
	d.p = progress_new(stderr, PROGRESS_AUTO, label);
	prog.fn = dl_progress;
	prog.arg = &d;
	rc = store_get(loc.store, key, 0, -1, dl_write, &d, &prog, &err);
	if (rc == 0) {
		struct progress_state st = { "downloaded", -1, -1,
			(int64_t)stt.size, (int64_t)stt.size, NULL };

		progress_end(d.p, &st);
	} else
		progress_end(d.p, NULL);
	if (rc < 0) {
		rc = cli_fail("downloading %s: %s", key, rc == CAIRN_ECANCELED ?
		    "cannot write the file" : err.msg);
		goto out;
	}
	fmt_bytes(stt.size, sz);
	if (d.fd == STDOUT_FILENO) {
		d.fd = -1;
		fprintf(stderr, "Backup %s written to stdout (%s).\n",
		    fs->args[0], sz);
		rc = CLI_EXIT_OK;
		goto out;
	}
	if (fsync(d.fd) < 0 || close(d.fd) < 0) {
		d.fd = -1;
		rc = cli_fail("writing %s: %s", tmp, strerror(errno));
		goto out;
	}
	d.fd = -1;
	if (publish(tmp, file, flag_bool(fs, F_FORCE)) < 0) {
		rc = cli_fail(errno == EEXIST ? "%s: %s appeared meanwhile; not "
		    "overwritten (--force to replace it)" : "renaming %s to %s: "
		    "%s", tmp, file, strerror(errno));
		goto out;
	}
	FREE_NULL(tmp);
	fsync_dir_of(file);
	printf("Backup %s downloaded to %s (%s).\n", fs->args[0], file, sz);
	rc = CLI_EXIT_OK;
out:
	if (d.fd >= 0)
		close(d.fd);
	if (tmp != NULL)
		unlink(tmp);
	progress_free(d.p);
	free(tmp);
	free(file);
	free(key);
	location_free(&loc);
	cJSON_Delete(b);
	kube_free(k);
	esc_free();
	return rc;
}

/* ---- backup delete ---------------------------------------------------- */

/*
 * Delete what backup b stored (engine/gc.h gc_clean_backup(), the
 * collector's own deletion), with the plugins of --plugin-dir for its
 * volume snapshots. A location that cannot be opened is fine only for a
 * backup that never started (nothing was written); a ReadOnly one is
 * refused. 0 (*cl filled), or the exit code after a message: nothing of
 * the Backup object has been touched then.
 */
static int
delete_stored(const struct flagset *fs, struct kube *k, const char *ns,
    const cJSON *b, struct gc_clean *cl)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct volumes_config vc;
	struct volumes_ctx c;
	const char *name = json_str_or(b, "metadata.name", "");
	int started = json_get(b, "status.startTimestamp") != NULL ||
	    json_get(b, "status.checkpoint") != NULL;
	int rc;

	memset(&vc, 0, sizeof vc);
	memset(&c, 0, sizeof c);
	memset(cl, 0, sizeof *cl);
	vc.plugin_dir = flag_str(fs, F_PLUGIN_DIR);
	vc.plugin_timeout_us = flag_duration_us(fs, F_PLUGIN_TIMEOUT);
	rc = volumes_open(&vc, &c.vol, &err);
	if (rc == 0) {
		c.kube = k;
		c.namespace = ns;
		c.server_id = "cli";
		c.stop = &bk_interrupted;
		/* Never started: it may have written nothing, keep no files. */
		rc = gc_clean_backup(&c, b, !started, cl, &err);
	}
	volumes_free(c.vol);
	if (rc == 0 && cl->lost[0] != '\0')
		fprintf(stderr, "Backup %s never started; deleting only the "
		    "object (%s).\n", name, cl->lost);
	if (rc < 0 && cl->snapshots_failed > 0)
		return cli_fail("backup %s: %d volume snapshot%s could not be "
		    "deleted (see above: --plugin-dir must hold the plugins that "
		    "made them); its files and the Backup are kept", name,
		    cl->snapshots_failed, cl->snapshots_failed == 1 ? "" : "s");
	if (rc < 0)
		return cli_fail("backup %s: %s; the Backup object is kept", name,
		    err.msg);
	return 0;
}

/*
 * The object is deleted but may wait for finalizers: storage is clean, so
 * remove cairn's cleanup finalizer (re-reading on a conflict). 0, or an
 * error (the server's GC then releases it).
 */
static int
release_backup(struct kube *k, const char *ns, const char *name, cJSON *obj,
    struct cairn_err *err)
{
	cJSON *cur = obj;
	int rc = 0;

	for (int tries = 0; tries < 5; tries++) {
		if (cur == NULL || json_get(cur, "metadata.deletionTimestamp") ==
		    NULL || !gc_has_finalizer(cur)) {
			rc = 0;
			break;
		}
		rc = gc_set_finalizer(k, ns, cur, 0, err);
		if (rc == CAIRN_ENOTFOUND)
			rc = 0;
		if (rc != CAIRN_ECONFLICT)
			break;
		if (cur != obj)
			cJSON_Delete(cur);
		cur = NULL;
		rc = kube_get(k, &gvr_backups, ns, name, &cur, err);
		if (rc == CAIRN_ENOTFOUND) {
			rc = 0;
			break;
		}
		if (rc < 0)
			break;
	}
	if (cur != obj)
		cJSON_Delete(cur);
	return rc;
}

/* Ask on the terminal; 1 when the answer is yes. */
static int
confirm(const char *name, const char *ns)
{
	char line[64];

	fprintf(stderr, "Delete backup %s (namespace %s) and its files in "
	    "storage? [y/N] ", name, ns);
	fflush(stderr);
	if (fgets(line, sizeof line, stdin) == NULL)
		return 0;
	return line[0] == 'y' || line[0] == 'Y';
}

int
cmd_backup_delete(const struct cli_command *cmd, struct flagset *fs)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *ns = flag_str(fs, F_NAMESPACE);
	struct gc_clean cl;
	struct kube *k = NULL;
	cJSON *b = NULL, *reply = NULL;
	int rc;

	if (fs->nargs != 1)
		return cli_usage_error(cmd, "backup delete needs one NAME");
	if (!flag_bool(fs, F_CONFIRM)) {
		if (!isatty(STDIN_FILENO))
			return cli_usage_error(cmd, "deleting backup %s needs "
			    "--confirm when not asked on a terminal", fs->args[0]);
		if (!confirm(fs->args[0], ns)) {
			fprintf(stderr, "Nothing deleted.\n");
			return CLI_EXIT_FAIL;
		}
	}
	if (cli_open_kube(fs, &k) < 0)
		return CLI_EXIT_FAIL;
	rc = cli_get_named(k, &gvr_backups, ns, "backup", fs->args[0], &b);
	if (rc != 0)
		goto out;
	rc = delete_stored(fs, k, ns, b, &cl);
	if (rc != 0)
		goto out;
	rc = kube_delete(k, &gvr_backups, ns, fs->args[0], NULL, &reply, &err);
	if (rc < 0 && rc != CAIRN_ENOTFOUND) {
		rc = cli_fail("deleting backup %s: %s", fs->args[0], err.msg);
		goto out;
	}
	if (rc == 0 && release_backup(k, ns, fs->args[0], reply, &err) < 0)
		fprintf(stderr, "Backup %s: removing finalizer %s: %s (a cairn "
		    "server will release it).\n", fs->args[0], GC_FINALIZER,
		    err.msg);
	if (cl.location[0] != '\0' && cl.packs_removed > 0)
		printf("Backup %s deleted (%zu objects removed from storage "
		    "location %s, and %zu volume chunk packs no other backup "
		    "uses).\n", fs->args[0], cl.removed, cl.location,
		    cl.packs_removed);
	else if (cl.location[0] != '\0')
		printf("Backup %s deleted (%zu objects removed from storage "
		    "location %s).\n", fs->args[0], cl.removed, cl.location);
	else
		printf("Backup %s deleted.\n", fs->args[0]);
	rc = CLI_EXIT_OK;
out:
	cJSON_Delete(reply);
	cJSON_Delete(b);
	kube_free(k);
	esc_free();
	return rc;
}
