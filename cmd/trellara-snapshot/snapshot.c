/*
 * snapshot.c - the snapshot run (DESIGN §6) and reseed; --create-tables
 * is in snapshot_tables.c, status in snapshot_status.c.
 *
 * Fault points, in order: snapshot.after_slot_before_record,
 * snapshot.after_export_before_copy, snapshot.mid_table_copy and
 * snapshot.after_range_commit (copy.c),
 * snapshot.after_keys_before_foreign_keys (snapshot_tables.c),
 * snapshot.after_copy_before_handoff, snapshot.after_handoff_before_stream.
 */
#include "snapshot_int.h"
#include "copy.h"

#include "trellara/checkpoint.h"
#include "trellara/defaults.h"
#include "trellara/fault.h"
#include "trellara/jsonw.h"
#include "trellara/log.h"
#include "trellara/lsn.h"
#include "trellara/pgconn.h"
#include "trellara/runs.h"
#include "trellara/sequences.h"
#include "trellara/strbuf.h"
#include "trellara/textcodec.h"
#include "trellara/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_RUN_ID "initial"

struct exported {
	PGconn *repl;          /* holds the snapshot while open */
	uint64_t consistent_lsn;
	char snapshot_name[128];
};

/* CREATE_REPLICATION_SLOT ... (SNAPSHOT 'export'): the consistent point
 * and snapshot stay usable while ex->repl stays open. */
static int export_snapshot(const struct flow_config *cfg, const char *slot, bool temporary, struct exported *ex)
{
	memset(ex, 0, sizeof *ex);
	ex->repl = pgconn_connect(cfg->source_database_url, PGCONN_REPLICATION, "trellara-snapshot", "source");
	if (!ex->repl)
		return -1;
	/* slot creation waits for running transactions: no timeout may cut it */
	if (pgconn_command(ex->repl, "SET statement_timeout = 0") < 0)
		PQclear(NULL);
	char *q = pgconn_quote_ident(ex->repl, slot);
	/* 17+: a failover slot, which a standby can synchronize (a temporary
	 * slot cannot be one) */
	bool failover = !temporary && PQserverVersion(ex->repl) >= 170000;
	char *sql = xasprintf("CREATE_REPLICATION_SLOT %s%s LOGICAL pgoutput (SNAPSHOT 'export'%s)", q,
			      temporary ? " TEMPORARY" : "", failover ? ", FAILOVER true" : "");
	PGresult *res = pgconn_query(ex->repl, sql, 0, NULL);
	free(sql);
	free(q);
	if (!res || PQntuples(res) != 1 || PQgetisnull(res, 0, 2) || !lsn_parse(PQgetvalue(res, 0, 1), &ex->consistent_lsn)) {
		log_error("cannot create replication slot \"%s\" with an exported snapshot", slot);
		PQclear(res);
		PQfinish(ex->repl);
		ex->repl = NULL;
		return -1;
	}
	snprintf(ex->snapshot_name, sizeof ex->snapshot_name, "%s", PQgetvalue(res, 0, 2));
	PQclear(res);
	char l[LSN_FORMAT_LEN];
	log_info("%s slot \"%s\" created at consistent point %s, snapshot %s", temporary ? "temporary" : "replication",
		 slot, lsn_format(ex->consistent_lsn, l), ex->snapshot_name);
	return 0;
}

/* The slot of the flow exists already (an earlier --start-now capture or
 * check --fix --create-slot): a slot cannot export a snapshot after the
 * fact, so an unused one is dropped and created again. */
static int drop_stale_slot(PGconn *src, const char *slot)
{
	const char *p[1] = { slot };
	PGresult *res = pgconn_query(src, "SELECT active FROM pg_replication_slots WHERE slot_name = $1", 1, p);
	if (!res)
		return -1;
	int rc = 0;
	if (PQntuples(res) == 1) {
		if (strcmp(PQgetvalue(res, 0, 0), "t") == 0) {
			log_error("replication slot \"%s\" is in use (is trellara-capture running?); a snapshot needs to create it",
				  slot);
			log_hint("stop trellara-capture, then run the snapshot again");
			rc = -1;
		} else {
			log_warn("replication slot \"%s\" exists but has no snapshot run: dropping it to create it with an exported snapshot",
				 slot);
			PGresult *d = pgconn_query(src, "SELECT pg_drop_replication_slot($1)", 1, p);
			rc = d ? 0 : -1;
			PQclear(d);
		}
	}
	PQclear(res);
	return rc;
}

