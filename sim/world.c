/*
 * world.c - one simulated run (world.h).
 *
 * The components are the project's own code: capture_core (pgoutput
 * decoder, assembler, ack policy, stream writer) and apply_engine (with
 * apply_core, apply_chunks, apply_fence and the planner) over the stream
 * library on stream_fs_sim; only the source (model_source) and the
 * target database (model_target) are models.  capture and applyd each
 * see the disk through a view of their own, so that one can die while
 * the other goes on; a power loss takes both.  With options.broker the
 * stream is the replicated broker model (model_broker) instead, which
 * capture publishes to and applyd reads from through the JetStream
 * clients' rules (model_broker_client); the views then only say whether
 * the process is alive.
 */
#include "world.h"

#include "model_broker.h"
#include "model_broker_client.h"
#include "model_source.h"
#include "model_target.h"
#include "sim_db.h"
#include "sim_rng.h"

#include "trellara/apply_engine.h"
#include "trellara/capture_core.h"
#include "trellara/config.h"
#include "trellara/defaults.h"
#include "trellara/envelope.h"
#include "trellara/fault.h"
#include "trellara/log.h"
#include "trellara/runstate.h"
#include "trellara/slot_policy.h"
#include "trellara/stream.h"
#include "trellara/frame_source.h"
#include "trellara/stream_fs.h"
#include "trellara/xalloc.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STREAM_DIR "/sim/stream"
#define GROUP "applyd"
#define HEAL_STEPS 5000

/* The fault points, by component (fault.h names; stream.* are capture's
 * writer's: trellara-capture opens its writer with the "capture" prefix). */
static const char *const capture_points[] = {
	"capture.after_append_before_ack", "capture.after_chunk_sync", "capture.after_manifest_sync", "capture.mid_frame_write",
	"capture.after_write_before_sync", "capture.after_sync_before_index",
};
/* capture's points on the broker: the stream writer's are the local stream's */
static const char *const broker_capture_points[] = {
	"capture.after_append_before_ack", "capture.after_chunk_sync", "capture.before_sync",
};
static const char *const applyd_points[] = {
	"applyd.before_target_commit",
	"applyd.after_target_commit_before_group_ack",
	"applyd.after_commit_failed",
};
static const char *const snapshot_points[] = {
	"snapshot.after_export_before_copy",
	"snapshot.mid_table_copy",
	"snapshot.after_range_commit",
	"snapshot.after_copy_before_handoff",
	"snapshot.after_handoff_before_stream",
};

struct world {
	struct sim_world_options o;
	struct sim_world_result *r;
	struct sim_rng rng;
	int64_t now_us;
	struct stream_fs *disk, *cap_fs, *app_fs, *ops_fs;
	struct model_source *src;
	struct flow_config cfg;
	/* capture */
	bool cap_up;
	struct capture_core *cc;
	int cap_down_steps;
	/* the stream's binding (its meta file): the timeline capture followed
	 * last; 0 until capture first streamed into it */
	uint32_t stream_timeline;
	/* capture stopped on its slot (exit 65) and stays down until the
	 * operator's copy of the whole flow has created a new one */
	bool slot_stopped;
	/* applyd */
	bool app_up;
	struct frame_source app_src; /* applyd's view of the stream */
	struct apply_engine *engine;
	int app_down_steps;
	bool app_stopped_by_quarantine;
	struct model_target target;
	struct apply_tables defs;
	/* faults */
	const char *armed_point;
	unsigned armed_nth, armed_hits;
	bool armed_power;
	bool kill_capture, kill_applyd, power_now;
	bool divergence_injected, divergence_repaired;
	uint32_t quarantined_xid;
	int fence_release_at;
	int leftover_kill_at;   /* (leftovers_at_step) the step capture is killed at (0: none) */
	bool leftover_restarting; /* (leftovers_at_step) killed: the leader steps down once capture is back */
	/* verify's fence in two steps (options.fence_moves): the slot's
	 * consistent point, taken once the first fence holds, and the step
	 * the fence moves there */
	uint64_t slot_lsn;
	int move_at;
	bool fence_moved;
	/* the model snapshot: options.snapshot, or the operator's copy of
	 * the whole flow after the slot was lost (recopying until its handoff) */
	bool snapshot, recopying;
	enum run_state run;
	uint64_t consistent_lsn;
	uint64_t copy_lsn;   /* the exported snapshot's position */
	bool export_alive;   /* the invocation that exported it still runs */
	bool kill_snapshot;  /* the armed fault point killed it */
	bool failure_to_record; /* a copy failed in a way the run records (not a lost target) */
	bool copied[MODEL_SOURCE_MAX_TABLES], copied_stable[MODEL_SOURCE_MAX_TABLES];
	uint64_t table_watermark[MODEL_SOURCE_MAX_TABLES];
	uint32_t schema_now[MODEL_SOURCE_MAX_TABLES], schema_at_export[MODEL_SOURCE_MAX_TABLES];
	/* split tables (options.split_ranges): each range's progress row as
	 * the target holds it (copied, the hash of what it read), and, for
	 * the checks only, the schema version it was copied at and whether
	 * the schema held still through its copy; whether this invocation
	 * has planned its split tables yet */
	bool range_copied[MODEL_SOURCE_MAX_TABLES][SIM_MAX_RANGES];
	char range_hash[MODEL_SOURCE_MAX_TABLES][SIM_MAX_RANGES][40];
	uint32_t range_schema[MODEL_SOURCE_MAX_TABLES][SIM_MAX_RANGES];
	bool range_stable[MODEL_SOURCE_MAX_TABLES][SIM_MAX_RANGES];
	bool split_planned;
	char failure_reason[160];
	/* a reseed in progress: the table, and the fence it waits behind */
	int reseed_phase; /* 0 none, 1 fence set, 2 done */
	size_t reseed_table;
	/* the broker (options.broker), NULL for the local stream */
	struct model_broker *broker;
	int outage_until;       /* the step the nodes down come back at (0: no outage) */
	int publish_fail_until; /* the step publishes stop failing at (0: they do not fail) */
	bool quorum_lost;       /* fewer nodes up than a quorum */
	uint64_t ack_bound;     /* while quorum_lost: what the source may be told */
	uint64_t slot_created_lsn; /* the confirmed position of the slot created last (not an acknowledgement) */
	bool node_lost;         /* nodes down, the quorum kept */
	uint64_t committed_mark; /* the broker's committed messages, last counted */
	uint64_t checked_confirmed; /* the slot's confirmed position last checked against the broker */
	bool cap_held;          /* capture is held back by the broker (capture_core_held) */
	bool healing;
	bool failed;
};

/* ---- outcome ---- */

