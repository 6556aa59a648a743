/*
 * assembler_emit.c - a committed transaction to stream frames
 * (assembler.h): its DDL frames, then one Txn frame, or chunks, a
 * manifest and a commit marker, the change bytes read back from the spill
 * file and memory.
 */
#include "assembler_internal.h"

#include "trellara/ack_policy.h"
#include "trellara/checksum.h"
#include "trellara/stream.h"
#include "trellara/xalloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* PostgreSQL timestamps count µs from 2000-01-01; envelopes from 1970. */
#define PG_EPOCH_OFFSET_US 946684800000000LL

/* ---- emitting a committed transaction ---- */

struct emit_ctx {
	struct assembler *a;
	struct txn *t;
	struct env_header_fields h;
	assembler_emit_fn emit;
	void *ctx;
	struct assembler_result *result;
	char *err;
	size_t errlen;
};

static int do_emit(struct emit_ctx *e, int type, const uint8_t *payload, size_t len)
{
	uint64_t offset = 0;
	if (e->emit(e->ctx, type, payload, len, &offset) < 0) {
		errbuf_setf(e->err, e->errlen, "transaction %u: the stream did not take a %s frame", e->t->xid,
		     frame_type_name(type));
		return ASSEMBLER_EMIT_FAILED;
	}
	e->result->frames++;
	return 0;
}

static void encode_envelope_head(struct buf *b, const struct emit_ctx *e)
{
	env_encode_header(b, &e->h);
	buf_put_u32(b, e->t->n_relations);
	for (uint32_t i = 0; i < e->t->n_relations; i++) {
		const struct txn_relation *r = &e->t->relations[i];
		env_encode_relation(b, r->relid, r->schema, r->name, r->replident, r->n_columns, r->columns);
	}
}

/* Read the transaction's change bytes [pos, pos+len) from spill + memory. */
static int read_changes(struct emit_ctx *e, uint64_t pos, uint8_t *dst, size_t len)
{
	struct txn *t = e->t;
	while (len > 0) {
		if (pos < t->spill_bytes) {
			size_t n = (size_t)(t->spill_bytes - pos < len ? t->spill_bytes - pos : len);
			ssize_t got = pread(t->spill_fd, dst, n, (off_t)pos);
			if (got <= 0) {
				errbuf_setf(e->err, e->errlen, "cannot read spill file \"%s\": %s", t->spill_path,
				     got < 0 ? strerror(errno) : "short file");
				return ASSEMBLER_STORAGE_FAILED;
			}
			pos += (uint64_t)got;
			dst += got;
			len -= (size_t)got;
		} else {
			size_t off = (size_t)(pos - t->spill_bytes);
			memcpy(dst, t->memory.data + off, len);
			return 0;
		}
	}
	return 0;
}

static int emit_single(struct emit_ctx *e, size_t head_len_hint)
{
	struct buf b = { 0 };
	uint64_t total = e->t->spill_bytes + e->t->memory.len;
	buf_reserve(&b, head_len_hint + 4 + (size_t)total);
	encode_envelope_head(&b, e);
	buf_put_u32(&b, (uint32_t)e->t->changes);
	buf_reserve(&b, (size_t)total);
	int rc = read_changes(e, 0, b.data + b.len, (size_t)total);
	if (rc == 0) {
		b.len += (size_t)total;
		rc = do_emit(e, FRAME_TXN, b.data, b.len);
	}
	buf_free(&b);
	return rc;
}

