/*
 * planner.h - the apply planner (DESIGN §2, §8): one envelope change in,
 * one SQL statement with text parameters out.  No libpq: the simulator
 * drives the same code.
 *
 * Identifiers are always double-quoted (with embedded quotes doubled,
 * what PQescapeIdentifier does); every value is a parameter.  Updates and
 * deletes by key are plain statements flagged expect_one: the executor
 * checks that each changed exactly one row before it sends COMMIT.
 * Keyless matches are written so that the server itself raises when
 * they match no row (SQLSTATE TR001) or more than one (TR002), through
 * the checkpoint schema's expect_one().
 *
 * Match predicate:
 *  - replica identity default or index: the key columns of the old key
 *    (the key changed: the row moves) or of the new tuple;
 *  - identity full with a key known for the target table (its primary
 *    key, or the flow file's verify.primary_key): those columns of the
 *    old tuple;
 *  - identity full with no key: every old column, NULL-safe; one row
 *    that matches (identical duplicates: any one of them, as PostgreSQL's
 *    apply does) is changed by (tableoid, ctid), so that a partitioned
 *    table's rows in other partitions are never touched; no match raises
 *    TR001.
 * Tables are changed with ONLY (an inheritance parent's change is never
 * applied to its children), partitioned target tables through the parent.
 * TRUNCATE lists the relations of the message, each ONLY (partitioned
 * tables: without, which truncates their partitions), with RESTART
 * IDENTITY when the source used it and never CASCADE: the message already
 * names every published table the source's cascade reached.
 * Unchanged-TOAST columns are left out of SET.
 *
 * GENERATED ALWAYS identity columns of the target: inserts say OVERRIDING
 * SYSTEM VALUE (the source's value is kept); updates leave the column out
 * of SET when its value is unchanged (known from the old tuple or the
 * unchanged key; otherwise the WHERE clause checks it, so a change
 * matches no row), and a change that would set it to another value fails
 * planning (PostgreSQL refuses such an UPDATE).
 */
#ifndef TRELLARA_PLANNER_H
#define TRELLARA_PLANNER_H

#include "trellara/envelope.h"
#include "trellara/strbuf.h"

#include <stdbool.h>
#include <stddef.h>

struct plan_relation {
	const struct env_relation *rel; /* borrowed, from the decoder */
	const bool *key;                /* per column: part of the match predicate; NULL = keyless full */
	const bool *identity_always;    /* per column: GENERATED ALWAYS AS IDENTITY on the target; NULL = none */
	bool partitioned;               /* the target table is partitioned (relkind 'p') */
};

struct plan_stmt {
	struct strbuf sql;   /* the statement text */
	struct buf arena;    /* parameter bytes, each NUL-terminated */
	size_t *offsets;     /* owned: parameter i starts at arena.data + offsets[i], or SIZE_MAX for NULL */
	size_t n_params, cap_params;
	const char **values; /* owned: pointers into arena, valid until the next plan_change */
	bool is_row_change;  /* insert/update/delete (truncate: false) */
	bool expect_one;     /* the statement must change exactly one row */
	struct strbuf what;  /* with describe: "schema.table (key=value)" for messages */
};

void plan_stmt_init(struct plan_stmt *s);
void plan_stmt_free(struct plan_stmt *s);

/* Plans c (an I U D T change; messages give 1 and an empty statement
 * meaning "nothing to do") against relations (indexed like the
 * envelope's relation table).  checkpoint_schema names the schema of
 * expect_one().  Returns 0, or -1 with err naming the relation. */
int plan_change(const char *checkpoint_schema, const struct plan_relation *relations, uint32_t n_relations,
		const struct env_change *c, bool describe, struct plan_stmt *s, char *err, size_t errlen);

/* Appends a quoted identifier to b. */
void plan_quote_ident(struct strbuf *b, const char *name, size_t len);

#endif
