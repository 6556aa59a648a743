/*
 * test_ack_policy.c - capture's acknowledgement policy without a socket:
 * never report past durable, the restart duplicate rule, watermark,
 * batch, status and keepalive rules, and a seeded random sequence of
 * appends, syncs, reports, keepalives and crashes against a model stream
 * that checks the invariants after every step.
 *
 * Links with common/ack_policy.o alone (build/tests/ack_policy_nolibpq).
 */
#include "trellara/ack_policy.h"
#include "unit.h"

#include <stdint.h>
#include <stdlib.h>

static const struct ack_policy_options default_options = {
	.status_interval_us = 10 * 1000 * 1000,
	.watermark_interval_us = 1000 * 1000,
	.max_batch_transactions = 4,
	.max_batch_messages = 100,
};

static void init_at(struct ack_policy *p, uint64_t last_commit, uint64_t durable)
{
	struct ack_restart_point rp = { .last_commit_lsn = last_commit, .durable_lsn = durable };
	ack_policy_init(p, &default_options, &rp);
}

/* capture's flush_batch against counters: returns whether a watermark was appended */
static bool flush(struct ack_policy *p, size_t *frames, uint64_t *watermark_at, int64_t now_us)
{
	bool wrote = false;
	if (!ack_policy_flush_needed(p, *frames))
		return false;
	uint64_t lsn;
	if (ack_policy_watermark_needed(p, &lsn)) {
		ack_policy_on_watermark_appended(p, lsn, now_us);
		(*frames)++;
		wrote = true;
		if (watermark_at)
			*watermark_at = lsn;
	}
	*frames = 0;
	ack_policy_on_durable(p);
	return wrote;
}

static void test_restart_point(void)
{
	struct ack_restart_point rp = { 0 };
	ack_restart_point_add_watermark(&rp, 500);
	CHECK(rp.last_commit_lsn == 0); /* a watermark says nothing of transactions */
	CHECK(rp.durable_lsn == 500);
	ack_restart_point_add_txn(&rp, 100, 120);
	CHECK(rp.last_commit_lsn == 100);
	CHECK(rp.durable_lsn == 500); /* an older transaction does not move it back */
	ack_restart_point_add_txn(&rp, 600, 640);
	CHECK(rp.last_commit_lsn == 600);
	CHECK(rp.durable_lsn == 640);
	ack_restart_point_add_txn(&rp, 300, 330); /* order does not matter */
	CHECK(rp.last_commit_lsn == 600);
	CHECK(rp.durable_lsn == 640);
	ack_restart_point_add_watermark(&rp, 700);
	CHECK(rp.last_commit_lsn == 600);
	CHECK(rp.durable_lsn == 700);

	struct ack_policy p;
	ack_policy_init(&p, &default_options, &rp);
	CHECK(p.stream_last_commit_lsn == 600);
	CHECK(p.durable_lsn == 700 && p.pending_lsn == 700 && p.recorded_lsn == 700);
	CHECK(p.reported_lsn == 0 && p.batch_txns == 0);
	CHECK(ack_policy_report_lsn(&p) == 700);
	/* nothing reported yet: the first idle moment sends a status */
	CHECK(ack_policy_status_due(&p, 1));
	CHECK(!ack_policy_flush_needed(&p, 0));
	uint64_t lsn = 0;
	CHECK(!ack_policy_watermark_needed(&p, &lsn));
}

static void test_duplicates(void)
{
	/* exhaustive over a small range: at or below the stream's last commit
	 * is a duplicate, above it is appended */
	for (uint64_t last = 0; last < 40; last++)
		for (uint64_t commit = 0; commit < 40; commit++) {
			bool dup = ack_policy_is_duplicate(last, commit);
			if (dup != (commit <= last))
				fprintf(stderr, "last %llu commit %llu: duplicate %d\n", (unsigned long long)last,
					(unsigned long long)commit, dup);
			CHECK(dup == (commit <= last));
		}
	CHECK(ack_policy_is_duplicate(UINT64_MAX, UINT64_MAX));
	CHECK(!ack_policy_is_duplicate(UINT64_MAX - 1, UINT64_MAX));
	CHECK(ack_policy_is_duplicate(0x16B3748, 0x16B3748));
	CHECK(!ack_policy_is_duplicate(0x16B3748, 0x16B3749));
	/* an empty stream skips nothing above 0/0 */
	CHECK(!ack_policy_is_duplicate(0, 1));
}

