/*
 * config.c - load and validate a flow file (DESIGN §3, man 5 trellara.yml).
 *
 * libyaml loads the file into a node tree; a table of fields per mapping
 * (the schema below) drives one walk over it that checks keys, types and
 * values and fills struct flow_config.  The walk stops at the first error,
 * which is logged once with the file, line, column and dotted key path.
 * The schema tables are the single list of keys: the man page and the
 * example file follow them.
 */
#include "trellara/config.h"

#include "trellara/conninfo.h"
#include "trellara/defaults.h"
#include "trellara/log.h"
#include "trellara/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#define FLOW_FILE_MAX_BYTES (1024 * 1024) /* a flow file is a page of YAML */
#define SECRET_FILE_MAX_BYTES (64 * 1024)
#define PG_NAME_MAX 63 /* NAMEDATALEN - 1: longer names are truncated */
#define SHOWN_VALUE_MAX 60

enum field_kind {
	K_VERSION,     /* config_version: integer, must be 2 */
	K_STRING,      /* non-empty string */
	K_SECRET,      /* connection string or secret reference */
	K_UINT,        /* uint64_t within [min, max] */
	K_INT,         /* int within [min, max] */
	K_BOOL,        /* true/false/yes/no */
	K_CHOICE,      /* a string that must equal .choice (stored as an enum) */
	K_SECTION,     /* a mapping of .children */
	K_STRING_LIST, /* list of strings: char ** at .offset, size_t at .count_offset */
	K_COLUMNS,     /* a column name or list of them, stored comma-joined */
	K_TABLES,      /* list of mappings of .children (struct table_config) */
};

/* Extra checks on a string's value. */
enum value_check {
	V_NONE,
	V_ID,      /* source.id, dataset.id: joined with ":" into the flow id */
	V_PG_NAME, /* a PostgreSQL identifier: at most 63 bytes */
	V_SLOT,    /* a replication slot name */
	V_GROUP,   /* a consumer group: becomes a file name in the stream */
};

struct loader;

struct field {
	const char *name;
	enum field_kind kind;
	bool required;
	size_t offset;       /* into the base struct (K_SECTION: presence flag) */
	size_t count_offset; /* K_STRING_LIST */
	bool presence;       /* K_SECTION: set the bool at .offset when present */
	uint64_t min, max;   /* K_UINT, K_INT; max 0 = none; K_STRING_LIST: min items */
	enum value_check check;
	const char *choice;  /* K_CHOICE: the accepted value */
	const char *later;   /* K_CHOICE: a schema-valid value this implementation refuses (exit 78) */
	const struct field *children; /* K_SECTION, K_TABLES */
	/* K_SECTION: checks across the section's keys once it is read. */
	int (*post)(const struct loader *ld, const yaml_node_t *mapping, const char *keypath,
		    void *base);
};

struct loader {
	const char *path; /* the flow file, for messages */
	yaml_document_t *doc;
};

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
	  .offset = CFG(source_database_url) },
	{ .name = "publication", .kind = K_STRING, .required = true, .offset = CFG(publication),
	  .check = V_PG_NAME },
	{ .name = "slot", .kind = K_STRING, .required = true, .offset = CFG(slot), .check = V_SLOT },
	{ .name = "wal_retention_warn_bytes", .kind = K_UINT,
	  .offset = CFG(wal_retention_warn_bytes) },
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

static const struct field table_fields[] = {
	{ .name = "schema", .kind = K_STRING, .required = true, .offset = TBL(schema),
	  .check = V_PG_NAME },
	{ .name = "name", .kind = K_STRING, .required = true, .offset = TBL(name),
	  .check = V_PG_NAME },
	{ .name = "verify", .kind = K_SECTION, .children = verify_fields },
	{ 0 }
};

static const struct field dataset_fields[] = {
	{ .name = "id", .kind = K_STRING, .required = true, .offset = CFG(dataset_id), .check = V_ID },
	{ .name = "mode", .kind = K_CHOICE, .choice = "strict_transaction_order",
	  .later = "partitioned_scale_mode" },
	{ .name = "strict_chunking", .kind = K_SECTION, .presence = true,
	  .offset = CFG(strict_chunking), .children = strict_chunking_fields },
	{ .name = "tables", .kind = K_TABLES, .required = true, .children = table_fields },
	{ 0 }
};

