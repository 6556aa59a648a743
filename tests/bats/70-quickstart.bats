#!/usr/bin/env bats
# `make quickstart`: scripts/quickstart.sh builds, starts its own source
# and target clusters under ./target/quickstart, replicates pgbench under
# load and must end with verify saying CONVERGED; scripts/quickstart-stop.sh
# then leaves no process and no ./target/quickstart behind.  (No
# helpers/common: the quickstart starts its own clusters.)

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

@test "quickstart: replicates pgbench under load and verifies CONVERGED; quickstart-stop leaves nothing behind" {
	cd "$BATS_TEST_DIRNAME/../.."
	run scripts/quickstart.sh
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output == *"result: CONVERGED"* ]]
	[[ $output =~ Done\ in\ [0-9]+\.[0-9]s ]]
	# the flow is stopped, the clusters still run
	run ! pgrep -f -- "--config $PWD/target/quickstart/trellara.yml"
	quickstart_postgres >/dev/null

	run scripts/quickstart-stop.sh
	echo "$output"
	[ "$status" -eq 0 ]
	[ ! -e target/quickstart ]
	[ ! -L target/quickstart ]
	run ! quickstart_postgres
	# and again: nothing to stop is not an error
	run -0 scripts/quickstart-stop.sh
}
