#!/usr/bin/env bats
# PostgreSQL's src/test/subscription/t/028_row_filter.pl and
# 031_column_list.pl through a flow.  A publication's row filter or
# column list means rows or columns that are never captured: the target
# could not equal the source, and verify (which compares whole tables)
# would never agree.  trellara-check refuses both (a blocker naming the
# filter), so `trellara run` never starts such a flow; one added while
# the flow runs is found by verify, which names the table.

load helpers/conformance

@test "028: refused by design: a publication with a row filter; check names the filter, trellara run copies nothing" {
	both "CREATE TABLE tab_rowfilter_1 (a int primary key, b text)"
	psql_source "INSERT INTO tab_rowfilter_1 (a, b) VALUES (1, 'not replicated'), (1500, 'filtered'), (1980, 'not filtered')"
	conf_flow public.tab_rowfilter_1 "tab_rowfilter_1 WHERE (a > 1000 AND b <> 'filtered')"
	check_blocker publication_table public.tab_rowfilter_1
	[[ $(jq -r .detail <<<"$CHECK_ITEM") == *"published with a row filter (WHERE ((a > 1000) AND (b <> 'filtered'::text)))"* ]]
	[[ $(jq -r .fix <<<"$CHECK_ITEM") == *"DROP TABLE "*"tab_rowfilter_1"*"ADD TABLE "*"tab_rowfilter_1"* ]]
	run -1 trellara run --config "$FLOW_FILE"
	[ "$(psql_target "SELECT count(*) FROM tab_rowfilter_1")" -eq 0 ]
	[ "$(psql_source "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME'")" -eq 0 ]
}

@test "031: refused by design: a publication with a column list; check names it, trellara run copies nothing" {
	both "CREATE TABLE tab1 (a int PRIMARY KEY, \"B\" int, c int)"
	psql_source "INSERT INTO tab1 VALUES (1, 2, 3)"
	conf_flow public.tab1 "tab1 (a, \"B\")"
	check_blocker publication_table public.tab1
	[[ $(jq -r .detail <<<"$CHECK_ITEM") == *"published with a column list"* ]]
	run -1 trellara run --config "$FLOW_FILE"
	[ "$(psql_target "SELECT count(*) FROM tab1")" -eq 0 ]
}

@test "028: a row filter added to the publication while the flow runs: the rows it keeps out are found (verify DIVERGED naming the table), never CONVERGED" {
	both "CREATE TABLE tab_rowfilter_1 (a int primary key, b text)" "CREATE TABLE other (a int primary key)"
	conf_flow "public.tab_rowfilter_1,public.other"
	conf_run
	psql_source "INSERT INTO tab_rowfilter_1 VALUES (1, 'one'), (1500, 'kept')"
	conf_synced
	psql_source "ALTER PUBLICATION $PUBLICATION_NAME SET TABLE tab_rowfilter_1 WHERE (a > 1000), other"
	psql_source "INSERT INTO tab_rowfilter_1 VALUES (2, 'not captured'), (2000, 'captured')" "INSERT INTO other VALUES (1)"
	conf_synced
	[ "$(psql_target "SELECT count(*) FROM other")" -eq 1 ]
	[ "$(psql_target "SELECT count(*) FROM tab_rowfilter_1 WHERE a = 2000")" -eq 1 ]
	run -1 --separate-stderr trellara-verify --config "$FLOW_FILE" --format json
	[ "$(jq -r '[.tables[] | .table as $t | .divergences[] | "\($t) \(.kind) \(.key_values | map(join(",")) | join(" "))"] | join("; ")' <<<"$output")" = \
		"public.tab_rowfilter_1 missing_in_target 2" ]
	check_blocker publication_table public.tab_rowfilter_1
	conf_stop
}
