/*
 * config.c - load and validate a flow file (DESIGN §3, man 5 trellara.yml).
 *
 * libyaml loads the file into a node tree; a table of fields per mapping
 * (the schema, config_schema.c) drives one walk over it (config_walk.c)
 * that checks keys, types and values and fills struct flow_config;
 * secret references are resolved on the way (config_secret.c).  The walk
 * stops at the first error, which is logged once with the file, line,
 * column and dotted key path.  config_internal.h is what those modules
 * share.
 */
#include "trellara/config.h"

#include "config_internal.h"

#include "trellara/defaults.h"
#include "trellara/log.h"
#include "trellara/strbuf.h"
#include "trellara/xalloc.h"

#include <inttypes.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

#define FLOW_FILE_MAX_BYTES (1024 * 1024) /* a flow file is a page of YAML */

/* ---- load ---- */

static void report_syntax(const struct loader *ld, const yaml_parser_t *parser, const char *data)
{
	yaml_mark_t mark = parser->problem_mark;
	if (parser->error == YAML_READER_ERROR) {
		/* Encoding errors carry a byte offset, not a mark. */
		memset(&mark, 0, sizeof mark);
		for (size_t i = 0; i < parser->problem_offset && data[i]; i++) {
			if (data[i] == '\n') {
				mark.line++;
				mark.column = 0;
			} else {
				mark.column++;
			}
		}
		mark.index = parser->problem_offset;
	}
	const char *problem = parser->problem ? parser->problem : "cannot parse";
	if (parser->context)
		config_report(ld, &mark, true, "not valid YAML: %s (%s at line %zu, column %zu)", problem,
			      parser->context, parser->context_mark.line + 1, parser->context_mark.column + 1);
	else
		config_report(ld, &mark, true, "not valid YAML: %s", problem);
	if (parser->error != YAML_READER_ERROR && mark.index < strlen(data) && data[mark.index] == '\t')
		log_hint("indent with spaces; YAML does not allow tabs there");
	else
		log_hint("a flow file is YAML (\"key: value\" lines), see man 5 trellara.yml");
}

static void set_defaults(struct flow_config *config)
{
	config->wal_retention_warn_bytes = DEFAULT_WAL_RETENTION_WARN_BYTES;
	config->expected_downtime_seconds = DEFAULT_EXPECTED_DOWNTIME_S;
	config->stream_spill_threshold_changes = DEFAULT_SPILL_THRESHOLD_CHANGES;
	config->pgoutput_protocol_version = DEFAULT_PROTOCOL_VERSION;
	config->pgoutput_streaming = true;
	config->mode = DATASET_STRICT_TRANSACTION_ORDER;
	config->max_changes_per_chunk = DEFAULT_MAX_CHANGES_PER_CHUNK;
	config->durability = STREAM_DURABILITY_FSYNC;
	config->jetstream_replicas = DEFAULT_JETSTREAM_REPLICAS;
	config->jetstream_duplicate_window_seconds = DEFAULT_JETSTREAM_DUPLICATE_WINDOW_S;
	config->segment_bytes = DEFAULT_SEGMENT_BYTES;
	config->max_batch_transactions = DEFAULT_MAX_BATCH_TRANSACTIONS;
	config->max_batch_messages = DEFAULT_MAX_BATCH_MESSAGES;
	config->min_free_bytes = DEFAULT_MIN_FREE_BYTES;
	config->snapshot_workers = DEFAULT_SNAPSHOT_WORKERS;
	config->snapshot_split_bytes = DEFAULT_SNAPSHOT_SPLIT_BYTES;
	config->apply_batch_transactions = 0; /* unset: set_late_defaults */
	config->apply_compaction = true;
	config->apply_workers = DEFAULT_APPLY_WORKERS;
	config->apply_copy_inserts = DEFAULT_APPLY_COPY_INSERTS;
}

char *config_default_state_dir(const char *state_env, bool root, const char *xdg_state_home, const char *home,
			       const char *source_id, const char *dataset_id)
{
	if (state_env && *state_env)
		return xasprintf("%s/%s/%s", state_env, source_id, dataset_id);
	if (root)
		return xasprintf("/var/lib/trellara/%s/%s", source_id, dataset_id);
	if (xdg_state_home && *xdg_state_home == '/')
		return xasprintf("%s/trellara/%s/%s", xdg_state_home, source_id, dataset_id);
	if (home && *home == '/')
		return xasprintf("%s/.local/state/trellara/%s/%s", home, source_id, dataset_id);
	return NULL;
}

/* The environment's part of the default state directory (the I/O edge). */
static char *default_state_dir(const struct flow_config *config)
{
	const char *home = getenv("HOME");
	if (!home || !*home) {
		const struct passwd *pw = getpwuid(geteuid());
		home = pw ? pw->pw_dir : NULL;
	}
	return config_default_state_dir(getenv("TRELLARA_STATE_DIR"), geteuid() == 0, getenv("XDG_STATE_HOME"), home,
					config->source_id, config->dataset_id);
}

