/*
 * pgoutput.c - pgoutput message decoder: message storage, the parsers of
 * each message and pgoutput_decode (contract in include/trellara/pgoutput.h;
 * the rest of the module is listed in pgoutput_internal.h).
 *
 * Layouts are PostgreSQL's src/backend/replication/logical/proto.c; the
 * fixtures in tests/fixtures/pgoutput/ are real bytes from PostgreSQL 15.
 * Every read goes through struct reader, which checks the remaining length
 * first, so no path can read past the end of the input.
 */
#include "trellara/pgoutput.h"

#include "pgoutput_internal.h"

#include "trellara/strbuf.h"
#include "trellara/xalloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- LSN text ----------------------------------------------------------- */

const char *pgoutput_lsn_text(uint64_t lsn, char *buf)
{
	snprintf(buf, LSN_TEXT_LEN, "%X/%X", (unsigned)(lsn >> 32), (unsigned)lsn);
	return buf;
}

/* ---- message storage ---------------------------------------------------- */

void pgoutput_message_init(struct pgoutput_message *msg)
{
	memset(msg, 0, sizeof *msg);
}

void pgoutput_message_release(struct pgoutput_message *msg)
{
	free(msg->old_store);
	free(msg->new_store);
	free(msg->att_store);
	free(msg->relid_store);
	pgoutput_message_init(msg);
}

/* Grows *store to hold n elements of size each; n was already checked
 * against the input's remaining bytes, so this is bounded by the input. */
void *pgoutput_reserve(void *store, size_t *cap, size_t n, size_t size)
{
	if (n <= *cap)
		return store;
	size_t want = *cap ? *cap : 16;
	while (want < n)
		want *= 2;
	*cap = want;
	free(store);
	return xmalloc(want * size);
}

/* The variant part of out, cleared before each decode (storage kept). */
static void clear_message(struct pgoutput_message *out)
{
	struct pgoutput_message keep = *out;
	memset(out, 0, sizeof *out);
	out->old_store = keep.old_store;
	out->old_cap = keep.old_cap;
	out->new_store = keep.new_store;
	out->new_cap = keep.new_cap;
	out->att_store = keep.att_store;
	out->att_cap = keep.att_cap;
	out->relid_store = keep.relid_store;
	out->relid_cap = keep.relid_cap;
}

const char *pgoutput_type_name(uint8_t type)
{
	switch (type) {
	case 'B': return "Begin";
	case 'C': return "Commit";
	case 'O': return "Origin";
	case 'R': return "Relation";
	case 'Y': return "Type";
	case 'I': return "Insert";
	case 'U': return "Update";
	case 'D': return "Delete";
	case 'T': return "Truncate";
	case 'M': return "Message";
	case 'S': return "Stream Start";
	case 'E': return "Stream Stop";
	case 'c': return "Stream Commit";
	case 'A': return "Stream Abort";
	case 'b': return "Begin Prepare";
	case 'P': return "Prepare";
	case 'K': return "Commit Prepared";
	case 'r': return "Rollback Prepared";
	case 'p': return "Stream Prepare";
	default: return NULL;
	}
}

/* ---- message bodies ------------------------------------------------------ */

static int decode_begin(struct reader *r, struct pgoutput_message *out)
{
	size_t at = r->pos;
	if (read_u64(r, "final LSN", &out->begin.final_lsn) < 0 ||
	    read_i64(r, "commit timestamp", &out->begin.commit_ts) < 0 ||
	    read_xid(r, "transaction id", &out->xid) < 0)
		return -1;
	if (out->begin.final_lsn == 0) {
		errbuf_setf(r->err, r->errlen, "pgoutput: final LSN not set in Begin message at byte %zu", at);
		return -1;
	}
	out->has_xid = true;
	return 0;
}

/* Commit and Stream Commit (after its xid): Int8 flags (0), commit LSN,
 * end LSN, timestamp. */
