/*
 * capture_jetstream.c - capture's sink on a JetStream stream
 * (capture_jetstream.h).  The one file of trellara-capture on libnats.
 */
#include "capture_jetstream.h"

#include "../jetstream/jetstream_session.h"

#include "trellara/clock.h"
#include "trellara/defaults.h"
#include "trellara/jetstream_policy.h"
#include "trellara/log.h"
#include "trellara/metrics.h"
#include "trellara/xalloc.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct queued_frame {
	uint8_t *bytes; /* owned: header and payload */
	size_t len;
	uint64_t offset;
	enum jetstream_publish_answer answer; /* in the attempt under way */
};

struct capture_jetstream {
	struct jetstream_session s;
	const struct flow_config *cfg;
	char *name;                 /* owned: for messages */
	char *flow_id;              /* owned: the Nats-Msg-Id prefix */
	char run_id[17];            /* this run's Nats-Msg-Id namespace: random at open */
	uint64_t next_offset;       /* the offset the next appended frame gets */
	int64_t max_payload;        /* the servers' limit on a message */
	struct queued_frame *queue; /* owned */
	size_t n_queued, cap_queued;
	struct stream_meta binding; /* owned */
	struct frame_buffer deflated; /* owned: a payload compressed (stream.compression zlib) */
	bool poisoned;
	int exit_code;              /* why it is poisoned */
	/* the PubAcks of the sync under way, from libnats' thread */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	size_t answered, failed;
	char failure[512];
	size_t attempt_n;           /* the queue's first attempt_n frames are published this attempt */
	uint64_t fail_offset;       /* the lowest offset refused this attempt */
	int fail_class;             /* its exit code, or 0: the stream may take it later */
	char fail_text[512];
	/* back-pressure and its metrics (capture_jetstream_metrics) */
	bool held;                  /* the last sync could not store everything: retrying */
	bool run_stored;            /* a frame of this run was stored (jetstream_policy_publish_window) */
	uint64_t retries, published, held_total;
	double last_publish_seconds;
	char held_reason[512];
};

