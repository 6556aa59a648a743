/*
 * capture_core.c - capture between the replication socket and the
 * stream (capture_core.h).  Follows pg_recvlogical: received and durable
 * positions kept apart, only the durable one reported.
 */
#include "trellara/capture_core.h"
#include "trellara/relbind.h"

#include "trellara/defaults.h"
#include "trellara/envelope.h"
#include "trellara/fault.h"
#include "trellara/log.h"
#include "trellara/lsn.h"
#include "trellara/pgoutput.h"
#include "trellara/stream_exit.h"
#include "trellara/xalloc.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define PG_EPOCH_OFFSET_US 946684800000000LL

struct capture_core {
	uint64_t max_batch_messages; /* pending frames of a big transaction synced at */
	char *slot;        /* owned */
	char *source_id;   /* owned */
	struct capture_sink sink; /* owned */
	char *sink_name;   /* owned */
	struct assembler *assembler;
	struct pgoutput_session session;
	bool session_open;
	struct pgoutput_message msg;
	struct ack_policy ack; /* what may be reported, when a watermark is due */
	bool storage_failed;
	bool held; /* the sink's last sync was held back (capture_core_held) */
	unsigned messages_since_check;
	struct capture_core_stats stats;
	struct relbind bind;   /* which source relation each flow table is */
	char *config_path;     /* owned; NULL: not named */
	bool relation_stopped; /* a Relation message stopped it: the caller reports what is durable */
};

static uint64_t get_be64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
}

/* ---- the stream side ---- */

/* The local stream writer as a sink. */
static int local_append(void *impl, int type, const uint8_t *payload, size_t len)
{
	return stream_writer_append(impl, type, 0, payload, len, NULL) == STREAM_OK ? 0 : -1;
}

static size_t local_pending(const void *impl)
{
	return stream_writer_pending(impl);
}

static int local_sync(void *impl)
{
	return stream_writer_sync(impl) == STREAM_OK ? 0 : -1;
}

static void local_close(void *impl)
{
	stream_writer_close(impl);
}

static const struct capture_sink_ops local_sink_ops = {
	.append = local_append, .pending = local_pending, .sync = local_sync, .close = local_close
};

static int sink_append(struct capture_core *c, int type, const uint8_t *payload, size_t len)
{
	return c->sink.ops->append(c->sink.impl, type, payload, len);
}

static size_t sink_pending(const struct capture_core *c)
{
	return c->sink.ops->pending(c->sink.impl);
}

/* 0: durable; 1: held back (the sink keeps the frames: the next flush
 * tries again); -1: failed for good. */
static int sink_sync(struct capture_core *c)
{
	/* tests: frames handed to the sink, none of them made durable yet
	 * (a JetStream sink has published none of them) */
	if (sink_pending(c) > 0) {
		fault_point("capture.before_sync");
		fault_pause("capture.before_sync");
	}
	int rc = c->sink.ops->sync(c->sink.impl);
	c->held = rc == 1;
	return rc;
}

static int emit_frame(void *ctx, int type, const uint8_t *payload, size_t len, uint64_t *offset)
{
	struct capture_core *c = ctx;
	/* the stream has a single writer: frames take the next offsets */
	*offset = c->stats.next_offset + c->stats.frames;
	if (sink_append(c, type, payload, len) < 0) {
		c->storage_failed = true;
		return -1;
	}
	c->stats.frames++;
	/* A big transaction must not hold all its frames in the writer's
	 * batch: make them durable as we go (nothing is acknowledged to
	 * the source before its commit marker is durable). */
	if (!c->held && sink_pending(c) >= c->max_batch_messages) {
		int rc = sink_sync(c);
		if (rc < 0) {
			c->storage_failed = true;
			return -1;
		}
		if (rc == 0 && (type == FRAME_CHUNK || type == FRAME_PENDING_CHUNK)) {
			/* tests: a chunk set durable in part, its commit not yet */
			fault_point("capture.after_chunk_sync");
			fault_pause("capture.after_chunk_sync");
		}
		if (rc == 0 && type == FRAME_MANIFEST) {
			/* tests: a chunk set's manifest durable, its commit marker not yet */
			fault_point("capture.after_manifest_sync");
		}
	}
	return 0;
}

