/*
 * snapfence.c - the snapshot and the fence at one LSN (snapfence.h).
 */
#include "trellara/snapfence.h"

#include "trellara/assembler.h"
#include "trellara/clock.h"
#include "trellara/defaults.h"
#include "trellara/fault.h"
#include "trellara/log.h"
#include "trellara/lsn.h"
#include "trellara/pgconn.h"
#include "trellara/sqlstate.h"
#include "trellara/strbuf.h"
#include "trellara/xalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Both sides render values the same way. */
static const char *const session_settings[] = {
	"SET TimeZone = 'UTC'", "SET DateStyle = 'ISO, YMD'", "SET extra_float_digits = 3",
	"SET bytea_output = 'hex'", "SET IntervalStyle = 'postgres'", "SET statement_timeout = 0",
	/* the one pass is one long scan: compiling it costs more than it saves */
	"SET jit = off", NULL
};

int snapfence_session_settings(PGconn *conn)
{
	for (int i = 0; session_settings[i]; i++)
		if (pgconn_command(conn, session_settings[i]) < 0)
			return -1;
	return 0;
}

void snapfence_release(struct snapfence *f, PGconn *dst, const struct flow_config *cfg, const struct flow_ids *ids)
{
	if (f->fenced) {
		/* with the target session gone its fence no longer stands
		 * (checkpoint.h): nothing to delete, and no way to */
		if (!pgconn_lost(dst, NULL, 0))
			checkpoint_fence_release(dst, cfg->checkpoint_schema, ids, FENCE_BY_VERIFY);
		f->fenced = false;
	}
	if (f->repl) {
		PQfinish(f->repl); /* the temporary slot goes with its session */
		f->repl = NULL;
	}
}

/* After the fence row: one committed transaction on the source past the
 * snapshot, holding only a trellara.fence logical message (capture turns
 * it into a watermark at its end, made durable at once: DESIGN §9).  It
 * also flushes the WAL up to L on an idle source (walsenders read only
 * flushed WAL).  Returns 0, or an exit code: a role that may not call
 * pg_logical_emit_message is a configuration error, named. */
static int emit_fence_message(PGconn *src, const struct snapfence_options *o, const char *fence_lsn)
{
	char *content = xasprintf("trellara-%s fence at %s for flow %s/%s", o->name, fence_lsn, o->cfg->source_id,
				  o->cfg->dataset_id);
	const char *p[2] = { ASSEMBLER_FENCE_PREFIX, content };
	PGresult *res = PQexecParams(src, "SELECT pg_catalog.pg_logical_emit_message(true, $1, $2)", 2, NULL, p, NULL, NULL,
				     0);
	int code = 0;
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
		if (sqlstate_classify(state) == SQLSTATE_CLASS_PERMISSION) {
			char *role = pgconn_quote_ident(src, PQuser(src));
			log_error("source: role %s may not emit %s's fence message (pg_logical_emit_message): %s", role,
				  o->name, msg ? msg : "permission denied");
			/* its arguments as this server has them (PostgreSQL 17
			 * added a fourth, flush) */
			PGresult *sig = PQexec(src, "SELECT p.oid::pg_catalog.regprocedure FROM pg_catalog.pg_proc p"
						    " WHERE p.proname = 'pg_logical_emit_message'"
						    " AND p.proargtypes[2] = 'pg_catalog.text'::pg_catalog.regtype");
			const char *fn = PQresultStatus(sig) == PGRES_TUPLES_OK && PQntuples(sig) == 1
						 ? PQgetvalue(sig, 0, 0)
						 : "pg_logical_emit_message(boolean,text,text)";
			log_hint("as a superuser on the source: GRANT EXECUTE ON FUNCTION pg_catalog.%s TO %s", fn, role);
			PQclear(sig);
			free(role);
			code = EXIT_CONFIG;
		} else {
			log_error("source: cannot emit %s's fence message: %s", o->name, msg ? msg : PQerrorMessage(src));
			code = EXIT_UNAVAILABLE;
		}
	}
	PQclear(res);
	free(content);
	return code;
}

/* Whether a quarantined transaction has stopped applyd (it applies
 * nothing more until it is released): then the fence cannot be reached,
 * and waiting for it would only run out its timeout.  0 when none, an
 * exit code (75, said with the transaction and the repair) when one, or
 * 69 when the quarantine cannot be read. */
