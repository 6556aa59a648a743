/*
 * status.h - trellara-status: one report of a flow, gathered from every
 * place that knows something about it, each read-only:
 *
 *   source   the slot and WAL position (a normal connection; pg_stat_replication
 *            for the source's own measure of capture's flush lag)
 *   stream   stream_inspect() and the frames' append times (never modifies)
 *   target   the checkpoint schema: apply_checkpoint (sampled twice for the
 *            rate), quarantine, snapshot_runs, cutover (read-only transactions; the
 *            schema is never created or migrated by status)
 *   files    <observability.metrics_dir>/supervisor.state (trellara run) and
 *            the daemons' .prom files (their age)
 *
 * Every part has `available` and, when false, `error`: a part that could
 * not be read is reported as unavailable, and its values as unknown (null
 * in JSON, absent in Prometheus), never as zero.  Every optional value
 * carries a has_ flag for the same reason.
 *
 * status_evaluate() turns the report into problems, each with a severity
 * (info, warning, alert), a stable code, what is wrong and the safe next
 * action.  An alert is what needs a person.
 */
#ifndef TRELLARA_STATUS_H
#define TRELLARA_STATUS_H

#include "trellara/config.h"
#include "trellara/sqlstate.h"
#include "trellara/metrics.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Thresholds (seconds) of the apply-behind checks: the oldest frame the
 * applier has not applied yet is older than this. */
#define STATUS_APPLY_BEHIND_WARN_SECONDS 60.0
#define STATUS_APPLY_BEHIND_ALERT_SECONDS 300.0
/* Open quarantine entries listed in a report (the count is exact). */
#define STATUS_MAX_QUARANTINE_LISTED 10
/* Connection and statement timeout of status's own queries. */
#define STATUS_CONNECT_TIMEOUT_SECONDS "10"
#define STATUS_STATEMENT_TIMEOUT_MS "10000"

struct status_source {
	bool available;
	char error[512];
	uint64_t wal_lsn; /* pg_current_wal_lsn(), or the replay LSN on a standby */
	bool in_recovery;
	int server_version_num;
	bool slot_exists;
	bool slot_active;
	int slot_active_pid;
	bool has_restart_lsn, has_confirmed_flush;
	uint64_t restart_lsn, confirmed_flush_lsn;
	char wal_status[24]; /* "" when the server does not say (before 13) */
	bool has_retained;   /* WAL the slot keeps: wal_lsn - restart_lsn */
	uint64_t retained_bytes;
	bool has_lag_bytes;  /* WAL not yet confirmed: wal_lsn - confirmed_flush_lsn */
	uint64_t lag_bytes;
	bool has_lag_seconds;
	double lag_seconds;
	char lag_seconds_basis[160]; /* how lag_seconds was measured, or why it is unknown */
};

struct status_stream {
	bool available;
	char error[512];
	bool writer_active, corrupt, empty;
	uint64_t first_offset, next_offset, bytes, torn_bytes, segments;
	bool has_oldest;  /* append time of the first retained frame */
	char oldest_time[40];
	double oldest_age_seconds;
	bool has_newest;  /* append time of the last frame */
	char newest_time[40];
	double newest_age_seconds;
	bool has_ack;     /* highest source LSN durable in the stream (what capture acknowledges) */
	uint64_t ack_lsn;
	char ack_time[40];
	double ack_age_seconds;
	bool group_exists;
	uint64_t group_position, group_pending;
	bool has_pending_age; /* age of the oldest frame the group has not read */
	double oldest_pending_age_seconds;
	uint32_t timeline; /* the source timeline the stream follows (its meta; 0: not bound yet) */
	/* stream.kind jetstream: status reads no servers (it has no NATS
	 * client); the part is unavailable and the broker's state is what
	 * capture.prom says (struct status_daemon_file's broker fields) */
	bool jetstream;
};

struct status_quarantine_entry {
	int64_t id;
	uint32_t xid;
	uint64_t commit_lsn;
	uint64_t stream_offset;
	char reason[64];
	char state[24];
	char created_at[40];
	double age_seconds;
};

