/*
 * applyd.c - trellara-applyd's process around the apply engine (applyd.h).
 *
 * The engine (common/apply/apply_engine.c) decides and sequences
 * everything about frames, batches, chunk sets, fences and quarantine;
 * this file connects to the target (replica role, checkpoint schema,
 * the advisory lock of the flow, the stream binding), positions the
 * reader, feeds the engine step by step, waits where a step says so,
 * and reconnects or backs off where an outcome asks for it.  The
 * engine's target is target_pg.c (libpq, pipelined).
 */
#include "applyd.h"
#include "target_pg.h"
#include "applyd_jetstream.h"
#include "../trellara-contract-test/contract.h"

#include "trellara/apply_engine.h"
#include "trellara/backoff.h"
#include "trellara/sqlstate.h"
#include "trellara/checkpoint.h"
#include "trellara/envelope.h"
#include "trellara/clock.h"
#include "trellara/defaults.h"
#include "trellara/log.h"
#include "trellara/lsn.h"
#include "trellara/metrics.h"
#include "trellara/notify.h"
#include "trellara/pgconn.h"
#include "trellara/stream.h"
#include "trellara/stream_exit.h"
#include "trellara/stream_fs.h"
#include "trellara/xalloc.h"
#include "trellara/strbuf.h"

#include <errno.h>
#include <inttypes.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


/* dataset.contract: pinned.  The frames reach the engine through this
 * gate, which checks the relation descriptors every transaction's
 * envelope carries (txn, chunk and pending_chunk frames: the source's
 * columns, types and key flags, as capture received them) against the
 * pin.  At the first that differs it logs the drift and answers "end of
 * the stream" once, so the engine commits what it holds of the
 * transactions before (a chunk set in progress is not committed: never
 * half a transaction), then "invalid" to every call: apply stops before
 * applying past the drift, and applyd_run exits EXIT_CONFIG. */
struct contract_gate {
	struct frame_source inner; /* owned */
	const struct flow_config *cfg;
	const struct contract_fingerprint *pin; /* the one checked against: the applyd's, or reloaded */
	struct contract_fingerprint reloaded;   /* owned: the pin read again at a difference */
	int drift; /* 0; 1 drifted, "end" said; 2 "invalid" from now on */
};

/* Whether the pin read again differs from the one held: its time, or,
 * pinned within the same second (pinned_at has seconds only), its
 * content. */
static bool pin_changed(const struct contract_fingerprint *held, const struct contract_fingerprint *fresh)
{
	if (!held->pinned_at || !fresh->pinned_at || strcmp(held->pinned_at, fresh->pinned_at) != 0)
		return true;
	struct contract_diffs d = { 0 };
	contract_compare(fresh, held, CONTRACT_SOURCE_PIN, &d);
	bool changed = d.n > 0;
	contract_diffs_free(&d);
	if (!changed) {
		contract_compare(held, fresh, CONTRACT_SOURCE_PIN, &d);
		changed = d.n > 0;
		contract_diffs_free(&d);
	}
	return changed;
}

/* The pin file read again: a contract refreshed since applyd checked the
 * target (contract-test --update writes one only when source and target
 * agree) is taken when it differs from the one held.  true when there is
 * a new one to check with. */
static bool gate_reload(struct contract_gate *g)
{
	struct contract_fingerprint fresh;
	bool exists;
	char *flow = config_flow_id(g->cfg);
	bool taken = false;
	if (contract_pin_load(g->cfg->contract_pin, &fresh, &exists) == 0 && exists && strcmp(fresh.flow, flow) == 0 &&
	    pin_changed(g->pin, &fresh)) {
		contract_fingerprint_free(&g->reloaded);
		g->reloaded = fresh;
		g->pin = &g->reloaded;
		taken = true;
		log_info("contract pin \"%s\" was refreshed (pinned at %s): checking with it", g->cfg->contract_pin,
			 fresh.pinned_at ? fresh.pinned_at : "?");
	} else {
		contract_fingerprint_free(&fresh);
	}
	free(flow);
	return taken;
}

