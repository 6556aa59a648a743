/*
 * checkpoint.c - migrations and queries of the checkpoint schema.
 */
#include "trellara/checkpoint.h"

#include "trellara/log.h"
#include "trellara/lsn.h"
#include "trellara/pgconn.h"
#include "trellara/xalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Migration 1.  "@" stands for the quoted schema name. */
static const char *const migration_1[] = {
	"CREATE TABLE @.snapshot_runs ("
	" source_id text NOT NULL, dataset_id text NOT NULL, run_id text NOT NULL,"
	" state text NOT NULL CHECK (state IN ('planned','slot_created','snapshot_exported','copying_table',"
	"  'copy_complete','stream_handoff_ready','streaming','verified','failed_recoverable')),"
	" slot_name text, consistent_lsn pg_lsn, snapshot_name text, current_relation text,"
	" copied_rows bigint NOT NULL DEFAULT 0, failure_reason text,"
	" created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now(),"
	" PRIMARY KEY (source_id, dataset_id, run_id))",
	"CREATE TABLE @.snapshot_table_progress ("
	" source_id text NOT NULL, dataset_id text NOT NULL, run_id text NOT NULL, relation text NOT NULL,"
	" state text NOT NULL, copied_rows bigint NOT NULL DEFAULT 0, watermark_lsn pg_lsn,"
	" schema_fingerprint text, updated_at timestamptz NOT NULL DEFAULT now(),"
	" PRIMARY KEY (source_id, dataset_id, run_id, relation))",
	"CREATE TABLE @.snapshot_handoff_events ("
	" id bigserial PRIMARY KEY, source_id text NOT NULL, dataset_id text NOT NULL, run_id text NOT NULL,"
	" relation text NOT NULL, copied_rows bigint NOT NULL, completed_at timestamptz NOT NULL DEFAULT now(),"
	" source_watermark pg_lsn NOT NULL)",
	"CREATE FUNCTION @.reject_change() RETURNS trigger LANGUAGE plpgsql AS $$"
	" BEGIN RAISE EXCEPTION 'snapshot_handoff_events is immutable: % rejected', TG_OP"
	"  USING ERRCODE = 'integrity_constraint_violation'; END $$",
	"CREATE TRIGGER snapshot_handoff_events_immutable BEFORE UPDATE OR DELETE ON @.snapshot_handoff_events"
	" FOR EACH ROW EXECUTE FUNCTION @.reject_change()",
	"CREATE TRIGGER snapshot_handoff_events_no_truncate BEFORE TRUNCATE ON @.snapshot_handoff_events"
	" FOR EACH STATEMENT EXECUTE FUNCTION @.reject_change()",
	"CREATE TABLE @.apply_checkpoint ("
	" source_id text NOT NULL, dataset_id text NOT NULL, consumer_group text NOT NULL,"
	" last_commit_lsn pg_lsn NOT NULL DEFAULT '0/0', last_xid bigint NOT NULL DEFAULT 0,"
	" stream_offset bigint NOT NULL DEFAULT 0, applied_through_lsn pg_lsn NOT NULL DEFAULT '0/0',"
	" applied_transactions bigint NOT NULL DEFAULT 0, applied_changes bigint NOT NULL DEFAULT 0,"
	" skipped_duplicates bigint NOT NULL DEFAULT 0, updated_at timestamptz NOT NULL DEFAULT now(),"
	" PRIMARY KEY (source_id, dataset_id, consumer_group))",
	"CREATE TABLE @.quarantine ("
	" id bigserial PRIMARY KEY, source_id text NOT NULL, dataset_id text NOT NULL, consumer_group text NOT NULL,"
	" xid bigint NOT NULL, commit_lsn pg_lsn NOT NULL, stream_offset bigint NOT NULL,"
	" reason text NOT NULL, detail text NOT NULL,"
	" state text NOT NULL CHECK (state IN ('quarantined','replay_ready','resolved')),"
	" created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now())",
	"CREATE INDEX quarantine_open ON @.quarantine (source_id, dataset_id, consumer_group) WHERE state <> 'resolved'",
	"CREATE TABLE @.source_identity ("
	" source_id text PRIMARY KEY, system_identifier text NOT NULL, timeline integer,"
	" database_name text NOT NULL, first_seen timestamptz NOT NULL DEFAULT now(),"
	" last_seen timestamptz NOT NULL DEFAULT now())",
	"CREATE TABLE @.schema_contracts ("
	" source_id text NOT NULL, relation text NOT NULL, fingerprint text NOT NULL,"
	" pinned_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (source_id, relation))",
	"CREATE TABLE @.apply_fence ("
	" source_id text NOT NULL, dataset_id text NOT NULL, fence_lsn pg_lsn NOT NULL,"
	" state text NOT NULL CHECK (state IN ('requested','held','released')), requested_by text,"
	" held_at timestamptz, held_applied_lsn pg_lsn, created_at timestamptz NOT NULL DEFAULT now(),"
	" PRIMARY KEY (source_id, dataset_id))",
	/* apply's row checks: raise inside the server, so that a pipelined
	 * COMMIT can never commit a transaction whose UPDATE missed */
	"CREATE FUNCTION @.expect_one(matched bigint, what text) RETURNS void LANGUAGE plpgsql AS $$"
	" BEGIN"
	"  IF matched = 0 THEN RAISE EXCEPTION 'no row matched: %', what USING ERRCODE = 'TR001'; END IF;"
	"  IF matched > 1 THEN RAISE EXCEPTION 'more than one row matched: %', what USING ERRCODE = 'TR002'; END IF;"
	" END $$",
	NULL
};

