/*
 * web.c: the embedded web endpoint of `cairn server`.
 *
 * Design. libmicrohttpd runs a small pool of threads, each with its own
 * epoll set, accepting from one listening socket that we create ourselves
 * (so the address is exactly the one given, the error says why a bind
 * failed, and the bound port is known with port 0). Idle connections cost
 * an fd and a slot in an epoll set, not a thread, so hundreds of idle or
 * slow clients cannot starve /healthz; each is closed after
 * idle_timeout_s without progress, and the total is capped.
 *
 * Everything is read-only: no request body is ever read. A request that
 * has one (POST, or a GET announcing a body) is answered on the handler's
 * first call, so a POST gets its 405 at once and the connection is closed;
 * a plain GET or HEAD is answered on the second call so the connection can
 * be kept alive for the next poll. The
 * request line and headers must fit in the per-connection memory pool
 * (max_header bytes); bigger requests are refused by libmicrohttpd itself
 * before the handler runs. The URL length is checked from the URI logging
 * callback, which sees the raw request target before anything is decoded.
 *
 * Nothing is rendered on the server side: /status is a static page
 * (web/status.html, embedded at build time) whose script builds the DOM
 * from /status.json with textContent only. Its Content-Security-Policy
 * allows exactly that page's inline <script> and <style> by SHA-256 hash,
 * computed here once at start; every other answer carries
 * "default-src 'none'". Plain-text answers that repeat anything from the
 * server (the readiness reason) are text/plain with nosniff.
 *
 * The web threads run at a lower CPU priority (nice +10 by default, set
 * on each thread's first request): under CPU contention a flood of
 * requests gets a small share and the backups the rest, while an idle
 * machine still answers at full speed.
 *
 * The status document and the metrics are the expensive answers, so they
 * are cached (struct cached): at most one status() call per
 * status_interval_ms and one metrics_render() per metrics_interval_ms,
 * made under the cache's mutex by whichever request finds it stale; every
 * request in between queues the same ref-counted MHD_Response
 * (libmicrohttpd shares one response among connections), so the load
 * scrapers and browsers put on the server's state is bounded whatever the
 * request rate: a flood costs libmicrohttpd's per-request work, on the
 * web threads (bounded in number, niced), nothing else.
 *
 * Connections. Slow clients must not take the endpoint (or the process)
 * down: a client that trickles its request line or headers a byte at a
 * time never trips libmicrohttpd's idle timeout, and a thousand of them
 * used to fill every connection slot, so the kubelet's probes failed and
 * the pod was restarted. So:
 * - the total is capped at max_connections, and never above a quarter
 *   of RLIMIT_NOFILE: the descriptors the backups need (journal, API and
 *   storage connections, spool files) are never the web's to take;
 * - each client address may hold at most max_per_client connections;
 * - each request must be done within request_timeout_s of the moment its
 *   connection was accepted or its previous request ended, however
 *   slowly its bytes arrive (idle keep-alive time counts too): a reaper
 *   thread shuts such sockets down (shutdown(2), so libmicrohttpd closes
 *   them itself);
 * - when every slot is taken, a new connection evicts the one whose
 *   request has waited longest, so a probe always gets in: an attacker
 *   must open connections faster than the slots turn over to keep it out.
 * The table is updated from libmicrohttpd's connection notifications;
 * CLOSED is notified before libmicrohttpd closes the descriptor, and a
 * shutdown is only ever done under conn_mu on a descriptor still in the
 * table, so it never hits a descriptor reused by someone else.
 *
 * Threading: the handler runs on libmicrohttpd's threads. struct web is
 * read-only after web_start() except the two caches (their mutexes). The
 * source callbacks are called on those threads and must be thread-safe.
 */
#include "config.h"
#include "web/web.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"
#include "base/metrics.h"
#include "web/web_int.h"

#define WEB_LISTEN_BACKLOG	1024
#define WEB_CSP_MAX		512
#define CTX_BAD_TARGET		4	/* context word: see handle() */

/* An answer built at most once per interval and shared by all requests. */
struct cached {
	pthread_mutex_t mu;		/* guards resp, at */
	struct MHD_Response *resp;	/* NULL until first built */
	int64_t at;			/* monotonic time it was built */
	int64_t interval_us;
};

