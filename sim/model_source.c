/*
 * model_source.c - the model source: workload, WAL, slot and walsender
 * (model_source.h).
 *
 * The WAL is kept as the list of events a logical walsender acts on, in
 * LSN order: a commit (an ordinary transaction is sent whole at its
 * commit record), a stream point of a large transaction (where
 * PostgreSQL's memory limit would make it stream what it holds), a
 * subtransaction's abort, a large transaction's commit or abort, and a
 * heartbeat message.  Every change keeps its own record LSN.  A session
 * walks the events from the start and decides, as PostgreSQL does, what
 * each one sends given start_decoding_at.
 */
#include "model_source.h"
#include "sim_rng.h"

#include "trellara/envelope.h"
#include "trellara/xalloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX
#define SNAPSHOT_EVERY 64
#define MAX_DEPTH 3
#define FIRST_XID 740
#define CLOCK_START 0x0464C3246A17LL /* µs since 2000-01-01: late 2022 */
#define DEFAULT_START_LSN 0x016B3748ULL

static void put_be64(uint8_t *p, uint64_t v);

static uint64_t align8(uint64_t x)
{
	return (x + 7) & ~(uint64_t)7;
}

/* ---- tables ---- */

static const char *const cols_plain[] = { "id", "a", "b" };
static const uint32_t oids_plain[] = { 23, 25, 25 };
static const char *const cols_pair[] = { "k1", "k2", "a", "b" };
static const uint32_t oids_pair[] = { 23, 25, 25, 25 };
/* t4 has a column of an enum type of its own: pgoutput sends a Type
 * message before the relation's */
#define MOOD_OID 16400
static const char *const cols_mood[] = { "id", "a", "b", "mood" };
static const uint32_t oids_mood[] = { 23, 25, 25, MOOD_OID };
static const char *const moods[] = { "sad", "ok", "happy" };

static const struct model_source_table table_defs[MODEL_SOURCE_MAX_TABLES] = {
	{ "public.t1", "public", "t1", 16385, 3, 1, cols_plain, oids_plain, false },
	{ "public.t2", "public", "t2", 16391, 3, 1, cols_plain, oids_plain, true },
	{ "public.t3", "public", "t3", 16397, 4, 2, cols_pair, oids_pair, false },
	{ "public.t4", "public", "t4", 16403, 4, 1, cols_mood, oids_mood, false },
};

/* ---- the log ---- */

enum change_kind { CH_INSERT = 'I', CH_UPDATE = 'U', CH_DELETE = 'D', CH_TRUNCATE = 'T', CH_MESSAGE = 'M' };

struct change {
	uint8_t kind;
	uint8_t table;       /* I U D; M: the table the DDL is about */
	uint8_t n_trunc, trunc_flags;
	uint8_t trunc[MODEL_SOURCE_MAX_TABLES];
	uint32_t xid;        /* the (sub)transaction that made it */
	uint64_t lsn;
	char **old_key;      /* owned: U with a key change, D (n_key values) */
	char **row;          /* owned: I U (n_cols values, NULL = SQL NULL) */
	bool *unchanged;     /* owned: U columns sent as 'u', or NULL */
	char *content;       /* owned: M */
	uint32_t content_len;
	uint32_t dead_at;    /* large transactions: the event that cut it, or NONE */
};

struct subabort {
	uint32_t *xids; /* owned: the aborted subtransactions, children first */
	size_t n;
	uint32_t cut_from, cut_to; /* changes [cut_from, cut_to) */
};

struct subxact {
	uint32_t xid;
	uint32_t first;  /* its own first change, or NONE */
	int parent;      /* index in subs, -1: the top transaction */
	bool aborted;
};

struct savepoint {
	int sub;                  /* index in subs */
	uint32_t start;           /* change count when it was set */
	struct sim_db *own;       /* owned: the transaction's rows then */
	uint32_t *released;       /* owned: xids of released children */
	size_t n_released;
};

enum txn_state { TXN_OPEN, TXN_COMMITTED, TXN_ABORTED };

struct txn {
	uint32_t xid;
	uint32_t index; /* in txns */
	bool large;
	enum txn_state state;
	uint64_t first_lsn, commit_lsn, end_lsn;
	int64_t commit_ts;
	struct change *changes; /* owned */
	uint32_t n_changes, cap;
	struct subabort *aborts; /* owned */
	size_t n_aborts;
	struct subxact *subs;   /* owned */
	size_t n_subs;
	uint32_t live;          /* changes that survived (set at commit) */
	bool has_ddl;
	uint64_t origin_lsn;    /* replayed from elsewhere (a replication origin): its LSN there, else 0 */
	uint8_t touched;        /* tables it changed (a TRUNCATE would wait for it) */
	/* generation of an open large transaction */
	uint32_t planned;
	struct sim_db *own;     /* owned while open: the rows it made */
	struct savepoint stack[MAX_DEPTH];
	int depth;
	/* the current session */
	bool s_streamed;        /* a Stream Start was sent */
	uint32_t s_sent_upto;   /* changes before this were sent or dropped */
	uint8_t s_rel_sent;     /* relations sent inside its stream */
};

enum event_kind { EV_COMMIT, EV_STREAM_POINT, EV_SUBABORT, EV_STREAM_COMMIT, EV_STREAM_ABORT, EV_HEARTBEAT };

struct event {
	uint8_t kind;
	uint32_t txn;  /* index in txns */
	uint32_t arg;  /* stream point: changes before it; subabort: index in aborts */
	uint64_t lsn;  /* the record's LSN */
	uint64_t end;  /* the WAL position after it (sentPtr once it is sent) */
};

struct msg_span {
	size_t off, len;
};

struct model_source {
	struct model_source_options o;
	struct sim_rng rng;  /* the workload */
	struct sim_rng wrng; /* the walsender */
	char error[256];
	bool broken;         /* the generator contradicted itself: produce fails from then on */
	uint64_t system_id;
	uint32_t timeline;
	uint64_t wal;        /* insert position */
	int64_t now;         /* the simulated clock, µs since 2000 */
	uint32_t next_xid;
	uint64_t origin_lsn;  /* the upstream's position, for replayed transactions */
	uint32_t locked_by[MODEL_SOURCE_MAX_TABLES]; /* txn index + 1 of an open TRUNCATE's transaction, or 0 */
	uint64_t next_key[MODEL_SOURCE_MAX_TABLES];
	struct sim_db *db;   /* owned: the committed state */

	struct txn **txns;   /* owned, in order of first activity */
	size_t n_txns, txns_cap;
	uint32_t open[4];    /* open large transactions (txn indexes) */
	int n_open;
	struct event *events; /* owned */
	size_t n_events, events_cap;
	uint32_t *committed; /* txn indexes in commit order */
	struct model_source_txn *log; /* owned, parallel to committed */
	size_t n_committed, committed_cap;

	/* state_at */
	struct sim_db **snapshots; /* owned: after committed (k+1)*SNAPSHOT_EVERY */
	size_t n_snapshots;
	struct sim_db *cache;      /* owned */
	size_t cache_applied;

	/* slot */
	uint64_t confirmed_flush, highest_flushed;
	uint64_t persisted_flush; /* what the last checkpoint wrote of the slot */
	uint64_t slot_created_at; /* its consistent point: a synced copy is never older */
	bool slot_missing;        /* no row in pg_replication_slots */
	bool slot_invalidated;
	enum model_slot_loss invalidated_by;

	/* session */
	bool connected;
	uint64_t start_decoding_at;
	size_t next_event;
	uint64_t sent_ptr, pending_end, keepalive_ptr;
	bool schema_sent[MODEL_SOURCE_MAX_TABLES];
	/* DDL on a table (model_source_rename_table, _recreate_table): its
	 * name and relation OID from then on, as pg_class has them */
	char nspname[MODEL_SOURCE_MAX_TABLES][64], relname[MODEL_SOURCE_MAX_TABLES][64];
	uint32_t relid[MODEL_SOURCE_MAX_TABLES];
	uint32_t streaming[8];   /* transactions streaming in this session */
	int n_streaming;
	int64_t send_now;        /* the walsender's clock (never behind the WAL's) */
	struct buf queue;        /* the current event's messages */
	struct msg_span *spans;  /* owned */
	size_t n_spans, spans_cap, span_pos;
	bool keepalive_done;     /* a keepalive was just sent before spans[span_pos] */
	uint8_t keepalive[18];
	struct model_source_stats stats;
};

static int fail(struct model_source *ms, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct model_source *ms, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(ms->error, sizeof ms->error, fmt, ap);
	va_end(ap);
	return -1;
}

