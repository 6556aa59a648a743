/*
 * test_apply_chunks.c - a chunked transaction's checks without a target:
 * starting at chunk 0, order, interruption by another transaction or by
 * a replay, what an abandoned set is (gap or discard), the manifest's
 * count, checksums and change counts, and the commit marker.
 *
 * Links with common/apply_chunks.o, apply_core.o and xalloc.o alone
 * (build/tests/apply_chunks_nolibpq).
 */
#include "trellara/apply_chunks.h"
#include "trellara/stream.h"
#include "unit.h"

#include <string.h>

#define XID 700
#define LSN 5000

static char detail[256];

/* a set of n chunks of transaction (XID, LSN), crc 0x100+i, 10+i changes each */
static void fill(struct chunk_set *cs, uint32_t n, uint64_t last_commit_lsn)
{
	chunk_set_reset(cs);
	CHECK(chunk_set_check_start(cs, XID, LSN, 40, 0, detail, sizeof detail));
	chunk_set_begin(cs, XID, LSN, LSN + 8, 40, last_commit_lsn);
	for (uint32_t i = 0; i < n; i++) {
		CHECK(chunk_set_check_index(cs, i, detail, sizeof detail));
		chunk_set_add(cs, 0x100 + i, 10 + i, cs->duplicate ? 0 : 10 + i);
	}
}

static void manifest_for(struct env_manifest *m, struct env_manifest_chunk *chunks, uint32_t n)
{
	memset(m, 0, sizeof *m);
	m->xid = XID;
	m->commit_lsn = LSN;
	m->chunk_count = n;
	m->chunks = chunks;
	for (uint32_t i = 0; i < n; i++)
		chunks[i] = (struct env_manifest_chunk){ .crc = 0x100 + i, .changes = 10 + i };
}

static void test_start_and_order(void)
{
	struct chunk_set cs = { 0 };
	bool replay = true;
	/* nothing active: nothing to interrupt, nothing is a gap */
	CHECK(!chunk_set_interrupted(&cs, XID, LSN, 0, &replay) && !replay);
	CHECK(!chunk_set_abandon_is_gap(&cs, UINT64_MAX, 0));
	/* a set that starts anywhere else than chunk 0 fails, naming its transaction */
	CHECK(!chunk_set_check_start(&cs, XID, LSN, 41, 1, detail, sizeof detail));
	CHECK_STR(detail, "chunk set does not start with chunk 0");
	CHECK(cs.xid == XID && cs.commit_lsn == LSN && cs.first_offset == 41 && !cs.active);
	fill(&cs, 0, 0);
	CHECK(cs.active && !cs.duplicate && cs.end_lsn == LSN + 8 && cs.first_offset == 40);
	CHECK(chunk_set_check_index(&cs, 0, detail, sizeof detail));
	CHECK(!chunk_set_check_index(&cs, 1, detail, sizeof detail));
	CHECK_STR(detail, "chunk 1 where chunk 0 belongs");
	/* more than the first allocation (64) keeps every chunk */
	fill(&cs, 130, 0);
	CHECK(cs.next_index == 130 && cs.crcs[129] == 0x100 + 129 && cs.counts[64] == 74);
	CHECK(cs.changes == 130 * 10 + 129 * 130 / 2);
	CHECK(!chunk_set_check_index(&cs, 129, detail, sizeof detail)); /* the same chunk twice */
	CHECK_STR(detail, "chunk 129 where chunk 130 belongs");
	CHECK(!chunk_set_check_index(&cs, 131, detail, sizeof detail)); /* one missing */
	CHECK(chunk_set_check_index(&cs, 130, detail, sizeof detail));
	chunk_set_reset(&cs);
	CHECK(!cs.active && cs.next_index == 0 && cs.changes == 0 && cs.cap >= 130 && cs.crcs);
	chunk_set_free(&cs);
	CHECK(!cs.crcs && cs.cap == 0);
}

static void test_duplicate(void)
{
	struct chunk_set cs = { 0 };
	fill(&cs, 1, LSN); /* applied through its commit */
	CHECK(cs.duplicate);
	fill(&cs, 1, LSN + 1);
	CHECK(cs.duplicate);
	fill(&cs, 1, LSN - 1);
	CHECK(!cs.duplicate);
	chunk_set_free(&cs);
}

