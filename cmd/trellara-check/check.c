/*
 * check.c - inspect the source, optionally fix what --fix may fix, and
 * judge the result (trellara-check(1), DESIGN §7, §13).
 *
 * Three phases, kept apart so --fix reports the state it leaves behind:
 * gather (read-only catalog queries into struct source_facts), fix (only
 * the missing pieces: publication, DDL evidence trigger, slot on request)
 * and evaluate (facts -> named checks).  Every query is a constant string
 * (chosen by server version) with values as parameters; DDL that --fix
 * runs quotes every identifier.  The phases live in check_facts.c,
 * check_fix.c and check_rules.c, the report in check_report.c
 * (check_int.h); this file runs them in order.
 */
#include "check_int.h"

#include "trellara/conninfo.h"
#include "trellara/log.h"
#include "trellara/planner.h"
#include "trellara/stream.h"
#include "trellara/strbuf.h"
#include "trellara/xalloc.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ strings */

char *check_strdup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

void check_chomp(char *m)
{
	size_t n = strlen(m);
	while (n > 0 && (m[n - 1] == '\n' || m[n - 1] == ' '))
		m[--n] = '\0';
}

char *check_human_bytes(uint64_t n)
{
	static const char *const units[] = { "bytes", "kB", "MB", "GB", "TB" };
	double v = (double)n;
	size_t u = 0;
	while (v >= 1024 && u + 1 < sizeof units / sizeof *units) {
		v /= 1024;
		u++;
	}
	return u == 0 ? xasprintf("%" PRIu64 " bytes", n) : xasprintf("%" PRIu64 " bytes (%.1f %s)", n, v, units[u]);
}

char *check_human_seconds(double s)
{
	if (s < 120)
		return xasprintf("%.0f s", s);
	if (s < 2 * 3600)
		return xasprintf("%.0f min", s / 60);
	if (s < 2 * 86400)
		return xasprintf("%.1f h", s / 3600);
	return xasprintf("%.1f days", s / 86400);
}

char *check_quote_ident(const char *name)
{
	struct strbuf b = STRBUF_INIT;
	plan_quote_ident(&b, name, strlen(name));
	return strbuf_detach(&b, NULL);
}

char *check_quote_literal(const char *text)
{
	return pgconn_quote_literal(NULL, text);
}

/* ------------------------------------------------------------ report */

void check_add_item(struct check_report *r, const char *section, const char *name, const char *object,
		     enum check_status status, char *detail, char *fix, bool fixable)
{
	r->items = xrealloc(r->items, (r->n_items + 1) * sizeof *r->items);
	r->items[r->n_items++] = (struct check_item){
		.section = section,
		.name = name,
		.object = check_strdup_or_null(object),
		.status = status,
		.detail = detail,
		.fix = status == CHECK_OK ? NULL : fix,
		.fixable = status != CHECK_OK && fixable,
	};
	if (status == CHECK_OK)
		free(fix);
	if (status == CHECK_BLOCKER)
		r->blockers++;
	else if (status == CHECK_WARN)
		r->warnings++;
}

void check_add_action(struct check_report *r, const char *action, char *detail, char *sql)
{
	log_info("%s", detail);
	r->fixed = xrealloc(r->fixed, (r->n_fixed + 1) * sizeof *r->fixed);
	r->fixed[r->n_fixed++] = (struct check_action){ .action = action, .detail = detail, .sql = sql };
}

/* ------------------------------------------------------------ checks with I/O of their own */

/* The source's identity against the one the flow's stream is bound to
 * (capture binds it on first start and refuses any other source). */