static int gate_check(struct contract_gate *g, const struct stream_frame *f)
{
	size_t skip;
	switch (f->header.type) {
	case FRAME_TXN: skip = 0; break;
	case FRAME_CHUNK: skip = 4; break;
	case FRAME_PENDING_CHUNK: skip = 12; break;
	default: return 0;
	}
	if (f->header.payload_length < skip)
		return 0; /* the engine reports a malformed frame */
	struct env_decoder dec = { 0 };
	int drift = 0;
	if (env_decode_begin(&dec, f->payload + skip, f->header.payload_length - skip) < 0)
		goto out; /* the same */
	for (uint32_t i = 0; i < dec.header.n_relations && !drift; i++) {
		const struct env_relation *r = &dec.header.relations[i];
		struct contract_rel_column *cols = xcalloc(r->n_columns ? r->n_columns : 1, sizeof *cols);
		for (uint16_t k = 0; k < r->n_columns; k++)
			cols[k] = (struct contract_rel_column){ r->columns[k].name, r->columns[k].name_len, r->columns[k].type_oid,
								r->columns[k].typmod, r->columns[k].key };
		struct contract_diff d;
		drift = contract_check_relation(g->pin, r->schema, r->schema_len, r->name, r->name_len, (char)r->replident, cols,
						r->n_columns, &d);
		if (drift && gate_reload(g)) {
			contract_diff_release(&d);
			drift = contract_check_relation(g->pin, r->schema, r->schema_len, r->name, r->name_len,
							(char)r->replident, cols, r->n_columns, &d);
		}
		free(cols);
		if (drift) {
			contract_log_drift(&d, g->cfg);
			log_error("applyd stops before applying the transaction at stream offset %" PRIu64
				  " (dataset.contract: pinned): it changes \"%s\" past the pin",
				  f->header.offset, d.table);
			contract_diff_release(&d);
		}
	}
out:
	env_decoder_free(&dec);
	return drift;
}

static int gate_next(void *impl, struct stream_frame *f)
{
	struct contract_gate *g = impl;
	if (g->drift == 1) {
		g->drift = 2;
		return STREAM_EINVAL;
	}
	if (g->drift)
		return STREAM_EINVAL;
	int st = frame_source_next(&g->inner, f);
	if (st == STREAM_OK && g->pin && gate_check(g, f)) {
		g->drift = 1;
		return STREAM_END;
	}
	return st;
}

static int gate_seek(void *impl, uint64_t offset)
{
	struct contract_gate *g = impl;
	return frame_source_seek(&g->inner, offset);
}

static int gate_wait(void *impl, int timeout_ms)
{
	struct contract_gate *g = impl;
	return g->drift ? STREAM_OK : frame_source_wait(&g->inner, timeout_ms);
}

static int gate_position_get(void *impl, uint64_t *position, bool *exists)
{
	struct contract_gate *g = impl;
	return frame_source_position_get(&g->inner, position, exists);
}

static int gate_position_set(void *impl, uint64_t position)
{
	struct contract_gate *g = impl;
	return frame_source_position_set(&g->inner, position);
}

static int gate_meta(void *impl, struct stream_meta *meta)
{
	struct contract_gate *g = impl;
	return frame_source_meta(&g->inner, meta);
}

static void gate_close(void *impl)
{
	struct contract_gate *g = impl;
	frame_source_close(&g->inner);
	contract_fingerprint_free(&g->reloaded);
	free(g);
}

static const struct frame_source_ops gate_ops = {
	.next = gate_next,
	.seek = gate_seek,
	.wait = gate_wait,
	.position_get = gate_position_get,
	.position_set = gate_position_set,
	.meta = gate_meta,
	.close = gate_close,
};

struct applyd {
	const struct applyd_options *o;
	const struct flow_config *cfg;
	struct applyd_stats *stats;
	char *flow; /* owned */
	struct flow_ids ids;
	PGconn *conn;
	struct target_pg target;
	/* apply.workers - 1 more connections (PARALLEL APPLY) */
	PGconn *wconn[MAX_APPLY_WORKERS];
	struct target_pg wtarget[MAX_APPLY_WORKERS];
	int n_workers;
	struct apply_engine *engine; /* owned */
	struct frame_source src;     /* owned: the stream, local or JetStream */
	const char *stream_name;     /* names it in messages */
	struct apply_checkpoint cp;  /* as read at connect */
	struct notify_watchdog watchdog;
	struct metrics_publisher metrics; /* observability.metrics_dir/applyd.prom */
	bool ready_sent;
	unsigned int rng;
	struct pgconn_failures failures; /* failed connections and ended sessions with the target, by cause */
	struct contract_fingerprint pin; /* owned: dataset.contract pinned, the pin the target was checked against */
	struct contract_gate *gate;      /* the source's impl when pinned (owned by src) */
	uint64_t trimmed_released, trimmed_changes; /* the engine's stats at the last trim_heap */
};

