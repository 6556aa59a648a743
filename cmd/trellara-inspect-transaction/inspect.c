/*
 * inspect.c - one source transaction from the stream (inspect.h).
 *
 * Two walks.  The first finds the transaction: its commit LSN and xid
 * (--commit-lsn: the first frame of a transaction at that LSN; --offset:
 * the frame there, a pending chunk through the version 2 manifest that
 * lists it; a frame file alone: its first transaction frame).  The second
 * reads the stream (or file) from its start and takes every frame of the
 * transaction in order, judging a chunk set as applyd does (apply_chunks.h)
 * and reading a written-once set's pending chunks back by offset.  The
 * first complete form (a txn frame, or chunks bound by their manifest and
 * commit marker) gives the tables and counts; a set cut short and sent
 * again is noted, not a failure, as it is not one for applyd.
 */
#include "inspect.h"
#include "inspect_internal.h"

#include "trellara/apply_chunks.h"
#include "trellara/checksum.h"
#include "trellara/config.h"
#include "trellara/defaults.h"
#include "trellara/envelope.h"
#include "trellara/frame_walk.h"
#include "trellara/jsonw.h"
#include "trellara/log.h"
#include "trellara/lsn.h"
#include "trellara/stream_exit.h"
#include "trellara/xalloc.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct inspect_ctx {
	const struct inspect_options *o;
	struct frame_walk *back; /* owned: the read-back walk */
};

static void note(struct txn_view *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct txn_view *v, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *text = NULL;
	if (vasprintf(&text, fmt, ap) < 0)
		abort();
	va_end(ap);
	v->notes = xrealloc(v->notes, (v->n_notes + 1) * sizeof *v->notes);
	v->notes[v->n_notes++] = text;
}

static void tally_free(struct tally *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->tables[i].name);
	free(t->tables);
	memset(t, 0, sizeof *t);
}

static struct table_count *tally_table(struct tally *t, const struct env_relation *r)
{
	char *name = xasprintf("%.*s.%.*s", (int)r->schema_len, r->schema, (int)r->name_len, r->name);
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->tables[i].name, name) == 0) {
			free(name);
			return &t->tables[i];
		}
	t->tables = xrealloc(t->tables, (t->n + 1) * sizeof *t->tables);
	memset(&t->tables[t->n], 0, sizeof t->tables[t->n]);
	t->tables[t->n].name = name;
	return &t->tables[t->n++];
}

/* Counts at most limit changes of an envelope into t; the number taken,
 * or -1 with error. */
static int64_t tally_envelope(struct tally *t, const uint8_t *env, size_t len, uint64_t limit, char *error,
			      size_t error_len)
{
	struct env_decoder d;
	int64_t taken = -1;
	if (env_decode_begin(&d, env, len) < 0) {
		snprintf(error, error_len, "%s", d.error);
		goto out;
	}
	const struct env_change *c;
	int rc;
	taken = 0;
	while ((uint64_t)taken < limit && (rc = env_decode_next(&d, &c)) == 1) {
		taken++;
		const struct env_relation *rels = d.header.relations;
		switch (c->op) {
		case ENV_INSERT: tally_table(t, &rels[c->relation])->inserts++; break;
		case ENV_UPDATE: tally_table(t, &rels[c->relation])->updates++; break;
		case ENV_DELETE: tally_table(t, &rels[c->relation])->deletes++; break;
		case ENV_TRUNCATE:
			for (uint32_t i = 0; i < c->n_truncate; i++)
				tally_table(t, &rels[c->truncate_relations[i]])->truncates++;
			break;
		default: break;
		}
	}
	if ((uint64_t)taken < limit && rc < 0) {
		snprintf(error, error_len, "%s", d.error);
		taken = -1;
		goto out;
	}
	t->changes += (uint64_t)taken;
out:
	env_decoder_free(&d);
	return taken;
}

static void tally_move(struct tally *to, struct tally *from)
{
	tally_free(to);
	*to = *from;
	memset(from, 0, sizeof *from);
}

