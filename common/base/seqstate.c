/*
 * seqstate.c - comparing sequence states and deciding a target's new
 * value (seqstate.h).
 */
#include "trellara/seqstate.h"

/* The value the next nextval() returns; false when that is past int64
 * (the sequence is exhausted in its direction: farther than any value). */
static bool next_value(const struct seq_state *s, int64_t increment, int64_t *next)
{
	if (!s->is_called) {
		*next = s->last_value;
		return true;
	}
	return !__builtin_add_overflow(s->last_value, increment, next);
}

enum seq_order seq_compare(const struct seq_state *a, const struct seq_state *b, int64_t increment)
{
	int64_t na, nb;
	bool fa = next_value(a, increment, &na), fb = next_value(b, increment, &nb);
	int order;
	if (!fa || !fb)
		order = fa == fb ? 0 : fa ? -1 : 1; /* an exhausted one is the farthest */
	else if (na == nb)
		order = 0;
	else
		order = (na > nb) == (increment > 0) ? 1 : -1;
	return order < 0 ? SEQ_BEHIND : order > 0 ? SEQ_AHEAD : SEQ_SAME;
}

struct seq_decision seq_decide(const struct seq_state *source, const struct seq_state *target,
			       const struct seq_params *target_params, uint64_t margin)
{
	struct seq_decision d = { .action = SEQ_OUT_OF_RANGE, .want = *source };
	int64_t step, want;
	if (margin > (uint64_t)INT64_MAX || __builtin_mul_overflow((int64_t)margin, target_params->increment, &step) ||
	    __builtin_add_overflow(source->last_value, step, &want))
		return d;
	d.want.last_value = want;
	if (want < target_params->min_value || want > target_params->max_value)
		return d;
	switch (seq_compare(target, &d.want, target_params->increment)) {
	case SEQ_BEHIND: d.action = SEQ_SET; break;
	case SEQ_SAME: d.action = SEQ_KEEP_SAME; break;
	case SEQ_AHEAD: d.action = SEQ_KEEP_AHEAD; break;
	}
	return d;
}

const char *seq_action_name(enum seq_action action)
{
	switch (action) {
	case SEQ_SET: return "set";
	case SEQ_KEEP_SAME: return "same";
	case SEQ_KEEP_AHEAD: return "ahead";
	case SEQ_OUT_OF_RANGE: return "out_of_range";
	}
	return "?";
}
