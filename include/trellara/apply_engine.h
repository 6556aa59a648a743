/*
 * apply_engine.h - the apply loop (DESIGN §8), apart from any database:
 * frames of the stream in, through apply_core's decisions, statements to
 * an apply_target out, with the checkpoint written in the same target
 * transaction as the changes it covers.
 *
 * Owns.  The open batch (which source transactions, counters, where it
 * began), the chunk set in progress (apply_chunks), the fence state
 * (apply_fence), the replay-ready quarantine entries it was given, and a
 * copy of the checkpoint as last committed.  Borrows: the flow's
 * configuration, the stream reader (positioned by apply_engine_start),
 * the stream's file system (for the consumer group file) and the target.
 * No libpq, no clock (now_us is an argument), no sleeping: where applyd
 * used to wait (end of stream, held at a fence) a step says so and the
 * caller waits.  trellara-applyd drives it over libpq (cmd/trellara-applyd
 * target_pg.c); the simulator over its model target (sim/).
 *
 * Exactly once.  A source transaction whose commit LSN is at or below the
 * checkpoint's is skipped (counted); the checkpoint moves in the same
 * target transaction as the changes; the consumer group file moves only
 * after that transaction committed, and only lags it.  A batch holds up
 * to apply.batch_transactions whole source transactions; one that fails
 * is rolled back and applied again one transaction per target
 * transaction, and the one that fails alone is quarantined (exit 1).  A
 * chunk set is one target transaction committed only after its manifest
 * and commit marker check out: nothing of it commits before (not when
 * idle, not at a fence, not at shutdown).
 *
 * Fault points: applyd.before_target_commit,
 * applyd.after_target_commit_before_group_ack.
 */
#ifndef TRELLARA_APPLY_ENGINE_H
#define TRELLARA_APPLY_ENGINE_H

#include "trellara/apply_core.h"
#include "trellara/apply_outcome.h"
#include "trellara/apply_state.h"
#include "trellara/config.h"
#include "trellara/planner.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct frame_source;

/* The first error of the open target transaction. */
struct apply_target_error {
	bool failed;
	bool connection_lost;
	char sqlstate[6];
	char message[1024];
	uint64_t tag; /* the stream offset of the failing change */
};

/*
 * The target, as the engine uses it.  Statements of the open transaction
 * may be queued (pipelined) and their results read only at sync or
 * commit: every call returns 0, or -1 with error() describing the first
 * failure (after which the transaction is rolled back by the target).
 * Calls outside a transaction (quarantine_add, fence_*, reload_tables)
 * return -1 when the connection is gone (the engine reconnects).
 */
struct apply_target_ops {
	/* bounded_waits: the transaction runs beside others (apply.workers >
	 * 1), so a lock wait is bounded (the libpq target: lock_timeout, see
	 * APPLY_PARALLEL_LOCK_TIMEOUT_MS) and ends in SQLSTATE 55P03; false:
	 * it waits as long as the target makes it wait */
	int (*begin)(void *t, uint64_t tag, bool bounded_waits);
	/* one planned change: stmt is the planner's statement for c (the
	 * libpq target sends it; a model target applies c itself) */
	int (*change)(void *t, const struct plan_relation *rels, uint32_t n_rels, const struct env_change *c,
		      const struct plan_stmt *stmt, uint64_t tag);
	/* n compatible changes planned as one statement (plan_change_set):
	 * the libpq target sends stmt; a model target applies each of cs
	 * itself, the statement failing whole when one of them fails.  NULL:
	 * the engine plans and sends them one by one. */
	int (*change_set)(void *t, const struct plan_relation *rels, uint32_t n_rels, const struct env_change *const *cs,
			  size_t n, const struct plan_stmt *stmt, uint64_t tag);
	/* the checkpoint row becomes cp (in the open transaction).  Commit
	 * order: it first waits until every other transaction that wrote the
	 * row before this one committed or rolled back (the row's lock), and
	 * then fails with TR001 unless the row's stream_offset is
	 * prev->stream_offset: a batch whose predecessor did not commit can
	 * never commit after it. */
	int (*write_checkpoint)(void *t, const struct apply_checkpoint *prev, const struct apply_checkpoint *cp,
				uint64_t tag);
	/* the replay-ready entry id becomes resolved (in the open transaction) */
	int (*resolve_quarantine)(void *t, int64_t id, uint64_t tag);
	/* read every queued result; -1: one failed */
	int (*sync)(void *t);
	/* COMMIT and read its result */
	int (*commit)(void *t, uint64_t tag);
	/* Batches side by side (all three, or none: NULL).  submit: what is
	 * queued is sent to the server, its results not read; commit_submit:
	 * COMMIT queued and sent so; collect: the results of what was
	 * submitted read, 0 when every statement succeeded (and its row count
	 * was the expected one) and a submitted COMMIT committed, -1 error()
	 * (a lost connection leaves a COMMIT's outcome unknown: the checkpoint
	 * says).  A statement's row count is only known at collect: the
	 * engine collects a batch's statements before it sends its COMMIT. */
	int (*submit)(void *t);
	int (*commit_submit)(void *t, uint64_t tag);
	int (*collect)(void *t);
	/* ROLLBACK whatever is open; the error stays readable until clear_error */
	void (*rollback)(void *t);
	const struct apply_target_error *(*error)(void *t);
	void (*clear_error)(void *t);
	/* outside any transaction */
	int (*quarantine_add)(void *t, uint32_t xid, uint64_t commit_lsn, uint64_t offset, const char *reason,
			      const char *detail);
	int (*fence_get)(void *t, bool *present, uint64_t *lsn, char *state, size_t state_len);
	/* marks the fence read at fence_lsn held; *marked false when it is
	 * not that fence any more (moved or released since it was read) */
	int (*fence_mark_held)(void *t, uint64_t fence_lsn, uint64_t applied_through_lsn, bool *marked);
	/* the flow's tables as the target's catalogs and watermarks say now */
	int (*reload_tables)(void *t, struct apply_tables *tables);
};

