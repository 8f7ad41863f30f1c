/*
 * kube.c: the client handle and its transport.
 *
 * Design. One struct kube per API server, shared by every thread of the
 * process. libcurl does the HTTP/1.1 and TLS work; what this file adds is
 * the policy around it:
 *
 * - Connection reuse. A CURLSH share holds the connection cache, the DNS
 *   cache and the TLS session cache, guarded by one mutex per lock class.
 *   Easy handles come from a small pool and go back after each request,
 *   so keep-alive connections survive between requests and threads: 1,000
 *   sequential GETs ride one TCP connection.
 * - Rate limit. None by default: the server says when it is too much
 *   (429 with Retry-After from API Priority and Fairness) and flow.c
 *   holds that request's flow until then, and narrows how many of its
 *   requests may be in flight. A fixed token bucket (qps, burst) as
 *   client-go's is there for those who ask (--qps): a request reserves a
 *   token and sleeps outside the lock until it is due.
 * - Retries. 429 is always retried (the server refused before doing
 *   anything), never before its Retry-After (one longer than
 *   KUBE_RETRY_AFTER_MAX_S fails the request instead: CAIRN_EBUSY);
 *   5xx with Retry-After likewise (as
 *   client-go, up to max_retries); 5xx without it and connection failures
 *   after the request may have been sent are retried only for idempotent
 *   requests (GET, watch, PUT carrying a resourceVersion), with capped
 *   exponential backoff and jitter. Failing to connect at all is retried
 *   for every verb: nothing was sent. A 401 re-reads a rotated token file
 *   once. A POST or PATCH that lost its connection is reported, never
 *   re-sent: the caller decides (it may have been applied).
 *   Caveat: libcurl itself re-sends a request once when a reused keep-alive
 *   connection turns out to be closed before any reply byte arrived (the
 *   server closed an idle connection); that is a libcurl behaviour with no
 *   switch to turn off.
 * - Caps and timeouts. Every buffered reply is capped by
 *   CAIRN_CAP_API_BODY; a streamed reply (lists, watches) goes to a sink
 *   that buffers one object at a time. Each request has a total timeout
 *   (watches none; they use timeoutSeconds and a stop flag checked by the
 *   progress callback at least once a second).
 * - Errors. A non-2xx reply's Status (code, reason, message,
 *   retryAfterSeconds) is recorded for the calling thread
 *   (kube_last_status) and mapped to an enum cairn_rc.
 *
 * Threading: kube_* functions may be called from any thread at once. The
 * config is immutable after load except its token state (own mutex).
 */
#include "config.h"
#include "kube/internal.h"
#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"

#include <stdatomic.h>
#include <curl/curl.h>
#include <isa-l/igzip_lib.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define KUBE_POOL_MAX 64
#define KUBE_MAX_IDLE_CONNS 32
#define KUBE_DEFAULT_RETRIES 10
#define KUBE_DEFAULT_TIMEOUT_US (30 * TIME_US_PER_SEC)
#define KUBE_CONNECT_TIMEOUT_MS 10000L
#define KUBE_BACKOFF_BASE_US (100 * 1000LL)
#define KUBE_BACKOFF_CAP_US (5 * TIME_US_PER_SEC)
/* Failing to connect at all: retried this long (kubectl answers at once). */
#define KUBE_CONNECT_WAIT_US (2 * TIME_US_PER_SEC)
#define KUBE_RETRY_AFTER_MAX_S 600
#define KUBE_ERROR_BODY_CAP (1u << 20)	/* a non-2xx reply, streamed calls */
#define KUBE_INFLATE_OUT (64u << 10)	/* inflated at once (gz_put) */

struct kube_discovery;

struct kube {
	struct kube_config *cfg;	/* owned */
	struct kube_client_opts o;
	char *user_agent;		/* owned */
	char *base_url;			/* scheme://host:port[/prefix], owned */
	int https;
	struct curl_slist *connect_to;	/* tls-server-name mapping, or NULL */

	CURLSH *share;
	pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];

	pthread_mutex_t pool_lock;	/* guards pool, npool */
	CURL *pool[KUBE_POOL_MAX];
	int npool;

	pthread_mutex_t rl_lock;	/* guards the token bucket */
	double rl_tokens;
	int64_t rl_last_us;

	pthread_mutex_t stats_lock;
	struct kube_stats stats;
	struct kube_flows *flows;	/* push-back per flow (flow.c) */

	pthread_mutex_t disc_lock;	/* guards disc, disc_at */
	struct kube_discovery *disc;	/* one reference held here */
	int64_t disc_at;
	int warned_http_token;
	int strict_fields;		/* kube_set_strict_fields */
};

static _Thread_local struct kube_status tl_status;
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void
curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- status ---- */

const struct kube_status *
kube_last_status(void)
{
	return &tl_status;
}

void
kube_status_set(int http, int rc, const char *reason, const char *message,
    int64_t retry_after_s)
{
	tl_status.http = http;
	tl_status.rc = rc;
	snprintf(tl_status.reason, sizeof tl_status.reason, "%.*s",
	    (int)sizeof tl_status.reason - 1, reason ? reason : "");
	snprintf(tl_status.message, sizeof tl_status.message, "%.*s",
	    (int)sizeof tl_status.message - 1, message ? message : "");
	tl_status.retry_after_s = retry_after_s;
}

