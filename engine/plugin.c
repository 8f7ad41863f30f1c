/*
 * plugin.c: the plugin protocol runner. Contract in plugin.h, protocol in
 * docs/plugins.md.
 *
 * Design. A plugin is untrusted code in another process. The runner's job
 * is to turn anything it does into either a result or one clear error, and
 * to leave nothing behind:
 *
 * - Start: fork + execve with argv[0] only, no shell. The child makes its
 *   own process group (so grandchildren such as tar or sleep are killed
 *   with it), gets fresh pipes on 0/1/2 and closes every other descriptor
 *   (close_range), so it inherits no journal, API or storage connection.
 *   Its environment is built from an allow-list (PATH, LANG, LC_*, TZ,
 *   TMPDIR) plus CAIRN_PLUGIN_PROTOCOL and HOME=/nonexistent (a
 *   kubeconfig or cloud credentials often live in $HOME): no KUBECONFIG, no
 *   KUBERNETES_SERVICE_*, no AWS_* and no CAIRN_SERVICEACCOUNT_DIR ever
 *   reach a plugin. cairn writes the VolumePluginBackup/Restore objects
 *   itself from what the plugin reports, so a plugin never needs them.
 * - Talk: one poll(2) loop over stdout (protocol), stderr (kept as a short
 *   tail for error messages and logged at debug) and stdin (the request in
 *   the version the hello named, written non-blocking; version 1: then
 *   closed; version 2: the answers to the plugin's API calls follow, each
 *   made synchronously by the caller's callback, which decides what the
 *   plugin may touch). Deadlines: handshake, idle (no line), overall; the
 *   loop wakes at least every 100 ms to check *stop.
 * - Caps: a line longer than PLUGIN_LINE_MAX, more than lines_per_sec
 *   lines in one second, JSON nested deeper than CAIRN_JSON_MAX_DEPTH:
 *   protocol errors.
 * - End: on any error the group gets SIGKILL at once. After a result the
 *   plugin has exit_grace to exit by itself (status 0 expected); whatever
 *   is left of its group is then killed. The leader is reaped only after
 *   the group kill (waitid WNOWAIT first), so its pgid cannot be reused by
 *   an unrelated process between the two.
 */
#include "config.h"
#include "engine/plugin.h"

#include <stdatomic.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"

#define PLUGIN_DEF_HANDSHAKE	(10LL * TIME_US_PER_SEC)
#define PLUGIN_DEF_IDLE		(300LL * TIME_US_PER_SEC)
#define PLUGIN_DEF_OVERALL	(86400LL * TIME_US_PER_SEC)
#define PLUGIN_DEF_GRACE	(2LL * TIME_US_PER_SEC)
#define PLUGIN_DEF_RATE		2000u
#define PLUGIN_REQUEST_MAX	(1u << 20)	/* one request line */
#define PLUGIN_CONFIG_MAX	(64u << 10)	/* <plugin>.json */
#define PLUGIN_DIR_MAX		64		/* plugins in a directory */
#define PLUGIN_POLL_MS		100

/* Environment variables a plugin may see (exact names, or prefix with '*'). */
static const char *const plugin_env_keep[] = {
	"PATH", "LANG", "LC_*", "TZ", "TMPDIR", NULL
};

void
plugin_hello_free(struct plugin_hello *h)
{
	size_t i;

	if (h == NULL)
		return;
	for (i = 0; i < PLUGIN_MAX_TYPES && h->types[i] != NULL; i++)
		FREE_NULL(h->types[i]);
	h->name[0] = '\0';
	h->protocol = 0;
}

int
plugin_hello_handles(const struct plugin_hello *h, const char *type)
{
	size_t i;

	if (type == NULL)
		return 0;
	for (i = 0; i < PLUGIN_MAX_TYPES && h->types[i] != NULL; i++)
		if (strcmp(h->types[i], type) == 0)
			return 1;
	return 0;
}

static int
env_allowed(const char *kv)
{
	const char *const *k;
	size_t n;

	for (k = plugin_env_keep; *k != NULL; k++) {
		n = strlen(*k);
		if ((*k)[n - 1] == '*') {
			if (strncmp(kv, *k, n - 1) == 0)
				return 1;
		} else if (strncmp(kv, *k, n) == 0 && kv[n] == '=')
			return 1;
	}
	return 0;
}

/* The child's environment: allow-list + protocol version + extras. Owned. */
static char **
build_env(char *const *extra)
{
	extern char **environ;
	size_t n = 0, cap = 9, i;
	char **env;

	for (i = 0; environ[i] != NULL; i++)
		cap++;
	for (i = 0; extra != NULL && extra[i] != NULL; i++)
		cap++;
	env = xcalloc(cap, sizeof *env);
	for (i = 0; environ[i] != NULL; i++)
		if (env_allowed(environ[i]))
			env[n++] = xstrdup(environ[i]);
	env[n++] = xasprintf("CAIRN_PLUGIN_PROTOCOL=%d",
	    PLUGIN_PROTOCOL_VERSION);
	env[n++] = xstrdup("HOME=/nonexistent");
	for (i = 0; extra != NULL && extra[i] != NULL; i++)
		env[n++] = xstrdup(extra[i]);
	env[n] = NULL;
	return env;
}