/* The samples of applyd.prom (metrics_publish: at most once a second). */
static void fill_metrics(struct metrics *m, int64_t now_us, void *arg)
{
	(void)now_us;
	struct applyd *a = arg;
	const struct apply_checkpoint *cp = apply_engine_checkpoint(a->engine);
	const struct apply_engine_stats *st = apply_engine_stats(a->engine);
	metrics_add_u64(m, "trellara_applyd_transactions_total", "source transactions applied (checkpoint)", METRIC_COUNTER, NULL, NULL, cp->applied_transactions);
	metrics_add_u64(m, "trellara_applyd_changes_total", "row changes applied (checkpoint)", METRIC_COUNTER, NULL, NULL, cp->applied_changes);
	metrics_add_u64(m, "trellara_applyd_skipped_duplicates_total", "transactions skipped by dedup (checkpoint)", METRIC_COUNTER, NULL, NULL, cp->skipped_duplicates);
	metrics_add_u64(m, "trellara_applyd_quarantined_total", "transactions quarantined by this process", METRIC_COUNTER, NULL, NULL, st->quarantined);
	metrics_add_u64(m, "trellara_applyd_batches_total", "target transactions committed by this process", METRIC_COUNTER, NULL, NULL, st->batches);
	metrics_add_u64(m, "trellara_applyd_received_changes_total", "row changes received in committed batches by this process", METRIC_COUNTER, NULL, NULL, st->changes);
	metrics_add_u64(m, "trellara_applyd_statements_total", "statements executed for committed batches by this process", METRIC_COUNTER, NULL, NULL, st->statements);
	metrics_add_u64(m, "trellara_applyd_copy_statements_total", "of the statements, COPYs of runs of inserts (apply.copy_inserts)", METRIC_COUNTER, NULL, NULL, st->copies);
	metrics_add_u64(m, "trellara_applyd_folded_changes_total", "row changes folded away by compaction in committed batches by this process", METRIC_COUNTER, NULL, NULL, st->folded);
	metrics_add_u64(m, "trellara_applyd_overlapped_batches_total", "batches committed while an earlier one was in flight (apply.workers > 1)", METRIC_COUNTER, NULL, NULL, st->overlapped);
	metrics_add_u64(m, "trellara_applyd_dependency_waits_total", "waits for an earlier batch in flight holding a key (apply.workers > 1)", METRIC_COUNTER, NULL, NULL, st->dependency_waits);
	metrics_add_u64(m, "trellara_applyd_serial_fallbacks_total", "times the batches in flight were rolled back and applied again one at a time", METRIC_COUNTER, NULL, NULL, st->serial_fallbacks);
	metrics_add_u64(m, "trellara_applyd_applied_through_lsn_bytes", "source position applied through, as a byte position", METRIC_GAUGE, NULL, NULL, cp->applied_through_lsn);
	pgconn_failures_metrics(m, "applyd", "target", &a->failures);
	metrics_add_u64(m, "trellara_applyd_stream_offset", "next stream offset to apply (checkpoint)", METRIC_GAUGE, NULL, NULL, cp->stream_offset);
}

static void write_metrics(struct applyd *a, bool force)
{
	metrics_publish(&a->metrics, clock_mono_us(), force, fill_metrics, a);
}

/* ---- the loop ---- */

/* Idle: freed heap memory given back to the system (malloc_trim) after
 * the engine freed a large batch's segment, or after APPLYD_TRIM_CHANGES
 * more row changes (a chunked transaction's, a backlog's): the allocator
 * keeps what a burst freed otherwise, and a long-running applier's
 * resident memory would stay at the largest burst it ever saw. */
#define APPLYD_TRIM_CHANGES 100000

static void trim_heap(struct applyd *a)
{
	const struct apply_engine_stats *st = apply_engine_stats(a->engine);
	if (st->memory_released == a->trimmed_released && st->changes - a->trimmed_changes < APPLYD_TRIM_CHANGES)
		return;
	a->trimmed_released = st->memory_released;
	a->trimmed_changes = st->changes;
#ifdef __GLIBC__
	malloc_trim(0);
#endif
}

/* Until stopped (APPLY_OK) or anything else than a frame applied. */
static struct apply_outcome apply_loop(struct applyd *a)
{
	for (;;) {
		notify_watchdog_tick(&a->watchdog);
		write_metrics(a, false);
		if (*a->o->stop) {
			notify_send("STOPPING=1");
			return apply_engine_stop(a->engine, clock_mono_us());
		}
		enum apply_step what;
		struct apply_outcome rc = apply_engine_step(a->engine, clock_mono_us(), &what);
		if (!apply_is_ok(rc))
			return rc;
		if (what == APPLY_STEP_IDLE) {
			trim_heap(a);
			frame_source_wait(&a->src, 200);
		} else if (what == APPLY_STEP_HELD) {
			struct timespec ts = { 0, 100 * 1000 * 1000 };
			nanosleep(&ts, NULL);
		}
	}
}

