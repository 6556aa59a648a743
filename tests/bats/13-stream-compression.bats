#!/usr/bin/env bats
# stream.compression: zlib against real PostgreSQL: a flow from snapshot to
# verify with large transactions stored compressed, a stream holding both
# kinds of frames when the key changes between capture runs, and a
# compressed frame whose deflate data is damaged (its CRC fixed up)
# refused with 65, naming it (trellara-stream(5), COMPRESSED FRAMES).

load helpers/common

setup() {
	trellara_setup
	psql_source "CREATE TABLE accounts (id int PRIMARY KEY, owner text, balance numeric, note text)" \
		"CREATE TABLE events (id bigint PRIMARY KEY, account_id int, kind text, body text)" \
		"INSERT INTO accounts SELECT g, 'owner ' || g, g * 1.5, 'opened' FROM generate_series(1, 2000) g" \
		"CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE accounts, events"
	write_flow_file "$FLOW_FILE" --tables "public.accounts,public.events" --set stream.min_free_bytes=1048576 \
		--set stream.compression=zlib
	export TRELLARA_STATUS_INTERVAL_MS=200
}

# set_compression none|zlib: the flow file's key, for the next capture run
set_compression() {
	sed -i "s/^  compression: .*/  compression: $1/" "$FLOW_FILE"
	[ "$(trellara-config get stream.compression --config "$FLOW_FILE")" = "$1" ]
}

# big_transaction FIRST N: one transaction of N event rows with repetitive
# bodies (a large, compressible envelope), and updates of accounts
big_transaction() {
	psql_source "BEGIN;
		INSERT INTO events SELECT g, g % 2000 + 1, 'order_placed',
		  'customer order ' || g || ': status pending, warehouse north, carrier standard' FROM generate_series($1, $1 + $2 - 1) g;
		UPDATE accounts SET balance = balance + 1, note = 'order ' || $1 WHERE id % 5 = 0;
		COMMIT"
}

# frames_json: every frame of the stream as JSON, one per line
frames_json() {
	trellara-stream read --config "$FLOW_FILE" --format json
}

converged() {
	caught_up
	assert_tables_equal accounts events
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ "$output" == *"result: CONVERGED"* ]]
}