static void trace(struct world *w, const char *what, uint64_t a, uint64_t b)
{
	uint64_t h = w->r->trace_digest ? w->r->trace_digest : 1469598103934665603ULL;
	for (const char *p = what; *p; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ULL;
	for (int i = 0; i < 8; i++)
		h = (h ^ (uint8_t)(a >> (8 * i))) * 1099511628211ULL;
	for (int i = 0; i < 8; i++)
		h = (h ^ (uint8_t)(b >> (8 * i))) * 1099511628211ULL;
	w->r->trace_digest = h;
	if (w->o.trace)
		fprintf(stderr, "sim step %" PRIu64 ": %s %" PRIu64 " %" PRIu64 "\n", w->r->steps, what, a, b);
}

static void violated(struct world *w, const char *invariant, const char *fmt, ...)
{
	if (w->failed)
		return;
	w->failed = true;
	w->r->ok = false;
	snprintf(w->r->invariant, sizeof w->r->invariant, "%s", invariant);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(w->r->detail, sizeof w->r->detail, fmt, ap);
	va_end(ap);
	trace(w, invariant, 0, 0);
}

/* ---- the fault hook ---- */

static bool is_capture_point(const char *name)
{
	return strncmp(name, "capture.", 8) == 0 || strncmp(name, "stream.", 7) == 0;
}

static void kill_views_for(struct world *w, const char *name)
{
	if (is_capture_point(name)) {
		w->kill_capture = true;
		stream_fs_sim_view_kill(w->cap_fs);
	} else if (strncmp(name, "snapshot.", 9) == 0) {
		w->kill_snapshot = true;
	} else {
		w->kill_applyd = true;
		stream_fs_sim_view_kill(w->app_fs);
		model_target_disconnect(&w->target);
	}
}

static void hook_point(void *ctx, const char *name)
{
	struct world *w = ctx;
	if (!w->armed_point || strcmp(name, w->armed_point) != 0)
		return;
	if (++w->armed_hits != w->armed_nth)
		return;
	w->r->fault_points_hit++;
	trace(w, name, w->armed_hits, 0);
	w->armed_point = NULL;
	if (w->armed_power) {
		/* the power goes at this instant: every process dies with it */
		w->power_now = true;
		w->kill_capture = w->kill_applyd = true;
		stream_fs_sim_view_kill(w->cap_fs);
		stream_fs_sim_view_kill(w->app_fs);
		model_target_disconnect(&w->target);
	} else {
		kill_views_for(w, name);
	}
}

static bool hook_armed(void *ctx, const char *name)
{
	struct world *w = ctx;
	return w->armed_point && strcmp(name, w->armed_point) == 0;
}

/* ---- invariants ---- */

/* dst's table becomes src's (TRUNCATE, then every row): a copy. */
static void copy_table(struct sim_db *dst, const struct sim_db *src, const char *table)
{
	sim_db_truncate(dst, table);
	uint16_t n_key;
	const char *const *cols;
	uint16_t n = sim_db_columns(src, table, &n_key, &cols);
	const char *const *row;
	for (size_t i = 0; (row = sim_db_row(src, table, i)) != NULL; i++)
		sim_db_insert(dst, table, (struct sim_values){ row, n });
}

/* What the target must hold when its checkpoint is at last_commit: the
 * source's state there, except a table whose snapshot watermark lies
 * beyond it, which holds the source's state at its watermark (its copy;
 * the changes below the watermark are filtered). */
static struct sim_db *expected_target(struct world *w, uint64_t last_commit)
{
	struct sim_db *want = sim_db_clone(model_source_state_at(w->src, last_commit));
	for (size_t i = 0; i < w->target.n_watermarks; i++) {
		if (w->target.watermark_lsns[i] <= last_commit)
			continue;
		struct sim_db *at = sim_db_clone(model_source_state_at(w->src, w->target.watermark_lsns[i] - 1));
		copy_table(want, at, w->target.watermark_tables[i]);
		sim_db_free(at);
	}
	return want;
}

/* What the engine must guarantee the target (model_target.violation). */
static void check_target_model(struct world *w)
{
	if (w->target.violation[0])
		violated(w, w->target.violation, "%s", w->target.violation_detail);
}

/* After every commit that reached the target database. */
static void on_target_commit(void *ctx, struct model_target *t)
{
	struct world *w = ctx;
	check_target_model(w);
	struct sim_db *want = expected_target(w, t->cp.last_commit_lsn);
	if (!w->divergence_injected || w->divergence_repaired) {
		char diff[400];
		if (sim_db_diff(want, t->db, diff, sizeof diff))
			violated(w, "target_equals_source_at_applied_lsn",
				 "after a target commit (checkpoint at commit %" PRIX64 "): %s", t->cp.last_commit_lsn, diff);
	}
	sim_db_free(want);
	trace(w, "target_commit", t->cp.last_commit_lsn, t->cp.applied_transactions);
}

/* The stream as the harness reads it (no component: it sees everything):
 * the local stream's files through the operator's view, or the broker's
 * committed messages whatever is up. */
struct ops_reader {
	struct world *w;
	struct stream_reader *rd; /* owned: the local stream's */
	uint64_t next_seq;        /* the broker's next message */
};

static int ops_open(struct world *w, struct ops_reader *o)
{
	*o = (struct ops_reader){ .w = w, .next_seq = 1 };
	return w->broker ? STREAM_OK : stream_reader_open_fs(w->ops_fs, STREAM_DIR, &o->rd);
}

static int ops_seek(struct ops_reader *o, uint64_t offset)
{
	if (!o->w->broker)
		return stream_reader_seek(o->rd, offset);
	if (offset > model_broker_committed(o->w->broker))
		return STREAM_ERANGE;
	o->next_seq = offset + 1;
	return STREAM_OK;
}

static int ops_next(struct ops_reader *o, struct stream_frame *f)
{
	if (!o->w->broker)
		return stream_reader_next(o->rd, f);
	size_t len;
	const uint8_t *data = model_broker_committed_entry(o->w->broker, o->next_seq, &len);
	if (!data)
		return STREAM_END;
	const char *reason;
	if (len < FRAME_HEADER_SIZE || !frame_decode_header(data, &f->header, &reason) ||
	    FRAME_HEADER_SIZE + (size_t)f->header.payload_length != len || f->header.offset != o->next_seq - 1) {
		violated(o->w, "stream_frames_decode", "broker message %" PRIu64 " is not the frame at offset %" PRIu64,
			 o->next_seq, o->next_seq - 1);
		return STREAM_ECORRUPT;
	}
	f->payload = data + FRAME_HEADER_SIZE;
	f->segment = "broker";
	f->position = o->next_seq++;
	return STREAM_OK;
}

static void ops_close(struct ops_reader *o)
{
	if (o->rd)
		stream_reader_close(o->rd);
	o->rd = NULL;
}

/* The stream, read from its start: each commit once, in commit order;
 * how many transactions commit at or below through_lsn. */
static uint64_t stream_transactions(struct world *w, uint64_t through_lsn, bool *from_start)
{
	struct ops_reader rd;
	uint64_t n = 0, last = 0;
	*from_start = false;
	if (ops_open(w, &rd) != STREAM_OK)
		return 0;
	uint64_t *bases = NULL;
	size_t nb = 0;
	if (w->broker)
		*from_start = true; /* nothing removes the broker's messages */
	else if (stream_segment_bases_fs(w->ops_fs, STREAM_DIR, &bases, &nb) == STREAM_OK && nb)
		*from_start = bases[0] == 0;
	uint64_t start = nb ? bases[0] : 0;
	free(bases);
	if (ops_seek(&rd, start) != STREAM_OK) {
		ops_close(&rd);
		return 0;
	}
	struct stream_frame f;
	while (ops_next(&rd, &f) == STREAM_OK) {
		if (f.header.type == FRAME_CHUNK)
			w->r->chunks++;
		if (f.header.type != FRAME_TXN && f.header.type != FRAME_COMMIT_MARKER)
			continue;
		struct env_frame_summary s;
		char err[256];
		if (env_frame_summary(f.header.type, f.payload, f.header.payload_length, &s, err, sizeof err) < 0) {
			violated(w, "stream_frames_decode", "stream offset %" PRIu64 ": %s", f.header.offset, err);
			break;
		}
		if (s.commit_lsn <= last)
			violated(w, "transaction_dedup_before_reapply",
				 "the stream holds commit %" PRIX64 " at offset %" PRIu64 " after commit %" PRIX64,
				 s.commit_lsn, f.header.offset, last);
		last = s.commit_lsn;
		if (s.commit_lsn <= through_lsn)
			n++;
	}
	ops_close(&rd);
	return n;
}

/* ---- the flow ---- */

void sim_flow_tables(const struct model_source *src, struct apply_tables *defs)
{
	memset(defs, 0, sizeof *defs);
	defs->tables = xcalloc(MODEL_SOURCE_MAX_TABLES, sizeof *defs->tables);
	for (size_t i = 0; i < model_source_tables(src); i++) {
		const struct model_source_table *t = model_source_table(src, i);
		struct apply_table *d = &defs->tables[defs->n_tables++];
		d->name = xstrdup(t->name);
		d->n_pk = t->n_key;
		d->pk = xcalloc(t->n_key, sizeof *d->pk);
		for (int k = 0; k < t->n_key; k++)
			d->pk[k] = xstrdup(t->cols[k]);
	}
}

/* ---- capture ---- */

void sim_capture_options(struct capture_core_options *co, struct stream_fs *fs, const char *dir, int proto_version,
			 int chunk_changes, int batch, int batch_messages)
{
	*co = (struct capture_core_options){
		.fs = fs,
		.stream_dir = dir,
		.slot = "sim_slot",
		.source_id = "sim",
		.proto_version = proto_version,
		.writer = { .segment_bytes = MIN_SEGMENT_BYTES, .min_free_bytes = 0, .source_id = "sim", .flow = "sim",
			    .fault_prefix = "capture" },
		/* nothing spills: the assembler's spill files are on the host's
		 * file system, outside the simulation */
		.assembler = { .source_id = "sim", .flow = "sim", .spill_dir = "/nonexistent-sim-spill",
			       .spill_threshold_changes = UINT64_MAX / 2, .strict_chunking = chunk_changes > 0,
			       .max_changes_per_chunk = chunk_changes > 0 ? (uint64_t)chunk_changes : 1000,
			       .max_frame_payload = MAX_FRAME_PAYLOAD, .target_frame_payload = FRAME_TARGET_PAYLOAD },
		.ack = { .status_interval_us = 10000, .watermark_interval_us = 50000,
			 .max_batch_transactions = (uint64_t)batch, .max_batch_messages = (uint64_t)batch_messages },
	};
}

static void capture_down(struct world *w, const char *why)
{
	if (!w->cap_up)
		return;
	w->r->capture_skipped += capture_core_stats(w->cc).skipped_duplicates;
	capture_core_close(w->cc);
	w->cc = NULL;
	w->cap_up = false;
	w->cap_held = false;
	w->cap_down_steps = (int)sim_rng_between(&w->rng, 1, 6);
	model_source_disconnect(w->src);
	w->r->crashes++;
	trace(w, why, 0, 0);
}

/* The slot's start may pass only what the stream holds and what the
 * latest copy of the flow covers (committed below its consistent
 * point): a transaction with changes between them would never reach the
 * target. */
static void check_slot_start(struct world *w, uint64_t stream_last_commit)
{
	uint64_t start = model_source_confirmed_flush(w->src);
	for (size_t i = 0; i < model_source_txns(w->src); i++) {
		const struct model_source_txn *t = model_source_txn(w->src, i);
		if (t->commit_lsn >= start)
			return; /* the session sends it */
		/* in the stream, in the copy, or applied: retention removes only
		 * what the group passed, so the stream's retained part may hold
		 * no commit at all (its last commit then reads 0) while the target
		 * applied everything before it (a skip there would leave the
		 * target unlike the source: target_equals_source_at_applied_lsn) */
		if (t->commit_lsn <= stream_last_commit || t->commit_lsn < w->consistent_lsn || t->changes == 0 ||
		    t->commit_lsn <= w->target.cp.last_commit_lsn)
			continue;
		violated(w, "no_committed_transaction_skipped",
			 "the slot starts at %" PRIX64 ", past transaction %u (commit %" PRIX64 ", %" PRIu64
			 " changes): the stream holds commits through %" PRIX64 ", the latest copy covers below %" PRIX64,
			 start, t->xid, t->commit_lsn, t->changes, stream_last_commit, w->consistent_lsn);
		return;
	}
}

/* capture.c's ensure_slot: the facts it reads (pg_replication_slots, the
 * stream's binding and durable end, IDENTIFY_SYSTEM's timeline), the
 * real slot_policy_decide(), and what capture does with the verdict:
 * true to stream (from a slot created first, when the verdict says so);
 * false when capture stops with the verdict's exit code. */
static bool capture_slot_decides(struct world *w)
{
	struct model_source_slot slot;
	model_source_slot(w->src, &slot);
	struct capture_core_stats st = capture_core_stats(w->cc);
	struct slot_facts f = {
		.exists = slot.exists,
		.logical_pgoutput = slot.exists,
		.wal_status = slot.wal_status,
		.invalidation_reason = slot.invalidation_reason,
		.stream_holds_changes = st.durable_lsn > 0 || w->stream_timeline != 0,
		.stream_timeline = w->stream_timeline,
		.source_timeline = model_source_timeline(w->src),
		.start_now = false,
	};
	enum slot_verdict v = slot_policy_decide(&f);
	trace(w, slot_policy_name(v), f.stream_timeline, f.source_timeline);
	switch (v) {
	case SLOT_CREATE:
		model_source_create_slot(w->src);
		w->slot_created_lsn = model_source_confirmed_flush(w->src);
		/* fall through */
	case SLOT_USE:
		w->stream_timeline = f.source_timeline; /* the binding follows the timeline */
		check_slot_start(w, st.stream_last_commit_lsn);
		return true;
	case SLOT_LOST_AT_PROMOTION:
		w->r->slot_stops_lost_at_promotion++;
		break;
	case SLOT_GONE:
		w->r->slot_stops_gone++;
		break;
	case SLOT_INVALIDATED:
		w->r->slot_stops_invalidated++;
		break;
	case SLOT_NOT_CREATED:
	case SLOT_WRONG_KIND:
		violated(w, "capture_runs", "capture refused the slot: %s (exit %d)", slot_policy_name(v),
			 slot_policy_exit_code(v));
		return false;
	}
	if (slot_policy_exit_code(v) != EXIT_DATAERR)
		violated(w, "capture_runs", "capture stopped on its slot (%s) with exit %d, not %d", slot_policy_name(v),
			 slot_policy_exit_code(v), EXIT_DATAERR);
	return false;
}

/* START_REPLICATION after the slot's check; false when capture stopped
 * (down until the operator's copy, operator_recopies). */
static bool capture_connect(struct world *w)
{
	if (!capture_slot_decides(w)) {
		capture_down(w, "capture_slot_stop");
		w->r->crashes--; /* not a crash: capture exited 65 and stays down */
		w->slot_stopped = true;
		return false;
	}
	if (model_source_connect(w->src) < 0) {
		violated(w, "capture_runs", "%s", model_source_error(w->src));
		return false;
	}
	return true;
}

static void capture_start(struct world *w)
{
	stream_fs_sim_view_restart(w->cap_fs);
	struct capture_core_options co;
	sim_capture_options(&co, w->cap_fs, STREAM_DIR, model_source_proto_version(w->src), w->o.chunk_changes,
			    w->o.capture_batch, w->o.capture_batch_messages);
	/* streamed transactions written once: pending chunks need no spill file */
	co.assembler.streamed_threshold_changes = (uint64_t)w->o.written_once_changes;
	if (w->broker) {
		/* capture_jetstream_open: the restart point from the stream's
		 * last messages, through the leader */
		int brc = model_broker_sink_open(w->broker, w->cap_fs, &w->now_us, "sim:sim", &co.sink, &co.sink_restart,
						 &co.sink_next_offset);
		if (brc == EXIT_UNAVAILABLE) {
			/* exit 69: the supervisor starts it again a little later */
			w->cap_down_steps = (int)sim_rng_between(&w->rng, 1, 6);
			trace(w, "capture_broker_unavailable", 0, 0);
			return;
		}
		if (brc != EXIT_OK) {
			violated(w, "capture_restarts", "capture could not read the broker's stream (exit %d)", brc);
			return;
		}
		co.sink_name = "broker";
	}
	int rc = capture_core_open(&w->cc, &co);
	if (rc != EXIT_OK) {
		capture_core_close(w->cc);
		w->cc = NULL;
		violated(w, "capture_restarts", "capture could not open the stream after a restart (exit %d)", rc);
		return;
	}
	/* what a restart must find: every position the source was told */
	struct capture_core_stats st = capture_core_stats(w->cc);
	/* (the slot's creation at the snapshot's consistent point is not an
	 * acknowledgement of anything) */
	uint64_t durable = st.durable_lsn > w->consistent_lsn ? st.durable_lsn : w->consistent_lsn;
	if (model_source_highest_flushed(w->src) > durable)
		violated(w, w->broker ? "source_checkpoint_after_broker_ack" : "source_ack_after_local_fsync_durability",
			 "the source was told %" PRIX64 " is flushed, but after the crash the stream ends at %" PRIX64,
			 model_source_highest_flushed(w->src), st.durable_lsn);
	w->cap_up = true;
	trace(w, "capture_start", st.durable_lsn, st.stream_last_commit_lsn);
	capture_connect(w);
}

static void capture_send_status(struct world *w, bool reply)
{
	uint8_t m[CAPTURE_STATUS_MESSAGE_LEN];
	capture_core_status_message(w->cc, m, w->now_us, reply);
	if (!w->healing && sim_rng_chance(&w->rng, w->o.p_status_lost)) {
		trace(w, "status_lost", 0, 0);
		return; /* the network lost it; capture believes it went */
	}
	model_source_on_status(w->src, m, sizeof m);
	capture_core_on_status_sent(w->cc, w->now_us);
}

static void capture_failed(struct world *w, int rc, const char *where)
{
	if (w->kill_capture || w->power_now) {
		capture_down(w, "capture_killed");
		return;
	}
	if (rc == EXIT_CANTCREAT) {
		/* the stream refused a write or sync: the process exits, the
		 * supervisor restarts it (as systemd would) */
		capture_down(w, "capture_storage_failed");
		return;
	}
	violated(w, "capture_runs", "capture failed in %s with exit %d", where, rc);
}

/* Whether the sink holds capture back now (only the broker's does):
 * counted when it starts and when it ends. */
static void note_held(struct world *w)
{
	bool held = w->cap_up && capture_core_held(w->cc);
	if (held && !w->cap_held) {
		w->r->broker_holds++;
		trace(w, "capture_held", 0, 0);
	} else if (!held && w->cap_held && w->cap_up) {
		w->r->broker_resumes++;
		trace(w, "capture_resumed", 0, 0);
	}
	w->cap_held = held;
}

/* capture.c's held_back: nothing is read from the source; a status
 * update when due (acknowledging only what is durable; a source
 * connection found lost then makes capture exit 69, and the restart
 * resumes from what the stream stored); the flush tried again. */
static void capture_held_step(struct world *w)
{
	if (capture_core_status_due(w->cc, w->now_us)) {
		if (!model_source_connected(w->src)) {
			capture_down(w, "capture_held_source_lost");
			return;
		}
		capture_send_status(w, false);
	}
	int rc = capture_core_flush(w->cc, w->now_us, w->now_us);
	if (w->kill_capture || w->power_now || rc != EXIT_OK) {
		capture_failed(w, rc == EXIT_OK ? EXIT_CANTCREAT : rc, "flush");
		return;
	}
	note_held(w);
}

static void capture_step(struct world *w)
{
	if (!w->cap_up)
		return;
	if (capture_core_held(w->cc)) {
		capture_held_step(w);
		return;
	}
	for (int k = (int)sim_rng_between(&w->rng, 1, 8); k > 0 && w->cap_up && !w->failed; k--) {
		const uint8_t *buf;
		size_t len;
		int got = model_source_next(w->src, &buf, &len);
		if (got < 0) {
			if (capture_connect(w))
				capture_core_reconnected(w->cc);
			return;
		}
		if (got == 0) {
			int rc = capture_core_flush(w->cc, w->now_us, w->now_us);
			if (w->kill_capture || w->power_now || rc != EXIT_OK) {
				capture_failed(w, rc, "flush");
				return;
			}
			note_held(w);
			if (capture_core_status_due(w->cc, w->now_us))
				capture_send_status(w, false);
			return;
		}
		bool reply = false;
		int rc = capture_core_on_message(w->cc, buf, len, w->now_us, w->now_us, &reply);
		if (w->kill_capture || w->power_now || rc != EXIT_OK) {
			capture_failed(w, rc == EXIT_OK ? EXIT_CANTCREAT : rc, "a message");
			return;
		}
		if (reply)
			capture_send_status(w, false);
		w->now_us += 50;
		if (capture_core_held(w->cc)) {
			/* capture.c stops reading the source */
			note_held(w);
			return;
		}
	}
	if (w->cap_up && capture_core_quiet(w->cc, w->now_us) == CAPTURE_CORE_FLUSH) {
		int rc = capture_core_flush(w->cc, w->now_us, w->now_us);
		if (w->kill_capture || w->power_now || rc != EXIT_OK) {
			capture_failed(w, rc == EXIT_OK ? EXIT_CANTCREAT : rc, "flush");
			return;
		}
		note_held(w);
		if (capture_core_status_due(w->cc, w->now_us))
			capture_send_status(w, false);
	}
}

/* ---- applyd ---- */

static void applyd_down(struct world *w, const char *why)
{
	if (!w->app_up)
		return;
	if (model_target_in_txn(&w->target))
		w->r->kills_in_open_txn++;
	w->r->overlapped += apply_engine_stats(w->engine)->overlapped;
	w->r->serial_fallbacks += apply_engine_stats(w->engine)->serial_fallbacks;
	w->r->copy_statements += apply_engine_stats(w->engine)->copies;
	apply_engine_free(w->engine);
	w->engine = NULL;
	frame_source_close(&w->app_src);
	model_target_disconnect(&w->target);
	w->app_up = false;
	w->app_down_steps = (int)sim_rng_between(&w->rng, 1, 6);
	w->r->crashes++;
	trace(w, why, 0, 0);
}

static bool run_move(struct world *w, enum run_state to);

/* The snapshot recorded its handoff (failed_recoverable is outside the order). */
static bool handed_off(const struct world *w)
{
	return w->run == RUN_STREAM_HANDOFF_READY || w->run == RUN_STREAMING || w->run == RUN_VERIFIED;
}

/* applyd's start: connect, refuse past a quarantine, read the
 * checkpoint, position the reader (as trellara-applyd's connect_target
 * and position_reader do). */
static bool applyd_connect(struct world *w)
{
	model_target_connect(&w->target);
	struct quarantine_entry *q;
	bool any_quarantined;
	int nq = model_target_open_entries(&w->target, &q, &any_quarantined);
	if (any_quarantined) {
		free(q);
		model_target_disconnect(&w->target);
		w->app_stopped_by_quarantine = true;
		return false;
	}
	struct apply_tables tables = { 0 };
	model_target_ops.reload_tables(model_target_session(&w->target, 0), &tables);
	apply_engine_connected(w->engine, &w->target.cp, q, nq, &tables);
	free(q);
	uint64_t group = 0;
	bool exists = false;
	if (frame_source_position_get(&w->app_src, &group, &exists) != STREAM_OK)
		return false;
	bool ahead;
	uint64_t start = apply_engine_start_offset(&w->target.cp, group, exists, &ahead);
	if (frame_source_seek(&w->app_src, start) != STREAM_OK)
		return false; /* not published yet: try again later */
	apply_engine_start(w->engine, start);
	return true;
}

static void applyd_start(struct world *w)
{
	if (w->snapshot && !handed_off(w))
		return; /* the snapshot holds the flow's lock until its handoff is recorded */
	stream_fs_sim_view_restart(w->app_fs);
	if (w->broker) {
		/* applyd_jetstream_open: no leader, no reader (applyd retries) */
		if (model_broker_source_open(w->broker, w->app_fs, &w->app_src) != STREAM_OK)
			return;
	} else {
		struct stream_fs_stat st;
		if (w->app_fs->stat(w->app_fs, STREAM_DIR "/meta", &st) < 0)
			return; /* the stream does not exist yet: wait for capture */
		if (frame_source_local_open(w->app_fs, STREAM_DIR, GROUP, &w->app_src) != STREAM_OK)
			return;
	}
	w->engine = apply_engine_new(&w->cfg, &model_target_ops, model_target_session(&w->target, 0), &w->app_src);
	for (int i = 1; i < w->target.n_sessions; i++)
		apply_engine_add_worker(w->engine, model_target_session(&w->target, i));
	w->app_up = true;
	w->app_stopped_by_quarantine = false;
	if (!applyd_connect(w)) {
		bool q = w->app_stopped_by_quarantine;
		apply_engine_free(w->engine);
		w->engine = NULL;
		frame_source_close(&w->app_src);
		w->app_up = false;
		w->app_stopped_by_quarantine = q;
		w->app_down_steps = 2;
		return;
	}
	if (w->snapshot && w->target.n_watermarks < model_source_tables(w->src))
		violated(w, "snapshot_handoff_before_stream_checkpoint",
			 "applyd started with %zu of %zu tables' handoff watermarks recorded", w->target.n_watermarks,
			 model_source_tables(w->src));
	if (w->snapshot && w->run == RUN_STREAM_HANDOFF_READY)
		run_move(w, RUN_STREAMING);
	trace(w, "applyd_start", w->target.cp.last_commit_lsn, w->target.cp.stream_offset);
}

static void applyd_step(struct world *w)
{
	if (!w->app_up)
		return;
	/* several workers: a longer run (it fell behind, one_step) */
	int steps = (int)sim_rng_between(&w->rng, 1, 6);
	if (w->o.workers > 1)
		steps *= 4;
	for (int k = steps; k > 0 && w->app_up && !w->failed; k--) {
		enum apply_step what;
		struct apply_outcome rc = apply_engine_step(w->engine, w->now_us, &what);
		w->now_us += 100;
		check_target_model(w);
		if (w->kill_applyd || w->power_now) {
			applyd_down(w, "applyd_killed");
			return;
		}
		if (rc.status == APPLY_RECONNECT || rc.status == APPLY_RETRY) {
			/* as trellara-applyd: disconnect, connect again (after a backoff) */
			model_target_disconnect(&w->target);
			apply_engine_disconnected(w->engine);
			trace(w, rc.status == APPLY_RETRY ? "applyd_retry" : "applyd_reconnect", 0, 0);
			if (rc.status == APPLY_RETRY)
				w->r->retries++;
			if (!applyd_connect(w)) {
				applyd_down(w, "applyd_reconnect_failed");
				w->r->crashes--; /* not a crash: the process restarts its connection */
			}
			return;
		}
		if (rc.status == APPLY_EXIT) {
			if (rc.exit_code == EXIT_NEGATIVE) {
				w->r->quarantines++;
				trace(w, "quarantined", 0, 0);
				applyd_down(w, "applyd_quarantine_exit");
				w->r->crashes--;
				w->app_stopped_by_quarantine = true;
				return;
			}
			if (rc.exit_code == EXIT_CANTCREAT) {
				applyd_down(w, "applyd_storage_failed");
				return;
			}
			violated(w, "applyd_runs", "applyd exited with %d", rc.exit_code);
			return;
		}
		if (rc.status != APPLY_OK) {
			violated(w, "applyd_runs", "applyd step failed (%d)", (int)rc.status);
			return;
		}
		if (what != APPLY_STEP_WORKED)
			return;
	}
}

/* ---- the model snapshot and reseed ---- */

static bool run_move(struct world *w, enum run_state to)
{
	struct run_evidence ev = { w->run >= RUN_SLOT_CREATED || to >= RUN_SLOT_CREATED ? "sim_slot" : NULL,
				   w->consistent_lsn, w->failure_reason, false, false };
	char err[RUN_TRANSITION_ERR_LEN];
	if (run_transition_check(w->run, to, &ev, err, sizeof err) < 0) {
		violated(w, "snapshot_state_machine_monotonic_until_recoverable", "%s", err);
		return false;
	}
	trace(w, run_state_name(to), w->run, to);
	w->run = to;
	return true;
}

/* The source's catalog as the snapshot sees it: a schema version per
 * table (the model's ALTER TABLE changes a table's fingerprint, not its
 * columns), and its fingerprint as table_fingerprint would give it. */
static void fingerprint(const struct world *w, size_t table, uint32_t version, char *out, size_t n)
{
	snprintf(out, n, "%s:%" PRIu32, model_source_table(w->src, table)->name, version);
}

/* A new exported snapshot: at the slot's consistent point for the run's
 * first invocation, at the source's end (a temporary slot) for one that
 * resumes it; the catalog as it is now. */
static void snapshot_export(struct world *w, bool fresh)
{
	w->copy_lsn = fresh ? model_source_wal_end(w->src) : w->consistent_lsn;
	memcpy(w->schema_at_export, w->schema_now, sizeof w->schema_at_export);
	w->export_alive = true;
	w->split_planned = false;
	trace(w, "snapshot_export", w->copy_lsn, fresh);
}

/* trellara-snapshot exits (or dies): its exported snapshot goes with it. */
static void snapshot_exits(struct world *w, const char *why)
{
	w->export_alive = false;
	w->kill_snapshot = false;
	trace(w, why, w->run, 0);
}

/* A fault point of trellara-snapshot's (the same names as its own); true
 * when the armed one killed the snapshot there. */
static bool snapshot_point(struct world *w, const char *name)
{
	fault_point(name);
	if (!w->kill_snapshot && !w->power_now)
		return false;
	snapshot_exits(w, "snapshot_killed_at_point");
	return true;
}

/* ---- split tables (options.split_ranges) ----
 * A range is the rows that lie in its blocks; here, the rows whose
 * values hash to it, so that an update moves a row the way a new tuple
 * version may land in another block.  Reading a range gives its rows at
 * the exported snapshot and a hash of what was read: the columns (the
 * schema version: a column change changes the COPY bytes) and the rows. */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ULL;
	return h;
}

