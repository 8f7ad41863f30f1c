/*
 * store_s3.c: the S3 backend on libcurl.
 *
 * Requests. Every operation is one S3 REST call built by s3_call(): URL
 * (path-style "endpoint/bucket/key" or virtual-hosted "bucket.host/key"),
 * query parameters, a body source and/or a sink, signed with SigV4
 * (sigv4.c). The signed headers are host, x-amz-date, x-amz-content-sha256,
 * range when present and x-amz-security-token with session credentials.
 *
 * Payload hash. Bodies that are in memory (store_src_mem, the buffered parts
 * of store_put's own multipart, the CompleteMultipartUpload XML) are hashed
 * and the hash is signed. Bodies streamed from a file descriptor or a
 * caller's callback are sent with x-amz-content-sha256: UNSIGNED-PAYLOAD
 * (allowed by S3 for every request; integrity then rests on TLS and, for
 * the engine, on the ETag check at completion): hashing them first would
 * read every byte twice.
 *
 * Retries. Every request is retried with capped exponential backoff and
 * jitter (base 100 ms, cap 5 s, at most max_attempts tries) on connection
 * errors and resets, timeouts, HTTP 5xx, 429, SlowDown and RequestTimeout.
 * A body is re-sent only when its source can rewind (memory and fd sources
 * can); re-sending a part or a whole PUT is safe because both replace.
 * libcurl resends by itself when a kept-alive connection proves dead after
 * the body went out: cb_seek() rewinds the source for it. A complete whose
 * reply was lost is recognised by store_mpu_complete() (store.c). A
 * download that breaks resumes with a Range request from the first byte
 * not yet delivered, so the sink sees each byte once. Failures to connect
 * at all (refused, unknown host) are retried only twice, so a wrong
 * endpoint fails fast with one clear message.
 *
 * Errors. Non-2xx replies carry an S3 <Error> document (capped at
 * CAIRN_CAP_S3_XML, read by s3xml.c); its Code becomes an enum cairn_rc and
 * a message naming bucket and key: NoSuchBucket, NoSuchKey, NoSuchUpload ->
 * CAIRN_ENOTFOUND; AccessDenied, InvalidAccessKeyId, SignatureDoesNotMatch
 * -> CAIRN_EAUTH; InvalidPart, EntityTooSmall, InvalidRange -> CAIRN_EINVAL.
 *
 * Threads. The store is shared by threads. Each call borrows a curl easy
 * handle from a small mutex-protected pool (or makes one) and returns it
 * afterwards; a returned handle keeps its open connection, so consecutive
 * calls reuse keep-alive connections. A CURLSH shares the DNS cache and TLS
 * session ids between handles (with one mutex per shared data kind). The
 * connection cache itself is not shared: libcurl 7.88 documents sharing
 * connections between concurrently used handles as unsafe. Nothing else in
 * the struct changes after open.
 *
 * Deleting a prefix uses DeleteObjects (1000 keys per request, quiet mode,
 * Content-MD5 signed) instead of one DeleteObject per key.
 */
#include "config.h"
#include "storage/store_int.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"
#include "storage/s3xml.h"
#include "storage/sigv4.h"

#define S3_POOL_MAX		16
#define S3_SINGLE_PUT_MAX	(5ULL << 30)	/* S3's PutObject limit */
#define S3_BACKOFF_CAP_MS	5000
#define S3_CONNECT_ATTEMPTS	3
#define S3_MAX_PARAMS		6
#define S3_XFER_BUFFER		(512L << 10)

struct store_s3 {
	struct store base;
	char *bucket;
	char *scheme;		/* "http" / "https" */
	char *hostport;		/* endpoint host[:port] */
	char *region;
	int path_style;
	char *ca_file;
	char *ca_pem;
	int insecure;
	struct sigv4_creds creds;
	long timeout_ms;
	int max_attempts;
	int64_t backoff_ms;
	char *sse;			/* "AES256", "aws:kms" or NULL */
	char *sse_kms_key_id;		/* or NULL */
	int sse_c;			/* 1: the SSE-C headers below */
	char sse_c_key[48];		/* base64 of the 32-byte key */
	char sse_c_md5[32];		/* base64 of its MD5 */

	CURLSH *share;
	pthread_mutex_t share_mu[CURL_LOCK_DATA_LAST];
	pthread_mutex_t pool_mu;
	CURL *pool[S3_POOL_MAX];
	int npool;
};

static const struct store_ops s3_ops;

/* One S3 call: inputs, then what the reply said. */
struct s3_call {
	const char *op;			/* "PutObject", for messages */
	const char *method;
	const char *key;		/* NULL: bucket-level */
	struct sigv4_param params[S3_MAX_PARAMS];
	size_t nparams;
	struct store_src *src;		/* request body or NULL */
	int has_range;
	uint64_t range_off;
	int64_t range_len;		/* -1: to the end */
	store_write_fn sink;		/* 2xx body; NULL: buffer in reply */
	void *sink_arg;
	const struct store_progress *prog;
	int64_t prog_total;
	char content_md5[32];		/* base64 MD5 of the body, or "" */
	int sse_write;			/* SSE-S3/KMS headers: creates an object */
	int sse_c;			/* SSE-C headers: reads or writes content */

	/* per attempt */
	long status;
	struct buf reply;		/* non-sink body, capped */
	char etag[STORE_ETAG_MAX];
	int64_t content_length;
	int64_t last_modified_us;
	uint64_t sent;			/* body bytes read from src */
	uint64_t delivered;		/* bytes given to sink, all attempts */
	int canceled;			/* src or sink refused */
	int attempts;			/* requests made by s3_call_run */
	int resends;			/* bodies curl rewound and sent again */
	int range_ignored;		/* 200 instead of 206 to a Range */
	int too_big;
};

/* ---- curl plumbing ---------------------------------------------------- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void
curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void
share_lock(CURL *h, curl_lock_data data, curl_lock_access a, void *u)
{
	struct store_s3 *s3 = u;

	(void)h;
	(void)a;
	pthread_mutex_lock(&s3->share_mu[data]);
}

static void
share_unlock(CURL *h, curl_lock_data data, void *u)
{
	struct store_s3 *s3 = u;

	(void)h;
	pthread_mutex_unlock(&s3->share_mu[data]);
}

static CURL *
handle_get(struct store_s3 *s3)
{
	CURL *h = NULL;

	pthread_mutex_lock(&s3->pool_mu);
	if (s3->npool > 0)
		h = s3->pool[--s3->npool];
	pthread_mutex_unlock(&s3->pool_mu);
	if (h == NULL)
		h = curl_easy_init();
	if (h == NULL)
		abort();	/* out of memory, as xmalloc */
	return h;
}

static void
handle_put(struct store_s3 *s3, CURL *h, int broken)
{
	if (!broken) {
		pthread_mutex_lock(&s3->pool_mu);
		if (s3->npool < S3_POOL_MAX) {
			s3->pool[s3->npool++] = h;
			h = NULL;
		}
		pthread_mutex_unlock(&s3->pool_mu);
	}
	if (h != NULL)
		curl_easy_cleanup(h);
}

static size_t
cb_read(char *p, size_t size, size_t nmemb, void *u)
{
	struct s3_call *c = u;
	ssize_t n;

	n = store_src_read(c->src, p, size * nmemb);
	if (n < 0) {
		c->canceled = 1;
		return CURL_READFUNC_ABORT;
	}
	c->sent += (uint64_t)n;
	store_progress_report(c->prog, c->sent, c->prog_total);
	return (size_t)n;
}

