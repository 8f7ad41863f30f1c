/*
 * fuzz_s3xml.c: libFuzzer target for storage/s3xml.c, the reader of S3's
 * XML replies (outside input). Built only with --enable-fuzzing:
 *   ./configure CC=clang --enable-fuzzing && make tests/fuzz/fuzz_s3xml
 *   tests/fuzz/fuzz_s3xml -max_len=65536
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>

#include "storage/s3xml.h"

static int
any_object(void *arg, const struct s3xml_object *o)
{
	(void)arg;
	return o->key[0] == '\x01';
}

static int
any_part(void *arg, const struct s3xml_part *p)
{
	(void)arg;
	return p->number == 9999;
}

static int
any_delete_error(void *arg, const char *key, const char *code, const char *msg)
{
	(void)arg;
	(void)code;
	(void)msg;
	return key[0] == '\x01';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *d = (const char *)data;
	struct s3xml_error xe;
	char etag[80], *s = NULL;
	int t, m;

	(void)s3xml_error(d, size, &xe);
	if (s3xml_upload_id(d, size, &s, NULL) == 0)
		free(s);
	(void)s3xml_complete_etag(d, size, etag, sizeof etag, NULL);
	s = NULL;
	if (s3xml_list_objects(d, size, any_object, NULL, &t, &s, NULL) == 0)
		free(s);
	(void)s3xml_list_parts(d, size, any_part, NULL, &t, &m, NULL);
	(void)s3xml_delete_result(d, size, any_delete_error, NULL, NULL, NULL);
	return 0;
}