int
kube_http_rc(long http, const char *reason)
{
	if (http >= 200 && http < 300)
		return 0;
	switch (http) {
	case 400:
	case 422:
		return CAIRN_EINVAL;
	case 401:
	case 403:
		return CAIRN_EAUTH;
	case 404:
		return CAIRN_ENOTFOUND;
	case 409:
		if (reason != NULL && strcmp(reason, "AlreadyExists") == 0)
			return CAIRN_EEXIST;
		return CAIRN_ECONFLICT;
	case 410:
		return CAIRN_EGONE;
	case 415:
	case 405:
		return CAIRN_EUNSUPPORTED;
	case 429:
		return CAIRN_EBUSY;
	case 504:
		return CAIRN_ETIMEOUT;
	default:
		if (http >= 500)
			return CAIRN_ESERVER;
		return CAIRN_EFAIL;
	}
}

/* ---- share locks ---- */

static void
share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *arg)
{
	struct kube *k = arg;

	(void)h;
	(void)access;
	if (data >= 0 && data < CURL_LOCK_DATA_LAST)
		pthread_mutex_lock(&k->share_locks[data]);
}

static void
share_unlock(CURL *h, curl_lock_data data, void *arg)
{
	struct kube *k = arg;

	(void)h;
	if (data >= 0 && data < CURL_LOCK_DATA_LAST)
		pthread_mutex_unlock(&k->share_locks[data]);
}

/* ---- the client ---- */

/* Split the server URL so tls-server-name can be honoured via CONNECT_TO. */
static int
setup_url(struct kube *k, struct cairn_err *err)
{
	const char *server = kube_config_server(k->cfg);
	struct kcfg_tls tls;
	CURLU *u;
	char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL;
	int rc = 0;

	kcfg_tls(k->cfg, &tls);
	u = curl_url();
	if (curl_url_set(u, CURLUPART_URL, server, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) !=
	    CURLUE_OK) {
		rc = cairn_err_set(err, CAIRN_EINVAL,
		    "%s: server: \"%s\" is not a valid URL",
		    kube_config_source(k->cfg), server);
		goto out;
	}
	if (curl_url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK)
		path = NULL;
	k->https = strcasecmp(scheme, "https") == 0;
	if (tls.tls_server_name != NULL && k->https) {
		char *ct = xasprintf("%s:%s:%s:%s", tls.tls_server_name, port,
		    host, port);

		k->connect_to = curl_slist_append(NULL, ct);
		free(ct);
		k->base_url = xasprintf("%s://%s:%s%s", scheme,
		    tls.tls_server_name, port,
		    path && strcmp(path, "/") != 0 ? path : "");
	} else {
		k->base_url = xasprintf("%s://%s:%s%s", scheme, host, port,
		    path && strcmp(path, "/") != 0 ? path : "");
	}
	while (str_has_suffix(k->base_url, "/"))
		k->base_url[strlen(k->base_url) - 1] = '\0';
out:
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_free(path);
	curl_url_cleanup(u);
	return rc;
}

int
kube_new(struct kube_config *cfg, const struct kube_client_opts *opts,
    struct kube **out, struct cairn_err *err)
{
	struct kube *k;
	int i, rc;

