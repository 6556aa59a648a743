/*
 * test_strbuf.c - the text buffer, the error-buffer printf and the JSON
 * writer of common/base.
 */
#include "unit.h"

#include "trellara/jsonw.h"
#include "trellara/strbuf.h"

#include <stdlib.h>

static void test_strbuf(void)
{
	struct strbuf sb = STRBUF_INIT;
	CHECK_STR(sb.buf, "");
	CHECK(sb.len == 0);
	strbuf_adds(&sb, "abc");
	strbuf_addch(&sb, '-');
	strbuf_addf(&sb, "%d/%s", 42, "x");
	CHECK_STR(sb.buf, "abc-42/x");
	CHECK(sb.len == 8);
	/* growth past the first allocation keeps the text and the NUL */
	for (int i = 0; i < 1000; i++)
		strbuf_addch(&sb, (char)('a' + i % 26));
	CHECK(sb.len == 1008);
	CHECK(sb.buf[1008] == '\0');
	CHECK(sb.buf[8] == 'a' && sb.buf[1007] == (char)('a' + 999 % 26));
	strbuf_reset(&sb);
	CHECK_STR(sb.buf, "");
	CHECK(sb.alloc > 0);
	strbuf_add(&sb, "xyz", 2);
	CHECK_STR(sb.buf, "xy");
	size_t len = 0;
	char *text = strbuf_detach(&sb, &len);
	CHECK_STR(text, "xy");
	CHECK(len == 2);
	CHECK(sb.len == 0 && sb.alloc == 0);
	CHECK_STR(sb.buf, "");
	free(text);
	/* an empty buffer detaches to an owned "" */
	text = strbuf_detach(&sb, NULL);
	CHECK_STR(text, "");
	free(text);
	strbuf_addf(&sb, "%s", "again");
	CHECK_STR(sb.buf, "again");
	strbuf_release(&sb);
	CHECK_STR(sb.buf, "");
	strbuf_release(&sb); /* twice is harmless */
	struct strbuf other;
	strbuf_init(&other);
	CHECK_STR(other.buf, "");
}

static void test_errbuf(void)
{
	char err[8];
	CHECK(errbuf_setf(err, sizeof err, "bad %s", "frame") == -1);
	CHECK_STR(err, "bad fra"); /* truncated, terminated */
	CHECK(errbuf_setf(NULL, 0, "ignored %d", 1) == -1);
	char one[1] = { 'x' };
	errbuf_setf(one, sizeof one, "abc");
	CHECK(one[0] == '\0');
}

/* what the writer printed into a memory stream */
static char *written(void (*write)(struct jsonw *), bool spaced)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	struct jsonw w;
	jsonw_init(&w, out, spaced);
	write(&w);
	fclose(out);
	return text;
}

static void sample(struct jsonw *w)
{
	jsonw_open(w, NULL, '{');
	jsonw_str(w, "name", "a\"b\\c\nd\x01");
	jsonw_str(w, "missing", NULL);
	jsonw_u64(w, "n", true, 18446744073709551615u);
	jsonw_u64(w, "unknown", false, 7);
	jsonw_i64(w, "neg", true, -5);
	jsonw_num(w, "secs", true, 1.5);
	jsonw_num(w, "inf", true, 1.0 / 0.0);
	jsonw_lsn(w, "lsn", true, ((uint64_t)0x16 << 32) | 0xB374D848u);
	jsonw_open(w, "list", '[');
	jsonw_bool(w, NULL, true);
	jsonw_open(w, NULL, '{');
	jsonw_null(w, "x");
	jsonw_close(w, '}');
	jsonw_open(w, NULL, '[');
	jsonw_close(w, ']');
	jsonw_close(w, ']');
	jsonw_bool(w, "last", false);
	jsonw_close(w, '}');
}

/* keys and strings given by length, as the envelope's are (not NUL-terminated) */
static void sample_counted(struct jsonw *w)
{
	static const char bytes[] = "id\"xnew\nline, not this";
	jsonw_open(w, NULL, '{');
	jsonw_keyn(w, bytes, 3);
	jsonw_strn(w, NULL, bytes + 4, 8);
	jsonw_keyn(w, bytes, 2);
	jsonw_open(w, NULL, '[');
	jsonw_strn(w, NULL, "a\0b", 3);
	jsonw_null(w, NULL);
	jsonw_close(w, ']');
	jsonw_keyn(w, bytes, 2);
	jsonw_open(w, NULL, '{');
	jsonw_bool(w, "t", true);
	jsonw_close(w, '}');
	jsonw_u64(w, "after", true, 1);
	jsonw_close(w, '}');
}

static void test_jsonw(void)
{
	char *text = written(sample, false);
	CHECK_STR(text, "{\"name\":\"a\\\"b\\\\c\\nd\\u0001\",\"missing\":null,\"n\":18446744073709551615,"
			"\"unknown\":null,\"neg\":-5,\"secs\":1.500,\"inf\":null,\"lsn\":\"16/B374D848\","
			"\"list\":[true,{\"x\":null},[]],\"last\":false}");
	free(text);
	text = written(sample, true);
	CHECK_STR(text, "{\"name\": \"a\\\"b\\\\c\\nd\\u0001\", \"missing\": null, \"n\": 18446744073709551615, "
			"\"unknown\": null, \"neg\": -5, \"secs\": 1.500, \"inf\": null, \"lsn\": \"16/B374D848\", "
			"\"list\": [true, {\"x\": null}, []], \"last\": false}");
	free(text);
	text = written(sample_counted, false);
	CHECK_STR(text, "{\"id\\\"\":\"new\\nline\",\"id\":[\"a\\u0000b\",null],\"id\":{\"t\":true},\"after\":1}");
	free(text);
}

static void check_quoted(const char *word, const char *expected)
{
	char *quoted = strbuf_shell_quote(word);
	CHECK_STR(quoted, expected);
	free(quoted);
}

static void test_shell_quote(void)
{
	check_quoted("/etc/trellara/orders.yml", "/etc/trellara/orders.yml");
	check_quoted("user@host:a,b=c+d%e_f-g", "user@host:a,b=c+d%e_f-g");
	check_quoted("", "''");
	check_quoted("/tmp/a b/flow.yml", "'/tmp/a b/flow.yml'");
	check_quoted("it's", "'it'\\''s'");
	check_quoted("'", "''\\'''");
	check_quoted("$HOME `x` \"q\" \\ *", "'$HOME `x` \"q\" \\ *'");
	check_quoted("~/flow.yml", "'~/flow.yml'");
	struct strbuf sb = STRBUF_INIT;
	strbuf_adds(&sb, "--config ");
	strbuf_add_shell_quoted(&sb, "a'b");
	CHECK_STR(sb.buf, "--config 'a'\\''b'");
	strbuf_release(&sb);
}

int main(void)
{
	test_strbuf();
	test_errbuf();
	test_jsonw();
	test_shell_quote();
	return unit_done("strbuf");
}
