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

/* Free and set the pointer to NULL. */
#define FREE_NULL(p) do { free(p); (p) = NULL; } while (0)

#endif