	*out = NULL;
	pthread_once(&curl_once, curl_init_once);
	k = xcalloc(1, sizeof *k);
	k->cfg = cfg;
	if (opts != NULL)
		k->o = *opts;
	if (k->o.timeout_us <= 0)
		k->o.timeout_us = KUBE_DEFAULT_TIMEOUT_US;
	if (k->o.max_retries == 0)
		k->o.max_retries = KUBE_DEFAULT_RETRIES;
	else if (k->o.max_retries < 0)
		k->o.max_retries = 0;
	if (k->o.pool_size <= 0)
		k->o.pool_size = 8;
	if (k->o.pool_size > KUBE_POOL_MAX)
		k->o.pool_size = KUBE_POOL_MAX;
	if (k->o.qps > 0 && k->o.burst < 1)
		k->o.burst = k->o.qps < 1 ? 1 : (int)k->o.qps;
	k->user_agent = k->o.user_agent ? xstrdup(k->o.user_agent) :
	    xasprintf("cairn/%s", PACKAGE_VERSION);
	k->o.user_agent = k->user_agent;
	k->rl_tokens = k->o.burst;
	k->rl_last_us = time_mono_us();
	for (i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&k->share_locks[i], NULL);
	pthread_mutex_init(&k->pool_lock, NULL);
	pthread_mutex_init(&k->rl_lock, NULL);
	pthread_mutex_init(&k->stats_lock, NULL);
	pthread_mutex_init(&k->disc_lock, NULL);
	k->flows = kube_flows_new();
	k->share = curl_share_init();
	if (k->share == NULL) {
		rc = cairn_err_set(err, CAIRN_EFAIL, "curl_share_init failed");
		goto fail;
	}
	curl_share_setopt(k->share, CURLSHOPT_LOCKFUNC, share_lock);
	curl_share_setopt(k->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
	curl_share_setopt(k->share, CURLSHOPT_USERDATA, k);
	curl_share_setopt(k->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
	curl_share_setopt(k->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	curl_share_setopt(k->share, CURLSHOPT_SHARE,
	    CURL_LOCK_DATA_SSL_SESSION);
	rc = setup_url(k, err);
	if (rc < 0)
		goto fail;
	*out = k;
	return 0;
fail:
	kube_free(k);
	return rc;
}

int
kube_open_flags(const struct flagset *fs, struct kube **out,
    struct cairn_err *err)
{
	struct kube_config_opts co;
	struct kube_client_opts ko;
	struct kube_config *cfg;
	int rc;

	memset(&co, 0, sizeof co);
	memset(&ko, 0, sizeof ko);
	co.kubeconfig = flag_str(fs, F_KUBECONFIG);
	co.context = flag_str(fs, F_CONTEXT);
	ko.qps = (double)flag_int(fs, F_QPS);
	ko.burst = (int)flag_int(fs, F_BURST);
	ko.timeout_us = flag_duration_us(fs, F_REQUEST_TIMEOUT);
	rc = kube_config_load(&co, &cfg, err);
	if (rc < 0)
		return rc;
	return kube_new(cfg, &ko, out, err);
}

void
kube_set_connect_wait(struct kube *k, int64_t us)
{
	k->o.connect_wait_us = us;
}

void
kube_set_strict_fields(struct kube *k, int on)
{
	k->strict_fields = on != 0;
}

int
kube_strict_fields(const struct kube *k)
{
	return k->strict_fields;
}

void
kube_free(struct kube *k)
{
	int i;

	if (k == NULL)
		return;
	if (k->disc != NULL)
		kube_discovery_release(k->disc);
	for (i = 0; i < k->npool; i++)
		curl_easy_cleanup(k->pool[i]);
	if (k->share != NULL)
		curl_share_cleanup(k->share);
	curl_slist_free_all(k->connect_to);
	for (i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&k->share_locks[i]);
	pthread_mutex_destroy(&k->pool_lock);
	pthread_mutex_destroy(&k->rl_lock);
	pthread_mutex_destroy(&k->stats_lock);
	pthread_mutex_destroy(&k->disc_lock);
	kube_flows_free(k->flows);
	kube_config_free(k->cfg);
	free(k->base_url);
	free(k->user_agent);
	free(k);
}

const char *
kube_server(const struct kube *k)
{
	return kube_config_server(k->cfg);
}

const char *
kube_namespace(const struct kube *k)
{
	return kube_config_namespace(k->cfg);
}

const struct kube_config *
kube_config(const struct kube *k)
{
	return k->cfg;
}

void
kube_stats(struct kube *k, struct kube_stats *out)
{
	pthread_mutex_lock(&k->stats_lock);
	*out = k->stats;
	pthread_mutex_unlock(&k->stats_lock);
	kube_flows_stats(k->flows, &out->pushed_back, &out->held_us);
}

/* ---- discovery cache slots (used by discovery.c) ---- */

struct kube_discovery *
kube_disc_cached(struct kube *k)
{
	return k->disc;
}

void
kube_disc_set(struct kube *k, struct kube_discovery *d)
{
	if (k->disc != NULL)
		kube_discovery_release(k->disc);
	k->disc = d;
	k->disc_at = time_mono_us();
}

int64_t
kube_disc_loaded_at(struct kube *k)
{
	return k->disc_at;
}

void
kube_disc_lock(struct kube *k)
{
	pthread_mutex_lock(&k->disc_lock);
}

void
kube_disc_unlock(struct kube *k)
{
	pthread_mutex_unlock(&k->disc_lock);
}

/* ---- pool and rate limit ---- */

static CURL *
pool_get(struct kube *k)
{
	CURL *h = NULL;

	pthread_mutex_lock(&k->pool_lock);
	if (k->npool > 0)
		h = k->pool[--k->npool];
	pthread_mutex_unlock(&k->pool_lock);
	if (h == NULL) {
		h = curl_easy_init();
		if (h == NULL) {
			log_error("curl_easy_init failed");
			abort();
		}
	} else {
		curl_easy_reset(h);
	}
	return h;
}

static void
pool_put(struct kube *k, CURL *h)
{
	pthread_mutex_lock(&k->pool_lock);
	if (k->npool < k->o.pool_size) {
		k->pool[k->npool++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&k->pool_lock);
	if (h != NULL)
		curl_easy_cleanup(h);
}

/* Wait for a token of the bucket; CAIRN_ECANCELED if stopped meanwhile. */
static int
rate_wait(struct kube *k, const atomic_int *stop)
{
	int64_t now, wait_us = 0;

	if (k->o.qps <= 0)
		return 0;
	pthread_mutex_lock(&k->rl_lock);
	now = time_mono_us();
	k->rl_tokens += (double)(now - k->rl_last_us) * k->o.qps /
	    (double)TIME_US_PER_SEC;
	if (k->rl_tokens > k->o.burst)
		k->rl_tokens = k->o.burst;
	k->rl_last_us = now;
	k->rl_tokens -= 1.0;
	if (k->rl_tokens < 0)
		wait_us = (int64_t)(-k->rl_tokens * (double)TIME_US_PER_SEC /
		    k->o.qps);
	pthread_mutex_unlock(&k->rl_lock);
	if (wait_us > 0) {
		pthread_mutex_lock(&k->stats_lock);
		k->stats.throttled_us += (uint64_t)wait_us;
		pthread_mutex_unlock(&k->stats_lock);
		time_sleep_us(wait_us, stop);
	}
	if (stop != NULL && *stop)
		return CAIRN_ECANCELED;
	return 0;
}

/* ---- one transfer ---- */

struct xfer {
	struct kube_call *c;
	CURL *h;
	long http;		/* known once the first body byte arrives */
	int streaming;		/* body goes to the sink */
	int toobig;
	int64_t retry_after_s;	/* from the header, -1 none */
	char pl[64];		/* X-Kubernetes-PF-PriorityLevel-UID, "" none */
	int64_t idle_us;	/* idle limit (c->idle_timeout), 0 none */
	int64_t last_us;	/* monotonic time of the last progress */
	curl_off_t last_dn;	/* bytes received at last_us */
	int idle_expired;	/* aborted for inactivity */
	/* a gzip body (Content-Encoding: gzip), inflated here (gz_put) */
	int gz;
	int gz_end;		/* a member ended (another may follow) */
	int gz_bad;		/* corrupt or cut: the transfer is aborted */
	struct inflate_state *inf;	/* lazily, with inf_out */
	unsigned char *inf_out;		/* KUBE_INFLATE_OUT bytes */
};

/* The reply's (decoded) body bytes: to the sink, or kept in c->reply. */
static int
body_put(struct xfer *x, const char *p, size_t n)
{
	int rc;

	if (x->streaming) {
		rc = x->c->sink(x->c->sink_arg, p, n);
		if (x->idle_us > 0)
			x->last_us = time_mono_us();
		if (rc != 0) {
			x->c->sink_rc = rc;
			return -1;
		}
		return 0;
	}
	if (buf_append(&x->c->reply, p, n) < 0) {
		x->toobig = 1;
		return -1;
	}
	return 0;
}

/*
 * Inflate n bytes of a gzip body and pass the result on (body_put).
 * ISA-L's inflate, about twice zlib's speed: the list replies of a
 * backup are most of the bytes cairn reads. Members may follow one
 * another; -1 aborts the transfer (gz_bad, or body_put's reason).
 */
static int
gz_put(struct xfer *x, const char *p, size_t n)
{
	struct inflate_state *s = x->inf;
	uint8_t *in;
	uint32_t avail, before;
	size_t out;

	if (s == NULL) {
		s = x->inf = xmalloc(sizeof *s);
		x->inf_out = xmalloc(KUBE_INFLATE_OUT);
		isal_inflate_init(s);
		s->crc_flag = ISAL_GZIP;
	}
	s->next_in = (uint8_t *)(uintptr_t)p;
	s->avail_in = (uint32_t)n;
	for (;;) {
		if (x->gz_end) {
			if (s->avail_in == 0)
				return 0;
			in = s->next_in;	/* the next member */
			avail = s->avail_in;
			isal_inflate_reset(s);
			s->crc_flag = ISAL_GZIP;
			s->next_in = in;
			s->avail_in = avail;
			x->gz_end = 0;
		}
		before = s->avail_in;
		s->next_out = x->inf_out;
		s->avail_out = KUBE_INFLATE_OUT;
		if (isal_inflate(s) != ISAL_DECOMP_OK) {
			x->gz_bad = 1;
			return -1;
		}
		out = KUBE_INFLATE_OUT - s->avail_out;
		if (out > 0 && body_put(x, (const char *)x->inf_out, out) < 0)
			return -1;
		if (s->block_state == ISAL_BLOCK_FINISH)
			x->gz_end = 1;
		else if (s->avail_out > 0 && s->avail_in == 0)
			return 0;	/* wants more input */
		else if (out == 0 && s->avail_in == before) {
			x->gz_bad = 1;	/* no progress: never loop */
			return -1;
		}
	}
}

static void
gz_free(struct xfer *x)
{
	FREE_NULL(x->inf);
	FREE_NULL(x->inf_out);
}

static size_t
write_cb(char *p, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	size_t n = size * nmemb;

	if (x->http == 0) {
		curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &x->http);
		x->streaming = x->c->sink != NULL && x->http >= 200 &&
		    x->http < 300;
		if (!x->streaming && x->c->sink != NULL)
			x->c->reply.cap = KUBE_ERROR_BODY_CAP;
	}
	if ((x->gz ? gz_put(x, p, n) : body_put(x, p, n)) < 0)
		return 0;
	return n;
}

static size_t
header_cb(char *p, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	size_t n = size * nmemb;
	const char *name = "retry-after:";
	const char *plh = "x-kubernetes-pf-prioritylevel-uid:";
	const char *ceh = "content-encoding:";
	size_t nl = strlen(name), pll = strlen(plh), cel = strlen(ceh);

	if (n >= 5 && strncmp(p, "HTTP/", 5) == 0) {
		x->retry_after_s = -1;	/* a new response (after 100) */
		x->pl[0] = '\0';
		x->gz = 0;
	} else if (n > cel && strncasecmp(p, ceh, cel) == 0) {
		for (p += cel, n -= cel; n > 0 && (*p == ' ' || *p == '\t');
		    p++, n--)
			;
		/* the only coding asked for (make_headers); others pass */
		x->gz = n >= 4 && strncasecmp(p, "gzip", 4) == 0 &&
		    (n == 4 || p[4] == '\r' || p[4] == '\n' || p[4] == ' ');
		return size * nmemb;
	} else if (n > pll && strncasecmp(p, plh, pll) == 0) {
		size_t m = 0;

		for (p += pll, n -= pll; n > 0 && (*p == ' ' || *p == '\t');
		    p++, n--)
			;
		while (m < n && m < sizeof x->pl - 1 && p[m] > ' ' &&
		    p[m] < 0x7f) {
			x->pl[m] = p[m];
			m++;
		}
		x->pl[m] = '\0';
		return size * nmemb;
	} else if (n > nl && strncasecmp(p, name, nl) == 0) {
		char tmp[32];
		size_t m = n - nl < sizeof tmp - 1 ? n - nl : sizeof tmp - 1;
		char *end;
		long v;

		memcpy(tmp, p + nl, m);
		tmp[m] = '\0';
		v = strtol(tmp, &end, 10);
		if (end != tmp && v >= 0)
			x->retry_after_s = v;
	}
	return n;
}

static int
progress_cb(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut,
    curl_off_t un)
{
	struct xfer *x = arg;

	(void)dt; (void)ut; (void)un;
	if (x->c->stop != NULL && *x->c->stop)
		return 1;
	if (x->idle_us > 0) {
		int64_t now = time_mono_us();

		if (dn != x->last_dn) {
			x->last_dn = dn;
			x->last_us = now;
		} else if (now - x->last_us > x->idle_us) {
			x->idle_expired = 1;
			return 1;
		}
	}
	return 0;
}

static void
setup_handle(struct kube *k, CURL *h, struct kube_call *c, struct xfer *x,
    struct curl_slist *hdrs, const char *url, const struct kube_auth *auth)
{
	const struct kcfg_tls tls = auth->tls;
	/* the exec plugin's may change: libcurl keeps a copy */
	unsigned int blob = auth->exec_cert != NULL ? CURL_BLOB_COPY :
	    CURL_BLOB_NOCOPY;

	curl_easy_setopt(h, CURLOPT_SHARE, k->share);
	/*
	 * The shared cache keeps at most this many idle connections; libcurl's
	 * default (5) would close one per request once more threads than
	 * that run at once.
	 */
	curl_easy_setopt(h, CURLOPT_MAXCONNECTS, (long)KUBE_MAX_IDLE_CONNS);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, KUBE_CONNECT_TIMEOUT_MS);
	if (c->timeout_us >= 0 && !c->idle_timeout)
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS,
		    (long)((c->timeout_us ? c->timeout_us : k->o.timeout_us) /
		    1000));
	curl_easy_setopt(h, CURLOPT_USERAGENT, k->user_agent);
	/*
	 * As client-go, gzip is asked for (make_headers; kube-apiserver
	 * compresses replies over 128 KiB), and inflated by write_cb with
	 * ISA-L, not by libcurl (zlib, twice the CPU).
	 */
	curl_easy_setopt(h, CURLOPT_HTTP_CONTENT_DECODING, 0L);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, progress_cb);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	if (k->connect_to != NULL)
		curl_easy_setopt(h, CURLOPT_CONNECT_TO, k->connect_to);
	if (tls.insecure) {
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	} else if (tls.ca_data != NULL) {
		struct curl_blob b = { (void *)tls.ca_data, tls.ca_len,
		    CURL_BLOB_NOCOPY };

		curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &b);
	} else if (tls.ca_file != NULL) {
		curl_easy_setopt(h, CURLOPT_CAINFO, tls.ca_file);
	}
	if (tls.cert_data != NULL) {
		struct curl_blob b = { (void *)tls.cert_data, tls.cert_len,
		    blob };

		curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &b);
		curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
	} else if (tls.cert_file != NULL) {
		curl_easy_setopt(h, CURLOPT_SSLCERT, tls.cert_file);
	}
	if (tls.key_data != NULL) {
		struct curl_blob b = { (void *)tls.key_data, tls.key_len,
		    blob };

		curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &b);
		curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
	} else if (tls.key_file != NULL) {
		curl_easy_setopt(h, CURLOPT_SSLKEY, tls.key_file);
	}
	if (strcmp(c->method, "GET") == 0) {
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	} else if (strcmp(c->method, "HEAD") == 0) {
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	} else {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, c->method);
		if (c->body != NULL) {
			curl_easy_setopt(h, CURLOPT_POSTFIELDS, c->body);
			curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
			    (curl_off_t)c->body_len);
		}
	}
}

