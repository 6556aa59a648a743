/* pgconn.h without a server: a connect failure reported into the
 * caller's buffer on one line, with the role and the masked URL and
 * never the password; the handle queries of a PGconn it did not make. */
#include "trellara/config.h"
#include "trellara/pgconn.h"
#include "unit.h"

#include <stdlib.h>

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

/* What pgconn_open adds to a URL: the URL's own options first, then the
 * pinned ones; PGOPTIONS when the URL has none; a URL that does not parse
 * is refused with a message that quotes none of it. */
static void test_params(void)
{
	struct pgconn_params pp;
	char why[256];
	unsetenv("PGOPTIONS");
	CHECK(pgconn_params_build("postgresql://u:pw1@/db?options=-c%20work_mem%3D64MB", &pp, why, sizeof why) == 0);
	CHECK_STR(pp.options, "-c work_mem=64MB " PGCONN_PINNED_OPTIONS);
	CHECK_STR(pp.password, "pw1");
	pgconn_params_free(&pp);
	CHECK(pp.options == NULL && pp.password == NULL);
	setenv("PGOPTIONS", "-c search_path=public", 1);
	CHECK(pgconn_params_build("host=/tmp dbname=db", &pp, why, sizeof why) == 0);
	/* the pinned search_path comes last: it wins */
	CHECK_STR(pp.options, "-c search_path=public " PGCONN_PINNED_OPTIONS);
	CHECK(pp.password == NULL);
	pgconn_params_free(&pp);
	unsetenv("PGOPTIONS");
	CHECK(pgconn_params_build("dbname=db", &pp, why, sizeof why) == 0);
	CHECK_STR(pp.options, PGCONN_PINNED_OPTIONS);
	pgconn_params_free(&pp);
	const char *bad[] = { "postgresql://u:Sekr1t%zzPw@/db", "host=/tmp password=Sekr1t tailPw9",
			      "postgresql://u:Sekr1tV6@[::1/db" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		CHECK(pgconn_params_build(bad[i], &pp, why, sizeof why) == -1);
		CHECK(strstr(why, "does not parse") != NULL);
		CHECK(strstr(why, "Sekr1t") == NULL && strstr(why, "tailPw9") == NULL);
		CHECK(pp.options == NULL && pp.password == NULL);
	}
	/* and config_load's check is installed by this file */
	CHECK(config_url_check != NULL);
	CHECK(config_url_check("dbname=x", why, sizeof why) == 0);
	CHECK(config_url_check(bad[0], why, sizeof why) == -1);
}

int main(void)
{
	test_quiet_connect_failure();
	test_no_handle();
	test_params();
	return unit_done("test_pgconn");
}
