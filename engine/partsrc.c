/*
 * partsrc.c: a tarball source that checks the recorded parts, see partsrc.h.
 */
#include "config.h"
#include "engine/partsrc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "base/jsonutil.h"
#include "base/mem.h"
#include "base/util.h"

struct part {
	int number;
	uint64_t bytes;
	char sha256[65];		/* "" when none was recorded */
};

struct partsrc {
	struct tarread_src inner;	/* .close NULL once closed */
	struct part *parts;
	size_t nparts;
	size_t cur;			/* index of the part being read */
	uint64_t in_part;		/* its bytes so far */
	uint64_t off;			/* bytes so far */
	uint64_t part_start;
	EVP_MD_CTX *md;
	int64_t checked;
	int bad;			/* a problem was recorded in msg */
	char msg[CAIRN_ERR_MSG_MAX];
};

static void
ps_bad(struct partsrc *ps, const char *fmt, ...) CAIRN_PRINTF(2, 3);

static void
ps_bad(struct partsrc *ps, const char *fmt, ...)
{
	va_list ap;

	if (ps->bad)
		return;
	ps->bad = 1;
	va_start(ap, fmt);
	str_vformat(ps->msg, sizeof ps->msg, fmt, ap);
	va_end(ap);
}

/* The current part is complete: compare its digest. */
static void
ps_close_part(struct partsrc *ps)
{
	struct part *p = &ps->parts[ps->cur];
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	char hex[65];

	EVP_DigestFinal_ex(ps->md, md, &len);
	str_hex(md, len, hex);
	if (p->sha256[0] != '\0') {
		if (strcmp(hex, p->sha256) != 0)
			ps_bad(ps, "part %d (tarball bytes %llu..%llu): SHA-256 "
			    "%s, the backup recorded %s: the part was changed",
			    p->number, (unsigned long long)ps->part_start,
			    (unsigned long long)(ps->part_start + p->bytes),
			    hex, p->sha256);
		else
			ps->checked++;
	}
	ps->cur++;
	ps->in_part = 0;
	ps->part_start = ps->off;
	EVP_DigestInit_ex(ps->md, EVP_sha256(), NULL);
}

static void
ps_feed(struct partsrc *ps, const unsigned char *p, size_t n)
{
	while (n > 0 && ps->cur < ps->nparts) {
		uint64_t left = ps->parts[ps->cur].bytes - ps->in_part;
		size_t k = left < n ? (size_t)left : n;

		EVP_DigestUpdate(ps->md, p, k);
		ps->in_part += k;
		ps->off += k;
		p += k;
		n -= k;
		if (ps->in_part == ps->parts[ps->cur].bytes)
			ps_close_part(ps);
	}
	if (n > 0 && ps->nparts > 0) {
		ps_bad(ps, "the tarball is longer than its %zu recorded parts "
		    "(bytes from %llu are extra)", ps->nparts,
		    (unsigned long long)ps->off);
		ps->off += n;
	}
}

static ssize_t
ps_read(void *arg, const void **p, struct cairn_err *err)
{
	struct partsrc *ps = arg;
	ssize_t n = ps->inner.read(ps->inner.arg, p, err);

	if (n > 0)
		ps_feed(ps, *p, (size_t)n);
	else if (n == 0)
		partsrc_end(ps);
	return n;
}

static void
ps_close(void *arg)
{
	struct partsrc *ps = arg;

	if (ps->inner.close != NULL)
		ps->inner.close(ps->inner.arg);
	ps->inner.close = NULL;
}

struct partsrc *
partsrc_new(const cJSON *parts, const struct tarread_src *inner)
{
	struct partsrc *ps = xcalloc(1, sizeof *ps);
	const cJSON *it;
	int n = cJSON_GetArraySize(parts);
	size_t k = 0;

	ps->inner = *inner;
	if (n > PARTSRC_MAX) {
		partsrc_free(ps);
		return NULL;
	}
	if (n > 0)
		ps->parts = xcalloc((size_t)n, sizeof *ps->parts);
	cJSON_ArrayForEach(it, parts) {
		ps->parts[k].number = (int)json_int(it, "number", 0);
		ps->parts[k].bytes = (uint64_t)json_int(it, "bytes", 0);
		snprintf(ps->parts[k].sha256, sizeof ps->parts[k].sha256, "%s",
		    json_str_or(it, "sha256", ""));
		k++;
	}
	ps->nparts = k;
	ps->md = EVP_MD_CTX_new();
	if (ps->md == NULL)
		abort();
	EVP_DigestInit_ex(ps->md, EVP_sha256(), NULL);
	return ps;
}

void
partsrc_source(struct partsrc *ps, struct tarread_src *out)
{
	out->read = ps_read;
	out->close = ps_close;
	out->arg = ps;
}

void
partsrc_end(struct partsrc *ps)
{
	if (ps->cur < ps->nparts)
		ps_bad(ps, "the tarball ends at byte %llu, inside part %d of "
		    "the %zu recorded (%llu bytes recorded in all): the rest "
		    "is missing", (unsigned long long)ps->off,
		    ps->parts[ps->cur].number, ps->nparts,
		    (unsigned long long)(ps->part_start +
		    ps->parts[ps->cur].bytes));
}

const char *
partsrc_problem(const struct partsrc *ps)
{
	return ps->bad ? ps->msg : NULL;
}

void
partsrc_where(const struct partsrc *ps, char *out, size_t n)
{
	if (ps->cur < ps->nparts)
		snprintf(out, n, "part %d (tarball bytes %llu..%llu)",
		    ps->parts[ps->cur].number,
		    (unsigned long long)ps->part_start,
		    (unsigned long long)(ps->part_start +
		    ps->parts[ps->cur].bytes));
	else
		snprintf(out, n, "the tarball at byte %llu",
		    (unsigned long long)ps->off);
}

int64_t
partsrc_parts(const struct partsrc *ps)
{
	return (int64_t)ps->nparts;
}

int64_t
partsrc_checked(const struct partsrc *ps)
{
	return ps->checked;
}

void
partsrc_free(struct partsrc *ps)
{
	if (ps == NULL)
		return;
	ps_close(ps);
	EVP_MD_CTX_free(ps->md);
	free(ps->parts);
	free(ps);
}
