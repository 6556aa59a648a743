/*
 * world.h - one simulated run: a model source and its slot, the real
 * capture core on the real stream over a simulated disk, the real apply
 * engine against the model target, interleaved by a seeded scheduler that
 * injects faults (named fault points, process kills, power loss, lost
 * acknowledgements, dying target connections, failing fsyncs, retention
 * runs, a promoted standby with or without the slot, a slot dropped or
 * invalidated), then heals everything and drains.  Capture decides about
 * the slot it finds with the real slot_policy_decide(); when it stops
 * (exit 65), the operator copies the flow again as the hint says
 * (trellara snapshot --force: a new slot, every table copied at its
 * consistent point through the run state machine, new watermarks).
 *
 * The stream is the local stream on that simulated disk, or
 * (options.broker) a replicated broker model whose nodes go down and come
 * back, whose publishes fail or lose their PubAck.
 *
 * Invariants, checked after every step and at the end (the names are
 * those of ../shared/CHAOS-MATRIX.md where one applies):
 *   target_equals_source_at_applied_lsn  after every target commit, the
 *       target's rows are exactly the source's after the transaction the
 *       checkpoint names (so no commit exposes part of a transaction);
 *   source_ack_after_local_fsync_durability  after a power loss the
 *       stream still holds every position the source was told is flushed;
 *   transaction_dedup_before_reapply  the checkpoint counts each stream
 *       transaction once; the stream holds each commit once, in order;
 *   retention_respects_protected_groups  retention never removes an
 *       offset the consumer group has not passed;
 *   no_silent_target_divergence  nothing is quarantined unless the run
 *       injected a divergence, and an injected one is quarantined;
 *   drained  once healed, everything committed at the source arrives;
 *   no_committed_transaction_skipped  a session never starts from a slot
 *       position that passes a committed transaction which is neither in
 *       the stream nor below the consistent point of the latest copy;
 *   source_checkpoint_after_broker_ack  (options.broker) the slot's
 *       confirmed position never passes a non-empty transaction that a
 *       majority of the broker's replicas does not hold (unless the latest
 *       copy of the flow covers it); after capture's restart, the
 *       broker's stream still holds every position the source was told;
 *   source_ack_waits_for_broker_quorum  (options.broker) while fewer
 *       than a quorum of nodes is up, the confirmed position stays within
 *       what a quorum held when the quorum was lost;
 *   verify_fence_holds_before_consistent_point  (options.fence_moves) a
 *       fence moved forward while applyd held at it (verify's two steps)
 *       is never passed: nothing at or past it is committed while it stands;
 *   snapshot_split_resume_keeps_only_unchanged_ranges  (options.split_ranges)
 *       once the last range of a split table is in, the table on the
 *       target is exactly the source's at the snapshot its watermark
 *       names, and no range wrote a key the target already held: ranges
 *       copied by an earlier invocation are kept only as the real
 *       run_range_reads_same() decides;
 *   model_broker  the broker model keeps its own rules (a leader holds
 *       every committed message; a majority always does);
 *   parallel_batches_write_disjoint_rows, checkpoint_lock_waits_on_idle_transaction
 *       (apply.workers > 1) what the engine must guarantee the target
 *       model (model_target.h): no two uncommitted batches write one row,
 *       no checkpoint update waits on a batch that has not sent its COMMIT.
 *
 * Deterministic: one seed, no wall clock, no host randomness, no threads.
 */
#ifndef TRELLARA_SIM_WORLD_H
#define TRELLARA_SIM_WORLD_H

#include <stdbool.h>
#include <stdint.h>

struct stream_fs;

/* the most ranges options.split_ranges may ask for */
#define SIM_MAX_RANGES 4