/*
 * curl's seek callback: libcurl resends a request by itself when a kept-
 * alive connection turns out dead after some of the body went out (and on
 * some redirects and auth rounds); it must then rewind the body. Without
 * this callback that ended in CURLE_SEND_FAIL_REWIND. Only sources that can
 * rewind can seek: to offset 0 directly, elsewhere by reading and
 * dropping bytes after the rewind (curl asks for offset 0 in practice).
 */
static int
cb_seek(void *u, curl_off_t offset, int origin)
{
	struct s3_call *c = u;
	char tmp[8192];
	curl_off_t left = offset;
	ssize_t n;

	if (c->src == NULL || origin != SEEK_SET || offset < 0 ||
	    store_src_rewind(c->src) < 0)
		return CURL_SEEKFUNC_CANTSEEK;
	c->sent = 0;
	c->resends++;
	while (left > 0) {
		n = store_src_read(c->src, tmp, left < (curl_off_t)sizeof tmp ?
		    (size_t)left : sizeof tmp);
		if (n <= 0)
			return CURL_SEEKFUNC_FAIL;
		left -= n;
		c->sent += (uint64_t)n;
	}
	store_progress_report(c->prog, c->sent, c->prog_total);
	return CURL_SEEKFUNC_OK;
}

static int
is_2xx(long s)
{
	return s >= 200 && s < 300;
}

static size_t
cb_write(char *p, size_t size, size_t nmemb, void *u)
{
	struct s3_call *c = u;
	size_t n = size * nmemb;

	if (is_2xx(c->status) && c->sink != NULL) {
		if (c->has_range && c->status != 206) {
			/* a whole object where a range was asked: never hand
			 * bytes twice to the sink */
			c->range_ignored = 1;
			return 0;
		}
		if (c->sink(c->sink_arg, p, n) < 0) {
			c->canceled = 1;
			return 0;
		}
		c->delivered += n;
		store_progress_report(c->prog, c->delivered, c->prog_total);
		return n;
	}
	if (buf_append(&c->reply, p, n) < 0) {
		c->too_big = 1;
		return 0;
	}
	return n;
}

static size_t
cb_header(char *p, size_t size, size_t nmemb, void *u)
{
	struct s3_call *c = u;
	size_t n = size * nmemb, vl;
	char line[512], *v;
	long code;
	time_t t;

	if (n >= 5 && strncmp(p, "HTTP/", 5) == 0) {
		snprintf(line, sizeof line, "%.*s", (int)(n < 100 ? n : 100), p);
		v = strchr(line, ' ');
		code = v ? strtol(v + 1, NULL, 10) : 0;
		c->status = code;
		c->etag[0] = '\0';
		c->content_length = -1;
		return n;
	}
	if (n >= sizeof line)
		return n;	/* long headers we do not need */
	memcpy(line, p, n);
	line[n] = '\0';
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = '\0';
	v = strchr(line, ':');
	if (v == NULL)
		return size * nmemb;
	*v++ = '\0';
	while (*v == ' ' || *v == '\t')
		v++;
	if (strcasecmp(line, "etag") == 0) {
		vl = strlen(v);
		if (vl >= 2 && v[0] == '"' && v[vl - 1] == '"') {
			v[vl - 1] = '\0';
			v++;
		}
		snprintf(c->etag, sizeof c->etag, "%s", v);
	} else if (strcasecmp(line, "content-length") == 0) {
		c->content_length = strtoll(v, NULL, 10);
	} else if (strcasecmp(line, "last-modified") == 0) {
		t = curl_getdate(v, NULL);
		if (t >= 0)
			c->last_modified_us = (int64_t)t * TIME_US_PER_SEC;
	}
	return size * nmemb;
}

/* ---- URLs and messages ------------------------------------------------ */

/* What a message calls the target: "s3://bucket/key" or "s3://bucket". */
static void
target(struct store_s3 *s3, const char *key, char *out, size_t n)
{
	snprintf(out, n, "s3://%s%s%.300s", s3->bucket, key ? "/" : "",
	    key ? key : "");
}

static int
map_error(struct store_s3 *s3, struct s3_call *c, struct cairn_err *err)
{
	struct s3xml_error xe;
	char tgt[400];
	const char *hint = "";
	int rc;

	target(s3, c->key, tgt, sizeof tgt);
	memset(&xe, 0, sizeof xe);
	if (c->reply.len > 0)
		(void)s3xml_error(c->reply.data, c->reply.len, &xe);
	if (xe.code[0] == '\0' && c->status == 404)
		snprintf(xe.code, sizeof xe.code, "%s",
		    c->key ? "NoSuchKey" : "NoSuchBucket");
	if (strcmp(xe.code, "NoSuchBucket") == 0) {
		return cairn_err_set(err, CAIRN_ENOTFOUND,
		    "%s: bucket \"%s\" does not exist at %s://%s (NoSuchBucket)",
		    c->op, s3->bucket, s3->scheme, s3->hostport);
	}
	if (strcmp(xe.code, "NoSuchKey") == 0)
		return cairn_err_set(err, CAIRN_ENOTFOUND,
		    "%s %s: no such object (NoSuchKey)", c->op, tgt);
	if (strcmp(xe.code, "NoSuchUpload") == 0)
		return cairn_err_set(err, CAIRN_ENOTFOUND,
		    "%s %s: no such multipart upload (NoSuchUpload)", c->op, tgt);
	if (strcmp(xe.code, "InvalidAccessKeyId") == 0)
		hint = ": the access key id is not known to this endpoint";
	else if (strcmp(xe.code, "SignatureDoesNotMatch") == 0)
		hint = ": the request signature was refused; check the secret key and region";
	else if (strcmp(xe.code, "AccessDenied") == 0)
		hint = ": the credentials may not do this";
	if (c->status == 401 || c->status == 403 || *hint != '\0')
		rc = CAIRN_EAUTH;
	else if (c->status == 404)
		rc = CAIRN_ENOTFOUND;
	else if (c->status == 416 || strcmp(xe.code, "InvalidRange") == 0 ||
	    strcmp(xe.code, "InvalidPart") == 0 ||
	    strcmp(xe.code, "InvalidPartOrder") == 0 ||
	    strcmp(xe.code, "EntityTooSmall") == 0 || c->status == 400)
		rc = CAIRN_EINVAL;
	else if (c->status == 429 || c->status == 503)
		rc = CAIRN_EBUSY;
	else if (c->status >= 500)
		rc = CAIRN_ESERVER;
	else
		rc = CAIRN_EPROTO;
	return cairn_err_set(err, rc, "%s %s: HTTP %ld%s%s%s%s%s", c->op, tgt,
	    c->status, xe.code[0] ? " " : "", xe.code, xe.message[0] ? ": " : "",
	    xe.message, hint);
}

static int
retryable_status(struct s3_call *c)
{
	struct s3xml_error xe;

	if (c->status >= 500 || c->status == 429)
		return 1;
	if (c->status == 400 && c->reply.len > 0 &&
	    s3xml_error(c->reply.data, c->reply.len, &xe) == 1 &&
	    (strcmp(xe.code, "RequestTimeout") == 0 ||
	    strcmp(xe.code, "SlowDown") == 0))
		return 1;
	return 0;
}

/* ---- one call, with retries ------------------------------------------- */

