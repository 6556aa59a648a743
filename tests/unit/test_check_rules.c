/*
 * test_check_rules.c - trellara-check's rules judged on hand-made facts,
 * without a server: each check's status and the fix it proposes.
 */
#include "unit.h"

#include "../../cmd/trellara-check/check_int.h"

#include "trellara/xalloc.h"

#include <stdlib.h>

static const struct check_item *item(const struct check_report *r, const char *name, const char *object)
{
	for (size_t i = 0; i < r->n_items; i++)
		if (strcmp(r->items[i].name, name) == 0 &&
		    (!object || (r->items[i].object && strcmp(r->items[i].object, object) == 0)))
			return &r->items[i];
	return NULL;
}

static bool has(const char *text, const char *part)
{
	return text && strstr(text, part) != NULL;
}

/* A PostgreSQL 15 primary, wal_level logical, room for slots and senders. */
static void healthy_server(struct source_facts *f)
{
	f->database = "shop";
	f->user = "cap\"ture";
	f->server_version = "15.4";
	f->version_num = 150004;
	f->wal_level = "logical";
	f->max_replication_slots = 10;
	f->max_wal_senders = 10;
	f->replication_role = true;
	f->pub_exists = true;
	f->pub_insert = f->pub_update = f->pub_delete = f->pub_truncate = true;
	f->function_exists = f->function_current = true;
	f->truncate_current = true;
	for (int i = 0; i < 2; i++)
		f->trigger[i].exists = f->trigger[i].enabled = f->trigger[i].right = true;
}

static void judge(const struct flow_config *cfg, const struct source_facts *f, const struct replication_facts *repl,
		  struct check_report *r)
{
	memset(r, 0, sizeof *r);
	r->config_path = xstrdup(cfg->path);
	check_set_identity(f, repl, r);
	check_rules_evaluate(cfg, f, repl, r);
}

static void test_server_rules(const struct flow_config *cfg)
{
	struct source_facts f = { 0 };
	healthy_server(&f);
	f.wal_level = "replica";
	f.replication_role = false;
	f.slots_used = 10; /* no room for the flow's slot */
	f.senders_used = 9; /* one free: capture fits, verify does not */
	struct replication_facts repl = { .ok = false, .error = "no pg_hba.conf entry" };
	struct check_report r;
	judge(cfg, &f, &repl, &r);
	const struct check_item *c = item(&r, "wal_level", NULL);
	CHECK(c && c->status == CHECK_BLOCKER && has(c->fix, "ALTER SYSTEM SET wal_level = logical"));
	c = item(&r, "replication_slots", NULL);
	CHECK(c && c->status == CHECK_BLOCKER && has(c->fix, "max_replication_slots = 12"));
	c = item(&r, "wal_senders", NULL);
	CHECK(c && c->status == CHECK_WARN && has(c->fix, "max_wal_senders = 11"));
	c = item(&r, "replication_privilege", NULL);
	CHECK(c && c->status == CHECK_BLOCKER && has(c->fix, "ALTER ROLE \"cap\"\"ture\" WITH REPLICATION;"));
	c = item(&r, "replication_connection", NULL);
	CHECK(c && c->status == CHECK_BLOCKER && has(c->detail, "no pg_hba.conf entry"));
	c = item(&r, "recovery", NULL);
	CHECK(c && c->status == CHECK_OK);
	CHECK(r.blockers >= 4);
	CHECK_STR(r.identity.server_version, "15.4");
	check_report_free(&r);

	/* below PostgreSQL 10 only the version is judged */
	f.version_num = 90600;
	f.server_version = "9.6";
	judge(cfg, &f, &repl, &r);
	c = item(&r, "server_version", NULL);
	CHECK(c && c->status == CHECK_BLOCKER && has(c->fix, "PostgreSQL 14 or later"));
	CHECK(r.n_items == 1);
	check_report_free(&r);
}

