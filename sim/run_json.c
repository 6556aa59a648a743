/*
 * run_json.c - the run file, trellara-chaos-run/1 (trellara-chaos(1),
 * "RUN FILE"): one JSON object.  Field names are stable; new fields may
 * be added.  64-bit digests are hex strings so that JSON readers that
 * hold numbers as doubles (jq) keep them exact.
 */
#include "run.h"

#include "json.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void write_hex(struct json_writer *w, const char *key, uint64_t v)
{
	char buf[24];
	snprintf(buf, sizeof buf, "%016" PRIx64, v);
	jw_string(w, key, buf);
}

static void write_counters(struct json_writer *w, const char *key, const struct sim_counters *c)
{
	jw_object(w, key);
	jw_uint(w, "transactions", c->transactions);
	jw_uint(w, "duplicates_skipped", c->duplicates_skipped);
	jw_uint(w, "chunks", c->chunks);
	jw_uint(w, "tables_copied", c->tables_copied);
	jw_uint(w, "crashes", c->crashes);
	jw_uint(w, "power_losses", c->power_losses);
	jw_uint(w, "steps", c->steps);
	jw_end(w);
}

static void add_counters(struct sim_counters *sum, const struct sim_counters *c)
{
	sum->transactions += c->transactions;
	sum->duplicates_skipped += c->duplicates_skipped;
	sum->chunks += c->chunks;
	sum->tables_copied += c->tables_copied;
	sum->crashes += c->crashes;
	sum->power_losses += c->power_losses;
	sum->steps += c->steps;
}

static void write_entry(struct json_writer *w, const struct sim_run *run, size_t i)
{
	const struct sim_scenario *s = &run->registry[i];
	const struct sim_result *r = &run->results[i];
	bool ran = r->status == SIM_STATUS_PASS || r->status == SIM_STATUS_FAIL;
	bool failed = r->status == SIM_STATUS_FAIL;

	jw_object(w, NULL);
	if (s->kind == SIM_KIND_CURATED)
		jw_int(w, "number", s->number);
	jw_string(w, "name", s->name);
	if (s->kind == SIM_KIND_CURATED) {
		jw_string(w, "boundary", s->boundary);
	} else {
		jw_string(w, "family", s->family);
		if (s->matrix_row)
			jw_int(w, "matrix_row", s->matrix_row);
		else
			jw_null(w, "matrix_row");
	}
	jw_string(w, "status", sim_status_name(r->status));
	jw_string(w, "reason", sim_run_reason(run, i));
	jw_string(w, "invariant", s->invariant);
	jw_string(w, "check", s->check);
	jw_string(w, "failed_invariant", failed && r->failed_invariant[0] ? r->failed_invariant : NULL);
	jw_string(w, "detail", failed && r->detail[0] ? r->detail : NULL);
	jw_array(w, "seeds");
	for (size_t k = 0; k < r->n_seeds && k < SIM_MAX_SEEDS; k++)
		jw_uint(w, NULL, r->seeds[k]);
	jw_end(w);
	if (failed && r->has_failing_seed)
		jw_uint(w, "failing_seed", r->failing_seed);
	else
		jw_null(w, "failing_seed");
	if (ran)
		write_hex(w, "trace_digest", r->trace_digest);
	else
		jw_null(w, "trace_digest");
	write_counters(w, "counters", &r->counters);
	if (s->not_applicable_reason) {
		jw_null(w, "reproduce");
	} else {
		char *cmd = sim_run_reproduce(run, i);
		jw_string(w, "reproduce", cmd);
		free(cmd);
	}
	if (s->live_file && s->live_name) {
		jw_object(w, "live_test");
		jw_string(w, "file", s->live_file);
		jw_string(w, "name", s->live_name);
		jw_end(w);
	} else {
		jw_null(w, "live_test");
	}
	jw_string(w, "recovery", s->recovery);
	jw_end(w);
}

