#!/usr/bin/env bats
# The schema contract (trellara-contract-test(1), dataset.contract): the
# fingerprint of every flow table on source and target, compared with
# each other and with the pinned file.  A drift on the source (ADD
# COLUMN, a type change) fails contract-test naming the column and the
# safe action; --update pins only what both sides agree on.  With
# dataset.contract: pinned, capture stops at the Relation message of the
# changed table and applyd before a transaction whose relation differs
# from the pin: what came before the ALTER is on the target, what came
# after is not, and the process exits 78.

load helpers/common

SCHEMA_SQL=(
	"CREATE TABLE items (id integer PRIMARY KEY, v text, qty integer NOT NULL DEFAULT 0)"
	"CREATE TABLE notes (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body text)"
)

setup() {
	trellara_setup
	export TRELLARA_STATUS_INTERVAL_MS=200
	PIN="$TEST_DIR/contract/pin.json"
	psql_source "${SCHEMA_SQL[@]}" \
		"INSERT INTO items SELECT g, 'before ' || g, g FROM generate_series(1, 5) g" \
		"CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE items, notes"
	psql_target "${SCHEMA_SQL[@]}"
	write_flow_file "$FLOW_FILE" --tables public.items,public.notes --set stream.min_free_bytes=1048576 \
		--set "dataset.contract_pin=$(_trellara_yq "$PIN")"
	FLOW_PINNED="$TEST_DIR/pinned.yml"
	write_flow_file "$FLOW_PINNED" --tables public.items,public.notes --set stream.min_free_bytes=1048576 \
		--set "dataset.contract_pin=$(_trellara_yq "$PIN")" --set dataset.contract=pinned
}

teardown() {
	bg_stop applyd TERM 2>/dev/null || true
	bg_stop capture TERM 2>/dev/null || true
	trellara_teardown
}

# difference JSON WHERE PROPERTY COLUMN: the one difference of the items
# table that matches, as compact JSON ("" when none)
difference() {
	jq -c --arg w "$2" --arg p "$3" --arg c "$4" \
		'.tables[] | select(.table == "public.items") | .differences[] | select(.where == $w and .property == $p and .column == $c)' <<<"$1"
}

