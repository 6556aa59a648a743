/*
 * frame_walk.c - the inspection walk (frame_walk.h): frames as on disk,
 * a checksum mismatch handed out and marked instead of ending the read.
 */
#include "stream_internal.h"

#include "trellara/checksum.h"
#include "trellara/frame_walk.h"
#include "trellara/log.h"
#include "trellara/xalloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct frame_walk {
	struct stream_fs *fs;
	char *dir;              /* owned; NULL: a frame file */
	bool is_file;
	uint64_t *bases;        /* owned: the stream's segments */
	size_t n_bases;
	bool open;
	size_t seg;             /* index into bases of the open segment */
	struct segment_file sf;
	uint64_t pos;           /* byte position of the next frame */
	uint64_t next_offset;   /* the offset the next frame has (a stream) */
	bool ended;
	struct frame_buffer inflated; /* owned */
};

static bool is_last(const struct frame_walk *w)
{
	return w->is_file || w->seg + 1 >= w->n_bases;
}

static int open_segment(struct frame_walk *w, size_t seg)
{
	if (w->open)
		segment_file_close(&w->sf);
	w->open = false;
	if (segment_file_open(&w->sf, w->fs, w->dir, w->bases[seg]) < 0)
		return STREAM_EIO;
	w->open = true;
	w->seg = seg;
	w->pos = 0;
	w->next_offset = w->bases[seg];
	return STREAM_OK;
}

int frame_walk_open_stream(const char *dir, struct frame_walk **walk)
{
	struct frame_walk *w = xcalloc(1, sizeof *w);
	w->fs = stream_fs_posix();
	w->dir = xstrdup(dir);
	w->sf.fd = -1;
	int rc = STREAM_OK;
	char *segments = xasprintf("%s/segments", dir);
	struct stat st;
	if (stat(segments, &st) < 0 || !S_ISDIR(st.st_mode)) {
		log_error("no stream at \"%s\": cannot open \"%s\": %s", dir, segments,
			  errno ? strerror(errno) : "not a directory");
		rc = STREAM_EINVAL;
		goto out;
	}
	if (segment_list_fs(w->fs, dir, &w->bases, &w->n_bases) < 0) {
		rc = STREAM_EIO;
		goto out;
	}
	if (w->n_bases == 0)
		w->ended = true;
	else
		rc = open_segment(w, 0);
out:
	free(segments);
	if (rc != STREAM_OK) {
		frame_walk_close(w);
		w = NULL;
	}
	*walk = w;
	return rc;
}

int frame_walk_open_file(const char *path, struct frame_walk **walk)
{
	struct stat st;
	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode)) {
		log_error("cannot read frame file \"%s\": %s", path, errno ? strerror(errno) : "not a regular file");
		*walk = NULL;
		return STREAM_EINVAL;
	}
	struct frame_walk *w = xcalloc(1, sizeof *w);
	w->fs = stream_fs_posix();
	w->is_file = true;
	if (segment_file_open_path(&w->sf, w->fs, xstrdup(path), 0) < 0) {
		free(w);
		*walk = NULL;
		return STREAM_EIO;
	}
	w->open = true;
	*walk = w;
	return STREAM_OK;
}

int frame_walk_seek(struct frame_walk *w, uint64_t offset)
{
	if (w->is_file || w->n_bases == 0 || offset < w->bases[0]) {
		if (w->is_file)
			log_error("frame file \"%s\": no seeking by offset", w->sf.path);
		else
			log_error("offset %llu is not in stream \"%s\" (first retained offset %llu)",
				  (unsigned long long)offset, w->dir,
				  (unsigned long long)(w->n_bases ? w->bases[0] : 0));
		return STREAM_ERANGE;
	}
	size_t seg = 0;
	for (size_t i = 0; i < w->n_bases; i++)
		if (w->bases[i] <= offset)
			seg = i;
	w->ended = false;
	if (!w->open || w->seg != seg || w->next_offset > offset) {
		int rc = open_segment(w, seg);
		if (rc != STREAM_OK)
			return rc;
		/* jump with the index where it has the offset's entry and the
		 * frame there says it is that offset; else walk */
		struct index_view view;
		if (index_view_load(w->fs, w->dir, w->sf.base, &view) < 0)
			return STREAM_EIO;
		uint64_t k = offset - w->sf.base;
		if (k < view.n) {
			struct frame_header h;
			const uint8_t *stored;
			bool crc_ok;
			const char *reason;
			if (segment_file_frame_stored(&w->sf, view.positions[k], &h, &stored, &crc_ok, &reason) ==
				    FRAME_VALID &&
			    h.offset == offset) {
				w->pos = view.positions[k];
				w->next_offset = offset;
			}
		}
		index_view_free(&view);
	}
	while (w->next_offset < offset) {
		struct walked_frame f;
		int rc = frame_walk_next(w, &f);
		if (rc == STREAM_END) {
			log_error("offset %llu is beyond the end of stream \"%s\" (next offset %llu)",
				  (unsigned long long)offset, w->dir, (unsigned long long)w->next_offset);
			return STREAM_ERANGE;
		}
		if (rc != STREAM_OK)
			return rc;
	}
	return STREAM_OK;
}

