/*
 * test_capture_core.c - capture between the socket and the stream
 * (capture_core.h) on the simulated file system, without libpq: recorded
 * PostgreSQL 15 pgoutput messages (tests/fixtures/pgoutput/NAME.hex)
 * wrapped as the CopyData messages the server sends ('w' XLogData with
 * the row's LSN as dataStart, 'k' keepalives), through the same core
 * trellara-capture runs.
 *
 * What the tests hold the core to, each checked against the stream read
 * back (stream_reader_open_fs), never against the core's own counters
 * alone:
 *   - every status update's flushed position is covered by frames a sync
 *     made durable (a transaction's end or a watermark); after an
 *     injected fdatasync EIO the core returns EXIT_CANTCREAT and the
 *     position does not move;
 *   - a keepalive on an idle stream is recorded by a durable watermark
 *     before it is acknowledged; one inside an open transaction is not;
 *   - after a kill (a view's kill -9, or a kill followed by power loss)
 *     and a reopen, the transactions the server sends again are skipped
 *     up to the stream's last commit and counted, later ones appended:
 *     every commit LSN is in the stream exactly once;
 *   - a sink the caller opened (an in-memory one here) gets every frame
 *     instead of the local stream, with the same three guarantees.
 *
 * Spill files go to a mkdtemp directory, removed at the end.
 */
#include "trellara/capture_core.h"

#include "trellara/defaults.h"
#include "trellara/envelope.h"
#include "trellara/log.h"
#include "trellara/lsn.h"
#include "trellara/stream.h"
#include "trellara/stream_fs.h"
#include "trellara/xalloc.h"
#include "unit.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define DIR "/data/stream"
#define PG_EPOCH_OFFSET_US 946684800000000LL

static char spill_dir[64];

/* ---- fixtures: one pgoutput message per line, its LSN in the comment ---- */

struct fixture {
	int proto_version;
	size_t count;
	uint8_t **msgs;   /* owned */
	size_t *lens;     /* owned */
	uint64_t *lsns;   /* owned: the row's LSN, the XLogData dataStart */
};

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static int fixture_load(const char *name, struct fixture *fx)
{
	memset(fx, 0, sizeof *fx);
	const char *dir = getenv("TRELLARA_FIXTURES");
	char *path = xasprintf("%s/pgoutput/%s.hex", dir ? dir : "tests/fixtures", name);
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	int rc = -1;
	if (!f)
		goto out;
	while (getline(&line, &cap, f) >= 0) {
		if (line[0] == '#') {
			sscanf(line, "# proto_version %d", &fx->proto_version);
			continue;
		}
		size_t hexlen = strcspn(line, " \t#\r\n");
		if (hexlen == 0)
			continue;
		if (hexlen % 2)
			goto out;
		char *lsn_text = strstr(line, "# lsn ");
		uint64_t lsn = 0;
		if (lsn_text) {
			lsn_text += 6;
			lsn_text[strcspn(lsn_text, " \r\n")] = '\0';
			if (!lsn_parse(lsn_text, &lsn))
				goto out;
		}
		uint8_t *msg = xmalloc(hexlen / 2);
		for (size_t i = 0; i < hexlen; i += 2)
			msg[i / 2] = (uint8_t)(hexval(line[i]) << 4 | hexval(line[i + 1]));
		fx->msgs = unit_grow(fx->msgs, fx->count, sizeof *fx->msgs);
		fx->lens = unit_grow(fx->lens, fx->count, sizeof *fx->lens);
		fx->lsns = unit_grow(fx->lsns, fx->count, sizeof *fx->lsns);
		fx->msgs[fx->count] = msg;
		fx->lens[fx->count] = hexlen / 2;
		fx->lsns[fx->count++] = lsn;
	}
	rc = fx->proto_version ? 0 : -1;
out:
	if (rc < 0)
		fprintf(stderr, "fixture \"%s\" does not load\n", path);
	if (f)
		fclose(f);
	free(line);
	free(path);
	return rc;
}

static void fixture_free(struct fixture *fx)
{
	for (size_t i = 0; i < fx->count; i++)
		free(fx->msgs[i]);
	free(fx->msgs);
	free(fx->lens);
	free(fx->lsns);
	memset(fx, 0, sizeof *fx);
}

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
}

static uint64_t get_be64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* The commit LSNs the fixture's Commit messages carry ('C', flags, then
 * commit LSN and end LSN), independent of the core. */