static int stopped_by_quarantine(PGconn *dst, const struct snapfence_options *o)
{
	const struct flow_config *cfg = o->cfg;
	struct quarantine_entry *q = NULL;
	int n = 0;
	if (checkpoint_quarantine_list(dst, cfg->checkpoint_schema, o->ids, true, &q, &n) < 0)
		return EXIT_UNAVAILABLE;
	int code = 0;
	for (int i = 0; i < n && !code; i++) {
		if (strcmp(q[i].state, "quarantined") != 0)
			continue; /* replay_ready: applyd applies it when it runs */
		char l[LSN_FORMAT_LEN];
		lsn_format(q[i].commit_lsn, l);
		char *config = strbuf_shell_quote(cfg->path);
		log_error("applyd is stopped by quarantined transaction %" PRIu32 " (commit %s, %s): the target cannot reach "
			  "%s's fence until it is released",
			  q[i].xid, l, q[i].reason, o->name);
		log_hint("\"trellara quarantine list --config %s\" shows it; repair the target, then \"trellara quarantine "
			 "replay-ready --config %s --transaction-id %" PRIu32 " --commit-lsn %s\", and run %s again",
			 config, config, q[i].xid, l, o->name);
		free(config);
		code = EXIT_TEMPFAIL;
	}
	free(q);
	return code;
}

/* The fence waits: FENCE_PASSED when the applier had committed at or
 * past the fence before it was set (the caller starts again). */
#define FENCE_PASSED (-1)
/* step 1's fence set again when the applier passed it before it stood */
#define SNAPFENCE_HOLD_TRIES 5

/* Sets or moves the fence to lsn, emits the in-band fence message past
 * it, and waits until the target stands exactly there.  Returns 0,
 * FENCE_PASSED, or an exit code. */
