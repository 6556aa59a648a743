#!/usr/bin/env bats
#
# Flow-file errors (man 5 trellara.yml): a bad flow file makes a program
# exit 78 with one message naming the file, the line and the key path.
# No database needed: trellara-stream inspect-local is the program that
# loads a flow file and goes no further when it is wrong.

bats_require_minimum_version 1.5.0

load helpers/nodb

STREAM="$BATS_TEST_DIRNAME/../../bin/trellara-stream"

# write_flow FILE: a valid flow file whose line numbers the tests rely on.
write_flow() {
	cat >"$1" <<-EOF_FLOW
	config_version: 2
	source:
	  id: main-db
	  database_url: postgresql://replicator@db1/app
	  publication: trellara_orders
	  slot: trellara_orders_slot
	dataset:
	  id: orders
	  tables:
	    - schema: public
	      name: accounts
	stream:
	  kind: local
	  path: $STREAM_DIR
	  segment_bytes: 67108864
	target:
	  database_url: postgresql:///app_copy
	EOF_FLOW
}

# flow_with SED-SCRIPT: the valid flow file edited by sed; prints its path.
flow_with() {
	local flow="$TEST_DIR/trellara.yml"
	write_flow "$flow"
	sed -i -e "$1" "$flow"
	printf '%s\n' "$flow"
}

inspect() {
	"$STREAM" inspect-local --config "$1"
}

@test "config: an unknown key exits 78 naming file, line, key, and suggests the right one" {
	flow=$(flow_with 's/^  slot:/  slott:/')
	run -78 inspect "$flow"
	[[ $output == *"flow file \"$flow\": line 6, column 3: unknown key \"source.slott\""* ]]
	[[ $output == *'hint: did you mean "source.slot"?'* ]]
}

@test "config: a wrong type exits 78 naming file, line, key and the bad value" {
	flow=$(flow_with 's/^  segment_bytes: .*/  segment_bytes: abc/')
	run -78 inspect "$flow"
	[[ $output == *"flow file \"$flow\": line 15, column 18: key \"stream.segment_bytes\" must be an integer, got \"abc\""* ]]

	flow=$(flow_with 's/^  publication: .*/  publication: {name: x}/')
	run -78 inspect "$flow"
	[[ $output == *"flow file \"$flow\": line 5, column 16: key \"source.publication\" must be a string, got a mapping"* ]]
}

@test "config: a missing required key exits 78 naming file, the enclosing mapping's line, and key" {
	flow=$(flow_with '/^  slot:/d')
	run -78 inspect "$flow"
	[[ $output == *"flow file \"$flow\": line 3: missing required key \"source.slot\""* ]]

	flow=$(flow_with '/^      name: accounts/d')
	run -78 inspect "$flow"
	[[ $output == *"flow file \"$flow\": line 10: missing required key \"dataset.tables[0].name\""* ]]
}

@test "config: a file that is not YAML at all exits 78 naming file and line" {
	flow="$TEST_DIR/trellara.ini"
	printf '[source]\nid = main-db\nslot = trellara_orders_slot\n' >"$flow"
	run -78 inspect "$flow"
	[[ $output == *"flow file \"$flow\": line 2, column 1: not valid YAML:"* ]]
	[[ $output == *"hint:"* ]]

	flow=$(flow_with 's/^  slot:/\tslot:/')
	run -78 inspect "$flow"
	[[ $output == *"flow file \"$flow\": line 6, column 1: not valid YAML:"* ]]
	[[ $output == *"hint: indent with spaces"* ]]
}

@test "config: an unsupported config_version exits 78 before any other complaint" {
	# Version 3 may add keys; the version is what to report, not the keys.
	flow=$(flow_with 's/^config_version: 2/config_version: 3\nsources: []/')
	run -78 inspect "$flow"
	[[ $output == *"flow file \"$flow\": line 1, column 17: unsupported config_version 3 (this Trellara reads version 2)"* ]]
	[[ $output != *sources* ]]
}

@test "config: a secret reference to a missing environment variable exits 78 naming it, not a secret" {
	unset TRELLARA_TEST_NO_SUCH_URL
	flow=$(flow_with 's|^  database_url: postgresql://replicator.*|  database_url: {source: environment_variable, name: TRELLARA_TEST_NO_SUCH_URL}|')
	run -78 inspect "$flow"
	[[ $output == *"flow file \"$flow\": line 4, column 17: environment variable \"TRELLARA_TEST_NO_SUCH_URL\" named by \"source.database_url\" is not set"* ]]

	# Set, it loads: the error was the variable and nothing else.
	TRELLARA_TEST_NO_SUCH_URL='postgresql://app:Hunter2-Secret@db1/app' run inspect "$flow"
	[ "$status" -ne 78 ]
	[[ $output != *Hunter2-Secret* ]]
}

@test "config: a password never appears in a flow-file error" {
	flow=$(flow_with 's|^  database_url: postgresql://replicator.*|  database_url: {postgresql://app:Hunter2-Secret@db1/app}|')
	run -78 inspect "$flow"
	[[ $output == *"line 4, column 18: unknown key \"source.database_url.postgresql://app:***@db1/app\""* ]]
	[[ $output != *Hunter2-Secret* ]]

	secret="$TEST_DIR/source-url"
	printf 'host=db1 password=Hunter2-Secret\n' >"$secret"
	flow=$(flow_with "s|^  database_url: postgresql://replicator.*|  database_url: {source: file, path: $secret}|; s/^  slot:/  slott:/")
	run -78 inspect "$flow"
	[[ $output == *'unknown key "source.slott"'* ]]
	[[ $output != *Hunter2-Secret* ]]
}

@test "config: an unreadable flow file exits 78 naming it" {
	run -78 inspect "$TEST_DIR/no-such-flow.yml"
	[[ $output == *"flow file \"$TEST_DIR/no-such-flow.yml\": cannot read: No such file or directory"* ]]
}

@test "config: a valid flow file is not a configuration error" {
	flow="$TEST_DIR/trellara.yml"
	write_flow "$flow"
	run inspect "$flow"
	[ "$status" -ne 78 ]
	[[ $output != *"flow file"* ]]
}

@test "config: configs/trellara.yml, the documented example, is a valid flow file" {
	run inspect "$REPO/configs/trellara.yml"
	[ "$status" -ne 78 ]
	[[ $output != *"flow file"* ]]
}