static void evaluate_identity(const struct flow_config *cfg, struct check_report *r)
{
	const struct check_identity *id = &r->identity;
	char *who = xasprintf("system identifier %s, database \"%s\", timeline %" PRIu32, id->system_identifier,
			      id->database, id->timeline);
	if (cfg->stream_kind == STREAM_KIND_JETSTREAM) {
		/* check has no NATS client: the binding is in the stream's last
		 * message, which capture compares before it publishes anything */
		check_add_item(r, "identity", "source_identity", NULL, CHECK_OK,
			       xasprintf("%s (the JetStream stream \"%s\" records its source in every message: trellara-capture refuses another source before publishing)",
					 who, cfg->jetstream_stream),
			       NULL, false);
		free(who);
		return;
	}
	char *meta_path = xasprintf("%s/meta", cfg->stream_path);
	struct stream_meta meta = { 0 };
	if (access(meta_path, F_OK) != 0) {
		check_add_item(r, "identity", "source_identity", NULL, CHECK_OK,
			 xasprintf("%s (no stream at \"%s\" yet: capture binds it to this source)", who, cfg->stream_path),
			 NULL, false);
	} else if (stream_meta_read(cfg->stream_path, &meta) < 0) {
		char *dir = strbuf_shell_quote(cfg->stream_path);
		check_add_item(r, "identity", "source_identity", NULL, CHECK_WARN,
			 xasprintf("%s; the stream identity \"%s\" cannot be read", who, meta_path),
			 xasprintf("trellara stream inspect-local --dir %s", dir), false);
		free(dir);
	} else if (!meta.system_identifier) {
		check_add_item(r, "identity", "source_identity", NULL, CHECK_OK,
			 xasprintf("%s (the stream at \"%s\" is not bound to a source yet)", who, cfg->stream_path), NULL,
			 false);
	} else if (strcmp(meta.system_identifier, id->system_identifier) != 0 ||
		   (meta.database && strcmp(meta.database, id->database) != 0)) {
		char *path = strbuf_shell_quote(cfg->path);
		check_add_item(r, "identity", "source_identity", NULL, CHECK_BLOCKER,
			 xasprintf("%s, but the stream at \"%s\" belongs to system identifier %s, database \"%s\": "
				   "trellara-capture will refuse this source",
				   who, cfg->stream_path, meta.system_identifier, meta.database ? meta.database : ""),
			 xasprintf("point source.database_url in %s at the stream's source, or set a new stream.path", path),
			 false);
		free(path);
	} else {
		check_add_item(r, "identity", "source_identity", NULL, CHECK_OK,
			 xasprintf("%s (matches the stream at \"%s\")", who, cfg->stream_path), NULL, false);
	}
	stream_meta_free(&meta);
	free(meta_path);
	free(who);
}

/* A DEFERRABLE unique, primary-key or exclusion constraint of a flow
 * table (or of its partitions) on the target: its uniqueness is checked
 * by an internal constraint trigger, which fires in the replica role only
 * when enabled ALWAYS (or REPLICA).  applyd applies as a replica, so
 * unless it is, a duplicate is applied silently (PostgreSQL's own apply
 * worker does the same).  One warning per table, naming each constraint
 * and the statement that makes its check fire. */
static void evaluate_target_deferrable(PGconn *conn, const struct flow_config *cfg, struct check_report *r)
{
	static const char *const sql =
		"SELECT format('%I.%I', n.nspname, c.relname), con.conname, tg.tgname,"
		" format('ALTER TABLE %I.%I ENABLE ALWAYS TRIGGER %I;', n.nspname, c.relname, tg.tgname)"
		" FROM pg_catalog.pg_constraint con"
		" JOIN pg_catalog.pg_class c ON c.oid = con.conrelid"
		" JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
		" JOIN pg_catalog.pg_trigger tg ON tg.tgconstraint = con.oid AND tg.tgisinternal"
		" WHERE con.contype IN ('u', 'p', 'x') AND con.condeferrable AND tg.tgenabled NOT IN ('A', 'R')"
		" AND (c.oid = pg_catalog.to_regclass(pg_catalog.format('%I.%I', $1::text, $2::text))"
		"   OR c.oid IN (SELECT relid FROM pg_catalog.pg_partition_tree("
		"     pg_catalog.to_regclass(pg_catalog.format('%I.%I', $1::text, $2::text)))))"
		" ORDER BY 1, 2";
	for (size_t i = 0; i < cfg->n_tables; i++) {
		const char *p[2] = { cfg->tables[i].schema, cfg->tables[i].name };
		PGresult *res = pgconn_query(conn, sql, 2, p);
		if (!res) {
			check_add_item(r, "target", "target_deferrable_unique", NULL, CHECK_WARN,
				 xasprintf("could not read the target's constraints of %s.%s: not checked for DEFERRABLE unique constraints",
					   cfg->tables[i].schema, cfg->tables[i].name),
				 NULL, false);
			continue;
		}
		if (PQntuples(res) > 0) {
			struct strbuf names = STRBUF_INIT, fix = STRBUF_INIT;
			for (int k = 0; k < PQntuples(res); k++) {
				strbuf_addf(&names, "%s%s", k ? ", " : "", PQgetvalue(res, k, 1));
				strbuf_addf(&fix, "%s%s", k ? "\n" : "", PQgetvalue(res, k, 3));
			}
			strbuf_adds(&fix, "  -- on the target, as a superuser (or make the constraint NOT DEFERRABLE)");
			check_add_item(r, "target", "target_deferrable_unique", PQgetvalue(res, 0, 0), CHECK_WARN,
				 xasprintf("DEFERRABLE constraint %s of target table %s is never checked while trellara-applyd applies:"
					   " its check is an internal trigger, which fires in the replica role only when enabled ALWAYS,"
					   " so a duplicate would be applied silently",
					   names.buf, PQgetvalue(res, 0, 0)),
				 strbuf_detach(&fix, NULL), false);
			strbuf_release(&names);
		}
		PQclear(res);
	}
}

