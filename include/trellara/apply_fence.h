/*
 * apply_fence.h - applyd's rules for a fence (DESIGN §9): verify sets a
 * fence at a source LSN; the applier commits everything before it, holds
 * there (reporting "held" with its applied-through position), and applies
 * again once the fence is released or replaced by a later one.
 *
 * Owns.  The fence as last read from the target and whether the applier
 * holds at it.  No libpq, no I/O, no clock: the caller reads the fence
 * row (apply_target's fence_get) and tells the module what it saw.
 *
 * Decides.
 *  - A transaction committing at or after a present fence is not applied
 *    before the hold (apply_fence_blocks): what is open commits first.
 *  - An applier that already stands at or past the fence (idle, nothing
 *    open) holds there too (apply_fence_idle_hold).
 *  - While held (apply_fence_poll): the fence gone means released; a new
 *    fence ("requested" again) at or before the held one is held again at
 *    once (re-marked held); one past it means apply up to it.
 */
#ifndef TRELLARA_APPLY_FENCE_H
#define TRELLARA_APPLY_FENCE_H

#include <stdbool.h>
#include <stdint.h>

struct apply_fence {
	bool present;      /* as last read */
	uint64_t lsn;
	bool holding;      /* marked held, waiting for a release */
	uint64_t held_lsn; /* the fence it holds at */
};

/* A fresh read of the fence row. */
void apply_fence_seen(struct apply_fence *f, bool present, uint64_t lsn);
/* Must the applier hold before a transaction committing at commit_lsn? */
bool apply_fence_blocks(const struct apply_fence *f, uint64_t commit_lsn);
/* Idle with nothing open, applied through applied_through: hold here? */
bool apply_fence_idle_hold(const struct apply_fence *f, uint64_t applied_through);
/* The applier marked itself held at the current fence. */
void apply_fence_hold(struct apply_fence *f);

enum apply_fence_poll {
	APPLY_FENCE_STILL_HELD, /* wait and read again */
	APPLY_FENCE_REHOLD,     /* a new fence at or before ours: mark held again, keep waiting */
	APPLY_FENCE_RELEASED,   /* gone, or replaced by a later one: apply again */
};
/* While holding: the fence row read again (requested: its state is
 * "requested", i.e. set anew since we marked it held). */
enum apply_fence_poll apply_fence_poll(struct apply_fence *f, bool present, uint64_t lsn, bool requested);

#endif
