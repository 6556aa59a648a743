/*
 * apply_fence.c - applyd's fence rules (apply_fence.h).
 */
#include "trellara/apply_fence.h"

void apply_fence_seen(struct apply_fence *f, bool present, uint64_t lsn)
{
	f->present = present;
	f->lsn = present ? lsn : 0;
}

bool apply_fence_blocks(const struct apply_fence *f, uint64_t commit_lsn)
{
	return f->present && commit_lsn >= f->lsn;
}

bool apply_fence_idle_hold(const struct apply_fence *f, uint64_t applied_through)
{
	return f->present && applied_through >= f->lsn;
}

void apply_fence_hold(struct apply_fence *f)
{
	f->holding = true;
	f->held_lsn = f->lsn;
}

enum apply_fence_poll apply_fence_poll(struct apply_fence *f, bool present, uint64_t lsn, bool requested)
{
	apply_fence_seen(f, present, lsn);
	if (!present || (requested && lsn > f->held_lsn)) {
		f->holding = false;
		return APPLY_FENCE_RELEASED;
	}
	if (requested) {
		f->held_lsn = lsn;
		return APPLY_FENCE_REHOLD;
	}
	return APPLY_FENCE_STILL_HELD;
}