static int decode_commit_body(struct reader *r, struct pgoutput_message *out)
{
	size_t at = r->pos;
	uint8_t flags;
	if (read_u8(r, "flags", &flags) < 0)
		return -1;
	if (flags != 0) {
		errbuf_setf(r->err, r->errlen, "pgoutput: unknown flags 0x%02x in %s message at byte %zu",
			  flags, r->what, at);
		return -1;
	}
	at = r->pos;
	if (read_u64(r, "commit LSN", &out->commit.commit_lsn) < 0 ||
	    read_u64(r, "end LSN", &out->commit.end_lsn) < 0 ||
	    read_i64(r, "commit timestamp", &out->commit.commit_ts) < 0)
		return -1;
	if (out->commit.commit_lsn == 0 || out->commit.end_lsn <= out->commit.commit_lsn) {
		char a[LSN_TEXT_LEN], b[LSN_TEXT_LEN];
		errbuf_setf(r->err, r->errlen,
			  "pgoutput: bad LSNs in %s message at byte %zu: commit %s, end %s (end must follow commit)",
			  r->what, at, pgoutput_lsn_text(out->commit.commit_lsn, a),
			  pgoutput_lsn_text(out->commit.end_lsn, b));
		return -1;
	}
	return 0;
}

static int decode_origin(struct reader *r, struct pgoutput_message *out)
{
	return read_u64(r, "origin LSN", &out->origin.origin_lsn) < 0 ||
			       read_string(r, "origin name", false, &out->origin.name) < 0
		       ? -1
		       : 0;
}

static int decode_relation(struct reader *r, struct pgoutput_message *out)
{
	if (read_relid(r, &out->relation.relid) < 0 ||
	    read_string(r, "namespace", true, &out->relation.nspname) < 0 ||
	    read_string(r, "relation name", false, &out->relation.relname) < 0)
		return -1;
	size_t at = r->pos;
	uint8_t replident;
	if (read_u8(r, "replica identity", &replident) < 0)
		return -1;
	if (replident != 'd' && replident != 'n' && replident != 'f' && replident != 'i') {
		errbuf_setf(r->err, r->errlen, "pgoutput: unknown replica identity 0x%02x in Relation message at byte %zu",
			  replident, at);
		return -1;
	}
	out->relation.replident = (enum pgoutput_replident)replident;
	at = r->pos;
	int16_t natts;
	if (read_i16(r, "column count", &natts) < 0)
		return -1;
	if (natts < 0 || natts > PGOUTPUT_MAX_COLUMNS) {
		errbuf_setf(r->err, r->errlen, "pgoutput: bad column count %d in Relation message at byte %zu (0..%d)",
			  natts, at, PGOUTPUT_MAX_COLUMNS);
		return -1;
	}
	/* flags, a name of at least its NUL, type oid, typmod */
	enum { MIN_ATTRIBUTE_BYTES = 1 + 1 + 4 + 4 };
	if ((size_t)natts > remaining(r) / MIN_ATTRIBUTE_BYTES) {
		errbuf_setf(r->err, r->errlen,
			  "pgoutput: truncated Relation message: %d columns declared at byte %zu but only %zu bytes remain",
			  natts, at, remaining(r));
		return -1;
	}
	out->att_store = pgoutput_reserve(out->att_store, &out->att_cap, (size_t)natts, sizeof *out->att_store);
	for (int i = 0; i < natts; i++) {
		struct pgoutput_attribute *att = &out->att_store[i];
		size_t flags_at = r->pos;
		uint8_t flags;
		uint32_t typmod;
		if (read_u8(r, "column flags", &flags) < 0)
			return -1;
		if (flags & ~1u) {
			errbuf_setf(r->err, r->errlen,
				  "pgoutput: unknown flags 0x%02x for column %d in Relation message at byte %zu",
				  flags, i + 1, flags_at);
			return -1;
		}
		if (read_string(r, "column name", false, &att->name) < 0 ||
		    read_u32(r, "column type oid", &att->type_oid) < 0 ||
		    read_u32(r, "column type modifier", &typmod) < 0)
			return -1;
		att->key = flags & 1u;
		att->typmod = (int32_t)typmod;
	}
	out->relation.natts = natts;
	out->relation.atts = out->att_store;
	return 0;
}

