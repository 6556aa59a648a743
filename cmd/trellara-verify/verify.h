/*
 * verify.h - trellara-verify (DESIGN §9): CONVERGED or a named
 * divergence with its recovery command.
 *
 * Exact comparison on a live source: a temporary slot exports a snapshot
 * at a consistent LSN L; a fence at L makes applyd hold before the first
 * transaction committing at or after L; a trellara.fence logical message
 * committed after it reaches capture at once, which records a durable
 * watermark past L, so applyd holds even on an idle source; the source at the snapshot is
 * compared with the target held at the fence; the fence is released and
 * the temporary slot dropped on every exit path (signals included).
 *
 * A pass that loses a connection (cannot connect, the session ended by
 * the server: stopped, restarted, pg_terminate_backend) is abandoned: it
 * records nothing, and after a jittered backoff (backoff.h) a new pass
 * starts from scratch, up to max_attempts passes; then 69, naming the
 * side.  A failure of a statement is not retried.
 *
 * Per table, in one pass on each server: one hash h per row (of its
 * covered columns), and per bucket of h the row count, the exact sum and
 * the exclusive or of h, and the exclusive or of an integer key; a bucket that
 * differs by one row names it from the sums, the named keys are read by
 * key and taken out of the sums (which may name more), the buckets still
 * differing are read again, those rows only returned, and all is merged
 * by key (missing, extra, content differs).  A table without a usable key is compared as a
 * multiset of whole rows.  A partitioned table is read through its parent
 * (every partition's rows), any other table ONLY (an inheritance parent's
 * own rows); the output names the scope of each table.
 */
#ifndef TRELLARA_VERIFY_H
#define TRELLARA_VERIFY_H

#include "trellara/config.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

struct verify_options {
	const struct flow_config *cfg;
	const char *table; /* NULL: every configured table */
	bool json;
	int fence_timeout_s;
	int max_attempts;  /* passes before a lost connection is exit 69 (below 1: one) */
	int retry_base_ms; /* the first delay between passes (backoff.h) */
	volatile sig_atomic_t *stop;
	uint64_t *compared_at; /* when not NULL: set to the LSN compared at (0 when none was) */
	/* --sequences strict: a target sequence behind its source is a
	 * divergence (cutover); else (report) it is reported with the sync
	 * command but the result is the data's: the stream carries no
	 * sequence values, so behind is the normal state of a live flow */
	bool sequences_strict;
};

int verify_run(const struct verify_options *o);

/* The n column values of a key's text (PostgreSQL's record output,
 * "(a,,\"b \"\"c\"\"\")"): each newly allocated in fields[], NULL for a
 * NULL field.  False when the text is not exactly one record of n fields
 * (nothing is left allocated then). */
bool verify_key_fields(const char *text, int n, char **fields);

#endif