int
kube_auth_get(struct kube *k, int force_token, struct kube_auth *out,
    struct cairn_err *err)
{
	struct kcfg_auth a;
	int rc;

	memset(out, 0, sizeof *out);
	rc = kcfg_auth(k->cfg, force_token, &a, err);
	if (rc < 0)
		return rc;
	kcfg_tls(k->cfg, &out->tls);
	if (a.cert != NULL) {
		/* the exec plugin's client certificate, instead of any other */
		out->exec_cert = a.cert;
		out->exec_key = a.key;
		out->tls.cert_file = out->tls.key_file = NULL;
		out->tls.cert_data = a.cert;
		out->tls.cert_len = a.cert_len;
		out->tls.key_data = a.key;
		out->tls.key_len = a.key_len;
		out->exec_key_len = a.key_len;
		a.cert = a.key = NULL;
	}
	if (a.token != NULL && !k->https) {
		if (!k->warned_http_token) {
			k->warned_http_token = 1;
			log_warn("not sending the bearer token over plain "
			    "http to %s", k->base_url);
		}
	} else {
		out->token = a.token;
		a.token = NULL;
	}
	kcfg_auth_free(&a);
	out->https = k->https;
	out->user_agent = k->user_agent;
	out->timeout_us = k->o.timeout_us;
	return 0;
}

