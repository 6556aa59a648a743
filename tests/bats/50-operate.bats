#!/usr/bin/env bats
# Operating a flow: `trellara run` supervising check -> snapshot ->
# capture + applyd under pgbench, restarting children killed with -9,
# draining on SIGTERM, leaving no orphan when it is killed itself,
# stopping on a quarantine; `trellara status` as text, JSON and
# Prometheus, with unavailable parts reported as such.

load helpers/common

TABLES="public.pgbench_accounts,public.pgbench_branches,public.pgbench_tellers,public.pgbench_history"

setup() {
	trellara_setup
	export METRICS_DIR="$TEST_DIR/metrics"
	export TRELLARA_STATUS_INTERVAL_MS=200 TRELLARA_RECONNECT_BASE_MS=100
	# fast, generous restarts: the test kills children on purpose
	export TRELLARA_RUN_BACKOFF_BASE_MS=100 TRELLARA_RUN_BACKOFF_CAP_MS=1000 TRELLARA_RUN_MAX_RESTARTS=50
	export TRELLARA_RUN_DRAIN_SECONDS=20
	export TRELLARA_RUN_SNAPSHOT_ARGS=--create-tables
}

# pgbench tables on the source only; the publication and the DDL trigger
# from trellara-check --fix; target tables from the snapshot
source_init() {
	pgbench -q -i -s "${1:-1}" -h "$SOURCE_HOST" -p "$SOURCE_PORT" "$SOURCE_DB" >/dev/null 2>&1
	# pgbench_history has no key: FULL identity (pgbench only inserts into it)
	psql_source "ALTER TABLE pgbench_history REPLICA IDENTITY FULL"
	write_flow_file "$FLOW_FILE" --tables "$TABLES" --set stream.min_free_bytes=1048576 \
		--set observability.metrics_dir="\"$METRICS_DIR\""
	run -0 trellara-check --config "$FLOW_FILE" --fix
}

source_load() {
	pgbench -n -c 2 -R 200 -T "$1" -h "$SOURCE_HOST" -p "$SOURCE_PORT" "$SOURCE_DB" >"$TEST_DIR/pgbench.log" 2>&1
}

wait_running() {
	wait_for -t "${1:-120}" -m "trellara run has both children running" running
}

# kill -9 the children named, then wait until the supervisor has new ones
# and they work again: capture streams from the slot, applyd applies
kill_children() {
	local name old=() applied
	applied=$(applied_transactions)
	for name in "$@"; do
		old+=("$(state_value "${name}_pid")")
		kill -KILL "${old[-1]}"
	done
	local i=0
	for name in "$@"; do
		wait_for -t 60 -m "trellara-$name restarted" \
			"[ \"\$(state_value ${name}_pid)\" != '${old[$i]}' ] && child_alive $name"
		i=$((i + 1))
	done
	wait_for -t 60 -m "capture streams again" \
		"[ \"\$(psql_source \"SELECT active FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME'\")\" = t ]"
	wait_for -t 60 -m "applyd applies again" "[ \"\$(applied_transactions)\" -gt $applied ]"
}

pgbench_compare() {
	# pgbench_history has no key: a duplicate or a lost insert shows as a row difference
	assert_tables_equal pgbench_accounts pgbench_branches pgbench_tellers pgbench_history
}

# no process of this flow left: nothing with the flow file in its command line
no_flow_processes() {
	! pgrep -f -- "--config $FLOW_FILE" >/dev/null
}

# Prometheus text format, strictly: comments are # HELP or # TYPE, every
# sample is name{labels} value with a name declared by # TYPE before it,
# label values quoted with only \\ \" \n escapes, values numbers.
prometheus_parse() {
	awk '
	function fail(why) { printf "line %d: %s: %s\n", NR, why, $0 > "/dev/stderr"; bad = 1; exit 1 }
	/^# HELP [a-zA-Z_:][a-zA-Z0-9_:]* / { next }
	/^# TYPE / {
		if (NF != 4 || $4 !~ /^(gauge|counter|histogram|summary|untyped)$/) fail("bad TYPE")
		if ($3 in typed) fail("family declared twice")
		typed[$3] = $4
		next
	}
	/^#/ { fail("unexpected comment") }
	/^$/ { fail("empty line") }
	{
		label = "[a-zA-Z_][a-zA-Z0-9_]*=\"([^\"\\\\\n]|\\\\[\\\\\"n])*\""
		if ($0 !~ "^[a-zA-Z_:][a-zA-Z0-9_:]*(\\{" label "(," label ")*\\})? [^ ]+$") fail("not name{labels} value")
		name = $0
		sub(/[{ ].*/, "", name)
		if (!(name in typed)) fail("sample of an undeclared family " name)
		if ($NF !~ /^([-+]?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?|NaN|[-+]Inf)$/) fail("value is not a number")
		if (typed[name] == "counter" && name !~ /_total$/) fail("counter without _total")
		samples++
	}
	END { if (!bad && samples == 0) { print "no samples" > "/dev/stderr"; exit 1 } }' "$@"
}

