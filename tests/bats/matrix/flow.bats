#!/usr/bin/env bats
# The whole flow, compactly, on whatever pair of servers the lane gives it
# (PG_SOURCE_BINDIR, PG_TARGET_BINDIR; scripts/run-matrix.sh): check, a
# snapshot under pgbench load, streaming with applyd killed -9, verify
# CONVERGED, a reseed repairing a damaged table, and a quarantine
# repaired and replayed.  `make check` runs it on source 15 -> target 18,
# `make check-matrix` on every lane.  The target's tables are made with
# pgbench's own DDL, never with --create-tables (pg_dump 15, the client
# the tests have, refuses a 16+ source).

load ../helpers/common

TABLES="public.pgbench_accounts,public.pgbench_branches,public.pgbench_tellers,public.pgbench_history"

setup() {
	trellara_setup
	export TRELLARA_STATUS_INTERVAL_MS=200 TRELLARA_RECONNECT_BASE_MS=100
}

teardown() {
	[[ -z ${load:-} ]] || kill -TERM "$load" 2>/dev/null || true
	trellara_teardown
}

pgbench_on() { # pgbench_on source|target ARGS...
	local side=$1
	shift
	case $side in
	source) pgbench -h "$SOURCE_HOST" -p "$SOURCE_PORT" "$@" "$SOURCE_DB" ;;
	target) pgbench -h "$TARGET_HOST" -p "$TARGET_PORT" "$@" "$TARGET_DB" ;;
	esac
}

applied_over() { # applied_over N: applyd's count passes N
	wait_for -t 60 -m "applyd applied more than $1 transactions" "[ \"\$(applied_transactions)\" -gt $1 ]"
}

@test "the servers are the lane's majors, and the source has wal_level=logical" {
	[ "$(psql_admin source "SHOW server_version_num")" -ge "$((TRELLARA_PG_SOURCE_MAJOR * 10000))" ]
	[ "$(psql_admin source "SHOW server_version_num")" -lt "$(((TRELLARA_PG_SOURCE_MAJOR + 1) * 10000))" ]
	[ "$(psql_admin target "SHOW server_version_num")" -ge "$((TRELLARA_PG_TARGET_MAJOR * 10000))" ]
	[ "$(psql_admin target "SHOW server_version_num")" -lt "$(((TRELLARA_PG_TARGET_MAJOR + 1) * 10000))" ]
	[ "$TRELLARA_PG_SOURCE_MAJOR" -eq "$(trellara_pg_major "$PG_SOURCE_BINDIR")" ]
	[ "$TRELLARA_PG_TARGET_MAJOR" -eq "$(trellara_pg_major "$PG_TARGET_BINDIR")" ]
	[ "$(psql_admin source "SHOW wal_level")" = logical ]
}

