/*
 * assembler_pending.c - a streamed transaction written once
 * (assembler.h, "Written once"): its changes in memory go straight into
 * pending_chunk frames, a subtransaction abort shortens the list of
 * chunks in use, and the commit lists them by stream offset.
 */
#include "assembler_internal.h"

#include "trellara/checksum.h"
#include "trellara/stream.h"
#include "trellara/xalloc.h"

#include <stdlib.h>
#include <string.h>

/* PostgreSQL's own envelope head, with the commit not known yet. */
static void encode_pending_head(struct buf *b, const struct assembler *a, const struct txn *t, uint32_t seq)
{
	env_encode_pending_head(b, a->options.run, seq);
	struct env_header_fields h = { .source_id = a->source_id, .xid = t->xid, .origin = t->origin,
				       .origin_lsn = t->origin_lsn };
	env_encode_header(b, &h);
	buf_put_u32(b, t->n_relations);
	for (uint32_t i = 0; i < t->n_relations; i++) {
		const struct txn_relation *r = &t->relations[i];
		env_encode_relation(b, r->relid, r->schema, r->name, r->replident, r->n_columns, r->columns);
	}
}

static void put_u32_at(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

int assembler_write_pending(struct assembler *a, struct txn *t, bool all, assembler_emit_fn emit, void *ctx,
			    uint64_t *frames, char *err, size_t errlen)
{
	uint16_t *ncols = xmalloc((t->n_relations ? t->n_relations : 1) * sizeof *ncols);
	for (uint32_t i = 0; i < t->n_relations; i++)
		ncols[i] = t->relations[i].n_columns;
	struct buf chunk = { 0 };
	size_t pos = 0;
	uint64_t first_change = t->memory_first_change;
	int rc = 0;
	while (pos < t->memory.len) {
		/* the head, then how many changes go into the chunk */
		chunk.len = 0;
		encode_pending_head(&chunk, a, t, t->next_seq);
		size_t count_at = chunk.len;
		buf_put_u32(&chunk, 0);
		size_t end = pos, clen = 0;
		uint32_t n = 0;
		bool full = false;
		while (end < t->memory.len) {
			int have = env_change_length(t->memory.data + end, t->memory.len - end, ncols, t->n_relations, &clen);
			if (have != 1) {
				rc = errbuf_setf(err, errlen, "transaction %u: change bytes in memory are malformed", t->xid);
				goto out;
			}
			if (n > 0 && chunk.len + (end - pos) + clen > a->options.target_frame_payload) {
				full = true;
				break;
			}
			end += clen;
			n++;
			if (n >= a->options.max_changes_per_chunk) {
				full = true;
				break;
			}
		}
		if (!full && !all)
			break; /* a partial chunk: stays in memory */
		if (chunk.len + (end - pos) > a->options.max_frame_payload) {
			rc = errbuf_setf(err, errlen,
				  "transaction %u: a change of %zu bytes with the envelope head (%zu bytes) exceeds the "
				  "maximum frame payload (%zu bytes)",
				  t->xid, end - pos, chunk.len, a->options.max_frame_payload);
			goto out;
		}
		buf_put(&chunk, t->memory.data + pos, end - pos);
		put_u32_at(chunk.data + count_at, n);
		uint64_t offset = 0;
		if (emit(ctx, FRAME_PENDING_CHUNK, chunk.data, chunk.len, &offset) < 0) {
			errbuf_setf(err, errlen, "transaction %u: the stream did not take a pending_chunk frame", t->xid);
			rc = ASSEMBLER_EMIT_FAILED;
			goto out;
		}
		if (frames)
			(*frames)++;
		if (t->n_pending == t->pending_cap) {
			t->pending_cap = t->pending_cap ? 2 * t->pending_cap : 16;
			t->pending = xrealloc(t->pending, t->pending_cap * sizeof *t->pending);
		}
		t->pending[t->n_pending++] = (struct pending_chunk){ .offset = offset, .first_change = first_change,
								     .crc = crc32c(0, chunk.data, chunk.len),
								     .changes = n, .in_use = n };
		t->next_seq++;
		first_change += n;
		t->spill_bytes += end - pos;
		t->memory_first_change = first_change;
		pos = end;
	}
	/* keep what was not written */
	memmove(t->memory.data, t->memory.data + pos, t->memory.len - pos);
	t->memory.len -= pos;
	t->memory_changes = t->changes - t->memory_first_change;
	if (t->memory.len == 0 && t->memory.cap > 2 * ASSEMBLER_MAX_MEMORY_BYTES)
		buf_free(&t->memory);
out:
	free(ncols);
	buf_free(&chunk);
	return rc;
}

int assembler_write_pending_abort(struct assembler *a, struct txn *t, assembler_emit_fn emit, void *ctx,
				  uint64_t *frames, char *err, size_t errlen)
{
	if (t->next_seq == 0)
		return 0;
	struct buf b = { 0 };
	env_encode_pending_abort(&b, a->source_id, t->xid, a->options.run);
	uint64_t offset = 0;
	int rc = 0;
	if (emit(ctx, FRAME_PENDING_ABORT, b.data, b.len, &offset) < 0) {
		errbuf_setf(err, errlen, "transaction %u: the stream did not take a pending_abort frame", t->xid);
		rc = ASSEMBLER_EMIT_FAILED;
	} else if (frames) {
		(*frames)++;
	}
	buf_free(&b);
	t->next_seq = 0;
	t->n_pending = 0;
	return rc;
}

void assembler_pending_cut(struct txn *t, uint64_t first_change)
{
	while (t->n_pending > 0 && t->pending[t->n_pending - 1].first_change >= first_change)
		t->n_pending--;
	if (t->n_pending > 0) {
		struct pending_chunk *p = &t->pending[t->n_pending - 1];
		if (p->first_change + p->in_use > first_change)
			p->in_use = (uint32_t)(first_change - p->first_change);
	}
}

const char **assembler_txn_tables(const struct txn *t, uint32_t *n_tables)
{
	const char **tables = xcalloc(t->n_relations ? t->n_relations : 1, sizeof *tables);
	uint32_t n = 0;
	for (uint32_t i = 0; i < t->n_relations; i++) {
		char *name = xasprintf("%s.%s", t->relations[i].schema, t->relations[i].name);
		bool dup = false;
		for (uint32_t k = 0; k < n && !dup; k++)
			dup = strcmp(tables[k], name) == 0;
		if (dup)
			free(name);
		else
			tables[n++] = name;
	}
	*n_tables = n;
	return tables;
}
