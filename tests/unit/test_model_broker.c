/*
 * test_model_broker.c - the simulator's broker model (sim/model_broker.h)
 * answers as a JetStream stream of three replicas does, and its clients
 * (sim/model_broker_client.h) follow capture's JetStream sink and
 * applyd's JetStream source:
 *   - a publish is acknowledged only once a majority holds it; the
 *     expected last sequence is enforced; a repeated Nats-Msg-Id within
 *     the window is answered with the original's sequence, not stored;
 *   - one node down: publishes go on; two down: the leader stores alone
 *     without a PubAck, answers reads until it steps down, then nothing
 *     answers; back: the most up-to-date node leads, replicas catch up
 *     (a few messages per tick), an uncommitted tail is committed or
 *     dropped, never a committed message;
 *   - injected failures: refused (nothing stored), PubAck lost (stored);
 *   - the sink holds back (sync 1) while the quorum is lost and keeps its
 *     frames, stores them once it is back, and a restart reads the
 *     stream's end; the source reads frames at dense offsets and says
 *     STREAM_EUNAVAILABLE without a leader.
 */
#include "model_broker.h"
#include "model_broker_client.h"
#include "unit.h"

#include "trellara/envelope.h"
#include "trellara/stream.h"
#include "trellara/stream_fs.h"

#include <stdio.h>
#include <string.h>

static struct model_broker *new_broker(size_t catchup)
{
	struct model_broker_options o;
	model_broker_options_default(&o);
	if (catchup)
		o.catchup_per_tick = catchup;
	return model_broker_new(&o);
}

/* Publishes "m<i>" with id "f:<i>", expecting last sequence i. */
static enum model_broker_answer pub(struct model_broker *b, uint64_t i, int64_t now, uint64_t *seq)
{
	char data[32], id[32];
	snprintf(data, sizeof data, "m%llu", (unsigned long long)i);
	snprintf(id, sizeof id, "f:%llu", (unsigned long long)i);
	return model_broker_publish(b, (const uint8_t *)data, strlen(data), id, i, now, seq);
}

static uint64_t last_seq(const struct model_broker *b)
{
	uint64_t first = 0, last = 0;
	return model_broker_info(b, &first, &last) == 0 ? last : UINT64_MAX;
}

static void publish_tests(void)
{
	struct model_broker *b = new_broker(0);
	uint64_t seq;
	CHECK(model_broker_available(b));
	CHECK(model_broker_leader(b) >= 0);
	for (uint64_t i = 0; i < 3; i++) {
		CHECK(pub(b, i, 1000, &seq) == MODEL_BROKER_STORED);
		CHECK(seq == i + 1);
	}
	CHECK(last_seq(b) == 3);
	const uint8_t *data;
	size_t len;
	CHECK(model_broker_get(b, 2, &data, &len) == 1 && len == 2 && memcmp(data, "m1", 2) == 0);
	CHECK(model_broker_get(b, 4, &data, &len) == 0);
	/* a repeat within the window: the original's sequence, nothing stored */
	CHECK(model_broker_publish(b, (const uint8_t *)"other", 5, "f:1", 1, 2000, &seq) == MODEL_BROKER_DUPLICATE);
	CHECK(seq == 2);
	CHECK(last_seq(b) == 3);
	/* past the window it is a new message, which expects another last */
	CHECK(model_broker_publish(b, (const uint8_t *)"other", 5, "f:1", 1, 1000 + MODEL_BROKER_DEFAULT_WINDOW_US + 1,
				   &seq) == MODEL_BROKER_WRONG_LAST);
	CHECK(seq == 3);
	/* another writer's expectation */
	CHECK(pub(b, 7, 3000, &seq) == MODEL_BROKER_WRONG_LAST);
	CHECK(model_broker_stats(b)->duplicates == 1);
	CHECK(model_broker_error(b)[0] == '\0');

	/* injected failures */
	model_broker_fail_publishes(b, MODEL_BROKER_FAIL_REFUSE);
	CHECK(pub(b, 3, 4000, &seq) == MODEL_BROKER_REFUSED);
	CHECK(last_seq(b) == 3);
	model_broker_fail_publishes(b, MODEL_BROKER_FAIL_LOSE_ACK);
	CHECK(pub(b, 3, 4000, &seq) == MODEL_BROKER_TIMEOUT);
	CHECK(last_seq(b) == 4); /* stored and committed, its PubAck lost */
	model_broker_fail_publishes(b, MODEL_BROKER_FAIL_NONE);
	CHECK(pub(b, 3, 4001, &seq) == MODEL_BROKER_DUPLICATE && seq == 4);
	model_broker_free(b);
}

