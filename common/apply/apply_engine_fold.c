/*
 * apply_engine_fold.c - batch compaction in the engine (apply_engine.h,
 * COMPACTION in trellara-applyd(1)): the row changes of an open batch go
 * into a segment (apply_fold.h) instead of straight to the target; the
 * segment is sent as its net changes, runs of them one statement each
 * (plan_change_set), before the checkpoint is written, and earlier where
 * the stream's order has to be kept (a barrier: TRUNCATE, a table whose
 * triggers fire for a replica or that asks for no compaction, a change
 * that cannot fold, a relation whose descriptor changed).
 *
 * The segment belongs to the open target transaction: apply_engine_begin_txn empties
 * it, so whatever a rollback, a reconnect or a rewind abandoned is never
 * sent with a later batch.
 */
#include "apply_engine_internal.h"

#include "trellara/apply_deps.h"
#include "trellara/defaults.h"
#include "trellara/log.h"
#include "trellara/xalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A segment sends itself once it has taken this many changes: memory stays bounded
 * whatever apply.batch_transactions is. */
#define FOLD_MAX_CHANGES 20000

/* Plans c and sends it: one statement. */
static struct apply_outcome send_one(struct apply_engine *a, const struct plan_relation *rels, uint32_t n_rels,
				     const struct env_change *c, uint64_t tag)
{
	char err[512];
	int planned = plan_change(a->cfg->checkpoint_schema, rels, n_rels, c, a->single_mode, &a->stmt, err, sizeof err);
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
			own->tag = tag;
		}
		return apply_failed();
	}
	if (planned == 1)
		return apply_ok();
	if (a->ops->change(a->t, rels, n_rels, c, &a->stmt, tag) < 0)
		return apply_failed();
	a->batch_statements++;
	return apply_ok();
}

/* A change sent by itself, outside the segment: nothing runs beside it
 * (a barrier, apply_engine_parallel.c).  The segment's own changes were
 * given to the tracker by their keys and go through send_one. */
struct apply_outcome apply_engine_send_planned(struct apply_engine *a, const struct plan_relation *rels, uint32_t n_rels,
				  const struct env_change *c, uint64_t tag)
{
	if (a->batch_parallel && apply_engine_barrier(a) < 0)
		return apply_failed();
	return send_one(a, rels, n_rels, c, tag);
}

/* n compatible net changes idx[0..n): one statement (copy: a COPY of
 * inserts) when they can be one, else one each. */
static struct apply_outcome send_piece(struct apply_engine *a, const struct plan_relation *rels, uint32_t n_rels,
				       const size_t *idx, size_t n, bool copy)
{
	uint64_t tag = 0;
	if (n > a->set_cap) {
		a->set_cap = n;
		a->set_run = xrealloc(a->set_run, n * sizeof *a->set_run);
	}
	for (size_t k = 0; k < n; k++) {
		const struct fold_change *fc = fold_get(a->fold, idx[k]);
		a->set_run[k] = &fc->change;
		if (fc->tag > tag)
			tag = fc->tag;
	}
	if (n >= 2 && a->ops->change_set) {
		char err[512];
		int planned = copy ? plan_copy_set(rels, n_rels, a->set_run, n, &a->stmt, err, sizeof err)
				   : plan_change_set(a->cfg->checkpoint_schema, rels, n_rels, a->set_run, n, &a->stmt, err,
						     sizeof err);
		if (planned < 0) {
			log_error("apply: %s", err); /* a fold output the planner rejects: our bug */
			return apply_exit(EXIT_DATAERR);
		}
		if (planned == 0) {
			if (a->ops->change_set(a->t, rels, n_rels, a->set_run, n, &a->stmt, tag) < 0)
				return apply_failed();
			a->batch_statements++;
			a->batch_copies += copy;
			return apply_ok();
		}
		if (copy) { /* not as a COPY: as set statements */
			struct apply_outcome rc = apply_ok();
			for (size_t k = 0, piece; k < n && apply_is_ok(rc); k += piece) {
				piece = plan_set_piece(rels, &fold_get(a->fold, idx[k])->change, n - k);
				rc = send_piece(a, rels, n_rels, idx + k, piece ? piece : 1, false);
			}
			return rc;
		}
	}
	for (size_t k = 0; k < n; k++) {
		struct apply_outcome rc = send_one(a, rels, n_rels, a->set_run[k], fold_get(a->fold, idx[k])->tag);
		if (!apply_is_ok(rc))
			return rc;
	}
	return apply_ok();
}

