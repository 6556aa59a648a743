#!/usr/bin/env bats
# capture + applyd against real PostgreSQL: byte-identical targets,
# exactly once across kills, quarantine, chunked transactions.

load helpers/common

setup() {
	trellara_setup
	for side in source target; do
		psql_$side "CREATE TABLE accounts (id int PRIMARY KEY, owner text, balance numeric, note text)" \
			"CREATE TABLE orders (id bigint PRIMARY KEY, account_id int, amount numeric)"
	done
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE accounts, orders"
	write_flow_file "$FLOW_FILE" --tables "public.accounts,public.orders" --set stream.min_free_bytes=1048576
	export TRELLARA_STATUS_INTERVAL_MS=200
}

start_flow() {
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
}

checkpoint() {
	psql_target "SELECT $1 FROM trellara.apply_checkpoint"
}

@test "inserts, updates, deletes, truncates: the target ends identical" {
	start_flow
	psql_source "INSERT INTO accounts SELECT g, 'owner ' || g, g * 1.5, NULL FROM generate_series(1, 500) g"
	psql_source "UPDATE accounts SET balance = balance + 1 WHERE id % 3 = 0" \
		"DELETE FROM accounts WHERE id % 7 = 0" \
		"UPDATE accounts SET id = id + 10000 WHERE id % 11 = 0" \
		"INSERT INTO orders SELECT g, g % 500, g FROM generate_series(1, 300) g" \
		"TRUNCATE orders" \
		"INSERT INTO orders VALUES (1, 1, 1)"
	caught_up
	assert_tables_equal accounts orders
	[ "$(checkpoint applied_transactions)" -ge 7 ]
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
}

@test "many column types, TOAST left unchanged, composite and changing keys, a FULL table without key: identical" {
	for side in source target; do
		psql_$side "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')" \
			"CREATE DOMAIN posint AS integer CHECK (VALUE > 0)" \
			"CREATE TABLE typed (a int, b text, n numeric(20,6), t text, raw bytea, j json, jb jsonb, arr int[],
			  tarr text[], ts timestamptz, u uuid, m mood, d posint, big text, f float8, ok boolean, PRIMARY KEY (a, b))" \
			"ALTER TABLE typed ALTER COLUMN big SET STORAGE EXTERNAL" \
			"CREATE TABLE nokey (x int, y text, z jsonb)" \
			"ALTER TABLE nokey REPLICA IDENTITY FULL"
	done
	psql_source "ALTER PUBLICATION $PUBLICATION_NAME ADD TABLE typed, nokey"
	write_flow_file "$FLOW_FILE" --tables "public.accounts,public.orders,public.typed,public.nokey" --set stream.min_free_bytes=1048576
	start_flow
	psql_source "INSERT INTO typed VALUES
		(1, 'één', 12345.678901, 'naïve café ☃ 日本語', '\\x00ff10'::bytea, '{\"a\": [1, 2, {\"b\": null}]}', '{\"k\": \"v\", \"n\": 1.5}',
		 '{1,2,NULL,4}', '{\"x y\",\"q\\\"uote\",NULL}', '2026-01-02 03:04:05.123456+02', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
		 'happy', 7, repeat('toast-me ', 2000), 0.1, true),
		(1, 'two', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
		(2, '', -0.000001, '', '\\x'::bytea, 'null', '[]', '{}', '{}', 'infinity', 'ffffffff-ffff-ffff-ffff-ffffffffffff', 'sad', 1, repeat('x', 9000), 'NaN', false)"
	# updates that leave the TOASTed column alone arrive as unchanged TOAST
	psql_source "UPDATE typed SET n = n * 2, f = 1e300, m = 'ok' WHERE a = 1 AND b = 'één'" \
		"UPDATE typed SET t = 'changed', ts = now() WHERE a = 2" \
		"UPDATE typed SET b = 'moved' WHERE a = 1 AND b = 'two'" \
		"UPDATE typed SET big = big || 'tail' WHERE a = 2" \
		"DELETE FROM typed WHERE a = 2"
	psql_source "INSERT INTO nokey VALUES (1, 'a', '{\"p\": 1}'), (2, NULL, NULL), (3, 'c', '[1,2]')" \
		"UPDATE nokey SET y = 'b' WHERE x = 2" \
		"UPDATE nokey SET z = '{\"p\": 2}' WHERE x = 1" \
		"DELETE FROM nokey WHERE x = 3"
	caught_up
	assert_tables_equal typed nokey
	[ "$(psql_target "SELECT length(big) FROM typed WHERE a = 1 AND b = 'één'")" -eq 18000 ]
	[ "$(psql_target "SELECT count(*) FROM trellara.quarantine")" -eq 0 ]
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
}

