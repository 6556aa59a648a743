/*
 * explore.c - what the command line runs: random schedules
 * (sim_explore), the named scenarios (sim_run_preset, the registry's run
 * function), and the broken variants this binary was built as.
 *
 * A broken variant is never a switch in the project's code: `make
 * sim-variants` builds one binary per tests/mutants/NAME.patch, with the
 * patched object linked in place of the original and
 * TRELLARA_SIM_VARIANT="NAME" defined here.  Such a binary refuses to run
 * without --variant NAME, so that its results are never mistaken for
 * the real code's.
 */
#include "model_cutover.h"
#include "presets.h"
#include "tamper.h"
#include "run.h"
#include "world.h"

#include "sim_rng.h"

#include <stdio.h>
#include <string.h>

/* Seeds per named scenario: every one must keep every invariant, and at
 * least one must show the scenario's fault and its effect (some seeds'
 * workloads give a fault point nothing to bite on: a crash after a
 * batch that held only a watermark resends nothing). */
#define PRESET_SEEDS 4

static void fill(struct sim_result *out, const struct sim_world_result *r, uint64_t seed)
{
	if (out->n_seeds < SIM_MAX_SEEDS)
		out->seeds[out->n_seeds++] = seed;
	out->counters.transactions += r->transactions;
	out->counters.duplicates_skipped += r->duplicates_skipped + r->capture_skipped;
	out->counters.chunks += r->chunks;
	out->counters.crashes += r->crashes;
	out->counters.power_losses += r->power_losses;
	out->counters.tables_copied += r->tables_copied;
	out->counters.steps += r->steps;
	out->counters.copy_statements += r->copy_statements;
	out->counters.slot_stops_lost_at_promotion += r->slot_stops_lost_at_promotion;
	out->counters.slot_stops_gone += r->slot_stops_gone;
	out->counters.slot_stops_invalidated += r->slot_stops_invalidated;
	out->trace_digest = out->trace_digest * 1099511628211ULL ^ r->trace_digest;
}

static void failed(struct sim_result *out, const char *invariant, const char *detail, uint64_t seed)
{
	out->status = SIM_STATUS_FAIL;
	snprintf(out->failed_invariant, sizeof out->failed_invariant, "%s", invariant);
	snprintf(out->detail, sizeof out->detail, "%s", detail);
	out->has_failing_seed = true;
	out->failing_seed = seed;
}

/* The random schedules that end with a cutover: one in CUTOVER_ONE_IN. */
#define CUTOVER_ONE_IN 4
#define CUTOVER_DRAW 0x637574636d64ULL

static void fill_cutover(struct sim_result *out, const struct sim_cutover_result *r)
{
	out->counters.transactions += r->source_commits;
	out->counters.crashes += r->kills;
	out->counters.steps += r->ticks;
	out->trace_digest = out->trace_digest * 1099511628211ULL ^ r->trace_digest;
}

int sim_explore(uint64_t seed, uint64_t index, struct sim_result *result)
{
	(void)index;
	memset(result, 0, sizeof *result);
	struct sim_world_options o;
	sim_world_random(&o, seed);
	struct sim_world_result r;
	bool ok = sim_world_run(&o, &r);
	fill(result, &r, seed);
	result->workers = o.workers;
	result->status = SIM_STATUS_PASS;
	if (!ok) {
		failed(result, r.invariant, r.detail, seed);
		return 0;
	}
	/* one schedule in CUTOVER_ONE_IN ends with a cutover of its own
	 * (model_cutover.h), drawn from a generator of its own: the world's
	 * draws stay what they were */
	struct sim_rng g;
	sim_rng_seed(&g, seed ^ CUTOVER_DRAW);
	if (sim_rng_below(&g, CUTOVER_ONE_IN) == 0) {
		struct sim_cutover_options co;
		sim_cutover_random(&co, sim_rng_next(&g));
		struct sim_cutover_result cr;
		bool cut_ok = sim_cutover_run(&co, &cr);
		fill_cutover(result, &cr);
		if (!cut_ok)
			failed(result, cr.invariant, cr.detail, seed);
	}
	return 0;
}