static void test_interruption(void)
{
	struct chunk_set cs = { 0 };
	bool replay;
	fill(&cs, 2, 0);
	/* the next chunk of the same set: not interrupted */
	CHECK(!chunk_set_interrupted(&cs, XID, LSN, 2, &replay) && !replay);
	/* chunk 0 of the same transaction again: a replay */
	CHECK(chunk_set_interrupted(&cs, XID, LSN, 0, &replay) && replay);
	/* another transaction's chunk, at any index; the same xid at another commit is another transaction */
	CHECK(chunk_set_interrupted(&cs, XID + 1, LSN + 100, 0, &replay) && !replay);
	CHECK(chunk_set_interrupted(&cs, XID + 1, LSN + 100, 2, &replay) && !replay);
	CHECK(chunk_set_interrupted(&cs, XID, LSN + 1, 2, &replay) && !replay);
	/* abandoned before something past its commit: a gap; before an
	 * earlier position (its replay, a resend): discarded */
	/* A position at the set's commit LSN has not passed its commit record:
	 * a watermark there (an empty transaction ending where this commit
	 * record starts), or the same transaction again as a txn frame, is
	 * no gap (found by the simulator: the old rule quarantined it). */
	CHECK(!chunk_set_abandon_is_gap(&cs, LSN, 0));
	CHECK(chunk_set_abandon_is_gap(&cs, LSN + 1, 0));
	CHECK(!chunk_set_abandon_is_gap(&cs, LSN - 1, 0));
	CHECK(!chunk_set_abandon_is_gap(&cs, 0, 0));
	/* nor one every table's copy holds: a copy of the whole flow after
	 * the slot was lost, whose new slot never sends it again */
	CHECK(!chunk_set_abandon_is_gap(&cs, LSN + 1, LSN + 1));
	CHECK(chunk_set_abandon_is_gap(&cs, LSN + 1, LSN));
	/* a duplicate set is never a gap: it was applied already */
	fill(&cs, 2, LSN);
	CHECK(!chunk_set_abandon_is_gap(&cs, LSN + 1, 0));
	chunk_set_free(&cs);
}

static void test_manifest_and_marker(void)
{
	struct chunk_set cs = { 0 };
	struct env_manifest m;
	struct env_manifest_chunk chunks[3];
	fill(&cs, 3, 0);
	/* a manifest or marker of another transaction, or with no set, is not the set's */
	CHECK(chunk_set_owns(&cs, XID, LSN, 50));
	CHECK(!chunk_set_owns(&cs, XID, LSN + 1, 51));
	CHECK(cs.commit_lsn == LSN + 1 && cs.first_offset == 51); /* recorded for the quarantine entry */
	fill(&cs, 3, 0);
	CHECK(!chunk_set_owns(&cs, XID + 1, LSN, 51));
	struct chunk_set idle = { 0 };
	CHECK(!chunk_set_owns(&idle, XID, LSN, 52));
	/* the marker before the manifest */
	fill(&cs, 3, 0);
	CHECK(!chunk_set_check_marker(&cs, 0, 3, detail, sizeof detail));
	CHECK_STR(detail, "commit marker before the manifest");
	/* count */
	manifest_for(&m, chunks, 2);
	CHECK(!chunk_set_check_manifest(&cs, &m, 0xabc, detail, sizeof detail));
	CHECK_STR(detail, "manifest lists 2 chunks, 3 arrived");
	CHECK(!cs.manifest_ok);
	/* checksum */
	manifest_for(&m, chunks, 3);
	chunks[1].crc ^= 1;
	CHECK(!chunk_set_check_manifest(&cs, &m, 0xabc, detail, sizeof detail));
	CHECK_STR(detail, "chunk 1 checksum 0x00000101 differs from the manifest's 0x00000100");
	/* change counts */
	manifest_for(&m, chunks, 3);
	chunks[2].changes++;
	CHECK(!chunk_set_check_manifest(&cs, &m, 0xabc, detail, sizeof detail));
	CHECK_STR(detail, "chunk 2 holds 12 changes, the manifest says 13");
	CHECK(!cs.manifest_ok);
	/* ... which a duplicate set does not check (its changes were not applied) */
	fill(&cs, 3, LSN);
	CHECK(chunk_set_check_manifest(&cs, &m, 0xabc, detail, sizeof detail));
	/* but its checksums it does */
	chunks[0].crc++;
	fill(&cs, 3, LSN);
	CHECK(!chunk_set_check_manifest(&cs, &m, 0xabc, detail, sizeof detail));
	/* a matching manifest, then the marker */
	fill(&cs, 3, 0);
	manifest_for(&m, chunks, 3);
	CHECK(chunk_set_check_manifest(&cs, &m, 0xabc, detail, sizeof detail));
	CHECK(cs.manifest_ok && cs.manifest_crc == 0xabc);
	CHECK(!chunk_set_check_marker(&cs, 0xabd, 3, detail, sizeof detail));
	CHECK_STR(detail, "commit marker does not match the manifest");
	CHECK(!chunk_set_check_marker(&cs, 0xabc, 2, detail, sizeof detail));
	CHECK(!chunk_set_check_marker(&cs, 0xabc, 4, detail, sizeof detail));
	CHECK(chunk_set_check_marker(&cs, 0xabc, 3, detail, sizeof detail));
	chunk_set_free(&cs);
}

