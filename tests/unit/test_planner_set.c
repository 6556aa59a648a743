/*
 * Set-based statements: the exact SQL a run of compatible changes
 * becomes, its parameters and row count, when a run must be planned row
 * by row instead, how runs are cut into pieces, and which changes may
 * share a statement.
 */
#include "trellara/envelope.h"
#include "trellara/planner.h"
#include "unit.h"

#include <stdlib.h>

#define MAXC 1600

static struct env_value T(const char *s)
{
	return (struct env_value){ ENV_TEXT, (uint32_t)strlen(s), (const uint8_t *)s };
}
static const struct env_value N = { ENV_NULL, 0, NULL };
static const struct env_value U = { ENV_UNCHANGED_TOAST, 0, NULL };

/* A change owning its value arrays (freed by change_free). */
static struct env_change change(uint8_t op, uint32_t relation, uint8_t old_kind, uint16_t n, const struct env_value *row)
{
	struct env_change c;
	memset(&c, 0, sizeof c);
	c.op = op;
	c.relation = relation;
	c.old_kind = old_kind;
	struct env_tuple *t = op == ENV_DELETE ? &c.old_tuple : &c.new_tuple;
	t->n = n;
	t->values = calloc(n, sizeof *t->values);
	memcpy(t->values, row, n * sizeof *row);
	return c;
}

static void change_free(struct env_change *c)
{
	free(c->old_tuple.values);
	free(c->new_tuple.values);
}

static struct env_column col(const char *name, uint32_t type_oid, bool key)
{
	return (struct env_column){ name, strlen(name), type_oid, -1, key };
}

static struct env_relation relation(const char *schema, const char *name, uint16_t n, struct env_column *cols)
{
	return (struct env_relation){ 1, schema, name, strlen(schema), strlen(name), 'd', n, cols };
}

static struct plan_stmt s;
static char err[512];

/* plan_change_set over cs[0..n) (pointers to changes). */
static int plan(const struct plan_relation *rels, uint32_t n_rels, struct env_change *changes, size_t n)
{
	const struct env_change **cs = calloc(n ? n : 1, sizeof *cs);
	for (size_t k = 0; k < n; k++)
		cs[k] = &changes[k];
	err[0] = '\0';
	int rc = plan_change_set("trellara", rels, n_rels, cs, n, &s, err, sizeof err);
	free(cs);
	return rc;
}

/* relation 0: "we""ird"."t a" (id integer key, na"me text, body text, j json) */
static struct env_column weird_cols[4];
static struct env_relation weird;
static const char *const weird_types[4] = { "integer", "text", "text", "json" };
static bool weird_key[4] = { true, false, false, false };

static void test_insert(void)
{
	struct plan_relation rel = { &weird, weird_key, NULL, false, weird_types, NULL };
	struct env_change c[3];
	struct env_value r0[4] = { T("1"), T("a'b"), N, T("{\"x\": 1}") };
	struct env_value r1[4] = { T("2"), N, T("b"), N };
	struct env_value r2[4] = { T("3"), T("c"), T("d"), T("[]") };
	c[0] = change('I', 0, 0, 4, r0);
	c[1] = change('I', 0, 0, 4, r1);
	c[2] = change('I', 0, 0, 4, r2);
	const char *expected[] = {
		"INSERT INTO \"we\"\"ird\".\"t a\" (\"id\", \"na\"\"me\", \"body\", \"j\") VALUES ($1, $2, $3, $4)",
		"INSERT INTO \"we\"\"ird\".\"t a\" (\"id\", \"na\"\"me\", \"body\", \"j\") VALUES ($1, $2, $3, $4), ($5, $6, $7, $8)",
		"INSERT INTO \"we\"\"ird\".\"t a\" (\"id\", \"na\"\"me\", \"body\", \"j\") VALUES ($1, $2, $3, $4), ($5, $6, $7, $8),"
		" ($9, $10, $11, $12)",
	};
	for (size_t n = 1; n <= 3; n++) {
		CHECK(plan(&rel, 1, c, n) == 0);
		CHECK_STR(s.sql.buf, expected[n - 1]);
		CHECK(s.n_params == 4 * n);
		CHECK(s.expect_one && s.expect_rows == n && s.is_row_change);
	}
	/* every value a parameter, NULLs as NULL parameters */
	CHECK_STR(s.values[0], "1");
	CHECK_STR(s.values[1], "a'b");
	CHECK(s.values[2] == NULL);
	CHECK_STR(s.values[3], "{\"x\": 1}");
	CHECK_STR(s.values[4], "2");
	CHECK(s.values[5] == NULL);
	CHECK_STR(s.values[6], "b");
	CHECK(s.values[7] == NULL);
	CHECK_STR(s.values[11], "[]");
	CHECK_STR(s.what.buf, "we\"ird.t a (3 rows: id=1, id=2, id=3)");
	/* the text depends on the row count only: other NULLs, same SQL */
	struct env_change swapped[2] = { c[1], c[0] };
	CHECK(plan(&rel, 1, swapped, 2) == 0);
	CHECK_STR(s.sql.buf, expected[1]);
	CHECK(s.values[1] == NULL && s.values[2] != NULL);
	/* inserts need no col_types */
	struct plan_relation untyped = { &weird, weird_key, NULL, false, NULL, NULL };
	CHECK(plan(&untyped, 1, c, 2) == 0);
	CHECK_STR(s.sql.buf, expected[1]);
	/* a partitioned table is inserted into as today (INSERT has no ONLY) */
	struct plan_relation part = { &weird, weird_key, NULL, true, weird_types, NULL };
	CHECK(plan(&part, 1, c, 1) == 0);
	CHECK_STR(s.sql.buf, expected[0]);
	CHECK_STR(s.what.buf, "we\"ird.t a (1 row: id=1)");
	/* returns 1: an unchanged-TOAST insert value, a NULL key, a keyless relation */
	c[1].new_tuple.values[2] = U;
	CHECK(plan(&rel, 1, c, 2) == 1);
	CHECK(s.sql.len == 0 && !s.expect_one);
	c[1].new_tuple.values[2] = T("b");
	c[1].new_tuple.values[0] = N;
	CHECK(plan(&rel, 1, c, 2) == 1);
	c[1].new_tuple.values[0] = T("2");
	/* a keyless relation's inserts need no key: one statement too */
	struct plan_relation keyless = { &weird, NULL, NULL, false, weird_types, NULL };
	CHECK(plan(&keyless, 1, c, 2) == 0);
	CHECK_STR(s.sql.buf, expected[1]);
	CHECK(s.expect_one && s.expect_rows == 2);
	CHECK(plan(&rel, 1, c, 2) == 0);
	for (int k = 0; k < 3; k++)
		change_free(&c[k]);
}

