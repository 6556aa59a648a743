/*
 * jsonread.h - the project's JSON reader: documents are written with
 * jsonw.h (every string through jsonw_text, so the file is valid UTF-8
 * whatever a message holds, and jsonw_finish says whether the document is
 * complete and was written); this is the small strict parser (RFC 8259)
 * that reads them back into a tree: the simulator's run files for
 * `trellara chaos report`, the schema contract's pin file.
 *
 * Parser.  One value, optional surrounding whitespace, nothing after it;
 * no comments, no trailing commas, no leading zeros, no lone surrogates,
 * strings in valid UTF-8 without NUL, nesting at most JSON_MAX_DEPTH.
 * A failure names the problem and the byte offset where it was found
 * (jsonread_parse fills struct json_error).  Numbers keep their text and, when
 * they are integers that fit, their value as int64 / uint64.
 *
 * Owns.  The tree jsonread_parse returns (jsonread_free releases it).  No I/O in
 * the parser, no globals, no libpq.
 */
#ifndef TRELLARA_JSONREAD_H
#define TRELLARA_JSONREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 64

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
struct json_value *jsonread_parse(const char *text, size_t len, struct json_error *err);
void jsonread_free(struct json_value *v);

/* Lookups (NULL when absent or of another type). */
const struct json_value *jsonread_get(const struct json_value *obj, const char *key);
const char *jsonread_get_string(const struct json_value *obj, const char *key);
bool jsonread_get_uint(const struct json_value *obj, const char *key, uint64_t *out);
const struct json_value *jsonread_get_type(const struct json_value *obj, const char *key, enum json_type type);
const char *jsonread_type_name(enum json_type type);

#endif
