/*
 * sigv4.h: AWS Signature Version 4 for S3 requests, and AWS credentials.
 *
 * Written with libcrypto's HMAC-SHA256 and SHA-256 rather than libcurl's
 * CURLOPT_AWS_SIGV4, which (libcurl 7.88, Debian 12) canonicalizes
 * "?uploads" and unsorted query strings differently from AWS. Checked
 * against botocore in tests/unit/test_sigv4.c.
 *
 * Everything here is pure (no I/O, no clock): the caller passes the time,
 * so a fixed clock gives reproducible signatures.
 */
#ifndef CAIRN_SIGV4_H
#define CAIRN_SIGV4_H

#include <stddef.h>
#include <stdint.h>
#include "base/buf.h"
#include "base/err.h"

#define SIGV4_UNSIGNED_PAYLOAD "UNSIGNED-PAYLOAD"
#define SIGV4_EMPTY_SHA256 \
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

struct sigv4_creds {
	char *access_key;	/* owned */
	char *secret_key;	/* owned */
	char *session_token;	/* owned, NULL when none */
};

/* A query parameter, raw (not encoded); value "" for "?uploads". */
struct sigv4_param {
	const char *name;
	const char *value;
};

/* A header to sign and send; name in any case, value raw. */
struct sigv4_header {
	const char *name;
	const char *value;
};

struct sigv4_request {
	const char *method;		/* "GET" */
	const char *uri;		/* path, already URI-encoded ("/b/my%20key") */
	const struct sigv4_param *params;
	size_t nparams;
	const struct sigv4_header *headers;	/* must include host,
						   x-amz-date, x-amz-content-sha256 */
	size_t nheaders;
	const char *payload_hash;	/* hex SHA-256 or SIGV4_UNSIGNED_PAYLOAD */
};

/*
 * Append s to b percent-encoded as AWS wants: everything but A-Z a-z 0-9
 * - . _ ~ becomes %XX (upper-case hex); '/' is kept when keep_slash.
 */
int sigv4_uri_encode(struct buf *b, const char *s, int keep_slash);

/* The canonical query string of params (encoded, sorted); appended to b. */
int sigv4_canonical_query(struct buf *b, const struct sigv4_param *params,
	size_t n);

/* "20130524T000000Z" of a Unix time; out has 17 bytes. */
void sigv4_amz_date(int64_t unix_s, char out[17]);

/*
 * Compute the Authorization header value for req at time unix_s (the same
 * time as in the x-amz-date header) into auth (appended). With canon
 * non-NULL, also append the canonical request (for debugging and tests).
 * Returns 0 or CAIRN_ETOOBIG / CAIRN_EFAIL.
 */
int sigv4_sign(const struct sigv4_creds *cr, const char *region,
	const char *service, int64_t unix_s, const struct sigv4_request *req,
	struct buf *auth, struct buf *canon);

/* Hex SHA-256 of n bytes into out (65 bytes). */
void sigv4_sha256_hex(const void *p, size_t n, char out[65]);

/*
 * Parse an AWS-format credentials (or config) file's text and take the
 * profile's aws_access_key_id, aws_secret_access_key, aws_session_token.
 * Sections are "[name]" or "[profile name]"; '#' and ';' start comments.
 * origin names the text in messages ("credentials file /x"). Missing
 * profile or keys: CAIRN_EINVAL with a message naming origin and profile.
 * *out is filled (owned) only on success.
 */
int sigv4_creds_parse(const char *text, const char *profile,
	const char *origin, struct sigv4_creds *out, struct cairn_err *err);
void sigv4_creds_free(struct sigv4_creds *c);

#endif