struct web {
	struct MHD_Daemon *mhd;
	struct web_source src;
	int port;			/* bound TCP port */
	char *auth;			/* "Bearer <token>" or NULL */
	size_t max_url;
	int nice;			/* for the web threads, < 0: none */
	char page_csp[WEB_CSP_MAX];	/* CSP of /status (hashes) */
	struct MHD_Response *page;	/* /status, built once */

	struct cached status;		/* /status.json */
	struct cached metrics;		/* /metrics */

	/* The connection guard (see "Connections" above). */
	pthread_mutex_t conn_mu;	/* guards conns, nconns */
	struct wconn *conns;		/* max_conn + 1 slots */
	unsigned nconns, max_conn;
	int64_t request_timeout_us;
	pthread_t reaper;
	int reaper_started;
	pthread_mutex_t stop_mu;
	pthread_cond_t stop_cv;
	int stopping;
};

/* One open connection: its socket and when its current request began. */
struct wconn {
	struct MHD_Connection *c;
	int fd;
	int64_t mark;			/* accept, or the end of its last request */
};

static const char csp_none[] = "default-src 'none'; frame-ancestors 'none'";

/* Headers every answer carries. */
static void
add_common_headers(struct MHD_Response *r, const char *csp, const char *type)
{
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(r, "X-Frame-Options", "DENY");
	MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	MHD_add_response_header(r, "Content-Security-Policy", csp);
}

static enum MHD_Result
queue(struct MHD_Connection *c, unsigned code, struct MHD_Response *r)
{
	char code_s[8];
	enum MHD_Result ok;

	ok = MHD_queue_response(c, code, r);
	snprintf(code_s, sizeof code_s, "%u", code);
	metrics_inc(METRIC_WEB_REQUESTS_TOTAL, METRIC_LABELS(code_s));
	return ok;
}

/* Answer with a copy of text (text/plain, or type when not NULL). */
static enum MHD_Result
reply_text(struct MHD_Connection *c, unsigned code, const char *text,
    const char *type)
{
	struct MHD_Response *r;
	enum MHD_Result ok;

	r = MHD_create_response_from_buffer(strlen(text), (void *)text,
	    MHD_RESPMEM_MUST_COPY);
	if (r == NULL)
		return MHD_NO;
	add_common_headers(r, csp_none,
	    type != NULL ? type : "text/plain; charset=utf-8");
	if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	if (code == MHD_HTTP_UNAUTHORIZED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
		    "Bearer realm=\"cairn\"");
	ok = queue(c, code, r);
	MHD_destroy_response(r);
	return ok;
}

/* Constant-time comparison of the Authorization header with w->auth. */
static int
authorized(const struct web *w, struct MHD_Connection *c)
{
	const char *got;
	size_t n, m;
	unsigned char diff = 0;

	if (w->auth == NULL)
		return 1;
	got = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
	    MHD_HTTP_HEADER_AUTHORIZATION);
	if (got == NULL)
		return 0;
	n = strlen(got);
	m = strlen(w->auth);
	for (size_t i = 0; i < m; i++)
		diff |= (unsigned char)(w->auth[i] ^ (i < n ? got[i] : 0));
	return diff == 0 && n == m;
}

/*
 * Build the status document: the source's snapshot plus version,
 * generatedAt and server.version. Owned JSON text or NULL.
 */
