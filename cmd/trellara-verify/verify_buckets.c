/*
 * verify_buckets.c - bucket sums from a binary COPY stream
 * (verify_buckets.h).
 *
 * The format (PostgreSQL's COPY BINARY): the signature "PGCOPY\n\377\r\n\0",
 * a 4-byte flags word (bit 16: OIDs, refused; the low 16 bits must be 0)
 * and a 4-byte header extension length (its bytes skipped), then per row
 * an int16 field count and per field an int32 length (-1: NULL) and the
 * bytes; the trailer is a field count of -1.  Integers are big-endian.
 */
#include "verify_buckets.h"

#include <stdio.h>
#include <string.h>

static const uint8_t signature[11] = { 'P', 'G', 'C', 'O', 'P', 'Y', '\n', 0xff, '\r', '\n', 0 };

#define HEADER_LEN 19 /* signature, flags, extension length */

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t be64(const uint8_t *p)
{
	return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

static int16_t be16(const uint8_t *p)
{
	return (int16_t)((uint16_t)p[0] << 8 | p[1]);
}

void verify_buckets_init(struct verify_buckets_reader *r, bool with_key)
{
	memset(r, 0, sizeof *r);
	r->fields = with_key ? 2 : 1;
}

static bool refuse(struct verify_buckets_reader *r, const char *why)
{
	snprintf(r->error, sizeof r->error, "%s", why);
	return false;
}

/* The bytes a complete unit at p needs (header, row or trailer), from the
 * n bytes there; 0 when more are needed to tell; -1 refused. */
static long unit_len(struct verify_buckets_reader *r, const uint8_t *p, size_t n)
{
	if (!r->header_done)
		return n < HEADER_LEN ? 0 : HEADER_LEN;
	if (n < 2)
		return 0;
	int16_t count = be16(p);
	if (count == -1)
		return 2;
	if (count != r->fields)
		return refuse(r, "a row with another number of fields"), -1;
	return 2 + (long)count * 12;
}

/* One complete unit at p (len bytes, as unit_len said). */
static bool take(struct verify_buckets_reader *r, const uint8_t *p, size_t len, struct bucket_sums *out)
{
	if (!r->header_done) {
		if (memcmp(p, signature, sizeof signature) != 0)
			return refuse(r, "not a binary COPY stream (signature)");
		if (be32(p + 11) != 0)
			return refuse(r, "a binary COPY stream with flags set");
		if (be32(p + 15) != 0)
			return refuse(r, "a binary COPY stream with a header extension");
		r->header_done = true;
		return true;
	}
	if (len == 2) {
		r->finished = true;
		return true;
	}
	int64_t v[2] = { 0, 0 };
	for (int f = 0; f < r->fields; f++) {
		const uint8_t *field = p + 2 + f * 12;
		if (be32(field) != 8)
			return refuse(r, be32(field) == 0xffffffffu ? "a NULL hash or key" : "a field that is not an int8");
		v[f] = be64(field + 4);
	}
	struct bucket_sums *b = &out[(uint64_t)v[0] & (VERIFY_BUCKETS - 1)];
	b->rows++;
	b->hash_sum += v[0];
	b->hash_xor ^= v[0];
	b->key_xor ^= v[1];
	r->rows++;
	return true;
}

bool verify_buckets_feed(struct verify_buckets_reader *r, const uint8_t *data, size_t len, struct bucket_sums *out)
{
	if (r->error[0])
		return false;
	size_t at = 0;
	/* first complete what the last piece left */
	while (r->have > 0) {
		if (r->finished)
			return refuse(r, "bytes after the trailer");
		long need = unit_len(r, r->carry, r->have);
		if (need < 0)
			return false;
		if (need > 0 && r->have == (size_t)need) {
			if (!take(r, r->carry, r->have, out))
				return false;
			r->have = 0;
			break;
		}
		if (at == len)
			return true; /* more to come */
		size_t want = need == 0 ? r->have + 1 : (size_t)need;
		if (want > sizeof r->carry)
			return refuse(r, "a unit longer than a row");
		size_t copy = want - r->have < len - at ? want - r->have : len - at;
		memcpy(r->carry + r->have, data + at, copy);
		r->have += copy;
		at += copy;
	}
	while (at < len) {
		if (r->finished)
			return refuse(r, "bytes after the trailer");
		long need = unit_len(r, data + at, len - at);
		if (need < 0)
			return false;
		if (need == 0 || (size_t)need > len - at) {
			if (len - at > sizeof r->carry)
				return refuse(r, "a unit longer than a row");
			memcpy(r->carry, data + at, len - at);
			r->have = len - at;
			return true;
		}
		if (!take(r, data + at, (size_t)need, out))
			return false;
		at += (size_t)need;
	}
	return true;
}

bool verify_buckets_complete(const struct verify_buckets_reader *r)
{
	return !r->error[0] && r->finished && r->have == 0;
}
