/*
 * pgconn.h - libpq helpers shared by the programs that talk to
 * PostgreSQL.  Connection strings are never printed unmasked; every
 * failure is logged once here, with the masked conninfo and the server's
 * message, and reported as -1 (or NULL).
 */
#ifndef TRELLARA_PGCONN_H
#define TRELLARA_PGCONN_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

enum pgconn_kind { PGCONN_NORMAL = 0, PGCONN_REPLICATION };

/* Connects to url (libpq URI or conninfo) as application_name.  NULL on
 * failure (logged, with role "source"/"target" in the message). */
PGconn *pgconn_connect(const char *url, enum pgconn_kind kind, const char *application_name, const char *role);
/* Runs a command that returns no rows; -1 on failure (logged). */
int pgconn_command(PGconn *conn, const char *sql);
/* Runs a query with text parameters; returns a PGRES_TUPLES_OK or
 * PGRES_COMMAND_OK result, or NULL (logged). */
PGresult *pgconn_query(PGconn *conn, const char *sql, int nparams, const char *const *params);
/* A quoted identifier (PQescapeIdentifier), newly allocated with malloc
 * (free with free()). */
char *pgconn_quote_ident(PGconn *conn, const char *ident);
/* A quoted string literal ('...' with quotes doubled) for the replication
 * protocol, which takes no parameters; newly allocated. */
char *pgconn_quote_literal(PGconn *conn, const char *text);

/* sql with every "@" replaced by the quoted schema name (newly allocated). */
char *pgconn_schema_sql(PGconn *conn, const char *sql, const char *schema);
/* pgconn_query() of such a statement. */
PGresult *pgconn_schema_query(PGconn *conn, const char *schema, const char *sql, int nparams, const char *const *params);

/* IDENTIFY_SYSTEM on a replication connection. */
struct pg_identity {
	char systemid[32];
	uint32_t timeline;
	uint64_t xlogpos;
	char dbname[128];
};
int pgconn_identify_system(PGconn *conn, struct pg_identity *id);

#endif
