/*
 * trellara-capture - stream a logical slot (pgoutput v2) into the
 * flow's stream: the durable local stream, or a JetStream stream
 * (stream.kind jetstream).  See trellara-capture(1).
 */
#include "capture.h"

#include "trellara/cli.h"
#include "trellara/defaults.h"

static const char usage_text[] =
	"usage: trellara-capture --config FILE [--start-now]\n"
	"\n"
	"Streams the flow's logical replication slot (pgoutput, protocol 2) into its\n"
	"stream (local, or JetStream); acknowledges to the source only what is durable\n"
	"in the stream.\n"
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
	"64 usage, 65 malformed replication data or stream, 69 source unavailable after\n"
	"bounded retries or JetStream servers unavailable, 73 stream storage failure or\n"
	"low disk, 75 stream locked by another writer (JetStream: another writer appended),\n"
	"78 configuration error, source identity mismatch, JetStream stream missing or refused,\n"
	"or a schema drift from the pinned contract (dataset.contract: pinned)\n";

enum { OPT_START_NOW = 1000 };

int main(int argc, char **argv)
{
	static const struct option longopts[] = { { "start-now", no_argument, NULL, OPT_START_NOW },
						  CLI_COMMON_LONGOPTS };
	struct cli cli;
	bool start_now = false;
	int c, code;
	cli_init(&cli, "trellara-capture", usage_text, "", longopts, argc, argv);
	while ((c = cli_next(&cli)) != CLI_END) {
		switch (c) {
		case OPT_START_NOW: start_now = true; break;
		default: return cli.exit_code;
		}
	}
	if ((code = cli_finish(&cli, true)) != EXIT_OK)
		return code;
	if (optind < argc)
		return cli_extra_operand(&cli, optind);
	uint64_t status_interval_ms, reconnect_base_ms;
	if ((code = cli_env_u64(ENV_STATUS_INTERVAL_MS, DEFAULT_STATUS_INTERVAL_MS, MIN_STATUS_INTERVAL_MS,
				MAX_STATUS_INTERVAL_MS, &status_interval_ms)) != EXIT_OK ||
	    (code = cli_env_u64(ENV_RECONNECT_BASE_MS, DEFAULT_RECONNECT_BASE_MS, MIN_RECONNECT_BASE_MS,
				MAX_RECONNECT_BASE_MS, &reconnect_base_ms)) != EXIT_OK)
		return code;
	struct flow_config config;
	if ((code = cli_load_config(&cli, &config)) != EXIT_OK)
		return code;
	struct capture_options options = {
		.config = &config,
		.start_now = start_now,
		.status_interval_ms = (int)status_interval_ms,
		.watermark_interval_ms = DEFAULT_WATERMARK_INTERVAL_MS,
		.max_reconnect_attempts = DEFAULT_MAX_RECONNECT_ATTEMPTS,
		.reconnect_base_ms = (int)reconnect_base_ms,
		.stop = cli_catch_stop_signals(),
	};
	struct capture_stats stats;
	code = capture_run(&options, &stats);
	config_free(&config);
	return code;
}
