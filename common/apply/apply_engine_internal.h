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
 *
 * Every function returning struct apply_outcome has logged what it
 * decided; APPLY_FAILED means the statement error is apply_engine_error()'s.
 */
#ifndef TRELLARA_APPLY_ENGINE_INTERNAL_H
#define TRELLARA_APPLY_ENGINE_INTERNAL_H

#include "trellara/apply_engine.h"

#include "trellara/apply_chunks.h"
#include "trellara/apply_fold.h"
#include "trellara/apply_fence.h"
#include "trellara/envelope.h"
#include "trellara/stream.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct apply_engine {
	const struct flow_config *cfg;
	const struct apply_target_ops *ops;
	void *t;
	struct stream_reader *reader;
	struct stream_fs *fs;
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
	bool group_pending;        /* the group file lags the checkpoint */
	int64_t last_group_write_us;
	struct apply_fence fence;
	int64_t last_idle_checkpoint_us, last_progress_us;
	uint64_t progress_txns;
	/* batch compaction (apply_engine_fold.c) */
	struct fold *fold;         /* owned: the open batch's segment */
	bool folding;              /* the transaction being sent folds */
	uint64_t batch_statements, batch_folded;
	const struct env_change **set_run; /* owned (the pointers only): one set statement's changes */
	size_t set_cap;
	int transient_retries;     /* in a row, since the last commit */
	char last_transient_sqlstate[6];
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
/* Opens the target transaction unless one is open. */
int apply_engine_begin_txn(struct apply_engine *a, uint64_t offset);
/* Writes the checkpoint, commits, then moves the group. */
struct apply_outcome apply_engine_commit_batch(struct apply_engine *a);
/* Moves the consumer group to the checkpoint when it lags. */
int apply_engine_group_flush(struct apply_engine *a);
/* Commit what is open; a failure goes to apply_engine_handle_failure (culprit hunt,
 * quarantine or reconnect). */
struct apply_outcome apply_engine_commit_open_batch(struct apply_engine *a);
/* A batch or a single transaction failed: decide what to do. */
struct apply_outcome apply_engine_handle_failure(struct apply_engine *a, uint32_t xid, uint64_t commit_lsn,
						 uint64_t offset);
/* Apply the changes of one envelope inside the open target transaction. */
struct apply_outcome apply_engine_send_changes(struct apply_engine *a, const uint8_t *payload, size_t len,
					       uint64_t offset, uint64_t commit_lsn, uint64_t *changes,
					       uint64_t *decoded);
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
