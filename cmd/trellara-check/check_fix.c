/*
 * check_fix.c - the SQL text of the fixes, and --fix: only the missing
 * pieces (publication, DDL evidence trigger, slot on request), each in
 * its own transaction and recorded in the report (check_int.h).  DDL
 * quotes every identifier.
 */
#include "check_int.h"

#include "trellara/defaults.h"
#include "trellara/log.h"
#include "trellara/strbuf.h"
#include "trellara/xalloc.h"

#include <stdlib.h>
#include <string.h>

/*
 * The body of trellara.emit_ddl().  --fix compares it byte for byte with
 * pg_proc.prosrc to decide whether the installed function is current.
 * It must never fail the user's DDL: any error becomes a WARNING.  The
 * message is transactional, so it is decoded inside the DDL's own
 * transaction, in order, and vanishes if that transaction rolls back.
 */
const char check_ddl_function_body[] =
	"\n"
	"DECLARE\n"
	"\tr record;\n"
	"BEGIN\n"
	"\tIF TG_EVENT = 'sql_drop' THEN\n"
	"\t\tFOR r IN SELECT * FROM pg_catalog.pg_event_trigger_dropped_objects() LOOP\n"
	"\t\t\tPERFORM pg_catalog.pg_logical_emit_message(true, '" DDL_MESSAGE_PREFIX "',\n"
	"\t\t\t\tpg_catalog.json_build_object(\n"
	"\t\t\t\t\t'version', 1, 'event', TG_EVENT, 'command_tag', TG_TAG,\n"
	"\t\t\t\t\t'object_type', r.object_type, 'schema_name', r.schema_name,\n"
	"\t\t\t\t\t'object_name', r.object_name, 'object_identity', r.object_identity,\n"
	"\t\t\t\t\t'original', r.original, 'is_temporary', r.is_temporary,\n"
	"\t\t\t\t\t'statement', pg_catalog.current_query())::text);\n"
	"\t\tEND LOOP;\n"
	"\tELSE\n"
	"\t\tFOR r IN SELECT * FROM pg_catalog.pg_event_trigger_ddl_commands() LOOP\n"
	"\t\t\tPERFORM pg_catalog.pg_logical_emit_message(true, '" DDL_MESSAGE_PREFIX "',\n"
	"\t\t\t\tpg_catalog.json_build_object(\n"
	"\t\t\t\t\t'version', 1, 'event', TG_EVENT, 'command_tag', r.command_tag,\n"
	"\t\t\t\t\t'object_type', r.object_type, 'schema_name', r.schema_name,\n"
	"\t\t\t\t\t'object_identity', r.object_identity, 'in_extension', r.in_extension,\n"
	"\t\t\t\t\t'statement', pg_catalog.current_query())::text);\n"
	"\t\tEND LOOP;\n"
	"\t\tIF TG_TAG IN ('CREATE TABLE', 'ALTER TABLE', 'CREATE PUBLICATION', 'ALTER PUBLICATION') THEN\n"
	"\t\t\tBEGIN\n"
	"\t\t\t\tPERFORM " DDL_SCHEMA "." TRUNCATE_TRIGGERS_FUNCTION "();\n"
	"\t\t\tEXCEPTION WHEN OTHERS THEN\n"
	"\t\t\t\tRAISE WARNING 'trellara.emit_ddl: partition TRUNCATE triggers not created: % (SQLSTATE %)', SQLERRM, SQLSTATE;\n"
	"\t\t\tEND;\n"
	"\t\tEND IF;\n"
	"\tEND IF;\n"
	"EXCEPTION WHEN OTHERS THEN\n"
	"\tRAISE WARNING 'trellara.emit_ddl: no DDL evidence emitted: % (SQLSTATE %)', SQLERRM, SQLSTATE;\n"
	"END\n";

/*
 * The body of trellara.emit_truncate(), a statement trigger BEFORE and
 * AFTER TRUNCATE on each table of a published partitioned table's tree.
 * A TRUNCATE of the root fires its partitions' triggers too: a table
 * whose ancestor is being truncated by the same statement (the
 * transaction-local set trellara.truncating, kept by BEFORE and AFTER)
 * emits nothing, the root's own TRUNCATE reaches the stream through
 * pgoutput.  A partition truncated on its own emits a transactional
 * message naming it and its root.  It never fails the user's TRUNCATE.
 */