static int append_watermark(struct capture_core *c, uint64_t lsn, int64_t now_us, int64_t wall_us)
{
	struct buf b = { 0 };
	env_encode_watermark(&b, c->source_id, lsn, wall_us);
	int rc = sink_append(c, FRAME_WATERMARK, b.data, b.len);
	buf_free(&b);
	if (rc < 0) {
		c->storage_failed = true;
		return -1;
	}
	c->stats.frames++;
	c->stats.watermarks++;
	ack_policy_on_watermark_appended(&c->ack, lsn, now_us);
	return 0;
}

/* Make the pending batch durable; only then does durable_lsn move.  The
 * stream must record every position it acknowledges: a position passed
 * without a frame (an empty transaction) gets a watermark frame. */
static int flush_batch(struct capture_core *c, int64_t now_us, int64_t wall_us)
{
	if (!ack_policy_flush_needed(&c->ack, sink_pending(c)))
		return 0;
	uint64_t watermark_lsn;
	if (ack_policy_watermark_needed(&c->ack, &watermark_lsn) &&
	    append_watermark(c, watermark_lsn, now_us, wall_us) < 0)
		return -1;
	int rc = sink_sync(c);
	if (rc < 0) {
		c->storage_failed = true;
		return -1;
	}
	if (rc == 1)
		return 0; /* held back: nothing more is durable, nothing more acknowledged */
	c->stats.batches++;
	c->stats.durable_lsn = ack_policy_on_durable(&c->ack);
	fault_point("capture.after_append_before_ack");
	fault_pause("capture.after_append_before_ack");
	return 0;
}

static int write_watermark(struct capture_core *c, uint64_t lsn, int64_t now_us, int64_t wall_us)
{
	if (append_watermark(c, lsn, now_us, wall_us) < 0)
		return -1;
	return flush_batch(c, now_us, wall_us);
}

int capture_core_restart_point_add_frame(struct ack_restart_point *rp, int type, const uint8_t *payload,
					 size_t len, uint64_t offset, bool *committed)
{
	*committed = false;
	if (type != FRAME_TXN && type != FRAME_COMMIT_MARKER && type != FRAME_WATERMARK)
		return 0;
	struct env_frame_summary s;
	char err[256];
	if (env_frame_summary(type, payload, len, &s, err, sizeof err) < 0) {
		log_error("stream frame %" PRIu64 ": %s", offset, err);
		return -1;
	}
	if (type == FRAME_WATERMARK) {
		ack_restart_point_add_watermark(rp, s.lsn);
		return 0;
	}
	*committed = true;
	ack_restart_point_add_txn(rp, s.commit_lsn, s.end_lsn);
	return 0;
}

/* Where the stream ends, in source terms: the last committed
 * transaction's commit LSN, and the highest LSN any frame records (a
 * transaction's end or a watermark).  Scans segments from the newest
 * back until one holds a committed transaction (segments of watermarks
 * alone do not say which transactions are in the stream). */
static int stream_positions(struct stream_fs *fs, const char *dir, struct ack_restart_point *rp)
{
	*rp = (struct ack_restart_point){ 0 };
	uint64_t *bases = NULL;
	size_t n = 0;
	int rc = -1;
	if (stream_segment_bases_fs(fs, dir, &bases, &n) != STREAM_OK)
		return -1;
	struct stream_reader *r = NULL;
	if (n && stream_reader_open_fs(fs, dir, &r) != STREAM_OK)
		goto out;
	for (size_t k = n; k-- > 0;) {
		if (stream_reader_seek(r, bases[k]) != STREAM_OK)
			goto out;
		bool found_commit = false;
		struct stream_frame f;
		int st;
		while ((st = stream_reader_next(r, &f)) == STREAM_OK) {
			bool committed = false;
			if (capture_core_restart_point_add_frame(rp, f.header.type, f.payload, f.header.payload_length,
								 f.header.offset, &committed) < 0)
				goto out;
			found_commit |= committed;
		}
		if (st != STREAM_END)
			goto out;
		if (found_commit)
			break;
	}
	rc = 0;
out:
	stream_reader_close(r);
	free(bases);
	return rc;
}

