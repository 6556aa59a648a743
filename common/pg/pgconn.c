#include "trellara/pgconn.h"

#include "trellara/conninfo.h"
#include "trellara/log.h"
#include "trellara/lsn.h"
#include "trellara/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void chomp_message(char *m)
{
	size_t n = strlen(m);
	while (n > 0 && (m[n - 1] == '\n' || m[n - 1] == ' '))
		m[--n] = '\0';
}

/* Server notices ("schema already exists, skipping") are debug logs,
 * not stderr noise mixed into a program's output. */
static void notice_to_log(void *arg, const char *message)
{
	(void)arg;
	char *m = xstrdup(message);
	chomp_message(m);
	log_debug("server: %s", m);
	free(m);
}

PGconn *pgconn_connect(const char *url, enum pgconn_kind kind, const char *application_name, const char *role)
{
	const char *keys[5] = { "dbname", "application_name", NULL, NULL, NULL };
	const char *values[5] = { url, application_name, NULL, NULL, NULL };
	int n = 2;
	if (kind == PGCONN_REPLICATION) {
		keys[n] = "replication";
		values[n++] = "database";
	}
	PGconn *conn = PQconnectdbParams(keys, values, 1);
	if (!conn || PQstatus(conn) != CONNECTION_OK) {
		char *masked = conninfo_mask(url);
		char *message = xstrdup(conn ? PQerrorMessage(conn) : "out of memory");
		chomp_message(message);
		log_error("cannot connect to the %s database \"%s\": %s", role, masked, message);
		free(message);
		free(masked);
		PQfinish(conn);
		return NULL;
	}
	PQsetNoticeProcessor(conn, notice_to_log, NULL);
	return conn;
}

PGresult *pgconn_query(PGconn *conn, const char *sql, int nparams, const char *const *params)
{
	PGresult *res = nparams ? PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0) : PQexec(conn, sql);
	ExecStatusType st = PQresultStatus(res);
	if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
		char *message = xstrdup(PQerrorMessage(conn));
		chomp_message(message);
		log_error("query failed: %s (query: %.80s%s)", message, sql, strlen(sql) > 80 ? "..." : "");
		free(message);
		PQclear(res);
		return NULL;
	}
	return res;
}

int pgconn_command(PGconn *conn, const char *sql)
{
	PGresult *res = pgconn_query(conn, sql, 0, NULL);
	if (!res)
		return -1;
	PQclear(res);
	return 0;
}

char *pgconn_quote_ident(PGconn *conn, const char *ident)
{
	char *q = PQescapeIdentifier(conn, ident, strlen(ident));
	if (!q) {
		fprintf(stderr, "fatal: cannot quote identifier: %s", PQerrorMessage(conn));
		abort();
	}
	char *copy = xstrdup(q);
	PQfreemem(q);
	return copy;
}

char *pgconn_quote_literal(PGconn *conn, const char *text)
{
	(void)conn;
	size_t n = strlen(text);
	char *q = xmalloc(2 * n + 3);
	size_t o = 0;
	q[o++] = '\'';
	for (size_t i = 0; i < n; i++) {
		if (text[i] == '\'')
			q[o++] = '\'';
		q[o++] = text[i];
	}
	q[o++] = '\'';
	q[o] = '\0';
	return q;
}

int pgconn_identify_system(PGconn *conn, struct pg_identity *id)
{
	memset(id, 0, sizeof *id);
	PGresult *res = pgconn_query(conn, "IDENTIFY_SYSTEM", 0, NULL);
	if (!res)
		return -1;
	int rc = -1;
	if (PQntuples(res) != 1 || PQnfields(res) < 4) {
		log_error("IDENTIFY_SYSTEM returned %d rows and %d fields, expected 1 row of 4", PQntuples(res),
			  PQnfields(res));
		goto out;
	}
	snprintf(id->systemid, sizeof id->systemid, "%s", PQgetvalue(res, 0, 0));
	id->timeline = (uint32_t)strtoul(PQgetvalue(res, 0, 1), NULL, 10);
	if (!lsn_parse(PQgetvalue(res, 0, 2), &id->xlogpos)) {
		log_error("IDENTIFY_SYSTEM returned a malformed xlogpos \"%s\"", PQgetvalue(res, 0, 2));
		goto out;
	}
	snprintf(id->dbname, sizeof id->dbname, "%s", PQgetisnull(res, 0, 3) ? "" : PQgetvalue(res, 0, 3));
	rc = 0;
out:
	PQclear(res);
	return rc;
}

char *pgconn_schema_sql(PGconn *conn, const char *sql, const char *schema)
{
	char *quoted = pgconn_quote_ident(conn, schema);
	size_t n = 0, ql = strlen(quoted);
	for (const char *p = sql; *p; p++)
		n += *p == '@' ? ql : 1;
	char *out = xmalloc(n + 1), *o = out;
	for (const char *p = sql; *p; p++) {
		if (*p == '@') {
			memcpy(o, quoted, ql);
			o += ql;
		} else {
			*o++ = *p;
		}
	}
	*o = '\0';
	free(quoted);
	return out;
}

PGresult *pgconn_schema_query(PGconn *conn, const char *schema, const char *sql, int nparams, const char *const *params)
{
	char *text = pgconn_schema_sql(conn, sql, schema);
	PGresult *res = pgconn_query(conn, text, nparams, params);
	free(text);
	return res;
}