static char *
status_build(struct web *w, size_t *len)
{
	cJSON *doc, *server;
	char ts[TIME_STR_MAX], *text;

	if (w->src.status == NULL)
		doc = cJSON_CreateObject();
	else
		doc = w->src.status(w->src.arg);
	if (doc == NULL || !cJSON_IsObject(doc)) {
		cJSON_Delete(doc);
		return NULL;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(doc, "version");
	cJSON_AddNumberToObject(doc, "version", WEB_STATUS_VERSION);
	time_format_rfc3339(time_now_us(), ts);
	cJSON_DeleteItemFromObjectCaseSensitive(doc, "generatedAt");
	cJSON_AddStringToObject(doc, "generatedAt", ts);
	server = cJSON_GetObjectItemCaseSensitive(doc, "server");
	if (cJSON_IsObject(server) &&
	    cJSON_GetObjectItemCaseSensitive(server, "version") == NULL)
		cJSON_AddStringToObject(server, "version", PACKAGE_VERSION);
	text = json_print(doc);
	cJSON_Delete(doc);
	if (text == NULL)
		return NULL;
	*len = strlen(text);
	if (*len > WEB_CAP_STATUS_JSON) {
		log_warn("status document of %zu bytes over the cap", *len);
		free(text);
		return NULL;
	}
	return text;
}

/*
 * Queue ca's answer, first building it with build (an MHD_Response, NULL
 * on failure) when it is missing or older than its interval.
 */
static enum MHD_Result
serve_cached(struct web *w, struct MHD_Connection *c, struct cached *ca,
    struct MHD_Response *(*build)(struct web *), const char *fail,
    const char *fail_type)
{
	enum MHD_Result ok;
	int64_t now = time_mono_us();

	pthread_mutex_lock(&ca->mu);
	if (ca->resp == NULL || now - ca->at >= ca->interval_us) {
		struct MHD_Response *r = build(w);

		if (r == NULL) {
			pthread_mutex_unlock(&ca->mu);
			return reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
			    fail, fail_type);
		}
		if (ca->resp != NULL)
			MHD_destroy_response(ca->resp);
		ca->resp = r;
		ca->at = now;
	}
	/* Queued under the lock: the response cannot be replaced meanwhile. */
	ok = queue(c, MHD_HTTP_OK, ca->resp);
	pthread_mutex_unlock(&ca->mu);
	return ok;
}

static struct MHD_Response *
build_status_json(struct web *w)
{
	struct MHD_Response *r = NULL;
	size_t len = 0;
	char *text = status_build(w, &len);

	if (text != NULL)
		r = MHD_create_response_from_buffer(len, text,
		    MHD_RESPMEM_MUST_FREE);
	if (r == NULL) {
		free(text);
		return NULL;
	}
	add_common_headers(r, csp_none, "application/json");
	return r;
}

static struct MHD_Response *
build_metrics(struct web *w)
{
	struct MHD_Response *r;
	struct buf b;
	size_t len;
	char *text;

	(void)w;
	buf_init(&b, METRICS_CAP_RENDER);
	if (metrics_render(&b) < 0) {
		buf_free(&b);
		return NULL;
	}
	text = buf_take(&b, &len);
	if (text == NULL)
		text = xstrdup("");
	r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (r == NULL) {
		free(text);
		return NULL;
	}
	add_common_headers(r, csp_none, "text/plain; version=0.0.4; charset=utf-8");
	return r;
}

static enum MHD_Result
serve_readyz(struct web *w, struct MHD_Connection *c)
{
	struct buf why, body;
	enum MHD_Result ok;
	int ready = 1;

	buf_init(&why, WEB_CAP_READY_WHY);
	if (w->src.ready != NULL)
		ready = w->src.ready(w->src.arg, &why);
	if (ready) {
		buf_free(&why);
		return reply_text(c, MHD_HTTP_OK, "ok\n", NULL);
	}
	buf_init(&body, WEB_CAP_READY_WHY + 64);
	(void)buf_puts(&body, "not ready: ");
	/* The reason is untrusted text (API errors): no control chars. */
	(void)str_escape_text(&body, why.len ? buf_cstr(&why) : "unknown");
	(void)buf_putc(&body, '\n');
	ok = reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, buf_cstr(&body), NULL);
	buf_free(&body);
	buf_free(&why);
	return ok;
}

static enum MHD_Result
serve_redirect(struct MHD_Connection *c)
{
	struct MHD_Response *r;
	enum MHD_Result ok;

	r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	if (r == NULL)
		return MHD_NO;
	add_common_headers(r, csp_none, "text/plain; charset=utf-8");
	MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, "/status");
	ok = queue(c, MHD_HTTP_FOUND, r);
	MHD_destroy_response(r);
	return ok;
}