static int fence_and_wait(struct snapfence *f, PGconn *src, PGconn *dst, const struct snapfence_options *o, uint64_t lsn,
			  bool move)
{
	const struct flow_config *cfg = o->cfg;
	char l[LSN_FORMAT_LEN];
	lsn_format(lsn, l);
	bool mine;
	int q = move ? checkpoint_fence_move(dst, cfg->checkpoint_schema, o->ids, lsn, FENCE_BY_VERIFY, &mine)
		     : checkpoint_fence_request(dst, cfg->checkpoint_schema, o->ids, lsn, FENCE_BY_VERIFY, &mine);
	if (q < 0)
		return EXIT_UNAVAILABLE;
	if (!mine) {
		if (move)
			log_error("%s's fence for flow %s:%s is gone before it could move to %s", o->name, cfg->source_id,
				  cfg->dataset_id, l);
		else
			log_error("a fence is already set for flow %s:%s (a verify, a repair or a reseed is running)",
				  cfg->source_id, cfg->dataset_id);
		return EXIT_TEMPFAIL;
	}
	f->fenced = true;
	/* the fence in band: a transaction committing past it that capture
	 * records at once (a watermark at its end) */
	int rc = emit_fence_message(src, o, l);
	if (rc)
		return rc;
	int64_t start_us = clock_mono_us();
	for (;;) {
		if (*o->stop)
			return EXIT_TEMPFAIL;
		struct fence_progress fp;
		if (checkpoint_fence_progress(dst, cfg->checkpoint_schema, o->ids, &fp) < 0)
			return EXIT_UNAVAILABLE;
		bool no_checkpoint = fp.fence_present && !fp.has_checkpoint;
		if (fp.reached && !no_checkpoint)
			return fp.before ? 0 : FENCE_PASSED;
		int stopped = stopped_by_quarantine(dst, o);
		if (stopped)
			return stopped;
		if (clock_mono_us() - start_us >= (int64_t)o->timeout_s * 1000000) {
			log_error("the target did not reach the fence %s within %d s%s", l, o->timeout_s,
				  no_checkpoint ? " (it has no apply checkpoint yet)" : "");
			log_hint("is trellara-applyd running for %s?", cfg->path);
			return EXIT_TEMPFAIL;
		}
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

/* The source's WAL insert position: everything committed so far ends at
 * or before it. */
static int source_insert_lsn(PGconn *src, uint64_t *lsn)
{
	PGresult *res = pgconn_query(src, "SELECT pg_catalog.pg_current_wal_insert_lsn()", 0, NULL);
	bool ok = res && PQntuples(res) == 1 && lsn_parse(PQgetvalue(res, 0, 0), lsn);
	PQclear(res);
	return ok ? 0 : -1;
}

/* The fence in two steps (trellara-verify(1), EXACT COMPARISON): first at
 * the source's current position P; once the target holds there, the
 * temporary slot whose consistent point L is at or after P, and the fence
 * moved to L.  Held at P, applyd cannot pass L while the slot is made,
 * however closely it follows the source (with one fence set after the
 * slot, under load it could, and the caller had to start again). */
int snapfence_set(struct snapfence *f, PGconn *src, PGconn *dst, const struct snapfence_options *o)
{
	const struct flow_config *cfg = o->cfg;
	for (int attempt = 1; attempt <= 3; attempt++) {
		/* step 1: held at the source's position P.  An applier that
		 * committed past P before the fence stood (a batch it had open
		 * then, under load) is simply held again at the source's new
		 * position: no snapshot was taken yet, no attempt is spent */
		int rc = FENCE_PASSED;
		char l[LSN_FORMAT_LEN];
		for (int hold = 1; hold <= SNAPFENCE_HOLD_TRIES && rc == FENCE_PASSED; hold++) {
			uint64_t pre;
			if (source_insert_lsn(src, &pre) < 0)
				return EXIT_UNAVAILABLE;
			lsn_format(pre, l);
			log_info("holding the target at %s before taking the snapshot", l);
			char point[64];
			snprintf(point, sizeof point, "%s.before_fence", o->name);
			fault_pause(point);
			rc = fence_and_wait(f, src, dst, o, pre, false);
			if (rc == FENCE_PASSED) {
				log_info("the target passed %s before the fence stood: holding it at the source's new position", l);
				snapfence_release(f, dst, cfg, o->ids);
			}
		}
		if (rc == FENCE_PASSED) {
			log_error("the target kept passing the fence before it stood (%d times); try again", SNAPFENCE_HOLD_TRIES);
			return EXIT_TEMPFAIL;
		}
		if (rc == 0) {
			char point[64];
			snprintf(point, sizeof point, "%s.before_slot", o->name);
			fault_pause(point);
			f->repl = o->connect_repl(o->arg);
			if (!f->repl)
				return EXIT_UNAVAILABLE;
			char slot[64];
			snprintf(slot, sizeof slot, "trellara_%s_%ld", o->name, (long)getpid());
			char *sql = xasprintf("CREATE_REPLICATION_SLOT %s TEMPORARY LOGICAL pgoutput (SNAPSHOT 'export')",
					      slot);
			PGresult *res = pgconn_query(f->repl, sql, 0, NULL);
			free(sql);
			if (!res || PQntuples(res) != 1 || !lsn_parse(PQgetvalue(res, 0, 1), &f->lsn)) {
				PQclear(res);
				return EXIT_UNAVAILABLE;
			}
			snprintf(f->snapshot, sizeof f->snapshot, "%s", PQgetvalue(res, 0, 2));
			PQclear(res);
			snprintf(point, sizeof point, "%s.after_slot", o->name);
			fault_pause(point);
			log_info("at %s: waiting for the target to reach the fence", lsn_format(f->lsn, l));
			rc = fence_and_wait(f, src, dst, o, f->lsn, true);
		}
		if (rc != FENCE_PASSED)
			return rc;
		log_info("the target passed the fence before it was set: taking a new snapshot (attempt %d)", attempt + 1);
		snapfence_release(f, dst, cfg, o->ids);
	}
	log_error("the target kept passing the fence; try again");
	return EXIT_TEMPFAIL;
}

int snapfence_source_begin(PGconn *src, const struct snapfence *f)
{
	if (pgconn_command(src, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") < 0)
		return -1;
	char *lit = pgconn_quote_literal(src, f->snapshot);
	char *set = xasprintf("SET TRANSACTION SNAPSHOT %s", lit);
	int rc = pgconn_command(src, set);
	free(set);
	free(lit);
	return rc;
}
