/*
 * trellara-snapshot - the consistent initial copy and its handoff to
 * streaming; status; reseed of one table.  See trellara-snapshot(1).
 */
#include "snapshot.h"

#include "trellara/cli.h"
#include "trellara/defaults.h"

#include <signal.h>
#include <string.h>

static const char usage_text[] =
	"usage: trellara-snapshot --config FILE [--run-id R] [--force] [--create-tables]\n"
	"       trellara-snapshot status --config FILE [--run-id R] [--format text|json]\n"
	"       trellara-snapshot reseed --config FILE --table SCHEMA.TABLE\n"
	"\n"
	"Copies every configured table at one exported snapshot of the flow's slot,\n"
	"records per-table watermarks and handoff evidence in the target, and leaves\n"
	"the run stream_handoff_ready.  A crashed run resumes where it stopped.\n"
	"\n"
	"options:\n"
	"  -c, --config FILE         flow file\n"
	"      --run-id R            the run (default \"initial\"; status: the latest)\n"
	"      --force               copy every table again (a new copy of a finished run)\n"
	"      --create-tables       create missing target tables from the source's catalogs\n"
	"                            (no pg_dump); keys, indexes, foreign keys after the data\n"
	"      --table SCHEMA.TABLE  reseed: the table to copy again\n"
	"  -f, --format FORMAT       status: text (default) or json\n"
	"  -v, --verbose             more logging (repeatable)\n"
	"  -h, --help                this help\n"
	"  -V, --version             print the version\n"
	"\n"
	"exit codes: 0 handed off (or nothing to do), 1 a table changed schema during\n"
	"its copy (no handoff), 64 usage, 69 a server unavailable, 75 a table copy failed\n"
	"or a fence could not be held (safe to run again), 78 configuration error\n";

enum { OPT_RUN_ID = 1000, OPT_FORCE, OPT_CREATE_TABLES, OPT_TABLE };
enum { FORMAT_TEXT, FORMAT_JSON }; /* index into formats[] */

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "run-id", required_argument, NULL, OPT_RUN_ID }, { "force", no_argument, NULL, OPT_FORCE },
		{ "create-tables", no_argument, NULL, OPT_CREATE_TABLES }, { "table", required_argument, NULL, OPT_TABLE },
		{ "format", required_argument, NULL, 'f' },       CLI_COMMON_LONGOPTS
	};
	static const char *const formats[] = { "text", "json", NULL };
	struct cli cli;
	struct snapshot_options o = { 0 };
	int c, code, format = FORMAT_TEXT;
	cli_init(&cli, "trellara-snapshot", usage_text, "f:", longopts, argc, argv);
	while ((c = cli_next(&cli)) != CLI_END) {
		switch (c) {
		case 'f':
			if (!cli_arg_choice(&cli, formats, &format))
				return EXIT_USAGE;
			break;
		case OPT_RUN_ID: o.run_id = cli.arg; break;
		case OPT_FORCE: o.force = true; break;
		case OPT_CREATE_TABLES: o.create_tables = true; break;
		case OPT_TABLE: o.table = cli.arg; break;
		default: return cli.exit_code;
		}
	}
	if ((code = cli_finish(&cli, true)) != EXIT_OK)
		return code;
	const char *command = optind < argc ? argv[optind++] : "run";
	if (optind < argc)
		return cli_extra_operand(&cli, optind);
	if (strcmp(command, "run") && strcmp(command, "status") && strcmp(command, "reseed"))
		return cli_usage_error(&cli, "unknown command \"%s\"", command);
	if ((strcmp(command, "reseed") == 0) != (o.table != NULL))
		return cli_usage_error(&cli, "--table SCHEMA.TABLE goes with reseed, and reseed needs it");
	o.json = format == FORMAT_JSON;
	struct flow_config cfg;
	if ((code = cli_load_config(&cli, &cfg)) != EXIT_OK)
		return code;
	signal(SIGPIPE, SIG_IGN);
	o.cfg = &cfg;
	code = !strcmp(command, "status") ? snapshot_status(&o)
	       : !strcmp(command, "reseed") ? snapshot_reseed(&o)
					     : snapshot_run(&o);
	config_free(&cfg);
	return code;
}