/* Apply as PostgreSQL's own apply worker does: with the replica role the
 * target's ordinary triggers and its foreign-key checks and actions do
 * not fire (the source already ran them, and the stream carries what
 * they did); ENABLE REPLICA and ENABLE ALWAYS triggers do.  A role that
 * may not set it fails closed. */
static struct apply_outcome set_replica_role(struct applyd *a, PGconn *conn)
{
	PGresult *res = PQexec(conn, "SET session_replication_role = replica");
	if (PQresultStatus(res) == PGRES_COMMAND_OK) {
		PQclear(res);
		return apply_ok();
	}
	const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	struct apply_outcome rc = apply_reconnect();
	if (sqlstate_classify(state) == SQLSTATE_CLASS_PERMISSION) {
		char *role = pgconn_quote_ident(conn, PQuser(conn));
		log_error("target: role %s may not set session_replication_role, which applyd needs so that target triggers and foreign-key actions do not fire: %s",
			  role, msg ? msg : "permission denied");
		char *config = strbuf_shell_quote(a->cfg->path);
		log_hint("as a superuser on the target: GRANT SET ON PARAMETER session_replication_role TO %s (PostgreSQL 15 and later; before 15 the role must be a superuser); \"trellara check --config %s\" checks it",
			 role, config);
		free(config);
		free(role);
		rc = apply_exit(EXIT_CONFIG);
	} else {
		log_error("target: cannot set session_replication_role: %s", msg ? msg : PQerrorMessage(conn));
	}
	PQclear(res);
	return rc;
}

/* The checkpoint's offsets belong to one stream instance (its id in the
 * stream's meta).  Binds an unbound checkpoint; refuses another instance
 * unless nothing can be missing between the two (the target applied past
 * where the new stream begins, or the target's copies cover it), and then
 * reads the new stream from its start (dedup by commit LSN).  Returns
 * APPLY_OK, APPLY_EXIT or APPLY_RECONNECT. */
static struct apply_outcome bind_stream(struct applyd *a, const struct stream_meta *meta)
{
	struct apply_checkpoint *cp = &a->cp;
	const char *path = a->stream_name;
	if (!meta->stream_id)
		return apply_ok(); /* no writer opened it since streams had ids */
	if (cp->stream_id[0] && strcmp(cp->stream_id, meta->stream_id) == 0)
		return apply_ok();
	if (cp->slot_name[0] && meta->slot && strcmp(cp->slot_name, meta->slot) != 0) {
		log_error("the target's checkpoint of group \"%s\" was applied from replication slot \"%s\", but stream %s follows slot \"%s\"",
			  a->cfg->consumer_group, cp->slot_name, path, meta->slot);
		log_hint("point source.slot and stream.path back at the slot and stream this target was applied from");
		return apply_exit(EXIT_CONFIG);
	}
	uint32_t timeline = meta->timeline ? (uint32_t)strtoul(meta->timeline, NULL, 10) : 0;
	bool progress = cp->stream_offset || cp->applied_through_lsn || cp->last_commit_lsn;
	if (!cp->stream_id[0] || !progress) {
		/* first binding: a new checkpoint, or one written before
		 * checkpoints named their stream (its offsets are taken to be
		 * this stream's) */
		if (checkpoint_bind_stream(a->conn, a->cfg->checkpoint_schema, &a->ids, meta->stream_id, meta->slot,
					   meta->system_identifier, timeline, false) < 0)
			return apply_reconnect();
		snprintf(cp->stream_id, sizeof cp->stream_id, "%s", meta->stream_id);
		log_info("checkpoint of group \"%s\" bound to stream %s (id %s)", a->cfg->consumer_group, path,
			 meta->stream_id);
		return apply_ok();
	}
	if (!meta->slot) {
		log_info("stream %s (id %s) is not bound to a slot yet: waiting for capture", path, meta->stream_id);
		return apply_reconnect();
	}
	uint64_t start = 0, covered = 0;
	bool known = meta->start_lsn && lsn_parse(meta->start_lsn, &start);
	char **rels;
	uint64_t *lsns;
	int n;
	if (checkpoint_table_watermarks(a->conn, a->cfg->checkpoint_schema, &a->ids, &rels, &lsns, &n) < 0)
		return apply_reconnect();
	for (int i = 0; i < n; i++) {
		if (i == 0 || lsns[i] < covered)
			covered = lsns[i];
		free(rels[i]);
	}
	free(rels);
	free(lsns);
	char l1[LSN_FORMAT_LEN], l2[LSN_FORMAT_LEN], l3[LSN_FORMAT_LEN];
	if (!known || (cp->applied_through_lsn < start && covered < start)) {
		log_error("the target's checkpoint of group \"%s\" (offset %" PRIu64 ", applied through %s) belongs to stream instance %s, but stream %s is instance %s, starting at %s: its offsets are not the checkpoint's, and the changes in between would be skipped",
			  a->cfg->consumer_group, cp->stream_offset, lsn_format(cp->applied_through_lsn, l1), cp->stream_id,
			  path, meta->stream_id, known ? lsn_format(start, l2) : "an unknown position");
		char *config = strbuf_shell_quote(a->cfg->path);
		log_hint("restore the stream directory the target was applied from, or copy every table again (\"trellara snapshot --config %s --force\"); applyd then reads the new stream from its start",
			 config);
		free(config);
		return apply_exit(EXIT_DATAERR);
	}
	if (checkpoint_bind_stream(a->conn, a->cfg->checkpoint_schema, &a->ids, meta->stream_id, meta->slot,
				   meta->system_identifier, timeline, true) < 0)
		return apply_reconnect();
	log_warn("stream %s was replaced (instance %s, was %s); it starts at %s, and the target is applied through %s with copies through %s: reading it from its start, skipping what is applied by commit LSN",
		 path, meta->stream_id, cp->stream_id, lsn_format(start, l1), lsn_format(cp->applied_through_lsn, l2),
		 lsn_format(covered, l3));
	snprintf(cp->stream_id, sizeof cp->stream_id, "%s", meta->stream_id);
	cp->stream_offset = 0;
	return apply_ok();
}

