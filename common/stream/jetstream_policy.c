/*
 * jetstream_policy.c - the settings a flow's JetStream stream must have
 * (see jetstream_policy.h).  Pure.
 */
#include "trellara/jetstream_policy.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define NS_PER_S INT64_C(1000000000)

void jetstream_policy_settings(const struct jetstream_wanted *want, struct jetstream_stream_settings *out)
{
	memset(out, 0, sizeof *out);
	out->subjects = &want->subject;
	out->n_subjects = 1;
	out->replicas = want->replicas;
	out->storage = JETSTREAM_STORAGE_FILE;
	out->retention = JETSTREAM_RETENTION_LIMITS;
	out->discard = JETSTREAM_DISCARD_NEW;
	out->max_msgs = -1;
	out->max_bytes = want->max_bytes ? (int64_t)want->max_bytes : -1;
	out->max_msgs_per_subject = -1;
	out->max_age_ns = 0;
	out->duplicate_window_ns = (int64_t)want->duplicate_window_seconds * NS_PER_S;
}

const char *jetstream_policy_storage_name(enum jetstream_storage s)
{
	return s == JETSTREAM_STORAGE_MEMORY ? "memory" : "file";
}

const char *jetstream_policy_retention_name(enum jetstream_retention r)
{
	switch (r) {
	case JETSTREAM_RETENTION_INTEREST: return "interest";
	case JETSTREAM_RETENTION_WORKQUEUE: return "workqueue";
	case JETSTREAM_RETENTION_LIMITS: break;
	}
	return "limits";
}

const char *jetstream_policy_discard_name(enum jetstream_discard d)
{
	return d == JETSTREAM_DISCARD_NEW ? "new" : "old";
}

void jetstream_policy_format_duration(int64_t ns, char *buf, size_t len)
{
	static const struct {
		int64_t ns;
		const char *unit;
	} units[] = {
		{ 3600 * NS_PER_S, "h" }, { 60 * NS_PER_S, "m" }, { NS_PER_S, "s" }, { 1000000, "ms" },
	};
	if (len == 0)
		return;
	for (size_t i = 0; ns > 0 && i < sizeof units / sizeof *units; i++) {
		if (ns % units[i].ns == 0) {
			snprintf(buf, len, "%" PRId64 "%s", ns / units[i].ns, units[i].unit);
			return;
		}
	}
	snprintf(buf, len, "%" PRId64 " ns", ns);
}

