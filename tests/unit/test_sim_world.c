/*
 * test_sim_world.c - the simulator's world under the sanitizers (make unit
 * runs every unit test plain and with ASan/UBSan): random schedules and
 * the damaged-relay runs must keep every invariant and leak nothing, and
 * the same seed must give the same trace.
 */
#include "model_target.h"
#include "presets.h"
#include "tamper.h"
#include "world.h"
#include "unit.h"

#include <stdio.h>
#include <string.h>

/* ---- the target model's sessions (apply.workers > 1) ---- */

static struct env_column cols[2] = { { "id", 2, 23, -1, true }, { "a", 1, 25, -1, false } };
static struct env_relation rel = { 1, "public", "t", 6, 1, 'd', 2, cols };
static const bool key[2] = { true, false };

/* INSERT (id, a) on session s */
static int insert(struct model_session *s, const char *id, const char *a)
{
	struct env_value v[2] = { { ENV_TEXT, (uint32_t)strlen(id), (const uint8_t *)id },
				  { ENV_TEXT, (uint32_t)strlen(a), (const uint8_t *)a } };
	struct env_change c = { .op = ENV_INSERT, .new_tuple = { 2, v } };
	struct plan_relation pr = { .rel = &rel, .key = key };
	return model_target_ops.change(s, &pr, 1, &c, NULL, 1);
}

static struct model_target *new_target(int sessions)
{
	static struct model_target t;
	struct sim_db *db = sim_db_new();
	const char *names[2] = { "id", "a" };
	sim_db_create_table(db, "public.t", 2, names, 1);
	char *pk[1] = { "id" };
	struct apply_table def = { .name = "public.t", .pk = pk, .n_pk = 1 };
	struct apply_tables defs = { .tables = &def, .n_tables = 1 };
	model_target_init(&t, db, &defs);
	model_target_sessions(&t, sessions, 42);
	model_target_connect(&t);
	return &t;
}

static struct apply_checkpoint at(uint64_t offset)
{
	return (struct apply_checkpoint){ .stream_offset = offset, .last_commit_lsn = offset };
}

/* A batch on s: one row, the checkpoint from prev to next, COMMIT submitted. */
static void batch(struct model_session *s, const char *id, uint64_t prev, uint64_t next)
{
	struct apply_checkpoint p = at(prev), n = at(next);
	CHECK(model_target_ops.begin(s, prev, true) == 0);
	CHECK(insert(s, id, "x") == 0);
	CHECK(model_target_ops.submit(s) == 0);
	CHECK(model_target_ops.collect(s) == 0);
	CHECK(model_target_ops.write_checkpoint(s, &p, &n, next) == 0);
	CHECK(model_target_ops.commit_submit(s, next) == 0);
}

