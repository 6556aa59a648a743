/*
 * gather.c - trellara-status reads the source, the stream, the target and
 * the supervisor's files (see status.h).  Read-only everywhere: the
 * database sessions are READ ONLY, the stream is only inspected, the
 * checkpoint schema is never created or migrated here.
 *
 * A part that cannot be read records why in its error and stays
 * unavailable; the messages are logged at debug level only, since the
 * report itself carries them.
 */
#include "status.h"

#include "trellara/checkpoint.h"
#include "trellara/clock.h"
#include "trellara/cutover.h"
#include "trellara/envelope.h"
#include "trellara/fsutil.h"
#include "trellara/log.h"
#include "trellara/lsn.h"
#include "trellara/pgconn.h"
#include "trellara/runs.h"
#include "trellara/stream.h"
#include "trellara/strbuf.h"
#include "trellara/xalloc.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void set_error(char *error, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void set_error(char *error, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	errbuf_vsetf(error, len, fmt, ap);
	va_end(ap);
	/* one line: libpq messages end in newlines and may hold several */
	for (char *p = error; *p; p++)
		if (*p == '\n')
			*p = (p[1] ? ' ' : '\0');
	log_debug("%s", error);
}

/* Seconds from then_us to now_us; a frame appended after we took "now"
 * is 0 s old, not negative. */
static double age_seconds(int64_t now_us, int64_t then_us)
{
	return now_us > then_us ? (double)(now_us - then_us) / 1e6 : 0.0;
}

/* µs since the epoch as 2026-11-29T09:09:01.051170Z (trellara-stream's form). */
static void format_time_us(int64_t us, char *buf, size_t len)
{
	time_t sec = (time_t)(us / 1000000);
	struct tm tm;
	gmtime_r(&sec, &tm);
	size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, len - n, ".%06ldZ", (long)(us % 1000000));
}

/* ---- the databases, read-only ---- */

/* A quiet handle (pgconn.h): the report carries the failures, the log
 * only at debug level. */
static PGconn *connect_readonly(const char *url, const char *role, char *error, size_t error_len)
{
	struct pgconn_options o = { .application_name = "trellara-status", .role = role,
				    .connect_timeout = STATUS_CONNECT_TIMEOUT_SECONDS, .report = PGCONN_QUIET,
				    .error = error, .error_len = error_len };
	PGconn *conn = pgconn_open(url, &o);
	if (conn && pgconn_command(conn, "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY; SET statement_timeout = "
					 STATUS_STATEMENT_TIMEOUT_MS) < 0) {
		set_error(error, error_len, "%s database: cannot set up a read-only session: %s", role, pgconn_message(conn));
		PQfinish(conn);
		conn = NULL;
	}
	return conn;
}

/* pgconn_query(), its failure recorded as "cannot read WHAT: ...". */
static PGresult *query(PGconn *conn, const char *sql, int n, const char *const *params, const char *what, char *error,
		       size_t error_len)
{
	PGresult *res = pgconn_query(conn, sql, n, params);
	if (!res)
		set_error(error, error_len, "cannot read %s: %s", what, pgconn_message(conn));
	return res;
}

static uint64_t parse_u64(const char *text)
{
	return strtoull(text, NULL, 10);
}

/* A non-negative byte difference from pg_wal_lsn_diff (numeric text). */
static uint64_t parse_diff(const char *text)
{
	if (!text || *text == '-')
		return 0;
	return strtoull(text, NULL, 10);
}

/* ---- source ---- */

