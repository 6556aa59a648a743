/*
 * ack_policy.h - capture's acknowledgement policy (DESIGN §7): which LSN
 * a standby status update may carry, when a watermark frame must be
 * written, when a batch is made durable, and which transactions a
 * restart skips as already in the stream.
 *
 * Owns.  The positions of one capture process, nothing else: no I/O, no
 * clock (every time is an argument, microseconds of one monotonic
 * clock), no libpq, no globals.  The caller does the I/O the answers ask
 * for and then tells the policy what happened (the _on_ functions).
 * Read the struct's fields freely; change them only through these
 * functions.
 *
 * Guarantees.
 *  - Never past durable: ack_policy_report_lsn() is durable_lsn, and
 *    durable_lsn moves only in ack_policy_on_durable(), which the caller
 *    calls after stream_writer_sync() succeeded, to the end LSN of what
 *    that sync covered (pending_lsn).  durable_lsn never goes back.
 *  - Every acknowledged position is recorded in the stream: a batch whose
 *    pending_lsn passed every frame (empty or skipped transactions, a
 *    keepalive's position) asks for a watermark at pending_lsn before
 *    its sync (ack_policy_watermark_needed), so a restart finds it.
 *  - Restart: a transaction whose commit LSN is at or below the stream's
 *    last durable commit (ack_restart_point.last_commit_lsn) is a
 *    duplicate the server sent again: skipped, never appended twice;
 *    one above it is appended.
 *
 * Fails.  It cannot: the functions are total over their inputs.  A
 * caller that reports something else than ack_policy_report_lsn() breaks
 * the contract; tests/unit/test_ack_policy.c checks the invariants.
 */
#ifndef TRELLARA_ACK_POLICY_H
#define TRELLARA_ACK_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Group commit: with transactions pending and the socket quiet, wait up
 * to this long after the batch's first transaction before its fdatasync. */
#define ACK_GROUP_COMMIT_WAIT_US 2000

/* Where a stream ends, in source terms, as a restart finds it: fold the
 * frames of the newest segments into it (capture's stream_positions). */
struct ack_restart_point {
	uint64_t last_commit_lsn; /* highest commit LSN of a transaction in the stream */
	uint64_t durable_lsn;     /* highest LSN any frame records (a txn's end or a watermark) */
};

/* A committed transaction (txn frame or commit marker) found in the stream. */
void ack_restart_point_add_txn(struct ack_restart_point *rp, uint64_t commit_lsn, uint64_t end_lsn);
/* A watermark frame found in the stream. */
void ack_restart_point_add_watermark(struct ack_restart_point *rp, uint64_t lsn);

/* The restart rule: true when a transaction committed at commit_lsn is
 * already in a stream whose last commit is stream_last_commit_lsn. */
bool ack_policy_is_duplicate(uint64_t stream_last_commit_lsn, uint64_t commit_lsn);

struct ack_policy_options {
	int64_t status_interval_us;      /* a standby status update at least this often */
	int64_t watermark_interval_us;   /* unrequested keepalive watermarks at most this often */
	uint64_t max_batch_transactions; /* fdatasync after this many committed transactions */
	uint64_t max_batch_messages;     /* ... or this many frames pending in the writer */
};

struct ack_policy {
	struct ack_policy_options options;
	uint64_t stream_last_commit_lsn; /* commits at or below are in the stream: duplicates */
	uint64_t durable_lsn;   /* acknowledged: end of the last durable txn or watermark */
	uint64_t pending_lsn;   /* end LSN the pending batch makes durable */
	uint64_t recorded_lsn;  /* highest LSN a frame appended so far records */
	uint64_t reported_lsn;  /* last flush position sent */
	uint64_t batch_txns;    /* committed transactions in the pending batch */
	int64_t batch_started_us;  /* first transaction of the pending batch */
	int64_t last_status_us;    /* 0: none sent on this connection */
	int64_t last_watermark_us; /* 0: none written by this process */
};

