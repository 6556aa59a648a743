/*
 * config_schema.c - the flow file's schema (DESIGN §3, man 5 trellara.yml):
 * the table of fields per mapping, which config_walk.c walks, and the
 * checks on keys and values.  The tables are the single list of keys: the
 * man page and the example file follow them.
 */
#include "config_internal.h"

#include "trellara/defaults.h"
#include "trellara/log.h"
#include "trellara/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PG_NAME_MAX 63 /* NAMEDATALEN - 1: longer names are truncated */

#define CFG(member) offsetof(struct flow_config, member)
#define TBL(member) offsetof(struct table_config, member)

static int check_pgoutput(const struct loader *ld, const yaml_node_t *mapping,
			  const char *keypath, void *base);

static const struct field pgoutput_fields[] = {
	{ .name = "protocol_version", .kind = K_INT, .offset = CFG(pgoutput_protocol_version),
	  .min = 1, .max = 2 },
	{ .name = "streaming", .kind = K_BOOL, .offset = CFG(pgoutput_streaming) },
	{ 0 }
};

static const struct field source_fields[] = {
	{ .name = "id", .kind = K_STRING, .required = true, .offset = CFG(source_id), .check = V_ID },
	{ .name = "database_url", .kind = K_SECRET, .required = true,
	  .offset = CFG(source_database_url), .file_offset = CFG(source_database_url_file) },
	{ .name = "publication", .kind = K_STRING, .required = true, .offset = CFG(publication),
	  .check = V_PG_NAME },
	{ .name = "slot", .kind = K_STRING, .required = true, .offset = CFG(slot), .check = V_SLOT },
	{ .name = "wal_retention_warn_bytes", .kind = K_UINT,
	  .offset = CFG(wal_retention_warn_bytes) },
	{ .name = "expected_downtime_seconds", .kind = K_UINT, .offset = CFG(expected_downtime_seconds), .min = 1 },
	{ .name = "standby_database_urls", .kind = K_SECRET_LIST, .offset = CFG(standby_database_urls),
	  .count_offset = CFG(n_standby_database_urls) },
	{ .name = "stream_spill_threshold_changes", .kind = K_UINT,
	  .offset = CFG(stream_spill_threshold_changes), .min = 1 },
	{ .name = "stream_spill_dir", .kind = K_STRING, .offset = CFG(stream_spill_dir) },
	{ .name = "pgoutput", .kind = K_SECTION, .children = pgoutput_fields,
	  .post = check_pgoutput },
	{ 0 }
};

static const struct field strict_chunking_fields[] = {
	{ .name = "max_changes_per_chunk", .kind = K_UINT, .offset = CFG(max_changes_per_chunk),
	  .min = 1 },
	{ 0 }
};

static const struct field verify_fields[] = {
	{ .name = "primary_key", .kind = K_COLUMNS, .offset = TBL(verify_primary_key) },
	{ .name = "excluded_columns", .kind = K_STRING_LIST, .offset = TBL(excluded_columns),
	  .count_offset = TBL(n_excluded_columns), .check = V_PG_NAME },
	{ 0 }
};

static const struct field table_apply_fields[] = {
	{ .name = "compaction", .kind = K_BOOL, .offset = TBL(apply_compaction) },
	{ 0 }
};

static const struct field table_fields[] = {
	{ .name = "schema", .kind = K_STRING, .required = true, .offset = TBL(schema),
	  .check = V_PG_NAME },
	{ .name = "name", .kind = K_STRING, .required = true, .offset = TBL(name),
	  .check = V_PG_NAME },
	{ .name = "verify", .kind = K_SECTION, .children = verify_fields },
	{ .name = "apply", .kind = K_SECTION, .children = table_apply_fields },
	{ 0 }
};