static void set_failure(struct capture_jetstream *js, int exit_code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Why the sink is poisoned: the first reason stays. */
static void set_failure(struct capture_jetstream *js, int exit_code, const char *fmt, ...)
{
	if (js->exit_code == 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(js->failure, sizeof js->failure, fmt, ap);
		va_end(ap);
		js->exit_code = exit_code;
	}
}

/* A frame refused at offset: the lowest refusal of an attempt says what
 * the attempt's first unstored frame met (later ones fail only because
 * it did: each expects the one before it). */
static void note_refusal(struct capture_jetstream *js, uint64_t offset, int exit_code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void note_refusal(struct capture_jetstream *js, uint64_t offset, int exit_code, const char *fmt, ...)
{
	if (js->failed++ == 0 || offset < js->fail_offset) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(js->fail_text, sizeof js->fail_text, fmt, ap);
		va_end(ap);
		js->fail_offset = offset;
		js->fail_class = exit_code;
	}
}

/* libnats' thread: one PubAck, or the error in its place.  Checks the
 * sequence: the frame at offset o must be message o + 1. */
static void on_ack(jsCtx *ctx, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae, void *closure)
{
	(void)ctx;
	struct capture_jetstream *js = closure;
	const char *expected = NULL;
	uint64_t offset = 0;
	if (natsMsgHeader_Get(msg, "Nats-Expected-Last-Sequence", &expected) == NATS_OK && expected)
		offset = strtoull(expected, NULL, 10);
	pthread_mutex_lock(&js->mu);
	enum jetstream_publish_answer answer = JETSTREAM_PUB_UNANSWERED;
	if (pae) {
		const char *text = pae->ErrText && *pae->ErrText ? pae->ErrText : natsStatus_GetText(pae->Err);
		if (pae->ErrCode == JSStreamWrongLastSequenceErr) {
			answer = JETSTREAM_PUB_REFUSED;
			note_refusal(js, offset, EXIT_TEMPFAIL,
				     "frame %" PRIu64 " refused: the stream's last message is not %" PRIu64
				     " (messages an earlier capture published without a PubAck were stored after all, "
				     "or another writer appended: %s)",
				     offset, offset, text);
		} else {
			/* the server said no (a full stream, no quorum), or nobody
			 * answered in time: not stored, or not known to be */
			if (pae->ErrCode != 0 || pae->Err == NATS_NO_RESPONDERS)
				answer = JETSTREAM_PUB_NOT_STORED;
			note_refusal(js, offset, 0, "frame %" PRIu64 " not stored: %s (JetStream error %d)", offset, text,
				     (int)pae->ErrCode);
		}
	} else if (!pa || pa->Sequence != offset + 1) {
		answer = JETSTREAM_PUB_REFUSED;
		note_refusal(js, offset, EXIT_TEMPFAIL, "frame %" PRIu64 " stored as message %" PRIu64 ", not %" PRIu64,
			     offset, pa ? pa->Sequence : 0, offset + 1);
	} else {
		answer = JETSTREAM_PUB_STORED;
	}
	/* the queue does not change while an attempt waits for its answers */
	if (js->attempt_n && offset >= js->queue[0].offset && offset - js->queue[0].offset < js->attempt_n)
		js->queue[offset - js->queue[0].offset].answer = answer;
	js->answered++;
	pthread_cond_broadcast(&js->cv);
	pthread_mutex_unlock(&js->mu);
	natsMsg_Destroy(msg);
}

static void poison(struct capture_jetstream *js)
{
	if (!js->poisoned) {
		log_error("%s: %s; nothing more is acknowledged to the source", js->name, js->failure);
		if (js->exit_code == EXIT_TEMPFAIL)
			log_hint("only one trellara-capture may publish to a flow's stream: stop the other one");
		else if (js->exit_code == EXIT_UNAVAILABLE)
			log_hint("a majority of the stream's replicas must run; capture resumes from the stream's last "
				 "message once restarted");
	}
	js->poisoned = true;
}

static int sink_append(void *impl, int type, const uint8_t *payload, size_t len)
{
	struct capture_jetstream *js = impl;
	if (js->poisoned)
		return -1;
	/* compressed as the local stream's writer compresses (stream_frame.c):
	 * flag bit 15, the CRC over the stored bytes; every reader inflates */
	uint16_t flags = 0;
	size_t stored = len;
	if (js->cfg->stream_compression_zlib && frame_payload_compress(payload, len, &js->deflated, &stored)) {
		payload = js->deflated.data;
		flags = FRAME_FLAG_ZLIB;
	}
	size_t size = FRAME_HEADER_SIZE + stored;
	if (len > MAX_FRAME_PAYLOAD || (js->max_payload > 0 && size > (size_t)js->max_payload)) {
		set_failure(js, EXIT_CANTCREAT, "a %s frame of %zu bytes is larger than the servers accept (%" PRId64 ")",
			    frame_type_name(type) ? frame_type_name(type) : "?", size, js->max_payload);
		poison(js);
		log_hint("raise max_payload of the NATS servers, or lower the chunk size of big transactions");
		return -1;
	}
	if (js->n_queued == js->cap_queued) {
		js->cap_queued = js->cap_queued ? 2 * js->cap_queued : 64;
		js->queue = xrealloc(js->queue, js->cap_queued * sizeof *js->queue);
	}
	struct queued_frame *q = &js->queue[js->n_queued++];
	q->offset = js->next_offset++;
	q->len = size;
	q->bytes = xmalloc(size);
	frame_encode_header(q->bytes, type, flags, q->offset, clock_wall_us(), payload, (uint32_t)stored);
	memcpy(q->bytes + FRAME_HEADER_SIZE, payload, stored);
	return 0;
}

static size_t sink_pending(const void *impl)
{
	const struct capture_jetstream *js = impl;
	return js->n_queued;
}

static void drop_queue(struct capture_jetstream *js)
{
	for (size_t i = 0; i < js->n_queued; i++)
		free(js->queue[i].bytes);
	js->n_queued = 0;
}

static natsStatus set_header(natsMsg *m, const char *key, const char *value)
{
	return value ? natsMsgHeader_Set(m, key, value) : NATS_OK;
}

/* One message for a queued frame. */
static natsStatus frame_message(struct capture_jetstream *js, const struct queued_frame *q, natsMsg **m)
{
	char id[512], expected[24];
	snprintf(id, sizeof id, "%s:%s:%" PRIu64, js->flow_id, js->run_id, q->offset);
	snprintf(expected, sizeof expected, "%" PRIu64, q->offset);
	natsStatus st = natsMsg_Create(m, js->cfg->jetstream_subject, NULL, (const char *)q->bytes, (int)q->len);
	if (st == NATS_OK)
		st = natsMsgHeader_Set(*m, "Nats-Msg-Id", id);
	if (st == NATS_OK)
		st = natsMsgHeader_Set(*m, "Nats-Expected-Last-Sequence", expected);
	if (st == NATS_OK)
		st = set_header(*m, JETSTREAM_HDR_SYSTEM, js->binding.system_identifier);
	if (st == NATS_OK)
		st = set_header(*m, JETSTREAM_HDR_DATABASE, js->binding.database);
	if (st == NATS_OK)
		st = set_header(*m, JETSTREAM_HDR_SLOT, js->binding.slot);
	if (st == NATS_OK)
		st = set_header(*m, JETSTREAM_HDR_TIMELINE, js->binding.timeline);
	if (st == NATS_OK)
		st = set_header(*m, JETSTREAM_HDR_START_LSN, js->binding.start_lsn);
	return st;
}

/* Drop the queued frames at or below offset (stored). */
static void drop_stored(struct capture_jetstream *js, int64_t through)
{
	size_t n = 0;
	while (n < js->n_queued && (int64_t)js->queue[n].offset <= through)
		free(js->queue[n++].bytes);
	memmove(js->queue, js->queue + n, (js->n_queued - n) * sizeof *js->queue);
	js->n_queued -= n;
}

/* Wait until every handler of the sent PubAcks ran, at most
 * JETSTREAM_PUBLISH_WAIT_MS (the mutex held). */
static void wait_handlers(struct capture_jetstream *js, size_t sent)
{
	int64_t deadline = clock_mono_us() + JETSTREAM_PUBLISH_WAIT_MS * INT64_C(1000);
	while (js->answered < sent && clock_mono_us() < deadline) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&js->cv, &js->mu, &ts);
	}
}

