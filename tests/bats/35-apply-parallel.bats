#!/usr/bin/env bats
# Parallel apply (apply.workers > 1) against real PostgreSQL: a fence and
# a reseed that land exactly, batches that overlap, the dependency tracker
# making a conflicting batch wait, lock waits the tracker cannot know
# about, and a COMMIT that fails with later batches in flight.  (pgbench
# with applyd killed -9 five times under apply.workers: 4 is in
# 30-apply.bats.)

load helpers/common

setup() {
	trellara_setup
	export TRELLARA_STATUS_INTERVAL_MS=200 TRELLARA_RECONNECT_BASE_MS=100
	LOCKER_PID=
}

teardown() {
	stop_locker
	trellara_teardown
}

PGBENCH_TABLES="public.pgbench_accounts,public.pgbench_branches,public.pgbench_tellers,public.pgbench_history"

# pgbench tables on both sides, identical initial data (pgbench -i is
# deterministic), the publication, the flow file (further arguments go to
# write_flow_file)
pgbench_both() {
	local scale=$1
	shift
	pgbench -q -i -s "$scale" -h "$SOURCE_HOST" -p "$SOURCE_PORT" "$SOURCE_DB" >/dev/null 2>&1
	pgbench -q -i -s "$scale" -h "$TARGET_HOST" -p "$TARGET_PORT" "$TARGET_DB" >/dev/null 2>&1
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history"
	write_flow_file "$FLOW_FILE" --tables "$PGBENCH_TABLES" --set stream.min_free_bytes=1048576 "$@"
}

pgbench_compare() {
	# pgbench_history has no key: compared as a sorted multiset
	assert_tables_equal pgbench_accounts pgbench_branches pgbench_tellers pgbench_history
}

start_capture() {
	bg_start capture trellara-capture --config "$FLOW_FILE" "$@"
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
}

# until capture has made everything the source wrote durable in the stream
captured() {
	local lsn
	lsn=$(source_flushed_lsn)
	wait_for -m "capture confirmed $lsn" \
		"[ \"\$(psql_source \"SELECT confirmed_flush_lsn >= '$lsn' FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME'\")\" = t ]"
}

# parallel_counts LOG: the numbers of the log's last "applyd parallel
# apply:" line: connections, overlapped, dependency waits, fall backs
parallel_counts() {
	grep -o 'applyd parallel apply: [0-9]* connections, [0-9]* batches committed while an earlier one was in flight, [0-9]* waits for an earlier batch holding a key, [0-9]* fall backs to one batch at a time' "$1" |
		tail -1 | tr -cs '0-9' ' '
	echo
}

quarantined() {
	psql_target "SELECT count(*) FROM trellara.quarantine"
}

checkpoint() {
	psql_target "SELECT $1 FROM trellara.apply_checkpoint"
}

# a target session the test drives step by step (as in 31-apply-correctness.bats)
start_locker() {
	mkfifo "$TEST_DIR/locker.fifo"
	"$(trellara_pg_psql_bin)" -X -qAt -d "$TARGET_URL&application_name=locker_0" -f "$TEST_DIR/locker.fifo" \
		>"$TEST_DIR/locker.log" 2>&1 3>&- &
	LOCKER_PID=$!
	exec 7>"$TEST_DIR/locker.fifo"
	LOCKER_STEP=0
	locker "SET deadlock_timeout = '10min';"
}

locker() {
	LOCKER_STEP=$((LOCKER_STEP + 1))
	printf '%s\n' "$1 SET application_name = 'locker_$LOCKER_STEP';" >&7
	wait_for -m "locker step $LOCKER_STEP: $1" "[ \"\$(psql_target \"SELECT count(*) FROM pg_stat_activity WHERE application_name = 'locker_$LOCKER_STEP' AND state LIKE 'idle%'\")\" = 1 ]"
}

stop_locker() {
	[[ -n ${LOCKER_PID:-} ]] || return 0
	exec 7>&-
	wait "$LOCKER_PID" 2>/dev/null || true
	LOCKER_PID=
}

# a session of applyd waits for the locker's transaction
applyd_waits_for_locker() {
	wait_for -m "applyd waiting for the locker's transaction" "[ \"\$(psql_target \"SELECT count(*) FROM pg_locks l
		JOIN pg_stat_activity a ON a.pid = l.pid JOIN pg_stat_activity k ON k.application_name LIKE 'locker%'
		WHERE a.application_name = 'trellara-applyd' AND NOT l.granted AND l.locktype = 'transactionid'
		AND l.transactionid = k.backend_xid\")\" -ge 1 ]"
}

