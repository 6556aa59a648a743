/*
 * test_verify_keys - verify's key text split into its column values
 * (verify_key_fields, the JSON's key_values): the texts below are written
 * by PostgreSQL's record output rules (a value quoted when it is empty or
 * holds a quote, a backslash, a parenthesis, a comma or white space; a
 * quote and a backslash doubled inside; NULL as nothing), not copied from
 * a run.
 */
#include "../../cmd/trellara-verify/verify.h"
#include "unit.h"

#include <stdlib.h>

/* text splits into exactly the n values (NULL for NULL) */
static void check_split(const char *text, int n, const char *const *want)
{
	char *fields[8] = { 0 };
	bool ok = verify_key_fields(text, n, fields);
	CHECK(ok);
	for (int i = 0; ok && i < n; i++) {
		if (want[i])
			CHECK_STR(fields[i], want[i]);
		else
			CHECK(fields[i] == NULL);
		free(fields[i]);
	}
}

static void check_refused(const char *text, int n)
{
	char *fields[8] = { 0 };
	CHECK(!verify_key_fields(text, n, fields));
	for (int i = 0; i < 8; i++)
		CHECK(fields[i] == NULL);
}

int main(void)
{
	check_split("(42)", 1, (const char *const[]){ "42" });
	check_split("(-7,abc)", 2, (const char *const[]){ "-7", "abc" });
	check_split("(7,\"a b\")", 2, (const char *const[]){ "7", "a b" });
	check_split("(,x)", 2, (const char *const[]){ NULL, "x" });
	check_split("(x,)", 2, (const char *const[]){ "x", NULL });
	check_split("()", 1, (const char *const[]){ NULL });
	check_split("(\"\",x)", 2, (const char *const[]){ "", "x" });
	check_split("(\"a b,\"\"c\",1)", 2, (const char *const[]){ "a b,\"c", "1" });
	check_split("(\"back\\\\slash\")", 1, (const char *const[]){ "back\\slash" });
	check_split("(\"(x)\",\"2026-12-05 02:40:00+00\")", 2, (const char *const[]){ "(x)", "2026-12-05 02:40:00+00" });
	check_split("(\"\\\\x00ff\")", 1, (const char *const[]){ "\\x00ff" });
	check_split("(\"\"\"\")", 1, (const char *const[]){ "\"" });
	/* not exactly one record of n fields */
	check_refused("(1,2)", 1);
	check_refused("(1)", 2);
	check_refused("1", 1);
	check_refused("(1", 1);
	check_refused("(1)x", 1);
	check_refused("(\"open)", 1);
	check_refused("", 1);
	check_refused("(a,\"b\",c)", 2);
	return unit_done("verify_keys");
}
