/*
 * inspect_print.c - the report of one transaction (inspect_internal.h):
 * text, or one JSON object (jsonw.h).
 */
#include "inspect_internal.h"

#include "trellara/jsonw.h"
#include "trellara/lsn.h"
#include "trellara/stream.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char *const binding_names[] = { "n/a", "ok", "broken", "incomplete" };

static bool any_mismatch(const struct txn_view *v)
{
	for (size_t i = 0; i < v->n_frames; i++)
		if (!v->frames[i].crc_ok)
			return true;
	return false;
}

static const char *applied_names[] = { "applied", "not_applied", "unknown" };

void inspect_print_json(const struct txn_view *v, enum inspect_applied applied, const char *applied_detail)
{
	struct jsonw w;
	char crc[16];
	jsonw_init(&w, stdout, false);
	jsonw_open(&w, NULL, '{');
	jsonw_lsn(&w, "commit_lsn", true, v->commit_lsn);
	jsonw_lsn(&w, "end_lsn", true, v->end_lsn);
	jsonw_u64(&w, "xid", true, v->xid);
	jsonw_str(&w, "source_id", v->source_id);
	jsonw_str(&w, "form", v->form);
	jsonw_open(&w, "frames", '[');
	for (size_t i = 0; i < v->n_frames; i++) {
		const struct frame_rec *r = &v->frames[i];
		jsonw_open(&w, NULL, '{');
		jsonw_u64(&w, "offset", true, r->offset);
		jsonw_str(&w, "type", frame_type_name(r->type));
		jsonw_u64(&w, "length", true, r->stored_length);
		jsonw_u64(&w, "payload_length", r->payload_length || r->crc_ok, r->payload_length);
		jsonw_u64(&w, "flags", true, r->flags);
		jsonw_bool(&w, "compressed", r->compressed);
		jsonw_str(&w, "checksum", r->crc_ok ? "match" : "mismatch");
		jsonw_str(&w, "file", r->file);
		jsonw_u64(&w, "position", true, r->position);
		jsonw_close(&w, '}');
	}
	jsonw_close(&w, ']');
	jsonw_str(&w, "checksums", any_mismatch(v) ? "mismatch" : "match");
	jsonw_open(&w, "tables", '[');
	for (size_t i = 0; i < v->tally.n; i++) {
		const struct table_count *t = &v->tally.tables[i];
		jsonw_open(&w, NULL, '{');
		jsonw_str(&w, "table", t->name);
		jsonw_u64(&w, "inserts", true, t->inserts);
		jsonw_u64(&w, "updates", true, t->updates);
		jsonw_u64(&w, "deletes", true, t->deletes);
		jsonw_u64(&w, "truncates", true, t->truncates);
		jsonw_close(&w, '}');
	}
	jsonw_close(&w, ']');
	jsonw_u64(&w, "changes", v->form != NULL, v->tally.changes);
	if (v->manifest.present) {
		const struct manifest_rec *m = &v->manifest;
		jsonw_open(&w, "manifest", '{');
		jsonw_u64(&w, "offset", true, m->offset);
		jsonw_u64(&w, "version", true, (uint64_t)m->version);
		jsonw_str(&w, "chunk_form", m->version == ENV_MANIFEST_BY_OFFSET ? "pending_chunk" : "chunk");
		snprintf(crc, sizeof crc, "0x%08x", m->crc);
		jsonw_str(&w, "crc", crc);
		jsonw_u64(&w, "chunk_count", true, m->chunk_count);
		jsonw_u64(&w, "total_changes", true, m->total_changes);
		jsonw_open(&w, "chunks", '[');
		for (uint32_t i = 0; i < m->chunk_count; i++) {
			jsonw_open(&w, NULL, '{');
			jsonw_u64(&w, "index", true, i);
			jsonw_u64(&w, "offset", m->chunk_offsets[i] != UINT64_MAX, m->chunk_offsets[i]);
			snprintf(crc, sizeof crc, "0x%08x", m->chunks[i].crc);
			jsonw_str(&w, "crc", crc);
			jsonw_u64(&w, "changes", true, m->chunks[i].changes);
			jsonw_close(&w, '}');
		}
		jsonw_close(&w, ']');
		jsonw_open(&w, "tables", '[');
		for (uint32_t i = 0; i < m->n_tables; i++)
			jsonw_str(&w, NULL, m->tables[i]);
		jsonw_close(&w, ']');
		jsonw_close(&w, '}');
	} else {
		jsonw_null(&w, "manifest");
	}
	if (v->have_marker) {
		jsonw_open(&w, "commit_marker", '{');
		jsonw_u64(&w, "offset", true, v->marker_offset);
		jsonw_u64(&w, "chunk_count", true, v->marker_chunk_count);
		snprintf(crc, sizeof crc, "0x%08x", v->marker_crc);
		jsonw_str(&w, "manifest_crc", crc);
		jsonw_close(&w, '}');
	} else {
		jsonw_null(&w, "commit_marker");
	}
	jsonw_str(&w, "binding", binding_names[v->binding]);
	jsonw_str(&w, "binding_detail", v->binding_detail[0] ? v->binding_detail : NULL);
	jsonw_str(&w, "applied", applied_names[applied]);
	jsonw_str(&w, "applied_detail", applied_detail);
	jsonw_open(&w, "notes", '[');
	for (size_t i = 0; i < v->n_notes; i++)
		jsonw_str(&w, NULL, v->notes[i]);
	jsonw_close(&w, ']');
	jsonw_close(&w, '}');
	putchar('\n');
}

