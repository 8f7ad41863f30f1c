/*
 * test_kube_exec_cred.c: kubeconfig exec credential plugins, run as
 * client-go runs them. The plugin is a shell script written here that
 * logs how it was called (args, an env variable of the kubeconfig,
 * KUBERNETES_EXEC_INFO) and prints an ExecCredential whose token counts
 * its runs and whose expiry the test sets; kcfg_auth() (kube/internal.h)
 * is what the transport and kube/exec.c ask for each request.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/timeutil.h"
#include "kube/internal.h"
#include "unit.h"

static char dir[512];

static void
write_file(const char *name, const char *text, int mode)
{
	char p[700];
	FILE *f;

	snprintf(p, sizeof p, "%s/%s", dir, name);
	f = fopen(p, "w");
	if (f == NULL)
		return;
	fputs(text, f);
	fclose(f);
	chmod(p, (mode_t)mode);
}

static char *
read_back(const char *name)
{
	static char buf[16384];
	char p[700];
	FILE *f;
	size_t n;

	snprintf(p, sizeof p, "%s/%s", dir, name);
	buf[0] = '\0';
	f = fopen(p, "r");
	if (f == NULL)
		return buf;
	n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/*
 * The plugin: run count in ./runs, a log line per run, the ExecCredential
 * from ./mode: "token" (token tok-N expiring at ./expiry), "cert", "fail",
 * "badversion".
 */
static const char plugin[] =
    "#!/bin/sh\n"
    "d=$(dirname \"$0\")\n"
    "n=$(( $(cat \"$d/runs\" 2>/dev/null || echo 0) + 1 ))\n"
    "echo $n > \"$d/runs\"\n"
    "printf '%s|%s|%s\\n' \"$*\" \"$MYVAR\" \"$KUBERNETES_EXEC_INFO\" >> "
    "\"$d/calls\"\n"
    "case $(cat \"$d/mode\") in\n"
    "fail) echo 'no login' >&2; exit 3;;\n"
    "badversion) echo '{\"kind\":\"ExecCredential\",\"apiVersion\":"
    "\"client.authentication.k8s.io/v1beta1\",\"status\":{\"token\":\"x\"}}';;\n"
    "cert) echo '{\"kind\":\"ExecCredential\",\"apiVersion\":"
    "\"client.authentication.k8s.io/v1\",\"status\":{"
    "\"clientCertificateData\":\"-----BEGIN CERTIFICATE-----\\nC\\n\","
    "\"clientKeyData\":\"-----BEGIN PRIVATE KEY-----\\nK\\n\"}}';;\n"
    "*) printf '{\"kind\":\"ExecCredential\",\"apiVersion\":"
    "\"client.authentication.k8s.io/v1\",\"status\":{\"token\":\"tok-%s\","
    "\"expirationTimestamp\":\"%s\"}}\\n' $n \"$(cat \"$d/expiry\")\";;\n"
    "esac\n";

static struct kube_config *
load(const char *user_yaml, struct cairn_err *err)
{
	struct kube_config_opts co = { NULL, NULL };
	struct kube_config *cfg = NULL;
	char path[700], text[4096];

	snprintf(text, sizeof text, "apiVersion: v1\nkind: Config\n"
	    "current-context: t\nclusters:\n- name: c\n  cluster:\n"
	    "    server: https://127.0.0.1:6443\n"
	    "    tls-server-name: api.example\n"
	    "users:\n- name: u\n  user:\n%s"
	    "contexts:\n- name: t\n  context: {cluster: c, user: u}\n",
	    user_yaml);
	write_file("kubeconfig", text, 0600);
	snprintf(path, sizeof path, "%s/kubeconfig", dir);
	co.kubeconfig = path;
	if (kube_config_load(&co, &cfg, err) < 0)
		return NULL;
	return cfg;
}

static const char exec_user[] =
    "    exec:\n"
    "      apiVersion: client.authentication.k8s.io/v1\n"
    "      command: ./plugin.sh\n"
    "      args: [\"--cluster\", \"prod one\"]\n"
    "      env:\n      - {name: MYVAR, value: hello}\n"
    "      interactiveMode: Never\n"
    "      provideClusterInfo: true\n"
    "      installHint: install the plugin from example.com\n";

static void
reset(const char *mode, int64_t expires_in_s)
{
	char ts[TIME_STR_MAX];

	write_file("plugin.sh", plugin, 0755);
	write_file("mode", mode, 0644);
	write_file("runs", "0", 0644);
	write_file("calls", "", 0644);
	time_format_rfc3339(time_now_us() + expires_in_s * TIME_US_PER_SEC, ts);
	write_file("expiry", ts, 0644);
}