/* One attempt: publish the queue's first n frames (at most
 * JETSTREAM_PUBLISH_WINDOW without a PubAck), wait for their PubAcks,
 * drop the frames stored from the first on (jetstream_policy_publish_decide).
 * 0: all n stored; 1: not all (the rest stays queued); -1: poisoned. */
static int publish_attempt(struct capture_jetstream *js, size_t n)
{
	int64_t started = clock_mono_us();
	pthread_mutex_lock(&js->mu);
	js->answered = js->failed = 0;
	js->fail_offset = UINT64_MAX;
	js->fail_class = 0;
	for (size_t i = 0; i < n; i++)
		js->queue[i].answer = JETSTREAM_PUB_UNANSWERED;
	js->attempt_n = n;
	pthread_mutex_unlock(&js->mu);
	size_t sent = 0;
	natsStatus st = NATS_OK;
	for (; sent < n; sent++) {
		natsMsg *m = NULL;
		st = frame_message(js, &js->queue[sent], &m);
		if (st == NATS_OK)
			st = js_PublishMsgAsync(js->s.js, &m, NULL);
		natsMsg_Destroy(m); /* NULL once libnats took it */
		if (st != NATS_OK)
			break;
	}
	jsPubOptions po;
	jsPubOptions_Init(&po);
	po.MaxWait = JETSTREAM_PUBLISH_WAIT_MS;
	natsStatus done = sent ? js_PublishAsyncComplete(js->s.js, &po) : NATS_OK;
	pthread_mutex_lock(&js->mu);
	wait_handlers(js, sent);
	enum jetstream_publish_answer *answers = xcalloc(n ? n : 1, sizeof *answers);
	for (size_t i = 0; i < n; i++)
		answers[i] = js->queue[i].answer;
	js->attempt_n = 0; /* a late PubAck no longer lands in the queue */
	uint64_t fail_offset = js->fail_offset;
	int fail_class = js->fail_class;
	char text[512];
	snprintf(text, sizeof text, "%s", js->fail_text);
	pthread_mutex_unlock(&js->mu);
	struct jetstream_publish_verdict v = jetstream_policy_publish_decide(answers, n);
	free(answers);
	if (v.misplaced) {
		set_failure(js, EXIT_TEMPFAIL,
			    "frame %" PRIu64 " was stored, but frame %" PRIu64 " before it was not (%s): the stream "
			    "holds other messages where this run's frames belong (an earlier capture's, stored after "
			    "all, or another writer's)",
			    js->queue[v.misplaced_at].offset, js->queue[v.hole_at].offset, text);
		poison(js);
		return -1;
	}
	if (v.stored)
		js->run_stored = true;
	js->published += v.stored;
	drop_stored(js, v.stored ? (int64_t)js->queue[v.stored - 1].offset : -1);
	if (v.stored == n) {
		js->last_publish_seconds = (double)(clock_mono_us() - started) / 1e6;
		return 0;
	}
	uint64_t first = js->queue[0].offset;
	if (fail_offset == first && fail_class) {
		set_failure(js, fail_class, "%s", text);
		poison(js);
		return -1;
	}
	if (fail_offset == first)
		snprintf(js->held_reason, sizeof js->held_reason, "%s", text);
	else if (st != NATS_OK || done != NATS_OK)
		snprintf(js->held_reason, sizeof js->held_reason, "frame %" PRIu64 ": %s%s", first,
			 jetstream_session_error_text(st != NATS_OK ? st : done),
			 (st != NATS_OK ? st : done) == NATS_TIMEOUT ? " (no PubAck in time: quorum lost, or servers down)"
								     : "");
	else
		snprintf(js->held_reason, sizeof js->held_reason, "frame %" PRIu64 ": no PubAck", first);
	return 1;
}

