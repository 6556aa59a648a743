/* sqlstate.h: the classes of SQLSTATEs, one list for every caller. */
#include "trellara/sqlstate.h"
#include "unit.h"

static void check_all(const char *const *states, size_t n, enum sqlstate_class want)
{
	for (size_t i = 0; i < n; i++) {
		if (sqlstate_classify(states[i]) != want)
			fprintf(stderr, "SQLSTATE \"%s\" is %s, expected %s\n", states[i],
				sqlstate_class_name(sqlstate_classify(states[i])), sqlstate_class_name(want));
		CHECK(sqlstate_classify(states[i]) == want);
	}
}

int main(void)
{
	static const char *const connection[] = { "08000", "08003", "08006", "08001", "08004", "08P01",
						  "57P01", "57P02", "57P03" };
	static const char *const transient[] = { "40001", "40P01", "40003", "55P03", "57014",
						 "25006", "58030", "53100", "53300" };
	static const char *const permission[] = { "42501", "28000", "28P01" };
	static const char *const data[] = { "23505", "23503", "23502", "42P01", "42703", "22P02", "53200", "53400",
					    "57P04", "57P0", "40P0", "40P011", "4250", "425011", "XX000", "TR001", "0",
					    "8" };
	check_all(connection, sizeof connection / sizeof *connection, SQLSTATE_CLASS_CONNECTION);
	check_all(transient, sizeof transient / sizeof *transient, SQLSTATE_CLASS_TRANSIENT);
	check_all(permission, sizeof permission / sizeof *permission, SQLSTATE_CLASS_PERMISSION);
	check_all(data, sizeof data / sizeof *data, SQLSTATE_CLASS_DATA);
	CHECK(sqlstate_classify(NULL) == SQLSTATE_CLASS_NONE);
	CHECK(sqlstate_classify("") == SQLSTATE_CLASS_NONE);
	CHECK_STR(sqlstate_class_name(SQLSTATE_CLASS_NONE), "none");
	CHECK_STR(sqlstate_class_name(SQLSTATE_CLASS_CONNECTION), "connection");
	CHECK_STR(sqlstate_class_name(SQLSTATE_CLASS_TRANSIENT), "transient");
	CHECK_STR(sqlstate_class_name(SQLSTATE_CLASS_PERMISSION), "permission");
	CHECK_STR(sqlstate_class_name(SQLSTATE_CLASS_DATA), "data");
	/* how a session ended */
	CHECK(sqlstate_end_cause("57P01") == SQLSTATE_END_TERMINATED);
	CHECK(sqlstate_end_cause("57P02") == SQLSTATE_END_CRASHED);
	CHECK(sqlstate_end_cause(NULL) == SQLSTATE_END_LOST);
	CHECK(sqlstate_end_cause("") == SQLSTATE_END_LOST);
	CHECK(sqlstate_end_cause("08006") == SQLSTATE_END_LOST);
	CHECK(sqlstate_end_cause("57P03") == SQLSTATE_END_ERROR);
	CHECK(sqlstate_end_cause("23505") == SQLSTATE_END_ERROR);
	CHECK_STR(sqlstate_end_name(SQLSTATE_END_TERMINATED), "terminated");
	CHECK_STR(sqlstate_end_name(SQLSTATE_END_CRASHED), "server_crashed");
	CHECK_STR(sqlstate_end_name(SQLSTATE_END_LOST), "connection_lost");
	CHECK_STR(sqlstate_end_name(SQLSTATE_END_ERROR), "error");
	return unit_done("test_sqlstate");
}
