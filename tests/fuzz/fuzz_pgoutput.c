/*
 * fuzz_pgoutput.c - libFuzzer target for the pgoutput decoder, relation
 * cache and session (build and run: tests/fuzz/run.sh [seconds]).
 *
 * Input: one flags byte (bit 0: protocol version 1 instead of 2; bit 1:
 * reset the session after a rejected message, as capture does on a
 * reconnect), then messages, each an Int16 big-endian length and that many
 * bytes.  Every message goes, in a buffer of exactly its size (so ASan sees
 * any over-read), through pgoutput_session_decode() and through
 * pgoutput_decode() both inside and outside a stream block.
 *
 * Oracle beyond "no crash, no leak, no UB": whatever decodes must encode
 * back to exactly the bytes it came from, and every borrowed pointer must
 * lie inside the input.
 */
#include "trellara/pgoutput.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct enc {
	uint8_t *buf;
	size_t len, cap;
	const uint8_t *in; /* the decoded input, for the pointer checks */
	size_t in_len;
};

static void inside(const struct enc *e, const void *p, size_t n)
{
	const uint8_t *b = p;
	if (n && (b < e->in || b + n > e->in + e->in_len))
		__builtin_trap();
}

static void put(struct enc *e, const void *p, size_t n)
{
	if (e->len + n > e->cap) /* longer than the input: the decoder invented bytes */
		__builtin_trap();
	memcpy(e->buf + e->len, p, n);
	e->len += n;
}

static void put8(struct enc *e, unsigned v)
{
	uint8_t b = (uint8_t)v;
	put(e, &b, 1);
}

static void put16(struct enc *e, unsigned v)
{
	put8(e, v >> 8 & 0xff);
	put8(e, v & 0xff);
}

static void put32(struct enc *e, uint32_t v)
{
	put16(e, v >> 16);
	put16(e, v & 0xffff);
}

static void put64(struct enc *e, uint64_t v)
{
	put32(e, (uint32_t)(v >> 32));
	put32(e, (uint32_t)v);
}

static void putstr(struct enc *e, const char *s)
{
	inside(e, s, strlen(s) + 1);
	put(e, s, strlen(s) + 1);
}

static void put_tuple(struct enc *e, const struct pgoutput_tuple *t)
{
	put16(e, (unsigned)t->ncols);
	for (int i = 0; i < t->ncols; i++) {
		const struct pgoutput_column *c = &t->cols[i];
		put8(e, c->kind);
		if (c->kind == PGOUTPUT_COLUMN_TEXT || c->kind == PGOUTPUT_COLUMN_BINARY) {
			put32(e, c->len);
			inside(e, c->value, c->len);
			put(e, c->value, c->len);
		} else if (c->len || c->value) {
			__builtin_trap();
		}
	}
}

