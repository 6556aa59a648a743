#!/usr/bin/env bats
# trellara-repair-plan against real PostgreSQL: from a DIVERGED verify
# result the exact repair of each divergent key (or the table's reseed),
# applied behind the fence, recorded as evidence, verified again; a repair
# by hand leaves the run failed.

load helpers/common

TABLES="public.items,public.tags,public.logs"

setup() {
	trellara_setup
	# body: 200 md5s chained, 6400 bytes that pglz cannot shrink: stored
	# out of line (TOAST), not compressed
	psql_source "CREATE FUNCTION chain(seed text) RETURNS text LANGUAGE sql IMMUTABLE AS
		\$\$ SELECT string_agg(md5(seed || i::text), '' ORDER BY i) FROM generate_series(1, 200) i \$\$" \
		"CREATE TABLE items (id int PRIMARY KEY, title text, body text)" \
		"INSERT INTO items SELECT g, 'item ' || g, chain(g::text) FROM generate_series(1, 100) g" \
		"CREATE TABLE tags (k1 text, k2 int, note text, PRIMARY KEY (k1, k2))" \
		"INSERT INTO tags VALUES ('a b,\"c', 1, 'odd key'), ('plain', 2, NULL), ('(x)', 3, 'parens')" \
		"CREATE TABLE logs (msg text)" \
		"ALTER TABLE logs REPLICA IDENTITY FULL" \
		"INSERT INTO logs SELECT 'line ' || g FROM generate_series(1, 20) g" \
		"CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE items, tags, logs"
	write_flow_file "$FLOW_FILE" --tables "$TABLES" --set stream.min_free_bytes=1048576
	trellara-snapshot --config "$FLOW_FILE" --create-tables >/dev/null
	psql_target "CREATE FUNCTION chain(seed text) RETURNS text LANGUAGE sql IMMUTABLE AS
		\$\$ SELECT string_agg(md5(seed || i::text), '' ORDER BY i) FROM generate_series(1, 200) i \$\$"
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	run -0 trellara-verify --config "$FLOW_FILE"
	[ "$(run_state)" = verified ]
}

teardown() {
	bg_stop applyd TERM 2>/dev/null || true
	bg_stop capture TERM 2>/dev/null || true
	trellara_teardown
}

run_state() {
	psql_target "SELECT state FROM trellara.snapshot_runs"
}

# verify_json FILE: a verify of the whole flow as JSON into FILE (its
# exit status in VERIFY_STATUS)
verify_json() {
	VERIFY_STATUS=0
	trellara-verify --config "$FLOW_FILE" --format json >"$1" 2>"$1.log" || VERIFY_STATUS=$?
}

