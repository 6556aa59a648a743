#!/usr/bin/env bats
# PostgreSQL's src/test/subscription/t/002_types.pl through a flow, the
# whole scenario: arrays, enums, composites nested in composites and
# arrays of them (also as primary keys), ranges and range arrays, hstore.
# After its updates and after its deletes the target reads exactly what
# the scenario expects (its expected output, in sql/002-types-expected-*),
# equals the source, and verify says CONVERGED.  (A subset with verify
# and repair-plan on such keys is in tests/bats/31-apply-correctness.bats.)

load helpers/conformance

SQL=$BATS_TEST_DIRNAME/sql

TYPES_TABLES="tst_one_array tst_arrays tst_one_enum tst_enums tst_one_comp tst_comps tst_comp_enum
	tst_comp_enum_array tst_comp_one_enum_array tst_comp_enum_what tst_comp_mix_array tst_range tst_range_array"

@test "002: arrays, enums, nested composites (keys too), ranges: inserts, updates and deletes read as the scenario expects; verify CONVERGED" {
	psql_source <"$SQL/002-types-ddl.sql"
	psql_target <"$SQL/002-types-ddl.sql"
	local t tables="" list=""
	for t in $TYPES_TABLES; do
		tables+="public.$t,"
		list+="$t, "
	done
	conf_flow "${tables%,}" "${list%, }"
	conf_run
	psql_source <"$SQL/002-types-insert.sql"
	conf_synced
	# shellcheck disable=SC2086
	assert_tables_equal $TYPES_TABLES
	psql_source <"$SQL/002-types-update.sql"
	conf_synced
	diff -u "$SQL/002-types-expected-updated.txt" <(psql_target <"$SQL/002-types-select.sql")
	psql_source <"$SQL/002-types-delete.sql"
	conf_synced
	diff -u "$SQL/002-types-expected-deleted.txt" <(psql_target <"$SQL/002-types-select.sql")
	# shellcheck disable=SC2086
	assert_tables_equal $TYPES_TABLES
	assert_converged
	conf_stop
}

@test "002: hstore (the contrib extension on both servers): inserts, updates and deletes; verify CONVERGED" {
	local side
	for side in source target; do
		[ "$(psql_$side "SELECT count(*) FROM pg_available_extensions WHERE name = 'hstore'")" -eq 1 ] ||
			skip "the hstore extension is not installed on the $side server"
	done
	both "CREATE EXTENSION hstore WITH SCHEMA public" \
		"CREATE TABLE public.tst_hstore (a INTEGER PRIMARY KEY, b public.hstore)"
	conf_flow public.tst_hstore
	conf_run
	psql_source "INSERT INTO tst_hstore (a, b) VALUES (1, '\"a\"=>\"1\"'), (2, '\"zzz\"=>\"foo\"'),
		(3, '\"123\"=>\"321\"'), (4, '\"yellow horse\"=>\"moaned\"')"
	conf_synced
	[ "$(psql_target "SELECT b FROM tst_hstore WHERE a = 4")" = '"yellow horse"=>"moaned"' ]
	psql_source "UPDATE tst_hstore SET b = '\"updated\"=>\"value\"' WHERE a < 3" \
		"UPDATE tst_hstore SET b = '\"also\"=>\"updated\"' WHERE a = 3"
	psql_source "DELETE FROM tst_hstore WHERE a = 1"
	conf_synced
	[ "$(psql_target "SELECT string_agg(a || '|' || b, ',' ORDER BY a) FROM tst_hstore")" = \
		'2|"updated"=>"value",3|"also"=>"updated",4|"yellow horse"=>"moaned"' ]
	assert_tables_equal tst_hstore
	assert_converged
	conf_stop
}
