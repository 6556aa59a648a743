/*
 * apply_engine_chunks.c - chunked transactions (apply_engine.h): chunks
 * applied inside their own target transaction as they arrive, committed
 * only after the manifest and the commit marker check out (apply_chunks
 * decides); anything else rolls them back.
 */
#include "apply_engine_internal.h"

#include "trellara/checksum.h"
#include "trellara/defaults.h"
#include "trellara/log.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---- chunked transactions ---- */

static struct apply_outcome chunk_fail(struct apply_engine *a, const char *detail)
{
	uint32_t xid = a->chunk.xid;
	uint64_t lsn = a->chunk.commit_lsn, first = a->chunk.first_offset;
	if (a->in_txn) {
		a->ops->rollback(a->t);
		a->in_txn = false;
	}
	chunk_set_reset(&a->chunk);
	return apply_engine_quarantine(a, xid, lsn, first, "chunk_integrity", detail, EXIT_DATAERR);
}

/* The set in progress will not complete here: roll it back.  What
 * follows decides whether that is a replay (fine) or a gap (not). */
struct apply_outcome apply_engine_chunk_abandon(struct apply_engine *a, uint64_t next_lsn, const char *what)
{
	if (!a->chunk.active)
		return apply_ok();
	uint64_t copied_below = apply_tables_copied_below(&a->tables);
	if (chunk_set_abandon_is_gap(&a->chunk, next_lsn, copied_below)) {
		char detail[256];
		snprintf(detail, sizeof detail, "incomplete chunk set (%u chunks, no commit marker) followed by %s", a->chunk.next_index,
			 what);
		return chunk_fail(a, detail);
	}
	if (next_lsn == a->chunk.commit_lsn)
		what = "its transaction came again whole"; /* the resend after a restart, not a later one */
	else if (next_lsn > a->chunk.commit_lsn && a->chunk.commit_lsn < copied_below)
		what = "every table's copy holds its transaction";
	log_warn("transaction %u: incomplete chunk set (%u chunks) discarded: %s", a->chunk.xid, a->chunk.next_index, what);
	if (a->in_txn) {
		a->ops->rollback(a->t);
		apply_engine_clear_error(a);
		a->in_txn = false;
		a->batch_txns = a->batch_changes = 0;
	}
	chunk_set_reset(&a->chunk);
	return apply_ok();
}

