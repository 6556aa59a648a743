#include "trellara/runstate.h"
#include "unit.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Written out literally, independent of common/base/runstate.c. */
static const char *const names[RUN_STATE_COUNT] = {
	"planned",       "slot_created",         "snapshot_exported", "copying_table",     "copy_complete",
	"stream_handoff_ready", "streaming",     "verified",          "failed_recoverable",
};

/*
 * Expected outcomes, one row per "from" state, one column per "to" state,
 * both in enum order:
 *
 *      P  = planned               SC = slot_created
 *      SE = snapshot_exported     CT = copying_table
 *      CC = copy_complete         HR = stream_handoff_ready
 *      ST = streaming             V  = verified
 *      F  = failed_recoverable
 *
 * 'Y' allowed, '.' rejected.
 */

/* No evidence at all (NULL, zeroed, or any partial slot evidence): only
 * moves to planned that the structure allows. */
static const char *const table_none[RUN_STATE_COUNT] = {
	/*        P SC SE CT CC HR ST V F */
	/* P  */ "Y........",
	/* SC */ ".........",
	/* SE */ ".........",
	/* CT */ ".........",
	/* CC */ ".........",
	/* HR */ ".........",
	/* ST */ ".........",
	/* V  */ ".........",
	/* F  */ "Y........",
};

/* Slot name and consistent LSN, no failure reason, no new evidence. */
static const char *const table_slot[RUN_STATE_COUNT] = {
	/*        P SC SE CT CC HR ST V F */
	/* P  */ "YYYYYYYY.",
	/* SC */ ".YYYYYYY.",
	/* SE */ "..YYYYYY.",
	/* CT */ "...YYYYY.",
	/* CC */ "....YYYY.",
	/* HR */ ".....YYY.",
	/* ST */ "......YY.",
	/* V  */ ".......Y.",
	/* F  */ "YYYY.....",
};

/* Slot name, consistent LSN and failure reason, no new evidence. */
static const char *const table_full[RUN_STATE_COUNT] = {
	/*        P SC SE CT CC HR ST V F */
	/* P  */ "YYYYYYYYY",
	/* SC */ ".YYYYYYYY",
	/* SE */ "..YYYYYYY",
	/* CT */ "...YYYYYY",
	/* CC */ "....YYYYY",
	/* HR */ ".....YYYY",
	/* ST */ "......YYY",
	/* V  */ ".......Y.",
	/* F  */ "YYYY....Y",
};

/* Slot name, consistent LSN, failure reason and new evidence. */
static const char *const table_full_new[RUN_STATE_COUNT] = {
	/*        P SC SE CT CC HR ST V F */
	/* P  */ "YYYYYYYYY",
	/* SC */ ".YYYYYYYY",
	/* SE */ "..YYYYYYY",
	/* CT */ "...YYYYYY",
	/* CC */ "....YYYYY",
	/* HR */ ".....YYYY",
	/* ST */ "......YYY",
	/* V  */ ".......YY",
	/* F  */ "YYYY....Y",
};

/* Slot name and consistent LSN plus new evidence, no failure reason. */
static const char *const table_slot_new[RUN_STATE_COUNT] = {
	/*        P SC SE CT CC HR ST V F */
	/* P  */ "YYYYYYYY.",
	/* SC */ ".YYYYYYY.",
	/* SE */ "..YYYYYY.",
	/* CT */ "...YYYYY.",
	/* CC */ "....YYYY.",
	/* HR */ ".....YYY.",
	/* ST */ "......YY.",
	/* V  */ ".......Y.",
	/* F  */ "YYYY.....",
};

static bool starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Every pair against a table; rejected pairs must say "from X to Y: ...",
 * allowed pairs must leave err empty. */