void inspect_print_text(const struct txn_view *v, enum inspect_applied applied, const char *applied_detail)
{
	char a[LSN_FORMAT_LEN], b[LSN_FORMAT_LEN];
	printf("transaction:  xid %u, commit LSN %s, end LSN %s, source %s\n", v->xid, lsn_format(v->commit_lsn, a),
	       lsn_format(v->end_lsn, b), v->source_id ? v->source_id : "-");
	printf("form:         %s\n", v->form ? v->form : "none complete");
	printf("frames:       %zu\n", v->n_frames);
	for (size_t i = 0; i < v->n_frames; i++) {
		const struct frame_rec *r = &v->frames[i];
		printf("  offset %" PRIu64 ": %s, length %u, flags %u%s, checksum %s (%s byte %" PRIu64 ")\n", r->offset,
		       frame_type_name(r->type), r->stored_length, r->flags, r->compressed ? " (compressed)" : "",
		       r->crc_ok ? "match" : "MISMATCH", r->file, r->position);
	}
	printf("checksums:    %s\n", any_mismatch(v) ? "MISMATCH" : "match");
	printf("tables:       %zu, %" PRIu64 " changes\n", v->tally.n, v->tally.changes);
	for (size_t i = 0; i < v->tally.n; i++) {
		const struct table_count *t = &v->tally.tables[i];
		printf("  %s: %" PRIu64 " inserts, %" PRIu64 " updates, %" PRIu64 " deletes", t->name, t->inserts,
		       t->updates, t->deletes);
		if (t->truncates)
			printf(", %" PRIu64 " truncates", t->truncates);
		putchar('\n');
	}
	if (v->manifest.present) {
		const struct manifest_rec *m = &v->manifest;
		printf("manifest:     offset %" PRIu64 ", version %d (%s), %u chunks, %" PRIu64 " changes, crc 0x%08x\n",
		       m->offset, m->version, m->version == ENV_MANIFEST_BY_OFFSET ? "pending chunks by offset" : "chunks",
		       m->chunk_count, m->total_changes, m->crc);
		for (uint32_t i = 0; i < m->chunk_count; i++) {
			if (m->chunk_offsets[i] != UINT64_MAX)
				printf("  chunk %u: offset %" PRIu64, i, m->chunk_offsets[i]);
			else
				printf("  chunk %u: offset -", i);
			printf(", crc 0x%08x, %u changes\n", m->chunks[i].crc, m->chunks[i].changes);
		}
	} else {
		printf("manifest:     none\n");
	}
	if (v->have_marker)
		printf("commit marker: offset %" PRIu64 ", %u chunks, manifest crc 0x%08x\n", v->marker_offset,
		       v->marker_chunk_count, v->marker_crc);
	printf("binding:      %s%s%s\n", binding_names[v->binding], v->binding_detail[0] ? ": " : "", v->binding_detail);
	printf("applied:      %s (%s)\n", applied_names[applied], applied_detail);
	for (size_t i = 0; i < v->n_notes; i++)
		printf("note:         %s\n", v->notes[i]);
}

