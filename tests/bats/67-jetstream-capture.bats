#!/usr/bin/env bats
#
# trellara-capture into a JetStream stream (stream.kind jetstream) on a
# 3-node cluster (helpers/nats.bash) from a real PostgreSQL source
# (helpers/common).  These tests read the stream back with
# build/tests/jetstream_publish dump (68-jetstream-flow has applyd), which decodes
# every message by sequence as a frame (and fails on one that is not a
# valid frame at offset = sequence - 1).
#
# Every source transaction inserts one row into events and records its
# own transaction id there, so the stream's transactions can be compared
# with what the source committed: every xid exactly once, commit LSNs
# strictly increasing.

bats_require_minimum_version 1.5.0

load helpers/common
load helpers/nats

setup_file() {
	trellara_nats_need_publish || return 1
	trellara_setup_file || return 1
	trellara_nats_cluster_start
}

teardown_file() {
	trellara_nats_cluster_stop
	trellara_teardown_file
}

setup() {
	trellara_setup
	export JS_STREAM=TRELLARA_CAP$BATS_TEST_NUMBER JS_SUBJECT=trellara.cap$BATS_TEST_NUMBER
	psql_source "CREATE TABLE events (id int PRIMARY KEY, x xid8 NOT NULL DEFAULT pg_current_xact_id())" \
		"CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE events"
	write_flow_file "$FLOW_FILE" --tables "public.events" "$(nats_stream_yaml "$JS_STREAM" "$JS_SUBJECT")"
	export TRELLARA_STATUS_INTERVAL_MS=200
	run -0 trellara stream init --config "$FLOW_FILE"
}

teardown() {
	local i
	trellara_teardown
	# a test that stopped nodes leaves the cluster whole for the next
	for ((i = 1; i <= NATS_NODES; i++)); do
		_nats_pid "$i" >/dev/null || trellara_nats_node_start "$i"
	done
	trellara_nats_wait_ready 30
}

# the stream's messages decoded, one JSON object a line
dump() {
	"$PUBLISH" "$NATS_URLS" dump "$JS_STREAM"
}

# transactions in the stream (txn frames and commit markers)
txn_count() {
	dump | jq -s '[.[] | select(.type == "txn" or .type == "commit_marker")] | length'
}

# load FROM TO: one source transaction per row id FROM..TO
load_rows() {
	local i
	for ((i = $1; i <= $2; i++)); do
		echo "INSERT INTO events (id) VALUES ($i);"
	done | psql -X -q -v ON_ERROR_STOP=1 "$SOURCE_URL" >/dev/null
}

# the xids the source committed, sorted (32-bit, as pgoutput sends them)
source_xids() {
	psql_source "SELECT (x::text::bigint % 4294967296) FROM events ORDER BY 1"
}

# assert_each_once: the stream holds every committed source transaction
# exactly once, in commit order, and every message is a valid frame
assert_each_once() {
	local frames
	frames=$(dump) || return 1
	diff <(source_xids) <(jq -r 'select(.type == "txn" or .type == "commit_marker") | .xid' <<<"$frames" | sort -n)
	# commit order: commit LSNs strictly increase along the stream
	jq -s -e '[.[] | select(.type == "txn" or .type == "commit_marker") | .commit_lsn] as $c
		| [range(1; $c | length) | select($c[.] <= $c[. - 1])] | length == 0' <<<"$frames" >/dev/null
}

slot_flush_lsn() {
	psql_source "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME'"
}

slot_active() {
	psql_source "SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active" | grep -q 1
}

# the highest LSN the stream records (a transaction's end or a watermark), as pg_lsn
stream_recorded_lsn() {
	local n
	n=$(dump | jq -s '[.[] | .end_lsn, .lsn] | max')
	psql_source "SELECT '0/0'::pg_lsn + $n"
}

@test "capture publishes every source transaction once, in commit order, as frames at offset = sequence - 1; the slot never passes what the stream holds" {
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for slot_active
	load_rows 1 40
	wait_for -m "40 transactions in the stream" '[ "$(txn_count)" -eq 40 ]'
	assert_each_once
	# acknowledged only what the stream holds
	wait_for -m "the slot's confirmed position to move" '[ "$(slot_flush_lsn)" != 0/0 ]'
	run -0 psql_source "SELECT '$(slot_flush_lsn)'::pg_lsn <= '$(stream_recorded_lsn)'::pg_lsn"
	[ "$output" = t ]
	bg_stop capture TERM
	[ "$BG_STATUS" -eq 0 ]
	# every message of the stream is a frame (counted once capture is
	# stopped: while it runs, a watermark may land between the two reads)
	run -0 --separate-stderr trellara stream inspect --config "$FLOW_FILE" --format json
	local messages
	messages=$(jq '.messages' <<<"$output")
	((messages >= 40))
	[ "$(dump | wc -l)" -eq "$messages" ]
	grep -q "capture stopped: 40 transactions" "$TEST_DIR/capture.log"
	grep -q "JetStream stream \"$JS_STREAM\" on nats://" "$TEST_DIR/capture.log"
	# a restart reads where the stream ends and appends nothing twice
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for slot_active
	load_rows 41 45
	wait_for -m "45 transactions in the stream" '[ "$(txn_count)" -eq 45 ]'
	assert_each_once
	grep -q "last commit 0/[0-9A-F]*[1-9A-F]" "$TEST_DIR/capture.log"
}

