#!/usr/bin/env bats
#
# The whole flow with stream.kind jetstream, on a 3-node JetStream
# cluster (helpers/nats.bash): trellara-snapshot copies the pgbench
# tables, trellara-capture publishes to the replicated stream,
# trellara-applyd reads it back by sequence, under pgbench load, with
# processes and broker nodes killed.  The end is always the same proof:
# every table identical (sorted COPY) and trellara verify CONVERGED.

bats_require_minimum_version 1.5.0

load helpers/common
load helpers/nats

TABLES="public.pgbench_accounts,public.pgbench_branches,public.pgbench_tellers,public.pgbench_history"

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
	export JS_STREAM=TRELLARA_FLOW$BATS_TEST_NUMBER JS_SUBJECT=trellara.flow$BATS_TEST_NUMBER
	export METRICS_DIR="$TEST_DIR/metrics"
	export TRELLARA_STATUS_INTERVAL_MS=200 TRELLARA_RECONNECT_BASE_MS=100
	mkdir -p "$METRICS_DIR"
	pgbench -q -i -s 1 -h "$SOURCE_HOST" -p "$SOURCE_PORT" "$SOURCE_DB" >/dev/null 2>&1
	# pgbench_history has no key: FULL identity (pgbench only inserts into it)
	psql_source "ALTER TABLE pgbench_history REPLICA IDENTITY FULL"
	write_flow_file "$FLOW_FILE" --tables "$TABLES" --set observability.metrics_dir="\"$METRICS_DIR\"" \
		"$(nats_stream_yaml "$JS_STREAM" "$JS_SUBJECT")"
	# check and its fixes (the publication) are the same for either kind
	run -0 trellara-check --config "$FLOW_FILE" --fix
	run -0 trellara stream init --config "$FLOW_FILE"
	run -0 trellara-snapshot --config "$FLOW_FILE" --create-tables
}

teardown() {
	local i
	trellara_teardown
	for ((i = 1; i <= NATS_NODES; i++)); do
		_nats_pid "$i" >/dev/null || trellara_nats_node_start "$i"
	done
	trellara_nats_wait_ready 30
}

source_load() {
	pgbench -n -c 2 -R 200 -T "$1" -h "$SOURCE_HOST" -p "$SOURCE_PORT" "$SOURCE_DB" >"$TEST_DIR/pgbench.log" 2>&1
}

# source_load_count N: N pgbench transactions on each of 2 clients
source_load_count() {
	pgbench -n -c 2 -t "$1" -h "$SOURCE_HOST" -p "$SOURCE_PORT" "$SOURCE_DB" >"$TEST_DIR/pgbench.log" 2>&1
}

