/*
 * exec.c: running a command in a pod through the API server (pods/exec).
 *
 * Design. kubectl exec and client-go reach a container through the
 * pods/exec subresource: a GET upgraded to a WebSocket whose binary
 * messages carry one channel byte first (0 stdin, 1 stdout, 2 stderr,
 * 3 error, 4 resize). Since Kubernetes 1.30 the API server's stream
 * translator speaks `v5.channel.k8s.io` (v4 plus a CLOSE signal, 255);
 * kubelet's own WebSocket server, which an API server proxies to when the
 * client does not offer v5, speaks `v4.channel.k8s.io`. Both end a session
 * with a metav1.Status on channel 3: Success, or Failure with reason
 * NonZeroExitCode and a cause {reason: ExitCode, message: "<code>"}, or
 * another failure (the container is not running, the command could not
 * start). We offer v5 first, then v4, as client-go's protocol list does.
 *
 * Why libwebsockets and not libcurl: Debian 12's libcurl (7.88) is built
 * without WebSocket support, so the framing and TLS of this one connection
 * come from libwebsockets (docs/kube-client.md). Everything else about the
 * connection is the kube client's: kube_auth_get() hands over the same
 * bearer token, CA, client certificate and tls-server-name the libcurl
 * transport uses. The TLS context is ours (an OpenSSL SSL_CTX given to
 * libwebsockets), so a CA bundle of several certificates and in-memory
 * (-data) credentials work as they do with libcurl; libwebsockets checks
 * the server name and the verification result.
 *
 * One exec is one libwebsockets context serviced on the calling thread
 * until the Status arrives, the timeout passes or the stop flag is set (a
 * 100 ms timer wakes the loop); nothing is shared between execs, so any
 * number of threads may exec at once. Output is captured up to a cap per
 * stream; the rest is counted and dropped.
 */
#include "config.h"
#include "kube/internal.h"
#include "base/buf.h"
#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"

#include <stdatomic.h>
#include <curl/curl.h>
#include <libwebsockets.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XS_PROTO_V5 "v5.channel.k8s.io"
#define XS_PROTO_V4 "v4.channel.k8s.io"
#define XS_STATUS_CAP (64u << 10)	/* the error channel's Status */
#define XS_TICK_US (100 * 1000)		/* timer: deadline and stop checks */
#define XS_RX_BUFFER 16384

enum { CH_STDIN = 0, CH_STDOUT = 1, CH_STDERR = 2, CH_ERROR = 3 };

/* One exec session. */
struct xs {
	struct lws_context *ctx;
	lws_sorted_usec_list_t sul;	/* the tick timer */
	int64_t deadline_us;		/* monotonic */
	const atomic_int *stop;
	char *auth;			/* "Bearer <token>", owned, wiped */
	const char *user_agent;
	size_t cap;
	struct kube_exec_result *res;
	struct buf status;		/* error channel bytes */
	int chan;			/* channel of the message being read; -1 */
	int established;
	int got_status;
	int done;
	int timed_out, canceled;
	int http;			/* HTTP status of a refused upgrade */
	char conn_err[256];		/* libwebsockets' connection error */
	char tls_err[128];		/* why the server certificate was refused */
};

static pthread_once_t lws_log_once = PTHREAD_ONCE_INIT;

/* libwebsockets' own log lines go to ours at debug level. */
static void
lws_log_emit(int level, const char *line)
{
	size_t n = strlen(line);

	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		n--;
	if (level & LLL_ERR)
		log_debug("libwebsockets: %.*s", (int)n, line);
	else
		log_trace("libwebsockets: %.*s", (int)n, line);
}

static void
lws_log_init(void)
{
	lws_set_log_level(LLL_ERR | LLL_WARN, lws_log_emit);
}

static void
xs_append(struct xs *x, int chan, const unsigned char *p, size_t n)
{
	struct kube_exec_result *r = x->res;
	char **dst;
	size_t *len, room;
	uint64_t *total;

	if (chan == CH_ERROR) {
		if (buf_append(&x->status, p, n) < 0)
			x->status.len = x->status.cap + 1;	/* marks too big */
		return;
	}
	if (chan == CH_STDOUT) {
		dst = &r->out, len = &r->out_len, total = &r->out_total;
	} else if (chan == CH_STDERR) {
		dst = &r->err, len = &r->err_len, total = &r->err_total;
	} else {
		return;		/* resize, close signals: nothing for us */
	}
	*total += n;
	room = x->cap - *len;
	if (n > room)
		n = room;
	if (n == 0)
		return;
	memcpy(*dst + *len, p, n);
	*len += n;
	(*dst)[*len] = '\0';
}

