/*
 * model_broker_client.h - Trellara's two clients of a JetStream stream,
 * over the broker model (model_broker.h) instead of libnats: capture's
 * sink (struct capture_sink, capture_core.h), as
 * cmd/trellara-capture/capture_jetstream.c publishes, and applyd's frame
 * source (frame_source.h), as cmd/trellara-applyd/applyd_jetstream.c
 * reads.  The simulator cannot link those files (they are on libnats);
 * these follow them rule for rule, and the code they serve - capture_core
 * and the apply engine - is the project's own.
 *
 * The sink.  One message per frame, its data the frame as the local
 * stream encodes it (header, CRC), at offset = sequence - 1, with
 * Nats-Msg-Id "FLOW:OFFSET" and Nats-Expected-Last-Sequence = OFFSET.
 * sync publishes every queued frame and returns 0 when each has its
 * PubAck with sequence OFFSET + 1; 1 (held back) when some are not
 * stored now (no quorum, no leader, refused, no PubAck): the stored ones
 * are dropped from the queue, the rest kept and published again by the
 * next sync (a repeat of a stored one is answered as a duplicate); -1
 * (poisoned, for good) when the first unstored frame was refused for a
 * reason waiting cannot cure (a wrong last sequence: another writer, or
 * a repeat outside the duplicate window; a PubAck with another
 * sequence).  Open reads the restart point from the stream's last
 * messages, backwards until a committed transaction, each checked as a
 * frame at its sequence.
 *
 * The source.  Committed messages from next_offset + 1, each a valid
 * frame at exactly the next offset (a gap or a foreign message:
 * STREAM_ECORRUPT, never skipped); no leader: STREAM_EUNAVAILABLE.  The
 * group position is the broker's.
 *
 * Both belong to a simulated process, named by its file-system view
 * (stream_fs_sim_view): once that view is killed, nothing more is
 * published or read (a killed process sends nothing).  The broker, the
 * view and the clock are borrowed and outlive the client.
 *
 * Not followed: the stream binding in the messages' headers (the world
 * keeps the timeline itself), the metrics, the PubAck window and wait.
 */
#ifndef TRELLARA_MODEL_BROKER_CLIENT_H
#define TRELLARA_MODEL_BROKER_CLIENT_H

#include "model_broker.h"

#include "trellara/ack_policy.h"
#include "trellara/capture_core.h"
#include "trellara/frame_source.h"

#include <stdint.h>

struct stream_fs;

/* EXIT_OK with *sink (for capture_core_open, which then owns it),
 * *restart and *next_offset; EXIT_UNAVAILABLE (no leader: quorum lost),
 * EXIT_DATAERR (a message that is not the frame at its sequence), each
 * logged, nothing left open. */
int model_broker_sink_open(struct model_broker *b, struct stream_fs *process, const int64_t *clock_us,
			   const char *flow_id, struct capture_sink *sink, struct ack_restart_point *restart,
			   uint64_t *next_offset);

/* STREAM_OK with *src, or STREAM_EUNAVAILABLE (no leader). */
int model_broker_source_open(struct model_broker *b, struct stream_fs *process, struct frame_source *src);

#endif
