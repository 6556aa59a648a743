/*
 * scenarios.c - the registry (see scenarios.h): every simulation and every
 * curated row of ../shared/CHAOS-MATRIX.md, by the names and numbers used
 * there.  The file lists 61 curated rows, numbered 1 to 61, although its
 * heading says 63: the registry holds the 61 that exist.  The cutover's
 * simulations (family "cutover") and the split copy's (family "snapshot
 * split") are the project's own: the matrix has no row for trellara
 * cutover or for a table copied in ranges, so their matrix_row is 0.
 *
 * Live tests are named exactly as their @test line in tests/bats/ (a bats
 * test checks that each one exists).  Recovery commands are commands that
 * exist today (trellara(7) and the pages it names).
 */
#include "scenarios.h"
#include "run.h"

#include <string.h>

#define SIM_(name_, family_, row_, invariant_, check_, live_file_, live_name_, recovery_, na_)              \
	{ .name = (name_), .kind = SIM_KIND_SIMULATION, .family = (family_), .matrix_row = (row_),            \
	  .invariant = (invariant_), .check = (check_), .live_file = (live_file_), .live_name = (live_name_), \
	  .recovery = (recovery_), .not_applicable_reason = (na_), .run = (na_) ? NULL : sim_run_preset }
#define ROW_(number_, name_, boundary_, invariant_, check_, live_file_, live_name_, recovery_, na_)             \
	{ .name = (name_), .kind = SIM_KIND_CURATED, .number = (number_), .boundary = (boundary_),             \
	  .invariant = (invariant_), .check = (check_), .live_file = (live_file_), .live_name = (live_name_), \
	  .recovery = (recovery_), .not_applicable_reason = (na_), .run = (na_) ? NULL : sim_run_preset }

/* the live-test pairs below hold a comma: expand them before counting arguments */
#define SIM(...) SIM_(__VA_ARGS__)
#define ROW(...) ROW_(__VA_ARGS__)

#define NO_LIVE NULL, NULL
#define APPLICABLE NULL

/* Live tests used by more than one entry. */
#define LIVE_BROKER_QUORUM "tests/bats/68-jetstream-flow.bats", \
	"kind jetstream: one node killed mid-load, the flow goes on; two killed, the slot's confirmed position stands still and capture says the broker holds it back, without exiting; nodes back: caught up, identical, CONVERGED"
#define LIVE_BROKER_FULL "tests/bats/68-jetstream-flow.bats", \
	"kind jetstream: a full stream (stream.max_bytes) holds capture back, the slot stands still and nothing is lost; stream retention removes only what applyd applied, and capture goes on: identical, CONVERGED"
#define LIVE_BROKER_KILLED "tests/bats/67-jetstream-capture.bats", \
	"capture killed -9 mid-load and restarted: every source transaction exactly once in the stream"
#define LIVE_CAPTURE_APPEND_ACK "tests/bats/20-capture.bats", \
	"capture.after_append_before_ack then restart: nothing missing, the duplicate skipped and counted"
#define LIVE_CONFIRMED_DURABLE "tests/bats/20-capture.bats", \
	"the slot's confirmed_flush_lsn never passes the stream's durable LSN"
#define LIVE_FSYNC_FAILURE "tests/bats/10-stream-durability.bats", \
	"an fdatasync failure acknowledges nothing and exits 73"
#define LIVE_RESENT_SKIPPED "tests/bats/20-capture.bats", \
	"after a reconnect the server's resent transactions are skipped, not appended again"
#define LIVE_BEFORE_TARGET_COMMIT "tests/bats/30-apply.bats", \
	"applyd.before_target_commit: the transactions are applied exactly once after restart"
#define LIVE_AFTER_TARGET_COMMIT "tests/bats/30-apply.bats", \
	"applyd.after_target_commit_before_group_ack: restart applies nothing twice, duplicates counted"
#define LIVE_MISSING_TABLE "tests/bats/30-apply.bats", \
	"a dropped target table quarantines missing_table; after repair, replay-ready applies it once"
#define LIVE_NO_ROWS_MATCHED "tests/bats/30-apply.bats", \
	"an UPDATE that matches no target row quarantines no_rows_matched; repaired and replayed it converges"
#define LIVE_TYPES_TOAST_KEYS "tests/bats/30-apply.bats", \
	"many column types, TOAST left unchanged, composite and changing keys, a FULL table without key: identical"
#define LIVE_DDL_EVIDENCE "tests/bats/20-capture.bats", \
	"DDL evidence: after check --fix, a schema change arrives as a ddl frame in its transaction, in order"
#define LIVE_SNAPSHOT_TWICE "tests/bats/40-snapshot.bats", \
	"running the same snapshot twice: the second copies nothing and says so"
#define LIVE_SNAPSHOT_MID_COPY "tests/bats/40-snapshot.bats", \
	"snapshot.mid_table_copy: the half copy is rolled back, the resume copies it whole: identical"
#define LIVE_SNAPSHOT_DDL "tests/bats/40-snapshot.bats", \
	"ALTER TABLE ADD COLUMN during a table's copy: no handoff until it is copied again"
#define LIVE_SNAPSHOT_FAILED "tests/bats/40-snapshot.bats", \
	"a table whose copy fails: the run is failed_recoverable with its reason before the retry, which copies only it"
#define LIVE_CAPTURE_REFUSES_NO_HANDOFF "tests/bats/40-snapshot.bats", \
	"capture refuses a flow whose snapshot is not handed off"
#define LIVE_CHUNK_TAMPERED "tests/bats/30-apply.bats", \
	"a tampered chunk, or a manifest whose chunk is missing, is rejected before anything is applied"
#define LIVE_CHUNK_CAPTURE_KILLED "tests/bats/32-apply-chunks.bats", \
	"capture, then applyd killed in the middle of a chunk set: the replay applies it exactly once"
#define LIVE_CHUNK_INVISIBLE "tests/bats/32-apply-chunks.bats", \
	"a 1 M-row chunk set stays invisible while applyd waits between its chunks, then appears whole"
#define LIVE_STRICT_CHUNKING_CONVERGES "tests/bats/30-apply.bats", \
	"strict chunking (100 changes per chunk): the same workload converges identically"
#define LIVE_TARGET_RECONNECT "tests/bats/30-apply.bats", \
	"a lost target connection is retried with backoff; nothing is lost or doubled"
#define LIVE_SLOT_POSTURE "tests/bats/21-check.bats", \
	"failover slots and idle_replication_slot_timeout: said explicitly when the server is too old for them"
#define LIVE_FAILOVER_AWAY "tests/bats/64-failover.bats", \
	"PostgreSQL 17+: a failover slot synchronized to the standby; promoted mid-load while capture is away: capture resumes on the new timeline, identical, CONVERGED"
