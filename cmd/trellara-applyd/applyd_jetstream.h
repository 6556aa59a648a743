/*
 * applyd_jetstream.h - trellara-applyd's frame source on a JetStream
 * stream (stream.kind jetstream; frame_source.h says what a source
 * promises, applyd_jetstream.c how this one keeps it).
 */
#ifndef TRELLARA_APPLYD_JETSTREAM_H
#define TRELLARA_APPLYD_JETSTREAM_H

#include "trellara/config.h"
#include "trellara/frame_source.h"

#include <stdbool.h>

/* Connects to the flow's servers and checks the stream's settings
 * (jetstream_policy.h).  STREAM_OK with *src; STREAM_END when the stream
 * does not exist yet and STREAM_EUNAVAILABLE when the servers do not
 * answer (both: try again later; quiet: without logging why);
 * STREAM_EINVAL (logged) when its settings are refused. */
int applyd_jetstream_open(const struct flow_config *cfg, struct frame_source *src, bool quiet);

#endif
