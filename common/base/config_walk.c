/*
 * config_walk.c - the flow file's YAML walker: libyaml's node tree, read
 * one field at a time as the schema's tables (config_schema.c) say,
 * checking types and filling struct flow_config.  The walk stops at the
 * first error, logged once with the file, line, column and dotted key
 * path.
 */
#include "config_internal.h"

#include "trellara/log.h"
#include "trellara/xalloc.h"
#include "trellara/conninfo.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHOWN_VALUE_MAX 60

/* ---- messages ---- */


/* The one error line: flow file "PATH": line L[, column C]: message. */
void config_report(const struct loader *ld, const yaml_mark_t *mark, bool column, const char *fmt, ...)
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

char *config_key_path(const char *prefix, const char *key)
{
	return *prefix ? xasprintf("%s.%s", prefix, key) : xstrdup(key);
}

/* A scalar fit to print: control bytes as "?", long ones cut, a possible
 * connection string masked.  Newly allocated. */
char *config_shown_text(const char *text, size_t len, bool maybe_secret)
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
char *config_describe(const yaml_node_t *node, bool maybe_secret)
{
	switch (node->type) {
	case YAML_MAPPING_NODE:
		return xstrdup("a mapping");
	case YAML_SEQUENCE_NODE:
		return xstrdup("a list");
	case YAML_SCALAR_NODE:
		return config_shown_text((const char *)node->data.scalar.value, node->data.scalar.length, maybe_secret);
	default:
		return xstrdup("nothing");
	}
}

void config_report_type(const struct loader *ld, const yaml_node_t *node, const char *keypath, const char *expected,
			bool maybe_secret)
{
	char *got = config_describe(node, maybe_secret);
	bool quoted = node->type == YAML_SCALAR_NODE && node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
	report_at(ld, node, "key \"%s\" must be %s, got %s%s", keypath, expected, got,
		  quoted ? " (quoted, so a string)" : "");
	free(got);
}

/* ---- nodes ---- */

yaml_node_t *config_node_get(const struct loader *ld, int index)
{
	return yaml_document_get_node(ld->doc, index);
}

bool config_scalar_is(const yaml_node_t *node, const char *text)
{
	size_t len = strlen(text);
	return node->type == YAML_SCALAR_NODE && node->data.scalar.length == len &&
	       memcmp(node->data.scalar.value, text, len) == 0;
}