/* Answer one request (once; see handle() for when). */
static enum MHD_Result
route(struct web *w, struct MHD_Connection *c, const char *url,
    const char *method, size_t target_len)
{
	log_debug("%s %s", method, url);
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED,
		    "only GET and HEAD\n", NULL);
	if (target_len > w->max_url)
		return reply_text(c, MHD_HTTP_URI_TOO_LONG, "URL too long\n",
		    NULL);

	if (strcmp(url, "/healthz") == 0) {
		if (w->src.healthy != NULL && !w->src.healthy(w->src.arg))
			return reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE,
			    "unhealthy\n", NULL);
		return reply_text(c, MHD_HTTP_OK, "ok\n", NULL);
	}
	if (strcmp(url, "/readyz") == 0)
		return serve_readyz(w, c);

	if (!authorized(w, c))
		return reply_text(c, MHD_HTTP_UNAUTHORIZED,
		    "bearer token required\n", NULL);
	if (strcmp(url, "/status") == 0)
		return queue(c, MHD_HTTP_OK, w->page);
	if (strcmp(url, "/status.json") == 0)
		return serve_cached(w, c, &w->status, build_status_json,
		    "{\"error\":\"status unavailable\"}\n", "application/json");
	if (strcmp(url, "/metrics") == 0)
		return serve_cached(w, c, &w->metrics, build_metrics,
		    "metrics over their size cap\n", NULL);
	if (strcmp(url, "/") == 0)
		return serve_redirect(c);
	return reply_text(c, MHD_HTTP_NOT_FOUND, "not found\n", NULL);
}

/*
 * The access handler. *req is the request's context word set by
 * uri_logger(): the request target's length shifted left by three; bit 2
 * (CTX_BAD_TARGET) marks a target with a percent-encoded control
 * character, bit 1 is set after the first call, bit 0 once answered.
 *
 * GET and HEAD are answered on the second call, when libmicrohttpd knows
 * the request is complete (answering on the first call makes it close the
 * connection: no keep-alive for pollers). Anything with a request body
 * (other methods, or a GET announcing one) is answered on the first call,
 * so the body is never read, and the connection is closed after it.
 */
static enum MHD_Result
handle(void *cls, struct MHD_Connection *c, const char *url,
    const char *method, const char *version, const char *upload_data,
    size_t *upload_data_size, void **req)
{
	static _Thread_local int niced;
	struct web *w = cls;
	uintptr_t ctx = (uintptr_t)*req;
	const char *cl, *te;

	(void)version;
	(void)upload_data;
	if (!niced) {
		/* Lower this web thread's priority once (see the essay). */
		if (w->nice > 0 &&
		    setpriority(PRIO_PROCESS, (id_t)gettid(), w->nice) < 0)
			log_debug("setpriority: %s", strerror(errno));
		niced = 1;
	}
	if (ctx & 1) {
		*upload_data_size = 0;	/* answered: discard */
		return MHD_YES;
	}
	if (!(ctx & 2)) {
		*req = (void *)(ctx | 2);
		cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
		    MHD_HTTP_HEADER_CONTENT_LENGTH);
		te = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
		    MHD_HTTP_HEADER_TRANSFER_ENCODING);
		if ((strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
		    strcmp(method, MHD_HTTP_METHOD_HEAD) == 0) && te == NULL &&
		    (cl == NULL || strcmp(cl, "0") == 0))
			return MHD_YES;		/* answer on the next call */
	}
	*upload_data_size = 0;
	*req = (void *)(ctx | 3);
	if (ctx & CTX_BAD_TARGET)
		return reply_text(c, MHD_HTTP_BAD_REQUEST, "bad request target: "
		    "a percent-encoded control character\n", NULL);
	return route(w, c, url, method, (size_t)(ctx >> 3));
}

/*
 * Called with the raw request target before headers are read. Its return
 * value becomes the request's context word: the target's length shifted
 * left by three (an integer, nothing to free on any path; see handle()).
 */
