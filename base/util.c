/* util.c: escaping, globs, lists, randomness, see util.h. */
#include "config.h"
#include "base/util.h"
#include "base/mem.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <sys/random.h>
#include <unistd.h>

/*
 * Length of a valid UTF-8 sequence at s, or 0 if invalid: RFC 3629, as Go
 * and Python decode it (no overlong forms, no surrogates, nothing past
 * U+10FFFF). A NUL is never a continuation byte, so this stops at the end.
 */
static size_t
utf8_len(const unsigned char *s)
{
	size_t n;
	unsigned char lo = 0x80, hi = 0xbf;	/* range of the second byte */

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		n = 3;
		if (s[0] == 0xe0)
			lo = 0xa0;		/* overlong */
		else if (s[0] == 0xed)
			hi = 0x9f;		/* surrogates */
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		n = 4;
		if (s[0] == 0xf0)
			lo = 0x90;		/* overlong */
		else if (s[0] == 0xf4)
			hi = 0x8f;		/* past U+10FFFF */
	} else
		return 0;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

size_t
str_utf8_cut(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = len, back = 0;

	/* Back over up to 3 continuation bytes to the lead byte. */
	while (i > 0 && back < 3 && (p[i - 1] & 0xc0) == 0x80) {
		i--;
		back++;
	}
	if (i == 0 || p[i - 1] < 0xc0)
		return len;	/* ASCII or stray continuation: no lead cut */
	/* p[i-1] leads a sequence; does it end within len? */
	{
		size_t need = p[i - 1] >= 0xf0 ? 4 : p[i - 1] >= 0xe0 ? 3 : 2;

		return back + 1 >= need ? len : i - 1;
	}
}

int
str_utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + len;

	while (p < end) {
		size_t n;

		if (*p < 0x80) {
			p++;
			continue;
		}
		if ((size_t)(end - p) < 2)
			return 0;
		n = utf8_len(p);
		if (n == 0 || n > (size_t)(end - p))
			return 0;
		p += n;
	}
	return 1;
}

char *
str_utf8_fix(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + len;
	struct buf b;

	char *out;

	buf_init(&b, 3 * len + 1);
	while (p < end) {
		size_t n = *p < 0x80 ? 1 : (size_t)(end - p) < 2 ? 0 :
		    utf8_len(p);

		if (n == 0 || n > (size_t)(end - p)) {
			(void)buf_puts(&b, "\xef\xbf\xbd");	/* U+FFFD */
			p++;
			continue;
		}
		if (n == 1 && *p == '\0')
			(void)buf_puts(&b, "\xef\xbf\xbd");
		else
			(void)buf_append(&b, p, n);
		p += n;
	}
	out = buf_take(&b, NULL);
	return out != NULL ? out : xstrdup("");
}

size_t
str_vformat(char *dst, size_t cap, const char *fmt, va_list ap)
{
	int n;
	size_t len;

	if (cap == 0)
		return 0;
	n = vsnprintf(dst, cap, fmt, ap);
	if (n < 0) {
		dst[0] = '\0';
		return 0;
	}
	len = strlen(dst);
	if ((size_t)n >= cap) {	/* truncated: never inside a character */
		len = str_utf8_cut(dst, len);
		dst[len] = '\0';
	}
	return len;
}

size_t
str_format(char *dst, size_t cap, const char *fmt, ...)
{
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	n = str_vformat(dst, cap, fmt, ap);
	va_end(ap);
	return n;
}

/*
 * Length of the run of printable ASCII at p that the escapers copy as it
 * is: not a backslash and, for JSON (quote), not a double quote.
 */
static size_t
plain_run(const unsigned char *p, int quote)
{
	const unsigned char *r = p;

	while (*r >= 0x20 && *r < 0x7f && *r != '\\' && !(quote && *r == '"'))
		r++;
	return (size_t)(r - p);
}

