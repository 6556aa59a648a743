/*
 * trellara-verify - prove that the target converged, or name how it
 * diverged and how to recover.  See trellara-verify(1).
 */
#include "verify.h"

#include "trellara/config.h"
#include "trellara/defaults.h"
#include "trellara/log.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static const char usage_text[] =
	"usage: trellara-verify --config FILE [--table SCHEMA.TABLE] [--format text|json]\n"
	"\n"
	"Compares the source at an exported snapshot with the target held at the same\n"
	"LSN (a fence that trellara-applyd honours): row counts, key-bucket checksums\n"
	"narrowed down to the divergent keys, the apply watermark, the snapshot handoff,\n"
	"duplicate accounting.  Answers CONVERGED or names each divergence.\n"
	"\n"
	"options:\n"
	"  -c, --config FILE          flow file\n"
	"      --table SCHEMA.TABLE   only this configured table\n"
	"  -f, --format FORMAT        text (default) or json\n"
	"      --fence-timeout SECS   how long to wait for applyd to reach the fence (default 120)\n"
	"  -v, --verbose              more logging (repeatable)\n"
	"  -h, --help                 this help\n"
	"  -V, --version              print the version\n"
	"\n"
	"exit codes: 0 CONVERGED, 1 DIVERGED, 64 usage, 69 a server unavailable,\n"
	"75 the target did not reach the fence in time (is trellara-applyd running?),\n"
	"78 configuration error\n";

enum { OPT_TABLE = 1000, OPT_FENCE_TIMEOUT };

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' }, { "table", required_argument, NULL, OPT_TABLE },
		{ "format", required_argument, NULL, 'f' }, { "fence-timeout", required_argument, NULL, OPT_FENCE_TIMEOUT },
		{ "verbose", no_argument, NULL, 'v' },      { "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },      { NULL, 0, NULL, 0 }
	};
	const char *config_path = NULL, *format = "text";
	struct verify_options o = { .fence_timeout_s = 120, .stop = &stop_requested };
	int verbosity = 0, c;
	log_setup(argv[0], 0);
	while ((c = getopt_long(argc, argv, "c:f:vhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': config_path = optarg; break;
		case 'f': format = optarg; break;
		case OPT_TABLE: o.table = optarg; break;
		case OPT_FENCE_TIMEOUT: o.fence_timeout_s = atoi(optarg); break;
		case 'v': verbosity++; break;
		case 'h': fputs(usage_text, stdout); return EXIT_OK;
		case 'V': printf("trellara-verify %s\n", TRELLARA_VERSION); return EXIT_OK;
		default: fputs(usage_text, stderr); return EXIT_USAGE;
		}
	}
	log_setup(argv[0], verbosity);
	if (!config_path || optind < argc || (strcmp(format, "text") && strcmp(format, "json")) || o.fence_timeout_s <= 0) {
		fputs(usage_text, stderr);
		return EXIT_USAGE;
	}
	o.json = strcmp(format, "json") == 0;
	struct flow_config cfg;
	if (config_load(config_path, &cfg) < 0)
		return EXIT_CONFIG;
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	o.cfg = &cfg;
	int code = verify_run(&o);
	config_free(&cfg);
	return code;
}
