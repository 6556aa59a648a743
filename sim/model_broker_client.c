/*
 * model_broker_client.c - capture's sink and applyd's frame source over
 * the broker model (model_broker_client.h).  The sink's sync is
 * capture_jetstream.c's sink_sync with each publish answered at once.
 */
#include "model_broker_client.h"

#include "trellara/defaults.h"
#include "trellara/jetstream_policy.h"
#include "trellara/log.h"
#include "trellara/stream.h"
#include "trellara/stream_fs.h"
#include "trellara/xalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the sink ---- */

struct queued_frame {
	uint8_t *bytes; /* owned: header and payload */
	size_t len;
	uint64_t offset;
	enum jetstream_publish_answer answer; /* in the attempt under way */
};

struct broker_sink {
	struct model_broker *b;     /* borrowed */
	struct stream_fs *process;  /* borrowed: dead once the process is killed */
	const int64_t *clock_us;    /* borrowed */
	char *flow_id;              /* owned: the Nats-Msg-Id prefix */
	unsigned run;               /* this run's id namespace (model_broker_next_run) */
	uint64_t next_offset;       /* the offset the next appended frame gets */
	struct queued_frame *queue; /* owned */
	size_t n_queued, cap_queued;
	bool poisoned, held;
	bool run_stored; /* a frame of this run was stored (jetstream_policy_publish_window) */
	/* the attempt under way (capture_jetstream.c's on_ack) */
	uint64_t fail_offset;
	int fail_class;
	size_t failed;
	char fail_text[256];
};

static void note_refusal(struct broker_sink *s, uint64_t offset, int exit_code, const char *what, uint64_t seq)
{
	if (s->failed++ == 0 || offset < s->fail_offset) {
		snprintf(s->fail_text, sizeof s->fail_text, "frame %" PRIu64 ": %s (sequence %" PRIu64 ")", offset, what,
			 seq);
		s->fail_offset = offset;
		s->fail_class = exit_code;
	}
}

static int sink_append(void *impl, int type, const uint8_t *payload, size_t len)
{
	struct broker_sink *s = impl;
	if (s->poisoned || stream_fs_sim_dead(s->process))
		return -1;
	if (s->n_queued == s->cap_queued) {
		s->cap_queued = s->cap_queued ? 2 * s->cap_queued : 64;
		s->queue = xrealloc(s->queue, s->cap_queued * sizeof *s->queue);
	}
	struct queued_frame *q = &s->queue[s->n_queued++];
	q->offset = s->next_offset++;
	q->len = FRAME_HEADER_SIZE + len;
	q->bytes = xmalloc(q->len);
	frame_encode_header(q->bytes, type, 0, q->offset, *s->clock_us, payload, (uint32_t)len);
	memcpy(q->bytes + FRAME_HEADER_SIZE, payload, len);
	return 0;
}

static size_t sink_pending(const void *impl)
{
	const struct broker_sink *s = impl;
	return s->n_queued;
}

/* Drop the queued frames at or below offset through (stored). */
static void drop_stored(struct broker_sink *s, int64_t through)
{
	size_t n = 0;
	while (n < s->n_queued && (int64_t)s->queue[n].offset <= through)
		free(s->queue[n++].bytes);
	memmove(s->queue, s->queue + n, (s->n_queued - n) * sizeof *s->queue);
	s->n_queued -= n;
}

/* One publish and its answer, as the PubAck handler takes it. */
static void publish_one(struct broker_sink *s, struct queued_frame *q)
{
	char id[160];
	snprintf(id, sizeof id, "%s:%u:%" PRIu64, s->flow_id, s->run, q->offset);
	uint64_t seq = 0;
	enum model_broker_answer a = model_broker_publish(s->b, q->bytes, q->len, id, q->offset, *s->clock_us, &seq);
	switch (a) {
	case MODEL_BROKER_STORED:
	case MODEL_BROKER_DUPLICATE:
		if (seq != q->offset + 1) {
			q->answer = JETSTREAM_PUB_REFUSED;
			note_refusal(s, q->offset, EXIT_TEMPFAIL, "stored as another message", seq);
		} else {
			q->answer = JETSTREAM_PUB_STORED;
		}
		break;
	case MODEL_BROKER_WRONG_LAST:
		q->answer = JETSTREAM_PUB_REFUSED;
		note_refusal(s, q->offset, EXIT_TEMPFAIL, "refused: the stream's last message is another (another writer)",
			     seq);
		break;
	case MODEL_BROKER_REFUSED:
	case MODEL_BROKER_NO_RESPONDERS:
		q->answer = JETSTREAM_PUB_NOT_STORED;
		note_refusal(s, q->offset, 0, model_broker_answer_name(a), seq);
		break;
	case MODEL_BROKER_TIMEOUT:
		q->answer = JETSTREAM_PUB_UNANSWERED;
		break; /* no answer */
	}
}