static void record_frame(struct txn_view *v, const struct walked_frame *f)
{
	for (size_t i = 0; i < v->n_frames; i++)
		if (v->frames[i].offset == f->offset && strcmp(v->frames[i].file, f->file) == 0)
			return;
	v->frames = xrealloc(v->frames, (v->n_frames + 1) * sizeof *v->frames);
	struct frame_rec *r = &v->frames[v->n_frames++];
	r->offset = f->offset;
	r->type = f->header.type;
	r->flags = f->header.flags;
	r->compressed = f->compressed;
	r->stored_length = f->header.payload_length;
	r->payload_length = f->payload ? f->payload_length : 0;
	r->crc_ok = f->crc_ok;
	r->crc_recorded = f->header.crc;
	r->crc_found = f->crc_found;
	r->file = xstrdup(f->file);
	r->position = f->position;
}

static void broken(struct txn_view *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void broken(struct txn_view *v, const char *fmt, ...)
{
	if (v->binding != BINDING_BROKEN) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(v->binding_detail, sizeof v->binding_detail, fmt, ap);
		va_end(ap);
		v->binding = BINDING_BROKEN;
	}
	chunk_set_reset(&v->cs);
	tally_free(&v->set_tally);
	v->n_set_offsets = 0;
}

static void set_discard(struct txn_view *v, const char *why)
{
	if (!v->cs.active)
		return;
	note(v, "an incomplete chunk set (%u chunks from offset %" PRIu64 ") was discarded: %s", v->cs.next_index,
	     v->cs.first_offset, why);
	chunk_set_reset(&v->cs);
	tally_free(&v->set_tally);
	v->n_set_offsets = 0;
}

static void manifest_record(struct txn_view *v, const struct env_manifest *m, uint64_t offset, uint32_t crc)
{
	struct manifest_rec *r = &v->manifest;
	free(r->chunks);
	free(r->chunk_offsets);
	for (uint32_t i = 0; i < r->n_tables; i++)
		free(r->tables[i]);
	free(r->tables);
	memset(r, 0, sizeof *r);
	r->present = true;
	r->offset = offset;
	r->version = m->by_offset ? ENV_MANIFEST_BY_OFFSET : 1;
	r->crc = crc;
	r->chunk_count = m->chunk_count;
	r->total_changes = m->total_changes;
	r->chunks = xcalloc(m->chunk_count + 1, sizeof *r->chunks);
	memcpy(r->chunks, m->chunks, m->chunk_count * sizeof *r->chunks);
	r->chunk_offsets = xcalloc(m->chunk_count + 1, sizeof *r->chunk_offsets);
	for (uint32_t i = 0; i < m->chunk_count; i++)
		r->chunk_offsets[i] = m->by_offset ? m->chunks[i].offset
				      : i < v->n_set_offsets ? v->set_offsets[i] : UINT64_MAX;
	r->n_tables = m->n_tables;
	r->tables = xcalloc(m->n_tables + 1, sizeof *r->tables);
	for (uint32_t i = 0; i < m->n_tables; i++)
		r->tables[i] = xasprintf("%.*s", (int)m->table_lens[i], m->tables[i]);
}

/* The frame at offset, through the read-back walk: STREAM_OK, or
 * STREAM_ERANGE when the stream (file) does not hold it. */
static int fetch_frame(struct inspect_ctx *ctx, uint64_t offset, struct walked_frame *f)
{
	const struct inspect_options *o = ctx->o;
	int rc;
	if (o->stream_dir) {
		if (!ctx->back && (rc = frame_walk_open_stream(o->stream_dir, &ctx->back)) != STREAM_OK)
			return rc;
		if ((rc = frame_walk_seek(ctx->back, offset)) != STREAM_OK)
			return rc;
		rc = frame_walk_next(ctx->back, f);
		return rc == STREAM_END ? STREAM_ERANGE : rc;
	}
	frame_walk_close(ctx->back);
	ctx->back = NULL;
	if ((rc = frame_walk_open_file(o->frame_file, &ctx->back)) != STREAM_OK)
		return rc;
	while ((rc = frame_walk_next(ctx->back, f)) == STREAM_OK)
		if (f->offset == offset)
			return STREAM_OK;
	return rc == STREAM_END ? STREAM_ERANGE : rc;
}