/* plan_copy_set over changes[0..n). */
static int plan_copy(const struct plan_relation *rels, uint32_t n_rels, struct env_change *changes, size_t n)
{
	const struct env_change **cs = calloc(n ? n : 1, sizeof *cs);
	for (size_t k = 0; k < n; k++)
		cs[k] = &changes[k];
	err[0] = '\0';
	int rc = plan_copy_set(rels, n_rels, cs, n, &s, err, sizeof err);
	free(cs);
	return rc;
}

/* Runs of inserts as COPY: the statement, the rows in COPY's text
 * format with every escape COPY reads back, NULL as \N, the row count. */
static void test_copy(void)
{
	struct plan_relation rel = { &weird, weird_key, NULL, false, weird_types, NULL };
	struct env_change c[3];
	struct env_value r0[4] = { T("1"), T("a'b\\c"), N, T("{\"x\": 1}") };
	struct env_value r1[4] = { T("2"), T("tab\there"), T("line\nnext\rcr"), N };
	struct env_value r2[4] = { T("3"), T(""), T("\\N"), T("[]") };
	c[0] = change('I', 0, 0, 4, r0);
	c[1] = change('I', 0, 0, 4, r1);
	c[2] = change('I', 0, 0, 4, r2);
	CHECK(plan_copy(&rel, 1, c, 3) == 0);
	CHECK_STR(s.sql.buf, "COPY \"we\"\"ird\".\"t a\" (\"id\", \"na\"\"me\", \"body\", \"j\") FROM STDIN");
	CHECK(s.copy && s.n_params == 0);
	CHECK(s.expect_one && s.expect_rows == 3 && s.is_row_change);
	/* an empty string stays empty, a literal \N stays text (\\N), NULL is \N */
	CHECK_STR(s.copy_data.buf, "1\ta'b\\\\c\t\\N\t{\"x\": 1}\n"
				   "2\ttab\\there\tline\\nnext\\rcr\t\\N\n"
				   "3\t\t\\\\N\t[]\n");
	CHECK_STR(s.what.buf, "we\"ird.t a (3 rows: id=1, id=2, id=3)");
	/* the next plan forgets the COPY */
	CHECK(plan(&rel, 1, c, 2) == 0);
	CHECK(!s.copy && s.copy_data.len == 0 && s.n_params == 8);
	/* a keyless table's inserts too; GENERATED ALWAYS identity needs no clause (COPY keeps the values) */
	struct plan_relation keyless = { &weird, NULL, NULL, false, weird_types, NULL };
	CHECK(plan_copy(&keyless, 1, c, 1) == 0);
	CHECK_STR(s.copy_data.buf, "1\ta'b\\\\c\t\\N\t{\"x\": 1}\n");
	bool always[4] = { true, false, false, false };
	struct plan_relation ident = { &weird, weird_key, always, false, weird_types, NULL };
	CHECK(plan_copy(&ident, 1, c, 2) == 0);
	CHECK(strstr(s.sql.buf, "OVERRIDING") == NULL);
	/* 1: an unchanged-TOAST value, or not inserts; the statement left empty */
	c[1].new_tuple.values[2] = U;
	CHECK(plan_copy(&rel, 1, c, 3) == 1);
	CHECK(s.sql.len == 0 && !s.copy && !s.expect_one && s.copy_data.len == 0);
	c[1].new_tuple.values[2] = T("b");
	struct env_value d0[4] = { T("1"), N, N, N };
	struct env_change del = change('D', 0, 'K', 4, d0);
	CHECK(plan_copy(&rel, 1, &del, 1) == 1);
	change_free(&del);
	/* -1: no row, too many rows, a relation out of range, an incompatible change */
	CHECK(plan_copy(&rel, 1, c, 0) == -1);
	CHECK(strstr(err, "COPY of 0 rows") != NULL);
	c[2].relation = 1;
	CHECK(plan_copy(&rel, 1, c, 3) == -1);
	CHECK(strstr(err, "relation 1 of 1") != NULL);
	c[2].relation = 0;
	c[2].new_tuple.n = 3;
	CHECK(plan_copy(&rel, 1, c, 3) == -1);
	CHECK(strstr(err, "change 2 cannot join a COPY") != NULL);
	c[2].new_tuple.n = 4;
	CHECK(plan_copy_piece(0) == 0 && plan_copy_piece(7) == 7);
	CHECK(plan_copy_piece(PLAN_COPY_MAX_ROWS + 5) == PLAN_COPY_MAX_ROWS);
	for (int k = 0; k < 3; k++)
		change_free(&c[k]);
}

