/*
 * frame_source.h - where a consumer reads frames from, whatever the
 * stream's kind (stream.kind): the local stream directory (stream.h, on
 * a struct stream_fs), or a JetStream stream (trellara-applyd's
 * applyd_jetstream.c, on libnats), or the simulator's broker model.  The
 * apply engine and trellara-applyd read through it only, so neither
 * branches on the kind.
 *
 * Offsets are the stream's dense frame offsets from 0 (on JetStream the
 * frame at offset o is message o + 1).  A frame handed out is published
 * and durable: a crash of the stream cannot take it back.
 *
 * The consumer's position (the next offset it needs) is the target
 * checkpoint's; position_set only mirrors it into the stream, where
 * retention reads it (the local stream's groups/<name> file, JetStream's
 * group bucket), and position_get reads that mirror back.
 *
 * Every function returns a stream_status (stream.h), logged by the
 * source with the stream named: STREAM_OK, STREAM_END (no further
 * published frame yet), STREAM_ERANGE (an offset the stream does not
 * hold), STREAM_EIO (the stream cannot be read now: a local I/O error,
 * or JetStream servers unreachable or without a quorum), STREAM_ECORRUPT.
 */
#ifndef TRELLARA_FRAME_SOURCE_H
#define TRELLARA_FRAME_SOURCE_H

#include "trellara/stream.h"

#include <stdbool.h>
#include <stdint.h>

struct stream_fs;

struct frame_source_ops {
	/* The next frame (its payload borrowed until the next call). */
	int (*next)(void *impl, struct stream_frame *frame);
	/* The next call to next returns offset. */
	int (*seek)(void *impl, uint64_t offset);
	/* Wait up to timeout_ms for more frames (or return at once). */
	int (*wait)(void *impl, int timeout_ms);
	/* The mirror of the consumer's position; *exists false when none. */
	int (*position_get)(void *impl, uint64_t *position, bool *exists);
	int (*position_set)(void *impl, uint64_t position);
	/* The stream's identity and binding (stream_meta_free it). */
	int (*meta)(void *impl, struct stream_meta *meta);
	void (*close)(void *impl);
};

struct frame_source {
	const struct frame_source_ops *ops; /* NULL: none */
	void *impl;                         /* owned: closed by frame_source_close */
};

/* The local stream at dir on fs, consumer group group (both borrowed,
 * outliving the source).  STREAM_OK, or the reader's status (logged). */
int frame_source_local_open(struct stream_fs *fs, const char *dir, const char *group, struct frame_source *src);

static inline int frame_source_next(struct frame_source *s, struct stream_frame *f)
{
	return s->ops->next(s->impl, f);
}
static inline int frame_source_seek(struct frame_source *s, uint64_t offset)
{
	return s->ops->seek(s->impl, offset);
}
static inline int frame_source_wait(struct frame_source *s, int timeout_ms)
{
	return s->ops->wait(s->impl, timeout_ms);
}
static inline int frame_source_position_get(struct frame_source *s, uint64_t *position, bool *exists)
{
	return s->ops->position_get(s->impl, position, exists);
}
static inline int frame_source_position_set(struct frame_source *s, uint64_t position)
{
	return s->ops->position_set(s->impl, position);
}
static inline int frame_source_meta(struct frame_source *s, struct stream_meta *meta)
{
	return s->ops->meta(s->impl, meta);
}
/* Closes and forgets the source (none: nothing). */
void frame_source_close(struct frame_source *s);

#endif
