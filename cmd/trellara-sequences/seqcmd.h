/*
 * seqcmd.h - trellara-sequences' commands (trellara-sequences(1)): sync
 * and list.  Each returns an exit code.
 */
#ifndef TRELLARA_SEQCMD_H
#define TRELLARA_SEQCMD_H

#include "trellara/config.h"

#include <stdbool.h>
#include <stdint.h>

struct seqcmd_options {
	const struct flow_config *cfg;
	uint64_t margin; /* sync: increments past the source's value */
	bool json;
};

int seqcmd_sync(const struct seqcmd_options *o);
int seqcmd_list(const struct seqcmd_options *o);

#endif