static void outage_tests(void)
{
	struct model_broker *b = new_broker(2);
	uint64_t seq;
	int leader = model_broker_leader(b);
	int f1 = (leader + 1) % 3, f2 = (leader + 2) % 3;
	CHECK(pub(b, 0, 1, &seq) == MODEL_BROKER_STORED);

	/* one follower down: a majority still stores */
	model_broker_node_down(b, f1);
	model_broker_tick(b);
	for (uint64_t i = 1; i < 6; i++)
		CHECK(pub(b, i, 1, &seq) == MODEL_BROKER_STORED && seq == i + 1);
	CHECK(model_broker_log_length(b, f1) == 1);
	/* back: it catches up two messages a tick */
	model_broker_node_up(b, f1);
	model_broker_tick(b);
	CHECK(model_broker_log_length(b, f1) == 3);
	model_broker_tick(b);
	model_broker_tick(b);
	CHECK(model_broker_log_length(b, f1) == 6);
	int holder;
	CHECK(model_broker_quorum_prefix(b, &holder) == 6);

	/* two followers down: the leader stores alone, no PubAck */
	model_broker_node_down(b, f1);
	model_broker_node_down(b, f2);
	model_broker_tick(b);
	CHECK(pub(b, 6, 2, &seq) == MODEL_BROKER_TIMEOUT);
	CHECK(pub(b, 7, 2, &seq) == MODEL_BROKER_TIMEOUT);
	CHECK(model_broker_log_length(b, leader) == 8);
	CHECK(model_broker_quorum_prefix(b, &holder) == 6);
	CHECK(last_seq(b) == 6); /* it still answers, with what is committed */
	/* its own repeat: not committed, so no PubAck */
	CHECK(pub(b, 6, 3, &seq) == MODEL_BROKER_TIMEOUT);
	for (int i = 0; i < 5; i++)
		model_broker_tick(b);
	CHECK(!model_broker_available(b));
	CHECK(pub(b, 8, 4, &seq) == MODEL_BROKER_NO_RESPONDERS);
	CHECK(last_seq(b) == UINT64_MAX);

	/* back: the lone leader's log is the most up to date; it leads
	 * again and its tail is committed with the next term */
	model_broker_node_up(b, f1);
	model_broker_node_up(b, f2);
	model_broker_tick(b);
	CHECK(model_broker_leader(b) == leader);
	CHECK(model_broker_committed(b) == 8);
	CHECK(pub(b, 6, 5, &seq) == MODEL_BROKER_DUPLICATE && seq == 7);
	CHECK(model_broker_error(b)[0] == '\0');

	/* the leader down with a tail of its own: the others lead, store
	 * other messages at those sequences; back, its tail is dropped */
	model_broker_tick(b);
	model_broker_tick(b); /* every replica caught up */
	leader = model_broker_leader(b);
	f1 = (leader + 1) % 3;
	f2 = (leader + 2) % 3;
	model_broker_node_down(b, f1);
	model_broker_node_down(b, f2);
	CHECK(pub(b, 8, 6, &seq) == MODEL_BROKER_TIMEOUT);
	model_broker_node_down(b, leader);
	model_broker_node_up(b, f1);
	model_broker_node_up(b, f2);
	CHECK(pub(b, 8, 6, &seq) == MODEL_BROKER_NO_RESPONDERS); /* the leader is down: nobody answers */
	model_broker_tick(b);
	int new_leader = model_broker_leader(b);
	CHECK(new_leader == f1 || new_leader == f2);
	CHECK(model_broker_publish(b, (const uint8_t *)"n8", 2, "g:8", 8, 7, &seq) == MODEL_BROKER_STORED && seq == 9);
	model_broker_node_up(b, leader);
	model_broker_tick(b);
	size_t len;
	const uint8_t *data = model_broker_log_entry(b, leader, 9, &len, NULL);
	CHECK(data && len == 2 && memcmp(data, "n8", 2) == 0);
	CHECK(model_broker_stats(b)->truncated >= 1);
	CHECK(model_broker_quorum_prefix(b, &holder) == 9);
	CHECK(model_broker_error(b)[0] == '\0');
	model_broker_free(b);
}

