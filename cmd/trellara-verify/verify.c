/*
 * verify.c - the comparison (verify.h).
 */
#include "verify.h"
#include "verify_internal.h"

#include "trellara/assembler.h"
#include "trellara/backoff.h"
#include "trellara/checkpoint.h"
#include "trellara/clock.h"
#include "trellara/defaults.h"
#include "trellara/fault.h"
#include "trellara/jsonw.h"
#include "trellara/log.h"
#include "trellara/lsn.h"
#include "trellara/pgconn.h"
#include "trellara/runs.h"
#include "trellara/sequences.h"
#include "trellara/snapfence.h"
#include "trellara/sqlstate.h"
#include "trellara/textcodec.h"
#include "trellara/xalloc.h"
#include "trellara/strbuf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const div_names[] = { "missing_in_target", "extra_in_target", "content_differs" };
static const char *const scope_names[] = { "table", "partitions", "only" };
static const char *const scope_text[] = { "", " (all partitions)",
					   " (its own rows only: inheritance children are not compared)" };

/* The row hash of a text expression: hashtextextended over the text, in
 * the server's encoding when both servers share it (their bytes are then
 * the same for the same text), else over its UTF8 bytes written as
 * ASCII (encode(..., 'escape')), which is the same text on any server
 * encoding.  Newly allocated. */
char *verify_row_hash(const struct verify *v, const char *text_expr)
{
	return v->transcode ? xasprintf("hashtextextended(encode(convert_to(%s, 'UTF8'), 'escape'), 0)", text_expr)
			    : xasprintf("hashtextextended(%s, 0)", text_expr);
}

/* Whether the two servers' encodings differ (v->transcode). */
static void choose_hash(struct verify *v)
{
	const char *se = PQparameterStatus(v->src, "server_encoding"), *te = PQparameterStatus(v->dst, "server_encoding");
	v->transcode = !se || !te || strcmp(se, te) != 0;
	if (v->transcode)
		log_info("the source's encoding is %s, the target's %s: rows are compared as UTF8 text", se ? se : "unknown",
			 te ? te : "unknown");
}

/* Connects to one side; a failure that another pass may not meet (the
 * server down, restarting, unreachable; not the credentials) is the
 * pass's loss. */
static PGconn *connect_side(struct verify *v, const char *url, enum pgconn_kind kind, const char *side)
{
	char error[sizeof v->loss->why];
	struct pgconn_options po = { .kind = kind, .application_name = "trellara-verify", .role = side,
				     .connect_timeout = VERIFY_CONNECT_TIMEOUT_S, .error = error, .error_len = sizeof error };
	PGconn *c = pgconn_open(url, &po);
	if (!c && pgconn_last_failure() != PGCONN_FAILURE_AUTHENTICATION && !v->loss->side) {
		v->loss->side = side;
		snprintf(v->loss->why, sizeof v->loss->why, "%s", error);
	}
	return c;
}

/* Whether a connection of the pass is lost (recorded as its loss). */
static bool lost(struct verify *v)
{
	const struct { PGconn *conn; const char *side; } conns[] = { { v->src, "source" }, { v->fence.repl, "source" },
								      { v->dst, "target" } };
	for (size_t i = 0; i < sizeof conns / sizeof conns[0] && !v->loss->side; i++)
		if (pgconn_lost(conns[i].conn, v->loss->why, sizeof v->loss->why))
			v->loss->side = conns[i].side;
	return v->loss->side != NULL;
}

static void release(struct verify *v)
{
	snapfence_release(&v->fence, v->dst, v->cfg, &v->ids);
}

static PGconn *connect_repl(void *arg)
{
	struct verify *v = arg;
	return connect_side(v, v->cfg->source_database_url, PGCONN_REPLICATION, "source");
}

/* ---- one table ---- */

