/*
 * mem.h: allocation wrappers. They never return NULL: on out-of-memory they
 * log one line and abort, so callers need no NULL checks (as Redis's
 * zmalloc). Sizes are checked for multiplication overflow.
 */
#ifndef CAIRN_MEM_H
#define CAIRN_MEM_H

#include <stddef.h>
#include "base/err.h"

void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *p, size_t n);
void *xreallocarray(void *p, size_t nmemb, size_t size);
char *xstrdup(const char *s);		/* xstrdup(NULL) returns NULL */
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) CAIRN_PRINTF(1, 2);

/*
 * Process-wide allocator settings; call once at the start of main(),
 * before any thread. glibc gives each thread that allocates while
 * another holds an arena a new arena (up to 8 per core), each keeping
 * what it freed: at 100k objects a backup's fetchers, compression
 * threads and walk peaked 3-6 MiB higher than with two arenas, and were
 * no faster (issue 27's peak RSS). So at most MEM_ARENAS arenas, unless $MALLOC_ARENA_MAX says
 * otherwise. No-op without glibc's mallopt().
 */
#define MEM_ARENAS 2
void mem_process_init(void);

/* Free and set the pointer to NULL. */
#define FREE_NULL(p) do { free(p); (p) = NULL; } while (0)

#endif
