/* mem.c: allocation wrappers that abort on out-of-memory, see mem.h. */
#include "config.h"
#include "base/mem.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __GLIBC__		/* defined once a libc header is in */
#include <malloc.h>
#endif

static void
oom(size_t n)
{
	char line[96];
	int len;

	/* No allocation and no stdio buffering here: we are out of memory. */
	len = snprintf(line, sizeof line, "cairn: out of memory (%zu bytes)\n", n);
	if (len > 0)
		(void)!write(STDERR_FILENO, line, (size_t)len);
	abort();
}

void *
xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (p == NULL)
		oom(n);
	return p;
}

void *
xcalloc(size_t nmemb, size_t size)
{
	void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);

	if (p == NULL)
		oom(nmemb * size);
	return p;
}

void *
xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);

	if (q == NULL)
		oom(n);
	return q;
}

void *
xreallocarray(void *p, size_t nmemb, size_t size)
{
	if (size != 0 && nmemb > SIZE_MAX / size)
		oom(SIZE_MAX);
	return xrealloc(p, nmemb * size);
}

char *
xstrdup(const char *s)
{
	if (s == NULL)
		return NULL;
	return xstrndup(s, strlen(s));
}

char *
xstrndup(const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *p = xmalloc(len + 1);

	memcpy(p, s, len);
	p[len] = '\0';
	return p;
}

char *
xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		oom(0);
	return s;
}

void
mem_process_init(void)
{
#if defined(__GLIBC__) && defined(M_ARENA_MAX)
	const char *env = getenv("MALLOC_ARENA_MAX");

	if (env == NULL || env[0] == '\0')
		(void)mallopt(M_ARENA_MAX, MEM_ARENAS);
#endif
}
