/*
 * trellara-status - one report of a flow: the source's slot, the stream,
 * the applier's checkpoint, quarantine, the snapshot run and the
 * supervisor; diagnostics with the next action; alerts for a person.
 * See trellara-status(1).
 */
#include "status.h"

#include "trellara/cli.h"
#include "trellara/defaults.h"
#include "trellara/metrics.h"

#include <stdio.h>
#include <stdlib.h>

static const char usage_text[] =
	"usage: trellara-status --config FILE [--view report|diagnostics|alerts]\n"
	"                       [--format text|json|prometheus] [--rate-seconds N]\n"
	"\n"
	"Reports a flow from everything that knows about it, read-only: the source's\n"
	"WAL position and slot (lag, retained WAL), the local stream (depth, oldest and\n"
	"newest frame, last acknowledged LSN) or a JetStream stream's broker as capture\n"
	"sees it, the applier's checkpoint (applied\n"
	"transactions, rate, duplicates skipped), quarantine, the snapshot run and the\n"
	"supervisor's restart counts.  A part that cannot be read is reported as\n"
	"unavailable, never as zero.\n"
	"\n"
	"options:\n"
	"  -c, --config FILE     flow file\n"
	"      --view VIEW       report (default): everything; diagnostics: each problem\n"
	"                        with the safe next action; alerts: only what needs a person\n"
	"  -f, --format FORMAT   text (default), json or prometheus\n"
	"      --rate-seconds N  sample the apply checkpoint N seconds apart for the apply\n"
	"                        rate (default 1; 0: no rate, no wait)\n"
	"  -v, --verbose         more logging (repeatable)\n"
	"  -h, --help            this help\n"
	"  -V, --version         print the version\n"
	"\n"
	"exit codes: 0 reported (with --view alerts: no alert), 1 --view alerts found at\n"
	"least one alert, 64 usage, 78 configuration error\n";

enum { OPT_VIEW = 1000, OPT_RATE_SECONDS };
enum { FORMAT_TEXT, FORMAT_JSON, FORMAT_PROMETHEUS }; /* index into formats[] */

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "view", required_argument, NULL, OPT_VIEW }, { "format", required_argument, NULL, 'f' },
		{ "rate-seconds", required_argument, NULL, OPT_RATE_SECONDS }, CLI_COMMON_LONGOPTS
	};
	static const char *const formats[] = { "text", "json", "prometheus", NULL };
	/* in the order of enum status_view */
	static const char *const views[] = { "report", "diagnostics", "alerts", NULL };
	struct cli cli;
	double rate_seconds = DEFAULT_STATUS_RATE_SECONDS;
	int c, code, format = FORMAT_TEXT, view_index = 0;
	cli_init(&cli, "trellara-status", usage_text, "f:", longopts, argc, argv);
	while ((c = cli_next(&cli)) != CLI_END) {
		switch (c) {
		case 'f':
			if (!cli_arg_choice(&cli, formats, &format))
				return EXIT_USAGE;
			break;
		case OPT_VIEW:
			if (!cli_arg_choice(&cli, views, &view_index))
				return EXIT_USAGE;
			break;
		case OPT_RATE_SECONDS:
			if (!cli_arg_duration(&cli, 0, MAX_STATUS_RATE_SECONDS, &rate_seconds))
				return EXIT_USAGE;
			break;
		default: return cli.exit_code;
		}
	}
	if ((code = cli_finish(&cli, true)) != EXIT_OK)
		return code;
	if (optind < argc)
		return cli_extra_operand(&cli, optind);
	enum status_view view = (enum status_view)view_index;
	bool json = format == FORMAT_JSON, prometheus = format == FORMAT_PROMETHEUS;
	struct flow_config cfg;
	if ((code = cli_load_config(&cli, &cfg)) != EXIT_OK)
		return code;
	struct status_report report;
	status_gather(&report, &cfg, rate_seconds);
	status_evaluate(&report);
	code = EXIT_OK;
	if (prometheus) {
		struct metrics m;
		metrics_init(&m, report.flow, cfg.source_id);
		/* a refused sample (a bug) is logged and left out; the rest is printed */
		status_metrics(&report, &m);
		char *text = metrics_render(&m, NULL);
		fputs(text, stdout);
		free(text);
		metrics_free(&m);
	} else if (json) {
		status_print_json(stdout, &report, view);
	} else {
		status_print_text(stdout, &report, view);
	}
	if (code == EXIT_OK && view == STATUS_VIEW_ALERTS && status_count(&report, STATUS_ALERT) > 0)
		code = EXIT_NEGATIVE;
	fflush(stdout);
	status_report_free(&report);
	config_free(&cfg);
	return code;
}