/* An invalid frame at w->pos: the end of the log (a torn tail: the last
 * segment, nothing valid after it; zeros in a frame file), or corruption. */
static int invalid_frame(struct frame_walk *w, enum frame_check fc, const char *reason)
{
	if (w->is_file) {
		if (fc == FRAME_ZERO) {
			w->ended = true;
			return STREAM_END;
		}
		log_error("frame file \"%s\": %s at byte %llu", w->sf.path, reason, (unsigned long long)w->pos);
		return STREAM_ECORRUPT;
	}
	bool found = false;
	uint64_t found_pos = 0;
	if (segment_file_find_valid_after(&w->sf, w->pos, w->next_offset, &found, &found_pos) < 0)
		return STREAM_EIO;
	if (is_last(w) && !found) {
		w->ended = true;
		return STREAM_END;
	}
	/* in a sealed segment every frame up to the next base must be valid */
	log_error("stream segment \"%s\": %s at byte %llu (offset %llu), and valid frames follow", w->sf.path,
		  fc == FRAME_ZERO ? "zeroed bytes where a frame belongs" : reason, (unsigned long long)w->pos,
		  (unsigned long long)w->next_offset);
	return STREAM_ECORRUPT;
}

int frame_walk_next(struct frame_walk *w, struct walked_frame *f)
{
	for (;;) {
		if (w->ended || !w->open)
			return STREAM_END;
		if (!w->is_file && w->seg + 1 < w->n_bases && w->next_offset >= w->bases[w->seg + 1]) {
			int rc = open_segment(w, w->seg + 1);
			if (rc != STREAM_OK)
				return rc;
			continue;
		}
		struct frame_header h;
		const uint8_t *stored = NULL;
		bool crc_ok = false;
		const char *reason = "invalid frame";
		enum frame_check fc = segment_file_frame_stored(&w->sf, w->pos, &h, &stored, &crc_ok, &reason);
		if (fc == FRAME_VALID && !crc_ok && !w->is_file) {
			/* a mismatch with nothing valid after it is a torn tail */
			bool found = false;
			uint64_t found_pos = 0;
			if (segment_file_find_valid_after(&w->sf, w->pos, w->next_offset, &found, &found_pos) < 0)
				return STREAM_EIO;
			if (!found && is_last(w)) {
				w->ended = true;
				return STREAM_END;
			}
			/* the segment was read again: the frame's bytes may have moved */
			fc = segment_file_frame_stored(&w->sf, w->pos, &h, &stored, &crc_ok, &reason);
		}
		if (fc != FRAME_VALID) {
			return invalid_frame(w, fc, reason);
		}
		if (!w->is_file && crc_ok && h.offset != w->next_offset) {
			log_error("stream segment \"%s\": frame at byte %llu has offset %llu where %llu belongs", w->sf.path,
				  (unsigned long long)w->pos, (unsigned long long)h.offset,
				  (unsigned long long)w->next_offset);
			return STREAM_ECORRUPT;
		}
		memset(f, 0, sizeof *f);
		f->header = h;
		f->offset = w->is_file ? h.offset : w->next_offset;
		f->crc_ok = crc_ok;
		/* the header's bytes precede the payload in the read buffer */
		f->crc_found = crc_ok ? h.crc : crc32c(crc32c(0, stored - FRAME_HEADER_SIZE, 28), stored, h.payload_length);
		f->compressed = (h.flags & FRAME_FLAG_ZLIB) != 0;
		f->file = w->sf.path;
		f->position = w->pos;
		struct frame_header decoded = h;
		bool compressed;
		f->payload_error = frame_payload_decode(&decoded, stored, &w->inflated, &f->payload, &compressed);
		if (f->payload_error)
			f->payload = NULL;
		else
			f->payload_length = decoded.payload_length;
		w->pos += FRAME_HEADER_SIZE + (uint64_t)h.payload_length;
		w->next_offset++;
		return STREAM_OK;
	}
}

void frame_walk_close(struct frame_walk *w)
{
	if (!w)
		return;
	if (w->open)
		segment_file_close(&w->sf);
	free(w->bases);
	free(w->dir);
	frame_buffer_free(&w->inflated);
	free(w);
}
