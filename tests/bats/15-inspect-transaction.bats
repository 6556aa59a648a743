#!/usr/bin/env bats
# trellara inspect-transaction: one source transaction as the stream holds
# it - a normal one, a chunked one (contiguous chunks, and pending chunks
# written once), one cut into a frame file, and one whose payload was
# altered in the segment (checksum mismatch, exit 65) - and whether applyd
# applied it, before and after applyd runs.

bats_require_minimum_version 1.5.0

load helpers/common

setup() {
	trellara_setup
	for side in source target; do
		psql_$side "CREATE TABLE t (id int PRIMARY KEY, v text)" "CREATE TABLE u (id int PRIMARY KEY)" \
			"CREATE TABLE big (id int PRIMARY KEY, v int)"
	done
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE t, u, big"
	psql_source "INSERT INTO t SELECT g, 'before ' || g FROM generate_series(1, 10) g"
	psql_target "INSERT INTO t SELECT g, 'before ' || g FROM generate_series(1, 10) g"
	write_flow_file "$FLOW_FILE" --tables "public.t,public.u,public.big" --set stream.min_free_bytes=1048576 \
		--set stream.max_batch_messages=1
	export TRELLARA_STATUS_INTERVAL_MS=200
}

start_capture() {
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
}

frames() {
	trellara-stream read --config "$FLOW_FILE" --format json
}

# in_stream XID: a frame of the transaction with that xid is in the stream
# and every frame of it up to its commit (a txn frame or a commit marker)
in_stream() {
	frames | jq -se --argjson x "$1" 'any(.[]; .xid == $x and (.type == "txn" or .type == "commit_marker"))'
}

# the commit LSN and offsets of transaction XID's frames of TYPE
commit_lsn_of() {
	frames | jq -sr --argjson x "$1" '[.[] | select(.xid == $x and .type != "pending_chunk")][0].commit_lsn'
}
offsets_of() {
	frames | jq -sc --argjson x "$1" --arg t "$2" '[.[] | select(.xid == $x and .type == $t) | .offset]'
}

# one transaction on the source: 3 inserts, 2 updates and 1 delete of t,
# 2 inserts into u; prints its xid
mixed_transaction() {
	psql_source <<'SQL'
BEGIN;
INSERT INTO t VALUES (11, 'eleven'), (12, 'twelve'), (13, 'thirteen');
UPDATE t SET v = 'changed' WHERE id IN (1, 2);
DELETE FROM t WHERE id = 3;
INSERT INTO u VALUES (1), (2);
SELECT txid_current();
COMMIT;
SQL
}

@test "a normal transaction: its txn frame, tables and counts, checksums match; not applied before applyd, applied after" {
	start_capture
	xid=$(mixed_transaction)
	[[ $xid =~ ^[0-9]+$ ]]
	wait_for "in_stream $xid"
	lsn=$(commit_lsn_of "$xid")
	run -0 --separate-stderr trellara-inspect-transaction --config "$FLOW_FILE" --commit-lsn "$lsn" --format json
	json=$output
	[ "$(jq .xid <<<"$json")" -eq "$xid" ]
	[ "$(jq -r .commit_lsn <<<"$json")" = "$lsn" ]
	[ "$(jq -r .form <<<"$json")" = txn ]
	[ "$(jq -c '[.frames[] | [.offset, .type, .checksum]]' <<<"$json")" = "[[$(offsets_of "$xid" txn | jq '.[0]'),\"txn\",\"match\"]]" ]
	[ "$(jq -r .checksums <<<"$json")" = match ]
	[ "$(jq -c '[.tables[] | [.table, .inserts, .updates, .deletes]] | sort' <<<"$json")" = '[["public.t",3,2,1],["public.u",2,0,0]]' ]
	[ "$(jq .changes <<<"$json")" -eq 8 ]
	[ "$(jq -c .manifest <<<"$json")" = null ]
	[ "$(jq -r .binding <<<"$json")" = n/a ]
	# applyd never ran: no checkpoint on the target yet
	[ "$(jq -r .applied <<<"$json")" = not_applied ]
	# the same transaction by the offset of its frame, as text
	offset=$(offsets_of "$xid" txn | jq '.[0]')
	run -0 trellara-inspect-transaction --config "$FLOW_FILE" --offset "$offset"
	[[ $output == *"xid $xid, commit LSN $lsn"* ]]
	[[ $output == *"offset $offset: txn, length "*", checksum match"* ]]
	[[ $output == *"public.t: 3 inserts, 2 updates, 1 deletes"* ]]
	[[ $output == *"applied:      not_applied"* ]]

	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	caught_up
	assert_tables_equal t u
	# verify's fence travels in the stream: applyd still runs
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ $output == *"result: CONVERGED"* ]]
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	run -0 --separate-stderr trellara-inspect-transaction --config "$FLOW_FILE" --commit-lsn "$lsn" --format json
	[ "$(jq -r .applied <<<"$output")" = applied ]

	# a later transaction is not applied while applyd is stopped
	xid2=$(psql_source <<'SQL'
BEGIN;
INSERT INTO u VALUES (4);
SELECT txid_current();
COMMIT;
SQL
)
	wait_for "in_stream $xid2"
	run -0 --separate-stderr trellara-inspect-transaction --config "$FLOW_FILE" --commit-lsn "$(commit_lsn_of "$xid2")" --format json
	[ "$(jq -r .applied <<<"$output")" = not_applied ]
	[[ "$(jq -r .applied_detail <<<"$output")" == *"is below it"* ]]

	# the target unreachable: unknown, and the inspection still passes
	write_flow_file "$TEST_DIR/down.yml" --tables "public.t,public.u,public.big" \
		--set target.database_url="postgresql:///nowhere?host=$TEST_DIR&port=1"
	run -0 --separate-stderr trellara-inspect-transaction --config "$TEST_DIR/down.yml" --commit-lsn "$lsn" --format json
	[ "$(jq -r .applied <<<"$output")" = unknown ]
	[[ "$(jq -r .applied_detail <<<"$output")" == "target unreachable"* ]]
	bg_stop capture TERM
}