static void *
uri_logger(void *cls, const char *uri, struct MHD_Connection *c)
{
	size_t n = strnlen(uri, SIZE_MAX >> 3);
	uintptr_t bad = 0;

	(void)cls;
	(void)c;
	/*
	 * A percent-encoded control character (%00-%1F, %7F) in the target:
	 * libmicrohttpd decodes %00 into a NUL, so "/metrics%00.txt" would
	 * compare equal to "/metrics". No path of ours has one: refused.
	 */
	for (const char *p = strchr(uri, '%'); p != NULL && bad == 0;
	    p = strchr(p + 1, '%')) {
		char h = p[1], l = p[2];

		if (l == '\0')
			break;
		if (h == '0' || h == '1' || (h == '7' && (l == 'f' || l == 'F')))
			bad = CTX_BAD_TARGET;
	}
	return (void *)(((uintptr_t)n << 3) | bad);
}

static void
mhd_logger(void *cls, const char *fmt, va_list ap)
{
	char line[512];
	size_t n;

	(void)cls;
	vsnprintf(line, sizeof line, fmt, ap);
	n = strlen(line);
	while (n > 0 && line[n - 1] == '\n')
		line[--n] = '\0';
	log_debug("libmicrohttpd: %s", line);
}

/* "sha256-<base64>" of n bytes at p, into out (>= 64 bytes). */
static void
csp_hash(const char *p, size_t n, char *out, size_t outsz)
{
	unsigned char md[EVP_MAX_MD_SIZE], b64[4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1];
	unsigned int mdlen = 0;

	EVP_Digest(p, n, md, &mdlen, EVP_sha256(), NULL);
	EVP_EncodeBlock(b64, md, (int)mdlen);
	snprintf(out, outsz, "'sha256-%s'", (const char *)b64);
}

/*
 * Hash of the text between <tag> and </tag> in the embedded page (the
 * page's only inline script and style). CAIRN_EINVAL if absent.
 */
static int
page_block_hash(const char *tag, char *out, size_t outsz)
{
	char open[32], close[32];
	const char *a, *b;

	snprintf(open, sizeof open, "<%s>", tag);
	snprintf(close, sizeof close, "</%s>", tag);
	a = strstr(web_status_html, open);
	if (a == NULL)
		return CAIRN_EINVAL;
	a += strlen(open);
	b = strstr(a, close);
	if (b == NULL)
		return CAIRN_EINVAL;
	csp_hash(a, (size_t)(b - a), out, outsz);
	return 0;
}

static int
build_page(struct web *w, struct cairn_err *err)
{
	char script[128], style[128];

	if (page_block_hash("script", script, sizeof script) < 0 ||
	    page_block_hash("style", style, sizeof style) < 0)
		return cairn_err_set(err, CAIRN_EINVAL,
		    "embedded status page lacks <script> or <style>");
	snprintf(w->page_csp, sizeof w->page_csp,
	    "default-src 'none'; script-src %s; style-src %s; "
	    "connect-src 'self'; img-src data:; base-uri 'none'; "
	    "form-action 'none'; frame-ancestors 'none'", script, style);
	w->page = MHD_create_response_from_buffer(web_status_html_len,
	    (void *)web_status_html, MHD_RESPMEM_PERSISTENT);
	if (w->page == NULL)
		return cairn_err_set(err, CAIRN_EFAIL, "cannot create page");
	add_common_headers(w->page, w->page_csp, "text/html; charset=utf-8");
	return 0;
}

