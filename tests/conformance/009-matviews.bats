#!/usr/bin/env bats
# PostgreSQL's src/test/subscription/t/009_matviews.pl through a flow:
# logical decoding produces change information for a materialized view's
# data (bug #15044); it is not a published table and must be passed over
# without stopping the flow, at CREATE and at REFRESH (also CONCURRENTLY).

load helpers/conformance

@test "009: a materialized view created and refreshed on the source does not disturb the flow; verify CONVERGED" {
	both "CREATE TABLE test1 (a int PRIMARY KEY, b text)"
	psql_source "INSERT INTO test1 (a, b) VALUES (1, 'one'), (2, 'two')"
	conf_flow public.test1
	conf_run
	# no such relation on the target
	psql_source "CREATE MATERIALIZED VIEW testmv1 AS SELECT * FROM test1" "CREATE UNIQUE INDEX ON testmv1 (a)"
	psql_source "INSERT INTO test1 VALUES (3, 'three')" "REFRESH MATERIALIZED VIEW testmv1"
	psql_source "INSERT INTO test1 VALUES (4, 'four')" "REFRESH MATERIALIZED VIEW CONCURRENTLY testmv1"
	psql_source "UPDATE test1 SET b = 'ONE' WHERE a = 1"
	conf_synced
	[ "$(psql_target "SELECT count(*) FROM pg_class WHERE relname = 'testmv1'")" -eq 0 ]
	[ "$(psql_target "SELECT string_agg(a || b, ',' ORDER BY a) FROM test1")" = "1ONE,2two,3three,4four" ]
	assert_tables_equal test1
	assert_converged
	conf_stop
}
