/*
 * gen-exit-codes - the exit codes of include/trellara/defaults.h for what
 * is not C; `make` runs it (build/gen/gen-exit-codes).
 *
 *   gen-exit-codes shell     bin/trellara-exit-codes.sh, sourced by the
 *                            scripts through scripts/trellara-lib.sh
 *   gen-exit-codes systemd   the RestartPreventExitStatus= list of the
 *                            systemd units ("1 64 65 73 78")
 */
#include "trellara/defaults.h"

#include <stdio.h>
#include <string.h>

static const struct {
	const char *name;
	int code;
} codes[] = {
	{ "EX_OK", EXIT_OK },           { "EX_NEGATIVE", EXIT_NEGATIVE },   { "EX_USAGE", EXIT_USAGE },
	{ "EX_DATAERR", EXIT_DATAERR }, { "EX_NOINPUT", EXIT_NOINPUT }, { "EX_UNAVAILABLE", EXIT_UNAVAILABLE }, { "EX_CANTCREAT", EXIT_CANTCREAT },
	{ "EX_TEMPFAIL", EXIT_TEMPFAIL }, { "EX_CONFIG", EXIT_CONFIG },
};

static const int fail_closed[] = { EXIT_FAIL_CLOSED_LIST };

#define N(a) (sizeof(a) / sizeof((a)[0]))

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "shell") == 0) {
		printf("# shellcheck shell=bash\n"
		       "# trellara-exit-codes.sh - generated from include/trellara/defaults.h by\n"
		       "# scripts/gen-exit-codes.c (make); do not edit.  Sourced by the scripts.\n"
		       "# shellcheck disable=SC2034 # for the scripts that source it\n"
		       "TRELLARA_VERSION=%s\n",
		       TRELLARA_VERSION);
		for (size_t i = 0; i < N(codes); i++)
			printf("%s=%d\n", codes[i].name, codes[i].code);
		printf("# the codes a restart cannot fix, each between blanks: [[ $FAIL_CLOSED == *\" $rc \"* ]]\n");
		printf("FAIL_CLOSED=\" ");
		for (size_t i = 0; i < N(fail_closed); i++)
			printf("%d ", fail_closed[i]);
		printf("\"\n");
	} else if (argc == 2 && strcmp(argv[1], "systemd") == 0) {
		for (size_t i = 0; i < N(fail_closed); i++)
			printf("%s%d", i ? " " : "", fail_closed[i]);
		printf("\n");
	} else {
		fputs("usage: gen-exit-codes shell|systemd\n", stderr);
		return EXIT_USAGE;
	}
	return fflush(stdout) == 0 ? EXIT_OK : EXIT_CANTCREAT;
}
