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

/* --create-tables: the tables marked in created[] (indexed like
 * cfg->tables) from the source's catalogs (tabledef.h), in one target
 * transaction; with only_missing, created[] is first set to the tables
 * the target lacks.  "pre-data" creates the tables and their partitions
 * before the copy, "post-data" their keys, indexes and foreign keys
 * after it.  0, or -1 (logged). */
int snapshot_create_missing_tables(PGconn *src, PGconn *dst, const struct flow_config *cfg, const char *section,
				   bool only_missing, bool *created);

#endif
