/*
 * test_model_source.c - the model source speaks pgoutput that the real
 * decoder and assembler accept, and its slot behaves as PostgreSQL's.
 *
 * For many seeds (random options: protocol 1 or 2, 1-4 tables, empty
 * transactions sent or skipped, chunked or single frames, LSNs across
 * the 4 GB line), a small capture loop like cmd/trellara-capture's
 * handle_xlogdata feeds every XLogData through pgoutput_session_decode
 * and assembler_feed, decodes the emitted frames (common/cdc/envelope.c)
 * and applies them to a fresh sim_db; it answers keepalives, sends
 * status updates with the last applied end LSN (or the keepalive's
 * walEnd when no transaction is open), disconnects and reconnects at
 * random, and promotes a lagging standby now and then.  It checks:
 *   - every message decodes; XLogData headers have dataStart = walEnd;
 *     send times never go back; keepalive walEnd never goes back within
 *     a session;
 *   - in each session the transactions arrive in commit order starting
 *     with the first whose commit LSN >= the slot's confirmed position
 *     (none missing, none extra; only empty ones may be skipped, and only
 *     when empty transactions are not sent), each with its xid and
 *     change count;
 *   - a transaction is applied once (the assembler skips what is already
 *     applied), and at the end the target equals
 *     model_source_state_at(last commit) and the workload's own state;
 *   - whenever it has caught up, the target equals
 *     model_source_state_at(last applied commit); at the end, state_at()
 *     at random earlier commits equals the target's state back then;
 *   - nothing is left open after the final drain (every stream ended);
 *   - the same seed gives the same bytes (digest), another seed others;
 *     the workload does not depend on how it is produced or read;
 *     protocol 3 and 4 (no two-phase, no parallel) send what 2 sends;
 *   - the slot by hand: resend after confirmed_flush, a later requested
 *     start, never backwards, crash restart to the last checkpoint,
 *     promotion lag, misuse refused; Relation, Begin and Commit bytes as
 *     the PostgreSQL 15 fixtures show them;
 *   - over all seeds, every kind of change and message occurred, also
 *     inside stream blocks.
 * A failure prints the seed; MODEL_SOURCE_SEED=N replays that seed alone.
 */
#include "model_source.h"
#include "sim_db.h"
#include "sim_rng.h"

#include "trellara/assembler.h"
#include "trellara/checksum.h"
#include "trellara/envelope.h"
#include "trellara/pgoutput.h"
#include "trellara/stream.h"
#include "trellara/xalloc.h"
#include "unit.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SEEDS 150

static char spill_dir[64];

struct frame {
	int type;
	uint8_t *data;
	size_t len;
};

struct client {
	uint64_t seed;
	struct model_source *ms;
	struct model_source_options o;
	struct sim_rng rng;
	struct pgoutput_session session;
	struct pgoutput_message msg;
	struct assembler *assembler;
	struct sim_db *target;
	uint64_t applied_commit, applied_end; /* the last applied transaction */
	uint64_t ack;          /* what the client has reported flushed */
	size_t expect;         /* the model log index the session must deliver next */
	uint64_t last_keepalive_end;
	int64_t last_send_time;
	struct frame *frames;
	size_t n_frames, frames_cap;
	uint64_t next_offset;        /* the stream offset of the next frame */
	struct frame *pending;       /* every pending chunk, kept for its manifest */
	uint64_t *pending_offset;
	size_t n_pending;
	uint64_t digest;
	bool failed;
	uint32_t cur_xid;
	uint64_t checkpoints;
	/* the target's digest after each applied transaction */
	uint64_t *history_lsn, *history_digest;
	size_t n_history;
	/* counts */
	uint64_t committed, skipped, empty, aborted, chunked, ddl_frames, reconnects, unchanged_toast, old_keys, origins;
	uint64_t written_once, pending_cuts; /* pending sets applied; chunks a subtransaction abort cut */
	uint64_t pending_aborts;
	uint64_t in_block[128]; /* messages decoded inside stream blocks, by type */
};

static int on_frame(void *ctx, int type, const uint8_t *payload, size_t len, uint64_t *offset)
{
	struct client *c = ctx;
	*offset = c->next_offset++;
	if (type == FRAME_PENDING_ABORT) {
		struct env_frame_summary s;
		char err[256];
		CHECK(env_frame_summary(type, payload, len, &s, err, sizeof err) == 0);
		c->pending_aborts++;
		return 0;
	}
	if (type == FRAME_PENDING_CHUNK) {
		c->pending = xrealloc(c->pending, (c->n_pending + 1) * sizeof *c->pending);
		c->pending_offset = xrealloc(c->pending_offset, (c->n_pending + 1) * sizeof *c->pending_offset);
		c->pending_offset[c->n_pending] = *offset;
		struct frame *f = &c->pending[c->n_pending++];
		f->type = type;
		f->len = len;
		f->data = xmalloc(len ? len : 1);
		memcpy(f->data, payload, len);
		return 0;
	}
	if (c->n_frames == c->frames_cap) {
		c->frames_cap = c->frames_cap ? 2 * c->frames_cap : 16;
		c->frames = xrealloc(c->frames, c->frames_cap * sizeof *c->frames);
	}
	struct frame *f = &c->frames[c->n_frames++];
	f->type = type;
	f->len = len;
	f->data = xmalloc(len ? len : 1);
	memcpy(f->data, payload, len);
	return 0;
}

static void frames_clear(struct client *c)
{
	for (size_t i = 0; i < c->n_frames; i++)
		free(c->frames[i].data);
	c->n_frames = 0;
}

#define FAIL(c, ...)                                                                   \
	do {                                                                           \
		unit_checks++;                                                         \
		unit_failures++;                                                       \
		fprintf(stderr, "%s:%d: seed %llu: ", __FILE__, __LINE__, (unsigned long long)(c)->seed); \
		fprintf(stderr, __VA_ARGS__);                                          \
		fputc('\n', stderr);                                                   \
		(c)->failed = true;                                                    \
	} while (0)

static uint64_t be64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static uint64_t fnv(uint64_t h, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001B3ULL;
	}
	return h;
}

/* ---- applying envelopes to the target ---- */