static int emit_chunked(struct emit_ctx *e)
{
	struct assembler *a = e->a;
	struct txn *t = e->t;
	uint16_t *ncols = xmalloc((t->n_relations ? t->n_relations : 1) * sizeof *ncols);
	for (uint32_t i = 0; i < t->n_relations; i++)
		ncols[i] = t->relations[i].n_columns;
	struct buf head = { 0 }, chunk = { 0 }, manifest = { 0 }, marker = { 0 };
	encode_envelope_head(&head, e);
	struct env_manifest_chunk *chunks = NULL;
	uint32_t n_chunks = 0;
	uint64_t total = t->spill_bytes + t->memory.len, pos = 0, emitted_changes = 0;
	size_t window_cap = 1 << 20;
	uint8_t *window = xmalloc(window_cap);
	size_t wlen = 0, wstart = 0;
	int rc = 0;
	/* a chunk: u32 index, envelope head, u32 count, changes */
	size_t count_at = 0;
	uint32_t in_chunk = 0;
	for (;;) {
		/* the next change, or the end */
		size_t clen = 0;
		int have = 0;
		while (pos + wstart < total || wlen > wstart) {
			have = wlen > wstart ? env_change_length(window + wstart, wlen - wstart, ncols, t->n_relations, &clen) : 0;
			if (have != 0)
				break;
			/* refill: keep the partial change, read more */
			memmove(window, window + wstart, wlen - wstart);
			pos += wstart;
			wlen -= wstart;
			wstart = 0;
			if (wlen == window_cap) {
				window_cap *= 2;
				window = xrealloc(window, window_cap);
			}
			uint64_t at = pos + wlen;
			size_t n = (size_t)(total - at < window_cap - wlen ? total - at : window_cap - wlen);
			if (n == 0)
				break;
			if ((rc = read_changes(e, at, window + wlen, n)) < 0)
				goto out;
			wlen += n;
		}
		if (have < 0) {
			rc = errbuf_setf(e->err, e->errlen, "transaction %u: spilled change bytes are malformed", t->xid);
			goto out;
		}
		bool end = have == 0;
		bool full = in_chunk > 0 &&
			    (end || in_chunk >= a->options.max_changes_per_chunk ||
			     chunk.len + clen > a->options.target_frame_payload);
		if (full) {
			uint8_t *p = chunk.data + count_at;
			p[0] = (uint8_t)(in_chunk >> 24);
			p[1] = (uint8_t)(in_chunk >> 16);
			p[2] = (uint8_t)(in_chunk >> 8);
			p[3] = (uint8_t)in_chunk;
			chunks = xrealloc(chunks, (n_chunks + 1) * sizeof *chunks);
			chunks[n_chunks].crc = crc32c(0, chunk.data, chunk.len);
			chunks[n_chunks].changes = in_chunk;
			n_chunks++;
			if ((rc = do_emit(e, FRAME_CHUNK, chunk.data, chunk.len)) < 0)
				goto out;
			emitted_changes += in_chunk;
			in_chunk = 0;
		}
		if (end)
			break;
		if (in_chunk == 0 && 4 + head.len + 4 + clen > a->options.max_frame_payload) {
			rc = errbuf_setf(e->err, e->errlen,
				  "transaction %u: a change of %zu bytes with the envelope head (%zu bytes) exceeds the "
				  "maximum frame payload (%zu bytes)",
				  t->xid, clen, head.len, a->options.max_frame_payload);
			goto out;
		}
		if (in_chunk == 0) {
			chunk.len = 0;
			buf_put_u32(&chunk, n_chunks);
			buf_put(&chunk, head.data, head.len);
			count_at = chunk.len;
			buf_put_u32(&chunk, 0);
		}
		buf_put(&chunk, window + wstart, clen);
		wstart += clen;
		in_chunk++;
	}
	if (emitted_changes != t->changes) {
		rc = errbuf_setf(e->err, e->errlen, "transaction %u: emitted %llu of %llu changes", t->xid,
			  (unsigned long long)emitted_changes, (unsigned long long)t->changes);
		goto out;
	}
	/* affected tables: every relation the transaction used */
	uint32_t n_tables = 0;
	const char **tables = assembler_txn_tables(t, &n_tables);
	env_encode_manifest(&manifest, &e->h, n_chunks, t->changes, chunks, n_tables, tables);
	for (uint32_t k = 0; k < n_tables; k++)
		free((char *)tables[k]);
	free(tables);
	if ((rc = do_emit(e, FRAME_MANIFEST, manifest.data, manifest.len)) < 0)
		goto out;
	env_encode_commit_marker(&marker, e->h.source_id, t->xid, e->h.commit_lsn, e->h.end_lsn, n_chunks,
				 crc32c(0, manifest.data, manifest.len));
	rc = do_emit(e, FRAME_COMMIT_MARKER, marker.data, marker.len);
	e->result->chunked = true;
out:
	free(window);
	free(chunks);
	free(ncols);
	buf_free(&head);
	buf_free(&chunk);
	buf_free(&manifest);
	buf_free(&marker);
	return rc;
}

/* A streamed transaction written once: the rest as pending chunks, then
 * the manifest listing every chunk in use by offset, then the marker. */
