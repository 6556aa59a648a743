/*
 * envelope.h - the transaction envelope: the payload of a `txn` frame
 * (and, cut into pieces, of `chunk` frames).  A small versioned binary
 * format, big-endian, documented byte by byte in trellara-stream(5):
 *
 *   u8  version (1)
 *   str source_id            str = u16 length + bytes (no NUL)
 *   u32 xid
 *   u64 commit_lsn, u64 end_lsn
 *   i64 commit_time          µs since the Unix epoch, UTC
 *   str origin               empty = none
 *   u64 origin_lsn
 *   u32 n_relations, then each relation:
 *       u32 oid, str schema, str name, u8 replica identity (d n f i),
 *       u16 n_columns, then each: u8 flags (1 = key), str name,
 *       u32 type oid, i32 typmod
 *   u32 n_changes, then each change:
 *       u8 op: 'I' insert, 'U' update, 'D' delete, 'T' truncate, 'M' message
 *       I: u32 relation index, tuple
 *       U: u32 relation index, u8 old kind (0, 'K', 'O'), [tuple], tuple
 *       D: u32 relation index, u8 old kind ('K' or 'O'), tuple
 *       T: u8 flags (1 cascade, 2 restart identity), u32 n, n x u32 relation index
 *       M: u8 flags (1 transactional), u64 lsn, str prefix, u32 length, bytes
 *   tuple: u16 n_columns (= the relation's), then each: u8 kind
 *       ('n' null, 'u' unchanged TOAST, 't' text: u32 length + bytes)
 *
 * Every envelope is self-describing: it carries the descriptor of every
 * relation its changes use, so a reader starting at any offset can decode
 * it.  The encoder writes into a growable buffer; the decoder validates
 * every byte (fails closed with a message naming the field and byte) and
 * hands out views borrowed from the input buffer.
 */
#ifndef TRELLARA_ENVELOPE_H
#define TRELLARA_ENVELOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define ENVELOPE_VERSION 1

enum env_op { ENV_INSERT = 'I', ENV_UPDATE = 'U', ENV_DELETE = 'D', ENV_TRUNCATE = 'T', ENV_MESSAGE = 'M' };
enum env_value_kind { ENV_NULL = 'n', ENV_UNCHANGED_TOAST = 'u', ENV_TEXT = 't' };

/* A growable byte buffer (owned data). */
struct buf {
	uint8_t *data; /* owned */
	size_t len, cap;
};
void buf_reserve(struct buf *b, size_t more);
void buf_put(struct buf *b, const void *bytes, size_t len);
void buf_put_u8(struct buf *b, uint8_t v);
void buf_put_u16(struct buf *b, uint16_t v);
void buf_put_u32(struct buf *b, uint32_t v);
void buf_put_u64(struct buf *b, uint64_t v);
void buf_put_str(struct buf *b, const char *s, size_t len); /* u16 length + bytes */
void buf_free(struct buf *b);

struct env_column {
	const char *name; /* borrowed */
	size_t name_len;
	uint32_t type_oid;
	int32_t typmod;
	bool key;
};

struct env_relation {
	uint32_t oid;
	const char *schema, *name; /* borrowed, not NUL-terminated */
	size_t schema_len, name_len;
	uint8_t replident;
	uint16_t n_columns;
	struct env_column *columns; /* owned by the decoder */
};

struct env_value {
	uint8_t kind;
	uint32_t len;
	const uint8_t *data; /* borrowed (text only) */
};

struct env_tuple {
	uint16_t n;
	struct env_value *values; /* owned by the decoder (scratch) */
};

struct env_change {
	uint8_t op;
	uint32_t relation; /* index into the envelope's relations (I U D) */
	uint8_t old_kind;  /* 0, 'K', 'O' */
	struct env_tuple old_tuple, new_tuple;
	uint8_t truncate_flags;
	uint32_t n_truncate;
	uint32_t *truncate_relations; /* owned by the decoder (scratch) */
	uint8_t message_flags;
	uint64_t message_lsn;
	const char *message_prefix; /* borrowed */
	size_t message_prefix_len;
	uint32_t message_len;
	const uint8_t *message_content; /* borrowed */
};

