/*
 * inspect_internal.h - what inspect.c (the walks that find and read one
 * transaction) and inspect_print.c (its report) share: the view of the
 * transaction the walks build.
 */
#ifndef TRELLARA_INSPECT_INTERNAL_H
#define TRELLARA_INSPECT_INTERNAL_H

#include "inspect.h"

#include "trellara/apply_chunks.h"
#include "trellara/envelope.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct frame_rec {
	uint64_t offset;
	int type;
	uint16_t flags;
	bool compressed;
	uint32_t stored_length, payload_length;
	bool crc_ok;
	uint32_t crc_recorded, crc_found;
	char *file; /* owned */
	uint64_t position;
};

struct table_count {
	char *name; /* owned: "schema.name" */
	uint64_t inserts, updates, deletes, truncates;
};

struct tally {
	struct table_count *tables; /* owned */
	size_t n;
	uint64_t changes;
};

struct manifest_rec {
	bool present;
	uint64_t offset;
	int version;
	uint32_t crc, chunk_count;
	uint64_t total_changes;
	struct env_manifest_chunk *chunks; /* owned; offsets filled in for version 1 */
	uint64_t *chunk_offsets;           /* owned: where each chunk was found (version 1) */
	uint32_t n_tables;
	char **tables;                     /* owned */
};

enum binding { BINDING_NA, BINDING_OK, BINDING_BROKEN, BINDING_INCOMPLETE };

struct txn_view {
	bool identified;
	uint32_t xid;
	uint64_t commit_lsn, end_lsn;
	char *source_id; /* owned */
	struct frame_rec *frames; /* owned */
	size_t n_frames;
	const char *form;         /* "txn", "chunks", "pending_chunks", or NULL */
	struct tally tally;       /* the form's */
	struct tally set_tally;   /* the chunk set in progress */
	struct chunk_set cs;
	uint64_t *set_offsets;    /* owned: chunk offsets of the set in progress */
	size_t n_set_offsets;
	struct manifest_rec manifest;
	bool have_marker;
	uint64_t marker_offset;
	uint32_t marker_chunk_count, marker_crc;
	enum binding binding;
	char binding_detail[512];
	char **notes; /* owned */
	size_t n_notes;
};

/* The report of v, on standard output. */
void inspect_print_json(const struct txn_view *v, enum inspect_applied applied, const char *applied_detail);
void inspect_print_text(const struct txn_view *v, enum inspect_applied applied, const char *applied_detail);

#endif