/* h folded with a row's n values (a NULL apart from every text) */
static uint64_t fnv_row(uint64_t h, const char *const *row, uint16_t n)
{
	for (uint16_t c = 0; c < n; c++)
		h = row[c] ? fnv(fnv(h, "v", 1), row[c], strlen(row[c]) + 1) : fnv(h, "n", 1);
	return h;
}

static int row_range(const char *const *row, uint16_t n, int k)
{
	return (int)(fnv_row(1469598103934665603ULL, row, n) % (uint64_t)k);
}

/* Reads range of table at the exported snapshot: its hash into hash[40];
 * with into (the target), its rows inserted there, and the keys it
 * already held counted in *taken. */
static void read_range(struct world *w, size_t table, int range, char *hash, struct sim_db *into, size_t *taken)
{
	const char *name = model_source_table(w->src, table)->name;
	const struct sim_db *at = model_source_state_at(w->src, w->copy_lsn - 1);
	uint16_t n_key;
	const char *const *cols;
	uint16_t n = sim_db_columns(at, name, &n_key, &cols);
	uint32_t version = w->schema_now[table];
	uint64_t h = fnv(1469598103934665603ULL, &version, sizeof version), rows = 0;
	const char *const *row;
	for (size_t i = 0; (row = sim_db_row(at, name, i)) != NULL; i++) {
		if (row_range(row, n, w->o.split_ranges) != range)
			continue;
		rows++;
		h = fnv_row(h, row, n);
		if (into && sim_db_insert(into, name, (struct sim_values){ row, n }) < 0)
			(*taken)++;
	}
	snprintf(hash, 40, "%016" PRIx64 "-%" PRIu64, h, rows);
}