struct apply_engine_stats {
	uint64_t transactions, changes, skipped_duplicates, skipped_by_watermark, skipped_unconfigured, batches,
		quarantined;
	/* of the committed batches: statements sent, row changes folded away,
	 * of the statements: COPYs of runs of inserts (apply.copy_inserts) */
	uint64_t statements, folded, copies;
	/* parallel apply: batches committed while an earlier one was still in
	 * flight; waits for an earlier batch holding a key (the dependency
	 * tracker); times the in-flight batches were rolled back and their
	 * transactions applied again on one connection */
	uint64_t overlapped, dependency_waits, serial_fallbacks;
	/* times an idle applier freed the memory a large segment grew (more
	 * than FOLD_KEEP_BYTES: a catch-up, a backlog; kept from segment to
	 * segment while busy); the process may then give the freed heap back
	 * to the system */
	uint64_t memory_released;
};

struct apply_engine;

/* A new engine for cfg over target (ops, t), reading frames from src
 * (borrowed: frame_source.h), where it also mirrors its position. */
struct apply_engine *apply_engine_new(const struct flow_config *cfg, const struct apply_target_ops *ops, void *t,
				      struct frame_source *src);
void apply_engine_free(struct apply_engine *e);
/* One more target connection (apply.workers): batches run on up to 1 +
 * the added ones at a time, committed in order (PARALLEL APPLY in
 * trellara-applyd(1)).  Each is a session of the same target, given
 * before apply_engine_connected, connected and disconnected with the
 * first; calls outside a batch (quarantine, fences, tables) go to a
 * connection with nothing in flight.  Ignored unless ops has submit,
 * commit_submit and collect. */
void apply_engine_add_worker(struct apply_engine *e, void *t);

/* After (re)connecting: the checkpoint read from the target, its
 * replay-ready quarantine entries (copied) and the flow's tables (taken
 * over: *tables is emptied).  Nothing is open. */
void apply_engine_connected(struct apply_engine *e, const struct apply_checkpoint *cp,
			    const struct quarantine_entry *replay, int n_replay, struct apply_tables *tables);
/* Where reading starts: the consumer group's position or the
 * checkpoint's offset, whichever is lower (after a crash between the
 * target commit and the group write the group is behind; what it re-reads
 * is skipped by commit LSN).  *ahead: the group is ahead of the checkpoint. */
uint64_t apply_engine_start_offset(const struct apply_checkpoint *cp, uint64_t group_pos, bool group_exists,
				   bool *ahead);
/* The reader was positioned at start: forget anything of an interrupted batch. */
void apply_engine_start(struct apply_engine *e, uint64_t start);

enum apply_step {
	APPLY_STEP_WORKED, /* a frame was handled */
	APPLY_STEP_IDLE,   /* the end of the stream: wait for more */
	APPLY_STEP_HELD,   /* held at a fence: wait, then step again */
};
/* One step: the next frame, or the idle duties at the end of the stream
 * (commit what is open unless a chunk set is, checkpoint the position
 * passed, hold at a fence already reached), or one poll of a held fence.
 * Anything but APPLY_OK ends the connection's loop (reconnect, retry
 * after a backoff, or exit). */
struct apply_outcome apply_engine_step(struct apply_engine *e, int64_t now_us, enum apply_step *what);
/* Stopping: an open chunk set is rolled back (applied again at the next
 * start), an open batch committed, the group file written. */
struct apply_outcome apply_engine_stop(struct apply_engine *e, int64_t now_us);
/* The connection is gone: whatever was open is lost with it. */
void apply_engine_disconnected(struct apply_engine *e);

const struct apply_checkpoint *apply_engine_checkpoint(const struct apply_engine *e);
const struct apply_engine_stats *apply_engine_stats(const struct apply_engine *e);
/* A transient failure (APPLY_RETRY) is to be retried: how many in a row
 * since the last commit, this one included. */
int apply_engine_retry(struct apply_engine *e);
/* The SQLSTATE of the last transient failure (for the final message). */
const char *apply_engine_last_transient(const struct apply_engine *e);

#endif
