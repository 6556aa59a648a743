/*
 * apply_engine_internal.h - what the apply engine's modules share and
 * nobody else uses (the contract is trellara/apply_engine.h):
 *
 *   apply_engine.c         the engine's lifecycle and the loop (a step,
 *                          idle duties, stop)
 *   apply_engine_batch.c   batches of whole transactions, their changes
 *                          sent to the target, failures and quarantine
 *   apply_engine_chunks.c  chunked transactions (chunk, manifest,
 *                          commit marker)
 *   apply_engine_fence.c   fences (DESIGN §9)
 *   apply_engine_fold.c    batch compaction: the open batch's segment,
 *                          sent as its net changes in set statements
 *   apply_engine_parallel.c  parallel apply: batches in flight on other
 *                          connections, collected in order, the
 *                          dependency tracker, the fall back to one
 *                          connection
 *
 * Every function returning struct apply_outcome has logged what it
 * decided; APPLY_FAILED means the statement error is apply_engine_error()'s.
 */
#ifndef TRELLARA_APPLY_ENGINE_INTERNAL_H
#define TRELLARA_APPLY_ENGINE_INTERNAL_H

#include "trellara/apply_engine.h"

#include "trellara/apply_chunks.h"
#include "trellara/apply_deps.h"
#include "trellara/apply_fold.h"
#include "trellara/apply_fence.h"
#include "trellara/envelope.h"
#include "trellara/frame_source.h"
#include "trellara/stream.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A batch whose COMMIT was sent on its own connection and whose outcome
 * is not read yet (apply_engine_parallel.c). */
struct apply_flight {
	int session;
	uint64_t seq;                 /* its number in the dependency tracker */
	struct apply_checkpoint prev; /* the checkpoint the batch before leaves */
	struct apply_checkpoint next; /* the checkpoint it writes */
	bool committing;              /* its checkpoint and COMMIT are sent (else only its statements) */
	uint64_t txns, changes, skipped, filtered, statements, folded, copies;
	uint64_t first_offset, end_offset;
	uint32_t last_xid;
	uint64_t last_commit_lsn;
	bool overlapped;              /* an earlier batch was in flight when it was sent */
};

/* The first failure of a batch in flight (the earliest: collected in order). */
struct apply_flight_failure {
	bool failed;
	struct apply_target_error error;
	struct apply_flight flight;
};

struct apply_engine {
	const struct flow_config *cfg;
	const struct apply_target_ops *ops;
	void *t;
	struct frame_source *src; /* borrowed */
	struct apply_engine_stats stats;
	struct apply_checkpoint cp; /* as last committed */
	struct apply_tables tables;
	char **unconfigured;        /* owned: tables already warned about */
	size_t n_unconfigured;
	struct quarantine_entry *replay; /* owned: replay_ready entries */
	int n_replay;
	struct plan_stmt stmt;
	struct apply_target_error own_error; /* a change the planner could not express */
	int64_t now_us;
	/* the open batch */
	bool in_txn;
	uint64_t batch_first_offset;
	uint64_t batch_txns, batch_changes, batch_skipped, batch_filtered;
	uint64_t last_commit_lsn;  /* highest applied or skipped in this batch or before */
	uint32_t last_xid;
	uint64_t seen_lsn;         /* highest commit end or watermark passed */
	uint64_t next_offset;      /* after the last frame handled */
	/* one transaction per target transaction until this offset */
	uint64_t single_until;
	bool single_mode;
	struct chunk_set chunk;
	struct pending_floor floor; /* pending chunks retention must keep (the group mirrors it) */
	bool group_pending;        /* the group file lags the checkpoint */
	int64_t last_group_write_us;
	struct apply_fence fence;
	int64_t last_idle_checkpoint_us, last_progress_us;
	uint64_t progress_txns;
	/* batch compaction (apply_engine_fold.c) */
	struct fold *fold;         /* owned: the open batch's segment */
	bool folding;              /* the transaction being sent folds */
	uint64_t batch_statements, batch_folded, batch_copies; /* batch_copies: of batch_statements, COPYs */
	const struct env_change **set_run; /* owned (the pointers only): one set statement's changes */
	size_t set_cap;
	size_t *idx;               /* owned: the order a flush sends the segment in */
	size_t idx_cap;
	/* parallel apply (apply_engine_parallel.c) */
	void **sessions;           /* owned array of borrowed targets: [0] is t as given */
	int n_sessions;
	int cur;                   /* the session t is */
	struct buf deps_key;       /* owned: scratch for a change's key */
	struct apply_flight *flights; /* owned: in flight, oldest first */
	int n_flights;
	struct apply_flight_failure flight_failure;
	struct apply_checkpoint chain; /* as the last batch sent leaves it (cp when none is in flight) */
	struct apply_deps *deps;   /* owned */
	uint64_t next_seq;         /* the tracker's next batch number */
	uint64_t batch_seq;        /* the open batch's (0: none) */
	uint64_t committed_seq;    /* the highest collected */
	bool batch_parallel;       /* the open batch may run beside others */
	uint64_t serial_until;     /* after a fall back: one batch at a time until this offset */
	int transient_retries;     /* in a row, since the last commit */
	char last_transient_sqlstate[6];
	uint64_t truncate_reload_lsn; /* the commit of a partition TRUNCATE the target's tables were read again for */
};

