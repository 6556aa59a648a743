#include "trellara/pgconn.h"

#include "trellara/config.h"
#include "trellara/conninfo.h"
#include "trellara/log.h"
#include "trellara/lsn.h"
#include "trellara/metrics.h"
#include "trellara/strbuf.h"
#include "trellara/xalloc.h"

#include <libpq-events.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What Trellara knows about a connection: libpq instance data of
 * pgconn_event, freed when the connection is. */
struct pgconn_info {
	char *role;       /* owned */
	char *masked_url; /* owned */
	bool quiet;
	char sqlstate[6];
	char *message;    /* owned; NULL: no failure */
};

/* A libpq message on one line: newlines inside become spaces, trailing
 * newlines and spaces go (libpq messages end in a newline and may hold
 * several lines).  Newly allocated. */
static char *one_line(const char *m)
{
	char *copy = xstrdup(m ? m : "");
	size_t n = strlen(copy);
	while (n > 0 && (copy[n - 1] == '\n' || copy[n - 1] == ' '))
		copy[--n] = '\0';
	for (char *p = copy; *p; p++)
		if (*p == '\n')
			*p = ' ';
	return copy;
}

static int pgconn_event(PGEventId id, void *event, void *pass_through)
{
	(void)pass_through;
	if (id == PGEVT_CONNDESTROY) {
		PGEventConnDestroy *e = event;
		struct pgconn_info *info = PQinstanceData(e->conn, pgconn_event);
		if (info) {
			free(info->role);
			free(info->masked_url);
			free(info->message);
			free(info);
		}
	}
	return 1;
}

static struct pgconn_info *info_of(const PGconn *conn)
{
	return conn ? PQinstanceData(conn, pgconn_event) : NULL;
}

/* Server notices ("schema already exists, skipping") are debug logs,
 * not stderr noise mixed into a program's output. */
static void notice_to_log(void *arg, const char *message)
{
	(void)arg;
	char *m = one_line(message);
	log_debug("server: %s", m);
	free(m);
}

static enum pgconn_failure last_failure;

enum pgconn_failure pgconn_last_failure(void)
{
	return last_failure;
}

void pgconn_failures_count(struct pgconn_failures *f, const char *key)
{
	f->refused = last_failure == PGCONN_FAILURE_AUTHENTICATION;
	if (f->refused)
		f->authentication++;
	else
		f->other++;
	if (f->refused && !f->hinted)
		log_hint("the server refused the credentials of %s: after a password rotation, write the new secret where "
			 "the flow file's reference points (a {source: file} reference is read again at every attempt); "
			 "retrying with backoff",
			 key);
	f->hinted = f->refused;
}

void pgconn_failures_ok(struct pgconn_failures *f)
{
	f->refused = f->hinted = false;
}

void pgconn_failures_metrics(struct metrics *m, const char *program, const char *server,
			     const struct pgconn_failures *f)
{
	char name[96], help[128];
	snprintf(name, sizeof name, "trellara_%s_connect_failures_total", program);
	snprintf(help, sizeof help, "failed connections to the %s, by cause", server);
	metrics_add_u64(m, name, help, METRIC_COUNTER, "cause", "authentication", f->authentication);
	metrics_add_u64(m, name, help, METRIC_COUNTER, "cause", "other", f->other);
	snprintf(name, sizeof name, "trellara_%s_credentials_refused", program);
	snprintf(help, sizeof help, "1: the %s refused the credentials at the last attempt", server);
	metrics_add_u64(m, name, help, METRIC_GAUGE, NULL, NULL, f->refused);
	snprintf(name, sizeof name, "trellara_%s_disconnects_total", program);
	snprintf(help, sizeof help, "sessions with the %s that ended, by cause", server);
	for (int i = 0; i < SQLSTATE_END_COUNT; i++)
		metrics_add_u64(m, name, help, METRIC_COUNTER, "cause", sqlstate_end_name((enum sqlstate_end)i), f->ended[i]);
}

const char *const pgconn_pinned_options = PGCONN_PINNED_OPTIONS;

/* Every occurrence of secret in text replaced by "*****" (a libpq message
 * that quotes part of a connection string: a host name taken from a
 * password that held an '@', say).  Newly allocated. */
static char *scrub(const char *text, const char *secret)
{
	struct strbuf b = STRBUF_INIT;
	size_t n = secret ? strlen(secret) : 0;
	const char *p = text;
	for (const char *hit; n > 0 && (hit = strstr(p, secret)) != NULL; p = hit + n) {
		strbuf_add(&b, p, (size_t)(hit - p));
		strbuf_adds(&b, "*****");
	}
	strbuf_adds(&b, p);
	return strbuf_detach(&b, NULL);
}

