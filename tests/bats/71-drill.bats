#!/usr/bin/env bats
# trellara drill: measured recovery on a pgbench flow that `trellara run`
# supervises (capture and applyd killed alternately with SIGKILL while
# pgbench runs; each kill's recovery time; the evidence JSON; the target
# identical and CONVERGED after it), a kill the flow does not recover
# from within the bound (exit 1, named), the refusals (64, 69, 78), the
# man page's options against --help; and soak's trend judge
# (scripts/soak-trend.sh): a growing series fails it, a flat noisy one
# passes.

load helpers/common

TABLES="public.pgbench_accounts,public.pgbench_branches,public.pgbench_tellers,public.pgbench_history"

setup() {
	trellara_setup
	export METRICS_DIR="$TEST_DIR/metrics"
	export TRELLARA_STATUS_INTERVAL_MS=200 TRELLARA_RECONNECT_BASE_MS=100
	# fast restarts: the drill kills children on purpose
	export TRELLARA_RUN_BACKOFF_BASE_MS=100 TRELLARA_RUN_BACKOFF_CAP_MS=1000 TRELLARA_RUN_MAX_RESTARTS=50
	export TRELLARA_RUN_DRAIN_SECONDS=20
	export TRELLARA_RUN_SNAPSHOT_ARGS=--create-tables
}

teardown() {
	[[ -z ${load:-} ]] || kill -TERM "$load" 2>/dev/null || true
	trellara_teardown
}

# pgbench tables on the source only, the publication and the DDL trigger
# from trellara-check --fix, target tables from the snapshot; then
# trellara run, until the flow is ready (what the drill reads first: the
# supervisor's state and trellara status's WAL position and checkpoint)
flow_running() {
	pgbench -q -i -s 1 -h "$SOURCE_HOST" -p "$SOURCE_PORT" "$SOURCE_DB" >/dev/null 2>&1
	psql_source "ALTER TABLE pgbench_history REPLICA IDENTITY FULL"
	write_flow_file "$FLOW_FILE" --tables "$TABLES" --set stream.min_free_bytes=1048576 \
		--set observability.metrics_dir="\"$METRICS_DIR\""
	run -0 trellara-check --config "$FLOW_FILE" --fix
	bg_start run trellara run --config "$FLOW_FILE"
	wait_for -t 120 -m "trellara run is running and trellara status reads the flow's checkpoint" flow_ready
}