static int
s3_attempt(struct store_s3 *s3, CURL *h, struct s3_call *c, int64_t now,
    CURLcode *cc, struct cairn_err *err)
{
	struct buf uri, url, auth, line;
	struct curl_slist *hl = NULL;
	struct sigv4_header hdr[12];
	struct sigv4_request rq;
	char amz[17], phash[65], hosthdr[300], range[80];
	size_t nh = 0;
	int rc = 0;

	buf_init(&uri, 16u << 10);
	buf_init(&url, 32u << 10);
	buf_init(&auth, 4096);
	buf_init(&line, 8192);

	/* URI and URL */
	if (s3->path_style) {
		rc |= buf_putc(&uri, '/');
		rc |= sigv4_uri_encode(&uri, s3->bucket, 0);
		if (c->key != NULL) {
			rc |= buf_putc(&uri, '/');
			rc |= sigv4_uri_encode(&uri, c->key, 1);
		}
		snprintf(hosthdr, sizeof hosthdr, "%s", s3->hostport);
	} else {
		rc |= buf_putc(&uri, '/');
		if (c->key != NULL)
			rc |= sigv4_uri_encode(&uri, c->key, 1);
		snprintf(hosthdr, sizeof hosthdr, "%s.%s", s3->bucket, s3->hostport);
	}
	rc |= buf_printf(&url, "%s://%s%s", s3->scheme, hosthdr, buf_cstr(&uri));
	if (c->nparams > 0) {
		rc |= buf_putc(&url, '?');
		rc |= sigv4_canonical_query(&url, c->params, c->nparams);
	}

	/* payload hash */
	if (c->src == NULL)
		snprintf(phash, sizeof phash, "%s", SIGV4_EMPTY_SHA256);
	else if (c->src->p_mem != NULL && c->src->p_fd == -1)
		sigv4_sha256_hex(c->src->p_mem, (size_t)c->src->len, phash);
	else
		snprintf(phash, sizeof phash, "%s", SIGV4_UNSIGNED_PAYLOAD);

	sigv4_amz_date(now, amz);
	hdr[nh++] = (struct sigv4_header){ "host", hosthdr };
	hdr[nh++] = (struct sigv4_header){ "x-amz-date", amz };
	hdr[nh++] = (struct sigv4_header){ "x-amz-content-sha256", phash };
	if (c->has_range) {
		if (c->range_len >= 0)
			snprintf(range, sizeof range, "bytes=%llu-%llu",
			    (unsigned long long)c->range_off,
			    (unsigned long long)(c->range_off + (uint64_t)c->range_len - 1));
		else
			snprintf(range, sizeof range, "bytes=%llu-",
			    (unsigned long long)c->range_off);
		hdr[nh++] = (struct sigv4_header){ "range", range };
	}
	if (s3->creds.session_token != NULL)
		hdr[nh++] = (struct sigv4_header){ "x-amz-security-token",
		    s3->creds.session_token };
	if (c->content_md5[0] != '\0')
		hdr[nh++] = (struct sigv4_header){ "content-md5", c->content_md5 };
	/* every x-amz-* header is signed, as S3 requires */
	if (c->sse_write && s3->sse != NULL) {
		hdr[nh++] = (struct sigv4_header){ "x-amz-server-side-encryption",
		    s3->sse };
		if (s3->sse_kms_key_id != NULL)
			hdr[nh++] = (struct sigv4_header){
			    "x-amz-server-side-encryption-aws-kms-key-id",
			    s3->sse_kms_key_id };
	}
	if (c->sse_c && s3->sse_c) {
		hdr[nh++] = (struct sigv4_header){
		    "x-amz-server-side-encryption-customer-algorithm", "AES256" };
		hdr[nh++] = (struct sigv4_header){
		    "x-amz-server-side-encryption-customer-key", s3->sse_c_key };
		hdr[nh++] = (struct sigv4_header){
		    "x-amz-server-side-encryption-customer-key-md5",
		    s3->sse_c_md5 };
	}
	rq.method = c->method;
	rq.uri = buf_cstr(&uri);
	rq.params = c->params;
	rq.nparams = c->nparams;
	rq.headers = hdr;
	rq.nheaders = nh;
	rq.payload_hash = phash;
	if (rc != 0 || sigv4_sign(&s3->creds, s3->region, "s3", now, &rq, &auth,
	    NULL) < 0) {
		rc = cairn_err_set(err, CAIRN_ETOOBIG, "%s: request too large",
		    c->op);
		goto out;
	}
	for (size_t i = 0; i < nh; i++) {
		buf_reset(&line);
		buf_printf(&line, "%s: %s", hdr[i].name, hdr[i].value);
		hl = curl_slist_append(hl, buf_cstr(&line));
	}
	buf_reset(&line);
	buf_printf(&line, "Authorization: %s", buf_cstr(&auth));
	hl = curl_slist_append(hl, buf_cstr(&line));
	hl = curl_slist_append(hl, "Expect:");
	if (c->src != NULL && strcmp(c->method, "POST") == 0)
		hl = curl_slist_append(hl, "Content-Type: application/xml");
	if (hl == NULL)
		abort();

	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, buf_cstr(&url));
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(h, CURLOPT_SHARE, s3->share);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, s3->timeout_ms);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME,
	    (long)(s3->timeout_ms / 1000 > 0 ? s3->timeout_ms / 1000 : 1));
	curl_easy_setopt(h, CURLOPT_BUFFERSIZE, S3_XFER_BUFFER);
	curl_easy_setopt(h, CURLOPT_UPLOAD_BUFFERSIZE, S3_XFER_BUFFER);
#if LIBCURL_VERSION_NUM >= 0x075500	/* 7.85 */
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(h, CURLOPT_PROTOCOLS, CURLPROTO_HTTP | CURLPROTO_HTTPS);
#endif
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, cb_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, c);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, cb_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
	if (s3->ca_file != NULL)
		curl_easy_setopt(h, CURLOPT_CAINFO, s3->ca_file);
#if LIBCURL_VERSION_NUM >= 0x074d00	/* 7.77 */
	if (s3->ca_pem != NULL) {
		struct curl_blob blob = { s3->ca_pem, strlen(s3->ca_pem),
		    CURL_BLOB_COPY };
		curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
	}
#endif
	if (s3->insecure) {
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (strcmp(c->method, "HEAD") == 0) {
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	} else if (strcmp(c->method, "PUT") == 0) {
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, cb_read);
		curl_easy_setopt(h, CURLOPT_READDATA, c);
		curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, cb_seek);
		curl_easy_setopt(h, CURLOPT_SEEKDATA, c);
		curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE,
		    (curl_off_t)(c->src ? c->src->len : 0));
	} else if (strcmp(c->method, "POST") == 0) {
		curl_easy_setopt(h, CURLOPT_POST, 1L);
		if (c->src != NULL) {
			curl_easy_setopt(h, CURLOPT_READFUNCTION, cb_read);
			curl_easy_setopt(h, CURLOPT_READDATA, c);
			curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, cb_seek);
			curl_easy_setopt(h, CURLOPT_SEEKDATA, c);
			curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
			    (curl_off_t)c->src->len);
		} else {
			curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
			curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
		}
	} else if (strcmp(c->method, "GET") != 0) {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, c->method);
	}

	c->status = 0;
	c->sent = 0;
	c->too_big = 0;
	c->content_length = -1;
	buf_reset(&c->reply);
	*cc = curl_easy_perform(h);
	rc = 0;
out:
	curl_slist_free_all(hl);
	buf_free(&uri);
	buf_free(&url);
	if (auth.data != NULL)
		memset(auth.data, 0, auth.len);
	buf_free(&auth);
	buf_free(&line);
	return rc;
}

/* The request never reached the server: nothing of it happened. */
static int
connect_error(CURLcode cc)
{
	return cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST ||
	    cc == CURLE_COULDNT_RESOLVE_PROXY;
}

/* Setting up TLS failed: a certificate, a protocol, a handshake. */
static int
tls_error(CURLcode cc)
{
	return cc == CURLE_SSL_CONNECT_ERROR ||
	    cc == CURLE_PEER_FAILED_VERIFICATION || cc == CURLE_SSL_CACERT_BADFILE ||
	    cc == CURLE_SSL_CERTPROBLEM || cc == CURLE_SSL_CIPHER;
}

