#!/usr/bin/env bats
# trellara-capture at its limits, end to end (capture -> stream -> applyd
# -> target): a value far larger than a frame's usual size, two flows
# sharing one spill directory, a transaction with 50 000 subtransactions.

load helpers/common

setup() {
	trellara_setup
	export TRELLARA_STATUS_INTERVAL_MS=200
}

teardown() {
	# a capture held at a pause point lets go, so that it can stop
	[ ! -e "$TEST_DIR/capture.before_commit.paused" ] || touch "$TEST_DIR/capture.before_commit.resume"
	if [[ -z ${BATS_TEST_COMPLETED:-} ]]; then
		local log
		for log in "$TEST_DIR"/*.log; do
			[ -e "$log" ] || continue
			printf '# --- %s (last 8 lines)\n' "${log##*/}"
			tail -n 8 "$log" | sed 's/^/# /'
		done
	fi
	trellara_teardown
}

# alive NAME...: the background processes NAME... are all still running.
alive() {
	local name
	for name in "$@"; do
		kill -0 "$(bg_pid "$name")" 2>/dev/null || return 1
	done
}

# flow_file PATH LETTER: a flow of its own (slot, publication, dataset,
# stream) for table public.LETTER, into this test's target database; every
# flow of a test shares the default spill directory $TEST_DIR/spill.
flow_file() {
	local path=$1 l=$2
	write_flow_file "$path" --tables "public.$l" \
		--set "source.slot=\"slot_$l\"" --set "source.publication=\"pub_$l\"" \
		--set "dataset.id=\"ds_$l\"" --set "stream.path=\"$TEST_DIR/stream_$l\"" \
		--set source.stream_spill_threshold_changes=50 --set source.pgoutput='{streaming: false}' \
		--set stream.min_free_bytes=1048576
}