@test "missing, extra and changed rows (a TOAST value among them): the plan names each key and kind; --apply repairs them, recorded, and the run is verified again" {
	[ "$(psql_source "SELECT pg_column_size(body) > 2048 AND pg_column_size(body) = octet_length(body) FROM items WHERE id = 5")" = t ]
	psql_target "DELETE FROM items WHERE id = 3" \
		"INSERT INTO items VALUES (1000, 'extra', chain('extra'))" \
		"UPDATE items SET body = chain('changed') WHERE id = 5" \
		"DELETE FROM tags WHERE k1 = 'a b,\"c' AND k2 = 1" \
		"UPDATE tags SET note = 'was null' WHERE k1 = 'plain'"
	verify_json "$TEST_DIR/verify.json"
	[ "$VERIFY_STATUS" -eq 1 ]
	[ "$(run_state)" = failed_recoverable ]
	# verify lists every key exactly: its columns, and each value as text
	tags=$(jq -c '.tables[] | select(.table == "public.tags")' "$TEST_DIR/verify.json")
	[ "$(jq -c .key_columns <<<"$tags")" = '["k1","k2"]' ]
	[ "$(jq -c '.divergences[] | select(.kind == "missing_in_target") | .key_values' <<<"$tags")" = '[["a b,\"c","1"]]' ]
	[ "$(jq -c '.divergences[] | select(.kind == "content_differs") | .key_values' <<<"$tags")" = '[["plain","2"]]' ]
	[ "$(jq -r '.tables[] | select(.table == "public.items") | .repair' "$TEST_DIR/verify.json")" = \
		"trellara repair-plan --config $FLOW_FILE --from VERIFY.json" ]

	run -0 trellara-repair-plan --config "$FLOW_FILE" --from "$TEST_DIR/verify.json"
	[[ "$output" == *'-- missing_in_target ("id") = ('"'3'"'): copy the source row'* ]]
	[[ "$output" == *'-- extra_in_target ("id") = ('"'1000'"'): delete the target row'* ]]
	[[ "$output" == *'DELETE FROM "public"."items" WHERE "id" = '"'1000'"';'* ]]
	[[ "$output" == *'-- content_differs ("id") = ('"'5'"'): replace the target row with the source row'* ]]
	[[ "$output" == *'-- missing_in_target ("k1", "k2") = ('"'a b,\"c', '1'"'): copy the source row'* ]]
	[[ "$output" == *'-- content_differs ("k1", "k2") = ('"'plain', '2'"')'* ]]
	[[ "$output" == *"plan: 5 keys repaired row by row in 2 tables, 0 tables to reseed"* ]]
	# logs did not diverge: not in the plan; without --apply nothing changed
	[[ "$output" != *"public.logs"* ]]
	[ "$(psql_target "SELECT count(*) FROM items WHERE id IN (3, 1000)")" -eq 1 ]
	run -0 trellara-repair-plan --config "$FLOW_FILE" --from "$TEST_DIR/verify.json" --format json
	[ "$(jq -r '[.tables[].repairs[] | .kind + " " + (.key | join(","))] | sort | join("; ")' <<<"$output")" = \
		'content_differs 5; content_differs plain,2; extra_in_target 1000; missing_in_target 3; missing_in_target a b,"c,1' ]
	[ "$(jq .applied <<<"$output")" = false ]

	run -0 trellara-repair-plan --config "$FLOW_FILE" --from "$TEST_DIR/verify.json" --apply
	[[ "$output" == *"applied: table public.items: 2 rows deleted, 2 rows copied from the source at "* ]]
	[[ "$output" == *"applied: table public.tags: 1 rows deleted, 2 rows copied from the source at "* ]]
	[[ "$output" == *"run "*": verified again: a repair was recorded since it failed"* ]]
	[[ "$output" == *"result: CONVERGED"* ]]
	assert_tables_equal public.items public.tags public.logs
	[ "$(run_state)" = verified ]
	# the evidence: which keys, copied at which LSN, in the target's checkpoint schema
	[ "$(psql_target "SELECT relation || ':' || rows_deleted || ':' || rows_inserted FROM trellara.repairs ORDER BY relation" | paste -sd' ')" = \
		"public.items:2:2 public.tags:1:2" ]
	[ "$(psql_target "SELECT string_agg(k->>'kind' || ' ' || (k->'key'->>0), ', ' ORDER BY k->'key'->>0) FROM trellara.repairs, jsonb_array_elements(keys) k WHERE relation = 'public.items'")" = \
		"extra_in_target 1000, missing_in_target 3, content_differs 5" ]
	[ "$(psql_target "SELECT bool_and(source_lsn > verify_compared_at) FROM trellara.repairs")" = t ]
	# the fence and the temporary slot are gone, applyd goes on
	[ "$(psql_target "SELECT count(*) FROM trellara.apply_fence")" -eq 0 ]
	[ "$(psql_source "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'trellara_repair_%'")" -eq 0 ]
	psql_source "UPDATE items SET title = 'after' WHERE id IN (3, 5)" "DELETE FROM tags WHERE k1 = 'plain'"
	caught_up
	assert_tables_equal public.items public.tags
}

@test "too many divergent keys, or no key: the plan proposes the reseed, and --apply touches no row" {
	psql_target "DELETE FROM items WHERE id <= 30" "DELETE FROM logs WHERE msg = 'line 7'"
	verify_json "$TEST_DIR/verify.json"
	[ "$VERIFY_STATUS" -eq 1 ]
	# a keyless table's rows cannot be named: verify offers no row repair
	[ "$(jq -c '.tables[] | select(.table == "public.logs") | [.keyless, .key_columns, .repair]' "$TEST_DIR/verify.json")" = '[true,null,null]' ]
	run -0 trellara-repair-plan --config "$FLOW_FILE" --from "$TEST_DIR/verify.json" --max-keys 10
	[[ "$output" == *"table public.items: reseed: 30 divergent keys, more than --max-keys 10"* ]]
	[[ "$output" == *"trellara reseed --config $FLOW_FILE --table public.items"* ]]
	[[ "$output" == *"table public.logs: reseed: it has no key (keyless): a row cannot be named exactly"* ]]
	[[ "$output" != *"DELETE FROM"* ]]
	run -1 trellara-repair-plan --config "$FLOW_FILE" --from "$TEST_DIR/verify.json" --max-keys 10 --apply
	[[ "$output" == *"nothing applied: no table can be repaired row by row; reseed the tables above"* ]]
	[ "$(psql_target "SELECT count(*) FROM items")" -eq 70 ]
	[ "$(psql_target "SELECT count(*) FROM trellara.repairs")" -eq 0 ]
	[ "$(run_state)" = failed_recoverable ]
	# the reseeds it names repair both
	run -0 trellara reseed --config "$FLOW_FILE" --table public.items
	run -0 trellara reseed --config "$FLOW_FILE" --table public.logs
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ "$output" == *"result: CONVERGED"* ]]
	assert_tables_equal public.items public.logs
	[ "$(run_state)" = verified ]
}

