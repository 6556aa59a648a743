/*
 * check_rules.c - evaluate: facts -> named checks (check_int.h).  Pure:
 * no server and no I/O, so tests judge hand-made facts.
 */
#include "check_int.h"

#include "trellara/strbuf.h"
#include "trellara/xalloc.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

char *check_trellara_command(const struct check_report *r, const char *sub, const char *extra)
{
	char *path = strbuf_shell_quote(r->config_path);
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

static void evaluate_server(const struct flow_config *cfg, const struct source_facts *f,
			    const struct replication_facts *repl, struct check_report *r)
{
	const char *S = "server";
	int need = needed_version(cfg);
	if (f->version_num < need)
		check_add_item(r, S, "server_version", NULL, CHECK_BLOCKER,
			 xasprintf("PostgreSQL %s: pgoutput protocol %d%s needs PostgreSQL %d or later", f->server_version,
				   cfg->pgoutput_protocol_version, cfg->pgoutput_streaming ? " with streaming" : "",
				   need / 10000),
			 xasprintf("upgrade the source to PostgreSQL %d or later", need / 10000), false);
	else
		check_add_item(r, S, "server_version", NULL, CHECK_OK,
			 xasprintf("PostgreSQL %s (pgoutput protocol %d%s supported)", f->server_version,
				   cfg->pgoutput_protocol_version, cfg->pgoutput_streaming ? " with streaming" : ""),
			 NULL, false);
	if (f->version_num < 100000)
		return;

	if (strcmp(f->wal_level, "logical") == 0)
		check_add_item(r, S, "wal_level", NULL, CHECK_OK, xstrdup("logical"), NULL, false);
	else
		check_add_item(r, S, "wal_level", NULL, CHECK_BLOCKER,
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
		check_add_item(r, S, "replication_slots", NULL, CHECK_BLOCKER,
			 xasprintf("%s: no free slot for \"%s\"", slots, cfg->slot),
			 raise_setting_fix("max_replication_slots", f->slots_used + need_slots + 1), false);
	else if (free_slots < need_slots + 1)
		check_add_item(r, S, "replication_slots", NULL, CHECK_WARN,
			 xasprintf("%s: no room for the temporary slot trellara-verify and a resumed snapshot use", slots),
			 raise_setting_fix("max_replication_slots", f->slots_used + need_slots + 1), false);
	else
		check_add_item(r, S, "replication_slots", NULL, CHECK_OK, xasprintf("%s (max_replication_slots)", slots), NULL,
			 false);
	free(slots);

	long need_senders = f->slot_active ? 0 : 1, free_senders = f->max_wal_senders - f->senders_used;
	char *senders = xasprintf("%ld of %ld in use", f->senders_used, f->max_wal_senders);
	if (free_senders < need_senders)
		check_add_item(r, S, "wal_senders", NULL, CHECK_BLOCKER,
			 xasprintf("%s: no free WAL sender for trellara-capture", senders),
			 raise_setting_fix("max_wal_senders", f->senders_used + need_senders + 1), false);
	else if (free_senders < need_senders + 1)
		check_add_item(r, S, "wal_senders", NULL, CHECK_WARN,
			 xasprintf("%s: no room for the replication connection trellara-verify and snapshots open", senders),
			 raise_setting_fix("max_wal_senders", f->senders_used + need_senders + 1), false);
	else
		check_add_item(r, S, "wal_senders", NULL, CHECK_OK, xasprintf("%s (max_wal_senders)", senders), NULL, false);
	free(senders);

	if (f->superuser || f->replication_role) {
		check_add_item(r, S, "replication_privilege", NULL, CHECK_OK,
			 xasprintf("role \"%s\" %s", f->user, f->superuser ? "is a superuser" : "has REPLICATION"), NULL,
			 false);
	} else {
		char *role = check_quote_ident(f->user);
		check_add_item(r, S, "replication_privilege", NULL, CHECK_BLOCKER,
			 xasprintf("role \"%s\" has neither REPLICATION nor SUPERUSER: it cannot stream a slot", f->user),
			 xasprintf("ALTER ROLE %s WITH REPLICATION;", role), false);
		free(role);
	}

	if (repl->ok)
		check_add_item(r, S, "replication_connection", NULL, CHECK_OK,
			 xasprintf("IDENTIFY_SYSTEM answered: system identifier %s, timeline %" PRIu32, repl->id.systemid,
				   repl->id.timeline),
			 NULL, false);
	else
		check_add_item(r, S, "replication_connection", NULL, CHECK_BLOCKER,
			 xasprintf("a replication connection (replication=database) fails: %s", repl->error),
			 xasprintf("allow role \"%s\" to connect to database \"%s\" in pg_hba.conf and grant it REPLICATION,\n"
				   "then SELECT pg_reload_conf();",
				   f->user, f->database),
			 false);

	if (!f->in_recovery)
		check_add_item(r, S, "recovery", NULL, CHECK_OK, xstrdup("the source is a primary (not in recovery)"), NULL,
			 false);
	else if (f->version_num >= 160000)
		check_add_item(r, S, "recovery", NULL, CHECK_WARN,
			 xstrdup("the source is a standby: it can decode, but the publication, the DDL trigger and\n"
				 "hot_standby_feedback must be set up on (or for) the primary"),
			 xstrdup("point source.database_url at the primary, or run --fix against the primary"), false);
	else
		check_add_item(r, S, "recovery", NULL, CHECK_BLOCKER,
			 xasprintf("the source is a standby: logical decoding on a standby needs PostgreSQL 16 (this is %s)",
				   f->server_version),
			 xstrdup("point source.database_url at the primary"), false);
}

static void evaluate_publication(const struct flow_config *cfg, const struct source_facts *f,
				 struct check_report *r)
{
	const char *S = "publication";
	char *pub = check_quote_ident(cfg->publication);
	if (!f->pub_exists) {
		char *create = check_create_publication_sql(cfg, f, NULL, NULL);
		check_add_item(r, S, "publication", NULL, CHECK_BLOCKER,
			 xasprintf("publication \"%s\" does not exist", cfg->publication), xasprintf("%s;", create), true);
		free(create);
		free(pub);
		return;
	}
	check_add_item(r, S, "publication", NULL, CHECK_OK,
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
		check_add_item(r, S, "publication_operations", NULL, CHECK_BLOCKER,
			 xasprintf("publication \"%s\" does not publish %s: those changes would never reach the target",
				   cfg->publication, missing.buf),
			 xasprintf("ALTER PUBLICATION %s SET (publish = 'insert, update, delete, truncate');", pub), false);
	else
		check_add_item(r, S, "publication_operations", NULL, CHECK_OK,
			 xstrdup("publishes insert, update, delete and truncate"), NULL, false);
	strbuf_release(&missing);
	free(pub);
}

static char *replica_identity_fix(const struct table_facts *t)
{
	if (t->pk_index)
		return xasprintf("ALTER TABLE %s REPLICA IDENTITY DEFAULT;", t->quoted);
	if (t->candidate_index) {
		char *index = check_quote_ident(t->candidate_index);
		char *fix = xasprintf("ALTER TABLE %s REPLICA IDENTITY USING INDEX %s;", t->quoted, index);
		free(index);
		return fix;
	}
	return xasprintf("ALTER TABLE %s REPLICA IDENTITY FULL;", t->quoted);
}

static void evaluate_table(const struct flow_config *cfg, const struct source_facts *f,
			   const struct table_facts *t, struct check_report *r)
{
	const char *S = "tables";
	if (!t->exists) {
		char *path = strbuf_shell_quote(cfg->path);
		check_add_item(r, S, "table", t->display, CHECK_BLOCKER,
			 xasprintf("configured table %s does not exist on the source", t->display),
			 xasprintf("create %s on the source, or remove it from dataset.tables in %s", t->display, path),
			 false);
		free(path);
		return;
	}
	if (t->relkind != 'r' && t->relkind != 'p') {
		char *path = strbuf_shell_quote(cfg->path);
		check_add_item(r, S, "table", t->display, CHECK_BLOCKER,
			 xasprintf("%s is not a table (pg_class.relkind '%c'): only tables can be published", t->display,
				   t->relkind),
			 xasprintf("remove %s from dataset.tables in %s", t->display, path), false);
		free(path);
		return;
	}
	if (t->persistence != 'p') {
		check_add_item(r, S, "table", t->display, CHECK_BLOCKER,
			 xasprintf("%s is %s: its changes are not written to WAL and cannot be captured", t->display,
				   t->persistence == 'u' ? "UNLOGGED" : "TEMPORARY"),
			 xasprintf("ALTER TABLE %s SET LOGGED;", t->quoted), false);
		return;
	}
	check_add_item(r, S, "table", t->display, CHECK_OK,
		 xasprintf("exists (%s)", t->relkind == 'p' ? "partitioned table" : "table"), NULL, false);
	if (t->partition_of) {
		char *path = strbuf_shell_quote(cfg->path);
		check_add_item(r, S, "partition_listed", t->display, CHECK_BLOCKER,
			 xasprintf("%s is a partition of %s, which dataset.tables lists as well: its rows are copied,"
				   " published and verified through %s",
				   t->display, t->partition_of, t->partition_of),
			 xasprintf("remove %s from dataset.tables in %s", t->display, path), false);
		free(path);
	}

	if (f->pub_exists) {
		char *pub = check_quote_ident(cfg->publication);
		if (t->relkind == 'p' && !f->pub_via_root)
			check_add_item(r, S, "publication_table", t->display, CHECK_BLOCKER,
				 xasprintf("partitioned table, but publication \"%s\" publishes its changes under the "
					   "partitions' names (publish_via_partition_root is off)",
					   cfg->publication),
				 xasprintf("ALTER PUBLICATION %s SET (publish_via_partition_root = true);", pub), false);
		else if (!t->in_publication)
			check_add_item(r, S, "publication_table", t->display, CHECK_BLOCKER,
				 xasprintf("not in publication \"%s\": its changes would not be captured", cfg->publication),
				 xasprintf("ALTER PUBLICATION %s ADD TABLE %s;", pub, t->quoted), true);
		else if (t->row_filter || t->column_list)
			check_add_item(r, S, "publication_table", t->display, CHECK_BLOCKER,
				 t->row_filter ? xasprintf("published with a row filter (WHERE %s): other rows are never captured",
							   t->row_filter)
					       : xstrdup("published with a column list: other columns are never captured"),
				 xasprintf("ALTER PUBLICATION %s DROP TABLE %s;\nALTER PUBLICATION %s ADD TABLE %s;", pub,
					   t->quoted, pub, t->quoted),
				 false);
		else
			check_add_item(r, S, "publication_table", t->display, CHECK_OK,
				 xasprintf("in publication \"%s\"", cfg->publication), NULL, false);
		free(pub);
	}

	switch (t->replident) {
	case 'd':
		if (t->pk_index)
			check_add_item(r, S, "replica_identity", t->display, CHECK_OK,
				 xasprintf("DEFAULT, primary key (%s)", t->pk_columns ? t->pk_columns : t->pk_index), NULL,
				 false);
		else
			check_add_item(r, S, "replica_identity", t->display, CHECK_BLOCKER,
				 xasprintf("%s has no primary key and REPLICA IDENTITY DEFAULT: its UPDATEs and DELETEs "
					   "carry no key (PostgreSQL refuses them once the table is published)",
					   t->display),
				 replica_identity_fix(t), false);
		break;
	case 'n':
		check_add_item(r, S, "replica_identity", t->display, CHECK_BLOCKER,
			 xasprintf("%s has REPLICA IDENTITY NOTHING: its UPDATEs and DELETEs carry no key", t->display),
			 replica_identity_fix(t), false);
		break;
	case 'f':
		check_add_item(r, S, "replica_identity", t->display, CHECK_OK,
			 xstrdup("FULL (old rows carry every column)"), NULL, false);
		break;
	case 'i':
		check_add_item(r, S, "replica_identity", t->display, CHECK_OK,
			 xasprintf("USING INDEX %s", t->ident_index ? t->ident_index : "(unknown)"), NULL, false);
		break;
	default:
		check_add_item(r, S, "replica_identity", t->display, CHECK_WARN,
			 xasprintf("unknown pg_class.relreplident '%c'", t->replident),
			 xasprintf("ALTER TABLE %s REPLICA IDENTITY FULL;", t->quoted), false);
	}
}

/* seconds of a setting in unit ("s", "min", "ms", "h", "d") */
static double setting_seconds(const char *setting, const char *unit)
{
	double v = strtod(setting, NULL);
	if (strcmp(unit, "ms") == 0)
		return v / 1000;
	if (strcmp(unit, "min") == 0)
		return v * 60;
	if (strcmp(unit, "h") == 0)
		return v * 3600;
	if (strcmp(unit, "d") == 0)
		return v * 86400;
	return v;
}

/* The slot's limits against source.expected_downtime_seconds: how long
 * capture may be stopped before the server invalidates the slot. */
static void evaluate_downtime(const struct flow_config *cfg, const struct source_facts *f, struct check_report *r)
{
	const char *S = "slot";
	double downtime = (double)cfg->expected_downtime_seconds;
	char *down = check_human_seconds(downtime);
	if (!f->has_idle_timeout) {
		check_add_item(r, S, "idle_replication_slot_timeout", NULL, CHECK_OK,
			 xasprintf("not available on PostgreSQL %s (added in 18): an idle slot is never invalidated "
				   "for its idle time",
				   f->server_version),
			 NULL, false);
	} else if (setting_seconds(f->idle_timeout, f->idle_timeout_unit) <= 0) {
		check_add_item(r, S, "idle_replication_slot_timeout", NULL, CHECK_OK,
			 xstrdup("0 (disabled): an idle slot is never invalidated for its idle time"), NULL, false);
	} else {
		double idle = setting_seconds(f->idle_timeout, f->idle_timeout_unit);
		char *idle_text = check_human_seconds(idle);
		if (idle < downtime)
			check_add_item(r, S, "idle_replication_slot_timeout", NULL, CHECK_WARN,
				 xasprintf("%s%s (%s), shorter than source.expected_downtime_seconds (%s): a capture stopped "
					   "that long loses the slot, and the flow needs a new snapshot",
					   f->idle_timeout, f->idle_timeout_unit, idle_text, down),
				 xasprintf("ALTER SYSTEM SET idle_replication_slot_timeout = '%.0fs'; SELECT pg_reload_conf();"
					   "  (or 0: never)",
					   downtime * 2),
				 false);
		else
			check_add_item(r, S, "idle_replication_slot_timeout", NULL, CHECK_OK,
				 xasprintf("%s%s (%s), longer than source.expected_downtime_seconds (%s): a capture "
					   "stopped longer than that loses the slot",
					   f->idle_timeout, f->idle_timeout_unit, idle_text, down),
				 NULL, false);
		free(idle_text);
	}

	if (!f->has_max_slot_wal_keep_size || f->max_slot_wal_keep_size_mb < 0) {
		check_add_item(r, S, "wal_during_downtime", NULL, CHECK_OK,
			 xasprintf("max_slot_wal_keep_size does not bound the slot: a capture stopped for %s "
				   "(source.expected_downtime_seconds) keeps it, whatever the WAL volume",
				   down),
			 NULL, false);
	} else if (!f->wal_rate_known) {
		check_add_item(r, S, "wal_during_downtime", NULL, CHECK_OK,
			 xasprintf("no WAL rate to judge max_slot_wal_keep_size against a downtime of %s "
				   "(pg_stat_wal needs PostgreSQL 14, and a stats_reset)",
				   down),
			 NULL, false);
	} else {
		uint64_t keep = (uint64_t)f->max_slot_wal_keep_size_mb * 1024 * 1024;
		double behind = f->wal_bytes_per_second * downtime;
		char *keep_text = check_human_bytes(keep), *behind_text = check_human_bytes((uint64_t)behind);
		char *rate = check_human_bytes((uint64_t)f->wal_bytes_per_second);
		if (behind > (double)keep)
			check_add_item(r, S, "wal_during_downtime", NULL, CHECK_WARN,
				 xasprintf("at the average WAL rate since %s (%s per second), a capture stopped for %s "
					   "(source.expected_downtime_seconds) leaves about %s behind, more than "
					   "max_slot_wal_keep_size %s: the slot would be invalidated",
					   f->wal_rate_since, rate, down, behind_text, keep_text),
				 xasprintf("ALTER SYSTEM SET max_slot_wal_keep_size = '%.0fMB'; SELECT pg_reload_conf();"
					   "  (or -1: unlimited)",
					   behind * 2 / (1024 * 1024) + 1),
				 false);
		else
			check_add_item(r, S, "wal_during_downtime", NULL, CHECK_OK,
				 xasprintf("at the average WAL rate since %s (%s per second), a capture stopped for %s "
					   "leaves about %s behind, within max_slot_wal_keep_size %s",
					   f->wal_rate_since, rate, down, behind_text, keep_text),
				 NULL, false);
		free(keep_text);
		free(behind_text);
		free(rate);
	}
	free(down);
}

static void evaluate_slot(const struct flow_config *cfg, const struct source_facts *f,
			  struct check_report *r)
{
	const char *S = "slot";
	char *literal = check_quote_literal(cfg->slot);
	char *drop = xasprintf("SELECT pg_drop_replication_slot(%s);", literal);
	if (!f->slot_exists) {
		check_add_item(r, S, "slot", NULL, CHECK_OK,
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
			char *path = strbuf_shell_quote(cfg->path);
			check_add_item(r, S, "slot", NULL, CHECK_BLOCKER,
				 xasprintf("\"%s\" cannot be this flow's slot: %s", cfg->slot, wrong.buf),
				 xasprintf("set another source.slot in %s, or, if nothing uses it:\n%s", path, drop), false);
			free(path);
		} else {
			check_add_item(r, S, "slot", NULL, CHECK_OK,
				 xasprintf("\"%s\" exists: logical, pgoutput, database \"%s\", restart_lsn %s, "
					   "confirmed_flush_lsn %s",
					   cfg->slot, f->database, f->restart_lsn ? f->restart_lsn : "none",
					   f->confirmed_flush_lsn ? f->confirmed_flush_lsn : "none"),
				 NULL, false);
		}
		strbuf_release(&wrong);

		const char *app = f->slot_active_app ? f->slot_active_app : "unknown";
		if (!f->slot_active)
			check_add_item(r, S, "slot_active", NULL, CHECK_OK, xstrdup("not in use"), NULL, false);
		else if (strcmp(app, CAPTURE_APPLICATION_NAME) == 0)
			check_add_item(r, S, "slot_active", NULL, CHECK_OK,
				 xasprintf("in use by trellara-capture (pid %s)", f->slot_active_pid ? f->slot_active_pid : "?"),
				 NULL, false);
		else
			check_add_item(r, S, "slot_active", NULL, CHECK_WARN,
				 xasprintf("active elsewhere: held by pid %s (application_name \"%s\"); trellara-capture "
					   "cannot stream it meanwhile",
					   f->slot_active_pid ? f->slot_active_pid : "?", app),
				 xasprintf("SELECT pg_terminate_backend(%s);", f->slot_active_pid ? f->slot_active_pid : "PID"),
				 false);

		char *snapshot = check_trellara_command(r, "snapshot", " --force");
		char *capture = check_trellara_command(r, "capture", "");
		if (f->invalidation || (f->wal_status && strcmp(f->wal_status, "lost") == 0))
			check_add_item(r, S, "slot_wal_status", NULL, CHECK_BLOCKER,
				 xasprintf("the slot is invalidated (%s): the WAL it needs is gone",
					   f->invalidation ? f->invalidation : "wal_status lost"),
				 xasprintf("%s\nthen: %s", drop, snapshot), false);
		else if (f->wal_status && strcmp(f->wal_status, "unreserved") == 0)
			check_add_item(r, S, "slot_wal_status", NULL, CHECK_BLOCKER,
				 xstrdup("unreserved: the WAL the slot needs is past max_slot_wal_keep_size and will be "
					 "removed at the next checkpoint"),
				 xasprintf("%s\nor: ALTER SYSTEM SET max_slot_wal_keep_size = -1; SELECT pg_reload_conf();", capture),
				 false);
		else if (f->wal_status && strcmp(f->wal_status, "extended") == 0)
			check_add_item(r, S, "slot_wal_status", NULL, CHECK_WARN,
				 xstrdup("extended: the slot retains more WAL than max_wal_size"), xstrdup(capture), false);
		else
			check_add_item(r, S, "slot_wal_status", NULL, CHECK_OK,
				 f->wal_status ? xstrdup(f->wal_status)
					       : xasprintf("not reported by PostgreSQL %s (wal_status needs 13)",
							   f->server_version),
				 NULL, false);

		if (f->retained_known) {
			char *retained = check_human_bytes(f->retained_bytes), *limit = check_human_bytes(cfg->wal_retention_warn_bytes);
			if (f->retained_bytes > cfg->wal_retention_warn_bytes)
				check_add_item(r, S, "slot_retained_wal", NULL, CHECK_WARN,
					 xasprintf("retains %s of WAL, over source.wal_retention_warn_bytes %s", retained,
						   limit),
					 xasprintf("%s\n(a running capture acknowledges what is durable, which releases WAL)",
						   capture),
					 false);
			else
				check_add_item(r, S, "slot_retained_wal", NULL, CHECK_OK,
					 xasprintf("retains %s of WAL (warning above %s)", retained, limit), NULL, false);
			free(retained);
			free(limit);
		} else {
			check_add_item(r, S, "slot_retained_wal", NULL, CHECK_OK, xstrdup("the slot has no restart_lsn yet"), NULL,
				 false);
		}
		if (f->safe_wal_known && (uint64_t)(f->safe_wal_size < 0 ? 0 : f->safe_wal_size) < cfg->wal_retention_warn_bytes) {
			char *left = check_human_bytes(f->safe_wal_size < 0 ? 0 : (uint64_t)f->safe_wal_size);
			check_add_item(r, S, "slot_wal_headroom", NULL, CHECK_WARN,
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
		check_add_item(r, S, "max_slot_wal_keep_size", NULL, CHECK_OK,
			 xasprintf("not available on PostgreSQL %s (added in 13): a slot retains WAL without bound",
				   f->server_version),
			 NULL, false);
	} else if (f->max_slot_wal_keep_size_mb < 0) {
		check_add_item(r, S, "max_slot_wal_keep_size", NULL, CHECK_OK,
			 xstrdup("-1 (unlimited): the slot is never invalidated for WAL size; only disk space bounds "
				 "what it retains (watch slot_retained_wal)"),
			 NULL, false);
	} else {
		uint64_t keep = (uint64_t)f->max_slot_wal_keep_size_mb * 1024 * 1024;
		char *keep_text = check_human_bytes(keep), *limit = check_human_bytes(cfg->wal_retention_warn_bytes);
		if (keep < cfg->wal_retention_warn_bytes)
			check_add_item(r, S, "max_slot_wal_keep_size", NULL, CHECK_WARN,
				 xasprintf("%s: the slot is invalidated before it reaches source.wal_retention_warn_bytes %s, "
					   "so the warning would come too late",
					   keep_text, limit),
				 xasprintf("ALTER SYSTEM SET max_slot_wal_keep_size = '%" PRIu64 "MB'; SELECT pg_reload_conf();",
					   (cfg->wal_retention_warn_bytes + 1024 * 1024 - 1) / (1024 * 1024) * 2),
				 false);
		else
			check_add_item(r, S, "max_slot_wal_keep_size", NULL, CHECK_OK,
				 xasprintf("%s: a slot retaining more is invalidated (warning above %s)", keep_text, limit),
				 NULL, false);
		free(keep_text);
		free(limit);
	}

	evaluate_downtime(cfg, f, r);

	if (f->missing_standby_slots)
		check_add_item(r, S, "synchronized_standby_slots", NULL, CHECK_BLOCKER,
			 xasprintf("synchronized_standby_slots = '%s' names %s, which %s no physical slot on this server: "
				   "logical decoding of a failover slot (Trellara creates its slot with FAILOVER on "
				   "PostgreSQL 17 and later) waits for it forever, and capture would stall",
				   f->synchronized_standby_slots, f->missing_standby_slots,
				   strchr(f->missing_standby_slots, ',') ? "have" : "has"),
			 xstrdup("create the standby's physical slot (its primary_slot_name): SELECT "
				 "pg_create_physical_replication_slot('NAME', true); or take the name out: ALTER SYSTEM "
				 "SET synchronized_standby_slots = '...'; SELECT pg_reload_conf();"),
			 false);
	if (!f->has_failover) {
		check_add_item(r, S, "failover_slots", NULL, CHECK_OK,
			 xasprintf("not available on PostgreSQL %s (failover slots were added in 17): the slot exists "
				   "only on this server, so after a failover to a standby it is gone and the flow needs "
				   "a new snapshot",
				   f->server_version),
			 NULL, false);
	} else if (!f->slot_exists) {
		check_add_item(r, S, "failover_slots", NULL, CHECK_OK,
			 xstrdup("available; the slot does not exist yet: trellara snapshot (and check --fix --create-slot) "
				 "create it as a failover slot"),
			 NULL, false);
	} else if (f->slot_failover) {
		if (!f->synchronized_standby_slots || !*f->synchronized_standby_slots)
			check_add_item(r, S, "failover_slots", NULL, CHECK_WARN,
				 xstrdup("the slot is a failover slot, but synchronized_standby_slots is empty: capture may "
					 "confirm changes a promoted standby's copy of the slot has not seen"),
				 xstrdup("ALTER SYSTEM SET synchronized_standby_slots = 'STANDBY_PHYSICAL_SLOT'; SELECT "
					 "pg_reload_conf();"),
				 false);
		else
			check_add_item(r, S, "failover_slots", NULL, CHECK_OK,
				 xasprintf("the slot is a failover slot; synchronized_standby_slots = '%s'",
					   f->synchronized_standby_slots),
				 NULL, false);
	} else if (f->physical_slots > 0) {
		char *slot = check_quote_ident(cfg->slot);
		check_add_item(r, S, "failover_slots", NULL, CHECK_WARN,
			 xasprintf("the slot is not a failover slot, but %ld physical slot%s suggest standbys: after a "
				   "failover the slot is gone",
				   f->physical_slots, f->physical_slots == 1 ? "" : "s"),
			 xasprintf("on a replication connection (psql \"dbname=%s replication=database\"):\n"
				   "ALTER_REPLICATION_SLOT %s (FAILOVER true)",
				   f->database, slot),
			 false);
		free(slot);
	} else {
		check_add_item(r, S, "failover_slots", NULL, CHECK_OK,
			 xstrdup("the slot is not a failover slot; no physical slot here, so no standby to fail over to"),
			 NULL, false);
	}
	free(literal);
	free(drop);
}

/* Each standby of source.standby_database_urls: can it take over with
 * the flow's slot (trellara-check(1) FAILOVER)? */
static void evaluate_standby(const struct flow_config *cfg, const struct source_facts *f,
			     const struct standby_facts *s, struct check_report *r)
{
	const char *S = "failover";
	const char *o = s->shown;
	if (s->error) {
		check_add_item(r, S, "standby_reachable", o, CHECK_WARN,
			 xasprintf("cannot inspect the standby: %s", s->error),
			 xstrdup("fix source.standby_database_urls, or the standby's pg_hba.conf"), false);
		return;
	}
	if (!s->in_recovery || !s->same_system) {
		check_add_item(r, S, "standby_role", o, CHECK_WARN,
			 !s->in_recovery ? xstrdup("not a standby: the server is not in recovery")
					 : xasprintf("a standby of another system (system identifier %s, the source is %s): "
						     "capture refuses a source of another system",
						     s->system_identifier ? s->system_identifier : "?",
						     f->system_identifier ? f->system_identifier : "?"),
			 xstrdup("list the source's physical standbys in source.standby_database_urls"), false);
		return;
	}
	check_add_item(r, S, "standby_role", o, CHECK_OK,
		 xasprintf("a standby of system %s", s->system_identifier), NULL, false);
	bool v17 = s->version_num >= 170000 && f->version_num >= 170000;
	bool feedback = s->hot_standby_feedback && strcmp(s->hot_standby_feedback, "on") == 0;
	check_add_item(r, S, "standby_hot_standby_feedback", o, feedback || !v17 ? CHECK_OK : CHECK_WARN,
		 feedback ? xstrdup("on")
		 : v17	  ? xstrdup("off: the standby cannot synchronize a failover slot without it (the primary "
				    "would remove rows the slot still needs)")
			  : xstrdup("off (slot synchronization, which needs it, came with PostgreSQL 17)"),
		 feedback || !v17 ? NULL
				  : xstrdup("on the standby: ALTER SYSTEM SET hot_standby_feedback = on; SELECT "
					    "pg_reload_conf();"),
		 false);
	bool named = s->primary_slot_name && *s->primary_slot_name;
	if (!named)
		check_add_item(r, S, "standby_primary_slot_name", o, v17 ? CHECK_WARN : CHECK_OK,
			 xstrdup("not set: the standby streams without a physical slot on the primary, and "
				 "synchronized_standby_slots cannot name it"),
			 v17 ? xstrdup("on the primary: SELECT pg_create_physical_replication_slot('NAME', true); on "
				       "the standby: ALTER SYSTEM SET primary_slot_name = 'NAME'; SELECT pg_reload_conf();")
			     : NULL,
			 false);
	else if (!s->primary_slot_exists)
		check_add_item(r, S, "standby_primary_slot_name", o, CHECK_WARN,
			 xasprintf("\"%s\", but the source has no physical slot of that name", s->primary_slot_name),
			 xasprintf("on the primary: SELECT pg_create_physical_replication_slot(%s, true);",
				   s->primary_slot_name),
			 false);
	else if (v17 && !s->primary_slot_listed)
		check_add_item(r, S, "standby_primary_slot_name", o, CHECK_WARN,
			 xasprintf("\"%s\" is not in the source's synchronized_standby_slots: capture may confirm "
				   "changes this standby's copy of the slot has not received, and after a promotion "
				   "they are lost",
				   s->primary_slot_name),
			 xasprintf("on the primary: ALTER SYSTEM SET synchronized_standby_slots = '%s'; SELECT "
				   "pg_reload_conf();  (add it to the names already there)",
				   s->primary_slot_name),
			 false);
	else
		check_add_item(r, S, "standby_primary_slot_name", o, CHECK_OK,
			 xasprintf("\"%s\", a physical slot on the source%s", s->primary_slot_name,
				   v17 ? ", named by synchronized_standby_slots" : ""),
			 NULL, false);
	if (!v17) {
		check_add_item(r, S, "standby_slot_synced", o, CHECK_WARN,
			 xasprintf("slot synchronization needs PostgreSQL 17 on both servers (the standby is %d, the "
				   "source %s): after a failover to this standby the slot is gone, capture stops with "
				   "exit 65 and the flow needs a new snapshot",
				   s->version_num / 10000, f->server_version),
			 NULL, false);
		return;
	}
	bool sync_on = s->sync_replication_slots && strcmp(s->sync_replication_slots, "on") == 0;
	if (!sync_on)
		check_add_item(r, S, "standby_sync_replication_slots", o, CHECK_WARN,
			 xstrdup("off: the standby does not synchronize failover slots"),
			 xstrdup("on the standby: ALTER SYSTEM SET sync_replication_slots = on; SELECT pg_reload_conf();"),
			 false);
	else if (s->conninfo_known && !s->conninfo_has_dbname)
		check_add_item(r, S, "standby_sync_replication_slots", o, CHECK_WARN,
			 xstrdup("on, but primary_conninfo names no dbname: the slot sync worker cannot connect"),
			 xstrdup("add dbname=... to the standby's primary_conninfo"), false);
	else
		check_add_item(r, S, "standby_sync_replication_slots", o, CHECK_OK, xstrdup("on"), NULL, false);
	if (!s->slot_exists)
		check_add_item(r, S, "standby_slot_synced", o, CHECK_WARN,
			 xasprintf("the standby has no copy of slot \"%s\"%s: a promotion now loses it", cfg->slot,
				   f->slot_failover ? " yet" : " (it is not a failover slot)"),
			 NULL, false);
	else if (!s->slot_synced)
		check_add_item(r, S, "standby_slot_synced", o, CHECK_WARN,
			 xasprintf("slot \"%s\" on the standby is not a synced copy of the source's", cfg->slot), NULL,
			 false);
	else if (s->slot_invalidation)
		check_add_item(r, S, "standby_slot_synced", o, CHECK_WARN,
			 xasprintf("the standby's copy of slot \"%s\" is invalidated (%s): a promotion now loses it",
				   cfg->slot, s->slot_invalidation),
			 NULL, false);
	else
		check_add_item(r, S, "standby_slot_synced", o, CHECK_OK,
			 xasprintf("synced, confirmed through %s",
				   s->slot_confirmed_lsn ? s->slot_confirmed_lsn : "an unknown position"),
			 NULL, false);
}

static void evaluate_ddl(const struct source_facts *f, struct check_report *r)
{
	const char *S = "ddl";
	if (check_ddl_trigger_ok(f)) {
		check_add_item(r, S, "ddl_trigger", NULL, CHECK_OK,
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
	bool ddl_ok = what.len == 0;
	if (!f->truncate_current)
		strbuf_addf(&what, "%sfunction %s.%s() or %s.%s() is missing or not the current version", what.len ? "; " : "",
			    DDL_SCHEMA, TRUNCATE_FUNCTION, DDL_SCHEMA, TRUNCATE_TRIGGERS_FUNCTION);
	if (f->truncate_missing)
		strbuf_addf(&what, "%s%" PRIu64 " tables of partitioned tables published via their root lack the TRUNCATE triggers %s and %s",
			    what.len ? "; " : "", f->truncate_missing, TRUNCATE_TRIGGER_BEFORE, TRUNCATE_TRIGGER_AFTER);
	char *detail = xasprintf("%s: %s", what.buf,
				 ddl_ok ? "a TRUNCATE of one partition will not reach the stream (pgoutput leaves it out under publish_via_partition_root)"
					: "schema changes will not reach the stream as ddl frames, nor a TRUNCATE of one partition");
	strbuf_release(&what);
	if (f->superuser) {
		check_add_item(r, S, "ddl_trigger", NULL, CHECK_WARN, detail, check_trellara_command(r, "check", " --fix"), true);
	} else {
		char *sql = check_ddl_install_sql(f->version_num);
		check_add_item(r, S, "ddl_trigger", NULL, CHECK_WARN, detail,
			 xasprintf("event triggers need a superuser (role \"%s\" is not one); as a superuser, run:\n%s", f->user,
				   sql),
			 false);
		free(sql);
	}
}

void check_set_identity(const struct source_facts *f, const struct replication_facts *repl, struct check_report *r)
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


void check_rules_evaluate(const struct flow_config *cfg, const struct source_facts *f,
			  const struct replication_facts *repl, struct check_report *r)
{
	evaluate_server(cfg, f, repl, r);
	if (f->version_num < 100000)
		return;
	evaluate_publication(cfg, f, r);
	for (size_t i = 0; i < f->n_tables; i++)
		evaluate_table(cfg, f, &f->tables[i], r);
	evaluate_slot(cfg, f, r);
	for (size_t i = 0; i < f->n_standbys; i++)
		evaluate_standby(cfg, f, &f->standbys[i], r);
	evaluate_ddl(f, r);
}
