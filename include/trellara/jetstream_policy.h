/*
 * jetstream_policy.h - the settings a flow's JetStream stream must have
 * (stream.kind jetstream, trellara.yml(5); DESIGN §3): pure, no libnats,
 * no logging.  trellara stream init reads the stream's configuration from
 * the servers (or learns there is none) and asks jetstream_policy_decide()
 * whether to create it, accept it, or refuse it.
 *
 * The rule that matters: JetStream may never delete a message applyd has
 * not applied.  So the stream keeps messages on disk (file storage), by
 * limits only (never deleted because some consumer acknowledged them),
 * with no age limit and no per-subject limit (both delete old messages
 * whatever the discard policy), and discard new: a full stream refuses
 * new messages, which is back-pressure on capture, never loss.  Its
 * replicas, subject and duplicate window are the flow file's.  A stream
 * that breaks a rule is refused, naming the setting (JetStream's own name
 * for it) and why; nothing here ever changes an existing stream.
 */
#ifndef TRELLARA_JETSTREAM_POLICY_H
#define TRELLARA_JETSTREAM_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the flow file asks for (stream.subject, stream.replicas,
 * stream.duplicate_window_seconds, stream.max_bytes: 0 for none). */
struct jetstream_wanted {
	const char *subject; /* borrowed */
	uint64_t replicas;
	uint64_t duplicate_window_seconds;
	uint64_t max_bytes;
};

enum jetstream_storage { JETSTREAM_STORAGE_FILE = 0, JETSTREAM_STORAGE_MEMORY };
enum jetstream_retention { JETSTREAM_RETENTION_LIMITS = 0, JETSTREAM_RETENTION_INTEREST, JETSTREAM_RETENTION_WORKQUEUE };
enum jetstream_discard { JETSTREAM_DISCARD_OLD = 0, JETSTREAM_DISCARD_NEW };

/* A stream's configuration, as created or as the servers report it.
 * Limits: max_msgs, max_bytes and max_msgs_per_subject <= 0 mean none
 * (JetStream says -1), max_age_ns 0 means none. */
struct jetstream_stream_settings {
	const char *const *subjects; /* borrowed */
	size_t n_subjects;
	uint64_t replicas;
	enum jetstream_storage storage;
	enum jetstream_retention retention;
	enum jetstream_discard discard;
	int64_t max_msgs;
	int64_t max_bytes;
	int64_t max_msgs_per_subject;
	int64_t max_age_ns;
	int64_t duplicate_window_ns;
	bool sealed;
};

enum jetstream_verdict {
	JETSTREAM_CREATE, /* no such stream: create it with jetstream_policy_settings() */
	JETSTREAM_ACCEPT, /* it exists and is safe and as the flow file says */
	JETSTREAM_REFUSE, /* it exists and is not: the refusal says which setting, and why */
};

#define JETSTREAM_REASON_LEN 320

struct jetstream_refusal {
	const char *setting;                  /* static: "discard", "max_age", "replicas", ... */
	char reason[JETSTREAM_REASON_LEN];    /* "discard old with max_age 24h: JetStream could delete ..." */
};

/* The settings to create the stream with; out->subjects points into
 * want (one subject). */
void jetstream_policy_settings(const struct jetstream_wanted *want, struct jetstream_stream_settings *out);

/* observed NULL: the stream does not exist (CREATE).  With REFUSE, why is
 * filled in (it may be NULL otherwise). */
enum jetstream_verdict jetstream_policy_decide(const struct jetstream_wanted *want,
					       const struct jetstream_stream_settings *observed,
					       struct jetstream_refusal *why);

/* JetStream's names, as its configuration says them ("file", "limits",
 * "new", ...), for output and messages. */
const char *jetstream_policy_storage_name(enum jetstream_storage s);
const char *jetstream_policy_retention_name(enum jetstream_retention r);
const char *jetstream_policy_discard_name(enum jetstream_discard d);

/* A duration in nanoseconds the way the messages show it: "24h", "90m",
 * "120s", "1500ms", else "N ns"; into buf (always NUL-terminated). */
void jetstream_policy_format_duration(int64_t ns, char *buf, size_t len);

/* ---- capture's publishes (capture_jetstream.c's sink, and the
 * simulator's over its broker model) ----
 *
 * Capture publishes its queued frames in one attempt, pipelined: the
 * frame at offset o carries Nats-Expected-Last-Sequence o, so the stream
 * stores it only as message o + 1.  That check alone lets a gap through:
 * messages an earlier capture published without getting a PubAck (its
 * quorum lost) may still be stored after a new capture read the stream's
 * end, when the servers are back; then the new capture's first frames
 * are refused (the stream is longer than they expect), and a later one
 * whose expected sequence the leftovers happen to reach is stored -
 * after the earlier run's messages, with the new run's frames before it
 * missing.  Acknowledging the source on that store loses what the
 * missing frames held.  So:
 *   - until a frame of this run is stored, an attempt publishes one frame
 *     (jetstream_policy_publish_window): once one is, the stream's end is ours,
 *     and what an earlier run left is stored or gone for good;
 *   - an attempt counts as stored only the frames from its first on up to
 *     the first that was not (jetstream_publish_verdict), and a frame
 *     stored after one that was refused or not stored is a gap:
 *     misplaced, and the sink stops (exit 75) without acknowledging it. */
enum jetstream_publish_answer {
	JETSTREAM_PUB_UNANSWERED = 0, /* no PubAck (yet): it may be stored */
	JETSTREAM_PUB_STORED,         /* PubAck: stored as message offset + 1 */
	JETSTREAM_PUB_NOT_STORED,     /* an error the stream may cure later (full, no quorum) */
	JETSTREAM_PUB_REFUSED,        /* wrong last sequence, or stored as another message */
};

struct jetstream_publish_verdict {
	size_t stored;   /* frames stored from the attempt's first on: drop them from the queue */
	bool misplaced;  /* a frame stored after one refused or not stored */
	size_t misplaced_at, hole_at; /* with misplaced: the stored frame, and the one before it that was not */
};

/* answers[i] is the answer for the attempt's frame i (n frames). */
struct jetstream_publish_verdict jetstream_policy_publish_decide(const enum jetstream_publish_answer *answers, size_t n);

/* How many of the queued frames the next attempt publishes. */
size_t jetstream_policy_publish_window(bool run_stored, size_t queued);

#endif
