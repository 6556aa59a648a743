#!/usr/bin/env bats
# PostgreSQL's src/test/subscription/t/011_generated.pl through a flow:
# a stored generated column that the target computes with its own
# expression.  The source's generated values are not sent (pgoutput leaves
# generated columns out); the target computes its own, in the initial
# copy and in apply alike.

load helpers/conformance

@test "011: a target generated column computed by the target's own expression, in the copy and in apply (a * 22)" {
	psql_source "CREATE TABLE tab1 (a int PRIMARY KEY, b int GENERATED ALWAYS AS (a * 2) STORED)" \
		"INSERT INTO tab1 (a) VALUES (1), (2), (3)"
	psql_target "CREATE TABLE tab1 (a int PRIMARY KEY, b int GENERATED ALWAYS AS (a * 22) STORED)"
	conf_flow public.tab1
	conf_run
	[ "$(psql_target "SELECT string_agg(a || '|' || b, ',' ORDER BY a) FROM tab1")" = "1|22,2|44,3|66" ]
	psql_source "INSERT INTO tab1 VALUES (4), (5)" "UPDATE tab1 SET a = 6 WHERE a = 5"
	conf_synced
	[ "$(psql_target "SELECT string_agg(a || '|' || b, ',' ORDER BY a) FROM tab1")" = "1|22,2|44,3|66,4|88,6|132" ]
	assert_tables_equal "(SELECT a FROM tab1) t"
	conf_stop
}

@test "011: the same generated expression on both sides: target equals source; verify CONVERGED" {
	both "CREATE TABLE tab1 (a int PRIMARY KEY, b int GENERATED ALWAYS AS (a * 2) STORED, c text)"
	psql_source "INSERT INTO tab1 (a, c) VALUES (1, 'x'), (2, 'y')"
	conf_flow public.tab1
	conf_run
	psql_source "INSERT INTO tab1 (a) VALUES (4), (5)" "UPDATE tab1 SET a = 6 WHERE a = 5" "UPDATE tab1 SET c = 'z' WHERE a = 1"
	conf_synced
	assert_tables_equal tab1
	[ "$(psql_target "SELECT string_agg(a || '|' || b, ',' ORDER BY a) FROM tab1")" = "1|2,2|4,4|8,6|12" ]
	assert_converged
	conf_stop
}