int
str_escape_text(struct buf *b, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	int rc = 0;

	while (*p != '\0' && rc == 0) {
		size_t n = plain_run(p, 0);

		if (n > 0) {
			rc = buf_append(b, p, n);
			p += n;
			continue;
		}
		n = utf8_len(p);
		if (*p == '\\')
			rc = buf_puts(b, "\\\\");
		else if (*p == '\n')
			rc = buf_puts(b, "\\n");
		else if (*p == '\r')
			rc = buf_puts(b, "\\r");
		else if (*p == '\t')
			rc = buf_puts(b, "\\t");
		else if (*p < 0x20 || *p == 0x7f || n == 0)
			rc = buf_printf(b, "\\x%02x", *p);
		else {
			rc = buf_append(b, p, n);
			p += n;
			continue;
		}
		p++;
	}
	return rc;
}

int
str_escape_json(struct buf *b, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	int rc = buf_putc(b, '"');

	while (*p != '\0' && rc == 0) {
		size_t n = plain_run(p, 1);

		if (n > 0) {
			rc = buf_append(b, p, n);
			p += n;
			continue;
		}
		n = utf8_len(p);
		if (*p == '"')
			rc = buf_puts(b, "\\\"");
		else if (*p == '\\')
			rc = buf_puts(b, "\\\\");
		else if (*p == '\n')
			rc = buf_puts(b, "\\n");
		else if (*p == '\r')
			rc = buf_puts(b, "\\r");
		else if (*p == '\t')
			rc = buf_puts(b, "\\t");
		else if (*p < 0x20 || *p == 0x7f)
			rc = buf_printf(b, "\\u%04x", *p);
		else if (n == 0)
			rc = buf_puts(b, "\\ufffd");
		else {
			rc = buf_append(b, p, n);
			p += n;
			continue;
		}
		p++;
	}
	if (rc == 0)
		rc = buf_putc(b, '"');
	return rc;
}

int
str_escape_html(struct buf *b, const char *s)
{
	int rc = 0;

	for (const char *p = s; *p != '\0' && rc == 0; p++) {
		switch (*p) {
		case '&': rc = buf_puts(b, "&amp;"); break;
		case '<': rc = buf_puts(b, "&lt;"); break;
		case '>': rc = buf_puts(b, "&gt;"); break;
		case '"': rc = buf_puts(b, "&quot;"); break;
		case '\'': rc = buf_puts(b, "&#39;"); break;
		default: rc = buf_putc(b, *p);
		}
	}
	return rc;
}

int
str_glob(const char *pat, const char *s)
{
	const char *star = NULL, *resume = NULL;

	while (*s != '\0') {
		if (*pat == '*') {
			star = pat++;
			resume = s;
		} else if (*pat == '?' || *pat == *s) {
			pat++;
			s++;
		} else if (star != NULL) {
			pat = star + 1;
			s = ++resume;
		} else {
			return 0;
		}
	}
	while (*pat == '*')
		pat++;
	return *pat == '\0';
}

int
strv_glob_any(char *const *pats, const char *s)
{
	for (size_t i = 0; pats[i] != NULL; i++)
		if (str_glob(pats[i], s))
			return 1;
	return 0;
}

int
str_has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

int
str_has_suffix(const char *s, const char *suffix)
{
	size_t ls = strlen(s), lx = strlen(suffix);

	return ls >= lx && strcmp(s + ls - lx, suffix) == 0;
}