/* The net changes idx[0..n), runs of compatible ones as set statements. */
static struct apply_outcome send_list(struct apply_engine *a, const struct plan_relation *rels, uint32_t n_rels,
				      const size_t *idx, size_t n)
{
	struct apply_outcome rc = apply_ok();
	size_t i = 0;
	while (i < n && apply_is_ok(rc)) {
		size_t run = 1;
		while (i + run < n &&
		       plan_set_compatible(rels, n_rels, &fold_get(a->fold, idx[i])->change,
					   &fold_get(a->fold, idx[i + run])->change))
			run++;
		while (run && apply_is_ok(rc)) {
			const struct env_change *first = &fold_get(a->fold, idx[i])->change;
			bool copy = a->cfg->apply_copy_inserts && first->op == ENV_INSERT && run >= APPLY_COPY_MIN_ROWS;
			size_t piece = copy ? plan_copy_piece(run) : plan_set_piece(rels, first, run);
			if (piece == 0 || piece > run)
				piece = 1;
			rc = send_piece(a, rels, n_rels, idx + i, piece, copy);
			i += piece;
			run -= piece;
		}
	}
	return rc;
}

/* In a batch beside others: the changes whose keys no batch in flight
 * holds go first, then, once the holders committed, the others.  A
 * barrier among them (a keyless update or delete): every batch in
 * flight committed first, and the segment in its order. */
static struct apply_outcome send_tracked(struct apply_engine *a, const struct plan_relation *rels, uint32_t n_rels,
					 size_t *idx, size_t n)
{
	size_t n_free = 0, n_held = 0;
	uint64_t wait = 0;
	bool barrier = false;
	size_t *held = n ? xcalloc(n, sizeof *held) : NULL;
	/* per relation once: its table and the tracker's number */
	const struct apply_table **tables = xcalloc(n_rels ? n_rels : 1, sizeof *tables);
	uint32_t *numbers = xcalloc(n_rels ? n_rels : 1, sizeof *numbers);
	for (uint32_t r = 0; r < n_rels; r++) {
		const struct env_relation *er = rels[r].rel;
		tables[r] = apply_tables_find(&a->tables, er->schema, er->schema_len, er->name, er->name_len);
		numbers[r] = apply_engine_relation_number(er);
	}
	for (size_t i = 0; i < n; i++) {
		const struct fold_change *fc = fold_get(a->fold, i);
		const struct plan_relation *pr = &rels[fc->change.relation];
		uint64_t h = apply_engine_depends(a, pr, tables[fc->change.relation], numbers[fc->change.relation], &fc->change);
		if (h == APPLY_DEPS_BROKEN) {
			free(held);
			free(tables);
			free(numbers);
			log_error("apply: the dependency tracker refused batch %" PRIu64 " (a bug)", a->batch_seq);
			return apply_exit(EXIT_DATAERR);
		}
		if (!pr->key && fc->change.op != ENV_INSERT)
			barrier = true;
		if (h > wait)
			wait = h;
		if (h)
			held[n_held++] = i;
		else
			idx[n_free++] = i;
	}
	free(tables);
	free(numbers);
	struct apply_outcome rc = apply_ok();
	if (barrier || !wait) {
		for (size_t i = 0; i < n; i++)
			idx[i] = i;
		if (barrier ? a->n_flights > 0 : wait != 0) {
			a->stats.dependency_waits++;
			if ((barrier ? apply_engine_drain(a) : apply_engine_wait_for(a, wait)) < 0)
				rc = apply_failed();
		}
		if (apply_is_ok(rc))
			rc = send_list(a, rels, n_rels, idx, n);
		free(held);
		return rc;
	}
	rc = send_list(a, rels, n_rels, idx, n_free);
	if (apply_is_ok(rc)) {
		a->stats.dependency_waits++;
		if (apply_engine_wait_for(a, wait) < 0)
			rc = apply_failed();
	}
	if (apply_is_ok(rc))
		rc = send_list(a, rels, n_rels, held, n_held);
	free(held);
	return rc;
}

