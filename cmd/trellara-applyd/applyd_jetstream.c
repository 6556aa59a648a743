/*
 * applyd_jetstream.c - a JetStream stream as applyd's frame source
 * (frame_source.h, applyd_jetstream.h).  The one file of trellara-applyd
 * on libnats.
 *
 * Reading.  An ordered push consumer (ephemeral, no acknowledgements,
 * flow control and heartbeats, made again by libnats from the last
 * sequence received when its server is lost), made at the sequence after
 * the last frame handed out (frame offset o is message o + 1); a seek
 * makes a new one.  (A pull consumer's fetch in libnats 3.4.1 overruns
 * its message array when a timed-out fetch's messages arrive late:
 * ASan found it.)  Every message must be a valid frame (length, header,
 * CRC) at exactly the next offset: a gap or a foreign message fails
 * closed (STREAM_ECORRUPT, logged), never skipped.  A read that fails
 * makes a new consumer once, then says STREAM_EUNAVAILABLE (applyd backs
 * off and reads again).
 *
 * Position.  The checkpoint holds it; position_set mirrors it into the
 * groups' stream (jetstream_session_group_set) at most every
 * JETSTREAM_GROUP_MIRROR_US, for retention and trellara stream inspect.
 * A mirror that cannot be written now is only late (retention keeps
 * more), so it is a warning, not a failure.
 */
#include "applyd_jetstream.h"

#include "../jetstream/jetstream_session.h"

#include "trellara/clock.h"
#include "trellara/defaults.h"
#include "trellara/log.h"
#include "trellara/xalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* next: how long a read at the stream's end waits for more before it
 * says "nothing now" (the engine then commits what is open) */
#define JETSTREAM_NEXT_WAIT_MS 20
#define JETSTREAM_GROUP_MIRROR_US INT64_C(1000000)

struct js_source {
	struct jetstream_session s;
	const struct flow_config *cfg;
	char *name;               /* owned: for messages */
	natsSubscription *sub;    /* owned: the ordered consumer from next_offset */
	natsMsg *waiting;         /* owned: received by a wait, not handed out yet */
	natsMsg *current;         /* owned: the frame handed out last */
	uint64_t next_offset;     /* the offset the next frame must have */
	int64_t last_check_us;    /* the stream's end last compared with next_offset */
	bool gap_retried;         /* a later frame came: read once more through a new consumer */
	uint64_t redelivered;     /* repeats dropped */
	bool groups_ready;
	uint64_t wanted;          /* the position to mirror */
	bool have_wanted;
	uint64_t mirrored;        /* the position last mirrored */
	int64_t last_mirror_us;
	bool warned_mirror;
	struct frame_buffer inflated; /* owned: the current frame's payload when it was compressed */
};

static void mirror(struct js_source *j);

static void drop_consumer(struct js_source *j)
{
	natsMsg_Destroy(j->waiting);
	j->waiting = NULL;
	if (j->sub) {
		natsSubscription_Unsubscribe(j->sub); /* deletes the ephemeral consumer */
		natsSubscription_Destroy(j->sub);
		j->sub = NULL;
	}
}

/* An ordered consumer: ephemeral, no acknowledgements, flow control and
 * heartbeats; libnats makes it again (from the last sequence received)
 * when the server that held it is lost or a delivery is missed. */
static int subscribe(struct js_source *j)
{
	jsOptions jo;
	jsOptions_Init(&jo);
	jo.Wait = JETSTREAM_API_WAIT_MS;
	jsSubOptions so;
	jsSubOptions_Init(&so);
	so.Stream = j->cfg->jetstream_stream;
	so.Ordered = true;
	so.Config.DeliverPolicy = js_DeliverByStartSequence;
	so.Config.OptStartSeq = j->next_offset + 1;
	jsErrCode jerr = 0;
	natsStatus st = js_SubscribeSync(&j->sub, j->s.js, j->cfg->jetstream_subject, &jo, &so, &jerr);
	if (st == NATS_OK)
		return STREAM_OK;
	j->sub = NULL;
	jetstream_session_request_failed(&j->s, j->cfg->jetstream_stream, "no consumer can read it", st, jerr);
	return STREAM_EUNAVAILABLE;
}