static int broken(struct model_source *ms, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int broken(struct model_source *ms, const char *fmt, ...)
{
	if (ms->broken)
		return -1; /* keep the first message */
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(ms->error, sizeof ms->error, fmt, ap);
	va_end(ap);
	ms->broken = true;
	return -1;
}

void model_source_options_default(struct model_source_options *o)
{
	memset(o, 0, sizeof *o);
	o->proto_version = 2;
	o->streaming = true;
	o->send_empty = true;
	o->n_tables = 4;
	o->max_changes = 6;
	o->empty_pct = 5;
	o->ddl_pct = 6;
	o->ddl_only_pct = 30;
	o->truncate_pct = 3;
	o->insert_weight = 40;
	o->update_weight = 30;
	o->key_update_weight = 10;
	o->delete_weight = 15;
	o->reinsert_pct = 30;
	o->toast_unchanged_pct = 60;
	o->toast_bytes = 2100;
	o->null_pct = 10;
	o->heartbeat_pct = 5;
	o->origin_pct = 5;
	o->stream_pct = 12;
	o->max_open_streams = 2;
	o->stream_min_changes = 8;
	o->stream_max_changes = 60;
	o->stream_block_changes = 12;
	o->savepoint_pct = 8;
	o->release_pct = 5;
	o->rollback_pct = 6;
	o->stream_abort_pct = 15;
	o->late_abort_pct = 30;
	o->checkpoint_every = 16;
	o->keepalive_pct = 3;
	o->reply_request_pct = 30;
}

/* ---- values ---- */

static char *text_value(struct model_source *ms, const char *prefix)
{
	return xasprintf("%s%llu", prefix, (unsigned long long)sim_rng_below(&ms->rng, 1000000));
}

static char *toast_value(struct model_source *ms)
{
	size_t n = ms->o.toast_bytes > 0 ? (size_t)ms->o.toast_bytes : 1;
	char *v = xmalloc(n + 1);
	/* random letters: incompressible, as a value must be to stay TOASTed */
	for (size_t i = 0; i < n; i++)
		v[i] = (char)('a' + sim_rng_below(&ms->rng, 26));
	v[n] = '\0';
	return v;
}

static char **values_dup(const char *const *v, uint16_t n)
{
	char **out = xcalloc(n ? n : 1, sizeof *out);
	for (uint16_t c = 0; c < n; c++)
		out[c] = v[c] ? xstrdup(v[c]) : NULL;
	return out;
}

static void values_free(char **v, uint16_t n)
{
	if (!v)
		return;
	for (uint16_t c = 0; c < n; c++)
		free(v[c]);
	free(v);
}

/* A key no row has ever had (never reused: large transactions own theirs). */
static void fresh_key(struct model_source *ms, int table, char **row)
{
	uint64_t k = ++ms->next_key[table];
	if (table_defs[table].n_key == 2) {
		row[0] = xasprintf("%llu", (unsigned long long)(1 + sim_rng_below(&ms->rng, 5)));
		row[1] = xasprintf("k%llu", (unsigned long long)k);
	} else {
		row[0] = xasprintf("%llu", (unsigned long long)k);
	}
}

/* The non-key columns of a new row version. */
static void fill_values(struct model_source *ms, int table, char **row)
{
	const struct model_source_table *t = &table_defs[table];
	int a = t->n_key, b = t->n_key + 1;
	row[a] = sim_rng_chance(&ms->rng, ms->o.null_pct) ? NULL : text_value(ms, "a");
	if (t->toasted)
		row[b] = toast_value(ms);
	else
		row[b] = sim_rng_chance(&ms->rng, ms->o.null_pct) ? NULL : text_value(ms, "b");
	for (uint16_t c = (uint16_t)(b + 1); c < t->n_cols; c++)
		row[c] = sim_rng_chance(&ms->rng, ms->o.null_pct) ? NULL : xstrdup(moods[sim_rng_below(&ms->rng, 3)]);
}

/* ---- applying a change (the generator, the log replay and commit all use this) ---- */

static int apply_change(struct sim_db *db, const struct change *ch)
{
	const struct model_source_table *t = &table_defs[ch->table];
	switch (ch->kind) {
	case CH_INSERT:
		return sim_db_insert(db, t->name, (struct sim_values){ (const char *const *)ch->row, t->n_cols }) == 1 ? 0
														       : -1;
	case CH_UPDATE: {
		const char *const *key = ch->old_key ? (const char *const *)ch->old_key : (const char *const *)ch->row;
		return sim_db_update(db, t->name, (struct sim_values){ key, t->n_key },
				     (struct sim_values){ (const char *const *)ch->row, t->n_cols }, ch->unchanged) == 1
			       ? 0
			       : -1;
	}
	case CH_DELETE:
		return sim_db_delete(db, t->name, (struct sim_values){ (const char *const *)ch->old_key, t->n_key }) == 1
			       ? 0
			       : -1;
	case CH_TRUNCATE:
		for (int i = 0; i < ch->n_trunc; i++)
			sim_db_truncate(db, table_defs[ch->trunc[i]].name);
		return 0;
	default:
		return 0;
	}
}

static void change_free(struct change *ch)
{
	const struct model_source_table *t = &table_defs[ch->table];
	values_free(ch->old_key, t->n_key);
	values_free(ch->row, t->n_cols);
	free(ch->unchanged);
	free(ch->content);
}

/* ---- transactions and events ---- */

static struct txn *txn_new(struct model_source *ms, bool large)
{
	struct txn *t = xcalloc(1, sizeof *t);
	t->xid = ms->next_xid++;
	t->large = large;
	if (sim_rng_chance(&ms->rng, ms->o.origin_pct)) {
		ms->origin_lsn += sim_rng_between(&ms->rng, 0x100, 0x10000);
		t->origin_lsn = ms->origin_lsn;
	}
	if (ms->n_txns == ms->txns_cap) {
		ms->txns_cap = ms->txns_cap ? 2 * ms->txns_cap : 64;
		ms->txns = xrealloc(ms->txns, ms->txns_cap * sizeof *ms->txns);
	}
	t->index = (uint32_t)ms->n_txns;
	ms->txns[ms->n_txns++] = t;
	return t;
}

static uint32_t txn_index(const struct model_source *ms, const struct txn *t)
{
	(void)ms;
	return t->index;
}

static void txn_free(struct txn *t)
{
	for (uint32_t i = 0; i < t->n_changes; i++)
		change_free(&t->changes[i]);
	free(t->changes);
	for (size_t i = 0; i < t->n_aborts; i++)
		free(t->aborts[i].xids);
	free(t->aborts);
	free(t->subs);
	for (int d = 0; d < t->depth; d++) {
		sim_db_free(t->stack[d].own);
		free(t->stack[d].released);
	}
	sim_db_free(t->own);
	free(t);
}

static struct change *change_add(struct txn *t, uint8_t kind, int table)
{
	if (t->n_changes == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 8;
		t->changes = xrealloc(t->changes, t->cap * sizeof *t->changes);
	}
	struct change *ch = &t->changes[t->n_changes++];
	memset(ch, 0, sizeof *ch);
	ch->kind = kind;
	ch->table = (uint8_t)table;
	ch->xid = t->xid;
	ch->dead_at = NONE;
	return ch;
}

static void event_add(struct model_source *ms, uint8_t kind, uint32_t txn, uint32_t arg, uint64_t lsn, uint64_t end)
{
	/* the walsender reads the WAL in order: an event out of order is a bug here */
	if (ms->n_events && (lsn < ms->events[ms->n_events - 1].lsn || end < ms->events[ms->n_events - 1].end) &&
	    !ms->broken)
		broken(ms, "model source: WAL event at %llX after one at %llX", (unsigned long long)lsn,
		     (unsigned long long)ms->events[ms->n_events - 1].lsn);
	if (ms->n_events == ms->events_cap) {
		ms->events_cap = ms->events_cap ? 2 * ms->events_cap : 256;
		ms->events = xrealloc(ms->events, ms->events_cap * sizeof *ms->events);
	}
	ms->events[ms->n_events++] = (struct event){ kind, txn, arg, lsn, end };
}

/* A WAL record of the given payload size: its LSN; the insert position moves past it. */
static uint64_t wal_record(struct model_source *ms, size_t payload)
{
	uint64_t lsn = ms->wal;
	ms->wal = align8(ms->wal + 24 + 30 + payload);
	return lsn;
}

static size_t row_bytes(const struct change *ch)
{
	const struct model_source_table *t = &table_defs[ch->table];
	size_t n = 0;
	for (uint16_t c = 0; ch->row && c < t->n_cols; c++)
		n += ch->row[c] && !(ch->unchanged && ch->unchanged[c]) ? strlen(ch->row[c]) : 0;
	for (uint16_t c = 0; ch->old_key && c < t->n_key; c++)
		n += strlen(ch->old_key[c]);
	if (t->toasted && n > 1000)
		n = 64; /* a TOASTed value lives in toast records; the heap keeps a pointer */
	return n + ch->content_len;
}

/* The change was just built: give it its record, note its subtransaction. */
static void change_logged(struct model_source *ms, struct txn *t, struct change *ch)
{
	ch->lsn = wal_record(ms, row_bytes(ch));
	if (ch->kind == CH_TRUNCATE)
		for (int i = 0; i < ch->n_trunc; i++)
			t->touched |= (uint8_t)(1u << ch->trunc[i]);
	else
		t->touched |= (uint8_t)(1u << ch->table);
	if (t->first_lsn == 0)
		t->first_lsn = ch->lsn;
	if (t->depth > 0) {
		struct subxact *sub = &t->subs[t->stack[t->depth - 1].sub];
		if (sub->first == NONE)
			sub->first = t->n_changes - 1;
	}
}

/* ---- the workload: one change ---- */

/* A random row of table in db, or NULL. */
static const char *const *pick_row(struct model_source *ms, const struct sim_db *db, int table)
{
	size_t n = sim_db_rows(db, table_defs[table].name);
	return n ? sim_db_row(db, table_defs[table].name, (size_t)sim_rng_below(&ms->rng, n)) : NULL;
}

static char *ddl_content(struct model_source *ms, int table, uint32_t *len)
{
	const char *name = table_defs[table].relname;
	unsigned n = (unsigned)sim_rng_below(&ms->rng, 100000);
	char *s;
	if (sim_rng_chance(&ms->rng, 50))
		s = xasprintf("{\"version\" : 1, \"event\" : \"ddl_command_end\", \"command_tag\" : \"CREATE INDEX\", "
			      "\"object_type\" : \"index\", \"schema_name\" : \"public\", \"object_identity\" : "
			      "\"public.%s_a_%u\", \"in_extension\" : false, \"statement\" : \"CREATE INDEX %s_a_%u ON "
			      "public.%s (a)\"}",
			      name, n, name, n, name);
	else
		s = xasprintf("{\"version\" : 1, \"event\" : \"ddl_command_end\", \"command_tag\" : \"COMMENT\", "
			      "\"object_type\" : \"table\", \"schema_name\" : \"public\", \"object_identity\" : "
			      "\"public.%s\", \"in_extension\" : false, \"statement\" : \"COMMENT ON TABLE public.%s IS "
			      "'rev %u'\"}",
			      name, name, n);
	*len = (uint32_t)strlen(s);
	return s;
}

/* A table t may use: not held by another transaction's TRUNCATE (its
 * ACCESS EXCLUSIVE lock would make t wait until that one ends); -1 when
 * there is none. */
static int pick_table(struct model_source *ms, const struct txn *t)
{
	int candidates[MODEL_SOURCE_MAX_TABLES], n = 0;
	for (int i = 0; i < ms->o.n_tables; i++)
		if (ms->locked_by[i] == 0 || ms->locked_by[i] == t->index + 1)
			candidates[n++] = i;
	return n ? candidates[sim_rng_below(&ms->rng, (uint64_t)n)] : -1;
}

static void add_ddl(struct model_source *ms, struct txn *t, uint32_t xid)
{
	int table = pick_table(ms, t);
	if (table < 0)
		return;
	struct change *ch = change_add(t, CH_MESSAGE, table);
	ch->xid = xid;
	ch->content = ddl_content(ms, table, &ch->content_len);
	change_logged(ms, t, ch);
}

/* One row change against view (the committed state for an ordinary
 * transaction, the large transaction's own rows for a large one),
 * applied to it.  deleted: the key a delete just freed (reinsert). */
static int add_row_change(struct model_source *ms, struct txn *t, struct sim_db *view, uint32_t xid,
			  char ***deleted, int *deleted_table)
{
	int table = pick_table(ms, t);
	if (table < 0)
		return 0;
	const struct model_source_table *def = &table_defs[table];
	int w_total = ms->o.insert_weight + ms->o.update_weight + ms->o.key_update_weight + ms->o.delete_weight;
	int w = (int)sim_rng_below(&ms->rng, (uint64_t)(w_total > 0 ? w_total : 1));
	enum { OP_INSERT, OP_UPDATE, OP_KEY_UPDATE, OP_DELETE } op =
		w < ms->o.insert_weight ? OP_INSERT
		: w < ms->o.insert_weight + ms->o.update_weight ? OP_UPDATE
		: w < ms->o.insert_weight + ms->o.update_weight + ms->o.key_update_weight ? OP_KEY_UPDATE
											   : OP_DELETE;
	bool reinsert = *deleted && sim_rng_chance(&ms->rng, ms->o.reinsert_pct);
	if (reinsert) {
		table = *deleted_table;
		def = &table_defs[table];
		op = OP_INSERT;
	}
	const char *const *old = op == OP_INSERT ? NULL : pick_row(ms, view, table);
	if (op != OP_INSERT && !old)
		op = OP_INSERT;

	struct change *ch = change_add(t, op == OP_INSERT ? CH_INSERT : op == OP_DELETE ? CH_DELETE : CH_UPDATE, table);
	ch->xid = xid;
	switch (op) {
	case OP_INSERT:
		ch->row = xcalloc(def->n_cols, sizeof *ch->row);
		if (reinsert) {
			for (uint16_t c = 0; c < def->n_key; c++)
				ch->row[c] = xstrdup((*deleted)[c]);
		} else {
			fresh_key(ms, table, ch->row);
		}
		fill_values(ms, table, ch->row);
		ms->stats.inserts++;
		break;
	case OP_DELETE:
		ch->old_key = values_dup(old, def->n_key);
		ms->stats.deletes++;
		break;
	default: {
		ch->row = xcalloc(def->n_cols, sizeof *ch->row);
		if (op == OP_KEY_UPDATE) {
			ch->old_key = values_dup(old, def->n_key);
			if (def->n_key == 2 && sim_rng_chance(&ms->rng, 50)) {
				/* move within the pair's first column: k2 stays, k1 changes */
				ch->row[0] = xasprintf("%llu", (unsigned long long)(6 + ms->next_key[table]++));
				ch->row[1] = xstrdup(old[1]);
			} else {
				fresh_key(ms, table, ch->row);
			}
			ms->stats.key_updates++;
		} else {
			for (uint16_t c = 0; c < def->n_key; c++)
				ch->row[c] = xstrdup(old[c]);
		}
		fill_values(ms, table, ch->row);
		int b = def->n_key + 1;
		if (def->toasted && sim_rng_chance(&ms->rng, ms->o.toast_unchanged_pct)) {
			/* b left alone: its TOAST pointer is unchanged, pgoutput sends 'u'
			 * (a NULL is no pointer: it is sent as 'n') */
			free(ch->row[b]);
			ch->row[b] = old[b] ? xstrdup(old[b]) : NULL;
			if (old[b]) {
				ch->unchanged = xcalloc(def->n_cols, sizeof *ch->unchanged);
				ch->unchanged[b] = true;
				ms->stats.toast_unchanged++;
			}
		}
		ms->stats.updates++;
	}
	}
	change_logged(ms, t, ch);
	if (apply_change(view, ch) < 0)
		return broken(ms, "model source: transaction %u: change %u of %s does not apply to its own view", t->xid,
			    t->n_changes, def->name);
	if (*deleted) {
		values_free(*deleted, table_defs[*deleted_table].n_key);
		*deleted = NULL;
	}
	if (ch->kind == CH_DELETE) {
		*deleted = values_dup((const char *const *)ch->old_key, def->n_key);
		*deleted_table = table;
	}
	return 0;
}

static void add_truncate(struct model_source *ms, struct txn *t)
{
	struct change *ch = change_add(t, CH_TRUNCATE, 0);
	int order[MODEL_SOURCE_MAX_TABLES];
	for (int i = 0; i < ms->o.n_tables; i++)
		order[i] = i;
	for (int i = ms->o.n_tables - 1; i > 0; i--) {
		int j = (int)sim_rng_below(&ms->rng, (uint64_t)i + 1);
		int x = order[i];
		order[i] = order[j];
		order[j] = x;
	}
	ch->n_trunc = (uint8_t)(1 + sim_rng_below(&ms->rng, (uint64_t)ms->o.n_tables));
	for (int i = 0; i < ch->n_trunc; i++)
		ch->trunc[i] = (uint8_t)order[i];
	ch->table = ch->trunc[0];
	ch->trunc_flags = (uint8_t)sim_rng_below(&ms->rng, 4); /* CASCADE 1, RESTART IDENTITY 2 */
	change_logged(ms, t, ch);
	apply_change(ms->db, ch);
	ms->stats.truncates++;
}

/* ---- committing ---- */

static void log_commit(struct model_source *ms, struct txn *t)
{
	t->state = TXN_COMMITTED;
	t->commit_lsn = wal_record(ms, 8);
	t->end_lsn = ms->wal;
	ms->now += (int64_t)sim_rng_between(&ms->rng, 50, 3000);
	t->commit_ts = ms->now;
	t->live = 0;
	t->has_ddl = false;
	for (uint32_t i = 0; i < t->n_changes; i++)
		if (t->changes[i].dead_at == NONE) {
			t->live++;
			t->has_ddl |= t->changes[i].kind == CH_MESSAGE;
		}
	if (ms->n_committed == ms->committed_cap) {
		ms->committed_cap = ms->committed_cap ? 2 * ms->committed_cap : 64;
		ms->committed = xrealloc(ms->committed, ms->committed_cap * sizeof *ms->committed);
		ms->log = xrealloc(ms->log, ms->committed_cap * sizeof *ms->log);
	}
	ms->committed[ms->n_committed] = txn_index(ms, t);
	ms->log[ms->n_committed] = (struct model_source_txn){ t->xid, t->commit_lsn, t->end_lsn, t->commit_ts, t->live,
							      t->large, t->has_ddl,
							      t->origin_lsn ? MODEL_SOURCE_ORIGIN : NULL, t->origin_lsn };
	ms->n_committed++;
	ms->stats.committed++;
	if (ms->o.checkpoint_every > 0 && ms->n_committed % (size_t)ms->o.checkpoint_every == 0)
		ms->persisted_flush = ms->confirmed_flush; /* CheckPointReplicationSlots */
	if (ms->n_committed % SNAPSHOT_EVERY == 0) {
		ms->snapshots = xrealloc(ms->snapshots, (ms->n_snapshots + 1) * sizeof *ms->snapshots);
		ms->snapshots[ms->n_snapshots++] = sim_db_clone(ms->db);
	}
}

/* After a commit, now and then: a heartbeat (pg_logical_emit_message(false, ...)). */
static void maybe_heartbeat(struct model_source *ms)
{
	if (ms->o.heartbeat_pct && sim_rng_chance(&ms->rng, ms->o.heartbeat_pct)) {
		uint64_t lsn = wal_record(ms, 40);
		event_add(ms, EV_HEARTBEAT, NONE, (uint32_t)ms->n_events, lsn, ms->wal);
	}
}

static int ordinary_txn(struct model_source *ms)
{
	struct txn *t = txn_new(ms, false);
	ms->now += (int64_t)sim_rng_between(&ms->rng, 10, 500);
	int n = 1 + (int)sim_rng_below(&ms->rng, (uint64_t)(ms->o.max_changes > 0 ? ms->o.max_changes : 1));
	bool ddl = sim_rng_chance(&ms->rng, ms->o.ddl_pct);
	if (sim_rng_chance(&ms->rng, ms->o.empty_pct) || (ddl && sim_rng_chance(&ms->rng, ms->o.ddl_only_pct)))
		n = 0;
	int ddl_at = ddl ? (int)sim_rng_below(&ms->rng, (uint64_t)n + 1) : -1;
	bool truncate = ms->n_open == 0 && sim_rng_chance(&ms->rng, ms->o.truncate_pct);
	int truncate_at = truncate ? (int)sim_rng_below(&ms->rng, (uint64_t)n + 1) : -1;
	char **deleted = NULL;
	int deleted_table = 0, rc = 0;
	for (int i = 0; i <= n && rc == 0; i++) {
		if (i == ddl_at)
			add_ddl(ms, t, t->xid);
		if (i == truncate_at)
			add_truncate(ms, t);
		if (i < n)
			rc = add_row_change(ms, t, ms->db, t->xid, &deleted, &deleted_table);
	}
	if (deleted)
		values_free(deleted, table_defs[deleted_table].n_key);
	if (rc < 0)
		return -1;
	if (t->n_changes == 0)
		ms->stats.empty_txns++;
	log_commit(ms, t);
	if (t->first_lsn == 0)
		t->first_lsn = t->commit_lsn;
	event_add(ms, EV_COMMIT, txn_index(ms, t), 0, t->commit_lsn, t->end_lsn);
	maybe_heartbeat(ms);
	return 0;
}

/* ---- large transactions ---- */

static int sub_new(struct txn *t, uint32_t xid, int parent)
{
	t->subs = xrealloc(t->subs, (t->n_subs + 1) * sizeof *t->subs);
	t->subs[t->n_subs] = (struct subxact){ xid, NONE, parent, false };
	return (int)t->n_subs++;
}

static void savepoint_set(struct model_source *ms, struct txn *t)
{
	int parent = t->depth ? t->stack[t->depth - 1].sub : -1;
	struct savepoint *sp = &t->stack[t->depth++];
	memset(sp, 0, sizeof *sp);
	sp->sub = sub_new(t, ms->next_xid++, parent);
	sp->start = t->n_changes;
	sp->own = sim_db_clone(t->own);
}

static void released_add(struct savepoint *sp, uint32_t xid)
{
	sp->released = xrealloc(sp->released, (sp->n_released + 1) * sizeof *sp->released);
	sp->released[sp->n_released++] = xid;
}

/* RELEASE SAVEPOINT: its changes stay, under its xid; the parent goes on. */
static void savepoint_release(struct txn *t)
{
	struct savepoint *sp = &t->stack[--t->depth];
	if (t->depth > 0) {
		struct savepoint *parent = &t->stack[t->depth - 1];
		for (size_t i = 0; i < sp->n_released; i++)
			released_add(parent, sp->released[i]);
		released_add(parent, t->subs[sp->sub].xid);
	}
	sim_db_free(sp->own);
	free(sp->released);
}

/* ROLLBACK TO SAVEPOINT (and RELEASE it): its changes and its children's
 * are undone; the abort record lists the children, then it. */
static void savepoint_rollback(struct model_source *ms, struct txn *t)
{
	struct savepoint *sp = &t->stack[--t->depth];
	uint32_t event = (uint32_t)ms->n_events;
	for (uint32_t i = sp->start; i < t->n_changes; i++)
		if (t->changes[i].dead_at == NONE)
			t->changes[i].dead_at = event;
	t->aborts = xrealloc(t->aborts, (t->n_aborts + 1) * sizeof *t->aborts);
	struct subabort *ab = &t->aborts[t->n_aborts];
	ab->n = sp->n_released + 1;
	ab->xids = xmalloc(ab->n * sizeof *ab->xids);
	for (size_t i = 0; i < sp->n_released; i++)
		ab->xids[i] = sp->released[i];
	ab->xids[sp->n_released] = t->subs[sp->sub].xid;
	for (size_t i = 0; i < ab->n; i++)
		for (size_t j = 0; j < t->n_subs; j++)
			if (t->subs[j].xid == ab->xids[i])
				t->subs[j].aborted = true;
	ab->cut_from = sp->start;
	ab->cut_to = t->n_changes;
	sim_db_free(t->own);
	t->own = sp->own;
	free(sp->released);
	uint64_t lsn = wal_record(ms, 16);
	event_add(ms, EV_SUBABORT, txn_index(ms, t), (uint32_t)t->n_aborts, lsn, ms->wal);
	t->n_aborts++;
	ms->stats.sub_aborts++;
}

/* A large transaction truncates a table no other open transaction has
 * touched, and holds it (ACCESS EXCLUSIVE) until it ends. */
static void large_truncate(struct model_source *ms, struct txn *t, uint32_t xid)
{
	int candidates[MODEL_SOURCE_MAX_TABLES], n = 0;
	for (int i = 0; i < ms->o.n_tables; i++) {
		bool free_table = ms->locked_by[i] == 0 || ms->locked_by[i] == t->index + 1;
		for (int k = 0; k < ms->n_open && free_table; k++)
			free_table = ms->open[k] == t->index || !(ms->txns[ms->open[k]]->touched & (1u << i));
		if (free_table)
			candidates[n++] = i;
	}
	if (n == 0)
		return;
	int table = candidates[sim_rng_below(&ms->rng, (uint64_t)n)];
	struct change *ch = change_add(t, CH_TRUNCATE, table);
	ch->xid = xid;
	ch->n_trunc = 1;
	ch->trunc[0] = (uint8_t)table;
	ch->trunc_flags = (uint8_t)sim_rng_below(&ms->rng, 4);
	change_logged(ms, t, ch);
	apply_change(t->own, ch);
	ms->locked_by[table] = t->index + 1;
	ms->stats.truncates++;
}

static int large_txn_start(struct model_source *ms)
{
	struct txn *t = txn_new(ms, true);
	t->planned = (uint32_t)sim_rng_between(&ms->rng, (uint64_t)ms->o.stream_min_changes,
					       (uint64_t)ms->o.stream_max_changes);
	t->own = sim_db_new();
	if (model_source_create_tables(ms, t->own) < 0)
		return -1;
	ms->open[ms->n_open++] = txn_index(ms, t);
	return 0;
}

/* The large transaction makes some more changes, up to a stream point. */
static int large_txn_step(struct model_source *ms, struct txn *t)
{
	uint32_t n = (uint32_t)sim_rng_between(
		&ms->rng, 1, (uint64_t)(ms->o.stream_block_changes > 0 ? ms->o.stream_block_changes : 1));
	char **deleted = NULL;
	int deleted_table = 0, rc = 0;
	for (uint32_t i = 0; i < n && rc == 0; i++) {
		if (t->depth < MAX_DEPTH && sim_rng_chance(&ms->rng, ms->o.savepoint_pct))
			savepoint_set(ms, t);
		uint32_t xid = t->depth ? t->subs[t->stack[t->depth - 1].sub].xid : t->xid;
		if (sim_rng_chance(&ms->rng, ms->o.ddl_pct / 2))
			add_ddl(ms, t, xid);
		/* BEGIN; TRUNCATE; reload; COMMIT - now and then */
		if (sim_rng_chance(&ms->rng, (ms->o.truncate_pct + 2) / 3))
			large_truncate(ms, t, xid);
		rc = add_row_change(ms, t, t->own, xid, &deleted, &deleted_table);
		if (t->depth > 0 && sim_rng_chance(&ms->rng, ms->o.rollback_pct)) {
			savepoint_rollback(ms, t);
			/* ROLLBACK TO keeps the savepoint: a new subtransaction under it */
			if (sim_rng_chance(&ms->rng, 50))
				savepoint_set(ms, t);
			if (deleted) {
				values_free(deleted, table_defs[deleted_table].n_key);
				deleted = NULL; /* that delete was undone */
			}
		} else if (t->depth > 0 && sim_rng_chance(&ms->rng, ms->o.release_pct)) {
			savepoint_release(t);
		}
	}
	if (deleted)
		values_free(deleted, table_defs[deleted_table].n_key);
	if (rc < 0)
		return -1;
	event_add(ms, EV_STREAM_POINT, txn_index(ms, t), t->n_changes, ms->wal, ms->wal);
	return 0;
}

static void open_remove(struct model_source *ms, uint32_t index)
{
	for (int i = 0; i < ms->n_open; i++)
		if (ms->open[i] == index) {
			ms->open[i] = ms->open[--ms->n_open];
			return;
		}
}

static int large_txn_finish(struct model_source *ms, struct txn *t)
{
	uint32_t index = txn_index(ms, t);
	while (t->depth > 0) /* COMMIT releases what is still open */
		savepoint_release(t);
	open_remove(ms, index);
	for (int i = 0; i < MODEL_SOURCE_MAX_TABLES; i++)
		if (ms->locked_by[i] == index + 1)
			ms->locked_by[i] = 0;
	sim_db_free(t->own);
	t->own = NULL;
	if (sim_rng_chance(&ms->rng, ms->o.stream_abort_pct)) {
		t->state = TXN_ABORTED;
		uint64_t lsn = wal_record(ms, 8);
		event_add(ms, EV_STREAM_ABORT, index, 0, lsn, ms->wal);
		ms->stats.aborted++;
		return 0;
	}
	for (uint32_t i = 0; i < t->n_changes; i++)
		if (t->changes[i].dead_at == NONE && apply_change(ms->db, &t->changes[i]) < 0)
			return broken(ms, "model source: large transaction %u: change %u does not apply at commit", t->xid,
				    i + 1);
	log_commit(ms, t);
	if (t->first_lsn == 0)
		t->first_lsn = t->commit_lsn;
	event_add(ms, EV_STREAM_COMMIT, index, 0, t->commit_lsn, t->end_lsn);
	maybe_heartbeat(ms);
	return 0;
}

int model_source_produce(struct model_source *ms, unsigned n)
{
	if (ms->broken)
		return -1;
	uint64_t target = ms->stats.committed + n;
	while (ms->stats.committed < target) {
		if (ms->n_open > 0 && sim_rng_chance(&ms->rng, 40)) {
			struct txn *t = ms->txns[ms->open[sim_rng_below(&ms->rng, (uint64_t)ms->n_open)]];
			int rc = t->n_changes >= t->planned ? large_txn_finish(ms, t) : large_txn_step(ms, t);
			if (rc < 0)
				return -1;
		} else if (ms->n_open < ms->o.max_open_streams && sim_rng_chance(&ms->rng, ms->o.stream_pct)) {
			if (large_txn_start(ms) < 0 || large_txn_step(ms, ms->txns[ms->n_txns - 1]) < 0)
				return -1;
		} else if (ordinary_txn(ms) < 0) {
			return -1;
		}
	}
	return ms->broken ? -1 : 0;
}

int model_source_finish(struct model_source *ms)
{
	if (ms->broken)
		return -1;
	/* each ends now, whatever it planned: stepping one could wait forever
	 * for a table another holds */
	while (ms->n_open > 0)
		if (large_txn_finish(ms, ms->txns[ms->open[0]]) < 0)
			return -1;
	return ms->broken ? -1 : 0;
}

size_t model_source_open_large(const struct model_source *ms)
{
	return (size_t)ms->n_open;
}

/* ---- construction ---- */

struct model_source *model_source_new(const struct model_source_options *o, uint64_t seed)
{
	struct model_source *ms = xcalloc(1, sizeof *ms);
	ms->o = *o;
	if (ms->o.n_tables < 1)
		ms->o.n_tables = 1;
	if (ms->o.n_tables > MODEL_SOURCE_MAX_TABLES)
		ms->o.n_tables = MODEL_SOURCE_MAX_TABLES;
	if (ms->o.proto_version < 1 || ms->o.proto_version > 4)
		ms->o.proto_version = 2;
	if (ms->o.proto_version < 2)
		ms->o.streaming = false;
	if (ms->o.max_open_streams > 4)
		ms->o.max_open_streams = 4;
	if (ms->o.stream_min_changes < 1)
		ms->o.stream_min_changes = 1;
	if (ms->o.stream_max_changes < ms->o.stream_min_changes)
		ms->o.stream_max_changes = ms->o.stream_min_changes;
	sim_rng_seed(&ms->rng, seed);
	sim_rng_seed(&ms->wrng, seed ^ 0x5741CE9D3E1F0B27ULL);
	ms->system_id = 0x7000000000000000ULL | (sim_rng_next(&ms->rng) >> 4);
	ms->timeline = 1;
	ms->wal = align8(ms->o.start_lsn ? ms->o.start_lsn : DEFAULT_START_LSN);
	ms->now = CLOCK_START;
	ms->next_xid = FIRST_XID;
	ms->origin_lsn = 0x1234AB00;
	ms->confirmed_flush = ms->wal; /* the slot's consistent point */
	ms->persisted_flush = ms->wal;
	ms->slot_created_at = ms->wal;
	ms->db = sim_db_new();
	model_source_create_tables(ms, ms->db);
	ms->cache = sim_db_clone(ms->db);
	return ms;
}

void model_source_free(struct model_source *ms)
{
	if (!ms)
		return;
	for (size_t i = 0; i < ms->n_txns; i++)
		txn_free(ms->txns[i]);
	free(ms->txns);
	free(ms->events);
	free(ms->committed);
	free(ms->log);
	for (size_t i = 0; i < ms->n_snapshots; i++)
		sim_db_free(ms->snapshots[i]);
	free(ms->snapshots);
	sim_db_free(ms->cache);
	sim_db_free(ms->db);
	buf_free(&ms->queue);
	free(ms->spans);
	free(ms);
}

const char *model_source_error(const struct model_source *ms)
{
	return ms->error;
}

size_t model_source_tables(const struct model_source *ms)
{
	return (size_t)ms->o.n_tables;
}

static void invalidate(struct model_source *ms, int table);
static uint32_t relid_of(const struct model_source *ms, int table);

void model_source_rename_table(struct model_source *ms, size_t table, const char *nspname, const char *relname)
{
	if (table >= (size_t)ms->o.n_tables)
		return;
	snprintf(ms->nspname[table], sizeof ms->nspname[table], "%s", nspname);
	snprintf(ms->relname[table], sizeof ms->relname[table], "%s", relname);
	invalidate(ms, (int)table); /* the relcache invalidation of ALTER TABLE */
}

void model_source_recreate_table(struct model_source *ms, size_t table)
{
	if (table >= (size_t)ms->o.n_tables)
		return;
	ms->relid[table] = relid_of(ms, (int)table) + 100000; /* DROP TABLE, CREATE TABLE: a new OID */
	invalidate(ms, (int)table);
}

uint32_t model_source_relid(const struct model_source *ms, size_t table)
{
	return table < (size_t)ms->o.n_tables ? relid_of(ms, (int)table) : 0;
}

const struct model_source_table *model_source_table(const struct model_source *ms, size_t i)
{
	return i < (size_t)ms->o.n_tables ? &table_defs[i] : NULL;
}

int model_source_create_tables(const struct model_source *ms, struct sim_db *db)
{
	for (int i = 0; i < ms->o.n_tables; i++)
		if (sim_db_create_table(db, table_defs[i].name, table_defs[i].n_cols, table_defs[i].cols,
					table_defs[i].n_key) < 0)
			return -1;
	return 0;
}

size_t model_source_txns(const struct model_source *ms)
{
	return ms->n_committed;
}

const struct model_source_txn *model_source_txn(const struct model_source *ms, size_t i)
{
	return i < ms->n_committed ? &ms->log[i] : NULL;
}

const struct sim_db *model_source_state(const struct model_source *ms)
{
	return ms->db;
}

uint64_t model_source_wal_end(const struct model_source *ms)
{
	return ms->wal;
}

static void replay_txn(struct model_source *ms, struct sim_db *db, size_t k)
{
	const struct txn *t = ms->txns[ms->committed[k]];
	for (uint32_t i = 0; i < t->n_changes; i++)
		if (t->changes[i].dead_at == NONE)
			apply_change(db, &t->changes[i]);
}

const struct sim_db *model_source_state_at(struct model_source *ms, uint64_t last_commit_lsn)
{
	/* how many committed transactions have commit LSN <= last_commit_lsn */
	size_t lo = 0, hi = ms->n_committed;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ms->log[mid].commit_lsn <= last_commit_lsn)
			lo = mid + 1;
		else
			hi = mid;
	}
	size_t want = lo;
	if (want == ms->n_committed)
		return ms->db;
	if (ms->cache_applied > want || want - ms->cache_applied > SNAPSHOT_EVERY) {
		size_t snap = want / SNAPSHOT_EVERY; /* snapshots[snap-1] holds snap*SNAPSHOT_EVERY */
		sim_db_free(ms->cache);
		if (snap > 0) {
			ms->cache = sim_db_clone(ms->snapshots[snap - 1]);
			ms->cache_applied = snap * SNAPSHOT_EVERY;
		} else {
			ms->cache = sim_db_new();
			model_source_create_tables(ms, ms->cache);
			ms->cache_applied = 0;
		}
	}
	while (ms->cache_applied < want)
		replay_txn(ms, ms->cache, ms->cache_applied++);
	return ms->cache;
}

