/*
 * contract.h - the schema contract of a flow (trellara-contract-test(1)):
 * the fingerprint of every flow table, its comparison between source,
 * target and the pinned file, and the check of a relation descriptor the
 * stream carries (a pgoutput Relation message, an envelope's relation)
 * against the pin.
 *
 * contract.c is pure (no libpq, no I/O but the pin's bytes in and out);
 * contract_pg.c reads a fingerprint from the catalogs (PQexecParams, the
 * names as parameters) and reads and writes the pin file.
 *
 * The fingerprint (canonical, stable; trellara-contract-test(1) FINGERPRINT):
 * per table in dataset.tables order: whether it exists, its relkind,
 * whether it is a partition, pg_get_partkeydef of a partitioned table,
 * the primary key's columns (key order), the
 * replica identity (d f i n) and, for i, the index's columns; per column
 * in attnum order (dropped ones left out): name, format_type, NOT NULL,
 * identity (a d or empty), generated (s v or empty), and the type's OID
 * and typmod (a side's own: compared only source with pin, and with the
 * stream's descriptors, which carry the source's).
 *
 * Owns.  Every string in these structs is owned by its struct
 * (contract_fingerprint_free, contract_diffs_free release them).
 * Failures: the pin decoder returns -1 with one line in err naming the
 * field; nothing here logs.
 */
#ifndef TRELLARA_CONTRACT_H
#define TRELLARA_CONTRACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CONTRACT_PIN_FORMAT "trellara-contract"
#define CONTRACT_PIN_VERSION 1
#define CONTRACT_ERR_LEN 256

struct contract_column {
	char *name; /* owned */
	char *type; /* owned: format_type(atttypid, atttypmod) */
	uint32_t type_oid;
	int32_t typmod;
	bool not_null;
	char identity;  /* 0, 'a' (always), 'd' (by default) */
	char generated; /* 0, 's' (stored), 'v' (virtual) */
};

struct contract_table {
	char *schema, *name; /* owned */
	bool exists;
	char relkind;        /* 'r', 'p', ... as pg_class has it */
	bool is_partition;
	char *partition_key; /* owned: pg_get_partkeydef ("RANGE (created_at)"); NULL unless partitioned */
	char **primary_key;  /* owned: the key's columns in key order (none: 0 of them) */
	size_t n_primary_key;
	char replica_identity; /* 'd', 'f', 'i', 'n' */
	char **replica_identity_columns; /* owned: the index's columns with 'i' (else none) */
	size_t n_replica_identity_columns;
	struct contract_column *columns; /* owned */
	size_t n_columns;
};

struct contract_fingerprint {
	struct contract_table *tables; /* owned */
	size_t n_tables;
	char *flow;      /* owned, the pin's "flow" (NULL for a catalog read) */
	char *pinned_at; /* owned, the pin's "pinned_at" (NULL for a catalog read) */
};

void contract_fingerprint_free(struct contract_fingerprint *fp);
/* A table of fp by name, or NULL. */
const struct contract_table *contract_find_table(const struct contract_fingerprint *fp, const char *schema,
						 const char *name);

/* ---- differences ---- */

enum contract_where { CONTRACT_SOURCE_TARGET, CONTRACT_SOURCE_PIN, CONTRACT_TARGET_PIN };
/* The safe action: make the other side match and pin again (refresh), or
 * copy the table again (reseed: a type, the columns' order, the
 * partitioning or the table itself changed). */
enum contract_action { CONTRACT_REFRESH, CONTRACT_RESEED };

struct contract_diff {
	enum contract_where where;
	char *table;       /* owned: "schema.name" */
	const char *property; /* static: table, column, column_order, type, type_oid, typmod, not_null, identity,
			       * generated, relkind, is_partition, partition_key, primary_key, replica_identity,
			       * replica_identity_columns */
	char *column;      /* owned; NULL for a table property */
	char *left, *right; /* owned: the values, source | source | target, and target | pin | pin */
	enum contract_action action;
};

struct contract_diffs {
	struct contract_diff *items; /* owned */
	size_t n;
};

