/*
 * config.c: where the client finds its cluster and credentials.
 *
 * Order (as kubectl and client-go): --kubeconfig FILE; else $KUBECONFIG, a
 * colon list of files merged so that the first file to set a value wins
 * (current-context, and each named cluster, context and user); else
 * ~/.kube/config; else in-cluster (KUBERNETES_SERVICE_HOST/PORT plus the
 * service-account directory). YAML is read with libyaml into a cJSON tree
 * (scalars stay strings) and then walked with the jsonutil helpers.
 *
 * Every error names the file and the field ("kubeconfig /x: cluster
 * \"c\": server: missing"). Relative file paths in a kubeconfig are relative
 * to the directory of that file. `-data` fields are base64 PEM decoded into
 * memory and handed to libcurl as blobs: no secret is ever written to disk.
 *
 * Tokens from a file (users[].user.tokenFile, the service-account token)
 * rotate: kcfg_token() re-reads the file when its mtime, size or inode
 * changed, checking at most once a second.
 *
 * Exec credential plugins (users[].user.exec: EKS, GKE, AKS, kubelogin)
 * run as client-go runs them: the command (relative to the kubeconfig's
 * directory when it names a path, else from $PATH) with the kubeconfig's
 * args and env added to ours, KUBERNETES_EXEC_INFO holding an
 * ExecCredential (spec.interactive false, spec.cluster with
 * provideClusterInfo), stdin /dev/null, stderr passed through. Its
 * stdout is an ExecCredential of the configured apiVersion
 * (client.authentication.k8s.io/v1 or v1beta1) with status.token and/or
 * status.clientCertificateData + clientKeyData, and an optional
 * expirationTimestamp: the credential is cached until then, and the
 * plugin runs again after it or when the API server answers 401
 * (kcfg_auth(force)). Only one thread runs the plugin at a time.
 *
 * The config is otherwise immutable after load, so only the token file
 * state and the exec credential are under a mutex.
 */
#include "config.h"
#include "kube/internal.h"
#include "base/buf.h"
#include "base/codec.h"
#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define KCFG_DEFAULT_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define KCFG_TOKEN_MAX (64u << 10)	/* a token file */
#define KCFG_PEM_MAX (1u << 20)		/* one certificate or key */
#define KCFG_TOKEN_CHECK_US (1 * TIME_US_PER_SEC)
#define KCFG_EXEC_OUT_MAX (1u << 20)	/* an ExecCredential on stdout */
#define KCFG_EXEC_TIMEOUT_US (120 * TIME_US_PER_SEC)
#define KCFG_EXEC_V1 "client.authentication.k8s.io/v1"
#define KCFG_EXEC_V1BETA1 "client.authentication.k8s.io/v1beta1"

struct blob {
	unsigned char *data;	/* owned */
	size_t len;
};

struct kube_config {
	char *source;		/* file(s) or "in-cluster" */
	char *context;		/* context name, "" in-cluster */
	char *cluster;
	char *user;
	char *server;
	char *ns;
	char *tls_server_name;
	int insecure;
	char *ca_file;
	struct blob ca_data;
	char *cert_file;
	struct blob cert_data;
	char *key_file;
	struct blob key_data;
	char *token;		/* static token */
	char *token_file;
	struct kexec *exec;	/* users[].user.exec, or NULL */

	pthread_mutex_t lock;	/* guards the token file state and exec's */
	char *file_token;	/* last token read from token_file */
	int64_t checked_us;	/* monotonic time of the last stat */
	struct stat token_st;	/* stat of the last read */
};

/* An exec credential plugin and the credential it gave last. */
struct kexec {
	char *where;		/* "kubeconfig F: user \"u\"" for errors */
	char *api_version;
	char *command;
	char **argv;		/* command + args, NULL-terminated */
	char **env;		/* "NAME=value" of the kubeconfig */
	char *install_hint;
	char *cluster_json;	/* spec.cluster for KUBERNETES_EXEC_INFO, or NULL */
	/* under cfg->lock */
	int have;		/* a credential is cached */
	char *token;
	struct blob cert, key;
	int64_t expires_us;	/* wall clock; 0: no expiry given */
};

