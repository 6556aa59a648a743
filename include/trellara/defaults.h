/*
 * defaults.h - every default, environment variable name and exit code
 * Trellara uses, in one place.  The supervisor script and the man pages
 * quote these same numbers (DESIGN §10); change them together.
 */
#ifndef TRELLARA_DEFAULTS_H
#define TRELLARA_DEFAULTS_H

#define TRELLARA_VERSION "0.1.0"

/* Exit codes (sysexits, DESIGN §10).  Only main() picks one. */
enum trellara_exit {
	EXIT_OK = 0,           /* success; CONVERGED; no blockers */
	EXIT_NEGATIVE = 1,     /* divergence, blockers, quarantine present */
	EXIT_USAGE = 64,       /* command-line usage error */
	EXIT_DATAERR = 65,     /* corrupt frame, malformed envelope, bad checksum */
	EXIT_NOINPUT = 66,     /* what the flow names does not exist (a JetStream stream not created) */
	EXIT_UNAVAILABLE = 69, /* a server unavailable after bounded retries */
	EXIT_CANTCREAT = 73,   /* fail-closed on storage pressure or failure */
	EXIT_TEMPFAIL = 75,    /* temporary failure; safe to restart */
	EXIT_CONFIG = 78       /* configuration error */
};

/* The exit codes a restart cannot fix: quarantine, usage, corrupt data,
 * storage, configuration.  The supervisor (trellara-run) and the systemd
 * units (RestartPreventExitStatus=) stop instead of restarting; `make`
 * generates both lists from this one (scripts/gen-exit-codes.c). */
#define EXIT_FAIL_CLOSED_LIST EXIT_NEGATIVE, EXIT_USAGE, EXIT_DATAERR, EXIT_CANTCREAT, EXIT_CONFIG

/* Environment variables. */
#define ENV_FAULT "TRELLARA_FAULT"         /* point[:nth]: die like kill -9 there */
#define ENV_LOG_LEVEL "TRELLARA_LOG_LEVEL" /* error|warn|info|debug */
#define ENV_LOG_FORMAT "TRELLARA_LOG_FORMAT" /* text|json */
#define ENV_NO_COLOR "NO_COLOR" /* any value: no colour in logs on a terminal */
#define ENV_STATUS_INTERVAL_MS "TRELLARA_STATUS_INTERVAL_MS" /* capture: standby status period (default 10000) */
#define ENV_RECONNECT_BASE_MS "TRELLARA_RECONNECT_BASE_MS" /* first reconnect delay (default 500; doubles up to 60x) */
#define ENV_PAUSE "TRELLARA_PAUSE"         /* tests: pause at this point (see fault.h) */
#define ENV_PAUSE_DIR "TRELLARA_PAUSE_DIR" /* tests: where the pause markers live */
#define ENV_TEST_FSYNC_FAIL "TRELLARA_TEST_FSYNC_FAIL" /* tests: make the nth fdatasync fail with EIO */

/* Stream defaults (DESIGN §3, §4). */
#define DEFAULT_SEGMENT_BYTES (64ULL * 1024 * 1024)
/* stream.compression of a local stream (DESIGN §4 has the measurement
 * that chose it) */
#define DEFAULT_STREAM_COMPRESSION "none"
#define DEFAULT_MAX_BATCH_TRANSACTIONS 100
#define DEFAULT_MAX_BATCH_MESSAGES 100
#define DEFAULT_MIN_FREE_BYTES (1024ULL * 1024 * 1024)
#define MIN_SEGMENT_BYTES (64ULL * 1024)
/* Frames are packed up to FRAME_TARGET_PAYLOAD: a transaction larger
 * than that is written in the chunked form, a chunk holding changes up to
 * this size.  A single change larger than that gets a chunk of its own,
 * up to MAX_FRAME_PAYLOAD, which no payload ever exceeds: PostgreSQL sends
 * one change in one logical decoding message, and such a message is
 * always shorter than 1 GiB (MaxAllocSize); the rest is room for the
 * envelope's head.  Readers hold one frame at a time, so their memory is
 * bounded by the largest single change, never by a transaction. */
#define FRAME_TARGET_PAYLOAD (16U * 1024 * 1024)
#define MAX_FRAME_PAYLOAD (1024U * 1024 * 1024 + 64U * 1024 * 1024)

/* Programs' defaults: what a main() uses when no option or environment
 * variable says otherwise (the man pages state the same numbers). */
/* capture, applyd: reconnection attempts in a row before exit 69 */
#define DEFAULT_MAX_RECONNECT_ATTEMPTS 8
/* capture, applyd: TRELLARA_RECONNECT_BASE_MS, the first reconnect delay
 * (verify: the first wait between passes);
 * it doubles up to 60 times this, so the range keeps 60x inside an int */