@test "a fence lands exactly at its LSN with apply.workers: 4" {
	pgbench_both 1
	for side in source target; do
		psql_$side "CREATE TABLE ticks (n int PRIMARY KEY)"
	done
	psql_source "ALTER PUBLICATION $PUBLICATION_NAME ADD TABLE ticks"
	write_flow_file "$FLOW_FILE" --tables "$PGBENCH_TABLES,public.ticks" --set stream.min_free_bytes=1048576 \
		--set apply.workers=4 --set apply.batch_transactions=20
	start_capture --start-now
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	# unthrottled, until verify's fence below has landed under it
	bg_start load pgbench_until_stopped -c 3 -j 2
	wait_for -t 60 -m "applyd applies pgbench transactions" '[ "$(applied_transactions)" -gt 10 ]'
	# applyd stops; the source goes on writing.  Ticks 1..20 commit before
	# the fence's LSN, ticks 21..40 after it; pgbench commits on either side
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	for i in $(seq 1 20); do echo "INSERT INTO ticks VALUES ($i);"; done | psql_source
	fence=$(source_flushed_lsn)
	for i in $(seq 21 40); do echo "INSERT INTO ticks VALUES ($i);"; done | psql_source
	psql_target "INSERT INTO trellara.apply_fence (source_id, dataset_id, fence_lsn, state, requested_by)
		VALUES ('$SOURCE_ID', '$DATASET_ID', '$fence', 'requested', 'bats')"
	captured
	# a backlog of many batches of pgbench, applied in parallel up to the fence
	bg_start applyd2 trellara-applyd --config "$FLOW_FILE"
	wait_for -t 60 -m "applyd held at the fence" '[ "$(psql_target "SELECT state FROM trellara.apply_fence")" = held ]'
	# everything before the fence, nothing after it
	[ "$(psql_target "SELECT count(*) || ' ' || min(n) || ' ' || max(n) FROM ticks")" = "20 1 20" ]
	[ "$(psql_target "SELECT last_commit_lsn < '$fence' AND applied_through_lsn <= '$fence' FROM trellara.apply_checkpoint")" = t ]
	[ "$(psql_target "SELECT held_applied_lsn = (SELECT applied_through_lsn FROM trellara.apply_checkpoint) FROM trellara.apply_fence")" = t ]
	grep -q "held at fence $fence" "$TEST_DIR/applyd2.log"
	psql_target "DELETE FROM trellara.apply_fence"
	wait_for -t 60 -m "ticks after the fence applied" '[ "$(psql_target "SELECT count(*) FROM ticks")" -eq 40 ]'
	# verify's own fence, while pgbench goes on writing
	kill -0 "$(bg_pid load)"
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ "$output" == *"result: CONVERGED"* ]]
	[ "$(grep -c '^table .*checksums match' <<<"$output")" -eq 5 ]
	load_stop
	[ "$BG_STATUS" -eq 0 ]
	caught_up
	pgbench_compare
	assert_tables_equal ticks
	[ "$(quarantined)" -eq 0 ]
	bg_stop applyd2 TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
}

@test "a reseed lands exactly with apply.workers: 4" {
	pgbench -q -i -s 1 -h "$SOURCE_HOST" -p "$SOURCE_PORT" "$SOURCE_DB" >/dev/null 2>&1
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history"
	write_flow_file "$FLOW_FILE" --tables "$PGBENCH_TABLES" --set stream.min_free_bytes=1048576 \
		--set apply.workers=4 --set apply.batch_transactions=20
	run -0 trellara-snapshot --config "$FLOW_FILE" --create-tables
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	# unthrottled, until the reseed is done
	bg_start load pgbench_until_stopped -c 3 -j 2
	wait_for -t 60 -m "applyd applies pgbench transactions" '[ "$(applied_transactions)" -gt 10 ]'
	# damage the target copy with a row pgbench never touches (a changed
	# value of a teller would be overwritten by its next update anyway);
	# the reseed repairs it without stopping the flow
	psql_target "INSERT INTO pgbench_tellers VALUES (999, 1, 0, 'extra')"
	run -0 trellara reseed --config "$FLOW_FILE" --table public.pgbench_tellers
	[[ "$output" == *"reseeded public.pgbench_tellers"* ]]
	[ "$(psql_target "SELECT count(*) FROM trellara.apply_fence")" -eq 0 ]
	kill -0 "$(bg_pid load)" # the reseed ran under load
	load_stop
	[ "$BG_STATUS" -eq 0 ]
	caught_up 180
	# the extra row is gone, and every change after the copy's watermark is
	# there exactly once
	[ "$(psql_target "SELECT count(*) FROM pgbench_tellers WHERE tid = 999")" -eq 0 ]
	pgbench_compare
	[ "$(quarantined)" -eq 0 ]
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ "$output" == *"result: CONVERGED"* ]]
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	read -r connections _ < <(parallel_counts "$TEST_DIR/applyd.log")
	[ "$connections" -eq 4 ]
	bg_stop capture TERM
}

