/*
 * stream.h - the brokerless durable local stream (DESIGN §4,
 * man 5 trellara-stream).  Knows nothing of PostgreSQL.
 *
 * Layout of a stream directory (0700; every file 0600):
 *   meta                    identity: format_version, source_id, flow, ...
 *   segments/<base>.log     frames; <base> = first offset, 20 digits
 *   segments/<base>.idx     sidecar index, derived data
 *   groups/<name>           consumer group position (next offset to read)
 *   writer.lock             flock(LOCK_EX) of the single writer
 *
 * Frame (big-endian), FRAME_HEADER_SIZE bytes then the payload:
 *   0  u32 magic "TRLF"        16 i64 append time, µs since the Unix epoch
 *   4  u8  version (1)         24 u32 payload length (<= MAX_FRAME_PAYLOAD)
 *   5  u8  type                28 u32 CRC-32C of bytes 0..27 and the payload
 *   6  u16 flags               bit 15 (FRAME_FLAG_ZLIB): compressed payload
 *   8  u64 offset (dense, from 0)
 * A compressed payload is a u32 inflated length then a zlib stream; the
 * CRC covers the bytes on disk, and readers inflate after checking it.
 * Index: a 32-byte header (u32 magic "TRLI", u8 version, 3 zero bytes,
 * u64 base offset, 12 zero bytes, u32 CRC-32C of bytes 0..27), then one
 * 16-byte entry per frame in offset order: u64 byte position of the frame,
 * u32 frame size (header + payload), u32 CRC-32C of the entry's first 12
 * bytes.  An all-zero entry fails its CRC and so ends the index.
 *
 * Durability contract.  stream_writer_append() only queues a frame;
 * stream_writer_sync() writes every queued frame with one write, then one
 * fdatasync, and only then returns: every offset queued before it is
 * durable.  If it fails, nothing queued is acknowledged, the writer is
 * poisoned (an fsync failure is never retried) and must be closed; the
 * next writer's recovery decides what survived.
 *
 * The index differs from DESIGN §4 in one deliberate way: index entries
 * are written after the frames' fdatasync (so an entry always points at a
 * durable frame) but are themselves fdatasynced lazily: when a segment
 * is sealed, when the writer closes, and at most every
 * STREAM_INDEX_SYNC_INTERVAL batches.  The index is derived data: frames
 * are the truth, recovery checks every index entry against its frame and
 * rebuilds whatever did not survive, so a second fdatasync per batch would
 * cost a third of the append rate and buy no durability.
 *
 * Readers never modify anything.  They return only frames that are
 * published: in a sealed segment, covered by a valid index entry, or -
 * when no writer holds the lock - valid frames past the index (left by a
 * writer that died between its fdatasync and its index write; the reader
 * fdatasyncs them before handing them out, so a consumer never acts on a
 * frame a crash could still take away).
 *
 * Corruption.  In the active segment the index's last consistent entry
 * marks the acknowledged end (an entry is written only after its frame's
 * fdatasync; a missing index or bad header: the end of the file).  An
 * invalid frame before it followed by a valid one (or any invalid frame in
 * a sealed segment) is corruption: STREAM_ECORRUPT, logged with file and
 * byte position.  An invalid frame with nothing valid after it, or at or
 * after the acknowledged end whatever follows (a crash before a batch's
 * fdatasync may have put its pages on disk in any order), is a torn tail:
 * the end of the log; the next writer truncates it and says how many
 * bytes it cut.
 */
#ifndef TRELLARA_STREAM_H
#define TRELLARA_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Every function below works on the POSIX file system; the _fs variants
 * take another one (stream_fs.h: the simulated one in tests). */
struct stream_fs;

#define FRAME_MAGIC 0x54524C46U /* "TRLF" */
#define FRAME_VERSION 1
#define FRAME_HEADER_SIZE 32
#define INDEX_MAGIC 0x54524C49U /* "TRLI" */
#define INDEX_VERSION 1
#define INDEX_HEADER_SIZE 32
#define INDEX_ENTRY_SIZE 16
#define STREAM_FORMAT_VERSION 1
#define STREAM_INDEX_SYNC_INTERVAL 64

/* Flag bit 15 is the stream's own: the payload on disk is compressed.
 * The other 15 bits are the producer's, stored and returned untouched. */