static void check_table(const char *label, const char *const table[RUN_STATE_COUNT], const struct run_evidence *ev)
{
	for (int f = 0; f < RUN_STATE_COUNT; f++) {
		CHECK(strlen(table[f]) == RUN_STATE_COUNT);
		for (int t = 0; t < RUN_STATE_COUNT; t++) {
			char err[RUN_TRANSITION_ERR_LEN];
			memset(err, 'x', sizeof(err));
			err[sizeof(err) - 1] = '\0';
			bool want = table[f][t] == 'Y';
			int rc = run_transition_check((enum run_state)f, (enum run_state)t, ev, err, sizeof(err));
			unit_checks++;
			if ((rc == 0) != want || (rc != 0 && rc != -1)) {
				unit_failures++;
				fprintf(stderr, "%s: %s -> %s: rc %d, expected %s (%s)\n", label, names[f], names[t], rc,
					want ? "allowed" : "rejected", err);
			}
			if (rc == 0) {
				CHECK_STR(err, "");
			} else {
				char prefix[128];
				snprintf(prefix, sizeof(prefix), "run cannot move from %s to %s: ", names[f], names[t]);
				unit_checks++;
				if (!starts_with(err, prefix) || strlen(err) <= strlen(prefix) || strchr(err, '\n')) {
					unit_failures++;
					fprintf(stderr, "%s: bad error text \"%s\"\n", label, err);
				}
			}
			/* Without an err buffer the answer is the same. */
			CHECK(run_transition_check((enum run_state)f, (enum run_state)t, ev, NULL, 0) == rc);
			CHECK(run_transition_check((enum run_state)f, (enum run_state)t, ev, err, 0) == rc);
		}
	}
}

static void check_all_pairs(void)
{
	/* No evidence, in every shape it can take. */
	check_table("NULL evidence", table_none, NULL);
	struct run_evidence none = {0};
	check_table("zeroed evidence", table_none, &none);
	struct run_evidence none_new = {.new_evidence = true};
	check_table("only new_evidence", table_none, &none_new);
	struct run_evidence only_reason = {.failure_reason = "boom", .new_evidence = true};
	check_table("only failure reason", table_none, &only_reason);
	struct run_evidence slot_no_lsn = {.slot_name = "trellara_s1", .failure_reason = "boom", .new_evidence = true};
	check_table("slot name without LSN", table_none, &slot_no_lsn);
	struct run_evidence lsn_no_slot = {.consistent_lsn = 0x16B3748, .failure_reason = "boom", .new_evidence = true};
	check_table("LSN without slot name", table_none, &lsn_no_slot);
	struct run_evidence empty_slot = {.slot_name = "", .consistent_lsn = 0x16B3748, .failure_reason = "boom",
					  .new_evidence = true};
	check_table("empty slot name", table_none, &empty_slot);

	/* Slot evidence. */
	struct run_evidence slot = {.slot_name = "trellara_s1", .consistent_lsn = 0x16B3748};
	check_table("slot evidence", table_slot, &slot);
	struct run_evidence slot_empty_reason = {.slot_name = "trellara_s1", .consistent_lsn = 1, .failure_reason = ""};
	check_table("slot evidence, empty reason", table_slot, &slot_empty_reason);
	struct run_evidence slot_new = {.slot_name = "trellara_s1", .consistent_lsn = UINT64_MAX, .new_evidence = true};
	check_table("slot evidence + new evidence", table_slot_new, &slot_new);

	/* Everything failed_recoverable needs. */
	struct run_evidence full = {.slot_name = "trellara_s1", .consistent_lsn = 0x16B3748,
				    .failure_reason = "worker connection lost"};
	check_table("full evidence", table_full, &full);
	struct run_evidence full_new = full;
	full_new.new_evidence = true;
	check_table("full evidence + new evidence", table_full_new, &full_new);
}

static void expect_error(enum run_state from, enum run_state to, const struct run_evidence *ev, const char *text)
{
	char err[RUN_TRANSITION_ERR_LEN];
	CHECK(run_transition_check(from, to, ev, err, sizeof(err)) == -1);
	CHECK_STR(err, text);
}

static void expect_ok(enum run_state from, enum run_state to, const struct run_evidence *ev)
{
	char err[RUN_TRANSITION_ERR_LEN] = "junk";
	CHECK(run_transition_check(from, to, ev, err, sizeof(err)) == 0);
	CHECK_STR(err, "");
}