void snapshot_table_names(const struct flow_config *cfg, size_t i, char *buf, size_t len)
{
	snprintf(buf, len, "%s.%s", cfg->tables[i].schema, cfg->tables[i].name);
}

struct flow_ids snapshot_flow_ids(const struct flow_config *cfg)
{
	return (struct flow_ids){ cfg->source_id, cfg->dataset_id, cfg->consumer_group };
}

/* Which tables of the run are copied already. */
static int copied_tables(PGconn *conn, const struct flow_config *cfg, const char *run_id, bool *copied)
{
	struct flow_ids ids = snapshot_flow_ids(cfg);
	struct snapshot_progress *rows;
	int n;
	if (checkpoint_progress_list(conn, cfg->checkpoint_schema, &ids, run_id, &rows, &n) < 0)
		return -1;
	for (size_t i = 0; i < cfg->n_tables; i++) {
		char name[300];
		snapshot_table_names(cfg, i, name, sizeof name);
		copied[i] = false;
		for (int r = 0; r < n; r++)
			if (strcmp(rows[r].state, "copied") == 0 && strcmp(rows[r].relation, name) == 0)
				copied[i] = true;
	}
	free(rows);
	return 0;
}

static int record_schema_changed(PGconn *conn, const struct flow_config *cfg, const char *run_id, const char *relation)
{
	struct flow_ids ids = snapshot_flow_ids(cfg);
	return checkpoint_progress_schema_changed(conn, cfg->checkpoint_schema, &ids, run_id, relation);
}

/* Handoff: one immutable event per table, and stream_handoff_ready, in
 * one target transaction. */
static int hand_off(PGconn *conn, const struct flow_config *cfg, const char *run_id)
{
	if (pgconn_command(conn, "BEGIN") < 0)
		return -1;
	struct flow_ids ids = snapshot_flow_ids(cfg);
	if (checkpoint_handoff_record_run(conn, cfg->checkpoint_schema, &ids, run_id) < 0) {
		pgconn_command(conn, "ROLLBACK");
		return -1;
	}
	if (pgconn_command(conn, "COMMIT") < 0)
		return -1;
	return runs_move(conn, cfg->checkpoint_schema, cfg->source_id, cfg->dataset_id, run_id, RUN_STREAM_HANDOFF_READY,
			 NULL, 0, NULL, NULL, NULL, false) == 0
		       ? 0
		       : -1;
}

static int move(PGconn *conn, const struct flow_config *cfg, const char *run_id, enum run_state to, const char *slot,
		uint64_t lsn, const char *snapshot, const char *relation)
{
	return runs_move(conn, cfg->checkpoint_schema, cfg->source_id, cfg->dataset_id, run_id, to, slot, lsn, snapshot,
			 relation, NULL, false);
}

/* A run whose copy failed: failed_recoverable with its reason, durably,
 * before anything retries it (the run has its slot evidence by now).  The
 * next "trellara snapshot" resumes it: the tables not copied are copied
 * at a fresh snapshot, the copied ones are kept. */
static void record_failure(PGconn *conn, const struct flow_config *cfg, const char *run_id, const char *reason)
{
	char r[400];
	size_t n = strlen(reason);
	if (n >= sizeof r)
		snprintf(r, sizeof r, "%.*s...", (int)(sizeof r - 4), reason);
	else
		snprintf(r, sizeof r, "%s", reason);
	if (runs_move(conn, cfg->checkpoint_schema, cfg->source_id, cfg->dataset_id, run_id, RUN_FAILED_RECOVERABLE, NULL, 0,
		      NULL, NULL, r, false) != 0)
		log_warn("snapshot run \"%s\": its failure could not be recorded (the run stays in its state)", run_id);
}

