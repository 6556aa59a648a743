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
	/* trellara-snapshot killed at each of its fault points (as
	 * TRELLARA_FAULT names them), then run again: the run keeps every
	 * invariant, the point was reached, and the run was resumed
	 * (after_handoff_before_stream leaves nothing to resume) */
	static const char *const snapshot_points[] = {
		"snapshot.after_slot_before_record", "snapshot.after_export_before_copy", "snapshot.mid_table_copy",
		"snapshot.after_copy_before_handoff", "snapshot.after_handoff_before_stream",
	};
	for (size_t i = 0; i < sizeof snapshot_points / sizeof *snapshot_points; i++) {
		struct sim_world_options o;
		sim_world_defaults(&o, 11 + i);
		o.snapshot = true;
		o.pre_transactions = 20;
		o.kill_point = snapshot_points[i];
		o.kill_nth = 1;
		struct sim_world_result r;
		bool ok = sim_world_run(&o, &r);
		if (!ok)
			fprintf(stderr, "%s: %s: %s\n", snapshot_points[i], r.invariant, r.detail);
		CHECK(ok);
		CHECK(r.fault_points_hit == 1);
		CHECK(r.tables_copied >= 3);
		if (i >= 1 && i <= 3)
			CHECK(r.snapshot_resumes >= 1);
	}
	/* a schema change during a copy is caught, and the table copied again */
	{
		struct sim_world_options o;
		sim_world_defaults(&o, 5);
		o.snapshot = true;
		o.pre_transactions = 20;
		o.p_copy_ddl = 60;
		struct sim_world_result r;
		CHECK(sim_world_run(&o, &r));
		CHECK(r.schema_changes_caught >= 1);
		CHECK(r.recoverable_failures >= r.schema_changes_caught);
		CHECK(r.snapshot_resumes >= 1);
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