void contract_diffs_free(struct contract_diffs *d);
const char *contract_where_name(enum contract_where where); /* "source-target", ... */
const char *contract_action_name(enum contract_action action); /* "refresh the contract", "reseed the table" */
/* The names of the two sides of where: "source"/"target", "source"/"pin", "target"/"pin". */
const char *contract_left_name(enum contract_where where);
const char *contract_right_name(enum contract_where where);

/* Appends every difference between left and right (tables matched by
 * name, in left's order; a table of right that left lacks is one too,
 * except on a pin, which may hold tables the flow no longer lists).
 * Source with pin also compares the types' OIDs and typmods. */
void contract_compare(const struct contract_fingerprint *left, const struct contract_fingerprint *right,
		      enum contract_where where, struct contract_diffs *out);

/* One column of a relation descriptor from the stream. */
struct contract_rel_column {
	const char *name;
	size_t name_len;
	uint32_t type_oid;
	int32_t typmod;
	bool key;
};

/* Checks a relation descriptor of the stream (the source's columns as
 * pgoutput sends them: no dropped ones, generated ones only when
 * published) against the pin.  Returns 0 when the relation is not a
 * pinned table or matches it, 1 when it differs: *diff (where
 * CONTRACT_SOURCE_PIN, the first difference; contract_diffs_free-able as
 * one item) names it. */
int contract_check_relation(const struct contract_fingerprint *pin, const char *schema, size_t schema_len,
			    const char *name, size_t name_len, char replident, const struct contract_rel_column *cols,
			    size_t n_cols, struct contract_diff *diff);
void contract_diff_release(struct contract_diff *d);

/* ---- the pin file (JSON, trellara-contract-test(1) PIN FILE) ---- */

/* Writes fp as the pin document (one JSON object and a newline) to out;
 * flow and pinned_at are written as given.  -1 when out failed. */
int contract_pin_write(FILE *out, const struct contract_fingerprint *fp, const char *flow, const char *pinned_at);
/* Decodes a pin document; -1 with err naming the field (fp zeroed). */
int contract_pin_decode(const char *text, size_t len, struct contract_fingerprint *fp, char *err, size_t errlen);

/* One difference as the line the programs log and print:
 *   public.items: column "note" (source-pin): source "present", pin "absent"; action: ACTION
 * ACTION is action_text, or (NULL) the action's name. */
char *contract_diff_line(const struct contract_diff *d, const char *action_text);

/* ---- the catalogs and the pin file (contract_pg.c) ----
 *
 * Each function logs its own failure once. */

struct pg_conn;
struct flow_config;

/* The fingerprint of every dataset.tables entry on one side (role:
 * "source", "target", for messages).  0, or -1 (the query failed). */
int contract_read_catalog(struct pg_conn *conn, const struct flow_config *cfg, const char *role,
			  struct contract_fingerprint *fp);
/* Reads the pin at path: 0 with *exists (false: no such file), or -1 (it
 * cannot be read, or is not a pin: named with the field). */
int contract_pin_load(const char *path, struct contract_fingerprint *fp, bool *exists);
/* Writes fp as the pin at path: its directory made (0700), a temporary
 * file (0600), fsync, rename, fsync of the directory.  0 or -1. */
int contract_pin_save(const char *path, const struct contract_fingerprint *fp, const char *flow);

/* Logs d as an error, with the hint of its safe action (the commands
 * spelled for the flow file cfg->path). */
void contract_log_drift(const struct contract_diff *d, const struct flow_config *cfg);
/* The hint text of d's action, newly allocated. */
char *contract_action_hint(const struct contract_diff *d, const char *config_path);

/* dataset.contract: pinned, at the start of capture (source) or applyd
 * (target): the side's catalog against the pin.  EXIT_OK with *pin
 * loaded (contract_fingerprint_free it), EXIT_CONFIG (a drift, or no pin:
 * logged with the action), EXIT_DATAERR (the pin is damaged), or -1 (the
 * catalog could not be read: try again). */
int contract_start_check(struct pg_conn *conn, const struct flow_config *cfg, bool source,
			 struct contract_fingerprint *pin);

#endif
