/*
 * envelope.c - encode and decode transaction envelopes (envelope.h).
 */
#include "trellara/envelope.h"

#include "trellara/strbuf.h"
#include "trellara/xalloc.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void buf_reserve(struct buf *b, size_t more)
{
	if (b->len + more <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + more)
		cap *= 2;
	b->data = xrealloc(b->data, cap);
	b->cap = cap;
}

void buf_put(struct buf *b, const void *bytes, size_t len)
{
	buf_reserve(b, len);
	if (len)
		memcpy(b->data + b->len, bytes, len);
	b->len += len;
}

void buf_put_u8(struct buf *b, uint8_t v)
{
	buf_put(b, &v, 1);
}

void buf_put_u16(struct buf *b, uint16_t v)
{
	uint8_t p[2] = { (uint8_t)(v >> 8), (uint8_t)v };
	buf_put(b, p, 2);
}

void buf_put_u32(struct buf *b, uint32_t v)
{
	uint8_t p[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v };
	buf_put(b, p, 4);
}

void buf_put_u64(struct buf *b, uint64_t v)
{
	buf_put_u32(b, (uint32_t)(v >> 32));
	buf_put_u32(b, (uint32_t)v);
}

void buf_put_str(struct buf *b, const char *s, size_t len)
{
	if (len > UINT16_MAX)
		len = UINT16_MAX; /* identifiers are at most 63 bytes in PostgreSQL */
	buf_put_u16(b, (uint16_t)len);
	buf_put(b, s, len);
}

void buf_free(struct buf *b)
{
	free(b->data);
	memset(b, 0, sizeof *b);
}

void env_encode_header(struct buf *b, const struct env_header_fields *h)
{
	buf_put_u8(b, ENVELOPE_VERSION);
	buf_put_str(b, h->source_id ? h->source_id : "", h->source_id ? strlen(h->source_id) : 0);
	buf_put_u32(b, h->xid);
	buf_put_u64(b, h->commit_lsn);
	buf_put_u64(b, h->end_lsn);
	buf_put_u64(b, (uint64_t)h->commit_time_us);
	buf_put_str(b, h->origin ? h->origin : "", h->origin ? strlen(h->origin) : 0);
	buf_put_u64(b, h->origin_lsn);
}

void env_encode_relation(struct buf *b, uint32_t oid, const char *schema, const char *name, uint8_t replident,
			 uint16_t n_columns, const struct env_column *columns)
{
	buf_put_u32(b, oid);
	buf_put_str(b, schema, strlen(schema));
	buf_put_str(b, name, strlen(name));
	buf_put_u8(b, replident);
	buf_put_u16(b, n_columns);
	for (uint16_t i = 0; i < n_columns; i++) {
		buf_put_u8(b, columns[i].key ? 1 : 0);
		buf_put_str(b, columns[i].name, columns[i].name_len);
		buf_put_u32(b, columns[i].type_oid);
		buf_put_u32(b, (uint32_t)columns[i].typmod);
	}
}

void env_encode_tuple_begin(struct buf *b, uint16_t n)
{
	buf_put_u16(b, n);
}

void env_encode_value(struct buf *b, uint8_t kind, const void *data, uint32_t len)
{
	buf_put_u8(b, kind);
	if (kind == ENV_TEXT) {
		buf_put_u32(b, len);
		buf_put(b, data, len);
	}
}

/* ---- decoding ---- */

static int fail(struct env_decoder *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct env_decoder *d, const char *fmt, ...)
{
	char what[200];
	va_list ap;
	va_start(ap, fmt);
	errbuf_vsetf(what, sizeof what, fmt, ap);
	va_end(ap);
	snprintf(d->error, sizeof d->error, "envelope: %s at byte %zu", what, d->pos);
	return -1;
}

static bool need(struct env_decoder *d, size_t n)
{
	return d->len - d->pos >= n;
}

static int get_u8(struct env_decoder *d, uint8_t *v, const char *what)
{
	if (!need(d, 1))
		return fail(d, "truncated: need 1 byte for %s", what);
	*v = d->buf[d->pos++];
	return 0;
}

static int get_u16(struct env_decoder *d, uint16_t *v, const char *what)
{
	if (!need(d, 2))
		return fail(d, "truncated: need 2 bytes for %s", what);
	*v = (uint16_t)(d->buf[d->pos] << 8 | d->buf[d->pos + 1]);
	d->pos += 2;
	return 0;
}

