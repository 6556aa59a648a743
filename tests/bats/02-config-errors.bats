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

# ---- bad option values, every program (issue 12) ----

# The programs built into bin/: trellara-capture, trellara-stream, ...
programs() {
	local bin
	for bin in "$REPO"/bin/trellara-*; do
		[ -f "$bin" ] && [ -x "$bin" ] && printf '%s\n' "${bin##*/}"
	done
	return 0
}

# help_options_with PROGRAM ARG-RE: the long options of PROGRAM --help
# whose argument's name matches ARG-RE, one per line ("--batch").
help_options_with() {
	"$REPO/bin/$1" --help | awk -v arg="$2" '
		/^options:/ { inside = 1; next }
		inside && /^$/ { exit }
		inside && match($0, "--[a-z][a-z0-9-]* (" arg ")( |$)") {
			s = substr($0, RSTART, RLENGTH)
			sub(/ .*/, "", s)
			print s
		}'
}

# The options that take a number are those whose argument --help names N,
# SECS or XID: a new one (or a new program) is checked without a list here.
numeric_options() {
	help_options_with "$1" 'N|SECS|XID'
}

# A flow file whose servers refuse at once: a program that took a bad
# value and went on fails there, not with 64.
write_refusing_flow() {
	write_flow "$1"
	sed -i -e 's|postgresql://replicator@db1/app|postgresql://trellara@127.0.0.1:1/app|' \
		-e 's|postgresql:///app_copy|postgresql://trellara@127.0.0.1:1/app_copy|' "$1"
}

@test "options: every program answers a bad numeric option value with 64 and a message naming the option" {
	local flow="$TEST_DIR/trellara.yml" prog opt value n_progs=0 n_opts=0 all_opts=""
	write_refusing_flow "$flow"
	for prog in $(programs); do
		n_progs=$((n_progs + 1))
		for opt in $(numeric_options "$prog"); do
			n_opts=$((n_opts + 1))
			all_opts+=" $prog$opt"
			# not a number: what atoi and a bare strtoull took ("5abc" is 5
			# to atoi, "-1" and " -1" wrap around in strtoull)
			for value in abc 5abc -1 ' -1' '' 0x10; do
				run -64 "$prog" "$opt=$value" --config "$flow"
				[[ $output == *"invalid value \"$value\" for option $opt"* ]] ||
					{ echo "$prog $opt=\"$value\": $output" >&2; false; }
				[[ $output == *"hint: run \"$prog --help\""* ]]
			done
			# out of range for every option: past what 64 bits hold
			run -64 "$prog" "$opt" 99999999999999999999 --config "$flow"
			[[ $output == *"$opt must be in range "* ]] ||
				{ echo "$prog $opt 99999999999999999999: $output" >&2; false; }
		done
	done
	# the loops ran over the programs and options known today
	[ "$n_progs" -ge 8 ]
	[ "$n_opts" -ge 9 ]
	local known
	for known in trellara-verify--fence-timeout trellara-status--rate-seconds \
		trellara-quarantine--transaction-id trellara-stream--batch trellara-stream--count; do
		[[ "$all_opts " == *" $known "* ]] || { echo "no numeric option $known in --help" >&2; false; }
	done
}

@test "options: a value out of an option's own range is 64 naming the option and the range" {
	local flow="$TEST_DIR/trellara.yml"
	write_refusing_flow "$flow"
	run -64 trellara-verify --fence-timeout 0 --config "$flow"
	[[ $output == *"--fence-timeout must be in range 1.."* ]]
	run -64 trellara-status --rate-seconds 3601 --config "$flow"
	[[ $output == *"--rate-seconds must be in range 0..3600"* ]]
	run -64 trellara-quarantine replay-ready --transaction-id 0 --commit-lsn 0/1 --config "$flow"
	[[ $output == *"--transaction-id must be in range 1..4294967295"* ]]
	run -64 trellara-quarantine replay-ready --transaction-id 4294967296 --commit-lsn 0/1 --config "$flow"
	[[ $output == *"--transaction-id must be in range 1..4294967295"* ]]
	# an abbreviated option is named in full
	run -64 trellara-verify --fence=abc --config "$flow"
	[[ $output == *'invalid value "abc" for option --fence-timeout'* ]]
}

@test "options: every program answers an unknown option or a bad choice with 64 naming the option" {
	local flow="$TEST_DIR/trellara.yml" prog n=0
	write_refusing_flow "$flow"
	for prog in $(programs); do
		n=$((n + 1))
		run -64 "$prog" --batch-size=abc --config "$flow"
		[[ $output == *'unknown option "--batch-size"'* ]] || { echo "$prog: $output" >&2; false; }
		[[ $output == *"hint: run \"$prog --help\""* ]]
		run -64 "$prog" --config
		[[ $output == *'"--config"'* ]] || { echo "$prog: $output" >&2; false; }
		if [ -n "$(help_options_with "$prog" FORMAT)" ]; then
			run -64 "$prog" --format=yaml --config "$flow"
			[[ $output == *'--format must be '*', got "yaml"'* ]] || { echo "$prog: $output" >&2; false; }
		fi
	done
	[ "$n" -ge 8 ]
}

@test "options: a bad TRELLARA_*_MS value makes capture and applyd exit 78 naming the variable" {
	local flow="$TEST_DIR/trellara.yml" prog value
	write_refusing_flow "$flow"
	for prog in trellara-capture trellara-applyd; do
		for value in abc 0 -5 ''; do
			TRELLARA_RECONNECT_BASE_MS=$value run -78 "$prog" --config "$flow"
			[[ $output == *"environment variable TRELLARA_RECONNECT_BASE_MS"* ||
				$output == *"TRELLARA_RECONNECT_BASE_MS must be in range "* ]] || { echo "$prog: $output" >&2; false; }
		done
	done
	TRELLARA_STATUS_INTERVAL_MS=10s run -78 trellara-capture --config "$flow"
	[[ $output == *'invalid value "10s" for environment variable TRELLARA_STATUS_INTERVAL_MS'* ]]
}