static void
test_token_cached_until_expiry(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct kube_config *cfg;
	struct kcfg_auth a;
	const char *calls;

	reset("token", 3600);
	cfg = load(exec_user, &err);
	REQUIRE(cfg != NULL);
	/* lazily: nothing runs at load */
	CHECK_STR(read_back("runs"), "0");
	REQUIRE(kcfg_auth(cfg, 0, &a, &err) == 0);
	CHECK_STR(a.token, "tok-1");
	CHECK(a.cert == NULL);
	kcfg_auth_free(&a);
	/* cached: no second run */
	REQUIRE(kcfg_auth(cfg, 0, &a, &err) == 0);
	CHECK_STR(a.token, "tok-1");
	kcfg_auth_free(&a);
	CHECK_STR(read_back("runs"), "1\n");
	/* how it was run: args, the kubeconfig's env, the exec info */
	calls = read_back("calls");
	CHECK(strncmp(calls, "--cluster prod one|hello|{", 26) == 0);
	CHECK(strstr(calls, "\"apiVersion\":\"client.authentication.k8s.io/v1\""));
	CHECK(strstr(calls, "\"interactive\":false") != NULL);
	CHECK(strstr(calls, "\"server\":\"https://127.0.0.1:6443\"") != NULL);
	CHECK(strstr(calls, "\"tls-server-name\":\"api.example\"") != NULL);
	/* after a 401 (force) it runs again */
	REQUIRE(kcfg_auth(cfg, 1, &a, &err) == 0);
	CHECK_STR(a.token, "tok-2");
	kcfg_auth_free(&a);
	kube_config_free(cfg);
}

static void
test_expired_runs_again(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct kube_config *cfg;
	struct kcfg_auth a;

	reset("token", -5);	/* expired as given */
	cfg = load(exec_user, &err);
	REQUIRE(cfg != NULL);
	REQUIRE(kcfg_auth(cfg, 0, &a, &err) == 0);
	CHECK_STR(a.token, "tok-1");
	kcfg_auth_free(&a);
	REQUIRE(kcfg_auth(cfg, 0, &a, &err) == 0);
	CHECK_STR(a.token, "tok-2");
	kcfg_auth_free(&a);
	kube_config_free(cfg);
}

static void
test_client_certificate(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct kube_config *cfg;
	struct kcfg_auth a;

	reset("cert", 0);
	cfg = load(exec_user, &err);
	REQUIRE(cfg != NULL);
	REQUIRE(kcfg_auth(cfg, 0, &a, &err) == 0);
	CHECK(a.token == NULL);
	REQUIRE(a.cert != NULL && a.key != NULL);
	CHECK(strncmp((char *)a.cert, "-----BEGIN CERTIFICATE-----\nC", 29) ==
	    0);
	CHECK(strncmp((char *)a.key, "-----BEGIN PRIVATE KEY-----\nK", 29) ==
	    0);
	kcfg_auth_free(&a);
	kube_config_free(cfg);
}

static void
test_failures_say_why(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct kube_config *cfg;
	struct kcfg_auth a;

	reset("fail", 0);
	cfg = load(exec_user, &err);
	REQUIRE(cfg != NULL);
	CHECK(kcfg_auth(cfg, 0, &a, &err) == CAIRN_EAUTH);
	CHECK(strstr(err.msg, "user \"u\": exec") != NULL);
	CHECK(strstr(err.msg, "exited with status 3") != NULL);
	kube_config_free(cfg);

	cairn_err_clear(&err);
	reset("badversion", 0);
	cfg = load(exec_user, &err);
	REQUIRE(cfg != NULL);
	CHECK(kcfg_auth(cfg, 0, &a, &err) == CAIRN_EAUTH);
	CHECK(strstr(err.msg, "configured for client.authentication.k8s.io/v1 "
	    "but printed client.authentication.k8s.io/v1beta1") != NULL);
	kube_config_free(cfg);

	/* not installed: the kubeconfig's hint */
	cairn_err_clear(&err);
	cfg = load("    exec:\n"
	    "      apiVersion: client.authentication.k8s.io/v1beta1\n"
	    "      command: cairn-no-such-plugin\n"
	    "      installHint: install the plugin from example.com\n", &err);
	REQUIRE(cfg != NULL);
	CHECK(kcfg_auth(cfg, 0, &a, &err) == CAIRN_EAUTH);
	CHECK(strstr(err.msg, "not found") != NULL);
	CHECK(strstr(err.msg, "install the plugin from example.com") != NULL);
	kube_config_free(cfg);

	/* v1 must say how interactive it may be (client-go) */
	cairn_err_clear(&err);
	CHECK(load("    exec:\n"
	    "      apiVersion: client.authentication.k8s.io/v1\n"
	    "      command: x\n", &err) == NULL);
	CHECK(strstr(err.msg, "interactiveMode") != NULL);
	cairn_err_clear(&err);
	CHECK(load("    exec:\n"
	    "      apiVersion: client.authentication.k8s.io/v1alpha1\n"
	    "      command: x\n", &err) == NULL);
	CHECK(strstr(err.msg, "apiVersion") != NULL);
}

int
main(void)
{
	snprintf(dir, sizeof dir, "%s/exec-cred", UNIT_TMPDIR());
	mkdir(dir, 0700);
	RUN(test_token_cached_until_expiry);
	RUN(test_expired_runs_again);
	RUN(test_client_certificate);
	RUN(test_failures_say_why);
	return unit_done();
}
