/*
 * test_plugin.c: the plugin protocol runner against real child processes:
 * the example shell plugin, and plugins that misbehave in every way the
 * runner promises to survive (exit early, garbage, hang, flood, long line,
 * wrong version), checking the process group is gone afterwards and that
 * no credential reaches a plugin's environment.
 */
#include "config.h"

#include <stdatomic.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/jsonutil.h"
#include "base/buf.h"
#include "base/mem.h"
#include "base/util.h"
#include "base/timeutil.h"
#include "engine/plugin.h"
#include "tests/unit/unit.h"

static char tmp[1024];

static char *
script(const char *name, const char *body)
{
	char *p = xasprintf("%s/%s", tmp, name);
	FILE *f = fopen(p, "w");

	if (f == NULL)
		return p;
	fprintf(f, "#!/bin/sh\n%s", body);
	fclose(f);
	chmod(p, 0755);
	return p;
}

#define HELLO "echo '{\"type\":\"hello\",\"name\":\"t\",\"protocolVersion\":1,\"volumeTypes\":[\"hostPath\"]}'\n"

struct prog {
	int64_t last_done, last_total, calls;
	int monotonic;
	char prop[256];
};

static void
on_progress(void *arg, int64_t done, int64_t total)
{
	struct prog *p = arg;

	if (done < p->last_done)
		p->monotonic = 0;
	p->last_done = done;
	p->last_total = total;
	p->calls++;
}

static void
on_prop(void *arg, const char *k, const char *v)
{
	struct prog *p = arg;

	snprintf(p->prop, sizeof p->prop, "%s=%s", k, v);
}

static cJSON *
request(const char *type)
{
	cJSON *r = cJSON_CreateObject();

	cJSON_AddStringToObject(r, "type", type);
	return r;
}

static int
run(const char *path, const cJSON *req, const struct plugin_limits *lim,
    struct cairn_err *err, cJSON **res)
{
	return plugin_run(path, req, lim, NULL, NULL, NULL, NULL, res, err);
}

