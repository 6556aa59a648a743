/*
 * cutover.h - the checkpoint schema's cutover table (migration 3,
 * trellara(7)): one row per flow, moved along the steps of cutplan.h by
 * trellara-cutover, read by trellara-status.  The only module that writes
 * SQL against it.
 *
 * Every write is one statement, committed on its own (autocommit), so
 * that the row says what was done before the next step starts: a step
 * done and not yet recorded is done again on the next run, and each step
 * is idempotent.
 *
 * Errors: cutover_load() and the writers log their failure and return
 * -1; cutover_observe() logs nothing and describes it in the caller's
 * buffer (status reports it).  Values are parameters; the schema name is
 * quoted (pgconn_schema_sql).
 */
#ifndef TRELLARA_CUTOVER_H
#define TRELLARA_CUTOVER_H

#include "trellara/cutplan.h"

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cutover_row {
	bool exists;
	enum cutplan_state state;
	bool lock_source;
	enum cutplan_lock source_lock;
	char source_database[128];
	bool has_previous_read_only; /* the database's own default_transaction_read_only before the lock */
	char previous_read_only[64];
	uint64_t sequence_margin;
	bool has_final_lsn, has_verified_at_lsn;
	uint64_t final_lsn, verified_at_lsn;
	char verify_result[16]; /* "CONVERGED", "DIVERGED", "" */
	char slot_name[128];
	char failure_reason[512];
	char started_at[40], completed_at[40], updated_at[40]; /* UTC; "" when NULL */
};

/* A change of the row: NULL or false leaves a column as it is. */
struct cutover_change {
	const char *state;       /* cutplan_state_name() */
	const char *source_lock; /* cutplan_lock_name() */
	const char *source_database;
	bool set_previous_read_only; /* write previous_read_only (NULL: the database had none) */
	const char *previous_read_only;
	bool set_final_lsn, set_verified_at_lsn;
	uint64_t final_lsn, verified_at_lsn;
	const char *sequences_json;
	const char *verify_result;
	const char *failure_reason;
};

/* The row of the flow (row->exists false without one). */
int cutover_load(PGconn *conn, const char *schema, const char *source_id, const char *dataset_id,
		 struct cutover_row *row);
/* Starts a cutover: a new row, or one aborted or failed before made new
 * (a lock still in place, kept with --keep-locked, stays recorded).
 * Returns 1 (logged) when a cutover of the flow is in progress or done. */
int cutover_start(PGconn *conn, const char *schema, const char *source_id, const char *dataset_id, bool lock_source,
		  uint64_t sequence_margin, const char *slot_name);
/* Applies c; the step's time column (locked_at, unlocked_at,
 * caught_up_at, verified_at, completed_at) is set with its state. */
int cutover_update(PGconn *conn, const char *schema, const char *source_id, const char *dataset_id,
		   const struct cutover_change *c);

/* status: the row as it is; *row->exists false when there is none or the
 * schema predates the table (it is never created here). */
int cutover_observe(PGconn *conn, const char *schema, const char *source_id, const char *dataset_id,
		    struct cutover_row *row, char *error, size_t error_len);

#endif
