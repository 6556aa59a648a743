/*
 * test_sim_db.c - the simulator's model database: rows sorted by key,
 * inserts, updates (unchanged-TOAST columns kept, key moves, conflicts),
 * deletes, truncate, clone independence, equality, the first difference
 * and the digest; and the seeded generator (sim_rng).  Also a seeded
 * random workload checked against a naive reference (a flat list).
 */
#include "sim_db.h"
#include "sim_rng.h"
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define V(...) ((struct sim_values){ (const char *const[]){ __VA_ARGS__ }, \
	(uint16_t)(sizeof((const char *const[]){ __VA_ARGS__ }) / sizeof(const char *)) })

static const char *const cols3[] = { "id", "a", "b" };
static const char *const cols4[] = { "k1", "k2", "a", "b" };

static struct sim_db *two_tables(void)
{
	struct sim_db *db = sim_db_new();
	CHECK(sim_db_create_table(db, "public.t1", 3, cols3, 1) == 0);
	CHECK(sim_db_create_table(db, "public.pair", 4, cols4, 2) == 0);
	return db;
}

static void test_basic(void)
{
	struct sim_db *db = two_tables();
	CHECK(sim_db_create_table(db, "public.t1", 3, cols3, 1) == -1);
	CHECK(sim_db_has_table(db, "public.t1"));
	CHECK(!sim_db_has_table(db, "public.t9"));
	uint16_t n_key = 9;
	const char *const *cols = NULL;
	CHECK(sim_db_columns(db, "public.pair", &n_key, &cols) == 4 && n_key == 2 && strcmp(cols[1], "k2") == 0);
	CHECK(sim_db_columns(db, "public.none", &n_key, &cols) == 0 && n_key == 0 && cols == NULL);
	CHECK(sim_db_tables(db) == 2);
	CHECK_STR(sim_db_table_name(db, 0), "public.pair"); /* sorted by name */
	CHECK(sim_db_table_name(db, 2) == NULL);

	CHECK(sim_db_insert(db, "public.t1", V("2", "two", NULL)) == 1);
	CHECK(sim_db_insert(db, "public.t1", V("1", "one", "x")) == 1);
	CHECK(sim_db_insert(db, "public.t1", V("3", NULL, "y")) == 1);
	CHECK(sim_db_insert(db, "public.t1", V("2", "again", NULL)) == -1); /* key conflict */
	CHECK(sim_db_insert(db, "public.none", V("2", "x", NULL)) == -1);
	CHECK(sim_db_insert(db, "public.t1", V("4", "x")) == -1);          /* wrong column count */
	CHECK(sim_db_rows(db, "public.t1") == 3);
	/* key order */
	CHECK_STR(sim_db_row(db, "public.t1", 0)[0], "1");
	CHECK_STR(sim_db_row(db, "public.t1", 1)[0], "2");
	CHECK_STR(sim_db_row(db, "public.t1", 2)[0], "3");
	CHECK(sim_db_row(db, "public.t1", 3) == NULL);
	const char *const *row = sim_db_find(db, "public.t1", V("2"));
	CHECK(row && strcmp(row[1], "two") == 0 && row[2] == NULL);
	CHECK(sim_db_find(db, "public.t1", V("7")) == NULL);

	/* update keeping b (unchanged TOAST) */
	bool keep_b[3] = { false, false, true };
	CHECK(sim_db_update(db, "public.t1", V("1"), V("1", "uno", NULL), keep_b) == 1);
	row = sim_db_find(db, "public.t1", V("1"));
	CHECK(row && strcmp(row[1], "uno") == 0 && row[2] && strcmp(row[2], "x") == 0);
	/* plain update sets NULL */
	CHECK(sim_db_update(db, "public.t1", V("1"), V("1", "uno", NULL), NULL) == 1);
	row = sim_db_find(db, "public.t1", V("1"));
	CHECK(row && row[2] == NULL);
	/* key move, with a kept column */
	CHECK(sim_db_update(db, "public.t1", V("3"), V("9", "nine", NULL), keep_b) == 1);
	CHECK(sim_db_find(db, "public.t1", V("3")) == NULL);
	row = sim_db_find(db, "public.t1", V("9"));
	CHECK(row && strcmp(row[1], "nine") == 0 && row[2] && strcmp(row[2], "y") == 0);
	CHECK_STR(sim_db_row(db, "public.t1", 2)[0], "9");
	/* move onto a taken key: refused, nothing changes */
	CHECK(sim_db_update(db, "public.t1", V("9"), V("1", "z", "z"), NULL) == -1);
	CHECK(sim_db_find(db, "public.t1", V("9")) != NULL);
	CHECK(strcmp(sim_db_find(db, "public.t1", V("1"))[1], "uno") == 0);
	/* missing row */
	CHECK(sim_db_update(db, "public.t1", V("42"), V("42", "a", "b"), NULL) == 0);
	CHECK(sim_db_delete(db, "public.t1", V("42")) == 0);
	CHECK(sim_db_delete(db, "public.t1", V("2")) == 1);
	CHECK(sim_db_rows(db, "public.t1") == 2);

	/* two-column key: NULL sorts first, then by bytes */
	CHECK(sim_db_insert(db, "public.pair", V("1", "b", "x", "y")) == 1);
	CHECK(sim_db_insert(db, "public.pair", V("1", "a", "x", "y")) == 1);
	CHECK(sim_db_insert(db, "public.pair", V("1", NULL, "x", "y")) == 1);
	CHECK(sim_db_insert(db, "public.pair", V("1", "a", "dup", "y")) == -1);
	CHECK(sim_db_row(db, "public.pair", 0)[1] == NULL);
	CHECK_STR(sim_db_row(db, "public.pair", 1)[1], "a");
	CHECK(sim_db_find(db, "public.pair", V("1", "b")) != NULL);
	CHECK(sim_db_find(db, "public.pair", V("1")) == NULL); /* wrong key width */

	sim_db_truncate(db, "public.pair");
	CHECK(sim_db_rows(db, "public.pair") == 0);
	CHECK(sim_db_rows(db, "public.t1") == 2);
	sim_db_free(db);
}

