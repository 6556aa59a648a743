/*
 * main.c - trellara-sim, the program behind `trellara chaos`: runs the
 * registry's scenarios and K random schedules from one seed, writes the
 * run file, lists the registry, and turns a run file into the correctness
 * report.  See trellara-chaos(1).
 *
 * The wall clock is read here only, for the run file's started_at and
 * duration_ms; nothing in the simulation sees it.
 */
#include "run.h"
#include "scenarios.h"

#include "trellara/cli.h"
#include "trellara/clock.h"
#include "trellara/defaults.h"
#include "trellara/jsonw.h"
#include "trellara/xalloc.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROGRAM "trellara-sim"
#define DEFAULT_SCHEDULES 2000

static const char usage_text[] =
	"usage: trellara chaos run [--scenario NAME] [--seed N] [--schedules K] [--format text|json]\n"
	"                          [--output FILE] [--variant NAME] [--progress N] [--incomplete-ok]\n"
	"       trellara chaos report --input RUN.json --output REPORT.html\n"
	"       trellara chaos list [--format text|json]\n"
	"       trellara-sim [--help | --version]\n"
	"\n"
	"Runs Trellara's failure simulator (" PROGRAM "): every named scenario of the\n"
	"failure matrix and K random schedules, all from one seed, deterministically;\n"
	"writes the run file (trellara-chaos-run/1) and the correctness report made from it.\n"
	"\n"
	"options:\n"
	"  -s, --scenario NAME  run only the entries named NAME, and no random schedule\n"
	"                       unless --schedules is given\n"
	"      --seed N         the run's seed (default 1); schedule i uses seed N+i\n"
	"  -n, --schedules K    random schedules to run (default 2000; 0 with --scenario)\n"
	"  -f, --format FORMAT  run, list: text (default) or json\n"
	"  -o, --output FILE    run: write to FILE instead of standard output;\n"
	"                       report: the HTML file to write\n"
	"  -i, --input FILE     report: the run file to read\n"
	"      --variant NAME   build in a deliberately broken variant (the simulator must FAIL)\n"
	"      --progress N     run: a progress line on standard error every N schedules\n"
	"      --incomplete-ok  run: exit 0 when nothing that ran failed, though scenarios\n"
	"                       were not run (the run file still says FAIL)\n"
	"  -h, --help           print this help and exit\n"
	"  -V, --version        print the version and exit\n"
	"\n"
	"exit codes:\n"
	"  0   PASS (run), or done\n"
	"  1   FAIL: a scenario failed or was not run, or a schedule failed\n"
	"  64  usage error\n"
	"  65  report: the input is not a readable trellara-chaos-run/1 file\n"
	"  73  the output file cannot be written\n";

enum format { FORMAT_TEXT, FORMAT_JSON };

struct options {
	const char *command;
	const char *scenario;
	uint64_t seed;
	bool seed_given;
	uint64_t schedules;
	bool schedules_given;
	enum format format;
	const char *output;
	const char *input;
	const char *variant;
	uint64_t progress;
	bool progress_given;
	bool incomplete_ok;
};

/* --incomplete-ok: nothing that ran failed (scenarios not run yet are
 * listed, and the run file still says FAIL). */
static bool nothing_failed(const struct sim_run *run)
{
	for (size_t i = 0; i < run->n; i++)
		if (run->selected[i] && run->results[i].status == SIM_STATUS_FAIL)
			return false;
	return run->explore_failed == 0 && run->explore_not_run == 0;
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, PROGRAM ": ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nhint: run \"trellara chaos --help\" for usage\n");
	return EXIT_USAGE;
}

/* A decimal integer from 0 to UINT64_MAX, nothing else (cli.h's rule);
 * the caller reports a bad value in the simulator's own words. */
static bool parse_u64(const char *option_name, const char *s, uint64_t *out)
{
	char err[OPT_ERROR_LEN];
	return opt_check_u64(option_name, s, 0, UINT64_MAX, out, err);
}

/* ---- output files ---- */