static int emit_pending_set(struct emit_ctx *e)
{
	struct txn *t = e->t;
	struct buf manifest = { 0 }, marker = { 0 };
	struct env_manifest_chunk *chunks = NULL;
	const char **tables = NULL;
	uint32_t n_tables = 0;
	int rc = assembler_write_pending(e->a, t, true, e->emit, e->ctx, &e->result->frames, e->err, e->errlen);
	if (rc < 0)
		goto out;
	chunks = xcalloc(t->n_pending ? t->n_pending : 1, sizeof *chunks);
	uint64_t in_use = 0;
	for (size_t i = 0; i < t->n_pending; i++) {
		chunks[i] = (struct env_manifest_chunk){ .offset = t->pending[i].offset, .crc = t->pending[i].crc,
							 .changes = t->pending[i].in_use };
		in_use += t->pending[i].in_use;
	}
	if (in_use != t->changes) {
		rc = errbuf_setf(e->err, e->errlen, "transaction %u: pending chunks hold %llu of %llu changes", t->xid,
			  (unsigned long long)in_use, (unsigned long long)t->changes);
		goto out;
	}
	tables = assembler_txn_tables(t, &n_tables);
	env_encode_manifest_by_offset(&manifest, &e->h, (uint32_t)t->n_pending, t->changes, chunks, n_tables, tables);
	if ((rc = do_emit(e, FRAME_MANIFEST, manifest.data, manifest.len)) < 0)
		goto out;
	env_encode_commit_marker(&marker, e->h.source_id, t->xid, e->h.commit_lsn, e->h.end_lsn, (uint32_t)t->n_pending,
				 crc32c(0, manifest.data, manifest.len));
	rc = do_emit(e, FRAME_COMMIT_MARKER, marker.data, marker.len);
	e->result->chunked = true;
out:
	for (uint32_t k = 0; k < n_tables; k++)
		free((char *)tables[k]);
	free(tables);
	free(chunks);
	buf_free(&manifest);
	buf_free(&marker);
	return rc;
}

int assembler_commit_txn(struct assembler *a, struct txn *t, uint64_t commit_lsn, uint64_t end_lsn, int64_t commit_ts,
			 assembler_emit_fn emit, void *ctx, struct assembler_result *result, char *err, size_t errlen)
{
	result->xid = t->xid;
	result->commit_lsn = commit_lsn;
	result->end_lsn = end_lsn;
	result->changes = t->changes;
	if (ack_policy_is_duplicate(a->options.skip_through_commit_lsn, commit_lsn)) {
		result->event = ASSEMBLER_SKIPPED;
		int rc = assembler_write_pending_abort(a, t, emit, ctx, &result->frames, err, errlen);
		assembler_txn_remove(a, t);
		return rc;
	}
	/* PostgreSQL 15 skips empty transactions, but not empty streamed
	 * ones (all their changes were for other tables): nothing to write.
	 * One with only verify's fence message: nothing either, but the
	 * caller records its end at once. */
	if (t->changes == 0 && t->n_ddl == 0) {
		result->event = t->fence_messages ? ASSEMBLER_FENCE : ASSEMBLER_EMPTY;
		int rc = assembler_write_pending_abort(a, t, emit, ctx, &result->frames, err, errlen);
		assembler_txn_remove(a, t);
		return rc;
	}
	struct emit_ctx e = {
		.a = a, .t = t, .emit = emit, .ctx = ctx, .result = result, .err = err, .errlen = errlen,
		.h = { .source_id = a->source_id, .xid = t->xid, .commit_lsn = commit_lsn, .end_lsn = end_lsn,
		       .commit_time_us = commit_ts + PG_EPOCH_OFFSET_US, .origin = t->origin, .origin_lsn = t->origin_lsn },
	};
	int rc = 0;
	for (size_t i = 0; i < t->n_ddl && rc == 0; i++) {
		struct buf b = { 0 };
		env_encode_ddl(&b, a->source_id, t->xid, commit_lsn, t->ddl[i].lsn, ASSEMBLER_DDL_PREFIX, t->ddl[i].content,
			       t->ddl[i].len);
		rc = do_emit(&e, FRAME_DDL, b.data, b.len);
		buf_free(&b);
	}
	if (rc == 0) {
		struct buf probe = { 0 };
		encode_envelope_head(&probe, &e);
		uint64_t size = probe.len + 4 + t->spill_bytes + t->memory.len;
		size_t head_len = probe.len;
		buf_free(&probe);
		bool listed = t->direct && t->n_pending > 0;
		/* pending chunks a subtransaction abort cut away whole: unlisted */
		if (!listed && t->direct)
			rc = assembler_write_pending_abort(a, t, emit, ctx, &result->frames, err, errlen);
		if (rc < 0)
			goto out;
		if (listed)
			rc = emit_pending_set(&e);
		else if (!a->options.strict_chunking && size <= a->options.target_frame_payload)
			rc = emit_single(&e, head_len);
		else
			rc = emit_chunked(&e);
	}
out:
	if (rc == 0)
		result->event = ASSEMBLER_COMMITTED;
	assembler_txn_remove(a, t);
	return rc;
}