/* failed_recoverable: slot name, consistent LSN and failure reason, one by one. */
static void check_failed_requirements(void)
{
	const enum run_state F = RUN_FAILED_RECOVERABLE;
	struct run_evidence ev = {.slot_name = "trellara_s1", .consistent_lsn = 0x16B3748, .failure_reason = "copy failed"};
	expect_ok(RUN_COPYING_TABLE, F, &ev);
	expect_ok(RUN_SLOT_CREATED, F, &ev);
	expect_ok(RUN_STREAMING, F, &ev);
	expect_ok(F, F, &ev);
	/* planned with slot evidence already in the row (a restarted run). */
	expect_ok(RUN_PLANNED, F, &ev);

	struct run_evidence e = ev;
	e.slot_name = NULL;
	expect_error(RUN_COPYING_TABLE, F, &e,
		     "run cannot move from copying_table to failed_recoverable: slot name is missing");
	e.slot_name = "";
	expect_error(RUN_COPYING_TABLE, F, &e,
		     "run cannot move from copying_table to failed_recoverable: slot name is missing");

	e = ev;
	e.consistent_lsn = 0;
	expect_error(RUN_COPYING_TABLE, F, &e,
		     "run cannot move from copying_table to failed_recoverable: consistent LSN is missing");

	e = ev;
	e.failure_reason = NULL;
	expect_error(RUN_COPYING_TABLE, F, &e,
		     "run cannot move from copying_table to failed_recoverable: failure reason is missing");
	e.failure_reason = "";
	expect_error(RUN_COPYING_TABLE, F, &e,
		     "run cannot move from copying_table to failed_recoverable: failure reason is missing");
	/* A repeat needs them too. */
	expect_error(F, F, &e, "run cannot move from failed_recoverable to failed_recoverable: failure reason is missing");

	/* Several missing: all named. */
	e = ev;
	e.slot_name = NULL;
	e.consistent_lsn = 0;
	expect_error(RUN_SNAPSHOT_EXPORTED, F, &e,
		     "run cannot move from snapshot_exported to failed_recoverable: slot name and consistent LSN are missing");
	e = ev;
	e.consistent_lsn = 0;
	e.failure_reason = NULL;
	expect_error(RUN_SNAPSHOT_EXPORTED, F, &e,
		     "run cannot move from snapshot_exported to failed_recoverable: consistent LSN and failure reason are missing");
	expect_error(RUN_PLANNED, F, NULL,
		     "run cannot move from planned to failed_recoverable: slot name, consistent LSN and failure reason are missing");

	/* verified -> failed_recoverable: new evidence first, then the three. */
	expect_error(RUN_VERIFIED, F, &ev,
		     "run cannot move from verified to failed_recoverable: a verified run fails only on new evidence (a divergence found)");
	expect_error(RUN_VERIFIED, F, NULL,
		     "run cannot move from verified to failed_recoverable: a verified run fails only on new evidence (a divergence found)");
	e = ev;
	e.new_evidence = true;
	expect_ok(RUN_VERIFIED, F, &e);
	e.failure_reason = NULL;
	expect_error(RUN_VERIFIED, F, &e,
		     "run cannot move from verified to failed_recoverable: failure reason is missing");
}

