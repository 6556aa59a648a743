/*
 * test_envelope.c - the transaction envelope codec (envelope.h): encode
 * every change kind and value kind, decode and compare field by field, the
 * JSON writer, every truncation and a set of named corruptions, the other
 * frame payloads (watermark, ddl, manifest, commit_marker, chunk) through
 * env_frame_summary and env_frame_write_json, and env_change_length.
 *
 * Every decode runs over a buffer of exactly the input's size (malloc'd),
 * so the sanitized build catches any read past the end.
 */
#include "trellara/envelope.h"

#include "trellara/checksum.h"
#include "trellara/xalloc.h"
#include "unit.h"

#include <stdint.h>
#include <stdlib.h>

/* ---- a test-side description of an envelope ------------------------------ */

struct tv {
	uint8_t kind;
	const char *data;
	uint32_t len;
};

#define TXT(s) { ENV_TEXT, s, (uint32_t)(sizeof(s) - 1) }
#define NUL_V { ENV_NULL, NULL, 0 }
#define TOAST_V { ENV_UNCHANGED_TOAST, NULL, 0 }

struct tc {
	uint8_t op;
	uint32_t rel;
	uint8_t old_kind;
	struct tv old[4];
	struct tv new_[4];
	uint8_t tflags;
	uint32_t ntrunc;
	uint32_t trunc[4];
	uint8_t mflags;
	uint64_t mlsn;
	const char *prefix;
	const char *content;
	uint32_t clen;
};

struct trel {
	uint32_t oid;
	const char *schema, *name;
	uint8_t replident;
	uint16_t ncols;
	struct env_column cols[4];
};

#define COL(n, t, m, k) { n, sizeof(n) - 1, t, m, k }

static const struct trel rels[] = {
	{ 16385, "public", "accounts", 'd', 3,
	  { COL("id", 23, -1, true), COL("owner", 25, -1, false), COL("balance", 1700, 786438, false) } },
	{ 16399, "public", "audit_full", 'f', 2, { COL("id", 23, -1, true), COL("note", 25, -1, true) } },
	{ 16400, "we\"ird", "ta\\ble", 'i', 1, { COL("k\tey", 25, -1, true) } },
};
#define N_RELS 3

static const char ddl_text[] = "{\"ddl\":\"ALTER TABLE plain ADD COLUMN x int\"}";
static const char bin_content[] = { 'a', (char)0xff, 0, 'b' };

static const struct tc changes[] = {
	/* insert: text with multibyte characters, a null */
	{ .op = 'I', .rel = 0, .new_ = { TXT("1"), TXT("Zo\xc3\xab \xe2\x9c\x93 \xf0\x9f\x98\x80"), NUL_V } },
	/* update without an old tuple, unchanged TOAST */
	{ .op = 'U', .rel = 0, .old_kind = 0, .new_ = { TXT("1"), TOAST_V, TXT("10.50") } },
	/* update with an old key (K): key changed; embedded NUL bytes in a value */
	{ .op = 'U', .rel = 0, .old_kind = 'K', .old = { TXT("1"), NUL_V, NUL_V },
	  .new_ = { TXT("2"), TXT("a\0b\0"), TXT("") } },
	/* update with the whole old tuple (O) */
	{ .op = 'U', .rel = 1, .old_kind = 'O', .old = { TXT("7"), TXT("before") }, .new_ = { TXT("7"), TXT("after") } },
	/* delete with an old key, delete with an old tuple */
	{ .op = 'D', .rel = 0, .old_kind = 'K', .old = { TXT("2"), NUL_V, NUL_V } },
	{ .op = 'D', .rel = 1, .old_kind = 'O', .old = { TXT("7"), NUL_V } },
	/* truncate of two relations, cascade + restart identity */
	{ .op = 'T', .tflags = 3, .ntrunc = 2, .trunc = { 0, 1 } },
	/* insert into the relation with names that need escaping */
	{ .op = 'I', .rel = 2, .new_ = { TXT("q\"uote\\back\nnl") } },
	/* a transactional message, a non-transactional one with binary content */
	{ .op = 'M', .mflags = 1, .mlsn = 0x16B374D848ULL, .prefix = "trellara.ddl", .content = ddl_text,
	  .clen = sizeof ddl_text - 1 },
	{ .op = 'M', .mflags = 0, .mlsn = 42, .prefix = "", .content = bin_content, .clen = sizeof bin_content },
	/* truncate of one relation, no flags */
	{ .op = 'T', .tflags = 0, .ntrunc = 1, .trunc = { 1 } },
};
#define N_CHANGES (sizeof changes / sizeof changes[0])

static const struct env_header_fields hdr = {
	.source_id = "src-\xc3\xa4",
	.xid = 4000000000U,
	.commit_lsn = 0x16B374D848ULL,
	.end_lsn = 0x16B374D878ULL,
	.commit_time_us = 1700000000123456LL, /* 2023-11-14T22:13:20.123456Z */
	.origin = "upstream",
	.origin_lsn = 0x1234ABCDULL,
};

static void encode_tuple(struct buf *b, const struct tv *v, uint16_t n)
{
	env_encode_tuple_begin(b, n);
	for (uint16_t i = 0; i < n; i++)
		env_encode_value(b, v[i].kind, v[i].data, v[i].len);
}

static void encode_change(struct buf *b, const struct tc *c)
{
	buf_put_u8(b, c->op);
	switch (c->op) {
	case 'I':
		buf_put_u32(b, c->rel);
		encode_tuple(b, c->new_, rels[c->rel].ncols);
		break;
	case 'U':
	case 'D':
		buf_put_u32(b, c->rel);
		buf_put_u8(b, c->old_kind);
		if (c->old_kind)
			encode_tuple(b, c->old, rels[c->rel].ncols);
		if (c->op == 'U')
			encode_tuple(b, c->new_, rels[c->rel].ncols);
		break;
	case 'T':
		buf_put_u8(b, c->tflags);
		buf_put_u32(b, c->ntrunc);
		for (uint32_t i = 0; i < c->ntrunc; i++)
			buf_put_u32(b, c->trunc[i]);
		break;
	case 'M':
		buf_put_u8(b, c->mflags);
		buf_put_u64(b, c->mlsn);
		buf_put_str(b, c->prefix, strlen(c->prefix));
		buf_put_u32(b, c->clen);
		buf_put(b, c->content, c->clen);
		break;
	}
}

/* The sample envelope; change_at[i] = byte offset of change i (and
 * change_at[N_CHANGES] = the end). */
