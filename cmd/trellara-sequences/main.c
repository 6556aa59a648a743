/*
 * trellara-sequences - the flow's sequences on the target: set them from
 * the source (sync) or show where they stand (list).  See
 * trellara-sequences(1).
 */
#include "seqcmd.h"

#include "trellara/cli.h"
#include "trellara/defaults.h"

#include <stdint.h>
#include <string.h>

static const char usage_text[] =
	"usage: trellara-sequences sync --config FILE [--margin N] [--format text|json]\n"
	"       trellara-sequences list --config FILE [--format text|json]\n"
	"\n"
	"The flow's sequences: those owned by a column of a flow table (serial,\n"
	"identity) and those dataset.sequences lists.  sync sets each target sequence\n"
	"to its source sequence's value, plus the margin, and never moves one\n"
	"backwards; list shows where each target sequence stands against its source.\n"
	"\n"
	"options:\n"
	"  -c, --config FILE     flow file\n"
	"      --margin N        sync: set each target sequence N increments past the\n"
	"                        source's value (default 0), room for the values the\n"
	"                        source still hands out until writes move to the target\n"
	"  -f, --format FORMAT   text (default) or json\n"
	"  -v, --verbose         more logging (repeatable)\n"
	"  -h, --help            this help\n"
	"  -V, --version         print the version\n"
	"\n"
	"exit codes: 0 done, 64 usage, 69 a server unavailable, 73 the output cannot be\n"
	"written, 78 configuration error (a dataset.sequences entry missing on a side,\n"
	"a value outside the target sequence's range)\n";

enum { OPT_MARGIN = 1000 };
enum { FORMAT_TEXT, FORMAT_JSON }; /* index into formats[] */

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "margin", required_argument, NULL, OPT_MARGIN }, { "format", required_argument, NULL, 'f' },
		CLI_COMMON_LONGOPTS
	};
	static const char *const formats[] = { "text", "json", NULL };
	struct cli cli;
	struct seqcmd_options o = { 0 };
	bool have_margin = false;
	int c, code, format = FORMAT_TEXT;
	cli_init(&cli, "trellara-sequences", usage_text, "f:", longopts, argc, argv);
	while ((c = cli_next(&cli)) != CLI_END) {
		switch (c) {
		case 'f':
			if (!cli_arg_choice(&cli, formats, &format))
				return EXIT_USAGE;
			break;
		case OPT_MARGIN:
			if (!cli_arg_u64(&cli, 0, INT64_MAX, &o.margin))
				return EXIT_USAGE;
			have_margin = true;
			break;
		default: return cli.exit_code;
		}
	}
	if ((code = cli_finish(&cli, true)) != EXIT_OK)
		return code;
	if (optind >= argc)
		return cli_usage_error(&cli, "a command is required: sync or list");
	const char *command = argv[optind++];
	if (optind < argc)
		return cli_extra_operand(&cli, optind);
	bool sync = strcmp(command, "sync") == 0;
	if (!sync && strcmp(command, "list") != 0)
		return cli_usage_error(&cli, "unknown command \"%s\"", command);
	if (have_margin && !sync)
		return cli_usage_error(&cli, "--margin goes with sync");
	o.json = format == FORMAT_JSON;
	struct flow_config cfg;
	if ((code = cli_load_config(&cli, &cfg)) != EXIT_OK)
		return code;
	o.cfg = &cfg;
	code = sync ? seqcmd_sync(&o) : seqcmd_list(&o);
	config_free(&cfg);
	return code;
}
