/*
 * model_target.h - the simulator's target database: the apply engine's
 * apply_target_ops over a sim_db, with the checkpoint row, quarantine
 * entries and fence row of the checkpoint schema, transactions that
 * commit or roll back atomically, and a connection that can die before
 * or after COMMIT (the outcome then ambiguous to the applier).
 *
 * Statements are applied as PostgreSQL would run the planner's SQL: rows
 * matched by the key columns the engine chose (plan_relation.key), an
 * update or delete that matches no row fails with TR001 (expect_one),
 * an insert on a taken key with 23505, a table that does not exist with
 * 42P01; unchanged-TOAST values keep the old ones.  Keyless (identity
 * full without a key) tables are outside the model: a change to one
 * fails with TR003.
 */
#ifndef TRELLARA_SIM_MODEL_TARGET_H
#define TRELLARA_SIM_MODEL_TARGET_H

#include "sim_db.h"

#include "trellara/apply_engine.h"

#include <stdbool.h>
#include <stdint.h>

enum model_commit_fault {
	MODEL_COMMIT_OK,
	MODEL_COMMIT_LOST_BEFORE, /* the connection dies before COMMIT reaches the server: rolled back */
	MODEL_COMMIT_LOST_AFTER,  /* dies after the server committed: committed, the applier sees an error */
	MODEL_COMMIT_TRANSIENT,   /* COMMIT fails with a transient SQLSTATE (40001): rolled back */
};

struct model_target {
	struct sim_db *db;          /* owned: committed state */
	struct apply_checkpoint cp; /* committed checkpoint row */
	struct quarantine_entry *quarantine; /* owned: every entry ever added */
	int n_quarantine;
	int64_t next_quarantine_id;
	bool fence_present;
	uint64_t fence_lsn;
	char fence_state[16];       /* "requested" / "held" */
	uint64_t fence_held_applied_lsn;
	/* per table "schema.table": snapshot watermarks (reload_tables) */
	char **watermark_tables;    /* owned */
	uint64_t *watermark_lsns;   /* owned */
	size_t n_watermarks;
	/* the session */
	bool connected;
	bool in_txn;
	struct sim_db *work;        /* owned: the open transaction's state */
	struct apply_checkpoint work_cp;
	bool work_cp_written;
	int64_t *work_resolved;     /* owned: quarantine ids resolved in it */
	size_t n_work_resolved;
	struct apply_target_error error;
	/* faults the simulator arms (each fires once) */
	enum model_commit_fault next_commit_fault;
	uint64_t fail_change_at;    /* fail the nth change from now (1-based; 0 never) */
	char fail_change_sqlstate[6];
	bool fail_change_connection;
	/* what happened */
	uint64_t commits, rollbacks, changes_applied, ambiguous_commits;
	/* called after every commit that reached the database (the
	 * simulator's invariant checks); may be NULL */
	void (*on_commit)(void *ctx, struct model_target *t);
	void *on_commit_ctx;
	/* table definitions for reload_tables: names and key column names */
	struct apply_tables defs;   /* owned: copied by reload_tables */
};

extern const struct apply_target_ops model_target_ops;

/* defs: the flow's tables (names and key columns); db: the tables
 * created, empty (owned by the target from now on). */
void model_target_init(struct model_target *t, struct sim_db *db, const struct apply_tables *defs);
void model_target_free(struct model_target *t);
/* A new session (the applier connects): whatever was open is gone. */
void model_target_connect(struct model_target *t);
/* The session dies (the applier's process was killed, or the network):
 * an open transaction is rolled back. */
void model_target_disconnect(struct model_target *t);
/* Records a snapshot watermark for table (reload_tables returns it). */
void model_target_set_watermark(struct model_target *t, const char *table, uint64_t lsn);
/* The operator: quarantined -> replay_ready for (xid, commit_lsn); 1: none. */
int model_target_replay_ready(struct model_target *t, uint32_t xid, uint64_t commit_lsn);
/* Entries in state ("quarantined", "replay_ready", "resolved"). */
int model_target_count_quarantine(const struct model_target *t, const char *state);
/* Copies the entries not yet resolved (for the engine at connect). */
int model_target_open_entries(const struct model_target *t, struct quarantine_entry **entries, bool *any_quarantined);
/* The fence, as verify sets and releases it. */
void model_target_fence_set(struct model_target *t, uint64_t lsn);
void model_target_fence_release(struct model_target *t);

#endif
