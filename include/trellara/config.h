/*
 * config.h - the flow file (DESIGN §3, man 5 trellara.yml).
 *
 * config_load() reads a YAML flow file of the Trellara configuration
 * schema version 2 into a struct flow_config that owns all its strings.
 * Unknown keys, wrong types, missing required keys, bad values and
 * non-YAML input are errors: it logs one message naming the file, the
 * line (and column) and the key path ("source.slot"), and returns -1;
 * main() then exits 78.  Secret references ({source:
 * environment_variable, name: X} or {source: file, path: P}) are resolved
 * at load time; a missing variable or unreadable file is an error naming
 * the reference, never the secret.
 */
#ifndef TRELLARA_CONFIG_H
#define TRELLARA_CONFIG_H

#include "trellara/defaults.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>


enum dataset_mode { DATASET_STRICT_TRANSACTION_ORDER = 0 };
enum stream_durability { STREAM_DURABILITY_FSYNC = 0 };
/* stream.kind: local (segment files, the default) or jetstream (a NATS
 * JetStream stream: every program reads such a flow; trellara stream's
 * commands on a local stream's files refuse it, cli.h local_only) */
enum stream_kind { STREAM_KIND_LOCAL = 0, STREAM_KIND_JETSTREAM };

struct table_config {
	char *schema;             /* owned */
	char *name;               /* owned */
	char *verify_primary_key; /* owned; NULL = the table's own key; comma-separated for composite */
	char **excluded_columns;  /* owned array of owned strings */
	size_t n_excluded_columns;
	bool apply_compaction;    /* dataset.tables[].apply.compaction, default true (folded only when the flow's apply.compaction is true too) */
};

struct flow_config {
	char *path;        /* owned: the file it was loaded from */
	int config_version;
	char *environment; /* owned; may be NULL */

	/* source */
	char *source_id;           /* owned, required */
	char *source_database_url; /* owned, required (resolved secret) */
	char *source_database_url_file; /* owned: the file of a {source: file} reference, read again at every
					 * connection (config_database_url); NULL for inline or environment */
	char **standby_database_urls;  /* owned (resolved secrets): physical standbys trellara check inspects */
	size_t n_standby_database_urls;
	uint64_t expected_downtime_seconds; /* the longest capture outage the slot must survive (check) */
	char *publication;         /* owned, required */
	char *slot;                /* owned, required */
	uint64_t wal_retention_warn_bytes;
	uint64_t stream_spill_threshold_changes;
	char *stream_spill_dir;    /* owned; default "./target/trellara-spill" */
	int pgoutput_protocol_version; /* default 2 */
	bool pgoutput_streaming;       /* default true */

	/* dataset */
	char *dataset_id; /* owned, required */
	enum dataset_mode mode;
	bool strict_chunking;            /* dataset.strict_chunking present */
	uint64_t max_changes_per_chunk;  /* default 1000 */
	struct table_config *tables;     /* owned, at least one */
	size_t n_tables;
	char **sequences;                /* owned: dataset.sequences, "schema.name" each, each once */
	size_t n_sequences;
	char *contract;                  /* owned: dataset.contract, "off" (default) or "pinned" */
	bool contract_pinned;            /* dataset.contract is "pinned": capture and applyd stop at a drift */
	char *contract_pin;              /* owned: dataset.contract_pin, the pinned fingerprint (DEFAULT_CONTRACT_PIN) */

	/* stream */
	char *stream_kind_name; /* owned: stream.kind as written */
	enum stream_kind stream_kind;
	char *stream_path; /* owned; required with kind local, NULL with jetstream */
	char **jetstream_servers; /* owned: stream.servers (jetstream), nats://HOST:PORT each */
	size_t n_jetstream_servers;
	char *jetstream_stream;   /* owned: stream.name, the JetStream stream */
	char *jetstream_subject;  /* owned: stream.subject */
	uint64_t jetstream_replicas; /* stream.replicas, default 3 */
	char *jetstream_credentials; /* owned (resolved secret) or NULL: "user:password", or a token */
	uint64_t jetstream_duplicate_window_seconds; /* default DEFAULT_JETSTREAM_DUPLICATE_WINDOW_S */
	uint64_t jetstream_max_bytes; /* stream.max_bytes: 0 (default) none; a full stream holds capture back */
	bool jetstream_accept_crash_loss; /* stream.accept_loss_on_broker_crash: replicas below 3 allowed */
	enum stream_durability durability;
	uint64_t segment_bytes;
	uint64_t max_batch_transactions;
	uint64_t max_batch_messages;
	uint64_t min_free_bytes;
	char *stream_compression; /* owned: stream.compression, "none" or "zlib" (either kind) */
	bool stream_compression_zlib; /* stream.compression is "zlib" */
	char **protected_groups; /* owned; default: { apply.consumer_group } */
	size_t n_protected_groups;