static void gather_source(struct status_source *s, const struct flow_config *cfg)
{
	PGconn *conn = connect_readonly(cfg->source_database_url, "source", s->error, sizeof s->error);
	if (!conn)
		return;
	PGresult *res = query(conn,
			      "SELECT pg_is_in_recovery(), CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()"
			      " ELSE pg_current_wal_lsn() END, current_setting('server_version_num')",
			      0, NULL, "the WAL position", s->error, sizeof s->error);
	if (!res)
		goto out;
	s->in_recovery = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	bool has_wal = !PQgetisnull(res, 0, 1) && lsn_parse(PQgetvalue(res, 0, 1), &s->wal_lsn);
	s->server_version_num = atoi(PQgetvalue(res, 0, 2));
	char wal_text[LSN_FORMAT_LEN];
	lsn_format(s->wal_lsn, wal_text);
	PQclear(res);

	/* wal_status exists from PostgreSQL 13 on */
	const char *wal_status = s->server_version_num >= 130000 ? "coalesce(s.wal_status, '')" : "''";
	char *sql = xasprintf("SELECT s.active, coalesce(s.active_pid, 0), s.restart_lsn, s.confirmed_flush_lsn, %s,"
			      " pg_wal_lsn_diff($2::pg_lsn, s.restart_lsn), pg_wal_lsn_diff($2::pg_lsn, s.confirmed_flush_lsn),"
			      " extract(epoch FROM r.flush_lag), r.pid IS NOT NULL"
			      " FROM pg_catalog.pg_replication_slots s"
			      " LEFT JOIN pg_catalog.pg_stat_replication r ON r.pid = s.active_pid"
			      " WHERE s.slot_name = $1",
			      wal_status);
	const char *p[2] = { cfg->slot, wal_text };
	res = query(conn, sql, 2, p, "the replication slot", s->error, sizeof s->error);
	free(sql);
	if (!res)
		goto out;
	s->available = true;
	if (PQntuples(res) == 1) {
		s->slot_exists = true;
		s->slot_active = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
		s->slot_active_pid = atoi(PQgetvalue(res, 0, 1));
		s->has_restart_lsn = !PQgetisnull(res, 0, 2) && lsn_parse(PQgetvalue(res, 0, 2), &s->restart_lsn);
		s->has_confirmed_flush = !PQgetisnull(res, 0, 3) && lsn_parse(PQgetvalue(res, 0, 3), &s->confirmed_flush_lsn);
		snprintf(s->wal_status, sizeof s->wal_status, "%s", PQgetvalue(res, 0, 4));
		if (has_wal && s->has_restart_lsn && !PQgetisnull(res, 0, 5)) {
			s->has_retained = true;
			s->retained_bytes = parse_diff(PQgetvalue(res, 0, 5));
		}
		if (has_wal && s->has_confirmed_flush && !PQgetisnull(res, 0, 6)) {
			s->has_lag_bytes = true;
			s->lag_bytes = parse_diff(PQgetvalue(res, 0, 6));
		}
		bool walsender_visible = strcmp(PQgetvalue(res, 0, 8), "t") == 0;
		if (!s->slot_active) {
			snprintf(s->lag_seconds_basis, sizeof s->lag_seconds_basis,
				 "unknown: no capture is connected to the slot (lag_bytes is the WAL it has not confirmed)");
		} else if (!PQgetisnull(res, 0, 7)) {
			s->has_lag_seconds = true;
			s->lag_seconds = strtod(PQgetvalue(res, 0, 7), NULL);
			snprintf(s->lag_seconds_basis, sizeof s->lag_seconds_basis,
				 "pg_stat_replication.flush_lag: the source's time from flushing WAL to capture confirming it durable");
		} else if (s->has_lag_bytes && s->lag_bytes == 0) {
			s->has_lag_seconds = true;
			s->lag_seconds = 0;
			snprintf(s->lag_seconds_basis, sizeof s->lag_seconds_basis,
				 "caught up: the slot confirmed the current WAL position");
		} else if (!walsender_visible) {
			snprintf(s->lag_seconds_basis, sizeof s->lag_seconds_basis,
				 "unknown: pg_stat_replication shows no row for the slot's walsender to this role");
		} else {
			snprintf(s->lag_seconds_basis, sizeof s->lag_seconds_basis,
				 "unknown: the source has not measured a flush lag (pg_stat_replication.flush_lag is null)");
		}
	} else {
		snprintf(s->lag_seconds_basis, sizeof s->lag_seconds_basis, "unknown: the slot does not exist");
	}
	PQclear(res);
out:
	PQfinish(conn);
}

