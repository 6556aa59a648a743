/*
 * runs.c - snapshot runs: the one module that writes SQL against the
 * checkpoint schema's snapshot_runs (the rest of the schema: checkpoint.c).
 */
#include "trellara/runs.h"

#include "trellara/log.h"
#include "trellara/lsn.h"
#include "trellara/pgconn.h"
#include "trellara/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static PGresult *q(PGconn *conn, const char *schema, const char *sql, int n, const char *const *p)
{
	return pgconn_schema_query(conn, schema, sql, n, p);
}

/* error NULL: a bad row is logged; otherwise described there. */
static int fill(PGresult *res, struct run_row *row, char *error, size_t error_len)
{
	memset(row, 0, sizeof *row);
	if (PQntuples(res) != 1)
		return 0;
	row->exists = true;
	snprintf(row->run_id, sizeof row->run_id, "%s", PQgetvalue(res, 0, 0));
	if (!run_state_from_name(PQgetvalue(res, 0, 1), &row->state)) {
		if (error)
			snprintf(error, error_len, "snapshot run \"%s\" has an unknown state \"%s\"", row->run_id,
				 PQgetvalue(res, 0, 1));
		else
			log_error("snapshot run \"%s\" has an unknown state \"%s\"", row->run_id, PQgetvalue(res, 0, 1));
		return -1;
	}
	snprintf(row->slot_name, sizeof row->slot_name, "%s", PQgetvalue(res, 0, 2));
	if (!PQgetisnull(res, 0, 3))
		lsn_parse(PQgetvalue(res, 0, 3), &row->consistent_lsn);
	snprintf(row->snapshot_name, sizeof row->snapshot_name, "%s", PQgetvalue(res, 0, 4));
	snprintf(row->current_relation, sizeof row->current_relation, "%s", PQgetvalue(res, 0, 5));
	snprintf(row->failure_reason, sizeof row->failure_reason, "%s", PQgetvalue(res, 0, 6));
	snprintf(row->updated_at, sizeof row->updated_at, "%s", PQgetvalue(res, 0, 7));
	return 0;
}

#define RUN_COLUMNS                                                                                              \
	"run_id, state, coalesce(slot_name, ''), consistent_lsn, coalesce(snapshot_name, ''),"                    \
	" coalesce(current_relation, ''), coalesce(failure_reason, ''),"                                          \
	" to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"

int runs_load(PGconn *conn, const char *schema, const char *source_id, const char *dataset_id, const char *run_id,
	      struct run_row *row)
{
	const char *p[3] = { source_id, dataset_id, run_id };
	PGresult *res = run_id ? q(conn, schema,
				   "SELECT " RUN_COLUMNS " FROM @.snapshot_runs WHERE source_id = $1 AND dataset_id = $2 AND run_id = $3",
				   3, p)
			       : q(conn, schema,
				   "SELECT " RUN_COLUMNS " FROM @.snapshot_runs WHERE source_id = $1 AND dataset_id = $2"
				   " ORDER BY updated_at DESC LIMIT 1",
				   2, p);
	if (!res)
		return -1;
	int rc = fill(res, row, NULL, 0);
	PQclear(res);
	return rc;
}

int runs_observe(PGconn *conn, const char *schema, const char *source_id, const char *dataset_id, struct run_row *row,
		 char *error, size_t error_len)
{
	memset(row, 0, sizeof *row);
	const char *p[2] = { source_id, dataset_id };
	char *text = pgconn_schema_sql(conn,
				       "SELECT " RUN_COLUMNS " FROM @.snapshot_runs WHERE source_id = $1 AND dataset_id = $2"
				       " ORDER BY updated_at DESC LIMIT 1",
				       schema);
	PGresult *res = PQexecParams(conn, text, 2, NULL, p, NULL, NULL, 0);
	free(text);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		snprintf(error, error_len, "cannot read the snapshot run: %s", PQerrorMessage(conn));
		PQclear(res);
		return -1;
	}
	int rc = fill(res, row, error, error_len);
	PQclear(res);
	return rc;
}

int runs_insert(PGconn *conn, const char *schema, const char *source_id, const char *dataset_id, const char *run_id)
{
	const char *p[3] = { source_id, dataset_id, run_id };
	PGresult *res = q(conn, schema,
			  "INSERT INTO @.snapshot_runs (source_id, dataset_id, run_id, state) VALUES ($1, $2, $3, 'planned')"
			  " ON CONFLICT DO NOTHING",
			  3, p);
	if (!res)
		return -1;
	PQclear(res);
	return 0;
}

