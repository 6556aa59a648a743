/*
 * pgoutput_session.c - a pgoutput session: the decoder, the relation
 * cache and the order of messages (transactions, stream blocks) together
 * (pgoutput.h).
 */
#include "pgoutput_internal.h"

#include "trellara/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- session ------------------------------------------------------------- */

int pgoutput_session_init(struct pgoutput_session *session, int proto_version, char *err,
			  size_t errlen)
{
	memset(session, 0, sizeof *session);
	if (proto_version < PGOUTPUT_MIN_PROTO_VERSION || proto_version > PGOUTPUT_MAX_PROTO_VERSION) {
		errbuf_setf(err, errlen, "pgoutput: unsupported protocol version %d (this decoder reads %d and %d)",
			  proto_version, PGOUTPUT_MIN_PROTO_VERSION, PGOUTPUT_MAX_PROTO_VERSION);
		return -1;
	}
	session->proto_version = proto_version;
	pgoutput_relcache_init(&session->relcache);
	return 0;
}

void pgoutput_session_free(struct pgoutput_session *session)
{
	pgoutput_relcache_free(&session->relcache);
	free(session->open_streams);
	session->open_streams = NULL;
	session->nopen_streams = session->open_streams_cap = 0;
}

void pgoutput_session_reset(struct pgoutput_session *session)
{
	int proto_version = session->proto_version;
	pgoutput_session_free(session);
	memset(session, 0, sizeof *session);
	session->proto_version = proto_version;
	pgoutput_relcache_init(&session->relcache);
}

static size_t stream_index(const struct pgoutput_session *session, uint32_t xid)
{
	for (size_t i = 0; i < session->nopen_streams; i++)
		if (session->open_streams[i] == xid)
			return i;
	return session->nopen_streams;
}

bool pgoutput_session_stream_open(const struct pgoutput_session *session, uint32_t xid)
{
	return stream_index(session, xid) < session->nopen_streams;
}

static void stream_add(struct pgoutput_session *session, uint32_t xid)
{
	if (session->nopen_streams == session->open_streams_cap) {
		session->open_streams_cap = session->open_streams_cap ? session->open_streams_cap * 2 : 8;
		session->open_streams = xrealloc(session->open_streams,
						 session->open_streams_cap * sizeof *session->open_streams);
	}
	session->open_streams[session->nopen_streams++] = xid;
}

static void stream_remove(struct pgoutput_session *session, uint32_t xid)
{
	size_t i = stream_index(session, xid);
	if (i < session->nopen_streams)
		session->open_streams[i] = session->open_streams[--session->nopen_streams];
}

static const char *state_text(const struct pgoutput_session *session, char *buf, size_t len)
{
	if (session->state == PGOUTPUT_SESSION_IN_TRANSACTION)
		snprintf(buf, len, "inside transaction %u", session->xid);
	else if (session->state == PGOUTPUT_SESSION_IN_STREAM_BLOCK)
		snprintf(buf, len, "inside the stream block of transaction %u", session->xid);
	else
		snprintf(buf, len, "outside any transaction");
	return buf;
}

static int out_of_order(const struct pgoutput_session *session, const struct pgoutput_message *msg,
			char *err, size_t errlen)
{
	char where[64];
	errbuf_setf(err, errlen, "pgoutput: unexpected %s message %s",
		  pgoutput_type_name((uint8_t)msg->type), state_text(session, where, sizeof where));
	return -1;
}

int pgoutput_session_decode(struct pgoutput_session *session, const uint8_t *buf, size_t len,
			    struct pgoutput_message *out, char *err, size_t errlen)
{
	bool in_block = session->state == PGOUTPUT_SESSION_IN_STREAM_BLOCK;
	if (pgoutput_decode(buf, len, session->proto_version, in_block, out, err, errlen) < 0)
		return -1;
	bool idle = session->state == PGOUTPUT_SESSION_IDLE;
	char a[LSN_TEXT_LEN], b[LSN_TEXT_LEN];

