#!/usr/bin/env bats
# PostgreSQL's src/test/subscription/t/001_rep_changes.pl through a flow:
# the initial copy, then inserts, deletes and updates of keyed tables,
# REPLICA IDENTITY FULL tables with duplicate rows, a primary key with
# INCLUDE columns, a table with no columns, a target table with another
# column order and a column of its own, TOASTed values, dropped columns;
# what the scenario's publications do that a flow refuses.

load helpers/conformance

@test "001: initial copy, then changes to keyed, FULL-identity (duplicate rows), covering-key tables; verify CONVERGED" {
	psql_source "CREATE TABLE tab_notrep AS SELECT generate_series(1,10) AS a" \
		"CREATE TABLE tab_ins AS SELECT generate_series(1,1002) AS a" \
		"CREATE TABLE tab_full AS SELECT generate_series(1,10) AS a" \
		"CREATE TABLE tab_full2 (x text)" "INSERT INTO tab_full2 VALUES ('a'), ('b'), ('b')"
	psql_target "CREATE TABLE tab_notrep (a int)" "CREATE TABLE tab_ins (a int)" \
		"CREATE TABLE tab_full (a int)" "CREATE TABLE tab_full2 (x text)"
	both "CREATE TABLE tab_rep (a int primary key)" \
		"CREATE TABLE tab_include (a int, b text, CONSTRAINT covering PRIMARY KEY(a) INCLUDE(b))" \
		"CREATE TABLE tab_full_pk (a int primary key, b text)" "ALTER TABLE tab_full_pk REPLICA IDENTITY FULL" \
		"CREATE TABLE tab_no_replidentity_index(c1 int)" \
		"CREATE INDEX idx_no_replidentity_index ON tab_no_replidentity_index(c1)"
	# the scenario sets FULL later, on tables its insert-only publication
	# carries; a flow's publication carries updates and deletes from the
	# start, so every keyless table is FULL before the flow starts
	local t
	for t in tab_ins tab_full tab_full2 tab_no_replidentity_index; do
		both "ALTER TABLE $t REPLICA IDENTITY FULL"
	done
	conf_flow "public.tab_ins,public.tab_full,public.tab_full2,public.tab_rep,public.tab_include,public.tab_full_pk,public.tab_no_replidentity_index"
	conf_run
	# the initial copy
	[ "$(psql_target "SELECT count(*) FROM tab_notrep")" -eq 0 ]
	[ "$(psql_target "SELECT count(*) FROM tab_ins")" -eq 1002 ]

	psql_source "INSERT INTO tab_ins SELECT generate_series(1,50)" "DELETE FROM tab_ins WHERE a > 20" \
		"UPDATE tab_ins SET a = -a" \
		"INSERT INTO tab_rep SELECT generate_series(1,50)" "DELETE FROM tab_rep WHERE a > 20" \
		"UPDATE tab_rep SET a = -a" \
		"INSERT INTO tab_full_pk VALUES (1, 'foo'), (2, 'baz')" \
		"INSERT INTO tab_include SELECT generate_series(1,50)" "DELETE FROM tab_include WHERE a > 20" \
		"UPDATE tab_include SET a = -a" \
		"INSERT INTO tab_no_replidentity_index VALUES(1)" \
		"INSERT INTO tab_notrep VALUES (11)"
	conf_synced
	# tab_ins carries its deletes and updates here (the scenario's
	# insert-only publication did not): 1..20 twice, negated
	[ "$(psql_target "SELECT count(*) || '|' || min(a) || '|' || max(a) FROM tab_ins")" = "40|-20|-1" ]
	[ "$(psql_target "SELECT count(*) || '|' || min(a) || '|' || max(a) FROM tab_rep")" = "20|-20|-1" ]
	[ "$(psql_target "SELECT count(*) || '|' || min(a) || '|' || max(a) FROM tab_include")" = "20|-20|-1" ]
	[ "$(psql_target "SELECT c1 FROM tab_no_replidentity_index")" = 1 ]
	[ "$(psql_target "SELECT count(*) FROM tab_notrep")" -eq 0 ]

	# duplicate rows, updated through REPLICA IDENTITY FULL
	psql_source "INSERT INTO tab_full SELECT generate_series(1,10)"
	psql_source "UPDATE tab_full SET a = a * a" "UPDATE tab_full2 SET x = 'bb' WHERE x = 'b'" \
		"UPDATE tab_full_pk SET b = 'bar' WHERE a = 1"
	conf_synced
	[ "$(psql_target "SELECT count(*) || '|' || min(a) || '|' || max(a) FROM tab_full")" = "20|1|100" ]
	[ "$(psql_target "SELECT string_agg(x, ',' ORDER BY x) FROM tab_full2")" = "a,bb,bb" ]
	[ "$(psql_target "SELECT string_agg(a || '|' || b, ',' ORDER BY a) FROM tab_full_pk")" = "1|bar,2|baz" ]
	assert_tables_equal tab_ins tab_full tab_full2 tab_rep tab_include tab_full_pk tab_no_replidentity_index
	assert_converged
	conf_stop
}

@test "001: a table with no columns: its rows are copied and its inserts applied (count 1, then 2)" {
	both "CREATE TABLE tab_no_col()" "ALTER TABLE tab_no_col REPLICA IDENTITY FULL"
	psql_source "INSERT INTO tab_no_col DEFAULT VALUES"
	conf_flow public.tab_no_col
	conf_run
	[ "$(psql_target "SELECT count(*) FROM tab_no_col")" -eq 1 ]
	psql_source "INSERT INTO tab_no_col DEFAULT VALUES"
	conf_synced
	[ "$(psql_target "SELECT count(*) FROM tab_no_col")" -eq 2 ]
	assert_converged
	conf_stop
}

