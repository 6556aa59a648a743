#!/usr/bin/env bats
# Damaged indexes and frames: rebuilt, reported, or refused with 65 -
# never a crash and never a silent skip.

load helpers/nodb

setup_stream() {
	# 4 segments of 64 KiB (frames of ~1 KiB)
	frames 200 0 1000 | trellara-stream append --dir "$STREAM_DIR" --min-free-bytes 0 --segment-bytes 65536 > /dev/null
}

@test "a deleted index is reported missing and read still returns every frame" {
	setup_stream
	rm "$STREAM_DIR/segments/00000000000000000000.idx"
	run -0 trellara-stream inspect-local --dir "$STREAM_DIR" --format json
	[ "$(jq -r '.segments[0].index.state' <<<"$output")" = missing ]
	[[ "$(jq -r '.segments[0].index.detail' <<<"$output")" == *"rebuild"* ]]
	[ "$(jq -r '.segments[1].index.state' <<<"$output")" = ok ]
	run -0 payloads "$STREAM_DIR"
	[ "${#lines[@]}" -eq 200 ]
	[[ "${lines[199]}" == "frame 199 "* ]]
	# inspect-local never modifies: still missing
	[ ! -e "$STREAM_DIR/segments/00000000000000000000.idx" ]
}

@test "a scribbled index is reported corrupt and read still returns every frame" {
	setup_stream
	last=$(ls "$STREAM_DIR"/segments/*.idx | tail -1)
	printf 'scribble-scribble' | dd of="$last" bs=1 seek=40 conv=notrunc status=none
	before=$(md5sum < "$last")
	run -0 trellara-stream inspect-local --dir "$STREAM_DIR" --format json
	[ "$(jq -r '.segments[-1].index.state' <<<"$output")" = corrupt ]
	run -0 payloads "$STREAM_DIR"
	[ "${#lines[@]}" -eq 200 ]
	[ "$(md5sum < "$last")" = "$before" ]
	# a writer rebuilds it
	echo '{"type":"txn","payload":"after"}' | trellara-stream append --dir "$STREAM_DIR" --min-free-bytes 0 --segment-bytes 65536
	run -0 trellara-stream inspect-local --dir "$STREAM_DIR" --format json
	[ "$(jq -r '.segments[-1].index.state' <<<"$output")" = ok ]
	[ "$(jq '.last_valid_offset' <<<"$output")" = 200 ]
}

@test "bytes scribbled over a middle frame: read exits 65 naming file and byte" {
	setup_stream
	loc=$(trellara-stream locate --dir "$STREAM_DIR" --offset 70 --format json)
	seg=$(jq -r .segment <<<"$loc")
	pos=$(jq .position <<<"$loc")
	# offset 70 lives in the second segment, not the last one
	[ "$seg" = "$(ls "$STREAM_DIR"/segments/*.log | sed -n 2p)" ]
	printf 'XXXXXXXX' | dd of="$seg" bs=1 seek=$((pos + 100)) conv=notrunc status=none
	run -65 trellara-stream read --dir "$STREAM_DIR" --raw
	[[ "$output" == *"$(basename "$seg")"* ]]
	[[ "$output" == *"at byte $pos"* ]]
	[[ "$output" == *"bad frame checksum"* ]]
	# frames before the damage were printed, none after it
	[ "$(grep -c '^offset=' <<<"$output")" -eq 70 ]
	run -65 trellara-stream inspect-local --dir "$STREAM_DIR"
	[[ "$output" == *"CORRUPT at byte $pos"* ]]
}

@test "the same damage in the middle of the last segment is corruption too" {
	setup_stream
	seg=$(ls "$STREAM_DIR"/segments/*.log | tail -1)
	pos=$(trellara-stream locate --dir "$STREAM_DIR" --offset 190 --format json | jq .position)
	printf 'XXXXXXXX' | dd of="$seg" bs=1 seek=$((pos + 3)) conv=notrunc status=none
	run -65 trellara-stream read --dir "$STREAM_DIR" --raw --format json
	[[ "$output" == *"$(basename "$seg")"*"at byte $pos"* ]]
	# the writer's recovery scans the last segment and refuses to
	# truncate valid frames (sealed segments are left to the readers)
	run -65 bash -c "echo '{\"type\":\"txn\",\"payload\":\"x\"}' | trellara-stream append --dir '$STREAM_DIR' --min-free-bytes 0 --segment-bytes 65536"
	[[ "$output" == *"corrupt"* ]]
	[[ "$output" == *"will not truncate valid frames"* ]]
}

@test "the same damage in the last frame is a torn tail" {
	setup_stream
	seg=$(ls "$STREAM_DIR"/segments/*.log | tail -1)
	pos=$(trellara-stream locate --dir "$STREAM_DIR" --offset 199 --format json | jq .position)
	printf 'XXXXXXXX' | dd of="$seg" bs=1 seek=$((pos + 100)) conv=notrunc status=none
	run -0 trellara-stream inspect-local --dir "$STREAM_DIR" --format json
	[ "$(jq '.last_valid_offset' <<<"$output")" = 198 ]
	[ "$(jq '.torn_bytes' <<<"$output")" -gt 1000 ]
	[ "$(jq '.corrupt' <<<"$output")" = false ]
	run -0 trellara-stream read --dir "$STREAM_DIR" --raw --format json
	[ "$(grep -c '"offset"' <<<"$output")" -eq 199 ]
	[[ "$output" == *"torn tail"* ]]
}

@test "read --raw prints header fields and base64 payloads of any frame" {
	printf '%s\n' '{"type":"ddl","payload":"CREATE TABLE t ()","flags":3}' | trellara-stream append --dir "$STREAM_DIR" --min-free-bytes 0
	run -0 trellara-stream read --dir "$STREAM_DIR" --raw --format json
	[ "$(jq -r .type <<<"$output")" = ddl ]
	[ "$(jq -r .flags <<<"$output")" = 3 ]
	[ "$(jq -r .version <<<"$output")" = 1 ]
	[ "$(jq -r .position <<<"$output")" = 0 ]
	[[ "$(jq -r .crc <<<"$output")" =~ ^0x[0-9a-f]{8}$ ]]
	[ "$(jq -r .payload_base64 <<<"$output" | base64 -d)" = "CREATE TABLE t ()" ]
	run -0 trellara-stream read --dir "$STREAM_DIR" --raw
	[[ "$output" == "offset=0 type=ddl flags=3 "*"payload_base64=Q1JFQVRFIFRBQkxFIHQgKCk="* ]]
}

@test "reading from an offset, counting, locating, and asking past the end" {
	setup_stream
	run -0 trellara-stream read --dir "$STREAM_DIR" --from 150 --count 3 --raw --format json
	[ "$(jq -s -r 'map(.offset) | join(",")' <<<"$output")" = "150,151,152" ]
	third=$(basename "$(ls "$STREAM_DIR"/segments/*.log | sed -n 3p)" .log)
	base=$((10#$third))
	run -0 trellara-stream locate --dir "$STREAM_DIR" --offset "$base"
	[[ "$output" == "offset $base: "*"$third.log byte 0, txn frame"* ]]
	run -64 trellara-stream read --dir "$STREAM_DIR" --from 500
	[[ "$output" == *"beyond the end"* ]]
	run -64 trellara-stream read --dir "$TEST_DIR/nothing-here"
	[[ "$output" == *"no stream at"* ]]
}
