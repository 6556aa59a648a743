#!/usr/bin/env bats
# Operations under real faults (trellara-capture(1) SLOT AND FAILOVER):
# a promotion of a physical standby that has no slot, a slot the source
# invalidated, and a slot dropped under a running flow.  Each time capture
# stops at once with exit 65 and the copy that repairs it; never a new
# slot that would skip the transactions in between, never a retry loop.

load helpers/common

setup() {
	trellara_setup
	export TRELLARA_STATUS_INTERVAL_MS=200 TRELLARA_RECONNECT_BASE_MS=100
	export METRICS_DIR="$TEST_DIR/metrics"
}

teardown() {
	[[ -z ${load:-} ]] || kill -TERM "$load" 2>/dev/null || true
	# the old primary comes back for the harness's cleanup (its databases)
	[[ -z ${restart_source:-} ]] || trellara_pg_start "$SOURCE_PGDATA"
	# a failover standby's traces on the source (make_failover_standby)
	if [[ -n ${standby:-} && $TRELLARA_PG_SOURCE_MAJOR -ge 17 ]]; then
		psql_admin source "ALTER SYSTEM RESET synchronized_standby_slots" "SELECT pg_reload_conf()" \
			"SELECT count(pg_drop_replication_slot(slot_name)) FROM pg_replication_slots WHERE slot_name = 'trellara_standby_$TEST_N'" >/dev/null || true
	fi
	trellara_teardown
	[[ -z ${standby:-} ]] || trellara_pg_stop "$standby"
}

# make_standby DIR PORT: a streaming physical standby of the source, made
# with pg_basebackup (-R writes its primary_conninfo), listening on PORT in
# the harness's socket directory.  Debian's pg_basebackup is 15: a 15 source.
make_standby() {
	local dir=$1 port=$2
	printf '%s\n' "$PG_SOURCE_BINDIR" >"$dir.bindir"
	mkdir -m 0700 "$dir"
	if [[ $(id -u) -eq 0 ]]; then chown "$TRELLARA_PG_OS_USER:" "$dir"; fi
	trellara_pg_as_owner "$PG_BINDIR/pg_basebackup" -D "$dir" -R -X stream -c fast \
		-d "host=$SOURCE_HOST port=$SOURCE_PORT user=$(id -un)" >"$TEST_DIR/basebackup.log" 2>&1
	cat >>"$dir/postgresql.conf" <<EOF
port = $port
cluster_name = 'trellara-test-standby'
EOF
	rm -f "$dir/postmaster.pid" "$dir/server.log"
	trellara_pg_start "$dir"
}

# standby_flow MAKE_STANDBY [write_flow_file ARGS]: the accounts table (2000
# rows) on both servers, a standby made by MAKE_STANDBY DIR PORT ($standby,
# $standby_port), a flow file whose source is both servers through a
# multi-host URL (only the writable one is used) and which lists the standby
# for trellara check, and the snapshot taken.
standby_flow() {
	psql_source "CREATE TABLE accounts (id bigint PRIMARY KEY, v text, n int)" \
		"INSERT INTO accounts SELECT g, 'v' || g, 0 FROM generate_series(1, 2000) g" \
		"CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE accounts"
	psql_target "CREATE TABLE accounts (id bigint PRIMARY KEY, v text, n int)"
	standby="$TRELLARA_FILE_DIR/standby-$TEST_N" standby_port=$((SOURCE_PORT + 2))
	"$1" "$standby" "$standby_port"
	wait_for -t 60 "[ \"\$(psql_standby 'SELECT count(*) FROM accounts')\" = 2000 ]"
	local multi="postgresql:///$SOURCE_DB?host=$SOURCE_HOST,$SOURCE_HOST&port=$SOURCE_PORT,$standby_port&target_session_attrs=read-write"
	standby_url="postgresql:///$SOURCE_DB?host=$SOURCE_HOST&port=$standby_port"
	write_flow_file "$FLOW_FILE" --tables public.accounts --set stream.min_free_bytes=1048576 \
		--set "source.database_url=\"$multi\"" --set observability.metrics_dir="\"$METRICS_DIR\"" \
		--set "source.standby_database_urls=[\"$standby_url\"]" "${@:2}"
	run -0 trellara-snapshot --config "$FLOW_FILE"
}

# check_item NAME [OBJECT]: the check item of $output (check --format json)
check_item() {
	jq -c --arg n "$1" --arg o "${2:-}" '.checks[] | select(.name == $n and ($o == "" or .object == $o))' <<<"$output"
}