@test "applyd.after_target_commit_before_group_ack: restart applies nothing twice, duplicates counted" {
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
	for i in $(seq 1 40); do echo "INSERT INTO accounts VALUES ($i, 'o$i', $i, NULL);"; done | psql_source
	psql_source "UPDATE accounts SET balance = balance + 100"
	wait_for '[ "$(trellara-stream read --config "$FLOW_FILE" --format json | grep -c "\"type\":\"txn\"")" -eq 41 ]'
	TRELLARA_FAULT=applyd.after_target_commit_before_group_ack bg_start applyd trellara-applyd --config "$FLOW_FILE"
	bg_wait applyd 60
	[ "$BG_STATUS" -eq 137 ]
	# committed in the target, but the group did not move
	applied=$(checkpoint applied_transactions)
	[ "$applied" -ge 1 ]
	[ ! -e "$STREAM_DIR/groups/applyd" ] || [ "$(cat "$STREAM_DIR/groups/applyd")" -lt "$(checkpoint stream_offset)" ]
	bg_start applyd2 trellara-applyd --config "$FLOW_FILE"
	caught_up
	assert_tables_equal accounts
	[ "$(checkpoint applied_transactions)" -eq 41 ]
	[ "$(checkpoint skipped_duplicates)" -ge "$applied" ]
	[ "$(psql_target "SELECT sum(balance) FROM accounts")" = "$(psql_source "SELECT sum(balance) FROM accounts")" ]
	bg_stop applyd2 TERM
	bg_stop capture TERM
}

@test "applyd.before_target_commit: the transactions are applied exactly once after restart" {
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
	for i in $(seq 1 30); do echo "INSERT INTO orders VALUES ($i, 1, $i);"; done | psql_source
	wait_for '[ "$(trellara-stream read --config "$FLOW_FILE" --format json | grep -c "\"type\":\"txn\"")" -eq 30 ]'
	TRELLARA_FAULT=applyd.before_target_commit bg_start applyd trellara-applyd --config "$FLOW_FILE"
	bg_wait applyd 60
	[ "$BG_STATUS" -eq 137 ]
	[ "$(psql_target "SELECT count(*) FROM orders")" -eq 0 ]
	bg_start applyd2 trellara-applyd --config "$FLOW_FILE"
	caught_up
	assert_tables_equal orders
	[ "$(checkpoint applied_transactions)" -eq 30 ]
	[ "$(checkpoint skipped_duplicates)" -eq 0 ]
	bg_stop applyd2 TERM
	bg_stop capture TERM
}