/* Whether a repair (the repairs table) was recorded since the run
 * entered failed_recoverable: 1 yes, 0 no, -1 (logged) unreadable. */
static int repaired_since_failure(PGconn *conn, const char *schema, const char *source_id, const char *dataset_id,
				  const char *run_id)
{
	const char *p[3] = { source_id, dataset_id, run_id };
	PGresult *res = q(conn, schema,
			  "SELECT EXISTS (SELECT 1 FROM @.snapshot_runs s JOIN @.repairs r USING (source_id, dataset_id)"
			  " WHERE s.source_id = $1 AND s.dataset_id = $2 AND s.run_id = $3"
			  " AND s.state = 'failed_recoverable' AND r.applied_at > s.updated_at)",
			  3, p);
	if (!res)
		return -1;
	int yes = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	return yes;
}

int runs_repaired_since_failure(PGconn *conn, const char *schema, const char *source_id, const char *dataset_id,
				const char *run_id, bool *repaired)
{
	int rc = repaired_since_failure(conn, schema, source_id, dataset_id, run_id);
	*repaired = rc == 1;
	return rc < 0 ? -1 : 0;
}

int runs_move(PGconn *conn, const char *schema, const char *source_id, const char *dataset_id, const char *run_id,
	      enum run_state to, const char *slot_name, uint64_t consistent_lsn, const char *snapshot_name,
	      const char *current_relation, const char *failure_reason, bool new_evidence)
{
	if (pgconn_command(conn, "BEGIN") < 0)
		return -1;
	const char *p[3] = { source_id, dataset_id, run_id };
	PGresult *res = q(conn, schema,
			  "SELECT " RUN_COLUMNS " FROM @.snapshot_runs WHERE source_id = $1 AND dataset_id = $2 AND run_id = $3 FOR UPDATE",
			  3, p);
	int rc = -1;
	struct run_row row;
	if (!res)
		goto rollback;
	int filled = fill(res, &row, NULL, 0);
	PQclear(res);
	if (filled < 0)
		goto rollback;
	if (!row.exists) {
		log_error("snapshot run \"%s\" of %s:%s does not exist", run_id, source_id, dataset_id);
		goto rollback;
	}
	struct run_evidence ev = {
		.slot_name = slot_name ? slot_name : row.slot_name,
		.consistent_lsn = consistent_lsn ? consistent_lsn : row.consistent_lsn,
		.failure_reason = failure_reason,
		.new_evidence = new_evidence,
	};
	if (row.state == RUN_FAILED_RECOVERABLE && to == RUN_VERIFIED) {
		int repaired = repaired_since_failure(conn, schema, source_id, dataset_id, run_id);
		if (repaired < 0)
			goto rollback;
		ev.repaired = repaired == 1;
	}
	char err[RUN_TRANSITION_ERR_LEN];
	if (run_transition_check(row.state, to, &ev, err, sizeof err) < 0) {
		log_error("snapshot run \"%s\": %s", run_id, err);
		rc = 1;
		goto rollback;
	}
	char lsn[LSN_FORMAT_LEN];
	if (ev.consistent_lsn)
		lsn_format(ev.consistent_lsn, lsn);
	const char *u[8] = { source_id, dataset_id, run_id, run_state_name(to), slot_name, ev.consistent_lsn ? lsn : NULL,
			     snapshot_name, current_relation };
	res = q(conn, schema,
		"UPDATE @.snapshot_runs SET state = $4, slot_name = coalesce($5, slot_name),"
		" consistent_lsn = coalesce($6::pg_lsn, consistent_lsn), snapshot_name = coalesce($7, snapshot_name),"
		" current_relation = $8, updated_at = now()"
		" WHERE source_id = $1 AND dataset_id = $2 AND run_id = $3",
		8, u);
	if (!res)
		goto rollback;
	PQclear(res);
	if (failure_reason || to != RUN_FAILED_RECOVERABLE) {
		const char *f[4] = { source_id, dataset_id, run_id, to == RUN_FAILED_RECOVERABLE ? failure_reason : NULL };
		res = q(conn, schema,
			"UPDATE @.snapshot_runs SET failure_reason = $4 WHERE source_id = $1 AND dataset_id = $2 AND run_id = $3",
			4, f);
		if (!res)
			goto rollback;
		PQclear(res);
	}
	if (pgconn_command(conn, "COMMIT") < 0)
		return -1;
	return 0;
rollback:
	pgconn_command(conn, "ROLLBACK");
	return rc;
}