static int
xs_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user,
	void *in, size_t len)
{
	struct xs *x = wsi != NULL ? lws_get_opaque_user_data(wsi) : NULL;
	const unsigned char *p = in;

	(void)user;
	if (x == NULL)
		return 0;
	switch (reason) {
	case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER: {
		unsigned char **pp = (unsigned char **)in, *end = *pp + len;

		if (x->auth != NULL && lws_add_http_header_by_name(wsi,
		    (const unsigned char *)"authorization:",
		    (const unsigned char *)x->auth, (int)strlen(x->auth), pp,
		    end))
			return -1;
		if (lws_add_http_header_by_name(wsi,
		    (const unsigned char *)"user-agent:",
		    (const unsigned char *)x->user_agent,
		    (int)strlen(x->user_agent), pp, end))
			return -1;
		break;
	}
	case LWS_CALLBACK_CLIENT_FILTER_PRE_ESTABLISH:
		/* the subprotocol the server chose (headers still at hand) */
		if (lws_hdr_copy(wsi, x->res->protocol,
		    (int)sizeof x->res->protocol, WSI_TOKEN_PROTOCOL) < 0)
			x->res->protocol[0] = '\0';
		break;
	case LWS_CALLBACK_CLIENT_ESTABLISHED:
		x->established = 1;
		break;
	case LWS_CALLBACK_CLIENT_RECEIVE:
		if (!lws_frame_is_binary(wsi)) {
			snprintf(x->conn_err, sizeof x->conn_err, "a text "
			    "message on the exec stream");
			x->done = 1;
			return -1;
		}
		if (lws_is_first_fragment(wsi)) {
			x->chan = -1;
			if (len == 0)
				break;
			x->chan = p[0];
			p++;
			len--;
		}
		if (x->chan >= 0)
			xs_append(x, x->chan, p, len);
		if (x->chan == CH_ERROR && lws_is_final_fragment(wsi)) {
			/* The Status ends the session: all output came before. */
			x->got_status = 1;
			x->done = 1;
			lws_close_reason(wsi, LWS_CLOSE_STATUS_NORMAL, NULL, 0);
			return -1;
		}
		break;
	case LWS_CALLBACK_OPENSSL_PERFORM_SERVER_CERT_VERIFICATION:
		/* len: OpenSSL's verdict; keep the reason of a refusal */
		if (len == 0 && x->tls_err[0] == '\0')
			snprintf(x->tls_err, sizeof x->tls_err, "%s",
			    X509_verify_cert_error_string(
			    X509_STORE_CTX_get_error((X509_STORE_CTX *)user)));
		return len == 0;
	case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
		x->http = (int)lws_http_client_http_response(wsi);
		if (x->tls_err[0] != '\0')
			snprintf(x->conn_err, sizeof x->conn_err, "TLS: the "
			    "server's certificate was refused: %s", x->tls_err);
		else
			snprintf(x->conn_err, sizeof x->conn_err, "%s",
			    in != NULL ? (const char *)in : "connection failed");
		x->done = 1;
		break;
	case LWS_CALLBACK_CLIENT_CLOSED:
	case LWS_CALLBACK_CLOSED_CLIENT_HTTP:
		x->done = 1;
		break;
	default:
		break;
	}
	return 0;
}

static const struct lws_protocols xs_protocols[] = {
	{ XS_PROTO_V5, xs_callback, 0, XS_RX_BUFFER, 0, NULL, 0 },
	{ XS_PROTO_V4, xs_callback, 0, XS_RX_BUFFER, 0, NULL, 0 },
	{ NULL, NULL, 0, 0, 0, NULL, 0 }
};

static void
xs_tick(lws_sorted_usec_list_t *sul)
{
	struct xs *x = lws_container_of(sul, struct xs, sul);

	if (x->stop != NULL && *x->stop)
		x->canceled = 1;
	else if (time_mono_us() >= x->deadline_us)
		x->timed_out = 1;
	if (x->canceled || x->timed_out) {
		x->done = 1;
		/* a timer callback does not end the poll: wake it */
		lws_cancel_service(x->ctx);
		return;
	}
	lws_sul_schedule(x->ctx, 0, &x->sul, xs_tick, XS_TICK_US);
}

/* ---- TLS: an SSL_CTX with the client's CA, certificate and key ---- */

