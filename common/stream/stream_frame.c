/*
 * stream_frame.c - frame and index codecs, and the segment-file reading
 * shared by the writer's recovery, the readers and inspect-local.
 */
#include "stream_internal.h"

#include "trellara/checksum.h"
#include "trellara/defaults.h"
#include "trellara/log.h"
#include "trellara/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define SEGMENT_READ_BYTES ((size_t)1 << 20)

static const char *const frame_type_names[] = { NULL, "txn", "chunk", "manifest", "commit_marker",
						 "watermark", "ddl", "pending_chunk",
						 "pending_abort" };

const char *frame_type_name(int type)
{
	if (type < 1 || type > FRAME_TYPE_MAX)
		return NULL;
	return frame_type_names[type];
}

int frame_type_from_name(const char *name)
{
	for (int t = 1; t <= FRAME_TYPE_MAX; t++)
		if (strcmp(frame_type_names[t], name) == 0)
			return t;
	return 0;
}

void frame_encode_header(uint8_t *out, int type, uint16_t flags, uint64_t offset,
			 int64_t append_time_us, const void *payload, uint32_t payload_length)
{
	put_u32(out, FRAME_MAGIC);
	out[4] = FRAME_VERSION;
	out[5] = (uint8_t)type;
	put_u16(out + 6, flags);
	put_u64(out + 8, offset);
	put_u64(out + 16, (uint64_t)append_time_us);
	put_u32(out + 24, payload_length);
	uint32_t crc = crc32c(0, out, 28);
	crc = crc32c(crc, payload, payload_length);
	put_u32(out + 28, crc);
}

bool frame_decode_header(const uint8_t *in, struct frame_header *h, const char **reason)
{
	if (get_u32(in) != FRAME_MAGIC) {
		*reason = "bad frame magic";
		return false;
	}
	h->version = in[4];
	h->type = in[5];
	h->flags = get_u16(in + 6);
	h->offset = get_u64(in + 8);
	h->append_time_us = (int64_t)get_u64(in + 16);
	h->payload_length = get_u32(in + 24);
	h->crc = get_u32(in + 28);
	if (h->version != FRAME_VERSION) {
		*reason = "unsupported frame version";
		return false;
	}
	if (!frame_type_name(h->type)) {
		*reason = "unknown frame type";
		return false;
	}
	if (h->payload_length > MAX_FRAME_PAYLOAD) {
		*reason = "frame length exceeds the maximum";
		return false;
	}
	return true;
}

void frame_buffer_free(struct frame_buffer *buf)
{
	if (buf->deflater)
		deflateEnd(buf->deflater);
	if (buf->inflater)
		inflateEnd(buf->inflater);
	free(buf->deflater);
	free(buf->inflater);
	free(buf->data);
	memset(buf, 0, sizeof *buf);
}

/* zlib allocates through xmalloc: out of memory aborts, as everywhere. */
static voidpf zlib_alloc(voidpf opaque, uInt items, uInt size)
{
	(void)opaque;
	size_t bytes = (size_t)items * size;
	return xmalloc(bytes > 0 ? bytes : 1);
}

static void zlib_free(voidpf opaque, voidpf address)
{
	(void)opaque;
	free(address);
}

/* The buffer's zlib stream, set up once and reset for each payload; NULL
 * only when the zlib linked is not the one compiled against (logged). */
static z_stream *frame_buffer_zstream(struct frame_buffer *buf, bool deflating)
{
	void **slot = deflating ? &buf->deflater : &buf->inflater;
	z_stream *zs = *slot;
	if (zs)
		return (deflating ? deflateReset(zs) : inflateReset(zs)) == Z_OK ? zs : NULL;
	zs = xcalloc(1, sizeof *zs);
	zs->zalloc = zlib_alloc;
	zs->zfree = zlib_free;
	if ((deflating ? deflateInit(zs, Z_BEST_SPEED) : inflateInit(zs)) != Z_OK) {
		log_error("zlib %s cannot start (compiled against %s)", zlibVersion(), ZLIB_VERSION);
		free(zs);
		return NULL;
	}
	*slot = zs;
	return zs;
}

