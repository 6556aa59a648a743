/*
 * fuzz_envelope.c - libFuzzer target for the envelope codec (envelope.h):
 * the validating decoder, env_change_length, the frame summaries, the
 * manifest decoder and the JSON writer of every frame type (build and run:
 * tests/fuzz/run.sh [seconds] envelope).
 *
 * Input: one byte choosing the frame type (low 3 bits: 1 txn ... 6 ddl;
 * 0 and 7 are unknown types), then the payload.  The payload always goes
 * through the envelope decoder too (after the 4-byte index for a chunk).
 *
 * Oracles beyond "no crash, no leak, no UB":
 *  - a decoded envelope encodes back to exactly the bytes it came from;
 *  - env_change_length agrees with env_decode_next on every change (same
 *    length, "incomplete" exactly for truncation errors), and a complete
 *    change minus its last byte is incomplete;
 *  - the JSON writer succeeds exactly when the decoder (or the summary)
 *    does, and what it writes nests correctly with no raw control bytes;
 *  - every error message is "envelope: ...".
 *
 * Built with -DENVELOPE_SEEDS instead, it is a program writing a seed
 * corpus (one file per frame type, made with the encoder) into argv[1].
 */
#include "trellara/envelope.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_OR_TRAP(cond)             \
	do {                            \
		if (!(cond))            \
			__builtin_trap(); \
	} while (0)

static bool json_balanced(const char *s, size_t len)
{
	char stack[256];
	size_t depth = 0;
	bool in_str = false;
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch < 0x20)
			return false;
		if (in_str) {
			if (ch == '\\') {
				if (i + 1 >= len)
					return false;
				i++;
			} else if (ch == '"') {
				in_str = false;
			}
			continue;
		}
		if (ch == '"') {
			in_str = true;
		} else if (ch == '{' || ch == '[') {
			if (depth == sizeof stack)
				return true; /* deeper than we track: no verdict */
			stack[depth++] = ch == '{' ? '}' : ']';
		} else if (ch == '}' || ch == ']') {
			if (depth == 0 || stack[--depth] != ch)
				return false;
		}
	}
	return !in_str && depth == 0;
}

static void put_tuple(struct buf *b, const struct env_tuple *t)
{
	buf_put_u16(b, t->n);
	for (uint16_t i = 0; i < t->n; i++) {
		buf_put_u8(b, t->values[i].kind);
		if (t->values[i].kind == ENV_TEXT) {
			buf_put_u32(b, t->values[i].len);
			buf_put(b, t->values[i].data, t->values[i].len);
		}
	}
}

static void put_change(struct buf *b, const struct env_change *c)
{
	buf_put_u8(b, c->op);
	switch (c->op) {
	case ENV_INSERT:
		buf_put_u32(b, c->relation);
		put_tuple(b, &c->new_tuple);
		break;
	case ENV_UPDATE:
	case ENV_DELETE:
		buf_put_u32(b, c->relation);
		buf_put_u8(b, c->old_kind);
		if (c->old_kind)
			put_tuple(b, &c->old_tuple);
		if (c->op == ENV_UPDATE)
			put_tuple(b, &c->new_tuple);
		break;
	case ENV_TRUNCATE:
		buf_put_u8(b, c->truncate_flags);
		buf_put_u32(b, c->n_truncate);
		for (uint32_t i = 0; i < c->n_truncate; i++)
			buf_put_u32(b, c->truncate_relations[i]);
		break;
	case ENV_MESSAGE:
		buf_put_u8(b, c->message_flags);
		buf_put_u64(b, c->message_lsn);
		buf_put_str(b, c->message_prefix, c->message_prefix_len);
		buf_put_u32(b, c->message_len);
		buf_put(b, c->message_content, c->message_len);
		break;
	default:
		__builtin_trap();
	}
}

