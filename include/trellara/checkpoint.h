/*
 * checkpoint.h - the checkpoint schema in the target (DESIGN §5,
 * trellara(7)): versioned, idempotent migrations under an advisory lock,
 * and the statements every program runs against it.  No program writes
 * SQL against the schema: this module and runs.c are the only places it
 * is written, one module per table family:
 *
 *   checkpoint.c  the migrations (every table's DDL); apply_checkpoint,
 *                 quarantine, source_identity, apply_fence (the fences of
 *                 verify and reseed); snapshot_table_progress (per-table
 *                 copies and their watermarks) and snapshot_handoff_events
 *   runs.c        snapshot_runs, moved along the run state machine (runs.h)
 *   cutover.c     cutover, moved along the cutover's steps (cutover.h)
 *
 * The applier executes two of its statements pipelined, inside its own
 * batches: for those this module hands out the SQL text and documents the
 * parameters (checkpoint_apply_update_sql, checkpoint_quarantine_resolve_sql).
 *
 * Errors: every function logs its own failure and returns -1, except the
 * observers (checkpoint_observe and the other *_observe / schema_present
 * functions, used by trellara-status): they log nothing and describe the
 * failure in the caller's error buffer instead, since status reports it.
 *
 * Identifiers (the schema name) are quoted with PQescapeIdentifier;
 * values are always parameters.
 */
#ifndef TRELLARA_CHECKPOINT_H
#define TRELLARA_CHECKPOINT_H

#include "trellara/apply_state.h"
#include "trellara/lsn.h"

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CHECKPOINT_SCHEMA_VERSION 6

/* The SQLSTATEs its expect_one() raises: apply_core.h. */

/* Create or upgrade the schema (idempotent; concurrent callers serialise
 * on an advisory lock). */
int checkpoint_migrate(PGconn *conn, const char *schema);

/* Reads (creating a zero row if absent) the checkpoint of ids. */
int checkpoint_load(PGconn *conn, const char *schema, const struct flow_ids *ids, struct apply_checkpoint *cp);

/* Binds the checkpoint of ids to a stream instance: its id, the slot it
 * follows, the source system and timeline.  reset_offset: the offsets
 * are the new stream's from now on (stream_offset back to 0); the LSNs
 * (dedup) are kept. */
int checkpoint_bind_stream(PGconn *conn, const char *schema, const struct flow_ids *ids, const char *stream_id,
			   const char *slot_name, const char *system_identifier, uint32_t timeline,
			   bool reset_offset);

/* Records the source identity, or fails (returns 1, logged) when the
 * schema already knows source_id as another system or database. */
int checkpoint_check_source_identity(PGconn *conn, const char *schema, const char *source_id,
				     const char *system_identifier, const char *database);

/* Quarantined (or replay_ready) entries of the flow, oldest first;
 * *entries is newly allocated. */
int checkpoint_quarantine_list(PGconn *conn, const char *schema, const struct flow_ids *ids, bool open_only,
			       struct quarantine_entry **entries, int *n);
int checkpoint_quarantine_add(PGconn *conn, const char *schema, const struct flow_ids *ids, uint32_t xid,
			      uint64_t commit_lsn, uint64_t stream_offset, const char *reason, const char *detail);
/* quarantined -> replay_ready for exactly (xid, commit_lsn); returns 1
 * when no such quarantined transaction exists (nothing changed). */
int checkpoint_quarantine_replay_ready(PGconn *conn, const char *schema, const struct flow_ids *ids, uint32_t xid,
				       uint64_t commit_lsn);

/* The UPDATE that resolves a replayed quarantined transaction, for the
 * applier to run (pipelined) in the target transaction that applies it.
 * One parameter: $1 the quarantine entry's id (decimal text).  Newly
 * allocated. */
char *checkpoint_quarantine_resolve_sql(PGconn *conn, const char *schema);

/* The UPDATE of the apply checkpoint that the applier runs (pipelined) at
 * the end of each batch, before COMMIT, after checkpoint_apply_lock_sql().
 * Parameters, in this order:
 *   $1 last_commit_lsn (X/X)   $2 last_xid           $3 stream_offset
 *   $4 applied_through_lsn     $5 applied_transactions
 *   $6 applied_changes         $7 skipped_duplicates
 *   $8 source_id   $9 dataset_id   $10 consumer_group
 *   $11 the stream_offset the row must have (the previous batch's): when
 *       the batch before did not commit, the statement fails (SQLSTATE
 *       22P02, naming it), so that a COMMIT sent after it rolls back
 * checkpoint_apply_update_params() formats them from a checkpoint.
 * Newly allocated. */
