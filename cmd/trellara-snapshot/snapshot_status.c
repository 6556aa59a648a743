/*
 * snapshot_status.c - "trellara snapshot status": the run, each table's
 * progress and the next action, as text or JSON (snapshot.h).
 */
#include "snapshot_int.h"

#include "trellara/checkpoint.h"
#include "trellara/defaults.h"
#include "trellara/fault.h"
#include "trellara/jsonw.h"
#include "trellara/log.h"
#include "trellara/lsn.h"
#include "trellara/pgconn.h"
#include "trellara/runs.h"
#include "trellara/strbuf.h"
#include "trellara/textcodec.h"
#include "trellara/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


static const char *next_action(const struct run_row *run, int not_copied)
{
	if (!run->exists)
		return "run \"trellara snapshot --config FILE\" to copy the tables";
	switch (run->state) {
	case RUN_STREAM_HANDOFF_READY:
		return "start trellara capture and trellara applyd";
	case RUN_STREAMING:
		return "keep capture and applyd running; run trellara verify to prove convergence";
	case RUN_VERIFIED:
		return "nothing: the copy is verified; verify again at any time";
	default:
		return not_copied ? "run \"trellara snapshot --config FILE\" again: it resumes with the tables not copied yet"
				  : "run \"trellara snapshot --config FILE\" again to finish the handoff";
	}
}

int snapshot_status(const struct snapshot_options *o)
{
	const struct flow_config *cfg = o->cfg;
	PGconn *dst = pgconn_connect(cfg->target_database_url, PGCONN_NORMAL, "trellara-snapshot", "target");
	int code = EXIT_UNAVAILABLE;
	if (!dst || checkpoint_migrate(dst, cfg->checkpoint_schema) < 0)
		goto out;
	struct run_row run;
	if (runs_load(dst, cfg->checkpoint_schema, cfg->source_id, cfg->dataset_id, o->run_id, &run) < 0)
		goto out;
	struct flow_ids ids = snapshot_flow_ids(cfg);
	struct snapshot_progress *rows;
	int n_rows;
	if (checkpoint_progress_list(dst, cfg->checkpoint_schema, &ids, run.run_id, &rows, &n_rows) < 0)
		goto out;
	int not_copied = 0;
	char l[LSN_FORMAT_LEN];
	struct jsonw w;
	jsonw_init(&w, stdout, false);
	if (o->json) {
		char *flow = config_flow_id(cfg);
		jsonw_open(&w, NULL, '{');
		jsonw_str(&w, "flow", flow);
		free(flow);
		if (!run.exists) {
			jsonw_null(&w, "run");
		} else {
			jsonw_open(&w, "run", '{');
			jsonw_str(&w, "run_id", run.run_id);
			jsonw_str(&w, "state", run_state_name(run.state));
			jsonw_str(&w, "slot", run.slot_name);
			jsonw_lsn(&w, "consistent_lsn", run.consistent_lsn != 0, run.consistent_lsn);
			jsonw_str(&w, "failure_reason", *run.failure_reason ? run.failure_reason : NULL);
			jsonw_str(&w, "updated_at", run.updated_at);
			jsonw_close(&w, '}');
		}
		jsonw_open(&w, "tables", '[');
	} else if (run.exists) {
		printf("run %s: %s (slot %s, consistent point %s, updated %s)\n", run.run_id, run_state_name(run.state),
		       *run.slot_name ? run.slot_name : "-", run.consistent_lsn ? lsn_format(run.consistent_lsn, l) : "-",
		       run.updated_at);
		if (*run.failure_reason)
			printf("failure: %s\n", run.failure_reason);
	} else {
		printf("no snapshot run for flow %s:%s\n", cfg->source_id, cfg->dataset_id);
	}
	for (size_t i = 0; i < cfg->n_tables; i++) {
		char name[300];
		snapshot_table_names(cfg, i, name, sizeof name);
		const struct snapshot_progress *r = NULL;
		for (int k = 0; k < n_rows; k++)
			if (strcmp(rows[k].relation, name) == 0)
				r = &rows[k];
		const char *state = r ? r->state : "pending";
		if (strcmp(state, "copied") != 0)
			not_copied++;
		char copied_rows[24], watermark[LSN_FORMAT_LEN] = "";
		snprintf(copied_rows, sizeof copied_rows, "%" PRIu64, r ? r->copied_rows : 0);
		if (r && r->has_watermark)
			lsn_format(r->watermark_lsn, watermark);
		/* a split table's ranges (snapshot_range_progress), when it has a plan */
		struct snapshot_range *ranges = NULL;
		int n_ranges = 0, ranges_copied = 0;
		if (run.exists &&
		    checkpoint_ranges_list(dst, cfg->checkpoint_schema, &ids, run.run_id, name, &ranges, &n_ranges) < 0) {
			free(rows);
			goto out;
		}
		for (int k = 0; k < n_ranges; k++)
			ranges_copied += ranges[k].copied;
		free(ranges);
		if (o->json) {
			jsonw_open(&w, NULL, '{');
			jsonw_str(&w, "table", name);
			jsonw_str(&w, "state", state);
			jsonw_u64(&w, "rows", true, r ? r->copied_rows : 0);
			jsonw_str(&w, "watermark_lsn", *watermark ? watermark : NULL);
			jsonw_u64(&w, "ranges", n_ranges > 0, (uint64_t)n_ranges);
			jsonw_u64(&w, "ranges_copied", n_ranges > 0, (uint64_t)ranges_copied);
			jsonw_close(&w, '}');
		} else if (n_ranges > 0) {
			printf("  %-40s %-15s rows %-10s watermark %s ranges %d/%d\n", name, state, copied_rows,
			       *watermark ? watermark : "-", ranges_copied, n_ranges);
		} else {
			printf("  %-40s %-15s rows %-10s watermark %s\n", name, state, copied_rows, *watermark ? watermark : "-");
		}
	}
	free(rows);
	const char *action = next_action(&run, not_copied);
	if (o->json) {
		jsonw_close(&w, ']');
		jsonw_str(&w, "next_action", action);
		jsonw_close(&w, '}');
		putchar('\n');
	} else {
		printf("next: %s\n", action);
	}
	code = EXIT_OK;
out:
	PQfinish(dst);
	return code;
}
