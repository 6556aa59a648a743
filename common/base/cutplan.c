/*
 * cutplan.c - the decisions of trellara cutover (cutplan.h).
 */
#include "trellara/cutplan.h"

#include <stddef.h>
#include <string.h>

static const char *const state_names[CUT_STATE_COUNT] = {
	[CUT_NONE] = "none",
	[CUT_STARTED] = "started",
	[CUT_LOCKING] = "locking",
	[CUT_LOCKED] = "locked",
	[CUT_CAUGHT_UP] = "caught_up",
	[CUT_SEQUENCES_SYNCED] = "sequences_synced",
	[CUT_VERIFIED] = "verified",
	[CUT_STOPPING] = "stopping",
	[CUT_CUT_OVER] = "cut_over",
	[CUT_ABORTED] = "aborted",
	[CUT_FAILED] = "failed",
};

static const char *const lock_names[] = { "none", "requested", "held", "released" };

const char *cutplan_state_name(enum cutplan_state s)
{
	return (unsigned)s < CUT_STATE_COUNT ? state_names[s] : NULL;
}

bool cutplan_state_parse(const char *name, enum cutplan_state *out)
{
	for (int i = 0; i < CUT_STATE_COUNT; i++)
		if (strcmp(state_names[i], name) == 0) {
			*out = (enum cutplan_state)i;
			return true;
		}
	return false;
}

const char *cutplan_lock_name(enum cutplan_lock l)
{
	return (unsigned)l <= CUT_LOCK_RELEASED ? lock_names[l] : NULL;
}

bool cutplan_lock_parse(const char *name, enum cutplan_lock *out)
{
	for (int i = 0; i <= CUT_LOCK_RELEASED; i++)
		if (strcmp(lock_names[i], name) == 0) {
			*out = (enum cutplan_lock)i;
			return true;
		}
	return false;
}

bool cutplan_lock_in_place(enum cutplan_lock l)
{
	/* requested: killed between recording the intent and knowing
	 * whether the ALTER committed, so it may be in place */
	return l == CUT_LOCK_REQUESTED || l == CUT_LOCK_HELD;
}

enum cutplan_blocker cutplan_streaming(const struct cutplan_flow *f)
{
	if (!f->metrics_dir_set)
		return CUT_BLOCKER_NO_METRICS_DIR;
	if (!f->state_file || !f->supervisor_alive)
		return CUT_BLOCKER_NO_SUPERVISOR;
	if (!f->supervisor_running)
		return CUT_BLOCKER_NOT_RUNNING;
	if (!f->capture_alive || !f->applyd_alive)
		return CUT_BLOCKER_CHILD_DOWN;
	if (!f->slot_active)
		return CUT_BLOCKER_SLOT_INACTIVE;
	return CUT_BLOCKER_NONE;
}

const char *cutplan_blocker_text(enum cutplan_blocker b)
{
	switch (b) {
	case CUT_BLOCKER_NONE: return "the flow is streaming";
	case CUT_BLOCKER_NO_METRICS_DIR:
		return "observability.metrics_dir is not set and has no default place (no home directory, no TRELLARA_STATE_DIR): cutover finds the flow's processes through trellara run's supervisor.state there";
	case CUT_BLOCKER_NO_SUPERVISOR: return "no trellara run supervises the flow";
	case CUT_BLOCKER_NOT_RUNNING: return "trellara run is not streaming yet (or is stopping)";
	case CUT_BLOCKER_CHILD_DOWN: return "trellara-capture or trellara-applyd is not running (being restarted?)";
	case CUT_BLOCKER_SLOT_INACTIVE: return "capture is not streaming from the replication slot";
	}
	return "?";
}

