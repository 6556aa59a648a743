#!/usr/bin/env bats
# trellara-verify against real PostgreSQL: CONVERGED or a named
# divergence, exactly, also while the source keeps writing.

load helpers/common

TABLES="public.pgbench_accounts,public.pgbench_branches,public.pgbench_tellers,public.pgbench_history,public.docs"

setup() {
	trellara_setup
	export TRELLARA_STATUS_INTERVAL_MS=200
	pgbench -q -i -s 1 -h "$SOURCE_HOST" -p "$SOURCE_PORT" "$SOURCE_DB" >/dev/null 2>&1
	psql_source "CREATE TABLE docs (id int PRIMARY KEY, title text, body text)" \
		"INSERT INTO docs SELECT g, 'doc ' || g, repeat(md5(g::text), 400) FROM generate_series(1, 50) g" \
		"CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history, docs"
	write_flow_file "$FLOW_FILE" --tables "$TABLES" --set stream.min_free_bytes=1048576
	trellara-snapshot --config "$FLOW_FILE" --create-tables >/dev/null
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
}

teardown() {
	bg_stop applyd TERM 2>/dev/null || true
	bg_stop capture TERM 2>/dev/null || true
	trellara_teardown
}

load_source() {
	pgbench -n -c 2 -R 200 -T "$1" -h "$SOURCE_HOST" -p "$SOURCE_PORT" "$SOURCE_DB" >/dev/null 2>&1
}

# applyd's count of applied transactions (0 before its first)
applied_transactions() {
	psql_target "SELECT coalesce((SELECT applied_transactions FROM trellara.apply_checkpoint), 0)"
}

run_state() {
	psql_target "SELECT state FROM trellara.snapshot_runs"
}

@test "after a pgbench run: CONVERGED, and the run is promoted to verified" {
	load_source 5
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ "$output" == *"result: CONVERGED"* ]]
	[ "$(grep -c '^table .*checksums match' <<<"$output")" -eq 5 ]
	[[ "$output" == *"handoff: the run reached stream_handoff_ready"* ]]
	[ "$(run_state)" = verified ]
	# the fence is gone, applyd goes on
	[ "$(psql_target "SELECT count(*) FROM trellara.apply_fence")" -eq 0 ]
	psql_source "UPDATE pgbench_branches SET bbalance = bbalance + 1"
	run -0 --separate-stderr trellara-verify --config "$FLOW_FILE" --format json
	[ "$(jq -r .result <<<"$output")" = CONVERGED ]
	[ "$(jq '.tables | length' <<<"$output")" -eq 5 ]
	[ "$(jq '[.tables[] | select(.source_rows == .target_rows)] | length' <<<"$output")" -eq 5 ]
}

@test "while pgbench keeps writing: CONVERGED, and applyd resumes afterwards" {
	# the load goes on until both verifies under it are done
	bg_start load pgbench_until_stopped -c 2 -R 200
	# the load reaches the target: verify runs while it goes on
	wait_for -t 60 -m "applyd applies pgbench transactions" '[ "$(applied_transactions)" -gt 10 ]'
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ "$output" == *"result: CONVERGED"* ]]
	applied=$(applied_transactions)
	wait_for -t 30 -m "applyd applies again after the fence" "[ \"\$(applied_transactions)\" -gt $applied ]"
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ "$output" == *"result: CONVERGED"* ]]
	load_stop
	[ "$BG_STATUS" -eq 0 ]
	run -0 trellara-verify --config "$FLOW_FILE"
}

@test "on an idle source verify returns within a few seconds: its fence travels in the stream" {
	# capture as deployed: it reports (and hears keepalives) every 60 s,
	# so nothing but the fence itself tells it that the source moved on
	bg_stop capture TERM
	TRELLARA_STATUS_INTERVAL_MS=60000 bg_start capture trellara-capture --config "$FLOW_FILE"
	psql_source "UPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid = 1"
	caught_up 60
	applied=$(applied_transactions)
	run -0 timeout 15 trellara-verify --config "$FLOW_FILE" --fence-timeout 60
	[[ "$output" == *"result: CONVERGED"* ]]
	# applyd held at a watermark: the fence's transaction is no data change
	[ "$(applied_transactions)" -eq "$applied" ]
	grep -q "held at fence" "$TEST_DIR/applyd.log"
	# and the flow goes on afterwards
	psql_source "UPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid = 1"
	caught_up 60
	[ "$(applied_transactions)" -eq $((applied + 1)) ]
}