/* Decode p as an envelope with every oracle; true if it all decoded. */
static bool check_envelope(const uint8_t *p, size_t len)
{
	struct env_decoder d;
	struct buf re = { 0 };
	bool ok = false;
	uint16_t *ncols = NULL;
	if (env_decode_begin(&d, p, len) < 0) {
		CHECK_OR_TRAP(strncmp(d.error, "envelope: ", 10) == 0);
		goto out;
	}
	const struct env_header *h = &d.header;
	CHECK_OR_TRAP(h->version == ENVELOPE_VERSION);
	/* the header and relations, re-encoded */
	buf_put_u8(&re, h->version);
	buf_put_str(&re, h->source_id, h->source_id_len);
	buf_put_u32(&re, h->xid);
	buf_put_u64(&re, h->commit_lsn);
	buf_put_u64(&re, h->end_lsn);
	buf_put_u64(&re, (uint64_t)h->commit_time_us);
	buf_put_str(&re, h->origin, h->origin_len);
	buf_put_u64(&re, h->origin_lsn);
	buf_put_u32(&re, h->n_relations);
	ncols = malloc((h->n_relations ? h->n_relations : 1) * sizeof *ncols);
	CHECK_OR_TRAP(ncols != NULL);
	for (uint32_t i = 0; i < h->n_relations; i++) {
		const struct env_relation *r = &h->relations[i];
		ncols[i] = r->n_columns;
		buf_put_u32(&re, r->oid);
		buf_put_str(&re, r->schema, r->schema_len);
		buf_put_str(&re, r->name, r->name_len);
		buf_put_u8(&re, r->replident);
		buf_put_u16(&re, r->n_columns);
		for (uint16_t c = 0; c < r->n_columns; c++) {
			buf_put_u8(&re, r->columns[c].key ? 1 : 0);
			buf_put_str(&re, r->columns[c].name, r->columns[c].name_len);
			buf_put_u32(&re, r->columns[c].type_oid);
			buf_put_u32(&re, (uint32_t)r->columns[c].typmod);
		}
	}
	buf_put_u32(&re, h->n_changes);
	CHECK_OR_TRAP(re.len == d.pos && memcmp(re.data, p, re.len) == 0);
	for (;;) {
		size_t at = d.pos;
		bool change_expected = d.changes_read < h->n_changes;
		size_t clen = 0;
		int lr = change_expected ? env_change_length(p + at, len - at, ncols, h->n_relations, &clen) : 0;
		const struct env_change *c;
		int step = env_decode_next(&d, &c);
		if (step == 1) {
			size_t want = d.pos - at;
			CHECK_OR_TRAP(lr == 1 && clen == want);
			size_t short_len = 0;
			CHECK_OR_TRAP(env_change_length(p + at, want - 1, ncols, h->n_relations, &short_len) == 0);
			put_change(&re, c);
			CHECK_OR_TRAP(re.len == d.pos && memcmp(re.data, p, re.len) == 0);
			continue;
		}
		if (step < 0) {
			CHECK_OR_TRAP(strncmp(d.error, "envelope: ", 10) == 0);
			if (change_expected)
				CHECK_OR_TRAP(lr == (strstr(d.error, "truncated") ? 0 : -1));
		} else {
			CHECK_OR_TRAP(d.pos == len && re.len == len);
			ok = true;
		}
		break;
	}
out:
	free(ncols);
	buf_free(&re);
	env_decoder_free(&d);
	return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	int type = data[0] & 15;
	const uint8_t *p = data + 1;
	size_t len = size - 1;

	bool env_ok = check_envelope(p, len);
	bool chunk_ok = len >= 4 && check_envelope(p + 4, len - 4);
	/* a pending chunk: capture run (8 bytes), sequence (4), envelope */
	bool pending_ok = len >= ENV_PENDING_HEAD_SIZE && check_envelope(p + ENV_PENDING_HEAD_SIZE, len - ENV_PENDING_HEAD_SIZE);

	char err[256] = "";
	struct env_frame_summary s;
	int srs = env_frame_summary(type, p, len, &s, err, sizeof err);
	if (srs < 0)
		CHECK_OR_TRAP(strncmp(err, "envelope: ", 10) == 0);
	else if (s.source_id_len)
		CHECK_OR_TRAP((const uint8_t *)s.source_id >= p && (const uint8_t *)s.source_id + s.source_id_len <= p + len);

	struct env_manifest m;
	if (env_decode_manifest(p, len, &m, err, sizeof err) == 0) {
		CHECK_OR_TRAP(m.n_tables == 0 || m.tables != NULL);
		for (uint32_t i = 0; i < m.n_tables; i++)
			CHECK_OR_TRAP((const uint8_t *)m.tables[i] >= p && (const uint8_t *)m.tables[i] + m.table_lens[i] <= p + len);
		env_manifest_free(&m);
	} else {
		CHECK_OR_TRAP(strncmp(err, "envelope: ", 10) == 0);
	}

	char *text = NULL;
	size_t text_len = 0;
	FILE *out = open_memstream(&text, &text_len);
	if (!out)
		return 0;
	fputc('{', out);
	int rj = env_frame_write_json(out, type, p, len, err, sizeof err);
	fputc('}', out);
	fclose(out);
	if (rj == 0)
		CHECK_OR_TRAP(json_balanced(text, text_len));
	else
		CHECK_OR_TRAP(strncmp(err, "envelope: ", 10) == 0);
	switch (type) {
	case 1:
		CHECK_OR_TRAP((rj == 0) == env_ok);
		CHECK_OR_TRAP(!env_ok || srs == 0);
		break;
	case 2:
		CHECK_OR_TRAP((rj == 0) == chunk_ok);
		CHECK_OR_TRAP(!chunk_ok || srs == 0);
		break;
	case 3:
	case 4:
	case 5:
	case 6:
	case 8:
		CHECK_OR_TRAP((rj == 0) == (srs == 0));
		break;
	case 7:
		CHECK_OR_TRAP((rj == 0) == pending_ok);
		CHECK_OR_TRAP(!pending_ok || srs == 0);
		break;
	default:
		CHECK_OR_TRAP(rj < 0 && srs < 0);
	}
	free(text);
	return 0;
}