/* Migration 2: the apply checkpoint names the stream instance (and the
 * slot, source system and timeline) its offsets belong to. */
static const char *const migration_2[] = {
	"ALTER TABLE @.apply_checkpoint ADD COLUMN stream_id text, ADD COLUMN slot_name text,"
	" ADD COLUMN system_identifier text, ADD COLUMN timeline integer",
	NULL
};

/* Migration 3: the flow's cutover (trellara-cutover(1)), one row per
 * flow, moved along the steps of cutplan.h. */
static const char *const migration_3[] = {
	"CREATE TABLE @.cutover ("
	" source_id text NOT NULL, dataset_id text NOT NULL,"
	" state text NOT NULL CHECK (state IN ('started','locking','locked','caught_up','sequences_synced','verified',"
	"  'stopping','cut_over','aborted','failed')),"
	" lock_source boolean NOT NULL,"
	" source_lock text NOT NULL DEFAULT 'none' CHECK (source_lock IN ('none','requested','held','released')),"
	" source_database text, previous_read_only text,"
	" sequence_margin bigint NOT NULL, final_lsn pg_lsn, verify_result text, verified_at_lsn pg_lsn,"
	" sequences jsonb, slot_name text, failure_reason text,"
	" started_at timestamptz NOT NULL DEFAULT now(), locked_at timestamptz, unlocked_at timestamptz,"
	" caught_up_at timestamptz, verified_at timestamptz, completed_at timestamptz,"
	" updated_at timestamptz NOT NULL DEFAULT now(),"
	" PRIMARY KEY (source_id, dataset_id))",
	NULL
};

/* Migration 4: the ranges of a split table's copy (DESIGN §6), each
 * planned before the copy and marked copied in the transaction of its
 * rows, so a resumed run knows which ranges it may keep. */
static const char *const migration_4[] = {
	"CREATE TABLE @.snapshot_range_progress ("
	" source_id text NOT NULL, dataset_id text NOT NULL, run_id text NOT NULL, relation text NOT NULL,"
	" range_no integer NOT NULL, n_ranges integer NOT NULL, first_block bigint NOT NULL, end_block bigint,"
	" split_bytes bigint NOT NULL, state text NOT NULL CHECK (state IN ('planned','copied')),"
	" copied_rows bigint NOT NULL DEFAULT 0, content_hash text, watermark_lsn pg_lsn,"
	" updated_at timestamptz NOT NULL DEFAULT now(),"
	" PRIMARY KEY (source_id, dataset_id, run_id, relation, range_no))",
	NULL
};

/* Migration 5: the evidence of a repair applied by trellara-repair-plan
 * (one row per table it repaired, in the repair's own transaction): which
 * keys, copied from the source at which LSN, from which verify, when.  A
 * clean verify after a repair recorded since the run failed promotes the
 * run again (runstate.h rule 2b). */
static const char *const migration_5[] = {
	"CREATE TABLE @.repairs ("
	" id bigserial PRIMARY KEY, source_id text NOT NULL, dataset_id text NOT NULL, run_id text,"
	" relation text NOT NULL, key_columns jsonb NOT NULL, keys jsonb NOT NULL,"
	" rows_deleted bigint NOT NULL, rows_inserted bigint NOT NULL, source_lsn pg_lsn NOT NULL,"
	" verify_compared_at pg_lsn, applied_at timestamptz NOT NULL DEFAULT now())",
	"CREATE INDEX repairs_flow ON @.repairs (source_id, dataset_id, applied_at)",
	NULL
};

/* Migration 6: a partitioned table's copy is split by its leaf
 * partitions (and a large leaf by blocks): which leaf a range reads. */
static const char *const migration_6[] = {
	"ALTER TABLE @.snapshot_range_progress ADD COLUMN partition text",
	NULL
};

static const char *const *const migrations[] = { migration_1, migration_2, migration_3,
						 migration_4, migration_5, migration_6 };

static int exec_schema_sql(PGconn *conn, const char *sql, const char *schema)
{
	char *text = pgconn_schema_sql(conn, sql, schema);
	int rc = pgconn_command(conn, text);
	free(text);
	return rc;
}

