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
 * this file sequences them and hands the statements to the target.
 */
#include "trellara/apply_engine.h"

#include "trellara/apply_chunks.h"
#include "trellara/apply_fence.h"
#include "trellara/checksum.h"
#include "trellara/defaults.h"
#include "trellara/envelope.h"
#include "trellara/fault.h"
#include "trellara/log.h"
#include "trellara/lsn.h"
#include "trellara/stream.h"
#include "trellara/stream_exit.h"
#include "trellara/xalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct apply_engine {
	const struct flow_config *cfg;
	const struct apply_target_ops *ops;
	void *t;
	struct stream_reader *reader;
	struct stream_fs *fs;
	struct apply_engine_stats stats;
	struct apply_checkpoint cp; /* as last committed */
	struct apply_tables tables;
	char **unconfigured;        /* owned: tables already warned about */
	size_t n_unconfigured;
	struct quarantine_entry *replay; /* owned: replay_ready entries */
	int n_replay;
	struct plan_stmt stmt;
	struct apply_target_error own_error; /* a change the planner could not express */
	int64_t now_us;
	/* the open batch */
	bool in_txn;
	uint64_t batch_first_offset;
	uint64_t batch_txns, batch_changes, batch_skipped, batch_filtered;
	uint64_t last_commit_lsn;  /* highest applied or skipped in this batch or before */
	uint32_t last_xid;
	uint64_t seen_lsn;         /* highest commit end or watermark passed */
	uint64_t next_offset;      /* after the last frame handled */
	/* one transaction per target transaction until this offset */
	uint64_t single_until;
	bool single_mode;
	struct chunk_set chunk;
	bool group_pending;        /* the group file lags the checkpoint */
	int64_t last_group_write_us;
	struct apply_fence fence;
	int64_t last_idle_checkpoint_us, last_progress_us;
	uint64_t progress_txns;
	int transient_retries;     /* in a row, since the last commit */
	char last_transient_sqlstate[6];
};

static const struct apply_target_error *engine_error(struct apply_engine *a)
{
	return a->own_error.failed ? &a->own_error : a->ops->error(a->t);
}

static void engine_clear_error(struct apply_engine *a)
{
	memset(&a->own_error, 0, sizeof a->own_error);
	a->ops->clear_error(a->t);
}

struct apply_engine *apply_engine_new(const struct flow_config *cfg, const struct apply_target_ops *ops, void *t,
				      struct stream_reader *reader, struct stream_fs *fs)
{
	struct apply_engine *e = xcalloc(1, sizeof *e);
	e->cfg = cfg;
	e->ops = ops;
	e->t = t;
	e->reader = reader;
	e->fs = fs;
	plan_stmt_init(&e->stmt);
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
	plan_stmt_free(&e->stmt);
	free(e);
}

void apply_engine_connected(struct apply_engine *e, const struct apply_checkpoint *cp,
			    const struct quarantine_entry *replay, int n_replay, struct apply_tables *tables)
{
	e->cp = *cp;
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
}

