/*
 * trellara-capture - stream a logical slot (pgoutput v2) into the
 * durable local stream.  See trellara-capture(1).
 */
#include "capture.h"

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
	"usage: trellara-capture --config FILE [--start-now]\n"
	"\n"
	"Streams the flow's logical replication slot (pgoutput, protocol 2) into its\n"
	"local stream; acknowledges to the source only what is durable in the stream.\n"
	"\n"
	"options:\n"
	"  -c, --config FILE   flow file\n"
	"      --start-now     stream from the slot's current position without a\n"
	"                      handoff-ready snapshot run (creates the slot if missing)\n"
	"  -v, --verbose       more logging (repeatable)\n"
	"  -h, --help          this help\n"
	"  -V, --version       print the version\n"
	"\n"
	"exit codes: 0 stopped by SIGTERM/SIGINT after a final fdatasync and status update,\n"
	"64 usage, 65 malformed replication data, 69 source unavailable after bounded retries,\n"
	"73 stream storage failure or low disk, 75 stream locked by another writer,\n"
	"78 configuration error or source identity mismatch\n";

enum { OPT_START_NOW = 1000 };

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' }, { "start-now", no_argument, NULL, OPT_START_NOW },
		{ "verbose", no_argument, NULL, 'v' },      { "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },      { NULL, 0, NULL, 0 }
	};
	const char *config_path = NULL;
	bool start_now = false;
	int verbosity = 0, c;
	log_setup(argv[0], 0);
	while ((c = getopt_long(argc, argv, "c:vhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': config_path = optarg; break;
		case OPT_START_NOW: start_now = true; break;
		case 'v': verbosity++; break;
		case 'h': fputs(usage_text, stdout); return EXIT_OK;
		case 'V': printf("trellara-capture %s\n", TRELLARA_VERSION); return EXIT_OK;
		default: fputs(usage_text, stderr); return EXIT_USAGE;
		}
	}
	log_setup(argv[0], verbosity);
	if (!config_path || optind < argc) {
		fputs(usage_text, stderr);
		return EXIT_USAGE;
	}
	struct flow_config config;
	if (config_load(config_path, &config) < 0)
		return EXIT_CONFIG;
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	const char *interval = getenv(ENV_STATUS_INTERVAL_MS);
	struct capture_options options = {
		.config = &config,
		.start_now = start_now,
		.status_interval_ms = interval && atoi(interval) > 0 ? atoi(interval) : 10000,
		.watermark_interval_ms = 1000,
		.max_reconnect_attempts = 8,
		.reconnect_base_ms = getenv(ENV_RECONNECT_BASE_MS) ? atoi(getenv(ENV_RECONNECT_BASE_MS)) : 500,
		.stop = &stop_requested,
	};
	struct capture_stats stats;
	int code = capture_run(&options, &stats);
	config_free(&config);
	return code;
}
