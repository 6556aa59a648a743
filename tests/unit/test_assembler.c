/*
 * test_assembler.c - the transaction assembler (assembler.h) fed with real
 * PostgreSQL 15 pgoutput recordings (tests/fixtures/pgoutput/NAME.hex,
 * through pgoutput_session_decode) and with a few hand-built streams.  The
 * emitted frames are collected in memory and decoded with the envelope
 * decoder; the checks are about content: which rows, in which order, with
 * which descriptor, in which frame form.
 *
 * Spill files go to a mkdtemp directory that must be empty after every
 * test and is removed at the end.  Fixtures are read from
 * $TRELLARA_FIXTURES/pgoutput (default tests/fixtures/pgoutput).
 */
#include "trellara/assembler.h"

#include "trellara/checksum.h"
#include "trellara/envelope.h"
#include "trellara/stream.h"
#include "trellara/xalloc.h"
#include "unit.h"

#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define PG_EPOCH_OFFSET_US 946684800000000LL

static char spill_dir[64];

/* ---- fixtures ------------------------------------------------------------ */

struct fixture {
	int proto_version;
	size_t count;
	uint8_t **msgs; /* owned */
	size_t *lens;   /* owned */
};

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static void fixture_add(struct fixture *fx, const uint8_t *msg, size_t len)
{
	fx->msgs = unit_grow(fx->msgs, fx->count, sizeof *fx->msgs);
	fx->lens = unit_grow(fx->lens, fx->count, sizeof *fx->lens);
	uint8_t *copy = xmalloc(len ? len : 1);
	memcpy(copy, msg, len);
	fx->msgs[fx->count] = copy;
	fx->lens[fx->count++] = len;
}

/* One message per line in hex; "#" comments; a "# proto_version N" line. */
static int fixture_load(const char *name, struct fixture *fx)
{
	memset(fx, 0, sizeof *fx);
	const char *dir = getenv("TRELLARA_FIXTURES");
	char *path = xasprintf("%s/pgoutput/%s.hex", dir ? dir : "tests/fixtures", name);
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	int rc = -1;
	if (!f) {
		fprintf(stderr, "fixture \"%s\": cannot open\n", path);
		goto out;
	}
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
		uint8_t *msg = xmalloc(hexlen / 2);
		for (size_t i = 0; i < hexlen; i += 2) {
			int hi = hexval(line[i]), lo = hexval(line[i + 1]);
			if (hi < 0 || lo < 0) {
				free(msg);
				goto out;
			}
			msg[i / 2] = (uint8_t)(hi << 4 | lo);
		}
		fixture_add(fx, msg, hexlen / 2);
		free(msg);
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
	memset(fx, 0, sizeof *fx);
}

/* ---- the spill directory ------------------------------------------------- */

static int spill_entries(void)
{
	DIR *d = opendir(spill_dir);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

/* The flow of every test, and its name in spill files (":" is %3A). */
#define TEST_FLOW "src-test:ds.test"
#define TEST_FLOW_IN_NAME "src-test%3Ads%2Etest"

/* Size of <spill_dir>/<flow>.<xid>.spill, or -1 when there is none. */
static long long spill_size(uint32_t xid)
{
	char path[128];
	snprintf(path, sizeof path, "%s/%s.%u.spill", spill_dir, TEST_FLOW_IN_NAME, xid);
	struct stat st;
	if (stat(path, &st) < 0)
		return -1;
	return (long long)st.st_size;
}

static mode_t spill_mode(uint32_t xid)
{
	char path[128];
	snprintf(path, sizeof path, "%s/%s.%u.spill", spill_dir, TEST_FLOW_IN_NAME, xid);
	struct stat st;
	if (stat(path, &st) < 0)
		return 0;
	return st.st_mode & 07777;
}

#define CHECK_SPILL_EMPTY()                                                                     \
	do {                                                                                    \
		int n_ = spill_entries();                                                       \
		unit_checks++;                                                                  \
		if (n_ != 0) {                                                                  \
			unit_failures++;                                                        \
			fprintf(stderr, "%s:%d: spill directory holds %d entries\n", __FILE__, __LINE__, n_); \
		}                                                                               \
	} while (0)

/* ---- collecting frames --------------------------------------------------- */

struct frame {
	int type;
	uint8_t *p; /* owned, exactly len bytes */
	size_t len;
};

struct sink {
	struct frame *f;
	size_t n;
	long fail_at; /* refuse the frame with this number (-1: never) */
};

static int collect(void *ctx, int type, const uint8_t *payload, size_t len, uint64_t *offset)
{
	struct sink *s = ctx;
	if (s->fail_at >= 0 && (size_t)s->fail_at == s->n)
		return -5;
	*offset = s->n; /* the sink's frames are the stream */
	s->f = unit_grow(s->f, s->n, sizeof *s->f);
	s->f[s->n].type = type;
	s->f[s->n].p = xmalloc(len ? len : 1);
	memcpy(s->f[s->n].p, payload, len);
	s->f[s->n].len = len;
	s->n++;
	return 0;
}

static void sink_free(struct sink *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->f[i].p);
	free(s->f);
	memset(s, 0, sizeof *s);
}

/* ---- running a message sequence through session + assembler ------------ */

struct event {
	struct assembler_result r;
	uint64_t msg_commit_lsn, msg_end_lsn; /* from the (Stream) Commit message */
	int64_t msg_commit_ts;
	size_t frames_before; /* sink->n before the message */
};

typedef void (*hook_fn)(void *hctx, struct assembler *a, const struct pgoutput_message *msg, size_t index,
			bool after);

struct run {
	struct sink sink;
	struct event *ev;
	size_t n_ev;
	int rc;          /* the first failure's return code, 0 if none */
	char err[256];   /* its message */
	uint64_t max_memory_changes;
	bool spilled;    /* a spill file existed at some point */
	size_t messages; /* fed */
};

static void run_free(struct run *r)
{
	sink_free(&r->sink);
	free(r->ev);
	memset(r, 0, sizeof *r);
}

static void run_messages(const struct fixture *fx, const struct assembler_options *o, struct run *run, hook_fn hook,
			 void *hctx)
{
	memset(run, 0, sizeof *run);
	run->sink.fail_at = -1;
	char err[256];
	struct pgoutput_session session;
	if (pgoutput_session_init(&session, fx->proto_version, err, sizeof err) < 0) {
		CHECK(!"session init");
		return;
	}
	struct assembler *a = NULL;
	if (assembler_open(&a, o, err, sizeof err) < 0) {
		CHECK(!"assembler opens");
		pgoutput_session_free(&session);
		return;
	}
	struct pgoutput_message msg;
	pgoutput_message_init(&msg);
	for (size_t i = 0; i < fx->count; i++) {
		if (pgoutput_session_decode(&session, fx->msgs[i], fx->lens[i], &msg, err, sizeof err) < 0) {
			fprintf(stderr, "message %zu does not decode: %s\n", i + 1, err);
			CHECK(!"every message decodes");
			break;
		}
		if (hook)
			hook(hctx, a, &msg, i, false);
		struct assembler_result res;
		size_t before = run->sink.n;
		int rc = assembler_feed(a, &session, &msg, collect, &run->sink, &res, run->err, sizeof run->err);
		run->messages++;
		if (rc < 0) {
			run->rc = rc;
			break;
		}
		if (res.event != ASSEMBLER_NOTHING) {
			run->ev = xrealloc(run->ev, (run->n_ev + 1) * sizeof *run->ev);
			struct event *e = &run->ev[run->n_ev++];
			memset(e, 0, sizeof *e);
			e->r = res;
			e->frames_before = before;
			if (msg.type == PGOUTPUT_COMMIT || msg.type == PGOUTPUT_STREAM_COMMIT) {
				e->msg_commit_lsn = msg.commit.commit_lsn;
				e->msg_end_lsn = msg.commit.end_lsn;
				e->msg_commit_ts = msg.commit.commit_ts;
			}
		}
		/* nothing but an event's frames, and only when it committed;
		 * pending chunks of a streamed transaction written once as
		 * its memory share fills */
		if (res.event != ASSEMBLER_COMMITTED)
			for (size_t k = before; k < run->sink.n; k++)
				CHECK(!o->spill_streamed && (run->sink.f[k].type == FRAME_PENDING_CHUNK ||
							     run->sink.f[k].type == FRAME_PENDING_ABORT));
		CHECK(res.frames == run->sink.n - before);
		uint64_t mem = assembler_memory_changes(a);
		if (mem > run->max_memory_changes)
			run->max_memory_changes = mem;
		if (!run->spilled && spill_entries() > 0)
			run->spilled = true;
		if (hook)
			hook(hctx, a, &msg, i, true);
	}
	if (run->rc == 0)
		CHECK(!assembler_in_transaction(a));
	assembler_close(a);
	pgoutput_message_release(&msg);
	pgoutput_session_free(&session);
	CHECK_SPILL_EMPTY();
}

static int run_fixture(const char *name, const struct assembler_options *o, struct run *run, hook_fn hook,
		       void *hctx)
{
	struct fixture fx;
	if (fixture_load(name, &fx) < 0) {
		CHECK(!"fixture loads");
		memset(run, 0, sizeof *run);
		return -1;
	}
	run_messages(&fx, o, run, hook, hctx);
	fixture_free(&fx);
	return 0;
}

/* Streamed transactions written once (pending chunks) instead of
 * spilled: the tests of the spill file's own behaviour run with it off. */
static bool written_once;

static struct assembler_options options(uint64_t threshold)
{
	struct assembler_options o = { .source_id = "src-test", .flow = TEST_FLOW, .spill_dir = spill_dir,
				       .spill_threshold_changes = threshold, .spill_streamed = !written_once };
	return o;
}

/* ---- decoding the frames back ------------------------------------------- */

/* A growable NUL-terminated string. */
static void sb_add(struct buf *b, const void *p, size_t n)
{
	buf_put(b, p, n);
	buf_reserve(b, 1);
	b->data[b->len] = '\0';
}

static void sb_str(struct buf *b, const char *s)
{
	sb_add(b, s, strlen(s));
}

static void sb_tuple(struct buf *b, const char *tag, const struct env_tuple *t)
{
	sb_str(b, tag);
	sb_str(b, "(");
	for (uint16_t i = 0; i < t->n; i++) {
		const struct env_value *v = &t->values[i];
		if (i)
			sb_str(b, ",");
		if (v->kind == ENV_NULL)
			sb_str(b, "n");
		else if (v->kind == ENV_UNCHANGED_TOAST)
			sb_str(b, "u");
		else {
			sb_str(b, "t:");
			sb_add(b, v->data, v->len);
		}
	}
	sb_str(b, ")");
}

static void sb_relname(struct buf *b, const struct env_relation *r)
{
	sb_add(b, r->schema, r->schema_len);
	sb_str(b, ".");
	sb_add(b, r->name, r->name_len);
}

/* "I#0 public.accounts/3 new(t:1,t:alice,n)", "U#0 public.accounts/3
 * K(t:2,n,n) new(...)", "T3 public.parents,public.children",
 * "M1 trellara.ddl <content>". */
static char *change_repr(const struct env_header *h, const struct env_change *c)
{
	struct buf b = { 0 };
	char tmp[64];
	if (c->op == ENV_INSERT || c->op == ENV_UPDATE || c->op == ENV_DELETE) {
		const struct env_relation *r = &h->relations[c->relation];
		snprintf(tmp, sizeof tmp, "%c#%u ", c->op, c->relation);
		sb_str(&b, tmp);
		sb_relname(&b, r);
		snprintf(tmp, sizeof tmp, "/%u", r->n_columns);
		sb_str(&b, tmp);
		if (c->old_kind) {
			char tag[3] = { ' ', (char)c->old_kind, 0 };
			sb_tuple(&b, tag, &c->old_tuple);
		}
		if (c->op != ENV_DELETE)
			sb_tuple(&b, " new", &c->new_tuple);
	} else if (c->op == ENV_TRUNCATE) {
		snprintf(tmp, sizeof tmp, "T%u ", c->truncate_flags);
		sb_str(&b, tmp);
		for (uint32_t i = 0; i < c->n_truncate; i++) {
			if (i)
				sb_str(&b, ",");
			sb_relname(&b, &h->relations[c->truncate_relations[i]]);
		}
	} else {
		snprintf(tmp, sizeof tmp, "M%u ", c->message_flags);
		sb_str(&b, tmp);
		sb_add(&b, c->message_prefix, c->message_prefix_len);
		sb_str(&b, " ");
		sb_add(&b, c->message_content, c->message_len);
	}
	return (char *)b.data;
}

