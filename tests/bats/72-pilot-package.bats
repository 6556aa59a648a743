#!/usr/bin/env bats
# trellara pilot-scorecard and pilot-package on a running flow (snapshot
# handed off, capture and applyd streaming): every question answered from
# a command run now, a missing command or result failing for that reason,
# and a package whose every byte is bound by SHA-256.

load helpers/common

TABLES="public.pgbench_accounts,public.pgbench_branches,public.pgbench_tellers,public.docs"

setup() {
	trellara_setup
	export TRELLARA_STATUS_INTERVAL_MS=200
	# no soak result anywhere this test does not put one
	export TRELLARA_SOAK_DIR="$TEST_DIR/soak"
	export METRICS_DIR="$TEST_DIR/metrics"
	pgbench -q -i -s 1 -h "$SOURCE_HOST" -p "$SOURCE_PORT" "$SOURCE_DB" >/dev/null 2>&1
	psql_source "CREATE TABLE docs (id int PRIMARY KEY, title text, body text)" \
		"INSERT INTO docs SELECT g, 'doc ' || g, repeat(md5(g::text), 400) FROM generate_series(1, 50) g" \
		"CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE pgbench_accounts, pgbench_branches, pgbench_tellers, docs"
	write_flow_file "$FLOW_FILE" --tables "$TABLES" --set stream.min_free_bytes=1048576 \
		--set observability.metrics_dir="\"$METRICS_DIR\""
	trellara-snapshot --config "$FLOW_FILE" --create-tables >/dev/null
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	psql_source "UPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid = 1" \
		"UPDATE docs SET title = 'changed' WHERE id = 3"
	caught_up 60
}

teardown() {
	bg_stop applyd TERM 2>/dev/null || true
	bg_stop capture TERM 2>/dev/null || true
	trellara_teardown
}

# q JSON ID FIELD: one field of one question of a scorecard
q() {
	jq -r --arg id "$2" ".questions[] | select(.id == \$id) | .$3" <<<"$1"
}

# flip_byte FILE: the byte in the middle of FILE, its lowest bit flipped
flip_byte() {
	local size pos byte
	size=$(stat -c %s "$1")
	pos=$((size / 2))
	byte=$(od -An -tu1 -j "$pos" -N 1 "$1" | tr -d ' ')
	# shellcheck disable=SC2059 # the octal escape is the format
	printf "$(printf '\\%03o' $((byte ^ 1)))" | dd of="$1" bs=1 seek="$pos" conv=notrunc status=none
}