/* Opens FILE.tmp for writing (or stdout when path is NULL). */
static FILE *open_output(const char *path, char **tmp)
{
	*tmp = NULL;
	if (!path)
		return stdout;
	*tmp = xasprintf("%s.tmp.%ld", path, (long)getpid());
	FILE *f = fopen(*tmp, "w");
	if (!f) {
		fprintf(stderr, PROGRAM ": cannot write \"%s\": %s\n", *tmp, strerror(errno));
		free(*tmp);
		*tmp = NULL;
	}
	return f;
}

/* Closes and renames into place; 0 or -1 (reported). */
static int close_output(FILE *f, const char *path, char *tmp, bool write_failed)
{
	if (!path) {
		if (fflush(stdout) != 0 || write_failed) {
			fprintf(stderr, PROGRAM ": cannot write standard output: %s\n", strerror(errno));
			return -1;
		}
		return 0;
	}
	int rc = 0;
	if (write_failed || ferror(f))
		rc = -1;
	if (fclose(f) != 0)
		rc = -1;
	if (rc == 0 && rename(tmp, path) != 0)
		rc = -1;
	if (rc != 0) {
		fprintf(stderr, PROGRAM ": cannot write \"%s\": %s\n", path, strerror(errno));
		unlink(tmp);
	}
	free(tmp);
	return rc;
}

/* ---- run ---- */