@test "capture killed -9 mid-load and restarted: every source transaction exactly once in the stream" {
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for slot_active
	bg_start load load_rows 1 400
	wait_for -m "some transactions in the stream" '[ "$(txn_count)" -ge 50 ]'
	bg_stop capture KILL
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	bg_wait load 120
	[ "$BG_STATUS" -eq 0 ]
	wait_for -t 60 -m "400 transactions in the stream" '[ "$(txn_count)" -ge 400 ]'
	assert_each_once
	[ "$(txn_count)" -eq 400 ]
	# the restart found the stream's last commit, and what the slot sent
	# again up to it was skipped, not published twice
	grep -q "last commit 0/[0-9A-F]*[1-9A-F]" "$TEST_DIR/capture.log"
}

@test "capture killed between the PubAcks and the source acknowledgement (capture.after_append_before_ack): the restart skips what the stream holds, counted, each transaction once" {
	TRELLARA_FAULT=capture.after_append_before_ack:3 bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for slot_active
	load_rows 1 5
	bg_wait capture 30
	[ "$BG_STATUS" -eq 137 ]
	grep -q 'fault point "capture.after_append_before_ack" reached' "$TEST_DIR/capture.log"
	local before
	before=$(txn_count)
	((before >= 1))
	# the slot never confirmed more than the stream holds
	run -0 psql_source "SELECT '$(slot_flush_lsn)'::pg_lsn <= '$(stream_recorded_lsn)'::pg_lsn"
	[ "$output" = t ]
	bg_start capture2 trellara-capture --config "$FLOW_FILE" --start-now
	load_rows 6 6
	wait_for -m "6 transactions in the stream" '[ "$(txn_count)" -ge 6 ]'
	bg_stop capture2 TERM
	[ "$BG_STATUS" -eq 0 ]
	assert_each_once
	[ "$(txn_count)" -eq 6 ]
	# the server sent again what was published but never acknowledged:
	# skipped as already in the stream, and counted
	grep -q "skipped transaction [0-9]* (commit [0-9A-F/]*): already in the stream" "$TEST_DIR/capture2.log"
	grep -Eq "[1-9][0-9]* skipped as duplicates" "$TEST_DIR/capture2.log"
}

@test "a transaction larger than the servers' max_payload goes in chunks that fit it: no exit, every message under 1 MiB, the transaction once" {
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for slot_active
	# one transaction of 60000 rows: several MiB of changes
	psql_source "INSERT INTO events (id) SELECT g FROM generate_series(1, 60000) g"
	load_rows 60001 60001
	wait_for -t 60 -m "2 transactions in the stream" '[ "$(txn_count)" -eq 2 ]'
	kill -0 "$(bg_pid capture)"
	local frames
	frames=$(dump)
	# chunked: several chunk messages (pending chunks when the server streamed
	# it), a manifest and a commit marker
	(($(jq -s '[.[] | select(.type == "chunk" or .type == "pending_chunk")] | length' <<<"$frames") >= 2))
	[ "$(jq -s '[.[] | select(.type == "commit_marker")] | length' <<<"$frames")" -eq 1 ]
	# each message within the servers' default max_payload (1 MiB)
	jq -s -e 'map(.bytes) | max <= 1048576' <<<"$frames" >/dev/null
	bg_stop capture TERM
	[ "$BG_STATUS" -eq 0 ]
}

@test "another writer appends to the stream: capture's next publish fails closed (75), and a restart refuses the foreign message (65)" {
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for slot_active
	load_rows 1 5
	wait_for -m "5 transactions in the stream" '[ "$(txn_count)" -eq 5 ]'
	local acked
	acked=$(slot_flush_lsn)
	# a foreign message: capture's next message expects another last sequence
	run -0 "$PUBLISH" "$NATS_URLS" publish "$JS_SUBJECT" 1
	load_rows 6 6
	bg_wait capture 30
	[ "$BG_STATUS" -eq 75 ]
	grep -q "were stored after all, or another writer appended" "$TEST_DIR/capture.log"
	grep -q "hint: only one trellara-capture may publish to a flow's stream" "$TEST_DIR/capture.log"
	# nothing after the foreign message was acknowledged
	run -0 psql_source "SELECT '$(slot_flush_lsn)'::pg_lsn <= '$acked'::pg_lsn"
	[ "$output" = t ]
	# the stream now ends with a message capture did not write
	run -65 trellara-capture --config "$FLOW_FILE" --start-now
	[[ $output == *"is not a valid trellara frame"* ]]
}