static size_t fixture_commits(const struct fixture *fx, uint64_t *commit_lsns, uint64_t *end_lsns, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < fx->count; i++)
		if (fx->msgs[i][0] == 'C' && fx->lens[i] >= 18 && n < max) {
			commit_lsns[n] = get_be64(fx->msgs[i] + 2);
			end_lsns[n++] = get_be64(fx->msgs[i] + 10);
		}
	return n;
}

/* ---- the simulated server and clock ---- */

struct session {
	struct stream_fs *fs;
	struct capture_core *cc;
	int64_t now_us, wall_us;
	uint64_t acked;        /* highest flushed position a status update carried */
	unsigned statuses;     /* status updates sent */
	unsigned violations;   /* updates whose position the durable stream did not cover */
	struct mem_sink *mem;  /* the caller-opened sink, if any (not owned) */
};

struct mem_sink;
static uint64_t mem_recorded(const struct mem_sink *m);

/* The highest position frames of the stream record (a transaction's end,
 * a watermark), read back as a consumer would: only published frames,
 * that is frames a sync made durable. */
static uint64_t stream_recorded(struct stream_fs *fs, uint64_t *watermark_lsn)
{
	struct stream_reader *r = NULL;
	uint64_t recorded = 0;
	if (watermark_lsn)
		*watermark_lsn = 0;
	if (stream_reader_open_fs(fs, DIR, &r) != STREAM_OK)
		return 0;
	struct stream_frame f;
	while (stream_reader_next(r, &f) == STREAM_OK) {
		int t = f.header.type;
		struct env_frame_summary s;
		char err[256];
		if (t != FRAME_TXN && t != FRAME_COMMIT_MARKER && t != FRAME_WATERMARK)
			continue;
		if (env_frame_summary(t, f.payload, f.header.payload_length, &s, err, sizeof err) < 0)
			continue;
		uint64_t lsn = t == FRAME_WATERMARK ? s.lsn : s.end_lsn;
		if (lsn > recorded)
			recorded = lsn;
		if (t == FRAME_WATERMARK && watermark_lsn && s.lsn > *watermark_lsn)
			*watermark_lsn = s.lsn;
	}
	stream_reader_close(r);
	return recorded;
}

/* Send a status update as capture does, check it against the stream. */
static void send_status(struct session *s)
{
	uint8_t m[CAPTURE_STATUS_MESSAGE_LEN];
	capture_core_status_message(s->cc, m, s->wall_us, false);
	CHECK(m[0] == 'r' && m[33] == 0);
	uint64_t written = get_be64(m + 1), flushed = get_be64(m + 9), applied = get_be64(m + 17);
	CHECK(written == flushed && applied == flushed);
	CHECK((int64_t)get_be64(m + 25) == s->wall_us - PG_EPOCH_OFFSET_US);
	uint64_t recorded = s->mem ? mem_recorded(s->mem) : stream_recorded(s->fs, NULL);
	if (flushed > recorded) {
		s->violations++;
		fprintf(stderr, "status update acknowledges %llx, the durable stream records only %llx\n",
			(unsigned long long)flushed, (unsigned long long)recorded);
	}
	CHECK(flushed >= s->acked); /* never goes back */
	s->acked = flushed;
	s->statuses++;
	capture_core_on_status_sent(s->cc, s->now_us);
}

static int feed(struct session *s, const uint8_t *msg, size_t len)
{
	s->now_us += 10;
	s->wall_us += 10;
	bool reply = false;
	int rc = capture_core_on_message(s->cc, msg, len, s->now_us, s->wall_us, &reply);
	if (reply)
		send_status(s);
	return rc;
}

static int feed_xlog(struct session *s, const uint8_t *pg, size_t len, uint64_t lsn)
{
	uint8_t *w = xmalloc(25 + len);
	w[0] = 'w';
	put_be64(w + 1, lsn);
	put_be64(w + 9, lsn);
	put_be64(w + 17, (uint64_t)(s->wall_us - PG_EPOCH_OFFSET_US));
	memcpy(w + 25, pg, len);
	int rc = feed(s, w, 25 + len);
	free(w);
	return rc;
}

static int feed_keepalive(struct session *s, uint64_t wal_end, bool reply)
{
	uint8_t k[18];
	k[0] = 'k';
	put_be64(k + 1, wal_end);
	put_be64(k + 9, (uint64_t)(s->wall_us - PG_EPOCH_OFFSET_US));
	k[17] = reply ? 1 : 0;
	return feed(s, k, sizeof k);
}

