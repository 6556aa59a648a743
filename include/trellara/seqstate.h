/*
 * seqstate.h - a sequence's state and what to do with a target sequence
 * (trellara-sequences(1)); pure, no libpq, no logging.
 *
 * A sequence's state is PostgreSQL's pair (last_value, is_called): the
 * next nextval() returns last_value when is_called is false, else
 * last_value + increment.  States are compared by that next value, in the
 * sequence's direction (the sign of its increment), so (10, true) and
 * (11, false) of an ascending sequence by 1 are equal; a sequence past its
 * last int64 value is the farthest one can be.
 *
 * seq_decide() is the one rule snapshot, `trellara sequences sync` and
 * verify share: the target is set to the source's state moved on by
 * margin increments, and never moved backwards.
 */
#ifndef TRELLARA_SEQSTATE_H
#define TRELLARA_SEQSTATE_H

#include <stdbool.h>
#include <stdint.h>

struct seq_state {
	int64_t last_value;
	bool is_called;
};

/* the target sequence's own parameters (pg_sequence) */
struct seq_params {
	int64_t increment; /* never 0 */
	int64_t min_value, max_value;
};

/* where a is against b: behind, the same next value, ahead */
enum seq_order { SEQ_BEHIND = -1, SEQ_SAME = 0, SEQ_AHEAD = 1 };

enum seq_action {
	SEQ_SET,          /* setval(target, want.last_value, want.is_called) */
	SEQ_KEEP_SAME,    /* the target already hands out the wanted next value */
	SEQ_KEEP_AHEAD,   /* the target is ahead: never moved backwards */
	SEQ_OUT_OF_RANGE, /* the wanted value is outside the target's min..max: nothing set */
};

struct seq_decision {
	enum seq_action action;
	struct seq_state want; /* the source's state moved on by the margin */
};

/* a against b, in the direction of increment (a non-zero increment). */
enum seq_order seq_compare(const struct seq_state *a, const struct seq_state *b, int64_t increment);

/* What to do with the target: want = (source.last_value + margin *
 * target->increment, source.is_called); SEQ_SET when the target is behind
 * want, else SEQ_KEEP_SAME or SEQ_KEEP_AHEAD; SEQ_OUT_OF_RANGE when want
 * does not fit the target's min..max (or int64). */
struct seq_decision seq_decide(const struct seq_state *source, const struct seq_state *target,
			       const struct seq_params *target_params, uint64_t margin);

/* "set", "same", "ahead", "out_of_range" */
const char *seq_action_name(enum seq_action action);

#endif
