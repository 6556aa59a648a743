/*
 * explore_stub.c - stand-ins for the simulation's entry points (run.h),
 * so that trellara-sim links and reports honestly before the simulation
 * exists: every random schedule is "not_run" (which FAILs the run) and no
 * broken variant is known.  They are weak: the simulation's own
 * definitions replace them at link time.
 */
#include "run.h"

#include <stdio.h>
#include <string.h>

__attribute__((weak)) int sim_explore(uint64_t seed, uint64_t index, struct sim_result *result)
{
	memset(result, 0, sizeof *result);
	result->status = SIM_STATUS_NOT_RUN;
	result->seeds[0] = seed;
	result->n_seeds = 1;
	snprintf(result->detail, sizeof result->detail, "schedule %llu: no simulation is linked into this build",
		 (unsigned long long)index);
	return 0;
}

__attribute__((weak)) const char *const *sim_variant_names(void)
{
	static const char *const none[] = { NULL };
	return none;
}

__attribute__((weak)) int sim_variant_select(const char *name)
{
	return name ? -1 : 0;
}