@test "a source role that may not emit the fence message: exit 78 naming the function, no fence left" {
	# PostgreSQL grants EXECUTE on pg_logical_emit_message to PUBLIC; a
	# source that revoked it (restored below: the cluster is the file's)
	# (its arguments as this server has them: 17 added a fourth)
	local fn
	fn=pg_catalog.$(psql_source "SELECT oid::regprocedure FROM pg_proc WHERE proname = 'pg_logical_emit_message' AND proargtypes[2] = 'text'::regtype")
	psql_source "DO \$\$ BEGIN CREATE ROLE trellara_verifier LOGIN REPLICATION; EXCEPTION WHEN duplicate_object THEN NULL; END \$\$" \
		"GRANT SELECT ON ALL TABLES IN SCHEMA public TO trellara_verifier" \
		"REVOKE EXECUTE ON FUNCTION $fn FROM PUBLIC"
	write_flow_file "$TEST_DIR/role.yml" --tables "$TABLES" --set stream.min_free_bytes=1048576 \
		--set source.database_url="\"$SOURCE_URL&user=trellara_verifier\""
	run -78 --separate-stderr trellara-verify --config "$TEST_DIR/role.yml" --fence-timeout 10
	[[ "$stderr" == *'role "trellara_verifier" may not emit verify'\''s fence message (pg_logical_emit_message)'* ]]
	[[ "$stderr" == *"GRANT EXECUTE ON FUNCTION $fn TO \"trellara_verifier\""* ]]
	[ -z "$output" ]
	[ "$(psql_target "SELECT count(*) FROM trellara.apply_fence")" -eq 0 ]
	[ "$(psql_source "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'trellara_verify_%'")" -eq 0 ]
	# granted, the same role verifies
	psql_source "GRANT EXECUTE ON FUNCTION $fn TO trellara_verifier"
	run -0 trellara-verify --config "$TEST_DIR/role.yml"
	[[ "$output" == *"result: CONVERGED"* ]]
	psql_source "GRANT EXECUTE ON FUNCTION $fn TO PUBLIC" \
		"REVOKE EXECUTE ON FUNCTION $fn FROM trellara_verifier"
}

@test "injected divergences are found and named with their keys; reseed repairs them" {
	psql_source "UPDATE docs SET title = NULL WHERE id = 9"
	load_source 3
	run -0 trellara-verify --config "$FLOW_FILE"
	[ "$(run_state)" = verified ]
	psql_target "DELETE FROM pgbench_accounts WHERE aid = 17" \
		"INSERT INTO pgbench_accounts VALUES (999999, 1, 0, '')" \
		"UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 4242" \
		"UPDATE docs SET body = body || 'x' WHERE id = 7" \
		"UPDATE docs SET title = NULL WHERE id = 8" \
		"UPDATE docs SET title = '' WHERE id = 9"
	run -1 --separate-stderr trellara-verify --config "$FLOW_FILE" --format json
	[ "$(jq -r .result <<<"$output")" = DIVERGED ]
	# four rows in four buckets of 1024: named from the sums, nothing read again
	[[ "$stderr" == *"table public.pgbench_accounts: 4 buckets differ: 4 rows named from their sums, 0 keys read by key, 0 buckets read again"* ]]
	acc=$(jq -c '.tables[] | select(.table == "public.pgbench_accounts")' <<<"$output")
	[ "$(jq -r '.divergences[] | select(.kind == "missing_in_target") | .keys[0]' <<<"$acc")" = "(17)" ]
	[ "$(jq -r '.divergences[] | select(.kind == "extra_in_target") | .keys[0]' <<<"$acc")" = "(999999)" ]
	[ "$(jq -r '.divergences[] | select(.kind == "content_differs") | .keys[0]' <<<"$acc")" = "(4242)" ]
	[[ "$(jq -r .recovery <<<"$acc")" == "trellara reseed --config $FLOW_FILE --table public.pgbench_accounts" ]]
	docs=$(jq -c '.tables[] | select(.table == "public.docs")' <<<"$output")
	[ "$(jq -r '.divergences[] | select(.kind == "content_differs") | .keys | sort | join(" ")' <<<"$docs")" = "(7) (8) (9)" ]
	[ "$(jq '[.tables[] | select(.result == "diverged")] | length' <<<"$output")" -eq 2 ]
	# a verified run with new evidence of divergence is no longer verified
	[ "$(run_state)" = failed_recoverable ]
	run -1 trellara-verify --config "$FLOW_FILE"
	[[ "$output" == *"table public.docs: DIVERGED"* ]]
	[[ "$output" == *"content_differs: 3"* ]]
	[[ "$output" == *"result: DIVERGED"* ]]
	run trellara reseed --config "$FLOW_FILE" --table public.pgbench_accounts
	echo "$output" >&3
	[ "$status" -eq 0 ]
	run -0 trellara reseed --config "$FLOW_FILE" --table public.docs
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ "$output" == *"result: CONVERGED"* ]]
}

