/*
 * assembler.c - pgoutput messages to stream frames (assembler.h).
 */
#include "trellara/assembler.h"
#include "trellara/ack_policy.h"

#include "trellara/checksum.h"
#include "trellara/defaults.h"
#include "trellara/envelope.h"
#include "trellara/fsutil.h"
#include "trellara/lsn.h"
#include "trellara/stream.h"
#include "trellara/strbuf.h"
#include "trellara/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* PostgreSQL timestamps count µs from 2000-01-01; envelopes from 1970. */
#define PG_EPOCH_OFFSET_US 946684800000000LL

/* A relation as a transaction used it: a private copy of the descriptor. */
struct txn_relation {
	uint32_t relid;
	unsigned generation;
	char *schema, *name; /* owned */
	uint8_t replident;
	uint16_t n_columns;
	struct env_column *columns; /* owned; names owned through name_store */
	char **name_store;          /* owned */
};

struct subxact {
	uint32_t xid;
	uint64_t first_change; /* change index */
	uint64_t first_byte;   /* position in the change bytes (spill + memory) */
};

/* Where a (sub)transaction's entry in txn.subxacts is: an open-addressing
 * table (linear probing) so that noting the xid of every change, and
 * finding a subtransaction at Stream Abort, take constant time whatever
 * the number of subtransactions.  Entries are never deleted: one whose
 * index no longer holds its xid (cut by a Stream Abort) is stale, and the
 * table is rebuilt from the array when it fills up. */
struct subxact_slot {
	uint32_t xid;
	uint32_t index_plus1; /* 0: empty */
};

struct ddl_message {
	uint64_t change; /* index of its Message change (Stream Abort cuts it too) */
	uint64_t lsn;
	uint8_t *content; /* owned */
	uint32_t len;
};

struct txn {
	uint32_t xid;
	bool streamed;
	uint64_t final_lsn;
	int64_t commit_ts;
	char *origin; /* owned */
	uint64_t origin_lsn;
	struct txn_relation *relations; /* owned */
	uint32_t n_relations;
	struct buf memory;       /* encoded changes not yet spilled */
	uint64_t memory_changes;
	uint64_t changes;        /* all changes */
	int spill_fd;
	char *spill_path;        /* owned */
	uint64_t spill_bytes;
	struct subxact *subxacts; /* owned; in order of first change */
	size_t n_subxacts, subxacts_cap;
	struct subxact_slot *slots; /* owned: xid -> subxacts index */
	size_t slots_cap, slots_used;  /* slots_cap: 0 or a power of two */
	struct ddl_message *ddl;  /* owned */
	size_t n_ddl;
};

struct relation_generation {
	uint32_t relid;
	unsigned generation;
};

struct assembler {
	struct assembler_options options;
	char *source_id; /* owned */
	char *spill_dir; /* owned */
	char *flow;      /* owned */
	char *spill_prefix; /* owned: the flow's name in spill file names */
	struct txn **txns; /* owned: open transactions (streamed ones and the current one) */
	size_t n_txns;
	struct txn *current;  /* the Begin..Commit transaction, if any */
	struct txn *in_block; /* the streamed transaction of the open stream block */
	struct relation_generation *generations; /* owned */
	size_t n_generations;
};

/* The flow identity as it appears in spill file names: letters, digits,
 * "_" and "-" as they are, every other byte as %XX, so the name has no
 * "." and no "/"; a long one is cut and ends in "~" and the CRC-32C of the
 * whole identity, to stay far below NAME_MAX. */
#define SPILL_PREFIX_MAX 96

static char *spill_prefix_of(const char *flow)
{
	struct buf b = { 0 };
	for (const unsigned char *p = (const unsigned char *)flow; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
		    *p == '-') {
			buf_put_u8(&b, *p);
		} else {
			char esc[4];
			snprintf(esc, sizeof esc, "%%%02X", *p);
			buf_put(&b, esc, 3);
		}
		if (b.len > SPILL_PREFIX_MAX) {
			char tail[16];
			int n = snprintf(tail, sizeof tail, "~%08x", crc32c(0, flow, strlen(flow)));
			b.len = SPILL_PREFIX_MAX - (size_t)n;
			while (b.len > 0 && (b.data[b.len - 1] == '%' || (b.len > 1 && b.data[b.len - 2] == '%')))
				b.len--; /* never cut an escape in half */
			buf_put(&b, tail, (size_t)n);
			break;
		}
	}
	buf_put_u8(&b, 0);
	return (char *)b.data;
}