# start_writer: single-row UPDATEs on the primary until it goes away ($load)
start_writer() {
	(
		for i in $(seq 1 100000); do
			psql_source "UPDATE accounts SET n = n + 1 WHERE id = $((i % 2000 + 1))" || exit 0
		done
	) >/dev/null 2>&1 &
	load=$!
}

# alert_names_the_copy CODE: status alerts CODE and names the copy again
alert_names_the_copy() {
	run -1 --separate-stderr trellara status --config "$FLOW_FILE" --view alerts --rate-seconds 0
	[[ $output == *"alert $1"* ]]
	[[ $output == *"trellara snapshot --config $FLOW_FILE --force"* ]]
}

# copy_again: the repair capture and status name: applyd stopped, every
# table copied again at a new slot, capture2 and applyd2 streaming it
copy_again() {
	bg_stop applyd TERM
	run -0 trellara-snapshot --config "$FLOW_FILE" --force
	bg_start capture2 trellara-capture --config "$FLOW_FILE"
	bg_start applyd2 trellara-applyd --config "$FLOW_FILE"
}

# t_tables: table t on both servers, published on the source
t_tables() {
	psql_source "CREATE TABLE t (id int PRIMARY KEY, v text)" "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE t"
	psql_target "CREATE TABLE t (id int PRIMARY KEY, v text)"
}

# converges_on_promoted CAPTURE_NAME [SQL...]: writes on the promoted
# server (and SQL), then identical, CONVERGED, and the promotion followed
# by CAPTURE_NAME (its log) and counted (capture.prom)
converges_on_promoted() {
	local name=$1
	shift
	psql_source "UPDATE accounts SET n = n + 100 WHERE id % 7 = 0" \
		"INSERT INTO accounts SELECT g, 'after', 0 FROM generate_series(2001, 2100) g" "$@"
	caught_up 120
	assert_tables_equal accounts
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ $output == *"result: CONVERGED"* ]]
	grep -q "source timeline moved from 1 to 2 (a promotion)" "$TEST_DIR/$name.log"
	wait_for -t 10 "grep -q '^trellara_capture_promotions_total{.*} 1\$' '$METRICS_DIR/capture.prom'"
	# and status shows it: the stream on timeline 2, the promotion followed
	run -0 --separate-stderr trellara status --config "$FLOW_FILE" --format json --rate-seconds 0
	[ "$(jq -r .stream.timeline <<<"$output")" = 2 ]
	[ "$(jq -r .supervisor.connections.capture.promotions <<<"$output")" = 1 ]
	[[ $(jq -r '.problems[] | select(.code == "source_promoted") | .message' <<<"$output") == "capture followed 1 promotion of the source; the stream follows timeline 2" ]]
}

psql_standby() {
	_trellara_psql "postgresql:///$SOURCE_DB?host=$SOURCE_HOST&port=$standby_port" -c "$1"
}

@test "a promoted standby without the slot: capture stops with 65 and names the copy, status says so, and that copy converges from the promoted server" {
	[ "$TRELLARA_PG_SOURCE_MAJOR" -eq 15 ] || skip "the standby is made with Debian's pg_basebackup 15"
	standby_flow make_standby
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"

	start_writer # on the primary, while the flow streams
	wait_for -t 60 "[ \"\$(applied_transactions)\" -gt 50 ]"

	# the primary dies (immediate stop: no shutdown checkpoint, nothing more
	# sent to the standby), the standby is promoted: timeline 2, no slot
	trellara_pg_stop "$SOURCE_PGDATA"
	restart_source=1
	kill -TERM "$load" 2>/dev/null || true
	wait "$load" || true
	load=
	trellara_pg_as_owner "$PG_SOURCE_BINDIR/pg_ctl" -D "$standby" -w -t 60 promote >/dev/null
	[ "$(psql_standby 'SELECT pg_is_in_recovery()')" = f ]
	[ -z "$(psql_standby "SELECT slot_name FROM pg_replication_slots")" ]

	# capture reaches the promoted server through the URL and stops
	bg_wait capture 60
	[ "$BG_STATUS" -eq 65 ]
	grep -q "replication slot \"$SLOT_NAME\" does not exist on the source, which was promoted (timeline 2, the stream followed timeline 1)" \
		"$TEST_DIR/capture.log"
	grep -q "trellara snapshot --config $FLOW_FILE --force" "$TEST_DIR/capture.log"
	grep -q 'trellara_capture_slot_unusable{.*verdict="lost_at_promotion"} 1' "$METRICS_DIR/capture.prom"
	# and never made a slot there
	[ -z "$(psql_standby "SELECT slot_name FROM pg_replication_slots")" ]
	# the same with --start-now: a stream with changes never gets a new slot
	run -65 trellara-capture --config "$FLOW_FILE" --start-now
	[[ $output == *"which was promoted"* ]]
	[ -z "$(psql_standby "SELECT slot_name FROM pg_replication_slots")" ]

	# status names the alert and the copy
	alert_names_the_copy slot_missing

	# the action it names, from the promoted server: copy again, stream on
	copy_again
	export SOURCE_URL="postgresql:///$SOURCE_DB?host=$SOURCE_HOST&port=$standby_port"
	converges_on_promoted capture2 "DELETE FROM accounts WHERE id % 11 = 0"
}

