#!/usr/bin/env bats
# trellara chaos: the registry names every entry of the failure matrix,
# an applicable entry that nothing ran makes the run FAIL, the report is
# made only from a valid run file (and refuses others with 65 and the
# byte offset), escapes what it shows, and `make
# verify-correctness-report` notices a stale report.  No database needed:
# this file loads helpers/nodb, which starts no server.

bats_require_minimum_version 1.5.0

load helpers/nodb

SIM="$REPO/build/sim/trellara-sim"

need_sim() {
	[ -x "$SIM" ] || {
		echo "build/sim/trellara-sim is missing: run \"make sim\" first" >&2
		return 1
	}
}

# The failure matrix, as ../shared/CHAOS-MATRIX.md names it: the 28
# simulations, and the curated rows as "NUMBER NAME" (the file numbers
# 61 rows, 1 to 61).
MATRIX_SIMULATIONS="publish_ack_loss crash_after_publish_before_source_ack source_failover_after_publish_before_ack
duplicate_delivery target_failure_before_commit target_quarantine_repair_replay checkpoint_failure_during_apply
stream_ack_loss_after_apply snapshot_source_crash_during_table_copy snapshot_relay_crash_during_table_copy
snapshot_target_crash_during_table_copy snapshot_duplicate_copy_attempt snapshot_ddl_during_table_copy
snapshot_handoff_recorded_before_stream_start strict_chunk_relay_crash_after_chunks_before_manifest
strict_chunk_relay_crash_after_manifest_before_source_ack strict_chunk_manifest_arrives_with_missing_chunk
strict_chunk_manifest_arrives_before_chunks strict_chunk_target_crash_after_staging_before_commit
fleet_fanin_offline_stores_publish_with_gaps fleet_fanin_late_store_recovery_completes_epoch
fleet_fanin_duplicate_store_transaction_replay fleet_fanin_conflicting_duplicate_quarantine
qualification_source_promotion_while_relay_disconnected qualification_broker_outage_quorum_loss
qualification_target_restart_during_apply qualification_object_store_success_catalog_timeout
qualification_twenty_four_hour_soak_large_transaction_memory_ceiling"

# The project's own simulations, which the matrix has no row for: the
# cutover's (family "cutover", sim/model_cutover.c), the split copy's
# (family "snapshot split", sim/world.c) and the broker's leftovers
# (family "broker", sim/world.c).
CUTOVER_SIMULATIONS="cutover_killed_after_lock cutover_killed_while_waiting_for_apply cutover_killed_before_stop"
SPLIT_SIMULATIONS="snapshot_split_killed_after_range_commit snapshot_split_range_changed_before_resume snapshot_split_killed_mid_range"
BROKER_SIMULATIONS="broker_host_crash_loses_unsynced broker_leftovers_after_capture_restart"
PROJECT_SIMULATIONS="$CUTOVER_SIMULATIONS $SPLIT_SIMULATIONS $BROKER_SIMULATIONS"