/* An empty value, "~" or "null" (plain): the key is there with no value. */
bool config_is_null(const yaml_node_t *node)
{
	if (node->type != YAML_SCALAR_NODE || node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	return node->data.scalar.length == 0 || config_scalar_is(node, "~") || config_scalar_is(node, "null") ||
	       config_scalar_is(node, "Null") || config_scalar_is(node, "NULL");
}

/* The value of key in mapping (the first one), or NULL. */
yaml_node_t *config_mapping_value(const struct loader *ld, const yaml_node_t *mapping, const char *key,
				  yaml_node_t **key_node)
{
	if (!mapping || mapping->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *pair = mapping->data.mapping.pairs.start;
	     pair < mapping->data.mapping.pairs.top; pair++) {
		yaml_node_t *k = config_node_get(ld, pair->key);
		if (k && config_scalar_is(k, key)) {
			if (key_node)
				*key_node = k;
			return config_node_get(ld, pair->value);
		}
	}
	return NULL;
}

/* ---- scalar values ---- */

/* A scalar's text as a new C string; NUL bytes inside are refused. */
int config_scalar_text(const struct loader *ld, const yaml_node_t *node, const char *keypath, const char *expected,
		       bool maybe_secret, char **text)
{
	if (node->type != YAML_SCALAR_NODE) {
		config_report_type(ld, node, keypath, expected, maybe_secret);
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

/* A plain (unquoted) non-negative decimal integer. */
static int scalar_uint(const struct loader *ld, const yaml_node_t *node, const char *keypath,
		       uint64_t min, uint64_t max, uint64_t *out)
{
	if (node->type != YAML_SCALAR_NODE || node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
		config_report_type(ld, node, keypath, "an integer", false);
		return -1;
	}
	const char *text = (const char *)node->data.scalar.value;
	size_t len = node->data.scalar.length;
	char *shown = config_shown_text(text, len, false);
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
	if (plain && (config_scalar_is(node, "true") || config_scalar_is(node, "yes"))) {
		*out = true;
		return 0;
	}
	if (plain && (config_scalar_is(node, "false") || config_scalar_is(node, "no"))) {
		*out = false;
		return 0;
	}
	config_report_type(ld, node, keypath, "true or false", false);
	return -1;
}

static void set_string(void *base, size_t offset, char *value)
{
	char **slot = (char **)((char *)base + offset);
	free(*slot);
	*slot = value;
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
		config_report_type(ld, node, keypath, "a column name or a list of column names", false);
		goto out;
	}
	if (n == 0) {
		report_at(ld, node, "key \"%s\" must name at least one column", keypath);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const yaml_node_t *item = node->type == YAML_SEQUENCE_NODE
						  ? config_node_get(ld, node->data.sequence.items.start[i])
						  : node;
		char *item_path = node->type == YAML_SEQUENCE_NODE ? xasprintf("%s[%zu]", keypath, i)
								   : xstrdup(keypath);
		char *text = NULL;
		int got = config_scalar_text(ld, item, item_path, "a column name", false, &text);
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
			got = config_check_value(ld, item, item_path, V_PG_NAME, part);
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

/* A connection string, or a secret reference mapping resolved now:
 * *text (a secret: the caller zeroes it), *file the file of a
 * {source: file} reference or NULL. */
static int parse_secret(const struct loader *ld, const yaml_node_t *value, const char *keypath, char **text,
			char **file)
{
	*file = NULL;
	if (value->type == YAML_MAPPING_NODE)
		return config_resolve_secret(ld, value, keypath, text, file);
	if (value->type != YAML_SCALAR_NODE) {
		config_report_type(ld, value, keypath, "a connection string or a secret reference mapping", true);
		return -1;
	}
	if (config_scalar_text(ld, value, keypath, "a string", true, text) < 0)
		return -1;
	if (!**text) {
		report_at(ld, value, "key \"%s\" must not be empty", keypath);
		free(*text);
		*text = NULL;
		return -1;
	}
	return 0;
}

/* K_STRING_LIST, or K_SECRET_LIST: connection strings or secret
 * references (source.standby_database_urls), their texts masked. */
static int parse_string_list(const struct loader *ld, const struct field *f, const yaml_node_t *node,
			     const char *keypath, void *base)
{
	char ***items = (char ***)((char *)base + f->offset);
	size_t *count = (size_t *)((char *)base + f->count_offset);
	bool secrets = f->kind == K_SECRET_LIST;
	if (node->type != YAML_SEQUENCE_NODE) {
		config_report_type(ld, node, keypath,
				   secrets ? "a list of connection strings or secret references" : "a list of strings", secrets);
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
		const yaml_node_t *item = config_node_get(ld, node->data.sequence.items.start[i]);
		char *item_path = xasprintf("%s[%zu]", keypath, i), *file = NULL;
		int got = secrets ? parse_secret(ld, item, item_path, &(*items)[i], &file)
				  : config_scalar_text(ld, item, item_path, "a string", false, &(*items)[i]);
		free(file);
		if (got == 0)
			got = config_check_value(ld, item, item_path, f->check, (*items)[i]);
		for (size_t j = 0; got == 0 && f->unique && j < i; j++) {
			if (strcmp((*items)[j], (*items)[i]) == 0) {
				report_at(ld, item, "\"%s\" is listed twice, in %s[%zu] and \"%s\"", (*items)[i], keypath, j,
					  item_path);
				got = -1;
			}
		}
		free(item_path);
		if (got < 0)
			return -1;
	}
	return 0;
}

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
		config_report_type(ld, node, keypath, "a list of tables", false);
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
		const yaml_node_t *item = config_node_get(ld, node->data.sequence.items.start[i]);
		struct table_config *table = &config->tables[i];
		table->apply_compaction = true; /* the flow's apply.compaction decides when this is true */
		char *item_path = xasprintf("%s[%zu]", keypath, i);
		int got = 0;
		if (item->type != YAML_MAPPING_NODE) {
			config_report_type(ld, item, item_path, "a mapping with schema and name", false);
			log_hint("write a table as {schema: public, name: accounts}");
			got = -1;
		}
		if (got == 0)
			got = config_parse_mapping(ld, item, item, item_path, f->children, table);
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

int config_parse_version(const struct loader *ld, const yaml_node_t *node, int *version)
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

	if (config_is_null(value) && f->kind != K_SECTION) {
		if (f->required) {
			report_at(ld, key, "key \"%s\" has no value", keypath);
			return -1;
		}
		return 0; /* "key:" alone: the default */
	}
	switch (f->kind) {
	case K_VERSION:
		return config_parse_version(ld, value, (int *)((char *)base + f->offset));
	case K_STRING:
		if (config_scalar_text(ld, value, keypath, "a string", false, &text) < 0 ||
		    config_check_value(ld, value, keypath, f->check, text) < 0)
			goto out;
		set_string(base, f->offset, text);
		text = NULL;
		break;
	case K_SECRET: {
		char *file = NULL;
		if (parse_secret(ld, value, keypath, &text, &file) < 0)
			goto out;
		if (f->file_offset)
			set_string(base, f->file_offset, file);
		else
			free(file);
		set_string(base, f->offset, text);
		text = NULL;
		break;
	}
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
		if (config_scalar_text(ld, value, keypath, "a string", false, &text) < 0)
			goto out;
		if (f->later && strcmp(text, f->later) == 0) {
			report_at(ld, value, "key \"%s\": \"%s\" is not supported yet by this implementation",
				  keypath, text);
			log_hint("use %s: %s", f->name, f->choice);
			goto out;
		}
		if (strcmp(text, f->choice) != 0) {
			char *shown = config_describe(value, false);
			report_at(ld, value, "key \"%s\" must be \"%s\", got %s", keypath, f->choice, shown);
			free(shown);
			goto out;
		}
		break;
	case K_SECTION:
		if (config_is_null(value)) {
			/* "section:" with every key commented out: empty. */
			if (config_parse_mapping(ld, NULL, value, keypath, f->children, base) < 0)
				goto out;
		} else if (value->type != YAML_MAPPING_NODE) {
			config_report_type(ld, value, keypath, "a mapping", false);
			goto out;
		} else if (config_parse_mapping(ld, value, value, keypath, f->children, base) < 0) {
			goto out;
		}
		if (f->presence)
			*(bool *)((char *)base + f->offset) = true;
		if (f->post && f->post(ld, value, keypath, base) < 0)
			goto out;
		break;
	case K_STRING_LIST:
	case K_SECRET_LIST:
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
int config_parse_mapping(const struct loader *ld, const yaml_node_t *mapping, const yaml_node_t *anchor,
			 const char *prefix, const struct field *fields, void *base)
{
	if (mapping && config_check_keys(ld, mapping, prefix, fields) < 0)
		return -1;
	for (const struct field *f = fields; f->name; f++) {
		yaml_node_t *key = NULL;
		yaml_node_t *value = config_mapping_value(ld, mapping, f->name, &key);
		char *keypath = config_key_path(prefix, f->name);
		int rc = 0;
		if (value)
			rc = parse_field(ld, f, key, value, keypath, base);
		else if (f->required) {
			config_report(ld, &anchor->start_mark, false, "missing required key \"%s\"", keypath);
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
