/*
 * apply_fold.h - batch compaction (issue 13): the net effect of a segment of
 * row changes per (relation, replica-identity key).  Pure: no libpq, no clock.
 * Owns: copies of every relation descriptor, mask and value it keeps (an arena);
 * borrows nothing after a call returns.
 *
 * Why it is sound.  A target transaction covers a batch of whole source
 * transactions, committed atomically, under session_replication_role =
 * replica (no foreign key or ordinary trigger fires): nobody sees the
 * states between its statements, so only the net effect per row matters.
 *
 * The rules (the contract trellara-applyd(1) cites).
 *
 * The key of a change is the byte values (kind, length, bytes) of its
 * relation's key[] columns, taken from the old tuple when old_kind != 0,
 * else from the new tuple.  A key column whose value is unchanged TOAST
 * makes the change FOLD_ALONE.  Per key the segment holds one entry in one
 * of these states:
 *   absent  nothing to send (never seen, or inserted then deleted/moved);
 *   INS     a full image to insert;
 *   UPD     an image to update by the key; a column never sent stays
 *           ENV_UNCHANGED_TOAST (left out of SET);
 *   DEL     the key to delete;
 *   DELINS  the key deleted, then a full image inserted.
 *
 *   change                      absent   INS        UPD       DEL       DELINS
 *   insert                      INS      CONFLICT   CONFLICT  DELINS    CONFLICT
 *   update, key unchanged       UPD      INS+       UPD+      CONFLICT  DELINS+
 *   update K -> K' (row moves)  ALONE    see below  ALONE     ALONE     see below
 *   delete                      DEL      absent     DEL       CONFLICT  DEL
 *
 *   "+": merged - every sent (not unchanged-TOAST) column of the update
 *   overwrites the held value, the others keep theirs (UPD: the union of
 *   the sent columns with their latest values).  An update carrying
 *   unchanged-TOAST columns never becomes an insert: INS + U keeps the
 *   insert's value for them.
 *
 *   An update is "key unchanged" when old_kind is 0 or the old tuple's key
 *   columns are byte-equal to the new tuple's.  An update K -> K' of a row
 *   the segment inserted (K in INS or DELINS) moves that row: the merged
 *   full image becomes K' (K' absent -> INS, K' DEL -> DELINS, K' in any
 *   other state: FOLD_CONFLICT, nothing changed); K becomes absent (from
 *   INS) or DEL (from DELINS).  Of a row the segment did not insert, it is
 *   FOLD_ALONE: the caller flushes first, so the order is kept.
 *
 *   FOLD_ALONE also for a change that does not fit the rules: an op other
 *   than I U D, a relation index this segment did not give out, a tuple
 *   whose column count is not the relation's, a delete without an old
 *   tuple, an insert with an unchanged-TOAST value.  Sent alone, it meets
 *   the planner's own checks exactly as it would without compaction.
 *
 * Emission (fold_count, fold_get): INS -> op I with the image; UPD -> op U,
 * old_kind 0, new tuple = the merged image (key columns = the key); DEL ->
 * op D, old_kind 'K', old tuple with the key columns' values and NULL
 * elsewhere (n = the relation's columns), new tuple empty; DELINS -> a D
 * in the delete group and an I in the insert group.  Relations in the
 * order of their first change in the segment; a foldable relation's
 * deletes, then its updates, then its inserts, each group in the order
 * its keys first appeared (a key's first appearance is kept when it goes
 * back to absent and comes again); an unfoldable relation's changes as
 * added (every tuple kind, FULL old tuples too).
 *
 * The row-count checks stay exact: a folded update or delete still
 * matches its row by key, so a missing row still fails the batch.  The
 * one check that is lost is the duplicate-key check of a row the segment
 * puts onto a key and takes off it again: an insert of K whose row is
 * then deleted (INS ... DEL -> nothing) or moved on (INS(K) ... U(K -> K')
 * -> INS(K')), and likewise a key change of an inserted row onto K whose
 * row leaves K again.  Nothing for K is sent, so a row the target already
 * held under K (a divergence: the source had no such row) is not reported
 * by this batch; it stays as it was.
 *
 * Tags: an I or U carries the tag of the last change folded into its
 * image, a D the tag of the delete that made it.
 */