static const struct field stream_fields[] = {
	{ .name = "kind", .kind = K_CHOICE, .required = true, .choice = "local" },
	{ .name = "path", .kind = K_STRING, .required = true, .offset = CFG(stream_path) },
	{ .name = "durability", .kind = K_CHOICE, .choice = "fsync" },
	{ .name = "segment_bytes", .kind = K_UINT, .offset = CFG(segment_bytes),
	  .min = MIN_SEGMENT_BYTES },
	{ .name = "max_batch_transactions", .kind = K_UINT, .offset = CFG(max_batch_transactions),
	  .min = 1 },
	{ .name = "max_batch_messages", .kind = K_UINT, .offset = CFG(max_batch_messages), .min = 1 },
	{ .name = "min_free_bytes", .kind = K_UINT, .offset = CFG(min_free_bytes) },
	{ .name = "protected_groups", .kind = K_STRING_LIST, .offset = CFG(protected_groups),
	  .count_offset = CFG(n_protected_groups), .min = 1, .check = V_GROUP },
	{ 0 }
};

static const struct field target_fields[] = {
	{ .name = "database_url", .kind = K_SECRET, .required = true,
	  .offset = CFG(target_database_url) },
	{ .name = "checkpoint_schema", .kind = K_STRING, .offset = CFG(checkpoint_schema),
	  .check = V_PG_NAME },
	{ 0 }
};

static const struct field snapshot_fields[] = {
	{ .name = "workers", .kind = K_UINT, .offset = CFG(snapshot_workers), .min = 1 },
	{ 0 }
};

static const struct field apply_fields[] = {
	{ .name = "consumer_group", .kind = K_STRING, .offset = CFG(consumer_group),
	  .check = V_GROUP },
	{ .name = "batch_transactions", .kind = K_UINT, .offset = CFG(apply_batch_transactions),
	  .min = 1 },
	{ 0 }
};

static const struct field observability_fields[] = {
	{ .name = "metrics_dir", .kind = K_STRING, .offset = CFG(metrics_dir) },
	{ 0 }
};

static const struct field root_fields[] = {
	{ .name = "config_version", .kind = K_VERSION, .required = true, .offset = CFG(config_version) },
	{ .name = "environment", .kind = K_STRING, .offset = CFG(environment) },
	{ .name = "source", .kind = K_SECTION, .required = true, .children = source_fields },
	{ .name = "dataset", .kind = K_SECTION, .required = true, .children = dataset_fields },
	{ .name = "stream", .kind = K_SECTION, .required = true, .children = stream_fields },
	{ .name = "target", .kind = K_SECTION, .required = true, .children = target_fields },
	{ .name = "snapshot", .kind = K_SECTION, .children = snapshot_fields },
	{ .name = "apply", .kind = K_SECTION, .children = apply_fields },
	{ .name = "observability", .kind = K_SECTION, .children = observability_fields },
	{ 0 }
};

/* ---- messages ---- */

static void report(const struct loader *ld, const yaml_mark_t *mark, bool column, const char *fmt,
		   ...) __attribute__((format(printf, 4, 5)));

/* The one error line: flow file "PATH": line L[, column C]: message. */
static void report(const struct loader *ld, const yaml_mark_t *mark, bool column, const char *fmt,
		   ...)
{
	char message[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(message, sizeof message, fmt, ap);
	va_end(ap);
	if (column)
		log_error("flow file \"%s\": line %zu, column %zu: %s", ld->path, mark->line + 1,
			  mark->column + 1, message);
	else
		log_error("flow file \"%s\": line %zu: %s", ld->path, mark->line + 1, message);
}

#define report_at(ld, node, ...) report((ld), &(node)->start_mark, true, __VA_ARGS__)

static char *key_path(const char *prefix, const char *key)
{
	return *prefix ? xasprintf("%s.%s", prefix, key) : xstrdup(key);
}

/* A scalar fit to print: control bytes as "?", long ones cut, a possible
 * connection string masked.  Newly allocated. */
static char *shown_text(const char *text, size_t len, bool maybe_secret)
{
	char *raw = xstrndup(text, len);
	char *masked = maybe_secret ? conninfo_mask(raw) : xstrdup(raw);
	free(raw);
	size_t n = strlen(masked);
	bool cut = n > SHOWN_VALUE_MAX;
	if (cut)
		n = SHOWN_VALUE_MAX;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)masked[i] < 0x20 || masked[i] == 0x7f)
			masked[i] = '?';
	char *shown = xasprintf("\"%.*s%s\"", (int)n, masked, cut ? "..." : "");
	free(masked);
	return shown;
}

/* What a node is, for "must be X, got Y".  Newly allocated. */
static char *describe(const yaml_node_t *node, bool maybe_secret)
{
	switch (node->type) {
	case YAML_MAPPING_NODE:
		return xstrdup("a mapping");
	case YAML_SEQUENCE_NODE:
		return xstrdup("a list");
	case YAML_SCALAR_NODE:
		return shown_text((const char *)node->data.scalar.value, node->data.scalar.length,
				  maybe_secret);
	default:
		return xstrdup("nothing");
	}
}