const char check_truncate_function_body[] =
	"\n"
	"DECLARE\n"
	"\tactive text := coalesce(pg_catalog.current_setting('trellara.truncating', true), '');\n"
	"\troot pg_catalog.oid;\n"
	"BEGIN\n"
	"\tIF TG_WHEN = 'AFTER' THEN\n"
	"\t\tPERFORM pg_catalog.set_config('trellara.truncating',\n"
	"\t\t\tpg_catalog.replace(active, ',' || TG_RELID::pg_catalog.text || ',', ','), true);\n"
	"\t\tRETURN NULL;\n"
	"\tEND IF;\n"
	"\tIF EXISTS (SELECT 1 FROM pg_catalog.pg_partition_ancestors(TG_RELID) a\n"
	"\t\t\tWHERE a.relid::pg_catalog.oid <> TG_RELID\n"
	"\t\t\tAND pg_catalog.strpos(active, ',' || a.relid::pg_catalog.oid::pg_catalog.text || ',') > 0) THEN\n"
	"\t\tRETURN NULL;\n"
	"\tEND IF;\n"
	"\tPERFORM pg_catalog.set_config('trellara.truncating',\n"
	"\t\tCASE WHEN active = '' THEN ',' ELSE active END || TG_RELID::pg_catalog.text || ',', true);\n"
	"\tIF (SELECT c.relispartition FROM pg_catalog.pg_class c WHERE c.oid = TG_RELID) THEN\n"
	"\t\troot := pg_catalog.pg_partition_root(TG_RELID);\n"
	"\t\tPERFORM pg_catalog.pg_logical_emit_message(true, '" TRUNCATE_MESSAGE_PREFIX "',\n"
	"\t\t\tpg_catalog.json_build_object('version', 1, 'schema', TG_TABLE_SCHEMA, 'table', TG_TABLE_NAME,\n"
	"\t\t\t\t'root_schema', (SELECT n.nspname FROM pg_catalog.pg_class c\n"
	"\t\t\t\t\tJOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = root),\n"
	"\t\t\t\t'root_table', (SELECT c.relname FROM pg_catalog.pg_class c WHERE c.oid = root))::text);\n"
	"\tEND IF;\n"
	"\tRETURN NULL;\n"
	"EXCEPTION WHEN OTHERS THEN\n"
	"\tRAISE WARNING 'trellara.emit_truncate: no TRUNCATE evidence emitted: % (SQLSTATE %)', SQLERRM, SQLSTATE;\n"
	"\tRETURN NULL;\n"
	"END\n";

/* The body of trellara.truncate_triggers(): the two triggers on every
 * table of every partitioned table a publication publishes via its root,
 * where they are missing. */
const char check_truncate_triggers_body[] =
	"\n"
	"DECLARE\n"
	"\tr record;\n"
	"BEGIN\n"
	"\tFOR r IN SELECT DISTINCT t.relid FROM pg_catalog.pg_publication p\n"
	"\t\tJOIN pg_catalog.pg_publication_tables pt ON pt.pubname = p.pubname\n"
	"\t\tJOIN pg_catalog.pg_namespace n ON n.nspname = pt.schemaname\n"
	"\t\tJOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = pt.tablename AND c.relkind = 'p'\n"
	"\t\tCROSS JOIN LATERAL pg_catalog.pg_partition_tree(c.oid) t\n"
	"\t\tWHERE p.pubviaroot LOOP\n"
	"\t\tIF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger g WHERE g.tgrelid = r.relid AND g.tgname = '" TRUNCATE_TRIGGER_BEFORE "') THEN\n"
	"\t\t\tEXECUTE pg_catalog.format('CREATE TRIGGER " TRUNCATE_TRIGGER_BEFORE " BEFORE TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION " DDL_SCHEMA "." TRUNCATE_FUNCTION "()', r.relid);\n"
	"\t\tEND IF;\n"
	"\t\tIF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger g WHERE g.tgrelid = r.relid AND g.tgname = '" TRUNCATE_TRIGGER_AFTER "') THEN\n"
	"\t\t\tEXECUTE pg_catalog.format('CREATE TRIGGER " TRUNCATE_TRIGGER_AFTER " AFTER TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION " DDL_SCHEMA "." TRUNCATE_FUNCTION "()', r.relid);\n"
	"\t\tEND IF;\n"
	"\tEND LOOP;\n"
	"END\n";


/* ------------------------------------------------------------ SQL text */

