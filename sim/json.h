/*
 * json.h - the simulator's JSON: a streaming writer for its run files and
 * a small strict parser (RFC 8259) that reads them back into a tree for
 * `trellara chaos report`.
 *
 * Writer.  Tracks nesting and commas; strings are escaped completely
 * (quote, backslash, every control character, and any byte that is not
 * part of valid UTF-8 becomes \ufffd), so the output is always valid
 * JSON in UTF-8.  Integers are written exactly; doubles with 3 decimals
 * (null when not finite).  jw_finish reports misuse (unbalanced nesting,
 * too deep) and write errors.
 *
 * Parser.  One value, optional surrounding whitespace, nothing after it;
 * no comments, no trailing commas, no leading zeros, no lone surrogates,
 * strings in valid UTF-8 without NUL, nesting at most JSON_MAX_DEPTH.
 * A failure names the problem and the byte offset where it was found
 * (json_parse fills struct json_error).  Numbers keep their text and, when
 * they are integers that fit, their value as int64 / uint64.
 *
 * Owns.  The tree json_parse returns (json_free releases it).  No I/O in
 * the parser, no globals, no libpq.
 */
#ifndef TRELLARA_SIM_JSON_H
#define TRELLARA_SIM_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 64

/* ---- writer ---- */

struct json_writer {
	FILE *out;
	int depth;
	bool comma[JSON_MAX_DEPTH + 1];
	char kind[JSON_MAX_DEPTH + 1]; /* '{' or '[' per open level */
	bool misuse;
};

void jw_init(struct json_writer *w, FILE *out);
/* key: the member name inside an object, NULL inside an array or at the
 * top level. */
void jw_object(struct json_writer *w, const char *key);
void jw_array(struct json_writer *w, const char *key);
void jw_end(struct json_writer *w);
/* value NULL writes null */
void jw_string(struct json_writer *w, const char *key, const char *value);
void jw_string_len(struct json_writer *w, const char *key, const char *value, size_t len);
void jw_int(struct json_writer *w, const char *key, int64_t value);
void jw_uint(struct json_writer *w, const char *key, uint64_t value);
void jw_double(struct json_writer *w, const char *key, double value);
void jw_bool(struct json_writer *w, const char *key, bool value);
void jw_null(struct json_writer *w, const char *key);
/* 0 when the document is complete and every write succeeded, -1 otherwise. */
int jw_finish(struct json_writer *w);

/* ---- parser ---- */

enum json_type { JSON_NULL, JSON_FALSE, JSON_TRUE, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

struct json_value {
	enum json_type type;
	size_t offset; /* where the value starts in the input */
	/* JSON_STRING: decoded text (owned, NUL-terminated); JSON_NUMBER:
	 * the number as written (owned) */
	char *text;
	size_t len;
	bool is_int;  /* an integer that fits int64 */
	bool is_uint; /* a non-negative integer that fits uint64 */
	int64_t i;
	uint64_t u;
	/* JSON_ARRAY / JSON_OBJECT: n items (owned); keys[] for objects (owned) */
	struct json_value **items;
	char **keys;
	size_t n;
};

struct json_error {
	size_t offset; /* byte offset of the problem in the input */
	char message[128];
};

/* Parses len bytes of text; NULL on failure with *err filled. */
struct json_value *json_parse(const char *text, size_t len, struct json_error *err);
void json_free(struct json_value *v);

/* Lookups (NULL when absent or of another type). */
const struct json_value *json_get(const struct json_value *obj, const char *key);
const char *json_get_string(const struct json_value *obj, const char *key);
bool json_get_uint(const struct json_value *obj, const char *key, uint64_t *out);
const struct json_value *json_get_type(const struct json_value *obj, const char *key, enum json_type type);
const char *json_type_name(enum json_type type);

#endif
