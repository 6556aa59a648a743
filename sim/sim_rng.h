/*
 * sim_rng.h - the simulator's only source of randomness: splitmix64
 * (Steele, Lea, Flood 2014), seeded.  One generator per component, so a
 * component's choices do not shift when another one draws more.
 *
 * No global state, no clock, no host randomness: the same seed gives the
 * same sequence on every machine.
 */
#ifndef TRELLARA_SIM_RNG_H
#define TRELLARA_SIM_RNG_H

#include <stdbool.h>
#include <stdint.h>

struct sim_rng {
	uint64_t state;
};

void sim_rng_seed(struct sim_rng *rng, uint64_t seed);
uint64_t sim_rng_next(struct sim_rng *rng);
/* Uniform in [0, n) (0 when n is 0); no modulo bias. */
uint64_t sim_rng_below(struct sim_rng *rng, uint64_t n);
/* True with probability pct / 100 (pct <= 0: never, >= 100: always). */
bool sim_rng_chance(struct sim_rng *rng, int pct);
/* Uniform in [lo, hi] (lo when hi < lo). */
uint64_t sim_rng_between(struct sim_rng *rng, uint64_t lo, uint64_t hi);

#endif
