#!/usr/bin/env bats
# PostgreSQL's src/test/subscription/t/010_truncate.pl through a flow:
# TRUNCATE replicated, with and without RESTART IDENTITY (a target
# sequence owned by the table), of tables tied by a foreign key together,
# of a flow table together with one outside the flow, of a keyless table.
# And what the scenario does not cover: TRUNCATE of one partition of a
# table the publication publishes through its root.

load helpers/conformance

@test "010: TRUNCATE empties the target's rows; RESTART IDENTITY restarts the target's owned sequence, a plain one does not" {
	both "CREATE TABLE tab1 (a int PRIMARY KEY)"
	psql_target "CREATE SEQUENCE seq1 OWNED BY tab1.a" "ALTER SEQUENCE seq1 START 101"
	conf_flow public.tab1
	conf_run
	# rows the target has of its own
	psql_target "INSERT INTO tab1 VALUES (1), (2), (3)"
	psql_source "TRUNCATE tab1"
	conf_synced
	[ "$(psql_target "SELECT count(*) || '|' || coalesce(min(a)::text, '') || '|' || coalesce(max(a)::text, '') FROM tab1")" = "0||" ]
	[ "$(psql_target "SELECT nextval('seq1')")" -eq 1 ]
	psql_source "TRUNCATE tab1 RESTART IDENTITY"
	conf_synced
	[ "$(psql_target "SELECT nextval('seq1')")" -eq 101 ]
	conf_stop
}

@test "010: TRUNCATE of two tables tied by a foreign key; of a flow table with one outside the flow; of a keyless table" {
	both "CREATE TABLE tab1 (a int PRIMARY KEY)" "CREATE TABLE tab2 (a int PRIMARY KEY)" \
		"CREATE TABLE tab3 (a int PRIMARY KEY)" "CREATE TABLE tab4 (x int PRIMARY KEY, y int REFERENCES tab3)" \
		"CREATE TABLE tab5 (a int)" "ALTER TABLE tab5 REPLICA IDENTITY FULL"
	# tab2 is not in the flow
	conf_flow "public.tab1,public.tab3,public.tab4,public.tab5"
	conf_run
	psql_target "INSERT INTO tab3 VALUES (1), (2), (3)" "INSERT INTO tab4 VALUES (11, 1), (111, 1), (22, 2)"
	psql_source "TRUNCATE tab3, tab4"
	conf_synced
	[ "$(psql_target "SELECT count(*) FROM tab3")" -eq 0 ]
	[ "$(psql_target "SELECT count(*) FROM tab4")" -eq 0 ]
	psql_target "INSERT INTO tab1 VALUES (1), (2), (3)" "INSERT INTO tab2 VALUES (1), (2), (3)"
	psql_source "TRUNCATE tab1, tab2"
	conf_synced
	[ "$(psql_target "SELECT count(*) FROM tab1")" -eq 0 ]
	[ "$(psql_target "SELECT count(*) || '|' || min(a) || '|' || max(a) FROM tab2")" = "3|1|3" ]
	psql_source "INSERT INTO tab5 VALUES (1), (2), (3)"
	conf_synced
	[ "$(psql_target "SELECT count(*) || '|' || min(a) || '|' || max(a) FROM tab5")" = "3|1|3" ]
	psql_source "TRUNCATE tab5"
	conf_synced
	[ "$(psql_target "SELECT count(*) FROM tab5")" -eq 0 ]
	# no deadlock on the target
	[ "$(psql_target "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")" -eq 0 ]
	assert_tables_equal tab1 tab3 tab4 tab5
	assert_converged
	conf_stop
}

