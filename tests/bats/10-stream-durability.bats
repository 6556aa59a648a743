#!/usr/bin/env bats
# The stream's durability rule with real processes and real kills:
# acknowledged offsets survive, torn tails are reported and truncated.

load helpers/nodb

append() {
	trellara-stream append --dir "$STREAM_DIR" --min-free-bytes 0 "$@"
}

@test "append acknowledges dense offsets from 0 and read returns every frame" {
	run -0 bash -c "$(declare -f frames); frames 25 | trellara-stream append --dir '$STREAM_DIR' --min-free-bytes 0"
	[ "${#lines[@]}" -eq 25 ]
	[ "${lines[0]}" = 0 ]
	[ "${lines[24]}" = 24 ]
	run -0 payloads "$STREAM_DIR"
	[ "${#lines[@]}" -eq 25 ]
	[[ "${lines[7]}" == "frame 7 x"* ]]
	# files are private
	[ "$(stat -c %a "$STREAM_DIR")" = 700 ]
	[ "$(stat -c %a "$STREAM_DIR/segments/00000000000000000000.log")" = 600 ]
	[ "$(stat -c %a "$STREAM_DIR/segments/00000000000000000000.idx")" = 600 ]
}

@test "stream.mid_frame_write: torn bytes reported, next writer truncates and continues, acknowledged offsets readable" {
	frames 50 0 200 > "$TEST_DIR/in1"
	# batches of 10: the third batch dies half-way through its first frame
	run -137 bash -c "TRELLARA_FAULT=stream.mid_frame_write:3 trellara-stream append --dir '$STREAM_DIR' --min-free-bytes 0 --batch 10 < '$TEST_DIR/in1' > '$TEST_DIR/acked1'"
	acked=$(wc -l < "$TEST_DIR/acked1")
	[ "$acked" -eq 20 ]
	[ "$(tail -1 "$TEST_DIR/acked1")" = 19 ]

	run -0 trellara-stream inspect-local --dir "$STREAM_DIR" --format json
	[ "$(jq '.last_valid_offset' <<<"$output")" = 19 ]
	torn=$(jq '.torn_bytes' <<<"$output")
	# half of a 32-byte header + "frame 20 " + 200 x's frame
	[ "$torn" -gt 0 ]
	[ "$torn" -lt 250 ]
	run -0 trellara-stream inspect-local --dir "$STREAM_DIR"
	[[ "$output" == *"torn tail bytes:   $torn"* ]]

	# readers see exactly the acknowledged frames
	run -0 payloads "$STREAM_DIR"
	[ "${#lines[@]}" -eq 20 ]

	# the next writer truncates the torn tail and continues at 20
	frames 5 100 > "$TEST_DIR/in2"
	run -0 bash -c "trellara-stream append --dir '$STREAM_DIR' --min-free-bytes 0 < '$TEST_DIR/in2' 2>'$TEST_DIR/err'"
	[ "${lines[0]}" = 20 ]
	[ "${lines[4]}" = 24 ]
	grep -q "truncated $torn torn bytes" "$TEST_DIR/err"
	run -0 trellara-stream inspect-local --dir "$STREAM_DIR" --format json
	[ "$(jq '.torn_bytes' <<<"$output")" = 0 ]
	[ "$(jq '.last_valid_offset' <<<"$output")" = 24 ]

	# every acknowledged offset still holds what was appended there
	run -0 trellara-stream read --dir "$STREAM_DIR" --raw --format json
	[ "${#lines[@]}" -eq 25 ]
	for i in $(seq 0 19); do
		[ "$(jq -r "select(.offset == $i) | .payload_base64 | @base64d" <<<"$output" | cut -d' ' -f1-2)" = "frame $i" ]
	done
	[ "$(jq -r 'select(.offset == 20) | .payload_base64 | @base64d' <<<"$output" | cut -d' ' -f1-2)" = "frame 100" ]
}

@test "kill -9 after sync, before the index write: frames kept, index rebuilt, nothing lost" {
	frames 30 > "$TEST_DIR/in"
	run -137 bash -c "TRELLARA_FAULT=stream.after_sync_before_index:2 trellara-stream append --dir '$STREAM_DIR' --min-free-bytes 0 --batch 10 < '$TEST_DIR/in' > '$TEST_DIR/acked'"
	[ "$(wc -l < "$TEST_DIR/acked")" -eq 10 ]
	run -0 trellara-stream inspect-local --dir "$STREAM_DIR" --format json
	# the second batch is durable but not indexed: a stale index
	[ "$(jq -r '.segments[0].index.state' <<<"$output")" = stale ]
	[ "$(jq '.last_valid_offset' <<<"$output")" = 19 ]
	# with no writer alive the reader serves the durable frames
	run -0 payloads "$STREAM_DIR"
	[ "${#lines[@]}" -eq 20 ]
	run -0 --separate-stderr bash -c "echo '{\"type\":\"watermark\",\"payload\":\"w\"}' | trellara-stream append --dir '$STREAM_DIR' --min-free-bytes 0"
	[ "$output" = 20 ]
	[[ "$stderr" == *"rebuilt from frames"* ]]
	run -0 trellara-stream inspect-local --dir "$STREAM_DIR" --format json
	[ "$(jq -r '.segments[0].index.state' <<<"$output")" = ok ]
}