/* One attempt over the queue's first n frames (capture_jetstream.c's
 * publish_attempt): 0 all stored, 1 not all, -1 poisoned. */
static int publish_attempt(struct broker_sink *s, size_t n)
{
	s->fail_offset = UINT64_MAX;
	s->fail_class = 0;
	s->failed = 0;
	enum jetstream_publish_answer *answers = xcalloc(n ? n : 1, sizeof *answers);
	for (size_t i = 0; i < n; i++) {
		publish_one(s, &s->queue[i]);
		answers[i] = s->queue[i].answer;
	}
	struct jetstream_publish_verdict v = jetstream_policy_publish_decide(answers, n);
	free(answers);
	if (v.misplaced) {
		log_error("broker stream: frame %" PRIu64 " was stored, but frame %" PRIu64
			  " before it was not (%s): the stream holds other messages where this run's frames belong; "
			  "nothing more is acknowledged to the source",
			  s->queue[v.misplaced_at].offset, s->queue[v.hole_at].offset, s->fail_text);
		s->poisoned = true;
		return -1;
	}
	if (v.stored)
		s->run_stored = true;
	drop_stored(s, v.stored ? (int64_t)s->queue[v.stored - 1].offset : -1);
	if (v.stored == n)
		return 0;
	if (s->fail_offset == s->queue[0].offset && s->fail_class) {
		log_error("broker stream: %s; nothing more is acknowledged to the source", s->fail_text);
		s->poisoned = true;
		return -1;
	}
	return 1;
}

static int sink_sync(void *impl)
{
	struct broker_sink *s = impl;
	if (s->poisoned || stream_fs_sim_dead(s->process))
		return -1;
	int rc = 0;
	while (rc == 0 && s->n_queued > 0)
		rc = publish_attempt(s, jetstream_policy_publish_window(s->run_stored, s->n_queued));
	if (rc <= 0) {
		if (rc == 0)
			s->held = false;
		return rc;
	}
	if (!s->held)
		log_warn("broker stream: frame %" PRIu64 " not stored now; %zu frames wait", s->queue[0].offset,
			 s->n_queued);
	s->held = true;
	return 1;
}

static void sink_close(void *impl)
{
	struct broker_sink *s = impl;
	for (size_t i = 0; i < s->n_queued; i++)
		free(s->queue[i].bytes);
	free(s->queue);
	free(s->flow_id);
	free(s);
}

static const struct capture_sink_ops broker_sink_ops = {
	.append = sink_append, .pending = sink_pending, .sync = sink_sync, .close = sink_close
};

/* Message seq as the frame at offset seq - 1 (capture_jetstream.c's
 * check_frame): true with *h. */
static bool frame_at(const uint8_t *data, size_t len, uint64_t offset, struct frame_header *h, const char **reason)
{
	*reason = NULL;
	if (len < FRAME_HEADER_SIZE)
		*reason = "shorter than a frame header";
	else if (!frame_decode_header(data, h, reason))
		;
	else if (FRAME_HEADER_SIZE + (size_t)h->payload_length != len)
		*reason = "its length differs from its frame's";
	else if (!frame_check_crc(data, data + FRAME_HEADER_SIZE, h->payload_length))
		*reason = "bad frame checksum";
	else if (h->offset != offset)
		*reason = h->offset > offset ? "frames are missing before it (a gap in the stream)"
					     : "its frame's offset is not its sequence - 1";
	return *reason == NULL;
}

int model_broker_sink_open(struct model_broker *b, struct stream_fs *process, const int64_t *clock_us,
			   const char *flow_id, struct capture_sink *sink, struct ack_restart_point *restart,
			   uint64_t *next_offset)
{
	*sink = (struct capture_sink){ 0 };
	*restart = (struct ack_restart_point){ 0 };
	uint64_t first, last;
	if (model_broker_info(b, &first, &last) < 0) {
		log_error("broker stream: no leader (quorum lost, or servers down)");
		return EXIT_UNAVAILABLE;
	}
	/* the last messages, backwards, until a committed transaction */
	for (uint64_t seq = last; seq >= first && seq > 0; seq--) {
		const uint8_t *data;
		size_t len;
		int got = model_broker_get(b, seq, &data, &len);
		if (got < 0)
			return EXIT_UNAVAILABLE;
		if (got == 0) {
			log_error("broker stream: message %" PRIu64 " is missing: the stream has a gap", seq);
			return EXIT_DATAERR;
		}
		struct frame_header h;
		const char *reason;
		if (!frame_at(data, len, seq - 1, &h, &reason)) {
			log_error("broker stream: message %" PRIu64 " is not a valid trellara frame: %s", seq, reason);
			return EXIT_DATAERR;
		}
		bool committed = false;
		if (capture_core_restart_point_add_frame(restart, h.type, data + FRAME_HEADER_SIZE, h.payload_length,
							 h.offset, &committed) < 0)
			return EXIT_DATAERR;
		if (committed)
			break;
	}
	struct broker_sink *s = xcalloc(1, sizeof *s);
	s->b = b;
	s->process = process;
	s->clock_us = clock_us;
	s->flow_id = xstrdup(flow_id);
	s->run = model_broker_next_run(b);
	s->next_offset = last;
	*next_offset = last;
	*sink = (struct capture_sink){ .ops = &broker_sink_ops, .impl = s };
	return EXIT_OK;
}