/* Publish every queued frame, then wait for every PubAck: one frame at a
 * time until this run has stored one (jetstream_policy_publish_window), then
 * all at once.  0: all stored; 1: held back (what was stored is dropped
 * from the queue, the rest stays for the next sync: a full stream, no
 * quorum, no answer); -1: poisoned. */
static int sink_sync(void *impl)
{
	struct capture_jetstream *js = impl;
	if (js->poisoned)
		return -1;
	if (js->n_queued == 0)
		return 0;
	if (js->held) {
		/* publishes of the attempt before still waiting in libnats are
		 * dropped: their frames go again (the server drops a repeat as a
		 * duplicate by its Nats-Msg-Id) */
		natsMsgList left = { 0 };
		if (js_PublishAsyncGetPendingList(&left, js->s.js) == NATS_OK)
			natsMsgList_Destroy(&left);
		js->retries++;
	}
	int rc;
	do
		rc = publish_attempt(js, jetstream_policy_publish_window(js->run_stored, js->n_queued));
	while (rc == 0 && js->n_queued > 0);
	if (rc == 0) {
		if (js->held)
			log_info("%s: stored again; acknowledging the source resumes", js->name);
		js->held = false;
		return 0;
	}
	if (rc < 0)
		return -1;
	if (!js->held) {
		js->held_total++;
		log_warn("%s: %s; %zu frames wait, and nothing past the last stored transaction is acknowledged to the source until they are stored",
			 js->name, js->held_reason, js->n_queued);
		log_hint("a majority of the stream's replicas must run, with room for the messages (a full stream: "
			 "\"trellara stream retention --config %s --apply\" removes what every protected group applied)",
			 js->cfg->path);
	}
	js->held = true;
	return 1;
}

