#include "trellara/cli.h"
#include "trellara/defaults.h"
#include "trellara/log.h"
#include "unit.h"

#include <stdint.h>
#include <stdlib.h>

static void check_u64_ok(const char *value, uint64_t min, uint64_t max, uint64_t expected)
{
	char err[OPT_ERROR_LEN] = "";
	uint64_t out = 42;
	bool ok = opt_check_u64("--batch", value, min, max, &out, err);
	if (!ok)
		fprintf(stderr, "rejected \"%s\": %s\n", value, err);
	CHECK(ok);
	CHECK(out == expected);
}

/* value rejected with exactly the message expected; *out untouched */
static void check_u64_bad(const char *value, uint64_t min, uint64_t max, const char *expected)
{
	char err[OPT_ERROR_LEN] = "";
	uint64_t out = 42;
	CHECK(!opt_check_u64("--batch", value, min, max, &out, err));
	CHECK(out == 42);
	CHECK_STR(err, expected);
}

static void check_duration_ok(const char *value, double expected)
{
	char err[OPT_ERROR_LEN] = "";
	double out = -7;
	bool ok = opt_check_duration("--rate-seconds", value, 0, 3600, &out, err);
	if (!ok)
		fprintf(stderr, "rejected \"%s\": %s\n", value, err);
	CHECK(ok);
	CHECK(out == expected);
}

static void check_duration_bad(const char *value, const char *expected)
{
	char err[OPT_ERROR_LEN] = "";
	double out = -7;
	CHECK(!opt_check_duration("--rate-seconds", value, 0, 3600, &out, err));
	CHECK(out == -7);
	CHECK_STR(err, expected);
}

static void test_u64(void)
{
	check_u64_ok("0", 0, UINT64_MAX, 0);
	check_u64_ok("100", 0, UINT64_MAX, 100);
	check_u64_ok("007", 0, 10, 7);
	check_u64_ok("18446744073709551615", 0, UINT64_MAX, UINT64_MAX);
	check_u64_ok("1", 1, 1, 1);
	check_u64_ok("86400", 1, 86400, 86400);

	/* not a number: what atoi and strtoull would have taken */
	check_u64_bad("abc", 0, 100, "invalid value \"abc\" for option --batch");
	check_u64_bad("5abc", 0, 100, "invalid value \"5abc\" for option --batch");
	check_u64_bad("", 0, 100, "invalid value \"\" for option --batch");
	check_u64_bad(" 5", 0, 100, "invalid value \" 5\" for option --batch");
	check_u64_bad("5 ", 0, 100, "invalid value \"5 \" for option --batch");
	check_u64_bad("+5", 0, 100, "invalid value \"+5\" for option --batch");
	check_u64_bad("-1", 0, 100, "invalid value \"-1\" for option --batch");
	check_u64_bad(" -1", 0, UINT64_MAX, "invalid value \" -1\" for option --batch");
	check_u64_bad("0x10", 0, 100, "invalid value \"0x10\" for option --batch");
	check_u64_bad("1e3", 0, 10000, "invalid value \"1e3\" for option --batch");
	check_u64_bad("1.5", 0, 100, "invalid value \"1.5\" for option --batch");
	check_u64_bad(NULL, 0, 100, "invalid value \"\" for option --batch");

	/* out of range, on both sides, and past what 64 bits hold */
	check_u64_bad("0", 1, 86400, "--batch must be in range 1..86400");
	check_u64_bad("86401", 1, 86400, "--batch must be in range 1..86400");
	check_u64_bad("18446744073709551616", 0, UINT64_MAX, "--batch must be in range 0..18446744073709551615");
	check_u64_bad("99999999999999999999999", 0, 100, "--batch must be in range 0..100");
}

static void test_duration(void)
{
	check_duration_ok("0", 0);
	check_duration_ok("1", 1);
	check_duration_ok("0.5", 0.5);
	check_duration_ok(".25", 0.25);
	check_duration_ok("2.", 2);
	check_duration_ok("3600", 3600);

	check_duration_bad("abc", "invalid value \"abc\" for option --rate-seconds");
	check_duration_bad("", "invalid value \"\" for option --rate-seconds");
	check_duration_bad(".", "invalid value \".\" for option --rate-seconds");
	check_duration_bad("1.2.3", "invalid value \"1.2.3\" for option --rate-seconds");
	check_duration_bad("-1", "invalid value \"-1\" for option --rate-seconds");
	check_duration_bad(" 1", "invalid value \" 1\" for option --rate-seconds");
	check_duration_bad("0x10", "invalid value \"0x10\" for option --rate-seconds");
	check_duration_bad("1e3", "invalid value \"1e3\" for option --rate-seconds");
	check_duration_bad("inf", "invalid value \"inf\" for option --rate-seconds");
	check_duration_bad("nan", "invalid value \"nan\" for option --rate-seconds");
	check_duration_bad("5s", "invalid value \"5s\" for option --rate-seconds");
	check_duration_bad("3600.5", "--rate-seconds must be in range 0..3600");
	check_duration_bad("99999999999999999999999999", "--rate-seconds must be in range 0..3600");
}

enum { OPT_FROM = 1000, OPT_FOLLOW };

static const struct option test_longopts[] = {
	{ "format", required_argument, NULL, 'f' }, { "from", required_argument, NULL, OPT_FROM },
	{ "follow", no_argument, NULL, OPT_FOLLOW }, CLI_COMMON_LONGOPTS
};