/* "16385 public.accounts d [id:k:23:-1,owner:-:25:-1]" */
static char *relation_repr(const struct env_relation *r)
{
	struct buf b = { 0 };
	char tmp[64];
	snprintf(tmp, sizeof tmp, "%u ", r->oid);
	sb_str(&b, tmp);
	sb_relname(&b, r);
	snprintf(tmp, sizeof tmp, " %c [", r->replident);
	sb_str(&b, tmp);
	for (uint16_t i = 0; i < r->n_columns; i++) {
		if (i)
			sb_str(&b, ",");
		sb_add(&b, r->columns[i].name, r->columns[i].name_len);
		snprintf(tmp, sizeof tmp, ":%s:%u:%d", r->columns[i].key ? "k" : "-", r->columns[i].type_oid,
			 r->columns[i].typmod);
		sb_str(&b, tmp);
	}
	sb_str(&b, "]");
	return (char *)b.data;
}

struct ddl {
	uint32_t xid;
	uint64_t commit_lsn, message_lsn;
	char *prefix, *text; /* owned */
};

/* One committed transaction as the frames carry it. */
struct txn_view {
	bool chunked;
	uint32_t xid;
	uint64_t commit_lsn, end_lsn, origin_lsn;
	int64_t commit_time_us;
	char *source_id, *origin; /* owned */
	uint32_t n_relations;
	char **relations; /* owned */
	size_t n_changes;
	char **changes; /* owned */
	size_t n_chunks;
	uint32_t max_chunk_changes;
	size_t max_payload;
	struct ddl ddl[8];
	size_t n_ddl;
};

static void view_free(struct txn_view *v)
{
	free(v->source_id);
	free(v->origin);
	for (uint32_t i = 0; i < v->n_relations; i++)
		free(v->relations[i]);
	free(v->relations);
	for (size_t i = 0; i < v->n_changes; i++)
		free(v->changes[i]);
	free(v->changes);
	for (size_t i = 0; i < v->n_ddl; i++) {
		free(v->ddl[i].prefix);
		free(v->ddl[i].text);
	}
	memset(v, 0, sizeof *v);
}

static void views_free(struct txn_view *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		view_free(&v[i]);
	free(v);
}

