/*
 * pgconn.h - the connection handle and libpq helpers shared by the
 * programs that talk to PostgreSQL.
 *
 * The handle is the PGconn that pgconn_open() returns, with what Trellara
 * knows about it attached (libpq instance data, freed by PQfinish): the
 * role it plays ("source", "target", ...), its URL masked (never a
 * password), how its failures are reported, and the SQLSTATE and message
 * of the last failure of pgconn_query()/pgconn_command() on it (a success
 * clears them).  pgconn_error_class() classifies that failure with
 * sqlstate.h, the one SQLSTATE list: connection lost, transient,
 * permission, data.
 *
 * Reporting, chosen by the caller at pgconn_open():
 *   PGCONN_LOG    every failure is logged once here, at error level, with
 *                 the role, the SQLSTATE and the server's message
 *   PGCONN_QUIET  nothing is logged above debug level: a connect failure
 *                 is written to the caller's error buffer (one line), a
 *                 query failure is read back with pgconn_message()
 * Failures are returned as NULL or -1.  A PGconn not made here has no
 * handle data: its failures are logged with the role "database".
 */
#ifndef TRELLARA_PGCONN_H
#define TRELLARA_PGCONN_H

#include "trellara/sqlstate.h"

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum pgconn_kind { PGCONN_NORMAL = 0, PGCONN_REPLICATION };
enum pgconn_report { PGCONN_LOG = 0, PGCONN_QUIET };

struct pgconn_options {
	enum pgconn_kind kind;
	const char *application_name;
	const char *role;            /* "source", "target": named in every message */
	const char *connect_timeout; /* seconds, or NULL; a value in the URL wins */
	enum pgconn_report report;
	char *error;                 /* a connect failure goes here too (PGCONN_QUIET: only here) */
	size_t error_len;
};

/* The settings every session Trellara opens runs under, whatever the
 * server's, the database's or the role's defaults (startup options beat
 * ALTER DATABASE/ROLE ... SET): values read and written as text have one
 * format on both sides (dates ISO, intervals postgres, floats exact,
 * times in UTC, bytea hex, money in the C locale), and search_path is
 * empty, so that no function, operator or table a user planted in a
 * schema on the usual path (public) is ever resolved by a name of ours:
 * pg_catalog is searched first, nothing else. client_encoding is UTF8.
 * Options the URL (or PGOPTIONS) gives are kept, before these. */
#define PGCONN_PINNED_OPTIONS                                                                             \
	"-c DateStyle=ISO,YMD -c IntervalStyle=postgres -c extra_float_digits=3 -c TimeZone=UTC "          \
	"-c bytea_output=hex -c lc_monetary=C -c search_path="
extern const char *const pgconn_pinned_options;

/* What pgconn_open adds to a URL: the options (the URL's own, or
 * PGOPTIONS, then the pinned ones) and the password it holds (to keep it
 * out of messages). */
struct pgconn_params {
	char *options;  /* owned */
	char *password; /* owned, NULL without one; wiped when freed */
};
/* Parses url (PQconninfoParse).  -1 when it does not parse, with a fixed
 * message in error (never libpq's: it can quote the password). */
int pgconn_params_build(const char *url, struct pgconn_params *pp, char *error, size_t error_len);
void pgconn_params_free(struct pgconn_params *pp);

/* Connects to url (libpq URI or conninfo).  NULL on failure, reported as
 * o->report says.  Close with PQfinish(). */
PGconn *pgconn_open(const char *url, const struct pgconn_options *o);
/* pgconn_open() with PGCONN_LOG and libpq's connect timeout. */
PGconn *pgconn_connect(const char *url, enum pgconn_kind kind, const char *application_name, const char *role);

/* Why the last pgconn_open/pgconn_connect of this process failed: the
 * server refused the credentials (a password it asked for and was not
 * given, or "authentication failed"), or anything else (unreachable, not
 * accepting connections, no such database ...). */
enum pgconn_failure { PGCONN_FAILURE_NONE, PGCONN_FAILURE_AUTHENTICATION, PGCONN_FAILURE_OTHER };
enum pgconn_failure pgconn_last_failure(void);

/* A daemon's connections to one server: failed connections by cause,
 * and sessions that ended by cause (its *_connect_failures_total{cause},
 * *_credentials_refused and *_disconnects_total{cause} metrics, which
 * trellara status reads). */
