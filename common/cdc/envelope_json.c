/*
 * envelope_json.c - transaction envelopes and the stream's other frames as
 * JSON (envelope.h: env_write_json, env_frame_write_json), over the
 * decoder of envelope.c and the one JSON writer (jsonw.h): what
 * `trellara-stream read --format json` and inspect-transaction print.
 */
#include "trellara/envelope.h"

#include "trellara/jsonw.h"
#include "trellara/textcodec.h"
#include "trellara/xalloc.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- JSON (the one writer, jsonw.h) ---- */

static void write_tuple(struct jsonw *w, const char *key, const struct env_relation *r, const struct env_tuple *t,
			bool keys_only)
{
	jsonw_open(w, key, '{');
	for (uint16_t i = 0; i < t->n; i++) {
		const struct env_value *v = &t->values[i];
		if (keys_only && !r->columns[i].key)
			continue;
		jsonw_keyn(w, r->columns[i].name, r->columns[i].name_len);
		if (v->kind == ENV_NULL) {
			jsonw_null(w, NULL);
		} else if (v->kind == ENV_UNCHANGED_TOAST || !utf8_valid(v->data, v->len)) {
			jsonw_open(w, NULL, '{');
			jsonw_bool(w, v->kind == ENV_UNCHANGED_TOAST ? "unchanged_toast" : "invalid_utf8", true);
			jsonw_close(w, '}');
		} else {
			jsonw_strn(w, NULL, (const char *)v->data, v->len);
		}
	}
	jsonw_close(w, '}');
}

static void write_relname(struct jsonw *w, const char *key, const struct env_relation *r)
{
	char name[300];
	snprintf(name, sizeof name, "%.*s.%.*s", (int)r->schema_len, r->schema, (int)r->name_len, r->name);
	jsonw_str(w, key, name);
}

/* The members of a transaction's envelope (or chunk) at w's level. */
static int write_transaction(struct jsonw *w, const uint8_t *buf, size_t len, char *error, size_t error_len)
{
	struct env_decoder d;
	int rc = -1;
	if (env_decode_begin(&d, buf, len) < 0)
		goto out;
	const struct env_header *h = &d.header;
	/* floor division: times before 1970 have a non-negative fraction */
	int64_t frac = h->commit_time_us % 1000000, whole = h->commit_time_us / 1000000;
	if (frac < 0) {
		frac += 1000000;
		whole--;
	}
	time_t secs = (time_t)whole;
	struct tm tm;
	memset(&tm, 0, sizeof tm);
	gmtime_r(&secs, &tm);
	char when[64];
	size_t n = strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(when + n, sizeof when - n, ".%06dZ", (int)frac);
	jsonw_strn(w, "source_id", h->source_id, h->source_id_len);
	jsonw_u64(w, "xid", true, h->xid);
	jsonw_lsn(w, "commit_lsn", true, h->commit_lsn);
	jsonw_lsn(w, "end_lsn", true, h->end_lsn);
	jsonw_str(w, "commit_time", when);
	if (h->origin_len)
		jsonw_strn(w, "origin", h->origin, h->origin_len);
	else
		jsonw_null(w, "origin");
	jsonw_open(w, "changes", '[');
	const struct env_change *c;
	int step;
	while ((step = env_decode_next(&d, &c)) == 1) {
		const struct env_relation *r = c->op == ENV_INSERT || c->op == ENV_UPDATE || c->op == ENV_DELETE
						       ? &h->relations[c->relation]
						       : NULL;
		jsonw_open(w, NULL, '{');
		switch (c->op) {
		case ENV_INSERT:
			jsonw_str(w, "op", "insert");
			write_relname(w, "relation", r);
			write_tuple(w, "key", r, &c->new_tuple, true);
			write_tuple(w, "new", r, &c->new_tuple, false);
			break;
		case ENV_UPDATE:
		case ENV_DELETE:
			jsonw_str(w, "op", c->op == ENV_UPDATE ? "update" : "delete");
			write_relname(w, "relation", r);
			write_tuple(w, "key", r, c->old_kind ? &c->old_tuple : &c->new_tuple, true);
			if (c->old_kind == 'K')
				write_tuple(w, "old_key", r, &c->old_tuple, true);
			else if (c->old_kind == 'O')
				write_tuple(w, "old", r, &c->old_tuple, false);
			if (c->op == ENV_UPDATE)
				write_tuple(w, "new", r, &c->new_tuple, false);
			break;
		case ENV_TRUNCATE:
			jsonw_str(w, "op", "truncate");
			jsonw_bool(w, "cascade", c->truncate_flags & 1);
			jsonw_bool(w, "restart_identity", c->truncate_flags & 2);
			jsonw_open(w, "relations", '[');
			for (uint32_t i = 0; i < c->n_truncate; i++)
				write_relname(w, NULL, &h->relations[c->truncate_relations[i]]);
			jsonw_close(w, ']');
			break;
		case ENV_MESSAGE:
			jsonw_str(w, "op", "message");
			jsonw_bool(w, "transactional", c->message_flags & 1);
			jsonw_lsn(w, "lsn", true, c->message_lsn);
			jsonw_strn(w, "prefix", c->message_prefix, c->message_prefix_len);
			if (utf8_valid(c->message_content, c->message_len))
				jsonw_strn(w, "content", (const char *)c->message_content, c->message_len);
			else
				jsonw_null(w, "content");
			break;
		}
		jsonw_close(w, '}');
	}
	jsonw_close(w, ']');
	if (step == 0)
		rc = 0;
out:
	if (rc < 0)
		snprintf(error, error_len, "%s", d.error);
	env_decoder_free(&d);
	return rc;
}