void apply_engine_fold_shrink(struct apply_engine *a)
{
	bool released = apply_deps_shrink(a->deps);
	if (fold_shrink(a->fold)) {
		/* and the arrays the flush sized for that segment */
		free(a->set_run);
		free(a->idx);
		a->set_run = NULL;
		a->idx = NULL;
		a->set_cap = a->idx_cap = 0;
		released = true;
	}
	if (released)
		a->stats.memory_released++;
}

struct apply_outcome apply_engine_fold_flush(struct apply_engine *a)
{
	size_t n = fold_count(a->fold);
	uint32_t n_rels = 0;
	const struct plan_relation *rels = fold_relations(a->fold, &n_rels);
	if (n > a->idx_cap) {
		a->idx_cap = n;
		a->idx = xrealloc(a->idx, n * sizeof *a->idx);
	}
	struct apply_outcome rc;
	if (a->batch_parallel) {
		rc = send_tracked(a, rels, n_rels, a->idx, n);
	} else {
		for (size_t i = 0; i < n; i++)
			a->idx[i] = i;
		rc = send_list(a, rels, n_rels, a->idx, n);
	}
	/* what the segment took less what it sent */
	a->batch_folded += fold_pending(a->fold) - n;
	fold_reset(a->fold);
	return rc;
}

void apply_engine_fold_forget(struct apply_engine *a)
{
	fold_reset(a->fold);
	a->batch_statements = a->batch_folded = a->batch_copies = 0;
}

/* The fold's index of pr, flushing the segment first when pr's table
 * changed its shape inside it; -1: refused even by an empty segment. */
static int fold_relation_of(struct apply_engine *a, const struct plan_relation *pr, bool merge, struct apply_outcome *rc)
{
	int rel = fold_relation(a->fold, pr, merge);
	if (rel >= 0)
		return rel;
	*rc = apply_engine_fold_flush(a);
	if (!apply_is_ok(*rc))
		return -1;
	rel = fold_relation(a->fold, pr, merge);
	if (rel < 0)
		*rc = apply_exit(EXIT_DATAERR);
	return rel;
}

struct apply_outcome apply_engine_fold_change(struct apply_engine *a, const struct plan_relation *pr, enum apply_fold_mode mode,
				 const struct env_change *c, uint64_t tag)
{
	struct env_change one = *c;
	one.relation = 0;
	struct apply_outcome rc = apply_ok();
	if (mode == APPLY_FOLD_BARRIER) {
		rc = apply_engine_fold_flush(a);
		return apply_is_ok(rc) ? apply_engine_send_planned(a, pr, 1, &one, tag) : rc;
	}
	bool merge = mode == APPLY_FOLD_MERGE;
	int rel = fold_relation_of(a, pr, merge, &rc);
	if (rel < 0)
		return rc;
	enum fold_result r = fold_add(a->fold, (uint32_t)rel, &one, tag);
	if (r == FOLD_CONFLICT) {
		/* what the segment holds for the key goes first */
		if (!apply_is_ok(rc = apply_engine_fold_flush(a)) || (rel = fold_relation_of(a, pr, merge, &rc)) < 0)
			return rc;
		r = fold_add(a->fold, (uint32_t)rel, &one, tag);
		if (r == FOLD_CONFLICT) {
			log_error("apply: a change the empty segment refused (stream offset %" PRIu64 ")", tag);
			return apply_exit(EXIT_DATAERR);
		}
	}
	if (r == FOLD_ALONE) {
		rc = apply_engine_fold_flush(a);
		return apply_is_ok(rc) ? apply_engine_send_planned(a, pr, 1, &one, tag) : rc;
	}
	if (fold_pending(a->fold) >= FOLD_MAX_CHANGES)
		return apply_engine_fold_flush(a);
	return apply_ok();
}
