/*
 * frame_walk unit tests: a frame whose payload was altered (its CRC left
 * as it was) is handed out marked, between valid frames; the same damage
 * in the last frame is a torn tail (the end); seeking by offset; a frame
 * file holding frames cut from a segment, and one cut short.
 */
#include "trellara/frame_walk.h"
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

#define FRAMES 5
#define PAYLOAD 100

/* A stream of FRAMES txn frames of PAYLOAD bytes each, in one segment. */
static char *make_stream(char *root)
{
	char tmpl[] = "/tmp/trellara-unit-XXXXXX";
	char *d = mkdtemp(tmpl);
	if (!d)
		return NULL;
	snprintf(root, 64, "%s", d);
	char *dir = xasprintf("%s/stream", d);
	struct stream_writer_options o = { .segment_bytes = 1 << 20, .min_free_bytes = 0 };
	struct stream_writer *w = NULL;
	struct stream_recovery rec;
	CHECK(stream_writer_open(dir, &o, &w, &rec) == STREAM_OK);
	char buf[PAYLOAD];
	for (int i = 0; i < FRAMES; i++) {
		memset(buf, 'a' + i, sizeof buf);
		uint64_t off;
		CHECK(stream_writer_append(w, FRAME_TXN, 0, buf, sizeof buf, &off) == STREAM_OK);
	}
	CHECK(stream_writer_sync(w) == STREAM_OK);
	stream_writer_close(w);
	return dir;
}

static char *segment0(const char *dir)
{
	return xasprintf("%s/segments/00000000000000000000.log", dir);
}

/* Flips one payload byte of frame k (the frames are all the same size). */
static void flip(const char *dir, int k)
{
	char *seg = segment0(dir);
	int fd = open(seg, O_RDWR);
	CHECK(fd >= 0);
	off_t at = (off_t)k * (FRAME_HEADER_SIZE + PAYLOAD) + FRAME_HEADER_SIZE + PAYLOAD / 2;
	uint8_t b;
	CHECK(pread(fd, &b, 1, at) == 1);
	b ^= 0x20;
	CHECK(pwrite(fd, &b, 1, at) == 1);
	close(fd);
	free(seg);
}

