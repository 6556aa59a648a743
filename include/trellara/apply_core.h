/*
 * apply_core.h - applyd's decisions, apart from the target (DESIGN §8).
 *
 * Owns.  Nothing but the table facts it is given (struct apply_tables,
 * filled by the caller from the target's catalogs and the checkpoint's
 * watermarks): no libpq, no I/O, no clock, no globals.  Every function
 * answers one question about a decoded transaction and the applier's
 * state; the caller (trellara-applyd, or a simulator) acts on the answer.
 *
 * Decides.
 *  - Dedup: a transaction whose commit LSN is at or below the last one
 *    applied (or skipped) is a duplicate: skipped and counted, never
 *    applied again (apply_core_is_duplicate).
 *  - Per relation of a transaction (apply_core_relation): a table of the
 *    flow is applied unless the transaction commits below its snapshot
 *    watermark (the copy holds it: filtered); a table outside the flow is
 *    skipped; a partition of a partitioned flow table named under its own
 *    name means the publication does not publish via the root: the caller
 *    fails closed (exit 78), it is never skipped as "outside the flow".
 *  - Row matching (apply_core_key_columns): under replica identity full
 *    the flow's verify.primary_key, else the target's primary key; under
 *    any other identity the relation's own key flags.  The target's
 *    GENERATED ALWAYS identity columns (apply_core_identity_always).
 *  - TRUNCATE touches only the flow's tables above their watermarks
 *    (apply_core_truncate_filter).
 *  - A failed statement (apply_core_on_failure): a lost connection (or a
 *    SQLSTATE of class connection: 08, shutdown, crash, recovery) is
 *    reconnected, a transient SQLSTATE (the target's state: deadlock,
 *    timeouts, disk full, standby; sqlstate.h holds the one list) retried
 *    after a backoff, a
 *    failed batch retried one transaction at a time, and a transaction
 *    that fails alone quarantined under apply_core_quarantine_reason().
 *
 * Fails.  It cannot: the functions are total over their inputs (NULL or
 * empty tables are "nothing configured").  tests/unit/test_apply_core.c
 * checks every decision, linked without libpq.
 */
#ifndef TRELLARA_APPLY_CORE_H
#define TRELLARA_APPLY_CORE_H

#include "trellara/envelope.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* SQLSTATEs of apply's own row checks: raised by the checkpoint schema's
 * expect_one() and by the executor; TR003 a change the planner cannot
 * express. */
#define SQLSTATE_NO_ROWS_MATCHED "TR001"
#define SQLSTATE_AMBIGUOUS_MATCH "TR002"
#define SQLSTATE_UNPLANNABLE "TR003"

/* A unique index of a target table (not the primary key), by its columns. */
struct apply_unique {
	char **cols; /* owned */
	int n_cols;
};

struct apply_table {
	char *name;             /* owned: "schema.table" */
	char **pk;              /* owned: key columns for identity-full matching */
	int n_pk;
	char **identity_always; /* owned: the target's GENERATED ALWAYS identity columns */
	int n_identity_always;
	bool partitioned;       /* the target table is partitioned */
	uint64_t watermark_lsn; /* its snapshot copy holds what commits below */
	char **columns;         /* owned: the target table's columns (n_columns) */
	char **column_types;    /* owned: each one's type, as format_type() writes it */
	char **column_eq;       /* owned: each one's equality operator when it is not pg_catalog's,
				   as "OPERATOR(schema.=)" (citext, hstore: the sessions' search_path is
				   empty); NULL entries (or NULL) for pg_catalog's */
	int n_columns;
	bool replica_triggers;  /* a trigger or rule of the target table fires for a replica
				   (ENABLE REPLICA / ENABLE ALWAYS) */
	bool compaction;        /* the flow folds its changes (apply.compaction, both levels) */
	struct apply_unique *unique; /* owned: the target's unique indexes on plain columns other than
					the primary key (the parallel dependency tracker) */
	int n_unique;
};

struct apply_tables {
	struct apply_table *tables; /* owned */
	size_t n_tables;
	/* the target's partitions of partitioned flow tables */
	char **partitions;      /* owned: "schema.partition" */
	char **partition_roots; /* owned: the flow table each belongs to */
	size_t n_partitions;
};

/* Frees what the struct owns and empties it. */
void apply_tables_free(struct apply_tables *t);

/* A TRUNCATE of the source partition schema.table of the partitioned
 * table root (a TRUNCATE_MESSAGE_PREFIX message: pgoutput leaves such a
 * TRUNCATE out when the publication publishes via the root).  IGNORE: not
 * a flow table's, or below its snapshot copy's watermark; CARRY: the
 * target has a partition of that name under the same flow table (*partition
 * is its "schema.name"); STOP: it has none (the layouts differ): the
 * partition's rows cannot be found on the target. */
