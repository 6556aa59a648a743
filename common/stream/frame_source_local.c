/*
 * frame_source_local.c - the local stream as a frame source
 * (frame_source.h): its reader, its meta file and the consumer group's
 * file, on one struct stream_fs.
 */
#include "trellara/frame_source.h"

#include "trellara/xalloc.h"

#include <stdlib.h>

struct local_source {
	struct stream_fs *fs;
	const char *dir;   /* borrowed */
	const char *group; /* borrowed */
	struct stream_reader *reader; /* owned */
};

static int local_next(void *impl, struct stream_frame *frame)
{
	struct local_source *s = impl;
	return stream_reader_next(s->reader, frame);
}

static int local_seek(void *impl, uint64_t offset)
{
	struct local_source *s = impl;
	return stream_reader_seek(s->reader, offset);
}

static int local_wait(void *impl, int timeout_ms)
{
	struct local_source *s = impl;
	return stream_reader_wait(s->reader, timeout_ms);
}

static int local_position_get(void *impl, uint64_t *position, bool *exists)
{
	struct local_source *s = impl;
	return stream_group_get_fs(s->fs, s->dir, s->group, position, exists);
}

static int local_position_set(void *impl, uint64_t position)
{
	struct local_source *s = impl;
	return stream_group_set_fs(s->fs, s->dir, s->group, position);
}

static int local_meta(void *impl, struct stream_meta *meta)
{
	struct local_source *s = impl;
	return stream_meta_read_fs(s->fs, s->dir, meta) < 0 ? STREAM_EIO : STREAM_OK;
}

static void local_close(void *impl)
{
	struct local_source *s = impl;
	stream_reader_close(s->reader);
	free(s);
}

static const struct frame_source_ops local_ops = {
	.next = local_next,
	.seek = local_seek,
	.wait = local_wait,
	.position_get = local_position_get,
	.position_set = local_position_set,
	.meta = local_meta,
	.close = local_close,
};

int frame_source_local_open(struct stream_fs *fs, const char *dir, const char *group, struct frame_source *src)
{
	*src = (struct frame_source){ 0 };
	struct local_source *s = xcalloc(1, sizeof *s);
	*s = (struct local_source){ .fs = fs, .dir = dir, .group = group };
	int st = stream_reader_open_fs(fs, dir, &s->reader);
	if (st != STREAM_OK) {
		free(s);
		return st;
	}
	*src = (struct frame_source){ .ops = &local_ops, .impl = s };
	return STREAM_OK;
}

void frame_source_close(struct frame_source *s)
{
	if (s->ops)
		s->ops->close(s->impl);
	*s = (struct frame_source){ 0 };
}
