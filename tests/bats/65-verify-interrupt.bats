#!/usr/bin/env bats
# trellara-verify when the network goes away under it (trellara-verify(1)
# INTERRUPTIONS AND RETRIES): a pass that loses the source or the target
# records nothing and starts again from scratch after a backoff, up to
# --max-attempts; a signal ends it at once with 75, also while it waits.
# The pause point verify.compare holds a pass with its fence set, just
# before it compares the table, so that a test can cut a connection there.

load helpers/common

setup() {
	trellara_setup
	export TRELLARA_STATUS_INTERVAL_MS=200
	psql_source "CREATE TABLE accounts (id int PRIMARY KEY, balance int)" \
		"INSERT INTO accounts SELECT g, g FROM generate_series(1, 500) g" \
		"CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE accounts"
	write_flow_file "$FLOW_FILE" --tables public.accounts --set stream.min_free_bytes=1048576
	trellara-snapshot --config "$FLOW_FILE" --create-tables >/dev/null
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	caught_up
}

teardown() {
	# a test that failed with the target stopped: it comes back for the
	# harness's cleanup (its databases)
	psql_admin target "SELECT 1" >/dev/null 2>&1 || trellara_pg_start "$TARGET_PGDATA"
	bg_stop applyd TERM 2>/dev/null || true
	bg_stop capture TERM 2>/dev/null || true
	trellara_teardown
}

run_state() {
	psql_target "SELECT state FROM trellara.snapshot_runs"
}

# start_paused_verify [ARG...]: verify in the background ($TEST_DIR/verify.log),
# held at verify.compare with its fence set; first delay between passes 1 s
start_paused_verify() {
	bg_start verify env TRELLARA_PAUSE=verify.compare TRELLARA_PAUSE_DIR="$TEST_DIR" TRELLARA_RECONNECT_BASE_MS=1000 \
		trellara-verify --config "$FLOW_FILE" "$@"
	wait_for -t 60 -m "verify at verify.compare" "[ -e '$TEST_DIR/verify.compare.paused' ]"
	[ "$(psql_target "SELECT requested_by FROM trellara.apply_fence")" = verify ]
}

retries() {
	grep -c "starting the pass again" "$TEST_DIR/verify.log"
}

@test "verify's source session terminated mid-pass: the pass starts again and answers CONVERGED, once" {
	[ "$(run_state)" = streaming ]
	start_paused_verify
	[ "$(psql_source "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = 'trellara-verify' AND backend_type = 'client backend' AND datname = current_database()")" -eq 1 ]
	touch "$TEST_DIR/verify.compare.resume"
	bg_wait verify 120
	[ "$BG_STATUS" -eq 0 ]
	[ "$(retries)" -eq 1 ]
	grep -q "lost the source connection (.*terminating connection due to administrator command.*); starting the pass again in [0-9.]* s, attempt 2 of 5" "$TEST_DIR/verify.log"
	[ "$(grep -c "^result: CONVERGED" "$TEST_DIR/verify.log")" -eq 1 ]
	[ "$(grep -c "^table public.accounts: 500 rows, checksums match" "$TEST_DIR/verify.log")" -eq 1 ]
	[ "$(run_state)" = verified ]
	[ "$(psql_target "SELECT count(*) FROM trellara.apply_fence")" -eq 0 ]
	[ "$(psql_source "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'trellara_verify_%'")" -eq 0 ]
}

@test "the target stopped mid-pass and started during the backoff: CONVERGED" {
	start_paused_verify
	trellara_pg_stop "$TARGET_PGDATA"
	touch "$TEST_DIR/verify.compare.resume"
	wait_for -t 30 -m "verify backs off" '[ "$(retries)" -ge 1 ]'
	trellara_pg_start "$TARGET_PGDATA"
	bg_wait verify 180
	[ "$BG_STATUS" -eq 0 ]
	grep -q "lost the target connection" "$TEST_DIR/verify.log"
	[ "$(grep -c "^result: CONVERGED" "$TEST_DIR/verify.log")" -eq 1 ]
	[ "$(run_state)" = verified ]
	[ "$(psql_target "SELECT count(*) FROM trellara.apply_fence")" -eq 0 ]
	# applyd goes on after the fence
	psql_source "UPDATE accounts SET balance = 0 WHERE id = 1"
	caught_up
	[ "$(psql_target "SELECT balance FROM accounts WHERE id = 1")" -eq 0 ]
}