@test "a dropped target table quarantines missing_table; after repair, replay-ready applies it once" {
	start_flow
	psql_source "INSERT INTO accounts VALUES (1, 'a', 1, NULL)"
	caught_up
	before=$(checkpoint last_commit_lsn)
	psql_target "DROP TABLE orders"
	psql_source "INSERT INTO orders VALUES (1, 1, 10), (2, 1, 20)"
	bg_wait applyd 60
	[ "$BG_STATUS" -eq 1 ]
	grep -q "quarantined: missing_table" "$TEST_DIR/applyd.log"
	[ "$(checkpoint last_commit_lsn)" = "$before" ]
	run -1 trellara-quarantine list --config "$FLOW_FILE" --format json
	[ "$(jq -r '.quarantine[0].reason' <<<"$output")" = missing_table ]
	[ "$(jq -r '.quarantine[0].state' <<<"$output")" = quarantined ]
	xid=$(jq -r '.quarantine[0].transaction_id' <<<"$output")
	lsn=$(jq -r '.quarantine[0].commit_lsn' <<<"$output")
	run -1 trellara-quarantine list --config "$FLOW_FILE"
	[[ "$output" == *"replay-ready --config $FLOW_FILE --transaction-id $xid --commit-lsn $lsn"* ]]
	# restarting without repair refuses to apply past it
	run -1 trellara-applyd --config "$FLOW_FILE"
	[[ "$output" == *"refusing to apply past it"* ]]
	# a wrong boundary is refused
	run -1 trellara-quarantine replay-ready --config "$FLOW_FILE" --transaction-id "$xid" --commit-lsn 0/1
	[[ "$output" == *"no quarantined transaction"* ]]
	psql_target "CREATE TABLE orders (id bigint PRIMARY KEY, account_id int, amount numeric)"
	run -0 trellara-quarantine replay-ready --config "$FLOW_FILE" --transaction-id "$xid" --commit-lsn "$lsn"
	bg_start applyd2 trellara-applyd --config "$FLOW_FILE"
	psql_source "INSERT INTO orders VALUES (3, 1, 30)"
	caught_up
	assert_tables_equal accounts orders
	run -0 trellara-quarantine list --config "$FLOW_FILE"
	run -0 trellara-quarantine list --config "$FLOW_FILE" --all --format json
	[ "$(jq -r '.quarantine[0].state' <<<"$output")" = resolved ]
	bg_stop applyd2 TERM
	bg_stop capture TERM
}

@test "an UPDATE that matches no target row quarantines no_rows_matched; repaired and replayed it converges" {
	start_flow
	psql_source "INSERT INTO accounts VALUES (1, 'a', 1, NULL), (2, 'b', 2, NULL)"
	caught_up
	psql_target "DELETE FROM accounts WHERE id = 2"
	psql_source "UPDATE accounts SET balance = 99 WHERE id = 2" "INSERT INTO accounts VALUES (3, 'c', 3, NULL)"
	bg_wait applyd 60
	[ "$BG_STATUS" -eq 1 ]
	run -1 trellara-quarantine list --config "$FLOW_FILE" --format json
	[ "$(jq -r '.quarantine[0].reason' <<<"$output")" = no_rows_matched ]
	[[ "$(jq -r '.quarantine[0].detail' <<<"$output")" == *"public.accounts (id=2)"* ]]
	xid=$(jq -r '.quarantine[0].transaction_id' <<<"$output")
	lsn=$(jq -r '.quarantine[0].commit_lsn' <<<"$output")
	# nothing of the failed transaction, nor of the one after it, reached the target
	[ "$(psql_target "SELECT count(*) FROM accounts")" -eq 1 ]
	psql_target "INSERT INTO accounts VALUES (2, 'b', 2, NULL)"
	run -0 trellara-quarantine replay-ready --config "$FLOW_FILE" --transaction-id "$xid" --commit-lsn "$lsn"
	bg_start applyd2 trellara-applyd --config "$FLOW_FILE"
	caught_up
	assert_tables_equal accounts
	bg_stop applyd2 TERM
	bg_stop capture TERM
}

# pgbench tables on both sides, identical initial data (pgbench -i is deterministic)
pgbench_init() {
	local scale=$1
	shift
	pgbench -q -i -s "$scale" -h "$SOURCE_HOST" -p "$SOURCE_PORT" "$SOURCE_DB" >/dev/null 2>&1
	pgbench -q -i -s "$scale" -h "$TARGET_HOST" -p "$TARGET_PORT" "$TARGET_DB" >/dev/null 2>&1
	psql_source "ALTER PUBLICATION $PUBLICATION_NAME ADD TABLE pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history"
	write_flow_file "$FLOW_FILE" --tables "public.pgbench_accounts,public.pgbench_branches,public.pgbench_tellers,public.pgbench_history" \
		--set stream.min_free_bytes=1048576 "$@"
}

