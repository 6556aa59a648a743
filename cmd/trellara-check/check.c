/*
 * check.c - inspect the source, optionally fix what --fix may fix, and
 * judge the result (trellara-check(1), DESIGN §7, §13).
 *
 * Three phases, kept apart so --fix reports the state it leaves behind:
 * gather (read-only catalog queries into struct source_facts), fix (only
 * the missing pieces: publication, DDL evidence trigger, slot on request)
 * and evaluate (facts -> named checks).  Every query is a constant string
 * (chosen by server version) with values as parameters; DDL that --fix
 * runs quotes every identifier with PQescapeIdentifier.
 */
#include "check.h"

#include "trellara/conninfo.h"
#include "trellara/jsonw.h"
#include "trellara/log.h"
#include "trellara/pgconn.h"
#include "trellara/stream.h"
#include "trellara/strbuf.h"
#include "trellara/textcodec.h"
#include "trellara/xalloc.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK_APPLICATION_NAME "trellara-check"
#define CAPTURE_APPLICATION_NAME "trellara-capture"
#define DDL_SCHEMA "trellara"
#define DDL_FUNCTION "emit_ddl"
#define DDL_TRIGGER "trellara_ddl"
#define DDL_DROP_TRIGGER "trellara_ddl_drop"
#define DDL_MESSAGE_PREFIX "trellara.ddl"

/*
 * The body of trellara.emit_ddl().  --fix compares it byte for byte with
 * pg_proc.prosrc to decide whether the installed function is current.
 * It must never fail the user's DDL: any error becomes a WARNING.  The
 * message is transactional, so it is decoded inside the DDL's own
 * transaction, in order, and vanishes if that transaction rolls back.
 */
static const char ddl_function_body[] =
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
	"\tEND IF;\n"
	"EXCEPTION WHEN OTHERS THEN\n"
	"\tRAISE WARNING 'trellara.emit_ddl: no DDL evidence emitted: % (SQLSTATE %)', SQLERRM, SQLSTATE;\n"
	"END\n";

/* ------------------------------------------------------------ strings */

static char *strdup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

static void chomp(char *m)
{
	size_t n = strlen(m);
	while (n > 0 && (m[n - 1] == '\n' || m[n - 1] == ' '))
		m[--n] = '\0';
}

char *check_shell_quote(const char *word)
{
	bool safe = *word != '\0';
	for (const char *p = word; *p && safe; p++)
		safe = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%", *p) != NULL;
	if (safe)
		return xstrdup(word);
	struct strbuf b = STRBUF_INIT;
	strbuf_addf(&b, "'");
	for (const char *p = word; *p; p++) {
		if (*p == '\'')
			strbuf_addf(&b, "'\\''");
		else
			strbuf_addf(&b, "%c", *p);
	}
	strbuf_addf(&b, "'");
	return strbuf_detach(&b, NULL);
}

static char *human_bytes(uint64_t n)
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

/* ------------------------------------------------------------ facts */

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
	long slots_used, senders_used, physical_slots;
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

static void table_facts_free(struct table_facts *t)
{
	free(t->display);
	free(t->quoted);
	free(t->oid);
	free(t->pk_index);
	free(t->pk_columns);
	free(t->ident_index);
	free(t->candidate_index);
	free(t->row_filter);
	free(t->partition_of);
}

static void source_facts_free(struct source_facts *f)
{
	free(f->database);
	free(f->user);
	free(f->system_identifier);
	free(f->server_version);
	free(f->wal_level);
	free(f->idle_timeout);
	free(f->idle_timeout_unit);
	free(f->synchronized_standby_slots);
	for (size_t i = 0; i < f->n_tables; i++)
		table_facts_free(&f->tables[i]);
	free(f->tables);
	free(f->slot_type);
	free(f->slot_plugin);
	free(f->slot_database);
	free(f->slot_active_app);
	free(f->slot_active_pid);
	free(f->restart_lsn);
	free(f->confirmed_flush_lsn);
	free(f->wal_status);
	free(f->invalidation);
	free(f->function_oid);
	memset(f, 0, sizeof *f);
}

static char *value(const PGresult *res, int row, int col)
{
	return PQgetisnull(res, row, col) ? NULL : xstrdup(PQgetvalue(res, row, col));
}

static bool value_bool(const PGresult *res, int row, int col)
{
	return !PQgetisnull(res, row, col) && PQgetvalue(res, row, col)[0] == 't';
}

static long long value_ll(const PGresult *res, int row, int col)
{
	return PQgetisnull(res, row, col) ? 0 : strtoll(PQgetvalue(res, row, col), NULL, 10);
}

/* ------------------------------------------------------------ gather */

static const char sql_identity[] =
	"SELECT pg_catalog.current_database(), current_user,"
	" (SELECT system_identifier::text FROM pg_catalog.pg_control_system()),"
	" (SELECT timeline_id FROM pg_catalog.pg_control_checkpoint()),"
	" pg_catalog.current_setting('server_version'),"
	" pg_catalog.current_setting('server_version_num')::int,"
	" pg_catalog.pg_is_in_recovery(),"
	" COALESCE((SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user), false),"
	" COALESCE((SELECT rolreplication FROM pg_catalog.pg_roles WHERE rolname = current_user), false)";

static const char sql_settings[] =
	"SELECT name, setting, COALESCE(unit, '') FROM pg_catalog.pg_settings WHERE name IN"
	" ('wal_level', 'max_replication_slots', 'max_wal_senders', 'max_slot_wal_keep_size',"
	" 'idle_replication_slot_timeout', 'synchronized_standby_slots')";

static const char sql_counts[] =
	"SELECT (SELECT count(*) FROM pg_catalog.pg_replication_slots),"
	" (SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE backend_type = 'walsender'),"
	" (SELECT count(*) FROM pg_catalog.pg_replication_slots WHERE slot_type = 'physical')";

static int gather_server(PGconn *conn, struct source_facts *f)
{
	PGresult *res = pgconn_query(conn, sql_identity, 0, NULL);
	if (!res)
		return -1;
	f->database = value(res, 0, 0);
	f->user = value(res, 0, 1);
	f->system_identifier = value(res, 0, 2);
	f->checkpoint_timeline = (uint32_t)value_ll(res, 0, 3);
	char *version = value(res, 0, 4);
	if (version)
		version[strcspn(version, " ")] = '\0';
	f->server_version = version ? version : xstrdup("unknown");
	f->version_num = (int)value_ll(res, 0, 5);
	f->in_recovery = value_bool(res, 0, 6);
	f->superuser = value_bool(res, 0, 7);
	f->replication_role = value_bool(res, 0, 8);
	PQclear(res);

	if (!(res = pgconn_query(conn, sql_settings, 0, NULL)))
		return -1;
	f->max_slot_wal_keep_size_mb = -1;
	for (int i = 0; i < PQntuples(res); i++) {
		const char *name = PQgetvalue(res, i, 0), *setting = PQgetvalue(res, i, 1);
		if (strcmp(name, "wal_level") == 0) {
			f->wal_level = xstrdup(setting);
		} else if (strcmp(name, "max_replication_slots") == 0) {
			f->max_replication_slots = strtol(setting, NULL, 10);
		} else if (strcmp(name, "max_wal_senders") == 0) {
			f->max_wal_senders = strtol(setting, NULL, 10);
		} else if (strcmp(name, "max_slot_wal_keep_size") == 0) {
			f->has_max_slot_wal_keep_size = true;
			f->max_slot_wal_keep_size_mb = strtoll(setting, NULL, 10);
		} else if (strcmp(name, "idle_replication_slot_timeout") == 0) {
			f->has_idle_timeout = true;
			f->idle_timeout = xstrdup(setting);
			f->idle_timeout_unit = xstrdup(PQgetvalue(res, i, 2));
		} else if (strcmp(name, "synchronized_standby_slots") == 0) {
			f->has_standby_slots = true;
			f->synchronized_standby_slots = xstrdup(setting);
		}
	}
	PQclear(res);
	if (!f->wal_level)
		f->wal_level = xstrdup("unknown");

	if (!(res = pgconn_query(conn, sql_counts, 0, NULL)))
		return -1;
	f->slots_used = (long)value_ll(res, 0, 0);
	f->senders_used = (long)value_ll(res, 0, 1);
	f->physical_slots = (long)value_ll(res, 0, 2);
	PQclear(res);
	return 0;
}

