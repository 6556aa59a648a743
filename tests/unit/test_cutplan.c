/*
 * test_cutplan - the decisions of trellara cutover (cutplan.h): the next
 * step from the recorded state and what is observed, the streaming
 * preconditions, --abort, the lock on failure, the wait for applyd.
 */
#include "trellara/cutplan.h"
#include "unit.h"

static const struct cutplan_flow streaming_flow = {
	.state_file = true, .metrics_dir_set = true, .supervisor_alive = true, .supervisor_running = true,
	.capture_alive = true, .applyd_alive = true, .slot_active = true,
};

static enum cutplan_action next(enum cutplan_state state, enum cutplan_lock lock, bool lock_source, bool abort,
				int64_t quarantine, enum cutplan_blocker blocker)
{
	struct cutplan_view v = { state, lock, lock_source, abort, quarantine, blocker };
	return cutplan_next(&v);
}

#define CHECK_ACTION(got, want)                                                                             \
	do {                                                                                                \
		enum cutplan_action g_ = (got), w_ = (want);                                                \
		CHECK(g_ == w_);                                                                            \
		if (g_ != w_)                                                                               \
			fprintf(stderr, "  got %s, expected %s\n", cutplan_action_name(g_), cutplan_action_name(w_)); \
	} while (0)

int main(void)
{
	/* ---- names round-trip; unknown names are refused ---- */
	for (int s = 0; s < CUT_STATE_COUNT; s++) {
		enum cutplan_state back;
		CHECK(cutplan_state_parse(cutplan_state_name((enum cutplan_state)s), &back) && back == (enum cutplan_state)s);
	}
	enum cutplan_state st;
	CHECK(!cutplan_state_parse("cutover", &st));
	CHECK(cutplan_state_name(CUT_STATE_COUNT) == NULL);
	for (int l = 0; l <= CUT_LOCK_RELEASED; l++) {
		enum cutplan_lock back;
		CHECK(cutplan_lock_parse(cutplan_lock_name((enum cutplan_lock)l), &back) && back == (enum cutplan_lock)l);
	}
	enum cutplan_lock lk;
	CHECK(!cutplan_lock_parse("locked", &lk));

	/* ---- streaming: each missing part is named ---- */
	struct cutplan_flow f = streaming_flow;
	CHECK(cutplan_streaming(&f) == CUT_BLOCKER_NONE);
	f.metrics_dir_set = false;
	CHECK(cutplan_streaming(&f) == CUT_BLOCKER_NO_METRICS_DIR);
	f = streaming_flow, f.state_file = false;
	CHECK(cutplan_streaming(&f) == CUT_BLOCKER_NO_SUPERVISOR);
	f = streaming_flow, f.supervisor_alive = false; /* a state file left behind by a dead supervisor */
	CHECK(cutplan_streaming(&f) == CUT_BLOCKER_NO_SUPERVISOR);
	f = streaming_flow, f.supervisor_running = false;
	CHECK(cutplan_streaming(&f) == CUT_BLOCKER_NOT_RUNNING);
	f = streaming_flow, f.applyd_alive = false;
	CHECK(cutplan_streaming(&f) == CUT_BLOCKER_CHILD_DOWN);
	f = streaming_flow, f.capture_alive = false;
	CHECK(cutplan_streaming(&f) == CUT_BLOCKER_CHILD_DOWN);
	f = streaming_flow, f.slot_active = false;
	CHECK(cutplan_streaming(&f) == CUT_BLOCKER_SLOT_INACTIVE);

	/* ---- a new cutover: preconditions, then start ---- */
	CHECK_ACTION(next(CUT_NONE, CUT_LOCK_NONE, true, false, 0, CUT_BLOCKER_NONE), CUT_DO_START);
	CHECK_ACTION(next(CUT_NONE, CUT_LOCK_NONE, true, false, 1, CUT_BLOCKER_NONE), CUT_DO_REFUSE_QUARANTINE);
	/* the quarantine is named first: it is why applyd stopped */
	CHECK_ACTION(next(CUT_NONE, CUT_LOCK_NONE, true, false, 1, CUT_BLOCKER_CHILD_DOWN), CUT_DO_REFUSE_QUARANTINE);
	CHECK_ACTION(next(CUT_NONE, CUT_LOCK_NONE, true, false, 0, CUT_BLOCKER_NO_SUPERVISOR), CUT_DO_REFUSE_NOT_STREAMING);
	/* an aborted or failed one starts over */
	CHECK_ACTION(next(CUT_ABORTED, CUT_LOCK_RELEASED, false, false, 0, CUT_BLOCKER_NONE), CUT_DO_START);
	CHECK_ACTION(next(CUT_FAILED, CUT_LOCK_RELEASED, true, false, 0, CUT_BLOCKER_NONE), CUT_DO_START);

	/* ---- the steps in order, with and without the lock ---- */
	CHECK_ACTION(next(CUT_STARTED, CUT_LOCK_NONE, true, false, 0, CUT_BLOCKER_NONE), CUT_DO_LOCK);
	CHECK_ACTION(next(CUT_STARTED, CUT_LOCK_NONE, false, false, 0, CUT_BLOCKER_NONE), CUT_DO_WAIT_APPLY);
	CHECK_ACTION(next(CUT_LOCKING, CUT_LOCK_REQUESTED, true, false, 0, CUT_BLOCKER_NONE), CUT_DO_LOCK);
	CHECK_ACTION(next(CUT_LOCKED, CUT_LOCK_HELD, true, false, 0, CUT_BLOCKER_NONE), CUT_DO_WAIT_APPLY);
	CHECK_ACTION(next(CUT_CAUGHT_UP, CUT_LOCK_HELD, true, false, 0, CUT_BLOCKER_NONE), CUT_DO_SYNC_SEQUENCES);
	CHECK_ACTION(next(CUT_SEQUENCES_SYNCED, CUT_LOCK_HELD, true, false, 0, CUT_BLOCKER_NONE), CUT_DO_VERIFY);
	CHECK_ACTION(next(CUT_VERIFIED, CUT_LOCK_HELD, true, false, 0, CUT_BLOCKER_NONE), CUT_DO_STOP);
	CHECK_ACTION(next(CUT_CUT_OVER, CUT_LOCK_HELD, true, false, 0, CUT_BLOCKER_NO_SUPERVISOR), CUT_DO_DONE);

	/* ---- resumed: the flow must still stream until verified ---- */
	CHECK_ACTION(next(CUT_LOCKED, CUT_LOCK_HELD, true, false, 0, CUT_BLOCKER_CHILD_DOWN), CUT_DO_REFUSE_NOT_STREAMING);
	CHECK_ACTION(next(CUT_SEQUENCES_SYNCED, CUT_LOCK_HELD, true, false, 1, CUT_BLOCKER_NONE), CUT_DO_REFUSE_QUARANTINE);
	CHECK_ACTION(next(CUT_VERIFIED, CUT_LOCK_HELD, true, false, 0, CUT_BLOCKER_NOT_RUNNING), CUT_DO_REFUSE_NOT_STREAMING);
	/* once stopping, the supervisor going away is the point */
	CHECK_ACTION(next(CUT_STOPPING, CUT_LOCK_HELD, true, false, 0, CUT_BLOCKER_NO_SUPERVISOR), CUT_DO_STOP);
	CHECK_ACTION(next(CUT_STOPPING, CUT_LOCK_NONE, false, false, 0, CUT_BLOCKER_NONE), CUT_DO_STOP);
	/* an --abort (or a failure) killed while it unlocked (requested) or
	 * after (released): a locked cutover locks again before going on (the
	 * simulator's cutover_final_lsn_covers_every_source_commit found it) */
	CHECK_ACTION(next(CUT_LOCKED, CUT_LOCK_RELEASED, true, false, 0, CUT_BLOCKER_NONE), CUT_DO_LOCK);
	CHECK_ACTION(next(CUT_CAUGHT_UP, CUT_LOCK_REQUESTED, true, false, 0, CUT_BLOCKER_NONE), CUT_DO_LOCK);
	CHECK_ACTION(next(CUT_VERIFIED, CUT_LOCK_RELEASED, true, false, 0, CUT_BLOCKER_NONE), CUT_DO_LOCK);
	CHECK_ACTION(next(CUT_VERIFIED, CUT_LOCK_REQUESTED, true, false, 0, CUT_BLOCKER_CHILD_DOWN), CUT_DO_REFUSE_NOT_STREAMING);
	/* ... and a stopping one (only --abort unlocks it) finishes the abort */
	CHECK_ACTION(next(CUT_STOPPING, CUT_LOCK_REQUESTED, true, false, 0, CUT_BLOCKER_NO_SUPERVISOR), CUT_DO_UNLOCK);
	CHECK_ACTION(next(CUT_STOPPING, CUT_LOCK_RELEASED, true, false, 0, CUT_BLOCKER_NO_SUPERVISOR), CUT_DO_MARK_ABORTED);

	/* ---- --abort: unlock whatever may be locked, then mark ---- */
	CHECK_ACTION(next(CUT_LOCKING, CUT_LOCK_REQUESTED, true, true, 0, CUT_BLOCKER_NONE), CUT_DO_UNLOCK);
	CHECK_ACTION(next(CUT_CAUGHT_UP, CUT_LOCK_HELD, true, true, 1, CUT_BLOCKER_CHILD_DOWN), CUT_DO_UNLOCK);
	CHECK_ACTION(next(CUT_CAUGHT_UP, CUT_LOCK_RELEASED, true, true, 0, CUT_BLOCKER_NONE), CUT_DO_MARK_ABORTED);
	CHECK_ACTION(next(CUT_STARTED, CUT_LOCK_NONE, false, true, 0, CUT_BLOCKER_NONE), CUT_DO_MARK_ABORTED);
	CHECK_ACTION(next(CUT_NONE, CUT_LOCK_NONE, false, true, 0, CUT_BLOCKER_NONE), CUT_DO_NOTHING_TO_ABORT);
	CHECK_ACTION(next(CUT_ABORTED, CUT_LOCK_RELEASED, true, true, 0, CUT_BLOCKER_NONE), CUT_DO_NOTHING_TO_ABORT);
	/* a finished cutover keeps its record; only the source is unlocked */
	CHECK_ACTION(next(CUT_CUT_OVER, CUT_LOCK_HELD, true, true, 0, CUT_BLOCKER_NO_SUPERVISOR), CUT_DO_UNLOCK);
	CHECK_ACTION(next(CUT_CUT_OVER, CUT_LOCK_RELEASED, true, true, 0, CUT_BLOCKER_NO_SUPERVISOR), CUT_DO_NOTHING_TO_ABORT);
	/* a failed one whose lock was kept (--keep-locked) is unlocked by --abort */
	CHECK_ACTION(next(CUT_FAILED, CUT_LOCK_HELD, true, true, 0, CUT_BLOCKER_NONE), CUT_DO_UNLOCK);

	/* ---- the lock on failure ---- */
	CHECK(cutplan_unlock_on_failure(CUT_LOCK_HELD, false));
	CHECK(cutplan_unlock_on_failure(CUT_LOCK_REQUESTED, false));
	CHECK(!cutplan_unlock_on_failure(CUT_LOCK_HELD, true));
	CHECK(!cutplan_unlock_on_failure(CUT_LOCK_NONE, false));
	CHECK(!cutplan_unlock_on_failure(CUT_LOCK_RELEASED, false));

	/* ---- margin default ---- */
	CHECK(cutplan_default_margin(true) == 0);
	CHECK(cutplan_default_margin(false) == CUTPLAN_UNLOCKED_MARGIN);

	/* ---- the wait for applyd ---- */
	CHECK(cutplan_wait_step(100, 100, 0, 10, CUT_BLOCKER_NONE) == CUT_WAIT_CAUGHT_UP);
	CHECK(cutplan_wait_step(101, 100, 50, 10, CUT_BLOCKER_CHILD_DOWN) == CUT_WAIT_CAUGHT_UP);
	CHECK(cutplan_wait_step(99, 100, 1, 10, CUT_BLOCKER_NONE) == CUT_WAIT_MORE);
	CHECK(cutplan_wait_step(99, 100, 10, 10, CUT_BLOCKER_NONE) == CUT_WAIT_TIMEOUT);
	CHECK(cutplan_wait_step(99, 100, 1, 10, CUT_BLOCKER_CHILD_DOWN) == CUT_WAIT_NOT_STREAMING);
	return unit_done("test_cutplan");
}
