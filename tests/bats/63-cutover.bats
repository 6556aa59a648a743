#!/usr/bin/env bats
# trellara cutover: the last step of a migration, run against a flow that
# `trellara run` streams under pgbench: the source locked, applyd caught
# up, sequences synced, verify CONVERGED, capture and applyd stopped, the
# step recorded in the cutover row; killed at each fault point and run
# again; --abort; the preconditions.

load helpers/common

TABLES="public.pgbench_accounts,public.pgbench_branches,public.pgbench_tellers,public.pgbench_history,public.orders"

setup() {
	trellara_setup
	export METRICS_DIR="$TEST_DIR/metrics"
	export TRELLARA_STATUS_INTERVAL_MS=200 TRELLARA_RECONNECT_BASE_MS=100
	export TRELLARA_RUN_BACKOFF_BASE_MS=100 TRELLARA_RUN_BACKOFF_CAP_MS=1000
	export TRELLARA_RUN_DRAIN_SECONDS=20
	export TRELLARA_RUN_SNAPSHOT_ARGS=--create-tables
}

# pgbench tables and a table with a serial key on the source; the target's
# tables come from the snapshot
source_init() {
	local metrics=(--set observability.metrics_dir="\"$METRICS_DIR\"")
	[[ ${1:-} != --default-state ]] || metrics=()
	pgbench -q -i -s 1 -h "$SOURCE_HOST" -p "$SOURCE_PORT" "$SOURCE_DB" >/dev/null 2>&1
	psql_source "ALTER TABLE pgbench_history REPLICA IDENTITY FULL" \
		"CREATE TABLE orders (id bigserial PRIMARY KEY, note text NOT NULL)" \
		"INSERT INTO orders (note) SELECT 'before ' || g FROM generate_series(1, 50) g"
	write_flow_file "$FLOW_FILE" --tables "$TABLES" --set stream.min_free_bytes=1048576 "${metrics[@]}"
	run -0 trellara-check --config "$FLOW_FILE" --fix
}

# pgbench plus inserts into orders (their ids come from the source's sequence)
source_load() {
	cat >"$TEST_DIR/orders.sql" <<-'SQL'
		INSERT INTO orders (note) VALUES ('load');
	SQL
	pgbench -n -c 2 -T "$1" -h "$SOURCE_HOST" -p "$SOURCE_PORT" -f "$TEST_DIR/orders.sql@1" -b tpcb-like@4 \
		"$SOURCE_DB" >"$TEST_DIR/pgbench.log" 2>&1
}

start_flow() {
	source_init "$@"
	bg_start run trellara run --config "$FLOW_FILE"
	wait_for -t 180 -m "trellara run is running and trellara status reads the flow's checkpoint" flow_ready
}

no_flow_processes() {
	! pgrep -f -- "--config $FLOW_FILE" >/dev/null
}

cutover_value() {
	psql_target "SELECT $1 FROM trellara.cutover"
}

# a new session on the source can write (0) or not (1)
source_writable() {
	psql_source "INSERT INTO orders (note) VALUES ('probe') RETURNING id" >/dev/null 2>"$TEST_DIR/probe.err"
}

assert_all_equal() {
	assert_tables_equal pgbench_accounts pgbench_branches pgbench_tellers pgbench_history orders
}

# the source database's own default_transaction_read_only, if it has one
source_read_only_setting() {
	psql_source "SELECT s FROM pg_db_role_setting d JOIN pg_database b ON b.oid = d.setdatabase, unnest(d.setconfig) s
		WHERE b.datname = current_database() AND d.setrole = 0 AND s LIKE 'default_transaction_read_only=%'"
}

