/*
 * Compressed frames (stream.compression: zlib): the payload codec, the
 * writer's rule for when compression pays, frames of the format before
 * compression read as they always were, and compressed payloads that do
 * not inflate to what their header says refused (the CRC fixed up).
 */
#include "../../common/stream/stream_internal.h"
#include "trellara/checksum.h"
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
#include <zlib.h>

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

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

/* Big-endian by hand, not with the codec's helpers. */
static void be(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = bytes - 1; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

/* A frame of the format before compression, byte by byte as
 * trellara-stream(5) lays it out; returns its size. */
static size_t old_frame(uint8_t *out, int type, uint16_t flags, uint64_t offset, const void *payload, uint32_t len)
{
	memcpy(out, "TRLF", 4);
	out[4] = 1;
	out[5] = (uint8_t)type;
	be(out + 6, flags, 2);
	be(out + 8, offset, 8);
	be(out + 16, 0x0006616607d1f944ULL, 8);
	be(out + 24, len, 4);
	memcpy(out + 32, payload, len);
	uint32_t crc = crc32c(crc32c(0, out, 28), out + 32, len);
	be(out + 28, crc, 4);
	return 32 + (size_t)len;
}

/* A text that deflates well, as envelopes of many similar rows do. */
static char *rows_text(size_t len)
{
	char *t = xmalloc(len);
	size_t at = 0;
	for (unsigned i = 0; at < len; i++) {
		char row[64];
		int n = snprintf(row, sizeof row, "{\"id\":%u,\"status\":\"shipped\",\"qty\":%u}", i, i % 7);
		for (int k = 0; k < n && at < len; k++)
			t[at++] = row[k];
	}
	return t;
}

static void random_bytes(uint8_t *p, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (uint8_t)(seed >> 16);
	}
}

/* The documented example frame, and a segment written in the old format
 * (no index, no writer: the reader publishes what validates) read back
 * unchanged; then a zlib writer appends to it and both kinds read. */
