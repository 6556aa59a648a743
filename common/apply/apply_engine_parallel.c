/*
 * apply_engine_parallel.c - parallel apply (PARALLEL APPLY in
 * trellara-applyd(1), DESIGN §8): with apply.workers > 1 a batch's COMMIT
 * is sent and the next batch opened on another connection before the
 * outcome is read.  Batches still commit in order: a batch's checkpoint
 * and COMMIT are sent only after the batch before it committed, and the
 * target checks it: the checkpoint update locks the row and fails unless
 * it is where that batch left it (apply_target_ops.write_checkpoint), so
 * batch k never commits unless batch k-1 did.  Outcomes are read oldest
 * first.
 *
 * Rows.  Two uncommitted batches never write one row: every net change
 * of a parallel batch is given to the dependency tracker (apply_deps.h)
 * by its table and key before it is sent; a change whose key an earlier
 * batch in flight holds is sent after that batch was collected.  A
 * change sent by itself (apply_engine_send_planned: TRUNCATE, tables
 * that do not fold, a key change, an update or delete of a keyless
 * table) is a barrier: every batch in flight is collected first, and
 * every later batch waits for this one.
 *
 * Failure.  When a batch in flight, or the open batch beside them,
 * fails, whatever has not committed is rolled back; the earliest failing
 * batch is handed to apply_engine_handle_failure as if it had been the
 * only batch, and everything read up to then is applied again one batch
 * at a time on one connection (serial_until), where lock waits are not
 * bounded.
 */
#include "apply_engine_internal.h"

#include "trellara/apply_deps.h"
#include "trellara/defaults.h"
#include "trellara/fault.h"
#include "trellara/log.h"
#include "trellara/xalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void apply_engine_add_worker(struct apply_engine *e, void *t)
{
	if (!e->ops->submit || !e->ops->commit_submit || !e->ops->collect)
		return;
	e->sessions = xrealloc(e->sessions, (size_t)(e->n_sessions + 1) * sizeof *e->sessions);
	e->sessions[e->n_sessions++] = t;
	e->flights = xrealloc(e->flights, (size_t)e->n_sessions * sizeof *e->flights);
}

bool apply_engine_may_overlap(const struct apply_engine *a)
{
	return a->n_sessions > 1 && !a->single_mode && a->next_offset >= a->serial_until && !a->chunk.active;
}

static bool session_in_flight(const struct apply_engine *a, int s)
{
	for (int i = 0; i < a->n_flights; i++)
		if (a->flights[i].session == s)
			return true;
	return false;
}

/* The oldest flight, off the queue. */
static struct apply_flight pop_flight(struct apply_engine *a)
{
	struct apply_flight f = a->flights[0];
	memmove(a->flights, a->flights + 1, (size_t)(a->n_flights - 1) * sizeof *a->flights);
	a->n_flights--;
	return f;
}

/* The failure of flight f; the earliest batch's is the one kept. */
static int flight_failed(struct apply_engine *a, const struct apply_flight *f)
{
	if (!a->flight_failure.failed || f->seq < a->flight_failure.flight.seq) {
		a->flight_failure.failed = true;
		a->flight_failure.error = *a->ops->error(a->sessions[f->session]);
		a->flight_failure.flight = *f;
	}
	return -1;
}

/* Flight f's statements all succeeded (their row counts read): its
 * checkpoint and COMMIT go after them.  f is the oldest flight: every
 * batch before it committed, so the row is where f's predecessor left
 * it (the lock and the check only guard against a batch that did not). */
static int advance(struct apply_engine *a, struct apply_flight *f)
{
	void *t = a->sessions[f->session];
	if (a->ops->collect(t) < 0 || a->ops->write_checkpoint(t, &f->prev, &f->next, f->end_offset) < 0)
		return flight_failed(a, f);
	fault_point("applyd.before_target_commit");
	if (a->ops->commit_submit(t, f->end_offset) < 0)
		return flight_failed(a, f);
	f->committing = true;
	return 0;
}

/* The oldest flight's outcome.  Committed: the checkpoint and the
 * counters move.  -1: its failure is kept (flight_failure). */
static int collect_one(struct apply_engine *a)
{
	if (!a->flights[0].committing && advance(a, &a->flights[0]) < 0) {
		pop_flight(a);
		return -1;
	}
	struct apply_flight f = pop_flight(a);
	void *t = a->sessions[f.session];
	if (a->ops->collect(t) < 0) {
		/* its COMMIT failed (a deferred constraint, a lost
		 * connection): later batches may be in flight, their
		 * statements sent, their COMMITs not */
		fault_point("applyd.after_commit_failed");
		return flight_failed(a, &f);
	}
	fault_point("applyd.after_target_commit_before_group_ack");
	a->cp = f.next;
	a->committed_seq = f.seq;
	apply_deps_committed(a->deps, f.seq);
	a->stats.transactions += f.txns;
	a->stats.changes += f.changes;
	a->stats.skipped_duplicates += f.skipped;
	a->stats.skipped_by_watermark += f.filtered;
	a->stats.batches++;
	a->stats.statements += f.statements;
	a->stats.folded += f.folded;
	a->stats.copies += f.copies;
	if (f.overlapped)
		a->stats.overlapped++;
	a->progress_txns += f.txns;
	a->transient_retries = 0;
	a->group_pending = true;
	return 0;
}

