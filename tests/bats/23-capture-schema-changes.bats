#!/usr/bin/env bats
# A flow table's identity on the source while streaming (DESIGN §4,
# "Schema changes"): renamed, moved to another schema, dropped and created
# again, renamed while capture was stopped — capture stops before writing
# any change of it, naming the table and what to do (applyd would skip the
# changes as a table outside the dataset); following the change in the
# flow file resumes the flow with nothing lost.  A change of replica
# identity is followed: every transaction carries the descriptor its rows
# were decoded with.

load helpers/common

setup() {
	trellara_setup
	export TRELLARA_STATUS_INTERVAL_MS=200 TRELLARA_RECONNECT_BASE_MS=100
	psql_source "CREATE TABLE orders (id int PRIMARY KEY, note text, code text NOT NULL UNIQUE)" \
		"CREATE TABLE customers (id int PRIMARY KEY, name text)" \
		"INSERT INTO orders SELECT g, 'before', 'c' || g FROM generate_series(1, 10) g" \
		"INSERT INTO customers SELECT g, 'n' || g FROM generate_series(1, 5) g" \
		"CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE orders, customers"
	write_flow_file "$FLOW_FILE" --tables "public.orders,public.customers" --set stream.min_free_bytes=1048576
	trellara-snapshot --config "$FLOW_FILE" --create-tables >/dev/null
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	psql_source "INSERT INTO orders VALUES (11, 'streamed', 'c11')"
	caught_up
}

teardown() {
	bg_stop applyd TERM 2>/dev/null || true
	bg_stop capture TERM 2>/dev/null || true
	trellara_teardown
}

# follow_rename OLD NEW: the flow follows a flow table renamed or moved on
# the source: the target's table renamed or moved the same way, the flow
# file names it (customers stays)
follow_rename() {
	if [[ ${1%%.*} != "${2%%.*}" ]]; then
		psql_target "CREATE SCHEMA IF NOT EXISTS ${2%%.*}" "ALTER TABLE $1 SET SCHEMA ${2%%.*}"
	else
		psql_target "ALTER TABLE $1 RENAME TO ${2#*.}"
	fi
	write_flow_file "$FLOW_FILE" --tables "$2,public.customers" --set stream.min_free_bytes=1048576
}

@test "a flow table renamed on the source while streaming: capture stops (78) naming it and the next step; nothing after it is applied; followed, the flow resumes and converges" {
	psql_source "ALTER TABLE orders RENAME TO orders_old" \
		"INSERT INTO orders_old SELECT g, 'after', 'c' || g FROM generate_series(12, 31) g" \
		"UPDATE orders_old SET note = 'changed' WHERE id = 1" "INSERT INTO customers VALUES (6, 'n6')"
	bg_wait capture 60
	[ "$BG_STATUS" -eq 78 ]
	grep -q 'flow table public.orders (source relation [0-9]*) arrives as public.orders_old: it was renamed or moved to another schema on the source' "$TEST_DIR/capture.log"
	grep -q 'hint: to follow it: do the same on the target (ALTER TABLE ... RENAME TO / SET SCHEMA), write public.orders_old for public.orders in dataset.tables' "$TEST_DIR/capture.log"
	# nothing of that transaction reached the target, nothing was skipped
	sleep 1
	[ "$(psql_target "SELECT count(*) FROM orders")" -eq 11 ]
	[ "$(psql_target "SELECT note FROM orders WHERE id = 1")" = before ]
	# a restart does not go past it either: the flow's name is gone
	run -78 trellara-capture --config "$FLOW_FILE"
	[[ $output == *"flow table public.orders does not exist on the source"* ]]
	# the flow follows it: the target's table renamed, the flow file too
	bg_stop applyd TERM
	follow_rename public.orders public.orders_old
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	caught_up
	assert_tables_equal orders_old customers
	[ "$(psql_target "SELECT count(*) FROM orders_old")" -eq 31 ]
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ $output == *"result: CONVERGED"* ]]
}

