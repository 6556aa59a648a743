/*
 * run.h - one `trellara chaos run`: its metadata, the results of the
 * registry's entries, the random exploration, and the run file
 * (trellara-chaos-run/1, documented in trellara-chaos(1)) written from it.
 *
 * Also the simulation's entry points, which the simulation itself
 * provides (sim/explore_stub.c holds weak stand-ins that run nothing, so
 * that every schedule is reported "not_run" and the run FAILs until the
 * simulation links in).
 *
 * Determinism.  Everything but started_at, duration_ms and
 * schedules_per_second is a function of the seed, the schedule count, the
 * variant, the scenario filter and the build: the same arguments give the
 * same results, the same trace digests and the same text output.
 */
#ifndef TRELLARA_SIM_RUN_H
#define TRELLARA_SIM_RUN_H

#include "scenarios.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SIM_RUN_FORMAT "trellara-chaos-run/1"

/* Where the binary was built from (sim/buildinfo.c, from the header the
 * Makefile generates with sim/source-info.sh). */
struct sim_build_info {
	const char *revision; /* git rev-parse HEAD, or "unknown" */
	bool dirty;           /* the source differed from revision when built */
	const char *tree;     /* the source tree hash (sim/source-info.sh tree), or "unknown" */
	const char *cc;
	const char *cflags;
};
void sim_build_info_get(struct sim_build_info *info);

/* A failed random schedule. */
struct sim_exploration_failure {
	uint64_t seed;  /* the schedule's own seed: --seed SEED --schedules 1 replays it */
	uint64_t index; /* its index in this run */
	char invariant[SIM_INVARIANT_LEN];
	char detail[SIM_DETAIL_LEN];
	uint64_t trace_digest;
	int workers;    /* the schedule's apply.workers */
};

/* The most apply.workers a schedule draws. */
#define SIM_MAX_WORKERS 4

/* At most this many failed schedules are kept (all are counted). */
#define SIM_MAX_RECORDED_FAILURES 100

struct sim_run {
	uint64_t seed;
	uint64_t schedules;      /* random schedules run: seeds seed, seed+1, ... */
	const char *variant;     /* a deliberately broken variant, or NULL */
	const char *scenario;    /* --scenario NAME, or NULL: every entry */
	struct sim_build_info build;
	char started_at[32];     /* ISO-8601 UTC, to the second */
	uint64_t duration_us;     /* wall-clock time of the run (not of the simulation) */

	const struct sim_scenario *registry; /* not owned */
	size_t n;
	bool *selected;             /* owned, n: the entries this run reports */
	struct sim_result *results; /* owned, n: parallel to registry */

	struct sim_counters explore_counters; /* summed over the schedules */
	uint64_t explore_passed, explore_failed, explore_not_run;
	uint64_t explore_by_workers[SIM_MAX_WORKERS + 1]; /* schedules per apply.workers */
	uint64_t explore_digest; /* a digest of every schedule's trace digest, in order */
	struct sim_exploration_failure *failures; /* owned, n_failures <= SIM_MAX_RECORDED_FAILURES */
	size_t n_failures;
};

void sim_run_init(struct sim_run *run, const struct sim_scenario *registry, size_t n);
void sim_run_free(struct sim_run *run);
/* PASS: every reported entry passed or is not applicable, no schedule
 * failed or went unrun, and something was checked.  *why (may be NULL)
 * says why not, in a few words. */
bool sim_run_passed(const struct sim_run *run, const char **why);
/* The exact command that reproduces entry i / failed schedule f. */
char *sim_run_reproduce(const struct sim_run *run, size_t i);         /* owned by the caller */
char *sim_run_replay(const struct sim_run *run, const struct sim_exploration_failure *f); /* owned by the caller */
/* The reason an entry was not checked ("not_applicable" reason or why
 * it did not run), or NULL. */
const char *sim_run_reason(const struct sim_run *run, size_t i);

/* The run file (sim/run_json.c); 0, or -1 on a write error. */
int sim_run_write_json(FILE *out, const struct sim_run *run);

/* `trellara chaos report` (sim/report.c): writes the HTML page for the
 * run file at input to output.  On failure fills err and returns
 * SIM_REPORT_BAD_INPUT (not a readable trellara-chaos-run/1 file) or
 * SIM_REPORT_CANT_WRITE. */
enum sim_report_status { SIM_REPORT_OK = 0, SIM_REPORT_BAD_INPUT, SIM_REPORT_CANT_WRITE };
enum sim_report_status sim_report_write(const char *input, const char *output, char *err, size_t errlen);

/* ---- provided by the simulation ---- */

/* Runs one random schedule: workload and fault plan chosen from seed
 * alone (index only names it in messages), result filled; 0, or -1 when
 * it could not run at all.  The stand-in sets status not_run. */
int sim_explore(uint64_t seed, uint64_t index, struct sim_result *result);
/* The deliberately broken variants the simulation can build in (NULL-
 * terminated), and the selection of one for this process (NULL: none);
 * -1 for a name not in the list. */
const char *const *sim_variant_names(void);
/* The registry's run function of every applicable entry: the named
 * scenario's preset (sim/presets.c) over a few seeds; not_run when the
 * scenario has no preset yet. */
int sim_run_preset(const struct sim_scenario *scenario, uint64_t seed, struct sim_result *result);
/* Whether sim_run_preset simulates the scenario (else it reports not_run). */
bool sim_scenario_simulated(const char *name);
int sim_variant_select(const char *name);

#endif
