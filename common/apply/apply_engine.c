/*
 * apply_engine.c - the apply loop apart from any database (apply_engine.h).
 *
 * Batching: up to apply.batch_transactions whole source transactions in
 * one target transaction.  A batch that fails is rolled back and replayed
 * one transaction per target transaction; the one that fails alone is
 * quarantined and apply stops (exit 1).
 *
 * Chunked transactions (chunk..., manifest, commit_marker) are applied
 * inside their own target transaction as their chunks arrive and
 * committed only after the manifest and marker check out; anything else
 * rolls them back.  An incomplete chunk set followed by a replay of the
 * same transaction is discarded and the replay applied; one followed by
 * anything later fails closed.
 *
 * The decisions are apply_core's (dedup, verdicts, keys, TRUNCATE
 * filtering, failures), apply_chunks' (chunk sets) and apply_fence's;
 * these files (apply_engine_internal.h lists them) sequence them and hand
 * the statements to the target.
 */
#include "trellara/apply_engine.h"

#include "apply_engine_internal.h"

#include "trellara/apply_chunks.h"
#include "trellara/apply_fence.h"
#include "trellara/checksum.h"
#include "trellara/defaults.h"
#include "trellara/envelope.h"
#include "trellara/fault.h"
#include "trellara/frame_source.h"
#include "trellara/log.h"
#include "trellara/lsn.h"
#include "trellara/stream.h"
#include "trellara/stream_exit.h"
#include "trellara/xalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct apply_target_error *apply_engine_error(struct apply_engine *a)
{
	return a->own_error.failed ? &a->own_error : a->ops->error(a->t);
}

void apply_engine_clear_error(struct apply_engine *a)
{
	memset(&a->own_error, 0, sizeof a->own_error);
	a->ops->clear_error(a->t);
}

struct apply_outcome apply_engine_seek(struct apply_engine *a, uint64_t offset)
{
	int st = frame_source_seek(a->src, offset);
	if (st == STREAM_OK)
		return apply_ok();
	return st == STREAM_EUNAVAILABLE ? apply_reconnect() : apply_exit(EXIT_DATAERR);
}

struct apply_engine *apply_engine_new(const struct flow_config *cfg, const struct apply_target_ops *ops, void *t,
				      struct frame_source *src)
{
	struct apply_engine *e = xcalloc(1, sizeof *e);
	e->cfg = cfg;
	e->ops = ops;
	e->t = t;
	e->src = src;
	plan_stmt_init(&e->stmt);
	e->fold = fold_new();
	e->deps = apply_deps_new();
	e->next_seq = 1;
	e->sessions = xcalloc(1, sizeof *e->sessions);
	e->sessions[0] = t;
	e->n_sessions = 1;
	e->flights = xcalloc(1, sizeof *e->flights);
	return e;
}

void apply_engine_free(struct apply_engine *e)
{
	if (!e)
		return;
	apply_tables_free(&e->tables);
	for (size_t i = 0; i < e->n_unconfigured; i++)
		free(e->unconfigured[i]);
	free(e->unconfigured);
	free(e->replay);
	chunk_set_free(&e->chunk);
	apply_chunks_floor_free(&e->floor);
	plan_stmt_free(&e->stmt);
	fold_free(e->fold);
	free(e->set_run);
	free(e->idx);
	apply_deps_free(e->deps);
	buf_free(&e->deps_key);
	free(e->sessions);
	free(e->flights);
	free(e);
}

void apply_engine_connected(struct apply_engine *e, const struct apply_checkpoint *cp,
			    const struct quarantine_entry *replay, int n_replay, struct apply_tables *tables)
{
	e->cp = *cp;
	apply_engine_flights_lost(e);
	e->chain = *cp;
	free(e->replay);
	e->replay = NULL;
	e->n_replay = n_replay > 0 ? n_replay : 0;
	if (e->n_replay) {
		e->replay = xcalloc((size_t)e->n_replay, sizeof *e->replay);
		memcpy(e->replay, replay, (size_t)e->n_replay * sizeof *e->replay);
	}
	apply_tables_free(&e->tables);
	e->tables = *tables;
	memset(tables, 0, sizeof *tables);
	e->in_txn = false;
	e->fence = (struct apply_fence){ 0 };
	memset(&e->own_error, 0, sizeof e->own_error);
}

uint64_t apply_engine_start_offset(const struct apply_checkpoint *cp, uint64_t group_pos, bool group_exists,
				   bool *ahead)
{
	/* no group file yet: the group is at the beginning */
	uint64_t pos = group_exists ? group_pos : 0;
	*ahead = group_exists && group_pos > cp->stream_offset;
	return pos < cp->stream_offset ? pos : cp->stream_offset;
}

