#!/usr/bin/env bats
# trellara-snapshot against real PostgreSQL: a consistent copy under
# load, resumable after a kill at every fault point, DDL during a copy,
# idempotent re-runs, reseed of one table while streaming.

load helpers/common

TABLES="public.pgbench_accounts,public.pgbench_branches,public.pgbench_tellers,public.pgbench_history"

setup() {
	trellara_setup
	export TRELLARA_STATUS_INTERVAL_MS=200
}

# pgbench data on the source only; the target gets its tables from the snapshot
source_init() {
	pgbench -q -i -s "$1" -h "$SOURCE_HOST" -p "$SOURCE_PORT" "$SOURCE_DB" >/dev/null 2>&1
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history"
	write_flow_file "$FLOW_FILE" --tables "$TABLES" --set stream.min_free_bytes=1048576
}

source_load() {
	pgbench -n -c 2 -R 200 -T "$1" -h "$SOURCE_HOST" -p "$SOURCE_PORT" "$SOURCE_DB" > "$TEST_DIR/pgbench.log" 2>&1
}

stream_and_compare() {
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	local lsn
	lsn=$(source_flushed_lsn)
	wait_for -t 180 -m "target caught up with $lsn" \
		"[ \"\$(psql_target \"SELECT coalesce((SELECT applied_through_lsn >= '$lsn' FROM trellara.apply_checkpoint), false)\")\" = t ]"
	assert_tables_equal pgbench_accounts pgbench_branches pgbench_tellers pgbench_history
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
	[ "$BG_STATUS" -eq 0 ]
}

run_state() {
	psql_target "SELECT state FROM trellara.snapshot_runs WHERE run_id = 'initial'"
}

@test "a snapshot of 4 tables (one of 1 000 000 rows) while pgbench writes, then streaming: identical, no gap, no overlap" {
	source_init 10
	# the source writes from before the snapshot starts until after it ends
	pgbench -n -c 2 -R 200 -T 300 -h "$SOURCE_HOST" -p "$SOURCE_PORT" "$SOURCE_DB" >"$TEST_DIR/pgbench.log" 2>&1 &
	load=$!
	wait_for -t 30 "[ \"\$(psql_source 'SELECT count(*) FROM pgbench_history')\" -gt 0 ]"
	run -0 trellara-snapshot --config "$FLOW_FILE" --create-tables
	kill -0 "$load" # still writing when the snapshot was done
	[[ "$output" == *"copied public.pgbench_accounts: 1000000 rows"* ]]
	[[ "$output" == *"stream_handoff_ready"* ]]
	[ "$(run_state)" = stream_handoff_ready ]
	# evidence: one handoff row per table at the slot's consistent point
	[ "$(psql_target "SELECT count(*) FROM trellara.snapshot_handoff_events")" -eq 4 ]
	[ "$(psql_target "SELECT count(DISTINCT source_watermark) FROM trellara.snapshot_handoff_events")" -eq 1 ]
	[ "$(psql_target "SELECT e.source_watermark = r.consistent_lsn FROM trellara.snapshot_handoff_events e JOIN trellara.snapshot_runs r USING (run_id) LIMIT 1")" = t ]
	# the evidence is immutable
	run ! psql_target "DELETE FROM trellara.snapshot_handoff_events"
	# indexes and keys were built after the data
	[ "$(psql_target "SELECT count(*) FROM pg_indexes WHERE tablename = 'pgbench_accounts'")" -eq 1 ]
	# changes committed after the handoff too, then the load stops
	wait_for -t 30 "[ \"\$(psql_source 'SELECT count(*) FROM pgbench_history')\" -gt \"$(psql_source 'SELECT count(*) FROM pgbench_history')\" ]"
	kill -TERM "$load"
	wait "$load" || true
	stream_and_compare
	[ "$(run_state)" = streaming ]
	[ "$(psql_source "SELECT count(*) FROM pgbench_history")" -gt 100 ]
}

@test "running the same snapshot twice: the second copies nothing and says so" {
	source_init 1
	run -0 trellara-snapshot --config "$FLOW_FILE" --create-tables
	copied_at=$(psql_target "SELECT max(updated_at) FROM trellara.snapshot_table_progress")
	run -0 trellara-snapshot --config "$FLOW_FILE"
	[[ "$output" == *"nothing to do"* ]]
	[ "$(grep -c '^skipped .*copied already' <<<"$output")" -eq 4 ]
	[ "$(psql_target "SELECT max(updated_at) FROM trellara.snapshot_table_progress")" = "$copied_at" ]
	[ "$(psql_target "SELECT count(*) FROM trellara.snapshot_handoff_events")" -eq 4 ]
	run -0 trellara-snapshot status --config "$FLOW_FILE" --format json
	[ "$(jq -r .run.state <<<"$output")" = stream_handoff_ready ]
	[ "$(jq '[.tables[] | select(.state == "copied")] | length' <<<"$output")" -eq 4 ]
	[[ "$(jq -r .next_action <<<"$output")" == *capture* ]]
}