@test "no transaction at that LSN or offset: exit 1; usage errors: exit 64; a JetStream flow: exit 78" {
	start_capture
	xid=$(mixed_transaction)
	wait_for "in_stream $xid"
	run -1 trellara-inspect-transaction --config "$FLOW_FILE" --commit-lsn 0/10
	[[ $output == *"no transaction with commit LSN 0/10"* ]]
	# a watermark belongs to no transaction
	# (a transaction of no published table moves the source: a watermark)
	psql_source "CREATE TABLE other (id int)" "INSERT INTO other VALUES (1)"
	wait_for -t 30 "frames | jq -se 'any(.[]; .type == \"watermark\")'"
	wm=$(frames | jq -s '[.[] | select(.type == "watermark")][0].offset')
	run -1 trellara-inspect-transaction --config "$FLOW_FILE" --offset "$wm"
	[[ $output == *"offset $wm holds a watermark frame, which is no transaction's"* ]]
	run -1 trellara-inspect-transaction --config "$FLOW_FILE" --offset 100000
	[[ $output == *"no frame at offset 100000"* ]]
	run -64 trellara-inspect-transaction --config "$FLOW_FILE"
	[[ $output == *"--commit-lsn LSN or --offset N"* ]]
	run -64 trellara-inspect-transaction --config "$FLOW_FILE" --commit-lsn 0/1 --offset 1
	run -64 trellara-inspect-transaction --config "$FLOW_FILE" --commit-lsn nonsense
	[[ $output == *'invalid value "nonsense" for option --commit-lsn'* ]]
	run -64 trellara-inspect-transaction --offset 1
	# a JetStream flow (no server needed: refused before any connection)
	write_flow_file "$TEST_DIR/js.yml" --tables "public.t" \
		"$(printf 'stream:\n  kind: jetstream\n  servers: [nats://127.0.0.1:1]\n  name: s\n  subject: s.frames\n')"
	run -0 --separate-stderr trellara-config get stream.kind --config "$TEST_DIR/js.yml"
	[ "$output" = jetstream ]
	run -78 trellara-inspect-transaction --config "$TEST_DIR/js.yml" --offset 0
	[[ $output == *'stream.kind is "jetstream": trellara inspect-transaction reads a local stream'* ]]
	bg_stop capture TERM
}