char *checkpoint_apply_update_sql(PGconn *conn, const char *schema);
/* SELECT … FOR UPDATE of the checkpoint row ($1 source_id, $2 dataset_id,
 * $3 consumer_group: the last three of the update's parameters): waits
 * until a transaction that wrote the row before committed or rolled back,
 * so that the update then reads the row as it left it (commit order). */
char *checkpoint_apply_lock_sql(PGconn *conn, const char *schema);

#define CHECKPOINT_APPLY_UPDATE_NPARAMS 11

struct checkpoint_apply_params {
	const char *values[CHECKPOINT_APPLY_UPDATE_NPARAMS]; /* point into the buffers below and into ids */
	char last_commit_lsn[LSN_FORMAT_LEN], last_xid[16], stream_offset[24], applied_through_lsn[LSN_FORMAT_LEN];
	char applied_transactions[24], applied_changes[24], skipped_duplicates[24], prev_stream_offset[24];
};

/* The parameters of checkpoint_apply_update_sql() for writing cp over
 * prev as the checkpoint of ids (the stream binding columns are not
 * written).  out->values stays valid while out and ids do; values + 7
 * are the lock's parameters. */
void checkpoint_apply_update_params(const struct flow_ids *ids, const struct apply_checkpoint *prev,
				    const struct apply_checkpoint *cp, struct checkpoint_apply_params *out);

/* Per-table watermark LSNs of the latest snapshot run (DESIGN §6):
 * parallel arrays "schema.table" -> LSN, newly allocated. */
int checkpoint_table_watermarks(PGconn *conn, const char *schema, const struct flow_ids *ids, char ***relations,
				uint64_t **lsns, int *n);

/* The fence (DESIGN §9): 0 and *present=false when none is set. */
int checkpoint_fence_get(PGconn *conn, const char *schema, const struct flow_ids *ids, bool *present,
			 uint64_t *fence_lsn, char *state, size_t state_len);
/* Marks held the fence that stands at fence_lsn, state requested: only
 * that one (*marked false otherwise: verify moved or released it after
 * applyd read it, and applyd must read it again, never hold for a fence
 * it did not see). */
int checkpoint_fence_mark_held(PGconn *conn, const char *schema, const struct flow_ids *ids, uint64_t fence_lsn,
			       uint64_t applied_lsn, bool *marked);
/* Sets the fence of the flow at fence_lsn (state requested), recording
 * who asked; *mine is false when a fence is set already (nothing changed).
 * A fence requested by FENCE_BY_VERIFY stands only while the session of
 * conn lives (it holds an advisory lock until checkpoint_fence_release or
 * its end): once the session is gone, checkpoint_fence_get no longer
 * sees the fence and the next request replaces it, so a verify that
 * vanished (killed, its connection lost) cannot hold the applier.  Any
 * other fence stands until it is released. */
#define FENCE_BY_VERIFY "verify"
int checkpoint_fence_request(PGconn *conn, const char *schema, const struct flow_ids *ids, uint64_t fence_lsn,
			     const char *requested_by, bool *mine);
/* Moves the fence that requested_by set to fence_lsn (state requested
 * again): an applier held at the old fence is released towards the new
 * one and holds there.  *moved is false when no such fence is set. */
int checkpoint_fence_move(PGconn *conn, const char *schema, const struct flow_ids *ids, uint64_t fence_lsn,
			  const char *requested_by, bool *moved);
/* Removes the fence of the flow: only one requested_by set, or (NULL)
 * whoever set it. */
int checkpoint_fence_release(PGconn *conn, const char *schema, const struct flow_ids *ids, const char *requested_by);

struct fence_progress {
	bool fence_present;   /* the fence row exists */
	bool has_checkpoint;  /* the flow and group have an apply checkpoint */
	bool before;          /* last_commit_lsn < fence_lsn: nothing at or past the fence applied */
	bool reached;         /* applied_through_lsn >= fence_lsn, or the applier holds */
};

/* Where the applier of ids stands against the flow's fence. */
int checkpoint_fence_progress(PGconn *conn, const char *schema, const struct flow_ids *ids,
			      struct fence_progress *out);

/* ---- snapshot copies and handoff evidence (the run itself: runs.h) ---- */

struct snapshot_progress {
	char relation[300]; /* "schema.table" */
	char state[24];     /* copied, schema_changed */
	uint64_t copied_rows;
	bool has_watermark;
	uint64_t watermark_lsn;
};

/* The progress rows of one run of the flow (any state), in no particular
 * order; *rows is newly allocated. */
int checkpoint_progress_list(PGconn *conn, const char *schema, const struct flow_ids *ids, const char *run_id,
			     struct snapshot_progress **rows, int *n);
/* Records relation as copied: rows at watermark_lsn, with its schema
 * fingerprint.  Runs in the caller's transaction, so that it commits with
 * the copied data. */
