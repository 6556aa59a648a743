#!/usr/bin/env bats
# A chunked (large) source transaction is one target transaction: never
# visible in part, never committed in pieces, exactly once across a capture
# crash in the middle of its chunk set.

load helpers/common

ROWS=20000

setup() {
	trellara_setup
	for side in source target; do
		psql_$side "CREATE TABLE big (id int PRIMARY KEY, v int)"
	done
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE big"
	# 1000 changes per chunk, every frame synced (published) as it is written:
	# applyd can reach the end of the stream between two chunks of one set.
	# Not streamed by the server: its chunk set is contiguous (a streamed
	# one is written once, 37-apply-written-once.bats).
	write_flow_file "$FLOW_FILE" --tables "public.big" --set stream.min_free_bytes=1048576 --set source.pgoutput='{streaming: false}' \
		--set dataset.strict_chunking='{max_changes_per_chunk: 1000}' --set stream.max_batch_messages=1
	export TRELLARA_STATUS_INTERVAL_MS=200
}

# Poll the target's row count until $TEST_DIR/poll.stop exists; one count
# per line in $TEST_DIR/counts.
poll_counts() {
	while [[ ! -e $TEST_DIR/poll.stop ]]; do
		psql_target "SELECT count(*) FROM big" >>"$TEST_DIR/counts" 2>/dev/null
		sleep 0.05
	done
}

# applyd's target sessions (apply.workers of them), as pg_stat_activity
# shows them: "idle in transaction" when one holds a transaction open
applyd_state() {
	psql_target "SELECT coalesce(max(state) FILTER (WHERE state = 'idle in transaction'), min(state), 'none') FROM pg_stat_activity WHERE application_name = 'trellara-applyd'"
}

# applyd has read the durable chunks: its transaction holds them open, or
# (the bug this file guards against) it committed some of them
applyd_took_chunks() {
	[ "$(applyd_state)" = "idle in transaction" ] || [ "$(psql_target "SELECT count(*) FROM big")" -gt 0 ]
}

@test "a 1 M-row chunk set stays invisible while applyd waits between its chunks, then appears whole" {
	ROWS=1000000
	# a production-like target: idle transactions are cut after 1 s (applyd
	# holds its open set longer than that while capture pauses)
	psql_target "ALTER DATABASE $TARGET_DB SET idle_in_transaction_session_timeout = '1s'"
	psql_admin source "ALTER DATABASE $SOURCE_DB SET logical_decoding_work_mem = '512MB'"
	write_flow_file "$FLOW_FILE" --tables "public.big" --set stream.min_free_bytes=1048576 --set source.pgoutput='{streaming: false}' \
		--set dataset.strict_chunking='{max_changes_per_chunk: 20000}' --set stream.max_batch_messages=1
	TRELLARA_PAUSE=capture.after_chunk_sync TRELLARA_PAUSE_DIR="$TEST_DIR" \
		bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	bg_start poller poll_counts
	psql_source "INSERT INTO big SELECT g, g FROM generate_series(1, $ROWS) g"
	# capture stops after the first chunk is durable and published (with
	# streaming off the server decodes the whole transaction first)
	wait_for -t 180 "[ -e '$TEST_DIR/capture.after_chunk_sync.paused' ]"
	[ "$(trellara-stream read --config "$FLOW_FILE" --format json | jq -s '[.[] | select(.type == "chunk")] | length')" -ge 1 ]
	# applyd read the chunk (its transaction is open) and is at the end of the stream
	wait_for -t 30 applyd_took_chunks
	sleep 2 # several of applyd's idle rounds (200 ms each)
	[ "$(psql_target "SELECT count(*) FROM big")" -eq 0 ]
	[ "$(applyd_state)" = "idle in transaction" ]
	[ "$(psql_target "SELECT coalesce((SELECT applied_transactions FROM trellara.apply_checkpoint), 0)")" -eq 0 ]
	touch "$TEST_DIR/capture.after_chunk_sync.resume"
	caught_up
	touch "$TEST_DIR/poll.stop"
	bg_wait poller 10
	[ "$(psql_target "SELECT count(*) FROM big")" -eq "$ROWS" ]
	# every count the reader saw was 0 or all rows, never a part
	[ -s "$TEST_DIR/counts" ]
	run -0 awk -v all="$ROWS" '$1 != 0 && $1 != all { print "partial count " $1; bad = 1 } END { exit bad }' "$TEST_DIR/counts"
	assert_tables_equal big
	[ "$(psql_target "SELECT applied_transactions FROM trellara.apply_checkpoint")" -eq 1 ]
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
}