@test "a chunked transaction (strict_chunking): its chunks, the manifest, the commit marker bound to it; a frame file of it, and one missing a chunk" {
	write_flow_file "$FLOW_FILE" --tables "public.t,public.u,public.big" --set stream.min_free_bytes=1048576 \
		--set source.pgoutput='{streaming: false}' --set dataset.strict_chunking='{max_changes_per_chunk: 1000}' \
		--set stream.max_batch_messages=1
	start_capture
	xid=$(psql_source <<'SQL'
BEGIN;
INSERT INTO big SELECT g, g FROM generate_series(1, 3500) g;
SELECT txid_current();
COMMIT;
SQL
)
	wait_for -t 60 "in_stream $xid"
	chunks=$(offsets_of "$xid" chunk)
	[ "$(jq length <<<"$chunks")" -eq 4 ] # 3500 changes, 1000 a chunk
	manifest=$(offsets_of "$xid" manifest | jq '.[0]')
	marker=$(offsets_of "$xid" commit_marker | jq '.[0]')
	run -0 --separate-stderr trellara-inspect-transaction --config "$FLOW_FILE" --offset "$(jq '.[1]' <<<"$chunks")" --format json
	json=$output
	[ "$(jq .xid <<<"$json")" -eq "$xid" ]
	[ "$(jq -r .form <<<"$json")" = chunks ]
	[ "$(jq -c '[.frames[].type]' <<<"$json")" = '["chunk","chunk","chunk","chunk","manifest","commit_marker"]' ]
	[ "$(jq -c '[.frames[] | select(.type == "chunk") | .offset]' <<<"$json")" = "$chunks" ]
	[ "$(jq -r .checksums <<<"$json")" = match ]
	[ "$(jq -c '.tables' <<<"$json")" = '[{"table":"public.big","inserts":3500,"updates":0,"deletes":0,"truncates":0}]' ]
	[ "$(jq .manifest.offset <<<"$json")" -eq "$manifest" ]
	[ "$(jq .manifest.version <<<"$json")" -eq 1 ]
	[ "$(jq .manifest.chunk_count <<<"$json")" -eq 4 ]
	[ "$(jq .manifest.total_changes <<<"$json")" -eq 3500 ]
	[ "$(jq -c '[.manifest.chunks[].changes]' <<<"$json")" = '[1000,1000,1000,500]' ]
	[ "$(jq -c '[.manifest.chunks[].offset]' <<<"$json")" = "$chunks" ]
	[ "$(jq .commit_marker.offset <<<"$json")" -eq "$marker" ]
	[ "$(jq -r .commit_marker.manifest_crc <<<"$json")" = "$(jq -r .manifest.crc <<<"$json")" ]
	[ "$(jq -r .binding <<<"$json")" = ok ]
	[ "$(jq -r .applied <<<"$json")" = not_applied ]

	# the frames from the first chunk to the marker, cut out of the segment
	first=$(trellara-stream locate --config "$FLOW_FILE" --offset "$(jq '.[0]' <<<"$chunks")" --format json)
	last=$(trellara-stream locate --config "$FLOW_FILE" --offset "$marker" --format json)
	seg=$(jq -r .segment <<<"$first")
	[ "$(jq -r .segment <<<"$last")" = "$seg" ]
	from=$(jq .position <<<"$first")
	to=$(($(jq .position <<<"$last") + 32 + $(jq .stored_length <<<"$last")))
	dd if="$seg" of="$TEST_DIR/set.bin" bs=1 skip="$from" count=$((to - from)) status=none
	run -0 --separate-stderr trellara-inspect-transaction --file "$TEST_DIR/set.bin" --format json
	[ "$(jq .xid <<<"$output")" -eq "$xid" ]
	[ "$(jq -r .binding <<<"$output")" = ok ]
	[ "$(jq -r .applied <<<"$output")" = unknown ]
	[ "$(jq .manifest.total_changes <<<"$output")" -eq 3500 ]
	# the same without its second chunk: the manifest no longer binds
	c1=$(trellara-stream locate --config "$FLOW_FILE" --offset "$(jq '.[1]' <<<"$chunks")" --format json)
	c2=$(trellara-stream locate --config "$FLOW_FILE" --offset "$(jq '.[2]' <<<"$chunks")" --format json)
	{
		dd if="$seg" bs=1 skip="$from" count=$(($(jq .position <<<"$c1") - from)) status=none
		dd if="$seg" bs=1 skip="$(jq .position <<<"$c2")" count=$((to - $(jq .position <<<"$c2"))) status=none
	} >"$TEST_DIR/cut.bin"
	run -65 --separate-stderr trellara-inspect-transaction --file "$TEST_DIR/cut.bin" --format json
	[ "$(jq -r .binding <<<"$output")" = broken ]
	[ "$(jq -r .checksums <<<"$output")" = match ]
	[[ $stderr == *"broken binding"* ]]
	[[ "$(jq -r .binding_detail <<<"$output")" == *"chunk"* ]]

	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	caught_up 60
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	assert_tables_equal big
	run -0 --separate-stderr trellara-inspect-transaction --config "$FLOW_FILE" --offset "$marker" --format json
	[ "$(jq -r .applied <<<"$output")" = applied ]
	# the target's checkpoint, asked for the frame file's transaction
	run -0 --separate-stderr trellara-inspect-transaction --file "$TEST_DIR/set.bin" --config "$FLOW_FILE" --format json
	[ "$(jq -r .applied <<<"$output")" = applied ]
	bg_stop capture TERM
}

