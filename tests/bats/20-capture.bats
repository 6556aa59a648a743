#!/usr/bin/env bats
# trellara-capture against a real PostgreSQL: commit order, values,
# large transactions, kill -9 between append and ack, the
# acknowledgement rule, watermarks.

load helpers/common

setup() {
	trellara_setup
	psql_source "CREATE TABLE accounts (id int PRIMARY KEY, owner text, balance numeric, note text)" \
		"CREATE TABLE orders (id bigint PRIMARY KEY, account_id int, amount numeric)" \
		"CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE accounts, orders"
	write_flow_file "$FLOW_FILE" --tables "public.accounts,public.orders" \
		--set stream.min_free_bytes=1048576 --set stream.segment_bytes=4194304
	export TRELLARA_STATUS_INTERVAL_MS=200
}

# frames in the stream, decoded, one JSON object per line
frames_json() {
	trellara-stream read --config "$FLOW_FILE" --format json
}

txn_count() {
	frames_json | jq -s '[.[] | select(.type == "txn" or .type == "commit_marker")] | length'
}

slot_flush_lsn() {
	psql_source "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME'"
}

# the end LSN of the last durable frame in the stream (txn, marker or watermark)
stream_durable_lsn() {
	frames_json | jq -r 'select(.type == "txn" or .type == "commit_marker" or .type == "watermark") | (.end_lsn // .lsn)' |
		while read -r l; do psql_source "SELECT '$l'::pg_lsn"; done | tail -1
}

@test "capture refuses to start without --start-now (no snapshot run)" {
	run -78 trellara-capture --config "$FLOW_FILE"
	[[ "$output" == *"--start-now"* ]]
}

@test "inserts, updates, deletes and truncates on two tables arrive in commit order with their values" {
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
	psql_source "INSERT INTO accounts VALUES (1, 'ann', 10.50, 'naïve ☃'), (2, 'bob', NULL, NULL)"
	psql_source "BEGIN" "INSERT INTO orders VALUES (100, 1, 3.25)" "UPDATE accounts SET balance = 7 WHERE id = 1" "COMMIT"
	psql_source "UPDATE accounts SET id = 3 WHERE id = 2"
	psql_source "DELETE FROM orders WHERE id = 100"
	psql_source "TRUNCATE accounts, orders"
	wait_for -m "5 transactions in the stream" '[ "$(txn_count)" -eq 5 ]'
	run -0 frames_json
	txns=$(jq -c 'select(.type == "txn")' <<<"$output")
	# commit order: commit LSNs strictly increase
	run -0 bash -c "jq -r .commit_lsn <<<'$txns' | while read l; do psql -X -qAt '$SOURCE_URL' -c \"SELECT ('\$l'::pg_lsn - '0/0')::numeric\"; done"
	sort -n -c <<<"$output"
	[ "$(jq -s 'map(.changes | length) | join(",")' -r <<<"$txns")" = "2,2,1,1,1" ]
	first=$(sed -n 1p <<<"$txns")
	[ "$(jq -r '.changes[0].op' <<<"$first")" = insert ]
	[ "$(jq -r '.changes[0].relation' <<<"$first")" = public.accounts ]
	[ "$(jq -r '.changes[0].new.note' <<<"$first")" = 'naïve ☃' ]
	[ "$(jq -r '.changes[0].new.balance' <<<"$first")" = 10.50 ]
	[ "$(jq -c '.changes[1].new.balance' <<<"$first")" = null ]
	second=$(sed -n 2p <<<"$txns")
	[ "$(jq -r '.changes[0].relation + " " + .changes[0].op' <<<"$second")" = "public.orders insert" ]
	[ "$(jq -r '.changes[1].op + " " + .changes[1].new.balance' <<<"$second")" = "update 7" ]
	third=$(sed -n 3p <<<"$txns")
	# a key-changing update carries the old key
	[ "$(jq -r '.changes[0].old_key.id + ">" + .changes[0].new.id' <<<"$third")" = "2>3" ]
	fourth=$(sed -n 4p <<<"$txns")
	[ "$(jq -r '.changes[0].op + " " + .changes[0].key.id' <<<"$fourth")" = "delete 100" ]
	fifth=$(sed -n 5p <<<"$txns")
	[ "$(jq -r '.changes[0].op' <<<"$fifth")" = truncate ]
	[ "$(jq -r '.changes[0].relations | sort | join(",")' <<<"$fifth")" = "public.accounts,public.orders" ]
	bg_stop capture TERM
	[ "$BG_STATUS" -eq 0 ]
	grep -q "capture stopped: 5 transactions" "$TEST_DIR/capture.log"
}

