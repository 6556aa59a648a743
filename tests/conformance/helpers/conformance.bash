# shellcheck shell=bash
#
# conformance.bash - the harness of tests/conformance/*.bats, the scenarios
# of PostgreSQL's own logical-replication tests (src/test/subscription/t/)
# run through a Trellara flow.  Every file starts with
#
#   load helpers/conformance
#
# It loads tests/bats/helpers/common.bash (two throwaway clusters per file,
# fresh databases per test, psql_source, psql_target, write_flow_file,
# bg_start, caught_up, assert_tables_equal ...; see there) and adds:
#
#   both SQL...            run SQL on the source and on the target (the
#                          scenarios make the subscriber's tables themselves)
#   conf_flow TABLES [PUBLICATION_TABLES] [write_flow_file ARGS...]
#                          the publication (FOR TABLE PUBLICATION_TABLES,
#                          default TABLES without "public.") and the flow file
#   conf_flow_file TABLES [ARGS...]   the flow file only
#   conf_run               `trellara run` in the background (check, snapshot,
#                          capture, applyd), and wait until it streams
#   conf_start_nocopy      capture --start-now and applyd, no snapshot: the
#                          scenarios' copy_data = false (each side keeps
#                          the rows it has)
#   conf_synced [TIMEOUT]  the target has applied everything the source
#                          wrote so far, nothing quarantined
#   assert_converged       trellara-verify answers CONVERGED (exit 0)
#   conf_stop              SIGTERM to `trellara run`: it drains, exit 0
#   check_blocker NAME [OBJECT]   trellara-check failed (exit 1) with a
#                          blocker item NAME (for OBJECT); CHECK_ITEM is its JSON
#
# Known failures: tests/conformance/KNOWN-FAILING lists tests that assert
# the right behaviour of a product bug not fixed yet, one a line:
#
#   FILE.bats :: TEST NAME :: one-line reason
#
# Such a test is skipped with "known failing: REASON" (so it shows in the
# TAP output); CONFORMANCE_RUN_KNOWN_FAILING=1 runs it anyway, to check a
# fix.  Nothing else skips a test of this directory silently.

# shellcheck source=tests/bats/helpers/common.bash
source "${BASH_SOURCE[0]%/*}/../../bats/helpers/common.bash"

CONFORMANCE_DIR=$(cd "${BASH_SOURCE[0]%/*}/.." && pwd)

setup() {
	trellara_setup
	conformance_setup
}

teardown() {
	trellara_teardown
}

conformance_setup() {
	export METRICS_DIR="$TEST_DIR/metrics"
	export TRELLARA_STATUS_INTERVAL_MS=200 TRELLARA_RECONNECT_BASE_MS=100
	export TRELLARA_RUN_BACKOFF_BASE_MS=100 TRELLARA_RUN_BACKOFF_CAP_MS=1000 TRELLARA_RUN_DRAIN_SECONDS=20
	known_failing_skip
}

# known_failing_skip: skip this test when KNOWN-FAILING names it
known_failing_skip() {
	[[ -z ${CONFORMANCE_RUN_KNOWN_FAILING:-} ]] || return 0
	local file=${BATS_TEST_FILENAME##*/} line f name reason
	[[ -f $CONFORMANCE_DIR/KNOWN-FAILING ]] || return 0
	while IFS= read -r line; do
		[[ $line == *' :: '*' :: '* && $line != '#'* ]] || continue
		f=${line%% :: *}
		line=${line#* :: }
		name=${line%% :: *}
		reason=${line#* :: }
		if [[ $f == "$file" && $name == "$BATS_TEST_DESCRIPTION" ]]; then
			skip "known failing: $reason"
		fi
	done <"$CONFORMANCE_DIR/KNOWN-FAILING"
}

both() {
	psql_source "$@" && psql_target "$@"
}

conf_flow_file() {
	local tables=$1
	shift
	write_flow_file "$FLOW_FILE" --tables "$tables" --set stream.min_free_bytes=1048576 \
		--set observability.metrics_dir="\"$METRICS_DIR\"" "$@"
}

conf_flow() {
	local tables=$1 pub=${2:-}
	shift
	(($# == 0)) || shift
	[[ -n $pub ]] || pub=${tables//public./}
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE $pub"
	conf_flow_file "$tables" "$@"
}

conf_run() {
	bg_start run trellara run --config "$FLOW_FILE"
	# a run that gave up (check, snapshot) ends the wait at once
	wait_for -t 120 -m "trellara run streams (check, snapshot, capture, applyd)" \
		"flow_ready || ! flow_alive"
	flow_ready || {
		echo "trellara run is not streaming: it exited (see run.log)" >&2
		return 1
	}
}

conf_start_nocopy() {
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
}

# flow_alive: trellara run (or, without it, applyd) still runs
flow_alive() {
	local name=run
	[[ -n ${TRELLARA_BG[run]:-} ]] || name=applyd
	[[ -n ${TRELLARA_BG[$name]:-} ]] && kill -0 "${TRELLARA_BG[$name]}" 2>/dev/null
}

quarantined() {
	psql_target "SELECT count(*) FROM trellara.quarantine"
}

# applied_through LSN: the target's checkpoint has applied through LSN
applied_through() {
	[ "$(psql_target "SELECT coalesce((SELECT applied_through_lsn >= '$1' FROM trellara.apply_checkpoint), false)")" = t ]
}

# conf_synced [TIMEOUT]: caught_up, but a flow that stopped (trellara run
# or applyd exited: a quarantine, a refusal) ends the wait at once
conf_synced() {
	local lsn
	lsn=$(source_flushed_lsn)
	wait_for -t "${1:-120}" -m "target caught up with $lsn" \
		"applied_through '$lsn' || ! flow_alive"
	applied_through "$lsn" || {
		echo "the flow stopped before the target caught up with $lsn (see run.log, applyd.log)" >&2
		return 1
	}
	[ "$(quarantined)" -eq 0 ]
}

assert_converged() {
	run -0 --separate-stderr trellara-verify --config "$FLOW_FILE"
	# shellcheck disable=SC2154 # set by bats' run
	[[ $output == *"result: CONVERGED"* ]]
}

conf_stop() {
	bg_stop run TERM 60
	[ "$BG_STATUS" -eq 0 ]
}

check_blocker() {
	local name=$1 object=${2:-}
	run -1 --separate-stderr trellara-check --config "$FLOW_FILE" --format json
	# shellcheck disable=SC2154 # set by bats' run
	CHECK_ITEM=$(jq -c --arg n "$name" --arg o "$object" \
		'[.checks[] | select(.name == $n and .status == "blocker" and ($o == "" or .object == $o))][0] // empty' <<<"$output")
	[ -n "$CHECK_ITEM" ] || {
		echo "no blocker $name${object:+ for $object} in: $output" >&2
		return 1
	}
}
