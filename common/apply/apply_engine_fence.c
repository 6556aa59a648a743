/*
 * apply_engine_fence.c - fences (DESIGN §9, apply_engine.h): apply holds
 * before the first transaction at or after a fence, reports "held", and
 * polls until the fence is released (apply_fence decides).
 */
#include "apply_engine_internal.h"

#include "trellara/defaults.h"
#include "trellara/log.h"
#include "trellara/lsn.h"

#include <string.h>

/* ---- fences (DESIGN §9) ---- */

struct apply_outcome apply_engine_fence_refresh(struct apply_engine *a)
{
	char state[16];
	bool present;
	uint64_t lsn;
	if (a->ops->fence_get(a->t, &present, &lsn, state, sizeof state) < 0)
		return apply_reconnect();
	apply_fence_seen(&a->fence, present, lsn);
	return apply_ok();
}

/* Hold: everything before the fence is committed; report "held".  The
 * steps that follow poll the fence (fence_poll) until it is released. */
struct apply_outcome apply_engine_fence_hold(struct apply_engine *a)
{
	char l[LSN_FORMAT_LEN];
	bool marked;
	if (a->ops->fence_mark_held(a->t, a->fence.lsn, a->cp.applied_through_lsn, &marked) < 0)
		return apply_reconnect();
	if (!marked) {
		/* moved or released since it was read: not the fence to hold
		 * for; the next step reads it again */
		log_info("the fence at %s moved before applyd held there: reading it again", lsn_format(a->fence.lsn, l));
		apply_fence_seen(&a->fence, false, 0);
		return apply_ok();
	}
	log_info("held at fence %s (applied through %s)", lsn_format(a->fence.lsn, l),
		 lsn_format(a->cp.applied_through_lsn, (char[LSN_FORMAT_LEN]){ 0 }));
	apply_fence_hold(&a->fence);
	return apply_ok();
}

/* Held: read the fence again. */
struct apply_outcome apply_engine_fence_poll(struct apply_engine *a, enum apply_step *what)
{
	char state[16], l[LSN_FORMAT_LEN];
	bool present;
	uint64_t lsn;
	if (a->ops->fence_get(a->t, &present, &lsn, state, sizeof state) < 0)
		return apply_reconnect();
	switch (apply_fence_poll(&a->fence, present, lsn, strcmp(state, "requested") == 0)) {
	case APPLY_FENCE_STILL_HELD:
		*what = APPLY_STEP_HELD;
		return apply_ok();
	case APPLY_FENCE_REHOLD:
		/* a new fence replaced ours, at or before it: hold for it here
		 * (moved again before the mark: the next poll sees where) */
		bool marked;
		if (a->ops->fence_mark_held(a->t, a->fence.lsn, a->cp.applied_through_lsn, &marked) < 0)
			return apply_reconnect();
		if (marked)
			log_info("held at fence %s", lsn_format(a->fence.lsn, l));
		*what = APPLY_STEP_HELD;
		return apply_ok();
	case APPLY_FENCE_RELEASED:
		break;
	}
	log_info("fence released: applying again");
	/* a reseed may have moved table watermarks while we held */
	if (a->ops->reload_tables(a->t, &a->tables) < 0)
		return apply_reconnect();
	return apply_ok();
}

/* Before applying a transaction that commits at or after the fence:
 * commit what is open, hold, and have the caller read the frame again. */
struct apply_outcome apply_engine_fence_check(struct apply_engine *a, uint64_t commit_lsn, uint64_t frame_offset,
					      bool *hold)
{
	*hold = false;
	if (!a->in_txn) {
		struct apply_outcome rc = apply_engine_fence_refresh(a);
		if (!apply_is_ok(rc))
			return rc;
	}
	if (!apply_fence_blocks(&a->fence, commit_lsn))
		return apply_ok();
	*hold = true;
	if (a->in_txn || a->batch_skipped || a->n_flights) {
		struct apply_outcome rc = apply_engine_commit_open_batch(a);
		if (!apply_is_ok(rc))
			return rc;
	}
	struct apply_outcome rc = apply_engine_fence_hold(a);
	if (!apply_is_ok(rc))
		return rc;
	rc = apply_engine_seek(a, frame_offset);
	if (apply_is_ok(rc))
		a->next_offset = frame_offset;
	return rc;
}

