#!/usr/bin/env bats
# From PostgreSQL's src/test/subscription/t/100_bugs.pl, the cases a CDC
# pipeline meets too: a publisher index on a function of another schema
# (bug #15114: decoding must not fail on it), REPLICA IDENTITY FULL with a
# dropped column, with a column added with a default (a "missing"
# attribute the old rows do not store), and with a TOASTed value; a
# table whose name needs quoting.

load helpers/conformance

@test "100: an expression index on a function of another schema on the source does not stop decoding (bug #15114)" {
	both "CREATE TABLE tab1 (a int PRIMARY KEY)"
	psql_source "CREATE SCHEMA s" "CREATE FUNCTION s.double(x int) RETURNS int IMMUTABLE LANGUAGE SQL AS 'select x * 2'" \
		"CREATE INDEX ON tab1 (s.double(a))"
	conf_flow public.tab1
	conf_run
	psql_source "INSERT INTO tab1 VALUES (1)" "INSERT INTO tab1 VALUES (2)" "UPDATE tab1 SET a = 3 WHERE a = 1"
	conf_synced
	[ "$(psql_target "SELECT string_agg(a::text, ',' ORDER BY a) FROM tab1")" = "2,3" ]
	assert_converged
	conf_stop
}

@test "100: REPLICA IDENTITY FULL with a dropped column, a column added with a default, and a TOASTed value: updates and deletes match; verify CONVERGED" {
	both "CREATE TABLE dropped_cols (a int, b_drop int, c int)" "ALTER TABLE dropped_cols REPLICA IDENTITY FULL" \
		"ALTER TABLE dropped_cols DROP COLUMN b_drop" \
		"CREATE TABLE missing_attr (a int)" "ALTER TABLE missing_attr REPLICA IDENTITY FULL" \
		"CREATE TABLE toasted (a int, b text)" "ALTER TABLE toasted REPLICA IDENTITY FULL" \
		"ALTER TABLE toasted ALTER COLUMN b SET STORAGE EXTERNAL"
	psql_source "INSERT INTO dropped_cols VALUES (1, 1), (2, 2)" "INSERT INTO missing_attr VALUES (1), (2)" \
		"INSERT INTO toasted VALUES (1, repeat('1234567890', 20000)), (2, 'short')"
	conf_flow "public.dropped_cols,public.missing_attr,public.toasted"
	conf_run
	# rows written before the column existed store no value for it
	both "ALTER TABLE missing_attr ADD COLUMN b int DEFAULT 5"
	psql_source "UPDATE dropped_cols SET a = 100 WHERE a = 1" "DELETE FROM dropped_cols WHERE a = 2" \
		"UPDATE missing_attr SET a = 100 WHERE a = 1" "DELETE FROM missing_attr WHERE a = 2" \
		"UPDATE toasted SET a = 100 WHERE a = 1" "DELETE FROM toasted WHERE a = 2"
	conf_synced
	[ "$(psql_target "SELECT string_agg(a || '|' || c, ',') FROM dropped_cols")" = "100|1" ]
	[ "$(psql_target "SELECT string_agg(a || '|' || b, ',') FROM missing_attr")" = "100|5" ]
	[ "$(psql_target "SELECT a || '|' || length(b) FROM toasted")" = "100|200000" ]
	assert_tables_equal dropped_cols missing_attr toasted
	assert_converged
	conf_stop
}

@test "100: tables and columns whose names need quoting" {
	both "CREATE SCHEMA \"Odd Schema\"" \
		"CREATE TABLE \"Odd Schema\".\"Mixed Case\" (\"Id\" int PRIMARY KEY, \"the value\" text, \"select\" int)"
	psql_source "INSERT INTO \"Odd Schema\".\"Mixed Case\" VALUES (1, 'a', 1)"
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE \"Odd Schema\".\"Mixed Case\""
	conf_flow_file "- schema: \"Odd Schema\"
  name: \"Mixed Case\""
	conf_run
	psql_source "INSERT INTO \"Odd Schema\".\"Mixed Case\" VALUES (2, 'b', 2)" \
		"UPDATE \"Odd Schema\".\"Mixed Case\" SET \"the value\" = 'c', \"Id\" = 3 WHERE \"Id\" = 1"
	conf_synced
	assert_tables_equal '"Odd Schema"."Mixed Case"'
	[ "$(psql_target "SELECT string_agg(\"Id\" || \"the value\", ',' ORDER BY \"Id\") FROM \"Odd Schema\".\"Mixed Case\"")" = "2b,3c" ]
	assert_converged
	conf_stop
}
