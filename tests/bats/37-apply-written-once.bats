#!/usr/bin/env bats
# A large transaction the server streams while it is in progress is written
# once: pending chunks as it comes, then a manifest listing them by offset
# and a commit marker; applyd reads them back at the marker and applies them
# in one target transaction.  Aborts (of the transaction or of its
# subtransactions) leave nothing on the target, a capture killed in the
# middle applies it exactly once, and retention keeps the pending chunks a
# later manifest lists.

load helpers/common

setup() {
	trellara_setup
	for side in source target; do
		psql_$side "CREATE TABLE big (id int PRIMARY KEY, v int)" "CREATE TABLE small (id int PRIMARY KEY)"
	done
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE big, small"
	# the harness's logical_decoding_work_mem (64kB) makes the server stream
	# a transaction of a few thousand rows; 1000 changes per pending chunk
	write_flow_file "$FLOW_FILE" --tables "public.big,public.small" --set stream.min_free_bytes=1048576 \
		--set source.stream_spill_threshold_changes=1000 --set stream.max_batch_messages=1
	export TRELLARA_STATUS_INTERVAL_MS=200
}

frames() {
	trellara-stream read --config "$FLOW_FILE" --format json
}

start_flow() {
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
}

stop_flow() {
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
	[ "$BG_STATUS" -eq 0 ]
}

@test "an aborted large transaction leaves nothing on the target: its pending chunks are never listed" {
	start_flow
	# the transaction stays open until its pending chunks are in the stream:
	# a server that decodes it only after the ROLLBACK may skip it unstreamed
	psql_source <<SQL &
BEGIN;
INSERT INTO big SELECT g, g FROM generate_series(1, 20000) g;
\\! while [ ! -e "$TEST_DIR/rollback" ]; do sleep 0.1; done
ROLLBACK;
SQL
	local session=$!
	wait_for "[ \"\$(frames | jq -s '[.[] | select(.type == \"pending_chunk\")] | length')\" -ge 5 ]"
	touch "$TEST_DIR/rollback"
	wait "$session"
	psql_source "INSERT INTO small VALUES (1)"
	caught_up
	assert_tables_equal big small
	[ "$(psql_target "SELECT count(*) FROM big")" -eq 0 ]
	[ "$(psql_target "SELECT count(*) FROM small")" -eq 1 ]
	run -0 frames
	# it was written as it came, then a pending_abort named it; no manifest
	[ "$(jq -s '[.[] | select(.type == "pending_chunk")] | length' <<<"$output")" -ge 5 ]
	xid=$(jq -s -r '[.[] | select(.type == "pending_chunk")][0].xid' <<<"$output")
	[ "$(jq -s -r "[.[] | select(.type == \"pending_abort\") | .xid] | join(\",\")" <<<"$output")" = "$xid" ]
	[ "$(jq -s '[.[] | select(.type == "manifest" or .type == "commit_marker")] | length' <<<"$output")" -eq 0 ]
	# nothing of it on the target, nothing quarantined
	[ "$(psql_target "SELECT count(*) FROM trellara.quarantine")" -eq 0 ]
	stop_flow
}

@test "a large transaction with aborted subtransactions: only the changes in use arrive" {
	start_flow
	# the rolled-back subtransaction is large enough to be streamed before
	# its ROLLBACK TO: its changes are in pending chunks, cut by the manifest
	psql_source "BEGIN" \
		"INSERT INTO big SELECT g, g FROM generate_series(1, 5000) g" \
		"SAVEPOINT s1" \
		"INSERT INTO big SELECT g, g FROM generate_series(5001, 15000) g" \
		"ROLLBACK TO SAVEPOINT s1" \
		"INSERT INTO big SELECT g, -g FROM generate_series(5001, 6000) g" \
		"SAVEPOINT s2" \
		"UPDATE big SET v = 0 WHERE id <= 3000" \
		"ROLLBACK TO SAVEPOINT s2" \
		"COMMIT"
	caught_up
	assert_tables_equal big
	[ "$(psql_target "SELECT count(*) FROM big")" -eq 6000 ]
	[ "$(psql_target "SELECT count(*) FROM big WHERE v = 0")" -eq 0 ]
	run -0 frames
	written=$(jq -s '[.[] | select(.type == "pending_chunk") | .changes[]] | length' <<<"$output")
	in_use=$(jq -s '[.[] | select(.type == "manifest") | .chunks[].changes] | add' <<<"$output")
	echo "changes written: $written, in use: $in_use"
	[ "$in_use" -eq 6000 ]
	# the cut changes were written, and are not in use
	[ "$written" -gt "$in_use" ]
	[ "$(jq -s '[.[] | select(.type == "txn" or .type == "chunk")] | length' <<<"$output")" -eq 0 ]
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ $output == *"result: CONVERGED"* ]]
	stop_flow
}

