/*
 * problems.c - what in a status report needs attention, and the safe
 * next action for each (see status.h).  Pure: reads the report only.
 *
 * Alerts are what needs a person: an open quarantine, a snapshot run in
 * failed_recoverable, an inactive slot retaining more WAL than
 * source.wal_retention_warn_bytes (it only grows while nobody reads it),
 * a slot that lost or is losing WAL, a slot or stream that is gone while
 * the flow depends on it, a corrupt stream, and an applier far behind.
 * Everything a restart or the daemons' own retries can fix is a warning.
 */
#include "status.h"

#include "trellara/lsn.h"
#include "trellara/xalloc.h"
#include "trellara/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void add(struct status_report *r, enum status_severity severity, const char *code, const char *action,
		const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void add(struct status_report *r, enum status_severity severity, const char *code, const char *action,
		const char *fmt, ...)
{
	r->problems = xrealloc(r->problems, (size_t)(r->n_problems + 1) * sizeof *r->problems);
	struct status_problem *p = &r->problems[r->n_problems++];
	memset(p, 0, sizeof *p);
	p->severity = severity;
	snprintf(p->code, sizeof p->code, "%s", code);
	snprintf(p->action, sizeof p->action, "%s", action);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->message, sizeof p->message, fmt, ap);
	va_end(ap);
}

const char *status_severity_name(enum status_severity s)
{
	switch (s) {
	case STATUS_ALERT: return "alert";
	case STATUS_WARNING: return "warning";
	default: return "info";
	}
}

int status_count(const struct status_report *r, enum status_severity s)
{
	int n = 0;
	for (int i = 0; i < r->n_problems; i++)
		n += r->problems[i].severity == s;
	return n;
}

/* The run has handed off: the flow now depends on the slot and the stream. */
static bool run_streams(const struct status_target *t)
{
	return t->run_exists && (strcmp(t->run_state, "stream_handoff_ready") == 0 || strcmp(t->run_state, "streaming") == 0 ||
				 strcmp(t->run_state, "verified") == 0);
}

/* Whether the flow was cut over (trellara cutover): capture and applyd
 * are stopped on purpose. */
static bool cut_over(const struct status_report *r)
{
	return r->target.available && r->target.cutover_exists && strcmp(r->target.cutover_state, "cut_over") == 0;
}

static void source_problems(struct status_report *r, const char *config)
{
	const struct status_source *s = &r->source;
	const struct status_target *t = &r->target;
	uint64_t warn = r->cfg->wal_retention_warn_bytes;
	char action[768], b1[32], b2[32];
	if (!s->available) {
		add(r, STATUS_WARNING, "source_unavailable",
		    "check that the source server is up and reachable from here; capture retries on its own and exits 69 after bounded retries (trellara run and systemd restart it)",
		    "source: %s", s->error);
		return;
	}
	if (!s->slot_exists) {
		if (t->available && run_streams(t)) {
			snprintf(action, sizeof action,
				 "the changes it held are gone (it was dropped, or the source failed over to a server without it), so the copy must be made again from the current source: stop capture and applyd, then \"trellara snapshot --config %s --force\"; then find out who dropped it, or make failover slots (PostgreSQL 17+, trellara check)",
				 config);
			add(r, STATUS_ALERT, "slot_missing", action,
			    "the replication slot \"%s\" is gone while snapshot run \"%s\" is %s", r->cfg->slot, t->run_id,
			    t->run_state);
		} else {
			snprintf(action, sizeof action, "\"trellara run --config %s\" (or \"trellara snapshot --config %s\") creates it",
				 config, config);
			add(r, STATUS_WARNING, "slot_not_created", action, "the replication slot \"%s\" does not exist yet",
			    r->cfg->slot);
		}
		return;
	}
	if (strcmp(s->wal_status, "lost") == 0) {
		snprintf(action, sizeof action,
			 "the slot can no longer stream: stop capture and applyd, then copy again with \"trellara snapshot --config %s --force\"; raise max_slot_wal_keep_size so it does not happen again",
			 config);
		add(r, STATUS_ALERT, "slot_invalidated", action,
		    "the replication slot \"%s\" lost WAL it needed (wal_status lost)", r->cfg->slot);
		return;
	}
	if (strcmp(s->wal_status, "unreserved") == 0)
		add(r, STATUS_ALERT, "slot_wal_unreserved",
		    "get capture streaming now (trellara run, or systemctl start trellara-capture@...); the next checkpoint on the source may remove WAL the slot still needs",
		    "the replication slot \"%s\" holds more WAL than max_slot_wal_keep_size (wal_status unreserved)",
		    r->cfg->slot);
	if (!s->slot_active && cut_over(r)) {
		/* nobody will read it again: the action is to drop it, not to start capture */
		snprintf(action, sizeof action,
			 "once the source is no longer a fallback, drop the slot on the source: SELECT pg_drop_replication_slot('%s')",
			 r->cfg->slot);
		add(r, STATUS_WARNING, "slot_left_after_cutover", action,
		    "the flow was cut over, but the replication slot \"%s\" still exists and retains %s of WAL", r->cfg->slot,
		    s->has_retained ? status_format_bytes(s->retained_bytes, b1, sizeof b1) : "an unknown amount");
	} else if (!s->slot_active) {
		bool over = s->has_retained && s->retained_bytes > warn;
		snprintf(action, sizeof action,
			 over ? "start capture (\"trellara run --config %s\", or systemctl start trellara-capture@...); if the flow is abandoned, drop the slot so the source can recycle its WAL: SELECT pg_drop_replication_slot('%s')"
			      : "start capture: \"trellara run --config %s\" (or systemctl start trellara-capture@...); while nobody reads slot \"%s\" the source keeps its WAL",
			 config, r->cfg->slot);
		add(r, over ? STATUS_ALERT : STATUS_WARNING, over ? "slot_inactive_retaining_wal" : "slot_inactive", action,
		    "no capture is connected to the replication slot \"%s\"; it retains %s of WAL (warn at %s)", r->cfg->slot,
		    s->has_retained ? status_format_bytes(s->retained_bytes, b1, sizeof b1) : "an unknown amount",
		    status_format_bytes(warn, b2, sizeof b2));
	} else if (s->has_retained && s->retained_bytes > warn) {
		add(r, STATUS_WARNING, "slot_retaining_wal",
		    "capture is connected but behind: look at its log for reconnects and at the stream's disk; WAL is recycled as soon as capture catches up",
		    "the replication slot \"%s\" retains %s of WAL (warn at %s)", r->cfg->slot,
		    status_format_bytes(s->retained_bytes, b1, sizeof b1), status_format_bytes(warn, b2, sizeof b2));
	}
}