static void encode_sample(struct buf *b, const struct env_header_fields *h, size_t *change_at)
{
	env_encode_header(b, h);
	buf_put_u32(b, N_RELS);
	for (int i = 0; i < N_RELS; i++)
		env_encode_relation(b, rels[i].oid, rels[i].schema, rels[i].name, rels[i].replident, rels[i].ncols,
				    rels[i].cols);
	buf_put_u32(b, (uint32_t)N_CHANGES);
	for (size_t i = 0; i < N_CHANGES; i++) {
		if (change_at)
			change_at[i] = b->len;
		encode_change(b, &changes[i]);
	}
	if (change_at)
		change_at[N_CHANGES] = b->len;
}

static uint8_t *dup_exact(const uint8_t *p, size_t len)
{
	uint8_t *d = xmalloc(len ? len : 1);
	if (len)
		memcpy(d, p, len);
	return d;
}

static bool same_bytes(const void *a, size_t alen, const void *b, size_t blen)
{
	return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

static bool same_str(const char *a, size_t alen, const char *b)
{
	return same_bytes(a, alen, b, b ? strlen(b) : 0);
}

static int tuple_mismatches(const struct env_tuple *t, const struct tv *v, uint16_t n)
{
	int bad = 0;
	if (t->n != n)
		return 1;
	for (uint16_t i = 0; i < n; i++) {
		const struct env_value *x = &t->values[i];
		if (x->kind != v[i].kind)
			bad++;
		else if (x->kind == ENV_TEXT && !same_bytes(x->data, x->len, v[i].data, v[i].len))
			bad++;
		else if (x->kind != ENV_TEXT && (x->len != 0 || x->data != NULL))
			bad++;
	}
	return bad;
}

/* Field-by-field comparison of one decoded change with its description. */
static void check_change(const struct env_change *c, const struct tc *want, size_t index)
{
	int bad = 0;
	if (c->op != want->op)
		bad++;
	switch (want->op) {
	case 'I':
		bad += c->relation != want->rel;
		bad += c->old_kind != 0;
		bad += tuple_mismatches(&c->new_tuple, want->new_, rels[want->rel].ncols);
		break;
	case 'U':
	case 'D':
		bad += c->relation != want->rel;
		bad += c->old_kind != want->old_kind;
		if (want->old_kind)
			bad += tuple_mismatches(&c->old_tuple, want->old, rels[want->rel].ncols);
		else
			bad += c->old_tuple.n != 0;
		if (want->op == 'U')
			bad += tuple_mismatches(&c->new_tuple, want->new_, rels[want->rel].ncols);
		break;
	case 'T':
		bad += c->truncate_flags != want->tflags;
		bad += c->n_truncate != want->ntrunc;
		for (uint32_t i = 0; i < want->ntrunc && i < c->n_truncate; i++)
			bad += c->truncate_relations[i] != want->trunc[i];
		break;
	case 'M':
		bad += c->message_flags != want->mflags;
		bad += c->message_lsn != want->mlsn;
		bad += !same_str(c->message_prefix, c->message_prefix_len, want->prefix);
		bad += !same_bytes(c->message_content, c->message_len, want->content, want->clen);
		break;
	}
	if (bad)
		fprintf(stderr, "change %zu: %d field(s) differ\n", index, bad);
	CHECK(bad == 0);
}

/* Decode everything; returns the number of changes, or -1 (error copied). */
static long decode_all(const uint8_t *p, size_t len, char *error, size_t error_len)
{
	struct env_decoder d;
	long n = -1;
	if (env_decode_begin(&d, p, len) == 0) {
		const struct env_change *c;
		int step;
		long k = 0;
		while ((step = env_decode_next(&d, &c)) == 1)
			k++;
		if (step == 0)
			n = k;
	}
	if (error)
		snprintf(error, error_len, "%s", d.error);
	env_decoder_free(&d);
	return n;
}

/* JSON text of one frame payload (malloc'd), or NULL on error. */
static char *json_of(int type, const uint8_t *p, size_t len, char *error, size_t error_len)
{
	char *text = NULL;
	size_t text_len = 0;
	FILE *mem = open_memstream(&text, &text_len);
	if (!mem)
		return NULL;
	int rc = env_frame_write_json(mem, type, p, len, error, error_len);
	fclose(mem);
	if (rc < 0) {
		free(text);
		return NULL;
	}
	return text;
}

/* Parse-free structural check: the members, wrapped in braces, nest
 * correctly, strings close, and no raw control characters appear. */
static bool json_balanced(const char *members)
{
	char stack[64];
	int depth = 0;
	bool in_str = false;
	stack[depth++] = '}';
	for (const char *p = members; *p; p++) {
		unsigned char ch = (unsigned char)*p;
		if (ch < 0x20)
			return false;
		if (in_str) {
			if (ch == '\\') {
				if (!p[1])
					return false;
				p++;
			} else if (ch == '"') {
				in_str = false;
			}
			continue;
		}
		if (ch == '"')
			in_str = true;
		else if (ch == '{' || ch == '[') {
			if (depth == (int)sizeof stack)
				return false;
			stack[depth++] = ch == '{' ? '}' : ']';
		} else if (ch == '}' || ch == ']') {
			if (depth <= 1 || stack[--depth] != ch)
				return false;
		}
	}
	return !in_str && depth == 1;
}

#define CHECK_HAS(text, needle)                                                                  \
	do {                                                                                     \
		const char *t_ = (text);                                                         \
		unit_checks++;                                                                   \
		if (!t_ || !strstr(t_, (needle))) {                                              \
			unit_failures++;                                                         \
			fprintf(stderr, "%s:%d: JSON lacks %s\n  in: %s\n", __FILE__, __LINE__, (needle), \
				t_ ? t_ : "(null)");                                             \
		}                                                                                \
	} while (0)

#define CHECK_PREFIX(text, prefix) CHECK((text) && strncmp((text), (prefix), strlen(prefix)) == 0)

/* ---- round trip ------------------------------------------------------------ */

static void test_round_trip(void)
{
	struct buf b = { 0 };
	encode_sample(&b, &hdr, NULL);
	uint8_t *p = dup_exact(b.data, b.len);
	struct env_decoder d;
	CHECK(env_decode_begin(&d, p, b.len) == 0);
	const struct env_header *h = &d.header;
	CHECK(h->version == ENVELOPE_VERSION);
	CHECK(same_str(h->source_id, h->source_id_len, hdr.source_id));
	CHECK(h->xid == hdr.xid);
	CHECK(h->commit_lsn == hdr.commit_lsn);
	CHECK(h->end_lsn == hdr.end_lsn);
	CHECK(h->commit_time_us == hdr.commit_time_us);
	CHECK(same_str(h->origin, h->origin_len, "upstream"));
	CHECK(h->origin_lsn == hdr.origin_lsn);
	CHECK(h->n_relations == N_RELS);
	CHECK(h->n_changes == N_CHANGES);
	for (uint32_t i = 0; i < h->n_relations && i < N_RELS; i++) {
		const struct env_relation *r = &h->relations[i];
		CHECK(r->oid == rels[i].oid);
		CHECK(same_str(r->schema, r->schema_len, rels[i].schema));
		CHECK(same_str(r->name, r->name_len, rels[i].name));
		CHECK(r->replident == rels[i].replident);
		CHECK(r->n_columns == rels[i].ncols);
		for (uint16_t c = 0; c < r->n_columns && c < rels[i].ncols; c++) {
			CHECK(same_bytes(r->columns[c].name, r->columns[c].name_len, rels[i].cols[c].name,
					 rels[i].cols[c].name_len));
			CHECK(r->columns[c].type_oid == rels[i].cols[c].type_oid);
			CHECK(r->columns[c].typmod == rels[i].cols[c].typmod);
			CHECK(r->columns[c].key == rels[i].cols[c].key);
		}
	}
	const struct env_change *c;
	size_t n = 0;
	int step;
	while ((step = env_decode_next(&d, &c)) == 1) {
		if (n < N_CHANGES)
			check_change(c, &changes[n], n);
		n++;
	}
	CHECK(step == 0);
	CHECK(n == N_CHANGES);
	CHECK(d.pos == b.len);
	/* at the end it stays at the end */
	CHECK(env_decode_next(&d, &c) == 0);
	env_decoder_free(&d);

	/* No origin, no relations, no changes: the smallest envelope. */
	struct env_header_fields h2 = hdr;
	h2.origin = NULL;
	h2.origin_lsn = 0;
	h2.source_id = "s";
	struct buf e = { 0 };
	env_encode_header(&e, &h2);
	buf_put_u32(&e, 0);
	buf_put_u32(&e, 0);
	uint8_t *q = dup_exact(e.data, e.len);
	CHECK(env_decode_begin(&d, q, e.len) == 0);
	CHECK(d.header.origin_len == 0);
	CHECK(d.header.n_relations == 0 && d.header.n_changes == 0);
	CHECK(env_decode_next(&d, &c) == 0);
	env_decoder_free(&d);
	char err[256];
	char *json = json_of(1, q, e.len, err, sizeof err);
	CHECK_HAS(json, "\"origin\":null");
	CHECK_HAS(json, "\"changes\":[]");
	CHECK(json && json_balanced(json));
	free(json);
	free(q);
	buf_free(&e);

	/* Zero-column relations with one-letter names are as small as a
	 * relation gets (13 bytes): many of them still decode. */
	struct buf z = { 0 };
	env_encode_header(&z, &h2);
	buf_put_u32(&z, 6);
	const char *names[] = { "a", "b", "c", "d", "e", "f" };
	for (int i = 0; i < 6; i++)
		env_encode_relation(&z, (uint32_t)(100 + i), "s", names[i], 'd', 0, NULL);
	buf_put_u32(&z, 1);
	buf_put_u8(&z, 'T');
	buf_put_u8(&z, 0);
	buf_put_u32(&z, 6);
	for (uint32_t i = 0; i < 6; i++)
		buf_put_u32(&z, i);
	q = dup_exact(z.data, z.len);
	CHECK(decode_all(q, z.len, err, sizeof err) == 1);
	free(q);
	/* ... and with no change after them */
	buf_free(&z);
	env_encode_header(&z, &h2);
	buf_put_u32(&z, 6);
	for (int i = 0; i < 6; i++)
		env_encode_relation(&z, (uint32_t)(100 + i), "s", names[i], 'd', 0, NULL);
	buf_put_u32(&z, 0);
	q = dup_exact(z.data, z.len);
	CHECK(decode_all(q, z.len, err, sizeof err) == 0);
	free(q);
	/* and with empty names (11 bytes each) */
	buf_free(&z);
	env_encode_header(&z, &h2);
	buf_put_u32(&z, 4);
	for (int i = 0; i < 4; i++)
		env_encode_relation(&z, (uint32_t)(100 + i), "", "", 'n', 0, NULL);
	buf_put_u32(&z, 0);
	q = dup_exact(z.data, z.len);
	CHECK(decode_all(q, z.len, err, sizeof err) == 0);
	free(q);
	buf_free(&z);

	free(p);
	buf_free(&b);
}

/* ---- JSON ------------------------------------------------------------------ */

static void test_json(void)
{
	struct buf b = { 0 };
	encode_sample(&b, &hdr, NULL);
	uint8_t *p = dup_exact(b.data, b.len);
	char err[256] = "";
	char *json = json_of(1, p, b.len, err, sizeof err);
	CHECK(json != NULL);
	CHECK(json && json_balanced(json));
	CHECK_PREFIX(json, "\"source_id\":\"src-\xc3\xa4\",\"xid\":4000000000,");
	CHECK_HAS(json, "\"commit_lsn\":\"16/B374D848\",\"end_lsn\":\"16/B374D878\"");
	CHECK_HAS(json, "\"commit_time\":\"2023-11-14T22:13:20.123456Z\"");
	CHECK_HAS(json, "\"origin\":\"upstream\"");
	CHECK_HAS(json, "{\"op\":\"insert\",\"relation\":\"public.accounts\",\"key\":{\"id\":\"1\"},"
			"\"new\":{\"id\":\"1\",\"owner\":\"Zo\xc3\xab \xe2\x9c\x93 \xf0\x9f\x98\x80\",\"balance\":null}}");
	CHECK_HAS(json, "{\"op\":\"update\",\"relation\":\"public.accounts\",\"key\":{\"id\":\"1\"},"
			"\"new\":{\"id\":\"1\",\"owner\":{\"unchanged_toast\":true},\"balance\":\"10.50\"}}");
	/* the old key: "key" is the old one; NUL bytes are not valid text */
	CHECK_HAS(json, "{\"op\":\"update\",\"relation\":\"public.accounts\",\"key\":{\"id\":\"1\"},"
			"\"old_key\":{\"id\":\"1\"},\"new\":{\"id\":\"2\",\"owner\":{\"invalid_utf8\":true},"
			"\"balance\":\"\"}}");
	CHECK_HAS(json, "{\"op\":\"update\",\"relation\":\"public.audit_full\",\"key\":{\"id\":\"7\",\"note\":\"before\"},"
			"\"old\":{\"id\":\"7\",\"note\":\"before\"},\"new\":{\"id\":\"7\",\"note\":\"after\"}}");
	CHECK_HAS(json, "{\"op\":\"delete\",\"relation\":\"public.accounts\",\"key\":{\"id\":\"2\"},"
			"\"old_key\":{\"id\":\"2\"}}");
	CHECK_HAS(json, "{\"op\":\"delete\",\"relation\":\"public.audit_full\",\"key\":{\"id\":\"7\",\"note\":null},"
			"\"old\":{\"id\":\"7\",\"note\":null}}");
	CHECK_HAS(json, "{\"op\":\"truncate\",\"cascade\":true,\"restart_identity\":true,"
			"\"relations\":[\"public.accounts\",\"public.audit_full\"]}");
	CHECK_HAS(json, "{\"op\":\"truncate\",\"cascade\":false,\"restart_identity\":false,"
			"\"relations\":[\"public.audit_full\"]}");
	CHECK_HAS(json, "{\"op\":\"insert\",\"relation\":\"we\\\"ird.ta\\\\ble\",\"key\":{\"k\\tey\":"
			"\"q\\\"uote\\\\back\\nnl\"}");
	CHECK_HAS(json, "{\"op\":\"message\",\"transactional\":true,\"lsn\":\"16/B374D848\",\"prefix\":\"trellara.ddl\","
			"\"content\":\"{\\\"ddl\\\":\\\"ALTER TABLE plain ADD COLUMN x int\\\"}\"}");
	CHECK_HAS(json, "{\"op\":\"message\",\"transactional\":false,\"lsn\":\"0/2A\",\"prefix\":\"\",\"content\":null}");
	/* the same through env_write_json */
	char *text = NULL;
	size_t text_len = 0;
	FILE *mem = open_memstream(&text, &text_len);
	CHECK(env_write_json(mem, p, b.len, err, sizeof err) == 0);
	fclose(mem);
	CHECK(text && json && strcmp(text, json) == 0);
	free(text);

	/* A chunk: u32 index, then an envelope. */
	struct buf ch = { 0 };
	buf_put_u32(&ch, 7);
	buf_put(&ch, b.data, b.len);
	uint8_t *cp = dup_exact(ch.data, ch.len);
	char *cj = json_of(2, cp, ch.len, err, sizeof err);
	CHECK_PREFIX(cj, "\"chunk_index\":7,");
	CHECK(cj && json && strcmp(cj + strlen("\"chunk_index\":7,"), json) == 0);
	free(cj);
	free(cp);
	buf_free(&ch);
	free(json);

	/* Times before 1970 and sub-second parts print as valid timestamps. */
	struct env_header_fields h2 = hdr;
	h2.commit_time_us = -1;
	struct buf e = { 0 };
	env_encode_header(&e, &h2);
	buf_put_u32(&e, 0);
	buf_put_u32(&e, 0);
	json = json_of(1, e.data, e.len, err, sizeof err);
	CHECK_HAS(json, "\"commit_time\":\"1969-12-31T23:59:59.999999Z\"");
	free(json);
	buf_free(&e);
	h2.commit_time_us = 0;
	env_encode_header(&e, &h2);
	buf_put_u32(&e, 0);
	buf_put_u32(&e, 0);
	json = json_of(1, e.data, e.len, err, sizeof err);
	CHECK_HAS(json, "\"commit_time\":\"1970-01-01T00:00:00.000000Z\"");
	free(json);
	buf_free(&e);
	/* the extremes print something, without overflow */
	const int64_t extremes[] = { INT64_MIN, INT64_MAX, -1000000, 999999 };
	const char *want[] = { ".224192Z\"", ".775807Z\"", "1969-12-31T23:59:59.000000Z", "1970-01-01T00:00:00.999999Z" };
	for (int i = 0; i < 4; i++) {
		h2.commit_time_us = extremes[i];
		env_encode_header(&e, &h2);
		buf_put_u32(&e, 0);
		buf_put_u32(&e, 0);
		json = json_of(1, e.data, e.len, err, sizeof err);
		CHECK_HAS(json, want[i]);
		free(json);
		buf_free(&e);
	}

	free(p);
	buf_free(&b);
}

/* ---- truncations ------------------------------------------------------------ */

static void test_truncations(void)
{
	struct buf b = { 0 };
	encode_sample(&b, &hdr, NULL);
	int wrong = 0, unnamed = 0, json_wrong = 0;
	for (size_t len = 0; len < b.len; len++) {
		uint8_t *p = dup_exact(b.data, len);
		char err[256] = "";
		if (decode_all(p, len, err, sizeof err) != -1)
			wrong++;
		else if (strncmp(err, "envelope: ", 10) != 0 || !strstr(err, " at byte "))
			unnamed++;
		char jerr[256] = "";
		char *json = json_of(1, p, len, jerr, sizeof jerr);
		if (json || strcmp(jerr, err) != 0)
			json_wrong++;
		free(json);
		/* the same bytes as a chunk */
		uint8_t *cp = xmalloc(len + 4);
		memset(cp, 0, 4);
		if (len)
			memcpy(cp + 4, b.data, len);
		json = json_of(2, cp, len + 4, jerr, sizeof jerr);
		if (json)
			json_wrong++;
		free(json);
		free(cp);
		free(p);
	}
	CHECK(wrong == 0);
	CHECK(unnamed == 0);
	CHECK(json_wrong == 0);
	/* chunk payloads shorter than the index */
	for (size_t len = 0; len < 4; len++) {
		uint8_t *p = dup_exact((const uint8_t *)"\0\0\0\1", len);
		char err[256] = "";
		char *json = json_of(2, p, len, err, sizeof err);
		CHECK(json == NULL);
		CHECK(strstr(err, "truncated") != NULL);
		struct env_frame_summary s;
		CHECK(env_frame_summary(2, p, len, &s, err, sizeof err) == -1);
		free(json);
		free(p);
	}
	buf_free(&b);
}

/* ---- corruptions ------------------------------------------------------------ */

/* A small envelope: one relation of 3 columns, the given raw change bytes
 * and change count. */
static void small_envelope(struct buf *b, uint8_t replident, uint8_t col_flags, uint32_t n_changes,
			   const uint8_t *change_bytes, size_t change_len)
{
	struct env_header_fields h = { .source_id = "s", .xid = 9, .commit_lsn = 16, .end_lsn = 32 };
	struct env_column cols[3] = { COL("a", 23, -1, true), COL("b", 25, -1, false), COL("c", 25, -1, false) };
	env_encode_header(b, &h);
	buf_put_u32(b, 1);
	size_t at = b->len;
	env_encode_relation(b, 1, "p", "t", replident, 3, cols);
	/* column flags byte of the first column: after oid, schema, name, replident, count */
	b->data[at + 4 + 3 + 3 + 1 + 2] = col_flags;
	buf_put_u32(b, n_changes);
	buf_put(b, change_bytes, change_len);
}

static void expect_error(const uint8_t *bytes, size_t len, const char *needle, int line)
{
	uint8_t *p = dup_exact(bytes, len);
	char err[256] = "";
	long n = decode_all(p, len, err, sizeof err);
	unit_checks++;
	if (n != -1 || !strstr(err, needle) || strncmp(err, "envelope: ", 10) != 0) {
		unit_failures++;
		fprintf(stderr, "%s:%d: expected an error with \"%s\", got %ld changes, \"%s\"\n", __FILE__, line,
			needle, n, err);
	}
	char jerr[256] = "";
	char *json = json_of(1, p, len, jerr, sizeof jerr);
	CHECK(json == NULL && strcmp(jerr, err) == 0);
	free(json);
	free(p);
}

#define EXPECT_ERROR(buf, needle) expect_error((buf).data, (buf).len, (needle), __LINE__)

static void test_corruptions(void)
{
	/* a valid insert of 3 columns, to start from */
	static const uint8_t insert[] = { 'I', 0, 0, 0, 0, 0, 3, 't', 0, 0, 0, 1, '5', 'n', 'u' };
	struct buf b = { 0 };
	small_envelope(&b, 'd', 1, 1, insert, sizeof insert);
	uint8_t *p = dup_exact(b.data, b.len);
	CHECK(decode_all(p, b.len, NULL, 0) == 1);
	free(p);
	buf_free(&b);

	/* version */
	small_envelope(&b, 'd', 1, 1, insert, sizeof insert);
	b.data[0] = 2;
	EXPECT_ERROR(b, "unsupported version 2 at byte 1");
	b.data[0] = 0;
	EXPECT_ERROR(b, "unsupported version 0");
	buf_free(&b);

	/* replica identity, column flags */
	small_envelope(&b, 'x', 1, 1, insert, sizeof insert);
	EXPECT_ERROR(b, "bad replica identity 120");
	buf_free(&b);
	small_envelope(&b, 0, 1, 1, insert, sizeof insert);
	EXPECT_ERROR(b, "bad replica identity 0");
	buf_free(&b);
	small_envelope(&b, 'd', 2, 1, insert, sizeof insert);
	EXPECT_ERROR(b, "bad column flags 2");
	buf_free(&b);

	/* relation index out of range */
	uint8_t ch[64];
	memcpy(ch, insert, sizeof insert);
	ch[4] = 1;
	small_envelope(&b, 'd', 1, 1, ch, sizeof insert);
	EXPECT_ERROR(b, "relation index 1 out of range (1 relations)");
	buf_free(&b);
	ch[1] = 0x80;
	small_envelope(&b, 'd', 1, 1, ch, sizeof insert);
	EXPECT_ERROR(b, "relation index 2147483649 out of range");
	buf_free(&b);

	/* tuple column count mismatch: 2 and 4 columns for a relation of 3 */
	static const uint8_t two[] = { 'I', 0, 0, 0, 0, 0, 2, 'n', 'n' };
	small_envelope(&b, 'd', 1, 1, two, sizeof two);
	EXPECT_ERROR(b, "tuple has 2 columns, its relation 3");
	buf_free(&b);
	static const uint8_t four[] = { 'I', 0, 0, 0, 0, 0, 4, 'n', 'n', 'n', 'n' };
	small_envelope(&b, 'd', 1, 1, four, sizeof four);
	EXPECT_ERROR(b, "tuple has 4 columns, its relation 3");
	buf_free(&b);
	/* ... also in an update's old tuple */
	static const uint8_t upd_old[] = { 'U', 0, 0, 0, 0, 'K', 0, 1, 'n', 0, 3, 'n', 'n', 'n' };
	small_envelope(&b, 'd', 1, 1, upd_old, sizeof upd_old);
	EXPECT_ERROR(b, "tuple has 1 columns, its relation 3");
	buf_free(&b);

	/* unknown op */
	memcpy(ch, insert, sizeof insert);
	ch[0] = 'X';
	small_envelope(&b, 'd', 1, 1, ch, sizeof insert);
	EXPECT_ERROR(b, "unknown change op 0x58");
	buf_free(&b);
	ch[0] = 0;
	small_envelope(&b, 'd', 1, 1, ch, sizeof insert);
	EXPECT_ERROR(b, "unknown change op 0x00");
	buf_free(&b);

	/* bad value kind ('b' binary is not an envelope kind) */
	memcpy(ch, insert, sizeof insert);
	ch[sizeof insert - 1] = 'b';
	small_envelope(&b, 'd', 1, 1, ch, sizeof insert);
	EXPECT_ERROR(b, "bad value kind 98");
	buf_free(&b);

	/* old tuple kind, delete without old tuple */
	static const uint8_t upd_bad[] = { 'U', 0, 0, 0, 0, 'Z', 0, 3, 'n', 'n', 'n' };
	small_envelope(&b, 'd', 1, 1, upd_bad, sizeof upd_bad);
	EXPECT_ERROR(b, "bad old tuple kind 90");
	buf_free(&b);
	static const uint8_t del_none[] = { 'D', 0, 0, 0, 0, 0, 0, 3, 'n', 'n', 'n' };
	small_envelope(&b, 'd', 1, 1, del_none, sizeof del_none);
	EXPECT_ERROR(b, "delete without an old tuple");
	buf_free(&b);

	/* truncate: flags, relation index, count */
	static const uint8_t tr_flags[] = { 'T', 4, 0, 0, 0, 1, 0, 0, 0, 0 };
	small_envelope(&b, 'd', 1, 1, tr_flags, sizeof tr_flags);
	EXPECT_ERROR(b, "bad truncate flags 4");
	buf_free(&b);
	static const uint8_t tr_rel[] = { 'T', 3, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1 };
	small_envelope(&b, 'd', 1, 1, tr_rel, sizeof tr_rel);
	EXPECT_ERROR(b, "relation index 1 out of range");
	buf_free(&b);
	static const uint8_t tr_count[] = { 'T', 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0 };
	small_envelope(&b, 'd', 1, 1, tr_count, sizeof tr_count);
	EXPECT_ERROR(b, "truncate of 4294967295 relations");
	buf_free(&b);

	/* a value or message longer than the envelope */
	static const uint8_t long_val[] = { 'I', 0, 0, 0, 0, 0, 3, 't', 0xff, 0xff, 0xff, 0xf0, 'x', 'n', 'n' };
	small_envelope(&b, 'd', 1, 1, long_val, sizeof long_val);
	EXPECT_ERROR(b, "truncated: value of 4294967280 bytes");
	buf_free(&b);
	static const uint8_t long_msg[] = { 'M', 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 'p', 0x7f, 0xff, 0xff, 0xff, 'x' };
	small_envelope(&b, 'd', 1, 1, long_msg, sizeof long_msg);
	EXPECT_ERROR(b, "truncated: message of 2147483647 bytes");
	buf_free(&b);

	/* trailing bytes after the last change; fewer changes than announced */
	uint8_t ins2[sizeof insert + 1];
	memcpy(ins2, insert, sizeof insert);
	ins2[sizeof insert] = 0;
	small_envelope(&b, 'd', 1, 1, ins2, sizeof ins2);
	EXPECT_ERROR(b, "1 trailing bytes after 1 changes");
	buf_free(&b);
	small_envelope(&b, 'd', 1, 0, insert, sizeof insert);
	EXPECT_ERROR(b, "15 trailing bytes after 0 changes");
	buf_free(&b);
	small_envelope(&b, 'd', 1, 2, insert, sizeof insert);
	EXPECT_ERROR(b, "truncated: need 1 byte for change op");
	buf_free(&b);

	/* counts that cannot fit: relations, columns */
	struct env_header_fields h = { .source_id = "s" };
	env_encode_header(&b, &h);
	buf_put_u32(&b, 0xffffffffU);
	buf_put_u32(&b, 0);
	EXPECT_ERROR(b, "4294967295 relations cannot fit");
	buf_free(&b);
	env_encode_header(&b, &h);
	buf_put_u32(&b, 1);
	buf_put_u32(&b, 1);
	buf_put_str(&b, "p", 1);
	buf_put_str(&b, "t", 1);
	buf_put_u8(&b, 'd');
	buf_put_u16(&b, 1600);
	buf_put_u32(&b, 0);
	EXPECT_ERROR(b, "1600 columns cannot fit");
	buf_free(&b);
}

/* ---- other frame payloads ----------------------------------------------------- */

static void check_all_truncations_fail(int type, const struct buf *b, int line)
{
	int bad = 0;
	for (size_t len = 0; len < b->len; len++) {
		uint8_t *p = dup_exact(b->data, len);
		struct env_frame_summary s;
		char err[256] = "";
		if (env_frame_summary(type, p, len, &s, err, sizeof err) != -1 || strncmp(err, "envelope: ", 10) != 0) {
			bad++;
		}
		char *json = json_of(type, p, len, err, sizeof err);
		if (json)
			bad++;
		free(json);
		if (type == 3) {
			struct env_manifest m;
			if (env_decode_manifest(p, len, &m, err, sizeof err) != -1)
				bad++;
		}
		free(p);
	}
	/* one trailing byte */
	uint8_t *p = xmalloc(b->len + 1);
	memcpy(p, b->data, b->len);
	p[b->len] = 0;
	struct env_frame_summary s;
	char err[256] = "";
	/* (a pending chunk's summary reads its envelope's head only: its
	 * changes, and bytes after them, are the decoder's, as a chunk's) */
	if (type != 7 &&
	    (env_frame_summary(type, p, b->len + 1, &s, err, sizeof err) != -1 || !strstr(err, "1 trailing bytes")))
		bad++;
	/* a wrong version (a pending chunk's envelope after its run and sequence number) */
	p[type == 7 ? 12 : 0] = 9;
	if (env_frame_summary(type, p, b->len, &s, err, sizeof err) != -1 || !strstr(err, "unsupported version 9"))
		bad++;
	free(p);
	if (bad)
		fprintf(stderr, "%s:%d: %d truncated or damaged payloads of type %d accepted\n", __FILE__, line, bad, type);
	CHECK(bad == 0);
}

static void test_other_frames(void)
{
	char err[256] = "";
	struct env_frame_summary s;

	/* watermark */
	struct buf w = { 0 };
	env_encode_watermark(&w, "src-1", 0x16B374D848ULL, 1700000000000000LL);
	uint8_t *p = dup_exact(w.data, w.len);
	CHECK(env_frame_summary(5, p, w.len, &s, err, sizeof err) == 0);
	CHECK(same_str(s.source_id, s.source_id_len, "src-1"));
	CHECK(!s.has_xid);
	CHECK(s.lsn == 0x16B374D848ULL);
	char *json = json_of(5, p, w.len, err, sizeof err);
	CHECK_STR(json, "\"source_id\":\"src-1\",\"lsn\":\"16/B374D848\"");
	free(json);
	free(p);
	check_all_truncations_fail(5, &w, __LINE__);
	buf_free(&w);

	/* ddl */
	struct buf dd = { 0 };
	env_encode_ddl(&dd, "src-1", 755, 0x19617F8ULL, 0x19617C8ULL, "trellara.ddl", (const uint8_t *)ddl_text,
		       (uint32_t)strlen(ddl_text));
	p = dup_exact(dd.data, dd.len);
	CHECK(env_frame_summary(6, p, dd.len, &s, err, sizeof err) == 0);
	CHECK(same_str(s.source_id, s.source_id_len, "src-1"));
	CHECK(s.has_xid && s.xid == 755);
	CHECK(s.commit_lsn == 0x19617F8ULL);
	CHECK(s.lsn == 0x19617C8ULL);
	json = json_of(6, p, dd.len, err, sizeof err);
	CHECK_STR(json, "\"source_id\":\"src-1\",\"xid\":755,\"commit_lsn\":\"0/19617F8\","
			"\"message_lsn\":\"0/19617C8\",\"prefix\":\"trellara.ddl\","
			"\"ddl\":\"{\\\"ddl\\\":\\\"ALTER TABLE plain ADD COLUMN x int\\\"}\"");
	free(json);
	free(p);
	check_all_truncations_fail(6, &dd, __LINE__);
	buf_free(&dd);
	/* ddl text that is not UTF-8 prints as null */
	env_encode_ddl(&dd, "s", 1, 2, 3, "trellara.ddl", (const uint8_t *)bin_content, sizeof bin_content);
	json = json_of(6, dd.data, dd.len, err, sizeof err);
	CHECK_HAS(json, "\"ddl\":null");
	free(json);
	buf_free(&dd);

	/* manifest */
	struct env_header_fields h = { .source_id = "src-1", .xid = 759, .commit_lsn = 0x1A1A598ULL,
				       .end_lsn = 0x1A1A5D0ULL, .commit_time_us = 1700000000000001LL };
	struct env_manifest_chunk chunks[3] = { { 0xDEADBEEFU, 100, 0 }, { 0x01020304U, 100, 0 }, { 0U, 10, 0 } };
	const char *tables[2] = { "public.bulk", "other.t" };
	struct buf m = { 0 };
	env_encode_manifest(&m, &h, 3, 210, chunks, 2, tables);
	p = dup_exact(m.data, m.len);
	struct env_manifest dm;
	CHECK(env_decode_manifest(p, m.len, &dm, err, sizeof err) == 0);
	CHECK(same_str(dm.source_id, dm.source_id_len, "src-1"));
	CHECK(dm.xid == 759 && dm.commit_lsn == 0x1A1A598ULL && dm.end_lsn == 0x1A1A5D0ULL);
	CHECK(dm.commit_time_us == 1700000000000001LL);
	CHECK(dm.chunk_count == 3 && dm.total_changes == 210);
	for (uint32_t i = 0; i < 3 && i < dm.chunk_count; i++)
		CHECK(dm.chunks[i].crc == chunks[i].crc && dm.chunks[i].changes == chunks[i].changes);
	CHECK(dm.n_tables == 2);
	for (uint32_t i = 0; i < 2 && i < dm.n_tables; i++)
		CHECK(same_str(dm.tables[i], dm.table_lens[i], tables[i]));
	env_manifest_free(&dm);
	CHECK(env_frame_summary(3, p, m.len, &s, err, sizeof err) == 0);
	CHECK(s.has_xid && s.xid == 759 && s.commit_lsn == 0x1A1A598ULL && s.end_lsn == 0x1A1A5D0ULL);
	CHECK(s.chunk_count == 3);
	json = json_of(3, p, m.len, err, sizeof err);
	CHECK_STR(json, "\"source_id\":\"src-1\",\"xid\":759,\"commit_lsn\":\"0/1A1A598\",\"end_lsn\":\"0/1A1A5D0\","
			"\"chunk_count\":3,\"total_changes\":210,\"chunks\":[{\"crc\":\"0xdeadbeef\",\"changes\":100},"
			"{\"crc\":\"0x01020304\",\"changes\":100},{\"crc\":\"0x00000000\",\"changes\":10}],"
			"\"tables\":[\"public.bulk\",\"other.t\"]");
	free(json);
	free(p);
	check_all_truncations_fail(3, &m, __LINE__);
	/* a manifest announcing more chunks than fit */
	buf_free(&m);
	env_encode_manifest(&m, &h, 0, 0, NULL, 0, NULL);
	size_t count_at = 1 + 2 + 5 + 4 + 8 + 8 + 8;
	m.data[count_at] = 0x10;
	CHECK(env_decode_manifest(m.data, m.len, &dm, err, sizeof err) == -1);
	CHECK(strstr(err, "chunks cannot fit") != NULL);
	buf_free(&m);

	/* manifest version 2: pending chunks listed by stream offset */
	struct env_manifest_chunk by_offset[2] = { { 0xDEADBEEFU, 7, 41 }, { 0x01020304U, 3, 0x100000001ULL } };
	env_encode_manifest_by_offset(&m, &h, 2, 10, by_offset, 2, tables);
	p = dup_exact(m.data, m.len);
	CHECK(p[0] == 2);
	CHECK(env_decode_manifest(p, m.len, &dm, err, sizeof err) == 0);
	CHECK(dm.by_offset && dm.xid == 759 && dm.commit_lsn == 0x1A1A598ULL && dm.chunk_count == 2 && dm.total_changes == 10);
	for (uint32_t i = 0; i < 2 && i < dm.chunk_count; i++)
		CHECK(dm.chunks[i].crc == by_offset[i].crc && dm.chunks[i].changes == by_offset[i].changes &&
		      dm.chunks[i].offset == by_offset[i].offset);
	CHECK(dm.n_tables == 2 && same_str(dm.tables[1], dm.table_lens[1], "other.t"));
	env_manifest_free(&dm);
	json = json_of(3, p, m.len, err, sizeof err);
	CHECK_HAS(json, "\"chunks\":[{\"offset\":41,\"crc\":\"0xdeadbeef\",\"changes\":7},"
			"{\"offset\":4294967297,\"crc\":\"0x01020304\",\"changes\":3}]");
	free(json);
	free(p);
	check_all_truncations_fail(3, &m, __LINE__);
	/* a version 1 reader's layout is not taken for version 2, nor an unknown version */
	m.data[0] = 3;
	CHECK(env_decode_manifest(m.data, m.len, &dm, err, sizeof err) == -1 && strstr(err, "unsupported version 3"));
	m.data[0] = 1;
	CHECK(env_decode_manifest(m.data, m.len, &dm, err, sizeof err) == -1);
	buf_free(&m);

	/* pending chunk: run, sequence number, an envelope with no commit yet */
	struct buf pc = { 0 };
	env_encode_pending_head(&pc, 0x0123456789ABCDEFULL, 5);
	CHECK(pc.len == ENV_PENDING_HEAD_SIZE);
	struct env_header_fields ph = { .source_id = "src-1", .xid = 760 };
	env_encode_header(&pc, &ph);
	buf_put_u32(&pc, 0); /* relations */
	buf_put_u32(&pc, 0); /* changes */
	p = dup_exact(pc.data, pc.len);
	CHECK(env_frame_summary(7 /* pending_chunk */, p, pc.len, &s, err, sizeof err) == 0);
	CHECK(s.has_xid && s.xid == 760 && s.commit_lsn == 0 && s.run == 0x0123456789ABCDEFULL && s.chunk_index == 5);
	CHECK(same_str(s.source_id, s.source_id_len, "src-1"));
	json = json_of(7 /* pending_chunk */, p, pc.len, err, sizeof err);
	CHECK_HAS(json, "\"run\":81985529216486895,\"sequence\":5,");
	CHECK_HAS(json, "\"xid\":760");
	free(json);
	free(p);
	check_all_truncations_fail(7, &pc, __LINE__);
	buf_free(&pc);

	/* pending abort: the transaction's pending chunks of that run are never listed */
	env_encode_pending_abort(&pc, "src-1", 760, 0xFEDCBA9876543210ULL);
	p = dup_exact(pc.data, pc.len);
	CHECK(env_frame_summary(8, p, pc.len, &s, err, sizeof err) == 0);
	CHECK(s.has_xid && s.xid == 760 && s.run == 0xFEDCBA9876543210ULL && same_str(s.source_id, s.source_id_len, "src-1"));
	json = json_of(8, p, pc.len, err, sizeof err);
	CHECK_STR(json, "\"source_id\":\"src-1\",\"xid\":760,\"run\":18364758544493064720");
	free(json);
	free(p);
	check_all_truncations_fail(8, &pc, __LINE__);
	buf_free(&pc);

	/* commit marker */
	struct buf c = { 0 };
	env_encode_commit_marker(&c, "src-1", 759, 0x1A1A598ULL, 0x1A1A5D0ULL, 3, 0xCAFEF00DU);
	p = dup_exact(c.data, c.len);
	CHECK(env_frame_summary(4, p, c.len, &s, err, sizeof err) == 0);
	CHECK(same_str(s.source_id, s.source_id_len, "src-1"));
	CHECK(s.has_xid && s.xid == 759 && s.commit_lsn == 0x1A1A598ULL && s.end_lsn == 0x1A1A5D0ULL);
	CHECK(s.chunk_count == 3 && s.manifest_crc == 0xCAFEF00DU);
	json = json_of(4, p, c.len, err, sizeof err);
	CHECK_STR(json, "\"source_id\":\"src-1\",\"xid\":759,\"commit_lsn\":\"0/1A1A598\",\"end_lsn\":\"0/1A1A5D0\","
			"\"chunk_count\":3,\"manifest_crc\":\"0xcafef00d\"");
	free(json);
	free(p);
	check_all_truncations_fail(4, &c, __LINE__);
	buf_free(&c);

	/* txn and chunk summaries */
	struct buf t = { 0 };
	encode_sample(&t, &hdr, NULL);
	CHECK(env_frame_summary(1, t.data, t.len, &s, err, sizeof err) == 0);
	CHECK(same_str(s.source_id, s.source_id_len, hdr.source_id));
	CHECK(s.has_xid && s.xid == hdr.xid && s.commit_lsn == hdr.commit_lsn && s.end_lsn == hdr.end_lsn);
	struct buf k = { 0 };
	buf_put_u32(&k, 0x01000002U);
	buf_put(&k, t.data, t.len);
	CHECK(env_frame_summary(2, k.data, k.len, &s, err, sizeof err) == 0);
	CHECK(s.chunk_index == 0x01000002U && s.xid == hdr.xid && s.commit_lsn == hdr.commit_lsn);
	k.data[4] = 3; /* version */
	CHECK(env_frame_summary(2, k.data, k.len, &s, err, sizeof err) == -1);
	CHECK(strstr(err, "unsupported version 3") != NULL);
	buf_free(&k);
	buf_free(&t);

	/* unknown frame types */
	static const uint8_t one[] = { 1 };
	CHECK(env_frame_summary(0, one, 1, &s, err, sizeof err) == -1);
	CHECK(strstr(err, "unknown frame type 0") != NULL);
	CHECK(env_frame_summary(9, one, 1, &s, err, sizeof err) == -1);
	CHECK(strstr(err, "unknown frame type 9") != NULL);
	json = json_of(9, one, 1, err, sizeof err);
	CHECK(json == NULL);
	free(json);
}

/* ---- env_change_length ---------------------------------------------------------- */

static void test_change_length(void)
{
	struct buf b = { 0 };
	size_t at[N_CHANGES + 1];
	encode_sample(&b, &hdr, at);
	uint16_t ncols[N_RELS];
	for (int i = 0; i < N_RELS; i++)
		ncols[i] = rels[i].ncols;
	int wrong_complete = 0, wrong_incomplete = 0;
	for (size_t i = 0; i < N_CHANGES; i++) {
		size_t want = at[i + 1] - at[i];
		/* exactly the change, and the change with everything after it */
		uint8_t *p = dup_exact(b.data + at[i], want);
		size_t len = 0;
		if (env_change_length(p, want, ncols, N_RELS, &len) != 1 || len != want)
			wrong_complete++;
		free(p);
		len = 0;
		p = dup_exact(b.data + at[i], b.len - at[i]);
		if (env_change_length(p, b.len - at[i], ncols, N_RELS, &len) != 1 || len != want)
			wrong_complete++;
		free(p);
		/* every prefix is incomplete, not malformed */
		for (size_t n = 0; n < want; n++) {
			p = dup_exact(b.data + at[i], n);
			int rc = env_change_length(p, n, ncols, N_RELS, &len);
			if (rc != 0) {
				fprintf(stderr, "change %zu (%c): prefix of %zu/%zu bytes gives %d\n", i, changes[i].op, n,
					want, rc);
				wrong_incomplete++;
			}
			free(p);
		}
	}
	CHECK(wrong_complete == 0);
	CHECK(wrong_incomplete == 0);

	/* malformed: unknown op, relation out of range, column count, value
	 * kind, old kind, truncate flags and relation */
	static const uint8_t unknown[] = { 'Q', 0, 0 };
	static const uint8_t out_of_range[] = { 'I', 0, 0, 0, 3, 0, 1, 'n' };
	static const uint8_t columns[] = { 'I', 0, 0, 0, 2, 0, 2, 'n', 'n' };
	static const uint8_t kind[] = { 'I', 0, 0, 0, 2, 0, 1, 'x' };
	static const uint8_t old_kind[] = { 'D', 0, 0, 0, 2, 'Y', 0, 1, 'n' };
	static const uint8_t tflags[] = { 'T', 9, 0, 0, 0, 0 };
	static const uint8_t trel[] = { 'T', 0, 0, 0, 0, 1, 0, 0, 0, 3 };
	const struct {
		const uint8_t *p;
		size_t len;
	} bad[] = { { unknown, sizeof unknown }, { out_of_range, sizeof out_of_range }, { columns, sizeof columns },
		    { kind, sizeof kind }, { old_kind, sizeof old_kind }, { tflags, sizeof tflags },
		    { trel, sizeof trel } };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		uint8_t *p = dup_exact(bad[i].p, bad[i].len);
		size_t len = 12345;
		int rc = env_change_length(p, bad[i].len, ncols, N_RELS, &len);
		if (rc != -1)
			fprintf(stderr, "malformed change %zu: %d\n", i, rc);
		CHECK(rc == -1);
		CHECK(len == 12345);
		free(p);
	}
	/* no relations at all: a row change is malformed, a message fine */
	uint8_t *p = dup_exact(b.data + at[0], at[1] - at[0]);
	size_t len = 0;
	CHECK(env_change_length(p, at[1] - at[0], NULL, 0, &len) == -1);
	free(p);
	size_t mi = 8; /* the transactional message */
	CHECK(changes[mi].op == 'M');
	p = dup_exact(b.data + at[mi], at[mi + 1] - at[mi]);
	CHECK(env_change_length(p, at[mi + 1] - at[mi], NULL, 0, &len) == 1 && len == at[mi + 1] - at[mi]);
	free(p);
	/* an empty window is incomplete */
	CHECK(env_change_length(b.data, 0, ncols, N_RELS, &len) == 0);
	buf_free(&b);
}

