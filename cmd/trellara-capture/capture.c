/*
 * capture.c - the replication loop (capture.h).  Follows pg_recvlogical:
 * received and durable positions kept apart, only the durable one
 * reported, resume from the slot, drain after CopyDone, re-check the
 * system identifier on every reconnect.  What happens between the socket
 * and the stream is capture_core.c (capture_core.h); this file holds the
 * connection, the checks before streaming, the poll loop and backoff.
 */
#include "capture.h"
#include "capture_internal.h"
#include "capture_jetstream.h"
#include "../trellara-contract-test/contract.h"

#include "trellara/backoff.h"
#include "trellara/slot_policy.h"
#include "trellara/sqlstate.h"
#include "trellara/capture_core.h"
#include "trellara/clock.h"
#include "trellara/defaults.h"
#include "trellara/log.h"
#include "trellara/lsn.h"
#include "trellara/pgconn.h"
#include "trellara/runs.h"
#include "trellara/metrics.h"
#include "trellara/notify.h"
#include "trellara/pgoutput.h"
#include "trellara/checkpoint.h"
#include "trellara/stream.h"
#include "trellara/stream_fs.h"
#include "trellara/xalloc.h"
#include "trellara/strbuf.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


/* dataset.contract: pinned.  A Relation message (pgoutput sends one
 * before the first change of a relation in a session, and again after
 * its definition changed) of a flow table that differs from the pin
 * stops capture before any change of that relation is written: what came
 * before is flushed and acknowledged, the restart finds the same message
 * again until the contract is refreshed.  EXIT_OK or EXIT_CONFIG. */
static int check_contract_of(struct capture *c, const struct pgoutput_message *m)
{
	int n = m->relation.natts;
	struct contract_rel_column *cols = xcalloc(n > 0 ? (size_t)n : 1, sizeof *cols);
	for (int i = 0; i < n; i++) {
		const struct pgoutput_attribute *a = &m->relation.atts[i];
		cols[i] = (struct contract_rel_column){ a->name, strlen(a->name), a->type_oid, a->typmod, a->key };
	}
	const char *nsp = *m->relation.nspname ? m->relation.nspname : "pg_catalog";
	struct contract_diff d;
	int drift = contract_check_relation(&c->pin, nsp, strlen(nsp), m->relation.relname, strlen(m->relation.relname), (char)m->relation.replident,
					    cols, (size_t)n, &d);
	free(cols);
	if (!drift)
		return EXIT_OK;
	contract_log_drift(&d, c->cfg);
	log_error("capture stops before writing any change of \"%s\" past the drift (dataset.contract: pinned)", d.table);
	contract_diff_release(&d);
	return EXIT_CONFIG;
}

/* Each Relation message with dataset.contract: pinned, before the core
 * writes anything of it: its columns against the pin.  (Which relation it
 * is, the core checks: relbind.h.)  EXIT_OK or EXIT_CONFIG. */
static int check_relation(struct capture *c, const uint8_t *buf, size_t len)
{
	if (len < 26 || buf[0] != 'w') /* XLogData: 'w', start, end, time, then the message */
		return EXIT_OK;
	const uint8_t *msg = buf + 25;
	size_t msg_len = len - 25;
	if (msg[0] == PGOUTPUT_STREAM_START || msg[0] == PGOUTPUT_STREAM_STOP) {
		c->in_stream_block = msg[0] == PGOUTPUT_STREAM_START;
		return EXIT_OK;
	}
	if (msg[0] != PGOUTPUT_RELATION)
		return EXIT_OK;
	char err[PGOUTPUT_ERR_LEN];
	if (pgoutput_decode(msg, msg_len, c->cfg->pgoutput_protocol_version, c->in_stream_block, &c->relation_msg, err,
			    sizeof err) < 0)
		return EXIT_OK; /* the core decodes it again and reports it */
	return check_contract_of(c, &c->relation_msg);
}

/* The run's counters: the core's, and the reconnects counted here. */
static void sync_stats(struct capture *c)
{
	if (!c->core)
		return;
	struct capture_core_stats cs = capture_core_stats(c->core);
	c->stats->transactions = cs.transactions;
	c->stats->changes = cs.changes;
	c->stats->frames = cs.frames;
	c->stats->skipped_duplicates = cs.skipped_duplicates;
	c->stats->watermarks = cs.watermarks;
	c->stats->batches = cs.batches;
	c->stats->durable_lsn = cs.durable_lsn;
}