static void test_never_past_durable(void)
{
	struct ack_policy p;
	init_at(&p, 0, 0);
	size_t frames = 0;
	uint64_t end = 0;
	for (int i = 1; i <= 3; i++) {
		end = (uint64_t)i * 100;
		frames += 2;
		CHECK(!ack_policy_on_appended(&p, end, frames, 1000 + i)); /* 3 < 4 transactions */
		CHECK(p.pending_lsn == end);
		CHECK(p.recorded_lsn == end);
		/* appended is not durable: nothing of it may be reported */
		CHECK(ack_policy_report_lsn(&p) == 0);
		CHECK(p.durable_lsn == 0);
	}
	CHECK(p.batch_txns == 3);
	CHECK(p.batch_started_us == 1001); /* the first transaction's time */
	CHECK(ack_policy_flush_needed(&p, frames));
	uint64_t lsn = 0;
	CHECK(!ack_policy_watermark_needed(&p, &lsn)); /* the last frame records pending */
	CHECK(ack_policy_on_durable(&p) == 300);
	CHECK(ack_policy_report_lsn(&p) == 300);
	CHECK(p.batch_txns == 0);
	CHECK(ack_policy_status_due(&p, 2000)); /* durable moved past reported */
	ack_policy_on_reported(&p, 2000);
	CHECK(p.reported_lsn == 300 && p.last_status_us == 2000);
	CHECK(!ack_policy_status_due(&p, 2001));
	/* an older end does not move anything back */
	ack_policy_on_passed(&p, 200);
	CHECK(p.pending_lsn == 300);
	CHECK(ack_policy_on_durable(&p) == 300);
	CHECK(ack_policy_report_lsn(&p) == 300);
}

static void test_batch_full(void)
{
	struct ack_policy p;
	init_at(&p, 0, 0);
	CHECK(!ack_policy_on_appended(&p, 10, 1, 0));
	CHECK(!ack_policy_on_appended(&p, 20, 2, 0));
	CHECK(!ack_policy_on_appended(&p, 30, 3, 0));
	CHECK(ack_policy_on_appended(&p, 40, 4, 0)); /* 4th transaction */
	ack_policy_on_durable(&p);
	CHECK(!ack_policy_on_appended(&p, 50, 99, 0));
	ack_policy_on_durable(&p);
	CHECK(ack_policy_on_appended(&p, 60, 100, 0)); /* 100 frames pending */
	CHECK(ack_policy_on_appended(&p, 70, 1000, 0));
}

static void test_group_commit_wait(void)
{
	struct ack_policy p;
	init_at(&p, 0, 0);
	CHECK(!ack_policy_batch_may_wait(&p, 0)); /* nothing pending */
	ack_policy_on_appended(&p, 10, 1, 5000);
	CHECK(ack_policy_batch_may_wait(&p, 5000));
	CHECK(ack_policy_batch_may_wait(&p, 5000 + ACK_GROUP_COMMIT_WAIT_US - 1));
	CHECK(!ack_policy_batch_may_wait(&p, 5000 + ACK_GROUP_COMMIT_WAIT_US));
	ack_policy_on_appended(&p, 20, 2, 6000); /* the batch's start stays */
	CHECK(p.batch_started_us == 5000);
	CHECK(!ack_policy_batch_may_wait(&p, 5000 + ACK_GROUP_COMMIT_WAIT_US));
	ack_policy_on_appended(&p, 30, 3, 6000);
	ack_policy_on_appended(&p, 40, 4, 6000); /* full: sync now */
	CHECK(!ack_policy_batch_may_wait(&p, 5001));
	ack_policy_on_durable(&p);
	CHECK(!ack_policy_batch_may_wait(&p, 5001));
}