static void sink_close(void *impl)
{
	struct capture_jetstream *js = impl;
	drop_queue(js);
	free(js->queue);
	jetstream_session_close(&js->s); /* pending publishes are dropped, never acknowledged */
	stream_meta_free(&js->binding);
	frame_buffer_free(&js->deflated);
	pthread_mutex_destroy(&js->mu);
	pthread_cond_destroy(&js->cv);
	free(js->name);
	free(js->flow_id);
	free(js);
}

static const struct capture_sink_ops jetstream_sink_ops = {
	.append = sink_append, .pending = sink_pending, .sync = sink_sync, .close = sink_close
};

/* Message seq as a frame: valid, at offset seq - 1.  EXIT_OK or
 * EXIT_DATAERR (logged). */
static int check_frame(const struct capture_jetstream *js, uint64_t seq, const uint8_t *data, size_t len,
		       struct frame_header *h, struct frame_buffer *buf, const uint8_t **payload)
{
	bool compressed;
	const char *reason = jetstream_session_frame(data, len, h, buf, payload, &compressed);
	if (!reason && h->offset != seq - 1)
		reason = "its frame's offset is not its sequence - 1";
	if (!reason)
		return EXIT_OK;
	log_error("%s: message %" PRIu64 " is not a valid trellara frame: %s", js->name, seq, reason);
	log_hint("the stream holds messages capture did not write: give the flow a stream of its own "
		 "(stream.name), created by \"trellara stream init\"");
	return EXIT_DATAERR;
}

/* The stream's last messages, backwards, until a committed transaction:
 * what stream_positions reads from the local stream's newest segments. */
static int read_restart_point(struct capture_jetstream *js, uint64_t first, uint64_t last,
			      struct ack_restart_point *rp)
{
	*rp = (struct ack_restart_point){ 0 };
	jsOptions jo;
	jsOptions_Init(&jo);
	jo.Wait = JETSTREAM_API_WAIT_MS;
	struct frame_buffer inflated = { 0 };
	int code = EXIT_OK;
	for (uint64_t seq = last; seq >= first && seq > 0; seq--) {
		natsMsg *m = NULL;
		jsErrCode jerr = 0;
		natsStatus st = js_GetMsg(&m, js->s.js, js->cfg->jetstream_stream, seq, &jo, &jerr);
		if (st == NATS_NOT_FOUND || jerr == JSNoMessageFoundErr) {
			log_error("%s: message %" PRIu64 " is missing between %" PRIu64 " and %" PRIu64
				  ": the stream has a gap",
				  js->name, seq, first, last);
			log_hint("a message was deleted from the stream; what it held is lost to applyd");
			code = EXIT_DATAERR;
			goto out;
		}
		if (st != NATS_OK) {
			code = jetstream_session_request_failed(&js->s, js->cfg->jetstream_stream,
								"its last messages cannot be read", st, jerr);
			goto out;
		}
		const uint8_t *data = (const uint8_t *)natsMsg_GetData(m);
		size_t len = (size_t)natsMsg_GetDataLength(m);
		struct frame_header h;
		const uint8_t *payload = NULL;
		code = check_frame(js, seq, data, len, &h, &inflated, &payload);
		if (code == EXIT_OK && seq == last) {
			js->binding.system_identifier = jetstream_session_header(m, JETSTREAM_HDR_SYSTEM);
			js->binding.database = jetstream_session_header(m, JETSTREAM_HDR_DATABASE);
			js->binding.slot = jetstream_session_header(m, JETSTREAM_HDR_SLOT);
			js->binding.timeline = jetstream_session_header(m, JETSTREAM_HDR_TIMELINE);
			js->binding.start_lsn = jetstream_session_header(m, JETSTREAM_HDR_START_LSN);
		}
		bool committed = false;
		if (code == EXIT_OK &&
		    capture_core_restart_point_add_frame(rp, h.type, payload, h.payload_length,
							 h.offset, &committed) < 0)
			code = EXIT_DATAERR;
		natsMsg_Destroy(m);
		if (code != EXIT_OK)
			goto out;
		if (committed)
			break;
	}
out:
	frame_buffer_free(&inflated);
	return code;
}

