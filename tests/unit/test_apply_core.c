/*
 * test_apply_core.c - applyd's decisions without a target: dedup by
 * commit LSN, the per-relation verdict (configured, below its watermark,
 * a flow table's partition under its own name), key and identity column
 * selection, TRUNCATE filtering, and what a failed statement leads to
 * (reconnect, retry, one at a time, quarantine, and under which reason).
 *
 * Links with common/apply_core.o alone (build/tests/apply_core_nolibpq).
 */
#include "trellara/apply_core.h"
#include "trellara/xalloc.h"
#include "unit.h"

#include <stdlib.h>
#include <string.h>

static char **strs(int n, const char *const *v)
{
	char **out = calloc((size_t)(n ? n : 1), sizeof *out);
	for (int i = 0; i < n; i++)
		out[i] = strdup(v[i]);
	return out;
}

/* public.a (pk id), public.b (watermark 0/100, verify.primary_key "x, y"
 * given as x y), public.parted (partitioned, partitions public.parted_1
 * and sub.parted_2), public.ident (identity column gen) */
static void tables_fixture(struct apply_tables *t)
{
	memset(t, 0, sizeof *t);
	t->n_tables = 4;
	t->tables = calloc(t->n_tables, sizeof *t->tables);
	t->tables[0].name = strdup("public.a");
	t->tables[0].pk = strs(1, (const char *[]){ "id" });
	t->tables[0].n_pk = 1;
	t->tables[1].name = strdup("public.b");
	t->tables[1].pk = strs(2, (const char *[]){ "x", "y" });
	t->tables[1].n_pk = 2;
	t->tables[1].watermark_lsn = 100;
	t->tables[2].name = strdup("public.parted");
	t->tables[2].partitioned = true;
	t->tables[3].name = strdup("public.ident");
	t->tables[3].identity_always = strs(1, (const char *[]){ "gen" });
	t->tables[3].n_identity_always = 1;
	t->n_partitions = 2;
	t->partitions = strs(2, (const char *[]){ "public.parted_1", "sub.parted_2" });
	t->partition_roots = strs(2, (const char *[]){ "public.parted", "public.parted" });
}

static struct env_relation rel(const char *schema, const char *name, uint8_t replident, struct env_column *cols,
			       uint16_t n)
{
	return (struct env_relation){ .schema = schema, .name = name, .schema_len = strlen(schema),
				      .name_len = strlen(name), .replident = replident, .n_columns = n, .columns = cols };
}

static struct env_column col(const char *name, bool key)
{
	return (struct env_column){ .name = name, .name_len = strlen(name), .key = key };
}

static void test_duplicate(void)
{
	CHECK(apply_core_is_duplicate(99, 100));
	CHECK(apply_core_is_duplicate(100, 100)); /* the same commit again */
	CHECK(!apply_core_is_duplicate(101, 100));
	CHECK(!apply_core_is_duplicate(1, 0));    /* nothing applied yet */
	CHECK(apply_core_is_duplicate(0, 0));
	CHECK(!apply_core_is_duplicate(UINT64_MAX, UINT64_MAX - 1));
}

static void test_find(const struct apply_tables *t)
{
	CHECK(apply_tables_find(t, "public", 6, "a", 1) == &t->tables[0]);
	/* lengths, not NUL: "public.ab" is not public.a, nor is "publi.a" */
	CHECK(apply_tables_find(t, "public", 6, "ab", 2) == NULL);
	CHECK(apply_tables_find(t, "publicx", 6, "a", 1) == &t->tables[0]);
	CHECK(apply_tables_find(t, "publi", 5, "a", 1) == NULL);
	CHECK(apply_tables_find(t, "public", 6, "", 0) == NULL);
	CHECK(apply_tables_find(t, "public.a", 8, "", 0) == NULL);
	struct apply_tables empty = { 0 };
	CHECK(apply_tables_find(&empty, "public", 6, "a", 1) == NULL);
	CHECK(apply_tables_copied_below(&empty) == 0);
}

/* The copies cover only what every table's copy holds: the lowest
 * watermark, 0 while one table has none. */
static void test_copied_below(struct apply_tables *t)
{
	CHECK(apply_tables_copied_below(t) == 0);
	uint64_t was[4];
	for (size_t i = 0; i < t->n_tables; i++) {
		was[i] = t->tables[i].watermark_lsn;
		t->tables[i].watermark_lsn = 300 - i * 10;
	}
	CHECK(apply_tables_copied_below(t) == 270);
	for (size_t i = 0; i < t->n_tables; i++)
		t->tables[i].watermark_lsn = was[i];
}