static void test_watermarks(void)
{
	struct ack_policy p;
	init_at(&p, 100, 120);
	size_t frames = 0;
	uint64_t at = 0, lsn = 0;

	/* an empty transaction: its end passed without a frame */
	ack_policy_on_passed(&p, 200);
	CHECK(ack_policy_report_lsn(&p) == 120);
	CHECK(ack_policy_flush_needed(&p, 0));
	CHECK(ack_policy_watermark_needed(&p, &lsn) && lsn == 200);
	CHECK(flush(&p, &frames, &at, 7000) && at == 200);
	CHECK(p.recorded_lsn == 200 && p.durable_lsn == 200 && p.last_watermark_us == 7000);
	CHECK(!ack_policy_flush_needed(&p, 0));

	/* a skipped duplicate's end passed without a frame too */
	ack_policy_on_passed(&p, 260);
	CHECK(flush(&p, &frames, &at, 7100) && at == 260);
	CHECK(ack_policy_report_lsn(&p) == 260);

	/* an appended transaction records its own end: no watermark */
	frames = 3;
	ack_policy_on_appended(&p, 300, frames, 7200);
	CHECK(!ack_policy_watermark_needed(&p, &lsn));
	CHECK(!flush(&p, &frames, &at, 7300));
	CHECK(ack_policy_report_lsn(&p) == 300);

	/* an empty transaction after an appended one in the same batch:
	 * the batch's last position has no frame yet */
	frames = 1;
	ack_policy_on_appended(&p, 400, frames, 7400);
	ack_policy_on_passed(&p, 450);
	CHECK(ack_policy_watermark_needed(&p, &lsn) && lsn == 450);
	CHECK(flush(&p, &frames, &at, 7500) && at == 450);
	CHECK(ack_policy_report_lsn(&p) == 450);

	/* an appended transaction after an empty one: the frame records it */
	ack_policy_on_passed(&p, 500);
	frames = 1;
	ack_policy_on_appended(&p, 550, frames, 7600);
	CHECK(!ack_policy_watermark_needed(&p, &lsn));

	/* frames pending without a new position (a big transaction's
	 * chunks synced as it goes): flush, but no watermark */
	struct ack_policy q;
	init_at(&q, 0, 50);
	CHECK(ack_policy_flush_needed(&q, 5));
	CHECK(!ack_policy_watermark_needed(&q, &lsn));
	CHECK(ack_policy_on_durable(&q) == 50);
}

static void test_status(void)
{
	struct ack_policy p;
	init_at(&p, 0, 0);
	int64_t interval = default_options.status_interval_us;
	ack_policy_on_reported(&p, 1000);
	CHECK(!ack_policy_status_interval_elapsed(&p, 1000 + interval - 1));
	CHECK(ack_policy_status_interval_elapsed(&p, 1000 + interval));
	CHECK(!ack_policy_status_due(&p, 1000 + interval - 1));
	CHECK(ack_policy_status_due(&p, 1000 + interval));
	ack_policy_on_connect(&p); /* a new connection: a status soon */
	CHECK(p.last_status_us == 0);
	CHECK(ack_policy_status_due(&p, interval));
	CHECK(!ack_policy_status_due(&p, interval - 1));
	CHECK(p.reported_lsn == 0);
}

