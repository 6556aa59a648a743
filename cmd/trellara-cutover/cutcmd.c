/*
 * cutcmd.c - trellara cutover (cutcmd.h): observe, ask cutplan_next(),
 * act, record, again.
 */
#include "cutcmd.h"

#include "../trellara-verify/verify.h"

#include "trellara/checkpoint.h"
#include "trellara/clock.h"
#include "trellara/conninfo.h"
#include "trellara/cutover.h"
#include "trellara/cutplan.h"
#include "trellara/defaults.h"
#include "trellara/fault.h"
#include "trellara/jsonw.h"
#include "trellara/fsutil.h"
#include "trellara/log.h"
#include "trellara/lsn.h"
#include "trellara/pgconn.h"
#include "trellara/sequences.h"
#include "trellara/strbuf.h"
#include "trellara/xalloc.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define APP "trellara-cutover"

struct cut {
	const struct cutcmd_options *o;
	const struct flow_config *cfg;
	struct flow_ids ids;
	PGconn *src, *dst;
	char *qconfig; /* owned: the flow path as one shell word */
	struct cutover_row row;
	/* the supervisor's state file, as last read */
	long supervisor_pid, capture_pid, applyd_pid;
};

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* ---- the flow's processes (the supervisor's state file) ---- */


/* Reads supervisor.state into c and f. */
static void read_state_file(struct cut *c, struct cutplan_flow *f)
{
	c->supervisor_pid = c->capture_pid = c->applyd_pid = 0;
	f->metrics_dir_set = c->cfg->metrics_dir != NULL;
	if (!f->metrics_dir_set)
		return;
	char path[4096];
	snprintf(path, sizeof path, "%s/supervisor.state", c->cfg->metrics_dir);
	FILE *file = fopen(path, "r");
	if (!file)
		return;
	f->state_file = true;
	char line[512];
	while (fgets(line, sizeof line, file)) {
		line[strcspn(line, "\n")] = '\0';
		char *eq = strchr(line, '=');
		if (!eq)
			continue;
		*eq = '\0';
		const char *value = eq + 1;
		if (strcmp(line, "supervisor_pid") == 0)
			c->supervisor_pid = strtol(value, NULL, 10);
		else if (strcmp(line, "capture_pid") == 0)
			c->capture_pid = strtol(value, NULL, 10);
		else if (strcmp(line, "applyd_pid") == 0)
			c->applyd_pid = strtol(value, NULL, 10);
		else if (strcmp(line, "state") == 0)
			f->supervisor_running = strcmp(value, "running") == 0;
	}
	fclose(file);
	f->supervisor_alive = fs_process_runs(c->supervisor_pid, "trellara-run");
	f->capture_alive = fs_process_runs(c->capture_pid, "trellara-capture");
	f->applyd_alive = fs_process_runs(c->applyd_pid, "trellara-applyd");
}

/* Where the flow stands: CUT_BLOCKER_NONE when it streams; -1 when the
 * source cannot be asked about the slot. */
static int observe_flow(struct cut *c, enum cutplan_blocker *blocker)
{
	struct cutplan_flow f = { 0 };
	read_state_file(c, &f);
	const char *p[1] = { c->cfg->slot };
	PGresult *res = pgconn_query(c->src, "SELECT coalesce((SELECT active FROM pg_replication_slots WHERE slot_name = $1), false)",
				     1, p);
	if (!res)
		return -1;
	f.slot_active = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	*blocker = cutplan_streaming(&f);
	return 0;
}

static void hint_blocker(const struct cut *c, enum cutplan_blocker b)
{
	switch (b) {
	case CUT_BLOCKER_NO_METRICS_DIR:
		log_hint("set observability.metrics_dir in %s (or TRELLARA_STATE_DIR), then run \"trellara run --config %s\"", c->cfg->path,
			 c->qconfig);
		break;
	case CUT_BLOCKER_NO_SUPERVISOR: log_hint("start the flow: \"trellara run --config %s\"", c->qconfig); break;
	default:
		log_hint("\"trellara status --config %s\" shows why; run the cutover again once the flow streams", c->qconfig);
		break;
	}
}

/* ---- the source's lock ---- */

/* The database's own default_transaction_read_only (role-independent),
 * or *has false. */