static int gather_publication(PGconn *conn, const struct flow_config *cfg, struct source_facts *f)
{
	const char *sql = f->version_num >= 130000
				  ? "SELECT puballtables, pubinsert, pubupdate, pubdelete, pubtruncate, pubviaroot"
				    " FROM pg_catalog.pg_publication WHERE pubname = $1"
			  : f->version_num >= 110000
				  ? "SELECT puballtables, pubinsert, pubupdate, pubdelete, pubtruncate, false"
				    " FROM pg_catalog.pg_publication WHERE pubname = $1"
				  : "SELECT puballtables, pubinsert, pubupdate, pubdelete, true, false"
				    " FROM pg_catalog.pg_publication WHERE pubname = $1";
	const char *params[1] = { cfg->publication };
	PGresult *res = pgconn_query(conn, sql, 1, params);
	if (!res)
		return -1;
	if (PQntuples(res) == 1) {
		f->pub_exists = true;
		f->pub_all_tables = value_bool(res, 0, 0);
		f->pub_insert = value_bool(res, 0, 1);
		f->pub_update = value_bool(res, 0, 2);
		f->pub_delete = value_bool(res, 0, 3);
		f->pub_truncate = value_bool(res, 0, 4);
		f->pub_via_root = value_bool(res, 0, 5);
	}
	PQclear(res);
	return 0;
}

static const char sql_table[] =
	"SELECT c.oid::text, c.relkind::text, c.relpersistence::text, c.relreplident::text,"
	" (SELECT ci.relname FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ci ON ci.oid = i.indexrelid"
	"   WHERE i.indrelid = c.oid AND i.indisprimary),"
	" (SELECT pg_catalog.string_agg(a.attname::text, ', ' ORDER BY k.ord)"
	"   FROM pg_catalog.pg_index i"
	"   CROSS JOIN LATERAL pg_catalog.unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)"
	"   JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum"
	"   WHERE i.indrelid = c.oid AND i.indisprimary),"
	" (SELECT ci.relname FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ci ON ci.oid = i.indexrelid"
	"   WHERE i.indrelid = c.oid AND i.indisreplident),"
	" (SELECT ci.relname FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ci ON ci.oid = i.indexrelid"
	"   WHERE i.indrelid = c.oid AND i.indisunique AND NOT i.indisprimary AND i.indimmediate"
	"   AND i.indisvalid AND i.indpred IS NULL AND i.indexprs IS NULL"
	"   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid"
	"     AND a.attnum = ANY (i.indkey::int2[]) AND NOT a.attnotnull)"
	"   ORDER BY ci.relname LIMIT 1)"
	" FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
	" WHERE n.nspname = $1 AND c.relname = $2";

static const char sql_table_published[] = "SELECT 1 FROM pg_catalog.pg_publication_tables"
					  " WHERE pubname = $1 AND schemaname = $2 AND tablename = $3";

static const char sql_table_filters[] =
	"SELECT pg_catalog.pg_get_expr(pr.prqual, pr.prrelid), pr.prattrs IS NOT NULL"
	" FROM pg_catalog.pg_publication_rel pr JOIN pg_catalog.pg_publication p ON p.oid = pr.prpubid"
	" WHERE p.pubname = $1 AND pr.prrelid = $2::oid";

static int gather_table(PGconn *conn, const struct flow_config *cfg, struct source_facts *f, struct table_facts *t)
{
	const char *params[3] = { t->config->schema, t->config->name, NULL };
	PGresult *res = pgconn_query(conn, sql_table, 2, params);
	if (!res)
		return -1;
	if (PQntuples(res) == 1) {
		t->exists = true;
		t->oid = value(res, 0, 0);
		t->relkind = PQgetvalue(res, 0, 1)[0];
		t->persistence = PQgetvalue(res, 0, 2)[0];
		t->replident = PQgetvalue(res, 0, 3)[0];
		t->pk_index = value(res, 0, 4);
		t->pk_columns = value(res, 0, 5);
		t->ident_index = value(res, 0, 6);
		t->candidate_index = value(res, 0, 7);
	}
	PQclear(res);
	if (t->exists && f->version_num >= 120000) {
		/* a partition of a configured partitioned table, at any level: a
		 * sub-partitioned middle table too (the snapshot refuses both) */
		const char *ap[1] = { t->oid };
		if (!(res = pgconn_query(conn,
					 "SELECT n.nspname, c.relname FROM pg_catalog.pg_partition_ancestors($1::oid) a"
					 " JOIN pg_catalog.pg_class c ON c.oid = a.relid"
					 " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE a.relid <> $1::oid",
					 1, ap)))
			return -1;
		for (int r = 0; r < PQntuples(res) && !t->partition_of; r++)
			for (size_t k = 0; k < cfg->n_tables; k++)
				if (strcmp(cfg->tables[k].schema, PQgetvalue(res, r, 0)) == 0 &&
				    strcmp(cfg->tables[k].name, PQgetvalue(res, r, 1)) == 0) {
					t->partition_of = xasprintf("%s.%s", cfg->tables[k].schema, cfg->tables[k].name);
					break;
				}
		PQclear(res);
	}
	if (!t->exists || !f->pub_exists)
		return 0;

	const char *pparams[3] = { cfg->publication, t->config->schema, t->config->name };
	if (!(res = pgconn_query(conn, sql_table_published, 3, pparams)))
		return -1;
	t->in_publication = PQntuples(res) > 0;
	PQclear(res);
	if (f->version_num < 150000 || !t->in_publication)
		return 0;
	const char *fparams[2] = { cfg->publication, t->oid };
	if (!(res = pgconn_query(conn, sql_table_filters, 2, fparams)))
		return -1;
	if (PQntuples(res) > 0) {
		t->row_filter = value(res, 0, 0);
		t->column_list = value_bool(res, 0, 1);
	}
	PQclear(res);
	return 0;
}

static int gather_slot(PGconn *conn, const struct flow_config *cfg, struct source_facts *f)
{
	const char *wal = f->version_num >= 130000 ? "s.wal_status, s.safe_wal_size::text" : "NULL::text, NULL::text";
	const char *failover = f->version_num >= 170000 ? "s.failover, s.invalidation_reason"
			       : f->version_num >= 160000 ? "NULL::bool, CASE WHEN s.conflicting THEN 'conflicting' END"
							  : "NULL::bool, NULL::text";
	f->has_failover = f->version_num >= 170000;
	/* Constant fragments only: the slot name is a parameter. */
	char *sql = xasprintf(
		"SELECT s.slot_type, s.plugin, s.database, s.temporary, s.active, s.active_pid::text,"
		" s.restart_lsn::text, s.confirmed_flush_lsn::text, %s, %s,"
		" (CASE WHEN s.restart_lsn IS NULL THEN NULL"
		"  WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.pg_last_wal_replay_lsn() - s.restart_lsn"
		"  ELSE pg_catalog.pg_current_wal_lsn() - s.restart_lsn END)::text,"
		" (SELECT a.application_name FROM pg_catalog.pg_stat_activity a WHERE a.pid = s.active_pid)"
		" FROM pg_catalog.pg_replication_slots s WHERE s.slot_name = $1",
		wal, failover);
	const char *params[1] = { cfg->slot };
	PGresult *res = pgconn_query(conn, sql, 1, params);
	free(sql);
	if (!res)
		return -1;
	if (PQntuples(res) == 1) {
		f->slot_exists = true;
		f->slot_type = value(res, 0, 0);
		f->slot_plugin = value(res, 0, 1);
		f->slot_database = value(res, 0, 2);
		f->slot_temporary = value_bool(res, 0, 3);
		f->slot_active = value_bool(res, 0, 4);
		f->slot_active_pid = value(res, 0, 5);
		f->restart_lsn = value(res, 0, 6);
		f->confirmed_flush_lsn = value(res, 0, 7);
		f->wal_status = value(res, 0, 8);
		f->safe_wal_known = !PQgetisnull(res, 0, 9);
		f->safe_wal_size = value_ll(res, 0, 9);
		f->slot_failover = value_bool(res, 0, 10);
		f->invalidation = value(res, 0, 11);
		f->retained_known = !PQgetisnull(res, 0, 12);
		/* numeric text: digits, perhaps a fraction we do not need */
		f->retained_bytes = f->retained_known ? strtoull(PQgetvalue(res, 0, 12), NULL, 10) : 0;
		f->slot_active_app = value(res, 0, 13);
	}
	PQclear(res);
	return 0;
}