int sim_run_write_json(FILE *out, const struct sim_run *run)
{
	struct json_writer w;
	const char *why = NULL;
	bool pass = sim_run_passed(run, &why);
	uint64_t by_status[4] = { 0 };
	uint64_t reported = 0, applicable[2] = { 0 }, entries[2] = { 0 };
	struct sim_counters sum = { 0 };

	for (size_t i = 0; i < run->n; i++) {
		if (!run->selected[i])
			continue;
		reported++;
		by_status[run->results[i].status]++;
		entries[run->registry[i].kind]++;
		if (!run->registry[i].not_applicable_reason)
			applicable[run->registry[i].kind]++;
		add_counters(&sum, &run->results[i].counters);
	}
	add_counters(&sum, &run->explore_counters);

	jw_init(&w, out);
	jw_object(&w, NULL);
	jw_string(&w, "format", SIM_RUN_FORMAT);
	jw_string(&w, "result", pass ? "PASS" : "FAIL");
	jw_string(&w, "result_reason", why);
	jw_uint(&w, "seed", run->seed);
	jw_uint(&w, "schedules", run->schedules);
	jw_string(&w, "variant", run->variant ? run->variant : "none");
	jw_string(&w, "scenario", run->scenario);
	jw_string(&w, "revision", run->build.revision);
	jw_string(&w, "tree", run->build.tree);
	jw_bool(&w, "dirty", run->build.dirty);
	jw_object(&w, "build");
	jw_string(&w, "cc", run->build.cc);
	jw_string(&w, "cflags", run->build.cflags);
	jw_end(&w);
	jw_string(&w, "started_at", run->started_at);
	jw_uint(&w, "duration_ms", run->duration_us / 1000);
	if (run->duration_us)
		jw_double(&w, "schedules_per_second", (double)run->schedules * 1e6 / (double)run->duration_us);
	else
		jw_null(&w, "schedules_per_second");

	jw_object(&w, "totals");
	jw_uint(&w, "entries", reported);
	jw_uint(&w, "simulations", entries[SIM_KIND_SIMULATION]);
	jw_uint(&w, "simulations_applicable", applicable[SIM_KIND_SIMULATION]);
	jw_uint(&w, "curated", entries[SIM_KIND_CURATED]);
	jw_uint(&w, "curated_applicable", applicable[SIM_KIND_CURATED]);
	jw_uint(&w, "pass", by_status[SIM_STATUS_PASS]);
	jw_uint(&w, "fail", by_status[SIM_STATUS_FAIL]);
	jw_uint(&w, "not_applicable", by_status[SIM_STATUS_NOT_APPLICABLE]);
	jw_uint(&w, "not_run", by_status[SIM_STATUS_NOT_RUN]);
	jw_uint(&w, "schedules_passed", run->explore_passed);
	jw_uint(&w, "schedules_failed", run->explore_failed);
	jw_uint(&w, "schedules_not_run", run->explore_not_run);
	write_counters(&w, "counters", &sum);
	jw_end(&w);

	jw_array(&w, "simulations");
	for (size_t i = 0; i < run->n; i++)
		if (run->selected[i] && run->registry[i].kind == SIM_KIND_SIMULATION)
			write_entry(&w, run, i);
	jw_end(&w);
	jw_array(&w, "scenarios");
	for (size_t i = 0; i < run->n; i++)
		if (run->selected[i] && run->registry[i].kind == SIM_KIND_CURATED)
			write_entry(&w, run, i);
	jw_end(&w);

	jw_object(&w, "exploration");
	jw_uint(&w, "schedules", run->schedules);
	jw_uint(&w, "passed", run->explore_passed);
	jw_uint(&w, "failed", run->explore_failed);
	jw_uint(&w, "not_run", run->explore_not_run);
	write_hex(&w, "digest", run->explore_digest);
	write_counters(&w, "counters", &run->explore_counters);
	jw_array(&w, "failures");
	for (size_t k = 0; k < run->n_failures; k++) {
		const struct sim_exploration_failure *f = &run->failures[k];
		char *replay = sim_run_replay(run, f);
		jw_object(&w, NULL);
		jw_uint(&w, "seed", f->seed);
		jw_uint(&w, "index", f->index);
		jw_string(&w, "invariant", f->invariant);
		jw_string(&w, "detail", f->detail);
		write_hex(&w, "trace_digest", f->trace_digest);
		jw_string(&w, "replay", replay);
		jw_end(&w);
		free(replay);
	}
	jw_end(&w);
	jw_end(&w);

	jw_end(&w);
	fputc('\n', out);
	return jw_finish(&w);
}