/* ---- the frame source ---- */

struct broker_source {
	struct model_broker *b;    /* borrowed */
	struct stream_fs *process; /* borrowed */
	uint64_t next_offset;      /* the offset the next frame must have */
	struct frame_buffer inflated; /* owned: a compressed frame's payload (the codec every reader uses) */
};

static int source_next(void *impl, struct stream_frame *f)
{
	struct broker_source *s = impl;
	if (stream_fs_sim_dead(s->process))
		return STREAM_EIO;
	const uint8_t *data;
	size_t len;
	int got = model_broker_get(s->b, s->next_offset + 1, &data, &len);
	if (got < 0) {
		log_error("broker stream: no server answers from offset %" PRIu64 ": quorum lost, or servers down",
			  s->next_offset);
		return STREAM_EUNAVAILABLE;
	}
	if (got == 0)
		return STREAM_END;
	const char *reason;
	if (frame_at(data, len, s->next_offset, &f->header, &reason))
		reason = frame_payload_decode(&f->header, data + FRAME_HEADER_SIZE, &s->inflated, &f->payload,
					      &f->compressed);
	if (reason) {
		log_error("broker stream: the message after offset %" PRIu64 " is not the next trellara frame: %s",
			  s->next_offset, reason);
		return STREAM_ECORRUPT;
	}
	f->stored_length = (uint32_t)(len - FRAME_HEADER_SIZE);
	f->segment = "broker";
	f->position = s->next_offset + 1;
	s->next_offset++;
	return STREAM_OK;
}

static int source_seek(void *impl, uint64_t offset)
{
	struct broker_source *s = impl;
	if (stream_fs_sim_dead(s->process))
		return STREAM_EIO;
	uint64_t first, last;
	if (model_broker_info(s->b, &first, &last) < 0)
		return STREAM_EUNAVAILABLE;
	if (offset + 1 < first || offset > last) {
		log_error("broker stream holds offsets %" PRIu64 " to %" PRIu64 ", not %" PRIu64, first ? first - 1 : 0,
			  last, offset);
		return STREAM_ERANGE;
	}
	s->next_offset = offset;
	return STREAM_OK;
}

static int source_wait(void *impl, int timeout_ms)
{
	(void)impl;
	(void)timeout_ms;
	return STREAM_OK;
}

static int source_position_get(void *impl, uint64_t *position, bool *exists)
{
	struct broker_source *s = impl;
	if (stream_fs_sim_dead(s->process))
		return STREAM_EIO;
	return model_broker_group_get(s->b, position, exists) < 0 ? STREAM_EUNAVAILABLE : STREAM_OK;
}

static int source_position_set(void *impl, uint64_t position)
{
	struct broker_source *s = impl;
	if (stream_fs_sim_dead(s->process))
		return STREAM_EIO;
	/* a mirror that cannot be written now is only late (applyd_jetstream.c) */
	(void)model_broker_group_set(s->b, position);
	return STREAM_OK;
}

static int source_meta(void *impl, struct stream_meta *meta)
{
	(void)impl;
	memset(meta, 0, sizeof *meta);
	meta->format_version = STREAM_FORMAT_VERSION;
	meta->stream_id = xstrdup("jetstream:sim:1");
	return STREAM_OK;
}

static void source_close(void *impl)
{
	struct broker_source *s = impl;
	frame_buffer_free(&s->inflated);
	free(s);
}

static const struct frame_source_ops broker_source_ops = {
	.next = source_next,
	.seek = source_seek,
	.wait = source_wait,
	.position_get = source_position_get,
	.position_set = source_position_set,
	.meta = source_meta,
	.close = source_close,
};

int model_broker_source_open(struct model_broker *b, struct stream_fs *process, struct frame_source *src)
{
	*src = (struct frame_source){ 0 };
	if (!model_broker_available(b))
		return STREAM_EUNAVAILABLE;
	struct broker_source *s = xcalloc(1, sizeof *s);
	s->b = b;
	s->process = process;
	*src = (struct frame_source){ .ops = &broker_source_ops, .impl = s };
	return STREAM_OK;
}
