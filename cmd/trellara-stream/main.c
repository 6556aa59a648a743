/*
 * trellara-stream - the stream's own tool: inspect-local, read, locate,
 * retention, append on a local stream; init and inspect on a JetStream
 * one (stream.kind jetstream).  See trellara-stream(1).
 */
#include "stream_cli.h"

#include "trellara/cli.h"
#include "trellara/config.h"
#include "trellara/defaults.h"
#include "trellara/log.h"
#include "trellara/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char usage_text[] =
	"usage: trellara-stream COMMAND (--config FILE | --dir DIR) [OPTIONS]\n"
	"\n"
	"commands:\n"
	"  inspect-local   report segments, offsets, torn tail, index state, groups (never modifies)\n"
	"  read            print frames: [--from N] [--count N] [--follow] [--raw]\n"
	"  locate          where a frame lives: --offset N | --lsn LSN\n"
	"  retention       segments no protected group needs: [--apply] [--protect GROUP]...;\n"
	"                  with stream.kind jetstream (--config): the messages every group of\n"
	"                  stream.protected_groups has passed, never the last one [--apply]\n"
	"  append          append JSON lines from stdin, print each acknowledged offset\n"
	"  init            stream.kind jetstream: create the flow's JetStream stream, or check the\n"
	"                  existing one's settings (--config only)\n"
	"  inspect         stream.kind jetstream: stream state, replicas and leader, protected\n"
	"                  groups' positions and pending frames, consumers\n"
	"                  (--config only; never modifies)\n"
	"\n"
	"options:\n"
	"  -c, --config FILE       flow file (stream.path and stream settings)\n"
	"  -d, --dir DIR           stream directory (instead of --config)\n"
	"  -f, --format FORMAT     text (default) or json\n"
	"      --from N            read: first offset (default: the first retained)\n"
	"      --count N           read: stop after N frames\n"
	"      --follow            read: wait for new frames until SIGINT/SIGTERM\n"
	"      --raw               read: header fields and payload as base64, undecoded\n"
	"      --offset N          locate: the frame at offset N\n"
	"      --lsn LSN           locate: the transaction at a source LSN\n"
	"      --apply             retention: delete the segments (default: only report)\n"
	"      --no-groups-ok      retention: with no consumer group to protect, delete every\n"
	"                          sealed segment (default: delete nothing)\n"
	"      --protect GROUP     retention, inspect-local with --dir: protect GROUP (repeatable;\n"
	"                          default with --dir: every existing group)\n"
	"      --segment-bytes N   append with --dir: segment size (default 67108864)\n"
	"      --min-free-bytes N  append with --dir: fail closed below this (default 1073741824)\n"
	"      --batch N           append with --dir: frames per fdatasync at most (default 100)\n"
	"  -v, --verbose           more logging (repeatable)\n"
	"  -h, --help              this help\n"
	"  -V, --version           print the version\n"
	"\n"
	"exit codes: 0 ok, 64 usage, 65 corrupt stream or bad input, 66 no such JetStream\n"
	"stream (inspect, retention), 69 JetStream servers or the stream's quorum unavailable, 73 storage\n"
	"failure or low disk, 75 locked by another writer (retry), 78 configuration error\n"
	"(init: an existing JetStream stream's setting refused)\n";

static bool stream_exists(const char *dir)
{
	char *segments = xasprintf("%s/segments", dir);
	struct stat st;
	bool ok = stat(segments, &st) == 0 && S_ISDIR(st.st_mode);
	free(segments);
	return ok;
}

