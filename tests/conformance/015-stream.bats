#!/usr/bin/env bats
# PostgreSQL's src/test/subscription/t/015_stream.pl to
# 019_stream_subxact_ddl_abort.pl through a flow: transactions larger than
# the source's logical_decoding_work_mem, which pgoutput streams while
# they are in progress (capture asks for streaming), with subtransactions
# committed and rolled back, DDL inside them, and whole transactions
# rolled back.  The target has extra columns with defaults, as in the
# scenarios.

load helpers/conformance

setup() {
	trellara_setup
	conformance_setup
	# small, so that the transactions below are streamed (the harness's
	# template has 64kB already; the scenarios set it themselves)
	psql_admin source "ALTER SYSTEM SET logical_decoding_work_mem = '64kB'" "SELECT pg_reload_conf()" >/dev/null
	psql_source "CREATE TABLE test_tab (a int primary key, b varchar)" "INSERT INTO test_tab VALUES (1, 'foo'), (2, 'bar')"
	psql_target "CREATE TABLE test_tab (a int primary key, b text, c timestamptz DEFAULT now(), d bigint DEFAULT 999)"
	conf_flow public.test_tab
}

# streamed: the source streamed in-progress transactions on the flow's slot
streamed() {
	wait_for -t 30 -m "the slot streamed in-progress transactions" \
		"[ \"\$(psql_source \"SELECT coalesce((SELECT stream_txns FROM pg_stat_replication_slots WHERE slot_name = '$SLOT_NAME'), 0)\")\" -gt 0 ]"
}

# counts: count(*), count(c), count(d = 999) of the target's test_tab
counts() {
	psql_target "SELECT count(*) || '|' || count(c) || '|' || count(d = 999) FROM test_tab"
}

@test "015: a large transaction (inserts, updates, deletes) streamed in progress, then committed; verify CONVERGED" {
	conf_run
	[ "$(counts)" = "2|2|2" ]
	psql_source "BEGIN" "INSERT INTO test_tab SELECT i, md5(i::text) FROM generate_series(3, 5000) s(i)" \
		"UPDATE test_tab SET b = md5(b) WHERE mod(a, 2) = 0" "DELETE FROM test_tab WHERE mod(a, 3) = 0" "COMMIT"
	conf_synced
	streamed
	[ "$(counts)" = "3334|3334|3334" ]
	assert_tables_equal "(SELECT a, b FROM test_tab) t"
	# a second one, with a large value
	psql_source "UPDATE test_tab SET b = repeat(b, 200) WHERE a < 100"
	conf_synced
	assert_tables_equal "(SELECT a, b FROM test_tab) t"
	assert_converged
	conf_stop
}

@test "016: a streamed transaction with committed savepoints; verify CONVERGED" {
	conf_run
	psql_source "BEGIN" \
		"INSERT INTO test_tab SELECT i, md5(i::text) FROM generate_series(3, 500) s(i)" \
		"UPDATE test_tab SET b = md5(b) WHERE mod(a, 2) = 0" "DELETE FROM test_tab WHERE mod(a, 3) = 0" \
		"SAVEPOINT s1" \
		"INSERT INTO test_tab SELECT i, md5(i::text) FROM generate_series(501, 1000) s(i)" \
		"UPDATE test_tab SET b = md5(b) WHERE mod(a, 2) = 0" "DELETE FROM test_tab WHERE mod(a, 3) = 0" \
		"SAVEPOINT s2" \
		"INSERT INTO test_tab SELECT i, md5(i::text) FROM generate_series(1001, 1500) s(i)" \
		"UPDATE test_tab SET b = md5(b) WHERE mod(a, 2) = 0" "DELETE FROM test_tab WHERE mod(a, 3) = 0" \
		"SAVEPOINT s3" \
		"INSERT INTO test_tab SELECT i, md5(i::text) FROM generate_series(1501, 2000) s(i)" \
		"UPDATE test_tab SET b = md5(b) WHERE mod(a, 2) = 0" "DELETE FROM test_tab WHERE mod(a, 3) = 0" \
		"SAVEPOINT s4" \
		"INSERT INTO test_tab SELECT i, md5(i::text) FROM generate_series(2001, 2500) s(i)" \
		"UPDATE test_tab SET b = md5(b) WHERE mod(a, 2) = 0" "DELETE FROM test_tab WHERE mod(a, 3) = 0" \
		"COMMIT"
	conf_synced
	streamed
	[ "$(counts)" = "1667|1667|1667" ]
	assert_tables_equal "(SELECT a, b FROM test_tab) t"
	assert_converged
	conf_stop
}

