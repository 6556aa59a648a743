/*
 * trellara-snapshot - the consistent initial copy and its handoff to
 * streaming; status; reseed of one table.  See trellara-snapshot(1).
 */
#include "snapshot.h"

#include "trellara/config.h"
#include "trellara/defaults.h"
#include "trellara/log.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
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
	"      --create-tables       create missing target tables from the source (pg_dump),\n"
	"                            indexes and constraints after the data\n"
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

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },    { "run-id", required_argument, NULL, OPT_RUN_ID },
		{ "force", no_argument, NULL, OPT_FORCE },     { "create-tables", no_argument, NULL, OPT_CREATE_TABLES },
		{ "table", required_argument, NULL, OPT_TABLE }, { "format", required_argument, NULL, 'f' },
		{ "verbose", no_argument, NULL, 'v' },         { "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },         { NULL, 0, NULL, 0 }
	};
	const char *config_path = NULL, *format = "text";
	struct snapshot_options o = { 0 };
	int verbosity = 0, c;
	log_setup(argv[0], 0);
	while ((c = getopt_long(argc, argv, "c:f:vhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': config_path = optarg; break;
		case 'f': format = optarg; break;
		case OPT_RUN_ID: o.run_id = optarg; break;
		case OPT_FORCE: o.force = true; break;
		case OPT_CREATE_TABLES: o.create_tables = true; break;
		case OPT_TABLE: o.table = optarg; break;
		case 'v': verbosity++; break;
		case 'h': fputs(usage_text, stdout); return EXIT_OK;
		case 'V': printf("trellara-snapshot %s\n", TRELLARA_VERSION); return EXIT_OK;
		default: fputs(usage_text, stderr); return EXIT_USAGE;
		}
	}
	log_setup(argv[0], verbosity);
	const char *command = optind < argc ? argv[optind++] : "run";
	if (!config_path || optind < argc || (strcmp(format, "text") && strcmp(format, "json")) ||
	    (strcmp(command, "run") && strcmp(command, "status") && strcmp(command, "reseed")) ||
	    ((strcmp(command, "reseed") == 0) != (o.table != NULL))) {
		fputs(usage_text, stderr);
		return EXIT_USAGE;
	}
	o.json = strcmp(format, "json") == 0;
	struct flow_config cfg;
	if (config_load(config_path, &cfg) < 0)
		return EXIT_CONFIG;
	signal(SIGPIPE, SIG_IGN);
	o.cfg = &cfg;
	int code = !strcmp(command, "status") ? snapshot_status(&o)
		   : !strcmp(command, "reseed") ? snapshot_reseed(&o)
						 : snapshot_run(&o);
	config_free(&cfg);
	return code;
}
