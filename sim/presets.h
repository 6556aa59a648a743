/*
 * presets.h - the named scenarios' world options and expectations.
 */
#ifndef TRELLARA_SIM_PRESETS_H
#define TRELLARA_SIM_PRESETS_H

#include "world.h"

#include <stdbool.h>
#include <stddef.h>

struct sim_preset {
	const char *name;
	void (*setup)(struct sim_world_options *o);
	/* beyond the invariants: did the run do what the scenario is about? */
	bool (*expect)(const struct sim_world_result *r, char *why, size_t why_len);
};

/* The preset of a scenario, or NULL (the scenario is not simulated yet). */
const struct sim_preset *sim_preset_find(const char *name);
/* How many seeds (from the run's on) the scenario runs: 4, or more for one
 * whose fault lines up on fewer seeds. */
unsigned sim_preset_seeds(const struct sim_preset *p);

#endif