@test "divergences the bucket sums do not decode are read again: many rows, a text key, a keyless table, each counted once" {
	psql_source "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (1, 1, 1, 5, '2020-01-01'), (1, 1, 1, 5, '2020-01-01')"
	caught_up 60
	# 1500 rows in 1024 buckets: most buckets differ by several rows (read
	# again), some by one (decoded from the sums); the two must add up
	psql_target "DELETE FROM pgbench_accounts WHERE aid <= 1500" \
		"INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (1, 1, 1, 5, '2020-01-01')" \
		"UPDATE docs SET body = 'changed' WHERE title IN ('doc 3', 'doc 44')"
	write_flow_file "$TEST_DIR/keys.yml" --set stream.min_free_bytes=1048576 --tables "- {schema: public, name: pgbench_accounts}
- {schema: public, name: pgbench_history}
- {schema: public, name: docs, verify: {primary_key: title}}"
	run -1 --separate-stderr trellara-verify --config "$TEST_DIR/keys.yml" --format json
	# a text key: every differing bucket read again; the integer key: both ways
	[[ "$stderr" == *"table public.docs: 4 buckets differ: 0 rows named from their sums, 0 keys read by key, 4 buckets read again"* ]]
	[[ "$stderr" =~ "table public.pgbench_accounts: "[0-9]+" buckets differ: "[1-9][0-9]*" rows named from their sums, "[1-9][0-9]*" keys read by key, "[1-9][0-9]*" buckets read again" ]]
	acc=$(jq -c '.tables[] | select(.table == "public.pgbench_accounts")' <<<"$output")
	[ "$(jq -c '[.divergences[] | [.kind, .count]]' <<<"$acc")" = '[["missing_in_target",1500]]' ]
	[ "$(jq '[.divergences[0].keys[] | ltrimstr("(") | rtrimstr(")") | tonumber | select(. >= 1 and . <= 1500)] | length' <<<"$acc")" -eq 10 ]
	[ "$(jq -r '.source_rows - .target_rows' <<<"$acc")" -eq 1500 ]
	his=$(jq -c '.tables[] | select(.table == "public.pgbench_history")' <<<"$output")
	[ "$(jq -c '[.divergences[] | [.kind, .count]]' <<<"$his")" = '[["extra_in_target",1]]' ]
	[[ "$(jq -r '.divergences[0].keys[0]' <<<"$his")" == "(1,1,1,5,\"2020-01-01 00:00:00\","*") #3" ]]
	docs=$(jq -c '.tables[] | select(.table == "public.docs")' <<<"$output")
	[ "$(jq -c '[.divergences[] | [.kind, .count]]' <<<"$docs")" = '[["content_differs",2]]' ]
	[ "$(jq -r '.divergences[0].keys | sort | join(" ")' <<<"$docs")" = '("doc 3") ("doc 44")' ]
}

