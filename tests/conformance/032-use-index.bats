#!/usr/bin/env bats
# PostgreSQL's src/test/subscription/t/032_subscribe_use_index.pl through
# a flow: REPLICA IDENTITY FULL tables whose target has indexes of its own
# (on some columns, partial, on an expression), rows with NULLs and
# duplicate rows: each update and delete changes exactly the row the
# source changed.

load helpers/conformance

@test "032: FULL identity with target indexes (plain, multi-column, partial, expression), NULLs and duplicates: updates and deletes hit the right rows; verify CONVERGED" {
	both "CREATE TABLE test_replica_id_full (x int, y text, z int)" \
		"ALTER TABLE test_replica_id_full REPLICA IDENTITY FULL" \
		"CREATE TABLE people (firstname text, lastname text)" \
		"ALTER TABLE people REPLICA IDENTITY FULL"
	psql_target "CREATE INDEX test_replica_id_full_idx ON test_replica_id_full (x)" \
		"CREATE INDEX test_replica_id_full_idy ON test_replica_id_full (x, y)" \
		"CREATE INDEX test_replica_id_full_part ON test_replica_id_full (z) WHERE z > 5" \
		"CREATE INDEX people_names ON people ((firstname || ' ' || lastname))"
	psql_source "INSERT INTO test_replica_id_full SELECT i, 'v' || (i % 3), i FROM generate_series(0, 20) i" \
		"INSERT INTO test_replica_id_full VALUES (NULL, NULL, NULL), (NULL, NULL, NULL), (1, NULL, 1), (1, 'v1', NULL)" \
		"INSERT INTO people SELECT 'first' || i, 'last' || i FROM generate_series(0, 20) i" \
		"INSERT INTO people VALUES ('first1', 'last1'), (NULL, 'last2')"
	conf_flow "public.test_replica_id_full,public.people"
	conf_run
	psql_source "UPDATE test_replica_id_full SET x = x + 1 WHERE x = 15" \
		"UPDATE test_replica_id_full SET z = 100 WHERE x = 1 AND y IS NULL" \
		"DELETE FROM test_replica_id_full WHERE x = 1 AND z IS NULL" \
		"UPDATE test_replica_id_full SET y = 'was null' WHERE ctid = (SELECT ctid FROM test_replica_id_full WHERE x IS NULL LIMIT 1)" \
		"DELETE FROM test_replica_id_full WHERE z = 7" \
		"UPDATE people SET firstname = 'Nan' WHERE firstname = 'first1' AND ctid = (SELECT min(ctid) FROM people WHERE firstname = 'first1')" \
		"DELETE FROM people WHERE firstname IS NULL" \
		"UPDATE people SET lastname = 'changed' WHERE firstname = 'first5'"
	conf_synced
	assert_tables_equal test_replica_id_full people
	[ "$(psql_target "SELECT count(*) FROM test_replica_id_full WHERE x IS NULL AND y IS NULL")" -eq 1 ]
	[ "$(psql_target "SELECT count(*) FROM people WHERE firstname = 'first1'")" -eq 1 ]
	[ "$(psql_target "SELECT count(*) FROM people WHERE firstname = 'Nan'")" -eq 1 ]
	assert_converged
	conf_stop
}