struct env_header {
	uint8_t version;
	const char *source_id; /* borrowed */
	size_t source_id_len;
	uint32_t xid;
	uint64_t commit_lsn, end_lsn;
	int64_t commit_time_us;
	const char *origin; /* borrowed; origin_len 0 = none */
	size_t origin_len;
	uint64_t origin_lsn;
	uint32_t n_relations;
	struct env_relation *relations; /* owned by the decoder */
	uint32_t n_changes;
};

/* Decoding: header and relations first, then the changes one by one. */
struct env_decoder {
	const uint8_t *buf;
	size_t len, pos;
	struct env_header header;
	uint32_t changes_read;
	struct env_change change; /* scratch, owned */
	size_t old_cap, new_cap, trunc_cap;
	char error[256];
};

/* 0, or -1 with decoder->error set ("envelope: ... at byte N"). */
int env_decode_begin(struct env_decoder *d, const uint8_t *buf, size_t len);
/* 1 with *change (valid until the next call), 0 at the end (all bytes
 * consumed, count matched), -1 on malformed input. */
int env_decode_next(struct env_decoder *d, const struct env_change **change);
void env_decoder_free(struct env_decoder *d);

/* Encoding: the caller writes the header, the relations, the change
 * count, then each change, with these primitives. */
struct env_header_fields {
	const char *source_id;
	uint32_t xid;
	uint64_t commit_lsn, end_lsn;
	int64_t commit_time_us;
	const char *origin; /* NULL = none */
	uint64_t origin_lsn;
};
void env_encode_header(struct buf *b, const struct env_header_fields *h);
void env_encode_relation(struct buf *b, uint32_t oid, const char *schema, const char *name, uint8_t replident,
			 uint16_t n_columns, const struct env_column *columns);
void env_encode_tuple_begin(struct buf *b, uint16_t n);
void env_encode_value(struct buf *b, uint8_t kind, const void *data, uint32_t len);

/* Print a decoded envelope as one JSON object's members (no braces):
 * "xid":..,"commit_lsn":"X/X",...,"changes":[...].  Returns -1 (with
 * the decoder's error) on malformed input. */
int env_write_json(FILE *out, const uint8_t *buf, size_t len, char *error, size_t error_len);

/* ---- the other frame payloads (all begin with u8 version 1) ----
 *
 * watermark:     u8 version, str source_id, u64 lsn, i64 time (µs, Unix)
 * ddl:           u8 version, str source_id, u32 xid, u64 commit_lsn,
 *                u64 message_lsn, str prefix, u32 length, bytes (the DDL
 *                evidence the event trigger emitted, JSON text)
 * chunk:         u32 chunk_index, then an envelope holding that chunk's
 *                changes (and every relation of the transaction)
 * manifest:      u8 version, str source_id, u32 xid, u64 commit_lsn,
 *                u64 end_lsn, i64 commit_time, u32 chunk_count,
 *                u64 total_changes, chunk_count x {u32 CRC-32C of the
 *                chunk's payload, u32 changes}, u32 n_tables,
 *                n_tables x str "schema.name"
 *                version 2 (the chunks are pending_chunk frames, listed
 *                by stream offset): chunk_count x {u64 stream offset,
 *                u32 CRC-32C, u32 changes in use (a prefix of the
 *                chunk's changes: a subtransaction abort may cut the
 *                rest)} instead
 * pending_chunk: u64 capture run, u32 sequence number (from 0 in each
 *                transaction of a run), then an envelope with commit_lsn,
 *                end_lsn and commit_time 0 (not known yet) holding the
 *                chunk's changes and the relations the transaction used
 *                so far
 * pending_abort: u8 version, str source_id, u32 xid, u64 capture run: the
 *                transaction's pending chunks of that run are never
 *                listed (it aborted, or was skipped or written whole)
 * commit_marker: u8 version, str source_id, u32 xid, u64 commit_lsn,
 *                u64 end_lsn, u32 chunk_count, u32 CRC-32C of the
 *                manifest's payload
 */