static void test_publication_and_tables(const struct flow_config *cfg)
{
	struct table_config tc = { 0 };
	struct table_facts t[2] = {
		{ .config = &tc, .display = "public.orders", .quoted = "\"public\".\"orders\"", .exists = true,
		  .relkind = 'r', .persistence = 'p', .replident = 'd', .candidate_index = "orders_ref_key" },
		{ .config = &tc, .display = "public.gone", .quoted = "\"public\".\"gone\"", .exists = false },
	};
	struct source_facts f = { 0 };
	healthy_server(&f);
	f.pub_exists = false;
	f.tables = t;
	f.n_tables = 2;
	struct replication_facts repl = { .ok = true };
	struct check_report r;
	judge(cfg, &f, &repl, &r);
	const struct check_item *c = item(&r, "publication", NULL);
	/* only the table that exists is listed */
	CHECK(c && c->status == CHECK_BLOCKER && c->fixable);
	CHECK(c && has(c->fix, "CREATE PUBLICATION \"trellara_pub\" FOR TABLE \"public\".\"orders\";"));
	CHECK(c && !has(c->fix, "gone"));
	c = item(&r, "table", "public.gone");
	CHECK(c && c->status == CHECK_BLOCKER && has(c->fix, "or remove it from dataset.tables in /etc/flow.yml"));
	c = item(&r, "replica_identity", "public.orders");
	CHECK(c && c->status == CHECK_BLOCKER &&
	      has(c->fix, "ALTER TABLE \"public\".\"orders\" REPLICA IDENTITY USING INDEX \"orders_ref_key\";"));
	CHECK(item(&r, "publication_table", "public.orders") == NULL); /* no publication to be in */
	check_report_free(&r);

	/* the publication exists but lacks the table and truncate */
	f.pub_exists = true;
	f.pub_truncate = false;
	t[0].replident = 'f';
	judge(cfg, &f, &repl, &r);
	c = item(&r, "publication_operations", NULL);
	CHECK(c && c->status == CHECK_BLOCKER && has(c->detail, "does not publish truncate"));
	c = item(&r, "publication_table", "public.orders");
	CHECK(c && c->status == CHECK_BLOCKER && c->fixable &&
	      has(c->fix, "ALTER PUBLICATION \"trellara_pub\" ADD TABLE \"public\".\"orders\";"));
	c = item(&r, "replica_identity", "public.orders");
	CHECK(c && c->status == CHECK_OK);
	check_report_free(&r);
}

static void test_ddl_rules(const struct flow_config *cfg)
{
	struct source_facts f = { 0 };
	healthy_server(&f);
	f.trigger[1].enabled = false;
	struct replication_facts repl = { .ok = true };
	struct check_report r;
	judge(cfg, &f, &repl, &r);
	const struct check_item *c = item(&r, "ddl_trigger", NULL);
	/* not a superuser: the SQL to run as one, not --fix */
	CHECK(c && c->status == CHECK_WARN && !c->fixable);
	CHECK(c && has(c->detail, "event trigger trellara_ddl_drop is disabled"));
	CHECK(c && has(c->fix, "CREATE EVENT TRIGGER \"trellara_ddl_drop\" ON sql_drop"));
	check_report_free(&r);
	f.superuser = true;
	judge(cfg, &f, &repl, &r);
	c = item(&r, "ddl_trigger", NULL);
	CHECK(c && c->status == CHECK_WARN && c->fixable && has(c->fix, "trellara check --config /etc/flow.yml --fix"));
	check_report_free(&r);
	f.trigger[1].enabled = true;
	judge(cfg, &f, &repl, &r);
	c = item(&r, "ddl_trigger", NULL);
	CHECK(c && c->status == CHECK_OK && c->fix == NULL);
	check_report_free(&r);
	/* the partition TRUNCATE evidence: its functions, and the triggers on
	 * every table of a partition tree published via its root */
	f.truncate_missing = 3;
	judge(cfg, &f, &repl, &r);
	c = item(&r, "ddl_trigger", NULL);
	CHECK(c && c->status == CHECK_WARN && c->fixable);
	CHECK(c && has(c->detail, "3 tables of partitioned tables published via their root lack the TRUNCATE triggers"));
	CHECK(c && has(c->detail, "a TRUNCATE of one partition will not reach the stream"));
	check_report_free(&r);
	f.truncate_missing = 0;
	f.truncate_current = false;
	f.superuser = false;
	judge(cfg, &f, &repl, &r);
	c = item(&r, "ddl_trigger", NULL);
	CHECK(c && c->status == CHECK_WARN && has(c->detail, "function trellara.emit_truncate() or trellara.truncate_triggers() is missing"));
	CHECK(c && has(c->fix, "CREATE TRIGGER trellara_truncate_before BEFORE TRUNCATE"));
	check_report_free(&r);
	f.truncate_current = true;
}