enum {
	OPT_FROM = 1000, OPT_COUNT, OPT_FOLLOW, OPT_RAW, OPT_OFFSET, OPT_LSN, OPT_APPLY, OPT_PROTECT,
	OPT_SEGMENT_BYTES, OPT_MIN_FREE, OPT_BATCH, OPT_NO_GROUPS_OK
};
enum { FORMAT_TEXT, FORMAT_JSON }; /* index into formats[] */

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "dir", required_argument, NULL, 'd' },          { "format", required_argument, NULL, 'f' },
		{ "from", required_argument, NULL, OPT_FROM },    { "count", required_argument, NULL, OPT_COUNT },
		{ "follow", no_argument, NULL, OPT_FOLLOW },      { "raw", no_argument, NULL, OPT_RAW },
		{ "offset", required_argument, NULL, OPT_OFFSET }, { "lsn", required_argument, NULL, OPT_LSN },
		{ "apply", no_argument, NULL, OPT_APPLY },        { "protect", required_argument, NULL, OPT_PROTECT },
		{ "segment-bytes", required_argument, NULL, OPT_SEGMENT_BYTES },
		{ "min-free-bytes", required_argument, NULL, OPT_MIN_FREE },
		{ "batch", required_argument, NULL, OPT_BATCH },  { "no-groups-ok", no_argument, NULL, OPT_NO_GROUPS_OK },
		CLI_COMMON_LONGOPTS
	};
	static const char *const formats[] = { "text", "json", NULL };
	struct stream_cli_options o = {
		.segment_bytes = DEFAULT_SEGMENT_BYTES,
		.min_free_bytes = DEFAULT_MIN_FREE_BYTES,
		.max_batch_messages = DEFAULT_MAX_BATCH_MESSAGES,
	};
	struct cli cli;
	const char *dir = NULL;
	const char **protect = NULL;
	size_t n_protect = 0;
	bool have_segment = false, have_min_free = false, have_batch = false;
	int c, code = EXIT_OK, format = FORMAT_TEXT;
	struct flow_config config;
	bool config_loaded = false;

	cli_init(&cli, "trellara-stream", usage_text, "d:f:", longopts, argc, argv);
	while ((c = cli_next(&cli)) != CLI_END) {
		uint64_t *number = NULL;
		bool *given = NULL;
		switch (c) {
		case 'd': dir = cli.arg; break;
		case 'f':
			if (!cli_arg_choice(&cli, formats, &format)) {
				code = EXIT_USAGE;
				goto out;
			}
			break;
		case OPT_FOLLOW: o.follow = true; break;
		case OPT_RAW: o.raw = true; break;
		case OPT_APPLY: o.apply = true; break;
		case OPT_NO_GROUPS_OK: o.no_groups_ok = true; break;
		case OPT_LSN: o.lsn = cli.arg; break;
		case OPT_PROTECT:
			protect = xrealloc(protect, (n_protect + 1) * sizeof *protect);
			protect[n_protect++] = cli.arg;
			break;
		case OPT_FROM: number = &o.from, given = &o.have_from; break;
		case OPT_COUNT: number = &o.count, given = &o.have_count; break;
		case OPT_OFFSET: number = &o.offset, given = &o.have_offset; break;
		case OPT_SEGMENT_BYTES: number = &o.segment_bytes, given = &have_segment; break;
		case OPT_MIN_FREE: number = &o.min_free_bytes, given = &have_min_free; break;
		case OPT_BATCH: number = &o.max_batch_messages, given = &have_batch; break;
		default: code = cli.exit_code; goto out;
		}
		if (number) {
			if (!cli_arg_u64(&cli, 0, UINT64_MAX, number)) {
				code = EXIT_USAGE;
				goto out;
			}
			*given = true;
		}
	}
	if ((code = cli_finish(&cli, false)) != EXIT_OK)
		goto out;
	if (optind >= argc) {
		code = cli_usage_error(&cli, "a command is required: inspect-local, read, locate, retention, append, init "
					     "or inspect");
		goto out;
	}
	const char *command = argv[optind++];
	static const char *const commands[] = { "inspect-local", "read", "locate", "retention", "append", "init", "inspect" };
	bool known = false;
	for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
		known = known || strcmp(command, commands[i]) == 0;
	if (!known) {
		code = cli_usage_error(&cli, "unknown command \"%s\"", command);
		goto out;
	}
	if (optind < argc) {
		code = cli_extra_operand(&cli, optind);
		goto out;
	}
	o.json = format == FORMAT_JSON;
	const char *config_path = cli.config_path;
	if (!config_path == !dir) {
		code = cli_usage_error(&cli, "give exactly one of --config FILE and --dir DIR");
		goto out;
	}
	bool jetstream_command = strcmp(command, "init") == 0 || strcmp(command, "inspect") == 0;
	/* retention works on either kind, by the flow file's */
	bool either_kind = strcmp(command, "retention") == 0;
	if (jetstream_command && !config_path) {
		code = cli_usage_error(&cli, "%s needs --config FILE (a flow with stream.kind jetstream)", command);
		goto out;
	}
	if (config_path) {
		cli.local_only = !(jetstream_command || either_kind);
		if ((code = cli_load_config(&cli, &config)) != EXIT_OK)
			goto out;
		config_loaded = true;
		if (either_kind && config.stream_kind == STREAM_KIND_JETSTREAM) {
			if (n_protect || o.no_groups_ok)
				code = cli_usage_error(&cli, "--protect and --no-groups-ok go with a local stream; a JetStream stream's protected groups are stream.protected_groups");
			else
				code = stream_cli_jetstream_retention(&config, o.apply, format == FORMAT_JSON);
			goto out;
		}
		if (jetstream_command) {
			if (config.stream_kind != STREAM_KIND_JETSTREAM) {
				log_error("%s: stream.kind is \"%s\": \"trellara stream %s\" is for a JetStream stream",
					  config.path, config.stream_kind_name, command);
				if (strcmp(command, "init") == 0)
					log_hint("a local stream needs no init: capture creates it at stream.path");
				else
					log_hint("use \"trellara stream inspect-local --config %s\"", config.path);
				code = EXIT_CONFIG;
			} else if (strcmp(command, "init") == 0) {
				code = stream_cli_jetstream_init(&config, format == FORMAT_JSON);
			} else {
				code = stream_cli_jetstream_inspect(&config, format == FORMAT_JSON);
			}
			goto out;
		}
		if (have_segment || have_min_free || have_batch) {
			code = cli_usage_error(&cli, "--segment-bytes, --min-free-bytes and --batch go with --dir; "
						     "with --config the flow file's stream settings apply");
			goto out;
		}
		o.dir = config.stream_path;
		o.source_id = config.source_id;
		o.segment_bytes = config.segment_bytes;
		o.min_free_bytes = config.min_free_bytes;
		o.compression_zlib = config.stream_compression_zlib;
		o.max_batch_messages = config.max_batch_messages;
		o.protected_groups = (const char *const *)config.protected_groups;
		o.n_protected = config.n_protected_groups;
		if (n_protect) {
			o.protected_groups = protect;
			o.n_protected = n_protect;
		}
	} else {
		o.dir = dir;
		o.protected_groups = protect;
		o.n_protected = n_protect;
		o.protect_all_groups = n_protect == 0;
	}
	char *flow = config_loaded ? config_flow_id(&config) : NULL;
	o.flow = flow;

	o.stop = cli_catch_stop_signals();

	if (strcmp(command, "append") != 0 && !stream_exists(o.dir)) {
		code = cli_usage_error(&cli, "no stream at \"%s\" (no segments directory)", o.dir);
	} else if (strcmp(command, "inspect-local") == 0)
		code = stream_cli_inspect(&o);
	else if (strcmp(command, "read") == 0)
		code = stream_cli_read(&o);
	else if (strcmp(command, "locate") == 0) {
		if (o.have_offset == (o.lsn != NULL)) {
			code = cli_usage_error(&cli, "locate needs exactly one of --offset N and --lsn LSN");
		} else {
			code = stream_cli_locate(&o);
		}
	} else if (strcmp(command, "retention") == 0)
		code = stream_cli_retention(&o);
	else if (strcmp(command, "append") == 0)
		code = stream_cli_append(&o);
	else {
		code = cli_usage_error(&cli, "unknown command \"%s\"", command);
	}
	free(flow);
out:
	if (config_loaded)
		config_free(&config);
	free(protect);
	return code;
}
