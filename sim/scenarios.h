/*
 * scenarios.h - the registry of the simulator's named scenarios: one entry
 * for each of the 28 simulations and each curated row of the failure
 * matrix (../shared/CHAOS-MATRIX.md, by the same names and numbers), and
 * the project's own simulations of trellara cutover (family "cutover"), with
 * the invariant each protects, what the simulator checks, the live bats
 * test of the same boundary, the operator's recovery command, and, for a
 * row whose feature this project does not have, why it is not applicable.
 *
 * Contract.  The table is static and complete: `trellara chaos run`
 * reports every entry, and an entry that is applicable but has no run
 * function is reported "not_run", which fails the run (it is never
 * "pass").  A run function fills struct sim_result and returns 0; it
 * returns -1 only when it could not run at all (its result then says
 * why, status fail).  Deterministic: a run is a function of the entry
 * and the seed alone (no clock, no host randomness, no threads).
 */
#ifndef TRELLARA_SIM_SCENARIOS_H
#define TRELLARA_SIM_SCENARIOS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum sim_kind { SIM_KIND_SIMULATION, SIM_KIND_CURATED };

enum sim_status {
	SIM_STATUS_NOT_RUN = 0, /* applicable, but nothing ran it: a failure of the run */
	SIM_STATUS_PASS,
	SIM_STATUS_FAIL,
	SIM_STATUS_NOT_APPLICABLE
};

/* What a run did. */
struct sim_counters {
	uint64_t transactions;       /* source transactions committed */
	uint64_t duplicates_skipped; /* redeliveries the applier skipped */
	uint64_t chunks;             /* chunk frames written */
	uint64_t tables_copied;      /* snapshot table copies completed */
	uint64_t crashes;            /* components killed */
	uint64_t power_losses;       /* simulated file-system power losses */
	uint64_t steps;              /* scheduler steps */
	uint64_t copy_statements;    /* COPYs of runs of inserts applyd sent (committed batches) */
	/* capture stopped by its slot (exit 65), by slot_policy verdict */
	uint64_t slot_stops_lost_at_promotion, slot_stops_gone, slot_stops_invalidated;
};

#define SIM_MAX_SEEDS 32
#define SIM_INVARIANT_LEN 96
#define SIM_DETAIL_LEN 512

struct sim_result {
	enum sim_status status;
	uint64_t seeds[SIM_MAX_SEEDS]; /* the seeds the run used, in order */
	size_t n_seeds;
	struct sim_counters counters;
	/* on failure: the invariant that broke, one line of detail (table,
	 * key, LSN, step ...), and the seed that replays it */
	char failed_invariant[SIM_INVARIANT_LEN];
	char detail[SIM_DETAIL_LEN];
	bool has_failing_seed;
	uint64_t failing_seed;
	/* a digest of the run's trace (every step and choice): equal seeds,
	 * equal digests */
	uint64_t trace_digest;
	/* a random schedule: its apply.workers (0: not a schedule) */
	int workers;
};

struct sim_scenario;
typedef int (*sim_run_fn)(const struct sim_scenario *scenario, uint64_t seed, struct sim_result *result);

struct sim_scenario {
	const char *name; /* as in CHAOS-MATRIX.md */
	enum sim_kind kind;
	int number;           /* curated: the row's number in CHAOS-MATRIX.md; simulations: 0 */
	const char *family;   /* simulations: "base", "snapshot handoff", ...; curated: NULL */
	const char *boundary; /* curated: the boundary it crosses; simulations: NULL */
	int matrix_row;       /* simulations: the curated row of the same boundary, 0 when none */
	const char *invariant; /* the invariant's name, as in the matrix */
	const char *check;     /* what the simulator checks, one sentence */
	const char *live_file; /* the bats file of the live test of the same boundary, or NULL */
	const char *live_name; /* its @test name, exactly; NULL with live_file */
	const char *recovery;  /* the operator's command, or "none needed: automatic ..."; NULL: none */
	const char *not_applicable_reason; /* NULL: applicable */
	sim_run_fn run;                    /* NULL: not implemented yet (not_run) */
};

extern const struct sim_scenario sim_scenarios[];
extern const size_t sim_n_scenarios;

/* The number of entries of a kind; of those, how many are applicable. */
size_t sim_scenarios_count(enum sim_kind kind, size_t *applicable);
/* The first entry named name at or after index *from (set to its index),
 * or NULL.  A simulation and a curated row may share a name: they cross
 * the same boundary, and --scenario NAME runs both. */
const struct sim_scenario *sim_scenario_next(const char *name, size_t *from);

const char *sim_status_name(enum sim_status status); /* "pass", "not_run", ... */
const char *sim_kind_name(enum sim_kind kind);       /* "simulation", "curated" */

#endif