/* The DDL that installs the evidence trigger, idempotent on its own. */
char *check_ddl_install_sql(int version_num)
{
	char *schema = check_quote_ident(DDL_SCHEMA), *function = check_quote_ident(DDL_FUNCTION);
	char *trigger = check_quote_ident(DDL_TRIGGER), *drop_trigger = check_quote_ident(DDL_DROP_TRIGGER);
	const char *execute = version_num >= 110000 ? "FUNCTION" : "PROCEDURE";
	char *tfunction = check_quote_ident(TRUNCATE_FUNCTION), *tinstall = check_quote_ident(TRUNCATE_TRIGGERS_FUNCTION);
	char *sql = xasprintf("CREATE SCHEMA IF NOT EXISTS %s;\n"
			      "CREATE OR REPLACE FUNCTION %s.%s() RETURNS trigger LANGUAGE plpgsql\n"
			      "SET search_path = pg_catalog, pg_temp AS $trellara$%s$trellara$;\n"
			      "CREATE OR REPLACE FUNCTION %s.%s() RETURNS void LANGUAGE plpgsql\n"
			      "SET search_path = pg_catalog, pg_temp AS $trellara$%s$trellara$;\n"
			      "SELECT %s.%s();\n"
			      "CREATE OR REPLACE FUNCTION %s.%s() RETURNS event_trigger LANGUAGE plpgsql\n"
			      "SET search_path = pg_catalog, pg_temp AS $trellara$%s$trellara$;\n"
			      "DROP EVENT TRIGGER IF EXISTS %s;\n"
			      "CREATE EVENT TRIGGER %s ON ddl_command_end EXECUTE %s %s.%s();\n"
			      "DROP EVENT TRIGGER IF EXISTS %s;\n"
			      "CREATE EVENT TRIGGER %s ON sql_drop EXECUTE %s %s.%s();",
			      schema, schema, tfunction, check_truncate_function_body, schema, tinstall,
			      check_truncate_triggers_body, schema, tinstall, schema, function, check_ddl_function_body, trigger,
			      trigger, execute, schema, function, drop_trigger, drop_trigger, execute, schema, function);
	free(tfunction);
	free(tinstall);
	free(schema);
	free(function);
	free(trigger);
	free(drop_trigger);
	return sql;
}

bool check_table_publishable(const struct table_facts *t)
{
	return t->exists && (t->relkind == 'r' || t->relkind == 'p') && t->persistence == 'p';
}

/* "CREATE PUBLICATION ..." for the publishable tables (all configured
 * ones when none is publishable, for display); no final semicolon.
 * *names (when not NULL): the listed tables for a message. */
char *check_create_publication_sql(const struct flow_config *cfg, const struct source_facts *f,
				    size_t *n_publishable, char **names)
{
	struct strbuf b = STRBUF_INIT, list = STRBUF_INIT;
	char *pub = check_quote_ident(cfg->publication);
	size_t n = 0;
	bool partitioned = false;
	for (size_t i = 0; i < f->n_tables; i++)
		n += check_table_publishable(&f->tables[i]);
	strbuf_addf(&b, "CREATE PUBLICATION %s FOR TABLE ", pub);
	size_t listed = 0;
	for (size_t i = 0; i < f->n_tables; i++) {
		const struct table_facts *t = &f->tables[i];
		if (n > 0 && !check_table_publishable(t))
			continue;
		strbuf_addf(&b, "%s%s", listed ? ", " : "", t->quoted);
		strbuf_addf(&list, "%s%s", listed ? ", " : "", t->display);
		listed++;
		partitioned |= t->relkind == 'p';
	}
	if (partitioned)
		strbuf_addf(&b, " WITH (publish_via_partition_root = true)");
	free(pub);
	if (n_publishable)
		*n_publishable = n;
	if (names)
		*names = strbuf_detach(&list, NULL);
	strbuf_release(&list);
	return strbuf_detach(&b, NULL);
}

/* The tables to add to an existing publication; NULL when none. */
char *check_add_tables_sql(const struct flow_config *cfg, const struct source_facts *f, char **names)
{
	struct strbuf b = STRBUF_INIT, list = STRBUF_INIT;
	size_t n = 0;
	for (size_t i = 0; i < f->n_tables; i++) {
		const struct table_facts *t = &f->tables[i];
		if (!check_table_publishable(t) || t->in_publication || (t->relkind == 'p' && !f->pub_via_root))
			continue;
		if (n++ == 0) {
			char *pub = check_quote_ident(cfg->publication);
			strbuf_addf(&b, "ALTER PUBLICATION %s ADD TABLE %s", pub, t->quoted);
			free(pub);
			strbuf_addf(&list, "%s", t->display);
		} else {
			strbuf_addf(&b, ", %s", t->quoted);
			strbuf_addf(&list, ", %s", t->display);
		}
	}
	if (n == 0 || !f->pub_exists || f->pub_all_tables) {
		strbuf_release(&b);
		strbuf_release(&list);
		return NULL;
	}
	*names = strbuf_detach(&list, NULL);
	return strbuf_detach(&b, NULL);
}

/* ------------------------------------------------------------ fix */

static char *last_error(PGconn *conn)
{
	char *m = xstrdup(PQerrorMessage(conn));
	check_chomp(m);
	return m;
}

/* Runs sql (one or more statements) in one transaction; on failure adds
 * a "fix" blocker naming the action and returns -1. */