pgbench_compare() {
	# pgbench_history has no key: compare it as a sorted multiset
	assert_tables_equal pgbench_accounts pgbench_branches pgbench_tellers pgbench_history
}

@test "pgbench (4 clients, 25 s) with applyd (apply.workers: 4) killed -9 five times: the target ends identical, verify CONVERGED" {
	pgbench_init 1 --set apply.workers=4
	start_flow
	pgbench -n -c 4 -j 2 -T 25 -h "$SOURCE_HOST" -p "$SOURCE_PORT" "$SOURCE_DB" > "$TEST_DIR/pgbench.log" 2>&1 &
	bench=$!
	for _ in 1 2 3 4 5; do
		sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.1f", 3 + (r % 40) / 10 }')"
		kill -KILL "$(bg_pid applyd)"
		bg_wait applyd 10
		[ "$BG_STATUS" -eq 137 ]
		# shellcheck disable=SC2034 # helpers/common.bash's table of background processes (keyed by name)
		TRELLARA_BG[applyd]=""
		bg_start applyd trellara-applyd --config "$FLOW_FILE"
	done
	wait "$bench"
	grep -q "number of transactions actually processed" "$TEST_DIR/pgbench.log"
	caught_up 180
	pgbench_compare
	txns=$(psql_source "SELECT count(*) FROM pgbench_history")
	[ "$txns" -gt 1000 ]
	# every pgbench transaction applied once: one history row each
	[ "$(psql_target "SELECT count(*) FROM pgbench_history")" -eq "$txns" ]
	[ "$(psql_target "SELECT count(*) FROM trellara.quarantine")" -eq 0 ]
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ "$output" == *"result: CONVERGED"* ]]
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	grep -q "parallel apply: 4 connections" "$TEST_DIR/applyd.log"
	bg_stop capture TERM
}

@test "strict chunking (100 changes per chunk): the same workload converges identically" {
	pgbench_init 1 --set dataset.strict_chunking='{max_changes_per_chunk: 100}'
	start_flow
	pgbench -n -c 2 -T 10 -h "$SOURCE_HOST" -p "$SOURCE_PORT" "$SOURCE_DB" >/dev/null 2>&1
	psql_source "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid <= 1050"
	caught_up 120
	pgbench_compare
	# every transaction chunked (a large one streamed by the server is written
	# once, as pending chunks); no chunk holds more than 100 changes
	[ "$(trellara-stream read --config "$FLOW_FILE" --format json | jq -s '[.[] | select(.type == "txn")] | length')" -eq 0 ]
	[ "$(trellara-stream read --config "$FLOW_FILE" --format json | jq -s '[.[] | select(.type == "chunk" or .type == "pending_chunk")] | map(.changes | length) | max')" -eq 100 ]
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
}

# the frames of one chunked transaction, captured for real, as append input
capture_chunk_set() {
	write_flow_file "$FLOW_FILE" --tables "public.accounts,public.orders" --set stream.min_free_bytes=1048576 \
		--set dataset.strict_chunking='{max_changes_per_chunk: 100}'
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
	psql_source "INSERT INTO orders SELECT g, 1, g FROM generate_series(1, 250) g"
	wait_for '[ "$(trellara-stream read --config "$FLOW_FILE" --format json | grep -c "\"type\":\"commit_marker\"")" -eq 1 ]'
	bg_stop capture TERM
	trellara-stream read --config "$FLOW_FILE" --raw --format json |
		jq -c 'select(.type != "watermark" and .type != "ddl") | {type, payload_base64}' > "$TEST_DIR/set.jsonl"
	[ "$(jq -s -r 'map(.type) | join(",")' "$TEST_DIR/set.jsonl")" = "chunk,chunk,chunk,manifest,commit_marker" ]
}

