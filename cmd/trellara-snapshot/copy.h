/*
 * copy.h - copying tables at an exported snapshot (DESIGN §6 step 3):
 * each table's truncate + COPY + progress row commit in one target
 * transaction; several tables in parallel, one thread and one pair of
 * connections per worker.  Binary COPY when every column has a built-in
 * type, text otherwise.
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

/* md5 of a table's columns (name, type, not null) as the given
 * connection's snapshot sees them; NULL when the table does not exist. */
char *table_fingerprint(void *pgconn, const char *schema, const char *name);

#endif