static void report_type(const struct loader *ld, const yaml_node_t *node, const char *keypath,
			const char *expected, bool maybe_secret)
{
	char *got = describe(node, maybe_secret);
	bool quoted = node->type == YAML_SCALAR_NODE && node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
	report_at(ld, node, "key \"%s\" must be %s, got %s%s", keypath, expected, got,
		  quoted ? " (quoted, so a string)" : "");
	free(got);
}

/* ---- nodes ---- */

static yaml_node_t *node_get(const struct loader *ld, int index)
{
	return yaml_document_get_node(ld->doc, index);
}

static bool scalar_is(const yaml_node_t *node, const char *text)
{
	size_t len = strlen(text);
	return node->type == YAML_SCALAR_NODE && node->data.scalar.length == len &&
	       memcmp(node->data.scalar.value, text, len) == 0;
}

/* An empty value, "~" or "null" (plain): the key is there with no value. */
static bool is_null(const yaml_node_t *node)
{
	if (node->type != YAML_SCALAR_NODE || node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	return node->data.scalar.length == 0 || scalar_is(node, "~") || scalar_is(node, "null") ||
	       scalar_is(node, "Null") || scalar_is(node, "NULL");
}

/* The value of key in mapping (the first one), or NULL. */
static yaml_node_t *mapping_value(const struct loader *ld, const yaml_node_t *mapping,
				  const char *key, yaml_node_t **key_node)
{
	if (!mapping || mapping->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *pair = mapping->data.mapping.pairs.start;
	     pair < mapping->data.mapping.pairs.top; pair++) {
		yaml_node_t *k = node_get(ld, pair->key);
		if (k && scalar_is(k, key)) {
			if (key_node)
				*key_node = k;
			return node_get(ld, pair->value);
		}
	}
	return NULL;
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
			return key_path(prefix, f->name);
		if (f->kind == K_SECTION || f->kind == K_TABLES) {
			char *sub = f->kind == K_TABLES ? xasprintf("%s%s%s[]", prefix, *prefix ? "." : "", f->name)
							: key_path(prefix, f->name);
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
	char *shown = shown_text(name, len, false);
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
		char *suggestion = key_path(prefix, best->name);
		log_hint("did you mean \"%s\"?", suggestion);
		free(suggestion);
		return;
	}
	char *elsewhere = find_elsewhere(root_fields, "", name, len);
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
static int check_keys(const struct loader *ld, const yaml_node_t *mapping, const char *prefix,
		      const struct field *fields)
{
	for (yaml_node_pair_t *pair = mapping->data.mapping.pairs.start;
	     pair < mapping->data.mapping.pairs.top; pair++) {
		yaml_node_t *key = node_get(ld, pair->key);
		if (key->type != YAML_SCALAR_NODE) {
			report_at(ld, key, "a key in \"%s\" is %s; keys must be plain names",
				  *prefix ? prefix : "the top level",
				  key->type == YAML_MAPPING_NODE ? "a mapping" : "a list");
			return -1;
		}
		for (yaml_node_pair_t *earlier = mapping->data.mapping.pairs.start; earlier < pair;
		     earlier++) {
			yaml_node_t *other = node_get(ld, earlier->key);
			if (other->type == YAML_SCALAR_NODE &&
			    other->data.scalar.length == key->data.scalar.length &&
			    memcmp(other->data.scalar.value, key->data.scalar.value,
				   key->data.scalar.length) == 0) {
				char *shown = shown_text((const char *)key->data.scalar.value,
							 key->data.scalar.length, false);
				report_at(ld, key, "duplicate key \"%s%s%s (first at line %zu)", prefix,
					  *prefix ? "." : "", shown + 1, other->start_mark.line + 1);
				free(shown);
				return -1;
			}
		}
		const struct field *f = fields;
		while (f->name && !scalar_is(key, f->name))
			f++;
		if (!f->name) {
			report_unknown(ld, key, prefix, fields);
			return -1;
		}
	}
	return 0;
}

/* ---- scalar values ---- */

/* A scalar's text as a new C string; NUL bytes inside are refused. */
static int scalar_text(const struct loader *ld, const yaml_node_t *node, const char *keypath,
		       const char *expected, bool maybe_secret, char **text)
{
	if (node->type != YAML_SCALAR_NODE) {
		report_type(ld, node, keypath, expected, maybe_secret);
		return -1;
	}
	const char *value = (const char *)node->data.scalar.value;
	size_t len = node->data.scalar.length;
	if (memchr(value, '\0', len)) {
		report_at(ld, node, "key \"%s\" contains a NUL byte", keypath);
		return -1;
	}
	*text = xstrndup(value, len);
	return 0;
}

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

static int check_value(const struct loader *ld, const yaml_node_t *node, const char *keypath,
		       enum value_check check, const char *value)
{
	char *shown = shown_text(value, strlen(value), false);
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

/* A plain (unquoted) non-negative decimal integer. */
static int scalar_uint(const struct loader *ld, const yaml_node_t *node, const char *keypath,
		       uint64_t min, uint64_t max, uint64_t *out)
{
	if (node->type != YAML_SCALAR_NODE || node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
		report_type(ld, node, keypath, "an integer", false);
		return -1;
	}
	const char *text = (const char *)node->data.scalar.value;
	size_t len = node->data.scalar.length;
	char *shown = shown_text(text, len, false);
	int rc = -1;
	if (len > 1 && text[0] == '-' && text[1] >= '0' && text[1] <= '9' &&
	    strspn(text + 1, "0123456789") == len - 1) {
		report_at(ld, node, "key \"%s\" must not be negative, got %s", keypath, shown);
		goto out;
	}
	if (len == 0 || strspn(text, "0123456789") != len) {
		report_at(ld, node, "key \"%s\" must be an integer, got %s", keypath, shown);
		goto out;
	}
	uint64_t value = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned digit = (unsigned)(text[i] - '0');
		if (value > (UINT64_MAX - digit) / 10) {
			report_at(ld, node, "key \"%s\" is too large, got %s", keypath, shown);
			goto out;
		}
		value = value * 10 + digit;
	}
	if (max && min + 1 == max && (value < min || value > max)) {
		report_at(ld, node, "key \"%s\" must be %llu or %llu, got %s", keypath,
			  (unsigned long long)min, (unsigned long long)max, shown);
		goto out;
	}
	if (max && (value < min || value > max)) {
		report_at(ld, node, "key \"%s\" must be between %llu and %llu, got %s", keypath,
			  (unsigned long long)min, (unsigned long long)max, shown);
		goto out;
	}
	if (value < min) {
		report_at(ld, node, "key \"%s\" must be at least %llu, got %s", keypath,
			  (unsigned long long)min, shown);
		goto out;
	}
	*out = value;
	rc = 0;
out:
	free(shown);
	return rc;
}

static int scalar_bool(const struct loader *ld, const yaml_node_t *node, const char *keypath,
		       bool *out)
{
	bool plain = node->type == YAML_SCALAR_NODE &&
		     node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
	if (plain && (scalar_is(node, "true") || scalar_is(node, "yes"))) {
		*out = true;
		return 0;
	}
	if (plain && (scalar_is(node, "false") || scalar_is(node, "no"))) {
		*out = false;
		return 0;
	}
	report_type(ld, node, keypath, "true or false", false);
	return -1;
}

static void set_string(void *base, size_t offset, char *value)
{
	char **slot = (char **)((char *)base + offset);
	free(*slot);
	*slot = value;
}

/* ---- secret references ---- */

/* Read a small file whole; errno tells why on failure.  No logging. */
static int read_small_file(const char *path, size_t limit, char **data, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t used = 0, cap = 4096;
	char *buf = xmalloc(cap);
	for (;;) {
		if (used + 1 >= cap)
			buf = xrealloc(buf, cap *= 2);
		ssize_t n = read(fd, buf + used, cap - used - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int saved = errno;
			free(buf);
			close(fd);
			errno = saved;
			return -1;
		}
		if (n == 0)
			break;
		used += (size_t)n;
		if (used > limit) {
			free(buf);
			close(fd);
			errno = EFBIG;
			return -1;
		}
	}
	close(fd);
	buf[used] = '\0';
	*data = buf;
	*len = used;
	return 0;
}

/*
 * {source: environment_variable, name: VAR} or {source: file, path: P}.
 * Key names and values are masked when shown: a mistyped connection
 * string in flow style ({postgresql://u:pw@h}) is a mapping too.
 */
static int resolve_secret(const struct loader *ld, const yaml_node_t *mapping, const char *keypath,
			  char **out)
{
	static const struct field secret_fields[] = {
		{ .name = "source", .kind = K_STRING }, { .name = "name", .kind = K_STRING },
		{ .name = "path", .kind = K_STRING }, { 0 }
	};
	char *source = NULL, *name = NULL, *path = NULL, *data = NULL;
	size_t len = 0;
	int rc = -1;
	for (yaml_node_pair_t *pair = mapping->data.mapping.pairs.start;
	     pair < mapping->data.mapping.pairs.top; pair++) {
		yaml_node_t *key = node_get(ld, pair->key);
		if (key->type != YAML_SCALAR_NODE || scalar_is(key, "source") ||
		    scalar_is(key, "name") || scalar_is(key, "path"))
			continue;
		char *shown = describe(key, true);
		report_at(ld, key, "unknown key \"%s.%s in a secret reference", keypath, shown + 1);
		free(shown);
		log_hint("write {source: environment_variable, name: VAR} or {source: file, path: FILE}");
		goto out;
	}
	if (check_keys(ld, mapping, keypath, secret_fields) < 0)
		goto out;

	yaml_node_t *source_node = mapping_value(ld, mapping, "source", NULL);
	char *source_path = key_path(keypath, "source");
	if (!source_node) {
		report(ld, &mapping->start_mark, false, "missing required key \"%s\"", source_path);
		free(source_path);
		goto out;
	}
	int got = scalar_text(ld, source_node, source_path, "a string", true, &source);
	bool env = source && strcmp(source, "environment_variable") == 0;
	bool file = source && strcmp(source, "file") == 0;
	if (got == 0 && !env && !file) {
		char *shown = describe(source_node, true);
		report_at(ld, source_node, "key \"%s\" must be \"environment_variable\" or \"file\", got %s",
			  source_path, shown);
		free(shown);
		got = -1;
	}
	free(source_path);
	if (got < 0)
		goto out;

	const char *needed = env ? "name" : "path", *unused = env ? "path" : "name";
	char *needed_path = key_path(keypath, needed), *unused_path = key_path(keypath, unused);
	yaml_node_t *unused_key = NULL, *needed_node = mapping_value(ld, mapping, needed, NULL);
	mapping_value(ld, mapping, unused, &unused_key);
	char *value = NULL;
	got = -1;
	if (unused_key)
		report_at(ld, unused_key, "key \"%s\" does not go with source \"%s\"", unused_path, source);
	else if (!needed_node || is_null(needed_node))
		report(ld, &mapping->start_mark, false, "missing required key \"%s\"", needed_path);
	else if (scalar_text(ld, needed_node, needed_path, "a string", false, &value) == 0)
		got = check_value(ld, needed_node, needed_path, V_NONE, value);
	free(needed_path);
	free(unused_path);
	if (env)
		name = value;
	else
		path = value;
	if (got < 0)
		goto out;

	if (env) {
		const char *secret = getenv(name);
		if (!secret || !*secret) {
			report_at(ld, mapping, "environment variable \"%s\" named by \"%s\" is %s", name,
				  keypath, secret ? "empty" : "not set");
			log_hint("export %s with the connection string before starting", name);
			goto out;
		}
		*out = xstrdup(secret);
		rc = 0;
		goto out;
	}
	if (read_small_file(path, SECRET_FILE_MAX_BYTES, &data, &len) < 0) {
		report_at(ld, mapping, "cannot read secret file \"%s\" named by \"%s\": %m", path, keypath);
		goto out;
	}
	while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == '\r'))
		data[--len] = '\0';
	if (len == 0 || memchr(data, '\0', len)) {
		report_at(ld, mapping, "secret file \"%s\" named by \"%s\" is %s", path, keypath,
			  len ? "not text (it has a NUL byte)" : "empty");
		goto out;
	}
	*out = data;
	data = NULL;
	rc = 0;
out:
	if (data) {
		explicit_bzero(data, len);
		free(data);
	}
	free(source);
	free(name);
	free(path);
	return rc;
}