MATRIX_CURATED="1 relay_before_broker_publish
2 relay_after_broker_publish_before_source_feedback
3 source_failover_after_publish_before_ack
4 source_failover_slot_unsynced
5 source_failover_slot_disabled
6 source_slot_abandoned_idle_timeout
7 broker_publish_failure
8 local_stream_index_rebuild
9 local_stream_publish_ack_after_fsync_durability
10 applier_before_target_commit
11 applier_after_target_commit_before_stream_ack
12 duplicate_transaction_replay
13 target_schema_missing
14 target_update_delete_zero_rows
15 filtered_reseed_preserves_out_of_scope_rows
16 pgoutput_schema_change_during_stream
17 pgoutput_row_without_relation_metadata
18 source_schema_handoff_recovery
19 pgoutput_dml_truncate_envelope_mapping
20 pgoutput_ddl_only_boundary
21 pgoutput_mixed_ddl_dml_boundary
22 pgoutput_keepalive_reports_last_durable_ack
23 missing_replica_identity
24 default_replica_identity_primary_key_apply
25 default_replica_identity_key_change_apply
26 unchanged_toast_columns_preserved
27 snapshot_duplicate_copy_attempt
28 snapshot_incomplete_copy_resume
29 snapshot_source_crash_during_copy
30 snapshot_relay_crash_during_copy
31 snapshot_target_crash_during_copy
32 snapshot_copy_failure_marked_recoverable
33 snapshot_invalid_state_regression
34 snapshot_exported_visibility_boundary
35 partition_manifest_missing_chunk
36 partition_chunk_routing_header_mismatch
37 partition_commit_marker_ack_ambiguous
38 partition_commit_marker_manifest_mismatch
39 strict_chunk_manifest_missing_chunk
40 strict_chunk_out_of_order_arrival
41 strict_chunk_relay_crash_after_chunks_before_manifest
42 strict_chunk_partial_publish_failure
43 strict_chunk_relay_crash_after_manifest_before_source_ack
44 strict_chunk_target_crash_after_staging_before_commit
45 protocol_property_chunk_manifest_reconstruction
46 strict_chunk_checksum_tampering
47 barrier_conflicting_duplicate_messages
48 partition_applier_before_ack
49 fleet_fanin_offline_stores_publish_with_gaps
50 fleet_fanin_late_store_recovery
51 fleet_fanin_duplicate_store_replay
52 fleet_fanin_conflicting_duplicate_quarantine
53 qualification_source_promotion_while_relay_disconnected
54 qualification_broker_outage_quorum_loss
55 qualification_target_restart_during_apply
56 qualification_object_store_success_catalog_timeout
57 qualification_twenty_four_hour_soak_large_transaction_memory_ceiling
58 snapshot_ddl_during_copy
59 snapshot_handoff_recorded_before_stream_start
60 repair_and_replay_ready
61 quarantine_replay_ready_requires_exact_boundary"

# run_file RESULT STATUS NAME [TREE]: a hand-written trellara-chaos-run/1
# file with one simulation (publish_ack_loss, passed), one curated row
# NAME in STATUS (failed: with its invariant, detail and reproduce), and
# one failed random schedule of seed 17.
run_file() {
	local result=$1 status=$2 name=$3 tree=${4:-0123456789abcdef0123456789abcdef01234567}
	jq -n --arg result "$result" --arg status "$status" --arg name "$name" --arg tree "$tree" '
	def counters: {transactions: 12, duplicates_skipped: 3, chunks: 0, tables_copied: 0, crashes: 2,
		power_losses: 1, steps: 400};
	{format: "trellara-chaos-run/1", result: $result, result_reason: null, seed: 5, schedules: 2,
	 variant: "none", scenario: null, revision: "89abcdef0123456789abcdef0123456789abcdef", tree: $tree,
	 dirty: false, build: {cc: "gcc", cflags: "-O2 -g"}, started_at: "2026-12-02T00:00:00Z",
	 duration_ms: 1500, schedules_per_second: 1.333,
	 totals: {entries: 2, pass: 1, fail: 1},
	 simulations: [{name: "publish_ack_loss", family: "base", matrix_row: 2, status: "pass", reason: null,
		invariant: "source_checkpoint_after_broker_ack", check: "the check", failed_invariant: null,
		detail: null, seeds: [5], failing_seed: null, trace_digest: "00000000000000aa", counters: counters,
		reproduce: "trellara chaos run --scenario publish_ack_loss --seed 5",
		live_test: {file: "tests/bats/20-capture.bats", name: "a live test"}, recovery: "none needed: automatic"}],
	 scenarios: [{number: 12, name: $name, boundary: "strict_transaction_order", status: $status, reason: null,
		invariant: "transaction_dedup_before_reapply", check: "applied once",
		failed_invariant: "transaction_dedup_before_reapply", detail: "xid 7 applied twice at step 31",
		seeds: [5], failing_seed: 5, trace_digest: "00000000000000bb", counters: counters,
		reproduce: ("trellara chaos run --scenario " + $name + " --seed 5"), live_test: null,
		recovery: "trellara quarantine replay-ready --config FILE --transaction-id XID --commit-lsn LSN"}],
	 exploration: {schedules: 2, passed: 1, failed: 1, not_run: 0, digest: "00000000000000cc",
		counters: counters,
		failures: [{seed: 17, index: 1, invariant: "target_equals_source", detail: "table t key 4 differs",
			trace_digest: "00000000000000dd", replay: "trellara chaos run --seed 17 --schedules 1"}]}}'
}