/* The next message, waiting up to timeout_ms: STREAM_OK with *m (NULL:
 * none came), or STREAM_EUNAVAILABLE (logged). */
static int receive(struct js_source *j, int timeout_ms, natsMsg **m)
{
	*m = NULL;
	if (j->waiting) {
		*m = j->waiting;
		j->waiting = NULL;
		return STREAM_OK;
	}
	for (int attempt = 0; attempt < 2; attempt++) {
		if (!j->sub && subscribe(j) != STREAM_OK)
			return STREAM_EUNAVAILABLE;
		natsStatus st = natsSubscription_NextMsg(m, j->sub, timeout_ms > 0 ? timeout_ms : 1);
		if (st == NATS_OK)
			return STREAM_OK;
		*m = NULL;
		if (st == NATS_TIMEOUT)
			return STREAM_OK; /* nothing more now */
		log_warn("%s: reading from offset %" PRIu64 " failed (%s): reading through a new consumer", j->name,
			 j->next_offset, jetstream_session_error_text(st));
		drop_consumer(j);
	}
	log_error("%s: no server answers for the stream from offset %" PRIu64 ": quorum lost, or servers down",
		  j->name, j->next_offset);
	return STREAM_EUNAVAILABLE;
}

/* Message m as the frame at next_offset: STREAM_OK (handed out),
 * STREAM_END (a repeat of a frame already handed out: a consumer that
 * moved to another server may deliver again; dropped), STREAM_ERANGE (a
 * later frame: the caller reads again through a new consumer), or
 * STREAM_ECORRUPT (logged). */
static int take(struct js_source *j, natsMsg *m, struct stream_frame *f)
{
	const uint8_t *data = (const uint8_t *)natsMsg_GetData(m);
	size_t len = (size_t)natsMsg_GetDataLength(m);
	struct frame_header h;
	const uint8_t *payload = NULL;
	bool compressed = false;
	uint32_t stored_length = len >= FRAME_HEADER_SIZE ? (uint32_t)(len - FRAME_HEADER_SIZE) : 0;
	const char *reason = jetstream_session_frame(data, len, &h, &j->inflated, &payload, &compressed);
	if (reason) {
		log_error("%s: the message after offset %" PRIu64 " is not a valid trellara frame: %s", j->name,
			  j->next_offset, reason);
		log_hint("the stream holds messages capture did not write: give the flow a stream of its own (stream.name) and reseed it (\"trellara snapshot --config %s --force\")",
			 j->cfg->path);
		natsMsg_Destroy(m);
		return STREAM_ECORRUPT;
	}
	if (h.offset != j->next_offset) {
		natsMsg_Destroy(m);
		if (h.offset < j->next_offset) {
			j->redelivered++;
			return STREAM_END;
		}
		return STREAM_ERANGE;
	}
	natsMsg_Destroy(j->current);
	j->current = m;
	f->header = h;
	f->payload = payload;
	f->compressed = compressed;
	f->stored_length = stored_length;
	f->segment = j->cfg->jetstream_stream;
	f->position = h.offset + 1; /* the message's sequence */
	j->next_offset++;
	j->gap_retried = false;
	return STREAM_OK;
}

static int js_next(void *impl, struct stream_frame *f)
{
	struct js_source *j = impl;
	for (;;) {
		natsMsg *m = NULL;
		int st = receive(j, JETSTREAM_NEXT_WAIT_MS, &m);
		if (st != STREAM_OK)
			return st;
		if (!m)
			return STREAM_END;
		st = take(j, m, f);
		if (st == STREAM_END)
			continue; /* a repeat */
		if (st != STREAM_ERANGE)
			return st;
		/* a later frame than the next: once through a new consumer,
		 * then it is a gap in the stream */
		if (j->gap_retried) {
			log_error("%s: the frame after offset %" PRIu64 " is missing: the stream has a gap", j->name,
				  j->next_offset);
			log_hint("messages were deleted from the stream: what they held is lost to applyd; reseed the flow (\"trellara snapshot --config %s --force\")",
				 j->cfg->path);
			return STREAM_ECORRUPT;
		}
		j->gap_retried = true;
		drop_consumer(j);
	}
}

/* A consumer lives on one server: one that died (or lost its stream's
 * leader) may answer nothing, not an error.  When reads bring nothing
 * while the stream holds messages past next_offset, read through a new
 * consumer; checked at most every JETSTREAM_STALE_CHECK_US. */
