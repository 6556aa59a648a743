/*
 * prometheus.c - the status report as Prometheus samples (names listed in
 * trellara-status(1)).  What is unknown is left out, and
 * trellara_status_up{component=...} says which part could be read.
 */
#include "status.h"

#include <string.h>

#define G METRIC_GAUGE
#define C METRIC_COUNTER

static const char *const run_states[] = { "planned",       "slot_created",         "snapshot_exported",
					  "copying_table", "copy_complete",        "stream_handoff_ready",
					  "streaming",     "verified",             "failed_recoverable" };

int status_metrics(const struct status_report *r, struct metrics *m)
{
	const struct status_source *s = &r->source;
	const struct status_stream *st = &r->stream;
	const struct status_target *t = &r->target;
	const struct status_supervisor *sv = &r->supervisor;
	int rc = 0;
	const char *up = "whether trellara status could read this part of the flow (1) or not (0)";
	rc |= metrics_add_u64(m, "trellara_status_up", up, G, "component", "source", s->available);
	rc |= metrics_add_u64(m, "trellara_status_up", up, G, "component", "stream", st->available);
	rc |= metrics_add_u64(m, "trellara_status_up", up, G, "component", "target", t->available);
	rc |= metrics_add_u64(m, "trellara_status_up", up, G, "component", "supervisor", sv->available);
	if (st->jetstream && sv->daemons[0].exists && sv->daemons[0].has_broker)
		rc |= metrics_add_u64(m, "trellara_stream_broker_available",
				      "JetStream: 1 while the stream stores what capture publishes, 0 while it holds capture back (capture.prom)",
				      G, NULL, NULL, sv->daemons[0].broker_available);

	if (s->available) {
		rc |= metrics_add_u64(m, "trellara_source_wal_position_bytes", "the source's current WAL position (LSN as a byte number)",
				      G, NULL, NULL, s->wal_lsn);
		rc |= metrics_add_u64(m, "trellara_slot_exists", "whether the flow's replication slot exists", G, NULL, NULL,
				      s->slot_exists);
		if (s->slot_exists)
			rc |= metrics_add_u64(m, "trellara_slot_active", "whether a capture is connected to the slot", G, NULL, NULL,
					      s->slot_active);
		if (s->has_confirmed_flush)
			rc |= metrics_add_u64(m, "trellara_slot_confirmed_flush_position_bytes",
					      "the slot's confirmed_flush_lsn as a byte number: what capture acknowledged durable", G,
					      NULL, NULL, s->confirmed_flush_lsn);
		if (s->has_lag_bytes)
			rc |= metrics_add_u64(m, "trellara_slot_lag_bytes", "source WAL the slot has not confirmed yet", G, NULL,
					      NULL, s->lag_bytes);
		if (s->has_lag_seconds)
			rc |= metrics_add_double(m, "trellara_slot_lag_seconds",
						 "the source's measure of capture's flush lag (pg_stat_replication.flush_lag; 0 when caught up)",
						 G, NULL, NULL, s->lag_seconds);
		if (s->has_retained)
			rc |= metrics_add_u64(m, "trellara_slot_retained_wal_bytes", "WAL the source keeps for the slot", G, NULL,
					      NULL, s->retained_bytes);
	}
	rc |= metrics_add_u64(m, "trellara_slot_retained_wal_warn_bytes", "source.wal_retention_warn_bytes of the flow file",
			      G, NULL, NULL, r->cfg->wal_retention_warn_bytes);

	if (st->available) {
		rc |= metrics_add_u64(m, "trellara_stream_writer_active", "whether a capture holds the stream's writer lock", G,
				      NULL, NULL, st->writer_active);
		rc |= metrics_add_u64(m, "trellara_stream_corrupt", "whether the stream has an invalid frame before its end", G,
				      NULL, NULL, st->corrupt);
		rc |= metrics_add_u64(m, "trellara_stream_first_offset", "the first retained offset of the stream", G, NULL, NULL,
				      st->first_offset);
		rc |= metrics_add_u64(m, "trellara_stream_next_offset", "the offset the next frame will get", G, NULL, NULL,
				      st->next_offset);
		rc |= metrics_add_u64(m, "trellara_stream_frames", "frames retained in the stream", G, NULL, NULL,
				      st->next_offset - st->first_offset);
		rc |= metrics_add_u64(m, "trellara_stream_bytes", "valid bytes (frame headers and payloads) in the stream", G, NULL,
				      NULL, st->bytes);
		rc |= metrics_add_u64(m, "trellara_stream_segments", "segment files in the stream", G, NULL, NULL, st->segments);
		rc |= metrics_add_u64(m, "trellara_stream_group_pending_frames", "frames the applier's consumer group has not read",
				      G, NULL, NULL, st->group_pending);
		if (st->has_oldest)
			rc |= metrics_add_double(m, "trellara_stream_oldest_frame_age_seconds",
						 "age of the oldest retained frame (its append time)", G, NULL, NULL, st->oldest_age_seconds);
		if (st->has_newest)
			rc |= metrics_add_double(m, "trellara_stream_newest_frame_age_seconds",
						 "time since capture appended the last frame", G, NULL, NULL, st->newest_age_seconds);
		if (st->has_ack) {
			rc |= metrics_add_u64(m, "trellara_stream_acknowledged_position_bytes",
					      "highest source LSN durable in the stream (what capture acknowledges), as a byte number", G,
					      NULL, NULL, st->ack_lsn);
			rc |= metrics_add_double(m, "trellara_stream_acknowledged_age_seconds",
						 "time since that LSN became durable in the stream", G, NULL, NULL, st->ack_age_seconds);
		}
		if (st->has_pending_age)
			rc |= metrics_add_double(m, "trellara_stream_group_oldest_pending_age_seconds",
						 "age of the oldest frame the applier has not applied", G, NULL, NULL,
						 st->oldest_pending_age_seconds);
	}

	if (t->available && t->schema_exists) {
		if (t->checkpoint_exists) {
			rc |= metrics_add_u64(m, "trellara_apply_transactions_total", "source transactions applied to the target", C,
					      NULL, NULL, t->applied_transactions);
			rc |= metrics_add_u64(m, "trellara_apply_changes_total", "row changes applied to the target", C, NULL, NULL,
					      t->applied_changes);
			rc |= metrics_add_u64(m, "trellara_apply_skipped_duplicates_total",
					      "transactions skipped because the checkpoint had them already", C, NULL, NULL,
					      t->skipped_duplicates);
			rc |= metrics_add_u64(m, "trellara_apply_applied_through_position_bytes",
					      "source LSN the applier has passed (commit or watermark), as a byte number", G, NULL,
					      NULL, t->applied_through_lsn);
			rc |= metrics_add_double(m, "trellara_apply_checkpoint_age_seconds", "time since the checkpoint last moved", G,
						 NULL, NULL, t->checkpoint_age_seconds);
			if (s->available && s->wal_lsn >= t->applied_through_lsn)
				rc |= metrics_add_u64(m, "trellara_apply_lag_bytes", "source WAL past what the target applied", G,
						      NULL, NULL, s->wal_lsn - t->applied_through_lsn);
			if (t->has_rate) {
				rc |= metrics_add_double(m, "trellara_apply_transactions_per_second",
							 "transactions applied per second over the sampling window", G, NULL, NULL,
							 t->transactions_per_second);
				rc |= metrics_add_double(m, "trellara_apply_changes_per_second",
							 "row changes applied per second over the sampling window", G, NULL, NULL,
							 t->changes_per_second);
			}
		}
		rc |= metrics_add_u64(m, "trellara_quarantine_open_transactions", "quarantined transactions stopping apply", G, NULL,
				      NULL, t->quarantine_open);
		rc |= metrics_add_u64(m, "trellara_quarantine_replay_ready_transactions",
				      "quarantined transactions released for replay, not applied yet", G, NULL, NULL,
				      t->quarantine_replay_ready);
		if (t->has_quarantine_oldest)
			rc |= metrics_add_double(m, "trellara_quarantine_oldest_age_seconds", "age of the oldest open quarantine", G,
						 NULL, NULL, t->quarantine_oldest_age_seconds);
		rc |= metrics_add_u64(m, "trellara_snapshot_run_exists", "whether the flow has a snapshot run", G, NULL, NULL,
				      t->run_exists);
		if (t->run_exists)
			for (size_t i = 0; i < sizeof run_states / sizeof run_states[0]; i++)
				rc |= metrics_add_u64(m, "trellara_snapshot_run_state", "1 for the state the latest snapshot run is in",
						      G, "state", run_states[i], strcmp(t->run_state, run_states[i]) == 0);
	}

	if (sv->available) {
		const char *help = "children trellara run restarted (per supervisor lifetime)";
		if (sv->has_capture_restarts)
			rc |= metrics_add_u64(m, "trellara_supervisor_restarts_total", help, C, "component", "capture",
					      sv->capture_restarts);
		if (sv->has_applyd_restarts)
			rc |= metrics_add_u64(m, "trellara_supervisor_restarts_total", help, C, "component", "applyd",
					      sv->applyd_restarts);
		rc |= metrics_add_u64(m, "trellara_supervisor_running", "whether the supervisor process of supervisor.state runs",
				      G, NULL, NULL, sv->supervisor_alive);
	}
	for (int i = 0; i < 2; i++)
		if (sv->daemons[i].exists)
			rc |= metrics_add_double(m, "trellara_metrics_file_age_seconds",
						 "time since a daemon last wrote its metrics file", G, "program", sv->daemons[i].program,
						 sv->daemons[i].age_seconds);

	const char *problems = "problems trellara status found, by severity";
	rc |= metrics_add_u64(m, "trellara_status_problems", problems, G, "severity", "alert",
			      (uint64_t)status_count(r, STATUS_ALERT));
	rc |= metrics_add_u64(m, "trellara_status_problems", problems, G, "severity", "warning",
			      (uint64_t)status_count(r, STATUS_WARNING));
	rc |= metrics_add_u64(m, "trellara_status_problems", problems, G, "severity", "info",
			      (uint64_t)status_count(r, STATUS_INFO));
	for (int i = 0; i < r->n_problems; i++)
		if (r->problems[i].severity == STATUS_ALERT)
			rc |= metrics_add_u64(m, "trellara_status_alert", "1 for each alert trellara status raises, by code", G,
					      "code", r->problems[i].code, 1);
	return rc ? -1 : 0;
}
