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
 * the first rows went to the target), which is also a pause point; pause
 * point snapshot.before_table_copy.
 *
 * A plain table larger than the job's split_bytes is split (copy_range.c):
 * copied in ranges of ctid blocks, each range's rows and its progress row
 * (snapshot_range_progress) in one target transaction, several ranges at
 * once; the table's own progress row (and so its watermark) is written
 * once every range is in.  A partitioned table larger than split_bytes
 * (its leaves together) is split by its leaf partitions, a leaf larger
 * than split_bytes by blocks as well: each range read from its leaf
 * (ONLY), written through the target's parent (routed); a partition
 * attached or detached before the last range is in, and the table is
 * schema_changed.  Fault point snapshot.after_range_commit, also a pause
 * point.
 */
#ifndef TRELLARA_SNAPSHOT_COPY_H
#define TRELLARA_SNAPSHOT_COPY_H

#include "trellara/config.h"

#include <stdbool.h>
#include <stdint.h>

enum copy_outcome { COPY_PENDING = 0, COPY_DONE, COPY_SCHEMA_CHANGED, COPY_FAILED };

struct snapshot_range;

struct copy_table {
	const char *schema, *name; /* borrowed from the flow file */
	enum copy_outcome outcome;
	uint64_t rows;
	uint64_t bytes;
	double seconds;
	bool binary;
	char error[512];
	/* a split table (copy_plan_splits); ranges NULL: copied whole */
	struct snapshot_range *ranges; /* owned: the plan, by range_no */
	int n_ranges;
	char *filenode;    /* owned: pg_relation_filenode when planned */
	bool keep_rows;    /* ranges of an earlier invocation kept: not emptied */
	int ranges_kept;   /* copied earlier, unchanged at this snapshot */
	int ranges_copied; /* by this invocation */
	int ranges_left;   /* still to copy (under the job's lock) */
	int64_t t0_us;     /* when its first range started */
};

struct copy_job {
	const struct flow_config *cfg;
	const char *run_id;
	const char *snapshot_name;   /* exported snapshot to import */
	uint64_t watermark_lsn;      /* the snapshot's consistent point */
	struct copy_table *tables;   /* borrowed */
	size_t n_tables;
	unsigned workers;
	uint64_t split_bytes;        /* 0: no table is split */
	/* once a table's data is in (its progress row committed): its keys
	 * and indexes, built by the worker that finished it, on that worker's
	 * target connection, before the worker takes more to copy (the other
	 * workers copy on); NULL: nothing.  table indexes tables[]; 0, or -1
	 * (logged: the caller records it). */
	int (*after_table)(void *ctx, size_t table, void *dst_pgconn);
	void *after_ctx;
};

/* Before copy_empty_targets: which tables are split, and in which ranges
 * (DESIGN §6).  A table with ranges of this run planned before keeps
 * that plan when split_bytes is the same; its ranges copied by an
 * earlier invocation are read again at this snapshot and kept (the table
 * is not emptied) only when every one of them reads exactly as it did
 * then (hash of the COPY bytes); otherwise, or with another split_bytes,
 * the table is planned anew and copied whole again.  The plans are
 * recorded in the target.  0, or -1 (logged). */
int copy_plan_splits(struct copy_job *job, void *dst_pgconn);

/* Whether partitioned table t has the leaf partitions its plan's ranges
 * read (none attached or detached since): 1 yes, 0 no, -1 on error
 * (logged). */
int copy_partitions_unchanged(void *src_pgconn, const struct copy_table *t);

/* Frees the plans copy_plan_splits made. */
void copy_tables_release(struct copy_table *tables, size_t n);

/* Copies every table, and runs job->after_table for each table copied;
 * returns 0 when each has an outcome (look at them), -1 when workers
 * could not even start (logged). */
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

/* md5 of a table's columns (name, type, not null) and, for a
 * partitioned table, the oids of its partitions at every level, as the
 * given connection's catalog shows them; NULL when the table does not
 * exist. */
char *copy_table_fingerprint(void *pgconn, const char *schema, const char *name);

/* ---- shared by copy.c and copy_range.c ---- */

/* Begins src's read-only transaction at the exported snapshot
 * snapshot_name (REPEATABLE READ, SET TRANSACTION SNAPSHOT); ordered: no
 * parallel scan, so that a range's rows come in block order and its hash
 * is the same when it is read again.  COPY_AT_SNAPSHOT_OK, or what failed
 * (logged): after COPY_AT_SNAPSHOT_NO_BEGIN no transaction is open,
 * after the others it is (the caller rolls it back). */
enum copy_at_snapshot {
	COPY_AT_SNAPSHOT_OK = 0,
	COPY_AT_SNAPSHOT_NO_BEGIN = -1,
	COPY_AT_SNAPSHOT_NO_IMPORT = -2,
	COPY_AT_SNAPSHOT_NO_SETTING = -3,
};
enum copy_at_snapshot copy_begin_at_snapshot(void *src_pgconn, const char *snapshot_name, bool ordered);

/* The column list and whether binary COPY is safe, as src's snapshot
 * sees the table.  0, or -1 (logged). */
int copy_columns_at_snapshot(void *src_pgconn, const char *qualified, char **cols, bool *binary);

/* A running hash of a range's COPY bytes: CRC-32C and zlib's CRC-32 (two
 * polynomials) and the length. */
struct copy_hash {
	uint32_t crc32c, crc32;
	uint64_t len;
};
void copy_hash_add(struct copy_hash *h, const void *buf, size_t len);
/* "crc32c-crc32-len" in hex into buf[40] */
void copy_hash_format(const struct copy_hash *h, char *buf, size_t len);

/* The ranges of a table of size bytes (size / block_size blocks) of
 * about split_bytes each, at least 2 (1 for a table of one block), a
 * multiple of workers when there are more ranges than workers, at most
 * 10000 and no more than blocks; disjoint and covering every block from
 * 0, the last one open (blocks added after the plan hold no row of the
 * snapshot).  *n_out ranges, owned. */
struct snapshot_range *copy_range_plan(uint64_t size, uint64_t block_size, uint64_t split_bytes, unsigned workers,
				       int *n_out);

/* The relation range r reads: its leaf partition, or the table
 * qualified. */
const char *copy_range_relation(const struct snapshot_range *r, const char *qualified);

/* COPY (SELECT cols FROM ONLY relation WHERE ctid in the range) TO STDOUT
 * with fmt, relation that of copy_range_relation; owned. */
char *copy_range_sql(const char *cols, const char *qualified, const struct snapshot_range *r, const char *fmt);

#endif
