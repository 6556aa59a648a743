/*
 * cli.h - the command-line skeleton every program's main() uses, and the
 * parsers of option values.
 *
 * A program declares its own options followed by CLI_COMMON_LONGOPTS
 * (--config, --verbose, --help, --version) and calls cli_next() in a
 * loop: cli_next() handles the common options itself (--help prints the
 * usage on stdout, --version the version; an unknown option or a missing
 * argument is a usage error) and returns only the program's own ones,
 * with the option's name (taken from the option table entry that matched,
 * never from an index) and argument in struct cli, so that a bad value is
 * reported as the user spelled the option.
 *
 * Errors: every message goes through log.h (once, where it is detected),
 * a usage error with a hint line naming "PROGRAM --help"; a function that
 * reports an error returns false or the exit code for main to return
 * (EXIT_USAGE 64, EXIT_CONFIG 78 of defaults.h).  Nothing here exits.
 *
 * The opt_check_* functions are pure: they decide and write the message
 * into a buffer; opt_parse_* log that message.  Messages follow
 * PostgreSQL's fe_utils/option_utils.c: 'invalid value "X" for option
 * NAME', 'NAME must be in range MIN..MAX'.
 */
#ifndef TRELLARA_CLI_H
#define TRELLARA_CLI_H

#include "trellara/config.h"

#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

/* The options every program has; they end a program's option table. */
#define CLI_COMMON_SHORTOPTS "c:vhV"
#define CLI_COMMON_LONGOPTS                                                                              \
	{ "config", required_argument, NULL, 'c' }, { "verbose", no_argument, NULL, 'v' },               \
		{ "help", no_argument, NULL, 'h' }, { "version", no_argument, NULL, 'V' }, { NULL, 0, NULL, 0 }

/* cli_next() at the end of the options, and when main must return
 * cli.exit_code (after --help, --version or a usage error). */
enum { CLI_END = -1, CLI_EXIT = -2 };

/* Room for an option's name as it is reported, "--min-free-bytes". */
#define CLI_OPTION_NAME_LEN 64
/* Room for a parser's message. */
#define OPT_ERROR_LEN 256

struct cli {
	const char *program;           /* "trellara-verify": messages, --version */
	const char *usage;             /* the --help text */
	const struct option *longopts; /* the program's table, ending with CLI_COMMON_LONGOPTS */
	char shortopts[64];            /* ":" + the program's short options + CLI_COMMON_SHORTOPTS */
	int argc;
	char **argv;                   /* not owned; every pointer below points into it */
	const char *config_path;       /* --config FILE, or NULL */
	int verbosity;                 /* how many -v */
	const char *arg;               /* the current option's argument, or NULL */
	char option[CLI_OPTION_NAME_LEN]; /* the current option's name: "--fence-timeout" */
	int exit_code;                 /* with CLI_EXIT: what main returns */
	bool local_only;               /* the command reads a local stream's files only */
};

/* Starts parsing: sets up logging for PROGRAM at the default level (the
 * -v count applies in cli_finish).  shortopts: the program's own short
 * options ("f:"; "" for none). */
void cli_init(struct cli *cli, const char *program, const char *usage, const char *shortopts,
	      const struct option *longopts, int argc, char **argv);

/* The next of the program's own options (its val), CLI_END after the last
 * option, or CLI_EXIT when main must return cli->exit_code. */
int cli_next(struct cli *cli);

/* After the options: applies the -v count to logging; with need_config,
 * a missing --config is a usage error.  Returns EXIT_OK or EXIT_USAGE
 * (reported).  The operands are argv[optind..argc-1]. */
int cli_finish(struct cli *cli, bool need_config);

/* Reports a usage error, "MESSAGE" and the hint line; returns EXIT_USAGE. */
int cli_usage_error(const struct cli *cli, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* More operands than the program takes: reports the first extra one
 * (argv[first_extra]); returns EXIT_USAGE. */
int cli_extra_operand(const struct cli *cli, int first_extra);

/* The current option's argument as a number or a choice; false when it is
 * not one (a usage error, reported with the hint: main returns EXIT_USAGE). */
bool cli_arg_u64(const struct cli *cli, uint64_t min, uint64_t max, uint64_t *out);
bool cli_arg_duration(const struct cli *cli, double min_seconds, double max_seconds, double *out_seconds);
/* choices: NULL-terminated; *out is the index of the one given. */
bool cli_arg_choice(const struct cli *cli, const char *const *choices, int *out);

/* Loads cli->config_path (see config_load): EXIT_OK, or EXIT_CONFIG
 * (reported by config_load).  A flow with stream.kind jetstream is
 * refused (EXIT_CONFIG, said here) when cli->local_only: trellara
 * stream's commands on a local stream's files. */
int cli_load_config(const struct cli *cli, struct flow_config *config);

/* SIGINT and SIGTERM set the returned flag (the process has one; it is
 * cli.c's, the only state here); SIGPIPE is ignored, so a closed pipe is
 * a write error, not a death. */
volatile sig_atomic_t *cli_catch_stop_signals(void);

/* An environment variable holding a whole number from min to max: *out
 * is default_value when it is not set.  EXIT_OK, or EXIT_CONFIG when it
 * is set to anything else (reported, naming the variable). */
int cli_env_u64(const char *name, uint64_t default_value, uint64_t min, uint64_t max, uint64_t *out);

/* A decimal whole number from min to max, nothing else: no sign, no
 * blanks, no base prefix, no suffix.  option_name is how the value is
 * named in the message ("--batch", "TRELLARA_RECONNECT_BASE_MS").  On
 * failure *out is unchanged. */
bool opt_check_u64(const char *option_name, const char *value, uint64_t min, uint64_t max, uint64_t *out,
		   char err[OPT_ERROR_LEN]);
bool opt_parse_u64(const char *option_name, const char *value, uint64_t min, uint64_t max, uint64_t *out);

/* A duration in seconds: a decimal number ("1", "0.5", ".25") from
 * min_seconds to max_seconds; no program takes units, so none are read. */
bool opt_check_duration(const char *option_name, const char *value, double min_seconds, double max_seconds,
			double *out_seconds, char err[OPT_ERROR_LEN]);
bool opt_parse_duration(const char *option_name, const char *value, double min_seconds, double max_seconds,
			double *out_seconds);

#endif