static void test_update(void)
{
	struct plan_relation rel = { &weird, weird_key, NULL, false, weird_types, NULL };
	struct env_change c[3];
	/* body unchanged TOAST in each: not in SET, not in VALUES */
	struct env_value r0[4] = { T("1"), T("x"), U, N };
	struct env_value r1[4] = { T("2"), N, U, T("{}") };
	struct env_value r2[4] = { T("3"), T("z"), U, T("1") };
	c[0] = change('U', 0, 0, 4, r0);
	c[1] = change('U', 0, 0, 4, r1);
	c[2] = change('U', 0, 0, 4, r2);
	const char *head = "UPDATE ONLY \"we\"\"ird\".\"t a\" AS t SET \"na\"\"me\" = v.\"na\"\"me\", \"j\" = v.\"j\" FROM (VALUES ";
	const char *tail = ") AS v (\"id\", \"na\"\"me\", \"j\") WHERE t.\"id\" = v.\"id\"";
	const char *rows[] = {
		"($1::integer, $2::text, $3::json)",
		"($1::integer, $2::text, $3::json), ($4::integer, $5::text, $6::json)",
		"($1::integer, $2::text, $3::json), ($4::integer, $5::text, $6::json), ($7::integer, $8::text, $9::json)",
	};
	for (size_t n = 1; n <= 3; n++) {
		CHECK(plan(&rel, 1, c, n) == 0);
		struct strbuf want = STRBUF_INIT;
		strbuf_adds(&want, head);
		strbuf_adds(&want, rows[n - 1]);
		strbuf_adds(&want, tail);
		CHECK_STR(s.sql.buf, want.buf);
		strbuf_release(&want);
		CHECK(s.n_params == 3 * n);
		CHECK(s.expect_one && s.expect_rows == n && s.is_row_change);
	}
	CHECK_STR(s.values[0], "1");
	CHECK_STR(s.values[1], "x");
	CHECK(s.values[2] == NULL);
	CHECK_STR(s.values[3], "2");
	CHECK(s.values[4] == NULL);
	CHECK_STR(s.values[5], "{}");
	CHECK_STR(s.values[8], "1");
	CHECK_STR(s.what.buf, "we\"ird.t a (3 rows: id=1, id=2, id=3)");
	/* partitioned: through the parent, without ONLY */
	struct plan_relation part = { &weird, weird_key, NULL, true, weird_types, NULL };
	CHECK(plan(&part, 1, c, 1) == 0);
	CHECK_STR(s.sql.buf, "UPDATE \"we\"\"ird\".\"t a\" AS t SET \"na\"\"me\" = v.\"na\"\"me\", \"j\" = v.\"j\" FROM"
			     " (VALUES ($1::integer, $2::text, $3::json)) AS v (\"id\", \"na\"\"me\", \"j\") WHERE t.\"id\" = v.\"id\"");
	/* returns 1: no col_types, a needed one missing or empty, a NULL or
	 * unchanged-TOAST key, the same key twice */
	struct plan_relation untyped = { &weird, weird_key, NULL, false, NULL, NULL };
	CHECK(plan(&untyped, 1, c, 2) == 1);
	const char *const no_json[4] = { "integer", "text", "text", NULL };
	struct plan_relation partial = { &weird, weird_key, NULL, false, no_json, NULL };
	CHECK(plan(&partial, 1, c, 2) == 1);
	const char *const empty_json[4] = { "integer", "text", "text", "" };
	partial.col_types = empty_json;
	CHECK(plan(&partial, 1, c, 2) == 1);
	/* the body's type is not needed (unchanged TOAST: not sent) */
	const char *const no_body[4] = { "integer", "text", NULL, "json" };
	partial.col_types = no_body;
	CHECK(plan(&partial, 1, c, 2) == 0);
	c[1].new_tuple.values[0] = N;
	CHECK(plan(&rel, 1, c, 2) == 1);
	c[1].new_tuple.values[0] = T("1");
	CHECK(plan(&rel, 1, c, 2) == 1); /* key 1 twice */
	CHECK(plan(&rel, 1, c, 3) == 1);
	CHECK(plan(&rel, 1, c + 1, 2) == 0); /* 1 and 3 */
	c[1].new_tuple.values[0] = T("2");
	struct env_value toast_key[4] = { U, T("x"), U, N };
	struct env_change tk[2] = { change('U', 0, 0, 4, toast_key), change('U', 0, 0, 4, toast_key) };
	CHECK(plan(&rel, 1, tk, 1) == 1);
	CHECK(plan(&rel, 1, tk, 2) == 1);
	change_free(&tk[0]);
	change_free(&tk[1]);
	for (int k = 0; k < 3; k++)
		change_free(&c[k]);
}