/* ---- pgoutput encoding ---- */

static void send_tick(struct model_source *ms)
{
	if (ms->send_now < ms->now)
		ms->send_now = ms->now;
	ms->send_now += (int64_t)sim_rng_between(&ms->wrng, 1, 40);
}

static void put_header(struct buf *b, uint64_t lsn)
{
	buf_put_u8(b, 'w');
	buf_put_u64(b, lsn); /* dataStart */
	buf_put_u64(b, lsn); /* walEnd: WalSndPrepareWrite writes the same LSN */
	buf_put_u64(b, 0);   /* sendTime: WalSndWriteData fills it in when it sends */
}

static void put_cstr(struct buf *b, const char *s)
{
	buf_put(b, s, strlen(s) + 1);
}

/* Starts a message in the queue; end_message closes its span. */
static void begin_message(struct model_source *ms, uint64_t lsn)
{
	if (ms->n_spans == ms->spans_cap) {
		ms->spans_cap = ms->spans_cap ? 2 * ms->spans_cap : 64;
		ms->spans = xrealloc(ms->spans, ms->spans_cap * sizeof *ms->spans);
	}
	ms->spans[ms->n_spans].off = ms->queue.len;
	put_header(&ms->queue, lsn);
}

static void end_message(struct model_source *ms)
{
	struct msg_span *s = &ms->spans[ms->n_spans++];
	s->len = ms->queue.len - s->off;
	ms->stats.messages++;
}

