/*
 * stream_reader.c - sequential, tailing readers.  The publication rule
 * and the torn-tail/corruption rule are stated in stream.h.
 */
#include "stream_internal.h"

#include "trellara/fsutil.h"
#include "trellara/log.h"
#include "trellara/strbuf.h"
#include "trellara/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct stream_reader {
	struct stream_fs *fs;
	char *dir;            /* owned */
	uint64_t *bases;      /* owned: segment list as last seen */
	size_t n_bases;
	bool open_segment;
	size_t seg;           /* index into bases of the open segment */
	struct segment_file sf;
	bool sealed;
	uint64_t next_base;   /* when sealed */
	int idx_fd;           /* the open segment's index (last segment) */
	uint64_t published;   /* consistent index entries of the open segment */
	uint64_t idx_expect_pos;
	bool idx_header_ok;
	uint64_t pos;         /* byte position of the next frame */
	uint64_t next_offset;
	int inotify_fd;
	bool warned_torn;
	struct frame_buffer inflated; /* owned: the last compressed frame's payload */
};

static int refresh_segments(struct stream_reader *r)
{
	free(r->bases);
	return segment_list_fs(r->fs, r->dir, &r->bases, &r->n_bases);
}

static void close_segment(struct stream_reader *r)
{
	if (!r->open_segment)
		return;
	segment_file_close(&r->sf);
	if (r->idx_fd >= 0)
		r->fs->close(r->fs, r->idx_fd);
	r->idx_fd = -1;
	r->open_segment = false;
}

/* Read index entries appended since the last look. */
static int refresh_index(struct stream_reader *r)
{
	if (r->idx_fd < 0) {
		char *path = segment_path(r->dir, r->sf.base, ".idx");
		r->idx_fd = r->fs->open(r->fs, path, O_RDONLY | O_CLOEXEC, 0);
		free(path);
		if (r->idx_fd < 0)
			return 0; /* missing index: nothing published through it */
	}
	if (!r->idx_header_ok) {
		uint8_t header[INDEX_HEADER_SIZE];
		uint64_t base;
		if (r->fs->pread(r->fs, r->idx_fd, header, sizeof header, 0) != (ssize_t)sizeof header ||
		    !index_decode_header(header, &base) || base != r->sf.base)
			return 0;
		r->idx_header_ok = true;
	}
	uint8_t entries[256 * INDEX_ENTRY_SIZE];
	for (;;) {
		off_t at = (off_t)(INDEX_HEADER_SIZE + r->published * INDEX_ENTRY_SIZE);
		ssize_t n = r->fs->pread(r->fs, r->idx_fd, entries, sizeof entries, at);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_error("cannot read stream index of \"%s\": %m", r->sf.path);
			return -1;
		}
		size_t count = (size_t)n / INDEX_ENTRY_SIZE;
		size_t used = 0;
		for (; used < count; used++) {
			uint64_t pos;
			uint32_t size;
			if (!index_decode_entry(entries + used * INDEX_ENTRY_SIZE, &pos, &size) ||
			    pos != r->idx_expect_pos)
				break;
			r->idx_expect_pos = pos + size;
			r->published++;
		}
		if (used < count || count < 256)
			return 0;
	}
}

static int open_segment_at(struct stream_reader *r, size_t seg)
{
	close_segment(r);
	if (segment_file_open(&r->sf, r->fs, r->dir, r->bases[seg]) < 0)
		return STREAM_EIO;
	r->open_segment = true;
	r->seg = seg;
	r->sealed = seg + 1 < r->n_bases;
	r->next_base = r->sealed ? r->bases[seg + 1] : UINT64_MAX;
	r->idx_fd = -1;
	r->published = 0;
	r->idx_expect_pos = 0;
	r->idx_header_ok = false;
	r->pos = 0;
	r->next_offset = r->bases[seg];
	if (refresh_index(r) < 0)
		return STREAM_EIO;
	return STREAM_OK;
}

int stream_reader_open(const char *dir, struct stream_reader **reader)
{
	return stream_reader_open_fs(stream_fs_posix(), dir, reader);
}