@test "a second capture on the same flow while the first runs: it publishes nothing and stops (65 or 69), the first goes on, the stream stays valid" {
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for slot_active
	load_rows 1 5
	wait_for -m "5 transactions in the stream" '[ "$(txn_count)" -eq 5 ]'
	# the slot is the first one's: the second cannot start streaming, and
	# once the first has moved the slot past what the second read from the
	# stream, the second's view is stale: it refuses to go on (65) rather
	# than publish; else it gives up on the source (69)
	TRELLARA_RECONNECT_BASE_MS=20 run timeout 120 trellara-capture --config "$FLOW_FILE" --start-now
	[[ $status -eq 65 || $status -eq 69 ]]
	[[ $output == *'replication slot "'"$SLOT_NAME"'" is active'* ]]
	[[ $output == *"capture stopped: 0 transactions (0 changes, 0 frames) appended"* ]]
	load_rows 6 10
	wait_for -m "10 transactions in the stream" '[ "$(txn_count)" -eq 10 ]'
	assert_each_once
	kill -0 "$(bg_pid capture)"
}

@test "a stream that does not exist, or that the policy refuses: capture exits 78 with init's hint" {
	write_flow_file "$TEST_DIR/missing.yml" --tables "public.events" "$(nats_stream_yaml NO_SUCH_STREAM no.such)"
	run -78 trellara-capture --config "$TEST_DIR/missing.yml" --start-now
	[[ $output == *"JetStream stream \"NO_SUCH_STREAM\" on nats://"*"does not exist"* ]]
	[[ $output == *"trellara stream init --config"* ]]
	run -0 "$PUBLISH" "$NATS_URLS" create OLD_STREAM old.subject 3 old 86400
	write_flow_file "$TEST_DIR/old.yml" --tables "public.events" "$(nats_stream_yaml OLD_STREAM old.subject)"
	run -78 trellara-capture --config "$TEST_DIR/old.yml" --start-now
	[[ $output == *"trellara stream init --config"* ]]
	# the slot was never created: nothing was read from the source
	[ -z "$(slot_flush_lsn)" ]
}

@test "two of three nodes killed: capture holds, the slot's confirmed position does not move, SIGTERM stops it (0) and a new start exits 69; nodes back: it catches up, each transaction once" {
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for slot_active
	load_rows 1 10
	wait_for -m "10 transactions in the stream" '[ "$(txn_count)" -eq 10 ]'
	# everything durable is acknowledged before the outage
	local end
	end=$(stream_recorded_lsn)
	wait_for -m "the slot to confirm $end" "[ \"\$(psql_source \"SELECT '\$(slot_flush_lsn)'::pg_lsn >= '$end'::pg_lsn\")\" = t ]"
	trellara_nats_node_stop 2
	trellara_nats_node_stop 3
	load_rows 11 20
	# no PubAck without a quorum: capture holds the frames and waits
	wait_for -t 60 -m "capture held back" \
		"grep -q 'nothing past the last stored transaction is acknowledged to the source' '$TEST_DIR/capture.log'"
	# read once it holds (an acknowledgement of what the quorum stored
	# before the outage may still land until then, on a loaded machine)
	local before
	before=$(slot_flush_lsn)
	[ "$(psql_source "SELECT '$before'::pg_lsn >= '$end'::pg_lsn")" = t ]
	sleep 2
	[ "$(slot_flush_lsn)" = "$before" ]
	kill -0 "$(bg_pid capture)"
	# stopped while held: it drops what is not stored and exits 0
	bg_stop capture TERM 60
	[ "$BG_STATUS" -eq 0 ]
	[ "$(slot_flush_lsn)" = "$before" ]
	# started again while the quorum is still lost: 69 within seconds
	run -69 timeout 60 trellara-capture --config "$FLOW_FILE" --start-now
	[ "$(slot_flush_lsn)" = "$before" ]
	trellara_nats_node_start 2
	trellara_nats_node_start 3
	trellara_nats_wait_ready 30
	wait_for -t 60 -m "the stream's quorum" "trellara stream inspect --config '$FLOW_FILE' >/dev/null 2>&1"
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	load_rows 21 25
	wait_for -t 60 -m "25 transactions in the stream" '[ "$(txn_count)" -ge 25 ]'
	assert_each_once
	[ "$(txn_count)" -eq 25 ]
	wait_for -m "the slot to move again" "[ \"\$(slot_flush_lsn)\" != '$before' ]"
}