static void test_compare(void)
{
	struct sim_db *a = two_tables();
	CHECK(sim_db_insert(a, "public.t1", V("1", "one", "x")) == 1);
	CHECK(sim_db_insert(a, "public.t1", V("2", "two", NULL)) == 1);
	struct sim_db *b = sim_db_clone(a);
	char line[256];
	CHECK(sim_db_equal(a, b));
	CHECK(!sim_db_diff(a, b, line, sizeof line));
	CHECK(sim_db_digest(a) == sim_db_digest(b));

	/* the clone is independent */
	CHECK(sim_db_update(b, "public.t1", V("2"), V("2", "two", ""), NULL) == 1);
	CHECK(sim_db_find(a, "public.t1", V("2"))[2] == NULL);
	CHECK(!sim_db_equal(a, b));
	CHECK(sim_db_diff(a, b, line, sizeof line));
	CHECK_STR(line, "table public.t1: key (2): column b: NULL vs \"\"");
	CHECK(sim_db_digest(a) != sim_db_digest(b)); /* NULL and "" differ */

	CHECK(sim_db_update(b, "public.t1", V("2"), V("2", "two", NULL), NULL) == 1);
	CHECK(sim_db_equal(a, b));
	CHECK(sim_db_delete(b, "public.t1", V("1")) == 1);
	CHECK(sim_db_diff(a, b, line, sizeof line));
	CHECK_STR(line, "table public.t1: key (1): row only in the first");
	CHECK(sim_db_insert(b, "public.t1", V("1", "one", "x")) == 1);
	CHECK(sim_db_insert(b, "public.t1", V("0", "zero", "x")) == 1);
	CHECK(sim_db_diff(a, b, line, sizeof line));
	CHECK_STR(line, "table public.t1: key (0): row only in the second");
	CHECK(sim_db_delete(b, "public.t1", V("0")) == 1);
	CHECK(sim_db_equal(a, b));

	/* a table only on one side, and the same rows under another shape */
	static const char *const other[] = { "id", "a", "c" };
	CHECK(sim_db_create_table(b, "public.t0", 3, cols3, 1) == 0);
	CHECK(sim_db_diff(a, b, line, sizeof line));
	CHECK_STR(line, "table public.t0: only in the second");
	struct sim_db *c = sim_db_new(), *d = sim_db_new();
	CHECK(sim_db_create_table(c, "public.t1", 3, cols3, 1) == 0);
	CHECK(sim_db_create_table(d, "public.t1", 3, other, 1) == 0);
	CHECK(sim_db_diff(c, d, line, sizeof line));
	CHECK_STR(line, "table public.t1: column 3 is \"b\" vs \"c\"");
	CHECK(sim_db_digest(c) != sim_db_digest(d));
	/* values split differently digest differently */
	CHECK(sim_db_create_table(c, "public.x", 2, cols3, 1) == 0);
	CHECK(sim_db_create_table(d, "public.x", 2, cols3, 1) == 0);
	struct sim_db *e = sim_db_clone(c);
	CHECK(sim_db_insert(c, "public.x", V("ab", "c")) == 1);
	CHECK(sim_db_insert(e, "public.x", V("a", "bc")) == 1);
	CHECK(sim_db_digest(c) != sim_db_digest(e));
	sim_db_free(a);
	sim_db_free(b);
	sim_db_free(c);
	sim_db_free(d);
	sim_db_free(e);
}

