/*
 * test_jsonread.c - the JSON reader and writer: writes through jsonw.h
 * (jsonw_text, jsonw_finish) and its strict parser (common/base/jsonread.c):
 * escaping, valid and invalid documents with the byte offset of the
 * problem, the nesting limit, and a writer -> parser round trip over
 * seeded random trees.
 *
 * Links with the no-libpq libraries only (build/tests/jsonread_nolibpq).
 */
#include "trellara/jsonread.h"
#include "trellara/jsonw.h"
#include "trellara/textcodec.h"
#include "unit.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Writes with fn into a memory buffer; returns it (owned). */
static char *capture(void (*fn)(struct jsonw *), int *finish)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct jsonw w;
	jsonw_init(&w, f, false);
	fn(&w);
	*finish = jsonw_finish(&w);
	fclose(f);
	return buf;
}

static const char tricky[] = "q\"b\\s/\b\f\n\r\t\x01\x1f\x7f<&>é€😀";

/* the simulator's writes: every string through jsonw_text */
static void write_escapes(struct jsonw *w)
{
	jsonw_open(w, NULL, '{');
	jsonw_text(w, "k\"ey", tricky);
	jsonw_text(w, "bad_utf8", "a\xff" "b\xc3");
	jsonw_text(w, "cut", "x\xe2\x82"); /* a euro sign cut at a buffer's end */
	jsonw_text(w, "overlong", "\xc0\xaf\xed\xa0\x80");
	jsonw_text(w, "nul", NULL);
	jsonw_i64(w, "neg", true, INT64_MIN);
	jsonw_u64(w, "big", true, UINT64_MAX);
	jsonw_num(w, "rate", true, 2.5);
	jsonw_bool(w, "t", true);
	jsonw_null(w, "n");
	jsonw_open(w, "empty", '[');
	jsonw_close(w, ']');
	jsonw_close(w, '}');
}

