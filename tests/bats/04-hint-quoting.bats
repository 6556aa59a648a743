#!/usr/bin/env bats
#
# Commands printed in hints and diagnostics quote the flow file's path for
# the shell (strbuf_add_shell_quoted): pasted into a shell they give back
# the exact path, also one with a space and a single quote.  No database
# needed: the servers are unreachable sockets.

bats_require_minimum_version 1.5.0

load helpers/nodb

# a flow file whose source and target cannot be reached, at DIR/flow.yml
write_unreachable_flow() {
	mkdir -p "$1"
	cat >"$1/flow.yml" <<-EOF_FLOW
	config_version: 2
	source:
	  id: main-db
	  database_url: postgresql:///app?host=$TEST_DIR/no-server
	  publication: trellara_orders
	  slot: trellara_orders_slot
	dataset:
	  id: orders
	  tables:
	    - schema: public
	      name: accounts
	stream:
	  kind: local
	  path: $TEST_DIR/stream
	target:
	  database_url: postgresql:///app?host=$TEST_DIR/no-server
	EOF_FLOW
}

@test "status diagnostics name a command that gives back a flow path with a space and a quote" {
	dir="$TEST_DIR/it's a flow dir"
	write_unreachable_flow "$dir"
	flow="$dir/flow.yml"
	run -0 --separate-stderr trellara-status --config "$flow" --format json
	action=$(jq -r '.problems[] | select(.code == "stream_not_created") | .action' <<<"$output")
	# start capture: "trellara run --config PATH" creates the stream
	[[ $action == *'"trellara run --config '* ]]
	command=${action#*\"}
	command=${command%\"*}
	eval "set -- $command"
	[ "$#" -eq 4 ]
	[ "$1 $2 $3" = "trellara run --config" ]
	[ "$4" = "$flow" ]
	# and run as it is printed, through a shell, it reaches the same file
	run -0 bash -c "trellara() { printf '%s\n' \"\$3\"; }; $command"
	[ "$output" = "$flow" ]
	# a plain path is printed as it is
	write_unreachable_flow "$TEST_DIR/plain"
	run -0 --separate-stderr trellara-status --config "$TEST_DIR/plain/flow.yml" --format json
	[[ $(jq -r '.problems[] | select(.code == "stream_not_created") | .action' <<<"$output") == *"\"trellara run --config $TEST_DIR/plain/flow.yml\""* ]]
}
