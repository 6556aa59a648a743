/*
 * runs.h - snapshot runs as rows of the checkpoint schema's
 * snapshot_runs, moved only along the run state machine (runstate.h).
 * Every move re-reads the row under a row lock and checks the transition
 * with the evidence the row then holds.  Functions log failures, return -1
 * (runs_observe, for trellara-status, describes them in error instead).
 *
 * This module is the only place SQL against snapshot_runs is written; the
 * other tables of the checkpoint schema (the runs' per-table progress and
 * handoff evidence among them) belong to checkpoint.h.
 */
#ifndef TRELLARA_RUNS_H
#define TRELLARA_RUNS_H

#include "trellara/runstate.h"

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct run_row {
	bool exists;
	char run_id[128];
	enum run_state state;
	char slot_name[128];
	uint64_t consistent_lsn;
	char snapshot_name[128];
	char current_relation[256];
	char failure_reason[512];
	char updated_at[40];
};

/* run_id NULL: the flow's most recently updated run. */
int runs_load(PGconn *conn, const char *schema, const char *source_id, const char *dataset_id, const char *run_id,
	      struct run_row *row);
/* The flow's most recently updated run, read-only and logging nothing:
 * a failure is described in error. */
int runs_observe(PGconn *conn, const char *schema, const char *source_id, const char *dataset_id, struct run_row *row,
		 char *error, size_t error_len);
int runs_insert(PGconn *conn, const char *schema, const char *source_id, const char *dataset_id, const char *run_id);
/* Moves the run to state `to`, recording what is given (NULL / 0 =
 * unchanged).  failure_reason is required for failed_recoverable.
 * Returns 1 (logged) when the state machine refuses the move. */
int runs_move(PGconn *conn, const char *schema, const char *source_id, const char *dataset_id, const char *run_id,
	      enum run_state to, const char *slot_name, uint64_t consistent_lsn, const char *snapshot_name,
	      const char *current_relation, const char *failure_reason, bool new_evidence);

/* Whether the run is failed_recoverable and a repair (trellara-repair-plan
 * --apply, the checkpoint schema's repairs table) was recorded since it
 * failed: the evidence runs_move() asks for failed_recoverable -> verified. */
int runs_repaired_since_failure(PGconn *conn, const char *schema, const char *source_id, const char *dataset_id,
				const char *run_id, bool *repaired);

#endif