/* ---- stream ---- */

/* Append time of the frame at offset; false when it cannot be read. */
static bool frame_time_at(struct stream_reader *reader, uint64_t offset, int64_t *append_us)
{
	struct stream_frame f;
	if (stream_reader_seek(reader, offset) != STREAM_OK || stream_reader_next(reader, &f) != STREAM_OK)
		return false;
	*append_us = f.header.append_time_us;
	return true;
}

/* The newest frame, and the highest source LSN durable in the stream
 * (a transaction's end LSN or a watermark): what capture acknowledges to
 * the source.  Scans segments newest first until one holds such a frame
 * (at most a few: a segment of chunks alone carries no end LSN until its
 * commit marker). */
static void scan_tail(struct status_stream *s, const char *dir, struct stream_reader *reader, int64_t now)
{
	uint64_t *bases = NULL;
	size_t n = 0;
	if (stream_segment_bases(dir, &bases, &n) != STREAM_OK)
		return;
	for (size_t k = n, scanned = 0; k-- > 0 && scanned < 4 && !s->has_ack; scanned++) {
		if (stream_reader_seek(reader, bases[k]) != STREAM_OK)
			break;
		bool newest_here = !s->has_newest; /* the newest segment that holds a frame */
		struct stream_frame f;
		while (stream_reader_next(reader, &f) == STREAM_OK) {
			if (newest_here) {
				s->has_newest = true;
				format_time_us(f.header.append_time_us, s->newest_time, sizeof s->newest_time);
				s->newest_age_seconds = age_seconds(now, f.header.append_time_us);
			}
			int t = f.header.type;
			if (t != FRAME_TXN && t != FRAME_COMMIT_MARKER && t != FRAME_WATERMARK)
				continue;
			struct env_frame_summary sum;
			char err[256];
			if (env_frame_summary(t, f.payload, f.header.payload_length, &sum, err, sizeof err) < 0)
				continue; /* trellara stream read names the bad frame */
			uint64_t lsn = t == FRAME_WATERMARK ? sum.lsn : sum.end_lsn;
			if (!s->has_ack || lsn >= s->ack_lsn) {
				s->has_ack = true;
				s->ack_lsn = lsn;
				format_time_us(f.header.append_time_us, s->ack_time, sizeof s->ack_time);
				s->ack_age_seconds = age_seconds(now, f.header.append_time_us);
			}
		}
	}
	free(bases);
}