static void test_delete(void)
{
	struct plan_relation rel = { &weird, weird_key, NULL, false, weird_types, NULL };
	struct env_change c[3];
	struct env_value r0[4] = { T("1"), N, N, N };
	struct env_value r1[4] = { T("2"), T("old"), U, T("{}") }; /* full old row, TOAST unchanged in it */
	struct env_value r2[4] = { T("3"), N, N, N };
	c[0] = change('D', 0, 'K', 4, r0);
	c[1] = change('D', 0, 'O', 4, r1);
	c[2] = change('D', 0, 'K', 4, r2);
	const char *expected[] = {
		"DELETE FROM ONLY \"we\"\"ird\".\"t a\" AS t USING (VALUES ($1::integer)) AS v (\"id\") WHERE t.\"id\" = v.\"id\"",
		"DELETE FROM ONLY \"we\"\"ird\".\"t a\" AS t USING (VALUES ($1::integer), ($2::integer)) AS v (\"id\")"
		" WHERE t.\"id\" = v.\"id\"",
		"DELETE FROM ONLY \"we\"\"ird\".\"t a\" AS t USING (VALUES ($1::integer), ($2::integer), ($3::integer)) AS v"
		" (\"id\") WHERE t.\"id\" = v.\"id\"",
	};
	for (size_t n = 1; n <= 3; n++) {
		CHECK(plan(&rel, 1, c, n) == 0);
		CHECK_STR(s.sql.buf, expected[n - 1]);
		CHECK(s.n_params == n);
		CHECK(s.expect_one && s.expect_rows == n && s.is_row_change);
	}
	CHECK_STR(s.values[0], "1");
	CHECK_STR(s.values[1], "2");
	CHECK_STR(s.values[2], "3");
	CHECK_STR(s.what.buf, "we\"ird.t a (3 rows: id=1, id=2, id=3)");
	/* only the key's type is needed */
	const char *const key_only[4] = { "integer", NULL, NULL, NULL };
	struct plan_relation partial = { &weird, weird_key, NULL, false, key_only, NULL };
	CHECK(plan(&partial, 1, c, 3) == 0);
	CHECK_STR(s.sql.buf, expected[2]);
	struct plan_relation part = { &weird, weird_key, NULL, true, weird_types, NULL };
	CHECK(plan(&part, 1, c, 1) == 0);
	CHECK_STR(s.sql.buf, "DELETE FROM \"we\"\"ird\".\"t a\" AS t USING (VALUES ($1::integer)) AS v (\"id\") WHERE t.\"id\" = v.\"id\"");
	/* returns 1 */
	struct plan_relation untyped = { &weird, weird_key, NULL, false, NULL, NULL };
	CHECK(plan(&untyped, 1, c, 1) == 1);
	const char *const none[4] = { NULL, "text", "text", "json" };
	partial.col_types = none;
	CHECK(plan(&partial, 1, c, 1) == 1);
	c[2].old_tuple.values[0] = N;
	CHECK(plan(&rel, 1, c, 3) == 1);
	c[2].old_tuple.values[0] = U;
	CHECK(plan(&rel, 1, c, 3) == 1);
	CHECK(plan(&rel, 1, c, 2) == 0);
	struct plan_relation keyless = { &weird, NULL, NULL, false, weird_types, NULL };
	CHECK(plan(&keyless, 1, c, 1) == 1);
	for (int k = 0; k < 3; k++)
		change_free(&c[k]);
}

/* Composite keys, one of a type without equality (point): compared by
 * its text and needing no type; typmods left to the assignment. */
