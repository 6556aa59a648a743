/*
 * apply_chunks.h - the checks on a chunked transaction's frames (chunk
 * 0..n-1, manifest, commit marker) as applyd receives them.
 *
 * Owns.  One chunk set in progress (struct chunk_set): its identity, the
 * chunks seen with their checksums and change counts, and whether the
 * manifest checked out.  No libpq, no I/O, no clock, no globals; the
 * caller applies the chunks' changes in one target transaction and
 * commits it only after chunk_set_check_marker() said yes.
 *
 * Decides.
 *  - A set starts at chunk 0 (chunk_set_check_start) and its chunks come
 *    in order (chunk_set_check_index).
 *  - An active set is interrupted (chunk_set_interrupted) by another
 *    transaction's chunk, or by chunk 0 of the same transaction (a
 *    replay: the capture resent it).  An interrupted or otherwise
 *    abandoned set is a gap (chunk_set_abandon_is_gap) when what follows
 *    is past its commit (a position above its commit LSN: at the commit
 *    LSN its commit record is still ahead), it is not a duplicate and
 *    the tables' copies do not cover it: fail closed;
 *    else (a replay, an earlier position, a duplicate, a transaction
 *    every table's copy holds, such as one a new slot after a lost one
 *    never sends again) it is discarded.
 *  - The manifest lists as many chunks as arrived, with the same
 *    checksums and (unless the set is a duplicate, whose changes were
 *    not applied) the same change counts; the commit marker comes after
 *    the manifest, and carries the manifest's checksum and chunk count.
 *
 *  - Written once (a version 2 manifest): the manifest lists pending
 *    chunks by stream offset, earlier in the stream (strictly
 *    increasing, each with changes in use, their sum the total); the
 *    commit marker follows it as above; then each listed frame, read
 *    back by offset, must be a pending_chunk of the transaction, with
 *    the listed checksum and at least the changes in use.  Frames
 *    between them (other transactions', orphans of an earlier capture
 *    run) are not the set's.
 *
 * Fails.  A check that fails returns false with a one-line detail (for
 * the quarantine entry); the set keeps its identity for that entry until
 * chunk_set_reset().  Memory: xrealloc (aborts on out-of-memory).
 */
#ifndef TRELLARA_APPLY_CHUNKS_H
#define TRELLARA_APPLY_CHUNKS_H

#include "trellara/envelope.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct chunk_set {
	bool active;     /* a target transaction holds its chunks */
	bool duplicate;  /* already applied: skip the set */
	uint32_t xid;
	uint64_t commit_lsn, end_lsn;
	uint64_t first_offset;
	uint32_t next_index;
	uint32_t *crcs;   /* owned: of each chunk's payload */
	uint32_t *counts; /* owned: changes decoded from each chunk */
	size_t cap;
	bool manifest_ok;
	uint32_t manifest_crc;
	uint64_t changes; /* applied from its chunks */
	bool by_offset;   /* written once: the manifest lists pending chunks */
	struct env_manifest_chunk *listed; /* owned: the manifest's list */
	uint32_t n_listed;
	size_t listed_cap;
};

/* Forgets the set (keeps the buffers). */
void chunk_set_reset(struct chunk_set *cs);
void chunk_set_free(struct chunk_set *cs);

/* Whether the active set must be abandoned before chunk index of
 * transaction (xid, commit_lsn); *replay: it is the same transaction
 * starting again. */
bool chunk_set_interrupted(const struct chunk_set *cs, uint32_t xid, uint64_t commit_lsn, uint32_t index,
			   bool *replay);
/* The active set ends without its marker before a frame at next_lsn (0:
 * its replay, or shutdown): is that a gap (fail closed)?  copied_below:
 * every table's copy holds what commits below it
 * (apply_tables_copied_below). */
bool chunk_set_abandon_is_gap(const struct chunk_set *cs, uint64_t next_lsn, uint64_t copied_below);