int
str_parse_quantity(const char *s, uint64_t *bytes)
{
	static const struct { const char *suf; uint64_t mult; } sufs[] = {
		{ "Ki", 1ULL << 10 }, { "Mi", 1ULL << 20 }, { "Gi", 1ULL << 30 },
		{ "Ti", 1ULL << 40 }, { "Pi", 1ULL << 50 }, { "Ei", 1ULL << 60 },
		{ "k", 1000ULL }, { "M", 1000000ULL }, { "G", 1000000000ULL },
		{ "T", 1000000000000ULL }, { "P", 1000000000000000ULL },
		{ "E", 1000000000000000000ULL }, { "", 1 },
	};
	uint64_t whole = 0, frac = 0, scale = 1, mult = 0;
	const char *p = s;
	size_t i;

	if (s == NULL || *p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (whole > (UINT64_MAX - 9) / 10)
			return -1;
		whole = whole * 10 + (uint64_t)(*p - '0');
	}
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9'; p++)
			if (scale < 1000000000ULL) {
				frac = frac * 10 + (uint64_t)(*p - '0');
				scale *= 10;
			}
	}
	for (i = 0; i < sizeof sufs / sizeof sufs[0]; i++)
		if (strcmp(p, sufs[i].suf) == 0) {
			mult = sufs[i].mult;
			break;
		}
	if (mult == 0 || (whole != 0 && whole > UINT64_MAX / mult))
		return -1;
	*bytes = whole * mult;
	if (frac != 0) {
		/* frac / scale of mult, rounded up, without overflow */
		uint64_t part = mult / scale * frac + ((mult % scale) * frac +
		    scale - 1) / scale;

		if (*bytes > UINT64_MAX - part)
			return -1;
		*bytes += part;
	}
	return 0;
}

int
str_path_cmp(const char *a, const char *b)
{
	size_t la, lb;
	int c;

	for (;;) {
		la = strcspn(a, "/");
		lb = strcspn(b, "/");
		c = memcmp(a, b, la < lb ? la : lb);
		if (c != 0)
			return c;
		if (la != lb)
			return la < lb ? -1 : 1;
		a += la;
		b += lb;
		if (*a == '\0' || *b == '\0')
			return (*a != '\0') - (*b != '\0');
		a++;
		b++;
	}
}

char **
str_split(const char *s, char sep, size_t *n_out)
{
	char **v = xcalloc(1, sizeof *v);
	size_t n = 0;
	const char *p = s ? s : "";

	while (*p != '\0') {
		const char *end = strchr(p, sep);
		const char *a = p, *z = end ? end : p + strlen(p);

		while (a < z && (*a == ' ' || *a == '\t'))
			a++;
		while (z > a && (z[-1] == ' ' || z[-1] == '\t'))
			z--;
		if (z > a) {
			v = xreallocarray(v, n + 2, sizeof *v);
			v[n++] = xstrndup(a, (size_t)(z - a));
			v[n] = NULL;
		}
		if (end == NULL)
			break;
		p = end + 1;
	}
	if (n_out != NULL)
		*n_out = n;
	return v;
}

void
strv_free(char **v)
{
	if (v == NULL)
		return;
	for (char **p = v; *p != NULL; p++)
		free(*p);
	free(v);
}

char **
strv_push(char **v, const char *s)
{
	size_t n = strv_len(v);

	v = xreallocarray(v, n + 2, sizeof *v);
	v[n] = xstrdup(s);
	v[n + 1] = NULL;
	return v;
}

size_t
strv_len(char *const *v)
{
	size_t n = 0;

	while (v != NULL && v[n] != NULL)
		n++;
	return n;
}

int
strv_contains(char *const *v, const char *s)
{
	for (size_t i = 0; v != NULL && v[i] != NULL; i++)
		if (strcmp(v[i], s) == 0)
			return 1;
	return 0;
}

void
rand_bytes(void *p, size_t n)
{
	unsigned char *c = p;

	while (n > 0) {
		ssize_t got = getrandom(c, n, 0);

		if (got <= 0)
			continue;
		c += got;
		n -= (size_t)got;
	}
}

void
rand_uuid(char out[37])
{
	unsigned char u[16];

	rand_bytes(u, sizeof u);
	u[6] = (u[6] & 0x0f) | 0x40;
	u[8] = (u[8] & 0x3f) | 0x80;
	snprintf(out, 37,
	    "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
	    u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10],
	    u[11], u[12], u[13], u[14], u[15]);
}

uint64_t
rand_below(uint64_t n)
{
	uint64_t r, limit;

	if (n <= 1)
		return 0;
	limit = UINT64_MAX - UINT64_MAX % n;
	do {
		rand_bytes(&r, sizeof r);
	} while (r >= limit);
	return r % n;
}

void
fmt_bytes(uint64_t n, char out[32])
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)n;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(out, 32, "%llu B", (unsigned long long)n);
	else
		snprintf(out, 32, "%.1f %s", v, units[u]);
}