static char *value_of(const struct env_value *v)
{
	return v->kind == ENV_TEXT ? xstrndup((const char *)v->data, v->len) : NULL;
}

static int apply_env_change(struct client *c, const struct env_header *h, const struct env_change *ch)
{
	if (ch->op == ENV_MESSAGE)
		return 0;
	if (ch->op == ENV_TRUNCATE) {
		for (uint32_t i = 0; i < ch->n_truncate; i++) {
			const struct env_relation *r = &h->relations[ch->truncate_relations[i]];
			char *name = xasprintf("%.*s.%.*s", (int)r->schema_len, r->schema, (int)r->name_len, r->name);
			if (!sim_db_has_table(c->target, name))
				FAIL(c, "truncate of unknown table %s", name);
			sim_db_truncate(c->target, name);
			free(name);
		}
		return 0;
	}
	const struct env_relation *r = &h->relations[ch->relation];
	char *name = xasprintf("%.*s.%.*s", (int)r->schema_len, r->schema, (int)r->name_len, r->name);
	uint16_t n_key = 0;
	uint16_t n = sim_db_columns(c->target, name, &n_key, NULL);
	int rc = -1;
	if (n == 0 || n != r->n_columns || n > 8) {
		FAIL(c, "change for %s with %u columns: the target has %u", name, r->n_columns, n);
		goto out;
	}
	for (uint16_t k = 0; k < n; k++)
		if (r->columns[k].key != (k < n_key)) {
			FAIL(c, "%s: column %u key flag %d", name, k + 1, r->columns[k].key);
			goto out;
		}
	char *row[8] = { 0 }, *key[8] = { 0 };
	bool keep[8] = { 0 };
	const struct env_tuple *nt = &ch->new_tuple, *ot = &ch->old_tuple;
	if (ch->op != ENV_DELETE)
		for (uint16_t k = 0; k < n; k++) {
			row[k] = value_of(&nt->values[k]);
			keep[k] = nt->values[k].kind == ENV_UNCHANGED_TOAST;
			c->unchanged_toast += keep[k];
			if (keep[k] && ch->op != ENV_UPDATE)
				FAIL(c, "unchanged TOAST in a %c", ch->op);
		}
	const struct env_tuple *kt = ch->op == ENV_INSERT ? NULL : ch->old_kind == 'K' ? ot : nt;
	c->old_keys += ch->op == ENV_UPDATE && ch->old_kind == 'K';
	if (kt && ch->old_kind != 0 && ch->old_kind != 'K')
		FAIL(c, "old tuple kind %c under replica identity default", ch->old_kind);
	for (uint16_t k = 0; kt && k < n; k++) {
		if (k < n_key)
			key[k] = value_of(&kt->values[k]);
		else if (ch->old_kind == 'K' && kt->values[k].kind != ENV_NULL)
			FAIL(c, "old key of %s carries non-key column %u", name, k + 1);
	}
	struct sim_values kv = { (const char *const *)key, n_key }, rv = { (const char *const *)row, n };
	if (ch->op == ENV_INSERT)
		rc = sim_db_insert(c->target, name, rv);
	else if (ch->op == ENV_UPDATE)
		rc = sim_db_update(c->target, name, kv, rv, keep);
	else
		rc = sim_db_delete(c->target, name, kv);
	if (rc != 1)
		FAIL(c, "transaction %u: %c on %s key (%s,%s): affected %d rows", c->cur_xid, ch->op, name,
		     key[0] ? key[0] : "NULL", n_key > 1 && key[1] ? key[1] : "", rc);
	for (uint16_t k = 0; k < n; k++) {
		free(row[k]);
		free(key[k]);
	}
out:
	free(name);
	return rc == 1 ? 0 : -1;
}

/* Applies an envelope (a txn frame, or a chunk's after its index): at
 * most limit changes; a pending chunk's (pending) carries no commit. */
static uint64_t apply_envelope_part(struct client *c, const uint8_t *p, size_t len, uint32_t xid, uint64_t commit_lsn,
				    uint64_t limit, bool pending)
{
	struct env_decoder d;
	uint64_t n = 0;
	if (env_decode_begin(&d, p, len) < 0) {
		FAIL(c, "envelope: %s", d.error);
		env_decoder_free(&d);
		return 0;
	}
	const struct model_source_txn *t = c->expect ? model_source_txn(c->ms, c->expect - 1) : NULL;
	if (t && t->commit_lsn == commit_lsn) {
		size_t want = t->origin ? strlen(t->origin) : 0;
		if (d.header.origin_len != want || (want && memcmp(d.header.origin, t->origin, want) != 0))
			FAIL(c, "transaction %u: origin \"%.*s\", expected \"%s\"", xid, (int)d.header.origin_len,
			     d.header.origin ? d.header.origin : "", t->origin ? t->origin : "");
		else if (want)
			c->origins++;
	} else {
		FAIL(c, "envelope of %u is not the transaction just delivered", xid);
	}
	if (d.header.xid != xid || d.header.commit_lsn != (pending ? 0 : commit_lsn))
		FAIL(c, "envelope of xid %u commit %llx, expected %u %llx", d.header.xid,
		     (unsigned long long)d.header.commit_lsn, xid, (unsigned long long)commit_lsn);
	c->pending_cuts += limit < d.header.n_changes;
	if (d.header.n_changes < limit && limit != UINT64_MAX)
		FAIL(c, "transaction %u: a manifest uses %llu changes of a chunk holding %u", xid,
		     (unsigned long long)limit, d.header.n_changes);
	const struct env_change *ch;
	int rc = 0;
	while (n < limit && (rc = env_decode_next(&d, &ch)) == 1) {
		apply_env_change(c, &d.header, ch);
		n++;
	}
	if (rc < 0)
		FAIL(c, "envelope: %s", d.error);
	env_decoder_free(&d);
	return n;
}

static uint64_t apply_envelope(struct client *c, const uint8_t *p, size_t len, uint32_t xid, uint64_t commit_lsn)
{
	return apply_envelope_part(c, p, len, xid, commit_lsn, UINT64_MAX, false);
}

