/*
 * test_sim_world.c - the simulator's world under the sanitizers (make unit
 * runs every unit test plain and with ASan/UBSan): random schedules and
 * the damaged-relay runs must keep every invariant and leak nothing, and
 * the same seed must give the same trace.
 */
#include "tamper.h"
#include "world.h"
#include "unit.h"

#include <stdio.h>

int main(void)
{
	for (uint64_t seed = 1; seed <= 40; seed++) {
		struct sim_world_options o;
		sim_world_random(&o, seed);
		struct sim_world_result r;
		bool ok = sim_world_run(&o, &r);
		if (!ok)
			fprintf(stderr, "seed %llu: %s: %s\n", (unsigned long long)seed, r.invariant, r.detail);
		CHECK(ok);
		CHECK(r.steps > 0);
	}
	/* one seed, one run */
	struct sim_world_options o;
	sim_world_random(&o, 3);
	struct sim_world_result a, b;
	sim_world_run(&o, &a);
	sim_world_run(&o, &b);
	CHECK(a.trace_digest == b.trace_digest && a.steps == b.steps && a.applied == b.applied);
	sim_world_random(&o, 4);
	sim_world_run(&o, &b);
	CHECK(a.trace_digest != b.trace_digest);
	for (int k = SIM_TAMPER_MISSING_CHUNK; k <= SIM_TAMPER_NO_BARRIER; k++) {
		struct sim_tamper_result t;
		bool ok = sim_tamper_run((enum sim_tamper)k, 1, &t);
		if (!ok)
			fprintf(stderr, "tamper %d: %s\n", k, t.detail);
		CHECK(ok);
		CHECK(t.quarantined);
	}
	return unit_done("sim_world");
}