static void test_writer_escaping(void)
{
	int finish;
	char *out = capture(write_escapes, &finish);
	CHECK(finish == 0);
	/* valid UTF-8 whatever the strings held, so the parser takes it back */
	CHECK(utf8_valid(out, strlen(out)));
	struct json_error err;
	struct json_value *v = jsonread_parse(out, strlen(out), &err);
	CHECK(v != NULL);
	if (!v) {
		fprintf(stderr, "  %zu: %s in %s\n", err.offset, err.message, out);
		free(out);
		return;
	}
	CHECK(v->type == JSON_OBJECT && v->n == 11);
	CHECK_STR(jsonread_get_string(v, "k\"ey"), tricky);
	/* each byte that is not UTF-8 is U+FFFD (EF BF BD) */
	CHECK_STR(jsonread_get_string(v, "bad_utf8"), "a\xef\xbf\xbd" "b\xef\xbf\xbd");
	CHECK_STR(jsonread_get_string(v, "cut"), "x\xef\xbf\xbd\xef\xbf\xbd");
	CHECK_STR(jsonread_get_string(v, "overlong"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
	CHECK(jsonread_get_type(v, "nul", JSON_NULL) != NULL);
	uint64_t big = 0;
	CHECK(jsonread_get_uint(v, "big", &big) && big == UINT64_MAX);
	const struct json_value *neg = jsonread_get(v, "neg");
	CHECK(neg && neg->is_int && neg->i == INT64_MIN && !neg->is_uint);
	const struct json_value *rate = jsonread_get_type(v, "rate", JSON_NUMBER);
	CHECK(rate && strcmp(rate->text, "2.500") == 0);
	CHECK(jsonread_get_type(v, "n", JSON_NULL) != NULL);
	CHECK(jsonread_get_type(v, "t", JSON_TRUE) != NULL);
	const struct json_value *empty = jsonread_get_type(v, "empty", JSON_ARRAY);
	CHECK(empty && empty->n == 0);
	jsonread_free(v);
	free(out);
}

static void write_unclosed(struct jsonw *w)
{
	jsonw_open(w, NULL, '{');
	jsonw_u64(w, "a", true, 1);
}

static void write_closed(struct jsonw *w)
{
	jsonw_open(w, NULL, '[');
	jsonw_u64(w, NULL, true, 1);
	jsonw_close(w, ']');
}

/* jsonw_finish: an unfinished document and a failed write are -1 */
static void test_writer_finish(void)
{
	int finish;
	free(capture(write_unclosed, &finish));
	CHECK(finish == -1);
	free(capture(write_closed, &finish));
	CHECK(finish == 0);
	FILE *full = fopen("/dev/full", "w");
	CHECK(full != NULL);
	if (full) {
		struct jsonw w;
		jsonw_init(&w, full, false);
		write_closed(&w);
		CHECK(jsonw_finish(&w) == -1);
		fclose(full);
	}
}

/* parse text; expect failure at offset with a message containing what */
static void expect_error(const char *text, size_t offset, const char *what)
{
	struct json_error err;
	struct json_value *v = jsonread_parse(text, strlen(text), &err);
	CHECK(v == NULL);
	if (v) {
		fprintf(stderr, "  parsed, but should not have: %s\n", text);
		jsonread_free(v);
		return;
	}
	if (err.offset != offset || !strstr(err.message, what)) {
		fprintf(stderr, "  %s: got offset %zu \"%s\", want offset %zu \"%s\"\n", text, err.offset, err.message,
			offset, what);
		CHECK(err.offset == offset);
		CHECK(strstr(err.message, what) != NULL);
	}
}

static void test_parser_valid(void)
{
	static const char text[] = " {\"a\": [1, -2, 3.5e2, true, false, null, \"x\\u00e9\\ud83d\\ude00\\/\"],\n"
				   "  \"b\": {}, \"c\": [], \"d\": 0, \"e\": -0, \"f\": 18446744073709551616} ";
	struct json_error err;
	struct json_value *v = jsonread_parse(text, strlen(text), &err);
	CHECK(v != NULL);
	if (!v) {
		fprintf(stderr, "  %zu: %s\n", err.offset, err.message);
		return;
	}
	CHECK(v->type == JSON_OBJECT && v->n == 6);
	const struct json_value *a = jsonread_get_type(v, "a", JSON_ARRAY);
	CHECK(a && a->n == 7);
	if (a && a->n == 7) {
		CHECK(a->items[0]->is_uint && a->items[0]->u == 1);
		CHECK(a->items[1]->is_int && a->items[1]->i == -2 && !a->items[1]->is_uint);
		CHECK(!a->items[2]->is_int && !a->items[2]->is_uint);
		CHECK_STR(a->items[2]->text, "3.5e2");
		CHECK(a->items[3]->type == JSON_TRUE && a->items[4]->type == JSON_FALSE && a->items[5]->type == JSON_NULL);
		CHECK_STR(a->items[6]->text, "x\xc3\xa9\xf0\x9f\x98\x80/");
		CHECK(a->items[6]->offset == 41);
	}
	CHECK(jsonread_get_type(v, "b", JSON_OBJECT) && jsonread_get(v, "b")->n == 0);
	const struct json_value *f = jsonread_get(v, "f");
	CHECK(f && f->type == JSON_NUMBER && !f->is_uint && !f->is_int); /* 2^64 does not fit: text only */
	CHECK(jsonread_get(v, "zz") == NULL);
	CHECK(v->offset == 1);
	jsonread_free(v);
}

static void test_parser_truncated(void)
{
	expect_error("", 0, "unexpected end of input");
	expect_error("   ", 3, "unexpected end of input");
	expect_error("{", 1, "unexpected end of input");
	expect_error("{\"a\"", 4, "':' expected");
	expect_error("{\"a\":", 5, "unexpected end of input");
	expect_error("{\"a\":1", 6, "unexpected end of input");
	expect_error("[1,", 3, "unexpected end of input");
	expect_error("\"abc", 0, "unterminated string");
	expect_error("tru", 0, "unexpected character 't'");
	expect_error("-", 0, "bad number");
	expect_error("1.", 2, "digit expected");
}

static void test_parser_bad(void)
{
	expect_error("\"a\\x\"", 2, "bad escape \\x");
	expect_error("\"a\\u12g4\"", 6, "bad hex digit");
	expect_error("\"\\udc00\"", 1, "lone low surrogate");
	expect_error("\"\\ud800x\"", 1, "without its low half");
	expect_error("\"\\u0000\"", 1, "\\u0000");
	expect_error("\"a\tb\"", 2, "control character");
	expect_error("\"\xff\"", 1, "invalid UTF-8");
	expect_error("\"\xc0\xaf\"", 1, "invalid UTF-8"); /* overlong */
	expect_error("\"\xed\xa0\x80\"", 1, "invalid UTF-8"); /* encoded surrogate */
	expect_error("01", 0, "leading zero");
	expect_error("[1,]", 3, "unexpected character ']'");
	expect_error("{\"a\":1,}", 7, "a member name");
	expect_error("{\"a\":1 \"b\":2}", 7, "',' or '}' expected");
	expect_error("{\"a\":1,\"a\":2}", 7, "duplicate member \"a\"");
	expect_error("{} {}", 3, "trailing data");
	expect_error("nul", 0, "unexpected character");
	expect_error("// x\n1", 0, "unexpected character '/'");
	expect_error("{'a':1}", 1, "a member name");
}

static void test_nesting_limit(void)
{
	char deep[2 * JSON_MAX_DEPTH + 8];
	size_t n = 0;
	struct json_error err;
	/* exactly JSON_MAX_DEPTH levels parse */
	for (int i = 0; i < JSON_MAX_DEPTH; i++)
		deep[n++] = '[';
	for (int i = 0; i < JSON_MAX_DEPTH; i++)
		deep[n++] = ']';
	struct json_value *v = jsonread_parse(deep, n, &err);
	CHECK(v != NULL);
	jsonread_free(v);
	/* one more is refused, at the offset of the bracket that is too deep */
	n = 0;
	for (int i = 0; i <= JSON_MAX_DEPTH; i++)
		deep[n++] = '[';
	for (int i = 0; i <= JSON_MAX_DEPTH; i++)
		deep[n++] = ']';
	deep[n] = '\0';
	expect_error(deep, JSON_MAX_DEPTH, "nesting deeper");
}

/* ---- round trip over seeded random trees ---- */

static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void random_string(uint64_t *rng, char *buf, size_t cap)
{
	static const char *const pieces[] = { "a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\b", "\f", "\x01",
					      "\x1f", "<", "&", "é", "€", "😀", "\x7f" };
	size_t n = 0, parts = splitmix64(rng) % 8;
	buf[0] = '\0';
	for (size_t i = 0; i < parts; i++) {
		const char *p = pieces[splitmix64(rng) % (sizeof pieces / sizeof pieces[0])];
		size_t len = strlen(p);
		if (n + len + 1 > cap)
			break;
		memcpy(buf + n, p, len);
		n += len;
		buf[n] = '\0';
	}
}

/* Writes a random value and checks the parsed copy against the same
 * random choices made again (rng2 replays rng). */
static void write_random(struct jsonw *w, const char *key, uint64_t *rng, int depth)
{
	char s[64];
	uint64_t kind = splitmix64(rng) % (depth >= 4 ? 5 : 7);
	switch (kind) {
	case 0: jsonw_u64(w, key, true, splitmix64(rng)); break;
	case 1: jsonw_i64(w, key, true, (int64_t)splitmix64(rng)); break;
	case 2: random_string(rng, s, sizeof s); jsonw_text(w, key, s); break;
	case 3: jsonw_bool(w, key, splitmix64(rng) & 1); break;
	case 4: jsonw_null(w, key); break;
	case 5: {
		uint64_t n = splitmix64(rng) % 4;
		jsonw_open(w, key, '[');
		for (uint64_t i = 0; i < n; i++)
			write_random(w, NULL, rng, depth + 1);
		jsonw_close(w, ']');
		break;
	}
	default: {
		uint64_t n = splitmix64(rng) % 4;
		jsonw_open(w, key, '{');
		for (uint64_t i = 0; i < n; i++) {
			char k[16];
			snprintf(k, sizeof k, "k%llu", (unsigned long long)i);
			write_random(w, k, rng, depth + 1);
		}
		jsonw_close(w, '}');
	}
	}
}

static bool check_random(const struct json_value *v, uint64_t *rng, int depth)
{
	char s[64];
	uint64_t kind = splitmix64(rng) % (depth >= 4 ? 5 : 7);
	switch (kind) {
	case 0: { uint64_t u = splitmix64(rng); return v->type == JSON_NUMBER && v->is_uint && v->u == u; }
	case 1: { int64_t i = (int64_t)splitmix64(rng); return v->type == JSON_NUMBER && v->is_int && v->i == i; }
	case 2: random_string(rng, s, sizeof s); return v->type == JSON_STRING && strcmp(v->text, s) == 0;
	case 3: { bool b = splitmix64(rng) & 1; return v->type == (b ? JSON_TRUE : JSON_FALSE); }
	case 4: return v->type == JSON_NULL;
	case 5: {
		uint64_t n = splitmix64(rng) % 4;
		if (v->type != JSON_ARRAY || v->n != n)
			return false;
		for (uint64_t i = 0; i < n; i++)
			if (!check_random(v->items[i], rng, depth + 1))
				return false;
		return true;
	}
	default: {
		uint64_t n = splitmix64(rng) % 4;
		if (v->type != JSON_OBJECT || v->n != n)
			return false;
		for (uint64_t i = 0; i < n; i++) {
			char k[16];
			snprintf(k, sizeof k, "k%llu", (unsigned long long)i);
			if (strcmp(v->keys[i], k) != 0 || !check_random(v->items[i], rng, depth + 1))
				return false;
		}
		return true;
	}
	}
}

static void test_round_trip(void)
{
	int ok = 0;
	for (uint64_t seed = 1; seed <= 500; seed++) {
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		struct jsonw w;
		uint64_t rng = seed;
		jsonw_init(&w, f, false);
		jsonw_open(&w, NULL, '{');
		write_random(&w, "root", &rng, 0);
		jsonw_close(&w, '}');
		int finish = jsonw_finish(&w);
		fclose(f);
		struct json_error err;
		struct json_value *v = jsonread_parse(buf, len, &err);
		rng = seed;
		bool same =
			finish == 0 && v && jsonread_get(v, "root") && check_random(jsonread_get(v, "root"), &rng, 0);
		if (!same)
			fprintf(stderr, "  round trip of seed %llu failed: %s\n", (unsigned long long)seed, buf);
		else
			ok++;
		jsonread_free(v);
		free(buf);
	}
	CHECK(ok == 500);
}

int main(void)
{
	test_writer_escaping();
	test_writer_finish();
	test_parser_valid();
	test_parser_truncated();
	test_parser_bad();
	test_nesting_limit();
	test_round_trip();
	return unit_done("test_jsonread");
}
