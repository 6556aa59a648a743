/*
 * output.c - trellara-status's text and JSON output (fields documented in
 * trellara-status(1); unknown values are null in JSON and "unknown" in
 * text, never 0).
 */
#include "status.h"

#include "trellara/jsonw.h"
#include "trellara/lsn.h"
#include "trellara/textcodec.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

char *status_format_bytes(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)bytes;
	int u = 0;
	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%" PRIu64 " B", bytes);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
}

static const char *lsn_text(uint64_t lsn, char *buf)
{
	return lsn_format(lsn, buf);
}

/* "12.3 s" or "unknown" */
static const char *seconds_text(bool known, double s, char *buf, size_t len)
{
	if (!known)
		return "unknown";
	snprintf(buf, len, "%.1f s", s);
	return buf;
}

/* ---- text ---- */

/* A daemon's connections, from its .prom file: failures, sessions that
 * ended, promotions followed. */
static void text_connections(FILE *out, const struct status_daemon_file *d)
{
	uint64_t ended = 0;
	for (int c = 0; c < SQLSTATE_END_COUNT; c++)
		ended += d->disconnects[c];
	fprintf(out, "            %s: %" PRIu64 " failed connections (%" PRIu64 " refused credentials%s), %" PRIu64
		     " sessions ended",
		d->program, d->auth_failures + d->other_failures, d->auth_failures,
		d->credentials_refused ? ", the last attempt too" : "", ended);
	for (int c = 0, n = 0; c < SQLSTATE_END_COUNT; c++)
		if (d->disconnects[c])
			fprintf(out, "%s%s %" PRIu64, n++ ? ", " : " (", sqlstate_end_name((enum sqlstate_end)c), d->disconnects[c]);
	if (ended)
		fputc(')', out);
	if (strcmp(d->program, "capture") == 0)
		fprintf(out, ", %" PRIu64 " promotions of the source followed", d->promotions);
	fputc('\n', out);
}