/* The pending chunks a version 2 manifest lists, read back by offset. */
static uint64_t apply_pending_set(struct client *c, const struct frame *mf, uint32_t *chunks)
{
	struct env_manifest m;
	char err[256];
	uint64_t changes = 0;
	if (env_decode_manifest(mf->data, mf->len, &m, err, sizeof err) < 0) {
		FAIL(c, "manifest: %s", err);
		return 0;
	}
	for (uint32_t k = 0; k < m.chunk_count; k++) {
		size_t lo = 0, hi = c->n_pending;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if (c->pending_offset[mid] < m.chunks[k].offset)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo == c->n_pending || c->pending_offset[lo] != m.chunks[k].offset) {
			FAIL(c, "transaction %u: manifest chunk %u at offset %llu: no pending chunk there", m.xid, k,
			     (unsigned long long)m.chunks[k].offset);
			continue;
		}
		const struct frame *f = &c->pending[lo];
		if (crc32c(0, f->data, f->len) != m.chunks[k].crc)
			FAIL(c, "transaction %u: pending chunk at offset %llu: checksum differs from the manifest's", m.xid,
			     (unsigned long long)m.chunks[k].offset);
		changes += apply_envelope_part(c, f->data + ENV_PENDING_HEAD_SIZE, f->len - ENV_PENDING_HEAD_SIZE, m.xid,
					       m.commit_lsn, m.chunks[k].changes, true);
		(*chunks)++;
	}
	if (changes != m.total_changes)
		FAIL(c, "transaction %u: %llu changes in use, the manifest says %llu", m.xid, (unsigned long long)changes,
		     (unsigned long long)m.total_changes);
	env_manifest_free(&m);
	return changes;
}

/* A committed transaction's frames: ddl frames, then one txn frame or
 * chunks, a manifest and a commit marker (or, written once, pending
 * chunks listed by the manifest, then its marker). */
static void apply_frames(struct client *c, const struct assembler_result *res)
{
	uint64_t changes = 0;
	uint32_t chunks = 0;
	bool marker = false;
	for (size_t i = 0; i < c->n_frames; i++) {
		const struct frame *f = &c->frames[i];
		struct env_frame_summary s;
		char err[256];
		if (env_frame_summary(f->type, f->data, f->len, &s, err, sizeof err) < 0) {
			FAIL(c, "%s frame: %s", frame_type_name(f->type), err);
			continue;
		}
		if (s.has_xid && s.xid != res->xid)
			FAIL(c, "%s frame of xid %u in transaction %u", frame_type_name(f->type), s.xid, res->xid);
		switch (f->type) {
		case FRAME_DDL:
			c->ddl_frames++;
			break;
		case FRAME_TXN:
			changes += apply_envelope(c, f->data, f->len, res->xid, res->commit_lsn);
			break;
		case FRAME_CHUNK:
			if (f->len < 4 || be64((const uint8_t[8]){ 0, 0, 0, 0, f->data[0], f->data[1], f->data[2], f->data[3] }) != chunks)
				FAIL(c, "chunk out of order");
			chunks++;
			changes += apply_envelope(c, f->data + 4, f->len - 4, res->xid, res->commit_lsn);
			break;
		case FRAME_MANIFEST:
			if (chunks == 0) {
				changes += apply_pending_set(c, f, &chunks);
				c->written_once++;
			}
			break;
		case FRAME_COMMIT_MARKER:
			marker = true;
			if (s.chunk_count != chunks)
				FAIL(c, "commit marker counts %u chunks, %u came", s.chunk_count, chunks);
			break;
		default:
			FAIL(c, "unexpected %s frame", frame_type_name(f->type));
		}
	}
	if (chunks && !marker)
		FAIL(c, "chunks without a commit marker");
	c->chunked += chunks > 0;
	if (changes != res->changes)
		FAIL(c, "transaction %u: %llu changes applied, the assembler counted %llu", res->xid,
		     (unsigned long long)changes, (unsigned long long)res->changes);
}

/* ---- the capture loop ---- */

static void send_status(struct client *c, uint64_t flush)
{
	if (flush > c->ack)
		c->ack = flush;
	uint8_t r[34];
	r[0] = 'r';
	put_be64(r + 1, c->ack);
	put_be64(r + 9, c->ack);
	put_be64(r + 17, c->ack);
	put_be64(r + 25, 0);
	r[33] = 0;
	CHECK(model_source_on_status(c->ms, r, sizeof r) == 0);
}

/* A delivered transaction (committed, skipped or empty) against the log. */
static void check_delivery(struct client *c, const struct assembler_result *res)
{
	size_t n = model_source_txns(c->ms);
	while (c->expect < n && model_source_txn(c->ms, c->expect)->commit_lsn < res->commit_lsn) {
		const struct model_source_txn *skipped = model_source_txn(c->ms, c->expect);
		if (skipped->changes != 0 || c->o.send_empty)
			FAIL(c, "transaction %u (commit %llx, %llu changes) was not delivered before %u", skipped->xid,
			     (unsigned long long)skipped->commit_lsn, (unsigned long long)skipped->changes, res->xid);
		c->expect++;
	}
	const struct model_source_txn *t = model_source_txn(c->ms, c->expect);
	if (!t || t->commit_lsn != res->commit_lsn || t->xid != res->xid || t->end_lsn != res->end_lsn) {
		FAIL(c, "delivered xid %u commit %llx is not the next committed transaction (%u %llx)", res->xid,
		     (unsigned long long)res->commit_lsn, t ? t->xid : 0, t ? (unsigned long long)t->commit_lsn : 0ULL);
		return;
	}
	if (t->changes != res->changes)
		FAIL(c, "transaction %u: %llu changes delivered, %llu committed", t->xid,
		     (unsigned long long)res->changes, (unsigned long long)t->changes);
	c->expect++;
}

static void on_connect(struct client *c, uint64_t start)
{
	pgoutput_session_reset(&c->session);
	assembler_reset(c->assembler);
	assembler_set_skip_through(c->assembler, c->applied_commit);
	c->expect = 0;
	while (c->expect < model_source_txns(c->ms) && model_source_txn(c->ms, c->expect)->commit_lsn < start)
		c->expect++;
	c->last_keepalive_end = 0;
}