@test "017: DDL inside a streamed transaction (ADD COLUMN three times between inserts); verify CONVERGED" {
	psql_target "ALTER TABLE test_tab ADD c2 int, ADD d2 int, ADD e2 int"
	conf_run
	psql_source "BEGIN" \
		"INSERT INTO test_tab SELECT i, md5(i::text) FROM generate_series(3, 1000) s(i)" \
		"ALTER TABLE test_tab ADD COLUMN c2 INT" \
		"INSERT INTO test_tab SELECT i, md5(i::text), -i FROM generate_series(1001, 2000) s(i)" \
		"ALTER TABLE test_tab ADD COLUMN d2 INT" \
		"INSERT INTO test_tab SELECT i, md5(i::text), -i, 2*i FROM generate_series(2001, 3000) s(i)" \
		"ALTER TABLE test_tab ADD COLUMN e2 INT" \
		"INSERT INTO test_tab SELECT i, md5(i::text), -i, 2*i, -3*i FROM generate_series(3001, 4000) s(i)" \
		"COMMIT"
	conf_synced
	streamed
	[ "$(psql_target "SELECT count(*) || '|' || count(c2) || '|' || count(d2) || '|' || count(e2) FROM test_tab")" = "4000|3000|2000|1000" ]
	assert_tables_equal "(SELECT a, b, c2, d2, e2 FROM test_tab) t"
	assert_converged
	conf_stop
}

@test "018: streamed transactions with savepoints rolled back, and a streamed transaction rolled back whole; verify CONVERGED" {
	conf_run
	psql_source "BEGIN" \
		"INSERT INTO test_tab SELECT i, md5(i::text) FROM generate_series(3, 500) s(i)" \
		"SAVEPOINT s1" \
		"INSERT INTO test_tab SELECT i, md5(i::text) FROM generate_series(501, 1000) s(i)" \
		"SAVEPOINT s2" \
		"INSERT INTO test_tab SELECT i, md5(i::text) FROM generate_series(1001, 1500) s(i)" \
		"SAVEPOINT s3" \
		"INSERT INTO test_tab SELECT i, md5(i::text) FROM generate_series(1501, 2000) s(i)" \
		"ROLLBACK TO s2" \
		"INSERT INTO test_tab SELECT i, md5(i::text) FROM generate_series(2001, 2500) s(i)" \
		"ROLLBACK TO s1" \
		"INSERT INTO test_tab SELECT i, md5(i::text) FROM generate_series(2501, 3000) s(i)" \
		"SAVEPOINT s4" \
		"INSERT INTO test_tab SELECT i, md5(i::text) FROM generate_series(3001, 3500) s(i)" \
		"SAVEPOINT s5" \
		"INSERT INTO test_tab SELECT i, md5(i::text) FROM generate_series(3501, 4000) s(i)" \
		"COMMIT"
	conf_synced
	streamed
	# 1..500 and 2501..4000
	[ "$(psql_target "SELECT count(*) || '|' || min(a) || '|' || max(a) FROM test_tab")" = "2000|1|4000" ]
	[ "$(psql_target "SELECT count(*) FROM test_tab WHERE a BETWEEN 501 AND 2500")" -eq 0 ]
	# rolled back whole, after being streamed
	psql_source "BEGIN" "INSERT INTO test_tab SELECT i, md5(i::text) FROM generate_series(4001, 9000) s(i)" \
		"UPDATE test_tab SET b = 'x'" "ROLLBACK"
	psql_source "INSERT INTO test_tab VALUES (9999, 'after')"
	conf_synced
	[ "$(psql_target "SELECT count(*) || '|' || min(a) || '|' || max(a) FROM test_tab")" = "2001|1|9999" ]
	[ "$(psql_target "SELECT count(*) FROM test_tab WHERE b = 'x'")" -eq 0 ]
	assert_tables_equal "(SELECT a, b FROM test_tab) t"
	assert_converged
	conf_stop
}

@test "019: a streamed transaction whose DDL is inside a savepoint rolled back; verify CONVERGED" {
	psql_target "ALTER TABLE test_tab ADD c2 int"
	conf_run
	psql_source "BEGIN" \
		"INSERT INTO test_tab SELECT i, md5(i::text) FROM generate_series(3, 500) s(i)" \
		"ALTER TABLE test_tab ADD COLUMN c2 INT" \
		"SAVEPOINT s1" \
		"INSERT INTO test_tab SELECT i, md5(i::text), -i FROM generate_series(501, 1000) s(i)" \
		"ALTER TABLE test_tab ADD COLUMN d2 INT" \
		"SAVEPOINT s2" \
		"INSERT INTO test_tab SELECT i, md5(i::text), -i, 2*i FROM generate_series(1001, 1500) s(i)" \
		"ROLLBACK TO s1" \
		"INSERT INTO test_tab SELECT i, md5(i::text), -i FROM generate_series(1501, 2000) s(i)" \
		"COMMIT"
	conf_synced
	streamed
	# 1..500 without c2, 1501..2000 with it; d2 never was
	[ "$(psql_target "SELECT count(*) || '|' || count(c2) FROM test_tab")" = "1000|500" ]
	[ "$(psql_source "SELECT count(*) FROM pg_attribute WHERE attrelid = 'test_tab'::regclass AND attname = 'd2'")" -eq 0 ]
	assert_tables_equal "(SELECT a, b, c2 FROM test_tab) t"
	assert_converged
	conf_stop
}