slot_active() {
	[ "$(psql_source "SELECT active FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME'")" = t ]
}

slot_flush_lsn() {
	psql_source "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME'"
}

start_flow() {
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	wait_for -t 60 -m "capture streams" slot_active
}

# restart_killed NAME...: kill -9 each, start each again, wait until
# capture streams and applyd applies again
restart_killed() {
	local name applied
	applied=$(applied_transactions)
	for name in "$@"; do
		bg_stop "$name" KILL
		[ "$BG_STATUS" -eq 137 ]
	done
	for name in "$@"; do
		bg_start "$name" trellara-"$name" --config "$FLOW_FILE"
	done
	wait_for -t 60 -m "capture streams again" slot_active
	wait_for -t 60 -m "applyd applies again" "[ \"\$(applied_transactions)\" -gt $applied ]"
}

pgbench_compare() {
	assert_tables_equal pgbench_accounts pgbench_branches pgbench_tellers pgbench_history
}

# metric NAME [LABEL]: a sample of capture's or applyd's metrics file
metric() {
	cat "$METRICS_DIR"/capture.prom "$METRICS_DIR"/applyd.prom 2>/dev/null |
		awk -v name="$1" '$1 == name || index($1, name "{") == 1 { print $NF; exit }'
}

converged() {
	run -0 trellara verify --config "$FLOW_FILE"
	[[ $output == *CONVERGED* ]]
}

@test "kind jetstream: capture and applyd under pgbench, each killed -9 three times and both together: identical, CONVERGED, nothing quarantined" {
	start_flow
	bg_start load pgbench_until_stopped -c 2 -R 200
	wait_for -t 60 -m "applyd applies pgbench transactions" '[ "$(applied_transactions)" -gt 50 ]'
	for _ in 1 2 3; do
		restart_killed capture
		restart_killed applyd
		restart_killed capture applyd
	done
	load_stop
	[ "$BG_STATUS" -eq 0 ]
	grep -q "number of transactions actually processed" "$TEST_DIR/pgbench.log"
	caught_up 180
	pgbench_compare
	[ "$(psql_target "SELECT count(*) FROM trellara.quarantine")" -eq 0 ]
	converged
	# applyd read the JetStream stream, by sequence, from its checkpoint
	grep -q "applying from stream offset [1-9]" "$TEST_DIR/applyd.log"
	[[ $(psql_target "SELECT stream_id FROM trellara.apply_checkpoint") == "jetstream:$JS_STREAM:"* ]]
	# the stream holds what was applied: the checkpoint's offset is a
	# sequence of the stream, and the group's mirror is at most there
	local offset
	offset=$(psql_target "SELECT stream_offset FROM trellara.apply_checkpoint")
	run -0 --separate-stderr trellara stream inspect --config "$FLOW_FILE" --format json
	(($(jq '.last_sequence' <<<"$output") >= offset))
	bg_stop capture TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
}

@test "kind jetstream: one node killed mid-load, the flow goes on; two killed, the slot's confirmed position stands still and capture says the broker holds it back, without exiting; nodes back: caught up, identical, CONVERGED" {
	# applyd's eight reconnect attempts must outlast the two-node outage
	# below (about 20 s, more on a loaded machine): from 300 ms they span
	# about a minute, from the file's 100 ms only about 20 s
	export TRELLARA_RECONNECT_BASE_MS=300
	start_flow
	bg_start load pgbench_until_stopped -c 2 -R 200
	wait_for -t 60 -m "applyd applies pgbench transactions" '[ "$(applied_transactions)" -gt 50 ]'
	# one of three: a quorum remains, the flow continues
	trellara_nats_node_stop 1
	local applied
	applied=$(applied_transactions)
	wait_for -t 60 -m "applyd applies with one node down" "[ \"\$(applied_transactions)\" -gt $((applied + 100)) ]"
	# two of three: no quorum; capture holds, acknowledges nothing more
	local holds
	holds=$(grep -c 'nothing past the last stored transaction is acknowledged' "$TEST_DIR/capture.log" || true)
	trellara_nats_node_stop 2
	wait_for -t 60 -m "capture says the broker holds it back" \
		"[ \"\$(grep -c 'nothing past the last stored transaction is acknowledged' '$TEST_DIR/capture.log')\" -gt $holds ]"
	wait_for -t 30 -m "capture's metrics say the broker is unavailable" '[ "$(metric trellara_capture_broker_available)" = 0 ]'
	local held_lsn
	held_lsn=$(slot_flush_lsn)
	sleep 5
	[ "$(slot_flush_lsn)" = "$held_lsn" ]
	# nothing crashed: the same processes, still running
	kill -0 "$(bg_pid capture)"
	kill -0 "$(bg_pid applyd)"
	# a held publish can wait out its 10 s timeout before the retry is
	# counted (and published by the next hold): waited for
	wait_for -t 30 -m "capture retried the held frames" '(( $(metric trellara_capture_broker_retries_total) + 0 >= 1 ))'
	# status says so, from capture's metrics, as an alert
	run -0 --separate-stderr trellara status --config "$FLOW_FILE" --format json --rate-seconds 0
	[ "$(jq .stream.kind <<<"$output")" = '"jetstream"' ]
	[ "$(jq .stream.broker.available <<<"$output")" = false ]
	(($(jq .stream.broker.pending_acks <<<"$output") > 0))
	jq -e '.problems[] | select(.code == "broker_unavailable" and .severity == "alert")' <<<"$output" >/dev/null
	# the nodes return: the held frames are stored, the flow catches up
	trellara_nats_node_start 1
	trellara_nats_node_start 2
	trellara_nats_wait_ready 60
	wait_for -t 60 -m "capture stores again" "grep -q 'stored again; acknowledging the source resumes' '$TEST_DIR/capture.log'"
	load_stop
	[ "$BG_STATUS" -eq 0 ]
	caught_up 180
	[ "$(metric trellara_capture_broker_available)" = 1 ]
	run --separate-stderr trellara status --config "$FLOW_FILE" --format json --rate-seconds 0
	[ "$(jq .stream.broker.available <<<"$output")" = true ]
	jq -e '[.problems[].code] | index("broker_unavailable") == null' <<<"$output" >/dev/null
	pgbench_compare
	converged
	kill -0 "$(bg_pid capture)"
	kill -0 "$(bg_pid applyd)"
}

@test "kind jetstream: capture killed between the PubAcks and the source acknowledgement under load: what the source sends again is skipped and counted, applyd applies each transaction once" {
	TRELLARA_FAULT=capture.after_append_before_ack:40 bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	bg_start load source_load 10
	bg_wait capture 60
	[ "$BG_STATUS" -eq 137 ]
	grep -q 'fault point "capture.after_append_before_ack" reached' "$TEST_DIR/capture.log"
	bg_start capture2 trellara-capture --config "$FLOW_FILE"
	bg_wait load 120
	caught_up 180
	grep -Eq "[1-9][0-9]* skipped as duplicates|skipped transaction [0-9]* \(commit [0-9A-F/]*\): already in the stream" \
		"$TEST_DIR/capture2.log" || {
		bg_stop capture2 TERM
		grep -Eq "[1-9][0-9]* skipped as duplicates" "$TEST_DIR/capture2.log"
	}
	pgbench_compare
	[ "$(psql_target "SELECT count(*) FROM trellara.quarantine")" -eq 0 ]
	converged
}

@test "kind jetstream: a full stream (stream.max_bytes) holds capture back, the slot stands still and nothing is lost; stream retention removes only what applyd applied, and capture goes on: identical, CONVERGED" {
	write_flow_file "$FLOW_FILE" --tables "$TABLES" --set observability.metrics_dir="\"$METRICS_DIR\"" \
		"$(nats_stream_yaml "${JS_STREAM}S" "${JS_SUBJECT}s" "max_bytes: 400000")"
	run -0 trellara stream init --config "$FLOW_FILE"
	run -0 --separate-stderr trellara stream init --config "$FLOW_FILE" --format json
	[ "$(jq .max_bytes <<<"$output")" -eq 400000 ]
	bg_start capture trellara-capture --config "$FLOW_FILE"
	wait_for -t 60 -m "capture streams" slot_active
	# about twice what the stream holds
	bg_start load source_load_count 400
	wait_for -t 60 -m "capture held back by the full stream" \
		"grep -q 'maximum bytes exceeded.*nothing past the last stored transaction is acknowledged' '$TEST_DIR/capture.log'"
	# nothing applied yet: no group position, retention removes nothing
	run -0 --separate-stderr trellara stream retention --config "$FLOW_FILE" --apply --format json
	[ "$(jq .messages <<<"$output")" -eq 0 ]
	[[ $(jq -r .limited_by <<<"$output") == *'"applyd" with no position recorded'* ]]
	local held_lsn
	held_lsn=$(slot_flush_lsn)
	sleep 3
	[ "$(slot_flush_lsn)" = "$held_lsn" ]
	[ "$(metric trellara_capture_broker_available)" = 0 ]
	kill -0 "$(bg_pid capture)"
	# applyd applies what the stream holds; its position is mirrored
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	wait_for -t 60 -m "applyd's position mirrored" \
		"trellara stream inspect --config '$FLOW_FILE' --format json 2>/dev/null | jq -e '.groups[0].position > 0' >/dev/null"
	run -0 --separate-stderr trellara stream inspect --config "$FLOW_FILE" --format json
	local position first
	position=$(jq '.groups[0].position' <<<"$output")
	(($(psql_target "SELECT stream_offset FROM trellara.apply_checkpoint") >= position))
	# retention removes what the group passed, nothing it still needs
	# (applyd goes on applying meanwhile: its position is read again after
	# retention, and can only have grown)
	local keep_from
	run -0 --separate-stderr trellara stream retention --config "$FLOW_FILE" --apply --format json
	(($(jq .messages <<<"$output") > 0))
	keep_from=$(jq .keep_from <<<"$output")
	run -0 --separate-stderr trellara stream inspect --config "$FLOW_FILE" --format json
	first=$(jq '.first_sequence' <<<"$output")
	position=$(jq '.groups[0].position' <<<"$output")
	((keep_from <= position))
	((first <= position + 1))
	wait_for -t 60 -m "capture stores again" "grep -q 'stored again; acknowledging the source resumes' '$TEST_DIR/capture.log'"
	# the stream fills again under the load: retention keeps pace with applyd
	bg_wait load 60
	[ "$BG_STATUS" -eq 0 ]
	local i target
	target=$(source_flushed_lsn)
	for ((i = 0; i < 240; i++)); do
		[ "$(psql_target "SELECT applied_through_lsn >= '$target' FROM trellara.apply_checkpoint")" = t ] && break
		trellara stream retention --config "$FLOW_FILE" --apply >/dev/null 2>&1 || true
		sleep 0.5
	done
	caught_up 10
	# room for verify's fence message: the loop can end with the stream
	# full again (capture then held the fence until verify gave up, 120 s)
	run -0 trellara stream retention --config "$FLOW_FILE" --apply
	pgbench_compare
	converged
	kill -0 "$(bg_pid capture)"
	kill -0 "$(bg_pid applyd)"
}

@test "kind jetstream: the stream deleted and created again: capture stops on it (65) naming snapshot --force; after it, applyd binds the new instance by its start LSN and reads it from its start: identical, CONVERGED" {
	trellara_nats_need_publish
	start_flow
	source_load_count 100
	caught_up 60
	bg_stop capture TERM
	bg_stop applyd TERM
	run -0 "$PUBLISH" "$NATS_URLS" delete "$JS_STREAM"
	run -0 trellara stream init --config "$FLOW_FILE"
	source_load_count 50
	# the slot confirmed past the new, empty stream and past the copies
	run -65 trellara-capture --config "$FLOW_FILE"
	[[ $output == *"the stream that received those changes is gone"* ]]
	[[ $output == *"trellara snapshot --config"*"--force"* ]]
	run -0 trellara-snapshot --config "$FLOW_FILE" --force
	start_flow
	source_load_count 50
	caught_up 60
	grep -q "was replaced (instance jetstream:$JS_STREAM:" "$TEST_DIR/applyd.log"
	[[ $(psql_target "SELECT stream_id FROM trellara.apply_checkpoint") == "jetstream:$JS_STREAM:"* ]]
	pgbench_compare
	converged
}

@test "kind jetstream, stream.compression zlib: a large transaction's chunks are stored compressed, payloads under 512 bytes plain; capture and applyd killed and restarted read them back: identical, CONVERGED" {
	sed -i "s/^  subject: $JS_SUBJECT\$/&\n  compression: zlib/" "$FLOW_FILE"
	run -0 trellara-config get stream.compression --config "$FLOW_FILE"
	[ "$output" = zlib ]
	start_flow
	source_load_count 50
	# one transaction of 100000 rows: several MiB, in chunks that fit the servers' max_payload
	psql_source "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime, filler)
		SELECT 1, 1, g, g, now(), 'x' FROM generate_series(1, 100000) g"
	wait_for -t 120 -m "the large transaction in the stream" \
		'"$PUBLISH" "$NATS_URLS" dump "$JS_STREAM" | jq -s -e "any(.[]; .type == \"commit_marker\")" >/dev/null'
	# capture's restart reads the stream's last messages (compressed ones
	# among them) back; applyd resumes from its checkpoint in the stream
	local name
	for name in capture applyd; do
		bg_stop "$name" KILL
		[ "$BG_STATUS" -eq 137 ]
	done
	start_flow
	source_load_count 50
	caught_up 180
	pgbench_compare
	converged
	local frames
	frames=$("$PUBLISH" "$NATS_URLS" dump "$JS_STREAM")
	# every chunk compressed, and stored in less than a third of its bytes
	jq -s -e '[.[] | select(.type == "chunk" or .type == "pending_chunk")] as $c
		| ($c | length) >= 2 and ($c | all(.compressed))
		and ([$c[].bytes] | add) * 3 < ([$c[].payload_bytes] | add)' <<<"$frames" >/dev/null
	# a payload under 512 bytes is stored as it is; a compressed one is smaller than its payload
	jq -s -e '[.[] | select(.payload_bytes < 512)] | length >= 1 and all(.compressed | not)' <<<"$frames" >/dev/null
	jq -s -e '[.[] | select(.compressed)] | all(.bytes < .payload_bytes)' <<<"$frames" >/dev/null
	[ "$(psql_target "SELECT count(*) FROM trellara.quarantine")" -eq 0 ]
	bg_stop capture TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
}