/* Defaults that depend on other keys or are strings. */
static void set_late_defaults(struct flow_config *config)
{
	if (!config->metrics_dir) {
		config->metrics_dir = default_state_dir(config);
		config->metrics_dir_default = config->metrics_dir != NULL;
	}
	if (!config->stream_spill_dir)
		config->stream_spill_dir = xstrdup(DEFAULT_STREAM_SPILL_DIR);
	if (!config->checkpoint_schema)
		config->checkpoint_schema = xstrdup(DEFAULT_CHECKPOINT_SCHEMA);
	if (!config->contract)
		config->contract = xstrdup("off");
	config->contract_pinned = strcmp(config->contract, "pinned") == 0;
	if (!config->contract_pin)
		config->contract_pin = xstrdup(DEFAULT_CONTRACT_PIN);
	if (!config->stream_compression)
		config->stream_compression = xstrdup(DEFAULT_STREAM_COMPRESSION);
	config->stream_compression_zlib = config->stream_compression && strcmp(config->stream_compression, "zlib") == 0;
	if (!config->apply_batch_transactions) /* the schema refuses an explicit 0 */
		config->apply_batch_transactions = config->apply_compaction ? DEFAULT_APPLY_BATCH_TRANSACTIONS
									    : DEFAULT_APPLY_BATCH_TRANSACTIONS_UNFOLDED;
	if (!config->consumer_group)
		config->consumer_group = xstrdup(DEFAULT_CONSUMER_GROUP);
	if (!config->protected_groups) {
		config->protected_groups = xcalloc(1, sizeof *config->protected_groups);
		config->protected_groups[0] = xstrdup(config->consumer_group);
		config->n_protected_groups = 1;
	}
}

static void warn_unprotected_group(const struct flow_config *config)
{
	for (size_t i = 0; i < config->n_protected_groups; i++)
		if (strcmp(config->protected_groups[i], config->consumer_group) == 0)
			return;
	log_warn("flow file \"%s\": stream.protected_groups does not include apply.consumer_group \"%s\": retention may delete segments it has not applied",
		 config->path, config->consumer_group);
}

config_url_check_fn *config_url_check;

/* Every connection string of the flow parses (config_url_check, when a
 * program that connects installed it): one that does not is refused here,
 * naming the key, never quoting it or libpq's message about it (both can
 * hold the password). */
static int check_url_of(const struct flow_config *config, const char *key, const char *url)
{
	char why[256];
	if (!url || config_url_check(url, why, sizeof why) == 0)
		return 0;
	log_error("flow file \"%s\": %s: %s", config->path, key, why);
	log_hint("in a URI, percent-encode the reserved characters of the password (%% as %%25, @ as %%40, / as %%2F, a space as %%20) and close an IPv6 address's bracket ([::1]); in key=value form, single-quote a value that holds spaces or quotes (password='a b', a quote as \\')");
	return -1;
}

static int check_urls(const struct flow_config *config)
{
	if (!config_url_check)
		return 0;
	int rc = check_url_of(config, "source.database_url", config->source_database_url);
	rc |= check_url_of(config, "target.database_url", config->target_database_url);
	for (size_t i = 0; i < config->n_standby_database_urls; i++) {
		char key[64];
		snprintf(key, sizeof key, "source.standby_database_urls[%zu]", i);
		rc |= check_url_of(config, key, config->standby_database_urls[i]);
	}
	return rc ? -1 : 0;
}

int config_load(const char *path, struct flow_config *config)
{
	struct loader ld = { .path = path };
	yaml_parser_t parser;
	yaml_document_t doc, extra;
	bool parser_ready = false, doc_ready = false;
	char *data = NULL;
	size_t len = 0;
	int rc = -1;

	memset(config, 0, sizeof *config);
	config->path = xstrdup(path);
	set_defaults(config);

	if (config_read_small_file(path, FLOW_FILE_MAX_BYTES, &data, &len) < 0) {
		log_error("flow file \"%s\": cannot read: %m", path);
		goto out;
	}
	if (!yaml_parser_initialize(&parser)) {
		log_error("flow file \"%s\": cannot initialize the YAML parser", path);
		goto out;
	}
	parser_ready = true;
	yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
	if (!yaml_parser_load(&parser, &doc)) {
		report_syntax(&ld, &parser, data);
		goto out;
	}
	doc_ready = true;
	ld.doc = &doc;

	/* A second document would be silently ignored: refuse it.  Loading
	 * it also finds syntax errors anywhere in the file before anything
	 * else is judged. */
	if (!yaml_parser_load(&parser, &extra)) {
		report_syntax(&ld, &parser, data);
		goto out;
	}
	yaml_node_t *extra_root = yaml_document_get_root_node(&extra);
	if (extra_root) {
		config_report(&ld, &extra.start_mark, false, "more than one YAML document (\"---\")");
		log_hint("a flow file holds one document");
		yaml_document_delete(&extra);
		goto out;
	}
	yaml_document_delete(&extra);

	yaml_node_t *root = yaml_document_get_root_node(&doc);
	if (!root) {
		log_error("flow file \"%s\": line 1: the file is empty", path);
		log_hint("start from configs/trellara.yml, see man 5 trellara.yml");
		goto out;
	}
	if (root->type != YAML_MAPPING_NODE) {
		char *got = config_describe(root, true);
		report_at(&ld, root, "the top level must be a mapping (\"key: value\" lines), got %s", got);
		free(got);
		goto out;
	}
	/* The version first: a newer file has keys this one does not know. */
	yaml_node_t *version = config_mapping_value(&ld, root, "config_version", NULL);
	if (version && config_parse_version(&ld, version, &config->config_version) < 0)
		goto out;
	if (config_parse_mapping(&ld, root, root, "", config_root_fields, config) < 0)
		goto out;
	set_late_defaults(config);
	if (check_urls(config) < 0)
		goto out;
	warn_unprotected_group(config);
	rc = 0;
out:
	if (doc_ready)
		yaml_document_delete(&doc);
	if (parser_ready)
		yaml_parser_delete(&parser);
	free(data);
	if (rc < 0)
		config_free(config);
	return rc;
}