static int
tls_fail(struct cairn_err *err, const char *what)
{
	char e[256];
	unsigned long l = ERR_get_error();

	ERR_error_string_n(l, e, sizeof e);
	ERR_clear_error();
	return cairn_err_set(err, CAIRN_EINVAL, "exec: TLS: %s: %s", what, e);
}

/* Every certificate of a PEM bundle in memory into the trust store. */
static int
tls_add_ca_pem(SSL_CTX *ctx, const void *data, size_t len,
	struct cairn_err *err)
{
	X509_STORE *st = SSL_CTX_get_cert_store(ctx);
	BIO *bio = BIO_new_mem_buf(data, (int)len);
	X509 *x;
	int n = 0;

	if (bio == NULL)
		return tls_fail(err, "CA bundle");
	while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
		if (X509_STORE_add_cert(st, x) == 1)
			n++;
		X509_free(x);
	}
	ERR_clear_error();	/* the end of the bundle reads as an error */
	BIO_free(bio);
	if (n == 0)
		return cairn_err_set(err, CAIRN_EINVAL, "exec: TLS: no "
		    "certificate in the CA data");
	return 0;
}

static int
tls_client_cert(SSL_CTX *ctx, const struct kcfg_tls *t, struct cairn_err *err)
{
	BIO *bio;
	X509 *x;
	EVP_PKEY *pk;

	if (t->cert_data != NULL) {
		bio = BIO_new_mem_buf(t->cert_data, (int)t->cert_len);
		x = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
		if (x == NULL || SSL_CTX_use_certificate(ctx, x) != 1) {
			X509_free(x);
			BIO_free(bio);
			return tls_fail(err, "client certificate");
		}
		X509_free(x);
		/* The rest of the PEM: intermediates sent with ours. */
		while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL)
			if (SSL_CTX_add_extra_chain_cert(ctx, x) != 1)
				X509_free(x);
		ERR_clear_error();
		BIO_free(bio);
	} else if (t->cert_file != NULL &&
	    SSL_CTX_use_certificate_chain_file(ctx, t->cert_file) != 1) {
		return tls_fail(err, t->cert_file);
	}
	if (t->key_data != NULL) {
		bio = BIO_new_mem_buf(t->key_data, (int)t->key_len);
		pk = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
		BIO_free(bio);
		if (pk == NULL || SSL_CTX_use_PrivateKey(ctx, pk) != 1) {
			EVP_PKEY_free(pk);
			return tls_fail(err, "client key");
		}
		EVP_PKEY_free(pk);
	} else if (t->key_file != NULL &&
	    SSL_CTX_use_PrivateKey_file(ctx, t->key_file,
	    SSL_FILETYPE_PEM) != 1) {
		return tls_fail(err, t->key_file);
	}
	if ((t->cert_data != NULL || t->cert_file != NULL) &&
	    SSL_CTX_check_private_key(ctx) != 1)
		return tls_fail(err, "client certificate and key do not match");
	return 0;
}

/*
 * The client SSL_CTX. verify_name: the name the server certificate must
 * carry (tls-server-name, else the server's host; an IP literal is
 * checked against IP SANs).
 */
static int
tls_ctx(const struct kcfg_tls *t, const char *verify_name, SSL_CTX **out,
	struct cairn_err *err)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	X509_VERIFY_PARAM *vp;
	int rc = 0;

	*out = NULL;
	if (ctx == NULL)
		return tls_fail(err, "context");
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	if (t->insecure) {
		SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
	} else {
		if (t->ca_data != NULL)
			rc = tls_add_ca_pem(ctx, t->ca_data, t->ca_len, err);
		else if (t->ca_file != NULL &&
		    SSL_CTX_load_verify_locations(ctx, t->ca_file, NULL) != 1)
			rc = tls_fail(err, t->ca_file);
		else if (t->ca_file == NULL &&
		    SSL_CTX_set_default_verify_paths(ctx) != 1)
			rc = tls_fail(err, "system CA certificates");
		if (rc < 0)
			goto fail;
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
		vp = SSL_CTX_get0_param(ctx);
		X509_VERIFY_PARAM_set_hostflags(vp,
		    X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
		if (X509_VERIFY_PARAM_set1_ip_asc(vp, verify_name) != 1 &&
		    X509_VERIFY_PARAM_set1_host(vp, verify_name, 0) != 1) {
			rc = tls_fail(err, "server name");
			goto fail;
		}
		ERR_clear_error();
	}
	rc = tls_client_cert(ctx, t, err);
	if (rc < 0)
		goto fail;
	*out = ctx;
	return 0;
fail:
	SSL_CTX_free(ctx);
	return rc;
}