/* The target role must be allowed to set session_replication_role:
 * trellara-applyd applies with the replica role and refuses to start
 * without it (trellara-applyd(1)). */
static void evaluate_target(const struct flow_config *cfg, struct check_report *r)
{
	PGconn *conn = pgconn_connect(cfg->target_database_url, PGCONN_NORMAL, CHECK_APPLICATION_NAME, "target");
	if (!conn) {
		check_add_item(r, "target", "target_replica_role", NULL, CHECK_WARN,
			 xstrdup("the target cannot be reached: not checked whether its role may set session_replication_role, "
				 "which trellara-applyd needs"),
			 NULL, false);
		return;
	}
	bool pg15 = PQserverVersion(conn) >= 150000;
	PGresult *res = pgconn_query(conn,
				     pg15 ? "SELECT current_user, has_parameter_privilege('session_replication_role', 'SET')"
					  : "SELECT current_user, rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user",
				     0, NULL);
	if (!res || PQntuples(res) != 1) {
		check_add_item(r, "target", "target_replica_role", NULL, CHECK_WARN,
			 xstrdup("could not read the target role's privileges: not checked whether it may set session_replication_role"),
			 NULL, false);
	} else {
		char *role = pgconn_quote_ident(conn, PQgetvalue(res, 0, 0));
		if (check_value_bool(res, 0, 1))
			check_add_item(r, "target", "target_replica_role", NULL, CHECK_OK,
				 xasprintf("target role %s may set session_replication_role (trellara-applyd applies as a replica)", role),
				 NULL, false);
		else
			check_add_item(r, "target", "target_replica_role", NULL, CHECK_BLOCKER,
				 xasprintf("target role %s may not set session_replication_role: trellara-applyd would refuse to apply (exit 78)",
					   role),
				 pg15 ? xasprintf("GRANT SET ON PARAMETER session_replication_role TO %s;  -- on the target, as a superuser", role)
				      : xasprintf("ALTER ROLE %s SUPERUSER;  -- on the target: before PostgreSQL 15 only a superuser may set it", role),
				 false);
		free(role);
	}
	PQclear(res);
	evaluate_target_deferrable(conn, cfg, r);
	PQfinish(conn);
}

/* ------------------------------------------------------------ run */

/* Server notices ("event trigger ... does not exist, skipping") are
 * debug output; warnings stay warnings. */
static void on_notice(void *arg, const PGresult *res)
{
	(void)arg;
	const char *severity = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
	char *message = xstrdup(PQresultErrorMessage(res));
	check_chomp(message);
	if (severity && strcmp(severity, "WARNING") == 0)
		log_warn("source: %s", message);
	else
		log_debug("source: %s", message);
	free(message);
}

int check_run(const struct check_options *o, struct check_report *r)
{
	const struct flow_config *cfg = o->config;
	struct source_facts facts = { 0 };
	struct replication_facts repl = { 0 };
	int rc = -1;
	memset(r, 0, sizeof *r);
	r->source = conninfo_mask(cfg->source_database_url);
	r->config_path = xstrdup(cfg->path ? cfg->path : "trellara.yml");
	r->fix_requested = o->fix;

	PGconn *conn = pgconn_connect(cfg->source_database_url, PGCONN_NORMAL, CHECK_APPLICATION_NAME, "source");
	if (!conn)
		goto out;
	PQsetNoticeReceiver(conn, on_notice, NULL);
	if (check_gather(conn, cfg, &facts) < 0)
		goto out;
	if (o->fix && facts.version_num >= 100000) {
		check_fix_source(conn, o, &facts, r);
		check_source_facts_free(&facts);
		if (check_gather(conn, cfg, &facts) < 0)
			goto out;
	}
	check_gather_standbys(conn, cfg, &facts);
	/* Last, so its WAL sender is not counted in wal_senders. */
	check_gather_replication(cfg->source_database_url, &repl);

	check_set_identity(&facts, &repl, r);
	evaluate_identity(cfg, r);
	check_rules_evaluate(cfg, &facts, &repl, r);
	evaluate_target(cfg, r);
	rc = 0;
out:
	if (rc < 0)
		check_report_free(r);
	check_source_facts_free(&facts);
	free(repl.error);
	PQfinish(conn);
	return rc;
}

void check_report_free(struct check_report *r)
{
	free(r->source);
	free(r->config_path);
	free(r->identity.system_identifier);
	free(r->identity.database);
	free(r->identity.server_version);
	free(r->identity.user);
	for (size_t i = 0; i < r->n_items; i++) {
		free(r->items[i].object);
		free(r->items[i].detail);
		free(r->items[i].fix);
	}
	free(r->items);
	for (size_t i = 0; i < r->n_fixed; i++) {
		free(r->fixed[i].detail);
		free(r->fixed[i].sql);
	}
	free(r->fixed);
	memset(r, 0, sizeof *r);
}