	/* target */
	char *target_database_url; /* owned, required (resolved secret) */
	char *target_database_url_file; /* owned, as source_database_url_file */
	char *checkpoint_schema;   /* owned; default "trellara" */

	/* snapshot, apply, observability */
	uint64_t snapshot_workers;
	uint64_t snapshot_split_bytes; /* 0: never split */
	char *consumer_group; /* owned; default "applyd" */
	uint64_t apply_batch_transactions;
	bool apply_compaction; /* apply.compaction, default true: batches folded to their net changes */
	bool apply_copy_inserts; /* apply.copy_inserts: runs of inserts as COPY (default DEFAULT_APPLY_COPY_INSERTS) */
	uint64_t apply_workers;  /* apply.workers: target connections batches run on, committed in order */
	char *metrics_dir;    /* owned; default config_default_state_dir(), NULL only when no
			       * default place exists (no HOME for a user other than root) */
	bool metrics_dir_default; /* metrics_dir is the default, not the file's */
};

/* Load and validate path.  On success fills *config (caller frees it with
 * config_free) and returns 0; on failure logs the reason and returns -1
 * with *config zeroed, so config_free on it is harmless. */
int config_load(const char *path, struct flow_config *config);
/* Checks that a connection string parses: 0, or -1 with a message in why
 * that never quotes the string.  config_load refuses a flow whose
 * source.database_url, target.database_url or a standby URL fails it.
 * The connection layer (common/pg/pgconn.c, libpq's PQconninfoParse)
 * installs it in every program that links it, before main runs; this
 * library does not link libpq. */
typedef int config_url_check_fn(const char *url, char *why, size_t why_len);
extern config_url_check_fn *config_url_check;
void config_free(struct flow_config *config);
/* The default of observability.metrics_dir, where trellara run keeps
 * supervisor.state and the programs their metrics files, so that run,
 * status, cutover and drill find one place without configuration:
 * <root>/<source_id>/<dataset_id>, the root being state_env
 * ($TRELLARA_STATE_DIR) when set, else /var/lib/trellara for root, else
 * $XDG_STATE_HOME/trellara (only an absolute one, as the XDG spec says)
 * or <home>/.local/state/trellara.  Newly allocated; NULL when none of
 * them applies.  Pure: the caller reads the environment. */
char *config_default_state_dir(const char *state_env, bool root, const char *xdg_state_home, const char *home,
			       const char *source_id, const char *dataset_id);
/* "source_id:dataset_id", newly allocated. */
char *config_flow_id(const struct flow_config *config);

/* The source's (source true) or the target's connection string, newly
 * allocated, to connect with now: a {source: file} reference is read again,
 * so a rotated secret takes effect at the next connection (a file that
 * cannot be read or is empty keeps the value read before, with a warning);
 * inline and environment values are the ones loaded.  Free it with
 * config_free_secret(); never print it. */
char *config_database_url(const struct flow_config *config, bool source);
void config_free_secret(char *secret); /* zeroes, then frees; NULL is fine */

/* ---- one value by its key path (trellara-config get) ----
 *
 * A key path is the key's sections joined by dots, as the loader's
 * messages write it ("source.pgoutput.streaming").  The schema's tables
 * (config_schema.c) are the only list of keys: every scalar key of them
 * can be asked for; lists (dataset.tables, dataset.sequences,
 * stream.protected_groups) and
 * sections are not scalars. */
enum config_key_kind {
	CONFIG_KEY_UNKNOWN = 0, /* not a key of the schema, or not a scalar */
	CONFIG_KEY_SCALAR,
	CONFIG_KEY_SECRET, /* source.database_url, target.database_url: never printed */
};
struct strbuf;
enum config_key_kind config_key_kind(const char *keypath);
/* Appends the value of the scalar key keypath, as config_load read it
 * (defaults filled in; booleans "true"/"false"), to out.  Returns 1 when
 * there is a value, 0 when the key has none (not set, no default: out is
 * unchanged), -1 when keypath is not CONFIG_KEY_SCALAR.  Never logs. */
int config_get_scalar(const struct flow_config *config, const char *keypath, struct strbuf *out);

#endif
