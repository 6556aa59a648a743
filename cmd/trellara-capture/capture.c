/*
 * capture.c - the replication loop (capture.h).  Follows pg_recvlogical:
 * received and durable positions kept apart, only the durable one
 * reported, resume from the slot, drain after CopyDone, re-check the
 * system identifier on every reconnect.  What happens between the socket
 * and the stream is capture_core.c (capture_core.h); this file holds the
 * connection, the checks before streaming, the poll loop and backoff.
 */
#include "capture.h"
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
#include "trellara/relbind_pg.h"
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

struct capture {
	const struct capture_options *o;
	const struct flow_config *cfg;
	struct capture_stats *stats;
	char *flow;                   /* owned */
	struct capture_core *core;    /* owned: the stream side and the ack policy */
	struct capture_jetstream *js; /* the core's sink on a JetStream stream (NULL: the local stream) */
	const char *stream_name;      /* the stream, in messages */
	PGconn *conn;
	unsigned int rng;             /* backoff jitter */
	PGconn *target;               /* the run check (not with --start-now) */
	char run_id[128];
	bool run_handoff_ready;       /* move the run to streaming once streaming */
	struct notify_watchdog watchdog;
	struct metrics_publisher metrics; /* observability.metrics_dir/capture.prom */
	bool ready_sent;
	bool slot_existed;            /* ensure_slot found it (did not create it) */
	uint64_t slot_confirmed_lsn;  /* its confirmed_flush_lsn then */
	enum slot_verdict slot_verdict; /* ensure_slot's last answer */
	uint64_t promotions;          /* timeline changes followed */
	struct pgconn_failures failures; /* failed connections and ended streaming sessions, by cause */
	struct contract_fingerprint pin; /* owned: dataset.contract pinned, the pin checked at start */
	bool in_stream_block;         /* between Stream Start and Stream Stop (for decoding a Relation message) */
	struct pgoutput_message relation_msg; /* owned scratch */
};

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

/* The stream's binding (stream meta): the local stream's meta file, or
 * what a JetStream stream's last message carries (capture_jetstream.h). */
static int read_binding(struct capture *c, struct stream_meta *meta)
{
	if (c->js) {
		capture_jetstream_binding(c->js, meta);
		return 0;
	}
	return stream_meta_read(c->cfg->stream_path, meta);
}

/* Durable at once in the local stream; on JetStream with the next
 * message, which capture publishes before it acknowledges anything. */
static int write_binding(struct capture *c, const struct stream_meta *meta)
{
	if (c->js) {
		capture_jetstream_bind(c->js, meta);
		return 0;
	}
	return stream_meta_write(c->cfg->stream_path, meta);
}

/* A failed flush: the local stream's storage failure (73), or why the
 * JetStream sink failed. */
static int flush_failed(struct capture *c)
{
	return c->js ? capture_jetstream_exit_code(c->js) : EXIT_CANTCREAT;
}

/* ---- the source side ---- */

static int check_identity(struct capture *c, const struct pg_identity *id)
{
	struct stream_meta meta;
	if (read_binding(c, &meta) < 0)
		return EXIT_DATAERR;
	int code = EXIT_OK;
	if (!meta.system_identifier) {
		meta.system_identifier = xstrdup(id->systemid);
		free(meta.database);
		meta.database = xstrdup(id->dbname);
		if (!meta.source_id)
			meta.source_id = xstrdup(c->cfg->source_id);
		if (!meta.flow)
			meta.flow = xstrdup(c->flow);
		if (write_binding(c, &meta) < 0)
			code = EXIT_CANTCREAT;
		else
			log_info("stream \"%s\" bound to source system %s, database \"%s\"", c->stream_name,
				 id->systemid, id->dbname);
	} else if (strcmp(meta.system_identifier, id->systemid) != 0 ||
		   (meta.database && strcmp(meta.database, id->dbname) != 0)) {
		log_error("source identity mismatch: stream \"%s\" holds system %s database \"%s\", but the source is system %s database \"%s\"",
			  c->stream_name, meta.system_identifier, meta.database ? meta.database : "",
			  id->systemid, id->dbname);
		log_hint("a stream belongs to one source database; point source.database_url at it, or use a new stream.path");
		code = EXIT_CONFIG;
	}
	stream_meta_free(&meta);
	return code;
}

/* Why capture stops on the slot it found (slot_policy.h), said once with
 * the safe action. */