static void test_old_format_and_mixed(void)
{
	uint8_t hello[64];
	size_t n = old_frame(hello, FRAME_TXN, 0, 0, "hello", 5);
	/* trellara-stream(5)'s example, as printed there */
	static const uint8_t documented[] = { 0x54, 0x52, 0x4c, 0x46, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
					      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x06, 0x61, 0x66, 0x07, 0xd1,
					      0xf9, 0x44, 0x00, 0x00, 0x00, 0x05, 0x8f, 0xcb, 0x06, 0x70, 'h',
					      'e',  'l',  'l',  'o' };
	CHECK(n == sizeof documented && memcmp(hello, documented, n) == 0);

	char *dir = tmpdir();
	CHECK(dir != NULL);
	if (!dir)
		return;
	char *segs = xasprintf("%s/segments", dir);
	CHECK(mkdir(dir, 0700) == 0 && mkdir(segs, 0700) == 0);
	/* three old frames: the example, a large compressible one with
	 * producer flags 7, and a small one with flags 0x7fff */
	char *big = rows_text(20000);
	size_t cap = 32 * 3 + 5 + 20000 + 3 + 64;
	uint8_t *seg = xcalloc(1, cap);
	size_t at = old_frame(seg, FRAME_TXN, 0, 0, "hello", 5);
	at += old_frame(seg + at, FRAME_CHUNK, 7, 1, big, 20000);
	at += old_frame(seg + at, FRAME_WATERMARK, 0x7fff, 2, "abc", 3);
	char *path = xasprintf("%s/00000000000000000000.log", segs);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	CHECK(fd >= 0 && write(fd, seg, at) == (ssize_t)at && close(fd) == 0);

	struct stream_reader *r;
	CHECK(stream_reader_open(dir, &r) == STREAM_OK);
	struct stream_frame f;
	CHECK(stream_reader_next(r, &f) == STREAM_OK);
	CHECK(f.header.offset == 0 && f.header.type == FRAME_TXN && f.header.flags == 0);
	CHECK(!f.compressed && f.stored_length == 5 && f.header.payload_length == 5 && memcmp(f.payload, "hello", 5) == 0);
	CHECK(stream_reader_next(r, &f) == STREAM_OK);
	CHECK(f.header.offset == 1 && f.header.flags == 7 && !f.compressed);
	CHECK(f.header.payload_length == 20000 && memcmp(f.payload, big, 20000) == 0);
	CHECK(stream_reader_next(r, &f) == STREAM_OK);
	CHECK(f.header.flags == 0x7fff && !f.compressed && memcmp(f.payload, "abc", 3) == 0);
	CHECK(stream_reader_next(r, &f) == STREAM_END);
	stream_reader_close(r);

	/* a zlib writer recovers the old segment and appends compressed
	 * frames after its plain ones */
	struct stream_writer_options o = { .segment_bytes = 1 << 20, .compression = STREAM_COMPRESSION_ZLIB };
	struct stream_writer *w = NULL;
	struct stream_recovery rec;
	CHECK(stream_writer_open(dir, &o, &w, &rec) == STREAM_OK);
	CHECK(rec.next_offset == 3);
	uint64_t off;
	CHECK(stream_writer_append(w, FRAME_TXN, 5, big, 20000, &off) == STREAM_OK && off == 3);
	CHECK(stream_writer_sync(w) == STREAM_OK);
	stream_writer_close(w);

	CHECK(stream_reader_open(dir, &r) == STREAM_OK);
	CHECK(stream_reader_seek(r, 1) == STREAM_OK);
	CHECK(stream_reader_next(r, &f) == STREAM_OK && f.header.offset == 1 && !f.compressed);
	CHECK(memcmp(f.payload, big, 20000) == 0);
	CHECK(stream_reader_next(r, &f) == STREAM_OK && f.header.offset == 2 && !f.compressed);
	CHECK(stream_reader_next(r, &f) == STREAM_OK && f.header.offset == 3);
	CHECK(f.compressed && f.header.flags == 5 && f.header.payload_length == 20000);
	CHECK(f.stored_length < 20000 / 4 && memcmp(f.payload, big, 20000) == 0);
	CHECK(stream_reader_next(r, &f) == STREAM_END);
	stream_reader_close(r);

	/* on disk: the flag bit, the inflated length, then a zlib stream
	 * that zlib itself inflates to the payload */
	char *data = NULL;
	size_t len = 0;
	CHECK(fs_read_file(path, &data, &len) == 0);
	const uint8_t *fr = (const uint8_t *)data + at;
	CHECK(len >= at + 36 && memcmp(fr, "TRLF", 4) == 0);
	if (len >= at + 36) {
		CHECK(fr[6] == 0x80 && fr[7] == 5);
		uint32_t stored = (uint32_t)fr[24] << 24 | (uint32_t)fr[25] << 16 | (uint32_t)fr[26] << 8 | fr[27];
		CHECK(fr[32] == 0 && fr[33] == 0 && fr[34] == 0x4e && fr[35] == 0x20); /* 20000 */
		uLongf plain_len = 20000;
		char *plain = xmalloc(20000);
		CHECK(uncompress((Bytef *)plain, &plain_len, fr + 36, stored - 4) == Z_OK);
		CHECK(plain_len == 20000 && memcmp(plain, big, 20000) == 0);
		CHECK(crc32c(crc32c(0, fr, 28), fr + 32, stored) == ((uint32_t)fr[28] << 24 | (uint32_t)fr[29] << 16 |
									(uint32_t)fr[30] << 8 | fr[31]));
		free(plain);
	}
	free(data);
	free(path);
	free(seg);
	free(big);
	free(segs);
	cleanup(dir);
}