static void do_connect(struct client *c)
{
	uint64_t start = model_source_confirmed_flush(c->ms);
	if (sim_rng_chance(&c->rng, 30)) {
		/* capture asks for its own position; the server takes the later one */
		uint64_t requested = c->applied_end;
		if (requested > start)
			start = requested;
		CHECK(model_source_connect_from(c->ms, requested) == 0);
	} else {
		CHECK(model_source_connect(c->ms) == 0);
	}
	c->reconnects++;
	on_connect(c, start);
}

static void handle_xlogdata(struct client *c, const uint8_t *data, size_t len)
{
	if (len < 25) {
		FAIL(c, "XLogData of %zu bytes", len);
		return;
	}
	if (be64(data + 1) != be64(data + 9))
		FAIL(c, "XLogData dataStart %llx != walEnd %llx", (unsigned long long)be64(data + 1),
		     (unsigned long long)be64(data + 9));
	int64_t t = (int64_t)be64(data + 17);
	if (t < c->last_send_time)
		FAIL(c, "send time went back");
	c->last_send_time = t;
	char err[PGOUTPUT_ERR_LEN];
	if (pgoutput_session_decode(&c->session, data + 25, len - 25, &c->msg, err, sizeof err) < 0) {
		char hex[2 * 96 + 1];
		size_t n = len - 25 < 96 ? len - 25 : 96;
		for (size_t i = 0; i < n; i++)
			snprintf(hex + 2 * i, 3, "%02x", data[25 + i]);
		FAIL(c, "decoder rejected %s: %s", hex, err);
		return;
	}
	if (c->msg.has_xid && c->session.state == PGOUTPUT_SESSION_IN_STREAM_BLOCK && c->msg.type < 128)
		c->in_block[c->msg.type]++;
	struct assembler_result res;
	char aerr[512];
	frames_clear(c);
	if (assembler_feed(c->assembler, &c->session, &c->msg, on_frame, c, &res, aerr, sizeof aerr) < 0) {
		FAIL(c, "assembler: %s", aerr);
		return;
	}
	switch (res.event) {
	case ASSEMBLER_COMMITTED:
		check_delivery(c, &res);
		if (res.commit_lsn <= c->applied_commit)
			FAIL(c, "transaction %u applied twice", res.xid);
		c->cur_xid = res.xid;
		apply_frames(c, &res);
		c->applied_commit = res.commit_lsn;
		c->applied_end = res.end_lsn;
		c->committed++;
		c->history_lsn = xrealloc(c->history_lsn, (c->n_history + 1) * sizeof *c->history_lsn);
		c->history_digest = xrealloc(c->history_digest, (c->n_history + 1) * sizeof *c->history_digest);
		c->history_lsn[c->n_history] = res.commit_lsn;
		c->history_digest[c->n_history++] = sim_db_digest(c->target);
		break;
	case ASSEMBLER_SKIPPED:
		check_delivery(c, &res);
		if (res.commit_lsn > c->applied_commit)
			FAIL(c, "transaction %u skipped but never applied", res.xid);
		c->skipped++;
		break;
	case ASSEMBLER_EMPTY:
		check_delivery(c, &res);
		if (res.end_lsn > c->applied_end)
			c->applied_end = res.end_lsn;
		c->empty++;
		break;
	case ASSEMBLER_ABORTED:
		c->aborted++;
		break;
	default:
		if (c->n_frames)
			FAIL(c, "frames without a commit");
	}
}

static void handle_keepalive(struct client *c, const uint8_t *data, size_t len)
{
	if (len != 18) {
		FAIL(c, "keepalive of %zu bytes", len);
		return;
	}
	uint64_t wal_end = be64(data + 1);
	if (wal_end < c->last_keepalive_end)
		FAIL(c, "keepalive walEnd went back");
	c->last_keepalive_end = wal_end;
	int64_t t = (int64_t)be64(data + 9);
	if (t < c->last_send_time)
		FAIL(c, "send time went back");
	c->last_send_time = t;
	/* nothing open: everything before walEnd is applied or was empty */
	bool idle = !assembler_in_transaction(c->assembler) && c->session.state == PGOUTPUT_SESSION_IDLE;
	if (data[17] || sim_rng_chance(&c->rng, 20))
		send_status(c, idle ? wal_end : c->applied_end);
}

/* Reads until nothing is pending (or a random disconnect when chaos). */
static void pump(struct client *c, bool chaos)
{
	for (;;) {
		const uint8_t *buf;
		size_t len;
		int rc = model_source_next(c->ms, &buf, &len);
		if (rc < 0) {
			FAIL(c, "next: %s", model_source_error(c->ms));
			return;
		}
		if (rc == 0) {
			/* caught up: the target is the source as of the last applied commit */
			char diff[512];
			if (sim_db_diff(model_source_state_at(c->ms, c->applied_commit), c->target, diff, sizeof diff))
				FAIL(c, "caught up at commit %llx, the target differs: %s",
				     (unsigned long long)c->applied_commit, diff);
			c->checkpoints++;
			return;
		}
		c->digest = fnv(c->digest, buf, len);
		if (buf[0] == 'w')
			handle_xlogdata(c, buf, len);
		else if (buf[0] == 'k')
			handle_keepalive(c, buf, len);
		else
			FAIL(c, "CopyData of type 0x%02x", buf[0]);
		if (c->failed)
			return;
		if (sim_rng_chance(&c->rng, 5))
			send_status(c, c->applied_end);
		if (chaos && sim_rng_chance(&c->rng, 1)) {
			if (sim_rng_chance(&c->rng, 15))
				model_source_promote(c->ms, (unsigned)sim_rng_below(&c->rng, 4));
			else if (sim_rng_chance(&c->rng, 15))
				model_source_crash_restart(c->ms);
			else
				model_source_disconnect(c->ms);
			return;
		}
	}
}