/* The set written once: its marker checked; read each listed pending
 * chunk back and check it as applyd does.  -1: the stream cannot be read. */
static int read_back(struct inspect_ctx *ctx, struct txn_view *v)
{
	struct chunk_set *cs = &v->cs;
	char detail[256], err[256];
	for (uint32_t k = 0; k < cs->n_listed; k++) {
		uint64_t offset = cs->listed[k].offset;
		struct walked_frame f;
		int rc = fetch_frame(ctx, offset, &f);
		if (rc == STREAM_ERANGE) {
			broken(v, "pending chunk %u (stream offset %" PRIu64 ") is not in the %s", k, offset,
			       ctx->o->stream_dir ? "stream" : "file");
			return 0;
		}
		if (rc != STREAM_OK)
			return -1;
		record_frame(v, &f);
		if (!f.payload) {
			broken(v, "pending chunk %u (stream offset %" PRIu64 "): payload does not decode: %s", k, offset,
			       f.payload_error);
			return 0;
		}
		struct env_frame_summary s;
		if (f.header.type != FRAME_PENDING_CHUNK ||
		    env_frame_summary(FRAME_PENDING_CHUNK, f.payload, f.payload_length, &s, err, sizeof err) < 0)
			memset(&s, 0, sizeof s);
		uint32_t crc = crc32c(0, f.payload, f.payload_length);
		if (!chunk_set_check_pending(cs, k, offset, f.header.type, &s, crc, detail, sizeof detail)) {
			broken(v, "%s", detail);
			return 0;
		}
		int64_t taken = tally_envelope(&v->set_tally, f.payload + ENV_PENDING_HEAD_SIZE,
					       f.payload_length - ENV_PENDING_HEAD_SIZE, cs->listed[k].changes, err,
					       sizeof err);
		if (taken < 0) {
			broken(v, "pending chunk %u (stream offset %" PRIu64 "): %s", k, offset, err);
			return 0;
		}
		if (!chunk_set_check_pending_count(cs, k, (uint64_t)taken, detail, sizeof detail)) {
			broken(v, "%s", detail);
			return 0;
		}
	}
	return 0;
}

static bool is_txn_frame_type(int type)
{
	return type == FRAME_TXN || type == FRAME_CHUNK || type == FRAME_MANIFEST || type == FRAME_COMMIT_MARKER ||
	       type == FRAME_DDL;
}