int
web_token_read(const char *path, char **out, struct cairn_err *err)
{
	char data[WEB_CAP_TOKEN + 1];
	size_t n = 0;
	ssize_t got;
	int fd;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return cairn_err_errno(err, CAIRN_EINVAL, errno,
		    "web token file %s", path);
	for (;;) {
		got = read(fd, data + n, sizeof data - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		n += (size_t)got;
		if (n == sizeof data)
			break;
	}
	close(fd);
	if (got < 0)
		return cairn_err_errno(err, CAIRN_EINVAL, errno,
		    "reading web token file %s", path);
	if (n > WEB_CAP_TOKEN)
		return cairn_err_set(err, CAIRN_EINVAL,
		    "web token file %s is over %d bytes", path, WEB_CAP_TOKEN);
	while (n > 0 && (data[n - 1] == '\n' || data[n - 1] == '\r' ||
	    data[n - 1] == ' ' || data[n - 1] == '\t'))
		n--;
	data[n] = '\0';
	if (n == 0)
		return cairn_err_set(err, CAIRN_EINVAL,
		    "web token file %s is empty", path);
	for (size_t i = 0; i < n; i++) {
		if ((unsigned char)data[i] <= ' ' || data[i] == 0x7f)
			return cairn_err_set(err, CAIRN_EINVAL,
			    "web token file %s: token has spaces or control "
			    "characters", path);
	}
	*out = xstrdup(data);
	explicit_bzero(data, sizeof data);
	return 0;
}

/* Read the token file into w->auth ("Bearer <token>"). */
static int
read_token(struct web *w, const char *path, struct cairn_err *err)
{
	char *token = NULL;
	int rc = web_token_read(path, &token, err);

	if (rc < 0)
		return rc;
	w->auth = xasprintf("Bearer %s", token);
	explicit_bzero(token, strlen(token));
	free(token);
	return 0;
}

/*
 * Create a listening socket bound to exactly listen ("ADDR:PORT" or
 * "[V6]:PORT"); the fd or a negative cairn_rc.
 */
static int
listen_on(const char *listen_s, int *port, struct cairn_err *err)
{
	struct addrinfo hints, *ai = NULL;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	char host[256], *colon;
	const char *portstr;
	int fd = -1, one = 1, rc;

	if (listen_s == NULL || strlen(listen_s) >= sizeof host)
		return cairn_err_set(err, CAIRN_EINVAL,
		    "listen address missing or too long");
	snprintf(host, sizeof host, "%s", listen_s);
	colon = strrchr(host, ':');
	if (colon == NULL || colon == host || colon[1] == '\0')
		return cairn_err_set(err, CAIRN_EINVAL,
		    "listen address %s: want ADDR:PORT", listen_s);
	*colon = '\0';
	portstr = colon + 1;
	if (strspn(portstr, "0123456789") != strlen(portstr) ||
	    strlen(portstr) > 5 || atoi(portstr) > 65535)
		return cairn_err_set(err, CAIRN_EINVAL,
		    "listen address %s: bad port", listen_s);
	if (host[0] == '[') {
		size_t hl = strlen(host);

		if (hl < 3 || host[hl - 1] != ']')
			return cairn_err_set(err, CAIRN_EINVAL,
			    "listen address %s: bad IPv6 form", listen_s);
		host[hl - 1] = '\0';
		memmove(host, host + 1, hl - 1);
	}
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	rc = getaddrinfo(host, portstr, &hints, &ai);
	if (rc != 0)
		return cairn_err_set(err, CAIRN_EINVAL,
		    "listen address %s: %s", listen_s, gai_strerror(rc));
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = cairn_err_errno(err, CAIRN_EIO, errno, "socket");
		goto fail;
	}
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (ai->ai_family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		rc = cairn_err_errno(err, CAIRN_EIO, errno, "bind %s", listen_s);
		goto fail;
	}
	if (listen(fd, WEB_LISTEN_BACKLOG) < 0) {
		rc = cairn_err_errno(err, CAIRN_EIO, errno, "listen %s", listen_s);
		goto fail;
	}
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		rc = cairn_err_errno(err, CAIRN_EIO, errno, "getsockname");
		goto fail;
	}
	if (ss.ss_family == AF_INET6)
		*port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	else
		*port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	freeaddrinfo(ai);
	return fd;
fail:
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	return rc;
}

/* ---- the connection guard ------------------------------------------ */

static void
conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
    enum MHD_ConnectionNotificationCode code)
{
	struct web *w = cls;
	const union MHD_ConnectionInfo *ci;
	int64_t now = time_mono_us();

