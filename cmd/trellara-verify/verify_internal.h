/*
 * verify_internal.h - what verify.c (the pass: connections, the fence,
 * the report) and verify_compare.c (one table compared: the bucket sums,
 * narrowed down to the divergent keys) share.
 */
#ifndef TRELLARA_VERIFY_INTERNAL_H
#define TRELLARA_VERIFY_INTERNAL_H

#include "verify.h"

#include "trellara/checkpoint.h"
#include "trellara/snapfence.h"

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BUCKETS 1024 /* a power of two: the low bits of the row hash */
#define MAX_EXAMPLES 10

enum div_kind { DIV_MISSING = 0, DIV_EXTRA, DIV_DIFFERS };

/* Which rows of a table verify compares: all of a plain table's; every
 * partition's of a partitioned table, read through the parent; an
 * inheritance parent's own (ONLY), its children being tables of their
 * own, as PostgreSQL's publication and the snapshot treat them. */
enum scope { SCOPE_TABLE = 0, SCOPE_PARTITIONS, SCOPE_ONLY };

struct table_result {
	char name[300];
	enum scope scope;
	bool keyless;
	bool error;
	char error_text[512];
	uint64_t source_rows, target_rows;
	uint64_t count[3];
	char **examples[3]; /* owned: the first VERIFY_MAX_RECORDED_KEYS keys of each kind, as ROW(key)::text */
	int n_examples[3];
	char **key_columns; /* owned: the key's columns in the order of its text; NULL when keyless */
	int n_key_columns;
};

/* Why a pass could not finish for the network's sake, not its
 * statements': another pass may. */
struct verify_loss {
	const char *side; /* "source", "target"; NULL: nothing lost */
	char why[512];
};

struct verify {
	const struct verify_options *o;
	const struct flow_config *cfg;
	struct flow_ids ids;
	struct verify_loss *loss;
	PGconn *src, *dst;
	struct snapfence fence;
	struct table_result *results;
	size_t n_results;
	/* the servers' encodings differ (a LATIN1 source, a UTF8 target):
	 * rows are hashed as their text in UTF8, the client encoding both
	 * sessions pin, so both hash what the application sees */
	bool transcode;
};

/* The row hash of a text expression (verify.c: one expression on both
 * sides, whatever their encodings); newly allocated. */
char *verify_row_hash(const struct verify *v, const char *text_expr);
/* Compares table t on both sides at the fence into r (verify_compare.c). */
void verify_compare_table(struct verify *v, const struct table_config *t, struct table_result *r);

#endif
