/*
 * check_int.h - what the parts of trellara-check share (not a library
 * interface): the facts gathered from the source, and the functions of
 * each phase.
 *
 *   check_facts.c   gather: read-only catalog queries into struct source_facts
 *   check_fix.c     the SQL text --fix runs (and the fixes shown), and fix
 *   check_rules.c   rules: facts -> named checks; no server, no I/O, so unit
 *                   tests judge hand-made facts (tests/unit/test_check_rules.c)
 *   check_report.c  the text and JSON report
 *   check.c         the run: phases in order, and the checks that need I/O
 *                   of their own (the stream's identity, the target role)
 *
 * Ownership: every char * in the facts is owned by the struct holding it
 * and freed by check_source_facts_free; functions returning char * hand a
 * new allocation to the caller; check_add_item and check_add_action take
 * ownership of the detail, fix and sql texts they are given.
 */
#ifndef TRELLARA_CHECK_INT_H
#define TRELLARA_CHECK_INT_H

#include "check.h"

#include "trellara/pgconn.h"

#include <stdbool.h>
#include <stdint.h>

#define CHECK_APPLICATION_NAME "trellara-check"
#define CAPTURE_APPLICATION_NAME "trellara-capture"
#define DDL_SCHEMA "trellara"
#define DDL_FUNCTION "emit_ddl"
#define DDL_TRIGGER "trellara_ddl"
#define DDL_DROP_TRIGGER "trellara_ddl_drop"
#define DDL_MESSAGE_PREFIX "trellara.ddl"

/* The body of trellara.emit_ddl() (check_fix.c). */
extern const char check_ddl_function_body[];
/* The partition TRUNCATE evidence (check_fix.c): pgoutput leaves out a
 * TRUNCATE of one partition under publish_via_partition_root, so each
 * table of a published partitioned table's tree gets BEFORE and AFTER
 * TRUNCATE statement triggers calling trellara.emit_truncate(), which
 * emits a TRUNCATE_MESSAGE_PREFIX message for a partition truncated on its
 * own; trellara.truncate_triggers() creates the missing ones (--fix, and
 * emit_ddl after CREATE/ALTER TABLE and CREATE/ALTER PUBLICATION). */
#define TRUNCATE_FUNCTION "emit_truncate"
#define TRUNCATE_TRIGGERS_FUNCTION "truncate_triggers"
#define TRUNCATE_TRIGGER_BEFORE "trellara_truncate_before"
#define TRUNCATE_TRIGGER_AFTER "trellara_truncate_after"
extern const char check_truncate_function_body[];
extern const char check_truncate_triggers_body[];

struct table_facts {
	const struct table_config *config;
	char *display;        /* owned: schema.name as configured */
	char *quoted;         /* owned: "schema"."name" */
	bool exists;
	char *oid;            /* owned */
	char relkind, persistence, replident;
	char *pk_index;        /* owned, NULL: no primary key */
	char *pk_columns;      /* owned */
	char *ident_index;     /* owned: the REPLICA IDENTITY USING INDEX index */
	char *candidate_index; /* owned: a unique index on NOT NULL columns */
	bool in_publication;
	char *row_filter;      /* owned: the publication's WHERE for it */
	bool column_list;
	char *partition_of;    /* owned: "schema.name" of a partitioned ancestor also configured */
};

/* One physical standby named in source.standby_database_urls: its side
 * of the failover posture (trellara-check(1) FAILOVER). */
struct standby_facts {
	char *shown;           /* owned: the masked URL */
	char *error;           /* owned: why it could not be inspected, or NULL */
	int version_num;
	bool in_recovery, same_system;
	char *system_identifier;                 /* owned */
	char *hot_standby_feedback;              /* owned: "on"/"off" */
	char *primary_slot_name;                 /* owned: "" when unset */
	char *sync_replication_slots;            /* owned: NULL below PostgreSQL 17 */
	bool conninfo_known, conninfo_has_dbname; /* primary_conninfo (needs pg_read_all_settings) */
	bool slot_exists, slot_synced, slot_failover;
	char *slot_invalidation, *slot_confirmed_lsn; /* owned, NULL when none */
	bool primary_slot_exists; /* the source has a physical slot named primary_slot_name */
	bool primary_slot_listed; /* the source's synchronized_standby_slots names it */
};