static int decode_type(struct reader *r, struct pgoutput_message *out)
{
	size_t at = r->pos;
	if (read_u32(r, "type oid", &out->datatype.type_oid) < 0)
		return -1;
	if (out->datatype.type_oid == 0) {
		errbuf_setf(r->err, r->errlen, "pgoutput: invalid type oid 0 in Type message at byte %zu", at);
		return -1;
	}
	return read_string(r, "namespace", true, &out->datatype.nspname) < 0 ||
			       read_string(r, "type name", false, &out->datatype.typname) < 0
		       ? -1
		       : 0;
}

static int decode_truncate(struct reader *r, struct pgoutput_message *out)
{
	size_t at = r->pos;
	uint32_t nrelids;
	if (read_u32(r, "relation count", &nrelids) < 0)
		return -1;
	if (nrelids == 0 || nrelids > INT32_MAX) {
		errbuf_setf(r->err, r->errlen, "pgoutput: bad relation count %d in Truncate message at byte %zu",
			  (int32_t)nrelids, at);
		return -1;
	}
	at = r->pos;
	uint8_t flags;
	if (read_u8(r, "flags", &flags) < 0)
		return -1;
	if (flags & ~3u) {
		errbuf_setf(r->err, r->errlen, "pgoutput: unknown flags 0x%02x in Truncate message at byte %zu",
			  flags, at);
		return -1;
	}
	if (nrelids > remaining(r) / 4) {
		errbuf_setf(r->err, r->errlen,
			  "pgoutput: truncated Truncate message: %u relations declared but only %zu bytes remain at byte %zu",
			  nrelids, remaining(r), r->pos);
		return -1;
	}
	out->relid_store = pgoutput_reserve(out->relid_store, &out->relid_cap, nrelids, sizeof *out->relid_store);
	for (uint32_t i = 0; i < nrelids; i++)
		if (read_relid(r, &out->relid_store[i]) < 0)
			return -1;
	out->truncate.cascade = flags & 1u;
	out->truncate.restart_identity = flags & 2u;
	out->truncate.nrelids = (int)nrelids;
	out->truncate.relids = out->relid_store;
	return 0;
}

static int decode_logical_message(struct reader *r, struct pgoutput_message *out)
{
	size_t at = r->pos;
	uint8_t flags;
	if (read_u8(r, "flags", &flags) < 0)
		return -1;
	if (flags & ~1u) {
		errbuf_setf(r->err, r->errlen, "pgoutput: unknown flags 0x%02x in Message message at byte %zu",
			  flags, at);
		return -1;
	}
	out->message.transactional = flags & 1u;
	if (read_u64(r, "message LSN", &out->message.lsn) < 0 ||
	    read_string(r, "prefix", true, &out->message.prefix) < 0)
		return -1;
	at = r->pos;
	uint32_t len;
	if (read_u32(r, "content length", &len) < 0)
		return -1;
	if (len > INT32_MAX) {
		errbuf_setf(r->err, r->errlen, "pgoutput: negative content length %d in Message message at byte %zu",
			  (int32_t)len, at);
		return -1;
	}
	if (need(r, len, "content") < 0)
		return -1;
	out->message.len = len;
	out->message.content = r->buf + r->pos;
	r->pos += len;
	return 0;
}

static int decode_stream_start(struct reader *r, struct pgoutput_message *out)
{
	if (read_xid(r, "transaction id", &out->xid) < 0)
		return -1;
	out->has_xid = true;
	size_t at = r->pos;
	uint8_t first;
	if (read_u8(r, "first segment flag", &first) < 0)
		return -1;
	if (first > 1) {
		errbuf_setf(r->err, r->errlen,
			  "pgoutput: bad first segment flag 0x%02x in Stream Start message at byte %zu",
			  first, at);
		return -1;
	}
	out->stream_start.first_segment = first;
	return 0;
}