/* Which payloads the writer compresses, and the producer's flags. */
static void test_when_it_pays(void)
{
	struct frame_buffer buf = { 0 };
	size_t stored = 0;
	char *rows = rows_text(100000);
	CHECK(frame_payload_compress(rows, 100000, &buf, &stored));
	CHECK(stored > FRAME_ZLIB_PREFIX && stored < 100000 / 4);
	/* below the minimum: never, however well it would deflate */
	CHECK(!frame_payload_compress(rows, FRAME_COMPRESS_MIN_BYTES - 1, &buf, &stored));
	CHECK(frame_payload_compress(rows, FRAME_COMPRESS_MIN_BYTES, &buf, &stored));
	/* random bytes do not shrink to 7/8 */
	uint8_t *noise = xmalloc(65536);
	random_bytes(noise, 65536, 42);
	CHECK(!frame_payload_compress(noise, 65536, &buf, &stored));
	/* half noise, half text: about 0.55 of it, which pays */
	memcpy(noise + 32768, rows, 32768);
	CHECK(frame_payload_compress(noise, 65536, &buf, &stored) && stored <= 65536 - 65536 / 8);

	char *dir = tmpdir();
	CHECK(dir != NULL);
	if (!dir)
		goto out;
	struct stream_writer_options o = { .segment_bytes = 1 << 20, .compression = STREAM_COMPRESSION_ZLIB };
	struct stream_writer *w = NULL;
	struct stream_recovery rec;
	CHECK(stream_writer_open(dir, &o, &w, &rec) == STREAM_OK);
	if (!w)
		goto out;
	uint64_t off;
	CHECK(stream_writer_append(w, FRAME_TXN, FRAME_FLAG_ZLIB, rows, 1000, &off) == STREAM_EINVAL);
	CHECK(stream_writer_append(w, FRAME_TXN, 0x8001, rows, 10, &off) == STREAM_EINVAL);
	random_bytes(noise, 65536, 7);
	CHECK(stream_writer_append(w, FRAME_TXN, 1, rows, 100000, &off) == STREAM_OK && off == 0);
	CHECK(stream_writer_append(w, FRAME_TXN, 2, rows, 100, &off) == STREAM_OK && off == 1);
	CHECK(stream_writer_append(w, FRAME_TXN, 3, noise, 65536, &off) == STREAM_OK && off == 2);
	CHECK(stream_writer_append(w, FRAME_TXN, 4, "", 0, &off) == STREAM_OK && off == 3);
	CHECK(stream_writer_sync(w) == STREAM_OK);
	stream_writer_close(w);

	struct stream_reader *r;
	struct stream_frame f;
	CHECK(stream_reader_open(dir, &r) == STREAM_OK);
	CHECK(stream_reader_next(r, &f) == STREAM_OK && f.compressed && f.header.flags == 1);
	CHECK(f.header.payload_length == 100000 && memcmp(f.payload, rows, 100000) == 0);
	CHECK(f.stored_length < 100000 / 4);
	CHECK(stream_reader_next(r, &f) == STREAM_OK && !f.compressed && f.header.flags == 2);
	CHECK(f.stored_length == 100 && memcmp(f.payload, rows, 100) == 0);
	CHECK(stream_reader_next(r, &f) == STREAM_OK && !f.compressed && f.header.flags == 3);
	CHECK(f.stored_length == 65536 && memcmp(f.payload, noise, 65536) == 0);
	CHECK(stream_reader_next(r, &f) == STREAM_OK && !f.compressed && f.header.payload_length == 0);
	CHECK(stream_reader_next(r, &f) == STREAM_END);
	stream_reader_close(r);

	/* inspect-local counts the bytes on disk */
	struct stream_report rep;
	CHECK(stream_inspect(dir, NULL, 0, &rep) == 0);
	CHECK(rep.total_bytes < 4 * 32 + 100000 / 4 + 100 + 65536 && !rep.corrupt);
	stream_report_free(&rep);
	cleanup(dir);
out:
	free(noise);
	free(rows);
	frame_buffer_free(&buf);
}

/* A compressed payload whose CRC matches but which does not inflate to
 * exactly its recorded length is refused, never returned. */