static int
is_space_char(char c)
{
	return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/* ---- helpers ---- */

/* Resolve a path from a kubeconfig relative to that file's directory. */
static char *
rel_path(const char *file, const char *p)
{
	const char *slash;

	if (p[0] == '/' || file == NULL)
		return xstrdup(p);
	if (p[0] == '~' && p[1] == '/' && getenv("HOME") != NULL)
		return xasprintf("%s%s", getenv("HOME"), p + 1);
	slash = strrchr(file, '/');
	if (slash == NULL)
		return xstrdup(p);
	return xasprintf("%.*s/%s", (int)(slash - file), file, p);
}

static void
blob_free(struct blob *b)
{
	FREE_NULL(b->data);
	b->len = 0;
}

static void
kexec_forget(struct kexec *x)
{
	if (x->token != NULL)
		explicit_bzero(x->token, strlen(x->token));
	FREE_NULL(x->token);
	if (x->key.data != NULL)
		explicit_bzero(x->key.data, x->key.len);
	blob_free(&x->cert);
	blob_free(&x->key);
	x->have = 0;
	x->expires_us = 0;
}

static void
kexec_free(struct kexec *x)
{
	if (x == NULL)
		return;
	kexec_forget(x);
	free(x->where);
	free(x->api_version);
	free(x->command);
	strv_free(x->argv);
	strv_free(x->env);
	free(x->install_hint);
	free(x->cluster_json);
	free(x);
}

void
kube_config_free(struct kube_config *cfg)
{
	if (cfg == NULL)
		return;
	kexec_free(cfg->exec);
	free(cfg->source);
	free(cfg->context);
	free(cfg->cluster);
	free(cfg->user);
	free(cfg->server);
	free(cfg->ns);
	free(cfg->tls_server_name);
	free(cfg->ca_file);
	blob_free(&cfg->ca_data);
	free(cfg->cert_file);
	blob_free(&cfg->cert_data);
	free(cfg->key_file);
	blob_free(&cfg->key_data);
	free(cfg->token);
	free(cfg->token_file);
	free(cfg->file_token);
	pthread_mutex_destroy(&cfg->lock);
	free(cfg);
}

static struct kube_config *
kcfg_alloc(void)
{
	struct kube_config *cfg = xcalloc(1, sizeof *cfg);

	pthread_mutex_init(&cfg->lock, NULL);
	return cfg;
}

/* Check a PEM file is readable now, so the error names the field. */
static int
check_file(const char *file, const char *field, const char *path,
    struct cairn_err *err)
{
	char *data;
	size_t len;
	int rc;

	rc = buf_read_file(path, KCFG_PEM_MAX, "reading", &data, &len, err);
	if (rc < 0)
		return cairn_err_prefix(err, "kubeconfig %s: %s", file, field);
	free(data);
	return 0;
}

/* ---- kubeconfig files ---- */

/* A named entry (cluster, context, user) and the file that defined it. */
struct kentry {
	const char *name;
	const char *file;
	cJSON *node;		/* borrowed: the inner cluster/context/user map */
};

struct kfiles {
	cJSON *docs[32];
	char *paths[32];
	size_t n;
	const char *current;	/* first non-empty current-context */
	const char *current_file;
};

static void
kfiles_free(struct kfiles *kf)
{
	size_t i;

	for (i = 0; i < kf->n; i++) {
		cJSON_Delete(kf->docs[i]);
		free(kf->paths[i]);
	}
}

/* Find a named entry in list `key` (clusters...), first file wins. */
static int
kfiles_find(struct kfiles *kf, const char *key, const char *inner,
    const char *name, struct kentry *out)
{
	size_t i;
	cJSON *arr, *e;

	for (i = 0; i < kf->n; i++) {
		arr = cJSON_GetObjectItemCaseSensitive(kf->docs[i], key);
		if (!cJSON_IsArray(arr))
			continue;
		cJSON_ArrayForEach(e, arr) {
			const char *nm = json_str(e, "name");

			if (nm == NULL || strcmp(nm, name) != 0)
				continue;
			out->name = nm;
			out->file = kf->paths[i];
			out->node = cJSON_GetObjectItemCaseSensitive(e, inner);
			if (out->node == NULL || cJSON_IsNull(out->node))
				out->node = NULL;
			return 0;
		}
	}
	return -1;
}

static int
kfiles_load(struct kfiles *kf, const char *path, int missing_ok,
    struct cairn_err *err)
{
	char *data = NULL, *what = NULL;
	size_t len;
	cJSON *doc;
	int rc;

	if (kf->n >= sizeof kf->docs / sizeof kf->docs[0])
		return cairn_err_set(err, CAIRN_EINVAL,
		    "too many kubeconfig files (at most %zu)",
		    sizeof kf->docs / sizeof kf->docs[0]);
	rc = buf_read_file(path, CAIRN_CAP_FILE, "kubeconfig", &data, &len, err);
	if (rc == CAIRN_ENOTFOUND && missing_ok)
		return 0;
	if (rc < 0)
		return rc;
	what = xasprintf("kubeconfig %s", path);
	doc = codec_yaml_doc(data, len, CODEC_YAML_STRINGS, what, err);
	free(data);
	free(what);
	if (doc == NULL)
		return CAIRN_EINVAL;
	if (!cJSON_IsObject(doc)) {
		cJSON_Delete(doc);
		return cairn_err_set(err, CAIRN_EINVAL,
		    "kubeconfig %s: not a YAML mapping", path);
	}
	kf->docs[kf->n] = doc;
	kf->paths[kf->n] = xstrdup(path);
	kf->n++;
	if (kf->current == NULL) {
		const char *cc = json_str(doc, "current-context");

		if (cc != NULL && *cc != '\0') {
			kf->current = cc;
			kf->current_file = kf->paths[kf->n - 1];
		}
	}
	return 0;
}

/* A string field of an entry, or NULL; an empty string counts as unset. */
static const char *
field(const struct kentry *e, const char *name)
{
	const char *s;

	if (e->node == NULL)
		return NULL;
	s = json_str(e->node, name);
	return s != NULL && *s != '\0' ? s : NULL;
}

static int
pem_field(const struct kentry *e, const char *what, const char *name_file,
    const char *name_data, char **file_out, struct blob *data_out,
    struct cairn_err *err)
{
	const char *d = field(e, name_data), *f = field(e, name_file);

	if (d != NULL) {
		char *dec;

		if (codec_b64_decode(d, KCFG_PEM_MAX, &dec, &data_out->len) < 0)
			return cairn_err_set(err, CAIRN_EINVAL,
			    "kubeconfig %s: %s \"%s\": %s: not valid base64",
			    e->file, what, e->name, name_data);
		data_out->data = (unsigned char *)dec;
		if (strstr((char *)data_out->data, "-----BEGIN") == NULL)
			return cairn_err_set(err, CAIRN_EINVAL,
			    "kubeconfig %s: %s \"%s\": %s: not PEM data",
			    e->file, what, e->name, name_data);
		return 0;
	}
	if (f != NULL) {
		char *fl = xasprintf("%s \"%s\": %s", what, e->name, name_file);
		int rc;

		*file_out = rel_path(e->file, f);
		rc = check_file(e->file, fl, *file_out, err);
		free(fl);
		return rc;
	}
	return 0;
}

static int
parse_bool_field(const struct kentry *e, const char *what, const char *name,
    int *out, struct cairn_err *err)
{
	const char *s = field(e, name);

	*out = 0;
	if (s == NULL)
		return 0;
	if (flags_parse_bool(s, out) < 0)
		return cairn_err_set(err, CAIRN_EINVAL,
		    "kubeconfig %s: %s \"%s\": %s: not a boolean: \"%s\"",
		    e->file, what, e->name, name, s);
	return 0;
}

/* ---- exec credential plugins ---- */

/*
 * spec.cluster of KUBERNETES_EXEC_INFO (provideClusterInfo), from the
 * cluster entry as resolved: server, tls-server-name,
 * insecure-skip-tls-verify, certificate-authority-data, and config (the
 * cluster's "client.authentication.k8s.io/exec" extension).
 */
static char *
exec_cluster_json(const struct kube_config *cfg, const struct kentry *cl)
{
	cJSON *j = cJSON_CreateObject(), *e, *exts;
	char *ca = NULL, *out;
	size_t len = 0;

	cJSON_AddStringToObject(j, "server", cfg->server);
	if (cfg->tls_server_name != NULL)
		cJSON_AddStringToObject(j, "tls-server-name",
		    cfg->tls_server_name);
	if (cfg->insecure)
		cJSON_AddBoolToObject(j, "insecure-skip-tls-verify", 1);
	if (cfg->ca_data.data != NULL) {
		ca = codec_b64_encode(cfg->ca_data.data, cfg->ca_data.len);
	} else if (cfg->ca_file != NULL) {
		char *pem = NULL;

		if (buf_read_file(cfg->ca_file, KCFG_PEM_MAX, "reading", &pem,
		    &len, NULL) == 0)
			ca = codec_b64_encode(pem, len);
		free(pem);
	}
	if (ca != NULL)
		cJSON_AddStringToObject(j, "certificate-authority-data", ca);
	free(ca);
	exts = cl->node != NULL ? cJSON_GetObjectItemCaseSensitive(cl->node,
	    "extensions") : NULL;
	cJSON_ArrayForEach(e, exts) {
		const cJSON *x = cJSON_GetObjectItemCaseSensitive(e,
		    "extension");

		if (strcmp(json_str_or(e, "name", ""),
		    "client.authentication.k8s.io/exec") == 0 && x != NULL)
			cJSON_AddItemToObject(j, "config",
			    cJSON_Duplicate(x, 1));
	}
	out = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return out;
}

/* users[].user.exec -> cfg->exec, or an error naming the field. */
static int
parse_exec(const struct kentry *us, const struct kentry *cl,
    struct kube_config *cfg, struct cairn_err *err)
{
	const cJSON *ex = cJSON_GetObjectItemCaseSensitive(us->node, "exec");
	const cJSON *it;
	const char *av = json_str(ex, "apiVersion");
	const char *cmd = json_str(ex, "command");
	const char *mode = json_str(ex, "interactiveMode");
	const char *pci = json_str(ex, "provideClusterInfo");
	struct kexec *x;
	char *where = xasprintf("kubeconfig %s: user \"%s\": exec", us->file,
	    us->name);
	int rc = 0;

	if (!cJSON_IsObject(ex)) {
		rc = cairn_err_set(err, CAIRN_EINVAL, "%s: not a mapping",
		    where);
		goto fail;
	}
	if (av == NULL || (strcmp(av, KCFG_EXEC_V1) != 0 &&
	    strcmp(av, KCFG_EXEC_V1BETA1) != 0)) {
		rc = cairn_err_set(err, CAIRN_EINVAL, "%s: apiVersion: \"%s\" "
		    "is not supported (%s or %s)", where, av ? av : "",
		    KCFG_EXEC_V1, KCFG_EXEC_V1BETA1);
		goto fail;
	}
	if (cmd == NULL || *cmd == '\0') {
		rc = cairn_err_set(err, CAIRN_EINVAL, "%s: command: missing",
		    where);
		goto fail;
	}
	/* client-go: v1 must say; v1beta1 defaults to IfAvailable */
	if (mode == NULL && strcmp(av, KCFG_EXEC_V1) == 0) {
		rc = cairn_err_set(err, CAIRN_EINVAL, "%s: interactiveMode: "
		    "must be set for %s (Never or IfAvailable)", where, av);
		goto fail;
	}
	if (mode != NULL && strcmp(mode, "Never") != 0 &&
	    strcmp(mode, "IfAvailable") != 0) {
		rc = cairn_err_set(err, CAIRN_EINVAL, "%s: interactiveMode: "
		    "\"%s\": cairn runs plugins without a terminal (Never or "
		    "IfAvailable)", where, mode);
		goto fail;
	}
	x = xcalloc(1, sizeof *x);
	cfg->exec = x;
	x->where = where;
	where = NULL;
	x->api_version = xstrdup(av);
	/* a path in the command is relative to the kubeconfig (client-go) */
	x->command = strchr(cmd, '/') != NULL ? rel_path(us->file, cmd) :
	    xstrdup(cmd);
	x->argv = strv_push(NULL, x->command);
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(ex, "args")) {
		if (!cJSON_IsString(it)) {
			rc = cairn_err_set(err, CAIRN_EINVAL, "%s: args: not a "
			    "list of strings", x->where);
			goto out;
		}
		x->argv = strv_push(x->argv, it->valuestring);
	}
	x->env = xcalloc(1, sizeof *x->env);
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(ex, "env")) {
		const char *n = json_str(it, "name"), *v = json_str(it, "value");
		char *kv;

		if (n == NULL || *n == '\0' || strchr(n, '=') != NULL ||
		    v == NULL) {
			rc = cairn_err_set(err, CAIRN_EINVAL, "%s: env: each "
			    "entry needs a name and a value", x->where);
			goto out;
		}
		kv = xasprintf("%s=%s", n, v);
		x->env = strv_push(x->env, kv);
		free(kv);
	}
	x->install_hint = xstrdup(json_str(ex, "installHint"));
	if (pci != NULL && strcmp(pci, "true") == 0)
		x->cluster_json = exec_cluster_json(cfg, cl);