/* ---- the request ---- */

struct xs_target {
	char *host;			/* connect here */
	int port;
	char *path;			/* prefix + subresource path + query */
	int https;
};

static void
target_free(struct xs_target *t)
{
	free(t->host);
	free(t->path);
}

static int
target_make(struct kube *k, const char *ns, const char *name,
	const char *container, const char *const *command,
	struct xs_target *t, struct cairn_err *err)
{
	static const struct kube_gvr pods = { "", "v1", "pods" };
	const char *server = kube_server(k);
	char *scheme = NULL, *host = NULL, *port = NULL, *prefix = NULL, *sub;
	struct buf q;
	CURLU *u = curl_url();
	int rc = 0;

	memset(t, 0, sizeof *t);
	if (curl_url_set(u, CURLUPART_URL, server, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) !=
	    CURLUE_OK) {
		rc = cairn_err_set(err, CAIRN_EINVAL, "exec: server \"%s\" is "
		    "not a valid URL", server);
		goto out;
	}
	if (curl_url_get(u, CURLUPART_PATH, &prefix, 0) != CURLUE_OK)
		prefix = NULL;
	t->https = strcasecmp(scheme, "https") == 0;
	/* libwebsockets wants an IPv6 literal without its brackets */
	if (host[0] == '[') {
		t->host = xstrdup(host + 1);
		t->host[strcspn(t->host, "]")] = '\0';
	} else {
		t->host = xstrdup(host);
	}
	t->port = atoi(port);
	buf_init(&q, 64u << 10);
	sub = kube_path(&pods, ns, name, "exec");
	while (prefix != NULL && str_has_suffix(prefix, "/"))
		prefix[strlen(prefix) - 1] = '\0';
	buf_printf(&q, "%s%s?", prefix != NULL ? prefix : "", sub);
	free(sub);
	for (size_t i = 0; command[i] != NULL; i++)
		kube_query_add(&q, "command", command[i]);
	kube_query_add(&q, "container", container);
	kube_query_add(&q, "stderr", "true");
	kube_query_add(&q, "stdout", "true");
	if (q.len >= q.cap) {
		buf_free(&q);
		rc = cairn_err_set(err, CAIRN_ETOOBIG, "exec: command too long");
		goto out;
	}
	/* "?&command=": drop the '&' kube_query_add put first */
	t->path = buf_take(&q, NULL);
	{
		char *amp = strstr(t->path, "?&");

		if (amp != NULL)
			memmove(amp + 1, amp + 2, strlen(amp + 2) + 1);
	}
out:
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_free(prefix);
	curl_url_cleanup(u);
	if (rc < 0)
		target_free(t);
	return rc;
}

/* ---- the Status on the error channel ---- */

static int
xs_status(struct xs *x, struct cairn_err *err)
{
	cJSON *st, *causes, *c;
	const char *status, *reason, *msg;
	int rc;

	if (x->status.len > x->status.cap)
		return cairn_err_set(err, CAIRN_ETOOBIG, "exec: the Status "
		    "on the error channel is larger than %zu bytes",
		    x->status.cap);
	st = json_parse(x->status.data, x->status.len, NULL);
	if (st == NULL || !cJSON_IsObject(st)) {
		cJSON_Delete(st);
		return cairn_err_set(err, CAIRN_EPROTO, "exec: the error "
		    "channel did not carry a Status");
	}
	status = json_str_or(st, "status", "");
	reason = json_str_or(st, "reason", "");
	msg = json_str_or(st, "message", "");
	if (strcmp(status, "Success") == 0) {
		x->res->exit_code = 0;
		cJSON_Delete(st);
		return 0;
	}
	if (strcmp(reason, "NonZeroExitCode") == 0) {
		causes = json_get(st, "details.causes");
		cJSON_ArrayForEach(c, causes) {
			const char *cr = json_str_or(c, "reason", "");
			const char *cm = json_str_or(c, "message", "");
			char *end;
			long v;

			if (strcmp(cr, "ExitCode") != 0)
				continue;
			v = strtol(cm, &end, 10);
			if (end != cm && *end == '\0' && v >= 0 && v < 256) {
				x->res->exit_code = (int)v;
				cJSON_Delete(st);
				return 0;
			}
		}
	}
	rc = cairn_err_set(err, CAIRN_ESERVER, "exec: %s%s%s", reason,
	    reason[0] ? ": " : "", msg[0] ? msg : status);
	cJSON_Delete(st);
	return rc;
}