static void text_report(FILE *out, const struct status_report *r)
{
	const struct flow_config *cfg = r->cfg;
	const struct status_source *s = &r->source;
	const struct status_stream *st = &r->stream;
	const struct status_target *t = &r->target;
	const struct status_supervisor *sv = &r->supervisor;
	char l1[LSN_FORMAT_LEN], l2[LSN_FORMAT_LEN], b1[32], b2[32], d1[32], d2[32];

	fprintf(out, "flow %s%s%s%s, at %s\n", r->flow, cfg->environment ? " (environment " : "",
		cfg->environment ? cfg->environment : "", cfg->environment ? ")" : "", r->generated_at);

	if (!s->available) {
		fprintf(out, "source      unavailable: %s\n", s->error);
	} else {
		fprintf(out, "source      WAL at %s%s\n", lsn_text(s->wal_lsn, l1), s->in_recovery ? " (a standby: replay position)" : "");
		if (!s->slot_exists) {
			fprintf(out, "  slot      %s: does not exist\n", cfg->slot);
		} else {
			fprintf(out, "  slot      %s: %s", cfg->slot, s->slot_active ? "active" : "inactive (no capture connected)");
			if (s->slot_active)
				fprintf(out, " (walsender pid %d)", s->slot_active_pid);
			if (*s->wal_status)
				fprintf(out, ", wal_status %s", s->wal_status);
			fputc('\n', out);
			fprintf(out, "  confirmed %s, lag %s (%s)\n",
				s->has_confirmed_flush ? lsn_text(s->confirmed_flush_lsn, l2) : "unknown",
				s->has_lag_bytes ? status_format_bytes(s->lag_bytes, b1, sizeof b1) : "unknown",
				s->has_lag_seconds ? seconds_text(true, s->lag_seconds, d1, sizeof d1) : "seconds unknown");
			fprintf(out, "  lag basis %s\n", s->lag_seconds_basis);
			fprintf(out, "  retained  %s of WAL (warn at %s)\n",
				s->has_retained ? status_format_bytes(s->retained_bytes, b1, sizeof b1) : "unknown",
				status_format_bytes(cfg->wal_retention_warn_bytes, b2, sizeof b2));
		}
	}

	if (st->jetstream) {
		const struct status_daemon_file *d = &r->supervisor.daemons[0];
		fprintf(out, "stream      JetStream \"%s\" on %zu server%s\n", cfg->jetstream_stream, cfg->n_jetstream_servers,
			cfg->n_jetstream_servers == 1 ? "" : "s");
		if (d->exists && d->has_broker)
			fprintf(out, "  broker    %s (capture: %" PRIu64 " frames stored, %" PRIu64 " waiting for a PubAck, last batch %.3f s, %" PRIu64 " holds, %" PRIu64 " retries)\n",
				d->broker_available ? "available" : "UNAVAILABLE: it holds capture back", d->broker_published,
				d->broker_pending_acks, d->broker_publish_seconds, d->broker_holds, d->broker_retries);
		else
			fprintf(out, "  broker    unknown: no capture.prom with broker samples (observability.metrics_dir)\n");
		fprintf(out, "  servers   \"trellara stream inspect --config %s\" reads the replicas, leader and groups\n", cfg->path);
	} else if (!st->available) {
		fprintf(out, "stream      unavailable: %s\n", st->error);
	} else {
		fprintf(out, "stream      %s: writer %s%s", cfg->stream_path, st->writer_active ? "active" : "not running",
			st->corrupt ? ", CORRUPT" : "");
		if (st->timeline)
			fprintf(out, ", follows source timeline %" PRIu32, st->timeline);
		fputc('\n', out);
		if (st->empty)
			fprintf(out, "  frames    none yet (next offset %" PRIu64 ")\n", st->next_offset);
		else
			fprintf(out, "  frames    offsets %" PRIu64 "..%" PRIu64 " (%" PRIu64 " frames, %" PRIu64 " segment%s, %s)\n",
				st->first_offset, st->next_offset - 1, st->next_offset - st->first_offset, st->segments,
				st->segments == 1 ? "" : "s", status_format_bytes(st->bytes, b1, sizeof b1));
		if (st->has_oldest)
			fprintf(out, "  oldest    appended %s (%s ago)\n", st->oldest_time,
				seconds_text(true, st->oldest_age_seconds, d1, sizeof d1));
		if (st->has_newest)
			fprintf(out, "  newest    appended %s (%s ago)\n", st->newest_time,
				seconds_text(true, st->newest_age_seconds, d1, sizeof d1));
		if (st->has_ack)
			fprintf(out, "  acked     %s, durable since %s (%s ago); capture acknowledges nothing past it\n",
				lsn_text(st->ack_lsn, l1), st->ack_time, seconds_text(true, st->ack_age_seconds, d1, sizeof d1));
		else
			fprintf(out, "  acked     unknown: no transaction or watermark in the stream's last segments\n");
		fprintf(out, "  group     %s: position %" PRIu64 "%s, %" PRIu64 " frames pending", cfg->consumer_group,
			st->group_position, st->group_exists ? "" : " (no position yet)", st->group_pending);
		if (st->has_pending_age)
			fprintf(out, ", the oldest appended %s ago", seconds_text(true, st->oldest_pending_age_seconds, d1, sizeof d1));
		fputc('\n', out);
	}

	if (!t->available) {
		fprintf(out, "target      unavailable: %s\n", t->error);
	} else if (!t->schema_exists) {
		fprintf(out, "target      no checkpoint schema \"%s\" yet\n", cfg->checkpoint_schema);
	} else {
		if (!t->checkpoint_exists) {
			fprintf(out, "apply       no checkpoint yet (applyd has not run)\n");
		} else {
			fprintf(out, "apply       %" PRIu64 " transactions, %" PRIu64 " changes applied; %" PRIu64 " duplicates skipped\n",
				t->applied_transactions, t->applied_changes, t->skipped_duplicates);
			fprintf(out, "  through   %s (last commit %s, xid %u), stream offset %" PRIu64 "\n",
				lsn_text(t->applied_through_lsn, l1), lsn_text(t->last_commit_lsn, l2), t->last_xid, t->stream_offset);
			if (s->available && s->wal_lsn >= t->applied_through_lsn)
				fprintf(out, "  lag       %s of source WAL\n",
					status_format_bytes(s->wal_lsn - t->applied_through_lsn, b1, sizeof b1));
			fprintf(out, "  updated   %s (%s ago)\n", t->checkpoint_updated_at,
				seconds_text(true, t->checkpoint_age_seconds, d1, sizeof d1));
			if (t->has_rate)
				fprintf(out, "  rate      %.1f transactions/s, %.1f changes/s (over %.1f s)\n", t->transactions_per_second,
					t->changes_per_second, t->rate_window_seconds);
			else
				fprintf(out, "  rate      unknown (not sampled)\n");
		}
		if (t->quarantine_open == 0 && t->quarantine_replay_ready == 0)
			fprintf(out, "quarantine  none open\n");
		else
			fprintf(out, "quarantine  %" PRIu64 " quarantined, %" PRIu64 " released for replay; oldest quarantined %s\n",
				t->quarantine_open, t->quarantine_replay_ready,
				t->has_quarantine_oldest ? t->quarantine_oldest_at : "-");
		for (int i = 0; i < t->n_listed; i++)
			fprintf(out, "  %-11s transaction %u, commit %s, offset %" PRIu64 ", %s, since %s\n", t->listed[i].state,
				t->listed[i].xid, lsn_text(t->listed[i].commit_lsn, l1), t->listed[i].stream_offset,
				t->listed[i].reason, t->listed[i].created_at);
		if (!t->run_exists)
			fprintf(out, "snapshot    no run\n");
		else
			fprintf(out, "snapshot    run %s: %s (updated %s)%s%s\n", t->run_id, t->run_state, t->run_updated_at,
				*t->run_failure_reason ? ": " : "", t->run_failure_reason);
		if (!t->cutover_exists)
			fprintf(out, "cutover     none\n");
		else if (strcmp(t->cutover_state, "cut_over") == 0)
			fprintf(out, "cutover     cut_over at %s: final LSN %s, verify %s at %s, source lock %s\n",
				t->cutover_completed_at, lsn_text(t->cutover_final_lsn, l1), t->cutover_verify_result,
				lsn_text(t->cutover_verified_at_lsn, l2), t->cutover_source_lock);
		else
			fprintf(out, "cutover     %s (started %s, source lock %s)%s%s\n", t->cutover_state, t->cutover_started_at,
				t->cutover_source_lock, *t->cutover_failure_reason ? ": " : "", t->cutover_failure_reason);
	}

	if (!sv->configured) {
		fprintf(out, "supervisor  unknown: %s\n", sv->error);
	} else {
		if (!sv->available)
			fprintf(out, "supervisor  unknown: %s\n", sv->error);
		else
			fprintf(out, "supervisor  %s%s, capture restarts %s, applyd restarts %s (updated %s)\n",
				*sv->state ? sv->state : "unknown", sv->supervisor_alive ? "" : " (process not running)",
				sv->has_capture_restarts ? (snprintf(b1, sizeof b1, "%" PRIu64, sv->capture_restarts), b1) : "unknown",
				sv->has_applyd_restarts ? (snprintf(b2, sizeof b2, "%" PRIu64, sv->applyd_restarts), b2) : "unknown",
				*sv->updated_at ? sv->updated_at : "-");
		for (int i = 0; i < 2; i++) {
			const struct status_daemon_file *d = &sv->daemons[i];
			fprintf(out, "  metrics   %s.prom: %s\n", d->program,
				d->exists ? (snprintf(d2, sizeof d2, "updated %.0f s ago", d->age_seconds), d2) : "none");
			if (d->exists)
				text_connections(out, d);
		}
	}
}

