/*
 * textcodec.h - base64 and the small JSON pieces the command-line tools
 * need: escaping strings for output, and parsing one flat JSON object of
 * string/number values per input line (trellara-stream append).
 */
#ifndef TRELLARA_TEXTCODEC_H
#define TRELLARA_TEXTCODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Standard base64 with padding; returns a new NUL-terminated string. */
char *base64_encode(const void *data, size_t len);
/* Strict decode (padding required, no whitespace); false on bad input.
 * *out is newly allocated. */
bool base64_decode(const char *text, uint8_t **out, size_t *out_len);

/* Write s (len bytes) as a JSON string literal, quotes included. */
void json_write_string(FILE *out, const char *s, size_t len);
/* True if the bytes are valid UTF-8 with no NUL. */
bool utf8_valid(const void *data, size_t len);
/* The length (1..4) of the one valid UTF-8 sequence at p, or 0 when the
 * bytes there are none (overlong, a surrogate, past U+10FFFF, cut short
 * by avail); avail > 0. */
size_t utf8_sequence_len(const void *p, size_t avail);
/* A copy of s (len bytes) in which every byte that is not part of a valid
 * UTF-8 sequence is U+FFFD: newly allocated, NUL-terminated. */
char *utf8_repair(const char *s, size_t len);

struct json_member {
	char *key;       /* owned */
	char *value;     /* owned: string value (decoded), or number text */
	size_t value_len;
	bool is_string;
};

struct json_object {
	struct json_member *members; /* owned */
	size_t n;
};

/* Parse one flat JSON object ({"k": "v", "n": 12, ...}); nested values
 * are refused.  On failure returns false and sets *error (static text)
 * and *error_at (byte position). */
bool json_parse_flat_object(const char *text, struct json_object *obj, const char **error,
			    size_t *error_at);
/* The member named key, or NULL. */
const struct json_member *json_flat_get(const struct json_object *obj, const char *key);
void json_object_free(struct json_object *obj);

#endif