# the sum of every counter (*_total) sample in a Prometheus text file
counter_sum() {
	awk '/^[a-zA-Z_:][a-zA-Z0-9_:]*_total[{ ]/ { sum += $NF } END { printf "%d\n", sum }' "$1"
}

# the value of one sample (name and an optional label match) in Prometheus text
prometheus_value() {
	local name=$1 match=${2:-}
	awk -v name="$name" -v match_="$match" '
		index($0, name "{") == 1 && index($0, match_) { print $NF; exit }' "${3:-/dev/stdin}"
}

@test "trellara run: check, snapshot, capture + applyd under pgbench; kill -9 capture, applyd, both, three times: restarted, identical" {
	source_init 1
	bg_start run trellara run --config "$FLOW_FILE"
	wait_running 180
	grep -q "check: no blockers" "$TEST_DIR/run.log"
	grep -q "trellara-snapshot --config $FLOW_FILE --create-tables" "$TEST_DIR/run.log"
	# capture moves the run to streaming once it reached the source, after
	# its process started: waited for, not raced
	wait_for -t 60 -m "capture moved the snapshot run to streaming" \
		'[ "$(psql_target "SELECT state FROM trellara.snapshot_runs")" = streaming ]'
	# the load lasts until the last kill's recovery, no longer
	bg_start load pgbench_until_stopped -c 2 -R 200
	wait_for -t 60 -m "applyd applies pgbench transactions" '[ "$(applied_transactions)" -gt 50 ]'
	for _ in 1 2 3; do
		kill_children capture
		kill_children applyd
		kill_children capture applyd
	done
	load_stop
	[ "$BG_STATUS" -eq 0 ]
	grep -q "number of transactions actually processed" "$TEST_DIR/pgbench.log"
	caught_up 180
	pgbench_compare
	[ "$(psql_target "SELECT count(*) FROM trellara.quarantine")" -eq 0 ]
	[ "$(state_value capture_restarts)" -eq 6 ]
	[ "$(state_value applyd_restarts)" -eq 6 ]
	grep -q "trellara-capture exited with 137 (killed by signal KILL).*restarting in" "$TEST_DIR/run.log"
	run -0 trellara status --config "$FLOW_FILE" --format json --rate-seconds 0
	[ "$(jq .supervisor.capture_restarts <<<"$output")" -eq 6 ]
	[ "$(jq .supervisor.applyd_restarts <<<"$output")" -eq 6 ]
	if [ -x "$REPO/bin/trellara-verify" ]; then
		run -0 trellara verify --config "$FLOW_FILE"
		[[ $output == *CONVERGED* ]]
	fi
	bg_stop run TERM 40
	[ "$BG_STATUS" -eq 0 ]
	no_flow_processes
	[ -x "$REPO/bin/trellara-verify" ] || skip "bin/trellara-verify is not built yet: the tables compared equal, trellara verify was not run"
}

# drained_and_stopped CAPTURE_PID APPLYD_PID: after trellara run's drain,
# both children are gone, each logged its drain, and the state says stopped
drained_and_stopped() {
	run ! kill -0 "$1"
	run ! kill -0 "$2"
	no_flow_processes
	grep -q "trellara-capture drained and exited" "$TEST_DIR/run.log"
	grep -q "trellara-applyd drained and exited" "$TEST_DIR/run.log"
	[ "$(state_value state)" = stopped ]
}