static void gather_stream(struct status_stream *s, const struct flow_config *cfg)
{
	if (cfg->stream_kind == STREAM_KIND_JETSTREAM) {
		s->jetstream = true;
		set_error(s->error, sizeof s->error,
			  "JetStream stream \"%s\": status reads no NATS server (\"trellara stream inspect --config %s\" does); the broker's state below is capture's",
			  cfg->jetstream_stream, cfg->path);
		return;
	}
	const char *dir = cfg->stream_path;
	char *segments = xasprintf("%s/segments", dir);
	struct stat st;
	bool exists = stat(segments, &st) == 0 && S_ISDIR(st.st_mode);
	free(segments);
	if (!exists) {
		set_error(s->error, sizeof s->error, "no stream at \"%s\" (capture has not created it yet, or it is gone)", dir);
		return;
	}
	struct stream_report rep;
	int rc = -1;
	/* retention may remove a segment under our feet: look again once */
	for (int attempt = 0; attempt < 2 && rc < 0; attempt++)
		rc = stream_inspect(dir, (const char *const *)cfg->protected_groups, cfg->n_protected_groups, &rep);
	if (rc < 0) {
		set_error(s->error, sizeof s->error, "cannot inspect the stream at \"%s\" (see the log above)", dir);
		return;
	}
	s->available = true;
	s->writer_active = rep.writer_active;
	s->corrupt = rep.corrupt;
	s->empty = rep.empty;
	s->first_offset = rep.first_offset;
	s->next_offset = rep.next_offset;
	s->bytes = rep.total_bytes;
	s->torn_bytes = rep.torn_bytes;
	s->segments = rep.n_segments;
	for (size_t i = 0; i < rep.n_groups; i++) {
		if (strcmp(rep.groups[i].name, cfg->consumer_group) == 0) {
			s->group_exists = rep.groups[i].exists;
			s->group_position = rep.groups[i].position;
			s->group_pending = rep.groups[i].pending;
		}
	}
	if (!s->group_exists) {
		s->group_position = 0;
		s->group_pending = rep.next_offset > rep.first_offset ? rep.next_offset - rep.first_offset : 0;
	}
	stream_report_free(&rep);
	struct stream_meta meta;
	if (stream_meta_read(dir, &meta) == 0) {
		s->timeline = meta.timeline ? (uint32_t)strtoul(meta.timeline, NULL, 10) : 0;
		stream_meta_free(&meta);
	}
	if (s->empty)
		return;
	struct stream_reader *reader = NULL;
	if (stream_reader_open(dir, &reader) != STREAM_OK)
		return;
	int64_t now = clock_wall_us(), t;
	if (frame_time_at(reader, s->first_offset, &t)) {
		s->has_oldest = true;
		format_time_us(t, s->oldest_time, sizeof s->oldest_time);
		s->oldest_age_seconds = age_seconds(now, t);
	}
	uint64_t pending_from = s->group_position > s->first_offset ? s->group_position : s->first_offset;
	if (s->group_pending > 0 && frame_time_at(reader, pending_from, &t)) {
		s->has_pending_age = true;
		s->oldest_pending_age_seconds = age_seconds(now, t);
	}
	scan_tail(s, dir, reader, now);
	stream_reader_close(reader);
}

/* ---- target ---- */

struct checkpoint_sample {
	bool exists;
	int64_t taken_us;
	uint64_t transactions, changes;
};

static struct flow_ids flow_ids_of(const struct flow_config *cfg)
{
	return (struct flow_ids){ cfg->source_id, cfg->dataset_id, cfg->consumer_group };
}

/* Reads the checkpoint into sample; into t too when fill (the first
 * sample: the one read at about the moment the rest is read). */
static int read_checkpoint(PGconn *conn, const struct flow_config *cfg, struct status_target *t,
			   struct checkpoint_sample *sample, bool fill)
{
	struct flow_ids ids = flow_ids_of(cfg);
	struct checkpoint_observed o;
	char error[sizeof t->error];
	if (checkpoint_observe(conn, cfg->checkpoint_schema, &ids, &o, error, sizeof error) < 0) {
		set_error(t->error, sizeof t->error, "%s", error);
		return -1;
	}
	sample->taken_us = clock_mono_us();
	sample->exists = o.exists;
	if (sample->exists) {
		sample->transactions = o.cp.applied_transactions;
		sample->changes = o.cp.applied_changes;
	}
	if (fill)
		t->checkpoint_exists = sample->exists;
	if (fill && sample->exists) {
		t->last_commit_lsn = o.cp.last_commit_lsn;
		t->applied_through_lsn = o.cp.applied_through_lsn;
		t->stream_offset = o.cp.stream_offset;
		t->last_xid = o.cp.last_xid;
		t->applied_transactions = sample->transactions;
		t->applied_changes = sample->changes;
		t->skipped_duplicates = o.cp.skipped_duplicates;
		snprintf(t->checkpoint_updated_at, sizeof t->checkpoint_updated_at, "%s", o.updated_at);
		t->checkpoint_age_seconds = o.age_seconds;
	}
	return 0;
}