static char *dup_n(const void *p, size_t n)
{
	char *s = xmalloc(n + 1);
	if (n)
		memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

/* Decode one envelope into v (first == true: take the header and the
 * relations; otherwise they must equal v's).  Returns 0 or -1. */
static int decode_envelope(const uint8_t *p, size_t len, struct txn_view *v, bool first, uint32_t *n_changes)
{
	struct env_decoder d;
	int rc = -1;
	if (env_decode_begin(&d, p, len) < 0) {
		fprintf(stderr, "envelope does not decode: %s\n", d.error);
		goto out;
	}
	const struct env_header *h = &d.header;
	if (first) {
		v->xid = h->xid;
		v->commit_lsn = h->commit_lsn;
		v->end_lsn = h->end_lsn;
		v->commit_time_us = h->commit_time_us;
		v->origin_lsn = h->origin_lsn;
		v->source_id = dup_n(h->source_id, h->source_id_len);
		v->origin = h->origin_len ? dup_n(h->origin, h->origin_len) : NULL;
		v->n_relations = h->n_relations;
		v->relations = xcalloc(h->n_relations ? h->n_relations : 1, sizeof *v->relations);
		for (uint32_t i = 0; i < h->n_relations; i++)
			v->relations[i] = relation_repr(&h->relations[i]);
	} else {
		int bad = 0;
		bad += v->xid != h->xid || v->commit_lsn != h->commit_lsn || v->end_lsn != h->end_lsn;
		bad += v->commit_time_us != h->commit_time_us || v->origin_lsn != h->origin_lsn;
		bad += v->n_relations != h->n_relations;
		for (uint32_t i = 0; !bad && i < h->n_relations; i++) {
			char *r = relation_repr(&h->relations[i]);
			bad += strcmp(r, v->relations[i]) != 0;
			free(r);
		}
		if (bad) {
			fprintf(stderr, "a chunk's header or relations differ from the first chunk's\n");
			goto out;
		}
	}
	*n_changes = h->n_changes;
	const struct env_change *c;
	int step;
	while ((step = env_decode_next(&d, &c)) == 1) {
		v->changes = unit_grow(v->changes, v->n_changes, sizeof *v->changes);
		v->changes[v->n_changes++] = change_repr(h, c);
	}
	if (step < 0)
		fprintf(stderr, "change does not decode: %s\n", d.error);
	else
		rc = 0;
out:
	env_decoder_free(&d);
	return rc;
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int decode_ddl(const struct frame *f, struct ddl *out)
{
	struct env_frame_summary s;
	char err[256];
	if (env_frame_summary(FRAME_DDL, f->p, f->len, &s, err, sizeof err) < 0) {
		fprintf(stderr, "ddl frame: %s\n", err);
		return -1;
	}
	out->xid = s.xid;
	out->commit_lsn = s.commit_lsn;
	out->message_lsn = s.lsn;
	size_t at = 1 + 2 + s.source_id_len + 4 + 8 + 8;
	size_t plen = (size_t)f->p[at] << 8 | f->p[at + 1];
	out->prefix = dup_n(f->p + at + 2, plen);
	at += 2 + plen;
	uint32_t clen = be32(f->p + at);
	out->text = dup_n(f->p + at + 4, clen);
	return 0;
}

/* A pending chunk's changes (the first limit of them) into v: its header
 * names the transaction with the commit not yet known, and its relations
 * extend those of the chunks before it. */
static int decode_pending(const struct frame *f, struct txn_view *v, bool first, uint32_t limit, uint32_t *n_changes)
{
	struct env_decoder d;
	int rc = -1;
	if (f->len < ENV_PENDING_HEAD_SIZE || env_decode_begin(&d, f->p + ENV_PENDING_HEAD_SIZE, f->len - ENV_PENDING_HEAD_SIZE) < 0) {
		fprintf(stderr, "pending chunk does not decode\n");
		if (f->len >= ENV_PENDING_HEAD_SIZE)
			env_decoder_free(&d);
		return -1;
	}
	const struct env_header *h = &d.header;
	if (h->commit_lsn != 0 || h->end_lsn != 0 || h->commit_time_us != 0 || h->xid != v->xid) {
		fprintf(stderr, "pending chunk of xid %u commit %llx, expected xid %u and no commit\n", h->xid,
			(unsigned long long)h->commit_lsn, v->xid);
		goto out;
	}
	if (first) {
		v->origin_lsn = h->origin_lsn;
		v->origin = h->origin_len ? dup_n(h->origin, h->origin_len) : NULL;
	}
	if (h->n_relations < v->n_relations) {
		fprintf(stderr, "a pending chunk holds fewer relations than the one before\n");
		goto out;
	}
	for (uint32_t i = 0; i < h->n_relations; i++) {
		char *r = relation_repr(&h->relations[i]);
		if (i < v->n_relations) {
			bool same = strcmp(r, v->relations[i]) == 0;
			free(r);
			if (!same) {
				fprintf(stderr, "a pending chunk's relations differ from the one before\n");
				goto out;
			}
		} else {
			v->relations = xrealloc(v->relations, (i + 1) * sizeof *v->relations);
			v->relations[i] = r;
			v->n_relations = i + 1;
		}
	}
	*n_changes = h->n_changes;
	const struct env_change *c;
	int step = 0;
	for (uint32_t k = 0; k < limit && (step = env_decode_next(&d, &c)) == 1; k++) {
		v->changes = unit_grow(v->changes, v->n_changes, sizeof *v->changes);
		v->changes[v->n_changes++] = change_repr(h, c);
	}
	if (step < 0)
		fprintf(stderr, "change does not decode: %s\n", d.error);
	else if (limit > h->n_changes)
		fprintf(stderr, "the manifest uses %u changes of a pending chunk holding %u\n", limit, h->n_changes);
	else
		rc = 0;
out:
	env_decoder_free(&d);
	return rc;
}

/* The pending chunks a version 2 manifest at s->f[at] lists, read back by
 * offset (earlier in the sink), then its commit marker.  Returns the
 * frames it took at `at` (2) or -1. */
static int read_pending_set(const struct sink *s, size_t at, size_t to, struct txn_view *cur)
{
	struct env_manifest m;
	char err[256];
	int bad = 0;
	if (env_decode_manifest(s->f[at].p, s->f[at].len, &m, err, sizeof err) < 0 || !m.by_offset) {
		fprintf(stderr, "manifest without chunks before it\n");
		return -1;
	}
	cur->chunked = true;
	cur->xid = m.xid;
	cur->commit_lsn = m.commit_lsn;
	cur->end_lsn = m.end_lsn;
	cur->commit_time_us = m.commit_time_us;
	cur->source_id = dup_n(m.source_id, m.source_id_len);
	uint64_t prev = 0;
	for (uint32_t k = 0; k < m.chunk_count && !bad; k++) {
		uint64_t o = m.chunks[k].offset;
		if (o >= at || (k > 0 && o <= prev) || s->f[o].type != FRAME_PENDING_CHUNK ||
		    crc32c(0, s->f[o].p, s->f[o].len) != m.chunks[k].crc || m.chunks[k].changes == 0) {
			fprintf(stderr, "manifest chunk %u: offset %llu is not its pending chunk\n", k, (unsigned long long)o);
			bad++;
			break;
		}
		prev = o;
		uint32_t count = 0;
		if (decode_pending(&s->f[o], cur, k == 0, m.chunks[k].changes, &count) < 0) {
			bad++;
			break;
		}
		if (count > cur->max_chunk_changes)
			cur->max_chunk_changes = count;
		if (s->f[o].len > cur->max_payload)
			cur->max_payload = s->f[o].len;
		cur->n_chunks++;
	}
	bad += m.total_changes != cur->n_changes || m.chunk_count == 0;
	struct env_frame_summary cm;
	if (at + 1 >= to || s->f[at + 1].type != FRAME_COMMIT_MARKER ||
	    env_frame_summary(FRAME_COMMIT_MARKER, s->f[at + 1].p, s->f[at + 1].len, &cm, err, sizeof err) < 0) {
		fprintf(stderr, "no valid commit marker after the manifest\n");
		bad++;
	} else {
		bad += cm.xid != cur->xid || cm.commit_lsn != cur->commit_lsn || cm.end_lsn != cur->end_lsn;
		bad += cm.chunk_count != m.chunk_count || cm.manifest_crc != crc32c(0, s->f[at].p, s->f[at].len);
	}
	env_manifest_free(&m);
	return bad ? -1 : 2;
}

/* Group frames into committed transactions and check the chunked form's
 * bookkeeping: chunk indexes, manifest counts and CRCs, commit marker.
 * Returns the number of transactions (views in *out), or -1. */
static long parse_frames(const struct sink *s, size_t from, size_t to, struct txn_view **out)
{
	struct txn_view *views = NULL;
	size_t n = 0;
	struct txn_view cur;
	memset(&cur, 0, sizeof cur);
	int bad = 0;
	uint32_t *chunk_crc = NULL, *chunk_changes = NULL;
	size_t i = from;
	while (i < to && !bad) {
		const struct frame *f = &s->f[i];
		if (f->type == FRAME_DDL) {
			if (cur.n_ddl == 8 || decode_ddl(f, &cur.ddl[cur.n_ddl]) < 0) {
				bad++;
				break;
			}
			cur.n_ddl++;
			i++;
			continue;
		}
		if (f->type == FRAME_PENDING_CHUNK || f->type == FRAME_PENDING_ABORT) {
			i++; /* read back at its manifest; unlisted */
			continue;
		}
		uint32_t count = 0;
		if (f->type == FRAME_MANIFEST) {
			int took = read_pending_set(s, i, to, &cur);
			if (took < 0) {
				bad++;
				break;
			}
			i += (size_t)took;
		} else if (f->type == FRAME_TXN) {
			if (decode_envelope(f->p, f->len, &cur, true, &count) < 0)
				bad++;
			cur.max_payload = f->len;
			i++;
		} else if (f->type == FRAME_CHUNK) {
			cur.chunked = true;
			while (i < to && s->f[i].type == FRAME_CHUNK && !bad) {
				f = &s->f[i];
				if (f->len < 4 || be32(f->p) != cur.n_chunks) {
					fprintf(stderr, "chunk %zu: wrong index\n", cur.n_chunks);
					bad++;
					break;
				}
				size_t before = cur.n_changes;
				if (decode_envelope(f->p + 4, f->len - 4, &cur, cur.n_chunks == 0, &count) < 0) {
					bad++;
					break;
				}
				if (cur.n_changes - before != count || count == 0)
					bad++;
				if (count > cur.max_chunk_changes)
					cur.max_chunk_changes = count;
				if (f->len > cur.max_payload)
					cur.max_payload = f->len;
				chunk_crc = xrealloc(chunk_crc, (cur.n_chunks + 1) * sizeof *chunk_crc);
				chunk_changes = xrealloc(chunk_changes, (cur.n_chunks + 1) * sizeof *chunk_changes);
				chunk_crc[cur.n_chunks] = crc32c(0, f->p, f->len);
				chunk_changes[cur.n_chunks] = count;
				cur.n_chunks++;
				i++;
			}
			/* the manifest */
			struct env_manifest m;
			char err[256];
			if (bad || i >= to || s->f[i].type != FRAME_MANIFEST ||
			    env_decode_manifest(s->f[i].p, s->f[i].len, &m, err, sizeof err) < 0) {
				fprintf(stderr, "no valid manifest after the chunks\n");
				bad++;
				break;
			}
			const struct frame *mf = &s->f[i++];
			bad += m.xid != cur.xid || m.commit_lsn != cur.commit_lsn || m.end_lsn != cur.end_lsn;
			bad += m.commit_time_us != cur.commit_time_us;
			bad += !cur.source_id || m.source_id_len != strlen(cur.source_id) ||
			       memcmp(m.source_id, cur.source_id, m.source_id_len) != 0;
			bad += m.chunk_count != cur.n_chunks || m.total_changes != cur.n_changes;
			for (uint32_t k = 0; k < m.chunk_count && k < cur.n_chunks; k++)
				bad += m.chunks[k].crc != chunk_crc[k] || m.chunks[k].changes != chunk_changes[k];
			/* tables: every relation's schema.name, once */
			uint32_t distinct = 0;
			for (uint32_t r = 0; r < cur.n_relations; r++) {
				const char *name = strchr(cur.relations[r], ' ') + 1;
				size_t nl = strcspn(name, " ");
				bool seen = false;
				for (uint32_t q = 0; q < r && !seen; q++) {
					const char *other = strchr(cur.relations[q], ' ') + 1;
					seen = strcspn(other, " ") == nl && memcmp(other, name, nl) == 0;
				}
				if (seen)
					continue;
				distinct++;
				bool listed = false;
				for (uint32_t q = 0; q < m.n_tables && !listed; q++)
					listed = m.table_lens[q] == nl && memcmp(m.tables[q], name, nl) == 0;
				bad += !listed;
			}
			bad += m.n_tables != distinct;
			env_manifest_free(&m);
			if (bad)
				fprintf(stderr, "the manifest does not match the chunks\n");
			/* the commit marker */
			struct env_frame_summary cm;
			if (i >= to || s->f[i].type != FRAME_COMMIT_MARKER ||
			    env_frame_summary(FRAME_COMMIT_MARKER, s->f[i].p, s->f[i].len, &cm, err, sizeof err) < 0) {
				fprintf(stderr, "no valid commit marker after the manifest\n");
				bad++;
				break;
			}
			i++;
			bad += cm.xid != cur.xid || cm.commit_lsn != cur.commit_lsn || cm.end_lsn != cur.end_lsn;
			bad += cm.chunk_count != cur.n_chunks;
			bad += cm.manifest_crc != crc32c(0, mf->p, mf->len);
			free(chunk_crc);
			free(chunk_changes);
			chunk_crc = chunk_changes = NULL;
		} else {
			fprintf(stderr, "unexpected %s frame\n", frame_type_name(f->type));
			bad++;
			break;
		}
		/* ddl frames precede their transaction and name it */
		for (size_t k = 0; k < cur.n_ddl; k++)
			bad += cur.ddl[k].xid != cur.xid || cur.ddl[k].commit_lsn != cur.commit_lsn;
		views = unit_grow(views, n, sizeof *views);
		views[n++] = cur;
		memset(&cur, 0, sizeof cur);
	}
	if (cur.n_ddl) {
		fprintf(stderr, "ddl frames without their transaction\n");
		bad++;
	}
	view_free(&cur);
	free(chunk_crc);
	free(chunk_changes);
	CHECK(bad == 0);
	if (bad) {
		views_free(views, n);
		*out = NULL;
		return -1;
	}
	*out = views;
	return (long)n;
}

/* Every event's frames decode and agree with the event and its Commit. */
static long views_of_run(const struct run *run, struct txn_view **out)
{
	long n = parse_frames(&run->sink, 0, run->sink.n, out);
	if (n < 0)
		return -1;
	size_t k = 0;
	int bad = 0;
	for (size_t e = 0; e < run->n_ev; e++) {
		const struct event *ev = &run->ev[e];
		if (ev->r.event != ASSEMBLER_COMMITTED)
			continue;
		if (k >= (size_t)n) {
			bad++;
			break;
		}
		const struct txn_view *v = &(*out)[k++];
		bad += v->xid != ev->r.xid || v->commit_lsn != ev->r.commit_lsn || v->end_lsn != ev->r.end_lsn;
		bad += v->commit_lsn != ev->msg_commit_lsn || v->end_lsn != ev->msg_end_lsn;
		bad += v->commit_time_us != ev->msg_commit_ts + PG_EPOCH_OFFSET_US;
		bad += v->n_changes != ev->r.changes;
		bad += v->chunked != ev->r.chunked;
		bad += !v->source_id || strcmp(v->source_id, "src-test") != 0;
	}
	bad += k != (size_t)n;
	if (bad)
		fprintf(stderr, "frames and events disagree (%d)\n", bad);
	CHECK(bad == 0);
	return n;
}

static size_t count_events(const struct run *run, enum assembler_event what)
{
	size_t n = 0;
	for (size_t i = 0; i < run->n_ev; i++)
		n += run->ev[i].r.event == what;
	return n;
}

#define CHECK_CHANGE(v, i, want)                                                           \
	do {                                                                               \
		const struct txn_view *v_ = (v);                                           \
		size_t i_ = (i);                                                           \
		CHECK_STR(i_ < v_->n_changes ? v_->changes[i_] : "(none)", (want));        \
	} while (0)

/* ---- the fixtures ------------------------------------------------------- */

static void test_dml(void)
{
	struct assembler_options o = options(1000);
	struct run run;
	struct txn_view *v = NULL;
	run_fixture("dml", &o, &run, NULL, NULL);
	CHECK(run.rc == 0);
	long n = views_of_run(&run, &v);
	CHECK(n == 4);
	CHECK(count_events(&run, ASSEMBLER_COMMITTED) == 4);
	CHECK(!run.spilled);
	if (n == 4) {
		for (int i = 0; i < 4; i++) {
			CHECK(!v[i].chunked && v[i].n_relations == 1 && v[i].origin == NULL);
			CHECK_STR(v[i].n_relations ? strchr(v[i].relations[0], ' ') : NULL,
				  " public.accounts d [id:k:23:-1,owner:-:25:-1,balance:-:1700:786438]");
		}
		CHECK(v[1].xid > v[0].xid && v[2].xid > v[1].xid && v[3].xid > v[2].xid);
		CHECK(v[1].commit_lsn > v[0].commit_lsn);
		CHECK(v[0].n_changes == 2);
		CHECK_CHANGE(&v[0], 0, "I#0 public.accounts/3 new(t:1,t:alice,t:10.50)");
		CHECK_CHANGE(&v[0], 1, "I#0 public.accounts/3 new(t:2,t:bob,n)");
		CHECK(v[1].n_changes == 1);
		CHECK_CHANGE(&v[1], 0, "U#0 public.accounts/3 new(t:1,t:alice,t:99.99)");
		CHECK(v[2].n_changes == 1);
		CHECK_CHANGE(&v[2], 0, "U#0 public.accounts/3 K(t:2,n,n) new(t:3,t:carol,n)");
		CHECK(v[3].n_changes == 1);
		CHECK_CHANGE(&v[3], 0, "D#0 public.accounts/3 K(t:1,n,n)");
	}
	views_free(v, n > 0 ? (size_t)n : 0);
	run_free(&run);

	/* The same with every change spilled (threshold 1): same frames. */
	struct run spilled;
	o = options(1);
	run_fixture("dml", &o, &spilled, NULL, NULL);
	CHECK(spilled.rc == 0 && spilled.spilled);
	CHECK(spilled.max_memory_changes == 0);
	run_fixture("dml", &(struct assembler_options){ .source_id = "src-test", .flow = TEST_FLOW, .spill_dir = spill_dir,
							 .spill_threshold_changes = 1000 },
		    &run, NULL, NULL);
	bool same = run.sink.n == spilled.sink.n;
	for (size_t i = 0; same && i < run.sink.n; i++)
		same = run.sink.f[i].type == spilled.sink.f[i].type && run.sink.f[i].len == spilled.sink.f[i].len &&
		       memcmp(run.sink.f[i].p, spilled.sink.f[i].p, run.sink.f[i].len) == 0;
	CHECK(same);
	run_free(&run);
	run_free(&spilled);
}

static void test_toast(void)
{
	struct assembler_options o = options(1000);
	struct run run;
	struct txn_view *v = NULL;
	run_fixture("toast", &o, &run, NULL, NULL);
	CHECK(run.rc == 0);
	long n = views_of_run(&run, &v);
	CHECK(n == 2);
	if (n == 2) {
		struct buf want = { 0 };
		sb_str(&want, "I#0 public.documents/3 new(t:1,t:draft,t:");
		for (int i = 0; i < 1000; i++)
			sb_str(&want, "trellara-");
		sb_str(&want, ")");
		CHECK(v[0].n_changes == 1);
		CHECK_CHANGE(&v[0], 0, (const char *)want.data);
		buf_free(&want);
		/* the body was not sent: it stays the unchanged-TOAST kind */
		CHECK(v[1].n_changes == 1);
		CHECK_CHANGE(&v[1], 0, "U#0 public.documents/3 new(t:1,t:final,u)");
	}
	views_free(v, n > 0 ? (size_t)n : 0);
	run_free(&run);

	/* A change bigger than a frame may be refused, by name. */
	o.max_frame_payload = 4096;
	run_fixture("toast", &o, &run, NULL, NULL);
	CHECK(run.rc == -1);
	CHECK(strstr(run.err, "exceeds the maximum frame payload (4096 bytes)") != NULL);
	CHECK(run.sink.n == 0);
	run_free(&run);
}

static void test_replica_full(void)
{
	struct assembler_options o = options(1000);
	struct run run;
	struct txn_view *v = NULL;
	run_fixture("replica_full", &o, &run, NULL, NULL);
	CHECK(run.rc == 0);
	long n = views_of_run(&run, &v);
	CHECK(n == 3);
	if (n == 3) {
		CHECK_STR(v[0].n_relations ? strchr(v[0].relations[0], ' ') : NULL,
			  " public.audit_full f [id:k:23:-1,note:k:25:-1,amount:k:23:-1]");
		CHECK(v[0].n_changes == 2);
		CHECK_CHANGE(&v[0], 0, "I#0 public.audit_full/3 new(t:1,t:first,t:100)");
		CHECK_CHANGE(&v[0], 1, "I#0 public.audit_full/3 new(t:2,n,t:200)");
		CHECK_CHANGE(&v[1], 0, "U#0 public.audit_full/3 O(t:1,t:first,t:100) new(t:1,t:first,t:150)");
		CHECK_CHANGE(&v[2], 0, "D#0 public.audit_full/3 O(t:2,n,t:200)");
	}
	views_free(v, n > 0 ? (size_t)n : 0);
	run_free(&run);
}

static void test_truncate(void)
{
	struct assembler_options o = options(1000);
	struct run run;
	struct txn_view *v = NULL;
	run_fixture("truncate", &o, &run, NULL, NULL);
	CHECK(run.rc == 0);
	long n = views_of_run(&run, &v);
	CHECK(n == 4);
	if (n == 4) {
		CHECK_CHANGE(&v[0], 0, "I#0 public.parents/2 new(t:1,t:p1)");
		CHECK_CHANGE(&v[1], 0, "I#0 public.children/3 new(t:1,t:1,t:c1)");
		/* TRUNCATE parents RESTART IDENTITY CASCADE: both relations, flags 3 */
		CHECK(v[2].n_changes == 1 && v[2].n_relations == 2);
		CHECK_CHANGE(&v[2], 0, "T3 public.parents,public.children");
		CHECK(v[2].n_relations == 2 && strstr(v[2].relations[0], " public.parents d [") &&
		      strstr(v[2].relations[1], " public.children d [id:k:23:-1,parent_id:-:23:-1,name:-:25:-1]"));
		/* a plain TRUNCATE of children */
		CHECK(v[3].n_changes == 1 && v[3].n_relations == 1);
		CHECK_CHANGE(&v[3], 0, "T0 public.children");
	}
	views_free(v, n > 0 ? (size_t)n : 0);
	run_free(&run);
}

static void test_messages(void)
{
	struct assembler_options o = options(1000);
	struct run run;
	struct txn_view *v = NULL;
	run_fixture("messages", &o, &run, NULL, NULL);
	CHECK(run.rc == 0);
	/* frames: ddl, txn, ddl, txn; nothing for the non-transactional one */
	CHECK(run.sink.n == 4);
	if (run.sink.n == 4) {
		CHECK(run.sink.f[0].type == FRAME_DDL && run.sink.f[1].type == FRAME_TXN);
		CHECK(run.sink.f[2].type == FRAME_DDL && run.sink.f[3].type == FRAME_TXN);
	}
	CHECK(run.messages == 9);
	CHECK(run.n_ev == 2);
	long n = views_of_run(&run, &v);
	CHECK(n == 2);
	if (n == 2) {
		const char *ddl1 = "{\"ddl\":\"ALTER TABLE plain ADD COLUMN x int\"}";
		CHECK(v[0].n_ddl == 1);
		CHECK(v[0].ddl[0].xid == v[0].xid && v[0].ddl[0].commit_lsn == v[0].commit_lsn);
		CHECK_STR(v[0].ddl[0].prefix, "trellara.ddl");
		CHECK_STR(v[0].ddl[0].text, ddl1);
		CHECK(v[0].n_changes == 2);
		CHECK_CHANGE(&v[0], 0, "I#0 public.plain/2 new(t:1,t:with message)");
		char want[256];
		snprintf(want, sizeof want, "M1 trellara.ddl %s", ddl1);
		CHECK_CHANGE(&v[0], 1, want);
		/* the ddl frame's message LSN is the message's own */
		CHECK(v[0].ddl[0].message_lsn > 0 && v[0].ddl[0].message_lsn <= v[0].commit_lsn);
		CHECK(v[1].n_ddl == 1 && v[1].ddl[0].xid == v[1].xid && v[1].xid != v[0].xid);
		CHECK_STR(v[1].ddl[0].text, "alone in its transaction");
		CHECK(v[1].n_changes == 1 && v[1].n_relations == 0);
		CHECK_CHANGE(&v[1], 0, "M1 trellara.ddl alone in its transaction");
	}
	views_free(v, n > 0 ? (size_t)n : 0);
	/* the ddl frame of the first transaction, as JSON */
	if (run.sink.n >= 1) {
		char *text = NULL;
		size_t len = 0;
		char err[256];
		FILE *mem = open_memstream(&text, &len);
		CHECK(env_frame_write_json(mem, FRAME_DDL, run.sink.f[0].p, run.sink.f[0].len, err, sizeof err) == 0);
		fclose(mem);
		CHECK(text && strstr(text, "\"prefix\":\"trellara.ddl\",\"ddl\":\"{\\\"ddl\\\":\\\"ALTER TABLE plain"));
		free(text);
	}
	run_free(&run);
}

static void test_schema_change(void)
{
	struct assembler_options o = options(1000);
	struct run run;
	struct txn_view *v = NULL;
	run_fixture("schema_change", &o, &run, NULL, NULL);
	CHECK(run.rc == 0);
	long n = views_of_run(&run, &v);
	CHECK(n == 1);
	if (n == 1) {
		/* one entry per descriptor the rows were decoded with */
		CHECK(v[0].n_relations == 3);
		if (v[0].n_relations == 3) {
			CHECK(strstr(v[0].relations[0], " public.evolving d [id:k:23:-1,note:-:25:-1]"));
			CHECK(strstr(v[0].relations[1], " public.evolving d [id:k:23:-1,note:-:25:-1,extra:-:23:-1]"));
			CHECK(strstr(v[0].relations[2], " public.evolving d [id:k:23:-1,extra:-:23:-1]"));
			/* the same relation: the same oid */
			CHECK(strtoul(v[0].relations[0], NULL, 10) == strtoul(v[0].relations[2], NULL, 10));
		}
		CHECK(v[0].n_changes == 3);
		CHECK_CHANGE(&v[0], 0, "I#0 public.evolving/2 new(t:1,t:two columns)");
		CHECK_CHANGE(&v[0], 1, "I#1 public.evolving/3 new(t:2,t:three columns,t:42)");
		CHECK_CHANGE(&v[0], 2, "I#2 public.evolving/2 new(t:3,t:7)");
	}
	views_free(v, n > 0 ? (size_t)n : 0);
	run_free(&run);
}

/* stream_commit: kept-1..kept-2000, doomed-* (rolled back to the
 * savepoint), late-2001..late-2010. */
static bool stream_commit_rows(const struct txn_view *v)
{
	if (v->n_changes != 2010) {
		fprintf(stderr, "stream_commit: %zu changes\n", v->n_changes);
		return false;
	}
	for (size_t i = 0; i < 2010; i++) {
		char want[96];
		snprintf(want, sizeof want, "I#0 public.bulk/2 new(t:%zu,t:%s-%zu)", i + 1, i < 2000 ? "kept" : "late",
			 i + 1);
		if (strcmp(v->changes[i], want) != 0) {
			fprintf(stderr, "stream_commit change %zu: \"%s\", want \"%s\"\n", i, v->changes[i], want);
			return false;
		}
	}
	return true;
}

struct abort_watch {
	uint32_t top;
	long long before, after; /* spill file size around the subtransaction's Stream Abort */
	mode_t mode;
	uint64_t threshold;
	int memory_over; /* times memory held more than the threshold */
};

static void watch_abort(void *hctx, struct assembler *a, const struct pgoutput_message *msg, size_t index,
			bool after)
{
	(void)index;
	struct abort_watch *w = hctx;
	if (after && assembler_memory_changes(a) >= w->threshold)
		w->memory_over++;
	if (msg->type == PGOUTPUT_STREAM_START)
		w->top = msg->xid;
	if (msg->type != PGOUTPUT_STREAM_ABORT)
		return;
	if (!after) {
		w->before = spill_size(msg->xid);
		w->mode = spill_mode(msg->xid);
	} else {
		w->after = spill_size(msg->xid);
	}
}

static void test_stream_commit(void)
{
	/* threshold: every change spilled, odd, the brief's 100, a power of
	 * two, bigger than the cut point, bigger than the transaction */
	const uint64_t thresholds[] = { 1, 7, 100, 128, 3000, 1000000 };
	struct txn_view reference;
	memset(&reference, 0, sizeof reference);
	for (size_t t = 0; t < sizeof thresholds / sizeof thresholds[0]; t++) {
		struct assembler_options o = options(thresholds[t]);
		struct run run;
		struct txn_view *v = NULL;
		struct abort_watch w = { .threshold = thresholds[t] };
		run_fixture("stream_commit", &o, &run, watch_abort, &w);
		CHECK(run.rc == 0);
		long n = views_of_run(&run, &v);
		CHECK(n == 1);
		CHECK(count_events(&run, ASSEMBLER_ABORTED) == 1);
		CHECK(count_events(&run, ASSEMBLER_COMMITTED) == 1);
		CHECK(w.memory_over == 0);
		if (thresholds[t] < 5000) {
			/* spilled, and the Stream Abort cut the spill file back */
			CHECK(run.spilled);
			CHECK(w.before > 0 && w.after >= 0 && w.after < w.before);
			CHECK(w.mode == 0600);
		} else {
			/* in memory: no file, the cut happened in memory */
			CHECK(!run.spilled);
			CHECK(w.before == -1 && w.after == -1);
		}
		if (n == 1) {
			CHECK(!v[0].chunked);
			CHECK(stream_commit_rows(&v[0]));
			CHECK(v[0].xid == w.top);
			CHECK(v[0].n_relations == 1);
			if (t == 0) {
				reference = v[0];
				memset(&v[0], 0, sizeof v[0]);
			} else if (reference.n_changes == v[0].n_changes) {
				bool same = true;
				for (size_t i = 0; same && i < reference.n_changes; i++)
					same = strcmp(reference.changes[i], v[0].changes[i]) == 0;
				CHECK(same);
			}
		}
		views_free(v, n > 0 ? (size_t)n : 0);
		run_free(&run);
	}
	view_free(&reference);
}

static size_t frames_of_type(const struct run *run, int type)
{
	size_t n = 0;
	for (size_t i = 0; i < run->sink.n; i++)
		n += run->sink.f[i].type == type;
	return n;
}

/* A streamed transaction written once: pending chunks while it is open
 * (no spill file, memory within its share), the same transaction as the
 * spilled form at commit, the subtransaction abort cut out by the
 * manifest's changes in use; an aborted one leaves only pending chunks
 * that nothing references. */
static void test_written_once(void)
{
	struct txn_view reference;
	memset(&reference, 0, sizeof reference);
	{
		struct assembler_options o = options(1);
		o.spill_streamed = true;
		struct run run;
		struct txn_view *v = NULL;
		run_fixture("stream_commit", &o, &run, NULL, NULL);
		CHECK(views_of_run(&run, &v) == 1);
		if (v) {
			reference = v[0];
			memset(&v[0], 0, sizeof v[0]);
		}
		views_free(v, v ? 1 : 0);
		run_free(&run);
	}
	CHECK(reference.n_changes > 0);
	const uint64_t thresholds[] = { 1, 7, 100, 128, 3000, 1000000 };
	const uint64_t chunk_changes[] = { 1000, 5 };
	for (size_t c = 0; c < 2; c++)
		for (size_t t = 0; t < sizeof thresholds / sizeof thresholds[0]; t++) {
			struct assembler_options o = options(thresholds[t]);
			o.spill_streamed = false;
			o.max_changes_per_chunk = chunk_changes[c];
			struct run run;
			struct txn_view *v = NULL;
			run_fixture("stream_commit", &o, &run, NULL, NULL);
			CHECK(run.rc == 0);
			CHECK(!run.spilled);
			long n = views_of_run(&run, &v);
			CHECK(n == 1);
			CHECK(count_events(&run, ASSEMBLER_ABORTED) == 1);
			size_t pending = frames_of_type(&run, FRAME_PENDING_CHUNK);
			if (thresholds[t] < 5000) { /* the transaction holds more */
				/* written as it came, listed by a version 2 manifest */
				CHECK(pending > 0);
				CHECK(n == 1 && v[0].chunked);
				CHECK(frames_of_type(&run, FRAME_MANIFEST) == 1 && frames_of_type(&run, FRAME_COMMIT_MARKER) == 1);
				/* memory: the share, or a partial chunk below it */
				CHECK(run.max_memory_changes <= (thresholds[t] > chunk_changes[c] ? thresholds[t] : chunk_changes[c]));
				CHECK(n == 1 && v[0].max_chunk_changes <= chunk_changes[c]);
			} else {
				/* it fitted: today's form */
				CHECK(pending == 0);
				CHECK(n == 1 && !v[0].chunked);
			}
			if (n == 1) {
				CHECK(stream_commit_rows(&v[0]));
				bool same = reference.n_changes == v[0].n_changes;
				for (size_t i = 0; same && i < reference.n_changes; i++)
					same = strcmp(reference.changes[i], v[0].changes[i]) == 0;
				if (!same)
					fprintf(stderr, "written once, threshold %llu, chunks of %llu: not the spilled transaction\n",
						(unsigned long long)thresholds[t], (unsigned long long)chunk_changes[c]);
				CHECK(same);
			}
			views_free(v, n > 0 ? (size_t)n : 0);
			run_free(&run);
		}
	view_free(&reference);

	/* a top-level abort: pending chunks, nothing that references them */
	struct assembler_options o = options(10);
	o.spill_streamed = false;
	struct run run;
	run_fixture("stream_abort", &o, &run, NULL, NULL);
	CHECK(run.rc == 0);
	CHECK(!run.spilled);
	/* its pending chunks, then one pending_abort naming it */
	CHECK(run.sink.n > 1 && frames_of_type(&run, FRAME_PENDING_CHUNK) == run.sink.n - 1);
	CHECK(run.sink.n > 0 && run.sink.f[run.sink.n - 1].type == FRAME_PENDING_ABORT);
	if (run.sink.n > 1) {
		struct env_frame_summary ps, pa;
		char err[256];
		CHECK(env_frame_summary(FRAME_PENDING_CHUNK, run.sink.f[0].p, run.sink.f[0].len, &ps, err, sizeof err) == 0);
		const struct frame *last = &run.sink.f[run.sink.n - 1];
		CHECK(env_frame_summary(FRAME_PENDING_ABORT, last->p, last->len, &pa, err, sizeof err) == 0);
		CHECK(pa.xid == ps.xid && pa.run == ps.run);
	}
	CHECK(run.n_ev == 1 && run.n_ev && run.ev[0].r.event == ASSEMBLER_ABORTED);
	struct txn_view *v = NULL;
	CHECK(views_of_run(&run, &v) == 0);
	views_free(v, 0);
	run_free(&run);
}

static void test_stream_abort(void)
{
	const char *names[] = { "stream_abort", "stream_abort_late" };
	const uint64_t thresholds[] = { 100, 1000000 };
	for (int f = 0; f < 2; f++)
		for (int t = 0; t < 2; t++) {
			struct assembler_options o = options(thresholds[t]);
			struct run run;
			run_fixture(names[f], &o, &run, NULL, NULL);
			CHECK(run.rc == 0);
			CHECK(run.sink.n == 0);
			CHECK(run.n_ev == 1 && run.n_ev && run.ev[0].r.event == ASSEMBLER_ABORTED);
			if (f == 0)
				CHECK(run.spilled == (t == 0));
			else
				CHECK(!run.spilled);
			run_free(&run);
		}
}

static void test_origin(void)
{
	struct assembler_options o = options(100);
	struct run run;
	struct txn_view *v = NULL;
	run_fixture("origin", &o, &run, NULL, NULL);
	CHECK(run.rc == 0);
	long n = views_of_run(&run, &v);
	CHECK(n == 2);
	if (n == 2) {
		CHECK_STR(v[0].origin, "trellara_upstream");
		CHECK(v[0].origin_lsn == 0x1234ABCDULL);
		CHECK(v[0].n_changes == 1);
		CHECK_CHANGE(&v[0], 0, "I#0 public.plain/2 new(t:10,t:from upstream)");
		/* streamed: the Origin after the first Stream Start, LSN 0 */
		CHECK_STR(v[1].origin, "trellara_upstream");
		CHECK(v[1].origin_lsn == 0);
		CHECK(v[1].n_changes == 1000);
		int bad = 0;
		for (size_t i = 0; i < v[1].n_changes; i++) {
			char want[96];
			snprintf(want, sizeof want, "I#0 public.bulk/2 new(t:%zu,t:upstream-%zu)", 300001 + i, 300001 + i);
			bad += strcmp(v[1].changes[i], want) != 0;
		}
		CHECK(bad == 0);
	}
	/* the JSON names the origin */
	if (run.sink.n >= 1) {
		char *text = NULL;
		size_t len = 0;
		char err[256];
		FILE *mem = open_memstream(&text, &len);
		CHECK(env_frame_write_json(mem, run.sink.f[0].type, run.sink.f[0].p, run.sink.f[0].len, err, sizeof err) ==
		      0);
		fclose(mem);
		CHECK(text && strstr(text, "\"origin\":\"trellara_upstream\""));
		free(text);
	}
	views_free(v, n > 0 ? (size_t)n : 0);
	run_free(&run);
}

/* ---- the chunked form --------------------------------------------------- */

static void test_chunked(void)
{
	const uint64_t thresholds[] = { 100, 1000000 };
	for (int t = 0; t < 2; t++) {
		struct assembler_options o = options(thresholds[t]);
		o.strict_chunking = true;
		o.max_changes_per_chunk = 100;
		struct run run;
		struct txn_view *v = NULL;
		run_fixture("stream_commit", &o, &run, NULL, NULL);
		CHECK(run.rc == 0);
		/* 2010 changes: 20 chunks of 100 and one of 10, manifest, marker */
		CHECK(run.sink.n == 21 + 2);
		long n = views_of_run(&run, &v);
		CHECK(n == 1);
		if (n == 1) {
			CHECK(v[0].chunked && v[0].n_chunks == 21);
			CHECK(v[0].max_chunk_changes == 100);
			CHECK(stream_commit_rows(&v[0]));
		}
		CHECK(run.n_ev == 2 && run.ev[1].r.chunked && run.ev[1].r.frames == 23);
		views_free(v, n > 0 ? (size_t)n : 0);
		run_free(&run);
	}

	/* strict chunking on small transactions: one chunk each */
	struct assembler_options o = options(1000);
	o.strict_chunking = true;
	struct run run;
	struct txn_view *v = NULL;
	run_fixture("dml", &o, &run, NULL, NULL);
	long n = views_of_run(&run, &v);
	CHECK(n == 4 && run.sink.n == 12);
	if (n == 4) {
		CHECK(v[0].chunked && v[0].n_chunks == 1 && v[0].n_changes == 2);
		CHECK_CHANGE(&v[0], 1, "I#0 public.accounts/3 new(t:2,t:bob,n)");
		CHECK_CHANGE(&v[3], 0, "D#0 public.accounts/3 K(t:1,n,n)");
	}
	views_free(v, n > 0 ? (size_t)n : 0);
	run_free(&run);

	/* ddl frames come before the chunks too */
	run_fixture("messages", &o, &run, NULL, NULL);
	n = views_of_run(&run, &v);
	CHECK(n == 2 && run.sink.n == 2 * (1 + 3));
	if (n == 2)
		CHECK(v[0].chunked && v[0].n_ddl == 1 && run.sink.f[0].type == FRAME_DDL);
	views_free(v, n > 0 ? (size_t)n : 0);
	run_free(&run);

	/* No strict chunking, a small frame limit: the big transaction is
	 * chunked by size, the small ones stay whole. */
	o = options(100);
	run_fixture("stream_commit", &o, &run, NULL, NULL);
	size_t whole = run.sink.n == 1 ? run.sink.f[0].len : 0;
	CHECK(whole > 32 * 1024 && whole < 64 * 1024);
	run_free(&run);
	/* 64 KiB and exactly the envelope's size: one txn frame */
	const size_t fits[] = { 64 * 1024, whole };
	for (int l = 0; l < 2; l++) {
		o = options(100);
		o.max_frame_payload = fits[l];
		run_fixture("stream_commit", &o, &run, NULL, NULL);
		CHECK(run.sink.n == 1 && run.sink.n && run.sink.f[0].type == FRAME_TXN && run.sink.f[0].len == whole);
		run_free(&run);
	}
	/* one byte less, and smaller: chunked by size */
	const size_t limits[] = { whole - 1, 32 * 1024, 16 * 1024, 4 * 1024 };
	for (int l = 0; l < 4; l++) {
		o = options(100);
		o.max_frame_payload = limits[l];
		run_fixture("stream_commit", &o, &run, NULL, NULL);
		CHECK(run.rc == 0);
		n = views_of_run(&run, &v);
		CHECK(n == 1);
		if (n == 1) {
			CHECK(v[0].chunked);
			CHECK(v[0].n_chunks >= 2);
			CHECK(v[0].max_payload <= limits[l]);
			CHECK(stream_commit_rows(&v[0]));
		}
		views_free(v, n > 0 ? (size_t)n : 0);
		run_free(&run);
	}
	o = options(100);
	o.max_frame_payload = 64 * 1024;
	run_fixture("dml", &o, &run, NULL, NULL);
	n = views_of_run(&run, &v);
	CHECK(n == 4 && run.sink.n == 4);
	for (long i = 0; i < n; i++)
		CHECK(!v[i].chunked);
	views_free(v, n > 0 ? (size_t)n : 0);
	run_free(&run);

	/* the origin's streamed transaction, chunked by count and spilled */
	o = options(7);
	o.strict_chunking = true;
	o.max_changes_per_chunk = 333;
	run_fixture("origin", &o, &run, NULL, NULL);
	n = views_of_run(&run, &v);
	CHECK(n == 2);
	if (n == 2) {
		CHECK(v[1].chunked && v[1].n_chunks == 4 && v[1].max_chunk_changes == 333 && v[1].n_changes == 1000);
		CHECK_STR(v[1].origin, "trellara_upstream");
	}
	views_free(v, n > 0 ? (size_t)n : 0);
	run_free(&run);
}

/* ---- skipping, emit failures, reset ------------------------------------- */

static void test_skip(void)
{
	struct assembler_options o = options(1000);
	struct run all;
	run_fixture("dml", &o, &all, NULL, NULL);
	CHECK(all.n_ev == 4);
	if (all.n_ev != 4) {
		run_free(&all);
		return;
	}
	/* skip through the second transaction's commit */
	o.skip_through_commit_lsn = all.ev[1].r.commit_lsn;
	struct run run;
	run_fixture("dml", &o, &run, NULL, NULL);
	CHECK(run.rc == 0);
	CHECK(run.n_ev == 4);
	if (run.n_ev == 4) {
		CHECK(run.ev[0].r.event == ASSEMBLER_SKIPPED && run.ev[1].r.event == ASSEMBLER_SKIPPED);
		CHECK(run.ev[0].r.xid == all.ev[0].r.xid && run.ev[0].r.changes == 2);
		CHECK(run.ev[2].r.event == ASSEMBLER_COMMITTED && run.ev[3].r.event == ASSEMBLER_COMMITTED);
	}
	/* the frames are exactly the last two of the full run */
	CHECK(run.sink.n == 2 && all.sink.n == 4);
	for (size_t i = 0; i < run.sink.n && all.sink.n == 4; i++)
		CHECK(run.sink.f[i].len == all.sink.f[i + 2].len &&
		      memcmp(run.sink.f[i].p, all.sink.f[i + 2].p, run.sink.f[i].len) == 0);
	run_free(&run);
	/* one below the first commit: nothing skipped */
	o.skip_through_commit_lsn = all.ev[0].r.commit_lsn - 1;
	run_fixture("dml", &o, &run, NULL, NULL);
	CHECK(run.sink.n == 4 && count_events(&run, ASSEMBLER_SKIPPED) == 0);
	run_free(&run);
	run_free(&all);

	/* a spilled streamed transaction, skipped: no frame, no spill file left */
	o = options(100);
	o.skip_through_commit_lsn = UINT64_MAX;
	run_fixture("stream_commit", &o, &run, NULL, NULL);
	CHECK(run.rc == 0 && run.spilled);
	CHECK(run.sink.n == 0);
	CHECK(count_events(&run, ASSEMBLER_SKIPPED) == 1 && count_events(&run, ASSEMBLER_COMMITTED) == 0);
	run_free(&run);
	/* and the same through assembler_set_skip_through, set at the first message */
	o = options(100);
	run_fixture("messages", &o, &run, NULL, NULL);
	uint64_t second = run.n_ev == 2 ? run.ev[1].r.commit_lsn : 0;
	run_free(&run);
	struct fixture fx;
	if (fixture_load("messages", &fx) == 0) {
		char err[256];
		struct pgoutput_session session;
		struct assembler *a = NULL;
		struct pgoutput_message msg;
		struct sink sink = { .fail_at = -1 };
		CHECK(pgoutput_session_init(&session, fx.proto_version, err, sizeof err) == 0);
		CHECK(assembler_open(&a, &o, err, sizeof err) == 0);
		assembler_set_skip_through(a, second);
		pgoutput_message_init(&msg);
		size_t skipped = 0;
		for (size_t i = 0; i < fx.count && a; i++) {
			struct assembler_result res;
			CHECK(pgoutput_session_decode(&session, fx.msgs[i], fx.lens[i], &msg, err, sizeof err) == 0);
			CHECK(assembler_feed(a, &session, &msg, collect, &sink, &res, err, sizeof err) == 0);
			skipped += res.event == ASSEMBLER_SKIPPED;
		}
		/* both skipped, ddl frames too */
		CHECK(skipped == 2 && sink.n == 0);
		sink_free(&sink);
		pgoutput_message_release(&msg);
		assembler_close(a);
		pgoutput_session_free(&session);
		fixture_free(&fx);
	}
	CHECK_SPILL_EMPTY();
}

static void test_emit_failure(void)
{
	/* refuse the first frame, the txn frame after a ddl frame, a chunk,
	 * the manifest, the commit marker */
	struct {
		const char *fixture;
		bool strict;
		long fail_at;
		const char *what;
	} cases[] = {
		{ "dml", false, 0, "txn" },
		{ "messages", false, 1, "txn" },
		{ "messages", false, 0, "ddl" },
		{ "stream_commit", true, 3, "chunk" },
		{ "stream_commit", true, 21, "manifest" },
		{ "stream_commit", true, 22, "commit_marker" },
	};
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		struct fixture fx;
		if (fixture_load(cases[k].fixture, &fx) < 0) {
			CHECK(!"fixture loads");
			continue;
		}
		struct assembler_options o = options(100);
		o.strict_chunking = cases[k].strict;
		o.max_changes_per_chunk = 100;
		char err[256];
		struct pgoutput_session session;
		struct assembler *a = NULL;
		struct pgoutput_message msg;
		struct sink sink = { .fail_at = cases[k].fail_at };
		CHECK(pgoutput_session_init(&session, fx.proto_version, err, sizeof err) == 0);
		CHECK(assembler_open(&a, &o, err, sizeof err) == 0);
		pgoutput_message_init(&msg);
		int rc = 0;
		for (size_t i = 0; i < fx.count && rc == 0; i++) {
			struct assembler_result res;
			CHECK(pgoutput_session_decode(&session, fx.msgs[i], fx.lens[i], &msg, err, sizeof err) == 0);
			rc = assembler_feed(a, &session, &msg, collect, &sink, &res, err, sizeof err);
		}
		CHECK(rc == ASSEMBLER_EMIT_FAILED);
		char want[64];
		snprintf(want, sizeof want, "did not take a %s frame", cases[k].what);
		if (!strstr(err, want))
			fprintf(stderr, "emit failure %zu: \"%s\"\n", k, err);
		CHECK(strstr(err, want) != NULL);
		CHECK(sink.n == (size_t)cases[k].fail_at);
		/* the failed transaction is gone, with its spill file */
		CHECK(!assembler_in_transaction(a));
		CHECK_SPILL_EMPTY();
		sink_free(&sink);
		pgoutput_message_release(&msg);
		assembler_close(a);
		pgoutput_session_free(&session);
		fixture_free(&fx);
	}
}

static void test_reset_and_stale(void)
{
	/* stale spill files of this flow's earlier process are removed at
	 * open; other flows' spill files (a flow whose identity extends
	 * this one's included) and other files are left alone */
	char path[128];
	snprintf(path, sizeof path, "%s/%s.4242.spill", spill_dir, TEST_FLOW_IN_NAME);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		fputs("stale", f);
		fclose(f);
	}
	const char *keep_names[] = { "keep.txt", "4242.spill", "src-test%3Aother.4242.spill",
				     TEST_FLOW_IN_NAME "x.4242.spill", TEST_FLOW_IN_NAME ".4242.spill.tmp",
				     TEST_FLOW_IN_NAME "..spill" };
	char keep[6][128];
	for (size_t k = 0; k < 6; k++) {
		snprintf(keep[k], sizeof keep[k], "%s/%s", spill_dir, keep_names[k]);
		f = fopen(keep[k], "w");
		if (f)
			fclose(f);
	}
	struct assembler *a = NULL;
	char err[256];
	struct assembler_options o = options(100);
	CHECK(assembler_open(&a, &o, err, sizeof err) == 0);
	CHECK(spill_size(4242) == -1);
	for (size_t k = 0; k < 6; k++) {
		CHECK(access(keep[k], F_OK) == 0);
		unlink(keep[k]);
	}
	CHECK_SPILL_EMPTY();
	/* no flow identity: refused, naming what is missing */
	struct assembler *none = NULL;
	o.flow = NULL;
	CHECK(assembler_open(&none, &o, err, sizeof err) == -1 && strstr(err, "flow identity") != NULL);
	o.flow = TEST_FLOW;

	/* reset in the middle of a spilled streamed transaction */
	struct fixture fx;
	if (a && fixture_load("stream_commit", &fx) == 0) {
		struct pgoutput_session session;
		struct pgoutput_message msg;
		struct sink sink = { .fail_at = -1 };
		CHECK(pgoutput_session_init(&session, fx.proto_version, err, sizeof err) == 0);
		pgoutput_message_init(&msg);
		for (size_t i = 0; i < 1500 && i < fx.count; i++) {
			struct assembler_result res;
			CHECK(pgoutput_session_decode(&session, fx.msgs[i], fx.lens[i], &msg, err, sizeof err) == 0);
			CHECK(assembler_feed(a, &session, &msg, collect, &sink, &res, err, sizeof err) == 0);
		}
		CHECK(assembler_in_transaction(a));
		CHECK(spill_entries() == 1);
		assembler_reset(a);
		pgoutput_session_reset(&session);
		CHECK(!assembler_in_transaction(a));
		CHECK(assembler_memory_changes(a) == 0);
		CHECK_SPILL_EMPTY();
		/* the server sends everything again: the whole transaction comes out */
		for (size_t i = 0; i < fx.count; i++) {
			struct assembler_result res;
			CHECK(pgoutput_session_decode(&session, fx.msgs[i], fx.lens[i], &msg, err, sizeof err) == 0);
			CHECK(assembler_feed(a, &session, &msg, collect, &sink, &res, err, sizeof err) == 0);
		}
		struct txn_view *v = NULL;
		long n = parse_frames(&sink, 0, sink.n, &v);
		CHECK(n == 1);
		if (n == 1)
			CHECK(stream_commit_rows(&v[0]));
		views_free(v, n > 0 ? (size_t)n : 0);
		sink_free(&sink);
		pgoutput_message_release(&msg);
		pgoutput_session_free(&session);
		fixture_free(&fx);
	}
	assembler_close(a);
	CHECK_SPILL_EMPTY();
}