/* Fault rates are percent per scheduler step. */
struct sim_world_options {
	uint64_t seed;
	int transactions;      /* committed at the source in all */
	int steps;             /* scheduler steps before healing */
	int tables;            /* 1..4 */
	int big_pct;           /* percent of transactions that are large (streamed, chunked) */
	int batch_transactions;/* applyd's apply.batch_transactions */
	bool no_compaction;    /* applyd's apply.compaction: false */
	bool copy_inserts;     /* applyd's apply.copy_inserts: true */
	int workers;           /* applyd's apply.workers: target sessions (1..4) */
	int p_target_fail_change; /* (workers > 1) a change fails: transient or a lost connection */
	int capture_batch;     /* capture's max batch transactions */
	int capture_batch_messages; /* ... and frames pending (a large transaction syncs its chunks at this) */
	int chunk_changes;     /* strict chunking: changes per chunk; 0: off */
	int written_once_changes; /* a streamed transaction's memory share, written once as pending chunks; 0: never */
	/* random faults */
	int p_kill_capture, p_kill_applyd, p_power_loss, p_source_disconnect, p_status_lost, p_target_lost_before,
		p_target_lost_after, p_target_transient, p_fsync_eio, p_retention, p_promote, p_fault_point;
	/* the slot lost: a promoted standby without it, the slot invalidated
	 * (max_slot_wal_keep_size removed its WAL; idle_replication_slot_timeout
	 * while no session uses it), the slot dropped */
	int p_promote_no_slot, p_slot_wal_removed, p_slot_idle_timeout, p_slot_dropped;
	/* a named fault point (fault.h names) that kills its component at
	 * its kill_nth hit; NULL: none */
	const char *kill_point;
	unsigned kill_nth;
	/* power loss instead of a process kill at kill_point */
	bool kill_point_power;
	/* a target row deleted behind applyd's back at this step (-1: never),
	 * repaired by the operator once quarantined, then replay-ready */
	int divergence_at_step;
	/* the target lacks this model table (0: none; 1..4: t1..t4) until the
	 * operator creates it from the source, once quarantined */
	int target_missing_table;
	/* a fence set at this step (-1: never), released some steps later */
	int fence_at_step;
	bool fence_moves;      /* the fence, once held, moves forward once before its release */
	/* the initial copy: pre_transactions commit before the slot exists;
	 * a model snapshot copies the tables at the slot's consistent point
	 * through the real run state machine (runstate.h) before applyd may
	 * start */
	bool snapshot;
	int pre_transactions;
	int p_copy_fails;        /* a table copy dies (source or target lost): rolled back, failed_recoverable, resumed */
	bool copy_twice;         /* every table is copied a second time (idempotent) */
	int p_copy_ddl;          /* an ALTER TABLE on the source during a table's copy (or before it) */
	bool regression_attempt; /* try a backward state move; it must be refused */
	/* every table split (snapshot.split_bytes) into this many ranges
	 * (2..SIM_MAX_RANGES; 0: copied whole): each range one target
	 * transaction with its progress row and the hash of what it read; a
	 * resume keeps a table's earlier ranges only when each reads the same
	 * at its new snapshot (copy_range.c), else empties the table and
	 * copies it whole again; the table is done, at the invocation's
	 * snapshot, once its last range is in.  copy_twice applies to whole
	 * copies only. */
	int split_ranges;
	/* a reseed of one table at this step (-1: never): fence, hold,
	 * copy at a later position, watermark, release */
	int reseed_at_step;
	/* the stream on a replicated broker instead of the local stream:
	 * model_broker.h (NATS JetStream as Trellara uses it, 3 nodes), with
	 * capture publishing through its sink and applyd reading through its
	 * frame source (model_broker_client.h) */
	bool broker;
	/* an outage starts: broker_outage_nodes nodes (0: 1 or 2 at random)
	 * are down for 5 to 40 steps, then back */
	int p_broker_outage;
	int broker_outage_nodes;
	/* publishes fail for 2 to 15 steps: refused (nothing stored), or
	 * stored with their PubAck lost */
	int p_publish_fail;
	int64_t broker_dedup_window_us; /* 0: JetStream's default, 2 minutes */
	/* at this step (-1: never) the leader's two followers go down, so the
	 * leader stores capture's publishes without a quorum (no PubAck);
	 * from two steps on, capture is killed once the leader holds such
	 * frames, and restarts the step after, the leader still leading,
	 * reading the stream's committed end; the leader then steps down;
	 * the followers come back at step + 16, and the old leader, its log
	 * the longest, commits the killed run's frames after the new run
	 * read past them */
	int leftovers_at_step;
	/* (broker) at this step (-1: never) the host of the stream's leader
	 * crashes: the node loses what its file store had not synced (with
	 * nats-server 2.9.10, everything since its start within a run) and
	 * is back 12 steps later, catching up from the new leader; no other
	 * broker fault is drawn in such a run */
	int broker_host_crash_at_step;
	/* (broker) the stream's replicas (0: 3, the flow's default; fewer
	 * only with stream.accept_loss_on_broker_crash) */
	int broker_replicas;
	/* trace: print every step to stderr */
	bool trace;
};