static void explain_slot_verdict(struct capture *c, enum slot_verdict v, const struct slot_facts *f,
				 const char *type, const char *plugin, uint64_t durable_lsn)
{
	char l1[LSN_FORMAT_LEN];
	char *config = strbuf_shell_quote(c->cfg->path);
	const char *slot = c->cfg->slot, *path = c->stream_name;
	switch (v) {
	case SLOT_WRONG_KIND:
		log_error("replication slot \"%s\" is a %s slot with plugin \"%s\"; trellara needs a logical pgoutput slot", slot,
			  type, plugin);
		break;
	case SLOT_NOT_CREATED:
		log_error("replication slot \"%s\" does not exist", slot);
		log_hint("run \"trellara snapshot --config %s\", or \"trellara capture --start-now\"", config);
		break;
	case SLOT_LOST_AT_PROMOTION:
		log_error("replication slot \"%s\" does not exist on the source, which was promoted (timeline %u, the stream followed timeline %u): "
			  "stream \"%s\" holds its changes through %s, and the changes committed after that on the old primary cannot be decoded again; a new slot would skip them",
			  slot, f->source_timeline, f->stream_timeline, path, lsn_format(durable_lsn, l1));
		log_hint("copy the flow again from the promoted source: stop capture and applyd, then \"trellara snapshot --config %s --force\" "
			 "(with PostgreSQL 17 or later, a failover slot synchronized to the standby avoids this: trellara check names its posture)",
			 config);
		break;
	case SLOT_GONE:
		log_error("replication slot \"%s\" does not exist, but stream \"%s\" holds its changes through %s: the slot was dropped "
			  "(or the source is another server without it), and a new slot would skip every change since",
			  slot, path, lsn_format(durable_lsn, l1));
		log_hint("if the source is the wrong server, point source.database_url back; otherwise copy the flow again: \"trellara snapshot --config %s --force\"",
			 config);
		break;
	case SLOT_INVALIDATED:
		log_error("replication slot \"%s\" was invalidated by the source (wal_status \"%s\"%s%s%s): the WAL it needed is gone and it can no longer stream",
			  slot, f->wal_status, f->invalidation_reason[0] ? ", invalidation_reason \"" : "",
			  f->invalidation_reason, f->invalidation_reason[0] ? "\"" : "");
		log_hint("copy the flow again: stop capture and applyd, then \"trellara snapshot --config %s --force\"; "
			 "raise max_slot_wal_keep_size (and idle_replication_slot_timeout on PostgreSQL 18) above the flow's longest expected downtime",
			 config);
		break;
	case SLOT_USE:
	case SLOT_CREATE:
		break;
	}
	free(config);
}

/* A connection to the source failed: counted by cause (pgconn_failures). */
static void count_connect_failure(struct capture *c)
{
	pgconn_failures_count(&c->failures, "source.database_url");
	write_metrics(c, true);
}

/* Returns EXIT_OK, or an exit code for a failure that retrying cannot fix;
 * -1 for a failure worth a reconnect. */
