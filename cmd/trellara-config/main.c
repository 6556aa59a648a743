/*
 * trellara-config - print one value of a flow file, as the loader
 * (common/base/config.c) reads it, so that scripts never parse the YAML
 * themselves.  See trellara-config(1).
 *
 * Only scalar keys; secrets (the database URLs) are never printed.  A key
 * that has a default prints it; a key without one that the file does not
 * set prints nothing and exits 1, as `git config --get` does.
 */
#include "trellara/cli.h"
#include "trellara/config.h"
#include "trellara/defaults.h"
#include "trellara/log.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static const char usage_text[] =
	"usage: trellara-config get KEY --config FILE\n"
	"\n"
	"Prints the value of one scalar key of the flow file (\"observability.metrics_dir\",\n"
	"\"stream.path\"), as every Trellara program reads it: defaults filled in, the\n"
	"whole file validated first.  Secrets are never printed.\n"
	"\n"
	"options:\n"
	"  -c, --config FILE   flow file\n"
	"  -v, --verbose       more logging (repeatable)\n"
	"  -h, --help          this help\n"
	"  -V, --version       print the version\n"
	"\n"
	"exit codes: 0 printed, 1 the key has no value (not set, no default), 64 usage\n"
	"or an unknown key, 78 configuration error\n";

enum key_kind { KEY_STRING, KEY_U64, KEY_INT, KEY_BOOL, KEY_FIXED, KEY_SECRET };

struct key {
	const char *name;
	enum key_kind kind;
	size_t offset;     /* in struct flow_config; unused for KEY_FIXED, KEY_SECRET */
	const char *fixed; /* KEY_FIXED: the only value the loader accepts */
};

#define CFG(field) offsetof(struct flow_config, field)

static const struct key keys[] = {
	{ "config_version", KEY_INT, CFG(config_version), NULL },
	{ "environment", KEY_STRING, CFG(environment), NULL },
	{ "source.id", KEY_STRING, CFG(source_id), NULL },
	{ "source.database_url", KEY_SECRET, 0, NULL },
	{ "source.publication", KEY_STRING, CFG(publication), NULL },
	{ "source.slot", KEY_STRING, CFG(slot), NULL },
	{ "source.wal_retention_warn_bytes", KEY_U64, CFG(wal_retention_warn_bytes), NULL },
	{ "source.stream_spill_threshold_changes", KEY_U64, CFG(stream_spill_threshold_changes), NULL },
	{ "source.stream_spill_dir", KEY_STRING, CFG(stream_spill_dir), NULL },
	{ "source.pgoutput.protocol_version", KEY_INT, CFG(pgoutput_protocol_version), NULL },
	{ "source.pgoutput.streaming", KEY_BOOL, CFG(pgoutput_streaming), NULL },
	{ "dataset.id", KEY_STRING, CFG(dataset_id), NULL },
	{ "dataset.mode", KEY_FIXED, 0, "strict_transaction_order" },
	{ "dataset.strict_chunking.max_changes_per_chunk", KEY_U64, CFG(max_changes_per_chunk), NULL },
	{ "stream.kind", KEY_FIXED, 0, "local" },
	{ "stream.path", KEY_STRING, CFG(stream_path), NULL },
	{ "stream.durability", KEY_FIXED, 0, "fsync" },
	{ "stream.segment_bytes", KEY_U64, CFG(segment_bytes), NULL },
	{ "stream.max_batch_transactions", KEY_U64, CFG(max_batch_transactions), NULL },
	{ "stream.max_batch_messages", KEY_U64, CFG(max_batch_messages), NULL },
	{ "stream.min_free_bytes", KEY_U64, CFG(min_free_bytes), NULL },
	{ "target.database_url", KEY_SECRET, 0, NULL },
	{ "target.checkpoint_schema", KEY_STRING, CFG(checkpoint_schema), NULL },
	{ "snapshot.workers", KEY_U64, CFG(snapshot_workers), NULL },
	{ "apply.consumer_group", KEY_STRING, CFG(consumer_group), NULL },
	{ "apply.batch_transactions", KEY_U64, CFG(apply_batch_transactions), NULL },
	{ "observability.metrics_dir", KEY_STRING, CFG(metrics_dir), NULL },
};

static const struct key *key_find(const char *name)
{
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		if (strcmp(keys[i].name, name) == 0)
			return &keys[i];
	return NULL;
}

/* Prints the key's value with a newline; returns the exit code. */
static int key_print(const struct key *key, const struct flow_config *cfg)
{
	const char *base = (const char *)cfg;
	switch (key->kind) {
	case KEY_STRING: {
		const char *value = *(char *const *)(const void *)(base + key->offset);
		if (!value)
			return EXIT_NEGATIVE;
		printf("%s\n", value);
		break;
	}
	case KEY_U64: printf("%" PRIu64 "\n", *(const uint64_t *)(const void *)(base + key->offset)); break;
	case KEY_INT: printf("%d\n", *(const int *)(const void *)(base + key->offset)); break;
	case KEY_BOOL: printf("%s\n", *(const bool *)(const void *)(base + key->offset) ? "true" : "false"); break;
	case KEY_FIXED: printf("%s\n", key->fixed); break;
	case KEY_SECRET: return EXIT_USAGE; /* refused before the file is read */
	}
	return fflush(stdout) == 0 ? EXIT_OK : EXIT_CANTCREAT;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = { CLI_COMMON_LONGOPTS };
	struct cli cli;
	int c, code;
	cli_init(&cli, "trellara-config", usage_text, "", longopts, argc, argv);
	while ((c = cli_next(&cli)) != CLI_END)
		if (c == CLI_EXIT)
			return cli.exit_code;
	if ((code = cli_finish(&cli, true)) != EXIT_OK)
		return code;
	/* getopt_long permutes: "get KEY" may come before or after the options */
	if (argc - optind < 2 || strcmp(argv[optind], "get") != 0)
		return cli_usage_error(&cli, "expected: get KEY");
	if (argc - optind > 2)
		return cli_extra_operand(&cli, optind + 2);
	const char *name = argv[optind + 1];
	const struct key *key = key_find(name);
	if (!key) {
		log_msg(LOG_LEVEL_ERROR, "unknown key \"%s\" (trellara-config prints scalar keys only; see trellara-config(1))",
			name);
		return EXIT_USAGE;
	}
	if (key->kind == KEY_SECRET) {
		log_msg(LOG_LEVEL_ERROR, "key \"%s\" holds a secret: trellara-config does not print it", key->name);
		return EXIT_USAGE;
	}
	struct flow_config cfg;
	if ((code = cli_load_config(&cli, &cfg)) != EXIT_OK)
		return code;
	code = key_print(key, &cfg);
	config_free(&cfg);
	return code;
}