static void test_keepalive(void)
{
	struct ack_policy p;
	init_at(&p, 0, 1000);
	int64_t wm = default_options.watermark_interval_us;
	struct ack_keepalive_decision d;

	/* a transaction open: its position is not received in full */
	d = ack_policy_on_keepalive(&p, 2000, false, true);
	CHECK(!d.record && !d.reply);
	d = ack_policy_on_keepalive(&p, 2000, true, true);
	CHECK(!d.record && d.reply);
	/* nothing new */
	d = ack_policy_on_keepalive(&p, 1000, true, false);
	CHECK(!d.record && d.reply);
	d = ack_policy_on_keepalive(&p, 999, false, false);
	CHECK(!d.record && !d.reply);
	/* past durable, nothing open: record */
	d = ack_policy_on_keepalive(&p, 1001, false, false);
	CHECK(d.record && !d.reply);

	/* the watermark: when asked for a reply, at once */
	CHECK(ack_policy_keepalive_watermark(&p, 2000, true, 1));
	/* unrequested: at most once per interval (none written yet: time 0) */
	CHECK(ack_policy_keepalive_watermark(&p, 2000, false, wm));
	CHECK(!ack_policy_keepalive_watermark(&p, 2000, false, wm - 1));
	ack_policy_on_watermark_appended(&p, 2000, 5 * wm);
	CHECK(p.pending_lsn == 2000 && p.recorded_lsn == 2000);
	CHECK(ack_policy_report_lsn(&p) == 1000); /* appended, not durable */
	CHECK(ack_policy_on_durable(&p) == 2000);
	CHECK(!ack_policy_keepalive_watermark(&p, 3000, false, 6 * wm - 1));
	CHECK(ack_policy_keepalive_watermark(&p, 3000, false, 6 * wm));
	CHECK(ack_policy_keepalive_watermark(&p, 3000, true, 5 * wm));
	/* not past durable: never */
	CHECK(!ack_policy_keepalive_watermark(&p, 2000, true, 100 * wm));
	CHECK(!ack_policy_keepalive_watermark(&p, 1500, true, 100 * wm));
}

/* ---- a seeded random sequence against a model stream and slot ---- */

struct model_txn {
	uint64_t commit_lsn, end_lsn;
	bool empty; /* no change for this flow */
};

struct model_frame {
	bool txn;     /* else a watermark */
	uint64_t lsn; /* txn: commit LSN; watermark: its LSN */
	uint64_t end_lsn;
	bool durable;
};

struct model {
	struct model_txn *txns;
	size_t n_txns;
	struct model_frame *frames;
	size_t n_frames, cap_frames;
	size_t next_send;        /* the server's next transaction to send */
	uint64_t confirmed_lsn;  /* the slot's confirmed_flush: the last status received */
	uint64_t wal_end;        /* the server's position: the last end sent */
	bool reconnects;         /* reconnect without a crash */
	struct ack_policy p;
	int64_t now_us;
	uint64_t durable_before;
	unsigned appended_twice;
};

static uint32_t rng_state;

static uint32_t rnd(uint32_t n)
{
	/* xorshift32: fixed seed, the same sequence on every machine */
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 17;
	rng_state ^= rng_state << 5;
	return rng_state % n;
}

static void model_append(struct model *m, bool txn, uint64_t lsn, uint64_t end_lsn)
{
	if (m->n_frames == m->cap_frames) {
		m->cap_frames = m->cap_frames ? 2 * m->cap_frames : 64;
		m->frames = realloc(m->frames, m->cap_frames * sizeof *m->frames);
		if (!m->frames)
			abort();
	}
	m->frames[m->n_frames++] = (struct model_frame){ .txn = txn, .lsn = lsn, .end_lsn = end_lsn };
}

static size_t model_pending_frames(const struct model *m)
{
	size_t n = 0;
	for (size_t i = m->n_frames; i-- > 0 && !m->frames[i].durable;)
		n++;
	return n;
}

/* the highest LSN a durable frame records: what a restart finds */
static uint64_t model_durable_recorded(const struct model *m)
{
	uint64_t hi = 0;
	for (size_t i = 0; i < m->n_frames; i++)
		if (m->frames[i].durable && (m->frames[i].txn ? m->frames[i].end_lsn : m->frames[i].lsn) > hi)
			hi = m->frames[i].txn ? m->frames[i].end_lsn : m->frames[i].lsn;
	return hi;
}

static void model_sync(struct model *m)
{
	for (size_t i = 0; i < m->n_frames; i++)
		m->frames[i].durable = true;
}