int stream_reader_open_fs(struct stream_fs *fs, const char *dir, struct stream_reader **reader)
{
	char *segments = xasprintf("%s/segments", dir);
	struct stream_fs_stat st;
	if (fs->stat(fs, segments, &st) < 0 || !st.is_dir) {
		log_error("no stream at \"%s\": cannot open \"%s\": %s", dir, segments,
			  errno ? strerror(errno) : "not a directory");
		free(segments);
		return STREAM_EINVAL;
	}
	struct stream_reader *r = xcalloc(1, sizeof *r);
	r->fs = fs;
	r->dir = xstrdup(dir);
	r->idx_fd = -1;
	r->sf.fd = -1;
	/* tailing waits with inotify on the real file system only */
	r->inotify_fd = fs->is_posix ? inotify_init1(IN_NONBLOCK | IN_CLOEXEC) : -1;
	if (r->inotify_fd >= 0 &&
	    inotify_add_watch(r->inotify_fd, segments, IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_DELETE) < 0) {
		close(r->inotify_fd);
		r->inotify_fd = -1;
	}
	free(segments);
	if (refresh_segments(r) < 0) {
		stream_reader_close(r);
		return STREAM_EIO;
	}
	*reader = r;
	return stream_reader_seek(r, r->n_bases ? r->bases[0] : 0);
}

static int corrupt(struct stream_reader *r, const char *reason)
{
	log_error("stream segment \"%s\": %s at byte %llu (offset %llu), and valid frames follow",
		  r->sf.path, reason, (unsigned long long)r->pos, (unsigned long long)r->next_offset);
	char *dir = strbuf_shell_quote(r->dir);
	log_hint("run \"trellara stream inspect-local --dir %s\" to see the damage", dir);
	free(dir);
	return STREAM_ECORRUPT;
}

int stream_reader_next(struct stream_reader *r, struct stream_frame *frame)
{
	for (;;) {
		if (!r->open_segment) {
			if (refresh_segments(r) < 0)
				return STREAM_EIO;
			size_t seg = r->n_bases;
			for (size_t i = 0; i < r->n_bases; i++)
				if (r->bases[i] <= r->next_offset)
					seg = i;
			if (seg == r->n_bases)
				return STREAM_END;
			uint64_t want = r->next_offset;
			int rc = open_segment_at(r, seg);
			if (rc != STREAM_OK)
				return rc;
			if (want != r->next_offset)
				return stream_reader_seek(r, want) == STREAM_OK ? stream_reader_next(r, frame)
										: STREAM_EIO;
		}
		uint64_t limit = r->sealed ? r->next_base : r->sf.base + r->published;
		if (!r->sealed && r->next_offset >= limit) {
			if (refresh_index(r) < 0)
				return STREAM_EIO;
			if (refresh_segments(r) < 0)
				return STREAM_EIO;
			/* The open segment is sealed once a later one exists.
			 * Look it up by base: retention may have removed the
			 * segments before it (its index in the list moved), or
			 * the open one itself once every group had passed it
			 * (its frames stay readable through our descriptor). */
			for (size_t k = 0; k < r->n_bases; k++)
				if (r->bases[k] > r->sf.base) {
					r->seg = k > 0 && r->bases[k - 1] == r->sf.base ? k - 1 : k;
					r->sealed = true;
					r->next_base = r->bases[k];
					break;
				}
			limit = r->sealed ? r->next_base : r->sf.base + r->published;
		}
		if (r->sealed && r->next_offset >= r->next_base) {
			uint64_t want = r->next_offset;
			close_segment(r);
			r->next_offset = want;
			continue;
		}
		struct frame_header h;
		const uint8_t *payload;
		const char *reason = "invalid frame";
		enum frame_check fc = segment_file_frame(&r->sf, r->pos, r->next_offset, &h, &payload, &reason);
		bool published = r->next_offset < limit;
		if (fc == FRAME_VALID && !published) {
			/* Past the index of the last segment: a frame not yet
			 * acknowledged, unless its writer is gone. */
			if (stream_writer_active_fs(r->fs, r->dir))
				return STREAM_END;
			if (sfs_fdatasync(r->fs, r->sf.fd, r->sf.path) < 0)
				return STREAM_EIO;
		}
		if (fc == FRAME_VALID) {
			/* The CRC checked the bytes on disk; a compressed payload
			 * that does not inflate was written that way: corruption
			 * before the tail whatever follows it. */
			uint32_t stored_length = h.payload_length;
			const char *bad = frame_payload_decode(&h, payload, &r->inflated, &frame->payload,
							       &frame->compressed);
			if (bad) {
				log_error("stream segment \"%s\": frame at byte %llu (offset %llu): %s", r->sf.path,
					  (unsigned long long)r->pos, (unsigned long long)r->next_offset, bad);
				char *dir = strbuf_shell_quote(r->dir);
				log_hint("run \"trellara stream inspect-local --dir %s\" to see the damage", dir);
				free(dir);
				return STREAM_ECORRUPT;
			}
			frame->header = h;
			frame->stored_length = stored_length;
			frame->segment = r->sf.path;
			frame->position = r->pos;
			r->pos += FRAME_HEADER_SIZE + stored_length;
			r->next_offset++;
			return STREAM_OK;
		}
		if (r->sealed)
			return corrupt(r, fc == FRAME_ZERO ? "zeroed bytes where a frame belongs" : reason);
		if (!published && (fc == FRAME_ZERO || stream_writer_active_fs(r->fs, r->dir)))
			return STREAM_END;
		bool found = false;
		uint64_t found_pos;
		if (segment_file_find_valid_after(&r->sf, r->pos, r->next_offset, &found, &found_pos) < 0)
			return STREAM_EIO;
		if (found && !published && r->idx_header_ok) {
			/* past the index: never acknowledged, so a torn tail
			 * whatever follows (a crash may have written the
			 * batch's pages in any order); the next writer cuts it */
			if (!r->warned_torn) {
				log_warn("stream segment \"%s\": frame at offset %llu (byte %llu) past the index is damaged (%s) and valid frames follow: unacknowledged frames written out of order, treated as a torn tail",
					 r->sf.path, (unsigned long long)r->next_offset, (unsigned long long)r->pos, reason);
				r->warned_torn = true;
			}
			return STREAM_END;
		}
		if (found)
			return corrupt(r, fc == FRAME_ZERO ? "zeroed bytes where a frame belongs" : reason);
		if (published && !r->warned_torn) {
			log_warn("stream segment \"%s\": indexed frame at offset %llu (byte %llu) is damaged (%s) and nothing valid follows: treating it as a torn tail",
				 r->sf.path, (unsigned long long)r->next_offset, (unsigned long long)r->pos, reason);
			r->warned_torn = true;
		}
		return STREAM_END;
	}
}