@test "a large streamed transaction written once: pending chunks listed by offset, bound by the version 2 manifest and its marker" {
	# the harness's logical_decoding_work_mem (64kB) makes the server stream
	# it; 1000 changes per pending chunk
	write_flow_file "$FLOW_FILE" --tables "public.t,public.u,public.big" --set stream.min_free_bytes=1048576 \
		--set source.stream_spill_threshold_changes=1000 --set stream.max_batch_messages=1
	start_capture
	xid=$(psql_source <<'SQL'
BEGIN;
INSERT INTO big SELECT g, g FROM generate_series(1, 5000) g;
SELECT txid_current();
COMMIT;
SQL
)
	wait_for -t 60 "in_stream $xid"
	pending=$(offsets_of "$xid" pending_chunk)
	[ "$(jq length <<<"$pending")" -ge 2 ]
	run -0 --separate-stderr trellara-inspect-transaction --config "$FLOW_FILE" --offset "$(jq '.[0]' <<<"$pending")" --format json
	json=$output
	[ "$(jq .xid <<<"$json")" -eq "$xid" ]
	[ "$(jq -r .commit_lsn <<<"$json")" = "$(commit_lsn_of "$xid")" ]
	[ "$(jq -r .form <<<"$json")" = pending_chunks ]
	[ "$(jq .manifest.version <<<"$json")" -eq 2 ]
	[ "$(jq -r .manifest.chunk_form <<<"$json")" = pending_chunk ]
	[ "$(jq -c '[.manifest.chunks[].offset]' <<<"$json")" = "$pending" ]
	[ "$(jq -c '[.frames[] | select(.type == "pending_chunk") | .offset]' <<<"$json")" = "$pending" ]
	[ "$(jq .manifest.total_changes <<<"$json")" -eq 5000 ]
	[ "$(jq -c '[.tables[] | [.table, .inserts]]' <<<"$json")" = '[["public.big",5000]]' ]
	[ "$(jq -r .binding <<<"$json")" = ok ]
	[ "$(jq -r .checksums <<<"$json")" = match ]
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	caught_up 60
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	assert_tables_equal big
	run -0 --separate-stderr trellara-inspect-transaction --config "$FLOW_FILE" --commit-lsn "$(commit_lsn_of "$xid")" --format json
	[ "$(jq -r .applied <<<"$output")" = applied ]
	[ "$(jq -r .binding <<<"$output")" = ok ]
	bg_stop capture TERM
}

@test "a payload byte altered in the segment (its CRC left): checksum mismatch named, exit 65; the transactions around it still check" {
	start_capture
	xid=$(mixed_transaction)
	xid2=$(psql_source <<'SQL'
BEGIN;
INSERT INTO u VALUES (100);
SELECT txid_current();
COMMIT;
SQL
)
	wait_for "in_stream $xid2"
	bg_stop capture TERM
	lsn2=$(commit_lsn_of "$xid2")
	offset=$(offsets_of "$xid" txn | jq '.[0]')
	loc=$(trellara-stream locate --config "$FLOW_FILE" --offset "$offset" --format json)
	seg=$(jq -r .segment <<<"$loc")
	pos=$(jq .position <<<"$loc")
	len=$(jq .stored_length <<<"$loc")
	# the payload's last byte: the last text value of the envelope's last change
	at=$((pos + 32 + len - 1))
	printf '#' | dd of="$seg" bs=1 seek="$at" conv=notrunc status=none
	run -65 --separate-stderr trellara-inspect-transaction --config "$FLOW_FILE" --offset "$offset" --format json
	[ "$(jq -r .checksums <<<"$output")" = mismatch ]
	[ "$(jq -c '[.frames[] | [.offset, .checksum]]' <<<"$output")" = "[[$offset,\"mismatch\"]]" ]
	[[ $stderr == *"frame at offset $offset ($seg byte $pos): checksum mismatch: the header records 0x"*", its bytes give 0x"* ]]
	# the stream's readers refuse it too
	run -65 trellara-stream read --config "$FLOW_FILE"
	[[ $output == *"bad frame checksum"* ]]
	# the transaction after it is intact
	run -0 --separate-stderr trellara-inspect-transaction --config "$FLOW_FILE" --commit-lsn "$lsn2" --format json
	[ "$(jq .xid <<<"$output")" -eq "$xid2" ]
	[ "$(jq -r .checksums <<<"$output")" = match ]
}