/* ---- hand-built streams --------------------------------------------------- */

struct msgb {
	struct fixture *fx;
	struct buf b;
};

static void mb_begin(struct msgb *m, char type)
{
	m->b.len = 0;
	buf_put_u8(&m->b, (uint8_t)type);
}

static void mb_cstr(struct msgb *m, const char *s)
{
	buf_put(&m->b, s, strlen(s) + 1);
}

static void mb_end(struct msgb *m)
{
	fixture_add(m->fx, m->b.data, m->b.len);
}

static void stream_start(struct msgb *m, uint32_t xid, bool first)
{
	mb_begin(m, 'S');
	buf_put_u32(&m->b, xid);
	buf_put_u8(&m->b, first ? 1 : 0);
	mb_end(m);
}

static void stream_stop(struct msgb *m)
{
	mb_begin(m, 'E');
	mb_end(m);
}

#define TEST_RELID 90001

static void stream_relation(struct msgb *m, uint32_t xid)
{
	mb_begin(m, 'R');
	buf_put_u32(&m->b, xid);
	buf_put_u32(&m->b, TEST_RELID);
	mb_cstr(m, "public");
	mb_cstr(m, "hand");
	buf_put_u8(&m->b, 'd');
	buf_put_u16(&m->b, 1);
	buf_put_u8(&m->b, 1);
	mb_cstr(m, "id");
	buf_put_u32(&m->b, 25);
	buf_put_u32(&m->b, 0xffffffffU);
	mb_end(m);
}