int env_write_json(FILE *out, const uint8_t *buf, size_t len, char *error, size_t error_len)
{
	struct jsonw w;
	jsonw_init(&w, out, false);
	return write_transaction(&w, buf, len, error, error_len);
}

/* ---- other frame payloads ---- */

int env_frame_write_json(FILE *out, int frame_type, const uint8_t *payload, size_t len, char *error,
			 size_t error_len)
{
	struct jsonw w;
	char crc[sizeof "0x00000000"];
	jsonw_init(&w, out, false);
	if (frame_type == 1)
		return write_transaction(&w, payload, len, error, error_len);
	if (frame_type == 2) {
		if (len < 4) {
			snprintf(error, error_len, "envelope: truncated chunk at byte 0");
			return -1;
		}
		uint32_t index = (uint32_t)payload[0] << 24 | (uint32_t)payload[1] << 16 | (uint32_t)payload[2] << 8 | payload[3];
		jsonw_u64(&w, "chunk_index", true, index);
		return write_transaction(&w, payload + 4, len - 4, error, error_len);
	}
	if (frame_type == 7) {
		struct env_frame_summary ps;
		if (env_frame_summary(frame_type, payload, len, &ps, error, error_len) < 0)
			return -1;
		jsonw_u64(&w, "run", true, ps.run);
		jsonw_u64(&w, "sequence", true, ps.chunk_index);
		return write_transaction(&w, payload + ENV_PENDING_HEAD_SIZE, len - ENV_PENDING_HEAD_SIZE, error, error_len);
	}
	struct env_frame_summary s;
	if (env_frame_summary(frame_type, payload, len, &s, error, error_len) < 0)
		return -1;
	jsonw_strn(&w, "source_id", s.source_id, s.source_id_len);
	if (frame_type == 5) {
		jsonw_lsn(&w, "lsn", true, s.lsn);
		return 0;
	}
	jsonw_u64(&w, "xid", true, s.xid);
	if (frame_type == 8) {
		jsonw_u64(&w, "run", true, s.run);
		return 0;
	}
	jsonw_lsn(&w, "commit_lsn", true, s.commit_lsn);
	if (frame_type != 6)
		jsonw_lsn(&w, "end_lsn", true, s.end_lsn);
	if (frame_type == 3) {
		struct env_manifest m;
		if (env_decode_manifest(payload, len, &m, error, error_len) < 0)
			return -1;
		jsonw_u64(&w, "chunk_count", true, m.chunk_count);
		jsonw_u64(&w, "total_changes", true, m.total_changes);
		jsonw_open(&w, "chunks", '[');
		for (uint32_t i = 0; i < m.chunk_count; i++) {
			snprintf(crc, sizeof crc, "0x%08x", m.chunks[i].crc);
			jsonw_open(&w, NULL, '{');
			if (m.by_offset)
				jsonw_u64(&w, "offset", true, m.chunks[i].offset);
			jsonw_str(&w, "crc", crc);
			jsonw_u64(&w, "changes", true, m.chunks[i].changes);
			jsonw_close(&w, '}');
		}
		jsonw_close(&w, ']');
		jsonw_open(&w, "tables", '[');
		for (uint32_t i = 0; i < m.n_tables; i++)
			jsonw_strn(&w, NULL, m.tables[i], m.table_lens[i]);
		jsonw_close(&w, ']');
		env_manifest_free(&m);
	} else if (frame_type == 4) {
		jsonw_u64(&w, "chunk_count", true, s.chunk_count);
		snprintf(crc, sizeof crc, "0x%08x", s.manifest_crc);
		jsonw_str(&w, "manifest_crc", crc);
	} else if (frame_type == 6) {
		/* the ddl text itself: after the fixed fields */
		size_t at = 1 + 2 + s.source_id_len + 4 + 8 + 8;
		size_t plen = (size_t)payload[at] << 8 | payload[at + 1];
		const char *prefix = (const char *)payload + at + 2;
		at += 2 + plen;
		uint32_t clen = (uint32_t)payload[at] << 24 | (uint32_t)payload[at + 1] << 16 | (uint32_t)payload[at + 2] << 8 | payload[at + 3];
		jsonw_lsn(&w, "message_lsn", true, s.lsn);
		jsonw_strn(&w, "prefix", prefix, plen);
		if (utf8_valid(payload + at + 4, clen))
			jsonw_strn(&w, "ddl", (const char *)payload + at + 4, clen);
		else
			jsonw_null(&w, "ddl");
	}
	return 0;
}
