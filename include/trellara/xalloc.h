/*
 * xalloc.h - allocation wrappers that abort on out-of-memory instead of
 * returning NULL, so callers never carry an OOM path.  Ownership of what
 * they return passes to the caller.
 */
#ifndef TRELLARA_XALLOC_H
#define TRELLARA_XALLOC_H

#include <stddef.h>

void *xmalloc(size_t size);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *ptr, size_t size);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* printf into a new string */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