@test "SIGTERM to trellara run: the children drain and are gone, exit 0; the next run misses nothing and doubles nothing" {
	source_init 1
	bg_start run trellara run --config "$FLOW_FILE"
	wait_running 180
	capture=$(state_value capture_pid)
	applyd=$(state_value applyd_pid)
	source_load 12 &
	load=$!
	wait_for -t 60 '[ "$(applied_transactions)" -gt 50 ]'
	# under load: the drain must finish a target transaction and a stream sync
	started=$SECONDS
	bg_stop run TERM 40
	[ "$BG_STATUS" -eq 0 ]
	[ $((SECONDS - started)) -le "$TRELLARA_RUN_DRAIN_SECONDS" ]
	drained_and_stopped "$capture" "$applyd"
	applied=$(psql_target "SELECT applied_transactions FROM trellara.apply_checkpoint")
	wait "$load"
	# the source went on writing while nothing ran; the next run takes over
	bg_start run2 trellara run --config "$FLOW_FILE"
	wait_running 120
	grep -q "snapshot run is streaming: no copy needed" "$TEST_DIR/run2.log"
	caught_up 180
	pgbench_compare
	[ "$(psql_target "SELECT applied_transactions FROM trellara.apply_checkpoint")" -gt "$applied" ]
	[ "$(psql_target "SELECT count(*) FROM pgbench_history")" -eq "$(psql_source "SELECT count(*) FROM pgbench_history")" ]
	bg_stop run2 TERM 40
	[ "$BG_STATUS" -eq 0 ]
	no_flow_processes
}

@test "SIGTERM landing just as trellara run reaps its timer (gdb holds bash there): the children drain at once, exit 0" {
	# The race bash 5.2 loses: a blocking wait reaps the timer's sleep, and
	# a trapped SIGTERM arrives before bash records its exit; bash then
	# lists the timer as running for ever.  The old supervisor waited for
	# it (wait PID), which blocked until another child exited - and none
	# does until signalled: stuck until a second SIGTERM.
	source_init 1
	bg_start run trellara run --config "$FLOW_FILE"
	wait_running 180
	capture=$(state_value capture_pid)
	applyd=$(state_value applyd_pid)
	supervisor=$(bg_pid run)
	run timeout 60 gdb -q -batch -nx -p "$supervisor" -x "$BATS_TEST_DIRNAME/helpers/term-at-reap.gdb"
	[[ $output == *"term-at-reap: wait4 reaped "*"(sleep "*"; SIGTERM to $supervisor"* ]]
	bg_wait run 30
	[ "$BG_STATUS" -eq 0 ]
	drained_and_stopped "$capture" "$applyd"
	grep -q "SIGTERM: stopping" "$TEST_DIR/run.log"
	run ! grep -q "SIGTERM again" "$TEST_DIR/run.log"
}

@test "trellara run killed with SIGKILL leaves no orphan; a new run takes over" {
	source_init 1
	bg_start run trellara run --config "$FLOW_FILE"
	wait_running 180
	capture=$(state_value capture_pid)
	applyd=$(state_value applyd_pid)
	kill -KILL "$(bg_pid run)"
	bg_wait run 10
	# the children notice within a moment (parent-death signal, and the guard)
	wait_for -t $((TRELLARA_RUN_DRAIN_SECONDS + 5)) -m "children of the killed supervisor gone" \
		"! kill -0 $capture 2>/dev/null && ! kill -0 $applyd 2>/dev/null"
	wait_for -t 10 -m "no process of the flow left" no_flow_processes
	psql_source "UPDATE pgbench_branches SET bbalance = bbalance + 7"
	bg_start run2 trellara run --config "$FLOW_FILE"
	wait_running 120
	caught_up
	pgbench_compare
	bg_stop run2 TERM 40
	[ "$BG_STATUS" -eq 0 ]
}

@test "a quarantine stops trellara run with exit 1 naming trellara quarantine list; status --view alerts lists it and exits 1" {
	source_init 1
	bg_start run trellara run --config "$FLOW_FILE"
	wait_running 180
	caught_up
	psql_target "DROP TABLE pgbench_tellers"
	psql_source "UPDATE pgbench_tellers SET tbalance = tbalance + 1 WHERE tid = 1"
	bg_wait run 60
	[ "$BG_STATUS" -eq 1 ]
	grep -q "trellara quarantine list --config $FLOW_FILE" "$TEST_DIR/run.log"
	grep -q "stopping trellara-capture" "$TEST_DIR/run.log"
	no_flow_processes
	[ "$(state_value state)" = failed ]
	[ "$(state_value last_exit)" = applyd=1 ]

	run -1 --separate-stderr trellara status --config "$FLOW_FILE" --view alerts --rate-seconds 0
	[[ $output == *"alert quarantine_open: 1 transaction quarantined"* ]]
	[[ $output == *"trellara quarantine list --config $FLOW_FILE"* ]]
	[[ $output == *"trellara quarantine replay-ready --config $FLOW_FILE --transaction-id "* ]]
	# capture is not running either, but that is a warning, not an alert
	[[ $output != *capture_not_running* ]]
	run -1 --separate-stderr trellara status --config "$FLOW_FILE" --view alerts --format json --rate-seconds 0
	[ "$(jq -r '.alerts | map(.code) | join(",")' <<<"$output")" = quarantine_open ]
	run -0 --separate-stderr trellara status --config "$FLOW_FILE" --view diagnostics --rate-seconds 0
	[[ $output == *"warning capture_not_running"* ]]
	[[ $output == *"next: start capture"* ]]
	run -1 --separate-stderr trellara status --config "$FLOW_FILE" --view alerts --format prometheus --rate-seconds 0
	[ "$(prometheus_value trellara_status_alert 'code="quarantine_open"' <<<"$output")" = 1 ]

	# a second run stops the same way, at once
	run -1 trellara run --config "$FLOW_FILE" 3>&-
	[[ $output == *"trellara quarantine list --config $FLOW_FILE"* ]]
	no_flow_processes
}