/* Room for need bytes; a buffer grown for one large frame shrinks back
 * after it, so memory stays bounded by the frame at hand. */
static void frame_buffer_reserve(struct frame_buffer *buf, size_t need)
{
	if (need == 0)
		need = 1;
	if (need > buf->cap || (buf->cap > FRAME_TARGET_PAYLOAD && need <= FRAME_TARGET_PAYLOAD)) {
		buf->data = xrealloc(buf->data, need);
		buf->cap = need;
	}
}

bool frame_payload_compress(const void *payload, size_t length, struct frame_buffer *buf, size_t *stored_length)
{
	if (length < FRAME_COMPRESS_MIN_BYTES || length > MAX_FRAME_PAYLOAD)
		return false;
	/* It pays when it is at most 7/8 of the payload: deflate gets that
	 * much room, and running out of it means the payload stays plain. */
	size_t room = length - length / 8;
	frame_buffer_reserve(buf, room);
	z_stream *zs = frame_buffer_zstream(buf, true);
	if (!zs)
		return false; /* logged; the payload is stored plain */
	zs->next_in = (Bytef *)(uintptr_t)payload;
	zs->avail_in = (uInt)length;
	zs->next_out = buf->data + FRAME_ZLIB_PREFIX;
	zs->avail_out = (uInt)(room - FRAME_ZLIB_PREFIX);
	if (deflate(zs, Z_FINISH) != Z_STREAM_END)
		return false;
	put_u32(buf->data, (uint32_t)length);
	*stored_length = FRAME_ZLIB_PREFIX + (size_t)zs->total_out;
	return true;
}

const char *frame_payload_decode(struct frame_header *h, const uint8_t *stored, struct frame_buffer *buf,
				 const uint8_t **payload, bool *compressed)
{
	*compressed = (h->flags & FRAME_FLAG_ZLIB) != 0;
	*payload = stored;
	if (!*compressed)
		return NULL;
	if (h->payload_length < FRAME_ZLIB_PREFIX)
		return "compressed payload shorter than its length field";
	uint32_t length = get_u32(stored);
	if (length > MAX_FRAME_PAYLOAD)
		return "compressed payload's inflated length exceeds the maximum";
	frame_buffer_reserve(buf, length);
	z_stream *zs = frame_buffer_zstream(buf, false);
	if (!zs)
		return "zlib cannot inflate it (see the error before)";
	zs->next_in = (Bytef *)(uintptr_t)(stored + FRAME_ZLIB_PREFIX);
	zs->avail_in = h->payload_length - FRAME_ZLIB_PREFIX;
	zs->next_out = buf->data;
	zs->avail_out = length;
	int zr = inflate(zs, Z_FINISH);
	if (zr == Z_STREAM_END && zs->total_out != length)
		return "compressed payload inflates to fewer bytes than its length field";
	if (zr == Z_STREAM_END && zs->avail_in != 0)
		return "compressed payload has bytes after its zlib stream";
	if (zr == Z_BUF_ERROR && zs->avail_out == 0 && zs->avail_in != 0)
		return "compressed payload inflates to more bytes than its length field";
	if (zr != Z_STREAM_END)
		return "compressed payload is not a valid zlib stream";
	h->payload_length = length;
	h->flags &= (uint16_t)~FRAME_FLAG_ZLIB;
	*payload = buf->data;
	return NULL;
}

bool frame_check_crc(const uint8_t *header_bytes, const void *payload, uint32_t payload_length)
{
	uint32_t crc = crc32c(0, header_bytes, 28);
	crc = crc32c(crc, payload, payload_length);
	return crc == get_u32(header_bytes + 28);
}

void index_encode_entry(uint8_t *out, uint64_t position, uint32_t frame_size)
{
	put_u64(out, position);
	put_u32(out + 8, frame_size);
	put_u32(out + 12, crc32c(0, out, 12));
}