@test "a 200 000-row transaction arrives whole, once, with bounded capture memory" {
	write_flow_file "$FLOW_FILE" --tables "public.accounts,public.orders" \
		--set stream.min_free_bytes=1048576 --set source.stream_spill_threshold_changes=1000
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
	psql_source "INSERT INTO orders SELECT g, g % 100, g * 1.5 FROM generate_series(1, 200000) g"
	psql_source "INSERT INTO accounts VALUES (1, 'after', 0, NULL)"
	wait_for -t 120 -m "both transactions in the stream" '[ "$(txn_count)" -eq 2 ]'
	# streamed by the server (logical_decoding_work_mem 64kB), written once:
	# pending chunks as it came, listed by its manifest
	run -0 bash -c "trellara-stream read --config '$FLOW_FILE' --format json | jq -c 'select(.type == \"txn\" or .type == \"pending_chunk\") | [.xid, (.changes | length), (.changes[0].relation)]'"
	# every row exactly once, in one transaction, before the next one
	total=$(jq -s 'map(select(.[2] == "public.orders")) | map(.[1]) | add' <<<"$output")
	[ "$total" -eq 200000 ]
	[ "$(jq -s 'map(select(.[2] == "public.orders")) | map(.[0]) | unique | length' <<<"$output")" -eq 1 ]
	[ "$(tail -1 <<<"$output" | jq -r '.[2]')" = public.accounts ]
	# ids 1..200000, none twice
	run -0 bash -c "trellara-stream read --config '$FLOW_FILE' --format json | jq -r 'select(.type == \"txn\" or .type == \"pending_chunk\") | .changes[] | select(.relation == \"public.orders\") | .new.id' | sort -n | uniq | wc -l"
	[ "$output" -eq 200000 ]
	# the manifest lists every pending chunk, all its changes in use
	run -0 bash -c "trellara-stream read --config '$FLOW_FILE' --format json | jq -c 'select(.type == \"manifest\")'"
	[ "$(jq '.total_changes' <<<"$output")" -eq 200000 ]
	[ "$(jq '[.chunks[].changes] | add' <<<"$output")" -eq 200000 ]
	# the spill files are gone
	[ -z "$(ls "$TEST_DIR/spill")" ]
	# memory stayed bounded: peak resident set under 64 MiB
	hwm_kb=$(awk '/^VmHWM:/ {print $2}' "/proc/$(bg_pid capture)/status")
	echo "# capture peak RSS: $hwm_kb kB" >&3
	[ "$hwm_kb" -lt 65536 ]
	bg_stop capture TERM
	[ "$BG_STATUS" -eq 0 ]
}

@test "capture.after_append_before_ack then restart: nothing missing, the duplicate skipped and counted" {
	TRELLARA_FAULT=capture.after_append_before_ack:3 bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
	for i in 1 2 3 4 5; do psql_source "INSERT INTO accounts VALUES ($i, 'o$i', $i, NULL)"; done
	bg_wait capture 30
	[ "$BG_STATUS" -eq 137 ]
	grep -q 'fault point "capture.after_append_before_ack" reached' "$TEST_DIR/capture.log"
	before=$(txn_count)
	[ "$before" -ge 1 ]
	# the slot never confirmed more than the stream holds
	slot=$(slot_flush_lsn)
	durable=$(stream_durable_lsn)
	[ "$(psql_source "SELECT '$slot'::pg_lsn <= '$durable'::pg_lsn")" = t ]

	bg_start capture2 trellara-capture --config "$FLOW_FILE" --start-now
	wait_for -m "all 5 inserts in the stream" '[ "$(frames_json | jq -s "[.[] | select(.type == \"txn\") | .changes[] | .new.id] | length")" -eq 5 ]'
	psql_source "INSERT INTO accounts VALUES (6, 'o6', 6, NULL)"
	wait_for '[ "$(frames_json | jq -s "[.[] | select(.type == \"txn\") | .changes[] | .new.id] | length")" -eq 6 ]'
	bg_stop capture2 TERM
	[ "$BG_STATUS" -eq 0 ]
	# every row exactly once, in order
	[ "$(frames_json | jq -r 'select(.type == "txn") | .changes[].new.id' | tr '\n' ' ')" = "1 2 3 4 5 6 " ]
	grep -qE "[1-9][0-9]* skipped as duplicates" "$TEST_DIR/capture2.log"
	grep -q "already in the stream" "$TEST_DIR/capture2.log"
}