int pgconn_params_build(const char *url, struct pgconn_params *pp, char *error, size_t error_len)
{
	memset(pp, 0, sizeof *pp);
	char *parse_error = NULL;
	PQconninfoOption *opts = PQconninfoParse(url, &parse_error);
	if (!opts) {
		/* libpq's reason is withheld: it quotes the text near the
		 * fault, which can be the password */
		PQfreemem(parse_error);
		snprintf(error, error_len,
			 "the connection string does not parse (libpq's message is not shown: it can quote the password)");
		return -1;
	}
	const char *user_options = NULL;
	for (PQconninfoOption *opt = opts; opt->keyword; opt++) {
		if (!opt->val || !*opt->val)
			continue;
		if (strcmp(opt->keyword, "options") == 0)
			user_options = opt->val;
		else if (strcmp(opt->keyword, "password") == 0)
			pp->password = xstrdup(opt->val);
	}
	if (!user_options) {
		const char *env = getenv("PGOPTIONS");
		user_options = env && *env ? env : NULL;
	}
	/* the pinned settings last: a later -c wins */
	pp->options = user_options ? xasprintf("%s %s", user_options, PGCONN_PINNED_OPTIONS)
				   : xstrdup(PGCONN_PINNED_OPTIONS);
	PQconninfoFree(opts);
	return 0;
}

static int check_url(const char *url, char *why, size_t why_len)
{
	struct pgconn_params pp;
	int rc = pgconn_params_build(url, &pp, why, why_len);
	if (rc == 0)
		pgconn_params_free(&pp);
	return rc;
}

/* config_load's check of the flow's connection strings (config.h): in
 * every program this file is linked into, which is every program that
 * connects. */
__attribute__((constructor)) static void install_url_check(void)
{
	config_url_check = check_url;
}

void pgconn_params_free(struct pgconn_params *pp)
{
	if (pp->password)
		memset(pp->password, 0, strlen(pp->password));
	free(pp->password);
	free(pp->options);
	memset(pp, 0, sizeof *pp);
}

/* A failed connect, reported as o says: in its error buffer, and logged
 * (at debug level only when quiet with a buffer).  Takes text. */
static void report_connect_failure(const struct pgconn_options *o, char *text)
{
	if (o->error)
		snprintf(o->error, o->error_len, "%s", text);
	if (o->report == PGCONN_QUIET && o->error)
		log_debug("%s", text);
	else
		log_error("%s", text);
	free(text);
}

PGconn *pgconn_open(const char *url, const struct pgconn_options *o)
{
	const char *role = o->role ? o->role : "database";
	struct pgconn_params pp;
	char why[256];
	last_failure = PGCONN_FAILURE_NONE;
	if (pgconn_params_build(url, &pp, why, sizeof why) < 0) {
		last_failure = PGCONN_FAILURE_OTHER;
		/* neither the URL (masking needs it parsed) nor libpq's text */
		report_connect_failure(o, xasprintf("cannot connect to the %s database: %s", role, why));
		return NULL;
	}
	const char *keys[8], *values[8];
	int n = 0;
	if (o->connect_timeout) {
		/* first: a value in the URL itself wins over ours */
		keys[n] = "connect_timeout";
		values[n++] = o->connect_timeout;
	}
	keys[n] = "dbname";
	values[n++] = url;
	/* after the URL: these win over what it says (DESIGN: the sessions'
	 * settings); its own options are kept, before the pinned ones */
	keys[n] = "application_name";
	values[n++] = o->application_name;
	keys[n] = "options";
	values[n++] = pp.options;
	keys[n] = "client_encoding";
	values[n++] = "UTF8";
	if (o->kind == PGCONN_REPLICATION) {
		keys[n] = "replication";
		values[n++] = "database";
	}
	keys[n] = values[n] = NULL;
	PGconn *conn = PQconnectdbParams(keys, values, 1);
	char *masked = conninfo_mask(url);
	if (!conn || PQstatus(conn) != CONNECTION_OK) {
		char *raw = one_line(conn ? PQerrorMessage(conn) : "out of memory");
		char *message = scrub(raw, pp.password);
		free(raw);
		last_failure = conn && (PQconnectionNeedsPassword(conn) || strstr(message, "authentication failed"))
				       ? PGCONN_FAILURE_AUTHENTICATION
				       : PGCONN_FAILURE_OTHER;
		report_connect_failure(o, xasprintf("cannot connect to the %s database \"%s\": %s", role, masked, message));
		free(message);
		free(masked);
		pgconn_params_free(&pp);
		PQfinish(conn);
		return NULL;
	}
	pgconn_params_free(&pp);
	struct pgconn_info *info = xcalloc(1, sizeof *info);
	info->role = xstrdup(role);
	info->masked_url = masked;
	info->quiet = o->report == PGCONN_QUIET;
	if (!PQregisterEventProc(conn, pgconn_event, "trellara pgconn", NULL) ||
	    !PQsetInstanceData(conn, pgconn_event, info)) {
		/* only when out of memory: fail like xmalloc */
		fprintf(stderr, "fatal: cannot attach the connection handle's data\n");
		abort();
	}
	PQsetNoticeProcessor(conn, notice_to_log, NULL);
	return conn;
}

