/*
 * trellara-config - print one value of a flow file, as the loader
 * (common/base/config.c) reads it, so that scripts never parse the YAML
 * themselves.  See trellara-config(1).
 *
 * Every scalar key of the schema's tables (config_schema.c, through
 * config_get_scalar: there is no second list here); secrets (the database
 * URLs) are never printed.  A key that has a default prints it; a key
 * without one that the file does not set prints nothing and exits 1, as
 * `git config --get` does.
 */
#include "trellara/cli.h"
#include "trellara/config.h"
#include "trellara/defaults.h"
#include "trellara/log.h"
#include "trellara/strbuf.h"

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

/* Prints the key's value with a newline; returns the exit code. */
static int key_print(const struct flow_config *cfg, const char *name)
{
	struct strbuf value = STRBUF_INIT;
	int code = EXIT_NEGATIVE;
	if (config_get_scalar(cfg, name, &value) == 1) {
		printf("%s\n", value.buf);
		code = fflush(stdout) == 0 ? EXIT_OK : EXIT_CANTCREAT;
	}
	strbuf_release(&value);
	return code;
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
	/* judged on the schema before the file is read */
	switch (config_key_kind(name)) {
	case CONFIG_KEY_UNKNOWN:
		log_error("unknown key \"%s\" (trellara-config prints scalar keys only; see trellara-config(1))", name);
		return EXIT_USAGE;
	case CONFIG_KEY_SECRET:
		log_error("key \"%s\" holds a secret: trellara-config does not print it", name);
		return EXIT_USAGE;
	case CONFIG_KEY_SCALAR:
		break;
	}
	struct flow_config cfg;
	if ((code = cli_load_config(&cli, &cfg)) != EXIT_OK)
		return code;
	code = key_print(&cfg, name);
	config_free(&cfg);
	return code;
}
