/*
 * jsonw.h - the one JSON writer of the programs' --format json output,
 * the JSON log lines (log.c) and the stream's frame payloads (envelope.c):
 * a streaming writer onto a FILE that tracks whether a comma is due,
 * escapes every string (json_write_string of textcodec.h, the one escaper)
 * and prints unknown values as null, never 0.
 *
 * Each value function takes the member's key, or NULL inside an array.
 * Numbers: integers in full ("%" PRIu64 / PRId64), reals with three
 * decimals ("%.3f", null when not finite), LSNs as "X/X" strings.
 * Nesting is at most JSONW_MAX_DEPTH levels.  The writer owns nothing
 * (out is borrowed) and does not check stdio errors: the caller checks
 * ferror/fflush once at the end, as for any other output.
 *
 * A writer set up with spaced = true puts a space after every ":" and
 * ","; (trellara-check's output has always looked like that).
 */
#ifndef TRELLARA_JSONW_H
#define TRELLARA_JSONW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JSONW_MAX_DEPTH 16

struct jsonw {
	FILE *out; /* borrowed */
	bool spaced;
	bool comma[JSONW_MAX_DEPTH];
	int depth;
	bool keyed; /* jsonw_keyn wrote the key: the next value has none */
};

void jsonw_init(struct jsonw *w, FILE *out, bool spaced);
/* Writes the comma due and, when key is not NULL, "key":. */
void jsonw_key(struct jsonw *w, const char *key);
/* The same for a key of len bytes (no NUL needed), for keys that are not
 * C strings; the value that follows is then written with key NULL. */
void jsonw_keyn(struct jsonw *w, const char *key, size_t len);
/* Opens an object ('{') or an array ('['); jsonw_close ends it ('}', ']'). */
void jsonw_open(struct jsonw *w, const char *key, char bracket);
void jsonw_close(struct jsonw *w, char bracket);
/* value NULL prints null */
void jsonw_str(struct jsonw *w, const char *key, const char *value);
/* len bytes at value (no NUL needed; bytes holding NUL are escaped) */
void jsonw_strn(struct jsonw *w, const char *key, const char *value, size_t len);
void jsonw_bool(struct jsonw *w, const char *key, bool value);
void jsonw_null(struct jsonw *w, const char *key);
void jsonw_u64(struct jsonw *w, const char *key, bool known, uint64_t value);
void jsonw_i64(struct jsonw *w, const char *key, bool known, int64_t value);
void jsonw_num(struct jsonw *w, const char *key, bool known, double value);
void jsonw_lsn(struct jsonw *w, const char *key, bool known, uint64_t lsn);

/* jsonw_str for text that may hold bytes that are not UTF-8 (a message
 * cut at a buffer's end): each such byte is written as U+FFFD
 * (utf8_repair of textcodec.h), so the document stays valid UTF-8. */
void jsonw_text(struct jsonw *w, const char *key, const char *value);
/* After the last value: 0 when every object and array opened was closed
 * (within JSONW_MAX_DEPTH) and the stream took every byte (fflush, then
 * ferror), -1 otherwise.  For writers that want one answer at the end. */
int jsonw_finish(struct jsonw *w);

#endif
