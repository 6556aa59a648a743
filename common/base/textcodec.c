#include "trellara/textcodec.h"

#include "trellara/xalloc.h"

#include <stdlib.h>
#include <string.h>

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *base64_encode(const void *data, size_t len)
{
	const uint8_t *p = data;
	char *out = xmalloc((len + 2) / 3 * 4 + 1);
	char *o = out;
	size_t i = 0;
	for (; i + 3 <= len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		*o++ = b64[v >> 18];
		*o++ = b64[(v >> 12) & 63];
		*o++ = b64[(v >> 6) & 63];
		*o++ = b64[v & 63];
	}
	if (len - i == 1) {
		uint32_t v = (uint32_t)p[i] << 16;
		*o++ = b64[v >> 18];
		*o++ = b64[(v >> 12) & 63];
		*o++ = '=';
		*o++ = '=';
	} else if (len - i == 2) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
		*o++ = b64[v >> 18];
		*o++ = b64[(v >> 12) & 63];
		*o++ = b64[(v >> 6) & 63];
		*o++ = '=';
	}
	*o = '\0';
	return out;
}

static int b64_value(char c)
{
	const char *p = c ? strchr(b64, c) : NULL;
	return p ? (int)(p - b64) : -1;
}

bool base64_decode(const char *text, uint8_t **out, size_t *out_len)
{
	size_t len = strlen(text);
	if (len % 4)
		return false;
	uint8_t *buf = xmalloc(len / 4 * 3 + 1);
	size_t n = 0;
	for (size_t i = 0; i < len; i += 4) {
		int v[4];
		int pad = 0;
		for (int k = 0; k < 4; k++) {
			if (text[i + k] == '=' && i + 4 == len && k >= 2) {
				v[k] = 0;
				pad++;
				continue;
			}
			if (pad || (v[k] = b64_value(text[i + k])) < 0) {
				free(buf);
				return false;
			}
		}
		uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
		buf[n++] = (uint8_t)(w >> 16);
		if (pad < 2)
			buf[n++] = (uint8_t)(w >> 8);
		if (pad < 1)
			buf[n++] = (uint8_t)w;
	}
	*out = buf;
	*out_len = n;
	return true;
}

void json_write_string(FILE *out, const char *s, size_t len)
{
	fputc('"', out);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		switch (c) {
		case '"': fputs("\\\"", out); break;
		case '\\': fputs("\\\\", out); break;
		case '\n': fputs("\\n", out); break;
		case '\r': fputs("\\r", out); break;
		case '\t': fputs("\\t", out); break;
		default:
			if (c < 0x20 || c == 0x7f)
				fprintf(out, "\\u%04x", c);
			else
				fputc(c, out);
		}
	}
	fputc('"', out);
}