static void test_mismatch_in_the_middle(void)
{
	char root[64];
	char *dir = make_stream(root);
	flip(dir, 2);
	struct frame_walk *w;
	CHECK(frame_walk_open_stream(dir, &w) == STREAM_OK);
	struct walked_frame f;
	for (int i = 0; i < FRAMES; i++) {
		CHECK(frame_walk_next(w, &f) == STREAM_OK);
		CHECK(f.offset == (uint64_t)i);
		CHECK(f.crc_ok == (i != 2));
		CHECK(f.payload && f.payload_length == PAYLOAD);
		CHECK(f.position == (uint64_t)i * (FRAME_HEADER_SIZE + PAYLOAD));
		if (i == 2) {
			CHECK(f.crc_found != f.header.crc);
			CHECK(f.payload[PAYLOAD / 2] == ('c' ^ 0x20));
		}
	}
	CHECK(frame_walk_next(w, &f) == STREAM_END);
	/* seek back to the damaged frame, then past it */
	CHECK(frame_walk_seek(w, 2) == STREAM_OK);
	CHECK(frame_walk_next(w, &f) == STREAM_OK && f.offset == 2 && !f.crc_ok);
	CHECK(frame_walk_seek(w, 4) == STREAM_OK);
	CHECK(frame_walk_next(w, &f) == STREAM_OK && f.offset == 4 && f.crc_ok && f.payload[0] == 'e');
	CHECK(frame_walk_seek(w, FRAMES + 1) == STREAM_ERANGE);
	frame_walk_close(w);
	nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

static void test_mismatch_in_the_last_frame_is_the_end(void)
{
	char root[64];
	char *dir = make_stream(root);
	flip(dir, FRAMES - 1);
	struct frame_walk *w;
	CHECK(frame_walk_open_stream(dir, &w) == STREAM_OK);
	struct walked_frame f;
	int n = 0;
	int rc;
	while ((rc = frame_walk_next(w, &f)) == STREAM_OK) {
		CHECK(f.crc_ok);
		n++;
	}
	CHECK(rc == STREAM_END);
	CHECK(n == FRAMES - 1);
	frame_walk_close(w);
	nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

/* Frames 1..3 cut out of the segment into a file: its offsets are theirs,
 * a mismatch in it is handed out, and a file cut inside a frame is
 * corrupt. */
static void test_frame_file(void)
{
	char root[64];
	char *dir = make_stream(root);
	flip(dir, 2);
	char *seg = segment0(dir);
	char *file = xasprintf("%s/frames.bin", root);
	int in = open(seg, O_RDONLY), out = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(in >= 0 && out >= 0);
	uint8_t buf[3 * (FRAME_HEADER_SIZE + PAYLOAD)];
	CHECK(pread(in, buf, sizeof buf, FRAME_HEADER_SIZE + PAYLOAD) == (ssize_t)sizeof buf);
	CHECK(write(out, buf, sizeof buf) == (ssize_t)sizeof buf);
	close(in);
	close(out);
	struct frame_walk *w;
	struct walked_frame f;
	CHECK(frame_walk_open_file(file, &w) == STREAM_OK);
	for (int i = 1; i <= 3; i++) {
		CHECK(frame_walk_next(w, &f) == STREAM_OK);
		CHECK(f.offset == (uint64_t)i);
		CHECK(f.crc_ok == (i != 2));
	}
	CHECK(frame_walk_next(w, &f) == STREAM_END);
	frame_walk_close(w);
	CHECK(truncate(file, sizeof buf - 10) == 0);
	CHECK(frame_walk_open_file(file, &w) == STREAM_OK);
	CHECK(frame_walk_next(w, &f) == STREAM_OK);
	CHECK(frame_walk_next(w, &f) == STREAM_OK);
	CHECK(frame_walk_next(w, &f) == STREAM_ECORRUPT);
	frame_walk_close(w);
	char *missing = xasprintf("%s/none.bin", root);
	CHECK(frame_walk_open_file(missing, &w) == STREAM_EINVAL && w == NULL);
	free(missing);
	free(file);
	free(seg);
	nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

/* Several segments: the walk crosses them, seeks through their indexes,
 * and hands out a mismatch in a sealed one. */
static void test_segments(void)
{
	char tmpl[] = "/tmp/trellara-unit-XXXXXX";
	char *root = mkdtemp(tmpl);
	CHECK(root != NULL);
	char *dir = xasprintf("%s/stream", root);
	struct stream_writer_options o = { .segment_bytes = 65536, .min_free_bytes = 0 };
	struct stream_writer *wr = NULL;
	struct stream_recovery rec;
	CHECK(stream_writer_open(dir, &o, &wr, &rec) == STREAM_OK);
	char buf[1000];
	for (int i = 0; i < 200; i++) {
		memset(buf, 'a' + i % 26, sizeof buf);
		uint64_t off;
		CHECK(stream_writer_append(wr, FRAME_TXN, 0, buf, sizeof buf, &off) == STREAM_OK);
	}
	CHECK(stream_writer_sync(wr) == STREAM_OK);
	stream_writer_close(wr);
	uint64_t *bases;
	size_t n_bases;
	CHECK(stream_segment_bases(dir, &bases, &n_bases) == STREAM_OK && n_bases >= 3);
	struct frame_walk *w;
	struct walked_frame f;
	CHECK(frame_walk_open_stream(dir, &w) == STREAM_OK);
	CHECK(frame_walk_seek(w, 70) == STREAM_OK);
	CHECK(frame_walk_next(w, &f) == STREAM_OK && f.offset == 70 && f.crc_ok && f.payload[0] == 'a' + 70 % 26);
	char *seg = xstrdup(f.file);
	uint64_t pos = f.position;
	CHECK(strstr(seg, "00000000000000000000.log") == NULL); /* not the first segment */
	frame_walk_close(w);
	int fd = open(seg, O_RDWR);
	CHECK(pwrite(fd, "#", 1, (off_t)(pos + FRAME_HEADER_SIZE + 10)) == 1);
	close(fd);
	CHECK(frame_walk_open_stream(dir, &w) == STREAM_OK);
	int n = 0, rc;
	while ((rc = frame_walk_next(w, &f)) == STREAM_OK) {
		CHECK(f.offset == (uint64_t)n);
		CHECK(f.crc_ok == (n != 70));
		n++;
	}
	CHECK(rc == STREAM_END && n == 200);
	CHECK(frame_walk_seek(w, 199) == STREAM_OK);
	CHECK(frame_walk_next(w, &f) == STREAM_OK && f.offset == 199);
	CHECK(frame_walk_seek(w, 3) == STREAM_OK);
	CHECK(frame_walk_next(w, &f) == STREAM_OK && f.offset == 3);
	frame_walk_close(w);
	/* a header scribbled over in a sealed segment: where the next frame
	 * starts is unknown, corrupt */
	fd = open(seg, O_RDWR);
	CHECK(pwrite(fd, "XXXX", 4, (off_t)pos) == 4);
	close(fd);
	CHECK(frame_walk_open_stream(dir, &w) == STREAM_OK);
	while ((rc = frame_walk_next(w, &f)) == STREAM_OK)
		;
	CHECK(rc == STREAM_ECORRUPT);
	frame_walk_close(w);
	free(seg);
	free(bases);
	nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

/* A compressed frame is handed out inflated, through the one codec. */
static void test_compressed(void)
{
	char tmpl[] = "/tmp/trellara-unit-XXXXXX";
	char *root = mkdtemp(tmpl);
	CHECK(root != NULL);
	char *dir = xasprintf("%s/stream", root);
	struct stream_writer_options o = { .segment_bytes = 1 << 20, .min_free_bytes = 0,
					   .compression = STREAM_COMPRESSION_ZLIB };
	struct stream_writer *wr = NULL;
	struct stream_recovery rec;
	CHECK(stream_writer_open(dir, &o, &wr, &rec) == STREAM_OK);
	char buf[4000];
	memset(buf, 'z', sizeof buf);
	uint64_t off;
	CHECK(stream_writer_append(wr, FRAME_TXN, 0, buf, sizeof buf, &off) == STREAM_OK);
	CHECK(stream_writer_sync(wr) == STREAM_OK);
	stream_writer_close(wr);
	struct frame_walk *w;
	struct walked_frame f;
	CHECK(frame_walk_open_stream(dir, &w) == STREAM_OK);
	CHECK(frame_walk_next(w, &f) == STREAM_OK);
	CHECK(f.compressed && f.crc_ok);
	CHECK((f.header.flags & FRAME_FLAG_ZLIB) != 0 && f.header.payload_length < sizeof buf);
	CHECK(f.payload && f.payload_length == sizeof buf && memcmp(f.payload, buf, sizeof buf) == 0);
	CHECK(frame_walk_next(w, &f) == STREAM_END);
	frame_walk_close(w);
	nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

int main(void)
{
	test_compressed();
	test_segments();
	test_mismatch_in_the_middle();
	test_mismatch_in_the_last_frame_is_the_end();
	test_frame_file();
	return unit_done("frame_walk");
}
