/*
 * model_source.h - the simulator's model source: a PostgreSQL primary
 * with one logical replication slot, speaking real pgoutput.
 *
 * Workload.  A seeded generator commits transactions over 1-4 tables
 * with keys: public.t1 .. public.t4 (id int4 key, a text, b text); t2's
 * b is TOASTed (an update that leaves it alone sends it as
 * unchanged-TOAST 'u'); t3 has the two-column key (k1 int4, k2 text); t4
 * has a fourth column "mood" of the enum type public.mood (a Type
 * message comes before its Relation).  Transactions hold inserts (also a
 * delete then re-insert of the same key), updates without and with key
 * changes (old key 'K', replica identity default), deletes, TRUNCATE of
 * one or several tables, trellara.ddl logical messages (transactional;
 * some transactions hold nothing else), or nothing at all; between them
 * come heartbeat messages (non-transactional); some are replayed from
 * elsewhere (an Origin message after Begin, or after a stream's first
 * Stream Start).  Large transactions are streamed by the walsender
 * (protocol 2+): their blocks interleave with other transactions'
 * commits, their subtransactions (nested savepoints) make changes under
 * their own xids, a ROLLBACK TO SAVEPOINT cuts them back (Stream Abort of
 * each streamed subtransaction, children first), and they end with
 * Stream Commit or a whole Stream Abort.  A large transaction works on
 * rows of its own (fresh keys), as concurrency in PostgreSQL would force:
 * it can neither see nor lock what other open transactions touch.  It
 * may TRUNCATE a table no other open transaction has touched, and holds
 * it until it ends (nobody else uses that table meanwhile); other
 * transactions truncate only while no large one is open.
 *
 * The workload's committed state after every transaction is exact:
 * model_source_state_at() replays the log (with snapshots every 64
 * commits).  Every choice comes from the seed; the walsender's own
 * choices (keepalives) from a second generator, so the workload of a
 * seed does not depend on how the simulator schedules the connection.
 *
 * Slot and walsender, as PostgreSQL 15 does it.  The slot starts at the
 * WAL position before the first transaction.  A session (connect) decodes
 * the WAL from the start and starts sending at start_decoding_at =
 * max(confirmed_flush, requested LSN): a transaction is sent iff its
 * commit record's LSN >= start_decoding_at (SnapBuildXactNeedsSkip), in
 * full - a streamed one as a stream from its first segment when one of
 * its stream points lies past the start (changes rolled back before that
 * are simply not sent), else as a plain Begin..Commit.  Streaming never
 * starts before start_decoding_at (ReorderBufferCanStartStreaming).
 * Relation messages come before the first use of a relation in each
 * session, in each streamed transaction (with the change's xid), and
 * again after an invalidation (a DDL message for the table, a TRUNCATE
 * of it, a Stream Abort of the transaction: pgoutput's
 * cleanup_rel_sync_cache).  Empty transactions are sent as Begin+Commit
 * when send_empty (PostgreSQL 14), else skipped (15).  XLogData headers:
 * dataStart = walEnd = the LSN of the record (Begin: the first change;
 * Commit / Stream Commit: the commit's end; Stream Stop: the last change),
 * sendTime from the simulated clock.  Keepalives at random between
 * messages (walEnd = sentPtr, which during a transaction is still the end
 * of the previous record) and one when the session has caught up, the
 * reply flag set at random.
 *
 * Standby status updates ('r') advance confirmed_flush to the flush LSN,
 * never backwards while the server runs; the highest flush ever seen is
 * kept.  The slot reaches disk only at checkpoints (every
 * checkpoint_every commits, or model_source_checkpoint), so a crash
 * restart brings confirmed_flush back to the last checkpoint's value.
 * A promotion (new timeline, same system identifier) leaves a slot whose
 * confirmed position lags by `lag` confirmed transactions (never before
 * its creation); the WAL is the same (a synchronous standby), so it
 * resends more, never less.  A promotion may also leave no slot at all,
 * and a slot may be dropped or invalidated: a session then cannot start
 * until a new slot is created, at the end of the WAL.
 *
 * Memory: owns everything; buffers handed out stay valid until the next
 * call on the same model source.  No I/O, no clock, no globals, no libpq.
 * Failures: -1 (with model_source_error() saying why) on misuse or an
 * internal inconsistency of the generator, never an abort.
 */
#ifndef TRELLARA_MODEL_SOURCE_H
#define TRELLARA_MODEL_SOURCE_H

#include "sim_db.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MODEL_SOURCE_MAX_TABLES 4
#define MODEL_SOURCE_DDL_PREFIX "trellara.ddl"
#define MODEL_SOURCE_HEARTBEAT_PREFIX "trellara.heartbeat"
#define MODEL_SOURCE_ORIGIN "trellara_upstream"