/* The slot's limits against source.expected_downtime_seconds. */
static void test_downtime_rules(struct flow_config *cfg)
{
	struct source_facts f = { 0 };
	struct replication_facts repl = { .ok = true };
	struct check_report r;
	healthy_server(&f);
	cfg->expected_downtime_seconds = 4 * 3600;
	/* PostgreSQL 18: a 1 h idle timeout is shorter than 4 h of downtime */
	f.has_idle_timeout = true;
	f.idle_timeout = "60";
	f.idle_timeout_unit = "min";
	/* 1 MB/s for 4 h is 14 GB, over a 10 GB max_slot_wal_keep_size */
	f.has_max_slot_wal_keep_size = true;
	f.max_slot_wal_keep_size_mb = 10 * 1024;
	f.wal_rate_known = true;
	f.wal_bytes_per_second = 1024 * 1024;
	f.wal_rate_since = "2026-12-01 00:00:00+00";
	judge(cfg, &f, &repl, &r);
	const struct check_item *c = item(&r, "idle_replication_slot_timeout", NULL);
	CHECK(c && c->status == CHECK_WARN && has(c->detail, "(60 min), shorter than source.expected_downtime_seconds (4.0 h)"));
	CHECK(c && has(c->fix, "idle_replication_slot_timeout = '28800s'"));
	c = item(&r, "wal_during_downtime", NULL);
	CHECK(c && c->status == CHECK_WARN && has(c->detail, "about 15099494400 bytes (14.1 GB) behind"));
	CHECK(c && has(c->fix, "max_slot_wal_keep_size = '28801MB'"));
	check_report_free(&r);

	/* an idle timeout of a day and a quiet source: both fit */
	f.idle_timeout = "86400";
	f.idle_timeout_unit = "s";
	f.wal_bytes_per_second = 1024;
	judge(cfg, &f, &repl, &r);
	c = item(&r, "idle_replication_slot_timeout", NULL);
	CHECK(c && c->status == CHECK_OK && has(c->detail, "(24.0 h), longer than"));
	c = item(&r, "wal_during_downtime", NULL);
	CHECK(c && c->status == CHECK_OK && has(c->detail, "within max_slot_wal_keep_size"));
	check_report_free(&r);

	/* disabled timeout, unlimited keep size, no rate: nothing to warn about */
	f.idle_timeout = "0";
	f.max_slot_wal_keep_size_mb = -1;
	judge(cfg, &f, &repl, &r);
	c = item(&r, "idle_replication_slot_timeout", NULL);
	CHECK(c && c->status == CHECK_OK && has(c->detail, "disabled"));
	c = item(&r, "wal_during_downtime", NULL);
	CHECK(c && c->status == CHECK_OK && has(c->detail, "does not bound the slot"));
	check_report_free(&r);
	f.max_slot_wal_keep_size_mb = 100;
	f.wal_rate_known = false;
	judge(cfg, &f, &repl, &r);
	c = item(&r, "wal_during_downtime", NULL);
	CHECK(c && c->status == CHECK_OK && has(c->detail, "no WAL rate"));
	check_report_free(&r);
	cfg->expected_downtime_seconds = 0;
}

