/*
 * trellara-status - one report of a flow: the source's slot, the stream,
 * the applier's checkpoint, quarantine, the snapshot run and the
 * supervisor; diagnostics with the next action; alerts for a person.
 * See trellara-status(1).
 */
#include "status.h"

#include "trellara/config.h"
#include "trellara/defaults.h"
#include "trellara/log.h"
#include "trellara/metrics.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
	"usage: trellara-status --config FILE [--view report|diagnostics|alerts]\n"
	"                       [--format text|json|prometheus] [--rate-seconds N]\n"
	"\n"
	"Reports a flow from everything that knows about it, read-only: the source's\n"
	"WAL position and slot (lag, retained WAL), the local stream (depth, oldest and\n"
	"newest frame, last acknowledged LSN), the applier's checkpoint (applied\n"
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

static bool parse_seconds(const char *text, double *out)
{
	char *end;
	double v = strtod(text, &end);
	if (!*text || *end || !(v >= 0) || v > 3600)
		return false;
	*out = v;
	return true;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },          { "view", required_argument, NULL, OPT_VIEW },
		{ "format", required_argument, NULL, 'f' },          { "rate-seconds", required_argument, NULL, OPT_RATE_SECONDS },
		{ "verbose", no_argument, NULL, 'v' },               { "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },               { NULL, 0, NULL, 0 }
	};
	const char *config_path = NULL, *format = "text", *view_name = "report";
	double rate_seconds = 1;
	int verbosity = 0, c;
	log_setup(argv[0], 0);
	while ((c = getopt_long(argc, argv, "c:f:vhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': config_path = optarg; break;
		case 'f': format = optarg; break;
		case OPT_VIEW: view_name = optarg; break;
		case OPT_RATE_SECONDS:
			if (!parse_seconds(optarg, &rate_seconds)) {
				fprintf(stderr, "trellara-status: --rate-seconds wants a number of seconds from 0 to 3600, not \"%s\"\n",
					optarg);
				return EXIT_USAGE;
			}
			break;
		case 'v': verbosity++; break;
		case 'h': fputs(usage_text, stdout); return EXIT_OK;
		case 'V': printf("trellara-status %s\n", TRELLARA_VERSION); return EXIT_OK;
		default: fputs(usage_text, stderr); return EXIT_USAGE;
		}
	}
	log_setup(argv[0], verbosity);
	enum status_view view;
	if (strcmp(view_name, "report") == 0)
		view = STATUS_VIEW_REPORT;
	else if (strcmp(view_name, "diagnostics") == 0)
		view = STATUS_VIEW_DIAGNOSTICS;
	else if (strcmp(view_name, "alerts") == 0)
		view = STATUS_VIEW_ALERTS;
	else {
		fprintf(stderr, "trellara-status: unknown view \"%s\" (report, diagnostics or alerts)\n", view_name);
		return EXIT_USAGE;
	}
	bool json = strcmp(format, "json") == 0, prometheus = strcmp(format, "prometheus") == 0;
	if (!config_path || optind < argc || (!json && !prometheus && strcmp(format, "text") != 0)) {
		fputs(usage_text, stderr);
		return EXIT_USAGE;
	}
	struct flow_config cfg;
	if (config_load(config_path, &cfg) < 0)
		return EXIT_CONFIG;
	struct status_report report;
	status_gather(&report, &cfg, rate_seconds);
	status_evaluate(&report);
	int code = EXIT_OK;
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
