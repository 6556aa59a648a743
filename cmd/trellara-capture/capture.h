/*
 * capture.h - trellara-capture's replication loop: pgoutput v2 from a
 * logical slot into the durable stream.  DESIGN §7.
 *
 * The acknowledgement rule: standby status updates carry, in write,
 * flush and apply alike, only the end LSN of the last transaction (or
 * watermark) whose frames stream_writer_sync() has made durable - never
 * what was merely received.  Fault point capture.after_append_before_ack
 * sits between that sync and the status update.  The rules (what may be
 * reported, when a watermark or a sync is due, what a restart skips) are
 * common/cdc/ack_policy.c (ack_policy.h); the work between the socket and
 * the stream (decoding, assembling, appending, flushing, the status
 * update's bytes) is common/cdc/capture_core.c (capture_core.h), which the
 * simulator runs too; this file does the libpq I/O they ask for.
 */
#ifndef TRELLARA_CAPTURE_H
#define TRELLARA_CAPTURE_H

#include "trellara/config.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

struct capture_options {
	const struct flow_config *config;
	bool start_now;
	int status_interval_ms;     /* periodic standby status (default 10 s) */
	int watermark_interval_ms;  /* at most one watermark frame per interval */
	int max_reconnect_attempts; /* then exit 69 */
	int reconnect_base_ms;      /* first delay; doubles, capped at 60x, +-25 % jitter */
	volatile sig_atomic_t *stop;
};

struct capture_stats {
	uint64_t transactions, changes, frames, skipped_duplicates, watermarks, batches, reconnects;
	uint64_t durable_lsn;
};

/* Runs until SIGTERM/SIGINT (0) or a failure: returns the exit code. */
int capture_run(const struct capture_options *options, struct capture_stats *stats);

#endif