static void stream_insert(struct msgb *m, uint32_t xid, const char *value)
{
	mb_begin(m, 'I');
	buf_put_u32(&m->b, xid);
	buf_put_u32(&m->b, TEST_RELID);
	buf_put_u8(&m->b, 'N');
	buf_put_u16(&m->b, 1);
	buf_put_u8(&m->b, 't');
	buf_put_u32(&m->b, (uint32_t)strlen(value));
	buf_put(&m->b, value, strlen(value));
	mb_end(m);
}

static void stream_insert_n(struct msgb *m, uint32_t xid, char fill, size_t len)
{
	mb_begin(m, 'I');
	buf_put_u32(&m->b, xid);
	buf_put_u32(&m->b, TEST_RELID);
	buf_put_u8(&m->b, 'N');
	buf_put_u16(&m->b, 1);
	buf_put_u8(&m->b, 't');
	buf_put_u32(&m->b, (uint32_t)len);
	buf_reserve(&m->b, len);
	memset(m->b.data + m->b.len, fill, len);
	m->b.len += len;
	mb_end(m);
}

static void stream_truncate(struct msgb *m, uint32_t xid, uint8_t flags)
{
	mb_begin(m, 'T');
	buf_put_u32(&m->b, xid);
	buf_put_u32(&m->b, 1);
	buf_put_u8(&m->b, flags);
	buf_put_u32(&m->b, TEST_RELID);
	mb_end(m);
}