@test "contract-test: no pin yet is exit 1; --update pins (0600 in a 0700 directory); an ADD COLUMN and a type change on the source fail it naming the column and the action" {
	run -1 --separate-stderr trellara-contract-test --config "$FLOW_FILE"
	[[ $output == *"contract of flow \"$SOURCE_ID:$DATASET_ID\": unpinned (2 tables, pin \"$PIN\", not there)"* ]]
	[[ $output == *"no contract is pinned yet"* ]]
	run -1 --separate-stderr trellara-contract-test --config "$FLOW_FILE" --format json
	[ "$(jq -r '[.result, (.pin == null), (.tables | length), ([.tables[].differences[]] | length)] | join(" ")' <<<"$output")" = "unpinned true 2 0" ]
	[ ! -e "$PIN" ]

	run -0 --separate-stderr "$REPO/scripts/trellara" contract-test --config "$FLOW_FILE" --update
	[[ $output == *"match (2 tables, pin \"$PIN\", written now)"* ]]
	[ "$(stat -c %a "$PIN")" = 600 ]
	[ "$(stat -c %a "$(dirname "$PIN")")" = 700 ]
	# the pin is the catalog's fingerprint, field by field
	[ "$(jq -r '.tables[0] | [.schema, .name, .relkind, .replica_identity, (.primary_key | join(",")), ([.columns[].name] | join(","))] | join(" ")' "$PIN")" = \
		"public items r d id id,v,qty" ]
	[ "$(jq -r '.tables[0].columns[2] | [.type, .not_null] | join(" ")' "$PIN")" = "integer true" ]
	[ "$(jq -r '.tables[1].columns[0] | [.type, .identity] | join(" ")' "$PIN")" = "bigint a" ]
	[ "$(jq -r .flow "$PIN")" = "$SOURCE_ID:$DATASET_ID" ]
	run -0 --separate-stderr trellara-contract-test --config "$FLOW_FILE" --format json
	[ "$(jq -r '[.result, .pin] | join(" ")' <<<"$output")" = "match $PIN" ]
	cp "$PIN" "$TEST_DIR/pin.before"

	psql_source "ALTER TABLE items ADD COLUMN note text" "ALTER TABLE items ALTER COLUMN qty TYPE bigint"
	run -1 --separate-stderr trellara-contract-test --config "$FLOW_FILE"
	[[ $output == *"contract of flow \"$SOURCE_ID:$DATASET_ID\": drift"* ]]
	[[ $output == *"public.items: column \"note\" (source-target): source \"present\", target \"absent\"; action: refresh the contract: apply the same change on the target, then run \"trellara contract-test --config $FLOW_FILE --update\""* ]]
	[[ $output == *"public.items: column \"note\" (source-pin): source \"present\", pin \"absent\"; action: refresh the contract"* ]]
	[[ $output == *"public.items: column \"qty\" type (source-target): source \"bigint\", target \"integer\"; action: reseed the table: run \"trellara reseed --config $FLOW_FILE --table public.items\""* ]]
	[[ $output == *"public.items: column \"qty\" type (source-pin): source \"bigint\", pin \"integer\""* ]]
	# the target did not change: it still matches the pin
	[[ $output != *"(target-pin)"* ]]
	[[ $output != *"public.notes"* ]]
	run -1 --separate-stderr trellara-contract-test --config "$FLOW_FILE" --format json
	[ "$(jq -r .result <<<"$output")" = drift ]
	[ "$(jq -r '[.source, .pin, .action] | join("|")' <<<"$(difference "$output" source-pin column note)")" = \
		"present|absent|refresh the contract" ]
	[ "$(jq -r '[.source, .target, .action] | join("|")' <<<"$(difference "$output" source-target type qty)")" = \
		"bigint|integer|reseed the table" ]
	[ "$(jq '[.tables[] | select(.table == "public.notes") | .differences[]] | length' <<<"$output")" -eq 0 ]

	# --update refuses while source and target differ, and leaves the pin alone
	run -1 --separate-stderr trellara-contract-test --config "$FLOW_FILE" --update
	[[ $output == *"not pinned: source and target differ"* ]]
	cmp "$PIN" "$TEST_DIR/pin.before"

	# the same change on the target: both now differ from the pin only
	psql_target "ALTER TABLE items ADD COLUMN note text" "ALTER TABLE items ALTER COLUMN qty TYPE bigint"
	run -1 --separate-stderr trellara-contract-test --config "$FLOW_FILE" --format json
	[ "$(jq -r '[.tables[].differences[].where] | unique | join(" ")' <<<"$output")" = "source-pin target-pin" ]
	[ "$(jq -r '[.target, .pin] | join("|")' <<<"$(difference "$output" target-pin column note)")" = "present|absent" ]
	run -0 --separate-stderr trellara-contract-test --config "$FLOW_FILE" --update
	run -0 --separate-stderr trellara-contract-test --config "$FLOW_FILE"
	[[ $output == *": match (2 tables"* ]]
	[ "$(jq -r '.tables[0] | ([.columns[].name] | join(",")) + " " + .columns[2].type' "$PIN")" = "id,v,qty,note bigint" ]

	# a pin of another flow, a damaged pin: named, never compared
	jq -c '.flow = "other:flow"' "$PIN" >"$TEST_DIR/other.json"
	run -78 --separate-stderr trellara-contract-test --config "$FLOW_FILE" --pin "$TEST_DIR/other.json"
	[[ $stderr == *"is the pin of flow \"other:flow\", not of \"$SOURCE_ID:$DATASET_ID\""* ]]
	jq -c '.tables[0].columns[0].not_null = "yes"' "$PIN" >"$TEST_DIR/damaged.json"
	run -65 --separate-stderr trellara-contract-test --config "$FLOW_FILE" --pin "$TEST_DIR/damaged.json"
	[[ $stderr == *"tables[0].columns[0]: \"not_null\" must be true or false"* ]]
}

