/*
 * unit_http.h: a scripted HTTP/1.1 server for unit tests of the kube
 * client, when a test needs what libmicrohttpd will not do: cut a reply
 * in the middle of its body (a dropped connection mid-page), or see every
 * request in order.
 *
 *     static void h(void *arg, const struct uh_req *rq, struct uh_resp *rs)
 *     { rs->code = 200; uh_body(rs, "{...}"); rs->cut = 40; }
 *     unsigned port; uh_start(h, NULL, &port); ... uh_stop();
 *
 * One thread on a random loopback port answers one connection at a time,
 * one request per connection ("Connection: close"); after
 * uh_threaded(1), a thread per connection answers them at once, and
 * uh_max_inflight() says how many were answered at the same time. The handler fills the
 * reply; cut > 0 sends the headers (with the whole Content-Length) and only
 * the first cut bytes of the body, then closes: the client sees a
 * partial body. uh_log() has each request's "METHOD path?query", oldest
 * first.
 */
#ifndef CAIRN_UNIT_HTTP_H
#define CAIRN_UNIT_HTTP_H

#include <stdatomic.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define UH_LOG_MAX 512

struct uh_req {
	char method[16];
	char path[1024];	/* without the query */
	char query[2048];	/* after '?', "" if none */
};

struct uh_resp {
	int code;		/* 0: 200 */
	char *body;		/* malloc'd, freed by the server */
	size_t len;
	size_t cut;		/* > 0: send only this many body bytes */
	int64_t delay_us;	/* sleep before answering */
};

typedef void (*uh_handler)(void *arg, const struct uh_req *rq,
	struct uh_resp *rs);

static struct {
	int fd;
	pthread_t th;
	atomic_int stop;
	uh_handler h;
	void *arg;
	pthread_mutex_t mu;
	char *log[UH_LOG_MAX];
	int nlog;
	int threaded;		/* a thread per connection */
	int inflight, max_inflight, active;
} uh_;

/* Set the reply body (copied). */
static inline void
uh_body(struct uh_resp *rs, const char *s)
{
	free(rs->body);
	rs->len = strlen(s);
	rs->body = malloc(rs->len + 1);
	memcpy(rs->body, s, rs->len + 1);
}

static inline void
uh_log_clear(void)
{
	pthread_mutex_lock(&uh_.mu);
	for (int i = 0; i < uh_.nlog; i++)
		free(uh_.log[i]);
	uh_.nlog = 0;
	pthread_mutex_unlock(&uh_.mu);
}

/* How many logged requests contain s (in "METHOD path?query"). */
static inline int
uh_log_count(const char *s)
{
	int n = 0;

	pthread_mutex_lock(&uh_.mu);
	for (int i = 0; i < uh_.nlog; i++)
		if (strstr(uh_.log[i], s) != NULL)
			n++;
	pthread_mutex_unlock(&uh_.mu);
	return n;
}

/* How many logged requests are exactly s. */
static inline int
uh_log_count_exact(const char *s)
{
	int n = 0;

	pthread_mutex_lock(&uh_.mu);
	for (int i = 0; i < uh_.nlog; i++)
		if (strcmp(uh_.log[i], s) == 0)
			n++;
	pthread_mutex_unlock(&uh_.mu);
	return n;
}

static inline int
uh_log_total(void)
{
	int n;

	pthread_mutex_lock(&uh_.mu);
	n = uh_.nlog;
	pthread_mutex_unlock(&uh_.mu);
	return n;
}

/* Query parameter key of query into out (cut at cap - 1); NULL: absent. */
static inline const char *
uh_qparam(const char *query, const char *key, char *out, size_t cap)
{
	size_t kl = strlen(key);
	const char *p = query;

	while (p != NULL && *p != '\0') {
		if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
			size_t n = strcspn(p + kl + 1, "&");

			if (n >= cap)
				n = cap - 1;
			memcpy(out, p + kl + 1, n);
			out[n] = '\0';
			return out;
		}
		p = strchr(p, '&');
		if (p != NULL)
			p++;
	}
	return NULL;
}

static inline void
uh_write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

