/*
 * Apply planner: the SQL and parameters each kind of change becomes;
 * identifiers always quoted, values always parameters.
 */
#include "trellara/envelope.h"
#include "trellara/planner.h"
#include "unit.h"

#include <stdlib.h>
#include <string.h>

/* An envelope with relation "we""ird"."t" (id key, name, body) and the
 * changes the test wants, then decoded. */
static void build(struct buf *b, uint8_t replident)
{
	struct env_header_fields h = { .source_id = "s", .xid = 7, .commit_lsn = 100, .end_lsn = 120 };
	env_encode_header(b, &h);
	buf_put_u32(b, 1);
	struct env_column cols[3] = {
		{ "id", 2, 23, -1, replident != 'f' },
		{ "na\"me", 5, 25, -1, false },
		{ "body", 4, 25, -1, false },
	};
	env_encode_relation(b, 1, "we\"ird", "t", replident, 3, cols);
	buf_put_u32(b, 5);
	/* insert (1, 'a''b', NULL) */
	buf_put_u8(b, 'I');
	buf_put_u32(b, 0);
	env_encode_tuple_begin(b, 3);
	env_encode_value(b, 't', "1", 1);
	env_encode_value(b, 't', "a'b", 3);
	env_encode_value(b, 'n', NULL, 0);
	/* update, key changed 1 -> 2, body unchanged TOAST */
	buf_put_u8(b, 'U');
	buf_put_u32(b, 0);
	buf_put_u8(b, replident == 'f' ? 'O' : 'K');
	env_encode_tuple_begin(b, 3);
	env_encode_value(b, 't', "1", 1);
	env_encode_value(b, replident == 'f' ? 't' : 'n', "a'b", 3);
	env_encode_value(b, 'n', NULL, 0);
	env_encode_tuple_begin(b, 3);
	env_encode_value(b, 't', "2", 1);
	env_encode_value(b, 't', "c", 1);
	env_encode_value(b, 'u', NULL, 0);
	/* update without old tuple */
	buf_put_u8(b, 'U');
	buf_put_u32(b, 0);
	buf_put_u8(b, 0);
	env_encode_tuple_begin(b, 3);
	env_encode_value(b, 't', "2", 1);
	env_encode_value(b, 't', "d", 1);
	env_encode_value(b, 't', "x", 1);
	/* delete */
	buf_put_u8(b, 'D');
	buf_put_u32(b, 0);
	buf_put_u8(b, replident == 'f' ? 'O' : 'K');
	env_encode_tuple_begin(b, 3);
	env_encode_value(b, 't', "2", 1);
	env_encode_value(b, replident == 'f' ? 't' : 'n', "d", 1);
	env_encode_value(b, replident == 'f' ? 't' : 'n', "x", 1);
	/* truncate, restart identity + cascade */
	buf_put_u8(b, 'T');
	buf_put_u8(b, 3);
	buf_put_u32(b, 1);
	buf_put_u32(b, 0);
}