#ifdef ENVELOPE_SEEDS
/* ---- the seed corpus ------------------------------------------------------ */

static void write_seed(const char *dir, const char *name, int type, const struct buf *b)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f) {
		perror(path);
		exit(1);
	}
	fputc(type, f);
	fwrite(b->data, 1, b->len, f);
	fclose(f);
}

static void tuple(struct buf *b, int n, const char *const *values)
{
	env_encode_tuple_begin(b, (uint16_t)n);
	for (int i = 0; i < n; i++) {
		if (!values[i])
			env_encode_value(b, ENV_NULL, NULL, 0);
		else if (strcmp(values[i], "<toast>") == 0)
			env_encode_value(b, ENV_UNCHANGED_TOAST, NULL, 0);
		else
			env_encode_value(b, ENV_TEXT, values[i], (uint32_t)strlen(values[i]));
	}
}

static void envelope(struct buf *b, bool with_origin)
{
	struct env_header_fields h = { .source_id = "src-1", .xid = 759, .commit_lsn = 0x1A1A598, .end_lsn = 0x1A1A5D0,
				       .commit_time_us = 1700000000123456LL,
				       .origin = with_origin ? "trellara_upstream" : NULL, .origin_lsn = 0x1234ABCD };
	struct env_column acc[3] = { { "id", 2, 23, -1, true }, { "owner", 5, 25, -1, false },
				     { "balance", 7, 1700, 786438, false } };
	struct env_column full[2] = { { "id", 2, 23, -1, true }, { "note", 4, 25, -1, true } };
	env_encode_header(b, &h);
	buf_put_u32(b, 2);
	env_encode_relation(b, 16385, "public", "accounts", 'd', 3, acc);
	env_encode_relation(b, 16399, "public", "audit_full", 'f', 2, full);
	buf_put_u32(b, 8);
	const char *ins[3] = { "1", "Zo\xc3\xab", NULL };
	buf_put_u8(b, 'I');
	buf_put_u32(b, 0);
	tuple(b, 3, ins);
	const char *upd[3] = { "1", "<toast>", "10.50" };
	buf_put_u8(b, 'U');
	buf_put_u32(b, 0);
	buf_put_u8(b, 0);
	tuple(b, 3, upd);
	const char *oldk[3] = { "1", NULL, NULL };
	const char *newk[3] = { "2", "bob", "" };
	buf_put_u8(b, 'U');
	buf_put_u32(b, 0);
	buf_put_u8(b, 'K');
	tuple(b, 3, oldk);
	tuple(b, 3, newk);
	const char *oldo[2] = { "7", "before" };
	const char *newo[2] = { "7", "after" };
	buf_put_u8(b, 'U');
	buf_put_u32(b, 1);
	buf_put_u8(b, 'O');
	tuple(b, 2, oldo);
	tuple(b, 2, newo);
	buf_put_u8(b, 'D');
	buf_put_u32(b, 0);
	buf_put_u8(b, 'K');
	tuple(b, 3, oldk);
	buf_put_u8(b, 'D');
	buf_put_u32(b, 1);
	buf_put_u8(b, 'O');
	tuple(b, 2, oldo);
	buf_put_u8(b, 'T');
	buf_put_u8(b, 3);
	buf_put_u32(b, 2);
	buf_put_u32(b, 0);
	buf_put_u32(b, 1);
	const char *ddl = "{\"ddl\":\"ALTER TABLE plain ADD COLUMN x int\"}";
	buf_put_u8(b, 'M');
	buf_put_u8(b, 1);
	buf_put_u64(b, 0x19617C8);
	buf_put_str(b, "trellara.ddl", 12);
	buf_put_u32(b, (uint32_t)strlen(ddl));
	buf_put(b, ddl, strlen(ddl));
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 64;
	}
	const char *dir = argv[1];
	struct buf b = { 0 };
	envelope(&b, true);
	write_seed(dir, "txn", 1, &b);
	struct buf c = { 0 };
	buf_put_u32(&c, 3);
	buf_put(&c, b.data, b.len);
	write_seed(dir, "chunk", 2, &c);
	buf_free(&c);
	buf_free(&b);
	envelope(&b, false);
	write_seed(dir, "txn-no-origin", 1, &b);
	buf_free(&b);

	struct env_header_fields h = { .source_id = "src-1", .xid = 759, .commit_lsn = 0x1A1A598, .end_lsn = 0x1A1A5D0,
				       .commit_time_us = 1700000000123456LL };
	env_encode_header(&b, &h);
	buf_put_u32(&b, 0);
	buf_put_u32(&b, 0);
	write_seed(dir, "txn-empty", 1, &b);
	buf_free(&b);

	struct env_manifest_chunk chunks[2] = { { .crc = 0xDEADBEEF, .changes = 100 }, { .crc = 0x01020304, .changes = 10 } };
	const char *tables[2] = { "public.bulk", "public.accounts" };
	env_encode_manifest(&b, &h, 2, 110, chunks, 2, tables);
	write_seed(dir, "manifest", 3, &b);
	buf_free(&b);
	env_encode_commit_marker(&b, "src-1", 759, 0x1A1A598, 0x1A1A5D0, 2, 0xCAFEF00D);
	write_seed(dir, "commit_marker", 4, &b);
	buf_free(&b);
	env_encode_watermark(&b, "src-1", 0x1A1A5D0, 1700000000123456LL);
	write_seed(dir, "watermark", 5, &b);
	buf_free(&b);
	const char *ddl = "{\"ddl\":\"ALTER TABLE plain ADD COLUMN x int\"}";
	env_encode_ddl(&b, "src-1", 755, 0x19617F8, 0x19617C8, "trellara.ddl", (const uint8_t *)ddl,
		       (uint32_t)strlen(ddl));
	write_seed(dir, "ddl", 6, &b);
	buf_free(&b);
	return 0;
}
#endif