/* ---- lists ---- */

/* "a, b" or [a, b] -> "a,b"; each name non-empty and a PostgreSQL name. */
static int parse_columns(const struct loader *ld, const yaml_node_t *node, const char *keypath,
			 char **out)
{
	size_t cap = 64, used = 0;
	char *joined = xmalloc(cap);
	joined[0] = '\0';
	int rc = -1;
	size_t n = node->type == YAML_SEQUENCE_NODE
			   ? (size_t)(node->data.sequence.items.top - node->data.sequence.items.start)
			   : 1;
	if (node->type == YAML_MAPPING_NODE) {
		report_type(ld, node, keypath, "a column name or a list of column names", false);
		goto out;
	}
	if (n == 0) {
		report_at(ld, node, "key \"%s\" must name at least one column", keypath);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const yaml_node_t *item = node->type == YAML_SEQUENCE_NODE
						  ? node_get(ld, node->data.sequence.items.start[i])
						  : node;
		char *item_path = node->type == YAML_SEQUENCE_NODE ? xasprintf("%s[%zu]", keypath, i)
								   : xstrdup(keypath);
		char *text = NULL;
		int got = scalar_text(ld, item, item_path, "a column name", false, &text);
		if (got == 0 && node->type == YAML_SEQUENCE_NODE && strchr(text, ',')) {
			report_at(ld, item, "key \"%s\" must be one column name, without \",\"", item_path);
			got = -1;
		}
		/* A string may list several names: "a, b". */
		for (char *part = text, *next; got == 0 && part; part = next) {
			next = strchr(part, ',');
			if (next)
				*next++ = '\0';
			while (*part == ' ')
				part++;
			size_t len = strlen(part);
			while (len > 0 && part[len - 1] == ' ')
				part[--len] = '\0';
			if (!*part) {
				report_at(ld, item, "key \"%s\" has an empty column name", item_path);
				got = -1;
				break;
			}
			got = check_value(ld, item, item_path, V_PG_NAME, part);
			if (got == 0) {
				if (used + len + 2 > cap)
					joined = xrealloc(joined, cap = 2 * (used + len + 2));
				used += (size_t)snprintf(joined + used, cap - used, "%s%s", used ? "," : "", part);
			}
		}
		free(text);
		free(item_path);
		if (got < 0)
			goto out;
	}
	*out = joined;
	joined = NULL;
	rc = 0;
out:
	free(joined);
	return rc;
}

