#!/usr/bin/env bats
# `make quickstart`: scripts/quickstart.sh builds, starts its own source
# and target clusters under ./target/quickstart, replicates pgbench under
# load and must end with a cutover (--lock-source) whose verify says
# CONVERGED: the cutover row on the target, no Trellara process left, the
# source read-only for new transactions until the `--abort` it prints;
# scripts/quickstart-stop.sh then leaves no process and no
# ./target/quickstart behind.  (No helpers/common: the quickstart starts
# its own clusters; helpers/pg.bash only for psql.)

bats_require_minimum_version 1.5.0

setup_file() {
	cd "$BATS_TEST_DIRNAME/../.." || return 1
}

teardown_file() {
	# whatever happened, leave nothing running
	cd "$BATS_TEST_DIRNAME/../.." && scripts/quickstart-stop.sh --quiet >/dev/null 2>&1
	return 0
}

quickstart_postgres() {
	pgrep -af postgres | grep -F target/quickstart
}

# psql_url SECTION SQL: one statement, in a new session, on the database
# the flow file's SECTION.database_url names (source or target; read from
# the file: trellara config does not print a URL, it may hold a password)
psql_url() {
	local url
	url=$(awk -v section="$1:" '$0 == section { s = 1; next } /^[^ ]/ { s = 0 }
		s && $1 == "database_url:" { gsub(/"/, "", $2); print $2 }' target/quickstart/trellara.yml)
	[[ -n $url ]] || return 1
	"$(trellara_pg_psql_bin)" -X -q -At -v ON_ERROR_STOP=1 -d "$url" -c "$2"
}

# a Trellara process of the quickstart: one whose command line names its
# flow file (the supervisor, capture, applyd and cutover all get --config),
# or a pid the supervisor's state file names, still a trellara-* program
quickstart_trellara() {
	local key pid
	pgrep -af -- "target/quickstart/trellara.yml" && return 0
	for key in supervisor_pid capture_pid applyd_pid; do
		pid=$(sed -n "s/^$key=//p" target/quickstart/metrics/supervisor.state)
		[[ -n $pid ]] || continue
		grep -q trellara- "/proc/$pid/cmdline" 2>/dev/null && return 0
	done
	return 1
}

@test "quickstart: replicates pgbench under load, cuts over with --lock-source (CONVERGED, recorded, stopped, source read-only); quickstart-stop leaves nothing behind" {
	cd "$BATS_TEST_DIRNAME/../.."
	# shellcheck disable=SC1091 # trellara_pg_psql_bin
	source tests/bats/helpers/pg.bash
	run scripts/quickstart.sh
	echo "$output"
	quickstart_output=$output
	[ "$status" -eq 0 ]
	# the cutover's verify and its success line
	[[ $output == *"result: CONVERGED"* ]]
	[[ $output =~ flow\ quickstart:pgbench\ cut\ over\ at\ [^:]+:[0-9:]+Z:\ final\ LSN\ [0-9A-F]+/[0-9A-F]+,\ verify\ CONVERGED ]]
	# status shows the flow cut over
	[[ $output == *"cutover     cut_over at "* ]]
	[[ $output =~ Done\ in\ [0-9]+\.[0-9]s ]]

	# the cutover row in the target's checkpoint schema
	run -0 psql_url target \
		"SELECT state, verify_result, source_lock, completed_at IS NOT NULL FROM trellara.cutover WHERE source_id = 'quickstart' AND dataset_id = 'pgbench'"
	[ "$output" = "cut_over|CONVERGED|held|t" ]

	# no Trellara process left; the clusters still run
	[ -s target/quickstart/metrics/supervisor.state ]
	run ! quickstart_trellara
	quickstart_postgres >/dev/null

	# the source refuses a new write ...
	run ! psql_url source "CREATE TABLE after_cutover (id int)"
	echo "$output"
	[[ $output == *"read-only transaction"* ]]
	# ... until the command the last lines print makes it writable again
	abort_line=$(grep -E '^ +scripts/trellara cutover --config [^ ]+ --abort$' <<<"$quickstart_output")
	read -r -a abort_cmd <<<"$abort_line"
	run -0 "${abort_cmd[@]}"
	echo "$output"
	run -0 psql_url target "SELECT state, source_lock FROM trellara.cutover"
	[ "$output" = "cut_over|released" ]
	run -0 psql_url source "CREATE TABLE after_abort (id int)"

	run scripts/quickstart-stop.sh
	echo "$output"
	[ "$status" -eq 0 ]
	[ ! -e target/quickstart ]
	[ ! -L target/quickstart ]
	run ! quickstart_postgres
	# and again: nothing to stop is not an error
	run -0 scripts/quickstart-stop.sh
}