/* One session as applyd runs batches on it: the replica role, every
 * COMMIT flushed, no idle timeout (a chunk set holds its target
 * transaction open while capture is still writing it). */
static struct apply_outcome session_setup(struct applyd *a, PGconn *conn)
{
	struct apply_outcome role_rc = set_replica_role(a, conn);
	if (!apply_is_ok(role_rc))
		return role_rc;
	if (pgconn_command(conn, "SET synchronous_commit = on") < 0 ||
	    pgconn_command(conn, "SET idle_in_transaction_session_timeout = 0") < 0)
		return apply_reconnect();
	return apply_ok();
}

/* A connection to the target failed: counted by cause, published now
 * (trellara status reads refused credentials from applyd.prom). */
static struct apply_outcome connect_failed(struct applyd *a)
{
	pgconn_failures_count(&a->failures, "target.database_url");
	write_metrics(a, true);
	return apply_reconnect();
}

/* The further connections of apply.workers, each a target_pg the engine
 * runs batches on (it was given them at start). */
static struct apply_outcome connect_workers(struct applyd *a)
{
	for (int i = 0; i < a->n_workers; i++) {
		char *url = config_database_url(a->cfg, false);
		a->wconn[i] = pgconn_connect(url, PGCONN_NORMAL, "trellara-applyd", "target");
		config_free_secret(url);
		if (!a->wconn[i])
			return connect_failed(a);
		struct apply_outcome rc = session_setup(a, a->wconn[i]);
		if (!apply_is_ok(rc))
			return rc;
		a->wtarget[i].conn = a->wconn[i];
		if (target_pg_open(&a->wtarget[i]) < 0)
			return apply_reconnect();
	}
	return apply_ok();
}

