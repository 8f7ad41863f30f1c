/*
 * test_storage.c: unit tests of storage/: the S3 XML reader on S3's reply
 * shapes and on hostile input, the key rules, Velero's layout, the
 * BackupStorageLocation mapping, and fs-backend details a user relies on
 * (atomic publish leaves no temp files, parts survive a reopen, progress).
 * The behaviour shared by both backends is tested end to end in
 * tests/integration/test_storage_backends.py.
 */
#include "config.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/jsonutil.h"
#include "base/mem.h"
#include "storage/layout.h"
#include "storage/location.h"
#include "storage/s3xml.h"
#include "storage/store.h"
#include "tests/unit/unit.h"

/* ---- XML -------------------------------------------------------------- */

/* ListObjectsV2 reply as S3 documents it (entities, namespace, decl). */
static const char list_xml[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
    "<Name>bucket</Name><Prefix>backups/</Prefix><KeyCount>3</KeyCount>"
    "<MaxKeys>3</MaxKeys><Delimiter>/</Delimiter><IsTruncated>true</IsTruncated>"
    "<Contents><Key>backups/a&amp;b &lt;c&gt; &#233;&#x65E5;</Key>"
    "<LastModified>2026-12-02T12:00:00.000Z</LastModified>"
    "<ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag>"
    "<Size>434234</Size><StorageClass>STANDARD</StorageClass></Contents>"
    "<!-- a comment -->"
    "<CommonPrefixes><Prefix>backups/b1/</Prefix></CommonPrefixes>"
    "<CommonPrefixes><Prefix><![CDATA[backups/<b2>/]]></Prefix></CommonPrefixes>"
    "<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>"
    "</ListBucketResult>";

struct rows {
	char text[2048];
};

static int
row_cb(void *arg, const struct s3xml_object *o)
{
	struct rows *r = arg;
	size_t n = strlen(r->text);

	snprintf(r->text + n, sizeof r->text - n, "%s|%s|%llu|%s|%s\n",
	    o->is_prefix ? "P" : "K", o->key, (unsigned long long)o->size,
	    o->etag, o->last_modified);
	return 0;
}

static void
test_xml_list_objects(void)
{
	struct rows r = { "" };
	char *token = NULL;
	int truncated = 0;

	REQUIRE(s3xml_list_objects(list_xml, strlen(list_xml), row_cb, &r,
	    &truncated, &token, NULL) == 0);
	CHECK_STR(r.text,
	    "K|backups/a&b <c> \xc3\xa9\xe6\x97\xa5|434234|9b2cf535f27731c974343645a3985328|2026-12-02T12:00:00.000Z\n"
	    "P|backups/b1/|0||\n"
	    "P|backups/<b2>/|0||\n");
	CHECK_INT(truncated, 1);
	CHECK_STR(token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
	free(token);
}

static int
part_cb(void *arg, const struct s3xml_part *p)
{
	struct rows *r = arg;
	size_t n = strlen(r->text);

	snprintf(r->text + n, sizeof r->text - n, "%d %s %llu\n", p->number,
	    p->etag, (unsigned long long)p->size);
	return 0;
}

static void
test_xml_parts_upload_complete_error(void)
{
	/* AWS's ListParts example, shortened */
	static const char parts[] =
	    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListPartsResult "
	    "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Bucket>example-bucket"
	    "</Bucket><Key>example-object</Key><UploadId>XXBsb2FkIElEIGZvciBlbHZpbmcncyVcdS1tb3ZpZS5tMnRzEEEwbG9hZA"
	    "</UploadId><PartNumberMarker>1</PartNumberMarker><NextPartNumberMarker>3"
	    "</NextPartNumberMarker><MaxParts>2</MaxParts><IsTruncated>true</IsTruncated>"
	    "<Part><PartNumber>2</PartNumber><LastModified>2010-11-10T20:48:34.000Z"
	    "</LastModified><ETag>\"7778aef83f66abc1fa1e8477f296d394\"</ETag><Size>10485760"
	    "</Size></Part><Part><PartNumber>3</PartNumber><LastModified>"
	    "2010-11-10T20:48:33.000Z</LastModified><ETag>\"aaaa18db4cc2f85cedef654fccc4a4x8\""
	    "</ETag><Size>10485760</Size></Part></ListPartsResult>";
	static const char init[] =
	    "<InitiateMultipartUploadResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
	    "<Bucket>b</Bucket><Key>k</Key><UploadId>VXBsb2FkIElE&#43;x</UploadId>"
	    "</InitiateMultipartUploadResult>";
	static const char complete[] =
	    "<CompleteMultipartUploadResult><Location>http://x/b/k</Location>"
	    "<Bucket>b</Bucket><Key>k</Key><ETag>\"3858f62230ac3c915f300c664312c11f-9\""
	    "</ETag></CompleteMultipartUploadResult>";
	static const char error[] =
	    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchKey</Code>"
	    "<Message>The resource you requested does not exist</Message>"
	    "<Resource>/mybucket/myfoto.jpg</Resource><RequestId>4442587FB7D0A2F9"
	    "</RequestId></Error>";
	struct rows r = { "" };
	struct s3xml_error xe;
	char etag[80], *id = NULL;
	int truncated = 0, marker = 0;

	REQUIRE(s3xml_list_parts(parts, strlen(parts), part_cb, &r, &truncated,
	    &marker, NULL) == 0);
	CHECK_STR(r.text, "2 7778aef83f66abc1fa1e8477f296d394 10485760\n"
	    "3 aaaa18db4cc2f85cedef654fccc4a4x8 10485760\n");
	CHECK_INT(truncated, 1);
	CHECK_INT(marker, 3);
	REQUIRE(s3xml_upload_id(init, strlen(init), &id, NULL) == 0);
	CHECK_STR(id, "VXBsb2FkIElE+x");
	free(id);
	REQUIRE(s3xml_complete_etag(complete, strlen(complete), etag, sizeof etag,
	    NULL) == 0);
	CHECK_STR(etag, "3858f62230ac3c915f300c664312c11f-9");
	CHECK_INT(s3xml_error(error, strlen(error), &xe), 1);
	CHECK_STR(xe.code, "NoSuchKey");
	CHECK_STR(xe.message, "The resource you requested does not exist");
	CHECK_INT(s3xml_error(complete, strlen(complete), &xe), 0);
	CHECK(s3xml_upload_id(complete, strlen(complete), &id, NULL) == CAIRN_EPROTO);
}

static int
del_err_cb(void *arg, const char *key, const char *code, const char *message)
{
	struct rows *r = arg;
	size_t n = strlen(r->text);

	snprintf(r->text + n, sizeof r->text - n, "%s|%s|%s\n", key, code, message);
	return 0;
}

static void
test_xml_delete_result(void)
{
	static const char doc[] =
	    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<DeleteResult "
	    "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Deleted><Key>a</Key>"
	    "</Deleted><Error><Key>b&amp;c</Key><Code>AccessDenied</Code><Message>"
	    "Access Denied</Message></Error><Deleted><Key>d</Key></Deleted>"
	    "</DeleteResult>";
	struct rows r = { "" };
	size_t deleted = 0;

	REQUIRE(s3xml_delete_result(doc, strlen(doc), del_err_cb, &r, &deleted,
	    NULL) == 0);
	CHECK_STR(r.text, "b&c|AccessDenied|Access Denied\n");
	CHECK_INT(deleted, 2);
}

static int
count_cb(void *arg, enum s3xml_event ev, const char *path, const char *text,
    size_t len)
{
	(void)ev;
	(void)path;
	(void)text;
	(void)len;
	(*(int *)arg)++;
	return 0;
}

static void
test_xml_hostile(void)
{
	static const char *const bad[] = {
		"", "   ", "text", "<a>", "<a></b>", "<a><b></a></b>", "</a>",
		"<a>&bogus;</a>", "<a>&#0;</a>", "<a>&#xD800;</a>", "<a>&#x110000;</a>",
		"<a>&#12345678901;</a>", "<a>&#;</a>", "<a>&amp</a>",
		"<!DOCTYPE a [<!ENTITY x \"y\">]><a>&x;</a>", "<a/><b/>",
		"<a>x</a>trailing", "<a attr=\"unterminated></a>", "<a><!-- x </a>",
		"<a><![CDATA[x</a>", "<?xml ", "<a><</a>", "<>x</>",
	};
	struct buf deep;
	struct cairn_err err = CAIRN_ERR_INIT;
	size_t i;
	int n = 0;
	char *big;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		if (s3xml_parse(bad[i], strlen(bad[i]), count_cb, &n, &err) !=
		    CAIRN_EPROTO) {
			printf("# accepted: %s\n", bad[i]);
			UNIT_FAIL_AT("malformed XML accepted");
		}
	}
	/* NUL inside */
	CHECK(s3xml_parse("<a>x\0y</a>", 10, count_cb, &n, NULL) == CAIRN_EPROTO);
	/* nesting past the cap */
	buf_init(&deep, 1 << 20);
	for (i = 0; i < S3XML_MAX_DEPTH + 1; i++)
		buf_puts(&deep, "<a>");
	for (i = 0; i < S3XML_MAX_DEPTH + 1; i++)
		buf_puts(&deep, "</a>");
	CHECK(s3xml_parse(deep.data, deep.len, count_cb, &n, &err) == CAIRN_EPROTO);
	CHECK(strstr(err.msg, "nested too deep") != NULL);
	buf_free(&deep);
	/* text past its cap */
	big = xmalloc(S3XML_MAX_TEXT + 64);
	memcpy(big, "<a>", 3);
	memset(big + 3, 'x', S3XML_MAX_TEXT + 1);
	memcpy(big + 3 + S3XML_MAX_TEXT + 1, "</a>", 4);
	CHECK(s3xml_parse(big, S3XML_MAX_TEXT + 8, count_cb, &n, &err) ==
	    CAIRN_EPROTO);
	free(big);
	/* documents past CAIRN_CAP_S3_XML are refused before reading */
	CHECK(s3xml_parse("<a/>", (size_t)CAIRN_CAP_S3_XML + 1, count_cb, &n,
	    &err) == CAIRN_ETOOBIG);
	/* fine: self-closing, attributes with '>' in quotes, BOM */
	CHECK(s3xml_parse("\xEF\xBB\xBF<a x='>' y=\"/\"><b/></a>", 26, count_cb, &n,
	    NULL) == 0);
}

/* ---- keys and layout -------------------------------------------------- */

static void
test_key_rules(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	char longkey[STORE_KEY_MAX + 2];

	CHECK(store_key_check("backups/b1/b1.tar.gz", NULL) == 0);
	CHECK(store_key_check("a b/+=/\xc3\xa9", NULL) == 0);
	CHECK(store_key_check("..a/b..", NULL) == 0);
	CHECK(store_key_check("", &err) == CAIRN_EINVAL);
	CHECK(store_key_check(NULL, &err) == CAIRN_EINVAL);
	CHECK(store_key_check("/abs", &err) == CAIRN_EINVAL);
	CHECK(store_key_check("a/../b", &err) == CAIRN_EINVAL);
	CHECK_STR(err.msg, "object key \"a/../b\" has a \"..\" segment");
	CHECK(store_key_check("..", &err) == CAIRN_EINVAL);
	CHECK(store_key_check("a/.", &err) == CAIRN_EINVAL);
	CHECK(store_key_check("a//b", &err) == CAIRN_EINVAL);
	CHECK(store_key_check("a/", &err) == CAIRN_EINVAL);
	memset(longkey, 'k', sizeof longkey - 1);
	longkey[sizeof longkey - 1] = '\0';
	CHECK(store_key_check(longkey, &err) == CAIRN_EINVAL);
	longkey[STORE_KEY_MAX] = '\0';
	CHECK(store_key_check(longkey, &err) == 0);
}

static void
test_layout_keys(void)
{
	char *k;

#define KEY_IS(expr, want) do { k = (expr); CHECK_STR(k, want); free(k); } while (0)
	KEY_IS(layout_backup_key(NULL, "b1", LAYOUT_BACKUP_METADATA),
	    "backups/b1/velero-backup.json");
	KEY_IS(layout_backup_key("", "b1", LAYOUT_BACKUP_TARBALL),
	    "backups/b1/b1.tar.gz");
	KEY_IS(layout_backup_key("cluster-a/", "b1", LAYOUT_BACKUP_LOGS),
	    "cluster-a/backups/b1/b1-logs.gz");
	KEY_IS(layout_backup_key("p/q", "b1", LAYOUT_BACKUP_RESOURCE_LIST),
	    "p/q/backups/b1/b1-resource-list.json.gz");
	KEY_IS(layout_backup_key(NULL, "b1", LAYOUT_BACKUP_RESULTS),
	    "backups/b1/b1-results.gz");
	KEY_IS(layout_backup_key(NULL, "b1", LAYOUT_BACKUP_VOLUMESNAPSHOTS),
	    "backups/b1/b1-volumesnapshots.json.gz");
	KEY_IS(layout_backup_key(NULL, "b1", LAYOUT_BACKUP_VOLUMEPLUGINBACKUPS),
	    "backups/b1/b1-volumepluginbackups.json.gz");
	KEY_IS(layout_backup_key(NULL, "b1", LAYOUT_BACKUP_PODVOLUMEBACKUPS),
	    "backups/b1/b1-podvolumebackups.json.gz");
	KEY_IS(layout_restore_key(NULL, "r1", LAYOUT_RESTORE_LOGS),
	    "restores/r1/restore-r1-logs.gz");
	KEY_IS(layout_restore_key("x", "r1", LAYOUT_RESTORE_RESULTS),
	    "x/restores/r1/restore-r1-results.gz");
	KEY_IS(layout_restore_key(NULL, "r1", LAYOUT_RESTORE_RESOURCE_LIST),
	    "restores/r1/restore-r1-resource-list.json.gz");
	KEY_IS(layout_backups_prefix("x/"), "x/backups/");
	KEY_IS(layout_backup_dir(NULL, "b1"), "backups/b1/");
	CHECK(layout_backup_key(NULL, "../b", LAYOUT_BACKUP_TARBALL) == NULL);
	CHECK(layout_backup_key(NULL, "a/b", LAYOUT_BACKUP_TARBALL) == NULL);
	CHECK(layout_backup_key(NULL, "", LAYOUT_BACKUP_TARBALL) == NULL);
	CHECK(layout_restore_key(NULL, "..", LAYOUT_RESTORE_LOGS) == NULL);
#undef KEY_IS
}

/* ---- fs backend ------------------------------------------------------- */

static char *
fresh_dir(const char *name)
{
	char *d = xasprintf("%s/%s", UNIT_TMPDIR(), name);
	char *cmd = xasprintf("rm -rf '%s'", d);

	if (system(cmd) != 0)
		fprintf(stderr, "rm failed\n");
	free(cmd);
	return d;
}

static int
collect_names(void *arg, const char *name)
{
	struct rows *r = arg;
	size_t n = strlen(r->text);

	snprintf(r->text + n, sizeof r->text - n, "%s,", name);
	return 0;
}

static void
test_layout_list_backups(void)
{
	char *root = fresh_dir("layout"), *k;
	struct store *s = NULL;
	struct rows r = { "" };
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *names[] = { "b2", "b1", "b10" };
	size_t i;

	REQUIRE(store_open_fs(root, 1, &s, &err) == 0);
	for (i = 0; i < 3; i++) {
		k = layout_backup_key("site-a", names[i], LAYOUT_BACKUP_METADATA);
		CHECK(store_put_mem(s, k, "{}", 2, &err) == 0);
		free(k);
	}
	CHECK(store_put_mem(s, "site-a/backups/stray-file", "x", 1, &err) == 0);
	CHECK(store_put_mem(s, "site-b/backups/other/velero-backup.json", "x", 1,
	    &err) == 0);
	CHECK(layout_list_backups(s, "site-a", collect_names, &r, &err) == 0);
	CHECK_STR(r.text, "b1,b10,b2,");
	store_free(s);
	free(root);
}

/* Count entries in dir whose name starts with prefix. */
static int
count_prefixed(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (d == NULL)
		return -1;
	for (;;) {
		de = readdir(d);
		if (de == NULL)
			break;
		if (strncmp(de->d_name, prefix, strlen(prefix)) == 0)
			n++;
	}
	closedir(d);
	return n;
}

static ssize_t
failing_read(void *arg, void *buf, size_t n)
{
	int *calls = arg;

	if ((*calls)++ > 0)
		return -1;	/* the producer fails after some bytes */
	memset(buf, 'a', n < 100 ? n : 100);
	return n < 100 ? (ssize_t)n : 100;
}

static void
progress_cb(void *arg, uint64_t done, int64_t total)
{
	uint64_t *last = arg;

	(void)total;
	*last = done;
}

static void
test_fs_atomic_and_progress(void)
{
	char *root = fresh_dir("atomic"), *data = NULL, *dir;
	struct store *s = NULL;
	struct store_src src;
	struct cairn_err err = CAIRN_ERR_INIT;
	uint64_t last = 0;
	struct store_progress prog = { progress_cb, &last };
	char big[300000];
	size_t len = 0;
	int calls = 0;
	struct stat st;

	REQUIRE(store_open_fs(root, 1, &s, &err) == 0);
	CHECK(store_put_mem(s, "d/obj", "old", 3, &err) == 0);
	/* a failing producer leaves the old object and no temp file */
	memset(&src, 0, sizeof src);
	src.read = failing_read;
	src.arg = &calls;
	src.len = -1;
	src.p_fd = -1;
	CHECK(store_put(s, "d/obj", &src, NULL, NULL, &err) == CAIRN_ECANCELED);
	CHECK(strstr(err.msg, "d/obj") != NULL);
	REQUIRE(store_get_mem(s, "d/obj", 100, &data, &len, &err) == 0);
	CHECK_STR(data, "old");
	free(data);
	dir = xasprintf("%s/d", root);
	CHECK_INT(count_prefixed(dir, ".cairn-tmp-"), 0);
	/* progress reports every byte */
	memset(big, 'z', sizeof big);
	store_src_mem(&src, big, sizeof big);
	CHECK(store_put(s, "d/big", &src, NULL, &prog, &err) == 0);
	CHECK_INT(last, sizeof big);
	last = 0;
	CHECK(store_get(s, "d/big", 0, -1, NULL, NULL, &prog, &err) ==
	    CAIRN_EINVAL);	/* no sink */
	/* files are private */
	free(dir);
	dir = xasprintf("%s/d/big", root);
	REQUIRE(stat(dir, &st) == 0);
	CHECK_INT(st.st_mode & 0777, 0600);
	/* get_mem cap */
	CHECK(store_get_mem(s, "d/big", 1000, &data, &len, &err) == CAIRN_ETOOBIG);
	/* reserved names */
	CHECK(store_put_mem(s, ".cairn-uploads/x", "x", 1, &err) == CAIRN_EINVAL);
	CHECK(store_put_mem(s, "a/.cairn-tmp-1", "x", 1, &err) == CAIRN_EINVAL);
	/* deleting the last object removes the empty directories */
	CHECK(store_delete(s, "d/obj", &err) == 0);
	CHECK(store_delete(s, "d/big", &err) == 0);
	free(dir);
	dir = xasprintf("%s/d", root);
	CHECK(stat(dir, &st) < 0);
	CHECK(store_delete_prefix(s, "", NULL, &err) == CAIRN_EINVAL);
	free(dir);
	store_free(s);
	free(root);
}

static int
refuse_sink(void *arg, const void *p, size_t n)
{
	(void)p;
	*(size_t *)arg += n;
	return -1;
}

/* Gzip files as Velero writes them: one or more members, read whole. */
static void
test_get_gunzip(void)
{
	char *root = fresh_dir("gunzip"), *data = NULL, *gz = NULL;
	struct store *s = NULL;
	struct cairn_err err = CAIRN_ERR_INIT;
	size_t len = 0, glen = 0, seen = 0;
	struct buf two;

	REQUIRE(store_open_fs(root, 1, &s, &err) == 0);
	REQUIRE(store_put_gzip(s, "a.gz", "hello ", 6, 6, &err) == 0);
	REQUIRE(store_get_mem(s, "a.gz", 1000, &gz, &glen, &err) == 0);
	/* two members back to back read as one text */
	buf_init(&two, 2 * glen);
	buf_append(&two, gz, glen);
	buf_append(&two, gz, glen);
	REQUIRE(store_put_mem(s, "two.gz", two.data, two.len, &err) == 0);
	REQUIRE(store_get_gunzip(s, "two.gz", 100, &data, &len, &err) == 0);
	CHECK_STR(data, "hello hello ");
	CHECK_INT(len, 12);
	free(data);
	data = NULL;
	/* past the cap: too big, nothing returned */
	CHECK(store_get_gunzip(s, "two.gz", 8, &data, &len, &err) ==
	    CAIRN_ETOOBIG);
	CHECK(data == NULL);
	CHECK(strstr(err.msg, "larger than 8 bytes") != NULL);
	/* a cut member and plain text are not whole gzip data */
	REQUIRE(store_put_mem(s, "cut.gz", gz, glen - 3, &err) == 0);
	CHECK(store_get_gunzip(s, "cut.gz", 100, &data, &len, &err) ==
	    CAIRN_EPROTO);
	CHECK(strstr(err.msg, "not whole gzip data") != NULL);
	REQUIRE(store_put_mem(s, "plain.gz", "hello", 5, &err) == 0);
	CHECK(store_get_gunzip(s, "plain.gz", 100, &data, &len, &err) ==
	    CAIRN_EPROTO);
	/* a sink that refuses stops the read */
	CHECK(store_get_gunzip_to(s, "two.gz", refuse_sink, &seen, &err) ==
	    CAIRN_ECANCELED);
	CHECK_INT(seen, 6);
	CHECK(store_get_gunzip(s, "none.gz", 100, &data, &len, &err) ==
	    CAIRN_ENOTFOUND);
	buf_free(&two);
	free(gz);
	store_free(s);
	free(root);
}

static int
parts_collect(void *arg, const struct store_part *p)
{
	struct rows *r = arg;
	size_t n = strlen(r->text);

	snprintf(r->text + n, sizeof r->text - n, "%d:%llu,", p->number,
	    (unsigned long long)p->size);
	return 0;
}

static void
test_fs_multipart_survives_reopen(void)
{
	char *root = fresh_dir("mpu"), *id = NULL, *data = NULL;
	struct store *s = NULL;
	struct store_src src;
	struct store_part parts[2];
	struct cairn_err err = CAIRN_ERR_INIT;
	struct rows r = { "" };
	size_t len;

	REQUIRE(store_open_fs(root, 1, &s, &err) == 0);
	REQUIRE(store_mpu_create(s, "obj", &id, &err) == 0);
	memset(parts, 0, sizeof parts);
	store_src_mem(&src, "hello ", 6);
	CHECK(store_mpu_put_part(s, "obj", id, 1, &src, parts[0].etag, NULL, &err) == 0);
	parts[0].number = 1;
	store_free(s);	/* "the process restarts" */
	s = NULL;
	REQUIRE(store_open_fs(root, 0, &s, &err) == 0);
	CHECK(store_mpu_list_parts(s, "obj", id, parts_collect, &r, &err) == 0);
	CHECK_STR(r.text, "1:6,");
	CHECK(store_mpu_list_parts(s, "other-key", id, parts_collect, &r, &err) ==
	    CAIRN_ENOTFOUND);
	CHECK(store_mpu_list_parts(s, "obj", "../../etc", parts_collect, &r, &err) ==
	    CAIRN_ENOTFOUND);
	store_src_mem(&src, "world", 5);
	CHECK(store_mpu_put_part(s, "obj", id, 2, &src, parts[1].etag, NULL, &err) == 0);
	parts[1].number = 2;
	/* a wrong ETag is refused */
	parts[0].etag[0] = parts[0].etag[0] == '0' ? '1' : '0';
	CHECK(store_mpu_complete(s, "obj", id, parts, 2, NULL, &err) == CAIRN_EINVAL);
	CHECK(strstr(err.msg, "part 1") != NULL);
	parts[0].etag[0] = '\0';
	r.text[0] = '\0';
	store_src_mem(&src, "hello ", 6);
	CHECK(store_mpu_put_part(s, "obj", id, 1, &src, parts[0].etag, NULL, &err) == 0);
	CHECK(store_mpu_complete(s, "obj", id, parts, 2, NULL, &err) == 0);
	REQUIRE(store_get_mem(s, "obj", 100, &data, &len, &err) == 0);
	CHECK_STR(data, "hello world");
	CHECK(store_mpu_abort(s, "obj", id, &err) == CAIRN_ENOTFOUND);
	free(data);
	free(id);
	store_free(s);
	free(root);
}

/*
 * One part is published by a hard link, not a copy: same bytes and ETag,
 * and the upload is gone; the part's inode becomes the object's.
 */
static void
test_fs_single_part_complete_links(void)
{
	char *root = fresh_dir("mpu1"), *id = NULL, *data = NULL, *ppath;
	struct store *s = NULL;
	struct store_src src;
	struct store_part part;
	struct store_stat st;
	struct stat pst, ost;
	struct cairn_err err = CAIRN_ERR_INIT;
	char etag[STORE_ETAG_MAX] = "";
	size_t len;

	REQUIRE(store_open_fs(root, 1, &s, &err) == 0);
	REQUIRE(store_mpu_create(s, "a/obj.tar.gz", &id, &err) == 0);
	memset(&part, 0, sizeof part);
	part.number = 1;
	store_src_mem(&src, "the only part", 13);
	REQUIRE(store_mpu_put_part(s, "a/obj.tar.gz", id, 1, &src, part.etag,
	    NULL, &err) == 0);
	ppath = xasprintf("%s/.cairn-uploads/%s/part-00001", root, id);
	REQUIRE(stat(ppath, &pst) == 0);
	CHECK(store_mpu_complete(s, "a/obj.tar.gz", id, &part, 1, etag,
	    &err) == 0);
	CHECK_STR(etag, part.etag);
	REQUIRE(store_get_mem(s, "a/obj.tar.gz", 100, &data, &len, &err) == 0);
	CHECK_STR(data, "the only part");
	CHECK(store_head(s, "a/obj.tar.gz", &st, &err) == 0);
	CHECK_STR(st.etag, part.etag);
	free(ppath);
	ppath = xasprintf("%s/a/obj.tar.gz", root);
	REQUIRE(stat(ppath, &ost) == 0);
	CHECK(ost.st_ino == pst.st_ino);	/* linked, not copied */
	CHECK(ost.st_nlink == 1);		/* the upload's link is gone */
	CHECK(store_mpu_abort(s, "a/obj.tar.gz", id, &err) == CAIRN_ENOTFOUND);
	free(ppath);
	free(data);
	free(id);
	store_free(s);
	free(root);
}

static int
list_keys(void *arg, const struct store_entry *e)
{
	struct rows *r = arg;
	size_t n = strlen(r->text);

	snprintf(r->text + n, sizeof r->text - n, "%s,", e->key);
	return 0;
}

/*
 * A fifo or a symlink planted at a key is refused with an error that
 * names the key, and never blocks the reader (a blocking open() of a fifo
 * with no writer waits forever: alarm() turns that into a failure).
 */
static void
test_fs_special_files(void)
{
	char *root = fresh_dir("special"), *path, *data = NULL;
	struct store *s = NULL;
	struct store_stat st;
	struct rows r = { "" };
	struct cairn_err err = CAIRN_ERR_INIT;
	size_t len = 0;

	REQUIRE(store_open_fs(root, 1, &s, &err) == 0);
	CHECK(store_put_mem(s, "k/real", "data", 4, &err) == 0);
	path = xasprintf("%s/k/fifo", root);
	REQUIRE(mkfifo(path, 0600) == 0);
	free(path);
	path = xasprintf("%s/k/link", root);
	REQUIRE(symlink("real", path) == 0);
	free(path);
	alarm(20);
	CHECK(store_get_mem(s, "k/fifo", 100, &data, &len, &err) == CAIRN_EINVAL);
	CHECK(strstr(err.msg, "\"k/fifo\" is a fifo") != NULL);
	CHECK(store_head(s, "k/fifo", &st, &err) == CAIRN_EINVAL);
	CHECK(store_get_mem(s, "k/link", 100, &data, &len, &err) == CAIRN_EINVAL);
	CHECK(strstr(err.msg, "\"k/link\" is a symlink") != NULL);
	/* a directory is still "no object" (a prefix is not an object) */
	CHECK(store_get_mem(s, "k", 100, &data, &len, &err) == CAIRN_ENOTFOUND);
	/* listing shows the regular file only */
	CHECK(store_list(s, "k/", NULL, list_keys, &r, &err) == 0);
	CHECK_STR(r.text, "k/real,");
	/* a put publishes over the fifo; the key reads back as a file */
	CHECK(store_put_mem(s, "k/fifo", "now a file", 10, &err) == 0);
	REQUIRE(store_get_mem(s, "k/fifo", 100, &data, &len, &err) == 0);
	CHECK_STR(data, "now a file");
	alarm(0);
	free(data);
	store_free(s);
	free(root);
}

/* ---- BackupStorageLocation -------------------------------------------- */

static int
open_bsl(const char *json, const char *creds, struct store **s, char **prefix,
    struct cairn_err *err)
{
	cJSON *o = cJSON_Parse(json);
	int rc;

	if (o == NULL)
		return -100;
	rc = location_open(o, creds, s, prefix, err);
	cJSON_Delete(o);
	return rc;
}

static void
test_location(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct store *s = NULL;
	char *prefix = NULL, *json, *root = fresh_dir("bsl");
	const char *name, *key;
	cJSON *o;

	json = xasprintf("{\"apiVersion\":\"cairn.io/v1\",\"kind\":\"BackupStorageLocation\","
	    "\"metadata\":{\"name\":\"local\"},\"spec\":{\"provider\":\"fs\","
	    "\"objectStorage\":{\"prefix\":\"edge-1\"},\"config\":{\"path\":\"%s\"}}}",
	    root);
	REQUIRE(open_bsl(json, NULL, &s, &prefix, &err) == 0);
	CHECK_STR(store_kind(s), "fs");
	CHECK_STR(prefix, "edge-1");
	free(prefix);
	store_free(s);
	free(json);
	/* location_check has no side effect: the directory is not made */
	json = xasprintf("{\"metadata\":{\"name\":\"c\"},\"spec\":{\"provider\":"
	    "\"fs\",\"config\":{\"path\":\"%s/not-made\"}}}", root);
	o = cJSON_Parse(json);
	CHECK(location_check(o, NULL, &err) == 0);
	cJSON_Delete(o);
	free(json);
	json = xasprintf("%s/not-made", root);
	CHECK(access(json, F_OK) < 0);
	free(json);

	REQUIRE(open_bsl("{\"metadata\":{\"name\":\"aws\"},\"spec\":{\"provider\":\"s3\","
	    "\"objectStorage\":{\"bucket\":\"velero-backups\",\"prefix\":\"p\"},"
	    "\"config\":{\"region\":\"eu-west-1\",\"s3Url\":\"http://127.0.0.1:9/\","
	    "\"s3ForcePathStyle\":\"true\"},\"credential\":{\"name\":\"cloud-credentials\","
	    "\"key\":\"cloud\"}}}", "[default]\naws_access_key_id=A\naws_secret_access_key=B\n",
	    &s, &prefix, &err) == 0);
	CHECK_STR(store_kind(s), "s3");
	CHECK_STR(store_describe(s), "s3://velero-backups (http://127.0.0.1:9, eu-west-1)");
	free(prefix);
	store_free(s);

	o = cJSON_Parse("{\"spec\":{\"credential\":{\"name\":\"sec\"}}}");
	CHECK_INT(location_credential_ref(o, &name, &key), 1);
	CHECK_STR(name, "sec");
	CHECK_STR(key, "cloud");
	cJSON_Delete(o);

	CHECK(open_bsl("{\"metadata\":{\"name\":\"x\"},\"spec\":{\"provider\":\"s3\"}}",
	    NULL, &s, NULL, &err) == CAIRN_EINVAL);
	CHECK_STR(err.msg, "BackupStorageLocation x: provider s3 needs spec.objectStorage.bucket");
	CHECK(open_bsl("{\"metadata\":{\"name\":\"x\"},\"spec\":{\"provider\":\"gcp\"}}",
	    NULL, &s, NULL, &err) == CAIRN_EINVAL);
	CHECK(open_bsl("{\"metadata\":{\"name\":\"x\"},\"spec\":{\"provider\":\"fs\"}}",
	    NULL, &s, NULL, &err) == CAIRN_EINVAL);
	CHECK(open_bsl("{\"metadata\":{\"name\":\"x\"},\"spec\":{\"provider\":\"s3\","
	    "\"objectStorage\":{\"bucket\":\"b-1\"}}}", "not a credentials file",
	    &s, NULL, &err) == CAIRN_EINVAL);
	CHECK(strstr(err.msg, "BackupStorageLocation x") != NULL);
	CHECK(strstr(err.msg, "line 1") != NULL);
	CHECK(open_bsl("{\"metadata\":{\"name\":\"x\"},\"spec\":{\"provider\":\"s3\","
	    "\"objectStorage\":{\"bucket\":\"Bad_Bucket!\"}}}", NULL, &s, NULL, &err) ==
	    CAIRN_EINVAL);
	CHECK(open_bsl("{\"metadata\":{\"name\":\"x\"},\"spec\":{\"provider\":\"s3\","
	    "\"objectStorage\":{\"bucket\":\"bkt\"},\"config\":{\"endpoint\":\"ftp://x\"}}}",
	    "[default]\naws_access_key_id=A\naws_secret_access_key=B\n", &s, NULL,
	    &err) == CAIRN_EINVAL);
	CHECK(strstr(err.msg, "http://") != NULL);
	free(root);
}

int
main(void)
{
	RUN(test_xml_list_objects);
	RUN(test_xml_parts_upload_complete_error);
	RUN(test_xml_hostile);
	RUN(test_xml_delete_result);
	RUN(test_key_rules);
	RUN(test_layout_keys);
	RUN(test_layout_list_backups);
	RUN(test_fs_atomic_and_progress);
	RUN(test_get_gunzip);
	RUN(test_fs_multipart_survives_reopen);
	RUN(test_fs_single_part_complete_links);
	RUN(test_fs_special_files);
	RUN(test_location);
	return unit_done();
}
