/*
 * pgoutput.c - pgoutput message decoder, relation cache and session
 * (contract in include/trellara/pgoutput.h).
 *
 * Layouts are PostgreSQL's src/backend/replication/logical/proto.c; the
 * fixtures in tests/fixtures/pgoutput/ are real bytes from PostgreSQL 15.
 * Every read goes through struct reader, which checks the remaining length
 * first, so no path can read past the end of the input.
 */
#include "trellara/pgoutput.h"

#include "trellara/strbuf.h"
#include "trellara/xalloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors and the bounded reader ------------------------------------ */

/* "X/X" locally: the decoder has no other dependency than xalloc. */
#define LSN_TEXT_LEN 18
static const char *lsn_text(uint64_t lsn, char *buf)
{
	snprintf(buf, LSN_TEXT_LEN, "%X/%X", (unsigned)(lsn >> 32), (unsigned)lsn);
	return buf;
}

struct reader {
	const uint8_t *buf;
	size_t len;
	size_t pos;
	const char *what; /* message type name */
	char *err;
	size_t errlen;
};

static size_t remaining(const struct reader *r)
{
	return r->len - r->pos;
}

static int need(struct reader *r, size_t n, const char *field)
{
	if (remaining(r) >= n)
		return 0;
	errbuf_setf(r->err, r->errlen,
		  "pgoutput: truncated %s message: need %zu bytes for %s at byte %zu, have %zu",
		  r->what, n, field, r->pos, remaining(r));
	return -1;
}

static int read_u8(struct reader *r, const char *field, uint8_t *v)
{
	if (need(r, 1, field) < 0)
		return -1;
	*v = r->buf[r->pos++];
	return 0;
}

static int read_i16(struct reader *r, const char *field, int16_t *v)
{
	if (need(r, 2, field) < 0)
		return -1;
	const uint8_t *p = r->buf + r->pos;
	*v = (int16_t)(uint16_t)((unsigned)p[0] << 8 | p[1]);
	r->pos += 2;
	return 0;
}

static int read_u32(struct reader *r, const char *field, uint32_t *v)
{
	if (need(r, 4, field) < 0)
		return -1;
	const uint8_t *p = r->buf + r->pos;
	*v = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
	r->pos += 4;
	return 0;
}

static int read_u64(struct reader *r, const char *field, uint64_t *v)
{
	if (need(r, 8, field) < 0)
		return -1;
	uint64_t x = 0;
	for (int i = 0; i < 8; i++)
		x = x << 8 | r->buf[r->pos + (size_t)i];
	*v = x;
	r->pos += 8;
	return 0;
}

static int read_i64(struct reader *r, const char *field, int64_t *v)
{
	uint64_t u;
	if (read_u64(r, field, &u) < 0)
		return -1;
	*v = (int64_t)u; /* two's complement, as PostgreSQL sends it */
	return 0;
}

/* A NUL-terminated string inside the message; borrowed. */
static int read_string(struct reader *r, const char *field, bool allow_empty, const char **s)
{
	size_t at = r->pos;
	const uint8_t *nul = remaining(r) ? memchr(r->buf + at, '\0', remaining(r)) : NULL;
	if (!nul) {
		errbuf_setf(r->err, r->errlen,
			  "pgoutput: truncated %s message: %s at byte %zu has no NUL terminator within the %zu bytes left",
			  r->what, field, at, remaining(r));
		return -1;
	}
	if (!allow_empty && nul == r->buf + at) {
		errbuf_setf(r->err, r->errlen, "pgoutput: empty %s in %s message at byte %zu", field,
			  r->what, at);
		return -1;
	}
	*s = (const char *)(r->buf + at);
	r->pos = (size_t)(nul - r->buf) + 1;
	return 0;
}

