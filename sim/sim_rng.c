/*
 * sim_rng.c - splitmix64 (sim_rng.h).
 */
#include "sim_rng.h"

void sim_rng_seed(struct sim_rng *rng, uint64_t seed)
{
	rng->state = seed;
}

uint64_t sim_rng_next(struct sim_rng *rng)
{
	uint64_t z = (rng->state += 0x9E3779B97F4A7C15ULL);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

uint64_t sim_rng_below(struct sim_rng *rng, uint64_t n)
{
	if (n == 0)
		return 0;
	/* reject the top partial range so every value is equally likely */
	uint64_t limit = UINT64_MAX - UINT64_MAX % n;
	uint64_t x;
	do
		x = sim_rng_next(rng);
	while (x >= limit);
	return x % n;
}

bool sim_rng_chance(struct sim_rng *rng, int pct)
{
	if (pct <= 0)
		return false;
	if (pct >= 100)
		return true;
	return sim_rng_below(rng, 100) < (uint64_t)pct;
}

uint64_t sim_rng_between(struct sim_rng *rng, uint64_t lo, uint64_t hi)
{
	if (hi <= lo)
		return lo;
	return lo + sim_rng_below(rng, hi - lo + 1);
}