/* ---- apply_engine.c ---- */

/* The target's error, or the engine's own (a change it cannot plan). */
const struct apply_target_error *apply_engine_error(struct apply_engine *a);
void apply_engine_clear_error(struct apply_engine *a);

/* ---- apply_engine_batch.c ---- */

/* Quarantine the transaction and stop with exit_code. */
struct apply_outcome apply_engine_quarantine(struct apply_engine *a, uint32_t xid, uint64_t commit_lsn, uint64_t offset,
					     const char *reason, const char *detail, int exit_code);
/* The replay_ready entry of the transaction, or NULL. */
const struct quarantine_entry *apply_engine_replay_entry(struct apply_engine *a, uint32_t xid, uint64_t commit_lsn);
/* Marks a replayed quarantined transaction resolved, in the target
 * transaction that applies it. */
int apply_engine_resolve_quarantine(struct apply_engine *a, const struct quarantine_entry *q, uint64_t tag);
/* Opens the target transaction unless one is open; may_overlap: a batch
 * of whole transactions that may run beside the batches in flight (else
 * they are collected first).  -1: the caller handles the failure. */
int apply_engine_begin_txn(struct apply_engine *a, uint64_t offset, bool may_overlap);
/* Writes the checkpoint, commits, then moves the group. */
struct apply_outcome apply_engine_commit_batch(struct apply_engine *a);
/* Moves the consumer group to the checkpoint when it lags. */
int apply_engine_group_flush(struct apply_engine *a);
/* Position the source at offset: APPLY_OK, APPLY_RECONNECT when its
 * servers do not answer, else APPLY_EXIT (65: an offset it does not hold). */
struct apply_outcome apply_engine_seek(struct apply_engine *a, uint64_t offset);
/* Commit what is open; a failure goes to apply_engine_handle_failure (culprit hunt,
 * quarantine or reconnect). */
struct apply_outcome apply_engine_commit_open_batch(struct apply_engine *a);
/* A batch or a single transaction failed: decide what to do. */
struct apply_outcome apply_engine_handle_failure(struct apply_engine *a, uint32_t xid, uint64_t commit_lsn,
						 uint64_t offset);
/* Apply the changes of one envelope inside the open target transaction. */
/* (at most max_changes of them: a pending chunk's changes in use) */
struct apply_outcome apply_engine_send_changes(struct apply_engine *a, const uint8_t *payload, size_t len,
					       uint64_t offset, uint64_t commit_lsn, uint64_t max_changes,
					       uint64_t *changes, uint64_t *decoded);
struct apply_outcome apply_txn_frame(struct apply_engine *a, const struct stream_frame *f);

/* ---- apply_engine_fold.c ---- */