@test "check, snapshot under pgbench load, applyd killed -9 twice, verify CONVERGED; a damaged table is found and reseeded" {
	pgbench_on source -q -i -s 2 >/dev/null 2>&1
	# the target's tables without rows, from pgbench's DDL (keys included)
	pgbench_on target -q -i -s 2 -I dtp >/dev/null 2>&1
	[ "$(psql_target "SELECT count(*) FROM pgbench_accounts")" -eq 0 ]
	# pgbench_history has no key: FULL identity (pgbench only inserts into it)
	psql_source "ALTER TABLE pgbench_history REPLICA IDENTITY FULL" \
		"CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history"
	write_flow_file "$FLOW_FILE" --tables "$TABLES" --set stream.min_free_bytes=1048576
	run -0 trellara-check --config "$FLOW_FILE"
	[[ $output == *"$(psql_admin source "SHOW server_version" | cut -d' ' -f1)"* ]]

	# the source writes from before the snapshot starts until after it ends
	# (pgbench itself in the background, not a function: kill must reach it)
	pgbench -n -c 2 -T 300 -h "$SOURCE_HOST" -p "$SOURCE_PORT" "$SOURCE_DB" >"$TEST_DIR/pgbench.log" 2>&1 &
	load=$!
	wait_for -t 30 "[ \"\$(psql_source 'SELECT count(*) FROM pgbench_history')\" -gt 0 ]"
	run -0 trellara-snapshot --config "$FLOW_FILE"
	kill -0 "$load" # still writing when the snapshot was done
	[[ $output == *"copied public.pgbench_accounts: 200000 rows"* ]]
	[ "$(psql_target "SELECT state FROM trellara.snapshot_runs WHERE run_id = 'initial'")" = stream_handoff_ready ]

	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	applied_over 10
	for _ in 1 2; do
		kill -KILL "$(bg_pid applyd)"
		bg_wait applyd 10
		[ "$BG_STATUS" -eq 137 ]
		bg_start applyd trellara-applyd --config "$FLOW_FILE"
		applied_over "$(applied_transactions)"
	done
	kill -TERM "$load"
	wait "$load" || true
	load=
	caught_up 180
	assert_tables_equal pgbench_accounts pgbench_branches pgbench_tellers pgbench_history
	txns=$(psql_source "SELECT count(*) FROM pgbench_history")
	[ "$txns" -gt 100 ]
	[ "$(psql_target "SELECT count(*) FROM trellara.quarantine")" -eq 0 ]
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ $output == *"result: CONVERGED"* ]]

	# damage the target; verify names it, a reseed repairs it
	psql_target "UPDATE pgbench_tellers SET tbalance = tbalance + 1000000 WHERE tid = 3"
	run -1 --separate-stderr trellara-verify --config "$FLOW_FILE" --format json
	[ "$(jq -r .result <<<"$output")" = DIVERGED ]
	[ "$(jq -r '.tables[] | select(.result == "diverged") | .table' <<<"$output")" = public.pgbench_tellers ]
	[ "$(jq -r '.tables[] | select(.table == "public.pgbench_tellers") | .divergences[0].keys[0]' <<<"$output")" = "(3)" ]
	run -0 trellara reseed --config "$FLOW_FILE" --table public.pgbench_tellers
	[[ $output == *"reseeded public.pgbench_tellers"* ]]
	pgbench_on source -n -c 1 -t 50 >/dev/null 2>&1
	caught_up
	assert_tables_equal pgbench_accounts pgbench_branches pgbench_tellers pgbench_history
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ $output == *"result: CONVERGED"* ]]
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
	[ "$BG_STATUS" -eq 0 ]
}

@test "an UPDATE that matches no target row quarantines no_rows_matched; repaired and replayed it converges" {
	local side
	for side in source target; do
		psql_$side "CREATE TABLE accounts (id int PRIMARY KEY, owner text, balance numeric, note text)"
	done
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE accounts"
	write_flow_file "$FLOW_FILE" --tables public.accounts --set stream.min_free_bytes=1048576
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	psql_source "INSERT INTO accounts VALUES (1, 'a', 1, NULL), (2, 'b', 2, NULL)"
	caught_up
	psql_target "DELETE FROM accounts WHERE id = 2"
	psql_source "UPDATE accounts SET balance = 99 WHERE id = 2" "INSERT INTO accounts VALUES (3, 'c', 3, NULL)"
	bg_wait applyd 60
	[ "$BG_STATUS" -eq 1 ]
	run -1 trellara-quarantine list --config "$FLOW_FILE" --format json
	[ "$(jq -r '.quarantine[0].reason' <<<"$output")" = no_rows_matched ]
	[[ "$(jq -r '.quarantine[0].detail' <<<"$output")" == *"public.accounts (id=2)"* ]]
	xid=$(jq -r '.quarantine[0].transaction_id' <<<"$output")
	lsn=$(jq -r '.quarantine[0].commit_lsn' <<<"$output")
	# nothing of the failed transaction, nor of the one after it, reached the target
	[ "$(psql_target "SELECT count(*) FROM accounts")" -eq 1 ]
	psql_target "INSERT INTO accounts VALUES (2, 'b', 2, NULL)"
	run -0 trellara-quarantine replay-ready --config "$FLOW_FILE" --transaction-id "$xid" --commit-lsn "$lsn"
	bg_start applyd2 trellara-applyd --config "$FLOW_FILE"
	caught_up
	assert_tables_equal accounts
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ $output == *"result: CONVERGED"* ]]
	bg_stop applyd2 TERM
	bg_stop capture TERM
}