#define LIVE_FAILOVER_STREAMING "tests/bats/64-failover.bats", \
	"PostgreSQL 17+: the primary dies under load while capture streams; promoted: capture reconnects to the promoted server by itself, skips what the standby's copy of the slot resends, identical, CONVERGED"
#define LIVE_PROMOTED_WITHOUT_SLOT "tests/bats/64-failover.bats", \
	"a promoted standby without the slot: capture stops with 65 and names the copy, status says so, and that copy converges from the promoted server"
#define LIVE_SLOT_INVALIDATED "tests/bats/64-failover.bats", \
	"a slot the source invalidated (max_slot_wal_keep_size, wal_status lost): capture stops at once with 65, status alerts slot_invalidated"
#define LIVE_BIG_TRANSACTION "tests/bats/20-capture.bats", \
	"a 200 000-row transaction arrives whole, once, with bounded capture memory"
#define LIVE_JETSTREAM_APPEND_ACK "tests/bats/67-jetstream-capture.bats", \
	"capture killed between the PubAcks and the source acknowledgement (capture.after_append_before_ack): the restart skips what the stream holds, counted, each transaction once"
#define LIVE_CUTOVER_KILLED_WAITING "tests/bats/63-cutover.bats", \
	"cutover killed (SIGKILL) while waiting for applyd, source locked: run again, it finishes; CONVERGED"
#define LIVE_CUTOVER_KILLED_AFTER_LOCK "tests/bats/63-cutover.bats", \
	"cutover killed (SIGKILL) right after the lock: the lock recorded and in force, the flow streaming; run again, it finishes; CONVERGED"
#define LIVE_CUTOVER_KILLED_BEFORE_STOP "tests/bats/63-cutover.bats", \
	"cutover killed (SIGKILL) after verify, before the stop: CONVERGED recorded, the flow streaming; run again, it only stops the flow"

/* Recovery commands used by more than one entry. */
#define RESTART_CAPTURE "none needed: automatic (trellara run restarts capture; alone: trellara capture --config FILE)"
#define RESTART_APPLYD "none needed: automatic (trellara run restarts applyd; alone: trellara applyd --config FILE)"
#define AUTOMATIC "none needed: automatic"
#define CUTOVER_RESUME                                                                                     \
	"trellara cutover --config FILE (goes on from the step its row records), or trellara cutover --config " \
	"FILE --abort (unlocks the source)"
#define PROMOTED_SOURCE \
	"point source.database_url at the promoted server, then trellara capture --config FILE (it records the new timeline)"
#define REPLAY_READY "trellara quarantine replay-ready --config FILE --transaction-id XID --commit-lsn LSN"
#define CHUNK_REPAIR                                                                                          \
	"trellara quarantine list --config FILE names it; restore the stream directory, then " REPLAY_READY \
	", or copy again: trellara snapshot --config FILE --force"
#define SNAPSHOT_RESUME "trellara snapshot --config FILE (resumes the run; nothing copied is copied twice)"
#define SLOT_POSTURE_CHECK "trellara check --config FILE (its failover_slots item names the fix)"
#define BROKER_QUORUM_BACK                                                                                    \
	"none needed: automatic once a majority of the stream's nodes runs again (capture publishes what it held " \
	"back, applyd reads again; trellara stream inspect --config FILE shows the leader and the replicas)"

/* Reasons a row does not apply to this project. */
#define NA_PARTITIONED                                                                                      \
	"Trellara has no partitioned scale mode: each transaction is applied by one applier in stream order, " \
	"and its only multi-frame form, the strict chunk set (chunks, manifest, commit marker), is rows 39 to 47."
#define NA_FLEET                                                                                            \
	"Trellara has no fleet fan-in: a flow is one source, one slot, one stream and one target, with no " \
	"stores, epochs or lake to merge."
#define NA_OBJECT_STORE                                                                                  \
	"Trellara writes to no object store and publishes no catalog: the target is a PostgreSQL database, " \
	"whose COMMIT alone makes a transaction visible."
#define NA_SOAK                                                                                             \
	"A 24-hour soak is not part of this project's runs (a run is bounded by --schedules); capture's memory " \
	"bound on large transactions is tested live instead."

