/*
 * test_seqstate - the sequence decision (seqstate.h): compared by the next
 * value in the sequence's direction, set to the source's plus the margin,
 * never moved backwards, never outside the target's range.
 */
#include "trellara/seqstate.h"
#include "unit.h"

#include <stdint.h>

static const struct seq_params up = { .increment = 1, .min_value = 1, .max_value = INT64_MAX };
static const struct seq_params up5 = { .increment = 5, .min_value = 1, .max_value = 1000 };
static const struct seq_params down = { .increment = -1, .min_value = INT64_MIN, .max_value = -1 };

static struct seq_state st(int64_t last_value, bool is_called)
{
	return (struct seq_state){ last_value, is_called };
}

static void check_decision(struct seq_state source, struct seq_state target, const struct seq_params *p,
			   uint64_t margin, enum seq_action action, int64_t want, bool want_called)
{
	struct seq_decision d = seq_decide(&source, &target, p, margin);
	CHECK(d.action == action);
	if (d.action != action)
		fprintf(stderr, "  got %s, expected %s\n", seq_action_name(d.action), seq_action_name(action));
	if (action != SEQ_OUT_OF_RANGE) {
		CHECK(d.want.last_value == want);
		CHECK(d.want.is_called == want_called);
	}
}

int main(void)
{
	struct seq_state a, b;

	/* ---- order: by the next value nextval() returns ---- */
	a = st(10, true), b = st(11, false); /* both hand out 11 next */
	CHECK(seq_compare(&a, &b, 1) == SEQ_SAME);
	a = st(10, false), b = st(10, true);
	CHECK(seq_compare(&a, &b, 1) == SEQ_BEHIND);
	CHECK(seq_compare(&b, &a, 1) == SEQ_AHEAD);
	a = st(1, false), b = st(1, false); /* fresh on both sides */
	CHECK(seq_compare(&a, &b, 1) == SEQ_SAME);
	a = st(100, true), b = st(7, true);
	CHECK(seq_compare(&a, &b, 1) == SEQ_AHEAD);
	/* descending: a smaller value is farther */
	CHECK(seq_compare(&a, &b, -1) == SEQ_BEHIND);
	a = st(-10, true), b = st(-11, false);
	CHECK(seq_compare(&a, &b, -1) == SEQ_SAME);
	/* a sequence called at the last int64 value is past every other */
	a = st(INT64_MAX, true), b = st(INT64_MAX, false);
	CHECK(seq_compare(&a, &b, 1) == SEQ_AHEAD);
	CHECK(seq_compare(&b, &a, 1) == SEQ_BEHIND);
	CHECK(seq_compare(&a, &a, 1) == SEQ_SAME);
	a = st(INT64_MIN, true), b = st(0, true);
	CHECK(seq_compare(&a, &b, -1) == SEQ_AHEAD);

	/* ---- decide ---- */
	/* behind: set to the source's state, is_called kept */
	check_decision(st(42, true), st(1, false), &up, 0, SEQ_SET, 42, true);
	check_decision(st(42, false), st(1, false), &up, 0, SEQ_SET, 42, false);
	/* the same next value: nothing to do (also when written the other way) */
	check_decision(st(42, true), st(42, true), &up, 0, SEQ_KEEP_SAME, 42, true);
	check_decision(st(43, false), st(42, true), &up, 0, SEQ_KEEP_SAME, 43, false);
	/* never backwards: a target ahead stays */
	check_decision(st(42, true), st(50, true), &up, 0, SEQ_KEEP_AHEAD, 42, true);
	check_decision(st(42, true), st(43, true), &up, 0, SEQ_KEEP_AHEAD, 42, true);
	/* the margin counts increments past the source */
	check_decision(st(42, true), st(1, false), &up, 1000, SEQ_SET, 1042, true);
	check_decision(st(42, true), st(50, true), &up, 1000, SEQ_SET, 1042, true);
	check_decision(st(42, true), st(1042, true), &up, 1000, SEQ_KEEP_SAME, 1042, true);
	check_decision(st(42, true), st(2000, true), &up, 1000, SEQ_KEEP_AHEAD, 1042, true);
	check_decision(st(10, true), st(1, false), &up5, 3, SEQ_SET, 25, true);
	/* descending sequences go down */
	check_decision(st(-42, true), st(-1, false), &down, 0, SEQ_SET, -42, true);
	check_decision(st(-42, true), st(-50, true), &down, 0, SEQ_KEEP_AHEAD, -42, true);
	check_decision(st(-42, true), st(-1, false), &down, 8, SEQ_SET, -50, true);
	/* outside the target's range, or past int64: nothing is set */
	check_decision(st(990, true), st(1, false), &up5, 3, SEQ_OUT_OF_RANGE, 0, false);
	check_decision(st(5000, true), st(1, false), &up5, 0, SEQ_OUT_OF_RANGE, 0, false);
	check_decision(st(0, true), st(1, false), &up, 0, SEQ_OUT_OF_RANGE, 0, false);
	check_decision(st(INT64_MAX - 1, true), st(1, false), &up, 2, SEQ_OUT_OF_RANGE, 0, false);
	check_decision(st(1, true), st(1, false), &up, UINT64_MAX, SEQ_OUT_OF_RANGE, 0, false);
	check_decision(st(1, true), st(1, false), &up5, (uint64_t)INT64_MAX, SEQ_OUT_OF_RANGE, 0, false);
	/* the last value itself fits */
	check_decision(st(INT64_MAX - 2, true), st(1, false), &up, 2, SEQ_SET, INT64_MAX, true);

	CHECK_STR(seq_action_name(SEQ_SET), "set");
	CHECK_STR(seq_action_name(SEQ_KEEP_AHEAD), "ahead");
	return unit_done("test_seqstate");
}
