/*
 * apply_chunks.c - a chunked transaction's checks (apply_chunks.h).
 */
#include "trellara/apply_chunks.h"

#include "trellara/apply_core.h"
#include "trellara/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void chunk_set_reset(struct chunk_set *cs)
{
	uint32_t *crcs = cs->crcs, *counts = cs->counts;
	size_t cap = cs->cap;
	memset(cs, 0, sizeof *cs);
	cs->crcs = crcs;
	cs->counts = counts;
	cs->cap = cap;
}

void chunk_set_free(struct chunk_set *cs)
{
	free(cs->crcs);
	free(cs->counts);
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

bool chunk_set_check_marker(const struct chunk_set *cs, uint32_t manifest_crc, uint32_t chunk_count, char *detail,
			    size_t detail_len)
{
	if (!cs->manifest_ok) {
		snprintf(detail, detail_len, "commit marker before the manifest");
		return false;
	}
	if (manifest_crc != cs->manifest_crc || chunk_count != cs->next_index) {
		snprintf(detail, detail_len, "commit marker does not match the manifest");
		return false;
	}
	return true;
}
