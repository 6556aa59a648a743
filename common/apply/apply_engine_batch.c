/*
 * apply_engine_batch.c - batches (apply_engine.h): up to
 * apply.batch_transactions whole source transactions in one target
 * transaction, their changes sent to the target, and what a failure
 * leads to: a reconnect, a retry, the batch again one transaction at a
 * time, or the culprit quarantined (and a replay_ready one resolved).
 */
#include "apply_engine_internal.h"

#include "trellara/apply_core.h"
#include "trellara/defaults.h"
#include "trellara/fault.h"
#include "trellara/jsonread.h"
#include "trellara/log.h"
#include "trellara/lsn.h"
#include "trellara/xalloc.h"
#include "trellara/strbuf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- quarantine ---- */

struct apply_outcome apply_engine_quarantine(struct apply_engine *a, uint32_t xid, uint64_t commit_lsn, uint64_t offset,
					     const char *reason, const char *detail, int exit_code)
{
	char lsn[LSN_FORMAT_LEN];
	lsn_format(commit_lsn, lsn);
	if (a->ops->quarantine_add(a->t, xid, commit_lsn, offset, reason, detail) < 0)
		return apply_reconnect();
	a->stats.quarantined++;
	log_error("transaction %u (commit %s, stream offset %" PRIu64 ") quarantined: %s: %s", xid, lsn, offset, reason,
		  detail);
	char *config = strbuf_shell_quote(a->cfg->path);
	log_hint("\"trellara quarantine list --config %s\" shows it; repair the target, then \"trellara quarantine replay-ready --config %s --transaction-id %u --commit-lsn %s\"",
		 config, config, xid, lsn);
	free(config);
	return apply_exit(exit_code);
}

const struct quarantine_entry *apply_engine_replay_entry(struct apply_engine *a, uint32_t xid, uint64_t commit_lsn)
{
	for (int i = 0; i < a->n_replay; i++)
		if (a->replay[i].xid == xid && a->replay[i].commit_lsn == commit_lsn)
			return &a->replay[i];
	return NULL;
}

/* Marks a replayed quarantined transaction resolved, in the target
 * transaction that applies it. */
int apply_engine_resolve_quarantine(struct apply_engine *a, const struct quarantine_entry *q, uint64_t tag)
{
	return a->ops->resolve_quarantine(a->t, q->id, tag);
}

/* ---- batches ---- */

int apply_engine_begin_txn(struct apply_engine *a, uint64_t offset, bool may_overlap)
{
	if (a->in_txn)
		return 0;
	bool parallel = may_overlap && apply_engine_may_overlap(a);
	if (!parallel && apply_engine_drain(a) < 0)
		return -1;
	a->in_txn = true;
	a->batch_parallel = parallel;
	a->batch_seq = a->next_seq++;
	a->batch_first_offset = offset;
	apply_engine_fold_forget(a); /* nothing of an abandoned target transaction */
	return a->ops->begin(a->t, offset, parallel);
}