static void put_xid(struct buf *b, bool in_stream, uint32_t xid)
{
	if (in_stream)
		buf_put_u32(b, xid);
}

/* A table's relation OID now (a recreated table has another). */
static uint32_t relid_of(const struct model_source *ms, int table)
{
	return ms->relid[table] ? ms->relid[table] : table_defs[table].relid;
}

static void send_relation(struct model_source *ms, int table, bool in_stream, uint32_t xid, uint64_t lsn)
{
	const struct model_source_table *t = &table_defs[table];
	struct buf *b = &ms->queue;
	/* send_relation_and_attrs: a Type for each column of a type that is
	 * not built in (oid >= FirstGenbkiObjectId), before the Relation */
	for (uint16_t c = 0; c < t->n_cols; c++)
		if (t->type_oids[c] >= 10000) {
			begin_message(ms, lsn);
			buf_put_u8(b, 'Y');
			put_xid(b, in_stream, xid);
			buf_put_u32(b, t->type_oids[c]);
			put_cstr(b, "public");
			put_cstr(b, "mood");
			end_message(ms);
			ms->stats.types++;
		}
	begin_message(ms, lsn);
	buf_put_u8(b, 'R');
	put_xid(b, in_stream, xid);
	buf_put_u32(b, relid_of(ms, table));
	put_cstr(b, *ms->nspname[table] ? ms->nspname[table] : t->nspname);
	put_cstr(b, *ms->relname[table] ? ms->relname[table] : t->relname);
	buf_put_u8(b, 'd');
	buf_put_u16(b, t->n_cols);
	for (uint16_t c = 0; c < t->n_cols; c++) {
		buf_put_u8(b, c < t->n_key && table + 1 != ms->o.no_identity_table ? 1 : 0);
		put_cstr(b, t->cols[c]);
		buf_put_u32(b, t->type_oids[c]);
		buf_put_u32(b, UINT32_MAX); /* typmod -1 */
	}
	end_message(ms);
	ms->stats.relations++;
}