static struct apply_outcome connect_target(struct applyd *a)
{
	char *url = config_database_url(a->cfg, false); /* a rotated secret file is read again */
	a->conn = pgconn_connect(url, PGCONN_NORMAL, "trellara-applyd", "target");
	config_free_secret(url);
	if (!a->conn)
		return connect_failed(a);
	pgconn_failures_ok(&a->failures);
	struct apply_outcome setup_rc = session_setup(a, a->conn);
	if (!apply_is_ok(setup_rc))
		return setup_rc;
	if (checkpoint_migrate(a->conn, a->cfg->checkpoint_schema) < 0)
		return apply_reconnect();
	if (a->cfg->contract_pinned) {
		/* the target's catalog against the pin, at every (re)connect */
		contract_fingerprint_free(&a->pin);
		contract_fingerprint_free(&a->gate->reloaded);
		a->gate->pin = NULL;
		int code = contract_start_check(a->conn, a->cfg, false, &a->pin);
		if (code < 0)
			return apply_reconnect();
		if (code != EXIT_OK)
			return apply_exit(code);
		a->gate->pin = &a->pin;
	}
	/* one applier per flow and group */
	char *key = xasprintf("trellara.applyd.%s.%s", a->flow, a->cfg->consumer_group);
	const char *p[1] = { key };
	PGresult *res = pgconn_query(a->conn, "SELECT pg_try_advisory_lock(hashtext($1))", 1, p);
	free(key);
	if (!res)
		return apply_reconnect();
	bool locked = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	if (!locked) {
		log_error("flow \"%s\" group \"%s\" is held on this target by another trellara-applyd, or by a trellara-snapshot run copying its tables",
			  a->flow, a->cfg->consumer_group);
		log_hint("one applier per flow and group; a snapshot holds the flow until its copy ends: start applyd afterwards");
		return apply_exit(EXIT_TEMPFAIL);
	}
	struct stream_meta meta;
	int meta_st = frame_source_meta(&a->src, &meta);
	if (meta_st == STREAM_EUNAVAILABLE)
		return apply_reconnect();
	if (meta_st != STREAM_OK)
		return apply_exit(EXIT_DATAERR);
	struct apply_outcome rc = apply_ok();
	if (meta.system_identifier) {
		int identity = checkpoint_check_source_identity(a->conn, a->cfg->checkpoint_schema, a->cfg->source_id,
								meta.system_identifier, meta.database ? meta.database : "");
		if (identity == 1)
			rc = apply_exit(EXIT_CONFIG);
		else if (identity < 0)
			rc = apply_reconnect();
	}
	if (apply_is_ok(rc) && checkpoint_load(a->conn, a->cfg->checkpoint_schema, &a->ids, &a->cp) < 0)
		rc = apply_reconnect();
	if (apply_is_ok(rc))
		rc = bind_stream(a, &meta);
	stream_meta_free(&meta);
	if (!apply_is_ok(rc))
		return rc;
	/* a quarantined transaction stops the flow until an operator acts */
	struct quarantine_entry *q;
	int nq;
	if (checkpoint_quarantine_list(a->conn, a->cfg->checkpoint_schema, &a->ids, true, &q, &nq) < 0)
		return apply_reconnect();
	for (int i = 0; i < nq; i++) {
		if (strcmp(q[i].state, "quarantined") == 0) {
			char l[LSN_FORMAT_LEN];
			log_error("transaction %u (commit %s) is quarantined (%s): refusing to apply past it", q[i].xid,
				  lsn_format(q[i].commit_lsn, l), q[i].reason);
			char *config = strbuf_shell_quote(a->cfg->path);
			log_hint("see \"trellara quarantine list --config %s\"", config);
			free(config);
			free(q);
			return apply_exit(EXIT_NEGATIVE);
		}
	}
	a->target.conn = a->conn;
	struct apply_tables tables = { 0 };
	if (target_pg_open(&a->target) < 0 || target_pg_tables_load(&a->target, &tables) < 0) {
		apply_tables_free(&tables);
		free(q);
		return apply_reconnect();
	}
	rc = connect_workers(a);
	if (!apply_is_ok(rc)) {
		apply_tables_free(&tables);
		free(q);
		return rc;
	}
	apply_engine_connected(a->engine, &a->cp, q, nq, &tables);
	free(q);
	return apply_ok();
}

static void disconnect_target(struct applyd *a)
{
	for (int i = 0; i < a->n_workers; i++) {
		target_pg_close(&a->wtarget[i]);
		PQfinish(a->wconn[i]);
		a->wconn[i] = NULL;
	}
	target_pg_close(&a->target);
	PQfinish(a->conn);
	a->conn = NULL;
	apply_engine_disconnected(a->engine);
}