static void model_flush(struct model *m)
{
	if (!ack_policy_flush_needed(&m->p, model_pending_frames(m)))
		return;
	uint64_t lsn;
	if (ack_policy_watermark_needed(&m->p, &lsn)) {
		model_append(m, false, lsn, lsn);
		ack_policy_on_watermark_appended(&m->p, lsn, m->now_us);
	}
	model_sync(m);
	ack_policy_on_durable(&m->p);
}

static void model_report(struct model *m)
{
	m->confirmed_lsn = ack_policy_report_lsn(&m->p);
	ack_policy_on_reported(&m->p, m->now_us);
}

/* a (re)connection: the server sends again everything after confirmed */
static void model_connect(struct model *m)
{
	m->next_send = 0;
	while (m->next_send < m->n_txns && m->txns[m->next_send].end_lsn <= m->confirmed_lsn)
		m->next_send++;
	m->wal_end = m->confirmed_lsn;
	ack_policy_on_connect(&m->p);
}

/* kill -9: what was not synced is gone; the restart folds the stream */
static void model_crash(struct model *m)
{
	size_t kept = 0;
	while (kept < m->n_frames && m->frames[kept].durable)
		kept++;
	m->n_frames = kept;
	struct ack_restart_point rp = { 0 };
	for (size_t i = 0; i < m->n_frames; i++) {
		if (m->frames[i].txn)
			ack_restart_point_add_txn(&rp, m->frames[i].lsn, m->frames[i].end_lsn);
		else
			ack_restart_point_add_watermark(&rp, m->frames[i].lsn);
	}
	ack_policy_init(&m->p, &default_options, &rp);
	CHECK(m->p.durable_lsn >= m->durable_before); /* durable survives a crash */
	m->durable_before = m->p.durable_lsn;
	model_connect(m);
}

static void model_deliver(struct model *m)
{
	const struct model_txn *t = &m->txns[m->next_send++];
	m->wal_end = t->end_lsn;
	if (ack_policy_is_duplicate(m->p.stream_last_commit_lsn, t->commit_lsn) || t->empty) {
		ack_policy_on_passed(&m->p, t->end_lsn);
		return;
	}
	for (size_t i = 0; i < m->n_frames; i++)
		if (m->frames[i].txn && m->frames[i].lsn == t->commit_lsn)
			m->appended_twice++;
	model_append(m, true, t->commit_lsn, t->end_lsn);
	ack_policy_on_commit_appended(&m->p, t->commit_lsn);
	if (ack_policy_on_appended(&m->p, t->end_lsn, model_pending_frames(m), m->now_us))
		model_flush(m);
}

static void model_keepalive(struct model *m, bool in_transaction)
{
	bool reply = rnd(2);
	/* the server's position may pass the last change sent, never the
	 * next transaction's commit */
	uint64_t wal_end = m->wal_end + (in_transaction ? 0 : rnd(3));
	if (m->next_send < m->n_txns && wal_end >= m->txns[m->next_send].commit_lsn)
		wal_end = m->wal_end;
	m->wal_end = wal_end;
	struct ack_keepalive_decision d = ack_policy_on_keepalive(&m->p, wal_end, reply, in_transaction);
	CHECK(d.reply == reply);
	if (d.record) {
		model_flush(m);
		if (ack_policy_keepalive_watermark(&m->p, wal_end, reply, m->now_us)) {
			model_append(m, false, wal_end, wal_end);
			ack_policy_on_watermark_appended(&m->p, wal_end, m->now_us);
			model_flush(m);
			CHECK(ack_policy_report_lsn(&m->p) == wal_end);
		}
	}
	if (d.reply)
		model_report(m);
}