int apply_engine_drain(struct apply_engine *a)
{
	while (a->n_flights)
		if (collect_one(a) < 0)
			return -1;
	return a->flight_failure.failed ? -1 : 0;
}

int apply_engine_wait_for(struct apply_engine *a, uint64_t seq)
{
	while (a->n_flights && a->flights[0].seq <= seq)
		if (collect_one(a) < 0)
			return -1;
	return 0;
}

int apply_engine_barrier(struct apply_engine *a)
{
	if (a->batch_parallel && a->batch_seq)
		(void)apply_deps_barrier(a->deps, a->batch_seq); /* later batches wait for this one */
	return apply_engine_drain(a);
}

struct apply_outcome apply_engine_submit(struct apply_engine *a, struct apply_checkpoint prev,
					 const struct apply_checkpoint *next)
{
	struct apply_flight f = {
		.session = a->cur,
		.seq = a->batch_seq,
		.prev = prev,
		.next = *next,
		.txns = a->batch_txns,
		.changes = a->batch_changes,
		.skipped = a->batch_skipped,
		.filtered = a->batch_filtered,
		.statements = a->batch_statements,
		.folded = a->batch_folded,
		.copies = a->batch_copies,
		.first_offset = a->batch_first_offset,
		.end_offset = a->next_offset,
		.last_xid = a->last_xid,
		.last_commit_lsn = a->last_commit_lsn,
		.overlapped = a->n_flights > 0,
	};
	if (a->ops->submit(a->t) < 0) {
		a->in_txn = false;
		return apply_failed();
	}
	a->flights[a->n_flights++] = f;
	a->chain = *next;
	a->in_txn = false;
	a->batch_seq = 0;
	a->batch_txns = a->batch_changes = a->batch_skipped = a->batch_filtered = 0;
	a->batch_statements = a->batch_folded = a->batch_copies = 0;
	/* The batch before it: its checkpoint and COMMIT, once the one
	 * before that committed.  Sending in order is not enough: two
	 * backends may take the checkpoint row's lock in either order, and a
	 * batch that took it first would find the row short of where its
	 * predecessor leaves it.  So one batch at a time is committing. */
	while (a->n_flights > 1) {
		if (a->flights[0].committing) {
			if (collect_one(a) < 0)
				return apply_failed();
			continue;
		}
		if (advance(a, &a->flights[0]) < 0) {
			pop_flight(a);
			return apply_failed();
		}
		break;
	}
	/* the next batch (and anything outside one) goes to a free connection */
	if (a->n_flights == a->n_sessions && collect_one(a) < 0)
		return apply_failed();
	for (int k = 1; k <= a->n_sessions; k++) {
		int s = (a->cur + k) % a->n_sessions;
		if (!session_in_flight(a, s)) {
			a->cur = s;
			break;
		}
	}
	a->t = a->sessions[a->cur];
	if (a->group_pending && a->now_us - a->last_group_write_us >= 200000 && apply_engine_group_flush(a) < 0)
		return apply_exit(EXIT_CANTCREAT);
	return apply_ok();
}

/* FNV-1a over the table's name: the tracker's relation number.  Two
 * tables on one number only make a batch wait that need not. */
uint32_t apply_engine_relation_number(const struct env_relation *r)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < r->schema_len; i++)
		h = (h ^ (uint8_t)r->schema[i]) * 16777619u;
	h = (h ^ '.') * 16777619u;
	for (size_t i = 0; i < r->name_len; i++)
		h = (h ^ (uint8_t)r->name[i]) * 16777619u;
	return h;
}

/* Its replica-identity key (the tracker's relation: the table's number)
 * and, for an insert or update, each unique index's values (the
 * relation: the table's number mixed with the index's). */
