#!/usr/bin/env bats
# trellara-snapshot splits a big table (snapshot.split_bytes): ranges of
# ctid blocks copied by several workers at one exported snapshot, each
# with its own durable progress; a resume keeps only the ranges that still
# read the same; rows updated during the split copy converge.

load helpers/common

TABLES="public.pgbench_accounts,public.pgbench_branches,public.pgbench_tellers,public.pgbench_history"
SPLIT=4194304 # 4 MiB: pgbench_accounts of scale 2 (26 MB) in 8 ranges with 2 workers, the others whole

setup() {
	trellara_setup
	export TRELLARA_STATUS_INTERVAL_MS=200
}

source_init() {
	pgbench -q -i -s "$1" ${FOREIGN_KEYS:+--foreign-keys} -h "$SOURCE_HOST" -p "$SOURCE_PORT" "$SOURCE_DB" >/dev/null 2>&1
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history"
	write_flow_file "$FLOW_FILE" --tables "$TABLES" --set stream.min_free_bytes=1048576 \
		--set snapshot.split_bytes="${2:-$SPLIT}" --set snapshot.workers=2
}

ranges() {
	psql_target "SELECT $1 FROM trellara.snapshot_range_progress WHERE relation = 'public.pgbench_accounts'"
}

# the table's watermark (the snapshot its ranges read as they are in the target)
table_watermark() {
	psql_target "SELECT watermark_lsn FROM trellara.snapshot_table_progress WHERE relation = 'public.pgbench_accounts'"
}