/* Feed fixture messages [from, to); stop at the first failure. */
static int feed_range(struct session *s, const struct fixture *fx, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++) {
		int rc = feed_xlog(s, fx->msgs[i], fx->lens[i], fx->lsns[i]);
		if (rc != EXIT_OK)
			return rc;
	}
	return EXIT_OK;
}

/* The socket is quiet: what capture's loop does (group commit, flush,
 * a status when due). */
static int idle(struct session *s)
{
	s->now_us += ACK_GROUP_COMMIT_WAIT_US + 1;
	s->wall_us += ACK_GROUP_COMMIT_WAIT_US + 1;
	CHECK(capture_core_quiet(s->cc, s->now_us) == CAPTURE_CORE_FLUSH);
	int rc = capture_core_flush(s->cc, s->now_us, s->wall_us);
	if (rc == EXIT_OK && capture_core_status_due(s->cc, s->now_us))
		send_status(s);
	return rc;
}

static struct capture_core_options options(struct stream_fs *fs, int proto_version, uint64_t max_batch_txns,
					   uint64_t max_batch_messages)
{
	return (struct capture_core_options){
		.fs = fs,
		.stream_dir = DIR,
		.slot = "test_slot",
		.source_id = "src",
		.proto_version = proto_version,
		.writer = { .segment_bytes = MIN_SEGMENT_BYTES, .source_id = "src", .flow = "src/test",
			    .fault_prefix = "capture" },
		.assembler = { .source_id = "src", .flow = "src/test", .spill_dir = spill_dir,
			       .spill_threshold_changes = 500, .max_changes_per_chunk = 100 },
		.ack = { .status_interval_us = 10 * 1000 * 1000, .watermark_interval_us = 1000 * 1000,
			 .max_batch_transactions = max_batch_txns, .max_batch_messages = max_batch_messages },
	};
}

static int session_open(struct session *s, struct stream_fs *fs, const struct capture_core_options *o)
{
	s->fs = fs;
	if (!s->now_us) {
		s->now_us = 1000000;
		s->wall_us = 1700000000000000LL;
	}
	s->acked = 0;
	int rc = capture_core_open(&s->cc, o);
	if (rc == EXIT_OK)
		capture_core_reconnected(s->cc); /* START_REPLICATION streams */
	return rc;
}

static void session_close(struct session *s)
{
	capture_core_close(s->cc);
	s->cc = NULL;
}

/* Every commit LSN of the stream, in stream order. */
static size_t stream_commits(struct stream_fs *fs, uint64_t *commits, size_t max)
{
	struct stream_reader *r = NULL;
	size_t n = 0;
	CHECK(stream_reader_open_fs(fs, DIR, &r) == STREAM_OK);
	if (!r)
		return 0;
	struct stream_frame f;
	int st;
	while ((st = stream_reader_next(r, &f)) == STREAM_OK) {
		int t = f.header.type;
		if (t != FRAME_TXN && t != FRAME_COMMIT_MARKER)
			continue;
		struct env_frame_summary sum;
		char err[256];
		CHECK(env_frame_summary(t, f.payload, f.header.payload_length, &sum, err, sizeof err) == 0);
		if (n < max)
			commits[n++] = sum.commit_lsn;
	}
	CHECK(st == STREAM_END);
	stream_reader_close(r);
	return n;
}

/* ---- tests ---- */

/* Transactions are acknowledged only once a sync made them durable; an
 * fdatasync EIO is never acknowledged and fails with EXIT_CANTCREAT. */