/* A frame of the transaction, in stream order.  -1: stop (logged). */
static int take_frame(struct inspect_ctx *ctx, struct txn_view *v, const struct walked_frame *f,
		      const struct env_frame_summary *s)
{
	char detail[256], err[256];
	record_frame(v, f);
	int type = f->header.type;
	if (type == FRAME_DDL)
		return 0;
	if (type == FRAME_TXN) {
		set_discard(v, "its transaction came again whole");
		struct tally t = { 0 };
		if (tally_envelope(&t, f->payload, f->payload_length, UINT64_MAX, err, sizeof err) < 0) {
			note(v, "txn frame at offset %" PRIu64 ": %s", f->offset, err);
			v->binding = BINDING_BROKEN;
			snprintf(v->binding_detail, sizeof v->binding_detail, "txn frame at offset %" PRIu64 ": %s",
				 f->offset, err);
		} else if (!v->form) {
			v->form = "txn";
			tally_move(&v->tally, &t);
		} else {
			note(v, "the transaction is in the stream again at offset %" PRIu64 " (a duplicate applyd skips)",
			     f->offset);
		}
		tally_free(&t);
		return 0;
	}
	struct chunk_set *cs = &v->cs;
	if (type == FRAME_CHUNK) {
		bool replay = false;
		if (chunk_set_interrupted(cs, s->xid, s->commit_lsn, s->chunk_index, &replay))
			set_discard(v, "its chunk set starts again");
		if (!cs->active) {
			if (!chunk_set_check_start(cs, s->xid, s->commit_lsn, f->offset, s->chunk_index, detail,
						   sizeof detail)) {
				broken(v, "%s", detail);
				return 0;
			}
			chunk_set_begin(cs, s->xid, s->commit_lsn, s->end_lsn, f->offset, 0);
		}
		if (!chunk_set_check_index(cs, s->chunk_index, detail, sizeof detail)) {
			broken(v, "%s", detail);
			return 0;
		}
		int64_t decoded = tally_envelope(&v->set_tally, f->payload + 4, f->payload_length - 4, UINT64_MAX, err,
						 sizeof err);
		if (decoded < 0) {
			broken(v, "chunk %u at offset %" PRIu64 ": %s", s->chunk_index, f->offset, err);
			return 0;
		}
		chunk_set_add(cs, crc32c(0, f->payload, f->payload_length), (uint32_t)decoded, (uint64_t)decoded);
		v->set_offsets = xrealloc(v->set_offsets, (v->n_set_offsets + 1) * sizeof *v->set_offsets);
		v->set_offsets[v->n_set_offsets++] = f->offset;
		return 0;
	}
	if (type == FRAME_MANIFEST) {
		struct env_manifest m;
		if (env_decode_manifest(f->payload, f->payload_length, &m, err, sizeof err) < 0) {
			broken(v, "manifest at offset %" PRIu64 ": %s", f->offset, err);
			return 0;
		}
		uint32_t crc = crc32c(0, f->payload, f->payload_length);
		bool ok;
		if (m.by_offset) {
			set_discard(v, "a manifest of the transaction written once follows");
			ok = chunk_set_begin_listed(cs, &m, crc, f->offset, 0, detail, sizeof detail);
		} else if (!chunk_set_owns(cs, s->xid, s->commit_lsn, f->offset)) {
			snprintf(detail, sizeof detail, "manifest at offset %" PRIu64 " without its chunks", f->offset);
			ok = false;
		} else {
			ok = chunk_set_check_manifest(cs, &m, crc, detail, sizeof detail);
		}
		if (!v->form || !v->manifest.present)
			manifest_record(v, &m, f->offset, crc);
		env_manifest_free(&m);
		if (!ok)
			broken(v, "%s", detail);
		return 0;
	}
	if (type == FRAME_COMMIT_MARKER) {
		if (!v->form) {
			v->have_marker = true;
			v->marker_offset = f->offset;
			v->marker_chunk_count = s->chunk_count;
			v->marker_crc = s->manifest_crc;
		}
		if (!chunk_set_owns(cs, s->xid, s->commit_lsn, f->offset)) {
			broken(v, "commit marker at offset %" PRIu64 " without its chunks and manifest", f->offset);
			return 0;
		}
		if (!chunk_set_check_marker(cs, s->manifest_crc, s->chunk_count, detail, sizeof detail)) {
			if (cs->manifest_ok)
				broken(v,
				       "commit marker at offset %" PRIu64 ": %s (the marker: %u chunks, manifest CRC 0x%08x; "
				       "the manifest: %u chunks, CRC 0x%08x)",
				       f->offset, detail, s->chunk_count, s->manifest_crc,
				       cs->by_offset ? cs->n_listed : cs->next_index, cs->manifest_crc);
			else
				broken(v, "commit marker at offset %" PRIu64 ": %s", f->offset, detail);
			return 0;
		}
		bool by_offset = cs->by_offset;
		if (by_offset && read_back(ctx, v) < 0)
			return -1;
		if (!cs->active)
			return 0; /* the read-back found it broken */
		if (v->binding != BINDING_BROKEN)
			v->binding = BINDING_OK;
		if (!v->form) {
			v->form = by_offset ? "pending_chunks" : "chunks";
			tally_move(&v->tally, &v->set_tally);
		} else {
			note(v, "the transaction's chunks are in the stream again up to offset %" PRIu64
				" (a duplicate applyd skips)",
			     f->offset);
		}
		chunk_set_reset(cs);
		tally_free(&v->set_tally);
		v->n_set_offsets = 0;
	}
	return 0;
}

