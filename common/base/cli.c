/*
 * cli.c - the command-line skeleton of every program (see cli.h).
 */
#include "trellara/cli.h"

#include "trellara/defaults.h"
#include "trellara/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cli_init(struct cli *cli, const char *program, const char *usage, const char *shortopts,
	      const struct option *longopts, int argc, char **argv)
{
	*cli = (struct cli){ .program = program, .usage = usage, .longopts = longopts, .argc = argc, .argv = argv };
	/* ":" first: a missing argument is returned as ':' and reported here */
	snprintf(cli->shortopts, sizeof cli->shortopts, ":%s%s", shortopts, CLI_COMMON_SHORTOPTS);
	log_setup(program, 0);
}

static void usage_hint(const struct cli *cli)
{
	log_hint("run \"%s --help\" for usage", cli->program);
}

int cli_usage_error(const struct cli *cli, const char *fmt, ...)
{
	char message[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(message, sizeof message, fmt, ap);
	va_end(ap);
	log_error("%s", message);
	usage_hint(cli);
	return EXIT_USAGE;
}

int cli_extra_operand(const struct cli *cli, int first_extra)
{
	return cli_usage_error(cli, "unexpected argument \"%s\"", cli->argv[first_extra]);
}

/* The name of the option getopt_long matched: the long name of the entry
 * it matched (longindex), or of the entry with the short option's val, or
 * the short option itself. */
static void set_option_name(struct cli *cli, int c, int longindex)
{
	const struct option *o = NULL;
	if (longindex >= 0) {
		o = &cli->longopts[longindex];
	} else {
		for (const struct option *p = cli->longopts; p->name; p++)
			if (p->flag == NULL && p->val == c) {
				o = p;
				break;
			}
	}
	if (o)
		snprintf(cli->option, sizeof cli->option, "--%s", o->name);
	else
		snprintf(cli->option, sizeof cli->option, "-%c", c);
}

/* The option the user wrote, for "unknown option" and "needs a value":
 * argv[optind - 1] for a long one, -X for a short one. */
static void report_bad_option(struct cli *cli, bool unknown)
{
	const char *what = unknown ? "unknown option" : "a value is needed for option";
	const char *word = optind > 0 && optind <= cli->argc ? cli->argv[optind - 1] : NULL;
	if (word && word[0] == '-' && word[1] == '-') {
		const char *eq = strchr(word, '=');
		int len = eq ? (int)(eq - word) : (int)strlen(word);
		cli_usage_error(cli, "%s \"%.*s\"", what, len, word);
	} else {
		cli_usage_error(cli, "%s \"-%c\"", what, optopt);
	}
}

int cli_next(struct cli *cli)
{
	opterr = 0;
	for (;;) {
		int longindex = -1;
		int c = getopt_long(cli->argc, cli->argv, cli->shortopts, cli->longopts, &longindex);
		cli->arg = optarg;
		if (c == -1)
			return CLI_END;
		if (c == '?' || c == ':') {
			report_bad_option(cli, c == '?');
			cli->exit_code = EXIT_USAGE;
			return CLI_EXIT;
		}
		set_option_name(cli, c, longindex);
		switch (c) {
		case 'c': cli->config_path = optarg; break;
		case 'v': cli->verbosity++; break;
		case 'h':
			fputs(cli->usage, stdout);
			cli->exit_code = EXIT_OK;
			return CLI_EXIT;
		case 'V':
			printf("%s %s\n", cli->program, TRELLARA_VERSION);
			cli->exit_code = EXIT_OK;
			return CLI_EXIT;
		default: return c;
		}
	}
}

int cli_finish(struct cli *cli, bool need_config)
{
	log_setup(cli->program, cli->verbosity);
	if (need_config && !cli->config_path)
		return cli_usage_error(cli, "--config FILE is required");
	return EXIT_OK;
}

bool cli_arg_u64(const struct cli *cli, uint64_t min, uint64_t max, uint64_t *out)
{
	if (opt_parse_u64(cli->option, cli->arg, min, max, out))
		return true;
	usage_hint(cli);
	return false;
}

bool cli_arg_duration(const struct cli *cli, double min_seconds, double max_seconds, double *out_seconds)
{
	if (opt_parse_duration(cli->option, cli->arg, min_seconds, max_seconds, out_seconds))
		return true;
	usage_hint(cli);
	return false;
}

bool cli_arg_choice(const struct cli *cli, const char *const *choices, int *out)
{
	for (int i = 0; choices[i]; i++)
		if (strcmp(cli->arg, choices[i]) == 0) {
			*out = i;
			return true;
		}
	char list[256] = "";
	size_t n = 0;
	for (int i = 0; choices[i]; i++) {
		const char *sep = i == 0 ? "" : choices[i + 1] ? ", " : " or ";
		int w = snprintf(list + n, sizeof list - n, "%s%s", sep, choices[i]);
		if (w < 0 || (size_t)w >= sizeof list - n)
			break;
		n += (size_t)w;
	}
	cli_usage_error(cli, "%s must be %s, got \"%s\"", cli->option, list, cli->arg);
	return false;
}

int cli_load_config(const struct cli *cli, struct flow_config *config)
{
	if (config_load(cli->config_path, config) < 0)
		return EXIT_CONFIG;
	if (config->stream_kind == STREAM_KIND_JETSTREAM && cli->local_only) {
		log_error("%s: stream.kind is \"jetstream\": this %s command reads a local stream's files", config->path,
			  cli->program);
		log_hint("for a JetStream stream: \"trellara stream inspect --config %s\" (state, replicas, groups) and \"trellara stream retention --config %s\"",
			 config->path, config->path);
		config_free(config);
		return EXIT_CONFIG;
	}
	return EXIT_OK;
}

/* The one flag the process's stop signals set (cli.h). */
static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

volatile sig_atomic_t *cli_catch_stop_signals(void)
{
	struct sigaction sa = { .sa_handler = on_stop_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	return &stop_requested;
}