static const char sql_ddl_function[] =
	"SELECT p.oid::text, p.prosrc, p.prorettype = 'pg_catalog.event_trigger'::pg_catalog.regtype"
	" FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace"
	" WHERE n.nspname = $1 AND p.proname = $2 AND p.pronargs = 0";

static const char sql_ddl_triggers[] =
	"SELECT evtname::text, evtevent::text, evtenabled::text, evtfoid::text, evttags IS NULL"
	" FROM pg_catalog.pg_event_trigger WHERE evtname IN ($1, $2)";

static int gather_ddl(PGconn *conn, struct source_facts *f)
{
	const char *fparams[2] = { DDL_SCHEMA, DDL_FUNCTION };
	PGresult *res = pgconn_query(conn, sql_ddl_function, 2, fparams);
	if (!res)
		return -1;
	if (PQntuples(res) == 1) {
		f->function_exists = true;
		f->function_oid = value(res, 0, 0);
		f->function_current = value_bool(res, 0, 2) && strcmp(PQgetvalue(res, 0, 1), ddl_function_body) == 0;
	}
	PQclear(res);

	const char *tparams[2] = { DDL_TRIGGER, DDL_DROP_TRIGGER };
	if (!(res = pgconn_query(conn, sql_ddl_triggers, 2, tparams)))
		return -1;
	for (int i = 0; i < PQntuples(res); i++) {
		int which = strcmp(PQgetvalue(res, i, 0), DDL_TRIGGER) == 0 ? 0 : 1;
		const char *want_event = which == 0 ? "ddl_command_end" : "sql_drop";
		f->trigger[which].exists = true;
		f->trigger[which].enabled = PQgetvalue(res, i, 2)[0] != 'D';
		f->trigger[which].right = strcmp(PQgetvalue(res, i, 1), want_event) == 0 && value_bool(res, i, 4) &&
					  f->function_oid && strcmp(PQgetvalue(res, i, 3), f->function_oid) == 0;
	}
	PQclear(res);
	return 0;
}

static int gather(PGconn *conn, const struct flow_config *cfg, struct source_facts *f)
{
	memset(f, 0, sizeof *f);
	if (gather_server(conn, f) < 0)
		return -1;
	if (f->version_num < 100000)
		return 0; /* no logical replication at all: only server_version is judged */
	if (gather_publication(conn, cfg, f) < 0)
		return -1;
	f->tables = xcalloc(cfg->n_tables, sizeof *f->tables);
	f->n_tables = cfg->n_tables;
	for (size_t i = 0; i < cfg->n_tables; i++) {
		struct table_facts *t = &f->tables[i];
		t->config = &cfg->tables[i];
		t->display = xasprintf("%s.%s", t->config->schema, t->config->name);
		char *qs = pgconn_quote_ident(conn, t->config->schema), *qn = pgconn_quote_ident(conn, t->config->name);
		t->quoted = xasprintf("%s.%s", qs, qn);
		free(qs);
		free(qn);
		if (gather_table(conn, cfg, f, t) < 0)
			return -1;
	}
	if (gather_slot(conn, cfg, f) < 0)
		return -1;
	return gather_ddl(conn, f);
}

static void gather_replication(const char *url, struct replication_facts *r)
{
	const char *keys[] = { "dbname", "application_name", "replication", NULL };
	const char *values[] = { url, CHECK_APPLICATION_NAME, "database", NULL };
	memset(r, 0, sizeof *r);
	PGconn *conn = PQconnectdbParams(keys, values, 1);
	if (!conn || PQstatus(conn) != CONNECTION_OK) {
		r->error = xstrdup(conn ? PQerrorMessage(conn) : "out of memory");
		chomp(r->error);
		goto out;
	}
	/* pgconn_identify_system logs a failure; it is reported as a check too. */
	if (pgconn_identify_system(conn, &r->id) < 0) {
		r->error = xstrdup(PQerrorMessage(conn));
		chomp(r->error);
		goto out;
	}
	r->ok = true;
out:
	PQfinish(conn);
}

/* ------------------------------------------------------------ report */

