/*
 * trellara-cutover - the last step of a migration: the target takes over
 * from the source.  See trellara-cutover(1).
 */
#include "cutcmd.h"

#include "trellara/cli.h"
#include "trellara/cutplan.h"
#include "trellara/defaults.h"

#include <stdint.h>

static const char usage_text[] =
	"usage: trellara-cutover --config FILE [--lock-source] [--keep-locked]\n"
	"                        [--sequence-margin N] [--apply-timeout SECS]\n"
	"                        [--stop-timeout SECS] [--fence-timeout SECS]\n"
	"       trellara-cutover --config FILE --abort\n"
	"\n"
	"Switches a streaming flow over to its target, one recorded step at a time\n"
	"(run it again after any failure or kill: it goes on from the last step):\n"
	"checks that nothing is quarantined and trellara run streams; with --lock-source\n"
	"makes the source database read-only for new transactions and ends its other\n"
	"sessions; waits until applyd applied through the source's WAL position; syncs\n"
	"the target's sequences; verifies (CONVERGED required); stops capture and applyd\n"
	"through trellara run; prints what to do next.  --abort undoes the lock and\n"
	"abandons a cutover in progress.\n"
	"\n"
	"options:\n"
	"  -c, --config FILE            flow file\n"
	"      --lock-source            make the source database read-only for new\n"
	"                               transactions first (sessions that began before are\n"
	"                               terminated: their open transactions roll back)\n"
	"      --keep-locked            on failure, leave the source locked (default: unlock)\n"
	"      --abort                  unlock the source and abandon the cutover\n"
	"      --sequence-margin N      set each target sequence N increments past its\n"
	"                               source (default 0 with --lock-source, 1000 without)\n"
	"      --apply-timeout SECS     how long to wait for applyd (default 300)\n"
	"      --stop-timeout SECS      how long to wait for capture and applyd to stop\n"
	"                               (default 120)\n"
	"      --fence-timeout SECS     verify's wait for applyd at its fence (default 120)\n"
	"  -v, --verbose                more logging (repeatable)\n"
	"  -h, --help                   this help\n"
	"  -V, --version                print the version\n"
	"\n"
	"exit codes: 0 cut over (or aborted), 1 refused: a quarantined transaction, the flow\n"
	"not streaming, prepared transactions on the source, or verify DIVERGED, 64 usage,\n"
	"69 a server unavailable, 75 temporary: another cutover runs, applyd did not catch\n"
	"up in time, the processes did not stop in time, a signal (run it again),\n"
	"78 configuration error\n";

enum { OPT_LOCK_SOURCE = 1000, OPT_KEEP_LOCKED, OPT_ABORT, OPT_MARGIN, OPT_APPLY_TIMEOUT, OPT_STOP_TIMEOUT,
       OPT_FENCE_TIMEOUT };

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "lock-source", no_argument, NULL, OPT_LOCK_SOURCE },
		{ "keep-locked", no_argument, NULL, OPT_KEEP_LOCKED },
		{ "abort", no_argument, NULL, OPT_ABORT },
		{ "sequence-margin", required_argument, NULL, OPT_MARGIN },
		{ "apply-timeout", required_argument, NULL, OPT_APPLY_TIMEOUT },
		{ "stop-timeout", required_argument, NULL, OPT_STOP_TIMEOUT },
		{ "fence-timeout", required_argument, NULL, OPT_FENCE_TIMEOUT },
		CLI_COMMON_LONGOPTS
	};
	struct cli cli;
	struct cutcmd_options o = { .apply_timeout_s = CUTCMD_DEFAULT_APPLY_TIMEOUT_S,
				    .stop_timeout_s = CUTCMD_DEFAULT_STOP_TIMEOUT_S,
				    .fence_timeout_s = DEFAULT_FENCE_TIMEOUT_S };
	uint64_t value;
	int c, code;
	bool other = false; /* an option that --abort does not take */
	cli_init(&cli, "trellara-cutover", usage_text, "", longopts, argc, argv);
	while ((c = cli_next(&cli)) != CLI_END) {
		switch (c) {
		case OPT_LOCK_SOURCE: o.lock_source = other = true; break;
		case OPT_KEEP_LOCKED: o.keep_locked = other = true; break;
		case OPT_ABORT: o.abort = true; break;
		case OPT_MARGIN:
			if (!cli_arg_u64(&cli, 0, INT64_MAX, &o.margin))
				return EXIT_USAGE;
			o.have_margin = other = true;
			break;
		case OPT_APPLY_TIMEOUT:
		case OPT_STOP_TIMEOUT:
		case OPT_FENCE_TIMEOUT:
			if (!cli_arg_u64(&cli, 1, c == OPT_FENCE_TIMEOUT ? MAX_FENCE_TIMEOUT_S : CUTCMD_MAX_TIMEOUT_S, &value))
				return EXIT_USAGE;
			*(c == OPT_APPLY_TIMEOUT ? &o.apply_timeout_s : c == OPT_STOP_TIMEOUT ? &o.stop_timeout_s
											: &o.fence_timeout_s) = (int)value;
			other = true;
			break;
		default: return cli.exit_code;
		}
	}
	if ((code = cli_finish(&cli, true)) != EXIT_OK)
		return code;
	if (optind < argc)
		return cli_extra_operand(&cli, optind);
	if (o.abort && other)
		return cli_usage_error(&cli, "--abort takes no other option but --config and --verbose");
	struct flow_config cfg;
	if ((code = cli_load_config(&cli, &cfg)) != EXIT_OK)
		return code;
	o.stop = cli_catch_stop_signals();
	o.cfg = &cfg;
	code = cutcmd_run(&o);
	config_free(&cfg);
	return code;
}