@test "capture killed in the middle of a streamed transaction: the replay applies it exactly once" {
	TRELLARA_FAULT=capture.after_chunk_sync:3 bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	psql_source "INSERT INTO big SELECT g, g FROM generate_series(1, 20000) g"
	bg_wait capture 60
	[ "$BG_STATUS" -eq 137 ]
	grep -q 'fault point "capture.after_chunk_sync" reached (hit 3)' "$TEST_DIR/capture.log"
	# pending chunks durable, nothing that lists them: nothing applied
	[ "$(frames | jq -s '[.[] | select(.type == "pending_chunk")] | length')" -ge 3 ]
	sleep 1
	[ "$(psql_target "SELECT count(*) FROM big")" -eq 0 ]
	[ "$(applied_transactions)" -eq 0 ]
	# the restarted capture gets the transaction again from the slot and
	# writes it again (another run); the first run's chunks are orphans
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	caught_up
	assert_tables_equal big
	[ "$(applied_transactions)" -eq 1 ]
	[ "$(psql_target "SELECT count(*) FROM trellara.quarantine")" -eq 0 ]
	run -0 frames
	[ "$(jq -s '[.[] | select(.type == "pending_chunk") | .run] | unique | length' <<<"$output")" -eq 2 ]
	[ "$(jq -s '[.[] | select(.type == "manifest")] | length' <<<"$output")" -eq 1 ]
	# the manifest lists only the second run's chunks
	second=$(jq -s -r '[.[] | select(.type == "pending_chunk")] | last | .run' <<<"$output")
	listed=$(jq -s -r '[.[] | select(.type == "manifest") | .chunks[].offset] | map(tostring) | join(",")' <<<"$output")
	of_second=$(jq -s -r "[.[] | select(.type == \"pending_chunk\" and .run == $second) | .offset] | map(tostring) | join(\",\")" <<<"$output")
	[ "$listed" = "$of_second" ]
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ $output == *"result: CONVERGED"* ]]
	stop_flow
}