static int read_previous_setting(struct cut *c, const char *database, bool *has, char *value, size_t len)
{
	const char *p[1] = { database };
	PGresult *res = pgconn_query(c->src,
				     "SELECT substr(s, length('default_transaction_read_only=') + 1)"
				     " FROM pg_db_role_setting d JOIN pg_database b ON b.oid = d.setdatabase,"
				     " unnest(d.setconfig) s"
				     " WHERE b.datname = $1 AND d.setrole = 0 AND s LIKE 'default_transaction_read_only=%'",
				     1, p);
	if (!res)
		return -1;
	*has = PQntuples(res) == 1;
	snprintf(value, len, "%s", *has ? PQgetvalue(res, 0, 0) : "");
	PQclear(res);
	return 0;
}

/* ALTER DATABASE ... SET default_transaction_read_only = value, or RESET
 * (value NULL).  The name is the catalog's, quoted. */
static int set_read_only(struct cut *c, const char *database, const char *value)
{
	char *db = pgconn_quote_ident(c->src, database);
	char *sql;
	if (value) {
		char *lit = PQescapeLiteral(c->src, value, strlen(value));
		sql = xasprintf("ALTER DATABASE %s SET default_transaction_read_only = %s", db, lit ? lit : "on");
		PQfreemem(lit);
	} else {
		sql = xasprintf("ALTER DATABASE %s RESET default_transaction_read_only", db);
	}
	int rc = pgconn_command(c->src, sql);
	free(sql);
	free(db);
	return rc;
}

/* Undoes the lock as the row records it; the row says released after.
 * Before the ALTER, a held lock is recorded as requested (it may be in
 * place): a kill between the two leaves a row that neither claims the
 * lock nor lets a resumed cutover go on without it (cutplan_next() locks
 * again). */
static int unlock_source(struct cut *c)
{
	const char *db = c->row.source_database;
	if (c->row.source_lock == CUT_LOCK_HELD) {
		struct cutover_change ch = { .source_lock = cutplan_lock_name(CUT_LOCK_REQUESTED) };
		if (cutover_update(c->dst, c->cfg->checkpoint_schema, c->cfg->source_id, c->cfg->dataset_id, &ch) < 0)
			return -1;
		c->row.source_lock = CUT_LOCK_REQUESTED;
	}
	if (!*db) {
		/* killed before the database was recorded: nothing was altered */
		struct cutover_change ch = { .source_lock = cutplan_lock_name(CUT_LOCK_RELEASED) };
		return cutover_update(c->dst, c->cfg->checkpoint_schema, c->cfg->source_id, c->cfg->dataset_id, &ch);
	}
	if (set_read_only(c, db, c->row.has_previous_read_only ? c->row.previous_read_only : NULL) < 0) {
		log_error("the source database \"%s\" could not be unlocked: it stays read-only for new transactions", db);
		log_hint("run \"trellara cutover --config %s --abort\" once the source is reachable", c->qconfig);
		return -1;
	}
	struct cutover_change ch = { .source_lock = cutplan_lock_name(CUT_LOCK_RELEASED) };
	if (cutover_update(c->dst, c->cfg->checkpoint_schema, c->cfg->source_id, c->cfg->dataset_id, &ch) < 0)
		return -1;
	printf("source database \"%s\" unlocked: default_transaction_read_only %s%s%s (sessions opened while it was locked keep read-only until they reconnect)\n",
	       db, c->row.has_previous_read_only ? "back to \"" : "reset", c->row.has_previous_read_only ? c->row.previous_read_only : "",
	       c->row.has_previous_read_only ? "\"" : "");
	fflush(stdout);
	c->row.source_lock = CUT_LOCK_RELEASED;
	return 0;
}

/* Ends the database's client sessions that began before locked_at (every
 * one that may still default to read-write), except ours and Trellara's
 * own, and waits until they are gone: their open transactions roll back
 * (never committed, so never captured).  Returns 0, or an exit code. */