static void encode(struct enc *e, const struct pgoutput_message *m)
{
	put8(e, m->type);
	if (m->has_xid && strchr("RYIUDTM", m->type))
		put32(e, m->xid);
	switch (m->type) {
	case PGOUTPUT_BEGIN:
		put64(e, m->begin.final_lsn);
		put64(e, (uint64_t)m->begin.commit_ts);
		put32(e, m->xid);
		break;
	case PGOUTPUT_STREAM_COMMIT:
		put32(e, m->xid);
		/* fall through */
	case PGOUTPUT_COMMIT:
		put8(e, 0);
		put64(e, m->commit.commit_lsn);
		put64(e, m->commit.end_lsn);
		put64(e, (uint64_t)m->commit.commit_ts);
		break;
	case PGOUTPUT_ORIGIN:
		put64(e, m->origin.origin_lsn);
		putstr(e, m->origin.name);
		break;
	case PGOUTPUT_RELATION:
		put32(e, m->relation.relid);
		putstr(e, m->relation.nspname);
		putstr(e, m->relation.relname);
		put8(e, m->relation.replident);
		put16(e, (unsigned)m->relation.natts);
		for (int i = 0; i < m->relation.natts; i++) {
			put8(e, m->relation.atts[i].key);
			putstr(e, m->relation.atts[i].name);
			put32(e, m->relation.atts[i].type_oid);
			put32(e, (uint32_t)m->relation.atts[i].typmod);
		}
		break;
	case PGOUTPUT_TYPE:
		put32(e, m->datatype.type_oid);
		putstr(e, m->datatype.nspname);
		putstr(e, m->datatype.typname);
		break;
	case PGOUTPUT_INSERT:
	case PGOUTPUT_UPDATE:
	case PGOUTPUT_DELETE:
		put32(e, m->change.relid);
		if (m->change.old_kind != PGOUTPUT_OLD_NONE) {
			put8(e, m->change.old_kind);
			put_tuple(e, &m->change.old_tuple);
		}
		if (m->type != PGOUTPUT_DELETE) {
			put8(e, 'N');
			put_tuple(e, &m->change.new_tuple);
		}
		break;
	case PGOUTPUT_TRUNCATE:
		put32(e, (uint32_t)m->truncate.nrelids);
		put8(e, (m->truncate.cascade ? 1u : 0u) | (m->truncate.restart_identity ? 2u : 0u));
		for (int i = 0; i < m->truncate.nrelids; i++)
			put32(e, m->truncate.relids[i]);
		break;
	case PGOUTPUT_MESSAGE:
		put8(e, m->message.transactional);
		put64(e, m->message.lsn);
		putstr(e, m->message.prefix);
		put32(e, m->message.len);
		inside(e, m->message.content, m->message.len);
		put(e, m->message.content, m->message.len);
		break;
	case PGOUTPUT_STREAM_START:
		put32(e, m->xid);
		put8(e, m->stream_start.first_segment);
		break;
	case PGOUTPUT_STREAM_STOP:
		break;
	case PGOUTPUT_STREAM_ABORT:
		put32(e, m->xid);
		put32(e, m->stream_abort.subxid);
		break;
	default:
		__builtin_trap();
	}
}

static void round_trip(const uint8_t *msg, size_t len, const struct pgoutput_message *m)
{
	struct enc e = { malloc(len), 0, len, msg, len };
	if (!e.buf)
		abort();
	encode(&e, m);
	if (e.len != len || memcmp(e.buf, msg, len) != 0)
		__builtin_trap();
	free(e.buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	int proto = data[0] & 1 ? 1 : 2;
	bool reset_on_error = data[0] & 2;
	struct pgoutput_session session;
	struct pgoutput_message msg;
	char err[PGOUTPUT_ERR_LEN];
	if (pgoutput_session_init(&session, proto, err, sizeof err) < 0)
		__builtin_trap();
	pgoutput_message_init(&msg);

	size_t pos = 1;
	while (pos + 2 <= size) {
		size_t len = (size_t)data[pos] << 8 | data[pos + 1];
		pos += 2;
		if (len > size - pos)
			len = size - pos;
		uint8_t *copy = malloc(len ? len : 1);
		if (!copy)
			abort();
		memcpy(copy, data + pos, len);
		pos += len;

		for (int in_block = 0; in_block <= 1; in_block++)
			if (pgoutput_decode(copy, len, proto, in_block, &msg, err, sizeof err) == 0)
				round_trip(copy, len, &msg);
		if (pgoutput_session_decode(&session, copy, len, &msg, err, sizeof err) == 0) {
			round_trip(copy, len, &msg);
			/* a checked row message has its descriptor, with its width */
			if (msg.type == PGOUTPUT_INSERT || msg.type == PGOUTPUT_UPDATE ||
			    msg.type == PGOUTPUT_DELETE) {
				const struct pgoutput_relation *rel = msg.change.relation;
				if (!rel || rel->relid != msg.change.relid ||
				    (msg.type != PGOUTPUT_DELETE && rel->natts != msg.change.new_tuple.ncols))
					__builtin_trap();
			}
		} else {
			if (err[0] == '\0' || strncmp(err, "pgoutput: ", 10) != 0)
				__builtin_trap(); /* every failure says why */
			if (reset_on_error)
				pgoutput_session_reset(&session);
		}
		err[0] = '\0';
		free(copy);
	}
	pgoutput_message_release(&msg);
	pgoutput_session_free(&session);
	return 0;
}
