#!/usr/bin/env bats
# The slot, the stream and the target's checkpoint are bound together: a
# stream directory deleted and created again (or replaced) under a
# running flow is refused by capture and by applyd, never streamed into
# or read at an old offset with changes silently missing.

load helpers/common

setup() {
	trellara_setup
	for side in source target; do
		psql_$side "CREATE TABLE accounts (id int PRIMARY KEY, owner text)"
	done
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE accounts"
	write_flow_file "$FLOW_FILE" --tables "public.accounts" --set stream.min_free_bytes=1048576
	export TRELLARA_STATUS_INTERVAL_MS=200
}

caught_up() {
	local lsn
	lsn=$(source_flushed_lsn)
	wait_for -t 60 -m "target caught up with $lsn" \
		"[ \"\$(psql_target \"SELECT coalesce((SELECT applied_through_lsn >= '$lsn' FROM trellara.apply_checkpoint), false)\")\" = t ]"
}

slot_confirmed_past() {
	local lsn=$1
	wait_for -t 60 -m "slot confirmed $lsn" \
		"[ \"\$(psql_source \"SELECT confirmed_flush_lsn >= '$lsn' FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME'\")\" = t ]"
}

# A flow that ran: rows 1..100 applied, rows 101..200 captured (the slot
# confirmed them) but not applied; then the stream directory is deleted.
flow_ran_then_stream_deleted() {
	psql_source "INSERT INTO accounts SELECT g, 'before snapshot' FROM generate_series(1, 10) g"
	run -0 trellara-snapshot --config "$FLOW_FILE"
	bg_start capture trellara-capture --config "$FLOW_FILE" "$@"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	psql_source "INSERT INTO accounts SELECT g, 'applied' FROM generate_series(11, 100) g"
	caught_up
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	psql_source "INSERT INTO accounts SELECT g, 'captured only' FROM generate_series(101, 200) g"
	slot_confirmed_past "$(source_flushed_lsn)"
	bg_stop capture TERM
	[ "$BG_STATUS" -eq 0 ]
	[ "$(psql_target "SELECT count(*) FROM accounts")" -eq 100 ]
	old_id=$(sed -n 's/^stream_id=//p' "$STREAM_DIR/meta")
	rm -rf "$STREAM_DIR"
}

@test "capture refuses a deleted and recreated stream whose slot has confirmed past it (65), until the copies cover the gap" {
	flow_ran_then_stream_deleted
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_wait capture 60
	[ "$BG_STATUS" -eq 65 ]
	grep -q "slot \"$SLOT_NAME\" has confirmed changes through" "$TEST_DIR/capture.log"
	grep -q 'hint:.*trellara snapshot --config .* --force' "$TEST_DIR/capture.log"
	# the slot did not move: nothing was streamed into the new directory
	run -0 trellara-stream inspect-local --dir "$STREAM_DIR" --format json
	[ "$(jq .empty <<<"$output")" = true ]

	# the named next action: copy every table again; then capture binds
	# the new stream, and applyd, whose checkpoint names the old one,
	# reads the new one from its start
	run -0 trellara-snapshot --config "$FLOW_FILE" --force
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	psql_source "INSERT INTO accounts VALUES (201, 'after')"
	caught_up
	assert_tables_equal accounts
	new_id=$(sed -n 's/^stream_id=//p' "$STREAM_DIR/meta")
	[ -n "$old_id" ] && [ -n "$new_id" ] && [ "$new_id" != "$old_id" ]
	[ "$(psql_target "SELECT stream_id FROM trellara.apply_checkpoint")" = "$new_id" ]
	[ "$(psql_target "SELECT slot_name FROM trellara.apply_checkpoint")" = "$SLOT_NAME" ]
	grep -q "stream \"$STREAM_DIR\" was replaced" "$TEST_DIR/applyd.log"
}

@test "applyd refuses a replaced stream (65) instead of reading it at its checkpoint's offsets" {
	flow_ran_then_stream_deleted --start-now
	# --start-now streams from the slot's position into the new directory
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	psql_source "INSERT INTO accounts VALUES (201, 'after')"
	slot_confirmed_past "$(source_flushed_lsn)"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	bg_wait applyd 60
	[ "$BG_STATUS" -eq 65 ]
	[ -n "$old_id" ]
	grep -q "belongs to stream instance $old_id" "$TEST_DIR/applyd.log"
	grep -q 'hint:.*trellara snapshot --config .* --force' "$TEST_DIR/applyd.log"
	# nothing of the new stream was applied, the checkpoint still names the old one
	[ "$(psql_target "SELECT count(*) FROM accounts")" -eq 100 ]
	[ "$(psql_target "SELECT stream_id FROM trellara.apply_checkpoint")" = "$old_id" ]
	bg_stop capture TERM
}

@test "a stream bound to another slot is refused by capture (78)" {
	psql_source "INSERT INTO accounts VALUES (1, 'x')"
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "grep -q '^slot=$SLOT_NAME\$' '$STREAM_DIR/meta'"
	bg_stop capture TERM
	write_flow_file "$FLOW_FILE" --tables "public.accounts" --set stream.min_free_bytes=1048576 --set "source.slot=other_slot"
	run -78 trellara-capture --config "$FLOW_FILE" --start-now
	[[ "$output" == *"follows replication slot \"$SLOT_NAME\", but the flow names slot \"other_slot\""* ]]
	psql_source "SELECT pg_drop_replication_slot('other_slot') FROM pg_replication_slots WHERE slot_name = 'other_slot'" >/dev/null
}