/* maybe_send_schema: streamed transactions keep their own record. */
static void ensure_relation(struct model_source *ms, struct txn *stream, int table, uint32_t xid, uint64_t lsn)
{
	if (stream) {
		if (stream->s_rel_sent & (1u << table))
			return;
		stream->s_rel_sent |= (uint8_t)(1u << table);
	} else {
		if (ms->schema_sent[table])
			return;
		ms->schema_sent[table] = true;
	}
	send_relation(ms, table, stream != NULL, xid, lsn);
}

/* rel_sync_cache_relation_cb: the descriptor is sent again before its next use. */
static void invalidate(struct model_source *ms, int table)
{
	ms->schema_sent[table] = false;
	for (int i = 0; i < ms->n_streaming; i++)
		ms->txns[ms->streaming[i]]->s_rel_sent &= (uint8_t)~(1u << table);
}

static void put_tuple(struct buf *b, const struct model_source_table *t, char *const *row, const bool *unchanged,
		      bool key_only)
{
	buf_put_u16(b, t->n_cols);
	for (uint16_t c = 0; c < t->n_cols; c++) {
		const char *v = key_only ? (c < t->n_key ? row[c] : NULL) : row[c];
		if (!key_only && unchanged && unchanged[c]) {
			buf_put_u8(b, 'u');
		} else if (!v) {
			buf_put_u8(b, 'n');
		} else {
			buf_put_u8(b, 't');
			buf_put_u32(b, (uint32_t)strlen(v));
			buf_put(b, v, strlen(v));
		}
	}
}