PGconn *pgconn_connect(const char *url, enum pgconn_kind kind, const char *application_name, const char *role)
{
	struct pgconn_options o = { .kind = kind, .application_name = application_name, .role = role };
	return pgconn_open(url, &o);
}

const char *pgconn_role(const PGconn *conn)
{
	struct pgconn_info *info = info_of(conn);
	return info ? info->role : "database";
}

const char *pgconn_masked_url(const PGconn *conn)
{
	struct pgconn_info *info = info_of(conn);
	return info ? info->masked_url : "";
}

const char *pgconn_sqlstate(const PGconn *conn)
{
	struct pgconn_info *info = info_of(conn);
	return info ? info->sqlstate : "";
}

const char *pgconn_message(const PGconn *conn)
{
	struct pgconn_info *info = info_of(conn);
	return info && info->message ? info->message : "";
}

enum sqlstate_class pgconn_error_class(const PGconn *conn)
{
	if (!conn || PQstatus(conn) != CONNECTION_OK)
		return SQLSTATE_CLASS_CONNECTION;
	return sqlstate_classify(pgconn_sqlstate(conn));
}

bool pgconn_lost(PGconn *conn, char *why, size_t why_len)
{
	if (!conn)
		return false;
	/* A query that failed on a socket the server closed (a write that
	 * failed, say) can leave the status OK: reading sees the end, and
	 * makes the status bad. */
	if (PQstatus(conn) == CONNECTION_OK && !PQisBusy(conn))
		PQconsumeInput(conn);
	if (pgconn_error_class(conn) != SQLSTATE_CLASS_CONNECTION)
		return false;
	if (why) {
		/* the failure pgconn_query recorded, else libpq's message (a
		 * query sent without pgconn_query, an asynchronous one) */
		char *message = one_line(*pgconn_message(conn) ? pgconn_message(conn) : PQerrorMessage(conn));
		snprintf(why, why_len, "%s", *message ? message : "connection lost");
		free(message);
	}
	return true;
}

/* Records the failure of sql on the handle and reports it (logged, or
 * at debug level only on a quiet handle). */
static void failed(PGconn *conn, const PGresult *res, const char *sql)
{
	struct pgconn_info *info = info_of(conn);
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	char *message = one_line(PQerrorMessage(conn));
	bool lost = PQstatus(conn) != CONNECTION_OK;
	char why[32];
	if (state && *state)
		snprintf(why, sizeof why, "SQLSTATE %s", state);
	else
		snprintf(why, sizeof why, "%s", lost ? "connection lost" : "no SQLSTATE");
	const char *role = info ? info->role : "database";
	const char *ellipsis = strlen(sql) > 80 ? "..." : "";
	if (info && info->quiet)
		log_debug("query on the %s database failed (%s): %s (query: %.80s%s)", role, why, message, sql, ellipsis);
	else
		log_error("query on the %s database failed (%s): %s (query: %.80s%s)", role, why, message, sql, ellipsis);
	if (info) {
		snprintf(info->sqlstate, sizeof info->sqlstate, "%s", state ? state : "");
		free(info->message);
		info->message = message;
	} else {
		free(message);
	}
}

PGresult *pgconn_query(PGconn *conn, const char *sql, int nparams, const char *const *params)
{
	PGresult *res = nparams ? PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0) : PQexec(conn, sql);
	ExecStatusType st = PQresultStatus(res);
	if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
		failed(conn, res, sql);
		PQclear(res);
		return NULL;
	}
	struct pgconn_info *info = info_of(conn);
	if (info) {
		info->sqlstate[0] = '\0';
		free(info->message);
		info->message = NULL;
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