/* The table on two databases: a one-line difference into out, false
 * when they hold the same rows. */
static bool table_differs(const struct sim_db *a, const struct sim_db *b, const char *table, char *out, size_t len)
{
	struct sim_db *x = sim_db_new(), *y = sim_db_new();
	uint16_t n_key;
	const char *const *cols;
	uint16_t n = sim_db_columns(a, table, &n_key, &cols);
	sim_db_create_table(x, table, n, cols, n_key);
	sim_db_create_table(y, table, n, cols, n_key);
	copy_table(x, a, table);
	copy_table(y, b, table);
	bool differs = sim_db_diff(x, y, out, len);
	sim_db_free(x);
	sim_db_free(y);
	return differs;
}

/* A new invocation plans its split tables (copy_plan_splits): a table
 * with ranges copied by an earlier invocation keeps them only when each
 * one reads at this snapshot as it did then - the real decision,
 * run_range_reads_same() - and is otherwise planned anew; every table
 * not kept is emptied before anything is copied (copy_empty_targets). */
static void split_plan(struct world *w)
{
	for (size_t t = 0; t < model_source_tables(w->src); t++) {
		if (w->copied[t])
			continue;
		int earlier = 0;
		bool same = true;
		for (int r = 0; r < w->o.split_ranges; r++) {
			if (!w->range_copied[t][r])
				continue;
			char now[40];
			read_range(w, t, r, now, NULL, NULL);
			earlier++;
			if (!run_range_reads_same(w->range_hash[t][r], now))
				same = false;
		}
		if (earlier > 0 && same) {
			w->r->ranges_kept += (uint64_t)earlier;
			trace(w, "split_ranges_kept", t, (uint64_t)earlier);
			continue;
		}
		if (earlier > 0) {
			w->r->split_recopies++;
			trace(w, "split_copied_whole_again", t, (uint64_t)earlier);
		}
		memset(w->range_copied[t], 0, sizeof w->range_copied[t]);
		sim_db_truncate(w->target.db, model_source_table(w->src, t)->name);
	}
	w->split_planned = true;
}

static int next_range(const struct world *w, size_t table)
{
	for (int r = 0; r < w->o.split_ranges; r++)
		if (!w->range_copied[table][r])
			return r;
	return -1;
}

/* Every range of the split table is in: its progress row at this
 * invocation's snapshot (finish_split_table).  The table must now be the
 * source's at that snapshot, and its ranges' schema one. */
static void split_finish(struct world *w, size_t table)
{
	const char *name = model_source_table(w->src, table)->name;
	char diff[400];
	if (table_differs(model_source_state_at(w->src, w->copy_lsn - 1), w->target.db, name, diff, sizeof diff))
		violated(w, "snapshot_split_resume_keeps_only_unchanged_ranges",
			 "%s, all %d ranges in, is not the source's at its snapshot %" PRIX64 ": %s", name, w->o.split_ranges,
			 w->copy_lsn, diff);
	bool stable = true;
	for (int r = 0; r < w->o.split_ranges; r++)
		stable = stable && w->range_stable[table][r] && w->range_schema[table][r] == w->range_schema[table][0];
	w->copied_stable[table] = stable;
	w->copied[table] = true;
	w->table_watermark[table] = w->copy_lsn;
	w->r->tables_copied++;
	trace(w, "split_table_done", table, w->copy_lsn);
}

enum copy_outcome { COPIED, COPY_LOST_SOURCE, COPY_LOST_TARGET, COPY_SCHEMA_CHANGED, COPY_KILLED };

/* One table's copy at the exported snapshot, or one range of it (range
 * >= 0): one target transaction (a whole table: TRUNCATE, then the rows
 * of the snapshot; a range: its rows, with its progress row), accepted
 * only when the table's fingerprint held still (runstate.h, as copy.c
 * decides). */
static enum copy_outcome copy_one(struct world *w, size_t table, int range)
{
	const char *name = model_source_table(w->src, table)->name;
	if (!w->healing && sim_rng_chance(&w->rng, w->o.p_copy_fails)) {
		/* the source or the target connection died mid-copy: the
		 * target transaction rolls back, nothing of it is visible */
		w->r->copy_failures++;
		return sim_rng_chance(&w->rng, 50) ? COPY_LOST_SOURCE : COPY_LOST_TARGET;
	}
	char before[80], at_snapshot[80], after[80];
	uint32_t v_before = w->schema_now[table];
	fingerprint(w, table, v_before, before, sizeof before);
	fingerprint(w, table, w->schema_at_export[table], at_snapshot, sizeof at_snapshot);
	if (!w->healing && w->o.p_copy_ddl > 0 && sim_rng_chance(&w->rng, w->o.p_copy_ddl)) {
		/* ALTER TABLE on the source while the table is copied */
		w->schema_now[table]++;
		w->r->copy_ddls++;
		trace(w, "ddl_during_copy", table, w->schema_now[table]);
	}
	if (snapshot_point(w, "snapshot.mid_table_copy"))
		return COPY_KILLED; /* the half copy rolls back */
	fingerprint(w, table, w->schema_now[table], after, sizeof after);
	if (!run_snapshot_schema_stable(before, at_snapshot, after))
		return COPY_SCHEMA_CHANGED; /* rolled back: the target keeps what it held */
	/* what the contract check at the handoff compares, kept apart from
	 * the decision above */
	bool stable = w->schema_at_export[table] == v_before && v_before == w->schema_now[table];
	if (range >= 0) {
		size_t taken = 0;
		read_range(w, table, range, w->range_hash[table][range], w->target.db, &taken);
		if (taken)
			violated(w, "snapshot_split_resume_keeps_only_unchanged_ranges",
				 "%s range %d/%d: %zu of its rows have a key the target already holds", name, range + 1,
				 w->o.split_ranges, taken);
		w->range_copied[table][range] = true;
		w->range_schema[table][range] = v_before;
		w->range_stable[table][range] = stable;
		w->r->ranges_copied++;
		trace(w, "range_copied", table, (uint64_t)range);
		if (snapshot_point(w, "snapshot.after_range_commit"))
			return COPY_KILLED; /* committed: the resume reads it again */
		return COPIED;
	}
	struct sim_db *at = sim_db_clone(model_source_state_at(w->src, w->copy_lsn - 1));
	copy_table(w->target.db, at, name);
	sim_db_free(at);
	w->copied_stable[table] = stable;
	w->copied[table] = true;
	w->table_watermark[table] = w->copy_lsn;
	w->r->tables_copied++;
	return COPIED;
}

/* The run failed with a reason: failed_recoverable, durably, before the
 * program exits (the next invocation resumes it). */
static void snapshot_fails(struct world *w, size_t table, const char *what)
{
	snprintf(w->failure_reason, sizeof w->failure_reason, "%s: %s", model_source_table(w->src, table)->name, what);
	w->failure_to_record = true;
	if (run_move(w, RUN_FAILED_RECOVERABLE))
		w->r->recoverable_failures++;
	snapshot_exits(w, "snapshot_failed");
}

static size_t next_uncopied(const struct world *w)
{
	size_t i = 0;
	while (i < model_source_tables(w->src) && w->copied[i])
		i++;
	return i;
}