int capture_core_open(struct capture_core **ccp, const struct capture_core_options *o)
{
	struct capture_core *c = xcalloc(1, sizeof *c);
	*ccp = c;
	c->max_batch_messages = o->ack.max_batch_messages;
	c->sink = o->sink; /* owned from here on, whatever open returns */
	c->slot = xstrdup(o->slot);
	c->source_id = xstrdup(o->source_id);
	relbind_init(&c->bind, o->table_schemas, o->table_names, o->n_tables);
	c->config_path = o->config_path ? xstrdup(o->config_path) : NULL;
	pgoutput_message_init(&c->msg);
	char err[PGOUTPUT_ERR_LEN];
	if (pgoutput_session_init(&c->session, o->proto_version, err, sizeof err) < 0) {
		log_error("%s", err);
		return EXIT_CONFIG;
	}
	c->session_open = true;

	struct ack_restart_point restart;
	if (c->sink.ops) {
		c->sink_name = xstrdup(o->sink_name ? o->sink_name : "sink");
		c->stats.next_offset = o->sink_next_offset;
		restart = o->sink_restart;
	} else {
		c->sink_name = xstrdup(o->stream_dir);
		struct stream_recovery rec;
		struct stream_writer *writer;
		int rc = stream_writer_open_fs(o->fs, o->stream_dir, &o->writer, &writer, &rec);
		if (rc != STREAM_OK)
			return stream_exit_code(rc, STREAM_FROM_CONFIG);
		c->sink = (struct capture_sink){ .ops = &local_sink_ops, .impl = writer };
		c->stats.next_offset = rec.next_offset;
		if (stream_positions(o->fs, o->stream_dir, &restart) < 0)
			return EXIT_DATAERR;
	}
	ack_policy_init(&c->ack, &o->ack, &restart);
	c->stats.durable_lsn = c->ack.durable_lsn;
	c->stats.stream_last_commit_lsn = c->ack.stream_last_commit_lsn;
	char l1[LSN_FORMAT_LEN], l2[LSN_FORMAT_LEN];
	log_info("stream \"%s\": next offset %" PRIu64 ", last commit %s, durable through %s", c->sink_name,
		 c->stats.next_offset, lsn_format(restart.last_commit_lsn, l1), lsn_format(c->ack.durable_lsn, l2));

	struct assembler_options ao = o->assembler;
	ao.skip_through_commit_lsn = c->ack.stream_last_commit_lsn;
	char aerr[512];
	if (assembler_open(&c->assembler, &ao, aerr, sizeof aerr) < 0) {
		c->assembler = NULL;
		log_error("%s", aerr);
		return EXIT_CANTCREAT;
	}
	return EXIT_OK;
}

/* ---- the source side ---- */

/* A Relation message of a flow table (relbind.h): EXIT_OK, or
 * EXIT_CONFIG (logged) once what came before is durable. */
static int check_relation(struct capture_core *c, int64_t now_us, int64_t wall_us)
{
	size_t t;
	const char *nsp = *c->msg.relation.nspname ? c->msg.relation.nspname : "pg_catalog";
	const char *name = c->msg.relation.relname;
	uint32_t oid = c->msg.relation.relid;
	enum relbind_verdict v = relbind_observe(&c->bind, oid, nsp, strlen(nsp), name, strlen(name), &t);
	if (v == RELBIND_OK)
		return EXIT_OK;
	const struct relbind_table *ft = &c->bind.tables[t];
	const char *path = c->config_path ? c->config_path : "the flow file";
	if (v == RELBIND_RENAMED) {
		log_error("flow table %s.%s (source relation %u) arrives as %s.%s: it was renamed or moved to another schema on the source; capture stops before writing any change of it (applyd would skip them as a table outside the dataset)",
			  ft->schema, ft->name, oid, nsp, name);
		log_hint("to follow it: do the same on the target (ALTER TABLE ... RENAME TO / SET SCHEMA), write %s.%s for %s.%s in dataset.tables of %s, then start capture and applyd again",
			 nsp, name, ft->schema, ft->name, path);
	} else {
		log_error("flow table %s.%s arrives as another relation (source relation %u, %u before): it was dropped and created again, or another table took its name; capture stops before writing any change of it",
			  ft->schema, ft->name, oid, ft->oid);
		log_hint("the target's %s.%s holds the rows of the relation before: copy the table again (trellara reseed --config %s --table %s.%s), then start capture again",
			 ft->schema, ft->name, path, ft->schema, ft->name);
	}
	/* what came before it is durable, to be acknowledged */
	if (flush_batch(c, now_us, wall_us) < 0)
		return EXIT_CANTCREAT;
	c->relation_stopped = true;
	return EXIT_CONFIG;
}