static int read_quarantine(PGconn *conn, const struct flow_config *cfg, struct status_target *t)
{
	struct flow_ids ids = flow_ids_of(cfg);
	struct quarantine_entry *q;
	int n;
	char error[sizeof t->error];
	if (checkpoint_quarantine_observe(conn, cfg->checkpoint_schema, &ids, &q, &n, error, sizeof error) < 0) {
		set_error(t->error, sizeof t->error, "%s", error);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		bool open = strcmp(q[i].state, "quarantined") == 0;
		if (open) {
			if (t->quarantine_open++ == 0) {
				t->has_quarantine_oldest = true;
				t->quarantine_oldest_age_seconds = q[i].age_seconds;
				snprintf(t->quarantine_oldest_at, sizeof t->quarantine_oldest_at, "%s", q[i].created_at);
			}
		} else {
			t->quarantine_replay_ready++;
		}
		if (t->n_listed < STATUS_MAX_QUARANTINE_LISTED) {
			struct status_quarantine_entry *e = &t->listed[t->n_listed++];
			e->id = q[i].id;
			e->xid = q[i].xid;
			e->commit_lsn = q[i].commit_lsn;
			e->stream_offset = q[i].stream_offset;
			snprintf(e->reason, sizeof e->reason, "%s", q[i].reason);
			snprintf(e->state, sizeof e->state, "%s", q[i].state);
			snprintf(e->created_at, sizeof e->created_at, "%s", q[i].created_at);
			e->age_seconds = q[i].age_seconds;
		}
	}
	free(q);
	return 0;
}

static int read_run(PGconn *conn, const struct flow_config *cfg, struct status_target *t)
{
	struct run_row run;
	char error[sizeof t->error];
	if (runs_observe(conn, cfg->checkpoint_schema, cfg->source_id, cfg->dataset_id, &run, error, sizeof error) < 0) {
		set_error(t->error, sizeof t->error, "%s", error);
		return -1;
	}
	if (run.exists) {
		t->run_exists = true;
		snprintf(t->run_id, sizeof t->run_id, "%s", run.run_id);
		snprintf(t->run_state, sizeof t->run_state, "%s", run_state_name(run.state));
		snprintf(t->run_failure_reason, sizeof t->run_failure_reason, "%s", run.failure_reason);
		snprintf(t->run_updated_at, sizeof t->run_updated_at, "%s", run.updated_at);
	}
	return 0;
}

static int read_cutover(PGconn *conn, const struct flow_config *cfg, struct status_target *t)
{
	struct cutover_row row;
	char error[sizeof t->error];
	if (cutover_observe(conn, cfg->checkpoint_schema, cfg->source_id, cfg->dataset_id, &row, error, sizeof error) < 0) {
		set_error(t->error, sizeof t->error, "%s", error);
		return -1;
	}
	t->cutover_exists = row.exists;
	if (!row.exists)
		return 0;
	snprintf(t->cutover_state, sizeof t->cutover_state, "%s", cutplan_state_name(row.state));
	snprintf(t->cutover_source_lock, sizeof t->cutover_source_lock, "%s", cutplan_lock_name(row.source_lock));
	snprintf(t->cutover_verify_result, sizeof t->cutover_verify_result, "%s", row.verify_result);
	t->cutover_lock_source = row.lock_source;
	t->cutover_has_final_lsn = row.has_final_lsn;
	t->cutover_final_lsn = row.final_lsn;
	t->cutover_has_verified_at_lsn = row.has_verified_at_lsn;
	t->cutover_verified_at_lsn = row.verified_at_lsn;
	t->cutover_sequence_margin = row.sequence_margin;
	snprintf(t->cutover_started_at, sizeof t->cutover_started_at, "%s", row.started_at);
	snprintf(t->cutover_completed_at, sizeof t->cutover_completed_at, "%s", row.completed_at);
	snprintf(t->cutover_updated_at, sizeof t->cutover_updated_at, "%s", row.updated_at);
	snprintf(t->cutover_failure_reason, sizeof t->cutover_failure_reason, "%s", row.failure_reason);
	return 0;
}

/* Whether the checkpoint schema's tables exist (status never creates them). */
static int schema_present(PGconn *conn, const struct flow_config *cfg, struct status_target *t)
{
	char error[sizeof t->error];
	if (checkpoint_schema_present(conn, cfg->checkpoint_schema, &t->schema_exists, error, sizeof error) < 0) {
		set_error(t->error, sizeof t->error, "%s", error);
		return -1;
	}
	return 0;
}

/* ---- supervisor files ---- */

