#include "trellara/sqlstate.h"
#include <stdbool.h>
#include <stddef.h>

#include <string.h>

static bool listed(const char *sqlstate, const char *const *states, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(sqlstate, states[i]) == 0)
			return true;
	return false;
}

enum sqlstate_class sqlstate_classify(const char *sqlstate)
{
	static const char *const connection[] = {
		"57P01", "57P02", "57P03", /* admin shutdown, crash shutdown, cannot connect now */
	};
	static const char *const transient[] = {
		"40001", "40P01", "40003", /* serialization failure, deadlock, completion unknown */
		"55P03",                   /* lock not available: lock_timeout */
		"57014",                   /* query canceled: statement_timeout */
		"25006",                   /* read-only transaction: the target is a standby */
		"58030",                   /* I/O error */
		"53100", "53300",          /* disk full, too many connections */
		/* not 53200 (out of memory) nor 53400 (a configured limit such
		 * as max_locks_per_transaction): the transaction itself can
		 * cause them, and retrying it would only fail again */
	};
	if (!sqlstate || !*sqlstate)
		return SQLSTATE_CLASS_NONE;
	if (strncmp(sqlstate, "08", 2) == 0 || listed(sqlstate, connection, sizeof connection / sizeof *connection))
		return SQLSTATE_CLASS_CONNECTION;
	if (listed(sqlstate, transient, sizeof transient / sizeof *transient))
		return SQLSTATE_CLASS_TRANSIENT;
	if (strncmp(sqlstate, "28", 2) == 0 || strcmp(sqlstate, "42501") == 0)
		return SQLSTATE_CLASS_PERMISSION;
	return SQLSTATE_CLASS_DATA;
}

const char *sqlstate_class_name(enum sqlstate_class c)
{
	switch (c) {
	case SQLSTATE_CLASS_NONE: return "none";
	case SQLSTATE_CLASS_CONNECTION: return "connection";
	case SQLSTATE_CLASS_TRANSIENT: return "transient";
	case SQLSTATE_CLASS_PERMISSION: return "permission";
	case SQLSTATE_CLASS_DATA: return "data";
	}
	return "data";
}

enum sqlstate_end sqlstate_end_cause(const char *sqlstate)
{
	if (!sqlstate || !*sqlstate)
		return SQLSTATE_END_LOST;
	if (strcmp(sqlstate, "57P01") == 0)
		return SQLSTATE_END_TERMINATED;
	if (strcmp(sqlstate, "57P02") == 0)
		return SQLSTATE_END_CRASHED;
	if (strncmp(sqlstate, "08", 2) == 0)
		return SQLSTATE_END_LOST;
	return SQLSTATE_END_ERROR;
}

const char *sqlstate_end_name(enum sqlstate_end e)
{
	switch (e) {
	case SQLSTATE_END_TERMINATED: return "terminated";
	case SQLSTATE_END_CRASHED: return "server_crashed";
	case SQLSTATE_END_LOST: return "connection_lost";
	case SQLSTATE_END_ERROR: return "error";
	}
	return "error";
}