static int get_u32(struct env_decoder *d, uint32_t *v, const char *what)
{
	if (!need(d, 4))
		return fail(d, "truncated: need 4 bytes for %s", what);
	const uint8_t *p = d->buf + d->pos;
	*v = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
	d->pos += 4;
	return 0;
}

static int get_u64(struct env_decoder *d, uint64_t *v, const char *what)
{
	uint32_t hi = 0, lo = 0;
	if (get_u32(d, &hi, what) < 0 || get_u32(d, &lo, what) < 0)
		return -1;
	*v = (uint64_t)hi << 32 | lo;
	return 0;
}

static int get_str(struct env_decoder *d, const char **s, size_t *len, const char *what)
{
	uint16_t n = 0;
	if (get_u16(d, &n, what) < 0)
		return -1;
	if (!need(d, n))
		return fail(d, "truncated: %s of %u bytes", what, n);
	*s = (const char *)d->buf + d->pos;
	*len = n;
	d->pos += n;
	return 0;
}

int env_decode_begin(struct env_decoder *d, const uint8_t *buf, size_t len)
{
	memset(d, 0, sizeof *d);
	d->buf = buf;
	d->len = len;
	struct env_header *h = &d->header;
	uint64_t t = 0;
	if (get_u8(d, &h->version, "version") < 0)
		return -1;
	if (h->version != ENVELOPE_VERSION)
		return fail(d, "unsupported version %u", h->version);
	if (get_str(d, &h->source_id, &h->source_id_len, "source_id") < 0 || get_u32(d, &h->xid, "xid") < 0 ||
	    get_u64(d, &h->commit_lsn, "commit_lsn") < 0 || get_u64(d, &h->end_lsn, "end_lsn") < 0 ||
	    get_u64(d, &t, "commit_time") < 0 || get_str(d, &h->origin, &h->origin_len, "origin") < 0 ||
	    get_u64(d, &h->origin_lsn, "origin_lsn") < 0 || get_u32(d, &h->n_relations, "n_relations") < 0)
		return -1;
	h->commit_time_us = (int64_t)t;
	/* each relation takes at least 11 bytes: bound the allocation */
	if (h->n_relations > (d->len - d->pos) / 11)
		return fail(d, "%u relations cannot fit in %zu bytes", h->n_relations, d->len - d->pos);
	h->relations = xcalloc(h->n_relations ? h->n_relations : 1, sizeof *h->relations);
	for (uint32_t i = 0; i < h->n_relations; i++) {
		struct env_relation *r = &h->relations[i];
		if (get_u32(d, &r->oid, "relation oid") < 0 ||
		    get_str(d, &r->schema, &r->schema_len, "relation schema") < 0 ||
		    get_str(d, &r->name, &r->name_len, "relation name") < 0 ||
		    get_u8(d, &r->replident, "replica identity") < 0 || get_u16(d, &r->n_columns, "column count") < 0)
			return -1;
		if (!strchr("dnfi", r->replident) || r->replident == 0)
			return fail(d, "bad replica identity %u", r->replident);
		if (r->n_columns > (d->len - d->pos) / 11)
			return fail(d, "%u columns cannot fit in %zu bytes", r->n_columns, d->len - d->pos);
		r->columns = xcalloc(r->n_columns ? r->n_columns : 1, sizeof *r->columns);
		for (uint16_t c = 0; c < r->n_columns; c++) {
			uint8_t flags = 0;
			uint32_t typmod = 0;
			struct env_column *col = &r->columns[c];
			if (get_u8(d, &flags, "column flags") < 0 ||
			    get_str(d, &col->name, &col->name_len, "column name") < 0 ||
			    get_u32(d, &col->type_oid, "column type") < 0 || get_u32(d, &typmod, "column typmod") < 0)
				return -1;
			if (flags > 1)
				return fail(d, "bad column flags %u", flags);
			col->key = flags == 1;
			col->typmod = (int32_t)typmod;
		}
	}
	return get_u32(d, &h->n_changes, "n_changes");
}