/* Starts from what the stream holds: durable, pending and recorded at
 * rp->durable_lsn, nothing reported yet. */
void ack_policy_init(struct ack_policy *p, const struct ack_policy_options *o, const struct ack_restart_point *rp);

/* A new replication connection: its first idle moment sends a status.
 * The server sends again everything after the slot's confirmed position,
 * which may be behind what this process appended: the caller skips
 * commits at or below stream_last_commit_lsn (kept current by
 * ack_policy_on_commit_appended), so none is appended twice. */
void ack_policy_on_connect(struct ack_policy *p);

/* A committed transaction (txn frame or commit marker) is in the stream
 * writer: commits at or below it are duplicates from now on. */
void ack_policy_on_commit_appended(struct ack_policy *p, uint64_t commit_lsn);

/* ---- transactions ---- */

/* A committed transaction's frames were appended (not yet durable).
 * Returns true when the batch is full: flush it now. */
bool ack_policy_on_appended(struct ack_policy *p, uint64_t end_lsn, size_t writer_pending_frames, int64_t now_us);
/* A committed transaction passed without a frame: empty for this flow, or
 * skipped as a duplicate (confirming it again is safe: it is durable in
 * the stream).  Its end becomes pending; a flush records it by watermark. */
void ack_policy_on_passed(struct ack_policy *p, uint64_t end_lsn);

/* ---- batches ---- */

/* Whether flushing now does anything: frames are pending in the writer or
 * a position passed that is not yet durable. */
bool ack_policy_flush_needed(const struct ack_policy *p, size_t writer_pending_frames);
/* Before the sync: true (and *lsn) when pending_lsn passed every frame and
 * a watermark at *lsn must be appended to record it. */
bool ack_policy_watermark_needed(const struct ack_policy *p, uint64_t *lsn);
/* A watermark frame at lsn was appended (not yet durable). */
void ack_policy_on_watermark_appended(struct ack_policy *p, uint64_t lsn, int64_t now_us);
/* The sync succeeded: everything appended is durable.  Returns the new
 * durable_lsn. */
uint64_t ack_policy_on_durable(struct ack_policy *p);
/* Group commit: the batch is open and not full, and was started less than
 * ACK_GROUP_COMMIT_WAIT_US ago: wait a moment for more before syncing. */
bool ack_policy_batch_may_wait(const struct ack_policy *p, int64_t now_us);

/* ---- standby status updates ---- */

/* The LSN a status update carries in written, flushed and applied. */
uint64_t ack_policy_report_lsn(const struct ack_policy *p);
/* A status update carrying ack_policy_report_lsn() was sent. */
void ack_policy_on_reported(struct ack_policy *p, int64_t now_us);
/* status_interval_us passed since the last status update. */
bool ack_policy_status_interval_elapsed(const struct ack_policy *p, int64_t now_us);
/* Idle: send a status when durable_lsn moved past what was reported, or
 * the interval passed. */
bool ack_policy_status_due(const struct ack_policy *p, int64_t now_us);

/* ---- keepalives ---- */

struct ack_keepalive_decision {
	bool record; /* flush the pending batch, then ask ack_policy_keepalive_watermark */
	bool reply;  /* send a status update (after the recording) */
};

/* A primary keepalive: with no transaction open, everything up to wal_end
 * has been received and may be recorded; the server's reply request is
 * answered. */
struct ack_keepalive_decision ack_policy_on_keepalive(const struct ack_policy *p, uint64_t wal_end,
						       bool reply_requested, bool in_transaction);
/* After that flush: true when a watermark at wal_end must be written and
 * made durable now (wal_end still past durable, and the server asked for a
 * reply or watermark_interval_us passed since the last watermark). */
bool ack_policy_keepalive_watermark(const struct ack_policy *p, uint64_t wal_end, bool reply_requested,
				    int64_t now_us);

#endif
