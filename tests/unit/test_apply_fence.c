/*
 * test_apply_fence.c - applyd's fence rules (apply_fence.h), linked
 * without libpq.
 */
#include "trellara/apply_fence.h"
#include "unit.h"

int main(void)
{
	struct apply_fence f = { 0 };
	/* no fence: nothing blocks, nothing holds */
	CHECK(!apply_fence_blocks(&f, 100));
	CHECK(!apply_fence_idle_hold(&f, 100));

	apply_fence_seen(&f, true, 500);
	CHECK(!apply_fence_blocks(&f, 499));
	CHECK(apply_fence_blocks(&f, 500)); /* at the fence: not applied before the hold */
	CHECK(apply_fence_blocks(&f, 501));
	CHECK(!apply_fence_idle_hold(&f, 499));
	CHECK(apply_fence_idle_hold(&f, 500));

	apply_fence_hold(&f);
	CHECK(f.holding && f.held_lsn == 500);
	/* still the fence we hold at, marked held */
	CHECK(apply_fence_poll(&f, true, 500, false) == APPLY_FENCE_STILL_HELD);
	CHECK(f.holding);
	/* a new fence at or before ours: hold for it here */
	CHECK(apply_fence_poll(&f, true, 400, true) == APPLY_FENCE_REHOLD);
	CHECK(f.holding && f.held_lsn == 400);
	CHECK(apply_fence_poll(&f, true, 400, true) == APPLY_FENCE_REHOLD);
	/* a later fence: apply up to it */
	CHECK(apply_fence_poll(&f, true, 900, true) == APPLY_FENCE_RELEASED);
	CHECK(!f.holding && f.present && f.lsn == 900);
	CHECK(apply_fence_blocks(&f, 900) && !apply_fence_blocks(&f, 899));

	/* released by removal */
	apply_fence_hold(&f);
	CHECK(apply_fence_poll(&f, false, 0, false) == APPLY_FENCE_RELEASED);
	CHECK(!f.holding && !f.present);
	CHECK(!apply_fence_blocks(&f, 10000));
	return unit_done("apply_fence");
}