static const struct field dataset_fields[] = {
	{ .name = "id", .kind = K_STRING, .required = true, .offset = CFG(dataset_id), .check = V_ID },
	{ .name = "mode", .kind = K_CHOICE, .choice = "strict_transaction_order",
	  .later = "partitioned_scale_mode" },
	{ .name = "strict_chunking", .kind = K_SECTION, .presence = true,
	  .offset = CFG(strict_chunking), .children = strict_chunking_fields },
	{ .name = "tables", .kind = K_TABLES, .required = true, .children = table_fields },
	{ .name = "sequences", .kind = K_STRING_LIST, .offset = CFG(sequences),
	  .count_offset = CFG(n_sequences), .check = V_QUALIFIED_NAME, .unique = true },
	{ .name = "contract", .kind = K_STRING, .offset = CFG(contract) },
	{ .name = "contract_pin", .kind = K_STRING, .offset = CFG(contract_pin) },
	{ 0 }
};

static int check_dataset(const struct loader *ld, const yaml_node_t *mapping, const char *keypath, void *base);

static int check_stream(const struct loader *ld, const yaml_node_t *mapping, const char *keypath, void *base);

static const struct field stream_fields[] = {
	{ .name = "kind", .kind = K_STRING, .required = true, .offset = CFG(stream_kind_name) },
	{ .name = "path", .kind = K_STRING, .offset = CFG(stream_path) },
	{ .name = "servers", .kind = K_STRING_LIST, .offset = CFG(jetstream_servers),
	  .count_offset = CFG(n_jetstream_servers), .min = 1, .unique = true, .check = V_NATS_URL },
	{ .name = "name", .kind = K_STRING, .offset = CFG(jetstream_stream), .check = V_JETSTREAM_NAME },
	{ .name = "subject", .kind = K_STRING, .offset = CFG(jetstream_subject), .check = V_NATS_SUBJECT },
	{ .name = "replicas", .kind = K_UINT, .offset = CFG(jetstream_replicas), .min = 1, .max = MAX_JETSTREAM_REPLICAS },
	{ .name = "credentials", .kind = K_SECRET, .offset = CFG(jetstream_credentials) },
	{ .name = "duplicate_window_seconds", .kind = K_UINT, .offset = CFG(jetstream_duplicate_window_seconds),
	  .min = 1 },
	{ .name = "max_bytes", .kind = K_UINT, .offset = CFG(jetstream_max_bytes), .min = 1 },
	{ .name = "accept_loss_on_broker_crash", .kind = K_BOOL, .offset = CFG(jetstream_accept_crash_loss) },
	{ .name = "durability", .kind = K_CHOICE, .choice = "fsync" },
	{ .name = "segment_bytes", .kind = K_UINT, .offset = CFG(segment_bytes),
	  .min = MIN_SEGMENT_BYTES },
	{ .name = "max_batch_transactions", .kind = K_UINT, .offset = CFG(max_batch_transactions),
	  .min = 1 },
	{ .name = "max_batch_messages", .kind = K_UINT, .offset = CFG(max_batch_messages), .min = 1 },
	{ .name = "min_free_bytes", .kind = K_UINT, .offset = CFG(min_free_bytes) },
	{ .name = "compression", .kind = K_STRING, .offset = CFG(stream_compression) },
	{ .name = "protected_groups", .kind = K_STRING_LIST, .offset = CFG(protected_groups),
	  .count_offset = CFG(n_protected_groups), .min = 1, .check = V_GROUP },
	{ 0 }
};

static const struct field target_fields[] = {
	{ .name = "database_url", .kind = K_SECRET, .required = true,
	  .offset = CFG(target_database_url), .file_offset = CFG(target_database_url_file) },
	{ .name = "checkpoint_schema", .kind = K_STRING, .offset = CFG(checkpoint_schema),
	  .check = V_PG_NAME },
	{ 0 }
};

static const struct field snapshot_fields[] = {
	{ .name = "workers", .kind = K_UINT, .offset = CFG(snapshot_workers), .min = 1 },
	{ .name = "split_bytes", .kind = K_UINT, .offset = CFG(snapshot_split_bytes) },
	{ 0 }
};