void apply_engine_disconnected(struct apply_engine *e)
{
	e->in_txn = false;
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

/* ---- quarantine ---- */

static struct apply_outcome quarantine(struct apply_engine *a, uint32_t xid, uint64_t commit_lsn, uint64_t offset,
				       const char *reason, const char *detail, int exit_code)
{
	char lsn[LSN_FORMAT_LEN];
	lsn_format(commit_lsn, lsn);
	if (a->ops->quarantine_add(a->t, xid, commit_lsn, offset, reason, detail) < 0)
		return apply_reconnect();
	a->stats.quarantined++;
	log_error("transaction %u (commit %s, stream offset %" PRIu64 ") quarantined: %s: %s", xid, lsn, offset, reason,
		  detail);
	log_hint("\"trellara quarantine list --config %s\" shows it; repair the target, then \"trellara quarantine replay-ready --config %s --transaction-id %u --commit-lsn %s\"",
		 a->cfg->path, a->cfg->path, xid, lsn);
	return apply_exit(exit_code);
}

static const struct quarantine_entry *replay_entry(struct apply_engine *a, uint32_t xid, uint64_t commit_lsn)
{
	for (int i = 0; i < a->n_replay; i++)
		if (a->replay[i].xid == xid && a->replay[i].commit_lsn == commit_lsn)
			return &a->replay[i];
	return NULL;
}

/* Marks a replayed quarantined transaction resolved, in the target
 * transaction that applies it. */
static int resolve_quarantine(struct apply_engine *a, const struct quarantine_entry *q, uint64_t tag)
{
	return a->ops->resolve_quarantine(a->t, q->id, tag);
}

/* ---- batches ---- */

static int begin_txn(struct apply_engine *a, uint64_t offset)
{
	if (a->in_txn)
		return 0;
	a->in_txn = true;
	a->batch_first_offset = offset;
	return a->ops->begin(a->t, offset);
}

/* Writes the checkpoint, commits, then moves the group. */
static int group_flush(struct apply_engine *a);

/* APPLY_FAILED: the statement error is the target's (engine_error). */
static struct apply_outcome commit_batch(struct apply_engine *a)
{
	bool work = a->in_txn || a->batch_skipped || a->seen_lsn > a->cp.applied_through_lsn ||
		    a->next_offset > a->cp.stream_offset;
	if (!work)
		return apply_ok();
	if (!a->in_txn && begin_txn(a, a->next_offset) < 0)
		goto failed;
	uint64_t applied_through = a->seen_lsn > a->cp.applied_through_lsn ? a->seen_lsn : a->cp.applied_through_lsn;
	struct apply_checkpoint next = a->cp;
	bool moved = a->last_commit_lsn > a->cp.last_commit_lsn;
	next.last_commit_lsn = moved ? a->last_commit_lsn : a->cp.last_commit_lsn;
	next.last_xid = moved ? a->last_xid : a->cp.last_xid;
	next.stream_offset = a->next_offset;
	next.applied_through_lsn = applied_through;
	next.applied_transactions = a->cp.applied_transactions + a->batch_txns;
	next.applied_changes = a->cp.applied_changes + a->batch_changes;
	next.skipped_duplicates = a->cp.skipped_duplicates + a->batch_skipped;
	/* every row change checked (expect_one) before anything commits */
	if (a->ops->write_checkpoint(a->t, &next, a->next_offset) < 0 || a->ops->sync(a->t) < 0)
		goto failed;
	fault_point("applyd.before_target_commit");
	if (a->ops->commit(a->t, a->next_offset) < 0)
		goto failed;
	fault_point("applyd.after_target_commit_before_group_ack");
	a->in_txn = false;
	a->cp = next;
	a->stats.transactions += a->batch_txns;
	a->stats.changes += a->batch_changes;
	a->stats.skipped_duplicates += a->batch_skipped;
	a->stats.skipped_by_watermark += a->batch_filtered;
	a->stats.batches++;
	a->progress_txns += a->batch_txns;
	a->batch_txns = a->batch_changes = a->batch_skipped = a->batch_filtered = 0;
	a->transient_retries = 0;
	/* The group only lags the target's checkpoint (the truth for dedup):
	 * written at most every 200 ms under load, and when idle or stopping. */
	a->group_pending = true;
	if (a->now_us - a->last_group_write_us >= 200000 && group_flush(a) < 0)
		return apply_exit(EXIT_CANTCREAT);
	return apply_ok();
failed:
	a->in_txn = false;
	return apply_failed(); /* the caller looks at engine_error() */
}

static int group_flush(struct apply_engine *a)
{
	if (!a->group_pending)
		return 0;
	if (stream_group_set_fs(a->fs, a->cfg->stream_path, a->cfg->consumer_group, a->cp.stream_offset) != STREAM_OK)
		return -1;
	a->group_pending = false;
	a->last_group_write_us = a->now_us;
	return 0;
}

static struct apply_outcome handle_failure(struct apply_engine *a, uint32_t xid, uint64_t commit_lsn, uint64_t offset);

/* Commit what is open; a failure goes to handle_failure (culprit hunt,
 * quarantine or reconnect). */
static struct apply_outcome commit_open_batch(struct apply_engine *a)
{
	uint64_t keep = a->next_offset;
	struct apply_outcome rc = commit_batch(a);
	if (rc.status == APPLY_FAILED)
		return handle_failure(a, a->last_xid, a->last_commit_lsn, keep);
	return rc;
}

/* Drop the open batch and rewind the reader to where it started. */
static struct apply_outcome rewind_batch(struct apply_engine *a, uint64_t to)
{
	a->in_txn = false;
	a->batch_txns = a->batch_changes = a->batch_skipped = a->batch_filtered = 0;
	a->last_commit_lsn = a->cp.last_commit_lsn;
	a->seen_lsn = a->cp.applied_through_lsn;
	a->next_offset = to;
	engine_clear_error(a);
	return stream_reader_seek(a->reader, to) == STREAM_OK ? apply_ok() : apply_exit(EXIT_DATAERR);
}

/* Changes to a table outside dataset.tables are not applied; say so
 * once per table and process. */
static void warn_unconfigured(struct apply_engine *a, const struct env_relation *r)
{
	char *name = xasprintf("%.*s.%.*s", (int)r->schema_len, r->schema, (int)r->name_len, r->name);
	for (size_t i = 0; i < a->n_unconfigured; i++)
		if (strcmp(a->unconfigured[i], name) == 0) {
			free(name);
			return;
		}
	log_warn("changes to %s are not applied: the table is not in dataset.tables of %s", name, a->cfg->path);
	a->unconfigured = xrealloc(a->unconfigured, (a->n_unconfigured + 1) * sizeof *a->unconfigured);
	a->unconfigured[a->n_unconfigured++] = name;
}

/* Apply the changes of one envelope inside the open target transaction.
 * APPLY_FAILED: the statement error is engine_error()'s. */
static struct apply_outcome send_changes(struct apply_engine *a, const uint8_t *payload, size_t len, uint64_t offset,
					 uint64_t commit_lsn, uint64_t *changes, uint64_t *decoded)
{
	struct env_decoder d;
	struct apply_outcome rc = apply_ok();
	if (env_decode_begin(&d, payload, len) < 0) {
		log_error("stream offset %" PRIu64 ": %s", offset, d.error);
		env_decoder_free(&d);
		return apply_exit(EXIT_DATAERR);
	}
	uint32_t nrel = d.header.n_relations;
	struct plan_relation *prel = xcalloc(nrel ? nrel : 1, sizeof *prel);
	bool **keys = xcalloc(nrel ? nrel : 1, sizeof *keys);
	bool **identity = xcalloc(nrel ? nrel : 1, sizeof *identity);
	enum apply_relation_verdict *verdict = xcalloc(nrel ? nrel : 1, sizeof *verdict);
	for (uint32_t i = 0; i < nrel; i++) {
		const struct env_relation *r = &d.header.relations[i];
		prel[i].rel = r;
		struct apply_table *t;
		const char *root;
		verdict[i] = apply_core_relation(&a->tables, r, commit_lsn, &t, &root);
		if (verdict[i] == APPLY_RELATION_UNPUBLISHED_PARTITION) {
			log_error("stream offset %" PRIu64 ": changes to %.*s.%.*s, a partition of %s, arrive under the partition's own name: the publication does not publish via the partition root",
				  offset, (int)r->schema_len, r->schema, (int)r->name_len, r->name, root);
			log_hint("ALTER PUBLICATION %s SET (publish_via_partition_root = true) on the source (\"trellara check --config %s\" checks it), then \"trellara reseed --config %s --table %s\": the changes sent so far under the partition's name are not applied",
				 a->cfg->publication, a->cfg->path, a->cfg->path, root);
			rc = apply_exit(EXIT_CONFIG);
			break;
		}
		if (verdict[i] == APPLY_RELATION_UNCONFIGURED)
			continue;
		keys[i] = xcalloc(r->n_columns ? r->n_columns : 1, sizeof **keys);
		prel[i].key = apply_core_key_columns(t, r, keys[i]) ? keys[i] : NULL;
		prel[i].partitioned = t->partitioned;
		if (t->n_identity_always) {
			identity[i] = xcalloc(r->n_columns ? r->n_columns : 1, sizeof **identity);
			apply_core_identity_always(t, r, identity[i]);
			prel[i].identity_always = identity[i];
		}
	}
	const struct env_change *c;
	int step = 0;
	char err[512];
	uint32_t *kept = NULL;
	while (apply_is_ok(rc) && (step = env_decode_next(&d, &c)) == 1) {
		if (decoded)
			(*decoded)++;
		struct env_change filtered;
		if (c->op == ENV_INSERT || c->op == ENV_UPDATE || c->op == ENV_DELETE) {
			if (verdict[c->relation] == APPLY_RELATION_UNCONFIGURED) {
				warn_unconfigured(a, &d.header.relations[c->relation]);
				a->stats.skipped_unconfigured++;
				continue;
			}
			if (verdict[c->relation] == APPLY_RELATION_BELOW_WATERMARK) {
				a->batch_filtered++;
				continue;
			}
		} else if (c->op == ENV_TRUNCATE) {
			/* only the tables of this flow, and only above their watermarks */
			kept = xrealloc(kept, (c->n_truncate ? c->n_truncate : 1) * sizeof *kept);
			uint32_t n_kept = apply_core_truncate_filter(verdict, c->truncate_relations, c->n_truncate, kept);
			if (n_kept == 0) {
				a->batch_filtered++;
				continue;
			}
			filtered = *c;
			filtered.n_truncate = n_kept;
			filtered.truncate_relations = kept;
			c = &filtered;
		}
		int planned = plan_change(a->cfg->checkpoint_schema, prel, nrel, c, a->single_mode, &a->stmt, err, sizeof err);
		if (planned < 0) {
			/* a change we cannot express: the transaction cannot apply.
			 * Roll back what was sent of it, so that no result is left
			 * pending in the pipeline (an earlier statement's own error
			 * comes first). */
			a->ops->rollback(a->t);
			if (!a->ops->error(a->t)->failed) {
				struct apply_target_error *own = &a->own_error;
				snprintf(own->message, sizeof own->message, "%s", err);
				snprintf(own->sqlstate, sizeof own->sqlstate, "%s", SQLSTATE_UNPLANNABLE);
				own->failed = true;
				own->tag = offset;
			}
			rc = apply_failed();
			break;
		}
		if (planned == 1)
			continue;
		if (a->ops->change(a->t, prel, nrel, c, &a->stmt, offset) < 0) {
			rc = apply_failed();
			break;
		}
		(*changes)++;
	}
	if (step < 0 && apply_is_ok(rc)) {
		log_error("stream offset %" PRIu64 ": %s", offset, d.error);
		rc = apply_exit(EXIT_DATAERR);
	}
	for (uint32_t i = 0; i < nrel; i++) {
		free(keys[i]);
		free(identity[i]);
	}
	free(kept);
	free(keys);
	free(identity);
	free(verdict);
	free(prel);
	env_decoder_free(&d);
	return rc;
}

/* A batch or a single transaction failed: decide what to do. */
static struct apply_outcome handle_failure(struct apply_engine *a, uint32_t xid, uint64_t commit_lsn, uint64_t offset)
{
	struct apply_target_error err = *engine_error(a);
	switch (apply_core_on_failure(err.connection_lost, err.sqlstate, a->single_mode)) {
	case APPLY_FAILURE_RECONNECT:
		log_warn("target connection lost: %s", err.message);
		return apply_reconnect();
	case APPLY_FAILURE_RETRY:
		snprintf(a->last_transient_sqlstate, sizeof a->last_transient_sqlstate, "%s", err.sqlstate);
		log_warn("transient target error (SQLSTATE %s: %s): transaction %u rolled back, to be applied again", err.sqlstate,
			 err.message, xid);
		return apply_retry();
	case APPLY_FAILURE_ONE_AT_A_TIME:
		/* find the culprit: one source transaction per target transaction */
		log_warn("a batch of %" PRIu64 " transactions failed (%s: %s); retrying them one at a time", a->batch_txns,
			 err.sqlstate, err.message);
		a->single_mode = true;
		a->single_until = a->next_offset;
		return rewind_batch(a, a->batch_first_offset);
	case APPLY_FAILURE_QUARANTINE:
		break;
	}
	char detail[1200];
	snprintf(detail, sizeof detail, "SQLSTATE %s: %s", err.sqlstate, err.message);
	return quarantine(a, xid, commit_lsn, offset, apply_core_quarantine_reason(err.sqlstate), detail, EXIT_NEGATIVE);
}

static struct apply_outcome fence_check(struct apply_engine *a, uint64_t commit_lsn, uint64_t frame_offset, bool *hold);

static struct apply_outcome apply_txn_frame(struct apply_engine *a, const struct stream_frame *f)
{
	struct env_frame_summary s;
	char err[256];
	if (env_frame_summary(FRAME_TXN, f->payload, f->header.payload_length, &s, err, sizeof err) < 0) {
		log_error("stream offset %" PRIu64 " (%s byte %" PRIu64 "): %s", f->header.offset, f->segment, f->position, err);
		return apply_exit(EXIT_DATAERR);
	}
	if (s.source_id_len != strlen(a->cfg->source_id) || memcmp(s.source_id, a->cfg->source_id, s.source_id_len) != 0) {
		log_error("stream offset %" PRIu64 ": transaction of source \"%.*s\" in the stream of source \"%s\"",
			  f->header.offset, (int)s.source_id_len, s.source_id, a->cfg->source_id);
		return apply_exit(EXIT_DATAERR);
	}
	if (apply_core_is_duplicate(s.commit_lsn, a->last_commit_lsn)) {
		a->batch_skipped++;
		a->next_offset = f->header.offset + 1;
		return apply_ok();
	}
	bool hold = false;
	struct apply_outcome rc = fence_check(a, s.commit_lsn, f->header.offset, &hold);
	if (!apply_is_ok(rc) || hold)
		return rc;
	const struct quarantine_entry *replay = replay_entry(a, s.xid, s.commit_lsn);
	bool alone = replay != NULL || a->single_mode;
	if (alone && a->in_txn) {
		/* what came before goes in its own target transaction */
		uint64_t keep = a->next_offset;
		rc = commit_batch(a);
		if (rc.status == APPLY_FAILED)
			return handle_failure(a, a->last_xid, a->last_commit_lsn, keep);
		if (!apply_is_ok(rc))
			return rc;
	}
	if (begin_txn(a, f->header.offset) < 0)
		return handle_failure(a, s.xid, s.commit_lsn, f->header.offset);
	uint64_t changes = 0;
	rc = send_changes(a, f->payload, f->header.payload_length, f->header.offset, s.commit_lsn, &changes, NULL);
	if (rc.status == APPLY_EXIT)
		return rc;
	a->batch_txns++;
	a->batch_changes += changes;
	a->last_commit_lsn = s.commit_lsn;
	a->last_xid = s.xid;
	if (s.end_lsn > a->seen_lsn)
		a->seen_lsn = s.end_lsn;
	a->next_offset = f->header.offset + 1;
	if (replay && apply_is_ok(rc))
		rc = resolve_quarantine(a, replay, f->header.offset) < 0 ? apply_failed() : apply_ok();
	if (apply_is_ok(rc) && (alone || a->batch_txns >= a->cfg->apply_batch_transactions))
		rc = commit_batch(a);
	if (rc.status == APPLY_FAILED)
		return handle_failure(a, s.xid, s.commit_lsn, f->header.offset);
	if (apply_is_ok(rc) && replay) {
		log_info("quarantined transaction %u replayed and resolved", s.xid);
		replay = NULL;
	}
	if (a->single_mode && a->next_offset >= a->single_until && !a->in_txn) {
		a->single_mode = false;
		log_info("the failed batch applied one transaction at a time without a culprit; back to batches");
	}
	return rc;
}

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
	return quarantine(a, xid, lsn, first, "chunk_integrity", detail, EXIT_DATAERR);
}