static inline void
uh_serve(int c)
{
	char req[8192], head[256], *sp, *sp2, *q;
	size_t n = 0;
	struct uh_req rq;
	struct uh_resp rs;
	const char *reason;

	while (n < sizeof req - 1) {
		struct pollfd p = { c, POLLIN, 0 };
		ssize_t r;

		if (poll(&p, 1, 2000) <= 0)
			return;
		r = recv(c, req + n, sizeof req - 1 - n, 0);
		if (r <= 0)
			return;
		n += (size_t)r;
		req[n] = '\0';
		if (strstr(req, "\r\n\r\n") != NULL)
			break;
	}
	memset(&rq, 0, sizeof rq);
	sp = strchr(req, ' ');
	if (sp == NULL)
		return;
	sp2 = strchr(sp + 1, ' ');
	if (sp2 == NULL)
		return;
	*sp = *sp2 = '\0';
	snprintf(rq.method, sizeof rq.method, "%.15s", req);
	q = strchr(sp + 1, '?');
	if (q != NULL) {
		*q = '\0';
		snprintf(rq.query, sizeof rq.query, "%.2047s", q + 1);
	}
	snprintf(rq.path, sizeof rq.path, "%.1023s", sp + 1);
	pthread_mutex_lock(&uh_.mu);
	if (uh_.nlog < UH_LOG_MAX) {
		size_t l = strlen(rq.method) + strlen(rq.path) +
		    strlen(rq.query) + 3;

		uh_.log[uh_.nlog] = malloc(l);
		snprintf(uh_.log[uh_.nlog], l, "%s %s%s%s", rq.method,
		    rq.path, rq.query[0] ? "?" : "", rq.query);
		uh_.nlog++;
	}
	pthread_mutex_unlock(&uh_.mu);
	memset(&rs, 0, sizeof rs);
	pthread_mutex_lock(&uh_.mu);
	if (++uh_.inflight > uh_.max_inflight)
		uh_.max_inflight = uh_.inflight;
	pthread_mutex_unlock(&uh_.mu);
	uh_.h(uh_.arg, &rq, &rs);
	if (rs.delay_us > 0)
		usleep((useconds_t)rs.delay_us);
	pthread_mutex_lock(&uh_.mu);
	uh_.inflight--;
	pthread_mutex_unlock(&uh_.mu);
	if (rs.code == 0)
		rs.code = 200;
	reason = rs.code == 200 ? "OK" : "Error";
	snprintf(head, sizeof head, "HTTP/1.1 %d %s\r\nContent-Type: "
	    "application/json\r\nContent-Length: %zu\r\nConnection: close"
	    "\r\n\r\n", rs.code, reason, rs.len);
	uh_write_all(c, head, strlen(head));
	uh_write_all(c, rs.body != NULL ? rs.body : "", rs.cut > 0 &&
	    rs.cut < rs.len ? rs.cut : rs.len);
	free(rs.body);
}

static inline void *
uh_conn(void *arg)
{
	int c = (int)(intptr_t)arg;

	uh_serve(c);
	shutdown(c, SHUT_RDWR);
	close(c);
	pthread_mutex_lock(&uh_.mu);
	uh_.active--;
	pthread_mutex_unlock(&uh_.mu);
	return NULL;
}

static inline void *
uh_main(void *arg)
{
	(void)arg;
	while (!uh_.stop) {
		struct pollfd p = { uh_.fd, POLLIN, 0 };
		pthread_t th;
		int c;

		if (poll(&p, 1, 100) <= 0)
			continue;
		c = accept(uh_.fd, NULL, NULL);
		if (c < 0)
			continue;
		pthread_mutex_lock(&uh_.mu);
		uh_.active++;
		pthread_mutex_unlock(&uh_.mu);
		if (!uh_.threaded || pthread_create(&th, NULL, uh_conn,
		    (void *)(intptr_t)c) != 0)
			uh_conn((void *)(intptr_t)c);
		else
			pthread_detach(th);
	}
	return NULL;
}

/* Answer each connection on a thread of its own (on), or in turn. */
static inline void
uh_threaded(int on)
{
	pthread_mutex_lock(&uh_.mu);
	uh_.threaded = on;
	uh_.max_inflight = 0;
	pthread_mutex_unlock(&uh_.mu);
}

/* Most requests answered at once since uh_threaded(). */
static inline int
uh_max_inflight(void)
{
	int n;

	pthread_mutex_lock(&uh_.mu);
	n = uh_.max_inflight;
	pthread_mutex_unlock(&uh_.mu);
	return n;
}

static inline int
uh_start(uh_handler h, void *arg, unsigned *port)
{
	struct sockaddr_in a;
	socklen_t al = sizeof a;

	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	uh_.fd = socket(AF_INET, SOCK_STREAM, 0);
	if (uh_.fd < 0 || bind(uh_.fd, (struct sockaddr *)&a, sizeof a) < 0 ||
	    listen(uh_.fd, 16) < 0 ||
	    getsockname(uh_.fd, (struct sockaddr *)&a, &al) < 0)
		return -1;
	*port = ntohs(a.sin_port);
	uh_.h = h;
	uh_.arg = arg;
	uh_.stop = 0;
	uh_.threaded = uh_.inflight = uh_.max_inflight = uh_.active = 0;
	pthread_mutex_init(&uh_.mu, NULL);
	return pthread_create(&uh_.th, NULL, uh_main, NULL) == 0 ? 0 : -1;
}

static inline void
uh_stop(void)
{
	uh_.stop = 1;
	pthread_join(uh_.th, NULL);
	for (;;) {		/* connection threads still answering */
		int n;

		pthread_mutex_lock(&uh_.mu);
		n = uh_.active;
		pthread_mutex_unlock(&uh_.mu);
		if (n == 0)
			break;
		usleep(10000);
	}
	close(uh_.fd);
	uh_log_clear();
}

#endif