/* ---- buf primitives ------------------------------------------------------------ */

static void test_buf(void)
{
	struct buf b = { 0 };
	buf_put_u8(&b, 0x01);
	buf_put_u16(&b, 0x0203);
	buf_put_u32(&b, 0x04050607U);
	buf_put_u64(&b, 0x08090a0b0c0d0e0fULL);
	buf_put_str(&b, "xy", 2);
	buf_put(&b, NULL, 0);
	static const uint8_t want[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 2, 'x', 'y' };
	CHECK(same_bytes(b.data, b.len, want, sizeof want));
	/* growth across many reallocations keeps the bytes */
	for (uint32_t i = 0; i < 100000; i++)
		buf_put_u32(&b, i);
	CHECK(b.len == sizeof want + 400000);
	CHECK(b.data[sizeof want + 4 * 99999 + 3] == (uint8_t)99999);
	CHECK(b.cap >= b.len);
	buf_free(&b);
	CHECK(b.data == NULL && b.len == 0 && b.cap == 0);
	/* a str longer than u16 is cut at 65535 bytes, consistently */
	char *big = xmalloc(70000);
	memset(big, 'a', 70000);
	buf_put_str(&b, big, 70000);
	CHECK(b.len == 2 + 65535);
	CHECK(b.data[0] == 0xff && b.data[1] == 0xff);
	free(big);
	buf_free(&b);
}

int main(void)
{
	test_buf();
	test_round_trip();
	test_json();
	test_truncations();
	test_corruptions();
	test_other_frames();
	test_change_length();
	return unit_done("envelope");
}