out:
	return rc;
fail:
	free(where);
	return rc;
}

/* Where is cmd: itself when it names a path, else the first in $PATH. */
static char *
exec_path(const char *cmd)
{
	const char *path = getenv("PATH"), *p, *end;

	if (strchr(cmd, '/') != NULL)
		return xstrdup(cmd);
	for (p = path != NULL && *path ? path : "/usr/bin:/bin"; *p != '\0';
	    p = *end ? end + 1 : end) {
		char *full;

		end = strchr(p, ':');
		if (end == NULL)
			end = p + strlen(p);
		/* an empty entry is the current directory */
		full = end == p ? xasprintf("./%s", cmd) :
		    xasprintf("%.*s/%s", (int)(end - p), p, cmd);
		if (access(full, X_OK) == 0)
			return full;
		free(full);
	}
	return NULL;
}

/* Our environment with the plugin's variables set over it. Owned. */
static char **
exec_env(const struct kexec *x, const char *info)
{
	char **env = xcalloc(1, sizeof *env);
	char *kv;

	for (char **e = environ; e != NULL && *e != NULL; e++) {
		size_t n = strcspn(*e, "=");
		int over = strncmp(*e, "KUBERNETES_EXEC_INFO=", 21) == 0;

		for (size_t i = 0; x->env[i] != NULL && !over; i++)
			over = strncmp(x->env[i], *e, n + 1) == 0;
		if (!over)
			env = strv_push(env, *e);
	}
	for (size_t i = 0; x->env[i] != NULL; i++)
		env = strv_push(env, x->env[i]);
	kv = xasprintf("KUBERNETES_EXEC_INFO=%s", info);
	env = strv_push(env, kv);
	free(kv);
	return env;
}