@test "trellara chaos list names every simulation and every curated row of the matrix, by number" {
	need_sim
	local name n sims rows
	run -0 trellara chaos list --format json
	sims=$(jq -r '.[] | select(.kind == "simulation") | .name' <<<"$output" | sort)
	rows=$(jq -r '.[] | select(.kind == "curated") | "\(.number) \(.name)"' <<<"$output")
	[ "$(tr ' ' '\n' <<<"$MATRIX_SIMULATIONS" | grep -c .)" -eq 28 ]
	# shellcheck disable=SC2020 # both blanks and newlines become newlines
	diff <(tr ' \n' '\n\n' <<<"$MATRIX_SIMULATIONS $PROJECT_SIMULATIONS" | grep . | sort) <(printf '%s\n' "$sims")
	diff <(printf '%s\n' "$MATRIX_CURATED") <(printf '%s\n' "$rows")
	# every entry has an invariant and a check, and a not-applicable one
	# says why; simulations have one of the matrix's five families, or
	# the project's own (cutover, no matrix row)
	[ "$(jq '[.[] | select((.invariant | length) == 0 or (.check | length) == 0)] | length' <<<"$output")" -eq 0 ]
	[ "$(jq -r '[.[] | select(.kind == "simulation") | .family] | unique | join(",")' <<<"$output")" = \
		"base,broker,cutover,fleet fan-in,qualification,snapshot handoff,snapshot split,strict chunk" ]
	[ "$(jq -r '[.[] | select(.kind == "simulation" and .family == "cutover") | .name] | sort | join(" ")' <<<"$output")" = \
		"$(tr ' ' '\n' <<<"$CUTOVER_SIMULATIONS" | sort | paste -sd ' ')" ]
	[ "$(jq -r '[.[] | select(.kind == "simulation" and .family == "snapshot split") | .name] | sort | join(" ")' <<<"$output")" = \
		"$(tr ' ' '\n' <<<"$SPLIT_SIMULATIONS" | sort | paste -sd ' ')" ]
	[ "$(jq -r '[.[] | select(.kind == "simulation" and .family == "broker") | .name] | sort | join(" ")' <<<"$output")" = \
		"$BROKER_SIMULATIONS" ]
	[ "$(jq '[.[] | select((.family == "cutover" or .family == "snapshot split" or .family == "broker") and .matrix_row != null)] | length' <<<"$output")" -eq 0 ]
	[ "$(jq '[.[] | select(.kind == "curated") | select(.boundary == null)] | length' <<<"$output")" -eq 0 ]
	# what the matrix itself says does not exist here is not applicable
	# (partitioned scale mode, fleet fan-in, object store / catalog), with
	# a reason; nothing is not applicable without one
	[ "$(jq -r '[.[] | select(.kind == "curated" and .not_applicable_reason == null) | .number |
		select(. >= 35 and . <= 38 or . == 48 or (. >= 49 and . <= 52) or . == 56)] | length' <<<"$output")" -eq 0 ]
	[ "$(jq -r '[.[] | select(.kind == "simulation" and (.name | test("^fleet_fanin_|object_store")) and
		.not_applicable_reason == null)] | length' <<<"$output")" -eq 0 ]
	[ "$(jq '[.[] | select(.not_applicable_reason != null and (.not_applicable_reason | length) < 40)] | length' <<<"$output")" -eq 0 ]
	# the text list shows each name too
	run -0 trellara chaos list
	for name in $MATRIX_SIMULATIONS $PROJECT_SIMULATIONS; do
		grep -qE "^  [a-z -]+ +$name( |$)" <<<"$output" || { echo "text list lacks simulation $name" >&2; false; }
	done
	while read -r n name; do
		grep -qE "^ *$n $name " <<<"$output" || { echo "text list lacks row $n $name" >&2; false; }
	done <<<"$MATRIX_CURATED"
	[[ $output == *"simulations: $((28 + $(wc -w <<<"$PROJECT_SIMULATIONS"))) ("* ]]
	[[ $output == *"curated matrix: 61 rows ("* ]]
}

