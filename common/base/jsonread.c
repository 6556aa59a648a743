/*
 * jsonread.c - the strict JSON parser (see jsonread.h).
 */
#include "trellara/jsonread.h"

#include "trellara/textcodec.h"
#include "trellara/xalloc.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- parser ---- */

struct parser {
	const unsigned char *p;
	size_t len;
	size_t pos;
	struct json_error *err;
	bool failed;
};

static void fail(struct parser *ps, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(struct parser *ps, size_t at, const char *fmt, ...)
{
	va_list ap;
	if (ps->failed)
		return;
	ps->failed = true;
	ps->err->offset = at;
	va_start(ap, fmt);
	vsnprintf(ps->err->message, sizeof ps->err->message, fmt, ap);
	va_end(ap);
}

static void skip_ws(struct parser *ps)
{
	while (ps->pos < ps->len) {
		unsigned char c = ps->p[ps->pos];
		if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
			break;
		ps->pos++;
	}
}

static struct json_value *new_value(enum json_type type, size_t offset)
{
	struct json_value *v = xcalloc(1, sizeof *v);
	v->type = type;
	v->offset = offset;
	return v;
}

static int hex4(struct parser *ps, uint32_t *out)
{
	uint32_t v = 0;
	if (ps->len - ps->pos < 4) {
		fail(ps, ps->pos, "truncated \\u escape");
		return -1;
	}
	for (int i = 0; i < 4; i++) {
		unsigned char c = ps->p[ps->pos + i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (uint32_t)(c - 'A' + 10);
		else {
			fail(ps, ps->pos + (size_t)i, "bad hex digit in \\u escape");
			return -1;
		}
	}
	ps->pos += 4;
	*out = v;
	return 0;
}

struct buf {
	char *s;
	size_t len, cap;
};

static void buf_add(struct buf *b, const void *data, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->s = xrealloc(b->s, b->cap);
	}
	memcpy(b->s + b->len, data, n);
	b->len += n;
	b->s[b->len] = '\0';
}

static void buf_add_utf8(struct buf *b, uint32_t cp)
{
	unsigned char u[4];
	size_t n;
	if (cp < 0x80) {
		u[0] = (unsigned char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (unsigned char)(0xc0 | (cp >> 6));
		u[1] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (unsigned char)(0xe0 | (cp >> 12));
		u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		u[2] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		u[0] = (unsigned char)(0xf0 | (cp >> 18));
		u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
		u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		u[3] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	buf_add(b, u, n);
}

/* A string at ps->pos (the opening quote); its decoded text in *out. */
static int parse_string(struct parser *ps, char **out, size_t *out_len)
{
	struct buf b = { 0 };
	size_t start = ps->pos;
	buf_add(&b, "", 0);
	ps->pos++; /* the quote */
	for (;;) {
		if (ps->pos >= ps->len) {
			fail(ps, start, "unterminated string");
			goto bad;
		}
		unsigned char c = ps->p[ps->pos];
		if (c == '"') {
			ps->pos++;
			break;
		}
		if (c < 0x20) {
			fail(ps, ps->pos, "control character 0x%02x in string (must be escaped)", c);
			goto bad;
		}
		if (c == '\\') {
			size_t esc = ps->pos;
			uint32_t cp, lo;
			if (++ps->pos >= ps->len) {
				fail(ps, esc, "truncated escape");
				goto bad;
			}
			c = ps->p[ps->pos++];
			switch (c) {
			case '"': buf_add(&b, "\"", 1); break;
			case '\\': buf_add(&b, "\\", 1); break;
			case '/': buf_add(&b, "/", 1); break;
			case 'b': buf_add(&b, "\b", 1); break;
			case 'f': buf_add(&b, "\f", 1); break;
			case 'n': buf_add(&b, "\n", 1); break;
			case 'r': buf_add(&b, "\r", 1); break;
			case 't': buf_add(&b, "\t", 1); break;
			case 'u':
				if (hex4(ps, &cp) < 0)
					goto bad;
				if (cp >= 0xdc00 && cp <= 0xdfff) {
					fail(ps, esc, "lone low surrogate \\u%04x", (unsigned)cp);
					goto bad;
				}
				if (cp >= 0xd800 && cp <= 0xdbff) {
					if (ps->len - ps->pos < 2 || ps->p[ps->pos] != '\\' || ps->p[ps->pos + 1] != 'u') {
						fail(ps, esc, "high surrogate \\u%04x without its low half", (unsigned)cp);
						goto bad;
					}
					ps->pos += 2;
					if (hex4(ps, &lo) < 0)
						goto bad;
					if (lo < 0xdc00 || lo > 0xdfff) {
						fail(ps, esc, "high surrogate \\u%04x without its low half", (unsigned)cp);
						goto bad;
					}
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				}
				if (cp == 0) {
					fail(ps, esc, "\\u0000 in string");
					goto bad;
				}
				buf_add_utf8(&b, cp);
				break;
			default:
				fail(ps, esc, "bad escape \\%c", c >= 0x20 && c < 0x7f ? c : '?');
				goto bad;
			}
			continue;
		}
		size_t n = utf8_sequence_len(ps->p + ps->pos, ps->len - ps->pos);
		if (n == 0) {
			fail(ps, ps->pos, "invalid UTF-8 in string");
			goto bad;
		}
		buf_add(&b, ps->p + ps->pos, n);
		ps->pos += n;
	}
	*out = b.s;
	*out_len = b.len;
	return 0;
bad:
	free(b.s);
	return -1;
}

static struct json_value *parse_number(struct parser *ps)
{
	size_t start = ps->pos;
	const unsigned char *p = ps->p;
	bool integer = true, negative = false;
	if (ps->pos < ps->len && p[ps->pos] == '-') {
		negative = true;
		ps->pos++;
	}
	if (ps->pos >= ps->len || !(p[ps->pos] >= '0' && p[ps->pos] <= '9')) {
		fail(ps, start, "bad number");
		return NULL;
	}
	if (p[ps->pos] == '0') {
		ps->pos++;
		if (ps->pos < ps->len && p[ps->pos] >= '0' && p[ps->pos] <= '9') {
			fail(ps, start, "number with a leading zero");
			return NULL;
		}
	} else {
		while (ps->pos < ps->len && p[ps->pos] >= '0' && p[ps->pos] <= '9')
			ps->pos++;
	}
	if (ps->pos < ps->len && p[ps->pos] == '.') {
		integer = false;
		ps->pos++;
		if (ps->pos >= ps->len || !(p[ps->pos] >= '0' && p[ps->pos] <= '9')) {
			fail(ps, ps->pos, "digit expected after the decimal point");
			return NULL;
		}
		while (ps->pos < ps->len && p[ps->pos] >= '0' && p[ps->pos] <= '9')
			ps->pos++;
	}
	if (ps->pos < ps->len && (p[ps->pos] == 'e' || p[ps->pos] == 'E')) {
		integer = false;
		ps->pos++;
		if (ps->pos < ps->len && (p[ps->pos] == '+' || p[ps->pos] == '-'))
			ps->pos++;
		if (ps->pos >= ps->len || !(p[ps->pos] >= '0' && p[ps->pos] <= '9')) {
			fail(ps, ps->pos, "digit expected in the exponent");
			return NULL;
		}
		while (ps->pos < ps->len && p[ps->pos] >= '0' && p[ps->pos] <= '9')
			ps->pos++;
	}
	struct json_value *v = new_value(JSON_NUMBER, start);
	v->len = ps->pos - start;
	v->text = xstrndup((const char *)p + start, v->len);
	if (integer) {
		/* exact, by hand: no locale, no errno */
		uint64_t mag = 0;
		bool overflow = false;
		for (size_t i = start + (negative ? 1 : 0); i < ps->pos; i++) {
			unsigned d = (unsigned)(p[i] - '0');
			if (mag > (UINT64_MAX - d) / 10)
				overflow = true;
			mag = mag * 10 + d;
		}
		if (!overflow) {
			if (!negative) {
				v->is_uint = true;
				v->u = mag;
				if (mag <= (uint64_t)INT64_MAX) {
					v->is_int = true;
					v->i = (int64_t)mag;
				}
			} else if (mag <= (uint64_t)INT64_MAX + 1) {
				v->is_int = true;
				v->i = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
				if (mag == 0) {
					v->is_uint = true;
					v->u = 0;
				}
			}
		}
	}
	return v;
}

static bool literal(struct parser *ps, const char *word)
{
	size_t n = strlen(word);
	if (ps->len - ps->pos >= n && memcmp(ps->p + ps->pos, word, n) == 0) {
		ps->pos += n;
		return true;
	}
	return false;
}

static void push_item(struct json_value *v, struct json_value *item, char *key)
{
	v->items = xrealloc(v->items, (v->n + 1) * sizeof *v->items);
	v->items[v->n] = item;
	if (v->type == JSON_OBJECT) {
		v->keys = xrealloc(v->keys, (v->n + 1) * sizeof *v->keys);
		v->keys[v->n] = key;
	}
	v->n++;
}

static struct json_value *parse_value(struct parser *ps, int depth)
{
	skip_ws(ps);
	if (ps->pos >= ps->len) {
		fail(ps, ps->pos, "unexpected end of input: a value expected");
		return NULL;
	}
	unsigned char c = ps->p[ps->pos];
	size_t start = ps->pos;
	if (c == '{' || c == '[') {
		bool object = c == '{';
		if (depth >= JSON_MAX_DEPTH) {
			fail(ps, start, "nesting deeper than %d levels", JSON_MAX_DEPTH);
			return NULL;
		}
		struct json_value *v = new_value(object ? JSON_OBJECT : JSON_ARRAY, start);
		ps->pos++;
		skip_ws(ps);
		if (ps->pos < ps->len && ps->p[ps->pos] == (object ? '}' : ']')) {
			ps->pos++;
			return v;
		}
		for (;;) {
			char *key = NULL;
			skip_ws(ps);
			if (object) {
				size_t key_len;
				if (ps->pos >= ps->len) {
					fail(ps, ps->pos, "unexpected end of input: a member name expected");
					goto bad;
				}
				if (ps->p[ps->pos] != '"') {
					fail(ps, ps->pos, "a member name (string) expected");
					goto bad;
				}
				size_t key_at = ps->pos;
				if (parse_string(ps, &key, &key_len) < 0)
					goto bad;
				if (jsonread_get(v, key)) {
					fail(ps, key_at, "duplicate member \"%.60s\"", key);
					free(key);
					goto bad;
				}
				skip_ws(ps);
				if (ps->pos >= ps->len || ps->p[ps->pos] != ':') {
					fail(ps, ps->pos, "':' expected after a member name");
					free(key);
					goto bad;
				}
				ps->pos++;
			}
			struct json_value *item = parse_value(ps, depth + 1);
			if (!item) {
				free(key);
				goto bad;
			}
			push_item(v, item, key);
			skip_ws(ps);
			if (ps->pos >= ps->len) {
				fail(ps, ps->pos, "unexpected end of input: ',' or '%c' expected", object ? '}' : ']');
				goto bad;
			}
			c = ps->p[ps->pos++];
			if (c == ',')
				continue;
			if (c == (object ? '}' : ']'))
				return v;
			fail(ps, ps->pos - 1, "',' or '%c' expected", object ? '}' : ']');
			goto bad;
		}
	bad:
		jsonread_free(v);
		return NULL;
	}
	if (c == '"') {
		struct json_value *v = new_value(JSON_STRING, start);
		if (parse_string(ps, &v->text, &v->len) < 0) {
			free(v);
			return NULL;
		}
		return v;
	}
	if (c == '-' || (c >= '0' && c <= '9'))
		return parse_number(ps);
	if (literal(ps, "true"))
		return new_value(JSON_TRUE, start);
	if (literal(ps, "false"))
		return new_value(JSON_FALSE, start);
	if (literal(ps, "null"))
		return new_value(JSON_NULL, start);
	fail(ps, start, "unexpected character '%c'", c >= 0x20 && c < 0x7f ? c : '?');
	return NULL;
}

struct json_value *jsonread_parse(const char *text, size_t len, struct json_error *err)
{
	struct parser ps = { .p = (const unsigned char *)text, .len = len, .err = err };
	memset(err, 0, sizeof *err);
	struct json_value *v = parse_value(&ps, 0);
	if (!v)
		return NULL;
	skip_ws(&ps);
	if (ps.pos != ps.len) {
		fail(&ps, ps.pos, "trailing data after the value");
		jsonread_free(v);
		return NULL;
	}
	return v;
}

void jsonread_free(struct json_value *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->n; i++) {
		jsonread_free(v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->text);
	free(v);
}

const struct json_value *jsonread_get(const struct json_value *obj, const char *key)
{
	if (!obj || obj->type != JSON_OBJECT)
		return NULL;
	for (size_t i = 0; i < obj->n; i++)
		if (strcmp(obj->keys[i], key) == 0)
			return obj->items[i];
	return NULL;
}

const struct json_value *jsonread_get_type(const struct json_value *obj, const char *key, enum json_type type)
{
	const struct json_value *v = jsonread_get(obj, key);
	return v && v->type == type ? v : NULL;
}

const char *jsonread_get_string(const struct json_value *obj, const char *key)
{
	const struct json_value *v = jsonread_get_type(obj, key, JSON_STRING);
	return v ? v->text : NULL;
}

bool jsonread_get_uint(const struct json_value *obj, const char *key, uint64_t *out)
{
	const struct json_value *v = jsonread_get_type(obj, key, JSON_NUMBER);
	if (!v || !v->is_uint)
		return false;
	*out = v->u;
	return true;
}

const char *jsonread_type_name(enum json_type type)
{
	switch (type) {
	case JSON_NULL: return "null";
	case JSON_FALSE:
	case JSON_TRUE: return "boolean";
	case JSON_NUMBER: return "number";
	case JSON_STRING: return "string";
	case JSON_ARRAY: return "array";
	case JSON_OBJECT: return "object";
	}
	return "?";
}