#ifndef TRELLARA_APPLY_FOLD_H
#define TRELLARA_APPLY_FOLD_H

#include "trellara/envelope.h"
#include "trellara/planner.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fold;

struct fold_change {
	struct env_change change; /* op I U D; .relation = fold relation index;
				     tuples are views into the fold's memory */
	uint64_t tag;             /* stream offset of the last change folded into it */
};

struct fold_stats { uint64_t received, emitted; }; /* folded away = received - emitted */

struct fold *fold_new(void);
void fold_free(struct fold *f);
/* Empties the segment (relations too); keeps allocations for reuse. */
void fold_reset(struct fold *f);
/* An empty fold (new, or reset) whose allocations hold more than
 * FOLD_KEEP_BYTES (a large segment's: a catch-up batch, a backlog) frees
 * them all; true if it did.  For an idle applier: segment after segment
 * of a backlog reuse their memory, and a long-running applier does not
 * keep the largest segment it ever saw. */
bool fold_shrink(struct fold *f);
#define FOLD_KEEP_BYTES (256 * 1024)
/* The bytes the fold holds in its own allocations (arena blocks, tables,
 * arrays, with their unused room), whatever the segment uses of them. */
size_t fold_held_bytes(const struct fold *f);

/* The fold's index for relation pr (descriptor, key mask, identity_always mask,
 * partitioned, col_types if the lead added it - copy every pointer field you find
 * in struct plan_relation), registering a copy on first use.  Two descriptors are
 * the same relation when oid, schema, name, replica identity and every column
 * (name, type oid, typmod, key flag) and both masks are equal.  foldable=false:
 * its changes are kept as given, in order, never merged (keyless FULL tables,
 * tables whose target triggers fire for a replica, apply.compaction: false).
 * A foldable relation needs pr->key (non-NULL).
 * Returns the index, or -1 when a relation of the same oid or the same
 * schema.name with a DIFFERENT descriptor is already in the segment (DDL in the
 * batch: the caller flushes the segment, resets it, and calls again).
 *
 * In detail: partitioned and col_types (both NULL, or the same string or
 * NULL per column) are part of the descriptor too, and so is whether the
 * relation is folded: foldable with pr->key NULL registers it unfoldable
 * (never a guess at a key), and asking for the same descriptor with the
 * other foldable answer gives -1 as well.  On an empty segment it never
 * gives -1.  The pointer fold_relations returns may move on a registration. */
int fold_relation(struct fold *f, const struct plan_relation *pr, bool foldable);

enum fold_result {
	FOLD_OK,       /* recorded (merged or appended) */
	FOLD_CONFLICT, /* cannot merge with what the segment holds for that key: the
			  caller flushes the segment, resets, and adds it again (on an
			  empty segment every change that is not FOLD_ALONE is FOLD_OK) */
	FOLD_ALONE,    /* never folded: the caller flushes the segment, resets it,
			  and sends this change by itself (e.g. a key change of a row the
			  segment did not insert; a key value that is unchanged TOAST) */
};
/* Adds one I/U/D change of fold relation rel; values are copied.  A
 * FOLD_CONFLICT or FOLD_ALONE leaves the segment as it was. */
enum fold_result fold_add(struct fold *f, uint32_t rel, const struct env_change *c, uint64_t tag);

/* The net changes, in emission order (valid until the next add/reset):
 * relations in the order of their first change in the segment; for a foldable
 * relation its deletes, then its updates, then its inserts, each group in the
 * order its keys first appeared; for an unfoldable relation its changes as added. */
size_t fold_count(const struct fold *f);
const struct fold_change *fold_get(const struct fold *f, size_t i);
/* The relations (index = fold relation index), for the planner. */
const struct plan_relation *fold_relations(const struct fold *f, uint32_t *n);
/* since fold_new, across resets: received counts the changes fold_add
 * recorded (FOLD_OK; a FOLD_CONFLICT or FOLD_ALONE is not), emitted the
 * net changes of every segment (the current one as it stands now) */
struct fold_stats fold_stats(const struct fold *f);

/* Added: the changes recorded (FOLD_OK) since the last reset; 0 = the
 * segment is empty (fold_count can be 0 on a segment that is not: every
 * change folded away). */
size_t fold_pending(const struct fold *f);

#endif