static void free_strings(char **items, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(items[i]);
	free(items);
}

void config_free_secret(char *secret)
{
	if (secret) {
		explicit_bzero(secret, strlen(secret));
		free(secret);
	}
}

void config_free(struct flow_config *config)
{
	if (!config)
		return;
	free(config->path);
	free(config->environment);
	free(config->source_id);
	config_free_secret(config->source_database_url);
	free(config->source_database_url_file);
	for (size_t i = 0; i < config->n_standby_database_urls; i++)
		config_free_secret(config->standby_database_urls[i]);
	free(config->standby_database_urls);
	free(config->publication);
	free(config->slot);
	free(config->stream_spill_dir);
	free(config->dataset_id);
	for (size_t i = 0; i < config->n_tables; i++) {
		struct table_config *table = &config->tables[i];
		free(table->schema);
		free(table->name);
		free(table->verify_primary_key);
		free_strings(table->excluded_columns, table->n_excluded_columns);
	}
	free(config->tables);
	free_strings(config->sequences, config->n_sequences);
	free(config->contract);
	free(config->contract_pin);
	free(config->stream_path);
	free(config->stream_kind_name);
	free_strings(config->jetstream_servers, config->n_jetstream_servers);
	free(config->jetstream_stream);
	free(config->jetstream_subject);
	config_free_secret(config->jetstream_credentials);
	free_strings(config->protected_groups, config->n_protected_groups);
	config_free_secret(config->target_database_url);
	free(config->target_database_url_file);
	free(config->checkpoint_schema);
	free(config->stream_compression);
	free(config->consumer_group);
	free(config->metrics_dir);
	memset(config, 0, sizeof *config);
}

char *config_flow_id(const struct flow_config *config)
{
	return xasprintf("%s:%s", config->source_id, config->dataset_id);
}

/* ---- one value by its key path ---- */

/* The field that keypath names, walking root_fields and the sections'
 * children (a list's items have no key path of their own), or NULL. */
static const struct field *field_at(const char *keypath)
{
	const struct field *fields = config_root_fields;
	const char *name = keypath;
	for (;;) {
		const char *dot = strchr(name, '.');
		size_t len = dot ? (size_t)(dot - name) : strlen(name);
		const struct field *f = fields;
		while (f->name && (strlen(f->name) != len || memcmp(f->name, name, len) != 0))
			f++;
		if (!f->name || !dot)
			return f->name ? f : NULL;
		if (f->kind != K_SECTION)
			return NULL;
		fields = f->children;
		name = dot + 1;
	}
}

enum config_key_kind config_key_kind(const char *keypath)
{
	const struct field *f = field_at(keypath);
	if (!f)
		return CONFIG_KEY_UNKNOWN;
	switch (f->kind) {
	case K_VERSION:
	case K_STRING:
	case K_UINT:
	case K_INT:
	case K_BOOL:
	case K_CHOICE:
		return CONFIG_KEY_SCALAR;
	case K_SECRET:
		return CONFIG_KEY_SECRET;
	case K_SECTION:
	case K_STRING_LIST:
	case K_SECRET_LIST:
	case K_COLUMNS:
	case K_TABLES:
		break;
	}
	return CONFIG_KEY_UNKNOWN;
}

int config_get_scalar(const struct flow_config *config, const char *keypath, struct strbuf *out)
{
	if (config_key_kind(keypath) != CONFIG_KEY_SCALAR)
		return -1;
	const struct field *f = field_at(keypath);
	/* the offsets of the scalar keys are into struct flow_config */
	const void *at = (const char *)config + f->offset;
	switch (f->kind) {
	case K_VERSION:
	case K_INT:
		strbuf_addf(out, "%d", *(const int *)at);
		break;
	case K_UINT:
		strbuf_addf(out, "%" PRIu64, *(const uint64_t *)at);
		break;
	case K_BOOL:
		strbuf_adds(out, *(const bool *)at ? "true" : "false");
		break;
	case K_CHOICE:
		/* the loader accepts only this value (or refuses the file) */
		strbuf_adds(out, f->choice);
		break;
	case K_STRING: {
		const char *value = *(char *const *)at;
		if (!value)
			return 0;
		strbuf_adds(out, value);
		break;
	}
	default:
		return -1;
	}
	return 1;
}
