/*
 * copy_target.h - the target side of a table copy (copy_target.c), for
 * copy.c: whether a target table holds rows, what references it from
 * outside, emptying the run's tables together, the triggers a COPY
 * would fire.
 */
#ifndef TRELLARA_COPY_TARGET_H
#define TRELLARA_COPY_TARGET_H

#include <libpq-fe.h>
#include <stddef.h>

/* "ONLY " for a relation read or emptied on its own; "" for a
 * partitioned table (its rows are its partitions'). */
const char *copy_only_for(char relkind);
/* Whether the target table holds a row: 1, 0, or -1 (logged). */
int copy_has_rows(PGconn *dst, const char *qualified, char relkind);
/* A foreign key into the tables of regclass_array ("{...}") from a table
 * outside it: 1 with its constraint, table and referenced table in con,
 * from, to (len bytes each); 0 when none; -1 on error (logged). */
int copy_referencing_key(PGconn *dst, const char *regclass_array, char *con, char *from, char *to, size_t len);
/* Appends qualified to the regclass array literal *arr ("{...}"). */
void copy_regclass_array_add(char **arr, const char *qualified);
/* The names of the triggers (and foreign keys' triggers) a COPY into the
 * target table would fire without session_replication_role = replica:
 * 0 with *names NULL when none, or a newly allocated list; -1 on error. */
int copy_insert_triggers(PGconn *dst, const char *qualified, char relkind, char **names);

#endif
