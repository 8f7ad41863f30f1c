/*
 * sigv4.c: AWS Signature Version 4 (see sigv4.h), and the credentials file.
 *
 * The recipe (docs.aws.amazon.com, "Create a signed AWS API request"):
 *   canonical request = METHOD \n URI \n sorted encoded query \n
 *                       lower(name):trimmed value \n ... \n \n
 *                       signed;header;names \n payload hash
 *   string to sign    = "AWS4-HMAC-SHA256" \n amz-date \n
 *                       date/region/service/aws4_request \n hex(sha256(cr))
 *   key               = HMAC(HMAC(HMAC(HMAC("AWS4"+secret, date), region),
 *                       service), "aws4_request")
 *   signature         = hex(HMAC(key, string to sign))
 * For S3 the URI is encoded once (no double encoding, no dot-segment
 * normalization) and x-amz-content-sha256 carries the payload hash or
 * UNSIGNED-PAYLOAD.
 */
#include "config.h"
#include "storage/sigv4.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base/mem.h"
#include "base/util.h"

#define SIGV4_CAP (64u << 10)	/* one canonical request, headers included */

static int
unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	    c == '~';
}

int
sigv4_uri_encode(struct buf *b, const char *s, int keep_slash)
{
	static const char hx[] = "0123456789ABCDEF";
	const unsigned char *p;
	char enc[3];
	int rc = 0;

	for (p = (const unsigned char *)s; *p != '\0' && rc == 0; p++) {
		if (unreserved(*p) || (keep_slash && *p == '/')) {
			rc = buf_putc(b, (char)*p);
		} else {
			enc[0] = '%';
			enc[1] = hx[*p >> 4];
			enc[2] = hx[*p & 15];
			rc = buf_append(b, enc, 3);
		}
	}
	return rc;
}

struct kv {
	char *k;
	char *v;
};

static int
kv_cmp(const void *a, const void *b)
{
	const struct kv *x = a, *y = b;
	int c = strcmp(x->k, y->k);

	return c != 0 ? c : strcmp(x->v, y->v);
}

static char *
encoded(const char *s)
{
	struct buf b;

	buf_init(&b, SIGV4_CAP);
	if (sigv4_uri_encode(&b, s, 0) < 0 || b.data == NULL) {
		buf_free(&b);
		return xstrdup("");
	}
	return buf_take(&b, NULL);
}

int
sigv4_canonical_query(struct buf *b, const struct sigv4_param *params,
    size_t n)
{
	struct kv *v = xcalloc(n ? n : 1, sizeof *v);
	size_t i;
	int rc = 0;

	for (i = 0; i < n; i++) {
		v[i].k = encoded(params[i].name);
		v[i].v = encoded(params[i].value ? params[i].value : "");
	}
	if (n > 0)
		qsort(v, n, sizeof *v, kv_cmp);
	for (i = 0; i < n && rc == 0; i++)
		rc = buf_printf(b, "%s%s=%s", i ? "&" : "", v[i].k, v[i].v);
	for (i = 0; i < n; i++) {
		free(v[i].k);
		free(v[i].v);
	}
	free(v);
	return rc;
}