/* Plans c (against rels) and sends it by itself. */
struct apply_outcome apply_engine_send_planned(struct apply_engine *a, const struct plan_relation *rels, uint32_t n_rels,
				  const struct env_change *c, uint64_t tag);
/* One row change of the transaction being sent, into the segment (pr:
 * its relation, c->relation ignored) or, for a barrier, after it. */
struct apply_outcome apply_engine_fold_change(struct apply_engine *a, const struct plan_relation *pr, enum apply_fold_mode mode,
				 const struct env_change *c, uint64_t tag);
/* Sends the segment's net changes and empties it. */
struct apply_outcome apply_engine_fold_flush(struct apply_engine *a);
/* A new target transaction: the segment emptied unsent, the batch's
 * counters zero. */
void apply_engine_fold_forget(struct apply_engine *a);
/* Idle, nothing open: the memory a large segment (and a large parallel
 * batch's undo log) grew is freed; stats.memory_released counts it. */
void apply_engine_fold_shrink(struct apply_engine *a);

/* ---- apply_engine_parallel.c ---- */

/* Whether a batch starting now may run beside the batches in flight. */
bool apply_engine_may_overlap(const struct apply_engine *a);
/* The open batch's statements sent; the batch joins the flights (its
 * checkpoint over prev and its COMMIT go once its statements are seen to
 * have succeeded, in order), and a free connection becomes the current
 * one (the oldest flight collected when none is).  APPLY_FAILED: handle it. */
struct apply_outcome apply_engine_submit(struct apply_engine *a, struct apply_checkpoint prev,
					 const struct apply_checkpoint *next);
/* Every batch in flight collected (committed), in order.  -1: one failed
 * (flight_failure says which; the caller handles the failure). */
int apply_engine_drain(struct apply_engine *a);
/* A change the open batch sends by itself: nothing may run beside it, so
 * every batch in flight is collected first.  -1 as apply_engine_drain. */
int apply_engine_barrier(struct apply_engine *a);
/* The tracker's answer for a net change of the open batch: the batch in
 * flight it must wait for (0: none); *barrier: it is one (keyless update
 * or delete). */
uint64_t apply_engine_depends(struct apply_engine *a, const struct plan_relation *pr, const struct apply_table *table,
			      uint32_t rel, const struct env_change *c);
/* The tracker's number for r's table (once per relation and segment). */
uint32_t apply_engine_relation_number(const struct env_relation *r);
/* Collects the flights up to batch seq.  -1 as apply_engine_drain. */
int apply_engine_wait_for(struct apply_engine *a, uint64_t seq);
/* A failure while batches are in flight or after one failed: everything
 * uncommitted rolled back, the failing batch chosen (the earliest), and
 * apply_engine_handle_failure's decision made on it; the rest up to what
 * was read is applied again one batch at a time. */
struct apply_outcome apply_engine_parallel_failure(struct apply_engine *a, uint32_t xid, uint64_t commit_lsn,
						   uint64_t offset);
/* The connections are gone: what was in flight is the checkpoint's to say. */
void apply_engine_flights_lost(struct apply_engine *a);

/* ---- apply_engine_chunks.c ---- */

/* The set in progress will not complete here: roll it back. */
struct apply_outcome apply_engine_chunk_abandon(struct apply_engine *a, uint64_t next_lsn, const char *what);
struct apply_outcome apply_chunk_frame(struct apply_engine *a, const struct stream_frame *f);

/* ---- apply_engine_fence.c ---- */

struct apply_outcome apply_engine_fence_refresh(struct apply_engine *a);
/* Hold: everything before the fence is committed; report "held". */
struct apply_outcome apply_engine_fence_hold(struct apply_engine *a);
/* Held: read the fence again. */
struct apply_outcome apply_engine_fence_poll(struct apply_engine *a, enum apply_step *what);
/* Before applying a transaction that commits at or after the fence:
 * commit what is open, hold, and have the caller read the frame again. */
struct apply_outcome apply_engine_fence_check(struct apply_engine *a, uint64_t commit_lsn, uint64_t frame_offset,
					      bool *hold);

#endif