#define FRAME_FLAG_ZLIB 0x8000U
#define FRAME_PRODUCER_FLAGS 0x7FFFU
/* A compressed payload: u32 length of the payload inflated, then a zlib
 * stream (RFC 1950) of it. */
#define FRAME_ZLIB_PREFIX 4
/* The writer compresses a payload of at least this many bytes, and keeps
 * the compressed form only when it is at most 7/8 of the payload. */
#define FRAME_COMPRESS_MIN_BYTES 512

/* stream.compression (trellara.yml(5)) */
enum stream_compression { STREAM_COMPRESSION_NONE = 0, STREAM_COMPRESSION_ZLIB };

enum frame_type {
	FRAME_TXN = 1,
	FRAME_CHUNK = 2,
	FRAME_MANIFEST = 3,
	FRAME_COMMIT_MARKER = 4,
	FRAME_WATERMARK = 5,
	FRAME_DDL = 6,
	FRAME_PENDING_CHUNK = 7,
	FRAME_PENDING_ABORT = 8
};
#define FRAME_TYPE_MAX 8

/* "txn", "chunk", ... or NULL for an unknown type. */
const char *frame_type_name(int type);
/* Returns the type for a name, or 0. */
int frame_type_from_name(const char *name);

enum stream_status {
	STREAM_OK = 0,
	STREAM_END,       /* no further published frame (yet) */
	STREAM_EIO,       /* a system call failed (logged) */
	STREAM_ENOSPC,    /* free space would fall below min_free_bytes */
	STREAM_ECORRUPT,  /* an invalid frame before the tail */
	STREAM_ELOCKED,   /* another writer holds the lock */
	STREAM_ERANGE,    /* offset removed by retention or not yet written */
	STREAM_EINVAL,    /* bad argument (too large a payload, bad name) */
	STREAM_EUNAVAILABLE /* a remote stream's servers cannot answer now (frame_source.h) */
};

struct frame_header {
	uint8_t version;
	uint8_t type;
	uint16_t flags;
	uint64_t offset;
	int64_t append_time_us;
	uint32_t payload_length;
	uint32_t crc;
};

/* Encode a header (computing the CRC over header and payload) into
 * out[FRAME_HEADER_SIZE]. */
void frame_encode_header(uint8_t *out, int type, uint16_t flags, uint64_t offset,
			 int64_t append_time_us, const void *payload, uint32_t payload_length);
/* Decode and check what a header alone can tell (magic, version, type,
 * length bound).  Returns false with a reason (static string) otherwise. */
bool frame_decode_header(const uint8_t *in, struct frame_header *h, const char **reason);
/* Check the CRC of a decoded header against its payload. */
bool frame_check_crc(const uint8_t *header_bytes, const void *payload, uint32_t payload_length);

/* A growing buffer the payload codec fills (the caller owns it), and the
 * zlib state it keeps between frames (setting one up per frame cost more
 * than deflating a small transaction). */
struct frame_buffer {
	uint8_t *data;  /* owned */
	size_t cap;
	void *deflater; /* owned: z_stream, or NULL */
	void *inflater; /* owned: z_stream, or NULL */
};
void frame_buffer_free(struct frame_buffer *buf);
/* Deflate payload into buf as a compressed payload (prefix included).
 * True with *stored_length when the rule above says it pays; false
 * (nothing to use) otherwise. */
bool frame_payload_compress(const void *payload, size_t length, struct frame_buffer *buf, size_t *stored_length);
/* The payload of a frame whose CRC checked: when h->flags has
 * FRAME_FLAG_ZLIB, inflates it into buf, refusing one that does not
 * inflate to exactly its recorded length (at most MAX_FRAME_PAYLOAD), and
 * rewrites h to describe the payload as returned (payload_length the
 * inflated length, the flag cleared); *compressed says which.  *payload
 * is stored itself or buf's data.  NULL, or a reason (static text). */
const char *frame_payload_decode(struct frame_header *h, const uint8_t *stored, struct frame_buffer *buf,
				 const uint8_t **payload, bool *compressed);

/* Index entry codec. */
void index_encode_entry(uint8_t *out, uint64_t position, uint32_t frame_size);
bool index_decode_entry(const uint8_t *in, uint64_t *position, uint32_t *frame_size);
void index_encode_header(uint8_t *out, uint64_t base_offset);
bool index_decode_header(const uint8_t *in, uint64_t *base_offset);

