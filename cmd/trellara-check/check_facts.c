/*
 * check_facts.c - gather: read-only catalog queries into struct
 * source_facts (check_int.h).  Every query is a constant string (chosen
 * by server version) with values as parameters.
 */
#include "check_int.h"

#include "trellara/conninfo.h"
#include "trellara/log.h"
#include "trellara/xalloc.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

void check_table_facts_free(struct table_facts *t)
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

void check_source_facts_free(struct source_facts *f)
{
	free(f->database);
	free(f->user);
	free(f->system_identifier);
	free(f->server_version);
	free(f->wal_level);
	free(f->idle_timeout);
	free(f->idle_timeout_unit);
	free(f->synchronized_standby_slots);
	free(f->missing_standby_slots);
	free(f->wal_rate_since);
	for (size_t i = 0; i < f->n_standbys; i++) {
		struct standby_facts *s = &f->standbys[i];
		free(s->shown);
		free(s->error);
		free(s->system_identifier);
		free(s->hot_standby_feedback);
		free(s->primary_slot_name);
		free(s->sync_replication_slots);
		free(s->slot_invalidation);
		free(s->slot_confirmed_lsn);
	}
	free(f->standbys);
	for (size_t i = 0; i < f->n_tables; i++)
		check_table_facts_free(&f->tables[i]);
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

char *check_value(const PGresult *res, int row, int col)
{
	return PQgetisnull(res, row, col) ? NULL : xstrdup(PQgetvalue(res, row, col));
}

bool check_value_bool(const PGresult *res, int row, int col)
{
	return !PQgetisnull(res, row, col) && PQgetvalue(res, row, col)[0] == 't';
}

long long check_value_ll(const PGresult *res, int row, int col)
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
	f->database = check_value(res, 0, 0);
	f->user = check_value(res, 0, 1);
	f->system_identifier = check_value(res, 0, 2);
	f->checkpoint_timeline = (uint32_t)check_value_ll(res, 0, 3);
	char *version = check_value(res, 0, 4);
	if (version)
		version[strcspn(version, " ")] = '\0';
	f->server_version = version ? version : xstrdup("unknown");
	f->version_num = (int)check_value_ll(res, 0, 5);
	f->in_recovery = check_value_bool(res, 0, 6);
	f->superuser = check_value_bool(res, 0, 7);
	f->replication_role = check_value_bool(res, 0, 8);
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
	f->slots_used = (long)check_value_ll(res, 0, 0);
	f->senders_used = (long)check_value_ll(res, 0, 1);
	f->physical_slots = (long)check_value_ll(res, 0, 2);
	PQclear(res);
	if (f->version_num >= 140000) {
		/* the average WAL rate since the statistics were reset: what a
		 * stopped capture leaves behind per second */
		static const char sql_wal_rate[] =
			"SELECT wal_bytes::float8 / GREATEST(extract(epoch FROM now() - stats_reset)::float8, 1),"
			" stats_reset::text FROM pg_catalog.pg_stat_wal WHERE stats_reset IS NOT NULL";
		if (!(res = pgconn_query(conn, sql_wal_rate, 0, NULL)))
			return -1;
		if (PQntuples(res) == 1) {
			f->wal_rate_known = true;
			f->wal_bytes_per_second = strtod(PQgetvalue(res, 0, 0), NULL);
			f->wal_rate_since = check_value(res, 0, 1);
		}
		PQclear(res);
	}
	if (f->synchronized_standby_slots && *f->synchronized_standby_slots) {
		/* a listed slot that does not exist makes a failover slot's
		 * decoding wait for it forever */
		static const char sql_missing[] =
			"SELECT string_agg(n, ', ' ORDER BY n) FROM"
			" (SELECT btrim(x) AS n FROM unnest(string_to_array($1, ',')) AS u(x)) l"
			" WHERE n <> '' AND NOT EXISTS (SELECT FROM pg_catalog.pg_replication_slots s"
			"  WHERE s.slot_name = l.n AND s.slot_type = 'physical')";
		const char *p[1] = { f->synchronized_standby_slots };
		if (!(res = pgconn_query(conn, sql_missing, 1, p)))
			return -1;
		if (!PQgetisnull(res, 0, 0))
			f->missing_standby_slots = xstrdup(PQgetvalue(res, 0, 0));
		PQclear(res);
	}
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
		f->pub_all_tables = check_value_bool(res, 0, 0);
		f->pub_insert = check_value_bool(res, 0, 1);
		f->pub_update = check_value_bool(res, 0, 2);
		f->pub_delete = check_value_bool(res, 0, 3);
		f->pub_truncate = check_value_bool(res, 0, 4);
		f->pub_via_root = check_value_bool(res, 0, 5);
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
		t->oid = check_value(res, 0, 0);
		t->relkind = PQgetvalue(res, 0, 1)[0];
		t->persistence = PQgetvalue(res, 0, 2)[0];
		t->replident = PQgetvalue(res, 0, 3)[0];
		t->pk_index = check_value(res, 0, 4);
		t->pk_columns = check_value(res, 0, 5);
		t->ident_index = check_value(res, 0, 6);
		t->candidate_index = check_value(res, 0, 7);
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
		t->row_filter = check_value(res, 0, 0);
		t->column_list = check_value_bool(res, 0, 1);
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
		f->slot_type = check_value(res, 0, 0);
		f->slot_plugin = check_value(res, 0, 1);
		f->slot_database = check_value(res, 0, 2);
		f->slot_temporary = check_value_bool(res, 0, 3);
		f->slot_active = check_value_bool(res, 0, 4);
		f->slot_active_pid = check_value(res, 0, 5);
		f->restart_lsn = check_value(res, 0, 6);
		f->confirmed_flush_lsn = check_value(res, 0, 7);
		f->wal_status = check_value(res, 0, 8);
		f->safe_wal_known = !PQgetisnull(res, 0, 9);
		f->safe_wal_size = check_value_ll(res, 0, 9);
		f->slot_failover = check_value_bool(res, 0, 10);
		f->invalidation = check_value(res, 0, 11);
		f->retained_known = !PQgetisnull(res, 0, 12);
		/* numeric text: digits, perhaps a fraction we do not need */
		f->retained_bytes = f->retained_known ? strtoull(PQgetvalue(res, 0, 12), NULL, 10) : 0;
		f->slot_active_app = check_value(res, 0, 13);
	}
	PQclear(res);
	return 0;
}

