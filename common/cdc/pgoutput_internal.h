/*
 * pgoutput_internal.h - what the pgoutput modules share and nobody else
 * uses (the contract is trellara/pgoutput.h):
 *
 *   pgoutput.c           message storage, the message parsers, pgoutput_decode
 *   pgoutput_tuple.c     TupleData and the changes that carry it (Insert,
 *                        Update, Delete)
 *   pgoutput_relcache.c  the relation cache and its checks of a change
 *   pgoutput_session.c   the session: stream blocks and message order
 *
 * The bounded reader is here, inline: every read checks the remaining
 * length first, so no path can read past the end of the input.  Functions
 * that fail write one message into the caller's err buffer and return -1.
 */
#ifndef TRELLARA_PGOUTPUT_INTERNAL_H
#define TRELLARA_PGOUTPUT_INTERNAL_H

#include "trellara/pgoutput.h"
#include "trellara/strbuf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* "X/X" locally: the decoder has no other dependency than xalloc. */
#define LSN_TEXT_LEN 18
/* lsn as "X/X" in buf (LSN_TEXT_LEN bytes); returns buf. */
const char *pgoutput_lsn_text(uint64_t lsn, char *buf);

/* Grows *store to hold n elements of size each (its contents are not
 * kept); n was already checked against the input's remaining bytes. */
void *pgoutput_reserve(void *store, size_t *cap, size_t n, size_t size);

/* ---- the bounded reader ---- */

struct reader {
	const uint8_t *buf;
	size_t len;
	size_t pos;
	const char *what; /* message type name */
	char *err;
	size_t errlen;
};

static inline size_t remaining(const struct reader *r)
{
	return r->len - r->pos;
}

static inline int need(struct reader *r, size_t n, const char *field)
{
	if (remaining(r) >= n)
		return 0;
	errbuf_setf(r->err, r->errlen,
		  "pgoutput: truncated %s message: need %zu bytes for %s at byte %zu, have %zu",
		  r->what, n, field, r->pos, remaining(r));
	return -1;
}

static inline int read_u8(struct reader *r, const char *field, uint8_t *v)
{
	if (need(r, 1, field) < 0)
		return -1;
	*v = r->buf[r->pos++];
	return 0;
}

static inline int read_i16(struct reader *r, const char *field, int16_t *v)
{
	if (need(r, 2, field) < 0)
		return -1;
	const uint8_t *p = r->buf + r->pos;
	*v = (int16_t)(uint16_t)((unsigned)p[0] << 8 | p[1]);
	r->pos += 2;
	return 0;
}

static inline int read_u32(struct reader *r, const char *field, uint32_t *v)
{
	if (need(r, 4, field) < 0)
		return -1;
	const uint8_t *p = r->buf + r->pos;
	*v = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
	r->pos += 4;
	return 0;
}

static inline int read_u64(struct reader *r, const char *field, uint64_t *v)
{
	if (need(r, 8, field) < 0)
		return -1;
	uint64_t x = 0;
	for (int i = 0; i < 8; i++)
		x = x << 8 | r->buf[r->pos + (size_t)i];
	*v = x;
	r->pos += 8;
	return 0;
}

static inline int read_i64(struct reader *r, const char *field, int64_t *v)
{
	uint64_t u;
	if (read_u64(r, field, &u) < 0)
		return -1;
	*v = (int64_t)u; /* two's complement, as PostgreSQL sends it */
	return 0;
}

/* A NUL-terminated string inside the message; borrowed. */
static inline int read_string(struct reader *r, const char *field, bool allow_empty, const char **s)
{
	size_t at = r->pos;
	const uint8_t *nul = remaining(r) ? memchr(r->buf + at, '\0', remaining(r)) : NULL;
	if (!nul) {
		errbuf_setf(r->err, r->errlen,
			  "pgoutput: truncated %s message: %s at byte %zu has no NUL terminator within the %zu bytes left",
			  r->what, field, at, remaining(r));
		return -1;
	}
	if (!allow_empty && nul == r->buf + at) {
		errbuf_setf(r->err, r->errlen, "pgoutput: empty %s in %s message at byte %zu", field,
			  r->what, at);
		return -1;
	}
	*s = (const char *)(r->buf + at);
	r->pos = (size_t)(nul - r->buf) + 1;
	return 0;
}

/* The Int32 xid that prefixes changes inside a stream block. */
static inline int read_xid(struct reader *r, const char *field, uint32_t *xid)
{
	size_t at = r->pos;
	if (read_u32(r, field, xid) < 0)
		return -1;
	if (*xid == 0) {
		errbuf_setf(r->err, r->errlen, "pgoutput: invalid %s 0 in %s message at byte %zu",
			  field, r->what, at);
		return -1;
	}
	return 0;
}

static inline int read_relid(struct reader *r, uint32_t *relid)
{
	size_t at = r->pos;
	if (read_u32(r, "relation id", relid) < 0)
		return -1;
	if (*relid == 0) {
		errbuf_setf(r->err, r->errlen, "pgoutput: invalid relation id 0 in %s message at byte %zu",
			  r->what, at);
		return -1;
	}
	return 0;
}

/* ---- changes (pgoutput_tuple.c) ---- */

int pgoutput_decode_insert(struct reader *r, struct pgoutput_message *out);
int pgoutput_decode_update(struct reader *r, struct pgoutput_message *out);
int pgoutput_decode_delete(struct reader *r, struct pgoutput_message *out);

#endif