static void test_relation(const struct apply_tables *t)
{
	struct apply_table *table;
	const char *root;
	struct env_relation r = rel("public", "a", 'd', NULL, 0);
	CHECK(apply_core_relation(t, &r, 1, &table, &root) == APPLY_RELATION_APPLY);
	CHECK(table == &t->tables[0] && root == NULL);
	/* watermark 100: below is filtered, at and above applied */
	r = rel("public", "b", 'd', NULL, 0);
	CHECK(apply_core_relation(t, &r, 99, &table, &root) == APPLY_RELATION_BELOW_WATERMARK);
	CHECK(table == &t->tables[1] && root == NULL);
	CHECK(apply_core_relation(t, &r, 100, &table, &root) == APPLY_RELATION_APPLY);
	CHECK(apply_core_relation(t, &r, 101, &table, &root) == APPLY_RELATION_APPLY);
	/* outside the flow */
	r = rel("public", "other", 'd', NULL, 0);
	CHECK(apply_core_relation(t, &r, 500, &table, &root) == APPLY_RELATION_UNCONFIGURED);
	CHECK(table == NULL && root == NULL);
	r = rel("other", "a", 'd', NULL, 0);
	CHECK(apply_core_relation(t, &r, 500, &table, &root) == APPLY_RELATION_UNCONFIGURED);
	/* a partition under its own name, at any level and schema */
	r = rel("public", "parted_1", 'd', NULL, 0);
	CHECK(apply_core_relation(t, &r, 500, &table, &root) == APPLY_RELATION_UNPUBLISHED_PARTITION);
	CHECK(table == NULL);
	CHECK_STR(root, "public.parted");
	r = rel("sub", "parted_2", 'd', NULL, 0);
	CHECK(apply_core_relation(t, &r, 0, &table, &root) == APPLY_RELATION_UNPUBLISHED_PARTITION);
	r = rel("public", "parted_2", 'd', NULL, 0);
	CHECK(apply_core_relation(t, &r, 500, &table, &root) == APPLY_RELATION_UNCONFIGURED);
	/* the partitioned root itself is a flow table */
	r = rel("public", "parted", 'd', NULL, 0);
	CHECK(apply_core_relation(t, &r, 500, &table, &root) == APPLY_RELATION_APPLY);
	CHECK(table == &t->tables[2] && table->partitioned);
	/* nothing configured */
	struct apply_tables empty = { 0 };
	r = rel("public", "a", 'd', NULL, 0);
	CHECK(apply_core_relation(&empty, &r, 500, &table, &root) == APPLY_RELATION_UNCONFIGURED);
}

static void test_keys(const struct apply_tables *t)
{
	struct env_column cols[4] = { col("x", false), col("id", true), col("y", false), col("xy", true) };
	bool key[4] = { true, true, true, true };
	/* replica identity default: the relation's key flags */
	struct env_relation r = rel("public", "b", 'd', cols, 4);
	CHECK(apply_core_key_columns(&t->tables[1], &r, key));
	CHECK(!key[0] && key[1] && !key[2] && key[3]);
	/* replica identity full: the flow's / the target's key columns, by exact name */
	r.replident = 'f';
	memset(key, 1, sizeof key);
	CHECK(apply_core_key_columns(&t->tables[1], &r, key));
	CHECK(key[0] && !key[1] && key[2] && !key[3]);
	CHECK(apply_core_key_columns(&t->tables[0], &r, key));
	CHECK(!key[0] && key[1] && !key[2] && !key[3]);
	/* full, and no key column present: none (match on every column) */
	CHECK(!apply_core_key_columns(&t->tables[2], &r, key));
	CHECK(!key[0] && !key[1] && !key[2] && !key[3]);
	struct env_column only_z[1] = { col("z", true) };
	r = rel("public", "b", 'f', only_z, 1);
	CHECK(!apply_core_key_columns(&t->tables[1], &r, key));
	CHECK(!key[0]);
	/* identity nothing / index with no flagged column: none */
	struct env_column plain[2] = { col("id", false), col("v", false) };
	r = rel("public", "a", 'n', plain, 2);
	CHECK(!apply_core_key_columns(&t->tables[0], &r, key));
	r.replident = 'i';
	plain[1].key = true;
	CHECK(apply_core_key_columns(&t->tables[0], &r, key));
	CHECK(!key[0] && key[1]);
	/* no columns at all */
	r = rel("public", "a", 'f', NULL, 0);
	CHECK(!apply_core_key_columns(&t->tables[0], &r, key));
}