# a flow of its own (own stream, own checkpoint) over the same target
flow_with_frames() {
	local name=$1
	shift
	write_flow_file "$TEST_DIR/$name.yml" --tables "public.accounts,public.orders" --set stream.min_free_bytes=1048576 \
		--set stream.path="$TEST_DIR/$name-stream" --set dataset.id="$name"
	for line in "$@"; do sed -n "${line}p" "$TEST_DIR/set.jsonl"; done |
		trellara-stream append --config "$TEST_DIR/$name.yml" > /dev/null
}

@test "a tampered chunk, or a manifest whose chunk is missing, is rejected before anything is applied" {
	capture_chunk_set
	# chunk 1 with one value changed: still a well-formed envelope, and a
	# valid frame (append computes the frame checksum), but not what the
	# manifest says
	sed -n 2p "$TEST_DIR/set.jsonl" | python3 -c '
import base64, json, sys
frame = json.loads(sys.stdin.read())
data = bytearray(base64.b64decode(frame["payload_base64"]))
at = bytes(data).rfind(b"\x00\x00\x00\x03150")
assert at > 0
data[at + 6] = ord("9")
frame["payload_base64"] = base64.b64encode(bytes(data)).decode()
print(json.dumps(frame))' > "$TEST_DIR/tampered.jsonl"
	sed -i "2r $TEST_DIR/tampered.jsonl" "$TEST_DIR/set.jsonl"   # line 3: the tampered chunk 1
	flow_with_frames tampered 1 3 4 5 6
	run -65 trellara-applyd --config "$TEST_DIR/tampered.yml"
	[[ "$output" == *"chunk_integrity"*"chunk 1 checksum"*"differs from the manifest"* ]]
	[ "$(psql_target "SELECT count(*) FROM orders")" -eq 0 ]
	[ "$(psql_target "SELECT reason FROM trellara.quarantine WHERE dataset_id = 'tampered'")" = chunk_integrity ]
	[ "$(psql_target "SELECT applied_transactions FROM trellara.apply_checkpoint WHERE dataset_id = 'tampered'")" -eq 0 ]

	flow_with_frames missing 1 4 5 6
	run -65 trellara-applyd --config "$TEST_DIR/missing.yml"
	[[ "$output" == *"chunk 2 where chunk 1 belongs"* ]]
	[ "$(psql_target "SELECT count(*) FROM orders")" -eq 0 ]

	# an incomplete set followed by its replay: the replay is applied once
	flow_with_frames replayed 1 2 1 2 4 5 6
	bg_start applyd trellara-applyd --config "$TEST_DIR/replayed.yml"
	wait_for '[ "$(psql_target "SELECT count(*) FROM orders")" -eq 250 ]'
	wait_for '[ "$(psql_target "SELECT stream_offset FROM trellara.apply_checkpoint WHERE dataset_id = '"'replayed'"'")" -eq 7 ]'
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	grep -q "incomplete one is discarded" "$TEST_DIR/applyd.log"
	[ "$(psql_target "SELECT applied_transactions FROM trellara.apply_checkpoint WHERE dataset_id = 'replayed'")" -eq 1 ]
	assert_tables_equal orders
}

@test "a lost target connection is retried with backoff; nothing is lost or doubled" {
	start_flow
	psql_source "INSERT INTO accounts VALUES (1, 'a', 1, NULL)"
	caught_up
	psql_admin target "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'trellara-applyd'" >/dev/null
	psql_source "INSERT INTO accounts VALUES (2, 'b', 2, NULL)" "UPDATE accounts SET balance = 10 WHERE id = 1"
	wait_for "grep -q 'reconnecting to the target' '$TEST_DIR/applyd.log'"
	caught_up
	assert_tables_equal accounts
	[ "$(checkpoint applied_transactions)" -eq 3 ]
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
}