static int get_tuple(struct env_decoder *d, struct env_tuple *t, size_t *cap, uint16_t expect)
{
	if (get_u16(d, &t->n, "tuple column count") < 0)
		return -1;
	if (t->n != expect)
		return fail(d, "tuple has %u columns, its relation %u", t->n, expect);
	if (t->n > *cap) {
		*cap = t->n;
		t->values = xrealloc(t->values, *cap * sizeof *t->values);
	}
	for (uint16_t i = 0; i < t->n; i++) {
		struct env_value *v = &t->values[i];
		if (get_u8(d, &v->kind, "value kind") < 0)
			return -1;
		v->len = 0;
		v->data = NULL;
		if (v->kind == ENV_TEXT) {
			if (get_u32(d, &v->len, "value length") < 0)
				return -1;
			if (!need(d, v->len))
				return fail(d, "truncated: value of %u bytes", v->len);
			v->data = d->buf + d->pos;
			d->pos += v->len;
		} else if (v->kind != ENV_NULL && v->kind != ENV_UNCHANGED_TOAST) {
			return fail(d, "bad value kind %u", v->kind);
		}
	}
	return 0;
}

int env_decode_next(struct env_decoder *d, const struct env_change **out)
{
	if (d->changes_read == d->header.n_changes) {
		if (d->pos != d->len)
			return fail(d, "%zu trailing bytes after %u changes", d->len - d->pos, d->header.n_changes);
		return 0;
	}
	struct env_change *c = &d->change;
	c->old_kind = 0;
	c->old_tuple.n = c->new_tuple.n = 0;
	if (get_u8(d, &c->op, "change op") < 0)
		return -1;
	uint16_t ncols = 0;
	if (c->op == ENV_INSERT || c->op == ENV_UPDATE || c->op == ENV_DELETE) {
		if (get_u32(d, &c->relation, "relation index") < 0)
			return -1;
		if (c->relation >= d->header.n_relations)
			return fail(d, "relation index %u out of range (%u relations)", c->relation, d->header.n_relations);
		ncols = d->header.relations[c->relation].n_columns;
	}
	switch (c->op) {
	case ENV_INSERT:
		if (get_tuple(d, &c->new_tuple, &d->new_cap, ncols) < 0)
			return -1;
		break;
	case ENV_UPDATE:
	case ENV_DELETE:
		if (get_u8(d, &c->old_kind, "old tuple kind") < 0)
			return -1;
		if (c->old_kind != 0 && c->old_kind != 'K' && c->old_kind != 'O')
			return fail(d, "bad old tuple kind %u", c->old_kind);
		if (c->op == ENV_DELETE && c->old_kind == 0)
			return fail(d, "delete without an old tuple");
		if (c->old_kind && get_tuple(d, &c->old_tuple, &d->old_cap, ncols) < 0)
			return -1;
		if (c->op == ENV_UPDATE && get_tuple(d, &c->new_tuple, &d->new_cap, ncols) < 0)
			return -1;
		break;
	case ENV_TRUNCATE:
		if (get_u8(d, &c->truncate_flags, "truncate flags") < 0 || get_u32(d, &c->n_truncate, "truncate count") < 0)
			return -1;
		if (c->truncate_flags > 3)
			return fail(d, "bad truncate flags %u", c->truncate_flags);
		if (c->n_truncate > (d->len - d->pos) / 4)
			return fail(d, "truncated: truncate of %u relations cannot fit", c->n_truncate);
		if (c->n_truncate > d->trunc_cap) {
			d->trunc_cap = c->n_truncate;
			c->truncate_relations = xrealloc(c->truncate_relations, d->trunc_cap * sizeof(uint32_t));
		}
		for (uint32_t i = 0; i < c->n_truncate; i++) {
			if (get_u32(d, &c->truncate_relations[i], "truncate relation") < 0)
				return -1;
			if (c->truncate_relations[i] >= d->header.n_relations)
				return fail(d, "relation index %u out of range", c->truncate_relations[i]);
		}
		break;
	case ENV_MESSAGE:
		if (get_u8(d, &c->message_flags, "message flags") < 0 || get_u64(d, &c->message_lsn, "message lsn") < 0 ||
		    get_str(d, &c->message_prefix, &c->message_prefix_len, "message prefix") < 0 ||
		    get_u32(d, &c->message_len, "message length") < 0)
			return -1;
		if (!need(d, c->message_len))
			return fail(d, "truncated: message of %u bytes", c->message_len);
		c->message_content = d->buf + d->pos;
		d->pos += c->message_len;
		break;
	default:
		return fail(d, "unknown change op 0x%02x", c->op);
	}
	d->changes_read++;
	*out = c;
	return 1;
}

