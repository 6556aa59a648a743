/*
 * tabledef.h - the DDL of --create-tables, from a description of the
 * source's catalogs (no libpq: tabledef.c decides, snapshot_tables.c
 * reads the catalogs and runs the statements).
 *
 * Every string of a description is SQL text the source server produced:
 * identifiers quoted by quote_ident() on the server, types by
 * format_type(), expressions and definitions by pg_get_expr(),
 * pg_get_constraintdef(), pg_get_indexdef() and pg_get_partkeydef(),
 * read with search_path empty so every name outside pg_catalog is
 * schema-qualified.  The generator only puts those pieces in place
 * around fixed keywords; it never quotes or interprets user data.  The
 * *_name fields ending in "display" are the catalog's own spelling, for
 * messages only, never for SQL.
 *
 * What is created (tabledef_pre_data, before the copy): each schema
 * the target lacks (IF NOT EXISTS: CREATE SCHEMA needs CREATE on the
 * database even when the schema exists), the sequences columns own (serial), the tables with
 * their columns in attnum order (type, collation when not the type's,
 * default, NOT NULL, identity with its sequence's options, generated
 * expression), their CHECK constraints, UNLOGGED, PARTITION BY, every
 * partition below (PARTITION OF ... FOR VALUES), and REPLICA IDENTITY
 * FULL or NOTHING.  After the copy (tabledef_post_data): primary keys,
 * unique and exclusion constraints, the other indexes (a partitioned
 * table's on the parent only: PostgreSQL creates and attaches the
 * partitions'), REPLICA IDENTITY USING INDEX, then the foreign keys whose
 * referenced table is in the flow.  Not created: types, extensions,
 * triggers, policies, grants, owners, comments, storage parameters.
 */
#ifndef TRELLARA_TABLEDEF_H
#define TRELLARA_TABLEDEF_H

#include <stdbool.h>
#include <stddef.h>

/* An identity column's sequence, or the sequence a column owns. */
struct tabledef_seq {
	char *schema;    /* owned: quoted */
	bool schema_exists; /* on the target (set by the reader): no CREATE SCHEMA */
	char *name;      /* owned: quoted */
	char *type;      /* owned: format_type of seqtypid */
	char *start, *increment, *min, *max, *cache; /* owned: int8 text */
	bool cycle;
	bool by_default; /* no column owns it, the column's default calls it: created if missing, not owned */
};

struct tabledef_column {
	char *name;            /* owned: quoted */
	char *name_display;    /* owned */
	char *type;            /* owned: format_type(atttypid, atttypmod) */
	bool type_missing;     /* the target has no such type (set by the reader) */
	char *collation;       /* owned: quoted, qualified; NULL when the type's */
	bool collation_missing;/* the target has no such collation */
	char *default_expr;    /* owned: pg_get_expr(adbin); the expression of a generated column; NULL */
	char generated;        /* 0, 's' stored, 'v' virtual */
	char identity;         /* 0, 'a' always, 'd' by default */
	bool not_null;
	struct tabledef_seq *seq; /* owned: the identity's or the owned sequence, else the one the default
				   * calls (by_default); NULL */
};

struct tabledef_constraint {
	char *name;      /* owned: quoted */
	char *def;       /* owned: pg_get_constraintdef() */
	bool inherited;  /* from a parent's constraint (a partition's copy) */
	char *referenced_display;      /* owned, foreign keys: "schema.name" */
	char *referenced_root_display; /* owned, foreign keys: its partition root, or NULL */
};

struct tabledef_index {
	char *def;       /* owned: pg_get_indexdef() */
	bool inherited;  /* attached to a parent's index */
};

struct tabledef_table {
	char *schema;          /* owned: quoted */
	bool schema_exists;    /* on the target (set by the reader): no CREATE SCHEMA */
	char *name;            /* owned: quoted */
	char *display;         /* owned: "schema.name" as in the catalog */
	int parent;            /* index of its parent in the set, -1 for the flow's table */
	bool unlogged;
	char *partkey;         /* owned: pg_get_partkeydef(); NULL when not partitioned */
	char *bound;           /* owned: pg_get_expr(relpartbound), partitions only */
	char replident;        /* relreplident: 'd', 'n', 'f', 'i' */
	char *replident_index; /* owned: quoted index name for 'i' */
	struct tabledef_column *columns; size_t n_columns;     /* owned */
	struct tabledef_constraint *checks; size_t n_checks;   /* owned: contype 'c' */
	struct tabledef_constraint *keys; size_t n_keys;       /* owned: contype 'p', 'u', 'x' */
	struct tabledef_index *indexes; size_t n_indexes;      /* owned: not backing a key */
	struct tabledef_constraint *fkeys; size_t n_fkeys;     /* owned: contype 'f' */
};

/* The tables to create: each flow table's tree, parents before their
 * partitions. */
struct tabledef_set {
	struct tabledef_table *tables; /* owned */
	size_t n_tables;
};

/* One statement to run, for the table it is about; a foreign key left
 * out has no sql and a note saying why. */
struct tabledef_stmt {
	char *sql;      /* owned; NULL for a note */
	char *note;     /* owned; NULL for a statement */
	const char *table_display; /* the set's */
};

struct tabledef_stmts {
	struct tabledef_stmt *items; /* owned */
	size_t n;
};

void tabledef_set_free(struct tabledef_set *set);
/* Appends an empty table (zeroed, parent -1) to the set; its address
 * stays valid until the next append. */
struct tabledef_table *tabledef_set_add(struct tabledef_set *set);
void tabledef_stmts_free(struct tabledef_stmts *s);

/* The statements that create the set's tables (see above), or -1 when a
 * column's type or collation is missing on the target: err names the
 * table, the column and the type. */
int tabledef_pre_data(const struct tabledef_set *set, struct tabledef_stmts *out, char *err, size_t errlen);

/* The statements of keys, indexes and replica identity of every table,
 * then of the foreign keys whose referenced table (or its partition root)
 * is one of flow_display[] ("schema.name"); the others become notes. */
void tabledef_post_data(const struct tabledef_set *set, const char *const *flow_display, size_t n_flow,
			struct tabledef_stmts *out);
/* Its two parts, for the set's tables [from, to): keys, indexes and
 * replica identity (a table's tree can be built on its own, in parallel
 * with the others'), and the foreign keys, which need every key first. */
void tabledef_post_data_keys(const struct tabledef_set *set, size_t from, size_t to, struct tabledef_stmts *out);
void tabledef_post_data_fkeys(const struct tabledef_set *set, size_t from, size_t to, const char *const *flow_display,
			      size_t n_flow, struct tabledef_stmts *out);

/* pg_get_indexdef() of a partitioned table's index says "ON ONLY", which
 * would create it on the parent alone, invalid; this is the statement
 * without ONLY (the first " ON ONLY " outside double quotes), so the
 * partitions' indexes are created and attached with it.  Owned. */
char *tabledef_index_sql(const char *indexdef);

#endif