/* A frame's payload: a watermark at lsn (capture's restart point reads
 * it) */
static void watermark(struct buf *b, uint64_t lsn)
{
	env_encode_watermark(b, "sim", lsn, 0);
}

static void client_tests(void)
{
	struct model_broker *b = new_broker(0);
	struct stream_fs *disk = stream_fs_sim_new(1, 1 << 20);
	struct stream_fs *proc = stream_fs_sim_view(disk);
	int64_t now = 1000;
	struct capture_sink sink;
	struct ack_restart_point rp;
	uint64_t next;
	CHECK(model_broker_sink_open(b, proc, &now, "sim:flow", &sink, &rp, &next) == 0);
	CHECK(next == 0 && rp.durable_lsn == 0);
	struct buf w = { 0 };
	watermark(&w, 0x100);
	CHECK(sink.ops->append(sink.impl, FRAME_WATERMARK, w.data, w.len) == 0);
	CHECK(sink.ops->append(sink.impl, FRAME_WATERMARK, w.data, w.len) == 0);
	CHECK(sink.ops->pending(sink.impl) == 2);
	CHECK(sink.ops->sync(sink.impl) == 0);
	CHECK(sink.ops->pending(sink.impl) == 0);
	CHECK(model_broker_committed(b) == 2);

	/* the quorum lost: held back, the frames kept */
	int leader = model_broker_leader(b);
	model_broker_node_down(b, (leader + 1) % 3);
	model_broker_node_down(b, (leader + 2) % 3);
	CHECK(sink.ops->append(sink.impl, FRAME_WATERMARK, w.data, w.len) == 0);
	CHECK(sink.ops->sync(sink.impl) == 1);
	CHECK(sink.ops->pending(sink.impl) == 1);
	for (int i = 0; i < 5; i++)
		model_broker_tick(b);
	CHECK(sink.ops->sync(sink.impl) == 1);
	/* applyd: nothing answers */
	struct frame_source src;
	CHECK(model_broker_source_open(b, proc, &src) == STREAM_EUNAVAILABLE);
	/* back: the lone leader's copy is committed, the repeat is a duplicate */
	model_broker_node_up(b, (leader + 1) % 3);
	model_broker_node_up(b, (leader + 2) % 3);
	model_broker_tick(b);
	CHECK(sink.ops->sync(sink.impl) == 0);
	CHECK(sink.ops->pending(sink.impl) == 0);
	CHECK(model_broker_committed(b) == 3);
	CHECK(model_broker_stats(b)->duplicates == 1);

	/* the source: dense offsets from 0 */
	CHECK(model_broker_source_open(b, proc, &src) == STREAM_OK);
	CHECK(frame_source_seek(&src, 1) == STREAM_OK);
	struct stream_frame f;
	CHECK(frame_source_next(&src, &f) == STREAM_OK && f.header.offset == 1 && f.header.type == FRAME_WATERMARK);
	CHECK(frame_source_next(&src, &f) == STREAM_OK && f.header.offset == 2);
	CHECK(frame_source_next(&src, &f) == STREAM_END);
	CHECK(frame_source_seek(&src, 4) == STREAM_ERANGE);
	uint64_t pos = 9;
	bool exists = true;
	CHECK(frame_source_position_get(&src, &pos, &exists) == STREAM_OK && !exists);
	CHECK(frame_source_position_set(&src, 3) == STREAM_OK);
	CHECK(frame_source_position_get(&src, &pos, &exists) == STREAM_OK && exists && pos == 3);

	/* a killed process publishes and reads nothing more */
	stream_fs_sim_view_kill(proc);
	CHECK(sink.ops->append(sink.impl, FRAME_WATERMARK, w.data, w.len) == -1);
	CHECK(sink.ops->sync(sink.impl) == -1);
	CHECK(frame_source_next(&src, &f) == STREAM_EIO);
	sink.ops->close(sink.impl);
	frame_source_close(&src);
	stream_fs_sim_view_restart(proc);

	/* a restart reads the stream's end */
	CHECK(model_broker_sink_open(b, proc, &now, "sim:flow", &sink, &rp, &next) == 0);
	CHECK(next == 3 && rp.durable_lsn == 0x100);
	/* a second writer's expectation poisons the sink: nothing past it */
	uint64_t seq;
	CHECK(model_broker_publish(b, (const uint8_t *)"x", 1, "other:3", 3, now, &seq) == MODEL_BROKER_STORED);
	CHECK(sink.ops->append(sink.impl, FRAME_WATERMARK, w.data, w.len) == 0);
	CHECK(sink.ops->sync(sink.impl) == -1);
	CHECK(sink.ops->sync(sink.impl) == -1);
	sink.ops->close(sink.impl);
	/* ... and the foreign message is refused at the next start */
	CHECK(model_broker_sink_open(b, proc, &now, "sim:flow", &sink, &rp, &next) == 65);
	CHECK(model_broker_error(b)[0] == '\0');
	buf_free(&w);
	stream_fs_sim_free(proc);
	stream_fs_sim_free(disk);
	model_broker_free(b);
}

