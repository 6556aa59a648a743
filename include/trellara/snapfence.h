/*
 * snapfence.h - the source at an exported snapshot and the target held
 * at the same LSN (DESIGN §9), for the programs that read both sides at
 * one point: trellara-verify (compares) and trellara-repair-plan (copies
 * rows).
 *
 * snapfence_set() first holds applyd at the source's current position P
 * (the flow's session-bound fence at P, FENCE_BY_VERIFY: it stands only
 * while the target session lives, and a trellara.fence logical message
 * committed on the source: capture records a durable watermark past it at
 * once, so applyd holds even on an idle source), then creates a temporary
 * logical slot exporting a snapshot at its consistent point L (at or
 * after P, so applyd, held at P, cannot pass it), moves the fence to L,
 * emits the message again and waits until applyd holds exactly at L.  The
 * pause point NAME.before_fence (fault.h) lies between reading P and
 * setting the first fence, NAME.after_slot between the slot and the
 * move.  Should applyd have committed past the first fence before it
 * stood (a batch open at the time, under load), it is held again at the
 * source's new position (up to five times: no snapshot was taken yet);
 * past the second one (it cannot, held at P), the slot is dropped and
 * everything starts again (three attempts).  snapfence_source_begin() opens the source
 * transaction at the snapshot.  snapfence_release() removes the fence and
 * drops the slot (its session); it is safe to call on every exit path.
 *
 * Failures are logged once here; the functions return 0 or an exit code
 * of defaults.h: 69 a server unavailable, 75 the fence is someone else's
 * or applyd did not reach it in time (or stopped by a signal), 78 the
 * source role may not call pg_logical_emit_message.
 */
#ifndef TRELLARA_SNAPFENCE_H
#define TRELLARA_SNAPFENCE_H

#include "trellara/checkpoint.h"
#include "trellara/config.h"

#include <libpq-fe.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

struct snapfence {
	PGconn *repl; /* owned: the temporary slot's session */
	bool fenced;
	uint64_t lsn;       /* L: the slot's consistent point, the fence */
	char snapshot[128]; /* the exported snapshot's name */
};

struct snapfence_options {
	const struct flow_config *cfg;
	const struct flow_ids *ids;
	const char *name; /* "verify", "repair": the slot (trellara_NAME_PID) and the fence message say it */
	int timeout_s;       /* how long applyd may take to reach the fence */
	volatile sig_atomic_t *stop;
	/* opens the replication connection to the source (NULL: failed, logged) */
	PGconn *(*connect_repl)(void *arg);
	void *arg;
};

/* The session settings under which both sides render values alike
 * (time zone, date style, float digits, bytea as hex...). */
int snapfence_session_settings(PGconn *conn);

int snapfence_set(struct snapfence *f, PGconn *src, PGconn *dst, const struct snapfence_options *o);
/* BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY at the snapshot: 0 or -1 (logged). */
int snapfence_source_begin(PGconn *src, const struct snapfence *f);
void snapfence_release(struct snapfence *f, PGconn *dst, const struct flow_config *cfg, const struct flow_ids *ids);

#endif