static void test_identity(const struct apply_tables *t)
{
	struct env_column cols[3] = { col("id", true), col("gen", false), col("gener", false) };
	bool mask[3] = { true, true, true };
	struct env_relation r = rel("public", "ident", 'd', cols, 3);
	CHECK(apply_core_identity_always(&t->tables[3], &r, mask));
	CHECK(!mask[0] && mask[1] && !mask[2]);
	memset(mask, 1, sizeof mask);
	CHECK(!apply_core_identity_always(&t->tables[0], &r, mask));
	CHECK(!mask[0] && !mask[1] && !mask[2]);
	struct env_column other[1] = { col("id", true) };
	r = rel("public", "ident", 'd', other, 1);
	CHECK(!apply_core_identity_always(&t->tables[3], &r, mask));
}

/* A unique index's columns, by exact name, in the index's order; an
 * index naming a column the relation does not have gives -1. */
static void test_unique(void)
{
	struct apply_table t = { 0 };
	char *ab[2] = { xstrdup("b"), xstrdup("a") };
	char *zz[1] = { xstrdup("z") };
	struct apply_unique u[2] = { { ab, 2 }, { zz, 1 } };
	t.unique = u;
	t.n_unique = 2;
	struct env_column cols[3] = { col("a", true), col("bb", false), col("b", false) };
	struct env_relation r = rel("public", "u", 'd', cols, 3);
	uint16_t out[4] = { 9, 9, 9, 9 };
	CHECK(apply_core_unique_columns(&t, &r, 0, out) == 2);
	CHECK(out[0] == 2 && out[1] == 0); /* "b" is column 2, not the prefix match "bb" */
	CHECK(apply_core_unique_columns(&t, &r, 1, out) == -1);
	CHECK(apply_core_unique_columns(&t, &r, 2, out) == -1);
	CHECK(apply_core_unique_columns(&t, &r, -1, out) == -1);
	free(ab[0]);
	free(ab[1]);
	free(zz[0]);
}

/* The target's types, matched by column name (the envelope's order need
 * not be the target's), and what compaction does with a table. */
static void test_fold_facts(void)
{
	struct apply_table t = { 0 };
	t.columns = strs(3, (const char *[]){ "id", "note", "at" });
	t.column_types = strs(3, (const char *[]){ "integer", "character varying(20)", "timestamp with time zone" });
	t.n_columns = 3;
	struct env_column cols[3] = { col("at", false), col("id", true), col("gone", false) };
	struct env_relation r = rel("public", "a", 'd', cols, 3);
	const char *types[3] = { "x", "x", "x" };
	CHECK(!apply_core_column_types(&t, &r, types, NULL));
	CHECK_STR(types[0], "timestamp with time zone");
	CHECK_STR(types[1], "integer");
	CHECK(types[2] == NULL);
	r.n_columns = 2;
	CHECK(apply_core_column_types(&t, &r, types, NULL));
	/* a prefix of a name is not the name */
	struct env_column prefix[1] = { col("no", false) };
	r = rel("public", "a", 'd', prefix, 1);
	CHECK(!apply_core_column_types(&t, &r, types, NULL) && types[0] == NULL);
	struct apply_table none = { 0 };
	CHECK(!apply_core_column_types(&none, &r, types, NULL) && types[0] == NULL);
	/* the equality operators outside pg_catalog (citext's), by name too */
	char *eq_ops[3] = { NULL, xstrdup("OPERATOR(public.=)"), NULL };
	t.column_eq = eq_ops;
	struct env_column named[2] = { col("note", false), col("id", true) };
	r = rel("public", "a", 'd', named, 2);
	const char *eq[2] = { "x", "x" };
	CHECK(apply_core_column_types(&t, &r, types, eq));
	CHECK_STR(eq[0], "OPERATOR(public.=)");
	CHECK(eq[1] == NULL);
	t.column_eq = NULL; /* none known: all NULL */
	eq[0] = "x";
	CHECK(apply_core_column_types(&t, &r, types, eq) && eq[0] == NULL && eq[1] == NULL);
	free(eq_ops[1]);

	t.compaction = true;
	CHECK(apply_core_fold_mode(&t, true) == APPLY_FOLD_MERGE);
	CHECK(apply_core_fold_mode(&t, false) == APPLY_FOLD_KEEP_ORDER);
	t.replica_triggers = true;
	CHECK(apply_core_fold_mode(&t, true) == APPLY_FOLD_BARRIER);
	CHECK(apply_core_fold_mode(&t, false) == APPLY_FOLD_BARRIER);
	t.replica_triggers = false;
	t.compaction = false;
	CHECK(apply_core_fold_mode(&t, true) == APPLY_FOLD_BARRIER);
	struct apply_tables owner = { .tables = &t, .n_tables = 1 };
	struct apply_table *heap = xcalloc(1, sizeof *heap);
	*heap = t;
	owner.tables = heap;
	apply_tables_free(&owner); /* frees the columns and their types */
}