/* A flow may list a partitioned table or its partitions, not both: the
 * parent's copy holds the partitions' rows, and its publication
 * (publish_via_partition_root) publishes their changes under its name.
 * 0 fine, 1 both listed (logged), -1 on error. */
static int partition_listed_twice(PGconn *src, const struct flow_config *cfg)
{
	int rc = 0;
	for (size_t i = 0; i < cfg->n_tables && rc == 0; i++) {
		char *qs = pgconn_quote_ident(src, cfg->tables[i].schema), *qn = pgconn_quote_ident(src, cfg->tables[i].name);
		char *qualified = xasprintf("%s.%s", qs, qn);
		const char *p[1] = { qualified };
		PGresult *res = pgconn_query(src,
					     "SELECT n.nspname, c.relname FROM pg_partition_ancestors(to_regclass($1)) a"
					     " JOIN pg_class c ON c.oid = a.relid JOIN pg_namespace n ON n.oid = c.relnamespace"
					     " WHERE a.relid <> to_regclass($1)",
					     1, p);
		free(qualified);
		free(qs);
		free(qn);
		if (!res)
			return -1;
		for (int r = 0; r < PQntuples(res) && rc == 0; r++)
			for (size_t k = 0; k < cfg->n_tables; k++)
				if (strcmp(cfg->tables[k].schema, PQgetvalue(res, r, 0)) == 0 &&
				    strcmp(cfg->tables[k].name, PQgetvalue(res, r, 1)) == 0) {
					log_error("%s.%s is a partition of %s.%s, which dataset.tables lists as well: the parent's copy"
						  " holds its rows and the publication publishes its changes under the parent's name",
						  cfg->tables[i].schema, cfg->tables[i].name, cfg->tables[k].schema, cfg->tables[k].name);
					log_hint("remove %s.%s from dataset.tables of %s", cfg->tables[i].schema, cfg->tables[i].name,
						 cfg->path);
					rc = 1;
					break;
				}
		PQclear(res);
	}
	return rc;
}

/* Held for as long as dst stays open: the lock trellara-applyd holds
 * while it applies this flow and group (its connect_target).  A copy
 * made while applyd applies would be overwritten by the older changes
 * it still has to apply with the old watermarks; applyd started during
 * the copy refuses to start (exit 75).  0 held, 1 applyd holds it
 * (logged), -1 on error. */
static int hold_off_applyd(PGconn *dst, const struct flow_config *cfg)
{
	char *flow = config_flow_id(cfg);
	char *key = xasprintf("trellara.applyd.%s.%s", flow, cfg->consumer_group);
	const char *p[1] = { key };
	PGresult *res = pgconn_query(dst, "SELECT pg_try_advisory_lock(hashtext($1))", 1, p);
	free(key);
	int rc = -1;
	if (res) {
		rc = strcmp(PQgetvalue(res, 0, 0), "t") == 0 ? 0 : 1;
		if (rc) {
			log_error("trellara-applyd is applying flow \"%s\" group \"%s\" to this target: a copy now would be overwritten"
				  " by the older changes it still applies",
				  flow, cfg->consumer_group);
			log_hint("stop trellara-applyd, run the snapshot again, then start applyd: it applies from the new watermarks");
		}
	}
	PQclear(res);
	free(flow);
	return rc;
}

/* Each flow sequence's target set from the source (margin 0), one line
 * each: 0, -1 or SEQUENCES_CONFIG (logged). */
static int sync_sequences(PGconn *src, PGconn *dst, struct flow_sequences *seqs)
{
	if (sequences_read(src, dst, seqs) < 0)
		return -1;
	int rc = sequences_sync(dst, seqs, 0);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < seqs->n; i++)
		sequences_print_synced(stdout, &seqs->items[i]);
	return rc;
}

/* Which flow tables get keys and indexes (keys[i]: created by this run,
 * or no index on the target and some on the source) and foreign keys
 * (fkeys[i]: those, or none on the target and some on the source), and
 * the source's definitions of them.  created[] is updated; NULL on an
 * error (logged). */