# cutover_finishes verifies|stops: after a kill, the cutover run again goes
# on (it does not start over) and, verifying again or, verified before,
# only stopping the flow, ends as an uninterrupted one does: the flow
# stopped, the target equal to the source, the row cut_over with verify
# CONVERGED, the source read-only
cutover_finishes() {
	run -0 --separate-stderr trellara cutover --config "$FLOW_FILE" --lock-source
	echo "$output"
	echo "$stderr"
	[[ $output != *"started:"* ]]
	if [ "$1" = verifies ]; then
		[[ $output == *"(read after the lock)"* ]]
		[[ $output == *"result: CONVERGED"* ]]
	else
		[[ $output != *"waiting for applyd"* ]]
		[[ $output != *"verify:"* ]]
	fi
	[[ $output == *"capture and applyd stopped"* ]]
	[[ $output == *"verify CONVERGED at"* ]]
	bg_wait run 30
	[ "$BG_STATUS" -eq 0 ]
	no_flow_processes
	assert_all_equal
	[ "$(cutover_value state)" = cut_over ]
	[ "$(cutover_value verify_result)" = CONVERGED ]
	[ "$(cutover_value "final_lsn <= verified_at_lsn")" = t ]
	[ "$(cutover_value source_lock)" = held ]
	run ! source_writable
	grep -q "read-only transaction" "$TEST_DIR/probe.err"
}

@test "cutover --lock-source under pgbench: locked, caught up, sequences synced, CONVERGED, stopped, recorded; the first insert on the target does not collide" {
	start_flow
	source_load 60 &
	load=$!
	wait_for -t 60 -m "applyd applies the load" '[ "$(applied_transactions)" -gt 100 ]'

	run -0 --separate-stderr trellara cutover --config "$FLOW_FILE" --lock-source
	echo "$output"
	echo "$stderr"
	[[ $output == *"source database \"$SOURCE_DB\" locked"* ]]
	[[ $output == *"result: CONVERGED"* ]]
	[[ $output == *"capture and applyd stopped"* ]]
	[[ $output == *"SELECT pg_drop_replication_slot('$SLOT_NAME')"* ]]
	[[ $output == *"trellara cutover --config $FLOW_FILE --abort"* ]]
	# the load's sessions were ended by the lock
	wait "$load" || true
	bg_wait run 30
	[ "$BG_STATUS" -eq 0 ]
	no_flow_processes

	# the target equals the source, byte for byte
	assert_all_equal
	[ "$(cutover_value state)" = cut_over ]
	[ "$(cutover_value verify_result)" = CONVERGED ]
	[ "$(cutover_value source_lock)" = held ]
	[ "$(cutover_value "final_lsn <= verified_at_lsn")" = t ]
	[ "$(cutover_value "jsonb_array_length(sequences)")" -ge 1 ]
	[ "$(cutover_value "completed_at IS NOT NULL")" = t ]

	# the source takes no new writes
	run ! source_writable
	grep -q "read-only transaction" "$TEST_DIR/probe.err"

	# the first insert on the target without an id takes a new one
	max_source=$(psql_source "SELECT max(id) FROM orders")
	run -0 psql_target "INSERT INTO orders (note) VALUES ('first on the target') RETURNING id"
	[ "$output" -gt "$max_source" ]

	# status shows it
	run -0 --separate-stderr trellara status --config "$FLOW_FILE" --format json --rate-seconds 0
	[ "$(jq -r '.cutover.state' <<<"$output")" = cut_over ]
	[ "$(jq -r '.cutover.verify_result' <<<"$output")" = CONVERGED ]
	# the slot is left for the operator to drop, not a capture to start
	[ "$(jq -r '[.problems[].code] | sort | join(" ")' <<<"$output")" = "cut_over slot_left_after_cutover" ]
	[[ "$(jq -r '.problems[] | select(.code == "slot_left_after_cutover") | .action' <<<"$output")" == *"pg_drop_replication_slot('$SLOT_NAME')"* ]]
	run -0 --separate-stderr trellara status --config "$FLOW_FILE" --rate-seconds 0
	[[ $output == *"cutover     cut_over"* ]]

	# once done, it only says so again
	run -0 --separate-stderr trellara cutover --config "$FLOW_FILE" --lock-source
	[[ $output == *"cut over at"* ]]
	[[ $output != *"verify:"* ]]
}