static void text_problems(FILE *out, const struct status_report *r, enum status_view view)
{
	int shown = 0;
	for (int i = 0; i < r->n_problems; i++) {
		const struct status_problem *p = &r->problems[i];
		if (view == STATUS_VIEW_ALERTS && p->severity != STATUS_ALERT)
			continue;
		if (view == STATUS_VIEW_REPORT) {
			if (shown++ == 0)
				fprintf(out, "problems\n");
			fprintf(out, "  %-7s %s: %s\n", status_severity_name(p->severity), p->code, p->message);
			continue;
		}
		if (shown++)
			fputc('\n', out);
		fprintf(out, "%s %s: %s\n", status_severity_name(p->severity), p->code, p->message);
		fprintf(out, "  next: %s\n", p->action);
	}
	if (shown == 0)
		fprintf(out, view == STATUS_VIEW_ALERTS ? "no alerts\n" : view == STATUS_VIEW_DIAGNOSTICS ? "no problems found\n"
												 : "problems    none\n");
	else if (view == STATUS_VIEW_REPORT)
		fprintf(out, "(trellara status --view diagnostics names the next action for each)\n");
}

void status_print_text(FILE *out, const struct status_report *r, enum status_view view)
{
	if (view == STATUS_VIEW_REPORT)
		text_report(out, r);
	else if (view == STATUS_VIEW_DIAGNOSTICS)
		fprintf(out, "flow %s, at %s\n\n", r->flow, r->generated_at);
	text_problems(out, r, view);
}