/* APPLY_FAILED: the statement error is the target's (engine_error). */
struct apply_outcome apply_engine_commit_batch(struct apply_engine *a)
{
	bool work = a->in_txn || a->batch_skipped || a->seen_lsn > a->chain.applied_through_lsn ||
		    a->next_offset > a->chain.stream_offset;
	if (!work)
		return apply_ok();
	if (!a->in_txn && apply_engine_begin_txn(a, a->next_offset, false) < 0)
		goto failed;
	struct apply_outcome sent = apply_engine_fold_flush(a);
	if (sent.status == APPLY_EXIT) {
		a->ops->rollback(a->t);
		a->in_txn = false;
		return sent;
	}
	if (!apply_is_ok(sent))
		goto failed;
	/* over the checkpoint the batch before leaves (it may be in flight) */
	const struct apply_checkpoint *prev = &a->chain;
	uint64_t applied_through = a->seen_lsn > prev->applied_through_lsn ? a->seen_lsn : prev->applied_through_lsn;
	struct apply_checkpoint next = *prev;
	bool moved = a->last_commit_lsn > prev->last_commit_lsn;
	next.last_commit_lsn = moved ? a->last_commit_lsn : prev->last_commit_lsn;
	next.last_xid = moved ? a->last_xid : prev->last_xid;
	next.stream_offset = a->next_offset;
	next.applied_through_lsn = applied_through;
	next.applied_transactions = prev->applied_transactions + a->batch_txns;
	next.applied_changes = prev->applied_changes + a->batch_changes;
	next.skipped_duplicates = prev->skipped_duplicates + a->batch_skipped;
	if (a->batch_parallel)
		return apply_engine_submit(a, *prev, &next); /* checkpoint and COMMIT once its row counts are read */
	/* every row change checked (expect_one) before anything commits */
	if (a->ops->write_checkpoint(a->t, prev, &next, a->next_offset) < 0 || a->ops->sync(a->t) < 0)
		goto failed;
	fault_point("applyd.before_target_commit");
	if (a->ops->commit(a->t, a->next_offset) < 0)
		goto failed;
	fault_point("applyd.after_target_commit_before_group_ack");
	a->in_txn = false;
	a->cp = a->chain = next;
	a->committed_seq = a->batch_seq;
	apply_deps_committed(a->deps, a->batch_seq);
	a->batch_seq = 0;
	a->stats.transactions += a->batch_txns;
	a->stats.changes += a->batch_changes;
	a->stats.skipped_duplicates += a->batch_skipped;
	a->stats.skipped_by_watermark += a->batch_filtered;
	a->stats.batches++;
	a->stats.statements += a->batch_statements;
	a->stats.folded += a->batch_folded;
	a->stats.copies += a->batch_copies;
	a->batch_statements = a->batch_folded = a->batch_copies = 0;
	a->progress_txns += a->batch_txns;
	a->batch_txns = a->batch_changes = a->batch_skipped = a->batch_filtered = 0;
	a->transient_retries = 0;
	/* The group only lags the target's checkpoint (the truth for dedup):
	 * written at most every 200 ms under load, and when idle or stopping. */
	a->group_pending = true;
	if (a->now_us - a->last_group_write_us >= 200000 && apply_engine_group_flush(a) < 0)
		return apply_exit(EXIT_CANTCREAT);
	return apply_ok();
failed:
	a->in_txn = false;
	return apply_failed(); /* the caller looks at apply_engine_error() */
}

int apply_engine_group_flush(struct apply_engine *a)
{
	if (!a->group_pending)
		return 0;
	/* never past a pending chunk a later manifest may still list:
	 * retention keeps from here, and a restart reads from here again */
	if (frame_source_position_set(a->src, apply_chunks_floor_lowest(&a->floor, a->cp.stream_offset)) != STREAM_OK)
		return -1;
	a->group_pending = false;
	a->last_group_write_us = a->now_us;
	return 0;
}

/* Commit what is open; a failure goes to apply_engine_handle_failure (culprit hunt,
 * quarantine or reconnect). */