static void model_check(struct model *m, int step)
{
	uint64_t stream_hi = model_durable_recorded(m);
	uint64_t report = ack_policy_report_lsn(&m->p);
	bool ok = report <= stream_hi && report == m->p.durable_lsn && m->confirmed_lsn <= stream_hi &&
		  m->p.reported_lsn <= m->p.durable_lsn && m->p.durable_lsn >= m->durable_before &&
		  m->p.recorded_lsn <= m->p.pending_lsn;
	if (!ok)
		fprintf(stderr, "step %d: report %llu durable %llu stream %llu confirmed %llu\n", step,
			(unsigned long long)report, (unsigned long long)m->p.durable_lsn, (unsigned long long)stream_hi,
			(unsigned long long)m->confirmed_lsn);
	CHECK(ok);
	m->durable_before = m->p.durable_lsn;
}

static void run_sequence(uint32_t seed, int steps, bool reconnects)
{
	struct model m = { .reconnects = reconnects };
	rng_state = seed;
	m.n_txns = 400;
	m.txns = calloc(m.n_txns, sizeof *m.txns);
	uint64_t lsn = 0x1000;
	for (size_t i = 0; i < m.n_txns; i++) {
		lsn += 1 + rnd(50);
		m.txns[i].commit_lsn = lsn;
		lsn += 1 + rnd(8);
		m.txns[i].end_lsn = lsn;
		m.txns[i].empty = rnd(5) == 0;
	}
	struct ack_restart_point empty_stream = { 0 };
	ack_policy_init(&m.p, &default_options, &empty_stream);
	model_connect(&m);
	for (int step = 0; step < steps; step++) {
		m.now_us += rnd(3000);
		uint32_t action = rnd(100);
		if (action < 50) {
			if (m.next_send < m.n_txns)
				model_deliver(&m);
		} else if (action < 62) {
			model_keepalive(&m, rnd(4) == 0);
		} else if (action < 75) {
			model_flush(&m);
		} else if (action < 85) {
			if (ack_policy_status_due(&m.p, m.now_us))
				model_report(&m);
		} else if (action < 90) {
			if (ack_policy_batch_may_wait(&m.p, m.now_us))
				continue;
			model_flush(&m);
			if (ack_policy_status_due(&m.p, m.now_us))
				model_report(&m);
		} else if (action < 94) {
			model_crash(&m);
		} else if (action < 97 && m.reconnects) {
			model_flush(&m); /* capture flushes when the connection is lost */
			model_connect(&m);
		}
		model_check(&m, step);
	}
	/* heal and drain: everything sent, recorded and confirmed */
	while (m.next_send < m.n_txns) {
		model_deliver(&m);
		model_check(&m, steps);
	}
	model_flush(&m);
	model_report(&m);
	model_check(&m, steps);
	CHECK(m.confirmed_lsn >= m.txns[m.n_txns - 1].end_lsn);
	CHECK(m.confirmed_lsn == model_durable_recorded(&m));
	/* after crashes and reconnects: every non-empty transaction exactly
	 * once, in order (a reconnect resends from the slot's confirmed
	 * position; what this process appended since is skipped) */
	{
		size_t f = 0;
		bool exact = m.appended_twice == 0;
		for (size_t i = 0; i < m.n_txns; i++) {
			if (m.txns[i].empty)
				continue;
			while (f < m.n_frames && !m.frames[f].txn)
				f++;
			if (f == m.n_frames || m.frames[f].lsn != m.txns[i].commit_lsn)
				exact = false;
			f++;
		}
		while (f < m.n_frames && !m.frames[f].txn)
			f++;
		if (!exact || f < m.n_frames)
			fprintf(stderr, "seed %u: the stream does not hold every transaction exactly once\n", seed);
		CHECK(exact && f >= m.n_frames);
	}
	free(m.txns);
	free(m.frames);
}

int main(void)
{
	test_restart_point();
	test_duplicates();
	test_never_past_durable();
	test_batch_full();
	test_group_commit_wait();
	test_watermarks();
	test_status();
	test_keepalive();
	for (uint32_t seed = 1; seed <= 20; seed++) {
		run_sequence(seed * 2654435761u, 3000, false);
		run_sequence(seed * 2246822519u, 3000, true);
	}
	return unit_done("ack_policy");
}
