/*
 * jetstream_session.h - a connection to the JetStream servers of a flow
 * (stream.kind jetstream), shared by the programs that speak to them
 * (trellara-stream's init and inspect, trellara-capture's publisher).
 * Built only into those programs (NATS_SRC in the Makefile): the unit
 * tests and the simulator never link libnats.
 *
 * Owns.  The NATS options, connection and JetStream context of one
 * session.  The credentials (stream.credentials: "user:password", else a
 * token) are handed to libnats and never printed; the server URLs hold
 * none (the flow file refuses user info in them).
 *
 * Fails.  Every JetStream request waits at most JETSTREAM_API_WAIT_MS,
 * every connection attempt JETSTREAM_CONNECT_MS per server: a server down
 * or a quorum lost is reported (EXIT_UNAVAILABLE, logged once with the
 * servers named and a hint) within seconds, never waited out.
 */
#ifndef TRELLARA_JETSTREAM_SESSION_H
#define TRELLARA_JETSTREAM_SESSION_H

#include "trellara/config.h"
#include "trellara/jetstream_policy.h"
#include "trellara/stream.h"

#include <nats/nats.h>
#include <stdbool.h>

#define JETSTREAM_CONNECT_MS 2000
#define JETSTREAM_API_WAIT_MS 5000
#define JETSTREAM_RECONNECT_WAIT_MS 250

struct jetstream_session {
	natsOptions *opts;   /* owned */
	natsConnection *nc;  /* owned */
	jsCtx *js;           /* owned */
	char *servers;       /* owned: "nats://a:1, nats://b:2", for messages */
	char connected[256]; /* the server the connection went to */
};

/* Connects to stream.servers as client name (reconnecting to another
 * server after a loss if reconnect): EXIT_OK, or EXIT_UNAVAILABLE
 * (logged, naming the servers and never the credentials).  Close the
 * session whatever the result. */
int jetstream_session_open(const struct flow_config *c, const char *name, bool reconnect,
			   struct jetstream_session *s);
void jetstream_session_close(struct jetstream_session *s);

/* Looks the stream up: EXIT_OK with *si (NULL when there is none), or
 * EXIT_UNAVAILABLE (logged: no answer, or no leader, or too few replicas
 * current for a quorum). */
int jetstream_session_stream_info(const struct jetstream_session *s, const char *stream, jsStreamInfo **si);

/* A JetStream request that failed (not "no such stream"): logged, naming
 * the server that was asked and what may be wrong; returns
 * EXIT_UNAVAILABLE.  what: "the stream's info cannot be had", ... */
int jetstream_session_request_failed(const struct jetstream_session *s, const char *stream, const char *what,
				     natsStatus st, jsErrCode jerr);
/* libnats' last error text without its "(file.c:123): " prefix. */
const char *jetstream_session_error_text(natsStatus st);

/* The servers' configuration of a stream, as the policy reads it
 * (subjects borrowed from cfg), and what the flow wants. */
void jetstream_session_settings(const jsStreamConfig *cfg, struct jetstream_stream_settings *out);
void jetstream_session_wanted(const struct flow_config *c, struct jetstream_wanted *want);
enum jetstream_storage jetstream_session_storage(jsStorageType t);
enum jetstream_retention jetstream_session_retention(jsRetentionPolicy p);

/* An existing stream's settings against the policy: EXIT_OK, or
 * EXIT_CONFIG (logged with name, naming the setting and init's hint). */
int jetstream_session_accept(const struct flow_config *c, const jsStreamInfo *si, const char *name);

/* A message's data as a trellara frame: NULL when it is one (*h
 * decoded: header, length, CRC; then the payload through the frame
 * codec, inflated into buf when compressed: *payload, *h as returned),
 * else why not (a static string). */
const char *jetstream_session_frame(const uint8_t *data, size_t len, struct frame_header *h, struct frame_buffer *buf,
				    const uint8_t **payload, bool *compressed);

/* The stream's binding, in every message capture publishes. */
#define JETSTREAM_HDR_SYSTEM "Trellara-System-Identifier"
#define JETSTREAM_HDR_DATABASE "Trellara-Database"
#define JETSTREAM_HDR_SLOT "Trellara-Slot"
#define JETSTREAM_HDR_TIMELINE "Trellara-Timeline"
#define JETSTREAM_HDR_START_LSN "Trellara-Start-LSN" /* where the stream's data begins in the source */
/* A JetStream stream's instance id ("jetstream:NAME:CREATED", the
 * creation time in ns): a stream deleted and created again is another. */
char *jetstream_session_stream_id(const struct flow_config *c, const jsStreamInfo *si);
/* A header's value, newly allocated; NULL when m has none or it is empty. */
char *jetstream_session_header(natsMsg *m, const char *key);

/* The consumer groups' positions: stream "<stream.name>-groups", one
 * subject "<stream.subject>.groups.<group>" a group, holding its last
 * position only (the next offset it needs, as decimal text).  They
 * mirror the target checkpoints for retention and inspection; the
 * checkpoint stays the truth.  Both strings newly allocated. */
char *jetstream_session_groups_stream(const struct flow_config *c);
char *jetstream_session_group_subject(const struct flow_config *c, const char *group); /* NULL: the wildcard */
/* Creates the groups' stream unless it exists: EXIT_OK, else logged. */
int jetstream_session_groups_ensure(const struct jetstream_session *s, const struct flow_config *c);
/* EXIT_OK (*exists false when the group has no position yet),
 * EXIT_DATAERR or EXIT_UNAVAILABLE (logged). */
int jetstream_session_group_get(const struct jetstream_session *s, const struct flow_config *c, const char *group,
			uint64_t *position, bool *exists);
/* EXIT_OK once a quorum stored it, else EXIT_UNAVAILABLE (not logged). */
int jetstream_session_group_set(const struct jetstream_session *s, const struct flow_config *c, const char *group,
			uint64_t position);

#endif