@test "parallel batches overlap and the tracker makes a conflicting batch wait" {
	for side in source target; do
		psql_$side "CREATE TABLE items (id int PRIMARY KEY, v text)" "CREATE TABLE counter (id int PRIMARY KEY, n bigint)"
	done
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE items, counter"
	write_flow_file "$FLOW_FILE" --tables "public.items,public.counter" --set stream.min_free_bytes=1048576 \
		--set apply.workers=4 --set apply.batch_transactions=25
	start_capture --start-now
	# 1. inserts of distinct keys, one per transaction: no batch touches a
	# key of another, every batch may run beside the ones before it
	for i in $(seq 1 500); do echo "INSERT INTO items VALUES ($i, 'item $i');"; done | psql_source
	captured
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	caught_up
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	assert_tables_equal items
	read -r connections overlapped waits fallbacks < <(parallel_counts "$TEST_DIR/applyd.log")
	[ "$connections" -eq 4 ]
	[ "$overlapped" -gt 0 ]
	[ "$waits" -eq 0 ]
	[ "$fallbacks" -eq 0 ]
	# 2. every transaction updates the one counter row: every batch holds
	# its key, so each next batch waits for the one before
	psql_source "INSERT INTO counter VALUES (1, 0)"
	for _ in $(seq 1 500); do echo "UPDATE counter SET n = n + 1 WHERE id = 1;"; done | psql_source
	captured
	bg_start applyd2 trellara-applyd --config "$FLOW_FILE"
	caught_up
	bg_stop applyd2 TERM
	[ "$BG_STATUS" -eq 0 ]
	assert_tables_equal items counter
	[ "$(psql_target "SELECT n FROM counter")" -eq 500 ]
	read -r connections overlapped waits fallbacks < <(parallel_counts "$TEST_DIR/applyd2.log")
	[ "$waits" -gt 0 ]
	[ "$fallbacks" -eq 0 ]
	[ "$(quarantined)" -eq 0 ]
	bg_stop capture TERM
}

# A unique column the tracker does not follow (only replica identity keys
# are tracked): the delete of the row holding 'c<i>' carries only its key,
# so the batch that inserts another row with 'c<i>' runs beside it.  Its
# insert waits for the deleting batch's transaction (the unique check sees
# a row deleted by a transaction in progress), and that batch's COMMIT is
# sent once the inserting batch has been sent, without reading its
# results: the wait ends with that commit and the insert succeeds.  (Had
# the insert run first, it would fail with 23505 and the batches would be
# applied again one at a time: the same end.)
@test "a unique value traded between batches the tracker does not know about: the later batch waits, the target ends identical" {
	for side in source target; do
		psql_$side "CREATE TABLE uq (id int PRIMARY KEY, code text NOT NULL UNIQUE)"
	done
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE uq"
	write_flow_file "$FLOW_FILE" --tables public.uq --set stream.min_free_bytes=1048576 \
		--set apply.workers=2 --set apply.batch_transactions=1
	start_capture --start-now
	psql_source "INSERT INTO uq SELECT g, 'c' || g FROM generate_series(1, 30) g"
	for i in $(seq 1 30); do
		echo "DELETE FROM uq WHERE id = $i;"
		echo "INSERT INTO uq VALUES ($((1000 + i)), 'c$i');"
	done | psql_source
	captured
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	caught_up
	assert_tables_equal uq
	[ "$(psql_target "SELECT count(*) FROM uq WHERE id > 1000")" -eq 30 ]
	[ "$(quarantined)" -eq 0 ]
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	read -r connections overlapped waits fallbacks < <(parallel_counts "$TEST_DIR/applyd.log")
	[ "$connections" -eq 2 ]
	[ "$overlapped" -gt 0 ]
	bg_stop capture TERM
}

@test "a lock held on the target outside the tracker's knowledge ends in a serial retry, not a hang" {
	for side in source target; do
		psql_$side "CREATE TABLE accounts (id int PRIMARY KEY, v text)"
	done
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE accounts"
	write_flow_file "$FLOW_FILE" --tables public.accounts --set stream.min_free_bytes=1048576 \
		--set apply.workers=2 --set apply.batch_transactions=1
	start_capture --start-now
	psql_source "INSERT INTO accounts SELECT g, 'v' FROM generate_series(1, 40) g"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	caught_up
	bg_stop applyd TERM
	start_locker
	locker "BEGIN; SELECT id FROM accounts WHERE id = 5 FOR UPDATE;"
	for i in $(seq 1 40); do echo "UPDATE accounts SET v = 'changed $i' WHERE id = $i;"; done | psql_source
	captured
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	# the batch that updates row 5 waits for the locker beside other
	# batches; the session's lock_timeout ends the wait, what did not
	# commit is applied again one batch at a time
	wait_for -t 60 -m "the parallel batch's lock wait timed out" \
		"grep -q 'parallel apply: the batch at stream offsets .* failed (SQLSTATE 55P03)' '$TEST_DIR/applyd.log'"
	# one batch at a time, the wait is not bounded: applyd waits again
	applyd_waits_for_locker
	[ "$(psql_target "SELECT v FROM accounts WHERE id = 5")" = v ]
	locker "COMMIT;"
	caught_up
	assert_tables_equal accounts
	[ "$(quarantined)" -eq 0 ]
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	read -r connections overlapped waits fallbacks < <(parallel_counts "$TEST_DIR/applyd.log")
	[ "$fallbacks" -ge 1 ]
	bg_stop capture TERM
}