/* Run the plugin; its stdout into out (capped). */
static int
exec_spawn(const struct kexec *x, struct buf *out, int *status,
    struct cairn_err *err)
{
	char *info, *path = exec_path(x->command);
	char **env = NULL;
	int fds[2] = { -1, -1 }, devnull = -1, rc = 0, st = 0;
	int64_t deadline = time_mono_us() + KCFG_EXEC_TIMEOUT_US;
	pid_t pid;

	if (path == NULL)
		return cairn_err_set(err, CAIRN_EAUTH, "%s: command \"%s\" not "
		    "found in $PATH%s%s", x->where, x->command,
		    x->install_hint ? ": " : "", x->install_hint ?
		    x->install_hint : "");
	info = xasprintf("{\"kind\":\"ExecCredential\",\"apiVersion\":\"%s\","
	    "\"spec\":{\"interactive\":false%s%s}}", x->api_version,
	    x->cluster_json ? ",\"cluster\":" : "", x->cluster_json ?
	    x->cluster_json : "");
	env = exec_env(x, info);
	free(info);
	devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (devnull < 0 || pipe2(fds, O_CLOEXEC) < 0) {
		rc = cairn_err_errno(err, CAIRN_EAUTH, errno, "%s: pipe",
		    x->where);
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		rc = cairn_err_errno(err, CAIRN_EAUTH, errno, "%s: fork",
		    x->where);
		goto out;
	}
	if (pid == 0) {
		/* Child: async-signal-safe calls only. */
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		if (dup2(devnull, 0) < 0 || dup2(fds[1], 1) < 0)
			_exit(126);
		close_range(3, ~0u, 0);
		execve(path, x->argv, env);
		_exit(127);
	}
	close(fds[1]);
	fds[1] = -1;
	for (;;) {
		struct pollfd p = { fds[0], POLLIN, 0 };
		int64_t left = deadline - time_mono_us();
		char tmp[8192];
		ssize_t n;

		if (left <= 0) {
			kill(pid, SIGKILL);
			rc = cairn_err_set(err, CAIRN_EAUTH, "%s: %s did not "
			    "finish in %lld s", x->where, x->command,
			    (long long)(KCFG_EXEC_TIMEOUT_US / TIME_US_PER_SEC));
			break;
		}
		if (poll(&p, 1, (int)(left / 1000 + 1)) < 0) {
			if (errno == EINTR)
				continue;
			kill(pid, SIGKILL);
			rc = cairn_err_errno(err, CAIRN_EAUTH, errno, "%s: poll",
			    x->where);
			break;
		}
		if (p.revents == 0)
			continue;
		n = read(fds[0], tmp, sizeof tmp);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (buf_append(out, tmp, (size_t)n) < 0) {
			kill(pid, SIGKILL);
			rc = cairn_err_set(err, CAIRN_EAUTH, "%s: %s wrote more "
			    "than %u bytes", x->where, x->command,
			    KCFG_EXEC_OUT_MAX);
			break;
		}
	}
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	*status = st;
out:
	if (fds[0] >= 0)
		close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	if (devnull >= 0)
		close(devnull);
	strv_free(env);
	free(path);
	return rc;
}