static int ensure_slot(struct capture *c, const struct pg_identity *id)
{
	const char *params[1] = { c->cfg->slot };
	char *url = config_database_url(c->cfg, true);
	PGconn *plain = pgconn_connect(url, PGCONN_NORMAL, "trellara-capture", "source");
	config_free_secret(url);
	if (!plain)
		count_connect_failure(c);
	if (!plain)
		return -1;
	int code = -1, version = PQserverVersion(plain);
	/* each flow table's relation now (relbind.h): one missing was dropped,
	 * or renamed or moved while capture was stopped */
	size_t missing;
	struct relbind *bind = capture_core_relations(c->core);
	if (relbind_load(plain, bind, &missing) < 0) {
		PQfinish(plain);
		return -1;
	}
	if (missing < bind->n) {
		const struct relbind_table *t = &bind->tables[missing];
		log_error("flow table %s.%s does not exist on the source: it was dropped, or renamed or moved to another schema; capture does not stream a flow whose table it cannot follow",
			  t->schema, t->name);
		log_hint("renamed or moved: do the same on the target and write its new name in dataset.tables of %s; dropped: remove it from dataset.tables (the target keeps its rows)",
			 c->cfg->path);
		PQfinish(plain);
		return EXIT_CONFIG;
	}
	struct stream_meta meta;
	if (read_binding(c, &meta) < 0) {
		PQfinish(plain);
		return EXIT_DATAERR;
	}
	if (meta.slot && strcmp(meta.slot, c->cfg->slot) != 0) {
		/* the stream follows another slot: check_stream_binding refuses
		 * it (78) before anything is created */
		stream_meta_free(&meta);
		PQfinish(plain);
		c->slot_existed = false;
		return EXIT_OK;
	}
	/* wal_status from 13, conflicting from 16, invalidation_reason from 17 */
	char *sql = xasprintf("SELECT plugin, slot_type, database, active, coalesce(confirmed_flush_lsn, '0/0'), %s, %s, %s"
			      " FROM pg_replication_slots WHERE slot_name = $1",
			      version >= 130000 ? "coalesce(wal_status, '')" : "''",
			      version >= 170000 ? "coalesce(invalidation_reason, '')" : "''",
			      version >= 160000 ? "coalesce(conflicting, false)" : "false");
	PGresult *res = pgconn_query(plain, sql, 1, params);
	free(sql);
	if (!res)
		goto out;
	uint64_t durable_lsn = capture_core_stats(c->core).durable_lsn;
	bool found = PQntuples(res) == 1;
	const char *type = found ? PQgetvalue(res, 0, 1) : "", *plugin = found ? PQgetvalue(res, 0, 0) : "";
	struct slot_facts f = {
		.exists = found,
		.logical_pgoutput = found && strcmp(type, "logical") == 0 && strcmp(plugin, "pgoutput") == 0,
		.wal_status = found ? PQgetvalue(res, 0, 5) : "",
		.invalidation_reason = found ? PQgetvalue(res, 0, 6) : "",
		.conflicting = found && strcmp(PQgetvalue(res, 0, 7), "t") == 0,
		.stream_holds_changes = durable_lsn > 0 || meta.slot != NULL,
		.stream_timeline = meta.timeline ? (uint32_t)strtoul(meta.timeline, NULL, 10) : 0,
		.source_timeline = id->timeline,
		.start_now = c->o->start_now,
	};
	enum slot_verdict v = slot_policy_decide(&f);
	c->slot_verdict = v;
	c->slot_existed = false;
	if (found)
		c->slot_existed = lsn_parse(PQgetvalue(res, 0, 4), &c->slot_confirmed_lsn);
	if (v != SLOT_USE && v != SLOT_CREATE) {
		explain_slot_verdict(c, v, &f, type, plugin, durable_lsn);
		code = slot_policy_exit_code(v);
		goto out;
	}
	if (v == SLOT_USE) {
		code = EXIT_OK;
		goto out;
	}
	char *slot = pgconn_quote_ident(c->conn, c->cfg->slot);
	sql = xasprintf("CREATE_REPLICATION_SLOT %s LOGICAL pgoutput (SNAPSHOT 'nothing'%s)", slot,
			PQserverVersion(c->conn) >= 170000 ? ", FAILOVER true" : "");
	code = pgconn_command(c->conn, sql) == 0 ? EXIT_OK : EXIT_CONFIG;
	if (code == EXIT_OK)
		log_info("created replication slot \"%s\" (--start-now: streaming starts at its consistent point)",
			 c->cfg->slot);
	free(sql);
	free(slot);
out:
	stream_meta_free(&meta);
	PQclear(res);
	PQfinish(plain);
	return code;
}

/* The lowest watermark of the flow's latest table copies: changes at or
 * below it are in the target's copies, whatever the stream holds.
 * 0 when there are none (or no target connection: --start-now). */
static int copies_cover_through(struct capture *c, uint64_t *covered)
{
	*covered = 0;
	if (!c->target)
		return 0;
	struct flow_ids ids = { c->cfg->source_id, c->cfg->dataset_id, c->cfg->consumer_group };
	char **rels;
	uint64_t *lsns;
	int n;
	if (checkpoint_table_watermarks(c->target, c->cfg->checkpoint_schema, &ids, &rels, &lsns, &n) < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		if (i == 0 || lsns[i] < *covered)
			*covered = lsns[i];
		free(rels[i]);
	}
	free(rels);
	free(lsns);
	return 0;
}

/* Slot, stream and copies must tell one story (stream meta binding):
 * the stream follows this slot, and holds every change the slot has
 * confirmed that the target's copies do not already contain.  Binds a
 * new stream on first use.  Returns EXIT_OK, an exit code, or -1 (retry). */