static int parse_string_list(const struct loader *ld, const struct field *f, const yaml_node_t *node,
			     const char *keypath, void *base)
{
	char ***items = (char ***)((char *)base + f->offset);
	size_t *count = (size_t *)((char *)base + f->count_offset);
	if (node->type != YAML_SEQUENCE_NODE) {
		report_type(ld, node, keypath, "a list of strings", false);
		return -1;
	}
	size_t n = (size_t)(node->data.sequence.items.top - node->data.sequence.items.start);
	if (n < f->min) {
		report_at(ld, node, "key \"%s\" must list at least %llu item%s", keypath,
			  (unsigned long long)f->min, f->min == 1 ? "" : "s");
		return -1;
	}
	for (size_t i = 0; i < *count; i++)
		free((*items)[i]);
	free(*items);
	*items = n ? xcalloc(n, sizeof **items) : NULL;
	*count = n;
	for (size_t i = 0; i < n; i++) {
		const yaml_node_t *item = node_get(ld, node->data.sequence.items.start[i]);
		char *item_path = xasprintf("%s[%zu]", keypath, i);
		int got = scalar_text(ld, item, item_path, "a string", false, &(*items)[i]);
		if (got == 0)
			got = check_value(ld, item, item_path, f->check, (*items)[i]);
		free(item_path);
		if (got < 0)
			return -1;
	}
	return 0;
}

