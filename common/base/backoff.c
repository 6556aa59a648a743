#include "trellara/backoff.h"

#include "trellara/clock.h"

#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int64_t backoff_delay_us(int64_t base_us, int attempt, double unit)
{
	if (base_us <= 0)
		return 0;
	int64_t cap = base_us * BACKOFF_CAP_FACTOR, delay = base_us;
	for (int i = 1; i < attempt && delay < cap; i++)
		delay *= 2;
	if (delay > cap)
		delay = cap;
	if (!(unit >= 0)) /* NaN too */
		unit = 0;
	if (unit > 1)
		unit = 1;
	return (int64_t)((double)delay * (0.75 + 0.5 * unit));
}

static double rand_r_unit(void *arg)
{
	return (double)rand_r(arg) / RAND_MAX;
}

struct backoff_jitter backoff_jitter_rand_r(unsigned int *seed)
{
	return (struct backoff_jitter){ rand_r_unit, seed };
}

unsigned int backoff_seed(void)
{
	return (unsigned int)clock_wall_us() ^ (unsigned int)getpid();
}

int64_t backoff_next_us(int64_t base_us, int attempt, const struct backoff_jitter *j)
{
	return backoff_delay_us(base_us, attempt, j->next(j->arg));
}

void backoff_wait(int64_t delay_us, const volatile sig_atomic_t *stop, void (*tick)(void *), void *tick_arg)
{
	int64_t until = clock_mono_us() + delay_us;
	for (int64_t now = clock_mono_us(); !*stop && now < until; now = clock_mono_us()) {
		if (tick)
			tick(tick_arg);
		int64_t slice = until - now < 50000 ? until - now : 50000;
		struct timespec ts = { 0, (long)slice * 1000 };
		nanosleep(&ts, NULL);
	}
}