/* One XLogData message: decode, assemble, maybe flush. */
static int handle_xlogdata(struct capture_core *c, const uint8_t *data, size_t len, int64_t now_us,
			   int64_t wall_us)
{
	if (len < 25) {
		log_error("replication stream: XLogData message of %zu bytes is shorter than its 25-byte header", len);
		return EXIT_DATAERR;
	}
	uint64_t data_start = get_be64(data + 1);
	char err[PGOUTPUT_ERR_LEN];
	if (pgoutput_session_decode(&c->session, data + 25, len - 25, &c->msg, err, sizeof err) < 0) {
		char lsn[LSN_FORMAT_LEN];
		log_error("replication slot \"%s\" at %s: %s", c->slot, lsn_format(data_start, lsn), err);
		return EXIT_DATAERR;
	}
	if (c->msg.type == PGOUTPUT_RELATION) {
		int rc = check_relation(c, now_us, wall_us);
		if (rc != EXIT_OK)
			return rc;
	}
	/* Test hook: hold a transaction's commit (tests change things while
	 * its changes sit in a spill file). */
	if (c->msg.type == PGOUTPUT_COMMIT || c->msg.type == PGOUTPUT_STREAM_COMMIT)
		fault_pause("capture.before_commit");
	struct assembler_result result;
	char aerr[512];
	int rc = assembler_feed(c->assembler, &c->session, &c->msg, emit_frame, c, &result, aerr, sizeof aerr);
	if (rc < 0) {
		if (c->storage_failed || rc == ASSEMBLER_STORAGE_FAILED)
			return EXIT_CANTCREAT;
		char lsn[LSN_FORMAT_LEN];
		log_error("replication slot \"%s\" at %s: %s", c->slot, lsn_format(data_start, lsn), aerr);
		return EXIT_DATAERR;
	}
	if (result.event == ASSEMBLER_COMMITTED) {
		ack_policy_on_commit_appended(&c->ack, result.commit_lsn);
		c->stats.transactions++;
		c->stats.changes += result.changes;
		if (ack_policy_on_appended(&c->ack, result.end_lsn, sink_pending(c), now_us) &&
		    flush_batch(c, now_us, wall_us) < 0)
			return EXIT_CANTCREAT;
	} else if (result.event == ASSEMBLER_EMPTY) {
		ack_policy_on_passed(&c->ack, result.end_lsn);
	} else if (result.event == ASSEMBLER_FENCE) {
		/* verify's fence (DESIGN §9): a watermark at its end, durable
		 * now, so applyd holds there without waiting for a keepalive */
		ack_policy_on_passed(&c->ack, result.end_lsn);
		if (flush_batch(c, now_us, wall_us) < 0)
			return EXIT_CANTCREAT;
	} else if (result.event == ASSEMBLER_SKIPPED) {
		c->stats.skipped_duplicates++;
		char lsn[LSN_FORMAT_LEN];
		log_info("skipped transaction %u (commit %s): already in the stream", result.xid,
			 lsn_format(result.commit_lsn, lsn));
		ack_policy_on_passed(&c->ack, result.end_lsn);
	}
	return EXIT_OK;
}

static int handle_keepalive(struct capture_core *c, const uint8_t *data, size_t len, int64_t now_us,
			    int64_t wall_us, bool *reply)
{
	if (len < 18) {
		log_error("replication stream: keepalive of %zu bytes is shorter than 18", len);
		return EXIT_DATAERR;
	}
	uint64_t wal_end = get_be64(data + 1);
	bool reply_requested = data[17] != 0;
	struct ack_keepalive_decision d =
		ack_policy_on_keepalive(&c->ack, wal_end, reply_requested, assembler_in_transaction(c->assembler));
	if (d.record) {
		if (flush_batch(c, now_us, wall_us) < 0)
			return EXIT_CANTCREAT;
		if (ack_policy_keepalive_watermark(&c->ack, wal_end, reply_requested, now_us) &&
		    write_watermark(c, wal_end, now_us, wall_us) < 0)
			return EXIT_CANTCREAT;
	}
	if (d.reply)
		*reply = true;
	return EXIT_OK;
}

