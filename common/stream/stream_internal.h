/*
 * stream_internal.h - what the stream modules share and nobody else
 * uses: segment naming and listing, big-endian helpers, the frame scanner
 * and the index loader.
 */
#ifndef TRELLARA_STREAM_INTERNAL_H
#define TRELLARA_STREAM_INTERNAL_H

#include "trellara/stream.h"
#include "trellara/stream_fs.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SEGMENT_NAME_DIGITS 20

static inline void put_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}
static inline void put_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}
static inline void put_u64(uint8_t *p, uint64_t v)
{
	put_u32(p, (uint32_t)(v >> 32));
	put_u32(p + 4, (uint32_t)v);
}
static inline uint16_t get_u16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}
static inline uint32_t get_u32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline uint64_t get_u64(const uint8_t *p)
{
	return ((uint64_t)get_u32(p) << 32) | get_u32(p + 4);
}

/* "<dir>/segments/<base 20 digits>.log" / ".idx"; newly allocated. */
char *segment_path(const char *dir, uint64_t base, const char *suffix);
/* Sorted base offsets of every "<20 digits>.log" in <dir>/segments.
 * Returns 0 (a missing directory is an empty list) or -1 (logged). */
int segment_list(const char *dir, uint64_t **bases, size_t *n);
int segment_list_fs(struct stream_fs *fs, const char *dir, uint64_t **bases, size_t *n);

/* Outcome of reading one frame at a position. */
enum frame_check {
	FRAME_VALID = 0,
	FRAME_ZERO,     /* zero magic: clean end of the written area */
	FRAME_SHORT,    /* the file ends inside the frame */
	FRAME_INVALID   /* bad header, bad CRC or wrong offset */
};

/* Positioned reads of one segment file through a buffer. */
struct segment_file {
	struct stream_fs *fs;
	int fd;
	char *path;        /* owned */
	uint64_t base;
	uint64_t size;     /* file size when last checked */
	uint8_t *buf;      /* owned read buffer */
	size_t buf_cap;
	uint64_t buf_pos;  /* file position of buf[0] */
	size_t buf_len;
};

int segment_file_open(struct segment_file *sf, struct stream_fs *fs, const char *dir, uint64_t base);
/* The same for any file of frames at path (owned by sf from now on,
 * freed even when the open fails); base: the offset of its first frame,
 * when known. */
int segment_file_open_path(struct segment_file *sf, struct stream_fs *fs, char *path, uint64_t base);
void segment_file_close(struct segment_file *sf);
int segment_file_refresh_size(struct segment_file *sf);
/* Reads and checks the frame at pos, expecting offset expected_offset
 * (UINT64_MAX: any).  On FRAME_VALID fills h and *payload (borrowed
 * from the buffer until the next call).  reason: static text. */
enum frame_check segment_file_frame(struct segment_file *sf, uint64_t pos, uint64_t expected_offset,
				    struct frame_header *h, const uint8_t **payload,
				    const char **reason);
/* The frame at pos whatever its CRC (inspection): FRAME_VALID when its
 * header decodes and the file holds all of it, with *crc_ok and *stored
 * (its payload as on disk, borrowed until the next call); else as
 * segment_file_frame, the frame's offset not checked. */
enum frame_check segment_file_frame_stored(struct segment_file *sf, uint64_t pos, struct frame_header *h,
					   const uint8_t **stored, bool *crc_ok, const char **reason);
/* Looks for any valid frame with offset > after_offset starting at or
 * after pos.  Sets *found_pos.  Returns -1 on I/O error. */
int segment_file_find_valid_after(struct segment_file *sf, uint64_t pos, uint64_t after_offset,
				  bool *found, uint64_t *found_pos);
/* Position just past the last non-zero byte at or after pos. */
int segment_file_last_nonzero(struct segment_file *sf, uint64_t pos, uint64_t *end);

/* A segment's index as read from disk, every entry CRC-checked and
 * chained (entry i+1 starts where entry i ends).  Entries past the first
 * inconsistency are not counted. */
struct index_view {
	bool present;
	bool header_ok;
	uint64_t *positions; /* owned */
	uint32_t *sizes;     /* owned */
	uint64_t n;          /* consistent entries */
	uint64_t n_raw;      /* entries the file size allows */
	bool bad_entry;      /* an entry failed its CRC or chain before n_raw */
};
int index_view_load(struct stream_fs *fs, const char *dir, uint64_t base, struct index_view *view);
void index_view_free(struct index_view *view);

/* Probe whether a writer holds <dir>/writer.lock (takes and drops a
 * shared lock; never blocks). */
bool stream_writer_active(const char *dir);
bool stream_writer_active_fs(struct stream_fs *fs, const char *dir);

/* The byte position up to which a segment's index proves its frames
 * acknowledged: the end of the last consistent entry (an entry is written
 * only after its frame's fdatasync).  UINT64_MAX - "everything" - when
 * the index is missing or its header is bad: without the record nothing
 * may be called unacknowledged. */
uint64_t index_view_acked_end(const struct index_view *view);

/* Scan a whole segment from the start: frames that validate in order,
 * where the valid data ends, torn bytes after it, and corruption.
 * For the last segment (limit_frames UINT64_MAX) an invalid frame at or
 * after acked_end is a torn tail even when valid frames follow it: those
 * bytes were never acknowledged and a crash may have written them in any
 * order.  An invalid frame before acked_end with a valid frame after it,
 * or any invalid frame in a sealed segment, is corruption. */
struct segment_scan {
	uint64_t frames;
	uint64_t end_position;   /* byte after the last valid frame */
	uint64_t torn_bytes;
	bool torn_out_of_order;  /* valid frames follow in the torn tail */
	bool corrupt;
	uint64_t corrupt_position;
	const char *corrupt_reason;
	uint64_t *positions;     /* owned: frame positions (for index rebuild) */
	uint32_t *sizes;         /* owned */
};
int segment_scan_all(struct segment_file *sf, uint64_t limit_frames, uint64_t acked_end,
		     struct segment_scan *scan);
void segment_scan_free(struct segment_scan *scan);

#endif