/* A naive reference: an unsorted list of (key, value) for one table. */
struct ref_row {
	char key[16];
	char val[16];
	bool live;
};

static void test_random_against_reference(void)
{
	for (uint64_t seed = 1; seed <= 40; seed++) {
		struct sim_rng rng;
		sim_rng_seed(&rng, seed);
		static const char *const cols[] = { "id", "v" };
		struct sim_db *db = sim_db_new();
		CHECK(sim_db_create_table(db, "s.t", 2, cols, 1) == 0);
		struct ref_row ref[64];
		memset(ref, 0, sizeof ref);
		for (int step = 0; step < 400; step++) {
			int k = (int)sim_rng_below(&rng, 64);
			char key[16], val[16];
			snprintf(key, sizeof key, "%d", k);
			snprintf(val, sizeof val, "v%d", (int)sim_rng_below(&rng, 1000));
			struct sim_values kv = { (const char *const[]){ key }, 1 };
			struct sim_values row = { (const char *const[]){ key, val }, 2 };
			switch (sim_rng_below(&rng, 4)) {
			case 0:
				CHECK(sim_db_insert(db, "s.t", row) == (ref[k].live ? -1 : 1));
				if (!ref[k].live) {
					ref[k].live = true;
					snprintf(ref[k].val, sizeof ref[k].val, "%s", val);
				}
				break;
			case 1:
				CHECK(sim_db_update(db, "s.t", kv, row, NULL) == (ref[k].live ? 1 : 0));
				if (ref[k].live)
					snprintf(ref[k].val, sizeof ref[k].val, "%s", val);
				break;
			case 2:
				CHECK(sim_db_delete(db, "s.t", kv) == (ref[k].live ? 1 : 0));
				ref[k].live = false;
				break;
			default: { /* move to another key */
				int to = (int)sim_rng_below(&rng, 64);
				char nkey[16];
				snprintf(nkey, sizeof nkey, "%d", to);
				struct sim_values moved = { (const char *const[]){ nkey, val }, 2 };
				int want = !ref[k].live ? 0 : (to != k && ref[to].live) ? -1 : 1;
				CHECK(sim_db_update(db, "s.t", kv, moved, NULL) == want);
				if (want == 1) {
					ref[k].live = false;
					ref[to].live = true;
					snprintf(ref[to].val, sizeof ref[to].val, "%s", val);
				}
			}
			}
		}
		size_t live = 0;
		for (int k = 0; k < 64; k++) {
			char key[16];
			snprintf(key, sizeof key, "%d", k);
			const char *const *r = sim_db_find(db, "s.t", (struct sim_values){ (const char *const[]){ key }, 1 });
			CHECK((r != NULL) == ref[k].live);
			if (r && ref[k].live)
				CHECK(strcmp(r[1], ref[k].val) == 0);
			live += ref[k].live;
		}
		CHECK(sim_db_rows(db, "s.t") == live);
		for (size_t i = 1; i < sim_db_rows(db, "s.t"); i++)
			CHECK(strcmp(sim_db_row(db, "s.t", i - 1)[0], sim_db_row(db, "s.t", i)[0]) < 0);
		sim_db_free(db);
	}
}

static void test_rng(void)
{
	struct sim_rng a, b;
	sim_rng_seed(&a, 7);
	sim_rng_seed(&b, 7);
	bool same = true;
	for (int i = 0; i < 100; i++)
		same = same && sim_rng_next(&a) == sim_rng_next(&b);
	CHECK(same);
	sim_rng_seed(&b, 8);
	CHECK(sim_rng_next(&a) != sim_rng_next(&b));
	/* splitmix64's published first output for seed 0 */
	sim_rng_seed(&a, 0);
	CHECK(sim_rng_next(&a) == 0xE220A8397B1DCDAFULL);
	int hits = 0, seen[10] = { 0 };
	for (int i = 0; i < 10000; i++) {
		uint64_t x = sim_rng_below(&a, 10);
		CHECK(x < 10);
		seen[x < 10 ? x : 0]++;
		hits += sim_rng_chance(&a, 30);
	}
	for (int i = 0; i < 10; i++)
		CHECK(seen[i] > 800 && seen[i] < 1200);
	CHECK(hits > 2700 && hits < 3300);
	CHECK(!sim_rng_chance(&a, 0) && sim_rng_chance(&a, 100));
	CHECK(sim_rng_below(&a, 0) == 0);
	CHECK(sim_rng_between(&a, 5, 5) == 5);
	for (int i = 0; i < 100; i++) {
		uint64_t x = sim_rng_between(&a, 3, 6);
		CHECK(x >= 3 && x <= 6);
	}
}

int main(void)
{
	test_basic();
	test_compare();
	test_random_against_reference();
	test_rng();
	return unit_done("test_sim_db");
}