bool index_decode_entry(const uint8_t *in, uint64_t *position, uint32_t *frame_size)
{
	if (crc32c(0, in, 12) != get_u32(in + 12))
		return false;
	*position = get_u64(in);
	*frame_size = get_u32(in + 8);
	return *frame_size >= FRAME_HEADER_SIZE;
}

void index_encode_header(uint8_t *out, uint64_t base_offset)
{
	memset(out, 0, INDEX_HEADER_SIZE);
	put_u32(out, INDEX_MAGIC);
	out[4] = INDEX_VERSION;
	put_u64(out + 8, base_offset);
	put_u32(out + 28, crc32c(0, out, 28));
}

bool index_decode_header(const uint8_t *in, uint64_t *base_offset)
{
	if (get_u32(in) != INDEX_MAGIC || in[4] != INDEX_VERSION)
		return false;
	if (crc32c(0, in, 28) != get_u32(in + 28))
		return false;
	*base_offset = get_u64(in + 8);
	return true;
}

char *segment_path(const char *dir, uint64_t base, const char *suffix)
{
	return xasprintf("%s/segments/%020llu%s", dir, (unsigned long long)base, suffix);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int segment_list(const char *dir, uint64_t **bases, size_t *n)
{
	return segment_list_fs(stream_fs_posix(), dir, bases, n);
}

int segment_list_fs(struct stream_fs *fs, const char *dir, uint64_t **bases, size_t *n)
{
	char *path = xasprintf("%s/segments", dir);
	*bases = NULL;
	*n = 0;
	char **names = NULL;
	size_t n_names = 0;
	if (fs->list_dir(fs, path, &names, &n_names) < 0) {
		int rc = errno == ENOENT ? 0 : -1;
		if (rc < 0)
			log_error("cannot open directory \"%s\": %m", path);
		free(path);
		return rc;
	}
	size_t cap = 0;
	for (size_t k = 0; k < n_names; k++) {
		const char *name = names[k];
		if (strlen(name) != SEGMENT_NAME_DIGITS + 4 || strcmp(name + SEGMENT_NAME_DIGITS, ".log") != 0)
			continue;
		bool digits = true;
		for (int i = 0; i < SEGMENT_NAME_DIGITS; i++)
			digits = digits && name[i] >= '0' && name[i] <= '9';
		if (!digits)
			continue;
		if (*n == cap)
			*bases = xrealloc(*bases, (cap = cap ? cap * 2 : 16) * sizeof **bases);
		(*bases)[(*n)++] = strtoull(name, NULL, 10);
	}
	sfs_free_names(names, n_names);
	free(path);
	if (*n)
		qsort(*bases, *n, sizeof **bases, cmp_u64);
	return 0;
}

int stream_segment_bases(const char *dir, uint64_t **bases, size_t *n)
{
	return segment_list(dir, bases, n) < 0 ? STREAM_EIO : STREAM_OK;
}

int stream_segment_bases_fs(struct stream_fs *fs, const char *dir, uint64_t **bases, size_t *n)
{
	return segment_list_fs(fs, dir, bases, n) < 0 ? STREAM_EIO : STREAM_OK;
}

int segment_file_open(struct segment_file *sf, struct stream_fs *fs, const char *dir, uint64_t base)
{
	return segment_file_open_path(sf, fs, segment_path(dir, base, ".log"), base);
}

int segment_file_open_path(struct segment_file *sf, struct stream_fs *fs, char *path, uint64_t base)
{
	memset(sf, 0, sizeof *sf);
	sf->fs = fs;
	sf->fd = -1;
	sf->base = base;
	sf->path = path;
	sf->fd = fs->open(fs, sf->path, O_RDONLY | O_CLOEXEC, 0);
	if (sf->fd < 0) {
		log_error("cannot open stream segment \"%s\": %m", sf->path);
		free(sf->path);
		sf->path = NULL;
		return -1;
	}
	sf->buf_cap = SEGMENT_READ_BYTES;
	sf->buf = xmalloc(sf->buf_cap);
	return segment_file_refresh_size(sf);
}

void segment_file_close(struct segment_file *sf)
{
	if (sf->fd >= 0 && sf->path)
		sf->fs->close(sf->fs, sf->fd);
	free(sf->path);
	free(sf->buf);
	memset(sf, 0, sizeof *sf);
	sf->fd = -1;
}

int segment_file_refresh_size(struct segment_file *sf)
{
	if (sf->fs->fsize(sf->fs, sf->fd, &sf->size) < 0) {
		log_error("cannot stat stream segment \"%s\": %m", sf->path);
		return -1;
	}
	return 0;
}

/* Make [pos, pos+len) available in the buffer; returns a pointer or NULL
 * with *short_read when the file ends first; -1 in *err on I/O error. */
static const uint8_t *segment_file_bytes(struct segment_file *sf, uint64_t pos, size_t len,
					 bool *short_read, bool *err)
{
	*short_read = false;
	*err = false;
	if (pos >= sf->buf_pos && pos + len <= sf->buf_pos + sf->buf_len)
		return sf->buf + (pos - sf->buf_pos);
	/* The buffer grows to hold one large frame, and shrinks back after
	 * it: memory is bounded by the frame being read, and reads stay
	 * SEGMENT_READ_BYTES long. */
	if (len > sf->buf_cap || (sf->buf_cap > SEGMENT_READ_BYTES && len <= SEGMENT_READ_BYTES)) {
		sf->buf_cap = len > SEGMENT_READ_BYTES ? len : SEGMENT_READ_BYTES;
		sf->buf = xrealloc(sf->buf, sf->buf_cap);
	}
	size_t want = sf->buf_cap;
	size_t got = 0;
	while (got < want) {
		ssize_t n = sf->fs->pread(sf->fs, sf->fd, sf->buf + got, want - got, (off_t)(pos + got));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_error("cannot read stream segment \"%s\" at byte %llu: %m", sf->path,
				  (unsigned long long)(pos + got));
			*err = true;
			sf->buf_len = 0;
			return NULL;
		}
		if (n == 0)
			break;
		got += (size_t)n;
		if (got >= len && got < want)
			break; /* enough for now; more on the next call */
	}
	sf->buf_pos = pos;
	sf->buf_len = got;
	if (got < len) {
		*short_read = true;
		return NULL;
	}
	return sf->buf;
}