#define DEFAULT_RECONNECT_BASE_MS 500
#define MIN_RECONNECT_BASE_MS 1
#define MAX_RECONNECT_BASE_MS 60000
/* capture: TRELLARA_STATUS_INTERVAL_MS, the standby status period */
#define DEFAULT_STATUS_INTERVAL_MS 10000
#define MIN_STATUS_INTERVAL_MS 1
#define MAX_STATUS_INTERVAL_MS 3600000
/* capture: at most one watermark frame per this many milliseconds */
#define DEFAULT_WATERMARK_INTERVAL_MS 1000
/* verify --fence-timeout SECS: how long to wait for applyd at the fence */
#define DEFAULT_FENCE_TIMEOUT_S 120
#define MAX_FENCE_TIMEOUT_S 86400
/* verify --max-attempts N: passes before a lost connection is exit 69 */
#define DEFAULT_VERIFY_MAX_ATTEMPTS 5
#define MAX_VERIFY_MAX_ATTEMPTS 100
/* verify: libpq's connect_timeout (seconds), so that a stop is heard soon */
#define VERIFY_CONNECT_TIMEOUT_S "5"
/* The divergent keys verify records per table and kind (its JSON's
 * key_values); a count above it lists this many, and repair-plan proposes
 * the reseed of the table (trellara-verify(1)). */
#define VERIFY_MAX_RECORDED_KEYS 10000
/* repair-plan --max-keys: divergent keys of one table it repairs row by
 * row; more, and it proposes the reseed of the table */
#define DEFAULT_REPAIR_MAX_KEYS 1000
/* status --rate-seconds N: how far apart the apply rate's two samples are */
#define DEFAULT_STATUS_RATE_SECONDS 1
#define MAX_STATUS_RATE_SECONDS 3600

/* Flow-file defaults. */
#define DEFAULT_CHECKPOINT_SCHEMA "trellara"
#define DEFAULT_CONSUMER_GROUP "applyd"
/* apply.batch_transactions: with compaction, and without it (unfolded,
 * repeated updates of one row inside one target transaction make each
 * next update walk that row's versions: measured, 1000 without
 * compaction is 0.32x native on the TPC-B backlog where 100 is 0.73x) */
#define DEFAULT_APPLY_BATCH_TRANSACTIONS 1000
#define DEFAULT_APPLY_BATCH_TRANSACTIONS_UNFOLDED 100
/* apply.workers: target connections (PARALLEL APPLY in trellara-applyd(1));
 * 2 measured best on the 2-core bench machine (make bench, issue 13) */
#define DEFAULT_APPLY_WORKERS 2
#define MAX_APPLY_WORKERS 16
/* apply.copy_inserts: runs of at least APPLY_COPY_MIN_ROWS inserts of one
 * table go as one COPY (COPY in trellara-applyd(1)).  Off by default: on
 * the bench's inserts workload COPY tied with multi-row INSERT at
 * workers 1 and lost at workers 2 (it leaves the pipeline; make bench,
 * issue 13) */
#define DEFAULT_APPLY_COPY_INSERTS false
#define APPLY_COPY_MIN_ROWS 8
/* with apply.workers > 1, a lock wait inside a batch ends after this
 * (SQLSTATE 55P03): the batches in flight are rolled back and applied
 * again on one connection, where waits are not bounded */
#define APPLY_PARALLEL_LOCK_TIMEOUT_MS 5000
#define DEFAULT_SNAPSHOT_WORKERS 2
/* snapshot.split_bytes: a plain table larger than this is copied in
 * ranges of about this size (0: never split) */
#define DEFAULT_SNAPSHOT_SPLIT_BYTES (1024ULL * 1024 * 1024)
/* maintenance_work_mem of the sessions that build the keys and indexes
 * of --create-tables, when the target's is smaller (never lowered) */
#define SNAPSHOT_BUILD_MAINTENANCE_WORK_MEM "256MB"
#define DEFAULT_SPILL_THRESHOLD_CHANGES 1024
#define DEFAULT_STREAM_SPILL_DIR "./target/trellara-spill"
/* dataset.contract_pin: the pinned schema fingerprint (trellara-contract-test(1)) */
#define DEFAULT_CONTRACT_PIN "./target/trellara-contract.json"
#define DEFAULT_WAL_RETENTION_WARN_BYTES (1024ULL * 1024 * 1024)
/* source.expected_downtime_seconds: the longest capture outage trellara check
 * measures the slot limits against (one hour) */
#define DEFAULT_EXPECTED_DOWNTIME_S 3600ULL
#define DEFAULT_MAX_CHANGES_PER_CHUNK 1000
/* stream.kind jetstream: stream.replicas and stream.duplicate_window_seconds
 * (JetStream's own default window is two minutes) */
#define DEFAULT_JETSTREAM_REPLICAS 3
#define MAX_JETSTREAM_REPLICAS 5
#define DEFAULT_JETSTREAM_DUPLICATE_WINDOW_S 120
#define DEFAULT_PROTOCOL_VERSION 2

/* The logical decoding message the source's TRUNCATE trigger of a
 * partition emits (trellara-check --fix installs it): pgoutput leaves out
 * a TRUNCATE of a single partition when the publication publishes via the
 * root, so this is how it reaches the stream (DESIGN §8). */
#define TRUNCATE_MESSAGE_PREFIX "trellara.truncate"

#endif
