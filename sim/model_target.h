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
 *
 * Sessions.  The engine's operations take a session (model_target_session;
 * session 0 is the single connection's).  With one session a transaction
 * works on a copy of the committed state taken at BEGIN and publishes it
 * whole at COMMIT.  With more (apply.workers > 1) each transaction reads
 * committed state as of each statement (READ COMMITTED: a key is taken
 * from the committed state when the transaction first touches it) plus
 * its own writes, and its COMMIT publishes only the keys it wrote (a
 * TRUNCATE: the whole table).  Two open transactions writing one key is
 * a violation of what the engine's dependency tracker must guarantee
 * (model_target.violation: parallel_batches_write_disjoint_rows).
 *
 * The checkpoint row is locked by write_checkpoint in call order (a lock
 * queue); the update matches only when the committed row's stream_offset
 * is prev's at the moment the lock is granted, else its row count is 0
 * (TR001 when the results are read), and the transaction stays open: a
 * COMMIT sent after it commits the transaction's rows without the
 * checkpoint, as PostgreSQL would.  A submitted COMMIT (commit_submit)
 * takes effect when its results are collected, after every submitted
 * transaction ahead of it in the lock queue; waiting there on a
 * transaction that has not sent its COMMIT is a violation
 * (checkpoint_lock_waits_on_idle_transaction: with the checkpoint
 * lock's lock_timeout 0 the real target would wait forever).  A
 * disconnect rolls back every open transaction; each submitted COMMIT
 * not yet collected commits or not at the model's seeded choice, in lock
 * queue order, the checkpoint's match still applied.
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

#include "sim_rng.h"

#define MODEL_TARGET_MAX_SESSIONS 16

struct model_target;

/* A row's key in a table (values NULL: SQL NULL). */
struct model_key {
	char *table;
	char **values;
	uint16_t n;
};

/* One connection to the target (the engine's ops take one). */
struct model_session {
	struct model_target *t;
	int index;
	bool connected;
	bool in_txn;                /* open and not failed */
	struct sim_db *work;        /* owned: the open transaction's state */
	struct apply_checkpoint work_cp;
	bool work_cp_written;
	int64_t *work_resolved;     /* owned: quarantine ids resolved in it */
	size_t n_work_resolved;
	/* the keys its transaction wrote (held until it ends, failed or not) */
	struct model_key *keys;     /* owned */
	size_t n_keys;
	char **whole;               /* owned: tables it truncated */
	size_t n_whole;
	/* the checkpoint row: in the lock queue since write_checkpoint */
	bool cp_queued, cp_granted;
	uint64_t cp_prev_offset;
	struct apply_checkpoint cp_next;
	uint64_t cp_tag;
	/* COMMIT sent, its result not read */
	bool commit_submitted;
	enum model_commit_fault commit_fault;
	uint64_t commit_tag;
	struct apply_target_error error;
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
	/* the sessions; [0] is the single connection's */
	struct model_session sessions[MODEL_TARGET_MAX_SESSIONS];
	int n_sessions;
	int lockq[MODEL_TARGET_MAX_SESSIONS]; /* the checkpoint row's lock queue: session indexes, holder first */
	int n_lockq;
	struct sim_rng rng;         /* submitted COMMITs at a disconnect */
	/* the first violation of what the engine must guarantee ("" none) */
	char violation[80];
	char violation_detail[400];
	/* faults the simulator arms (each fires once) */
	enum model_commit_fault next_commit_fault;
	uint64_t fail_change_at;    /* fail the nth change from now (1-based; 0 never) */
	char fail_change_sqlstate[6];
	bool fail_change_connection;
	/* what happened */
	uint64_t commits, rollbacks, changes_applied, ambiguous_commits, submitted_commits_decided,
		lock_waits, /* a checkpoint update that waited for another session's submitted COMMIT */
		commits_behind; /* a COMMIT submitted while another session's was not decided yet */
	/* called after every commit that reached the database (the
	 * simulator's invariant checks); may be NULL */
	void (*on_commit)(void *ctx, struct model_target *t);
	void *on_commit_ctx;
	/* table definitions for reload_tables: names and key column names */
	struct apply_tables defs;   /* owned: copied by reload_tables */
};

/* The operations; their target is a struct model_session. */
extern const struct apply_target_ops model_target_ops;

/* defs: the flow's tables (names and key columns); db: the tables
 * created, empty (owned by the target from now on).  One session. */
void model_target_init(struct model_target *t, struct sim_db *db, const struct apply_tables *defs);
void model_target_free(struct model_target *t);
/* n sessions (1..MODEL_TARGET_MAX_SESSIONS; before connecting); seed:
 * the choices at a disconnect. */
void model_target_sessions(struct model_target *t, int n, uint64_t seed);
struct model_session *model_target_session(struct model_target *t, int i);
/* Any session's transaction open (not failed)? */
bool model_target_in_txn(const struct model_target *t);
/* New sessions (the applier connects): whatever was open is gone. */
void model_target_connect(struct model_target *t);
/* Every session dies (the applier's process was killed, or the network):
 * open transactions are rolled back, submitted COMMITs decided. */
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