@test "a bucket holding two keys' differences is peeled by key: both named without reading the table again" {
	# two accounts whose changed target row lands in the bucket of the other's
	# source row (found on the source: the bucket is the row hash's low 10 bits)
	pair=$(psql_source "WITH r AS (SELECT aid, hashtextextended(ROW(aid, bid, abalance, filler)::text, 0) & 1023 AS b,
			hashtextextended(ROW(aid, bid, abalance + 1, filler)::text, 0) & 1023 AS changed FROM pgbench_accounts)
		SELECT r1.aid || ' ' || r2.aid FROM r r1 JOIN r r2 ON r1.changed = r2.b AND r1.aid <> r2.aid
		WHERE r1.b <> r2.b AND r2.changed NOT IN (r1.b, r2.b) AND r1.changed <> r1.b
		ORDER BY r1.aid, r2.aid LIMIT 1")
	read -r a1 a2 <<<"$pair"
	[ -n "$a2" ]
	psql_target "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid IN ($a1, $a2)"
	run -1 --separate-stderr trellara-verify --config "$FLOW_FILE" --table public.pgbench_accounts --format json
	[[ "$stderr" == *"table public.pgbench_accounts: 3 buckets differ: 2 rows named from their sums, 2 keys read by key, 0 buckets read again"* ]]
	[ "$(jq -c '[.tables[0].divergences[] | [.kind, .count]]' <<<"$output")" = '[["content_differs",2]]' ]
	[ "$(jq -r '.tables[0].divergences[0].keys | sort | join(" ")' <<<"$output")" = "$(printf '(%s)\n' "$a1" "$a2" | sort | paste -sd ' ')" ]
}

@test "a run whose verify failed is not verified" {
	psql_target "UPDATE pgbench_tellers SET tbalance = 5 WHERE tid = 3"
	run -1 trellara-verify --config "$FLOW_FILE"
	[ "$(run_state)" = streaming ]
	run -1 --separate-stderr trellara-verify --config "$FLOW_FILE" --table public.pgbench_tellers --format json
	[ "$(jq -r '.tables[0].divergences[0].keys[0]' <<<"$output")" = "(3)" ]
	[ "$(jq '.tables | length' <<<"$output")" -eq 1 ]
}

@test "verify --format json escapes what it prints: a flow file path with a quote and a backslash stays valid JSON" {
	weird="$TEST_DIR/fl\"o\\w.yml"
	cp "$FLOW_FILE" "$weird"
	psql_target "UPDATE pgbench_tellers SET tbalance = 5 WHERE tid = 3"
	run -1 --separate-stderr trellara-verify --config "$weird" --table public.pgbench_tellers --format json
	jq -e . <<<"$output" >/dev/null
	# the recovery command quotes the path for the shell: it gives the path back
	eval "set -- $(jq -r '.tables[0].recovery' <<<"$output")"
	[ "$#" -eq 6 ]
	[ "$1 $2 $3 $4 $6" = "trellara reseed --config $weird public.pgbench_tellers" ]
	[ "$4" = "$weird" ]
	[ "$5" = --table ]
	[ "$(jq -r .result <<<"$output")" = DIVERGED ]
}

@test "verify's recovery command, pasted into a shell, works for a flow path with a space and a single quote" {
	dir="$TEST_DIR/it's a dir"
	mkdir "$dir"
	cp "$FLOW_FILE" "$dir/flow.yml"
	psql_target "UPDATE pgbench_tellers SET tbalance = 5 WHERE tid = 3"
	run -1 --separate-stderr trellara-verify --config "$dir/flow.yml" --table public.pgbench_tellers
	[[ $output == *"result: DIVERGED"* ]]
	recover=$(sed -n 's/^  recover: //p' <<<"$output")
	[ "$(wc -l <<<"$recover")" -eq 1 ]
	[[ $recover == "trellara reseed --config "* ]]
	# what the shell makes of it: the exact path
	run -0 bash -c "trellara() { printf '%s\n' \"\$@\"; }; $recover"
	[ "${lines[2]}" = "$dir/flow.yml" ]
	[ "${lines[4]}" = public.pgbench_tellers ]
	# and run for real it repairs the table
	run -0 bash -c "$recover"
	run -0 trellara-verify --config "$dir/flow.yml" --table public.pgbench_tellers
	[[ $output == *"result: CONVERGED"* ]]
}

@test "without applyd at the fence verify gives no verdict: exit 75, and leaves no fence behind" {
	bg_stop applyd TERM
	psql_source "UPDATE pgbench_branches SET bbalance = bbalance + 1"
	run -75 trellara-verify --config "$FLOW_FILE" --fence-timeout 3
	[[ "$output" == *"did not reach the fence"* ]]
	[ "$(psql_target "SELECT count(*) FROM trellara.apply_fence")" -eq 0 ]
	[ "$(psql_source "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'trellara_verify_%'")" -eq 0 ]
}
