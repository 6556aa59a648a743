#include "trellara/runstate.h"

#include "trellara/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const run_state_names[RUN_STATE_COUNT] = {
	[RUN_PLANNED] = "planned",
	[RUN_SLOT_CREATED] = "slot_created",
	[RUN_SNAPSHOT_EXPORTED] = "snapshot_exported",
	[RUN_COPYING_TABLE] = "copying_table",
	[RUN_COPY_COMPLETE] = "copy_complete",
	[RUN_STREAM_HANDOFF_READY] = "stream_handoff_ready",
	[RUN_STREAMING] = "streaming",
	[RUN_VERIFIED] = "verified",
	[RUN_FAILED_RECOVERABLE] = "failed_recoverable",
};

/* The enum's underlying type is implementation-defined (may be unsigned):
 * compare through int so that both negative and large values are caught. */
static bool run_state_valid(enum run_state s)
{
	int v = (int)s;
	return v >= 0 && v < RUN_STATE_COUNT;
}

const char *run_state_name(enum run_state s)
{
	return run_state_valid(s) ? run_state_names[(int)s] : "unknown";
}

bool run_state_from_name(const char *name, enum run_state *s)
{
	if (!name)
		return false;
	for (int i = 0; i < RUN_STATE_COUNT; i++) {
		if (strcmp(name, run_state_names[i]) == 0) {
			if (s)
				*s = (enum run_state)i;
			return true;
		}
	}
	return false;
}

#if defined(__GNUC__)
__attribute__((format(printf, 5, 6)))
#endif
static int reject(char *err, size_t errlen, enum run_state from, enum run_state to, const char *fmt, ...)
{
	if (!err || errlen == 0)
		return -1;
	int n = snprintf(err, errlen, "run cannot move from %s to %s: ", run_state_name(from), run_state_name(to));
	if (n < 0) {
		err[0] = '\0';
		return -1;
	}
	if ((size_t)n >= errlen)
		return -1; /* truncated; snprintf terminated it */
	va_list ap;
	va_start(ap, fmt);
	errbuf_vsetf(err + n, errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

static bool has_text(const char *s)
{
	return s && s[0] != '\0';
}

int run_transition_check(enum run_state from, enum run_state to, const struct run_evidence *ev,
			 char *err, size_t errlen)
{
	if (err && errlen > 0)
		err[0] = '\0';

	/* 1. Valid states. */
	if (!run_state_valid(from))
		return reject(err, errlen, from, to, "state %d is not a run state", (int)from);
	if (!run_state_valid(to))
		return reject(err, errlen, from, to, "state %d is not a run state", (int)to);

	/* 2. The move itself. */
	if (to == from) {
		/* a. repeat: allowed, evidence checked below */
	} else if (from == RUN_FAILED_RECOVERABLE) {
		/* b. restart points; verified again after a recorded repair */
		if (to == RUN_VERIFIED) {
			if (!(ev && ev->repaired))
				return reject(err, errlen, from, to,
					      "a failed run is verified again only after a repair recorded since it failed");
		} else if (to != RUN_PLANNED && to != RUN_SLOT_CREATED && to != RUN_SNAPSHOT_EXPORTED &&
		    to != RUN_COPYING_TABLE)
			return reject(err, errlen, from, to,
				      "a failed run restarts only at planned, slot_created, snapshot_exported or copying_table");
	} else if (to == RUN_FAILED_RECOVERABLE) {
		/* c. and d. */
		if (from == RUN_VERIFIED && !(ev && ev->new_evidence))
			return reject(err, errlen, from, to,
				      "a verified run fails only on new evidence (a divergence found)");
	} else if ((int)to < (int)from) {
		/* f. backward (failed_recoverable is handled above on both sides) */
		return reject(err, errlen, from, to, "backward moves are not allowed");
	}
	/* e. forward, skips included: allowed, evidence checked below */

	/* 3. Evidence the target state needs. */
	if (to == RUN_PLANNED)
		return 0;

	const char *missing[3];
	int n_missing = 0;
	if (!(ev && has_text(ev->slot_name)))
		missing[n_missing++] = "slot name";
	if (!(ev && ev->consistent_lsn != 0))
		missing[n_missing++] = "consistent LSN";
	if (to == RUN_FAILED_RECOVERABLE && !(ev && has_text(ev->failure_reason)))
		missing[n_missing++] = "failure reason";

	switch (n_missing) {
	case 0:
		return 0;
	case 1:
		return reject(err, errlen, from, to, "%s is missing", missing[0]);
	case 2:
		return reject(err, errlen, from, to, "%s and %s are missing", missing[0], missing[1]);
	default:
		return reject(err, errlen, from, to, "%s, %s and %s are missing", missing[0], missing[1],
			      missing[2]);
	}
}

bool run_snapshot_schema_stable(const char *before, const char *at_snapshot, const char *after)
{
	return before && at_snapshot && after && strcmp(before, at_snapshot) == 0 && strcmp(at_snapshot, after) == 0;
}

bool run_range_reads_same(const char *hash_then, const char *hash_now)
{
	return has_text(hash_then) && has_text(hash_now) && strcmp(hash_then, hash_now) == 0;
}