static void stream_problems(struct status_report *r, const char *config)
{
	const struct status_stream *s = &r->stream;
	const struct status_target *t = &r->target;
	char action[768];
	if (s->jetstream) {
		/* the servers are not read here: capture.prom says what capture saw */
		const struct status_daemon_file *d = &r->supervisor.daemons[0];
		if (d->exists && d->has_broker && !d->broker_available) {
			snprintf(action, sizeof action,
				 "bring back a majority of the stream's servers (stream.servers); if the stream is full (stream.max_bytes), \"trellara stream retention --config %s --apply\" removes what every protected group applied; \"trellara stream inspect --config %s\" shows the replicas and the groups",
				 config, config);
			add(r, STATUS_ALERT, "broker_unavailable", action,
			    "the JetStream stream \"%s\" holds capture back (no quorum, servers down, or full): %llu frames wait for their PubAck and nothing past the last stored transaction is acknowledged to the source (capture.prom updated %.0f s ago)",
			    r->cfg->jetstream_stream, (unsigned long long)d->broker_pending_acks, d->age_seconds);
		}
		return;
	}
	if (!s->available) {
		if (t->available && t->checkpoint_exists && t->stream_offset > 0) {
			snprintf(action, sizeof action,
				 "stop capture and applyd; restore the stream directory (stream.path) if you can: applyd's checkpoint points into it; otherwise copy again with \"trellara snapshot --config %s --force\"",
				 config);
			add(r, STATUS_ALERT, "stream_missing", action, "stream: %s, but applyd's checkpoint is at offset %llu",
			    s->error, (unsigned long long)t->stream_offset);
		} else {
			snprintf(action, sizeof action, "start capture: \"trellara run --config %s\" creates the stream", config);
			add(r, STATUS_WARNING, "stream_not_created", action, "stream: %s", s->error);
		}
		return;
	}
	if (s->corrupt) {
		snprintf(action, sizeof action,
			 "stop capture and applyd; keep a copy of the stream directory; \"trellara stream inspect-local --config %s\" names the segment and byte; do not delete segments by hand",
			 config);
		add(r, STATUS_ALERT, "stream_corrupt", action,
		    "the stream has an invalid frame before its end (corruption, not a torn tail)");
	}
	if (!s->writer_active) {
		snprintf(action, sizeof action, "start capture: \"trellara run --config %s\" (or systemctl start trellara-capture@...)",
			 config);
		add(r, STATUS_WARNING, "capture_not_running", action, "no capture holds the stream's writer lock");
	}
	if (s->torn_bytes > 0 && !s->writer_active)
		add(r, STATUS_INFO, "stream_torn_tail", "nothing: the next capture start cuts the torn bytes and says how many",
		    "the stream ends in %llu torn bytes (a write cut short by a crash)", (unsigned long long)s->torn_bytes);
	if (s->has_pending_age && s->oldest_pending_age_seconds > STATUS_APPLY_BEHIND_WARN_SECONDS) {
		bool alert = s->oldest_pending_age_seconds > STATUS_APPLY_BEHIND_ALERT_SECONDS;
		snprintf(action, sizeof action,
			 "make sure applyd runs (\"trellara run --config %s\", or systemctl status trellara-applyd@...) and look at its log; \"trellara quarantine list --config %s\" shows what stopped it",
			 config, config);
		add(r, alert ? STATUS_ALERT : STATUS_WARNING, "apply_behind", action,
		    "applyd is behind: %llu frames wait in the stream, the oldest appended %.0f s ago",
		    (unsigned long long)s->group_pending, s->oldest_pending_age_seconds);
	}
}