/*
 * Failures worth another try: the connection broke (reset, closed, a reply
 * cut short or garbled by the break), a timeout, a resend curl could not
 * make itself (s3_call_run rewinds and sends again when the source can).
 */
static int
transient_error(CURLcode cc)
{
	return connect_error(cc) || cc == CURLE_SEND_ERROR ||
	    cc == CURLE_RECV_ERROR || cc == CURLE_GOT_NOTHING ||
	    cc == CURLE_PARTIAL_FILE || cc == CURLE_OPERATION_TIMEDOUT ||
	    cc == CURLE_SSL_CONNECT_ERROR || cc == CURLE_HTTP2 ||
	    cc == CURLE_HTTP2_STREAM || cc == CURLE_SEND_FAIL_REWIND ||
	    cc == CURLE_WEIRD_SERVER_REPLY;
}

/*
 * The message for a transfer that failed below HTTP, saying what happened:
 * never reached the server, timed out, or broke on the way.
 */
static int
transfer_error(struct store_s3 *s3, struct s3_call *c, const char *tgt,
    CURLcode cc, struct cairn_err *err)
{
	if (connect_error(cc) || tls_error(cc))
		return cairn_err_set(err, CAIRN_ENET, "%s %s: cannot reach "
		    "%s://%s: %s", c->op, tgt, s3->scheme, s3->hostport,
		    curl_easy_strerror(cc));
	if (cc == CURLE_OPERATION_TIMEDOUT)
		return cairn_err_set(err, CAIRN_ETIMEOUT, "%s %s: %s://%s "
		    "stopped answering (nothing moved for %ld s): %s", c->op,
		    tgt, s3->scheme, s3->hostport, s3->timeout_ms / 1000,
		    curl_easy_strerror(cc));
	if (cc == CURLE_SEND_FAIL_REWIND)
		return cairn_err_set(err, CAIRN_ENET, "%s %s: the connection "
		    "to %s://%s broke while sending, and the data source "
		    "cannot be read again to resend it", c->op, tgt,
		    s3->scheme, s3->hostport);
	return cairn_err_set(err, CAIRN_ENET, "%s %s: the connection to "
	    "%s://%s broke during the request: %s", c->op, tgt, s3->scheme,
	    s3->hostport, curl_easy_strerror(cc));
}

/*
 * The pause before retry number `attempt` (1 = the first retry): capped
 * exponential backoff with jitter over the upper half, so a crowd of
 * clients that failed together does not come back together.
 */
static int64_t
backoff_ms(struct store_s3 *s3, int attempt)
{
	int64_t delay = s3->backoff_ms << (attempt - 1 < 16 ? attempt - 1 : 16);

	if (delay > S3_BACKOFF_CAP_MS || delay <= 0)
		delay = S3_BACKOFF_CAP_MS;
	return delay / 2 + (int64_t)rand_below((uint64_t)delay / 2 + 1);
}

/*
 * Run the call c, retrying as the essay says. 0 on a 2xx reply (then
 * c->reply holds a buffered body, c->etag etc. the headers).
 */
static int
s3_call_run(struct store_s3 *s3, struct s3_call *c, struct cairn_err *err)
{
	CURL *h;
	CURLcode cc = CURLE_OK;
	char tgt[400];
	int attempt, rc = 0, retry, connect_tries = 0;
	uint64_t start_off = c->range_off;
	int64_t start_len = c->range_len, delay;

	target(s3, c->key, tgt, sizeof tgt);
	if (c->reply.cap == 0)
		buf_init(&c->reply, CAIRN_CAP_S3_XML);
	for (attempt = 1;; attempt++) {
		if (c->sink != NULL && c->delivered > 0) {
			/* resume a broken download after the delivered bytes */
			c->has_range = 1;
			c->range_off = start_off + c->delivered;
			c->range_len = start_len < 0 ? -1 :
			    start_len - (int64_t)c->delivered;
		}
		if (c->src != NULL && attempt > 1 && c->sent > 0 &&
		    store_src_rewind(c->src) < 0)
			break;	/* rc and err from the last attempt stand */
		h = handle_get(s3);
		c->attempts = attempt;
		rc = s3_attempt(s3, h, c, time_now_us() / TIME_US_PER_SEC, &cc, err);
		handle_put(s3, h, rc < 0 || cc != CURLE_OK);
		if (rc < 0)
			return rc;
		retry = 0;
		if (c->canceled) {
			return cairn_err_set(err, CAIRN_ECANCELED,
			    "%s %s: stopped by the caller's %s", c->op, tgt,
			    c->src && !c->sink ? "data source" : "reader");
		} else if (c->range_ignored) {
			return cairn_err_set(err, CAIRN_EPROTO,
			    "%s %s: the server ignored the Range header", c->op, tgt);
		} else if (c->too_big) {
			return cairn_err_set(err, CAIRN_ETOOBIG,
			    "%s %s: reply larger than %u bytes", c->op, tgt,
			    CAIRN_CAP_S3_XML);
		} else if (cc != CURLE_OK) {
			rc = transfer_error(s3, c, tgt, cc, err);
			if (connect_error(cc))
				retry = ++connect_tries < S3_CONNECT_ATTEMPTS;
			else
				retry = transient_error(cc);
		} else if (is_2xx(c->status)) {
			return 0;
		} else {
			rc = map_error(s3, c, err);
			retry = retryable_status(c);
		}
		if (!retry || attempt >= s3->max_attempts)
			break;
		if (c->src != NULL && c->src->rewind == NULL && c->sent > 0)
			break;
		delay = backoff_ms(s3, attempt);
		log_debug("%s %s: attempt %d failed (%s), retrying in %lld ms",
		    c->op, tgt, attempt, err ? err->msg : "error", (long long)delay);
		if (store_retry_sleep(delay * 1000, tgt, err) < 0)
			return CAIRN_ECANCELED;
	}
	if (attempt > 1)
		cairn_err_prefix(err, "after %d attempts", attempt);
	return rc;
}

static void
call_init(struct s3_call *c, const char *op, const char *method,
    const char *key)
{
	memset(c, 0, sizeof *c);
	c->op = op;
	c->method = method;
	c->key = key;
	c->range_len = -1;
	c->prog_total = -1;
	buf_init(&c->reply, CAIRN_CAP_S3_XML);
}

static void
call_param(struct s3_call *c, const char *name, const char *value)
{
	if (c->nparams < S3_MAX_PARAMS)
		c->params[c->nparams++] = (struct sigv4_param){ name, value };
}

static void
call_done(struct s3_call *c)
{
	buf_free(&c->reply);
}

/* ---- operations ------------------------------------------------------- */

static int
s3_check(struct store *s, struct cairn_err *err)
{
	struct store_s3 *s3 = (struct store_s3 *)s;
	struct s3_call c;
	int rc;

	call_init(&c, "ListObjectsV2", "GET", NULL);
	call_param(&c, "list-type", "2");
	call_param(&c, "max-keys", "1");
	rc = s3_call_run(s3, &c, err);
	call_done(&c);
	return rc;
}

static int
put_single(struct store_s3 *s3, const char *key, struct store_src *src,
    char *etag, const struct store_progress *prog, struct cairn_err *err)
{
	struct s3_call c;
	int rc;

	call_init(&c, "PutObject", "PUT", key);
	c.sse_write = c.sse_c = 1;
	c.src = src;
	c.prog = prog;
	c.prog_total = src->len;
	rc = s3_call_run(s3, &c, err);
	if (rc == 0 && c.sent != (uint64_t)src->len)
		rc = cairn_err_set(err, CAIRN_EINVAL,
		    "PutObject s3://%s/%.300s: source gave %llu bytes, %lld announced",
		    s3->bucket, key, (unsigned long long)c.sent, (long long)src->len);
	if (rc == 0)
		snprintf(etag, STORE_ETAG_MAX, "%s", c.etag);
	call_done(&c);
	return rc;
}

