/*
 * pgoutput_tuple.c - TupleData and the changes that carry it: Insert,
 * Update and Delete (pgoutput.h; layouts as PostgreSQL's proto.c).
 */
#include "pgoutput_internal.h"

#include <stdint.h>

/* ---- tuples ------------------------------------------------------------- */

/* TupleData: Int16 ncols, then per column a kind byte and, for 't' and
 * 'b', Int32 len + bytes.  role names the tuple in errors ("Insert new
 * tuple"); only an Update's new tuple may hold unchanged-TOAST columns
 * (PostgreSQL flattens old tuples and reassembles inserted values). */
static int read_tuple(struct reader *r, const char *role, bool allow_unchanged,
		      struct pgoutput_column **store, size_t *cap, struct pgoutput_tuple *tuple)
{
	size_t at = r->pos;
	int16_t ncols;
	if (read_i16(r, "column count", &ncols) < 0)
		return -1;
	if (ncols < 0 || ncols > PGOUTPUT_MAX_COLUMNS) {
		errbuf_setf(r->err, r->errlen,
			  "pgoutput: bad column count %d in %s at byte %zu (0..%d)", ncols, role, at,
			  PGOUTPUT_MAX_COLUMNS);
		return -1;
	}
	/* Each column takes at least its kind byte. */
	if ((size_t)ncols > remaining(r)) {
		errbuf_setf(r->err, r->errlen,
			  "pgoutput: truncated %s message: %s declares %d columns at byte %zu but only %zu bytes remain",
			  r->what, role, ncols, at, remaining(r));
		return -1;
	}
	*store = pgoutput_reserve(*store, cap, (size_t)ncols, sizeof **store);
	struct pgoutput_column *cols = *store;
	for (int i = 0; i < ncols; i++) {
		size_t kind_at = r->pos;
		uint8_t kind;
		if (read_u8(r, "column kind", &kind) < 0)
			return -1;
		cols[i].len = 0;
		cols[i].value = NULL;
		switch (kind) {
		case PGOUTPUT_COLUMN_NULL:
			break;
		case PGOUTPUT_COLUMN_UNCHANGED_TOAST:
			if (!allow_unchanged) {
				errbuf_setf(r->err, r->errlen,
					  "pgoutput: unchanged-TOAST column %d in %s at byte %zu: only an Update's new tuple can carry one",
					  i + 1, role, kind_at);
				return -1;
			}
			break;
		case PGOUTPUT_COLUMN_TEXT:
		case PGOUTPUT_COLUMN_BINARY: {
			size_t len_at = r->pos;
			uint32_t len;
			if (read_u32(r, "column value length", &len) < 0)
				return -1;
			if (len > INT32_MAX) {
				errbuf_setf(r->err, r->errlen,
					  "pgoutput: negative value length %d for column %d in %s at byte %zu",
					  (int32_t)len, i + 1, role, len_at);
				return -1;
			}
			if (need(r, len, "column value") < 0)
				return -1;
			cols[i].len = len;
			cols[i].value = r->buf + r->pos;
			r->pos += len;
			break;
		}
		default:
			errbuf_setf(r->err, r->errlen,
				  "pgoutput: unknown column kind 0x%02x for column %d in %s at byte %zu",
				  kind, i + 1, role, kind_at);
			return -1;
		}
		cols[i].kind = (enum pgoutput_column_kind)kind;
	}
	tuple->ncols = ncols;
	tuple->cols = cols;
	return 0;
}

static int read_tuple_tag(struct reader *r, uint8_t *tag)
{
	return read_u8(r, "tuple tag", tag);
}

static int bad_tag(struct reader *r, uint8_t tag, size_t at, const char *expected)
{
	errbuf_setf(r->err, r->errlen, "pgoutput: unexpected tuple tag 0x%02x in %s message at byte %zu (expected %s)",
		  tag, r->what, at, expected);
	return -1;
}

int pgoutput_decode_insert(struct reader *r, struct pgoutput_message *out)
{
	if (read_relid(r, &out->change.relid) < 0)
		return -1;
	size_t at = r->pos;
	uint8_t tag;
	if (read_tuple_tag(r, &tag) < 0)
		return -1;
	if (tag != 'N')
		return bad_tag(r, tag, at, "'N'");
	return read_tuple(r, "Insert new tuple", false, &out->new_store, &out->new_cap,
			  &out->change.new_tuple);
}

int pgoutput_decode_update(struct reader *r, struct pgoutput_message *out)
{
	if (read_relid(r, &out->change.relid) < 0)
		return -1;
	size_t at = r->pos;
	uint8_t tag;
	if (read_tuple_tag(r, &tag) < 0)
		return -1;
	if (tag == 'K' || tag == 'O') {
		out->change.old_kind = (enum pgoutput_old_kind)tag;
		if (read_tuple(r, tag == 'K' ? "Update old key" : "Update old tuple", false,
			       &out->old_store, &out->old_cap, &out->change.old_tuple) < 0)
			return -1;
		at = r->pos;
		if (read_tuple_tag(r, &tag) < 0)
			return -1;
		if (tag != 'N')
			return bad_tag(r, tag, at, "'N' after the old tuple");
	} else if (tag != 'N') {
		return bad_tag(r, tag, at, "'K', 'O' or 'N'");
	}
	return read_tuple(r, "Update new tuple", true, &out->new_store, &out->new_cap,
			  &out->change.new_tuple);
}

int pgoutput_decode_delete(struct reader *r, struct pgoutput_message *out)
{
	if (read_relid(r, &out->change.relid) < 0)
		return -1;
	size_t at = r->pos;
	uint8_t tag;
	if (read_tuple_tag(r, &tag) < 0)
		return -1;
	if (tag != 'K' && tag != 'O')
		return bad_tag(r, tag, at, "'K' or 'O'");
	out->change.old_kind = (enum pgoutput_old_kind)tag;
	return read_tuple(r, tag == 'K' ? "Delete old key" : "Delete old tuple", false,
			  &out->old_store, &out->old_cap, &out->change.old_tuple);
}
