/*
 * frame_walk.h - a read-only walk over frames for inspection
 * (trellara-inspect-transaction(1)): the frames of a local stream
 * directory, or of one file holding frames in the on-disk framing (cut
 * from a segment).  Unlike stream_reader (stream.h), which stops at a
 * frame whose checksum does not match, the walk hands such a frame out,
 * marked, so that an inspector can name it: the frame's header says how
 * long it is, and the walk goes on after it.
 *
 * What it hands out.  Every frame on disk whose header decodes and whose
 * bytes are all there, in offset order, with crc_ok and, when the payload
 * decodes (a compressed one is inflated through frame_payload_decode, the
 * one codec), the payload as a reader sees it.  Frames are not checked
 * for publication (a frame a writer has written but not yet synced is
 * handed out too); nothing is ever modified or synced.
 *
 * Where it ends.  In a stream, as stream.h says of a torn tail: in the
 * last segment, an invalid frame (bad header, short, or a checksum that
 * does not match) with no valid frame after it is the end of the log,
 * not a finding.  A header that does not decode with valid frames after
 * it, or anywhere in a sealed segment, is STREAM_ECORRUPT (logged with
 * the file and byte): the walk cannot know where the next frame starts.
 * In a frame file every byte is meant: a header that does not decode or
 * a file that ends inside a frame is STREAM_ECORRUPT; zeros end it.
 */
#ifndef TRELLARA_FRAME_WALK_H
#define TRELLARA_FRAME_WALK_H

#include "trellara/stream.h"

#include <stdbool.h>
#include <stdint.h>

struct walked_frame {
	struct frame_header header; /* as on disk: flags with FRAME_FLAG_ZLIB, payload_length stored */
	uint64_t offset;            /* the offset it has in the stream (a frame file: its header's) */
	bool crc_ok;                /* the CRC-32C of header and stored payload matches */
	uint32_t crc_found;         /* that CRC-32C as computed (header.crc: as recorded) */
	bool compressed;            /* stored compressed (FRAME_FLAG_ZLIB) */
	const uint8_t *payload;     /* borrowed until the next call: the payload as decoded, or NULL */
	uint32_t payload_length;    /* of the decoded payload */
	const char *payload_error;  /* static: why payload is NULL */
	const char *file;           /* borrowed: the segment or frame file */
	uint64_t position;          /* byte position of its header in file */
};

struct frame_walk;

/* A local stream directory, from its first retained frame.  STREAM_OK or
 * an error (logged). */
int frame_walk_open_stream(const char *dir, struct frame_walk **walk);
/* A file of frames, from its first byte. */
int frame_walk_open_file(const char *path, struct frame_walk **walk);
/* Stream only: the next call to frame_walk_next returns offset
 * (STREAM_ERANGE, logged, when the stream does not hold it). */
int frame_walk_seek(struct frame_walk *walk, uint64_t offset);
/* STREAM_OK with the frame, STREAM_END, or STREAM_ECORRUPT / STREAM_EIO
 * (logged). */
int frame_walk_next(struct frame_walk *walk, struct walked_frame *frame);
void frame_walk_close(struct frame_walk *walk);

#endif
