/*
 * runstate.h - the snapshot run state machine (DESIGN §6): which state
 * moves a snapshot_runs row may make, given what the row holds.  Pure
 * logic: no libpq, no I/O; the caller reads the row, asks, and writes.
 *
 * States, in their forward order:
 *
 *   planned -> slot_created -> snapshot_exported -> copying_table ->
 *   copy_complete -> stream_handoff_ready -> streaming -> verified
 *
 * plus failed_recoverable, which is outside that order (it is neither
 * forward nor backward of anything).
 *
 * Slot evidence means: slot_name is non-NULL and non-empty AND
 * consistent_lsn != 0.  A NULL evidence pointer is no evidence at all.
 *
 * The rules, checked in this order (the first that fails is reported):
 *
 *  1. Both states must be valid enum values.
 *
 *  2. The move itself (which pairs are possible at all):
 *     a. Repeating a state (to == from) is allowed, for every state.
 *        Retries are idempotent; the caller refreshes the counters and
 *        timestamps of the row.  A repeat needs the same evidence as
 *        entering the state (rule 3).
 *     b. From failed_recoverable a run restarts only at planned,
 *        slot_created, snapshot_exported or copying_table (or repeats
 *        failed_recoverable).  It cannot go to copy_complete,
 *        stream_handoff_ready or streaming; it goes to verified only
 *        with ev->repaired (a repair recorded after the failure, and a
 *        clean verify after it: trellara-repair-plan(1)).
 *     c. verified -> failed_recoverable only with ev->new_evidence (a
 *        divergence found by a later verify).
 *     d. Any other state -> failed_recoverable is possible from every
 *        state; whether it is allowed depends on the evidence (rule 3),
 *        so planned -> failed_recoverable passes only if the row already
 *        holds slot evidence.
 *     e. Forward moves (to after from in the order above) are allowed,
 *        including skips (e.g. copying_table -> stream_handoff_ready,
 *        or stream_handoff_ready -> verified and streaming -> verified:
 *        a verify can promote either).  Skips cannot bypass the slot
 *        evidence: rule 3 holds for the target state whatever the path.
 *     f. Every other move is backward and rejected (including
 *        verified -> anything but verified / failed_recoverable).
 *
 *  3. The evidence the target state needs:
 *     - planned: nothing.
 *     - slot_created and every later state (through verified): slot
 *       evidence (slot name and consistent LSN; DESIGN §6.2 records both
 *       before anything is copied).
 *     - failed_recoverable: slot name, consistent LSN and a non-empty
 *       failure_reason, all three.  The error names every one missing.
 *
 * ev->new_evidence is looked at only for verified -> failed_recoverable,
 * ev->repaired only for failed_recoverable -> verified.
 */
#ifndef TRELLARA_RUNSTATE_H
#define TRELLARA_RUNSTATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum run_state {
	RUN_PLANNED = 0,
	RUN_SLOT_CREATED,
	RUN_SNAPSHOT_EXPORTED,
	RUN_COPYING_TABLE,
	RUN_COPY_COMPLETE,
	RUN_STREAM_HANDOFF_READY,
	RUN_STREAMING,
	RUN_VERIFIED,
	RUN_FAILED_RECOVERABLE
};
#define RUN_STATE_COUNT 9

/* "planned", "slot_created", ... "failed_recoverable" (the values stored
 * in snapshot_runs.state).  An out-of-range value gives "unknown", which
 * run_state_from_name does not accept. */
const char *run_state_name(enum run_state s);

/* Exact, case-sensitive match of one of the nine names.  On success sets
 * *s (if s is non-NULL) and returns true; otherwise returns false and
 * leaves *s alone.  NULL name gives false. */
bool run_state_from_name(const char *name, enum run_state *s);

struct run_evidence {              /* what the run row holds when the move is attempted */
	const char *slot_name;         /* NULL or "" = none */
	uint64_t consistent_lsn;       /* 0 = none */
	const char *failure_reason;    /* for failed_recoverable; NULL or "" = none */
	bool new_evidence;             /* verified -> failed_recoverable needs it (a divergence found) */
	bool repaired;                 /* failed_recoverable -> verified needs it (a repair recorded since) */
};

/* Suggested size of err; longer texts are truncated, never overflowed. */
#define RUN_TRANSITION_ERR_LEN 160

/*
 * 0 when from -> to is allowed with this evidence (ev may be NULL: no
 * evidence); err, if given, is then set to "".  Otherwise -1 with a
 * one-line reason in err that names both states, e.g.
 *   "run cannot move from verified to copying_table: backward moves are not allowed"
 *   "run cannot move from copying_table to failed_recoverable: failure reason is missing"
 * err may be NULL or errlen 0.
 */
int run_transition_check(enum run_state from, enum run_state to, const struct run_evidence *ev,
			 char *err, size_t errlen);

/*
 * A table's copy is accepted only when its schema fingerprint was the same
 * before its copy (the catalog then), at the exported snapshot (the
 * catalog as the snapshot sees it) and after it (DESIGN §6): otherwise a
 * schema change came between, and the copy is not handed off.  A NULL
 * fingerprint (it could not be read) counts as a change.
 */
bool run_snapshot_schema_stable(const char *before, const char *at_snapshot, const char *after);

/*
 * A split table's range copied by an earlier invocation counts as copied
 * at a resume's new snapshot only when it reads there exactly as it did
 * when it was copied: its content hash then (recorded with its rows) and
 * now are the same (DESIGN §6).  The resume keeps the table's earlier
 * ranges only when every one of them does; one range that reads
 * differently (a row changed, moved in or out) and the table is copied
 * whole again.  An empty or NULL hash (none recorded, or not read) never
 * matches.
 */
bool run_range_reads_same(const char *hash_then, const char *hash_now);

#endif