static enum frame_check segment_file_frame_once(struct segment_file *sf, uint64_t pos,
						uint64_t expected_offset, struct frame_header *h,
						const uint8_t **payload, const char **reason);

/* The buffer may hold bytes read before a writer wrote there: a frame
 * that does not check out from the buffer is read again from the file. */
enum frame_check segment_file_frame(struct segment_file *sf, uint64_t pos, uint64_t expected_offset,
				    struct frame_header *h, const uint8_t **payload,
				    const char **reason)
{
	bool cached = pos >= sf->buf_pos && pos < sf->buf_pos + sf->buf_len;
	enum frame_check fc = segment_file_frame_once(sf, pos, expected_offset, h, payload, reason);
	if (fc != FRAME_VALID && cached) {
		sf->buf_len = 0;
		fc = segment_file_frame_once(sf, pos, expected_offset, h, payload, reason);
	}
	return fc;
}

static enum frame_check segment_file_frame_once(struct segment_file *sf, uint64_t pos,
						uint64_t expected_offset, struct frame_header *h,
						const uint8_t **payload, const char **reason)
{
	bool short_read, err;
	const uint8_t *hb = segment_file_bytes(sf, pos, FRAME_HEADER_SIZE, &short_read, &err);
	if (!hb) {
		*reason = err ? "read error" : "file ends inside a frame header";
		if (!err && sf->buf_len > 0) {
			/* a partial header: zeros are a clean end, anything else torn */
			for (size_t i = 0; i < sf->buf_len; i++)
				if (sf->buf[i])
					return FRAME_SHORT;
		}
		return err ? FRAME_INVALID : FRAME_ZERO;
	}
	if (get_u32(hb) == 0) {
		static const uint8_t zero[FRAME_HEADER_SIZE];
		if (memcmp(hb, zero, FRAME_HEADER_SIZE) == 0) {
			*reason = "end of written data";
			return FRAME_ZERO;
		}
	}
	if (!frame_decode_header(hb, h, reason))
		return FRAME_INVALID;
	if (expected_offset != UINT64_MAX && h->offset != expected_offset) {
		*reason = "frame offset out of sequence";
		return FRAME_INVALID;
	}
	size_t total = FRAME_HEADER_SIZE + (size_t)h->payload_length;
	const uint8_t *fb = segment_file_bytes(sf, pos, total, &short_read, &err);
	if (!fb) {
		*reason = err ? "read error" : "file ends inside a frame";
		return err ? FRAME_INVALID : FRAME_SHORT;
	}
	if (!frame_check_crc(fb, fb + FRAME_HEADER_SIZE, h->payload_length)) {
		*reason = "bad frame checksum";
		return FRAME_INVALID;
	}
	*payload = fb + FRAME_HEADER_SIZE;
	return FRAME_VALID;
}