@test "the slot's confirmed_flush_lsn never passes the stream's durable LSN" {
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
	for round in 1 2 3 4 5 6; do
		psql_source "INSERT INTO orders SELECT g, $round, g FROM generate_series($round * 1000, $round * 1000 + 499) g"
		slot=$(slot_flush_lsn)
		durable=$(stream_durable_lsn)
		[ -n "$slot" ]
		[ "$(psql_source "SELECT '$slot'::pg_lsn <= '${durable:-0/0}'::pg_lsn")" = t ]
	done
	bg_stop capture TERM
	[ "$BG_STATUS" -eq 0 ]
	slot=$(slot_flush_lsn)
	durable=$(stream_durable_lsn)
	[ "$(psql_source "SELECT '$slot'::pg_lsn <= '$durable'::pg_lsn")" = t ]
	# and it did advance: the final status update confirmed the last commit
	[ "$(psql_source "SELECT '$slot'::pg_lsn > '0/0'")" = t ]
}

@test "an idle publication's slot advances through watermark frames" {
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
	# WAL from a table outside the publication: nothing to stream
	psql_source "CREATE TABLE unpublished (x int)" "INSERT INTO unpublished SELECT generate_series(1, 10000)"
	target=$(psql_source "SELECT pg_current_wal_lsn()")
	wait_for -t 60 -m "slot past $target" "[ \"\$(psql_source \"SELECT confirmed_flush_lsn >= '$target' FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME'\")\" = t ]"
	run -0 frames_json
	[ "$(jq -s '[.[] | select(.type == "watermark")] | length' <<<"$output")" -ge 1 ]
	[ "$(jq -s '[.[] | select(.type == "txn")] | length' <<<"$output")" -eq 0 ]
	bg_stop capture TERM
}

@test "a stream bound to another source system refuses to start (78, naming both)" {
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "grep -q 'bound to source system' '$TEST_DIR/capture.log'"
	bg_stop capture TERM
	sed -i 's/^system_identifier=.*/system_identifier=1234567890123456789/' "$STREAM_DIR/meta"
	run -78 trellara-capture --config "$FLOW_FILE" --start-now
	[[ "$output" == *"source identity mismatch"*"1234567890123456789"* ]]
	real=$(psql_source "SELECT system_identifier FROM pg_control_system()")
	[[ "$output" == *"$real"* ]]
}


