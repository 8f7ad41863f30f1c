/*
 * web.h: cairn's embedded web endpoint (libmicrohttpd).
 *
 *   GET /status        self-contained HTML page, updates live from /status.json
 *   GET /status.json   the status document (docs/status-json.md)
 *   GET /healthz       200 while the process's loops are alive, else 503
 *   GET /readyz        200 when ready, else 503 with the reason as the body
 *   GET /metrics       Prometheus text format 0.0.4 (base/metrics.h)
 *
 * Read-only: GET and HEAD only (405 with Allow otherwise). With a token file
 * every path but /healthz and /readyz needs "Authorization: Bearer <token>"
 * (401 with WWW-Authenticate otherwise). Caps: request header bytes, URL
 * length, concurrent connections, idle time per connection.
 *
 * The web module knows nothing about backups: the server hands it a
 * struct web_source of callbacks. They are called from the web threads,
 * concurrently with the server's own threads, so they must be thread-safe;
 * they should be cheap (read a snapshot under a mutex). status() is called
 * at most once per opts->status_interval_ms and the metrics are rendered at
 * most once per opts->metrics_interval_ms whatever the request rate: each
 * answer is cached and shared by every request in between, so load on
 * /status.json or /metrics cannot slow the backups down.
 */
#ifndef CAIRN_WEB_H
#define CAIRN_WEB_H

#include <cjson/cJSON.h>
#include "base/buf.h"
#include "base/err.h"

struct web;

/* Version of the /status.json document format (its "version" field). */
#define WEB_STATUS_VERSION	2

/* Defaults used when a field of struct web_opts is 0. */
#define WEB_DEFAULT_MAX_CONNECTIONS	1000
#define WEB_DEFAULT_THREADS		2
#define WEB_DEFAULT_IDLE_TIMEOUT_S	15
#define WEB_DEFAULT_MAX_PER_CLIENT	32
#define WEB_DEFAULT_REQUEST_TIMEOUT_S	10
#define WEB_DEFAULT_MAX_URL		2048
#define WEB_DEFAULT_STATUS_INTERVAL_MS	500
#define WEB_DEFAULT_METRICS_INTERVAL_MS	1000
#define WEB_DEFAULT_NICE		10
#define WEB_CAP_TOKEN			4096	/* token file size */
#define WEB_CAP_STATUS_JSON		(16u << 20)	/* one status document */
#define WEB_CAP_READY_WHY		4096	/* readiness reason */

struct web_opts {
	const char *listen;	/* "ADDR:PORT", "[v6addr]:PORT"; port 0 picks one */
	const char *token_file;	/* NULL: no token required */
	unsigned max_connections; /* concurrent connections */
	unsigned threads;	/* libmicrohttpd thread pool size */
	unsigned idle_timeout_s; /* a connection idle this long is closed */
	unsigned max_per_client; /* connections from one address at once */
	unsigned request_timeout_s; /* a request (bytes in and out, and the
				   wait before it) takes at most this long */
	size_t max_header;	/* bytes of request line + headers; 0: CAIRN_CAP_HTTP_REQ */
	size_t max_url;		/* bytes of the request target */
	unsigned status_interval_ms; /* status() called at most this often */
	unsigned metrics_interval_ms; /* metrics rendered at most this often */
	int nice;		/* web threads' nice increment (0: default
				   WEB_DEFAULT_NICE, < 0: leave as is) so a
				   request flood yields the CPU to backups */
};

struct web_source {
	/*
	 * A new snapshot of the status document (owned by the web module,
	 * which sets "version" and "generatedAt" and, if "server" lacks it,
	 * "server.version"). NULL: 500 for /status.json. May be NULL.
	 */
	cJSON *(*status)(void *arg);
	/* Non-zero while the server's loops are alive. NULL: always. */
	int (*healthy)(void *arg);
	/*
	 * Non-zero when ready; else append the reason to why (capped at
	 * WEB_CAP_READY_WHY) and return 0. NULL: always ready.
	 */
	int (*ready)(void *arg, struct buf *why);
	void *arg;		/* passed to every callback */
};

/*
 * Parse opts->listen, read the token file, bind exactly that address and
 * start serving on libmicrohttpd's internal thread pool (epoll). src is
 * copied; src->arg must stay valid until web_stop(). On success *out is the
 * running endpoint (stop with web_stop()). On failure returns a negative
 * cairn_rc (CAIRN_EINVAL bad address or token file, CAIRN_EIO bind/listen
 * failed, CAIRN_EFAIL libmicrohttpd refused), with err set, *out NULL and
 * nothing left running.
 */
int web_start(const struct web_opts *opts, const struct web_source *src,
    struct web **out, struct cairn_err *err);

/*
 * Read a token file as web_start() does: trailing whitespace trimmed, at
 * most WEB_CAP_TOKEN bytes, non-empty, no spaces or control characters.
 * On success *out is the token (caller frees); on failure CAIRN_EINVAL
 * with err set and *out NULL.
 */
int web_token_read(const char *path, char **out, struct cairn_err *err);

/* The TCP port actually bound (useful with port 0). */
int web_port(const struct web *w);

/*
 * Stop serving: closes the listening socket and every connection, waits for
 * the web threads, and frees w. No callback runs after it returns. NULL is
 * accepted.
 */
void web_stop(struct web *w);

#endif