struct status_target {
	bool available;
	char error[512];
	bool schema_exists;     /* the checkpoint schema's tables are there */
	bool checkpoint_exists; /* this flow and group have a checkpoint row */
	uint64_t last_commit_lsn, applied_through_lsn, stream_offset;
	uint32_t last_xid;
	uint64_t applied_transactions, applied_changes, skipped_duplicates;
	char checkpoint_updated_at[40];
	double checkpoint_age_seconds;
	bool has_rate;
	double rate_window_seconds, transactions_per_second, changes_per_second;
	uint64_t quarantine_open, quarantine_replay_ready;
	bool has_quarantine_oldest;
	double quarantine_oldest_age_seconds;
	char quarantine_oldest_at[40];
	struct status_quarantine_entry listed[STATUS_MAX_QUARANTINE_LISTED];
	int n_listed;
	bool run_exists;
	char run_id[128];
	char run_state[32];
	char run_failure_reason[512];
	char run_updated_at[40];
	bool cutover_exists; /* the flow has a cutover row (trellara-cutover) */
	char cutover_state[24], cutover_source_lock[16], cutover_verify_result[16];
	bool cutover_lock_source, cutover_has_final_lsn, cutover_has_verified_at_lsn;
	uint64_t cutover_final_lsn, cutover_verified_at_lsn, cutover_sequence_margin;
	char cutover_started_at[40], cutover_completed_at[40], cutover_updated_at[40];
	char cutover_failure_reason[512];
};

struct status_daemon_file {
	const char *program; /* "capture", "applyd": DIR/capture.prom, DIR/applyd.prom */
	bool exists;
	double age_seconds;
	/* from the file (0 when it has no such sample) */
	bool credentials_refused;            /* *_credentials_refused: the last attempt was refused */
	uint64_t auth_failures, other_failures; /* *_connect_failures_total{cause} */
	uint64_t disconnects[SQLSTATE_END_COUNT]; /* *_disconnects_total{cause} */
	uint64_t promotions;                 /* capture: trellara_capture_promotions_total */
	/* capture on a JetStream stream: trellara_capture_broker_* */
	bool has_broker;
	bool broker_available;
	uint64_t broker_pending_acks, broker_retries, broker_holds, broker_published;
	double broker_publish_seconds;
};

struct status_supervisor {
	bool configured; /* observability.metrics_dir is set */
	char *metrics_dir; /* borrowed from the config */
	bool available;  /* supervisor.state was read */
	char error[512];
	char path[4096];
	char state[32];
	char updated_at[40];
	bool has_capture_restarts, has_applyd_restarts;
	uint64_t capture_restarts, applyd_restarts;
	long supervisor_pid;
	bool supervisor_alive;
	char last_exit[128];
	struct status_daemon_file daemons[2];
};

enum status_severity { STATUS_INFO = 0, STATUS_WARNING, STATUS_ALERT };

struct status_problem {
	enum status_severity severity;
	char code[40];
	char message[768];
	char action[768];
};

struct status_report {
	const struct flow_config *cfg; /* borrowed */
	char *flow;                    /* owned: source_id:dataset_id */
	char generated_at[40];
	struct status_source source;
	struct status_stream stream;
	struct status_target target;
	struct status_supervisor supervisor;
	struct status_problem *problems; /* owned */
	int n_problems;
};

/* ---- gathering (gather.c): never fails as a whole; each part says
 * whether it was available.  rate_seconds > 0 samples the checkpoint
 * twice, that far apart. */
void status_gather(struct status_report *r, const struct flow_config *cfg, double rate_seconds);
void status_report_free(struct status_report *r);

/* ---- problems (problems.c): pure, from the report alone ---- */
void status_evaluate(struct status_report *r);
const char *status_severity_name(enum status_severity s);
int status_count(const struct status_report *r, enum status_severity s);

/* ---- output (output.c, prometheus.c) ---- */
enum status_view { STATUS_VIEW_REPORT = 0, STATUS_VIEW_DIAGNOSTICS, STATUS_VIEW_ALERTS };
void status_print_text(FILE *out, const struct status_report *r, enum status_view view);
void status_print_json(FILE *out, const struct status_report *r, enum status_view view);
/* Adds every signal of the report to m (labels flow and source). */
int status_metrics(const struct status_report *r, struct metrics *m);

/* Bytes as "12.3 MiB" (into buf, returns buf). */
char *status_format_bytes(uint64_t bytes, char *buf, size_t len);

#endif
