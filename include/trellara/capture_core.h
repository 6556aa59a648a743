/*
 * capture_core.h - capture between the replication socket and the
 * stream (DESIGN §7): the CopyData messages PostgreSQL sends go in;
 * frames in the stream, the standby status updates to send back and the
 * waiting decisions of group commit come out.  trellara-capture feeds it
 * from libpq, the simulator from a model slot: both run this code.
 *
 * Owns.  One capture process's pgoutput session and message
 * (pgoutput.h), the transaction assembler (assembler.h), the sink its
 * frames go to (struct capture_sink: the local stream writer on the given
 * struct stream_fs, stream.h and stream_fs.h, unless the caller hands it
 * another sink already opened, such as trellara-capture's JetStream
 * publisher) and the acknowledgement policy (ack_policy.h).  No libpq, no socket, no clock:
 * every time is an argument (now_us: one monotonic clock, for intervals;
 * wall_us: microseconds since the Unix epoch, for watermark frames and
 * status updates).  The fault points capture.before_sync,
 * capture.after_chunk_sync, capture.after_append_before_ack and
 * capture.before_commit are reached here (fault.h).
 *
 * Guarantees.
 *  - Never past durable: the flushed (and written, applied) position of
 *    capture_core_status_message() is ack_policy_report_lsn(), the end of
 *    what the last successful sink sync (stream_writer_sync() for the
 *    local stream) covered.  After a failed sync nothing more becomes
 *    durable: the sink is poisoned and every later flush fails
 *    (EXIT_CANTCREAT).
 *  - Every acknowledged position is recorded in the stream: a position
 *    passed without a frame (an empty or skipped transaction, a
 *    keepalive's position) gets a watermark frame in the batch whose sync
 *    makes it durable.
 *  - Restart: open finds the stream's last commit (stream_positions: the
 *    newest segments, through stream_reader_open_fs; a caller-opened sink
 *    comes with its restart point, summarised frame by frame with
 *    capture_core_restart_point_add_frame); a transaction at or
 *    below it is counted as skipped_duplicates and not appended, one
 *    above it is appended.  capture_core_reconnected() keeps that point.
 *
 * Fails.  Functions return EXIT_OK or a defaults.h exit code, having
 * logged the failure once, with the slot or stream named:
 * EXIT_DATAERR for a message that cannot be decoded or assembled (or a
 * stream whose frames cannot be summarised), EXIT_CANTCREAT when the
 * stream or a spill file cannot be written or synced; open also returns
 * EXIT_TEMPFAIL (another writer holds the stream), EXIT_CONFIG (bad
 * writer options or protocol version).
 */
#ifndef TRELLARA_CAPTURE_CORE_H
#define TRELLARA_CAPTURE_CORE_H

#include "trellara/ack_policy.h"
#include "trellara/assembler.h"
#include "trellara/stream.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A standby status update ('r'): written, flushed, applied, time, reply. */
#define CAPTURE_STATUS_MESSAGE_LEN 34
/* Under continuous traffic, the status interval is checked every this
 * many messages. */
#define CAPTURE_STATUS_CHECK_MESSAGES 1000

struct stream_fs;

/* Where frames go.  append queues one frame (0, or -1 logged); pending
 * counts the frames queued since the last sync; sync returns 0 only when
 * every queued frame is durable, 1 when the sink cannot store them now
 * and keeps them for the next sync (back-pressure: a JetStream stream
 * without a quorum, or full), -1 (logged) when the sink is poisoned
 * (nothing queued is acknowledged, every later sync fails); close drops
 * what is not synced and frees the sink. */
struct capture_sink_ops {
	int (*append)(void *impl, int type, const uint8_t *payload, size_t len);
	size_t (*pending)(const void *impl);
	int (*sync)(void *impl);
	void (*close)(void *impl);
};
struct capture_sink {
	const struct capture_sink_ops *ops; /* NULL: no sink */
	void *impl;                         /* owned once handed to capture_core_open */
};

/* Adds one frame of a stream to a restart point: a transaction (txn or
 * commit marker frame) or a watermark; other types are ignored.
 * *committed is set for a committed transaction.  -1 (logged, the frame's
 * offset named) when the payload cannot be summarised. */
int capture_core_restart_point_add_frame(struct ack_restart_point *rp, int type, const uint8_t *payload,
					 size_t len, uint64_t offset, bool *committed);

