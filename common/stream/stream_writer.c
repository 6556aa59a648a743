/*
 * stream_writer.c - the single writer: lock, recovery on open, group
 * commit, segment roll with preallocation.  The durability contract is
 * in stream.h; the fault points here are
 *   stream.mid_frame_write          half of a batch's first frame written
 *   stream.after_write_before_sync  a batch written, not yet fdatasynced
 *   stream.after_sync_before_index  a batch durable, its index entries not written
 * (the prefix is "capture." instead when trellara-capture is the writer,
 * DESIGN §11's capture.mid_frame_write)
 */
#include "stream_internal.h"

#include "trellara/defaults.h"
#include "trellara/fault.h"
#include "trellara/fsutil.h"
#include "trellara/log.h"
#include "trellara/strbuf.h"
#include "trellara/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct stream_writer {
	struct stream_fs *fs;
	char *dir;           /* owned */
	char *segments_dir;  /* owned */
	struct stream_writer_options options;
	int lock_fd;
	/* the active segment */
	uint64_t base;
	int log_fd;
	int idx_fd;
	char *log_path;      /* owned */
	char *idx_path;      /* owned */
	uint64_t write_pos;  /* byte after the last durable frame */
	uint64_t frames;     /* frames in the active segment */
	uint64_t next_offset;
	/* the batch being built */
	uint8_t *batch;      /* owned: encoded frames */
	size_t batch_len, batch_cap;
	uint32_t *batch_sizes; /* owned: size of each queued frame */
	size_t batch_frames, batch_frames_cap;
	struct frame_buffer deflated; /* owned: the compressed payload being queued */
	unsigned batches_since_index_sync;
	bool poisoned;       /* a write or fdatasync failed: never retry */
	char fault_mid_frame[64], fault_after_write[64], fault_after_sync[64];
};