int checkpoint_migrate(PGconn *conn, const char *schema)
{
	int rc = -1;
	const char *params[1] = { schema };
	if (pgconn_command(conn, "BEGIN") < 0)
		goto out;
	/* one migrator at a time, per schema */
	PGresult *res = pgconn_query(conn, "SELECT pg_advisory_xact_lock(hashtext('trellara.migrate.' || $1))", 1, params);
	if (!res)
		goto rollback;
	PQclear(res);
	if (exec_schema_sql(conn, "CREATE SCHEMA IF NOT EXISTS @", schema) < 0 ||
	    exec_schema_sql(conn,
			    "CREATE TABLE IF NOT EXISTS @.schema_migrations (version integer PRIMARY KEY,"
			    " applied_at timestamptz NOT NULL DEFAULT now())",
			    schema) < 0)
		goto rollback;
	res = pgconn_schema_query(conn, schema, "SELECT coalesce(max(version), 0) FROM @.schema_migrations", 0, NULL);
	if (!res)
		goto rollback;
	int version = atoi(PQgetvalue(res, 0, 0));
	PQclear(res);
	if (version > CHECKPOINT_SCHEMA_VERSION) {
		log_error("checkpoint schema \"%s\" is at version %d, newer than this Trellara (%d)", schema, version,
			  CHECKPOINT_SCHEMA_VERSION);
		goto rollback;
	}
	for (int v = version + 1; v <= CHECKPOINT_SCHEMA_VERSION; v++) {
		const char *const *steps = migrations[v - 1];
		for (int i = 0; steps[i]; i++)
			if (exec_schema_sql(conn, steps[i], schema) < 0)
				goto rollback;
		char *record = xasprintf("INSERT INTO @.schema_migrations (version) VALUES (%d)", v);
		int irc = exec_schema_sql(conn, record, schema);
		free(record);
		if (irc < 0)
			goto rollback;
		log_info("checkpoint schema \"%s\" %s (version %d)", schema, v == 1 ? "created" : "upgraded", v);
	}
	if (pgconn_command(conn, "COMMIT") < 0)
		goto out;
	rc = 0;
	goto out;
rollback:
	pgconn_command(conn, "ROLLBACK");
out:

	return rc;
}

static PGresult *query_schema(PGconn *conn, const char *schema, const char *sql, int n, const char *const *params)
{
	return pgconn_schema_query(conn, schema, sql, n, params);
}

int checkpoint_load(PGconn *conn, const char *schema, const struct flow_ids *ids, struct apply_checkpoint *cp)
{
	memset(cp, 0, sizeof *cp);
	const char *p[3] = { ids->source_id, ids->dataset_id, ids->group };
	PGresult *res = query_schema(conn, schema,
				     "INSERT INTO @.apply_checkpoint (source_id, dataset_id, consumer_group) VALUES ($1, $2, $3)"
				     " ON CONFLICT DO NOTHING",
				     3, p);
	if (!res)
		return -1;
	PQclear(res);
	res = query_schema(conn, schema,
			   "SELECT last_commit_lsn, last_xid, stream_offset, applied_through_lsn, applied_transactions,"
			   " applied_changes, skipped_duplicates, coalesce(stream_id, ''), coalesce(slot_name, ''),"
			   " coalesce(system_identifier, ''), coalesce(timeline, 0) FROM @.apply_checkpoint"
			   " WHERE source_id = $1 AND dataset_id = $2 AND consumer_group = $3",
			   3, p);
	if (!res)
		return -1;
	int rc = -1;
	if (PQntuples(res) == 1 && lsn_parse(PQgetvalue(res, 0, 0), &cp->last_commit_lsn) &&
	    lsn_parse(PQgetvalue(res, 0, 3), &cp->applied_through_lsn)) {
		cp->last_xid = (uint32_t)strtoull(PQgetvalue(res, 0, 1), NULL, 10);
		cp->stream_offset = strtoull(PQgetvalue(res, 0, 2), NULL, 10);
		cp->applied_transactions = strtoull(PQgetvalue(res, 0, 4), NULL, 10);
		cp->applied_changes = strtoull(PQgetvalue(res, 0, 5), NULL, 10);
		cp->skipped_duplicates = strtoull(PQgetvalue(res, 0, 6), NULL, 10);
		snprintf(cp->stream_id, sizeof cp->stream_id, "%s", PQgetvalue(res, 0, 7));
		snprintf(cp->slot_name, sizeof cp->slot_name, "%s", PQgetvalue(res, 0, 8));
		snprintf(cp->system_identifier, sizeof cp->system_identifier, "%s", PQgetvalue(res, 0, 9));
		cp->timeline = (uint32_t)strtoul(PQgetvalue(res, 0, 10), NULL, 10);
		rc = 0;
	} else {
		log_error("apply checkpoint of %s:%s group \"%s\" could not be read", ids->source_id, ids->dataset_id,
			  ids->group);
	}
	PQclear(res);
	return rc;
}

int checkpoint_bind_stream(PGconn *conn, const char *schema, const struct flow_ids *ids, const char *stream_id,
			   const char *slot_name, const char *system_identifier, uint32_t timeline,
			   bool reset_offset)
{
	char tli[16];
	snprintf(tli, sizeof tli, "%u", timeline);
	const char *p[8] = { ids->source_id, ids->dataset_id, ids->group, stream_id, slot_name, system_identifier,
			     timeline ? tli : NULL, reset_offset ? "t" : "f" };
	PGresult *res = query_schema(conn, schema,
				     "UPDATE @.apply_checkpoint SET stream_id = $4, slot_name = coalesce($5, slot_name),"
				     " system_identifier = coalesce($6, system_identifier),"
				     " timeline = coalesce($7::integer, timeline),"
				     " stream_offset = CASE WHEN $8::boolean THEN 0 ELSE stream_offset END, updated_at = now()"
				     " WHERE source_id = $1 AND dataset_id = $2 AND consumer_group = $3",
				     8, p);
	if (!res)
		return -1;
	PQclear(res);
	return 0;
}

