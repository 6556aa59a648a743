/*
 * trellara-applyd - apply the flow's stream to the target PostgreSQL,
 * exactly once.  See trellara-applyd(1).
 */
#include "applyd.h"

#include "trellara/cli.h"
#include "trellara/defaults.h"

static const char usage_text[] =
	"usage: trellara-applyd --config FILE\n"
	"\n"
	"Applies the flow's stream (local, or JetStream) to the target database, whole source\n"
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
	"64 usage, 65 corrupt stream or tampered chunked transaction, 69 target (or a\n"
	"JetStream stream's servers) unavailable, or the target failing with transient\n"
	"errors, after bounded retries, 73\n"
	"stream storage failure, 75 another applyd holds this flow, 78 configuration\n"
	"error, source identity mismatch, a target role that may not set\n"
	"session_replication_role, or a schema drift from the pinned contract\n"
	"(dataset.contract: pinned)\n";

int main(int argc, char **argv)
{
	static const struct option longopts[] = { CLI_COMMON_LONGOPTS };
	struct cli cli;
	int c, code;
	cli_init(&cli, "trellara-applyd", usage_text, "", longopts, argc, argv);
	while ((c = cli_next(&cli)) != CLI_END)
		if (c == CLI_EXIT)
			return cli.exit_code;
	if ((code = cli_finish(&cli, true)) != EXIT_OK)
		return code;
	if (optind < argc)
		return cli_extra_operand(&cli, optind);
	uint64_t reconnect_base_ms;
	if ((code = cli_env_u64(ENV_RECONNECT_BASE_MS, DEFAULT_RECONNECT_BASE_MS, MIN_RECONNECT_BASE_MS,
				MAX_RECONNECT_BASE_MS, &reconnect_base_ms)) != EXIT_OK)
		return code;
	struct flow_config config;
	if ((code = cli_load_config(&cli, &config)) != EXIT_OK)
		return code;
	struct applyd_options options = {
		.config = &config,
		.max_reconnect_attempts = DEFAULT_MAX_RECONNECT_ATTEMPTS,
		.reconnect_base_ms = (int)reconnect_base_ms,
		.stop = cli_catch_stop_signals(),
	};
	struct applyd_stats stats;
	code = apply_outcome_exit_code(applyd_run(&options, &stats));
	config_free(&config);
	return code;
}