static enum frame_check segment_file_frame_stored_once(struct segment_file *sf, uint64_t pos,
							struct frame_header *h, const uint8_t **stored,
							bool *crc_ok, const char **reason);

/* As segment_file_frame: what does not check out from the buffer is read
 * again from the file. */
enum frame_check segment_file_frame_stored(struct segment_file *sf, uint64_t pos, struct frame_header *h,
					   const uint8_t **stored, bool *crc_ok, const char **reason)
{
	bool cached = pos >= sf->buf_pos && pos < sf->buf_pos + sf->buf_len;
	enum frame_check fc = segment_file_frame_stored_once(sf, pos, h, stored, crc_ok, reason);
	if ((fc != FRAME_VALID || !*crc_ok) && cached) {
		sf->buf_len = 0;
		fc = segment_file_frame_stored_once(sf, pos, h, stored, crc_ok, reason);
	}
	return fc;
}

static enum frame_check segment_file_frame_stored_once(struct segment_file *sf, uint64_t pos,
							struct frame_header *h, const uint8_t **stored,
							bool *crc_ok, const char **reason)
{
	bool short_read, err;
	const uint8_t *hb = segment_file_bytes(sf, pos, FRAME_HEADER_SIZE, &short_read, &err);
	if (!hb) {
		*reason = err ? "read error" : "file ends inside a frame header";
		if (!err && sf->buf_len > 0) {
			for (size_t i = 0; i < sf->buf_len; i++)
				if (sf->buf[i])
					return FRAME_SHORT;
		}
		return err ? FRAME_INVALID : FRAME_ZERO;
	}
	static const uint8_t zero[FRAME_HEADER_SIZE];
	if (memcmp(hb, zero, FRAME_HEADER_SIZE) == 0) {
		*reason = "end of written data";
		return FRAME_ZERO;
	}
	if (!frame_decode_header(hb, h, reason))
		return FRAME_INVALID;
	size_t total = FRAME_HEADER_SIZE + (size_t)h->payload_length;
	const uint8_t *fb = segment_file_bytes(sf, pos, total, &short_read, &err);
	if (!fb) {
		*reason = err ? "read error" : "file ends inside a frame";
		return err ? FRAME_INVALID : FRAME_SHORT;
	}
	*crc_ok = frame_check_crc(fb, fb + FRAME_HEADER_SIZE, h->payload_length);
	*reason = *crc_ok ? NULL : "bad frame checksum";
	*stored = fb + FRAME_HEADER_SIZE;
	return FRAME_VALID;
}