static int parse_mapping(const struct loader *ld, const yaml_node_t *mapping,
			 const yaml_node_t *anchor, const char *prefix, const struct field *fields,
			 void *base);

static bool table_has_column(const struct table_config *table, const char *column)
{
	for (size_t i = 0; i < table->n_excluded_columns; i++)
		if (strcmp(table->excluded_columns[i], column) == 0)
			return true;
	return false;
}

static int parse_tables(const struct loader *ld, const struct field *f, const yaml_node_t *node,
			const char *keypath, struct flow_config *config)
{
	if (node->type != YAML_SEQUENCE_NODE) {
		report_type(ld, node, keypath, "a list of tables", false);
		return -1;
	}
	size_t n = (size_t)(node->data.sequence.items.top - node->data.sequence.items.start);
	if (n == 0) {
		report_at(ld, node, "key \"%s\" must list at least one table", keypath);
		return -1;
	}
	config->tables = xcalloc(n, sizeof *config->tables);
	config->n_tables = n;
	for (size_t i = 0; i < n; i++) {
		const yaml_node_t *item = node_get(ld, node->data.sequence.items.start[i]);
		struct table_config *table = &config->tables[i];
		char *item_path = xasprintf("%s[%zu]", keypath, i);
		int got = 0;
		if (item->type != YAML_MAPPING_NODE) {
			report_type(ld, item, item_path, "a mapping with schema and name", false);
			log_hint("write a table as {schema: public, name: accounts}");
			got = -1;
		}
		if (got == 0)
			got = parse_mapping(ld, item, item, item_path, f->children, table);
		for (size_t j = 0; got == 0 && j < i; j++) {
			if (strcmp(config->tables[j].schema, table->schema) == 0 &&
			    strcmp(config->tables[j].name, table->name) == 0) {
				report_at(ld, item, "table \"%s.%s\" is listed twice, in %s[%zu] and \"%s\"",
					  table->schema, table->name, keypath, j, item_path);
				got = -1;
			}
		}
		/* Excluding a key column would make the checksums meaningless. */
		char *pk = got == 0 && table->verify_primary_key ? xstrdup(table->verify_primary_key) : NULL;
		for (char *save = NULL, *column = pk ? strtok_r(pk, ",", &save) : NULL; column;
		     column = strtok_r(NULL, ",", &save)) {
			if (table_has_column(table, column)) {
				report_at(ld, item, "column \"%s\" of \"%s\" is both in verify.primary_key and verify.excluded_columns",
					  column, item_path);
				got = -1;
				break;
			}
		}
		free(pk);
		free(item_path);
		if (got < 0)
			return -1;
	}
	return 0;
}