/* One step of trellara-snapshot, the run state machine as it moves. */
static void snapshot_step(struct world *w)
{
	if (!w->snapshot || handed_off(w) || w->failed)
		return;
	if (!w->export_alive) {
		/* a new invocation resumes the run: the tables still to copy
		 * are copied at a fresh snapshot and get its position as their
		 * watermark; a failed run restarts at snapshot_exported */
		if (w->failure_to_record && w->run != RUN_FAILED_RECOVERABLE)
			violated(w, "snapshot_failure_state_is_durable_before_retry",
				 "the run is retried from %s, but its failure was never recorded", run_state_name(w->run));
		/* split tables: the operator runs it again some time later,
		 * while the source goes on */
		if (w->o.split_ranges && !w->healing && !sim_rng_chance(&w->rng, 25))
			return;
		w->failure_to_record = false;
		snapshot_export(w, true);
		w->r->snapshot_resumes++;
		if (w->run == RUN_FAILED_RECOVERABLE) {
			w->failure_reason[0] = '\0';
			run_move(w, RUN_SNAPSHOT_EXPORTED);
		}
		return;
	}
	switch (w->run) {
	case RUN_PLANNED:
		/* slot and consistent point recorded, then the snapshot */
		if (run_move(w, RUN_SLOT_CREATED) && run_move(w, RUN_SNAPSHOT_EXPORTED))
			snapshot_point(w, "snapshot.after_export_before_copy");
		return;
	case RUN_SLOT_CREATED:
	case RUN_SNAPSHOT_EXPORTED:
		run_move(w, RUN_COPYING_TABLE);
		return;
	case RUN_COPYING_TABLE: {
		size_t table = next_uncopied(w);
		if (table == model_source_tables(w->src)) {
			if (run_move(w, RUN_COPY_COMPLETE))
				snapshot_point(w, "snapshot.after_copy_before_handoff");
			return;
		}
		int range = -1;
		if (w->o.split_ranges) {
			if (!w->split_planned) {
				split_plan(w);
				return;
			}
			range = next_range(w, table);
			if (range < 0) {
				split_finish(w, table);
				return;
			}
		}
		switch (copy_one(w, table, range)) {
		case COPY_LOST_SOURCE:
			snapshot_fails(w, table, "copy failed: the source connection was lost");
			return;
		case COPY_LOST_TARGET:
			/* nothing can be recorded: the run stays where it was */
			snapshot_exits(w, "snapshot_lost_target");
			return;
		case COPY_SCHEMA_CHANGED:
			w->r->schema_changes_caught++;
			snapshot_fails(w, table, "its schema changed during the copy");
			return;
		case COPY_KILLED:
			return;
		case COPIED:
			break;
		}
		if (w->o.copy_twice && range < 0) {
			/* a second attempt at the same table: the same rows */
			struct sim_db *first = sim_db_clone(w->target.db);
			struct sim_db *at = sim_db_clone(model_source_state_at(w->src, w->copy_lsn - 1));
			copy_table(w->target.db, at, model_source_table(w->src, table)->name);
			sim_db_free(at);
			char diff[300];
			if (sim_db_diff(first, w->target.db, diff, sizeof diff))
				violated(w, "snapshot_copy_idempotent_by_run_and_table", "copying %s again changed it: %s",
					 model_source_table(w->src, table)->name, diff);
			sim_db_free(first);
		}
		return;
	}
	case RUN_COPY_COMPLETE: {
		if (w->o.regression_attempt) {
			struct run_evidence ev = { "sim_slot", w->consistent_lsn, NULL, false, false };
			if (run_transition_check(RUN_COPY_COMPLETE, RUN_COPYING_TABLE, &ev, NULL, 0) == 0)
				violated(w, "snapshot_state_machine_monotonic_until_recoverable",
					 "copy_complete -> copying_table was allowed");
			w->r->refused_moves++;
		}
		for (size_t i = 0; i < model_source_tables(w->src); i++) {
			if (!w->copied[i])
				violated(w, "snapshot_handoff_requires_complete_tables", "%s was never copied",
					 model_source_table(w->src, i)->name);
			else if (!w->copied_stable[i])
				violated(w, "snapshot_contract_before_handoff",
					 "%s is handed off, but its schema changed during its accepted copy",
					 model_source_table(w->src, i)->name);
		}
		/* the handoff evidence: every table's watermark, before streaming */
		for (size_t i = 0; i < model_source_tables(w->src); i++)
			model_target_set_watermark(&w->target, model_source_table(w->src, i)->name, w->table_watermark[i]);
		if (run_move(w, RUN_STREAM_HANDOFF_READY)) {
			if (w->recopying)
				w->r->recopies++;
			w->recopying = false;
			snapshot_point(w, "snapshot.after_handoff_before_stream");
		}
		return;
	}
	default:
		return;
	}
}

/* A planned run creates its slot now (before any transaction the stream
 * carries from it): what committed before is the snapshot's to copy.
 * Killed between creating the slot and recording it, the run stays
 * planned and the next invocation creates the slot again, later. */
static void snapshot_create_slot(struct world *w)
{
	fault_point("snapshot.after_slot_before_record");
	if (w->kill_snapshot || w->power_now) {
		w->kill_snapshot = w->power_now = false;
		trace(w, "snapshot_killed_at_point", 0, 0);
		/* the stale slot is dropped; the source went on meanwhile */
		if (model_source_produce(w->src, 2) < 0)
			violated(w, "model_source", "%s", model_source_error(w->src));
	}
	/* a record written from now on starts at wal_end or later; the
	 * slot's confirmed position is the consistent point */
	w->consistent_lsn = model_source_wal_end(w->src);
	model_source_create_slot(w->src);
	w->slot_created_lsn = model_source_confirmed_flush(w->src);
	snapshot_export(w, false);
	trace(w, "snapshot_consistent_point", w->consistent_lsn, 0);
}

static void snapshot_begin(struct world *w)
{
	if (w->o.pre_transactions > 0 && model_source_produce(w->src, (unsigned)w->o.pre_transactions) < 0)
		violated(w, "model_source", "%s", model_source_error(w->src));
	w->run = RUN_PLANNED;
	snapshot_create_slot(w);
}

/* The operator, once capture stopped on its slot, does what its hint
 * says: stop capture and applyd, then "trellara snapshot --config F
 * --force".  The flow's run (created planned if it never had one) is
 * failed with the operator's reason and planned again, its progress
 * forgotten; a new slot at the source's end is its consistent point, and
 * snapshot_step copies every table there and hands off new watermarks
 * before applyd may start again.  What the stream holds below them is
 * filtered by applyd; what committed between the stream's end and the
 * new slot is in the copies. */
static void operator_recopies(struct world *w)
{
	if (w->app_up) {
		applyd_down(w, "operator_stops_applyd");
		w->r->crashes--;
	}
	if (w->snapshot) {
		snprintf(w->failure_reason, sizeof w->failure_reason, "re-copy forced by the operator (--force)");
		if (!run_move(w, RUN_FAILED_RECOVERABLE) || !run_move(w, RUN_PLANNED))
			return;
		w->failure_reason[0] = '\0';
	}
	w->snapshot = w->recopying = true;
	w->run = RUN_PLANNED;
	w->failure_to_record = false;
	memset(w->copied, 0, sizeof w->copied);
	memset(w->copied_stable, 0, sizeof w->copied_stable);
	memset(w->range_copied, 0, sizeof w->range_copied);
	w->slot_stopped = false;
	trace(w, "operator_recopies", w->r->slot_stops_lost_at_promotion + w->r->slot_stops_gone,
	      w->r->slot_stops_invalidated);
	snapshot_create_slot(w);
}

/* trellara reseed of one table: a fence at the source's end, applyd
 * holds there, the table is copied at a later position with its
 * watermark, the fence is released (applyd reloads the watermarks). */
static void reseed_step(struct world *w, int step)
{
	if (w->reseed_phase == 0 && step >= w->o.reseed_at_step && w->o.reseed_at_step >= 0 && w->app_up &&
	    !w->slot_stopped) {
		w->reseed_table = (size_t)sim_rng_below(&w->rng, model_source_tables(w->src));
		model_target_fence_set(&w->target, model_source_wal_end(w->src));
		w->reseed_phase = 1;
		trace(w, "reseed_fence", w->reseed_table, 0);
		return;
	}
	if (w->reseed_phase == 1 && strcmp(w->target.fence_state, "held") == 0) {
		if (model_source_produce(w->src, 2) < 0)
			violated(w, "model_source", "%s", model_source_error(w->src));
		uint64_t at_lsn = model_source_wal_end(w->src);
		const char *table = model_source_table(w->src, w->reseed_table)->name;
		struct sim_db *at = sim_db_clone(model_source_state_at(w->src, at_lsn - 1));
		copy_table(w->target.db, at, table);
		sim_db_free(at);
		model_target_set_watermark(&w->target, table, at_lsn);
		model_target_fence_release(&w->target);
		w->reseed_phase = 2;
		w->r->reseeds++;
		trace(w, "reseed_copied", w->reseed_table, at_lsn);
	}
}

/* ---- faults ---- */

static void power_loss(struct world *w)
{
	stream_fs_sim_view_kill(w->cap_fs);
	stream_fs_sim_view_kill(w->app_fs);
	if (w->cap_up)
		capture_down(w, "power_loss_capture");
	if (w->app_up)
		applyd_down(w, "power_loss_applyd");
	if (w->snapshot && w->export_alive && !handed_off(w))
		snapshot_exits(w, "power_loss_snapshot");
	stream_fs_sim_crash(w->disk, SIM_CRASH_POWER, sim_rng_next(&w->rng));
	stream_fs_sim_view_restart(w->cap_fs);
	stream_fs_sim_view_restart(w->app_fs);
	stream_fs_sim_view_restart(w->ops_fs);
	w->power_now = false;
	w->kill_capture = w->kill_applyd = false;
	w->r->power_losses++;
	trace(w, "power_loss", 0, 0);
}

static void retention(struct world *w)
{
	if (w->broker)
		return; /* the broker model keeps every message (no limits) */
	const char *groups[1] = { GROUP };
	struct retention_plan plan;
	if (stream_retention_plan_fs(w->ops_fs, STREAM_DIR, groups, 1, false, &plan) != STREAM_OK)
		return;
	uint64_t group = 0;
	bool exists = false;
	stream_group_get_fs(w->ops_fs, STREAM_DIR, GROUP, &group, &exists);
	if (plan.n_segments && stream_retention_apply_fs(w->ops_fs, STREAM_DIR, &plan) == STREAM_OK) {
		w->r->retention_runs++;
		uint64_t *bases = NULL;
		size_t nb = 0;
		if (stream_segment_bases_fs(w->ops_fs, STREAM_DIR, &bases, &nb) == STREAM_OK && nb && bases[0] > group)
			violated(w, "retention_respects_protected_groups",
				 "retention removed offsets below %" PRIu64 " while group \"%s\" is at %" PRIu64, bases[0],
				 GROUP, group);
		free(bases);
		trace(w, "retention", plan.n_segments, group);
	}
	stream_retention_plan_free(&plan);
}

/* A target row deleted behind applyd's back: the row that the first
 * update or delete not yet applied changes, so that apply must meet it
 * (no rows matched) and quarantine the transaction, never skip it.
 * Not while a target transaction is open: it may already have changed
 * that row (on PostgreSQL the delete would wait for it and then find
 * nothing), and the model's COMMIT publishes the state it took at BEGIN,
 * the deleted row with it.
 * Returns whether it was done (else: try again at a later step). */
static bool inject_divergence(struct world *w)
{
	struct ops_reader rd;
	bool done = false;
	if (model_target_in_txn(&w->target))
		return false;
	if (ops_open(w, &rd) != STREAM_OK)
		return false;
	if (ops_seek(&rd, w->target.cp.stream_offset) != STREAM_OK) {
		ops_close(&rd);
		return false;
	}
	struct stream_frame f;
	while (!done && ops_next(&rd, &f) == STREAM_OK) {
		if (f.header.type != FRAME_TXN)
			continue;
		struct env_decoder d;
		if (env_decode_begin(&d, f.payload, f.header.payload_length) < 0) {
			env_decoder_free(&d);
			continue;
		}
		if (d.header.commit_lsn <= w->target.cp.last_commit_lsn) {
			env_decoder_free(&d);
			continue;
		}
		const struct env_change *c;
		while (!done && env_decode_next(&d, &c) == 1) {
			if (c->op != ENV_UPDATE && c->op != ENV_DELETE)
				continue;
			const struct env_relation *r = &d.header.relations[c->relation];
			char name[256];
			snprintf(name, sizeof name, "%.*s.%.*s", (int)r->schema_len, r->schema, (int)r->name_len, r->name);
			const struct env_tuple *kt = c->old_kind ? &c->old_tuple : &c->new_tuple;
			uint16_t n_key;
			const char *const *cols;
			uint16_t n = sim_db_columns(w->target.db, name, &n_key, &cols);
			if (!n || kt->n < n_key)
				continue;
			/* the model's tables put their key columns first, as the relation does */
			char *key[8] = { 0 };
			for (uint16_t k = 0; k < n_key && k < 8; k++) {
				const struct env_value *v = &kt->values[k];
				key[k] = xmalloc(v->len + 1);
				memcpy(key[k], v->data, v->len);
				key[k][v->len] = '\0';
			}
			if (sim_db_delete(w->target.db, name, (struct sim_values){ (const char *const *)key, n_key }) == 1) {
				done = true;
				w->divergence_injected = true;
				trace(w, "divergence", d.header.commit_lsn, 0);
			}
			for (uint16_t k = 0; k < 8; k++)
				free(key[k]);
		}
		env_decoder_free(&d);
	}
	ops_close(&rd);
	return done;
}