/*
 * Run the plugin and take its ExecCredential into x. cfg->lock held.
 */
static int
exec_run(struct kexec *x, struct cairn_err *err)
{
	struct buf out;
	cJSON *cred = NULL;
	const char *av, *tok, *cert, *key, *exp;
	int status = 0, rc;

	buf_init(&out, KCFG_EXEC_OUT_MAX);
	rc = exec_spawn(x, &out, &status, err);
	if (rc < 0)
		goto done;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		rc = cairn_err_set(err, CAIRN_EAUTH, "%s: %s %s %d%s%s",
		    x->where, x->command, WIFEXITED(status) ?
		    "exited with status" : "killed by signal", WIFEXITED(status) ?
		    WEXITSTATUS(status) : WTERMSIG(status),
		    WIFEXITED(status) && WEXITSTATUS(status) == 127 &&
		    x->install_hint ? ": " : "", WIFEXITED(status) &&
		    WEXITSTATUS(status) == 127 && x->install_hint ?
		    x->install_hint : "");
		goto done;
	}
	cred = json_parse(out.data != NULL ? out.data : "", out.len, NULL);
	if (!cJSON_IsObject(cred) || strcmp(json_str_or(cred, "kind", ""),
	    "ExecCredential") != 0) {
		rc = cairn_err_set(err, CAIRN_EAUTH, "%s: %s did not print an "
		    "ExecCredential", x->where, x->command);
		goto done;
	}
	av = json_str_or(cred, "apiVersion", "");
	if (strcmp(av, x->api_version) != 0) {
		rc = cairn_err_set(err, CAIRN_EAUTH, "%s: the plugin is "
		    "configured for %s but printed %s", x->where,
		    x->api_version, av);
		goto done;
	}
	tok = json_str(cred, "status.token");
	cert = json_str(cred, "status.clientCertificateData");
	key = json_str(cred, "status.clientKeyData");
	exp = json_str(cred, "status.expirationTimestamp");
	if ((cert != NULL && *cert) != (key != NULL && *key)) {
		rc = cairn_err_set(err, CAIRN_EAUTH, "%s: the ExecCredential "
		    "has only one of clientCertificateData and clientKeyData",
		    x->where);
		goto done;
	}
	if ((tok == NULL || *tok == '\0') && (cert == NULL || *cert == '\0')) {
		rc = cairn_err_set(err, CAIRN_EAUTH, "%s: the ExecCredential "
		    "has neither status.token nor a client certificate",
		    x->where);
		goto done;
	}
	kexec_forget(x);
	if (exp != NULL && *exp != '\0' && time_parse(exp,
	    &x->expires_us) < 0) {
		rc = cairn_err_set(err, CAIRN_EAUTH, "%s: expirationTimestamp "
		    "\"%s\" is not RFC 3339", x->where, exp);
		goto done;
	}
	x->token = tok != NULL && *tok ? xstrdup(tok) : NULL;
	if (cert != NULL && *cert) {
		x->cert.len = strlen(cert);
		x->cert.data = (unsigned char *)xstrdup(cert);
		x->key.len = strlen(key);
		x->key.data = (unsigned char *)xstrdup(key);
	}
	x->have = 1;
	log_debug("%s: new credential from %s%s%s", x->where, x->command,
	    exp ? ", expires " : "", exp ? exp : "");
done:
	if (out.data != NULL)
		explicit_bzero(out.data, out.len);
	buf_free(&out);
	if (cred != NULL) {
		/* the token is in the tree too */
		cJSON *t = json_get(cred, "status");

		if (t != NULL)
			json_delete(cred, "status");
		cJSON_Delete(cred);
	}
	return rc;
}

int
kcfg_auth(struct kube_config *cfg, int force, struct kcfg_auth *out,
    struct cairn_err *err)
{
	struct kexec *x = cfg->exec;
	int rc = 0;