void
kube_auth_clear(struct kube_auth *a)
{
	if (a->token != NULL)
		explicit_bzero(a->token, strlen(a->token));
	FREE_NULL(a->token);
	if (a->exec_key != NULL)
		explicit_bzero(a->exec_key, a->exec_key_len);
	FREE_NULL(a->exec_key);
	FREE_NULL(a->exec_cert);
}

static struct curl_slist *
make_headers(struct kube_call *c, const char *tok)
{
	struct curl_slist *h = NULL;
	char *line;

	line = xasprintf("Accept: %s", c->accept != NULL ? c->accept :
	    "application/json");
	h = curl_slist_append(h, line);
	free(line);
	h = curl_slist_append(h, "Accept-Encoding: gzip");
	h = curl_slist_append(h, "Expect:");
	if (c->body != NULL) {
		line = xasprintf("Content-Type: %s", c->content_type ?
		    c->content_type : "application/json");
		h = curl_slist_append(h, line);
		free(line);
	}
	if (tok != NULL) {
		line = xasprintf("Authorization: Bearer %s", tok);
		h = curl_slist_append(h, line);
		explicit_bzero(line, strlen(line));
		free(line);
	}
	return h;
}

static void
free_headers(struct curl_slist *h)
{
	struct curl_slist *p;

	for (p = h; p != NULL; p = p->next)
		if (strncmp(p->data, "Authorization:", 14) == 0)
			explicit_bzero(p->data, strlen(p->data));
	curl_slist_free_all(h);
}

