/*
 * inspect_target.c - did applyd apply the transaction?  The target's
 * apply checkpoint answers (DESIGN §8, exactly once): a transaction
 * whose commit LSN is at or below last_commit_lsn was applied (or passed
 * as a duplicate, or filtered below a table's copy: the target holds its
 * effect either way).  Read-only, in a read-only session; a target that
 * cannot be asked is "unknown", never a failure of the inspection.
 */
#include "inspect.h"

#include "trellara/checkpoint.h"
#include "trellara/config.h"
#include "trellara/lsn.h"
#include "trellara/pgconn.h"

#include <stdio.h>
#include <stdlib.h>

#define INSPECT_CONNECT_TIMEOUT_SECONDS "10"

enum inspect_applied inspect_target_applied(const struct flow_config *config, uint32_t xid, uint64_t commit_lsn,
					    char *detail, size_t detail_len)
{
	char error[512] = "";
	enum inspect_applied result = INSPECT_APPLIED_UNKNOWN;
	struct quarantine_entry *q = NULL;
	int n_q = 0;
	struct pgconn_options po = { .application_name = "trellara-inspect-transaction", .role = "target",
				     .connect_timeout = INSPECT_CONNECT_TIMEOUT_SECONDS, .report = PGCONN_QUIET,
				     .error = error, .error_len = sizeof error };
	PGconn *conn = pgconn_open(config->target_database_url, &po);
	if (!conn) {
		snprintf(detail, detail_len, "target unreachable: %s", error);
		goto out;
	}
	if (pgconn_command(conn, "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY; SET statement_timeout = 30000") <
	    0) {
		snprintf(detail, detail_len, "target: cannot set up a read-only session: %s", pgconn_message(conn));
		goto out;
	}
	bool present = false;
	if (checkpoint_schema_present(conn, config->checkpoint_schema, &present, error, sizeof error) < 0) {
		snprintf(detail, detail_len, "target: %s", error);
		goto out;
	}
	if (!present) {
		snprintf(detail, detail_len, "the target has no checkpoint schema \"%s\" yet: applyd has not run",
			 config->checkpoint_schema);
		result = INSPECT_NOT_APPLIED;
		goto out;
	}
	struct flow_ids ids = { config->source_id, config->dataset_id, config->consumer_group };
	struct checkpoint_observed cp;
	if (checkpoint_observe(conn, config->checkpoint_schema, &ids, &cp, error, sizeof error) < 0 ||
	    checkpoint_quarantine_observe(conn, config->checkpoint_schema, &ids, &q, &n_q, error, sizeof error) < 0) {
		snprintf(detail, detail_len, "target: %s", error);
		goto out;
	}
	for (int i = 0; i < n_q; i++)
		if (q[i].xid == xid && q[i].commit_lsn == commit_lsn) {
			snprintf(detail, detail_len, "quarantined (entry %lld, %s): %s", (long long)q[i].id, q[i].state,
				 q[i].reason);
			result = INSPECT_NOT_APPLIED;
			goto out;
		}
	char a[LSN_FORMAT_LEN];
	if (!cp.exists) {
		snprintf(detail, detail_len, "no apply checkpoint of consumer group \"%s\" yet", config->consumer_group);
		result = INSPECT_NOT_APPLIED;
	} else if (commit_lsn <= cp.cp.last_commit_lsn) {
		snprintf(detail, detail_len, "the apply checkpoint's last commit LSN %s is at or past it",
			 lsn_format(cp.cp.last_commit_lsn, a));
		result = INSPECT_APPLIED;
	} else {
		snprintf(detail, detail_len, "the apply checkpoint's last commit LSN %s is below it",
			 lsn_format(cp.cp.last_commit_lsn, a));
		result = INSPECT_NOT_APPLIED;
	}
out:
	free(q);
	if (conn)
		PQfinish(conn);
	return result;
}