@test "check reports each listed standby's failover posture, and the slot's limits against source.expected_downtime_seconds" {
	[ "$TRELLARA_PG_SOURCE_MAJOR" -eq 15 ] || skip "the standby is made with Debian's pg_basebackup 15"
	local nowhere="postgresql:///$SOURCE_DB?host=$SOURCE_HOST&port=$((SOURCE_PORT + 3))"
	standby_flow make_standby --set source.expected_downtime_seconds=864000 \
		--set "source.standby_database_urls=[\"postgresql:///$SOURCE_DB?host=$SOURCE_HOST&port=$((SOURCE_PORT + 2))\", \"$nowhere\"]"
	# the source has written WAL since its statistics began; 1 MB cannot hold ten days of it
	psql_source "INSERT INTO accounts SELECT g, repeat('w', 500), 0 FROM generate_series(2001, 12000) g"
	psql_admin source "ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'" "SELECT pg_reload_conf()" >/dev/null
	run --separate-stderr trellara-check --config "$FLOW_FILE" --format json
	local status=$status out=$output
	psql_admin source "ALTER SYSTEM RESET max_slot_wal_keep_size" "SELECT pg_reload_conf()" >/dev/null
	[ "$status" -eq 0 ] # warnings, no blocker
	output=$out

	# the standby: a standby of this system, but PostgreSQL 15 cannot keep the slot for it
	item=$(check_item standby_role)
	[ "$(jq -r .status <<<"$item")" = ok ]
	[[ $(jq -r .detail <<<"$item") == "a standby of system $(psql_source "SELECT system_identifier FROM pg_control_system()")" ]]
	item=$(check_item standby_slot_synced)
	[ "$(jq -r .status <<<"$item")" = warn ]
	[[ $(jq -r .detail <<<"$item") == *"needs PostgreSQL 17 on both servers (the standby is 15"*"exit 65"* ]]
	[[ $(jq -r .object <<<"$item") == *"port=$((SOURCE_PORT + 2))"* ]]
	# pg_basebackup -R without a slot: no primary_slot_name (reported, not a warning on 15)
	item=$(check_item standby_primary_slot_name)
	[ "$(jq -r .status <<<"$item")" = ok ] && [[ $(jq -r .detail <<<"$item") == "not set"* ]]
	# the second URL reaches nothing: named, a warning, the others still judged
	item=$(check_item standby_reachable)
	[ "$(jq -r .status <<<"$item")" = warn ]
	[[ $(jq -r .object <<<"$item") == *"port=$((SOURCE_PORT + 3))"* ]]
	[[ $(jq -r .detail <<<"$item") == "cannot inspect the standby: "* ]]

	# ten days of the source's WAL rate is more than 1 MB: the slot would not survive
	item=$(check_item wal_during_downtime)
	[ "$(jq -r .status <<<"$item")" = warn ]
	[[ $(jq -r .detail <<<"$item") == *"a capture stopped for 10.0 days (source.expected_downtime_seconds)"*"more than max_slot_wal_keep_size 1048576 bytes"* ]]
	[[ $(jq -r .fix <<<"$item") == *"max_slot_wal_keep_size"* ]]
	# the default downtime (1 h) with the limit gone: ok
	write_flow_file "$FLOW_FILE" --tables public.accounts
	run -0 --separate-stderr trellara-check --config "$FLOW_FILE" --format json
	item=$(check_item wal_during_downtime)
	[ "$(jq -r .status <<<"$item")" = ok ] && [[ $(jq -r .detail <<<"$item") == *"a capture stopped for 60 min"* ]]
	[ -z "$(jq -c '.checks[] | select(.name | startswith("standby_"))' <<<"$output")" ]
}