/* The Int32 xid that prefixes changes inside a stream block. */
static int read_xid(struct reader *r, const char *field, uint32_t *xid)
{
	size_t at = r->pos;
	if (read_u32(r, field, xid) < 0)
		return -1;
	if (*xid == 0) {
		errbuf_setf(r->err, r->errlen, "pgoutput: invalid %s 0 in %s message at byte %zu",
			  field, r->what, at);
		return -1;
	}
	return 0;
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
static void *reserve(void *store, size_t *cap, size_t n, size_t size)
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

/* TupleData: Int16 ncols, then per column a kind byte and, for 't' and
 * 'b', Int32 len + bytes.  role names the tuple in errors ("Insert new
 * tuple"); only an Update's new tuple may hold unchanged-TOAST columns
 * (PostgreSQL flattens old tuples and reassembles inserted values). */
static int read_tuple(struct reader *r, const char *role, bool allow_unchanged,
		      struct pgoutput_column **store, size_t *cap, struct pgoutput_tuple *tuple)
{
	size_t at = r->pos;
	int16_t ncols;
	if (read_i16(r, "column count", &ncols) < 0)
		return -1;
	if (ncols < 0 || ncols > PGOUTPUT_MAX_COLUMNS) {
		errbuf_setf(r->err, r->errlen,
			  "pgoutput: bad column count %d in %s at byte %zu (0..%d)", ncols, role, at,
			  PGOUTPUT_MAX_COLUMNS);
		return -1;
	}
	/* Each column takes at least its kind byte. */
	if ((size_t)ncols > remaining(r)) {
		errbuf_setf(r->err, r->errlen,
			  "pgoutput: truncated %s message: %s declares %d columns at byte %zu but only %zu bytes remain",
			  r->what, role, ncols, at, remaining(r));
		return -1;
	}
	*store = reserve(*store, cap, (size_t)ncols, sizeof **store);
	struct pgoutput_column *cols = *store;
	for (int i = 0; i < ncols; i++) {
		size_t kind_at = r->pos;
		uint8_t kind;
		if (read_u8(r, "column kind", &kind) < 0)
			return -1;
		cols[i].len = 0;
		cols[i].value = NULL;
		switch (kind) {
		case PGOUTPUT_COLUMN_NULL:
			break;
		case PGOUTPUT_COLUMN_UNCHANGED_TOAST:
			if (!allow_unchanged) {
				errbuf_setf(r->err, r->errlen,
					  "pgoutput: unchanged-TOAST column %d in %s at byte %zu: only an Update's new tuple can carry one",
					  i + 1, role, kind_at);
				return -1;
			}
			break;
		case PGOUTPUT_COLUMN_TEXT:
		case PGOUTPUT_COLUMN_BINARY: {
			size_t len_at = r->pos;
			uint32_t len;
			if (read_u32(r, "column value length", &len) < 0)
				return -1;
			if (len > INT32_MAX) {
				errbuf_setf(r->err, r->errlen,
					  "pgoutput: negative value length %d for column %d in %s at byte %zu",
					  (int32_t)len, i + 1, role, len_at);
				return -1;
			}
			if (need(r, len, "column value") < 0)
				return -1;
			cols[i].len = len;
			cols[i].value = r->buf + r->pos;
			r->pos += len;
			break;
		}
		default:
			errbuf_setf(r->err, r->errlen,
				  "pgoutput: unknown column kind 0x%02x for column %d in %s at byte %zu",
				  kind, i + 1, role, kind_at);
			return -1;
		}
		cols[i].kind = (enum pgoutput_column_kind)kind;
	}
	tuple->ncols = ncols;
	tuple->cols = cols;
	return 0;
}

static int read_relid(struct reader *r, uint32_t *relid)
{
	size_t at = r->pos;
	if (read_u32(r, "relation id", relid) < 0)
		return -1;
	if (*relid == 0) {
		errbuf_setf(r->err, r->errlen, "pgoutput: invalid relation id 0 in %s message at byte %zu",
			  r->what, at);
		return -1;
	}
	return 0;
}

static int read_tuple_tag(struct reader *r, uint8_t *tag)
{
	return read_u8(r, "tuple tag", tag);
}

static int bad_tag(struct reader *r, uint8_t tag, size_t at, const char *expected)
{
	errbuf_setf(r->err, r->errlen, "pgoutput: unexpected tuple tag 0x%02x in %s message at byte %zu (expected %s)",
		  tag, r->what, at, expected);
	return -1;
}

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
			  r->what, at, lsn_text(out->commit.commit_lsn, a),
			  lsn_text(out->commit.end_lsn, b));
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
	out->att_store = reserve(out->att_store, &out->att_cap, (size_t)natts, sizeof *out->att_store);
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