#define JETSTREAM_STALE_CHECK_US (2 * INT64_C(1000000))
static void check_stale(struct js_source *j)
{
	int64_t now = clock_mono_us();
	if (now - j->last_check_us < JETSTREAM_STALE_CHECK_US)
		return;
	j->last_check_us = now;
	jsStreamInfo *si = NULL;
	log_set_quiet(true);
	int code = jetstream_session_stream_info(&j->s, j->cfg->jetstream_stream, &si);
	log_set_quiet(false);
	if (code != EXIT_OK || !si)
		return;
	uint64_t last = si->State.LastSeq;
	jsStreamInfo_Destroy(si);
	if (last > j->next_offset) {
		log_warn("%s: its consumer brings nothing while the stream holds offsets up to %" PRIu64 " (next %" PRIu64 "): reading through a new consumer",
			 j->name, last - 1, j->next_offset);
		drop_consumer(j);
	}
}

static int js_wait(void *impl, int timeout_ms)
{
	struct js_source *j = impl;
	if (j->waiting)
		return STREAM_OK;
	mirror(j);
	natsMsg *m = NULL;
	int st = receive(j, timeout_ms > 0 ? timeout_ms : 1, &m);
	j->waiting = m;
	if (st == STREAM_OK && !m)
		check_stale(j);
	if (st != STREAM_OK) {
		/* applyd's next read says so again; do not spin meanwhile */
		struct timespec ts = { 0, (long)(timeout_ms > 0 ? timeout_ms : 1) * 1000000L };
		nanosleep(&ts, NULL);
	}
	return STREAM_OK;
}

/* The stream's info: STREAM_OK with *si, STREAM_EUNAVAILABLE, or
 * STREAM_ERANGE when it does not exist (both logged). */
static int stream_info(struct js_source *j, jsStreamInfo **si)
{
	if (jetstream_session_stream_info(&j->s, j->cfg->jetstream_stream, si) != EXIT_OK)
		return STREAM_EUNAVAILABLE;
	if (!*si) {
		log_error("%s does not exist", j->name);
		return STREAM_ERANGE;
	}
	return STREAM_OK;
}

static int js_seek(void *impl, uint64_t offset)
{
	struct js_source *j = impl;
	jsStreamInfo *si = NULL;
	int st = stream_info(j, &si);
	if (st != STREAM_OK)
		return st;
	uint64_t first = si->State.FirstSeq, last = si->State.LastSeq;
	jsStreamInfo_Destroy(si);
	if (offset + 1 < first || offset > last) {
		if (last >= first && last > 0)
			log_error("%s holds offsets %" PRIu64 " to %" PRIu64 ", not %" PRIu64, j->name, first - 1, last - 1,
				  offset);
		else
			log_error("%s holds no frame (its next is offset %" PRIu64 "), not %" PRIu64, j->name, last, offset);
		return STREAM_ERANGE;
	}
	if (offset != j->next_offset || !j->sub) {
		drop_consumer(j);
		j->next_offset = offset;
	}
	return STREAM_OK;
}

static int js_position_get(void *impl, uint64_t *position, bool *exists)
{
	struct js_source *j = impl;
	int code = jetstream_session_group_get(&j->s, j->cfg, j->cfg->consumer_group, position, exists);
	if (code == EXIT_OK)
		return STREAM_OK;
	return code == EXIT_UNAVAILABLE ? STREAM_EUNAVAILABLE : STREAM_ECORRUPT;
}

/* Mirror j->wanted when it moved and the last mirror is old enough. */
static void mirror(struct js_source *j)
{
	int64_t now = clock_mono_us();
	uint64_t position = j->wanted;
	if (!j->have_wanted || position == j->mirrored || now - j->last_mirror_us < JETSTREAM_GROUP_MIRROR_US)
		return;
	j->last_mirror_us = now;
	if (!j->groups_ready)
		j->groups_ready = jetstream_session_groups_ensure(&j->s, j->cfg) == EXIT_OK;
	if (j->groups_ready && jetstream_session_group_set(&j->s, j->cfg, j->cfg->consumer_group, position) == EXIT_OK) {
		j->mirrored = position;
		j->warned_mirror = false;
	} else if (!j->warned_mirror) {
		log_warn("%s: group \"%s\"'s position %" PRIu64 " cannot be recorded in stream \"%s-groups\" now; retention keeps what is behind it",
			 j->name, j->cfg->consumer_group, position, j->cfg->jetstream_stream);
		j->warned_mirror = true;
	}
}

