/*
 * trellara-applyd - apply the local stream to the target PostgreSQL,
 * exactly once.  See trellara-applyd(1).
 */
#include "applyd.h"

#include "trellara/config.h"
#include "trellara/defaults.h"
#include "trellara/log.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static const char usage_text[] =
	"usage: trellara-applyd --config FILE\n"
	"\n"
	"Applies the flow's local stream to the target database, whole source\n"
	"transactions in source order, exactly once (dedup + checkpoint in the same\n"
	"target transaction).  Tails the stream until SIGTERM/SIGINT.\n"
	"\n"
	"options:\n"
	"  -c, --config FILE   flow file\n"
	"  -v, --verbose       more logging (repeatable)\n"
	"  -h, --help          this help\n"
	"  -V, --version       print the version\n"
	"\n"
	"exit codes: 0 stopped by SIGTERM/SIGINT after finishing the current target\n"
	"transaction, 1 a transaction is quarantined (see \"trellara quarantine list\"),\n"
	"64 usage, 65 corrupt stream or tampered chunked transaction, 69 target\n"
	"unavailable (or failing with transient errors) after bounded retries, 73\n"
	"stream storage failure, 75 another applyd holds this flow, 78 configuration\n"
	"error, source identity mismatch, or a target role that may not set\n"
	"session_replication_role\n";

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' }, { "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },         { "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	const char *config_path = NULL;
	int verbosity = 0, c;
	log_setup(argv[0], 0);
	while ((c = getopt_long(argc, argv, "c:vhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': config_path = optarg; break;
		case 'v': verbosity++; break;
		case 'h': fputs(usage_text, stdout); return EXIT_OK;
		case 'V': printf("trellara-applyd %s\n", TRELLARA_VERSION); return EXIT_OK;
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
	struct applyd_options options = {
		.config = &config,
		.max_reconnect_attempts = 8,
		.reconnect_base_ms = getenv(ENV_RECONNECT_BASE_MS) ? atoi(getenv(ENV_RECONNECT_BASE_MS)) : 500,
		.stop = &stop_requested,
	};
	struct applyd_stats stats;
	int code = apply_outcome_exit_code(applyd_run(&options, &stats));
	config_free(&config);
	return code;
}
