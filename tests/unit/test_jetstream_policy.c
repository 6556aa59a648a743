/*
 * test_jetstream_policy - the settings a flow's JetStream stream must have
 * (jetstream_policy.h): created as file storage, limits retention, discard
 * new, no limits, the flow's replicas, subject and duplicate window; an
 * existing stream accepted only when it is so, otherwise refused naming
 * the setting.
 */
#include "trellara/jetstream_policy.h"
#include "unit.h"

#include <string.h>

#define NS_PER_S INT64_C(1000000000)

/* decide on s; expect REFUSE naming setting, with needle in the reason */
static void expect_refusal(const struct jetstream_wanted *want, const struct jetstream_stream_settings *s,
			   const char *setting, const char *needle)
{
	struct jetstream_refusal why = { 0 };
	CHECK(jetstream_policy_decide(want, s, &why) == JETSTREAM_REFUSE);
	CHECK(why.setting != NULL);
	if (why.setting)
		CHECK_STR(why.setting, setting);
	CHECK(strstr(why.reason, needle) != NULL);
	if (!strstr(why.reason, needle))
		fprintf(stderr, "  reason \"%s\" lacks \"%s\"\n", why.reason, needle);
}

int main(void)
{
	const struct jetstream_wanted want = { .subject = "trellara.orders", .replicas = 3, .duplicate_window_seconds = 120 };
	struct jetstream_stream_settings created, s;
	struct jetstream_refusal why;

	/* no stream: create, exactly so */
	CHECK(jetstream_policy_decide(&want, NULL, &why) == JETSTREAM_CREATE);
	jetstream_policy_settings(&want, &created);
	CHECK(created.storage == JETSTREAM_STORAGE_FILE);
	CHECK(created.retention == JETSTREAM_RETENTION_LIMITS);
	CHECK(created.discard == JETSTREAM_DISCARD_NEW);
	CHECK(created.replicas == 3);
	CHECK(created.n_subjects == 1);
	CHECK_STR(created.subjects[0], "trellara.orders");
	CHECK(created.max_msgs <= 0 && created.max_bytes <= 0 && created.max_msgs_per_subject <= 0);
	CHECK(created.max_age_ns == 0);
	CHECK(created.duplicate_window_ns == 120 * NS_PER_S);
	CHECK(!created.sealed);

	/* what it creates it accepts (a second init) */
	CHECK(jetstream_policy_decide(&want, &created, &why) == JETSTREAM_ACCEPT);
	/* the servers report "no limit" as -1 or 0 alike */
	s = created;
	s.max_msgs = 0, s.max_bytes = 0, s.max_msgs_per_subject = 0;
	CHECK(jetstream_policy_decide(&want, &s, NULL) == JETSTREAM_ACCEPT);
	/* a size limit with discard new is back-pressure, not loss: accepted */
	s = created;
	s.max_bytes = 1 << 30;
	s.max_msgs = 1000000;
	CHECK(jetstream_policy_decide(&want, &s, NULL) == JETSTREAM_ACCEPT);

	/* durability */
	s = created;
	s.storage = JETSTREAM_STORAGE_MEMORY;
	expect_refusal(&want, &s, "storage", "memory is not durable");
	s = created;
	s.retention = JETSTREAM_RETENTION_WORKQUEUE;
	expect_refusal(&want, &s, "retention", "retention workqueue");
	s.retention = JETSTREAM_RETENTION_INTEREST;
	expect_refusal(&want, &s, "retention", "retention interest");

	/* what could delete what applyd has not applied */
	s = created;
	s.discard = JETSTREAM_DISCARD_OLD;
	s.max_age_ns = 24 * 3600 * NS_PER_S;
	expect_refusal(&want, &s, "max_age",
		       "discard old with max_age 24h: JetStream could delete messages applyd has not applied");
	s.discard = JETSTREAM_DISCARD_NEW; /* an age limit deletes whatever the discard policy */
	expect_refusal(&want, &s, "max_age", "max_age 24h: JetStream could delete");
	s = created;
	s.max_msgs_per_subject = 10;
	expect_refusal(&want, &s, "max_msgs_per_subject", "max_msgs_per_subject 10");
	s = created;
	s.discard = JETSTREAM_DISCARD_OLD;
	expect_refusal(&want, &s, "discard", "discard old: JetStream could delete");
	s.max_bytes = 1 << 20;
	expect_refusal(&want, &s, "discard", "discard old with max_bytes 1048576");
	s = created;
	s.sealed = true;
	expect_refusal(&want, &s, "sealed", "takes no new messages");

	/* the flow file's settings */
	s = created;
	s.replicas = 1;
	expect_refusal(&want, &s, "replicas", "replicas 1: the flow file asks for 3 (stream.replicas)");
	s.replicas = 5;
	expect_refusal(&want, &s, "replicas", "replicas 5");
	const char *other[] = { "other.subject" };
	s = created;
	s.subjects = other;
	expect_refusal(&want, &s, "subjects", "stream.subject \"trellara.orders\" is missing");
	s.n_subjects = 0;
	expect_refusal(&want, &s, "subjects", "is missing");
	const char *two[] = { "other.subject", "trellara.orders" };
	s.subjects = two;
	s.n_subjects = 2;
	expect_refusal(&want, &s, "subjects", "1 subjects besides \"trellara.orders\"");
	s = created;
	s.duplicate_window_ns = 30 * NS_PER_S;
	expect_refusal(&want, &s, "duplicate_window", "duplicate_window 30s: the flow file asks for 120s");

	/* durability is named before the flow's settings */
	s = created;
	s.replicas = 1;
	s.storage = JETSTREAM_STORAGE_MEMORY;
	expect_refusal(&want, &s, "storage", "memory");

	/* stream.max_bytes sizes a new stream; an existing one may be sized
	 * otherwise (discard new: a full stream is back-pressure, not loss) */
	struct jetstream_wanted sized = want;
	sized.max_bytes = 64 << 20;
	jetstream_policy_settings(&sized, &s);
	CHECK(s.max_bytes == 64 << 20);
	CHECK(s.discard == JETSTREAM_DISCARD_NEW);
	CHECK(jetstream_policy_decide(&sized, &s, NULL) == JETSTREAM_ACCEPT);
	CHECK(jetstream_policy_decide(&sized, &created, NULL) == JETSTREAM_ACCEPT);
	CHECK(jetstream_policy_decide(&want, &s, NULL) == JETSTREAM_ACCEPT);

	/* names and durations */
	CHECK_STR(jetstream_policy_discard_name(JETSTREAM_DISCARD_NEW), "new");
	CHECK_STR(jetstream_policy_retention_name(JETSTREAM_RETENTION_LIMITS), "limits");
	CHECK_STR(jetstream_policy_storage_name(JETSTREAM_STORAGE_FILE), "file");
	char buf[32];
	jetstream_policy_format_duration(90 * 60 * NS_PER_S, buf, sizeof buf);
	CHECK_STR(buf, "90m");
	jetstream_policy_format_duration(1500000000, buf, sizeof buf);
	CHECK_STR(buf, "1500ms");
	jetstream_policy_format_duration(7, buf, sizeof buf);
	CHECK_STR(buf, "7 ns");
	jetstream_policy_format_duration(2 * 3600 * NS_PER_S, buf, sizeof buf);
	CHECK_STR(buf, "2h");

	/* capture's publishes: the stored prefix, and a gap */
#define U JETSTREAM_PUB_UNANSWERED
#define S JETSTREAM_PUB_STORED
#define N JETSTREAM_PUB_NOT_STORED
#define R JETSTREAM_PUB_REFUSED
	const enum jetstream_publish_answer all[] = { S, S, S };
	struct jetstream_publish_verdict v = jetstream_policy_publish_decide(all, 3);
	CHECK(v.stored == 3 && !v.misplaced);
	v = jetstream_policy_publish_decide(all, 0);
	CHECK(v.stored == 0 && !v.misplaced);
	/* a PubAck lost: the frames after it stay queued (sent again, a
	 * duplicate by their id), nothing misplaced */
	const enum jetstream_publish_answer lost[] = { S, U, S };
	v = jetstream_policy_publish_decide(lost, 3);
	CHECK(v.stored == 1 && !v.misplaced);
	/* no quorum, then nothing: held */
	const enum jetstream_publish_answer held[] = { N, U, U };
	v = jetstream_policy_publish_decide(held, 3);
	CHECK(v.stored == 0 && !v.misplaced);
	/* refused (an earlier run's messages stored after all), and a later
	 * frame stored where they made its expected sequence true: a gap */
	const enum jetstream_publish_answer gap[] = { R, R, S, S };
	v = jetstream_policy_publish_decide(gap, 4);
	CHECK(v.stored == 0 && v.misplaced && v.misplaced_at == 2 && v.hole_at == 0);
	const enum jetstream_publish_answer gap2[] = { S, N, U, S };
	v = jetstream_policy_publish_decide(gap2, 4);
	CHECK(v.stored == 1 && v.misplaced && v.misplaced_at == 3 && v.hole_at == 1);
	/* one frame at a time until this run stored one */
	CHECK(jetstream_policy_publish_window(false, 40) == 1);
	CHECK(jetstream_policy_publish_window(false, 0) == 0);
	CHECK(jetstream_policy_publish_window(true, 40) == 40);
#undef U
#undef S
#undef N
#undef R
	return unit_done("jetstream_policy");
}