/* The operator: repair the target from the source, mark the quarantined
 * transaction replay-ready (trellara quarantine replay-ready). */
static void operator_repairs(struct world *w)
{
	for (int i = 0; i < w->target.n_quarantine; i++) {
		struct quarantine_entry *q = &w->target.quarantine[i];
		if (strcmp(q->state, "quarantined") != 0)
			continue;
		const char *expected = w->o.target_missing_table ? "missing_table" : "no_rows_matched";
		if (strcmp(q->reason, expected) != 0) {
			violated(w, "no_silent_target_divergence", "transaction %u quarantined as %s: %s", q->xid, q->reason,
				 q->detail);
			return;
		}
		/* copy the source's rows at the checkpoint back (the repair) */
		sim_db_free(w->target.db);
		w->target.db = sim_db_clone(model_source_state_at(w->src, w->target.cp.last_commit_lsn));
		w->divergence_repaired = true;
		if (model_target_replay_ready(&w->target, q->xid, q->commit_lsn) != 0)
			violated(w, "replay_ready_requires_exact_quarantine_boundary", "replay-ready refused");
		/* a wrong boundary is refused */
		if (model_target_replay_ready(&w->target, q->xid + 1, q->commit_lsn) == 0)
			violated(w, "replay_ready_requires_exact_quarantine_boundary",
				 "replay-ready accepted transaction %u, which is not quarantined", q->xid + 1);
		trace(w, "operator_repair", q->xid, q->commit_lsn);
		w->app_stopped_by_quarantine = false;
		return;
	}
}

static void arm_random_point(struct world *w)
{
	const char *const *cp = w->broker ? broker_capture_points : capture_points;
	size_t nc = w->broker ? sizeof broker_capture_points / sizeof *broker_capture_points
			      : sizeof capture_points / sizeof *capture_points;
	size_t na = sizeof applyd_points / sizeof *applyd_points;
	/* trellara-snapshot's points while it runs (after_slot_before_record
	 * only by name: the slot exists before the scheduler starts) */
	size_t ns = w->snapshot && !handed_off(w) ? sizeof snapshot_points / sizeof *snapshot_points : 0;
	size_t k = (size_t)sim_rng_below(&w->rng, nc + na + ns);
	w->armed_point = k < nc ? cp[k] : k < nc + na ? applyd_points[k - nc] : snapshot_points[k - nc - na];
	w->armed_nth = (unsigned)sim_rng_between(&w->rng, 1, 3);
	w->armed_hits = 0;
	w->armed_power = sim_rng_chance(&w->rng, 30);
	trace(w, "arm", k, w->armed_nth);
}

/* The slot is lost only while the flow streams: not during a copy of
 * it, a reseed or a fence (the operator's copy stops applyd), and not
 * again before capture has noticed. */
static bool slot_may_be_lost(struct world *w)
{
	struct model_source_slot slot;
	model_source_slot(w->src, &slot);
	return slot.exists && !slot.invalidation_reason[0] && !w->slot_stopped && !(w->snapshot && !handed_off(w)) &&
	       w->reseed_phase != 1 && !w->target.fence_present;
}

/* A promotion to a standby without the slot, an invalidation (the WAL
 * it needed removed, or idle too long while no session used it), a
 * drop: the session ends, and capture finds out when it connects
 * again. */
static void lose_slot(struct world *w)
{
	struct sim_rng *g = &w->rng;
	if (sim_rng_chance(g, w->o.p_promote_no_slot)) {
		model_source_promote_without_slot(w->src);
		w->r->promotions++;
		trace(w, "promote_without_slot", 0, 0);
	} else if (sim_rng_chance(g, w->o.p_slot_wal_removed)) {
		model_source_lose_slot(w->src, MODEL_SLOT_WAL_REMOVED);
		trace(w, "slot_wal_removed", 0, 0);
	} else if (!model_source_connected(w->src) && sim_rng_chance(g, w->o.p_slot_idle_timeout)) {
		model_source_lose_slot(w->src, MODEL_SLOT_IDLE_TIMEOUT);
		trace(w, "slot_idle_timeout", 0, 0);
	} else if (sim_rng_chance(g, w->o.p_slot_dropped)) {
		model_source_lose_slot(w->src, MODEL_SLOT_DROPPED);
		trace(w, "slot_dropped", 0, 0);
	}
}

/* ---- the broker's faults and invariants ---- */

/* The highest source position a frame in the stream's first n messages
 * records (node's copy of them). */
static uint64_t broker_position(struct world *w, int node, uint64_t n)
{
	uint64_t at = 0;
	for (uint64_t seq = 1; seq <= n; seq++) {
		size_t len;
		struct model_broker_note note;
		if (model_broker_log_entry(w->broker, node, seq, &len, &note) && note.position > at)
			at = note.position;
	}
	return at;
}

/* Whether fewer nodes than a quorum are up, or some are down with the
 * quorum kept; at the loss, what the source may be told until it ends:
 * what it was told, or what a quorum held then. */
static void broker_watch(struct world *w)
{
	int up = model_broker_nodes_up(w->broker), quorum = model_broker_quorum(w->broker);
	bool lost = up < quorum;
	if (lost && !w->quorum_lost) {
		int node;
		uint64_t held = model_broker_quorum_prefix(w->broker, &node);
		uint64_t confirmed = model_source_confirmed_flush(w->src);
		uint64_t position = node >= 0 ? broker_position(w, node, held) : 0;
		w->ack_bound = confirmed > position ? confirmed : position;
		w->r->broker_quorum_losses++;
		trace(w, "broker_quorum_lost", up, w->ack_bound);
	}
	w->quorum_lost = lost;
	bool node_lost = !lost && up < model_broker_nodes(w->broker);
	if (node_lost && !w->node_lost) {
		w->r->broker_node_losses++;
		w->committed_mark = model_broker_committed(w->broker);
	}
	w->node_lost = node_lost;
}

/* Nodes down for a while (1 or 2 of 3: the flow goes on, or the quorum
 * is lost), and publishes that fail for a while. */
static void broker_faults(struct world *w, int step)
{
	struct sim_rng *g = &w->rng;
	if (step == w->o.leftovers_at_step && !w->outage_until) {
		int leader = model_broker_leader(w->broker);
		for (int i = 0; i < model_broker_nodes(w->broker); i++)
			if (i != leader)
				model_broker_node_down(w->broker, i);
		w->outage_until = step + 16;
		w->leftover_kill_at = step + 2;
		trace(w, "broker_outage", (uint64_t)(model_broker_nodes(w->broker) - 1), (uint64_t)(leader + 1));
	}
	/* killed once the leader holds frames it could not commit (or when
	 * the outage is nearly over: there were none to publish) */
	int leader = model_broker_leader(w->broker);
	if (w->leftover_kill_at && step >= w->leftover_kill_at &&
	    ((leader >= 0 && model_broker_log_length(w->broker, leader) > model_broker_committed(w->broker)) ||
	     step + 4 >= w->outage_until)) {
		w->leftover_kill_at = 0;
		if (w->cap_up) {
			stream_fs_sim_view_kill(w->cap_fs);
			capture_down(w, "kill_capture");
			w->cap_down_steps = 1; /* back before the leader steps down */
			w->r->broker_leftover_kills++;
			w->leftover_restarting = true;
		}
	} else if (w->leftover_restarting && w->cap_up) {
		/* the new run read the stream's end through the leader; the
		 * leader now steps down, so that the new run's first publishes
		 * wait for the followers' return, when the killed run's frames
		 * are committed before them */
		w->leftover_restarting = false;
		model_broker_quorumless_leader_steps_down(w->broker);
	}
	if (step == w->o.broker_host_crash_at_step && !w->outage_until) {
		int crashed = model_broker_leader(w->broker);
		model_broker_node_crash(w->broker, crashed >= 0 ? crashed : 0);
		w->outage_until = step + 12;
		w->r->broker_host_crashes++;
		trace(w, "broker_host_crash", (uint64_t)(crashed + 1), model_broker_stats(w->broker)->crash_dropped);
	}
	if (w->o.broker_host_crash_at_step >= 0) {
		/* the crash alone: no other broker fault in this run */
		broker_watch(w);
		return;
	}
	if (!w->outage_until && sim_rng_chance(g, w->o.p_broker_outage)) {
		int n = w->o.broker_outage_nodes ? w->o.broker_outage_nodes : (int)sim_rng_between(g, 1, 2);
		if (n > model_broker_nodes(w->broker))
			n = model_broker_nodes(w->broker);
		for (int k = 0; k < n; k++) {
			int node = (int)sim_rng_below(g, (uint64_t)model_broker_nodes(w->broker));
			while (!model_broker_node_is_up(w->broker, node))
				node = (node + 1) % model_broker_nodes(w->broker);
			model_broker_node_down(w->broker, node);
		}
		w->outage_until = step + (int)sim_rng_between(g, 5, 40);
		trace(w, "broker_outage", (uint64_t)n, (uint64_t)(model_broker_leader(w->broker) + 1));
	}
	if (!w->publish_fail_until && sim_rng_chance(g, w->o.p_publish_fail)) {
		bool lose_ack = sim_rng_chance(g, 50);
		model_broker_fail_publishes(w->broker, lose_ack ? MODEL_BROKER_FAIL_LOSE_ACK : MODEL_BROKER_FAIL_REFUSE);
		w->publish_fail_until = step + (int)sim_rng_between(g, 2, 15);
		w->r->broker_publish_failures++;
		trace(w, lose_ack ? "broker_loses_pubacks" : "broker_refuses", 0, 0);
	}
	broker_watch(w);
}

/* Before each step: what is over comes back (everything, once healing),
 * then the servers' time passes. */
static void broker_before_step(struct world *w, int step)
{
	if (w->outage_until && (w->healing || step >= w->outage_until)) {
		for (int i = 0; i < model_broker_nodes(w->broker); i++)
			model_broker_node_up(w->broker, i);
		w->outage_until = 0;
		trace(w, "broker_nodes_back", 0, 0);
	}
	if (w->publish_fail_until && (w->healing || step >= w->publish_fail_until)) {
		model_broker_fail_publishes(w->broker, MODEL_BROKER_FAIL_NONE);
		w->publish_fail_until = 0;
		trace(w, "broker_publishes_again", 0, 0);
	}
	model_broker_tick(w->broker);
	broker_watch(w);
}

/* source_checkpoint_after_broker_ack: every non-empty transaction the
 * slot will not send again (it commits below the confirmed position)
 * is in the prefix of the stream a majority of the nodes holds, unless
 * the latest copy of the flow covers it. */
static void check_broker_ack(struct world *w, uint64_t confirmed)
{
	int node;
	uint64_t held = model_broker_quorum_prefix(w->broker, &node);
	uint64_t seq = 1;
	for (size_t i = 0; i < model_source_txns(w->src); i++) {
		const struct model_source_txn *t = model_source_txn(w->src, i);
		if (t->commit_lsn >= confirmed)
			return;
		if (t->changes == 0 || t->commit_lsn < w->consistent_lsn)
			continue;
		struct model_broker_note note = { 0 };
		size_t len;
		for (; seq <= held; seq++) {
			model_broker_log_entry(w->broker, node, seq, &len, &note);
			if (note.commit_lsn >= t->commit_lsn)
				break;
		}
		if (seq > held || note.commit_lsn != t->commit_lsn) {
			violated(w, "source_checkpoint_after_broker_ack",
				 "the slot confirmed %" PRIX64 ", past transaction %u (commit %" PRIX64
				 "), which no quorum of the broker's nodes holds (%d of %d up; a quorum holds %" PRIu64
				 " messages, the leader's commit is %" PRIu64 ")",
				 confirmed, t->xid, t->commit_lsn, model_broker_nodes_up(w->broker),
				 model_broker_nodes(w->broker), held, model_broker_committed(w->broker));
			return;
		}
	}
}

