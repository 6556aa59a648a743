/*
 * verify_buckets.h - verify's per-bucket sums, read from the stream of a
 * binary COPY (DESIGN §9).
 *
 * Each side sends, per row, its hash h (int8) and, for a table with a
 * single NOT NULL integer key, the key k (int8), as
 * COPY (SELECT h[, k] FROM ...) TO STDOUT (FORMAT binary).  This module
 * adds each row to its bucket (the low bits of h): the row count, the
 * exact sum and the exclusive or of h, the exclusive or of k.  The server
 * then only renders and hashes the rows; the grouping (a hash aggregate
 * on the server before) costs the client a few instructions per row.
 *
 * Owns nothing but its own state; no I/O, no libpq: the caller feeds the
 * bytes of the COPY stream in pieces of any size.
 */
#ifndef TRELLARA_VERIFY_BUCKETS_H
#define TRELLARA_VERIFY_BUCKETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VERIFY_BUCKETS 16384 /* a power of two: the low bits of the row hash */

__extension__ typedef __int128 verify_i128;

struct bucket_sums {
	int64_t rows;
	verify_i128 hash_sum;
	int64_t hash_xor, key_xor;
};

struct verify_buckets_reader {
	int fields;        /* fields per row: 1 (h) or 2 (h, k) */
	bool header_done;  /* the 19-byte file header was read */
	bool finished;     /* the trailer (field count -1) was read */
	uint64_t rows;     /* rows added */
	uint8_t carry[64]; /* an incomplete header or row from the last piece */
	size_t have;
	char error[128];   /* why the stream was refused */
};

/* A reader for rows of one (h) or two (h, k) int8 fields. */
void verify_buckets_init(struct verify_buckets_reader *r, bool with_key);
/* Adds the rows in data[0..len) to out (VERIFY_BUCKETS entries).
 * Returns false (r->error says why) on anything that is not the binary
 * COPY of such rows: a bad signature, flags, a field count, a NULL, a
 * field length other than 8, bytes after the trailer. */
bool verify_buckets_feed(struct verify_buckets_reader *r, const uint8_t *data, size_t len, struct bucket_sums *out);
/* True when the stream ended exactly after its trailer. */
bool verify_buckets_complete(const struct verify_buckets_reader *r);

#endif
