#!/usr/bin/env bats
# PostgreSQL's src/test/subscription/t/012_collation.pl through a flow: the
# target's key column has a nondeterministic (ICU) collation, and holds a
# row that equals the source's under that collation but not byte for
# byte (another Unicode normal form).  An update on the source must find
# that row, through the primary key and through REPLICA IDENTITY FULL.
# As in the scenario, each side has its row before the flow starts and
# nothing is copied (capture --start-now, no snapshot).

load helpers/conformance

setup() {
	trellara_setup
	conformance_setup
	[ "$(psql_target "SELECT count(*) FROM pg_collation WHERE collprovider = 'i'")" -gt 0 ] ||
		skip "the target server was built without ICU"
	psql_target "CREATE COLLATION ctest_nondet (provider = icu, locale = 'und', deterministic = false)"
}

@test "012: updates found through a primary key and through REPLICA IDENTITY FULL with a nondeterministic collation on the target" {
	psql_source "CREATE TABLE tab1 (a text PRIMARY KEY, b text)" "INSERT INTO tab1 VALUES (U&'\\00E4bc', 'foo')" \
		"CREATE TABLE tab2 (a text, b text)" "ALTER TABLE tab2 REPLICA IDENTITY FULL" \
		"INSERT INTO tab2 VALUES (U&'\\00E4bc', 'foo')"
	psql_target "CREATE TABLE tab1 (a text COLLATE ctest_nondet PRIMARY KEY, b text)" \
		"INSERT INTO tab1 VALUES (U&'\\0061\\0308bc', 'foo')" \
		"CREATE TABLE tab2 (a text COLLATE ctest_nondet, b text)" "ALTER TABLE tab2 REPLICA IDENTITY FULL" \
		"INSERT INTO tab2 VALUES (U&'\\0061\\0308bc', 'foo')"
	# byte for byte different
	[ "$(psql_source "SELECT md5(a) FROM tab1")" != "$(psql_target "SELECT md5(a) FROM tab1")" ]
	conf_flow "public.tab1,public.tab2"
	conf_start_nocopy
	psql_source "UPDATE tab1 SET b = 'bar' WHERE b = 'foo'"
	conf_synced
	[ "$(psql_target "SELECT b FROM tab1")" = bar ]
	psql_source "UPDATE tab2 SET b = 'bar' WHERE b = 'foo'"
	conf_synced
	[ "$(psql_target "SELECT b FROM tab2")" = bar ]
	[ "$(psql_target "SELECT count(*) FROM tab2")" -eq 1 ]
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
}
