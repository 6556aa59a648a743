/*
 * planner_internal.h - what planner.c (one change, one statement) and
 * planner_set.c (a run of changes, one statement) share; nobody else
 * uses it (the contract is trellara/planner.h).
 */
#ifndef TRELLARA_PLANNER_INTERNAL_H
#define TRELLARA_PLANNER_INTERNAL_H

#include "trellara/planner.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Adds a parameter (len bytes of data, may be empty); returns its number ($n). */
size_t plan_add_param(struct plan_stmt *s, const void *data, size_t len);
/* Adds a NULL parameter; returns its number. */
size_t plan_add_null(struct plan_stmt *s);
/* Empties s for the next statement (its buffers kept). */
void plan_reset(struct plan_stmt *s);
/* The statement's values[] from its arena (after the last parameter). */
void plan_finish(struct plan_stmt *s);
/* "schema"."name" */
void plan_put_relation(struct strbuf *b, const struct env_relation *r);
/* " = ", or " OPERATOR(schema.=) " for column i when its equality operator
 * is not pg_catalog's (pr->col_eq). */
void plan_put_eq(struct strbuf *b, const struct plan_relation *pr, uint16_t i);
/* "ONLY " unless the target table is partitioned. */
void plan_put_only(struct strbuf *b, const struct plan_relation *pr);
/* "::type" of a target column's type as format_type() writes it, its
 * typmod left out (the assignment applies it, not an explicit cast). */
void plan_put_cast(struct strbuf *b, const char *type);
/* Types without a default equality operator: compared by their text. */
bool plan_no_equality(uint32_t type_oid);

#endif
