/*
 * applyd.h - trellara-applyd's apply loop (DESIGN §8).
 *
 * Exactly once: a source transaction is applied only if its commit LSN
 * is above the checkpoint's, and the checkpoint moves in the same target
 * transaction as its changes.  The consumer group position moves only
 * after that transaction committed (synchronous commit: durable).
 * Fault points: applyd.before_target_commit,
 * applyd.after_target_commit_before_group_ack.
 */
#ifndef TRELLARA_APPLYD_H
#define TRELLARA_APPLYD_H

#include "trellara/apply_outcome.h"
#include "trellara/config.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

struct applyd_options {
	const struct flow_config *config;
	int max_reconnect_attempts;
	int reconnect_base_ms;
	volatile sig_atomic_t *stop;
};

struct applyd_stats {
	uint64_t transactions, changes, skipped_duplicates, skipped_by_watermark, skipped_unconfigured, batches, quarantined;
	uint64_t statements, folded; /* statements sent for the changes, changes folded away */
	uint64_t copies;             /* of the statements: COPYs of runs of inserts */
};

/* Until stopped (APPLY_OK) or apply must end (APPLY_EXIT with its code);
 * reconnects and transient retries are handled inside, bounded. */
struct apply_outcome applyd_run(const struct applyd_options *options, struct applyd_stats *stats);

#endif
