/*
 * cutover.c - the cutover table (cutover.h).
 */
#include "trellara/cutover.h"

#include "trellara/log.h"
#include "trellara/lsn.h"
#include "trellara/pgconn.h"
#include "trellara/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TS(col) "coalesce(to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), '')"
#define CUTOVER_COLUMNS                                                                                        \
	"state, lock_source, source_lock, coalesce(source_database, ''), previous_read_only, sequence_margin,"   \
	" final_lsn, verified_at_lsn, coalesce(verify_result, ''), coalesce(slot_name, ''),"                      \
	" coalesce(failure_reason, ''), " TS("started_at") ", " TS("completed_at") ", " TS("updated_at")

/* error NULL: a bad row is logged; otherwise described there. */
static int fill(PGresult *res, struct cutover_row *row, char *error, size_t error_len)
{
	memset(row, 0, sizeof *row);
	if (PQntuples(res) != 1)
		return 0;
	row->exists = true;
	if (!cutplan_state_parse(PQgetvalue(res, 0, 0), &row->state) ||
	    !cutplan_lock_parse(PQgetvalue(res, 0, 2), &row->source_lock)) {
		if (error)
			snprintf(error, error_len, "the cutover row has an unknown state \"%s\" or source_lock \"%s\"",
				 PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 2));
		else
			log_error("the cutover row has an unknown state \"%s\" or source_lock \"%s\"", PQgetvalue(res, 0, 0),
				  PQgetvalue(res, 0, 2));
		return -1;
	}
	row->lock_source = strcmp(PQgetvalue(res, 0, 1), "t") == 0;
	snprintf(row->source_database, sizeof row->source_database, "%s", PQgetvalue(res, 0, 3));
	row->has_previous_read_only = !PQgetisnull(res, 0, 4);
	snprintf(row->previous_read_only, sizeof row->previous_read_only, "%s", PQgetvalue(res, 0, 4));
	row->sequence_margin = strtoull(PQgetvalue(res, 0, 5), NULL, 10);
	row->has_final_lsn = !PQgetisnull(res, 0, 6) && lsn_parse(PQgetvalue(res, 0, 6), &row->final_lsn);
	row->has_verified_at_lsn = !PQgetisnull(res, 0, 7) && lsn_parse(PQgetvalue(res, 0, 7), &row->verified_at_lsn);
	snprintf(row->verify_result, sizeof row->verify_result, "%s", PQgetvalue(res, 0, 8));
	snprintf(row->slot_name, sizeof row->slot_name, "%s", PQgetvalue(res, 0, 9));
	snprintf(row->failure_reason, sizeof row->failure_reason, "%s", PQgetvalue(res, 0, 10));
	snprintf(row->started_at, sizeof row->started_at, "%s", PQgetvalue(res, 0, 11));
	snprintf(row->completed_at, sizeof row->completed_at, "%s", PQgetvalue(res, 0, 12));
	snprintf(row->updated_at, sizeof row->updated_at, "%s", PQgetvalue(res, 0, 13));
	return 0;
}

int cutover_load(PGconn *conn, const char *schema, const char *source_id, const char *dataset_id,
		 struct cutover_row *row)
{
	const char *p[2] = { source_id, dataset_id };
	PGresult *res = pgconn_schema_query(conn, schema,
					    "SELECT " CUTOVER_COLUMNS " FROM @.cutover WHERE source_id = $1 AND dataset_id = $2",
					    2, p);
	if (!res)
		return -1;
	int rc = fill(res, row, NULL, 0);
	PQclear(res);
	return rc;
}

int cutover_start(PGconn *conn, const char *schema, const char *source_id, const char *dataset_id, bool lock_source,
		  uint64_t sequence_margin, const char *slot_name)
{
	char margin[24];
	snprintf(margin, sizeof margin, "%llu", (unsigned long long)sequence_margin);
	const char *p[5] = { source_id, dataset_id, lock_source ? "t" : "f", margin, slot_name };
	/* a lock still in place (a failed cutover's, kept) stays recorded, so
	 * that its previous setting is what --abort restores */
	PGresult *res = pgconn_schema_query(
		conn, schema,
		"INSERT INTO @.cutover AS c (source_id, dataset_id, state, lock_source, sequence_margin, slot_name)"
		" VALUES ($1, $2, 'started', $3, $4, $5) ON CONFLICT (source_id, dataset_id) DO UPDATE SET"
		" state = 'started', lock_source = EXCLUDED.lock_source, sequence_margin = EXCLUDED.sequence_margin,"
		" slot_name = EXCLUDED.slot_name,"
		" source_lock = CASE WHEN c.source_lock IN ('requested', 'held') THEN c.source_lock ELSE 'none' END,"
		" source_database = CASE WHEN c.source_lock IN ('requested', 'held') THEN c.source_database END,"
		" previous_read_only = CASE WHEN c.source_lock IN ('requested', 'held') THEN c.previous_read_only END,"
		" locked_at = CASE WHEN c.source_lock IN ('requested', 'held') THEN c.locked_at END,"
		" unlocked_at = NULL, final_lsn = NULL, verify_result = NULL, verified_at_lsn = NULL, sequences = NULL,"
		" failure_reason = NULL, started_at = now(), caught_up_at = NULL, verified_at = NULL, completed_at = NULL,"
		" updated_at = now()"
		" WHERE c.state IN ('aborted', 'failed') RETURNING 1",
		5, p);
	if (!res)
		return -1;
	int started = PQntuples(res);
	PQclear(res);
	if (started == 1)
		return 0;
	log_error("a cutover of flow %s:%s is already in progress or done", source_id, dataset_id);
	return 1;
}