/* Is NAME "<prefix>.<digits>.spill"? */
static bool is_flow_spill_file(const char *name, const char *prefix)
{
	size_t pl = strlen(prefix);
	if (strncmp(name, prefix, pl) != 0 || name[pl] != '.')
		return false;
	const char *p = name + pl + 1;
	if (*p < '0' || *p > '9')
		return false;
	while (*p >= '0' && *p <= '9')
		p++;
	return strcmp(p, ".spill") == 0;
}

/* Spill files of this flow's previous process: useless, the server sends
 * those transactions again.  Other flows' files are left alone. */
static void remove_stale_spill_files(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (is_flow_spill_file(e->d_name, prefix)) {
			char *p = xasprintf("%s/%s", dir, e->d_name);
			unlink(p);
			free(p);
		}
	}
	closedir(d);
}

int assembler_open(struct assembler **out, const struct assembler_options *o, char *err, size_t errlen)
{
	if (!o->flow || !*o->flow)
		return errbuf_setf(err, errlen, "the transaction assembler needs the flow identity (it names the spill files)");
	if (fs_mkdir_p(o->spill_dir) < 0)
		return errbuf_setf(err, errlen, "cannot create spill directory \"%s\"", o->spill_dir);
	struct assembler *a = xcalloc(1, sizeof *a);
	a->options = *o;
	a->source_id = xstrdup(o->source_id);
	a->spill_dir = xstrdup(o->spill_dir);
	a->flow = xstrdup(o->flow);
	a->spill_prefix = spill_prefix_of(o->flow);
	a->options.source_id = a->source_id;
	a->options.spill_dir = a->spill_dir;
	a->options.flow = a->flow;
	if (a->options.spill_threshold_changes == 0)
		a->options.spill_threshold_changes = 1;
	if (a->options.max_changes_per_chunk == 0)
		a->options.max_changes_per_chunk = DEFAULT_MAX_CHANGES_PER_CHUNK;
	if (a->options.max_frame_payload == 0 || a->options.max_frame_payload > MAX_FRAME_PAYLOAD)
		a->options.max_frame_payload = MAX_FRAME_PAYLOAD;
	if (a->options.target_frame_payload == 0 || a->options.target_frame_payload > FRAME_TARGET_PAYLOAD)
		a->options.target_frame_payload = FRAME_TARGET_PAYLOAD;
	if (a->options.target_frame_payload > a->options.max_frame_payload)
		a->options.target_frame_payload = a->options.max_frame_payload;
	remove_stale_spill_files(a->spill_dir, a->spill_prefix);
	*out = a;
	return 0;
}

static void txn_free(struct txn *t)
{
	if (!t)
		return;
	if (t->spill_fd >= 0) {
		close(t->spill_fd);
		unlink(t->spill_path);
	}
	free(t->spill_path);
	for (uint32_t i = 0; i < t->n_relations; i++) {
		struct txn_relation *r = &t->relations[i];
		for (uint16_t c = 0; c < r->n_columns; c++)
			free(r->name_store[c]);
		free(r->name_store);
		free(r->columns);
		free(r->schema);
		free(r->name);
	}
	free(t->relations);
	buf_free(&t->memory);
	free(t->subxacts);
	free(t->slots);
	for (size_t i = 0; i < t->n_ddl; i++)
		free(t->ddl[i].content);
	free(t->ddl);
	free(t->origin);
	free(t);
}

static void txn_remove(struct assembler *a, struct txn *t)
{
	for (size_t i = 0; i < a->n_txns; i++)
		if (a->txns[i] == t) {
			a->txns[i] = a->txns[--a->n_txns];
			break;
		}
	if (a->current == t)
		a->current = NULL;
	if (a->in_block == t)
		a->in_block = NULL;
	txn_free(t);
}

static struct txn *txn_new(struct assembler *a, uint32_t xid, bool streamed)
{
	struct txn *t = xcalloc(1, sizeof *t);
	t->xid = xid;
	t->streamed = streamed;
	t->spill_fd = -1;
	a->txns = xrealloc(a->txns, (a->n_txns + 1) * sizeof *a->txns);
	a->txns[a->n_txns++] = t;
	return t;
}

static struct txn *txn_find(struct assembler *a, uint32_t xid)
{
	for (size_t i = 0; i < a->n_txns; i++)
		if (a->txns[i]->streamed && a->txns[i]->xid == xid)
			return a->txns[i];
	return NULL;
}

void assembler_reset(struct assembler *a)
{
	while (a->n_txns)
		txn_remove(a, a->txns[0]);
	a->current = a->in_block = NULL;
}

bool assembler_in_transaction(const struct assembler *a)
{
	return a->n_txns > 0;
}