uint64_t apply_engine_depends(struct apply_engine *a, const struct plan_relation *pr, const struct apply_table *table,
			      uint32_t rel, const struct env_change *c)
{
	if (!pr->key)
		/* a keyless table: an insert touches no key; an update or a
		 * delete matches rows by every column, so it is a barrier */
		return c->op == ENV_INSERT ? 0 : apply_deps_barrier(a->deps, a->batch_seq);
	const struct env_tuple *t = c->op == ENV_DELETE ? &c->old_tuple : &c->new_tuple;
	a->deps_key.len = 0;
	for (uint16_t i = 0; i < t->n; i++) {
		if (!pr->key[i])
			continue;
		const struct env_value *v = &t->values[i];
		if (v->kind == ENV_UNCHANGED_TOAST)
			return apply_deps_barrier(a->deps, a->batch_seq);
		buf_put_u8(&a->deps_key, v->kind);
		if (v->kind == ENV_TEXT) {
			buf_put_u32(&a->deps_key, v->len);
			buf_put(&a->deps_key, v->data, v->len);
		}
	}
	uint64_t wait = apply_deps_touch(a->deps, a->batch_seq, rel, a->deps_key.data, a->deps_key.len);
	if (c->op == ENV_DELETE)
		return wait; /* the old tuple holds the key only; what it frees is another batch's wait, not a conflict */
	/* every unique value it writes (a NULL takes no value; one unchanged
	 * is not written) */
	const struct env_relation *r = pr->rel;
	for (int u = 0; table && u < table->n_unique; u++) {
		uint16_t cols[64];
		if (table->unique[u].n_cols > 64)
			continue;
		int n = apply_core_unique_columns(table, r, u, cols);
		a->deps_key.len = 0;
		bool whole = n > 0;
		for (int k = 0; k < n && whole; k++) {
			const struct env_value *v = cols[k] < t->n ? &t->values[cols[k]] : NULL;
			if (!v || v->kind != ENV_TEXT) {
				whole = false;
				break;
			}
			buf_put_u32(&a->deps_key, v->len);
			buf_put(&a->deps_key, v->data, v->len);
		}
		if (!whole)
			continue;
		uint64_t h = apply_deps_touch(a->deps, a->batch_seq, rel ^ (0x9e3779b9u * (uint32_t)(u + 1)),
					      a->deps_key.data, a->deps_key.len);
		if (h > wait)
			wait = h;
	}
	return wait;
}

void apply_engine_flights_lost(struct apply_engine *a)
{
	a->n_flights = 0;
	memset(&a->flight_failure, 0, sizeof a->flight_failure);
	if (a->next_seq > a->committed_seq + 1)
		apply_deps_abandon(a->deps, a->committed_seq + 1);
	a->batch_seq = 0;
	a->cur = 0;
	if (a->sessions)
		a->t = a->sessions[0];
}

struct apply_outcome apply_engine_parallel_failure(struct apply_engine *a, uint32_t xid, uint64_t commit_lsn,
						   uint64_t offset)
{
	uint64_t read_end = a->next_offset;
	struct apply_target_error err = { 0 };
	struct apply_flight failed = {
		.first_offset = a->batch_first_offset,
		.end_offset = a->next_offset,
		.txns = a->batch_txns,
		.last_xid = xid,
		.last_commit_lsn = commit_lsn,
	};
	(void)offset;
	bool open_failed = !a->flight_failure.failed;
	if (open_failed)
		err = *apply_engine_error(a);
	if (a->in_txn) {
		a->ops->rollback(a->t);
		a->in_txn = false;
	}
	/* the batches before the failing one may well commit */
	while (a->n_flights && (!a->flight_failure.failed || a->flights[0].seq < a->flight_failure.flight.seq))
		if (collect_one(a) < 0)
			break;
	bool unknown = false;
	if (a->flight_failure.failed) {
		err = a->flight_failure.error;
		failed = a->flight_failure.flight;
	}
	/* the later ones cannot commit after it: read and roll back */
	while (a->n_flights) {
		struct apply_flight f = pop_flight(a);
		void *t = a->sessions[f.session];
		if (a->ops->collect(t) == 0 && f.committing)
			unknown = true;
		a->ops->rollback(t);
	}
	for (int s = 0; s < a->n_sessions; s++)
		a->ops->clear_error(a->sessions[s]);
	apply_engine_flights_lost(a);
	a->chain = a->cp;
	if (read_end > a->serial_until)
		a->serial_until = read_end;
	a->stats.serial_fallbacks++;
	if (unknown || err.connection_lost) {
		if (unknown)
			log_warn("parallel apply: a batch committed although the one before it failed (SQLSTATE %s: %s); reading the target's checkpoint again",
				 err.sqlstate, err.message);
		else
			log_warn("target connection lost: %s", err.message);
		return apply_reconnect();
	}
	log_warn("parallel apply: the batch at stream offsets %" PRIu64 "..%" PRIu64 " failed (SQLSTATE %s); what did not commit is rolled back and applied again one batch at a time up to offset %" PRIu64,
		 failed.first_offset, failed.end_offset, err.sqlstate, a->serial_until);
	/* the failing batch, as if it had been the only one */
	a->own_error = err;
	a->own_error.failed = true;
	a->batch_first_offset = failed.first_offset;
	a->next_offset = failed.end_offset;
	a->batch_txns = failed.txns;
	a->last_xid = failed.last_xid;
	a->last_commit_lsn = failed.last_commit_lsn;
	return apply_engine_handle_failure(a, failed.last_xid, failed.last_commit_lsn, failed.first_offset);
}