@test "a repair by hand: verify says the data CONVERGED, the run stays failed_recoverable and the proportional command is named" {
	psql_target "DELETE FROM items WHERE id = 4"
	verify_json "$TEST_DIR/verify.json"
	[ "$VERIFY_STATUS" -eq 1 ]
	[ "$(run_state)" = failed_recoverable ]
	# status names the proportional repair, not a new snapshot
	run trellara-status --config "$FLOW_FILE" --view diagnostics
	[[ "$output" == *"snapshot_failed"* ]]
	[[ "$output" == *"review \"trellara repair-plan --config $FLOW_FILE --from VERIFY.json\", then apply it with --apply"* ]]
	# fixed with plain SQL on the target
	psql_target "INSERT INTO items VALUES (4, 'item 4', chain('4'))"
	assert_tables_equal public.items
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ "$output" == *"result: CONVERGED"* ]]
	[[ "$output" == *"failed_recoverable: the data converged, but no repair or reseed is recorded since it failed (a repair by hand records none): not verified again"* ]]
	[[ "$output" == *"recover: trellara repair-plan --config $FLOW_FILE --from VERIFY.json --apply, or the reseed of each table that diverged"* ]]
	[ "$(run_state)" = failed_recoverable ]
	run -0 --separate-stderr trellara-verify --config "$FLOW_FILE" --format json
	[ "$(jq -r .data_result <<<"$output")" = CONVERGED ]
	[ "$(jq -c '[.run.state, .run.hand_repair, .run.repaired_since_failure]' <<<"$output")" = '["failed_recoverable",true,false]' ]
	[ "$(run_state)" = failed_recoverable ]
	# the command it names records the evidence: the run is verified again
	run -0 trellara-repair-plan --config "$FLOW_FILE" --from "$TEST_DIR/verify.json" --apply
	[[ "$output" == *"applied: table public.items: 1 rows deleted, 1 rows copied from the source at "* ]]
	[[ "$output" == *"result: CONVERGED"* ]]
	[ "$(run_state)" = verified ]
	assert_tables_equal public.items
}

@test "a file that is not a DIVERGED verify result: exit 65 naming the file and the field; a CONVERGED one: nothing to repair" {
	verify_json "$TEST_DIR/converged.json"
	[ "$VERIFY_STATUS" -eq 0 ]
	run -0 trellara-repair-plan --config "$FLOW_FILE" --from "$TEST_DIR/converged.json" --apply
	[[ "$output" == *"CONVERGED: nothing to repair"* ]]
	printf '{"result": "DIVERGED", "flow": ' >"$TEST_DIR/cut.json"
	run -65 --separate-stderr trellara-repair-plan --config "$FLOW_FILE" --from "$TEST_DIR/cut.json"
	[[ "$stderr" == *"verify result \"$TEST_DIR/cut.json\": not JSON: "* ]]
	jq '.result = "MAYBE"' "$TEST_DIR/converged.json" >"$TEST_DIR/result.json"
	run -65 --separate-stderr trellara-repair-plan --config "$FLOW_FILE" --from "$TEST_DIR/result.json"
	[[ "$stderr" == *"verify result \"$TEST_DIR/result.json\": field result: missing or not CONVERGED or DIVERGED"* ]]
	psql_target "DELETE FROM items WHERE id = 9"
	verify_json "$TEST_DIR/verify.json"
	jq '(.tables[] | select(.table == "public.items") | .divergences[0].count) = "one"' "$TEST_DIR/verify.json" >"$TEST_DIR/count.json"
	run -65 --separate-stderr trellara-repair-plan --config "$FLOW_FILE" --from "$TEST_DIR/count.json" --apply
	[[ "$stderr" == *"verify result \"$TEST_DIR/count.json\": field tables[0].divergences[0].count: missing or not a whole number"* ]]
	jq '.flow = "other:flow"' "$TEST_DIR/verify.json" >"$TEST_DIR/flow.json"
	run -65 --separate-stderr trellara-repair-plan --config "$FLOW_FILE" --from "$TEST_DIR/flow.json" --apply
	[[ "$stderr" == *"field flow: \"other:flow\" is not this flow"* ]]
	run -66 --separate-stderr trellara-repair-plan --config "$FLOW_FILE" --from "$TEST_DIR/none.json"
	# none of them touched the target
	[ "$(psql_target "SELECT count(*) FROM items WHERE id = 9")" -eq 0 ]
	[ "$(psql_target "SELECT count(*) FROM trellara.repairs")" -eq 0 ]
}