/* After each step. */
static void broker_after_step(struct world *w)
{
	if (model_broker_error(w->broker)[0])
		violated(w, "model_broker", "%s", model_broker_error(w->broker));
	uint64_t confirmed = model_source_confirmed_flush(w->src);
	if (w->quorum_lost && confirmed > w->ack_bound && confirmed > w->slot_created_lsn)
		violated(w, "source_ack_waits_for_broker_quorum",
			 "the slot confirmed %" PRIX64 " while only %d of %d nodes were up; when the quorum was lost, a "
			 "quorum held the stream through %" PRIX64,
			 confirmed, model_broker_nodes_up(w->broker), model_broker_nodes(w->broker), w->ack_bound);
	if (confirmed != w->checked_confirmed) {
		check_broker_ack(w, confirmed);
		w->checked_confirmed = confirmed;
	}
	if (w->node_lost) {
		uint64_t committed = model_broker_committed(w->broker);
		w->r->broker_stored_during_node_loss += committed - w->committed_mark;
		w->committed_mark = committed;
	}
}

/* The simulator's note on each message the broker stores: the commit LSN
 * of a transaction's frame (txn or commit marker), and the position the
 * frame records (its end, a watermark's LSN). */
static void annotate_frame(void *ctx, const uint8_t *data, size_t len, struct model_broker_note *note)
{
	(void)ctx;
	*note = (struct model_broker_note){ 0 };
	struct frame_header h;
	const char *reason;
	if (len < FRAME_HEADER_SIZE || !frame_decode_header(data, &h, &reason) ||
	    FRAME_HEADER_SIZE + (size_t)h.payload_length != len)
		return;
	struct env_frame_summary s;
	char err[256];
	if (env_frame_summary(h.type, data + FRAME_HEADER_SIZE, h.payload_length, &s, err, sizeof err) < 0)
		return;
	if (h.type == FRAME_TXN || h.type == FRAME_COMMIT_MARKER) {
		note->commit_lsn = s.commit_lsn;
		note->position = s.end_lsn;
	} else if (h.type == FRAME_WATERMARK) {
		note->position = s.lsn;
	}
}

static void random_faults(struct world *w, int step)
{
	struct sim_rng *g = &w->rng;
	if (w->cap_up && sim_rng_chance(g, w->o.p_kill_capture)) {
		stream_fs_sim_view_kill(w->cap_fs);
		capture_down(w, "kill_capture");
	}
	if (w->app_up && sim_rng_chance(g, w->o.p_kill_applyd)) {
		stream_fs_sim_view_kill(w->app_fs);
		applyd_down(w, "kill_applyd");
	}
	if (sim_rng_chance(g, w->o.p_power_loss))
		power_loss(w);
	if (w->cap_up && sim_rng_chance(g, w->o.p_source_disconnect)) {
		model_source_disconnect(w->src);
		trace(w, "source_disconnect", 0, 0);
	}
	if (w->cap_up && sim_rng_chance(g, w->o.p_promote)) {
		model_source_promote(w->src, (unsigned)sim_rng_between(g, 0, 4));
		w->r->promotions++;
		trace(w, "promote", 0, 0);
	}
	if (slot_may_be_lost(w))
		lose_slot(w);
	if (sim_rng_chance(g, w->o.p_target_lost_before))
		w->target.next_commit_fault = MODEL_COMMIT_LOST_BEFORE;
	else if (sim_rng_chance(g, w->o.p_target_lost_after))
		w->target.next_commit_fault = MODEL_COMMIT_LOST_AFTER;
	else if (sim_rng_chance(g, w->o.p_target_transient))
		w->target.next_commit_fault = MODEL_COMMIT_TRANSIENT;
	if (w->o.p_target_fail_change && !w->target.fail_change_at && sim_rng_chance(g, w->o.p_target_fail_change)) {
		/* a change a few from now fails: a transient error or a lost connection */
		w->target.fail_change_at = sim_rng_between(g, 1, 12);
		w->target.fail_change_connection = sim_rng_chance(g, 30);
		snprintf(w->target.fail_change_sqlstate, sizeof w->target.fail_change_sqlstate, "%s",
			 w->target.fail_change_connection ? "08006" : sim_rng_chance(g, 50) ? "40001" : "40P01");
	}
	if (w->cap_up && sim_rng_chance(g, w->o.p_fsync_eio)) {
		stream_fs_sim_inject(w->cap_fs, SIM_OP_FDATASYNC, sim_rng_between(g, 1, 3), 5 /* EIO */);
		trace(w, "inject_eio", 0, 0);
	}
	if (sim_rng_chance(g, w->o.p_retention))
		retention(w);
	if (!w->armed_point && sim_rng_chance(g, w->o.p_fault_point))
		arm_random_point(w);
	if (w->broker)
		broker_faults(w, step);
}

/* ---- the run ---- */

static void restarts(struct world *w)
{
	if (!w->cap_up && !w->slot_stopped && --w->cap_down_steps <= 0)
		capture_start(w);
	if (!w->app_up && !w->app_stopped_by_quarantine && --w->app_down_steps <= 0)
		applyd_start(w);
}

/* Everything the source committed is acknowledged, and applied or
 * passed (an empty or DDL-only transaction leaves no row change: the
 * checkpoint's applied-through position passes it). */
static bool drained(struct world *w)
{
	size_t n = model_source_txns(w->src);
	uint64_t end = n ? model_source_txn(w->src, n - 1)->end_lsn : 0;
	/* what committed before the snapshot's consistent point came with the copy */
	uint64_t through = w->target.cp.applied_through_lsn > w->consistent_lsn ? w->target.cp.applied_through_lsn
									       : w->consistent_lsn;
	return w->app_up && !model_target_in_txn(&w->target) && through >= end && model_source_confirmed_flush(w->src) >= end;
}

static void one_step_inner(struct world *w, int step)
{
	w->r->steps++;
	w->now_us += 1000;
	if (!w->healing) {
		if (step >= w->o.divergence_at_step && w->o.divergence_at_step >= 0 && !w->divergence_injected)
			inject_divergence(w);
		if (step == w->o.fence_at_step) {
			model_target_fence_set(&w->target, model_source_wal_end(w->src));
			w->fence_release_at = step + 20;
			trace(w, "fence_set", 0, 0);
		}
		reseed_step(w, step);
		if (w->fence_release_at && step >= w->fence_release_at && w->target.fence_present && w->reseed_phase != 1 &&
		    strcmp(w->target.fence_state, "held") == 0) {
			if (w->o.fence_moves && !w->fence_moved) {
				/* verify's second step: held at the source's position
				 * P, it makes its slot (consistent point L: the source's
				 * end now) and, some steps later, moves the fence to
				 * L, state requested again */
				if (!w->slot_lsn) {
					w->slot_lsn = model_source_wal_end(w->src);
					w->move_at = step + 30; /* the slot takes a while under load */
				} else if (step >= w->move_at) {
					model_target_fence_set(&w->target, w->slot_lsn);
					w->fence_moved = true;
					w->fence_release_at = step + 60; /* time for the source to commit past it */
					trace(w, "fence_moved", 0, 0);
				}
			} else {
				model_target_fence_release(&w->target);
				trace(w, "fence_released", 0, 0);
			}
		}
		/* a fence moved from a held position: the applier, which
		 * stood still at the first one, never commits at or past the
		 * second (what verify's exact comparison rests on) */
		if (w->fence_moved && w->target.fence_present && w->target.cp.last_commit_lsn >= w->target.fence_lsn)
			violated(w, "verify_fence_holds_before_consistent_point",
				 "applyd committed %" PRIx64 " at or past the moved fence %" PRIx64, w->target.cp.last_commit_lsn,
				 w->target.fence_lsn);
		random_faults(w, step);
	} else {
		reseed_step(w, step);
		if (w->target.fence_present && w->reseed_phase != 1)
			model_target_fence_release(&w->target);
	}
	if (w->app_stopped_by_quarantine && !w->divergence_injected)
		violated(w, "no_silent_target_divergence", "applyd quarantined a transaction though the target was never changed behind its back: %s: %s",
			 w->target.n_quarantine ? w->target.quarantine[w->target.n_quarantine - 1].reason : "?",
			 w->target.n_quarantine ? w->target.quarantine[w->target.n_quarantine - 1].detail : "?");
	if (w->app_stopped_by_quarantine)
		operator_repairs(w);
	if (w->slot_stopped)
		operator_recopies(w);
	restarts(w);
	if (w->snapshot && !handed_off(w) && sim_rng_chance(&w->rng, 50)) {
		if (!w->healing && w->o.p_copy_ddl > 0 && sim_rng_chance(&w->rng, w->o.p_copy_ddl / 3 + 1)) {
			/* ALTER TABLE on the source between the export and a copy */
			size_t t = (size_t)sim_rng_below(&w->rng, model_source_tables(w->src));
			if (!w->copied[t]) {
				w->schema_now[t]++;
				w->r->copy_ddls++;
				trace(w, "ddl_before_copy", t, w->schema_now[t]);
			}
		}
		snapshot_step(w);
		if (w->power_now)
			power_loss(w);
		return;
	}
	switch (sim_rng_below(&w->rng, 4)) {
	case 0:
		if ((int)model_source_txns(w->src) < w->o.transactions && model_source_produce(w->src, 1) < 0)
			violated(w, "model_source", "%s", model_source_error(w->src));
		break;
	case 1:
		capture_step(w);
		break;
	default:
		/* several workers: applyd falls behind now and then, so that
		 * whole batches wait in the stream and run side by side */
		if (w->o.workers > 1 && !w->healing && sim_rng_chance(&w->rng, 85))
			break;
		applyd_step(w);
		break;
	}
	if (w->power_now)
		power_loss(w);
	if (w->kill_capture) {
		capture_down(w, "capture_killed_at_point");
		w->kill_capture = false;
	}
	if (w->kill_applyd) {
		applyd_down(w, "applyd_killed_at_point");
		w->kill_applyd = false;
	}
}

static void one_step(struct world *w, int step)
{
	if (w->broker)
		broker_before_step(w, step);
	one_step_inner(w, step);
	if (w->broker && !w->failed)
		broker_after_step(w);
}

static void setup_config(struct world *w)
{
	struct flow_config *c = &w->cfg;
	memset(c, 0, sizeof *c);
	c->path = "sim.yml";
	c->source_id = "sim";
	c->publication = "sim_pub";
	c->slot = "sim_slot";
	c->dataset_id = "sim";
	c->stream_path = STREAM_DIR;
	c->checkpoint_schema = "trellara";
	c->consumer_group = GROUP;
	c->apply_batch_transactions = (uint64_t)w->o.batch_transactions;
	c->apply_compaction = !w->o.no_compaction;
	c->apply_copy_inserts = w->o.copy_inserts;
	c->apply_workers = (uint64_t)(w->o.workers > 1 ? w->o.workers : 1);
}

