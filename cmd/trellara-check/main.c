/*
 * trellara-check - is the source safe to capture?  See trellara-check(1).
 */
#include "check.h"

#include "trellara/config.h"
#include "trellara/defaults.h"
#include "trellara/log.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static const char usage_text[] =
	"usage: trellara-check --config FILE [--format text|json] [--fix [--create-slot]]\n"
	"\n"
	"Checks that the flow's source is safe to capture: wal_level, free slots and WAL\n"
	"senders, privileges, the publication and the configured tables in it, each table's\n"
	"replica identity, the slot's state and WAL retention, failover-slot posture, the\n"
	"DDL evidence trigger and the source identity.  Prints blockers and warnings, each\n"
	"with the command that fixes it.\n"
	"\n"
	"options:\n"
	"  -c, --config FILE     flow file\n"
	"  -f, --format FORMAT   text (default) or json\n"
	"      --fix             create the publication or add the missing tables to it, and\n"
	"                        install the DDL evidence trigger (never changes a replica\n"
	"                        identity); idempotent\n"
	"      --create-slot     with --fix: create the logical slot (pgoutput) when missing\n"
	"  -v, --verbose         more logging (repeatable)\n"
	"  -h, --help            this help\n"
	"  -V, --version         print the version\n"
	"\n"
	"exit codes: 0 no blockers (warnings allowed), 1 at least one blocker (a failed\n"
	"--fix step included), 64 usage, 69 source unreachable or not inspectable,\n"
	"78 configuration error\n";

enum { OPT_FIX = 1000, OPT_CREATE_SLOT };

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' }, { "format", required_argument, NULL, 'f' },
		{ "fix", no_argument, NULL, OPT_FIX },       { "create-slot", no_argument, NULL, OPT_CREATE_SLOT },
		{ "verbose", no_argument, NULL, 'v' },       { "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },       { NULL, 0, NULL, 0 }
	};
	const char *config_path = NULL, *format = "text";
	bool fix = false, create_slot = false;
	int verbosity = 0, c;
	log_setup(argv[0], 0);
	while ((c = getopt_long(argc, argv, "c:f:vhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': config_path = optarg; break;
		case 'f': format = optarg; break;
		case OPT_FIX: fix = true; break;
		case OPT_CREATE_SLOT: create_slot = true; break;
		case 'v': verbosity++; break;
		case 'h': fputs(usage_text, stdout); return EXIT_OK;
		case 'V': printf("trellara-check %s\n", TRELLARA_VERSION); return EXIT_OK;
		default: fputs(usage_text, stderr); return EXIT_USAGE;
		}
	}
	log_setup(argv[0], verbosity);
	if (!config_path || optind < argc) {
		fputs(usage_text, stderr);
		return EXIT_USAGE;
	}
	if (strcmp(format, "text") != 0 && strcmp(format, "json") != 0) {
		fprintf(stderr, "trellara-check: --format must be text or json, got \"%s\"\n", format);
		return EXIT_USAGE;
	}
	if (create_slot && !fix) {
		fputs("trellara-check: --create-slot needs --fix\n", stderr);
		return EXIT_USAGE;
	}
	struct flow_config config;
	if (config_load(config_path, &config) < 0)
		return EXIT_CONFIG;
	struct check_options options = { .config = &config, .fix = fix, .create_slot = create_slot };
	struct check_report report;
	int code = EXIT_UNAVAILABLE;
	if (check_run(&options, &report) == 0) {
		if (strcmp(format, "json") == 0)
			check_report_print_json(stdout, &report);
		else
			check_report_print_text(stdout, &report);
		code = report.blockers > 0 ? EXIT_NEGATIVE : EXIT_OK;
		check_report_free(&report);
	}
	config_free(&config);
	return code;
}