@test "a slot the source invalidated (max_slot_wal_keep_size, wal_status lost): capture stops at once with 65, status alerts slot_invalidated" {
	t_tables
	write_flow_file "$FLOW_FILE" --tables public.t --set stream.min_free_bytes=1048576 \
		--set observability.metrics_dir="\"$METRICS_DIR\""
	run -0 trellara-snapshot --config "$FLOW_FILE"
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	psql_source "INSERT INTO t VALUES (1, 'one')"
	caught_up 60
	bg_stop capture TERM
	[ "$BG_STATUS" -eq 0 ]

	# while capture is away the source writes past max_slot_wal_keep_size
	psql_admin source "ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'" "SELECT pg_reload_conf()" >/dev/null
	for round in 1 2 3 4; do
		psql_source "INSERT INTO t SELECT g, repeat('x', 200) FROM generate_series(1000 * $round, 1000 * $round + 999) g" \
			"SELECT pg_switch_wal()" >/dev/null
	done
	psql_admin source "CHECKPOINT" >/dev/null
	wait_for -t 30 "[ \"\$(psql_source \"SELECT wal_status FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME'\")\" = lost ]"
	psql_admin source "ALTER SYSTEM RESET max_slot_wal_keep_size" "SELECT pg_reload_conf()" >/dev/null

	# at once: no reconnect attempts, no retry loop
	run -65 --separate-stderr trellara-capture --config "$FLOW_FILE"
	[[ $stderr == *"replication slot \"$SLOT_NAME\" was invalidated by the source (wal_status \"lost\""* ]]
	# PostgreSQL 17 and later also say why
	((TRELLARA_PG_SOURCE_MAJOR < 17)) || [[ $stderr == *'invalidation_reason "wal_removed"'* ]]
	[[ $stderr == *"trellara snapshot --config $FLOW_FILE --force"* ]]
	[[ $stderr != *"reconnecting"* ]]
	grep -q 'trellara_capture_slot_unusable{.*verdict="invalidated"} 1' "$METRICS_DIR/capture.prom"
	alert_names_the_copy slot_invalidated

	# the copy it names repairs the flow
	copy_again
	psql_source "UPDATE t SET v = 'after' WHERE id % 3 = 0"
	caught_up 120
	assert_tables_equal t
}