static void add_item(struct check_report *r, const char *section, const char *name, const char *object,
		     enum check_status status, char *detail, char *fix, bool fixable)
{
	r->items = xrealloc(r->items, (r->n_items + 1) * sizeof *r->items);
	r->items[r->n_items++] = (struct check_item){
		.section = section,
		.name = name,
		.object = strdup_or_null(object),
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

static void add_action(struct check_report *r, const char *action, char *detail, char *sql)
{
	log_info("%s", detail);
	r->fixed = xrealloc(r->fixed, (r->n_fixed + 1) * sizeof *r->fixed);
	r->fixed[r->n_fixed++] = (struct check_action){ .action = action, .detail = detail, .sql = sql };
}

/* ------------------------------------------------------------ SQL text */

/* The DDL that installs the evidence trigger, idempotent on its own. */
static char *ddl_install_sql(PGconn *conn, int version_num)
{
	char *schema = pgconn_quote_ident(conn, DDL_SCHEMA), *function = pgconn_quote_ident(conn, DDL_FUNCTION);
	char *trigger = pgconn_quote_ident(conn, DDL_TRIGGER), *drop_trigger = pgconn_quote_ident(conn, DDL_DROP_TRIGGER);
	const char *execute = version_num >= 110000 ? "FUNCTION" : "PROCEDURE";
	char *sql = xasprintf("CREATE SCHEMA IF NOT EXISTS %s;\n"
			      "CREATE OR REPLACE FUNCTION %s.%s() RETURNS event_trigger LANGUAGE plpgsql\n"
			      "SET search_path = pg_catalog, pg_temp AS $trellara$%s$trellara$;\n"
			      "DROP EVENT TRIGGER IF EXISTS %s;\n"
			      "CREATE EVENT TRIGGER %s ON ddl_command_end EXECUTE %s %s.%s();\n"
			      "DROP EVENT TRIGGER IF EXISTS %s;\n"
			      "CREATE EVENT TRIGGER %s ON sql_drop EXECUTE %s %s.%s();",
			      schema, schema, function, ddl_function_body, trigger, trigger, execute, schema, function,
			      drop_trigger, drop_trigger, execute, schema, function);
	free(schema);
	free(function);
	free(trigger);
	free(drop_trigger);
	return sql;
}

static bool table_publishable(const struct table_facts *t)
{
	return t->exists && (t->relkind == 'r' || t->relkind == 'p') && t->persistence == 'p';
}

/* "CREATE PUBLICATION ..." for the publishable tables (all configured
 * ones when none is publishable, for display); no final semicolon.
 * *names (when not NULL): the listed tables for a message. */
static char *create_publication_sql(PGconn *conn, const struct flow_config *cfg, const struct source_facts *f,
				    size_t *n_publishable, char **names)
{
	struct strbuf b = STRBUF_INIT, list = STRBUF_INIT;
	char *pub = pgconn_quote_ident(conn, cfg->publication);
	size_t n = 0;
	bool partitioned = false;
	for (size_t i = 0; i < f->n_tables; i++)
		n += table_publishable(&f->tables[i]);
	strbuf_addf(&b, "CREATE PUBLICATION %s FOR TABLE ", pub);
	size_t listed = 0;
	for (size_t i = 0; i < f->n_tables; i++) {
		const struct table_facts *t = &f->tables[i];
		if (n > 0 && !table_publishable(t))
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
static char *add_tables_sql(PGconn *conn, const struct flow_config *cfg, const struct source_facts *f, char **names)
{
	struct strbuf b = STRBUF_INIT, list = STRBUF_INIT;
	size_t n = 0;
	for (size_t i = 0; i < f->n_tables; i++) {
		const struct table_facts *t = &f->tables[i];
		if (!table_publishable(t) || t->in_publication || (t->relkind == 'p' && !f->pub_via_root))
			continue;
		if (n++ == 0) {
			char *pub = pgconn_quote_ident(conn, cfg->publication);
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
	chomp(m);
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
		add_item(r, "fix", "fix", action, CHECK_BLOCKER, xasprintf("could not %s: %s", what, error),
			 xasprintf("%s%s", sql, end), false);
		free(error);
		return -1;
	}
	if (pgconn_command(conn, "COMMIT") == 0)
		return 0;
failed:;
	char *error = last_error(conn);
	add_item(r, "fix", "fix", action, CHECK_BLOCKER, xasprintf("could not %s: %s", what, error), xasprintf("%s%s", sql, end),
		 false);
	free(error);
	return -1;
}

static bool ddl_trigger_ok(const struct source_facts *f)
{
	return f->function_exists && f->function_current && f->trigger[0].exists && f->trigger[0].enabled &&
	       f->trigger[0].right && f->trigger[1].exists && f->trigger[1].enabled && f->trigger[1].right;
}

static void fix_source(PGconn *conn, const struct check_options *o, const struct source_facts *f,
		       struct check_report *r)
{
	const struct flow_config *cfg = o->config;
	if (!f->pub_exists) {
		size_t n = 0;
		char *names = NULL, *sql = create_publication_sql(conn, cfg, f, &n, &names);
		if (n == 0) {
			log_warn("publication \"%s\" not created: none of the configured tables can be published",
				 cfg->publication);
			free(sql);
		} else if (fix_exec(conn, r, "create_publication", "create the publication", sql) == 0) {
			add_action(r, "create_publication",
				   xasprintf("created publication \"%s\" for %s", cfg->publication, names), sql);
		} else {
			free(sql);
		}
		free(names);
	} else {
		char *names = NULL, *sql = add_tables_sql(conn, cfg, f, &names);
		if (sql && fix_exec(conn, r, "add_publication_tables", "add tables to the publication", sql) == 0) {
			add_action(r, "add_publication_tables",
				   xasprintf("added %s to publication \"%s\"", names, cfg->publication), sql);
			sql = NULL;
		}
		free(sql);
		free(names);
	}

	if (!ddl_trigger_ok(f)) {
		if (!f->superuser) {
			log_warn("DDL evidence trigger not installed: event triggers need a superuser and role \"%s\" is not one",
				 f->user);
		} else {
			char *sql = ddl_install_sql(conn, f->version_num);
			if (fix_exec(conn, r, "install_ddl_trigger", "install the DDL evidence trigger", sql) == 0)
				add_action(r, "install_ddl_trigger",
					   xasprintf("installed the DDL evidence trigger: function %s.%s(), event triggers %s and %s",
						     DDL_SCHEMA, DDL_FUNCTION, DDL_TRIGGER, DDL_DROP_TRIGGER),
					   sql);
			else
				free(sql);
		}
	}

	if (o->create_slot && !f->slot_exists) {
		static const char sql[] = "SELECT pg_catalog.pg_create_logical_replication_slot($1, 'pgoutput')";
		const char *params[1] = { cfg->slot };
		PGresult *res = pgconn_query(conn, sql, 1, params);
		char *literal = pgconn_quote_literal(conn, cfg->slot);
		if (res) {
			PQclear(res);
			add_action(r, "create_slot",
				   xasprintf("created logical replication slot \"%s\" (pgoutput)", cfg->slot),
				   xasprintf("SELECT pg_catalog.pg_create_logical_replication_slot(%s, 'pgoutput')",
					     literal));
		} else {
			char *error = last_error(conn);
			add_item(r, "fix", "fix", "create_slot", CHECK_BLOCKER,
				 xasprintf("could not create the slot: %s", error),
				 xasprintf("SELECT pg_catalog.pg_create_logical_replication_slot(%s, 'pgoutput');", literal),
				 false);
			free(error);
		}
		free(literal);
	}
}

/* ------------------------------------------------------------ evaluate */

static char *trellara_command(const struct check_report *r, const char *sub, const char *extra)
{
	char *path = check_shell_quote(r->config_path);
	char *s = xasprintf("trellara %s --config %s%s", sub, path, extra);
	free(path);
	return s;
}

static int needed_version(const struct flow_config *cfg)
{
	int v = cfg->pgoutput_protocol_version >= 4 ? 160000
		: cfg->pgoutput_protocol_version == 3 ? 150000
		: cfg->pgoutput_protocol_version == 2 ? 140000
						      : 100000;
	return cfg->pgoutput_streaming && v < 140000 ? 140000 : v;
}

/* "ALTER SYSTEM SET name = n;" plus the restart these settings need. */
static char *raise_setting_fix(const char *name, long n)
{
	return xasprintf("ALTER SYSTEM SET %s = %ld;\nthen restart PostgreSQL (%s takes effect only at server start)", name,
			 n, name);
}

static void evaluate_server(PGconn *conn, const struct flow_config *cfg, const struct source_facts *f,
			    const struct replication_facts *repl, struct check_report *r)
{
	const char *S = "server";
	int need = needed_version(cfg);
	if (f->version_num < need)
		add_item(r, S, "server_version", NULL, CHECK_BLOCKER,
			 xasprintf("PostgreSQL %s: pgoutput protocol %d%s needs PostgreSQL %d or later", f->server_version,
				   cfg->pgoutput_protocol_version, cfg->pgoutput_streaming ? " with streaming" : "",
				   need / 10000),
			 xasprintf("upgrade the source to PostgreSQL %d or later", need / 10000), false);
	else
		add_item(r, S, "server_version", NULL, CHECK_OK,
			 xasprintf("PostgreSQL %s (pgoutput protocol %d%s supported)", f->server_version,
				   cfg->pgoutput_protocol_version, cfg->pgoutput_streaming ? " with streaming" : ""),
			 NULL, false);
	if (f->version_num < 100000)
		return;

	if (strcmp(f->wal_level, "logical") == 0)
		add_item(r, S, "wal_level", NULL, CHECK_OK, xstrdup("logical"), NULL, false);
	else
		add_item(r, S, "wal_level", NULL, CHECK_BLOCKER,
			 xasprintf("%s: logical decoding needs wal_level = logical", f->wal_level),
			 xstrdup("ALTER SYSTEM SET wal_level = logical;\n"
				 "then restart PostgreSQL (wal_level takes effect only at server start)"),
			 false);

	/* Capture needs the flow's slot; trellara-verify and a resumed
	 * snapshot need room for one temporary slot more. */
	long need_slots = f->slot_exists ? 0 : 1, free_slots = f->max_replication_slots - f->slots_used;
	char *slots = xasprintf("%ld of %ld in use%s", f->slots_used, f->max_replication_slots,
				f->slot_exists ? ", the flow's slot among them" : "");
	if (free_slots < need_slots)
		add_item(r, S, "replication_slots", NULL, CHECK_BLOCKER,
			 xasprintf("%s: no free slot for \"%s\"", slots, cfg->slot),
			 raise_setting_fix("max_replication_slots", f->slots_used + need_slots + 1), false);
	else if (free_slots < need_slots + 1)
		add_item(r, S, "replication_slots", NULL, CHECK_WARN,
			 xasprintf("%s: no room for the temporary slot trellara-verify and a resumed snapshot use", slots),
			 raise_setting_fix("max_replication_slots", f->slots_used + need_slots + 1), false);
	else
		add_item(r, S, "replication_slots", NULL, CHECK_OK, xasprintf("%s (max_replication_slots)", slots), NULL,
			 false);
	free(slots);

	long need_senders = f->slot_active ? 0 : 1, free_senders = f->max_wal_senders - f->senders_used;
	char *senders = xasprintf("%ld of %ld in use", f->senders_used, f->max_wal_senders);
	if (free_senders < need_senders)
		add_item(r, S, "wal_senders", NULL, CHECK_BLOCKER,
			 xasprintf("%s: no free WAL sender for trellara-capture", senders),
			 raise_setting_fix("max_wal_senders", f->senders_used + need_senders + 1), false);
	else if (free_senders < need_senders + 1)
		add_item(r, S, "wal_senders", NULL, CHECK_WARN,
			 xasprintf("%s: no room for the replication connection trellara-verify and snapshots open", senders),
			 raise_setting_fix("max_wal_senders", f->senders_used + need_senders + 1), false);
	else
		add_item(r, S, "wal_senders", NULL, CHECK_OK, xasprintf("%s (max_wal_senders)", senders), NULL, false);
	free(senders);

	if (f->superuser || f->replication_role) {
		add_item(r, S, "replication_privilege", NULL, CHECK_OK,
			 xasprintf("role \"%s\" %s", f->user, f->superuser ? "is a superuser" : "has REPLICATION"), NULL,
			 false);
	} else {
		char *role = pgconn_quote_ident(conn, f->user);
		add_item(r, S, "replication_privilege", NULL, CHECK_BLOCKER,
			 xasprintf("role \"%s\" has neither REPLICATION nor SUPERUSER: it cannot stream a slot", f->user),
			 xasprintf("ALTER ROLE %s WITH REPLICATION;", role), false);
		free(role);
	}

	if (repl->ok)
		add_item(r, S, "replication_connection", NULL, CHECK_OK,
			 xasprintf("IDENTIFY_SYSTEM answered: system identifier %s, timeline %" PRIu32, repl->id.systemid,
				   repl->id.timeline),
			 NULL, false);
	else
		add_item(r, S, "replication_connection", NULL, CHECK_BLOCKER,
			 xasprintf("a replication connection (replication=database) fails: %s", repl->error),
			 xasprintf("allow role \"%s\" to connect to database \"%s\" in pg_hba.conf and grant it REPLICATION,\n"
				   "then SELECT pg_reload_conf();",
				   f->user, f->database),
			 false);

	if (!f->in_recovery)
		add_item(r, S, "recovery", NULL, CHECK_OK, xstrdup("the source is a primary (not in recovery)"), NULL,
			 false);
	else if (f->version_num >= 160000)
		add_item(r, S, "recovery", NULL, CHECK_WARN,
			 xstrdup("the source is a standby: it can decode, but the publication, the DDL trigger and\n"
				 "hot_standby_feedback must be set up on (or for) the primary"),
			 xstrdup("point source.database_url at the primary, or run --fix against the primary"), false);
	else
		add_item(r, S, "recovery", NULL, CHECK_BLOCKER,
			 xasprintf("the source is a standby: logical decoding on a standby needs PostgreSQL 16 (this is %s)",
				   f->server_version),
			 xstrdup("point source.database_url at the primary"), false);
}

static void evaluate_publication(PGconn *conn, const struct flow_config *cfg, const struct source_facts *f,
				 struct check_report *r)
{
	const char *S = "publication";
	char *pub = pgconn_quote_ident(conn, cfg->publication);
	if (!f->pub_exists) {
		char *create = create_publication_sql(conn, cfg, f, NULL, NULL);
		add_item(r, S, "publication", NULL, CHECK_BLOCKER,
			 xasprintf("publication \"%s\" does not exist", cfg->publication), xasprintf("%s;", create), true);
		free(create);
		free(pub);
		return;
	}
	add_item(r, S, "publication", NULL, CHECK_OK,
		 xasprintf("publication \"%s\" exists%s", cfg->publication,
			   f->pub_all_tables ? " (FOR ALL TABLES)" : ""),
		 NULL, false);
	struct strbuf missing = STRBUF_INIT;
	if (!f->pub_insert)
		strbuf_addf(&missing, "%sinsert", missing.len ? ", " : "");
	if (!f->pub_update)
		strbuf_addf(&missing, "%supdate", missing.len ? ", " : "");
	if (!f->pub_delete)
		strbuf_addf(&missing, "%sdelete", missing.len ? ", " : "");
	if (!f->pub_truncate)
		strbuf_addf(&missing, "%struncate", missing.len ? ", " : "");
	if (missing.len)
		add_item(r, S, "publication_operations", NULL, CHECK_BLOCKER,
			 xasprintf("publication \"%s\" does not publish %s: those changes would never reach the target",
				   cfg->publication, missing.buf),
			 xasprintf("ALTER PUBLICATION %s SET (publish = 'insert, update, delete, truncate');", pub), false);
	else
		add_item(r, S, "publication_operations", NULL, CHECK_OK,
			 xstrdup("publishes insert, update, delete and truncate"), NULL, false);
	strbuf_release(&missing);
	free(pub);
}

static char *replica_identity_fix(const struct table_facts *t, PGconn *conn)
{
	if (t->pk_index)
		return xasprintf("ALTER TABLE %s REPLICA IDENTITY DEFAULT;", t->quoted);
	if (t->candidate_index) {
		char *index = pgconn_quote_ident(conn, t->candidate_index);
		char *fix = xasprintf("ALTER TABLE %s REPLICA IDENTITY USING INDEX %s;", t->quoted, index);
		free(index);
		return fix;
	}
	return xasprintf("ALTER TABLE %s REPLICA IDENTITY FULL;", t->quoted);
}

static void evaluate_table(PGconn *conn, const struct flow_config *cfg, const struct source_facts *f,
			   const struct table_facts *t, struct check_report *r)
{
	const char *S = "tables";
	if (!t->exists) {
		char *path = check_shell_quote(cfg->path);
		add_item(r, S, "table", t->display, CHECK_BLOCKER,
			 xasprintf("configured table %s does not exist on the source", t->display),
			 xasprintf("create %s on the source, or remove it from dataset.tables in %s", t->display, path),
			 false);
		free(path);
		return;
	}
	if (t->relkind != 'r' && t->relkind != 'p') {
		char *path = check_shell_quote(cfg->path);
		add_item(r, S, "table", t->display, CHECK_BLOCKER,
			 xasprintf("%s is not a table (pg_class.relkind '%c'): only tables can be published", t->display,
				   t->relkind),
			 xasprintf("remove %s from dataset.tables in %s", t->display, path), false);
		free(path);
		return;
	}
	if (t->persistence != 'p') {
		add_item(r, S, "table", t->display, CHECK_BLOCKER,
			 xasprintf("%s is %s: its changes are not written to WAL and cannot be captured", t->display,
				   t->persistence == 'u' ? "UNLOGGED" : "TEMPORARY"),
			 xasprintf("ALTER TABLE %s SET LOGGED;", t->quoted), false);
		return;
	}
	add_item(r, S, "table", t->display, CHECK_OK,
		 xasprintf("exists (%s)", t->relkind == 'p' ? "partitioned table" : "table"), NULL, false);
	if (t->partition_of) {
		char *path = check_shell_quote(cfg->path);
		add_item(r, S, "partition_listed", t->display, CHECK_BLOCKER,
			 xasprintf("%s is a partition of %s, which dataset.tables lists as well: its rows are copied,"
				   " published and verified through %s",
				   t->display, t->partition_of, t->partition_of),
			 xasprintf("remove %s from dataset.tables in %s", t->display, path), false);
		free(path);
	}

	if (f->pub_exists) {
		char *pub = pgconn_quote_ident(conn, cfg->publication);
		if (t->relkind == 'p' && !f->pub_via_root)
			add_item(r, S, "publication_table", t->display, CHECK_BLOCKER,
				 xasprintf("partitioned table, but publication \"%s\" publishes its changes under the "
					   "partitions' names (publish_via_partition_root is off)",
					   cfg->publication),
				 xasprintf("ALTER PUBLICATION %s SET (publish_via_partition_root = true);", pub), false);
		else if (!t->in_publication)
			add_item(r, S, "publication_table", t->display, CHECK_BLOCKER,
				 xasprintf("not in publication \"%s\": its changes would not be captured", cfg->publication),
				 xasprintf("ALTER PUBLICATION %s ADD TABLE %s;", pub, t->quoted), true);
		else if (t->row_filter || t->column_list)
			add_item(r, S, "publication_table", t->display, CHECK_BLOCKER,
				 t->row_filter ? xasprintf("published with a row filter (WHERE %s): other rows are never captured",
							   t->row_filter)
					       : xstrdup("published with a column list: other columns are never captured"),
				 xasprintf("ALTER PUBLICATION %s DROP TABLE %s;\nALTER PUBLICATION %s ADD TABLE %s;", pub,
					   t->quoted, pub, t->quoted),
				 false);
		else
			add_item(r, S, "publication_table", t->display, CHECK_OK,
				 xasprintf("in publication \"%s\"", cfg->publication), NULL, false);
		free(pub);
	}

	switch (t->replident) {
	case 'd':
		if (t->pk_index)
			add_item(r, S, "replica_identity", t->display, CHECK_OK,
				 xasprintf("DEFAULT, primary key (%s)", t->pk_columns ? t->pk_columns : t->pk_index), NULL,
				 false);
		else
			add_item(r, S, "replica_identity", t->display, CHECK_BLOCKER,
				 xasprintf("%s has no primary key and REPLICA IDENTITY DEFAULT: its UPDATEs and DELETEs "
					   "carry no key (PostgreSQL refuses them once the table is published)",
					   t->display),
				 replica_identity_fix(t, conn), false);
		break;
	case 'n':
		add_item(r, S, "replica_identity", t->display, CHECK_BLOCKER,
			 xasprintf("%s has REPLICA IDENTITY NOTHING: its UPDATEs and DELETEs carry no key", t->display),
			 replica_identity_fix(t, conn), false);
		break;
	case 'f':
		add_item(r, S, "replica_identity", t->display, CHECK_OK,
			 xstrdup("FULL (old rows carry every column)"), NULL, false);
		break;
	case 'i':
		add_item(r, S, "replica_identity", t->display, CHECK_OK,
			 xasprintf("USING INDEX %s", t->ident_index ? t->ident_index : "(unknown)"), NULL, false);
		break;
	default:
		add_item(r, S, "replica_identity", t->display, CHECK_WARN,
			 xasprintf("unknown pg_class.relreplident '%c'", t->replident),
			 xasprintf("ALTER TABLE %s REPLICA IDENTITY FULL;", t->quoted), false);
	}
}

static void evaluate_slot(PGconn *conn, const struct flow_config *cfg, const struct source_facts *f,
			  struct check_report *r)
{
	const char *S = "slot";
	char *literal = pgconn_quote_literal(conn, cfg->slot);
	char *drop = xasprintf("SELECT pg_drop_replication_slot(%s);", literal);
	if (!f->slot_exists) {
		add_item(r, S, "slot", NULL, CHECK_OK,
			 xasprintf("\"%s\" does not exist yet: trellara snapshot creates it (or trellara check --fix "
				   "--create-slot)",
				   cfg->slot),
			 NULL, false);
	} else {
		struct strbuf wrong = STRBUF_INIT;
		if (!f->slot_type || strcmp(f->slot_type, "logical") != 0)
			strbuf_addf(&wrong, "%sit is a %s slot", wrong.len ? "; " : "", f->slot_type ? f->slot_type : "?");
		else if (!f->slot_plugin || strcmp(f->slot_plugin, "pgoutput") != 0)
			strbuf_addf(&wrong, "%sits plugin is %s, not pgoutput", wrong.len ? "; " : "",
				  f->slot_plugin ? f->slot_plugin : "?");
		if (f->slot_type && strcmp(f->slot_type, "logical") == 0 &&
		    (!f->slot_database || strcmp(f->slot_database, f->database) != 0))
			strbuf_addf(&wrong, "%sit belongs to database \"%s\", not \"%s\"", wrong.len ? "; " : "",
				  f->slot_database ? f->slot_database : "?", f->database);
		if (f->slot_temporary)
			strbuf_addf(&wrong, "%sit is a temporary slot of another session", wrong.len ? "; " : "");
		if (wrong.len) {
			char *path = check_shell_quote(cfg->path);
			add_item(r, S, "slot", NULL, CHECK_BLOCKER,
				 xasprintf("\"%s\" cannot be this flow's slot: %s", cfg->slot, wrong.buf),
				 xasprintf("set another source.slot in %s, or, if nothing uses it:\n%s", path, drop), false);
			free(path);
		} else {
			add_item(r, S, "slot", NULL, CHECK_OK,
				 xasprintf("\"%s\" exists: logical, pgoutput, database \"%s\", restart_lsn %s, "
					   "confirmed_flush_lsn %s",
					   cfg->slot, f->database, f->restart_lsn ? f->restart_lsn : "none",
					   f->confirmed_flush_lsn ? f->confirmed_flush_lsn : "none"),
				 NULL, false);
		}
		strbuf_release(&wrong);

		const char *app = f->slot_active_app ? f->slot_active_app : "unknown";
		if (!f->slot_active)
			add_item(r, S, "slot_active", NULL, CHECK_OK, xstrdup("not in use"), NULL, false);
		else if (strcmp(app, CAPTURE_APPLICATION_NAME) == 0)
			add_item(r, S, "slot_active", NULL, CHECK_OK,
				 xasprintf("in use by trellara-capture (pid %s)", f->slot_active_pid ? f->slot_active_pid : "?"),
				 NULL, false);
		else
			add_item(r, S, "slot_active", NULL, CHECK_WARN,
				 xasprintf("active elsewhere: held by pid %s (application_name \"%s\"); trellara-capture "
					   "cannot stream it meanwhile",
					   f->slot_active_pid ? f->slot_active_pid : "?", app),
				 xasprintf("SELECT pg_terminate_backend(%s);", f->slot_active_pid ? f->slot_active_pid : "PID"),
				 false);

		char *snapshot = trellara_command(r, "snapshot", " --force");
		char *capture = trellara_command(r, "capture", "");
		if (f->invalidation || (f->wal_status && strcmp(f->wal_status, "lost") == 0))
			add_item(r, S, "slot_wal_status", NULL, CHECK_BLOCKER,
				 xasprintf("the slot is invalidated (%s): the WAL it needs is gone",
					   f->invalidation ? f->invalidation : "wal_status lost"),
				 xasprintf("%s\nthen: %s", drop, snapshot), false);
		else if (f->wal_status && strcmp(f->wal_status, "unreserved") == 0)
			add_item(r, S, "slot_wal_status", NULL, CHECK_BLOCKER,
				 xstrdup("unreserved: the WAL the slot needs is past max_slot_wal_keep_size and will be "
					 "removed at the next checkpoint"),
				 xasprintf("%s\nor: ALTER SYSTEM SET max_slot_wal_keep_size = -1; SELECT pg_reload_conf();", capture),
				 false);
		else if (f->wal_status && strcmp(f->wal_status, "extended") == 0)
			add_item(r, S, "slot_wal_status", NULL, CHECK_WARN,
				 xstrdup("extended: the slot retains more WAL than max_wal_size"), xstrdup(capture), false);
		else
			add_item(r, S, "slot_wal_status", NULL, CHECK_OK,
				 f->wal_status ? xstrdup(f->wal_status)
					       : xasprintf("not reported by PostgreSQL %s (wal_status needs 13)",
							   f->server_version),
				 NULL, false);

		if (f->retained_known) {
			char *retained = human_bytes(f->retained_bytes), *limit = human_bytes(cfg->wal_retention_warn_bytes);
			if (f->retained_bytes > cfg->wal_retention_warn_bytes)
				add_item(r, S, "slot_retained_wal", NULL, CHECK_WARN,
					 xasprintf("retains %s of WAL, over source.wal_retention_warn_bytes %s", retained,
						   limit),
					 xasprintf("%s\n(a running capture acknowledges what is durable, which releases WAL)",
						   capture),
					 false);
			else
				add_item(r, S, "slot_retained_wal", NULL, CHECK_OK,
					 xasprintf("retains %s of WAL (warning above %s)", retained, limit), NULL, false);
			free(retained);
			free(limit);
		} else {
			add_item(r, S, "slot_retained_wal", NULL, CHECK_OK, xstrdup("the slot has no restart_lsn yet"), NULL,
				 false);
		}
		if (f->safe_wal_known && (uint64_t)(f->safe_wal_size < 0 ? 0 : f->safe_wal_size) < cfg->wal_retention_warn_bytes) {
			char *left = human_bytes(f->safe_wal_size < 0 ? 0 : (uint64_t)f->safe_wal_size);
			add_item(r, S, "slot_wal_headroom", NULL, CHECK_WARN,
				 xasprintf("%s of WAL left before max_slot_wal_keep_size invalidates the slot", left),
				 xasprintf("%s\nor raise max_slot_wal_keep_size: ALTER SYSTEM SET max_slot_wal_keep_size = -1; "
					   "SELECT pg_reload_conf();",
					   capture),
				 false);
			free(left);
		}
		free(snapshot);
		free(capture);
	}

	if (!f->has_max_slot_wal_keep_size) {
		add_item(r, S, "max_slot_wal_keep_size", NULL, CHECK_OK,
			 xasprintf("not available on PostgreSQL %s (added in 13): a slot retains WAL without bound",
				   f->server_version),
			 NULL, false);
	} else if (f->max_slot_wal_keep_size_mb < 0) {
		add_item(r, S, "max_slot_wal_keep_size", NULL, CHECK_OK,
			 xstrdup("-1 (unlimited): the slot is never invalidated for WAL size; only disk space bounds "
				 "what it retains (watch slot_retained_wal)"),
			 NULL, false);
	} else {
		uint64_t keep = (uint64_t)f->max_slot_wal_keep_size_mb * 1024 * 1024;
		char *keep_text = human_bytes(keep), *limit = human_bytes(cfg->wal_retention_warn_bytes);
		if (keep < cfg->wal_retention_warn_bytes)
			add_item(r, S, "max_slot_wal_keep_size", NULL, CHECK_WARN,
				 xasprintf("%s: the slot is invalidated before it reaches source.wal_retention_warn_bytes %s, "
					   "so the warning would come too late",
					   keep_text, limit),
				 xasprintf("ALTER SYSTEM SET max_slot_wal_keep_size = '%" PRIu64 "MB'; SELECT pg_reload_conf();",
					   (cfg->wal_retention_warn_bytes + 1024 * 1024 - 1) / (1024 * 1024) * 2),
				 false);
		else
			add_item(r, S, "max_slot_wal_keep_size", NULL, CHECK_OK,
				 xasprintf("%s: a slot retaining more is invalidated (warning above %s)", keep_text, limit),
				 NULL, false);
		free(keep_text);
		free(limit);
	}

	if (!f->has_idle_timeout) {
		add_item(r, S, "idle_replication_slot_timeout", NULL, CHECK_OK,
			 xasprintf("not available on PostgreSQL %s (added in 18): an idle slot is never invalidated "
				   "for its idle time",
				   f->server_version),
			 NULL, false);
	} else if (strcmp(f->idle_timeout, "0") == 0) {
		add_item(r, S, "idle_replication_slot_timeout", NULL, CHECK_OK,
			 xstrdup("0 (disabled): an idle slot is never invalidated for its idle time"), NULL, false);
	} else {
		add_item(r, S, "idle_replication_slot_timeout", NULL, CHECK_WARN,
			 xasprintf("%s%s: a slot idle longer than that is invalidated, so a capture stopped that long "
				   "loses the slot and the flow needs a new snapshot",
				   f->idle_timeout, f->idle_timeout_unit),
			 xstrdup("ALTER SYSTEM SET idle_replication_slot_timeout = 0; SELECT pg_reload_conf();"), false);
	}

	if (!f->has_failover) {
		add_item(r, S, "failover_slots", NULL, CHECK_OK,
			 xasprintf("not available on PostgreSQL %s (failover slots were added in 17): the slot exists "
				   "only on this server, so after a failover to a standby it is gone and the flow needs "
				   "a new snapshot",
				   f->server_version),
			 NULL, false);
	} else if (!f->slot_exists) {
		add_item(r, S, "failover_slots", NULL, CHECK_OK,
			 xstrdup("available; the slot does not exist yet (a failover slot needs FAILOVER true at creation "
				 "or ALTER_REPLICATION_SLOT)"),
			 NULL, false);
	} else if (f->slot_failover) {
		if (!f->synchronized_standby_slots || !*f->synchronized_standby_slots)
			add_item(r, S, "failover_slots", NULL, CHECK_WARN,
				 xstrdup("the slot is a failover slot, but synchronized_standby_slots is empty: capture may "
					 "confirm changes a promoted standby's copy of the slot has not seen"),
				 xstrdup("ALTER SYSTEM SET synchronized_standby_slots = 'STANDBY_PHYSICAL_SLOT'; SELECT "
					 "pg_reload_conf();"),
				 false);
		else
			add_item(r, S, "failover_slots", NULL, CHECK_OK,
				 xasprintf("the slot is a failover slot; synchronized_standby_slots = '%s'",
					   f->synchronized_standby_slots),
				 NULL, false);
	} else if (f->physical_slots > 0) {
		char *slot = pgconn_quote_ident(conn, cfg->slot);
		add_item(r, S, "failover_slots", NULL, CHECK_WARN,
			 xasprintf("the slot is not a failover slot, but %ld physical slot%s suggest standbys: after a "
				   "failover the slot is gone",
				   f->physical_slots, f->physical_slots == 1 ? "" : "s"),
			 xasprintf("on a replication connection (psql \"dbname=%s replication=database\"):\n"
				   "ALTER_REPLICATION_SLOT %s (FAILOVER true)",
				   f->database, slot),
			 false);
		free(slot);
	} else {
		add_item(r, S, "failover_slots", NULL, CHECK_OK,
			 xstrdup("the slot is not a failover slot; no physical slot here, so no standby to fail over to"),
			 NULL, false);
	}
	free(literal);
	free(drop);
}

static void evaluate_ddl(PGconn *conn, const struct source_facts *f, struct check_report *r)
{
	const char *S = "ddl";
	if (ddl_trigger_ok(f)) {
		add_item(r, S, "ddl_trigger", NULL, CHECK_OK,
			 xasprintf("event triggers %s (ddl_command_end) and %s (sql_drop) call %s.%s()", DDL_TRIGGER,
				   DDL_DROP_TRIGGER, DDL_SCHEMA, DDL_FUNCTION),
			 NULL, false);
		return;
	}
	struct strbuf what = STRBUF_INIT;
	if (!f->function_exists)
		strbuf_addf(&what, "function %s.%s() is missing", DDL_SCHEMA, DDL_FUNCTION);
	else if (!f->function_current)
		strbuf_addf(&what, "function %s.%s() is not the current version", DDL_SCHEMA, DDL_FUNCTION);
	static const char *const names[2] = { DDL_TRIGGER, DDL_DROP_TRIGGER };
	for (int i = 0; i < 2; i++) {
		const char *state = !f->trigger[i].exists ? "is missing"
				    : !f->trigger[i].enabled ? "is disabled"
				    : !f->trigger[i].right ? "has the wrong event, filter or function"
							    : NULL;
		if (state)
			strbuf_addf(&what, "%sevent trigger %s %s", what.len ? "; " : "", names[i], state);
	}
	char *detail = xasprintf("%s: schema changes will not reach the stream as ddl frames", what.buf);
	strbuf_release(&what);
	if (f->superuser) {
		add_item(r, S, "ddl_trigger", NULL, CHECK_WARN, detail, trellara_command(r, "check", " --fix"), true);
	} else {
		char *sql = ddl_install_sql(conn, f->version_num);
		add_item(r, S, "ddl_trigger", NULL, CHECK_WARN, detail,
			 xasprintf("event triggers need a superuser (role \"%s\" is not one); as a superuser, run:\n%s", f->user,
				   sql),
			 false);
		free(sql);
	}
}

static void set_identity(const struct source_facts *f, const struct replication_facts *repl, struct check_report *r)
{
	struct check_identity *id = &r->identity;
	id->system_identifier = xstrdup(repl->ok ? repl->id.systemid : f->system_identifier ? f->system_identifier : "");
	id->database = xstrdup(f->database ? f->database : "");
	id->timeline = repl->ok ? repl->id.timeline : f->checkpoint_timeline;
	id->server_version = xstrdup(f->server_version);
	id->server_version_num = f->version_num;
	id->user = xstrdup(f->user ? f->user : "");
	id->in_recovery = f->in_recovery;
}

/* The source's identity against the one the flow's stream is bound to
 * (capture binds it on first start and refuses any other source). */
static void evaluate_identity(const struct flow_config *cfg, struct check_report *r)
{
	const struct check_identity *id = &r->identity;
	char *who = xasprintf("system identifier %s, database \"%s\", timeline %" PRIu32, id->system_identifier,
			      id->database, id->timeline);
	char *meta_path = xasprintf("%s/meta", cfg->stream_path);
	struct stream_meta meta = { 0 };
	if (access(meta_path, F_OK) != 0) {
		add_item(r, "identity", "source_identity", NULL, CHECK_OK,
			 xasprintf("%s (no stream at \"%s\" yet: capture binds it to this source)", who, cfg->stream_path),
			 NULL, false);
	} else if (stream_meta_read(cfg->stream_path, &meta) < 0) {
		add_item(r, "identity", "source_identity", NULL, CHECK_WARN,
			 xasprintf("%s; the stream identity \"%s\" cannot be read", who, meta_path),
			 xasprintf("trellara stream inspect-local --dir %s", cfg->stream_path), false);
	} else if (!meta.system_identifier) {
		add_item(r, "identity", "source_identity", NULL, CHECK_OK,
			 xasprintf("%s (the stream at \"%s\" is not bound to a source yet)", who, cfg->stream_path), NULL,
			 false);
	} else if (strcmp(meta.system_identifier, id->system_identifier) != 0 ||
		   (meta.database && strcmp(meta.database, id->database) != 0)) {
		char *path = check_shell_quote(cfg->path);
		add_item(r, "identity", "source_identity", NULL, CHECK_BLOCKER,
			 xasprintf("%s, but the stream at \"%s\" belongs to system identifier %s, database \"%s\": "
				   "trellara-capture will refuse this source",
				   who, cfg->stream_path, meta.system_identifier, meta.database ? meta.database : ""),
			 xasprintf("point source.database_url in %s at the stream's source, or set a new stream.path", path),
			 false);
		free(path);
	} else {
		add_item(r, "identity", "source_identity", NULL, CHECK_OK,
			 xasprintf("%s (matches the stream at \"%s\")", who, cfg->stream_path), NULL, false);
	}
	stream_meta_free(&meta);
	free(meta_path);
	free(who);
}

/* The target role must be allowed to set session_replication_role:
 * trellara-applyd applies with the replica role and refuses to start
 * without it (trellara-applyd(1)). */
static void evaluate_target(const struct flow_config *cfg, struct check_report *r)
{
	PGconn *conn = pgconn_connect(cfg->target_database_url, PGCONN_NORMAL, CHECK_APPLICATION_NAME, "target");
	if (!conn) {
		add_item(r, "target", "target_replica_role", NULL, CHECK_WARN,
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
		add_item(r, "target", "target_replica_role", NULL, CHECK_WARN,
			 xstrdup("could not read the target role's privileges: not checked whether it may set session_replication_role"),
			 NULL, false);
	} else {
		char *role = pgconn_quote_ident(conn, PQgetvalue(res, 0, 0));
		if (value_bool(res, 0, 1))
			add_item(r, "target", "target_replica_role", NULL, CHECK_OK,
				 xasprintf("target role %s may set session_replication_role (trellara-applyd applies as a replica)", role),
				 NULL, false);
		else
			add_item(r, "target", "target_replica_role", NULL, CHECK_BLOCKER,
				 xasprintf("target role %s may not set session_replication_role: trellara-applyd would refuse to apply (exit 78)",
					   role),
				 pg15 ? xasprintf("GRANT SET ON PARAMETER session_replication_role TO %s;  -- on the target, as a superuser", role)
				      : xasprintf("ALTER ROLE %s SUPERUSER;  -- on the target: before PostgreSQL 15 only a superuser may set it", role),
				 false);
		free(role);
	}
	PQclear(res);
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
	chomp(message);
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
	if (gather(conn, cfg, &facts) < 0)
		goto out;
	if (o->fix && facts.version_num >= 100000) {
		fix_source(conn, o, &facts, r);
		source_facts_free(&facts);
		if (gather(conn, cfg, &facts) < 0)
			goto out;
	}
	/* Last, so its WAL sender is not counted in wal_senders. */
	gather_replication(cfg->source_database_url, &repl);

	set_identity(&facts, &repl, r);
	evaluate_identity(cfg, r);
	evaluate_server(conn, cfg, &facts, &repl, r);
	if (facts.version_num >= 100000) {
		evaluate_publication(conn, cfg, &facts, r);
		for (size_t i = 0; i < facts.n_tables; i++)
			evaluate_table(conn, cfg, &facts, &facts.tables[i], r);
		evaluate_slot(conn, cfg, &facts, r);
		evaluate_ddl(conn, &facts, r);
	}
	evaluate_target(cfg, r);
	rc = 0;
out:
	if (rc < 0)
		check_report_free(r);
	source_facts_free(&facts);
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

/* ------------------------------------------------------------ output */

static const char *status_word(enum check_status s, bool json)
{
	switch (s) {
	case CHECK_OK: return "ok";
	case CHECK_WARN: return "warn";
	default: return json ? "blocker" : "BLOCKER";
	}
}

/* Lines after the first indented by indent spaces. */
static void print_indented(FILE *out, const char *text, int indent)
{
	for (const char *p = text; *p; p++) {
		fputc(*p, out);
		if (*p == '\n' && p[1])
			fprintf(out, "%*s", indent, "");
	}
}

static bool fix_failed(const struct check_report *r)
{
	for (size_t i = 0; i < r->n_items; i++)
		if (strcmp(r->items[i].section, "fix") == 0)
			return true;
	return false;
}

void check_report_print_text(FILE *out, const struct check_report *r)
{
	const struct check_identity *id = &r->identity;
	fprintf(out, "source: %s\n", r->source);
	fprintf(out, "identity: system identifier %s, database \"%s\", timeline %" PRIu32 ", PostgreSQL %s, user \"%s\"%s\n",
		id->system_identifier, id->database, id->timeline, id->server_version, id->user,
		id->in_recovery ? ", in recovery" : "");
	if (r->fix_requested) {
		for (size_t i = 0; i < r->n_fixed; i++)
			fprintf(out, "fixed: %s\n", r->fixed[i].detail);
		if (r->n_fixed == 0)
			fputs(fix_failed(r) ? "fixed: nothing (see the fix blockers below)\n"
					    : "fixed: nothing to do: what --fix manages is already in place\n",
			      out);
	}
	const char *section = NULL;
	char *fix_all = trellara_command(r, "check", " --fix");
	for (size_t i = 0; i < r->n_items; i++) {
		const struct check_item *c = &r->items[i];
		if (!section || strcmp(section, c->section) != 0) {
			section = c->section;
			fprintf(out, "\n%s\n", section);
		}
		fprintf(out, "%s  %s%s%s: ", status_word(c->status, false), c->name, c->object ? " " : "",
			c->object ? c->object : "");
		print_indented(out, c->detail, 4);
		fputc('\n', out);
		if (c->fix) {
			fputs("  fix: ", out);
			print_indented(out, c->fix, 7);
			fputc('\n', out);
			if (c->fixable && strcmp(c->fix, fix_all) != 0)
				fprintf(out, "  or:  %s\n", fix_all);
		}
	}
	free(fix_all);
	fprintf(out, "\nresult: %d blockers, %d warnings\n", r->blockers, r->warnings);
}

void check_report_print_json(FILE *out, const struct check_report *r)
{
	const struct check_identity *id = &r->identity;
	struct jsonw w;
	jsonw_init(&w, out, true);
	jsonw_open(&w, NULL, '{');
	jsonw_str(&w, "source", r->source);
	jsonw_open(&w, "identity", '{');
	jsonw_str(&w, "system_identifier", id->system_identifier);
	jsonw_str(&w, "database", id->database);
	jsonw_u64(&w, "timeline", true, id->timeline);
	jsonw_str(&w, "server_version", id->server_version);
	jsonw_i64(&w, "server_version_num", true, id->server_version_num);
	jsonw_str(&w, "user", id->user);
	jsonw_bool(&w, "in_recovery", id->in_recovery);
	jsonw_close(&w, '}');
	jsonw_open(&w, "checks", '[');
	for (size_t i = 0; i < r->n_items; i++) {
		const struct check_item *c = &r->items[i];
		jsonw_open(&w, NULL, '{');
		jsonw_str(&w, "section", c->section);
		jsonw_str(&w, "name", c->name);
		jsonw_str(&w, "object", c->object);
		jsonw_str(&w, "status", status_word(c->status, true));
		jsonw_str(&w, "detail", c->detail);
		jsonw_str(&w, "fix", c->fix);
		jsonw_bool(&w, "fixable", c->fixable);
		jsonw_close(&w, '}');
	}
	jsonw_close(&w, ']');
	jsonw_i64(&w, "blockers", true, r->blockers);
	jsonw_i64(&w, "warnings", true, r->warnings);
	jsonw_bool(&w, "fix_requested", r->fix_requested);
	jsonw_open(&w, "fixed", '[');
	for (size_t i = 0; i < r->n_fixed; i++) {
		jsonw_open(&w, NULL, '{');
		jsonw_str(&w, "action", r->fixed[i].action);
		jsonw_str(&w, "detail", r->fixed[i].detail);
		jsonw_str(&w, "sql", r->fixed[i].sql);
		jsonw_close(&w, '}');
	}
	jsonw_close(&w, ']');
	jsonw_close(&w, '}');
	fputc('\n', out);
}