/* The set in progress will not complete here: roll it back.  What
 * follows decides whether that is a replay (fine) or a gap (not). */
static struct apply_outcome chunk_abandon(struct apply_engine *a, uint64_t next_lsn, const char *what)
{
	if (!a->chunk.active)
		return apply_ok();
	if (chunk_set_abandon_is_gap(&a->chunk, next_lsn)) {
		char detail[256];
		snprintf(detail, sizeof detail, "incomplete chunk set (%u chunks, no commit marker) followed by %s", a->chunk.next_index,
			 what);
		return chunk_fail(a, detail);
	}
	if (next_lsn == a->chunk.commit_lsn)
		what = "its transaction came again whole"; /* the resend after a restart, not a later one */
	log_warn("transaction %u: incomplete chunk set (%u chunks) discarded: %s", a->chunk.xid, a->chunk.next_index, what);
	if (a->in_txn) {
		a->ops->rollback(a->t);
		engine_clear_error(a);
		a->in_txn = false;
		a->batch_txns = a->batch_changes = 0;
	}
	chunk_set_reset(&a->chunk);
	return apply_ok();
}

static struct apply_outcome apply_chunk_frame(struct apply_engine *a, const struct stream_frame *f)
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
				struct apply_outcome rc = chunk_abandon(a, 0, "its replay");
				if (!apply_is_ok(rc))
					return rc;
			} else {
				struct apply_outcome rc = chunk_abandon(a, s.commit_lsn, "another transaction's chunks");
				if (!apply_is_ok(rc))
					return rc;
			}
		}
		if (!ch->active) {
			if (!chunk_set_check_start(ch, s.xid, s.commit_lsn, offset, s.chunk_index, detail, sizeof detail))
				return chunk_fail(a, detail);
			/* what came before commits on its own */
			if (a->in_txn) {
				struct apply_outcome rc = commit_open_batch(a);
				if (!apply_is_ok(rc))
					return rc;
			}
			chunk_set_begin(ch, s.xid, s.commit_lsn, s.end_lsn, offset, a->last_commit_lsn);
			if (!ch->duplicate) {
				bool hold = false;
				struct apply_outcome rc = fence_check(a, s.commit_lsn, offset, &hold);
				if (!apply_is_ok(rc) || hold) {
					chunk_set_reset(&a->chunk);
					return rc;
				}
				if (begin_txn(a, offset) < 0)
					return handle_failure(a, s.xid, s.commit_lsn, offset);
			}
		}
		if (!chunk_set_check_index(ch, s.chunk_index, detail, sizeof detail))
			return chunk_fail(a, detail);
		uint32_t crc = crc32c(0, f->payload, f->header.payload_length);
		uint64_t changes = 0, decoded = 0;
		if (!ch->duplicate) {
			struct apply_outcome rc = send_changes(a, f->payload + 4, f->header.payload_length - 4, offset,
							       s.commit_lsn, &changes, &decoded);
			if (rc.status == APPLY_EXIT)
				return rc;
			if (rc.status == APPLY_FAILED) {
				a->single_mode = true; /* a chunked transaction is always alone */
				return handle_failure(a, s.xid, s.commit_lsn, ch->first_offset);
			}
			/* keep memory bounded: results are read as chunks go */
			if (a->ops->sync(a->t) < 0) {
				a->single_mode = true;
				return handle_failure(a, s.xid, s.commit_lsn, ch->first_offset);
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
	const struct quarantine_entry *replay = replay_entry(a, xid, lsn);
	if (replay && resolve_quarantine(a, replay, offset) < 0)
		return handle_failure(a, xid, lsn, first);
	struct apply_outcome rc = commit_batch(a);
	if (rc.status == APPLY_FAILED) {
		a->single_mode = true;
		return handle_failure(a, xid, lsn, first);
	}
	return rc;
}

/* ---- fences (DESIGN §9) ---- */

static struct apply_outcome fence_refresh(struct apply_engine *a)
{
	char state[16];
	bool present;
	uint64_t lsn;
	if (a->ops->fence_get(a->t, &present, &lsn, state, sizeof state) < 0)
		return apply_reconnect();
	apply_fence_seen(&a->fence, present, lsn);
	return apply_ok();
}

/* Hold: everything before the fence is committed; report "held".  The
 * steps that follow poll the fence (fence_poll) until it is released. */
static struct apply_outcome fence_hold(struct apply_engine *a)
{
	char l[LSN_FORMAT_LEN];
	log_info("held at fence %s (applied through %s)", lsn_format(a->fence.lsn, l),
		 lsn_format(a->cp.applied_through_lsn, (char[LSN_FORMAT_LEN]){ 0 }));
	if (a->ops->fence_mark_held(a->t, a->cp.applied_through_lsn) < 0)
		return apply_reconnect();
	apply_fence_hold(&a->fence);
	return apply_ok();
}

/* Held: read the fence again. */
static struct apply_outcome fence_poll(struct apply_engine *a, enum apply_step *what)
{
	char state[16], l[LSN_FORMAT_LEN];
	bool present;
	uint64_t lsn;
	if (a->ops->fence_get(a->t, &present, &lsn, state, sizeof state) < 0)
		return apply_reconnect();
	switch (apply_fence_poll(&a->fence, present, lsn, strcmp(state, "requested") == 0)) {
	case APPLY_FENCE_STILL_HELD:
		*what = APPLY_STEP_HELD;
		return apply_ok();
	case APPLY_FENCE_REHOLD:
		/* a new fence replaced ours, at or before it: hold for it here */
		log_info("held at fence %s", lsn_format(a->fence.lsn, l));
		if (a->ops->fence_mark_held(a->t, a->cp.applied_through_lsn) < 0)
			return apply_reconnect();
		*what = APPLY_STEP_HELD;
		return apply_ok();
	case APPLY_FENCE_RELEASED:
		break;
	}
	log_info("fence released: applying again");
	/* a reseed may have moved table watermarks while we held */
	if (a->ops->reload_tables(a->t, &a->tables) < 0)
		return apply_reconnect();
	return apply_ok();
}

/* Before applying a transaction that commits at or after the fence:
 * commit what is open, hold, and have the caller read the frame again. */
static struct apply_outcome fence_check(struct apply_engine *a, uint64_t commit_lsn, uint64_t frame_offset, bool *hold)
{
	*hold = false;
	if (!a->in_txn) {
		struct apply_outcome rc = fence_refresh(a);
		if (!apply_is_ok(rc))
			return rc;
	}
	if (!apply_fence_blocks(&a->fence, commit_lsn))
		return apply_ok();
	*hold = true;
	if (a->in_txn || a->batch_skipped) {
		struct apply_outcome rc = commit_open_batch(a);
		if (!apply_is_ok(rc))
			return rc;
	}
	struct apply_outcome rc = fence_hold(a);
	if (!apply_is_ok(rc))
		return rc;
	if (stream_reader_seek(a->reader, frame_offset) != STREAM_OK)
		return apply_exit(EXIT_DATAERR);
	a->next_offset = frame_offset;
	return apply_ok();
}

/* ---- the loop ---- */

static struct apply_outcome idle_duties(struct apply_engine *a)
{
	int64_t now = a->now_us;
	if (a->last_progress_us == 0)
		a->last_progress_us = now;
	if (group_flush(a) < 0)
		return apply_exit(EXIT_CANTCREAT);
	/* An open chunk set is one target transaction that commits only
	 * after its commit marker: at the end of the stream between two of
	 * its chunks nothing commits (DESIGN: never half a transaction). */
	if (a->chunk.active) {
		/* wait for the rest of the set */
	} else if (a->in_txn || a->batch_skipped) {
		struct apply_outcome rc = commit_open_batch(a);
		if (!apply_is_ok(rc))
			return rc;
	} else if (a->seen_lsn > a->cp.applied_through_lsn &&
		   now - a->last_idle_checkpoint_us >= 1000000) {
		a->last_idle_checkpoint_us = now;
		struct apply_outcome rc = commit_open_batch(a);
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
	/* a fence the applier already stands at: hold there */
	if (!a->chunk.active && !a->in_txn) {
		struct apply_outcome rc = fence_refresh(a);
		if (!apply_is_ok(rc))
			return rc;
		if (apply_fence_idle_hold(&a->fence, a->cp.applied_through_lsn)) {
			rc = fence_hold(a);
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
		return fence_poll(a, what);
	struct stream_frame f;
	int st = stream_reader_next(a->reader, &f);
	if (st == STREAM_END) {
		struct apply_outcome rc = idle_duties(a);
		*what = a->fence.holding ? APPLY_STEP_HELD : APPLY_STEP_IDLE;
		return rc;
	}
	if (st != STREAM_OK)
		return apply_exit(stream_exit_code(st, STREAM_FROM_DATA));
	struct apply_outcome rc = apply_ok();
	switch (f.header.type) {
	case FRAME_TXN:
		if (a->chunk.active) {
			struct env_frame_summary s;
			char err[256];
			if (env_frame_summary(FRAME_TXN, f.payload, f.header.payload_length, &s, err, sizeof err) == 0 &&
			    !apply_is_ok(rc = chunk_abandon(a, s.commit_lsn, "a later transaction")))
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
		if (a->chunk.active && !apply_is_ok(rc = chunk_abandon(a, s.lsn, "a watermark past its commit")))
			return rc;
		if (s.lsn > a->seen_lsn)
			a->seen_lsn = s.lsn;
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
		return apply_is_ok(chunk_abandon(a, 0, "shutdown")) ? apply_ok() : apply_exit(EXIT_DATAERR);
	uint64_t keep = a->next_offset;
	struct apply_outcome rc = commit_batch(a);
	if (rc.status == APPLY_FAILED) {
		struct apply_outcome failed = handle_failure(a, a->last_xid, a->last_commit_lsn, keep);
		if (failed.status == APPLY_RECONNECT || failed.status == APPLY_RETRY) {
			/* rolled back: the next start applies it again */
			log_error("the last batch could not commit while stopping (target unavailable): it was rolled back and is applied again at the next start");
			return apply_exit(EXIT_UNAVAILABLE);
		}
		return apply_exit(EXIT_NEGATIVE);
	}
	if (apply_is_ok(rc) && group_flush(a) < 0)
		rc = apply_exit(EXIT_CANTCREAT);
	return rc;
}