static void test_composite_and_types(void)
{
	struct env_column cols[3] = { col("k1", 23, true), col("k 2", 600, true), col("v", 1043, false) };
	struct env_relation r = relation("s", "p", 3, cols);
	bool key[3] = { true, true, false };
	const char *const types[3] = { "integer", NULL, "character varying(3)" };
	struct plan_relation rel = { &r, key, NULL, false, types, NULL };
	struct env_value d0[3] = { T("1"), T("(1,2)"), N };
	struct env_value d1[3] = { T("1"), T("(3,4)"), N };
	struct env_change d[2] = { change('D', 0, 'K', 3, d0), change('D', 0, 'K', 3, d1) };
	CHECK(plan(&rel, 1, d, 2) == 0);
	CHECK_STR(s.sql.buf, "DELETE FROM ONLY \"s\".\"p\" AS t USING (VALUES ($1::integer, $2::text), ($3::integer, $4::text))"
			     " AS v (\"k1\", \"k 2\") WHERE t.\"k1\" = v.\"k1\" AND t.\"k 2\"::text = v.\"k 2\"");
	CHECK_STR(s.what.buf, "s.p (2 rows: k1=1 k 2=(1,2), k1=1 k 2=(3,4))");
	CHECK_STR(s.values[3], "(3,4)");
	struct env_value u0[3] = { T("1"), T("(1,2)"), T("abc") };
	struct env_value u1[3] = { T("1"), T("(3,4)"), N };
	struct env_change u[2] = { change('U', 0, 0, 3, u0), change('U', 0, 0, 3, u1) };
	CHECK(plan(&rel, 1, u, 2) == 0);
	CHECK_STR(s.sql.buf, "UPDATE ONLY \"s\".\"p\" AS t SET \"v\" = v.\"v\" FROM (VALUES ($1::integer, $2::text,"
			     " $3::character varying), ($4::integer, $5::text, $6::character varying)) AS v (\"k1\", \"k 2\", \"v\")"
			     " WHERE t.\"k1\" = v.\"k1\" AND t.\"k 2\"::text = v.\"k 2\"");
	CHECK(s.values[5] == NULL);
	/* same key value in one column only: not the same key */
	u[1].new_tuple.values[1] = T("(1,2)");
	CHECK(plan(&rel, 1, u, 2) == 1);
	u[1].new_tuple.values[0] = T("2");
	CHECK(plan(&rel, 1, u, 2) == 0);
	/* a key column after a non-key one: VALUES lists the key first */
	struct env_column cols2[3] = { col("v", 25, false), col("b", 23, true), col("a", 23, true) };
	struct env_relation r2 = relation("s", "q", 3, cols2);
	bool key2[3] = { false, true, true };
	const char *const types2[3] = { "text", "integer", "bigint" };
	struct plan_relation rel2 = { &r2, key2, NULL, false, types2, NULL };
	struct env_value q0[3] = { T("x"), T("1"), T("2") };
	struct env_change q = change('U', 0, 0, 3, q0);
	CHECK(plan(&rel2, 1, &q, 1) == 0);
	CHECK_STR(s.sql.buf, "UPDATE ONLY \"s\".\"q\" AS t SET \"v\" = v.\"v\" FROM (VALUES ($1::integer, $2::bigint, $3::text))"
			     " AS v (\"b\", \"a\", \"v\") WHERE t.\"b\" = v.\"b\" AND t.\"a\" = v.\"a\"");
	CHECK_STR(s.values[0], "1");
	CHECK_STR(s.values[1], "2");
	CHECK_STR(s.values[2], "x");
	change_free(&q);

	/* casts without the typmod, as format_type(oid, -1) writes the type */
	struct env_column tc[9] = { col("id", 23, true), col("c1", 1042, false), col("c2", 1561, false),
				    col("c3", 1700, false), col("c4", 1114, false), col("c5", 16384, false),
				    col("c6", 1015, false), col("c7", 1186, false), col("c8", 16390, false) };
	struct env_relation tr = relation("s", "types", 9, tc);
	bool tkey[9] = { true };
	const char *const ttypes[9] = { "integer", "character(5)", "bit(3)[]", "numeric(10,2)",
					"timestamp(3) without time zone", "\"my(1)type\"", "character varying(10)[]",
					"interval(2)", "public.geometry(Point,4326)" };
	struct plan_relation trel = { &tr, tkey, NULL, false, ttypes, NULL };
	struct env_value tv[9] = { T("1"), T("a"), T("{1}"), T("1"), T("now"), T("x"), T("{}"), T("1s"), T("p") };
	struct env_change t = change('U', 0, 0, 9, tv);
	CHECK(plan(&trel, 1, &t, 1) == 0);
	CHECK(strstr(s.sql.buf, "(VALUES ($1::integer, $2::bpchar, $3::\"bit\"[], $4::numeric, $5::timestamp without time zone,"
				" $6::\"my(1)type\", $7::character varying[], $8::interval, $9::public.geometry(Point,4326)))") != NULL);
	const char *const plain[9] = { "integer", "bpchar", "\"bit\"", "character", "bit varying(4)", "text[]",
				       "character varying", "timestamp(6) with time zone[]", "bit" };
	trel.col_types = plain;
	CHECK(plan(&trel, 1, &t, 1) == 0);
	CHECK(strstr(s.sql.buf, "(VALUES ($1::integer, $2::bpchar, $3::\"bit\", $4::bpchar, $5::bit varying, $6::text[],"
				" $7::character varying, $8::timestamp with time zone[], $9::\"bit\"))") != NULL);
	change_free(&t);
	for (int k = 0; k < 2; k++) {
		change_free(&d[k]);
		change_free(&u[k]);
	}
}

