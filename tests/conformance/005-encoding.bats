#!/usr/bin/env bats
# PostgreSQL's src/test/subscription/t/005_encoding.pl through a flow:
# databases of different encodings.  The scenario replicates UTF8 into
# LATIN1; here also LATIN1 into UTF8 (a legacy source moving to UTF8).
# The text must arrive as the same characters, and verify must agree.

load helpers/conformance

# recreate_db source|target ENCODING: this test's database on that side,
# again, in ENCODING (C locale, from template0)
recreate_db() {
	local side=$1 enc=$2 db
	if [[ $side == source ]]; then db=$SOURCE_DB; else db=$TARGET_DB; fi
	psql_admin "$side" "DROP DATABASE \"$db\" WITH (FORCE)" \
		"CREATE DATABASE \"$db\" ENCODING '$enc' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
}

@test "005: a LATIN1 source into a UTF8 target: the non-ASCII text arrives as the same characters" {
	recreate_db source LATIN1
	[ "$(psql_source "SHOW server_encoding")" = LATIN1 ]
	both "CREATE TABLE test1 (a int PRIMARY KEY, b text)"
	conf_flow public.test1
	conf_run
	# the statement is sent as UTF8; the source stores LATIN1
	PGCLIENTENCODING=UTF8 psql_source "INSERT INTO test1 VALUES (1, 'Motörhead'), (2, 'Ça été déjà'), (3, 'plain')"
	[ "$(psql_source "SELECT octet_length(b) FROM test1 WHERE a = 1")" -eq 9 ]
	conf_synced
	[ "$(psql_target "SELECT a FROM test1 WHERE b = 'Motörhead'")" = 1 ]
	[ "$(psql_target "SELECT octet_length(b) FROM test1 WHERE a = 1")" -eq 10 ]
	# sorted_copy reads both sides in UTF8
	assert_tables_equal test1
	conf_stop
}

@test "005: a LATIN1 source into a UTF8 target: verify CONVERGED on non-ASCII text" {
	recreate_db source LATIN1
	both "CREATE TABLE test1 (a int PRIMARY KEY, b text)"
	conf_flow public.test1
	conf_run
	PGCLIENTENCODING=UTF8 psql_source "INSERT INTO test1 VALUES (1, 'Motörhead'), (2, 'plain')"
	conf_synced
	assert_converged
	conf_stop
}

@test "005: the scenario's direction, a UTF8 source into a LATIN1 target: the text arrives converted" {
	recreate_db target LATIN1
	[ "$(psql_target "SHOW server_encoding")" = LATIN1 ]
	both "CREATE TABLE test1 (a int PRIMARY KEY, b text)"
	conf_flow public.test1
	conf_run
	psql_source "INSERT INTO test1 VALUES (1, E'Mot\\xc3\\xb6rhead')"
	conf_synced
	# the scenario's check, in the target's own encoding
	[ "$(psql_target "SELECT a FROM test1 WHERE b = E'Mot\\xf6rhead'")" = 1 ]
	assert_tables_equal test1
	conf_stop
}

@test "005: a UTF8 source into a LATIN1 target: verify CONVERGED on non-ASCII text" {
	recreate_db target LATIN1
	both "CREATE TABLE test1 (a int PRIMARY KEY, b text)"
	conf_flow public.test1
	conf_run
	psql_source "INSERT INTO test1 VALUES (1, E'Mot\\xc3\\xb6rhead'), (2, 'plain')"
	conf_synced
	assert_converged
	conf_stop
}