static void target_problems(struct status_report *r, const char *config)
{
	const struct status_target *t = &r->target;
	char action[768], lsn[LSN_FORMAT_LEN];
	if (!t->available) {
		add(r, STATUS_WARNING, "target_unavailable",
		    "check that the target server is up and reachable from here; applyd retries on its own and exits 69 after bounded retries",
		    "target: %s", t->error);
		return;
	}
	if (!t->schema_exists) {
		snprintf(action, sizeof action, "\"trellara run --config %s\" (or trellara snapshot) creates it", config);
		add(r, STATUS_WARNING, "checkpoint_schema_missing", action, "the checkpoint schema \"%s\" is not in the target yet",
		    r->cfg->checkpoint_schema);
		return;
	}
	if (t->quarantine_open > 0) {
		const struct status_quarantine_entry *e = NULL;
		for (int i = 0; i < t->n_listed && !e; i++)
			if (strcmp(t->listed[i].state, "quarantined") == 0)
				e = &t->listed[i];
		if (e)
			snprintf(action, sizeof action,
				 "\"trellara quarantine list --config %s\" shows why; repair the target, then \"trellara quarantine replay-ready --config %s --transaction-id %u --commit-lsn %s\" and start applyd again",
				 config, config, e->xid, lsn_format(e->commit_lsn, lsn));
		else
			snprintf(action, sizeof action, "\"trellara quarantine list --config %s\" shows why", config);
		if (e)
			add(r, STATUS_ALERT, "quarantine_open", action,
			    "%llu transaction%s quarantined, apply is stopped for this flow; oldest: transaction %u, commit %s, %s, %.0f s ago",
			    (unsigned long long)t->quarantine_open, t->quarantine_open == 1 ? "" : "s", e->xid,
			    lsn_format(e->commit_lsn, lsn), e->reason, e->age_seconds);
		else
			add(r, STATUS_ALERT, "quarantine_open", action,
			    "%llu transactions quarantined, apply is stopped for this flow; oldest %.0f s ago",
			    (unsigned long long)t->quarantine_open, t->quarantine_oldest_age_seconds);
	}
	if (t->quarantine_replay_ready > 0)
		add(r, STATUS_WARNING, "quarantine_replay_ready",
		    "start applyd (trellara run, or systemctl start trellara-applyd@...): it applies the released transaction first",
		    "%llu quarantined transaction%s released for replay, not applied yet",
		    (unsigned long long)t->quarantine_replay_ready, t->quarantine_replay_ready == 1 ? "" : "s");
	if (!t->run_exists) {
		snprintf(action, sizeof action, "\"trellara run --config %s\" (or \"trellara snapshot --config %s\") copies the tables",
			 config, config);
		add(r, STATUS_WARNING, "snapshot_missing", action, "the flow has no snapshot run: its tables were never copied");
	} else if (strcmp(t->run_state, "failed_recoverable") == 0 && strncmp(t->run_failure_reason, "verify at ", 10) == 0) {
		/* a divergence found by verify: repaired row by row, or by a
		 * reseed of the table, not by a new snapshot */
		snprintf(action, sizeof action,
			 "save \"trellara verify --config %s --format json\" to VERIFY.json, review \"trellara repair-plan --config %s --from VERIFY.json\", then apply it with --apply (or reseed each diverged table: \"trellara reseed --config %s --table T\")",
			 config, config, config);
		add(r, STATUS_ALERT, "snapshot_failed", action, "snapshot run \"%s\" is failed_recoverable: %s", t->run_id,
		    t->run_failure_reason);
	} else if (strcmp(t->run_state, "failed_recoverable") == 0) {
		snprintf(action, sizeof action,
			 "fix the cause, then \"trellara snapshot --config %s\" resumes the run (\"trellara snapshot status --config %s\" shows each table)",
			 config, config);
		add(r, STATUS_ALERT, "snapshot_failed", action, "snapshot run \"%s\" is failed_recoverable: %s", t->run_id,
		    *t->run_failure_reason ? t->run_failure_reason : "(no reason recorded)");
	} else if (!run_streams(t)) {
		snprintf(action, sizeof action,
			 "if no snapshot is running, \"trellara snapshot --config %s\" resumes it (\"trellara snapshot status --config %s\" shows each table)",
			 config, config);
		add(r, STATUS_WARNING, "snapshot_in_progress", action, "snapshot run \"%s\" is %s: not handed off to streaming yet",
		    t->run_id, t->run_state);
	}
}

