/*
 * config_internal.h - what the flow-file loader's modules share and
 * nobody else uses (the public contract is trellara/config.h):
 *
 *   config_schema.c  the key tables (config_root_fields), value checks, unknown
 *                    and duplicate keys with their suggestions
 *   config_walk.c    the YAML walker: nodes, messages, scalars, lists,
 *                    one field and one mapping driven by the tables
 *   config_secret.c  secret references ({source: environment_variable |
 *                    file}) and reading a small file whole
 *   config.c         config_load / config_free / config_flow_id, and one
 *                    scalar by its key path (config_get_scalar) from the
 *                    tables
 *
 * Every function here that fails logs its error once (flow file, line,
 * column, dotted key path) and returns -1; text it returns is newly
 * allocated and the caller's to free.
 */
#ifndef TRELLARA_CONFIG_INTERNAL_H
#define TRELLARA_CONFIG_INTERNAL_H

#include "trellara/config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

enum field_kind {
	K_VERSION,     /* config_version: integer, must be 2 */
	K_STRING,      /* non-empty string */
	K_SECRET,      /* connection string or secret reference */
	K_SECRET_LIST, /* list of K_SECRET values: char ** at .offset, size_t at .count_offset */
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
	V_QUALIFIED_NAME, /* "schema.name": two PostgreSQL names joined by one "." */
	V_NATS_URL,       /* nats://HOST:PORT (or tls://) */
	V_JETSTREAM_NAME, /* a JetStream stream name: no spaces, ".", "*", ">", "/" or "\\" */
	V_NATS_SUBJECT,   /* a subject to publish to: dot-separated tokens, no wildcards */
};

struct loader;

struct field {
	const char *name;
	enum field_kind kind;
	bool required;
	size_t offset;       /* into the base struct (K_SECTION: presence flag) */
	size_t count_offset; /* K_STRING_LIST, K_SECRET_LIST */
	bool presence;       /* K_SECTION: set the bool at .offset when present */
	uint64_t min, max;   /* K_UINT, K_INT; max 0 = none; K_STRING_LIST: min items */
	bool unique;         /* K_STRING_LIST: an item may be listed once */
	enum value_check check;
	const char *choice;  /* K_CHOICE: the accepted value */
	const char *later;   /* K_CHOICE: a schema-valid value this implementation refuses (exit 78) */
	const struct field *children; /* K_SECTION, K_TABLES */
	size_t file_offset;  /* K_SECRET: where the path of a {source: file} reference goes (0: nowhere) */
	/* K_SECTION: checks across the section's keys once it is read. */
	int (*post)(const struct loader *ld, const yaml_node_t *mapping, const char *keypath,
		    void *base);
};

struct loader {
	const char *path; /* the flow file, for messages */
	yaml_document_t *doc;
};

/* The schema's top-level table (config_schema.c). */
extern const struct field config_root_fields[];

/* ---- messages (config_walk.c) ---- */

void config_report(const struct loader *ld, const yaml_mark_t *mark, bool column, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
#define report_at(ld, node, ...) config_report((ld), &(node)->start_mark, true, __VA_ARGS__)
/* "prefix.key", or key at the top level.  Newly allocated. */
char *config_key_path(const char *prefix, const char *key);
/* A scalar fit to print: control bytes as "?", long ones cut, a possible
 * connection string masked.  Newly allocated. */
char *config_shown_text(const char *text, size_t len, bool maybe_secret);
/* What a node is, for "must be X, got Y".  Newly allocated. */
char *config_describe(const yaml_node_t *node, bool maybe_secret);
void config_report_type(const struct loader *ld, const yaml_node_t *node, const char *keypath, const char *expected,
			bool maybe_secret);

/* ---- nodes (config_walk.c) ---- */

yaml_node_t *config_node_get(const struct loader *ld, int index);
bool config_scalar_is(const yaml_node_t *node, const char *text);
/* An empty value, "~" or "null" (plain): the key is there with no value. */
bool config_is_null(const yaml_node_t *node);
/* The value of key in mapping (the first one), or NULL; *key_node (when
 * key_node is not NULL) is set to its key. */
yaml_node_t *config_mapping_value(const struct loader *ld, const yaml_node_t *mapping, const char *key,
				  yaml_node_t **key_node);
/* A scalar's text as a new C string (*text); NUL bytes inside are refused. */
int config_scalar_text(const struct loader *ld, const yaml_node_t *node, const char *keypath, const char *expected,
		       bool maybe_secret, char **text);

/* ---- the walk (config_walk.c) ---- */

/* config_version: must be 2. */
int config_parse_version(const struct loader *ld, const yaml_node_t *node, int *version);
/* Check mapping's keys, then read each field in schema order into base.
 * mapping may be NULL (an empty section); anchor is where "missing key"
 * points. */
int config_parse_mapping(const struct loader *ld, const yaml_node_t *mapping, const yaml_node_t *anchor,
			 const char *prefix, const struct field *fields, void *base);

/* ---- validation (config_schema.c) ---- */

/* Keys must be strings, known to fields, and appear once. */
int config_check_keys(const struct loader *ld, const yaml_node_t *mapping, const char *prefix,
		      const struct field *fields);
/* value must be non-empty and pass check. */
int config_check_value(const struct loader *ld, const yaml_node_t *node, const char *keypath,
		       enum value_check check, const char *value);

/* ---- secrets (config_secret.c) ---- */

/* Read a small file whole (*data NUL-terminated, newly allocated, *len
 * bytes); more than limit bytes fails with EFBIG.  errno tells why on
 * failure.  No logging. */
int config_read_small_file(const char *path, size_t limit, char **data, size_t *len);
/* A secret reference mapping at keypath -> the secret (*out, newly
 * allocated; the caller wipes it before freeing). */
int config_resolve_secret(const struct loader *ld, const yaml_node_t *mapping, const char *keypath, char **out,
			  char **file_out);

#endif
