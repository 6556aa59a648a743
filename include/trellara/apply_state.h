/*
 * apply_state.h - the applier's durable state as the checkpoint schema
 * holds it (DESIGN §5), without libpq: the apply engine, its targets
 * (libpq and the simulator's model) and the checkpoint module share
 * these structs.
 */
#ifndef TRELLARA_APPLY_STATE_H
#define TRELLARA_APPLY_STATE_H

#include <stdint.h>

struct flow_ids {
	const char *source_id;
	const char *dataset_id;
	const char *group; /* consumer group */
};

struct apply_checkpoint {
	uint64_t last_commit_lsn;
	uint32_t last_xid;
	uint64_t stream_offset;       /* next offset after the last applied transaction */
	uint64_t applied_through_lsn; /* last commit or watermark the applier passed */
	uint64_t applied_transactions, applied_changes, skipped_duplicates;
	/* the stream the checkpoint's offsets belong to (empty: not bound yet,
	 * a checkpoint written before version 2) */
	char stream_id[64];
	char slot_name[128];
	char system_identifier[32];
	uint32_t timeline;
};

struct quarantine_entry {
	int64_t id;
	uint32_t xid;
	uint64_t commit_lsn;
	uint64_t stream_offset;
	char reason[64];
	char detail[1024];
	char state[24];
	char created_at[40];
	double age_seconds; /* now() - created_at, on the server */
};

#endif