struct model_source_options {
	int proto_version;      /* 1..4 (3 and 4 send what 2 sends: no two-phase, no parallel streaming) */
	bool streaming;         /* streaming = on (needs proto_version >= 2); off: large ones come at commit */
	bool send_empty;        /* empty transactions as Begin+Commit (PG 14) or skipped (PG 15) */
	int n_tables;           /* 1..4 */
	uint64_t start_lsn;     /* the slot's consistent point; 0: a default */
	/* ordinary transactions */
	int max_changes;        /* changes per transaction: 1..max_changes */
	int empty_pct;          /* transactions with no change */
	int ddl_pct;            /* transactions with a trellara.ddl message */
	int ddl_only_pct;       /* ... of which holding nothing else */
	int truncate_pct;       /* transactions with a TRUNCATE */
	int insert_weight, update_weight, key_update_weight, delete_weight;
	int reinsert_pct;       /* after a delete: insert the same key again */
	int toast_unchanged_pct; /* an update of t2 leaves b alone ('u') */
	int toast_bytes;        /* the size of t2's b values */
	int null_pct;           /* a and b (outside t2) are NULL */
	int heartbeat_pct;      /* a non-transactional message after a commit */
	int origin_pct;         /* a transaction replayed from elsewhere: an Origin message */
	/* large, streamed transactions */
	int stream_pct;         /* a new transaction is a large one */
	int max_open_streams;   /* at most that many open at once (1..4) */
	int stream_min_changes, stream_max_changes;
	int stream_block_changes; /* changes per stream block: 1..this */
	int savepoint_pct, release_pct, rollback_pct; /* per change of a large transaction */
	int stream_abort_pct;   /* a large transaction aborts whole */
	int late_abort_pct;     /* an abort decoded late sends an empty first block, then Stream Abort */
	/* slot */
	int checkpoint_every;   /* a checkpoint writes the slot every that many commits (0: never by itself) */
	/* walsender */
	int keepalive_pct;      /* a keepalive before a message */
	int reply_request_pct;  /* a keepalive asks for a reply */
	/* a table (1..n_tables; 0: none) published without a replica
	 * identity: its Relation marks no key column and its updates carry
	 * no old key (what a table with neither a primary key nor REPLICA
	 * IDENTITY FULL would give if the source let it be published) */
	int no_identity_table;
};

/* Defaults that exercise everything above (proto 2, streaming on). */
void model_source_options_default(struct model_source_options *o);

struct model_source_table {
	const char *name;    /* "public.t1" */
	const char *nspname; /* "public" */
	const char *relname; /* "t1" */
	uint32_t relid;
	uint16_t n_cols, n_key; /* the key columns come first */
	const char *const *cols;
	const uint32_t *type_oids; /* 23 int4, 25 text, 16400 public.mood; typmod -1 */
	bool toasted;        /* its b column is TOASTed */
};

/* One committed transaction, in commit order. */
struct model_source_txn {
	uint32_t xid;
	uint64_t commit_lsn, end_lsn;
	int64_t commit_ts;   /* µs since 2000-01-01 */
	uint64_t changes;    /* what survived: I U D T and transactional messages */
	bool streamed;       /* a large transaction (streamed when the session could) */
	bool has_ddl;
	const char *origin;  /* MODEL_SOURCE_ORIGIN for a replayed transaction, else NULL */
	uint64_t origin_lsn; /* its LSN upstream (sent as 0 after a Stream Start) */
};

/* Counters: what the workload produced (inserts .. empty_txns, committed,
 * aborted, sub_aborts) and what the walsender sent (the rest). */
struct model_source_stats {
	uint64_t sessions, messages, keepalives, reply_requests;
	uint64_t relations, types, origins, begins, commits, inserts, updates, key_updates, toast_unchanged, deletes, truncates;
	uint64_t ddl_messages, heartbeats, empty_txns;
	uint64_t stream_starts, stream_stops, stream_commits, stream_aborts, sub_aborts, late_aborts;
	uint64_t streamed_sent_plain; /* a large transaction sent as Begin..Commit */
	uint64_t committed, aborted;  /* produced */
	uint64_t promotions, crash_restarts;
};

struct model_source;

struct model_source *model_source_new(const struct model_source_options *o, uint64_t seed);
void model_source_free(struct model_source *ms);
const char *model_source_error(const struct model_source *ms);

size_t model_source_tables(const struct model_source *ms);
const struct model_source_table *model_source_table(const struct model_source *ms, size_t i);
/* DDL on table i between transactions, as pgoutput shows it: renamed or
 * moved (ALTER TABLE ... RENAME TO / SET SCHEMA: the same OID, the next
 * Relation message under the new name), or dropped and created again
 * under its name (a new OID).  Its changes go on. */