struct capture_core_options {
	struct stream_fs *fs;
	const char *stream_dir;
	const char *slot;            /* names the slot in messages */
	const char *source_id;       /* of watermark frames */
	int proto_version;           /* pgoutput protocol version */
	struct stream_writer_options writer;
	struct assembler_options assembler; /* skip_through_commit_lsn is set by open */
	struct ack_policy_options ack;      /* max_batch_messages also bounds a big transaction's pending frames */
	/* A sink already opened (ops set): capture_core writes to it instead
	 * of opening the local stream at fs/stream_dir, owns it from
	 * capture_core_open on (closed by capture_core_close, whatever open
	 * returns), and starts from sink_restart and sink_next_offset. */
	struct capture_sink sink;
	const char *sink_name;              /* names it in messages */
	struct ack_restart_point sink_restart;
	uint64_t sink_next_offset;
	/* The flow's tables (dataset.tables), whose relations the core
	 * follows (relbind.h): a Relation message of a flow table's OID under
	 * another name, or of its name under another OID, stops it (EXIT_CONFIG)
	 * before any change of it is written.  config_path names the flow file
	 * in the hint (NULL: "the flow file"). */
	const char *const *table_schemas, *const *table_names;
	size_t n_tables;
	const char *config_path;
};

struct capture_core_stats {
	uint64_t transactions, changes, frames, skipped_duplicates, watermarks, batches;
	uint64_t durable_lsn;            /* acknowledged: what a status update carries */
	uint64_t stream_last_commit_lsn; /* commits at or below are skipped */
	uint64_t next_offset;            /* the stream's next offset when opened */
	int64_t last_status_us;          /* 0: no status sent on this connection */
};

struct capture_core;
struct relbind;

/* Opens the stream writer (recovery) and finds the restart point, or
 * takes the given sink and its restart point; opens the assembler.  *cc is set whatever the result (its stats say what was
 * found); capture_core_close it. */
int capture_core_open(struct capture_core **cc, const struct capture_core_options *options);

/* One CopyData message, the bytes PostgreSQL sent: 'w' XLogData (1 + 8
 * dataStart + 8 walEnd + 8 sendTime, then a pgoutput message) or 'k'
 * keepalive (1 + 8 walEnd + 8 sendTime + 1 reply requested); another
 * type is logged and ignored.  *reply: send a status update now
 * (capture_core_status_message, then capture_core_on_status_sent), set
 * also when the message failed: it acknowledges only what is durable. */
int capture_core_on_message(struct capture_core *cc, const uint8_t *msg, size_t len, int64_t now_us,
			    int64_t wall_us, bool *reply);

enum capture_core_quiet {
	CAPTURE_CORE_FLUSH, /* flush now (capture_core_flush), then send a status if due */
	CAPTURE_CORE_WAIT   /* group commit: wait up to a millisecond for more, then flush */
};
/* The socket has nothing right now: wait a little more or flush. */
enum capture_core_quiet capture_core_quiet(const struct capture_core *cc, int64_t now_us);
/* Make the pending batch durable (a watermark first when a position
 * passed without a frame).  EXIT_OK or EXIT_CANTCREAT. */
int capture_core_flush(struct capture_core *cc, int64_t now_us, int64_t wall_us);

/* The sink held the last flush back (its sync said 1): nothing queued is
 * durable; the caller stops reading the source, keeps sending status
 * updates (they acknowledge only what is durable) and flushes again
 * after a pause. */
/* The flow tables' bindings, for the caller to bind from the source's
 * catalog when it connects (relbind_load); owned by the core. */
struct relbind *capture_core_relations(struct capture_core *c);
bool capture_core_held(const struct capture_core *cc);

/* Idle: the durable position moved past what was reported, or the
 * status interval passed. */
bool capture_core_status_due(const struct capture_core *cc, int64_t now_us);
/* The standby status update to send: 'r', then the durable position as
 * written, flushed and applied, wall_us in PostgreSQL's epoch, and
 * reply_requested (all big-endian). */
void capture_core_status_message(const struct capture_core *cc, uint8_t out[CAPTURE_STATUS_MESSAGE_LEN],
				 int64_t wall_us, bool reply_requested);
/* That update reached the socket. */
void capture_core_on_status_sent(struct capture_core *cc, int64_t now_us);

/* A new replication connection streams (after a loss): open
 * transactions and the relation cache are dropped (the server sends them
 * again), the restart point stays. */
void capture_core_reconnected(struct capture_core *cc);

struct capture_core_stats capture_core_stats(const struct capture_core *cc);
/* Closes the sink (unsynced frames are dropped, never acknowledged). */
void capture_core_close(struct capture_core *cc);

#endif