int main(void)
{
	struct buf b = { 0 };
	build(&b, 'd');
	struct env_decoder d;
	CHECK(env_decode_begin(&d, b.data, b.len) == 0);
	bool key[3] = { true, false, false };
	struct plan_relation rel = { .rel = &d.header.relations[0], .key = key };
	struct plan_stmt s;
	plan_stmt_init(&s);
	char err[256];
	const struct env_change *c;
	const char *expected[] = {
		"INSERT INTO \"we\"\"ird\".\"t\" (\"id\", \"na\"\"me\", \"body\") VALUES ($1, $2, NULL)",
		"UPDATE ONLY \"we\"\"ird\".\"t\" SET \"id\" = $1, \"na\"\"me\" = $2 WHERE \"id\" = $3",
		"UPDATE ONLY \"we\"\"ird\".\"t\" SET \"id\" = $1, \"na\"\"me\" = $2, \"body\" = $3 WHERE \"id\" = $4",
		"DELETE FROM ONLY \"we\"\"ird\".\"t\" WHERE \"id\" = $1",
		/* the source's CASCADE is not repeated: the message names every table it reached */
		"TRUNCATE ONLY \"we\"\"ird\".\"t\" RESTART IDENTITY",
	};
	int i = 0;
	while (env_decode_next(&d, &c) == 1) {
		CHECK(plan_change("trellara", &rel, 1, c, true, &s, err, sizeof err) == 0);
		CHECK_STR(s.sql.buf, expected[i]);
		i++;
		if (i == 1) {
			CHECK(s.n_params == 2);
			CHECK_STR(s.values[0], "1");
			CHECK_STR(s.values[1], "a'b"); /* the value travels as a parameter, quote and all */
			CHECK(!s.expect_one);
			CHECK(s.expect_rows == 0);
		}
		if (i == 2) {
			/* the row moves: the new key set ($1), matched by the old key ($3);
			 * the unchanged-TOAST body is left out of SET */
			CHECK(s.n_params == 3);
			CHECK_STR(s.values[0], "2");
			CHECK_STR(s.values[1], "c");
			CHECK_STR(s.values[2], "1");
			CHECK(s.expect_one);
			CHECK(s.expect_rows == 1);
			CHECK_STR(s.what.buf, "we\"ird.t (id=1)");
		}
		if (i == 3) /* no old tuple: the key comes from the new row */
			CHECK_STR(s.values[3], "2");
	}
	CHECK(i == 5);
	env_decoder_free(&d);

	/* the target's column types known: every parameter is cast to its
	 * column's type, typmod left out (a composite key, a varchar(10),
	 * an unknown type left bare), so the server never infers "record" */
	CHECK(env_decode_begin(&d, b.data, b.len) == 0);
	const char *types[3] = { "public.\"comp t\"", "character varying(10)", NULL };
	struct plan_relation typed = { &d.header.relations[0], key, NULL, false, types, NULL };
	const char *expected_typed[] = {
		"INSERT INTO \"we\"\"ird\".\"t\" (\"id\", \"na\"\"me\", \"body\") VALUES ($1::public.\"comp t\", "
		"$2::character varying, NULL)",
		"UPDATE ONLY \"we\"\"ird\".\"t\" SET \"id\" = $1::public.\"comp t\", \"na\"\"me\" = $2::character varying "
		"WHERE \"id\" = $3::public.\"comp t\"",
		"UPDATE ONLY \"we\"\"ird\".\"t\" SET \"id\" = $1::public.\"comp t\", \"na\"\"me\" = $2::character varying, "
		"\"body\" = $3 WHERE \"id\" = $4::public.\"comp t\"",
		"DELETE FROM ONLY \"we\"\"ird\".\"t\" WHERE \"id\" = $1::public.\"comp t\"",
		"TRUNCATE ONLY \"we\"\"ird\".\"t\" RESTART IDENTITY",
	};
	i = 0;
	while (env_decode_next(&d, &c) == 1) {
		CHECK(plan_change("trellara", &typed, 1, c, true, &s, err, sizeof err) == 0);
		CHECK_STR(s.sql.buf, expected_typed[i]);
		i++;
	}
	CHECK(i == 5);
	env_decoder_free(&d);
	/* keyless (replica identity full): the match over every old column
	 * is typed too */
	struct buf bf = { 0 };
	build(&bf, 'f');
	CHECK(env_decode_begin(&d, bf.data, bf.len) == 0);
	struct plan_relation typed_full = { &d.header.relations[0], NULL, NULL, false, types, NULL };
	CHECK(env_decode_next(&d, &c) == 1); /* the insert */
	CHECK(env_decode_next(&d, &c) == 1); /* the update */
	CHECK(plan_change("trellara", &typed_full, 1, c, true, &s, err, sizeof err) == 0);
	CHECK(strstr(s.sql.buf, "WHERE \"id\" = $1::public.\"comp t\" AND \"na\"\"me\" = $2::character varying AND "
				"\"body\" IS NULL LIMIT 1") != NULL);
	env_decoder_free(&d);
	buf_free(&bf);

	/* a key of a type whose equality is not pg_catalog's (citext, hstore:
	 * the session's search_path is empty): its operator named with its
	 * schema, in the match and the guards; set columns keep "=" */
	CHECK(env_decode_begin(&d, b.data, b.len) == 0);
	const char *eqs[3] = { "OPERATOR(public.=)", NULL, NULL };
	struct plan_relation with_eq = { &d.header.relations[0], key, NULL, false, types, eqs };
	const char *expected_eq[] = {
		"INSERT INTO \"we\"\"ird\".\"t\" (\"id\", \"na\"\"me\", \"body\") VALUES ($1::public.\"comp t\", "
		"$2::character varying, NULL)",
		"UPDATE ONLY \"we\"\"ird\".\"t\" SET \"id\" = $1::public.\"comp t\", \"na\"\"me\" = $2::character varying "
		"WHERE \"id\" OPERATOR(public.=) $3::public.\"comp t\"",
		"UPDATE ONLY \"we\"\"ird\".\"t\" SET \"id\" = $1::public.\"comp t\", \"na\"\"me\" = $2::character varying, "
		"\"body\" = $3 WHERE \"id\" OPERATOR(public.=) $4::public.\"comp t\"",
		"DELETE FROM ONLY \"we\"\"ird\".\"t\" WHERE \"id\" OPERATOR(public.=) $1::public.\"comp t\"",
		"TRUNCATE ONLY \"we\"\"ird\".\"t\" RESTART IDENTITY",
	};
	i = 0;
	while (env_decode_next(&d, &c) == 1) {
		CHECK(plan_change("trellara", &with_eq, 1, c, true, &s, err, sizeof err) == 0);
		CHECK_STR(s.sql.buf, expected_eq[i]);
		i++;
	}
	CHECK(i == 5);
	env_decoder_free(&d);

	/* a partitioned target table: through the parent, TRUNCATE without ONLY */
	CHECK(env_decode_begin(&d, b.data, b.len) == 0);
	struct plan_relation part = { &d.header.relations[0], key, NULL, true, NULL, NULL };
	const char *expected_part[] = {
		"INSERT INTO \"we\"\"ird\".\"t\" (\"id\", \"na\"\"me\", \"body\") VALUES ($1, $2, NULL)",
		"UPDATE \"we\"\"ird\".\"t\" SET \"id\" = $1, \"na\"\"me\" = $2 WHERE \"id\" = $3",
		"UPDATE \"we\"\"ird\".\"t\" SET \"id\" = $1, \"na\"\"me\" = $2, \"body\" = $3 WHERE \"id\" = $4",
		"DELETE FROM \"we\"\"ird\".\"t\" WHERE \"id\" = $1",
		"TRUNCATE \"we\"\"ird\".\"t\" RESTART IDENTITY",
	};
	i = 0;
	while (env_decode_next(&d, &c) == 1) {
		CHECK(plan_change("trellara", &part, 1, c, false, &s, err, sizeof err) == 0);
		CHECK_STR(s.sql.buf, expected_part[i]);
		i++;
	}
	CHECK(i == 5);
	env_decoder_free(&d);

	/* GENERATED ALWAYS identity on the target's "id": inserts override
	 * it; an update leaves it out of SET when it does not change, and
	 * fails when it does */
	CHECK(env_decode_begin(&d, b.data, b.len) == 0);
	bool always[3] = { true, false, false };
	struct plan_relation ident = { &d.header.relations[0], key, always, false, NULL, NULL };
	CHECK(env_decode_next(&d, &c) == 1);
	CHECK(plan_change("trellara", &ident, 1, c, false, &s, err, sizeof err) == 0);
	CHECK_STR(s.sql.buf,
		  "INSERT INTO \"we\"\"ird\".\"t\" (\"id\", \"na\"\"me\", \"body\") OVERRIDING SYSTEM VALUE VALUES ($1, $2, NULL)");
	CHECK(env_decode_next(&d, &c) == 1); /* key 1 -> 2 */
	CHECK(plan_change("trellara", &ident, 1, c, false, &s, err, sizeof err) == -1);
	CHECK(strstr(err, "GENERATED ALWAYS identity column \"id\" of we\"ird.t from 1 to 2") != NULL);
	CHECK(env_decode_next(&d, &c) == 1); /* key unchanged */
	CHECK(plan_change("trellara", &ident, 1, c, false, &s, err, sizeof err) == 0);
	CHECK_STR(s.sql.buf,
		  "UPDATE ONLY \"we\"\"ird\".\"t\" SET \"na\"\"me\" = $1, \"body\" = $2 WHERE \"id\" = $3");
	CHECK_STR(s.values[2], "2");
	env_decoder_free(&d);
	/* an identity column outside the key, whose old value the change
	 * does not carry: checked in WHERE */
	CHECK(env_decode_begin(&d, b.data, b.len) == 0);
	bool always_body[3] = { false, false, true };
	struct plan_relation guarded = { &d.header.relations[0], key, always_body, false, NULL, NULL };
	CHECK(env_decode_next(&d, &c) == 1);
	CHECK(env_decode_next(&d, &c) == 1);
	CHECK(env_decode_next(&d, &c) == 1);
	CHECK(plan_change("trellara", &guarded, 1, c, false, &s, err, sizeof err) == 0);
	CHECK_STR(s.sql.buf,
		  "UPDATE ONLY \"we\"\"ird\".\"t\" SET \"id\" = $1, \"na\"\"me\" = $2 WHERE \"id\" = $3 AND \"body\" = $4");
	CHECK_STR(s.values[3], "x");
	env_decoder_free(&d);

	/* REPLICA IDENTITY FULL without a key: every old column, one row by ctid */
	b.len = 0;
	build(&b, 'f');
	CHECK(env_decode_begin(&d, b.data, b.len) == 0);
	struct plan_relation keyless = { .rel = &d.header.relations[0], .key = NULL };
	CHECK(env_decode_next(&d, &c) == 1);
	CHECK(env_decode_next(&d, &c) == 1);
	CHECK(plan_change("trellara", &keyless, 1, c, false, &s, err, sizeof err) == 0);
	const char *sql = s.sql.buf;
	/* one of identical rows, by (tableoid, ctid) */
	CHECK(strstr(sql, "WITH c AS (SELECT tableoid, ctid FROM ONLY \"we\"\"ird\".\"t\" WHERE \"id\" = $1 AND \"na\"\"me\" = $2 AND \"body\" IS NULL LIMIT 1)") != NULL);
	CHECK(strstr(sql, "m AS (UPDATE ONLY \"we\"\"ird\".\"t\" SET") != NULL);
	CHECK(strstr(sql, " WHERE tableoid = (SELECT tableoid FROM c) AND ctid = (SELECT ctid FROM c) RETURNING 1)") != NULL);
	CHECK(strstr(sql, "\"trellara\".expect_one((SELECT count(*) FROM c)") != NULL);
	CHECK(!s.expect_one);
	/* an identity column whose old value is in the old row: unchanged, left out */
	bool always_id[3] = { true, false, false };
	struct plan_relation keyless_ident = { &d.header.relations[0], NULL, always_id, true, NULL, NULL };
	CHECK(plan_change("trellara", &keyless_ident, 1, c, false, &s, err, sizeof err) == -1); /* 1 -> 2 */
	CHECK(strstr(err, "from 1 to 2") != NULL);
	/* an update without an old row cannot be matched without a key */
	CHECK(env_decode_next(&d, &c) == 1);
	CHECK(plan_change("trellara", &keyless, 1, c, false, &s, err, sizeof err) == -1);
	CHECK(strstr(err, "no key") != NULL);
	env_decoder_free(&d);
	plan_stmt_free(&s);
	buf_free(&b);
	return unit_done("planner");
}