@test "the target stays down: --max-attempts 2 passes, then exit 69 naming the target; nothing recorded, and its fence holds nobody" {
	start_paused_verify --max-attempts 2
	trellara_pg_stop "$TARGET_PGDATA"
	touch "$TEST_DIR/verify.compare.resume"
	bg_wait verify 60
	[ "$BG_STATUS" -eq 69 ]
	[ "$(retries)" -eq 1 ]
	grep -q "attempt 2 of 2" "$TEST_DIR/verify.log"
	grep -q "the target is unavailable after 2 attempts: cannot connect to the target database" "$TEST_DIR/verify.log"
	run -1 grep -q "^result:" "$TEST_DIR/verify.log"
	trellara_pg_start "$TARGET_PGDATA"
	[ "$(run_state)" = streaming ]
	# the fence verify could not delete is still there, but its session is
	# gone: applyd does not hold for it
	[ "$(psql_target "SELECT requested_by FROM trellara.apply_fence")" = verify ]
	psql_source "UPDATE accounts SET balance = 0 WHERE id = 2"
	caught_up 120
	[ "$(psql_target "SELECT balance FROM accounts WHERE id = 2")" -eq 0 ]
	# and the next verify replaces it
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ $output == *"result: CONVERGED"* ]]
	[ "$(psql_target "SELECT count(*) FROM trellara.apply_fence")" -eq 0 ]
}

@test "SIGTERM while verify waits between passes (the target down): exit 75 within 10 s, nothing recorded" {
	trellara_pg_stop "$TARGET_PGDATA"
	bg_start verify env TRELLARA_RECONNECT_BASE_MS=4000 trellara-verify --config "$FLOW_FILE"
	wait_for -t 30 -m "verify backs off" '[ "$(retries)" -ge 1 ]'
	kill -TERM "$(bg_pid verify)"
	bg_wait verify 10
	[ "$BG_STATUS" -eq 75 ]
	run -1 grep -q "^result:" "$TEST_DIR/verify.log"
	trellara_pg_start "$TARGET_PGDATA"
	[ "$(run_state)" = streaming ]
	[ "$(psql_target "SELECT count(*) FROM trellara.apply_fence")" -eq 0 ]
}

@test "a verify whose session lives keeps its fence: a second verify and a reseed exit 75 and leave it" {
	start_paused_verify
	run -75 trellara-verify --config "$FLOW_FILE" --max-attempts 1
	[[ $output == *"a fence is already set"* ]]
	run -75 trellara reseed --config "$FLOW_FILE" --table public.accounts
	[ "$(psql_target "SELECT requested_by FROM trellara.apply_fence")" = verify ]
	touch "$TEST_DIR/verify.compare.resume"
	bg_wait verify 120
	[ "$BG_STATUS" -eq 0 ]
	[ "$(retries)" -eq 0 ]
	[ "$(psql_target "SELECT count(*) FROM trellara.apply_fence")" -eq 0 ]
}

# verify_paused_under_load POINT: pgbench updating accounts (background
# "load", 2 clients, up to 120 s) and flowing to the target, then verify
# (one attempt, $TEST_DIR/verify.log) held at pause point POINT
verify_paused_under_load() {
	printf '\\set id random(1, 500)\nUPDATE accounts SET balance = balance + 1 WHERE id = :id;\n' >"$TEST_DIR/update.sql"
	bg_start load pgbench -n -c 2 -T 120 -f "$TEST_DIR/update.sql" -h "$SOURCE_HOST" -p "$SOURCE_PORT" "$SOURCE_DB"
	wait_for -t 30 "[ \"\$(psql_target 'SELECT sum(balance) FROM accounts')\" -gt 125250 ]"
	bg_start verify env TRELLARA_PAUSE="$1" TRELLARA_PAUSE_DIR="$TEST_DIR" \
		trellara-verify --config "$FLOW_FILE" --max-attempts 1
	wait_for -t 60 -m "verify at $1" "[ -e '$TEST_DIR/$1.paused' ]"
}

