/*
 * conninfo.c - mask the secrets in libpq connection strings.
 *
 * The rule is "mask at least what libpq would read as a secret": where a
 * malformed string is ambiguous (an unencoded "@", "/" or "?" inside a
 * password) we mask the larger span, because printing a little less of a
 * host name is harmless and printing part of a password is not.  Well-formed
 * strings come back byte-identical except for the secret values.
 */
#include "trellara/conninfo.h"

#include "trellara/xalloc.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MASK "***"

/* A replacement of s[start, end): by MASK, or by an owned string. */
struct edit {
	size_t start, end;
	char *replacement; /* owned; NULL means MASK */
};

struct edits {
	struct edit *items; /* owned */
	size_t n, cap;
};

static void edits_add(struct edits *edits, size_t start, size_t end, char *replacement)
{
	if (edits->n == edits->cap) {
		edits->cap = edits->cap ? 2 * edits->cap : 8;
		edits->items = xrealloc(edits->items, edits->cap * sizeof *edits->items);
	}
	edits->items[edits->n++] = (struct edit){ start, end, replacement };
}

static int edit_compare(const void *a, const void *b)
{
	const struct edit *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* Copy s with the edits applied; overlapping edits merge into one MASK.
 * Frees the edits. */
static char *edits_apply(const char *s, struct edits *edits)
{
	size_t len = strlen(s), cap = len + 1, used = 0, pos = 0;
	char *out = xmalloc(cap);
	if (edits->n > 1)
		qsort(edits->items, edits->n, sizeof *edits->items, edit_compare);
	for (size_t i = 0; i < edits->n; i++) {
		struct edit *edit = &edits->items[i];
		size_t end = edit->end;
		char *replacement = edit->replacement;
		while (i + 1 < edits->n && edits->items[i + 1].start < end) {
			/* Overlap only happens on malformed input: mask the union. */
			i++;
			if (edits->items[i].end > end)
				end = edits->items[i].end;
			free(edits->items[i].replacement);
			free(replacement);
			replacement = NULL;
		}
		const char *text = replacement ? replacement : MASK;
		size_t text_len = strlen(text), keep = edit->start - pos;
		if (used + keep + text_len + 1 > cap) {
			cap = used + keep + text_len + (len - end) + 1;
			out = xrealloc(out, cap);
		}
		memcpy(out + used, s + pos, keep);
		used += keep;
		memcpy(out + used, text, text_len);
		used += text_len;
		pos = end;
		free(replacement);
	}
	if (used + (len - pos) + 1 > cap)
		out = xrealloc(out, used + (len - pos) + 1);
	memcpy(out + used, s + pos, len - pos);
	used += len - pos;
	out[used] = '\0';
	free(edits->items);
	edits->items = NULL;
	edits->n = edits->cap = 0;
	return out;
}

/* Keywords whose values are secrets (libpq's "password" and the SSL key's
 * "sslpassword").  libpq matches keywords case-sensitively; we do not,
 * so a misspelt-case keyword is masked too. */
static bool is_secret_keyword(const char *name, size_t len)
{
	return (len == 8 && strncasecmp(name, "password", 8) == 0) ||
	       (len == 11 && strncasecmp(name, "sslpassword", 11) == 0);
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Is the percent-encoded s[0, len) a secret keyword once decoded? */
static bool is_secret_encoded_keyword(const char *s, size_t len)
{
	char decoded[16];
	size_t n = 0;
	for (size_t i = 0; i < len; i++) {
		if (n == sizeof decoded)
			return false;
		if (s[i] == '%' && i + 2 < len && hex_value(s[i + 1]) >= 0 &&
		    hex_value(s[i + 2]) >= 0) {
			decoded[n++] = (char)(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
			i += 2;
		} else {
			decoded[n++] = s[i];
		}
	}
	return is_secret_keyword(decoded, n);
}

static size_t uri_prefix_length(const char *s)
{
	if (strncasecmp(s, "postgresql://", 13) == 0)
		return 13;
	if (strncasecmp(s, "postgres://", 11) == 0)
		return 11;
	return 0;
}

/*
 * postgresql://[user[:password]@][host][:port][,...][/dbname][?param=value&...]
 *
 * libpq ends the user info at the first "@" before the first "/".  We take
 * the last "@" before the first "/" or, if later, the last "@" before the
 * first "?": an unencoded "@" or "/" in a password (base64 passwords have
 * "/") is then still masked whole.
 */
static void mask_uri(const char *s, size_t start, struct edits *edits)
{
	const char *rest = s + start;
	size_t slash = strcspn(rest, "/"), question = strcspn(rest, "?");
	size_t limit = slash > question ? slash : question;
	const char *at = NULL;
	for (size_t i = 0; i < limit; i++)
		if (rest[i] == '@')
			at = rest + i;
	if (at) {
		const char *colon = memchr(rest, ':', (size_t)(at - rest));
		if (colon)
			edits_add(edits, (size_t)(colon + 1 - s), (size_t)(at - s), NULL);
	}
	/* Query parameters: any "password=" right after a "?" or "&". */
	for (const char *p = rest; *p; p++) {
		if (*p != '?' && *p != '&')
			continue;
		const char *key = p + 1;
		size_t key_len = strcspn(key, "=&?#/@");
		if (key[key_len] != '=' || !is_secret_encoded_keyword(key, key_len))
			continue;
		const char *value = key + key_len + 1;
		size_t value_len = strcspn(value, "&");
		edits_add(edits, (size_t)(value - s), (size_t)(value + value_len - s), NULL);
	}
}

/* Unescape a key=value value (backslash escapes, no surrounding quotes). */
static char *kv_unescape(const char *raw, size_t len)
{
	char *out = xmalloc(len + 1);
	size_t n = 0;
	for (size_t i = 0; i < len; i++) {
		if (raw[i] == '\\' && i + 1 < len)
			i++;
		out[n++] = raw[i];
	}
	out[n] = '\0';
	return out;
}

static char *kv_quote(const char *value)
{
	size_t len = strlen(value), n = 0;
	char *out = xmalloc(2 * len + 3);
	out[n++] = '\'';
	for (size_t i = 0; i < len; i++) {
		if (value[i] == '\'' || value[i] == '\\')
			out[n++] = '\\';
		out[n++] = value[i];
	}
	out[n++] = '\'';
	out[n] = '\0';
	return out;
}

/*
 * keyword = value ..., with libpq's grammar: white space around "=",
 * values unquoted (to the next white space) or in single quotes, "\"
 * escaping the next character in both.  A dbname may itself be a
 * connection string (libpq expands it in PQconnectdbParams): mask inside.
 */
static void mask_keyword_value(const char *s, size_t start, struct edits *edits)
{
	const char *p = s + start;
	for (;;) {
		while (isspace((unsigned char)*p))
			p++;
		if (!*p)
			return;
		const char *keyword = p;
		while (*p && *p != '=' && !isspace((unsigned char)*p))
			p++;
		size_t keyword_len = (size_t)(p - keyword);
		while (isspace((unsigned char)*p))
			p++;
		bool secret = is_secret_keyword(keyword, keyword_len);
		bool dbname = keyword_len == 6 && strncmp(keyword, "dbname", 6) == 0;
		if (*p == '=') {
			p++;
			while (isspace((unsigned char)*p))
				p++;
		} else if (!secret || !*p) {
			continue; /* libpq rejects this; the next token is a keyword */
		}
		/* The value: its text is [value, value_end). */
		const char *value, *value_end;
		bool quoted = *p == '\'', terminated = false;
		if (quoted) {
			value = ++p;
			while (*p && *p != '\'') {
				if (*p == '\\' && p[1])
					p++;
				p++;
			}
			value_end = p;
			if (*p) {
				terminated = true;
				p++;
			}
		} else {
			value = p;
			while (*p && !isspace((unsigned char)*p)) {
				if (*p == '\\' && p[1])
					p++;
				p++;
			}
			value_end = p;
		}
		size_t from = (size_t)(value - s), to = (size_t)(value_end - s);
		if (secret) {
			edits_add(edits, from, to, NULL);
		} else if (dbname) {
			char *inner = kv_unescape(value, to - from);
			char *masked = conninfo_mask(inner);
			if (strcmp(inner, masked) != 0) {
				if (!memchr(value, '\\', to - from)) {
					/* No escapes: the masked text drops in as is
					 * and the rest stays byte-identical. */
					edits_add(edits, from, to, masked);
					masked = NULL;
				} else {
					/* Replace the whole value, quotes included,
					 * by a freshly quoted masked one. */
					char *requoted = kv_quote(masked);
					if (quoted)
						edits_add(edits, from - 1, to + terminated, requoted);
					else
						edits_add(edits, from, to, requoted);
				}
			}
			free(inner);
			free(masked);
		}
	}
}

char *conninfo_mask(const char *conninfo)
{
	if (!conninfo)
		return xstrdup("");
	struct edits edits = { 0 };
	size_t start = 0;
	while (isspace((unsigned char)conninfo[start]))
		start++;
	size_t prefix = uri_prefix_length(conninfo + start);
	if (prefix)
		mask_uri(conninfo, start + prefix, &edits);
	else
		mask_keyword_value(conninfo, start, &edits);
	return edits_apply(conninfo, &edits);
}
