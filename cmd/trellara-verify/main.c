/*
 * trellara-verify - prove that the target converged, or name how it
 * diverged and how to recover.  See trellara-verify(1).
 */
#include "verify.h"

#include "trellara/cli.h"
#include "trellara/defaults.h"

static const char usage_text[] =
	"usage: trellara-verify --config FILE [--table SCHEMA.TABLE] [--format text|json]\n"
	"                       [--fence-timeout SECS] [--max-attempts N]\n"
	"                       [--sequences report|strict]\n"
	"\n"
	"Compares the source at an exported snapshot with the target held at the same\n"
	"LSN (a fence that trellara-applyd honours, announced in the stream by a\n"
	"trellara.fence logical message): row counts, row-hash bucket sums from one\n"
	"pass over each table narrowed down to the divergent keys, the apply watermark,\n"
	"the snapshot handoff, duplicate accounting.  Answers CONVERGED or names each\n"
	"divergence.  A pass that loses a connection records nothing and starts again\n"
	"after a backoff.\n"
	"\n"
	"options:\n"
	"  -c, --config FILE          flow file\n"
	"      --table SCHEMA.TABLE   only this configured table\n"
	"  -f, --format FORMAT        text (default) or json\n"
	"      --fence-timeout SECS   how long to wait for applyd to reach the fence (default 120)\n"
	"      --max-attempts N       passes before a lost connection is exit 69 (default 5)\n"
	"      --sequences MODE       report (default): a target sequence behind its source is\n"
	"                             reported with the sync command; strict: it is a divergence\n"
	"  -v, --verbose              more logging (repeatable)\n"
	"  -h, --help                 this help\n"
	"  -V, --version              print the version\n"
	"\n"
	"exit codes: 0 CONVERGED, 1 DIVERGED, 64 usage, 69 a server unavailable (after\n"
	"--max-attempts passes), 75 the target did not reach the fence in time (is\n"
	"trellara-applyd running?), a quarantined transaction stopped applyd (named), or\n"
	"stopped by a signal, 78 configuration error (also:\n"
	"the source role may not call pg_logical_emit_message)\n";

enum { OPT_TABLE = 1000, OPT_FENCE_TIMEOUT, OPT_MAX_ATTEMPTS, OPT_SEQUENCES };
enum { FORMAT_TEXT, FORMAT_JSON }; /* index into formats[] */

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "table", required_argument, NULL, OPT_TABLE }, { "format", required_argument, NULL, 'f' },
		{ "fence-timeout", required_argument, NULL, OPT_FENCE_TIMEOUT },
		{ "max-attempts", required_argument, NULL, OPT_MAX_ATTEMPTS },
		{ "sequences", required_argument, NULL, OPT_SEQUENCES }, CLI_COMMON_LONGOPTS
	};
	static const char *const formats[] = { "text", "json", NULL };
	static const char *const sequence_modes[] = { "report", "strict", NULL };
	int sequence_mode = 0;
	struct cli cli;
	struct verify_options o = { .fence_timeout_s = DEFAULT_FENCE_TIMEOUT_S, .max_attempts = DEFAULT_VERIFY_MAX_ATTEMPTS };
	uint64_t fence_timeout_s, max_attempts, retry_base_ms;
	int c, code, format = FORMAT_TEXT;
	cli_init(&cli, "trellara-verify", usage_text, "f:", longopts, argc, argv);
	while ((c = cli_next(&cli)) != CLI_END) {
		switch (c) {
		case 'f':
			if (!cli_arg_choice(&cli, formats, &format))
				return EXIT_USAGE;
			break;
		case OPT_TABLE: o.table = cli.arg; break;
		case OPT_SEQUENCES:
			if (!cli_arg_choice(&cli, sequence_modes, &sequence_mode))
				return EXIT_USAGE;
			break;
		case OPT_FENCE_TIMEOUT:
			if (!cli_arg_u64(&cli, 1, MAX_FENCE_TIMEOUT_S, &fence_timeout_s))
				return EXIT_USAGE;
			o.fence_timeout_s = (int)fence_timeout_s;
			break;
		case OPT_MAX_ATTEMPTS:
			if (!cli_arg_u64(&cli, 1, MAX_VERIFY_MAX_ATTEMPTS, &max_attempts))
				return EXIT_USAGE;
			o.max_attempts = (int)max_attempts;
			break;
		default: return cli.exit_code;
		}
	}
	if ((code = cli_finish(&cli, true)) != EXIT_OK)
		return code;
	if (optind < argc)
		return cli_extra_operand(&cli, optind);
	o.json = format == FORMAT_JSON;
	o.sequences_strict = sequence_mode == 1;
	if ((code = cli_env_u64(ENV_RECONNECT_BASE_MS, DEFAULT_RECONNECT_BASE_MS, MIN_RECONNECT_BASE_MS,
				MAX_RECONNECT_BASE_MS, &retry_base_ms)) != EXIT_OK)
		return code;
	o.retry_base_ms = (int)retry_base_ms;
	struct flow_config cfg;
	if ((code = cli_load_config(&cli, &cfg)) != EXIT_OK)
		return code;
	o.stop = cli_catch_stop_signals();
	o.cfg = &cfg;
	code = verify_run(&o);
	config_free(&cfg);
	return code;
}