int cutover_update(PGconn *conn, const char *schema, const char *source_id, const char *dataset_id,
		   const struct cutover_change *c)
{
	char final_lsn[LSN_FORMAT_LEN], verified_lsn[LSN_FORMAT_LEN];
	if (c->set_final_lsn)
		lsn_format(c->final_lsn, final_lsn);
	if (c->set_verified_at_lsn)
		lsn_format(c->verified_at_lsn, verified_lsn);
	const char *p[12] = { source_id,
			      dataset_id,
			      c->state,
			      c->source_lock,
			      c->source_database,
			      c->set_previous_read_only ? "t" : "f",
			      c->previous_read_only,
			      c->set_final_lsn ? final_lsn : NULL,
			      c->sequences_json,
			      c->verify_result,
			      c->set_verified_at_lsn ? verified_lsn : NULL,
			      c->failure_reason };
	PGresult *res = pgconn_schema_query(
		conn, schema,
		"UPDATE @.cutover SET state = coalesce($3, state), source_lock = coalesce($4, source_lock),"
		" source_database = coalesce($5, source_database),"
		" previous_read_only = CASE WHEN $6::boolean THEN $7 ELSE previous_read_only END,"
		" final_lsn = coalesce($8::pg_lsn, final_lsn), sequences = coalesce($9::jsonb, sequences),"
		" verify_result = coalesce($10, verify_result), verified_at_lsn = coalesce($11::pg_lsn, verified_at_lsn),"
		" failure_reason = coalesce($12, failure_reason),"
		" locked_at = CASE WHEN $4::text = 'held' THEN now() ELSE locked_at END,"
		" unlocked_at = CASE WHEN $4::text = 'released' THEN now() ELSE unlocked_at END,"
		" caught_up_at = CASE WHEN $3::text = 'caught_up' THEN now() ELSE caught_up_at END,"
		" verified_at = CASE WHEN $3::text = 'verified' THEN now() ELSE verified_at END,"
		" completed_at = CASE WHEN $3::text = 'cut_over' THEN now() ELSE completed_at END,"
		" updated_at = now() WHERE source_id = $1 AND dataset_id = $2 RETURNING 1",
		12, p);
	if (!res)
		return -1;
	int n = PQntuples(res);
	PQclear(res);
	if (n != 1) {
		log_error("the cutover row of flow %s:%s does not exist", source_id, dataset_id);
		return -1;
	}
	return 0;
}

int cutover_observe(PGconn *conn, const char *schema, const char *source_id, const char *dataset_id,
		    struct cutover_row *row, char *error, size_t error_len)
{
	memset(row, 0, sizeof *row);
	const char *p1[1] = { schema };
	PGresult *res = PQexecParams(conn, "SELECT to_regclass(quote_ident($1) || '.cutover') IS NOT NULL", 1, NULL, p1,
				     NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		snprintf(error, error_len, "cannot read the cutover table: %s", PQerrorMessage(conn));
		PQclear(res);
		return -1;
	}
	bool present = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	if (!present)
		return 0; /* a schema before migration 3: no cutover */
	const char *p[2] = { source_id, dataset_id };
	char *sql = pgconn_schema_sql(conn, "SELECT " CUTOVER_COLUMNS " FROM @.cutover WHERE source_id = $1 AND dataset_id = $2",
				      schema);
	res = PQexecParams(conn, sql, 2, NULL, p, NULL, NULL, 0);
	free(sql);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		snprintf(error, error_len, "cannot read the cutover row: %s", PQerrorMessage(conn));
		PQclear(res);
		return -1;
	}
	int rc = fill(res, row, error, error_len);
	PQclear(res);
	return rc;
}