	(void)socket_context;
	pthread_mutex_lock(&w->conn_mu);
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		ci = MHD_get_connection_info(c,
		    MHD_CONNECTION_INFO_CONNECTION_FD);
		if (w->nconns >= w->max_conn) {
			/* Full: the request waiting longest makes room. */
			unsigned old = 0;

			for (unsigned i = 1; i < w->nconns; i++)
				if (w->conns[i].mark < w->conns[old].mark)
					old = i;
			(void)shutdown(w->conns[old].fd, SHUT_RDWR);
			w->conns[old] = w->conns[--w->nconns];
		}
		if (ci != NULL) {
			w->conns[w->nconns].c = c;
			w->conns[w->nconns].fd = ci->connect_fd;
			w->conns[w->nconns].mark = now;
			w->nconns++;
		}
	} else {
		for (unsigned i = 0; i < w->nconns; i++)
			if (w->conns[i].c == c) {
				w->conns[i] = w->conns[--w->nconns];
				break;
			}
	}
	pthread_mutex_unlock(&w->conn_mu);
}

/* A request ended: the connection's next one starts its clock now. */
static void
request_done(void *cls, struct MHD_Connection *c, void **req,
    enum MHD_RequestTerminationCode toe)
{
	struct web *w = cls;
	int64_t now = time_mono_us();

	(void)req;
	(void)toe;
	pthread_mutex_lock(&w->conn_mu);
	for (unsigned i = 0; i < w->nconns; i++)
		if (w->conns[i].c == c) {
			w->conns[i].mark = now;
			break;
		}
	pthread_mutex_unlock(&w->conn_mu);
}

/* Shut down connections whose request took longer than the timeout. */
static void *
reaper_main(void *arg)
{
	struct web *w = arg;
	struct timespec ts;

	util_thread_name("web");

	pthread_mutex_lock(&w->stop_mu);
	while (!w->stopping) {
		int64_t now = time_mono_us();

		pthread_mutex_lock(&w->conn_mu);
		for (unsigned i = 0; i < w->nconns; i++)
			if (now - w->conns[i].mark > w->request_timeout_us) {
				(void)shutdown(w->conns[i].fd, SHUT_RDWR);
				/* MHD closes it; CLOSED drops the slot */
				w->conns[i].mark = INT64_MAX;
			}
		pthread_mutex_unlock(&w->conn_mu);
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 250 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&w->stop_cv, &w->stop_mu, &ts);
	}
	pthread_mutex_unlock(&w->stop_mu);
	return NULL;
}

/*
 * The connection cap: the configured one, but never more than a quarter
 * of the open-file limit (at least 8), so the work keeps its descriptors.
 */
static unsigned
conn_cap(unsigned want)
{
	struct rlimit rl;
	rlim_t quarter;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return want;
	quarter = rl.rlim_cur / 4 > 8 ? rl.rlim_cur / 4 : 8;
	if ((rlim_t)want > quarter) {
		log_info("web endpoint: at most %llu connections at once, a "
		    "quarter of the open-file limit %llu (instead of %u)",
		    (unsigned long long)quarter,
		    (unsigned long long)rl.rlim_cur, want);
		return (unsigned)quarter;
	}
	return want;
}

int
web_start(const struct web_opts *opts, const struct web_source *src,
    struct web **out, struct cairn_err *err)
{
	struct web *w;
	unsigned max_conn, threads, idle, per_client, req_timeout;
	size_t max_header;
	int fd = -1, rc;

	*out = NULL;
	metrics_init();
	w = xcalloc(1, sizeof *w);
	pthread_mutex_init(&w->status.mu, NULL);
	pthread_mutex_init(&w->metrics.mu, NULL);
	pthread_mutex_init(&w->conn_mu, NULL);
	pthread_mutex_init(&w->stop_mu, NULL);
	pthread_cond_init(&w->stop_cv, NULL);
	if (src != NULL)
		w->src = *src;
	w->max_url = opts->max_url ? opts->max_url : WEB_DEFAULT_MAX_URL;
	w->nice = opts->nice ? opts->nice : WEB_DEFAULT_NICE;
	w->status.interval_us = (int64_t)(opts->status_interval_ms ?
	    opts->status_interval_ms : WEB_DEFAULT_STATUS_INTERVAL_MS) * 1000;
	w->metrics.interval_us = (int64_t)(opts->metrics_interval_ms ?
	    opts->metrics_interval_ms : WEB_DEFAULT_METRICS_INTERVAL_MS) * 1000;
	max_conn = opts->max_connections ? opts->max_connections :
	    WEB_DEFAULT_MAX_CONNECTIONS;
	threads = opts->threads ? opts->threads : WEB_DEFAULT_THREADS;
	idle = opts->idle_timeout_s ? opts->idle_timeout_s :
	    WEB_DEFAULT_IDLE_TIMEOUT_S;
	max_header = opts->max_header ? opts->max_header : CAIRN_CAP_HTTP_REQ;
	max_conn = conn_cap(max_conn);
	per_client = opts->max_per_client ? opts->max_per_client :
	    WEB_DEFAULT_MAX_PER_CLIENT;
	if (per_client > max_conn)
		per_client = max_conn;
	req_timeout = opts->request_timeout_s ? opts->request_timeout_s :
	    WEB_DEFAULT_REQUEST_TIMEOUT_S;
	w->request_timeout_us = (int64_t)req_timeout * TIME_US_PER_SEC;
	w->max_conn = max_conn;
	w->conns = xcalloc(max_conn + 1, sizeof *w->conns);

