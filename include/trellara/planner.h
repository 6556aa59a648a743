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
#include <stdint.h>

struct plan_relation {
	const struct env_relation *rel; /* borrowed, from the decoder */
	const bool *key;                /* per column: part of the match predicate; NULL = keyless full */
	const bool *identity_always;    /* per column: GENERATED ALWAYS AS IDENTITY on the target; NULL = none */
	bool partitioned;               /* the target table is partitioned (relkind 'p') */
	const char *const *col_types;   /* per column: the target's type as format_type() writes it, NULL = unknown; NULL = none known */
	const char *const *col_eq;      /* per column: its equality operator when not pg_catalog's
					   ("OPERATOR(public.=)": the session's search_path is empty), NULL = "="; NULL = all "=" */
};

struct plan_stmt {
	struct strbuf sql;   /* the statement text */
	struct buf arena;    /* parameter bytes, each NUL-terminated */
	size_t *offsets;     /* owned: parameter i starts at arena.data + offsets[i], or SIZE_MAX for NULL */
	size_t n_params, cap_params;
	const char **values; /* owned: pointers into arena, valid until the next plan_change */
	bool is_row_change;  /* insert/update/delete (truncate: false) */
	bool expect_one;     /* the statement must change exactly expect_rows rows */
	uint64_t expect_rows; /* with expect_one: the exact row count the statement must report (plan_change: 1) */
	struct strbuf what;  /* with describe: "schema.table (key=value)" for messages */
	bool copy;           /* plan_copy_set: sql is COPY ... FROM STDIN, its rows in copy_data (no parameters) */
	struct strbuf copy_data; /* with copy: the rows in COPY's text format */
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

/* ---- set-based statements (planner_set.c): a run of compatible changes
 * of one relation as one multi-row statement ----
 *
 * Values are text parameters with the input semantics of the per-row
 * statements: an insert's values take the column types as assignments;
 * an update's and a delete's VALUES list casts each parameter to the
 * column's type (col_types) without its typmod, so that the assignment
 * in SET applies the typmod exactly as the per-row statement does (an
 * explicit cast to varchar(3) would cut a longer value short instead of
 * failing).  col_types may be written with or without the typmod
 * (format_type(atttypid, atttypmod) or format_type(atttypid, -1)).
 * Key columns of types without an equality operator are compared by
 * their text, as plan_change does.
 *
 * The statement reports its row count; the executor checks it is
 * exactly n (expect_one, expect_rows): a missing row fails the batch
 * with TR001, a key that matches several rows with TR002. */
#define PLAN_SET_MAX_ROWS 512
/* Whether change b may join a set statement with change a (same relation, same op I/U/D, keyed relation
 * (relations[..].key != NULL), updates: old_kind 0 on both and the same columns sent (not unchanged TOAST),
 * deletes: old_kind 'K' or 'O'). */
bool plan_set_compatible(const struct plan_relation *relations, uint32_t n_relations, const struct env_change *a,
			 const struct env_change *b);
/* How many of a run of n compatible changes the next statement takes: the largest power of two
 * <= min(n, PLAN_SET_MAX_ROWS) that keeps the parameter count <= 65535 (so a relation has at most
 * ~10 statement shapes, each prepared once).  0 when n is 0.  first must be a change
 * plan_set_compatible takes (its relation index is not checked here). */
size_t plan_set_piece(const struct plan_relation *relations, const struct env_change *first, size_t n);
/* Plans n >= 1 compatible changes as one statement, expect_one = true, expect_rows = n:
 *  I: INSERT INTO s.t (every column) [OVERRIDING SYSTEM VALUE] VALUES ($1, $2, ...), (...)
 *     (NULLs as NULL parameters: the text depends only on n, never on the values)
 *  U: UPDATE [ONLY] s.t AS t SET c = v.c, ... FROM (VALUES ($1::type, ...), ...) AS v (k..., c...)
 *     WHERE t.k = v.k AND ...    (types from col_types; no_equality types compared ::text; the key
 *     columns are never in SET; GENERATED ALWAYS identity columns that are key columns are never in SET)
 *  D: DELETE FROM [ONLY] s.t AS t USING (VALUES ($1::type), ...) AS v (k...) WHERE t.k = v.k AND ...
 * Identifiers quoted as plan_change does (plan_quote_ident), ONLY as put_only does, every value a parameter,
 * values[i] NULL for a NULL parameter.  s->what = "schema.table (N rows: key=..., ...)" short.
 * Returns 0; 1 when these changes cannot be one statement (a needed col_types entry is NULL, a GENERATED
 * ALWAYS identity column that is not a key column is sent in an update, a NULL key value, an unchanged
 * TOAST key or insert value, a keyless relation, two updates of the same key value): the caller then
 * plans them one by one with plan_change;
 * -1 with err on a malformed change (relation index out of range) or a malformed call (n 0, changes
 * that plan_set_compatible refuses, more rows or parameters than plan_set_piece allows). */
int plan_change_set(const char *checkpoint_schema, const struct plan_relation *relations, uint32_t n_relations,
		    const struct env_change *const *cs, size_t n, struct plan_stmt *s, char *err, size_t errlen);

/* ---- COPY for runs of inserts (planner_set.c; apply.copy_inserts) ----
 *
 * A run of inserts of one relation as COPY s.t (every column) FROM STDIN
 * with the rows in COPY's text format: each value's text as the source
 * sent it, with backslash, tab, newline and carriage return escaped
 * (\\ \t \n \r), NULL as \N.  The values arrive as text from pgoutput,
 * so the binary format would need a send function per type: the text
 * format it is.  COPY takes GENERATED ALWAYS identity columns' values as
 * given (what the INSERT's OVERRIDING SYSTEM VALUE does), routes a
 * partitioned table's rows, fires row triggers as INSERT does, and
 * ignores rules (trellara-applyd(1) says so).  expect_one, expect_rows =
 * n: the executor checks COPY's row count as a set statement's. */
#define PLAN_COPY_MAX_ROWS 10000
/* How many of a run of n inserts the next COPY takes: min(n, PLAN_COPY_MAX_ROWS). */
size_t plan_copy_piece(size_t n);
/* Plans n >= 1 inserts (plan_set_compatible with cs[0]) as one COPY: 0; 1 when they cannot be one (an
 * unchanged-TOAST value, a change that is not an insert): the caller plans them as set statements; -1 with
 * err on a malformed call (n 0 or over PLAN_COPY_MAX_ROWS, a relation index out of range, changes that
 * plan_set_compatible refuses). */
int plan_copy_set(const struct plan_relation *relations, uint32_t n_relations, const struct env_change *const *cs,
		  size_t n, struct plan_stmt *s, char *err, size_t errlen);

#endif
