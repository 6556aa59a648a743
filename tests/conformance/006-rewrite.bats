#!/usr/bin/env bats
# PostgreSQL's src/test/subscription/t/006_rewrite.pl through a flow: DDL
# that rewrites the table (ADD COLUMN ... NOT NULL DEFAULT, run on the
# target first, then on the source) while the flow runs.

load helpers/conformance

@test "006: a heap rewrite on both sides (ADD c int NOT NULL DEFAULT 0), then an insert with the new column; verify CONVERGED" {
	both "CREATE TABLE test1 (a int, b text)" "ALTER TABLE test1 REPLICA IDENTITY FULL"
	conf_flow public.test1
	conf_run
	psql_source "INSERT INTO test1 (a, b) VALUES (1, 'one'), (2, 'two')"
	conf_synced
	[ "$(psql_target "SELECT string_agg(a || '|' || b, ',' ORDER BY a) FROM test1")" = "1|one,2|two" ]
	psql_target "ALTER TABLE test1 ADD c int NOT NULL DEFAULT 0"
	psql_source "ALTER TABLE test1 ADD c int NOT NULL DEFAULT 0"
	conf_synced
	psql_source "INSERT INTO test1 (a, b, c) VALUES (3, 'three', 33)"
	conf_synced
	[ "$(psql_target "SELECT string_agg(a || '|' || b || '|' || c, ',' ORDER BY a) FROM test1")" = "1|one|0,2|two|0,3|three|33" ]
	assert_tables_equal test1
	assert_converged
	conf_stop
}