int segment_file_find_valid_after(struct segment_file *sf, uint64_t pos, uint64_t after_offset,
				  bool *found, uint64_t *found_pos)
{
	*found = false;
	if (segment_file_refresh_size(sf) < 0)
		return -1;
	const uint8_t magic[4] = { 'T', 'R', 'L', 'F' };
	uint64_t p = pos + 1;
	while (p + FRAME_HEADER_SIZE <= sf->size) {
		bool short_read, err;
		size_t window = sf->size - p < (1 << 20) ? (size_t)(sf->size - p) : (1 << 20);
		const uint8_t *b = segment_file_bytes(sf, p, window, &short_read, &err);
		if (err)
			return -1;
		if (!b)
			break;
		const uint8_t *hit = memmem(b, window, magic, 4);
		if (!hit) {
			p += window > 3 ? window - 3 : 1;
			continue;
		}
		uint64_t cand = p + (uint64_t)(hit - b);
		struct frame_header h;
		const uint8_t *payload;
		const char *reason;
		if (segment_file_frame(sf, cand, UINT64_MAX, &h, &payload, &reason) == FRAME_VALID &&
		    h.offset > after_offset) {
			*found = true;
			*found_pos = cand;
			return 0;
		}
		p = cand + 1;
	}
	return 0;
}

int segment_file_last_nonzero(struct segment_file *sf, uint64_t pos, uint64_t *end)
{
	*end = pos;
	if (segment_file_refresh_size(sf) < 0)
		return -1;
	uint64_t p = pos;
	while (p < sf->size) {
		bool short_read, err;
		size_t window = sf->size - p < (1 << 20) ? (size_t)(sf->size - p) : (1 << 20);
		const uint8_t *b = segment_file_bytes(sf, p, window, &short_read, &err);
		if (err)
			return -1;
		if (!b)
			break;
		for (size_t i = window; i > 0; i--)
			if (b[i - 1]) {
				*end = p + i;
				break;
			}
		p += window;
	}
	return 0;
}