@test "under load, applyd cannot pass the slot's consistent point before verify's fence stands: held first at the source's position, one attempt, CONVERGED" {
	# verify stops right after creating its slot, before the fence moves to
	# the slot's consistent point L
	verify_paused_under_load verify.after_slot
	l=$(psql_source "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name LIKE 'trellara_verify_%'")
	[ -n "$l" ]
	# the source commits well past L while verify waits ...
	wait_for -t 30 "[ \"\$(psql_source \"SELECT pg_current_wal_lsn() > '$l'::pg_lsn + 65536\")\" = t ]"
	sleep 3 # ... and a free applyd would apply past L in this time
	[ "$(psql_target "SELECT last_commit_lsn < '$l'::pg_lsn FROM trellara.apply_checkpoint")" = t ]
	touch "$TEST_DIR/verify.after_slot.resume"
	bg_wait verify 120
	[ "$BG_STATUS" -eq 0 ]
	[ "$(grep -c "taking a new snapshot" "$TEST_DIR/verify.log")" -eq 0 ]
	grep -q "^result: CONVERGED" "$TEST_DIR/verify.log"
	bg_stop load TERM || true
	[ "$(psql_target "SELECT count(*) FROM trellara.apply_fence")" -eq 0 ]
}

@test "under load, applyd past the first fence before it stood is held again at the source's new position: no second snapshot, CONVERGED" {
	# verify stops after reading the source's position P, before its first
	# fence stands
	verify_paused_under_load verify.before_fence
	p=$(sed -n 's/.*holding the target at \([0-9A-F]*\/[0-9A-F]*\) before taking the snapshot.*/\1/p' "$TEST_DIR/verify.log")
	[ -n "$p" ]
	# meanwhile applyd commits past P
	wait_for -t 30 -m "applyd past $p" \
		"[ \"\$(psql_target \"SELECT last_commit_lsn >= '$p'::pg_lsn FROM trellara.apply_checkpoint\")\" = t ]"
	touch "$TEST_DIR/verify.before_fence.resume"
	bg_wait verify 120
	[ "$BG_STATUS" -eq 0 ]
	grep -q "the target passed $p before the fence stood: holding it at the source's new position" "$TEST_DIR/verify.log"
	[ "$(grep -c "taking a new snapshot" "$TEST_DIR/verify.log")" -eq 0 ]
	grep -q "^result: CONVERGED" "$TEST_DIR/verify.log"
	bg_stop load TERM || true
	[ "$(psql_target "SELECT count(*) FROM trellara.apply_fence")" -eq 0 ]
}

# verify_before_slot FILE: verify --format json into FILE, stopping at
# verify.before_slot (its log is the background job's)
verify_before_slot() {
	TRELLARA_PAUSE=verify.before_slot TRELLARA_PAUSE_DIR="$TEST_DIR" \
		trellara-verify --config "$FLOW_FILE" --format json >"$1"
}

