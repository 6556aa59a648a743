/* The stream status -> exit code table (stream_exit.h), row by row. */
#include "trellara/defaults.h"
#include "trellara/stream.h"
#include "trellara/stream_exit.h"
#include "unit.h"

static const enum stream_origin origins[] = { STREAM_FROM_ARGUMENT, STREAM_FROM_CONFIG, STREAM_FROM_DATA };

/* the statuses that mean the same wherever they come from */
static void test_origin_free(void)
{
	for (size_t i = 0; i < sizeof origins / sizeof *origins; i++) {
		enum stream_origin o = origins[i];
		CHECK(stream_exit_code(STREAM_OK, o) == 0);
		CHECK(stream_exit_code(STREAM_END, o) == 0);
		CHECK(stream_exit_code(STREAM_ECORRUPT, o) == 65);
		CHECK(stream_exit_code(STREAM_EIO, o) == 73);
		CHECK(stream_exit_code(STREAM_ENOSPC, o) == 73);
		CHECK(stream_exit_code(STREAM_ELOCKED, o) == 75);
		/* an unknown status fails closed: never 0 */
		CHECK(stream_exit_code(STREAM_EUNAVAILABLE, o) == 69);
		CHECK(stream_exit_code(STREAM_EUNAVAILABLE + 1, o) == 65);
		CHECK(stream_exit_code(-1, o) == 65);
	}
}

/* a bad argument: whose mistake it is */
static void test_by_origin(void)
{
	CHECK(stream_exit_code(STREAM_EINVAL, STREAM_FROM_ARGUMENT) == 64);
	CHECK(stream_exit_code(STREAM_ERANGE, STREAM_FROM_ARGUMENT) == 64);
	CHECK(stream_exit_code(STREAM_EINVAL, STREAM_FROM_CONFIG) == 78);
	CHECK(stream_exit_code(STREAM_ERANGE, STREAM_FROM_CONFIG) == 65);
	CHECK(stream_exit_code(STREAM_EINVAL, STREAM_FROM_DATA) == 65);
	CHECK(stream_exit_code(STREAM_ERANGE, STREAM_FROM_DATA) == 65);
	/* the numbers are the documented table's (DESIGN §10) */
	CHECK(EXIT_USAGE == 64 && EXIT_DATAERR == 65 && EXIT_CANTCREAT == 73 && EXIT_TEMPFAIL == 75 && EXIT_CONFIG == 78);
}

int main(void)
{
	test_origin_free();
	test_by_origin();
	return unit_done("test_stream_exit");
}