	memset(out, 0, sizeof *out);
	if (x == NULL) {
		out->token = kcfg_token(cfg, force);
		return 0;
	}
	pthread_mutex_lock(&cfg->lock);
	if (force || !x->have || (x->expires_us != 0 &&
	    time_now_us() >= x->expires_us))
		rc = exec_run(x, err);
	if (rc == 0) {
		out->token = xstrdup(x->token);
		if (x->cert.data != NULL) {
			out->cert = xmalloc(x->cert.len + 1);
			memcpy(out->cert, x->cert.data, x->cert.len + 1);
			out->cert_len = x->cert.len;
			out->key = xmalloc(x->key.len + 1);
			memcpy(out->key, x->key.data, x->key.len + 1);
			out->key_len = x->key.len;
		}
	}
	pthread_mutex_unlock(&cfg->lock);
	return rc;
}

void
kcfg_auth_free(struct kcfg_auth *a)
{
	if (a->token != NULL)
		explicit_bzero(a->token, strlen(a->token));
	free(a->token);
	if (a->key != NULL)
		explicit_bzero(a->key, a->key_len);
	free(a->key);
	free(a->cert);
	memset(a, 0, sizeof *a);
}

static int
load_kubeconfig(struct kfiles *kf, const char *context,
    struct kube_config **out, struct cairn_err *err)
{
	struct kube_config *cfg;
	struct kentry ctx, cl, us;
	const char *ctxname, *s, *files;
	struct buf src;
	size_t i;
	int rc;

	ctxname = context != NULL && *context ? context : kf->current;
	buf_init(&src, 4096);
	for (i = 0; i < kf->n; i++)
		buf_printf(&src, "%s%s", i ? ":" : "", kf->paths[i]);
	files = buf_cstr(&src);
	if (ctxname == NULL) {
		rc = cairn_err_set(err, CAIRN_EINVAL,
		    "kubeconfig %s: current-context: not set (and no --context)",
		    files);
		buf_free(&src);
		return rc;
	}
	if (kfiles_find(kf, "contexts", "context", ctxname, &ctx) < 0) {
		rc = cairn_err_set(err, CAIRN_EINVAL,
		    "kubeconfig %s: %s: context \"%s\" not found in contexts",
		    context != NULL && *context ? files : kf->current_file,
		    context != NULL && *context ? "--context" :
		    "current-context", ctxname);
		buf_free(&src);
		return rc;
	}
	s = field(&ctx, "cluster");
	if (s == NULL) {
		rc = cairn_err_set(err, CAIRN_EINVAL,
		    "kubeconfig %s: context \"%s\": cluster: missing",
		    ctx.file, ctxname);
		buf_free(&src);
		return rc;
	}
	if (kfiles_find(kf, "clusters", "cluster", s, &cl) < 0 ||
	    cl.node == NULL) {
		rc = cairn_err_set(err, CAIRN_EINVAL,
		    "kubeconfig %s: context \"%s\": cluster: \"%s\" not found "
		    "in clusters", ctx.file, ctxname, s);
		buf_free(&src);
		return rc;
	}
	memset(&us, 0, sizeof us);
	s = field(&ctx, "user");
	if (s != NULL && kfiles_find(kf, "users", "user", s, &us) < 0) {
		rc = cairn_err_set(err, CAIRN_EINVAL,
		    "kubeconfig %s: context \"%s\": user: \"%s\" not found "
		    "in users", ctx.file, ctxname, s);
		buf_free(&src);
		return rc;
	}

	cfg = kcfg_alloc();
	cfg->source = buf_take(&src, NULL);
	cfg->context = xstrdup(ctxname);
	cfg->cluster = xstrdup(cl.name);
	cfg->user = xstrdup(us.name ? us.name : "");
	s = field(&ctx, "namespace");
	cfg->ns = xstrdup(s ? s : "default");

	s = field(&cl, "server");
	if (s == NULL) {
		rc = cairn_err_set(err, CAIRN_EINVAL,
		    "kubeconfig %s: cluster \"%s\": server: missing",
		    cl.file, cl.name);
		goto fail;
	}
	if (!str_has_prefix(s, "https://") && !str_has_prefix(s, "http://")) {
		rc = cairn_err_set(err, CAIRN_EINVAL,
		    "kubeconfig %s: cluster \"%s\": server: \"%s\" is not an "
		    "http(s):// URL", cl.file, cl.name, s);
		goto fail;
	}
	cfg->server = xstrdup(s);
	while (str_has_suffix(cfg->server, "/") &&
	    strlen(cfg->server) > strlen("https://"))
		cfg->server[strlen(cfg->server) - 1] = '\0';
	s = field(&cl, "tls-server-name");
	cfg->tls_server_name = xstrdup(s);
	rc = parse_bool_field(&cl, "cluster", "insecure-skip-tls-verify",
	    &cfg->insecure, err);
	if (rc < 0)
		goto fail;
	rc = pem_field(&cl, "cluster", "certificate-authority",
	    "certificate-authority-data", &cfg->ca_file, &cfg->ca_data, err);
	if (rc < 0)
		goto fail;