/* ---- JSON ---- */

static void json_source(struct jsonw *w, const struct status_report *r)
{
	const struct status_source *s = &r->source;
	bool a = s->available;
	jsonw_open(w, "source", '{');
	jsonw_bool(w, "available", a);
	jsonw_str(w, "error", a ? NULL : s->error);
	jsonw_lsn(w, "wal_lsn", a, s->wal_lsn);
	jsonw_key(w, "in_recovery");
	fputs(a ? (s->in_recovery ? "true" : "false") : "null", w->out);
	jsonw_open(w, "slot", '{');
	jsonw_str(w, "name", r->cfg->slot);
	jsonw_key(w, "exists");
	fputs(a ? (s->slot_exists ? "true" : "false") : "null", w->out);
	jsonw_key(w, "active");
	fputs(a && s->slot_exists ? (s->slot_active ? "true" : "false") : "null", w->out);
	jsonw_u64(w, "active_pid", a && s->slot_active, (uint64_t)s->slot_active_pid);
	jsonw_str(w, "wal_status", a && *s->wal_status ? s->wal_status : NULL);
	jsonw_lsn(w, "restart_lsn", a && s->has_restart_lsn, s->restart_lsn);
	jsonw_lsn(w, "confirmed_flush_lsn", a && s->has_confirmed_flush, s->confirmed_flush_lsn);
	jsonw_u64(w, "lag_bytes", a && s->has_lag_bytes, s->lag_bytes);
	jsonw_num(w, "lag_seconds", a && s->has_lag_seconds, s->lag_seconds);
	jsonw_str(w, "lag_seconds_basis", a ? s->lag_seconds_basis : NULL);
	jsonw_u64(w, "retained_wal_bytes", a && s->has_retained, s->retained_bytes);
	jsonw_u64(w, "wal_retention_warn_bytes", true, r->cfg->wal_retention_warn_bytes);
	jsonw_close(w, '}');
	jsonw_close(w, '}');
}