/* pid is a zombie: killed, waiting for whoever reaps orphans. */
static int
pid_zombie(long pid)
{
	char path[64], buf[256], *rp;
	FILE *f;
	size_t n;

	snprintf(path, sizeof path, "/proc/%ld/stat", pid);
	f = fopen(path, "r");
	if (f == NULL)
		return 0;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	rp = strrchr(buf, ')');		/* "pid (comm) S ..." */
	return rp != NULL && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

/*
 * A pid written by a plugin into file is gone: killed. An orphan killed
 * with its group is reaped by PID 1 or a subreaper, when they get to it
 * (in a container that can take seconds): a zombie counts as gone.
 */
static int
pid_gone(const char *file)
{
	FILE *f = fopen(file, "r");
	long pid = 0;
	int64_t end = time_mono_us() + 2 * TIME_US_PER_SEC;

	if (f == NULL)
		return 0;
	if (fscanf(f, "%ld", &pid) != 1)
		pid = 0;
	fclose(f);
	if (pid <= 0)
		return 0;
	while (time_mono_us() < end) {
		if ((kill((pid_t)pid, 0) < 0 && errno == ESRCH) ||
		    pid_zombie(pid))
			return 1;
		usleep(20000);
	}
	{
		char path[64], buf[256] = "";

		snprintf(path, sizeof path, "/proc/%ld/stat", pid);
		f = fopen(path, "r");
		if (f != NULL) {
			if (fgets(buf, sizeof buf, f) == NULL)
				buf[0] = '\0';
			fclose(f);
		}
		fprintf(stderr, "pid %ld still there after 2 s: %s\n", pid, buf);
	}
	return 0;
}

static void
test_example_plugin(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct plugin_cbs cbs;
	struct plugin_hello h;
	struct prog pg = { 0, 0, 0, 1, "" };
	char *src, *snap, *dst, *cmd, *path;
	cJSON *req, *res = NULL, *cfg;
	const char *id;
	int rc;

	path = xasprintf("%s/plugins/example-snapshotter", CAIRN_SRCDIR);
	src = xasprintf("%s/ex-src", tmp);
	snap = xasprintf("%s/ex-snaps", tmp);
	dst = xasprintf("%s/ex-dst", tmp);
	cmd = xasprintf("mkdir -p %s/sub && head -c 300000 /dev/urandom > "
	    "%s/sub/data && echo hi > %s/a && ln -sf a %s/link", src, src,
	    src, src);
	CHECK(system(cmd) == 0);
	free(cmd);

	memset(&cbs, 0, sizeof cbs);
	cbs.progress = on_progress;
	cbs.property = on_prop;
	cbs.arg = &pg;
	req = request("create_snapshot");
	cJSON_AddStringToObject(req, "volumeName", "pv-1");
	cJSON_AddStringToObject(req, "volumePath", src);
	cfg = cJSON_AddObjectToObject(req, "config");
	cJSON_AddStringToObject(cfg, "snapshotDir", snap);
	rc = plugin_run(path, req, NULL, &cbs, NULL, NULL, &h, &res, &err);
	cJSON_Delete(req);
	CHECK_INT(rc, 0);
	if (rc < 0)
		fprintf(stderr, "%s\n", err.msg);
	REQUIRE(res != NULL);
	CHECK_STR(h.name, "example-snapshotter");
	CHECK(plugin_hello_handles(&h, "hostPath"));
	CHECK(plugin_hello_handles(&h, "local"));
	CHECK(!plugin_hello_handles(&h, "nfs"));
	plugin_hello_free(&h);
	CHECK(pg.calls >= 2);
	CHECK(pg.monotonic);
	CHECK(pg.last_total > 300000);
	CHECK_INT(pg.last_done, pg.last_total);
	CHECK(strncmp(pg.prop, "file=", 5) == 0);
	id = json_str(res, "snapshotID");
	REQUIRE(id != NULL);

	req = request("restore_volume");
	cJSON_AddStringToObject(req, "snapshotID", id);
	cJSON_AddStringToObject(req, "targetPath", dst);
	cfg = cJSON_AddObjectToObject(req, "config");
	cJSON_AddStringToObject(cfg, "snapshotDir", snap);
	cJSON *res2 = NULL;
	rc = plugin_run(path, req, NULL, NULL, NULL, NULL, NULL, &res2, &err);
	cJSON_Delete(req);
	CHECK_INT(rc, 0);
	CHECK_STR(json_str(res2, "volumeID"), dst);
	cJSON_Delete(res2);
	cmd = xasprintf("diff -r --no-dereference %s %s", src, dst);
	CHECK(system(cmd) == 0);
	free(cmd);

	req = request("delete_snapshot");
	cJSON_AddStringToObject(req, "snapshotID", id);
	cfg = cJSON_AddObjectToObject(req, "config");
	cJSON_AddStringToObject(cfg, "snapshotDir", snap);
	res2 = NULL;
	CHECK_INT(run(path, req, NULL, &err, &res2), 0);
	cJSON_Delete(res2);
	cJSON_Delete(req);
	cmd = xasprintf("test -z \"$(ls %s)\"", snap);
	CHECK(system(cmd) == 0);
	free(cmd);
	cJSON_Delete(res);
	free(src);
	free(snap);
	free(dst);
	free(path);
}

static void
test_exits_early(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	char *p = script("early", HELLO "echo 'disk on fire' >&2\nexit 3\n");
	cJSON *req = request("create_snapshot"), *res = NULL;

	CHECK_INT(run(p, req, NULL, &err, &res), CAIRN_EFAIL);
	CHECK(strstr(err.msg, "exited with status 3 before a result") != NULL);
	CHECK(strstr(err.msg, "disk on fire") != NULL);
	CHECK(res == NULL);
	cJSON_Delete(req);
	free(p);
	p = script("nohello", "exit 0\n");
	CHECK_INT(run(p, NULL, NULL, &err, NULL), CAIRN_EFAIL);
	CHECK(strstr(err.msg, "before its hello") != NULL);
	free(p);
	p = script("killed", HELLO "kill -9 $$\n");
	req = request("create_snapshot");
	CHECK_INT(run(p, req, NULL, &err, NULL), CAIRN_EFAIL);
	CHECK(strstr(err.msg, "killed by signal 9") != NULL);
	cJSON_Delete(req);
	free(p);
}

/*
 * Issue 19: a plugin's bytes are not trusted. Invalid UTF-8 in its error
 * message, in a result and in a line that is not JSON, and a message of
 * 3-byte characters long enough that cairn's own caps cut it: every error
 * message and every string of the result is valid UTF-8.
 */
static void
test_untrusted_text(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	cJSON *req = request("create_snapshot"), *res = NULL;
	char *p, *body, *euro = NULL;
	struct buf b;

	p = script("latin1", HELLO "read x\nprintf '{\"type\":\"error\","
	    "\"message\":\"disque d\\351fectueux \\377\\300\\200\"}\\n'\n");
	CHECK_INT(run(p, req, NULL, &err, NULL), CAIRN_EFAIL);
	CHECK(str_utf8_valid(err.msg, strlen(err.msg)));
	CHECK(strstr(err.msg, "disque d\xef\xbf\xbd" "fectueux") != NULL);
	free(p);
	p = script("latin1res", HELLO "read x\nprintf '{\"type\":\"result\","
	    "\"snapshotID\":\"snap-\\351\\355\\240\\200\"}\\n'\n");
	CHECK_INT(run(p, req, NULL, &err, &res), 0);
	REQUIRE(res != NULL);
	body = json_print(res);
	CHECK(str_utf8_valid(body, strlen(body)));
	CHECK(strstr(json_str_or(res, "snapshotID", ""), "snap-") != NULL);
	free(body);
	cJSON_Delete(res);
	free(p);
	p = script("notjson8", HELLO "read x\nprintf '\\351\\351 not json\\n'\nsleep 5\n");
	CHECK_INT(run(p, req, NULL, &err, NULL), CAIRN_EPROTO);
	CHECK(str_utf8_valid(err.msg, strlen(err.msg)));
	free(p);
	/* 400 euro signs (1200 bytes): capped at 512 bytes by cairn */
	buf_init(&b, 1 << 16);
	buf_puts(&b, HELLO "read x\nprintf '{\"type\":\"error\",\"message\":\"x");
	for (int i = 0; i < 400; i++)
		buf_puts(&b, "\xe2\x82\xac");
	buf_puts(&b, "\"}\\n'\n");
	euro = buf_take(&b, NULL);
	p = script("euro", euro);
	CHECK_INT(run(p, req, NULL, &err, NULL), CAIRN_EFAIL);
	CHECK(str_utf8_valid(err.msg, strlen(err.msg)));
	CHECK(strstr(err.msg, "failed: x\xe2\x82\xac") != NULL);
	free(p);
	free(euro);
	cJSON_Delete(req);
}

static void
test_garbage(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	cJSON *req = request("create_snapshot");
	char *p;

	p = script("garbage", HELLO "read x\necho 'this is { not json'\nsleep 30\n");
	CHECK_INT(run(p, req, NULL, &err, NULL), CAIRN_EPROTO);
	CHECK(strstr(err.msg, "not a JSON object") != NULL);
	free(p);
	p = script("notype", HELLO "read x\necho '{\"bytesDone\":1}'\n");
	CHECK_INT(run(p, req, NULL, &err, NULL), CAIRN_EPROTO);
	free(p);
	p = script("unknown", HELLO "read x\necho '{\"type\":\"dance\"}'\n");
	CHECK_INT(run(p, req, NULL, &err, NULL), CAIRN_EPROTO);
	CHECK(strstr(err.msg, "unknown line type \"dance\"") != NULL);
	free(p);
	p = script("badprog", HELLO "read x\necho '{\"type\":\"progress\",\"bytesDone\":-1,\"totalBytes\":2}'\n");
	CHECK_INT(run(p, req, NULL, &err, NULL), CAIRN_EPROTO);
	free(p);
	p = script("v3", "echo '{\"type\":\"hello\",\"name\":\"t\",\"protocolVersion\":3,\"volumeTypes\":[]}'\n");
	CHECK_INT(run(p, req, NULL, &err, NULL), CAIRN_EPROTO);
	CHECK(strstr(err.msg, "speaks protocol version 3, cairn speaks 1 to 2") !=
	    NULL);
	free(p);
	p = script("v1kube", HELLO "read x\necho '{\"type\":\"kube\",\"id\":1,"
	    "\"method\":\"GET\",\"path\":\"/api\"}'\nsleep 30\n");
	CHECK_INT(run(p, req, NULL, &err, NULL), CAIRN_EPROTO);
	CHECK(strstr(err.msg, "unknown line type \"kube\"") != NULL);
	free(p);
	p = script("noHello", "echo '{\"type\":\"result\"}'\n");
	CHECK_INT(run(p, req, NULL, &err, NULL), CAIRN_EPROTO);
	CHECK(strstr(err.msg, "before hello") != NULL);
	free(p);
	p = script("errline", HELLO "read x\necho '{\"type\":\"error\",\"message\":\"volume busy\"}'\n");
	CHECK_INT(run(p, req, NULL, &err, NULL), CAIRN_EFAIL);
	CHECK(strstr(err.msg, "failed: volume busy") != NULL);
	free(p);
	cJSON_Delete(req);
}

static void
test_hangs(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct plugin_limits lim = { 0 };
	cJSON *req = request("create_snapshot");
	char *p, *pidf, *body;
	int64_t t0;

	pidf = xasprintf("%s/hang.pid", tmp);
	/* a line after the pid file is written: the idle clock starts
	 * there, so a slow shell is never killed before the file exists */
	body = xasprintf(HELLO "read x\nsleep 1000 &\necho $! > %s\n"
	    "echo '{\"type\":\"progress\",\"bytesDone\":0,"
	    "\"totalBytes\":1}'\nwait\n", pidf);
	p = script("hang", body);
	lim.idle_us = 300000;
	t0 = time_mono_us();
	CHECK_INT(run(p, req, &lim, &err, NULL), CAIRN_ETIMEOUT);
	CHECK(strstr(err.msg, "idle timeout (300ms) passed") != NULL);
	CHECK(time_mono_us() - t0 < 5 * TIME_US_PER_SEC);
	CHECK(pid_gone(pidf));	/* the grandchild went with the group */
	free(p);
	free(body);

	p = script("silent", "sleep 1000\n");
	lim.idle_us = 0;
	lim.handshake_us = 200000;
	CHECK_INT(run(p, req, &lim, &err, NULL), CAIRN_ETIMEOUT);
	CHECK(strstr(err.msg, "handshake timeout") != NULL);
	free(p);

	/* Progress keeps the idle timer happy, not the overall one. The
	 * idle bound is 20 lines' worth, so a loaded machine that stalls
	 * the shell for a moment still shows the overall one. */
	p = script("chatty", HELLO "read x\nwhile :; do echo '{\"type\":\"progress\",\"bytesDone\":1,\"totalBytes\":2}'; sleep 0.05; done\n");
	lim.handshake_us = 0;
	lim.idle_us = 1000000;
	lim.overall_us = 3000000;
	CHECK_INT(run(p, req, &lim, &err, NULL), CAIRN_ETIMEOUT);
	CHECK(strstr(err.msg, "overall timeout") != NULL);
	free(p);

	/* Stopping the caller stops the plugin. */
	atomic_int stop = 1;
	p = script("stopme", HELLO "read x\nsleep 1000\n");
	CHECK_INT(plugin_run(p, req, NULL, NULL, NULL, &stop, NULL, NULL,
	    &err), CAIRN_ECANCELED);
	free(p);
	free(pidf);
	cJSON_Delete(req);
}

static void
test_flood(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	cJSON *req = request("create_snapshot");
	char *p;

	p = script("flood", HELLO "read x\nyes '{\"type\":\"progress\",\"bytesDone\":1,\"totalBytes\":2}'\n");
	CHECK_INT(run(p, req, NULL, &err, NULL), CAIRN_EPROTO);
	CHECK(strstr(err.msg, "flooded") != NULL);
	free(p);
	p = script("longline", HELLO "read x\nhead -c 200000 /dev/zero | tr '\\0' a\necho\n");
	CHECK_INT(run(p, req, NULL, &err, NULL), CAIRN_EPROTO);
	CHECK(strstr(err.msg, "longer than") != NULL);
	free(p);
	/* A stderr flood is read and dropped; the answer still counts. */
	p = script("noisy", HELLO "read x\nhead -c 3000000 /dev/zero >&2\necho '{\"type\":\"result\",\"snapshotID\":\"s\"}'\n");
	cJSON *res = NULL;
	CHECK_INT(run(p, req, NULL, &err, &res), 0);
	CHECK_STR(json_str(res, "snapshotID"), "s");
	cJSON_Delete(res);
	free(p);
	cJSON_Delete(req);
}

static void
test_env_scrubbed(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	cJSON *req = request("create_snapshot"), *res = NULL;
	char *p, *envf, *body, *cmd;
	int sock;
	static char e1[] = "CAIRN_EXTRA=1";
	char *extra[] = { e1, NULL };

	setenv("KUBECONFIG", "/secret/kubeconfig", 1);
	setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t", 1);
	setenv("CAIRN_SERVICEACCOUNT_DIR", "/var/run/secrets", 1);
	setenv("HOME", "/root", 1);
	envf = xasprintf("%s/env.out", tmp);
	body = xasprintf(HELLO "read x\nenv > %s\nls -l /proc/$$/fd > %s.fds\n"
	    "echo '{\"type\":\"result\"}'\n", envf, envf);
	p = script("envdump", body);
	sock = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(sock >= 0);
	CHECK_INT(plugin_run(p, req, NULL, NULL, extra, NULL, NULL, &res,
	    &err), 0);
	close(sock);
	cmd = xasprintf("! grep -E 'KUBE|AWS_|SERVICEACCOUNT' %s && "
	    "grep -q CAIRN_PLUGIN_PROTOCOL=2 %s && grep -q CAIRN_EXTRA=1 %s && "
	    "grep -qx HOME=/nonexistent %s", envf, envf, envf, envf);
	CHECK(system(cmd) == 0);
	free(cmd);
	/* The socket we hold (no close-on-exec) did not leak into it. */
	cmd = xasprintf("grep -q pipe: %s.fds && ! grep -q socket: %s.fds",
	    envf, envf);
	CHECK(system(cmd) == 0);
	free(cmd);
	unsetenv("KUBECONFIG");
	unsetenv("KUBERNETES_SERVICE_HOST");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	unsetenv("CAIRN_SERVICEACCOUNT_DIR");
	cJSON_Delete(res);
	cJSON_Delete(req);
	free(p);
	free(body);
	free(envf);
}

#define HELLO2 "echo '{\"type\":\"hello\",\"name\":\"t2\",\"protocolVersion\":2,\"volumeTypes\":[\"csi\"],\"nodeLocal\":false}'\n"

/* A request as the engine builds it: version 1's fields and version 2's. */
static cJSON *
request_v2(void)
{
	cJSON *r = request("create_snapshot");

	cJSON_AddStringToObject(r, "volumeName", "pv-1");
	cJSON_AddStringToObject(r, "backupName", "b1");
	json_set_str(r, "persistentVolume.metadata.name", "pv-1");
	json_set_str(r, "persistentVolumeClaim.metadata.name", "data");
	cJSON_AddNullToObject(r, "storageClass");
	return r;
}

/*
 * Old plugins keep working: a version 1 plugin gets exactly version 1's
 * fields and EOF after them, as before version 2 existed; a version 2
 * plugin gets the objects and "protocolVersion": 2, and stdin stays open.
 */
static void
test_protocol_versions(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct plugin_hello h;
	cJSON *req = request_v2(), *res = NULL, *got;
	char *p, *body, *f = xasprintf("%s/req.out", tmp), *text = NULL;
	size_t len;

	/* v1: the line, then EOF (the second read fails) */
	body = xasprintf(HELLO "read -r x\nprintf '%%s' \"$x\" > %s\n"
	    "if read -r y; then echo '{\"type\":\"error\",\"message\":"
	    "\"stdin open\"}'; else echo '{\"type\":\"result\",\"snapshotID\":"
	    "\"s\"}'; fi\n", f);
	p = script("v1dump", body);
	CHECK_INT(plugin_run(p, req, NULL, NULL, NULL, NULL, &h, &res, &err), 0);
	CHECK_INT(h.protocol, 1);
	CHECK_INT(h.node_local, 1);
	plugin_hello_free(&h);
	REQUIRE(buf_read_file(f, 1 << 20, "dump", &text, &len, &err) == 0);
	got = json_parse(text, len, NULL);
	CHECK_STR(json_str(got, "volumeName"), "pv-1");
	CHECK(json_get(got, "persistentVolume") == NULL);
	CHECK(json_get(got, "storageClass") == NULL);
	CHECK(json_get(got, "protocolVersion") == NULL);
	cJSON_Delete(got);
	cJSON_Delete(res);
	free(text);
	free(p);
	free(body);
	/* v2: everything, protocolVersion 2, stdin still open after it */
	body = xasprintf(HELLO2 "read -r x\nprintf '%%s' \"$x\" > %s\n"
	    "echo '{\"type\":\"result\",\"snapshotID\":\"s\"}'\n", f);
	p = script("v2dump", body);
	CHECK_INT(plugin_run(p, req, NULL, NULL, NULL, NULL, &h, &res, &err), 0);
	CHECK_INT(h.protocol, 2);
	CHECK_INT(h.node_local, 0);
	plugin_hello_free(&h);
	REQUIRE(buf_read_file(f, 1 << 20, "dump", &text, &len, &err) == 0);
	got = json_parse(text, len, NULL);
	CHECK_INT(json_int(got, "protocolVersion", 0), 2);
	CHECK_STR(json_str(got, "persistentVolumeClaim.metadata.name"), "data");
	CHECK(cJSON_IsNull(json_get(got, "storageClass")));
	cJSON_Delete(got);
	cJSON_Delete(res);
	free(text);
	free(p);
	free(body);
	free(f);
	cJSON_Delete(req);
}

struct kube_calls {
	int n;
	char last[256];
};

static cJSON *
on_kube(void *arg, const char *method, const char *path, const cJSON *body)
{
	struct kube_calls *k = arg;
	cJSON *a;

	k->n++;
	snprintf(k->last, sizeof k->last, "%s %s %s", method, path,
	    json_str_or(body, "kind", "-"));
	if (strcmp(path, "/apis/ok") != 0)
		return NULL;	/* out of scope: 403 */
	a = cJSON_CreateObject();
	cJSON_AddNumberToObject(a, "status", 201);
	json_set_str(a, "body.kind", "Thing");
	return a;
}

/* Version 2's API calls: made by the callback, answered on stdin. */
static void
test_kube_channel(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct kube_calls k = { 0, "" };
	struct plugin_cbs cbs;
	cJSON *req = request_v2(), *res = NULL;
	char *p, *body, *f = xasprintf("%s/kube.out", tmp), *text = NULL;
	size_t len;

	memset(&cbs, 0, sizeof cbs);
	cbs.kube = on_kube;
	cbs.arg = &k;
	body = xasprintf(HELLO2 "read -r x\n"
	    "echo '{\"type\":\"kube\",\"id\":7,\"method\":\"POST\","
	    "\"path\":\"/apis/ok\",\"body\":{\"kind\":\"Thing\"}}'\n"
	    "read -r a\necho \"$a\" > %s\n"
	    "echo '{\"type\":\"kube\",\"id\":\"b\",\"method\":\"DELETE\","
	    "\"path\":\"/api/v1/secrets\"}'\n"
	    "read -r b\necho \"$b\" >> %s\n"
	    "echo '{\"type\":\"result\",\"snapshotID\":\"s\"}'\n", f, f);
	p = script("kube", body);
	CHECK_INT(plugin_run(p, req, NULL, &cbs, NULL, NULL, NULL, &res, &err),
	    0);
	CHECK_INT(k.n, 2);
	CHECK_STR(k.last, "DELETE /api/v1/secrets -");
	REQUIRE(buf_read_file(f, 1 << 20, "dump", &text, &len, &err) == 0);
	CHECK(strstr(text, "{\"type\":\"kube-response\",\"id\":7,"
	    "\"status\":201,\"body\":{\"kind\":\"Thing\"}}\n") == text);
	CHECK(strstr(text, "\"id\":\"b\",\"status\":403") != NULL);
	cJSON_Delete(res);
	free(text);
	free(p);
	free(body);
	/* a malformed call is the plugin's protocol error */
	p = script("badkube", HELLO2 "read -r x\necho '{\"type\":\"kube\","
	    "\"method\":\"BREW\",\"path\":\"/x\"}'\nsleep 30\n");
	CHECK_INT(plugin_run(p, req, NULL, &cbs, NULL, NULL, NULL, &res, &err),
	    CAIRN_EPROTO);
	CHECK(strstr(err.msg, "kube needs method") != NULL);
	free(p);
	free(f);
	cJSON_Delete(req);
}

static void
test_result_then_bad_exit(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	cJSON *req = request("delete_snapshot"), *res = NULL;
	char *p = script("badexit", HELLO "read x\necho '{\"type\":\"result\"}'\nexit 4\n");

	CHECK_INT(run(p, req, NULL, &err, &res), CAIRN_EFAIL);
	CHECK(strstr(err.msg, "status 4 after its answer") != NULL);
	CHECK(res == NULL);
	free(p);
	cJSON_Delete(req);
}

static void
test_plugin_dir(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct plugin_dir *pd = NULL;
	char *d, *cmd;
	const cJSON *cfg;
	int i;

	d = xasprintf("%s/pdir", tmp);
	cmd = xasprintf("mkdir -p %s && cp %s/plugins/example-snapshotter %s/ && "
	    "echo '{\"snapshotDir\":\"/x\"}' > %s/example-snapshotter.json && "
	    "printf '#!/bin/sh\\nexit 1\\n' > %s/broken && chmod +x %s/broken && "
	    "echo text > %s/README", d, CAIRN_SRCDIR, d, d, d, d, d);
	CHECK(system(cmd) == 0);
	free(cmd);
	REQUIRE(plugin_dir_open(d, NULL, &pd, &err) == 0);
	CHECK_INT(plugin_dir_count(pd), 1);
	CHECK_STR(plugin_dir_name(pd, 0), "example-snapshotter");
	i = plugin_dir_find(pd, NULL, "local");
	CHECK_INT(i, 0);
	CHECK_INT(plugin_dir_find(pd, NULL, "nfs"), -1);
	CHECK_INT(plugin_dir_find(pd, "example-snapshotter", NULL), 0);
	CHECK_INT(plugin_dir_find(pd, "nope", "hostPath"), -1);
	cfg = plugin_dir_config(pd, 0);
	CHECK_STR(json_str(cfg, "snapshotDir"), "/x");
	plugin_dir_free(pd);
	free(d);
	CHECK_INT(plugin_dir_open("/nonexistent-dir", NULL, &pd, &err),
	    CAIRN_ENOTFOUND);
}

int
main(void)
{
	signal(SIGPIPE, SIG_IGN);
	snprintf(tmp, sizeof tmp, "%s/plugin-%d", UNIT_TMPDIR(), (int)getpid());
	mkdir(tmp, 0700);
	RUN(test_example_plugin);
	RUN(test_exits_early);
	RUN(test_garbage);
	RUN(test_untrusted_text);
	RUN(test_hangs);
	RUN(test_flood);
	RUN(test_env_scrubbed);
	RUN(test_result_then_bad_exit);
	RUN(test_protocol_versions);
	RUN(test_kube_channel);
	RUN(test_plugin_dir);
	return unit_done();
}