const struct sim_scenario sim_scenarios[] = {
	/* ---- simulations: base (8) ---- */
	SIM("publish_ack_loss", "base", 2, "source_checkpoint_after_broker_ack",
	    "Capture dies after a transaction is durable in the stream but before it learns so; the restarted capture "
	    "skips the slot's resend, the source is never acknowledged past the stream's durable end, and the target "
	    "gets the transaction exactly once.",
	    LIVE_CAPTURE_APPEND_ACK, RESTART_CAPTURE, APPLICABLE),
	SIM("crash_after_publish_before_source_ack", "base", 2, "source_checkpoint_after_broker_ack",
	    "Capture is killed (with power loss) between the stream's fdatasync and the standby status update; the "
	    "slot resends from confirmed_flush, nothing is missing, and the duplicate is skipped and counted.",
	    LIVE_CAPTURE_APPEND_ACK, RESTART_CAPTURE, APPLICABLE),
	SIM("source_failover_after_publish_before_ack", "base", 3, "failover_slot_replay_preserves_transaction_boundary",
	    "The source is promoted to a standby whose slot lags the stream; capture accepts the higher timeline, skips "
	    "the resent transactions whole by commit LSN, and the target sees each source transaction once and never "
	    "in part.",
	    LIVE_FAILOVER_STREAMING, PROMOTED_SOURCE, APPLICABLE),
	SIM("duplicate_delivery", "base", 12, "transaction_dedup_before_reapply",
	    "The stream and the slot deliver transactions again (reconnects, restarts); the applier skips every commit "
	    "LSN at or below its checkpoint, counts the skip, and applies nothing twice.",
	    LIVE_RESENT_SKIPPED, AUTOMATIC, APPLICABLE),
	SIM("target_failure_before_commit", "base", 10, "target_checkpoint_same_transaction_as_apply",
	    "The target connection dies before COMMIT; the model target rolls the transaction and its checkpoint back "
	    "together, and the restarted applier applies it exactly once.",
	    LIVE_BEFORE_TARGET_COMMIT, RESTART_APPLYD, APPLICABLE),
	SIM("target_quarantine_repair_replay", "base", 60, "operator_replay_preserves_transaction_boundary",
	    "A transaction the target rejects is quarantined with nothing of it applied and the flow stops; after the "
	    "model operator repairs the target and releases that exact transaction, it is applied once, whole, before "
	    "any later one.",
	    LIVE_MISSING_TABLE, REPLAY_READY, APPLICABLE),
	SIM("checkpoint_failure_during_apply", "base", 10, "target_checkpoint_same_transaction_as_apply",
	    "The checkpoint write fails inside the apply transaction; the changes and the checkpoint are rolled back "
	    "together, so the target never holds changes its checkpoint does not account for.",
	    LIVE_BEFORE_TARGET_COMMIT, RESTART_APPLYD, APPLICABLE),
	SIM("stream_ack_loss_after_apply", "base", 11, "transaction_dedup_before_reapply",
	    "The applier dies after the target COMMIT but before its consumer-group position is written; on restart the "
	    "transactions read again are skipped by the target checkpoint and counted as duplicates.",
	    LIVE_AFTER_TARGET_COMMIT, RESTART_APPLYD, APPLICABLE),

	/* ---- simulations: snapshot handoff (6) ---- */
	SIM("snapshot_source_crash_during_table_copy", "snapshot handoff", 29,
	    "snapshot_source_failure_retries_before_handoff",
	    "The model source fails during a table's copy; the run retries at a fresh exported snapshot and records no "
	    "handoff until every table is copied.",
	    NO_LIVE, SNAPSHOT_RESUME, APPLICABLE),
	SIM("snapshot_relay_crash_during_table_copy", "snapshot handoff", 30, "snapshot_copy_idempotent_by_table",
	    "The snapshot process is killed in the middle of a table's copy; the half copy is rolled back and the "
	    "resumed run copies that table whole, once.",
	    LIVE_SNAPSHOT_MID_COPY, SNAPSHOT_RESUME, APPLICABLE),
	SIM("snapshot_target_crash_during_table_copy", "snapshot handoff", 31, "snapshot_copy_no_handoff_until_complete",
	    "The model target dies during a table's copy; nothing of that copy is committed and the run is not handed "
	    "off until the table is copied again completely.",
	    NO_LIVE, SNAPSHOT_RESUME, APPLICABLE),
	SIM("snapshot_duplicate_copy_attempt", "snapshot handoff", 27, "snapshot_copy_idempotent_by_run_and_table",
	    "The same run is started again after tables were copied; no table of the run is copied twice and the target "
	    "rows equal the source's at the snapshot.",
	    LIVE_SNAPSHOT_TWICE, AUTOMATIC, APPLICABLE),
	SIM("snapshot_ddl_during_table_copy", "snapshot handoff", 58, "snapshot_contract_before_handoff",
	    "A table's schema changes on the model source while it is copied; its fingerprints disagree, the copy is "
	    "not accepted, and there is no handoff until it is copied again.",
	    LIVE_SNAPSHOT_DDL, "trellara snapshot --config FILE (copies the changed table again)", APPLICABLE),
	SIM("snapshot_handoff_recorded_before_stream_start", "snapshot handoff", 59,
	    "snapshot_handoff_before_stream_checkpoint",
	    "Streaming starts only after the handoff is durably recorded: capture refuses a flow without it, and the "
	    "applier skips changes below each table's watermark and applies those at or above it.",
	    LIVE_CAPTURE_REFUSES_NO_HANDOFF, "trellara snapshot --config FILE (records the handoff), then trellara capture --config FILE",
	    APPLICABLE),

	/* ---- simulations: strict chunk (5) ---- */
	SIM("strict_chunk_relay_crash_after_chunks_before_manifest", "strict chunk", 41,
	    "strict_chunk_manifest_required_before_apply",
	    "Capture dies after some chunks of a set are durable and before the manifest; the applier commits nothing "
	    "of the set, discards it when the replay's chunk 0 arrives, and applies the replay once.",
	    LIVE_CHUNK_CAPTURE_KILLED, RESTART_CAPTURE, APPLICABLE),
	SIM("strict_chunk_relay_crash_after_manifest_before_source_ack", "strict chunk", 43,
	    "strict_chunk_source_ack_after_manifest_publish",
	    "Capture dies after the manifest and commit marker are durable but before the source is acknowledged; the "
	    "slot's resend of the whole set is skipped and the target has the transaction once.",
	    NO_LIVE, RESTART_CAPTURE, APPLICABLE),
	SIM("strict_chunk_manifest_arrives_with_missing_chunk", "strict chunk", 39, "strict_chunk_manifest_barrier_before_apply",
	    "A manifest lists a chunk that never arrived; the applier rolls the set back and quarantines it as "
	    "chunk_integrity with nothing applied.",
	    LIVE_CHUNK_TAMPERED, CHUNK_REPAIR, APPLICABLE),
	SIM("strict_chunk_manifest_arrives_before_chunks", "strict chunk", 40, "strict_chunk_manifest_waits_for_completeness",
	    "A manifest or commit marker comes before its chunks; the applier never commits on it and fails closed as "
	    "chunk_integrity with nothing applied.",
	    NO_LIVE, CHUNK_REPAIR, APPLICABLE),
	SIM("strict_chunk_target_crash_after_staging_before_commit", "strict chunk", 44,
	    "strict_chunk_stage_not_visible_before_target_commit",
	    "The target dies while a chunk set's changes are staged in its open transaction; none of them is visible "
	    "before the commit marker's COMMIT, and the restarted applier applies the set once.",
	    LIVE_CHUNK_INVISIBLE, RESTART_APPLYD, APPLICABLE),

	/* ---- simulations: fleet fan-in (4) ---- */
	SIM("fleet_fanin_offline_stores_publish_with_gaps", "fleet fan-in", 49, "lake_epoch_gaps_are_explicit",
	    "Stores that were offline publish with gaps and the epoch says so.", NO_LIVE, NULL, NA_FLEET),
	SIM("fleet_fanin_late_store_recovery_completes_epoch", "fleet fan-in", 50, "late_sources_recompute_epoch_completeness",
	    "A late store's recovery completes its epoch.", NO_LIVE, NULL, NA_FLEET),
	SIM("fleet_fanin_duplicate_store_transaction_replay", "fleet fan-in", 51,
	    "fleet_fanin_deduplicates_by_transaction_boundary",
	    "A store's replayed transaction is merged once.", NO_LIVE, NULL, NA_FLEET),
	SIM("fleet_fanin_conflicting_duplicate_quarantine", "fleet fan-in", 52, "fleet_fanin_conflicting_duplicates_fail_closed",
	    "Conflicting duplicates from stores are quarantined.", NO_LIVE, NULL, NA_FLEET),

	/* ---- simulations: qualification (5) ---- */
	SIM("qualification_source_promotion_while_relay_disconnected", "qualification", 53,
	    "promoted_source_replays_from_last_durable_ack",
	    "The source is promoted while capture is disconnected; the reconnected capture resumes from the last "
	    "position the stream made durable, with nothing missing and nothing applied twice.",
	    LIVE_FAILOVER_AWAY, PROMOTED_SOURCE, APPLICABLE),
	SIM("qualification_broker_outage_quorum_loss", "qualification", 54, "source_ack_waits_for_broker_quorum",
	    "The stream is the replicated broker model (3 nodes, quorum 2); one node, or two, go down for a while and "
	    "come back.  With one down the flow goes on, each publish stored by a majority.  With two down the leader "
	    "stores publishes alone, without a PubAck, until it steps down; capture's JetStream sink holds its batch "
	    "back, capture stops reading the source, and the slot's confirmed position stays within what a quorum "
	    "held when it was lost; applyd's reads fail (STREAM_EUNAVAILABLE) and it reconnects later.  Once the "
	    "nodes are back (replicas catch up from the leader, a lone leader's tail is committed or dropped), every "
	    "transaction arrives once.",
	    LIVE_BROKER_QUORUM, BROKER_QUORUM_BACK, APPLICABLE),
	SIM("qualification_target_restart_during_apply", "qualification", 55, "target_restart_replays_uncheckpointed_apply",
	    "The target restarts while batches are in flight; the applier reconnects, replays what its checkpoint does "
	    "not cover, and the target ends equal to the source with every transaction applied once.",
	    LIVE_TARGET_RECONNECT, AUTOMATIC, APPLICABLE),
	SIM("qualification_object_store_success_catalog_timeout", "qualification", 56,
	    "catalog_timeout_cannot_publish_uncommitted_epoch",
	    "An object written before a catalog timeout is never published.", NO_LIVE, NULL, NA_OBJECT_STORE),
	SIM("qualification_twenty_four_hour_soak_large_transaction_memory_ceiling", "qualification", 57,
	    "soak_large_transactions_stay_within_memory_ceiling",
	    "Large transactions over a day stay within the memory ceiling.", LIVE_BIG_TRANSACTION, NULL, NA_SOAK),

	/* ---- simulations: cutover (3), the project's own: not in the matrix ---- */
	SIM("cutover_killed_after_lock", "cutover", 0, "cutover_final_lsn_covers_every_source_commit",
	    "trellara cutover --lock-source is killed at cutover.after_lock (the source locked, the row locked), and at "
	    "random after every recorded step, and run again, sometimes with --abort; the real cutplan_next() reads the "
	    "final LSN after the lock, so it covers every source commit, applyd applies through it, the cutover "
	    "completes, and an aborted or failed run leaves the source writable.",
	    LIVE_CUTOVER_KILLED_AFTER_LOCK, CUTOVER_RESUME, APPLICABLE),
	SIM("cutover_killed_while_waiting_for_apply", "cutover", 0, "cutover_completes_after_any_kill",
	    "The cutover is killed at cutover.wait_apply with the final LSN recorded and the source locked (and at "
	    "random after every recorded step); the next run waits again until applyd is through the final LSN, syncs "
	    "the sequences (never backwards, none behind the source's), verifies and cuts over.",
	    LIVE_CUTOVER_KILLED_WAITING, CUTOVER_RESUME, APPLICABLE),
	SIM("cutover_killed_before_stop", "cutover", 0, "cutover_records_only_converged",
	    "The cutover is killed at cutover.before_stop, verify CONVERGED and recorded; the next run only stops the "
	    "supervisor and records cut_over, and verified, stopping and cut_over are never recorded without a "
	    "CONVERGED verify that held (applied through the final LSN, sequences synced).",
	    LIVE_CUTOVER_KILLED_BEFORE_STOP, CUTOVER_RESUME, APPLICABLE),

	/* ---- simulations: broker (2), the project's own: not in the matrix ---- */
	SIM("broker_leftovers_after_capture_restart", "broker", 0, "source_checkpoint_after_broker_ack",
	    "On the replicated broker model, the leader's two followers go down while capture publishes: the leader "
	    "stores the frames without a quorum and sends no PubAck.  Capture is killed and restarts while they are "
	    "down, reading the stream's committed end; the followers return and the leader commits the killed run's "
	    "frames after all.  The new run's first publishes are refused (wrong last sequence), and a later frame of "
	    "its batch could be stored where those messages made its expected sequence come true: capture publishes "
	    "one frame at a time until one of its run is stored, counts only the stored prefix, and never acknowledges "
	    "the source past what a quorum holds.",
	    NO_LIVE, RESTART_CAPTURE, APPLICABLE),
	SIM("broker_host_crash_loses_unsynced", "broker", 0, "source_checkpoint_after_broker_ack",
	    "On the replicated broker model (3 replicas), the host of the stream's leader crashes while capture "
	    "publishes: the node loses every message its file store had not synced (Debian's nats-server 2.9.10 "
	    "syncs on a fixed two-minute interval: nothing within a run).  The two other replicas hold what was "
	    "acknowledged, one of them is elected, and the crashed node catches up when it is back; capture "
	    "acknowledged the source only on PubAcks, so nothing acknowledged is lost and the target ends equal "
	    "to the source.  With one replica the same crash loses acknowledged transactions "
	    "(tests/mutants/broker_single_replica): why stream.replicas below 3 is refused unless the flow "
	    "accepts the loss by name.",
	    NO_LIVE, RESTART_CAPTURE, APPLICABLE),

	/* ---- simulations: snapshot split (3), the project's own: not in the matrix ---- */
	SIM("snapshot_split_killed_after_range_commit", "snapshot split", 0,
	    "snapshot_split_resume_keeps_only_unchanged_ranges",
	    "Every table is copied in three ranges, each committed with its progress row and the hash of what it read; "
	    "trellara-snapshot is killed at snapshot.after_range_commit and run again later, at a new snapshot, while "
	    "the source goes on.  The resume reads each range copied before the kill again and keeps it only when the "
	    "real run_range_reads_same() says it reads the same, copies the rest, and the table, once its last range is "
	    "in, is exactly the source's at the resume's snapshot, its watermark.",
	    "tests/bats/43-snapshot-split.bats",
	    "a split table killed mid-copy resumes only its unfinished ranges: identical, CONVERGED", SNAPSHOT_RESUME,
	    APPLICABLE),
	SIM("snapshot_split_range_changed_before_resume", "snapshot split", 0,
	    "snapshot_split_resume_keeps_only_unchanged_ranges",
	    "As above, on seeds where a row of a range copied before the kill changes (or moves in or out) before the "
	    "resume: the range reads differently, the table is emptied and copied whole again at the new snapshot, and "
	    "ends exactly the source's there; no range writes a key the target already holds.",
	    "tests/bats/43-snapshot-split.bats",
	    "a range copied before the kill whose rows changed since: the resume copies the table whole again",
	    SNAPSHOT_RESUME, APPLICABLE),
	SIM("snapshot_split_killed_mid_range", "snapshot split", 0, "snapshot_split_resume_keeps_only_unchanged_ranges",
	    "trellara-snapshot is killed at snapshot.mid_table_copy inside a range's COPY: that range's transaction "
	    "rolls back (no rows, no progress row), the ranges committed before it stand, and the resume copies the "
	    "range again, once; the table ends exactly the source's at its watermark and is handed off only whole.",
	    LIVE_SNAPSHOT_MID_COPY, SNAPSHOT_RESUME, APPLICABLE),

	/* ---- the curated matrix ---- */
	ROW(1, "relay_before_broker_publish", "strict_transaction_order", "source_checkpoint_after_broker_ack",
	    "On the replicated broker model, capture is killed at capture.before_sync: a batch's frames are queued in "
	    "its JetStream sink and none is published.  The slot's confirmed position never passes a transaction a "
	    "majority of the nodes does not hold; the restarted capture reads the stream's end from its last messages "
	    "and publishes the slot's resend whole, once.",
	    LIVE_BROKER_KILLED, RESTART_CAPTURE, APPLICABLE),
	ROW(2, "relay_after_broker_publish_before_source_feedback", "strict_transaction_order",
	    "source_checkpoint_after_broker_ack",
	    "On the replicated broker model, capture is killed at capture.after_append_before_ack: every frame of the "
	    "batch has its PubAck (a majority of the nodes holds it) and the standby status update is not sent; the "
	    "restart reads the stream's end from the broker, skips the slot's resend, and the target gets each "
	    "transaction once.",
	    LIVE_JETSTREAM_APPEND_ACK, RESTART_CAPTURE, APPLICABLE),
	ROW(3, "source_failover_after_publish_before_ack", "strict_transaction_order_with_failover_slot",
	    "failover_slot_replay_preserves_transaction_boundary",
	    "After a promotion whose slot lags the stream, resent transactions are skipped whole by commit LSN and no "
	    "target commit exposes part of one.",
	    LIVE_FAILOVER_STREAMING, PROMOTED_SOURCE, APPLICABLE),
	ROW(4, "source_failover_slot_unsynced", "source_failover_readiness", "failover_slot_sync_before_promotion",
	    "Trellara does not gate the promotion (the server does, and on PostgreSQL 17+ the standby synchronizes the "
	    "failover slot Trellara creates); the simulator promotes a standby that has no copy of the slot: capture's "
	    "real slot_policy_decide() stops it with exit 65 (lost_at_promotion), never a new slot that would skip the "
	    "transactions in between, and the operator's copy of the whole flow from the promoted source converges "
	    "with no committed transaction skipped.",
	    LIVE_PROMOTED_WITHOUT_SLOT, "trellara snapshot --config FILE --force (from the promoted server)", APPLICABLE),
	ROW(5, "source_failover_slot_disabled", "source_failover_readiness", "failover_slot_enabled_before_promotion",
	    "Whether the slot is a failover slot (PostgreSQL 17+) is trellara check's failover_slots item against the "
	    "live server; a promotion without one leaves the promoted server without the slot, which the simulator "
	    "promotes to: capture stops with exit 65 (lost_at_promotion), and the copy of the whole flow converges with "
	    "no committed transaction skipped.",
	    LIVE_SLOT_POSTURE, SLOT_POSTURE_CHECK "; after such a promotion: trellara snapshot --config FILE --force",
	    APPLICABLE),
	ROW(6, "source_slot_abandoned_idle_timeout", "source_safety_slot_lifecycle", "inactive_slot_cleanup_posture_is_explicit",
	    "The server invalidates the slot while no session uses it (idle_replication_slot_timeout, PostgreSQL 18; "
	    "trellara check reports it and max_slot_wal_keep_size): capture's real slot_policy_decide() stops it at once "
	    "with exit 65 (invalidated), never a new slot, and the operator's copy of the whole flow converges with no "
	    "committed transaction skipped.",
	    LIVE_SLOT_INVALIDATED,
	    "trellara check --config FILE (its idle_replication_slot_timeout and max_slot_wal_keep_size items); "
	    "after an invalidation: trellara snapshot --config FILE --force",
	    APPLICABLE),
	ROW(7, "broker_publish_failure", "strict_transaction_order", "source_checkpoint_after_broker_ack",
	    "On the replicated broker model, publishes are refused (nothing stored) or stored with their PubAck lost, "
	    "a few steps at a time.  Capture's JetStream sink holds the batch back, capture stops reading the source "
	    "and acknowledges nothing past the last stored transaction, then publishes the batch again: a repeat of a "
	    "stored message is answered as a duplicate of it by its Nats-Msg-Id, so nothing is missing and nothing is "
	    "stored twice.",
	    LIVE_BROKER_FULL,
	    "none needed: automatic (capture publishes again until the stream stores; a full stream: trellara stream "
	    "retention --config FILE --apply)",
	    APPLICABLE),
	ROW(8, "local_stream_index_rebuild", "brokerless_local_stream", "local_index_rebuild_preserves_replay_offsets",
	    "After a crash or power loss that loses or tears a segment's index, recovery rebuilds it from the frames "
	    "and every acknowledged offset reads back the same frame.",
	    "tests/bats/10-stream-durability.bats",
	    "kill -9 after sync, before the index write: frames kept, index rebuilt, nothing lost",
	    "none needed: automatic (the next writer rebuilds the index from the frames)", APPLICABLE),
	ROW(9, "local_stream_publish_ack_after_fsync_durability", "brokerless_local_stream",
	    "source_ack_after_local_fsync_durability",
	    "On simulated power loss every frame capture acknowledged to the source survives: no acknowledgement is "
	    "ever ahead of fdatasync.",
	    LIVE_FSYNC_FAILURE, AUTOMATIC, APPLICABLE),
	ROW(10, "applier_before_target_commit", "strict_transaction_order", "target_checkpoint_same_transaction_as_apply",
	    "The applier dies before the target COMMIT; neither the changes nor the checkpoint are visible and the "
	    "restart applies the transactions exactly once.",
	    LIVE_BEFORE_TARGET_COMMIT, RESTART_APPLYD, APPLICABLE),
	ROW(11, "applier_after_target_commit_before_stream_ack", "strict_transaction_order", "transaction_dedup_before_reapply",
	    "The applier dies after the target COMMIT and before the consumer-group position; the restart skips what "
	    "the checkpoint covers and counts the duplicates.",
	    LIVE_AFTER_TARGET_COMMIT, RESTART_APPLYD, APPLICABLE),
	ROW(12, "duplicate_transaction_replay", "strict_transaction_order", "transaction_dedup_before_reapply",
	    "A transaction delivered again (by the slot or the stream) is never applied twice: skipped by commit LSN "
	    "and counted.",
	    LIVE_RESENT_SKIPPED, AUTOMATIC, APPLICABLE),
	ROW(13, "target_schema_missing", "strict_transaction_order", "fail_closed_target_contract",
	    "A change for a table the target lacks quarantines its transaction (missing_table) with nothing applied, "
	    "and no later transaction overtakes it.",
	    LIVE_MISSING_TABLE, "create the table on the target, then " REPLAY_READY, APPLICABLE),
	ROW(14, "target_update_delete_zero_rows", "strict_transaction_order", "no_silent_target_divergence",
	    "An update or delete that matches no target row quarantines its transaction (no_rows_matched) instead of "
	    "being skipped.",
	    LIVE_NO_ROWS_MATCHED,
	    "restore the row on the target (or trellara reseed --config FILE --table SCHEMA.TABLE), then " REPLAY_READY,
	    APPLICABLE),
	ROW(15, "filtered_reseed_preserves_out_of_scope_rows", "filtered_reseed_repair", "row_filter_reseed_scope_is_preserved",
	    "A reseed under a row filter leaves rows outside the filter alone.", NO_LIVE, NULL,
	    "Trellara does not replicate through row filters: trellara check reports a published table with a row "
	    "filter as a blocker, so a reseed never has a filtered scope to preserve."),
	ROW(16, "pgoutput_schema_change_during_stream", "pgoutput_relation_metadata", "source_schema_fingerprint_fail_closed",
	    "A flow table renamed (the same relation OID under another name) on the model source while capture "
	    "streams stops capture's core (exit 78) at the Relation message that shows it, with nothing of that "
	    "transaction or after it in the stream or acknowledged and every transaction before it durable; its "
	    "changes are never skipped as a table outside the dataset.",
	    "tests/bats/23-capture-schema-changes.bats",
	    "a flow table renamed on the source while streaming: capture stops (78) naming it and the next step; "
	    "nothing after it is applied; followed, the flow resumes and converges",
	    "do the same rename on the target, write the new name in dataset.tables, then start capture and applyd "
	    "again",
	    APPLICABLE),
	ROW(17, "pgoutput_row_without_relation_metadata", "pgoutput_relation_metadata",
	    "relation_metadata_required_before_rows",
	    "A row message for a relation the model source sent no Relation message for stops capture (exit 65) with "
	    "nothing of the transaction in the stream and nothing acknowledged.",
	    NO_LIVE, "capture stops with exit 65 and acknowledges nothing; once the cause is fixed, trellara capture --config FILE resumes from the slot",
	    APPLICABLE),
	ROW(18, "source_schema_handoff_recovery", "pgoutput_relation_metadata", "schema_drift_requires_fresh_snapshot_handoff",
	    "A flow table dropped and created again under its name (another relation OID) on the model source while "
	    "capture streams stops capture's core (exit 78) at its first Relation message, nothing of it in the "
	    "stream or acknowledged: the target holds the old relation's rows, and only a fresh copy of the table "
	    "goes on (a change of columns alone is applied or quarantined by applyd, rows 13 and 14; drift during a "
	    "copy is row 58).",
	    "tests/bats/23-capture-schema-changes.bats",
	    "a flow table dropped and created again while streaming: capture stops (78): the target holds the old "
	    "relation's rows",
	    "trellara reseed --config FILE --table SCHEMA.TABLE, then start capture again", APPLICABLE),
	ROW(19, "pgoutput_dml_truncate_envelope_mapping", "pgoutput_relation_metadata", "pgoutput_dml_maps_to_transaction_envelope",
	    "Inserts, updates (with and without key changes), deletes and truncates, encoded as real pgoutput and "
	    "decoded by the real decoder and assembler, reach the envelope with the source's values and order.",
	    "tests/bats/20-capture.bats",
	    "inserts, updates, deletes and truncates on two tables arrive in commit order with their values", AUTOMATIC,
	    APPLICABLE),
	ROW(20, "pgoutput_ddl_only_boundary", "pgoutput_transaction_boundary", "ddl_only_transaction_preserves_commit_boundary",
	    "A transaction holding only DDL evidence keeps its own commit boundary: its ddl frame carries its xid and "
	    "commit LSN and moves the acknowledged position like any transaction.",
	    NO_LIVE, AUTOMATIC, APPLICABLE),
	ROW(21, "pgoutput_mixed_ddl_dml_boundary", "pgoutput_transaction_boundary", "mixed_ddl_dml_transaction_preserves_total_order",
	    "A transaction mixing DDL evidence and row changes arrives as one unit with the DDL and the rows in the "
	    "source's order and one commit LSN.",
	    LIVE_DDL_EVIDENCE, AUTOMATIC, APPLICABLE),
	ROW(22, "pgoutput_keepalive_reports_last_durable_ack", "pgoutput_replication_protocol",
	    "keepalive_ack_uses_last_durable_boundary",
	    "Every standby status update, keepalive replies included, reports a position no later than the last "
	    "transaction boundary or watermark the stream made durable.",
	    LIVE_CONFIRMED_DURABLE, AUTOMATIC, APPLICABLE),
	ROW(23, "missing_replica_identity", "strict_transaction_order", "preflight_before_cdc_start",
	    "An update or delete on a table with neither a key nor an old row is never guessed: its transaction fails "
	    "closed (quarantined, apply_error) instead of changing some row.",
	    "tests/bats/21-check.bats",
	    "a table without a primary key and with REPLICA IDENTITY DEFAULT is a blocker naming it, with its ALTER TABLE fix",
	    "add a primary key or ALTER TABLE ... REPLICA IDENTITY FULL on the source, as trellara check --config FILE prints",
	    APPLICABLE),
	ROW(24, "default_replica_identity_primary_key_apply", "strict_transaction_order", "primary_key_predicate_apply_without_full",
	    "Updates and deletes under REPLICA IDENTITY DEFAULT match the target row by its primary key alone and "
	    "change exactly one row.",
	    LIVE_TYPES_TOAST_KEYS, AUTOMATIC, APPLICABLE),
	ROW(25, "default_replica_identity_key_change_apply", "strict_transaction_order",
	    "primary_key_moves_match_old_key_and_set_new_key",
	    "An update that changes the primary key matches the row by its old key and leaves it at the new key.",
	    LIVE_TYPES_TOAST_KEYS, AUTOMATIC, APPLICABLE),
	ROW(26, "unchanged_toast_columns_preserved", "pgoutput_relation_metadata", "absent_toast_columns_are_unchanged",
	    "Columns sent as unchanged TOAST keep the target's value; only the columns sent are written.",
	    LIVE_TYPES_TOAST_KEYS, AUTOMATIC, APPLICABLE),
	ROW(27, "snapshot_duplicate_copy_attempt", "initial_snapshot_to_stream_handoff", "snapshot_copy_idempotent_by_run_and_table",
	    "Running the same snapshot run again copies no table twice.", LIVE_SNAPSHOT_TWICE, AUTOMATIC, APPLICABLE),
	ROW(28, "snapshot_incomplete_copy_resume", "initial_snapshot_to_stream_handoff", "snapshot_handoff_requires_complete_tables",
	    "A run with a table not yet copied is never handed off; the resumed run copies what is missing and only "
	    "then records the handoff.",
	    "tests/bats/40-snapshot.bats",
	    "snapshot.after_copy_before_handoff: nothing copied twice, handoff recorded once: identical", SNAPSHOT_RESUME,
	    APPLICABLE),
	ROW(29, "snapshot_source_crash_during_copy", "initial_snapshot_to_stream_handoff",
	    "snapshot_source_failure_retries_before_handoff",
	    "A source failure during a copy is retried at a fresh exported snapshot before any handoff.", NO_LIVE,
	    SNAPSHOT_RESUME, APPLICABLE),
	ROW(30, "snapshot_relay_crash_during_copy", "initial_snapshot_to_stream_handoff", "snapshot_copy_idempotent_by_table",
	    "A snapshot process killed during a copy leaves no half table: the resume copies it whole, once.",
	    LIVE_SNAPSHOT_MID_COPY, SNAPSHOT_RESUME, APPLICABLE),
	ROW(31, "snapshot_target_crash_during_copy", "initial_snapshot_to_stream_handoff", "snapshot_copy_no_handoff_until_complete",
	    "A target failure during a copy commits nothing of it and blocks the handoff until the table is copied "
	    "again.",
	    NO_LIVE, SNAPSHOT_RESUME, APPLICABLE),
	ROW(32, "snapshot_copy_failure_marked_recoverable", "initial_snapshot_to_stream_handoff",
	    "snapshot_failure_state_is_durable_before_retry",
	    "A failed copy leaves the run in a durable failed_recoverable state, with its reason, before any retry.",
	    LIVE_SNAPSHOT_FAILED, "trellara snapshot status --config FILE shows the run; trellara snapshot --config FILE retries it",
	    APPLICABLE),
	ROW(33, "snapshot_invalid_state_regression", "initial_snapshot_to_stream_handoff",
	    "snapshot_state_machine_monotonic_until_recoverable",
	    "Run states move only along the state machine's edges: a move backwards, or out of a final state, is "
	    "refused and changes nothing.",
	    NO_LIVE, "none needed: automatic (the move is refused)", APPLICABLE),
	ROW(34, "snapshot_exported_visibility_boundary", "initial_snapshot_to_stream_handoff", "snapshot_copy_uses_exported_lsn_boundary",
	    "Every table is copied at the exported snapshot and streaming applies exactly the changes after its "
	    "watermark: no gap, no overlap.",
	    "tests/bats/40-snapshot.bats",
	    "a snapshot of 4 tables (one of 1 000 000 rows) while pgbench writes, then streaming: identical, no gap, no overlap",
	    AUTOMATIC, APPLICABLE),
	ROW(35, "partition_manifest_missing_chunk", "partitioned_scale_mode", "manifest_barrier_before_partition_apply",
	    "A partition manifest missing a chunk blocks partition apply.", NO_LIVE, NULL, NA_PARTITIONED),
	ROW(36, "partition_chunk_routing_header_mismatch", "partitioned_scale_mode",
	    "partition_chunk_headers_are_apply_trust_boundary",
	    "A chunk whose routing header disagrees is refused.", NO_LIVE, NULL, NA_PARTITIONED),
	ROW(37, "partition_commit_marker_ack_ambiguous", "partitioned_scale_mode",
	    "partition_source_checkpoint_waits_for_commit_marker_ack",
	    "The source checkpoint waits for the partition commit marker's acknowledgement.", NO_LIVE, NULL, NA_PARTITIONED),
	ROW(38, "partition_commit_marker_manifest_mismatch", "partitioned_scale_mode",
	    "partition_commit_marker_matches_manifest_before_apply",
	    "A partition commit marker must match its manifest.", NO_LIVE, NULL, NA_PARTITIONED),
	ROW(39, "strict_chunk_manifest_missing_chunk", "strict_chunked_transaction_order", "strict_chunk_manifest_barrier_before_apply",
	    "A manifest that lists a chunk which is not in the stream quarantines the set (chunk_integrity) with nothing "
	    "applied.",
	    LIVE_CHUNK_TAMPERED, CHUNK_REPAIR, APPLICABLE),
	ROW(40, "strict_chunk_out_of_order_arrival", "strict_chunked_transaction_order", "strict_chunk_manifest_waits_for_completeness",
	    "Chunks out of order, or a manifest or commit marker before its chunks, never commit: the set fails closed "
	    "as chunk_integrity.",
	    NO_LIVE, CHUNK_REPAIR, APPLICABLE),
	ROW(41, "strict_chunk_relay_crash_after_chunks_before_manifest", "strict_chunked_transaction_order",
	    "strict_chunk_manifest_required_before_apply",
	    "Chunks without their manifest are never committed; the replay of the set after capture's restart is "
	    "applied once.",
	    LIVE_CHUNK_CAPTURE_KILLED, RESTART_CAPTURE, APPLICABLE),
	ROW(42, "strict_chunk_partial_publish_failure", "strict_chunked_transaction_order",
	    "source_checkpoint_waits_for_all_barrier_messages",
	    "When writing a set fails part way (a failed append or fdatasync), the source is not acknowledged past the "
	    "transaction until its chunks, manifest and commit marker are all durable.",
	    NO_LIVE, RESTART_CAPTURE, APPLICABLE),
	ROW(43, "strict_chunk_relay_crash_after_manifest_before_source_ack", "strict_chunked_transaction_order",
	    "strict_chunk_source_ack_after_manifest_publish",
	    "The source is acknowledged past a chunked transaction only after its manifest and commit marker are "
	    "durable; the resend after a crash there is skipped.",
	    NO_LIVE, RESTART_CAPTURE, APPLICABLE),
	ROW(44, "strict_chunk_target_crash_after_staging_before_commit", "strict_chunked_transaction_order",
	    "strict_chunk_stage_not_visible_before_target_commit",
	    "No change of a chunk set is visible on the target before its COMMIT, across target and applier crashes.",
	    LIVE_CHUNK_INVISIBLE, RESTART_APPLYD, APPLICABLE),
	ROW(45, "protocol_property_chunk_manifest_reconstruction", "strict_chunked_or_partitioned_barrier",
	    "manifest_barriers_reconstruct_source_order_for_all_generated_inputs",
	    "For every generated transaction, chunking it and applying the chunks, manifest and commit marker "
	    "reproduces exactly the source transaction's changes in order.",
	    LIVE_STRICT_CHUNKING_CONVERGES, AUTOMATIC, APPLICABLE),
	ROW(46, "strict_chunk_checksum_tampering", "strict_chunked_transaction_order", "chunk_checksum_mismatch_fails_closed",
	    "A chunk whose CRC-32C or change count disagrees with the manifest quarantines the set (chunk_integrity) "
	    "with nothing applied.",
	    LIVE_CHUNK_TAMPERED, CHUNK_REPAIR, APPLICABLE),
	ROW(47, "barrier_conflicting_duplicate_messages", "strict_chunked_or_partitioned_barrier",
	    "conflicting_duplicate_barrier_messages_fail_closed",
	    "Two different chunks, manifests or commit markers for the same position fail closed (chunk_integrity), "
	    "never applying either silently.",
	    NO_LIVE, CHUNK_REPAIR, APPLICABLE),
	ROW(48, "partition_applier_before_ack", "partitioned_scale_mode", "manifest_checkpoint_same_transaction_as_apply",
	    "The partition applier's manifest checkpoint commits with its apply.", NO_LIVE, NULL, NA_PARTITIONED),
	ROW(49, "fleet_fanin_offline_stores_publish_with_gaps", "fleet_fanin_epoch_completeness", "lake_epoch_gaps_are_explicit",
	    "Stores that were offline publish with gaps and the epoch says so.", NO_LIVE, NULL, NA_FLEET),
	ROW(50, "fleet_fanin_late_store_recovery", "fleet_fanin_epoch_completeness", "late_sources_recompute_epoch_completeness",
	    "A late store's recovery recomputes the epoch's completeness.", NO_LIVE, NULL, NA_FLEET),
	ROW(51, "fleet_fanin_duplicate_store_replay", "fleet_fanin_epoch_completeness",
	    "fleet_fanin_deduplicates_by_transaction_boundary",
	    "A store's replay is merged once by transaction boundary.", NO_LIVE, NULL, NA_FLEET),
	ROW(52, "fleet_fanin_conflicting_duplicate_quarantine", "fleet_fanin_epoch_completeness",
	    "fleet_fanin_conflicting_duplicates_fail_closed",
	    "Conflicting duplicates from stores fail closed.", NO_LIVE, NULL, NA_FLEET),
	ROW(53, "qualification_source_promotion_while_relay_disconnected", "source_failover_slot_to_relay_restart",
	    "promoted_source_replays_from_last_durable_ack",
	    "After a promotion while capture was away, it resumes from the last durable acknowledgement with nothing "
	    "missing or doubled.",
	    LIVE_FAILOVER_AWAY, PROMOTED_SOURCE, APPLICABLE),
	ROW(54, "qualification_broker_outage_quorum_loss", "broker_quorum_publish_ack", "source_ack_waits_for_broker_quorum",
	    "On the replicated broker model (3 nodes), one node and then two are lost for a while: the flow goes on "
	    "with one lost; with the quorum lost no publish gets a PubAck, capture is held back and the slot's "
	    "confirmed position stays within what a quorum held; once the nodes are back everything arrives once.",
	    LIVE_BROKER_QUORUM, BROKER_QUORUM_BACK, APPLICABLE),
	ROW(55, "qualification_target_restart_during_apply", "target_apply_transaction_commit",
	    "target_restart_replays_uncheckpointed_apply",
	    "A target restart during apply loses and doubles nothing: what the checkpoint does not cover is applied "
	    "again, once.",
	    LIVE_TARGET_RECONNECT, AUTOMATIC, APPLICABLE),
	ROW(56, "qualification_object_store_success_catalog_timeout", "object_store_write_before_catalog_visibility",
	    "catalog_timeout_cannot_publish_uncommitted_epoch",
	    "An object written before a catalog timeout is never published.", NO_LIVE, NULL, NA_OBJECT_STORE),
	ROW(57, "qualification_twenty_four_hour_soak_large_transaction_memory_ceiling",
	    "large_transaction_stream_spill_memory_ceiling", "soak_large_transactions_stay_within_memory_ceiling",
	    "Large transactions over a day stay within the memory ceiling.", LIVE_BIG_TRANSACTION, NULL, NA_SOAK),
	ROW(58, "snapshot_ddl_during_copy", "initial_snapshot_to_stream_handoff", "snapshot_contract_before_handoff",
	    "A schema change during a table's copy makes its fingerprints disagree: no handoff until it is copied "
	    "again.",
	    LIVE_SNAPSHOT_DDL, "trellara snapshot --config FILE (copies the changed table again)", APPLICABLE),
	ROW(59, "snapshot_handoff_recorded_before_stream_start", "initial_snapshot_to_stream_handoff",
	    "snapshot_handoff_before_stream_checkpoint",
	    "No stream checkpoint exists before the handoff is durable: capture refuses a flow that is not handed off.",
	    LIVE_CAPTURE_REFUSES_NO_HANDOFF, "trellara snapshot --config FILE (records the handoff), then trellara capture --config FILE",
	    APPLICABLE),
	ROW(60, "repair_and_replay_ready", "strict_transaction_order_or_partitioned_scale_mode",
	    "operator_replay_preserves_transaction_boundary",
	    "A quarantined transaction released after repair is applied alone, whole and once, before any later "
	    "transaction, and its quarantine row is resolved in the same target transaction.",
	    LIVE_NO_ROWS_MATCHED, "repair the target, then " REPLAY_READY, APPLICABLE),
	ROW(61, "quarantine_replay_ready_requires_exact_boundary", "strict_transaction_order_or_partitioned_scale_mode",
	    "replay_ready_requires_exact_quarantine_boundary",
	    "A release naming any other xid or commit LSN than the quarantined transaction's is refused and changes "
	    "nothing; the flow stays stopped.",
	    LIVE_MISSING_TABLE, REPLAY_READY " with the exact values trellara quarantine list --config FILE shows",
	    APPLICABLE),
};