enum cutplan_action cutplan_next(const struct cutplan_view *v)
{
	if (v->abort) {
		if (cutplan_lock_in_place(v->lock))
			return CUT_DO_UNLOCK;
		switch (v->state) {
		case CUT_NONE:
		case CUT_ABORTED:
		case CUT_FAILED:
		case CUT_CUT_OVER: return CUT_DO_NOTHING_TO_ABORT;
		default: return CUT_DO_MARK_ABORTED;
		}
	}
	/* locked once, but the row no longer says held: an --abort (or a
	 * failed step) was killed while it unlocked (requested: the ALTER may
	 * have run) or after (released), before it recorded its end.  Going
	 * on would cut over with the source taking writes after the final
	 * LSN */
	bool relock = v->lock_source && v->lock != CUT_LOCK_HELD && v->state >= CUT_LOCKED && v->state <= CUT_STOPPING;
	switch (v->state) {
	case CUT_CUT_OVER: return CUT_DO_DONE;
	case CUT_STOPPING:
		if (!relock)
			return CUT_DO_STOP; /* the processes are going away on purpose */
		/* only --abort unlocks a stopping cutover: finish it */
		return cutplan_lock_in_place(v->lock) ? CUT_DO_UNLOCK : CUT_DO_MARK_ABORTED;
	default: break;
	}
	/* before the stop, every step needs the flow streaming and clean */
	if (v->quarantine_open > 0)
		return CUT_DO_REFUSE_QUARANTINE;
	if (v->blocker != CUT_BLOCKER_NONE)
		return CUT_DO_REFUSE_NOT_STREAMING;
	/* lock again: the final LSN, the sequences and verify follow it again */
	if (relock)
		return CUT_DO_LOCK;
	switch (v->state) {
	case CUT_NONE:
	case CUT_ABORTED:
	case CUT_FAILED: return CUT_DO_START;
	case CUT_STARTED:
		/* the lock comes first when asked for: the final LSN is read after it */
		return v->lock_source && v->lock != CUT_LOCK_HELD ? CUT_DO_LOCK : CUT_DO_WAIT_APPLY;
	case CUT_LOCKING: return CUT_DO_LOCK; /* again: each part is idempotent */
	case CUT_LOCKED: return CUT_DO_WAIT_APPLY;
	case CUT_CAUGHT_UP: return CUT_DO_SYNC_SEQUENCES;
	case CUT_SEQUENCES_SYNCED: return CUT_DO_VERIFY;
	case CUT_VERIFIED: return CUT_DO_STOP;
	default: break;
	}
	return CUT_DO_REFUSE_NOT_STREAMING; /* not reached: every state is above */
}

const char *cutplan_action_name(enum cutplan_action a)
{
	static const char *const names[] = {
		[CUT_DO_START] = "start",
		[CUT_DO_LOCK] = "lock",
		[CUT_DO_WAIT_APPLY] = "wait_apply",
		[CUT_DO_SYNC_SEQUENCES] = "sync_sequences",
		[CUT_DO_VERIFY] = "verify",
		[CUT_DO_STOP] = "stop",
		[CUT_DO_DONE] = "done",
		[CUT_DO_UNLOCK] = "unlock",
		[CUT_DO_MARK_ABORTED] = "mark_aborted",
		[CUT_DO_NOTHING_TO_ABORT] = "nothing_to_abort",
		[CUT_DO_REFUSE_QUARANTINE] = "refuse_quarantine",
		[CUT_DO_REFUSE_NOT_STREAMING] = "refuse_not_streaming",
	};
	return (unsigned)a < sizeof names / sizeof names[0] ? names[a] : "?";
}

bool cutplan_unlock_on_failure(enum cutplan_lock lock, bool keep_locked)
{
	return cutplan_lock_in_place(lock) && !keep_locked;
}

uint64_t cutplan_default_margin(bool lock_source)
{
	return lock_source ? 0 : CUTPLAN_UNLOCKED_MARGIN;
}

enum cutplan_wait cutplan_wait_step(uint64_t applied_through_lsn, uint64_t final_lsn, double waited_seconds,
				    double timeout_seconds, enum cutplan_blocker blocker)
{
	if (applied_through_lsn >= final_lsn)
		return CUT_WAIT_CAUGHT_UP;
	if (blocker != CUT_BLOCKER_NONE)
		return CUT_WAIT_NOT_STREAMING;
	if (waited_seconds >= timeout_seconds)
		return CUT_WAIT_TIMEOUT;
	return CUT_WAIT_MORE;
}