void sim_world_defaults(struct sim_world_options *o, uint64_t seed);
/* Random options for exploration schedule seed. */
void sim_world_random(struct sim_world_options *o, uint64_t seed);

struct sim_world_result {
	bool ok;
	char invariant[80];   /* the first invariant that failed */
	char detail[512];
	uint64_t steps, transactions, applied, duplicates_skipped, capture_skipped, chunks, crashes, power_losses,
		quarantines, fault_points_hit, retention_runs, promotions, ambiguous_commits, retries,
		kills_in_open_txn, tables_copied, copy_failures, reseeds, refused_moves, recoverable_failures,
		copy_ddls, schema_changes_caught, snapshot_resumes, overlapped, serial_fallbacks, lock_waits, commits_behind,
		copy_statements; /* COPYs of runs of inserts the engine sent (apply.copy_inserts) */
	/* capture stopped by its slot (exit 65), by slot_policy verdict, and
	 * the operator's copies of the whole flow that were handed off */
	uint64_t slot_stops_lost_at_promotion, slot_stops_gone, slot_stops_invalidated, recopies;
	/* split tables: ranges copied; ranges of an earlier invocation a
	 * resume kept (they read the same); tables a resume copied whole
	 * again because one of their earlier ranges read differently */
	uint64_t ranges_copied, ranges_kept, split_recopies;
	/* the broker: messages it stored; capture held back by it
	 * (capture_core_held) and resumed; publishes it dropped as repeats of
	 * a stored message id; outages that lost the quorum, and those that
	 * did not (with what was committed meanwhile); elections; windows of
	 * failing publishes */
	uint64_t broker_stored, broker_holds, broker_resumes, broker_msgid_duplicates, broker_quorum_losses,
		broker_node_losses, broker_stored_during_node_loss, broker_elections, broker_publish_failures;
	/* publishes the broker refused for a wrong last sequence; capture
	 * kills of leftovers_at_step */
	uint64_t broker_wrong_last, broker_leftover_kills;
	uint64_t broker_host_crashes, broker_crash_dropped, broker_acknowledged_lost;
	uint64_t trace_digest; /* of every step's action and outcome */
};

struct apply_tables;
struct model_source;
/* The flow's tables as applyd knows them (names, key columns) for the
 * model source's tables; the caller frees them (apply_tables_free). */
void sim_flow_tables(const struct model_source *src, struct apply_tables *defs);

struct capture_core_options;
/* The simulator's capture, as every run configures it: the stream dir on
 * fs, the source's protocol version, chunks of chunk_changes changes
 * (0: no strict chunking), fdatasync after batch transactions or
 * batch_messages frames. */
void sim_capture_options(struct capture_core_options *co, struct stream_fs *fs, const char *dir, int proto_version,
			 int chunk_changes, int batch, int batch_messages);

/* One run; false when an invariant failed (r says which). */
bool sim_world_run(const struct sim_world_options *o, struct sim_world_result *r);

#endif