/* The scenarios of a damaged relay (tamper.c), by name. */
static const struct {
	const char *name;
	enum sim_tamper kind;
} tampers[] = {
	{ "strict_chunk_manifest_arrives_with_missing_chunk", SIM_TAMPER_MISSING_CHUNK },
	{ "strict_chunk_manifest_missing_chunk", SIM_TAMPER_MISSING_CHUNK },
	{ "strict_chunk_manifest_arrives_before_chunks", SIM_TAMPER_MANIFEST_FIRST },
	{ "strict_chunk_out_of_order_arrival", SIM_TAMPER_OUT_OF_ORDER },
	{ "strict_chunk_checksum_tampering", SIM_TAMPER_CHANGED_BYTES },
	{ "barrier_conflicting_duplicate_messages", SIM_TAMPER_CONFLICTING_MANIFEST },
	{ "strict_chunk_partial_publish_failure", SIM_TAMPER_NO_BARRIER },
};

static int run_tamper(enum sim_tamper kind, uint64_t seed, struct sim_result *result)
{
	result->status = SIM_STATUS_PASS;
	for (uint64_t k = 0; k < PRESET_SEEDS; k++) {
		struct sim_tamper_result r;
		bool ok = sim_tamper_run(kind, seed + k, &r);
		if (result->n_seeds < SIM_MAX_SEEDS)
			result->seeds[result->n_seeds++] = seed + k;
		result->counters.chunks += r.chunks;
		result->trace_digest = result->trace_digest * 1099511628211ULL ^ ((uint64_t)kind << 40 | (uint64_t)(r.exit_code + 1000 * r.chunks));
		if (ok && !r.quarantined) {
			ok = false;
			snprintf(r.detail, sizeof r.detail, "apply stopped, but without a chunk_integrity quarantine entry");
		}
		if (!ok) {
			failed(result, "chunk_barrier_fails_closed", r.detail, seed + k);
			return 0;
		}
	}
	return 0;
}

/* The cutover's scenarios (model_cutover.h): a kill at each of
 * trellara-cutover's fault points, the cutover run again. */
static const struct {
	const char *name;
	const char *point;
} cutovers[] = {
	{ "cutover_killed_after_lock", "cutover.after_lock" },
	{ "cutover_killed_while_waiting_for_apply", "cutover.wait_apply" },
	{ "cutover_killed_before_stop", "cutover.before_stop" },
};

static int run_cutover(const char *point, uint64_t seed, struct sim_result *result)
{
	result->status = SIM_STATUS_PASS;
	bool shown = false;
	for (uint64_t k = 0; k < PRESET_SEEDS; k++) {
		struct sim_cutover_options o;
		sim_cutover_defaults(&o, seed + k, point);
		struct sim_cutover_result r;
		bool ok = sim_cutover_run(&o, &r);
		if (result->n_seeds < SIM_MAX_SEEDS)
			result->seeds[result->n_seeds++] = seed + k;
		fill_cutover(result, &r);
		if (!ok) {
			failed(result, r.invariant, r.detail, seed + k);
			return 0;
		}
		if (r.point_hit && r.completed)
			shown = true;
	}
	if (!shown) {
		char why[SIM_DETAIL_LEN];
		snprintf(why, sizeof why, "no seed killed the cutover at %s and then completed it", point);
		failed(result, "scenario_exercised", why, seed);
	}
	return 0;
}

bool sim_scenario_simulated(const char *name)
{
	for (size_t i = 0; i < sizeof cutovers / sizeof *cutovers; i++)
		if (strcmp(cutovers[i].name, name) == 0)
			return true;
	if (strcmp(name, "pgoutput_row_without_relation_metadata") == 0 || strcmp(name, "missing_replica_identity") == 0 ||
	    strcmp(name, "pgoutput_schema_change_during_stream") == 0 || strcmp(name, "source_schema_handoff_recovery") == 0)
		return true;
	for (size_t i = 0; i < sizeof tampers / sizeof *tampers; i++)
		if (strcmp(tampers[i].name, name) == 0)
			return true;
	return sim_preset_find(name) != NULL;
}