/* One running plugin. */
struct prun {
	const char *path;
	const struct plugin_limits *lim;
	const struct plugin_cbs *cbs;
	pid_t pid;		/* leader, also the pgid; -1 when reaped */
	int fd_in, fd_out, fd_err;	/* parent ends, -1 when closed */
	const cJSON *request;	/* borrowed; sent after the hello */
	struct buf out;		/* lines for the plugin's stdin, unsent */
	int close_in;		/* protocol 1: stdin closes once out is sent */
	int has_request;
	int protocol;		/* of the hello */
	struct buf line;	/* partial stdout line */
	char errtail[PLUGIN_STDERR_KEEP];
	int warned_utf8;		/* logged once: invalid UTF-8 replaced */
	size_t errlen;
	int hello_seen;
	struct plugin_hello *hello;
	cJSON *result;		/* owned until handed out */
	int64_t start, last_line;
	int64_t rate_start;
	unsigned rate_lines;
};

static void
close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

static int
set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -1;
	return 0;
}

static int
spawn(struct prun *r, char *const *env_extra, struct cairn_err *err)
{
	int pin[2] = { -1, -1 }, pout[2] = { -1, -1 }, perr[2] = { -1, -1 };
	char **env = NULL;
	char *argv[2];
	pid_t pid;
	int e;

	if (pipe2(pin, O_CLOEXEC) < 0 || pipe2(pout, O_CLOEXEC) < 0 ||
	    pipe2(perr, O_CLOEXEC) < 0) {
		e = errno;
		cairn_err_errno(err, CAIRN_EIO, e, "plugin %s: pipe", r->path);
		goto fail;
	}
	env = build_env(env_extra);
	argv[0] = (char *)(uintptr_t)r->path;
	argv[1] = NULL;
	pid = fork();
	if (pid < 0) {
		e = errno;
		cairn_err_errno(err, CAIRN_EIO, e, "plugin %s: fork", r->path);
		goto fail;
	}
	if (pid == 0) {
		/* Child: async-signal-safe calls only. */
		sigset_t all;

		setpgid(0, 0);
		sigemptyset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		signal(SIGPIPE, SIG_DFL);
		if (dup2(pin[0], 0) < 0 || dup2(pout[1], 1) < 0 ||
		    dup2(perr[1], 2) < 0)
			_exit(126);
		close_range(3, ~0u, 0);
		execve(r->path, argv, env);
		_exit(127);
	}
	setpgid(pid, pid);	/* also done by the child: no race either way */
	r->pid = pid;
	close(pin[0]);
	close(pout[1]);
	close(perr[1]);
	r->fd_in = pin[1];
	r->fd_out = pout[0];
	r->fd_err = perr[0];
	set_nonblock(r->fd_in);
	set_nonblock(r->fd_out);
	set_nonblock(r->fd_err);
	strv_free(env);
	return 0;
fail:
	if (pin[0] >= 0) { close(pin[0]); close(pin[1]); }
	if (pout[0] >= 0) { close(pout[0]); close(pout[1]); }
	if (perr[0] >= 0) { close(perr[0]); close(perr[1]); }
	strv_free(env);
	return err != NULL ? err->code : CAIRN_EIO;
}

/* Describe how the (exited, unreaped) leader ended: "exited with status 3". */
static void
describe_exit(const siginfo_t *si, char *out, size_t n)
{
	if (si->si_code == CLD_EXITED)
		snprintf(out, n, "exited with status %d", si->si_status);
	else
		snprintf(out, n, "was killed by signal %d", si->si_status);
}

/*
 * Wait up to us for the leader to exit, without reaping. 1 and *si if it
 * did, 0 if not.
 */
static int
leader_exited(struct prun *r, int64_t us, siginfo_t *si)
{
	int64_t end = time_mono_us() + us;

	for (;;) {
		memset(si, 0, sizeof *si);
		if (waitid(P_PID, (id_t)r->pid, si,
		    WEXITED | WNOHANG | WNOWAIT) == 0 && si->si_pid == r->pid)
			return 1;
		if (time_mono_us() >= end)
			return 0;
		usleep(10000);
	}
}

/* Kill the whole group, then reap the leader. */
static void
reap(struct prun *r)
{
	int st;

	if (r->pid <= 0)
		return;
	kill(-r->pid, SIGKILL);
	while (waitpid(r->pid, &st, 0) < 0 && errno == EINTR)
		;
	r->pid = -1;
}