/* ---- the pod, as kubectl checks it first ---- */

static int
pick_container(struct kube *k, const char *ns, const char *name,
	const cJSON *given, const char *want, char *out, size_t outlen,
	struct cairn_err *err)
{
	static const struct kube_gvr pods = { "", "v1", "pods" };
	cJSON *got = NULL, *c;
	const cJSON *pod = given;
	const char *phase, *first = NULL;
	struct buf names;
	int rc = 0, found = 0;

	if (pod == NULL) {
		rc = kube_get(k, &pods, ns, name, &got, err);
		if (rc < 0)
			return cairn_err_prefix(err, "exec: pod %s/%s", ns,
			    name);
		pod = got;
	}
	phase = json_str_or(pod, "status.phase", "");
	if (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0) {
		rc = cairn_err_set(err, CAIRN_EINVAL, "exec: cannot exec into "
		    "a container in a completed pod; current phase is %s",
		    phase);
		goto out;
	}
	buf_init(&names, 4096);
	cJSON_ArrayForEach(c, json_get(pod, "spec.containers")) {
		const char *n = json_str_or(c, "name", "");

		if (first == NULL)
			first = n;
		buf_printf(&names, "%s%s", names.len ? " " : "", n);
		if (want != NULL && want[0] != '\0' && strcmp(n, want) == 0)
			found = 1;
	}
	if (want == NULL || want[0] == '\0') {
		if (first == NULL)
			rc = cairn_err_set(err, CAIRN_EINVAL, "exec: pod %s/%s "
			    "has no containers", ns, name);
		else
			snprintf(out, outlen, "%s", first);
	} else if (!found) {
		rc = cairn_err_set(err, CAIRN_EINVAL, "exec: container %s is "
		    "not valid for pod %s/%s (containers: %s)", want, ns, name,
		    buf_cstr(&names));
	} else {
		snprintf(out, outlen, "%s", want);
	}
	buf_free(&names);
out:
	cJSON_Delete(got);
	return rc;
}

/* One WebSocket session; 0 with x->got_status, or an error. */
static int
xs_run(struct kube *k, struct xs *x, const struct xs_target *t,
	const struct kube_auth *a, const char *verify_name,
	struct cairn_err *err)
{
	struct lws_context_creation_info info;
	struct lws_client_connect_info ci;
	SSL_CTX *ssl = NULL;
	struct lws *wsi = NULL;
	int rc = 0;

	(void)k;
	if (t->https) {
		rc = tls_ctx(&a->tls, verify_name, &ssl, err);
		if (rc < 0)
			return rc;
	}
	memset(&info, 0, sizeof info);
	info.port = CONTEXT_PORT_NO_LISTEN;
	info.protocols = xs_protocols;
	info.gid = (gid_t)-1;
	info.uid = (uid_t)-1;
	info.fd_limit_per_thread = 8;
	info.options = LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT |
	    LWS_SERVER_OPTION_DISABLE_OS_CA_CERTS;
	if (ssl != NULL)
		info.provided_client_ssl_ctx = ssl;
	x->ctx = lws_create_context(&info);
	if (x->ctx == NULL) {
		SSL_CTX_free(ssl);
		return cairn_err_set(err, CAIRN_EFAIL, "exec: cannot create "
		    "a libwebsockets context");
	}
	memset(&ci, 0, sizeof ci);
	ci.context = x->ctx;
	ci.address = t->host;
	ci.port = t->port;
	ci.path = t->path;
	ci.host = verify_name;
	ci.protocol = XS_PROTO_V5 "," XS_PROTO_V4;
	ci.ietf_version_or_minus_one = -1;
	ci.opaque_user_data = x;
	ci.pwsi = &wsi;
	if (t->https)
		ci.ssl_connection = LCCSCF_USE_SSL | (a->tls.insecure ?
		    LCCSCF_ALLOW_SELFSIGNED | LCCSCF_SKIP_SERVER_CERT_HOSTNAME_CHECK |
		    LCCSCF_ALLOW_EXPIRED | LCCSCF_ALLOW_INSECURE : 0);
	x->done = 0;
	x->chan = -1;
	lws_sul_schedule(x->ctx, 0, &x->sul, xs_tick, XS_TICK_US);
	if (lws_client_connect_via_info(&ci) == NULL && !x->done)
		snprintf(x->conn_err, sizeof x->conn_err, "cannot start the "
		    "connection to %s:%d", t->host, t->port);
	else
		while (!x->done) {
			if (lws_service(x->ctx, 0) < 0)
				break;
		}
	lws_sul_cancel(&x->sul);
	lws_context_destroy(x->ctx);
	x->ctx = NULL;
	SSL_CTX_free(ssl);