static void send_change(struct model_source *ms, struct txn *stream, const struct change *ch)
{
	bool in_stream = stream != NULL;
	const struct model_source_table *t = &table_defs[ch->table];
	struct buf *b = &ms->queue;
	switch (ch->kind) {
	case CH_INSERT:
	case CH_UPDATE:
	case CH_DELETE:
		ensure_relation(ms, stream, ch->table, ch->xid, ch->lsn);
		begin_message(ms, ch->lsn);
		buf_put_u8(b, ch->kind);
		put_xid(b, in_stream, ch->xid);
		buf_put_u32(b, relid_of(ms, ch->table));
		if (ch->kind == CH_INSERT) {
			buf_put_u8(b, 'N');
			put_tuple(b, t, ch->row, NULL, false);
		} else if (ch->kind == CH_UPDATE) {
			if (ch->old_key && ch->table + 1 != ms->o.no_identity_table) {
				/* the key changed: the old key, other columns null */
				buf_put_u8(b, 'K');
				put_tuple(b, t, ch->old_key, NULL, true);
			}
			buf_put_u8(b, 'N');
			put_tuple(b, t, ch->row, ch->unchanged, false);
		} else {
			buf_put_u8(b, 'K');
			put_tuple(b, t, ch->old_key, NULL, true);
		}
		end_message(ms);
		break;
	case CH_TRUNCATE:
		for (int i = 0; i < ch->n_trunc; i++)
			ensure_relation(ms, stream, ch->trunc[i], ch->xid, ch->lsn);
		begin_message(ms, ch->lsn);
		buf_put_u8(b, 'T');
		put_xid(b, in_stream, ch->xid);
		buf_put_u32(b, ch->n_trunc);
		buf_put_u8(b, ch->trunc_flags);
		for (int i = 0; i < ch->n_trunc; i++)
			buf_put_u32(b, relid_of(ms, ch->trunc[i]));
		end_message(ms);
		/* a new relfilenode: the descriptors are sent again */
		for (int i = 0; i < ch->n_trunc; i++)
			invalidate(ms, ch->trunc[i]);
		break;
	default:
		begin_message(ms, ch->lsn);
		buf_put_u8(b, 'M');
		put_xid(b, in_stream, ch->xid);
		buf_put_u8(b, 1); /* transactional */
		buf_put_u64(b, ch->lsn);
		put_cstr(b, MODEL_SOURCE_DDL_PREFIX);
		buf_put_u32(b, ch->content_len);
		buf_put(b, ch->content, ch->content_len);
		end_message(ms);
		invalidate(ms, ch->table);
		ms->stats.ddl_messages++;
		break;
	}
}