struct apply_outcome apply_engine_commit_open_batch(struct apply_engine *a)
{
	uint64_t keep = a->next_offset;
	struct apply_outcome rc = apply_engine_commit_batch(a);
	if (apply_is_ok(rc) && apply_engine_drain(a) < 0)
		rc = apply_failed();
	if (rc.status == APPLY_FAILED)
		return apply_engine_handle_failure(a, a->last_xid, a->last_commit_lsn, keep);
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
	apply_engine_clear_error(a);
	return apply_engine_seek(a, to);
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

/* A TRUNCATE of one source partition (a TRUNCATE_MESSAGE_PREFIX message
 * from the source's trigger: pgoutput leaves it out under
 * publish_via_partition_root): the target's partition of the same name
 * under the same flow table emptied (TRUNCATE ONLY, after what came before
 * it), or applyd stops (78) naming it when the target has none: never the
 * target keeping the rows. */
static struct apply_outcome partition_truncate(struct apply_engine *a, const struct env_change *c, uint64_t commit_lsn,
					       uint64_t offset)
{
	struct json_error jerr;
	struct json_value *v = jsonread_parse((const char *)c->message_content, c->message_len, &jerr);
	const char *schema = v ? jsonread_get_string(v, "schema") : NULL, *table = v ? jsonread_get_string(v, "table") : NULL;
	const char *root_schema = v ? jsonread_get_string(v, "root_schema") : NULL;
	const char *root_table = v ? jsonread_get_string(v, "root_table") : NULL;
	struct apply_outcome rc = apply_ok();
	if (!schema || !table || !root_schema || !root_table) {
		log_error("stream offset %" PRIu64 ": a %s message that does not name the partition and its root (schema, table, root_schema, root_table)",
			  offset, TRUNCATE_MESSAGE_PREFIX);
		jsonread_free(v);
		return apply_exit(EXIT_DATAERR);
	}
	const char *partition;
	switch (apply_core_partition_truncate(&a->tables, schema, table, root_schema, root_table, commit_lsn, &partition)) {
	case APPLY_PT_IGNORE: a->batch_filtered++; break;
	case APPLY_PT_CARRY: {
		const char *dot = strchr(partition, '.');
		struct env_relation rel = { .schema = partition, .schema_len = (size_t)(dot - partition), .name = dot + 1,
					    .name_len = strlen(dot + 1) };
		struct plan_relation prel = { .rel = &rel };
		uint32_t only = 0;
		struct env_change t = { .op = ENV_TRUNCATE, .n_truncate = 1, .truncate_relations = &only };
		if (a->folding)
			rc = apply_engine_fold_flush(a);
		if (apply_is_ok(rc))
			rc = apply_engine_send_planned(a, &prel, 1, &t, offset);
		break;
	}
	case APPLY_PT_STOP: {
		if (a->truncate_reload_lsn != commit_lsn) {
			/* a partition made after applyd read the target's tables:
			 * read them again (at a new connection) before judging */
			log_info("stream offset %" PRIu64 ": the source truncated %s.%s, a partition the target's tables as applyd read them lack: reading them again",
				 offset, schema, table);
			a->truncate_reload_lsn = commit_lsn;
			rc = apply_reconnect();
			break;
		}
		log_error("stream offset %" PRIu64 ": the source truncated %s.%s, a partition of flow table %s.%s, and the target has no partition of that name under it: the rows it held cannot be found on the target",
			  offset, schema, table, root_schema, root_table);
		char *config = strbuf_shell_quote(a->cfg->path);
		log_hint("copy the table again: \"trellara reseed --config %s --table %s.%s\" (the copy's watermark passes this truncate), then start applyd again",
			 config, root_schema, root_table);
		free(config);
		rc = apply_exit(EXIT_CONFIG);
		break;
	}
	}
	jsonread_free(v);
	return rc;
}

/* Apply the changes of one envelope inside the open target transaction.
 * APPLY_FAILED: the statement error is apply_engine_error()'s. */
struct apply_outcome apply_engine_send_changes(struct apply_engine *a, const uint8_t *payload, size_t len,
					       uint64_t offset, uint64_t commit_lsn, uint64_t max_changes,
					       uint64_t *changes, uint64_t *decoded)
{
	uint64_t taken = 0;
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
	const struct apply_table **table_of = xcalloc(nrel ? nrel : 1, sizeof *table_of);
	const char ***types = xcalloc(nrel ? nrel : 1, sizeof *types);
	const char ***eqs = xcalloc(nrel ? nrel : 1, sizeof *eqs);
	for (uint32_t i = 0; i < nrel; i++) {
		const struct env_relation *r = &d.header.relations[i];
		prel[i].rel = r;
		struct apply_table *t;
		const char *root;
		verdict[i] = apply_core_relation(&a->tables, r, commit_lsn, &t, &root);
		if (verdict[i] == APPLY_RELATION_UNPUBLISHED_PARTITION) {
			log_error("stream offset %" PRIu64 ": changes to %.*s.%.*s, a partition of %s, arrive under the partition's own name: the publication does not publish via the partition root",
				  offset, (int)r->schema_len, r->schema, (int)r->name_len, r->name, root);
			char *config = strbuf_shell_quote(a->cfg->path), *table = strbuf_shell_quote(root);
			log_hint("ALTER PUBLICATION %s SET (publish_via_partition_root = true) on the source (\"trellara check --config %s\" checks it), then \"trellara reseed --config %s --table %s\": the changes sent so far under the partition's name are not applied",
				 a->cfg->publication, config, config, table);
			free(config);
			free(table);
			rc = apply_exit(EXIT_CONFIG);
			break;
		}
		if (verdict[i] == APPLY_RELATION_UNCONFIGURED)
			continue;
		table_of[i] = t;
		types[i] = xcalloc(r->n_columns ? r->n_columns : 1, sizeof **types);
		eqs[i] = xcalloc(r->n_columns ? r->n_columns : 1, sizeof **eqs);
		apply_core_column_types(t, r, types[i], eqs[i]);
		prel[i].col_types = types[i];
		prel[i].col_eq = eqs[i];
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
	uint32_t *kept = NULL;
	while (apply_is_ok(rc) && taken < max_changes && (step = env_decode_next(&d, &c)) == 1) {
		taken++;
		if (decoded)
			(*decoded)++;
		struct env_change filtered;
		if (c->op == ENV_MESSAGE && c->message_prefix_len == strlen(TRUNCATE_MESSAGE_PREFIX) &&
		    memcmp(c->message_prefix, TRUNCATE_MESSAGE_PREFIX, c->message_prefix_len) == 0) {
			rc = partition_truncate(a, c, commit_lsn, offset);
			continue;
		}
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
		if (a->folding && (c->op == ENV_INSERT || c->op == ENV_UPDATE || c->op == ENV_DELETE)) {
			enum apply_fold_mode mode = apply_core_fold_mode(table_of[c->relation], prel[c->relation].key != NULL);
			rc = apply_engine_fold_change(a, &prel[c->relation], mode, c, offset);
		} else {
			/* a TRUNCATE comes after everything before it */
			if (a->folding && c->op == ENV_TRUNCATE)
				rc = apply_engine_fold_flush(a);
			if (apply_is_ok(rc))
				rc = apply_engine_send_planned(a, prel, nrel, c, offset);
		}
		if (apply_is_ok(rc) && c->op != ENV_MESSAGE)
			(*changes)++;
	}
	if (step < 0 && apply_is_ok(rc)) {
		log_error("stream offset %" PRIu64 ": %s", offset, d.error);
		rc = apply_exit(EXIT_DATAERR);
	}
	for (uint32_t i = 0; i < nrel; i++) {
		free(keys[i]);
		free(identity[i]);
		free(types[i]);
		free(eqs[i]);
	}
	free(types);
	free(eqs);
	free(table_of);
	free(kept);
	free(keys);
	free(identity);
	free(verdict);
	free(prel);
	env_decoder_free(&d);
	return rc;
}

/* A batch or a single transaction failed: decide what to do. */
struct apply_outcome apply_engine_handle_failure(struct apply_engine *a, uint32_t xid, uint64_t commit_lsn,
						 uint64_t offset)
{
	if (a->n_flights || a->flight_failure.failed)
		return apply_engine_parallel_failure(a, xid, commit_lsn, offset);
	struct apply_target_error err = *apply_engine_error(a);
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
	return apply_engine_quarantine(a, xid, commit_lsn, offset, apply_core_quarantine_reason(err.sqlstate), detail,
				       EXIT_NEGATIVE);
}

struct apply_outcome apply_txn_frame(struct apply_engine *a, const struct stream_frame *f)
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
	struct apply_outcome rc = apply_engine_fence_check(a, s.commit_lsn, f->header.offset, &hold);
	if (!apply_is_ok(rc) || hold)
		return rc;
	const struct quarantine_entry *replay = apply_engine_replay_entry(a, s.xid, s.commit_lsn);
	bool alone = replay != NULL || a->single_mode;
	if (alone && a->in_txn) {
		/* what came before goes in its own target transaction */
		uint64_t keep = a->next_offset;
		rc = apply_engine_commit_batch(a);
		if (rc.status == APPLY_FAILED)
			return apply_engine_handle_failure(a, a->last_xid, a->last_commit_lsn, keep);
		if (!apply_is_ok(rc))
			return rc;
	}
	if (apply_engine_begin_txn(a, f->header.offset, !alone) < 0)
		return apply_engine_handle_failure(a, s.xid, s.commit_lsn, f->header.offset);
	uint64_t changes = 0;
	/* whole transactions of a batch fold; one applied alone (the culprit
	 * hunt, a replay) goes statement by statement, as it came */
	a->folding = !alone && a->cfg->apply_compaction;
	rc = apply_engine_send_changes(a, f->payload, f->header.payload_length, f->header.offset, s.commit_lsn,
				       UINT64_MAX, &changes, NULL);
	a->folding = false;
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
		rc = apply_engine_resolve_quarantine(a, replay, f->header.offset) < 0 ? apply_failed() : apply_ok();
	if (apply_is_ok(rc) && (alone || a->batch_txns >= a->cfg->apply_batch_transactions))
		rc = apply_engine_commit_batch(a);
	if (rc.status == APPLY_FAILED)
		return apply_engine_handle_failure(a, s.xid, s.commit_lsn, f->header.offset);
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