uint64_t assembler_memory_changes(const struct assembler *a)
{
	uint64_t n = 0;
	for (size_t i = 0; i < a->n_txns; i++)
		n += a->txns[i]->memory_changes;
	return n;
}

void assembler_set_skip_through(struct assembler *a, uint64_t commit_lsn)
{
	a->options.skip_through_commit_lsn = commit_lsn;
}

void assembler_close(struct assembler *a)
{
	if (!a)
		return;
	assembler_reset(a);
	free(a->txns);
	free(a->generations);
	free(a->source_id);
	free(a->spill_dir);
	free(a->flow);
	free(a->spill_prefix);
	free(a);
}

static unsigned *generation_of(struct assembler *a, uint32_t relid)
{
	for (size_t i = 0; i < a->n_generations; i++)
		if (a->generations[i].relid == relid)
			return &a->generations[i].generation;
	a->generations = xrealloc(a->generations, (a->n_generations + 1) * sizeof *a->generations);
	a->generations[a->n_generations] = (struct relation_generation){ relid, 0 };
	return &a->generations[a->n_generations++].generation;
}

/* The transaction's relation-table index for a descriptor, adding a
 * private copy on first use. */
static uint32_t txn_relation_index(struct assembler *a, struct txn *t, const struct pgoutput_relation *rel)
{
	unsigned gen = *generation_of(a, rel->relid);
	for (uint32_t i = 0; i < t->n_relations; i++)
		if (t->relations[i].relid == rel->relid && t->relations[i].generation == gen)
			return i;
	t->relations = xrealloc(t->relations, (t->n_relations + 1) * sizeof *t->relations);
	struct txn_relation *r = &t->relations[t->n_relations];
	memset(r, 0, sizeof *r);
	r->relid = rel->relid;
	r->generation = gen;
	r->schema = xstrdup(rel->nspname);
	r->name = xstrdup(rel->relname);
	r->replident = (uint8_t)rel->replident;
	r->n_columns = (uint16_t)rel->natts;
	r->columns = xcalloc(rel->natts ? (size_t)rel->natts : 1, sizeof *r->columns);
	r->name_store = xcalloc(rel->natts ? (size_t)rel->natts : 1, sizeof *r->name_store);
	for (int c = 0; c < rel->natts; c++) {
		r->name_store[c] = xstrdup(rel->columns[c].name);
		r->columns[c].name = r->name_store[c];
		r->columns[c].name_len = strlen(r->name_store[c]);
		r->columns[c].type_oid = rel->columns[c].type_oid;
		r->columns[c].typmod = rel->columns[c].typmod;
		r->columns[c].key = rel->columns[c].key;
	}
	return t->n_relations++;
}