static struct snapshot_post_data *plan_post_data(PGconn *src, PGconn *dst, const struct flow_config *cfg, bool *created)
{
	bool *fkeys = xcalloc(cfg->n_tables ? cfg->n_tables : 1, sizeof *fkeys);
	for (size_t i = 0; i < cfg->n_tables; i++) {
		char *qs = pgconn_quote_ident(dst, cfg->tables[i].schema), *qn = pgconn_quote_ident(dst, cfg->tables[i].name);
		char *qualified = xasprintf("%s.%s", qs, qn);
		const char *p[1] = { qualified };
		static const char count_sql[] =
			"SELECT (SELECT count(*) FROM pg_index WHERE indrelid = to_regclass($1)),"
			" (SELECT count(*) FROM pg_constraint WHERE conrelid = to_regclass($1) AND contype = 'f')";
		PGresult *rt = pgconn_query(dst, count_sql, 1, p);
		PGresult *rs = pgconn_query(src, count_sql, 1, p);
		bool counted = rt && rs;
		if (!created[i])
			created[i] = counted && atoi(PQgetvalue(rt, 0, 0)) == 0 && atoi(PQgetvalue(rs, 0, 0)) > 0;
		fkeys[i] = created[i] || (counted && atoi(PQgetvalue(rt, 0, 1)) == 0 && atoi(PQgetvalue(rs, 0, 1)) > 0);
		PQclear(rt);
		PQclear(rs);
		free(qualified);
		free(qs);
		free(qn);
	}
	struct snapshot_post_data *post = snapshot_post_data_plan(src, cfg, created, fkeys);
	free(fkeys);
	return post;
}

/* copy_job.after_table: the copied table's keys and indexes */
struct after_copy {
	struct snapshot_post_data *post;
	const size_t *flow_index;
};

static int build_after_copy(void *ctx, size_t table, void *dst_pgconn)
{
	struct after_copy *a = ctx;
	return snapshot_post_data_build(a->post, a->flow_index[table], dst_pgconn);
}