/* The tail of stderr as one escaped line, or "" when empty. */
static void
stderr_note(const struct prun *r, struct buf *b)
{
	char tail[PLUGIN_STDERR_KEEP + 1];
	size_t n = r->errlen;

	if (n == 0)
		return;
	memcpy(tail, r->errtail, n);
	tail[n] = '\0';
	while (n > 0 && (tail[n - 1] == '\n' || tail[n - 1] == '\r'))
		tail[--n] = '\0';
	if (n == 0)
		return;
	buf_puts(b, " (stderr: ");
	str_escape_text(b, tail);
	buf_puts(b, ")");
}

static void
keep_stderr(struct prun *r, const char *p, size_t n)
{
	if (n >= PLUGIN_STDERR_KEEP) {
		memcpy(r->errtail, p + n - PLUGIN_STDERR_KEEP,
		    PLUGIN_STDERR_KEEP);
		r->errlen = PLUGIN_STDERR_KEEP;
		return;
	}
	if (r->errlen + n > PLUGIN_STDERR_KEEP) {
		size_t drop = r->errlen + n - PLUGIN_STDERR_KEEP;

		memmove(r->errtail, r->errtail + drop, r->errlen - drop);
		r->errlen -= drop;
	}
	memcpy(r->errtail + r->errlen, p, n);
	r->errlen += n;
}

/* Length of s capped at max bytes, never inside a UTF-8 character. */
static int
cap_len(const char *s, size_t max)
{
	size_t n = strnlen(s, max);

	return (int)str_utf8_cut(s, n);
}

static int proto_err(struct prun *, struct cairn_err *, const char *, ...)
	CAIRN_PRINTF(3, 4);

static int
proto_err(struct prun *r, struct cairn_err *err, const char *fmt, ...)
{
	struct buf b;
	va_list ap;
	int rc;

	buf_init(&b, 4096);
	buf_printf(&b, "plugin %s: ", r->path);
	va_start(ap, fmt);
	buf_vprintf(&b, fmt, ap);
	va_end(ap);
	stderr_note(r, &b);
	rc = cairn_err_set(err, CAIRN_EPROTO, "%s", buf_cstr(&b));
	buf_free(&b);
	return rc;
}

static int
parse_hello(struct prun *r, const cJSON *o, struct cairn_err *err)
{
	const char *name = json_str(o, "name");
	const cJSON *types = cJSON_GetObjectItemCaseSensitive(o, "volumeTypes");
	const cJSON *t;
	int64_t ver = json_int(o, "protocolVersion", -1);
	size_t n = 0;
	char vbuf[32];

	if (name == NULL || name[0] == '\0' || strlen(name) >= PLUGIN_NAME_MAX)
		return proto_err(r, err, "%s", "hello without a valid name");
	if (ver < PLUGIN_PROTOCOL_MIN || ver > PLUGIN_PROTOCOL_VERSION) {
		snprintf(vbuf, sizeof vbuf, "%lld", (long long)ver);
		return proto_err(r, err, "speaks protocol version %s, cairn "
		    "speaks %d to %d", vbuf, PLUGIN_PROTOCOL_MIN,
		    PLUGIN_PROTOCOL_VERSION);
	}
	if (!cJSON_IsArray(types))
		return proto_err(r, err, "%s", "hello without volumeTypes");
	r->protocol = (int)ver;
	if (r->hello != NULL) {
		snprintf(r->hello->name, sizeof r->hello->name, "%s", name);
		r->hello->protocol = (int)ver;
		r->hello->node_local = ver < 2 ||
		    !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(o,
		    "nodeLocal"));
	}
	cJSON_ArrayForEach(t, types) {
		if (!cJSON_IsString(t) || n >= PLUGIN_MAX_TYPES)
			return proto_err(r, err, "%s", "hello has a bad "
			    "volumeTypes list (strings, at most 16)");
		if (r->hello != NULL)
			r->hello->types[n] = xstrdup(t->valuestring);
		n++;
	}
	return 0;
}

/* The fields of each request in protocol 1 (a v1 plugin gets these only). */
static const struct {
	const char *type;
	const char *fields[9];
} plugin_v1_fields[] = {
	{ "create_snapshot", { "type", "volumeName", "volumeType", "volumePath",
	    "backupName", "node", "config", NULL } },
	{ "restore_volume", { "type", "snapshotID", "volumeName", "volumeType",
	    "targetPath", "backupName", "backupProperties", "config", NULL } },
	{ "delete_snapshot", { "type", "snapshotID", "volumeName", "config",
	    NULL } },
};