@test "capture refuses a flow whose snapshot is not handed off" {
	source_init 1
	TRELLARA_FAULT=snapshot.after_copy_before_handoff run -137 trellara-snapshot --config "$FLOW_FILE" --create-tables
	run -78 trellara-capture --config "$FLOW_FILE"
	[[ "$output" == *"no handoff-ready snapshot run"* ]]
}

# kill at a fault point, write more on the source, run again, stream
resume_after() {
	local point=$1
	source_init 1
	TRELLARA_FAULT=$point run -137 trellara-snapshot --config "$FLOW_FILE" --create-tables
	[[ "$output" == *"fault point \"$point\" reached"* ]]
	before=$(run_state)
	source_load 3
	run -0 trellara-snapshot --config "$FLOW_FILE" --create-tables
	[ "$(run_state)" = stream_handoff_ready ]
	# keys and indexes exist whichever invocation created the tables
	[ "$(psql_target "SELECT count(*) FROM pg_indexes WHERE tablename = 'pgbench_accounts'")" -eq 1 ]
	source_load 3
	stream_and_compare
}

@test "snapshot.after_slot_before_record: killed, run again, streamed: identical" {
	resume_after snapshot.after_slot_before_record
	# the first run never recorded its slot: the second made its own
	[ "$before" = planned ]
	[ "$(psql_target "SELECT count(DISTINCT source_watermark) FROM trellara.snapshot_handoff_events")" -eq 1 ]
}

@test "snapshot.after_export_before_copy: killed, resumed at a fresh snapshot, streamed: identical" {
	resume_after snapshot.after_export_before_copy
	[ "$before" = snapshot_exported ]
	# the tables were copied at the resume's own snapshot, after the slot's consistent point
	[ "$(psql_target "SELECT bool_and(p.watermark_lsn > r.consistent_lsn) FROM trellara.snapshot_table_progress p JOIN trellara.snapshot_runs r USING (run_id)")" = t ]
}

@test "snapshot.mid_table_copy: the half copy is rolled back, the resume copies it whole: identical" {
	resume_after snapshot.mid_table_copy
	[ "$before" = copying_table ]
}

@test "snapshot.after_copy_before_handoff: nothing copied twice, handoff recorded once: identical" {
	resume_after snapshot.after_copy_before_handoff
	[ "$before" = copy_complete ]
	[[ "$output" != *"copied public."* ]]
	[ "$(psql_target "SELECT count(*) FROM trellara.snapshot_handoff_events")" -eq 4 ]
}

@test "snapshot.after_handoff_before_stream: the run is handed off; running again changes nothing: identical" {
	source_init 1
	TRELLARA_FAULT=snapshot.after_handoff_before_stream run -137 trellara-snapshot --config "$FLOW_FILE" --create-tables
	[ "$(run_state)" = stream_handoff_ready ]
	run -0 trellara-snapshot --config "$FLOW_FILE"
	[[ "$output" == *"nothing to do"* ]]
	source_load 3
	stream_and_compare
}

@test "ALTER TABLE ADD COLUMN during a table's copy: no handoff until it is copied again" {
	source_init 1
	export TRELLARA_PAUSE=snapshot.before_table_copy TRELLARA_PAUSE_DIR="$TEST_DIR"
	write_flow_file "$FLOW_FILE" --tables "public.pgbench_branches" --set stream.min_free_bytes=1048576
	bg_start snap trellara-snapshot --config "$FLOW_FILE" --create-tables
	wait_for "[ -e '$TEST_DIR/snapshot.before_table_copy.paused' ]"
	psql_source "ALTER TABLE pgbench_branches ADD COLUMN region text DEFAULT 'north'"
	touch "$TEST_DIR/snapshot.before_table_copy.resume"
	bg_wait snap 60
	[ "$BG_STATUS" -eq 1 ]
	grep -q "NOT handed off public.pgbench_branches: its schema changed during the copy" "$TEST_DIR/snap.log"
	[ "$(run_state)" = failed_recoverable ]
	[[ "$(psql_target "SELECT failure_reason FROM trellara.snapshot_runs")" == *"public.pgbench_branches: its schema changed"* ]]
	[ "$(psql_target "SELECT state FROM trellara.snapshot_table_progress WHERE relation = 'public.pgbench_branches'")" = schema_changed ]
	run -78 trellara-capture --config "$FLOW_FILE"
	unset TRELLARA_PAUSE
	psql_target "ALTER TABLE pgbench_branches ADD COLUMN region text DEFAULT 'north'"
	run -0 trellara-snapshot --config "$FLOW_FILE"
	[[ "$output" == *"copied public.pgbench_branches"* ]]
	[ "$(run_state)" = stream_handoff_ready ]
	assert_tables_equal pgbench_branches
}

