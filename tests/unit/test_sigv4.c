/*
 * test_sigv4.c: the SigV4 signer against botocore and AWS's published
 * examples.
 *
 * Each case is signed by storage/sigv4.c and by botocore's S3SigV4Auth
 * (tests/lib/sigv4_botocore.py, run now with python3) for the same fixed
 * clock and credentials; the Authorization headers must be equal byte for
 * byte. botocore also percent-encodes the key itself (as its REST
 * serializer does for {Key+}), so key encoding is checked too. Missing
 * botocore is a failure, not a skip: awscli is a test dependency.
 */
#include "config.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/jsonutil.h"
#include "base/mem.h"
#include "storage/sigv4.h"
#include "tests/unit/unit.h"

#define MAXP 4

struct sv_case {
	const char *name;
	const char *method;
	const char *host;
	const char *bucket;	/* path-style bucket, or NULL (virtual-hosted) */
	const char *key;	/* raw key, or NULL for the bucket */
	struct sigv4_param params[MAXP];
	size_t nparams;
	const char *range;
	const char *payload;	/* body whose hash is signed, or NULL */
	int unsigned_payload;
	const char *token;
	const char *published;	/* AWS's published signature, if any */
	struct sigv4_header extra[3];	/* more headers (SSE), NULL-ended */
};

static const char *AK = "AKIAIOSFODNN7EXAMPLE";
static const char *SK = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
static const int64_t T_EXAMPLE = 1369353600;	/* 20130524T000000Z */
static const int64_t T_FIXED = 1796212800;	/* 2026-12-02T12:00:00Z */

static const struct sv_case cases[] = {
	{ "aws-example-get-object", "GET", "examplebucket.s3.amazonaws.com", NULL,
	  "test.txt", { { NULL, NULL } }, 0, "bytes=0-9", "", 0, NULL,
	  "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
	  { { NULL, NULL } } },
	{ "aws-example-list-objects", "GET", "examplebucket.s3.amazonaws.com",
	  NULL, NULL, { { "max-keys", "2" }, { "prefix", "J" } }, 2, NULL, "", 0,
	  NULL, "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
	  { { NULL, NULL } } },
	{ "plain-get", "GET", "127.0.0.1:9000", "cairn", "backups/b1/b1.tar.gz",
	  { { NULL, NULL } }, 0, NULL, "", 0, NULL, NULL,
	  { { NULL, NULL } } },
	{ "put-payload-hash", "PUT", "127.0.0.1:9000", "cairn",
	  "backups/b1/velero-backup.json", { { NULL, NULL } }, 0, NULL,
	  "{\"kind\":\"Backup\",\"apiVersion\":\"cairn.io/v1\"}", 0, NULL, NULL,
	  { { NULL, NULL } } },
	{ "create-multipart-uploads", "POST", "cairn.s3.eu-west-1.amazonaws.com",
	  NULL, "backups/b1/b1.tar.gz", { { "uploads", "" } }, 1, NULL, "", 0,
	  NULL, NULL,
	  { { NULL, NULL } } },
	{ "upload-part", "PUT", "127.0.0.1:9000", "cairn", "backups/b1/b1.tar.gz",
	  { { "uploadId", "VXBsb2FkIElE/+=x~y" }, { "partNumber", "12" } }, 2,
	  NULL, NULL, 1, NULL, NULL,
	  { { NULL, NULL } } },
	{ "list-v2-continuation", "GET", "127.0.0.1:9000", "cairn", NULL,
	  { { "list-type", "2" }, { "prefix", "backups/my backup+1/" },
	  { "continuation-token", "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=" },
	  { "delimiter", "/" } }, 4, NULL, "", 0, NULL, NULL,
	  { { NULL, NULL } } },
	{ "key-percent-encoding", "PUT", "127.0.0.1:9000", "cairn",
	  "dir with space/plus+equals=and&q?h#pct%/\xc3\xbcnic\xc3\xb8" "d\xe6\x97\xa5/~t!*'()$@,;:",
	  { { NULL, NULL } }, 0, NULL, NULL, 1, NULL, NULL,
	  { { NULL, NULL } } },
	{ "session-token-delete-upload", "DELETE", "cairn.s3.amazonaws.com", NULL,
	  "a/b", { { "uploadId", "abc" } }, 1, NULL, "", 0, "FQoGZXIvYXdzEJr//token=",
	  NULL,
	  { { NULL, NULL } } },
	{ "complete-multipart", "POST", "127.0.0.1:9000", "cairn", "k",
	  { { "uploadId", "2~f" } }, 1, NULL,
	  "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>"
	  "<ETag>&quot;abc&quot;</ETag></Part></CompleteMultipartUpload>", 0,
	  NULL, NULL,
	  { { NULL, NULL } } },
	/* storage-side encryption: the headers store_s3.c sends, all signed */
	{ "sse-s3-put", "PUT", "127.0.0.1:9000", "cairn", "backups/b1/b1-logs.gz",
	  { { NULL, NULL } }, 0, NULL, "log", 0, NULL, NULL,
	  { { "x-amz-server-side-encryption", "AES256" } } },
	{ "sse-kms-create-multipart", "POST", "cairn.s3.eu-west-1.amazonaws.com",
	  NULL, "backups/b1/b1.tar.gz", { { "uploads", "" } }, 1, NULL, "", 0,
	  NULL, NULL, { { "x-amz-server-side-encryption", "aws:kms" },
	  { "x-amz-server-side-encryption-aws-kms-key-id",
	    "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab" } } },
	{ "sse-c-upload-part", "PUT", "127.0.0.1:9000", "cairn", "b/b.tar.gz",
	  { { "uploadId", "u1" }, { "partNumber", "3" } }, 2, NULL, NULL, 1,
	  NULL, NULL, { { "x-amz-server-side-encryption-customer-algorithm", "AES256" },
	  { "x-amz-server-side-encryption-customer-key",
	    "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" },
	  { "x-amz-server-side-encryption-customer-key-md5",
	    "hRasmdxgYDKV3nvbahU1MA==" } } },
	{ "sse-c-ranged-get", "GET", "127.0.0.1:9000", "cairn", "b/b.tar.gz",
	  { { NULL, NULL } }, 0, "bytes=100-", "", 0, NULL, NULL,
	  { { "x-amz-server-side-encryption-customer-algorithm", "AES256" },
	  { "x-amz-server-side-encryption-customer-key",
	    "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" },
	  { "x-amz-server-side-encryption-customer-key-md5",
	    "hRasmdxgYDKV3nvbahU1MA==" } } },
};
#define NCASES (sizeof cases / sizeof cases[0])

