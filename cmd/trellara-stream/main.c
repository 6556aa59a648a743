/*
 * trellara-stream - the stream's own tool: inspect-local, read, locate,
 * retention, append.  See trellara-stream(1).
 */
#include "stream_cli.h"

#include "trellara/config.h"
#include "trellara/defaults.h"
#include "trellara/log.h"
#include "trellara/xalloc.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static const char usage_text[] =
	"usage: trellara-stream COMMAND (--config FILE | --dir DIR) [OPTIONS]\n"
	"\n"
	"commands:\n"
	"  inspect-local   report segments, offsets, torn tail, index state, groups (never modifies)\n"
	"  read            print frames: [--from N] [--count N] [--follow] [--raw]\n"
	"  locate          where a frame lives: --offset N | --lsn LSN\n"
	"  retention       segments no protected group needs: [--apply] [--protect GROUP]...\n"
	"  append          append JSON lines from stdin, print each acknowledged offset\n"
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
	"exit codes: 0 ok, 64 usage, 65 corrupt stream or bad input, 73 storage failure or\n"
	"low disk, 75 locked by another writer (retry), 78 configuration error\n";

static bool stream_exists(const char *dir)
{
	char *segments = xasprintf("%s/segments", dir);
	struct stat st;
	bool ok = stat(segments, &st) == 0 && S_ISDIR(st.st_mode);
	free(segments);
	return ok;
}

static bool parse_u64(const char *text, uint64_t *out)
{
	char *end;
	if (!text || !*text || *text == '-')
		return false;
	unsigned long long v = strtoull(text, &end, 10);
	if (*end)
		return false;
	*out = v;
	return true;
}