static enum jetstream_verdict refuse(struct jetstream_refusal *why, const char *setting, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static enum jetstream_verdict refuse(struct jetstream_refusal *why, const char *setting, const char *fmt, ...)
{
	if (why) {
		va_list ap;
		why->setting = setting;
		va_start(ap, fmt);
		vsnprintf(why->reason, sizeof why->reason, fmt, ap);
		va_end(ap);
	}
	return JETSTREAM_REFUSE;
}

/* The limit a discard old policy would delete by, for the message:
 * "max_msgs 1000", "max_bytes 1048576", or "" when none is set. */
static void limit_named(const struct jetstream_stream_settings *s, char *buf, size_t len)
{
	buf[0] = '\0';
	if (s->max_msgs > 0)
		snprintf(buf, len, " with max_msgs %" PRId64, s->max_msgs);
	else if (s->max_bytes > 0)
		snprintf(buf, len, " with max_bytes %" PRId64, s->max_bytes);
}

enum jetstream_verdict jetstream_policy_decide(const struct jetstream_wanted *want,
					       const struct jetstream_stream_settings *s,
					       struct jetstream_refusal *why)
{
	char shown[64];
	if (!s)
		return JETSTREAM_CREATE;
	/* durability first: what the servers keep, and for how long */
	if (s->storage != JETSTREAM_STORAGE_FILE)
		return refuse(why, "storage",
			      "storage memory is not durable: servers restarting together lose every message; "
			      "the stream needs file storage");
	if (s->retention != JETSTREAM_RETENTION_LIMITS)
		return refuse(why, "retention",
			      "retention %s: JetStream deletes a message once a consumer acknowledges it, not once "
			      "applyd's checkpoint holds it; the stream needs retention limits",
			      jetstream_policy_retention_name(s->retention));
	if (s->max_age_ns > 0) {
		jetstream_policy_format_duration(s->max_age_ns, shown, sizeof shown);
		return refuse(why, "max_age",
			      "%smax_age %s: JetStream could delete messages applyd has not applied "
			      "(messages older than that go, whatever the discard policy); the stream needs no max_age",
			      s->discard == JETSTREAM_DISCARD_OLD ? "discard old with " : "", shown);
	}
	if (s->max_msgs_per_subject > 0)
		return refuse(why, "max_msgs_per_subject",
			      "max_msgs_per_subject %" PRId64 ": JetStream could delete messages applyd has not applied "
			      "(the oldest of the subject beyond that); the stream needs no per-subject limit",
			      s->max_msgs_per_subject);
	if (s->discard != JETSTREAM_DISCARD_NEW) {
		limit_named(s, shown, sizeof shown);
		return refuse(why, "discard",
			      "discard old%s: JetStream could delete messages applyd has not applied (the oldest, to "
			      "make room); the stream needs discard new, so that a full stream holds capture back instead",
			      shown);
	}
	if (s->sealed)
		return refuse(why, "sealed", "sealed: the stream takes no new messages");
	/* then the flow file's own settings */
	if (s->replicas != want->replicas)
		return refuse(why, "replicas",
			      "replicas %" PRIu64 ": the flow file asks for %" PRIu64
			      " (stream.replicas); JetStream acknowledges a message once a majority of the replicas has it",
			      s->replicas, want->replicas);
	bool has_subject = false;
	for (size_t i = 0; i < s->n_subjects; i++)
		if (s->subjects[i] && strcmp(s->subjects[i], want->subject) == 0)
			has_subject = true;
	if (!has_subject)
		return refuse(why, "subjects",
			      "subjects: stream.subject \"%s\" is missing (the stream has %zu other subject%s); "
			      "the flow's messages would not be stored there",
			      want->subject, s->n_subjects, s->n_subjects == 1 ? "" : "s");
	if (s->n_subjects != 1)
		return refuse(why, "subjects",
			      "subjects: %zu subjects besides \"%s\": other messages could be stored in the flow's stream; "
			      "the stream needs stream.subject only",
			      s->n_subjects - 1, want->subject);
	if (s->duplicate_window_ns != (int64_t)want->duplicate_window_seconds * NS_PER_S) {
		jetstream_policy_format_duration(s->duplicate_window_ns, shown, sizeof shown);
		return refuse(why, "duplicate_window",
			      "duplicate_window %s: the flow file asks for %" PRIu64
			      "s (stream.duplicate_window_seconds), the time within which a republished message is "
			      "dropped as a duplicate",
			      shown, want->duplicate_window_seconds);
	}
	return JETSTREAM_ACCEPT;
}

struct jetstream_publish_verdict jetstream_policy_publish_decide(const enum jetstream_publish_answer *answers, size_t n)
{
	struct jetstream_publish_verdict v = { 0 };
	while (v.stored < n && answers[v.stored] == JETSTREAM_PUB_STORED)
		v.stored++;
	bool hole = false;
	for (size_t i = v.stored; i < n; i++) {
		if (answers[i] == JETSTREAM_PUB_REFUSED || answers[i] == JETSTREAM_PUB_NOT_STORED) {
			if (!hole)
				v.hole_at = i;
			hole = true;
		} else if (answers[i] == JETSTREAM_PUB_STORED && hole) {
			v.misplaced = true;
			v.misplaced_at = i;
			break;
		}
	}
	return v;
}

size_t jetstream_policy_publish_window(bool run_stored, size_t queued)
{
	return run_stored || queued == 0 ? queued : 1;
}