# capture and applyd until the target has caught up, then the tables
# (the pgbench ones, or those named) compared (sorted COPY) and verify's
# result
stream_compare_verify() {
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	local lsn
	lsn=$(source_flushed_lsn)
	wait_for -t 180 -m "target caught up with $lsn" \
		"[ \"\$(psql_target \"SELECT coalesce((SELECT applied_through_lsn >= '$lsn' FROM trellara.apply_checkpoint), false)\")\" = t ]"
	if (($#)); then
		assert_tables_equal "$@"
	else
		assert_tables_equal pgbench_accounts pgbench_branches pgbench_tellers pgbench_history
	fi
	run -0 --separate-stderr trellara-verify --config "$FLOW_FILE" --format json
	[ "$(jq -r .result <<<"$output")" = CONVERGED ]
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
	[ "$BG_STATUS" -eq 0 ]
}

@test "a split table killed mid-copy resumes only its unfinished ranges: identical, CONVERGED" {
	source_init 2
	TRELLARA_FAULT=snapshot.after_range_commit:2 run -137 trellara-snapshot --config "$FLOW_FILE" --create-tables
	[[ "$output" == *'fault point "snapshot.after_range_commit" reached'* ]]
	n=$(ranges "max(n_ranges)")
	[ "$n" -ge 4 ]
	[ "$(ranges "count(*)")" -eq "$n" ]
	# the second range's commit killed it; a range of the other worker may
	# have committed in between
	done_before=$(ranges "count(*) FILTER (WHERE state = 'copied')")
	[ "$done_before" -ge 2 ]
	[ "$done_before" -lt "$n" ]
	[ -z "$(table_watermark)" ]
	first_watermark=$(ranges "min(watermark_lsn)")
	run -0 --separate-stderr trellara-snapshot status --config "$FLOW_FILE" --format json
	[ "$(jq -r '.tables[0] | "\(.table) \(.state) \(.ranges) \(.ranges_copied)"' <<<"$output")" = \
		"public.pgbench_accounts pending $n $done_before" ]
	[ "$(jq -r '.tables[1].ranges' <<<"$output")" = null ]
	run -0 trellara-snapshot --config "$FLOW_FILE" --create-tables
	redone=$((n - done_before))
	# the kept ranges were read again by the two workers' connections at once
	[[ "$output" == *"table public.pgbench_accounts: its $done_before ranges copied earlier read again on 2 connections at this snapshot"* ]]
	[[ "$output" == *"copied public.pgbench_accounts: 200000 rows in $n ranges ($redone copied now, $done_before kept)"* ]]
	[ "$(grep -c 'pgbench_accounts: range [0-9]*/[0-9]*: .* rows copied' <<<"$output")" -eq "$redone" ]
	# durably: the kept ranges still carry the first invocation's snapshot,
	# the others (and the table) the resume's
	[ "$(ranges "count(*) FILTER (WHERE state = 'copied' AND watermark_lsn = '$first_watermark')")" -eq "$done_before" ]
	[ "$(ranges "count(*) FILTER (WHERE state = 'copied' AND watermark_lsn = '$(table_watermark)')")" -eq "$redone" ]
	[ "$(ranges "sum(copied_rows)")" -eq 200000 ]
	[ "$(psql_target "SELECT count(*) FROM pg_indexes WHERE tablename = 'pgbench_accounts'")" -eq 1 ]
	source_load() { pgbench -n -c 2 -R 200 -T 3 -h "$SOURCE_HOST" -p "$SOURCE_PORT" "$SOURCE_DB" >"$TEST_DIR/pgbench.log" 2>&1; }
	source_load
	stream_compare_verify
}

@test "a range copied before the kill whose rows changed since: the resume copies the table whole again" {
	source_init 2
	TRELLARA_FAULT=snapshot.after_range_commit:2 run -137 trellara-snapshot --config "$FLOW_FILE" --create-tables
	n=$(ranges "max(n_ranges)")
	# a row of a range copied before the kill moves to the table's end
	block=$(ranges "min(first_block) FILTER (WHERE state = 'copied')")
	aid=$(psql_source "SELECT aid FROM pgbench_accounts WHERE ctid = '($block,1)'")
	psql_source "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = $aid"
	run -0 trellara-snapshot --config "$FLOW_FILE" --create-tables
	[[ "$output" == *"reads differently at this snapshot"* ]]
	[[ "$output" == *"copied public.pgbench_accounts: 200000 rows in $n ranges ($n copied now, 0 kept)"* ]]
	[ "$(ranges "count(*) FILTER (WHERE state = 'copied' AND watermark_lsn = '$(table_watermark)')")" -eq "$n" ]
	stream_compare_verify
	[ "$(psql_target "SELECT abalance FROM pgbench_accounts WHERE aid = $aid")" -eq 1 ]
}

@test "a resume with another snapshot.split_bytes copies the table whole again, in the new split" {
	source_init 2
	TRELLARA_FAULT=snapshot.after_range_commit:2 run -137 trellara-snapshot --config "$FLOW_FILE" --create-tables
	n=$(ranges "max(n_ranges)")
	write_flow_file "$FLOW_FILE" --tables "$TABLES" --set stream.min_free_bytes=1048576 \
		--set snapshot.split_bytes=$((SPLIT * 2)) --set snapshot.workers=2
	run -0 trellara-snapshot --config "$FLOW_FILE" --create-tables
	[[ "$output" == *"split with snapshot.split_bytes $SPLIT by an earlier invocation, $((SPLIT * 2)) now"* ]]
	m=$(ranges "max(n_ranges)")
	[ "$m" -lt "$n" ]
	[[ "$output" == *"copied public.pgbench_accounts: 200000 rows in $m ranges ($m copied now, 0 kept)"* ]]
	[ "$(ranges "count(*) FILTER (WHERE split_bytes = $((SPLIT * 2)) AND state = 'copied')")" -eq "$m" ]
	stream_compare_verify
}

@test "rows updated while a split table is copied: streamed afterwards, identical and CONVERGED" {
	source_init 4
	pgbench -n -c 2 -R 200 -T 300 -h "$SOURCE_HOST" -p "$SOURCE_PORT" "$SOURCE_DB" >"$TEST_DIR/pgbench.log" 2>&1 &
	load=$!
	wait_for -t 30 "[ \"\$(psql_source 'SELECT count(*) FROM pgbench_history')\" -gt 0 ]"
	run -0 trellara-snapshot --config "$FLOW_FILE" --create-tables
	kill -0 "$load" # still writing when the snapshot was done
	n=$(ranges "max(n_ranges)")
	[ "$n" -ge 8 ]
	[[ "$output" == *"copied public.pgbench_accounts: 400000 rows in $n ranges ($n copied now, 0 kept)"* ]]
	kill -TERM "$load"
	wait "$load" || true
	[ "$(psql_source "SELECT count(*) FROM pgbench_history")" -gt 100 ]
	stream_compare_verify
}

@test "--create-tables killed after the tables' keys, before their foreign keys: the resume creates only the foreign keys" {
	FOREIGN_KEYS=1 source_init 1
	fkeys='SELECT count(*) FROM pg_constraint WHERE contype = '"'f'"' AND conrelid::regclass::text LIKE '"'pgbench_%'"
	source_fkeys=$(psql_source "$fkeys")
	[ "$source_fkeys" -ge 3 ]
	TRELLARA_FAULT=snapshot.after_keys_before_foreign_keys run -137 trellara-snapshot --config "$FLOW_FILE" --create-tables
	[[ "$output" == *"pgbench_accounts: keys and indexes built"* ]]
	[[ "$output" == *"pgbench_tellers: keys and indexes built"* ]]
	[ "$(psql_target "$fkeys")" -eq 0 ]
	pkeys=$(psql_target "SELECT string_agg(conname || ':' || oid, ',' ORDER BY conname) FROM pg_constraint WHERE contype = 'p'")
	run -0 trellara-snapshot --config "$FLOW_FILE" --create-tables
	[[ "$output" != *"copied public."* ]]
	[[ "$output" != *"keys and indexes built"* ]]
	[ "$(psql_target "$fkeys")" -eq "$source_fkeys" ]
	# the keys are those of the first invocation, not built again
	[ "$(psql_target "SELECT string_agg(conname || ':' || oid, ',' ORDER BY conname) FROM pg_constraint WHERE contype = 'p'")" = "$pkeys" ]
	stream_compare_verify
}

@test "snapshot.split_bytes 0 never splits; a value that is not a byte count is refused" {
	source_init 1 0
	run -0 trellara-snapshot --config "$FLOW_FILE" --create-tables
	[[ "$output" == *"copied public.pgbench_accounts: 100000 rows"$'\n'* ]]
	[ "$(ranges "count(*)")" -eq 0 ]
	write_flow_file "$FLOW_FILE" --tables "$TABLES" --set snapshot.split_bytes=1GB
	run -78 trellara-snapshot --config "$FLOW_FILE"
	[[ "$output" == *"split_bytes"* ]]
	write_flow_file "$FLOW_FILE" --tables "$TABLES" --set snapshot.split_bytes=-1
	run -78 trellara-snapshot --config "$FLOW_FILE"
	[[ "$output" == *"split_bytes"* ]]
}

# ev: partitioned in two levels; ev_big (about 9 MB, more than SPLIT) and
# three small leaves, one of them empty
PARTS=(ev ev_big ev_2 ev_3 ev_4)
part_init() {
	psql_source <<'SQL'
CREATE TABLE ev (id bigint NOT NULL, k int NOT NULL, pad text, PRIMARY KEY (id, k)) PARTITION BY LIST (k);
CREATE TABLE ev_big PARTITION OF ev FOR VALUES IN (1);
CREATE TABLE ev_2 PARTITION OF ev FOR VALUES IN (2);
CREATE TABLE ev_sub PARTITION OF ev FOR VALUES IN (3, 4) PARTITION BY LIST (k);
CREATE TABLE ev_3 PARTITION OF ev_sub FOR VALUES IN (3);
CREATE TABLE ev_4 PARTITION OF ev_sub FOR VALUES IN (4);
INSERT INTO ev SELECT g, 1, repeat('x', 100) FROM generate_series(1, 60000) g;
INSERT INTO ev SELECT g, 2, 'y' FROM generate_series(1, 5000) g;
INSERT INTO ev SELECT g, 3, 'z' FROM generate_series(1, 3000) g;
SQL
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE ev WITH (publish_via_partition_root = true)"
	write_flow_file "$FLOW_FILE" --tables "public.ev" --set stream.min_free_bytes=1048576 \
		--set snapshot.split_bytes="$SPLIT" --set snapshot.workers=2
}

# attach_while_paused POINT: the snapshot (--create-tables) stopped at
# pause point POINT while the source's ev gets partition ev_9 with a row;
# then resumed, it must end without a handoff (exit 1); the pause is unset
attach_while_paused() {
	TRELLARA_PAUSE=$1 TRELLARA_PAUSE_DIR=$TEST_DIR bg_start snap trellara-snapshot --config "$FLOW_FILE" --create-tables
	wait_for -t 60 "[ -e '$TEST_DIR/$1.paused' ]"
	psql_source "CREATE TABLE ev_9 (LIKE ev)" "INSERT INTO ev_9 VALUES (1, 9, 'attached')" \
		"ALTER TABLE ev ATTACH PARTITION ev_9 FOR VALUES IN (9)"
	touch "$TEST_DIR/$1.resume"
	bg_wait snap 120
	[ "$BG_STATUS" -eq 1 ]
}

ev_ranges() {
	psql_target "SELECT $1 FROM trellara.snapshot_range_progress WHERE relation = 'public.ev'"
}

@test "a partitioned table larger than split_bytes is split by its leaf partitions, a large leaf by blocks too; killed mid-copy, the resume copies only its unfinished ranges: identical, CONVERGED" {
	part_init
	TRELLARA_FAULT=snapshot.after_range_commit:2 run -137 trellara-snapshot --config "$FLOW_FILE" --create-tables
	[[ "$output" == *"table public.ev: "*" MB in 4 partitions, split into "*" ranges"* ]]
	n=$(ev_ranges "max(n_ranges)")
	# each leaf its ranges, ev_big (more than SPLIT) two or more, the others one each
	[ "$(ev_ranges "count(DISTINCT partition)")" -eq 4 ]
	[ "$(ev_ranges "count(*) FILTER (WHERE partition IS NULL)")" -eq 0 ]
	[ "$(ev_ranges "count(*) FILTER (WHERE partition = 'public.ev_big')")" -ge 2 ]
	[ "$(ev_ranges "count(*) FILTER (WHERE partition <> 'public.ev_big')")" -eq 3 ]
	[ "$(ev_ranges "count(*)")" -eq "$n" ]
	done_before=$(ev_ranges "count(*) FILTER (WHERE state = 'copied')")
	[ "$done_before" -ge 2 ]
	[ "$done_before" -lt "$n" ]
	run -0 trellara-snapshot --config "$FLOW_FILE" --create-tables
	redone=$((n - done_before))
	[[ "$output" == *"copied public.ev: 68000 rows in $n ranges ($redone copied now, $done_before kept)"* ]]
	[ "$(grep -c 'public.ev: range [0-9]*/[0-9]*: .* rows copied' <<<"$output")" -eq "$redone" ]
	[ "$(ev_ranges "sum(copied_rows)")" -eq 68000 ]
	# rows move between partitions on the source; streamed through the parent
	psql_source "UPDATE ev SET k = 4 WHERE k = 3 AND id <= 10" "INSERT INTO ev VALUES (70000, 1, 'new')"
	stream_compare_verify "${PARTS[@]}"
	[ "$(psql_target "SELECT count(*) FROM ev_4")" -eq 10 ]
}

@test "a partition attached between the ranges of a partitioned table's split copy: not handed off; the next run splits it anew and copies it whole: identical" {
	part_init
	# one worker, stopped after its first range: the ranges after it begin
	# with the partition attached, each consistent on its own
	write_flow_file "$FLOW_FILE" --tables "public.ev" --set stream.min_free_bytes=1048576 \
		--set snapshot.split_bytes="$SPLIT" --set snapshot.workers=1
	attach_while_paused snapshot.after_range_commit
	grep -q "table public.ev: a partition was attached or detached during its copy: not handed off" "$TEST_DIR/snap.log"
	grep -q "NOT handed off public.ev: its schema changed during the copy" "$TEST_DIR/snap.log"
	[ "$(psql_target "SELECT state FROM trellara.snapshot_table_progress WHERE relation = 'public.ev'")" = schema_changed ]
	n=$(ev_ranges "max(n_ranges)")
	# the target gets the partition too, as an operator would
	psql_target "CREATE TABLE ev_9 (LIKE ev)" "ALTER TABLE ev ATTACH PARTITION ev_9 FOR VALUES IN (9)"
	run -0 trellara-snapshot --config "$FLOW_FILE" --create-tables
	[[ "$output" == *"its partitions are not those an earlier invocation split it by"* ]]
	m=$(ev_ranges "max(n_ranges)")
	[ "$m" -eq $((n + 1)) ]
	[[ "$output" == *"copied public.ev: 68001 rows in $m ranges ($m copied now, 0 kept)"* ]]
	assert_tables_equal "${PARTS[@]}" ev_9
	[ "$(psql_target "SELECT pad FROM ev WHERE k = 9")" = attached ]
}

@test "a partition attached while a partitioned table is copied whole through its parent (not split): not handed off; the next run copies it with the partition's rows: identical" {
	part_init
	write_flow_file "$FLOW_FILE" --tables "public.ev" --set stream.min_free_bytes=1048576 --set snapshot.split_bytes=0
	attach_while_paused snapshot.mid_table_copy
	grep -q "NOT handed off public.ev: its schema changed during the copy" "$TEST_DIR/snap.log"
	[ "$(ev_ranges "count(*)")" -eq 0 ]
	psql_target "CREATE TABLE ev_9 (LIKE ev)" "ALTER TABLE ev ATTACH PARTITION ev_9 FOR VALUES IN (9)"
	run -0 trellara-snapshot --config "$FLOW_FILE" --create-tables
	[[ "$output" == *"copied public.ev: 68001 rows"$'\n'* ]]
	assert_tables_equal "${PARTS[@]}" ev_9
}

@test "a split table rewritten on the source between its ranges (VACUUM FULL): the table fails (75) naming the rewrite; the next run copies it: identical" {
	source_init 2
	# one worker, stopped after its first range: VACUUM FULL moves every row to a new filenode
	write_flow_file "$FLOW_FILE" --tables "$TABLES" --set stream.min_free_bytes=1048576 \
		--set snapshot.split_bytes="$SPLIT" --set snapshot.workers=1
	TRELLARA_PAUSE=snapshot.after_range_commit TRELLARA_PAUSE_DIR=$TEST_DIR bg_start snap trellara-snapshot --config "$FLOW_FILE" --create-tables
	wait_for -t 60 "[ -e '$TEST_DIR/snapshot.after_range_commit.paused' ]"
	psql_source "VACUUM FULL pgbench_accounts"
	touch "$TEST_DIR/snapshot.after_range_commit.resume"
	bg_wait snap 120
	[ "$BG_STATUS" -eq 75 ]
	grep -q "FAILED public.pgbench_accounts: the source table was rewritten (VACUUM FULL, CLUSTER, TRUNCATE or a column type change) during its split copy" "$TEST_DIR/snap.log"
	run -0 trellara-snapshot --config "$FLOW_FILE" --create-tables
	[[ "$output" == *"copied public.pgbench_accounts: 200000 rows in "* ]]
	assert_tables_equal pgbench_accounts pgbench_branches pgbench_tellers pgbench_history
}
