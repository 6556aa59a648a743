/*
 * apply_deps.h - the dependency tracker of parallel apply (issue 13).
 * Pure: no libpq, no clock, no threads.  Owns: a copy of every key it
 * holds (an arena); borrows nothing after a call returns.
 *
 * Used by parallel apply (apply_engine_parallel.c; apply.workers > 1).
 *
 * The contract.  applyd runs batches (target transactions of many
 * whole source transactions) on N target connections and commit them
 * strictly in order: batch k only after batch k-1.  A batch may START on a
 * free connection while earlier batches are uncommitted only if it touches
 * no key an uncommitted earlier batch touched; else it waits until that
 * batch committed.  Barriers (TRUNCATE, a DDL frame, a fence, a change of
 * a keyless table, a chunk set) depend on every earlier uncommitted batch,
 * and every later batch depends on an uncommitted barrier: nothing runs
 * beside a barrier.
 *
 * Batches are numbered by a strictly increasing uint64 sequence (never
 * reused, the first is 1).  A batch BEGINS with its first touch or
 * barrier; a batch the tracker never saw holds nothing and no barrier
 * waits for it (it has no changes; the in-order commit still orders it).
 * A batch is LIVE from its beginning until it is committed or abandoned.
 *
 * Keys are (rel, bytes): rel a small number the caller assigns per
 * relation, bytes an opaque encoding the tracker only compares (equal
 * length and equal bytes; "ab" and "abc" differ).  A change touches its
 * replica-identity key and every unique key value it writes; the caller
 * encodes them.
 *
 * The answers.  apply_deps_touch(d, b, rel, key, len): the highest live
 * batch below b that touched (rel, key) or had a barrier, 0 for none; it
 * records that b touches (rel, key).  Touching the same key again in the
 * same batch gives the same answer again (while the holders stay live).
 * apply_deps_barrier(d, b): the highest live batch below b, 0 for none; it
 * records the barrier.  The caller waits for the batch answered (waiting
 * for it waits for every earlier one too: commits are in order).
 *
 * apply_deps_committed(d, c): every batch <= c committed, their keys are
 * free.  A c at or below an earlier one says nothing new (no-op).  A c
 * above every batch begun is allowed (batches the tracker never saw); no
 * batch <= c may begin after it.
 *
 * apply_deps_abandon(d, b): every batch >= b rolled back; their keys are
 * free, and a key an abandoned batch took over holds its earlier live
 * holder again.  Later calls use numbers above every batch seen so far.
 *
 * Memory: when no batch is live (after a commit or abandon) every key and
 * the arena are released, so a long run does not grow without bound; when
 * the table must grow, only keys of live batches are carried over (in a
 * new arena), so memory stays bounded by the keys of live batches.
 *
 * Caller bugs fail closed, never undefined behaviour.  These BREAK the
 * tracker: a touch or barrier with batch 0 or UINT64_MAX, with a batch
 * below the highest number seen (begun, committed or abandoned), or with
 * that highest number when it is no longer live (a touch after its commit
 * or abandon); a touch with key NULL and len > 0; an abandon of a
 * committed batch (batch <= the committed watermark).  That call records
 * nothing; it and every later touch and barrier answer APPLY_DEPS_BROKEN
 * (UINT64_MAX, a batch that never commits), which the caller must treat as
 * an error and stop applying in parallel.  A broken tracker ignores
 * committed and abandon; held answers what it held; apply_deps_broken says
 * whether it is broken.  A commit at or below the watermark is no misuse
 * (it says nothing new).
 */
#ifndef TRELLARA_APPLY_DEPS_H
#define TRELLARA_APPLY_DEPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define APPLY_DEPS_BROKEN UINT64_MAX

struct apply_deps;

struct apply_deps *apply_deps_new(void);
void apply_deps_free(struct apply_deps *d);

/* batch (>= every batch begun before, and not yet committed or abandoned)
 * touches (rel, key[0..len)): returns the highest EARLIER live batch that
 * touched the same (rel, key) or had a barrier (0: none), and records that
 * batch touches it.  APPLY_DEPS_BROKEN: a caller bug (see above). */
uint64_t apply_deps_touch(struct apply_deps *d, uint64_t batch, uint32_t rel, const void *key, size_t len);

/* a barrier in batch: returns the highest earlier live batch (0: none). */
uint64_t apply_deps_barrier(struct apply_deps *d, uint64_t batch);

/* every batch <= batch committed (commits are in order): their keys are free. */
void apply_deps_committed(struct apply_deps *d, uint64_t batch);

/* Nothing left to undo: the undo log's array is freed when a large batch
 * grew it (for an idle applier); true if it was. */
bool apply_deps_shrink(struct apply_deps *d);

/* every batch >= batch rolled back: their keys are free; later calls use new, higher batch numbers. */
void apply_deps_abandon(struct apply_deps *d, uint64_t batch);

/* keys currently held by live batches (for tests and metrics) */
size_t apply_deps_held(const struct apply_deps *d);

/* whether a caller bug broke the tracker (every touch and barrier answers APPLY_DEPS_BROKEN) */
bool apply_deps_broken(const struct apply_deps *d);

#endif