bool sim_world_run(const struct sim_world_options *o, struct sim_world_result *r)
{
	struct world w = { .o = *o, .r = r };
	memset(r, 0, sizeof *r);
	r->ok = true;
	sim_rng_seed(&w.rng, o->seed ^ 0x5DEECE66DULL);
	setup_config(&w);
	struct model_source_options so;
	model_source_options_default(&so);
	so.n_tables = o->tables;
	so.stream_pct = o->big_pct;
	w.src = model_source_new(&so, o->seed);
	w.disk = stream_fs_sim_new(o->seed, 1ULL << 30);
	w.cap_fs = stream_fs_sim_view(w.disk);
	w.app_fs = stream_fs_sim_view(w.disk);
	w.ops_fs = stream_fs_sim_view(w.disk);
	if (o->broker) {
		/* the stream exists (trellara stream init), with a leader */
		struct model_broker_options bo;
		model_broker_options_default(&bo);
		if (o->broker_dedup_window_us > 0)
			bo.duplicate_window_us = o->broker_dedup_window_us;
		if (o->broker_replicas > 0)
			bo.nodes = o->broker_replicas;
		w.broker = model_broker_new(&bo);
		model_broker_set_annotator(w.broker, annotate_frame, NULL);
	}
	struct sim_db *tdb = sim_db_new();
	if (o->target_missing_table) {
		/* the target as created without one of the flow's tables */
		struct sim_db *all = sim_db_new();
		model_source_create_tables(w.src, all);
		for (size_t i = 0; i < model_source_tables(w.src); i++) {
			const struct model_source_table *t = model_source_table(w.src, i);
			if ((int)i + 1 == o->target_missing_table)
				continue;
			sim_db_create_table(tdb, t->name, t->n_cols, t->cols, t->n_key);
		}
		sim_db_free(all);
		w.divergence_injected = true;
	} else {
		model_source_create_tables(w.src, tdb);
	}
	sim_flow_tables(w.src, &w.defs);
	model_target_init(&w.target, tdb, &w.defs);
	if (o->workers > 1)
		model_target_sessions(&w.target, o->workers, o->seed ^ 0xC0FFEE5EEDULL);
	w.target.on_commit = on_target_commit;
	w.target.on_commit_ctx = &w;
	if (o->kill_point) {
		w.armed_point = o->kill_point;
		w.armed_nth = o->kill_nth ? o->kill_nth : 1;
		w.armed_power = o->kill_point_power;
	}
	struct fault_hook hook = { hook_point, hook_armed, &w };
	fault_set_hook(&hook);
	log_set_quiet(!o->trace);

	w.snapshot = o->snapshot;
	if (o->split_ranges == 1 || o->split_ranges < 0 || o->split_ranges > SIM_MAX_RANGES)
		violated(&w, "options", "split_ranges %d: 0 (tables copied whole) or 2 to %d", o->split_ranges,
			 SIM_MAX_RANGES);
	if (o->snapshot)
		snapshot_begin(&w);
	capture_start(&w);
	for (int step = 0; step < o->steps && !w.failed; step++)
		one_step(&w, step);
	/* heal: no more faults; everything restarts; drain */
	w.healing = true;
	w.armed_point = NULL;
	for (int step = 0; !w.failed && step < HEAL_STEPS; step++) {
		if ((int)model_source_txns(w.src) >= o->transactions && drained(&w))
			break;
		one_step(&w, o->steps + step);
	}
	check_target_model(&w);
	if (w.broker && !w.failed)
		check_broker_ack(&w, model_source_confirmed_flush(w.src));
	if (!w.failed && !drained(&w))
		violated(&w, "drained", "after healing, %zu transactions at the source ending at %" PRIX64
			 ", confirmed %" PRIX64 ", the target applied through %" PRIX64 " (last commit %" PRIX64
			 "; capture %s, applyd %s%s)", model_source_txns(w.src),
			 model_source_txns(w.src) ? model_source_txn(w.src, model_source_txns(w.src) - 1)->end_lsn : 0,
			 model_source_confirmed_flush(w.src), w.target.cp.applied_through_lsn, w.target.cp.last_commit_lsn,
			 w.cap_up ? "up" : "down", w.app_up ? "up" : "down",
			 w.app_stopped_by_quarantine ? ", stopped by a quarantine" : "");
	if (!w.failed) {
		const struct sim_db *want = model_source_state(w.src);
		char diff[400];
		if (sim_db_diff(want, w.target.db, diff, sizeof diff))
			violated(&w, "target_equals_source_at_applied_lsn", "after draining: %s", diff);
		bool from_start;
		uint64_t in_stream = stream_transactions(&w, w.target.cp.last_commit_lsn, &from_start);
		if (!w.failed && from_start && in_stream != w.target.cp.applied_transactions)
			violated(&w, "transaction_dedup_before_reapply",
				 "the stream holds %" PRIu64 " transactions through the checkpoint, the target counts %" PRIu64
				 " applied", in_stream, w.target.cp.applied_transactions);
		if (!w.failed && w.divergence_injected != (w.target.n_quarantine > 0) &&
		    (o->divergence_at_step >= 0 || o->target_missing_table))
			violated(&w, "no_silent_target_divergence", "a target row was removed but nothing was quarantined");
		if (!w.failed && o->divergence_at_step < 0 && !o->target_missing_table && w.target.n_quarantine)
			violated(&w, "no_silent_target_divergence", "quarantined without a divergence: %s: %s",
				 w.target.quarantine[0].reason, w.target.quarantine[0].detail);
	}
	r->transactions = model_source_txns(w.src);
	r->applied = w.target.cp.applied_transactions;
	r->duplicates_skipped = w.target.cp.skipped_duplicates;
	r->ambiguous_commits = w.target.ambiguous_commits;
	r->lock_waits = w.target.lock_waits;
	r->commits_behind = w.target.commits_behind;
	if (w.cc)
		r->capture_skipped += capture_core_stats(w.cc).skipped_duplicates;
	if (w.broker) {
		const struct model_broker_stats *bs = model_broker_stats(w.broker);
		r->broker_stored = bs->stored;
		r->broker_msgid_duplicates = bs->duplicates;
		r->broker_elections = bs->elections;
		r->broker_wrong_last = bs->wrong_last;
		r->broker_crash_dropped = bs->crash_dropped;
		r->broker_acknowledged_lost = bs->acknowledged_lost;
	}
	if (w.engine) {
		r->overlapped += apply_engine_stats(w.engine)->overlapped;
		r->serial_fallbacks += apply_engine_stats(w.engine)->serial_fallbacks;
		r->copy_statements += apply_engine_stats(w.engine)->copies;
	}

	fault_set_hook(NULL);
	if (w.cap_up)
		capture_core_close(w.cc);
	if (w.app_up) {
		apply_engine_free(w.engine);
		frame_source_close(&w.app_src);
	}
	model_target_free(&w.target);
	apply_tables_free(&w.defs);
	model_source_free(w.src);
	model_broker_free(w.broker);
	stream_fs_sim_free(w.ops_fs);
	stream_fs_sim_free(w.app_fs);
	stream_fs_sim_free(w.cap_fs);
	stream_fs_sim_free(w.disk);
	log_set_quiet(false);
	return r->ok;
}

void sim_world_defaults(struct sim_world_options *o, uint64_t seed)
{
	memset(o, 0, sizeof *o);
	o->seed = seed;
	o->transactions = 40;
	o->steps = 300;
	o->tables = 3;
	o->big_pct = 10;
	o->batch_transactions = 4;
	o->capture_batch = 8;
	o->capture_batch_messages = 64;
	o->chunk_changes = 0;
	o->divergence_at_step = -1;
	o->fence_at_step = -1;
	o->reseed_at_step = -1;
	o->leftovers_at_step = -1;
	o->broker_host_crash_at_step = -1;
	o->workers = 1;
}

void sim_world_random(struct sim_world_options *o, uint64_t seed)
{
	sim_world_defaults(o, seed);
	struct sim_rng g;
	sim_rng_seed(&g, seed * 0x9E3779B97F4A7C15ULL + 7);
	o->transactions = (int)sim_rng_between(&g, 10, 60);
	o->steps = (int)sim_rng_between(&g, 100, 400);
	o->tables = (int)sim_rng_between(&g, 1, 4);
	o->big_pct = (int)sim_rng_between(&g, 0, 25);
	o->batch_transactions = (int)sim_rng_between(&g, 1, 8);
	o->capture_batch = (int)sim_rng_between(&g, 1, 16);
	o->capture_batch_messages = sim_rng_chance(&g, 30) ? (int)sim_rng_between(&g, 2, 8) : 64;
	o->chunk_changes = sim_rng_chance(&g, 40) ? (int)sim_rng_between(&g, 1, 8) : 0;
	o->p_kill_capture = (int)sim_rng_between(&g, 0, 3);
	o->p_kill_applyd = (int)sim_rng_between(&g, 0, 3);
	o->p_power_loss = (int)sim_rng_between(&g, 0, 2);
	o->p_source_disconnect = (int)sim_rng_between(&g, 0, 3);
	o->p_status_lost = (int)sim_rng_between(&g, 0, 20);
	o->p_target_lost_before = (int)sim_rng_between(&g, 0, 2);
	o->p_target_lost_after = (int)sim_rng_between(&g, 0, 2);
	o->p_target_transient = (int)sim_rng_between(&g, 0, 2);
	o->p_fsync_eio = (int)sim_rng_between(&g, 0, 1);
	o->p_retention = (int)sim_rng_between(&g, 0, 5);
	o->p_promote = (int)sim_rng_between(&g, 0, 1);
	o->p_fault_point = (int)sim_rng_between(&g, 0, 5);
	o->fence_at_step = sim_rng_chance(&g, 20) ? (int)sim_rng_below(&g, (uint64_t)o->steps) : -1;
	o->reseed_at_step =
		o->fence_at_step < 0 && sim_rng_chance(&g, 15) ? (int)sim_rng_below(&g, (uint64_t)o->steps) : -1;
	if (sim_rng_chance(&g, 30)) {
		o->snapshot = true;
		o->pre_transactions = (int)sim_rng_between(&g, 1, 30);
		o->p_copy_fails = (int)sim_rng_between(&g, 0, 30);
		o->copy_twice = sim_rng_chance(&g, 20);
		o->p_copy_ddl = sim_rng_chance(&g, 30) ? (int)sim_rng_between(&g, 1, 30) : 0;
	}
	/* drawn last: the draws above stay what they were before it */
	o->no_compaction = sim_rng_chance(&g, 25);
	/* ... and after that one, for the same reason */
	o->workers = sim_rng_chance(&g, 33) ? 1 : (int)sim_rng_between(&g, 2, 4);
	if (o->workers > 1)
		o->p_target_fail_change = (int)sim_rng_between(&g, 0, 3);
	/* last again: runs of inserts as COPY (apply.copy_inserts) */
	o->copy_inserts = sim_rng_chance(&g, 50);
	/* ... and the slot lost now and then (each loss copies the flow again) */
	if (sim_rng_chance(&g, 10))
		o->p_promote_no_slot = 1;
	else if (sim_rng_chance(&g, 5))
		o->p_slot_wal_removed = 1;
	else if (sim_rng_chance(&g, 5))
		o->p_slot_idle_timeout = 2;
	else if (sim_rng_chance(&g, 5))
		o->p_slot_dropped = 1;
	/* last: one schedule in four streams through the replicated broker,
	 * its nodes lost and back, its publishes failing now and then, its
	 * duplicate window sometimes short enough to pass */
	if (sim_rng_chance(&g, 25)) {
		o->broker = true;
		o->p_broker_outage = (int)sim_rng_between(&g, 0, 3);
		o->p_publish_fail = (int)sim_rng_between(&g, 0, 3);
		if (sim_rng_chance(&g, 20))
			o->broker_dedup_window_us = (int64_t)sim_rng_between(&g, 2, 40) * 1000;
	}
	/* drawn last: the draws above stay what they were */
	o->written_once_changes = sim_rng_chance(&g, 50) ? (int)sim_rng_between(&g, 1, 6) : 0;
	/* ... and after it: verify's fence in two steps, held first, then
	 * moved forward (trellara-verify(1) EXACT COMPARISON) */
	o->fence_moves = o->fence_at_step >= 0 && sim_rng_chance(&g, 50);
	/* ... and last: a snapshot's tables now and then split into ranges */
	if (o->snapshot && sim_rng_chance(&g, 40))
		o->split_ranges = (int)sim_rng_between(&g, 2, SIM_MAX_RANGES);
	/* ... and after it: one broker schedule in three has the leader store
	 * a killed capture's frames without a quorum and commit them after
	 * the next run read the stream's end (leftovers_at_step) */
	if (o->broker && sim_rng_chance(&g, 33))
		o->leftovers_at_step = (int)sim_rng_between(&g, 20, o->steps / 2);
}