/* Written once: a version 2 manifest at offset 90 lists pending chunks
 * earlier in the stream; each is read back by offset and checked. */
static void listed_for(struct env_manifest *m, struct env_manifest_chunk *chunks, uint32_t n)
{
	manifest_for(m, chunks, n);
	m->by_offset = true;
	m->total_changes = 0;
	for (uint32_t i = 0; i < n; i++) {
		chunks[i].offset = 10 + 7 * i;
		m->total_changes += chunks[i].changes;
	}
}

static void test_listed(void)
{
	struct chunk_set cs = { 0 };
	struct env_manifest m;
	struct env_manifest_chunk chunks[80];
	listed_for(&m, chunks, 80); /* more than the first allocation */
	CHECK(chunk_set_begin_listed(&cs, &m, 0xABCD, 900, 0, detail, sizeof detail));
	CHECK(cs.active && cs.by_offset && !cs.duplicate && cs.first_offset == 900 && cs.n_listed == 80);
	CHECK(cs.listed[79].offset == 10 + 7 * 79 && cs.listed[79].changes == 89);
	/* the marker: the manifest's checksum and its chunk count */
	CHECK(chunk_set_check_marker(&cs, 0xABCD, 80, detail, sizeof detail));
	CHECK(!chunk_set_check_marker(&cs, 0xABCD, 0, detail, sizeof detail));
	CHECK_STR(detail, "commit marker does not match the manifest");
	CHECK(!chunk_set_check_marker(&cs, 0xABCE, 80, detail, sizeof detail));
	/* read back: the listed frame, a pending chunk of the transaction with no commit, its checksum */
	struct env_frame_summary s = { .has_xid = true, .xid = XID };
	CHECK(chunk_set_check_pending(&cs, 1, 17, FRAME_PENDING_CHUNK, &s, 0x101, detail, sizeof detail));
	CHECK(!chunk_set_check_pending(&cs, 1, 18, FRAME_PENDING_CHUNK, &s, 0x101, detail, sizeof detail));
	CHECK_STR(detail, "stream offset 18 is not the manifest's pending chunk 1");
	CHECK(!chunk_set_check_pending(&cs, 1, 17, FRAME_CHUNK, &s, 0x101, detail, sizeof detail));
	CHECK_STR(detail, "stream offset 17, the manifest's pending chunk 1, holds another frame");
	s.xid = XID + 1;
	CHECK(!chunk_set_check_pending(&cs, 1, 17, FRAME_PENDING_CHUNK, &s, 0x101, detail, sizeof detail));
	s.xid = XID;
	s.commit_lsn = LSN;
	CHECK(!chunk_set_check_pending(&cs, 1, 17, FRAME_PENDING_CHUNK, &s, 0x101, detail, sizeof detail));
	s.commit_lsn = 0;
	CHECK(!chunk_set_check_pending(&cs, 1, 17, FRAME_PENDING_CHUNK, &s, 0x1FF, detail, sizeof detail));
	CHECK_STR(detail, "pending chunk 1 (stream offset 17) checksum 0x000001ff differs from the manifest's 0x00000101");
	CHECK(!chunk_set_check_pending(&cs, 80, 10 + 7 * 80, FRAME_PENDING_CHUNK, &s, 0x100 + 80, detail, sizeof detail));
	/* the changes in use: exactly as many as it gave (it held fewer otherwise) */
	CHECK(chunk_set_check_pending_count(&cs, 1, 11, detail, sizeof detail));
	CHECK(!chunk_set_check_pending_count(&cs, 1, 10, detail, sizeof detail));
	CHECK_STR(detail, "pending chunk 1 holds 10 changes, the manifest uses 11");
	/* reset keeps the list's buffer; a duplicate is one */
	chunk_set_reset(&cs);
	CHECK(!cs.active && !cs.by_offset && cs.listed != NULL && cs.listed_cap >= 80);
	CHECK(chunk_set_begin_listed(&cs, &m, 0xABCD, 900, LSN, detail, sizeof detail));
	CHECK(cs.duplicate);
	/* a list capture never writes: fail closed, naming the transaction */
	chunk_set_reset(&cs);
	listed_for(&m, chunks, 3);
	chunks[2].offset = 900;
	CHECK(!chunk_set_begin_listed(&cs, &m, 1, 900, 0, detail, sizeof detail));
	CHECK_STR(detail, "manifest lists pending chunk 2 at offset 900, not before it and after the one before");
	CHECK(!cs.active && cs.xid == XID && cs.commit_lsn == LSN && cs.first_offset == 900);
	listed_for(&m, chunks, 3);
	chunks[2].offset = chunks[1].offset;
	CHECK(!chunk_set_begin_listed(&cs, &m, 1, 900, 0, detail, sizeof detail));
	listed_for(&m, chunks, 3);
	chunks[1].changes = 0;
	m.total_changes -= 11;
	CHECK(!chunk_set_begin_listed(&cs, &m, 1, 900, 0, detail, sizeof detail));
	CHECK_STR(detail, "manifest lists pending chunk 1 with no change in use");
	listed_for(&m, chunks, 3);
	m.total_changes++;
	CHECK(!chunk_set_begin_listed(&cs, &m, 1, 900, 0, detail, sizeof detail));
	CHECK_STR(detail, "manifest's chunks hold 33 changes in use, its total says 34");
	listed_for(&m, chunks, 0);
	CHECK(!chunk_set_begin_listed(&cs, &m, 1, 900, 0, detail, sizeof detail));
	CHECK_STR(detail, "manifest lists no pending chunk");
	CHECK(!cs.active);
	chunk_set_free(&cs);
}