enum {
	OPT_FROM = 1000, OPT_COUNT, OPT_FOLLOW, OPT_RAW, OPT_OFFSET, OPT_LSN, OPT_APPLY, OPT_PROTECT,
	OPT_SEGMENT_BYTES, OPT_MIN_FREE, OPT_BATCH, OPT_NO_GROUPS_OK
};

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },   { "dir", required_argument, NULL, 'd' },
		{ "format", required_argument, NULL, 'f' },   { "from", required_argument, NULL, OPT_FROM },
		{ "count", required_argument, NULL, OPT_COUNT }, { "follow", no_argument, NULL, OPT_FOLLOW },
		{ "raw", no_argument, NULL, OPT_RAW },         { "offset", required_argument, NULL, OPT_OFFSET },
		{ "lsn", required_argument, NULL, OPT_LSN },   { "apply", no_argument, NULL, OPT_APPLY },
		{ "protect", required_argument, NULL, OPT_PROTECT },
		{ "segment-bytes", required_argument, NULL, OPT_SEGMENT_BYTES },
		{ "min-free-bytes", required_argument, NULL, OPT_MIN_FREE },
		{ "batch", required_argument, NULL, OPT_BATCH }, { "verbose", no_argument, NULL, 'v' },
		{ "no-groups-ok", no_argument, NULL, OPT_NO_GROUPS_OK },
		{ "help", no_argument, NULL, 'h' },            { "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	struct stream_cli_options o = {
		.segment_bytes = DEFAULT_SEGMENT_BYTES,
		.min_free_bytes = DEFAULT_MIN_FREE_BYTES,
		.max_batch_messages = DEFAULT_MAX_BATCH_MESSAGES,
		.stop = &stop_requested,
	};
	const char *config_path = NULL, *dir = NULL, *format = "text";
	const char **protect = NULL;
	size_t n_protect = 0;
	bool have_segment = false, have_min_free = false, have_batch = false;
	int verbosity = 0, code = EXIT_OK, c;
	struct flow_config config;
	bool config_loaded = false;

	log_setup(argv[0], 0);
	while ((c = getopt_long(argc, argv, "c:d:f:vhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': config_path = optarg; break;
		case 'd': dir = optarg; break;
		case 'f': format = optarg; break;
		case 'v': verbosity++; break;
		case 'h': fputs(usage_text, stdout); return EXIT_OK;
		case 'V': printf("trellara-stream %s\n", TRELLARA_VERSION); return EXIT_OK;
		case OPT_FOLLOW: o.follow = true; break;
		case OPT_RAW: o.raw = true; break;
		case OPT_APPLY: o.apply = true; break;
		case OPT_NO_GROUPS_OK: o.no_groups_ok = true; break;
		case OPT_LSN: o.lsn = optarg; break;
		case OPT_PROTECT:
			protect = xrealloc(protect, (n_protect + 1) * sizeof *protect);
			protect[n_protect++] = optarg;
			break;
		case OPT_FROM:
		case OPT_COUNT:
		case OPT_OFFSET:
		case OPT_SEGMENT_BYTES:
		case OPT_MIN_FREE:
		case OPT_BATCH: {
			uint64_t v;
			if (!parse_u64(optarg, &v)) {
				fprintf(stderr, "trellara-stream: option --%s needs a non-negative integer, got \"%s\"\n",
					longopts[c == OPT_FROM ? 3 : c == OPT_COUNT ? 4 : c == OPT_OFFSET ? 7 :
						 c == OPT_SEGMENT_BYTES ? 11 : c == OPT_MIN_FREE ? 12 : 13].name, optarg);
				code = EXIT_USAGE;
				goto out;
			}
			if (c == OPT_FROM) { o.from = v; o.have_from = true; }
			if (c == OPT_COUNT) { o.count = v; o.have_count = true; }
			if (c == OPT_OFFSET) { o.offset = v; o.have_offset = true; }
			if (c == OPT_SEGMENT_BYTES) { o.segment_bytes = v; have_segment = true; }
			if (c == OPT_MIN_FREE) { o.min_free_bytes = v; have_min_free = true; }
			if (c == OPT_BATCH) { o.max_batch_messages = v; have_batch = true; }
			break;
		}
		default:
			fputs(usage_text, stderr);
			code = EXIT_USAGE;
			goto out;
		}
	}
	log_setup(argv[0], verbosity);
	if (optind >= argc) {
		fputs(usage_text, stderr);
		code = EXIT_USAGE;
		goto out;
	}
	const char *command = argv[optind++];
	if (optind < argc) {
		fprintf(stderr, "trellara-stream: unexpected argument \"%s\"\n", argv[optind]);
		code = EXIT_USAGE;
		goto out;
	}
	if (strcmp(format, "text") != 0 && strcmp(format, "json") != 0) {
		fprintf(stderr, "trellara-stream: --format must be text or json, got \"%s\"\n", format);
		code = EXIT_USAGE;
		goto out;
	}
	o.json = strcmp(format, "json") == 0;
	if (!config_path == !dir) {
		fprintf(stderr, "trellara-stream: give exactly one of --config FILE and --dir DIR\n");
		code = EXIT_USAGE;
		goto out;
	}
	if (config_path) {
		if (config_load(config_path, &config) < 0) {
			code = EXIT_CONFIG;
			goto out;
		}
		config_loaded = true;
		if (have_segment || have_min_free || have_batch) {
			fprintf(stderr, "trellara-stream: --segment-bytes, --min-free-bytes and --batch go with --dir; "
					"with --config the flow file's stream settings apply\n");
			code = EXIT_USAGE;
			goto out;
		}
		o.dir = config.stream_path;
		o.source_id = config.source_id;
		o.segment_bytes = config.segment_bytes;
		o.min_free_bytes = config.min_free_bytes;
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

	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (strcmp(command, "append") != 0 && !stream_exists(o.dir)) {
		fprintf(stderr, "trellara-stream: no stream at \"%s\" (no segments directory)\n", o.dir);
		code = EXIT_USAGE;
	} else if (strcmp(command, "inspect-local") == 0)
		code = stream_cli_inspect(&o);
	else if (strcmp(command, "read") == 0)
		code = stream_cli_read(&o);
	else if (strcmp(command, "locate") == 0) {
		if (o.have_offset == (o.lsn != NULL)) {
			fprintf(stderr, "trellara-stream: locate needs exactly one of --offset N and --lsn LSN\n");
			code = EXIT_USAGE;
		} else {
			code = stream_cli_locate(&o);
		}
	} else if (strcmp(command, "retention") == 0)
		code = stream_cli_retention(&o);
	else if (strcmp(command, "append") == 0)
		code = stream_cli_append(&o);
	else {
		fprintf(stderr, "trellara-stream: unknown command \"%s\"\n%s", command, usage_text);
		code = EXIT_USAGE;
	}
	free(flow);
out:
	if (config_loaded)
		config_free(&config);
	free(protect);
	return code;
}