	if (opts->token_file != NULL) {
		rc = read_token(w, opts->token_file, err);
		if (rc < 0)
			goto fail;
	}
	rc = build_page(w, err);
	if (rc < 0)
		goto fail;
	fd = listen_on(opts->listen, &w->port, err);
	if (fd < 0) {
		rc = fd;
		goto fail;
	}
	w->mhd = MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD |
	    MHD_USE_ERROR_LOG, 0, NULL, NULL, handle, w,
	    MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
	    MHD_OPTION_THREAD_POOL_SIZE, threads,
	    /* one over: the guard evicts before libmicrohttpd refuses */
	    MHD_OPTION_CONNECTION_LIMIT, max_conn + 1,
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_client,
	    MHD_OPTION_NOTIFY_CONNECTION, conn_notify, (void *)w,
	    MHD_OPTION_NOTIFY_COMPLETED, request_done, (void *)w,
	    MHD_OPTION_CONNECTION_TIMEOUT, idle,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, max_header,
	    MHD_OPTION_URI_LOG_CALLBACK, uri_logger, (void *)NULL,
	    MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, (void *)NULL,
	    MHD_OPTION_STRICT_FOR_CLIENT, 1,
	    MHD_OPTION_END);
	if (w->mhd == NULL) {
		rc = cairn_err_set(err, CAIRN_EFAIL,
		    "libmicrohttpd could not start on %s", opts->listen);
		goto fail;
	}
	if (pthread_create(&w->reaper, NULL, reaper_main, w) != 0) {
		rc = cairn_err_set(err, CAIRN_EFAIL, "web endpoint: thread");
		fd = -1;	/* the daemon owns it now */
		goto fail;
	}
	w->reaper_started = 1;
	log_info("web endpoint on %s (port %d)%s", opts->listen, w->port,
	    w->auth != NULL ? ", bearer token required" : "");
	*out = w;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	web_stop(w);
	return rc;
}

int
web_port(const struct web *w)
{
	return w != NULL ? w->port : -1;
}

void
web_stop(struct web *w)
{
	if (w == NULL)
		return;
	if (w->reaper_started) {
		pthread_mutex_lock(&w->stop_mu);
		w->stopping = 1;
		pthread_cond_signal(&w->stop_cv);
		pthread_mutex_unlock(&w->stop_mu);
		pthread_join(w->reaper, NULL);
	}
	if (w->mhd != NULL)
		MHD_stop_daemon(w->mhd);	/* closes the listening socket */
	if (w->status.resp != NULL)
		MHD_destroy_response(w->status.resp);
	if (w->metrics.resp != NULL)
		MHD_destroy_response(w->metrics.resp);
	if (w->page != NULL)
		MHD_destroy_response(w->page);
	pthread_mutex_destroy(&w->status.mu);
	pthread_mutex_destroy(&w->metrics.mu);
	pthread_mutex_destroy(&w->conn_mu);
	pthread_mutex_destroy(&w->stop_mu);
	pthread_cond_destroy(&w->stop_cv);
	free(w->conns);
	if (w->auth != NULL)
		explicit_bzero(w->auth, strlen(w->auth));
	free(w->auth);
	free(w);
}
