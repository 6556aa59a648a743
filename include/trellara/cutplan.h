/*
 * cutplan.h - the decisions of `trellara cutover` (trellara-cutover(1)):
 * pure, no libpq, no logging, no clock.  trellara-cutover observes (the
 * cutover row of the checkpoint schema, the quarantine, the supervisor's
 * state file, the slot, the apply checkpoint), asks cutplan_next() what to
 * do, does it, records it, and asks again, so that a cutover killed at
 * any point and run again goes on from the last step it recorded.
 *
 * The steps, each recorded in the row's state when it is done (DESIGN
 * §12; the row: trellara(7)):
 *
 *   started           preconditions held; the options are recorded
 *   locking           (--lock-source) the source's previous setting is
 *                     recorded and the lock is being taken
 *   locked            the source is read-only for new transactions and its
 *                     other sessions are gone
 *   caught_up         applyd applied through the final LSN (recorded)
 *   sequences_synced  the target's sequences were set (values recorded)
 *   verified          verify answered CONVERGED (recorded)
 *   stopping          SIGTERM sent to the supervisor
 *   cut_over          capture and applyd stopped: done
 *   aborted, failed   ended without cutting over (the lock released unless
 *                     told to keep it); a new cutover starts over
 */
#ifndef TRELLARA_CUTPLAN_H
#define TRELLARA_CUTPLAN_H

#include <stdbool.h>
#include <stdint.h>

enum cutplan_state {
	CUT_NONE = 0, /* no row */
	CUT_STARTED,
	CUT_LOCKING,
	CUT_LOCKED,
	CUT_CAUGHT_UP,
	CUT_SEQUENCES_SYNCED,
	CUT_VERIFIED,
	CUT_STOPPING,
	CUT_CUT_OVER,
	CUT_ABORTED,
	CUT_FAILED,
	CUT_STATE_COUNT
};

/* The row's source_lock: what cutover did to the source. */
enum cutplan_lock {
	CUT_LOCK_NONE = 0,  /* not asked for */
	CUT_LOCK_REQUESTED, /* previous setting recorded; the lock may be in place */
	CUT_LOCK_HELD,      /* in place */
	CUT_LOCK_RELEASED   /* undone */
};

/* The spelling in the row (and in status, JSON, the man page); NULL for
 * an out-of-range value.  parse: false for an unknown name. */
const char *cutplan_state_name(enum cutplan_state s);
bool cutplan_state_parse(const char *name, enum cutplan_state *out);
const char *cutplan_lock_name(enum cutplan_lock l);
bool cutplan_lock_parse(const char *name, enum cutplan_lock *out);

/* Whether the lock must be undone before the source is writable again. */
bool cutplan_lock_in_place(enum cutplan_lock l);

/* What the supervisor's state file and the source say about the flow.
 * streaming: a live `trellara run` (state running) with capture and
 * applyd alive, and the slot active. */
struct cutplan_flow {
	bool state_file;      /* <metrics_dir>/supervisor.state was read */
	bool metrics_dir_set; /* observability.metrics_dir is set */
	bool supervisor_alive;
	bool supervisor_running; /* its state is "running" */
	bool capture_alive, applyd_alive;
	bool slot_active;
};

enum cutplan_blocker {
	CUT_BLOCKER_NONE = 0,
	CUT_BLOCKER_NO_METRICS_DIR, /* no state file can exist: cutover cannot find the processes */
	CUT_BLOCKER_NO_SUPERVISOR,  /* no live trellara run for the flow */
	CUT_BLOCKER_NOT_RUNNING,    /* trellara run is not in state running (checking, snapshotting, stopping) */
	CUT_BLOCKER_CHILD_DOWN,     /* capture or applyd is not running (restarting) */
	CUT_BLOCKER_SLOT_INACTIVE   /* capture does not stream from the slot */
};

/* Why the flow is not streaming, or CUT_BLOCKER_NONE. */
enum cutplan_blocker cutplan_streaming(const struct cutplan_flow *f);
/* One line for the operator: what is wrong (no final period). */
const char *cutplan_blocker_text(enum cutplan_blocker b);

/* Everything cutplan_next() looks at. */
struct cutplan_view {
	enum cutplan_state state; /* the row's, CUT_NONE without one */
	enum cutplan_lock lock;   /* the row's (a new cutover: CUT_LOCK_NONE) */
	bool lock_source;         /* the row's option; for a new cutover: --lock-source */
	bool abort;               /* --abort */
	int64_t quarantine_open;  /* quarantined or replay_ready entries */
	enum cutplan_blocker blocker; /* cutplan_streaming() */
};

enum cutplan_action {
	CUT_DO_START,          /* write the row: started, with the options */
	CUT_DO_LOCK,           /* record the previous setting (locking), lock, end sessions (locked) */
	CUT_DO_WAIT_APPLY,     /* read the final LSN, wait for applyd (caught_up) */
	CUT_DO_SYNC_SEQUENCES, /* sequences_synced */
	CUT_DO_VERIFY,         /* verified */
	CUT_DO_STOP,           /* stopping, SIGTERM, wait for the processes to go (cut_over) */
	CUT_DO_DONE,           /* cut over already: print what to do next, exit 0 */
	CUT_DO_UNLOCK,         /* (--abort) undo the lock, then ask again */
	CUT_DO_MARK_ABORTED,   /* (--abort) the row: aborted */
	CUT_DO_NOTHING_TO_ABORT, /* (--abort) nothing in progress, nothing locked: exit 0 */
	CUT_DO_REFUSE_QUARANTINE, /* exit 1: open quarantine */
	CUT_DO_REFUSE_NOT_STREAMING /* exit 1: view->blocker */
};

/* The next action.  A cutover in progress needs the flow streaming and no
 * quarantine until it is verified; past that (stopping) the processes are
 * going away on purpose.  --abort undoes the lock first, then marks an
 * unfinished cutover aborted; a finished one stays cut over (its lock
 * released: the source as a fallback).  A --lock-source cutover past
 * locked whose row no longer says held (an --abort or a failure killed
 * while or after it unlocked) locks again before it goes on, so the final
 * LSN, the sequences and verify are taken with the source locked; stopping,
 * it finishes that abort instead (unlock, aborted). */
enum cutplan_action cutplan_next(const struct cutplan_view *v);
const char *cutplan_action_name(enum cutplan_action a);

/* After a failed step: undo the lock (unless keep_locked) before the row
 * is marked failed. */
bool cutplan_unlock_on_failure(enum cutplan_lock lock, bool keep_locked);

/* --sequence-margin's default: 0 with the source locked (it hands out no
 * more values), CUTPLAN_UNLOCKED_MARGIN without (room for what the source
 * still hands out until the applications move). */
#define CUTPLAN_UNLOCKED_MARGIN 1000
uint64_t cutplan_default_margin(bool lock_source);

/* One poll of the wait for applyd: applied through final_lsn? */
enum cutplan_wait { CUT_WAIT_MORE, CUT_WAIT_CAUGHT_UP, CUT_WAIT_TIMEOUT, CUT_WAIT_NOT_STREAMING };
enum cutplan_wait cutplan_wait_step(uint64_t applied_through_lsn, uint64_t final_lsn, double waited_seconds,
				    double timeout_seconds, enum cutplan_blocker blocker);

#endif
