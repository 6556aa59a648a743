/*
 * backoff.h - the one reconnect/retry backoff (capture, applyd, verify).
 *
 * Attempt 1 waits base; each further attempt doubles it, up to
 * BACKOFF_CAP_FACTOR x base; each delay is then scaled by a jitter factor
 * in [0.75, 1.25] (+-25 %), so that processes restarted together do not
 * retry together.  The computation is pure (backoff_delay_us); the jitter
 * comes from a source the caller owns (struct backoff_jitter: a seeded
 * rand_r state in the programs, a fixed sequence in tests).
 *
 * backoff_wait() sleeps on the monotonic clock until the delay has passed
 * or *stop is set, calling tick (the systemd watchdog) about every 50 ms.
 * Nothing here logs, allocates or fails.
 */
#ifndef TRELLARA_BACKOFF_H
#define TRELLARA_BACKOFF_H

#include <signal.h>
#include <stdint.h>

#define BACKOFF_CAP_FACTOR 60

/* The delay before attempt (1, 2, ...; below 1 counts as 1) with
 * base_us as the first delay and unit in [0, 1] choosing the jitter
 * (0: -25 %, 0.5: none, 1: +25 %; out-of-range values are clamped).
 * Never negative; base_us <= 0 gives 0. */
int64_t backoff_delay_us(int64_t base_us, int attempt, double unit);

/* Where the jitter comes from: next() returns a value in [0, 1]. */
struct backoff_jitter {
	double (*next)(void *arg);
	void *arg;
};
/* A jitter source over rand_r(seed) (seed owned by the caller). */
struct backoff_jitter backoff_jitter_rand_r(unsigned int *seed);
/* A seed that differs between processes started at the same moment. */
unsigned int backoff_seed(void);

/* backoff_delay_us() with the next jitter unit from j. */
int64_t backoff_next_us(int64_t base_us, int attempt, const struct backoff_jitter *j);

/* Sleeps delay_us on the monotonic clock, or until *stop; tick (may be
 * NULL) is called with tick_arg before each slice of at most 50 ms. */
void backoff_wait(int64_t delay_us, const volatile sig_atomic_t *stop, void (*tick)(void *), void *tick_arg);

#endif