# A batch whose COMMIT fails while the next batch is in flight: a
# target-only row holds a value of a DEFERRABLE INITIALLY DEFERRED unique
# constraint (its recheck trigger enabled ALWAYS), so the source transaction that inserts the same value passes
# its statement and fails only at COMMIT (23505), with the later batches'
# statements already sent on the other connection.  First applyd is
# killed (SIGKILL) at that very moment (applyd.after_commit_failed); the
# restarted one rolls the later batches back, finds the culprit, and
# quarantines exactly it: every transaction before it is applied once,
# none after it; after the repair and a replay the target is identical.
@test "a COMMIT that fails with later batches in flight: killed there, then the culprit alone is quarantined, nothing lost or doubled" {
	for side in source target; do
		psql_$side "CREATE TABLE items (id int PRIMARY KEY, code text, CONSTRAINT items_code UNIQUE (code) DEFERRABLE INITIALLY DEFERRED)"
	done
	# the deferred check is an internal trigger: in the replica role it
	# fires only when enabled ALWAYS (it is no user trigger: the table still
	# folds and runs in parallel)
	psql_target "DO \$\$ DECLARE t name; BEGIN SELECT tgname INTO STRICT t FROM pg_trigger WHERE tgrelid = 'items'::regclass AND tgisinternal; EXECUTE format('ALTER TABLE items ENABLE ALWAYS TRIGGER %I', t); END \$\$" \
		"INSERT INTO items VALUES (-1, 'code 60')"
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE items"
	write_flow_file "$FLOW_FILE" --tables public.items --set stream.min_free_bytes=1048576 \
		--set apply.workers=2 --set apply.batch_transactions=1
	start_capture --start-now
	for i in $(seq 1 120); do echo "INSERT INTO items VALUES ($i, 'code $i');"; done | psql_source
	captured
	TRELLARA_FAULT=applyd.after_commit_failed bg_start applyd trellara-applyd --config "$FLOW_FILE"
	bg_wait applyd 60
	[ "$BG_STATUS" -eq 137 ] # SIGKILL, at the point
	# killed there: the transactions before 60 committed, nothing from 60 on
	[ "$(psql_target "SELECT count(*) FROM items WHERE id > 0")" -eq 59 ]
	[ "$(psql_target "SELECT max(id) FROM items")" -eq 59 ]
	[ "$(quarantined)" -eq 0 ]
	bg_start applyd2 trellara-applyd --config "$FLOW_FILE"
	bg_wait applyd2 60
	[ "$BG_STATUS" -eq 1 ] # a transaction quarantined: applyd stops
	[ "$(psql_target "SELECT reason FROM trellara.quarantine")" = constraint_violation ]
	[ "$(psql_target "SELECT commit_lsn FROM trellara.quarantine")" = \
		"$(psql_target "SELECT commit_lsn FROM trellara.quarantine WHERE reason = 'constraint_violation'")" ]
	[ "$(psql_target "SELECT count(*) FROM items WHERE id > 0")" -eq 59 ]
	# the restarted one met the same failure with the next batch in flight
	grep -q "parallel apply: the batch at stream offsets [0-9.]* failed (SQLSTATE 23505)" "$TEST_DIR/applyd2.log"
	# repair the divergence, release the culprit, apply the rest
	psql_target "DELETE FROM items WHERE id = -1"
	run -1 trellara-quarantine list --config "$FLOW_FILE" --format json
	[ "$(jq -r '.quarantine[0].detail' <<<"$output")" = 'SQLSTATE 23505: duplicate key value violates unique constraint "items_code"' ]
	xid=$(jq -r '.quarantine[0].transaction_id' <<<"$output")
	lsn=$(jq -r '.quarantine[0].commit_lsn' <<<"$output")
	run -0 trellara-quarantine replay-ready --config "$FLOW_FILE" --transaction-id "$xid" --commit-lsn "$lsn"
	bg_start applyd3 trellara-applyd --config "$FLOW_FILE"
	caught_up
	assert_tables_equal items
	[ "$(psql_target "SELECT count(*) FROM items")" -eq 120 ]
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ "$output" == *"result: CONVERGED"* ]]
	bg_stop applyd3 TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
}