static int decode_insert(struct reader *r, struct pgoutput_message *out)
{
	if (read_relid(r, &out->change.relid) < 0)
		return -1;
	size_t at = r->pos;
	uint8_t tag;
	if (read_tuple_tag(r, &tag) < 0)
		return -1;
	if (tag != 'N')
		return bad_tag(r, tag, at, "'N'");
	return read_tuple(r, "Insert new tuple", false, &out->new_store, &out->new_cap,
			  &out->change.new_tuple);
}

static int decode_update(struct reader *r, struct pgoutput_message *out)
{
	if (read_relid(r, &out->change.relid) < 0)
		return -1;
	size_t at = r->pos;
	uint8_t tag;
	if (read_tuple_tag(r, &tag) < 0)
		return -1;
	if (tag == 'K' || tag == 'O') {
		out->change.old_kind = (enum pgoutput_old_kind)tag;
		if (read_tuple(r, tag == 'K' ? "Update old key" : "Update old tuple", false,
			       &out->old_store, &out->old_cap, &out->change.old_tuple) < 0)
			return -1;
		at = r->pos;
		if (read_tuple_tag(r, &tag) < 0)
			return -1;
		if (tag != 'N')
			return bad_tag(r, tag, at, "'N' after the old tuple");
	} else if (tag != 'N') {
		return bad_tag(r, tag, at, "'K', 'O' or 'N'");
	}
	return read_tuple(r, "Update new tuple", true, &out->new_store, &out->new_cap,
			  &out->change.new_tuple);
}