@test "a flow table moved to another schema while streaming: capture stops (78) naming its new place; followed, the flow converges" {
	psql_source "CREATE SCHEMA archive" "ALTER TABLE orders SET SCHEMA archive" \
		"UPDATE archive.orders SET note = 'moved' WHERE id <= 3" "DELETE FROM archive.orders WHERE id = 10"
	bg_wait capture 60
	[ "$BG_STATUS" -eq 78 ]
	grep -q 'flow table public.orders (source relation [0-9]*) arrives as archive.orders' "$TEST_DIR/capture.log"
	[ "$(psql_target "SELECT count(*) FROM orders WHERE note = 'moved'")" -eq 0 ]
	bg_stop applyd TERM
	follow_rename public.orders archive.orders
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	caught_up
	assert_tables_equal archive.orders customers
	[ "$(psql_target "SELECT count(*) FROM archive.orders WHERE note = 'moved'")" -eq 3 ]
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ $output == *"result: CONVERGED"* ]]
}

@test "a flow table renamed while capture was stopped: capture does not start (78), naming the table it cannot find" {
	bg_stop capture TERM
	psql_source "ALTER TABLE orders RENAME TO orders_old" "INSERT INTO orders_old VALUES (50, 'after', 'c50')"
	run -78 --separate-stderr trellara-capture --config "$FLOW_FILE"
	[[ $stderr == *"flow table public.orders does not exist on the source: it was dropped, or renamed or moved to another schema"* ]]
	[[ $stderr == *"write its new name in dataset.tables"* ]]
	[ "$(psql_target "SELECT count(*) FROM orders")" -eq 11 ]
}

@test "a flow table dropped and created again while streaming: capture stops (78): the target holds the old relation's rows" {
	psql_source "DROP TABLE orders" "CREATE TABLE orders (id int PRIMARY KEY, note text, code text NOT NULL UNIQUE)" \
		"ALTER PUBLICATION $PUBLICATION_NAME ADD TABLE orders" "INSERT INTO orders VALUES (1, 'new table', 'x1')"
	bg_wait capture 60
	[ "$BG_STATUS" -eq 78 ]
	grep -q 'flow table public.orders arrives as another relation (source relation [0-9]*, [0-9]* before): it was dropped and created again, or another table took its name' "$TEST_DIR/capture.log"
	grep -q 'trellara reseed --config' "$TEST_DIR/capture.log"
	[ "$(psql_target "SELECT count(*) FROM orders WHERE note = 'new table'")" -eq 0 ]
}

@test "replica identity changed on the source while streaming (default, FULL, an index on another column, back): followed, updates and deletes applied, nothing quarantined, CONVERGED" {
	psql_source "ALTER TABLE orders REPLICA IDENTITY FULL" \
		"UPDATE orders SET note = 'full' WHERE id IN (1, 2)" "DELETE FROM orders WHERE id = 3"
	psql_source "ALTER TABLE orders REPLICA IDENTITY USING INDEX orders_code_key" \
		"UPDATE orders SET note = 'by code', id = id + 100 WHERE id IN (4, 5)" "DELETE FROM orders WHERE code = 'c6'"
	psql_source "ALTER TABLE orders REPLICA IDENTITY DEFAULT" \
		"UPDATE orders SET code = 'z7' WHERE id = 7" "DELETE FROM orders WHERE id = 8"
	caught_up
	[ "$(psql_target "SELECT count(*) FROM trellara.quarantine")" -eq 0 ]
	assert_tables_equal orders customers
	[ "$(psql_target "SELECT string_agg(id::text, ',' ORDER BY id) FROM orders")" = "1,2,7,9,10,11,104,105" ]
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ $output == *"result: CONVERGED"* ]]
	# capture went on through all of it
	kill -0 "$(bg_pid capture)"
}