/* Version 1's fields of request r (all of them for an unknown type). */
static cJSON *
request_v1(const cJSON *r)
{
	const char *type = json_str_or(r, "type", "");
	const char *const *f = NULL;
	cJSON *q;

	for (size_t i = 0; i < sizeof plugin_v1_fields /
	    sizeof plugin_v1_fields[0]; i++)
		if (strcmp(plugin_v1_fields[i].type, type) == 0)
			f = plugin_v1_fields[i].fields;
	if (f == NULL)
		return cJSON_Duplicate(r, 1);
	q = cJSON_CreateObject();
	for (; *f != NULL; f++)
		if (cJSON_GetObjectItemCaseSensitive(r, *f) != NULL)
			cJSON_AddItemToObject(q, *f, cJSON_Duplicate(
			    cJSON_GetObjectItemCaseSensitive(r, *f), 1));
	return q;
}

/* The request, in the plugin's version, queued for its stdin. */
static void
queue_request(struct prun *r)
{
	cJSON *q;
	char *text;

	if (r->protocol >= 2) {
		q = cJSON_Duplicate(r->request, 1);
		cJSON_DeleteItemFromObjectCaseSensitive(q, "protocolVersion");
		cJSON_AddNumberToObject(q, "protocolVersion", r->protocol);
	} else {
		q = request_v1(r->request);
		r->close_in = 1;	/* version 1: EOF after the request */
	}
	text = json_print(q);
	cJSON_Delete(q);
	buf_puts(&r->out, text);
	buf_putc(&r->out, '\n');
	free(text);
}

static const char *const kube_methods[] = {
	"GET", "POST", "PUT", "PATCH", "DELETE", NULL
};

/*
 * A "kube" line (protocol 2): the API call made by the caller's callback,
 * its answer queued for the plugin's stdin. A malformed call is the
 * plugin's protocol error; a refused one is an answer (403).
 */
static int
kube_line(struct prun *r, const cJSON *o, struct cairn_err *err)
{
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
	const cJSON *body = cJSON_GetObjectItemCaseSensitive(o, "body");
	const char *method = json_str(o, "method"), *path = json_str(o, "path");
	cJSON *ans = NULL, *line;
	char *text;
	size_t i;

	for (i = 0; method != NULL && kube_methods[i] != NULL; i++)
		if (strcmp(method, kube_methods[i]) == 0)
			break;
	if (r->protocol < 2)
		return proto_err(r, err, "%s", "wrote an unknown line type "
		    "\"kube\" (protocol version 1)");
	if (method == NULL || kube_methods[i] == NULL || path == NULL ||
	    path[0] != '/' || strlen(path) > 2048 ||
	    (id != NULL && !cJSON_IsString(id) && !cJSON_IsNumber(id)) ||
	    (body != NULL && !cJSON_IsObject(body) && !cJSON_IsNull(body)))
		return proto_err(r, err, "%s", "kube needs method (GET, POST, "
		    "PUT, PATCH, DELETE), path (/...) and at most an object "
		    "body");
	if (r->cbs != NULL && r->cbs->kube != NULL)
		ans = r->cbs->kube(r->cbs->arg, method, path,
		    cJSON_IsObject(body) ? body : NULL);
	if (ans == NULL) {
		ans = cJSON_CreateObject();
		cJSON_AddNumberToObject(ans, "status", 403);
		json_set_str(ans, "body.message", "not allowed to this plugin");
	}
	line = cJSON_CreateObject();
	cJSON_AddStringToObject(line, "type", "kube-response");
	if (id != NULL)
		cJSON_AddItemToObject(line, "id", cJSON_Duplicate(id, 1));
	cJSON_AddNumberToObject(line, "status", json_int(ans, "status", 500));
	if (cJSON_GetObjectItemCaseSensitive(ans, "body") != NULL)
		cJSON_AddItemToObject(line, "body", cJSON_DetachItemFromObject(
		    ans, "body"));
	cJSON_Delete(ans);
	text = json_print(line);
	if (strlen(text) >= PLUGIN_KUBE_REPLY_MAX) {
		free(text);
		cJSON_DeleteItemFromObjectCaseSensitive(line, "body");
		cJSON_ReplaceItemInObject(line, "status",
		    cJSON_CreateNumber(413));
		json_set_str(line, "body.message", "the reply is too large for "
		    "the plugin channel");
		text = json_print(line);
	}
	cJSON_Delete(line);
	if (buf_puts(&r->out, text) < 0 || buf_putc(&r->out, '\n') < 0) {
		free(text);
		return proto_err(r, err, "%s", "does not read the answers to its "
		    "API calls (more than 4 MiB waiting)");
	}
	free(text);
	return 0;
}

/*
 * One complete line from stdout. Returns 0 to go on, 1 when the operation
 * has its answer (result stored, or hello-only run done), < 0 on error.
 */