int stream_reader_seek(struct stream_reader *r, uint64_t offset)
{
	if (refresh_segments(r) < 0)
		return STREAM_EIO;
	close_segment(r);
	if (r->n_bases == 0 || offset < r->bases[0]) {
		if (r->n_bases == 0 && offset == 0) {
			r->next_offset = 0;
			return STREAM_OK;
		}
		if (r->n_bases == 0) {
			log_error("offset %llu is beyond the end of the empty stream \"%s\"", (unsigned long long)offset,
				  r->dir);
			return STREAM_ERANGE;
		}
		log_error("offset %llu of stream \"%s\" was removed by retention (first retained offset %llu)",
			  (unsigned long long)offset, r->dir, (unsigned long long)r->bases[0]);
		return STREAM_ERANGE;
	}
	size_t seg = 0;
	for (size_t i = 0; i < r->n_bases; i++)
		if (r->bases[i] <= offset)
			seg = i;
	int rc = open_segment_at(r, seg);
	if (rc != STREAM_OK)
		return rc;
	/* Jump with the index where it covers the offset, then walk. */
	struct index_view view;
	if (index_view_load(r->fs, r->dir, r->sf.base, &view) < 0)
		return STREAM_EIO;
	uint64_t k = offset - r->sf.base;
	uint64_t start = view.n ? (k < view.n ? k : view.n - 1) : 0;
	if (view.n) {
		struct frame_header h;
		const uint8_t *payload;
		const char *reason;
		while (start > 0 && segment_file_frame(&r->sf, view.positions[start], r->sf.base + start, &h, &payload,
						       &reason) != FRAME_VALID)
			start /= 2;
		r->pos = view.positions[start];
		r->next_offset = r->sf.base + start;
	}
	index_view_free(&view);
	while (r->next_offset < offset) {
		struct stream_frame f;
		rc = stream_reader_next(r, &f);
		if (rc == STREAM_END) {
			log_error("offset %llu is beyond the end of stream \"%s\" (next offset %llu)",
				  (unsigned long long)offset, r->dir, (unsigned long long)r->next_offset);
			return STREAM_ERANGE;
		}
		if (rc != STREAM_OK)
			return rc;
	}
	return STREAM_OK;
}

int stream_reader_wait(struct stream_reader *r, int timeout_ms)
{
	if (!r->fs->is_posix)
		return STREAM_OK; /* a simulation never sleeps */
	if (r->inotify_fd < 0) {
		int ms = timeout_ms < 100 ? timeout_ms : 100;
		struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
		nanosleep(&ts, NULL);
		return STREAM_OK;
	}
	struct pollfd pfd = { .fd = r->inotify_fd, .events = POLLIN };
	int n = poll(&pfd, 1, timeout_ms);
	if (n > 0) {
		char buf[4096];
		while (read(r->inotify_fd, buf, sizeof buf) > 0)
			;
	}
	return STREAM_OK;
}

uint64_t stream_reader_position(const struct stream_reader *r)
{
	return r->next_offset;
}

void stream_reader_close(struct stream_reader *r)
{
	if (!r)
		return;
	close_segment(r);
	if (r->inotify_fd >= 0)
		close(r->inotify_fd);
	free(r->bases);
	free(r->dir);
	frame_buffer_free(&r->inflated);
	free(r);
}
