/*
 * test_slot_policy - capture's decision about the slot it finds
 * (slot_policy.h): use it, create it only for an empty stream, and stop
 * with exit 65 whenever a stream with changes would need a new slot.
 */
#include "trellara/slot_policy.h"
#include "trellara/defaults.h"
#include "unit.h"

#define CHECK_VERDICT(facts, want)                                                                    \
	do {                                                                                          \
		enum slot_verdict g_ = slot_policy_decide(&(facts)), w_ = (want);                     \
		CHECK(g_ == w_);                                                                      \
		if (g_ != w_)                                                                         \
			fprintf(stderr, "  got %s, expected %s\n", slot_policy_name(g_), slot_policy_name(w_)); \
	} while (0)

int main(void)
{
	const struct slot_facts healthy = { .exists = true, .logical_pgoutput = true, .wal_status = "reserved",
					    .invalidation_reason = "", .stream_holds_changes = true,
					    .stream_timeline = 1, .source_timeline = 1 };
	struct slot_facts f = healthy;
	CHECK_VERDICT(f, SLOT_USE);

	/* a promoted server that has the slot (a synced failover slot): use it,
	 * the binding checks decide whether it is behind or ahead */
	f.source_timeline = 2;
	CHECK_VERDICT(f, SLOT_USE);

	/* warnings of the server are not invalidation */
	f = healthy;
	f.wal_status = "extended";
	CHECK_VERDICT(f, SLOT_USE);
	f.wal_status = "unreserved";
	CHECK_VERDICT(f, SLOT_USE);
	f.wal_status = ""; /* PostgreSQL < 13 */
	CHECK_VERDICT(f, SLOT_USE);

	/* invalidated: by lost WAL, by the reason column (17+), by a conflict (16+) */
	f = healthy;
	f.wal_status = "lost";
	CHECK_VERDICT(f, SLOT_INVALIDATED);
	f = healthy;
	f.invalidation_reason = "idle_timeout";
	CHECK_VERDICT(f, SLOT_INVALIDATED);
	f = healthy;
	f.conflicting = true;
	CHECK_VERDICT(f, SLOT_INVALIDATED);
	/* even for an empty stream, --start-now or not: the slot cannot stream */
	f.stream_holds_changes = false;
	f.start_now = true;
	CHECK_VERDICT(f, SLOT_INVALIDATED);

	/* a physical slot, or another plugin's, before anything else */
	f = healthy;
	f.logical_pgoutput = false;
	f.wal_status = "lost";
	CHECK_VERDICT(f, SLOT_WRONG_KIND);

	/* missing, the stream holds changes: never a new slot */
	f = healthy;
	f.exists = false;
	CHECK_VERDICT(f, SLOT_GONE);
	f.start_now = true;
	CHECK_VERDICT(f, SLOT_GONE);
	f.source_timeline = 3; /* promoted without the slot */
	CHECK_VERDICT(f, SLOT_LOST_AT_PROMOTION);
	f.start_now = false;
	CHECK_VERDICT(f, SLOT_LOST_AT_PROMOTION);
	f.stream_timeline = 0; /* a stream that never recorded its timeline: no claim of a promotion */
	CHECK_VERDICT(f, SLOT_GONE);

	/* missing, the stream is empty: the snapshot creates it, or --start-now */
	f = healthy;
	f.exists = false;
	f.stream_holds_changes = false;
	CHECK_VERDICT(f, SLOT_NOT_CREATED);
	f.source_timeline = 2; /* a timeline alone does not matter for an empty stream */
	CHECK_VERDICT(f, SLOT_NOT_CREATED);
	f.start_now = true;
	CHECK_VERDICT(f, SLOT_CREATE);

	/* exit codes: 0 to go on, 78 for configuration, 65 for lost changes */
	CHECK(slot_policy_exit_code(SLOT_USE) == EXIT_OK);
	CHECK(slot_policy_exit_code(SLOT_CREATE) == EXIT_OK);
	CHECK(slot_policy_exit_code(SLOT_NOT_CREATED) == EXIT_CONFIG);
	CHECK(slot_policy_exit_code(SLOT_WRONG_KIND) == EXIT_CONFIG);
	CHECK(slot_policy_exit_code(SLOT_LOST_AT_PROMOTION) == EXIT_DATAERR);
	CHECK(slot_policy_exit_code(SLOT_GONE) == EXIT_DATAERR);
	CHECK(slot_policy_exit_code(SLOT_INVALIDATED) == EXIT_DATAERR);
	CHECK_STR(slot_policy_name(SLOT_LOST_AT_PROMOTION), "lost_at_promotion");
	return unit_done("slot_policy");
}
