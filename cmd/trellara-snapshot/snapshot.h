/*
 * snapshot.h - trellara-snapshot's commands: run (DESIGN §6), status,
 * reseed.  Each returns an exit code.
 */
#ifndef TRELLARA_SNAPSHOT_H
#define TRELLARA_SNAPSHOT_H

#include "trellara/config.h"

#include <stdbool.h>

struct snapshot_options {
	const struct flow_config *cfg;
	const char *run_id;   /* NULL: "initial" for a run, the latest for status */
	bool force;
	bool create_tables;
	bool json;
	const char *table;    /* reseed: SCHEMA.TABLE */
};

int snapshot_run(const struct snapshot_options *o);
int snapshot_status(const struct snapshot_options *o);
int snapshot_reseed(const struct snapshot_options *o);

#endif
