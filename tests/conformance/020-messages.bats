#!/usr/bin/env bats
# PostgreSQL's src/test/subscription/t/020_messages.pl through a flow:
# logical decoding messages (pg_logical_emit_message), transactional and
# not, alone and among changes, in committed and rolled back transactions.
# Capture asks pgoutput for messages (it uses its own for verify's fence);
# a user's messages must not disturb the flow.

load helpers/conformance

@test "020: pg_logical_emit_message, transactional or not, among changes or alone, committed or rolled back: the flow applies the changes, nothing else; verify CONVERGED" {
	both "CREATE TABLE tab_test (a int primary key)"
	conf_flow public.tab_test
	conf_run
	psql_source "SELECT pg_logical_emit_message(true, 'pgoutput', 'a transactional message')" >/dev/null
	psql_source "SELECT pg_logical_emit_message(false, 'pgoutput', 'a non-transactional message')" >/dev/null
	psql_source "BEGIN" "INSERT INTO tab_test VALUES (1)" \
		"SELECT pg_logical_emit_message(true, 'pgoutput', 'message in a transaction')" \
		"INSERT INTO tab_test VALUES (2)" \
		"SELECT pg_logical_emit_message(false, 'pgoutput', 'non-transactional, in a transaction')" \
		"COMMIT" >/dev/null
	# a rolled back transaction: its transactional message goes with it,
	# its non-transactional one is decoded at once
	psql_source "BEGIN" "INSERT INTO tab_test VALUES (3)" \
		"SELECT pg_logical_emit_message(true, 'pgoutput', 'rolled back')" \
		"SELECT pg_logical_emit_message(false, 'pgoutput', 'survives its rollback')" \
		"ROLLBACK" >/dev/null
	# other prefixes, bytes that are not text, a large message
	psql_source "SELECT pg_logical_emit_message(true, 'test', '\\x00ff00'::bytea)" >/dev/null
	psql_source "SELECT pg_logical_emit_message(true, 'other', repeat('m', 100000))" >/dev/null
	psql_source "INSERT INTO tab_test VALUES (4)"
	conf_synced
	[ "$(psql_target "SELECT string_agg(a::text, ',' ORDER BY a) FROM tab_test")" = "1,2,4" ]
	assert_tables_equal tab_test
	assert_converged
	# the flow goes on afterwards
	psql_source "DELETE FROM tab_test WHERE a = 1"
	conf_synced
	assert_tables_equal tab_test
	conf_stop
}
