/* test_applyd_errors.c - which target errors applyd retries and which it
 * quarantines (applyd_transient_sqlstate). */
#include "../../cmd/trellara-applyd/applyd.h"

#include <stdio.h>

static int checks, failures;

static void expect(const char *sqlstate, bool transient)
{
	checks++;
	if (applyd_transient_sqlstate(sqlstate) != transient) {
		failures++;
		fprintf(stderr, "FAIL: SQLSTATE %s should be %s\n", sqlstate, transient ? "retried" : "quarantined");
	}
}

int main(void)
{
	/* the target's state: retried (issue list: deadlock, serialization,
	 * lock and statement timeouts, disk full, too many connections,
	 * admin shutdown, recovery) */
	const char *retried[] = { "40P01", "40001", "55P03", "57014", "53100", "53300",
				  "57P01", "57P02", "57P03", "25006" };
	for (size_t i = 0; i < sizeof retried / sizeof *retried; i++)
		expect(retried[i], true);
	/* the transaction's own doing: quarantined */
	const char *own[] = { "23505", "23503", "23502", "42P01", "42703", "428C9", "22P02",
			      "53200", "53400", "TR001", "TR002", "TR003", "XX000", "" };
	for (size_t i = 0; i < sizeof own / sizeof *own; i++)
		expect(own[i], false);
	printf("applyd_errors: %d checks, %d failed\n", checks, failures);
	return failures != 0;
}
