/*
 * slot_policy.h - what capture does with the replication slot it finds on
 * the source when it connects (trellara-capture(1) SLOT AND FAILOVER):
 * pure, no libpq, no logging.  capture observes the slot
 * (pg_replication_slots), the stream's binding (its meta file and last
 * durable commit) and the source's timeline, and asks slot_policy_decide().
 *
 * The rule that matters: a stream that already holds changes of a slot
 * never gets a new slot.  A new slot starts at the server's current
 * position; every transaction committed between the stream's last durable
 * commit and that position would be skipped without a trace (after a
 * failover to a standby without the slot, after a drop, after the server
 * invalidated the slot).  capture stops instead, naming the copy that
 * repairs it.
 */
#ifndef TRELLARA_SLOT_POLICY_H
#define TRELLARA_SLOT_POLICY_H

#include <stdbool.h>
#include <stdint.h>

struct slot_facts {
	bool exists;                     /* a row in pg_replication_slots */
	bool logical_pgoutput;           /* slot_type logical, plugin pgoutput */
	const char *wal_status;          /* "" when the server has no such column (< 13) */
	const char *invalidation_reason; /* "" when none, or the server has no such column (< 17) */
	bool conflicting;                /* 16+: invalidated by a recovery conflict */
	bool stream_holds_changes;       /* the stream is bound to the slot or holds durable commits */
	uint32_t stream_timeline;        /* the timeline the stream followed last (0: unknown) */
	uint32_t source_timeline;        /* the source's timeline now (IDENTIFY_SYSTEM) */
	bool start_now;                  /* --start-now: may create the slot */
};

enum slot_verdict {
	SLOT_USE,              /* stream from it (the binding checks follow) */
	SLOT_CREATE,           /* --start-now on an empty stream: create it */
	SLOT_NOT_CREATED,      /* missing and the stream is empty: the snapshot creates it (exit 78) */
	SLOT_WRONG_KIND,       /* not a logical pgoutput slot (exit 78) */
	SLOT_LOST_AT_PROMOTION,/* missing, the timeline moved: failover to a server without it (exit 65) */
	SLOT_GONE,             /* missing while the stream holds its changes: dropped (exit 65) */
	SLOT_INVALIDATED,      /* the server invalidated it (wal_status lost, invalidation_reason) (exit 65) */
};

enum slot_verdict slot_policy_decide(const struct slot_facts *f);

/* The exit status for a verdict that stops capture (0 for SLOT_USE and
 * SLOT_CREATE). */
int slot_policy_exit_code(enum slot_verdict v);

/* A stable name for logs, metrics and status ("lost_at_promotion", ...). */
const char *slot_policy_name(enum slot_verdict v);

#endif
