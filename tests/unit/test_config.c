#include "trellara/config.h"
#include "trellara/strbuf.h"
#include "trellara/defaults.h"
#include "trellara/fsutil.h"
#include "trellara/log.h"
#include "trellara/xalloc.h"
#include "unit.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <unistd.h>

/* Every key, none at its default, so a value read from the wrong key or
 * not read at all shows. */
static const char full_flow[] =
	"config_version: 2\n"
	"environment: staging\n"
	"source:\n"
	"  id: main-db\n"
	"  database_url: postgresql://replicator@db1/app\n"
	"  publication: trellara_orders\n"
	"  slot: trellara_orders_slot\n"
	"  wal_retention_warn_bytes: 2147483648\n"
	"  stream_spill_threshold_changes: 4096\n"
	"  stream_spill_dir: /var/spill\n"
	"  pgoutput:\n"
	"    protocol_version: 1\n"
	"    streaming: false\n"
	"dataset:\n"
	"  id: orders\n"
	"  mode: strict_transaction_order\n"
	"  strict_chunking:\n"
	"    max_changes_per_chunk: 500\n"
	"  tables:\n"
	"    - schema: public\n"
	"      name: accounts\n"
	"      verify:\n"
	"        primary_key: id\n"
	"        excluded_columns: [updated_at, touched_at]\n"
	"    - schema: sales\n"
	"      name: order_lines\n"
	"      verify:\n"
	"        primary_key: [order_id, line_no]\n"
	"    - {schema: public, name: notes}\n"
	"stream:\n"
	"  kind: local\n"
	"  path: ./target/stream\n"
	"  durability: fsync\n"
	"  segment_bytes: 1048576\n"
	"  max_batch_transactions: 50\n"
	"  max_batch_messages: 70\n"
	"  min_free_bytes: 0\n"
	"  protected_groups: [applyd2, audit]\n"
	"target:\n"
	"  database_url: \"host=/run/postgresql dbname=app_copy\"\n"
	"  checkpoint_schema: trellara_ckpt\n"
	"snapshot:\n"
	"  workers: 8\n"
	"apply:\n"
	"  consumer_group: applyd2\n"
	"  batch_transactions: 20\n"
	"observability:\n"
	"  metrics_dir: /var/metrics\n";

/* Only the required keys. */
static const char minimal_flow[] =
	"config_version: 2\n"
	"source:\n"
	"  id: main-db\n"
	"  database_url: postgresql://replicator@db1/app\n"
	"  publication: pub\n"
	"  slot: slot\n"
	"dataset:\n"
	"  id: orders\n"
	"  tables:\n"
	"    - schema: public\n"
	"      name: accounts\n"
	"stream:\n"
	"  kind: local\n"
	"  path: ./target/stream\n"
	"target:\n"
	"  database_url: postgresql:///copy\n";

struct fixture {
	char dir[64]; /* the mkdtemp directory */
	int files;    /* a counter for unique file names */
};

static char *write_file(struct fixture *fx, const char *text)
{
	char *path = xasprintf("%s/flow-%d.yml", fx->dir, ++fx->files);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
	return path;
}

