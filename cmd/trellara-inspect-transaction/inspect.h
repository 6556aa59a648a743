/*
 * inspect.h - one source transaction as the stream holds it
 * (trellara-inspect-transaction(1)): its frames and their checksums, the
 * tables it changes, the chunk manifest and the commit marker's binding
 * to it (judged by apply_chunks.h, the checks applyd makes), and whether
 * the target's apply checkpoint covers it.
 *
 * inspect_run reads frames through frame_walk.h (a checksum mismatch is
 * reported, not a stop), never writes anything, and returns the exit
 * code: 0 every check passed, 1 no transaction at that commit LSN or
 * offset, 65 a checksum mismatch, a broken binding or a stream it cannot
 * read past (each named: frame, offset, expected and found).  The
 * target's answer never changes the exit code: an unreachable target is
 * "unknown".
 */
#ifndef TRELLARA_INSPECT_H
#define TRELLARA_INSPECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct flow_config;

struct inspect_options {
	const char *stream_dir;           /* a local stream, or NULL */
	const char *frame_file;           /* a file of frames, or NULL */
	bool have_commit_lsn, have_offset;
	uint64_t commit_lsn, offset;
	const struct flow_config *config; /* the flow (its target's checkpoint), or NULL */
	bool json;
};

int inspect_run(const struct inspect_options *o);

/* What the target's apply checkpoint says of (xid, commit_lsn). */
enum inspect_applied { INSPECT_APPLIED, INSPECT_NOT_APPLIED, INSPECT_APPLIED_UNKNOWN };
enum inspect_applied inspect_target_applied(const struct flow_config *config, uint32_t xid, uint64_t commit_lsn,
					    char *detail, size_t detail_len);

#endif