/* Read the Status out of a non-2xx reply. */
static void
read_status(const struct buf *reply, char *reason, size_t rlen, char *msg,
    size_t mlen, int64_t *retry_after)
{
	cJSON *j = NULL;

	reason[0] = '\0';
	msg[0] = '\0';
	if (reply->len > 0)
		j = json_parse(reply->data, reply->len, NULL);
	if (j != NULL && cJSON_IsObject(j)) {
		snprintf(reason, rlen, "%s", json_str_or(j, "reason", ""));
		snprintf(msg, mlen, "%s", json_str_or(j, "message", ""));
		if (*retry_after < 0 && json_get(j,
		    "details.retryAfterSeconds") != NULL)
			*retry_after = json_int(j, "details.retryAfterSeconds",
			    -1);
	} else if (reply->len > 0) {
		struct buf e;

		buf_init(&e, mlen - 1);
		str_escape_text(&e, reply->len > 200 ? "" : reply->data);
		snprintf(msg, mlen, "%s", buf_cstr(&e));
		buf_free(&e);
	}
	cJSON_Delete(j);
}

static int64_t
backoff_us(int attempt)
{
	int64_t d = KUBE_BACKOFF_BASE_US;
	int i;

	for (i = 0; i < attempt && d < KUBE_BACKOFF_CAP_US; i++)
		d *= 2;
	if (d > KUBE_BACKOFF_CAP_US)
		d = KUBE_BACKOFF_CAP_US;
	/* Jitter: uniform in [d/2, d]. */
	return d / 2 + (int64_t)rand_below((uint64_t)d / 2 + 1);
}

/* Connection-level failures after which the request may have been sent. */
static int
curl_sent_maybe(CURLcode cc)
{
	switch (cc) {
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
		return 0;
	default:
		return 1;
	}
}

static int
curl_retryable(CURLcode cc)
{
	switch (cc) {
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
	case CURLE_GOT_NOTHING:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_PARTIAL_FILE:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
		return 1;
	default:
		return 0;
	}
}

/*
 * After a non-2xx reply: microseconds to wait before retrying, or -1 for no
 * retry. 429 and 5xx with Retry-After: every verb (the server did not act,
 * or asked to be asked again), never sooner than Retry-After, and not at
 * all when that is over KUBE_RETRY_AFTER_MAX_S; other 5xx: idempotent
 * requests only; 401: once, with the token file re-read.
 */
static int64_t
http_retry_delay(const struct kube_call *c, const struct xfer *x, int attempt,
    int *token_retry, int *force_token)
{
	int64_t ra = x->retry_after_s;

	if (c->http == 429 || (c->http >= 500 && ra >= 0)) {
		if (ra < 0)
			return backoff_us(attempt);
		if (ra > KUBE_RETRY_AFTER_MAX_S)
			return -1;
		return ra * TIME_US_PER_SEC;
	}
	if (c->http >= 500 && c->http != 501 && c->idempotent)
		return backoff_us(attempt);
	if (c->http == 401 && !*token_retry) {
		*token_retry = 1;
		*force_token = 1;
		return 0;
	}
	return -1;
}