/* Rate-limited: what it cannot mirror now, an idle wait mirrors later. */
static int js_position_set(void *impl, uint64_t position)
{
	struct js_source *j = impl;
	j->wanted = position;
	j->have_wanted = true;
	mirror(j);
	return STREAM_OK;
}

static int js_meta(void *impl, struct stream_meta *meta)
{
	struct js_source *j = impl;
	memset(meta, 0, sizeof *meta);
	jsStreamInfo *si = NULL;
	int st = stream_info(j, &si);
	if (st != STREAM_OK)
		return st;
	meta->format_version = STREAM_FORMAT_VERSION;
	/* a stream deleted and created again has another creation time */
	meta->stream_id = jetstream_session_stream_id(j->cfg, si);
	uint64_t msgs = si->State.Msgs;
	jsStreamInfo_Destroy(si);
	if (msgs == 0)
		return STREAM_OK;
	jsOptions jo;
	jsOptions_Init(&jo);
	jo.Wait = JETSTREAM_API_WAIT_MS;
	jsErrCode jerr = 0;
	natsMsg *m = NULL;
	natsStatus ns = js_GetLastMsg(&m, j->s.js, j->cfg->jetstream_stream, j->cfg->jetstream_subject, &jo, &jerr);
	if (ns != NATS_OK) {
		stream_meta_free(meta);
		jetstream_session_request_failed(&j->s, j->cfg->jetstream_stream, "its last message cannot be read", ns,
						 jerr);
		return STREAM_EUNAVAILABLE;
	}
	meta->system_identifier = jetstream_session_header(m, JETSTREAM_HDR_SYSTEM);
	meta->database = jetstream_session_header(m, JETSTREAM_HDR_DATABASE);
	meta->slot = jetstream_session_header(m, JETSTREAM_HDR_SLOT);
	meta->timeline = jetstream_session_header(m, JETSTREAM_HDR_TIMELINE);
	meta->start_lsn = jetstream_session_header(m, JETSTREAM_HDR_START_LSN);
	natsMsg_Destroy(m);
	return STREAM_OK;
}

static void js_close(void *impl)
{
	struct js_source *j = impl;
	drop_consumer(j);
	natsMsg_Destroy(j->current);
	jetstream_session_close(&j->s);
	free(j->name);
	frame_buffer_free(&j->inflated);
	free(j);
}

static const struct frame_source_ops js_ops = {
	.next = js_next,
	.seek = js_seek,
	.wait = js_wait,
	.position_get = js_position_get,
	.position_set = js_position_set,
	.meta = js_meta,
	.close = js_close,
};

int applyd_jetstream_open(const struct flow_config *cfg, struct frame_source *src, bool quiet)
{
	*src = (struct frame_source){ 0 };
	struct js_source *j = xcalloc(1, sizeof *j);
	j->cfg = cfg;
	log_set_quiet(quiet); /* applyd retries every second: it says so once */
	int code = jetstream_session_open(cfg, "trellara-applyd", true, &j->s);
	j->name = xasprintf("JetStream stream \"%s\" on %s", cfg->jetstream_stream, j->s.servers ? j->s.servers : "");
	jsStreamInfo *si = NULL;
	if (code == EXIT_OK)
		code = jetstream_session_stream_info(&j->s, cfg->jetstream_stream, &si);
	log_set_quiet(false);
	int st = STREAM_OK;
	if (code != EXIT_OK) {
		st = STREAM_EUNAVAILABLE;
	} else if (!si) {
		st = STREAM_END; /* not created yet: wait for it */
	} else if (jetstream_session_accept(cfg, si, j->name) != EXIT_OK) {
		st = STREAM_EINVAL;
	}
	if (si)
		jsStreamInfo_Destroy(si);
	if (st != STREAM_OK) {
		js_close(j);
		return st;
	}
	*src = (struct frame_source){ .ops = &js_ops, .impl = j };
	return STREAM_OK;
}
