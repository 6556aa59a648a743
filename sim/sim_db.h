/*
 * sim_db.h - the simulator's model database: tables of rows whose values
 * are pgoutput text values (or NULL), keyed by their key columns.
 *
 * One struct serves as the model source's state (what the source holds
 * after each commit) and as the model target's committed state; the
 * invariants compare the two (sim_db_equal, sim_db_diff).
 *
 * Owns.  Every table, row and value it holds (copies of what it is
 * given).  Deterministic: iteration is in key order, digests depend only
 * on contents.  No I/O, no clock, no globals, no libpq.
 */
#ifndef TRELLARA_SIM_DB_H
#define TRELLARA_SIM_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sim_db;

/* A row's values: n_columns entries, each a NUL-terminated text value or
 * NULL (SQL NULL).  Borrowed by every call that takes one. */
struct sim_values {
	const char *const *v;
	uint16_t n;
};

struct sim_db *sim_db_new(void);
void sim_db_free(struct sim_db *db);
/* A deep copy (the target's state at BEGIN, the source's at a commit). */
struct sim_db *sim_db_clone(const struct sim_db *db);

/* Creates table "schema.name" with n columns named cols[], the first
 * n_key of which are its key; 0 on success, -1 when it exists. */
int sim_db_create_table(struct sim_db *db, const char *table, uint16_t n, const char *const *cols, uint16_t n_key);
bool sim_db_has_table(const struct sim_db *db, const char *table);
/* The column count and key column count of table (0 when absent). */
uint16_t sim_db_columns(const struct sim_db *db, const char *table, uint16_t *n_key, const char *const **cols);

/* Row operations; key: the n_key key values.  Return the number of rows
 * affected (0 or 1), or -1 for a key conflict on insert / no such table. */
int sim_db_insert(struct sim_db *db, const char *table, struct sim_values row);
/* Replaces the row at key with row, except columns where keep[c] is true
 * (unchanged TOAST: the old value stays); row may carry a new key (the
 * row moves; -1 when the new key is taken by another row). */
int sim_db_update(struct sim_db *db, const char *table, struct sim_values key, struct sim_values row, const bool *keep);
int sim_db_delete(struct sim_db *db, const char *table, struct sim_values key);
/* The row at key (its values stay owned by db, valid until the next
 * change), or NULL. */
const char *const *sim_db_find(const struct sim_db *db, const char *table, struct sim_values key);
void sim_db_truncate(struct sim_db *db, const char *table);
size_t sim_db_rows(const struct sim_db *db, const char *table);

/* Iteration, in order (tables by name, rows by key): the number of
 * tables and the name of the i-th; the i-th row of table (its values
 * owned by db, valid until the next change), or NULL past the end. */
size_t sim_db_tables(const struct sim_db *db);
const char *sim_db_table_name(const struct sim_db *db, size_t i);
const char *const *sim_db_row(const struct sim_db *db, const char *table, size_t i);

/* Contents equal (every table, every row, every value)? */
bool sim_db_equal(const struct sim_db *a, const struct sim_db *b);
/* The first difference as one line (table, key, column, both values),
 * written to out; false when equal. */
bool sim_db_diff(const struct sim_db *a, const struct sim_db *b, char *out, size_t len);
/* A 64-bit digest of the contents (FNV-1a over tables, rows, values in order). */
uint64_t sim_db_digest(const struct sim_db *db);

#endif
