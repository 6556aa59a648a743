/*
 * checkpoint.h - the checkpoint schema in the target (DESIGN §5):
 * versioned, idempotent migrations under an advisory lock, and the
 * queries every program makes of it (apply checkpoint, quarantine, source
 * identity, fences).  Every function logs its own failure and returns -1.
 *
 * Identifiers (the schema name) are quoted with PQescapeIdentifier;
 * values are always parameters.
 */
#ifndef TRELLARA_CHECKPOINT_H
#define TRELLARA_CHECKPOINT_H

#include "trellara/apply_state.h"

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#define CHECKPOINT_SCHEMA_VERSION 2

/* The SQLSTATEs its expect_one() raises: apply_core.h. */

/* Create or upgrade the schema (idempotent; concurrent callers serialise
 * on an advisory lock). */
int checkpoint_migrate(PGconn *conn, const char *schema);

/* Reads (creating a zero row if absent) the checkpoint of ids. */
int checkpoint_load(PGconn *conn, const char *schema, const struct flow_ids *ids, struct apply_checkpoint *cp);

/* Binds the checkpoint of ids to a stream instance: its id, the slot it
 * follows, the source system and timeline.  reset_offset: the offsets
 * are the new stream's from now on (stream_offset back to 0); the LSNs
 * (dedup) are kept. */
int checkpoint_bind_stream(PGconn *conn, const char *schema, const struct flow_ids *ids, const char *stream_id,
			   const char *slot_name, const char *system_identifier, uint32_t timeline,
			   bool reset_offset);

/* Records the source identity, or fails (returns 1, logged) when the
 * schema already knows source_id as another system or database. */
int checkpoint_check_source_identity(PGconn *conn, const char *schema, const char *source_id,
				     const char *system_identifier, const char *database);

/* Quarantined (or replay_ready) entries of the flow, oldest first;
 * *entries is newly allocated. */
int checkpoint_quarantine_list(PGconn *conn, const char *schema, const struct flow_ids *ids, bool open_only,
			       struct quarantine_entry **entries, int *n);
int checkpoint_quarantine_add(PGconn *conn, const char *schema, const struct flow_ids *ids, uint32_t xid,
			      uint64_t commit_lsn, uint64_t stream_offset, const char *reason, const char *detail);
/* quarantined -> replay_ready for exactly (xid, commit_lsn); returns 1
 * when no such quarantined transaction exists (nothing changed). */
int checkpoint_quarantine_replay_ready(PGconn *conn, const char *schema, const struct flow_ids *ids, uint32_t xid,
				       uint64_t commit_lsn);

/* Per-table watermark LSNs of the latest snapshot run (DESIGN §6):
 * parallel arrays "schema.table" -> LSN, newly allocated. */
int checkpoint_table_watermarks(PGconn *conn, const char *schema, const struct flow_ids *ids, char ***relations,
				uint64_t **lsns, int *n);

/* The fence (DESIGN §9): 0 and *present=false when none is set. */
int checkpoint_fence_get(PGconn *conn, const char *schema, const struct flow_ids *ids, bool *present,
			 uint64_t *fence_lsn, char *state, size_t state_len);
int checkpoint_fence_mark_held(PGconn *conn, const char *schema, const struct flow_ids *ids, uint64_t applied_lsn);

#endif
