#!/usr/bin/env bats
# PostgreSQL's src/test/subscription/t/013_partition.pl through a flow:
# partitioned tables with different layouts on the two sides.  The flow
# publishes through the root (publish_via_partition_root = true), so the
# target routes each row into its own partitions: inserts, updates that
# move a row to another partition on the source or on the target only,
# deletes, TRUNCATE of the root; a partitioned source into a plain target
# table and a plain source into a partitioned target; sub-partitions and
# a default partition.  A publication that sends partitions under their
# own names is refused.

load helpers/conformance

@test "013: source LIST partitions into target RANGE partitions (sub-partitioned, with a default): inserts, cross-partition updates, deletes, TRUNCATE; verify CONVERGED" {
	psql_source "CREATE TABLE tab1 (a int PRIMARY KEY, b text) PARTITION BY LIST (a)" \
		"CREATE TABLE tab1_1 PARTITION OF tab1 FOR VALUES IN (1, 2, 3)" \
		"CREATE TABLE tab1_2 PARTITION OF tab1 FOR VALUES IN (4, 5, 6)" \
		"CREATE TABLE tab1_def PARTITION OF tab1 DEFAULT"
	psql_target "CREATE TABLE tab1 (b text, a int NOT NULL, PRIMARY KEY (a)) PARTITION BY RANGE (a)" \
		"CREATE TABLE tab1_low PARTITION OF tab1 FOR VALUES FROM (MINVALUE) TO (3)" \
		"CREATE TABLE tab1_mid PARTITION OF tab1 FOR VALUES FROM (3) TO (10) PARTITION BY LIST (a)" \
		"CREATE TABLE tab1_mid_a PARTITION OF tab1_mid FOR VALUES IN (3, 4, 5)" \
		"CREATE TABLE tab1_mid_b PARTITION OF tab1_mid DEFAULT" \
		"CREATE TABLE tab1_rest PARTITION OF tab1 DEFAULT"
	psql_source "INSERT INTO tab1 VALUES (1, 'one'), (0, 'zero')"
	conf_flow public.tab1 "tab1 WITH (publish_via_partition_root = true)"
	conf_run
	psql_source "INSERT INTO tab1 VALUES (2, 'two'), (3, 'three'), (5, 'five'), (7, 'seven'), (15, 'fifteen')"
	conf_synced
	[ "$(psql_target "SELECT string_agg(tableoid::regclass || ':' || a, ',' ORDER BY a) FROM tab1")" = \
		"tab1_low:0,tab1_low:1,tab1_low:2,tab1_mid_a:3,tab1_mid_a:5,tab1_mid_b:7,tab1_rest:15" ]
	# updates: 1 -> 6 moves partitions on both sides; 5 -> 4 only on the
	# target is it in the same partition; 7 -> 2 (after 2 is deleted) crosses on both
	psql_source "UPDATE tab1 SET a = 6 WHERE a = 1" "UPDATE tab1 SET a = 4, b = 'four' WHERE a = 5" \
		"DELETE FROM tab1 WHERE a = 2" "UPDATE tab1 SET a = 2 WHERE a = 7" \
		"UPDATE tab1 SET b = 'unchanged key' WHERE a = 15"
	conf_synced
	[ "$(psql_source "SELECT string_agg(a || b, ',' ORDER BY a) FROM tab1")" = \
		"0zero,2seven,3three,4four,6one,15unchanged key" ]
	[ "$(psql_target "SELECT string_agg(tableoid::regclass || ':' || a, ',' ORDER BY a) FROM tab1")" = \
		"tab1_low:0,tab1_low:2,tab1_mid_a:3,tab1_mid_a:4,tab1_mid_b:6,tab1_rest:15" ]
	assert_tables_equal "(SELECT a, b FROM tab1) t"
	assert_converged
	psql_source "TRUNCATE tab1"
	conf_synced
	[ "$(psql_target "SELECT count(*) FROM tab1")" -eq 0 ]
	conf_stop
}

@test "013: a partitioned source into a plain target table, and a plain source into a partitioned target; verify CONVERGED" {
	psql_source "CREATE TABLE tab2 (a int PRIMARY KEY, b text) PARTITION BY RANGE (a)" \
		"CREATE TABLE tab2_1 PARTITION OF tab2 FOR VALUES FROM (0) TO (10)" \
		"CREATE TABLE tab2_2 PARTITION OF tab2 FOR VALUES FROM (10) TO (100)" \
		"CREATE TABLE tab3 (a int PRIMARY KEY, b text)"
	psql_target "CREATE TABLE tab2 (a int PRIMARY KEY, b text)" \
		"CREATE TABLE tab3 (a int PRIMARY KEY, b text) PARTITION BY HASH (a)" \
		"CREATE TABLE tab3_0 PARTITION OF tab3 FOR VALUES WITH (MODULUS 2, REMAINDER 0)" \
		"CREATE TABLE tab3_1 PARTITION OF tab3 FOR VALUES WITH (MODULUS 2, REMAINDER 1)"
	psql_source "INSERT INTO tab2 SELECT g, 'v' || g FROM generate_series(1, 20) g" \
		"INSERT INTO tab3 SELECT g, 'w' || g FROM generate_series(1, 20) g"
	conf_flow "public.tab2,public.tab3" "tab2, tab3 WITH (publish_via_partition_root = true)"
	conf_run
	psql_source "UPDATE tab2 SET a = a + 50 WHERE a < 5" "DELETE FROM tab2 WHERE a BETWEEN 10 AND 12" \
		"UPDATE tab3 SET a = a + 100 WHERE a % 3 = 0" "DELETE FROM tab3 WHERE a = 1" \
		"INSERT INTO tab2 VALUES (99, 'new')" "INSERT INTO tab3 VALUES (99, 'new')"
	conf_synced
	assert_tables_equal tab2 tab3
	[ "$(psql_target "SELECT count(*) FROM tab2")" -eq 18 ]
	[ "$(psql_target "SELECT count(*) FROM tab3")" -eq 20 ]
	[ "$(psql_target "SELECT count(*) FROM tab3_0")" -gt 0 ]
	[ "$(psql_target "SELECT count(*) FROM tab3_1")" -gt 0 ]
	assert_converged
	conf_stop
}

@test "013: refused by design: a partitioned table published under its partitions' names (publish_via_partition_root off); a partition listed beside its root" {
	both "CREATE TABLE tab1 (a int PRIMARY KEY, b text) PARTITION BY LIST (a)" \
		"CREATE TABLE tab1_1 PARTITION OF tab1 FOR VALUES IN (1, 2, 3)"
	conf_flow public.tab1 tab1
	check_blocker publication_table public.tab1
	[[ $(jq -r .detail <<<"$CHECK_ITEM") == *"publish_via_partition_root is off"* ]]
	[[ $(jq -r .fix <<<"$CHECK_ITEM") == *"SET (publish_via_partition_root = true)"* ]]
	psql_source "ALTER PUBLICATION $PUBLICATION_NAME SET (publish_via_partition_root = true)"
	conf_flow_file "public.tab1,public.tab1_1"
	check_blocker partition_listed public.tab1_1
	[[ $(jq -r .detail <<<"$CHECK_ITEM") == *"is a partition of public.tab1"* ]]
}