/* ---- fields and mappings ---- */

static int parse_version(const struct loader *ld, const yaml_node_t *node, int *version)
{
	uint64_t value;
	if (scalar_uint(ld, node, "config_version", 0, 0, &value) < 0)
		return -1;
	if (value != 2) {
		report_at(ld, node, "unsupported config_version %llu (this Trellara reads version 2)",
			  (unsigned long long)value);
		if (value < 2)
			log_hint("see man 5 trellara.yml for the version 2 schema");
		return -1;
	}
	*version = 2;
	return 0;
}

static int parse_field(const struct loader *ld, const struct field *f, const yaml_node_t *key,
		       const yaml_node_t *value, const char *keypath, void *base)
{
	char *text = NULL;
	int rc = -1;

	if (is_null(value) && f->kind != K_SECTION) {
		if (f->required) {
			report_at(ld, key, "key \"%s\" has no value", keypath);
			return -1;
		}
		return 0; /* "key:" alone: the default */
	}
	switch (f->kind) {
	case K_VERSION:
		return parse_version(ld, value, (int *)((char *)base + f->offset));
	case K_STRING:
		if (scalar_text(ld, value, keypath, "a string", false, &text) < 0 ||
		    check_value(ld, value, keypath, f->check, text) < 0)
			goto out;
		set_string(base, f->offset, text);
		text = NULL;
		break;
	case K_SECRET:
		if (value->type == YAML_MAPPING_NODE) {
			if (resolve_secret(ld, value, keypath, &text) < 0)
				goto out;
		} else if (value->type == YAML_SCALAR_NODE) {
			if (scalar_text(ld, value, keypath, "a string", true, &text) < 0)
				goto out;
			if (!*text) {
				report_at(ld, value, "key \"%s\" must not be empty", keypath);
				goto out;
			}
		} else {
			report_type(ld, value, keypath,
				    "a connection string or a secret reference mapping", true);
			goto out;
		}
		set_string(base, f->offset, text);
		text = NULL;
		break;
	case K_UINT: {
		uint64_t number;
		if (scalar_uint(ld, value, keypath, f->min, f->max, &number) < 0)
			goto out;
		*(uint64_t *)((char *)base + f->offset) = number;
		break;
	}
	case K_INT: {
		uint64_t number;
		if (scalar_uint(ld, value, keypath, f->min, f->max, &number) < 0)
			goto out;
		*(int *)((char *)base + f->offset) = (int)number;
		break;
	}
	case K_BOOL:
		if (scalar_bool(ld, value, keypath, (bool *)((char *)base + f->offset)) < 0)
			goto out;
		break;
	case K_CHOICE:
		if (scalar_text(ld, value, keypath, "a string", false, &text) < 0)
			goto out;
		if (f->later && strcmp(text, f->later) == 0) {
			report_at(ld, value, "key \"%s\": \"%s\" is not supported yet by this implementation",
				  keypath, text);
			log_hint("use %s: %s", f->name, f->choice);
			goto out;
		}
		if (strcmp(text, f->choice) != 0) {
			char *shown = describe(value, false);
			report_at(ld, value, "key \"%s\" must be \"%s\", got %s", keypath, f->choice, shown);
			free(shown);
			goto out;
		}
		break;
	case K_SECTION:
		if (is_null(value)) {
			/* "section:" with every key commented out: empty. */
			if (parse_mapping(ld, NULL, value, keypath, f->children, base) < 0)
				goto out;
		} else if (value->type != YAML_MAPPING_NODE) {
			report_type(ld, value, keypath, "a mapping", false);
			goto out;
		} else if (parse_mapping(ld, value, value, keypath, f->children, base) < 0) {
			goto out;
		}
		if (f->presence)
			*(bool *)((char *)base + f->offset) = true;
		if (f->post && f->post(ld, value, keypath, base) < 0)
			goto out;
		break;
	case K_STRING_LIST:
		if (parse_string_list(ld, f, value, keypath, base) < 0)
			goto out;
		break;
	case K_COLUMNS:
		if (parse_columns(ld, value, keypath, &text) < 0)
			goto out;
		set_string(base, f->offset, text);
		text = NULL;
		break;
	case K_TABLES:
		if (parse_tables(ld, f, value, keypath, base) < 0)
			goto out;
		break;
	}
	rc = 0;
out:
	free(text);
	return rc;
}

/*
 * Check mapping's keys, then read each field in schema order.  mapping
 * may be NULL (an empty section); anchor is where "missing key" points.
 */
