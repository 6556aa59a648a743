/*
 * Stream library unit tests: frame codec, corruption detection, index
 * rebuild, group commit and fsync failure, recovery, retention, groups.
 */
#include "../../common/stream/stream_internal.h"
#include "trellara/defaults.h"
#include "trellara/fsutil.h"
#include "trellara/stream.h"
#include "trellara/xalloc.h"
#include "unit.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Remove the mkdtemp directory holding a test stream. */
static void cleanup(char *dir)
{
	char *slash = strrchr(dir, '/');
	*slash = '\0';
	nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

static char *tmpdir(void)
{
	char tmpl[] = "/tmp/trellara-unit-XXXXXX";
	char *d = mkdtemp(tmpl);
	return d ? xasprintf("%s/stream", d) : NULL;
}

static void test_frame_roundtrip(void)
{
	const char payload[] = "a transaction envelope";
	uint8_t buf[FRAME_HEADER_SIZE + sizeof payload];
	memcpy(buf + FRAME_HEADER_SIZE, payload, sizeof payload);
	frame_encode_header(buf, FRAME_DDL, 7, 123456789012ULL, 1700000000123456LL, buf + FRAME_HEADER_SIZE,
			    sizeof payload);
	struct frame_header h;
	const char *reason = NULL;
	CHECK(frame_decode_header(buf, &h, &reason));
	CHECK(h.version == FRAME_VERSION);
	CHECK(h.type == FRAME_DDL);
	CHECK(h.flags == 7);
	CHECK(h.offset == 123456789012ULL);
	CHECK(h.append_time_us == 1700000000123456LL);
	CHECK(h.payload_length == sizeof payload);
	CHECK(frame_check_crc(buf, buf + FRAME_HEADER_SIZE, h.payload_length));
	for (int t = 1; t <= FRAME_TYPE_MAX; t++)
		CHECK(frame_type_from_name(frame_type_name(t)) == t);
	CHECK(frame_type_name(0) == NULL && frame_type_name(FRAME_TYPE_MAX + 1) == NULL);

	/* Every single-byte change anywhere in the frame is detected: by
	 * the header checks or by the CRC. */
	int undetected = 0;
	for (size_t i = 0; i < sizeof buf; i++) {
		for (int bit = 0; bit < 8; bit++) {
			uint8_t copy[sizeof buf];
			memcpy(copy, buf, sizeof buf);
			copy[i] ^= (uint8_t)(1u << bit);
			struct frame_header h2;
			const char *r2;
			bool ok = frame_decode_header(copy, &h2, &r2);
			if (ok && h2.payload_length == sizeof payload &&
			    frame_check_crc(copy, copy + FRAME_HEADER_SIZE, h2.payload_length))
				undetected++;
		}
	}
	CHECK(undetected == 0);

	/* Header fields each have their own check. */
	uint8_t bad[sizeof buf];
	memcpy(bad, buf, sizeof buf);
	bad[0] = 'X';
	CHECK(!frame_decode_header(bad, &h, &reason) && strstr(reason, "magic"));
	memcpy(bad, buf, sizeof buf);
	bad[4] = 9;
	CHECK(!frame_decode_header(bad, &h, &reason) && strstr(reason, "version"));
	memcpy(bad, buf, sizeof buf);
	bad[5] = 0;
	CHECK(!frame_decode_header(bad, &h, &reason) && strstr(reason, "type"));
	memcpy(bad, buf, sizeof buf);
	put_u32(bad + 24, MAX_FRAME_PAYLOAD + 1);
	CHECK(!frame_decode_header(bad, &h, &reason) && strstr(reason, "length"));

	/* Index entry codec. */
	uint8_t e[INDEX_ENTRY_SIZE];
	index_encode_entry(e, 4096, 77);
	uint64_t pos;
	uint32_t size;
	CHECK(index_decode_entry(e, &pos, &size) && pos == 4096 && size == 77);
	e[3] ^= 1;
	CHECK(!index_decode_entry(e, &pos, &size));
	uint8_t zero[INDEX_ENTRY_SIZE] = { 0 };
	CHECK(!index_decode_entry(zero, &pos, &size));
}

static struct stream_writer *open_writer(const char *dir, uint64_t segment_bytes, struct stream_recovery *rec)
{
	struct stream_writer_options o = { .segment_bytes = segment_bytes, .min_free_bytes = 0 };
	struct stream_writer *w = NULL;
	int rc = stream_writer_open(dir, &o, &w, rec);
	CHECK(rc == STREAM_OK);
	return rc == STREAM_OK ? w : NULL;
}

static void append_n(struct stream_writer *w, int first, int n, size_t size)
{
	char *buf = xmalloc(size);
	for (int i = first; i < first + n; i++) {
		memset(buf, 'a' + i % 26, size);
		snprintf(buf, size, "frame %d", i);
		uint64_t off;
		CHECK(stream_writer_append(w, FRAME_TXN, 0, buf, size, &off) == STREAM_OK);
		CHECK(off == (uint64_t)i);
	}
	free(buf);
}

static uint64_t count_frames(const char *dir, bool *payloads_ok)
{
	struct stream_reader *r;
	uint64_t n = 0;
	*payloads_ok = true;
	if (stream_reader_open(dir, &r) != STREAM_OK)
		return UINT64_MAX;
	struct stream_frame f;
	int rc;
	while ((rc = stream_reader_next(r, &f)) == STREAM_OK) {
		char want[32];
		int len = snprintf(want, sizeof want, "frame %llu", (unsigned long long)n);
		if (f.header.offset != n || memcmp(f.payload, want, (size_t)len + 1) != 0)
			*payloads_ok = false;
		n++;
	}
	CHECK(rc == STREAM_END);
	stream_reader_close(r);
	return n;
}

static void read_file_bytes(const char *path, uint8_t **data, size_t *len)
{
	char *d = NULL;
	*len = 0;
	CHECK(fs_read_file(path, &d, len) == 0);
	*data = (uint8_t *)d;
}

static void test_group_commit_and_index_rebuild(void)
{
	char *dir = tmpdir();
	struct stream_recovery rec;
	struct stream_writer *w = open_writer(dir, 64 * 1024, &rec);
	CHECK(rec.next_offset == 0);
	append_n(w, 0, 150, 1000);
	CHECK(stream_writer_pending(w) == 150);
	/* Nothing is published before the sync: readers see nothing. */
	bool ok;
	CHECK(count_frames(dir, &ok) == 0);
	CHECK(stream_writer_sync(w) == STREAM_OK);
	CHECK(stream_writer_pending(w) == 0);
	CHECK(stream_writer_next_offset(w) == 150);
	/* Published now, across segment rolls, while the writer is open. */
	CHECK(count_frames(dir, &ok) == 150 && ok);
	stream_writer_close(w);

	/* The index written by the writer equals the one rebuilt from frames. */
	uint64_t *bases;
	size_t n_bases;
	CHECK(segment_list(dir, &bases, &n_bases) == 0 && n_bases == 3);
	uint64_t seg_frames = bases[2] - bases[1];
	CHECK(seg_frames == 65536 / (FRAME_HEADER_SIZE + 1000));
	char *idx = segment_path(dir, bases[1], ".idx");
	free(bases);
	uint8_t *before, *after;
	size_t before_len, after_len;
	read_file_bytes(idx, &before, &before_len);
	CHECK(unlink(idx) == 0);
	w = open_writer(dir, 64 * 1024, &rec);
	CHECK(rec.index_was_missing);
	CHECK(rec.index_rebuilt_entries == seg_frames);
	CHECK(rec.next_offset == 150);
	stream_writer_close(w);
	read_file_bytes(idx, &after, &after_len);
	CHECK(before_len == after_len && memcmp(before, after, before_len) == 0);
	free(before);
	free(after);

	/* A scribbled index entry is found and rebuilt the same. */
	int fd = open(idx, O_WRONLY);
	CHECK(fd >= 0);
	CHECK(pwrite(fd, "scribble", 8, INDEX_HEADER_SIZE + 5 * INDEX_ENTRY_SIZE + 2) == 8);
	close(fd);
	struct stream_report report;
	CHECK(stream_inspect(dir, NULL, 0, &report) == 0);
	CHECK(report.n_segments == 3 && report.segments[1].index_state == INDEX_CORRUPT);
	CHECK(report.segments[1].index_entries == 5);
	stream_report_free(&report);
	w = open_writer(dir, 64 * 1024, &rec);
	CHECK(rec.index_was_corrupt && rec.index_rebuilt_entries == seg_frames - 5);
	stream_writer_close(w);
	read_file_bytes(idx, &after, &after_len);
	read_file_bytes(idx, &before, &before_len);
	CHECK(stream_inspect(dir, NULL, 0, &report) == 0);
	CHECK(report.segments[1].index_state == INDEX_OK && !report.corrupt && report.next_offset == 150);
	stream_report_free(&report);
	free(before);
	free(after);
	free(idx);
	cleanup(dir);
}

static void test_fsync_failure(void)
{
	char *dir = tmpdir();
	struct stream_recovery rec;
	struct stream_writer *w = open_writer(dir, 1 << 20, &rec);
	append_n(w, 0, 10, 100);
	CHECK(stream_writer_sync(w) == STREAM_OK);
	append_n(w, 10, 5, 100);
	/* The next fdatasync of this process fails: nothing of the batch is
	 * acknowledged, the writer is poisoned and never retries. */
	char nth[32];
	snprintf(nth, sizeof nth, "%lu", fs_fdatasync_calls() + 1);
	setenv("TRELLARA_TEST_FSYNC_FAIL", nth, 1);
	CHECK(stream_writer_sync(w) == STREAM_EIO);
	unsetenv("TRELLARA_TEST_FSYNC_FAIL");
	CHECK(stream_writer_next_offset(w) == 10);
	CHECK(stream_writer_sync(w) == STREAM_EIO);
	uint64_t off;
	CHECK(stream_writer_append(w, FRAME_TXN, 0, "x", 1, &off) == STREAM_EIO);
	stream_writer_close(w);
	/* The failed batch was cut from the segment: its durability is
	 * unknown, so no reader or later writer may adopt it; the
	 * acknowledged ten are all there. */
	bool ok;
	uint64_t n = count_frames(dir, &ok);
	CHECK(n == 10 && ok);
	struct stream_recovery rec2;
	w = open_writer(dir, 1 << 20, &rec2);
	CHECK(rec2.next_offset == 10 && rec2.truncated_bytes == 0);
	stream_writer_close(w);
	cleanup(dir);
}

static void test_torn_tail_and_corruption(void)
{
	char *dir = tmpdir();
	struct stream_recovery rec;
	struct stream_writer *w = open_writer(dir, 1 << 20, &rec);
	append_n(w, 0, 20, 200);
	CHECK(stream_writer_sync(w) == STREAM_OK);
	stream_writer_close(w);
	char *log = segment_path(dir, 0, ".log");
	/* A torn half frame after the last one. */
	uint8_t half[100];
	memset(half, 0, sizeof half);
	put_u32(half, FRAME_MAGIC);
	half[4] = 1;
	half[5] = FRAME_TXN;
	put_u64(half + 8, 20);
	put_u32(half + 24, 200);
	memset(half + 32, 'z', sizeof half - 32);
	int fd = open(log, O_WRONLY);
	CHECK(pwrite(fd, half, sizeof half, 20 * (FRAME_HEADER_SIZE + 200)) == (ssize_t)sizeof half);
	close(fd);
	struct stream_report report;
	CHECK(stream_inspect(dir, NULL, 0, &report) == 0);
	CHECK(report.torn_bytes == sizeof half && !report.corrupt && report.next_offset == 20);
	stream_report_free(&report);
	bool ok;
	CHECK(count_frames(dir, &ok) == 20 && ok);
	w = open_writer(dir, 1 << 20, &rec);
	CHECK(rec.truncated_bytes == sizeof half && rec.next_offset == 20);
	append_n(w, 20, 1, 200);
	CHECK(stream_writer_sync(w) == STREAM_OK);
	stream_writer_close(w);
	CHECK(count_frames(dir, &ok) == 21 && ok);

	/* Damage in the middle, valid frames after: corruption, for the
	 * reader, inspect and the next writer alike. */
	fd = open(log, O_WRONLY);
	CHECK(pwrite(fd, "XX", 2, 5 * (FRAME_HEADER_SIZE + 200) + 40) == 2);
	close(fd);
	struct stream_reader *r;
	CHECK(stream_reader_open(dir, &r) == STREAM_OK);
	struct stream_frame f;
	int rc, seen = 0;
	while ((rc = stream_reader_next(r, &f)) == STREAM_OK)
		seen++;
	CHECK(rc == STREAM_ECORRUPT && seen == 5);
	stream_reader_close(r);
	CHECK(stream_inspect(dir, NULL, 0, &report) == 0);
	CHECK(report.corrupt && report.segments[0].corrupt_position == 5 * (FRAME_HEADER_SIZE + 200));
	stream_report_free(&report);
	struct stream_writer_options o = { .segment_bytes = 1 << 20 };
	CHECK(stream_writer_open(dir, &o, &w, &rec) == STREAM_ECORRUPT);
	free(log);
	cleanup(dir);
}

static void test_groups_and_retention(void)
{
	char *dir = tmpdir();
	struct stream_recovery rec;
	struct stream_writer *w = open_writer(dir, 64 * 1024, &rec);
	append_n(w, 0, 200, 1000);
	CHECK(stream_writer_sync(w) == STREAM_OK);
	uint64_t pos;
	bool exists;
	CHECK(stream_group_get(dir, "applyd", &pos, &exists) == STREAM_OK && !exists && pos == 0);
	CHECK(stream_group_set(dir, "bad/name", 1) == STREAM_EINVAL);
	const char *prot[] = { "applyd" };
	struct retention_plan plan;
	/* no protected group: nothing goes, unless no consumer exists */
	CHECK(stream_retention_plan(dir, NULL, 0, false, &plan) == 0 && plan.n_segments == 0);
	CHECK(strstr(plan.limited_by, "no consumer group") != NULL);
	stream_retention_plan_free(&plan);
	CHECK(stream_retention_plan(dir, NULL, 0, true, &plan) == 0 && plan.n_segments == 3);
	stream_retention_plan_free(&plan);
	/* the stream has an id, and keeps it across writers */
	struct stream_meta meta;
	CHECK(stream_meta_read(dir, &meta) == 0 && meta.stream_id && strlen(meta.stream_id) == 32);
	char *id = meta.stream_id ? strdup(meta.stream_id) : NULL;
	stream_meta_free(&meta);
	CHECK(stream_retention_plan(dir, prot, 1, false, &plan) == 0 && plan.n_segments == 0);
	stream_retention_plan_free(&plan);
	/* 63 frames of 1032 bytes per 64 KiB segment: bases 0, 63, 126, 189 */
	CHECK(stream_group_set(dir, "applyd", 130) == STREAM_OK);
	CHECK(stream_group_get(dir, "applyd", &pos, &exists) == STREAM_OK && exists && pos == 130);
	CHECK(stream_retention_plan(dir, prot, 1, false, &plan) == 0 && plan.n_segments == 2);
	CHECK(plan.keep_from == 130);
	CHECK(stream_retention_apply(dir, &plan) == 0);
	stream_retention_plan_free(&plan);
	/* The active segment is never deleted, even when every group is past it. */
	CHECK(stream_group_set(dir, "applyd", 200) == STREAM_OK);
	CHECK(stream_retention_plan(dir, prot, 1, false, &plan) == 0);
	CHECK(plan.n_segments == 1 && strcmp(plan.segments[0], "00000000000000000126") == 0);
	stream_retention_plan_free(&plan);
	struct stream_reader *r;
	CHECK(stream_reader_open(dir, &r) == STREAM_OK);
	CHECK(stream_reader_seek(r, 10) == STREAM_ERANGE);
	CHECK(stream_reader_seek(r, 130) == STREAM_OK);
	struct stream_frame f;
	CHECK(stream_reader_next(r, &f) == STREAM_OK && f.header.offset == 130);
	CHECK(stream_reader_seek(r, 201) == STREAM_ERANGE);
	stream_reader_close(r);
	stream_writer_close(w);
	w = open_writer(dir, 64 * 1024, &rec);
	stream_writer_close(w);
	CHECK(stream_meta_read(dir, &meta) == 0 && meta.stream_id && id && strcmp(meta.stream_id, id) == 0);
	stream_meta_free(&meta);
	free(id);
	cleanup(dir);
}

/* Retention keeps the newest segment holding a frame that records a
 * source position (txn, commit_marker, watermark) and every one after,
 * however far the groups are: the newest segments may hold only pending
 * chunks of an open transaction, and capture's restart reads back to it. */
static void test_retention_keeps_restart_point(void)
{
	char *dir = tmpdir();
	struct stream_recovery rec;
	struct stream_writer *w = open_writer(dir, 64 * 1024, &rec);
	append_n(w, 0, 70, 1000); /* txn frames 0..69 */
	char *buf = xcalloc(1, 1000);
	for (int i = 70; i < 210; i++) {
		uint64_t off;
		CHECK(stream_writer_append(w, FRAME_PENDING_CHUNK, 0, buf, 1000, &off) == STREAM_OK && off == (uint64_t)i);
	}
	free(buf);
	CHECK(stream_writer_sync(w) == STREAM_OK);
	/* 63 frames a segment: bases 0, 63 (txn frames 63..69), 126, 189 (pending chunks only) */
	const char *prot[] = { "applyd" };
	CHECK(stream_group_set(dir, "applyd", 210) == STREAM_OK);
	struct retention_plan plan;
	CHECK(stream_retention_plan(dir, prot, 1, false, &plan) == 0);
	CHECK(plan.n_segments == 1 && strcmp(plan.segments[0], "00000000000000000000") == 0);
	stream_retention_plan_free(&plan);
	/* a watermark in the active segment: everything before it may go */
	static const uint8_t wm[16] = { 1 }; /* (retention reads the type alone) */
	uint64_t off;
	CHECK(stream_writer_append(w, FRAME_WATERMARK, 0, wm, sizeof wm, &off) == STREAM_OK && off == 210);
	CHECK(stream_writer_sync(w) == STREAM_OK);
	CHECK(stream_group_set(dir, "applyd", 211) == STREAM_OK);
	CHECK(stream_retention_plan(dir, prot, 1, false, &plan) == 0 && plan.n_segments == 3);
	stream_retention_plan_free(&plan);
	stream_writer_close(w);
	cleanup(dir);
}

static void test_single_writer(void)
{
	char *dir = tmpdir();
	struct stream_recovery rec;
	struct stream_writer *w = open_writer(dir, 1 << 20, &rec);
	struct stream_writer_options o = { .segment_bytes = 1 << 20 };
	struct stream_writer *w2 = NULL;
	CHECK(stream_writer_open(dir, &o, &w2, &rec) == STREAM_ELOCKED);
	stream_writer_close(w);
	CHECK(stream_writer_open(dir, &o, &w2, &rec) == STREAM_OK);
	stream_writer_close(w2);
	/* free space floor */
	struct stream_writer_options tight = { .segment_bytes = 1 << 20, .min_free_bytes = UINT64_MAX / 2 };
	char *dir2 = tmpdir();
	CHECK(stream_writer_open(dir2, &tight, &w2, &rec) == STREAM_ENOSPC);
	cleanup(dir2);
	cleanup(dir);
}

int main(void)
{
	test_frame_roundtrip();
	test_group_commit_and_index_rebuild();
	test_fsync_failure();
	test_torn_tail_and_corruption();
	test_groups_and_retention();
	test_retention_keeps_restart_point();
	test_single_writer();
	return unit_done("stream");
}
