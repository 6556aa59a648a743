/*
 * cutcmd.h - trellara-cutover (trellara-cutover(1), DESIGN §12): the
 * last step of a migration, resumable.  The decisions are cutplan.h's;
 * this module observes (the cutover row, the quarantine, the
 * supervisor's state file, the slot, the apply checkpoint), acts (the
 * source's lock, the wait, the sequences, verify, SIGTERM to the
 * supervisor), and records each step in the cutover row (cutover.h)
 * before the next begins.
 *
 * verify is verify.h's verify_run(), linked in (the same code and
 * report as trellara-verify).  Returns an exit code; every failure is
 * logged where it is found.
 */
#ifndef TRELLARA_CUTCMD_H
#define TRELLARA_CUTCMD_H

#include "trellara/config.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

/* defaults of the options (the man page states the same) */
#define CUTCMD_DEFAULT_APPLY_TIMEOUT_S 300
#define CUTCMD_DEFAULT_STOP_TIMEOUT_S 120
#define CUTCMD_MAX_TIMEOUT_S 86400
/* ending the source's other sessions: how long to wait for them to go */
#define CUTCMD_SESSION_END_TIMEOUT_S 30

struct cutcmd_options {
	const struct flow_config *cfg;
	bool abort;
	bool lock_source;
	bool keep_locked;
	bool have_margin; /* --sequence-margin given; else cutplan_default_margin() */
	uint64_t margin;
	int apply_timeout_s, stop_timeout_s, fence_timeout_s;
	volatile sig_atomic_t *stop;
};

int cutcmd_run(const struct cutcmd_options *o);

#endif