int
kube_call_do(struct kube *k, struct kube_call *c, struct cairn_err *err)
{
	char *url = xasprintf("%s%s", k->base_url, c->path);
	char reason[KUBE_REASON_MAX], msg[KUBE_MESSAGE_MAX];
	char cerr[CURL_ERROR_SIZE];
	struct curl_slist *hdrs = NULL;
	struct kube_auth auth;
	int attempt = 0, rc = 0, token_retry = 0, force_token = 0;
	int flow, counted = !c->watch;
	int64_t t0, delay, refused_since = 0;
	long nconn;
	CURLcode cc;
	CURL *h;
	struct xfer x;

	if (c->reply.cap == 0)
		buf_init(&c->reply, CAIRN_CAP_API_BODY);
	for (;;) {
		rc = rate_wait(k, c->stop);
		if (rc < 0) {
			cairn_err_set(err, rc, "%s %s: canceled", c->method,
			    c->path);
			kube_status_set(0, rc, "", "canceled", -1);
			break;
		}
		flow = kube_flow_enter(k->flows, c->method, c->path, counted,
		    c->stop);
		if (flow < 0) {
			rc = cairn_err_set(err, flow, "%s %s: canceled",
			    c->method, c->path);
			kube_status_set(0, rc, "", "canceled", -1);
			break;
		}
		buf_reset(&c->reply);
		if (c->sink == NULL)
			c->reply.cap = CAIRN_CAP_API_BODY;
		c->sink_rc = 0;
		memset(&x, 0, sizeof x);
		x.c = c;
		x.retry_after_s = -1;
		if (c->idle_timeout) {
			x.idle_us = k->o.timeout_us;
			x.last_us = time_mono_us();
		}
		/* the token now: a rotated file re-read, a plugin run */
		rc = kube_auth_get(k, force_token, &auth, err);
		if (rc < 0) {
			kube_flow_leave(k->flows, flow, counted, 0, 0, NULL);
			kube_status_set(0, rc, "", err != NULL ? err->msg :
			    "credentials", -1);
			break;
		}
		h = pool_get(k);
		x.h = h;
		hdrs = make_headers(c, auth.token);
		force_token = 0;
		cerr[0] = '\0';
		setup_handle(k, h, c, &x, hdrs, url, &auth);
		curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
		t0 = time_mono_us();
		cc = curl_easy_perform(h);
		if ((cc == CURLE_OK || cc == CURLE_WRITE_ERROR) &&
		    (x.gz_bad || (cc == CURLE_OK && x.inf != NULL &&
		    !x.gz_end))) {
			/* cut short: as a partial body, retried */
			cc = x.gz_bad ? CURLE_BAD_CONTENT_ENCODING :
			    CURLE_PARTIAL_FILE;
			snprintf(cerr, sizeof cerr, "the reply's gzip body "
			    "is %s", x.gz_bad ? "corrupt" : "cut short");
		}
		gz_free(&x);
		c->http = 0;
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &c->http);
		nconn = 0;
		curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &nconn);
		/* a 429 leaves its flow below, once its Retry-After is known */
		if (c->http != 429 || cc != CURLE_OK) {
			kube_flow_leave(k->flows, flow, counted, cc == CURLE_OK ?
			    c->http : 0, 0, x.pl);
			flow = -1;
		}
		curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
		pool_put(k, h);
		free_headers(hdrs);
		hdrs = NULL;
		kube_auth_clear(&auth);
		pthread_mutex_lock(&k->stats_lock);
		k->stats.requests++;
		if (attempt > 0)
			k->stats.retries++;
		k->stats.connections += (uint64_t)nconn;
		pthread_mutex_unlock(&k->stats_lock);
		log_debug("%s %s -> %ld (%s) %.1f ms", c->method, c->path,
		    c->http, cc == CURLE_OK ? "ok" : curl_easy_strerror(cc),
		    (double)(time_mono_us() - t0) / 1000.0);

		delay = -1;
		if (cc == CURLE_ABORTED_BY_CALLBACK && x.idle_expired) {
			cc = CURLE_OPERATION_TIMEDOUT;
			snprintf(cerr, sizeof cerr, "no data for %lld ms",
			    (long long)(x.idle_us / 1000));
		}
		if (cc == CURLE_ABORTED_BY_CALLBACK) {
			rc = cairn_err_set(err, CAIRN_ECANCELED, "%s %s: "
			    "canceled", c->method, c->path);
			kube_status_set((int)c->http, rc, "", "canceled", -1);
			break;
		}
		if (cc == CURLE_WRITE_ERROR && c->sink_rc != 0) {
			rc = c->sink_rc;
			if (rc < 0 && err != NULL && err->code != rc)
				cairn_err_set(err, rc, "%s %s: reply: %s",
				    c->method, c->path, cairn_strerror(rc));
			kube_status_set((int)c->http, rc, "", "", -1);
			break;
		}
		if (cc == CURLE_WRITE_ERROR && x.toobig) {
			rc = cairn_err_set(err, CAIRN_ETOOBIG, "%s %s: reply "
			    "larger than %zu bytes", c->method, c->path,
			    c->reply.cap);
			kube_status_set((int)c->http, rc, "", err ? err->msg :
			    "too big", -1);
			break;
		}
		if (cc != CURLE_OK) {
			rc = cc == CURLE_OPERATION_TIMEDOUT ? CAIRN_ETIMEOUT :
			    CAIRN_ENET;
			cairn_err_set(err, rc, "%s %s: %s%s%s", c->method,
			    c->path, curl_easy_strerror(cc), cerr[0] ? ": " : "",
			    cerr);
			kube_status_set(0, rc, "", cerr[0] ? cerr :
			    curl_easy_strerror(cc), -1);
			if (!c->no_retry && curl_retryable(cc) &&
			    (c->idempotent || !curl_sent_maybe(cc)))
				delay = backoff_us(attempt);
			/*
			 * Nobody listens (refused, no such host): said within
			 * connect_wait_us, not after every retry's backoff
			 * (20 s); a server sets a longer wait to ride out an
			 * API server restart.
			 */
			if (!curl_sent_maybe(cc) && delay >= 0) {
				if (refused_since == 0)
					refused_since = time_mono_us();
				if (time_mono_us() + delay - refused_since >
				    (k->o.connect_wait_us > 0 ?
				    k->o.connect_wait_us : KUBE_CONNECT_WAIT_US))
					delay = -1;
			}
			else if (curl_sent_maybe(cc) && !c->idempotent &&
			    curl_retryable(cc) && err != NULL)
				cairn_err_prefix(err, "not retried (the "
				    "request may have been applied)");
		} else if (c->http >= 200 && c->http < 300) {
			kube_status_set((int)c->http, 0, "", "", -1);
			rc = 0;
			break;
		} else {
			read_status(&c->reply, reason, sizeof reason, msg,
			    sizeof msg, &x.retry_after_s);
			rc = kube_http_rc(c->http, reason);
			cairn_err_set(err, rc, "%s %s: %s (HTTP %ld)%s%s",
			    c->method, c->path, reason[0] ? reason :
			    "error", c->http, msg[0] ? ": " : "", msg);
			kube_status_set((int)c->http, rc, reason, msg,
			    x.retry_after_s);
			delay = c->no_retry ? -1 : http_retry_delay(c, &x,
			    attempt, &token_retry, &force_token);
			if (flow >= 0)
				kube_flow_leave(k->flows, flow, counted, 429,
				    x.retry_after_s >= 0 ? x.retry_after_s *
				    TIME_US_PER_SEC : delay >= 0 ? delay :
				    backoff_us(attempt), x.pl);
			if (c->http == 429 && x.retry_after_s >
			    KUBE_RETRY_AFTER_MAX_S)
				cairn_err_prefix(err, "not retried (Retry-After "
				    "%lld s)", (long long)x.retry_after_s);
		}
		if (delay < 0 || attempt >= k->o.max_retries ||
		    (c->max_retries > 0 && attempt >= c->max_retries) ||
		    (c->max_delay_us > 0 && delay > c->max_delay_us))
			break;
		if (c->rewind != NULL) {
			int r = c->rewind(c->sink_arg);

			if (r < 0) {
				rc = r;
				break;
			}
		}
		attempt++;
		log_debug("retry %d of %s %s in %.1f s", attempt, c->method,
		    c->path, (double)delay / TIME_US_PER_SEC);
		if (delay > 0)
			time_sleep_us(delay, c->stop);
		if (c->stop != NULL && *c->stop) {
			rc = cairn_err_set(err, CAIRN_ECANCELED, "%s %s: "
			    "canceled", c->method, c->path);
			break;
		}
	}
	free(url);
	return rc;
}

