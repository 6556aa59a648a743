/*
 * capture_internal.h - what capture.c (the replication loop) and
 * capture_connect.c (what capture checks each time it connects, before it
 * streams) share: the run's state and the checks the loop calls.
 */
#ifndef TRELLARA_CAPTURE_INTERNAL_H
#define TRELLARA_CAPTURE_INTERNAL_H

#include "capture.h"
#include "../trellara-contract-test/contract.h"

#include "trellara/metrics.h"
#include "trellara/notify.h"
#include "trellara/pgconn.h"
#include "trellara/pgoutput.h"
#include "trellara/slot_policy.h"

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

struct capture_core;
struct capture_jetstream;

struct capture {
	const struct capture_options *o;
	const struct flow_config *cfg;
	struct capture_stats *stats;
	char *flow;                   /* owned */
	struct capture_core *core;    /* owned: the stream side and the ack policy */
	struct capture_jetstream *js; /* the core's sink on a JetStream stream (NULL: the local stream) */
	const char *stream_name;      /* the stream, in messages */
	PGconn *conn;
	unsigned int rng;             /* backoff jitter */
	PGconn *target;               /* the run check (not with --start-now) */
	char run_id[128];
	bool run_handoff_ready;       /* move the run to streaming once streaming */
	struct notify_watchdog watchdog;
	struct metrics_publisher metrics; /* observability.metrics_dir/capture.prom */
	bool ready_sent;
	bool slot_existed;            /* ensure_slot found it (did not create it) */
	uint64_t slot_confirmed_lsn;  /* its confirmed_flush_lsn then */
	enum slot_verdict slot_verdict; /* ensure_slot's last answer */
	uint64_t promotions;          /* timeline changes followed */
	struct pgconn_failures failures; /* failed connections and ended streaming sessions, by cause */
	struct contract_fingerprint pin; /* owned: dataset.contract pinned, the pin checked at start */
	bool in_stream_block;         /* between Stream Start and Stream Stop (for decoding a Relation message) */
	struct pgoutput_message relation_msg; /* owned scratch */
};

/* A connection to the source failed: counted by cause (pgconn_failures),
 * the metrics written at once. */
void capture_count_connect_failure(struct capture *c);

/* Each (re)connection, before streaming (capture_connect.c).  Each
 * returns EXIT_OK, an exit code for a failure retrying cannot fix, or -1
 * for one worth a reconnect (capture_ensure_slot only). */
/* The source is the system and database the stream is bound to. */
int capture_check_identity(struct capture *c, const struct pg_identity *id);
/* The flow tables exist (and are bound, relbind.h); the slot is usable,
 * or is created (--start-now). */
int capture_ensure_slot(struct capture *c, const struct pg_identity *id);
/* The stream follows this slot and timeline, or is bound to them now. */
int capture_check_stream_binding(struct capture *c, const struct pg_identity *id);

#endif
