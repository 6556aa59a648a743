/*
 * run_json.c - the run file, trellara-chaos-run/1 (trellara-chaos(1),
 * "RUN FILE"): one JSON object.  Field names are stable; new fields may
 * be added.  64-bit digests are hex strings so that JSON readers that
 * hold numbers as doubles (jq) keep them exact.
 */
#include "run.h"

#include "trellara/jsonw.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void write_hex(struct jsonw *w, const char *key, uint64_t v)
{
	char buf[24];
	snprintf(buf, sizeof buf, "%016" PRIx64, v);
	jsonw_text(w, key, buf);
}

static void write_counters(struct jsonw *w, const char *key, const struct sim_counters *c)
{
	jsonw_open(w, key, '{');
	jsonw_u64(w, "transactions", true, c->transactions);
	jsonw_u64(w, "duplicates_skipped", true, c->duplicates_skipped);
	jsonw_u64(w, "chunks", true, c->chunks);
	jsonw_u64(w, "tables_copied", true, c->tables_copied);
	jsonw_u64(w, "crashes", true, c->crashes);
	jsonw_u64(w, "power_losses", true, c->power_losses);
	jsonw_u64(w, "steps", true, c->steps);
	jsonw_u64(w, "copy_statements", true, c->copy_statements);
	jsonw_u64(w, "slot_stops_lost_at_promotion", true, c->slot_stops_lost_at_promotion);
	jsonw_u64(w, "slot_stops_gone", true, c->slot_stops_gone);
	jsonw_u64(w, "slot_stops_invalidated", true, c->slot_stops_invalidated);
	jsonw_close(w, '}');
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
	sum->copy_statements += c->copy_statements;
	sum->slot_stops_lost_at_promotion += c->slot_stops_lost_at_promotion;
	sum->slot_stops_gone += c->slot_stops_gone;
	sum->slot_stops_invalidated += c->slot_stops_invalidated;
}

static void write_entry(struct jsonw *w, const struct sim_run *run, size_t i)
{
	const struct sim_scenario *s = &run->registry[i];
	const struct sim_result *r = &run->results[i];
	bool ran = r->status == SIM_STATUS_PASS || r->status == SIM_STATUS_FAIL;
	bool failed = r->status == SIM_STATUS_FAIL;

	jsonw_open(w, NULL, '{');
	if (s->kind == SIM_KIND_CURATED)
		jsonw_i64(w, "number", true, s->number);
	jsonw_text(w, "name", s->name);
	if (s->kind == SIM_KIND_CURATED) {
		jsonw_text(w, "boundary", s->boundary);
	} else {
		jsonw_text(w, "family", s->family);
		if (s->matrix_row)
			jsonw_i64(w, "matrix_row", true, s->matrix_row);
		else
			jsonw_null(w, "matrix_row");
	}
	jsonw_text(w, "status", sim_status_name(r->status));
	jsonw_text(w, "reason", sim_run_reason(run, i));
	jsonw_text(w, "invariant", s->invariant);
	jsonw_text(w, "check", s->check);
	jsonw_text(w, "failed_invariant", failed && r->failed_invariant[0] ? r->failed_invariant : NULL);
	jsonw_text(w, "detail", failed && r->detail[0] ? r->detail : NULL);
	jsonw_open(w, "seeds", '[');
	for (size_t k = 0; k < r->n_seeds && k < SIM_MAX_SEEDS; k++)
		jsonw_u64(w, NULL, true, r->seeds[k]);
	jsonw_close(w, ']');
	if (failed && r->has_failing_seed)
		jsonw_u64(w, "failing_seed", true, r->failing_seed);
	else
		jsonw_null(w, "failing_seed");
	if (ran)
		write_hex(w, "trace_digest", r->trace_digest);
	else
		jsonw_null(w, "trace_digest");
	write_counters(w, "counters", &r->counters);
	if (s->not_applicable_reason) {
		jsonw_null(w, "reproduce");
	} else {
		char *cmd = sim_run_reproduce(run, i);
		jsonw_text(w, "reproduce", cmd);
		free(cmd);
	}
	if (s->live_file && s->live_name) {
		jsonw_open(w, "live_test", '{');
		jsonw_text(w, "file", s->live_file);
		jsonw_text(w, "name", s->live_name);
		jsonw_close(w, '}');
	} else {
		jsonw_null(w, "live_test");
	}
	jsonw_text(w, "recovery", s->recovery);
	jsonw_close(w, '}');
}