@test "trellara status --format json has the documented fields; --format prometheus parses and its values move with the flow" {
	source_init 1
	bg_start run trellara run --config "$FLOW_FILE"
	wait_running 180
	caught_up
	run -0 --separate-stderr trellara status --config "$FLOW_FILE" --format json
	json=$output
	jq -e . <<<"$json" >/dev/null
	[ "$(jq -r .flow <<<"$json")" = "$SOURCE_ID:$DATASET_ID" ]
	[ "$(jq -r .view <<<"$json")" = report ]
	jq -e '.source.available == true and (.source.wal_lsn | test("^[0-9A-F]+/[0-9A-F]+$"))' <<<"$json"
	jq -e '.source.slot.exists and .source.slot.active and (.source.slot.lag_bytes | type == "number")' <<<"$json"
	jq -e '(.source.slot.retained_wal_bytes | type == "number") and (.source.slot.lag_seconds_basis | type == "string")' <<<"$json"
	jq -e '.source.slot.wal_retention_warn_bytes == 1073741824' <<<"$json"
	jq -e '.stream.available and .stream.writer_active and (.stream.corrupt | not) and .stream.frames > 0' <<<"$json"
	jq -e '(.stream.bytes > 0) and (.stream.acknowledged_lsn | type == "string") and (.stream.acknowledged_age_seconds >= 0)' <<<"$json"
	jq -e '(.stream.oldest_append_time | type == "string") and (.stream.newest_age_seconds >= 0) and .stream.group.name == "applyd"' <<<"$json"
	jq -e '.apply.available and .apply.checkpoint_exists and (.apply.applied_transactions | type == "number")' <<<"$json"
	jq -e '(.apply.skipped_duplicates | type == "number") and (.apply.transactions_per_second | type == "number")' <<<"$json"
	jq -e '(.apply.applied_through_lsn | type == "string") and (.apply.lag_bytes | type == "number")' <<<"$json"
	jq -e '.quarantine.open == 0 and .quarantine.oldest_age_seconds == null and .quarantine.entries == []' <<<"$json"
	jq -e '.snapshot.run.state == "streaming" and .snapshot.run.run_id == "initial"' <<<"$json"
	jq -e '.supervisor.available and .supervisor.running and .supervisor.state == "running"' <<<"$json"
	jq -e '.supervisor.capture_restarts == 0 and .supervisor.applyd_restarts == 0' <<<"$json"
	jq -e '.alert_count == 0 and (.problems | type == "array")' <<<"$json"
	run -0 trellara status --config "$FLOW_FILE"
	[[ $output == *"slot      $SLOT_NAME: active"* ]]
	[[ $output == *"snapshot    run initial: streaming"* ]]
	run -0 trellara status --config "$FLOW_FILE" --view alerts
	[ "$output" = "no alerts" ]

	trellara status --config "$FLOW_FILE" --format prometheus --rate-seconds 0 >"$TEST_DIR/before.prom"
	prometheus_parse "$TEST_DIR/before.prom"
	grep -q "^trellara_slot_lag_bytes{flow=\"$SOURCE_ID:$DATASET_ID\",source=\"$SOURCE_ID\"} [0-9]" "$TEST_DIR/before.prom"
	[ "$(prometheus_value trellara_snapshot_run_state 'state="streaming"' "$TEST_DIR/before.prom")" = 1 ]
	[ "$(prometheus_value trellara_status_up 'component="source"' "$TEST_DIR/before.prom")" = 1 ]
	applied_before=$(prometheus_value trellara_apply_transactions_total "" "$TEST_DIR/before.prom")
	next_before=$(prometheus_value trellara_stream_next_offset "" "$TEST_DIR/before.prom")
	# the daemons' own metrics files (capture.prom, applyd.prom): the sum of
	# their counters, before the load
	local f name
	local -A counters=()
	for name in capture applyd; do
		f=$METRICS_DIR/$name.prom
		[ -f "$f" ] || skip "trellara-$name does not write $f"
		prometheus_parse "$f"
		[ "$(stat -c %a "$f")" = 600 ]
		counters[$name]=$(counter_sum "$f")
	done

	source_load 3
	caught_up
	trellara status --config "$FLOW_FILE" --format prometheus >"$TEST_DIR/after.prom"
	prometheus_parse "$TEST_DIR/after.prom"
	[ "$(prometheus_value trellara_apply_transactions_total "" "$TEST_DIR/after.prom")" -gt "$applied_before" ]
	[ "$(prometheus_value trellara_stream_next_offset "" "$TEST_DIR/after.prom")" -gt "$next_before" ]
	grep -q '^trellara_apply_transactions_per_second{' "$TEST_DIR/after.prom"
	# the daemons keep theirs current: their counters moved with the load
	for name in capture applyd; do
		f=$METRICS_DIR/$name.prom
		wait_for -t 10 -m "$f counters moved" "prometheus_parse '$f' && [ \"\$(counter_sum '$f')\" -gt ${counters[$name]} ]"
	done
	bg_stop run TERM 40
	[ "$BG_STATUS" -eq 0 ]
}