@test "001: a target table with another column order and a column of its own: local default kept, TOASTed and unchanged-TOAST values, dropped columns on either side" {
	psql_source "CREATE TABLE tab_mixed (a int primary key, b text, c numeric)" \
		"INSERT INTO tab_mixed (a, b, c) VALUES (1, 'foo', 1.1)"
	psql_target "CREATE TABLE tab_mixed (d text default 'local', c numeric, b text, a int primary key)"
	conf_flow public.tab_mixed
	conf_run
	psql_source "INSERT INTO tab_mixed VALUES (2, 'bar', 2.2)" "UPDATE tab_mixed SET b = 'baz' WHERE a = 1"
	conf_synced
	[ "$(psql_target "SELECT string_agg(d || '|' || c || '|' || b || '|' || a, ',' ORDER BY a) FROM tab_mixed")" = \
		"local|1.1|baz|1,local|2.2|bar|2" ]
	assert_converged
	# a large value, then an update that leaves it out (unchanged TOAST)
	psql_source "UPDATE tab_mixed SET b = repeat('xyzzy', 100000) WHERE a = 2"
	psql_source "UPDATE tab_mixed SET c = 3.3 WHERE a = 2"
	conf_synced
	[ "$(psql_target "SELECT string_agg(a || '|' || length(b) || '|' || c || '|' || d, ',' ORDER BY a) FROM tab_mixed")" = \
		"1|3|1.1|local,2|500000|3.3|local" ]
	[ "$(psql_target "SELECT md5(b) FROM tab_mixed WHERE a = 2")" = "$(psql_source "SELECT md5(b) FROM tab_mixed WHERE a = 2")" ]
	# a column dropped on the source: the update before the drop arrives
	# whole, the one after it leaves the target's b alone
	psql_source "UPDATE tab_mixed SET b = 'bar', c = 2.2 WHERE a = 2"
	psql_source "ALTER TABLE tab_mixed DROP COLUMN b"
	psql_source "UPDATE tab_mixed SET c = 11.11 WHERE a = 1"
	conf_synced
	[ "$(psql_target "SELECT string_agg(d || '|' || c || '|' || b || '|' || a, ',' ORDER BY a) FROM tab_mixed")" = \
		"local|11.11|baz|1,local|2.2|bar|2" ]
	# a column dropped on the target
	psql_target "ALTER TABLE tab_mixed DROP COLUMN d"
	psql_source "UPDATE tab_mixed SET c = 22.22 WHERE a = 2"
	conf_synced
	[ "$(psql_target "SELECT string_agg(c || '|' || b || '|' || a, ',' ORDER BY a) FROM tab_mixed")" = \
		"11.11|baz|1,22.22|bar|2" ]
	conf_stop
}

@test "001: refused by design: a publication that does not publish updates and deletes, a table with REPLICA IDENTITY NOTHING" {
	both "CREATE TABLE tab_ins (a int primary key)" "CREATE TABLE tab_nothing (a int)"
	psql_source "ALTER TABLE tab_nothing REPLICA IDENTITY NOTHING" "INSERT INTO tab_ins VALUES (1)"
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE tab_ins, tab_nothing WITH (publish = insert)"
	conf_flow_file "public.tab_ins,public.tab_nothing"
	check_blocker publication_operations
	[[ $(jq -r .detail <<<"$CHECK_ITEM") == *"does not publish update, delete, truncate"* ]]
	check_blocker replica_identity public.tab_nothing
	[[ $(jq -r .detail <<<"$CHECK_ITEM") == *"REPLICA IDENTITY NOTHING"* ]]
	# trellara run stops at check: nothing copied, no slot
	run -1 trellara run --config "$FLOW_FILE"
	[ "$(psql_target "SELECT count(*) FROM tab_ins")" -eq 0 ]
	[ "$(psql_source "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME'")" -eq 0 ]
}

@test "001: a flow table dropped from the publication while the flow runs: its lost changes are found (verify DIVERGED naming it, check a blocker), never reported CONVERGED" {
	both "CREATE TABLE tab_ins (a int primary key)" "CREATE TABLE tab_rep (a int primary key)"
	conf_flow "public.tab_ins,public.tab_rep"
	conf_run
	psql_source "INSERT INTO tab_ins SELECT generate_series(1, 10)" "INSERT INTO tab_rep VALUES (1)"
	conf_synced
	psql_source "ALTER PUBLICATION $PUBLICATION_NAME DROP TABLE tab_ins"
	psql_source "INSERT INTO tab_ins VALUES (8888)" "INSERT INTO tab_rep VALUES (2)"
	conf_synced
	[ "$(psql_target "SELECT count(*) FROM tab_rep")" -eq 2 ]
	run -1 --separate-stderr trellara-verify --config "$FLOW_FILE" --format json
	[ "$(jq -r '[.tables[] | select(.divergences | length > 0) | .table] | join(",")' <<<"$output")" = public.tab_ins ]
	check_blocker publication_table public.tab_ins
	[[ $(jq -r .detail <<<"$CHECK_ITEM") == *"not in publication"* ]]
	conf_stop
}