/* "I#0 public.hand/1 new(t:" + len x fill + ")" */
static char *big_repr(char fill, size_t len)
{
	struct buf b = { 0 };
	sb_str(&b, "I#0 public.hand/1 new(t:");
	buf_reserve(&b, len + 2);
	memset(b.data + b.len, fill, len);
	b.len += len;
	sb_str(&b, ")");
	return (char *)b.data;
}

static void stream_message(struct msgb *m, uint32_t xid, uint64_t lsn, const char *prefix, const char *content)
{
	mb_begin(m, 'M');
	buf_put_u32(&m->b, xid);
	buf_put_u8(&m->b, 1);
	buf_put_u64(&m->b, lsn);
	mb_cstr(m, prefix);
	buf_put_u32(&m->b, (uint32_t)strlen(content));
	buf_put(&m->b, content, strlen(content));
	mb_end(m);
}

static void stream_abort(struct msgb *m, uint32_t xid, uint32_t subxid)
{
	mb_begin(m, 'A');
	buf_put_u32(&m->b, xid);
	buf_put_u32(&m->b, subxid);
	mb_end(m);
}

static void stream_commit(struct msgb *m, uint32_t xid, uint64_t commit_lsn)
{
	mb_begin(m, 'c');
	buf_put_u32(&m->b, xid);
	buf_put_u8(&m->b, 0);
	buf_put_u64(&m->b, commit_lsn);
	buf_put_u64(&m->b, commit_lsn + 0x30);
	buf_put_u64(&m->b, 700000000000000ULL);
	mb_end(m);
}