void
sigv4_amz_date(int64_t unix_s, char out[17])
{
	time_t t = (time_t)unix_s;
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

void
sigv4_sha256_hex(const void *p, size_t n, char out[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;

	EVP_Digest(p, n, md, &len, EVP_sha256(), NULL);
	str_hex(md, len, out);
}

static void
hmac(const void *key, size_t klen, const char *msg, unsigned char out[32])
{
	unsigned int len = 32;

	HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg,
	    strlen(msg), out, &len);
}

struct hdr {
	char *name;		/* lower-case */
	char *value;		/* trimmed, inner runs of spaces collapsed */
};

static int
hdr_cmp(const void *a, const void *b)
{
	return strcmp(((const struct hdr *)a)->name, ((const struct hdr *)b)->name);
}

static char *
trim_value(const char *v)
{
	char *out = xmalloc(strlen(v) + 1), *o = out;
	int space = 0;

	while (*v == ' ' || *v == '\t')
		v++;
	for (; *v != '\0'; v++) {
		if (*v == ' ' || *v == '\t') {
			space = 1;
			continue;
		}
		if (space && o != out)
			*o++ = ' ';
		space = 0;
		*o++ = *v;
	}
	*o = '\0';
	return out;
}

int
sigv4_sign(const struct sigv4_creds *cr, const char *region,
    const char *service, int64_t unix_s, const struct sigv4_request *req,
    struct buf *auth, struct buf *canon)
{
	struct buf cr_text, sts, signed_names;
	struct hdr *h;
	char amz[17], day[9], crhash[65], sig[65], *kstart;
	unsigned char k1[32], k2[32], k3[32], k4[32], s[32];
	size_t i, j;
	int rc = 0;

	sigv4_amz_date(unix_s, amz);
	memcpy(day, amz, 8);
	day[8] = '\0';
	buf_init(&cr_text, SIGV4_CAP);
	buf_init(&sts, SIGV4_CAP);
	buf_init(&signed_names, SIGV4_CAP);

	h = xcalloc(req->nheaders ? req->nheaders : 1, sizeof *h);
	for (i = 0; i < req->nheaders; i++) {
		h[i].name = xstrdup(req->headers[i].name);
		for (j = 0; h[i].name[j] != '\0'; j++)
			h[i].name[j] = (char)tolower((unsigned char)h[i].name[j]);
		h[i].value = trim_value(req->headers[i].value);
	}
	if (req->nheaders > 0)
		qsort(h, req->nheaders, sizeof *h, hdr_cmp);

	rc |= buf_printf(&cr_text, "%s\n%s\n", req->method, req->uri);
	rc |= sigv4_canonical_query(&cr_text, req->params, req->nparams);
	rc |= buf_putc(&cr_text, '\n');
	for (i = 0; i < req->nheaders; i++) {
		rc |= buf_printf(&cr_text, "%s:%s\n", h[i].name, h[i].value);
		rc |= buf_printf(&signed_names, "%s%s", i ? ";" : "", h[i].name);
	}
	rc |= buf_printf(&cr_text, "\n%s\n%s", buf_cstr(&signed_names),
	    req->payload_hash);
	if (rc != 0) {
		rc = CAIRN_ETOOBIG;
		goto out;
	}
	sigv4_sha256_hex(cr_text.data, cr_text.len, crhash);
	rc = buf_printf(&sts, "AWS4-HMAC-SHA256\n%s\n%s/%s/%s/aws4_request\n%s",
	    amz, day, region, service, crhash);
	if (rc < 0)
		goto out;

	kstart = xasprintf("AWS4%s", cr->secret_key);
	hmac(kstart, strlen(kstart), day, k1);
	OPENSSL_cleanse(kstart, strlen(kstart));
	free(kstart);
	hmac(k1, 32, region, k2);
	hmac(k2, 32, service, k3);
	hmac(k3, 32, "aws4_request", k4);
	hmac(k4, 32, buf_cstr(&sts), s);
	str_hex(s, 32, sig);
	rc = buf_printf(auth, "AWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/aws4_request, "
	    "SignedHeaders=%s, Signature=%s", cr->access_key, day, region, service,
	    buf_cstr(&signed_names), sig);
	if (rc == 0 && canon != NULL)
		rc = buf_append(canon, cr_text.data, cr_text.len);
	OPENSSL_cleanse(k4, sizeof k4);
out:
	for (i = 0; i < req->nheaders; i++) {
		free(h[i].name);
		free(h[i].value);
	}
	free(h);
	buf_free(&cr_text);
	buf_free(&sts);
	buf_free(&signed_names);
	return rc;
}

/* ---- credentials file ------------------------------------------------- */

static char *
trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

int
sigv4_creds_parse(const char *text, const char *profile, const char *origin,
    struct sigv4_creds *out, struct cairn_err *err)
{
	char *copy, *line, *next, *eq, *name, *k, *v, *close_br;
	char *ak = NULL, *sk = NULL, *tok = NULL;
	int in_profile = 0, seen_profile = 0, lineno = 0, rc = 0;

	memset(out, 0, sizeof *out);
	if (profile == NULL || *profile == '\0')
		profile = "default";
	if (text == NULL)
		return cairn_err_set(err, CAIRN_EINVAL, "%s: empty", origin);
	copy = xstrdup(text);
	for (line = copy; line != NULL; line = next) {
		next = strchr(line, '\n');
		if (next != NULL)
			*next++ = '\0';
		lineno++;
		line = trim(line);
		if (*line == '\0' || *line == '#' || *line == ';')
			continue;
		if (*line == '[') {
			close_br = strchr(line, ']');
			if (close_br == NULL) {
				rc = cairn_err_set(err, CAIRN_EINVAL,
				    "%s: line %d: section header without ']'",
				    origin, lineno);
				goto out;
			}
			*close_br = '\0';
			name = trim(line + 1);
			if (strncmp(name, "profile ", 8) == 0)
				name = trim(name + 8);
			in_profile = strcmp(name, profile) == 0;
			seen_profile |= in_profile;
			continue;
		}
		eq = strchr(line, '=');
		if (eq == NULL) {
			rc = cairn_err_set(err, CAIRN_EINVAL,
			    "%s: line %d: expected \"key = value\"", origin, lineno);
			goto out;
		}
		if (!in_profile)
			continue;
		*eq = '\0';
		k = trim(line);
		v = trim(eq + 1);
		if (strcmp(k, "aws_access_key_id") == 0) {
			free(ak);
			ak = xstrdup(v);
		} else if (strcmp(k, "aws_secret_access_key") == 0) {
			free(sk);
			sk = xstrdup(v);
		} else if (strcmp(k, "aws_session_token") == 0) {
			free(tok);
			tok = xstrdup(v);
		}
	}
	if (!seen_profile) {
		rc = cairn_err_set(err, CAIRN_EINVAL, "%s: no profile [%s]", origin,
		    profile);
		goto out;
	}
	if (ak == NULL || *ak == '\0' || sk == NULL || *sk == '\0') {
		rc = cairn_err_set(err, CAIRN_EINVAL,
		    "%s: profile [%s] has no %s", origin, profile,
		    ak == NULL || *ak == '\0' ? "aws_access_key_id" :
		    "aws_secret_access_key");
		goto out;
	}
	out->access_key = ak;
	out->secret_key = sk;
	out->session_token = tok;
	ak = sk = tok = NULL;
out:
	if (sk != NULL)
		OPENSSL_cleanse(sk, strlen(sk));
	free(ak);
	free(sk);
	free(tok);
	OPENSSL_cleanse(copy, strlen(text));
	free(copy);
	return rc;
}

void
sigv4_creds_free(struct sigv4_creds *c)
{
	if (c == NULL)
		return;
	if (c->secret_key != NULL)
		OPENSSL_cleanse(c->secret_key, strlen(c->secret_key));
	free(c->access_key);
	free(c->secret_key);
	free(c->session_token);
	memset(c, 0, sizeof *c);
}