int checkpoint_check_source_identity(PGconn *conn, const char *schema, const char *source_id,
				     const char *system_identifier, const char *database)
{
	const char *p[3] = { source_id, system_identifier, database };
	PGresult *res = query_schema(conn, schema,
				     "INSERT INTO @.source_identity (source_id, system_identifier, database_name)"
				     " VALUES ($1, $2, $3) ON CONFLICT (source_id) DO UPDATE SET last_seen = now()"
				     " WHERE @.source_identity.system_identifier = $2 AND @.source_identity.database_name = $3"
				     " RETURNING 1",
				     3, p);
	if (!res)
		return -1;
	int inserted_or_matched = PQntuples(res);
	PQclear(res);
	if (inserted_or_matched == 1)
		return 0;
	const char *p1[1] = { source_id };
	res = query_schema(conn, schema, "SELECT system_identifier, database_name FROM @.source_identity WHERE source_id = $1",
			   1, p1);
	if (!res)
		return -1;
	log_error("source identity mismatch: target schema \"%s\" knows source \"%s\" as system %s database \"%s\", but the stream comes from system %s database \"%s\"",
		  schema, source_id, PQntuples(res) ? PQgetvalue(res, 0, 0) : "?", PQntuples(res) ? PQgetvalue(res, 0, 1) : "?",
		  system_identifier, database);
	PQclear(res);
	return 1;
}

/* Open entries: $4 true. */
#define QUARANTINE_SQL                                                                                           \
	"SELECT id, xid, commit_lsn, stream_offset, reason, detail, state,"                                       \
	" to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),"                            \
	" extract(epoch FROM now() - created_at)"                                                                  \
	" FROM @.quarantine WHERE source_id = $1 AND dataset_id = $2 AND consumer_group = $3"                     \
	" AND (NOT $4::boolean OR state <> 'resolved') ORDER BY id"

static void fill_quarantine(PGresult *res, struct quarantine_entry **entries, int *n)
{
	*n = PQntuples(res);
	*entries = xcalloc(*n ? (size_t)*n : 1, sizeof **entries);
	for (int i = 0; i < *n; i++) {
		struct quarantine_entry *e = &(*entries)[i];
		e->id = strtoll(PQgetvalue(res, i, 0), NULL, 10);
		e->xid = (uint32_t)strtoull(PQgetvalue(res, i, 1), NULL, 10);
		lsn_parse(PQgetvalue(res, i, 2), &e->commit_lsn);
		e->stream_offset = strtoull(PQgetvalue(res, i, 3), NULL, 10);
		snprintf(e->reason, sizeof e->reason, "%s", PQgetvalue(res, i, 4));
		snprintf(e->detail, sizeof e->detail, "%s", PQgetvalue(res, i, 5));
		snprintf(e->state, sizeof e->state, "%s", PQgetvalue(res, i, 6));
		snprintf(e->created_at, sizeof e->created_at, "%s", PQgetvalue(res, i, 7));
		e->age_seconds = strtod(PQgetvalue(res, i, 8), NULL);
	}
}

int checkpoint_quarantine_list(PGconn *conn, const char *schema, const struct flow_ids *ids, bool open_only,
			       struct quarantine_entry **entries, int *n)
{
	*entries = NULL;
	*n = 0;
	const char *p[4] = { ids->source_id, ids->dataset_id, ids->group, open_only ? "t" : "f" };
	PGresult *res = query_schema(conn, schema, QUARANTINE_SQL, 4, p);
	if (!res)
		return -1;
	fill_quarantine(res, entries, n);
	PQclear(res);
	return 0;
}

int checkpoint_quarantine_add(PGconn *conn, const char *schema, const struct flow_ids *ids, uint32_t xid,
			      uint64_t commit_lsn, uint64_t stream_offset, const char *reason, const char *detail)
{
	char xid_text[16], lsn[LSN_FORMAT_LEN], off[24];
	snprintf(xid_text, sizeof xid_text, "%u", xid);
	snprintf(off, sizeof off, "%" PRIu64, stream_offset);
	lsn_format(commit_lsn, lsn);
	const char *p[8] = { ids->source_id, ids->dataset_id, ids->group, xid_text, lsn, off, reason, detail };
	/* A transaction already quarantined (replayed and failed again) goes
	 * back to quarantined with the new detail. */
	PGresult *res = query_schema(conn, schema,
				     "WITH again AS (UPDATE @.quarantine SET state = 'quarantined', reason = $7, detail = $8,"
				     "  updated_at = now() WHERE source_id = $1 AND dataset_id = $2 AND consumer_group = $3"
				     "  AND xid = $4 AND commit_lsn = $5 AND state <> 'resolved' RETURNING 1)"
				     " INSERT INTO @.quarantine (source_id, dataset_id, consumer_group, xid, commit_lsn,"
				     " stream_offset, reason, detail, state)"
				     " SELECT $1, $2, $3, $4, $5, $6, $7, $8, 'quarantined' WHERE NOT EXISTS (SELECT 1 FROM again)",
				     8, p);
	if (!res)
		return -1;
	PQclear(res);
	return 0;
}