static const struct field apply_fields[] = {
	{ .name = "consumer_group", .kind = K_STRING, .offset = CFG(consumer_group),
	  .check = V_GROUP },
	{ .name = "batch_transactions", .kind = K_UINT, .offset = CFG(apply_batch_transactions),
	  .min = 1 },
	{ .name = "compaction", .kind = K_BOOL, .offset = CFG(apply_compaction) },
	{ .name = "copy_inserts", .kind = K_BOOL, .offset = CFG(apply_copy_inserts) },
	{ .name = "workers", .kind = K_UINT, .offset = CFG(apply_workers), .min = 1, .max = MAX_APPLY_WORKERS },
	{ 0 }
};

static const struct field observability_fields[] = {
	{ .name = "metrics_dir", .kind = K_STRING, .offset = CFG(metrics_dir) },
	{ 0 }
};

const struct field config_root_fields[] = {
	{ .name = "config_version", .kind = K_VERSION, .required = true, .offset = CFG(config_version) },
	{ .name = "environment", .kind = K_STRING, .offset = CFG(environment) },
	{ .name = "source", .kind = K_SECTION, .required = true, .children = source_fields },
	{ .name = "dataset", .kind = K_SECTION, .required = true, .children = dataset_fields, .post = check_dataset },
	{ .name = "stream", .kind = K_SECTION, .required = true, .children = stream_fields, .post = check_stream },
	{ .name = "target", .kind = K_SECTION, .required = true, .children = target_fields },
	{ .name = "snapshot", .kind = K_SECTION, .children = snapshot_fields },
	{ .name = "apply", .kind = K_SECTION, .children = apply_fields },
	{ .name = "observability", .kind = K_SECTION, .children = observability_fields },
	{ 0 }
};

static int check_pgoutput(const struct loader *ld, const yaml_node_t *mapping,
			  const char *keypath, void *base)
{
	const struct flow_config *config = base;
	if (config->pgoutput_streaming && config->pgoutput_protocol_version < 2) {
		config_report(ld, &mapping->start_mark, false,
			      "key \"%s.streaming\" needs protocol_version 2, but protocol_version is %d", keypath,
			      config->pgoutput_protocol_version);
		log_hint("set %s.streaming: false to use protocol_version 1", keypath);
		return -1;
	}
	return 0;
}

/* dataset.contract: off or pinned (trellara-contract-test(1)) */
static int check_dataset(const struct loader *ld, const yaml_node_t *mapping, const char *keypath, void *base)
{
	const struct flow_config *config = base;
	yaml_node_t *node = config_mapping_value(ld, mapping, "contract", NULL);
	if (node && strcmp(config->contract, "off") != 0 && strcmp(config->contract, "pinned") != 0) {
		char *shown = config_describe(node, false);
		report_at(ld, node, "key \"%s.contract\" must be \"off\" or \"pinned\", got %s", keypath, shown);
		free(shown);
		return -1;
	}
	return 0;
}

/* stream.kind and the keys of each kind: local needs path; jetstream
 * needs servers, name and subject, and takes none of the local keys;
 * compression goes with either. */