/* GENERATED ALWAYS identity columns. */
static void test_identity(void)
{
	struct env_column cols[3] = { col("id", 20, true), col("n", 25, false), col("g", 20, false) };
	struct env_relation r = relation("s", "idt", 3, cols);
	bool key[3] = { true, false, false };
	bool always[3] = { true, false, true };
	const char *const types[3] = { "bigint", "text", "bigint" };
	struct plan_relation rel = { &r, key, always, false, types, NULL };
	struct env_value i0[3] = { T("1"), T("a"), T("10") };
	struct env_value i1[3] = { T("2"), N, T("11") };
	struct env_change ins[2] = { change('I', 0, 0, 3, i0), change('I', 0, 0, 3, i1) };
	CHECK(plan(&rel, 1, ins, 2) == 0);
	CHECK_STR(s.sql.buf, "INSERT INTO \"s\".\"idt\" (\"id\", \"n\", \"g\") OVERRIDING SYSTEM VALUE VALUES ($1, $2, $3),"
			     " ($4, $5, $6)");
	/* an update that sends the non-key identity column: row by row
	 * (plan_change guards it or refuses a change of it) */
	struct env_change up[2] = { change('U', 0, 0, 3, i0), change('U', 0, 0, 3, i1) };
	CHECK(plan(&rel, 1, up, 2) == 1);
	/* the identity key column is never in SET */
	up[0].new_tuple.values[2] = U;
	up[1].new_tuple.values[2] = U;
	CHECK(plan(&rel, 1, up, 2) == 0);
	CHECK_STR(s.sql.buf, "UPDATE ONLY \"s\".\"idt\" AS t SET \"n\" = v.\"n\" FROM (VALUES ($1::bigint, $2::text),"
			     " ($3::bigint, $4::text)) AS v (\"id\", \"n\") WHERE t.\"id\" = v.\"id\"");
	/* only the key sent: each row still found, SET with a column the
	 * target lets be assigned (not the identity key) */
	up[0].new_tuple.values[1] = U;
	up[1].new_tuple.values[1] = U;
	CHECK(plan(&rel, 1, up, 2) == 0);
	CHECK_STR(s.sql.buf, "UPDATE ONLY \"s\".\"idt\" AS t SET \"n\" = t.\"n\" FROM (VALUES ($1::bigint), ($2::bigint)) AS v"
			     " (\"id\") WHERE t.\"id\" = v.\"id\"");
	CHECK(s.n_params == 2);
	/* ... and when every column is GENERATED ALWAYS: row by row */
	bool all_always[3] = { true, true, true };
	rel.identity_always = all_always;
	CHECK(plan(&rel, 1, up, 2) == 1);
	/* a key without identity: the first column is assigned to itself */
	rel.identity_always = NULL;
	CHECK(plan(&rel, 1, up, 1) == 0);
	CHECK_STR(s.sql.buf, "UPDATE ONLY \"s\".\"idt\" AS t SET \"id\" = t.\"id\" FROM (VALUES ($1::bigint)) AS v (\"id\")"
			     " WHERE t.\"id\" = v.\"id\"");
	for (int k = 0; k < 2; k++) {
		change_free(&ins[k]);
		change_free(&up[k]);
	}
}

static void test_malformed(void)
{
	struct plan_relation rel = { &weird, weird_key, NULL, false, weird_types, NULL };
	struct env_value r0[4] = { T("1"), T("x"), U, N };
	struct env_change c[2] = { change('U', 0, 0, 4, r0), change('U', 1, 0, 4, r0) };
	CHECK(plan(&rel, 1, c, 2) == -1);
	CHECK(strstr(err, "relation 1 of 1") != NULL);
	CHECK(s.sql.len == 0);
	CHECK(plan(&rel, 1, c, 0) == -1);
	CHECK(err[0] != '\0');
	c[1].relation = 0;
	c[1].op = 'D';
	c[1].old_tuple = c[1].new_tuple;
	c[1].new_tuple = (struct env_tuple){ 0, NULL };
	c[1].old_kind = 'K';
	CHECK(plan(&rel, 1, c, 2) == -1); /* an update and a delete */
	CHECK(strstr(err, "cannot join") != NULL);
	c[1].op = 'T';
	CHECK(plan(&rel, 1, c + 1, 1) == -1);
	change_free(&c[0]);
	change_free(&c[1]);
	/* more rows than a statement takes */
	struct env_change *many = calloc(PLAN_SET_MAX_ROWS + 1, sizeof *many);
	char (*ids)[16] = calloc(PLAN_SET_MAX_ROWS + 1, sizeof *ids);
	for (size_t k = 0; k <= PLAN_SET_MAX_ROWS; k++) {
		snprintf(ids[k], sizeof ids[k], "%zu", k);
		struct env_value row[4] = { T(ids[k]), N, N, N };
		many[k] = change('D', 0, 'K', 4, row);
	}
	CHECK(plan(&rel, 1, many, PLAN_SET_MAX_ROWS + 1) == -1);
	CHECK(plan(&rel, 1, many, PLAN_SET_MAX_ROWS) == 0);
	CHECK(s.expect_rows == PLAN_SET_MAX_ROWS && s.n_params == PLAN_SET_MAX_ROWS);
	/* the description stays short */
	CHECK(s.what.len < 300);
	CHECK(strncmp(s.what.buf, "we\"ird.t a (512 rows: id=0, id=1, ", 34) == 0);
	CHECK(strcmp(s.what.buf + s.what.len - 6, ", ...)") == 0);
	for (size_t k = 0; k <= PLAN_SET_MAX_ROWS; k++)
		change_free(&many[k]);
	free(many);
	free(ids);
}

