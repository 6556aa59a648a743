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
 *
 * with-url hands one database URL to another program without printing it
 * or putting it on a command line: libpq parses it (PQconninfoParse) and
 * each parameter goes into its libpq environment variable (PGHOST,
 * PGDATABASE, PGPASSWORD, ...), the others of those variables are unset,
 * and the program is executed.  Scripts run psql this way.
 */
#include "trellara/cli.h"
#include "trellara/config.h"
#include "trellara/defaults.h"
#include "trellara/log.h"
#include "trellara/pgconn.h"
#include "trellara/strbuf.h"

#include <errno.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage_text[] =
	"usage: trellara-config get KEY --config FILE\n"
	"       trellara-config with-url URLKEY --config FILE -- PROGRAM [ARG...]\n"
	"\n"
	"Prints the value of one scalar key of the flow file (\"observability.metrics_dir\",\n"
	"\"stream.path\"), as every Trellara program reads it: defaults filled in, the\n"
	"whole file validated first.  Secrets are never printed.\n"
	"with-url runs PROGRAM with the connection string of URLKEY (source.database_url\n"
	"or target.database_url) in libpq's environment variables (PGHOST, PGDATABASE,\n"
	"PGPASSWORD, ...), never on a command line.\n"
	"\n"
	"options:\n"
	"  -c, --config FILE   flow file\n"
	"  -v, --verbose       more logging (repeatable)\n"
	"  -h, --help          this help\n"
	"  -V, --version       print the version\n"
	"\n"
	"exit codes: 0 printed, 1 the key has no value (not set, no default), 64 usage\n"
	"or an unknown key, 78 configuration error; with-url: PROGRAM's own, 69 when it\n"
	"cannot be run\n";

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

/* Puts the connection string's parameters into libpq's environment
 * variables, unsets the variables it leaves out, and executes argv[0].
 * Returns only on failure (logged), with the exit code. */
static int with_url_exec(const char *key, const char *url, char **prog_argv)
{
	char *err = NULL;
	PQconninfoOption *opts = PQconninfoParse(url, &err); /* owned */
	PQconninfoOption *defaults = PQconndefaults();       /* owned */
	int code = EXIT_CONFIG;
	if (!opts) {
		/* libpq's message may quote the string: never shown */
		log_error("the connection string of \"%s\" cannot be parsed by libpq", key);
		goto out;
	}
	if (!defaults) {
		log_error("libpq cannot list its connection parameters (out of memory)");
		code = EXIT_UNAVAILABLE;
		goto out;
	}
	for (const PQconninfoOption *o = defaults; o->keyword; o++)
		if (o->envvar)
			unsetenv(o->envvar);
	unsetenv("PGSERVICEFILE");
	unsetenv("PGPASSFILE");
	for (const PQconninfoOption *o = opts; o->keyword; o++) {
		if (!o->val || !*o->val)
			continue;
		if (!o->envvar) {
			log_error("parameter \"%s\" of \"%s\" has no libpq environment variable: with-url cannot pass it",
				  o->keyword, key);
			goto out;
		}
		if (setenv(o->envvar, o->val, 1) != 0) {
			log_error("cannot set %s: %m", o->envvar);
			code = EXIT_UNAVAILABLE;
			goto out;
		}
	}
	/* the sessions' pinned settings (pgconn.h), as every program's own:
	 * the URL's options first, then ours */
	struct pgconn_params pp;
	char why[256];
	if (pgconn_params_build(url, &pp, why, sizeof why) < 0) {
		log_error("the connection string of \"%s\": %s", key, why);
		goto out;
	}
	int set = setenv("PGOPTIONS", pp.options, 1) | setenv("PGCLIENTENCODING", "UTF8", 1);
	pgconn_params_free(&pp);
	if (set != 0) {
		log_error("cannot set PGOPTIONS or PGCLIENTENCODING: %m");
		code = EXIT_UNAVAILABLE;
		goto out;
	}
	execvp(prog_argv[0], prog_argv);
	log_error("cannot run \"%s\": %m", prog_argv[0]);
	code = EXIT_UNAVAILABLE;
out:
	if (opts)
		PQconninfoFree(opts);
	if (defaults)
		PQconninfoFree(defaults);
	if (err)
		PQfreemem(err);
	return code;
}

/* with-url URLKEY -- PROGRAM [ARG...]: operands from argv[first]. */
static int with_url(struct cli *cli, int argc, char **argv, int first)
{
	if (argc - first < 2)
		return cli_usage_error(cli, "expected: with-url URLKEY -- PROGRAM [ARG...]");
	const char *key = argv[first];
	int prog = first + 1;
	if (strcmp(argv[prog], "--") == 0)
		prog++;
	if (prog >= argc)
		return cli_usage_error(cli, "with-url: no PROGRAM to run");
	bool source = strcmp(key, "source.database_url") == 0;
	if (!source && strcmp(key, "target.database_url") != 0)
		return cli_usage_error(cli, "with-url: \"%s\" is not source.database_url or target.database_url", key);
	struct flow_config cfg;
	int code = cli_load_config(cli, &cfg);
	if (code != EXIT_OK)
		return code;
	code = with_url_exec(key, source ? cfg.source_database_url : cfg.target_database_url, argv + prog);
	config_free(&cfg);
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
	if (argc - optind >= 1 && strcmp(argv[optind], "with-url") == 0)
		return with_url(&cli, argc, argv, optind + 1);
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
