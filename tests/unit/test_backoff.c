/* backoff.h: the delay as a pure function, the jitter from a source the
 * test controls, and the wait's stop flag; clock.h's monotonic clock. */
#include "trellara/backoff.h"
#include "trellara/clock.h"
#include "unit.h"

#include <math.h>
#include <stdint.h>

static void test_delay(void)
{
	const int64_t base = 500000; /* 0.5 s */
	/* no jitter (unit 0.5): base, doubling, capped at 60 x base */
	CHECK(backoff_delay_us(base, 1, 0.5) == 500000);
	CHECK(backoff_delay_us(base, 2, 0.5) == 1000000);
	CHECK(backoff_delay_us(base, 3, 0.5) == 2000000);
	CHECK(backoff_delay_us(base, 6, 0.5) == 16000000);
	CHECK(backoff_delay_us(base, 7, 0.5) == 30000000); /* 32 s capped at 30 s */
	CHECK(backoff_delay_us(base, 8, 0.5) == 30000000);
	CHECK(backoff_delay_us(base, 1000000, 0.5) == 30000000);
	/* attempt 0 or negative: as the first */
	CHECK(backoff_delay_us(base, 0, 0.5) == 500000);
	CHECK(backoff_delay_us(base, -3, 0.5) == 500000);
	/* jitter: -25 % .. +25 % */
	CHECK(backoff_delay_us(base, 1, 0.0) == 375000);
	CHECK(backoff_delay_us(base, 1, 1.0) == 625000);
	CHECK(backoff_delay_us(base, 7, 1.0) == 37500000);
	CHECK(backoff_delay_us(base, 7, 0.0) == 22500000);
	/* out-of-range units are clamped, NaN counts as 0 */
	CHECK(backoff_delay_us(base, 1, -4.0) == 375000);
	CHECK(backoff_delay_us(base, 1, 9.0) == 625000);
	CHECK(backoff_delay_us(base, 1, NAN) == 375000);
	/* no base: no wait */
	CHECK(backoff_delay_us(0, 5, 1.0) == 0);
	CHECK(backoff_delay_us(-1, 5, 1.0) == 0);
	/* bounded for every attempt */
	for (int attempt = 1; attempt < 200; attempt++) {
		int64_t d = backoff_delay_us(base, attempt, 1.0);
		CHECK(d >= 375000 && d <= 37500000);
	}
}

struct fixed_units {
	const double *units;
	int n, next;
};

static double next_unit(void *arg)
{
	struct fixed_units *f = arg;
	return f->units[f->next++ % f->n];
}

static void test_jitter_source(void)
{
	static const double units[] = { 0.0, 1.0, 0.5 };
	struct fixed_units f = { units, 3, 0 };
	struct backoff_jitter j = { next_unit, &f };
	CHECK(backoff_next_us(1000, 1, &j) == 750);
	CHECK(backoff_next_us(1000, 1, &j) == 1250);
	CHECK(backoff_next_us(1000, 2, &j) == 2000);
	CHECK(f.next == 3);
	/* rand_r: the same seed, the same sequence, always within bounds */
	unsigned int s1 = 42, s2 = 42;
	struct backoff_jitter r1 = backoff_jitter_rand_r(&s1), r2 = backoff_jitter_rand_r(&s2);
	for (int i = 0; i < 100; i++) {
		int64_t a = backoff_next_us(1000000, 3, &r1), b = backoff_next_us(1000000, 3, &r2);
		CHECK(a == b);
		CHECK(a >= 3000000 && a <= 5000000);
	}
}

static int ticks;

static void count_tick(void *arg)
{
	(void)arg;
	ticks++;
}

static void test_wait(void)
{
	/* already stopped: returns without sleeping or ticking */
	volatile sig_atomic_t stop = 1;
	ticks = 0;
	backoff_wait(3600LL * 1000000, &stop, count_tick, NULL);
	CHECK(ticks == 0);
	/* nothing to wait */
	stop = 0;
	backoff_wait(0, &stop, count_tick, NULL);
	CHECK(ticks == 0);
	/* the monotonic clock never goes back */
	int64_t a = clock_mono_us(), b = clock_mono_us();
	CHECK(a > 0 && b >= a);
	CHECK(clock_wall_us() > 1600000000LL * 1000000); /* after 2020 */
}

int main(void)
{
	test_delay();
	test_jitter_source();
	test_wait();
	return unit_done("test_backoff");
}