/* Runs cli_next over ARGV (NULL-terminated) to its end or its first
 * CLI_EXIT; returns the last value cli_next returned. */
static int parse(struct cli *cli, char **argv, int *n_own)
{
	int argc = 0;
	while (argv[argc])
		argc++;
	optind = 0; /* glibc: start over */
	cli_init(cli, "test_cli", "usage: test_cli\n", "f:", test_longopts, argc, argv);
	int c;
	*n_own = 0;
	while ((c = cli_next(cli)) != CLI_END && c != CLI_EXIT)
		(*n_own)++;
	return c;
}

static void test_skeleton(void)
{
	struct cli cli;
	int n;

	/* the common options are handled, the program's own returned */
	char *a1[] = { "test_cli", "-v", "--config", "flow.yml", "-vv", "--follow", "list", NULL };
	CHECK(parse(&cli, a1, &n) == CLI_END);
	CHECK(n == 1);
	CHECK_STR(cli.config_path, "flow.yml");
	CHECK(cli.verbosity == 3);
	CHECK(optind == 6);
	CHECK_STR(a1[optind], "list");
	CHECK(cli_finish(&cli, true) == EXIT_OK);

	/* a bad value's name comes from the entry that matched: the long
	 * name, an abbreviation's full name, the short option's long name */
	char *a2[] = { "test_cli", "--from=abc", NULL };
	optind = 0;
	cli_init(&cli, "test_cli", "usage\n", "f:", test_longopts, 2, a2);
	CHECK(cli_next(&cli) == OPT_FROM);
	CHECK_STR(cli.option, "--from");
	CHECK_STR(cli.arg, "abc");
	uint64_t v = 42;
	CHECK(!cli_arg_u64(&cli, 0, 10, &v));
	CHECK(v == 42);

	char *a3[] = { "test_cli", "--fr", "7", NULL };
	optind = 0;
	cli_init(&cli, "test_cli", "usage\n", "f:", test_longopts, 3, a3);
	CHECK(cli_next(&cli) == OPT_FROM);
	CHECK_STR(cli.option, "--from");
	CHECK(cli_arg_u64(&cli, 0, 10, &v));
	CHECK(v == 7);

	char *a4[] = { "test_cli", "-f", "xml", NULL };
	optind = 0;
	cli_init(&cli, "test_cli", "usage\n", "f:", test_longopts, 3, a4);
	CHECK(cli_next(&cli) == 'f');
	CHECK_STR(cli.option, "--format");
	static const char *const formats[] = { "text", "json", NULL };
	int format = -1;
	CHECK(!cli_arg_choice(&cli, formats, &format));
	CHECK(format == -1);
	cli.arg = "json";
	CHECK(cli_arg_choice(&cli, formats, &format));
	CHECK(format == 1);

	/* unknown options, an ambiguous abbreviation, a missing value: usage */
	char *a5[] = { "test_cli", "--batch-size=abc", NULL };
	CHECK(parse(&cli, a5, &n) == CLI_EXIT);
	CHECK(cli.exit_code == EXIT_USAGE);
	char *a6[] = { "test_cli", "-x", NULL };
	CHECK(parse(&cli, a6, &n) == CLI_EXIT);
	CHECK(cli.exit_code == EXIT_USAGE);
	char *a7[] = { "test_cli", "--fo", NULL };
	CHECK(parse(&cli, a7, &n) == CLI_EXIT);
	CHECK(cli.exit_code == EXIT_USAGE);
	char *a8[] = { "test_cli", "--follow", "--from", NULL };
	CHECK(parse(&cli, a8, &n) == CLI_EXIT);
	CHECK(n == 1);
	CHECK(cli.exit_code == EXIT_USAGE);

	/* --version ends parsing with 0 */
	char *a9[] = { "test_cli", "--version", "--bogus", NULL };
	CHECK(parse(&cli, a9, &n) == CLI_EXIT);
	CHECK(cli.exit_code == EXIT_OK);

	/* --config is required when the program says so */
	char *a10[] = { "test_cli", "--follow", NULL };
	CHECK(parse(&cli, a10, &n) == CLI_END);
	CHECK(cli_finish(&cli, true) == EXIT_USAGE);
	CHECK(parse(&cli, a10, &n) == CLI_END);
	CHECK(cli_finish(&cli, false) == EXIT_OK);
}

static void test_env(void)
{
	const char *name = "TRELLARA_TEST_CLI_MS";
	uint64_t v = 42;
	unsetenv(name);
	CHECK(cli_env_u64(name, 500, 1, 60000, &v) == EXIT_OK);
	CHECK(v == 500);
	setenv(name, "20", 1);
	CHECK(cli_env_u64(name, 500, 1, 60000, &v) == EXIT_OK);
	CHECK(v == 20);
	v = 42;
	setenv(name, "abc", 1);
	CHECK(cli_env_u64(name, 500, 1, 60000, &v) == EXIT_CONFIG);
	CHECK(v == 42);
	setenv(name, "0", 1);
	CHECK(cli_env_u64(name, 500, 1, 60000, &v) == EXIT_CONFIG);
	setenv(name, "", 1);
	CHECK(cli_env_u64(name, 500, 1, 60000, &v) == EXIT_CONFIG);
	CHECK(v == 42);
	unsetenv(name);
}

int main(void)
{
	log_set_quiet(true);
	test_u64();
	test_duration();
	test_skeleton();
	test_env();
	return unit_done("test_cli");
}