static void check_messages(void)
{
	struct run_evidence slot = {.slot_name = "trellara_s1", .consistent_lsn = 0x16B3748, .failure_reason = "x"};
	expect_error(RUN_VERIFIED, RUN_COPYING_TABLE, &slot,
		     "run cannot move from verified to copying_table: backward moves are not allowed");
	expect_error(RUN_STREAMING, RUN_PLANNED, &slot,
		     "run cannot move from streaming to planned: backward moves are not allowed");
	expect_error(RUN_SLOT_CREATED, RUN_PLANNED, NULL,
		     "run cannot move from slot_created to planned: backward moves are not allowed");
	expect_error(RUN_FAILED_RECOVERABLE, RUN_COPY_COMPLETE, &slot,
		     "run cannot move from failed_recoverable to copy_complete: a failed run restarts only at planned, "
		     "slot_created, snapshot_exported or copying_table");
	expect_error(RUN_FAILED_RECOVERABLE, RUN_VERIFIED, &slot,
		     "run cannot move from failed_recoverable to verified: a failed run is verified again only after a "
		     "repair recorded since it failed");
	/* a repair recorded since the failure (repair-plan --apply) */
	struct run_evidence repaired = slot;
	repaired.repaired = true;
	expect_ok(RUN_FAILED_RECOVERABLE, RUN_VERIFIED, &repaired);
	repaired.slot_name = NULL;
	expect_error(RUN_FAILED_RECOVERABLE, RUN_VERIFIED, &repaired,
		     "run cannot move from failed_recoverable to verified: slot name is missing");
	/* and it opens no other way back */
	expect_error(RUN_FAILED_RECOVERABLE, RUN_STREAMING, &(struct run_evidence){ .slot_name = "s", .consistent_lsn = 1, .repaired = true },
		     "run cannot move from failed_recoverable to streaming: a failed run restarts only at planned, "
		     "slot_created, snapshot_exported or copying_table");
	expect_error(RUN_PLANNED, RUN_SLOT_CREATED, NULL,
		     "run cannot move from planned to slot_created: slot name and consistent LSN are missing");
	struct run_evidence no_lsn = {.slot_name = "trellara_s1"};
	expect_error(RUN_PLANNED, RUN_SLOT_CREATED, &no_lsn,
		     "run cannot move from planned to slot_created: consistent LSN is missing");
	/* A forward skip cannot bypass the slot evidence. */
	expect_error(RUN_PLANNED, RUN_COPYING_TABLE, &no_lsn,
		     "run cannot move from planned to copying_table: consistent LSN is missing");
	/* A structural refusal wins over missing evidence. */
	expect_error(RUN_VERIFIED, RUN_STREAMING, NULL,
		     "run cannot move from verified to streaming: backward moves are not allowed");
	/* The two promotions a verify makes. */
	expect_ok(RUN_STREAM_HANDOFF_READY, RUN_VERIFIED, &slot);
	expect_ok(RUN_STREAMING, RUN_VERIFIED, &slot);

	/* Truncation: never overflows, always terminated. */
	char small[16];
	memset(small, 'x', sizeof(small));
	CHECK(run_transition_check(RUN_VERIFIED, RUN_COPYING_TABLE, NULL, small, sizeof(small)) == -1);
	CHECK_STR(small, "run cannot move");
	char mid[40];
	CHECK(run_transition_check(RUN_VERIFIED, RUN_COPYING_TABLE, NULL, mid, sizeof(mid)) == -1);
	CHECK(strlen(mid) == sizeof(mid) - 1);
	CHECK(starts_with("run cannot move from verified to copying_table: backward", mid));
	char one[1] = {'x'};
	CHECK(run_transition_check(RUN_VERIFIED, RUN_COPYING_TABLE, NULL, one, sizeof(one)) == -1);
	CHECK(one[0] == '\0');
	CHECK(run_transition_check(RUN_PLANNED, RUN_PLANNED, NULL, one, sizeof(one)) == 0);
	CHECK(one[0] == '\0');
}

static void check_invalid_states(void)
{
	char err[RUN_TRANSITION_ERR_LEN];
	struct run_evidence full = {.slot_name = "s", .consistent_lsn = 1, .failure_reason = "r", .new_evidence = true};
	CHECK(run_transition_check((enum run_state)RUN_STATE_COUNT, RUN_PLANNED, &full, err, sizeof(err)) == -1);
	CHECK_STR(err, "run cannot move from unknown to planned: state 9 is not a run state");
	CHECK(run_transition_check(RUN_PLANNED, (enum run_state)42, &full, err, sizeof(err)) == -1);
	CHECK_STR(err, "run cannot move from planned to unknown: state 42 is not a run state");
	CHECK(run_transition_check((enum run_state)-1, (enum run_state)-1, &full, err, sizeof(err)) == -1);
	CHECK_STR(err, "run cannot move from unknown to unknown: state -1 is not a run state");
	CHECK_STR(run_state_name((enum run_state)RUN_STATE_COUNT), "unknown");
	CHECK_STR(run_state_name((enum run_state)-1), "unknown");
}