const size_t sim_n_scenarios = sizeof sim_scenarios / sizeof sim_scenarios[0];

size_t sim_scenarios_count(enum sim_kind kind, size_t *applicable)
{
	size_t n = 0, a = 0;
	for (size_t i = 0; i < sim_n_scenarios; i++) {
		if (sim_scenarios[i].kind != kind)
			continue;
		n++;
		if (!sim_scenarios[i].not_applicable_reason)
			a++;
	}
	if (applicable)
		*applicable = a;
	return n;
}

const struct sim_scenario *sim_scenario_next(const char *name, size_t *from)
{
	for (size_t i = *from; i < sim_n_scenarios; i++) {
		if (strcmp(sim_scenarios[i].name, name) == 0) {
			*from = i;
			return &sim_scenarios[i];
		}
	}
	*from = sim_n_scenarios;
	return NULL;
}

const char *sim_status_name(enum sim_status status)
{
	switch (status) {
	case SIM_STATUS_NOT_RUN: return "not_run";
	case SIM_STATUS_PASS: return "pass";
	case SIM_STATUS_FAIL: return "fail";
	case SIM_STATUS_NOT_APPLICABLE: return "not_applicable";
	}
	return "not_run";
}

const char *sim_kind_name(enum sim_kind kind)
{
	return kind == SIM_KIND_CURATED ? "curated" : "simulation";
}