static struct apply_outcome position_reader(struct applyd *a)
{
	uint64_t group_pos;
	bool exists;
	int st = frame_source_position_get(&a->src, &group_pos, &exists);
	if (st == STREAM_EUNAVAILABLE)
		return apply_reconnect();
	if (st != STREAM_OK)
		return apply_exit(stream_exit_code(st, STREAM_FROM_DATA));
	bool ahead;
	uint64_t start = apply_engine_start_offset(&a->cp, group_pos, exists, &ahead);
	if (ahead)
		log_warn("consumer group \"%s\" is at %" PRIu64 ", ahead of the target's checkpoint (%" PRIu64 "): reading from the checkpoint",
			 a->cfg->consumer_group, group_pos, a->cp.stream_offset);
	st = frame_source_seek(&a->src, start);
	/* Past the published end: frames a killed capture made durable but
	 * did not index yet are published again once its successor has
	 * recovered the stream; wait for that (bounded) before failing. */
	for (int waited = 0; st == STREAM_ERANGE && waited < 300 && !*a->o->stop; waited++) {
		notify_watchdog_tick(&a->watchdog);
		frame_source_wait(&a->src, 200);
		st = frame_source_seek(&a->src, start);
	}
	if (st == STREAM_EUNAVAILABLE)
		return apply_reconnect();
	if (st != STREAM_OK) {
		if (st == STREAM_ERANGE)
			log_hint("the stream does not hold offset %" PRIu64 " that the target needs next (removed by retention, or not published)",
				 start);
		return apply_exit(stream_exit_code(st, STREAM_FROM_DATA));
	}
	apply_engine_start(a->engine, start);
	char l[LSN_FORMAT_LEN];
	log_info("applying from stream offset %" PRIu64 " (checkpoint: commit %s, %" PRIu64 " transactions applied)", start,
		 lsn_format(a->cp.last_commit_lsn, l), a->cp.applied_transactions);
	return apply_ok();
}

/* The stream of the flow's kind: STREAM_OK, STREAM_END or
 * STREAM_EUNAVAILABLE (not there yet: try again), STREAM_EINVAL (refused,
 * logged).  The one place applyd knows the kinds apart. */
static int open_source(struct applyd *a, bool quiet)
{
	if (a->cfg->stream_kind == STREAM_KIND_JETSTREAM)
		return applyd_jetstream_open(a->cfg, &a->src, quiet);
	char *segments = xasprintf("%s/segments", a->cfg->stream_path);
	char *meta = xasprintf("%s/meta", a->cfg->stream_path);
	int st = STREAM_END;
	if (access(meta, F_OK) == 0 && access(segments, F_OK) == 0)
		st = frame_source_local_open(stream_fs_posix(), a->cfg->stream_path, a->cfg->consumer_group, &a->src);
	free(segments);
	free(meta);
	return st == STREAM_OK ? STREAM_OK : STREAM_END;
}

static void tick_watchdog(void *arg)
{
	notify_watchdog_tick(arg);
}

/* base doubling up to 60 x base, each +-25 % jitter (backoff.h) */
static void backoff(struct applyd *a, int attempt, const char *what)
{
	struct backoff_jitter jitter = backoff_jitter_rand_r(&a->rng);
	int64_t delay = backoff_next_us((int64_t)a->o->reconnect_base_ms * 1000, attempt, &jitter);
	log_info("%s in %.1f s (attempt %d of %d)", what, (double)delay / 1e6, attempt, a->o->max_reconnect_attempts);
	/* systemd has no "not ready": the status line says it cannot progress */
	notify_status("cannot progress: %s in %.1f s (attempt %d of %d)", what, (double)delay / 1e6, attempt,
		      a->o->max_reconnect_attempts);
	backoff_wait(delay, a->o->stop, tick_watchdog, &a->watchdog);
}