	if (us.node != NULL) {
		if (cJSON_GetObjectItemCaseSensitive(us.node,
		    "auth-provider") != NULL)
			log_warn("kubeconfig %s: user \"%s\": auth-provider "
			    "credentials are not supported (client-go removed "
			    "them; use an exec plugin); ignored", us.file,
			    us.name);
		if (cJSON_GetObjectItemCaseSensitive(us.node, "exec") != NULL) {
			rc = parse_exec(&us, &cl, cfg, err);
			if (rc < 0)
				goto fail;
		}
		rc = pem_field(&us, "user", "client-certificate",
		    "client-certificate-data", &cfg->cert_file,
		    &cfg->cert_data, err);
		if (rc < 0)
			goto fail;
		rc = pem_field(&us, "user", "client-key", "client-key-data",
		    &cfg->key_file, &cfg->key_data, err);
		if (rc < 0)
			goto fail;
		if ((cfg->cert_file || cfg->cert_data.data) !=
		    (cfg->key_file || cfg->key_data.data)) {
			rc = cairn_err_set(err, CAIRN_EINVAL,
			    "kubeconfig %s: user \"%s\": client-key: a client "
			    "certificate needs a key and a key a certificate",
			    us.file, us.name);
			goto fail;
		}
		cfg->token = xstrdup(field(&us, "token"));
		s = field(&us, "tokenFile");
		if (cfg->token == NULL && s != NULL) {
			char *t;

			cfg->token_file = rel_path(us.file, s);
			t = kcfg_token(cfg, 1);
			if (t == NULL) {
				rc = cairn_err_set(err, CAIRN_EINVAL,
				    "kubeconfig %s: user \"%s\": tokenFile: "
				    "cannot read %s (or it is empty)", us.file,
				    us.name, cfg->token_file);
				goto fail;
			}
			free(t);
		}
	}
	*out = cfg;
	return 0;
fail:
	kube_config_free(cfg);
	return rc;
}

/* ---- in-cluster ---- */

static int
load_in_cluster(struct kube_config **out, struct cairn_err *err)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	const char *dir = getenv("CAIRN_SERVICEACCOUNT_DIR");
	const char *pns = getenv("POD_NAMESPACE");
	struct kube_config *cfg;
	char *ns = NULL, *t;
	size_t len;
	int rc;

	if (dir == NULL || *dir == '\0')
		dir = KCFG_DEFAULT_SA_DIR;
	cfg = kcfg_alloc();
	cfg->source = xstrdup("in-cluster");
	cfg->context = xstrdup("");
	cfg->cluster = xstrdup("");
	cfg->user = xstrdup("");
	if (strchr(host, ':') != NULL)
		cfg->server = xasprintf("https://[%s]:%s", host, port);
	else
		cfg->server = xasprintf("https://%s:%s", host, port);
	cfg->token_file = xasprintf("%s/token", dir);
	cfg->ca_file = xasprintf("%s/ca.crt", dir);
	t = kcfg_token(cfg, 1);
	if (t == NULL) {
		rc = cairn_err_set(err, CAIRN_EINVAL,
		    "in-cluster config: token: cannot read %s (or it is empty)",
		    cfg->token_file);
		goto fail;
	}
	free(t);
	rc = buf_read_file(cfg->ca_file, KCFG_PEM_MAX, "reading", &t, &len, err);
	if (rc < 0) {
		cairn_err_prefix(err, "in-cluster config: ca.crt");
		goto fail;
	}
	free(t);
	if (pns != NULL && *pns != '\0')
		cfg->ns = xstrdup(pns);
	else {
		char *p = xasprintf("%s/namespace", dir);

		if (buf_read_file(p, 4096, "reading", &ns, &len, NULL) == 0) {
			while (len > 0 && is_space_char(ns[len - 1]))
				ns[--len] = '\0';
			if (len > 0)
				cfg->ns = ns;
			else
				free(ns);
		}
		free(p);
		if (cfg->ns == NULL)
			cfg->ns = xstrdup("default");
	}
	*out = cfg;
	return 0;
fail:
	kube_config_free(cfg);
	return rc;
}

int
kube_config_load(const struct kube_config_opts *o, struct kube_config **out,
    struct cairn_err *err)
{
	struct kfiles kf;
	const char *env = getenv("KUBECONFIG"), *home = getenv("HOME");
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	const char *ctx = o != NULL ? o->context : NULL;
	char *path;
	int rc;

	*out = NULL;
	memset(&kf, 0, sizeof kf);
	if (o != NULL && o->kubeconfig != NULL && *o->kubeconfig != '\0') {
		rc = kfiles_load(&kf, o->kubeconfig, 0, err);
		if (rc < 0)
			goto done;
	} else if (env != NULL && *env != '\0') {
		char **v = str_split(env, ':', NULL);
		size_t i;

		for (i = 0; v[i] != NULL; i++) {
			rc = kfiles_load(&kf, v[i], 1, err);
			if (rc < 0) {
				strv_free(v);
				goto done;
			}
		}
		strv_free(v);
		if (kf.n == 0) {
			rc = cairn_err_set(err, CAIRN_ENOTFOUND,
			    "KUBECONFIG=%s: none of its files exists", env);
			goto done;
		}
	} else if (home != NULL && *home != '\0') {
		path = xasprintf("%s/.kube/config", home);
		rc = kfiles_load(&kf, path, 1, err);
		free(path);
		if (rc < 0)
			goto done;
	}
	if (kf.n > 0) {
		rc = load_kubeconfig(&kf, ctx, out, err);
		goto done;
	}
	if (host != NULL && *host != '\0' && port != NULL && *port != '\0') {
		rc = load_in_cluster(out, err);
		goto done;
	}
	rc = cairn_err_set(err, CAIRN_ENOTFOUND,
	    "no cluster configuration: no --kubeconfig, $KUBECONFIG or "
	    "~/.kube/config, and not in a cluster "
	    "(KUBERNETES_SERVICE_HOST/PORT unset)");
done:
	kfiles_free(&kf);
	return rc;
}