void env_decoder_free(struct env_decoder *d)
{
	for (uint32_t i = 0; i < d->header.n_relations && d->header.relations; i++)
		free(d->header.relations[i].columns);
	free(d->header.relations);
	free(d->change.old_tuple.values);
	free(d->change.new_tuple.values);
	free(d->change.truncate_relations);
	memset(d, 0, sizeof *d);
}

void env_encode_watermark(struct buf *b, const char *source_id, uint64_t lsn, int64_t time_us)
{
	buf_put_u8(b, ENVELOPE_VERSION);
	buf_put_str(b, source_id, strlen(source_id));
	buf_put_u64(b, lsn);
	buf_put_u64(b, (uint64_t)time_us);
}

void env_encode_ddl(struct buf *b, const char *source_id, uint32_t xid, uint64_t commit_lsn, uint64_t message_lsn,
		    const char *prefix, const uint8_t *content, uint32_t len)
{
	buf_put_u8(b, ENVELOPE_VERSION);
	buf_put_str(b, source_id, strlen(source_id));
	buf_put_u32(b, xid);
	buf_put_u64(b, commit_lsn);
	buf_put_u64(b, message_lsn);
	buf_put_str(b, prefix, strlen(prefix));
	buf_put_u32(b, len);
	buf_put(b, content, len);
}

static void encode_manifest(struct buf *b, uint8_t version, const struct env_header_fields *h, uint32_t chunk_count,
			    uint64_t total_changes, const struct env_manifest_chunk *chunks, uint32_t n_tables,
			    const char *const *tables)
{
	buf_put_u8(b, version);
	buf_put_str(b, h->source_id, strlen(h->source_id));
	buf_put_u32(b, h->xid);
	buf_put_u64(b, h->commit_lsn);
	buf_put_u64(b, h->end_lsn);
	buf_put_u64(b, (uint64_t)h->commit_time_us);
	buf_put_u32(b, chunk_count);
	buf_put_u64(b, total_changes);
	for (uint32_t i = 0; i < chunk_count; i++) {
		if (version == ENV_MANIFEST_BY_OFFSET)
			buf_put_u64(b, chunks[i].offset);
		buf_put_u32(b, chunks[i].crc);
		buf_put_u32(b, chunks[i].changes);
	}
	buf_put_u32(b, n_tables);
	for (uint32_t i = 0; i < n_tables; i++)
		buf_put_str(b, tables[i], strlen(tables[i]));
}

void env_encode_manifest(struct buf *b, const struct env_header_fields *h, uint32_t chunk_count,
			 uint64_t total_changes, const struct env_manifest_chunk *chunks, uint32_t n_tables,
			 const char *const *tables)
{
	encode_manifest(b, ENVELOPE_VERSION, h, chunk_count, total_changes, chunks, n_tables, tables);
}

void env_encode_manifest_by_offset(struct buf *b, const struct env_header_fields *h, uint32_t chunk_count,
				   uint64_t total_changes, const struct env_manifest_chunk *chunks, uint32_t n_tables,
				   const char *const *tables)
{
	encode_manifest(b, ENV_MANIFEST_BY_OFFSET, h, chunk_count, total_changes, chunks, n_tables, tables);
}

void env_encode_pending_abort(struct buf *b, const char *source_id, uint32_t xid, uint64_t run)
{
	buf_put_u8(b, ENVELOPE_VERSION);
	buf_put_str(b, source_id, strlen(source_id));
	buf_put_u32(b, xid);
	buf_put_u64(b, run);
}

void env_encode_pending_head(struct buf *b, uint64_t run, uint32_t seq)
{
	buf_put_u64(b, run);
	buf_put_u32(b, seq);
}

void env_encode_commit_marker(struct buf *b, const char *source_id, uint32_t xid, uint64_t commit_lsn,
			      uint64_t end_lsn, uint32_t chunk_count, uint32_t manifest_crc)
{
	buf_put_u8(b, ENVELOPE_VERSION);
	buf_put_str(b, source_id, strlen(source_id));
	buf_put_u32(b, xid);
	buf_put_u64(b, commit_lsn);
	buf_put_u64(b, end_lsn);
	buf_put_u32(b, chunk_count);
	buf_put_u32(b, manifest_crc);
}