static void sessions_tests(void)
{
	/* two batches in flight, collected newest first: the lock queue
	 * commits the first before the second, both land */
	struct model_target *t = new_target(3);
	struct model_session *s0 = model_target_session(t, 0), *s1 = model_target_session(t, 1);
	batch(s0, "1", 0, 10);
	batch(s1, "2", 10, 20);
	CHECK(t->cp.stream_offset == 0);
	CHECK(model_target_ops.collect(s1) == 0);
	CHECK(t->cp.stream_offset == 20);
	CHECK(sim_db_rows(t->db, "public.t") == 2);
	CHECK(model_target_ops.collect(s0) == 0);
	CHECK(t->violation[0] == '\0');
	model_target_free(t);

	/* the first batch's COMMIT fails (transient): the second one's
	 * checkpoint update fails (22P02: the row is not where the first
	 * leaves it), so the COMMIT sent after it commits nothing: neither
	 * row is on the target, the checkpoint did not move */
	t = new_target(3);
	s0 = model_target_session(t, 0);
	s1 = model_target_session(t, 1);
	t->next_commit_fault = MODEL_COMMIT_TRANSIENT;
	batch(s0, "1", 0, 10);
	batch(s1, "2", 10, 20);
	CHECK(model_target_ops.collect(s0) == -1);
	CHECK(strcmp(model_target_ops.error(s0)->sqlstate, "40001") == 0);
	CHECK(model_target_ops.collect(s1) == -1);
	CHECK(strcmp(model_target_ops.error(s1)->sqlstate, "22P02") == 0);
	CHECK(t->cp.stream_offset == 0);
	CHECK(sim_db_rows(t->db, "public.t") == 0);
	model_target_free(t);

	/* READ COMMITTED: a key committed by another session after BEGIN is
	 * seen (the insert conflicts); its own writes are seen */
	t = new_target(2);
	s0 = model_target_session(t, 0);
	s1 = model_target_session(t, 1);
	CHECK(model_target_ops.begin(s1, 0, true) == 0);
	batch(s0, "1", 0, 10);
	CHECK(model_target_ops.collect(s0) == 0);
	CHECK(insert(s1, "1", "y") == -1);
	CHECK(strcmp(model_target_ops.error(s1)->sqlstate, "23505") == 0);
	model_target_ops.rollback(s1);
	CHECK(t->violation[0] == '\0');
	model_target_free(t);

	/* two uncommitted transactions writing one key: a violation */
	t = new_target(2);
	s0 = model_target_session(t, 0);
	s1 = model_target_session(t, 1);
	CHECK(model_target_ops.begin(s0, 0, true) == 0);
	CHECK(model_target_ops.begin(s1, 0, true) == 0);
	CHECK(insert(s0, "7", "a") == 0);
	CHECK(t->violation[0] == '\0');
	(void)insert(s1, "7", "b");
	CHECK(strcmp(t->violation, "parallel_batches_write_disjoint_rows") == 0);
	model_target_free(t);

	/* a checkpoint update waiting on a transaction that has not sent its
	 * COMMIT: a violation (the target would wait forever) */
	t = new_target(2);
	s0 = model_target_session(t, 0);
	s1 = model_target_session(t, 1);
	struct apply_checkpoint p = at(0), n = at(10);
	CHECK(model_target_ops.begin(s0, 0, true) == 0);
	CHECK(model_target_ops.write_checkpoint(s0, &p, &n, 10) == 0);
	batch(s1, "2", 10, 20);
	CHECK(model_target_ops.collect(s1) == -1);
	CHECK(strcmp(t->violation, "checkpoint_lock_waits_on_idle_transaction") == 0);
	model_target_free(t);

	/* a disconnect with two COMMITs submitted: what commits is a prefix */
	for (uint64_t seed = 1; seed <= 16; seed++) {
		t = new_target(3);
		model_target_sessions(t, 3, seed);
		s0 = model_target_session(t, 0);
		s1 = model_target_session(t, 1);
		batch(s0, "1", 0, 10);
		batch(s1, "2", 10, 20);
		model_target_disconnect(t);
		/* the checkpoint is where a prefix of the batches leaves it (the
		 * second batch's row may have committed without it: see above) */
		bool has1 = sim_db_find(t->db, "public.t", (struct sim_values){ (const char *const[]){ "1" }, 1 }) != NULL;
		bool has2 = sim_db_find(t->db, "public.t", (struct sim_values){ (const char *const[]){ "2" }, 1 }) != NULL;
		CHECK(t->cp.stream_offset == 0 || t->cp.stream_offset == 10 || t->cp.stream_offset == 20);
		CHECK(has1 == (t->cp.stream_offset >= 10));
		if (t->cp.stream_offset == 20)
			CHECK(has2);
		if (t->cp.stream_offset == 10)
			CHECK(!has2);
		model_target_free(t);
	}
}