@test "an fdatasync failure acknowledges nothing and exits 73" {
	frames 5 > "$TEST_DIR/in"
	run -73 bash -c "TRELLARA_TEST_FSYNC_FAIL=1 trellara-stream append --dir '$STREAM_DIR' --min-free-bytes 0 < '$TEST_DIR/in'"
	[[ "$output" == *"cannot fdatasync"* ]]
	[[ "$output" == *"not acknowledged"* ]]
	# no offset line was printed
	! grep -qE '^[0-9]+$' <<<"$output"
}

@test "free space below min_free_bytes fails closed with 73 before writing" {
	run -73 bash -c "$(declare -f frames); frames 3 | trellara-stream append --dir '$STREAM_DIR' --min-free-bytes 1000000000000000"
	[[ "$output" == *"min_free_bytes"* ]]
	! grep -qE '^[0-9]+$' <<<"$output"
	[ ! -e "$STREAM_DIR/segments/00000000000000000000.log" ]
}

@test "a second writer is refused while the first holds the lock" {
	mkfifo "$TEST_DIR/fifo"
	trellara-stream append --dir "$STREAM_DIR" --min-free-bytes 0 < "$TEST_DIR/fifo" > "$TEST_DIR/first.out" 3>&- &
	first=$!
	exec 4>"$TEST_DIR/fifo"
	echo '{"type":"txn","payload":"one"}' >&4
	for _ in $(seq 100); do [ -s "$TEST_DIR/first.out" ] && break; sleep 0.05; done
	[ "$(cat "$TEST_DIR/first.out")" = 0 ]
	run -75 bash -c "echo '{\"type\":\"txn\",\"payload\":\"two\"}' | trellara-stream append --dir '$STREAM_DIR' --min-free-bytes 0"
	[[ "$output" == *"locked by another writer"* ]]
	exec 4>&-
	wait "$first"
}

@test "read --follow returns frames appended later (tailing)" {
	run -0 bash -c "$(declare -f frames); frames 3 | trellara-stream append --dir '$STREAM_DIR' --min-free-bytes 0"
	trellara-stream read --dir "$STREAM_DIR" --follow --raw --format json > "$TEST_DIR/follow.out" 3>&- &
	reader=$!
	for _ in $(seq 100); do [ "$(wc -l < "$TEST_DIR/follow.out")" -ge 3 ] && break; sleep 0.05; done
	run -0 bash -c "$(declare -f frames); frames 2 3 | trellara-stream append --dir '$STREAM_DIR' --min-free-bytes 0"
	for _ in $(seq 100); do [ "$(wc -l < "$TEST_DIR/follow.out")" -ge 5 ] && break; sleep 0.05; done
	kill -TERM "$reader"
	wait "$reader"
	[ "$(jq -s 'map(.offset) | join(",")' -r < "$TEST_DIR/follow.out")" = "0,1,2,3,4" ]
}

@test "append rejects malformed input lines with 65 and keeps the lines before" {
	printf '%s\n' '{"type":"txn","payload":"ok"}' '{"type":"bogus","payload":"x"}' > "$TEST_DIR/in"
	run -65 bash -c "trellara-stream append --dir '$STREAM_DIR' --min-free-bytes 0 < '$TEST_DIR/in'"
	[[ "$output" == *"stdin line 2"* ]]
	[[ "$output" == *"type"* ]]
	run -0 payloads "$STREAM_DIR"
	[ "$output" = ok ]
	printf '%s\n' '{"type":"chunk","payload_base64":"AAEC/w=="}' | trellara-stream append --dir "$STREAM_DIR" --min-free-bytes 0
	run -0 trellara-stream read --dir "$STREAM_DIR" --from 1 --raw --format json
	[ "$(jq -r .payload_base64 <<<"$output")" = "AAEC/w==" ]
	[ "$(jq -r .type <<<"$output")" = chunk ]
	run -65 bash -c "echo '{\"type\":\"txn\",\"payload_base64\":\"!!\"}' | trellara-stream append --dir '$STREAM_DIR' --min-free-bytes 0"
}