static int
handle_line(struct prun *r, char *line, size_t len, struct cairn_err *err)
{
	struct cairn_err perr = CAIRN_ERR_INIT;
	cJSON *o, *p, *it;
	const char *type, *msg;
	char *fixed = NULL;
	int rc = 0, nprops = 0;

	if (len > 0 && line[len - 1] == '\r')
		line[--len] = '\0';
	if (len == 0)
		return 0;	/* blank lines are allowed */
	/*
	 * A plugin's bytes are not trusted to be UTF-8, and its strings end
	 * up in status, where the API server refuses invalid UTF-8: every
	 * bad byte becomes U+FFFD before anything else looks at the line.
	 */
	if (!str_utf8_valid(line, len)) {
		fixed = str_utf8_fix(line, len);
		line = fixed;
		len = strlen(fixed);
		if (!r->warned_utf8) {
			log_warn("plugin %s: wrote invalid UTF-8 (replaced by "
			    "U+FFFD)", r->path);
			r->warned_utf8 = 1;
		}
	}
	o = json_parse(line, len, &perr);
	if (o == NULL || !cJSON_IsObject(o)) {
		cJSON_Delete(o);
		rc = proto_err(r, err, "wrote a line that is not a JSON "
		    "object: %.*s", cap_len(line, 200), line);
		free(fixed);
		return rc;
	}
	free(fixed);
	type = json_str(o, "type");
	if (type == NULL) {
		rc = proto_err(r, err, "%s", "wrote an object without \"type\"");
		goto done;
	}
	if (!r->hello_seen) {
		if (strcmp(type, "hello") != 0) {
			rc = proto_err(r, err, "said \"%.*s\" before hello",
			    cap_len(type, 64), type);
			goto done;
		}
		rc = parse_hello(r, o, err);
		if (rc < 0)
			goto done;
		r->hello_seen = 1;
		if (!r->has_request)
			close_fd(&r->fd_in);	/* handshake only: EOF asks it to exit */
		else
			queue_request(r);
		goto done;
	}
	if (strcmp(type, "progress") == 0) {
		int64_t d = json_int(o, "bytesDone", -1);
		int64_t t = json_int(o, "totalBytes", -1);

		if (d < 0 || t < 0) {
			rc = proto_err(r, err, "%s", "progress needs bytesDone "
			    "and totalBytes >= 0");
			goto done;
		}
		if (r->cbs != NULL && r->cbs->progress != NULL)
			r->cbs->progress(r->cbs->arg, d, t);
	} else if (strcmp(type, "properties") == 0) {
		p = cJSON_GetObjectItemCaseSensitive(o, "properties");
		if (!cJSON_IsObject(p)) {
			rc = proto_err(r, err, "%s", "properties needs an object "
			    "\"properties\"");
			goto done;
		}
		cJSON_ArrayForEach(it, p) {
			if (!cJSON_IsString(it) || ++nprops > PLUGIN_PROPS_MAX) {
				rc = proto_err(r, err, "%s", "properties must "
				    "be at most 64 strings");
				goto done;
			}
			if (r->cbs != NULL && r->cbs->property != NULL)
				r->cbs->property(r->cbs->arg, it->string,
				    it->valuestring);
		}
	} else if (strcmp(type, "kube") == 0) {
		rc = kube_line(r, o, err);
	} else if (strcmp(type, "log") == 0) {
		msg = json_str_or(o, "message", "");
		log_info("plugin %s: %s", r->path, msg);
	} else if (strcmp(type, "result") == 0) {
		r->result = o;
		return 1;
	} else if (strcmp(type, "error") == 0) {
		msg = json_str_or(o, "message", "(no message)");
		rc = cairn_err_set(err, CAIRN_EFAIL, "plugin %s failed: %.*s",
		    r->path, cap_len(msg, 512), msg);
	} else if (strcmp(type, "hello") == 0) {
		rc = proto_err(r, err, "%s", "said hello twice");
	} else {
		rc = proto_err(r, err, "wrote an unknown line type \"%.*s\"",
		    cap_len(type, 64), type);
	}
done:
	cJSON_Delete(o);
	if (rc == 0 && r->hello_seen && !r->has_request && r->fd_in < 0)
		return 1;
	return rc;
}

/* Split what is buffered into lines. Same returns as handle_line. */
static int
drain_lines(struct prun *r, struct cairn_err *err)
{
	char *nl;
	size_t n;
	int rc;
	int64_t now;

	for (;;) {
		nl = memchr(r->line.data != NULL ? r->line.data : "", '\n',
		    r->line.len);
		if (nl == NULL) {
			if (r->line.len > PLUGIN_LINE_MAX)
				return proto_err(r, err, "wrote a line longer "
				    "than %u bytes", PLUGIN_LINE_MAX);
			return 0;
		}
		n = (size_t)(nl - r->line.data);
		if (n > PLUGIN_LINE_MAX)
			return proto_err(r, err, "wrote a line longer than %u "
			    "bytes", PLUGIN_LINE_MAX);
		now = time_mono_us();
		r->last_line = now;
		if (now - r->rate_start >= TIME_US_PER_SEC) {
			r->rate_start = now;
			r->rate_lines = 0;
		}
		if (++r->rate_lines > r->lim->lines_per_sec)
			return proto_err(r, err, "%s", "flooded its output "
			    "(too many lines per second)");
		*nl = '\0';
		rc = handle_line(r, r->line.data, n, err);
		buf_consume(&r->line, n + 1);
		if (rc != 0)
			return rc;
	}
}