static uint64_t digest_add(uint64_t digest, uint64_t value)
{
	/* FNV-1a over the value's 8 bytes, little end first */
	for (int i = 0; i < 8; i++) {
		digest ^= (value >> (8 * i)) & 0xff;
		digest *= 0x100000001b3ULL;
	}
	return digest;
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

static void run_entry(struct sim_run *run, size_t i)
{
	const struct sim_scenario *s = &run->registry[i];
	struct sim_result *r = &run->results[i];
	memset(r, 0, sizeof *r);
	if (s->not_applicable_reason) {
		r->status = SIM_STATUS_NOT_APPLICABLE;
		return;
	}
	if (!s->run) {
		r->status = SIM_STATUS_NOT_RUN;
		return;
	}
	int rc = s->run(s, run->seed, r);
	if (r->n_seeds == 0) {
		r->seeds[0] = run->seed;
		r->n_seeds = 1;
	}
	if (rc < 0 && r->status != SIM_STATUS_FAIL) {
		r->status = SIM_STATUS_FAIL;
		if (!r->detail[0])
			snprintf(r->detail, sizeof r->detail, "the scenario could not run");
	}
	if (r->status == SIM_STATUS_NOT_APPLICABLE)
		r->status = SIM_STATUS_NOT_RUN; /* only the registry says what does not apply */
	if (r->status == SIM_STATUS_FAIL && !r->has_failing_seed) {
		r->has_failing_seed = true;
		r->failing_seed = r->seeds[r->n_seeds - 1];
	}
}

static void explore(struct sim_run *run, uint64_t progress)
{
	run->explore_digest = 0xcbf29ce484222325ULL;
	for (uint64_t i = 0; i < run->schedules; i++) {
		uint64_t seed = run->seed + i; /* wraps: still one seed per schedule */
		struct sim_result r;
		memset(&r, 0, sizeof r);
		int rc = sim_explore(seed, i, &r);
		if (rc < 0 && r.status != SIM_STATUS_FAIL) {
			r.status = SIM_STATUS_FAIL;
			if (!r.detail[0])
				snprintf(r.detail, sizeof r.detail, "the schedule could not run");
		}
		add_counters(&run->explore_counters, &r.counters);
		if (r.workers >= 1 && r.workers <= SIM_MAX_WORKERS)
			run->explore_by_workers[r.workers]++;
		run->explore_digest = digest_add(run->explore_digest, r.trace_digest);
		switch (r.status) {
		case SIM_STATUS_PASS: run->explore_passed++; break;
		case SIM_STATUS_FAIL:
			run->explore_failed++;
			if (run->n_failures < SIM_MAX_RECORDED_FAILURES) {
				struct sim_exploration_failure *f = &run->failures[run->n_failures++];
				f->seed = seed;
				f->index = i;
				snprintf(f->invariant, sizeof f->invariant, "%s", r.failed_invariant[0] ? r.failed_invariant : "unknown");
				snprintf(f->detail, sizeof f->detail, "%s", r.detail);
				f->trace_digest = r.trace_digest;
				f->workers = r.workers;
			}
			break;
		default: run->explore_not_run++; break;
		}
		if (progress && ((i + 1) % progress == 0 || i + 1 == run->schedules))
			fprintf(stderr, PROGRAM ": %" PRIu64 "/%" PRIu64 " schedules, %" PRIu64 " failed, %" PRIu64 " not run\n",
				i + 1, run->schedules, run->explore_failed, run->explore_not_run);
	}
}

static void print_text(FILE *out, const struct sim_run *run)
{
	const char *why = NULL;
	bool pass = sim_run_passed(run, &why);
	uint64_t by_status[4] = { 0 };

	fprintf(out, "trellara chaos run: seed %" PRIu64 ", %" PRIu64 " schedules, variant %s\n", run->seed,
		run->schedules, run->variant ? run->variant : "none");
	for (size_t i = 0; i < run->n; i++) {
		if (!run->selected[i])
			continue;
		const struct sim_scenario *s = &run->registry[i];
		const struct sim_result *r = &run->results[i];
		const char *reason = sim_run_reason(run, i);
		by_status[r->status]++;
		fprintf(out, "%-15s", sim_status_name(r->status));
		if (s->kind == SIM_KIND_CURATED)
			fprintf(out, "curated %d %s", s->number, s->name);
		else
			fprintf(out, "simulation %s/%s", s->family, s->name);
		if (r->status == SIM_STATUS_PASS || r->status == SIM_STATUS_FAIL)
			fprintf(out, " (seed %" PRIu64 "): %" PRIu64 " transactions, %" PRIu64 " duplicates skipped, %" PRIu64
				     " chunks, %" PRIu64 " tables copied, %" PRIu64 " crashes, %" PRIu64 " power losses, %" PRIu64
				     " steps, trace %016" PRIx64,
				r->n_seeds ? r->seeds[0] : run->seed, r->counters.transactions, r->counters.duplicates_skipped,
				r->counters.chunks, r->counters.tables_copied, r->counters.crashes, r->counters.power_losses,
				r->counters.steps, r->trace_digest);
		if (reason)
			fprintf(out, ": %s", reason);
		fputc('\n', out);
		if (r->status == SIM_STATUS_FAIL) {
			char *cmd = sim_run_reproduce(run, i);
			fprintf(out, "%-15sinvariant %s broken: %s\n", "", r->failed_invariant[0] ? r->failed_invariant : s->invariant,
				r->detail[0] ? r->detail : "(no detail)");
			fprintf(out, "%-15sfailing seed %" PRIu64 "; replay: %s\n", "", r->failing_seed, cmd);
			free(cmd);
		}
	}
	fprintf(out, "exploration: %" PRIu64 " schedules from seed %" PRIu64 ": %" PRIu64 " passed, %" PRIu64 " failed, %" PRIu64
		     " not run; digest %016" PRIx64 "\n",
		run->schedules, run->seed, run->explore_passed, run->explore_failed, run->explore_not_run, run->explore_digest);
	if (run->schedules) {
		fprintf(out, "exploration: %" PRIu64 " COPY statements of runs of inserts applied\n",
			run->explore_counters.copy_statements);
		fprintf(out, "exploration: capture stopped on its slot (exit 65): %" PRIu64 " lost at promotion, %" PRIu64
			     " gone, %" PRIu64 " invalidated\n",
			run->explore_counters.slot_stops_lost_at_promotion, run->explore_counters.slot_stops_gone,
			run->explore_counters.slot_stops_invalidated);
		fprintf(out, "exploration: schedules by apply.workers:");
		for (int k = 1; k <= SIM_MAX_WORKERS; k++)
			fprintf(out, " %d: %" PRIu64, k, run->explore_by_workers[k]);
		fputc('\n', out);
	}
	for (size_t k = 0; k < run->n_failures; k++) {
		const struct sim_exploration_failure *f = &run->failures[k];
		char *cmd = sim_run_replay(run, f);
		fprintf(out, "failed schedule %" PRIu64 " (seed %" PRIu64 ", apply.workers %d): invariant %s broken: %s\n",
			f->index, f->seed, f->workers, f->invariant, f->detail);
		fprintf(out, "  replay: %s\n", cmd);
		free(cmd);
	}
	if (run->explore_failed > run->n_failures)
		fprintf(out, "(%" PRIu64 " more failed schedules not listed)\n", run->explore_failed - run->n_failures);
	fprintf(out, "result: %s%s%s%s: %" PRIu64 " pass, %" PRIu64 " fail, %" PRIu64 " not_applicable, %" PRIu64 " not_run\n",
		pass ? "PASS" : "FAIL", why ? " (" : "", why ? why : "", why ? ")" : "", by_status[SIM_STATUS_PASS],
		by_status[SIM_STATUS_FAIL], by_status[SIM_STATUS_NOT_APPLICABLE], by_status[SIM_STATUS_NOT_RUN]);
}

static int cmd_run(const struct options *o)
{
	struct sim_run run;
	int64_t t0_us;
	time_t now;
	struct tm tm;
	int status;

	if (o->input)
		return usage_error("%s", "--input is for \"report\" only");
	if (!o->variant && sim_variant_select(NULL) != 0) {
		/* a broken variant's results are never taken for the real code's */
		fprintf(stderr, PROGRAM ": this binary is built as a deliberately broken variant: name it with --variant\n");
		return EXIT_USAGE;
	}
	if (o->variant) {
		if (sim_variant_select(o->variant) != 0) {
			const char *const *names = sim_variant_names();
			fprintf(stderr, PROGRAM ": unknown variant \"%s\"\n", o->variant);
			if (names && names[0]) {
				fprintf(stderr, "hint: this build knows:");
				for (size_t i = 0; names[i]; i++)
					fprintf(stderr, " %s", names[i]);
				fputc('\n', stderr);
			} else {
				fprintf(stderr, "hint: this build knows no variant (no simulation is linked in)\n");
			}
			return EXIT_USAGE;
		}
	}

	sim_run_init(&run, sim_scenarios, sim_n_scenarios);
	run.seed = o->seed;
	run.schedules = o->schedules_given ? o->schedules : o->scenario ? 0 : DEFAULT_SCHEDULES;
	run.variant = o->variant;
	run.scenario = o->scenario;
	if (o->scenario) {
		size_t from = 0;
		bool any = false;
		while (sim_scenario_next(o->scenario, &from)) {
			run.selected[from++] = true;
			any = true;
		}
		if (!any) {
			sim_run_free(&run);
			fprintf(stderr, PROGRAM ": no scenario named \"%s\"\n", o->scenario);
			fprintf(stderr, "hint: \"trellara chaos list\" names them all\n");
			return EXIT_USAGE;
		}
	} else {
		for (size_t i = 0; i < run.n; i++)
			run.selected[i] = true;
	}

	now = (time_t)(clock_wall_us() / 1000000);
	gmtime_r(&now, &tm);
	strftime(run.started_at, sizeof run.started_at, "%Y-%m-%dT%H:%M:%SZ", &tm);
	t0_us = clock_mono_us();

	for (size_t i = 0; i < run.n; i++)
		if (run.selected[i])
			run_entry(&run, i);
	explore(&run, o->progress);

	run.duration_us = (uint64_t)(clock_mono_us() - t0_us);

	char *tmp;
	FILE *out = open_output(o->output, &tmp);
	if (!out) {
		sim_run_free(&run);
		return EXIT_CANTCREAT;
	}
	bool failed = false;
	if (o->format == FORMAT_JSON)
		failed = sim_run_write_json(out, &run) != 0;
	else
		print_text(out, &run);
	if (close_output(out, o->output, tmp, failed) != 0) {
		sim_run_free(&run);
		return EXIT_CANTCREAT;
	}
	status = sim_run_passed(&run, NULL) || (o->incomplete_ok && nothing_failed(&run)) ? EXIT_OK : EXIT_NEGATIVE;
	if (o->output) {
		/* the file has the details: a summary, and where each failure is */
		const char *why = NULL;
		uint64_t by_status[4] = { 0 };
		sim_run_passed(&run, &why);
		for (size_t i = 0; i < run.n; i++)
			if (run.selected[i])
				by_status[run.results[i].status]++;
		fprintf(stderr,
			PROGRAM ": %s%s%s%s: %" PRIu64 " pass, %" PRIu64 " fail, %" PRIu64 " not_applicable, %" PRIu64
				" not_run; %" PRIu64 " schedules (%" PRIu64 " failed, %" PRIu64 " not run) in %" PRIu64
				" ms; wrote %s\n",
			!why ? "PASS" : status == EXIT_OK ? "INCOMPLETE" : "FAIL", why ? " (" : "", why ? why : "", why ? ")" : "",
			by_status[SIM_STATUS_PASS], by_status[SIM_STATUS_FAIL], by_status[SIM_STATUS_NOT_APPLICABLE],
			by_status[SIM_STATUS_NOT_RUN], run.schedules, run.explore_failed, run.explore_not_run,
			run.duration_us / 1000, o->output);
		for (size_t k = 0; k < run.n_failures; k++) {
			char *cmd = sim_run_replay(&run, &run.failures[k]);
			fprintf(stderr, "  failing seed %" PRIu64 ": %s\n", run.failures[k].seed, cmd);
			free(cmd);
		}
		for (size_t i = 0; i < run.n; i++) {
			if (run.selected[i] && run.results[i].status == SIM_STATUS_FAIL) {
				char *cmd = sim_run_reproduce(&run, i);
				fprintf(stderr, "  failing seed %" PRIu64 ": %s\n", run.results[i].failing_seed, cmd);
				free(cmd);
			}
		}
	}
	sim_run_free(&run);
	return status;
}

/* ---- list ---- */

static int cmd_list(const struct options *o)
{
	if (o->format == FORMAT_JSON) {
		struct jsonw w;
		jsonw_init(&w, stdout, false);
		jsonw_open(&w, NULL, '[');
		for (size_t i = 0; i < sim_n_scenarios; i++) {
			const struct sim_scenario *s = &sim_scenarios[i];
			jsonw_open(&w, NULL, '{');
			jsonw_text(&w, "kind", sim_kind_name(s->kind));
			if (s->kind == SIM_KIND_CURATED)
				jsonw_i64(&w, "number", true, s->number);
			else
				jsonw_null(&w, "number");
			jsonw_text(&w, "name", s->name);
			jsonw_text(&w, "family", s->family);
			jsonw_text(&w, "boundary", s->boundary);
			if (s->matrix_row)
				jsonw_i64(&w, "matrix_row", true, s->matrix_row);
			else
				jsonw_null(&w, "matrix_row");
			jsonw_text(&w, "invariant", s->invariant);
			jsonw_text(&w, "check", s->check);
			if (s->live_file) {
				jsonw_open(&w, "live_test", '{');
				jsonw_text(&w, "file", s->live_file);
				jsonw_text(&w, "name", s->live_name);
				jsonw_close(&w, '}');
			} else {
				jsonw_null(&w, "live_test");
			}
			jsonw_text(&w, "recovery", s->recovery);
			jsonw_text(&w, "not_applicable_reason", s->not_applicable_reason);
			jsonw_bool(&w, "implemented", s->run != NULL && sim_scenario_simulated(s->name));
			jsonw_close(&w, '}');
		}
		jsonw_close(&w, ']');
		fputc('\n', stdout);
		return jsonw_finish(&w) == 0 ? EXIT_OK : EXIT_CANTCREAT;
	}
	size_t sims_applicable, rows_applicable;
	size_t sims = sim_scenarios_count(SIM_KIND_SIMULATION, &sims_applicable);
	size_t rows = sim_scenarios_count(SIM_KIND_CURATED, &rows_applicable);
	printf("simulations: %zu (%zu applicable)\n", sims, sims_applicable);
	for (size_t i = 0; i < sim_n_scenarios; i++) {
		const struct sim_scenario *s = &sim_scenarios[i];
		if (s->kind != SIM_KIND_SIMULATION)
			continue;
		printf("  %-17s %s%s\n", s->family, s->name, s->not_applicable_reason ? "  (not applicable)" : s->run && sim_scenario_simulated(s->name) ? "" : "  (not implemented yet)");
	}
	printf("curated matrix: %zu rows (%zu applicable)\n", rows, rows_applicable);
	for (size_t i = 0; i < sim_n_scenarios; i++) {
		const struct sim_scenario *s = &sim_scenarios[i];
		if (s->kind != SIM_KIND_CURATED)
			continue;
		printf("  %2d %s  [%s]%s\n", s->number, s->name, s->boundary,
		       s->not_applicable_reason ? "  (not applicable)" : s->run && sim_scenario_simulated(s->name) ? "" : "  (not implemented yet)");
	}
	return fflush(stdout) == 0 ? EXIT_OK : EXIT_CANTCREAT;
}

/* ---- report ---- */

static int cmd_report(const struct options *o)
{
	char err[1024];
	if (!o->input || !o->output)
		return usage_error("%s", "report needs --input RUN.json and --output REPORT.html");
	switch (sim_report_write(o->input, o->output, err, sizeof err)) {
	case SIM_REPORT_OK: return EXIT_OK;
	case SIM_REPORT_BAD_INPUT: fprintf(stderr, PROGRAM ": %s\n", err); return EXIT_DATAERR;
	case SIM_REPORT_CANT_WRITE: fprintf(stderr, PROGRAM ": %s\n", err); return EXIT_CANTCREAT;
	}
	return EXIT_CANTCREAT;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "scenario", required_argument, NULL, 's' }, { "seed", required_argument, NULL, 'S' },
		{ "schedules", required_argument, NULL, 'n' }, { "format", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },    { "input", required_argument, NULL, 'i' },
		{ "variant", required_argument, NULL, 'v' },   { "progress", required_argument, NULL, 'p' },
		{ "incomplete-ok", no_argument, NULL, 'I' },
		{ "help", no_argument, NULL, 'h' },            { "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct options o = { .seed = 1 };
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "+s:n:f:o:i:hV", longopts, NULL)) != -1 || optind < argc) {
		if (c == -1) {
			/* a command word; options may follow it */
			if (o.command)
				return usage_error("unexpected argument \"%s\"", argv[optind]);
			o.command = argv[optind++];
			continue;
		}
		switch (c) {
		case 's': o.scenario = optarg; break;
		case 'S':
			if (!parse_u64("--seed", optarg, &o.seed))
				return usage_error("--seed: \"%s\" is not a number from 0 to 18446744073709551615", optarg);
			o.seed_given = true;
			break;
		case 'n':
			if (!parse_u64("--schedules", optarg, &o.schedules))
				return usage_error("--schedules: \"%s\" is not a non-negative number", optarg);
			o.schedules_given = true;
			break;
		case 'f':
			if (strcmp(optarg, "text") == 0)
				o.format = FORMAT_TEXT;
			else if (strcmp(optarg, "json") == 0)
				o.format = FORMAT_JSON;
			else
				return usage_error("--format: \"%s\" is neither text nor json", optarg);
			break;
		case 'o': o.output = optarg; break;
		case 'i': o.input = optarg; break;
		case 'v': o.variant = optarg; break;
		case 'I':
			o.incomplete_ok = true;
			break;
		case 'p':
			if (!parse_u64("--progress", optarg, &o.progress))
				return usage_error("--progress: \"%s\" is not a non-negative number", optarg);
			o.progress_given = true;
			break;
		case 'h': fputs(usage_text, stdout); return EXIT_OK;
		case 'V': printf(PROGRAM " %s\n", TRELLARA_VERSION); return EXIT_OK;
		default:
			return usage_error("option \"%s\" is unknown or needs an argument", argv[optind - 1]);
		}
	}
	if (!o.command)
		return usage_error("%s", "a command is required: run, report or list");
	if (strcmp(o.command, "run") == 0)
		return cmd_run(&o);
	if (strcmp(o.command, "list") == 0) {
		if (o.scenario || o.output || o.input || o.variant || o.schedules_given || o.seed_given || o.progress_given)
			return usage_error("%s", "list takes only --format");
		return cmd_list(&o);
	}
	if (strcmp(o.command, "report") == 0) {
		if (o.scenario || o.variant || o.schedules_given || o.seed_given || o.progress_given || o.format != FORMAT_TEXT)
			return usage_error("%s", "report takes only --input and --output");
		return cmd_report(&o);
	}
	return usage_error("unknown command \"%s\" (run, report or list)", o.command);
}