static int64_t
case_time(const struct sv_case *c)
{
	return c->published ? T_EXAMPLE : T_FIXED;
}

static const char *
case_region(const struct sv_case *c)
{
	return strstr(c->host, "eu-west-1") ? "eu-west-1" : "us-east-1";
}

/* Sign c with our signer; returns the Authorization value (owned). */
static char *
our_sign(const struct sv_case *c, char **canon_out)
{
	struct sigv4_creds cr = { (char *)AK, (char *)SK, (char *)c->token };
	struct sigv4_header h[10];
	struct sigv4_request rq;
	struct buf uri, auth, canon;
	char amz[17], ph[65];
	size_t nh = 0;

	buf_init(&uri, 8192);
	buf_init(&auth, 8192);
	buf_init(&canon, 65536);
	/* path-style "/bucket[/key]", virtual-hosted "/[key]" */
	if (c->bucket) {
		buf_putc(&uri, '/');
		sigv4_uri_encode(&uri, c->bucket, 0);
	}
	if (c->key) {
		buf_putc(&uri, '/');
		sigv4_uri_encode(&uri, c->key, 1);
	} else if (!c->bucket) {
		buf_putc(&uri, '/');
	}
	sigv4_amz_date(case_time(c), amz);
	if (c->unsigned_payload)
		snprintf(ph, sizeof ph, "%s", SIGV4_UNSIGNED_PAYLOAD);
	else
		sigv4_sha256_hex(c->payload, strlen(c->payload), ph);
	h[nh++] = (struct sigv4_header){ "Host", c->host };
	h[nh++] = (struct sigv4_header){ "X-Amz-Date", amz };
	h[nh++] = (struct sigv4_header){ "x-amz-content-sha256", ph };
	if (c->range)
		h[nh++] = (struct sigv4_header){ "Range", c->range };
	if (c->token)
		h[nh++] = (struct sigv4_header){ "X-Amz-Security-Token", c->token };
	for (size_t i = 0; i < 3 && c->extra[i].name != NULL; i++)
		h[nh++] = c->extra[i];
	rq.method = c->method;
	rq.uri = buf_cstr(&uri);
	rq.params = c->params;
	rq.nparams = c->nparams;
	rq.headers = h;
	rq.nheaders = nh;
	rq.payload_hash = ph;
	if (sigv4_sign(&cr, case_region(c), "s3", case_time(c), &rq, &auth,
	    &canon) < 0) {
		buf_free(&uri);
		buf_free(&canon);
		buf_free(&auth);
		return NULL;
	}
	buf_free(&uri);
	*canon_out = buf_take(&canon, NULL);
	return buf_take(&auth, NULL);
}

