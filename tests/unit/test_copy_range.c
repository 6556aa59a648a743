/*
 * test_copy_range.c - a split table's plan, its ranges' statements and
 * the hash of their COPY bytes (cmd/trellara-snapshot/copy_range.c), no
 * server.
 */
#include "unit.h"

#include "../../cmd/trellara-snapshot/copy.h"

#include "trellara/checkpoint.h"

#include <stdlib.h>

/* the plan covers blocks 0.. without gap or overlap, numbered 1..n */
static void check_plan(uint64_t size, uint64_t split, unsigned workers, int want_n)
{
	int n = -1;
	struct snapshot_range *r = copy_range_plan(size, 8192, split, workers, &n);
	CHECK(n == want_n);
	uint64_t next = 0;
	for (int i = 0; i < n; i++) {
		CHECK(r[i].range_no == i + 1);
		CHECK(r[i].n_ranges == n);
		CHECK(r[i].split_bytes == split);
		CHECK(!r[i].copied);
		CHECK(r[i].first_block == next);
		CHECK(r[i].open_end == (i == n - 1));
		if (i < n - 1) {
			CHECK(r[i].end_block > r[i].first_block);
			next = r[i].end_block;
		}
	}
	/* the last range starts inside the table */
	CHECK(n == 0 || r[n - 1].first_block < size / 8192);
	free(r);
}

int main(void)
{
	/* 26 MB in 4 MiB ranges: 7; 8 for 2 workers, 9 for 3 */
	check_plan(3200 * 8192, 4u << 20, 1, 7);
	check_plan(3200 * 8192, 4u << 20, 2, 8);
	check_plan(3200 * 8192, 4u << 20, 3, 9);
	/* as many ranges as workers or fewer: not rounded up */
	check_plan(3200 * 8192, 4u << 20, 7, 7);
	check_plan(3200 * 8192, 4u << 20, 16, 7);
	/* exactly two ranges' worth, and barely more than one: 2 */
	check_plan(2 * (64u << 20), 64u << 20, 2, 2);
	check_plan((64u << 20) + 8192, 64u << 20, 2, 2);
	/* a table of one block bigger than split_bytes: one range, open */
	check_plan(8192, 100, 2, 1);
	/* no more ranges than blocks, and never more than 10000 */
	check_plan(3 * 8192, 1, 2, 3);
	check_plan(20000ULL * 8192, 8192, 2, 10000);

	struct snapshot_range closed = { .first_block = 10, .end_block = 20 };
	struct snapshot_range open = { .first_block = 20, .open_end = true };
	char *sql = copy_range_sql("a, b", "public.t", &closed, " (FORMAT binary)");
	CHECK_STR(sql, "COPY (SELECT a, b FROM ONLY public.t WHERE ctid >= '(10,0)'::tid AND ctid < '(20,0)'::tid)"
		       " TO STDOUT (FORMAT binary)");
	free(sql);
	sql = copy_range_sql("a", "public.t", &open, "");
	CHECK_STR(sql, "COPY (SELECT a FROM ONLY public.t WHERE ctid >= '(20,0)'::tid) TO STDOUT");
	free(sql);

	/* the hash does not depend on how the bytes came in messages */
	struct copy_hash whole = { 0 }, parts = { 0 }, other = { 0 };
	copy_hash_add(&whole, "row one\nrow two\n", 16);
	copy_hash_add(&parts, "row one\n", 8);
	copy_hash_add(&parts, "row two\n", 8);
	copy_hash_add(&other, "row one\nrow twO\n", 16);
	char a[40], b[40], c[40];
	copy_hash_format(&whole, a, sizeof a);
	copy_hash_format(&parts, b, sizeof b);
	copy_hash_format(&other, c, sizeof c);
	CHECK_STR(a, b);
	CHECK(strcmp(a, c) != 0);
	CHECK(strlen(a) > 18 && a[8] == '-' && a[17] == '-');
	CHECK(strcmp(a + 18, "10") == 0); /* the length, hexadecimal */
	/* CRC-32C of "123456789" is e3069283, zlib's CRC-32 cbf43926 */
	struct copy_hash known = { 0 };
	copy_hash_add(&known, "123456789", 9);
	copy_hash_format(&known, a, sizeof a);
	CHECK_STR(a, "e3069283-cbf43926-9");
	return unit_done("copy_range");
}