static int check_stream_binding(struct capture *c, const struct pg_identity *id)
{
	const char *path = c->stream_name;
	struct stream_meta meta;
	if (read_binding(c, &meta) < 0)
		return EXIT_DATAERR;
	int code = EXIT_OK;
	char l1[LSN_FORMAT_LEN], l2[LSN_FORMAT_LEN], l3[LSN_FORMAT_LEN];
	uint64_t durable_lsn = capture_core_stats(c->core).durable_lsn;
	bool empty = durable_lsn == 0;
	if (meta.slot && strcmp(meta.slot, c->cfg->slot) != 0) {
		log_error("stream \"%s\" follows replication slot \"%s\", but the flow names slot \"%s\"", path, meta.slot,
			  c->cfg->slot);
		log_hint("point source.slot back at \"%s\", or give slot \"%s\" a stream.path of its own", meta.slot,
			 c->cfg->slot);
		code = EXIT_CONFIG;
		goto out;
	}
	unsigned long old_tli = meta.timeline ? strtoul(meta.timeline, NULL, 10) : 0;
	if (old_tli && id->timeline < old_tli) {
		log_error("source timeline went back from %lu to %u for stream \"%s\": the source was restored to an older history",
			  old_tli, id->timeline, path);
		char *config = strbuf_shell_quote(c->cfg->path);
		log_hint("a stream follows one history; copy again into a new stream.path (\"trellara snapshot --config %s --force\")",
			 config);
		free(config);
		code = EXIT_CONFIG;
		goto out;
	}
	if (c->slot_existed && c->slot_confirmed_lsn > durable_lsn) {
		uint64_t covered;
		if (copies_cover_through(c, &covered) < 0) {
			code = -1;
			goto out;
		}
		if (empty && c->o->start_now) {
			log_warn("stream \"%s\" is empty and slot \"%s\" has confirmed changes through %s: --start-now streams from there; earlier changes are not in this stream",
				 path, c->cfg->slot, lsn_format(c->slot_confirmed_lsn, l1));
		} else if (c->slot_confirmed_lsn > covered) {
			log_error("replication slot \"%s\" has confirmed changes through %s, but stream \"%s\" (id %s) holds only through %s and the target's copies only through %s: the stream that received those changes is gone (deleted, replaced or restored from an older copy)",
				  c->cfg->slot, lsn_format(c->slot_confirmed_lsn, l1), path, meta.stream_id ? meta.stream_id : "-",
				  lsn_format(durable_lsn, l2), lsn_format(covered, l3));
			char *config = strbuf_shell_quote(c->cfg->path);
			log_hint("restore the stream directory capture wrote, or copy every table again so that the copies cover what the slot skipped: \"trellara snapshot --config %s --force\"",
				 config);
			free(config);
			code = EXIT_DATAERR;
			goto out;
		}
	}
	char tli[16];
	snprintf(tli, sizeof tli, "%u", id->timeline);
	bool bind = !meta.slot, moved = old_tli && id->timeline != old_tli;
	if (bind || moved || !meta.timeline) {
		if (bind) {
			meta.slot = xstrdup(c->cfg->slot);
			free(meta.start_lsn);
			/* where this stream's data begins: the slot's confirmed
			 * position; unknown for a slot created just now or a
			 * stream that already held frames */
			meta.start_lsn = c->slot_existed && empty ? xstrdup(lsn_format(c->slot_confirmed_lsn, l1)) : NULL;
		}
		if (moved)
			c->promotions++;
		if (moved)
			log_warn("source timeline moved from %lu to %u (a promotion): stream \"%s\" follows it", old_tli,
				 id->timeline, path);
		free(meta.timeline);
		meta.timeline = xstrdup(tli);
		if (write_binding(c, &meta) < 0) {
			code = EXIT_CANTCREAT;
			goto out;
		}
		if (bind)
			log_info("stream \"%s\" (id %s) bound to slot \"%s\" from %s, timeline %u", path,
				 meta.stream_id ? meta.stream_id : "-", c->cfg->slot,
				 meta.start_lsn ? meta.start_lsn : "an unknown position", id->timeline);
	}
out:
	stream_meta_free(&meta);
	return code;
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
			count_connect_failure(&c);
			continue;
		}
		pgconn_failures_ok(&c.failures);
		struct pg_identity id;
		if (pgconn_identify_system(c.conn, &id) < 0) {
			PQfinish(c.conn);
			c.conn = NULL;
			continue;
		}
		if ((code = check_identity(&c, &id)) != EXIT_OK)
			goto out;
		int slot = ensure_slot(&c, &id);
		if (slot == EXIT_OK)
			slot = check_stream_binding(&c, &id);
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