static int spill(struct assembler *a, struct txn *t, char *err, size_t errlen)
{
	if (t->memory.len == 0)
		return 0;
	if (t->spill_fd < 0) {
		t->spill_path = xasprintf("%s/%s.%u.spill", a->spill_dir, a->spill_prefix, t->xid);
		t->spill_fd = open(t->spill_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (t->spill_fd < 0) {
			errbuf_setf(err, errlen, "cannot create spill file \"%s\": %s", t->spill_path, strerror(errno));
			return ASSEMBLER_STORAGE_FAILED;
		}
	}
	if (fs_pwrite_all(t->spill_fd, t->memory.data, t->memory.len, (off_t)t->spill_bytes, t->spill_path) < 0) {
		errbuf_setf(err, errlen, "cannot write spill file \"%s\"", t->spill_path);
		return ASSEMBLER_STORAGE_FAILED;
	}
	t->spill_bytes += t->memory.len;
	t->memory.len = 0;
	t->memory_changes = 0;
	/* a single huge change grew the buffer: do not keep that */
	if (t->memory.cap > 2 * ASSEMBLER_MAX_MEMORY_BYTES)
		buf_free(&t->memory);
	return 0;
}

static void encode_tuple(struct buf *b, const struct pgoutput_tuple *tuple)
{
	env_encode_tuple_begin(b, (uint16_t)tuple->ncols);
	for (int i = 0; i < tuple->ncols; i++) {
		const struct pgoutput_column *c = &tuple->cols[i];
		uint8_t kind = c->kind == PGOUTPUT_COLUMN_NULL ? ENV_NULL
			       : c->kind == PGOUTPUT_COLUMN_UNCHANGED_TOAST ? ENV_UNCHANGED_TOAST
									    : ENV_TEXT;
		env_encode_value(b, kind, c->value, c->len);
	}
}

static size_t subxact_hash(uint32_t xid, size_t cap)
{
	uint32_t h = xid * 0x9E3779B1U; /* Fibonacci hashing: consecutive xids spread out */
	h ^= h >> 16;
	return (size_t)h & (cap - 1);
}

/* The slot for xid: the one holding it, or the empty one ending its probe. */
static struct subxact_slot *subxact_slot(const struct txn *t, uint32_t xid)
{
	size_t i = subxact_hash(xid, t->slots_cap);
	while (t->slots[i].index_plus1 != 0 && t->slots[i].xid != xid)
		i = (i + 1) & (t->slots_cap - 1);
	return &t->slots[i];
}

/* The subxacts index of xid, or -1. */
static long subxact_find(const struct txn *t, uint32_t xid)
{
	if (t->slots_cap == 0)
		return -1;
	const struct subxact_slot *s = subxact_slot(t, xid);
	if (s->index_plus1 == 0)
		return -1;
	size_t i = s->index_plus1 - 1;
	return i < t->n_subxacts && t->subxacts[i].xid == xid ? (long)i : -1; /* else stale */
}

static void subxact_slots_rebuild(struct txn *t)
{
	size_t cap = t->slots_cap ? t->slots_cap : 64;
	while (cap < 4 * (t->n_subxacts + 1))
		cap *= 2;
	free(t->slots);
	t->slots = xcalloc(cap, sizeof *t->slots);
	t->slots_cap = cap;
	t->slots_used = 0;
	for (size_t k = 0; k < t->n_subxacts; k++) {
		struct subxact_slot *s = subxact_slot(t, t->subxacts[k].xid);
		if (s->index_plus1 == 0)
			t->slots_used++;
		*s = (struct subxact_slot){ t->subxacts[k].xid, (uint32_t)(k + 1) };
	}
}

/* Record the change's (sub)transaction for Stream Abort: its first
 * change, in constant time. */
static void note_subxact(struct txn *t, uint32_t xid)
{
	if (subxact_find(t, xid) >= 0)
		return;
	if (2 * (t->slots_used + 1) > t->slots_cap)
		subxact_slots_rebuild(t);
	if (t->n_subxacts == t->subxacts_cap) {
		t->subxacts_cap = t->subxacts_cap ? 2 * t->subxacts_cap : 16;
		t->subxacts = xrealloc(t->subxacts, t->subxacts_cap * sizeof *t->subxacts);
	}
	size_t k = t->n_subxacts++;
	t->subxacts[k] = (struct subxact){ xid, t->changes, t->spill_bytes + t->memory.len };
	struct subxact_slot *s = subxact_slot(t, xid);
	if (s->index_plus1 == 0)
		t->slots_used++;
	*s = (struct subxact_slot){ xid, (uint32_t)(k + 1) };
}

static int add_change(struct assembler *a, struct txn *t, const struct pgoutput_session *session,
		      const struct pgoutput_message *msg, char *err, size_t errlen)
{
	if (t->streamed && msg->has_xid)
		note_subxact(t, msg->xid);
	struct buf *b = &t->memory;
	size_t before = b->len;
	switch (msg->type) {
	case PGOUTPUT_INSERT:
	case PGOUTPUT_UPDATE:
	case PGOUTPUT_DELETE: {
		const struct pgoutput_relation *rel = msg->change.relation;
		if (!rel)
			rel = pgoutput_relcache_lookup(&session->relcache, msg->change.relid);
		if (!rel)
			return errbuf_setf(err, errlen, "transaction %u: %s for unknown relation %u", t->xid,
				    pgoutput_type_name(msg->type), msg->change.relid);
		for (int i = 0; msg->type != PGOUTPUT_DELETE && i < msg->change.new_tuple.ncols; i++)
			if (msg->change.new_tuple.cols[i].kind == PGOUTPUT_COLUMN_BINARY)
				return errbuf_setf(err, errlen, "transaction %u: binary column values are not supported", t->xid);
		uint32_t index = txn_relation_index(a, t, rel);
		buf_put_u8(b, (uint8_t)msg->type);
		buf_put_u32(b, index);
		if (msg->type != PGOUTPUT_INSERT)
			buf_put_u8(b, (uint8_t)msg->change.old_kind);
		if (msg->type != PGOUTPUT_INSERT && msg->change.old_kind != PGOUTPUT_OLD_NONE)
			encode_tuple(b, &msg->change.old_tuple);
		if (msg->type != PGOUTPUT_DELETE)
			encode_tuple(b, &msg->change.new_tuple);
		break;
	}
	case PGOUTPUT_TRUNCATE: {
		uint32_t *indexes = xmalloc((size_t)(msg->truncate.nrelids ? msg->truncate.nrelids : 1) * sizeof *indexes);
		for (int i = 0; i < msg->truncate.nrelids; i++) {
			const struct pgoutput_relation *rel =
				pgoutput_relcache_lookup(&session->relcache, msg->truncate.relids[i]);
			if (!rel) {
				free(indexes);
				return errbuf_setf(err, errlen, "transaction %u: Truncate of unknown relation %u", t->xid,
					    msg->truncate.relids[i]);
			}
			indexes[i] = txn_relation_index(a, t, rel);
		}
		buf_put_u8(b, ENV_TRUNCATE);
		buf_put_u8(b, (uint8_t)((msg->truncate.cascade ? 1 : 0) | (msg->truncate.restart_identity ? 2 : 0)));
		buf_put_u32(b, (uint32_t)msg->truncate.nrelids);
		for (int i = 0; i < msg->truncate.nrelids; i++)
			buf_put_u32(b, indexes[i]);
		free(indexes);
		break;
	}
	case PGOUTPUT_MESSAGE:
		if (strlen(msg->message.prefix) > UINT16_MAX)
			return errbuf_setf(err, errlen, "transaction %u: a logical message prefix of %zu bytes is longer than %u",
				    t->xid, strlen(msg->message.prefix), UINT16_MAX);
		buf_put_u8(b, ENV_MESSAGE);
		buf_put_u8(b, msg->message.transactional ? 1 : 0);
		buf_put_u64(b, msg->message.lsn);
		buf_put_str(b, msg->message.prefix, strlen(msg->message.prefix));
		buf_put_u32(b, msg->message.len);
		buf_put(b, msg->message.content, msg->message.len);
		if (strcmp(msg->message.prefix, ASSEMBLER_DDL_PREFIX) == 0) {
			t->ddl = xrealloc(t->ddl, (t->n_ddl + 1) * sizeof *t->ddl);
			struct ddl_message *m = &t->ddl[t->n_ddl++];
			m->change = t->changes;
			m->lsn = msg->message.lsn;
			m->len = msg->message.len;
			m->content = xmalloc(m->len ? m->len : 1);
			if (m->len)
				memcpy(m->content, msg->message.content, m->len);
		}
		break;
	default:
		return 0;
	}
	if (b->len - before + 64 > a->options.max_frame_payload)
		return errbuf_setf(err, errlen,
			    "transaction %u: one change of %zu bytes exceeds the maximum frame payload (%zu bytes)",
			    t->xid, b->len - before, a->options.max_frame_payload);
	t->changes++;
	t->memory_changes++;
	if (t->memory_changes >= a->options.spill_threshold_changes || t->memory.len >= ASSEMBLER_MAX_MEMORY_BYTES)
		return spill(a, t, err, errlen);
	return 0;
}

/* Cut a streamed transaction back to the first change of subxid. */
static int abort_subxact(struct txn *t, uint32_t subxid, char *err, size_t errlen)
{
	long i = subxact_find(t, subxid);
	if (i < 0)
		return 0; /* it made no changes */
	uint64_t cut = t->subxacts[i].first_byte;
	t->changes = t->subxacts[i].first_change;
	if (cut >= t->spill_bytes) {
		t->memory.len = (size_t)(cut - t->spill_bytes);
	} else {
		if (ftruncate(t->spill_fd, (off_t)cut) < 0) {
			errbuf_setf(err, errlen, "cannot truncate spill file \"%s\": %s", t->spill_path, strerror(errno));
			return ASSEMBLER_STORAGE_FAILED;
		}
		t->spill_bytes = cut;
		t->memory.len = 0;
	}
	/* DDL messages of the cut changes did not happen either */
	while (t->n_ddl > 0 && t->ddl[t->n_ddl - 1].change >= t->changes)
		free(t->ddl[--t->n_ddl].content);
	/* memory_changes is a bound, not an exact count: recount lazily */
	t->memory_changes = t->memory.len ? t->memory_changes : 0;
	/* later subtransactions started after this one: cut too.  The array
	 * is in order of first change, so they are its tail (each entry is
	 * removed once: constant time per subtransaction); their slots go
	 * stale. */
	while (t->n_subxacts > 0 && t->subxacts[t->n_subxacts - 1].first_byte >= cut)
		t->n_subxacts--;
	return 0;
}

/* ---- emitting a committed transaction ---- */

struct emit_ctx {
	struct assembler *a;
	struct txn *t;
	struct env_header_fields h;
	assembler_emit_fn emit;
	void *ctx;
	struct assembler_result *result;
	char *err;
	size_t errlen;
};

static int do_emit(struct emit_ctx *e, int type, const uint8_t *payload, size_t len)
{
	if (e->emit(e->ctx, type, payload, len) < 0) {
		errbuf_setf(e->err, e->errlen, "transaction %u: the stream did not take a %s frame", e->t->xid,
		     frame_type_name(type));
		return ASSEMBLER_EMIT_FAILED;
	}
	e->result->frames++;
	return 0;
}

static void encode_envelope_head(struct buf *b, const struct emit_ctx *e)
{
	env_encode_header(b, &e->h);
	buf_put_u32(b, e->t->n_relations);
	for (uint32_t i = 0; i < e->t->n_relations; i++) {
		const struct txn_relation *r = &e->t->relations[i];
		env_encode_relation(b, r->relid, r->schema, r->name, r->replident, r->n_columns, r->columns);
	}
}

/* Read the transaction's change bytes [pos, pos+len) from spill + memory. */
static int read_changes(struct emit_ctx *e, uint64_t pos, uint8_t *dst, size_t len)
{
	struct txn *t = e->t;
	while (len > 0) {
		if (pos < t->spill_bytes) {
			size_t n = (size_t)(t->spill_bytes - pos < len ? t->spill_bytes - pos : len);
			ssize_t got = pread(t->spill_fd, dst, n, (off_t)pos);
			if (got <= 0) {
				errbuf_setf(e->err, e->errlen, "cannot read spill file \"%s\": %s", t->spill_path,
				     got < 0 ? strerror(errno) : "short file");
				return ASSEMBLER_STORAGE_FAILED;
			}
			pos += (uint64_t)got;
			dst += got;
			len -= (size_t)got;
		} else {
			size_t off = (size_t)(pos - t->spill_bytes);
			memcpy(dst, t->memory.data + off, len);
			return 0;
		}
	}
	return 0;
}

static int emit_single(struct emit_ctx *e, size_t head_len_hint)
{
	struct buf b = { 0 };
	uint64_t total = e->t->spill_bytes + e->t->memory.len;
	buf_reserve(&b, head_len_hint + 4 + (size_t)total);
	encode_envelope_head(&b, e);
	buf_put_u32(&b, (uint32_t)e->t->changes);
	buf_reserve(&b, (size_t)total);
	int rc = read_changes(e, 0, b.data + b.len, (size_t)total);
	if (rc == 0) {
		b.len += (size_t)total;
		rc = do_emit(e, FRAME_TXN, b.data, b.len);
	}
	buf_free(&b);
	return rc;
}

static int emit_chunked(struct emit_ctx *e)
{
	struct assembler *a = e->a;
	struct txn *t = e->t;
	uint16_t *ncols = xmalloc((t->n_relations ? t->n_relations : 1) * sizeof *ncols);
	for (uint32_t i = 0; i < t->n_relations; i++)
		ncols[i] = t->relations[i].n_columns;
	struct buf head = { 0 }, chunk = { 0 }, manifest = { 0 }, marker = { 0 };
	encode_envelope_head(&head, e);
	struct env_manifest_chunk *chunks = NULL;
	uint32_t n_chunks = 0;
	uint64_t total = t->spill_bytes + t->memory.len, pos = 0, emitted_changes = 0;
	size_t window_cap = 1 << 20;
	uint8_t *window = xmalloc(window_cap);
	size_t wlen = 0, wstart = 0;
	int rc = 0;
	/* a chunk: u32 index, envelope head, u32 count, changes */
	size_t count_at = 0;
	uint32_t in_chunk = 0;
	for (;;) {
		/* the next change, or the end */
		size_t clen = 0;
		int have = 0;
		while (pos + wstart < total || wlen > wstart) {
			have = wlen > wstart ? env_change_length(window + wstart, wlen - wstart, ncols, t->n_relations, &clen) : 0;
			if (have != 0)
				break;
			/* refill: keep the partial change, read more */
			memmove(window, window + wstart, wlen - wstart);
			pos += wstart;
			wlen -= wstart;
			wstart = 0;
			if (wlen == window_cap) {
				window_cap *= 2;
				window = xrealloc(window, window_cap);
			}
			uint64_t at = pos + wlen;
			size_t n = (size_t)(total - at < window_cap - wlen ? total - at : window_cap - wlen);
			if (n == 0)
				break;
			if ((rc = read_changes(e, at, window + wlen, n)) < 0)
				goto out;
			wlen += n;
		}
		if (have < 0) {
			rc = errbuf_setf(e->err, e->errlen, "transaction %u: spilled change bytes are malformed", t->xid);
			goto out;
		}
		bool end = have == 0;
		bool full = in_chunk > 0 &&
			    (end || in_chunk >= a->options.max_changes_per_chunk ||
			     chunk.len + clen > a->options.target_frame_payload);
		if (full) {
			uint8_t *p = chunk.data + count_at;
			p[0] = (uint8_t)(in_chunk >> 24);
			p[1] = (uint8_t)(in_chunk >> 16);
			p[2] = (uint8_t)(in_chunk >> 8);
			p[3] = (uint8_t)in_chunk;
			chunks = xrealloc(chunks, (n_chunks + 1) * sizeof *chunks);
			chunks[n_chunks].crc = crc32c(0, chunk.data, chunk.len);
			chunks[n_chunks].changes = in_chunk;
			n_chunks++;
			if ((rc = do_emit(e, FRAME_CHUNK, chunk.data, chunk.len)) < 0)
				goto out;
			emitted_changes += in_chunk;
			in_chunk = 0;
		}
		if (end)
			break;
		if (in_chunk == 0 && 4 + head.len + 4 + clen > a->options.max_frame_payload) {
			rc = errbuf_setf(e->err, e->errlen,
				  "transaction %u: a change of %zu bytes with the envelope head (%zu bytes) exceeds the "
				  "maximum frame payload (%zu bytes)",
				  t->xid, clen, head.len, a->options.max_frame_payload);
			goto out;
		}
		if (in_chunk == 0) {
			chunk.len = 0;
			buf_put_u32(&chunk, n_chunks);
			buf_put(&chunk, head.data, head.len);
			count_at = chunk.len;
			buf_put_u32(&chunk, 0);
		}
		buf_put(&chunk, window + wstart, clen);
		wstart += clen;
		in_chunk++;
	}
	if (emitted_changes != t->changes) {
		rc = errbuf_setf(e->err, e->errlen, "transaction %u: emitted %llu of %llu changes", t->xid,
			  (unsigned long long)emitted_changes, (unsigned long long)t->changes);
		goto out;
	}
	/* affected tables: every relation the transaction used */
	const char **tables = xcalloc(t->n_relations ? t->n_relations : 1, sizeof *tables);
	uint32_t n_tables = 0;
	for (uint32_t i = 0; i < t->n_relations; i++) {
		char *name = xasprintf("%s.%s", t->relations[i].schema, t->relations[i].name);
		bool dup = false;
		for (uint32_t k = 0; k < n_tables && !dup; k++)
			dup = strcmp(tables[k], name) == 0;
		if (dup)
			free(name);
		else
			tables[n_tables++] = name;
	}
	env_encode_manifest(&manifest, &e->h, n_chunks, t->changes, chunks, n_tables, tables);
	for (uint32_t k = 0; k < n_tables; k++)
		free((char *)tables[k]);
	free(tables);
	if ((rc = do_emit(e, FRAME_MANIFEST, manifest.data, manifest.len)) < 0)
		goto out;
	env_encode_commit_marker(&marker, e->h.source_id, t->xid, e->h.commit_lsn, e->h.end_lsn, n_chunks,
				 crc32c(0, manifest.data, manifest.len));
	rc = do_emit(e, FRAME_COMMIT_MARKER, marker.data, marker.len);
	e->result->chunked = true;
out:
	free(window);
	free(chunks);
	free(ncols);
	buf_free(&head);
	buf_free(&chunk);
	buf_free(&manifest);
	buf_free(&marker);
	return rc;
}

static int commit_txn(struct assembler *a, struct txn *t, uint64_t commit_lsn, uint64_t end_lsn, int64_t commit_ts,
		      assembler_emit_fn emit, void *ctx, struct assembler_result *result, char *err, size_t errlen)
{
	result->xid = t->xid;
	result->commit_lsn = commit_lsn;
	result->end_lsn = end_lsn;
	result->changes = t->changes;
	if (ack_policy_is_duplicate(a->options.skip_through_commit_lsn, commit_lsn)) {
		result->event = ASSEMBLER_SKIPPED;
		txn_remove(a, t);
		return 0;
	}
	/* PostgreSQL 15 skips empty transactions, but not empty streamed
	 * ones (all their changes were for other tables): nothing to write. */
	if (t->changes == 0 && t->n_ddl == 0) {
		result->event = ASSEMBLER_EMPTY;
		txn_remove(a, t);
		return 0;
	}
	struct emit_ctx e = {
		.a = a, .t = t, .emit = emit, .ctx = ctx, .result = result, .err = err, .errlen = errlen,
		.h = { .source_id = a->source_id, .xid = t->xid, .commit_lsn = commit_lsn, .end_lsn = end_lsn,
		       .commit_time_us = commit_ts + PG_EPOCH_OFFSET_US, .origin = t->origin, .origin_lsn = t->origin_lsn },
	};
	int rc = 0;
	for (size_t i = 0; i < t->n_ddl && rc == 0; i++) {
		struct buf b = { 0 };
		env_encode_ddl(&b, a->source_id, t->xid, commit_lsn, t->ddl[i].lsn, ASSEMBLER_DDL_PREFIX, t->ddl[i].content,
			       t->ddl[i].len);
		rc = do_emit(&e, FRAME_DDL, b.data, b.len);
		buf_free(&b);
	}
	if (rc == 0) {
		struct buf probe = { 0 };
		encode_envelope_head(&probe, &e);
		uint64_t size = probe.len + 4 + t->spill_bytes + t->memory.len;
		size_t head_len = probe.len;
		buf_free(&probe);
		if (!a->options.strict_chunking && size <= a->options.target_frame_payload)
			rc = emit_single(&e, head_len);
		else
			rc = emit_chunked(&e);
	}
	if (rc == 0)
		result->event = ASSEMBLER_COMMITTED;
	txn_remove(a, t);
	return rc;
}

int assembler_feed(struct assembler *a, const struct pgoutput_session *session, const struct pgoutput_message *msg,
		   assembler_emit_fn emit, void *ctx, struct assembler_result *result, char *err, size_t errlen)
{
	memset(result, 0, sizeof *result);
	switch (msg->type) {
	case PGOUTPUT_BEGIN:
		if (a->current)
			return errbuf_setf(err, errlen, "Begin of transaction %u while transaction %u is open", msg->xid,
				    a->current->xid);
		a->current = txn_new(a, msg->xid, false);
		a->current->final_lsn = msg->begin.final_lsn;
		a->current->commit_ts = msg->begin.commit_ts;
		return 0;
	case PGOUTPUT_COMMIT: {
		struct txn *t = a->current;
		if (!t)
			return errbuf_setf(err, errlen, "Commit without an open transaction");
		return commit_txn(a, t, msg->commit.commit_lsn, msg->commit.end_lsn, msg->commit.commit_ts, emit, ctx,
				  result, err, errlen);
	}
	case PGOUTPUT_ORIGIN: {
		struct txn *t = a->in_block ? a->in_block : a->current;
		if (t) {
			free(t->origin);
			t->origin = xstrdup(msg->origin.name);
			t->origin_lsn = msg->origin.origin_lsn;
		}
		return 0;
	}
	case PGOUTPUT_RELATION:
		if (session->relation_changed)
			(*generation_of(a, msg->relation.relid))++;
		return 0;
	case PGOUTPUT_TYPE:
		return 0;
	case PGOUTPUT_INSERT:
	case PGOUTPUT_UPDATE:
	case PGOUTPUT_DELETE:
	case PGOUTPUT_TRUNCATE:
	case PGOUTPUT_MESSAGE: {
		struct txn *t = a->in_block ? a->in_block : a->current;
		if (!t) {
			if (msg->type == PGOUTPUT_MESSAGE && !msg->message.transactional)
				return 0; /* non-transactional messages belong to no transaction */
			return errbuf_setf(err, errlen, "%s outside a transaction", pgoutput_type_name(msg->type));
		}
		if (msg->type == PGOUTPUT_MESSAGE && !msg->message.transactional)
			return 0;
		return add_change(a, t, session, msg, err, errlen);
	}
	case PGOUTPUT_STREAM_START: {
		struct txn *t = txn_find(a, msg->xid);
		if (!t)
			t = txn_new(a, msg->xid, true);
		a->in_block = t;
		return 0;
	}
	case PGOUTPUT_STREAM_STOP:
		a->in_block = NULL;
		return 0;
	case PGOUTPUT_STREAM_COMMIT: {
		struct txn *t = txn_find(a, msg->xid);
		if (!t) /* a streamed transaction with no change we kept */
			t = txn_new(a, msg->xid, true);
		return commit_txn(a, t, msg->commit.commit_lsn, msg->commit.end_lsn, msg->commit.commit_ts, emit, ctx,
				  result, err, errlen);
	}
	case PGOUTPUT_STREAM_ABORT: {
		struct txn *t = txn_find(a, msg->xid);
		result->event = ASSEMBLER_ABORTED;
		result->xid = msg->xid;
		if (!t)
			return 0;
		if (msg->stream_abort.subxid == msg->xid) {
			txn_remove(a, t);
			return 0;
		}
		return abort_subxact(t, msg->stream_abort.subxid, err, errlen);
	}
	}
	return errbuf_setf(err, errlen, "unexpected message type 0x%02x", msg->type);
}
