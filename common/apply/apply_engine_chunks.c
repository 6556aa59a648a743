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
#include "trellara/lsn.h"
#include "trellara/stream_exit.h"

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

/* A set written once: the marker checked out; read each listed pending
 * chunk back by offset (skipping the frames between them), check it and
 * apply its changes in use in the set's own target transaction, then go
 * on after the marker.  The set's first_offset is its manifest: a hold
 * or a failure reads the manifest again. */
static struct apply_outcome read_back(struct apply_engine *a, uint64_t marker_offset)
{
	struct chunk_set *ch = &a->chunk;
	uint32_t xid = ch->xid;
	uint64_t lsn = ch->commit_lsn, first = ch->first_offset;
	char detail[256];
	struct apply_outcome rc;
	if (!ch->duplicate) {
		/* what came before commits on its own */
		if (a->in_txn || a->n_flights) {
			rc = apply_engine_commit_open_batch(a);
			if (!apply_is_ok(rc))
				return rc;
		}
		bool hold = false;
		rc = apply_engine_fence_check(a, lsn, first, &hold);
		if (!apply_is_ok(rc) || hold) {
			chunk_set_reset(ch);
			return rc;
		}
		if (apply_engine_begin_txn(a, first, false) < 0) {
			a->single_mode = true;
			return apply_engine_handle_failure(a, xid, lsn, first);
		}
	}
	int sst = frame_source_seek(a->src, ch->listed[0].offset);
	if (sst == STREAM_ERANGE && ch->duplicate) {
		/* applied already: a restart reads its manifest again from the
		 * group's position, which passed its chunks once it was applied,
		 * so retention may have removed them since; nothing of it is
		 * applied again, there is nothing to check it against */
		char at[LSN_FORMAT_LEN];
		log_info("transaction %u (commit %s): applied already; its pending chunks from stream offset %" PRIu64
			 " are no longer in the stream: skipped",
			 xid, lsn_format(lsn, at), ch->listed[0].offset);
		return apply_engine_seek(a, marker_offset + 1);
	}
	if (sst == STREAM_ERANGE) {
		snprintf(detail, sizeof detail, "pending chunk 0 (stream offset %" PRIu64 ") is no longer in the stream",
			 ch->listed[0].offset);
		return chunk_fail(a, detail);
	}
	if (sst != STREAM_OK) {
		rc = sst == STREAM_EUNAVAILABLE ? apply_reconnect() : apply_exit(stream_exit_code(sst, STREAM_FROM_DATA));
		goto unavailable;
	}
	int waits = 0;
	for (uint32_t k = 0; k < ch->n_listed;) {
		struct stream_frame f;
		int st = frame_source_next(a->src, &f);
		if (st == STREAM_END && waits++ < 30) {
			/* a remote source may deliver what it holds late */
			frame_source_wait(a->src, 1000);
			continue;
		}
		if (st == STREAM_ERANGE) {
			snprintf(detail, sizeof detail, "pending chunk %u (stream offset %" PRIu64 ") is no longer in the stream", k,
				 ch->listed[k].offset);
			return chunk_fail(a, detail);
		}
		if (st != STREAM_OK) {
			rc = st == STREAM_EUNAVAILABLE || st == STREAM_END ? apply_reconnect()
									 : apply_exit(stream_exit_code(st, STREAM_FROM_DATA));
			goto unavailable;
		}
		waits = 0;
		if (f.header.offset < ch->listed[k].offset)
			continue; /* another transaction's frame, or an orphan */
		struct env_frame_summary s;
		char err[256];
		if (f.header.type == FRAME_PENDING_CHUNK &&
		    env_frame_summary(FRAME_PENDING_CHUNK, f.payload, f.header.payload_length, &s, err, sizeof err) < 0) {
			log_error("stream offset %" PRIu64 ": %s", f.header.offset, err);
			return apply_exit(EXIT_DATAERR);
		}
		if (f.header.type != FRAME_PENDING_CHUNK)
			memset(&s, 0, sizeof s);
		uint32_t crc = crc32c(0, f.payload, f.header.payload_length);
		if (!chunk_set_check_pending(ch, k, f.header.offset, f.header.type, &s, crc, detail, sizeof detail))
			return chunk_fail(a, detail);
		const uint8_t *env = f.payload + ENV_PENDING_HEAD_SIZE;
		size_t env_len = f.header.payload_length - ENV_PENDING_HEAD_SIZE;
		uint64_t changes = 0, taken = 0;
		if (!ch->duplicate) {
			rc = apply_engine_send_changes(a, env, env_len, f.header.offset, lsn, ch->listed[k].changes, &changes,
						       &taken);
			if (rc.status == APPLY_EXIT)
				return rc;
			if (rc.status == APPLY_FAILED || a->ops->sync(a->t) < 0) {
				a->single_mode = true; /* a chunked transaction is always alone */
				return apply_engine_handle_failure(a, xid, lsn, first);
			}
		} else {
			/* count them anyway: the manifest's check applies to duplicates too */
			struct env_decoder d;
			const struct env_change *c;
			if (env_decode_begin(&d, env, env_len) == 0)
				while (taken < ch->listed[k].changes && env_decode_next(&d, &c) == 1)
					taken++;
			env_decoder_free(&d);
		}
		if (!chunk_set_check_pending_count(ch, k, taken, detail, sizeof detail))
			return chunk_fail(a, detail);
		ch->changes += changes;
		k++;
	}
	rc = apply_engine_seek(a, marker_offset + 1);
	if (apply_is_ok(rc))
		return rc;
unavailable:
	/* the stream cannot be read now: nothing of the set commits */
	if (a->in_txn) {
		a->ops->rollback(a->t);
		apply_engine_clear_error(a);
		a->in_txn = false;
		a->batch_txns = a->batch_changes = 0;
	}
	chunk_set_reset(ch);
	return rc;
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
							  s.commit_lsn, UINT64_MAX, &changes, &decoded);
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
	if (type == FRAME_MANIFEST && f->header.payload_length > 0 && f->payload[0] == ENV_MANIFEST_BY_OFFSET) {
		/* written once: its chunks are earlier in the stream */
		struct env_manifest m;
		if (env_decode_manifest(f->payload, f->header.payload_length, &m, err, sizeof err) < 0) {
			log_error("stream offset %" PRIu64 ": %s", offset, err);
			return apply_exit(EXIT_DATAERR);
		}
		struct apply_outcome rc = apply_ok();
		if (ch->active)
			rc = apply_engine_chunk_abandon(a, m.commit_lsn, "a later transaction's manifest");
		/* what came before commits on its own, now: an abandoned set
		 * (its marker never comes, a restarted capture writes it again)
		 * rolls back what it opened, never the transactions before it */
		if (apply_is_ok(rc) && (a->in_txn || a->n_flights))
			rc = apply_engine_commit_open_batch(a);
		bool ok = apply_is_ok(rc) && chunk_set_begin_listed(ch, &m, crc32c(0, f->payload, f->header.payload_length),
								      offset, a->last_commit_lsn, detail, sizeof detail);
		env_manifest_free(&m);
		if (!apply_is_ok(rc))
			return rc;
		if (!ok)
			return chunk_fail(a, detail);
		return apply_ok(); /* next_offset stays at the manifest until the set commits */
	}
	if (!chunk_set_owns(ch, s.xid, s.commit_lsn, offset))
		return chunk_fail(a, type == FRAME_MANIFEST ? "manifest without its chunks" : "commit marker without its chunks");
	if (type == FRAME_MANIFEST && ch->by_offset)
		return chunk_fail(a, "a second manifest");
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
	if (ch->by_offset) {
		struct apply_outcome rc = read_back(a, offset);
		if (!apply_is_ok(rc) || !ch->active)
			return rc; /* failed, held or unavailable: the set was dropped */
	}
	a->next_offset = offset + 1;
	if (ch->by_offset)
		apply_chunks_floor_forget(&a->floor, ch->xid);
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