static int check_stream(const struct loader *ld, const yaml_node_t *mapping, const char *keypath, void *base)
{
	struct flow_config *config = base;
	static const char *const local_keys[] = { "path", "durability", "segment_bytes", "min_free_bytes", NULL };
	static const char *const jetstream_keys[] = { "servers", "name", "subject", "replicas", "credentials",
						      "duplicate_window_seconds", "max_bytes",
						      "accept_loss_on_broker_crash", NULL };
	yaml_node_t *kind_node = config_mapping_value(ld, mapping, "kind", NULL);
	bool local = strcmp(config->stream_kind_name, "local") == 0;
	if (!local && strcmp(config->stream_kind_name, "jetstream") != 0) {
		char *shown = config_describe(kind_node, false);
		report_at(ld, kind_node, "key \"%s.kind\" must be \"local\" or \"jetstream\", got %s", keypath, shown);
		free(shown);
		return -1;
	}
	config->stream_kind = local ? STREAM_KIND_LOCAL : STREAM_KIND_JETSTREAM;
	const char *const *foreign = local ? jetstream_keys : local_keys;
	for (size_t i = 0; foreign[i]; i++) {
		yaml_node_t *key = NULL;
		if (config_mapping_value(ld, mapping, foreign[i], &key)) {
			report_at(ld, key, "key \"%s.%s\" does not go with %s.kind \"%s\"", keypath, foreign[i], keypath,
				  config->stream_kind_name);
			return -1;
		}
	}
	yaml_node_t *compression_node = config_mapping_value(ld, mapping, "compression", NULL);
	if (compression_node && strcmp(config->stream_compression, "none") != 0 &&
	    strcmp(config->stream_compression, "zlib") != 0) {
		char *shown = config_describe(compression_node, false);
		report_at(ld, compression_node, "key \"%s.compression\" must be \"none\" or \"zlib\", got %s", keypath,
			  shown);
		free(shown);
		return -1;
	}
	/* A PubAck is a quorum's write to its file store, fsynced only on the
	 * servers' sync interval (DESIGN "The stream on NATS JetStream"): with
	 * fewer than three replicas one host's crash can lose what capture
	 * acknowledged to the source.  Refused unless the flow accepts that. */
	if (!local && config->jetstream_replicas < DEFAULT_JETSTREAM_REPLICAS && !config->jetstream_accept_crash_loss) {
		yaml_node_t *replicas_node = config_mapping_value(ld, mapping, "replicas", NULL);
		report_at(ld, replicas_node,
			  "key \"%s.replicas\" is %llu: a message JetStream acknowledged is on fewer than %d servers, "
			  "none of which has synced it to disk yet, so one server's crash can lose transactions the "
			  "source has already recycled",
			  keypath, (unsigned long long)config->jetstream_replicas, DEFAULT_JETSTREAM_REPLICAS);
		log_hint("use %s.replicas: 3 (or 5); or, for a test or a stream you can re-copy, accept the risk by "
			 "name: %s.accept_loss_on_broker_crash: true",
			 keypath, keypath);
		return -1;
	}
	static const char *const local_required[] = { "path", NULL };
	static const char *const jetstream_required[] = { "servers", "name", "subject", NULL };
	const char *const *required = local ? local_required : jetstream_required;
	for (size_t i = 0; required[i]; i++) {
		if (!config_mapping_value(ld, mapping, required[i], NULL)) {
			config_report(ld, &mapping->start_mark, false, "missing required key \"%s.%s\" (%s.kind \"%s\")",
				      keypath, required[i], keypath, config->stream_kind_name);
			return -1;
		}
	}
	return 0;
}

/* ---- unknown keys ---- */

/* Optimal string alignment distance (a swap of two letters counts 1),
 * capped: anything above 3 is 3. */