/* The frame summary of f, or false (a frame whose payload does not
 * decode: logged at debug level, and not taken). */
static bool summarize(const struct walked_frame *f, struct env_frame_summary *s)
{
	char err[256];
	if (!f->payload) {
		log_debug("frame at offset %" PRIu64 ": payload does not decode: %s", f->offset, f->payload_error);
		return false;
	}
	if (env_frame_summary(f->header.type, f->payload, f->payload_length, s, err, sizeof err) < 0) {
		log_debug("frame at offset %" PRIu64 ": %s", f->offset, err);
		return false;
	}
	return true;
}

static void identify(struct txn_view *v, const struct env_frame_summary *s)
{
	v->identified = true;
	v->xid = s->xid;
	v->commit_lsn = s->commit_lsn;
	v->end_lsn = s->end_lsn;
	free(v->source_id);
	v->source_id = xasprintf("%.*s", (int)s->source_id_len, s->source_id);
}

static int open_walk(const struct inspect_options *o, struct frame_walk **w)
{
	return o->stream_dir ? frame_walk_open_stream(o->stream_dir, w) : frame_walk_open_file(o->frame_file, w);
}

static int walk_code(int rc)
{
	return stream_exit_code(rc, STREAM_FROM_DATA);
}

/* --offset: the transaction of the frame there.  EXIT_OK with v
 * identified, or the exit code (reported). */
static int identify_by_offset(const struct inspect_options *o, struct txn_view *v)
{
	struct frame_walk *w = NULL;
	int rc = open_walk(o, &w), code = EXIT_OK;
	char a[LSN_FORMAT_LEN];
	if (rc != STREAM_OK)
		return walk_code(rc);
	struct walked_frame f;
	if (o->stream_dir) {
		if ((rc = frame_walk_seek(w, o->offset)) == STREAM_OK)
			rc = frame_walk_next(w, &f);
	} else {
		while ((rc = frame_walk_next(w, &f)) == STREAM_OK && f.offset != o->offset)
			;
	}
	if (rc == STREAM_END || rc == STREAM_ERANGE) {
		log_error("no frame at offset %" PRIu64 " in %s \"%s\"", o->offset, o->stream_dir ? "stream" : "file",
			  o->stream_dir ? o->stream_dir : o->frame_file);
		code = EXIT_NEGATIVE;
		goto out;
	}
	if (rc != STREAM_OK) {
		code = walk_code(rc);
		goto out;
	}
	struct env_frame_summary s;
	if (!summarize(&f, &s)) {
		log_error("frame at offset %" PRIu64 " (%s byte %" PRIu64 "): %s%s: cannot tell its transaction", f.offset,
			  f.file, f.position, f.crc_ok ? "" : "checksum mismatch, and ",
			  f.payload ? "its payload does not decode" : f.payload_error);
		code = EXIT_DATAERR;
		goto out;
	}
	int type = f.header.type;
	if (is_txn_frame_type(type)) {
		identify(v, &s);
		goto out;
	}
	if (type != FRAME_PENDING_CHUNK) {
		log_error("offset %" PRIu64 " holds a %s frame, which is no transaction's", o->offset, frame_type_name(type));
		if (type == FRAME_WATERMARK)
			log_hint("a watermark records source position %s with no transaction", lsn_format(s.lsn, a));
		code = EXIT_NEGATIVE;
		goto out;
	}
	/* a pending chunk: the version 2 manifest that lists it says which
	 * commit it belongs to */
	uint32_t xid = s.xid;
	uint64_t run = s.run;
	bool aborted = false;
	while ((rc = frame_walk_next(w, &f)) == STREAM_OK) {
		int t = f.header.type;
		if ((t != FRAME_MANIFEST && t != FRAME_PENDING_ABORT) || !summarize(&f, &s) || s.xid != xid)
			continue;
		if (t == FRAME_PENDING_ABORT && s.run == run) {
			aborted = true;
			break;
		}
		struct env_manifest m;
		char err[256];
		if (t != FRAME_MANIFEST || env_decode_manifest(f.payload, f.payload_length, &m, err, sizeof err) < 0)
			continue;
		bool listed = false;
		for (uint32_t i = 0; m.by_offset && i < m.chunk_count; i++)
			listed = listed || m.chunks[i].offset == o->offset;
		env_manifest_free(&m);
		if (listed) {
			identify(v, &s);
			goto out;
		}
	}
	if (rc != STREAM_OK && rc != STREAM_END) {
		code = walk_code(rc);
		goto out;
	}
	log_error("offset %" PRIu64 " holds pending chunk %u of transaction %u (capture run %" PRIu64
		  "), which no manifest lists: %s",
		  o->offset, s.chunk_index, xid, run,
		  aborted ? "a pending_abort says it is never listed (aborted, or written again whole)"
			  : "the transaction is still open, or was aborted");
	code = EXIT_NEGATIVE;
out:
	frame_walk_close(w);
	return code;
}