int checkpoint_quarantine_replay_ready(PGconn *conn, const char *schema, const struct flow_ids *ids, uint32_t xid,
				       uint64_t commit_lsn)
{
	char xid_text[16], lsn[LSN_FORMAT_LEN];
	snprintf(xid_text, sizeof xid_text, "%u", xid);
	lsn_format(commit_lsn, lsn);
	const char *p[5] = { ids->source_id, ids->dataset_id, ids->group, xid_text, lsn };
	PGresult *res = query_schema(conn, schema,
				     "UPDATE @.quarantine SET state = 'replay_ready', updated_at = now()"
				     " WHERE source_id = $1 AND dataset_id = $2 AND consumer_group = $3"
				     " AND xid = $4 AND commit_lsn = $5 AND state = 'quarantined' RETURNING id",
				     5, p);
	if (!res)
		return -1;
	int n = PQntuples(res);
	PQclear(res);
	return n == 1 ? 0 : 1;
}

int checkpoint_table_watermarks(PGconn *conn, const char *schema, const struct flow_ids *ids, char ***relations,
				uint64_t **lsns, int *n)
{
	*relations = NULL;
	*lsns = NULL;
	*n = 0;
	const char *p[2] = { ids->source_id, ids->dataset_id };
	/* the newest copy of each table, whatever run made it */
	PGresult *res = query_schema(conn, schema,
				     "SELECT DISTINCT ON (relation) relation, watermark_lsn FROM @.snapshot_table_progress"
				     " WHERE source_id = $1 AND dataset_id = $2 AND state = 'copied' AND watermark_lsn IS NOT NULL"
				     " ORDER BY relation, updated_at DESC",
				     2, p);
	if (!res)
		return -1;
	*n = PQntuples(res);
	*relations = xcalloc(*n ? (size_t)*n : 1, sizeof **relations);
	*lsns = xcalloc(*n ? (size_t)*n : 1, sizeof **lsns);
	for (int i = 0; i < *n; i++) {
		(*relations)[i] = xstrdup(PQgetvalue(res, i, 0));
		lsn_parse(PQgetvalue(res, i, 1), &(*lsns)[i]);
	}
	PQclear(res);
	return 0;
}

/* ---- the applier's pipelined statements ---- */

char *checkpoint_quarantine_resolve_sql(PGconn *conn, const char *schema)
{
	return pgconn_schema_sql(conn, "UPDATE @.quarantine SET state = 'resolved', updated_at = now() WHERE id = $1", schema);
}

char *checkpoint_apply_update_sql(PGconn *conn, const char *schema)
{
	return pgconn_schema_sql(conn,
				 "UPDATE @.apply_checkpoint SET last_commit_lsn = $1, last_xid = $2, stream_offset = $3,"
				 " applied_through_lsn = $4, applied_transactions = $5, applied_changes = $6,"
				 " skipped_duplicates = $7, updated_at = now()"
				 " WHERE source_id = $8 AND dataset_id = $9 AND consumer_group = $10"
				 /* an error, not a row count: a COMMIT already sent after it must not commit */
				 " AND CASE WHEN source_id = $8 AND dataset_id = $9 AND consumer_group = $10 AND stream_offset <> $11"
				 /* the message names the row's column: never folded to a constant (and raised) at plan time */
				 " THEN ('the checkpoint is at stream offset ' || stream_offset || ', not at ' || $11"
				 " || ' where the batch before this one leaves it: that batch did not commit')::boolean ELSE true END",
				 schema);
}

char *checkpoint_apply_lock_sql(PGconn *conn, const char *schema)
{
	return pgconn_schema_sql(conn,
				 "SELECT 1 FROM @.apply_checkpoint"
				 " WHERE source_id = $1 AND dataset_id = $2 AND consumer_group = $3 FOR UPDATE",
				 schema);
}

void checkpoint_apply_update_params(const struct flow_ids *ids, const struct apply_checkpoint *prev,
				    const struct apply_checkpoint *cp, struct checkpoint_apply_params *out)
{
	snprintf(out->prev_stream_offset, sizeof out->prev_stream_offset, "%" PRIu64, prev->stream_offset);
	lsn_format(cp->last_commit_lsn, out->last_commit_lsn);
	snprintf(out->last_xid, sizeof out->last_xid, "%u", cp->last_xid);
	snprintf(out->stream_offset, sizeof out->stream_offset, "%" PRIu64, cp->stream_offset);
	lsn_format(cp->applied_through_lsn, out->applied_through_lsn);
	snprintf(out->applied_transactions, sizeof out->applied_transactions, "%" PRIu64, cp->applied_transactions);
	snprintf(out->applied_changes, sizeof out->applied_changes, "%" PRIu64, cp->applied_changes);
	snprintf(out->skipped_duplicates, sizeof out->skipped_duplicates, "%" PRIu64, cp->skipped_duplicates);
	const char *v[CHECKPOINT_APPLY_UPDATE_NPARAMS] = {
		out->last_commit_lsn, out->last_xid, out->stream_offset, out->applied_through_lsn, out->applied_transactions,
		out->applied_changes, out->skipped_duplicates, ids->source_id, ids->dataset_id, ids->group,
		out->prev_stream_offset,
	};
	memcpy(out->values, v, sizeof v);
}

/* ---- snapshot copies and handoff evidence ---- */

