/*
 * unit.h - the smallest test harness that does the job: CHECK records a
 * failure with file and line and goes on; unit_done() prints a summary
 * and gives main its exit status.
 */
#ifndef TRELLARA_UNIT_H
#define TRELLARA_UNIT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int unit_failures;
static int unit_checks;

#define CHECK(cond)                                                                  \
	do {                                                                         \
		unit_checks++;                                                       \
		if (!(cond)) {                                                       \
			unit_failures++;                                             \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
		}                                                                    \
	} while (0)

#define CHECK_STR(a, b)                                                              \
	do {                                                                         \
		const char *a_ = (a), *b_ = (b);                                     \
		unit_checks++;                                                       \
		if (!a_ || !b_ || strcmp(a_, b_) != 0) {                             \
			unit_failures++;                                             \
			fprintf(stderr, "%s:%d: \"%s\" != \"%s\"\n", __FILE__, __LINE__, \
				a_ ? a_ : "(null)", b_ ? b_ : "(null)");             \
		}                                                                    \
	} while (0)

/*
 * Room for element n of an array that holds n elements (n counts from 0):
 * the capacity doubles at 16, 32, 64 ..., so appending one at a time is
 * linear (growing by one each time is quadratic under ASan, whose realloc
 * always copies).  Returns the possibly moved array; exits when out of memory.
 */
static inline void *unit_grow(void *array, size_t n, size_t elem)
{
	if (n > 0 && (n < 16 || (n & (n - 1)) != 0))
		return array;
	void *p = realloc(array, (n < 16 ? 16 : 2 * n) * elem);
	if (!p) {
		fprintf(stderr, "unit_grow: out of memory\n");
		exit(2);
	}
	return p;
}

static inline int unit_done(const char *name)
{
	printf("%s: %d checks, %d failed\n", name, unit_checks, unit_failures);
	return unit_failures ? 1 : 0;
}

#endif