static void test_ack_never_past_durable(void)
{
	struct fixture fx;
	if (fixture_load("dml", &fx) < 0) {
		CHECK(0);
		return;
	}
	uint64_t commits[8], ends[8];
	size_t n = fixture_commits(&fx, commits, ends, 8);
	CHECK(n == 4);
	struct stream_fs *fs = stream_fs_sim_new(1, 64 << 20);
	struct session s = { 0 };
	/* a sync after every transaction: the commit message itself syncs */
	struct capture_core_options o = options(fs, fx.proto_version, 1, 1000);
	CHECK(session_open(&s, fs, &o) == EXIT_OK);
	/* the first two transactions (messages up to the second Commit) */
	size_t second_commit = 0, seen = 0;
	for (size_t i = 0; i < fx.count && !second_commit; i++)
		if (fx.msgs[i][0] == 'C' && ++seen == 2)
			second_commit = i;
	CHECK(feed_range(&s, &fx, 0, second_commit + 1) == EXIT_OK);
	CHECK(capture_core_status_due(s.cc, s.now_us));
	send_status(&s);
	CHECK(s.acked == ends[1]);
	CHECK(stream_recorded(fs, NULL) == ends[1]);
	/* the third transaction's fdatasync fails: its Commit returns 73,
	 * and nothing past the second is ever acknowledged */
	size_t third_commit = 0;
	for (size_t i = second_commit + 1; i < fx.count && !third_commit; i++)
		if (fx.msgs[i][0] == 'C')
			third_commit = i;
	CHECK(feed_range(&s, &fx, second_commit + 1, third_commit) == EXIT_OK);
	stream_fs_sim_inject(fs, SIM_OP_FDATASYNC, 1, EIO);
	CHECK(feed_xlog(&s, fx.msgs[third_commit], fx.lens[third_commit], fx.lsns[third_commit]) == EXIT_CANTCREAT);
	send_status(&s);
	CHECK(s.acked == ends[1]);
	CHECK(capture_core_stats(s.cc).durable_lsn == ends[1]);
	/* the writer is poisoned: no later flush acknowledges anything */
	CHECK(capture_core_flush(s.cc, s.now_us, s.wall_us) == EXIT_CANTCREAT);
	send_status(&s);
	CHECK(s.acked == ends[1] && s.acked < ends[2]);
	CHECK(stream_recorded(fs, NULL) == ends[1]);
	CHECK(s.violations == 0);
	session_close(&s);
	stream_fs_sim_free(fs);
	fixture_free(&fx);
}

/* A keepalive on an idle stream: its position is recorded by a durable
 * watermark before the status update acknowledges it.  Inside an open
 * transaction nothing is recorded. */
static void test_keepalive_watermark(void)
{
	struct fixture fx;
	if (fixture_load("dml", &fx) < 0) {
		CHECK(0);
		return;
	}
	uint64_t commits[8], ends[8];
	CHECK(fixture_commits(&fx, commits, ends, 8) == 4);
	struct stream_fs *fs = stream_fs_sim_new(2, 64 << 20);
	struct session s = { 0 };
	struct capture_core_options o = options(fs, fx.proto_version, 1000, 1000);
	CHECK(session_open(&s, fs, &o) == EXIT_OK);
	size_t first_commit = 0;
	while (fx.msgs[first_commit][0] != 'C')
		first_commit++;
	CHECK(feed_range(&s, &fx, 0, first_commit + 1) == EXIT_OK);
	/* group commit: the batch may wait a moment, nothing is acknowledged */
	CHECK(capture_core_quiet(s.cc, s.now_us) == CAPTURE_CORE_WAIT);
	send_status(&s);
	CHECK(s.acked == 0);
	CHECK(idle(&s) == EXIT_OK);
	CHECK(s.acked == ends[0]);
	/* a keepalive asking for a reply on the idle stream */
	uint64_t wal_end = ends[0] + 0x1000, watermark;
	CHECK(feed_keepalive(&s, wal_end, true) == EXIT_OK);
	CHECK(s.statuses == 3 && s.acked == wal_end);
	CHECK(stream_recorded(fs, &watermark) == wal_end && watermark == wal_end);
	CHECK(capture_core_stats(s.cc).watermarks == 1);
	/* inside a transaction (Begin received, no Commit): not recorded */
	CHECK(feed_xlog(&s, fx.msgs[first_commit + 1], fx.lens[first_commit + 1], fx.lsns[first_commit + 1]) == EXIT_OK);
	CHECK(fx.msgs[first_commit + 1][0] == 'B');
	CHECK(feed_keepalive(&s, wal_end + 0x1000, true) == EXIT_OK);
	CHECK(s.statuses == 4 && s.acked == wal_end);
	CHECK(capture_core_stats(s.cc).watermarks == 1);
	CHECK(s.violations == 0);
	session_close(&s);
	stream_fs_sim_free(fs);
	fixture_free(&fx);
}

/* verify's fence (DESIGN §9): a transaction holding only a
 * trellara.fence message is recorded by a durable watermark at its end at
 * once, before any quiet moment, and written as no transaction. */