int capture_core_on_message(struct capture_core *c, const uint8_t *msg, size_t len, int64_t now_us,
			    int64_t wall_us, bool *reply)
{
	*reply = false;
	/* under continuous traffic too, acknowledge at least once per interval */
	if (++c->messages_since_check >= CAPTURE_STATUS_CHECK_MESSAGES) {
		c->messages_since_check = 0;
		if (ack_policy_status_interval_elapsed(&c->ack, now_us)) {
			if (flush_batch(c, now_us, wall_us) < 0)
				return EXIT_CANTCREAT;
			*reply = true;
		}
	}
	if (len == 0) {
		log_warn("replication stream: ignoring an empty message");
		return EXIT_OK;
	}
	if (msg[0] == 'w') {
		int rc = handle_xlogdata(c, msg, len, now_us, wall_us);
		if (c->relation_stopped)
			*reply = true; /* acknowledge what is durable before stopping */
		return rc;
	}
	if (msg[0] == 'k')
		return handle_keepalive(c, msg, len, now_us, wall_us, reply);
	log_warn("replication stream: ignoring unknown message type 0x%02x", msg[0]);
	return EXIT_OK;
}

enum capture_core_quiet capture_core_quiet(const struct capture_core *c, int64_t now_us)
{
	/* Under load the next message is usually a moment away: give the
	 * batch up to ACK_GROUP_COMMIT_WAIT_US more before its fdatasync
	 * (group commit), then end it. */
	return ack_policy_batch_may_wait(&c->ack, now_us) ? CAPTURE_CORE_WAIT : CAPTURE_CORE_FLUSH;
}

int capture_core_flush(struct capture_core *c, int64_t now_us, int64_t wall_us)
{
	return flush_batch(c, now_us, wall_us) < 0 ? EXIT_CANTCREAT : EXIT_OK;
}

bool capture_core_held(const struct capture_core *c)
{
	return c->held;
}

bool capture_core_status_due(const struct capture_core *c, int64_t now_us)
{
	return ack_policy_status_due(&c->ack, now_us);
}

void capture_core_status_message(const struct capture_core *c, uint8_t out[CAPTURE_STATUS_MESSAGE_LEN],
				 int64_t wall_us, bool reply_requested)
{
	uint64_t lsn_reported = ack_policy_report_lsn(&c->ack);
	out[0] = 'r';
	put_be64(out + 1, lsn_reported);  /* written */
	put_be64(out + 9, lsn_reported);  /* flushed */
	put_be64(out + 17, lsn_reported); /* applied */
	put_be64(out + 25, (uint64_t)(wall_us - PG_EPOCH_OFFSET_US));
	out[33] = reply_requested ? 1 : 0;
}

void capture_core_on_status_sent(struct capture_core *c, int64_t now_us)
{
	ack_policy_on_reported(&c->ack, now_us);
	char lsn[LSN_FORMAT_LEN];
	log_debug("standby status: flushed %s", lsn_format(c->ack.reported_lsn, lsn));
}

void capture_core_reconnected(struct capture_core *c)
{
	/* Anything open belongs to the old connection: the server sends it
	 * again from the slot's confirmed position. */
	pgoutput_session_reset(&c->session);
	assembler_reset(c->assembler);
	ack_policy_on_connect(&c->ack);
	assembler_set_skip_through(c->assembler, c->ack.stream_last_commit_lsn);
}

struct capture_core_stats capture_core_stats(const struct capture_core *c)
{
	struct capture_core_stats s = c->stats;
	s.durable_lsn = c->ack.durable_lsn;
	s.stream_last_commit_lsn = c->ack.stream_last_commit_lsn;
	s.last_status_us = c->ack.last_status_us;
	return s;
}

void capture_core_close(struct capture_core *c)
{
	if (!c)
		return;
	assembler_close(c->assembler);
	if (c->sink.ops)
		c->sink.ops->close(c->sink.impl);
	free(c->sink_name);
	pgoutput_message_release(&c->msg);
	if (c->session_open)
		pgoutput_session_free(&c->session);
	free(c->slot);
	free(c->source_id);
	relbind_free(&c->bind);
	free(c->config_path);
	free(c);
}

struct relbind *capture_core_relations(struct capture_core *c)
{
	return &c->bind;
}