int checkpoint_progress_copied(PGconn *conn, const char *schema, const struct flow_ids *ids, const char *run_id,
			       const char *relation, uint64_t rows, uint64_t watermark_lsn, const char *fingerprint);
/* Records that relation's schema changed during its copy (not handed off). */
int checkpoint_progress_schema_changed(PGconn *conn, const char *schema, const struct flow_ids *ids,
				       const char *run_id, const char *relation);
/* Forgets every table copy of the run, and its ranges (a forced re-copy). */
int checkpoint_progress_clear(PGconn *conn, const char *schema, const struct flow_ids *ids, const char *run_id);

/* One range of a split table's copy (snapshot_range_progress): blocks
 * [first_block, end_block), or from first_block on when open_end, of the
 * table, or of one leaf partition of a partitioned table. */
struct snapshot_range {
	int range_no;            /* 1..n_ranges */
	int n_ranges;
	char partition[272];     /* the leaf, "schema"."name" quoted as the source's format('%I.%I') gives it; "": the table itself */
	char filenode[24];       /* pg_relation_filenode of what it reads (the table or its leaf) at the plan (not stored) */
	uint64_t first_block, end_block;
	bool open_end;
	uint64_t split_bytes;    /* snapshot.split_bytes the plan was made with */
	bool copied;
	uint64_t copied_rows;
	char content_hash[40];   /* of the range's COPY bytes, when copied */
	bool has_watermark;
	uint64_t watermark_lsn;
};

/* The ranges of relation in the run, by range_no; *ranges newly allocated. */
int checkpoint_ranges_list(PGconn *conn, const char *schema, const struct flow_ids *ids, const char *run_id,
			   const char *relation, struct snapshot_range **ranges, int *n);
/* Replaces relation's ranges in the run by these, all planned (n 0:
 * forgets them).  In the caller's transaction. */
int checkpoint_ranges_plan(PGconn *conn, const char *schema, const struct flow_ids *ids, const char *run_id,
			   const char *relation, const struct snapshot_range *ranges, int n);
/* Marks a planned range copied, in the caller's transaction (the one of
 * its rows); -1 (logged) when no planned row matched. */
int checkpoint_range_copied(PGconn *conn, const char *schema, const struct flow_ids *ids, const char *run_id,
			    const char *relation, int range_no, uint64_t rows, const char *content_hash,
			    uint64_t watermark_lsn);

/* One immutable handoff event for each copied table of the run that has
 * none yet at its current watermark. */
int checkpoint_handoff_record_run(PGconn *conn, const char *schema, const struct flow_ids *ids, const char *run_id);
/* One more handoff event for relation of the run (a reseed's new copy). */
int checkpoint_handoff_record_table(PGconn *conn, const char *schema, const struct flow_ids *ids,
				    const char *run_id, const char *relation);
/* A repair applied by trellara-repair-plan, recorded in its transaction
 * (the repairs table, migration 5). */
struct repair_evidence {
	const char *run_id;           /* the flow's run, or NULL */
	const char *relation;         /* "schema.table" */
	const char *key_columns_json; /* ["id"] */
	const char *keys_json;        /* [{"kind": "...", "key": ["1"]}, ...] */
	uint64_t rows_deleted, rows_inserted;
	uint64_t source_lsn;          /* the snapshot the rows were copied at (the fence) */
	uint64_t verify_compared_at;  /* the verify whose result was repaired (0: unknown) */
};
int checkpoint_repair_record(PGconn *conn, const char *schema, const struct flow_ids *ids, const struct repair_evidence *e);

/* How many distinct tables of the run have a handoff event. */
int checkpoint_handoff_count(PGconn *conn, const char *schema, const struct flow_ids *ids, const char *run_id,
			     int64_t *tables);

/* ---- observers: read-only, never create anything, never log ---- */

/* Whether the schema's apply_checkpoint, quarantine and snapshot_runs
 * tables exist. */
int checkpoint_schema_present(PGconn *conn, const char *schema, bool *present, char *error, size_t error_len);

struct checkpoint_observed {
	bool exists;               /* the flow and group have a checkpoint row */
	struct apply_checkpoint cp; /* the counters and positions (not the stream binding) */
	char updated_at[40];       /* UTC, with microseconds */
	double age_seconds;        /* now() - updated_at, on the server */
};

/* The checkpoint of ids as it is (no row is created). */
int checkpoint_observe(PGconn *conn, const char *schema, const struct flow_ids *ids, struct checkpoint_observed *out,
		       char *error, size_t error_len);
/* The open (quarantined or replay_ready) entries of ids, oldest first;
 * *entries is newly allocated. */
int checkpoint_quarantine_observe(PGconn *conn, const char *schema, const struct flow_ids *ids,
				  struct quarantine_entry **entries, int *n, char *error, size_t error_len);

#endif