int snapshot_run(const struct snapshot_options *o)
{
	const struct flow_config *cfg = o->cfg;
	const char *run_id = o->run_id ? o->run_id : DEFAULT_RUN_ID;
	int code = EXIT_UNAVAILABLE;
	struct exported ex = { 0 };
	bool *copied = xcalloc(cfg->n_tables ? cfg->n_tables : 1, sizeof *copied);
	bool *created = xcalloc(cfg->n_tables ? cfg->n_tables : 1, sizeof *created);
	struct copy_table *tables = xcalloc(cfg->n_tables ? cfg->n_tables : 1, sizeof *tables);
	size_t *flow_index = xcalloc(cfg->n_tables ? cfg->n_tables : 1, sizeof *flow_index); /* tables[k] is flow table flow_index[k] */
	struct snapshot_post_data *post = NULL;
	struct after_copy after = { .flow_index = flow_index };
	struct flow_sequences seqs = { 0 };
	PGconn *dst = pgconn_connect(cfg->target_database_url, PGCONN_NORMAL, "trellara-snapshot", "target");
	PGconn *src = pgconn_connect(cfg->source_database_url, PGCONN_NORMAL, "trellara-snapshot", "source");
	if (!dst || !src || checkpoint_migrate(dst, cfg->checkpoint_schema) < 0)
		goto out;
	struct run_row run;
	if (runs_load(dst, cfg->checkpoint_schema, cfg->source_id, cfg->dataset_id, run_id, &run) < 0)
		goto out;
	if (run.exists && run.state >= RUN_STREAM_HANDOFF_READY && run.state != RUN_FAILED_RECOVERABLE && !o->force) {
		printf("snapshot run \"%s\" is %s: every table was copied and handed off; nothing to do\n", run_id,
		       run_state_name(run.state));
		if (copied_tables(dst, cfg, run_id, copied) == 0)
			for (size_t i = 0; i < cfg->n_tables; i++)
				printf("skipped %s.%s: copied already\n", cfg->tables[i].schema, cfg->tables[i].name);
		code = EXIT_OK;
		goto out;
	}
	/* nothing is changed before these two hold */
	int held = partition_listed_twice(src, cfg);
	if (held) {
		code = held > 0 ? EXIT_CONFIG : EXIT_UNAVAILABLE;
		goto out;
	}
	if ((held = hold_off_applyd(dst, cfg)) != 0) {
		code = held > 0 ? EXIT_TEMPFAIL : EXIT_UNAVAILABLE;
		goto out;
	}
	if (run.exists && o->force && run.state != RUN_PLANNED) {
		/* a forced re-copy: the old evidence stays, the run starts over */
		if (runs_move(dst, cfg->checkpoint_schema, cfg->source_id, cfg->dataset_id, run_id, RUN_FAILED_RECOVERABLE, NULL,
			      0, NULL, NULL, "re-copy forced by the operator (--force)", true) != 0) {
			code = EXIT_NEGATIVE;
			goto out;
		}
		struct flow_ids ids = snapshot_flow_ids(cfg);
		checkpoint_progress_clear(dst, cfg->checkpoint_schema, &ids, run_id);
		if (move(dst, cfg, run_id, RUN_PLANNED, NULL, 0, NULL, NULL) != 0)
			goto out;
		run.state = RUN_PLANNED;
		run.consistent_lsn = 0;
		log_info("snapshot run \"%s\": --force: copying every table again", run_id);
	}
	if (!run.exists) {
		if (runs_insert(dst, cfg->checkpoint_schema, cfg->source_id, cfg->dataset_id, run_id) < 0)
			goto out;
		run.state = RUN_PLANNED;
	}
	if (o->create_tables && snapshot_create_missing_tables(src, dst, cfg, "pre-data", true, created) < 0) {
		code = EXIT_CONFIG;
		goto out;
	}
	/* the flow's sequences, before anything is copied: a listed one
	 * missing on a side stops the run here */
	if ((held = sequences_resolve(src, dst, cfg, &seqs)) != 0) {
		code = held == SEQUENCES_CONFIG ? EXIT_CONFIG : EXIT_UNAVAILABLE;
		goto out;
	}
	uint64_t watermark;
	if (run.state == RUN_PLANNED || (run.state == RUN_FAILED_RECOVERABLE && !run.consistent_lsn) || o->force) {
		/* 1. the slot with an exported snapshot, kept open while copying */
		if (drop_stale_slot(src, cfg->slot) < 0)
			goto out;
		if (export_snapshot(cfg, cfg->slot, false, &ex) < 0)
			goto out;
		fault_point("snapshot.after_slot_before_record");
		/* 2. slot and consistent point recorded before anything is copied */
		if (move(dst, cfg, run_id, RUN_SLOT_CREATED, cfg->slot, ex.consistent_lsn, ex.snapshot_name, NULL) != 0 ||
		    move(dst, cfg, run_id, RUN_SNAPSHOT_EXPORTED, NULL, 0, NULL, NULL) != 0)
			goto out;
		watermark = ex.consistent_lsn;
	} else {
		/* Resume: the exporting session of the run is gone with the
		 * process that held it; the tables still to copy are copied at a
		 * fresh snapshot (a temporary slot) and get its consistent point
		 * as their own watermark. */
		char tmp_slot[64];
		snprintf(tmp_slot, sizeof tmp_slot, "trellara_tmp_%ld", (long)getpid());
		if (export_snapshot(cfg, tmp_slot, true, &ex) < 0)
			goto out;
		char l1[LSN_FORMAT_LEN], l2[LSN_FORMAT_LEN];
		log_info("snapshot run \"%s\" resumes (state %s, slot consistent point %s): remaining tables are copied at %s",
			 run_id, run_state_name(run.state), lsn_format(run.consistent_lsn, l1), lsn_format(ex.consistent_lsn, l2));
		if (run.state < RUN_SNAPSHOT_EXPORTED || run.state == RUN_FAILED_RECOVERABLE) {
			enum run_state restart = run.state == RUN_FAILED_RECOVERABLE ? RUN_SNAPSHOT_EXPORTED : RUN_SNAPSHOT_EXPORTED;
			if (move(dst, cfg, run_id, restart, NULL, 0, NULL, NULL) != 0)
				goto out;
		}
		watermark = ex.consistent_lsn;
	}
	fault_point("snapshot.after_export_before_copy");
	/* 3. copy what is not copied yet */
	if (copied_tables(dst, cfg, run_id, copied) < 0)
		goto out;
	size_t n = 0;
	for (size_t i = 0; i < cfg->n_tables; i++) {
		if (copied[i]) {
			printf("skipped %s.%s: copied already\n", cfg->tables[i].schema, cfg->tables[i].name);
			continue;
		}
		tables[n].schema = cfg->tables[i].schema;
		tables[n].name = cfg->tables[i].name;
		flow_index[n] = i;
		n++;
	}
	/* indexes and constraints after the data: for the tables this run
	 * created, and for those a killed earlier invocation created without
	 * them (no index on the target, some on the source); the foreign keys
	 * likewise (none on the target, some on the source).  Each table's
	 * keys are built by the copy worker that finished its data, while
	 * the others copy on; the foreign keys after all of them. */
	if (o->create_tables && !(post = plan_post_data(src, dst, cfg, created))) {
		code = EXIT_CONFIG;
		goto out;
	}
	after.post = post;
	if (n > 0) {
		char first[300];
		snprintf(first, sizeof first, "%s.%s", tables[0].schema, tables[0].name);
		if (move(dst, cfg, run_id, RUN_COPYING_TABLE, NULL, 0, NULL, first) != 0)
			goto out;
		struct copy_job job = {
			.cfg = cfg, .run_id = run_id, .snapshot_name = ex.snapshot_name, .watermark_lsn = watermark,
			.tables = tables, .n_tables = n, .workers = (unsigned)cfg->snapshot_workers,
			.split_bytes = cfg->snapshot_split_bytes,
			.after_table = post ? build_after_copy : NULL, .after_ctx = &after,
		};
		/* which tables are split, and what an earlier invocation's ranges
		 * still hold, before anything is emptied */
		if (copy_plan_splits(&job, dst) < 0) {
			record_failure(dst, cfg, run_id, "the split of the tables could not be planned");
			code = EXIT_TEMPFAIL;
			goto out;
		}
		/* the tables to copy, emptied together: foreign keys among them
		 * do not stop it (a split table whose ranges are kept is not) */
		int emptied = copy_empty_targets(cfg, dst, tables, n);
		if (emptied) {
			record_failure(dst, cfg, run_id, "the target tables could not be emptied before the copy");
			code = emptied > 0 ? EXIT_CONFIG : EXIT_TEMPFAIL;
			goto out;
		}
		if (copy_tables(&job) < 0) {
			record_failure(dst, cfg, run_id, "the copy workers could not start");
			goto out;
		}
	}
	/* the snapshot is no longer needed */
	PQfinish(ex.repl);
	ex.repl = NULL;
	int failed = 0, changed = 0;
	struct strbuf why = STRBUF_INIT;
	for (size_t i = 0; i < n; i++) {
		if (tables[i].outcome == COPY_DONE) {
			if (tables[i].ranges)
				printf("copied %s.%s: %" PRIu64 " rows in %d ranges (%d copied now, %d kept)\n", tables[i].schema,
				       tables[i].name, tables[i].rows, tables[i].n_ranges, tables[i].ranges_copied, tables[i].ranges_kept);
			else
				printf("copied %s.%s: %" PRIu64 " rows\n", tables[i].schema, tables[i].name, tables[i].rows);
			continue;
		}
		char relation[300];
		snprintf(relation, sizeof relation, "%s.%s", tables[i].schema, tables[i].name);
		if (tables[i].outcome == COPY_SCHEMA_CHANGED) {
			changed++;
			record_schema_changed(dst, cfg, run_id, relation);
			printf("NOT handed off %s: its schema changed during the copy; apply the change to the target table and run the snapshot again\n",
			       relation);
			strbuf_addf(&why, "%s%s: its schema changed during the copy", why.len ? "; " : "", relation);
		} else {
			failed++;
			printf("FAILED %s: %s\n", relation, tables[i].error);
			strbuf_addf(&why, "%s%s: %s", why.len ? "; " : "", relation, tables[i].error);
		}
	}
	char *reason = strbuf_detach(&why, NULL);
	if (failed || changed)
		record_failure(dst, cfg, run_id, reason);
	free(reason);
	if (failed || changed) {
		log_error("snapshot run \"%s\": %d tables failed, %d changed schema during their copy: no handoff", run_id, failed,
			  changed);
		char *config = strbuf_shell_quote(cfg->path);
		log_hint("fix what is named above, then run \"trellara snapshot --config %s\" again: copied tables are kept",
			 config);
		free(config);
		code = failed ? EXIT_TEMPFAIL : EXIT_NEGATIVE;
		goto out;
	}
	/* the foreign keys after every table's data and keys (and the keys
	 * of tables no worker built: copied by an earlier invocation) */
	if (post && snapshot_post_data_finish(post, dst) < 0) {
		code = EXIT_CONFIG;
		goto out;
	}
	/* the sequences after the data: read now, not at the snapshot (they
	 * are not transactional), each is at least where the copied rows
	 * need it; a target ahead stays */
	if ((held = sync_sequences(src, dst, &seqs)) != 0) {
		code = held == SEQUENCES_CONFIG ? EXIT_CONFIG : EXIT_UNAVAILABLE;
		goto out;
	}
	if (move(dst, cfg, run_id, RUN_COPY_COMPLETE, NULL, 0, NULL, NULL) != 0)
		goto out;
	fault_point("snapshot.after_copy_before_handoff");
	if (hand_off(dst, cfg, run_id) < 0)
		goto out;
	fault_point("snapshot.after_handoff_before_stream");
	char l[LSN_FORMAT_LEN];
	printf("snapshot run \"%s\" is stream_handoff_ready: slot \"%s\", consistent point %s\n", run_id, cfg->slot,
	       lsn_format(run.consistent_lsn ? run.consistent_lsn : watermark, l));
	char *config = strbuf_shell_quote(cfg->path);
	printf("next: trellara capture --config %s; trellara applyd --config %s\n", config, config);
	free(config);
	code = EXIT_OK;
out:
	if (ex.repl)
		PQfinish(ex.repl);
	PQfinish(dst);
	PQfinish(src);
	free(copied);
	free(created);
	copy_tables_release(tables, cfg->n_tables);
	free(tables);
	free(flow_index);
	snapshot_post_data_free(post);
	sequences_free(&seqs);
	return code;
}