@test "every live test the registry names is an @test of that bats file, and every recovery command exists" {
	need_sim
	local file name cmd sub opt n=0
	run -0 trellara chaos list --format json
	local list=$output
	while IFS=$'\t' read -r file name; do
		n=$((n + 1))
		[ -f "$REPO/$file" ] || { echo "no such bats file: $file" >&2; false; }
		grep -qxF "@test \"$name\" {" "$REPO/$file" || { echo "$file has no @test \"$name\"" >&2; false; }
	done < <(jq -r '.[] | select(.live_test != null) | [.live_test.file, .live_test.name] | @tsv' <<<"$list")
	[ "$n" -ge 20 ]
	# each "trellara SUB --opt ..." in a recovery is a subcommand whose
	# --help lists those options
	n=0
	while IFS= read -r cmd; do
		n=$((n + 1))
		sub=$(awk '{print $2}' <<<"$cmd")
		run -0 env PATH="/usr/bin:/bin" "$REPO/scripts/trellara" help "$sub"
		# shellcheck disable=SC2013 # options are single words
		for opt in $(grep -oE -- '--[a-z][a-z-]*' <<<"$cmd"); do
			grep -qE -- "(^|[ ,])$opt( |$)" <<<"$output" || { echo "trellara $sub has no option $opt: $cmd" >&2; false; }
		done
	done < <(jq -r '.[] | .recovery // empty' <<<"$list" | grep -oE 'trellara [a-z]+( [a-z-]+)?( --[a-z-]+( [A-Z.]+)?)*' | sort -u)
	[ "$n" -ge 5 ]
	# an entry is either applicable with a recovery, or not applicable
	# with a reason of its own
	[ "$(jq '[.[] | select(.not_applicable_reason == null and .recovery == null)] | length' <<<"$list")" -eq 0 ]
}

@test "every applicable entry runs; a run file with one not run is reported FAIL, and one claiming PASS is refused" {
	need_sim
	# the registry: no applicable entry without a simulation (such an
	# entry would be not_run and make every run FAIL)
	run -0 trellara chaos list --format json
	[ "$(jq '[.[] | select(.not_applicable_reason == null and (.implemented | not))] | length' <<<"$output")" -eq 0 ]
	[ "$(jq '[.[] | select(.not_applicable_reason == null)] | length' <<<"$output")" -ge 60 ]
	# a run file with a not_run entry: its report says FAIL, and why
	run_file FAIL not_run duplicate_transaction_replay | jq '.scenarios[0].failed_invariant = null | .scenarios[0].detail = null' \
		>"$TEST_DIR/not-run.json"
	run -0 trellara chaos report --input "$TEST_DIR/not-run.json" --output "$TEST_DIR/not-run.html"
	grep -qF '<p class="banner FAIL">FAIL</p>' "$TEST_DIR/not-run.html"
	grep -qF "Not run, which fails the run too: 1 applicable entry" "$TEST_DIR/not-run.html"
	# only not-applicable entries checked: nothing checked is FAIL too
	run -1 trellara chaos run --scenario partition_manifest_missing_chunk --format json
	[ "$(jq -r '.result + " " + .result_reason + " " + .scenarios[0].status' <<<"$output")" = \
		"FAIL nothing was checked not_applicable" ]
	# and a run file that claims PASS with a not_run entry is refused
	run_file PASS not_run duplicate_transaction_replay | jq '.exploration.failed = 0 | .exploration.failures = []' \
		>"$TEST_DIR/claims-pass.json"
	run -65 trellara chaos report --input "$TEST_DIR/claims-pass.json" --output "$TEST_DIR/r.html"
	[[ $output == *'"'"$TEST_DIR/claims-pass.json"'": byte '*': result is PASS but "duplicate_transaction_replay" is not_run'* ]]
	[ ! -e "$TEST_DIR/r.html" ]
}