static int acquire_lock(struct stream_writer *w)
{
	char *path = xasprintf("%s/writer.lock", w->dir);
	int rc = STREAM_EIO;
	w->lock_fd = w->fs->open(w->fs, path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (w->lock_fd < 0) {
		log_error("cannot open stream lock \"%s\": %m", path);
		goto out;
	}
	/* Readers probe with a momentary shared lock; wait those out. */
	for (int attempt = 0; attempt < 200; attempt++) {
		if (w->fs->flock(w->fs, w->lock_fd, LOCK_EX | LOCK_NB) == 0) {
			rc = STREAM_OK;
			goto out;
		}
		if (errno != EWOULDBLOCK) {
			log_error("cannot lock \"%s\": %m", path);
			goto out;
		}
		if (!w->fs->is_posix)
			break; /* nothing in a simulation waits */
		struct timespec pause = { 0, 10 * 1000 * 1000 };
		nanosleep(&pause, NULL);
	}
	log_error("stream \"%s\" is locked by another writer", w->dir);
	log_hint("only one writer may append to a stream; stop the other trellara-capture or trellara-stream append");
	rc = STREAM_ELOCKED;
out:
	free(path);
	return rc;
}

static int check_free_space(struct stream_writer *w, uint64_t needed)
{
	uint64_t free_bytes;
	if (w->fs->free_bytes(w->fs, w->segments_dir, &free_bytes) < 0) {
		log_error("cannot stat file system of \"%s\": %m", w->segments_dir);
		return STREAM_EIO;
	}
	if (free_bytes < needed || free_bytes - needed < w->options.min_free_bytes) {
		log_error("stream \"%s\": free space %llu bytes would fall below min_free_bytes %llu; refusing to write",
			  w->dir, (unsigned long long)free_bytes, (unsigned long long)w->options.min_free_bytes);
		/* with --dir and no --protect, retention protects every existing
		 * group and deletes nothing while there is none */
		char *dir = strbuf_shell_quote(w->dir);
		log_hint("free disk space, or delete only what every consumer group has read: \"trellara stream retention --dir %s --apply\"",
			 dir);
		free(dir);
		return STREAM_ENOSPC;
	}
	return STREAM_OK;
}

static void close_segment_fds(struct stream_writer *w)
{
	if (w->log_fd >= 0)
		w->fs->close(w->fs, w->log_fd);
	if (w->idx_fd >= 0)
		w->fs->close(w->fs, w->idx_fd);
	w->log_fd = w->idx_fd = -1;
	free(w->log_path);
	free(w->idx_path);
	w->log_path = w->idx_path = NULL;
}

static int open_segment_fds(struct stream_writer *w, uint64_t base, bool create)
{
	w->base = base;
	w->log_path = segment_path(w->dir, base, ".log");
	w->idx_path = segment_path(w->dir, base, ".idx");
	int flags = O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0);
	w->log_fd = w->fs->open(w->fs, w->log_path, flags, 0600);
	if (w->log_fd < 0) {
		log_error("cannot open stream segment \"%s\": %m", w->log_path);
		return STREAM_EIO;
	}
	w->idx_fd = w->fs->open(w->fs, w->idx_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (w->idx_fd < 0) {
		log_error("cannot open stream index \"%s\": %m", w->idx_path);
		return STREAM_EIO;
	}
	return STREAM_OK;
}

/* Create the segment whose first frame gets w->next_offset:
 * preallocated log, index with its header, both durable, directory
 * entry durable. */
static int create_segment(struct stream_writer *w, uint64_t min_bytes)
{
	uint64_t size = w->options.segment_bytes > min_bytes ? w->options.segment_bytes : min_bytes;
	int rc = check_free_space(w, size);
	if (rc != STREAM_OK)
		return rc;
	rc = open_segment_fds(w, w->next_offset, true);
	if (rc != STREAM_OK)
		return rc;
	if (w->fs->fallocate(w->fs, w->log_fd, 0, (off_t)size) < 0) {
		int err = errno;
		log_error("cannot preallocate %llu bytes for stream segment \"%s\": %s",
			  (unsigned long long)size, w->log_path, strerror(err));
		return err == ENOSPC ? STREAM_ENOSPC : STREAM_EIO;
	}
	uint8_t header[INDEX_HEADER_SIZE];
	index_encode_header(header, w->base);
	if (w->fs->ftruncate(w->fs, w->idx_fd, 0) < 0 ||
	    sfs_pwrite_all(w->fs, w->idx_fd, header, sizeof header, 0, w->idx_path) < 0)
		return STREAM_EIO;
	if (w->fs->fsync(w->fs, w->log_fd) < 0 || w->fs->fsync(w->fs, w->idx_fd) < 0) {
		log_error("cannot fsync new stream segment \"%s\": %m", w->log_path);
		return STREAM_EIO;
	}
	if (sfs_fsync_dir(w->fs, w->segments_dir) < 0)
		return STREAM_EIO;
	w->write_pos = 0;
	w->frames = 0;
	return STREAM_OK;
}

/* Rewrite a segment's index from frame positions (recovery). */
static int write_index(struct stream_writer *w, int fd, const char *path, uint64_t base,
		       const uint64_t *positions, const uint32_t *sizes, uint64_t n, uint64_t from)
{
	uint8_t header[INDEX_HEADER_SIZE];
	index_encode_header(header, base);
	if (from == 0 && sfs_pwrite_all(w->fs, fd, header, sizeof header, 0, path) < 0)
		return STREAM_EIO;
	size_t len = (size_t)(n - from) * INDEX_ENTRY_SIZE;
	uint8_t *entries = xmalloc(len ? len : 1);
	for (uint64_t i = from; i < n; i++)
		index_encode_entry(entries + (i - from) * INDEX_ENTRY_SIZE, positions[i], sizes[i]);
	off_t at = (off_t)(INDEX_HEADER_SIZE + from * INDEX_ENTRY_SIZE);
	int rc = STREAM_OK;
	if (sfs_pwrite_all(w->fs, fd, entries, len, at, path) < 0 ||
	    w->fs->ftruncate(w->fs, fd, at + (off_t)len) < 0 || sfs_fdatasync(w->fs, fd, path) < 0)
		rc = STREAM_EIO;
	free(entries);
	return rc;
}

/* Check a segment's index against its frames and rebuild what does not
 * match.  expected: the frame count for a sealed segment, UINT64_MAX for
 * the last one. */
static int recover_segment(struct stream_writer *w, uint64_t base, uint64_t expected, bool last,
			   struct stream_recovery *rec, uint64_t *frames_out, uint64_t *end_out)
{
	struct segment_file sf = { .fd = -1 };
	struct segment_scan scan = { 0 };
	struct index_view view = { 0 };
	int rc = STREAM_EIO;
	if (segment_file_open(&sf, w->fs, w->dir, base) < 0)
		goto out;
	if (index_view_load(w->fs, w->dir, base, &view) < 0)
		goto out;
	/* Frames are the truth: scan them all (recovery is rare; a sealed
	 * segment whose index is complete and consistent is trusted after
	 * checking its last entry). */
	if (!last && view.header_ok && view.n == expected && !view.bad_entry && view.n > 0) {
		struct frame_header h;
		const uint8_t *payload;
		const char *reason;
		if (segment_file_frame(&sf, view.positions[view.n - 1], base + view.n - 1, &h, &payload,
				       &reason) == FRAME_VALID) {
			*frames_out = view.n;
			*end_out = view.positions[view.n - 1] + view.sizes[view.n - 1];
			rc = STREAM_OK;
			goto out;
		}
	}
	if (segment_scan_all(&sf, expected, index_view_acked_end(&view), &scan) < 0)
		goto out;
	if (scan.corrupt) {
		log_error("stream segment \"%s\": %s at byte %llu, and valid frames follow: the stream is corrupt",
			  sf.path, scan.corrupt_reason, (unsigned long long)scan.corrupt_position);
		char *dir = strbuf_shell_quote(w->dir);
		log_hint("run \"trellara stream inspect-local --dir %s\"; the writer will not truncate valid frames", dir);
		free(dir);
		rc = STREAM_ECORRUPT;
		goto out;
	}
	/* Is the index already right? */
	bool index_ok = view.header_ok && !view.bad_entry && view.n == scan.frames;
	for (uint64_t i = 0; index_ok && i < view.n; i++)
		index_ok = view.positions[i] == scan.positions[i] && view.sizes[i] == scan.sizes[i];
	if (!index_ok) {
		if (!view.present)
			rec->index_was_missing = true;
		else if (!view.header_ok || view.bad_entry || view.n > scan.frames)
			rec->index_was_corrupt = true;
		char *idx_path = segment_path(w->dir, base, ".idx");
		int fd = w->fs->open(w->fs, idx_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0) {
			log_error("cannot open stream index \"%s\": %m", idx_path);
			free(idx_path);
			goto out;
		}
		/* keep the consistent prefix, rewrite the rest */
		uint64_t keep = 0;
		if (view.header_ok)
			while (keep < view.n && keep < scan.frames && view.positions[keep] == scan.positions[keep] &&
			       view.sizes[keep] == scan.sizes[keep])
				keep++;
		int wrc = write_index(w, fd, idx_path, base, scan.positions, scan.sizes, scan.frames, keep);
		w->fs->close(w->fs, fd);
		if (wrc == STREAM_OK)
			log_warn("stream index \"%s\" rebuilt from frames: %llu entries kept, %llu written", idx_path,
				 (unsigned long long)keep, (unsigned long long)(scan.frames - keep));
		free(idx_path);
		if (wrc != STREAM_OK)
			goto out;
		rec->index_rebuilt_entries += scan.frames - keep;
	}
	if (last && scan.torn_bytes > 0) {
		/* Cut the torn tail: zero it (the segment stays preallocated). */
		int fd = w->fs->open(w->fs, sf.path, O_RDWR | O_CLOEXEC, 0);
		if (fd < 0) {
			log_error("cannot open stream segment \"%s\": %m", sf.path);
			goto out;
		}
		uint64_t size = sf.size;
		if (w->fs->ftruncate(w->fs, fd, (off_t)scan.end_position) < 0) {
			log_error("cannot truncate torn tail of stream segment \"%s\": %m", sf.path);
			w->fs->close(w->fs, fd);
			goto out;
		}
		if (w->fs->fallocate(w->fs, fd, 0, (off_t)size) < 0) {
			log_error("cannot preallocate %llu bytes again for stream segment \"%s\" after cutting its torn tail: %m",
				  (unsigned long long)size, sf.path);
			w->fs->close(w->fs, fd);
			goto out;
		}
		int synced = sfs_fdatasync(w->fs, fd, sf.path);
		w->fs->close(w->fs, fd);
		if (synced < 0)
			goto out;
		log_warn("stream segment \"%s\": truncated %llu torn bytes after byte %llu (offset %llu)%s", sf.path,
			 (unsigned long long)scan.torn_bytes, (unsigned long long)scan.end_position,
			 (unsigned long long)(base + scan.frames),
			 scan.torn_out_of_order ? ": unacknowledged frames past the last indexed one, written out of order by a crash"
						: "");
		rec->truncated_bytes += scan.torn_bytes;
	} else if (last) {
		/* frames a killed writer wrote but may not have synced */
		int fd = w->fs->open(w->fs, sf.path, O_RDWR | O_CLOEXEC, 0);
		if (fd < 0 || sfs_fdatasync(w->fs, fd, sf.path) < 0) {
			if (fd >= 0)
				w->fs->close(w->fs, fd);
			goto out;
		}
		w->fs->close(w->fs, fd);
	}
	*frames_out = scan.frames;
	*end_out = scan.end_position;
	rc = STREAM_OK;
out:
	segment_scan_free(&scan);
	index_view_free(&view);
	segment_file_close(&sf);
	return rc;
}

static int recover(struct stream_writer *w, struct stream_recovery *rec)
{
	uint64_t *bases = NULL;
	size_t n = 0;
	int rc = STREAM_EIO;
	if (segment_list_fs(w->fs, w->dir, &bases, &n) < 0)
		goto out;
	if (n == 0) {
		w->next_offset = 0;
		rc = create_segment(w, 0);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		bool last = i + 1 == n;
		uint64_t expected = last ? UINT64_MAX : bases[i + 1] - bases[i];
		uint64_t frames = 0, end = 0;
		rc = recover_segment(w, bases[i], expected, last, rec, &frames, &end);
		if (rc != STREAM_OK)
			goto out;
		if (last) {
			w->next_offset = bases[i] + frames;
			rc = open_segment_fds(w, bases[i], false);
			if (rc != STREAM_OK)
				goto out;
			w->write_pos = end;
			w->frames = frames;
		}
	}
	rc = STREAM_OK;
out:
	free(bases);
	return rc;
}

int stream_writer_open(const char *dir, const struct stream_writer_options *options,
		       struct stream_writer **writer, struct stream_recovery *recovery)
{
	return stream_writer_open_fs(stream_fs_posix(), dir, options, writer, recovery);
}

int stream_writer_open_fs(struct stream_fs *fs, const char *dir, const struct stream_writer_options *options,
			  struct stream_writer **writer, struct stream_recovery *recovery)
{
	struct stream_writer *w = xcalloc(1, sizeof *w);
	w->fs = fs;
	struct stream_recovery rec_local;
	struct stream_recovery *rec = recovery ? recovery : &rec_local;
	memset(rec, 0, sizeof *rec);
	w->dir = xstrdup(dir);
	w->segments_dir = xasprintf("%s/segments", dir);
	w->options = *options;
	if (w->options.segment_bytes < MIN_SEGMENT_BYTES)
		w->options.segment_bytes = MIN_SEGMENT_BYTES;
	w->options.source_id = w->options.flow = NULL; /* not owned: only used below */
	snprintf(w->fault_mid_frame, sizeof w->fault_mid_frame, "%s.mid_frame_write",
		 options->fault_prefix ? options->fault_prefix : "stream");
	snprintf(w->fault_after_write, sizeof w->fault_after_write, "%s.after_write_before_sync",
		 options->fault_prefix ? options->fault_prefix : "stream");
	snprintf(w->fault_after_sync, sizeof w->fault_after_sync, "%s.after_sync_before_index",
		 options->fault_prefix ? options->fault_prefix : "stream");
	w->lock_fd = w->log_fd = w->idx_fd = -1;
	int rc = STREAM_EIO;
	char *groups_dir = xasprintf("%s/groups", dir);
	char *meta_path = xasprintf("%s/meta", dir);
	/* the identity first, the segments after it: a reader that finds
	 * segments/ finds meta too */
	if (sfs_mkdir_p(fs, dir) < 0)
		goto out;
	rc = acquire_lock(w);
	if (rc != STREAM_OK)
		goto out;
	rc = STREAM_EIO;
	struct stream_fs_stat meta_st;
	if (fs->stat(fs, meta_path, &meta_st) < 0) {
		/* a new stream: a new identity nobody can mistake for another */
		char *stream_id = stream_id_generate_fs(fs);
		struct stream_meta meta = { .format_version = STREAM_FORMAT_VERSION,
					    .source_id = (char *)options->source_id,
					    .flow = (char *)options->flow,
					    .stream_id = stream_id };
		int wrc = stream_id ? stream_meta_write_fs(fs, dir, &meta) : -1;
		free(stream_id);
		if (wrc < 0)
			goto out;
		if (sfs_fsync_dir(fs, dir) < 0)
			goto out;
	} else {
		struct stream_meta meta;
		if (stream_meta_read_fs(fs, dir, &meta) < 0) {
			rc = STREAM_EINVAL;
			goto out;
		}
		bool mismatch = (options->flow && meta.flow && strcmp(options->flow, meta.flow) != 0);
		if (mismatch)
			log_error("stream \"%s\" belongs to flow \"%s\", not \"%s\"", dir, meta.flow, options->flow);
		int wrc = 0;
		if (!mismatch && !meta.stream_id) {
			/* made before streams had ids: give it one now */
			meta.stream_id = stream_id_generate_fs(fs);
			wrc = meta.stream_id ? stream_meta_write_fs(fs, dir, &meta) : -1;
			if (wrc == 0)
				log_info("stream \"%s\" given the stream id %s", dir, meta.stream_id);
		}
		stream_meta_free(&meta);
		if (mismatch) {
			rc = STREAM_EINVAL;
			goto out;
		}
		if (wrc < 0)
			goto out;
	}
	/* fs_mkdir_p makes a directory it creates durable; fsync the stream
	 * directory again anyway: a writer killed between a mkdir and that
	 * fsync left an entry nobody made durable.  The same for segments/:
	 * a writer that died (or failed) between creating a segment and
	 * fsyncing segments/ left a segment whose entry a power loss can
	 * still take away, with every frame this writer acknowledges in it */
	if (sfs_mkdir_p(fs, w->segments_dir) < 0 || sfs_mkdir_p(fs, groups_dir) < 0 || sfs_fsync_dir(fs, dir) < 0 ||
	    sfs_fsync_dir(fs, w->segments_dir) < 0)
		goto out;
	rc = recover(w, rec);
	if (rc != STREAM_OK)
		goto out;
	rec->next_offset = w->next_offset;
	*writer = w;
	w = NULL;
out:
	free(groups_dir);
	free(meta_path);
	if (w)
		stream_writer_close(w);
	return rc;
}

int stream_writer_append(struct stream_writer *w, int type, uint16_t flags, const void *payload,
			 size_t length, uint64_t *offset)
{
	if (w->poisoned)
		return STREAM_EIO;
	if (length > MAX_FRAME_PAYLOAD) {
		log_error("frame payload of %zu bytes exceeds the maximum of %u", length, MAX_FRAME_PAYLOAD);
		return STREAM_EINVAL;
	}
	if (!frame_type_name(type)) {
		log_error("unknown frame type %d", type);
		return STREAM_EINVAL;
	}
	if (flags & ~FRAME_PRODUCER_FLAGS) {
		log_error("frame flags %u set bit 15 (%u), the stream's compression flag", (unsigned)flags,
			  (unsigned)FRAME_FLAG_ZLIB);
		return STREAM_EINVAL;
	}
	size_t stored_length = length;
	if (w->options.compression == STREAM_COMPRESSION_ZLIB &&
	    frame_payload_compress(payload, length, &w->deflated, &stored_length)) {
		payload = w->deflated.data;
		flags |= FRAME_FLAG_ZLIB;
	}
	length = stored_length;
	size_t size = FRAME_HEADER_SIZE + length;
	if (w->batch_len + size > w->batch_cap) {
		/* room to grow, except for one very large frame */
		w->batch_cap = (w->batch_len + size) * (size > FRAME_TARGET_PAYLOAD ? 1 : 2);
		w->batch = xrealloc(w->batch, w->batch_cap);
	}
	if (w->batch_frames == w->batch_frames_cap) {
		w->batch_frames_cap = w->batch_frames_cap ? w->batch_frames_cap * 2 : 64;
		w->batch_sizes = xrealloc(w->batch_sizes, w->batch_frames_cap * sizeof *w->batch_sizes);
	}
	uint64_t frame_offset = w->next_offset + w->batch_frames;
	uint8_t *dst = w->batch + w->batch_len;
	if (length)
		memcpy(dst + FRAME_HEADER_SIZE, payload, length);
	frame_encode_header(dst, type, flags, frame_offset, w->fs->now_us(w->fs), dst + FRAME_HEADER_SIZE, (uint32_t)length);
	w->batch_len += size;
	w->batch_sizes[w->batch_frames++] = (uint32_t)size;
	if (offset)
		*offset = frame_offset;
	return STREAM_OK;
}

/* Seal the active segment: its index durable, then a new segment. */
static int roll_segment(struct stream_writer *w, uint64_t min_bytes)
{
	if (sfs_fdatasync(w->fs, w->idx_fd, w->idx_path) < 0)
		return STREAM_EIO;
	close_segment_fds(w);
	return create_segment(w, min_bytes);
}

/* Write frames [first, first+count) of the batch, located at batch_at,
 * into the active segment, make them durable, then index them. */
static int write_frames(struct stream_writer *w, size_t first, size_t count, size_t batch_at, size_t bytes)
{
	const uint8_t *src = w->batch + batch_at;
	if (fault_armed(w->fault_mid_frame)) {
		size_t half = w->batch_sizes[first] / 2;
		if (sfs_pwrite_all(w->fs, w->log_fd, src, half, (off_t)w->write_pos, w->log_path) < 0)
			return STREAM_EIO;
		fault_point(w->fault_mid_frame);
		if (sfs_pwrite_all(w->fs, w->log_fd, src + half, bytes - half, (off_t)(w->write_pos + half), w->log_path) < 0)
			return errno == ENOSPC ? STREAM_ENOSPC : STREAM_EIO;
	} else if (sfs_pwrite_all(w->fs, w->log_fd, src, bytes, (off_t)w->write_pos, w->log_path) < 0) {
		return errno == ENOSPC ? STREAM_ENOSPC : STREAM_EIO;
	}
	fault_point(w->fault_after_write);
	if (sfs_fdatasync(w->fs, w->log_fd, w->log_path) < 0)
		return STREAM_EIO;
	fault_point(w->fault_after_sync);
	uint8_t stack_entries[64 * INDEX_ENTRY_SIZE];
	uint8_t *entries = count <= 64 ? stack_entries : xmalloc(count * INDEX_ENTRY_SIZE);
	uint64_t pos = w->write_pos;
	for (size_t i = 0; i < count; i++) {
		index_encode_entry(entries + i * INDEX_ENTRY_SIZE, pos, w->batch_sizes[first + i]);
		pos += w->batch_sizes[first + i];
	}
	int rc = sfs_pwrite_all(w->fs, w->idx_fd, entries, count * INDEX_ENTRY_SIZE,
			       (off_t)(INDEX_HEADER_SIZE + w->frames * INDEX_ENTRY_SIZE), w->idx_path) < 0
			 ? STREAM_EIO
			 : STREAM_OK;
	if (entries != stack_entries)
		free(entries);
	if (rc != STREAM_OK)
		return rc;
	w->write_pos = pos;
	w->frames += count;
	w->next_offset += count;
	return STREAM_OK;
}

/* After a failed write or fdatasync the bytes past the last durable
 * frame are of unknown durability (the kernel may have dropped the dirty
 * pages' error): cut them, so that no later writer's recovery adopts
 * frames that were never acknowledged and may not be on disk.  Best
 * effort: if this fails too, the writer stays poisoned and the next
 * recovery decides. */
static void discard_unacknowledged(struct stream_writer *w)
{
	if (w->log_fd < 0)
		return;
	uint64_t size;
	if (w->fs->fsize(w->fs, w->log_fd, &size) < 0)
		return;
	if (w->fs->ftruncate(w->fs, w->log_fd, (off_t)w->write_pos) < 0)
		log_error("cannot cut unacknowledged bytes after byte %llu of \"%s\": %m",
			  (unsigned long long)w->write_pos, w->log_path);
	else if (w->fs->fallocate(w->fs, w->log_fd, 0, size > w->write_pos ? (off_t)size : (off_t)w->write_pos) < 0)
		log_error("cannot preallocate \"%s\" again after cutting unacknowledged bytes after byte %llu: %m",
			  w->log_path, (unsigned long long)w->write_pos);
	else
		log_warn("stream segment \"%s\": unacknowledged bytes after byte %llu discarded", w->log_path,
			 (unsigned long long)w->write_pos);
}

int stream_writer_sync(struct stream_writer *w)
{
	if (w->poisoned) {
		log_error("stream \"%s\": writer failed earlier and cannot acknowledge anything", w->dir);
		return STREAM_EIO;
	}
	if (w->batch_frames == 0)
		return STREAM_OK;
	int rc = check_free_space(w, 0);
	size_t i = 0, at = 0;
	while (rc == STREAM_OK && i < w->batch_frames) {
		/* how many of the remaining frames fit in the active segment */
		size_t count = 0, bytes = 0;
		while (i + count < w->batch_frames &&
		       w->write_pos + bytes + w->batch_sizes[i + count] <= w->options.segment_bytes) {
			bytes += w->batch_sizes[i + count];
			count++;
		}
		if (count == 0) {
			if (w->frames == 0 && w->write_pos == 0) {
				/* a frame larger than a segment gets one to itself */
				count = 1;
				bytes = w->batch_sizes[i];
			} else {
				rc = roll_segment(w, w->batch_sizes[i]);
				continue;
			}
		}
		rc = write_frames(w, i, count, at, bytes);
		i += count;
		at += bytes;
	}
	if (rc != STREAM_OK) {
		w->poisoned = true;
		discard_unacknowledged(w);
		return rc;
	}
	w->batch_len = 0;
	w->batch_frames = 0;
	/* a batch that held a very large frame: give its memory back */
	if (w->batch_cap > 2 * (size_t)FRAME_TARGET_PAYLOAD) {
		free(w->batch);
		w->batch = NULL;
		w->batch_cap = 0;
	}
	if (++w->batches_since_index_sync >= STREAM_INDEX_SYNC_INTERVAL) {
		w->batches_since_index_sync = 0;
		if (sfs_fdatasync(w->fs, w->idx_fd, w->idx_path) < 0) {
			w->poisoned = true;
			return STREAM_EIO;
		}
	}
	return STREAM_OK;
}

size_t stream_writer_pending(const struct stream_writer *w)
{
	return w->batch_frames;
}

uint64_t stream_writer_next_offset(const struct stream_writer *w)
{
	return w->next_offset;
}

void stream_writer_close(struct stream_writer *w)
{
	if (!w)
		return;
	if (w->batch_frames)
		log_warn("stream \"%s\": %zu queued frames dropped unacknowledged at close", w->dir, w->batch_frames);
	if (w->idx_fd >= 0 && !w->poisoned)
		(void)sfs_fdatasync(w->fs, w->idx_fd, w->idx_path);
	close_segment_fds(w);
	if (w->lock_fd >= 0)
		w->fs->close(w->fs, w->lock_fd); /* releases the flock */
	free(w->dir);
	free(w->segments_dir);
	free(w->batch);
	free(w->batch_sizes);
	frame_buffer_free(&w->deflated);
	free(w);
}