static void check_names(void)
{
	for (int i = 0; i < RUN_STATE_COUNT; i++) {
		CHECK_STR(run_state_name((enum run_state)i), names[i]);
		enum run_state s = (enum run_state)((i + 1) % RUN_STATE_COUNT);
		CHECK(run_state_from_name(names[i], &s));
		CHECK((int)s == i);
		CHECK(run_state_from_name(names[i], NULL));
	}
	CHECK(RUN_PLANNED == 0 && RUN_FAILED_RECOVERABLE == RUN_STATE_COUNT - 1);
	/* The DESIGN §6 names, spelled out once more against the enum. */
	CHECK_STR(run_state_name(RUN_PLANNED), "planned");
	CHECK_STR(run_state_name(RUN_SLOT_CREATED), "slot_created");
	CHECK_STR(run_state_name(RUN_SNAPSHOT_EXPORTED), "snapshot_exported");
	CHECK_STR(run_state_name(RUN_COPYING_TABLE), "copying_table");
	CHECK_STR(run_state_name(RUN_COPY_COMPLETE), "copy_complete");
	CHECK_STR(run_state_name(RUN_STREAM_HANDOFF_READY), "stream_handoff_ready");
	CHECK_STR(run_state_name(RUN_STREAMING), "streaming");
	CHECK_STR(run_state_name(RUN_VERIFIED), "verified");
	CHECK_STR(run_state_name(RUN_FAILED_RECOVERABLE), "failed_recoverable");

	const char *bad[] = {"", "unknown", "Planned", "PLANNED", "planned ", " planned", "plan", "plannedx",
			     "failed", "copying", "stream_handoff", "verified\n", "slot-created"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		enum run_state s = RUN_STREAMING;
		unit_checks++;
		if (run_state_from_name(bad[i], &s)) {
			unit_failures++;
			fprintf(stderr, "accepted \"%s\"\n", bad[i]);
		}
		CHECK(s == RUN_STREAMING);
	}
	enum run_state s = RUN_STREAMING;
	CHECK(!run_state_from_name(NULL, &s));
	CHECK(s == RUN_STREAMING);
}

static void check_schema_stable(void)
{
	CHECK(run_snapshot_schema_stable("a1", "a1", "a1"));
	CHECK(!run_snapshot_schema_stable("a2", "a1", "a1")); /* changed between the snapshot and the copy's start */
	CHECK(!run_snapshot_schema_stable("a1", "a1", "a2")); /* changed during the copy */
	CHECK(!run_snapshot_schema_stable("a1", "a2", "a1")); /* changed and changed back: still a change seen */
	CHECK(!run_snapshot_schema_stable(NULL, "a1", "a1"));
	CHECK(!run_snapshot_schema_stable("a1", NULL, "a1"));
	CHECK(!run_snapshot_schema_stable("a1", "a1", NULL));
	CHECK(!run_snapshot_schema_stable(NULL, NULL, NULL));
}

static void check_range_reads_same(void)
{
	CHECK(run_range_reads_same("1a2b-3c4d-10", "1a2b-3c4d-10"));
	CHECK(!run_range_reads_same("1a2b-3c4d-10", "1a2b-3c4d-11")); /* a row more, or changed */
	CHECK(!run_range_reads_same("1a2b-3c4d-10", "1a2b-3c4e-10"));
	CHECK(!run_range_reads_same("", ""));     /* nothing recorded: never kept */
	CHECK(!run_range_reads_same(NULL, "1a2b-3c4d-10"));
	CHECK(!run_range_reads_same("1a2b-3c4d-10", NULL)); /* not read */
	CHECK(!run_range_reads_same(NULL, NULL));
}

int main(void)
{
	check_schema_stable();
	check_range_reads_same();
	check_names();
	check_all_pairs();
	check_failed_requirements();
	check_messages();
	check_invalid_states();
	return unit_done("test_runstate");
}