@test "dataset.contract: pinned stops capture at the ALTER: rows before it are applied, rows after it are not; exit 78 until the contract is refreshed" {
	run -0 trellara-snapshot --config "$FLOW_PINNED"
	run -0 --separate-stderr trellara-contract-test --config "$FLOW_PINNED" --update
	bg_start capture trellara-capture --config "$FLOW_PINNED"
	bg_start applyd trellara-applyd --config "$FLOW_PINNED"
	psql_source "INSERT INTO items SELECT g, 'streamed ' || g, g FROM generate_series(6, 10) g" \
		"INSERT INTO notes (body) VALUES ('streamed')"
	caught_up
	assert_tables_equal items notes

	psql_source "ALTER TABLE items ALTER COLUMN qty TYPE bigint" \
		"INSERT INTO items SELECT g, 'after ' || g, g FROM generate_series(11, 15) g"
	bg_wait capture 60
	[ "$BG_STATUS" -eq 78 ]
	grep -F 'schema contract drift: public.items: column "qty" type (source-pin): source "type oid 20 typmod -1", pin "integer (type oid 23 typmod -1)"; action: reseed the table' "$TEST_DIR/capture.log"
	grep -F 'capture stops before writing any change of "public.items" past the drift' "$TEST_DIR/capture.log"
	# applyd applied everything the stream holds: the rows before the ALTER
	wait_for -t 30 '[ "$(psql_target "SELECT count(*) FROM items")" = 10 ]'
	[ "$(psql_target "SELECT count(*) FROM items WHERE id > 10")" = 0 ]
	[ "$(psql_target "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'items'::regclass AND attname = 'qty'")" = integer ]

	# a restart refuses at once (the source's catalog against the pin)
	run -78 --separate-stderr timeout 60 trellara-capture --config "$FLOW_PINNED"
	[[ $stderr == *'schema contract drift: public.items: column "qty" type (source-pin): source "bigint", pin "integer"'* ]]
	[[ $stderr == *"trellara reseed --config"* ]]

	# the safe action taken (the change on the target, the contract
	# refreshed): the flow resumes from the ALTER and converges; the
	# applyd that kept running takes the refreshed pin
	psql_target "ALTER TABLE items ALTER COLUMN qty TYPE bigint"
	run -0 --separate-stderr trellara-contract-test --config "$FLOW_PINNED" --update
	bg_start capture trellara-capture --config "$FLOW_PINNED"
	caught_up
	assert_tables_equal items notes
	kill -0 "$(bg_pid applyd)"
	grep -F "contract pin \"$PIN\" was refreshed" "$TEST_DIR/applyd.log"
	# the stream carries rows, not sequences (notes' identity)
	run -0 trellara-sequences sync --config "$FLOW_PINNED"
	run -0 trellara-verify --config "$FLOW_PINNED"
	[[ $output == *"result: CONVERGED"* ]]
}

@test "dataset.contract: pinned stops applyd before a stream transaction whose relation differs from the pin, and at start on a target that drifted" {
	run -0 trellara-snapshot --config "$FLOW_FILE"
	run -0 --separate-stderr trellara-contract-test --config "$FLOW_FILE" --update
	# capture does not check (contract off): the stream carries the drift
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_PINNED"
	psql_source "INSERT INTO items SELECT g, 'streamed ' || g, g FROM generate_series(6, 8) g"
	caught_up
	psql_source "ALTER TABLE items ADD COLUMN note text" \
		"INSERT INTO items SELECT g, 'after ' || g, g, 'n' FROM generate_series(9, 12) g"
	bg_wait applyd 60
	[ "$BG_STATUS" -eq 78 ]
	grep -F 'schema contract drift: public.items: column "note" (source-pin): source "present", pin "absent"; action: refresh the contract' "$TEST_DIR/applyd.log"
	grep -F 'applyd stops before applying the transaction at stream offset' "$TEST_DIR/applyd.log"
	[ "$(psql_target "SELECT count(*) FROM items")" = 8 ]
	[ "$(psql_target "SELECT count(*) FROM items WHERE id > 8")" = 0 ]

	# the target drifts as well: applyd refuses at start, naming the target
	psql_target "ALTER TABLE notes ADD COLUMN extra integer"
	run -78 --separate-stderr timeout 60 trellara-applyd --config "$FLOW_PINNED"
	[[ $stderr == *'schema contract drift: public.notes: column "extra" (target-pin): target "present", pin "absent"'* ]]
}

@test "dataset.contract: off by default, pinned, anything else refused at its line; no pin with pinned is exit 78" {
	run -0 trellara-config get dataset.contract --config "$FLOW_FILE"
	[ "$output" = off ]
	run -0 trellara-config get dataset.contract --config "$FLOW_PINNED"
	[ "$output" = pinned ]
	write_flow_file "$TEST_DIR/bad.yml" --set dataset.contract=strict
	line=$(grep -n '^  contract: strict$' "$TEST_DIR/bad.yml" | cut -d: -f1)
	run -78 --separate-stderr trellara-config get dataset.contract --config "$TEST_DIR/bad.yml"
	[[ $stderr == *"line $line, column 13: key \"dataset.contract\" must be \"off\" or \"pinned\", got \"strict\""* ]]
	# the default pin location
	write_flow_file "$TEST_DIR/default.yml"
	run -0 trellara-config get dataset.contract_pin --config "$TEST_DIR/default.yml"
	[ "$output" = "$(sed -n 's/^#define DEFAULT_CONTRACT_PIN "\(.*\)"$/\1/p' "$REPO/include/trellara/defaults.h")" ]
	# pinned without a pin: capture refuses before streaming
	run -0 trellara-snapshot --config "$FLOW_PINNED"
	run -78 --separate-stderr timeout 60 trellara-capture --config "$FLOW_PINNED"
	[[ $stderr == *"dataset.contract is pinned, but there is no contract pin \"$PIN\""* ]]
	[[ $stderr == *"--update"* ]]
}