static void supervisor_problems(struct status_report *r, const char *config)
{
	const struct status_supervisor *s = &r->supervisor;
	char action[768];
	if (!s->available)
		return;
	if (strcmp(s->state, "running") == 0 && !s->supervisor_alive) {
		snprintf(action, sizeof action, "start it again: \"trellara run --config %s\"", config);
		add(r, STATUS_WARNING, "supervisor_gone", action,
		    "supervisor.state says trellara run (pid %ld) is running, but no such process is", s->supervisor_pid);
	} else if (strncmp(s->state, "failed", 6) == 0) {
		snprintf(action, sizeof action,
			 "act on the problems above, then start it again: \"trellara run --config %s\"", config);
		add(r, STATUS_WARNING, "supervisor_stopped", action, "trellara run stopped on a fail-closed exit (%s)",
		    *s->last_exit ? s->last_exit : "see its log");
	}
	if ((s->has_capture_restarts && s->capture_restarts > 0) || (s->has_applyd_restarts && s->applyd_restarts > 0))
		add(r, STATUS_INFO, "restarts", "read the supervisor's log for why each child died",
		    "trellara run restarted capture %llu and applyd %llu times", (unsigned long long)s->capture_restarts,
		    (unsigned long long)s->applyd_restarts);
}

/* What capture.prom and applyd.prom say (with or without trellara run):
 * refused credentials, promotions followed. */
static void daemon_problems(struct status_report *r)
{
	const struct status_supervisor *s = &r->supervisor;
	char action[768];
	static const char *const keys[2] = { "source.database_url", "target.database_url" };
	for (int i = 0; i < 2; i++) {
		const struct status_daemon_file *d = &s->daemons[i];
		if (d->exists && d->credentials_refused) {
			snprintf(action, sizeof action,
				 "write the new secret where %s's reference points (a {source: file} reference is read again at the next attempt: no restart); or give the role its password back",
				 keys[i]);
			add(r, STATUS_ALERT, "credentials_refused", action,
			    "%s's last connection attempt was refused its credentials (%s; %llu refusals in all, %s.prom updated %.0f s ago): it cannot progress",
			    d->program, keys[i], (unsigned long long)d->auth_failures, d->program, d->age_seconds);
		}
	}
	if (s->daemons[0].exists && s->daemons[0].promotions > 0)
		add(r, STATUS_INFO, "source_promoted", "none: capture checked the slot on the promoted server and streams from it",
		    "capture followed %llu promotion%s of the source; the stream follows timeline %" PRIu32,
		    (unsigned long long)s->daemons[0].promotions, s->daemons[0].promotions == 1 ? "" : "s", r->stream.timeline);
}

void status_evaluate(struct status_report *r)
{
	/* the flow file as a shell word, for the commands the actions name */
	char *config = strbuf_shell_quote(r->cfg->path);
	free(r->problems);
	r->problems = NULL;
	r->n_problems = 0;
	target_problems(r, config);
	source_problems(r, config);
	/* a flow cut over has no capture, applyd or supervisor on purpose */
	if (cut_over(r)) {
		add(r, STATUS_INFO, "cut_over", "point the applications at the target; drop the slot once the source is no longer a fallback (trellara cutover prints the command)",
		    "the flow was cut over at %s: capture and applyd are stopped on purpose", r->target.cutover_completed_at);
	} else {
		stream_problems(r, config);
		supervisor_problems(r, config);
		daemon_problems(r);
	}
	/* alerts first, then warnings, then notes; stable within a severity */
	for (int i = 1; i < r->n_problems; i++) {
		struct status_problem p = r->problems[i];
		int k = i;
		while (k > 0 && r->problems[k - 1].severity < p.severity) {
			r->problems[k] = r->problems[k - 1];
			k--;
		}
		r->problems[k] = p;
	}
	free(config);
}
