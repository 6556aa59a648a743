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
	run ! grep -qE '^[0-9]+$' <<<"$output"
}

@test "free space below min_free_bytes fails closed with 73 before writing" {
	run -73 bash -c "$(declare -f frames); frames 3 | trellara-stream append --dir '$STREAM_DIR' --min-free-bytes 1000000000000000"
	[[ "$output" == *"min_free_bytes"* ]]
	run ! grep -qE '^[0-9]+$' <<<"$output"
	[ ! -e "$STREAM_DIR/segments/00000000000000000000.log" ]
}

@test "a second writer is refused while the first holds the lock" {
	mkfifo "$TEST_DIR/fifo"
	trellara-stream append --dir "$STREAM_DIR" --min-free-bytes 0 < "$TEST_DIR/fifo" > "$TEST_DIR/first.out" 3>&- &
	first=$!
	exec 4>"$TEST_DIR/fifo"
	echo '{"type":"txn","payload":"one"}' >&4
	wait_for -t 10 '[ -s "$TEST_DIR/first.out" ]'
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
	wait_for -t 10 '[ "$(wc -l < "$TEST_DIR/follow.out")" -ge 3 ]'
	run -0 bash -c "$(declare -f frames); frames 2 3 | trellara-stream append --dir '$STREAM_DIR' --min-free-bytes 0"
	wait_for -t 10 '[ "$(wc -l < "$TEST_DIR/follow.out")" -ge 5 ]'
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

# dir_fsynced_after_mkdir LOG CHILD PARENT: the strace LOG shows CHILD
# created, then PARENT opened as a directory and that descriptor fsynced.
dir_fsynced_after_mkdir() {
	awk -v child="\"$2\"" -v parent="\"$3\"" '
		!made && (index($0, "mkdir(" child ",") || index($0, "mkdirat(AT_FDCWD, " child ",")) && / = 0$/ { made = 1; next }
		made && index($0, "openat(AT_FDCWD, " parent ", ") && /O_DIRECTORY/ { n = split($0, a, "= "); fd = a[n] + 0; next }
		made && fd != "" && index($0, "fsync(" fd ")") && / = 0$/ { found = 1; exit }
		END { exit !found }' "$1"
}

@test "creating a stream fsyncs the parent directory after making segments/ and groups/" {
	run -0 bash -c "echo '{\"type\":\"txn\",\"payload\":\"x\"}' | strace -f -o '$TEST_DIR/trace' -e trace=mkdir,mkdirat,openat,fsync trellara-stream append --dir '$STREAM_DIR' --min-free-bytes 0"
	grep -q "mkdir.*\"$STREAM_DIR/segments\"" "$TEST_DIR/trace"
	dir_fsynced_after_mkdir "$TEST_DIR/trace" "$STREAM_DIR/segments" "$STREAM_DIR"
	dir_fsynced_after_mkdir "$TEST_DIR/trace" "$STREAM_DIR/groups" "$STREAM_DIR"
	# and the stream directory's own entry in its parent
	dir_fsynced_after_mkdir "$TEST_DIR/trace" "$STREAM_DIR" "$TEST_DIR"
}

@test "a symlink planted at the old fixed temporary name is not followed, and the write still succeeds" {
	mkdir -m 0700 "$STREAM_DIR"
	echo precious > "$TEST_DIR/victim"
	ln -s "$TEST_DIR/victim" "$STREAM_DIR/meta.tmp"
	run -0 bash -c "echo '{\"type\":\"txn\",\"payload\":\"x\"}' | trellara-stream append --dir '$STREAM_DIR' --min-free-bytes 0"
	[ "$(cat "$TEST_DIR/victim")" = precious ]
	[ -f "$STREAM_DIR/meta" ] && [ ! -L "$STREAM_DIR/meta" ]
	grep -q '^format_version=1$' "$STREAM_DIR/meta"
	# the planted link is left alone, no temporary file is left behind
	[ -L "$STREAM_DIR/meta.tmp" ]
	# shellcheck disable=SC2010 # names the stream made, none with a newline
	[ "$(ls -A "$STREAM_DIR" | grep -c tmp)" -eq 1 ]
}

@test "a preallocation failure in recovery is reported with its own error, not a stale errno" {
	frames 30 0 200 > "$TEST_DIR/in"
	run -137 bash -c "TRELLARA_FAULT=stream.mid_frame_write:2 trellara-stream append --dir '$STREAM_DIR' --min-free-bytes 0 --batch 10 --segment-bytes 1048576 < '$TEST_DIR/in' > /dev/null"
	run -0 trellara-stream inspect-local --dir "$STREAM_DIR" --format json
	[ "$(jq '.torn_bytes' <<<"$output")" -gt 0 ]
	# a file-size limit below the segment size: re-preallocating after the
	# cut fails with EFBIG, which posix_fallocate returns (errno is not set)
	run -73 bash -c "ulimit -f 512; trap '' XFSZ; echo '{\"type\":\"txn\",\"payload\":\"x\"}' | trellara-stream append --dir '$STREAM_DIR' --min-free-bytes 0 --segment-bytes 1048576"
	[[ "$output" == *"File too large"* ]]
}

# A batch written but never fdatasynced, then a power loss that persisted
# its pages out of order: frame 22's bytes never reached the disk (zeros),
# frames 23..29 did.
power_loss_out_of_order() {
	frames 50 0 200 > "$TEST_DIR/in"
	run -137 bash -c "TRELLARA_FAULT=stream.after_write_before_sync:3 trellara-stream append --dir '$STREAM_DIR' --min-free-bytes 0 --batch 10 < '$TEST_DIR/in' > '$TEST_DIR/acked'"
	[ "$(wc -l < "$TEST_DIR/acked")" -eq 20 ]
	[ "$(tail -1 "$TEST_DIR/acked")" = 19 ]
	seg="$STREAM_DIR/segments/00000000000000000000.log"
	# the unsynced batch reached the disk whole (no power loss yet)
	run -0 trellara-stream inspect-local --dir "$STREAM_DIR" --format json
	[ "$(jq '.last_valid_offset' <<<"$output")" = 29 ]
	pos15=$(trellara-stream locate --dir "$STREAM_DIR" --offset 15 --format json | jq .position)
	pos22=$(trellara-stream locate --dir "$STREAM_DIR" --offset 22 --format json | jq .position)
	pos23=$(trellara-stream locate --dir "$STREAM_DIR" --offset 23 --format json | jq .position)
	end29=$(jq '.bytes' <<<"$output")
	dd if=/dev/zero of="$seg" bs=1 seek="$pos22" count=$((pos23 - pos22)) conv=notrunc status=none
}

@test "power loss: unacknowledged frames on disk out of order are a torn tail, cut and reported" {
	power_loss_out_of_order
	run -0 trellara-stream inspect-local --dir "$STREAM_DIR" --format json
	[ "$(jq '.corrupt' <<<"$output")" = false ]
	[ "$(jq '.last_valid_offset' <<<"$output")" = 21 ]
	torn=$(jq '.torn_bytes' <<<"$output")
	[ "$torn" -eq $((end29 - pos22)) ]
	run -0 payloads "$STREAM_DIR"
	[ "${#lines[@]}" -eq 22 ]
	# the next writer cuts the tail, says how much, and continues at 22
	run -0 --separate-stderr bash -c "echo '{\"type\":\"txn\",\"payload\":\"after\"}' | trellara-stream append --dir '$STREAM_DIR' --min-free-bytes 0"
	[ "$output" = 22 ]
	[[ "$stderr" == *"truncated $torn torn bytes"* ]]
	run -0 trellara-stream inspect-local --dir "$STREAM_DIR" --format json
	[ "$(jq '.torn_bytes' <<<"$output")" = 0 ]
	[ "$(jq '.last_valid_offset' <<<"$output")" = 22 ]
	# every acknowledged frame is intact
	run -0 payloads "$STREAM_DIR"
	for i in $(seq 0 19); do
		[ "$(cut -d' ' -f1-2 <<<"${lines[$i]}")" = "frame $i" ]
	done
	[ "${lines[22]}" = after ]
}

@test "power loss: damage to an acknowledged frame before the tail stays corruption (65)" {
	power_loss_out_of_order
	# and an acknowledged (indexed) frame is damaged too
	printf 'XXXXXXXX' | dd of="$seg" bs=1 seek=$((pos15 + 40)) conv=notrunc status=none
	run -65 trellara-stream inspect-local --dir "$STREAM_DIR"
	[[ "$output" == *"CORRUPT at byte $pos15"* ]]
	run -65 bash -c "echo '{\"type\":\"txn\",\"payload\":\"x\"}' | trellara-stream append --dir '$STREAM_DIR' --min-free-bytes 0"
	[[ "$output" == *"corrupt"* ]]
	run -65 trellara-stream read --dir "$STREAM_DIR" --raw
	[ "$(grep -c '^offset=' <<<"$output")" -eq 15 ]
}