@test "retention keeps the pending chunks of an open transaction that applyd has read past" {
	write_flow_file "$FLOW_FILE" --tables "public.big,public.small" --set stream.min_free_bytes=1048576 \
		--set source.stream_spill_threshold_changes=1000 --set stream.max_batch_messages=1 \
		--set stream.segment_bytes=65536
	start_flow
	# a large transaction stays open after the server streamed part of it,
	# until the test creates $TEST_DIR/commit
	psql_source <<SQL &
BEGIN;
INSERT INTO big SELECT g, g FROM generate_series(1, 20000) g;
\\! while [ ! -e "$TEST_DIR/commit" ]; do sleep 0.1; done
COMMIT;
SQL
	local session=$!
	wait_for -t 20 "[ \"\$(frames | jq -s '[.[] | select(.type == \"pending_chunk\")] | length')\" -ge 10 ]"
	first=$(frames | jq -s '[.[] | select(.type == "pending_chunk")][0].offset')
	# small transactions commit after its pending chunks; applyd applies
	# them, its checkpoint moves past the pending chunks and several segments
	seq 1 300 | sed 's/.*/INSERT INTO small VALUES (&);/' | psql_source
	wait_for -t 20 "[ \"\$(psql_target 'SELECT count(*) FROM small')\" -eq 300 ]"
	[ "$(psql_target "SELECT stream_offset FROM trellara.apply_checkpoint")" -gt $((first + 300)) ]
	# the group stays at its first pending chunk however far it applied
	wait_for -t 10 "[ -s '$STREAM_DIR/groups/applyd' ] && [ \"\$(cat '$STREAM_DIR/groups/applyd')\" -le $first ]"
	run -0 trellara-stream retention --dir "$STREAM_DIR" --protect applyd --apply --format json
	echo "$output"
	# the pending chunks are all still in the stream (the first one readable)
	[ "$(frames | jq -s "[.[] | select(.type == \"pending_chunk\" and .offset == $first)] | length")" -eq 1 ]
	touch "$TEST_DIR/commit"
	wait "$session"
	caught_up
	assert_tables_equal big small
	[ "$(psql_target "SELECT count(*) FROM trellara.quarantine")" -eq 0 ]
	# once it is applied the group moves past it, and retention may remove them
	wait_for -t 10 "[ \"\$(cat '$STREAM_DIR/groups/applyd')\" -gt $first ]"
	run -0 trellara-stream retention --dir "$STREAM_DIR" --protect applyd --apply --format json
	[ "$(frames | jq -s "[.[] | select(.offset == $first)] | length")" -eq 0 ]
	stop_flow
}

@test "capture killed between a written-once transaction's manifest and its commit marker, transactions batched before it: each applied exactly once" {
	# applyd batches up to 1000 transactions (the default) and starts only
	# after capture died: it reads the two small transactions, the pending
	# chunks and the manifest in one go, the small ones still in its open
	# batch when the manifest comes
	write_flow_file "$FLOW_FILE" --tables "public.big,public.small" --set stream.min_free_bytes=1048576 \
		--set source.stream_spill_threshold_changes=1000 --set stream.max_batch_messages=1 \
		--set apply.batch_transactions=1000
	TRELLARA_FAULT=capture.after_manifest_sync bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
	psql_source "INSERT INTO small VALUES (1)" "INSERT INTO small VALUES (2)"
	psql_source "INSERT INTO big SELECT g, g FROM generate_series(1, 20000) g"
	bg_wait capture 60
	[ "$BG_STATUS" -eq 137 ]
	grep -q 'fault point "capture.after_manifest_sync" reached' "$TEST_DIR/capture.log"
	run -0 frames
	[ "$(jq -s '[.[] | select(.type == "manifest")] | length' <<<"$output")" -eq 1 ]
	[ "$(jq -s '[.[] | select(.type == "commit_marker")] | length' <<<"$output")" -eq 0 ]
	[ "$(jq -s '[.[] | select(.type == "txn")] | length' <<<"$output")" -eq 2 ]
	# what came before the set commits on its own; the set waits for its marker
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	wait_for -t 30 -m "the small transactions committed while the set waits" \
		'[ "$(psql_target "SELECT count(*) FROM small")" -eq 2 ]'
	[ "$(psql_target "SELECT count(*) FROM big")" -eq 0 ]
	# the restarted capture writes the transaction again (another run):
	# applyd drops the incomplete set, nothing else, and applies the replay
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	caught_up
	assert_tables_equal big small
	[ "$(applied_transactions)" -eq 3 ]
	[ "$(psql_target "SELECT count(*) FROM trellara.quarantine")" -eq 0 ]
	grep -q 'incomplete chunk set (0 chunks) discarded' "$TEST_DIR/applyd.log"
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ $output == *"result: CONVERGED"* ]]
	stop_flow
}