@test "capture, then applyd killed in the middle of a chunk set: the replay applies it exactly once" {
	TRELLARA_FAULT=capture.after_chunk_sync:3 bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	psql_source "INSERT INTO big SELECT g, g FROM generate_series(1, $ROWS) g"
	bg_wait capture 60
	[ "$BG_STATUS" -eq 137 ]
	grep -q 'fault point "capture.after_chunk_sync" reached (hit 3)' "$TEST_DIR/capture.log"
	# three chunks durable, no commit marker: applyd holds them uncommitted
	[ "$(trellara-stream read --config "$FLOW_FILE" --format json | jq -s '[.[] | select(.type == "chunk")] | length')" -eq 3 ]
	wait_for -t 30 applyd_took_chunks
	sleep 2
	[ "$(psql_target "SELECT count(*) FROM big")" -eq 0 ]
	# applyd killed too while it holds the open set: nothing of it committed
	kill -KILL "$(bg_pid applyd)"
	bg_wait applyd 10
	[ "$BG_STATUS" -eq 137 ]
	[ "$(psql_target "SELECT count(*) FROM big")" -eq 0 ]
	[ "$(psql_target "SELECT applied_transactions FROM trellara.apply_checkpoint")" -eq 0 ]
	# the restarted applyd reads the incomplete set again, and holds it
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	wait_for -t 30 applyd_took_chunks
	# the restarted capture gets the transaction again from the slot
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	caught_up
	[ "$(psql_target "SELECT count(*) FROM big")" -eq "$ROWS" ]
	assert_tables_equal big
	[ "$(psql_target "SELECT count(*) FROM trellara.quarantine")" -eq 0 ]
	[ "$(psql_target "SELECT applied_transactions FROM trellara.apply_checkpoint")" -eq 1 ]
	grep -q "chunk set starts again" "$TEST_DIR/applyd.log"
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
}

@test "a chunk set cut short, then its transaction again as one txn frame (strict_chunking turned off for the restart): applied once, not quarantined" {
	TRELLARA_FAULT=capture.after_chunk_sync:3 bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	psql_source "INSERT INTO big SELECT g, g FROM generate_series(1, $ROWS) g"
	bg_wait capture 60
	[ "$BG_STATUS" -eq 137 ]
	grep -q 'fault point "capture.after_chunk_sync" reached (hit 3)' "$TEST_DIR/capture.log"
	wait_for -t 30 applyd_took_chunks
	# the operator drops strict_chunking before starting capture again: the
	# server sends the transaction again, and (far below 16 MiB) it is
	# written as one txn frame at the commit LSN of the incomplete set
	write_flow_file "$FLOW_FILE" --tables "public.big" --set stream.min_free_bytes=1048576 --set source.pgoutput='{streaming: false}' \
		--set stream.max_batch_messages=1
	run -1 grep -q strict_chunking "$FLOW_FILE"
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for -t 60 "trellara-stream read --config '$FLOW_FILE' --format json | jq -se 'any(.[]; .type == \"txn\")'"
	trellara-stream read --config "$FLOW_FILE" --format json >"$TEST_DIR/frames.json"
	# three chunks of the transaction, no manifest or marker, then the same
	# transaction (xid and commit LSN) as one txn frame
	run -0 jq -sc '[.[] | select(.type != "watermark") | .type]' "$TEST_DIR/frames.json"
	[ "$output" = '["chunk","chunk","chunk","txn"]' ]
	run -0 jq -sr '[.[] | select(.type == "chunk" or .type == "txn") | "\(.xid) \(.commit_lsn)"] | unique | .[]' "$TEST_DIR/frames.json"
	[[ $output =~ ^[0-9]+\ [0-9A-F]+/[0-9A-F]+$ ]]
	# applyd applies it, or (the bug) quarantines it and exits
	wait_for -t 30 "[ \"\$(applied_transactions)\" -ge 1 ] || ! kill -0 $(bg_pid applyd) 2>/dev/null"
	[ "$(psql_target "SELECT count(*) FROM trellara.quarantine")" -eq 0 ]
	caught_up 30
	assert_tables_equal big
	[ "$(psql_target "SELECT applied_transactions FROM trellara.apply_checkpoint")" -eq 1 ]
	grep -q "incomplete chunk set (3 chunks) discarded: its transaction came again whole" "$TEST_DIR/applyd.log"
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
	[ "$BG_STATUS" -eq 0 ]
}

@test "a chunk set cut short, then the slot lost and every table copied again past it: applyd discards the set (the copies hold it), never a quarantine" {
	run -0 trellara-snapshot --config "$FLOW_FILE"
	TRELLARA_FAULT=capture.after_chunk_sync:3 bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	psql_source "INSERT INTO big SELECT g, g FROM generate_series(1, $ROWS) g"
	bg_wait capture 60
	[ "$BG_STATUS" -eq 137 ]
	wait_for -t 30 applyd_took_chunks
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	# the slot is lost (dropped here; a promotion without it is the same):
	# capture stops, and its repair is a new copy of every table
	psql_source "SELECT pg_drop_replication_slot('$SLOT_NAME')" >/dev/null
	run -65 trellara-capture --config "$FLOW_FILE"
	run -0 trellara-snapshot --config "$FLOW_FILE" --force
	bg_start capture2 trellara-capture --config "$FLOW_FILE"
	bg_start applyd2 trellara-applyd --config "$FLOW_FILE"
	psql_source "INSERT INTO big SELECT g, g FROM generate_series($ROWS + 1, $ROWS + 100) g"
	caught_up
	assert_tables_equal big
	[ "$(psql_target "SELECT count(*) FROM trellara.quarantine")" -eq 0 ]
	grep -q "incomplete chunk set (3 chunks) discarded: every table's copy holds its transaction" "$TEST_DIR/applyd2.log"
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ $output == *"result: CONVERGED"* ]]
}