@test "a slot dropped under a flow whose stream holds changes: 65 (gone), with or without --start-now; no new slot is made" {
	t_tables
	write_flow_file "$FLOW_FILE" --tables public.t --set stream.min_free_bytes=1048576
	run -0 trellara-snapshot --config "$FLOW_FILE"
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	psql_source "INSERT INTO t VALUES (1, 'one')"
	caught_up 60
	bg_stop capture TERM
	psql_source "SELECT pg_drop_replication_slot('$SLOT_NAME')" >/dev/null
	psql_source "INSERT INTO t VALUES (2, 'lost unless copied again')"
	for flag in "" --start-now; do
		run -65 --separate-stderr trellara-capture --config "$FLOW_FILE" $flag
		[[ $stderr == *"replication slot \"$SLOT_NAME\" does not exist, but stream \"$STREAM_DIR\" holds its changes through"* ]]
		[ -z "$(psql_source "SELECT slot_name FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME'")" ]
	done
}

# A role "rotator" on both servers that must give its password
# (scram-sha-256 for it alone, ahead of the harness's trust lines).
password_role() {
	local side pgdata
	for side in source target; do
		pgdata=$SOURCE_PGDATA
		[ "$side" = source ] || pgdata=$TARGET_PGDATA
		psql_admin "$side" "DO \$\$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'rotator') THEN CREATE ROLE rotator SUPERUSER LOGIN REPLICATION; END IF; END \$\$" \
			"ALTER ROLE rotator PASSWORD '$1'" >/dev/null
		if ! grep -q rotator "$pgdata/pg_hba.conf"; then
			trellara_pg_as_owner sed -i -e '1i local all rotator scram-sha-256' \
				-e '1i local replication rotator scram-sha-256' "$pgdata/pg_hba.conf"
			psql_admin "$side" "SELECT pg_reload_conf()" >/dev/null
		fi
	done
}

# write_secret FILE URL: atomically, 0600, as an operator's rotation would
write_secret() {
	(umask 077 && printf '%s\n' "$2" >"$1.tmp") && mv -f "$1.tmp" "$1"
}

# end every session of the role on both servers (a network cut or a
# restart would do the same to the flow)
cut_sessions() {
	local side
	for side in source target; do
		psql_admin "$side" "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = 'rotator' AND pid <> pg_backend_pid()" >/dev/null
	done
}

@test "passwords rotated on both servers under trellara run: the secret files are read again at the reconnect, no child restarts, nothing lost; a wrong secret backs off and is counted" {
	password_role first-secret
	psql_source "CREATE TABLE t (id int PRIMARY KEY, v text)"
	psql_target "CREATE TABLE t (id int PRIMARY KEY, v text)"
	local sq tq
	sq="postgresql://rotator:%s@/$SOURCE_DB?host=$SOURCE_HOST&port=$SOURCE_PORT"
	tq="postgresql://rotator:%s@/$TARGET_DB?host=$TARGET_HOST&port=$TARGET_PORT"
	# shellcheck disable=SC2059 # the format is ours
	write_secret "$TEST_DIR/source.secret" "$(printf "$sq" first-secret)"
	# shellcheck disable=SC2059
	write_secret "$TEST_DIR/target.secret" "$(printf "$tq" first-secret)"
	write_flow_file "$FLOW_FILE" --tables public.t --set stream.min_free_bytes=1048576 \
		--set "source.database_url={source: file, path: \"$TEST_DIR/source.secret\"}" \
		--set "target.database_url={source: file, path: \"$TEST_DIR/target.secret\"}" \
		--set observability.metrics_dir="\"$METRICS_DIR\""
	run -0 trellara-check --config "$FLOW_FILE" --fix
	bg_start run trellara run --config "$FLOW_FILE"
	wait_for -t 120 -m "trellara run has both children running" running
	psql_source "INSERT INTO t SELECT g, 'before' FROM generate_series(1, 100) g"
	caught_up 60
	local run_capture run_applyd
	run_capture=$(state_value capture_pid) run_applyd=$(state_value applyd_pid)

	# rotation: new passwords, new secret files, every session cut
	password_role second-secret
	# shellcheck disable=SC2059
	write_secret "$TEST_DIR/source.secret" "$(printf "$sq" second-secret)"
	# shellcheck disable=SC2059
	write_secret "$TEST_DIR/target.secret" "$(printf "$tq" second-secret)"
	cut_sessions
	psql_source "INSERT INTO t SELECT g, 'after rotation' FROM generate_series(101, 200) g"
	caught_up 60
	assert_tables_equal t
	# the same processes: reconnected with the new secret, not restarted
	[ "$(state_value capture_pid)" = "$run_capture" ]
	[ "$(state_value applyd_pid)" = "$run_applyd" ]
	running
	# the cut sessions are counted by cause: the server terminated them
	wait_for -t 10 "grep -q 'trellara_capture_disconnects_total{.*cause=\"terminated\"} [1-9]' '$METRICS_DIR/capture.prom'"

	# a wrong secret on both sides: refused, counted, retried with growing
	# delays (no tight loop), and status alerts it, naming the key
	# shellcheck disable=SC2059
	write_secret "$TEST_DIR/source.secret" "$(printf "$sq" wrong-secret)"
	# shellcheck disable=SC2059
	write_secret "$TEST_DIR/target.secret" "$(printf "$tq" wrong-secret)"
	cut_sessions
	wait_for -t 30 "grep -q 'trellara_capture_connect_failures_total{.*cause=\"authentication\"} [2-9]' '$METRICS_DIR/capture.prom'"
	wait_for -t 30 "grep -q 'trellara_applyd_connect_failures_total{.*cause=\"authentication\"} [2-9]' '$METRICS_DIR/applyd.prom'"
	grep -q "the server refused the credentials of source.database_url" "$TEST_DIR/run.log"
	grep -q "the server refused the credentials of target.database_url" "$TEST_DIR/run.log"
	run -1 --separate-stderr trellara status --config "$FLOW_FILE" --view alerts --rate-seconds 0
	[[ $output == *"alert credentials_refused"*"capture's last connection attempt was refused its credentials (source.database_url"* ]]
	[[ $output == *"applyd's last connection attempt was refused its credentials (target.database_url"* ]]
	# shellcheck disable=SC2059
	write_secret "$TEST_DIR/target.secret" "$(printf "$tq" second-secret)"
	# attempts 1, 2, 3 ... wait 0.1, 0.2, 0.4 s ... (+-25 %): a few per second at most
	local n1 n2
	n1=$(grep -c 'password authentication failed for user "rotator"' "$(server_log source)")
	sleep 3
	n2=$(grep -c 'password authentication failed for user "rotator"' "$(server_log source)")
	[ $((n2 - n1)) -le 12 ]
	# fixed in time (before capture's reconnection attempts run out): it goes on, same process
	# shellcheck disable=SC2059
	write_secret "$TEST_DIR/source.secret" "$(printf "$sq" second-secret)"
	psql_source "INSERT INTO t SELECT g, 'after the fix' FROM generate_series(201, 300) g"
	caught_up 120
	assert_tables_equal t
	[ "$(state_value capture_pid)" = "$run_capture" ]
	[ "$(state_value applyd_pid)" = "$run_applyd" ]
	[ "$(psql_target "SELECT count(*) FROM t")" -eq 300 ]
	# connected again: no alert, the refusals stay counted
	run -0 --separate-stderr trellara status --config "$FLOW_FILE" --format json --rate-seconds 0
	[ "$(jq -r '.supervisor.connections.capture.credentials_refused' <<<"$output")" = false ]
	[ "$(jq -r '.supervisor.connections.applyd.credentials_refused' <<<"$output")" = false ]
	[ "$(jq -r '.supervisor.connections.capture.connect_failures.authentication' <<<"$output")" -ge 2 ]
	[ "$(jq -r '.supervisor.connections.applyd.connect_failures.authentication' <<<"$output")" -ge 2 ]
	[ -z "$(jq -c '.problems[] | select(.code == "credentials_refused")' <<<"$output")" ]
}

@test "a server stopped under the flow: capture and applyd back off, SIGTERM while they back off ends them with 0 within 10 s; back up, the flow misses nothing" {
	t_tables
	write_flow_file "$FLOW_FILE" --tables public.t --set stream.min_free_bytes=1048576
	run -0 trellara-snapshot --config "$FLOW_FILE"
	export TRELLARA_RECONNECT_BASE_MS=1000 # 1, 2, 4, 8 s ... : SIGTERM lands inside a long wait
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	psql_source "INSERT INTO t SELECT g, 'one' FROM generate_series(1, 100) g"
	caught_up 60

	# capture and the source
	trellara_pg_stop "$SOURCE_PGDATA"
	restart_source=1
	wait_for -t 30 "[ \"\$(grep -c 'reconnecting to the source in' '$TEST_DIR/capture.log')\" -ge 3 ]"
	bg_stop capture TERM 10
	[ "$BG_STATUS" -eq 0 ]
	trellara_pg_start "$SOURCE_PGDATA"
	restart_source=
	psql_source "INSERT INTO t SELECT g, 'two' FROM generate_series(101, 200) g"
	bg_start capture2 trellara-capture --config "$FLOW_FILE"
	caught_up 60

	# applyd and the target: the same
	trellara_pg_stop "$TARGET_PGDATA"
	psql_source "INSERT INTO t SELECT g, 'three' FROM generate_series(201, 300) g"
	wait_for -t 30 "[ \"\$(grep -c 'reconnecting to the target in' '$TEST_DIR/applyd.log')\" -ge 3 ]"
	bg_stop applyd TERM 10
	[ "$BG_STATUS" -eq 0 ]
	trellara_pg_start "$TARGET_PGDATA"
	bg_start applyd2 trellara-applyd --config "$FLOW_FILE"
	caught_up 60
	assert_tables_equal t
}

@test "the wall clock of capture and applyd moved a month forward, then a month back, while the flow runs: nothing stalls, nothing lost" {
	local lib=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1
	[ -f "$lib" ] # scripts/install-deps.sh installs faketime
	t_tables
	write_flow_file "$FLOW_FILE" --tables public.t --set stream.min_free_bytes=1048576
	run -0 trellara-snapshot --config "$FLOW_FILE"
	# the programs' CLOCK_REALTIME follows the offset in this file (read at
	# every call); their monotonic clock is left alone, as a real clock
	# step (an NTP correction, a wrong time set by hand) leaves it
	echo "+0" >"$TEST_DIR/clock"
	local fake=(env LD_PRELOAD="$lib" FAKETIME_TIMESTAMP_FILE="$TEST_DIR/clock" FAKETIME_NO_CACHE=1
		FAKETIME_DONT_FAKE_MONOTONIC=1)
	bg_start capture "${fake[@]}" trellara-capture --config "$FLOW_FILE"
	bg_start applyd "${fake[@]}" trellara-applyd --config "$FLOW_FILE"
	psql_source "INSERT INTO t SELECT g, 'now' FROM generate_series(1, 100) g"
	caught_up 60

	local step n=100 day
	for step in +30d -30d; do
		echo "$step" >"$TEST_DIR/clock"
		day=$(date -u -d "${step%d} days" +%Y-%m-%d)
		# their connections cut first (each termination waited for, up to
		# 10 s), then the changes: capture's replication stream ends, and
		# applyd, idle after the last catch-up, can apply them only through
		# a new session. So both reconnect (backoff) under the moved clock,
		# whatever the order in which they notice: the log lines below are
		# caused by this step, not raced for.
		[ "$(psql_admin source "SELECT bool_and(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity WHERE application_name = 'trellara-capture'")" = t ]
		[ "$(psql_admin target "SELECT bool_and(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity WHERE application_name = 'trellara-applyd'")" = t ]
		psql_source "INSERT INTO t SELECT g, '$step' FROM generate_series($((n + 1)), $((n + 100))) g" \
			"UPDATE t SET v = v || ' then $step' WHERE id % 10 = 0" "DELETE FROM t WHERE id % 17 = 0"
		n=$((n + 100))
		caught_up 60
		# the step took effect: each one's reconnection carries the moved date
		grep -q "^${day}[^ ]* info  trellara-capture: reconnecting to the source in" "$TEST_DIR/capture.log"
		grep -q "^${day}[^ ]* info  trellara-applyd: reconnecting to the target in" "$TEST_DIR/applyd.log"
	done
	assert_tables_equal t
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ $output == *"result: CONVERGED"* ]]
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
	[ "$BG_STATUS" -eq 0 ]
}

# make_failover_standby DIR PORT: a physical standby of a PostgreSQL 17+
# source that synchronizes its failover slots (sync_replication_slots), made
# without pg_basebackup (Debian's 15 refuses a newer server): a physical
# slot, pg_backup_start, a file copy, pg_backup_stop's label.
make_failover_standby() {
	local dir=$1 port=$2
	printf '%s\n' "$PG_SOURCE_BINDIR" >"$dir.bindir"
	psql_admin source "SELECT pg_create_physical_replication_slot('trellara_standby_$TEST_N', true)" >/dev/null
	_trellara_psql "$SOURCE_ADMIN_URL" -c "SELECT pg_backup_start('trellara-standby', true)" \
		-c "\\! cp -a '$SOURCE_PGDATA' '$dir'" \
		-c "\\o $TEST_DIR/backup_label" -c "SELECT labelfile FROM pg_backup_stop(false)" >/dev/null
	rm -f "$dir/postmaster.pid" "$dir/postmaster.opts" "$dir/server.log"
	rm -rf "${dir:?}/pg_replslot/"*
	cp "$TEST_DIR/backup_label" "$dir/backup_label"
	touch "$dir/standby.signal"
	printf '%s\n' "port = $port" "cluster_name = 'trellara-test-standby'" \
		"primary_conninfo = 'host=$SOURCE_HOST port=$SOURCE_PORT user=$(id -un) dbname=$SOURCE_DB'" \
		"primary_slot_name = 'trellara_standby_$TEST_N'" "hot_standby_feedback = on" "sync_replication_slots = on" \
		>>"$dir/postgresql.conf"
	if [[ $(id -u) -eq 0 ]]; then chown -R "$TRELLARA_PG_OS_USER:" "$dir"; fi
	trellara_pg_start "$dir"
	psql_admin source "ALTER SYSTEM SET synchronized_standby_slots = 'trellara_standby_$TEST_N'" "SELECT pg_reload_conf()" >/dev/null
}

# failover_flow: a 17+ source with a failover standby, the flow snapshotted
# through a multi-host URL, capture and applyd running, the standby's copy
# of the slot synchronized, and a writer on the primary ($load).
failover_flow() {
	[ "$TRELLARA_PG_SOURCE_MAJOR" -ge 17 ] || skip "failover slots need a PostgreSQL 17 source (make check-matrix)"
	standby_flow make_failover_standby
	[ "$(psql_source "SELECT failover FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME'")" = t ]
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	wait_for -t 90 -m "the standby synchronized the flow's slot" \
		"[ \"\$(psql_standby \"SELECT synced FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME'\")\" = t ]"
	start_writer
	wait_for -t 60 "[ \"\$(applied_transactions)\" -gt 50 ]"
}

# promote_standby: the writer stops, the standby replays all the primary
# sent, the primary dies (immediate), the standby is promoted.  Sets
# synced_at (its copy of the slot's position), durable (the stream's last
# commit then) and behind (t when the copy is behind the stream).
# With "crash", the primary dies under the writer, and what the standby
# has is what there is (synchronized_standby_slots kept capture from
# receiving anything the standby had not flushed).
promote_standby() {
	if [[ ${1:-} == crash ]]; then
		trellara_pg_stop "$SOURCE_PGDATA"
		restart_source=1
	fi
	kill -TERM "$load" 2>/dev/null || true
	wait "$load" || true
	load=
	if [[ ${1:-} != crash ]]; then
		local primary_end
		primary_end=$(psql_source "SELECT pg_current_wal_lsn()")
		wait_for -t 60 -m "the standby replayed the primary's WAL" \
			"[ \"\$(psql_standby \"SELECT pg_last_wal_replay_lsn() >= '$primary_end'\")\" = t ]"
		trellara_pg_stop "$SOURCE_PGDATA"
		restart_source=1
	fi
	synced_at=$(psql_standby "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME'")
	durable=$(trellara stream read --dir "$STREAM_DIR" --format json | jq -r 'select(.type == "txn") | .commit_lsn' | tail -n 1)
	[ -n "$synced_at" ] && [ -n "$durable" ]
	behind=$(psql_standby "SELECT '$synced_at'::pg_lsn < '$durable'::pg_lsn")
	trellara_pg_as_owner "$PG_SOURCE_BINDIR/pg_ctl" -D "$standby" -w -t 60 promote >/dev/null
	[ "$(psql_standby 'SELECT pg_is_in_recovery()')" = f ]
	[ "$(psql_standby "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME'")" = 1 ]
	export SOURCE_URL="postgresql:///$SOURCE_DB?host=$SOURCE_HOST&port=$standby_port"
}

# after_promotion CAPTURE_LOG_NAME: more writes on the promoted server,
# identical, CONVERGED, the promotion followed and counted, and resent
# transactions skipped (some whenever the standby's copy was behind)
after_promotion() {
	converges_on_promoted "$1"
	bg_stop "$1" TERM
	[ "$BG_STATUS" -eq 0 ]
	local skipped
	skipped=$(sed -n 's/.*capture stopped: .* \([0-9][0-9]*\) skipped as duplicates.*/\1/p' "$TEST_DIR/$1.log")
	[ -n "$skipped" ]
	if [ "$behind" = t ]; then [ "$skipped" -gt 0 ]; else [ "$skipped" -eq 0 ]; fi
	echo "# the standby's copy of the slot at $synced_at, the stream through $durable: $skipped resent transactions skipped" >&3
}

@test "PostgreSQL 17+: a failover slot synchronized to the standby; promoted mid-load while capture is away: capture resumes on the new timeline, identical, CONVERGED" {
	failover_flow
	# check sees the standby ready to take over with the slot
	run -0 --separate-stderr trellara-check --config "$FLOW_FILE" --format json
	for name in standby_role standby_hot_standby_feedback standby_primary_slot_name standby_sync_replication_slots standby_slot_synced; do
		[ "$(check_item $name | jq -r .status)" = ok ]
	done
	[[ $(check_item standby_slot_synced | jq -r .detail) == "synced, confirmed through "* ]]
	[ "$(check_item failover_slots | jq -r .status)" = ok ]
	kill -KILL "$(bg_pid capture)" # the slot confirmed up to its last status update
	bg_wait capture 10
	[ "$BG_STATUS" -eq 137 ]
	sleep 1 # the primary writes on without capture
	promote_standby
	bg_start capture2 trellara-capture --config "$FLOW_FILE"
	after_promotion capture2
}

@test "PostgreSQL 17+: the primary dies under load while capture streams; promoted: capture reconnects to the promoted server by itself, skips what the standby's copy of the slot resends, identical, CONVERGED" {
	failover_flow
	promote_standby crash
	after_promotion capture
}

@test "PostgreSQL 17+: check blocks a synchronized_standby_slots that names a missing slot (decoding would wait for it forever); --fix --create-slot makes a failover slot" {
	[ "$TRELLARA_PG_SOURCE_MAJOR" -ge 17 ] || skip "synchronized_standby_slots needs a PostgreSQL 17 source (make check-matrix)"
	psql_source "CREATE TABLE t (id int PRIMARY KEY)" "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE t"
	write_flow_file "$FLOW_FILE" --tables public.t
	run -0 --separate-stderr trellara-check --config "$FLOW_FILE" --fix --create-slot
	[ "$(psql_source "SELECT failover FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME'")" = t ]
	standby=none # the teardown resets synchronized_standby_slots
	psql_admin source "SELECT pg_create_physical_replication_slot('trellara_standby_$TEST_N')" \
		"ALTER SYSTEM SET synchronized_standby_slots = 'trellara_standby_$TEST_N, no_such_standby'" \
		"SELECT pg_reload_conf()" >/dev/null
	run -1 --separate-stderr trellara-check --config "$FLOW_FILE" --format json
	item=$(check_item synchronized_standby_slots)
	[ "$(jq -r .status <<<"$item")" = blocker ]
	[[ $(jq -r .detail <<<"$item") == *"names no_such_standby, which has no physical slot on this server"* ]]
	[[ $(jq -r .fix <<<"$item") == *"pg_create_physical_replication_slot"* ]]
	# every name a physical slot: no blocker
	psql_admin source "ALTER SYSTEM SET synchronized_standby_slots = 'trellara_standby_$TEST_N'" "SELECT pg_reload_conf()" >/dev/null
	run -0 --separate-stderr trellara-check --config "$FLOW_FILE" --format json
	[ -z "$(check_item synchronized_standby_slots)" ]
}