static size_t edit_distance(const char *a, size_t alen, const char *b)
{
	size_t blen = strlen(b);
	if (alen > blen + 3 || blen > alen + 3 || alen > 64 || blen > 64)
		return 3;
	size_t d[65][65];
	for (size_t i = 0; i <= alen; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= blen; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= alen; i++) {
		for (size_t j = 1; j <= blen; j++) {
			size_t cost = a[i - 1] != b[j - 1];
			size_t best = d[i - 1][j - 1] + cost;
			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	}
	return d[alen][blen] > 3 ? 3 : d[alen][blen];
}

/* Where else in the schema a key of this name lives ("source.slot"), or
 * NULL.  Newly allocated. */
static char *find_elsewhere(const struct field *fields, const char *prefix, const char *name,
			    size_t len)
{
	for (const struct field *f = fields; f->name; f++) {
		if (strlen(f->name) == len && memcmp(f->name, name, len) == 0)
			return config_key_path(prefix, f->name);
		if (f->kind == K_SECTION || f->kind == K_TABLES) {
			char *sub = f->kind == K_TABLES ? xasprintf("%s%s%s[]", prefix, *prefix ? "." : "", f->name)
							: config_key_path(prefix, f->name);
			char *found = find_elsewhere(f->children, sub, name, len);
			free(sub);
			if (found)
				return found;
		}
	}
	return NULL;
}

static void report_unknown(const struct loader *ld, const yaml_node_t *key, const char *prefix,
			   const struct field *fields)
{
	const char *name = (const char *)key->data.scalar.value;
	size_t len = key->data.scalar.length;
	char *shown = config_shown_text(name, len, false);
	if (*prefix)
		report_at(ld, key, "unknown key \"%s.%s", prefix, shown + 1);
	else
		report_at(ld, key, "unknown key %s", shown);
	free(shown);

	const struct field *best = NULL;
	size_t best_distance = 3;
	for (const struct field *f = fields; f->name; f++) {
		size_t distance = edit_distance(name, len, f->name);
		if (distance < best_distance) {
			best = f;
			best_distance = distance;
		}
	}
	if (best) {
		char *suggestion = config_key_path(prefix, best->name);
		log_hint("did you mean \"%s\"?", suggestion);
		free(suggestion);
		return;
	}
	char *elsewhere = find_elsewhere(config_root_fields, "", name, len);
	if (elsewhere) {
		log_hint("did you mean \"%s\"?", elsewhere);
		free(elsewhere);
		return;
	}
	char list[512];
	size_t used = 0;
	list[0] = '\0';
	for (const struct field *f = fields; f->name && used < sizeof list; f++)
		used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "",
					 f->name);
	if (*prefix)
		log_hint("the keys of \"%s\" are: %s", prefix, list);
	else
		log_hint("the top-level keys are: %s", list);
}

/* Keys must be strings, known, and appear once. */
int config_check_keys(const struct loader *ld, const yaml_node_t *mapping, const char *prefix,
		      const struct field *fields)
{
	for (yaml_node_pair_t *pair = mapping->data.mapping.pairs.start;
	     pair < mapping->data.mapping.pairs.top; pair++) {
		yaml_node_t *key = config_node_get(ld, pair->key);
		if (key->type != YAML_SCALAR_NODE) {
			report_at(ld, key, "a key in \"%s\" is %s; keys must be plain names",
				  *prefix ? prefix : "the top level",
				  key->type == YAML_MAPPING_NODE ? "a mapping" : "a list");
			return -1;
		}
		for (yaml_node_pair_t *earlier = mapping->data.mapping.pairs.start; earlier < pair;
		     earlier++) {
			yaml_node_t *other = config_node_get(ld, earlier->key);
			if (other->type == YAML_SCALAR_NODE &&
			    other->data.scalar.length == key->data.scalar.length &&
			    memcmp(other->data.scalar.value, key->data.scalar.value,
				   key->data.scalar.length) == 0) {
				char *shown = config_shown_text((const char *)key->data.scalar.value,
								key->data.scalar.length, false);
				report_at(ld, key, "duplicate key \"%s%s%s (first at line %zu)", prefix,
					  *prefix ? "." : "", shown + 1, other->start_mark.line + 1);
				free(shown);
				return -1;
			}
		}
		const struct field *f = fields;
		while (f->name && !config_scalar_is(key, f->name))
			f++;
		if (!f->name) {
			report_unknown(ld, key, prefix, fields);
			return -1;
		}
	}
	return 0;
}

/* ---- values ---- */

static bool all_chars_in(const char *s, const char *allowed_extra, bool lower_only)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
			  (!lower_only && c >= 'A' && c <= 'Z') || strchr(allowed_extra, c);
		if (!ok)
			return false;
	}
	return true;
}

/* No control bytes (nor DEL). */
static bool all_printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < ' ' || *s == 0x7f)
			return false;
	return true;
}

