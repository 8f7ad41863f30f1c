/*
 * test_web.c: unit tests of web/: the endpoint's routing, auth, caps and
 * status cache, talking HTTP to a real web_start() on 127.0.0.1 port 0
 * over plain sockets. (The registry it renders: test_metrics.c; the
 * status document builders: test_status_doc.c.)
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/timeutil.h"
#include "tests/unit/unit.h"
#include "base/metrics.h"
#include "web/web.h"

/* ---- the endpoint ---- */

struct fake {
	pthread_mutex_t mu;
	int status_calls;
	int ready;
	int healthy;
};

static cJSON *
fake_status(void *arg)
{
	struct fake *f = arg;
	cJSON *doc = cJSON_CreateObject();
	cJSON *server = cJSON_AddObjectToObject(doc, "server");

	pthread_mutex_lock(&f->mu);
	f->status_calls++;
	cJSON_AddNumberToObject(doc, "calls", f->status_calls);
	pthread_mutex_unlock(&f->mu);
	cJSON_AddStringToObject(server, "id", "unit");
	cJSON_AddStringToObject(doc, "version", "forged");
	return doc;
}

static int
fake_healthy(void *arg)
{
	return ((struct fake *)arg)->healthy;
}

static int
fake_ready(void *arg, struct buf *why)
{
	struct fake *f = arg;

	if (f->ready)
		return 1;
	(void)buf_puts(why, "journal not writable\x01<b>");
	return 0;
}

/*
 * Send req to 127.0.0.1:port and read the whole answer (the request asks
 * for Connection: close). Returns the status code, or -1; the answer goes to
 * *resp (owned) when resp is not NULL.
 */
static int
http_raw(int port, const char *req, size_t reqlen, char **resp)
{
	struct sockaddr_in sa;
	struct timeval tv = { 5, 0 };
	struct buf b;
	char chunk[4096];
	int fd, code = -1;
	size_t off = 0;
	ssize_t n;

	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		close(fd);
		return -1;
	}
	while (off < reqlen) {
		n = send(fd, req + off, reqlen - off, MSG_NOSIGNAL);
		if (n <= 0)
			break;	/* the server may refuse early */
		off += (size_t)n;
	}
	buf_init(&b, 1u << 20);
	while ((n = recv(fd, chunk, sizeof chunk, 0)) > 0) {
		if (buf_append(&b, chunk, (size_t)n) < 0)
			break;
	}
	close(fd);
	if (b.len > 12 && strncmp(buf_cstr(&b), "HTTP/1.", 7) == 0)
		code = atoi(buf_cstr(&b) + 9);
	if (resp != NULL)
		*resp = buf_take(&b, NULL);
	buf_free(&b);
	return code;
}

static int
http(int port, const char *method, const char *path, const char *extra,
    char **resp)
{
	struct buf req;
	int code;

	buf_init(&req, 1u << 20);
	buf_printf(&req, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
	    "Connection: close\r\n%s\r\n", method, path, extra ? extra : "");
	code = http_raw(port, buf_cstr(&req), req.len, resp);
	buf_free(&req);
	return code;
}

static struct web *
start(struct fake *f, const char *token_file, unsigned interval_ms)
{
	struct web_opts o = { .listen = "127.0.0.1:0", .token_file = token_file,
	    .status_interval_ms = interval_ms };
	struct web_source s = { fake_status, fake_healthy, fake_ready, f };
	struct cairn_err err = CAIRN_ERR_INIT;
	struct web *w = NULL;

	pthread_mutex_init(&f->mu, NULL);
	f->ready = f->healthy = 1;
	if (web_start(&o, &s, &w, &err) < 0) {
		fprintf(stderr, "web_start: %s\n", err.msg);
		return NULL;
	}
	return w;
}