@test "cutover killed (SIGKILL) while waiting for applyd, source locked: run again, it finishes; CONVERGED" {
	start_flow
	source_load 60 &
	load=$!
	wait_for -t 60 -m "applyd applies the load" '[ "$(applied_transactions)" -gt 100 ]'

	TRELLARA_FAULT=cutover.wait_apply run -137 trellara cutover --config "$FLOW_FILE" --lock-source
	[ "$(cutover_value state)" = locked ]
	[ "$(cutover_value source_lock)" = held ]
	run ! source_writable
	# the flow still runs
	running

	wait "$load" || true
	cutover_finishes verifies
}

@test "cutover killed (SIGKILL) right after the lock: the lock recorded and in force, the flow streaming; run again, it finishes; CONVERGED" {
	start_flow
	source_load 60 &
	load=$!
	wait_for -t 60 -m "applyd applies the load" '[ "$(applied_transactions)" -gt 100 ]'

	TRELLARA_FAULT=cutover.after_lock run -137 --separate-stderr trellara cutover --config "$FLOW_FILE" --lock-source
	echo "$output"
	[[ $output == *"source database \"$SOURCE_DB\" locked"* ]]
	[[ $output != *"final LSN"* ]]
	[ "$(cutover_value state)" = locked ]
	[ "$(cutover_value source_lock)" = held ]
	[ "$(cutover_value source_database)" = "$SOURCE_DB" ]
	[ "$(cutover_value "locked_at IS NOT NULL AND final_lsn IS NULL")" = t ]
	[ "$(source_read_only_setting)" = default_transaction_read_only=on ]
	run ! source_writable
	grep -q "read-only transaction" "$TEST_DIR/probe.err"
	# the lock ended the load's sessions; the flow still runs
	wait "$load" || true
	running

	cutover_finishes verifies
}

@test "cutover killed (SIGKILL) right after the lock, then --abort: the source writable again, the flow streaming" {
	start_flow
	TRELLARA_FAULT=cutover.after_lock run -137 trellara cutover --config "$FLOW_FILE" --lock-source
	[ "$(cutover_value source_lock)" = held ]
	run ! source_writable

	run -0 --separate-stderr trellara cutover --config "$FLOW_FILE" --abort
	echo "$output"
	[[ $output == *"source database \"$SOURCE_DB\" unlocked"* ]]
	[[ $output == *"cutover aborted (it was locked)"* ]]
	[ "$(cutover_value state)" = aborted ]
	[ "$(cutover_value source_lock)" = released ]
	[ -z "$(source_read_only_setting)" ]
	# a new session writes, and the flow carries the write over
	source_writable
	running
	caught_up 60
	assert_tables_equal orders
}

@test "cutover killed (SIGKILL) after verify, before the stop: CONVERGED recorded, the flow streaming; run again, it only stops the flow" {
	start_flow
	source_load 60 &
	load=$!
	wait_for -t 60 -m "applyd applies the load" '[ "$(applied_transactions)" -gt 100 ]'

	TRELLARA_FAULT=cutover.before_stop run -137 --separate-stderr trellara cutover --config "$FLOW_FILE" --lock-source
	echo "$output"
	[[ $output == *"result: CONVERGED"* ]]
	[[ $output != *"stopping trellara run"* ]]
	[ "$(cutover_value state)" = verified ]
	[ "$(cutover_value verify_result)" = CONVERGED ]
	[ "$(cutover_value "verified_at IS NOT NULL AND final_lsn <= verified_at_lsn")" = t ]
	[ "$(cutover_value source_lock)" = held ]
	run ! source_writable
	wait "$load" || true
	# nothing was stopped
	running

	cutover_finishes stops
}