static void test_fence_message(void)
{
	struct fixture fx;
	if (fixture_load("dml", &fx) < 0) {
		CHECK(0);
		return;
	}
	uint64_t commits[8], ends[8];
	CHECK(fixture_commits(&fx, commits, ends, 8) == 4);
	struct stream_fs *fs = stream_fs_sim_new(2, 64 << 20);
	struct session s = { 0 };
	struct capture_core_options o = options(fs, fx.proto_version, 1000, 1000);
	CHECK(session_open(&s, fs, &o) == EXIT_OK);
	size_t first_commit = 0;
	while (fx.msgs[first_commit][0] != 'C')
		first_commit++;
	CHECK(feed_range(&s, &fx, 0, first_commit + 1) == EXIT_OK);
	CHECK(idle(&s) == EXIT_OK);
	uint64_t frames = capture_core_stats(s.cc).frames, watermark;
	/* Begin, Message, Commit of pgoutput, as the server sends them */
	uint64_t fence_lsn = ends[0] + 0x100, commit_lsn = fence_lsn + 0x40, end_lsn = commit_lsn + 0x30;
	const char *prefix = "trellara.fence", *content = "trellara-verify fence";
	uint8_t b[21] = { 'B' }, m[64] = { 'M', 1 }, c[26] = { 'C', 0 };
	put_be64(b + 1, commit_lsn);
	put_be64(b + 9, 0);
	b[20] = 77; /* xid 77 */
	put_be64(m + 2, fence_lsn);
	memcpy(m + 10, prefix, strlen(prefix) + 1);
	size_t mlen = 10 + strlen(prefix) + 1;
	m[mlen + 3] = (uint8_t)strlen(content); /* big-endian u32 length */
	memcpy(m + mlen + 4, content, strlen(content));
	mlen += 4 + strlen(content);
	put_be64(c + 2, commit_lsn);
	put_be64(c + 10, end_lsn);
	put_be64(c + 18, 0);
	CHECK(feed_xlog(&s, b, 21, fence_lsn) == EXIT_OK);
	CHECK(feed_xlog(&s, m, mlen, fence_lsn) == EXIT_OK);
	CHECK(feed_xlog(&s, c, sizeof c, commit_lsn) == EXIT_OK);
	/* durable already: no idle() in between */
	CHECK(stream_recorded(fs, &watermark) == end_lsn && watermark == end_lsn);
	CHECK(capture_core_stats(s.cc).frames == frames + 1 && capture_core_stats(s.cc).watermarks == 1);
	CHECK(capture_core_stats(s.cc).transactions == 1);
	send_status(&s);
	CHECK(s.acked == end_lsn && s.violations == 0);
	session_close(&s);
	stream_fs_sim_free(fs);
	fixture_free(&fx);
}

/* A kill of capture's process (a view's kill -9, or a kill then power
 * loss of the whole disk), a reopen, and the server sending everything
 * again: commits up to the stream's last are skipped and counted, the
 * rest appended, every commit once in the stream. */