void
kube_call_done(struct kube_call *c)
{
	buf_free(&c->reply);
}

int
kube_call_json(struct kube *k, struct kube_call *c, cJSON **out,
    struct cairn_err *err)
{
	int rc;

	if (out != NULL)
		*out = NULL;
	rc = kube_call_do(k, c, err);
	if (rc < 0 || out == NULL || c->reply.len == 0)
		return rc;
	*out = json_parse(c->reply.data, c->reply.len, err);
	if (*out == NULL)
		return cairn_err_prefix(err, "%s %s: reply", c->method,
		    c->path);
	return 0;
}

int
kube_request(struct kube *k, const char *method, const char *path,
    const char *content_type, const char *body, size_t body_len,
    int idempotent, cJSON **out, struct cairn_err *err)
{
	struct kube_call c;
	int rc;

	memset(&c, 0, sizeof c);
	c.method = method;
	c.path = path;
	c.content_type = content_type;
	c.body = body;
	c.body_len = body_len;
	c.idempotent = idempotent || strcmp(method, "GET") == 0 ||
	    strcmp(method, "HEAD") == 0;
	rc = kube_call_json(k, &c, out, err);
	kube_call_done(&c);
	return rc;
}

void
kube_query_add(struct buf *b, const char *key, const char *value)
{
	char *e;

	if (value == NULL)
		return;
	e = curl_easy_escape(NULL, value, 0);
	buf_printf(b, "%c%s=%s", strchr(buf_cstr(b), '?') ? '&' : '?', key,
	    e ? e : "");
	curl_free(e);
}