@test "the report of a FAIL run shows FAIL, the failures and their replay commands, and the run's facts" {
	need_sim
	run_file FAIL fail duplicate_transaction_replay >"$TEST_DIR/run.json"
	run -0 trellara chaos report --input "$TEST_DIR/run.json" --output "$TEST_DIR/report.html"
	[ -z "$output" ]
	local html
	html=$(cat "$TEST_DIR/report.html")
	[ "$(head -2 "$TEST_DIR/report.html" | tail -1)" = \
		"<!-- trellara-chaos-report revision=89abcdef0123456789abcdef0123456789abcdef tree=0123456789abcdef0123456789abcdef01234567 -->" ]
	[[ $html == *'<p class="banner FAIL">FAIL</p>'* ]]
	[[ $html != *'banner PASS'* ]]
	[[ $html == *"replay: <code>trellara chaos run --seed 17 --schedules 1</code>"* ]]
	[[ $html == *"replay: <code>trellara chaos run --scenario duplicate_transaction_replay --seed 5</code>"* ]]
	[[ $html == *"xid 7 applied twice at step 31"* ]]
	[[ $html == *"table t key 4 differs"* ]]
	[[ $html == *'<td class="fail">fail</td>'* ]]
	[[ $html == *"<h3>base</h3>"* ]]
	[[ $html == *"-O2 -g"* ]]
	[[ $html == *"2026-12-02T00:00:00Z"* ]]
	[[ $html == *"<td>1500</td>"* ]]
	[[ $html == *"transactions 12, duplicates_skipped 3"* ]]
	# the same file with result PASS contradicts its failures: refused
	jq '.result = "PASS"' "$TEST_DIR/run.json" >"$TEST_DIR/pass.json"
	run -65 trellara chaos report --input "$TEST_DIR/pass.json" --output "$TEST_DIR/pass.html"
	[[ $output == *'result is PASS but "duplicate_transaction_replay" is fail'* ]]
	[ ! -e "$TEST_DIR/pass.html" ]
}

@test "report refuses a file that is not a trellara-chaos-run/1 with 65, naming the file and the byte offset" {
	need_sim
	local f=$TEST_DIR/x.json
	printf '{"format": "trellara-status/1"}' >"$f"
	run -65 trellara chaos report --input "$f" --output "$TEST_DIR/o.html"
	[ "$output" = "trellara-sim: \"$f\": byte 11: not a trellara-chaos-run/1 file: member \"format\" is not \"trellara-chaos-run/1\"" ]
	printf '[1, 2]' >"$f"
	run -65 trellara chaos report --input "$f" --output "$TEST_DIR/o.html"
	[[ $output == *"\"$f\": byte 0: not a trellara-chaos-run/1 file: the top level is array, not object" ]]
	printf '{"format": "trellara-chaos-run/1",\n "result": "PASS", "seed": -1' >"$f"
	run -65 trellara chaos report --input "$f" --output "$TEST_DIR/o.html"
	[[ $output == *"\"$f\": byte 64: not a trellara-chaos-run/1 file: bad JSON: unexpected end of input"* ]]
	printf '{"format": "trellara-chaos-run/1", "result": "maybe"}' >"$f"
	run -65 trellara chaos report --input "$f" --output "$TEST_DIR/o.html"
	[[ $output == *"byte 45: not a trellara-chaos-run/1 file: result \"maybe\" is neither PASS nor FAIL" ]]
	run_file FAIL fail x | jq 'del(.exploration)' >"$f"
	run -65 trellara chaos report --input "$f" --output "$TEST_DIR/o.html"
	[[ $output == *"byte 0: not a trellara-chaos-run/1 file: member \"exploration\" is missing" ]]
	run_file FAIL fail x | jq -c '.tree = "abc --> <script>"' >"$f"
	run -65 trellara chaos report --input "$f" --output "$TEST_DIR/o.html"
	[[ $output == *"tree is not a hex object name" ]]
	run -65 trellara chaos report --input "$TEST_DIR/missing.json" --output "$TEST_DIR/o.html"
	[[ $output == *"cannot read \"$TEST_DIR/missing.json\": No such file or directory" ]]
	[ ! -e "$TEST_DIR/o.html" ]
	# usage: both files are required
	run -64 trellara chaos report --input "$f"
}

@test "the report HTML-escapes every text from the run file" {
	need_sim
	run_file FAIL fail 'evil<b>&"x'"'"'</b>' |
		jq '.simulations[0].family = "fam<i>ly" | .build.cflags = "-DX=\"<&>\""' >"$TEST_DIR/run.json"
	run -0 trellara chaos report --input "$TEST_DIR/run.json" --output "$TEST_DIR/report.html"
	local html
	html=$(cat "$TEST_DIR/report.html")
	[[ $html == *'<code>evil&lt;b&gt;&amp;&quot;x&#39;&lt;/b&gt;</code>'* ]]
	[[ $html == *'<h3>fam&lt;i&gt;ly</h3>'* ]]
	[[ $html == *'-DX=&quot;&lt;&amp;&gt;&quot;'* ]]
	[[ $html != *'<b>'* ]]
	[[ $html != *'<i>'* ]]
	[[ $html != *'"<&>"'* ]]
}

