/*
 * jetstream_publish - a test driver for tests/bats/66-jetstream.bats: puts
 * a JetStream stream, messages and a consumer in the state a test needs,
 * and reads back what trellara-capture published
 * (tests/bats/67-jetstream-capture.bats).
 *
 *   jetstream_publish URLS create STREAM SUBJECT REPLICAS old|new MAX_AGE_SECONDS
 *       creates a stream with these settings (file storage, limits)
 *   jetstream_publish URLS publish SUBJECT N
 *       publishes N messages ("message 1" ...), each acknowledged (PubAck);
 *       each has a Nats-Msg-Id ("SUBJECT-i") and is published again, for
 *       up to 15 s, while there is no answer (a leader being elected): the
 *       server drops a second copy as a duplicate
 *   jetstream_publish URLS ack STREAM SUBJECT CONSUMER K
 *       creates durable pull consumer CONSUMER (explicit ack) if needed,
 *       fetches K messages and acknowledges each (synchronously)
 *   jetstream_publish URLS delete STREAM
 *       deletes STREAM (as an operator's mistake would)
 *   jetstream_publish URLS dump STREAM
 *       reads every message of STREAM by sequence (js get-message) and
 *       decodes it as a trellara frame: one JSON object a line, {"seq",
 *       "offset", "type", "xid", "commit_lsn", "end_lsn", "lsn", "bytes",
 *       "compressed", "payload_bytes"} (the LSNs as numbers, 0 where the
 *       type has none; bytes the message's, payload_bytes the payload's
 *       once inflated); exits 1 at a message that is not a valid frame
 *       (bad header or CRC, a compressed payload that does not inflate, or
 *       an offset that is not its sequence - 1)
 *
 * URLS: one server URL or several, comma-separated.  Exits 0, or 1 with
 * the error on stderr.
 */
#include "trellara/envelope.h"
#include "trellara/stream.h"

#include <inttypes.h>
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, natsStatus st, jsErrCode jerr)
{
	fprintf(stderr, "jetstream_publish: %s: %s (JetStream error %d): %s\n", what, natsStatus_GetText(st), (int)jerr,
		nats_GetLastError(NULL));
	return 1;
}

static int create(jsCtx *js, char **argv)
{
	jsStreamConfig sc;
	jsStreamConfig_Init(&sc);
	const char *subjects[] = { argv[1] };
	sc.Name = argv[0];
	sc.Subjects = subjects;
	sc.SubjectsLen = 1;
	sc.Storage = js_FileStorage;
	sc.Replicas = atoi(argv[2]);
	sc.Discard = strcmp(argv[3], "new") == 0 ? js_DiscardNew : js_DiscardOld;
	sc.MaxAge = (int64_t)atoll(argv[4]) * 1000000000;
	jsStreamInfo *si = NULL;
	jsErrCode jerr = 0;
	natsStatus st = js_AddStream(&si, js, &sc, NULL, &jerr);
	if (st != NATS_OK)
		return fail("create", st, jerr);
	jsStreamInfo_Destroy(si);
	return 0;
}

static int publish(jsCtx *js, char **argv)
{
	int n = atoi(argv[1]);
	for (int i = 1; i <= n; i++) {
		char body[64];
		int len = snprintf(body, sizeof body, "message %d", i);
		char id[256];
		snprintf(id, sizeof id, "%s-%d", argv[0], i);
		jsPubOptions po;
		jsPubOptions_Init(&po);
		po.MsgId = id;
		po.MaxWait = 2000;
		jsPubAck *pa = NULL;
		jsErrCode jerr = 0;
		natsStatus st;
		for (int attempt = 0;; attempt++) {
			st = js_Publish(&pa, js, argv[0], body, len, &po, &jerr);
			if (st == NATS_OK || attempt == 30 || (st != NATS_TIMEOUT && st != NATS_NO_RESPONDERS))
				break;
			nats_Sleep(500);
		}
		if (st != NATS_OK)
			return fail("publish", st, jerr);
		jsPubAck_Destroy(pa);
	}
	return 0;
}

static int ack(jsCtx *js, char **argv)
{
	int k = atoi(argv[3]), acked = 0;
	jsSubOptions so;
	jsSubOptions_Init(&so);
	so.Stream = argv[0];
	so.Config.AckPolicy = js_AckExplicit;
	natsSubscription *sub = NULL;
	jsErrCode jerr = 0;
	natsStatus st = js_PullSubscribe(&sub, js, argv[1], argv[2], NULL, &so, &jerr);
	if (st != NATS_OK)
		return fail("pull subscribe", st, jerr);
	while (acked < k) {
		natsMsgList list = { 0 };
		st = natsSubscription_Fetch(&list, sub, k - acked, 5000, &jerr);
		if (st != NATS_OK) {
			natsSubscription_Destroy(sub);
			return fail("fetch", st, jerr);
		}
		for (int i = 0; i < list.Count; i++) {
			if (st == NATS_OK)
				st = natsMsg_AckSync(list.Msgs[i], NULL, &jerr);
			acked++;
		}
		natsMsgList_Destroy(&list);
		if (st != NATS_OK) {
			natsSubscription_Destroy(sub);
			return fail("ack", st, jerr);
		}
	}
	natsSubscription_Destroy(sub);
	return 0;
}