/* The sum of the samples of metric name in a .prom file's text (those
 * with label="value" when label is set); *found when there is one. */
static double prom_sum_found(const char *text, const char *name, const char *label, const char *value, bool *found)
{
	double sum = 0;
	*found = false;
	size_t n = strlen(name);
	char want[160] = "";
	if (label)
		snprintf(want, sizeof want, "%s=\"%s\"", label, value);
	for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		if (strncmp(line, name, n) != 0 || (line[n] != '{' && line[n] != ' '))
			continue;
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		char sample[1024];
		snprintf(sample, sizeof sample, "%.*s", (int)(len < sizeof sample ? len : sizeof sample - 1), line);
		if (label && !strstr(sample, want))
			continue;
		const char *space = strrchr(sample, ' ');
		if (space) {
			sum += strtod(space + 1, NULL);
			*found = true;
		}
	}
	return sum;
}

static uint64_t prom_sum(const char *text, const char *name, const char *label, const char *value)
{
	bool found;
	double v = prom_sum_found(text, name, label, value, &found);
	return v > 0 ? (uint64_t)v : 0;
}

/* What the daemon's .prom file says about its connections. */
static void read_daemon_file(struct status_daemon_file *d, const char *path)
{
	char *text = NULL;
	size_t len = 0;
	if (fs_read_file(path, &text, &len) < 0)
		return;
	char name[128];
	snprintf(name, sizeof name, "trellara_%s_credentials_refused", d->program);
	d->credentials_refused = prom_sum(text, name, NULL, NULL) > 0;
	snprintf(name, sizeof name, "trellara_%s_connect_failures_total", d->program);
	d->auth_failures = prom_sum(text, name, "cause", "authentication");
	d->other_failures = prom_sum(text, name, "cause", "other");
	snprintf(name, sizeof name, "trellara_%s_disconnects_total", d->program);
	for (int i = 0; i < SQLSTATE_END_COUNT; i++)
		d->disconnects[i] = prom_sum(text, name, "cause", sqlstate_end_name((enum sqlstate_end)i));
	snprintf(name, sizeof name, "trellara_%s_promotions_total", d->program);
	d->promotions = prom_sum(text, name, NULL, NULL);
	bool found;
	double available = prom_sum_found(text, "trellara_capture_broker_available", NULL, NULL, &found);
	if (found && strcmp(d->program, "capture") == 0) {
		d->has_broker = true;
		d->broker_available = available > 0;
		d->broker_pending_acks = prom_sum(text, "trellara_capture_broker_pending_acks", NULL, NULL);
		d->broker_retries = prom_sum(text, "trellara_capture_broker_retries_total", NULL, NULL);
		d->broker_holds = prom_sum(text, "trellara_capture_broker_holds_total", NULL, NULL);
		d->broker_published = prom_sum(text, "trellara_capture_broker_published_frames_total", NULL, NULL);
		d->broker_publish_seconds = prom_sum_found(text, "trellara_capture_broker_publish_seconds", NULL, NULL,
							   &found);
	}
	free(text);
}