void apply_engine_start(struct apply_engine *e, uint64_t start)
{
	e->next_offset = start;
	e->last_commit_lsn = e->cp.last_commit_lsn;
	e->last_xid = e->cp.last_xid;
	e->seen_lsn = e->cp.applied_through_lsn;
	/* whatever an interrupted batch counted was rolled back with it */
	e->batch_txns = e->batch_changes = e->batch_skipped = e->batch_filtered = 0;
	chunk_set_reset(&e->chunk);
	apply_chunks_floor_reset(&e->floor); /* read again from the group, which is below them */
}

void apply_engine_disconnected(struct apply_engine *e)
{
	e->in_txn = false;
	apply_engine_flights_lost(e);
	e->chain = e->cp;
}

const struct apply_checkpoint *apply_engine_checkpoint(const struct apply_engine *e)
{
	return &e->cp;
}

const struct apply_engine_stats *apply_engine_stats(const struct apply_engine *e)
{
	return &e->stats;
}

const char *apply_engine_last_transient(const struct apply_engine *e)
{
	return e->last_transient_sqlstate;
}

int apply_engine_retry(struct apply_engine *e)
{
	return ++e->transient_retries;
}

/* ---- the loop ---- */

static struct apply_outcome idle_duties(struct apply_engine *a)
{
	int64_t now = a->now_us;
	if (a->last_progress_us == 0)
		a->last_progress_us = now;
	if (apply_engine_group_flush(a) < 0)
		return apply_exit(EXIT_CANTCREAT);
	/* An open chunk set is one target transaction that commits only
	 * after its commit marker: at the end of the stream between two of
	 * its chunks nothing commits (DESIGN: never half a transaction). */
	if (a->chunk.active) {
		/* wait for the rest of the set */
	} else if (a->in_txn || a->batch_skipped || a->n_flights) {
		struct apply_outcome rc = apply_engine_commit_open_batch(a);
		if (!apply_is_ok(rc))
			return rc;
	} else if (a->seen_lsn > a->cp.applied_through_lsn &&
		   (now - a->last_idle_checkpoint_us >= 1000000 || apply_fence_idle_hold(&a->fence, a->seen_lsn))) {
		/* at most one idle checkpoint a second, but at once when it
		 * reaches a fence (verify's watermark): then hold below */
		a->last_idle_checkpoint_us = now;
		struct apply_outcome rc = apply_engine_commit_open_batch(a);
		if (!apply_is_ok(rc))
			return rc;
	}
	if (now - a->last_progress_us >= 10000000) {
		if (a->progress_txns)
			log_info("applied %" PRIu64 " transactions in the last %.0f s (%" PRIu64 " in all, %" PRIu64
				 " duplicates skipped)",
				 a->progress_txns, (now - a->last_progress_us) / 1e6, a->cp.applied_transactions,
				 a->cp.skipped_duplicates);
		a->progress_txns = 0;
		a->last_progress_us = now;
	}
	/* nothing open: what a burst's large segment grew is not kept */
	if (!a->chunk.active && !a->in_txn && !a->batch_skipped && !a->n_flights)
		apply_engine_fold_shrink(a);
	/* a fence the applier already stands at: hold there */
	if (!a->chunk.active && !a->in_txn) {
		struct apply_outcome rc = apply_engine_fence_refresh(a);
		if (!apply_is_ok(rc))
			return rc;
		if (apply_fence_idle_hold(&a->fence, a->cp.applied_through_lsn)) {
			rc = apply_engine_fence_hold(a);
			if (!apply_is_ok(rc))
				return rc;
		}
	}
	return apply_ok();
}