	if (x->got_status)
		return 0;
	if (x->canceled)
		return cairn_err_set(err, CAIRN_ECANCELED, "exec: canceled");
	if (x->timed_out)
		return cairn_err_set(err, CAIRN_ETIMEOUT, "exec: no result "
		    "within the timeout");
	if (x->http == 401 || x->http == 403)
		return cairn_err_set(err, CAIRN_EAUTH, "exec: the API server "
		    "refused the upgrade with HTTP %d (%s)", x->http,
		    x->http == 401 ? "the credentials were not accepted" :
		    "RBAC must allow get and create on pods/exec");
	if (x->http > 0)
		return cairn_err_set(err, kube_http_rc(x->http, NULL) < 0 ?
		    kube_http_rc(x->http, NULL) : CAIRN_EPROTO, "exec: the API "
		    "server answered the upgrade with HTTP %d", x->http);
	if (!x->established)
		return cairn_err_set(err, CAIRN_ENET, "exec: %s",
		    x->conn_err[0] ? x->conn_err : "connection failed");
	return cairn_err_set(err, CAIRN_EPROTO, "exec: the stream ended "
	    "without a Status%s%s", x->conn_err[0] ? ": " : "", x->conn_err);
}

int
kube_exec(struct kube *k, const char *ns, const char *name,
	const struct kube_exec_opts *o, struct kube_exec_result *res,
	struct cairn_err *err)
{
	struct xs x;
	struct xs_target t;
	struct kube_auth a;
	struct kcfg_tls tls;
	const char *verify_name;
	int64_t timeout = o->timeout_us > 0 ? o->timeout_us :
	    KUBE_EXEC_TIMEOUT_US;
	int rc, attempt;

	memset(res, 0, sizeof *res);
	res->exit_code = -1;
	if (o->command == NULL || o->command[0] == NULL)
		return cairn_err_set(err, CAIRN_EINVAL, "exec: no command");
	memset(&x, 0, sizeof x);
	x.cap = o->output_cap > 0 ? o->output_cap : KUBE_EXEC_OUTPUT_CAP;
	res->out = xcalloc(1, x.cap + 1);
	res->err = xcalloc(1, x.cap + 1);
	pthread_once(&lws_log_once, lws_log_init);
	rc = pick_container(k, ns, name, o->pod, o->container, res->container,
	    sizeof res->container, err);
	if (rc < 0)
		return rc;
	rc = target_make(k, ns, name, res->container, o->command, &t, err);
	if (rc < 0)
		return rc;
	x.deadline_us = time_mono_us() + timeout;
	x.stop = o->stop;
	x.res = res;
	buf_init(&x.status, XS_STATUS_CAP);
	for (attempt = 0; attempt < 2; attempt++) {
		rc = kube_auth_get(k, attempt > 0, &a, err);
		if (rc < 0)
			break;
		tls = a.tls;
		verify_name = tls.tls_server_name != NULL ?
		    tls.tls_server_name : t.host;
		x.user_agent = a.user_agent;
		x.auth = a.token != NULL ? xasprintf("Bearer %s", a.token) : NULL;
		x.http = 0;
		x.conn_err[0] = x.tls_err[0] = '\0';
		rc = xs_run(k, &x, &t, &a, verify_name, err);
		kube_auth_clear(&a);	/* after: a.tls may hold the plugin's */
		if (x.auth != NULL)
			explicit_bzero(x.auth, strlen(x.auth));
		FREE_NULL(x.auth);
		/* A 401 may be a rotated token file: once more, re-read. */
		if (rc != CAIRN_EAUTH || x.http != 401 || attempt > 0)
			break;
		cairn_err_clear(err);
	}
	if (rc == 0)
		rc = xs_status(&x, err);
	if (rc == 0)
		log_debug("exec %s/%s [%s] %s: exit %d (%s)", ns, name,
		    res->container, o->command[0], res->exit_code,
		    res->protocol);
	buf_free(&x.status);
	target_free(&t);
	return rc;
}

void
kube_exec_result_free(struct kube_exec_result *res)
{
	if (res == NULL)
		return;
	FREE_NULL(res->out);
	FREE_NULL(res->err);
}