/* ---- stream identity ---- */

/* The binding of a stream: stream_id is random, made when the writer
 * creates the stream (or first opens one made before it existed) and
 * never changes, so a stream directory deleted and created again, or
 * replaced by another, has another id.  slot, timeline and start_lsn are
 * opaque text to this module: capture records which replication slot
 * the stream follows, the source's timeline, and the slot's confirmed
 * position when it bound the stream (where the stream's data begins). */
struct stream_meta {
	int format_version;
	char *source_id;          /* owned, may be NULL */
	char *flow;               /* owned, may be NULL */
	char *system_identifier;  /* owned, may be NULL until capture sets it */
	char *database;           /* owned, may be NULL */
	char *stream_id;          /* owned, may be NULL in a stream no writer opened since */
	char *slot;               /* owned, may be NULL until capture binds it */
	char *timeline;           /* owned, may be NULL */
	char *start_lsn;          /* owned, may be NULL */
};
int stream_meta_read(const char *dir, struct stream_meta *meta);   /* -1: logged */
int stream_meta_write(const char *dir, const struct stream_meta *meta); /* durable */
void stream_meta_free(struct stream_meta *meta);
/* A new random stream id (32 hex digits), newly allocated; NULL (logged)
 * when the system has no random bytes to give. */
char *stream_id_generate(void);
int stream_meta_read_fs(struct stream_fs *fs, const char *dir, struct stream_meta *meta);
int stream_meta_write_fs(struct stream_fs *fs, const char *dir, const struct stream_meta *meta);
char *stream_id_generate_fs(struct stream_fs *fs);

/* ---- writer ---- */

struct stream_writer_options {
	uint64_t segment_bytes;  /* preallocated size of a segment */
	uint64_t min_free_bytes; /* fail closed below this */
	const char *source_id;   /* written to meta when the stream is created */
	const char *flow;
	const char *fault_prefix; /* "stream" (default) or "capture": names the fault points */
	enum stream_compression compression; /* zlib: payloads compressed when it pays */
};

/* What recovery on open found and did. */
struct stream_recovery {
	uint64_t next_offset;      /* the offset the next frame gets */
	uint64_t truncated_bytes;  /* torn tail cut from the last segment */
	uint64_t index_rebuilt_entries;
	bool index_was_missing;
	bool index_was_corrupt;
};

struct stream_writer;

int stream_writer_open(const char *dir, const struct stream_writer_options *options,
		       struct stream_writer **writer, struct stream_recovery *recovery);
int stream_writer_open_fs(struct stream_fs *fs, const char *dir, const struct stream_writer_options *options,
			  struct stream_writer **writer, struct stream_recovery *recovery);
/* Queue one frame; *offset is the offset it will have.  Not durable.
 * flags: the producer's 15 bits (FRAME_FLAG_ZLIB set is STREAM_EINVAL). */
int stream_writer_append(struct stream_writer *writer, int type, uint16_t flags,
			 const void *payload, size_t length, uint64_t *offset);
/* Write and fdatasync everything queued; on STREAM_OK all queued offsets
 * are durable and published. */
int stream_writer_sync(struct stream_writer *writer);
size_t stream_writer_pending(const struct stream_writer *writer);
uint64_t stream_writer_next_offset(const struct stream_writer *writer);
/* Syncs the index, releases the lock.  Queued, unsynced frames are
 * dropped (never acknowledged). */
void stream_writer_close(struct stream_writer *writer);

/* Base offsets of the segments, oldest first (newly allocated). */
int stream_segment_bases(const char *dir, uint64_t **bases, size_t *n);
int stream_segment_bases_fs(struct stream_fs *fs, const char *dir, uint64_t **bases, size_t *n);

/* ---- reader ---- */

struct stream_frame {
	struct frame_header header; /* as returned: payload_length and flags of the inflated payload */
	const uint8_t *payload; /* borrowed: valid until the next reader call */
	bool compressed;        /* stored compressed (FRAME_FLAG_ZLIB) */
	uint32_t stored_length; /* payload bytes on disk */
	const char *segment;    /* borrowed: segment file name */
	uint64_t position;      /* byte position of the header in the segment */
};

struct stream_reader;