@test "trellara drill under pgbench: capture and applyd killed alternately, each recovery measured; the evidence JSON; the target identical and CONVERGED" {
	flow_running
	# pgbench through the drill (2 clients, rate-limited: a shared
	# machine); stopped once it is done
	pgbench -n -c 2 -R 100 -T 120 -h "$SOURCE_HOST" -p "$SOURCE_PORT" "$SOURCE_DB" >"$TEST_DIR/pgbench.log" 2>&1 &
	load=$!
	wait_for -t 30 -m "applyd applies pgbench transactions" '[ "$(applied_transactions)" -gt 20 ]'
	local before_capture before_applyd history
	before_capture=$(state_value capture_pid) before_applyd=$(state_value applyd_pid)
	history=$(psql_source "SELECT count(*) FROM pgbench_history")

	run -0 --separate-stderr trellara drill --config "$FLOW_FILE" --kills 4 --seed 4242 \
		--min-pause 100 --max-pause 800 --timeout 40
	[[ $stderr == *"seed 4242: 4 kills"* ]]
	# pgbench was running all along
	kill -0 "$load"

	# the evidence file: 0600 in a 0700 directory
	local files=("$METRICS_DIR"/evidence/drill-*.json)
	[ "${#files[@]}" -eq 1 ]
	[[ ${files[0]##*/} =~ ^drill-[0-9]{8}T[0-9]{6}Z\.json$ ]]
	[ "$(stat -c %a "$METRICS_DIR/evidence")" = 700 ]
	[ "$(stat -c %a "${files[0]}")" = 600 ]
	local doc
	doc=$(cat "${files[0]}")

	# every kill recovered, alternating, and the statistics are ordered
	[ "$(jq -r .result <<<"$doc")" = pass ]
	[ "$(jq -r .seed <<<"$doc")" = 4242 ]
	[ "$(jq '.kills | length' <<<"$doc")" = 4 ]
	[ "$(jq -c '[.kills[].component]' <<<"$doc")" = '["capture","applyd","capture","applyd"]' ]
	[ "$(jq '[.kills[] | select(.recovered and .recovery_ms >= .restart_ms and .recovery_ms >= .applied_ms
		and .new_pid != .pid and .pause_ms >= 100 and .pause_ms <= 800)] | length' <<<"$doc")" = 4 ]
	[ "$(jq .recovery_ms.count <<<"$doc")" = 4 ]
	jq -e '.recovery_ms | .min <= .median and .median <= .max and .min > 0' <<<"$doc"
	# min and max are the extremes of the kills' own times
	[ "$(jq '[.kills[].recovery_ms] | min' <<<"$doc")" = "$(jq .recovery_ms.min <<<"$doc")" ]
	[ "$(jq '[.kills[].recovery_ms] | max' <<<"$doc")" = "$(jq .recovery_ms.max <<<"$doc")" ]
	# the first pids killed were the ones running before the drill
	[ "$(jq '.kills[0].pid' <<<"$doc")" = "$before_capture" ]
	[ "$(jq '.kills[1].pid' <<<"$doc")" = "$before_applyd" ]
	# the supervisor counted the same kills as restarts
	[ "$(state_value capture_restarts)" -eq 2 ]
	[ "$(state_value applyd_restarts)" -eq 2 ]
	# each kill's source position was applied: the checkpoint is past the last one
	local last_lsn
	last_lsn=$(jq -r '.kills[-1].source_lsn' <<<"$doc")
	[ "$(psql_target "SELECT applied_through_lsn >= '$last_lsn' FROM trellara.apply_checkpoint")" = t ]

	# the text report says the same: a line per kill, the summary, the file
	local line
	while IFS= read -r line; do
		[[ $output == *"$line"* ]] || { echo "not in the report: $line" >&2; return 1; }
	done < <(jq -r '(.kills[] | "kill \(.kill) \(.component) pid \(.pid) at \(.source_lsn): recovered in \(.recovery_ms) ms"),
		(.recovery_ms | "4 of 4 kills recovered: min \(.min) ms, median \(.median) ms, max \(.max) ms")' <<<"$doc")
	[[ $output == *"result: pass"* ]]
	[[ $output == *"evidence: ${files[0]}"* ]]

	# the load stops (its open transactions roll back); the flow ends identical
	kill -TERM "$load"
	wait "$load" || true
	load=
	[ "$(psql_source "SELECT count(*) FROM pgbench_history")" -gt "$history" ]
	caught_up 120
	assert_tables_equal pgbench_accounts pgbench_branches pgbench_tellers pgbench_history
	[ "$(psql_target "SELECT count(*) FROM trellara.quarantine")" -eq 0 ]
	run -0 trellara verify --config "$FLOW_FILE"
	[[ $output == *"result: CONVERGED"* ]]
	bg_stop run TERM 40
	[ "$BG_STATUS" -eq 0 ]
}

@test "trellara drill: a kill the flow does not recover from within --timeout is exit 1, named, with the evidence written" {
	# restarts 60 s after a death: longer than the drill's bound
	export TRELLARA_RUN_BACKOFF_BASE_MS=60000 TRELLARA_RUN_BACKOFF_CAP_MS=60000
	flow_running
	run -1 --separate-stderr trellara drill --config "$FLOW_FILE" --kills 2 --seed 3 --min-pause 0 --max-pause 0 \
		--timeout 3 --format json --output "$TEST_DIR/drill.json"
	[[ $stderr == *"kill 1: trellara-capture was not running again within 3s of its kill"* ]]
	[ "$(jq -r .result <<<"$output")" = fail ]
	[ "$(jq -r .reason <<<"$output")" = "kill 1: trellara-capture was not running again within 3s of its kill" ]
	[ "$(jq '.kills | length' <<<"$output")" = 1 ]
	[ "$(jq -r '.kills[0].recovered' <<<"$output")" = false ]
	[ "$(jq .recovery_ms.count <<<"$output")" = 0 ]
	[ "$(jq -S . "$TEST_DIR/drill.json")" = "$(jq -S . <<<"$output")" ]
}

@test "trellara drill refuses: bad arguments (64), a missing flow file (78), no supervisor running the flow (69), also in the default state place" {
	run -64 trellara drill
	run -64 trellara drill --config "$FLOW_FILE" --kills 0
	run -64 trellara drill --config "$FLOW_FILE" --format yaml
	run -64 trellara drill --config "$FLOW_FILE" --min-pause 9 --max-pause 8
	run -64 trellara drill --config "$FLOW_FILE" --bogus
	run -78 trellara drill --config "$TEST_DIR/missing.yml"
	psql_source "CREATE TABLE accounts (id int PRIMARY KEY)"
	# no observability.metrics_dir: the default place, where no trellara run is
	write_flow_file "$FLOW_FILE"
	run -69 --separate-stderr trellara drill --config "$FLOW_FILE"
	[[ $stderr == *"no \"trellara run\" supervises the flow"* ]]
	write_flow_file "$FLOW_FILE" --set observability.metrics_dir="\"$METRICS_DIR\""
	run -69 --separate-stderr trellara drill --config "$FLOW_FILE"
	[[ $stderr == *"no \"trellara run\" supervises the flow"* ]]
	[ ! -e "$METRICS_DIR/evidence" ] || [ -z "$(ls -A "$METRICS_DIR/evidence")" ]
}

@test "trellara-drill(1): its OPTIONS are --help's options" {
	local help man
	help=$(trellara drill --help | awk '
		/^options:/ { inside = 1; next }
		inside && /^$/ { exit }
		inside && match($0, "^ +(-[A-Za-z], +)?--[a-z][a-z0-9-]*( [A-Z][A-Z_.]*)?") {
			s = substr($0, RSTART, RLENGTH); sub(/^ +/, "", s); sub(/, +/, " ", s); print s }')
	man=$(awk '
		/^\.SH/ { inside = ($0 ~ /^\.SH +"?OPTIONS"? *$/); tag = 0; next }
		inside && /^\.TP/ { tag = 1; next }
		inside && tag { tag = 0; s = $0; gsub(/\\f[BIRP]/, "", s); gsub(/\\-/, "-", s)
			sub(/, +/, " ", s); gsub(/ +/, " ", s); sub(/ $/, "", s); print s }' "$REPO/man/man1/trellara-drill.1")
	[ -n "$help" ]
	diff <(printf '%s\n' "$help") <(printf '%s\n' "$man")
	grep -q '^\[drill\]=' <(sed -n '/declare -A DESCRIPTION/,/^)/p' "$REPO/scripts/trellara" | tr -d '\t')
}

# ---- soak's trend judge (no server needed)

# series FILE: a sample file for scripts/soak-trend.sh from awk code that
# prints "t value" lines (t in seconds)
series() {
	local file=$1
	shift
	awk "BEGIN { srand(7); $* }" >"$file"
}

@test "soak trend judge: a series growing 10 MB/h fails a 4 MB/h bound, also hidden by restarts; a flat one with noise passes; warm-ups excluded; too few samples fail closed" {
	local judge="$REPO/scripts/soak-trend.sh"
	# 2 h, a sample every 10 s: RSS of 50 MB growing 10 MB/h, +-1 MB noise
	series "$TEST_DIR/grow" 'for (t = 0; t <= 7200; t += 10) printf "%d %d\n", t, 50e6 + t * 10e6 / 3600 + (rand() - 0.5) * 2e6'
	run -1 "$judge" --bound-per-hour 4000000 --warmup-seconds 0 <"$TEST_DIR/grow"
	[ "$(jq -r .pass <<<"$output")" = false ]
	# the slope is 10 MB/h within the noise's reach
	jq -e '.slope_per_hour > 9e6 and .slope_per_hour < 11e6' <<<"$output"

	# flat, the same noise, and a saw tooth (a large transaction's buffers come and go)
	series "$TEST_DIR/flat" 'for (t = 0; t <= 7200; t += 10) printf "%d %d\n", t, 50e6 + (rand() - 0.5) * 2e6 + ((t % 600) < 60 ? 8e6 : 0)'
	run -0 "$judge" --bound-per-hour 4000000 --warmup-seconds 0 <"$TEST_DIR/flat"
	[ "$(jq -r .pass <<<"$output")" = true ]
	jq -e '.slope_per_hour < 4e6 and .slope_per_hour > -4e6' <<<"$output"
	[ "$(jq .samples <<<"$output")" = 721 ]

	# a start-up ramp (caches filling in the first 10 minutes) then flat:
	# fails without the warm-up, passes with it
	series "$TEST_DIR/ramp" 'for (t = 0; t <= 3600; t += 10) printf "%d %d\n", t, 20e6 + (t < 600 ? t * 30e6 / 600 : 30e6) + (rand() - 0.5) * 1e6'
	run -1 "$judge" --bound-per-hour 4000000 --warmup-seconds 0 <"$TEST_DIR/ramp"
	run -0 "$judge" --bound-per-hour 4000000 --warmup-seconds 600 <"$TEST_DIR/ramp"
	[ "$(jq .samples <<<"$output")" = 301 ]

	# a leak of 10 MB/h inside each 5-minute lifetime of a process killed
	# and restarted (segment = its pid): one line through every sample is
	# flat and passes, the slope inside the lifetimes fails
	series "$TEST_DIR/killed" 'for (t = 0; t <= 7200; t += 10) printf "%d %d p%d\n", t, 30e6 + (t % 300) * 10e6 / 3600 + (rand() - 0.5) * 2e5, int(t / 300)'
	run -0 "$judge" --bound-per-hour 4000000 < <(awk '{ print $1, $2 }' "$TEST_DIR/killed")
	run -1 "$judge" --bound-per-hour 4000000 <"$TEST_DIR/killed"
	[ "$(jq .segments <<<"$output")" = 25 ]
	jq -e '.slope_per_hour > 9e6 and .slope_per_hour < 11e6' <<<"$output"
	# no leak, but each restarted process fills 5 MB in its first 30 s:
	# the restarts' own warm-up is left out with --segment-warmup-seconds
	series "$TEST_DIR/restarts" 'for (t = 0; t <= 7200; t += 10) printf "%d %d p%d\n", t, 30e6 + ((t % 300) < 30 ? (t % 300) * 5e6 / 30 : 5e6) + (rand() - 0.5) * 2e5, int(t / 300)'
	run -1 "$judge" --bound-per-hour 4000000 <"$TEST_DIR/restarts"
	run -0 "$judge" --bound-per-hour 4000000 --segment-warmup-seconds 30 <"$TEST_DIR/restarts"

	# fewer than 3 samples after the warm-up: no trend, a failure
	run -1 "$judge" --bound-per-hour 1 --warmup-seconds 0 <<<$'0 1\n10 1'
	[[ $(jq -r .reason <<<"$output") == *"2 samples"* ]]
	# bad input: exit 65 naming the line
	run -65 --separate-stderr "$judge" --bound-per-hour 1 --warmup-seconds 0 <<<$'0 1\nten 2\n'
	[[ $stderr == *"line 2"* ]]
	run -64 "$judge" --warmup-seconds 0 </dev/null
}
