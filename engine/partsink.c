/*
 * partsink.c: spool, upload, checkpoint callback: the one way a part of
 * a tar.gz reaches storage. See partsink.h.
 */
#include "config.h"
#include "engine/partsink.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "base/log.h"
#include "base/mem.h"
#include "base/util.h"
#include "engine/tarparts.h"

struct partsink {
	struct store *s;
	char *key;
	char *upload_id;
	struct partsink_hooks h;
	FILE *spool;			/* the open part's bytes */
	uint64_t spool_len;
	EVP_MD_CTX *sha;		/* SHA-256 of the open part */
	char sha256[65];		/* ... of the part stored last, hex */
};

/* An unlinked temporary file in dir (NULL: $TMPDIR, else /tmp). */
static FILE *
spool_open(const char *dir, struct cairn_err *err)
{
	FILE *f;
	int fd;

	fd = util_tmpfd(dir, "part");
	if (fd < 0) {
		cairn_err_errno(err, CAIRN_EIO, errno, "creating a part spool "
		    "file in %s", util_tmpdir_label(dir));
		return NULL;
	}
	f = fdopen(fd, "w+");
	if (f == NULL) {
		cairn_err_errno(err, CAIRN_EIO, errno, "part spool file");
		close(fd);
		return NULL;
	}
	/* deflate hands over 64 KiB chunks: no extra copy, fewer writes */
	setvbuf(f, NULL, _IOFBF, PARTSINK_SPOOL_BUF);
	return f;
}

int
partsink_open(struct store *s, const char *key, const char *upload_id,
	const char *spool_dir, const struct partsink_hooks *hooks,
	struct partsink **out, struct cairn_err *err)
{
	struct partsink *ps;
	FILE *f;

	*out = NULL;
	f = spool_open(spool_dir, err);
	if (f == NULL)
		return CAIRN_EIO;
	ps = xcalloc(1, sizeof *ps);
	ps->s = s;
	ps->key = xstrdup(key);
	ps->upload_id = xstrdup(upload_id);
	ps->h = *hooks;
	ps->spool = f;
	ps->sha = EVP_MD_CTX_new();
	if (ps->sha == NULL)
		abort();	/* out of memory, as xmalloc */
	*out = ps;
	return 0;
}

static int
ps_begin(void *arg, int part, struct cairn_err *err)
{
	struct partsink *ps = arg;

	if (part > STORE_PART_MAX_NUMBER)
		return cairn_err_set(err, CAIRN_ETOOBIG, "%s: more than %d "
		    "parts: raise the part size", ps->key,
		    STORE_PART_MAX_NUMBER);
	rewind(ps->spool);
	if (ftruncate(fileno(ps->spool), 0) < 0)
		return cairn_err_errno(err, CAIRN_EIO, errno, "part spool");
	ps->spool_len = 0;
	ps->sha256[0] = '\0';
	if (EVP_DigestInit_ex(ps->sha, EVP_sha256(), NULL) != 1)
		return cairn_err_set(err, CAIRN_EFAIL, "SHA-256: libcrypto "
		    "failed");
	return 0;
}

static int
ps_write(void *arg, const void *p, size_t n, struct cairn_err *err)
{
	struct partsink *ps = arg;

	if (fwrite(p, 1, n, ps->spool) != n)
		return cairn_err_errno(err, CAIRN_EIO, errno,
		    "writing the part spool");
	EVP_DigestUpdate(ps->sha, p, n);
	ps->spool_len += n;
	return 0;
}

static int
ps_end(void *arg, int part, uint64_t bytes, uint64_t entries,
	struct cairn_err *err)
{
	struct partsink *ps = arg;
	struct store_src src;
	struct store_part p;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	int rc;

	(void)bytes;	/* what tarparts counted: the spool's length */
	if (EVP_DigestFinal_ex(ps->sha, md, &mdlen) != 1)
		return cairn_err_set(err, CAIRN_EFAIL, "SHA-256: libcrypto "
		    "failed");
	str_hex(md, mdlen, ps->sha256);
	if (fflush(ps->spool) != 0)
		return cairn_err_errno(err, CAIRN_EIO, errno, "part spool");
	if (ps->h.fence != NULL) {
		rc = ps->h.fence(ps->h.arg, part, err);
		if (rc < 0)
			return rc;
	}
	memset(&p, 0, sizeof p);
	rc = store_src_fd(&src, fileno(ps->spool), 0, (int64_t)ps->spool_len,
	    err);
	src.sha256 = ps->sha256;	/* the store need not hash it again */
	if (rc == 0)
		rc = store_mpu_put_part(ps->s, ps->key, ps->upload_id, part,
		    &src, p.etag, NULL, err);
	if (rc < 0) {
		cairn_err_prefix(err, "uploading part %d of %s", part, ps->key);
		return ps->h.failed != NULL ?
		    ps->h.failed(ps->h.arg, part, rc, err) : rc;
	}
	p.number = part;
	p.size = ps->spool_len;
	log_debug("part %d of %s stored (%llu bytes, %llu entries)", part,
	    ps->key, (unsigned long long)p.size, (unsigned long long)entries);
	return ps->h.stored(ps->h.arg, &p, entries, err);
}

const char *
partsink_sha256(const struct partsink *ps)
{
	return ps->sha256;
}

void
partsink_sink(struct partsink *ps, struct tarparts_sink *out)
{
	memset(out, 0, sizeof *out);
	out->begin = ps_begin;
	out->write = ps_write;
	out->end = ps_end;
	out->arg = ps;
}

void
partsink_free(struct partsink *ps)
{
	if (ps == NULL)
		return;
	if (ps->spool != NULL)
		fclose(ps->spool);
	EVP_MD_CTX_free(ps->sha);
	free(ps->key);
	free(ps->upload_id);
	free(ps);
}