bool verify_key_fields(const char *text, int n, char **fields)
{
	const char *c = text;
	int i = 0;
	if (*c++ != '(')
		return false;
	for (;;) {
		if (i == n)
			goto fail;
		struct strbuf sb = STRBUF_INIT;
		bool null = *c == ',' || *c == ')';
		while (*c && *c != ',' && *c != ')') {
			if (*c == '"') {
				for (c++;; c++) {
					if (!*c) {
						strbuf_release(&sb);
						goto fail;
					}
					if (*c == '"' && c[1] == '"') {
						strbuf_addch(&sb, '"');
						c++;
					} else if (*c == '\\' && c[1]) {
						strbuf_addch(&sb, c[1]);
						c++;
					} else if (*c == '"') {
						break;
					} else {
						strbuf_addch(&sb, *c);
					}
				}
				c++;
			} else if (*c == '\\' && c[1]) {
				strbuf_addch(&sb, c[1]);
				c += 2;
			} else {
				strbuf_addch(&sb, *c++);
			}
		}
		fields[i++] = null ? NULL : strbuf_detach(&sb, NULL);
		if (null)
			strbuf_release(&sb);
		if (*c == ')')
			break;
		if (*c++ != ',')
			goto fail;
	}
	if (i == n && c[1] == '\0')
		return true;
fail:
	while (i > 0) {
		free(fields[--i]);
		fields[i] = NULL;
	}
	return false;
}

/* "key_values": each recorded key of kind k as an array of its columns'
 * values (text, null for NULL), in the order of key_columns; a key whose
 * text is not exactly one such record is null (repair-plan does not guess
 * it). */
static void key_values_json(struct jsonw *w, const struct table_result *r, int k)
{
	char **fields = xcalloc((size_t)r->n_key_columns, sizeof *fields);
	jsonw_open(w, "key_values", '[');
	for (int e = 0; e < r->n_examples[k]; e++) {
		if (!verify_key_fields(r->examples[k][e], r->n_key_columns, fields)) {
			jsonw_null(w, NULL);
			continue;
		}
		jsonw_open(w, NULL, '[');
		for (int c = 0; c < r->n_key_columns; c++) {
			if (fields[c])
				jsonw_text(w, NULL, fields[c]);
			else
				jsonw_null(w, NULL);
			free(fields[c]);
		}
		jsonw_close(w, ']');
	}
	jsonw_close(w, ']');
	free(fields);
}

/* "trellara SUB --config PATH [--table TABLE]" to paste into a shell:
 * the path and the table quoted for it.  Newly allocated. */
static char *recovery_command(const char *sub, const char *config_path, const char *table)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "trellara %s --config ", sub);
	strbuf_add_shell_quoted(&sb, config_path);
	if (table) {
		strbuf_adds(&sb, " --table ");
		strbuf_add_shell_quoted(&sb, table);
	}
	return strbuf_detach(&sb, NULL);
}

/* A target sequence that would hand out a value the source already has:
 * the first insert on the target could collide. */
static bool sequence_behind(const struct flow_sequence *s)
{
	return s->read && seq_compare(&s->target, &s->source, s->target_params.increment) == SEQ_BEHIND;
}

static bool table_ok(const struct table_result *r)
{
	return !r->error && r->count[0] == 0 && r->count[1] == 0 && r->count[2] == 0 && r->source_rows == r->target_rows;
}

/* One pass: connect, fence, compare, report.  A pass that fails before
 * its report records nothing (the run moves only after the report) and,
 * when a connection was lost, fills *loss. */