struct apply_outcome apply_engine_step(struct apply_engine *a, int64_t now_us, enum apply_step *what)
{
	a->now_us = now_us;
	*what = APPLY_STEP_WORKED;
	if (a->fence.holding)
		return apply_engine_fence_poll(a, what);
	struct stream_frame f;
	int st = frame_source_next(a->src, &f);
	if (st == STREAM_END) {
		struct apply_outcome rc = idle_duties(a);
		*what = a->fence.holding ? APPLY_STEP_HELD : APPLY_STEP_IDLE;
		return rc;
	}
	if (st == STREAM_EUNAVAILABLE)
		return apply_reconnect(); /* the stream's servers: back off, read again */
	if (st != STREAM_OK)
		return apply_exit(stream_exit_code(st, STREAM_FROM_DATA));
	struct apply_outcome rc = apply_ok();
	switch (f.header.type) {
	case FRAME_TXN:
		if (a->chunk.active) {
			struct env_frame_summary s;
			char err[256];
			if (env_frame_summary(FRAME_TXN, f.payload, f.header.payload_length, &s, err, sizeof err) == 0 &&
			    !apply_is_ok(rc = apply_engine_chunk_abandon(a, s.commit_lsn, "a later transaction")))
				return rc;
		}
		rc = apply_txn_frame(a, &f);
		break;
	case FRAME_CHUNK:
	case FRAME_MANIFEST:
	case FRAME_COMMIT_MARKER:
		rc = apply_chunk_frame(a, &f);
		break;
	case FRAME_WATERMARK: {
		struct env_frame_summary s;
		char err[256];
		if (env_frame_summary(FRAME_WATERMARK, f.payload, f.header.payload_length, &s, err, sizeof err) < 0) {
			log_error("stream offset %" PRIu64 ": %s", f.header.offset, err);
			return apply_exit(EXIT_DATAERR);
		}
		if (a->chunk.active &&
		    !apply_is_ok(rc = apply_engine_chunk_abandon(a, s.lsn, "a watermark past its commit")))
			return rc;
		if (s.lsn > a->seen_lsn)
			a->seen_lsn = s.lsn;
		a->next_offset = f.header.offset + 1;
		break;
	}
	case FRAME_PENDING_CHUNK: {
		/* part of a streamed transaction not committed yet: its manifest
		 * lists it and applyd reads it back then (apply_engine_chunks.c) */
		struct env_frame_summary s;
		char err[256];
		if (env_frame_summary(FRAME_PENDING_CHUNK, f.payload, f.header.payload_length, &s, err, sizeof err) < 0) {
			log_error("stream offset %" PRIu64 ": %s", f.header.offset, err);
			return apply_exit(EXIT_DATAERR);
		}
		if (s.source_id_len != strlen(a->cfg->source_id) || memcmp(s.source_id, a->cfg->source_id, s.source_id_len) != 0) {
			log_error("stream offset %" PRIu64 ": frame of source \"%.*s\" in the stream of source \"%s\"",
				  f.header.offset, (int)s.source_id_len, s.source_id, a->cfg->source_id);
			return apply_exit(EXIT_DATAERR);
		}
		/* inside a set (chunks, or a manifest before its marker) only
		 * after a capture restart: the set's transaction comes again */
		if (a->chunk.active && !apply_is_ok(rc = apply_engine_chunk_abandon(a, 0, "a restarted capture's frames")))
			return rc;
		apply_chunks_floor_note(&a->floor, s.xid, s.run, f.header.offset);
		a->next_offset = f.header.offset + 1;
		break;
	}
	case FRAME_PENDING_ABORT: {
		struct env_frame_summary s;
		char err[256];
		if (env_frame_summary(FRAME_PENDING_ABORT, f.payload, f.header.payload_length, &s, err, sizeof err) < 0) {
			log_error("stream offset %" PRIu64 ": %s", f.header.offset, err);
			return apply_exit(EXIT_DATAERR);
		}
		apply_chunks_floor_abort(&a->floor, s.xid, s.run);
		if (!a->chunk.active)
			a->next_offset = f.header.offset + 1;
		break;
	}
	case FRAME_DDL:
		log_info("stream offset %" PRIu64 ": schema change on the source (ddl frame); applyd applies row changes only",
			 f.header.offset);
		if (!a->chunk.active)
			a->next_offset = f.header.offset + 1;
		break;
	default:
		log_error("stream offset %" PRIu64 ": unknown frame type %u", f.header.offset, f.header.type);
		return apply_exit(EXIT_DATAERR);
	}
	if (apply_is_ok(rc) && a->fence.holding)
		*what = APPLY_STEP_HELD;
	return rc;
}

struct apply_outcome apply_engine_stop(struct apply_engine *a, int64_t now_us)
{
	a->now_us = now_us;
	if (a->chunk.active)
		return apply_is_ok(apply_engine_chunk_abandon(a, 0, "shutdown")) ? apply_ok()
										 : apply_exit(EXIT_DATAERR);
	uint64_t keep = a->next_offset;
	struct apply_outcome rc = apply_engine_commit_batch(a);
	if (apply_is_ok(rc) && apply_engine_drain(a) < 0)
		rc = apply_failed();
	if (rc.status == APPLY_FAILED) {
		struct apply_outcome failed = apply_engine_handle_failure(a, a->last_xid, a->last_commit_lsn, keep);
		if (failed.status == APPLY_RECONNECT || failed.status == APPLY_RETRY) {
			/* rolled back: the next start applies it again */
			log_error("the last batch could not commit while stopping (target unavailable): it was rolled back and is applied again at the next start");
			return apply_exit(EXIT_UNAVAILABLE);
		}
		return apply_exit(EXIT_NEGATIVE);
	}
	if (apply_is_ok(rc) && apply_engine_group_flush(a) < 0)
		rc = apply_exit(EXIT_CANTCREAT);
	return rc;
}