static void json_stream(struct jsonw *w, const struct status_report *r)
{
	const struct status_stream *s = &r->stream;
	bool a = s->available;
	jsonw_open(w, "stream", '{');
	jsonw_bool(w, "available", a);
	jsonw_str(w, "error", a ? NULL : s->error);
	jsonw_str(w, "kind", r->cfg->stream_kind_name);
	jsonw_str(w, "dir", r->cfg->stream_path);
	if (s->jetstream) {
		/* what capture.prom says of the broker; null when unknown */
		const struct status_daemon_file *d = &r->supervisor.daemons[0];
		bool b = d->exists && d->has_broker;
		jsonw_open(w, "broker", '{');
		jsonw_str(w, "name", r->cfg->jetstream_stream);
		jsonw_key(w, "available");
		fputs(b ? (d->broker_available ? "true" : "false") : "null", w->out);
		jsonw_u64(w, "pending_acks", b, d->broker_pending_acks);
		jsonw_num(w, "publish_seconds", b, d->broker_publish_seconds);
		jsonw_u64(w, "published_frames", b, d->broker_published);
		jsonw_u64(w, "holds", b, d->broker_holds);
		jsonw_u64(w, "retries", b, d->broker_retries);
		jsonw_close(w, '}');
	}
	jsonw_key(w, "writer_active");
	fputs(a ? (s->writer_active ? "true" : "false") : "null", w->out);
	jsonw_key(w, "corrupt");
	fputs(a ? (s->corrupt ? "true" : "false") : "null", w->out);
	jsonw_key(w, "empty");
	fputs(a ? (s->empty ? "true" : "false") : "null", w->out);
	jsonw_u64(w, "first_offset", a, s->first_offset);
	jsonw_u64(w, "next_offset", a, s->next_offset);
	jsonw_u64(w, "frames", a, s->next_offset - s->first_offset);
	jsonw_u64(w, "bytes", a, s->bytes);
	jsonw_u64(w, "segments", a, s->segments);
	jsonw_u64(w, "torn_bytes", a, s->torn_bytes);
	jsonw_u64(w, "timeline", a && s->timeline, s->timeline);
	jsonw_str(w, "oldest_append_time", a && s->has_oldest ? s->oldest_time : NULL);
	jsonw_num(w, "oldest_age_seconds", a && s->has_oldest, s->oldest_age_seconds);
	jsonw_str(w, "newest_append_time", a && s->has_newest ? s->newest_time : NULL);
	jsonw_num(w, "newest_age_seconds", a && s->has_newest, s->newest_age_seconds);
	jsonw_lsn(w, "acknowledged_lsn", a && s->has_ack, s->ack_lsn);
	jsonw_str(w, "acknowledged_time", a && s->has_ack ? s->ack_time : NULL);
	jsonw_num(w, "acknowledged_age_seconds", a && s->has_ack, s->ack_age_seconds);
	jsonw_open(w, "group", '{');
	jsonw_str(w, "name", r->cfg->consumer_group);
	jsonw_key(w, "exists");
	fputs(a ? (s->group_exists ? "true" : "false") : "null", w->out);
	jsonw_u64(w, "position", a, s->group_position);
	jsonw_u64(w, "pending", a, s->group_pending);
	jsonw_num(w, "oldest_pending_age_seconds", a && s->has_pending_age, s->oldest_pending_age_seconds);
	jsonw_close(w, '}');
	jsonw_close(w, '}');
}

