/*
 * run.c - a run's bookkeeping (see run.h): its verdict, and the commands
 * that reproduce what it found.
 */
#include "run.h"

#include "trellara/xalloc.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

void sim_run_init(struct sim_run *run, const struct sim_scenario *registry, size_t n)
{
	memset(run, 0, sizeof *run);
	run->registry = registry;
	run->n = n;
	run->selected = xcalloc(n ? n : 1, sizeof *run->selected);
	run->results = xcalloc(n ? n : 1, sizeof *run->results);
	run->failures = xcalloc(SIM_MAX_RECORDED_FAILURES, sizeof *run->failures);
	sim_build_info_get(&run->build);
}

void sim_run_free(struct sim_run *run)
{
	free(run->selected);
	free(run->results);
	free(run->failures);
	memset(run, 0, sizeof *run);
}

bool sim_run_passed(const struct sim_run *run, const char **why)
{
	const char *reason = NULL;
	size_t checked = 0;
	for (size_t i = 0; i < run->n && !reason; i++) {
		if (!run->selected[i])
			continue;
		switch (run->results[i].status) {
		case SIM_STATUS_PASS: checked++; break;
		case SIM_STATUS_NOT_APPLICABLE: break;
		case SIM_STATUS_FAIL: reason = "a scenario failed"; break;
		case SIM_STATUS_NOT_RUN: reason = "a scenario was not run"; break;
		}
	}
	if (!reason && run->explore_failed > 0)
		reason = "a random schedule failed";
	if (!reason && run->explore_not_run > 0)
		reason = "random schedules were not run";
	if (!reason && checked == 0 && run->explore_passed == 0)
		reason = "nothing was checked";
	if (why)
		*why = reason;
	return reason == NULL;
}

static char *with_variant(const struct sim_run *run, char *cmd)
{
	if (!run->variant)
		return cmd;
	char *full = xasprintf("%s --variant %s", cmd, run->variant);
	free(cmd);
	return full;
}

char *sim_run_reproduce(const struct sim_run *run, size_t i)
{
	const struct sim_result *r = &run->results[i];
	uint64_t seed = r->has_failing_seed ? r->failing_seed : r->n_seeds ? r->seeds[0] : run->seed;
	return with_variant(run, xasprintf("trellara chaos run --scenario %s --seed %" PRIu64, run->registry[i].name, seed));
}

char *sim_run_replay(const struct sim_run *run, const struct sim_exploration_failure *f)
{
	return with_variant(run, xasprintf("trellara chaos run --seed %" PRIu64 " --schedules 1", f->seed));
}

const char *sim_run_reason(const struct sim_run *run, size_t i)
{
	const struct sim_scenario *s = &run->registry[i];
	const struct sim_result *r = &run->results[i];
	switch (r->status) {
	case SIM_STATUS_NOT_APPLICABLE: return s->not_applicable_reason;
	case SIM_STATUS_NOT_RUN:
		return r->detail[0] ? r->detail : "no simulation implements this scenario yet";
	default: return NULL;
	}
}