static void
test_web_routes(void)
{
	struct fake f = { .status_calls = 0 };
	struct web *w = start(&f, NULL, 100000);
	char *r = NULL;
	int port;

	REQUIRE(w != NULL);
	port = web_port(w);
	CHECK(port > 0);
	CHECK_INT(http(port, "GET", "/healthz", NULL, &r), 200);
	CHECK(r != NULL && strstr(r, "X-Content-Type-Options: nosniff") != NULL);
	free(r);
	CHECK_INT(http(port, "GET", "/status", NULL, &r), 200);
	CHECK(r != NULL && strstr(r, "Content-Type: text/html") != NULL);
	CHECK(r != NULL && strstr(r, "script-src 'sha256-") != NULL);
	CHECK(r != NULL && strstr(r, "<!DOCTYPE html>") != NULL);
	free(r);
	CHECK_INT(http(port, "HEAD", "/status", NULL, &r), 200);
	CHECK(r != NULL && strstr(r, "<!DOCTYPE html>") == NULL);
	free(r);
	CHECK_INT(http(port, "GET", "/status.json", NULL, &r), 200);
	CHECK(r != NULL && strstr(r, "\"version\":2") != NULL);
	CHECK(r != NULL && strstr(r, "forged") == NULL);
	CHECK(r != NULL && strstr(r, "\"generatedAt\":\"") != NULL);
	CHECK(r != NULL && strstr(r, "\"version\":\"" PACKAGE_VERSION "\"") != NULL);
	CHECK(r != NULL && strstr(r, "default-src 'none'") != NULL);
	free(r);
	CHECK_INT(http(port, "GET", "/metrics", NULL, &r), 200);
	CHECK(r != NULL && strstr(r, "text/plain; version=0.0.4") != NULL);
	CHECK(r != NULL && strstr(r, "cairn_web_requests_total{code=\"200\"}") != NULL);
	free(r);
	CHECK_INT(http(port, "GET", "/nothing", NULL, NULL), 404);
	CHECK_INT(http(port, "GET", "/", NULL, &r), 302);
	CHECK(r != NULL && strstr(r, "Location: /status") != NULL);
	free(r);
	CHECK_INT(http(port, "POST", "/status", "Content-Length: 3\r\n", &r), 405);
	CHECK(r != NULL && strstr(r, "Allow: GET, HEAD") != NULL);
	free(r);
	CHECK_INT(http(port, "DELETE", "/healthz", NULL, NULL), 405);
	web_stop(w);
	pthread_mutex_destroy(&f.mu);
}

static void
test_web_health_ready(void)
{
	struct fake f = { .status_calls = 0 };
	struct web *w = start(&f, NULL, 0);
	char *r = NULL;
	int port;

	REQUIRE(w != NULL);
	port = web_port(w);
	CHECK_INT(http(port, "GET", "/readyz", NULL, NULL), 200);
	f.ready = 0;
	CHECK_INT(http(port, "GET", "/readyz", NULL, &r), 503);
	/* The reason is there, as plain text with control bytes escaped. */
	CHECK(r != NULL && strstr(r, "not ready: journal not writable\\x01<b>") != NULL);
	CHECK(r != NULL && strstr(r, "Content-Type: text/plain") != NULL);
	free(r);
	f.ready = 1;
	CHECK_INT(http(port, "GET", "/readyz", NULL, NULL), 200);
	f.healthy = 0;
	CHECK_INT(http(port, "GET", "/healthz", NULL, NULL), 503);
	web_stop(w);
	pthread_mutex_destroy(&f.mu);
}

static void
test_web_status_cached(void)
{
	struct fake f = { .status_calls = 0 };
	struct web *w = start(&f, NULL, 60000);
	int port;

	REQUIRE(w != NULL);
	port = web_port(w);
	for (int i = 0; i < 20; i++)
		CHECK_INT(http(port, "GET", "/status.json", NULL, NULL), 200);
	/* One snapshot per minute, whatever the request rate. */
	CHECK_INT(f.status_calls, 1);
	web_stop(w);
	pthread_mutex_destroy(&f.mu);
}