int capture_jetstream_open(const struct flow_config *cfg, struct capture_sink *sink, struct capture_jetstream **jsp,
			   struct ack_restart_point *restart, uint64_t *next_offset)
{
	struct capture_jetstream *js = xcalloc(1, sizeof *js);
	js->cfg = cfg;
	js->flow_id = config_flow_id(cfg);
	/* A run's own repeats are dropped by their id; another run's message
	 * at the same offset never is: it meets the expected last sequence
	 * instead (a message a leader without quorum stored before a crash,
	 * committed after the restart read the stream's end, makes this run's
	 * next publish fail closed: 75, and the next run reads the end again) */
	char *nonce = stream_id_generate();
	if (!nonce) {
		free(js->flow_id);
		free(js);
		*jsp = NULL;
		*sink = (struct capture_sink){ 0 };
		return EXIT_UNAVAILABLE;
	}
	snprintf(js->run_id, sizeof js->run_id, "%.16s", nonce);
	free(nonce);
	pthread_mutex_init(&js->mu, NULL);
	pthread_cond_init(&js->cv, NULL);
	jsStreamInfo *si = NULL;
	int code = jetstream_session_open(cfg, "trellara-capture", true, &js->s);
	js->name = xasprintf("JetStream stream \"%s\" on %s", cfg->jetstream_stream, js->s.servers ? js->s.servers : "");
	if (code != EXIT_OK)
		goto out;
	if ((code = jetstream_session_stream_info(&js->s, cfg->jetstream_stream, &si)) != EXIT_OK)
		goto out;
	if (!si) {
		log_error("%s does not exist", js->name);
		log_hint("create it with \"trellara stream init --config %s\"", cfg->path);
		code = EXIT_CONFIG;
		goto out;
	}
	if ((code = jetstream_session_accept(cfg, si, js->name)) != EXIT_OK)
		goto out;
	/* the window: PubAcks go to this sink's handler */
	jsCtx_Destroy(js->s.js);
	js->s.js = NULL;
	jsOptions jo;
	jsOptions_Init(&jo);
	jo.Wait = JETSTREAM_API_WAIT_MS;
	jo.PublishAsync.MaxPending = JETSTREAM_PUBLISH_WINDOW;
	jo.PublishAsync.StallWait = JETSTREAM_PUBLISH_WAIT_MS;
	jo.PublishAsync.AckHandler = on_ack;
	jo.PublishAsync.AckHandlerClosure = js;
	natsStatus st = natsConnection_JetStream(&js->s.js, js->s.nc, &jo);
	if (st != NATS_OK) {
		log_error("cannot use JetStream on %s: %s", js->s.connected, natsStatus_GetText(st));
		code = EXIT_UNAVAILABLE;
		goto out;
	}
	js->max_payload = natsConnection_GetMaxPayload(js->s.nc);
	uint64_t first = si->State.FirstSeq, last = si->State.LastSeq;
	js->binding.stream_id = jetstream_session_stream_id(cfg, si);
	if ((code = read_restart_point(js, first, last, restart)) != EXIT_OK)
		goto out;
	js->next_offset = last;
	*next_offset = last;
	log_info("%s: %" PRIu64 " messages (sequences %" PRIu64 " to %" PRIu64 "), leader %s", js->name,
		 si->State.Msgs, first, last, si->Cluster && si->Cluster->Leader ? si->Cluster->Leader : "-");
out:
	if (si)
		jsStreamInfo_Destroy(si);
	if (code != EXIT_OK) {
		sink_close(js);
		js = NULL;
		*sink = (struct capture_sink){ 0 };
	} else {
		*sink = (struct capture_sink){ .ops = &jetstream_sink_ops, .impl = js };
	}
	*jsp = js;
	return code;
}