/* The failover posture of each standby in source.standby_database_urls. */
static void test_standby_rules(const struct flow_config *cfg)
{
	struct source_facts f = { 0 };
	struct replication_facts repl = { .ok = true };
	struct check_report r;
	healthy_server(&f);
	f.server_version = "17.2";
	f.version_num = 170002;
	f.system_identifier = "7400000000000000001";
	f.has_failover = f.slot_exists = f.slot_failover = true;
	f.synchronized_standby_slots = "other_standby";
	struct standby_facts s[4] = {
		/* 0: everything in place */
		{ .shown = "host=a", .version_num = 170002, .in_recovery = true, .same_system = true,
		  .system_identifier = "7400000000000000001", .hot_standby_feedback = "on", .primary_slot_name = "sb_a",
		  .sync_replication_slots = "on", .conninfo_known = true, .conninfo_has_dbname = true,
		  .slot_exists = true, .slot_synced = true, .slot_failover = true, .slot_confirmed_lsn = "0/5000060",
		  .primary_slot_exists = true, .primary_slot_listed = true },
		/* 1: feedback off, slot not listed, sync off, no copy */
		{ .shown = "host=b", .version_num = 170002, .in_recovery = true, .same_system = true,
		  .system_identifier = "7400000000000000001", .hot_standby_feedback = "off", .primary_slot_name = "sb_b",
		  .sync_replication_slots = "off", .primary_slot_exists = true },
		/* 2: another system */
		{ .shown = "host=c", .version_num = 170002, .in_recovery = true, .system_identifier = "99" },
		/* 3: unreachable */
		{ .shown = "host=d", .error = "connection refused" },
	};
	f.standbys = s;
	f.n_standbys = 4;
	judge(cfg, &f, &repl, &r);
	const struct check_item *c = item(&r, "standby_slot_synced", "host=a");
	CHECK(c && c->status == CHECK_OK && has(c->detail, "synced, confirmed through 0/5000060"));
	CHECK((c = item(&r, "standby_sync_replication_slots", "host=a")) && c->status == CHECK_OK);
	CHECK((c = item(&r, "standby_primary_slot_name", "host=a")) && c->status == CHECK_OK);
	CHECK((c = item(&r, "standby_hot_standby_feedback", "host=a")) && c->status == CHECK_OK);
	c = item(&r, "standby_hot_standby_feedback", "host=b");
	CHECK(c && c->status == CHECK_WARN && has(c->fix, "hot_standby_feedback = on"));
	c = item(&r, "standby_primary_slot_name", "host=b");
	CHECK(c && c->status == CHECK_WARN && has(c->detail, "not in the source's synchronized_standby_slots"));
	c = item(&r, "standby_sync_replication_slots", "host=b");
	CHECK(c && c->status == CHECK_WARN && has(c->fix, "sync_replication_slots = on"));
	c = item(&r, "standby_slot_synced", "host=b");
	CHECK(c && c->status == CHECK_WARN && has(c->detail, "no copy of slot \"trellara_slot\" yet"));
	c = item(&r, "standby_role", "host=c");
	CHECK(c && c->status == CHECK_WARN && has(c->detail, "another system (system identifier 99"));
	CHECK(item(&r, "standby_slot_synced", "host=c") == NULL);
	c = item(&r, "standby_reachable", "host=d");
	CHECK(c && c->status == CHECK_WARN && has(c->detail, "connection refused"));
	check_report_free(&r);

	/* PostgreSQL 15: no synchronization at all; said once per standby */
	healthy_server(&f);
	f.system_identifier = "7400000000000000001";
	s[0].version_num = 150004;
	s[0].hot_standby_feedback = "off";
	s[0].primary_slot_name = "";
	f.standbys = s;
	f.n_standbys = 1;
	judge(cfg, &f, &repl, &r);
	c = item(&r, "standby_slot_synced", "host=a");
	CHECK(c && c->status == CHECK_WARN && has(c->detail, "needs PostgreSQL 17 on both servers (the standby is 15"));
	CHECK(c && has(c->detail, "exit 65"));
	CHECK((c = item(&r, "standby_hot_standby_feedback", "host=a")) && c->status == CHECK_OK);
	CHECK((c = item(&r, "standby_primary_slot_name", "host=a")) && c->status == CHECK_OK);
	CHECK(item(&r, "standby_sync_replication_slots", "host=a") == NULL);
	check_report_free(&r);
}

int main(void)
{
	struct flow_config cfg = { 0 };
	cfg.path = "/etc/flow.yml";
	cfg.publication = "trellara_pub";
	cfg.slot = "trellara_slot";
	cfg.pgoutput_protocol_version = 2;
	cfg.pgoutput_streaming = true;
	cfg.wal_retention_warn_bytes = 1u << 30;
	test_server_rules(&cfg);
	test_publication_and_tables(&cfg);
	test_ddl_rules(&cfg);
	test_downtime_rules(&cfg);
	test_standby_rules(&cfg);
	return unit_done("check_rules");
}