struct source_facts {
	/* identity and role */
	char *database, *user, *system_identifier; /* owned */
	uint32_t checkpoint_timeline;
	char *server_version; /* owned */
	int version_num;
	bool in_recovery, superuser, replication_role;
	/* settings */
	char *wal_level; /* owned */
	long max_replication_slots, max_wal_senders;
	bool has_max_slot_wal_keep_size;
	long long max_slot_wal_keep_size_mb;
	bool has_idle_timeout;
	char *idle_timeout, *idle_timeout_unit; /* owned */
	bool has_standby_slots;
	char *synchronized_standby_slots; /* owned */
	char *missing_standby_slots;      /* owned: names in it without a physical slot here, or NULL */
	long slots_used, senders_used, physical_slots;
	/* WAL volume (pg_stat_wal, 14+): the average since its stats_reset */
	bool wal_rate_known;
	double wal_bytes_per_second;
	char *wal_rate_since; /* owned */
	/* source.standby_database_urls, inspected in order */
	struct standby_facts *standbys; /* owned */
	size_t n_standbys;
	/* publication */
	bool pub_exists, pub_all_tables, pub_insert, pub_update, pub_delete, pub_truncate, pub_via_root;
	/* tables */
	struct table_facts *tables; /* owned */
	size_t n_tables;
	/* slot */
	bool slot_exists, slot_temporary, slot_active, has_failover, slot_failover;
	char *slot_type, *slot_plugin, *slot_database, *slot_active_app; /* owned */
	char *slot_active_pid, *restart_lsn, *confirmed_flush_lsn, *wal_status, *invalidation; /* owned */
	bool retained_known, safe_wal_known;
	uint64_t retained_bytes;
	long long safe_wal_size;
	/* DDL evidence */
	bool function_exists, function_current;
	bool truncate_current;         /* emit_truncate() and truncate_triggers() there, current */
	uint64_t truncate_missing;     /* tables of published partition trees without the two triggers */
	char *function_oid; /* owned */
	struct {
		bool exists, enabled, right;
	} trigger[2]; /* [0] trellara_ddl, [1] trellara_ddl_drop */
};

/* IDENTIFY_SYSTEM on a replication connection, done once at the end. */
struct replication_facts {
	bool ok;
	char *error; /* owned */
	struct pg_identity id;
};


/* check_facts.c */
void check_table_facts_free(struct table_facts *t);
void check_source_facts_free(struct source_facts *f);
char *check_value(const PGresult *res, int row, int col);
bool check_value_bool(const PGresult *res, int row, int col);
long long check_value_ll(const PGresult *res, int row, int col);
/* 0, or -1 (logged) when an inspection query fails */
int check_gather(PGconn *conn, const struct flow_config *cfg, struct source_facts *f);
void check_gather_replication(const char *url, struct replication_facts *r);
/* Each of source.standby_database_urls; conn is the source (its physical
 * slots).  A standby that cannot be inspected gets its error, not a
 * failure. */
void check_gather_standbys(PGconn *conn, const struct flow_config *cfg, struct source_facts *f);

/* check_fix.c */
char *check_ddl_install_sql(int version_num);
bool check_table_publishable(const struct table_facts *t);
char *check_create_publication_sql(const struct flow_config *cfg, const struct source_facts *f,
				   size_t *n_publishable, char **names);
char *check_add_tables_sql(const struct flow_config *cfg, const struct source_facts *f, char **names);
bool check_ddl_trigger_ok(const struct source_facts *f);
void check_fix_source(PGconn *conn, const struct check_options *o, const struct source_facts *f,
		      struct check_report *r);

/* check_rules.c: r->config_path must be set (it goes into the fixes). */
char *check_trellara_command(const struct check_report *r, const char *sub, const char *extra);
void check_set_identity(const struct source_facts *f, const struct replication_facts *repl, struct check_report *r);
/* The server, publication, table, slot and DDL checks, in that order
 * (only the server's below PostgreSQL 10). */
void check_rules_evaluate(const struct flow_config *cfg, const struct source_facts *f,
			  const struct replication_facts *repl, struct check_report *r);

/* check.c */
char *check_strdup_or_null(const char *s);
void check_chomp(char *m);
char *check_human_bytes(uint64_t n);
/* "90 s", "45 min", "2.5 h", "3.0 days" */
char *check_human_seconds(double seconds);
/* "name" with quotes doubled: PQescapeIdentifier's text for a name valid
 * in the server's encoding, without a connection */
char *check_quote_ident(const char *name);
/* 'text' with quotes doubled (pgconn_quote_literal) */
char *check_quote_literal(const char *text);
void check_add_item(struct check_report *r, const char *section, const char *name, const char *object,
		    enum check_status status, char *detail, char *fix, bool fixable);
void check_add_action(struct check_report *r, const char *action, char *detail, char *sql);

#endif