static void gather_supervisor(struct status_supervisor *s, const struct flow_config *cfg)
{
	static const char *const programs[2] = { "capture", "applyd" }; /* their metrics_write_file names */
	s->daemons[0].program = programs[0];
	s->daemons[1].program = programs[1];
	if (!cfg->metrics_dir) {
		set_error(s->error, sizeof s->error, "observability.metrics_dir is not set and has no default place (no home directory, no TRELLARA_STATE_DIR): no supervisor state, no metrics files");
		return;
	}
	s->configured = true;
	s->metrics_dir = cfg->metrics_dir;
	time_t now = (time_t)(clock_wall_us() / 1000000);
	for (int i = 0; i < 2; i++) {
		char path[4096];
		struct stat st;
		snprintf(path, sizeof path, "%s/%s.prom", cfg->metrics_dir, programs[i]);
		if (stat(path, &st) == 0) {
			s->daemons[i].exists = true;
			s->daemons[i].age_seconds = difftime(now, st.st_mtime);
			read_daemon_file(&s->daemons[i], path);
		}
	}
	snprintf(s->path, sizeof s->path, "%s/supervisor.state", cfg->metrics_dir);
	FILE *f = fopen(s->path, "r");
	if (!f) {
		set_error(s->error, sizeof s->error, "cannot read \"%s\": %s", s->path,
			  errno == ENOENT ? "no such file (trellara run has not run with this metrics_dir)" : strerror(errno));
		return;
	}
	s->available = true;
	char line[512];
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = '\0';
		char *eq = strchr(line, '=');
		if (!eq)
			continue;
		*eq = '\0';
		const char *key = line, *value = eq + 1;
		if (strcmp(key, "capture_restarts") == 0) {
			s->has_capture_restarts = true;
			s->capture_restarts = parse_u64(value);
		} else if (strcmp(key, "applyd_restarts") == 0) {
			s->has_applyd_restarts = true;
			s->applyd_restarts = parse_u64(value);
		} else if (strcmp(key, "state") == 0) {
			snprintf(s->state, sizeof s->state, "%s", value);
		} else if (strcmp(key, "updated_at") == 0) {
			snprintf(s->updated_at, sizeof s->updated_at, "%s", value);
		} else if (strcmp(key, "supervisor_pid") == 0) {
			s->supervisor_pid = strtol(value, NULL, 10);
		} else if (strcmp(key, "last_exit") == 0) {
			snprintf(s->last_exit, sizeof s->last_exit, "%s", value);
		}
	}
	fclose(f);
	s->supervisor_alive = fs_process_runs(s->supervisor_pid, "trellara-run");
}

/* ---- all of it ---- */

void status_gather(struct status_report *r, const struct flow_config *cfg, double rate_seconds)
{
	memset(r, 0, sizeof *r);
	r->cfg = cfg;
	r->flow = config_flow_id(cfg);
	format_time_us(clock_wall_us(), r->generated_at, sizeof r->generated_at);

	struct status_target *t = &r->target;
	struct checkpoint_sample first = { 0 }, second = { 0 };
	PGconn *target = connect_readonly(cfg->target_database_url, "target", t->error, sizeof t->error);
	bool target_ok = target && schema_present(target, cfg, t) == 0;
	/* downstream first: the target, the stream, then the source, so that
	 * on a moving flow applied <= acknowledged <= WAL position holds and
	 * the lags come out non-negative */
	if (target_ok && t->schema_exists && read_checkpoint(target, cfg, t, &first, true) < 0)
		target_ok = false;
	gather_stream(&r->stream, cfg);
	gather_source(&r->source, cfg);
	gather_supervisor(&r->supervisor, cfg);

	if (target_ok && t->schema_exists) {
		if (rate_seconds > 0 && first.exists) {
			int64_t until = first.taken_us + (int64_t)(rate_seconds * 1e6);
			for (int64_t now = clock_mono_us(); now < until; now = clock_mono_us()) {
				struct timespec ts = { (until - now) / 1000000, ((until - now) % 1000000) * 1000 };
				nanosleep(&ts, NULL);
			}
			if (read_checkpoint(target, cfg, t, &second, false) < 0) {
				target_ok = false;
			} else if (second.exists && second.transactions >= first.transactions &&
				   second.changes >= first.changes) {
				t->has_rate = true;
				t->rate_window_seconds = (double)(second.taken_us - first.taken_us) / 1e6;
				t->transactions_per_second =
					(double)(second.transactions - first.transactions) / t->rate_window_seconds;
				t->changes_per_second = (double)(second.changes - first.changes) / t->rate_window_seconds;
			}
		}
		if (target_ok && (read_quarantine(target, cfg, t) < 0 || read_run(target, cfg, t) < 0 ||
				  read_cutover(target, cfg, t) < 0))
			target_ok = false;
	}
	t->available = target_ok;
	PQfinish(target);
}

void status_report_free(struct status_report *r)
{
	free(r->flow);
	free(r->problems);
	memset(r, 0, sizeof *r);
}
