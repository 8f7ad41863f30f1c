/*
 * storage_tool.c: a test-only command line over storage/store.h, so the
 * Python integration tests can drive the C code against both backends.
 *
 *   storage_tool STORE-OPTIONS COMMAND ARGS...
 *   store options: --fs DIR | --s3 BUCKET --endpoint URL [--region R]
 *                  [--path-style] [--creds-file F] [--profile P]
 *                  [--attempts N] [--backoff-ms N] [--ca-file F] [--insecure]
 *                  | --bsl FILE.json [--creds-file F]
 *                  [--sse AES256|aws:kms] [--kms-key-id ID] [--sse-c-key-file F]
 *                  [--key ID=FILE[,ID=FILE...]] [--allow-plain]
 *                  (encrypt with the first key, read with any)
 *   commands:
 *     check
 *     put KEY FILE               fd source (known length, rewindable)
 *     put-stream KEY FILE        callback source, unknown length, no rewind
 *     get KEY FILE [OFF LEN]     FILE "-" is stdout
 *     head KEY                   prints "SIZE ETAG MTIME_US"
 *     list PREFIX [DELIM]        prints "K KEY SIZE ETAG" / "P PREFIX"
 *     delete KEY | delete-prefix PREFIX
 *     mpu-create KEY             prints the upload id
 *     mpu-put KEY ID N FILE OFF LEN   prints the ETag
 *     mpu-list KEY ID            prints "N ETAG SIZE"
 *     mpu-complete KEY ID        completes with the parts list parts gives
 *     mpu-abort KEY ID
 *     parallel PREFIX THREADS OBJECTS SIZE
 *         THREADS threads share the one store: each puts OBJECTS objects
 *         of SIZE pseudo-random bytes under PREFIX, reads each back and
 *         compares, while listing PREFIX; prints "ok N" or fails.
 *     upload KEY FILE PARTSIZE [--resume ID] [--pause-after K MS]
 *         the whole resumable flow: create (or resume: list parts, keep the
 *         ones whose size matches), send the missing parts, complete. Prints
 *         "upload-id ID" first and "part N" after each part, flushed.
 * Errors: "storage_tool: <message>" on stderr; exit 1 (3 for not found).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/jsonutil.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "storage/crypt.h"
#include "storage/location.h"
#include "storage/store.h"

static struct cairn_err err = CAIRN_ERR_INIT;

static int
die_rc(int rc)
{
	fprintf(stderr, "storage_tool: %s\n", err.msg[0] ? err.msg :
	    cairn_strerror(rc));
	return rc == CAIRN_ENOTFOUND ? 3 : 1;
}

static int
usage(void)
{
	fprintf(stderr, "storage_tool: bad usage (see tests/helpers/storage_tool.c)\n");
	return 2;
}

static size_t slurp_len;	/* bytes slurp() read last */

static char *
slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	char *data;
	long n;

	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	data = xmalloc((size_t)n + 1);
	n = (long)fread(data, 1, (size_t)n, f);
	data[n] = '\0';
	slurp_len = (size_t)n;
	fclose(f);
	return data;
}

