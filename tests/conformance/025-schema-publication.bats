#!/usr/bin/env bats
# PostgreSQL's src/test/subscription/t/025_rep_changes_for_schema.pl
# through a flow: a publication FOR TABLES IN SCHEMA.  The flow copies,
# applies and verifies the tables dataset.tables lists; the publication
# may carry more (a table created in the schema later): applyd passes
# those over, counted, and the listed tables converge.

load helpers/conformance

@test "025: a publication FOR TABLES IN SCHEMA: check accepts it; the listed tables are copied, changed and verified; a table added to the schema later is passed over" {
	local side
	for side in source target; do
		psql_$side "CREATE SCHEMA sch1" "CREATE TABLE sch1.tab1 AS SELECT generate_series(1,10) AS a" \
			"CREATE TABLE sch1.tab2 (a int PRIMARY KEY, b text)" \
			"CREATE TABLE sch1.tab3 (a int PRIMARY KEY) PARTITION BY RANGE (a)" \
			"CREATE TABLE sch1.tab3_1 PARTITION OF sch1.tab3 FOR VALUES FROM (0) TO (100)" \
			"ALTER TABLE sch1.tab1 REPLICA IDENTITY FULL"
	done
	psql_target "TRUNCATE sch1.tab1"
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLES IN SCHEMA sch1 WITH (publish_via_partition_root = true)"
	conf_flow_file "sch1.tab1,sch1.tab2,sch1.tab3"
	run -0 --separate-stderr trellara-check --config "$FLOW_FILE" --format json
	[ "$(jq -r '[.checks[] | select(.name == "publication_table") | .status] | unique | join(",")' <<<"$output")" = ok ]
	conf_run
	[ "$(psql_target "SELECT count(*) FROM sch1.tab1")" -eq 10 ]
	psql_source "INSERT INTO sch1.tab1 VALUES (11)" "INSERT INTO sch1.tab2 SELECT g, 'v' FROM generate_series(1, 10) g" \
		"INSERT INTO sch1.tab3 SELECT generate_series(1, 10)" "DELETE FROM sch1.tab1 WHERE a < 3" \
		"UPDATE sch1.tab2 SET b = 'w' WHERE a > 5"
	# a table created in the schema is published at once; it is not in the flow
	psql_source "CREATE TABLE sch1.tab_new (a int PRIMARY KEY)" "INSERT INTO sch1.tab_new VALUES (1), (2)"
	psql_source "INSERT INTO sch1.tab2 VALUES (100, 'after')"
	conf_synced
	[ "$(psql_target "SELECT count(*) FROM pg_tables WHERE schemaname = 'sch1' AND tablename = 'tab_new'")" -eq 0 ]
	assert_tables_equal sch1.tab1 sch1.tab2 sch1.tab3
	[ "$(psql_target "SELECT count(*) || '|' || min(a) || '|' || max(a) FROM sch1.tab1")" = "9|3|11" ]
	assert_converged
	conf_stop
	grep -Eq '[1-9][0-9]* changes to tables outside the dataset' "$TEST_DIR/run.log"
}