static void decoder_over(struct env_decoder *d, const uint8_t *payload, size_t len)
{
	memset(d, 0, sizeof *d);
	d->buf = payload;
	d->len = len;
}

static int expect_version(struct env_decoder *d)
{
	uint8_t v = 0;
	if (get_u8(d, &v, "version") < 0)
		return -1;
	if (v != ENVELOPE_VERSION)
		return fail(d, "unsupported version %u", v);
	return 0;
}

static int expect_end(struct env_decoder *d)
{
	if (d->pos != d->len)
		return fail(d, "%zu trailing bytes", d->len - d->pos);
	return 0;
}

int env_decode_manifest(const uint8_t *payload, size_t len, struct env_manifest *m, char *error, size_t error_len)
{
	struct env_decoder d;
	decoder_over(&d, payload, len);
	memset(m, 0, sizeof *m);
	uint64_t t = 0;
	int rc = -1;
	uint8_t version = 0;
	if (get_u8(&d, &version, "version") < 0)
		goto out;
	if (version != ENVELOPE_VERSION && version != ENV_MANIFEST_BY_OFFSET) {
		fail(&d, "unsupported version %u", version);
		goto out;
	}
	m->by_offset = version == ENV_MANIFEST_BY_OFFSET;
	if (get_str(&d, &m->source_id, &m->source_id_len, "source_id") < 0 ||
	    get_u32(&d, &m->xid, "xid") < 0 || get_u64(&d, &m->commit_lsn, "commit_lsn") < 0 ||
	    get_u64(&d, &m->end_lsn, "end_lsn") < 0 || get_u64(&d, &t, "commit_time") < 0 ||
	    get_u32(&d, &m->chunk_count, "chunk_count") < 0 || get_u64(&d, &m->total_changes, "total_changes") < 0)
		goto out;
	m->commit_time_us = (int64_t)t;
	if (m->chunk_count > (d.len - d.pos) / (m->by_offset ? 16 : 8)) {
		fail(&d, "%u chunks cannot fit", m->chunk_count);
		goto out;
	}
	m->chunks = xcalloc(m->chunk_count ? m->chunk_count : 1, sizeof *m->chunks);
	for (uint32_t i = 0; i < m->chunk_count; i++)
		if ((m->by_offset && get_u64(&d, &m->chunks[i].offset, "chunk offset") < 0) ||
		    get_u32(&d, &m->chunks[i].crc, "chunk crc") < 0 || get_u32(&d, &m->chunks[i].changes, "chunk changes") < 0)
			goto out;
	if (get_u32(&d, &m->n_tables, "n_tables") < 0)
		goto out;
	if (m->n_tables > (d.len - d.pos) / 2) {
		fail(&d, "%u tables cannot fit", m->n_tables);
		goto out;
	}
	m->tables = xcalloc(m->n_tables ? m->n_tables : 1, sizeof *m->tables);
	m->table_lens = xcalloc(m->n_tables ? m->n_tables : 1, sizeof *m->table_lens);
	for (uint32_t i = 0; i < m->n_tables; i++) {
		size_t l = 0;
		if (get_str(&d, &m->tables[i], &l, "table name") < 0)
			goto out;
		m->table_lens[i] = (uint16_t)l;
	}
	rc = expect_end(&d);
out:
	if (rc < 0) {
		snprintf(error, error_len, "%s", d.error);
		env_manifest_free(m);
	}
	return rc;
}

void env_manifest_free(struct env_manifest *m)
{
	free(m->chunks);
	free(m->tables);
	free(m->table_lens);
	memset(m, 0, sizeof *m);
}