@test "pilot-package writes every piece of evidence bound by SHA-256; --verify passes, and names each file whose byte changed" {
	# a password in the flow's URLs (trust authentication ignores it) must
	# never reach a file of the package nor its output
	write_flow_file "$TEST_DIR/secret.yml" --tables "$TABLES" --set stream.min_free_bytes=1048576 \
		--set observability.metrics_dir="\"$METRICS_DIR\"" \
		--set source.database_url="\"$SOURCE_URL&password=pilot-s3cret\"" \
		--set target.database_url="\"$TARGET_URL&password=pilot-s3cret\""
	pkg="$TEST_DIR/pkg"
	run -0 --separate-stderr trellara pilot-package --config "$TEST_DIR/secret.yml" --output "$pkg" --chaos-schedules 20
	[[ $output$stderr != *pilot-s3cret* ]]
	# the package's identity is manifest.json's SHA-256
	[ "${lines[-1]}" = "manifest.json SHA-256: $(sha256sum "$pkg/manifest.json" | cut -c1-64)" ]
	run -1 grep -rl pilot-s3cret "$pkg"
	for f in check.json snapshot-status.json snapshot-runs.csv snapshot-table-progress.csv \
		snapshot-handoff-events.csv verify.json status.json diagnostics.json stream-frames.json \
		chaos-run.json chaos-report.html versions.json scorecard.json scorecard.txt manifest.json proof-bundle.md; do
		[ -s "$pkg/$f" ] || { echo "missing: $f" >&2; false; }
	done
	# the snapshot evidence is the target's rows, as COPY gives them
	[ "$(cat "$pkg/snapshot-runs.csv")" = "$(psql_target "COPY (SELECT * FROM trellara.snapshot_runs ORDER BY run_id) TO STDOUT WITH (FORMAT csv, HEADER)")" ]
	[ "$(cat "$pkg/snapshot-handoff-events.csv")" = "$(psql_target "COPY (SELECT * FROM trellara.snapshot_handoff_events ORDER BY id) TO STDOUT WITH (FORMAT csv, HEADER)")" ]
	[ "$(($(wc -l <"$pkg/snapshot-handoff-events.csv") - 1))" -eq 4 ]
	# a fresh verify, and a chaos run made now with its report
	[ "$(jq -r .result "$pkg/verify.json")" = CONVERGED ]
	[ "$(jq -r .schedules "$pkg/chaos-run.json")" -eq 20 ]
	grep -q "trellara-chaos-report revision=$(jq -r .revision "$pkg/chaos-run.json")" "$pkg/chaos-report.html"
	# versions: both servers, this tree's revision
	[ "$(jq -r .postgresql.source "$pkg/versions.json")" = "$(psql_source "SELECT version()")" ]
	[ "$(jq -r .postgresql.target "$pkg/versions.json")" = "$(psql_target "SELECT version()")" ]
	[ "$(jq -r .source_revision "$pkg/versions.json")" = "$(git -C "$REPO" rev-parse HEAD)" ]
	# the scorecard, in both forms, from one run
	[ "$(trellara pilot-scorecard --render "$pkg/scorecard.json")" = "$(cat "$pkg/scorecard.txt")" ]
	# manifest.json lists every other file with its digest and size
	listed=$(jq -r '.files[].name' "$pkg/manifest.json" | sort)
	present=$(for f in "$pkg"/*; do [[ $f == */manifest.json || $f == */proof-bundle.md ]] || printf '%s\n' "${f##*/}"; done | sort)
	[ "$listed" = "$present" ]
	while IFS=$'\t' read -r name sha size; do
		[ "$sha" = "$(sha256sum "$pkg/$name" | cut -c1-64)" ]
		[ "$size" -eq "$(stat -c %s "$pkg/$name")" ]
		grep -qx "SHA-256 $sha, $size bytes." "$pkg/proof-bundle.md"
	done < <(jq -r '.files[] | [.name, .sha256, .size] | @tsv' "$pkg/manifest.json")
	[ "$(jq -r .config "$pkg/manifest.json")" = "$TEST_DIR/secret.yml" ]
	[ "$(jq -r .source_revision "$pkg/manifest.json")" = "$(git -C "$REPO" rev-parse HEAD)" ]
	grep -qx "manifest.json SHA-256: $(sha256sum "$pkg/manifest.json" | cut -c1-64)" "$pkg/proof-bundle.md"
	# the guide's checksum lines check the files with sha256sum alone
	(cd "$pkg" && grep -E '^[0-9a-f]{64}  ' proof-bundle.md | sha256sum --quiet -c)

	run -0 trellara pilot-package --verify "$pkg"
	[[ ${lines[-1]} == "result: OK: "* ]]

	# one byte of each file in turn, manifest.json and proof-bundle.md included
	n=0
	for f in "$pkg"/*; do
		name=${f##*/}
		rm -rf "$TEST_DIR/copy"
		cp -a "$pkg" "$TEST_DIR/copy"
		flip_byte "$TEST_DIR/copy/$name"
		run -1 trellara pilot-package --verify "$TEST_DIR/copy"
		bad=$(grep '^bad: ' <<<"$output")
		[[ $bad == "bad: $name: "* ]] || { echo "changed $name, --verify said: $output" >&2; false; }
		[ "$(wc -l <<<"$bad")" -eq 1 ]
		n=$((n + 1))
	done
	[ "$n" -eq "$(($(jq '.files | length' "$pkg/manifest.json") + 2))" ]

	# a file gone, a file added
	rm -rf "$TEST_DIR/copy"
	cp -a "$pkg" "$TEST_DIR/copy"
	rm "$TEST_DIR/copy/verify.json"
	echo extra >"$TEST_DIR/copy/notes.txt"
	run -1 trellara pilot-package --verify "$TEST_DIR/copy"
	[[ $output == *"bad: verify.json: missing"* ]]
	[[ $output == *"bad: notes.txt: not listed in the manifest"* ]]

	# a file that cannot be read is named itself, and no other file is
	# blamed for it (read as an unprivileged user when we are root)
	rm -rf "$TEST_DIR/copy"
	cp -a "$pkg" "$TEST_DIR/copy"
	chmod 000 "$TEST_DIR/copy/status.json"
	as_user=()
	if [[ $(id -u) -eq 0 ]]; then
		chown -R "${TRELLARA_PG_OS_USER:-postgres}" "$TEST_DIR/copy"
		chmod 0755 "$TEST_DIR"
		as_user=(runuser -u "${TRELLARA_PG_OS_USER:-postgres}" --)
	fi
	run -1 "${as_user[@]}" "$REPO/scripts/trellara-pilot-package" --verify "$TEST_DIR/copy"
	[ "$(grep '^bad: ' <<<"$output")" = "bad: status.json: cannot be read" ]

	# a package is written into a new (or empty) directory only
	run -73 --separate-stderr trellara pilot-package --config "$FLOW_FILE" --output "$pkg"
	[[ $stderr == *"output \"$pkg\" exists and is not an empty directory"* ]]
}