static void test_piece(void)
{
	struct plan_relation rel = { &weird, weird_key, NULL, false, weird_types, NULL };
	struct env_value r0[4] = { T("1"), T("x"), U, N };
	struct env_change ins = change('I', 0, 0, 4, r0), up = change('U', 0, 0, 4, r0);
	struct env_change del = change('D', 0, 'K', 4, r0);
	static const size_t sizes[][2] = { { 0, 0 }, { 1, 1 }, { 2, 2 }, { 3, 2 }, { 4, 4 }, { 5, 4 }, { 7, 4 },
					   { 8, 8 }, { 100, 64 }, { 255, 128 }, { 256, 256 }, { 511, 256 },
					   { 512, 512 }, { 513, 512 }, { 1100, 512 } };
	for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
		CHECK(plan_set_piece(&rel, &ins, sizes[k][0]) == sizes[k][1]);
		CHECK(plan_set_piece(&rel, &up, sizes[k][0]) == sizes[k][1]);
		CHECK(plan_set_piece(&rel, &del, sizes[k][0]) == sizes[k][1]);
	}
	change_free(&ins);
	change_free(&up);
	change_free(&del);

	/* many columns: 65535 parameters at most */
	static struct env_column wide_cols[MAXC];
	static char names[MAXC][16];
	static const char *types[MAXC];
	static bool key[MAXC];
	static struct env_value row[MAXC];
	for (int i = 0; i < MAXC; i++) {
		snprintf(names[i], sizeof names[i], "c%d", i);
		wide_cols[i] = col(names[i], 23, i == 0);
		types[i] = "integer";
		key[i] = i == 0;
		row[i] = i % 2 ? U : T("7");
	}
	struct env_relation wide = relation("s", "wide", 300, wide_cols);
	struct plan_relation wrel = { &wide, key, NULL, false, types, NULL };
	struct env_change wi = change('I', 0, 0, 300, row), wu = change('U', 0, 0, 300, row);
	struct env_change wd = change('D', 0, 'K', 300, row);
	row[1] = T("7"); /* the insert may not carry unchanged TOAST */
	for (int i = 0; i < 300; i++)
		wi.new_tuple.values[i] = T("7");
	CHECK(plan_set_piece(&wrel, &wi, 1100) == 128); /* 300 per row: 218 fit */
	CHECK(plan_set_piece(&wrel, &wi, 100) == 64);
	CHECK(plan_set_piece(&wrel, &wu, 1100) == 256); /* 150 sent: 436 fit */
	CHECK(plan_set_piece(&wrel, &wd, 1100) == 512); /* the key only */
	struct env_change *cs = calloc(512, sizeof *cs);
	for (int k = 0; k < 512; k++) {
		cs[k] = wi;
		cs[k].new_tuple.values = calloc(300, sizeof *row);
		memcpy(cs[k].new_tuple.values, wi.new_tuple.values, 300 * sizeof *row);
	}
	char (*ids)[16] = calloc(512, sizeof *ids);
	for (int k = 0; k < 512; k++) {
		snprintf(ids[k], sizeof ids[k], "%d", k);
		cs[k].new_tuple.values[0] = T(ids[k]);
	}
	CHECK(plan(&wrel, 1, cs, 128) == 0);
	CHECK(s.n_params == 128 * 300);
	CHECK(plan(&wrel, 1, cs, 218) == 0); /* 65400 parameters */
	CHECK(plan(&wrel, 1, cs, 219) == -1); /* 65700 */
	for (int k = 0; k < 512; k++)
		free(cs[k].new_tuple.values);
	free(cs);
	free(ids);
	change_free(&wi);
	change_free(&wu);
	change_free(&wd);
	struct env_relation wider = relation("s", "wider", 1000, wide_cols);
	wrel.rel = &wider;
	struct env_change xi = change('I', 0, 0, 1000, row);
	CHECK(plan_set_piece(&wrel, &xi, 1100) == 64); /* 65 fit */
	change_free(&xi);
	struct env_relation widest = relation("s", "widest", MAXC, wide_cols);
	wrel.rel = &widest;
	struct env_change yi = change('I', 0, 0, MAXC, row);
	CHECK(plan_set_piece(&wrel, &yi, 1100) == 32); /* 40 fit */
	CHECK(plan_set_piece(&wrel, &yi, 1) == 1);
	change_free(&yi);
}