/* The botocore request description of c. */
static cJSON *
boto_req(const struct sv_case *c)
{
	cJSON *o = cJSON_CreateObject(), *params = cJSON_CreateArray();
	cJSON *hdrs = cJSON_CreateObject(), *pair;
	char amz[17], ph[65];
	size_t i;

	sigv4_amz_date(case_time(c), amz);
	if (c->unsigned_payload)
		snprintf(ph, sizeof ph, "%s", SIGV4_UNSIGNED_PAYLOAD);
	else
		sigv4_sha256_hex(c->payload, strlen(c->payload), ph);
	cJSON_AddStringToObject(o, "method", c->method);
	cJSON_AddStringToObject(o, "host", c->host);
	cJSON_AddStringToObject(o, "bucket", c->bucket ? c->bucket : "");
	cJSON_AddStringToObject(o, "key", c->key ? c->key : "");
	for (i = 0; i < c->nparams; i++) {
		pair = cJSON_CreateArray();
		cJSON_AddItemToArray(pair, cJSON_CreateString(c->params[i].name));
		cJSON_AddItemToArray(pair, cJSON_CreateString(c->params[i].value));
		cJSON_AddItemToArray(params, pair);
	}
	cJSON_AddItemToObject(o, "params", params);
	cJSON_AddStringToObject(hdrs, "X-Amz-Date", amz);
	if (c->range)
		cJSON_AddStringToObject(hdrs, "Range", c->range);
	if (c->token)
		cJSON_AddStringToObject(hdrs, "X-Amz-Security-Token", c->token);
	for (i = 0; i < 3 && c->extra[i].name != NULL; i++)
		cJSON_AddStringToObject(hdrs, c->extra[i].name, c->extra[i].value);
	cJSON_AddItemToObject(o, "headers", hdrs);
	if (c->unsigned_payload)
		cJSON_AddBoolToObject(o, "unsigned", 1);
	else
		cJSON_AddStringToObject(o, "body", c->payload);
	cJSON_AddStringToObject(o, "region", case_region(c));
	cJSON_AddStringToObject(o, "time", amz);
	cJSON_AddStringToObject(o, "access_key", AK);
	cJSON_AddStringToObject(o, "secret_key", SK);
	if (c->token)
		cJSON_AddStringToObject(o, "token", c->token);
	return o;
}

static cJSON *boto_results;

static void
test_botocore_run(void)
{
	cJSON *all = cJSON_CreateArray();
	char *in_path, *out_path, *cmd, *text;
	FILE *f;
	size_t i, n;
	long sz;

	for (i = 0; i < NCASES; i++)
		cJSON_AddItemToArray(all, boto_req(&cases[i]));
	in_path = xasprintf("%s/sigv4-cases.json", UNIT_TMPDIR());
	out_path = xasprintf("%s/sigv4-botocore.json", UNIT_TMPDIR());
	f = fopen(in_path, "w");
	REQUIRE(f != NULL);
	text = cJSON_PrintUnformatted(all);
	fputs(text, f);
	fclose(f);
	free(text);
	cJSON_Delete(all);
	cmd = xasprintf("for py in python3 /usr/bin/python3; do "
	    "\"$py\" '%s/tests/lib/sigv4_botocore.py' <'%s' >'%s' && exit 0; "
	    "done; exit 1", getenv("CAIRN_SRCDIR") ? getenv("CAIRN_SRCDIR") :
	    CAIRN_SRCDIR, in_path, out_path);
	CHECK(system(cmd) == 0);
	free(cmd);
	f = fopen(out_path, "r");
	free(in_path);
	free(out_path);
	REQUIRE(f != NULL);
	fseek(f, 0, SEEK_END);
	sz = ftell(f);
	fseek(f, 0, SEEK_SET);
	text = xmalloc((size_t)sz + 1);
	n = fread(text, 1, (size_t)sz, f);
	text[n] = '\0';
	fclose(f);
	boto_results = cJSON_Parse(text);
	free(text);
	REQUIRE(boto_results != NULL);
	CHECK_INT(cJSON_GetArraySize(boto_results), NCASES);
}

static void
check_case(size_t i)
{
	const struct sv_case *c = &cases[i];
	cJSON *r = boto_results ? cJSON_GetArrayItem(boto_results, (int)i) : NULL;
	char *canon = NULL, *ours = our_sign(c, &canon), want_sig[80];

	REQUIRE(ours != NULL);
	if (r == NULL) {
		UNIT_FAIL_AT("no botocore result (see test_botocore_run)");
	} else {
		if (strcmp(ours, json_str(r, "authorization")) != 0) {
			printf("# %s: ours:\n%s\n# botocore canonical request:\n%s\n",
			    c->name, canon, json_str(r, "canonical"));
		}
		CHECK_STR(ours, json_str(r, "authorization"));
	}
	if (c->published != NULL) {
		snprintf(want_sig, sizeof want_sig, "Signature=%s", c->published);
		CHECK(strstr(ours, want_sig) != NULL);
	}
	free(ours);
	free(canon);
}