/* What retention must keep of the pending chunks passed. */
static void test_pending_floor(void)
{
	struct pending_floor pf = { 0 };
	CHECK(apply_chunks_floor_lowest(&pf, 500) == 500);
	apply_chunks_floor_note(&pf, 1, 77, 100);
	apply_chunks_floor_note(&pf, 2, 77, 120);
	apply_chunks_floor_note(&pf, 1, 77, 130); /* its first chunk counts */
	CHECK(pf.n == 2 && apply_chunks_floor_lowest(&pf, 500) == 100);
	CHECK(apply_chunks_floor_lowest(&pf, 90) == 90); /* the position when lower */
	/* its set applied: the next one holds the floor */
	apply_chunks_floor_forget(&pf, 1);
	CHECK(apply_chunks_floor_lowest(&pf, 500) == 120);
	/* an abort of another run's transaction of the same xid changes nothing */
	apply_chunks_floor_abort(&pf, 2, 78);
	CHECK(apply_chunks_floor_lowest(&pf, 500) == 120);
	apply_chunks_floor_abort(&pf, 2, 77);
	CHECK(pf.n == 0 && apply_chunks_floor_lowest(&pf, 500) == 500);
	/* many, then a new capture run: the earlier run's are never listed again */
	for (uint32_t x = 0; x < 40; x++)
		apply_chunks_floor_note(&pf, x, 77, 1000 + x);
	CHECK(pf.n == 40 && apply_chunks_floor_lowest(&pf, UINT64_MAX) == 1000);
	apply_chunks_floor_note(&pf, 5, 78, 2000);
	CHECK(pf.n == 1 && apply_chunks_floor_lowest(&pf, UINT64_MAX) == 2000);
	apply_chunks_floor_reset(&pf);
	CHECK(pf.n == 0);
	apply_chunks_floor_free(&pf);
}

int main(void)
{
	test_start_and_order();
	test_duplicate();
	test_interruption();
	test_manifest_and_marker();
	test_listed();
	test_pending_floor();
	return unit_done("apply_chunks");
}
