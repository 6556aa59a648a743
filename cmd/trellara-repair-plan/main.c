/*
 * trellara-repair-plan - the exact repair of a DIVERGED verify result,
 * printed for review, applied only with --apply.  See
 * trellara-repair-plan(1).
 */
#include "repair.h"

#include "trellara/cli.h"
#include "trellara/defaults.h"

static const char usage_text[] =
	"usage: trellara-repair-plan --config FILE --from VERIFY.json [--apply] [--max-keys N]\n"
	"                            [--format text|json] [--fence-timeout SECS]\n"
	"\n"
	"Reads the result of \"trellara verify --format json\" and plans, for each\n"
	"divergent key, its exact repair: copy the source row (missing_in_target),\n"
	"delete the target row (extra_in_target), replace the target row with the\n"
	"source row (content_differs).  A table it cannot repair exactly row by row\n"
	"(no key, keys not all listed, verify could not compare it, more than\n"
	"--max-keys keys) gets the reseed of the table instead.  The plan is printed\n"
	"for review; --apply applies it behind verify's fence in one target\n"
	"transaction, records it as evidence in the checkpoint schema, and verifies\n"
	"every table of the flow again.\n"
	"\n"
	"options:\n"
	"  -c, --config FILE          flow file\n"
	"      --from FILE            the verify result (trellara verify --format json)\n"
	"      --apply                apply the row repairs, then verify again\n"
	"      --max-keys N           divergent keys of one table repaired row by row; more:\n"
	"                             its reseed (default 1000)\n"
	"  -f, --format FORMAT        text (default) or json\n"
	"      --fence-timeout SECS   how long to wait for applyd to reach the fence (default 120)\n"
	"  -v, --verbose              more logging (repeatable)\n"
	"  -h, --help                 this help\n"
	"  -V, --version              print the version\n"
	"\n"
	"exit codes: 0 a plan printed, or applied and CONVERGED (also: a CONVERGED\n"
	"result, nothing to repair), 1 applied and still DIVERGED or a table needs its\n"
	"reseed (--apply), 64 usage, 65 the file is not a verify result (the field is\n"
	"named), 66 the file cannot be read, 69 a server unavailable, 75 the target did\n"
	"not reach the fence in time or stopped by a signal, 78 configuration error\n";

enum { OPT_FROM = 1000, OPT_APPLY, OPT_MAX_KEYS, OPT_FENCE_TIMEOUT };
enum { FORMAT_TEXT, FORMAT_JSON }; /* index into formats[] */

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "from", required_argument, NULL, OPT_FROM }, { "apply", no_argument, NULL, OPT_APPLY },
		{ "max-keys", required_argument, NULL, OPT_MAX_KEYS }, { "format", required_argument, NULL, 'f' },
		{ "fence-timeout", required_argument, NULL, OPT_FENCE_TIMEOUT }, CLI_COMMON_LONGOPTS
	};
	static const char *const formats[] = { "text", "json", NULL };
	struct cli cli;
	struct repair_options o = { .max_keys = DEFAULT_REPAIR_MAX_KEYS, .fence_timeout_s = DEFAULT_FENCE_TIMEOUT_S };
	uint64_t value;
	int c, code, format = FORMAT_TEXT;
	cli_init(&cli, "trellara-repair-plan", usage_text, "f:", longopts, argc, argv);
	while ((c = cli_next(&cli)) != CLI_END) {
		switch (c) {
		case 'f':
			if (!cli_arg_choice(&cli, formats, &format))
				return EXIT_USAGE;
			break;
		case OPT_FROM: o.from = cli.arg; break;
		case OPT_APPLY: o.apply = true; break;
		case OPT_MAX_KEYS:
			if (!cli_arg_u64(&cli, 1, VERIFY_MAX_RECORDED_KEYS, &o.max_keys))
				return EXIT_USAGE;
			break;
		case OPT_FENCE_TIMEOUT:
			if (!cli_arg_u64(&cli, 1, MAX_FENCE_TIMEOUT_S, &value))
				return EXIT_USAGE;
			o.fence_timeout_s = (int)value;
			break;
		default: return cli.exit_code;
		}
	}
	if ((code = cli_finish(&cli, true)) != EXIT_OK)
		return code;
	if (optind < argc)
		return cli_extra_operand(&cli, optind);
	if (!o.from)
		return cli_usage_error(&cli, "--from VERIFY.json is required");
	o.json = format == FORMAT_JSON;
	struct flow_config cfg;
	if ((code = cli_load_config(&cli, &cfg)) != EXIT_OK)
		return code;
	o.stop = cli_catch_stop_signals();
	o.cfg = &cfg;
	code = repair_plan_run(&o);
	config_free(&cfg);
	return code;
}