/* Is change i of t alive when event `at` is decoded? */
static bool alive_at(const struct change *ch, size_t at)
{
	return ch->dead_at == NONE || ch->dead_at > at;
}

/* send_repl_origin: right after Begin, or after a stream's first Stream
 * Start with no LSN (tests/fixtures/pgoutput/origin.hex). */
static void send_origin(struct model_source *ms, uint64_t origin_lsn, uint64_t lsn)
{
	begin_message(ms, lsn);
	buf_put_u8(&ms->queue, 'O');
	buf_put_u64(&ms->queue, origin_lsn);
	put_cstr(&ms->queue, MODEL_SOURCE_ORIGIN);
	end_message(ms);
	ms->stats.origins++;
}

static void send_plain(struct model_source *ms, struct txn *t, size_t at)
{
	uint32_t live = 0;
	uint64_t first = 0;
	for (uint32_t i = 0; i < t->n_changes; i++)
		if (alive_at(&t->changes[i], at)) {
			if (!live)
				first = t->changes[i].lsn;
			live++;
		}
	if (live == 0 && !ms->o.send_empty)
		return; /* PostgreSQL 15 skips empty transactions */
	struct buf *b = &ms->queue;
	begin_message(ms, live ? first : t->commit_lsn);
	buf_put_u8(b, 'B');
	buf_put_u64(b, t->commit_lsn);
	buf_put_u64(b, (uint64_t)t->commit_ts);
	buf_put_u32(b, t->xid);
	end_message(ms);
	ms->stats.begins++;
	if (t->origin_lsn)
		send_origin(ms, t->origin_lsn, live ? first : t->commit_lsn);
	for (uint32_t i = 0; i < t->n_changes; i++)
		if (alive_at(&t->changes[i], at)) {
			struct change plain = t->changes[i];
			plain.xid = t->xid;
			send_change(ms, NULL, &plain);
		}
	begin_message(ms, t->end_lsn);
	buf_put_u8(b, 'C');
	buf_put_u8(b, 0);
	buf_put_u64(b, t->commit_lsn);
	buf_put_u64(b, t->end_lsn);
	buf_put_u64(b, (uint64_t)t->commit_ts);
	end_message(ms);
	ms->stats.commits++;
	if (t->large)
		ms->stats.streamed_sent_plain++;
}

static void send_stream_start(struct model_source *ms, struct txn *t, uint64_t lsn)
{
	begin_message(ms, lsn);
	buf_put_u8(&ms->queue, 'S');
	buf_put_u32(&ms->queue, t->xid);
	buf_put_u8(&ms->queue, t->s_streamed ? 0 : 1);
	end_message(ms);
	if (!t->s_streamed && t->origin_lsn)
		send_origin(ms, 0, lsn);
	if (!t->s_streamed && ms->n_streaming < (int)(sizeof ms->streaming / sizeof *ms->streaming))
		ms->streaming[ms->n_streaming++] = t->index;
	t->s_streamed = true;
	ms->stats.stream_starts++;
}

static void send_stream_stop(struct model_source *ms, uint64_t lsn)
{
	begin_message(ms, lsn);
	buf_put_u8(&ms->queue, 'E');
	end_message(ms);
	ms->stats.stream_stops++;
}

static void stream_ended(struct model_source *ms, const struct txn *t)
{
	for (int i = 0; i < ms->n_streaming; i++)
		if (ms->streaming[i] == t->index) {
			ms->streaming[i] = ms->streaming[--ms->n_streaming];
			return;
		}
}

static void send_stream_abort(struct model_source *ms, struct txn *t, uint32_t subxid, uint64_t lsn)
{
	begin_message(ms, lsn);
	buf_put_u8(&ms->queue, 'A');
	buf_put_u32(&ms->queue, t->xid);
	buf_put_u32(&ms->queue, subxid);
	end_message(ms);
	ms->stats.stream_aborts++;
	t->s_rel_sent = 0; /* cleanup_rel_sync_cache(toptxn) */
}

/* Streams what t holds at event `at`: its changes not yet sent, alive. */
static void send_block(struct model_source *ms, struct txn *t, uint32_t upto, size_t at)
{
	uint32_t first = NONE, last = NONE;
	for (uint32_t i = t->s_sent_upto; i < upto; i++)
		if (alive_at(&t->changes[i], at)) {
			if (first == NONE)
				first = i;
			last = i;
		}
	if (first == NONE)
		return; /* nothing to stream: PostgreSQL picks the largest transaction */
	send_stream_start(ms, t, t->changes[first].lsn);
	for (uint32_t i = first; i <= last; i++)
		if (alive_at(&t->changes[i], at))
			send_change(ms, t, &t->changes[i]);
	send_stream_stop(ms, t->changes[last].lsn);
	t->s_sent_upto = upto;
}

/* ReorderBufferTruncateTXN marks a subtransaction streamed only when
 * changes of its own were streamed: only those are aborted remotely
 * ("we never stream XIDs of empty subxacts"). */
static bool sub_streamed(const struct txn *t, const struct subxact *s)
{
	return s->first != NONE && s->first < t->s_sent_upto;
}

/* What event `at` makes the walsender send, into the queue. */
static void decode_event(struct model_source *ms, size_t at)
{
	const struct event *e = &ms->events[at];
	struct txn *t = e->txn == NONE ? NULL : ms->txns[e->txn];
	bool past_start = e->lsn >= ms->start_decoding_at;
	bool stream = ms->o.streaming;
	switch (e->kind) {
	case EV_COMMIT:
		if (past_start)
			send_plain(ms, t, at);
		break;
	case EV_STREAM_POINT:
		if (stream && past_start && !(t->state == TXN_COMMITTED && t->commit_lsn < ms->start_decoding_at))
			send_block(ms, t, e->arg, at);
		break;
	case EV_SUBABORT: {
		const struct subabort *ab = &t->aborts[e->arg];
		if (stream && past_start && t->s_streamed) {
			for (size_t k = 0; k < ab->n; k++) {
				const struct subxact *s = NULL;
				for (size_t j = 0; j < t->n_subs; j++)
					if (t->subs[j].xid == ab->xids[k])
						s = &t->subs[j];
				if (s && sub_streamed(t, s))
					send_stream_abort(ms, t, ab->xids[k], e->lsn);
			}
		}
		/* changes of the subtransaction not yet streamed are simply dropped */
		break;
	}
	case EV_STREAM_COMMIT:
		if (!past_start)
			break;
		if (t->s_streamed) {
			send_block(ms, t, t->n_changes, at);
			begin_message(ms, t->end_lsn);
			buf_put_u8(&ms->queue, 'c');
			buf_put_u32(&ms->queue, t->xid);
			buf_put_u8(&ms->queue, 0);
			buf_put_u64(&ms->queue, t->commit_lsn);
			buf_put_u64(&ms->queue, t->end_lsn);
			buf_put_u64(&ms->queue, (uint64_t)t->commit_ts);
			end_message(ms);
			ms->stats.stream_commits++;
			/* cleanup_rel_sync_cache(xid, commit): its descriptors count as sent */
			for (int k = 0; k < MODEL_SOURCE_MAX_TABLES; k++)
				if (t->s_rel_sent & (1u << k))
					ms->schema_sent[k] = true;
			stream_ended(ms, t);
		} else {
			send_plain(ms, t, at);
		}
		break;
	case EV_STREAM_ABORT:
		if (!stream || !past_start)
			break;
		if (t->s_streamed) {
			/* DecodeAbort: the subtransactions first, then the transaction */
			for (size_t k = 0; k < t->n_subs; k++)
				if (!t->subs[k].aborted && sub_streamed(t, &t->subs[k]))
					send_stream_abort(ms, t, t->subs[k].xid, e->lsn);
			send_stream_abort(ms, t, t->xid, e->lsn);
			stream_ended(ms, t);
		} else if (sim_rng_chance(&ms->wrng, ms->o.late_abort_pct)) {
			/* decoded after the abort: the first catalog access notices it,
			 * the block is empty (tests/fixtures/pgoutput/stream_abort_late.hex) */
			send_stream_start(ms, t, e->lsn);
			send_stream_stop(ms, e->lsn);
			send_stream_abort(ms, t, t->xid, e->lsn);
			stream_ended(ms, t);
			ms->stats.late_aborts++;
		}
		break;
	default: /* EV_HEARTBEAT */
		if (past_start) {
			struct buf *b = &ms->queue;
			char content[32];
			int n = snprintf(content, sizeof content, "beat %u", e->arg);
			begin_message(ms, e->lsn);
			buf_put_u8(b, 'M');
			buf_put_u8(b, 0); /* non-transactional */
			buf_put_u64(b, e->lsn);
			put_cstr(b, MODEL_SOURCE_HEARTBEAT_PREFIX);
			buf_put_u32(b, (uint32_t)n);
			buf_put(b, content, (size_t)n);
			end_message(ms);
			ms->stats.heartbeats++;
		}
		break;
	}
}

