/*
 * verify's bucket sums from a binary COPY stream (verify_buckets.h): the
 * sums of rows built byte by byte here equal the sums computed directly,
 * however the stream is cut into pieces; anything but the binary COPY of
 * int8 rows is refused, naming why.
 */
#include "../../cmd/trellara-verify/verify_buckets.h"
#include "unit.h"

#include <stdint.h>

struct buf {
	uint8_t b[4096];
	size_t n;
};

static void put(struct buf *s, const void *p, size_t n)
{
	memcpy(s->b + s->n, p, n);
	s->n += n;
}

static void put_be(struct buf *s, uint64_t v, int bytes)
{
	for (int i = bytes - 1; i >= 0; i--)
		s->b[s->n++] = (uint8_t)(v >> (8 * i));
}

static void header(struct buf *s)
{
	put(s, "PGCOPY\n\377\r\n\0", 11);
	put_be(s, 0, 4);
	put_be(s, 0, 4);
}

static void row(struct buf *s, int fields, int64_t h, int64_t k)
{
	put_be(s, (uint64_t)fields, 2);
	put_be(s, 8, 4);
	put_be(s, (uint64_t)h, 8);
	if (fields == 2) {
		put_be(s, 8, 4);
		put_be(s, (uint64_t)k, 8);
	}
}

static void trailer(struct buf *s)
{
	put_be(s, 0xffff, 2);
}

static struct bucket_sums sums_a[VERIFY_BUCKETS], sums_b[VERIFY_BUCKETS];

/* Feeds s in pieces of `piece` bytes; true when every piece was taken. */
static bool feed(const struct buf *s, bool key, size_t piece, struct bucket_sums *out, struct verify_buckets_reader *r)
{
	verify_buckets_init(r, key);
	memset(out, 0, sizeof(struct bucket_sums) * VERIFY_BUCKETS);
	for (size_t at = 0; at < s->n; at += piece) {
		size_t n = s->n - at < piece ? s->n - at : piece;
		if (!verify_buckets_feed(r, s->b + at, n, out))
			return false;
	}
	return true;
}

static const int64_t hashes[] = { 0, 1, -1, 16383, 16384, INT64_MIN, INT64_MAX, 0x123456789abcdef0, -16384 * 7 + 5,
				  16384 + 1 };

static void test_sums_whatever_the_pieces(void)
{
	for (int key = 0; key <= 1; key++) {
		struct buf s = { .n = 0 };
		header(&s);
		size_t n = sizeof hashes / sizeof hashes[0];
		for (size_t i = 0; i < n; i++)
			row(&s, key ? 2 : 1, hashes[i], (int64_t)i * 1000 - 3);
		trailer(&s);
		/* the sums computed directly */
		memset(sums_b, 0, sizeof sums_b);
		for (size_t i = 0; i < n; i++) {
			struct bucket_sums *b = &sums_b[(uint64_t)hashes[i] & (VERIFY_BUCKETS - 1)];
			b->rows++;
			b->hash_sum += hashes[i];
			b->hash_xor ^= hashes[i];
			b->key_xor ^= key ? (int64_t)i * 1000 - 3 : 0;
		}
		for (size_t piece = 1; piece <= s.n; piece++) {
			struct verify_buckets_reader r;
			CHECK(feed(&s, key, piece, sums_a, &r));
			CHECK(verify_buckets_complete(&r));
			CHECK(r.rows == n);
			CHECK(memcmp(sums_a, sums_b, sizeof sums_a) == 0);
		}
	}
	/* the exact sum does not wrap: two rows of INT64_MAX in bucket 16383 */
	struct buf s = { .n = 0 };
	header(&s);
	row(&s, 1, INT64_MAX, 0);
	row(&s, 1, INT64_MAX, 0);
	trailer(&s);
	struct verify_buckets_reader r;
	CHECK(feed(&s, false, 7, sums_a, &r) && verify_buckets_complete(&r));
	CHECK(sums_a[VERIFY_BUCKETS - 1].hash_sum == (verify_i128)INT64_MAX * 2);
	CHECK(sums_a[VERIFY_BUCKETS - 1].rows == 2 && sums_a[VERIFY_BUCKETS - 1].hash_xor == 0);
}

static void expect_refused(const struct buf *s, bool key, const char *why)
{
	for (size_t piece = 1; piece <= s->n; piece++) {
		struct verify_buckets_reader r;
		bool ok = feed(s, key, piece, sums_a, &r);
		CHECK(!ok || !verify_buckets_complete(&r));
		if (!ok)
			CHECK_STR(r.error, why);
	}
}

static void test_refused(void)
{
	struct buf s = { .n = 0 };
	put(&s, "PGCOPY\n\377\r\n\1", 11); /* the signature's last byte */
	put_be(&s, 0, 8);
	trailer(&s);
	expect_refused(&s, false, "not a binary COPY stream (signature)");

	s.n = 0;
	put(&s, "PGCOPY\n\377\r\n\0", 11);
	put_be(&s, 1u << 16, 4); /* OIDs */
	put_be(&s, 0, 4);
	trailer(&s);
	expect_refused(&s, false, "a binary COPY stream with flags set");

	s.n = 0;
	header(&s);
	row(&s, 2, 5, 6); /* two fields where one was asked */
	trailer(&s);
	expect_refused(&s, false, "a row with another number of fields");

	s.n = 0;
	header(&s);
	put_be(&s, 1, 2);
	put_be(&s, 0xffffffffu, 4); /* NULL */
	trailer(&s);
	expect_refused(&s, false, "a NULL hash or key");

	s.n = 0;
	header(&s);
	put_be(&s, 1, 2);
	put_be(&s, 4, 4); /* an int4 */
	put_be(&s, 7, 4);
	put_be(&s, 0, 4);
	trailer(&s);
	expect_refused(&s, false, "a field that is not an int8");

	s.n = 0;
	header(&s);
	row(&s, 1, 9, 0);
	trailer(&s);
	row(&s, 1, 9, 0); /* after the trailer */
	expect_refused(&s, false, "bytes after the trailer");

	/* cut short: taken, never complete */
	s.n = 0;
	header(&s);
	row(&s, 1, 9, 0);
	for (size_t cut = 0; cut < s.n; cut++) {
		struct buf t = s;
		t.n = cut;
		struct verify_buckets_reader r;
		CHECK(feed(&t, false, 3, sums_a, &r));
		CHECK(!verify_buckets_complete(&r));
	}
}

int main(void)
{
	test_sums_whatever_the_pieces();
	test_refused();
	return unit_done("test_verify_buckets");
}