static void
limits_fill(struct plugin_limits *l, const struct plugin_limits *in)
{
	memset(l, 0, sizeof *l);
	if (in != NULL)
		*l = *in;
	if (l->handshake_us <= 0)
		l->handshake_us = PLUGIN_DEF_HANDSHAKE;
	if (l->idle_us <= 0)
		l->idle_us = PLUGIN_DEF_IDLE;
	if (l->overall_us <= 0)
		l->overall_us = PLUGIN_DEF_OVERALL;
	if (l->exit_grace_us <= 0)
		l->exit_grace_us = PLUGIN_DEF_GRACE;
	if (l->lines_per_sec == 0)
		l->lines_per_sec = PLUGIN_DEF_RATE;
}

static int
timeout_err(struct prun *r, struct cairn_err *err, const char *which,
    int64_t us)
{
	char d[TIME_STR_MAX];
	struct buf b;
	int rc;

	duration_format(us, d);
	buf_init(&b, 4096);
	buf_printf(&b, "plugin %s: %s timeout (%s) passed", r->path, which, d);
	stderr_note(r, &b);
	rc = cairn_err_set(err, CAIRN_ETIMEOUT, "%s", buf_cstr(&b));
	buf_free(&b);
	return rc;
}

/* The poll loop. 0 when an answer is in (result or hello-only done). */
static int
converse(struct prun *r, const atomic_int *stop, struct cairn_err *err)
{
	struct pollfd pfd[3];
	char chunk[16384];
	int64_t now, deadline, wait_us;
	const char *which;
	int nfd, rc, out_eof = 0;
	ssize_t n;
	siginfo_t si;
	char how[64];
	struct buf b;

	for (;;) {
		if ((stop != NULL && *stop) || (r->cbs != NULL &&
		    r->cbs->cancel != NULL && r->cbs->cancel(r->cbs->arg)))
			return cairn_err_set(err, CAIRN_ECANCELED,
			    "plugin %s: stopped", r->path);
		now = time_mono_us();
		if (!r->hello_seen) {
			deadline = r->start + r->lim->handshake_us;
			which = "handshake";
		} else {
			deadline = r->last_line + r->lim->idle_us;
			which = "idle";
		}
		if (r->start + r->lim->overall_us < deadline) {
			deadline = r->start + r->lim->overall_us;
			which = "overall";
		}
		if (now >= deadline)
			return timeout_err(r, err, which,
			    strcmp(which, "handshake") == 0 ? r->lim->handshake_us :
			    strcmp(which, "idle") == 0 ? r->lim->idle_us :
			    r->lim->overall_us);
		if (out_eof) {
			/* stdout closed without an answer: why? */
			buf_init(&b, 4096);
			if (leader_exited(r, TIME_US_PER_SEC, &si)) {
				describe_exit(&si, how, sizeof how);
				buf_printf(&b, "plugin %s %s before %s", r->path,
				    how, r->hello_seen ? "a result" :
				    "its hello");
			} else {
				buf_printf(&b, "plugin %s closed its output "
				    "before %s", r->path, r->hello_seen ?
				    "a result" : "its hello");
			}
			stderr_note(r, &b);
			rc = cairn_err_set(err, CAIRN_EFAIL, "%s", buf_cstr(&b));
			buf_free(&b);
			return rc;
		}
		nfd = 0;
		pfd[nfd].fd = r->fd_out;
		pfd[nfd++].events = POLLIN;
		if (r->fd_err >= 0) {
			pfd[nfd].fd = r->fd_err;
			pfd[nfd++].events = POLLIN;
		}
		if (r->fd_in >= 0 && r->hello_seen && r->out.len > 0) {
			pfd[nfd].fd = r->fd_in;
			pfd[nfd++].events = POLLOUT;
		}
		wait_us = deadline - now;
		if (wait_us > PLUGIN_POLL_MS * 1000LL)
			wait_us = PLUGIN_POLL_MS * 1000LL;
		rc = poll(pfd, (nfds_t)nfd, (int)(wait_us / 1000) + 1);
		if (rc < 0 && errno != EINTR)
			return cairn_err_errno(err, CAIRN_EIO, errno,
			    "plugin %s: poll", r->path);
		if (rc <= 0)
			continue;
		for (int i = 0; i < nfd; i++) {
			if (pfd[i].revents == 0)
				continue;
			if (pfd[i].fd == r->fd_in) {
				n = write(r->fd_in, r->out.data, r->out.len);
				if (n < 0 && errno != EAGAIN && errno != EINTR) {
					/* EPIPE: it is gone; stdout tells why */
					close_fd(&r->fd_in);
				} else if (n > 0) {
					buf_consume(&r->out, (size_t)n);
					if (r->out.len == 0 && r->close_in)
						close_fd(&r->fd_in);
				}
			} else if (pfd[i].fd == r->fd_err) {
				n = read(r->fd_err, chunk, sizeof chunk);
				if (n > 0) {
					keep_stderr(r, chunk, (size_t)n);
					log_debug("plugin %s stderr: %.*s",
					    r->path, (int)(n > 512 ? 512 : n),
					    chunk);
				} else if (n == 0 || (errno != EAGAIN &&
				    errno != EINTR)) {
					close_fd(&r->fd_err);
				}
			} else if (pfd[i].fd == r->fd_out) {
				n = read(r->fd_out, chunk, sizeof chunk);
				if (n > 0) {
					if (buf_append(&r->line, chunk,
					    (size_t)n) < 0)
						return proto_err(r, err,
						    "wrote a line longer than "
						    "%u bytes", PLUGIN_LINE_MAX);
					rc = drain_lines(r, err);
					if (rc < 0)
						return rc;
					if (rc == 1)
						return 0;
				} else if (n == 0 || (errno != EAGAIN &&
				    errno != EINTR)) {
					out_eof = 1;
				}
			}
		}
	}
}