int sim_run_write_json(FILE *out, const struct sim_run *run)
{
	struct jsonw w;
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

	jsonw_init(&w, out, false);
	jsonw_open(&w, NULL, '{');
	jsonw_text(&w, "format", SIM_RUN_FORMAT);
	jsonw_text(&w, "result", pass ? "PASS" : "FAIL");
	jsonw_text(&w, "result_reason", why);
	jsonw_u64(&w, "seed", true, run->seed);
	jsonw_u64(&w, "schedules", true, run->schedules);
	jsonw_text(&w, "variant", run->variant ? run->variant : "none");
	jsonw_text(&w, "scenario", run->scenario);
	jsonw_text(&w, "revision", run->build.revision);
	jsonw_text(&w, "tree", run->build.tree);
	jsonw_bool(&w, "dirty", run->build.dirty);
	jsonw_open(&w, "build", '{');
	jsonw_text(&w, "cc", run->build.cc);
	jsonw_text(&w, "cflags", run->build.cflags);
	jsonw_close(&w, '}');
	jsonw_text(&w, "started_at", run->started_at);
	jsonw_u64(&w, "duration_ms", true, run->duration_us / 1000);
	if (run->duration_us)
		jsonw_num(&w, "schedules_per_second", true, (double)run->schedules * 1e6 / (double)run->duration_us);
	else
		jsonw_null(&w, "schedules_per_second");

	jsonw_open(&w, "totals", '{');
	jsonw_u64(&w, "entries", true, reported);
	jsonw_u64(&w, "simulations", true, entries[SIM_KIND_SIMULATION]);
	jsonw_u64(&w, "simulations_applicable", true, applicable[SIM_KIND_SIMULATION]);
	jsonw_u64(&w, "curated", true, entries[SIM_KIND_CURATED]);
	jsonw_u64(&w, "curated_applicable", true, applicable[SIM_KIND_CURATED]);
	jsonw_u64(&w, "pass", true, by_status[SIM_STATUS_PASS]);
	jsonw_u64(&w, "fail", true, by_status[SIM_STATUS_FAIL]);
	jsonw_u64(&w, "not_applicable", true, by_status[SIM_STATUS_NOT_APPLICABLE]);
	jsonw_u64(&w, "not_run", true, by_status[SIM_STATUS_NOT_RUN]);
	jsonw_u64(&w, "schedules_passed", true, run->explore_passed);
	jsonw_u64(&w, "schedules_failed", true, run->explore_failed);
	jsonw_u64(&w, "schedules_not_run", true, run->explore_not_run);
	write_counters(&w, "counters", &sum);
	jsonw_close(&w, '}');

	jsonw_open(&w, "simulations", '[');
	for (size_t i = 0; i < run->n; i++)
		if (run->selected[i] && run->registry[i].kind == SIM_KIND_SIMULATION)
			write_entry(&w, run, i);
	jsonw_close(&w, ']');
	jsonw_open(&w, "scenarios", '[');
	for (size_t i = 0; i < run->n; i++)
		if (run->selected[i] && run->registry[i].kind == SIM_KIND_CURATED)
			write_entry(&w, run, i);
	jsonw_close(&w, ']');

	jsonw_open(&w, "exploration", '{');
	jsonw_u64(&w, "schedules", true, run->schedules);
	jsonw_u64(&w, "passed", true, run->explore_passed);
	jsonw_u64(&w, "failed", true, run->explore_failed);
	jsonw_u64(&w, "not_run", true, run->explore_not_run);
	write_hex(&w, "digest", run->explore_digest);
	write_counters(&w, "counters", &run->explore_counters);
	/* schedules per apply.workers ("1".."4") */
	jsonw_open(&w, "workers", '{');
	for (int k = 1; k <= SIM_MAX_WORKERS; k++) {
		char name[4];
		snprintf(name, sizeof name, "%d", k);
		jsonw_u64(&w, name, true, run->explore_by_workers[k]);
	}
	jsonw_close(&w, '}');
	jsonw_open(&w, "failures", '[');
	for (size_t k = 0; k < run->n_failures; k++) {
		const struct sim_exploration_failure *f = &run->failures[k];
		char *replay = sim_run_replay(run, f);
		jsonw_open(&w, NULL, '{');
		jsonw_u64(&w, "seed", true, f->seed);
		jsonw_u64(&w, "index", true, f->index);
		jsonw_u64(&w, "workers", true, (uint64_t)f->workers);
		jsonw_text(&w, "invariant", f->invariant);
		jsonw_text(&w, "detail", f->detail);
		write_hex(&w, "trace_digest", f->trace_digest);
		jsonw_text(&w, "replay", replay);
		jsonw_close(&w, '}');
		free(replay);
	}
	jsonw_close(&w, ']');
	jsonw_close(&w, '}');

	jsonw_close(&w, '}');
	fputc('\n', out);
	return jsonw_finish(&w);
}