static void test_restart_skips_resent(bool power_loss)
{
	struct fixture fx;
	if (fixture_load("truncate", &fx) < 0) {
		CHECK(0);
		return;
	}
	uint64_t commits[8], ends[8];
	size_t n = fixture_commits(&fx, commits, ends, 8);
	CHECK(n == 4);
	struct stream_fs *disk = stream_fs_sim_new(power_loss ? 4 : 3, 64 << 20);
	struct stream_fs *fs = stream_fs_sim_view(disk);
	struct session s = { 0 };
	struct capture_core_options o = options(fs, fx.proto_version, 1000, 1000);
	CHECK(session_open(&s, fs, &o) == EXIT_OK);
	/* another process cannot open the stream while this one writes */
	struct capture_core *other = NULL;
	struct stream_fs *fs2 = stream_fs_sim_view(disk);
	struct capture_core_options o2 = options(fs2, fx.proto_version, 1000, 1000);
	CHECK(capture_core_open(&other, &o2) == EXIT_TEMPFAIL);
	capture_core_close(other);
	/* two transactions durable and acknowledged, the third received */
	size_t commit_at[8], k = 0;
	for (size_t i = 0; i < fx.count; i++)
		if (fx.msgs[i][0] == 'C')
			commit_at[k++] = i;
	CHECK(feed_range(&s, &fx, 0, commit_at[1] + 1) == EXIT_OK);
	CHECK(idle(&s) == EXIT_OK);
	CHECK(s.acked == ends[1]);
	CHECK(feed_range(&s, &fx, commit_at[1] + 1, commit_at[2] + 1) == EXIT_OK);
	/* kill -9 before the third one's fdatasync */
	if (power_loss) {
		stream_fs_sim_kill(fs);
		CHECK(capture_core_flush(s.cc, s.now_us, s.wall_us) == EXIT_CANTCREAT);
		session_close(&s);
		stream_fs_sim_crash(fs, SIM_CRASH_POWER, 17);
		stream_fs_sim_view_restart(disk); /* nothing else ran on it */
	} else {
		stream_fs_sim_view_kill(fs);
		CHECK(capture_core_flush(s.cc, s.now_us, s.wall_us) == EXIT_CANTCREAT);
		session_close(&s);
		stream_fs_sim_view_restart(fs);
	}
	uint64_t before[8];
	CHECK(stream_commits(fs, before, 8) == 2);
	/* the restart: the slot confirmed nothing, the server sends all */
	CHECK(session_open(&s, fs, &o) == EXIT_OK);
	struct capture_core_stats st = capture_core_stats(s.cc);
	CHECK(st.stream_last_commit_lsn == commits[1]);
	CHECK(st.durable_lsn == ends[1]);
	CHECK(feed_range(&s, &fx, 0, fx.count) == EXIT_OK);
	CHECK(idle(&s) == EXIT_OK);
	st = capture_core_stats(s.cc);
	CHECK(st.skipped_duplicates == 2);
	CHECK(st.transactions == 2);
	CHECK(s.acked == ends[3]);
	/* once more, resent from the slot's confirmed position: all four skipped */
	capture_core_reconnected(s.cc);
	CHECK(feed_range(&s, &fx, 0, fx.count) == EXIT_OK);
	CHECK(idle(&s) == EXIT_OK);
	CHECK(capture_core_stats(s.cc).skipped_duplicates == 6);
	CHECK(capture_core_stats(s.cc).transactions == 2);
	/* read back: every commit exactly once, in commit order */
	uint64_t got[16];
	size_t m = stream_commits(fs, got, 16);
	CHECK(m == n);
	for (size_t i = 0; i < n && i < m; i++)
		CHECK(got[i] == commits[i]);
	CHECK(s.violations == 0);
	session_close(&s);
	stream_fs_sim_free(disk);
	fixture_free(&fx);
}

/* A streamed transaction of thousands of messages with small batches:
 * chunks are synced as they go, keepalives arrive inside it, the status
 * interval is checked every CAPTURE_STATUS_CHECK_MESSAGES messages; no
 * status update acknowledges the transaction before its commit is
 * durable. */
static void test_big_transaction(void)
{
	struct fixture fx;
	if (fixture_load("stream_commit", &fx) < 0) {
		CHECK(0);
		return;
	}
	struct stream_fs *fs = stream_fs_sim_new(5, 256 << 20);
	struct session s = { 0 };
	struct capture_core_options o = options(fs, fx.proto_version, 1000, 16);
	o.ack.status_interval_us = 1000; /* the periodic check fires */
	o.assembler.target_frame_payload = 4096; /* the chunked form, many chunks */
	CHECK(session_open(&s, fs, &o) == EXIT_OK);
	uint64_t last_lsn = 0;
	for (size_t i = 0; i < fx.count; i++) {
		CHECK(feed_xlog(&s, fx.msgs[i], fx.lens[i], fx.lsns[i]) == EXIT_OK);
		if (fx.lsns[i] > last_lsn)
			last_lsn = fx.lsns[i];
		if (i % 97 == 0)
			CHECK(feed_keepalive(&s, last_lsn, i % 2 == 0) == EXIT_OK);
	}
	CHECK(idle(&s) == EXIT_OK);
	struct capture_core_stats st = capture_core_stats(s.cc);
	CHECK(st.transactions == 1);
	/* chunks, a manifest, a commit marker: more than one batch holds,
	 * so chunks were synced on the way */
	CHECK(st.frames > o.ack.max_batch_messages);
	CHECK(s.statuses > 4);      /* the periodic check and the keepalives */
	CHECK(s.acked == st.durable_lsn && s.acked > 0);
	uint64_t got[4];
	CHECK(stream_commits(fs, got, 4) == 1 && got[0] == st.stream_last_commit_lsn);
	CHECK(s.violations == 0);
	session_close(&s);
	stream_fs_sim_free(fs);
	fixture_free(&fx);
}