static const char sql_ddl_function[] =
	"SELECT p.oid::text, p.prosrc, p.prorettype = 'pg_catalog.event_trigger'::pg_catalog.regtype"
	" FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace"
	" WHERE n.nspname = $1 AND p.proname = $2 AND p.pronargs = 0";

static const char sql_function_src[] =
	"SELECT p.prosrc FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace"
	" WHERE n.nspname = $1 AND p.proname = $2 AND p.pronargs = 0";

/* tables of partition trees published via their root without both
 * TRUNCATE triggers */
static const char sql_truncate_missing[] =
	"SELECT count(*) FROM (SELECT DISTINCT t.relid FROM pg_catalog.pg_publication p"
	" JOIN pg_catalog.pg_publication_tables pt ON pt.pubname = p.pubname"
	" JOIN pg_catalog.pg_namespace n ON n.nspname = pt.schemaname"
	" JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = pt.tablename AND c.relkind = 'p'"
	" CROSS JOIN LATERAL pg_catalog.pg_partition_tree(c.oid) t WHERE p.pubviaroot) x"
	" WHERE (SELECT count(*) FROM pg_catalog.pg_trigger g WHERE g.tgrelid = x.relid AND g.tgname IN ($1, $2)) < 2";

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
		f->function_oid = check_value(res, 0, 0);
		f->function_current = check_value_bool(res, 0, 2) && strcmp(PQgetvalue(res, 0, 1), check_ddl_function_body) == 0;
	}
	PQclear(res);

	/* the partition TRUNCATE evidence: both functions current, and no
	 * table of a partition tree published via its root without the
	 * two triggers */
	const char *p1[2] = { DDL_SCHEMA, TRUNCATE_FUNCTION }, *p2[2] = { DDL_SCHEMA, TRUNCATE_TRIGGERS_FUNCTION };
	PGresult *r1 = pgconn_query(conn, sql_function_src, 2, p1);
	PGresult *r2 = r1 ? pgconn_query(conn, sql_function_src, 2, p2) : NULL;
	if (!r1 || !r2) {
		PQclear(r1);
		return -1;
	}
	f->truncate_current = PQntuples(r1) == 1 && strcmp(PQgetvalue(r1, 0, 0), check_truncate_function_body) == 0 &&
			      PQntuples(r2) == 1 && strcmp(PQgetvalue(r2, 0, 0), check_truncate_triggers_body) == 0;
	PQclear(r1);
	PQclear(r2);
	const char *p3[2] = { TRUNCATE_TRIGGER_BEFORE, TRUNCATE_TRIGGER_AFTER };
	if (!(res = pgconn_query(conn, sql_truncate_missing, 2, p3)))
		return -1;
	f->truncate_missing = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);

	const char *tparams[2] = { DDL_TRIGGER, DDL_DROP_TRIGGER };
	if (!(res = pgconn_query(conn, sql_ddl_triggers, 2, tparams)))
		return -1;
	for (int i = 0; i < PQntuples(res); i++) {
		int which = strcmp(PQgetvalue(res, i, 0), DDL_TRIGGER) == 0 ? 0 : 1;
		const char *want_event = which == 0 ? "ddl_command_end" : "sql_drop";
		f->trigger[which].exists = true;
		f->trigger[which].enabled = PQgetvalue(res, i, 2)[0] != 'D';
		f->trigger[which].right = strcmp(PQgetvalue(res, i, 1), want_event) == 0 && check_value_bool(res, i, 4) &&
					  f->function_oid && strcmp(PQgetvalue(res, i, 3), f->function_oid) == 0;
	}
	PQclear(res);
	return 0;
}