static void
test_web_token(void)
{
	struct fake f = { .status_calls = 0 };
	char path[512];
	struct web *w;
	FILE *fp;
	char *r = NULL;
	int port;

	snprintf(path, sizeof path, "%s/token", UNIT_TMPDIR());
	fp = fopen(path, "w");
	REQUIRE(fp != NULL);
	fputs("s3cret-token\n", fp);
	fclose(fp);
	w = start(&f, path, 0);
	REQUIRE(w != NULL);
	port = web_port(w);
	CHECK_INT(http(port, "GET", "/status", NULL, &r), 401);
	CHECK(r != NULL && strstr(r, "WWW-Authenticate: Bearer") != NULL);
	free(r);
	CHECK_INT(http(port, "GET", "/metrics", NULL, NULL), 401);
	CHECK_INT(http(port, "GET", "/status.json", "Authorization: Bearer s3cret-toke\r\n", NULL), 401);
	CHECK_INT(http(port, "GET", "/status.json", "Authorization: Bearer s3cret-token2\r\n", NULL), 401);
	CHECK_INT(http(port, "GET", "/status.json", "Authorization: Basic s3cret-token\r\n", NULL), 401);
	CHECK_INT(http(port, "GET", "/status.json", "Authorization: Bearer s3cret-token\r\n", NULL), 200);
	CHECK_INT(http(port, "GET", "/healthz", NULL, NULL), 200);
	CHECK_INT(http(port, "GET", "/readyz", NULL, NULL), 200);
	web_stop(w);
	pthread_mutex_destroy(&f.mu);
}

static void
test_web_caps(void)
{
	struct fake f = { .status_calls = 0 };
	struct web *w = start(&f, NULL, 0);
	struct buf big;
	char *path;
	int port, code;

	REQUIRE(w != NULL);
	port = web_port(w);
	/* A URL over the cap. */
	path = malloc(WEB_DEFAULT_MAX_URL + 100);
	REQUIRE(path != NULL);
	memset(path, 'a', WEB_DEFAULT_MAX_URL + 99);
	path[0] = '/';
	path[WEB_DEFAULT_MAX_URL + 99] = '\0';
	CHECK_INT(http(port, "GET", path, NULL, NULL), 414);
	free(path);
	/* A 1 MB header. */
	buf_init(&big, 2u << 20);
	buf_puts(&big, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ");
	for (int i = 0; i < (1 << 20); i++)
		buf_putc(&big, 'b');
	buf_puts(&big, "\r\n\r\n");
	code = http_raw(port, big.data, big.len, NULL);
	CHECK(code == 431 || code == -1);	/* refused, or reset mid-send */
	buf_free(&big);
	/* Still serving. */
	CHECK_INT(http(port, "GET", "/healthz", NULL, NULL), 200);
	web_stop(w);
	pthread_mutex_destroy(&f.mu);
}

static void
test_web_bad_opts(void)
{
	struct web_opts o = { .listen = NULL };
	struct cairn_err err = CAIRN_ERR_INIT;
	struct web *w = NULL, *w2 = NULL;
	struct fake f = { .status_calls = 0 };
	char addr[64];
	const char *bad[] = { "127.0.0.1", ":80", "127.0.0.1:", "127.0.0.1:99999",
	    "127.0.0.1:8x", "[::1:80", "256.1.1.1:80", NULL };

	for (int i = 0; bad[i] != NULL; i++) {
		o.listen = bad[i];
		CHECK(web_start(&o, NULL, &w, &err) == CAIRN_EINVAL);
		CHECK(w == NULL);
	}
	o.listen = "127.0.0.1:0";
	o.token_file = "/nonexistent/token";
	CHECK(web_start(&o, NULL, &w, &err) == CAIRN_EINVAL);
	CHECK(strstr(err.msg, "/nonexistent/token") != NULL);
	/* Address in use. */
	w = start(&f, NULL, 0);
	REQUIRE(w != NULL);
	snprintf(addr, sizeof addr, "127.0.0.1:%d", web_port(w));
	o.listen = addr;
	o.token_file = NULL;
	CHECK(web_start(&o, NULL, &w2, &err) == CAIRN_EIO);
	CHECK(w2 == NULL);
	web_stop(w);
	web_stop(NULL);
	pthread_mutex_destroy(&f.mu);
	/* IPv6 loopback, when the host has it. */
	o.listen = "[::1]:0";
	if (web_start(&o, NULL, &w, &err) == 0) {
		CHECK(web_port(w) > 0);
		web_stop(w);
	}
}

int
main(void)
{
	RUN(test_web_routes);
	RUN(test_web_health_ready);
	RUN(test_web_status_cached);
	RUN(test_web_token);
	RUN(test_web_caps);
	RUN(test_web_bad_opts);
	return unit_done();
}
