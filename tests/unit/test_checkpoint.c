/*
 * The checkpoint module's pure parts: the statements it hands the applier
 * for its pipeline (quoted schema, the documented parameter count) and
 * the parameters formatted from a checkpoint.  No server: a connection
 * object that never connected is enough for PQescapeIdentifier.
 */
#include "trellara/checkpoint.h"
#include "unit.h"

#include <libpq-fe.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The highest $N placeholder in sql. */
static int highest_param(const char *sql)
{
	int highest = 0;
	for (const char *p = sql; (p = strchr(p, '$')) != NULL; p++) {
		int n = atoi(p + 1);
		if (n > highest)
			highest = n;
	}
	return highest;
}

static void check_sql_text(PGconn *conn)
{
	char *sql = checkpoint_apply_update_sql(conn, "flow \"one\"");
	const char *prefix = "UPDATE \"flow \"\"one\"\"\".apply_checkpoint SET ";
	CHECK(strncmp(sql, prefix, strlen(prefix)) == 0);
	CHECK(highest_param(sql) == CHECKPOINT_APPLY_UPDATE_NPARAMS);
	CHECK(strstr(sql, "WHERE source_id = $8 AND dataset_id = $9 AND consumer_group = $10 AND CASE WHEN") != NULL);
	CHECK(strstr(sql, "stream_offset <> $11 THEN") != NULL && strstr(sql, ")::boolean ELSE true END") != NULL);
	CHECK(strstr(sql, "last_commit_lsn = $1,") != NULL && strstr(sql, "skipped_duplicates = $7,") != NULL);
	free(sql);

	sql = checkpoint_apply_lock_sql(conn, "trellara");
	CHECK_STR(sql, "SELECT 1 FROM \"trellara\".apply_checkpoint WHERE source_id = $1 AND dataset_id = $2 AND consumer_group = $3 FOR UPDATE");
	CHECK(highest_param(sql) == 3);
	free(sql);

	sql = checkpoint_quarantine_resolve_sql(conn, "trellara");
	CHECK_STR(sql, "UPDATE \"trellara\".quarantine SET state = 'resolved', updated_at = now() WHERE id = $1");
	free(sql);
}

static void check_params(void)
{
	struct flow_ids ids = { "src", "ds", "group-a" };
	struct apply_checkpoint cp = {
		.last_commit_lsn = 0x16B3748ULL,
		.last_xid = 4000000000u,
		.stream_offset = 18446744073709551615ULL,
		.applied_through_lsn = 0x100000000ULL,
		.applied_transactions = 7,
		.applied_changes = 0,
		.skipped_duplicates = 12,
	};
	struct apply_checkpoint prev = { .stream_offset = 41 };
	struct checkpoint_apply_params p;
	memset(&p, 0x5a, sizeof p);
	checkpoint_apply_update_params(&ids, &prev, &cp, &p);
	CHECK_STR(p.values[0], "0/16B3748");
	CHECK_STR(p.values[1], "4000000000");
	CHECK_STR(p.values[2], "18446744073709551615");
	CHECK_STR(p.values[3], "1/0");
	CHECK_STR(p.values[4], "7");
	CHECK_STR(p.values[5], "0");
	CHECK_STR(p.values[6], "12");
	CHECK(p.values[7] == ids.source_id);
	CHECK(p.values[8] == ids.dataset_id);
	CHECK(p.values[9] == ids.group);
	CHECK_STR(p.values[10], "41");
}

int main(void)
{
	/* never connects: the directory does not exist */
	PGconn *conn = PQconnectStart("host=/nonexistent/trellara-unit dbname=none connect_timeout=1");
	CHECK(conn != NULL);
	if (conn)
		check_sql_text(conn);
	PQfinish(conn);
	check_params();
	return unit_done("checkpoint");
}