/* ---- tokens ---- */

char *
kcfg_token(struct kube_config *cfg, int force)
{
	struct stat st;
	char *t = NULL, *res;
	size_t len;
	int64_t now;

	if (cfg->token != NULL)
		return xstrdup(cfg->token);
	if (cfg->token_file == NULL)
		return NULL;
	pthread_mutex_lock(&cfg->lock);
	now = time_mono_us();
	if (!force && cfg->file_token != NULL &&
	    now - cfg->checked_us < KCFG_TOKEN_CHECK_US)
		goto out;
	cfg->checked_us = now;
	if (stat(cfg->token_file, &st) < 0)
		goto out;	/* keep the last token */
	if (cfg->file_token != NULL && st.st_mtim.tv_sec ==
	    cfg->token_st.st_mtim.tv_sec && st.st_mtim.tv_nsec ==
	    cfg->token_st.st_mtim.tv_nsec && st.st_size ==
	    cfg->token_st.st_size && st.st_ino == cfg->token_st.st_ino)
		goto out;
	if (buf_read_file(cfg->token_file, KCFG_TOKEN_MAX, "token", &t, &len,
	    NULL) < 0)
		goto out;
	while (len > 0 && is_space_char(t[len - 1]))
		t[--len] = '\0';
	if (len == 0) {
		free(t);
		goto out;
	}
	if (cfg->file_token != NULL)
		log_info("re-read rotated token from %s", cfg->token_file);
	free(cfg->file_token);
	cfg->file_token = t;
	cfg->token_st = st;
out:
	res = xstrdup(cfg->file_token);
	pthread_mutex_unlock(&cfg->lock);
	return res;
}

/* ---- accessors ---- */

void
kcfg_tls(const struct kube_config *cfg, struct kcfg_tls *out)
{
	memset(out, 0, sizeof *out);
	out->ca_file = cfg->ca_file;
	out->ca_data = cfg->ca_data.data;
	out->ca_len = cfg->ca_data.len;
	out->cert_file = cfg->cert_file;
	out->cert_data = cfg->cert_data.data;
	out->cert_len = cfg->cert_data.len;
	out->key_file = cfg->key_file;
	out->key_data = cfg->key_data.data;
	out->key_len = cfg->key_data.len;
	out->tls_server_name = cfg->tls_server_name;
	out->insecure = cfg->insecure;
}

const char *
kube_config_server(const struct kube_config *cfg)
{
	return cfg->server;
}

const char *
kube_config_namespace(const struct kube_config *cfg)
{
	return cfg->ns;
}

const char *
kube_config_source(const struct kube_config *cfg)
{
	return cfg->source;
}

const char *
kube_config_context(const struct kube_config *cfg)
{
	return cfg->context;
}

static void
add_secret(cJSON *j, const char *key, const void *p, size_t len)
{
	char tmp[64];

	if (p == NULL) {
		cJSON_AddNullToObject(j, key);
		return;
	}
	snprintf(tmp, sizeof tmp, "<redacted %zu bytes>", len);
	cJSON_AddStringToObject(j, key, tmp);
}

static void
add_str(cJSON *j, const char *key, const char *s)
{
	if (s == NULL)
		cJSON_AddNullToObject(j, key);
	else
		cJSON_AddStringToObject(j, key, s);
}

cJSON *
kube_config_describe(const struct kube_config *cfg)
{
	cJSON *j = cJSON_CreateObject();

	add_str(j, "source", cfg->source);
	add_str(j, "context", cfg->context);
	add_str(j, "cluster", cfg->cluster);
	add_str(j, "user", cfg->user);
	add_str(j, "server", cfg->server);
	add_str(j, "namespace", cfg->ns);
	add_str(j, "tlsServerName", cfg->tls_server_name);
	cJSON_AddBoolToObject(j, "insecure", cfg->insecure);
	if (cfg->ca_data.data != NULL)
		add_secret(j, "ca", cfg->ca_data.data, cfg->ca_data.len);
	else
		add_str(j, "ca", cfg->ca_file);
	if (cfg->cert_data.data != NULL)
		add_secret(j, "clientCert", cfg->cert_data.data,
		    cfg->cert_data.len);
	else
		add_str(j, "clientCert", cfg->cert_file);
	if (cfg->key_data.data != NULL)
		add_secret(j, "clientKey", cfg->key_data.data,
		    cfg->key_data.len);
	else
		add_str(j, "clientKey", cfg->key_file);
	if (cfg->token != NULL) {
		add_secret(j, "token", cfg->token, strlen(cfg->token));
	} else {
		struct kube_config *m = (struct kube_config *)cfg;

		pthread_mutex_lock(&m->lock);
		if (m->file_token != NULL)
			add_secret(j, "token", m->file_token,
			    strlen(m->file_token));
		else
			cJSON_AddNullToObject(j, "token");
		pthread_mutex_unlock(&m->lock);
	}
	add_str(j, "tokenFile", cfg->token_file);
	return j;
}