@test "the scorecard answers each question; drill and soak absent fail for that reason; a DIVERGED target fails the converged question" {
	run -1 --separate-stderr trellara pilot-scorecard --config "$FLOW_FILE" --format json --chaos-schedules 20
	card=$output
	[ "$(jq -r '[.questions[].id] | join(" ")' <<<"$card")" = \
		"source_safe transaction_boundaries snapshot_handoff target_converged operator_recovery failure_matrix schema_contract recovery_drill soak" ]
	[ "$(jq -r .result <<<"$card")" = FAIL ]
	[ "$(jq '[.questions[] | select(.answer == "" or .answer == null)] | length' <<<"$card")" -eq 0 ]
	# the source has no blocker
	[ "$(q "$card" source_safe pass)" = true ]
	[[ $(q "$card" source_safe answer) == "0 blockers, "* ]]
	[ "$(q "$card" snapshot_handoff pass)" = true ]
	[[ $(q "$card" snapshot_handoff answer) =~ ": "(stream_handoff_ready|streaming)", 4 of 4 tables copied"$ ]]
	[ "$(q "$card" target_converged pass)" = true ]
	[ "$(q "$card" target_converged answer)" = "CONVERGED: 4 tables" ]
	[ "$(q "$card" operator_recovery pass)" = true ]
	[ "$(q "$card" failure_matrix pass)" = true ]
	[ "$(jq -r '.questions[] | select(.id == "failure_matrix") | .evidence[0].exit_status' <<<"$card")" -eq 0 ]
	# the latest applied transaction is the docs update, found in the stream
	lsn=$(psql_target "SELECT last_commit_lsn FROM trellara.apply_checkpoint")
	[[ $(q "$card" transaction_boundaries answer) == *"commit $lsn"* ]]
	if command -v trellara-inspect-transaction >/dev/null; then
		[ "$(q "$card" transaction_boundaries pass)" = true ]
	else
		[ "$(q "$card" transaction_boundaries pass)" = false ]
		[[ $(q "$card" transaction_boundaries answer) == "not available: trellara-inspect-transaction is not installed"* ]]
	fi
	if command -v trellara-contract-test >/dev/null; then
		contract=0
		trellara contract-test --config "$FLOW_FILE" --format json >/dev/null 2>&1 || contract=$?
		[ "$(q "$card" schema_contract pass)" = "$([ "$contract" -eq 0 ] && echo true || echo false)" ]
	else
		[ "$(q "$card" schema_contract pass)" = false ]
		[ "$(q "$card" schema_contract answer)" = "not available: trellara-contract-test is not installed" ]
	fi
	# no drill or soak result: not available, a failure, never a pass
	[ "$(q "$card" recovery_drill pass)" = false ]
	[ "$(q "$card" recovery_drill answer)" = "not available: no drill result (no drill-*.json in $METRICS_DIR/evidence)" ]
	[ "$(q "$card" soak pass)" = false ]
	[ "$(q "$card" soak answer)" = "not available: no soak result (no soak-*.json in $TEST_DIR/soak)" ]

	# the newest drill result in the evidence directory is taken; a failed one fails
	mkdir -p "$METRICS_DIR/evidence" "$TEST_DIR/soak"
	echo '{"result": "pass"}' >"$METRICS_DIR/evidence/drill-20261201T000000Z.json"
	echo '{"result": "fail"}' >"$METRICS_DIR/evidence/drill-20261202T000000Z.json"
	echo '{"result": "pass"}' >"$TEST_DIR/soak/soak-20261201T000000Z.json"
	run -1 --separate-stderr trellara pilot-scorecard --config "$FLOW_FILE" --format json --chaos-schedules 0
	[ "$(q "$output" recovery_drill pass)" = false ]
	[[ $(q "$output" recovery_drill answer) == *"drill-20261202T000000Z.json"*"result fail" ]]
	[ "$(q "$output" soak pass)" = true ]
	# named with --drill; a file that is not JSON fails
	echo 'not json' >"$TEST_DIR/bad.json"
	run -1 --separate-stderr trellara pilot-scorecard --config "$FLOW_FILE" --format json --chaos-schedules 0 \
		--drill "$METRICS_DIR/evidence/drill-20261201T000000Z.json" --soak "$TEST_DIR/bad.json"
	[ "$(q "$output" recovery_drill pass)" = true ]
	[ "$(q "$output" soak pass)" = false ]
	[ "$(q "$output" soak answer)" = "soak result \"$TEST_DIR/bad.json\" is not a JSON object" ]

	# a target row deleted behind the flow's back: not converged, named
	psql_target "DELETE FROM pgbench_accounts WHERE aid = 17"
	run -1 --separate-stderr trellara pilot-scorecard --config "$FLOW_FILE" --chaos-schedules 0
	[[ $output == *$'\nFAIL  target_converged: has the target converged?\n      answer: DIVERGED: public.pgbench_accounts (missing_in_target 1)\n'* ]]
	[[ ${lines[-1]} == "result: FAIL: "*"; failing: "*target_converged* ]]
}

@test "a source blocker fails the source question naming the table; usage and configuration errors" {
	psql_source "ALTER TABLE docs REPLICA IDENTITY NOTHING"
	run -1 --separate-stderr trellara pilot-scorecard --config "$FLOW_FILE" --format json --chaos-schedules 0
	[ "$(q "$output" source_safe pass)" = false ]
	[[ $(q "$output" source_safe answer) == "1 blockers, "*"public.docs"* ]]
	run -64 trellara pilot-scorecard --format json
	run -64 trellara pilot-scorecard --config "$FLOW_FILE" --format yaml
	run -64 trellara pilot-package --config "$FLOW_FILE"
	run -78 trellara pilot-scorecard --config "$TEST_DIR/missing.yml"
	run -65 trellara pilot-scorecard --render "$FLOW_FILE"
	run -1 trellara pilot-package --verify "$TEST_DIR/nonexistent"
}
