/*
 * apply_chunks.c - a chunked transaction's checks (apply_chunks.h).
 */
#include "trellara/apply_chunks.h"

#include "trellara/apply_core.h"
#include "trellara/stream.h"
#include "trellara/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void chunk_set_reset(struct chunk_set *cs)
{
	uint32_t *crcs = cs->crcs, *counts = cs->counts;
	size_t cap = cs->cap, listed_cap = cs->listed_cap;
	struct env_manifest_chunk *listed = cs->listed;
	memset(cs, 0, sizeof *cs);
	cs->crcs = crcs;
	cs->counts = counts;
	cs->cap = cap;
	cs->listed = listed;
	cs->listed_cap = listed_cap;
}

void chunk_set_free(struct chunk_set *cs)
{
	free(cs->crcs);
	free(cs->counts);
	free(cs->listed);
	memset(cs, 0, sizeof *cs);
}

bool chunk_set_interrupted(const struct chunk_set *cs, uint32_t xid, uint64_t commit_lsn, uint32_t index,
			   bool *replay)
{
	bool same = cs->active && cs->xid == xid && cs->commit_lsn == commit_lsn;
	*replay = same && index == 0;
	return cs->active && (!same || index == 0);
}

bool chunk_set_abandon_is_gap(const struct chunk_set *cs, uint64_t next_lsn, uint64_t copied_below)
{
	return cs->active && next_lsn > cs->commit_lsn && !cs->duplicate && cs->commit_lsn >= copied_below;
}

bool chunk_set_check_start(struct chunk_set *cs, uint32_t xid, uint64_t commit_lsn, uint64_t offset, uint32_t index,
			   char *detail, size_t detail_len)
{
	if (index == 0)
		return true;
	cs->xid = xid;
	cs->commit_lsn = commit_lsn;
	cs->first_offset = offset;
	snprintf(detail, detail_len, "chunk set does not start with chunk 0");
	return false;
}

void chunk_set_begin(struct chunk_set *cs, uint32_t xid, uint64_t commit_lsn, uint64_t end_lsn, uint64_t offset,
		     uint64_t last_commit_lsn)
{
	cs->active = true;
	cs->xid = xid;
	cs->commit_lsn = commit_lsn;
	cs->end_lsn = end_lsn;
	cs->first_offset = offset;
	cs->duplicate = apply_core_is_duplicate(commit_lsn, last_commit_lsn);
}

bool chunk_set_check_index(const struct chunk_set *cs, uint32_t index, char *detail, size_t detail_len)
{
	if (index == cs->next_index)
		return true;
	snprintf(detail, detail_len, "chunk %u where chunk %u belongs", index, cs->next_index);
	return false;
}

void chunk_set_add(struct chunk_set *cs, uint32_t crc, uint32_t decoded, uint64_t applied)
{
	if (cs->next_index == cs->cap) {
		cs->cap = cs->cap ? cs->cap * 2 : 64;
		cs->crcs = xrealloc(cs->crcs, cs->cap * sizeof *cs->crcs);
		cs->counts = xrealloc(cs->counts, cs->cap * sizeof *cs->counts);
	}
	cs->crcs[cs->next_index] = crc;
	cs->counts[cs->next_index] = decoded;
	cs->changes += applied;
	cs->next_index++;
}

bool chunk_set_owns(struct chunk_set *cs, uint32_t xid, uint64_t commit_lsn, uint64_t offset)
{
	if (cs->active && cs->xid == xid && cs->commit_lsn == commit_lsn)
		return true;
	cs->xid = xid;
	cs->commit_lsn = commit_lsn;
	cs->first_offset = offset;
	return false;
}

bool chunk_set_check_manifest(struct chunk_set *cs, const struct env_manifest *m, uint32_t manifest_crc, char *detail,
			      size_t detail_len)
{
	if (m->chunk_count != cs->next_index) {
		snprintf(detail, detail_len, "manifest lists %u chunks, %u arrived", m->chunk_count, cs->next_index);
		return false;
	}
	for (uint32_t i = 0; i < m->chunk_count; i++) {
		if (m->chunks[i].crc != cs->crcs[i]) {
			snprintf(detail, detail_len, "chunk %u checksum 0x%08x differs from the manifest's 0x%08x", i,
				 cs->crcs[i], m->chunks[i].crc);
			return false;
		}
		if (!cs->duplicate && m->chunks[i].changes != cs->counts[i]) {
			snprintf(detail, detail_len, "chunk %u holds %u changes, the manifest says %u", i, cs->counts[i],
				 m->chunks[i].changes);
			return false;
		}
	}
	cs->manifest_ok = true;
	cs->manifest_crc = manifest_crc;
	return true;
}