int checkpoint_progress_list(PGconn *conn, const char *schema, const struct flow_ids *ids, const char *run_id,
			     struct snapshot_progress **rows, int *n)
{
	*rows = NULL;
	*n = 0;
	const char *p[3] = { ids->source_id, ids->dataset_id, run_id };
	PGresult *res = query_schema(conn, schema,
				     "SELECT relation, state, copied_rows, watermark_lsn FROM @.snapshot_table_progress"
				     " WHERE source_id = $1 AND dataset_id = $2 AND run_id = $3",
				     3, p);
	if (!res)
		return -1;
	*n = PQntuples(res);
	*rows = xcalloc(*n ? (size_t)*n : 1, sizeof **rows);
	for (int i = 0; i < *n; i++) {
		struct snapshot_progress *r = &(*rows)[i];
		snprintf(r->relation, sizeof r->relation, "%s", PQgetvalue(res, i, 0));
		snprintf(r->state, sizeof r->state, "%s", PQgetvalue(res, i, 1));
		r->copied_rows = strtoull(PQgetvalue(res, i, 2), NULL, 10);
		r->has_watermark = !PQgetisnull(res, i, 3) && lsn_parse(PQgetvalue(res, i, 3), &r->watermark_lsn);
	}
	PQclear(res);
	return 0;
}

int checkpoint_progress_copied(PGconn *conn, const char *schema, const struct flow_ids *ids, const char *run_id,
			       const char *relation, uint64_t rows, uint64_t watermark_lsn, const char *fingerprint)
{
	char rows_text[24], lsn[LSN_FORMAT_LEN];
	snprintf(rows_text, sizeof rows_text, "%" PRIu64, rows);
	lsn_format(watermark_lsn, lsn);
	const char *p[7] = { ids->source_id, ids->dataset_id, run_id, relation, rows_text, lsn, fingerprint };
	PGresult *res = query_schema(conn, schema,
				     "INSERT INTO @.snapshot_table_progress (source_id, dataset_id, run_id, relation, state, copied_rows,"
				     " watermark_lsn, schema_fingerprint) VALUES ($1, $2, $3, $4, 'copied', $5, $6, $7)"
				     " ON CONFLICT (source_id, dataset_id, run_id, relation) DO UPDATE SET state = 'copied',"
				     " copied_rows = $5, watermark_lsn = $6, schema_fingerprint = $7, updated_at = now()",
				     7, p);
	if (!res)
		return -1;
	PQclear(res);
	return 0;
}

int checkpoint_progress_schema_changed(PGconn *conn, const char *schema, const struct flow_ids *ids,
				       const char *run_id, const char *relation)
{
	const char *p[4] = { ids->source_id, ids->dataset_id, run_id, relation };
	PGresult *res = query_schema(conn, schema,
				     "INSERT INTO @.snapshot_table_progress (source_id, dataset_id, run_id, relation, state)"
				     " VALUES ($1, $2, $3, $4, 'schema_changed') ON CONFLICT (source_id, dataset_id, run_id, relation)"
				     " DO UPDATE SET state = 'schema_changed', updated_at = now()",
				     4, p);
	if (!res)
		return -1;
	PQclear(res);
	return 0;
}

int checkpoint_progress_clear(PGconn *conn, const char *schema, const struct flow_ids *ids, const char *run_id)
{
	const char *p[3] = { ids->source_id, ids->dataset_id, run_id };
	PGresult *res = query_schema(conn, schema,
				     "DELETE FROM @.snapshot_table_progress WHERE source_id = $1 AND dataset_id = $2 AND run_id = $3",
				     3, p);
	if (!res)
		return -1;
	PQclear(res);
	res = query_schema(conn, schema,
			   "DELETE FROM @.snapshot_range_progress WHERE source_id = $1 AND dataset_id = $2 AND run_id = $3", 3, p);
	if (!res)
		return -1;
	PQclear(res);
	return 0;
}

int checkpoint_ranges_list(PGconn *conn, const char *schema, const struct flow_ids *ids, const char *run_id,
			   const char *relation, struct snapshot_range **ranges, int *n)
{
	*ranges = NULL;
	*n = 0;
	const char *p[4] = { ids->source_id, ids->dataset_id, run_id, relation };
	PGresult *res = query_schema(conn, schema,
				     "SELECT range_no, n_ranges, first_block, end_block, split_bytes, state, copied_rows,"
				     " content_hash, watermark_lsn, coalesce(partition, '') FROM @.snapshot_range_progress"
				     " WHERE source_id = $1 AND dataset_id = $2 AND run_id = $3 AND relation = $4 ORDER BY range_no",
				     4, p);
	if (!res)
		return -1;
	*n = PQntuples(res);
	*ranges = xcalloc(*n ? (size_t)*n : 1, sizeof **ranges);
	for (int i = 0; i < *n; i++) {
		struct snapshot_range *r = &(*ranges)[i];
		r->range_no = atoi(PQgetvalue(res, i, 0));
		r->n_ranges = atoi(PQgetvalue(res, i, 1));
		r->first_block = strtoull(PQgetvalue(res, i, 2), NULL, 10);
		r->open_end = PQgetisnull(res, i, 3);
		r->end_block = r->open_end ? 0 : strtoull(PQgetvalue(res, i, 3), NULL, 10);
		r->split_bytes = strtoull(PQgetvalue(res, i, 4), NULL, 10);
		r->copied = strcmp(PQgetvalue(res, i, 5), "copied") == 0;
		r->copied_rows = strtoull(PQgetvalue(res, i, 6), NULL, 10);
		snprintf(r->content_hash, sizeof r->content_hash, "%s", PQgetvalue(res, i, 7));
		r->has_watermark = !PQgetisnull(res, i, 8) && lsn_parse(PQgetvalue(res, i, 8), &r->watermark_lsn);
		snprintf(r->partition, sizeof r->partition, "%s", PQgetvalue(res, i, 9));
	}
	PQclear(res);
	return 0;
}