/* ---- the session ---- */

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static uint64_t get_be64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static void make_keepalive(struct model_source *ms, bool reply)
{
	send_tick(ms);
	ms->keepalive[0] = 'k';
	put_be64(ms->keepalive + 1, ms->sent_ptr);
	put_be64(ms->keepalive + 9, (uint64_t)ms->send_now);
	ms->keepalive[17] = reply ? 1 : 0;
	ms->keepalive_ptr = ms->sent_ptr;
	ms->stats.keepalives++;
	ms->stats.reply_requests += reply;
}

int model_source_connect_from(struct model_source *ms, uint64_t requested_lsn)
{
	if (ms->connected)
		return fail(ms, "model source: START_REPLICATION on a connection that is already streaming");
	if (ms->slot_missing)
		return fail(ms, "model source: replication slot does not exist");
	if (ms->slot_invalidated)
		return fail(ms, "model source: can no longer get changes from the replication slot (invalidated)");
	ms->connected = true;
	ms->start_decoding_at = requested_lsn > ms->confirmed_flush ? requested_lsn : ms->confirmed_flush;
	ms->next_event = 0;
	ms->sent_ptr = ms->pending_end = ms->start_decoding_at;
	ms->keepalive_ptr = 0;
	memset(ms->schema_sent, 0, sizeof ms->schema_sent);
	ms->n_streaming = 0;
	for (size_t i = 0; i < ms->n_txns; i++) {
		ms->txns[i]->s_streamed = false;
		ms->txns[i]->s_sent_upto = 0;
		ms->txns[i]->s_rel_sent = 0;
	}
	ms->queue.len = 0;
	ms->n_spans = ms->span_pos = 0;
	ms->keepalive_done = false;
	ms->stats.sessions++;
	return 0;
}

int model_source_connect(struct model_source *ms)
{
	return model_source_connect_from(ms, 0);
}

bool model_source_connected(const struct model_source *ms)
{
	return ms->connected;
}

void model_source_disconnect(struct model_source *ms)
{
	ms->connected = false;
}

int model_source_next(struct model_source *ms, const uint8_t **buf, size_t *len)
{
	if (!ms->connected)
		return fail(ms, "model source: no replication session");
	for (;;) {
		if (ms->span_pos < ms->n_spans) {
			if (!ms->keepalive_done && sim_rng_chance(&ms->wrng, ms->o.keepalive_pct)) {
				/* WalSndKeepaliveIfNecessary while writing: sentPtr is still
				 * the end of the record before the one being decoded */
				make_keepalive(ms, sim_rng_chance(&ms->wrng, ms->o.reply_request_pct));
				ms->keepalive_done = true;
				*buf = ms->keepalive;
				*len = sizeof ms->keepalive;
				return 1;
			}
			ms->keepalive_done = false;
			const struct msg_span *s = &ms->spans[ms->span_pos++];
			send_tick(ms);
			put_be64(ms->queue.data + s->off + 17, (uint64_t)ms->send_now);
			*buf = ms->queue.data + s->off;
			*len = s->len;
			return 1;
		}
		ms->sent_ptr = ms->pending_end > ms->sent_ptr ? ms->pending_end : ms->sent_ptr;
		ms->queue.len = 0;
		ms->n_spans = ms->span_pos = 0;
		if (ms->next_event < ms->n_events) {
			size_t at = ms->next_event++;
			decode_event(ms, at);
			ms->pending_end = ms->events[at].end;
			continue;
		}
		/* caught up: everything written has been read */
		if (ms->wal > ms->sent_ptr)
			ms->sent_ptr = ms->wal;
		if (ms->keepalive_ptr != ms->sent_ptr) {
			make_keepalive(ms, sim_rng_chance(&ms->wrng, ms->o.reply_request_pct));
			*buf = ms->keepalive;
			*len = sizeof ms->keepalive;
			return 1;
		}
		return 0;
	}
}

int model_source_on_status(struct model_source *ms, const uint8_t *buf, size_t len)
{
	if (!ms->connected)
		return fail(ms, "model source: standby status update without a replication session");
	if (len != 34 || buf[0] != 'r')
		return fail(ms, "model source: malformed standby status update (%zu bytes, type 0x%02x)", len,
			    len ? buf[0] : 0);
	uint64_t flushed = get_be64(buf + 9);
	if (flushed > ms->highest_flushed)
		ms->highest_flushed = flushed;
	if (flushed > ms->confirmed_flush)
		ms->confirmed_flush = flushed; /* LogicalConfirmReceivedLocation: never backwards */
	return 0;
}

void model_source_checkpoint(struct model_source *ms)
{
	ms->persisted_flush = ms->confirmed_flush;
}

void model_source_crash_restart(struct model_source *ms)
{
	ms->connected = false;
	ms->confirmed_flush = ms->persisted_flush;
	ms->stats.crash_restarts++;
}

void model_source_promote(struct model_source *ms, unsigned lag)
{
	ms->connected = false;
	ms->timeline++;
	ms->stats.promotions++;
	if (lag == 0)
		return;
	/* the confirmed transactions; the synced slot is lag of them behind,
	 * never before the slot's creation */
	size_t confirmed = 0;
	while (confirmed < ms->n_committed && ms->log[confirmed].end_lsn <= ms->confirmed_flush)
		confirmed++;
	uint64_t behind = confirmed > lag ? ms->log[confirmed - lag - 1].end_lsn : ms->slot_created_at;
	if (behind < ms->slot_created_at)
		behind = ms->slot_created_at;
	if (behind < ms->confirmed_flush)
		ms->confirmed_flush = behind;
	if (ms->persisted_flush > ms->confirmed_flush)
		ms->persisted_flush = ms->confirmed_flush;
}

void model_source_promote_without_slot(struct model_source *ms)
{
	model_source_promote(ms, 0);
	ms->slot_missing = true;
}

void model_source_lose_slot(struct model_source *ms, enum model_slot_loss how)
{
	ms->connected = false;
	if (how == MODEL_SLOT_DROPPED) {
		ms->slot_missing = true;
		return;
	}
	ms->slot_invalidated = true;
	ms->invalidated_by = how;
}

void model_source_create_slot(struct model_source *ms)
{
	ms->connected = false;
	ms->slot_missing = false;
	ms->slot_invalidated = false;
	ms->slot_created_at = ms->confirmed_flush = ms->persisted_flush = ms->wal;
}

void model_source_slot(const struct model_source *ms, struct model_source_slot *slot)
{
	/* PostgreSQL 17+: wal_status "lost" for removed WAL, and the reason;
	 * an idle slot's WAL is still there */
	bool wal_removed = ms->slot_invalidated && ms->invalidated_by == MODEL_SLOT_WAL_REMOVED;
	bool idle = ms->slot_invalidated && ms->invalidated_by == MODEL_SLOT_IDLE_TIMEOUT;
	*slot = (struct model_source_slot){
		.exists = !ms->slot_missing,
		.wal_status = ms->slot_missing ? "" : wal_removed ? "lost" : "reserved",
		.invalidation_reason = ms->slot_missing ? "" : wal_removed ? "wal_removed" : idle ? "idle_timeout" : "",
	};
}

uint64_t model_source_confirmed_flush(const struct model_source *ms)
{
	return ms->confirmed_flush;
}

uint64_t model_source_highest_flushed(const struct model_source *ms)
{
	return ms->highest_flushed;
}

uint64_t model_source_system_id(const struct model_source *ms)
{
	return ms->system_id;
}

uint32_t model_source_timeline(const struct model_source *ms)
{
	return ms->timeline;
}

int model_source_proto_version(const struct model_source *ms)
{
	return ms->o.proto_version;
}

const struct model_source_stats *model_source_stats(const struct model_source *ms)
{
	return &ms->stats;
}