int stream_reader_open(const char *dir, struct stream_reader **reader);
int stream_reader_open_fs(struct stream_fs *fs, const char *dir, struct stream_reader **reader);
/* Position at offset (the next stream_reader_next returns it).  An offset
 * below the first retained one is STREAM_ERANGE. */
int stream_reader_seek(struct stream_reader *reader, uint64_t offset);
/* STREAM_OK with the frame, STREAM_END, or an error (logged). */
int stream_reader_next(struct stream_reader *reader, struct stream_frame *frame);
/* Wait up to timeout_ms for the stream to change (inotify; polls when
 * inotify is unavailable; returns at once on a non-POSIX stream_fs).
 * Returns STREAM_OK either way. */
int stream_reader_wait(struct stream_reader *reader, int timeout_ms);
uint64_t stream_reader_position(const struct stream_reader *reader);
void stream_reader_close(struct stream_reader *reader);

/* ---- consumer groups ---- */

bool stream_group_name_valid(const char *name);
/* *exists = false and *position = 0 when the group has no file yet. */
int stream_group_get(const char *dir, const char *group, uint64_t *position, bool *exists);
/* Durable atomic replace (tmp, fsync, rename, fsync dir). */
int stream_group_set(const char *dir, const char *group, uint64_t position);
int stream_group_get_fs(struct stream_fs *fs, const char *dir, const char *group, uint64_t *position,
			bool *exists);
int stream_group_set_fs(struct stream_fs *fs, const char *dir, const char *group, uint64_t position);

/* ---- inspection (never modifies) ---- */

enum index_state { INDEX_OK = 0, INDEX_MISSING, INDEX_STALE, INDEX_CORRUPT };
const char *stream_index_state_name(enum index_state state);

struct segment_report {
	char *name;               /* owned: "<base>.log" */
	uint64_t base_offset;
	uint64_t frames;          /* valid frames */
	uint64_t bytes;           /* valid bytes (headers + payloads) */
	uint64_t file_bytes;      /* size on disk, preallocation included */
	uint64_t torn_bytes;      /* non-zero bytes after the last valid frame */
	bool corrupt;             /* an invalid frame before a valid one */
	uint64_t corrupt_position;
	char *corrupt_reason;     /* owned */
	enum index_state index_state;
	uint64_t index_entries;   /* entries that validate */
	char *index_detail;       /* owned: what is wrong, what a writer would rebuild */
};

struct group_report {
	char *name;       /* owned */
	uint64_t position;
	bool exists;
	bool is_protected;
	uint64_t pending; /* frames from position to the end */
};

struct stream_report {
	struct stream_meta meta;
	struct segment_report *segments; /* owned */
	size_t n_segments;
	struct group_report *groups;     /* owned */
	size_t n_groups;
	bool empty;
	uint64_t first_offset;
	uint64_t next_offset;       /* last valid offset + 1 */
	uint64_t total_bytes;
	uint64_t torn_bytes;
	bool corrupt;
	bool writer_active;
};

int stream_inspect(const char *dir, const char *const *protected_groups, size_t n_protected,
		   struct stream_report *report);
int stream_inspect_fs(struct stream_fs *fs, const char *dir, const char *const *protected_groups,
		      size_t n_protected, struct stream_report *report);
void stream_report_free(struct stream_report *report);

/* ---- retention ---- */

struct retention_plan {
	char **segments;    /* owned: base names of segments to delete, oldest first */
	size_t n_segments;
	uint64_t bytes;
	uint64_t keep_from; /* min protected position */
	char *limited_by;   /* owned: the group holding it back, "active segment",
			     * or "no consumer group ..." */
};

/* With no protected group (n_protected == 0) the plan deletes nothing:
 * an unregistered consumer may still need every frame.  Only when the
 * caller says no consumer exists (allow_unprotected) may every sealed
 * segment go. */
int stream_retention_plan(const char *dir, const char *const *protected_groups,
			  size_t n_protected, bool allow_unprotected, struct retention_plan *plan);
int stream_retention_apply(const char *dir, const struct retention_plan *plan);
int stream_retention_plan_fs(struct stream_fs *fs, const char *dir, const char *const *protected_groups,
			     size_t n_protected, bool allow_unprotected, struct retention_plan *plan);
int stream_retention_apply_fs(struct stream_fs *fs, const char *dir, const struct retention_plan *plan);
void stream_retention_plan_free(struct retention_plan *plan);

#endif
