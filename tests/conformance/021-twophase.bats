#!/usr/bin/env bats
# PostgreSQL's src/test/subscription/t/021_twophase.pl and
# 023_twophase_stream.pl through a flow: two-phase transactions on the
# source (PREPARE TRANSACTION, COMMIT PREPARED, ROLLBACK PREPARED), small
# and large enough to be streamed, across a restart of the flow.  Capture
# does not decode at PREPARE (no two_phase option): a prepared
# transaction reaches the target at its COMMIT PREPARED, never before,
# and a ROLLBACK PREPARED leaves nothing behind.

load helpers/conformance

setup_file() {
	trellara_setup_file
	# PREPARE TRANSACTION needs max_prepared_transactions > 0: a restart
	psql_admin source "ALTER SYSTEM SET max_prepared_transactions = 10" >/dev/null
	trellara_pg_stop "$SOURCE_PGDATA"
	trellara_pg_start "$SOURCE_PGDATA"
}

setup() {
	trellara_setup
	conformance_setup
	[ "$(psql_admin source "SHOW max_prepared_transactions")" -eq 10 ]
	both "CREATE TABLE tab_full (a int PRIMARY KEY)" "CREATE TABLE test_tab (a int primary key, b varchar)"
	psql_source "INSERT INTO tab_full SELECT generate_series(1, 10)" "INSERT INTO test_tab VALUES (1, 'foo'), (2, 'bar')"
	conf_flow "public.tab_full,public.test_tab"
}

teardown() {
	# a prepared transaction would keep the test's database from being dropped
	psql_source "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()" 2>/dev/null |
		while read -r gid; do psql_source "ROLLBACK PREPARED '$gid'" || true; done
	trellara_teardown
}

# applied_past_prepared: a later committed transaction has been applied,
# so the flow has read past the PREPARE.  Waited for by its row, not by
# the source's WAL position: with a large streamed transaction left
# prepared, the checkpoint was once seen short of that position for the
# whole 120 s wait under a three-file parallel run (the row was in; why
# the position was not reached is not yet known: noted on issue 37).
applied_past_prepared() {
	local n
	n=$(psql_source "INSERT INTO tab_full VALUES (1000 + (SELECT count(*) FROM tab_full WHERE a >= 1000))
		RETURNING (SELECT count(*) FROM tab_full WHERE a >= 1000) + 1")
	wait_for -t 120 -m "the target has the row committed after the PREPARE" \
		"[ \"\$(psql_target \"SELECT count(*) FROM tab_full WHERE a >= 1000\")\" -ge $n ] || ! flow_alive"
	flow_alive
}

@test "021: PREPARE TRANSACTION then COMMIT PREPARED: applied at the commit, not before; ROLLBACK PREPARED: nothing; verify CONVERGED" {
	conf_run
	psql_source "BEGIN" "INSERT INTO tab_full VALUES (11)" "PREPARE TRANSACTION 'test_prepared_tab_full'"
	applied_past_prepared
	[ "$(psql_target "SELECT count(*) FROM tab_full WHERE a = 11")" -eq 0 ]
	psql_source "COMMIT PREPARED 'test_prepared_tab_full'"
	conf_synced
	[ "$(psql_target "SELECT count(*) FROM tab_full WHERE a = 11")" -eq 1 ]
	# an update and a delete, prepared, then rolled back
	psql_source "BEGIN" "UPDATE tab_full SET a = 12 WHERE a = 11" "DELETE FROM tab_full WHERE a = 1" \
		"PREPARE TRANSACTION 'test_prepared_tab_full'"
	psql_source "ROLLBACK PREPARED 'test_prepared_tab_full'"
	conf_synced
	[ "$(psql_target "SELECT count(*) FROM tab_full WHERE a IN (1, 11)")" -eq 2 ]
	[ "$(psql_target "SELECT count(*) FROM tab_full WHERE a = 12")" -eq 0 ]
	# savepoints inside a prepared transaction; commit prepared
	psql_source "BEGIN" "INSERT INTO tab_full VALUES (21)" "SAVEPOINT sp_inner" "INSERT INTO tab_full VALUES (22)" \
		"ROLLBACK TO SAVEPOINT sp_inner" "INSERT INTO tab_full VALUES (23)" "PREPARE TRANSACTION 'outer'"
	psql_source "COMMIT PREPARED 'outer'"
	conf_synced
	[ "$(psql_target "SELECT string_agg(a::text, ',' ORDER BY a) FROM tab_full WHERE a BETWEEN 20 AND 30")" = "21,23" ]
	assert_tables_equal tab_full test_tab
	assert_converged
	conf_stop
}

@test "021: a transaction prepared while the flow runs and committed after the flow was stopped and started again: applied once" {
	conf_run
	psql_source "BEGIN" "INSERT INTO tab_full VALUES (31), (32)" "PREPARE TRANSACTION 'across_restart'"
	applied_past_prepared
	conf_stop
	psql_source "COMMIT PREPARED 'across_restart'"
	# and one prepared while the flow is down, committed when it runs again
	psql_source "BEGIN" "DELETE FROM tab_full WHERE a = 31" "PREPARE TRANSACTION 'while_down'"
	conf_run
	applied_past_prepared
	[ "$(psql_target "SELECT string_agg(a::text, ',' ORDER BY a) FROM tab_full WHERE a BETWEEN 30 AND 40")" = "31,32" ]
	psql_source "COMMIT PREPARED 'while_down'"
	conf_synced
	[ "$(psql_target "SELECT string_agg(a::text, ',' ORDER BY a) FROM tab_full WHERE a BETWEEN 30 AND 40")" = "32" ]
	assert_tables_equal tab_full
	assert_converged
	conf_stop
}

@test "023: a prepared transaction large enough to be streamed: COMMIT PREPARED applies it, ROLLBACK PREPARED of another leaves nothing; verify CONVERGED" {
	conf_run
	psql_source "BEGIN" "INSERT INTO test_tab SELECT i, md5(i::text) FROM generate_series(3, 5000) s(i)" \
		"UPDATE test_tab SET b = md5(b) WHERE mod(a, 2) = 0" "DELETE FROM test_tab WHERE mod(a, 3) = 0" \
		"PREPARE TRANSACTION 'test_prepared_tab'"
	applied_past_prepared
	[ "$(psql_target "SELECT count(*) FROM test_tab")" -eq 2 ]
	psql_source "COMMIT PREPARED 'test_prepared_tab'"
	conf_synced
	[ "$(psql_target "SELECT count(*) FROM test_tab")" -eq 3334 ]
	psql_source "BEGIN" "INSERT INTO test_tab SELECT i, md5(i::text) FROM generate_series(5001, 10000) s(i)" \
		"DELETE FROM test_tab WHERE a < 100" "PREPARE TRANSACTION 'test_prepared_tab_2'"
	psql_source "ROLLBACK PREPARED 'test_prepared_tab_2'"
	conf_synced
	[ "$(psql_target "SELECT count(*) || '|' || max(a) FROM test_tab")" = "3334|5000" ]
	assert_tables_equal tab_full test_tab
	assert_converged
	conf_stop
}