static int verify_pass(const struct verify_options *o, struct verify_loss *loss)
{
	struct verify v = { .o = o, .cfg = o->cfg, .loss = loss };
	const struct flow_config *cfg = o->cfg;
	v.ids = (struct flow_ids){ cfg->source_id, cfg->dataset_id, cfg->consumer_group };
	int code = EXIT_UNAVAILABLE;
	v.results = xcalloc(cfg->n_tables ? cfg->n_tables : 1, sizeof *v.results);
	struct quarantine_entry *q = NULL;
	int nq = 0;
	struct run_row run = { 0 };
	struct apply_checkpoint cp = { 0 };
	int64_t handoff_tables = -1;
	struct flow_sequences seqs = { 0 };
	v.src = connect_side(&v, cfg->source_database_url, PGCONN_NORMAL, "source");
	v.dst = v.src ? connect_side(&v, cfg->target_database_url, PGCONN_NORMAL, "target") : NULL;
	if (!v.src || !v.dst || snapfence_session_settings(v.src) < 0 || snapfence_session_settings(v.dst) < 0 ||
	    checkpoint_migrate(v.dst, cfg->checkpoint_schema) < 0)
		goto out;
	choose_hash(&v);
	if (o->table) {
		bool known = false;
		for (size_t i = 0; i < cfg->n_tables; i++) {
			char name[300];
			snprintf(name, sizeof name, "%s.%s", cfg->tables[i].schema, cfg->tables[i].name);
			known = known || strcmp(name, o->table) == 0;
		}
		if (!known) {
			log_error("table \"%s\" is not in dataset.tables of %s", o->table, cfg->path);
			code = EXIT_USAGE;
			goto out;
		}
	}
	/* the flow's sequences (not with --table): a listed one missing on a
	 * side is a configuration error, found before anything is fenced */
	int rc = o->table ? 0 : sequences_resolve(v.src, v.dst, cfg, &seqs);
	if (rc) {
		code = rc == SEQUENCES_CONFIG ? EXIT_CONFIG : EXIT_UNAVAILABLE;
		goto out;
	}
	struct snapfence_options fo = { .cfg = cfg, .ids = &v.ids, .name = "verify", .timeout_s = o->fence_timeout_s,
					.stop = o->stop, .connect_repl = connect_repl, .arg = &v };
	rc = snapfence_set(&v.fence, v.src, v.dst, &fo);
	if (rc) {
		code = rc;
		goto out;
	}
	/* the source as of the snapshot, the target held at the fence */
	rc = snapfence_source_begin(v.src, &v.fence);
	/* held at the fence, the checkpoint does not move while we compare */
	if (rc < 0 || checkpoint_load(v.dst, cfg->checkpoint_schema, &v.ids, &cp) < 0 ||
	    pgconn_command(v.dst, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") < 0)
		goto out;
	for (size_t i = 0; i < cfg->n_tables && !*o->stop && !lost(&v); i++) {
		char name[300];
		snprintf(name, sizeof name, "%s.%s", cfg->tables[i].schema, cfg->tables[i].name);
		if (o->table && strcmp(name, o->table) != 0)
			continue;
		fault_pause("verify.compare");
		verify_compare_table(&v, &cfg->tables[i], &v.results[v.n_results++]);
	}
	if (lost(&v))
		goto out; /* a table that could not be compared for it is no divergence */
	pgconn_command(v.src, "COMMIT");
	pgconn_command(v.dst, "COMMIT");
	release(&v);
	if (*o->stop) {
		code = EXIT_TEMPFAIL;
		goto out;
	}
	/* sequences are not transactional: read as they are now, after the
	 * tables, outside the snapshot */
	if (sequences_read(v.src, v.dst, &seqs) < 0)
		goto out;
	if (checkpoint_quarantine_list(v.dst, cfg->checkpoint_schema, &v.ids, true, &q, &nq) < 0 ||
	    runs_load(v.dst, cfg->checkpoint_schema, cfg->source_id, cfg->dataset_id, NULL, &run) < 0)
		goto out;
	if (run.exists && checkpoint_handoff_count(v.dst, cfg->checkpoint_schema, &v.ids, run.run_id, &handoff_tables) < 0)
		goto out;

	/* verdict */
	int diverged_tables = 0;
	for (size_t i = 0; i < v.n_results; i++)
		diverged_tables += !table_ok(&v.results[i]);
	/* a run that a divergence failed after its handoff still handed off:
	 * the data decides, and the evidence since the failure the run */
	bool failed = run.exists && run.state == RUN_FAILED_RECOVERABLE;
	bool handoff_ok = !run.exists || ((run.state >= RUN_STREAM_HANDOFF_READY || failed) &&
					  handoff_tables >= (int64_t)cfg->n_tables);
	int sequences_behind = 0;
	for (size_t i = 0; i < seqs.n; i++)
		sequences_behind += sequence_behind(&seqs.items[i]);
	/* the data (tables, quarantine, handoff) decides the run's state; the
	 * verdict also needs every target sequence at or ahead of its source
	 * with --sequences strict (report: they are reported, not judged) */
	bool data_converged = diverged_tables == 0 && nq == 0 && handoff_ok;
	bool strict = o->sequences_strict;
	bool converged = data_converged && (sequences_behind == 0 || !strict);
	/* DESIGN §9: a failed run whose data converged again is verified again
	 * only with a repair recorded since it failed (a reseed walks the run
	 * forward itself); without one (a repair by hand) it stays failed */
	bool repaired = false;
	if (failed && data_converged && !o->table &&
	    runs_repaired_since_failure(v.dst, cfg->checkpoint_schema, cfg->source_id, cfg->dataset_id, run.run_id, &repaired) < 0)
		goto out;
	bool hand_repaired = failed && data_converged && !o->table && !repaired;
	char *plan_command = recovery_command("repair-plan", cfg->path, NULL);
	{
		char *full = xasprintf("%s --from VERIFY.json", plan_command);
		free(plan_command);
		plan_command = full;
	}
	char *repair_command = xasprintf("%s --apply", plan_command);
	const char *run_text = !failed ? NULL
			       : o->table ? "failed_recoverable: only a verify of every table promotes it"
			       : !data_converged ? "failed_recoverable: the data does not converge (or the snapshot is not handed off)"
			       : repaired ? "verified again: a repair was recorded since it failed"
					  : "failed_recoverable: the data converged, but no repair or reseed is recorded since it "
					    "failed (a repair by hand records none): not verified again";
	char *sync_command = recovery_command("sequences sync", cfg->path, NULL);
	char l1[LSN_FORMAT_LEN], l2[LSN_FORMAT_LEN];
	lsn_format(v.fence.lsn, l1);
	lsn_format(cp.applied_through_lsn, l2);
	const char *handoff_text = !run.exists ? "no snapshot run (the flow was started with --start-now): nothing to check"
				   : handoff_ok ? "the run reached stream_handoff_ready at one consistent LSN before streaming"
						: "the snapshot run is not handed off";
	if (o->json) {
		struct jsonw w;
		jsonw_init(&w, stdout, false);
		char *flow = config_flow_id(cfg);
		jsonw_open(&w, NULL, '{');
		jsonw_str(&w, "flow", flow);
		free(flow);
		jsonw_str(&w, "compared_at", l1);
		jsonw_open(&w, "tables", '[');
		for (size_t i = 0; i < v.n_results; i++) {
			struct table_result *r = &v.results[i];
			jsonw_open(&w, NULL, '{');
			jsonw_str(&w, "table", r->name);
			jsonw_str(&w, "result", table_ok(r) ? "converged" : "diverged");
			jsonw_str(&w, "scope", scope_names[r->scope]);
			jsonw_bool(&w, "keyless", r->keyless);
			if (r->key_columns) {
				jsonw_open(&w, "key_columns", '[');
				for (int c = 0; c < r->n_key_columns; c++)
					jsonw_text(&w, NULL, r->key_columns[c]);
				jsonw_close(&w, ']');
			} else {
				jsonw_null(&w, "key_columns");
			}
			jsonw_u64(&w, "source_rows", true, r->source_rows);
			jsonw_u64(&w, "target_rows", true, r->target_rows);
			if (r->error)
				jsonw_str(&w, "error", r->error_text);
			jsonw_open(&w, "divergences", '[');
			for (int k = 0; k < 3; k++) {
				if (!r->count[k])
					continue;
				jsonw_open(&w, NULL, '{');
				jsonw_str(&w, "kind", div_names[k]);
				jsonw_u64(&w, "count", true, r->count[k]);
				jsonw_open(&w, "keys", '[');
				for (int e = 0; e < r->n_examples[k] && e < MAX_EXAMPLES; e++)
					jsonw_str(&w, NULL, r->examples[k][e]);
				jsonw_close(&w, ']');
				if (r->key_columns)
					key_values_json(&w, r, k);
				jsonw_close(&w, '}');
			}
			jsonw_close(&w, ']');
			if (!table_ok(r)) {
				char *recovery = recovery_command("reseed", cfg->path, r->name);
				jsonw_str(&w, "recovery", recovery);
				free(recovery);
				if (!r->keyless && !r->error)
					jsonw_str(&w, "repair", plan_command);
			}
			jsonw_close(&w, '}');
		}
		jsonw_close(&w, ']');
		jsonw_open(&w, "watermark", '{');
		jsonw_lsn(&w, "fence_lsn", true, v.fence.lsn);
		jsonw_lsn(&w, "applied_through_lsn", true, cp.applied_through_lsn);
		jsonw_lsn(&w, "last_commit_lsn", true, cp.last_commit_lsn);
		jsonw_close(&w, '}');
		jsonw_open(&w, "handoff", '{');
		jsonw_bool(&w, "ok", handoff_ok);
		if (run.exists) {
			jsonw_open(&w, "run", '{');
			jsonw_str(&w, "run_id", run.run_id);
			jsonw_str(&w, "state", run_state_name(run.state));
			jsonw_i64(&w, "tables_handed_off", true, handoff_tables);
			jsonw_close(&w, '}');
		} else {
			jsonw_null(&w, "run");
		}
		jsonw_str(&w, "detail", handoff_text);
		jsonw_close(&w, '}');
		if (failed) {
			jsonw_open(&w, "run", '{');
			jsonw_str(&w, "run_id", run.run_id);
			jsonw_str(&w, "state", repaired ? "verified" : "failed_recoverable");
			jsonw_bool(&w, "repaired_since_failure", repaired);
			jsonw_bool(&w, "hand_repair", hand_repaired);
			jsonw_str(&w, "detail", run_text);
			if (hand_repaired)
				jsonw_str(&w, "recovery", repair_command);
			jsonw_close(&w, '}');
		}
		jsonw_open(&w, "duplicates", '{');
		jsonw_u64(&w, "skipped_by_dedup", true, cp.skipped_duplicates);
		jsonw_u64(&w, "applied_transactions", true, cp.applied_transactions);
		jsonw_close(&w, '}');
		jsonw_i64(&w, "quarantined", true, nq);
		jsonw_open(&w, "sequences", '[');
		for (size_t i = 0; i < seqs.n; i++) {
			const struct flow_sequence *s = &seqs.items[i];
			jsonw_open(&w, NULL, '{');
			sequences_json_fields(&w, s);
			jsonw_str(&w, "state", sequences_state_name(s));
			jsonw_str(&w, "result", !sequence_behind(s) ? "converged" : strict ? "diverged" : "behind");
			if (sequence_behind(s)) {
				if (strict)
					jsonw_str(&w, "divergence", "sequence_behind");
				jsonw_str(&w, "recovery", sync_command);
			}
			jsonw_close(&w, '}');
		}
		jsonw_close(&w, ']');
		jsonw_i64(&w, "sequences_behind", true, sequences_behind);
		jsonw_str(&w, "sequences_mode", strict ? "strict" : "report");
		jsonw_str(&w, "data_result", data_converged ? "CONVERGED" : "DIVERGED");
		jsonw_str(&w, "result", converged ? "CONVERGED" : "DIVERGED");
		jsonw_close(&w, '}');
		putchar('\n');
	} else {
		for (size_t i = 0; i < v.n_results; i++) {
			struct table_result *r = &v.results[i];
			if (table_ok(r)) {
				printf("table %s: %" PRIu64 " rows%s, checksums match%s\n", r->name, r->source_rows, scope_text[r->scope],
				       r->keyless ? " (no key: compared as a multiset of whole rows; a changed row shows as one missing and one extra)" : "");
				continue;
			}
			if (r->error) {
				printf("table %s: DIVERGED: %s\n", r->name, r->error_text);
			} else {
				printf("table %s: DIVERGED: source %" PRIu64 " rows, target %" PRIu64 " rows%s\n", r->name, r->source_rows,
				       r->target_rows, scope_text[r->scope]);
				for (int k = 0; k < 3; k++) {
					if (!r->count[k])
						continue;
					printf("  %s: %" PRIu64 " (keys:", div_names[k], r->count[k]);
					for (int e = 0; e < r->n_examples[k] && e < MAX_EXAMPLES; e++)
						printf(" %s", r->examples[k][e]);
					printf("%s)\n", r->count[k] > (uint64_t)r->n_examples[k] || r->n_examples[k] > MAX_EXAMPLES ? " ..." : "");
				}
			}
			char *recovery = recovery_command("reseed", cfg->path, r->name);
			printf("  recover: %s\n", recovery);
			if (!r->keyless && !r->error)
				printf("  or row by row: %s (VERIFY.json: this verify's --format json)\n", plan_command);
			free(recovery);
		}
		printf("watermark: compared at %s; the target had applied through %s\n", l1, l2);
		printf("handoff: %s%s%s\n", handoff_text, run.exists ? ", run " : "", run.exists ? run.run_id : "");
		if (!handoff_ok) {
			char *recovery = recovery_command("snapshot", cfg->path, NULL);
			printf("  recover: %s\n", recovery);
			free(recovery);
		}
		if (failed) {
			printf("run %s: %s\n", run.run_id, run_text);
			if (hand_repaired)
				printf("  recover: %s, or the reseed of each table that diverged (trellara reseed)\n",
				       repair_command);
		}
		printf("duplicates: %" PRIu64 " skipped by dedup, %" PRIu64 " transactions applied once each\n", cp.skipped_duplicates,
		       cp.applied_transactions);
		if (nq) {
			printf("quarantine: %d transactions quarantined (first: transaction %u, %s)\n", nq, q[0].xid, q[0].reason);
			char *command = recovery_command("quarantine list", cfg->path, NULL);
			printf("  recover: %s\n", command);
			free(command);
		}
		for (size_t i = 0; i < seqs.n; i++) {
			const struct flow_sequence *s = &seqs.items[i];
			if (!s->read) {
				printf("sequence %s: no target sequence (the target's column %s has none): not compared\n", s->source_name,
				       s->owned_by ? s->owned_by : "?");
				continue;
			}
			char source[48], target[48];
			sequences_format_state(&s->source, source, sizeof source);
			sequences_format_state(&s->target, target, sizeof target);
			if (sequence_behind(s) && strict)
				printf("sequence %s: DIVERGED: sequence_behind: source %s, target %s\n", s->source_name, source, target);
			else if (sequence_behind(s))
				printf("sequence %s: behind: source %s, target %s (the stream carries no sequence values)\n",
				       s->source_name, source, target);
			else
				printf("sequence %s: source %s, target %s (%s)\n", s->source_name, source, target,
				       strcmp(sequences_state_name(s), "same") == 0 ? "the same" : "ahead of the source");
		}
		if (sequences_behind)
			printf("  %s: %s\n", strict ? "recover" : "sync", sync_command);
		if (converged && sequences_behind) {
			printf("result: CONVERGED (%d sequence%s behind the source: sync %s before writes move to the target)\n",
			       sequences_behind, sequences_behind == 1 ? "" : "s", sequences_behind == 1 ? "it" : "them");
		} else if (converged) {
			printf("result: CONVERGED\n");
		} else {
			printf("result: DIVERGED (%d tables%s%s", diverged_tables, nq ? ", quarantine" : "", handoff_ok ? "" : ", handoff");
			if (sequences_behind)
				printf(", %d sequence%s behind", sequences_behind, sequences_behind == 1 ? "" : "s");
			printf(")\n");
		}
	}
	fflush(stdout);
	free(sync_command);
	free(repair_command);
	free(plan_command);
	/* DESIGN §9: only a converged verify promotes; a divergence demotes a
	 * verified run.  The run is the data's: sequences behind (repaired by
	 * a sync, not a new copy) neither promote nor demote it */
	if (run.exists && data_converged && !o->table &&
	    (run.state == RUN_STREAM_HANDOFF_READY || run.state == RUN_STREAMING || run.state == RUN_VERIFIED || repaired))
		runs_move(v.dst, cfg->checkpoint_schema, cfg->source_id, cfg->dataset_id, run.run_id, RUN_VERIFIED, NULL, 0, NULL,
			  NULL, NULL, false);
	if (run.exists && !data_converged && run.state == RUN_VERIFIED) {
		char reason[256];
		snprintf(reason, sizeof reason, "verify at %s found %d diverged tables%s", l1, diverged_tables,
			 nq ? " and quarantined transactions" : "");
		runs_move(v.dst, cfg->checkpoint_schema, cfg->source_id, cfg->dataset_id, run.run_id, RUN_FAILED_RECOVERABLE, NULL,
			  0, NULL, NULL, reason, true);
	}
	code = converged ? EXIT_OK : EXIT_NEGATIVE;
	if (o->compared_at)
		*o->compared_at = v.fence.lsn;
out:
	if (code == EXIT_UNAVAILABLE)
		lost(&v); /* before the release clears the connections' errors */
	if (v.dst && v.fence.fenced) {
		PGTransactionStatusType ts = PQtransactionStatus(v.dst);
		if (ts == PQTRANS_INTRANS || ts == PQTRANS_INERROR) /* not PQTRANS_UNKNOWN: the connection is lost */
			pgconn_command(v.dst, "ROLLBACK");
		release(&v);
	}
	release(&v);
	for (size_t i = 0; i < v.n_results; i++)
		for (int k = 0; k < 3; k++)
		{
			for (int e = 0; e < v.results[i].n_examples[k]; e++)
				free(v.results[i].examples[k][e]);
			free(v.results[i].examples[k]);
		}
	for (size_t i = 0; i < v.n_results; i++) {
		for (int c = 0; c < v.results[i].n_key_columns; c++)
			free(v.results[i].key_columns[c]);
		free(v.results[i].key_columns);
	}
	free(v.results);
	free(q);
	sequences_free(&seqs);
	PQfinish(v.src);
	PQfinish(v.dst);
	return code;
}

int verify_run(const struct verify_options *o)
{
	int max_attempts = o->max_attempts > 1 ? o->max_attempts : 1;
	unsigned int seed = backoff_seed();
	struct backoff_jitter jitter = backoff_jitter_rand_r(&seed);
	for (int attempt = 1;; attempt++) {
		struct verify_loss loss = { 0 };
		int code = verify_pass(o, &loss);
		if (*o->stop)
			return code == EXIT_OK || code == EXIT_NEGATIVE ? code : EXIT_TEMPFAIL;
		if (code != EXIT_UNAVAILABLE || !loss.side)
			return code;
		if (attempt >= max_attempts) {
			log_error("the %s is unavailable after %d attempt%s: %s", loss.side, attempt, attempt == 1 ? "" : "s",
				  loss.why);
			return EXIT_UNAVAILABLE;
		}
		int64_t delay = backoff_next_us((int64_t)o->retry_base_ms * 1000, attempt, &jitter);
		log_warn("lost the %s connection (%s); starting the pass again in %.1f s, attempt %d of %d", loss.side,
			 loss.why, (double)delay / 1e6, attempt + 1, max_attempts);
		backoff_wait(delay, o->stop, NULL, NULL);
		if (*o->stop)
			return EXIT_TEMPFAIL;
	}
}