struct pgconn_failures {
	uint64_t authentication, other;
	bool refused;  /* the last attempt was refused credentials */
	bool hinted;   /* the hint was given for this run of refusals */
	uint64_t ended[SQLSTATE_END_COUNT]; /* sessions that ended, by sqlstate_end_cause */
};
/* Counts the last failed pgconn_open of this process; the first of a run
 * of refused credentials logs a hint naming the flow key (key, e.g.
 * "source.database_url") and what to do after a rotation. */
void pgconn_failures_count(struct pgconn_failures *f, const char *key);
/* A connection succeeded: the run of refusals is over. */
void pgconn_failures_ok(struct pgconn_failures *f);
struct metrics;
/* Adds f's samples to m as trellara_PROGRAM_connect_failures_total{cause},
 * trellara_PROGRAM_credentials_refused and
 * trellara_PROGRAM_disconnects_total{cause}; server names it in the help
 * texts ("source", "target"). */
void pgconn_failures_metrics(struct metrics *m, const char *program, const char *server,
			     const struct pgconn_failures *f);

/* Runs a command that returns no rows; -1 on failure (reported). */
int pgconn_command(PGconn *conn, const char *sql);
/* Runs a query with text parameters; returns a PGRES_TUPLES_OK or
 * PGRES_COMMAND_OK result, or NULL (reported). */
PGresult *pgconn_query(PGconn *conn, const char *sql, int nparams, const char *const *params);

/* The handle's data; "" (role: "database") for a PGconn not opened here. */
const char *pgconn_role(const PGconn *conn);
const char *pgconn_masked_url(const PGconn *conn);
/* The last failure: its SQLSTATE ("" when the server sent none, or no
 * failure), and its message on one line ("" when none). */
const char *pgconn_sqlstate(const PGconn *conn);
const char *pgconn_message(const PGconn *conn);
/* The class of the last failure: SQLSTATE_CLASS_CONNECTION whenever the
 * connection is bad, else sqlstate_classify(pgconn_sqlstate()); NONE when
 * the last call succeeded. */
enum sqlstate_class pgconn_error_class(const PGconn *conn);
/* Whether the session of conn is gone or going (pgconn_error_class() is
 * SQLSTATE_CLASS_CONNECTION: the connection is bad, or the server ended
 * it with 57P01 ...) rather than a statement having failed on it; when
 * so and why is not NULL, why gets the last failure on one line.  It
 * reads what input is waiting (PQconsumeInput), which is how libpq
 * notices a server that closed the connection.  A NULL conn (never
 * opened) is not lost: the caller knows why it has none. */
bool pgconn_lost(PGconn *conn, char *why, size_t why_len);

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

/* SQL: the equality operator of the default btree operator class of
 * the type typid (an SQL expression; a domain's base type's), written
 * "OPERATOR(schema.=)" when its schema is not pg_catalog, else NULL: the
 * sessions' search_path is empty (PGCONN_PINNED_OPTIONS), so a bare "="
 * finds pg_catalog's operators only, and a key of citext or hstore (whose
 * "=" lives in the extension's schema) would fail "operator does not
 * exist".  The operator class's, as the key's index uses it: never an
 * operator someone created in a schema of the search path. */
#define PGCONN_KEY_EQUALITY_SQL(typid)                                                                              \
	"(SELECT CASE WHEN n.nspname <> 'pg_catalog' THEN pg_catalog.format('OPERATOR(%I.%s)', n.nspname, o.oprname) END" \
	" FROM pg_catalog.pg_type ty, pg_catalog.pg_opclass oc"                                                      \
	" JOIN pg_catalog.pg_am am ON am.oid = oc.opcmethod AND am.amname = 'btree'"                                 \
	" JOIN pg_catalog.pg_amop ao ON ao.amopfamily = oc.opcfamily AND ao.amoplefttype = oc.opcintype"             \
	"  AND ao.amoprighttype = oc.opcintype AND ao.amopstrategy = 3"                                              \
	" JOIN pg_catalog.pg_operator o ON o.oid = ao.amopopr JOIN pg_catalog.pg_namespace n ON n.oid = o.oprnamespace" \
	" WHERE ty.oid = " typid " AND oc.opcdefault"                                                                \
	"  AND oc.opcintype = coalesce(nullif(ty.typbasetype, 0::pg_catalog.oid), ty.oid) LIMIT 1)"

#endif
