#!/usr/bin/env bats
#
# trellara config get KEY --config F (trellara-config(1)): one value of the
# flow file, read by the C loader, for scripts (trellara run reads
# observability.metrics_dir this way).  No database needed.

bats_require_minimum_version 1.5.0

load helpers/nodb

# write_flow FILE [EXTRA_YAML]: a valid flow file, without observability
# unless EXTRA_YAML adds it; the target URL is a secret reference.
write_flow() {
	cat >"$1" <<-EOF_FLOW
	config_version: 2
	source:
	  id: main-db
	  database_url: postgresql://replicator:source-secret@db1/app
	  publication: trellara_orders
	  slot: trellara_orders_slot
	  pgoutput: {streaming: false}
	dataset:
	  id: orders
	  tables:
	    - schema: public
	      name: accounts
	stream:
	  kind: local
	  path: $STREAM_DIR
	  segment_bytes: 131072
	target:
	  database_url: {source: environment_variable, name: TEST_TARGET_URL}
	${2:-}
	EOF_FLOW
}

setup() {
	TEST_DIR="$BATS_TEST_TMPDIR/t"
	mkdir -m 0700 "$TEST_DIR"
	STREAM_DIR="$TEST_DIR/stream"
	FLOW="$TEST_DIR/flow.yml"
	export TEST_DIR STREAM_DIR FLOW TEST_TARGET_URL=postgresql://app:target-secret@db2/app
}

@test "config get prints a set value, a default, a boolean, and is found by the dispatcher" {
	write_flow "$FLOW" "observability: {metrics_dir: \"$TEST_DIR/metrics dir\"}"
	run -0 --separate-stderr trellara-config get observability.metrics_dir --config "$FLOW"
	[ "$output" = "$TEST_DIR/metrics dir" ]
	[ -z "$stderr" ]
	run -0 trellara-config get stream.segment_bytes --config "$FLOW"
	[ "$output" = 131072 ]
	# not in the file: the loader's default, the same number as defaults.h
	run -0 trellara-config get stream.max_batch_transactions --config "$FLOW"
	[ "$output" = "$(sed -n 's/^#define DEFAULT_MAX_BATCH_TRANSACTIONS \([0-9]*\)$/\1/p' "$REPO/include/trellara/defaults.h")" ]
	run -0 trellara-config get source.pgoutput.streaming --config "$FLOW"
	[ "$output" = false ]
	# options before the words, and through the dispatcher
	run -0 "$REPO/scripts/trellara" config --config "$FLOW" get source.slot
	[ "$output" = trellara_orders_slot ]
}

@test "config get: a key without a value exits 1 and prints nothing" {
	write_flow "$FLOW"
	run -1 --separate-stderr trellara-config get observability.metrics_dir --config "$FLOW"
	[ -z "$output" ]
	[ -z "$stderr" ]
}

@test "config get: an unknown key or a secret is a usage error (64); a secret is never printed" {
	write_flow "$FLOW"
	run -64 --separate-stderr trellara-config get observability.metrics --config "$FLOW"
	[ -z "$output" ]
	[[ $stderr == *'unknown key "observability.metrics"'* ]]
	for key in source.database_url target.database_url; do
		run -64 --separate-stderr trellara-config get "$key" --config "$FLOW"
		[ -z "$output" ]
		[[ $stderr == *"key \"$key\" holds a secret"* ]]
		[[ $stderr != *secret@* && $stderr != *target-secret* && $stderr != *source-secret* ]]
	done
	run -64 trellara-config get --config "$FLOW"
	run -64 trellara-config get stream.path
	run -64 trellara-config put stream.path x --config "$FLOW"
}

@test "config get: a flow file the loader refuses is exit 78 with the loader's message" {
	write_flow "$FLOW" "observability: {metrics_dri: x}"
	run -78 --separate-stderr trellara-config get stream.path --config "$FLOW"
	[ -z "$output" ]
	[[ $stderr == *"observability.metrics_dri"* ]]
	# an unresolvable secret reference fails the load, whatever the key
	write_flow "$FLOW"
	run -78 --separate-stderr env -u TEST_TARGET_URL trellara-config get stream.path --config "$FLOW"
	[[ $stderr == *TEST_TARGET_URL* ]]
	run -78 trellara-config get stream.path --config "$TEST_DIR/missing.yml"
}

@test "a JSON log line is valid JSON for a message with a newline, a quote and a control byte" {
	write_flow "$FLOW"
	key=$'odd"key\nnext\x01end\\'
	TRELLARA_LOG_FORMAT=json run -64 --separate-stderr trellara-config get "$key" --config "$FLOW"
	[ -z "$output" ]
	# one line, which jq parses, and the key comes back byte for byte
	[ "$(printf '%s\n' "$stderr" | wc -l)" -eq 1 ]
	jq -e '.level == "error" and .program == "trellara-config"' <<<"$stderr"
	msg=$(jq -j .msg <<<"$stderr"; printf x)
	[ "${msg%x}" = "unknown key \"$key\" (trellara-config prints scalar keys only; see trellara-config(1))" ]
	# escaped by the one JSON writer (jsonw.h): a newline is \n, as in --format json
	[[ $stderr == *'odd\"key\nnext\u0001end\\'* ]]
}