static void random_options(struct client *c)
{
	model_source_options_default(&c->o);
	c->o.proto_version = sim_rng_chance(&c->rng, 15) ? 1 : 2;
	c->o.send_empty = sim_rng_chance(&c->rng, 50);
	c->o.n_tables = 1 + (int)sim_rng_below(&c->rng, 4);
	if (sim_rng_chance(&c->rng, 50))
		c->o.toast_bytes = 300;
	if (sim_rng_chance(&c->rng, 20))
		c->o.start_lsn = 0xFFFFF000ULL; /* the LSNs cross 1/0 */
	if (sim_rng_chance(&c->rng, 30)) {
		c->o.stream_pct = 30;
		c->o.max_open_streams = 3;
	}
	c->o.keepalive_pct = (int)sim_rng_below(&c->rng, 8);
}

/* One seed's run; returns the digest of every byte received. */
static uint64_t run_seed(uint64_t seed, struct model_source_stats *total, struct client *counts)
{
	struct client c;
	memset(&c, 0, sizeof c);
	c.seed = seed;
	c.digest = 0xCBF29CE484222325ULL;
	sim_rng_seed(&c.rng, seed * 7919 + 1);
	random_options(&c);
	c.ms = model_source_new(&c.o, seed);
	c.target = sim_db_new();
	CHECK(model_source_create_tables(c.ms, c.target) == 0);
	char err[PGOUTPUT_ERR_LEN];
	CHECK(pgoutput_session_init(&c.session, model_source_proto_version(c.ms), err, sizeof err) == 0);
	pgoutput_message_init(&c.msg);
	char flow[32];
	snprintf(flow, sizeof flow, "model-%llu", (unsigned long long)seed);
	struct assembler_options ao = {
		.source_id = "sim-source",
		.flow = flow,
		.spill_dir = spill_dir,
		.spill_threshold_changes = sim_rng_chance(&c.rng, 30) ? 1 + sim_rng_below(&c.rng, 8) : 100000,
		.strict_chunking = sim_rng_chance(&c.rng, 20),
		.max_changes_per_chunk = 1 + sim_rng_below(&c.rng, 20),
		.target_frame_payload = sim_rng_chance(&c.rng, 40) ? 4096 : 0,
	};
	ao.spill_streamed = sim_rng_chance(&c.rng, 30);
	CHECK(assembler_open(&c.assembler, &ao, err, sizeof err) == 0);

	for (int round = 0; round < 30 && !c.failed; round++) {
		if (model_source_produce(c.ms, 1 + (unsigned)sim_rng_below(&c.rng, 6)) < 0) {
			FAIL(&c, "produce: %s", model_source_error(c.ms));
			break;
		}
		if (!model_source_connected(c.ms))
			do_connect(&c);
		pump(&c, true);
	}
	/* heal and drain: every committed transaction must now be applied */
	if (!c.failed) {
		if (model_source_finish(c.ms) < 0)
			FAIL(&c, "finish: %s", model_source_error(c.ms));
		CHECK(model_source_open_large(c.ms) == 0);
		if (!model_source_connected(c.ms))
			do_connect(&c);
		pump(&c, false);
		/* every stream was committed or aborted: nothing is left open */
		if (assembler_in_transaction(c.assembler) || c.session.nopen_streams != 0)
			FAIL(&c, "a transaction is still open after the drain");
		size_t n = model_source_txns(c.ms);
		while (c.expect < n && model_source_txn(c.ms, c.expect)->changes == 0 && !c.o.send_empty)
			c.expect++;
		if (c.expect != n)
			FAIL(&c, "after the drain, %zu of %zu committed transactions were delivered in the last session",
			     c.expect, n);
		const struct model_source_txn *last = n ? model_source_txn(c.ms, n - 1) : NULL;
		const struct sim_db *want = model_source_state_at(c.ms, last ? last->commit_lsn : 0);
		char diff[512];
		if (sim_db_diff(want, c.target, diff, sizeof diff))
			FAIL(&c, "target differs from the source at its last commit: %s", diff);
		if (!sim_db_equal(model_source_state(c.ms), want))
			FAIL(&c, "state_at(last) differs from the workload's state");
		/* earlier points, in random order (back, forward, far): the state
		 * the target had when it had applied that commit */
		for (int k = 0; k < 40 && c.n_history; k++) {
			size_t i = (size_t)sim_rng_below(&c.rng, c.n_history);
			if (sim_db_digest(model_source_state_at(c.ms, c.history_lsn[i])) != c.history_digest[i])
				FAIL(&c, "state_at(%llx) differs from the target's state after that commit",
				     (unsigned long long)c.history_lsn[i]);
		}
		if (model_source_highest_flushed(c.ms) > c.ack)
			FAIL(&c, "the slot saw a flush the client never sent");
		for (size_t i = 1; i < n; i++)
			if (model_source_txn(c.ms, i)->commit_lsn < model_source_txn(c.ms, i - 1)->end_lsn)
				FAIL(&c, "commit LSNs are not increasing at %zu", i);
	}
	if (total) {
		const struct model_source_stats *s = model_source_stats(c.ms);
		uint64_t *t = (uint64_t *)total;
		const uint64_t *v = (const uint64_t *)s;
		for (size_t i = 0; i < sizeof *s / sizeof(uint64_t); i++)
			t[i] += v[i];
	}
	if (counts) {
		counts->committed += c.committed;
		counts->skipped += c.skipped;
		counts->empty += c.empty;
		counts->aborted += c.aborted;
		counts->chunked += c.chunked;
		counts->written_once += c.written_once;
		counts->pending_cuts += c.pending_cuts;
		counts->pending_aborts += c.pending_aborts;
		counts->ddl_frames += c.ddl_frames;
		counts->reconnects += c.reconnects;
		counts->unchanged_toast += c.unchanged_toast;
		counts->old_keys += c.old_keys;
		counts->origins += c.origins;
		for (int k = 0; k < 128; k++)
			counts->in_block[k] += c.in_block[k];
	}
	frames_clear(&c);
	free(c.frames);
	for (size_t i = 0; i < c.n_pending; i++)
		free(c.pending[i].data);
	free(c.pending);
	free(c.pending_offset);
	free(c.history_lsn);
	free(c.history_digest);
	assembler_close(c.assembler);
	pgoutput_message_release(&c.msg);
	pgoutput_session_free(&c.session);
	sim_db_free(c.target);
	model_source_free(c.ms);
	return c.digest;
}