static int delete_stream(jsCtx *js, char **argv)
{
	jsErrCode jerr = 0;
	natsStatus st = js_DeleteStream(js, argv[0], NULL, &jerr);
	return st == NATS_OK ? 0 : fail("delete", st, jerr);
}

static int dump(jsCtx *js, char **argv)
{
	jsStreamInfo *si = NULL;
	jsErrCode jerr = 0;
	natsStatus st = js_GetStreamInfo(&si, js, argv[0], NULL, &jerr);
	if (st != NATS_OK)
		return fail("stream info", st, jerr);
	uint64_t first = si->State.FirstSeq, last = si->State.LastSeq;
	jsStreamInfo_Destroy(si);
	struct frame_buffer inflated = { 0 }; /* owned: a compressed payload inflated */
	for (uint64_t seq = first; seq && seq <= last; seq++) {
		natsMsg *m = NULL;
		st = js_GetMsg(&m, js, argv[0], seq, NULL, &jerr);
		if (st != NATS_OK) {
			frame_buffer_free(&inflated);
			return fail("get message", st, jerr);
		}
		const uint8_t *data = (const uint8_t *)natsMsg_GetData(m);
		size_t len = (size_t)natsMsg_GetDataLength(m);
		struct frame_header h;
		const char *reason = "shorter than a frame header";
		struct env_frame_summary sum = { 0 };
		char err[256];
		bool ok = len >= FRAME_HEADER_SIZE && frame_decode_header(data, &h, &reason);
		if (ok && (FRAME_HEADER_SIZE + (size_t)h.payload_length != len ||
			   !frame_check_crc(data, data + FRAME_HEADER_SIZE, h.payload_length))) {
			ok = false;
			reason = "bad length or checksum";
		}
		if (ok && h.offset != seq - 1) {
			ok = false;
			reason = "offset is not sequence - 1";
		}
		const uint8_t *payload = NULL;
		bool compressed = false;
		const char *bad = ok ? frame_payload_decode(&h, data + FRAME_HEADER_SIZE, &inflated, &payload, &compressed) : NULL;
		if (bad) {
			ok = false;
			reason = bad;
		}
		if (ok && h.type != FRAME_DDL &&
		    env_frame_summary(h.type, payload, h.payload_length, &sum, err, sizeof err) < 0) {
			ok = false;
			reason = err;
		}
		if (!ok) {
			fprintf(stderr, "jetstream_publish: message %" PRIu64 ": not a valid frame: %s\n", seq, reason);
			natsMsg_Destroy(m);
			frame_buffer_free(&inflated);
			return 1;
		}
		natsMsg_Destroy(m);
		printf("{\"seq\":%" PRIu64 ",\"offset\":%" PRIu64 ",\"type\":\"%s\",\"xid\":%" PRIu32
		       ",\"commit_lsn\":%" PRIu64 ",\"end_lsn\":%" PRIu64 ",\"lsn\":%" PRIu64
		       ",\"bytes\":%zu,\"compressed\":%s,\"payload_bytes\":%" PRIu32 "}\n",
		       seq, h.offset, frame_type_name(h.type), sum.has_xid ? sum.xid : 0, sum.commit_lsn, sum.end_lsn, sum.lsn,
		       len, compressed ? "true" : "false", h.payload_length);
	}
	frame_buffer_free(&inflated);
	return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int nargs;
		int (*run)(jsCtx *, char **);
	} commands[] = { { "create", 5, create }, { "publish", 2, publish }, { "ack", 4, ack }, { "dump", 1, dump },
			{ "delete", 1, delete_stream } };
	int code = 2;
	for (size_t i = 0; argc >= 3 && i < sizeof commands / sizeof *commands; i++)
		if (strcmp(argv[2], commands[i].name) == 0 && argc == 3 + commands[i].nargs)
			code = -1;
	if (code == 2) {
		fputs("usage: jetstream_publish URLS create STREAM SUBJECT REPLICAS old|new MAX_AGE_SECONDS\n"
		      "       jetstream_publish URLS publish SUBJECT N\n"
		      "       jetstream_publish URLS ack STREAM SUBJECT CONSUMER K\n"
		      "       jetstream_publish URLS dump STREAM\n"
		      "       jetstream_publish URLS delete STREAM\n",
		      stderr);
		return 2;
	}
	natsConnection *nc = NULL;
	jsCtx *js = NULL;
	natsStatus st = natsConnection_ConnectTo(&nc, argv[1]);
	if (st == NATS_OK)
		st = natsConnection_JetStream(&js, nc, NULL);
	if (st != NATS_OK)
		code = fail("connect", st, 0);
	for (size_t i = 0; st == NATS_OK && i < sizeof commands / sizeof *commands; i++)
		if (strcmp(argv[2], commands[i].name) == 0)
			code = commands[i].run(js, argv + 3);
	if (js)
		jsCtx_Destroy(js);
	if (nc)
		natsConnection_Destroy(nc);
	nats_Close();
	return code;
}