static void frames_sort(struct txn_view *v)
{
	for (size_t i = 1; i < v->n_frames; i++)
		for (size_t j = i; j > 0 && v->frames[j - 1].offset > v->frames[j].offset; j--) {
			struct frame_rec t = v->frames[j];
			v->frames[j] = v->frames[j - 1];
			v->frames[j - 1] = t;
		}
}

static void view_free(struct txn_view *v)
{
	for (size_t i = 0; i < v->n_frames; i++)
		free(v->frames[i].file);
	free(v->frames);
	tally_free(&v->tally);
	tally_free(&v->set_tally);
	chunk_set_free(&v->cs);
	free(v->set_offsets);
	free(v->manifest.chunks);
	free(v->manifest.chunk_offsets);
	for (uint32_t i = 0; i < v->manifest.n_tables; i++)
		free(v->manifest.tables[i]);
	free(v->manifest.tables);
	for (size_t i = 0; i < v->n_notes; i++)
		free(v->notes[i]);
	free(v->notes);
	free(v->source_id);
}

int inspect_run(const struct inspect_options *o)
{
	struct txn_view v;
	memset(&v, 0, sizeof v);
	struct inspect_ctx ctx = { .o = o };
	struct frame_walk *w = NULL;
	uint64_t *unreadable = NULL; /* frames with a mismatch whose payload does not decode */
	size_t n_unreadable = 0;
	int code = EXIT_OK, rc;
	char a[LSN_FORMAT_LEN];
	if (o->have_offset && (code = identify_by_offset(o, &v)) != EXIT_OK)
		goto out;
	if (o->have_commit_lsn) {
		v.commit_lsn = o->commit_lsn;
	}
	if ((rc = open_walk(o, &w)) != STREAM_OK) {
		code = walk_code(rc);
		goto out;
	}
	struct walked_frame f;
	while ((rc = frame_walk_next(w, &f)) == STREAM_OK) {
		struct env_frame_summary s;
		int type = f.header.type;
		if (!f.crc_ok && (!f.payload || !summarize(&f, &s))) {
			unreadable = xrealloc(unreadable, (n_unreadable + 1) * sizeof *unreadable);
			unreadable[n_unreadable++] = f.offset;
			continue;
		}
		if (!is_txn_frame_type(type) || !summarize(&f, &s))
			continue;
		if (!v.identified) {
			/* --commit-lsn: the first frame at that LSN; a file alone:
			 * its first transaction frame */
			if (o->have_commit_lsn && s.commit_lsn != o->commit_lsn)
				continue;
			identify(&v, &s);
		}
		if (s.xid != v.xid || s.commit_lsn != v.commit_lsn)
			continue;
		if (take_frame(&ctx, &v, &f, &s) < 0) {
			code = EXIT_DATAERR;
			goto out;
		}
	}
	if (rc != STREAM_END) {
		code = walk_code(rc);
		goto out;
	}
	for (size_t i = 0; i < n_unreadable; i++)
		note(&v, "the frame at offset %" PRIu64 " has a checksum mismatch and does not decode: it may belong to this transaction",
		     unreadable[i]);
	if ((!v.identified || v.n_frames == 0) && n_unreadable) {
		log_error("no readable transaction %s%s in %s \"%s\", and %zu frames (the first at offset %" PRIu64
			  ") have a checksum mismatch and do not decode: it may be one of them",
			  o->have_commit_lsn ? "with commit LSN " : "", o->have_commit_lsn ? lsn_format(o->commit_lsn, a) : "",
			  o->stream_dir ? "stream" : "file", o->stream_dir ? o->stream_dir : o->frame_file, n_unreadable,
			  unreadable[0]);
		code = EXIT_DATAERR;
		goto out;
	}
	if (!v.identified || v.n_frames == 0) {
		if (o->have_commit_lsn)
			log_error("no transaction with commit LSN %s in %s \"%s\"", lsn_format(o->commit_lsn, a),
				  o->stream_dir ? "stream" : "file", o->stream_dir ? o->stream_dir : o->frame_file);
		else
			log_error("no transaction in file \"%s\"", o->frame_file);
		code = EXIT_NEGATIVE;
		goto out;
	}
	if (v.cs.active && !v.form && v.binding != BINDING_BROKEN) {
		v.binding = BINDING_INCOMPLETE;
		if (v.cs.by_offset)
			snprintf(v.binding_detail, sizeof v.binding_detail,
				 "the manifest at offset %" PRIu64 " lists %u pending chunks and no commit marker follows (yet)",
				 v.cs.first_offset, v.cs.n_listed);
		else
			snprintf(v.binding_detail, sizeof v.binding_detail,
				 "%u chunks from offset %" PRIu64
				 " and no commit marker (yet): capture has not finished writing it",
				 v.cs.next_index, v.cs.first_offset);
	} else if (v.cs.active) {
		set_discard(&v, "no commit marker follows it");
	}
	frames_sort(&v);
	char applied_detail[768];
	enum inspect_applied applied = INSPECT_APPLIED_UNKNOWN;
	if (o->config)
		applied = inspect_target_applied(o->config, v.xid, v.commit_lsn, applied_detail, sizeof applied_detail);
	else
		snprintf(applied_detail, sizeof applied_detail, "no flow file given: the target was not asked");
	if (o->json)
		inspect_print_json(&v, applied, applied_detail);
	else
		inspect_print_text(&v, applied, applied_detail);
	fflush(stdout);
	for (size_t i = 0; i < v.n_frames; i++)
		if (!v.frames[i].crc_ok) {
			log_error("transaction %u (commit LSN %s): frame at offset %" PRIu64 " (%s byte %" PRIu64
				  "): checksum mismatch: the header records 0x%08x, its bytes give 0x%08x",
				  v.xid, lsn_format(v.commit_lsn, a), v.frames[i].offset, v.frames[i].file,
				  v.frames[i].position, v.frames[i].crc_recorded, v.frames[i].crc_found);
			code = EXIT_DATAERR;
		}
	if (v.binding == BINDING_BROKEN) {
		log_error("transaction %u (commit LSN %s): broken binding: %s", v.xid, lsn_format(v.commit_lsn, a),
			  v.binding_detail);
		code = EXIT_DATAERR;
	} else if (code == EXIT_OK && v.binding == BINDING_INCOMPLETE) {
		log_error("transaction %u (commit LSN %s) is not complete in the stream: %s", v.xid,
			  lsn_format(v.commit_lsn, a), v.binding_detail);
		code = EXIT_NEGATIVE;
	}
out:
	free(unreadable);
	frame_walk_close(w);
	frame_walk_close(ctx.back);
	view_free(&v);
	return code;
}
