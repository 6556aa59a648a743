/*
 * snapshot_int.h - what the parts of trellara-snapshot share (not a
 * library interface): snapshot.c (run, reseed), snapshot_tables.c
 * (--create-tables) and snapshot_status.c (status).
 */
#ifndef TRELLARA_SNAPSHOT_INT_H
#define TRELLARA_SNAPSHOT_INT_H

#include "snapshot.h"

#include "trellara/checkpoint.h"

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>

/* "schema.name" of the flow's table i into buf[len] */
void snapshot_table_names(const struct flow_config *cfg, size_t i, char *buf, size_t len);
struct flow_ids snapshot_flow_ids(const struct flow_config *cfg);

/* --create-tables before the copy: the tables marked in created[]
 * (indexed like cfg->tables) and their partitions, from the source's
 * catalogs (tabledef.h), in one target transaction; with only_missing,
 * created[] is first set to the tables the target lacks.  section names
 * the step in messages ("pre-data").  0, or -1 (logged). */
int snapshot_create_missing_tables(PGconn *src, PGconn *dst, const struct flow_config *cfg, const char *section,
				   bool only_missing, bool *created);

/* --create-tables after the copy (DESIGN §6): the keys, indexes and
 * replica identity of the tables marked in keys[], each table in a target
 * transaction of its own, then, in one transaction, the foreign keys
 * (into flow tables) of the tables marked in fkeys[] (both indexed like
 * cfg->tables).
 *
 * snapshot_post_data_plan reads the source's catalogs for them (NULL on
 * an error, logged); snapshot_post_data_build builds one table's keys
 * and indexes on the given target connection, as soon as its data is in
 * (a copy worker's, job->after_table; 0, or -1 logged; nothing for a
 * table with none, or built already); snapshot_post_data_finish builds
 * what is still unbuilt, snapshot.workers tables at once, then the
 * foreign keys (0, or -1 logged: a table's build that failed fails it). */
struct snapshot_post_data;
struct snapshot_post_data *snapshot_post_data_plan(PGconn *src, const struct flow_config *cfg, const bool *keys,
						   const bool *fkeys);
int snapshot_post_data_build(struct snapshot_post_data *pd, size_t table, PGconn *dst);
int snapshot_post_data_finish(struct snapshot_post_data *pd, PGconn *dst);
void snapshot_post_data_free(struct snapshot_post_data *pd);

#endif