/* The samples of capture.prom (metrics_publish: at most once a second). */
static void fill_metrics(struct metrics *m, int64_t now, void *arg)
{
	struct capture *c = arg;
	sync_stats(c);
	struct capture_core_stats cs = { 0 };
	if (c->core)
		cs = capture_core_stats(c->core);
	const struct capture_stats *st = c->stats;
	metrics_add_u64(m, "trellara_capture_transactions_total", "source transactions appended to the stream", METRIC_COUNTER, NULL, NULL, st->transactions);
	metrics_add_u64(m, "trellara_capture_changes_total", "row changes appended", METRIC_COUNTER, NULL, NULL, st->changes);
	metrics_add_u64(m, "trellara_capture_frames_total", "stream frames appended", METRIC_COUNTER, NULL, NULL, st->frames);
	metrics_add_u64(m, "trellara_capture_skipped_duplicates_total", "transactions already in the stream, skipped", METRIC_COUNTER, NULL, NULL, st->skipped_duplicates);
	metrics_add_u64(m, "trellara_capture_watermarks_total", "watermark frames appended", METRIC_COUNTER, NULL, NULL, st->watermarks);
	metrics_add_u64(m, "trellara_capture_batches_total", "fdatasync batches", METRIC_COUNTER, NULL, NULL, st->batches);
	metrics_add_u64(m, "trellara_capture_reconnects_total", "source reconnects", METRIC_COUNTER, NULL, NULL, st->reconnects);
	pgconn_failures_metrics(m, "capture", "source", &c->failures);
	if (c->js)
		capture_jetstream_metrics(c->js, m);
	metrics_add_u64(m, "trellara_capture_promotions_total", "source timeline changes (promotions) capture followed", METRIC_COUNTER, NULL, NULL, c->promotions);
	if (c->slot_verdict != SLOT_USE && c->slot_verdict != SLOT_CREATE)
		metrics_add_u64(m, "trellara_capture_slot_unusable", "1: capture stopped because of its slot (verdict: not_created, wrong_kind, gone, lost_at_promotion, invalidated)", METRIC_GAUGE, "verdict", slot_policy_name(c->slot_verdict), 1);
	metrics_add_u64(m, "trellara_capture_acked_lsn_bytes", "last LSN acknowledged to the source (durable in the stream), as a byte position", METRIC_GAUGE, NULL, NULL, cs.durable_lsn);
	if (cs.last_status_us)
		metrics_add_double(m, "trellara_capture_last_ack_age_seconds", "seconds since the last standby status update",
				   METRIC_GAUGE, NULL, NULL, (double)(now - cs.last_status_us) / 1e6);
}

static void write_metrics(struct capture *c, bool force)
{
	metrics_publish(&c->metrics, clock_mono_us(), force, fill_metrics, c);
}

static int send_status(struct capture *c)
{
	uint8_t m[CAPTURE_STATUS_MESSAGE_LEN];
	capture_core_status_message(c->core, m, clock_wall_us(), false);
	if (PQputCopyData(c->conn, (const char *)m, sizeof m) <= 0 || PQflush(c->conn) != 0) {
		log_warn("cannot send standby status update: %s", PQerrorMessage(c->conn));
		return -1;
	}
	capture_core_on_status_sent(c->core, clock_mono_us());
	return 0;
}

static int flush_batch(struct capture *c)
{
	return capture_core_flush(c->core, clock_mono_us(), clock_wall_us());
}

/* A failed flush: the local stream's storage failure (73), or why the
 * JetStream sink failed. */
static int flush_failed(struct capture *c)
{
	return c->js ? capture_jetstream_exit_code(c->js) : EXIT_CANTCREAT;
}

/* A connection to the source failed: counted by cause (pgconn_failures). */
void capture_count_connect_failure(struct capture *c)
{
	pgconn_failures_count(&c->failures, "source.database_url");
	write_metrics(c, true);
}