int index_view_load(struct stream_fs *fs, const char *dir, uint64_t base, struct index_view *view)
{
	memset(view, 0, sizeof *view);
	char *path = segment_path(dir, base, ".idx");
	int rc = -1;
	int fd = fs->open(fs, path, O_RDONLY | O_CLOEXEC, 0);
	uint8_t *data = NULL;
	if (fd < 0) {
		rc = errno == ENOENT ? 0 : -1;
		if (rc < 0)
			log_error("cannot open stream index \"%s\": %m", path);
		goto out;
	}
	view->present = true;
	uint64_t file_size;
	if (fs->fsize(fs, fd, &file_size) < 0) {
		log_error("cannot stat stream index \"%s\": %m", path);
		goto out;
	}
	size_t size = (size_t)file_size;
	data = xmalloc(size ? size : 1);
	size_t got = 0;
	while (got < size) {
		ssize_t n = fs->pread(fs, fd, data + got, size - got, (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			log_error("cannot read stream index \"%s\": %m", path);
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	uint64_t header_base;
	if (got < INDEX_HEADER_SIZE || !index_decode_header(data, &header_base) || header_base != base) {
		rc = 0;
		goto out;
	}
	view->header_ok = true;
	view->n_raw = (got - INDEX_HEADER_SIZE) / INDEX_ENTRY_SIZE;
	view->positions = xmalloc((view->n_raw ? view->n_raw : 1) * sizeof *view->positions);
	view->sizes = xmalloc((view->n_raw ? view->n_raw : 1) * sizeof *view->sizes);
	uint64_t expect_pos = 0;
	for (uint64_t i = 0; i < view->n_raw; i++) {
		const uint8_t *e = data + INDEX_HEADER_SIZE + i * INDEX_ENTRY_SIZE;
		uint64_t pos;
		uint32_t fsize;
		static const uint8_t zero[INDEX_ENTRY_SIZE];
		if (memcmp(e, zero, INDEX_ENTRY_SIZE) == 0)
			break; /* zeroed space: the end */
		if (!index_decode_entry(e, &pos, &fsize) || pos != expect_pos) {
			view->bad_entry = true;
			break;
		}
		view->positions[view->n] = pos;
		view->sizes[view->n] = fsize;
		view->n++;
		expect_pos = pos + fsize;
	}
	rc = 0;
out:
	if (fd >= 0)
		fs->close(fs, fd);
	free(data);
	free(path);
	return rc;
}

void index_view_free(struct index_view *view)
{
	free(view->positions);
	free(view->sizes);
	memset(view, 0, sizeof *view);
}

bool stream_writer_active(const char *dir)
{
	return stream_writer_active_fs(stream_fs_posix(), dir);
}

bool stream_writer_active_fs(struct stream_fs *fs, const char *dir)
{
	char *path = xasprintf("%s/writer.lock", dir);
	int fd = fs->open(fs, path, O_RDONLY | O_CLOEXEC, 0);
	free(path);
	if (fd < 0)
		return false;
	bool active = false;
	if (fs->flock(fs, fd, LOCK_SH | LOCK_NB) < 0)
		active = errno == EWOULDBLOCK;
	else
		fs->flock(fs, fd, LOCK_UN);
	fs->close(fs, fd);
	return active;
}

uint64_t index_view_acked_end(const struct index_view *view)
{
	if (!view->present || !view->header_ok)
		return UINT64_MAX;
	return view->n ? view->positions[view->n - 1] + view->sizes[view->n - 1] : 0;
}

int segment_scan_all(struct segment_file *sf, uint64_t limit_frames, uint64_t acked_end,
		     struct segment_scan *scan)
{
	memset(scan, 0, sizeof *scan);
	size_t cap = 1024;
	scan->positions = xmalloc(cap * sizeof *scan->positions);
	scan->sizes = xmalloc(cap * sizeof *scan->sizes);
	if (segment_file_refresh_size(sf) < 0)
		return -1;
	uint64_t pos = 0;
	for (;;) {
		if (scan->frames >= limit_frames)
			break;
		struct frame_header h;
		const uint8_t *payload;
		const char *reason;
		enum frame_check fc = segment_file_frame(sf, pos, sf->base + scan->frames, &h, &payload, &reason);
		if (fc != FRAME_VALID) {
			bool found = false;
			uint64_t found_pos = 0;
			if (segment_file_find_valid_after(sf, pos, sf->base + scan->frames, &found, &found_pos) < 0)
				return -1;
			/* A sealed segment (limit given) must hold limit_frames
			 * frames; in the last one only the acknowledged part
			 * must be whole. */
			if (limit_frames == UINT64_MAX && found && pos >= acked_end)
				scan->torn_out_of_order = true;
			else if (found || limit_frames != UINT64_MAX) {
				scan->corrupt = true;
				scan->corrupt_position = pos;
				scan->corrupt_reason = fc == FRAME_ZERO ? "zeroed bytes where a frame belongs" : reason;
			}
			break;
		}
		if (scan->frames == cap) {
			cap *= 2;
			scan->positions = xrealloc(scan->positions, cap * sizeof *scan->positions);
			scan->sizes = xrealloc(scan->sizes, cap * sizeof *scan->sizes);
		}
		scan->positions[scan->frames] = pos;
		scan->sizes[scan->frames] = FRAME_HEADER_SIZE + h.payload_length;
		scan->frames++;
		pos += FRAME_HEADER_SIZE + h.payload_length;
	}
	scan->end_position = pos;
	uint64_t nonzero_end;
	if (segment_file_last_nonzero(sf, pos, &nonzero_end) < 0)
		return -1;
	scan->torn_bytes = scan->corrupt ? 0 : nonzero_end - pos;
	return 0;
}

void segment_scan_free(struct segment_scan *scan)
{
	free(scan->positions);
	free(scan->sizes);
	memset(scan, 0, sizeof *scan);
}