int
plugin_run(const char *path, const cJSON *request,
    const struct plugin_limits *lim, const struct plugin_cbs *cbs,
    char *const *env_extra, const atomic_int *stop,
    struct plugin_hello *hello, cJSON **result, struct cairn_err *err)
{
	struct plugin_limits l;
	struct prun r;
	siginfo_t si;
	char how[64];
	char *text = NULL;
	int rc;

	if (result != NULL)
		*result = NULL;
	limits_fill(&l, lim);
	memset(&r, 0, sizeof r);
	r.path = path;
	r.lim = &l;
	r.cbs = cbs;
	r.pid = -1;
	r.fd_in = r.fd_out = r.fd_err = -1;
	r.hello = hello;
	if (hello != NULL)
		memset(hello, 0, sizeof *hello);
	buf_init(&r.line, PLUGIN_LINE_MAX + sizeof(char) * 16384);
	/* answers wait here while the plugin is slow to read: bounded */
	buf_init(&r.out, PLUGIN_REQUEST_MAX + 4 * PLUGIN_KUBE_REPLY_MAX);
	if (request != NULL) {
		text = json_print(request);
		if (strlen(text) >= PLUGIN_REQUEST_MAX) {
			rc = cairn_err_set(err, CAIRN_ETOOBIG, "plugin %s: "
			    "request over %u bytes", path, PLUGIN_REQUEST_MAX);
			goto out;
		}
		r.request = request;
		r.has_request = 1;
	}
	r.start = r.last_line = r.rate_start = time_mono_us();
	rc = spawn(&r, env_extra, err);
	if (rc < 0)
		goto out;
	rc = converse(&r, stop, err);
	if (rc == 0) {
		/* An answer is in: give the plugin its grace to exit. */
		close_fd(&r.fd_in);
		if (leader_exited(&r, l.exit_grace_us, &si)) {
			if (si.si_code != CLD_EXITED || si.si_status != 0) {
				describe_exit(&si, how, sizeof how);
				rc = cairn_err_set(err, CAIRN_EFAIL, "plugin %s "
				    "%s after its answer", path, how);
			}
		} else {
			log_warn("plugin %s did not exit within the grace "
			    "period after its answer; killed", path);
		}
	}
out:
	reap(&r);
	close_fd(&r.fd_in);
	close_fd(&r.fd_out);
	close_fd(&r.fd_err);
	buf_free(&r.line);
	buf_free(&r.out);
	free(text);
	if (rc == 0 && result != NULL) {
		*result = r.result;
		r.result = NULL;
	}
	cJSON_Delete(r.result);
	if (rc < 0 && hello != NULL)
		plugin_hello_free(hello);
	return rc;
}

/* ---- The plugin directory ---------------------------------------------- */

struct plugin_entry {
	char *path;		/* executable */
	struct plugin_hello hello;
	cJSON *config;		/* <file>.json object, or NULL */
};

struct plugin_dir {
	struct plugin_entry *e;
	size_t n;
};