@test "cutover --abort after a kill leaves the source writable and the flow running; a failed cutover unlocks by itself" {
	start_flow
	TRELLARA_FAULT=cutover.wait_apply run -137 trellara cutover --config "$FLOW_FILE" --lock-source
	run ! source_writable

	run -0 --separate-stderr trellara cutover --config "$FLOW_FILE" --abort
	echo "$output"
	[[ $output == *"unlocked"* ]]
	[[ $output == *"cutover aborted"* ]]
	source_writable
	[ "$(cutover_value state)" = aborted ]
	[ "$(cutover_value source_lock)" = released ]
	running
	# again: nothing to abort
	run -0 --separate-stderr trellara cutover --config "$FLOW_FILE" --abort
	[[ $output == *"nothing to abort"* ]]

	# a cutover that fails (applyd cannot catch up in 1 s: it is stopped)
	# releases the lock
	kill -STOP "$(state_value applyd_pid)"
	psql_source "INSERT INTO orders (note) VALUES ('behind')"
	run -75 --separate-stderr trellara cutover --config "$FLOW_FILE" --lock-source --apply-timeout 1
	kill -CONT "$(state_value applyd_pid)"
	echo "$stderr"
	[[ $stderr == *"did not apply through the final LSN"* ]]
	[ "$(cutover_value state)" = failed ]
	[ "$(cutover_value source_lock)" = released ]
	source_writable
}

@test "cutover refuses an open quarantine (exit 1, names trellara quarantine list) and a flow nobody runs (exit 1, names trellara run)" {
	source_init
	run -1 --separate-stderr trellara cutover --config "$FLOW_FILE" --lock-source
	echo "$stderr"
	[[ $stderr == *"no trellara run supervises the flow"* ]]
	[[ $stderr == *"trellara run --config $FLOW_FILE"* ]]
	source_writable
	[ "$(psql_target "SELECT count(*) FROM trellara.cutover")" -eq 0 ]

	bg_start run trellara run --config "$FLOW_FILE"
	wait_for -t 180 -m "trellara run has both children running" running
	caught_up
	psql_target "DROP TABLE pgbench_tellers"
	psql_source "UPDATE pgbench_tellers SET tbalance = tbalance + 1 WHERE tid = 1"
	bg_wait run 60
	[ "$BG_STATUS" -eq 1 ]
	run -1 --separate-stderr trellara cutover --config "$FLOW_FILE" --lock-source
	echo "$stderr"
	[[ $stderr == *"1 quarantined transactions"* ]]
	[[ $stderr == *"trellara quarantine list --config $FLOW_FILE"* ]]
	source_writable
}

@test "a flow file without observability.metrics_dir (the README's walkthrough): run keeps its state in the default place, status and cutover find it there" {
	start_flow --default-state
	# TRELLARA_STATE_DIR (set per test by the harness) stands for the
	# default root; the flow's own directory is named by its ids
	local state=$TRELLARA_STATE_DIR/$SOURCE_ID/$DATASET_ID
	[ -f "$state/supervisor.state" ]
	[ "$(stat -c %a "$state")" = 700 ]
	[ "$(stat -c %a "$state/supervisor.state")" = 600 ]
	run -0 --separate-stderr trellara status --config "$FLOW_FILE" --format json --rate-seconds 0
	[ "$(jq -r '.supervisor.state' <<<"$output")" = running ]
	[ "$(jq -r '.supervisor.metrics_dir' <<<"$output")" = "$state" ]
	psql_source "INSERT INTO orders (note) SELECT 'after ' || g FROM generate_series(1, 20) g"
	run -0 --separate-stderr trellara cutover --config "$FLOW_FILE" --lock-source
	echo "$output"
	echo "$stderr"
	[[ $output == *"result: CONVERGED"* ]]
	[[ $output == *"capture and applyd stopped"* ]]
	bg_wait run 30
	[ "$BG_STATUS" -eq 0 ]
	assert_all_equal
	[ "$(cutover_value state)" = cut_over ]
	max_source=$(psql_source "SELECT max(id) FROM orders")
	run -0 psql_target "INSERT INTO orders (note) VALUES ('first on the target') RETURNING id"
	[ "$output" -gt "$max_source" ]
}