static int run_outside_world(bool (*run)(uint64_t, char *, size_t), const char *invariant, uint64_t seed,
			     struct sim_result *result)
{
	result->status = SIM_STATUS_PASS;
	for (uint64_t k = 0; k < PRESET_SEEDS; k++) {
		char detail[SIM_DETAIL_LEN];
		if (result->n_seeds < SIM_MAX_SEEDS)
			result->seeds[result->n_seeds++] = seed + k;
		if (!run(seed + k, detail, sizeof detail)) {
			failed(result, invariant, detail, seed + k);
			return 0;
		}
		result->trace_digest = result->trace_digest * 1099511628211ULL ^ (seed + k);
	}
	return 0;
}

int sim_run_preset(const struct sim_scenario *s, uint64_t seed, struct sim_result *result)
{
	memset(result, 0, sizeof *result);
	if (strcmp(s->name, "pgoutput_row_without_relation_metadata") == 0)
		return run_outside_world(sim_missing_relation_run, "relation_metadata_required_before_rows", seed, result);
	if (strcmp(s->name, "missing_replica_identity") == 0)
		return run_outside_world(sim_no_identity_run, "preflight_before_cdc_start", seed, result);
	if (strcmp(s->name, "pgoutput_schema_change_during_stream") == 0)
		return run_outside_world(sim_renamed_relation_run, "source_schema_fingerprint_fail_closed", seed, result);
	if (strcmp(s->name, "source_schema_handoff_recovery") == 0)
		return run_outside_world(sim_recreated_relation_run, "schema_drift_requires_fresh_snapshot_handoff", seed,
					 result);
	for (size_t i = 0; i < sizeof tampers / sizeof *tampers; i++)
		if (strcmp(tampers[i].name, s->name) == 0)
			return run_tamper(tampers[i].kind, seed, result);
	for (size_t i = 0; i < sizeof cutovers / sizeof *cutovers; i++)
		if (strcmp(cutovers[i].name, s->name) == 0)
			return run_cutover(cutovers[i].point, seed, result);
	const struct sim_preset *p = sim_preset_find(s->name);
	if (!p) {
		result->status = SIM_STATUS_NOT_RUN;
		snprintf(result->detail, sizeof result->detail, "no simulation of this scenario is built yet");
		return 0;
	}
	result->status = SIM_STATUS_PASS;
	bool shown = false;
	char why[SIM_DETAIL_LEN] = "";
	uint64_t seeds = sim_preset_seeds(p);
	for (uint64_t k = 0; k < seeds; k++) {
		struct sim_world_options o;
		sim_world_defaults(&o, seed + k);
		p->setup(&o);
		struct sim_world_result r;
		bool ok = sim_world_run(&o, &r);
		fill(result, &r, seed + k);
		if (!ok) {
			failed(result, r.invariant, r.detail, seed + k);
			return 0;
		}
		if (p->expect(&r, why, sizeof why))
			shown = true;
	}
	if (!shown)
		failed(result, "scenario_exercised", why, seed);
	return 0;
}

static const char *const variants[] = { "ack_before_fsync", "skip_dedup", "idle_commits_chunk_set",
					"retention_ignores_group", "snapshot_ignores_schema_change", "fold_forgets_updated_row_delete",
					"commit_out_of_order", "copy_drops_last_insert", "failure_keeps_unrecorded_lock",
					"new_slot_after_promotion", "ack_on_held_sync", "ack_before_broker_quorum",
					"pending_cut_ignored", "fence_one_step", "split_resume_keeps_changed_range",
					"publish_counts_frames_past_refusal", "relbind_ignores_rename", "relbind_ignores_new_oid", NULL };

const char *const *sim_variant_names(void)
{
	return variants;
}

int sim_variant_select(const char *name)
{
#ifdef TRELLARA_SIM_VARIANT
	return name && strcmp(name, TRELLARA_SIM_VARIANT) == 0 ? 0 : -1;
#else
	return name ? -1 : 0;
#endif
}