static int start_streaming(struct capture *c)
{
	char *slot = pgconn_quote_ident(c->conn, c->cfg->slot);
	char *pub = pgconn_quote_ident(c->conn, c->cfg->publication);
	char *pub_literal = pgconn_quote_literal(c->conn, pub);
	char *sql = xasprintf("START_REPLICATION SLOT %s LOGICAL 0/0 (proto_version '%d', publication_names %s, "
			      "streaming '%s', messages 'true')",
			      slot, c->cfg->pgoutput_protocol_version, pub_literal,
			      c->cfg->pgoutput_streaming && c->cfg->pgoutput_protocol_version >= 2 ? "on" : "off");
	PGresult *res = PQexec(c->conn, sql);
	int rc = 0;
	if (PQresultStatus(res) != PGRES_COPY_BOTH) {
		log_error("START_REPLICATION on slot \"%s\" failed: %s", c->cfg->slot, PQerrorMessage(c->conn));
		rc = -1;
	}
	PQclear(res);
	free(sql);
	free(pub_literal);
	free(pub);
	free(slot);
	return rc;
}

/* The stream holds capture back (capture_core_held: a JetStream stream
 * without a quorum, or full): nothing more is read from the source, the
 * session is kept alive with status updates (they acknowledge only what
 * is durable), and the flush is tried again after a pause that doubles
 * from 250 ms to 2 s.  EXIT_OK (maybe still held), or an exit code. */
