#!/usr/bin/env bats
# capture + applyd against real PostgreSQL: byte-identical targets,
# exactly once across kills, quarantine, chunked transactions.

load helpers/common

setup() {
	trellara_setup
	for side in source target; do
		psql_$side "CREATE TABLE accounts (id int PRIMARY KEY, owner text, balance numeric, note text)" \
			"CREATE TABLE orders (id bigint PRIMARY KEY, account_id int, amount numeric)"
	done
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE accounts, orders"
	write_flow_file "$FLOW_FILE" --tables "public.accounts,public.orders" --set stream.min_free_bytes=1048576
	export TRELLARA_STATUS_INTERVAL_MS=200
}

start_flow() {
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
}

checkpoint() {
	psql_target "SELECT $1 FROM trellara.apply_checkpoint"
}

# wait until the target's checkpoint passed the source's current WAL position
caught_up() {
	local lsn
	lsn=$(psql_source "SELECT pg_current_wal_lsn()")
	wait_for -t "${1:-60}" -m "target caught up with $lsn" \
		"[ \"\$(psql_target \"SELECT coalesce((SELECT applied_through_lsn >= '$lsn' FROM trellara.apply_checkpoint), false)\")\" = t ]"
}

@test "inserts, updates, deletes, truncates: the target ends identical" {
	start_flow
	psql_source "INSERT INTO accounts SELECT g, 'owner ' || g, g * 1.5, NULL FROM generate_series(1, 500) g"
	psql_source "UPDATE accounts SET balance = balance + 1 WHERE id % 3 = 0" \
		"DELETE FROM accounts WHERE id % 7 = 0" \
		"UPDATE accounts SET id = id + 10000 WHERE id % 11 = 0" \
		"INSERT INTO orders SELECT g, g % 500, g FROM generate_series(1, 300) g" \
		"TRUNCATE orders" \
		"INSERT INTO orders VALUES (1, 1, 1)"
	caught_up
	assert_tables_equal accounts orders
	[ "$(checkpoint applied_transactions)" -ge 7 ]
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
}
