/*
 * repair_internal.h - what repair.c (reading and printing the plan) and
 * repair_apply.c (applying it) share; nobody else uses it (the contract
 * is repair.h).
 */
#ifndef TRELLARA_REPAIR_INTERNAL_H
#define TRELLARA_REPAIR_INTERNAL_H

#include "repair.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum repair_kind { KIND_MISSING = 0, KIND_EXTRA, KIND_DIFFERS };

struct repair_key {
	enum repair_kind kind;
	char **values; /* owned: one per key column, NULL for NULL */
};

struct repair_table {
	char *name; /* owned: "schema.table" */
	const struct table_config *t;
	char **key_columns; /* owned */
	int n_key_columns;
	struct repair_key *keys; /* owned */
	size_t n_keys;
	char *reseed_reason; /* owned; NULL: repaired row by row */
	/* applied */
	uint64_t rows_deleted, rows_inserted;
};

struct plan {
	char *flow; /* owned */
	uint64_t compared_at;
	bool converged; /* the file says CONVERGED: nothing to repair */
	struct repair_table *tables; /* owned */
	size_t n_tables;
};

/* "missing_in_target", "extra_in_target", "content_differs" */
const char *repair_kind_name(enum repair_kind kind);
/* The key as (column = value, ...) for messages; newly allocated. */
char *repair_key_text(const struct repair_table *r, const struct repair_key *k);
/* Applies the plan behind a fence (repair_apply.c); *source_lsn is where
 * the source was read.  0 or an exit code. */
int repair_apply_plan(const struct repair_options *o, struct plan *p, uint64_t *source_lsn);

#endif