bool chunk_set_begin_listed(struct chunk_set *cs, const struct env_manifest *m, uint32_t manifest_crc, uint64_t offset,
			    uint64_t last_commit_lsn, char *detail, size_t detail_len)
{
	cs->xid = m->xid;
	cs->commit_lsn = m->commit_lsn;
	cs->first_offset = offset;
	if (m->chunk_count == 0) {
		snprintf(detail, detail_len, "manifest lists no pending chunk");
		return false;
	}
	uint64_t sum = 0;
	for (uint32_t i = 0; i < m->chunk_count; i++) {
		const struct env_manifest_chunk *c = &m->chunks[i];
		if (c->offset >= offset || (i > 0 && c->offset <= m->chunks[i - 1].offset)) {
			snprintf(detail, detail_len, "manifest lists pending chunk %u at offset %llu, not before it and after the one before",
				 i, (unsigned long long)c->offset);
			return false;
		}
		if (c->changes == 0) {
			snprintf(detail, detail_len, "manifest lists pending chunk %u with no change in use", i);
			return false;
		}
		sum += c->changes;
	}
	if (sum != m->total_changes) {
		snprintf(detail, detail_len, "manifest's chunks hold %llu changes in use, its total says %llu",
			 (unsigned long long)sum, (unsigned long long)m->total_changes);
		return false;
	}
	chunk_set_begin(cs, m->xid, m->commit_lsn, m->end_lsn, offset, last_commit_lsn);
	if (m->chunk_count > cs->listed_cap) {
		cs->listed_cap = m->chunk_count;
		cs->listed = xrealloc(cs->listed, cs->listed_cap * sizeof *cs->listed);
	}
	memcpy(cs->listed, m->chunks, m->chunk_count * sizeof *cs->listed);
	cs->n_listed = m->chunk_count;
	cs->by_offset = true;
	cs->manifest_ok = true;
	cs->manifest_crc = manifest_crc;
	return true;
}

bool chunk_set_check_pending(const struct chunk_set *cs, uint32_t k, uint64_t offset, int type,
			     const struct env_frame_summary *s, uint32_t crc, char *detail, size_t detail_len)
{
	if (k >= cs->n_listed || offset != cs->listed[k].offset) {
		snprintf(detail, detail_len, "stream offset %llu is not the manifest's pending chunk %u",
			 (unsigned long long)offset, k);
		return false;
	}
	if (type != FRAME_PENDING_CHUNK || !s->has_xid || s->xid != cs->xid || s->commit_lsn != 0) {
		snprintf(detail, detail_len, "stream offset %llu, the manifest's pending chunk %u, holds another frame",
			 (unsigned long long)offset, k);
		return false;
	}
	if (crc != cs->listed[k].crc) {
		snprintf(detail, detail_len, "pending chunk %u (stream offset %llu) checksum 0x%08x differs from the manifest's 0x%08x",
			 k, (unsigned long long)offset, crc, cs->listed[k].crc);
		return false;
	}
	return true;
}

bool chunk_set_check_pending_count(const struct chunk_set *cs, uint32_t k, uint64_t taken, char *detail,
				   size_t detail_len)
{
	if (taken == cs->listed[k].changes)
		return true;
	snprintf(detail, detail_len, "pending chunk %u holds %llu changes, the manifest uses %u", k,
		 (unsigned long long)taken, cs->listed[k].changes);
	return false;
}

bool chunk_set_check_marker(const struct chunk_set *cs, uint32_t manifest_crc, uint32_t chunk_count, char *detail,
			    size_t detail_len)
{
	if (!cs->manifest_ok) {
		snprintf(detail, detail_len, "commit marker before the manifest");
		return false;
	}
	if (manifest_crc != cs->manifest_crc || chunk_count != (cs->by_offset ? cs->n_listed : cs->next_index)) {
		snprintf(detail, detail_len, "commit marker does not match the manifest");
		return false;
	}
	return true;
}

void apply_chunks_floor_note(struct pending_floor *pf, uint32_t xid, uint64_t run, uint64_t offset)
{
	size_t keep = 0;
	bool seen = false;
	for (size_t i = 0; i < pf->n; i++) {
		if (pf->entries[i].run != run)
			continue; /* an earlier capture run's: never listed again */
		seen = seen || pf->entries[i].xid == xid;
		pf->entries[keep++] = pf->entries[i];
	}
	pf->n = keep;
	if (seen)
		return;
	if (pf->n == pf->cap) {
		pf->cap = pf->cap ? 2 * pf->cap : 16;
		pf->entries = xrealloc(pf->entries, pf->cap * sizeof *pf->entries);
	}
	pf->entries[pf->n++] = (struct pending_floor_entry){ xid, run, offset };
}

void apply_chunks_floor_forget(struct pending_floor *pf, uint32_t xid)
{
	for (size_t i = 0; i < pf->n; i++)
		if (pf->entries[i].xid == xid) {
			pf->entries[i] = pf->entries[--pf->n];
			return;
		}
}

void apply_chunks_floor_abort(struct pending_floor *pf, uint32_t xid, uint64_t run)
{
	for (size_t i = 0; i < pf->n; i++)
		if (pf->entries[i].xid == xid && pf->entries[i].run == run) {
			pf->entries[i] = pf->entries[--pf->n];
			return;
		}
}

uint64_t apply_chunks_floor_lowest(const struct pending_floor *pf, uint64_t position)
{
	for (size_t i = 0; i < pf->n; i++)
		if (pf->entries[i].offset < position)
			position = pf->entries[i].offset;
	return position;
}

void apply_chunks_floor_reset(struct pending_floor *pf)
{
	pf->n = 0;
}

void apply_chunks_floor_free(struct pending_floor *pf)
{
	free(pf->entries);
	memset(pf, 0, sizeof *pf);
}