@test "a run's text output and results are the same for the same seed, byte for byte" {
	need_sim
	run -0 trellara chaos run --seed 42 --schedules 50
	local first=$output
	run -0 trellara chaos run --seed 42 --schedules 50
	[ "$output" = "$first" ]
	[[ $first == "trellara chaos run: seed 42, 50 schedules, variant none"* ]]
	trellara chaos run --seed 42 --schedules 50 --format json --output "$TEST_DIR/a.json" 2>/dev/null || true
	trellara chaos run --seed 42 --schedules 50 --format json --output "$TEST_DIR/b.json" 2>/dev/null || true
	local strip='del(.started_at, .duration_ms, .schedules_per_second)'
	[ "$(jq -S "$strip" "$TEST_DIR/a.json")" = "$(jq -S "$strip" "$TEST_DIR/b.json")" ]
	[ "$(jq -r .format "$TEST_DIR/a.json")" = trellara-chaos-run/1 ]
	[ "$(jq .exploration.schedules "$TEST_DIR/a.json")" -eq 50 ]
	# another seed is another run
	trellara chaos run --seed 43 --schedules 50 --format json --output "$TEST_DIR/c.json" 2>/dev/null || true
	[ "$(jq .seed "$TEST_DIR/c.json")" -eq 43 ]
}

@test "make verify-correctness-report passes for a report of the current source and fails on a stale one" {
	need_sim
	local tree
	tree=$("$REPO/sim/source-info.sh" tree)
	[[ $tree =~ ^[0-9a-f]{40}$ ]]
	run_file FAIL fail x "$tree" >"$TEST_DIR/run.json"
	run -0 trellara chaos report --input "$TEST_DIR/run.json" --output "$TEST_DIR/fresh.html"
	run -0 make -s -C "$REPO" verify-correctness-report CORRECTNESS_REPORT="$TEST_DIR/fresh.html"
	[[ $output == *"describes the current source (tree $tree)"* ]]
	run_file FAIL fail x 1111111111111111111111111111111111111111 >"$TEST_DIR/old.json"
	run -0 trellara chaos report --input "$TEST_DIR/old.json" --output "$TEST_DIR/stale.html"
	run -2 make -s -C "$REPO" verify-correctness-report CORRECTNESS_REPORT="$TEST_DIR/stale.html"
	[[ $output == *"\"$TEST_DIR/stale.html\" is stale: generated from source tree 1111111111111111111111111111111111111111"*", the source is now $tree"* ]]
	[[ $output == *'hint: run "make correctness-report"'* ]]
	run -2 make -s -C "$REPO" verify-correctness-report CORRECTNESS_REPORT="$TEST_DIR/none.html"
	[[ $output == *"\"$TEST_DIR/none.html\" does not exist"* ]]
	printf '<html>not a report</html>\n' >"$TEST_DIR/other.html"
	run -2 make -s -C "$REPO" verify-correctness-report CORRECTNESS_REPORT="$TEST_DIR/other.html"
	[[ $output == *"is not a trellara chaos report"* ]]
}

@test "the source tree hash follows the source files, not docs or tests" {
	need_sim
	# a copy of the repository's source, so the real one is left alone
	local copy=$TEST_DIR/repo before after
	mkdir -p "$copy"
	git -C "$copy" init -q
	(cd "$REPO" && git ls-files -z --cached --others --exclude-standard -- Makefile common cmd include sim tests/unit |
		xargs -0 cp --parents -t "$copy")
	git -C "$copy" add -A
	git -C "$copy" -c user.name=t -c user.email=t@t commit -qm base
	before=$("$copy/sim/source-info.sh" tree)
	[ "$before" = "$("$REPO/sim/source-info.sh" tree)" ]
	mkdir -p "$copy/docs" && echo report >"$copy/docs/correctness-report.html"
	echo '/* unit */' >>"$copy/tests/unit/unit.h"
	[ "$("$copy/sim/source-info.sh" tree)" = "$before" ]
	echo '/* changed */' >>"$copy/sim/report.c"
	after=$("$copy/sim/source-info.sh" tree)
	[[ $after =~ ^[0-9a-f]{40}$ ]]
	[ "$after" != "$before" ]
	# committed or not, the same files give the same hash
	git -C "$copy" -c user.name=t -c user.email=t@t commit -qam change
	[ "$("$copy/sim/source-info.sh" tree)" = "$after" ]
	# a new, untracked source file counts too
	echo 'int x;' >"$copy/sim/new.c"
	[ "$("$copy/sim/source-info.sh" tree)" != "$after" ]
}