# The flow's publication publishes a partitioned table through its root
# (publish_via_partition_root = true, which trellara-check requires).
# pgoutput then leaves out a TRUNCATE of a single partition altogether: no
# message reaches the stream.  The statement triggers trellara check --fix
# puts on the tree send it as a trellara.truncate message: applyd empties
# the target's partition of that name, or stops naming it where the
# target has none; never the target holding the rows.
@test "010: TRUNCATE of one partition of a table published through its root: carried to the target, or the flow stops naming it" {
	both "CREATE TABLE pt (id int, k int, v text, PRIMARY KEY (id, k)) PARTITION BY LIST (k)" \
		"CREATE TABLE pt_1 PARTITION OF pt FOR VALUES IN (1)" \
		"CREATE TABLE pt_2 PARTITION OF pt FOR VALUES IN (2)"
	psql_source "INSERT INTO pt SELECT g, 1 + g % 2, 'v' FROM generate_series(1, 10) g"
	conf_flow public.pt "pt WITH (publish_via_partition_root = true)"
	run -0 trellara-check --config "$FLOW_FILE" --fix
	[ "$(psql_source "SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'trellara_truncate_%'")" -eq 6 ]
	conf_run
	[ "$(psql_target "SELECT count(*) FROM pt_1")" -eq 5 ]
	psql_source "TRUNCATE pt_1"
	# a later change in the other partition: the flow has moved past the truncate
	psql_source "INSERT INTO pt VALUES (100, 2, 'after')"
	conf_synced
	[ "$(psql_target "SELECT count(*) FROM pt WHERE id = 100")" -eq 1 ]
	[ "$(psql_target "SELECT count(*) FROM pt_1")" -eq 0 ]
	assert_tables_equal pt
	# two partitions in one statement; a partition created later (its
	# triggers made by the DDL trigger); the root, whose partitions'
	# triggers stay quiet (pgoutput carries the root's TRUNCATE)
	psql_source "INSERT INTO pt SELECT g, 1 + g % 2, 'w' FROM generate_series(11, 20) g" "TRUNCATE pt_1, pt_2" \
		"INSERT INTO pt VALUES (200, 1, 'after')"
	both "CREATE TABLE pt_3 PARTITION OF pt FOR VALUES IN (3)"
	psql_source "INSERT INTO pt SELECT g, 3, 'x' FROM generate_series(21, 25) g" "TRUNCATE pt_3" \
		"INSERT INTO pt VALUES (300, 3, 'after')"
	conf_synced
	assert_tables_equal pt
	[ "$(psql_target "SELECT string_agg(id::text, ',' ORDER BY id) FROM pt")" = "200,300" ]
	psql_source "TRUNCATE pt" "INSERT INTO pt VALUES (400, 2, 'after')"
	conf_synced
	assert_tables_equal pt
	assert_converged
	conf_stop
}

@test "010: TRUNCATE of one partition the target does not have (another partition layout): applyd stops (78) naming it, nothing after it applied" {
	psql_source "CREATE TABLE pt (id int, k int, v text, PRIMARY KEY (id, k)) PARTITION BY LIST (k)" \
		"CREATE TABLE pt_1 PARTITION OF pt FOR VALUES IN (1)" "CREATE TABLE pt_2 PARTITION OF pt FOR VALUES IN (2)"
	psql_target "CREATE TABLE pt (id int, k int, v text, PRIMARY KEY (id, k)) PARTITION BY RANGE (k)" \
		"CREATE TABLE pt_low PARTITION OF pt FOR VALUES FROM (0) TO (10)"
	psql_source "INSERT INTO pt SELECT g, 1 + g % 2, 'v' FROM generate_series(1, 10) g"
	conf_flow public.pt "pt WITH (publish_via_partition_root = true)"
	run -0 trellara-check --config "$FLOW_FILE" --fix
	conf_run
	psql_source "TRUNCATE pt_1" "INSERT INTO pt VALUES (100, 2, 'after')"
	wait_for -t 60 -m "the flow stopped" "! flow_alive"
	grep -q 'the source truncated public.pt_1, a partition of flow table public.pt, and the target has no partition of that name under it' "$TEST_DIR/run.log"
	grep -q 'trellara reseed --config' "$TEST_DIR/run.log"
	[ "$(psql_target "SELECT count(*) FROM pt WHERE k = 1")" -eq 5 ]
	[ "$(psql_target "SELECT count(*) FROM pt WHERE id = 100")" -eq 0 ]
}