/* Fill buf with up to cap bytes from src; returns bytes or < 0. */
static ssize_t
fill(struct store_src *src, char *buf, size_t cap)
{
	size_t got = 0;
	ssize_t n;

	while (got < cap) {
		n = store_src_read(src, buf + got, cap - got);
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

struct mp_progress {
	const struct store_progress *outer;
	uint64_t base;
	int64_t total;
};

static void
mp_progress_fn(void *arg, uint64_t done, int64_t total)
{
	struct mp_progress *m = arg;

	(void)total;
	store_progress_report(m->outer, m->base + done, m->total);
}

/* store_put of an unknown or huge length: buffered multipart. */
static int
put_stream(struct store_s3 *s3, const char *key, struct store_src *src,
    char *etag, const struct store_progress *prog, struct cairn_err *err)
{
	struct store_part *parts = NULL;
	struct store_src part;
	struct mp_progress mp = { prog, 0, src->len };
	struct store_progress inner = { mp_progress_fn, &mp };
	char *buf = xmalloc(STORE_S3_PUT_PART), *id = NULL;
	size_t nparts = 0;
	ssize_t n;
	int rc;

	n = fill(src, buf, STORE_S3_PUT_PART);
	if (n < 0) {
		rc = cairn_err_set(err, CAIRN_ECANCELED,
		    "PutObject s3://%s/%.300s: reading the data failed",
		    s3->bucket, key);
		goto out;
	}
	if ((size_t)n < STORE_S3_PUT_PART) {
		store_src_mem(&part, buf, (size_t)n);
		rc = put_single(s3, key, &part, etag, prog, err);
		goto out;
	}
	rc = s3_ops.mpu_create(&s3->base, key, &id, err);
	if (rc < 0)
		goto out;
	while (n > 0) {
		if (nparts == STORE_PART_MAX_NUMBER) {
			rc = cairn_err_set(err, CAIRN_ETOOBIG,
			    "PutObject s3://%s/%.300s: more than %d parts",
			    s3->bucket, key, STORE_PART_MAX_NUMBER);
			goto out;
		}
		parts = xreallocarray(parts, nparts + 1, sizeof *parts);
		memset(&parts[nparts], 0, sizeof *parts);
		parts[nparts].number = (int)nparts + 1;
		parts[nparts].size = (uint64_t)n;
		store_src_mem(&part, buf, (size_t)n);
		rc = s3_ops.mpu_put_part(&s3->base, key, id, (int)nparts + 1, &part,
		    parts[nparts].etag, &inner, err);
		if (rc < 0)
			goto out;
		mp.base += (uint64_t)n;
		nparts++;
		n = fill(src, buf, STORE_S3_PUT_PART);
		if (n < 0) {
			rc = cairn_err_set(err, CAIRN_ECANCELED,
			    "PutObject s3://%s/%.300s: reading the data failed",
			    s3->bucket, key);
			goto out;
		}
	}
	rc = s3_ops.mpu_complete(&s3->base, key, id, parts, nparts, etag, err);
out:
	if (rc < 0 && id != NULL)
		(void)s3_ops.mpu_abort(&s3->base, key, id, NULL);
	free(id);
	free(parts);
	free(buf);
	return rc;
}

static int
s3_put(struct store *s, const char *key, struct store_src *src, char *etag,
    const struct store_progress *prog, struct cairn_err *err)
{
	struct store_s3 *s3 = (struct store_s3 *)s;

	if (src->len >= 0 && (uint64_t)src->len <= S3_SINGLE_PUT_MAX)
		return put_single(s3, key, src, etag, prog, err);
	return put_stream(s3, key, src, etag, prog, err);
}

static int
s3_get(struct store *s, const char *key, uint64_t off, int64_t len,
    store_write_fn sink, void *arg, const struct store_progress *prog,
    struct cairn_err *err)
{
	struct store_s3 *s3 = (struct store_s3 *)s;
	struct s3_call c;
	int rc;

	call_init(&c, "GetObject", "GET", key);
	c.sse_c = 1;
	if (len == 0) {
		/* nothing to read; still report a missing key */
		call_done(&c);
		return s->ops->head(s, key, &(struct store_stat){ 0 }, err);
	}
	if (off > 0 || len > 0) {
		c.has_range = 1;
		c.range_off = off;
		c.range_len = len;
	}
	c.sink = sink;
	c.sink_arg = arg;
	c.prog = prog;
	c.prog_total = len;
	rc = s3_call_run(s3, &c, err);
	if (rc == 0 && len > 0 && c.delivered != (uint64_t)len)
		rc = cairn_err_set(err, CAIRN_EINVAL,
		    "GetObject s3://%s/%.300s: range %llu+%lld is outside the object",
		    s3->bucket, key, (unsigned long long)off, (long long)len);
	call_done(&c);
	return rc;
}

static int
s3_head(struct store *s, const char *key, struct store_stat *st,
    struct cairn_err *err)
{
	struct store_s3 *s3 = (struct store_s3 *)s;
	struct s3_call c;
	int rc;

	call_init(&c, "HeadObject", "HEAD", key);
	c.sse_c = 1;
	rc = s3_call_run(s3, &c, err);
	if (rc == 0) {
		st->size = c.content_length > 0 ? (uint64_t)c.content_length : 0;
		snprintf(st->etag, sizeof st->etag, "%s", c.etag);
		st->mtime_us = c.last_modified_us;
	}
	call_done(&c);
	return rc;
}

/*
 * A page of ListObjectsV2 has Contents and CommonPrefixes in two runs; S3
 * orders their union by key, so one page is collected, merged by key and
 * handed out in that order.
 */
struct list_row {
	char *key;
	struct store_entry e;
};

struct list_ctx {
	struct list_row *v;
	size_t n, alloc;
};

static int
list_row(void *arg, const struct s3xml_object *o)
{
	struct list_ctx *l = arg;
	struct list_row *r;
	int64_t us = 0;

	if (l->n == l->alloc) {
		l->alloc = l->alloc ? 2 * l->alloc : 64;
		l->v = xreallocarray(l->v, l->alloc, sizeof *l->v);
	}
	r = &l->v[l->n++];
	memset(r, 0, sizeof *r);
	r->key = xstrdup(o->key);
	r->e.is_prefix = o->is_prefix;
	if (!o->is_prefix) {
		r->e.stat.size = o->size;
		snprintf(r->e.stat.etag, sizeof r->e.stat.etag, "%s", o->etag);
		if (time_parse(o->last_modified, &us) == 0)
			r->e.stat.mtime_us = us;
	}
	return 0;
}

static int
row_cmp(const void *a, const void *b)
{
	return strcmp(((const struct list_row *)a)->key,
	    ((const struct list_row *)b)->key);
}

static int
s3_list(struct store *s, const char *prefix, const char *delim,
    store_list_fn fn, void *arg, struct cairn_err *err)
{
	struct store_s3 *s3 = (struct store_s3 *)s;
	struct list_ctx l = { NULL, 0, 0 };
	struct s3_call c;
	char *token = NULL, *next = NULL;
	int rc = 0, truncated = 1, stopped = 0;
	size_t i;

	while (rc == 0 && truncated && !stopped) {
		call_init(&c, "ListObjectsV2", "GET", NULL);
		call_param(&c, "list-type", "2");
		if (*prefix != '\0')
			call_param(&c, "prefix", prefix);
		if (delim != NULL)
			call_param(&c, "delimiter", delim);
		if (token != NULL)
			call_param(&c, "continuation-token", token);
		rc = s3_call_run(s3, &c, err);
		if (rc == 0) {
			rc = s3xml_list_objects(c.reply.data ? c.reply.data : "",
			    c.reply.len, list_row, &l, &truncated, &next, err);
			if (rc < 0)
				cairn_err_prefix(err,
				    "ListObjectsV2 s3://%s prefix \"%.300s\"",
				    s3->bucket, prefix);
		}
		call_done(&c);
		if (l.n > 0)
			qsort(l.v, l.n, sizeof *l.v, row_cmp);
		for (i = 0; i < l.n; i++) {
			l.v[i].e.key = l.v[i].key;
			if (rc == 0 && !stopped && fn(arg, &l.v[i].e) != 0)
				stopped = 1;
			free(l.v[i].key);
		}
		l.n = 0;
		free(token);
		token = next;
		next = NULL;
		if (rc == 0 && truncated && token == NULL)
			rc = cairn_err_set(err, CAIRN_EPROTO,
			    "ListObjectsV2 s3://%s: truncated page without a "
			    "continuation token", s3->bucket);
	}
	free(l.v);
	free(token);
	return rc;
}

static int
s3_del(struct store *s, const char *key, struct cairn_err *err)
{
	struct store_s3 *s3 = (struct store_s3 *)s;
	struct s3_call c;
	int rc;

	call_init(&c, "DeleteObject", "DELETE", key);
	rc = s3_call_run(s3, &c, err);
	if (rc == CAIRN_ENOTFOUND && c.status == 404 &&
	    strstr(err ? err->msg : "NoSuchKey", "NoSuchKey") != NULL) {
		cairn_err_clear(err);
		rc = 0;
	}
	call_done(&c);
	return rc;
}

#define S3_DELETE_BATCH 1000	/* DeleteObjects takes at most 1000 keys */

struct del_errors {
	struct store_s3 *s3;
	int rc;
	struct cairn_err *err;
	size_t n;
};

static int
del_error(void *arg, const char *key, const char *code, const char *message)
{
	struct del_errors *d = arg;

	d->n++;
	if (d->rc == 0) {
		d->rc = strcmp(code, "AccessDenied") == 0 ? CAIRN_EAUTH :
		    strncmp(code, "Internal", 8) == 0 ? CAIRN_ESERVER : CAIRN_EFAIL;
		cairn_err_set(d->err, d->rc, "DeleteObjects s3://%s/%.300s: %s: %s",
		    d->s3->bucket, key, code, message);
	}
	return 0;
}

static int
has_control(const char *k)
{
	for (; *k != '\0'; k++)
		if ((unsigned char)*k < 0x20)
			return 1;
	return 0;
}

/*
 * Delete keys with DeleteObjects, up to 1000 per request (quiet mode:
 * only failures are reported). Keys XML cannot carry (control bytes) go
 * one by one. *deleted (may be NULL) counts what is gone.
 */
static int
s3_del_many(struct store *s, char *const *keys, size_t n, size_t *deleted,
    struct cairn_err *err)
{
	struct store_s3 *s3 = (struct store_s3 *)s;
	struct del_errors de = { s3, 0, err, 0 };
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen;
	struct store_src src;
	struct s3_call c;
	struct buf body;
	size_t i, start, batch, nxml;
	int rc = 0;

	if (deleted != NULL)
		*deleted = 0;
	buf_init(&body, (size_t)S3_DELETE_BATCH * (STORE_KEY_MAX * 6 + 64) + 256);
	for (start = 0; rc == 0 && start < n; start += batch) {
		batch = n - start < S3_DELETE_BATCH ? n - start : S3_DELETE_BATCH;
		buf_reset(&body);
		nxml = 0;
		buf_puts(&body, "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
		    "<Quiet>true</Quiet>");
		for (i = start; i < start + batch; i++) {
			if (has_control(keys[i])) {
				rc = s3_del(s, keys[i], err);
				if (rc < 0)
					break;
				if (deleted != NULL)
					(*deleted)++;
				continue;
			}
			buf_puts(&body, "<Object><Key>");
			str_escape_html(&body, keys[i]);
			buf_puts(&body, "</Key></Object>");
			nxml++;
		}
		if (rc < 0 || nxml == 0)
			continue;
		if (buf_puts(&body, "</Delete>") < 0) {
			rc = cairn_err_set(err, CAIRN_ETOOBIG,
			    "DeleteObjects: request body too large");
			break;
		}
		EVP_Digest(body.data, body.len, md, &mdlen, EVP_md5(), NULL);
		call_init(&c, "DeleteObjects", "POST", NULL);
		EVP_EncodeBlock((unsigned char *)c.content_md5, md, (int)mdlen);
		call_param(&c, "delete", "");
		store_src_mem(&src, body.data, body.len);
		c.src = &src;
		rc = s3_call_run(s3, &c, err);
		if (rc == 0) {
			de.n = 0;
			rc = s3xml_delete_result(c.reply.data ? c.reply.data : "",
			    c.reply.len, del_error, &de, NULL, err);
			if (rc == 0)
				rc = de.rc;
			if (deleted != NULL)
				*deleted += nxml - de.n;
		}
		call_done(&c);
	}
	buf_free(&body);
	return rc;
}

static int
s3_mpu_create(struct store *s, const char *key, char **id,
    struct cairn_err *err)
{
	struct store_s3 *s3 = (struct store_s3 *)s;
	struct s3_call c;
	int rc;

	call_init(&c, "CreateMultipartUpload", "POST", key);
	c.sse_write = c.sse_c = 1;
	call_param(&c, "uploads", "");
	rc = s3_call_run(s3, &c, err);
	if (rc == 0)
		rc = s3xml_upload_id(c.reply.data ? c.reply.data : "", c.reply.len,
		    id, err);
	call_done(&c);
	return rc;
}

static int
s3_mpu_put_part(struct store *s, const char *key, const char *id, int number,
    struct store_src *src, char *etag, const struct store_progress *prog,
    struct cairn_err *err)
{
	struct store_s3 *s3 = (struct store_s3 *)s;
	struct s3_call c;
	struct store_src copy;
	char num[16];
	ssize_t n;
	char *buf = NULL;
	int rc;

	snprintf(num, sizeof num, "%d", number);
	call_init(&c, "UploadPart", "PUT", key);
	c.sse_c = 1;
	call_param(&c, "partNumber", num);
	call_param(&c, "uploadId", id);
	if (src->len < 0) {
		/* S3 needs the length: buffer the part (capped) */
		buf = xmalloc(64u << 20);
		n = fill(src, buf, 64u << 20);
		if (n < 0 || n == (64 << 20)) {
			rc = cairn_err_set(err, n < 0 ? CAIRN_ECANCELED : CAIRN_ETOOBIG,
			    "UploadPart s3://%s/%.300s: part %d of unknown length %s",
			    s3->bucket, key, number, n < 0 ? "could not be read" :
			    "is 64 MiB or more");
			goto out;
		}
		store_src_mem(&copy, buf, (size_t)n);
		src = &copy;
	}
	c.src = src;
	c.prog = prog;
	c.prog_total = src->len;
	rc = s3_call_run(s3, &c, err);
	if (rc == 0 && c.etag[0] == '\0')
		rc = cairn_err_set(err, CAIRN_EPROTO,
		    "UploadPart s3://%s/%.300s: part %d: reply without ETag",
		    s3->bucket, key, number);
	if (rc == 0)
		snprintf(etag, STORE_ETAG_MAX, "%s", c.etag);
out:
	call_done(&c);
	free(buf);
	return rc;
}

struct parts_ctx {
	store_part_fn fn;
	void *arg;
	int stopped;
	int last;
};

static int
parts_row(void *arg, const struct s3xml_part *p)
{
	struct parts_ctx *pc = arg;
	struct store_part sp;

	memset(&sp, 0, sizeof sp);
	sp.number = p->number;
	sp.size = p->size;
	snprintf(sp.etag, sizeof sp.etag, "%s", p->etag);
	pc->last = p->number;
	if (pc->fn(pc->arg, &sp) != 0) {
		pc->stopped = 1;
		return 1;
	}
	return 0;
}

static int
s3_mpu_list_parts(struct store *s, const char *key, const char *id,
    store_part_fn fn, void *arg, struct cairn_err *err)
{
	struct store_s3 *s3 = (struct store_s3 *)s;
	struct parts_ctx pc = { fn, arg, 0, 0 };
	struct s3_call c;
	char marker[16];
	int rc = 0, truncated = 1, next = 0, pages = 0;

	while (rc == 0 && truncated && !pc.stopped && pages++ < 100) {
		call_init(&c, "ListParts", "GET", key);
		call_param(&c, "uploadId", id);
		if (next > 0) {
			snprintf(marker, sizeof marker, "%d", next);
			call_param(&c, "part-number-marker", marker);
		}
		rc = s3_call_run(s3, &c, err);
		if (rc == 0) {
			rc = s3xml_list_parts(c.reply.data ? c.reply.data : "",
			    c.reply.len, parts_row, &pc, &truncated, &next, err);
			if (rc == CAIRN_ECANCELED && pc.stopped)
				rc = 0;
		}
		call_done(&c);
		if (rc == 0 && truncated && next <= 0)
			next = pc.last;
	}
	return rc;
}

/*
 * CompleteMultipartUpload. S3 may answer 200 and put an <Error> in the
 * body (the work runs after the headers went out); such a reply is retried
 * like a 5xx, here, since s3_call_run saw a 2xx. A retry after a complete
 * that did go through (its reply lost to a reset) meets NoSuchUpload:
 * store_mpu_complete() recognises that case by the object now at the key.
 */
static int
s3_mpu_complete(struct store *s, const char *key, const char *id,
    const struct store_part *parts, size_t n, char *etag,
    struct cairn_err *err)
{
	struct store_s3 *s3 = (struct store_s3 *)s;
	struct s3_call c;
	struct store_src src;
	struct s3xml_error xe;
	struct buf body;
	char quoted[STORE_ETAG_MAX + 4];
	size_t i;
	int rc = 0, attempt;

	buf_init(&body, (size_t)STORE_PART_MAX_NUMBER * 256);
	rc |= buf_puts(&body, "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
	for (i = 0; i < n; i++) {
		snprintf(quoted, sizeof quoted, "\"%s\"", parts[i].etag);
		rc |= buf_printf(&body, "<Part><PartNumber>%d</PartNumber><ETag>",
		    parts[i].number);
		rc |= str_escape_html(&body, quoted);
		rc |= buf_puts(&body, "</ETag></Part>");
	}
	rc |= buf_puts(&body, "</CompleteMultipartUpload>");
	if (rc != 0) {
		buf_free(&body);
		return cairn_err_set(err, CAIRN_ETOOBIG,
		    "CompleteMultipartUpload: request body too large");
	}
	for (attempt = 1;; attempt++) {
		call_init(&c, "CompleteMultipartUpload", "POST", key);
		call_param(&c, "uploadId", id);
		store_src_mem(&src, body.data, body.len);
		c.src = &src;
		rc = s3_call_run(s3, &c, err);
		if (rc == 0 && c.reply.len > 0 &&
		    s3xml_error(c.reply.data, c.reply.len, &xe) == 1) {
			c.status = 500;
			rc = map_error(s3, &c, err);
			if (attempt < s3->max_attempts) {
				log_debug("CompleteMultipartUpload s3://%s/%.300s: "
				    "error %s inside a 200 reply, retrying",
				    s3->bucket, key, xe.code);
				call_done(&c);
				rc = store_retry_sleep(backoff_ms(s3, attempt) *
				    1000, "CompleteMultipartUpload", err);
				if (rc == 0)
					continue;
			}
		}
		break;
	}
	if (rc == 0)
		rc = s3xml_complete_etag(c.reply.data ? c.reply.data : "",
		    c.reply.len, etag, STORE_ETAG_MAX, err);
	call_done(&c);
	buf_free(&body);
	return rc;
}

static int
s3_mpu_abort(struct store *s, const char *key, const char *id,
    struct cairn_err *err)
{
	struct store_s3 *s3 = (struct store_s3 *)s;
	struct s3_call c;
	int rc;

	call_init(&c, "AbortMultipartUpload", "DELETE", key);
	call_param(&c, "uploadId", id);
	rc = s3_call_run(s3, &c, err);
	call_done(&c);
	return rc;
}

/* ---- open ------------------------------------------------------------- */

static int
load_creds(const struct store_s3_config *cfg, struct sigv4_creds *cr,
    struct cairn_err *err)
{
	const char *profile = cfg->profile, *ak, *sk, *tok, *file, *home;
	char *text = NULL, *path = NULL, *origin;
	int rc;

	if (profile == NULL || *profile == '\0')
		profile = getenv("AWS_PROFILE");
	if (cfg->credentials != NULL)
		return sigv4_creds_parse(cfg->credentials, profile,
		    "credentials (from the location's secret)", cr, err);
	file = cfg->credentials_file;
	if (file == NULL) {
		ak = getenv("AWS_ACCESS_KEY_ID");
		sk = getenv("AWS_SECRET_ACCESS_KEY");
		tok = getenv("AWS_SESSION_TOKEN");
		if (ak != NULL && *ak != '\0' && sk != NULL && *sk != '\0') {
			cr->access_key = xstrdup(ak);
			cr->secret_key = xstrdup(sk);
			cr->session_token = tok && *tok ? xstrdup(tok) : NULL;
			return 0;
		}
		file = getenv("AWS_SHARED_CREDENTIALS_FILE");
		if (file == NULL || *file == '\0') {
			home = getenv("HOME");
			path = xasprintf("%s/.aws/credentials", home ? home : "");
			if (access(path, R_OK) < 0) {
				rc = cairn_err_set(err, CAIRN_EINVAL,
				    "no S3 credentials: set AWS_ACCESS_KEY_ID and "
				    "AWS_SECRET_ACCESS_KEY, or give a credentials file");
				free(path);
				return rc;
			}
			file = path;
		}
	}
	rc = buf_read_file(file, CAIRN_CAP_FILE, "credentials file", &text,
	    NULL, err);
	if (rc < 0 && err != NULL)
		err->code = CAIRN_EINVAL;	/* a configuration error */
	if (rc < 0)
		rc = CAIRN_EINVAL;
	if (rc == 0) {
		origin = xasprintf("credentials file %s", file);
		rc = sigv4_creds_parse(text, profile, origin, cr, err);
		free(origin);
		memset(text, 0, strlen(text));
	}
	free(text);
	free(path);
	return rc;
}

static int
is_ip_or_localhost(const char *hostport)
{
	size_t i;

	if (hostport[0] == '[')
		return 1;	/* IPv6 literal */
	if (strncmp(hostport, "localhost", 9) == 0 &&
	    (hostport[9] == '\0' || hostport[9] == ':'))
		return 1;
	for (i = 0; hostport[i] != '\0' && hostport[i] != ':'; i++)
		if (!isdigit((unsigned char)hostport[i]) && hostport[i] != '.')
			return 0;
	return 1;
}

static void
s3_free(struct store *s)
{
	struct store_s3 *s3 = (struct store_s3 *)s;
	int i;

	for (i = 0; i < s3->npool; i++)
		curl_easy_cleanup(s3->pool[i]);
	if (s3->share != NULL)
		curl_share_cleanup(s3->share);
	for (i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&s3->share_mu[i]);
	pthread_mutex_destroy(&s3->pool_mu);
	sigv4_creds_free(&s3->creds);
	free(s3->bucket);
	free(s3->scheme);
	free(s3->hostport);
	free(s3->region);
	free(s3->ca_file);
	free(s3->ca_pem);
	free(s3->sse);
	free(s3->sse_kms_key_id);
	OPENSSL_cleanse(s3->sse_c_key, sizeof s3->sse_c_key);
	free(s3);
}

/* Storage-side encryption settings of cfg into s3 (store.h says which). */
static int
sse_setup(struct store_s3 *s3, const struct store_s3_config *cfg,
    struct cairn_err *err)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	if (cfg->sse != NULL && *cfg->sse != '\0') {
		if (strcmp(cfg->sse, "AES256") != 0 &&
		    strcmp(cfg->sse, "aws:kms") != 0)
			return cairn_err_set(err, CAIRN_EINVAL, "server-side "
			    "encryption \"%.40s\": use AES256 (SSE-S3) or aws:kms "
			    "(SSE-KMS)", cfg->sse);
		s3->sse = xstrdup(cfg->sse);
	}
	if (cfg->sse_kms_key_id != NULL && *cfg->sse_kms_key_id != '\0') {
		if (s3->sse == NULL || strcmp(s3->sse, "aws:kms") != 0)
			return cairn_err_set(err, CAIRN_EINVAL, "a KMS key id is "
			    "only used with server-side encryption aws:kms");
		s3->sse_kms_key_id = xstrdup(cfg->sse_kms_key_id);
	}
	if (cfg->sse_c_key != NULL) {
		if (s3->sse != NULL)
			return cairn_err_set(err, CAIRN_EINVAL, "SSE-C (a customer "
			    "key) and SSE-S3/SSE-KMS cannot be used together");
		EVP_EncodeBlock((unsigned char *)s3->sse_c_key, cfg->sse_c_key,
		    32);
		EVP_Digest(cfg->sse_c_key, 32, md, &mdlen, EVP_md5(), NULL);
		EVP_EncodeBlock((unsigned char *)s3->sse_c_md5, md, (int)mdlen);
		s3->sse_c = 1;
	}
	return 0;
}

static int
bucket_ok(const char *b)
{
	size_t i, n = strlen(b);

	if (n < 3 || n > 63)
		return 0;
	for (i = 0; i < n; i++)
		if (!(islower((unsigned char)b[i]) || isdigit((unsigned char)b[i]) ||
		    b[i] == '-' || b[i] == '.' || b[i] == '_'))
			return 0;
	return 1;
}

int
store_open_s3(const struct store_s3_config *cfg, struct store **out,
    struct cairn_err *err)
{
	struct store_s3 *s3;
	const char *region = cfg->region, *ep = cfg->endpoint, *hp;
	char *slash;
	int i, rc;

	*out = NULL;
	if (cfg->bucket == NULL || *cfg->bucket == '\0')
		return cairn_err_set(err, CAIRN_EINVAL, "s3 storage needs a bucket");
	if (!bucket_ok(cfg->bucket))
		return cairn_err_set(err, CAIRN_EINVAL,
		    "\"%.100s\" is not a valid S3 bucket name (3-63 of a-z 0-9 . - _)",
		    cfg->bucket);
	pthread_once(&curl_once, curl_init_once);
	if (region == NULL || *region == '\0')
		region = getenv("AWS_REGION");
	if (region == NULL || *region == '\0')
		region = getenv("AWS_DEFAULT_REGION");
	if (region == NULL || *region == '\0')
		region = "us-east-1";

	s3 = xcalloc(1, sizeof *s3);
	s3->base.ops = &s3_ops;
	pthread_mutex_init(&s3->pool_mu, NULL);
	for (i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&s3->share_mu[i], NULL);
	s3->bucket = xstrdup(cfg->bucket);
	s3->region = xstrdup(region);
	if (ep == NULL || *ep == '\0') {
		s3->scheme = xstrdup("https");
		s3->hostport = xasprintf("s3.%s.amazonaws.com", region);
	} else if (strncmp(ep, "http://", 7) == 0 || strncmp(ep, "https://", 8) == 0) {
		hp = strstr(ep, "://") + 3;
		s3->scheme = xstrndup(ep, (size_t)(hp - 3 - ep));
		s3->hostport = xstrdup(hp);
		slash = strchr(s3->hostport, '/');
		if (slash != NULL) {
			if (slash[strspn(slash, "/")] != '\0') {
				rc = cairn_err_set(err, CAIRN_EINVAL,
				    "S3 endpoint \"%.200s\" has a path; give "
				    "scheme://host[:port] only", ep);
				goto fail;
			}
			*slash = '\0';
		}
		if (*s3->hostport == '\0') {
			rc = cairn_err_set(err, CAIRN_EINVAL,
			    "S3 endpoint \"%.200s\" has no host", ep);
			goto fail;
		}
	} else {
		rc = cairn_err_set(err, CAIRN_EINVAL,
		    "S3 endpoint \"%.200s\" must start with http:// or https://", ep);
		goto fail;
	}
	s3->path_style = cfg->force_path_style || is_ip_or_localhost(s3->hostport) ||
	    strchr(s3->bucket, '.') != NULL;
	s3->ca_file = xstrdup(cfg->ca_file);
	s3->ca_pem = xstrdup(cfg->ca_pem);
#if LIBCURL_VERSION_NUM < 0x074d00
	if (s3->ca_pem != NULL) {
		rc = cairn_err_set(err, CAIRN_EUNSUPPORTED, "objectStorage.caCert "
		    "needs libcurl 7.77 or later; use config.caCertFile");
		goto fail;
	}
#endif
	s3->insecure = cfg->insecure_skip_verify;
	s3->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 30000;
	s3->max_attempts = cfg->max_attempts > 0 ? cfg->max_attempts : 6;
	s3->backoff_ms = cfg->backoff_base_ms > 0 ? cfg->backoff_base_ms : 100;
	rc = sse_setup(s3, cfg, err);
	if (rc < 0)
		goto fail;
	s3->base.desc = xasprintf("s3://%s (%s://%s, %s%s%s)", s3->bucket,
	    s3->scheme, s3->hostport, s3->region, s3->sse ? ", SSE " :
	    s3->sse_c ? ", SSE-C" : "", s3->sse ? s3->sse : "");
	rc = load_creds(cfg, &s3->creds, err);
	if (rc < 0)
		goto fail;
	s3->share = curl_share_init();
	if (s3->share == NULL)
		abort();
	curl_share_setopt(s3->share, CURLSHOPT_LOCKFUNC, share_lock);
	curl_share_setopt(s3->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
	curl_share_setopt(s3->share, CURLSHOPT_USERDATA, s3);
	curl_share_setopt(s3->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	curl_share_setopt(s3->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	*out = &s3->base;
	return 0;
fail:
	store_free(&s3->base);
	return rc;
}

static const struct store_ops s3_ops = {
	"s3", s3_free, s3_check, s3_put, s3_get, s3_head, s3_list, s3_del,
	s3_del_many, s3_mpu_create, s3_mpu_put_part, s3_mpu_list_parts, s3_mpu_complete,
	s3_mpu_abort, NULL,
};