int config_check_value(const struct loader *ld, const yaml_node_t *node, const char *keypath,
		       enum value_check check, const char *value)
{
	char *shown = config_shown_text(value, strlen(value), false);
	int rc = -1;
	if (!*value) {
		report_at(ld, node, "key \"%s\" must not be empty", keypath);
		goto out;
	}
	switch (check) {
	case V_NONE:
		break;
	case V_ID:
		for (const char *p = value; *p; p++) {
			if (*p == ':' || (unsigned char)*p <= ' ' || *p == 0x7f) {
				report_at(ld, node, "key \"%s\" must not contain \":\", spaces or control characters, got %s",
					  keypath, shown);
				log_hint("the flow identity is \"source.id:dataset.id\"");
				goto out;
			}
		}
		break;
	case V_PG_NAME:
		if (strlen(value) > PG_NAME_MAX) {
			report_at(ld, node, "key \"%s\" is longer than %d bytes, PostgreSQL's limit for names, got %s",
				  keypath, PG_NAME_MAX, shown);
			goto out;
		}
		break;
	case V_SLOT:
		if (strlen(value) > PG_NAME_MAX || !all_chars_in(value, "_", true)) {
			report_at(ld, node, "key \"%s\" must be at most %d lower-case letters, digits or underscores, got %s",
				  keypath, PG_NAME_MAX, shown);
			log_hint("PostgreSQL accepts only these in replication slot names");
			goto out;
		}
		break;
	case V_QUALIFIED_NAME: {
		const char *dot = strchr(value, '.');
		if (!dot || dot == value || !dot[1] || strchr(dot + 1, '.')) {
			report_at(ld, node, "key \"%s\" must be a schema-qualified name \"schema.name\", got %s",
				  keypath, shown);
			log_hint("write a sequence as public.orders_id_seq");
			goto out;
		}
		if ((size_t)(dot - value) > PG_NAME_MAX || strlen(dot + 1) > PG_NAME_MAX) {
			report_at(ld, node, "key \"%s\" has a name longer than %d bytes, PostgreSQL's limit for names, got %s",
				  keypath, PG_NAME_MAX, shown);
			goto out;
		}
		break;
	}
	case V_NATS_URL: {
		const char *rest = strncmp(value, "nats://", 7) == 0 ? value + 7 : strncmp(value, "tls://", 6) == 0 ? value + 6 : NULL;
		const char *colon = rest ? strrchr(rest, ':') : NULL;
		if (rest && strchr(rest, '@')) {
			/* user info: perhaps a password, never shown */
			report_at(ld, node, "key \"%s\" must be nats://HOST:PORT or tls://HOST:PORT, without a user or password (not shown)",
				  keypath);
			log_hint("put a user and password in stream.credentials, not in the server URL");
			goto out;
		}
		if (!rest || !colon || colon == rest || !colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1) ||
		    strtoul(colon + 1, NULL, 10) == 0 || strtoul(colon + 1, NULL, 10) > 65535) {
			report_at(ld, node, "key \"%s\" must be nats://HOST:PORT or tls://HOST:PORT, got %s", keypath, shown);
			goto out;
		}
		break;
	}
	case V_JETSTREAM_NAME:
		if (strlen(value) > 255 || strpbrk(value, " \t.*>/\\") || !all_printable(value)) {
			report_at(ld, node, "key \"%s\" must be a JetStream stream name: no spaces, \".\", \"*\", \">\", \"/\" or \"\\\", got %s",
				  keypath, shown);
			goto out;
		}
		break;
	case V_NATS_SUBJECT: {
		bool ok = value[0] != '.' && value[strlen(value) - 1] != '.' && !strstr(value, "..") &&
			  !strpbrk(value, " \t*>") && all_printable(value);
		if (!ok) {
			report_at(ld, node, "key \"%s\" must be a subject to publish to: dot-separated tokens without spaces or wildcards (\"*\", \">\"), got %s",
				  keypath, shown);
			goto out;
		}
		break;
	}
	case V_GROUP:
		if (strlen(value) > 200 || value[0] == '.' || !all_chars_in(value, "_.-", false)) {
			report_at(ld, node, "key \"%s\" must be letters, digits, \"_\", \"-\" or \".\", not starting with \".\", got %s",
				  keypath, shown);
			log_hint("a consumer group is a file name in the stream directory");
			goto out;
		}
		break;
	}
	rc = 0;
out:
	free(shown);
	return rc;
}