static int end_sessions(struct cut *c, const char *database, const char *locked_at, long *ended)
{
	static const char filter[] = " FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()"
				     " AND backend_type = 'client backend' AND backend_start < $2::timestamptz"
				     " AND coalesce(application_name, '') NOT LIKE 'trellara-%'";
	const char *p[2] = { database, locked_at };
	char *sql = xasprintf("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))%s", filter);
	PGresult *res = pgconn_query(c->src, sql, 2, p);
	free(sql);
	if (!res)
		return EXIT_UNAVAILABLE;
	*ended = strtol(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	sql = xasprintf("SELECT count(*)%s", filter);
	int code = EXIT_TEMPFAIL;
	for (int64_t start = clock_mono_us();;) {
		res = pgconn_query(c->src, sql, 2, p);
		if (!res) {
			code = EXIT_UNAVAILABLE;
			break;
		}
		long left = strtol(PQgetvalue(res, 0, 0), NULL, 10);
		PQclear(res);
		if (left == 0) {
			code = 0;
			break;
		}
		if (clock_mono_us() - start >= (int64_t)CUTCMD_SESSION_END_TIMEOUT_S * 1000000) {
			log_error("%ld sessions of the source database \"%s\" are still there %d s after they were terminated", left,
				  database, CUTCMD_SESSION_END_TIMEOUT_S);
			break;
		}
		sleep_ms(100);
	}
	free(sql);
	return code;
}

static int do_lock(struct cut *c)
{
	const char *schema = c->cfg->checkpoint_schema;
	char database[128];
	PGresult *res = pgconn_query(c->src, "SELECT current_database()", 0, NULL);
	if (!res)
		return EXIT_UNAVAILABLE;
	snprintf(database, sizeof database, "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	/* a prepared transaction commits later, from any session: refuse */
	const char *p[1] = { database };
	res = pgconn_query(c->src, "SELECT count(*) FROM pg_prepared_xacts WHERE database = $1", 1, p);
	if (!res)
		return EXIT_UNAVAILABLE;
	long prepared = strtol(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	if (prepared > 0) {
		log_error("the source database \"%s\" has %ld prepared transactions: they could commit after the lock", database,
			  prepared);
		log_hint("COMMIT PREPARED or ROLLBACK PREPARED them (pg_prepared_xacts lists them), then run the cutover again");
		return EXIT_NEGATIVE;
	}
	if (!cutplan_lock_in_place(c->row.source_lock)) {
		/* the intent first, with what to restore: a kill after the
		 * ALTER leaves a row that says the lock may be in place */
		bool has = false;
		char previous[64];
		if (read_previous_setting(c, database, &has, previous, sizeof previous) < 0)
			return EXIT_UNAVAILABLE;
		struct cutover_change ch = { .state = cutplan_state_name(CUT_LOCKING),
					     .source_lock = cutplan_lock_name(CUT_LOCK_REQUESTED),
					     .source_database = database,
					     .set_previous_read_only = true,
					     .previous_read_only = has ? previous : NULL };
		if (cutover_update(c->dst, schema, c->cfg->source_id, c->cfg->dataset_id, &ch) < 0)
			return EXIT_UNAVAILABLE;
	} else if (c->row.state != CUT_LOCKING) {
		struct cutover_change ch = { .state = cutplan_state_name(CUT_LOCKING) };
		if (cutover_update(c->dst, schema, c->cfg->source_id, c->cfg->dataset_id, &ch) < 0)
			return EXIT_UNAVAILABLE;
	}
	if (*c->row.source_database)
		snprintf(database, sizeof database, "%s", c->row.source_database);
	if (set_read_only(c, database, "on") < 0)
		return EXIT_UNAVAILABLE;
	/* every session that starts from now on reads the new default */
	res = pgconn_query(c->src, "SELECT clock_timestamp()", 0, NULL);
	if (!res)
		return EXIT_UNAVAILABLE;
	char locked_at[64];
	snprintf(locked_at, sizeof locked_at, "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	long ended = 0;
	int code = end_sessions(c, database, locked_at, &ended);
	if (code)
		return code;
	struct cutover_change ch = { .state = cutplan_state_name(CUT_LOCKED), .source_lock = cutplan_lock_name(CUT_LOCK_HELD) };
	if (cutover_update(c->dst, schema, c->cfg->source_id, c->cfg->dataset_id, &ch) < 0)
		return EXIT_UNAVAILABLE;
	printf("source database \"%s\" locked: new transactions are read-only; %ld sessions ended (their open transactions rolled back)\n",
	       database, ended);
	fflush(stdout);
	fault_point("cutover.after_lock");
	return 0;
}

/* ---- the wait for applyd ---- */

static int do_wait_apply(struct cut *c)
{
	const char *schema = c->cfg->checkpoint_schema;
	PGresult *res = pgconn_query(c->src, "SELECT pg_current_wal_lsn()", 0, NULL);
	uint64_t final_lsn = 0;
	if (!res)
		return EXIT_UNAVAILABLE;
	bool parsed = lsn_parse(PQgetvalue(res, 0, 0), &final_lsn);
	PQclear(res);
	if (!parsed) {
		log_error("the source's WAL position could not be read");
		return EXIT_UNAVAILABLE;
	}
	/* An idle source may leave the WAL up to here unflushed, and
	 * walsenders only send flushed WAL: one committed transaction flushes
	 * it (verify does the same at its fence). */
	res = pgconn_query(c->src, "SELECT pg_current_xact_id()", 0, NULL);
	if (!res)
		return EXIT_UNAVAILABLE;
	PQclear(res);
	struct cutover_change ch = { .set_final_lsn = true, .final_lsn = final_lsn };
	if (cutover_update(c->dst, schema, c->cfg->source_id, c->cfg->dataset_id, &ch) < 0)
		return EXIT_UNAVAILABLE;
	char fl[LSN_FORMAT_LEN], al[LSN_FORMAT_LEN];
	lsn_format(final_lsn, fl);
	printf("final LSN %s%s: waiting for applyd to apply through it (at most %d s)\n", fl,
	       c->row.lock_source ? " (read after the lock)" : "", c->o->apply_timeout_s);
	fflush(stdout);
	int64_t start = clock_mono_us(), last_line = 0;
	for (;;) {
		fault_point("cutover.wait_apply");
		if (*c->o->stop) {
			log_error("stopped by a signal while waiting for applyd");
			return EXIT_TEMPFAIL;
		}
		struct checkpoint_observed cp;
		char error[512];
		if (checkpoint_observe(c->dst, schema, &c->ids, &cp, error, sizeof error) < 0) {
			log_error("%s", error);
			return EXIT_UNAVAILABLE;
		}
		enum cutplan_blocker blocker;
		if (observe_flow(c, &blocker) < 0)
			return EXIT_UNAVAILABLE;
		uint64_t applied = cp.exists ? cp.cp.applied_through_lsn : 0;
		double waited = (double)(clock_mono_us() - start) / 1e6;
		enum cutplan_wait w = cutplan_wait_step(applied, final_lsn, waited, c->o->apply_timeout_s, blocker);
		lsn_format(applied, al);
		if (w == CUT_WAIT_CAUGHT_UP) {
			ch = (struct cutover_change){ .state = cutplan_state_name(CUT_CAUGHT_UP) };
			if (cutover_update(c->dst, schema, c->cfg->source_id, c->cfg->dataset_id, &ch) < 0)
				return EXIT_UNAVAILABLE;
			printf("applyd applied through %s (final LSN %s) after %.1f s\n", al, fl, waited);
			fflush(stdout);
			return 0;
		}
		if (w == CUT_WAIT_NOT_STREAMING) {
			log_error("the flow stopped streaming while cutover waited for applyd: %s", cutplan_blocker_text(blocker));
			hint_blocker(c, blocker);
			return EXIT_NEGATIVE;
		}
		if (w == CUT_WAIT_TIMEOUT) {
			log_error("applyd did not apply through the final LSN %s within %d s: applied through %s, %" PRIu64
				  " bytes behind",
				  fl, c->o->apply_timeout_s, al, final_lsn - applied);
			log_hint("\"trellara status --config %s\" shows the lag; run the cutover again (with a larger --apply-timeout)",
				 c->qconfig);
			return EXIT_TEMPFAIL;
		}
		int64_t now = clock_mono_us();
		if (now - last_line >= 2000000) {
			printf("  waiting: applied through %s, %" PRIu64 " bytes behind %s (%.0f s)\n", al, final_lsn - applied, fl,
			       waited);
			fflush(stdout);
			last_line = now;
		}
		sleep_ms(200);
	}
}

/* ---- sequences ---- */

static char *sequences_json(const struct flow_sequences *seqs)
{
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	if (!mem)
		return NULL;
	struct jsonw w;
	jsonw_init(&w, mem, false);
	jsonw_open(&w, NULL, '[');
	for (size_t i = 0; i < seqs->n; i++) {
		const struct flow_sequence *s = &seqs->items[i];
		jsonw_open(&w, NULL, '{');
		sequences_json_fields(&w, s);
		if (s->read)
			sequences_json_state(&w, "target_after", &s->target_after);
		else
			jsonw_null(&w, "target_after");
		jsonw_str(&w, "action", s->read ? seq_action_name(s->decision.action) : "no_target");
		jsonw_close(&w, '}');
	}
	jsonw_close(&w, ']');
	if (fclose(mem) != 0) {
		free(text);
		return NULL;
	}
	return text;
}

static int do_sync_sequences(struct cut *c)
{
	struct flow_sequences seqs = { 0 };
	char *json = NULL; /* owned */
	int code = EXIT_UNAVAILABLE;
	int rc = sequences_resolve(c->src, c->dst, c->cfg, &seqs);
	if (rc) {
		code = rc == SEQUENCES_CONFIG ? EXIT_CONFIG : EXIT_UNAVAILABLE;
		goto out;
	}
	if (sequences_read(c->src, c->dst, &seqs) < 0)
		goto out;
	rc = sequences_sync(c->dst, &seqs, c->row.sequence_margin);
	if (rc < 0)
		goto out;
	for (size_t i = 0; i < seqs.n; i++)
		sequences_print_synced(stdout, &seqs.items[i]);
	if (rc == SEQUENCES_CONFIG) {
		code = EXIT_CONFIG;
		goto out;
	}
	json = sequences_json(&seqs);
	if (!json) {
		log_error("cannot format the sequences' values: %m");
		code = EXIT_CANTCREAT;
		goto out;
	}
	struct cutover_change ch = { .state = cutplan_state_name(CUT_SEQUENCES_SYNCED), .sequences_json = json };
	if (cutover_update(c->dst, c->cfg->checkpoint_schema, c->cfg->source_id, c->cfg->dataset_id, &ch) < 0)
		goto out;
	printf("sequences: %zu synced (margin %" PRIu64 ")\n", seqs.n, c->row.sequence_margin);
	code = 0;
out:
	fflush(stdout);
	free(json);
	sequences_free(&seqs);
	return code;
}

/* ---- verify ---- */

static int do_verify(struct cut *c)
{
	uint64_t compared_at = 0;
	struct verify_options vo = { .cfg = c->cfg, .json = false, .fence_timeout_s = c->o->fence_timeout_s,
				     .stop = c->o->stop, .compared_at = &compared_at,
				     /* the writes move to the target next: a sequence behind
				      * would hand out a key the source already has */
				     .sequences_strict = true };
	printf("verify:\n");
	fflush(stdout);
	int rc = verify_run(&vo);
	if (rc != EXIT_OK && rc != EXIT_NEGATIVE)
		return rc;
	struct cutover_change ch = { .verify_result = rc == EXIT_OK ? "CONVERGED" : "DIVERGED",
				     .set_verified_at_lsn = compared_at != 0,
				     .verified_at_lsn = compared_at };
	if (rc == EXIT_OK)
		ch.state = cutplan_state_name(CUT_VERIFIED);
	if (cutover_update(c->dst, c->cfg->checkpoint_schema, c->cfg->source_id, c->cfg->dataset_id, &ch) < 0)
		return EXIT_UNAVAILABLE;
	if (rc != EXIT_OK) {
		log_error("verify answered DIVERGED: the target does not equal the source; not cutting over");
		log_hint("repair what verify names above, then run the cutover again");
		return EXIT_NEGATIVE;
	}
	fault_point("cutover.before_stop");
	return 0;
}

/* ---- stopping capture and applyd ---- */

static int do_stop(struct cut *c)
{
	const char *schema = c->cfg->checkpoint_schema;
	if (c->row.state != CUT_STOPPING) {
		struct cutover_change ch = { .state = cutplan_state_name(CUT_STOPPING) };
		if (cutover_update(c->dst, schema, c->cfg->source_id, c->cfg->dataset_id, &ch) < 0)
			return EXIT_UNAVAILABLE;
	}
	struct cutplan_flow f = { 0 };
	read_state_file(c, &f);
	long pids[3] = { c->supervisor_pid, c->capture_pid, c->applyd_pid };
	static const char *const programs[3] = { "trellara-run", "trellara-capture", "trellara-applyd" };
	if (f.supervisor_alive) {
		/* the supervisor drains both: each exits after its current
		 * transaction, never in the middle of one */
		printf("stopping trellara run (pid %ld): SIGTERM, capture and applyd drain\n", c->supervisor_pid);
		fflush(stdout);
		if (kill((pid_t)c->supervisor_pid, SIGTERM) < 0 && errno != ESRCH) {
			log_error("cannot signal trellara run (pid %ld): %m", c->supervisor_pid);
			return EXIT_TEMPFAIL;
		}
	}
	for (int64_t start = clock_mono_us();;) {
		int alive = -1;
		for (int i = 0; i < 3 && alive < 0; i++)
			if (fs_process_runs(pids[i], programs[i]))
				alive = i;
		if (alive < 0)
			break;
		if (clock_mono_us() - start >= (int64_t)c->o->stop_timeout_s * 1000000) {
			log_error("%s (pid %ld) is still running %d s after the supervisor was asked to stop", programs[alive],
				  pids[alive], c->o->stop_timeout_s);
			log_hint("the data is verified; stop it, then run \"trellara cutover --config %s\" again to finish",
				 c->qconfig);
			return EXIT_TEMPFAIL;
		}
		sleep_ms(100);
	}
	struct cutover_change ch = { .state = cutplan_state_name(CUT_CUT_OVER) };
	if (cutover_update(c->dst, schema, c->cfg->source_id, c->cfg->dataset_id, &ch) < 0)
		return EXIT_UNAVAILABLE;
	printf("capture and applyd stopped\n");
	fflush(stdout);
	return 0;
}

/* ---- what to do next ---- */

static void print_done(struct cut *c)
{
	const struct cutover_row *r = &c->row;
	char fl[LSN_FORMAT_LEN] = "?", vl[LSN_FORMAT_LEN] = "?";
	if (r->has_final_lsn)
		lsn_format(r->final_lsn, fl);
	if (r->has_verified_at_lsn)
		lsn_format(r->verified_at_lsn, vl);
	char *flow = config_flow_id(c->cfg);
	printf("flow %s cut over at %s: final LSN %s, verify %s at %s, sequence margin %" PRIu64 "\n", flow, r->completed_at,
	       fl, r->verify_result, vl, r->sequence_margin);
	free(flow);
	char *target = conninfo_mask(c->cfg->target_database_url);
	printf("next:\n");
	printf("  1. point the applications at the target: %s\n", target);
	free(target);
	if (!r->lock_source)
		printf("     the source was not locked: what the applications wrote on it after %s may be missing on the target\n", fl);
	/* the slot keeps WAL on the source until it is dropped */
	char *lit = pgconn_quote_literal(c->src, r->slot_name);
	char *sql = xasprintf("SELECT pg_drop_replication_slot(%s)", lit);
	struct strbuf cmd = STRBUF_INIT;
	char *source = conninfo_mask(c->cfg->source_database_url);
	bool secret = strcmp(source, c->cfg->source_database_url) != 0;
	strbuf_adds(&cmd, "psql ");
	if (secret) {
		PGresult *res = pgconn_query(c->src, "SELECT current_database()", 0, NULL);
		strbuf_adds(&cmd, "-d ");
		strbuf_add_shell_quoted(&cmd, res ? PQgetvalue(res, 0, 0) : "?");
		PQclear(res);
	} else {
		strbuf_add_shell_quoted(&cmd, source);
	}
	strbuf_adds(&cmd, " -c ");
	strbuf_add_shell_quoted(&cmd, sql);
	printf("  2. once the source is no longer needed as a fallback, drop the replication slot on the source (it keeps WAL there):\n");
	printf("       %s;\n", sql);
	printf("     from a shell: %s\n", cmd.buf);
	if (secret)
		printf("     (connect as source.database_url says, %s; its password is not printed)\n", source);
	strbuf_release(&cmd);
	free(source);
	free(sql);
	free(lit);
	if (cutplan_lock_in_place(r->source_lock)) {
		printf("  3. the source database \"%s\" stays read-only for new transactions; to make it writable again (a fallback):\n",
		       r->source_database);
		printf("       trellara cutover --config %s --abort\n", c->qconfig);
	} else if (r->lock_source) {
		printf("  3. the source database \"%s\" was unlocked after the cutover: it takes writes again\n", r->source_database);
	}
	printf("  %d. \"trellara status --config %s\" shows the cutover; do not start trellara run for this flow again\n",
	       r->lock_source ? 4 : 3, c->qconfig);
	fflush(stdout);
}

/* ---- the loop ---- */

static int load_row(struct cut *c)
{
	return cutover_load(c->dst, c->cfg->checkpoint_schema, c->cfg->source_id, c->cfg->dataset_id, &c->row) < 0 ? -1 : 0;
}

/* A step failed with code: undo the lock (unless --keep-locked) and
 * mark the cutover failed, so that the source is writable and the next
 * run starts over.  A cutover already stopping stays so (verified: the
 * next run only finishes the stop). */
static int fail(struct cut *c, int code, const char *reason)
{
	load_row(c); /* the step may have moved it (on failure: the row as last read) */
	if (!c->row.exists || c->row.state == CUT_STOPPING || c->row.state == CUT_CUT_OVER || c->row.state == CUT_ABORTED ||
	    c->row.state == CUT_FAILED)
		return code;
	if (cutplan_unlock_on_failure(c->row.source_lock, c->o->keep_locked)) {
		if (unlock_source(c) < 0)
			return code;
	} else if (cutplan_lock_in_place(c->row.source_lock)) {
		printf("the source database \"%s\" stays locked (--keep-locked); \"trellara cutover --config %s --abort\" unlocks it\n",
		       c->row.source_database, c->qconfig);
	}
	struct cutover_change ch = { .state = cutplan_state_name(CUT_FAILED), .failure_reason = reason };
	cutover_update(c->dst, c->cfg->checkpoint_schema, c->cfg->source_id, c->cfg->dataset_id, &ch);
	printf("cutover failed (%s): nothing was switched; run it again once that is fixed\n", reason);
	fflush(stdout);
	return code;
}

static int step(struct cut *c, bool *finished)
{
	struct quarantine_entry *q = NULL;
	int nq = 0;
	if (load_row(c) < 0 || checkpoint_quarantine_list(c->dst, c->cfg->checkpoint_schema, &c->ids, true, &q, &nq) < 0)
		return EXIT_UNAVAILABLE;
	free(q);
	enum cutplan_blocker blocker = CUT_BLOCKER_NONE;
	if (observe_flow(c, &blocker) < 0)
		return EXIT_UNAVAILABLE;
	struct cutplan_view v = { .state = c->row.state,
				  .lock = c->row.exists ? c->row.source_lock : CUT_LOCK_NONE,
				  .lock_source = c->row.exists && c->row.state != CUT_ABORTED && c->row.state != CUT_FAILED
							 ? c->row.lock_source
							 : c->o->lock_source,
				  .abort = c->o->abort,
				  .quarantine_open = nq,
				  .blocker = blocker };
	enum cutplan_action a = cutplan_next(&v);
	log_debug("cutover: state %s, source lock %s: %s", cutplan_state_name(v.state), cutplan_lock_name(v.lock),
		  cutplan_action_name(a));
	int code;
	char reason[256];
	switch (a) {
	case CUT_DO_START: {
		uint64_t margin = c->o->have_margin ? c->o->margin : cutplan_default_margin(c->o->lock_source);
		int rc = cutover_start(c->dst, c->cfg->checkpoint_schema, c->cfg->source_id, c->cfg->dataset_id,
				       c->o->lock_source, margin, c->cfg->slot);
		if (rc)
			return rc < 0 ? EXIT_UNAVAILABLE : EXIT_TEMPFAIL;
		printf("cutover of flow %s:%s started: %s, sequence margin %" PRIu64 "\n", c->cfg->source_id, c->cfg->dataset_id,
		       c->o->lock_source ? "the source will be locked" : "the source is not locked (no --lock-source)", margin);
		fflush(stdout);
		return 0;
	}
	case CUT_DO_LOCK:
		if ((code = do_lock(c)) != 0)
			return fail(c, code, "the source could not be locked");
		return 0;
	case CUT_DO_WAIT_APPLY:
		if ((code = do_wait_apply(c)) != 0)
			return fail(c, code, code == EXIT_TEMPFAIL ? "applyd did not apply through the final LSN in time"
								    : "the flow stopped streaming");
		return 0;
	case CUT_DO_SYNC_SEQUENCES:
		if ((code = do_sync_sequences(c)) != 0)
			return fail(c, code, "the sequences could not be synced");
		return 0;
	case CUT_DO_VERIFY:
		if ((code = do_verify(c)) != 0)
			return fail(c, code, code == EXIT_NEGATIVE ? "verify answered DIVERGED" : "verify gave no verdict");
		return 0;
	case CUT_DO_STOP:
		return do_stop(c);
	case CUT_DO_DONE:
		print_done(c);
		*finished = true;
		return 0;
	case CUT_DO_UNLOCK:
		return unlock_source(c) < 0 ? EXIT_UNAVAILABLE : 0;
	case CUT_DO_MARK_ABORTED: {
		struct cutover_change ch = { .state = cutplan_state_name(CUT_ABORTED) };
		if (cutover_update(c->dst, c->cfg->checkpoint_schema, c->cfg->source_id, c->cfg->dataset_id, &ch) < 0)
			return EXIT_UNAVAILABLE;
		printf("cutover aborted (it was %s): the source is writable%s\n", cutplan_state_name(c->row.state),
		       c->row.state == CUT_STOPPING ? "; capture and applyd were being stopped: start the flow again with trellara run" : "");
		fflush(stdout);
		*finished = true;
		return 0;
	}
	case CUT_DO_NOTHING_TO_ABORT:
		if (c->row.state == CUT_CUT_OVER)
			printf("flow %s:%s is cut over; its source is not locked by the cutover\n", c->cfg->source_id,
			       c->cfg->dataset_id);
		else
			printf("no cutover in progress for flow %s:%s and nothing locked: nothing to abort\n", c->cfg->source_id,
			       c->cfg->dataset_id);
		fflush(stdout);
		*finished = true;
		return 0;
	case CUT_DO_REFUSE_QUARANTINE:
		log_error("%d quarantined transactions: the target misses them, so it cannot take over", nq);
		log_hint("run \"trellara quarantine list --config %s\", repair and release them, then run the cutover again",
			 c->qconfig);
		snprintf(reason, sizeof reason, "%d quarantined transactions", nq);
		return fail(c, EXIT_NEGATIVE, reason);
	case CUT_DO_REFUSE_NOT_STREAMING:
		log_error("the flow is not streaming: %s", cutplan_blocker_text(blocker));
		hint_blocker(c, blocker);
		snprintf(reason, sizeof reason, "the flow is not streaming: %s", cutplan_blocker_text(blocker));
		return fail(c, EXIT_NEGATIVE, reason);
	}
	return EXIT_UNAVAILABLE;
}

int cutcmd_run(const struct cutcmd_options *o)
{
	struct cut c = { .o = o, .cfg = o->cfg };
	c.ids = (struct flow_ids){ o->cfg->source_id, o->cfg->dataset_id, o->cfg->consumer_group };
	c.qconfig = strbuf_shell_quote(o->cfg->path);
	int code = EXIT_UNAVAILABLE;
	c.dst = pgconn_connect(o->cfg->target_database_url, PGCONN_NORMAL, APP, "target");
	c.src = c.dst ? pgconn_connect(o->cfg->source_database_url, PGCONN_NORMAL, APP, "source") : NULL;
	/* a session opened on a locked source (a resumed cutover, --abort)
	 * must still unlock it and flush the WAL: its own writes are the
	 * ALTER DATABASE and one xid (do_wait_apply) */
	if (!c.src || !c.dst || pgconn_command(c.src, "SET default_transaction_read_only = off") < 0 ||
	    checkpoint_migrate(c.dst, o->cfg->checkpoint_schema) < 0)
		goto out;
	/* one cutover per flow at a time (released with the session) */
	char *key = xasprintf("trellara.cutover.%s:%s", o->cfg->source_id, o->cfg->dataset_id);
	const char *p[1] = { key };
	PGresult *res = pgconn_query(c.dst, "SELECT pg_try_advisory_lock(hashtext($1))", 1, p);
	free(key);
	if (!res)
		goto out;
	bool locked = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	if (!locked) {
		log_error("another trellara cutover runs for flow %s:%s", o->cfg->source_id, o->cfg->dataset_id);
		code = EXIT_TEMPFAIL;
		goto out;
	}
	bool finished = false;
	while (!finished) {
		if (*o->stop && !o->abort) {
			log_error("stopped by a signal");
			if (load_row(&c) == 0)
				fail(&c, EXIT_TEMPFAIL, "stopped by a signal");
			code = EXIT_TEMPFAIL;
			goto out;
		}
		code = step(&c, &finished);
		if (code != 0)
			goto out;
	}
	code = EXIT_OK;
out:
	PQfinish(c.src);
	PQfinish(c.dst);
	free(c.qconfig);
	return code;
}