struct apply_outcome applyd_run(const struct applyd_options *o, struct applyd_stats *stats)
{
	struct applyd a = { .o = o, .cfg = o->config, .stats = stats };
	memset(stats, 0, sizeof *stats);
	a.flow = config_flow_id(a.cfg);
	a.ids = (struct flow_ids){ a.cfg->source_id, a.cfg->dataset_id, a.cfg->consumer_group };
	a.rng = backoff_seed();
	a.metrics = (struct metrics_publisher){ a.cfg->metrics_dir, "applyd", a.flow, a.cfg->source_id, 0 };
	notify_watchdog_init(&a.watchdog);
	struct apply_outcome code = apply_ok();
	/* the stream may not exist before capture first ran: wait for it */
	char *local_name = a.cfg->stream_path ? xasprintf("\"%s\"", a.cfg->stream_path) : NULL;
	char *js_name = a.cfg->jetstream_stream ? xasprintf("JetStream \"%s\"", a.cfg->jetstream_stream) : NULL;
	a.stream_name = local_name ? local_name : js_name;
	bool said = false;
	while (!*o->stop) {
		int st = open_source(&a, said);
		if (st == STREAM_OK)
			break;
		if (st == STREAM_EINVAL) {
			code = apply_exit(EXIT_CONFIG);
			goto out;
		}
		if (!said)
			log_info("waiting for the stream %s to appear%s", a.stream_name,
				 st == STREAM_EUNAVAILABLE ? " (its servers do not answer)" : "");
		said = true;
		notify_watchdog_tick(&a.watchdog);
		sleep(1);
	}
	if (!a.src.ops)
		goto out;
	if (a.cfg->contract_pinned) {
		a.gate = xcalloc(1, sizeof *a.gate);
		a.gate->inner = a.src;
		a.gate->cfg = a.cfg;
		a.src = (struct frame_source){ &gate_ops, a.gate };
	}
	a.target = (struct target_pg){ .cfg = a.cfg, .ids = a.ids };
	a.engine = apply_engine_new(a.cfg, &target_pg_ops, &a.target, &a.src);
	a.n_workers = (int)a.cfg->apply_workers - 1;
	for (int i = 0; i < a.n_workers; i++) {
		a.wtarget[i] = (struct target_pg){ .cfg = a.cfg, .ids = a.ids };
		apply_engine_add_worker(a.engine, &a.wtarget[i]);
	}
	int attempt = 0;
	while (!*o->stop) {
		if (attempt > 0) {
			if (attempt > o->max_reconnect_attempts) {
				log_error("target or stream unavailable after %d reconnect attempts (the log above says which)",
					  o->max_reconnect_attempts);
				code = apply_exit(EXIT_UNAVAILABLE);
				goto out;
			}
			backoff(&a, attempt, "reconnecting to the target");
			if (*o->stop)
				break;
		}
		attempt++;
		struct apply_outcome rc = connect_target(&a);
		if (apply_is_ok(rc))
			rc = position_reader(&a);
		if (apply_is_ok(rc)) {
			attempt = 1;
			/* ready: connected, checkpoint read, stream positioned */
			if (!a.ready_sent) {
				notify_send("READY=1");
				a.ready_sent = true;
			}
			notify_status("applying to the target");
			rc = apply_loop(&a);
			if (rc.status == APPLY_RECONNECT)
				a.failures.ended[sqlstate_end_cause(a.conn ? pgconn_sqlstate(a.conn) : "")]++;
		}
		disconnect_target(&a);
		if (rc.status == APPLY_RETRY) {
			/* the same bounded backoff as reconnecting, counted apart:
			 * connecting works, the target keeps refusing the work */
			int retries = apply_engine_retry(a.engine);
			if (retries > o->max_reconnect_attempts) {
				log_error("the target kept failing with transient errors through %d attempts (last: SQLSTATE %s)",
					  o->max_reconnect_attempts, apply_engine_last_transient(a.engine));
				code = apply_exit(EXIT_UNAVAILABLE);
				goto out;
			}
			backoff(&a, retries, "applying again");
			attempt = 0;
			continue;
		}
		if (rc.status != APPLY_RECONNECT) {
			code = rc;
			if (a.gate && a.gate->drift)
				code = apply_exit(EXIT_CONFIG); /* the engine saw "invalid": the gate stopped it */
			goto out;
		}
	}
out:
	if (a.engine) {
		write_metrics(&a, true);
		const struct apply_engine_stats *st = apply_engine_stats(a.engine);
		*stats = (struct applyd_stats){ st->transactions, st->changes, st->skipped_duplicates,
						st->skipped_by_watermark, st->skipped_unconfigured, st->batches,
						st->quarantined, st->statements, st->folded, st->copies };
	}
	log_info("applyd stopped: %" PRIu64 " transactions (%" PRIu64 " changes) applied, %" PRIu64
		 " duplicates skipped, %" PRIu64 " changes skipped below snapshot watermarks, %" PRIu64
		 " changes to tables outside the dataset, %" PRIu64 " quarantined",
		 stats->transactions, stats->changes, stats->skipped_duplicates, stats->skipped_by_watermark,
		 stats->skipped_unconfigured, stats->quarantined);
	log_info("applyd compaction: %" PRIu64 " changes received, %" PRIu64 " folded away, %" PRIu64
		 " statements executed in %" PRIu64 " target transactions, %" PRIu64 " of them COPY",
		 stats->changes, stats->folded, stats->statements, stats->batches, stats->copies);
	if (a.engine && a.cfg->apply_workers > 1) {
		const struct apply_engine_stats *st = apply_engine_stats(a.engine);
		log_info("applyd parallel apply: %" PRIu64 " connections, %" PRIu64 " batches committed while an earlier one was in flight, %" PRIu64
			 " waits for an earlier batch holding a key, %" PRIu64 " fall backs to one batch at a time",
			 a.cfg->apply_workers, st->overlapped, st->dependency_waits, st->serial_fallbacks);
	}
	if (a.conn)
		disconnect_target(&a);
	apply_engine_free(a.engine);
	frame_source_close(&a.src);
	contract_fingerprint_free(&a.pin);
	free(local_name);
	free(js_name);
	free(a.flow);
	return code;
}
