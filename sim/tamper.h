/*
 * tamper.h - runs outside the world (tamper.c): chunk sets damaged between
 * capture and apply, a lost Relation message, a table without identity.
 */
#ifndef TRELLARA_SIM_TAMPER_H
#define TRELLARA_SIM_TAMPER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum sim_tamper {
	SIM_TAMPER_MISSING_CHUNK,       /* the manifest lists a chunk that never came */
	SIM_TAMPER_MANIFEST_FIRST,      /* the manifest arrives before its chunks */
	SIM_TAMPER_OUT_OF_ORDER,        /* chunks 1 and 2 swapped */
	SIM_TAMPER_CHANGED_BYTES,       /* a chunk's bytes differ from what the manifest's checksum says */
	SIM_TAMPER_CONFLICTING_MANIFEST,/* a second manifest that disagrees with the first */
	SIM_TAMPER_NO_BARRIER,          /* chunks published, manifest and marker never; more follows */
};

struct sim_tamper_result {
	int exit_code;    /* apply's: EXIT_DATAERR expected */
	bool quarantined; /* a chunk_integrity entry */
	size_t chunks;    /* in the damaged set */
	char detail[400];
};

/* One run; false (with detail) when apply did not fail closed. */
bool sim_tamper_run(enum sim_tamper kind, uint64_t seed, struct sim_tamper_result *r);

/* A Relation message lost before the rows that need it: capture must
 * refuse the rows (exit 65) and the stream hold nothing of that
 * transaction or after it; false (with detail) otherwise. */
bool sim_missing_relation_run(uint64_t seed, char *detail, size_t detail_len);

/* A flow table renamed (sim_renamed_relation_run) or dropped and created
 * again (sim_recreated_relation_run) on the model source while capture
 * streams, capture's core bound to the tables' OIDs as capture binds them
 * from pg_class when it connects: the core must stop (78) at the first
 * Relation message that shows the change, asking for a status update,
 * with nothing of that transaction or after it in the stream or
 * acknowledged, and every transaction before it durable; false (with
 * detail) otherwise. */
bool sim_renamed_relation_run(uint64_t seed, char *detail, size_t detail_len);
bool sim_recreated_relation_run(uint64_t seed, char *detail, size_t detail_len);

/* A table published without a replica identity (model_source's
 * no_identity_table): its first update or delete must stop apply with a
 * quarantine naming it ("has no key"), every transaction before it
 * applied and nothing of it (no row guessed); false (with detail)
 * otherwise. */
bool sim_no_identity_run(uint64_t seed, char *detail, size_t detail_len);

#endif
