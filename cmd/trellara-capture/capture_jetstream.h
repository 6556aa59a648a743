/*
 * capture_jetstream.h - capture's sink on a JetStream stream
 * (stream.kind jetstream; DESIGN "The stream on NATS JetStream").
 *
 * Owns.  A connection to the flow's servers (jetstream_session.h), the
 * frames queued since the last sync, and the stream's binding (source
 * system, database, slot, timeline), which every message carries in its
 * headers.
 *
 * Guarantees.
 *  - Each frame is one message whose data is the frame exactly as the
 *    local stream encodes it (trellara-stream(5)), its offset the
 *    message's stream sequence - 1, so one decoder reads both.
 *  - Every message carries Nats-Expected-Last-Sequence = its offset: the
 *    servers store it only right after the message capture believes is
 *    the last one.  A second capture on the flow, or any other writer,
 *    makes the next publish of one of them fail (the writer lock's
 *    analogue); a gap can never be stored.
 *  - sync returns success only when every queued frame has its PubAck
 *    (stored by the stream's quorum) with the sequence it must have.
 *    Back-pressure: when the stream cannot store them now (no PubAck
 *    within JETSTREAM_PUBLISH_WAIT_MS, no quorum, no responders, a full
 *    stream, a lost connection) sync drops the frames that were stored
 *    from its queue, keeps the rest and says "held back" (1): nothing
 *    past them is acknowledged, and the next sync publishes them again
 *    (a repeat of a stored one is dropped by its Nats-Msg-Id).  A refusal
 *    that waiting cannot cure (a wrong last sequence: another writer; a
 *    wrong sequence in a PubAck) poisons the sink: that sync and every
 *    later one fail.
 *  - The restart point is read from the stream itself: its last messages
 *    by sequence, backwards, until a committed transaction, summarised by
 *    capture_core_restart_point_add_frame as the local stream's segments
 *    are.
 *
 * Fails.  open returns EXIT_OK, EXIT_UNAVAILABLE (servers down, quorum
 * lost), EXIT_CONFIG (no such stream, or settings the policy refuses:
 * "trellara stream init" is the hint) or EXIT_DATAERR (a message in the
 * stream is not a valid frame at its sequence, or a message is missing),
 * each logged once.  After a failed sync, capture_jetstream_exit_code
 * says why: EXIT_TEMPFAIL (another writer appended: wrong last
 * sequence), EXIT_CANTCREAT (a frame larger than the servers accept),
 * else EXIT_UNAVAILABLE.
 */
#ifndef TRELLARA_CAPTURE_JETSTREAM_H
#define TRELLARA_CAPTURE_JETSTREAM_H

#include "trellara/ack_policy.h"
#include "trellara/capture_core.h"
#include "trellara/config.h"
#include "trellara/stream.h"

#include <stdint.h>

/* No PubAck for this long after the last publish of a sync: the sink is
 * poisoned (an election after a leader's loss takes a few seconds). */
#define JETSTREAM_PUBLISH_WAIT_MS 10000
/* At most this many publishes without their PubAck (the window). */
#define JETSTREAM_PUBLISH_WINDOW 256

struct capture_jetstream;

/* Connects, checks the stream, reads the restart point.  On EXIT_OK,
 * *sink is ready to hand to capture_core_open (which then owns it) and
 * *jsp stays valid until the sink is closed; otherwise nothing is left
 * open. */
int capture_jetstream_open(const struct flow_config *cfg, struct capture_sink *sink, struct capture_jetstream **jsp,
			   struct ack_restart_point *restart, uint64_t *next_offset);

/* The payload a frame is packed up to (the assembler's
 * target_frame_payload): the servers' max_payload less room for the
 * frame header and the message headers, at least
 * JETSTREAM_MIN_FRAME_TARGET.  A single change larger than that still
 * gets a frame of its own, and one larger than max_payload exits 73. */
#define JETSTREAM_HEADERS_ROOM 4096
#define JETSTREAM_MIN_FRAME_TARGET (64 * 1024)
size_t capture_jetstream_frame_target(const struct capture_jetstream *js);

/* "JetStream stream "NAME" on SERVERS", for messages. */
const char *capture_jetstream_name(const struct capture_jetstream *js);

/* The binding the stream's last message recorded (fields NULL for an
 * empty stream, or one whose messages carry none), a copy to free. */
void capture_jetstream_binding(const struct capture_jetstream *js, struct stream_meta *meta);
/* Sets the binding every later message carries (it is durable with the
 * next synced frame). */
void capture_jetstream_bind(struct capture_jetstream *js, const struct stream_meta *meta);

/* The broker's samples of capture.prom: available, pending acks,
 * publish latency, frames stored, retries, holds. */
struct metrics;
void capture_jetstream_metrics(const struct capture_jetstream *js, struct metrics *m);
/* While the stream holds capture back: why (borrowed); else NULL. */
const char *capture_jetstream_held(const struct capture_jetstream *js);

/* After a failed sync: the exit code that says why (see above). */
int capture_jetstream_exit_code(const struct capture_jetstream *js);

#endif
