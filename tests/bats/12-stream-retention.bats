#!/usr/bin/env bats
# Retention deletes whole segments only below every protected group, and
# never the active segment.

load helpers/nodb

@test "a protected group behind keeps its segments; after it advances they go" {
	frames 200 0 1000 | trellara-stream append --dir "$STREAM_DIR" --min-free-bytes 0 --segment-bytes 65536 > /dev/null
	[ "$(ls "$STREAM_DIR"/segments/*.log | wc -l)" -eq 4 ]
	# no position yet: the group needs everything
	run -0 trellara-stream retention --dir "$STREAM_DIR" --protect applyd --apply --format json
	[ "$(jq '.segments | length' <<<"$output")" = 0 ]
	[[ "$(jq -r .limited_by <<<"$output")" == *applyd*"no position yet"* ]]
	[ "$(ls "$STREAM_DIR"/segments/*.log | wc -l)" -eq 4 ]

	second=$(basename "$(ls "$STREAM_DIR"/segments/*.log | sed -n 2p)" .log)
	last=$(basename "$(ls "$STREAM_DIR"/segments/*.log | tail -1)" .log)
	# applyd at 70 (inside the second segment), another group further on
	[ $((10#$second)) -lt 70 ]
	echo 70 > "$STREAM_DIR/groups/applyd"
	echo 199 > "$STREAM_DIR/groups/audit"
	run -0 trellara-stream retention --dir "$STREAM_DIR" --protect applyd --protect audit
	[[ "$output" == *"would delete 00000000000000000000.log"* ]]
	[[ "$output" != *"$second.log"* ]]
	[ "$(ls "$STREAM_DIR"/segments/*.log | wc -l)" -eq 4 ]
	run -0 trellara-stream retention --dir "$STREAM_DIR" --protect applyd --protect audit --apply
	[ ! -e "$STREAM_DIR/segments/00000000000000000000.log" ]
	[ ! -e "$STREAM_DIR/segments/00000000000000000000.idx" ]
	[ -e "$STREAM_DIR/segments/$second.log" ]
	run -0 trellara-stream read --dir "$STREAM_DIR" --from 70 --count 1 --raw --format json
	[ "$(jq .offset <<<"$output")" = 70 ]
	run -64 trellara-stream read --dir "$STREAM_DIR" --from 10
	[[ "$output" == *"removed by retention"* ]]

	# everybody past the end: all but the active segment go
	echo 200 > "$STREAM_DIR/groups/applyd"
	echo 200 > "$STREAM_DIR/groups/audit"
	run -0 trellara-stream retention --dir "$STREAM_DIR" --apply
	[ "$(ls "$STREAM_DIR"/segments/*.log | wc -l)" -eq 1 ]
	run -0 trellara-stream inspect-local --dir "$STREAM_DIR" --format json
	[ "$(jq '.first_offset' <<<"$output")" = $((10#$last)) ]
	[ "$(jq '.last_valid_offset' <<<"$output")" = 199 ]
	[ "$(jq '[.groups[] | select(.name == "applyd")][0].pending' <<<"$output")" = 0 ]
}

@test "with --dir and no --protect, every existing group is protected" {
	frames 200 0 1000 | trellara-stream append --dir "$STREAM_DIR" --min-free-bytes 0 --segment-bytes 65536 > /dev/null
	echo 200 > "$STREAM_DIR/groups/applyd"
	echo 5 > "$STREAM_DIR/groups/slow"
	run -0 trellara-stream retention --dir "$STREAM_DIR" --apply --format json
	[ "$(jq '.segments | length' <<<"$output")" = 0 ]
	[[ "$(jq -r .limited_by <<<"$output")" == *slow* ]]
}

@test "inspect-local shows each group's position and pending depth" {
	frames 10 | trellara-stream append --dir "$STREAM_DIR" --min-free-bytes 0 > /dev/null
	echo 4 > "$STREAM_DIR/groups/applyd"
	run -0 trellara-stream inspect-local --dir "$STREAM_DIR"
	[[ "$output" == *"group applyd: position 4, pending 6"* ]]
}

@test "with no consumer group registered, retention --apply deletes nothing unless told --no-groups-ok" {
	frames 200 0 1000 | trellara-stream append --dir "$STREAM_DIR" --min-free-bytes 0 --segment-bytes 65536 > /dev/null
	[ "$(ls "$STREAM_DIR"/segments/*.log | wc -l)" -eq 4 ]
	[ -z "$(ls -A "$STREAM_DIR/groups")" ]
	run -0 --separate-stderr trellara-stream retention --dir "$STREAM_DIR" --apply --format json
	[ "$(jq '.segments | length' <<<"$output")" = 0 ]
	[[ "$(jq -r .limited_by <<<"$output")" == *"no consumer group"* ]]
	[ "$(ls "$STREAM_DIR"/segments/*.log | wc -l)" -eq 4 ]
	run -0 payloads "$STREAM_DIR"
	[ "${#lines[@]}" -eq 200 ]
	# the operator says no consumer needs the data: sealed segments go
	run -0 --separate-stderr trellara-stream retention --dir "$STREAM_DIR" --apply --no-groups-ok --format json
	[ "$(jq '.segments | length' <<<"$output")" = 3 ]
	[ "$(ls "$STREAM_DIR"/segments/*.log | wc -l)" -eq 1 ]
	# --no-groups-ok never overrides a group that exists
	echo 0 > "$STREAM_DIR/groups/applyd"
	run -0 --separate-stderr trellara-stream retention --dir "$STREAM_DIR" --apply --no-groups-ok --format json
	[ "$(jq '.segments | length' <<<"$output")" = 0 ]
}

@test "the disk-full hint names a retention command that keeps what consumers still need" {
	frames 200 0 1000 | trellara-stream append --dir "$STREAM_DIR" --min-free-bytes 0 --segment-bytes 65536 > /dev/null
	run -73 --separate-stderr bash -c "echo '{\"type\":\"txn\",\"payload\":\"x\"}' | trellara-stream append --dir '$STREAM_DIR' --min-free-bytes 18000000000000000000 --segment-bytes 65536"
	hint=$(grep 'hint:' <<<"$stderr" | grep -o '"trellara stream retention[^"]*"' | tr -d '"')
	[ -n "$hint" ]
	# no consumer group yet: the hinted command deletes nothing
	run -0 bash -c "$hint"
	[ "$(ls "$STREAM_DIR"/segments/*.log | wc -l)" -eq 4 ]
	# applyd has applied up to 70: only what lies wholly below it goes
	echo 70 > "$STREAM_DIR/groups/applyd"
	run -0 bash -c "$hint"
	[ "$(ls "$STREAM_DIR"/segments/*.log | wc -l)" -eq 3 ]
	run -0 trellara-stream read --dir "$STREAM_DIR" --from 70 --count 1 --raw --format json
	[ "$(jq .offset <<<"$output")" = 70 ]
}

# Found by the simulator (trellara chaos): a tailing reader kept the index
# of its segment in the segment list it read at open; once retention had
# removed the segments before it, it never noticed that its segment was
# sealed by the next one, and waited at its end forever (applyd stopped
# applying until restarted).
@test "a tailing reader follows into the next segment after retention removed the ones before its own" {
	frames 120 0 1000 | trellara-stream append --dir "$STREAM_DIR" --min-free-bytes 0 --segment-bytes 65536 > /dev/null
	[ "$(ls "$STREAM_DIR"/segments/*.log | wc -l)" -ge 2 ]
	last=$(basename "$(ls "$STREAM_DIR"/segments/*.log | tail -1)" .log)
	out=$BATS_TEST_TMPDIR/follow.out
	trellara-stream read --dir "$STREAM_DIR" --from "$((10#$last))" --raw --follow --format json > "$out" 2>&1 3>&- &
	reader=$!
	wait_for -t 10 '[ "$(wc -l < "$out")" -ge $((120 - 10#$last)) ]'
	# the reader sits in the active segment; everything before it goes
	echo 120 > "$STREAM_DIR/groups/applyd"
	run -0 trellara-stream retention --dir "$STREAM_DIR" --protect applyd --apply
	[ ! -e "$STREAM_DIR/segments/00000000000000000000.log" ]
	# enough new frames to seal the reader's segment and start another
	frames 80 120 1000 | trellara-stream append --dir "$STREAM_DIR" --min-free-bytes 0 --segment-bytes 65536 > /dev/null
	[ "$(basename "$(ls "$STREAM_DIR"/segments/*.log | tail -1)" .log)" != "$last" ]
	wait_for -t 10 '[ "$(tail -1 "$out" | jq .offset 2>/dev/null)" = 199 ]' || { kill "$reader"; tail -3 "$out"; false; }
	kill "$reader"
	wait "$reader" || true
	# every frame once, in order
	[ "$(jq -s 'map(.offset) == [range('"$((10#$last))"'; 200)]' "$out")" = true ]
}

# The same, when retention removed the reader's own segment: it had read
# all of it, every group had passed it, and the next one began meanwhile.
@test "a tailing reader at the end of a segment that retention removes goes on into the next one" {
	frames 50 0 1000 | trellara-stream append --dir "$STREAM_DIR" --min-free-bytes 0 --segment-bytes 65536 > /dev/null
	[ "$(ls "$STREAM_DIR"/segments/*.log | wc -l)" -eq 1 ]
	out=$BATS_TEST_TMPDIR/follow.out
	trellara-stream read --dir "$STREAM_DIR" --raw --follow --format json > "$out" 2>&1 3>&- &
	reader=$!
	wait_for -t 10 '[ "$(wc -l < "$out")" -ge 50 ]'
	kill -STOP "$reader"
	frames 80 50 1000 | trellara-stream append --dir "$STREAM_DIR" --min-free-bytes 0 --segment-bytes 65536 > /dev/null
	# the group has passed the first segment (not the reader: it is
	# stopped in it, its descriptor keeps the removed file readable)
	second=$(basename "$(ls "$STREAM_DIR"/segments/*.log | sed -n 2p)" .log)
	echo "$((10#$second))" > "$STREAM_DIR/groups/applyd"
	run -0 trellara-stream retention --dir "$STREAM_DIR" --protect applyd --apply
	[ ! -e "$STREAM_DIR/segments/00000000000000000000.log" ]
	[ -e "$STREAM_DIR/segments/$second.log" ]
	kill -CONT "$reader"
	wait_for -t 10 '[ "$(tail -1 "$out" | jq .offset 2>/dev/null)" = 129 ]' || { kill "$reader"; tail -c 300 "$out"; false; }
	kill "$reader"
	wait "$reader" || true
	[ "$(jq -s 'map(.offset) == [range(0; 130)]' "$out")" = true ]
}

# Found by the simulator: after a crash tore the first frame of a new
# segment, recovery cut it back to nothing; retention then removed the
# last segment holding frames, and a restarting capture found neither its
# last commit nor the position it had acknowledged.
@test "retention keeps the newest frames when the active segment is empty after a torn first frame" {
	frames 62 0 1000 | trellara-stream append --dir "$STREAM_DIR" --min-free-bytes 0 --segment-bytes 65536 > /dev/null
	[ "$(ls "$STREAM_DIR"/segments/*.log | wc -l)" -eq 1 ]
	# the next frame opens segment 62 and dies halfway through writing it
	run -137 env TRELLARA_FAULT=stream.mid_frame_write \
		bash -c 'frames() { printf "{\"type\":\"txn\",\"payload\":\"frame 62 %s\"}\n" "$(printf "%*s" 1000 "" | tr " " x)"; }; frames | trellara-stream append --dir "$1" --min-free-bytes 0 --segment-bytes 65536' _ "$STREAM_DIR"
	[ -e "$STREAM_DIR/segments/00000000000000000062.log" ]
	# recovery cuts the torn frame: the active segment holds nothing
	run -0 trellara-stream inspect-local --dir "$STREAM_DIR" --format json
	[ "$(jq .last_valid_offset <<<"$output")" = 61 ]
	echo 62 > "$STREAM_DIR/groups/applyd"
	run -0 trellara-stream retention --dir "$STREAM_DIR" --protect applyd --apply
	[ -e "$STREAM_DIR/segments/00000000000000000000.log" ]
	run -0 trellara-stream inspect-local --dir "$STREAM_DIR" --format json
	[ "$(jq .last_valid_offset <<<"$output")" = 61 ]
}