static void test_bad_compressed_payloads(void)
{
	char *rows = rows_text(50000);
	struct frame_buffer deflated = { 0 }, out = { 0 };
	size_t stored = 0;
	CHECK(frame_payload_compress(rows, 50000, &deflated, &stored));
	uint8_t *copy = xmalloc(stored + 16);
	struct frame_header h;
	const uint8_t *payload;
	bool compressed;

	/* intact: inflates to the payload */
	h = (struct frame_header){ .flags = FRAME_FLAG_ZLIB | 9, .payload_length = (uint32_t)stored };
	CHECK(frame_payload_decode(&h, deflated.data, &out, &payload, &compressed) == NULL);
	CHECK(compressed && h.flags == 9 && h.payload_length == 50000 && memcmp(payload, rows, 50000) == 0);
	/* not flagged: the stored bytes as they are */
	h = (struct frame_header){ .flags = 9, .payload_length = (uint32_t)stored };
	CHECK(frame_payload_decode(&h, deflated.data, &out, &payload, &compressed) == NULL);
	CHECK(!compressed && payload == deflated.data && h.payload_length == stored);

	struct {
		const char *want;
	} cases[] = {
		{ "more bytes" }, { "fewer bytes" }, { "maximum" }, { "after its zlib stream" }, { "not a valid zlib stream" },
		{ "shorter" },
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		memcpy(copy, deflated.data, stored);
		size_t len = stored;
		switch (c) {
		case 0: be(copy, 49999, 4); break;                 /* inflates past its length */
		case 1: be(copy, 50001, 4); break;                 /* falls short of it */
		case 2: be(copy, MAX_FRAME_PAYLOAD + 1ULL, 4); break;
		case 3: copy[len++] = 0; break;                    /* trailing byte */
		case 4: copy[4 + (len - 4) / 2] ^= 0x5a; copy[len - 1] ^= 0xff; break;
		case 5: len = 3; break;
		}
		h = (struct frame_header){ .flags = FRAME_FLAG_ZLIB, .payload_length = (uint32_t)len };
		const char *reason = frame_payload_decode(&h, copy, &out, &payload, &compressed);
		CHECK(reason && strstr(reason, cases[c].want));
		if (reason && !strstr(reason, cases[c].want))
			fprintf(stderr, "case %zu: %s\n", c, reason);
	}

	/* every single-bit change of a smaller compressed payload: refused,
	 * or (a change zlib cannot see) never a payload other than the
	 * original; never a read outside the buffers (ASan build) */
	size_t small = 0;
	CHECK(frame_payload_compress(rows, 3000, &deflated, &small));
	uint8_t *orig = xmalloc(small);
	memcpy(orig, deflated.data, small);
	int wrong = 0, refused = 0;
	for (size_t i = 0; i < small; i++) {
		for (int bit = 0; bit < 8; bit++) {
			memcpy(copy, orig, small);
			copy[i] ^= (uint8_t)(1u << bit);
			h = (struct frame_header){ .flags = FRAME_FLAG_ZLIB, .payload_length = (uint32_t)small };
			if (frame_payload_decode(&h, copy, &out, &payload, &compressed) != NULL)
				refused++;
			else if (h.payload_length != 3000 || memcmp(payload, rows, 3000) != 0)
				wrong++;
		}
	}
	CHECK(wrong == 0);
	CHECK(refused >= (int)(small * 8) - 16); /* a few bits deflate ignores (padding) */
	free(orig);

	/* through the reader: a frame after a good one whose deflate data
	 * is damaged and whose CRC is fixed up: STREAM_ECORRUPT at it */
	char *dir = tmpdir();
	CHECK(dir != NULL);
	if (!dir)
		goto out;
	struct stream_writer_options o = { .segment_bytes = 1 << 20, .compression = STREAM_COMPRESSION_ZLIB };
	struct stream_writer *w = NULL;
	struct stream_recovery rec;
	CHECK(stream_writer_open(dir, &o, &w, &rec) == STREAM_OK);
	if (!w)
		goto out;
	CHECK(stream_writer_append(w, FRAME_TXN, 0, rows, 50000, NULL) == STREAM_OK);
	CHECK(stream_writer_append(w, FRAME_TXN, 0, rows, 50000, NULL) == STREAM_OK);
	CHECK(stream_writer_sync(w) == STREAM_OK);
	stream_writer_close(w);
	char *path = xasprintf("%s/segments/00000000000000000000.log", dir);
	int fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	uint8_t hdr[32];
	CHECK(pread(fd, hdr, 32, 0) == 32);
	size_t second = 32 + ((size_t)hdr[24] << 24 | (size_t)hdr[25] << 16 | (size_t)hdr[26] << 8 | hdr[27]);
	CHECK(pread(fd, hdr, 32, (off_t)second) == 32);
	uint32_t plen = (uint32_t)hdr[24] << 24 | (uint32_t)hdr[25] << 16 | (uint32_t)hdr[26] << 8 | hdr[27];
	uint8_t *p = xmalloc(plen);
	CHECK(pread(fd, p, plen, (off_t)(second + 32)) == (ssize_t)plen);
	p[plen / 2] ^= 0x5a;
	p[plen - 1] ^= 0xff; /* the Adler-32 too */
	be(hdr + 28, crc32c(crc32c(0, hdr, 28), p, plen), 4);
	CHECK(pwrite(fd, hdr, 32, (off_t)second) == 32 && pwrite(fd, p, plen, (off_t)(second + 32)) == (ssize_t)plen);
	close(fd);
	free(p);

	struct stream_reader *r;
	struct stream_frame f;
	CHECK(stream_reader_open(dir, &r) == STREAM_OK);
	CHECK(stream_reader_next(r, &f) == STREAM_OK && f.compressed && memcmp(f.payload, rows, 50000) == 0);
	CHECK(stream_reader_next(r, &f) == STREAM_ECORRUPT);
	stream_reader_close(r);
	free(path);
	cleanup(dir);
out:
	free(copy);
	free(rows);
	frame_buffer_free(&deflated);
	frame_buffer_free(&out);
}

int main(void)
{
	test_old_format_and_mixed();
	test_when_it_pays();
	test_bad_compressed_payloads();
	return unit_done("stream_compress");
}