int check_gather(PGconn *conn, const struct flow_config *cfg, struct source_facts *f)
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

void check_gather_replication(const char *url, struct replication_facts *r)
{
	memset(r, 0, sizeof *r);
	char error[1024];
	struct pgconn_options o = { .kind = PGCONN_REPLICATION, .application_name = CHECK_APPLICATION_NAME,
				    .role = "source (replication)", .report = PGCONN_QUIET, .error = error,
				    .error_len = sizeof error };
	PGconn *conn = pgconn_open(url, &o);
	if (!conn) {
		r->error = xstrdup(error);
		goto out;
	}
	/* pgconn_identify_system logs a failure; it is reported as a check too. */
	if (pgconn_identify_system(conn, &r->id) < 0) {
		r->error = xstrdup(PQerrorMessage(conn));
		check_chomp(r->error);
		goto out;
	}
	r->ok = true;
out:
	PQfinish(conn);
}


/* Whether the comma-separated list (synchronized_standby_slots) names name. */
static bool list_names(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; p && *p;) {
		p += strspn(p, " \t");
		size_t len = strcspn(p, ",");
		size_t end = len;
		while (end > 0 && (p[end - 1] == ' ' || p[end - 1] == '\t'))
			end--;
		if (end == n && strncmp(p, name, n) == 0)
			return true;
		p += len + (p[len] == ',');
	}
	return false;
}

static const char sql_standby[] =
	"SELECT (SELECT system_identifier::text FROM pg_catalog.pg_control_system()),"
	" pg_catalog.pg_is_in_recovery(), pg_catalog.current_setting('server_version_num')::int,"
	" pg_catalog.current_setting('hot_standby_feedback'), pg_catalog.current_setting('primary_slot_name'),"
	" (SELECT setting FROM pg_catalog.pg_settings WHERE name = 'sync_replication_slots'),"
	" (SELECT setting FROM pg_catalog.pg_settings WHERE name = 'primary_conninfo')";