struct apply_outcome apply_chunk_frame(struct apply_engine *a, const struct stream_frame *f)
{
	struct env_frame_summary s;
	char err[256];
	uint64_t offset = f->header.offset;
	if (env_frame_summary(f->header.type, f->payload, f->header.payload_length, &s, err, sizeof err) < 0) {
		log_error("stream offset %" PRIu64 " (%s byte %" PRIu64 "): %s", offset, f->segment, f->position, err);
		return apply_exit(EXIT_DATAERR);
	}
	if (s.source_id_len != strlen(a->cfg->source_id) || memcmp(s.source_id, a->cfg->source_id, s.source_id_len) != 0) {
		log_error("stream offset %" PRIu64 ": frame of source \"%.*s\" in the stream of source \"%s\"", offset,
			  (int)s.source_id_len, s.source_id, a->cfg->source_id);
		return apply_exit(EXIT_DATAERR);
	}
	struct chunk_set *ch = &a->chunk;
	int type = f->header.type;
	char detail[256];
	if (type == FRAME_CHUNK) {
		bool replay;
		if (chunk_set_interrupted(ch, s.xid, s.commit_lsn, s.chunk_index, &replay)) {
			if (replay) {
				log_warn("transaction %u: chunk set starts again at offset %" PRIu64 " (a replay): the incomplete one is discarded",
					 s.xid, offset);
				struct apply_outcome rc = apply_engine_chunk_abandon(a, 0, "its replay");
				if (!apply_is_ok(rc))
					return rc;
			} else {
				struct apply_outcome rc =
					apply_engine_chunk_abandon(a, s.commit_lsn, "another transaction's chunks");
				if (!apply_is_ok(rc))
					return rc;
			}
		}
		if (!ch->active) {
			if (!chunk_set_check_start(ch, s.xid, s.commit_lsn, offset, s.chunk_index, detail, sizeof detail))
				return chunk_fail(a, detail);
			/* what came before commits on its own */
			if (a->in_txn || a->n_flights) {
				struct apply_outcome rc = apply_engine_commit_open_batch(a);
				if (!apply_is_ok(rc))
					return rc;
			}
			chunk_set_begin(ch, s.xid, s.commit_lsn, s.end_lsn, offset, a->last_commit_lsn);
			if (!ch->duplicate) {
				bool hold = false;
				struct apply_outcome rc = apply_engine_fence_check(a, s.commit_lsn, offset, &hold);
				if (!apply_is_ok(rc) || hold) {
					chunk_set_reset(&a->chunk);
					return rc;
				}
				if (apply_engine_begin_txn(a, offset, false) < 0)
					return apply_engine_handle_failure(a, s.xid, s.commit_lsn, offset);
			}
		}
		if (!chunk_set_check_index(ch, s.chunk_index, detail, sizeof detail))
			return chunk_fail(a, detail);
		uint32_t crc = crc32c(0, f->payload, f->header.payload_length);
		uint64_t changes = 0, decoded = 0;
		if (!ch->duplicate) {
			struct apply_outcome rc =
				apply_engine_send_changes(a, f->payload + 4, f->header.payload_length - 4, offset,
							  s.commit_lsn, &changes, &decoded);
			if (rc.status == APPLY_EXIT)
				return rc;
			if (rc.status == APPLY_FAILED) {
				a->single_mode = true; /* a chunked transaction is always alone */
				return apply_engine_handle_failure(a, s.xid, s.commit_lsn, ch->first_offset);
			}
			/* keep memory bounded: results are read as chunks go */
			if (a->ops->sync(a->t) < 0) {
				a->single_mode = true;
				return apply_engine_handle_failure(a, s.xid, s.commit_lsn, ch->first_offset);
			}
		} else {
			/* count them anyway: the manifest check applies to duplicates too */
			struct env_decoder d;
			const struct env_change *c;
			if (env_decode_begin(&d, f->payload + 4, f->header.payload_length - 4) == 0)
				while (env_decode_next(&d, &c) == 1)
					decoded++;
			env_decoder_free(&d);
		}
		chunk_set_add(ch, crc, (uint32_t)decoded, changes);
		a->next_offset = offset + 1;
		return apply_ok();
	}
	if (!chunk_set_owns(ch, s.xid, s.commit_lsn, offset))
		return chunk_fail(a, type == FRAME_MANIFEST ? "manifest without its chunks" : "commit marker without its chunks");
	if (type == FRAME_MANIFEST) {
		struct env_manifest m;
		if (env_decode_manifest(f->payload, f->header.payload_length, &m, err, sizeof err) < 0)
			return chunk_fail(a, err);
		bool ok = chunk_set_check_manifest(ch, &m, crc32c(0, f->payload, f->header.payload_length), detail,
						   sizeof detail);
		env_manifest_free(&m);
		if (!ok)
			return chunk_fail(a, detail);
		a->next_offset = offset + 1;
		return apply_ok();
	}
	/* commit marker */
	if (!chunk_set_check_marker(ch, s.manifest_crc, s.chunk_count, detail, sizeof detail))
		return chunk_fail(a, detail);
	a->next_offset = offset + 1;
	if (ch->duplicate) {
		a->batch_skipped++;
		chunk_set_reset(&a->chunk);
		return apply_ok();
	}
	a->batch_txns++;
	a->batch_changes += ch->changes;
	a->last_commit_lsn = ch->commit_lsn;
	a->last_xid = ch->xid;
	if (ch->end_lsn > a->seen_lsn)
		a->seen_lsn = ch->end_lsn;
	uint32_t xid = ch->xid;
	uint64_t lsn = ch->commit_lsn, first = ch->first_offset;
	chunk_set_reset(&a->chunk);
	const struct quarantine_entry *replay = apply_engine_replay_entry(a, xid, lsn);
	if (replay && apply_engine_resolve_quarantine(a, replay, offset) < 0)
		return apply_engine_handle_failure(a, xid, lsn, first);
	struct apply_outcome rc = apply_engine_commit_batch(a);
	if (rc.status == APPLY_FAILED) {
		a->single_mode = true;
		return apply_engine_handle_failure(a, xid, lsn, first);
	}
	return rc;
}

