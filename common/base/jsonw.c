/*
 * jsonw.c - the streaming JSON writer (contract in jsonw.h).
 */
#include "trellara/jsonw.h"

#include "trellara/lsn.h"
#include "trellara/textcodec.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void jsonw_init(struct jsonw *w, FILE *out, bool spaced)
{
	memset(w, 0, sizeof *w);
	w->out = out;
	w->spaced = spaced;
}

void jsonw_key(struct jsonw *w, const char *key)
{
	if (w->keyed) {
		w->keyed = false; /* jsonw_keyn wrote the comma and the key */
		return;
	}
	if (w->comma[w->depth])
		fputs(w->spaced ? ", " : ",", w->out);
	w->comma[w->depth] = true;
	if (key) {
		json_write_string(w->out, key, strlen(key));
		fputs(w->spaced ? ": " : ":", w->out);
	}
}

void jsonw_keyn(struct jsonw *w, const char *key, size_t len)
{
	jsonw_key(w, NULL);
	json_write_string(w->out, key, len);
	fputs(w->spaced ? ": " : ":", w->out);
	w->keyed = true;
}

void jsonw_open(struct jsonw *w, const char *key, char bracket)
{
	jsonw_key(w, key);
	fputc(bracket, w->out);
	if (w->depth < JSONW_MAX_DEPTH - 1)
		w->depth++;
	w->comma[w->depth] = false;
}

void jsonw_close(struct jsonw *w, char bracket)
{
	if (w->depth > 0)
		w->depth--;
	fputc(bracket, w->out);
}

void jsonw_str(struct jsonw *w, const char *key, const char *value)
{
	jsonw_key(w, key);
	if (value)
		json_write_string(w->out, value, strlen(value));
	else
		fputs("null", w->out);
}

void jsonw_strn(struct jsonw *w, const char *key, const char *value, size_t len)
{
	jsonw_key(w, key);
	json_write_string(w->out, value, len);
}

void jsonw_bool(struct jsonw *w, const char *key, bool value)
{
	jsonw_key(w, key);
	fputs(value ? "true" : "false", w->out);
}

void jsonw_null(struct jsonw *w, const char *key)
{
	jsonw_key(w, key);
	fputs("null", w->out);
}

void jsonw_u64(struct jsonw *w, const char *key, bool known, uint64_t value)
{
	jsonw_key(w, key);
	if (known)
		fprintf(w->out, "%" PRIu64, value);
	else
		fputs("null", w->out);
}

void jsonw_i64(struct jsonw *w, const char *key, bool known, int64_t value)
{
	jsonw_key(w, key);
	if (known)
		fprintf(w->out, "%" PRId64, value);
	else
		fputs("null", w->out);
}

void jsonw_num(struct jsonw *w, const char *key, bool known, double value)
{
	jsonw_key(w, key);
	if (known && isfinite(value))
		fprintf(w->out, "%.3f", value);
	else
		fputs("null", w->out);
}

void jsonw_lsn(struct jsonw *w, const char *key, bool known, uint64_t lsn)
{
	char buf[LSN_FORMAT_LEN];
	jsonw_str(w, key, known ? lsn_format(lsn, buf) : NULL);
}

void jsonw_text(struct jsonw *w, const char *key, const char *value)
{
	if (!value) {
		jsonw_null(w, key);
		return;
	}
	char *valid = utf8_repair(value, strlen(value));
	jsonw_str(w, key, valid);
	free(valid);
}

int jsonw_finish(struct jsonw *w)
{
	if (w->depth != 0)
		return -1;
	if (fflush(w->out) != 0 || ferror(w->out))
		return -1;
	return 0;
}