static int fix_exec(PGconn *conn, struct check_report *r, const char *action, const char *what, const char *sql)
{
	const char *end = sql[0] && sql[strlen(sql) - 1] == ';' ? "" : ";";
	if (pgconn_command(conn, "BEGIN") < 0)
		goto failed;
	if (pgconn_command(conn, sql) < 0) {
		char *error = last_error(conn);
		PGresult *res = PQexec(conn, "ROLLBACK");
		PQclear(res);
		check_add_item(r, "fix", "fix", action, CHECK_BLOCKER, xasprintf("could not %s: %s", what, error),
			 xasprintf("%s%s", sql, end), false);
		free(error);
		return -1;
	}
	if (pgconn_command(conn, "COMMIT") == 0)
		return 0;
failed:;
	char *error = last_error(conn);
	check_add_item(r, "fix", "fix", action, CHECK_BLOCKER, xasprintf("could not %s: %s", what, error), xasprintf("%s%s", sql, end),
		 false);
	free(error);
	return -1;
}

bool check_ddl_trigger_ok(const struct source_facts *f)
{
	return f->function_exists && f->function_current && f->trigger[0].exists && f->trigger[0].enabled &&
	       f->trigger[0].right && f->trigger[1].exists && f->trigger[1].enabled && f->trigger[1].right &&
	       f->truncate_current && f->truncate_missing == 0;
}

void check_fix_source(PGconn *conn, const struct check_options *o, const struct source_facts *f,
		       struct check_report *r)
{
	const struct flow_config *cfg = o->config;
	if (!f->pub_exists) {
		size_t n = 0;
		char *names = NULL, *sql = check_create_publication_sql(cfg, f, &n, &names);
		if (n == 0) {
			log_warn("publication \"%s\" not created: none of the configured tables can be published",
				 cfg->publication);
			free(sql);
		} else if (fix_exec(conn, r, "create_publication", "create the publication", sql) == 0) {
			check_add_action(r, "create_publication",
				   xasprintf("created publication \"%s\" for %s", cfg->publication, names), sql);
		} else {
			free(sql);
		}
		free(names);
	} else {
		char *names = NULL, *sql = check_add_tables_sql(cfg, f, &names);
		if (sql && fix_exec(conn, r, "add_publication_tables", "add tables to the publication", sql) == 0) {
			check_add_action(r, "add_publication_tables",
				   xasprintf("added %s to publication \"%s\"", names, cfg->publication), sql);
			sql = NULL;
		}
		free(sql);
		free(names);
	}

	if (!check_ddl_trigger_ok(f)) {
		if (!f->superuser) {
			log_warn("DDL evidence trigger not installed: event triggers need a superuser and role \"%s\" is not one",
				 f->user);
		} else {
			char *sql = check_ddl_install_sql(f->version_num);
			if (fix_exec(conn, r, "install_ddl_trigger", "install the DDL evidence trigger", sql) == 0)
				check_add_action(r, "install_ddl_trigger",
					   xasprintf("installed the DDL evidence trigger: function %s.%s(), event triggers %s and %s",
						     DDL_SCHEMA, DDL_FUNCTION, DDL_TRIGGER, DDL_DROP_TRIGGER),
					   sql);
			else
				free(sql);
		}
	}

	if (o->create_slot && !f->slot_exists) {
		/* 17+: a failover slot, which a standby can synchronize */
		const char *sql = f->version_num >= 170000
					  ? "SELECT pg_catalog.pg_create_logical_replication_slot($1, 'pgoutput', false, false, true)"
					  : "SELECT pg_catalog.pg_create_logical_replication_slot($1, 'pgoutput')";
		const char *params[1] = { cfg->slot };
		PGresult *res = pgconn_query(conn, sql, 1, params);
		char *literal = check_quote_literal(cfg->slot);
		if (res) {
			PQclear(res);
			check_add_action(r, "create_slot",
				   xasprintf("created logical replication slot \"%s\" (pgoutput%s)", cfg->slot,
					     f->version_num >= 170000 ? ", failover" : ""),
				   xasprintf("SELECT pg_catalog.pg_create_logical_replication_slot(%s, 'pgoutput'%s)",
					     literal, f->version_num >= 170000 ? ", false, false, true" : ""));
		} else {
			char *error = last_error(conn);
			check_add_item(r, "fix", "fix", "create_slot", CHECK_BLOCKER,
				 xasprintf("could not create the slot: %s", error),
				 xasprintf("SELECT pg_catalog.pg_create_logical_replication_slot(%s, 'pgoutput'%s);", literal,
					   f->version_num >= 170000 ? ", false, false, true" : ""),
				 false);
			free(error);
		}
		free(literal);
	}
}