static void test_truncate(void)
{
	enum apply_relation_verdict v[4] = { APPLY_RELATION_APPLY, APPLY_RELATION_BELOW_WATERMARK,
					     APPLY_RELATION_UNCONFIGURED, APPLY_RELATION_APPLY };
	uint32_t kept[4] = { 99, 99, 99, 99 };
	uint32_t all[4] = { 3, 2, 1, 0 };
	CHECK(apply_core_truncate_filter(v, all, 4, kept) == 2);
	CHECK(kept[0] == 3 && kept[1] == 0); /* in the TRUNCATE's order */
	uint32_t none[2] = { 1, 2 };
	CHECK(apply_core_truncate_filter(v, none, 2, kept) == 0);
	CHECK(apply_core_truncate_filter(v, none, 0, kept) == 0);
	uint32_t one[1] = { 0 };
	CHECK(apply_core_truncate_filter(v, one, 1, kept) == 1 && kept[0] == 0);
}

/* the target's state: retried (issue list: deadlock, serialization, lock
 * and statement timeouts, disk full, too many connections, standby, I/O);
 * the session going away (admin shutdown, crash, recovery, class 08):
 * reconnected; the transaction's own doing: quarantined */
static const char *const transient[] = { "40P01", "40001", "40003", "55P03", "57014", "53100", "53300",
					 "25006", "58030" };
static const char *const gone[] = { "57P01", "57P02", "57P03", "08006", "08003", "08P01" };
static const char *const own[] = { "23505", "23503", "23502", "42P01", "42703", "428C9", "22P02", "53200",
				   "53400", "TR001", "TR002", "TR003", "XX000", "40P0", "40P011", "" };

static void test_sqlstates(void)
{
	for (size_t i = 0; i < sizeof transient / sizeof *transient; i++) {
		CHECK(apply_core_on_failure(false, transient[i], false) == APPLY_FAILURE_RETRY);
		CHECK(apply_core_on_failure(false, transient[i], true) == APPLY_FAILURE_RETRY);
	}
	for (size_t i = 0; i < sizeof own / sizeof *own; i++) {
		CHECK(apply_core_on_failure(false, own[i], false) == APPLY_FAILURE_ONE_AT_A_TIME);
		CHECK(apply_core_on_failure(false, own[i], true) == APPLY_FAILURE_QUARANTINE);
	}
	for (size_t i = 0; i < sizeof gone / sizeof *gone; i++) {
		CHECK(apply_core_on_failure(false, gone[i], false) == APPLY_FAILURE_RECONNECT);
		CHECK(apply_core_on_failure(false, gone[i], true) == APPLY_FAILURE_RECONNECT);
	}
	/* a lost connection comes first, whatever the state says */
	CHECK(apply_core_on_failure(true, "23505", true) == APPLY_FAILURE_RECONNECT);
	CHECK(apply_core_on_failure(true, "40P01", false) == APPLY_FAILURE_RECONNECT);
	CHECK(apply_core_on_failure(true, "", false) == APPLY_FAILURE_RECONNECT);

	CHECK_STR(apply_core_quarantine_reason("42P01"), "missing_table");
	CHECK_STR(apply_core_quarantine_reason(SQLSTATE_NO_ROWS_MATCHED), "no_rows_matched");
	CHECK_STR(apply_core_quarantine_reason(SQLSTATE_AMBIGUOUS_MATCH), "ambiguous_match");
	CHECK_STR(apply_core_quarantine_reason("23505"), "constraint_violation");
	CHECK_STR(apply_core_quarantine_reason("23503"), "constraint_violation");
	CHECK_STR(apply_core_quarantine_reason("23"), "constraint_violation");
	CHECK_STR(apply_core_quarantine_reason("42703"), "missing_column");
	CHECK_STR(apply_core_quarantine_reason(SQLSTATE_UNPLANNABLE), "apply_error");
	CHECK_STR(apply_core_quarantine_reason("42P0"), "apply_error");
	CHECK_STR(apply_core_quarantine_reason("2"), "apply_error");
	CHECK_STR(apply_core_quarantine_reason(""), "apply_error");
}

int main(void)
{
	struct apply_tables t;
	tables_fixture(&t);
	test_duplicate();
	test_find(&t);
	test_copied_below(&t);
	test_relation(&t);
	test_keys(&t);
	test_identity(&t);
	test_fold_facts();
	test_unique();
	test_truncate();
	test_sqlstates();
	apply_tables_free(&t);
	CHECK(t.n_tables == 0 && t.tables == NULL && t.n_partitions == 0);
	apply_tables_free(&t); /* twice: empty */
	return unit_done("apply_core");
}