/* ---- a caller-opened sink ---- */

/* A sink in memory, as a broker holds a stream: frames are durable once
 * a sync returned; fail_sync makes the next sync fail and poisons it. */
struct mem_frame {
	int type;
	uint8_t *payload; /* owned */
	size_t len;
};
struct mem_sink {
	struct mem_frame frames[256];
	size_t count, durable; /* frames[0, durable) survived */
	bool fail_sync, poisoned, closed;
};

static int mem_append(void *impl, int type, const uint8_t *payload, size_t len)
{
	struct mem_sink *m = impl;
	if (m->poisoned || m->count == 256)
		return -1;
	m->frames[m->count++] = (struct mem_frame){ type, xmalloc(len ? len : 1), len };
	memcpy(m->frames[m->count - 1].payload, payload, len);
	return 0;
}

static size_t mem_pending(const void *impl)
{
	const struct mem_sink *m = impl;
	return m->count - m->durable;
}

static int mem_sync(void *impl)
{
	struct mem_sink *m = impl;
	if (m->fail_sync)
		m->poisoned = true;
	if (m->poisoned)
		return -1;
	m->durable = m->count;
	return 0;
}

/* What survives: the durable frames; the sink is closed by the core. */
static void mem_close(void *impl)
{
	struct mem_sink *m = impl;
	for (size_t i = m->durable; i < m->count; i++)
		free(m->frames[i].payload);
	m->count = m->durable;
	m->closed = true;
}

static const struct capture_sink_ops mem_ops = { mem_append, mem_pending, mem_sync, mem_close };

/* The restart point of what the sink holds, as a broker-side reader
 * computes it: every frame through capture_core_restart_point_add_frame. */
static struct ack_restart_point mem_restart_point(const struct mem_sink *m)
{
	struct ack_restart_point rp = { 0 };
	for (size_t i = 0; i < m->durable; i++) {
		bool committed;
		CHECK(capture_core_restart_point_add_frame(&rp, m->frames[i].type, m->frames[i].payload,
							   m->frames[i].len, i, &committed) == 0);
	}
	return rp;
}

/* The highest position the sink's durable frames record. */
static uint64_t mem_recorded(const struct mem_sink *m)
{
	uint64_t recorded = 0;
	for (size_t i = 0; i < m->durable; i++) {
		int t = m->frames[i].type;
		struct env_frame_summary sum;
		char err[256];
		if (t != FRAME_TXN && t != FRAME_COMMIT_MARKER && t != FRAME_WATERMARK)
			continue;
		if (env_frame_summary(t, m->frames[i].payload, m->frames[i].len, &sum, err, sizeof err) < 0)
			continue;
		uint64_t lsn = t == FRAME_WATERMARK ? sum.lsn : sum.end_lsn;
		if (lsn > recorded)
			recorded = lsn;
	}
	return recorded;
}

static size_t mem_commits(const struct mem_sink *m, uint64_t *commits, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < m->durable; i++) {
		int t = m->frames[i].type;
		if (t != FRAME_TXN && t != FRAME_COMMIT_MARKER)
			continue;
		struct env_frame_summary sum;
		char err[256];
		CHECK(env_frame_summary(t, m->frames[i].payload, m->frames[i].len, &sum, err, sizeof err) == 0);
		if (n < max)
			commits[n++] = sum.commit_lsn;
	}
	return n;
}

/* A sink handed to the core: frames go to it and nowhere else, nothing
 * is acknowledged past its last good sync, a failed sync poisons it
 * (EXIT_CANTCREAT), and a restart from the restart point summarised from
 * its frames skips what it holds: every commit once, in commit order. */