/* Runs a hand-built stream at several thresholds; every run must give
 * the same single transaction with the wanted changes and ddl texts. */
static void check_hand_stream(struct fixture *fx, const char *const *want, size_t n_want, const char *const *ddl,
			      size_t n_ddl, int line)
{
	const uint64_t thresholds[] = { 1, 2, 3, 1000 };
	for (size_t t = 0; t < 8; t++) {
		struct assembler_options o = options(thresholds[t % 4]);
		o.spill_streamed = t < 4; /* then written once */
		struct run run;
		struct txn_view *v = NULL;
		run_messages(fx, &o, &run, NULL, NULL);
		CHECK(run.rc == 0);
		long n = views_of_run(&run, &v);
		int bad = n != 1;
		if (n == 1) {
			bad += v[0].n_changes != n_want;
			for (size_t i = 0; i < n_want && i < v[0].n_changes; i++)
				bad += strcmp(v[0].changes[i], want[i]) != 0;
			bad += v[0].n_ddl != n_ddl;
			for (size_t i = 0; i < n_ddl && i < v[0].n_ddl; i++)
				bad += strcmp(v[0].ddl[i].text, ddl[i]) != 0;
			if (bad)
				for (size_t i = 0; i < v[0].n_changes; i++)
					fprintf(stderr, "  change %zu: %s\n", i, v[0].changes[i]);
			if (bad)
				for (size_t i = 0; i < v[0].n_ddl; i++)
					fprintf(stderr, "  ddl %zu: %s\n", i, v[0].ddl[i].text);
		}
		if (bad)
			fprintf(stderr, "%s:%d: hand-built stream, threshold %llu, %s: wrong transaction\n", __FILE__, line,
				(unsigned long long)thresholds[t % 4], t < 4 ? "spilled" : "written once");
		CHECK(bad == 0);
		views_free(v, n > 0 ? (size_t)n : 0);
		run_free(&run);
	}
}

static void test_hand_streams(void)
{
	struct fixture fx = { .proto_version = 2 };
	struct msgb m = { .fx = &fx };

	/* DDL inside a rolled-back subtransaction leaves no ddl frame; the
	 * kept DDL does. */
	stream_start(&m, 900, true);
	stream_relation(&m, 900);
	stream_insert(&m, 900, "1");
	stream_message(&m, 901, 0x1000, "trellara.ddl", "doomed ddl");
	stream_insert(&m, 901, "2");
	stream_stop(&m);
	stream_abort(&m, 900, 901);
	stream_start(&m, 900, false);
	stream_message(&m, 900, 0x2000, "trellara.ddl", "kept ddl");
	stream_insert(&m, 900, "3");
	stream_stop(&m);
	stream_commit(&m, 900, 0x3000);
	const char *want1[] = { "I#0 public.hand/1 new(t:1)", "M1 trellara.ddl kept ddl", "I#0 public.hand/1 new(t:3)" };
	const char *ddl1[] = { "kept ddl" };
	check_hand_stream(&fx, want1, 3, ddl1, 1, __LINE__);
	fixture_free(&fx);

	/* Cuts: a subtransaction aborted after later (nested) ones, a
	 * subtransaction with no change, the cut in memory after a spill. */
	fx.proto_version = 2;
	stream_start(&m, 900, true);
	stream_relation(&m, 900);
	stream_insert(&m, 900, "1");
	stream_insert(&m, 900, "2");
	stream_insert(&m, 900, "3");
	stream_insert(&m, 900, "4");
	stream_insert(&m, 901, "5");
	stream_insert(&m, 902, "6");
	stream_insert(&m, 901, "7");
	stream_stop(&m);
	stream_abort(&m, 900, 902); /* cut at 6 */
	stream_abort(&m, 900, 903); /* made nothing */
	stream_start(&m, 900, false);
	stream_insert(&m, 901, "8");
	stream_insert(&m, 904, "9");
	stream_insert(&m, 900, "10");
	stream_stop(&m);
	stream_abort(&m, 900, 901); /* cut at 5: drops 7, 8, and 904's 9, 10 */
	stream_start(&m, 900, false);
	stream_insert(&m, 900, "11");
	stream_message(&m, 905, 0x2000, "trellara.ddl", "ddl of 905");
	stream_insert(&m, 905, "12");
	stream_stop(&m);
	stream_commit(&m, 900, 0x3000);
	const char *want2[] = { "I#0 public.hand/1 new(t:1)", "I#0 public.hand/1 new(t:2)", "I#0 public.hand/1 new(t:3)",
				"I#0 public.hand/1 new(t:4)", "I#0 public.hand/1 new(t:11)",
				"M1 trellara.ddl ddl of 905", "I#0 public.hand/1 new(t:12)" };
	const char *ddl2[] = { "ddl of 905" };
	check_hand_stream(&fx, want2, 7, ddl2, 1, __LINE__);
	fixture_free(&fx);

	/* Two streamed transactions interleaved, each spilling: both spill
	 * files at once, each committed with its own rows. */
	fx.proto_version = 2;
	stream_start(&m, 910, true);
	stream_relation(&m, 910);
	stream_insert(&m, 910, "a1");
	stream_insert(&m, 910, "a2");
	stream_stop(&m);
	stream_start(&m, 920, true);
	stream_insert(&m, 920, "b1");
	stream_insert(&m, 920, "b2");
	stream_insert(&m, 921, "b3");
	stream_stop(&m);
	stream_start(&m, 910, false);
	stream_insert(&m, 910, "a3");
	stream_stop(&m);
	stream_abort(&m, 920, 921);
	stream_commit(&m, 920, 0x5000);
	stream_commit(&m, 910, 0x6000);
	struct assembler_options o = options(1);
	struct run run;
	struct txn_view *v = NULL;
	run_messages(&fx, &o, &run, NULL, NULL);
	CHECK(run.rc == 0 && run.spilled);
	long n = views_of_run(&run, &v);
	CHECK(n == 2);
	if (n == 2) {
		CHECK(v[0].xid == 920 && v[0].n_changes == 2);
		CHECK_CHANGE(&v[0], 1, "I#0 public.hand/1 new(t:b2)");
		CHECK(v[1].xid == 910 && v[1].n_changes == 3);
		CHECK_CHANGE(&v[1], 2, "I#0 public.hand/1 new(t:a3)");
	}
	views_free(v, n > 0 ? (size_t)n : 0);
	run_free(&run);
	fixture_free(&fx);

	/* A streamed transaction that only aborted subtransactions touched:
	 * empty at commit, no frame. */
	fx.proto_version = 2;
	stream_start(&m, 930, true);
	stream_relation(&m, 930);
	stream_insert(&m, 931, "x");
	stream_message(&m, 931, 0x100, "trellara.ddl", "never happened");
	stream_stop(&m);
	stream_abort(&m, 930, 931);
	stream_commit(&m, 930, 0x7000);
	o = options(1);
	run_messages(&fx, &o, &run, NULL, NULL);
	CHECK(run.rc == 0 && run.sink.n == 0);
	CHECK(count_events(&run, ASSEMBLER_EMPTY) == 1);
	run_free(&run);
	fixture_free(&fx);

	/* verify's fence (DESIGN §9): a transaction with only trellara.fence
	 * messages is ASSEMBLER_FENCE with no frame; beside rows the fence
	 * message is dropped and the rows are emitted; any other prefix stays
	 * a Message change. */
	fx.proto_version = 2;
	stream_start(&m, 940, true);
	stream_message(&m, 940, 0x100, "trellara.fence", "trellara-verify fence at 0/100 for flow s/d");
	stream_stop(&m);
	stream_commit(&m, 940, 0x8000);
	o = options(1);
	run_messages(&fx, &o, &run, NULL, NULL);
	CHECK(run.rc == 0 && run.sink.n == 0);
	CHECK(count_events(&run, ASSEMBLER_FENCE) == 1 && count_events(&run, ASSEMBLER_EMPTY) == 0);
	run_free(&run);
	fixture_free(&fx);
	fx.proto_version = 2;
	stream_start(&m, 950, true);
	stream_relation(&m, 950);
	stream_insert(&m, 950, "1");
	stream_message(&m, 950, 0x100, "trellara.fence", "fence");
	stream_message(&m, 950, 0x200, "trellara.fenced", "not a fence");
	stream_stop(&m);
	stream_commit(&m, 950, 0x9000);
	const char *want3[] = { "I#0 public.hand/1 new(t:1)", "M1 trellara.fenced not a fence" };
	check_hand_stream(&fx, want3, 2, NULL, 0, __LINE__);
	fixture_free(&fx);
	buf_free(&m.b);
}

/* Changes bigger than the emit window (1 MiB) and than the memory bound
 * (8 MiB), and a change that straddles the window's end. */
static void test_big_changes(void)
{
	struct fixture fx = { .proto_version = 2 };
	struct msgb m = { .fx = &fx };
	const size_t big = 3u << 20;
	stream_start(&m, 940, true);
	stream_relation(&m, 940);
	stream_insert(&m, 940, "s1");
	for (int i = 0; i < 4; i++) {
		stream_insert_n(&m, 940, (char)('a' + i), big);
		stream_insert(&m, 940, "s2");
	}
	stream_stop(&m);
	stream_commit(&m, 940, 0x9000);
	char *want[10];
	size_t nw = 0;
	want[nw++] = xstrdup("I#0 public.hand/1 new(t:s1)");
	for (int i = 0; i < 4; i++) {
		want[nw++] = big_repr((char)('a' + i), big);
		want[nw++] = xstrdup("I#0 public.hand/1 new(t:s2)");
	}
	for (int strict = 0; strict < 2; strict++) {
		struct assembler_options o = options(1000);
		o.strict_chunking = strict;
		struct run run;
		struct txn_view *v = NULL;
		run_messages(&fx, &o, &run, NULL, NULL);
		CHECK(run.rc == 0);
		/* far fewer changes than the threshold: spilled by bytes */
		CHECK(run.spilled);
		long n = views_of_run(&run, &v);
		CHECK(n == 1);
		if (n == 1) {
			CHECK(v[0].chunked == (strict == 1));
			CHECK(v[0].n_changes == nw);
			int bad = 0;
			for (size_t i = 0; i < nw && i < v[0].n_changes; i++)
				bad += strcmp(v[0].changes[i], want[i]) != 0;
			CHECK(bad == 0);
		}
		views_free(v, n > 0 ? (size_t)n : 0);
		run_free(&run);
	}
	for (size_t i = 0; i < nw; i++)
		free(want[i]);
	fixture_free(&fx);

	/* An insert whose change bytes end 7 bytes before the window's end,
	 * then a Truncate whose relation list crosses it. */
	fx.proto_version = 2;
	size_t len = (1u << 20) - 7 - 12;
	stream_start(&m, 950, true);
	stream_relation(&m, 950);
	stream_insert_n(&m, 950, 'y', len);
	stream_truncate(&m, 950, 1);
	stream_insert(&m, 950, "after");
	stream_stop(&m);
	stream_commit(&m, 950, 0xA000);
	char *w0 = big_repr('y', len);
	for (int t = 0; t < 2; t++) {
		struct assembler_options o = options(t == 0 ? 1 : 1000);
		o.strict_chunking = true;
		struct run run;
		struct txn_view *v = NULL;
		run_messages(&fx, &o, &run, NULL, NULL);
		CHECK(run.rc == 0);
		if (run.rc)
			fprintf(stderr, "straddling truncate: %s\n", run.err);
		long n = views_of_run(&run, &v);
		CHECK(n == 1);
		if (n == 1) {
			CHECK(v[0].n_changes == 3);
			CHECK_CHANGE(&v[0], 0, w0);
			CHECK_CHANGE(&v[0], 1, "T1 public.hand");
			CHECK_CHANGE(&v[0], 2, "I#0 public.hand/1 new(t:after)");
		}
		views_free(v, n > 0 ? (size_t)n : 0);
		run_free(&run);
	}
	free(w0);
	fixture_free(&fx);

	/* A change that fits the frame limit alone but not with the
	 * envelope's head: never an oversized frame. */
	fx.proto_version = 2;
	stream_start(&m, 960, true);
	stream_relation(&m, 960);
	stream_insert_n(&m, 960, 'z', 4000);
	stream_stop(&m);
	stream_commit(&m, 960, 0xB000);
	for (int strict = 0; strict < 2; strict++) {
		struct assembler_options o = options(1000);
		o.strict_chunking = strict;
		o.max_frame_payload = 4096;
		struct run run;
		run_messages(&fx, &o, &run, NULL, NULL);
		size_t biggest = 0;
		for (size_t i = 0; i < run.sink.n; i++)
			if (run.sink.f[i].len > biggest)
				biggest = run.sink.f[i].len;
		if (biggest > 4096 || run.rc == 0)
			fprintf(stderr, "oversized change: rc %d, biggest frame %zu: %s\n", run.rc, biggest, run.err);
		CHECK(biggest <= 4096);
		CHECK(run.rc == -1 && strstr(run.err, "4096") != NULL);
		run_free(&run);
	}
	fixture_free(&fx);
	buf_free(&m.b);
}