slot_active() {
	[ "$(psql_source "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$1' AND active")" = 1 ]
}

# the target's checkpoint of dataset DS passed the source's current WAL position
dataset_caught_up() {
	local ds=$1 lsn=$2
	[ "$(psql_target "SELECT coalesce((SELECT applied_through_lsn >= '$lsn' FROM trellara.apply_checkpoint
		WHERE dataset_id = '$ds'), false)")" = t ]
}

@test "a 100 MB bytea value (200 MB of hex text) flows end to end: same md5 on the target" {
	for side in source target; do
		psql_$side "CREATE TABLE blobs (id int PRIMARY KEY, label text, data bytea)"
	done
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE blobs"
	write_flow_file "$FLOW_FILE" --tables public.blobs --set stream.min_free_bytes=1048576
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "slot_active $SLOT_NAME"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	psql_source "INSERT INTO blobs VALUES (1, 'before', '\\x0102')"
	# 104857600 bytes: 3276800 times a 32-byte random text
	psql_source "INSERT INTO blobs SELECT 2, 'big', convert_to(repeat(md5(random()::text), 3276800), 'SQL_ASCII')"
	psql_source "INSERT INTO blobs VALUES (3, 'after', '\\x03')"
	[ "$(psql_source "SELECT length(data) FROM blobs WHERE id = 2")" -eq 104857600 ]
	lsn=$(source_flushed_lsn)
	# done when the target has it all, or as soon as capture gave up
	wait_for -t 300 -m "the target caught up with $lsn (or capture exited)" \
		"! alive capture applyd || dataset_caught_up $DATASET_ID $lsn"
	alive capture applyd
	# every row, the big one's md5 and length among them (each side's 100 MB
	# read once)
	rows="SELECT string_agg(id || ' ' || label || ' ' || md5(data) || ' ' || length(data), ',' ORDER BY id) FROM blobs"
	src=$(psql_source "$rows")
	tgt=$(psql_target "$rows")
	echo "source: $src, target: $tgt"
	[[ $src == *",2 big "*" 104857600,"* ]]
	[ "$src" = "$tgt" ]
	# memory: a few copies of the one 200 MB change, not more
	for p in capture applyd; do
		hwm_kb=$(awk '/^VmHWM:/ {print $2}' "/proc/$(bg_pid $p)/status")
		echo "# $p peak RSS: $hwm_kb kB" >&3
		[ "$hwm_kb" -lt $((1536 * 1024)) ]
	done
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
	[ "$BG_STATUS" -eq 0 ]
	# nothing left in the spill directory
	[ -z "$(ls "$TEST_DIR/spill")" ]
}

# Two flows on one source database, one table each, sharing the spill
# directory.  A large transaction T writes both tables, so both flows
# decode (and spill) the same xid: not streamed by the server (a streamed
# one is written once, with no spill file).
two_flows() {
	for side in source target; do
		psql_$side "CREATE TABLE a (id int PRIMARY KEY, v text)" "CREATE TABLE b (id int PRIMARY KEY, v text)"
	done
	psql_source "CREATE PUBLICATION pub_a FOR TABLE a" "CREATE PUBLICATION pub_b FOR TABLE b"
	flow_file "$TEST_DIR/a.yml" a
	flow_file "$TEST_DIR/b.yml" b
}

big_transaction() {
	psql_source "BEGIN" \
		"INSERT INTO a SELECT g, 'a' || g FROM generate_series(1, 4000) g" \
		"INSERT INTO b SELECT g, 'b' || g FROM generate_series(1, 4000) g" \
		"UPDATE a SET v = v || '!' WHERE id % 3 = 0" \
		"UPDATE b SET v = v || '?' WHERE id % 5 = 0" \
		"COMMIT"
}

# both_caught_up PROCESS...: both flows caught up (or one of PROCESS... exited)
both_caught_up() {
	local lsn
	lsn=$(source_flushed_lsn)
	wait_for -t 120 -m "both flows caught up with $lsn (or one of $* exited)" \
		"! alive $* || { dataset_caught_up ds_a $lsn && dataset_caught_up ds_b $lsn; }"
	alive "$@"
}

@test "two flows share a spill directory: one restarting while the other holds a spilled transaction leaves it alone" {
	two_flows
	# flow a has run before (its slot exists); it is restarted below
	bg_start capture_a trellara-capture --config "$TEST_DIR/a.yml" --start-now
	wait_for "slot_active slot_a"
	bg_stop capture_a TERM
	[ "$BG_STATUS" -eq 0 ]
	TRELLARA_PAUSE=capture.before_commit TRELLARA_PAUSE_DIR=$TEST_DIR \
		bg_start capture_b trellara-capture --config "$TEST_DIR/b.yml" --start-now
	wait_for "slot_active slot_b"
	bg_start applyd_a trellara-applyd --config "$TEST_DIR/a.yml"
	bg_start applyd_b trellara-applyd --config "$TEST_DIR/b.yml"
	big_transaction
	# flow b holds T's commit; its changes sit in the spill directory
	wait_for -m "capture b paused at T's commit" "[ -e '$TEST_DIR/capture.before_commit.paused' ]"
	held=$(cd "$TEST_DIR/spill" && ls)
	[ -n "$held" ]
	echo "held by flow b: $held"
	# flow a starts again (its start-up cleanup runs) and writes T itself
	bg_start capture_a2 trellara-capture --config "$TEST_DIR/a.yml" --start-now
	wait_for "slot_active slot_a"
	lsn=$(source_flushed_lsn)
	wait_for -t 60 -m "flow a caught up with $lsn" "dataset_caught_up ds_a $lsn"
	# flow b's spill files are all still there
	for f in $held; do
		[ -e "$TEST_DIR/spill/$f" ] || {
			echo "flow b's spill file \"$f\" is gone"
			false
		}
	done
	touch "$TEST_DIR/capture.before_commit.resume"
	both_caught_up capture_a2 capture_b applyd_a applyd_b
	assert_tables_equal a b
	[ "$(psql_target "SELECT count(*) FROM b")" -eq 4000 ]
	bg_stop capture_b TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture_a2 TERM
	[ "$BG_STATUS" -eq 0 ]
	[ -z "$(ls "$TEST_DIR/spill")" ]
}

@test "two flows share a spill directory: the same transaction spilled by both at once arrives whole in each" {
	two_flows
	bg_start capture_a trellara-capture --config "$TEST_DIR/a.yml" --start-now
	wait_for "slot_active slot_a"
	TRELLARA_PAUSE=capture.before_commit TRELLARA_PAUSE_DIR=$TEST_DIR \
		bg_start capture_b trellara-capture --config "$TEST_DIR/b.yml" --start-now
	wait_for "slot_active slot_b"
	bg_start applyd_a trellara-applyd --config "$TEST_DIR/a.yml"
	bg_start applyd_b trellara-applyd --config "$TEST_DIR/b.yml"
	big_transaction
	wait_for -m "capture b paused at T's commit" "[ -e '$TEST_DIR/capture.before_commit.paused' ]"
	# flow a writes T while flow b holds its spilled copy of T
	lsn=$(source_flushed_lsn)
	wait_for -t 60 -m "flow a caught up with $lsn (or flow a stopped)" \
		"! alive capture_a applyd_a || dataset_caught_up ds_a $lsn"
	touch "$TEST_DIR/capture.before_commit.resume"
	both_caught_up capture_a capture_b applyd_a applyd_b
	assert_tables_equal a b
	bg_stop capture_b TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture_a TERM
	[ "$BG_STATUS" -eq 0 ]
}

@test "a streamed transaction with 50 000 subtransactions (some rolled back) arrives identical" {
	for side in source target; do
		psql_$side "CREATE TABLE sp (id int PRIMARY KEY, v text)"
	done
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE sp"
	write_flow_file "$FLOW_FILE" --tables public.sp --set stream.min_free_bytes=1048576
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "slot_active $SLOT_NAME"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	# one transaction; every BEGIN ... EXCEPTION block is a subtransaction
	# with one insert; every 10th is rolled back by its exception
	psql_source <<'SQL'
DO $$
BEGIN
	FOR i IN 1..50000 LOOP
		BEGIN
			INSERT INTO sp VALUES (i, 'v' || i);
			IF i % 10 = 0 THEN
				RAISE EXCEPTION 'roll back %', i;
			END IF;
		EXCEPTION WHEN raise_exception THEN
			NULL;
		END;
	END LOOP;
END
$$;
SQL
	[ "$(psql_source "SELECT count(*) FROM sp")" -eq 45000 ]
	lsn=$(source_flushed_lsn)
	wait_for -t 120 -m "the target caught up with $lsn (or capture exited)" \
		"! alive capture applyd || dataset_caught_up $DATASET_ID $lsn"
	alive capture applyd
	assert_tables_equal sp
	# the server streamed it while in progress (the path with subtransactions)
	wait_for -m "a streamed transaction counted for $SLOT_NAME" \
		"[ \"\$(psql_source \"SELECT stream_txns > 0 FROM pg_stat_replication_slots WHERE slot_name = '$SLOT_NAME'\")\" = t ]"
	run -0 trellara-stream read --config "$FLOW_FILE" --format json
	# written once: pending chunks as the server streamed it; the manifest's
	# changes in use are exactly the 45 000 rows
	[ "$(jq -s '[.[] | select(.type == "pending_chunk")] | length' <<<"$output")" -gt 0 ]
	[ "$(jq -s '[.[] | select(.type == "manifest") | .total_changes] | add' <<<"$output")" -eq 45000 ]
	[ "$(jq -s '[.[] | select(.type == "txn") | .changes[]] | length' <<<"$output")" -eq 0 ]
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
	[ "$BG_STATUS" -eq 0 ]
}
