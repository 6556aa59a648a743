/*
 * copy.h - copying tables at an exported snapshot (DESIGN §6 step 3):
 * each table's COPY + progress row commit in one target transaction;
 * several tables in parallel, one thread and one pair of connections
 * per worker.  Binary COPY when every column has a built-in type, text
 * otherwise.  A run empties the target tables it copies first, together
 * (copy_empty_targets); a table still holding rows (a reseed) is
 * emptied in its copy's transaction.
 *
 * A partitioned table is read and written through its parent (every
 * partition's rows); any other table ONLY (an inheritance parent's own
 * rows).  The target sessions run with session_replication_role =
 * replica, so neither triggers nor foreign-key checks fire; a role that
 * may not set it copies only tables without INSERT triggers.
 *
 * A table whose schema fingerprint differs before, at and after its copy
 * is rolled back and marked schema_changed: it is not handed off until a
 * later run copies it again.  Fault point snapshot.mid_table_copy (after
 * the first rows went to the target); pause point snapshot.before_table_copy.
 */
#ifndef TRELLARA_SNAPSHOT_COPY_H
#define TRELLARA_SNAPSHOT_COPY_H

#include "trellara/config.h"

#include <stdbool.h>
#include <stdint.h>

enum copy_outcome { COPY_PENDING = 0, COPY_DONE, COPY_SCHEMA_CHANGED, COPY_FAILED };

struct copy_table {
	const char *schema, *name; /* borrowed from the flow file */
	enum copy_outcome outcome;
	uint64_t rows;
	uint64_t bytes;
	double seconds;
	bool binary;
	char error[512];
};

struct copy_job {
	const struct flow_config *cfg;
	const char *run_id;
	const char *snapshot_name;   /* exported snapshot to import */
	uint64_t watermark_lsn;      /* the snapshot's consistent point */
	struct copy_table *tables;   /* borrowed */
	size_t n_tables;
	unsigned workers;
};

/* Copies every table; returns 0 when each has an outcome (look at them),
 * -1 when workers could not even start (logged). */
int copy_tables(struct copy_job *job);

/* When a target table of the list holds rows, empties every one of
 * them that exists on the target in one TRUNCATE (tables that reference
 * each other go together, empty ones included); nothing when all are
 * empty.  0 done, 1 a
 * foreign key from a table outside the list stops it (logged, with the
 * constraint and the action; nothing emptied), -1 on error (logged). */
int copy_empty_targets(const struct flow_config *cfg, void *pgconn, struct copy_table *tables, size_t n);

/* pg_class.relkind of a relation, '\0' when it does not exist. */
char copy_relkind(void *pgconn, const char *qualified);

/* md5 of a table's columns (name, type, not null) as the given
 * connection's snapshot sees them; NULL when the table does not exist. */
char *copy_table_fingerprint(void *pgconn, const char *schema, const char *name);

#endif
