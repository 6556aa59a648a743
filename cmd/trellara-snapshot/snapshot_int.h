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

/* --create-tables after the copy: the keys, indexes and replica identity
 * of the tables marked in keys[], each table in a target transaction of
 * its own, snapshot.workers tables at once; then, in one transaction,
 * the foreign keys (into flow tables) of the tables marked in fkeys[].
 * 0, or -1 (logged). */
int snapshot_build_post_data(PGconn *src, PGconn *dst, const struct flow_config *cfg, const bool *keys,
			     const bool *fkeys);

#endif