@test "the fence moves between applyd's read and its mark: applyd holds only the fence it read; verify finds only the real divergence; repair-plan --apply leaves no quarantine" {
	# applyd stops between reading the fence and marking it held
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_start applyd2 env TRELLARA_PAUSE=applyd.fence_mark TRELLARA_PAUSE_DIR="$TEST_DIR" trellara-applyd --config "$FLOW_FILE"
	# the one real divergence: a row gone from the target
	psql_target "DELETE FROM accounts WHERE id = 7"
	# verify stops once the target stood at its first fence P, before the
	# slot (and the fence's move to the slot's point L)
	bg_start verify verify_before_slot "$TEST_DIR/verify.json"
	wait_for -t 60 -m "applyd at its fence mark" "[ -e '$TEST_DIR/applyd.fence_mark.paused' ]"
	wait_for -t 60 -m "verify before its slot" "[ -e '$TEST_DIR/verify.before_slot.paused' ]"
	local p
	p=$(psql_target "SELECT fence_lsn FROM trellara.apply_fence WHERE state = 'requested'")
	[ -n "$p" ]
	# commits after P and before L: applyd, stopped at its mark, has none
	psql_source "INSERT INTO accounts SELECT g, g FROM generate_series(501, 520) g" \
		"UPDATE accounts SET balance = -balance WHERE id BETWEEN 11 AND 20"
	touch "$TEST_DIR/verify.before_slot.resume"
	wait_for -t 60 -m "verify moved its fence past $p" \
		"[ \"\$(psql_target \"SELECT fence_lsn > '$p'::pg_lsn FROM trellara.apply_fence\")\" = t ]"
	# applyd marks now: the fence it read (P) is not the one standing (L)
	touch "$TEST_DIR/applyd.fence_mark.resume"
	bg_wait verify 120
	[ "$BG_STATUS" -eq 1 ]
	# exactly the row deleted by hand: not the commits applyd had not
	# applied when it marked (the old mark held L at P: those were DIVERGED)
	jq -r '[.tables[].divergences[] | .kind + " " + (.key_values | map(join(",")) | join(" "))] | join("; ")' "$TEST_DIR/verify.json"
	[ "$(jq -r '[.tables[].divergences[] | .kind + " " + (.key_values | map(join(",")) | join(" "))] | join("; ")' "$TEST_DIR/verify.json")" = \
		"missing_in_target 7" ]
	grep -q "the fence at $p moved before applyd held there: reading it again" "$TEST_DIR/applyd2.log"
	run -0 trellara-repair-plan --config "$FLOW_FILE" --from "$TEST_DIR/verify.json" --apply
	[[ $output == *"result: CONVERGED"* ]]
	psql_source "UPDATE accounts SET balance = 0 WHERE id IN (7, 501)"
	caught_up
	[ "$(psql_target "SELECT count(*) FROM trellara.quarantine")" -eq 0 ]
	assert_tables_equal accounts
	bg_stop applyd2 TERM
	[ "$BG_STATUS" -eq 0 ]
}

@test "verify while a quarantine has stopped applyd: exit 75 at once, naming the transaction and the repair, not a fence timeout; released, verify converges" {
	# an UPDATE of a row the target lost: quarantined, applyd stops
	psql_target "DELETE FROM accounts WHERE id = 9"
	psql_source "UPDATE accounts SET balance = -1 WHERE id = 9"
	bg_wait applyd 60
	[ "$BG_STATUS" -eq 1 ]
	local xid lsn
	xid=$(psql_target "SELECT xid FROM trellara.quarantine WHERE state = 'quarantined'")
	lsn=$(psql_target "SELECT commit_lsn FROM trellara.quarantine WHERE state = 'quarantined'")
	[ -n "$xid" ] && [ -n "$lsn" ]
	psql_source "INSERT INTO accounts VALUES (1000, 1)"
	# a fence timeout far beyond the outer bound: waiting for the fence
	# would be killed (124), not answered
	run -75 --separate-stderr timeout 60 trellara-verify --config "$FLOW_FILE" --fence-timeout 600
	[[ $stderr == *"applyd is stopped by quarantined transaction $xid (commit $lsn, no_rows_matched): the target cannot reach verify's fence until it is released"* ]]
	[[ $stderr == *"trellara quarantine replay-ready --config $FLOW_FILE --transaction-id $xid --commit-lsn $lsn"* ]]
	[[ $stderr != *"did not reach the fence"* ]]
	[ "$(psql_target "SELECT count(*) FROM trellara.apply_fence")" -eq 0 ]
	# the repair named: the row back, the transaction released
	psql_target "INSERT INTO accounts VALUES (9, 9)"
	run -0 trellara quarantine replay-ready --config "$FLOW_FILE" --transaction-id "$xid" --commit-lsn "$lsn"
	bg_start applyd2 trellara-applyd --config "$FLOW_FILE"
	caught_up
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ $output == *"result: CONVERGED"* ]]
	bg_stop applyd2 TERM
	[ "$BG_STATUS" -eq 0 ]
}