static void test_compatible(void)
{
	struct env_column cols2[2] = { col("id", 23, true), col("v", 25, false) };
	struct env_relation other = relation("s", "o", 2, cols2);
	bool key2[2] = { true, false };
	struct plan_relation rels[3] = {
		{ &weird, weird_key, NULL, false, weird_types, NULL },
		{ &other, key2, NULL, false, NULL, NULL },
		{ &other, NULL, NULL, false, NULL, NULL }, /* keyless */
	};
	struct env_value a4[4] = { T("1"), T("x"), U, N };
	struct env_value b4[4] = { T("2"), N, U, T("y") }; /* NULLs are sent values */
	struct env_value c4[4] = { T("3"), T("x"), T("big"), N };
	struct env_value a2[2] = { T("1"), T("x") };
	struct env_change ia = change('I', 0, 0, 4, a4), ib = change('I', 0, 0, 4, b4);
	struct env_change ua = change('U', 0, 0, 4, a4), ub = change('U', 0, 0, 4, b4), uc = change('U', 0, 0, 4, c4);
	struct env_change uk = change('U', 0, 'K', 4, a4), uo = change('U', 0, 'O', 4, a4);
	struct env_change dk = change('D', 0, 'K', 4, a4), dof = change('D', 0, 'O', 4, b4);
	struct env_change d0 = change('D', 0, 0, 4, a4);
	struct env_change io = change('I', 1, 0, 2, a2), io2 = change('I', 1, 0, 2, a2);
	struct env_change ikl = change('I', 2, 0, 2, a2), ikl2 = change('I', 2, 0, 2, a2);
	struct env_change bad = change('I', 3, 0, 2, a2);
	struct env_change t = { 0 };
	t.op = 'T';
	CHECK(plan_set_compatible(rels, 3, &ia, &ib));
	CHECK(plan_set_compatible(rels, 3, &ia, &ia));
	CHECK(plan_set_compatible(rels, 3, &io, &io2));
	CHECK(!plan_set_compatible(rels, 3, &ia, &io));   /* other relation */
	CHECK(!plan_set_compatible(rels, 3, &ia, &ua));   /* other op */
	CHECK(!plan_set_compatible(rels, 3, &ua, &dk));
	CHECK(plan_set_compatible(rels, 3, &ikl, &ikl2)); /* keyless inserts: no key needed */
	struct env_change ukl = change('U', 2, 'O', 2, a2), dkl = change('D', 2, 'O', 2, a2);
	CHECK(!plan_set_compatible(rels, 3, &ukl, &ukl)); /* keyless updates and deletes: never */
	CHECK(!plan_set_compatible(rels, 3, &dkl, &dkl));
	change_free(&ukl);
	change_free(&dkl);
	CHECK(!plan_set_compatible(rels, 3, &bad, &bad)); /* relation out of range */
	CHECK(!plan_set_compatible(rels, 2, &ikl, &ikl2));
	CHECK(plan_set_compatible(rels, 3, &ua, &ub));    /* same columns sent */
	CHECK(!plan_set_compatible(rels, 3, &ua, &uc));   /* body sent in one only */
	CHECK(!plan_set_compatible(rels, 3, &uc, &ua));
	CHECK(!plan_set_compatible(rels, 3, &ua, &uk));   /* old key sent: the key changed */
	CHECK(!plan_set_compatible(rels, 3, &uk, &uk));
	CHECK(!plan_set_compatible(rels, 3, &uo, &uo));
	CHECK(plan_set_compatible(rels, 3, &dk, &dof));   /* by key or old row */
	CHECK(plan_set_compatible(rels, 3, &dof, &dk));
	CHECK(!plan_set_compatible(rels, 3, &d0, &d0));   /* a delete without old tuple */
	CHECK(!plan_set_compatible(rels, 3, &dk, &d0));
	CHECK(!plan_set_compatible(rels, 3, &t, &t));
	struct env_change *all[] = { &ia, &ib, &ua, &ub, &uc, &uk, &uo, &dk, &dof, &d0, &io, &io2, &ikl, &ikl2, &bad };
	for (size_t k = 0; k < sizeof all / sizeof *all; k++)
		change_free(all[k]);
}

/* planner_set.c's list of types without equality is planner.c's: for
 * every built-in type OID, both compare a key of it by text or neither. */
static void test_no_equality_agrees(void)
{
	struct env_column cols[1] = { col("k", 0, true) };
	struct env_relation r = relation("s", "k", 1, cols);
	bool key[1] = { true };
	const char *const types[1] = { "sometype" };
	struct plan_relation rel = { &r, key, NULL, false, types, NULL };
	struct env_value v[1] = { T("1") };
	struct env_change d = change('D', 0, 'K', 1, v);
	struct plan_stmt one;
	plan_stmt_init(&one);
	int by_text = 0, mismatches = 0;
	for (uint32_t oid = 0; oid < 10000; oid++) {
		cols[0].type_oid = oid;
		CHECK(plan_change("trellara", &rel, 1, &d, false, &one, err, sizeof err) == 0);
		CHECK(one.expect_one && one.expect_rows == 1);
		CHECK(plan(&rel, 1, &d, 1) == 0);
		bool a = strstr(one.sql.buf, "::text") != NULL, b = strstr(s.sql.buf, "::text") != NULL;
		by_text += a;
		mismatches += a != b;
	}
	CHECK(mismatches == 0);
	CHECK(by_text == 12); /* the list is not empty on either side */
	plan_stmt_free(&one);
	change_free(&d);
}

int main(void)
{
	weird_cols[0] = col("id", 23, true);
	weird_cols[1] = col("na\"me", 25, false);
	weird_cols[2] = col("body", 25, false);
	weird_cols[3] = col("j", 114, false);
	weird = relation("we\"ird", "t a", 4, weird_cols);
	plan_stmt_init(&s);
	test_insert();
	test_copy();
	test_update();
	test_delete();
	test_composite_and_types();
	test_identity();
	test_malformed();
	test_piece();
	test_compatible();
	test_no_equality_agrees();
	plan_stmt_free(&s);
	return unit_done("test_planner_set");
}