/* text with the first "from" replaced by "to"; from must be there. */
static char *variant(const char *text, const char *from, const char *to)
{
	const char *at = strstr(text, from);
	if (!at) {
		fprintf(stderr, "variant: \"%s\" not in the text\n", from);
		unit_failures++;
		return xstrdup(text);
	}
	return xasprintf("%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
}

/* config_load with stderr captured into *log. */
static int load_captured(struct fixture *fx, const char *path, struct flow_config *config,
			 char **log)
{
	char *log_path = xasprintf("%s/stderr.log", fx->dir);
	fflush(stderr);
	int saved = dup(STDERR_FILENO);
	int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	dup2(fd, STDERR_FILENO);
	close(fd);
	int rc = config_load(path, config);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	size_t len;
	if (fs_read_file(log_path, log, &len) < 0)
		*log = xstrdup("");
	free(log_path);
	return rc;
}

static void check_contains(const char *log, const char *needle, const char *what)
{
	unit_checks++;
	if (!strstr(log, needle)) {
		unit_failures++;
		fprintf(stderr, "%s: \"%s\" not in the message:\n%s\n", what, needle, log);
	}
}

/*
 * Load text; it must fail with one error line naming the file and
 * containing each of the needles (NULL-terminated), such as "line 3" and
 * the key path.  Returns the log (caller frees) for further checks.
 */
static char *expect_error_log(struct fixture *fx, const char *what, const char *text,
			      const char *const *needles)
{
	char *path = write_file(fx, text);
	struct flow_config config;
	char *log = NULL;
	int rc = load_captured(fx, path, &config, &log);
	unit_checks++;
	if (rc != -1) {
		unit_failures++;
		fprintf(stderr, "%s: loaded, expected an error\n", what);
		config_free(&config);
	}
	char *named = xasprintf("flow file \"%s\"", path);
	check_contains(log, named, what);
	for (const char *const *needle = needles; *needle; needle++)
		check_contains(log, *needle, what);
	/* One error (plus at most a hint). */
	int errors = 0;
	for (const char *line = log; *line; line = strchrnul(line, '\n') + (strchr(line, '\n') != NULL)) {
		const char *end = strchrnul(line, '\n');
		char *one = xstrndup(line, (size_t)(end - line));
		if (!strstr(one, ": hint: "))
			errors++;
		free(one);
	}
	unit_checks++;
	if (errors != 1) {
		unit_failures++;
		fprintf(stderr, "%s: %d errors logged, expected one:\n%s\n", what, errors, log);
	}
	/* A failed load leaves nothing behind. */
	CHECK(config.path == NULL && config.tables == NULL && config.source_id == NULL);
	free(named);
	free(path);
	return log;
}

#define EXPECT_ERROR(fx, what, text, ...)                                             \
	do {                                                                          \
		const char *const needles_[] = { __VA_ARGS__, NULL };                 \
		free(expect_error_log((fx), (what), (text), needles_));               \
	} while (0)

/* A variant of full_flow that must fail. */
#define EXPECT_VARIANT_ERROR(fx, from, to, ...)                                       \
	do {                                                                          \
		char *text_ = variant(full_flow, (from), (to));                       \
		EXPECT_ERROR((fx), (to), text_, __VA_ARGS__);                          \
		free(text_);                                                          \
	} while (0)

static int load_ok(struct fixture *fx, const char *text, struct flow_config *config)
{
	char *path = write_file(fx, text);
	char *log = NULL;
	int rc = load_captured(fx, path, config, &log);
	if (rc != 0)
		fprintf(stderr, "unexpected load failure:\n%s\n", log);
	free(log);
	free(path);
	return rc;
}

static void test_full(struct fixture *fx)
{
	struct flow_config c;
	CHECK(load_ok(fx, full_flow, &c) == 0);
	CHECK(c.config_version == 2);
	CHECK_STR(c.environment, "staging");
	CHECK_STR(c.source_id, "main-db");
	CHECK_STR(c.source_database_url, "postgresql://replicator@db1/app");
	CHECK_STR(c.publication, "trellara_orders");
	CHECK_STR(c.slot, "trellara_orders_slot");
	CHECK(c.wal_retention_warn_bytes == 2147483648ULL);
	CHECK(c.stream_spill_threshold_changes == 4096);
	CHECK_STR(c.stream_spill_dir, "/var/spill");
	CHECK(c.pgoutput_protocol_version == 1);
	CHECK(!c.pgoutput_streaming);
	CHECK_STR(c.dataset_id, "orders");
	CHECK(c.mode == DATASET_STRICT_TRANSACTION_ORDER);
	CHECK(c.strict_chunking);
	CHECK(c.max_changes_per_chunk == 500);
	CHECK(c.n_tables == 3);
	if (c.n_tables == 3) {
		CHECK_STR(c.tables[0].schema, "public");
		CHECK_STR(c.tables[0].name, "accounts");
		CHECK_STR(c.tables[0].verify_primary_key, "id");
		CHECK(c.tables[0].n_excluded_columns == 2);
		if (c.tables[0].n_excluded_columns == 2) {
			CHECK_STR(c.tables[0].excluded_columns[0], "updated_at");
			CHECK_STR(c.tables[0].excluded_columns[1], "touched_at");
		}
		CHECK_STR(c.tables[1].schema, "sales");
		CHECK_STR(c.tables[1].name, "order_lines");
		CHECK_STR(c.tables[1].verify_primary_key, "order_id,line_no");
		CHECK(c.tables[1].n_excluded_columns == 0);
		CHECK_STR(c.tables[2].name, "notes");
		CHECK(c.tables[2].verify_primary_key == NULL);
	}
	CHECK_STR(c.stream_path, "./target/stream");
	CHECK(c.durability == STREAM_DURABILITY_FSYNC);
	CHECK(c.segment_bytes == 1048576);
	CHECK(c.max_batch_transactions == 50);
	CHECK(c.max_batch_messages == 70);
	CHECK(c.min_free_bytes == 0);
	CHECK(c.n_protected_groups == 2);
	if (c.n_protected_groups == 2) {
		CHECK_STR(c.protected_groups[0], "applyd2");
		CHECK_STR(c.protected_groups[1], "audit");
	}
	CHECK_STR(c.target_database_url, "host=/run/postgresql dbname=app_copy");
	CHECK_STR(c.checkpoint_schema, "trellara_ckpt");
	CHECK(c.snapshot_workers == 8);
	CHECK_STR(c.consumer_group, "applyd2");
	CHECK(c.apply_batch_transactions == 20);
	CHECK_STR(c.metrics_dir, "/var/metrics");
	char *flow = config_flow_id(&c);
	CHECK_STR(flow, "main-db:orders");
	free(flow);
	CHECK(strstr(c.path, fx->dir) == c.path);
	config_free(&c);
	CHECK(c.path == NULL && c.tables == NULL);
	config_free(&c); /* freeing twice is harmless */
}

/* apply.batch_transactions' default follows apply.compaction; a value
 * the file sets wins either way. */
static void test_batch_default(struct fixture *fx)
{
	struct flow_config c;
	char *text = xasprintf("%sapply:\n  compaction: false\n", minimal_flow);
	CHECK(load_ok(fx, text, &c) == 0);
	CHECK(!c.apply_compaction);
	CHECK(c.apply_batch_transactions == DEFAULT_APPLY_BATCH_TRANSACTIONS_UNFOLDED);
	config_free(&c);
	free(text);
	text = xasprintf("%sapply:\n  compaction: false\n  batch_transactions: 7\n", minimal_flow);
	CHECK(load_ok(fx, text, &c) == 0);
	CHECK(c.apply_batch_transactions == 7);
	config_free(&c);
	free(text);
	text = xasprintf("%sapply:\n  compaction: true\n  batch_transactions: 5000\n", minimal_flow);
	CHECK(load_ok(fx, text, &c) == 0);
	CHECK(c.apply_compaction && c.apply_batch_transactions == 5000);
	config_free(&c);
	free(text);
	CHECK(DEFAULT_APPLY_BATCH_TRANSACTIONS_UNFOLDED < DEFAULT_APPLY_BATCH_TRANSACTIONS);
}

static void test_defaults(struct fixture *fx)
{
	struct flow_config c;
	CHECK(load_ok(fx, minimal_flow, &c) == 0);
	CHECK(c.environment == NULL);
	CHECK(c.wal_retention_warn_bytes == DEFAULT_WAL_RETENTION_WARN_BYTES);
	CHECK(c.stream_spill_threshold_changes == DEFAULT_SPILL_THRESHOLD_CHANGES);
	CHECK_STR(c.stream_spill_dir, DEFAULT_STREAM_SPILL_DIR);
	CHECK(c.pgoutput_protocol_version == DEFAULT_PROTOCOL_VERSION);
	CHECK(c.pgoutput_streaming);
	CHECK(c.mode == DATASET_STRICT_TRANSACTION_ORDER);
	CHECK(!c.strict_chunking);
	CHECK(c.max_changes_per_chunk == DEFAULT_MAX_CHANGES_PER_CHUNK);
	CHECK(c.n_tables == 1);
	CHECK(c.tables[0].verify_primary_key == NULL && c.tables[0].n_excluded_columns == 0);
	CHECK(c.durability == STREAM_DURABILITY_FSYNC);
	CHECK(c.segment_bytes == DEFAULT_SEGMENT_BYTES);
	CHECK(c.max_batch_transactions == DEFAULT_MAX_BATCH_TRANSACTIONS);
	CHECK(c.max_batch_messages == DEFAULT_MAX_BATCH_MESSAGES);
	CHECK(c.min_free_bytes == DEFAULT_MIN_FREE_BYTES);
	CHECK_STR(c.checkpoint_schema, DEFAULT_CHECKPOINT_SCHEMA);
	CHECK(c.snapshot_workers == DEFAULT_SNAPSHOT_WORKERS);
	CHECK(c.snapshot_split_bytes == DEFAULT_SNAPSHOT_SPLIT_BYTES);
	CHECK_STR(c.consumer_group, DEFAULT_CONSUMER_GROUP);
	CHECK(c.apply_batch_transactions == DEFAULT_APPLY_BATCH_TRANSACTIONS);
	CHECK(c.apply_compaction);
	CHECK_STR(c.metrics_dir, "/state-root/main-db/orders"); /* main sets TRELLARA_STATE_DIR */
	CHECK(c.metrics_dir_default);
	CHECK(c.n_protected_groups == 1);
	if (c.n_protected_groups == 1)
		CHECK_STR(c.protected_groups[0], DEFAULT_CONSUMER_GROUP);

	/* one value by its key path, from the schema's tables */
	static const char *const not_scalars[] = { "", "source", "source.", ".source", "dataset.tables",
						   "dataset.tables.name", "dataset.strict_chunking",
						   "stream.protected_groups", "source.slot.x", "source.slott",
						   "slot", "Source.slot", NULL };
	for (const char *const *k = not_scalars; *k; k++) {
		CHECK(config_key_kind(*k) == CONFIG_KEY_UNKNOWN);
		struct strbuf sb = STRBUF_INIT;
		CHECK(config_get_scalar(&c, *k, &sb) == -1 && sb.len == 0);
	}
	CHECK(config_key_kind("source.database_url") == CONFIG_KEY_SECRET);
	CHECK(config_key_kind("target.database_url") == CONFIG_KEY_SECRET);
	struct strbuf value = STRBUF_INIT;
	CHECK(config_get_scalar(&c, "target.database_url", &value) == -1 && value.len == 0);
	CHECK(config_get_scalar(&c, "environment", &value) == 0 && value.len == 0);
	CHECK(config_get_scalar(&c, "observability.metrics_dir", &value) == 1);
	CHECK_STR(value.buf, "/state-root/main-db/orders");
	strbuf_reset(&value);
	CHECK(config_get_scalar(&c, "source.pgoutput.streaming", &value) == 1);
	CHECK_STR(value.buf, "true");
	strbuf_reset(&value);
	CHECK(config_get_scalar(&c, "stream.segment_bytes", &value) == 1);
	char *expected = xasprintf("%llu", (unsigned long long)DEFAULT_SEGMENT_BYTES);
	CHECK_STR(value.buf, expected);
	free(expected);
	strbuf_reset(&value);
	CHECK(config_get_scalar(&c, "source.pgoutput.protocol_version", &value) == 1);
	CHECK(atoi(value.buf) == DEFAULT_PROTOCOL_VERSION);
	strbuf_reset(&value);
	CHECK(config_get_scalar(&c, "stream.kind", &value) == 1);
	CHECK_STR(value.buf, "local");
	strbuf_reset(&value);
	CHECK(config_get_scalar(&c, "apply.consumer_group", &value) == 1);
	CHECK_STR(value.buf, DEFAULT_CONSUMER_GROUP);
	strbuf_release(&value);
	config_free(&c);

	/* protected_groups follows a configured consumer group. */
	char *text = xasprintf("%sapply: {consumer_group: replica}\n", minimal_flow);
	CHECK(load_ok(fx, text, &c) == 0);
	CHECK(c.n_protected_groups == 1);
	if (c.n_protected_groups == 1)
		CHECK_STR(c.protected_groups[0], "replica");
	config_free(&c);
	free(text);

	/* Empty sections and "key:" alone mean the defaults; an empty
	 * strict_chunking still turns chunking on. */
	text = xasprintf("%ssnapshot:\napply: ~\nobservability:\n  metrics_dir:\n", minimal_flow);
	char *chunked = variant(text, "  tables:\n", "  strict_chunking:\n  tables:\n");
	CHECK(load_ok(fx, chunked, &c) == 0);
	CHECK(c.snapshot_workers == DEFAULT_SNAPSHOT_WORKERS);
	CHECK_STR(c.metrics_dir, "/state-root/main-db/orders");
	CHECK(c.strict_chunking);
	CHECK(c.max_changes_per_chunk == DEFAULT_MAX_CHANGES_PER_CHUNK);
	config_free(&c);
	free(chunked);
	free(text);

	/* yes/no are booleans too; a primary key string may list columns. */
	text = variant(full_flow, "streaming: false", "streaming: no");
	char *pk = variant(text, "primary_key: id", "primary_key: \"tenant_id , id\"");
	CHECK(load_ok(fx, pk, &c) == 0);
	CHECK(!c.pgoutput_streaming);
	CHECK_STR(c.tables[0].verify_primary_key, "tenant_id,id");
	config_free(&c);
	free(pk);
	free(text);
}

static void test_example_file(struct fixture *fx)
{
	/* Unit tests run from the top of the tree (make unit does). */
	struct flow_config c;
	char *log = NULL;
	int rc = load_captured(fx, "configs/trellara.yml", &c, &log);
	if (rc != 0)
		fprintf(stderr, "configs/trellara.yml does not load:\n%s\n", log);
	CHECK(rc == 0);
	CHECK(!strstr(log, "warn")); /* and loads without a warning */
	if (rc == 0) {
		CHECK_STR(c.source_id, "main-db");
		CHECK(c.n_tables >= 1);
		CHECK(c.strict_chunking);
		CHECK(c.snapshot_split_bytes == DEFAULT_SNAPSHOT_SPLIT_BYTES);
		config_free(&c);
	}
	free(log);
}

static void test_secrets(struct fixture *fx)
{
	static const char url[] = "postgresql://app:Hunter2-Secret@db1/app";
	struct flow_config c;

	setenv("TRELLARA_TEST_SOURCE_URL", url, 1);
	char *text = variant(minimal_flow, "database_url: postgresql://replicator@db1/app",
			     "database_url: {source: environment_variable, name: TRELLARA_TEST_SOURCE_URL}");
	CHECK(load_ok(fx, text, &c) == 0);
	CHECK_STR(c.source_database_url, url);
	config_free(&c);
	free(text);

	char *secret_path = xasprintf("%s/target-url", fx->dir);
	FILE *f = fopen(secret_path, "w");
	fprintf(f, "%s\n", url);
	fclose(f);
	char *ref = xasprintf("database_url:\n    source: file\n    path: %s\n", secret_path);
	text = variant(minimal_flow, "database_url: postgresql:///copy\n", ref);
	CHECK(load_ok(fx, text, &c) == 0);
	CHECK_STR(c.target_database_url, url); /* trailing newline stripped */
	config_free(&c);
	free(text);
	free(ref);

	/* source.standby_database_urls: connection strings and secret
	 * references, in order; a bad item is named by its index */
	text = variant(minimal_flow, "database_url: postgresql://replicator@db1/app",
		       "database_url: postgresql://replicator@db1/app\n  standby_database_urls:\n"
		       "    - postgresql://replicator@db2/app\n"
		       "    - {source: environment_variable, name: TRELLARA_TEST_SOURCE_URL}\n"
		       "  expected_downtime_seconds: 7200");
	CHECK(load_ok(fx, text, &c) == 0);
	CHECK(c.n_standby_database_urls == 2);
	if (c.n_standby_database_urls == 2) {
		CHECK_STR(c.standby_database_urls[0], "postgresql://replicator@db2/app");
		CHECK_STR(c.standby_database_urls[1], url);
	}
	CHECK(c.expected_downtime_seconds == 7200);
	config_free(&c);
	free(text);
	CHECK(load_ok(fx, minimal_flow, &c) == 0);
	CHECK(c.n_standby_database_urls == 0 && c.expected_downtime_seconds == 3600);
	config_free(&c);
	text = variant(minimal_flow, "database_url: postgresql://replicator@db1/app",
		       "database_url: postgresql://replicator@db1/app\n  standby_database_urls:\n"
		       "    - postgresql://replicator@db2/app\n    - {source: environment_variable, name: TRELLARA_TEST_MISSING}");
	unsetenv("TRELLARA_TEST_MISSING");
	EXPECT_ERROR(fx, "standby env missing", text, "source.standby_database_urls[1]", "\"TRELLARA_TEST_MISSING\"");
	free(text);
	text = variant(minimal_flow, "database_url: postgresql://replicator@db1/app",
		       "database_url: postgresql://replicator@db1/app\n  standby_database_urls: postgresql://u:Hunter2-Secret@db2/app");
	EXPECT_ERROR(fx, "standby not a list", text, "source.standby_database_urls", "a list of connection strings");
	free(text);

	/* Errors name the variable or the file, never the secret. */
	unsetenv("TRELLARA_TEST_MISSING");
	text = variant(minimal_flow, "database_url: postgresql://replicator@db1/app",
		       "database_url: {source: environment_variable, name: TRELLARA_TEST_MISSING}");
	EXPECT_ERROR(fx, "env missing", text, "line 4, column 17", "\"TRELLARA_TEST_MISSING\"",
		     "source.database_url", "not set");
	free(text);
	setenv("TRELLARA_TEST_EMPTY", "", 1);
	text = variant(minimal_flow, "database_url: postgresql://replicator@db1/app",
		       "database_url: {source: environment_variable, name: TRELLARA_TEST_EMPTY}");
	EXPECT_ERROR(fx, "env empty", text, "line 4", "\"TRELLARA_TEST_EMPTY\"", "empty");
	free(text);

	text = variant(minimal_flow, "database_url: postgresql:///copy",
		       "database_url: {source: file, path: /nonexistent/trellara-secret}");
	EXPECT_ERROR(fx, "secret file missing", text, "line 16", "\"/nonexistent/trellara-secret\"",
		     "target.database_url", "No such file or directory");
	free(text);
	f = fopen(secret_path, "w");
	fputs("\n", f);
	fclose(f);
	ref = xasprintf("database_url: {source: file, path: %s}", secret_path);
	text = variant(minimal_flow, "database_url: postgresql:///copy", ref);
	EXPECT_ERROR(fx, "secret file empty", text, "line 16", secret_path, "empty");
	free(text);
	free(ref);

	text = variant(minimal_flow, "database_url: postgresql:///copy",
		       "database_url: {source: vault, name: x}");
	EXPECT_ERROR(fx, "secret source", text, "line 16", "target.database_url.source",
		     "\"environment_variable\" or \"file\"");
	free(text);
	text = variant(minimal_flow, "database_url: postgresql:///copy",
		       "database_url: {source: file, name: x}");
	EXPECT_ERROR(fx, "secret name with file", text, "line 16", "target.database_url.name");
	free(text);
	text = variant(minimal_flow, "database_url: postgresql:///copy",
		       "database_url: {source: environment_variable}");
	EXPECT_ERROR(fx, "secret without name", text, "line 16",
		     "missing required key \"target.database_url.name\"");
	free(text);

	/* A password must not reach the log by any path: a connection string
	 * mistyped into a mapping key, a list, or a secret's "source". */
	static const char *const leaks[] = {
		"database_url: {postgresql://app:Hunter2-Secret@db1/app}",
		"database_url: {host=db1 password=Hunter2-Secret}",
		"database_url: [postgresql://app:Hunter2-Secret@db1/app]",
		"database_url: {source: postgresql://app:Hunter2-Secret@db1/app}",
		"database_url: {source: environment_variable, name: TRELLARA_TEST_SOURCE_URL, x: 1}",
		"database_url: {source: file, path: /nonexistent/Hunter2-Secret-not}",
	};
	for (size_t i = 0; i < sizeof leaks / sizeof *leaks; i++) {
		text = variant(minimal_flow, "database_url: postgresql://replicator@db1/app", leaks[i]);
		char *path = write_file(fx, text);
		char *log = NULL;
		CHECK(load_captured(fx, path, &c, &log) == -1);
		check_contains(log, "source.database_url", leaks[i]);
		unit_checks++;
		bool leaked = strstr(log, "Hunter2-Secret") &&
			      !strstr(leaks[i], "Hunter2-Secret-not"); /* a path is not a secret */
		if (leaked) {
			unit_failures++;
			fprintf(stderr, "password in the log for %s:\n%s\n", leaks[i], log);
		}
		free(log);
		free(path);
		free(text);
	}
	unsetenv("TRELLARA_TEST_SOURCE_URL");
	unsetenv("TRELLARA_TEST_EMPTY");
	free(secret_path);
}

/* dataset.sequences: schema-qualified names, each once */
static void test_sequences(struct fixture *fx)
{
	static const char notes[] = "    - {schema: public, name: notes}";
	struct flow_config c;
	char *text = variant(full_flow, notes, "    - {schema: public, name: notes}\n  sequences: [public.invoice_no, Sales.\"Odd Seq\"]");
	if (load_ok(fx, text, &c) == 0) {
		CHECK(c.n_sequences == 2);
		if (c.n_sequences == 2) {
			CHECK_STR(c.sequences[0], "public.invoice_no");
			CHECK_STR(c.sequences[1], "Sales.\"Odd Seq\"");
		}
		config_free(&c);
	}
	free(text);
	CHECK(load_ok(fx, full_flow, &c) == 0 && c.n_sequences == 0 && c.sequences == NULL);
	config_free(&c);
	EXPECT_VARIANT_ERROR(fx, notes, "    - {schema: public, name: notes}\n  sequences: [public.a, public.b, public.a]",
			     "line 30, column 35", "\"public.a\" is listed twice, in dataset.sequences[0] and \"dataset.sequences[2]\"");
	EXPECT_VARIANT_ERROR(fx, notes, "    - {schema: public, name: notes}\n  sequences: [invoice_no]", "line 30",
			     "key \"dataset.sequences[0]\" must be a schema-qualified name \"schema.name\", got \"invoice_no\"",
			     "hint: write a sequence as public.orders_id_seq");
	EXPECT_VARIANT_ERROR(fx, notes, "    - {schema: public, name: notes}\n  sequences: [a.b.c]", "line 30",
			     "must be a schema-qualified name");
	EXPECT_VARIANT_ERROR(fx, notes, "    - {schema: public, name: notes}\n  sequences: [public.]", "line 30",
			     "must be a schema-qualified name");
	EXPECT_VARIANT_ERROR(fx, notes, "    - {schema: public, name: notes}\n  sequences: public.a", "line 30",
			     "\"dataset.sequences\" must be a list of strings");
	EXPECT_VARIANT_ERROR(fx, notes,
			     "    - {schema: public, name: notes}\n  sequences: [public.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa]",
			     "line 30", "longer than 63 bytes");
}

static void test_errors(struct fixture *fx)
{
	/* Unknown keys, with a did-you-mean. */
	EXPECT_VARIANT_ERROR(fx, "  slot: trellara", "  slott: trellara", "line 7, column 3",
			     "unknown key \"source.slott\"", "hint: did you mean \"source.slot\"?");
	EXPECT_VARIANT_ERROR(fx, "      name: order_lines", "      nmae: order_lines", "line 26",
			     "unknown key \"dataset.tables[1].nmae\"", "\"dataset.tables[1].name\"");
	EXPECT_VARIANT_ERROR(fx, "environment: staging", "slot: x", "line 2",
			     "unknown key \"slot\"", "did you mean \"source.slot\"?");
	EXPECT_VARIANT_ERROR(fx, "  workers: 8", "  workers: 8\n  threads: 3", "line 44",
			     "unknown key \"snapshot.threads\"", "hint: the keys of \"snapshot\" are: workers");

	/* Wrong types. */
	EXPECT_VARIANT_ERROR(fx, "segment_bytes: 1048576", "segment_bytes: abc", "line 34, column 18",
			     "key \"stream.segment_bytes\" must be an integer, got \"abc\"");
	EXPECT_VARIANT_ERROR(fx, "segment_bytes: 1048576", "segment_bytes: -1048576", "line 34",
			     "\"stream.segment_bytes\" must not be negative");
	EXPECT_VARIANT_ERROR(fx, "segment_bytes: 1048576", "segment_bytes: 1.5e6", "line 34",
			     "must be an integer");
	EXPECT_VARIANT_ERROR(fx, "workers: 8", "workers: \"8\"", "line 43",
			     "\"snapshot.workers\" must be an integer", "quoted");
	EXPECT_VARIANT_ERROR(fx, "workers: 8", "workers: 99999999999999999999999", "line 43",
			     "\"snapshot.workers\" is too large");
	EXPECT_VARIANT_ERROR(fx, "publication: trellara_orders", "publication: {name: x}",
			     "line 6, column 16", "\"source.publication\" must be a string, got a mapping");
	EXPECT_VARIANT_ERROR(fx, "slot: trellara_orders_slot", "slot: [a, b]", "line 7",
			     "\"source.slot\" must be a string, got a list");
	EXPECT_VARIANT_ERROR(fx, "streaming: false", "streaming: 0", "line 13",
			     "\"source.pgoutput.streaming\" must be true or false, got \"0\"");
	EXPECT_VARIANT_ERROR(fx, "streaming: false", "streaming: \"false\"", "line 13",
			     "\"source.pgoutput.streaming\" must be true or false");
	EXPECT_ERROR(fx, "scalar section", "config_version: 2\nsource: main-db\n", "line 2, column 9",
		     "\"source\" must be a mapping, got \"main-db\"");
	EXPECT_VARIANT_ERROR(fx, "    - {schema: public, name: notes}", "    - public.notes", "line 29",
			     "\"dataset.tables[2]\" must be a mapping", "hint:");
	EXPECT_VARIANT_ERROR(fx, "excluded_columns: [updated_at, touched_at]",
			     "excluded_columns: updated_at", "line 24",
			     "\"dataset.tables[0].verify.excluded_columns\" must be a list");
	EXPECT_VARIANT_ERROR(fx, "excluded_columns: [updated_at, touched_at]",
			     "excluded_columns: [updated_at, {a: b}]", "line 24",
			     "\"dataset.tables[0].verify.excluded_columns[1]\" must be a string");
	EXPECT_VARIANT_ERROR(fx, "primary_key: [order_id, line_no]", "primary_key: [order_id, [x]]",
			     "line 28", "\"dataset.tables[1].verify.primary_key[1]\"");

	/* Missing required keys: the line of the enclosing mapping. */
	EXPECT_VARIANT_ERROR(fx, "  slot: trellara_orders_slot\n", "", "line 4:",
			     "missing required key \"source.slot\"");
	EXPECT_VARIANT_ERROR(fx, "      name: order_lines\n", "", "line 25:",
			     "missing required key \"dataset.tables[1].name\"");
	EXPECT_VARIANT_ERROR(fx, "config_version: 2\n", "", "line 1:",
			     "missing required key \"config_version\"", "hint:");
	EXPECT_VARIANT_ERROR(fx, "  kind: local\n", "", "line 31:", "missing required key \"stream.kind\"");
	char *no_target = variant(minimal_flow, "target:\n  database_url: postgresql:///copy\n", "");
	EXPECT_ERROR(fx, "no target", no_target, "line 1:", "missing required key \"target\"");
	free(no_target);
	EXPECT_VARIANT_ERROR(fx, "  slot: trellara_orders_slot", "  slot:", "line 7, column 3",
			     "\"source.slot\" has no value");
	EXPECT_VARIANT_ERROR(fx, "source:\n  id: main-db", "source:\n  id: main-db\n  id: other", "line 5",
			     "duplicate key \"source.id\" (first at line 4)");

	/* Invalid values. */
	EXPECT_VARIANT_ERROR(fx, "protocol_version: 1", "protocol_version: 3", "line 12",
			     "\"source.pgoutput.protocol_version\" must be 1 or 2, got \"3\"");
	EXPECT_VARIANT_ERROR(fx, "streaming: false", "streaming: true", "line 12",
			     "\"source.pgoutput.streaming\" needs protocol_version 2", "hint:");
	EXPECT_VARIANT_ERROR(fx, "segment_bytes: 1048576", "segment_bytes: 4096", "line 34",
			     "\"stream.segment_bytes\" must be at least 65536, got \"4096\"");
	EXPECT_VARIANT_ERROR(fx, "workers: 8", "workers: 0", "line 43",
			     "\"snapshot.workers\" must be at least 1");
	EXPECT_VARIANT_ERROR(fx, "workers: 8", "workers: 8\n  split_bytes: 1GB", "line 44",
			     "snapshot.split_bytes");
	EXPECT_VARIANT_ERROR(fx, "workers: 8", "workers: 8\n  split_bytes: -1", "line 44",
			     "snapshot.split_bytes");
	{
		/* 0 is allowed: never split */
		struct flow_config c;
		char *text = variant(full_flow, "workers: 8", "workers: 8\n  split_bytes: 0");
		CHECK(load_ok(fx, text, &c) == 0);
		CHECK(c.snapshot_split_bytes == 0);
		config_free(&c);
		free(text);
		text = variant(full_flow, "workers: 8", "workers: 8\n  split_bytes: 67108864");
		CHECK(load_ok(fx, text, &c) == 0);
		CHECK(c.snapshot_split_bytes == 67108864);
		config_free(&c);
		free(text);
	}
	EXPECT_VARIANT_ERROR(fx, "max_changes_per_chunk: 500", "max_changes_per_chunk: 0", "line 18",
			     "\"dataset.strict_chunking.max_changes_per_chunk\" must be at least 1");
	EXPECT_VARIANT_ERROR(fx, "  id: orders", "  id: \"\"", "line 15",
			     "\"dataset.id\" must not be empty");
	EXPECT_VARIANT_ERROR(fx, "  id: main-db", "  id: main:db", "line 4",
			     "\"source.id\" must not contain \":\"");
	EXPECT_VARIANT_ERROR(fx, "slot: trellara_orders_slot", "slot: Orders-Slot", "line 7",
			     "\"source.slot\" must be at most 63 lower-case letters");
	EXPECT_VARIANT_ERROR(fx, "consumer_group: applyd2", "consumer_group: ../x", "line 45",
			     "\"apply.consumer_group\"");
	EXPECT_VARIANT_ERROR(fx, "name: accounts",
			     "name: a_table_name_that_is_much_longer_than_postgresql_allows_for_names",
			     "line 21", "\"dataset.tables[0].name\" is longer than 63 bytes");
	EXPECT_VARIANT_ERROR(fx, "mode: strict_transaction_order", "mode: partitioned_scale_mode",
			     "line 16", "\"dataset.mode\"", "not supported yet", "hint:");
	EXPECT_VARIANT_ERROR(fx, "mode: strict_transaction_order", "mode: fast", "line 16",
			     "\"dataset.mode\" must be \"strict_transaction_order\", got \"fast\"");
	EXPECT_VARIANT_ERROR(fx, "kind: local", "kind: kafka", "line 31",
			     "\"stream.kind\" must be \"local\" or \"jetstream\", got \"kafka\"");
	EXPECT_VARIANT_ERROR(fx, "durability: fsync", "durability: none", "line 33",
			     "\"stream.durability\" must be \"fsync\"");
	EXPECT_VARIANT_ERROR(fx, "protected_groups: [applyd2, audit]", "protected_groups: []", "line 38",
			     "\"stream.protected_groups\" must list at least 1 item");
	char *no_tables = variant(minimal_flow, "  tables:\n    - schema: public\n      name: accounts\n",
				  "  tables: []\n");
	EXPECT_ERROR(fx, "no tables", no_tables, "line 9", "\"dataset.tables\" must list at least one table");
	free(no_tables);
	EXPECT_VARIANT_ERROR(fx, "    - {schema: public, name: notes}", "    - {schema: public, name: accounts}",
			     "line 29", "\"public.accounts\" is listed twice");
	EXPECT_VARIANT_ERROR(fx, "primary_key: id", "primary_key: [id, updated_at]", "line 20",
			     "column \"updated_at\" of \"dataset.tables[0]\"");
	EXPECT_VARIANT_ERROR(fx, "primary_key: id", "primary_key: \"id,,x\"", "line 23",
			     "\"dataset.tables[0].verify.primary_key\" has an empty column name");
	EXPECT_VARIANT_ERROR(fx, "database_url: \"host=/run/postgresql dbname=app_copy\"",
			     "database_url: \"\"", "line 40", "\"target.database_url\" must not be empty");

	/* Versions. */
	EXPECT_VARIANT_ERROR(fx, "config_version: 2", "config_version: 3", "line 1, column 17",
			     "unsupported config_version 3 (this Trellara reads version 2)");
	/* ...before the keys a newer version may have added. */
	EXPECT_VARIANT_ERROR(fx, "config_version: 2", "config_version: 1\nsources: []", "line 1",
			     "unsupported config_version 1");
	EXPECT_VARIANT_ERROR(fx, "config_version: 2", "config_version: two", "line 1",
			     "\"config_version\" must be an integer");

	/* Not YAML, or not a flow file. */
	EXPECT_ERROR(fx, "ini", "[source]\nid = main-db\n", "line 2", "not valid YAML", "hint:");
	EXPECT_ERROR(fx, "unclosed", "config_version: 2\nsource: {id: x\n", "line 3", "not valid YAML");
	EXPECT_ERROR(fx, "tab", "config_version: 2\nsource:\n\tid: x\n", "line 3, column 1",
		     "not valid YAML", "hint: indent with spaces");
	EXPECT_ERROR(fx, "bad alias", "config_version: *nowhere\n", "line 1", "not valid YAML");
	EXPECT_ERROR(fx, "binary", "config_version: 2\n\x01\x02\x03\n", "line 2", "not valid YAML");
	EXPECT_ERROR(fx, "bad utf-8", "config_version: 2\nenvironment: \xc3\x28\n", "line 2",
		     "not valid YAML");
	EXPECT_ERROR(fx, "scalar", "just some text\n", "line 1, column 1",
		     "the top level must be a mapping", "\"just some text\"");
	EXPECT_ERROR(fx, "empty", "", "line 1", "empty");
	EXPECT_ERROR(fx, "comments only", "# nothing here\n", "line 1", "empty");
	char *two = xasprintf("%s---\nconfig_version: 2\n", full_flow);
	EXPECT_ERROR(fx, "two documents", two, "line 49", "more than one YAML document");
	free(two);

	/* Unreadable files. */
	struct flow_config c;
	char *log = NULL;
	char *missing = xasprintf("%s/does-not-exist.yml", fx->dir);
	CHECK(load_captured(fx, missing, &c, &log) == -1);
	check_contains(log, missing, "missing file");
	check_contains(log, "No such file or directory", "missing file");
	free(log);
	free(missing);
	CHECK(load_captured(fx, fx->dir, &c, &log) == -1);
	check_contains(log, "Is a directory", "directory");
	free(log);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* stream.kind jetstream: its keys, its defaults, and keys of the other kind refused */
static void test_jetstream(struct fixture *fx)
{
	static const char local[] = "  kind: local\n  path: ./target/stream\n";
	struct flow_config c;
	setenv("TRELLARA_TEST_NATS", "app:Hunter2-Secret", 1);
	char *text = variant(minimal_flow, local,
			     "  kind: jetstream\n  servers: [nats://127.0.0.1:4222, \"tls://nats-2.example:4223\"]\n"
			     "  name: TRELLARA_ORDERS\n  subject: trellara.orders\n"
			     "  credentials: {source: environment_variable, name: TRELLARA_TEST_NATS}\n");
	CHECK(load_ok(fx, text, &c) == 0);
	CHECK(c.stream_kind == STREAM_KIND_JETSTREAM);
	CHECK(c.stream_path == NULL);
	CHECK(c.n_jetstream_servers == 2);
	if (c.n_jetstream_servers == 2)
		CHECK_STR(c.jetstream_servers[1], "tls://nats-2.example:4223");
	CHECK_STR(c.jetstream_stream, "TRELLARA_ORDERS");
	CHECK_STR(c.jetstream_subject, "trellara.orders");
	CHECK_STR(c.jetstream_credentials, "app:Hunter2-Secret");
	CHECK(c.jetstream_replicas == 3 && c.jetstream_duplicate_window_seconds == 120);
	config_free(&c);
	free(text);
	CHECK(load_ok(fx, minimal_flow, &c) == 0);
	CHECK(c.stream_kind == STREAM_KIND_LOCAL && c.n_jetstream_servers == 0 && c.jetstream_replicas == 3);
	config_free(&c);

	static const struct {
		const char *what, *stream, *where, *message;
	} bad[] = {
		{ "local with a jetstream key", "  kind: local\n  path: ./s\n  subject: a.b\n", "line 15",
		  "key \"stream.subject\" does not go with stream.kind \"local\"" },
		{ "jetstream with a local key", "  kind: jetstream\n  servers: [nats://h:1]\n  name: S\n  subject: a\n  path: ./s\n",
		  "line 17", "key \"stream.path\" does not go with stream.kind \"jetstream\"" },
		{ "local without path", "  kind: local\n", "line 13", "missing required key \"stream.path\" (stream.kind \"local\")" },
		{ "jetstream without subject", "  kind: jetstream\n  servers: [nats://h:1]\n  name: S\n", "line 13",
		  "missing required key \"stream.subject\" (stream.kind \"jetstream\")" },
		{ "server URL with a password", "  kind: jetstream\n  servers: [\"nats://u:Hunter2-Secret@h:1\"]\n  name: S\n  subject: a\n",
		  "line 14", "without a user or password (not shown)" },
		{ "server URL without a port", "  kind: jetstream\n  servers: [nats://h]\n  name: S\n  subject: a\n", "line 14",
		  "must be nats://HOST:PORT or tls://HOST:PORT, got \"nats://h\"" },
		{ "stream name with a dot", "  kind: jetstream\n  servers: [nats://h:1]\n  name: a.b\n  subject: a\n", "line 15",
		  "\"stream.name\" must be a JetStream stream name" },
		{ "wildcard subject", "  kind: jetstream\n  servers: [nats://h:1]\n  name: S\n  subject: a.>\n", "line 16",
		  "\"stream.subject\" must be a subject to publish to" },
		{ "replicas above 5", "  kind: jetstream\n  servers: [nats://h:1]\n  name: S\n  subject: a\n  replicas: 7\n",
		  "line 17", "\"stream.replicas\" must be between 1 and 5" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		text = variant(minimal_flow, local, bad[i].stream);
		const char *const needles[] = { bad[i].where, bad[i].message, NULL };
		char *log = expect_error_log(fx, bad[i].what, text, needles);
		CHECK(!strstr(log, "Hunter2")); /* a password in a server URL is never shown */
		free(log);
		free(text);
	}
}

/* The default place of the supervisor's state and the metrics files. */
static void test_state_dir(struct fixture *fx)
{
	char *d = config_default_state_dir("/srv/st", true, "/x", "/home/u", "src", "ds");
	CHECK_STR(d, "/srv/st/src/ds"); /* TRELLARA_STATE_DIR first */
	free(d);
	d = config_default_state_dir("", true, "/x", "/home/u", "src", "ds");
	CHECK_STR(d, "/var/lib/trellara/src/ds");
	free(d);
	d = config_default_state_dir(NULL, false, "/x", "/home/u", "src", "ds");
	CHECK_STR(d, "/x/trellara/src/ds");
	free(d);
	d = config_default_state_dir(NULL, false, "relative", "/home/u", "src", "ds"); /* XDG: absolute only */
	CHECK_STR(d, "/home/u/.local/state/trellara/src/ds");
	free(d);
	CHECK(config_default_state_dir(NULL, false, NULL, NULL, "src", "ds") == NULL);
	CHECK(config_default_state_dir(NULL, false, "", "relative", "src", "ds") == NULL);

	/* the loader fills it in from the environment, marked as the default */
	struct flow_config c;
	setenv("TRELLARA_STATE_DIR", "/srv/state", 1);
	CHECK(load_ok(fx, minimal_flow, &c) == 0);
	d = xasprintf("/srv/state/%s/%s", c.source_id, c.dataset_id);
	CHECK_STR(c.metrics_dir, d);
	CHECK(c.metrics_dir_default);
	free(d);
	config_free(&c);
	/* set in the file: the file's, not marked as the default */
	char *text = xasprintf("%sobservability: {metrics_dir: /m}\n", minimal_flow);
	CHECK(load_ok(fx, text, &c) == 0);
	CHECK_STR(c.metrics_dir, "/m");
	CHECK(!c.metrics_dir_default);
	config_free(&c);
	free(text);
	setenv("TRELLARA_STATE_DIR", "/state-root", 1);
}

int main(void)
{
	struct fixture fx = { .dir = "/tmp/trellara-test-config-XXXXXX" };
	log_setup("test_config", 0);
	setenv("TRELLARA_STATE_DIR", "/state-root", 1); /* the default metrics_dir's root, whoever runs this */
	if (!mkdtemp(fx.dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_full(&fx);
	test_defaults(&fx);
	test_batch_default(&fx);
	test_example_file(&fx);
	test_secrets(&fx);
	test_errors(&fx);
	test_sequences(&fx);
	test_jetstream(&fx);
	test_state_dir(&fx);
	nftw(fx.dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
	return unit_done("config");
}