void
str_hex(const unsigned char *p, size_t n, char *out)
{
	static const char hx[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = hx[p[i] >> 4];
		out[2 * i + 1] = hx[p[i] & 15];
	}
	out[2 * n] = '\0';
}

/* CPUs a quota allows: ceil(quota / period); 0 when unlimited or unknown. */
static int
cpus_of_quota(long long quota, long long period)
{
	if (quota <= 0 || period <= 0)
		return 0;
	return (int)((quota + period - 1) / period);
}

/* The cgroup v2 cpu.max ("max 100000" or "200000 100000") under root. */
static int
cpus_cgroup(const char *root)
{
	char path[PATH_MAX], line[128], q[32];
	long long quota = -1, period = 0;
	FILE *f;

	snprintf(path, sizeof path, "%s/cpu.max", root);
	f = fopen(path, "r");
	if (f != NULL) {
		if (fgets(line, sizeof line, f) != NULL &&
		    sscanf(line, "%31s %lld", q, &period) == 2 &&
		    strcmp(q, "max") != 0)
			quota = strtoll(q, NULL, 10);
		fclose(f);
		return cpus_of_quota(quota, period);
	}
	/* cgroup v1 */
	snprintf(path, sizeof path, "%s/cpu/cpu.cfs_quota_us", root);
	f = fopen(path, "r");
	if (f == NULL)
		return 0;
	if (fscanf(f, "%lld", &quota) != 1)
		quota = -1;
	fclose(f);
	snprintf(path, sizeof path, "%s/cpu/cpu.cfs_period_us", root);
	f = fopen(path, "r");
	if (f == NULL)
		return 0;
	if (fscanf(f, "%lld", &period) != 1)
		period = 0;
	fclose(f);
	return cpus_of_quota(quota, period);
}

int
util_cpus_at(const char *cgroup_root)
{
	cpu_set_t set;
	int n = 0, q;

	if (sched_getaffinity(0, sizeof set, &set) == 0)
		n = CPU_COUNT(&set);
	if (n <= 0) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);

		n = c > 0 ? (int)c : 1;
	}
	q = cpus_cgroup(cgroup_root != NULL ? cgroup_root : "/sys/fs/cgroup");
	if (q > 0 && q < n)
		n = q;
	return n;
}

int
util_cpus(void)
{
	return util_cpus_at(NULL);
}

void
util_thread_name(const char *role)
{
	char name[16];	/* TASK_COMM_LEN */

	snprintf(name, sizeof name, "cairn-%s", role);
	(void)pthread_setname_np(pthread_self(), name);
}

/* write(2) when off < 0, else pwrite(2) at off, until all n bytes are out. */
static int
write_out(int fd, const void *p, size_t n, int64_t off)
{
	const char *c = p;

	while (n > 0) {
		ssize_t w = off < 0 ? write(fd, c, n) :
		    pwrite(fd, c, n, (off_t)off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return -1;
		}
		c += w;
		n -= (size_t)w;
		if (off >= 0)
			off += w;
	}
	return 0;
}

int
util_write_all(int fd, const void *p, size_t n)
{
	return write_out(fd, p, n, -1);
}

int
util_tmpfd(const char *dir, const char *what)
{
	char *tmpl;
	int fd, e;

	if (dir == NULL || dir[0] == '\0')
		dir = getenv("TMPDIR");
	if (dir == NULL || dir[0] == '\0')
		dir = "/tmp";
	tmpl = xasprintf("%s/cairn-%s.XXXXXX", dir, what);
	fd = mkostemp(tmpl, O_CLOEXEC);
	e = errno;
	if (fd >= 0)
		unlink(tmpl);
	free(tmpl);
	errno = e;
	return fd;
}

const char *
util_tmpdir_label(const char *dir)
{
	return dir != NULL && dir[0] != '\0' ? dir : "$TMPDIR or /tmp";
}

int
util_pwrite_all(int fd, const void *p, size_t n, int64_t off)
{
	if (off < 0) {
		errno = EINVAL;
		return -1;
	}
	return write_out(fd, p, n, off);
}