int checkpoint_ranges_plan(PGconn *conn, const char *schema, const struct flow_ids *ids, const char *run_id,
			   const char *relation, const struct snapshot_range *ranges, int n)
{
	const char *p[4] = { ids->source_id, ids->dataset_id, run_id, relation };
	PGresult *res = query_schema(conn, schema,
				     "DELETE FROM @.snapshot_range_progress"
				     " WHERE source_id = $1 AND dataset_id = $2 AND run_id = $3 AND relation = $4",
				     4, p);
	if (!res)
		return -1;
	PQclear(res);
	for (int i = 0; i < n; i++) {
		char no[16], count[16], first[24], end[24], split[24];
		snprintf(no, sizeof no, "%d", ranges[i].range_no);
		snprintf(count, sizeof count, "%d", ranges[i].n_ranges);
		snprintf(first, sizeof first, "%" PRIu64, ranges[i].first_block);
		snprintf(end, sizeof end, "%" PRIu64, ranges[i].end_block);
		snprintf(split, sizeof split, "%" PRIu64, ranges[i].split_bytes);
		const char *q[10] = { ids->source_id, ids->dataset_id, run_id, relation, no, count, first,
				      ranges[i].open_end ? NULL : end, split,
				      ranges[i].partition[0] ? ranges[i].partition : NULL };
		res = query_schema(conn, schema,
				   "INSERT INTO @.snapshot_range_progress (source_id, dataset_id, run_id, relation, range_no,"
				   " n_ranges, first_block, end_block, split_bytes, state, partition)"
				   " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'planned', $10)",
				   10, q);
		if (!res)
			return -1;
		PQclear(res);
	}
	return 0;
}

int checkpoint_range_copied(PGconn *conn, const char *schema, const struct flow_ids *ids, const char *run_id,
			    const char *relation, int range_no, uint64_t rows, const char *content_hash,
			    uint64_t watermark_lsn)
{
	char no[16], rows_text[24], lsn[LSN_FORMAT_LEN];
	snprintf(no, sizeof no, "%d", range_no);
	snprintf(rows_text, sizeof rows_text, "%" PRIu64, rows);
	lsn_format(watermark_lsn, lsn);
	const char *p[8] = { ids->source_id, ids->dataset_id, run_id, relation, no, rows_text, content_hash, lsn };
	PGresult *res = query_schema(conn, schema,
				     "UPDATE @.snapshot_range_progress SET state = 'copied', copied_rows = $6, content_hash = $7,"
				     " watermark_lsn = $8, updated_at = now()"
				     " WHERE source_id = $1 AND dataset_id = $2 AND run_id = $3 AND relation = $4 AND range_no = $5"
				     " AND state = 'planned'",
				     8, p);
	if (!res)
		return -1;
	bool one = strcmp(PQcmdTuples(res), "1") == 0;
	PQclear(res);
	if (!one) {
		log_error("snapshot range %d of %s: no planned progress row to mark copied", range_no, relation);
		return -1;
	}
	return 0;
}

int checkpoint_handoff_record_run(PGconn *conn, const char *schema, const struct flow_ids *ids, const char *run_id)
{
	const char *p[3] = { ids->source_id, ids->dataset_id, run_id };
	PGresult *res = query_schema(conn, schema,
				     "INSERT INTO @.snapshot_handoff_events (source_id, dataset_id, run_id, relation, copied_rows,"
				     " source_watermark) SELECT source_id, dataset_id, run_id, relation, copied_rows, watermark_lsn"
				     " FROM @.snapshot_table_progress WHERE source_id = $1 AND dataset_id = $2 AND run_id = $3"
				     " AND state = 'copied' AND NOT EXISTS (SELECT 1 FROM @.snapshot_handoff_events e"
				     "  WHERE e.source_id = $1 AND e.dataset_id = $2 AND e.run_id = $3"
				     "  AND e.relation = snapshot_table_progress.relation"
				     "  AND e.source_watermark = snapshot_table_progress.watermark_lsn)",
				     3, p);
	if (!res)
		return -1;
	PQclear(res);
	return 0;
}

int checkpoint_handoff_record_table(PGconn *conn, const char *schema, const struct flow_ids *ids,
				    const char *run_id, const char *relation)
{
	const char *p[4] = { ids->source_id, ids->dataset_id, run_id, relation };
	PGresult *res = query_schema(conn, schema,
				     "INSERT INTO @.snapshot_handoff_events (source_id, dataset_id, run_id, relation,"
				     " copied_rows, source_watermark) SELECT source_id, dataset_id, run_id, relation, copied_rows,"
				     " watermark_lsn FROM @.snapshot_table_progress WHERE source_id = $1 AND dataset_id = $2"
				     " AND run_id = $3 AND relation = $4",
				     4, p);
	if (!res)
		return -1;
	PQclear(res);
	return 0;
}