static void json_target(struct jsonw *w, const struct status_report *r)
{
	const struct status_target *t = &r->target;
	bool a = t->available;
	bool c = a && t->checkpoint_exists;
	jsonw_open(w, "apply", '{');
	jsonw_bool(w, "available", a);
	jsonw_str(w, "error", a ? NULL : t->error);
	jsonw_key(w, "checkpoint_schema_exists");
	fputs(a ? (t->schema_exists ? "true" : "false") : "null", w->out);
	jsonw_key(w, "checkpoint_exists");
	fputs(a ? (t->checkpoint_exists ? "true" : "false") : "null", w->out);
	jsonw_str(w, "consumer_group", r->cfg->consumer_group);
	jsonw_lsn(w, "last_commit_lsn", c, t->last_commit_lsn);
	jsonw_u64(w, "last_xid", c, t->last_xid);
	jsonw_lsn(w, "applied_through_lsn", c, t->applied_through_lsn);
	jsonw_u64(w, "stream_offset", c, t->stream_offset);
	jsonw_u64(w, "applied_transactions", c, t->applied_transactions);
	jsonw_u64(w, "applied_changes", c, t->applied_changes);
	jsonw_u64(w, "skipped_duplicates", c, t->skipped_duplicates);
	bool lag = c && r->source.available && r->source.wal_lsn >= t->applied_through_lsn;
	jsonw_u64(w, "lag_bytes", lag, lag ? r->source.wal_lsn - t->applied_through_lsn : 0);
	jsonw_str(w, "checkpoint_updated_at", c ? t->checkpoint_updated_at : NULL);
	jsonw_num(w, "checkpoint_age_seconds", c, t->checkpoint_age_seconds);
	jsonw_num(w, "transactions_per_second", c && t->has_rate, t->transactions_per_second);
	jsonw_num(w, "changes_per_second", c && t->has_rate, t->changes_per_second);
	jsonw_num(w, "rate_window_seconds", c && t->has_rate, t->rate_window_seconds);
	jsonw_close(w, '}');

	bool q = a && t->schema_exists;
	jsonw_open(w, "quarantine", '{');
	jsonw_bool(w, "available", a);
	jsonw_u64(w, "open", q, t->quarantine_open);
	jsonw_u64(w, "replay_ready", q, t->quarantine_replay_ready);
	jsonw_str(w, "oldest_created_at", q && t->has_quarantine_oldest ? t->quarantine_oldest_at : NULL);
	jsonw_num(w, "oldest_age_seconds", q && t->has_quarantine_oldest, t->quarantine_oldest_age_seconds);
	jsonw_open(w, "entries", '[');
	char l[LSN_FORMAT_LEN];
	for (int i = 0; q && i < t->n_listed; i++) {
		const struct status_quarantine_entry *e = &t->listed[i];
		jsonw_open(w, NULL, '{');
		jsonw_u64(w, "id", true, (uint64_t)e->id);
		jsonw_u64(w, "transaction_id", true, e->xid);
		jsonw_str(w, "commit_lsn", lsn_format(e->commit_lsn, l));
		jsonw_u64(w, "stream_offset", true, e->stream_offset);
		jsonw_str(w, "reason", e->reason);
		jsonw_str(w, "state", e->state);
		jsonw_str(w, "created_at", e->created_at);
		jsonw_close(w, '}');
	}
	jsonw_close(w, ']');
	jsonw_close(w, '}');

	jsonw_open(w, "snapshot", '{');
	jsonw_bool(w, "available", a);
	if (q && t->run_exists) {
		jsonw_open(w, "run", '{');
		jsonw_str(w, "run_id", t->run_id);
		jsonw_str(w, "state", t->run_state);
		jsonw_str(w, "failure_reason", *t->run_failure_reason ? t->run_failure_reason : NULL);
		jsonw_str(w, "updated_at", t->run_updated_at);
		jsonw_close(w, '}');
	} else {
		jsonw_null(w, "run");
	}
	jsonw_close(w, '}');
	bool cut = q && t->cutover_exists;
	jsonw_open(w, "cutover", '{');
	jsonw_bool(w, "available", a);
	jsonw_str(w, "state", cut ? t->cutover_state : NULL);
	jsonw_key(w, "lock_source");
	fputs(cut ? (t->cutover_lock_source ? "true" : "false") : "null", w->out);
	jsonw_str(w, "source_lock", cut ? t->cutover_source_lock : NULL);
	jsonw_u64(w, "sequence_margin", cut, t->cutover_sequence_margin);
	jsonw_lsn(w, "final_lsn", cut && t->cutover_has_final_lsn, t->cutover_final_lsn);
	jsonw_str(w, "verify_result", cut && *t->cutover_verify_result ? t->cutover_verify_result : NULL);
	jsonw_lsn(w, "verified_at_lsn", cut && t->cutover_has_verified_at_lsn, t->cutover_verified_at_lsn);
	jsonw_str(w, "started_at", cut ? t->cutover_started_at : NULL);
	jsonw_str(w, "completed_at", cut && *t->cutover_completed_at ? t->cutover_completed_at : NULL);
	jsonw_str(w, "updated_at", cut ? t->cutover_updated_at : NULL);
	jsonw_str(w, "failure_reason", cut && *t->cutover_failure_reason ? t->cutover_failure_reason : NULL);
	jsonw_close(w, '}');
}

