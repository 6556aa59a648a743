#!/usr/bin/env bats
# No secret in any error text: a connection string libpq cannot parse
# (a raw % in a URI password, an unquoted space in a key=value password, an
# IPv6 address whose bracket never closes) is refused when the flow is
# loaded, naming the key, exit 78; neither the string nor libpq's message
# about it (which quotes the text near the fault) is ever shown. check,
# status --format json, verify and pilot-package each meet all three, and
# no part of the password is found in their output or in any file they
# wrote.

bats_require_minimum_version 1.5.0

load helpers/nodb

# flow_with_url KEY URL: a flow file whose KEY (source or target) database
# URL is URL (in single quotes: YAML keeps it as it is)
flow_with_url() {
	local key=$1 url=$2 source_url=postgresql:///app target_url=postgresql:///app_copy
	case $key in source) source_url=$url ;; target) target_url=$url ;; esac
	cat >"$TEST_DIR/trellara.yml" <<-EOF_FLOW
	config_version: 2
	source:
	  id: main-db
	  database_url: '$source_url'
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
	target:
	  database_url: '$target_url'
	observability:
	  metrics_dir: $TEST_DIR/metrics
	EOF_FLOW
}

# no_secret WORD...: no WORD in this test's outputs nor in any file under
# TEST_DIR but the flow file itself
no_secret() {
	local word status=0
	for word in "$@"; do
		if grep -rlF --exclude=trellara.yml -- "$word" "$TEST_DIR" >&2; then
			printf 'the password part "%s" is in the files above\n' "$word" >&2
			status=1
		fi
	done
	return "$status"
}

# each_program KEY: runs check, status --format json, verify and
# pilot-package on the flow; each refuses it at load, naming KEY
each_program() {
	local key=$1 out=$TEST_DIR/out
	mkdir -p "$out"
	run -78 --separate-stderr trellara-check --config "$TEST_DIR/trellara.yml"
	printf '%s\n%s\n' "$output" "$stderr" >"$out/check"
	[[ $stderr == *"$key.database_url: the connection string does not parse"* ]]
	run -78 --separate-stderr trellara status --config "$TEST_DIR/trellara.yml" --format json
	printf '%s\n%s\n' "$output" "$stderr" >"$out/status"
	[[ $stderr == *"$key.database_url: the connection string does not parse"* ]]
	run -78 --separate-stderr trellara-verify --config "$TEST_DIR/trellara.yml"
	printf '%s\n%s\n' "$output" "$stderr" >"$out/verify"
	[[ $stderr == *"$key.database_url: the connection string does not parse"* ]]
	run --separate-stderr trellara pilot-package --config "$TEST_DIR/trellara.yml" --output "$TEST_DIR/package"
	printf '%s\n%s\n' "$output" "$stderr" >"$out/pilot"
	[ "$status" -ne 0 ]
	[[ $stderr == *"$key.database_url: the connection string does not parse"* ]]
}

@test "a raw % in a URI password: refused at load naming the key, the password nowhere" {
	flow_with_url source 'postgresql://app:Sekr1t%zzPw@/app?host=/nonexistent'
	each_program source
	no_secret Sekr1t zzPw
}

@test "an unquoted space in a key=value password: refused at load naming the key, the password nowhere" {
	flow_with_url target 'host=/nonexistent dbname=app_copy user=app password=Sekr1t tailPw9'
	each_program target
	no_secret Sekr1t tailPw9
}

@test "an IPv6 address whose bracket never closes: refused at load naming the key, the password nowhere" {
	flow_with_url source 'postgresql://app:Sekr1tV6pw@[::1/app'
	each_program source
	no_secret Sekr1tV6pw
}

@test "a URL that parses, with a password and options of its own: loaded; the failure to connect names no part of the password" {
	# the flow loads (check gets as far as connecting, which fails: no server)
	flow_with_url source 'postgresql://app:Sekr1tOk@/app?host=/nonexistent&options=-c%20statement_timeout%3D5s'
	run --separate-stderr trellara-check --config "$TEST_DIR/trellara.yml"
	[ "$status" -ne 78 ]
	[[ $stderr != *"does not parse"* ]]
	no_secret Sekr1tOk
}