static void gather_standby(PGconn *source, const struct flow_config *cfg, const struct source_facts *f,
			   const char *url, struct standby_facts *s)
{
	char error[512] = "";
	struct pgconn_options o = { .kind = PGCONN_NORMAL, .application_name = CHECK_APPLICATION_NAME,
				    .role = "standby", .connect_timeout = "10", .report = PGCONN_QUIET,
				    .error = error, .error_len = sizeof error };
	PGconn *conn = pgconn_open(url, &o);
	if (!conn) {
		s->error = xstrdup(error[0] ? error : "cannot connect");
		return;
	}
	PGresult *res = pgconn_query(conn, sql_standby, 0, NULL);
	if (!res) {
		s->error = xstrdup(pgconn_message(conn));
		PQfinish(conn);
		return;
	}
	s->system_identifier = check_value(res, 0, 0);
	s->same_system = s->system_identifier && f->system_identifier &&
			 strcmp(s->system_identifier, f->system_identifier) == 0;
	s->in_recovery = check_value_bool(res, 0, 1);
	s->version_num = (int)check_value_ll(res, 0, 2);
	s->hot_standby_feedback = check_value(res, 0, 3);
	s->primary_slot_name = check_value(res, 0, 4);
	s->sync_replication_slots = check_value(res, 0, 5);
	s->conninfo_known = !PQgetisnull(res, 0, 6);
	if (s->conninfo_known) {
		PQconninfoOption *opts = PQconninfoParse(PQgetvalue(res, 0, 6), NULL);
		for (PQconninfoOption *opt = opts; opt && opt->keyword; opt++)
			if (strcmp(opt->keyword, "dbname") == 0 && opt->val && *opt->val)
				s->conninfo_has_dbname = true;
		PQconninfoFree(opts);
	}
	PQclear(res);
	const char *sql = s->version_num >= 170000
				  ? "SELECT synced, failover, invalidation_reason, confirmed_flush_lsn::text"
				    " FROM pg_catalog.pg_replication_slots WHERE slot_name = $1"
				  : "SELECT false, false, NULL::text, confirmed_flush_lsn::text"
				    " FROM pg_catalog.pg_replication_slots WHERE slot_name = $1";
	const char *params[1] = { cfg->slot };
	if (!(res = pgconn_query(conn, sql, 1, params))) {
		s->error = xstrdup(pgconn_message(conn));
		PQfinish(conn);
		return;
	}
	if (PQntuples(res) == 1) {
		s->slot_exists = true;
		s->slot_synced = check_value_bool(res, 0, 0);
		s->slot_failover = check_value_bool(res, 0, 1);
		s->slot_invalidation = check_value(res, 0, 2);
		s->slot_confirmed_lsn = check_value(res, 0, 3);
	}
	PQclear(res);
	PQfinish(conn);
	if (s->primary_slot_name && *s->primary_slot_name) {
		const char *p[1] = { s->primary_slot_name };
		res = pgconn_query(source, "SELECT FROM pg_catalog.pg_replication_slots WHERE slot_name = $1"
					   " AND slot_type = 'physical'", 1, p);
		s->primary_slot_exists = res && PQntuples(res) == 1;
		PQclear(res);
		s->primary_slot_listed = list_names(f->synchronized_standby_slots, s->primary_slot_name);
	}
}

void check_gather_standbys(PGconn *conn, const struct flow_config *cfg, struct source_facts *f)
{
	if (!cfg->n_standby_database_urls)
		return;
	f->standbys = xcalloc(cfg->n_standby_database_urls, sizeof *f->standbys);
	f->n_standbys = cfg->n_standby_database_urls;
	for (size_t i = 0; i < f->n_standbys; i++) {
		f->standbys[i].shown = conninfo_mask(cfg->standby_database_urls[i]);
		gather_standby(conn, cfg, f, cfg->standby_database_urls[i], &f->standbys[i]);
	}
}