int main(void)
{
	sessions_tests();
	for (uint64_t seed = 1; seed <= 40; seed++) {
		struct sim_world_options o;
		sim_world_random(&o, seed);
		struct sim_world_result r;
		bool ok = sim_world_run(&o, &r);
		if (!ok)
			fprintf(stderr, "seed %llu: %s: %s\n", (unsigned long long)seed, r.invariant, r.detail);
		CHECK(ok);
		CHECK(r.steps > 0);
	}
	/* on the replicated broker: nodes lost (one: the flow goes on; two:
	 * the quorum lost), publishes refused or their PubAcks lost, capture
	 * killed now and then; every invariant kept, capture held back and
	 * resumed, repeats answered by their Nats-Msg-Id */
	{
		uint64_t holds = 0, resumes = 0, quorum_losses = 0, node_losses = 0, duplicates = 0;
		for (uint64_t seed = 1; seed <= 8; seed++) {
			struct sim_world_options o;
			sim_world_defaults(&o, seed);
			o.broker = true;
			o.p_broker_outage = 4;
			o.p_publish_fail = 3;
			o.p_kill_capture = 2;
			struct sim_world_result r;
			bool ok = sim_world_run(&o, &r);
			if (!ok)
				fprintf(stderr, "broker seed %llu: %s: %s\n", (unsigned long long)seed, r.invariant, r.detail);
			CHECK(ok);
			CHECK(r.broker_stored > 0);
			holds += r.broker_holds;
			resumes += r.broker_resumes;
			quorum_losses += r.broker_quorum_losses;
			node_losses += r.broker_node_losses;
			duplicates += r.broker_msgid_duplicates;
		}
		CHECK(holds > 0 && resumes > 0);
		CHECK(quorum_losses > 0 && node_losses > 0);
		CHECK(duplicates > 0);
	}
	/* trellara-snapshot killed at each of its fault points (as
	 * TRELLARA_FAULT names them), then run again: the run keeps every
	 * invariant, the point was reached, and the run was resumed
	 * (after_handoff_before_stream leaves nothing to resume) */
	static const char *const snapshot_points[] = {
		"snapshot.after_slot_before_record", "snapshot.after_export_before_copy", "snapshot.mid_table_copy",
		"snapshot.after_copy_before_handoff", "snapshot.after_handoff_before_stream",
	};
	for (size_t i = 0; i < sizeof snapshot_points / sizeof *snapshot_points; i++) {
		struct sim_world_options o;
		sim_world_defaults(&o, 11 + i);
		o.snapshot = true;
		o.pre_transactions = 20;
		o.kill_point = snapshot_points[i];
		o.kill_nth = 1;
		struct sim_world_result r;
		bool ok = sim_world_run(&o, &r);
		if (!ok)
			fprintf(stderr, "%s: %s: %s\n", snapshot_points[i], r.invariant, r.detail);
		CHECK(ok);
		CHECK(r.fault_points_hit == 1);
		CHECK(r.tables_copied >= 3);
		if (i >= 1 && i <= 3)
			CHECK(r.snapshot_resumes >= 1);
	}
	/* a schema change during a copy is caught, and the table copied again */
	{
		struct sim_world_options o;
		sim_world_defaults(&o, 5);
		o.snapshot = true;
		o.pre_transactions = 20;
		o.p_copy_ddl = 60;
		struct sim_world_result r;
		CHECK(sim_world_run(&o, &r));
		CHECK(r.schema_changes_caught >= 1);
		CHECK(r.recoverable_failures >= r.schema_changes_caught);
		CHECK(r.snapshot_resumes >= 1);
	}
	/* the slot lost each way, with and without a snapshot run before:
	 * capture stops on the verdict, the operator's copy of the whole
	 * flow is handed off, and the run keeps every invariant */
	for (int way = 0; way < 4; way++) {
		struct sim_world_options o;
		sim_world_defaults(&o, 21 + (uint64_t)way);
		o.snapshot = way % 2 == 1;
		o.pre_transactions = 10;
		o.chunk_changes = 2;
		o.p_kill_capture = way == 2 ? 6 : 0;
		int *p[4] = { &o.p_promote_no_slot, &o.p_slot_wal_removed, &o.p_slot_idle_timeout, &o.p_slot_dropped };
		*p[way] = 4;
		struct sim_world_result r;
		bool ok = sim_world_run(&o, &r);
		if (!ok)
			fprintf(stderr, "slot lost (%d): %s: %s\n", way, r.invariant, r.detail);
		CHECK(ok);
		uint64_t stops[4] = { r.slot_stops_lost_at_promotion, r.slot_stops_invalidated, r.slot_stops_invalidated,
				      r.slot_stops_gone };
		CHECK(stops[way] >= 1);
		CHECK(r.recopies >= 1 && r.tables_copied >= 3);
	}
	/* Random schedules a 20 000-schedule exploration (seed 5000) found
	 * failing: applyd rolled back the transactions batched before a
	 * written-once set's manifest when the set was abandoned (a restarted
	 * capture's pending chunks came before its marker), and lost them
	 * (17089, 17819, 17921); and a restart that read such a set's manifest
	 * again, the set applied already, quarantined it because retention
	 * had removed its pending chunks meanwhile (9002); and a false alarm
	 * of the check itself: retention had left no commit in the stream,
	 * every transaction before the slot applied (48124, seed 40000).
	 * And (seed 120000): capture published frames without a PubAck while
	 * the broker's quorum was lost, lost power, restarted at the stream's
	 * committed end; the servers came back and stored the earlier run's
	 * frames after all; the new run's first frames were refused, a later
	 * one stored where the leftovers made its expected sequence come
	 * true, and capture acknowledged the source past a transaction the
	 * stream never held (136555, source_checkpoint_after_broker_ack). */
	const uint64_t found[] = { 9002, 17089, 17819, 17921, 48124, 136555 };
	for (size_t i = 0; i < sizeof found / sizeof *found; i++) {
		struct sim_world_options fo;
		sim_world_random(&fo, found[i]);
		fo.leftovers_at_step = -1; /* drawn since: the schedules as they were found */
		struct sim_world_result fr;
		bool ok = sim_world_run(&fo, &fr);
		if (!ok)
			fprintf(stderr, "schedule seed %llu: %s: %s\n", (unsigned long long)found[i], fr.invariant, fr.detail);
		CHECK(ok);
	}
	/* A target row deleted behind applyd's back while applyd had a
	 * transaction open that already deleted it: the model's commit put it
	 * back, nothing was left to quarantine, and the scenario failed its
	 * own check (one seed in 25; 136556 among them).  The injection now
	 * waits for no open target transaction. */
	const uint64_t quarantine_seeds[] = { 136556, 1, 2, 3 };
	for (size_t i = 0; i < sizeof quarantine_seeds / sizeof *quarantine_seeds; i++) {
		const struct sim_preset *qp = sim_preset_find("target_quarantine_repair_replay");
		CHECK(qp != NULL);
		if (!qp)
			break;
		struct sim_world_options qo;
		sim_world_defaults(&qo, quarantine_seeds[i]);
		qp->setup(&qo);
		struct sim_world_result qr;
		bool ok = sim_world_run(&qo, &qr);
		if (!ok)
			fprintf(stderr, "quarantine scenario, seed %llu: %s: %s\n", (unsigned long long)quarantine_seeds[i],
				qr.invariant, qr.detail);
		CHECK(ok);
		char why[256] = "";
		CHECK(qp->expect(&qr, why, sizeof why));
	}
	/* capture killed once a written-once set's manifest is durable, its
	 * marker not (capture.after_manifest_sync): transactions batched
	 * before the manifest must survive the set's abandonment */
	int manifest_kills = 0;
	for (uint64_t seed = 1; seed <= 12; seed++) {
		struct sim_world_options mo;
		sim_world_defaults(&mo, seed);
		mo.big_pct = 40;
		mo.written_once_changes = 3;
		mo.capture_batch_messages = 1;
		mo.batch_transactions = 50;
		mo.kill_point = "capture.after_manifest_sync";
		mo.kill_nth = 1 + (unsigned)(seed % 3);
		struct sim_world_result mr;
		bool ok = sim_world_run(&mo, &mr);
		if (!ok)
			fprintf(stderr, "manifest kill, seed %llu: %s: %s\n", (unsigned long long)seed, mr.invariant, mr.detail);
		CHECK(ok);
		manifest_kills += mr.fault_points_hit > 0;
	}
	CHECK(manifest_kills >= 6);
	/* one seed, one run */
	struct sim_world_options o;
	sim_world_random(&o, 3);
	struct sim_world_result a, b;
	sim_world_run(&o, &a);
	sim_world_run(&o, &b);
	CHECK(a.trace_digest == b.trace_digest && a.steps == b.steps && a.applied == b.applied);
	sim_world_random(&o, 4);
	sim_world_run(&o, &b);
	CHECK(a.trace_digest != b.trace_digest);
	for (int k = SIM_TAMPER_MISSING_CHUNK; k <= SIM_TAMPER_NO_BARRIER; k++) {
		struct sim_tamper_result t;
		bool ok = sim_tamper_run((enum sim_tamper)k, 1, &t);
		if (!ok)
			fprintf(stderr, "tamper %d: %s\n", k, t.detail);
		CHECK(ok);
		CHECK(t.quarantined);
	}
	return unit_done("sim_world");
}