static void test_seeds(void)
{
	struct model_source_stats s;
	struct client counts;
	memset(&s, 0, sizeof s);
	memset(&counts, 0, sizeof counts);
	/* MODEL_SOURCE_SEED=N runs that seed alone (a failure's replay) */
	const char *only = getenv("MODEL_SOURCE_SEED");
	/* MODEL_SOURCE_SEEDS=N runs N seeds (a longer hunt) */
	const char *many = getenv("MODEL_SOURCE_SEEDS");
	uint64_t seeds = many ? strtoull(many, NULL, 10) : SEEDS;
	if (only) {
		run_seed(strtoull(only, NULL, 10), &s, &counts);
		return;
	}
	for (uint64_t seed = 1; seed <= seeds; seed++)
		run_seed(seed, &s, &counts);
	printf("model source: %llu committed (%llu aborted) over %llu seeds; %llu sessions, %llu messages, %llu keepalives\n"
	       "  %llu inserts, %llu updates (%llu key changes, %llu unchanged TOAST), %llu deletes, %llu truncates, "
	       "%llu ddl, %llu heartbeats, %llu empty\n"
	       "  %llu stream starts, %llu stream commits, %llu stream aborts (%llu sub, %llu late), %llu large sent plain\n"
	       "  client: %llu applied, %llu skipped, %llu empty, %llu aborted, %llu chunked, %llu ddl frames, "
	       "%llu unchanged TOAST, %llu old keys; %llu written once (%llu pending chunks cut, %llu pending aborts)\n",
	       (unsigned long long)s.committed, (unsigned long long)s.aborted, (unsigned long long)seeds, (unsigned long long)s.sessions,
	       (unsigned long long)s.messages, (unsigned long long)s.keepalives, (unsigned long long)s.inserts,
	       (unsigned long long)s.updates, (unsigned long long)s.key_updates, (unsigned long long)s.toast_unchanged,
	       (unsigned long long)s.deletes, (unsigned long long)s.truncates, (unsigned long long)s.ddl_messages,
	       (unsigned long long)s.heartbeats, (unsigned long long)s.empty_txns, (unsigned long long)s.stream_starts,
	       (unsigned long long)s.stream_commits, (unsigned long long)s.stream_aborts,
	       (unsigned long long)s.sub_aborts, (unsigned long long)s.late_aborts,
	       (unsigned long long)s.streamed_sent_plain, (unsigned long long)counts.committed,
	       (unsigned long long)counts.skipped, (unsigned long long)counts.empty, (unsigned long long)counts.aborted,
	       (unsigned long long)counts.chunked, (unsigned long long)counts.ddl_frames,
	       (unsigned long long)counts.unchanged_toast, (unsigned long long)counts.old_keys,
	       (unsigned long long)counts.written_once, (unsigned long long)counts.pending_cuts,
	       (unsigned long long)counts.pending_aborts);
	/* streamed transactions written once, some cut by a subtransaction abort */
	CHECK(counts.written_once > 0 && counts.pending_cuts > 0 && counts.pending_aborts > 0);
	/* every kind of change and message happened somewhere */
	CHECK(s.inserts > 0 && s.updates > 0 && s.key_updates > 0 && s.toast_unchanged > 0 && s.deletes > 0);
	CHECK(s.truncates > 0 && s.ddl_messages > 0 && s.heartbeats > 0 && s.empty_txns > 0);
	CHECK(s.stream_starts > 0 && s.stream_stops > 0 && s.stream_commits > 0 && s.stream_aborts > 0);
	CHECK(s.sub_aborts > 0 && s.late_aborts > 0 && s.streamed_sent_plain > 0);
	CHECK(s.keepalives > 0 && s.reply_requests > 0 && s.relations > 0 && s.types > 0 && s.promotions > 0 && s.crash_restarts > 0);
	CHECK(s.sessions > seeds);
	/* every kind of change came inside stream blocks too, with its xid */
	for (const char *k = "RYIUDTM"; *k; k++)
		if (counts.in_block[(int)*k] == 0)
			FAIL(&counts, "no %c message inside a stream block", *k);
	CHECK(counts.unchanged_toast > 0 && counts.old_keys > 0 && counts.origins > 0 && s.origins > 0);
	CHECK(counts.skipped > 0 && counts.empty > 0 && counts.aborted > 0 && counts.chunked > 0 && counts.ddl_frames > 0);
}

/* The raw bytes of a session over a workload, without a client. */
static uint64_t raw_digest(int proto_version, uint64_t seed)
{
	struct model_source_options o;
	model_source_options_default(&o);
	o.proto_version = proto_version;
	struct model_source *ms = model_source_new(&o, seed);
	uint64_t h = 0xCBF29CE484222325ULL;
	CHECK(model_source_produce(ms, 200) == 0);
	CHECK(model_source_connect(ms) == 0);
	const uint8_t *buf;
	size_t len;
	while (model_source_next(ms, &buf, &len) == 1)
		h = fnv(h, buf, len);
	model_source_free(ms);
	return h;
}

/* The workload of a seed is the same however it is produced and read. */
static void test_workload_independent(void)
{
	struct model_source_options o;
	model_source_options_default(&o);
	struct model_source *wa = model_source_new(&o, 77), *wb = model_source_new(&o, 77);
	CHECK(model_source_produce(wa, 120) == 0);
	CHECK(model_source_connect(wb) == 0);
	for (int i = 0; i < 120; i++) {
		CHECK(model_source_produce(wb, 1) == 0);
		const uint8_t *buf;
		size_t len;
		for (int k = 0; k < i % 7 && model_source_next(wb, &buf, &len) == 1; k++)
			;
		if (i % 13 == 0) {
			model_source_disconnect(wb);
			CHECK(model_source_connect(wb) == 0);
		}
	}
	CHECK(model_source_txns(wa) == 120 && model_source_txns(wb) == 120);
	bool same = true;
	for (size_t i = 0; i < 120; i++) {
		const struct model_source_txn *x = model_source_txn(wa, i), *y = model_source_txn(wb, i);
		same = same && x->xid == y->xid && x->commit_lsn == y->commit_lsn && x->end_lsn == y->end_lsn &&
		       x->commit_ts == y->commit_ts && x->changes == y->changes && x->streamed == y->streamed;
	}
	CHECK(same);
	CHECK(sim_db_digest(model_source_state(wa)) == sim_db_digest(model_source_state(wb)));
	CHECK(model_source_wal_end(wa) == model_source_wal_end(wb));
	model_source_free(wa);
	model_source_free(wb);
}