bool utf8_valid(const void *data, size_t len)
{
	const uint8_t *p = data;
	size_t i = 0;
	while (i < len) {
		uint8_t c = p[i];
		size_t n;
		uint32_t cp;
		if (c == 0)
			return false;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			n = 1;
			cp = c & 0x1f;
		} else if ((c & 0xf0) == 0xe0) {
			n = 2;
			cp = c & 0x0f;
		} else if ((c & 0xf8) == 0xf0) {
			n = 3;
			cp = c & 0x07;
		} else {
			return false;
		}
		for (size_t k = 1; k <= n; k++) {
			if (i + k >= len || (p[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (p[i + k] & 0x3f);
		}
		if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += n + 1;
	}
	return true;
}

struct parser {
	const char *s;
	size_t i;
	const char *error;
};

static void skip_ws(struct parser *p)
{
	while (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')
		p->i++;
}

static int hex4(const char *s)
{
	int v = 0;
	for (int k = 0; k < 4; k++) {
		char c = s[k];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (d < 0)
			return -1;
		v = v * 16 + d;
	}
	return v;
}

static void put_utf8(char **o, uint32_t cp)
{
	char *q = *o;
	if (cp < 0x80) {
		*q++ = (char)cp;
	} else if (cp < 0x800) {
		*q++ = (char)(0xc0 | cp >> 6);
		*q++ = (char)(0x80 | (cp & 63));
	} else if (cp < 0x10000) {
		*q++ = (char)(0xe0 | cp >> 12);
		*q++ = (char)(0x80 | ((cp >> 6) & 63));
		*q++ = (char)(0x80 | (cp & 63));
	} else {
		*q++ = (char)(0xf0 | cp >> 18);
		*q++ = (char)(0x80 | ((cp >> 12) & 63));
		*q++ = (char)(0x80 | ((cp >> 6) & 63));
		*q++ = (char)(0x80 | (cp & 63));
	}
	*o = q;
}

static char *parse_string(struct parser *p, size_t *len)
{
	if (p->s[p->i] != '"') {
		p->error = "expected a string";
		return NULL;
	}
	p->i++;
	size_t start = p->i;
	size_t cap = strlen(p->s + start) + 1;
	char *out = xmalloc(cap), *o = out;
	for (;;) {
		char c = p->s[p->i];
		if (c == '\0') {
			p->error = "unterminated string";
			goto fail;
		}
		if ((unsigned char)c < 0x20) {
			p->error = "control character in string";
			goto fail;
		}
		if (c == '"') {
			p->i++;
			break;
		}
		if (c != '\\') {
			*o++ = c;
			p->i++;
			continue;
		}
		char e = p->s[p->i + 1];
		p->i += 2;
		switch (e) {
		case '"': *o++ = '"'; break;
		case '\\': *o++ = '\\'; break;
		case '/': *o++ = '/'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u': {
			int cp = hex4(p->s + p->i);
			if (cp < 0) {
				p->error = "bad \\u escape";
				goto fail;
			}
			p->i += 4;
			uint32_t code = (uint32_t)cp;
			if (cp >= 0xd800 && cp <= 0xdbff) {
				int lo = p->s[p->i] == '\\' && p->s[p->i + 1] == 'u' ? hex4(p->s + p->i + 2) : -1;
				if (lo < 0xdc00 || lo > 0xdfff) {
					p->error = "unpaired surrogate in \\u escape";
					goto fail;
				}
				p->i += 6;
				code = 0x10000 + (((uint32_t)cp - 0xd800) << 10) + ((uint32_t)lo - 0xdc00);
			} else if (cp >= 0xdc00 && cp <= 0xdfff) {
				p->error = "unpaired surrogate in \\u escape";
				goto fail;
			}
			put_utf8(&o, code);
			break;
		}
		default:
			p->error = "bad escape in string";
			goto fail;
		}
	}
	*o = '\0';
	*len = (size_t)(o - out);
	return out;
fail:
	free(out);
	return NULL;
}

bool json_parse_flat_object(const char *text, struct json_object *obj, const char **error, size_t *error_at)
{
	struct parser p = { text, 0, NULL };
	memset(obj, 0, sizeof *obj);
	skip_ws(&p);
	if (p.s[p.i] != '{') {
		p.error = "expected a JSON object";
		goto fail;
	}
	p.i++;
	skip_ws(&p);
	if (p.s[p.i] == '}') {
		p.i++;
		goto done;
	}
	for (;;) {
		skip_ws(&p);
		size_t klen;
		char *key = parse_string(&p, &klen);
		if (!key)
			goto fail;
		obj->members = xrealloc(obj->members, (obj->n + 1) * sizeof *obj->members);
		struct json_member *m = &obj->members[obj->n++];
		memset(m, 0, sizeof *m);
		m->key = key;
		skip_ws(&p);
		if (p.s[p.i] != ':') {
			p.error = "expected ':'";
			goto fail;
		}
		p.i++;
		skip_ws(&p);
		if (p.s[p.i] == '"') {
			m->value = parse_string(&p, &m->value_len);
			if (!m->value)
				goto fail;
			m->is_string = true;
		} else if (p.s[p.i] == '-' || (p.s[p.i] >= '0' && p.s[p.i] <= '9')) {
			size_t start = p.i;
			while (strchr("+-0123456789.eE", p.s[p.i]) && p.s[p.i])
				p.i++;
			m->value = xstrndup(p.s + start, p.i - start);
			m->value_len = p.i - start;
		} else {
			p.error = "values must be strings or numbers";
			goto fail;
		}
		skip_ws(&p);
		if (p.s[p.i] == ',') {
			p.i++;
			continue;
		}
		if (p.s[p.i] == '}') {
			p.i++;
			break;
		}
		p.error = "expected ',' or '}'";
		goto fail;
	}
done:
	skip_ws(&p);
	if (p.s[p.i] != '\0') {
		p.error = "trailing characters after the object";
		goto fail;
	}
	return true;
fail:
	*error = p.error;
	*error_at = p.i;
	json_object_free(obj);
	return false;
}

const struct json_member *json_flat_get(const struct json_object *obj, const char *key)
{
	for (size_t i = 0; i < obj->n; i++)
		if (strcmp(obj->members[i].key, key) == 0)
			return &obj->members[i];
	return NULL;
}

void json_object_free(struct json_object *obj)
{
	for (size_t i = 0; i < obj->n; i++) {
		free(obj->members[i].key);
		free(obj->members[i].value);
	}
	free(obj->members);
	memset(obj, 0, sizeof *obj);
}

size_t utf8_sequence_len(const void *p, size_t avail)
{
	const unsigned char *b = p;
	unsigned char c = b[0];
	size_t n;
	uint32_t cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (avail < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((b[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (b[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

char *utf8_repair(const char *s, size_t len)
{
	static const char replacement[] = "\xef\xbf\xbd"; /* U+FFFD */
	char *out = xmalloc(len * 3 + 1);
	size_t n = 0;
	for (size_t i = 0; i < len;) {
		size_t k = utf8_sequence_len(s + i, len - i);
		if (k == 0) {
			memcpy(out + n, replacement, 3);
			n += 3;
			i++;
		} else {
			memcpy(out + n, s + i, k);
			n += k;
			i += k;
		}
	}
	out[n] = '\0';
	return out;
}