#define CASE_TEST(n, i) static void n(void) { check_case(i); }
CASE_TEST(test_aws_example_get_object, 0)
CASE_TEST(test_aws_example_list_objects, 1)
CASE_TEST(test_plain_get, 2)
CASE_TEST(test_put_payload_hash, 3)
CASE_TEST(test_uploads, 4)
CASE_TEST(test_upload_part_query, 5)
CASE_TEST(test_list_v2_continuation, 6)
CASE_TEST(test_key_percent_encoding, 7)
CASE_TEST(test_session_token_delete, 8)
CASE_TEST(test_complete_multipart, 9)

/* SSE headers: botocore signs them all; so must we, and they must show. */
static void
check_sse_case(size_t i)
{
	char *canon = NULL, *ours = our_sign(&cases[i], &canon);

	check_case(i);
	REQUIRE(ours != NULL);
	for (size_t k = 0; k < 3 && cases[i].extra[k].name != NULL; k++)
		CHECK(strstr(ours, cases[i].extra[k].name) != NULL);
	free(ours);
	free(canon);
}
#define SSE_TEST(n, i) static void n(void) { check_sse_case(i); }
SSE_TEST(test_sse_s3_put, 10)
SSE_TEST(test_sse_kms_create_multipart, 11)
SSE_TEST(test_sse_c_upload_part, 12)
SSE_TEST(test_sse_c_ranged_get, 13)

static void
test_encoding(void)
{
	struct buf b;
	struct sigv4_param p[] = { { "uploads", "" }, { "b", "2" }, { "a", "x y/z" },
	    { "A", "~" } };

	buf_init(&b, 1024);
	sigv4_uri_encode(&b, "a b/c+d=e~f.g_h-i\xc3\xa9", 1);
	CHECK_STR(buf_cstr(&b), "a%20b/c%2Bd%3De~f.g_h-i%C3%A9");
	buf_reset(&b);
	sigv4_uri_encode(&b, "a/b", 0);
	CHECK_STR(buf_cstr(&b), "a%2Fb");
	buf_reset(&b);
	sigv4_canonical_query(&b, p, 4);
	CHECK_STR(buf_cstr(&b), "A=~&a=x%20y%2Fz&b=2&uploads=");
	buf_free(&b);
}

static void
test_creds_file(void)
{
	struct sigv4_creds c;
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *text =
	    "# comment\n[default]\naws_access_key_id = AK1\n"
	    "aws_secret_access_key=SK1 \n\n[profile prod]\r\n"
	    "aws_access_key_id = AK2\naws_secret_access_key = SK2\n"
	    "aws_session_token = TOK\n[empty]\nregion = x\n";

	REQUIRE(sigv4_creds_parse(text, NULL, "t", &c, &err) == 0);
	CHECK_STR(c.access_key, "AK1");
	CHECK_STR(c.secret_key, "SK1");
	CHECK(c.session_token == NULL);
	sigv4_creds_free(&c);
	REQUIRE(sigv4_creds_parse(text, "prod", "t", &c, &err) == 0);
	CHECK_STR(c.access_key, "AK2");
	CHECK_STR(c.session_token, "TOK");
	sigv4_creds_free(&c);
	CHECK(sigv4_creds_parse(text, "nope", "credentials file /x", &c, &err) ==
	    CAIRN_EINVAL);
	CHECK_STR(err.msg, "credentials file /x: no profile [nope]");
	CHECK(sigv4_creds_parse(text, "empty", "f", &c, &err) == CAIRN_EINVAL);
	CHECK_STR(err.msg, "f: profile [empty] has no aws_access_key_id");
	CHECK(sigv4_creds_parse("garbage\n", NULL, "f", &c, &err) == CAIRN_EINVAL);
	CHECK_STR(err.msg, "f: line 1: expected \"key = value\"");
	CHECK(sigv4_creds_parse("[default\n", NULL, "f", &c, &err) == CAIRN_EINVAL);
}

int
main(void)
{
	RUN(test_encoding);
	RUN(test_creds_file);
	RUN(test_botocore_run);
	RUN(test_aws_example_get_object);
	RUN(test_aws_example_list_objects);
	RUN(test_plain_get);
	RUN(test_put_payload_hash);
	RUN(test_uploads);
	RUN(test_upload_part_query);
	RUN(test_list_v2_continuation);
	RUN(test_key_percent_encoding);
	RUN(test_session_token_delete);
	RUN(test_complete_multipart);
	RUN(test_sse_s3_put);
	RUN(test_sse_kms_create_multipart);
	RUN(test_sse_c_upload_part);
	RUN(test_sse_c_ranged_get);
	cJSON_Delete(boto_results);
	return unit_done();
}