/* No set active: records the transaction (for a quarantine entry) and
 * checks that index is 0. */
bool chunk_set_check_start(struct chunk_set *cs, uint32_t xid, uint64_t commit_lsn, uint64_t offset, uint32_t index,
			   char *detail, size_t detail_len);
/* Starts the set (after chunk_set_check_start): a duplicate when its
 * commit is at or below last_commit_lsn. */
void chunk_set_begin(struct chunk_set *cs, uint32_t xid, uint64_t commit_lsn, uint64_t end_lsn, uint64_t offset,
		     uint64_t last_commit_lsn);
/* The chunk that arrives is the next one? */
bool chunk_set_check_index(const struct chunk_set *cs, uint32_t index, char *detail, size_t detail_len);
/* Records the next chunk: its payload's checksum, the changes decoded
 * from it and how many of them were applied. */
void chunk_set_add(struct chunk_set *cs, uint32_t crc, uint32_t decoded, uint64_t applied);

/* A manifest or marker of transaction (xid, commit_lsn) belongs to the
 * active set?  If not, records that transaction for the quarantine
 * entry. */
bool chunk_set_owns(struct chunk_set *cs, uint32_t xid, uint64_t commit_lsn, uint64_t offset);
/* The manifest m (whose payload checksum is manifest_crc) matches the
 * chunks that arrived; on success the marker may follow. */
bool chunk_set_check_manifest(struct chunk_set *cs, const struct env_manifest *m, uint32_t manifest_crc, char *detail,
			      size_t detail_len);
/* No set active (or the active one abandoned): a version 2 manifest at
 * offset starts a set written once, a duplicate when its commit is at or
 * below last_commit_lsn.  False (the transaction recorded for the
 * quarantine entry) when its list is not one capture writes. */
bool chunk_set_begin_listed(struct chunk_set *cs, const struct env_manifest *m, uint32_t manifest_crc, uint64_t offset,
			    uint64_t last_commit_lsn, char *detail, size_t detail_len);
/* The frame read back at the k-th listed offset is that pending chunk
 * (type, transaction, no commit yet, checksum)? */
bool chunk_set_check_pending(const struct chunk_set *cs, uint32_t k, uint64_t offset, int type,
			     const struct env_frame_summary *s, uint32_t crc, char *detail, size_t detail_len);
/* It held the changes the manifest uses (taken: how many it gave, at
 * most that many)? */
bool chunk_set_check_pending_count(const struct chunk_set *cs, uint32_t k, uint64_t taken, char *detail,
				   size_t detail_len);

/* The commit marker (carrying manifest_crc and chunk_count) completes
 * the set. */
bool chunk_set_check_marker(const struct chunk_set *cs, uint32_t manifest_crc, uint32_t chunk_count, char *detail,
			    size_t detail_len);

/* The pending chunks a reader has passed whose transaction may still
 * list them (no manifest of it applied yet, no pending_abort): retention
 * must keep the stream from the lowest of them on.  A pending chunk of
 * another capture run means the earlier run's are never listed again. */
struct pending_floor {
	struct pending_floor_entry {
		uint32_t xid;
		uint64_t run;
		uint64_t offset; /* its first pending chunk passed */
	} *entries; /* owned */
	size_t n, cap;
};
void apply_chunks_floor_note(struct pending_floor *pf, uint32_t xid, uint64_t run, uint64_t offset);
/* Its set was applied or skipped as a duplicate. */
void apply_chunks_floor_forget(struct pending_floor *pf, uint32_t xid);
/* A pending_abort of (xid, run). */
void apply_chunks_floor_abort(struct pending_floor *pf, uint32_t xid, uint64_t run);
/* The lowest offset still needed, or position when that is lower. */
uint64_t apply_chunks_floor_lowest(const struct pending_floor *pf, uint64_t position);
void apply_chunks_floor_reset(struct pending_floor *pf);
void apply_chunks_floor_free(struct pending_floor *pf);

#endif