@test "strict chunking: every transaction is chunks + manifest + commit marker, nothing lost" {
	write_flow_file "$FLOW_FILE" --tables "public.accounts,public.orders" \
		--set stream.min_free_bytes=1048576 --set dataset.strict_chunking='{max_changes_per_chunk: 100}'
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
	psql_source "INSERT INTO orders SELECT g, 1, g FROM generate_series(1, 1050) g"
	psql_source "INSERT INTO accounts VALUES (1, 'one', 1, NULL)"
	wait_for -m "two commit markers" '[ "$(frames_json | jq -s "[.[] | select(.type == \"commit_marker\")] | length")" -eq 2 ]'
	run -0 frames_json
	[ "$(jq -s '[.[] | select(.type == "txn")] | length' <<<"$output")" -eq 0 ]
	# the big one, streamed by the server and written once: 11 pending
	# chunks of at most 100 changes as it came (sequence numbers 0..10, no
	# commit yet), then its manifest listing them by offset, and its marker
	big=$(jq -c 'select(.type != "watermark")' <<<"$output" | head -13)
	[ "$(jq -s 'map(.type) | join(",")' -r <<<"$big")" = "$(printf 'pending_chunk,%.0s' $(seq 11))manifest,commit_marker" ]
	[ "$(jq -s '[.[] | select(.type == "pending_chunk") | .changes | length] | max' <<<"$big")" -eq 100 ]
	[ "$(jq -s '[.[] | select(.type == "pending_chunk") | .changes | length] | add' <<<"$big")" -eq 1050 ]
	[ "$(jq -s '[.[] | select(.type == "pending_chunk") | .sequence] | join(",")' -r <<<"$big")" = "$(seq -s, 0 10)" ]
	[ "$(jq -s '[.[] | select(.type == "pending_chunk") | .commit_lsn] | unique | join(",")' -r <<<"$big")" = 0/0 ]
	manifest=$(jq -c 'select(.type == "manifest")' <<<"$big")
	[ "$(jq '.chunk_count' <<<"$manifest")" -eq 11 ]
	[ "$(jq '.total_changes' <<<"$manifest")" -eq 1050 ]
	[ "$(jq -r '.tables | join(",")' <<<"$manifest")" = public.orders ]
	[ "$(jq -r '[.chunks[].offset] | join(",")' <<<"$manifest")" = "$(jq -s -r '[.[] | select(.type == "pending_chunk") | .offset] | join(",")' <<<"$big")" ]
	# the small one is not streamed: chunk 0, its manifest and marker
	[ "$(jq -c 'select(.type != "watermark")' <<<"$output" | tail -n +14 | jq -s -r 'map(.type) | join(",")')" = chunk,manifest,commit_marker ]
	# the manifest's checksums are those of the pending chunk payloads as stored
	run -0 bash -c "trellara-stream read --config '$FLOW_FILE' --raw --format json | jq -r 'select(.type == \"pending_chunk\") | .payload_base64' | head -11"
	i=0
	while read -r b64; do
		want=$(jq -r ".chunks[$i].crc" <<<"$manifest")
		got=$(printf '%s' "$b64" | base64 -d | python3 -c 'import sys
data = sys.stdin.buffer.read()
crc = 0xFFFFFFFF
for b in data:
    crc ^= b
    for _ in range(8):
        crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
print("0x%08x" % (crc ^ 0xFFFFFFFF))')
		[ "$got" = "$want" ]
		i=$((i + 1))
	done <<<"$output"
	[ "$i" -eq 11 ]
	bg_stop capture TERM
	[ "$BG_STATUS" -eq 0 ]
}

@test "a lost source connection is retried with backoff, and nothing is missed" {
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
	psql_source "INSERT INTO accounts VALUES (1, 'before', 0, NULL)"
	wait_for '[ "$(txn_count)" -eq 1 ]'
	psql_source "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME'" >/dev/null
	psql_source "INSERT INTO accounts VALUES (2, 'during', 0, NULL)"
	wait_for -m "reconnected" "grep -q 'reconnecting to the source' '$TEST_DIR/capture.log'"
	wait_for -t 60 '[ "$(txn_count)" -eq 2 ]'
	psql_source "INSERT INTO accounts VALUES (3, 'after', 0, NULL)"
	wait_for '[ "$(txn_count)" -eq 3 ]'
	[ "$(frames_json | jq -r 'select(.type == "txn") | .changes[].new.owner' | tr '\n' ' ')" = "before during after " ]
	bg_stop capture TERM
	[ "$BG_STATUS" -eq 0 ]
}

@test "after a reconnect the server's resent transactions are skipped, not appended again" {
	# capture pauses after a durable batch, before its status update; the
	# pause is open (resume present) until the test arms it
	touch "$TEST_DIR/capture.after_append_before_ack.resume"
	TRELLARA_PAUSE=capture.after_append_before_ack TRELLARA_PAUSE_DIR="$TEST_DIR" \
		bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
	rm -f "$TEST_DIR/capture.after_append_before_ack.resume" "$TEST_DIR/capture.after_append_before_ack.paused"
	psql_source "INSERT INTO accounts VALUES (1, 'before', 0, NULL)"
	wait_for "[ -e '$TEST_DIR/capture.after_append_before_ack.paused' ]"
	# durable in the stream, not acknowledged: the server will send it again
	[ "$(txn_count)" -eq 1 ]
	psql_source "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME'" >/dev/null
	touch "$TEST_DIR/capture.after_append_before_ack.resume"
	wait_for -m "reconnected" "grep -q 'reconnecting to the source' '$TEST_DIR/capture.log'"
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
	psql_source "INSERT INTO accounts VALUES (2, 'after', 0, NULL)"
	wait_for -t 60 '[ "$(frames_json | jq -r "select(.type == \"txn\") | .changes[].new.owner" | grep -c "^after$")" -eq 1 ]'
	# each transaction once in the stream; the resent one skipped
	[ "$(frames_json | jq -r 'select(.type == "txn") | .changes[].new.owner' | tr '\n' ' ')" = "before after " ]
	grep -q "already in the stream" "$TEST_DIR/capture.log"
	bg_stop capture TERM
	[ "$BG_STATUS" -eq 0 ]
}

@test "a source that stays away ends capture with 69 after bounded retries" {
	write_flow_file "$FLOW_FILE" --tables "public.accounts" --set stream.min_free_bytes=1048576 \
		--set source.database_url="\"postgresql:///nosuchdb?host=$SOURCE_HOST&port=$SOURCE_PORT\""
	TRELLARA_RECONNECT_BASE_MS=20 run -69 timeout 120 trellara-capture --config "$FLOW_FILE" --start-now
	[[ "$output" == *"source unavailable after 8 reconnect attempts"* ]]
	[ "$(grep -c 'reconnecting to the source in' <<<"$output")" -eq 8 ]
}

@test "low disk: capture fails closed with 73 and acknowledges nothing" {
	write_flow_file "$FLOW_FILE" --tables "public.accounts" --set stream.min_free_bytes=1000000000000000
	run -73 trellara-capture --config "$FLOW_FILE" --start-now
	[[ "$output" == *"min_free_bytes"* ]]
}

@test "DDL evidence: after check --fix, a schema change arrives as a ddl frame in its transaction, in order" {
	run -0 trellara-check --config "$FLOW_FILE" --fix
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
	psql_source "INSERT INTO accounts VALUES (1, 'before', 0, NULL)"
	psql_source "BEGIN" "ALTER TABLE accounts ADD COLUMN extra int" "INSERT INTO accounts VALUES (2, 'same txn', 0, NULL, 42)" "COMMIT"
	psql_source "INSERT INTO accounts VALUES (3, 'after', 0, NULL, 7)"
	wait_for '[ "$(txn_count)" -eq 3 ]'
	run -0 bash -c "trellara-stream read --config '$FLOW_FILE' --format json | jq -c 'select(.type != \"watermark\")'"
	[ "$(jq -s -r 'map(.type) | join(",")' <<<"$output")" = "txn,ddl,txn,txn" ]
	ddl=$(sed -n 2p <<<"$output")
	txn=$(sed -n 3p <<<"$output")
	[ "$(jq .xid <<<"$ddl")" = "$(jq .xid <<<"$txn")" ]
	[ "$(jq -r .commit_lsn <<<"$ddl")" = "$(jq -r .commit_lsn <<<"$txn")" ]
	[[ "$(jq -r '.ddl | fromjson | .statement' <<<"$ddl")" == *"ALTER TABLE accounts ADD COLUMN extra int"* ]]
	[ "$(jq -r '.ddl | fromjson | .command_tag' <<<"$ddl")" = "ALTER TABLE" ]
	# both inside the transaction.  (PostgreSQL 15 hands the trigger's
	# message over after the row: the trigger runs it in a subtransaction,
	# an EXCEPTION block, and pgoutput sends subtransaction changes after
	# the top transaction's; a message emitted directly keeps its place,
	# see below.)
	[ "$(jq -r '.changes | map(.op) | sort | join(",")' <<<"$txn")" = "insert,message" ]
	[ "$(jq -r '.changes[] | select(.op == "insert") | .new.extra' <<<"$txn")" = 42 ]
	psql_source "BEGIN" "INSERT INTO accounts VALUES (4, 'x', 0, NULL, 1)" \
		"SELECT pg_logical_emit_message(true, 'trellara.ddl', '{\"statement\": \"direct\"}')" \
		"INSERT INTO accounts VALUES (5, 'y', 0, NULL, 1)" "COMMIT" >/dev/null
	wait_for '[ "$(txn_count)" -eq 4 ]'
	last=$(trellara-stream read --config "$FLOW_FILE" --format json | jq -c 'select(.type == "txn")' | tail -1)
	[ "$(jq -r '.changes | map(.op) | join(",")' <<<"$last")" = "insert,message,insert" ]
	bg_stop capture TERM
	[ "$BG_STATUS" -eq 0 ]
}