static int parse_mapping(const struct loader *ld, const yaml_node_t *mapping,
			 const yaml_node_t *anchor, const char *prefix, const struct field *fields,
			 void *base)
{
	if (mapping && check_keys(ld, mapping, prefix, fields) < 0)
		return -1;
	for (const struct field *f = fields; f->name; f++) {
		yaml_node_t *key = NULL;
		yaml_node_t *value = mapping_value(ld, mapping, f->name, &key);
		char *keypath = key_path(prefix, f->name);
		int rc = 0;
		if (value)
			rc = parse_field(ld, f, key, value, keypath, base);
		else if (f->required) {
			report(ld, &anchor->start_mark, false, "missing required key \"%s\"", keypath);
			if (f->kind == K_VERSION)
				log_hint("a flow file starts with \"config_version: 2\"");
			rc = -1;
		}
		free(keypath);
		if (rc < 0)
			return -1;
	}
	return 0;
}

static int check_pgoutput(const struct loader *ld, const yaml_node_t *mapping,
			  const char *keypath, void *base)
{
	const struct flow_config *config = base;
	if (config->pgoutput_streaming && config->pgoutput_protocol_version < 2) {
		report(ld, &mapping->start_mark, false,
		       "key \"%s.streaming\" needs protocol_version 2, but protocol_version is %d",
		       keypath, config->pgoutput_protocol_version);
		log_hint("set %s.streaming: false to use protocol_version 1", keypath);
		return -1;
	}
	return 0;
}

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
		report(ld, &mark, true, "not valid YAML: %s (%s at line %zu, column %zu)", problem,
		       parser->context, parser->context_mark.line + 1, parser->context_mark.column + 1);
	else
		report(ld, &mark, true, "not valid YAML: %s", problem);
	if (parser->error != YAML_READER_ERROR && mark.index < strlen(data) && data[mark.index] == '\t')
		log_hint("indent with spaces; YAML does not allow tabs there");
	else
		log_hint("a flow file is YAML (\"key: value\" lines), see man 5 trellara.yml");
}

static void set_defaults(struct flow_config *config)
{
	config->wal_retention_warn_bytes = DEFAULT_WAL_RETENTION_WARN_BYTES;
	config->stream_spill_threshold_changes = DEFAULT_SPILL_THRESHOLD_CHANGES;
	config->pgoutput_protocol_version = DEFAULT_PROTOCOL_VERSION;
	config->pgoutput_streaming = true;
	config->mode = DATASET_STRICT_TRANSACTION_ORDER;
	config->max_changes_per_chunk = DEFAULT_MAX_CHANGES_PER_CHUNK;
	config->durability = STREAM_DURABILITY_FSYNC;
	config->segment_bytes = DEFAULT_SEGMENT_BYTES;
	config->max_batch_transactions = DEFAULT_MAX_BATCH_TRANSACTIONS;
	config->max_batch_messages = DEFAULT_MAX_BATCH_MESSAGES;
	config->min_free_bytes = DEFAULT_MIN_FREE_BYTES;
	config->snapshot_workers = DEFAULT_SNAPSHOT_WORKERS;
	config->apply_batch_transactions = DEFAULT_APPLY_BATCH_TRANSACTIONS;
}

/* Defaults that depend on other keys or are strings. */
static void set_late_defaults(struct flow_config *config)
{
	if (!config->stream_spill_dir)
		config->stream_spill_dir = xstrdup(DEFAULT_STREAM_SPILL_DIR);
	if (!config->checkpoint_schema)
		config->checkpoint_schema = xstrdup(DEFAULT_CHECKPOINT_SCHEMA);
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

	if (read_small_file(path, FLOW_FILE_MAX_BYTES, &data, &len) < 0) {
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
		report(&ld, &extra.start_mark, false, "more than one YAML document (\"---\")");
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
		char *got = describe(root, true);
		report_at(&ld, root, "the top level must be a mapping (\"key: value\" lines), got %s", got);
		free(got);
		goto out;
	}
	/* The version first: a newer file has keys this one does not know. */
	yaml_node_t *version = mapping_value(&ld, root, "config_version", NULL);
	if (version && parse_version(&ld, version, &config->config_version) < 0)
		goto out;
	if (parse_mapping(&ld, root, root, "", root_fields, config) < 0)
		goto out;
	set_late_defaults(config);
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

static void free_secret(char *secret)
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
	free_secret(config->source_database_url);
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
	free(config->stream_path);
	free_strings(config->protected_groups, config->n_protected_groups);
	free_secret(config->target_database_url);
	free(config->checkpoint_schema);
	free(config->consumer_group);
	free(config->metrics_dir);
	memset(config, 0, sizeof *config);
}

char *config_flow_id(const struct flow_config *config)
{
	return xasprintf("%s:%s", config->source_id, config->dataset_id);
}