size_t capture_jetstream_frame_target(const struct capture_jetstream *js)
{
	int64_t room = js->max_payload - FRAME_HEADER_SIZE - JETSTREAM_HEADERS_ROOM;
	return room > JETSTREAM_MIN_FRAME_TARGET ? (size_t)room : JETSTREAM_MIN_FRAME_TARGET;
}

const char *capture_jetstream_name(const struct capture_jetstream *js)
{
	return js->name;
}

static char *dup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

void capture_jetstream_binding(const struct capture_jetstream *js, struct stream_meta *meta)
{
	memset(meta, 0, sizeof *meta);
	meta->format_version = STREAM_FORMAT_VERSION;
	meta->system_identifier = dup_or_null(js->binding.system_identifier);
	meta->database = dup_or_null(js->binding.database);
	meta->slot = dup_or_null(js->binding.slot);
	meta->timeline = dup_or_null(js->binding.timeline);
	meta->start_lsn = dup_or_null(js->binding.start_lsn);
	meta->stream_id = dup_or_null(js->binding.stream_id);
}

void capture_jetstream_bind(struct capture_jetstream *js, const struct stream_meta *meta)
{
	struct stream_meta b = { 0 };
	b.system_identifier = dup_or_null(meta->system_identifier);
	b.database = dup_or_null(meta->database);
	b.slot = dup_or_null(meta->slot);
	b.timeline = dup_or_null(meta->timeline);
	b.start_lsn = dup_or_null(meta->start_lsn);
	b.stream_id = dup_or_null(js->binding.stream_id); /* the servers', never capture's */
	stream_meta_free(&js->binding);
	js->binding = b;
}

void capture_jetstream_metrics(const struct capture_jetstream *js, struct metrics *m)
{
	metrics_add_u64(m, "trellara_capture_broker_available", "1 while the JetStream stream stores what capture publishes; 0 while it holds capture back (quorum lost, servers down, stream full) or refused it", METRIC_GAUGE, NULL, NULL, js->held || js->poisoned ? 0 : 1);
	metrics_add_u64(m, "trellara_capture_broker_pending_acks", "frames published or queued without their PubAck", METRIC_GAUGE, NULL, NULL, js->n_queued);
	metrics_add_double(m, "trellara_capture_broker_publish_seconds", "time from the first publish of the last stored batch to its last PubAck", METRIC_GAUGE, NULL, NULL, js->last_publish_seconds);
	metrics_add_u64(m, "trellara_capture_broker_published_frames_total", "frames the stream stored (PubAck with the right sequence)", METRIC_COUNTER, NULL, NULL, js->published);
	metrics_add_u64(m, "trellara_capture_broker_retries_total", "publishes of held-back frames tried again", METRIC_COUNTER, NULL, NULL, js->retries);
	metrics_add_u64(m, "trellara_capture_broker_holds_total", "times the stream held capture back", METRIC_COUNTER, NULL, NULL, js->held_total);
}

const char *capture_jetstream_held(const struct capture_jetstream *js)
{
	return js->held ? js->held_reason : NULL;
}

int capture_jetstream_exit_code(const struct capture_jetstream *js)
{
	return js->poisoned && js->exit_code ? js->exit_code : EXIT_CANTCREAT;
}
