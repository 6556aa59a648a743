/*
 * trellara-inspect-transaction - one source transaction as the stream
 * holds it.  See trellara-inspect-transaction(1).
 */
#include "inspect.h"

#include "trellara/cli.h"
#include "trellara/config.h"
#include "trellara/defaults.h"
#include "trellara/log.h"
#include "trellara/lsn.h"

#include <stdio.h>

static const char usage_text[] =
	"usage: trellara-inspect-transaction (--config FILE (--commit-lsn LSN | --offset N) |\n"
	"                                     --file FRAMES [--config FILE] [--commit-lsn LSN | --offset N])\n"
	"                                    [--format text|json]\n"
	"\n"
	"Shows one source transaction as the stream holds it: every frame of it (offset,\n"
	"type, length, flags, compression) with its checksum (match or mismatch), the tables\n"
	"it changes with insert/update/delete counts, for a chunked transaction the chunk\n"
	"manifest and whether the commit marker binds to it, and whether applyd applied it\n"
	"(from the target's apply checkpoint: applied, not applied, or unknown).  Reads a\n"
	"local stream (stream.kind local); never writes anything.\n"
	"\n"
	"options:\n"
	"  -c, --config FILE     flow file: the stream (stream.path) and the target's checkpoint;\n"
	"                        with --file, only the target's checkpoint\n"
	"      --commit-lsn LSN  the transaction that commits at LSN (X/X)\n"
	"      --offset N        the transaction of the frame at stream offset N\n"
	"      --file FRAMES     a file of frames in the on-disk framing (cut from a segment)\n"
	"                        instead of the stream: the transaction named as above, or\n"
	"                        else the file's first one\n"
	"  -f, --format FORMAT   text (default) or json\n"
	"  -v, --verbose         more logging (repeatable)\n"
	"  -h, --help            this help\n"
	"  -V, --version         print the version\n"
	"\n"
	"exit codes: 0 every frame's checksum matches and the binding holds (or is n/a),\n"
	"1 no transaction at that commit LSN or offset (or not complete in the stream yet),\n"
	"64 usage, 65 a checksum mismatch, a broken binding or an unreadable stream,\n"
	"78 configuration error (stream.kind jetstream included)\n";

enum { OPT_COMMIT_LSN = 1000, OPT_OFFSET, OPT_FILE };
enum { FORMAT_TEXT, FORMAT_JSON }; /* index into formats[] */

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "commit-lsn", required_argument, NULL, OPT_COMMIT_LSN },
		{ "offset", required_argument, NULL, OPT_OFFSET },
		{ "file", required_argument, NULL, OPT_FILE },
		CLI_COMMON_LONGOPTS
	};
	static const char *const formats[] = { "text", "json", NULL };
	struct cli cli;
	struct inspect_options o = { 0 };
	struct flow_config config;
	bool config_loaded = false;
	int c, code = EXIT_OK, format = FORMAT_TEXT;

	cli_init(&cli, "trellara-inspect-transaction", usage_text, "f:", longopts, argc, argv);
	while ((c = cli_next(&cli)) != CLI_END) {
		switch (c) {
		case 'f':
			if (!cli_arg_choice(&cli, formats, &format))
				return EXIT_USAGE;
			break;
		case OPT_COMMIT_LSN:
			if (!lsn_parse(cli.arg, &o.commit_lsn)) {
				return cli_usage_error(&cli, "invalid value \"%s\" for option %s: not an LSN (X/X)", cli.arg,
						       cli.option);
			}
			o.have_commit_lsn = true;
			break;
		case OPT_OFFSET:
			if (!cli_arg_u64(&cli, 0, UINT64_MAX, &o.offset))
				return EXIT_USAGE;
			o.have_offset = true;
			break;
		case OPT_FILE: o.frame_file = cli.arg; break;
		default: return cli.exit_code;
		}
	}
	if ((code = cli_finish(&cli, false)) != EXIT_OK)
		return code;
	if (optind < argc)
		return cli_extra_operand(&cli, optind);
	if (o.have_commit_lsn && o.have_offset)
		return cli_usage_error(&cli, "give at most one of --commit-lsn LSN and --offset N");
	if (!o.frame_file && !cli.config_path)
		return cli_usage_error(&cli, "give --config FILE (the flow's stream) or --file FRAMES");
	if (!o.frame_file && !o.have_commit_lsn && !o.have_offset)
		return cli_usage_error(&cli, "with --config, name the transaction: --commit-lsn LSN or --offset N");
	o.json = format == FORMAT_JSON;
	if (cli.config_path) {
		if ((code = cli_load_config(&cli, &config)) != EXIT_OK)
			return code;
		config_loaded = true;
		if (config.stream_kind != STREAM_KIND_LOCAL && !o.frame_file) {
			log_error("%s: stream.kind is \"%s\": trellara inspect-transaction reads a local stream's segments",
				  config.path, config.stream_kind_name);
			log_hint("cut the frames out of the JetStream stream into a file and give it with --file (and --config for the checkpoint)");
			code = EXIT_CONFIG;
			goto out;
		}
		o.config = &config;
		if (!o.frame_file)
			o.stream_dir = config.stream_path;
	}
	code = inspect_run(&o);
out:
	if (config_loaded)
		config_free(&config);
	return code;
}