@test "a table whose copy fails: the run is failed_recoverable with its reason before the retry, which copies only it" {
	source_init 1
	write_flow_file "$FLOW_FILE" --tables "public.pgbench_branches,public.pgbench_tellers" --set stream.min_free_bytes=1048576
	psql_target "CREATE TABLE pgbench_branches (bid int PRIMARY KEY, bbalance int, filler char(88), CONSTRAINT no_first CHECK (bid > 1))" \
		"CREATE TABLE pgbench_tellers (tid int PRIMARY KEY, bid int, tbalance int, filler char(84))"
	run -75 trellara-snapshot --config "$FLOW_FILE"
	[[ "$output" == *"FAILED public.pgbench_branches"* ]]
	[ "$(run_state)" = failed_recoverable ]
	reason=$(psql_target "SELECT failure_reason FROM trellara.snapshot_runs WHERE run_id = 'initial'")
	[[ $reason == *"public.pgbench_branches"*'"no_first"'* ]]
	[[ $reason != *pgbench_tellers* ]]
	run -0 trellara-snapshot status --config "$FLOW_FILE"
	[[ "$output" == *"failure: "*"public.pgbench_branches"* ]]
	run -78 trellara-capture --config "$FLOW_FILE"
	psql_target "ALTER TABLE pgbench_branches DROP CONSTRAINT no_first"
	run -0 trellara-snapshot --config "$FLOW_FILE"
	[[ "$output" == *"copied public.pgbench_branches"* ]]
	[[ "$output" == *"skipped public.pgbench_tellers: copied already"* ]]
	[ "$(run_state)" = stream_handoff_ready ]
	[ -z "$(psql_target "SELECT failure_reason FROM trellara.snapshot_runs WHERE run_id = 'initial'")" ]
	assert_tables_equal pgbench_branches pgbench_tellers
}

@test "reseed of a table under load: identical afterwards" {
	source_init 1
	run -0 trellara-snapshot --config "$FLOW_FILE" --create-tables
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	# the load lasts until the reseed is done
	bg_start load pgbench_until_stopped -c 2 -R 200
	# the load reaches the target: the reseed runs under it
	wait_for -t 60 -m "applyd applies pgbench transactions" \
		'[ "$(psql_target "SELECT coalesce((SELECT applied_transactions FROM trellara.apply_checkpoint), 0)")" -gt 10 ]'
	# damage the target copy; the reseed repairs it without stopping the flow
	# (applyd updates the same rows in another order: a deadlock may pick
	# this statement as its victim; it rolls back whole, so try again)
	wait_for -t 30 'psql_target "UPDATE pgbench_tellers SET tbalance = tbalance + 1000000"'
	run -0 trellara reseed --config "$FLOW_FILE" --table public.pgbench_tellers
	[[ "$output" == *"reseeded public.pgbench_tellers"* ]]
	[ "$(psql_target "SELECT count(*) FROM trellara.apply_fence")" -eq 0 ]
	load_stop
	[ "$BG_STATUS" -eq 0 ]
	lsn=$(source_flushed_lsn)
	wait_for -t 180 "[ \"\$(psql_target \"SELECT applied_through_lsn >= '$lsn' FROM trellara.apply_checkpoint\")\" = t ]"
	assert_tables_equal pgbench_accounts pgbench_branches pgbench_tellers pgbench_history
	bg_stop applyd TERM
	bg_stop capture TERM
}

@test "snapshot status --format json escapes what it prints: a source id with a quote and a backslash stays valid JSON" {
	export SOURCE_ID='src"q\ote'
	psql_source "CREATE TABLE accounts (id int PRIMARY KEY, note text)" \
		"INSERT INTO accounts SELECT g, 'n' || g FROM generate_series(1, 5) g" \
		"CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE accounts"
	write_flow_file "$FLOW_FILE" --tables public.accounts
	run -0 trellara-snapshot --config "$FLOW_FILE" --create-tables
	run -0 trellara-snapshot status --config "$FLOW_FILE" --format json
	jq -e . <<<"$output" >/dev/null
	[ "$(jq -r .flow <<<"$output")" = 'src"q\ote:bats_dataset' ]
	[ "$(jq -r .run.state <<<"$output")" = stream_handoff_ready ]
	[ "$(jq -r '.tables[0].table' <<<"$output")" = public.accounts ]
}