static int
cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static cJSON *
load_config(const char *path)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct buf b;
	char chunk[4096];
	cJSON *o = NULL, *it;
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	buf_init(&b, PLUGIN_CONFIG_MAX);
	while ((n = read(fd, chunk, sizeof chunk)) > 0)
		if (buf_append(&b, chunk, (size_t)n) < 0)
			break;
	close(fd);
	o = json_parse(buf_cstr(&b), b.len, &err);
	buf_free(&b);
	if (o == NULL || !cJSON_IsObject(o)) {
		log_warn("plugin config %s ignored: not a JSON object%s%s",
		    path, err.msg[0] ? ": " : "", err.msg);
		cJSON_Delete(o);
		return NULL;
	}
	cJSON_ArrayForEach(it, o) {
		if (!cJSON_IsString(it)) {
			log_warn("plugin config %s ignored: values must be "
			    "strings", path);
			cJSON_Delete(o);
			return NULL;
		}
	}
	return o;
}

int
plugin_dir_open(const char *dir, const struct plugin_limits *lim,
    struct plugin_dir **out, struct cairn_err *err)
{
	struct cairn_err perr = CAIRN_ERR_INIT;
	struct plugin_dir *pd;
	struct dirent *de;
	struct stat st;
	char **names = NULL, *p, *cfg;
	size_t nn = 0, i;
	DIR *d;
	int e;

	*out = NULL;
	d = opendir(dir);
	if (d == NULL) {
		e = errno;
		return cairn_err_errno(err, e == ENOENT ? CAIRN_ENOTFOUND :
		    CAIRN_EIO, e, "plugin directory %s", dir);
	}
	names = xcalloc(PLUGIN_DIR_MAX + 1, sizeof *names);
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' || str_has_suffix(de->d_name, ".json"))
			continue;
		if (nn >= PLUGIN_DIR_MAX) {
			log_warn("plugin directory %s: more than %d files, "
			    "the rest ignored", dir, PLUGIN_DIR_MAX);
			break;
		}
		names[nn++] = xstrdup(de->d_name);
	}
	closedir(d);
	qsort(names, nn, sizeof *names, cmp_names);
	pd = xcalloc(1, sizeof *pd);
	pd->e = xcalloc(nn + 1, sizeof *pd->e);
	for (i = 0; i < nn; i++) {
		p = xasprintf("%s/%s", dir, names[i]);
		if (stat(p, &st) < 0 || !S_ISREG(st.st_mode) ||
		    access(p, X_OK) < 0) {
			free(p);
			continue;
		}
		cairn_err_clear(&perr);
		if (plugin_run(p, NULL, lim, NULL, NULL, NULL,
		    &pd->e[pd->n].hello, NULL, &perr) < 0) {
			log_warn("plugin %s left out: %s", p, perr.msg);
			free(p);
			continue;
		}
		cfg = xasprintf("%s.json", p);
		pd->e[pd->n].config = load_config(cfg);
		free(cfg);
		pd->e[pd->n].path = p;
		log_info("plugin %s: %s", pd->e[pd->n].hello.name, p);
		pd->n++;
	}
	strv_free(names);
	*out = pd;
	return 0;
}

void
plugin_dir_free(struct plugin_dir *pd)
{
	size_t i;

	if (pd == NULL)
		return;
	for (i = 0; i < pd->n; i++) {
		free(pd->e[i].path);
		plugin_hello_free(&pd->e[i].hello);
		cJSON_Delete(pd->e[i].config);
	}
	free(pd->e);
	free(pd);
}

size_t
plugin_dir_count(const struct plugin_dir *pd)
{
	return pd != NULL ? pd->n : 0;
}

const char *
plugin_dir_name(const struct plugin_dir *pd, size_t i)
{
	return i < plugin_dir_count(pd) ? pd->e[i].hello.name : NULL;
}

const char *
plugin_dir_path(const struct plugin_dir *pd, size_t i)
{
	return i < plugin_dir_count(pd) ? pd->e[i].path : NULL;
}

const cJSON *
plugin_dir_config(const struct plugin_dir *pd, size_t i)
{
	return i < plugin_dir_count(pd) ? pd->e[i].config : NULL;
}

int
plugin_dir_protocol(const struct plugin_dir *pd, size_t i)
{
	return i < plugin_dir_count(pd) ? pd->e[i].hello.protocol : 0;
}

int
plugin_dir_node_local(const struct plugin_dir *pd, size_t i)
{
	return i < plugin_dir_count(pd) ? pd->e[i].hello.node_local : 1;
}

int
plugin_dir_find(const struct plugin_dir *pd, const char *want,
    const char *type)
{
	size_t i;

	for (i = 0; i < plugin_dir_count(pd); i++) {
		if (want != NULL) {
			if (strcmp(pd->e[i].hello.name, want) == 0)
				return (int)i;
		} else if (plugin_hello_handles(&pd->e[i].hello, type)) {
			return (int)i;
		}
	}
	return -1;
}