@test "trellara-sim links without libpq or libyaml" {
	need_sim
	run -0 ldd "$SIM"
	[[ $output != *libpq* ]]
	[[ $output != *libyaml* ]]
	# zlib it does link: the stream's frame codec inflates compressed frames
	run -0 nm -u "$SIM"
	[[ $output != *" PQ"* ]]
}

@test "usage errors are 64 with a hint; --help and --version exit 0" {
	need_sim
	run -0 trellara chaos --help
	[[ $output == "usage: trellara chaos run"* ]]
	run -0 trellara chaos --version
	[ "$output" = "trellara-sim $(sed -n 's/^#define TRELLARA_VERSION "\(.*\)"$/\1/p' "$REPO/include/trellara/defaults.h")" ]
	run -64 --separate-stderr trellara chaos
	[[ $stderr == *"a command is required"*'hint: run "trellara chaos --help"'* ]]
	run -64 trellara chaos frobnicate
	run -64 trellara chaos run --seed -1
	run -64 trellara chaos run --seed 18446744073709551616
	run -64 trellara chaos run --schedules x
	run -64 trellara chaos run --format yaml
	run -64 trellara chaos run --bogus
	run -64 --separate-stderr trellara chaos run --scenario no_such_scenario
	[[ $stderr == *'no scenario named "no_such_scenario"'* ]]
	run -64 --separate-stderr trellara chaos run --variant no_such_variant
	[[ $stderr == *'unknown variant "no_such_variant"'* ]]
	run -64 trellara chaos list --seed 3
	run -64 trellara chaos report --output x.html
}

@test "a bad number for --seed, --schedules or --progress is 64, naming the option and the value" {
	need_sim
	local opt value
	for opt in --seed --schedules --progress; do
		for value in abc -1 " 1" 1x 18446744073709551616 ""; do
			run -64 --separate-stderr trellara chaos run "$opt" "$value"
			[[ $stderr == *"$opt: \"$value\" is not a "*'hint: run "trellara chaos --help"'* ]] ||
				{ echo "$opt \"$value\": $stderr" >&2; false; }
		done
	done
	# the largest value is taken (nothing runs: --scenario names no entry)
	run -64 --separate-stderr trellara chaos run --seed 18446744073709551615 --scenario no_such_scenario
	[[ $stderr == *'no scenario named "no_such_scenario"'* ]]
}

@test "trellara-chaos(1) OPTIONS lists exactly the options of trellara-sim --help, and EXIT STATUS its codes" {
	need_sim
	local page=$REPO/man/man1/trellara-chaos.1 from_help from_man code
	from_help=$("$SIM" --help | awk '
		/^options:/ { inside = 1; next }
		inside && /^$/ { exit }
		inside && match($0, "^ +(-[A-Za-z], +)?--[a-z][a-z0-9-]*( [A-Z][A-Z_.]*)?") {
			s = substr($0, RSTART, RLENGTH); sub(/^ +/, "", s); sub(/, +/, " ", s); print s
		}' | LC_ALL=C sort)
	from_man=$(awk '
		/^\.SH/ { inside = ($0 ~ /^\.SH +"?OPTIONS"? *$/); tag = 0; next }
		inside && /^\.TP/ { tag = 1; next }
		inside && tag { tag = 0; s = $0; gsub(/\\f[BIRP]/, "", s); gsub(/\\-/, "-", s); sub(/, +/, " ", s);
			gsub(/ +/, " ", s); sub(/ $/, "", s); print s }' "$page" | LC_ALL=C sort)
	[ "$(grep -c . <<<"$from_help")" -ge 8 ]
	diff <(printf '%s\n' "$from_help") <(printf '%s\n' "$from_man")
	for code in $("$SIM" --help | sed -n '/^exit codes:/,/^$/p' | grep -oE '^ +[0-9]+' | tr -d ' '); do
		sed -n '/^\.SH "*EXIT STATUS/,/^\.SH/p' "$page" | grep -qxF ".B $code" ||
			{ echo "exit status $code missing from trellara-chaos(1)" >&2; false; }
	done
}
