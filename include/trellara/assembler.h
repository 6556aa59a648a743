/*
 * assembler.h - turns the decoded pgoutput messages of one replication
 * connection into stream frames: committed transactions, in commit order,
 * as `txn` envelopes or in the chunked form (chunk..., manifest,
 * commit_marker), preceded by a `ddl` frame for each trellara.ddl message.
 * No libpq, no stream: frames go to a callback.
 *
 * Memory.  Every open transaction (one at a time outside streaming, any
 * number of streamed ones) keeps at most spill_threshold_changes encoded
 * changes (and at most ASSEMBLER_MAX_MEMORY_BYTES) in memory; the rest go
 * to a spill file <spill_dir>/<flow>.<xid>.spill (0600, directory 0700)
 * that is removed at commit or abort; <flow> is the flow identity with
 * every byte but letters, digits, "_" and "-" written %XX.  Several flows
 * may share a spill directory: open removes the spill files of this
 * flow's earlier process, never another flow's.  A committed transaction
 * is emitted from the spill file through a bounded window, so memory stays
 * bounded whatever the transaction's size (and a single change's).
 *
 * Frames.  Changes are packed into frames of at most target_frame_payload
 * (FRAME_TARGET_PAYLOAD); a transaction larger than that is emitted in the
 * chunked form, and a single larger change gets a chunk of its own, up to
 * max_frame_payload (MAX_FRAME_PAYLOAD, more than PostgreSQL can send in
 * one message).
 *
 * Streamed transactions.  Changes of a stream block carry the xid of the
 * (sub)transaction that made them; Stream Abort of a subtransaction cuts
 * the transaction's changes back to that subtransaction's first change
 * (what PostgreSQL's own apply worker does; finding it and noting each
 * change's subtransaction take constant time), Stream Abort of the top
 * transaction drops it and its spill file.  Nothing of a streamed
 * transaction is emitted before Stream Commit.
 *
 * Verify's fence.  A transactional logical message with the prefix
 * trellara.fence (ASSEMBLER_FENCE_PREFIX; trellara-verify emits one at
 * its snapshot, DESIGN §9) is no change: it is not written into the
 * transaction.  A committed transaction with nothing else is
 * ASSEMBLER_FENCE, no frame: the caller records a watermark at its end
 * and makes it durable at once, so applyd learns at once that the source
 * passed the fence.  Every other prefix stays a Message change of its
 * transaction (applyd plans nothing for it).
 *
 * Schema changes inside a transaction.  A Relation message that changes
 * a descriptor the open transaction already used gives the relation a new
 * entry in the envelope's relation table; rows always refer to the
 * descriptor they were decoded with (so nothing is guessed).
 *
 * Failure: functions return 0 or -1 with a message in err naming the
 * transaction and what was wrong; I/O failures on spill files and emit
 * failures are passed up unchanged (the emit callback's own code).
 */
#ifndef TRELLARA_ASSEMBLER_H
#define TRELLARA_ASSEMBLER_H

#include "trellara/pgoutput.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ASSEMBLER_MAX_MEMORY_BYTES (8U * 1024 * 1024)
#define ASSEMBLER_DDL_PREFIX "trellara.ddl"
#define ASSEMBLER_FENCE_PREFIX "trellara.fence"

/* Called for every frame, in order; returns 0 or a negative code that
 * the assembler passes up as ASSEMBLER_EMIT_FAILED, and sets *offset to
 * the frame's stream offset (a manifest lists pending chunks by it). */
typedef int (*assembler_emit_fn)(void *ctx, int frame_type, const uint8_t *payload, size_t len, uint64_t *offset);

struct assembler_options {
	const char *source_id;
	const char *flow;      /* the flow identity (config_flow_id): names the spill files */
	const char *spill_dir;
	uint64_t spill_threshold_changes;
	bool strict_chunking;
	uint64_t max_changes_per_chunk;
	size_t max_frame_payload;    /* MAX_FRAME_PAYLOAD unless testing */
	size_t target_frame_payload; /* FRAME_TARGET_PAYLOAD unless testing (at most max_frame_payload) */
	uint64_t skip_through_commit_lsn; /* the stream's last commit: ack_policy_is_duplicate() skips */
	bool spill_streamed;  /* streamed transactions spill as before instead of pending chunks */
	uint64_t streamed_threshold_changes; /* a streamed transaction's share written once (0: spill_threshold_changes) */
	uint64_t run;         /* this capture run's id, in every pending_chunk frame */
};

enum assembler_event {
	ASSEMBLER_NOTHING = 0,
	ASSEMBLER_COMMITTED,  /* frames emitted for a committed transaction */
	ASSEMBLER_SKIPPED,    /* a committed transaction already in the stream */
	ASSEMBLER_EMPTY,      /* a committed transaction with no change for us: no frame */
	ASSEMBLER_FENCE,      /* a committed transaction with only trellara.fence messages: no frame,
			       * record its end (a watermark) at once */
	ASSEMBLER_ABORTED     /* a streamed (sub)transaction dropped */
};

struct assembler_result {
	enum assembler_event event;
	uint32_t xid;
	uint64_t commit_lsn, end_lsn;
	uint64_t changes;
	uint64_t frames;
	bool chunked;
};

#define ASSEMBLER_EMIT_FAILED (-2)
#define ASSEMBLER_STORAGE_FAILED (-3) /* a spill file could not be written or read */

struct assembler;

int assembler_open(struct assembler **assembler, const struct assembler_options *options, char *err,
		   size_t errlen);
/* Feed one message decoded by pgoutput_session_decode() (the session
 * holds the relation cache; it is consulted for descriptors). */
int assembler_feed(struct assembler *a, const struct pgoutput_session *session,
		   const struct pgoutput_message *msg, assembler_emit_fn emit, void *ctx,
		   struct assembler_result *result, char *err, size_t errlen);
/* A new replication connection: drop every open transaction (the server
 * sends them again) and its spill file. */
void assembler_reset(struct assembler *a);
/* Is a transaction open (changes received, not yet committed)? */
bool assembler_in_transaction(const struct assembler *a);
/* Changes held in memory by open transactions (for tests and metrics). */
uint64_t assembler_memory_changes(const struct assembler *a);
void assembler_set_skip_through(struct assembler *a, uint64_t commit_lsn);
void assembler_close(struct assembler *a);

#endif