static int held_back(struct capture *c, int *pause_ms)
{
	const char *why = c->js ? capture_jetstream_held(c->js) : NULL;
	notify_status("cannot progress: %s", why ? why : "the stream takes nothing now");
	write_metrics(c, true);
	if (capture_core_status_due(c->core, clock_mono_us()) && send_status(c) < 0) {
		/* a new session would resend what the held frames hold */
		log_error("the source connection failed while the stream held capture back: exiting, the restart resumes from what the stream stored");
		return EXIT_UNAVAILABLE;
	}
	for (int waited = 0; waited < *pause_ms && !*c->o->stop; waited += 100) {
		notify_watchdog_tick(&c->watchdog);
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	*pause_ms = *pause_ms * 2 > 2000 ? 2000 : *pause_ms * 2;
	if (flush_batch(c) != EXIT_OK)
		return flush_failed(c);
	if (!capture_core_held(c->core)) {
		*pause_ms = 250;
		notify_status("streaming slot %s", c->cfg->slot);
		write_metrics(c, true);
	}
	return EXIT_OK;
}

/* Stream until stopped or the connection fails.  Returns an exit code,
 * or -1 for "reconnect". */
static int stream_loop(struct capture *c, bool *made_progress)
{
	int pause_ms = 250;
	for (;;) {
		notify_watchdog_tick(&c->watchdog);
		write_metrics(c, false);
		if (!*c->o->stop && capture_core_held(c->core)) {
			int rc = held_back(c, &pause_ms);
			if (rc != EXIT_OK)
				return rc;
			continue;
		}
		if (*c->o->stop) {
			notify_send("STOPPING=1");
			if (flush_batch(c) != EXIT_OK)
				return EXIT_CANTCREAT;
			send_status(c);
			PQputCopyEnd(c->conn, NULL);
			PQflush(c->conn);
			return EXIT_OK;
		}
		char *buf = NULL;
		int n = PQgetCopyData(c->conn, &buf, 1);
		if (n > 0) {
			*made_progress = true;
			if (c->cfg->contract_pinned && check_relation(c, (const uint8_t *)buf, (size_t)n) != EXIT_OK) {
				PQfreemem(buf);
				/* what came before the drift is durable and acknowledged */
				if (flush_batch(c) != EXIT_OK)
					return EXIT_CANTCREAT;
				send_status(c);
				return EXIT_CONFIG;
			}
			bool reply;
			int rc = capture_core_on_message(c->core, (const uint8_t *)buf, (size_t)n, clock_mono_us(), clock_wall_us(),
							 &reply);
			PQfreemem(buf);
			if (reply && send_status(c) < 0 && rc == EXIT_OK)
				rc = -1;
			if (rc != EXIT_OK)
				return rc;
			continue;
		}
		if (n == -2 || n == -1) {
			/* the server ended the copy, or the connection failed: the
			 * final results say why */
			char sqlstate[6] = "";
			PGresult *res;
			while ((res = PQgetResult(c->conn)) != NULL) {
				const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
				if (state && !sqlstate[0])
					snprintf(sqlstate, sizeof sqlstate, "%s", state);
				PQclear(res);
				if (PQstatus(c->conn) == CONNECTION_BAD)
					break;
			}
			c->failures.ended[sqlstate_end_cause(sqlstate)]++;
			if (flush_batch(c) != EXIT_OK)
				return EXIT_CANTCREAT;
			log_warn("replication connection lost (%s): %s", sqlstate_end_name(sqlstate_end_cause(sqlstate)),
				 PQerrorMessage(c->conn));
			return -1;
		}
		/* Nothing more right now.  Under load the next message is usually
		 * a moment away: give the batch up to 2 ms more before its
		 * fdatasync (group commit), then end it. */
		if (capture_core_quiet(c->core, clock_mono_us()) == CAPTURE_CORE_WAIT) {
			struct pollfd more = { .fd = PQsocket(c->conn), .events = POLLIN };
			if (poll(&more, 1, 1) > 0) {
				if (PQconsumeInput(c->conn) == 0) {
					c->failures.ended[SQLSTATE_END_LOST]++;
					log_warn("replication connection lost: %s", PQerrorMessage(c->conn));
					if (flush_batch(c) != EXIT_OK)
						return EXIT_CANTCREAT;
					return -1;
				}
				continue;
			}
		}
		if (flush_batch(c) != EXIT_OK)
			return EXIT_CANTCREAT;
		if (capture_core_status_due(c->core, clock_mono_us()) && send_status(c) < 0)
			return -1;
		struct pollfd pfd = { .fd = PQsocket(c->conn), .events = POLLIN };
		int wait_ms = c->o->status_interval_ms;
		if (wait_ms > 1000)
			wait_ms = 1000;
		if (poll(&pfd, 1, wait_ms) < 0 && errno != EINTR) {
			log_error("poll on the replication connection failed: %m");
			return -1;
		}
		if (PQconsumeInput(c->conn) == 0) {
			c->failures.ended[SQLSTATE_END_LOST]++;
			log_warn("replication connection lost: %s", PQerrorMessage(c->conn));
			return -1;
		}
	}
}

static void tick_watchdog(void *arg)
{
	notify_watchdog_tick(arg);
}

static void backoff_sleep(struct capture *c, int attempt)
{
	/* base (0.5 s) doubling up to 60 x base (30 s), each +-25 % jitter */
	struct backoff_jitter jitter = backoff_jitter_rand_r(&c->rng);
	int64_t delay = backoff_next_us((int64_t)c->o->reconnect_base_ms * 1000, attempt, &jitter);
	log_info("reconnecting to the source in %.1f s (attempt %d of %d)", (double)delay / 1e6, attempt,
		 c->o->max_reconnect_attempts);
	/* systemd has no "not ready": the status line says it cannot progress */
	notify_status("cannot progress: reconnecting to the source in %.1f s (attempt %d of %d)", (double)delay / 1e6,
		      attempt, c->o->max_reconnect_attempts);
	backoff_wait(delay, c->o->stop, tick_watchdog, &c->watchdog);
}

int capture_run(const struct capture_options *o, struct capture_stats *stats)
{
	const struct flow_config *cfg = o->config;
	struct capture c = { .o = o, .cfg = cfg, .stats = stats };
	memset(stats, 0, sizeof *stats);
	pgoutput_message_init(&c.relation_msg);
	c.flow = config_flow_id(cfg);
	c.rng = backoff_seed();
	c.metrics = (struct metrics_publisher){ cfg->metrics_dir, "capture", c.flow, cfg->source_id, 0 };
	notify_watchdog_init(&c.watchdog);
	int code = EXIT_OK;
	char l1[LSN_FORMAT_LEN];
	if (!o->start_now) {
		/* DESIGN §6.5: stream only a flow whose snapshot was handed off */
		c.target = pgconn_connect(cfg->target_database_url, PGCONN_NORMAL, "trellara-capture", "target");
		if (!c.target) {
			code = EXIT_UNAVAILABLE;
			goto out;
		}
		struct run_row run;
		if (checkpoint_migrate(c.target, cfg->checkpoint_schema) < 0 ||
		    runs_load(c.target, cfg->checkpoint_schema, cfg->source_id, cfg->dataset_id, NULL, &run) < 0) {
			code = EXIT_UNAVAILABLE;
			goto out;
		}
		if (!run.exists || run.state < RUN_STREAM_HANDOFF_READY || run.state == RUN_FAILED_RECOVERABLE) {
			log_error("flow \"%s\" has no handoff-ready snapshot run%s%s%s", c.flow, run.exists ? " (run \"" : "",
				  run.exists ? run.run_id : "", run.exists ? "\" is not handed off)" : "");
			char *config = strbuf_shell_quote(cfg->path);
			log_hint("run \"trellara snapshot --config %s\" first, or start with --start-now to stream from the slot's current position without a copy",
				 config);
			free(config);
			code = EXIT_CONFIG;
			goto out;
		}
		snprintf(c.run_id, sizeof c.run_id, "%s", run.run_id);
		c.run_handoff_ready = run.state == RUN_STREAM_HANDOFF_READY;
	}

	if (cfg->contract_pinned) {
		/* the source's catalog against the pin before streaming */
		char *url = config_database_url(cfg, true);
		PGconn *plain = pgconn_connect(url, PGCONN_NORMAL, "trellara-capture", "source");
		config_free_secret(url);
		code = plain ? contract_start_check(plain, cfg, true, &c.pin) : -1;
		PQfinish(plain);
		if (code != EXIT_OK) {
			code = code < 0 ? EXIT_UNAVAILABLE : code;
			goto out;
		}
	}

	struct capture_core_options co = {
		.fs = stream_fs_posix(),
		.stream_dir = cfg->stream_path,
		.slot = cfg->slot,
		.source_id = cfg->source_id,
		.proto_version = cfg->pgoutput_protocol_version,
		.writer = {
			.segment_bytes = cfg->segment_bytes,
			.min_free_bytes = cfg->min_free_bytes,
			.source_id = cfg->source_id,
			.flow = c.flow,
			.fault_prefix = "capture",
			.compression = cfg->stream_compression_zlib ? STREAM_COMPRESSION_ZLIB : STREAM_COMPRESSION_NONE,
		},
		.assembler = {
			.source_id = cfg->source_id,
			.flow = c.flow,
			.spill_dir = cfg->stream_spill_dir,
			.spill_threshold_changes = cfg->stream_spill_threshold_changes,
			.strict_chunking = cfg->strict_chunking,
			.max_changes_per_chunk = cfg->max_changes_per_chunk,
		},
		.ack = {
			.status_interval_us = (int64_t)o->status_interval_ms * 1000,
			.watermark_interval_us = (int64_t)o->watermark_interval_ms * 1000,
			.max_batch_transactions = cfg->max_batch_transactions,
			.max_batch_messages = cfg->max_batch_messages,
		},
		.n_tables = cfg->n_tables,
		.config_path = cfg->path,
	};
	/* this run's id, in every pending_chunk frame it writes */
	char *nonce = stream_id_generate();
	if (!nonce) {
		code = EXIT_UNAVAILABLE;
		goto out;
	}
	char run_hex[17];
	snprintf(run_hex, sizeof run_hex, "%.16s", nonce); /* 64 of its random bits */
	co.assembler.run = strtoull(run_hex, NULL, 16);
	free(nonce);
	c.stream_name = cfg->stream_path;
	if (cfg->stream_kind == STREAM_KIND_JETSTREAM) {
		co.fs = NULL;
		co.stream_dir = NULL;
		if ((code = capture_jetstream_open(cfg, &co.sink, &c.js, &co.sink_restart, &co.sink_next_offset)) != EXIT_OK)
			goto out;
		c.stream_name = capture_jetstream_name(c.js);
		co.sink_name = c.stream_name;
		/* a transaction larger than a message goes in chunks that fit */
		co.assembler.target_frame_payload = capture_jetstream_frame_target(c.js);
	}
	/* the flow's tables, whose relations the core follows (relbind.h) */
	const char **schemas = xcalloc(cfg->n_tables ? cfg->n_tables : 1, sizeof *schemas);
	const char **names = xcalloc(cfg->n_tables ? cfg->n_tables : 1, sizeof *names);
	for (size_t i = 0; i < cfg->n_tables; i++) {
		schemas[i] = cfg->tables[i].schema;
		names[i] = cfg->tables[i].name;
	}
	co.table_schemas = schemas;
	co.table_names = names;
	code = capture_core_open(&c.core, &co); /* copies the names */
	free(schemas);
	free(names);
	if (code != EXIT_OK)
		goto out;
	sync_stats(&c);

	int attempt = 0;
	while (!*o->stop) {
		if (attempt > 0) {
			if (attempt > o->max_reconnect_attempts) {
				log_error("source unavailable after %d reconnect attempts", o->max_reconnect_attempts);
				code = EXIT_UNAVAILABLE;
				goto out;
			}
			backoff_sleep(&c, attempt);
			if (*o->stop)
				break;
			stats->reconnects++;
		}
		attempt++;
		char *url = config_database_url(cfg, true); /* a rotated secret file is read again */
		c.conn = pgconn_connect(url, PGCONN_REPLICATION, "trellara-capture", "source");
		config_free_secret(url);
		if (!c.conn) {
			capture_count_connect_failure(&c);
			continue;
		}
		pgconn_failures_ok(&c.failures);
		struct pg_identity id;
		if (pgconn_identify_system(c.conn, &id) < 0) {
			PQfinish(c.conn);
			c.conn = NULL;
			continue;
		}
		if ((code = capture_check_identity(&c, &id)) != EXIT_OK)
			goto out;
		int slot = capture_ensure_slot(&c, &id);
		if (slot == EXIT_OK)
			slot = capture_check_stream_binding(&c, &id);
		if (slot > 0) {
			code = slot;
			goto out;
		}
		if (slot < 0 || start_streaming(&c) < 0) {
			PQfinish(c.conn);
			c.conn = NULL;
			continue;
		}
		log_info("streaming slot \"%s\" of system %s into \"%s\"", cfg->slot, id.systemid, c.stream_name);
		/* ready: the slot streams into a recovered, durable stream */
		if (!c.ready_sent) {
			notify_send("READY=1");
			c.ready_sent = true;
		}
		notify_status("streaming slot %s", cfg->slot);
		if (c.run_handoff_ready) {
			if (runs_move(c.target, cfg->checkpoint_schema, cfg->source_id, cfg->dataset_id, c.run_id, RUN_STREAMING, NULL,
				      0, NULL, NULL, NULL, false) != 0) {
				code = EXIT_UNAVAILABLE;
				goto out;
			}
			c.run_handoff_ready = false;
			log_info("snapshot run \"%s\" is streaming", c.run_id);
		}
		/* Anything open belongs to the old connection: the server sends
		 * it again from the slot's confirmed position. */
		capture_core_reconnected(c.core);
		c.in_stream_block = false;
		bool progress = false;
		int result = stream_loop(&c, &progress);
		PQfinish(c.conn);
		c.conn = NULL;
		if (result >= 0) {
			code = result;
			goto out;
		}
		if (capture_core_held(c.core)) {
			/* frames of this session wait in the sink: a new session
			 * would resend them */
			log_error("the source connection was lost while the stream held capture back: exiting, the restart resumes from what the stream stored");
			code = EXIT_UNAVAILABLE;
			goto out;
		}
		if (progress)
			attempt = 1; /* it worked for a while: start the backoff over */
	}
out:
	if (c.conn)
		PQfinish(c.conn);
	if (code == EXIT_OK && c.core && flush_batch(&c) != EXIT_OK)
		code = flush_failed(&c);
	if (code == EXIT_CANTCREAT && c.js)
		code = flush_failed(&c);
	write_metrics(&c, true);
	sync_stats(&c);
	log_info("capture stopped: %" PRIu64 " transactions (%" PRIu64 " changes, %" PRIu64 " frames) appended, %" PRIu64
		 " skipped as duplicates, %" PRIu64 " watermarks, durable through %s",
		 stats->transactions, stats->changes, stats->frames, stats->skipped_duplicates, stats->watermarks,
		 lsn_format(stats->durable_lsn, l1));
	capture_core_close(c.core);
	contract_fingerprint_free(&c.pin);
	pgoutput_message_release(&c.relation_msg);
	PQfinish(c.target);
	free(c.flow);
	return code;
}