@test "trellara status reports a server that is down and a stream that is missing as unavailable, never as zero" {
	write_flow_file "$FLOW_FILE" --set stream.min_free_bytes=1048576 --set observability.metrics_dir="\"$METRICS_DIR\""
	# the source's port with nothing listening; no stream directory; no supervisor
	sed -i "s|port=$SOURCE_PORT|port=$((SOURCE_PORT + 100))|" "$FLOW_FILE"
	run -0 --separate-stderr trellara status --config "$FLOW_FILE" --format json --rate-seconds 0
	json=$output
	jq -e '.source.available == false and (.source.error | test("cannot connect to the source"))' <<<"$json"
	jq -e '.source.wal_lsn == null and .source.slot.exists == null and .source.slot.lag_bytes == null' <<<"$json"
	jq -e '.stream.available == false and .stream.frames == null and .stream.next_offset == null' <<<"$json"
	# the target is up but has no checkpoint schema yet: known to be empty, not an error
	jq -e '.apply.available == true and .apply.checkpoint_schema_exists == false and .apply.applied_transactions == null' <<<"$json"
	jq -e '.supervisor.available == false and .supervisor.capture_restarts == null' <<<"$json"
	jq -e '[.problems[].code] | index("source_unavailable") != null and index("stream_not_created") != null' <<<"$json"
	[ "$(psql_target "SELECT count(*) FROM pg_namespace WHERE nspname = 'trellara'")" -eq 0 ]
	run -0 --separate-stderr trellara status --config "$FLOW_FILE" --format prometheus --rate-seconds 0
	prometheus_parse <<<"$output"
	[ "$(prometheus_value trellara_status_up 'component="source"' <<<"$output")" = 0 ]
	[ "$(prometheus_value trellara_status_up 'component="stream"' <<<"$output")" = 0 ]
	[[ $output != *trellara_slot_lag_bytes\{* ]]
	[[ $output != *trellara_stream_frames\{* ]]
	run -0 --separate-stderr trellara status --config "$FLOW_FILE"
	[[ $output == *"source      unavailable: cannot connect to the source database"* ]]
	[[ $output == *"stream      unavailable: no stream at"* ]]
	# usage and configuration errors
	run -64 trellara status --config "$FLOW_FILE" --view everything
	run -64 trellara status --config "$FLOW_FILE" --format yaml
	run -78 trellara status --config "$TEST_DIR/missing.yml"
	run -64 trellara run
	run -78 trellara run --config "$TEST_DIR/missing.yml"
}

@test "trellara run stops before anything when check finds blockers (exit 1, its report on stdout)" {
	psql_source "CREATE TABLE accounts (id int PRIMARY KEY)"
	write_flow_file "$FLOW_FILE" --set stream.min_free_bytes=1048576 --set observability.metrics_dir="\"$METRICS_DIR\""
	# no publication: a blocker
	run -1 trellara run --config "$FLOW_FILE" 3>&-
	[[ $output == *"trellara-check found blockers: nothing was started"* ]]
	[[ $output == *"$PUBLICATION_NAME"* ]]
	[ "$(state_value state)" = failed ]
	[ "$(state_value last_exit)" = check=1 ]
	[ "$(psql_source "SELECT count(*) FROM pg_replication_slots")" -eq 0 ]
	no_flow_processes
}
