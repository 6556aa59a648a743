/*
 * repair.h - trellara-repair-plan: from a DIVERGED verify result (its
 * --format json), the exact repair of each divergent key, printed for
 * review and applied only when asked.
 *
 * The plan never guesses: a table verify could not compare, a table
 * without a key, a key not listed exactly (key_values), a count larger
 * than the keys listed, or more than max_keys divergent keys get the
 * reseed of the table instead of row repairs.
 *
 * Applied (--apply): behind verify's fence (snapfence.h) the source is
 * read at the exported snapshot L and, in ONE target transaction, every
 * divergent key of the target is made what the source holds at L
 * (deleted by key, the source row inserted when there is one; values as
 * parameters, identifiers quoted, as a replica like applyd); the repair
 * is recorded in the checkpoint schema's repairs table in that same
 * transaction; the fence is released; then a fresh verify of every table
 * of the flow gives the verdict (and may promote a failed run again).
 *
 * Exit codes: 0 a plan (not applied), or applied and CONVERGED; 1 applied
 * and still DIVERGED, or a table needs its reseed; 65 the file is not a
 * verify result (named with the field); 66 it cannot be read; 69/75/78 as
 * verify.
 */
#ifndef TRELLARA_REPAIR_H
#define TRELLARA_REPAIR_H

#include "trellara/config.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

struct repair_options {
	const struct flow_config *cfg;
	const char *from; /* the verify result (JSON) */
	bool apply;
	uint64_t max_keys;
	bool json;
	int fence_timeout_s;
	volatile sig_atomic_t *stop;
};

int repair_plan_run(const struct repair_options *o);

#endif