/* What identifies a frame's transaction or position; filled by
 * env_frame_summary for any frame type. */
struct env_frame_summary {
	const char *source_id; /* borrowed */
	size_t source_id_len;
	bool has_xid;
	uint32_t xid;
	uint64_t commit_lsn, end_lsn; /* txn, chunk, manifest, commit_marker, ddl (commit only) */
	uint64_t lsn;                 /* watermark, ddl message */
	uint32_t chunk_index, chunk_count;
	uint32_t manifest_crc;        /* commit_marker */
	uint64_t run;                 /* pending_chunk (chunk_index: its sequence number), pending_abort */
};
int env_frame_summary(int frame_type, const uint8_t *payload, size_t len, struct env_frame_summary *s,
		      char *error, size_t error_len);

struct env_manifest_chunk {
	uint32_t crc;
	uint32_t changes;
	uint64_t offset; /* version 2: the pending_chunk frame's stream offset */
};
#define ENV_MANIFEST_BY_OFFSET 2
void env_encode_watermark(struct buf *b, const char *source_id, uint64_t lsn, int64_t time_us);
void env_encode_ddl(struct buf *b, const char *source_id, uint32_t xid, uint64_t commit_lsn, uint64_t message_lsn,
		    const char *prefix, const uint8_t *content, uint32_t len);
void env_encode_manifest(struct buf *b, const struct env_header_fields *h, uint32_t chunk_count,
			 uint64_t total_changes, const struct env_manifest_chunk *chunks, uint32_t n_tables,
			 const char *const *tables);
/* The same, version 2: chunks listed by stream offset. */
void env_encode_manifest_by_offset(struct buf *b, const struct env_header_fields *h, uint32_t chunk_count,
				   uint64_t total_changes, const struct env_manifest_chunk *chunks, uint32_t n_tables,
				   const char *const *tables);
void env_encode_pending_abort(struct buf *b, const char *source_id, uint32_t xid, uint64_t run);
/* A pending_chunk's head (the envelope follows). */
void env_encode_pending_head(struct buf *b, uint64_t run, uint32_t seq);
#define ENV_PENDING_HEAD_SIZE 12
void env_encode_commit_marker(struct buf *b, const char *source_id, uint32_t xid, uint64_t commit_lsn,
			      uint64_t end_lsn, uint32_t chunk_count, uint32_t manifest_crc);

/* Decoded manifest (views borrowed from the payload, arrays owned). */
struct env_manifest {
	const char *source_id;
	size_t source_id_len;
	uint32_t xid;
	uint64_t commit_lsn, end_lsn;
	int64_t commit_time_us;
	uint32_t chunk_count;
	uint64_t total_changes;
	bool by_offset;                    /* version 2 */
	struct env_manifest_chunk *chunks; /* owned */
	uint32_t n_tables;
	const char **tables;   /* owned array of borrowed, unterminated names */
	uint16_t *table_lens;  /* owned */
};
int env_decode_manifest(const uint8_t *payload, size_t len, struct env_manifest *m, char *error,
			size_t error_len);
void env_manifest_free(struct env_manifest *m);

/* The length of the encoded change at p (avail bytes), given each
 * relation's column count: 1 with *len, 0 when incomplete, -1 malformed. */
int env_change_length(const uint8_t *p, size_t avail, const uint16_t *relation_columns, uint32_t n_relations,
		      size_t *len);

/* Print any frame's payload as JSON object members (no braces). */
int env_frame_write_json(FILE *out, int frame_type, const uint8_t *payload, size_t len, char *error,
			 size_t error_len);

#endif