static void test_determinism(void)
{
	/* protocol 3 and 4 without two_phase or parallel streaming send what 2 sends */
	CHECK(raw_digest(2, 11) == raw_digest(3, 11));
	CHECK(raw_digest(2, 11) == raw_digest(4, 11));
	CHECK(raw_digest(2, 11) != raw_digest(1, 11)); /* no streaming in 1 */
	CHECK(raw_digest(2, 11) != raw_digest(2, 12));

	uint64_t a = run_seed(4242, NULL, NULL);
	uint64_t b = run_seed(4242, NULL, NULL);
	uint64_t c = run_seed(4243, NULL, NULL);
	CHECK(a == b);
	CHECK(a != c);
}

/* The slot by hand: resend after the confirmed position, never backwards,
 * promotion lags, misuse refused. */
static void drain_results(struct client *c, uint64_t *first_commit, size_t *delivered)
{
	*first_commit = 0;
	*delivered = 0;
	for (;;) {
		const uint8_t *buf;
		size_t len;
		if (model_source_next(c->ms, &buf, &len) != 1)
			return;
		if (buf[0] != 'w')
			continue;
		char err[PGOUTPUT_ERR_LEN];
		if (pgoutput_session_decode(&c->session, buf + 25, len - 25, &c->msg, err, sizeof err) < 0) {
			FAIL(c, "decoder: %s", err);
			return;
		}
		if (c->msg.type == PGOUTPUT_COMMIT || c->msg.type == PGOUTPUT_STREAM_COMMIT) {
			if (!*delivered)
				*first_commit = c->msg.commit.commit_lsn;
			(*delivered)++;
		}
	}
}

static void test_slot(void)
{
	struct client c;
	memset(&c, 0, sizeof c);
	c.seed = 99;
	model_source_options_default(&c.o);
	c.o.send_empty = true; /* every committed transaction is sent */
	c.o.stream_pct = 0;
	c.ms = model_source_new(&c.o, 99);
	char err[PGOUTPUT_ERR_LEN];
	CHECK(pgoutput_session_init(&c.session, 2, err, sizeof err) == 0);
	pgoutput_message_init(&c.msg);
	const uint8_t *buf;
	size_t len;
	CHECK(model_source_next(c.ms, &buf, &len) == -1); /* not connected */
	uint8_t status[34] = { 'r' };
	CHECK(model_source_on_status(c.ms, status, sizeof status) == -1);
	CHECK(model_source_produce(c.ms, 20) == 0);
	CHECK(model_source_txns(c.ms) == 20);
	CHECK(model_source_connect(c.ms) == 0);
	CHECK(model_source_connect(c.ms) == -1);
	uint64_t first;
	size_t n;
	drain_results(&c, &first, &n);
	CHECK(n == 20 && first == model_source_txn(c.ms, 0)->commit_lsn);
	CHECK(model_source_next(c.ms, &buf, &len) == 0); /* caught up, keepalive already sent */
	CHECK(model_source_on_status(c.ms, status, 33) == -1);
	c.ack = 0;
	send_status(&c, model_source_txn(c.ms, 9)->end_lsn);
	CHECK(model_source_confirmed_flush(c.ms) == model_source_txn(c.ms, 9)->end_lsn);
	/* a lower flush does not move it back */
	uint8_t low[34] = { 'r' };
	put_be64(low + 9, model_source_txn(c.ms, 2)->end_lsn);
	CHECK(model_source_on_status(c.ms, low, sizeof low) == 0);
	CHECK(model_source_confirmed_flush(c.ms) == model_source_txn(c.ms, 9)->end_lsn);
	model_source_disconnect(c.ms);

	CHECK(model_source_connect(c.ms) == 0);
	pgoutput_session_reset(&c.session);
	drain_results(&c, &first, &n);
	CHECK(n == 10 && first == model_source_txn(c.ms, 10)->commit_lsn);
	model_source_disconnect(c.ms);

	/* a later requested start wins over the slot's */
	CHECK(model_source_connect_from(c.ms, model_source_txn(c.ms, 14)->end_lsn) == 0);
	pgoutput_session_reset(&c.session);
	drain_results(&c, &first, &n);
	CHECK(n == 5 && first == model_source_txn(c.ms, 15)->commit_lsn);
	model_source_disconnect(c.ms);

	/* a crash restart goes back to what the last checkpoint saved */
	model_source_checkpoint(c.ms);
	uint64_t saved = model_source_confirmed_flush(c.ms);
	CHECK(model_source_connect(c.ms) == 0);
	send_status(&c, model_source_txn(c.ms, 12)->end_lsn);
	CHECK(model_source_confirmed_flush(c.ms) == model_source_txn(c.ms, 12)->end_lsn);
	model_source_crash_restart(c.ms);
	CHECK(!model_source_connected(c.ms));
	CHECK(model_source_confirmed_flush(c.ms) == saved);
	CHECK(model_source_highest_flushed(c.ms) == model_source_txn(c.ms, 12)->end_lsn);

	/* promotion: three confirmed transactions behind, a new timeline */
	uint32_t tli = model_source_timeline(c.ms);
	uint64_t sysid = model_source_system_id(c.ms);
	CHECK(model_source_connect(c.ms) == 0);
	model_source_promote(c.ms, 3);
	CHECK(!model_source_connected(c.ms));
	CHECK(model_source_timeline(c.ms) == tli + 1 && model_source_system_id(c.ms) == sysid);
	CHECK(model_source_confirmed_flush(c.ms) == model_source_txn(c.ms, 6)->end_lsn);
	CHECK(model_source_highest_flushed(c.ms) == model_source_txn(c.ms, 12)->end_lsn);
	CHECK(model_source_connect(c.ms) == 0);
	pgoutput_session_reset(&c.session);
	drain_results(&c, &first, &n);
	CHECK(n == 13 && first == model_source_txn(c.ms, 7)->commit_lsn);
	/* lagging further than there is: back to the slot's start */
	model_source_promote(c.ms, 1000);
	CHECK(model_source_connect(c.ms) == 0);
	pgoutput_session_reset(&c.session);
	drain_results(&c, &first, &n);
	CHECK(n == 20);

	/* a standby promoted without the slot: no row, no session; a new
	 * slot starts at the end of the WAL and sends only later commits */
	struct model_source_slot slot;
	model_source_slot(c.ms, &slot);
	CHECK(slot.exists && slot.invalidation_reason[0] == '\0');
	tli = model_source_timeline(c.ms);
	model_source_promote_without_slot(c.ms);
	CHECK(model_source_timeline(c.ms) == tli + 1);
	model_source_slot(c.ms, &slot);
	CHECK(!slot.exists);
	CHECK(model_source_connect(c.ms) == -1 && !model_source_connected(c.ms));
	model_source_create_slot(c.ms);
	CHECK(model_source_confirmed_flush(c.ms) == model_source_wal_end(c.ms));
	CHECK(model_source_connect(c.ms) == 0);
	pgoutput_session_reset(&c.session);
	drain_results(&c, &first, &n);
	CHECK(n == 0);
	model_source_disconnect(c.ms);
	/* invalidated: the row stays, saying why */
	model_source_lose_slot(c.ms, MODEL_SLOT_WAL_REMOVED);
	model_source_slot(c.ms, &slot);
	CHECK(slot.exists && strcmp(slot.wal_status, "lost") == 0 && strcmp(slot.invalidation_reason, "wal_removed") == 0);
	CHECK(model_source_connect(c.ms) == -1);
	model_source_create_slot(c.ms);
	model_source_lose_slot(c.ms, MODEL_SLOT_IDLE_TIMEOUT);
	model_source_slot(c.ms, &slot);
	CHECK(slot.exists && strcmp(slot.invalidation_reason, "idle_timeout") == 0);
	model_source_create_slot(c.ms);
	model_source_lose_slot(c.ms, MODEL_SLOT_DROPPED);
	model_source_slot(c.ms, &slot);
	CHECK(!slot.exists && model_source_connect(c.ms) == -1);
	/* a lagging synced copy of a slot is never older than its creation */
	model_source_create_slot(c.ms);
	uint64_t created = model_source_confirmed_flush(c.ms);
	model_source_promote(c.ms, 1000);
	CHECK(model_source_confirmed_flush(c.ms) == created);
	/* the state at a commit LSN between transactions is the earlier one's */
	CHECK(sim_db_equal(model_source_state_at(c.ms, model_source_txn(c.ms, 5)->end_lsn),
			   model_source_state_at(c.ms, model_source_txn(c.ms, 5)->commit_lsn)));
	CHECK(model_source_state_at(c.ms, 0) != NULL);
	CHECK(sim_db_rows(model_source_state_at(c.ms, 0), "public.t1") == 0);
	pgoutput_message_release(&c.msg);
	pgoutput_session_free(&c.session);
	model_source_free(c.ms);
}