void model_source_rename_table(struct model_source *ms, size_t table, const char *nspname, const char *relname);
void model_source_recreate_table(struct model_source *ms, size_t table);
/* Its relation OID now (pg_class). */
uint32_t model_source_relid(const struct model_source *ms, size_t table);
/* Creates the model's tables (same names, columns, keys) in db: 0 / -1. */
int model_source_create_tables(const struct model_source *ms, struct sim_db *db);

/* The workload: commits n more transactions into the WAL (aborted and
 * still-open large transactions do not count); 0 or -1. */
int model_source_produce(struct model_source *ms, unsigned n);
/* Ends every open large transaction now (each commits or aborts as the
 * workload decides), so that nothing is left in flight; 0 or -1. */
int model_source_finish(struct model_source *ms);
size_t model_source_open_large(const struct model_source *ms);
size_t model_source_txns(const struct model_source *ms);
const struct model_source_txn *model_source_txn(const struct model_source *ms, size_t i);
/* The committed state after the last transaction whose commit LSN is
 * <= last_commit_lsn (valid until the next call). */
const struct sim_db *model_source_state_at(struct model_source *ms, uint64_t last_commit_lsn);
/* The state after every committed transaction. */
const struct sim_db *model_source_state(const struct model_source *ms);
/* The end of the WAL written so far. */
uint64_t model_source_wal_end(const struct model_source *ms);

/* The replication session.  connect: START_REPLICATION from the slot's
 * confirmed position; connect_from: with a requested LSN (PostgreSQL
 * starts at the later of the two).  -1 when already connected. */
int model_source_connect(struct model_source *ms);
int model_source_connect_from(struct model_source *ms, uint64_t requested_lsn);
bool model_source_connected(const struct model_source *ms);
/* The next CopyData message as PostgreSQL sends it ('w' XLogData or 'k'
 * keepalive): 1 with *buf / *len (valid until the next call), 0 when
 * nothing is pending, -1 when not connected. */
int model_source_next(struct model_source *ms, const uint8_t **buf, size_t *len);
/* A standby status update ('r', 34 bytes): 0, or -1 when malformed or
 * not connected. */
int model_source_on_status(struct model_source *ms, const uint8_t *buf, size_t len);
void model_source_disconnect(struct model_source *ms);
/* A standby is promoted: new timeline, the session ends, the slot's
 * confirmed position goes back by lag confirmed transactions. */
void model_source_promote(struct model_source *ms, unsigned lag);

/* How the slot stops being usable (slot_policy.h's facts):
 * MODEL_SLOT_DROPPED: pg_drop_replication_slot, no row; the others
 * invalidate it, its row stays: max_slot_wal_keep_size removed the WAL it
 * needed (wal_status "lost", invalidation_reason "wal_removed"), or
 * idle_replication_slot_timeout (PostgreSQL 18, "idle_timeout"). */
enum model_slot_loss { MODEL_SLOT_DROPPED, MODEL_SLOT_WAL_REMOVED, MODEL_SLOT_IDLE_TIMEOUT };

/* A standby WITHOUT the slot is promoted (PostgreSQL 15/16, or 17+ with
 * the failover slot not synchronized): new timeline, the session ends,
 * no slot.  The WAL is the same. */
void model_source_promote_without_slot(struct model_source *ms);
/* The slot is dropped or invalidated; the session ends.  Until
 * model_source_create_slot, connect fails (-1). */
void model_source_lose_slot(struct model_source *ms, enum model_slot_loss how);
/* CREATE_REPLICATION_SLOT: a valid slot whose consistent point (and
 * confirmed position) is the end of the WAL now; a session from it sends
 * only what commits later.  Replaces the slot there was. */
void model_source_create_slot(struct model_source *ms);

/* What pg_replication_slots shows of the slot. */
struct model_source_slot {
	bool exists;
	const char *wal_status;          /* "" when there is no row */
	const char *invalidation_reason; /* "" when valid */
};
void model_source_slot(const struct model_source *ms, struct model_source_slot *slot);

/* A checkpoint writes the slot (its confirmed position) to disk. */
void model_source_checkpoint(struct model_source *ms);
/* The primary crashes and restarts: the session ends, and the slot's
 * confirmed position is what the last checkpoint wrote (PostgreSQL marks
 * the slot dirty on a status update but saves it only at checkpoints),
 * so it may go back.  Same timeline, same WAL. */
void model_source_crash_restart(struct model_source *ms);

uint64_t model_source_confirmed_flush(const struct model_source *ms);
uint64_t model_source_highest_flushed(const struct model_source *ms);
uint64_t model_source_system_id(const struct model_source *ms);
uint32_t model_source_timeline(const struct model_source *ms);
int model_source_proto_version(const struct model_source *ms);
const struct model_source_stats *model_source_stats(const struct model_source *ms);

#endif