/* A host crash loses what the node's file store had not synced: with 3
 * replicas the others hold what was acknowledged (a new leader, the
 * crashed node catches up, no model error); with one replica it is gone
 * (acknowledged_lost, the stream cut); synced at every tick, nothing is. */
static void crash_tests(void)
{
	uint64_t seq;
	struct model_broker *b = new_broker(0);
	for (uint64_t i = 0; i < 5; i++)
		CHECK(pub(b, i, 1000, &seq) == MODEL_BROKER_STORED);
	int leader = model_broker_leader(b);
	model_broker_node_crash(b, leader);
	CHECK(model_broker_log_length(b, leader) == 0);
	CHECK(model_broker_stats(b)->crash_dropped == 5);
	model_broker_tick(b);
	CHECK(model_broker_leader(b) >= 0 && model_broker_leader(b) != leader);
	CHECK(last_seq(b) == 5);
	CHECK(model_broker_committed(b) == 5);
	CHECK(pub(b, 5, 2000, &seq) == MODEL_BROKER_STORED && seq == 6);
	model_broker_node_up(b, leader);
	model_broker_tick(b);
	CHECK(model_broker_log_length(b, leader) == 6);
	CHECK(model_broker_stats(b)->acknowledged_lost == 0);
	CHECK(model_broker_error(b)[0] == '\0');
	model_broker_free(b);

	struct model_broker_options o;
	model_broker_options_default(&o);
	o.nodes = 1;
	b = model_broker_new(&o);
	for (uint64_t i = 0; i < 3; i++)
		CHECK(pub(b, i, 1000, &seq) == MODEL_BROKER_STORED);
	model_broker_node_crash(b, 0);
	model_broker_tick(b);
	CHECK(!model_broker_available(b));
	model_broker_node_up(b, 0);
	model_broker_tick(b);
	CHECK(model_broker_available(b));
	CHECK(last_seq(b) == 0);
	CHECK(model_broker_committed(b) == 0);
	CHECK(model_broker_stats(b)->acknowledged_lost == 3);
	CHECK(model_broker_error(b)[0] == '\0');
	model_broker_free(b);

	o.sync_every_ticks = 1;
	b = model_broker_new(&o);
	for (uint64_t i = 0; i < 3; i++)
		CHECK(pub(b, i, 1000, &seq) == MODEL_BROKER_STORED);
	model_broker_tick(b);
	model_broker_node_crash(b, 0);
	model_broker_node_up(b, 0);
	model_broker_tick(b);
	CHECK(last_seq(b) == 3);
	CHECK(model_broker_stats(b)->acknowledged_lost == 0);
	model_broker_free(b);
}

int main(void)
{
	publish_tests();
	crash_tests();
	outage_tests();
	client_tests();
	return unit_done("test_model_broker");
}