int checkpoint_repair_record(PGconn *conn, const char *schema, const struct flow_ids *ids, const struct repair_evidence *e)
{
	char lsn[LSN_FORMAT_LEN], from[LSN_FORMAT_LEN], deleted[24], inserted[24];
	lsn_format(e->source_lsn, lsn);
	lsn_format(e->verify_compared_at, from);
	snprintf(deleted, sizeof deleted, "%" PRIu64, e->rows_deleted);
	snprintf(inserted, sizeof inserted, "%" PRIu64, e->rows_inserted);
	const char *p[10] = { ids->source_id, ids->dataset_id, e->run_id, e->relation, e->key_columns_json, e->keys_json,
			      deleted, inserted, lsn, e->verify_compared_at ? from : NULL };
	PGresult *res = query_schema(conn, schema,
				     "INSERT INTO @.repairs (source_id, dataset_id, run_id, relation, key_columns, keys,"
				     " rows_deleted, rows_inserted, source_lsn, verify_compared_at)"
				     " VALUES ($1, $2, $3, $4, $5::jsonb, $6::jsonb, $7, $8, $9::pg_lsn, $10::pg_lsn)",
				     10, p);
	if (!res)
		return -1;
	PQclear(res);
	return 0;
}

int checkpoint_handoff_count(PGconn *conn, const char *schema, const struct flow_ids *ids, const char *run_id,
			     int64_t *tables)
{
	const char *p[3] = { ids->source_id, ids->dataset_id, run_id };
	PGresult *res = query_schema(conn, schema,
				     "SELECT count(DISTINCT relation) FROM @.snapshot_handoff_events"
				     " WHERE source_id = $1 AND dataset_id = $2 AND run_id = $3",
				     3, p);
	if (!res)
		return -1;
	*tables = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return 0;
}

/* ---- observers ---- */

/* A read that logs nothing: on failure, error says what could not be
 * read and why (the server's message). */
static PGresult *observe(PGconn *conn, const char *schema, const char *sql, int n, const char *const *params,
			 const char *what, char *error, size_t error_len)
{
	char *text = schema ? pgconn_schema_sql(conn, sql, schema) : xstrdup(sql);
	PGresult *res = PQexecParams(conn, text, n, NULL, params, NULL, NULL, 0);
	free(text);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		snprintf(error, error_len, "cannot read %s: %s", what, PQerrorMessage(conn));
		PQclear(res);
		return NULL;
	}
	return res;
}

int checkpoint_schema_present(PGconn *conn, const char *schema, bool *present, char *error, size_t error_len)
{
	*present = false;
	const char *p[1] = { schema };
	PGresult *res = observe(conn, NULL,
				"SELECT to_regclass(quote_ident($1) || '.apply_checkpoint') IS NOT NULL"
				" AND to_regclass(quote_ident($1) || '.quarantine') IS NOT NULL"
				" AND to_regclass(quote_ident($1) || '.snapshot_runs') IS NOT NULL",
				1, p, "the checkpoint schema", error, error_len);
	if (!res)
		return -1;
	*present = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	return 0;
}

int checkpoint_observe(PGconn *conn, const char *schema, const struct flow_ids *ids, struct checkpoint_observed *out,
		       char *error, size_t error_len)
{
	memset(out, 0, sizeof *out);
	const char *p[3] = { ids->source_id, ids->dataset_id, ids->group };
	PGresult *res = observe(conn, schema,
				"SELECT last_commit_lsn, applied_through_lsn, stream_offset, last_xid, applied_transactions,"
				" applied_changes, skipped_duplicates,"
				" to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'),"
				" extract(epoch FROM now() - updated_at)"
				" FROM @.apply_checkpoint WHERE source_id = $1 AND dataset_id = $2 AND consumer_group = $3",
				3, p, "the apply checkpoint", error, error_len);
	if (!res)
		return -1;
	out->exists = PQntuples(res) == 1;
	if (out->exists) {
		struct apply_checkpoint *cp = &out->cp;
		lsn_parse(PQgetvalue(res, 0, 0), &cp->last_commit_lsn);
		lsn_parse(PQgetvalue(res, 0, 1), &cp->applied_through_lsn);
		cp->stream_offset = strtoull(PQgetvalue(res, 0, 2), NULL, 10);
		cp->last_xid = (uint32_t)strtoull(PQgetvalue(res, 0, 3), NULL, 10);
		cp->applied_transactions = strtoull(PQgetvalue(res, 0, 4), NULL, 10);
		cp->applied_changes = strtoull(PQgetvalue(res, 0, 5), NULL, 10);
		cp->skipped_duplicates = strtoull(PQgetvalue(res, 0, 6), NULL, 10);
		snprintf(out->updated_at, sizeof out->updated_at, "%s", PQgetvalue(res, 0, 7));
		out->age_seconds = strtod(PQgetvalue(res, 0, 8), NULL);
	}
	PQclear(res);
	return 0;
}

int checkpoint_quarantine_observe(PGconn *conn, const char *schema, const struct flow_ids *ids,
				  struct quarantine_entry **entries, int *n, char *error, size_t error_len)
{
	*entries = NULL;
	*n = 0;
	const char *p[4] = { ids->source_id, ids->dataset_id, ids->group, "t" };
	PGresult *res = observe(conn, schema, QUARANTINE_SQL, 4, p, "the quarantine", error, error_len);
	if (!res)
		return -1;
	fill_quarantine(res, entries, n);
	PQclear(res);
	return 0;
}