/* ---- many subtransactions ------------------------------------------------ */

/* One streamed transaction of 50 000 subtransactions with one insert each
 * (what a plpgsql loop around BEGIN ... EXCEPTION makes), every 10th rolled
 * back by Stream Abort, some top-level inserts in between, spilling: the
 * kept rows, in order.  (Quadratic bookkeeping would make this test take
 * minutes under the sanitizers.) */
static void test_many_subxacts(void)
{
	struct fixture fx = { .proto_version = 2 };
	struct msgb m = { .fx = &fx };
	const uint32_t top = 5000, n = 50000;
	size_t n_want = 0;
	char **want = xcalloc(n + n / 1000, sizeof *want);
	stream_start(&m, top, true);
	stream_relation(&m, top);
	for (uint32_t i = 1; i <= n; i++) {
		char v[32];
		snprintf(v, sizeof v, "s%u", i);
		stream_insert(&m, top + i, v);
		if (i % 10 == 0) {
			stream_stop(&m);
			stream_abort(&m, top, top + i);
			stream_start(&m, top, false);
		} else {
			want[n_want++] = xasprintf("I#0 public.hand/1 new(t:%s)", v);
		}
		if (i % 1000 == 0) {
			snprintf(v, sizeof v, "t%u", i);
			stream_insert(&m, top, v);
			want[n_want++] = xasprintf("I#0 public.hand/1 new(t:%s)", v);
		}
	}
	/* a subtransaction that made no change, and one aborted twice */
	stream_stop(&m);
	stream_abort(&m, top, top + n + 7);
	stream_abort(&m, top, top + 10);
	stream_commit(&m, top, 0xC000);
	for (int t = 0; t < 2; t++) {
		struct assembler_options o = options(t == 0 ? 100 : 1000000);
		struct run run;
		struct txn_view *v = NULL;
		run_messages(&fx, &o, &run, NULL, NULL);
		CHECK(run.rc == 0);
		CHECK(run.spilled == (t == 0));
		CHECK(count_events(&run, ASSEMBLER_ABORTED) == n / 10 + 2);
		long nv = views_of_run(&run, &v);
		CHECK(nv == 1);
		if (nv == 1) {
			CHECK(v[0].xid == top && v[0].n_changes == n_want);
			size_t bad = 0;
			for (size_t i = 0; i < n_want && i < v[0].n_changes; i++)
				if (strcmp(v[0].changes[i], want[i]) != 0 && bad++ == 0)
					fprintf(stderr, "change %zu: %s, want %s\n", i, v[0].changes[i], want[i]);
			CHECK(bad == 0);
		}
		views_free(v, nv > 0 ? (size_t)nv : 0);
		run_free(&run);
	}
	for (size_t i = 0; i < n_want; i++)
		free(want[i]);
	free(want);
	fixture_free(&fx);
	buf_free(&m.b);
}

/* ---- two flows, one spill directory --------------------------------------- */

struct flow_feed {
	struct assembler *a;
	struct pgoutput_session session;
	struct pgoutput_message msg;
	struct sink sink;
};

static void flow_feed_open(struct flow_feed *ff, const char *flow)
{
	char err[256];
	memset(ff, 0, sizeof *ff);
	ff->sink.fail_at = -1;
	struct assembler_options o = options(1);
	o.flow = flow;
	CHECK(pgoutput_session_init(&ff->session, 2, err, sizeof err) == 0);
	pgoutput_message_init(&ff->msg);
	CHECK(assembler_open(&ff->a, &o, err, sizeof err) == 0);
}

static void flow_feed_messages(struct flow_feed *ff, const struct fixture *fx, size_t from, size_t to)
{
	char err[256];
	for (size_t i = from; i < to && i < fx->count && ff->a; i++) {
		struct assembler_result res;
		CHECK(pgoutput_session_decode(&ff->session, fx->msgs[i], fx->lens[i], &ff->msg, err, sizeof err) == 0);
		int rc = assembler_feed(ff->a, &ff->session, &ff->msg, collect, &ff->sink, &res, err, sizeof err);
		if (rc != 0)
			fprintf(stderr, "two flows: %s\n", err);
		CHECK(rc == 0);
	}
}

static void flow_feed_close(struct flow_feed *ff)
{
	assembler_close(ff->a);
	pgoutput_message_release(&ff->msg);
	pgoutput_session_free(&ff->session);
	sink_free(&ff->sink);
}

/* The rows of the one transaction a flow emitted, joined by spaces. */
static bool flow_rows_are(const struct flow_feed *ff, const char *const *want, size_t n_want)
{
	struct txn_view *v = NULL;
	long n = parse_frames(&ff->sink, 0, ff->sink.n, &v);
	bool ok = n == 1 && v[0].n_changes == n_want;
	for (size_t i = 0; ok && i < n_want; i++)
		ok = strcmp(v[0].changes[i], want[i]) == 0;
	if (!ok && n == 1)
		for (size_t i = 0; i < v[0].n_changes; i++)
			fprintf(stderr, "  change %zu: %s\n", i, v[0].changes[i]);
	views_free(v, n > 0 ? (size_t)n : 0);
	return ok;
}

/* Two flows of one source decode the same transaction (same xid), each
 * with its own rows, both spilling, interleaved; then one flow restarts
 * while the other holds its spilled transaction. */
static void test_two_flows_one_spill_dir(void)
{
	struct fixture fa = { .proto_version = 2 }, fb = { .proto_version = 2 };
	struct msgb ma = { .fx = &fa }, mb = { .fx = &fb };
	const char *rows_a[] = { "a1", "a2", "a3", "a4" }, *rows_b[] = { "b1", "b2", "b3", "b4" };
	stream_start(&ma, 970, true);
	stream_relation(&ma, 970);
	stream_start(&mb, 970, true);
	stream_relation(&mb, 970);
	for (int i = 0; i < 4; i++) {
		stream_insert(&ma, 970, rows_a[i]);
		stream_insert(&mb, 970, rows_b[i]);
	}
	stream_stop(&ma);
	stream_commit(&ma, 970, 0xD000);
	stream_stop(&mb);
	stream_commit(&mb, 970, 0xD000);
	const char *want_a[] = { "I#0 public.hand/1 new(t:a1)", "I#0 public.hand/1 new(t:a2)", "I#0 public.hand/1 new(t:a3)",
				 "I#0 public.hand/1 new(t:a4)" };
	const char *want_b[] = { "I#0 public.hand/1 new(t:b1)", "I#0 public.hand/1 new(t:b2)", "I#0 public.hand/1 new(t:b3)",
				 "I#0 public.hand/1 new(t:b4)" };
	/* messages: 0 start, 1 relation, 2..5 inserts, 6 stop, 7 commit */
	struct flow_feed a, b;
	flow_feed_open(&a, "src-test:flow-a");
	flow_feed_open(&b, "src-test:flow-b");
	for (size_t i = 0; i < 6; i++) {
		flow_feed_messages(&a, &fa, i, i + 1);
		flow_feed_messages(&b, &fb, i, i + 1);
	}
	CHECK(spill_entries() == 2); /* one file each */
	flow_feed_messages(&a, &fa, 6, 8);
	flow_feed_messages(&b, &fb, 6, 8);
	CHECK(flow_rows_are(&a, want_a, 4));
	CHECK(flow_rows_are(&b, want_b, 4));
	CHECK_SPILL_EMPTY();
	flow_feed_close(&a);
	flow_feed_close(&b);

	/* b holds the transaction spilled; a restarts (a new assembler of
	 * flow a opens the directory) and decodes the same xid again */
	flow_feed_open(&b, "src-test:flow-b");
	flow_feed_messages(&b, &fb, 0, 6);
	CHECK(spill_entries() == 1);
	flow_feed_open(&a, "src-test:flow-a");
	CHECK(spill_entries() == 1); /* b's file is still there */
	flow_feed_messages(&a, &fa, 0, 8);
	CHECK(flow_rows_are(&a, want_a, 4));
	flow_feed_messages(&b, &fb, 6, 8);
	CHECK(flow_rows_are(&b, want_b, 4));
	CHECK_SPILL_EMPTY();
	flow_feed_close(&a);
	flow_feed_close(&b);

	/* names: unusual bytes are escaped, a long identity is cut with a
	 * checksum; neither makes an invalid or clashing file name */
	char longflow[600];
	memset(longflow, 'x', sizeof longflow - 1);
	longflow[sizeof longflow - 1] = '\0';
	const char *odd[] = { "src/../x:ds", "src:ds with space", longflow };
	for (size_t k = 0; k < 3; k++) {
		flow_feed_open(&a, odd[k]);
		flow_feed_messages(&a, &fa, 0, 6);
		CHECK(spill_entries() == 1);
		DIR *d = opendir(spill_dir);
		struct dirent *e;
		while (d && (e = readdir(d)) != NULL) {
			if (e->d_name[0] == '.')
				continue;
			CHECK(strlen(e->d_name) < 128);
			CHECK(strchr(e->d_name, ' ') == NULL);
		}
		if (d)
			closedir(d);
		flow_feed_messages(&a, &fa, 6, 8);
		CHECK(flow_rows_are(&a, want_a, 4));
		flow_feed_close(&a);
		CHECK_SPILL_EMPTY();
	}
	/* two long identities that differ only at the end do not share names */
	char longflow2[600];
	memcpy(longflow2, longflow, sizeof longflow);
	longflow2[sizeof longflow2 - 2] = 'y';
	flow_feed_open(&a, longflow);
	flow_feed_open(&b, longflow2);
	flow_feed_messages(&a, &fa, 0, 6);
	flow_feed_messages(&b, &fb, 0, 6);
	CHECK(spill_entries() == 2);
	flow_feed_messages(&a, &fa, 6, 8);
	flow_feed_messages(&b, &fb, 6, 8);
	CHECK(flow_rows_are(&a, want_a, 4));
	CHECK(flow_rows_are(&b, want_b, 4));
	flow_feed_close(&a);
	flow_feed_close(&b);
	CHECK_SPILL_EMPTY();
	fixture_free(&fa);
	fixture_free(&fb);
	buf_free(&ma.b);
	buf_free(&mb.b);
}

int main(void)
{
	snprintf(spill_dir, sizeof spill_dir, "%s", "/tmp/trellara-assembler-XXXXXX");
	if (!mkdtemp(spill_dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_dml();
	test_toast();
	test_replica_full();
	test_truncate();
	test_messages();
	test_schema_change();
	test_stream_commit();
	test_stream_abort();
	test_written_once();
	test_origin();
	test_chunked();
	test_skip();
	test_emit_failure();
	test_reset_and_stale();
	test_hand_streams();
	test_big_changes();
	test_many_subxacts();
	test_two_flows_one_spill_dir();
	CHECK_SPILL_EMPTY();
	CHECK(rmdir(spill_dir) == 0);
	return unit_done("assembler");
}