	/* Every check comes before any change of state. */
	switch (out->type) {
	case PGOUTPUT_BEGIN:
		if (!idle)
			return out_of_order(session, out, err, errlen);
		if (pgoutput_session_stream_open(session, out->xid)) {
			errbuf_setf(err, errlen, "pgoutput: Begin for transaction %u, which has an open stream",
				  out->xid);
			return -1;
		}
		session->state = PGOUTPUT_SESSION_IN_TRANSACTION;
		session->xid = out->xid;
		session->final_lsn = out->begin.final_lsn;
		session->block_messages = 0;
		return 0;
	case PGOUTPUT_COMMIT:
		if (session->state != PGOUTPUT_SESSION_IN_TRANSACTION)
			return out_of_order(session, out, err, errlen);
		if (out->commit.commit_lsn != session->final_lsn) {
			errbuf_setf(err, errlen,
				  "pgoutput: Commit LSN %s of transaction %u differs from its Begin's final LSN %s",
				  pgoutput_lsn_text(out->commit.commit_lsn, a), session->xid,
				  pgoutput_lsn_text(session->final_lsn, b));
			return -1;
		}
		session->state = PGOUTPUT_SESSION_IDLE;
		return 0;
	case PGOUTPUT_STREAM_START:
		if (!idle)
			return out_of_order(session, out, err, errlen);
		if (out->stream_start.first_segment == pgoutput_session_stream_open(session, out->xid)) {
			errbuf_setf(err, errlen,
				  out->stream_start.first_segment
					  ? "pgoutput: Stream Start marks a first segment for transaction %u, whose stream is already open"
					  : "pgoutput: Stream Start continues transaction %u, whose stream was never started",
				  out->xid);
			return -1;
		}
		if (out->stream_start.first_segment)
			stream_add(session, out->xid);
		session->state = PGOUTPUT_SESSION_IN_STREAM_BLOCK;
		session->xid = out->xid;
		session->block_messages = 0;
		return 0;
	case PGOUTPUT_STREAM_STOP:
		if (!in_block)
			return out_of_order(session, out, err, errlen);
		session->state = PGOUTPUT_SESSION_IDLE;
		return 0;
	case PGOUTPUT_STREAM_COMMIT:
	case PGOUTPUT_STREAM_ABORT:
		if (!idle)
			return out_of_order(session, out, err, errlen);
		if (!pgoutput_session_stream_open(session, out->xid)) {
			errbuf_setf(err, errlen, "pgoutput: %s for transaction %u, which has no open stream",
				  pgoutput_type_name((uint8_t)out->type), out->xid);
			return -1;
		}
		if (out->type == PGOUTPUT_STREAM_COMMIT || out->stream_abort.subxid == out->xid)
			stream_remove(session, out->xid);
		return 0;
	case PGOUTPUT_ORIGIN:
		if (idle)
			return out_of_order(session, out, err, errlen);
		if (session->block_messages != 0) {
			errbuf_setf(err, errlen,
				  "pgoutput: Origin message after %lu other messages of transaction %u: it must directly follow %s",
				  session->block_messages, session->xid, in_block ? "Stream Start" : "Begin");
			return -1;
		}
		session->block_messages++;
		return 0;
	case PGOUTPUT_MESSAGE:
		if (out->message.transactional == idle) {
			char where[64];
			errbuf_setf(err, errlen, "pgoutput: %s logical message \"%s\" %s",
				  idle ? "transactional" : "non-transactional", out->message.prefix,
				  state_text(session, where, sizeof where));
			return -1;
		}
		if (!idle)
			session->block_messages++;
		return 0;
	case PGOUTPUT_TYPE:
		if (idle)
			return out_of_order(session, out, err, errlen);
		session->block_messages++;
		return 0;
	case PGOUTPUT_RELATION:
		if (idle)
			return out_of_order(session, out, err, errlen);
		if (pgoutput_relcache_apply(&session->relcache, out, NULL, &session->relation_changed, err,
					    errlen) < 0)
			return -1;
		session->block_messages++;
		return 0;
	default: /* Insert, Update, Delete, Truncate */
		if (idle)
			return out_of_order(session, out, err, errlen);
		if (pgoutput_relcache_check(&session->relcache, out,
					    out->type == PGOUTPUT_TRUNCATE ? NULL : &out->change.relation,
					    err, errlen) < 0)
			return -1;
		session->block_messages++;
		return 0;
	}
}