enum apply_partition_truncate { APPLY_PT_IGNORE, APPLY_PT_CARRY, APPLY_PT_STOP };
enum apply_partition_truncate apply_core_partition_truncate(const struct apply_tables *t, const char *schema,
							     const char *table, const char *root_schema,
							     const char *root_table, uint64_t commit_lsn,
							     const char **partition);
/* The flow table schema.name (lengths given: not NUL-terminated), or NULL. */
struct apply_table *apply_tables_find(const struct apply_tables *t, const char *schema, size_t schema_len,
				      const char *name, size_t name_len);
/* The lowest watermark of the flow's tables (0 when there are none):
 * every table's copy holds what commits below it. */
uint64_t apply_tables_copied_below(const struct apply_tables *t);
/* The flow table whose partition relation r is (on the target), or NULL. */
const char *apply_tables_partition_root(const struct apply_tables *t, const struct env_relation *r);

/* A transaction committing at commit_lsn after last_commit_lsn was
 * applied or skipped: already applied? */
bool apply_core_is_duplicate(uint64_t commit_lsn, uint64_t last_commit_lsn);

enum apply_relation_verdict {
	APPLY_RELATION_APPLY,                /* a flow table, above its watermark */
	APPLY_RELATION_UNCONFIGURED,         /* not in dataset.tables: skipped */
	APPLY_RELATION_BELOW_WATERMARK,      /* the snapshot copy holds it: filtered */
	APPLY_RELATION_UNPUBLISHED_PARTITION /* a flow table's partition under its own name: fail closed */
};

/* What to do with the changes of a transaction committing at commit_lsn
 * to relation r.  *table: the flow table (APPLY and BELOW_WATERMARK),
 * else NULL; *root: the partitioned flow table (UNPUBLISHED_PARTITION),
 * else NULL. */
enum apply_relation_verdict apply_core_relation(const struct apply_tables *t, const struct env_relation *r,
						uint64_t commit_lsn, struct apply_table **table, const char **root);

/* Which of r's columns match rows (key[c], r->n_columns entries, all
 * written): under replica identity full ('f') the table's key columns
 * present in r, else r's key flags.  Returns whether any column is a
 * key (false: the planner has no key and matches on every column). */
bool apply_core_key_columns(const struct apply_table *table, const struct env_relation *r, bool *key);
/* Which of r's columns are the target's GENERATED ALWAYS identity
 * columns (mask[c], r->n_columns entries, all written); whether any. */
bool apply_core_identity_always(const struct apply_table *table, const struct env_relation *r, bool *mask);

/* The columns of r that unique index u of table are on (cols[k] = r's
 * column number, in the index's order); the number, or -1 when one of
 * them is not among r's columns. */
int apply_core_unique_columns(const struct apply_table *table, const struct env_relation *r, int u, uint16_t *cols);

/* The target's type of each of r's columns (types[c], r->n_columns
 * entries, all written; NULL where the target table has no such column
 * or its types are not known), and, when eq is not NULL, its equality
 * operator outside pg_catalog (eq[c]; NULL: pg_catalog's "="); whether
 * every column has a type. */
bool apply_core_column_types(const struct apply_table *table, const struct env_relation *r, const char **types,
			     const char **eq);

/* How batch compaction treats a relation's row changes (apply_fold.h):
 *  MERGE      folded per key (keyed, compaction on, no replica trigger);
 *  KEEP_ORDER kept as they came, in their relation's place in the
 *             segment (keyless: no key to fold on; nothing but its own
 *             order matters, no trigger fires);
 *  BARRIER    sent where they are in the stream, the segment flushed
 *             before: a trigger or rule that fires for a replica may
 *             read or write other tables, and apply.compaction: false
 *             asks for the changes exactly as they came. */
enum apply_fold_mode { APPLY_FOLD_MERGE, APPLY_FOLD_KEEP_ORDER, APPLY_FOLD_BARRIER };
enum apply_fold_mode apply_core_fold_mode(const struct apply_table *table, bool keyed);

/* TRUNCATE of relations[0..n) (indexes into the transaction's relations,
 * whose verdicts are verdicts[]): the ones applied go to kept[] (room for
 * n), in order; returns how many (0: the TRUNCATE is filtered). */
uint32_t apply_core_truncate_filter(const enum apply_relation_verdict *verdicts, const uint32_t *relations, uint32_t n,
				    uint32_t *kept);

/* The quarantine reason recorded for a transaction failing with sqlstate. */
const char *apply_core_quarantine_reason(const char *sqlstate);

enum apply_failure_action {
	APPLY_FAILURE_RECONNECT,    /* the connection is gone */
	APPLY_FAILURE_RETRY,        /* transient: back off, apply the same again */
	APPLY_FAILURE_ONE_AT_A_TIME,/* a batch failed: find the culprit */
	APPLY_FAILURE_QUARANTINE    /* the transaction failed alone */
};

/* A statement of the open target transaction failed; single_mode: it
 * held one source transaction only. */
enum apply_failure_action apply_core_on_failure(bool connection_lost, const char *sqlstate, bool single_mode);

#endif