static int
sink_fd(void *arg, const void *p, size_t n)
{
	int fd = *(int *)arg;
	const char *c = p;
	ssize_t w;

	while (n > 0) {
		w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

static ssize_t
read_plain(void *arg, void *buf, size_t n)
{
	int fd = *(int *)arg;
	ssize_t r;

	do {
		r = read(fd, buf, n);
	} while (r < 0 && errno == EINTR);
	return r;
}

static int
print_entry(void *arg, const struct store_entry *e)
{
	(void)arg;
	if (e->is_prefix)
		printf("P %s\n", e->key);
	else
		printf("K %s %llu %s\n", e->key, (unsigned long long)e->stat.size,
		    e->stat.etag);
	return 0;
}

struct parts {
	struct store_part v[STORE_PART_MAX_NUMBER];
	size_t n;
};

static int
collect_part(void *arg, const struct store_part *p)
{
	struct parts *ps = arg;

	if (ps->n < STORE_PART_MAX_NUMBER)
		ps->v[ps->n++] = *p;
	return 0;
}

static int
print_part(void *arg, const struct store_part *p)
{
	(void)arg;
	printf("%d %s %llu\n", p->number, p->etag, (unsigned long long)p->size);
	return 0;
}

static int
cmd_upload(struct store *s, int argc, char **argv)
{
	const char *key = argv[0], *file = argv[1], *resume = NULL;
	long long psize = atoll(argv[2]);
	int pause_after = -1, pause_ms = 0, fd, rc = 0, i, nparts, have;
	struct parts *ps = NULL;
	struct store_part *done = NULL;
	struct store_src src;
	struct stat st;
	char *id = NULL;
	char etag[STORE_ETAG_MAX];
	long long off, len;

	for (i = 3; i < argc; i++) {
		if (strcmp(argv[i], "--resume") == 0 && i + 1 < argc)
			resume = argv[++i];
		else if (strcmp(argv[i], "--pause-after") == 0 && i + 2 < argc) {
			pause_after = atoi(argv[++i]);
			pause_ms = atoi(argv[++i]);
		} else
			return usage();
	}
	fd = open(file, O_RDONLY);
	if (fd < 0 || fstat(fd, &st) < 0 || psize <= 0) {
		fprintf(stderr, "storage_tool: %s: %s\n", file, strerror(errno));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	nparts = (int)((st.st_size + psize - 1) / psize);
	if (nparts == 0)
		nparts = 1;
	ps = xcalloc(1, sizeof *ps);
	done = xcalloc((size_t)nparts, sizeof *done);
	if (resume != NULL) {
		id = xstrdup(resume);
		rc = store_mpu_list_parts(s, key, id, collect_part, ps, &err);
	} else {
		rc = store_mpu_create(s, key, &id, &err);
	}
	if (rc < 0)
		goto out;
	printf("upload-id %s\n", id);
	fflush(stdout);
	for (i = 1; i <= nparts; i++) {
		off = (long long)(i - 1) * psize;
		len = st.st_size - off < psize ? st.st_size - off : psize;
		have = 0;
		for (size_t j = 0; j < ps->n; j++) {
			if (ps->v[j].number == i && ps->v[j].size == (uint64_t)len) {
				done[i - 1] = ps->v[j];
				have = 1;
			}
		}
		if (have) {
			printf("kept %d\n", i);
			continue;
		}
		rc = store_src_fd(&src, fd, off, len, &err);
		if (rc == 0)
			rc = store_mpu_put_part(s, key, id, i, &src, etag, NULL, &err);
		if (rc < 0)
			goto out;
		done[i - 1].number = i;
		done[i - 1].size = (uint64_t)len;
		memcpy(done[i - 1].etag, etag, sizeof etag);
		printf("part %d\n", i);
		fflush(stdout);
		if (i == pause_after)
			time_sleep_us((int64_t)pause_ms * 1000, NULL);
	}
	rc = store_mpu_complete(s, key, id, done, (size_t)nparts, etag, &err);
	if (rc == 0)
		printf("completed %s\n", etag);
out:
	free(done);
	free(ps);
	free(id);
	close(fd);
	return rc < 0 ? die_rc(rc) : 0;
}

struct par {
	struct store *s;
	const char *prefix;
	int id, objects;
	size_t size;
	int failed;
	char why[CAIRN_ERR_MSG_MAX];
};

static int
count_entry(void *arg, const struct store_entry *e)
{
	(void)e;
	(*(int *)arg)++;
	return 0;
}

static void *
par_worker(void *arg)
{
	struct par *p = arg;
	struct cairn_err e = CAIRN_ERR_INIT;
	unsigned char *data = xmalloc(p->size + 1);
	char *back = NULL, *key;
	size_t len, i;
	int o, n;

	for (o = 0; o < p->objects && !p->failed; o++) {
		for (i = 0; i < p->size; i++)
			data[i] = (unsigned char)(i * 31 + (size_t)o * 7 + (size_t)p->id * 131);
		key = xasprintf("%s/t%d/o%d", p->prefix, p->id, o);
		if (store_put_mem(p->s, key, data, p->size, &e) < 0 ||
		    store_get_mem(p->s, key, p->size + 1, &back, &len, &e) < 0) {
			p->failed = 1;
			snprintf(p->why, sizeof p->why, "%s", e.msg);
		} else if (len != p->size || memcmp(back, data, len) != 0) {
			p->failed = 1;
			snprintf(p->why, sizeof p->why, "%s: bytes differ", key);
		}
		free(back);
		back = NULL;
		free(key);
		n = 0;
		if (!p->failed && store_list(p->s, p->prefix, NULL, count_entry, &n,
		    &e) < 0) {
			p->failed = 1;
			snprintf(p->why, sizeof p->why, "%s", e.msg);
		}
	}
	free(data);
	return NULL;
}

static int
cmd_parallel(struct store *s, char **argv)
{
	int threads = atoi(argv[1]), i, bad = 0, n = 0;
	struct par *ps;
	pthread_t *tids;

	if (threads < 1 || threads > 64)
		return usage();
	ps = xcalloc((size_t)threads, sizeof *ps);
	tids = xcalloc((size_t)threads, sizeof *tids);
	for (i = 0; i < threads; i++) {
		ps[i].s = s;
		ps[i].prefix = argv[0];
		ps[i].id = i;
		ps[i].objects = atoi(argv[2]);
		ps[i].size = (size_t)atoll(argv[3]);
		if (pthread_create(&tids[i], NULL, par_worker, &ps[i]) != 0)
			abort();
	}
	for (i = 0; i < threads; i++) {
		pthread_join(tids[i], NULL);
		if (ps[i].failed) {
			fprintf(stderr, "storage_tool: thread %d: %s\n", i, ps[i].why);
			bad = 1;
		}
	}
	free(ps);
	free(tids);
	if (bad)
		return 1;
	if (store_list(s, argv[0], NULL, count_entry, &n, &err) < 0)
		return die_rc(err.code);
	printf("ok %d\n", n);
	return 0;
}

static int
run(struct store *s, int argc, char **argv)
{
	const char *cmd = argv[0];
	struct store_stat st;
	struct store_src src;
	char etag[STORE_ETAG_MAX], *id = NULL;
	size_t n;
	int fd, rc;

	argc--;
	argv++;
	if (strcmp(cmd, "check") == 0) {
		rc = store_check(s, &err);
	} else if ((strcmp(cmd, "put") == 0 || strcmp(cmd, "put-stream") == 0) &&
	    argc == 2) {
		fd = open(argv[1], O_RDONLY);
		if (fd < 0) {
			fprintf(stderr, "storage_tool: %s: %s\n", argv[1], strerror(errno));
			return 1;
		}
		if (strcmp(cmd, "put") == 0) {
			rc = store_src_fd(&src, fd, 0, -1, &err);
		} else {
			memset(&src, 0, sizeof src);
			src.read = read_plain;
			src.arg = &fd;
			src.len = -1;
			src.p_fd = -1;
			rc = 0;
		}
		if (rc == 0)
			rc = store_put(s, argv[0], &src, etag, NULL, &err);
		if (rc == 0)
			printf("%s\n", etag);
		close(fd);
	} else if (strcmp(cmd, "get") == 0 && (argc == 2 || argc == 4)) {
		fd = strcmp(argv[1], "-") == 0 ? 1 :
		    open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0) {
			fprintf(stderr, "storage_tool: %s: %s\n", argv[1], strerror(errno));
			return 1;
		}
		rc = store_get(s, argv[0], argc == 4 ? strtoull(argv[2], NULL, 10) : 0,
		    argc == 4 ? strtoll(argv[3], NULL, 10) : -1, sink_fd, &fd, NULL,
		    &err);
		if (fd != 1)
			close(fd);
	} else if (strcmp(cmd, "head") == 0 && argc == 1) {
		rc = store_head(s, argv[0], &st, &err);
		if (rc == 0)
			printf("%llu %s %lld\n", (unsigned long long)st.size, st.etag,
			    (long long)st.mtime_us);
	} else if (strcmp(cmd, "list") == 0 && (argc == 1 || argc == 2)) {
		rc = store_list(s, argv[0], argc == 2 ? argv[1] : NULL, print_entry,
		    NULL, &err);
	} else if (strcmp(cmd, "delete") == 0 && argc == 1) {
		rc = store_delete(s, argv[0], &err);
	} else if (strcmp(cmd, "delete-prefix") == 0 && argc == 1) {
		rc = store_delete_prefix(s, argv[0], &n, &err);
		if (rc == 0)
			printf("%zu\n", n);
	} else if (strcmp(cmd, "mpu-create") == 0 && argc == 1) {
		rc = store_mpu_create(s, argv[0], &id, &err);
		if (rc == 0)
			printf("%s\n", id);
		free(id);
	} else if (strcmp(cmd, "mpu-put") == 0 && argc == 6) {
		fd = open(argv[3], O_RDONLY);
		if (fd < 0)
			return 1;
		rc = store_src_fd(&src, fd, atoll(argv[4]), atoll(argv[5]), &err);
		if (rc == 0)
			rc = store_mpu_put_part(s, argv[0], argv[1], atoi(argv[2]), &src,
			    etag, NULL, &err);
		if (rc == 0)
			printf("%s\n", etag);
		close(fd);
	} else if (strcmp(cmd, "mpu-list") == 0 && argc == 2) {
		rc = store_mpu_list_parts(s, argv[0], argv[1], print_part, NULL, &err);
	} else if (strcmp(cmd, "mpu-complete") == 0 && argc == 2) {
		struct parts *ps = xcalloc(1, sizeof *ps);

		rc = store_mpu_list_parts(s, argv[0], argv[1], collect_part, ps, &err);
		if (rc == 0)
			rc = store_mpu_complete(s, argv[0], argv[1], ps->v, ps->n, etag,
			    &err);
		if (rc == 0)
			printf("%s\n", etag);
		free(ps);
	} else if (strcmp(cmd, "mpu-abort") == 0 && argc == 2) {
		rc = store_mpu_abort(s, argv[0], argv[1], &err);
	} else if (strcmp(cmd, "parallel") == 0 && argc == 4) {
		return cmd_parallel(s, argv);
	} else if (strcmp(cmd, "upload") == 0 && argc >= 3) {
		rc = cmd_upload(s, argc, argv);
		return rc;
	} else {
		return usage();
	}
	if (rc < 0)
		return die_rc(rc);
	return 0;
}

/*
 * --key ID=FILE[,ID=FILE...]: encrypt with the first key, read with any of
 * them (storage/store_crypt.c over the store just opened).
 */
static int
open_crypt(const char *arg, int allow_plain, struct store **s)
{
	struct crypt_keyring *kr = crypt_keyring_new();
	unsigned char key[CRYPT_KEY_LEN];
	char *copy = xstrdup(arg), *save = NULL, *tok, *eq, *data;
	int rc = 0, first = 1;

	for (tok = strtok_r(copy, ",", &save); rc == 0 && tok != NULL;
	    tok = strtok_r(NULL, ",", &save)) {
		eq = strchr(tok, '=');
		if (eq == NULL) {
			rc = cairn_err_set(&err, CAIRN_EINVAL, "--key ID=FILE");
			break;
		}
		*eq = '\0';
		data = slurp(eq + 1);
		if (data == NULL) {
			rc = cairn_err_set(&err, CAIRN_EINVAL, "cannot read %s", eq + 1);
			break;
		}
		rc = crypt_key_parse(data, slurp_len, eq + 1, key, &err);
		free(data);
		if (rc == 0)
			rc = crypt_keyring_add(kr, tok, key, &err);
		if (rc == 0 && first)
			rc = crypt_keyring_set_current(kr, tok, &err);
		first = 0;
	}
	free(copy);
	if (rc < 0) {
		crypt_keyring_free(kr);
		return rc;
	}
	return store_open_crypt(*s, kr, allow_plain, s, &err);
}

int
main(int argc, char **argv)
{
	struct store_s3_config c;
	struct store *s = NULL;
	const char *fsdir = NULL, *bsl = NULL, *keyarg = NULL;
	unsigned char ssec[CRYPT_KEY_LEN];
	int allow_plain = 0;
	char *creds = NULL, *text;
	cJSON *obj;
	int i, rc, s3 = 0;

	memset(&c, 0, sizeof c);
	for (i = 1; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		if (strcmp(argv[i], "--fs") == 0 && i + 1 < argc)
			fsdir = argv[++i];
		else if (strcmp(argv[i], "--s3") == 0 && i + 1 < argc) {
			c.bucket = argv[++i];
			s3 = 1;
		} else if (strcmp(argv[i], "--endpoint") == 0 && i + 1 < argc)
			c.endpoint = argv[++i];
		else if (strcmp(argv[i], "--region") == 0 && i + 1 < argc)
			c.region = argv[++i];
		else if (strcmp(argv[i], "--path-style") == 0)
			c.force_path_style = 1;
		else if (strcmp(argv[i], "--creds-file") == 0 && i + 1 < argc)
			c.credentials_file = argv[++i];
		else if (strcmp(argv[i], "--profile") == 0 && i + 1 < argc)
			c.profile = argv[++i];
		else if (strcmp(argv[i], "--attempts") == 0 && i + 1 < argc)
			c.max_attempts = atoi(argv[++i]);
		else if (strcmp(argv[i], "--backoff-ms") == 0 && i + 1 < argc)
			c.backoff_base_ms = atoll(argv[++i]);
		else if (strcmp(argv[i], "--ca-file") == 0 && i + 1 < argc)
			c.ca_file = argv[++i];
		else if (strcmp(argv[i], "--insecure") == 0)
			c.insecure_skip_verify = 1;
		else if (strcmp(argv[i], "--bsl") == 0 && i + 1 < argc)
			bsl = argv[++i];
		else if (strcmp(argv[i], "--sse") == 0 && i + 1 < argc)
			c.sse = argv[++i];
		else if (strcmp(argv[i], "--kms-key-id") == 0 && i + 1 < argc)
			c.sse_kms_key_id = argv[++i];
		else if (strcmp(argv[i], "--sse-c-key-file") == 0 && i + 1 < argc) {
			char *k = slurp(argv[++i]);

			if (k == NULL || crypt_key_parse(k, slurp_len, argv[i],
			    ssec, &err) < 0)
				return die_rc(CAIRN_EINVAL);
			free(k);
			c.sse_c_key = ssec;
		} else if (strcmp(argv[i], "--key") == 0 && i + 1 < argc)
			keyarg = argv[++i];
		else if (strcmp(argv[i], "--allow-plain") == 0)
			allow_plain = 1;
		else
			return usage();
	}
	if (i >= argc)
		return usage();
	if (bsl != NULL) {
		text = slurp(bsl);
		if (text == NULL)
			return usage();
		obj = json_parse(text, strlen(text), &err);
		free(text);
		if (obj == NULL)
			return die_rc(CAIRN_EINVAL);
		if (c.credentials_file != NULL)
			creds = slurp(c.credentials_file);
		rc = location_open(obj, creds, &s, NULL, &err);
		cJSON_Delete(obj);
		free(creds);
	} else if (s3) {
		rc = store_open_s3(&c, &s, &err);
	} else if (fsdir != NULL) {
		rc = store_open_fs(fsdir, 0, &s, &err);
	} else {
		return usage();
	}
	if (rc < 0)
		return die_rc(rc);
	if (keyarg != NULL) {
		rc = open_crypt(keyarg, allow_plain, &s);
		if (rc < 0)
			return die_rc(rc);
	}
	rc = run(s, argc - i, argv + i);
	fflush(stdout);
	store_free(s);
	return rc;
}