/* ---- reseed ---- */

/* The state of the flow's fence, "" when none is set. */
static int fence_state(PGconn *dst, const struct flow_config *cfg, char *state, size_t len)
{
	struct flow_ids ids = snapshot_flow_ids(cfg);
	bool present;
	uint64_t fence_lsn;
	if (checkpoint_fence_get(dst, cfg->checkpoint_schema, &ids, &present, &fence_lsn, state, len) < 0)
		return -1;
	if (!present)
		snprintf(state, len, "%s", "");
	return 0;
}

static void fence_release(PGconn *dst, const struct flow_config *cfg)
{
	struct flow_ids ids = snapshot_flow_ids(cfg);
	checkpoint_fence_release(dst, cfg->checkpoint_schema, &ids, NULL);
}

int snapshot_reseed(const struct snapshot_options *o)
{
	const struct flow_config *cfg = o->cfg;
	size_t which = cfg->n_tables;
	for (size_t i = 0; i < cfg->n_tables; i++) {
		char name[300];
		snapshot_table_names(cfg, i, name, sizeof name);
		if (strcmp(name, o->table) == 0)
			which = i;
	}
	if (which == cfg->n_tables) {
		log_error("table \"%s\" is not in dataset.tables of %s", o->table, cfg->path);
		return EXIT_USAGE;
	}
	int code = EXIT_UNAVAILABLE;
	struct exported ex = { 0 };
	bool fenced = false;
	PGconn *dst = pgconn_connect(cfg->target_database_url, PGCONN_NORMAL, "trellara-reseed", "target");
	if (!dst || checkpoint_migrate(dst, cfg->checkpoint_schema) < 0)
		goto out;
	struct run_row run;
	if (runs_load(dst, cfg->checkpoint_schema, cfg->source_id, cfg->dataset_id, NULL, &run) < 0)
		goto out;
	if (!run.exists) {
		log_error("flow %s:%s has no snapshot run to reseed a table of", cfg->source_id, cfg->dataset_id);
		char *config = strbuf_shell_quote(cfg->path);
		log_hint("run \"trellara snapshot --config %s\" first", config);
		free(config);
		code = EXIT_NEGATIVE;
		goto out;
	}
	/* 1. applyd holds at once: everything it applied is before the copy's
	 * snapshot, and nothing after the snapshot reaches the table before
	 * its new watermark is in place */
	struct flow_ids ids = snapshot_flow_ids(cfg);
	bool mine;
	if (checkpoint_fence_request(dst, cfg->checkpoint_schema, &ids, 0, "reseed", &mine) < 0)
		goto out;
	if (!mine) {
		log_error("a fence is already set for flow %s:%s (a verify or another reseed is running)", cfg->source_id,
			  cfg->dataset_id);
		code = EXIT_TEMPFAIL;
		goto out;
	}
	fenced = true;
	char state[32] = "";
	for (int waited = 0; waited < 600; waited++) {
		if (fence_state(dst, cfg, state, sizeof state) < 0)
			goto out;
		if (strcmp(state, "held") == 0)
			break;
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	if (strcmp(state, "held") != 0) {
		log_error("trellara-applyd did not hold at the fence within 60 s: is it running?");
		code = EXIT_TEMPFAIL;
		goto out;
	}
	log_info("applyd holds; copying %s at a fresh snapshot", o->table);
	/* 2. a fresh snapshot, the table copied at it, its watermark set */
	char tmp_slot[64];
	snprintf(tmp_slot, sizeof tmp_slot, "trellara_tmp_%ld", (long)getpid());
	if (export_snapshot(cfg, tmp_slot, true, &ex) < 0)
		goto out;
	struct copy_table t = { .schema = cfg->tables[which].schema, .name = cfg->tables[which].name };
	struct copy_job job = { .cfg = cfg, .run_id = run.run_id, .snapshot_name = ex.snapshot_name,
				.watermark_lsn = ex.consistent_lsn, .tables = &t, .n_tables = 1, .workers = 1 };
	if (copy_tables(&job) < 0 || t.outcome != COPY_DONE) {
		log_error("reseed of %s failed: %s", o->table, t.error);
		code = t.outcome == COPY_SCHEMA_CHANGED ? EXIT_NEGATIVE : EXIT_TEMPFAIL;
		goto out;
	}
	char l[LSN_FORMAT_LEN];
	printf("reseeded %s: %" PRIu64 " rows at %s; applyd applies its changes from there on\n", o->table, t.rows,
	       lsn_format(ex.consistent_lsn, l));
	/* the new copy is handed off like the first: evidence, and a run that
	 * a divergence had failed walks forward again */
	if (run.state == RUN_FAILED_RECOVERABLE &&
	    (move(dst, cfg, run.run_id, RUN_COPYING_TABLE, NULL, 0, NULL, o->table) != 0 ||
	     move(dst, cfg, run.run_id, RUN_COPY_COMPLETE, NULL, 0, NULL, NULL) != 0))
		goto out;
	if (run.state == RUN_FAILED_RECOVERABLE || run.state < RUN_STREAM_HANDOFF_READY) {
		if (hand_off(dst, cfg, run.run_id) < 0)
			goto out;
		if (run.state == RUN_FAILED_RECOVERABLE &&
		    move(dst, cfg, run.run_id, RUN_STREAMING, NULL, 0, NULL, NULL) != 0)
			goto out;
	} else {
		if (checkpoint_handoff_record_table(dst, cfg->checkpoint_schema, &ids, run.run_id, o->table) < 0)
			goto out;
	}
	code = EXIT_OK;
out:
	/* 3. released on every path */
	if (fenced)
		fence_release(dst, cfg);
	if (ex.repl)
		PQfinish(ex.repl);
	PQfinish(dst);
	return code;
}
