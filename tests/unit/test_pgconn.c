/* pgconn.h without a server: a connect failure reported into the
 * caller's buffer on one line, with the role and the masked URL and
 * never the password; the handle queries of a PGconn it did not make. */
#include "trellara/pgconn.h"
#include "unit.h"

#include <string.h>

static void test_quiet_connect_failure(void)
{
	/* a socket directory that does not exist: libpq fails at once, with
	 * a message of two lines */
	const char *url = "postgresql://alice:s3cr3t-pw@/appdb?host=/nonexistent-trellara-dir&port=5999";
	char error[512] = "";
	struct pgconn_options o = { .application_name = "test_pgconn", .role = "target", .connect_timeout = "2",
				    .report = PGCONN_QUIET, .error = error, .error_len = sizeof error };
	PGconn *conn = pgconn_open(url, &o);
	CHECK(conn == NULL);
	CHECK(strncmp(error, "cannot connect to the target database \"", 39) == 0);
	CHECK(strstr(error, "s3cr3t-pw") == NULL);
	CHECK(strstr(error, "alice") != NULL);
	CHECK(strstr(error, "/nonexistent-trellara-dir") != NULL);
	CHECK(strchr(error, '\n') == NULL);
	size_t n = strlen(error);
	CHECK(n > 0 && error[n - 1] != ' ');
	/* a small buffer: cut, still terminated */
	char small[16];
	memset(small, 'x', sizeof small);
	o.error = small;
	o.error_len = sizeof small;
	CHECK(pgconn_open(url, &o) == NULL);
	CHECK(memchr(small, '\0', sizeof small) != NULL);
	CHECK(strncmp(small, "cannot connect ", 15) == 0);
}

static void test_no_handle(void)
{
	/* NULL, or a PGconn that pgconn_open() did not make */
	CHECK_STR(pgconn_role(NULL), "database");
	CHECK_STR(pgconn_masked_url(NULL), "");
	CHECK_STR(pgconn_sqlstate(NULL), "");
	CHECK_STR(pgconn_message(NULL), "");
	CHECK(pgconn_error_class(NULL) == SQLSTATE_CLASS_CONNECTION);
	PGconn *bare = PQconnectStart("host=/nonexistent-trellara-dir port=5999 dbname=x");
	CHECK(bare != NULL);
	CHECK_STR(pgconn_role(bare), "database");
	CHECK_STR(pgconn_sqlstate(bare), "");
	CHECK(pgconn_error_class(bare) == SQLSTATE_CLASS_CONNECTION);
	PQfinish(bare);
}

int main(void)
{
	test_quiet_connect_failure();
	test_no_handle();
	return unit_done("test_pgconn");
}
