/*
 * trellara-check - is the source safe to capture?  See trellara-check(1).
 */
#include "check.h"

#include "trellara/cli.h"
#include "trellara/defaults.h"

#include <stdio.h>

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
enum { FORMAT_TEXT, FORMAT_JSON }; /* index into formats[] */

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "format", required_argument, NULL, 'f' },   { "fix", no_argument, NULL, OPT_FIX },
		{ "create-slot", no_argument, NULL, OPT_CREATE_SLOT }, CLI_COMMON_LONGOPTS
	};
	static const char *const formats[] = { "text", "json", NULL };
	struct cli cli;
	bool fix = false, create_slot = false;
	int c, code, format = FORMAT_TEXT;
	cli_init(&cli, "trellara-check", usage_text, "f:", longopts, argc, argv);
	while ((c = cli_next(&cli)) != CLI_END) {
		switch (c) {
		case 'f':
			if (!cli_arg_choice(&cli, formats, &format))
				return EXIT_USAGE;
			break;
		case OPT_FIX: fix = true; break;
		case OPT_CREATE_SLOT: create_slot = true; break;
		default: return cli.exit_code;
		}
	}
	if ((code = cli_finish(&cli, true)) != EXIT_OK)
		return code;
	if (optind < argc)
		return cli_extra_operand(&cli, optind);
	if (create_slot && !fix)
		return cli_usage_error(&cli, "--create-slot needs --fix");
	struct flow_config config;
	if ((code = cli_load_config(&cli, &config)) != EXIT_OK)
		return code;
	struct check_options options = { .config = &config, .fix = fix, .create_slot = create_slot };
	struct check_report report;
	code = EXIT_UNAVAILABLE;
	if (check_run(&options, &report) == 0) {
		if (format == FORMAT_JSON)
			check_report_print_json(stdout, &report);
		else
			check_report_print_text(stdout, &report);
		code = report.blockers > 0 ? EXIT_NEGATIVE : EXIT_OK;
		check_report_free(&report);
	}
	config_free(&config);
	return code;
}
