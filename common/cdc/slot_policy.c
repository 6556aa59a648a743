/*
 * slot_policy.c - capture's decision about the replication slot it finds
 * (see slot_policy.h).  Pure.
 */
#include "trellara/slot_policy.h"

#include "trellara/defaults.h"

#include <string.h>

static bool invalidated(const struct slot_facts *f)
{
	return (f->wal_status && strcmp(f->wal_status, "lost") == 0) ||
	       (f->invalidation_reason && f->invalidation_reason[0] != '\0') || f->conflicting;
}

enum slot_verdict slot_policy_decide(const struct slot_facts *f)
{
	if (f->exists) {
		if (!f->logical_pgoutput)
			return SLOT_WRONG_KIND;
		return invalidated(f) ? SLOT_INVALIDATED : SLOT_USE;
	}
	if (f->stream_holds_changes) {
		/* never a new slot for a stream with changes, --start-now or not */
		if (f->stream_timeline && f->source_timeline && f->source_timeline != f->stream_timeline)
			return SLOT_LOST_AT_PROMOTION;
		return SLOT_GONE;
	}
	return f->start_now ? SLOT_CREATE : SLOT_NOT_CREATED;
}

int slot_policy_exit_code(enum slot_verdict v)
{
	switch (v) {
	case SLOT_USE:
	case SLOT_CREATE:
		return EXIT_OK;
	case SLOT_NOT_CREATED:
	case SLOT_WRONG_KIND:
		return EXIT_CONFIG;
	case SLOT_LOST_AT_PROMOTION:
	case SLOT_GONE:
	case SLOT_INVALIDATED:
		return EXIT_DATAERR;
	}
	return EXIT_CONFIG;
}

const char *slot_policy_name(enum slot_verdict v)
{
	switch (v) {
	case SLOT_USE: return "use";
	case SLOT_CREATE: return "create";
	case SLOT_NOT_CREATED: return "not_created";
	case SLOT_WRONG_KIND: return "wrong_kind";
	case SLOT_LOST_AT_PROMOTION: return "lost_at_promotion";
	case SLOT_GONE: return "gone";
	case SLOT_INVALIDATED: return "invalidated";
	}
	return "unknown";
}
