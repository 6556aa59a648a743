/*
 * apply_outcome.h - what a step of the apply loop tells its caller.
 *
 * One value instead of an overloaded int: the step went through
 * (APPLY_OK), a statement failed and the executor holds the error
 * (APPLY_FAILED: the caller decides between culprit hunt, retry and
 * quarantine), the connection must be rebuilt (APPLY_RECONNECT), the
 * target failed transiently and the same work is applied again after a
 * backoff (APPLY_RETRY), or apply stops with a documented exit code
 * (APPLY_EXIT, exit_code from defaults.h).  Only main turns an outcome
 * into the process's exit status (apply_outcome_exit_code).
 */
#ifndef TRELLARA_APPLY_OUTCOME_H
#define TRELLARA_APPLY_OUTCOME_H

#include "trellara/defaults.h"

#include <stdbool.h>

enum apply_status {
	APPLY_OK,
	APPLY_FAILED,
	APPLY_RECONNECT,
	APPLY_RETRY,
	APPLY_EXIT,
};

struct apply_outcome {
	enum apply_status status;
	int exit_code; /* APPLY_EXIT only */
};

static inline struct apply_outcome apply_ok(void) { return (struct apply_outcome){ APPLY_OK, 0 }; }
static inline struct apply_outcome apply_failed(void) { return (struct apply_outcome){ APPLY_FAILED, 0 }; }
static inline struct apply_outcome apply_reconnect(void) { return (struct apply_outcome){ APPLY_RECONNECT, 0 }; }
static inline struct apply_outcome apply_retry(void) { return (struct apply_outcome){ APPLY_RETRY, 0 }; }
static inline struct apply_outcome apply_exit(int exit_code)
{
	return (struct apply_outcome){ APPLY_EXIT, exit_code };
}
static inline bool apply_is_ok(struct apply_outcome o) { return o.status == APPLY_OK; }

/* The process exit status for an outcome that ends apply: APPLY_OK is a
 * requested stop (0); APPLY_EXIT its code; APPLY_FAILED (a statement
 * error nobody handled, which the loop does not let through) is treated
 * as a quarantine (1); a reconnect or retry that reaches main is the
 * target being unavailable (69). */
static inline int apply_outcome_exit_code(struct apply_outcome o)
{
	switch (o.status) {
	case APPLY_OK: return EXIT_OK;
	case APPLY_EXIT: return o.exit_code;
	case APPLY_FAILED: return EXIT_NEGATIVE;
	case APPLY_RECONNECT:
	case APPLY_RETRY: break;
	}
	return EXIT_UNAVAILABLE;
}

#endif