/* The bytes of messages whose layout the PostgreSQL 15 fixtures show
 * (tests/fixtures/pgoutput/dml.hex: a Relation of public.accounts, relid
 * 16385, with an int4 key "id"; Begin and Commit), here for public.t1. */
static void test_bytes(void)
{
	struct model_source_options o;
	model_source_options_default(&o);
	o.n_tables = 1;
	o.stream_pct = 0;
	o.empty_pct = 0;
	o.heartbeat_pct = 0;
	o.keepalive_pct = 0;
	struct model_source *ms = model_source_new(&o, 5);
	CHECK(model_source_produce(ms, 3) == 0);
	CHECK(model_source_connect(ms) == 0);
	static const char relation_t1[] = "5200004001" "7075626c696300" "743100" "64" "0003"
					  "01" "696400" "00000017" "ffffffff"
					  "00" "6100" "00000019" "ffffffff"
					  "00" "6200" "00000019" "ffffffff";
	const struct model_source_txn *t0 = model_source_txn(ms, 0);
	const uint8_t *buf;
	size_t len;
	int seen_begin = 0, seen_relation = 0, seen_commit = 0;
	while (model_source_next(ms, &buf, &len) == 1) {
		if (buf[0] != 'w')
			continue;
		const uint8_t *m = buf + 25;
		size_t n = len - 25;
		if (m[0] == 'R' && !seen_relation++) {
			char hex[256] = "";
			for (size_t i = 0; i < n && 2 * i + 2 < sizeof hex; i++)
				snprintf(hex + 2 * i, 3, "%02x", m[i]);
			CHECK_STR(hex, relation_t1);
		}
		if (m[0] == 'B' && !seen_begin++) {
			/* B, final LSN = the commit's, timestamp, xid */
			CHECK(n == 21 && be64(m + 1) == t0->commit_lsn && (int64_t)be64(m + 9) == t0->commit_ts);
			CHECK(((uint32_t)m[17] << 24 | (uint32_t)m[18] << 16 | (uint32_t)m[19] << 8 | m[20]) == t0->xid);
		}
		if (m[0] == 'C' && !seen_commit++) {
			/* C, flags 0, commit LSN, end LSN, timestamp; the header's LSN is the end */
			CHECK(n == 26 && m[1] == 0 && be64(m + 2) == t0->commit_lsn && be64(m + 10) == t0->end_lsn);
			CHECK(be64(buf + 1) == t0->end_lsn);
		}
	}
	CHECK(seen_begin == 3 && seen_relation == 1 && seen_commit == 3);
	model_source_free(ms);
}

int main(void)
{
	snprintf(spill_dir, sizeof spill_dir, "/tmp/test_model_source.XXXXXX");
	if (!mkdtemp(spill_dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_bytes();
	test_slot();
	test_determinism();
	test_workload_independent();
	test_seeds();
	/* the assembler removed every spill file */
	DIR *d = opendir(spill_dir);
	int left = 0;
	for (struct dirent *e; d && (e = readdir(d)) != NULL;)
		left += e->d_name[0] != '.';
	if (d)
		closedir(d);
	CHECK(left == 0);
	rmdir(spill_dir);
	return unit_done("test_model_source");
}