static void json_supervisor(struct jsonw *w, const struct status_report *r)
{
	const struct status_supervisor *s = &r->supervisor;
	bool a = s->available;
	jsonw_open(w, "supervisor", '{');
	jsonw_bool(w, "available", a);
	jsonw_str(w, "error", a ? NULL : s->error);
	jsonw_str(w, "metrics_dir", s->configured ? s->metrics_dir : NULL);
	jsonw_str(w, "state_file", s->configured ? s->path : NULL);
	jsonw_str(w, "state", a && *s->state ? s->state : NULL);
	jsonw_key(w, "running");
	fputs(a ? (s->supervisor_alive ? "true" : "false") : "null", w->out);
	jsonw_u64(w, "pid", a && s->supervisor_pid > 0, (uint64_t)s->supervisor_pid);
	jsonw_u64(w, "capture_restarts", a && s->has_capture_restarts, s->capture_restarts);
	jsonw_u64(w, "applyd_restarts", a && s->has_applyd_restarts, s->applyd_restarts);
	jsonw_str(w, "last_exit", a && *s->last_exit ? s->last_exit : NULL);
	jsonw_str(w, "updated_at", a && *s->updated_at ? s->updated_at : NULL);
	jsonw_open(w, "metrics_files", '{');
	for (int i = 0; i < 2; i++)
		jsonw_num(w, s->daemons[i].program, s->daemons[i].exists, s->daemons[i].age_seconds);
	jsonw_close(w, '}');
	/* what each daemon's file says about its connections (null: no file) */
	jsonw_open(w, "connections", '{');
	for (int i = 0; i < 2; i++) {
		const struct status_daemon_file *d = &s->daemons[i];
		if (!d->exists) {
			jsonw_key(w, d->program);
			fputs("null", w->out);
			continue;
		}
		jsonw_open(w, d->program, '{');
		jsonw_key(w, "credentials_refused");
		fputs(d->credentials_refused ? "true" : "false", w->out);
		jsonw_open(w, "connect_failures", '{');
		jsonw_u64(w, "authentication", true, d->auth_failures);
		jsonw_u64(w, "other", true, d->other_failures);
		jsonw_close(w, '}');
		jsonw_open(w, "disconnects", '{');
		for (int c = 0; c < SQLSTATE_END_COUNT; c++)
			jsonw_u64(w, sqlstate_end_name((enum sqlstate_end)c), true, d->disconnects[c]);
		jsonw_close(w, '}');
		if (strcmp(d->program, "capture") == 0)
			jsonw_u64(w, "promotions", true, d->promotions);
		jsonw_close(w, '}');
	}
	jsonw_close(w, '}');
	jsonw_close(w, '}');
}

static void json_problems(struct jsonw *w, const struct status_report *r, enum status_view view)
{
	jsonw_open(w, view == STATUS_VIEW_ALERTS ? "alerts" : "problems", '[');
	for (int i = 0; i < r->n_problems; i++) {
		const struct status_problem *p = &r->problems[i];
		if (view == STATUS_VIEW_ALERTS && p->severity != STATUS_ALERT)
			continue;
		jsonw_open(w, NULL, '{');
		jsonw_str(w, "severity", status_severity_name(p->severity));
		jsonw_str(w, "code", p->code);
		jsonw_str(w, "message", p->message);
		jsonw_str(w, "action", p->action);
		jsonw_close(w, '}');
	}
	jsonw_close(w, ']');
}

void status_print_json(FILE *out, const struct status_report *r, enum status_view view)
{
	struct jsonw w;
	jsonw_init(&w, out, false);
	jsonw_open(&w, NULL, '{');
	jsonw_str(&w, "flow", r->flow);
	jsonw_str(&w, "source_id", r->cfg->source_id);
	jsonw_str(&w, "dataset_id", r->cfg->dataset_id);
	jsonw_str(&w, "environment", r->cfg->environment);
	jsonw_str(&w, "generated_at", r->generated_at);
	jsonw_str(&w, "view", view == STATUS_VIEW_ALERTS ? "alerts" : view == STATUS_VIEW_DIAGNOSTICS ? "diagnostics" : "report");
	if (view == STATUS_VIEW_REPORT) {
		json_source(&w, r);
		json_stream(&w, r);
		json_target(&w, r);
		json_supervisor(&w, r);
	}
	jsonw_u64(&w, "alert_count", true, (uint64_t)status_count(r, STATUS_ALERT));
	jsonw_u64(&w, "warning_count", true, (uint64_t)status_count(r, STATUS_WARNING));
	json_problems(&w, r, view);
	jsonw_close(&w, '}');
	fputc('\n', out);
}