int env_frame_summary(int frame_type, const uint8_t *payload, size_t len, struct env_frame_summary *s,
		      char *error, size_t error_len)
{
	struct env_decoder d;
	decoder_over(&d, payload, len);
	memset(s, 0, sizeof *s);
	int rc = -1;
	uint64_t t = 0;
	switch (frame_type) {
	case 1: /* txn */
	case 2: /* chunk */
	case 7: /* pending_chunk */ {
		const uint8_t *p = payload;
		size_t l = len;
		if (frame_type == 7) {
			if (get_u64(&d, &s->run, "capture run") < 0)
				break;
			p += 8;
			l -= 8;
		}
		if (frame_type != 1) {
			if (get_u32(&d, &s->chunk_index, frame_type == 2 ? "chunk index" : "sequence number") < 0)
				break;
			p += 4;
			l -= 4;
		}
		struct env_decoder e;
		if (env_decode_begin(&e, p, l) < 0) {
			snprintf(d.error, sizeof d.error, "%s", e.error);
			env_decoder_free(&e);
			break;
		}
		s->source_id = e.header.source_id;
		s->source_id_len = e.header.source_id_len;
		s->has_xid = true;
		s->xid = e.header.xid;
		s->commit_lsn = e.header.commit_lsn;
		s->end_lsn = e.header.end_lsn;
		env_decoder_free(&e);
		rc = 0;
		break;
	}
	case 3: { /* manifest */
		struct env_manifest m;
		if (env_decode_manifest(payload, len, &m, d.error, sizeof d.error) < 0)
			break;
		s->source_id = m.source_id;
		s->source_id_len = m.source_id_len;
		s->has_xid = true;
		s->xid = m.xid;
		s->commit_lsn = m.commit_lsn;
		s->end_lsn = m.end_lsn;
		s->chunk_count = m.chunk_count;
		env_manifest_free(&m);
		rc = 0;
		break;
	}
	case 4: /* commit_marker */
		s->has_xid = true;
		if (expect_version(&d) == 0 && get_str(&d, &s->source_id, &s->source_id_len, "source_id") == 0 &&
		    get_u32(&d, &s->xid, "xid") == 0 && get_u64(&d, &s->commit_lsn, "commit_lsn") == 0 &&
		    get_u64(&d, &s->end_lsn, "end_lsn") == 0 && get_u32(&d, &s->chunk_count, "chunk_count") == 0 &&
		    get_u32(&d, &s->manifest_crc, "manifest crc") == 0)
			rc = expect_end(&d);
		break;
	case 5: /* watermark */
		if (expect_version(&d) == 0 && get_str(&d, &s->source_id, &s->source_id_len, "source_id") == 0 &&
		    get_u64(&d, &s->lsn, "lsn") == 0 && get_u64(&d, &t, "time") == 0)
			rc = expect_end(&d);
		break;
	case 6: { /* ddl */
		const char *prefix;
		size_t plen;
		uint32_t clen = 0;
		s->has_xid = true;
		if (expect_version(&d) == 0 && get_str(&d, &s->source_id, &s->source_id_len, "source_id") == 0 &&
		    get_u32(&d, &s->xid, "xid") == 0 && get_u64(&d, &s->commit_lsn, "commit_lsn") == 0 &&
		    get_u64(&d, &s->lsn, "message lsn") == 0 && get_str(&d, &prefix, &plen, "prefix") == 0 &&
		    get_u32(&d, &clen, "length") == 0) {
			if (!need(&d, clen))
				fail(&d, "truncated: ddl text of %u bytes", clen);
			else {
				d.pos += clen;
				rc = expect_end(&d);
			}
		}
		break;
	}
	case 8: /* pending_abort */
		s->has_xid = true;
		if (expect_version(&d) == 0 && get_str(&d, &s->source_id, &s->source_id_len, "source_id") == 0 &&
		    get_u32(&d, &s->xid, "xid") == 0 && get_u64(&d, &s->run, "capture run") == 0)
			rc = expect_end(&d);
		break;
	default:
		fail(&d, "unknown frame type %d", frame_type);
	}
	if (rc < 0)
		snprintf(error, error_len, "%s", d.error);
	return rc;
}

int env_change_length(const uint8_t *p, size_t avail, const uint16_t *relation_columns, uint32_t n_relations,
		      size_t *len)
{
	struct env_decoder d;
	decoder_over(&d, p, avail);
	d.header.n_relations = n_relations;
	struct env_relation *rels = xcalloc(n_relations ? n_relations : 1, sizeof *rels);
	for (uint32_t i = 0; i < n_relations; i++)
		rels[i].n_columns = relation_columns[i];
	d.header.relations = rels;
	d.header.n_changes = 1;
	const struct env_change *c;
	int rc = env_decode_next(&d, &c);
	int result;
	if (rc == 1) {
		*len = d.pos;
		result = 1;
	} else {
		/* a truncation error means: not all of it is here yet */
		result = strstr(d.error, "truncated") ? 0 : -1;
	}
	d.header.relations = NULL;
	d.header.n_relations = 0;
	free(rels);
	env_decoder_free(&d);
	return result;
}