static void test_caller_sink(void)
{
	struct fixture fx;
	if (fixture_load("truncate", &fx) < 0) {
		CHECK(0);
		return;
	}
	uint64_t commits[8], ends[8];
	CHECK(fixture_commits(&fx, commits, ends, 8) == 4);
	size_t commit_at[8], k = 0;
	for (size_t i = 0; i < fx.count; i++)
		if (fx.msgs[i][0] == 'C')
			commit_at[k++] = i;
	struct stream_fs *fs = stream_fs_sim_new(7, 64 << 20);
	struct mem_sink *m = xcalloc(1, sizeof *m);
	struct session s = { .mem = m };
	struct capture_core_options o = options(fs, fx.proto_version, 1, 1000);
	o.sink = (struct capture_sink){ &mem_ops, m };
	o.sink_name = "memory";
	CHECK(session_open(&s, fs, &o) == EXIT_OK);
	CHECK(capture_core_stats(s.cc).durable_lsn == 0);
	CHECK(feed_range(&s, &fx, 0, commit_at[1] + 1) == EXIT_OK);
	CHECK(idle(&s) == EXIT_OK);
	CHECK(s.acked == ends[1] && m->durable > 0 && m->durable == m->count);
	/* the local stream was never touched */
	uint64_t *bases = NULL;
	size_t nb = 0;
	CHECK(stream_segment_bases_fs(fs, DIR, &bases, &nb) != STREAM_OK || nb == 0);
	free(bases);
	/* the third transaction's sync fails: not acknowledged, poisoned */
	m->fail_sync = true;
	CHECK(feed_range(&s, &fx, commit_at[1] + 1, commit_at[2] + 1) == EXIT_CANTCREAT);
	m->fail_sync = false;
	CHECK(capture_core_flush(s.cc, s.now_us, s.wall_us) == EXIT_CANTCREAT);
	uint8_t st[CAPTURE_STATUS_MESSAGE_LEN];
	capture_core_status_message(s.cc, st, s.wall_us, false);
	CHECK(get_be64(st + 9) == ends[1]);
	session_close(&s);
	CHECK(m->closed && m->count == m->durable);
	/* restart from what the sink holds; the server sends everything */
	m->poisoned = m->closed = false;
	o.sink = (struct capture_sink){ &mem_ops, m };
	o.sink_restart = mem_restart_point(m);
	o.sink_next_offset = m->durable;
	CHECK(o.sink_restart.last_commit_lsn == commits[1]);
	CHECK(session_open(&s, fs, &o) == EXIT_OK);
	CHECK(capture_core_stats(s.cc).stream_last_commit_lsn == commits[1]);
	CHECK(capture_core_stats(s.cc).next_offset == m->durable);
	CHECK(feed_range(&s, &fx, 0, fx.count) == EXIT_OK);
	CHECK(idle(&s) == EXIT_OK);
	CHECK(capture_core_stats(s.cc).skipped_duplicates == 2);
	CHECK(capture_core_stats(s.cc).transactions == 2);
	CHECK(s.acked == ends[3]);
	CHECK(s.violations == 0);
	session_close(&s);
	uint64_t got[16];
	size_t n = mem_commits(m, got, 16);
	CHECK(n == 4);
	for (size_t i = 0; i < n && i < 4; i++)
		CHECK(got[i] == commits[i]);
	for (size_t i = 0; i < m->count; i++)
		free(m->frames[i].payload);
	free(m);
	stream_fs_sim_free(fs);
	fixture_free(&fx);
}

/* Malformed input is EXIT_DATAERR, an unknown message type is ignored. */
static void test_malformed(void)
{
	struct stream_fs *fs = stream_fs_sim_new(6, 64 << 20);
	struct session s = { 0 };
	struct capture_core_options o = options(fs, 2, 1000, 1000);
	CHECK(session_open(&s, fs, &o) == EXIT_OK);
	uint8_t shortw[10] = { 'w' };
	CHECK(feed(&s, shortw, sizeof shortw) == EXIT_DATAERR);
	uint8_t shortk[10] = { 'k' };
	CHECK(feed(&s, shortk, sizeof shortk) == EXIT_DATAERR);
	uint8_t unknown[4] = { 'x', 1, 2, 3 };
	CHECK(feed(&s, unknown, sizeof unknown) == EXIT_OK);
	uint8_t garbage[3] = { 'Z', 0, 0 };
	CHECK(feed_xlog(&s, garbage, sizeof garbage, 0x100) == EXIT_DATAERR);
	session_close(&s);
	stream_fs_sim_free(fs);
}

int main(void)
{
	log_setup("test_capture_core", 0);
	snprintf(spill_dir, sizeof spill_dir, "/tmp/trellara-capture-core-XXXXXX");
	if (!mkdtemp(spill_dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_ack_never_past_durable();
	test_keepalive_watermark();
	test_fence_message();
	test_restart_skips_resent(false);
	test_restart_skips_resent(true);
	test_big_transaction();
	test_malformed();
	test_caller_sink();
	rmdir(spill_dir);
	return unit_done("capture_core");
}
