/*
 * assembler.c - pgoutput messages to stream frames (assembler.h): the
 * open transactions and their changes; spill files and subtransactions
 * are in assembler_spill.c, emitting a committed one in assembler_emit.c.
 */
#include "trellara/assembler.h"

#include "assembler_internal.h"

#include "trellara/defaults.h"
#include "trellara/fsutil.h"
#include "trellara/strbuf.h"
#include "trellara/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
	a->spill_prefix = assembler_spill_prefix_of(o->flow);
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
	assembler_remove_stale_spill_files(a->spill_dir, a->spill_prefix);
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
	free(t->pending);
	free(t->origin);
	free(t);
}

void assembler_txn_remove(struct assembler *a, struct txn *t)
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
	t->direct = streamed && !a->options.spill_streamed;
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
	/* the open transactions' pending chunks are never listed: what is
	 * written from here on is another run's */
	for (size_t i = 0; i < a->n_txns; i++)
		if (a->txns[i]->next_seq > 0) {
			a->options.run++;
			break;
		}
	while (a->n_txns)
		assembler_txn_remove(a, a->txns[0]);
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

static int add_change(struct assembler *a, struct txn *t, const struct pgoutput_session *session,
		      const struct pgoutput_message *msg, assembler_emit_fn emit, void *ctx, struct assembler_result *result,
		      char *err, size_t errlen)
{
	if (t->streamed && msg->has_xid)
		assembler_note_subxact(t, msg->xid);
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
		if (strcmp(msg->message.prefix, ASSEMBLER_FENCE_PREFIX) == 0) {
			/* verify's fence marks a position, it changes nothing */
			t->fence_messages++;
			return 0;
		}
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
	uint64_t share = t->direct && a->options.streamed_threshold_changes ? a->options.streamed_threshold_changes
									    : a->options.spill_threshold_changes;
	if (t->memory_changes >= share || t->memory.len >= ASSEMBLER_MAX_MEMORY_BYTES) {
		if (t->direct) {
			/* full chunks first; a partial rest stays while it is under the share */
			int rc = assembler_write_pending(a, t, false, emit, ctx, &result->frames, err, errlen);
			if (rc == 0 && (t->memory_changes >= share ||
					t->memory.len >= ASSEMBLER_MAX_MEMORY_BYTES))
				rc = assembler_write_pending(a, t, true, emit, ctx, &result->frames, err, errlen);
			return rc;
		}
		return assembler_spill(a, t, err, errlen);
	}
	return 0;
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
		return assembler_commit_txn(a, t, msg->commit.commit_lsn, msg->commit.end_lsn, msg->commit.commit_ts,
					    emit, ctx, result, err, errlen);
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
		return add_change(a, t, session, msg, emit, ctx, result, err, errlen);
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
		return assembler_commit_txn(a, t, msg->commit.commit_lsn, msg->commit.end_lsn, msg->commit.commit_ts,
					    emit, ctx, result, err, errlen);
	}
	case PGOUTPUT_STREAM_ABORT: {
		struct txn *t = txn_find(a, msg->xid);
		result->event = ASSEMBLER_ABORTED;
		result->xid = msg->xid;
		if (!t)
			return 0;
		if (msg->stream_abort.subxid == msg->xid) {
			int rc = assembler_write_pending_abort(a, t, emit, ctx, &result->frames, err, errlen);
			assembler_txn_remove(a, t);
			return rc;
		}
		return assembler_abort_subxact(t, msg->stream_abort.subxid, err, errlen);
	}
	}
	return errbuf_setf(err, errlen, "unexpected message type 0x%02x", msg->type);
}