static int decode_stream_commit(struct reader *r, struct pgoutput_message *out)
{
	if (read_xid(r, "transaction id", &out->xid) < 0)
		return -1;
	out->has_xid = true;
	return decode_commit_body(r, out);
}

/* PostgreSQL 14-15 (and 16+ unless streaming = parallel): xid, subxid. */
static int decode_stream_abort(struct reader *r, struct pgoutput_message *out)
{
	if (read_xid(r, "transaction id", &out->xid) < 0 ||
	    read_xid(r, "subtransaction id", &out->stream_abort.subxid) < 0)
		return -1;
	out->has_xid = true;
	return 0;
}

int pgoutput_decode(const uint8_t *buf, size_t len, int proto_version, bool in_stream_block,
		    struct pgoutput_message *out, char *err, size_t errlen)
{
	clear_message(out);
	if (proto_version < PGOUTPUT_MIN_PROTO_VERSION || proto_version > PGOUTPUT_MAX_PROTO_VERSION) {
		errbuf_setf(err, errlen, "pgoutput: unsupported protocol version %d (this decoder reads %d and %d)",
			  proto_version, PGOUTPUT_MIN_PROTO_VERSION, PGOUTPUT_MAX_PROTO_VERSION);
		return -1;
	}
	if (in_stream_block && proto_version < 2) {
		errbuf_setf(err, errlen, "pgoutput: stream blocks need protocol version 2, not %d",
			  proto_version);
		return -1;
	}
	if (len == 0 || !buf) {
		errbuf_setf(err, errlen, "pgoutput: empty message");
		return -1;
	}
	uint8_t type = buf[0];
	const char *name = pgoutput_type_name(type);
	if (!name) {
		if (type >= 0x20 && type < 0x7f)
			errbuf_setf(err, errlen, "pgoutput: unknown message type '%c' (0x%02x)", type, type);
		else
			errbuf_setf(err, errlen, "pgoutput: unknown message type 0x%02x", type);
		return -1;
	}
	if (!strchr("BCORYIUDTMSEcA", type)) {
		errbuf_setf(err, errlen,
			  "pgoutput: unsupported %s message ('%c'): two-phase messages need protocol version 3, this decoder reads %d and %d",
			  name, type, PGOUTPUT_MIN_PROTO_VERSION, PGOUTPUT_MAX_PROTO_VERSION);
		return -1;
	}
	if (strchr("SEcA", type) && proto_version < 2) {
		errbuf_setf(err, errlen, "pgoutput: unexpected %s message ('%c') in protocol version %d",
			  name, type, proto_version);
		return -1;
	}

	struct reader r = { buf, len, 1, name, err, errlen };
	out->type = (enum pgoutput_msg_type)type;
	/* Changes inside a stream block name their (sub)transaction first. */
	if (in_stream_block && strchr("RYIUDTM", type)) {
		if (read_xid(&r, "transaction id", &out->xid) < 0)
			return -1;
		out->has_xid = true;
	}
	int rc;
	switch (type) {
	case 'B': rc = decode_begin(&r, out); break;
	case 'C': rc = decode_commit_body(&r, out); break;
	case 'O': rc = decode_origin(&r, out); break;
	case 'R': rc = decode_relation(&r, out); break;
	case 'Y': rc = decode_type(&r, out); break;
	case 'I': rc = pgoutput_decode_insert(&r, out); break;
	case 'U': rc = pgoutput_decode_update(&r, out); break;
	case 'D': rc = pgoutput_decode_delete(&r, out); break;
	case 'T': rc = decode_truncate(&r, out); break;
	case 'M': rc = decode_logical_message(&r, out); break;
	case 'S': rc = decode_stream_start(&r, out); break;
	case 'E': rc = 0; break;
	case 'c': rc = decode_stream_commit(&r, out); break;
	default: rc = decode_stream_abort(&r, out); break; /* 'A' */
	}
	if (rc < 0)
		return -1;
	if (r.pos != len) {
		errbuf_setf(err, errlen, "pgoutput: %zu trailing bytes after %s message at byte %zu",
			  len - r.pos, name, r.pos);
		return -1;
	}
	return 0;
}