static int decode_delete(struct reader *r, struct pgoutput_message *out)
{
	if (read_relid(r, &out->change.relid) < 0)
		return -1;
	size_t at = r->pos;
	uint8_t tag;
	if (read_tuple_tag(r, &tag) < 0)
		return -1;
	if (tag != 'K' && tag != 'O')
		return bad_tag(r, tag, at, "'K' or 'O'");
	out->change.old_kind = (enum pgoutput_old_kind)tag;
	return read_tuple(r, tag == 'K' ? "Delete old key" : "Delete old tuple", false,
			  &out->old_store, &out->old_cap, &out->change.old_tuple);
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
	out->relid_store = reserve(out->relid_store, &out->relid_cap, nrelids, sizeof *out->relid_store);
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
	case 'I': rc = decode_insert(&r, out); break;
	case 'U': rc = decode_update(&r, out); break;
	case 'D': rc = decode_delete(&r, out); break;
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

/* ---- relation cache ------------------------------------------------------ */

static size_t relid_hash(uint32_t relid)
{
	return (size_t)(relid * 2654435761u);
}

void pgoutput_relcache_init(struct pgoutput_relcache *cache)
{
	memset(cache, 0, sizeof *cache);
}

static void relation_free(struct pgoutput_relation *rel)
{
	if (!rel)
		return;
	for (int i = 0; i < rel->natts; i++)
		free(rel->columns[i].name);
	free(rel->columns);
	free(rel->nspname);
	free(rel->relname);
	free(rel);
}

void pgoutput_relcache_free(struct pgoutput_relcache *cache)
{
	for (size_t i = 0; i < cache->cap; i++)
		relation_free(cache->slots[i]);
	free(cache->slots);
	pgoutput_relcache_init(cache);
}

/* The slot holding relid, or the empty slot where it belongs. */
static struct pgoutput_relation **relcache_slot(const struct pgoutput_relcache *cache, uint32_t relid)
{
	size_t mask = cache->cap - 1;
	for (size_t i = relid_hash(relid) & mask;; i = (i + 1) & mask)
		if (!cache->slots[i] || cache->slots[i]->relid == relid)
			return &cache->slots[i];
}

static void relcache_grow(struct pgoutput_relcache *cache)
{
	struct pgoutput_relcache bigger = { NULL, cache->cap ? cache->cap * 2 : 16, 0 };
	bigger.slots = xcalloc(bigger.cap, sizeof *bigger.slots);
	for (size_t i = 0; i < cache->cap; i++)
		if (cache->slots[i]) {
			*relcache_slot(&bigger, cache->slots[i]->relid) = cache->slots[i];
			bigger.count++;
		}
	free(cache->slots);
	*cache = bigger;
}

const struct pgoutput_relation *pgoutput_relcache_lookup(const struct pgoutput_relcache *cache,
							 uint32_t relid)
{
	if (cache->cap == 0)
		return NULL;
	return *relcache_slot(cache, relid);
}

static bool relation_equal(const struct pgoutput_relation *a, const struct pgoutput_relation *b)
{
	if (strcmp(a->nspname, b->nspname) != 0 || strcmp(a->relname, b->relname) != 0 ||
	    a->replident != b->replident || a->natts != b->natts)
		return false;
	for (int i = 0; i < a->natts; i++) {
		const struct pgoutput_relation_column *x = &a->columns[i], *y = &b->columns[i];
		if (strcmp(x->name, y->name) != 0 || x->type_oid != y->type_oid ||
		    x->typmod != y->typmod || x->key != y->key)
			return false;
	}
	return true;
}

int pgoutput_relcache_apply(struct pgoutput_relcache *cache, const struct pgoutput_message *msg,
			    const struct pgoutput_relation **relation, bool *changed, char *err,
			    size_t errlen)
{
	if (msg->type != PGOUTPUT_RELATION) {
		const char *name = pgoutput_type_name((uint8_t)msg->type);
		errbuf_setf(err, errlen, "pgoutput: relation cache given a %s message, not a Relation",
			  name ? name : "unknown");
		return -1;
	}
	struct pgoutput_relation *rel = xcalloc(1, sizeof *rel);
	rel->relid = msg->relation.relid;
	rel->nspname = xstrdup(msg->relation.nspname[0] ? msg->relation.nspname : "pg_catalog");
	rel->relname = xstrdup(msg->relation.relname);
	rel->replident = msg->relation.replident;
	rel->natts = msg->relation.natts;
	rel->columns = xcalloc((size_t)rel->natts, sizeof *rel->columns);
	for (int i = 0; i < rel->natts; i++) {
		const struct pgoutput_attribute *att = &msg->relation.atts[i];
		rel->columns[i].name = xstrdup(att->name);
		rel->columns[i].type_oid = att->type_oid;
		rel->columns[i].typmod = att->typmod;
		rel->columns[i].key = att->key;
	}

	if ((cache->count + 1) * 2 > cache->cap)
		relcache_grow(cache);
	struct pgoutput_relation **slot = relcache_slot(cache, rel->relid);
	if (changed)
		*changed = *slot && !relation_equal(*slot, rel);
	if (*slot)
		relation_free(*slot);
	else
		cache->count++;
	*slot = rel;
	if (relation)
		*relation = rel;
	return 0;
}

static const char *replident_name(enum pgoutput_replident replident)
{
	switch (replident) {
	case PGOUTPUT_REPLIDENT_DEFAULT: return "default";
	case PGOUTPUT_REPLIDENT_NOTHING: return "nothing";
	case PGOUTPUT_REPLIDENT_FULL: return "full";
	default: return "index";
	}
}

static int check_tuple(const struct pgoutput_relation *rel, const struct pgoutput_tuple *tuple,
		       const char *role, const char *what, char *err, size_t errlen)
{
	if (tuple->ncols != rel->natts) {
		errbuf_setf(err, errlen, "pgoutput: relation %u \"%s.%s\" has %d columns but %s%s carries %d",
			  rel->relid, rel->nspname, rel->relname, rel->natts, role, what, tuple->ncols);
		return -1;
	}
	return 0;
}

/* K: the replica identity columns and nothing else; O: only under FULL. */
static int check_old(const struct pgoutput_relation *rel, const struct pgoutput_message *msg,
		     const char *what, char *err, size_t errlen)
{
	const struct pgoutput_tuple *old = &msg->change.old_tuple;
	if (msg->change.old_kind == PGOUTPUT_OLD_FULL) {
		if (rel->replident != PGOUTPUT_REPLIDENT_FULL) {
			errbuf_setf(err, errlen,
				  "pgoutput: %s carries an old tuple (O) but relation %u \"%s.%s\" has replica identity %s, not full",
				  what, rel->relid, rel->nspname, rel->relname, replident_name(rel->replident));
			return -1;
		}
		return check_tuple(rel, old, "the old tuple (O) of ", what, err, errlen);
	}
	if (rel->replident != PGOUTPUT_REPLIDENT_DEFAULT && rel->replident != PGOUTPUT_REPLIDENT_INDEX) {
		errbuf_setf(err, errlen,
			  "pgoutput: %s carries an old key (K) but relation %u \"%s.%s\" has replica identity %s",
			  what, rel->relid, rel->nspname, rel->relname, replident_name(rel->replident));
		return -1;
	}
	if (check_tuple(rel, old, "the old key (K) of ", what, err, errlen) < 0)
		return -1;
	for (int i = 0; i < rel->natts; i++) {
		bool has_value = old->cols[i].kind != PGOUTPUT_COLUMN_NULL;
		if (has_value != rel->columns[i].key) {
			errbuf_setf(err, errlen,
				  has_value ? "pgoutput: old key (K) of %s carries a value for column \"%s\" of relation %u \"%s.%s\", which is not a key column"
					    : "pgoutput: old key (K) of %s has no value for key column \"%s\" of relation %u \"%s.%s\"",
				  what, rel->columns[i].name, rel->relid, rel->nspname, rel->relname);
			return -1;
		}
	}
	return 0;
}

int pgoutput_relcache_check(const struct pgoutput_relcache *cache, const struct pgoutput_message *msg,
			    const struct pgoutput_relation **relation, char *err, size_t errlen)
{
	if (relation)
		*relation = NULL;
	const char *what = pgoutput_type_name((uint8_t)msg->type);
	if (msg->type == PGOUTPUT_TRUNCATE) {
		for (int i = 0; i < msg->truncate.nrelids; i++)
			if (!pgoutput_relcache_lookup(cache, msg->truncate.relids[i])) {
				errbuf_setf(err, errlen,
					  "pgoutput: Truncate of unknown relation %u: no Relation message received for it",
					  msg->truncate.relids[i]);
				return -1;
			}
		return 0;
	}
	if (msg->type != PGOUTPUT_INSERT && msg->type != PGOUTPUT_UPDATE && msg->type != PGOUTPUT_DELETE)
		return 0;
	const struct pgoutput_relation *rel = pgoutput_relcache_lookup(cache, msg->change.relid);
	if (!rel) {
		errbuf_setf(err, errlen, "pgoutput: %s for unknown relation %u: no Relation message received for it",
			  what, msg->change.relid);
		return -1;
	}
	if (msg->change.old_kind != PGOUTPUT_OLD_NONE && check_old(rel, msg, what, err, errlen) < 0)
		return -1;
	if (msg->type != PGOUTPUT_DELETE &&
	    check_tuple(rel, &msg->change.new_tuple, "", what, err, errlen) < 0)
		return -1;
	if (relation)
		*relation = rel;
	return 0;
}

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
				  lsn_text(out->commit.commit_lsn, a), session->xid,
				  lsn_text(session->final_lsn, b));
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
