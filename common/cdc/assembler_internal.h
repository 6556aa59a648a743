/*
 * assembler_internal.h - what the assembler's modules share and nobody
 * else uses (the contract is trellara/assembler.h):
 *
 *   assembler.c        open/close, the open transactions, changes encoded
 *                      into a transaction, assembler_feed
 *   assembler_spill.c  spill files and the subtransactions of streamed
 *                      transactions (Stream Abort)
 *   assembler_emit.c   a committed transaction to frames: one Txn frame,
 *                      or chunks, manifest and commit marker
 *
 * Functions that fail write one message into err and return -1 or an
 * ASSEMBLER_* code.
 */
#ifndef TRELLARA_ASSEMBLER_INTERNAL_H
#define TRELLARA_ASSEMBLER_INTERNAL_H

#include "trellara/assembler.h"
#include "trellara/envelope.h"
#include "trellara/strbuf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A relation as a transaction used it: a private copy of the descriptor. */
struct txn_relation {
	uint32_t relid;
	unsigned generation;
	char *schema, *name; /* owned */
	uint8_t replident;
	uint16_t n_columns;
	struct env_column *columns; /* owned; names owned through name_store */
	char **name_store;          /* owned */
};

struct subxact {
	uint32_t xid;
	uint64_t first_change; /* change index */
	uint64_t first_byte;   /* position in the change bytes (spill + memory) */
};

/* Where a (sub)transaction's entry in txn.subxacts is: an open-addressing
 * table (linear probing) so that noting the xid of every change, and
 * finding a subtransaction at Stream Abort, take constant time whatever
 * the number of subtransactions.  Entries are never deleted: one whose
 * index no longer holds its xid (cut by a Stream Abort) is stale, and the
 * table is rebuilt from the array when it fills up. */
struct subxact_slot {
	uint32_t xid;
	uint32_t index_plus1; /* 0: empty */
};

struct ddl_message {
	uint64_t change; /* index of its Message change (Stream Abort cuts it too) */
	uint64_t lsn;
	uint8_t *content; /* owned */
	uint32_t len;
};

/* A pending_chunk frame a streamed transaction wrote before its commit. */
struct pending_chunk {
	uint64_t offset;       /* its stream offset */
	uint64_t first_change; /* the index of its first change in the transaction */
	uint32_t crc;          /* CRC-32C of its payload */
	uint32_t changes;      /* changes it holds */
	uint32_t in_use;       /* how many of them count (a subtransaction abort cuts) */
};

struct txn {
	uint32_t xid;
	bool streamed;
	bool direct;             /* written as pending chunks instead of spilled */
	uint64_t memory_first_change; /* direct: the index of the first change in memory */
	uint64_t final_lsn;
	int64_t commit_ts;
	char *origin; /* owned */
	uint64_t origin_lsn;
	struct txn_relation *relations; /* owned */
	uint32_t n_relations;
	struct buf memory;       /* encoded changes not yet spilled */
	uint64_t memory_changes;
	uint64_t changes;        /* all changes */
	int spill_fd;
	char *spill_path;        /* owned */
	uint64_t spill_bytes;
	struct subxact *subxacts; /* owned; in order of first change */
	size_t n_subxacts, subxacts_cap;
	struct subxact_slot *slots; /* owned: xid -> subxacts index */
	size_t slots_cap, slots_used;  /* slots_cap: 0 or a power of two */
	struct ddl_message *ddl;  /* owned */
	size_t n_ddl;
	struct pending_chunk *pending; /* owned: chunks in use, in order */
	size_t n_pending, pending_cap;
	uint32_t next_seq;
	uint64_t fence_messages;  /* trellara.fence messages: not changes */
};

struct relation_generation {
	uint32_t relid;
	unsigned generation;
};

struct assembler {
	struct assembler_options options;
	char *source_id; /* owned */
	char *spill_dir; /* owned */
	char *flow;      /* owned */
	char *spill_prefix; /* owned: the flow's name in spill file names */
	struct txn **txns; /* owned: open transactions (streamed ones and the current one) */
	size_t n_txns;
	struct txn *current;  /* the Begin..Commit transaction, if any */
	struct txn *in_block; /* the streamed transaction of the open stream block */
	struct relation_generation *generations; /* owned */
	size_t n_generations;
};

/* ---- assembler.c ---- */

/* Frees t and forgets it (current, in_block). */
void assembler_txn_remove(struct assembler *a, struct txn *t);

/* ---- assembler_spill.c ---- */

/* The flow identity as it appears in spill file names; newly allocated. */
char *assembler_spill_prefix_of(const char *flow);
/* Remove the spill files of this flow's previous process. */
void assembler_remove_stale_spill_files(const char *dir, const char *prefix);
/* Move t's changes in memory to its spill file (created on first use). */
int assembler_spill(struct assembler *a, struct txn *t, char *err, size_t errlen);
/* Record the change's (sub)transaction xid for Stream Abort. */
void assembler_note_subxact(struct txn *t, uint32_t xid);
/* Cut a streamed transaction back to the first change of subxid. */
int assembler_abort_subxact(struct txn *t, uint32_t subxid, char *err, size_t errlen);

/* ---- assembler_pending.c ---- */

/* Write t's changes in memory as pending_chunk frames: every full chunk,
 * and the partial rest too when all is set (else it stays in memory). */
int assembler_write_pending(struct assembler *a, struct txn *t, bool all, assembler_emit_fn emit, void *ctx,
			    uint64_t *frames, char *err, size_t errlen);
/* t wrote pending chunks that no manifest will list: say so (a
 * pending_abort frame, for readers that keep them) and forget them. */
int assembler_write_pending_abort(struct assembler *a, struct txn *t, assembler_emit_fn emit, void *ctx,
				  uint64_t *frames, char *err, size_t errlen);
/* Cut the pending chunks back to the first first_change changes. */
void assembler_pending_cut(struct txn *t, uint64_t first_change);
/* The transaction's relations as "schema.name", each once (free each). */
const char **assembler_txn_tables(const struct txn *t, uint32_t *n_tables);

/* ---- assembler_emit.c ---- */

/* Emit t's frames (or skip it: a duplicate, or empty) and remove it. */
int assembler_commit_txn(struct assembler *a, struct txn *t, uint64_t commit_lsn, uint64_t end_lsn, int64_t commit_ts,
			 assembler_emit_fn emit, void *ctx, struct assembler_result *result, char *err, size_t errlen);

#endif