# tamper_frame SEGMENT POSITION: change two bytes of the compressed payload
# of the frame at POSITION (one in the deflate data, one in its Adler-32)
# and write the CRC-32C that matches the changed bytes
tamper_frame() {
	python3 - "$1" "$2" <<-'EOF'
	import struct, sys
	def crc32c(data, crc=0):
	    crc ^= 0xffffffff
	    for b in data:
	        crc ^= b
	        for _ in range(8):
	            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
	    return crc ^ 0xffffffff
	path, pos = sys.argv[1], int(sys.argv[2])
	with open(path, 'r+b') as f:
	    f.seek(pos)
	    header = bytearray(f.read(32))
	    assert header[:4] == b'TRLF' and header[6] & 0x80, 'not a compressed frame'
	    length = struct.unpack('>I', header[24:28])[0]
	    payload = bytearray(f.read(length))
	    payload[4 + (length - 4) // 2] ^= 0x5a
	    payload[-1] ^= 0xff
	    header[28:32] = struct.pack('>I', crc32c(payload, crc32c(header[:28])))
	    f.seek(pos)
	    f.write(header + payload)
	EOF
}

@test "stream.compression zlib: snapshot, capture, applyd; large transactions stored compressed, small ones not; identical, verify CONVERGED" {
	run -0 trellara-snapshot --config "$FLOW_FILE" --create-tables
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	big_transaction 1 5000
	psql_source "INSERT INTO events VALUES (100000, 1, 'small', 'x')" \
		"DELETE FROM events WHERE id % 7 = 0" \
		"UPDATE accounts SET owner = 'renamed' WHERE id = 3"
	big_transaction 200000 3000
	converged
	# stopped first, so that no watermark lands between the two reads below
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
	[ "$BG_STATUS" -eq 0 ]
	frames_json >"$TEST_DIR/frames.jsonl"
	# the two large transactions are stored compressed, to well under a
	# quarter of their bytes; the single-row ones are not compressed
	# (a large transaction is a txn frame or, streamed by the server, chunks)
	jq -e -s '[.[] | select(IN(.type; "txn", "chunk", "pending_chunk") and .compression == "zlib") | .xid] | unique | length >= 2' "$TEST_DIR/frames.jsonl"
	jq -e -s 'all(.[] | select(.compression == "zlib"); .stored_length * 4 < .payload_length)' "$TEST_DIR/frames.jsonl"
	jq -e -s '[.[] | select(.type == "txn" and (.changes | length) == 1)] | length >= 2 and all(.compression == "none" and .stored_length == .payload_length)' "$TEST_DIR/frames.jsonl"
	# the large transactions' changes decode from the inflated payload
	[ "$(jq -s '[.[] | select(.compression == "zlib") | .changes | length] | add' "$TEST_DIR/frames.jsonl")" -ge 8000 ]
	# on disk: the stream's bytes are the stored ones, less than half of
	# what the same frames take uncompressed
	run -0 trellara-stream inspect-local --dir "$STREAM_DIR" --format json
	disk=$(jq '.bytes' <<<"$output")
	[ "$disk" -eq "$(jq -s 'map(32 + .stored_length) | add' "$TEST_DIR/frames.jsonl")" ]
	[ $((disk * 2)) -lt "$(jq -s 'map(32 + .payload_length) | add' "$TEST_DIR/frames.jsonl")" ]
}

@test "stream.compression switched between capture runs: a stream of compressed and plain frames reads whole and applies identically" {
	run -0 trellara-snapshot --config "$FLOW_FILE" --create-tables
	set_compression none
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	big_transaction 1 3000
	caught_up
	bg_stop capture TERM
	[ "$BG_STATUS" -eq 0 ]
	set_compression zlib
	bg_start capture trellara-capture --config "$FLOW_FILE"
	big_transaction 10000 3000
	caught_up
	bg_stop capture TERM
	[ "$BG_STATUS" -eq 0 ]
	set_compression none
	bg_start capture trellara-capture --config "$FLOW_FILE"
	big_transaction 20000 3000
	converged
	# the large transactions in the order they ran: plain, compressed, plain
	run -0 jq -r -s '[.[] | select(IN(.type; "txn", "chunk", "pending_chunk"))] | group_by(.xid) | map(select((map(.changes | length) | add) > 1000))
		| sort_by(.[0].offset) | map(map(.compression) | unique | join("+")) | join(",")' < <(frames_json)
	[ "$output" = none,zlib,none ]
	# stopped before the stream is counted twice: a running capture may
	# append a watermark frame between the two reads
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
	[ "$BG_STATUS" -eq 0 ]
	# a reader that starts over reads every frame of both kinds
	n=$(trellara-stream inspect-local --dir "$STREAM_DIR" --format json | jq '.last_valid_offset + 1')
	[ "$(frames_json | wc -l)" -eq "$n" ]
	[ "$(trellara-stream read --config "$FLOW_FILE" | grep -c ' compression=zlib stored_length=')" -ge 1 ]
}

@test "a compressed frame whose deflate data is damaged and CRC fixed up: read and applyd exit 65 naming it, nothing of it applied" {
	run -0 trellara-snapshot --config "$FLOW_FILE" --create-tables
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	big_transaction 1 2000
	caught_up
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	big_transaction 50000 4000
	# capture has made it durable: the stream's last large frame
	wait_for -t 60 "frames_json | jq -e -s '[.[] | select(.compression == \"zlib\")] | length >= 2' >/dev/null"
	bg_stop capture TERM
	[ "$BG_STATUS" -eq 0 ]
	offset=$(frames_json | jq -s '[.[] | select(.compression == "zlib")] | last | .offset')
	loc=$(trellara-stream locate --config "$FLOW_FILE" --offset "$offset" --format json)
	seg=$(jq -r .segment <<<"$loc")
	pos=$(jq .position <<<"$loc")
	tamper_frame "$seg" "$pos"
	# the header still checks out: the damage is found by inflating
	run -65 trellara-stream read --config "$FLOW_FILE" --format json
	[[ "$output" == *"stream segment \"$seg\": frame at byte $pos (offset $offset): compressed payload"* ]]
	[ "$(grep -c '^{' <<<"$output")" -eq "$offset" ]
	run -65 trellara-stream locate --config "$FLOW_FILE" --offset "$offset"
	[[ "$output" == *"(offset $offset): compressed payload"* ]]
	run -65 timeout 60 trellara-applyd --config "$FLOW_FILE"
	[[ "$output" == *"frame at byte $pos (offset $offset): compressed payload"* ]]
	[ "$(psql_target "SELECT count(*) FROM events WHERE id >= 50000")" -eq 0 ]
	[ "$(psql_target "SELECT count(*) FROM events")" -eq 2000 ]
}

@test "stream append: flags with bit 15 refused (65); with --config and zlib, large payloads stored compressed and read back byte for byte" {
	run -65 --separate-stderr trellara-stream append --config "$FLOW_FILE" <<<'{"type":"txn","payload":"x","flags":32768}'
	[[ $stderr == *'"flags" must be a number 0..32767 (bit 15 is the stream'"'"'s compression flag)'* ]]
	[ -z "$output" ]
	big=$(printf 'row %d of a repetitive payload; ' $(seq 1 400))
	small=$(printf 'row %d; ' $(seq 1 20))
	printf '{"type":"txn","payload":"%s","flags":7}\n{"type":"txn","payload":"%s"}\n' "$big" "$small" |
		trellara-stream append --config "$FLOW_FILE" >"$TEST_DIR/offsets"
	[ "$(paste -sd, "$TEST_DIR/offsets")" = 0,1 ]
	run -0 trellara-stream read --config "$FLOW_FILE" --raw --format json
	[ "$(jq -s -c 'map([.compression, .flags])' <<<"$output")" = '[["zlib",7],["none",0]]' ]
	[ "$(jq -s -r '.[0].payload_base64 | @base64d' <<<"$output")" = "$big" ]
	[ "$(jq -s -r '.[1].payload_base64 | @base64d' <<<"$output")" = "$small" ]
	[ "$(jq -s '.[0].payload_length' <<<"$output")" -eq "${#big}" ]
	[ "$(jq -s '.[0].stored_length * 4 < .[0].payload_length' <<<"$output")" = true ]
}
