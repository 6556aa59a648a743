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

@test "config get: observability.metrics_dir unset is its default place, <root>/<source.id>/<dataset.id>, the root chosen by the environment and the user" {
	write_flow "$FLOW"
	run -0 --separate-stderr env -u TRELLARA_STATE_DIR trellara-config get observability.metrics_dir --config "$FLOW"
	if [[ $(id -u) -eq 0 ]]; then
		[ "$output" = /var/lib/trellara/main-db/orders ]
	else
		[ "$output" = "${XDG_STATE_HOME:-$HOME/.local/state}/trellara/main-db/orders" ]
	fi
	run -0 env TRELLARA_STATE_DIR=/srv/flows trellara-config get observability.metrics_dir --config "$FLOW"
	[ "$output" = /srv/flows/main-db/orders ]
	# set in the file, the file's
	write_flow "$FLOW" "observability: {metrics_dir: /m}"
	run -0 env TRELLARA_STATE_DIR=/srv/flows trellara-config get observability.metrics_dir --config "$FLOW"
	[ "$output" = /m ]
	# a user other than root: XDG_STATE_HOME (absolute), else the home directory
	[[ $(id -u) -eq 0 ]] || skip "runs the loader as another user: needs root"
	id postgres >/dev/null 2>&1 || skip "no user postgres"
	local shared
	shared=$(mktemp -d)
	chmod 0755 "$shared"
	write_flow "$shared/flow.yml"
	chmod 0644 "$shared/flow.yml"
	local bin=$REPO/bin/trellara-config
	run -0 runuser -u postgres -- env -i HOME=/home/app XDG_STATE_HOME=/xdg TEST_TARGET_URL="$TEST_TARGET_URL" "$bin" get observability.metrics_dir --config "$shared/flow.yml"
	[ "$output" = /xdg/trellara/main-db/orders ]
	run -0 runuser -u postgres -- env -i HOME=/home/app XDG_STATE_HOME=relative TEST_TARGET_URL="$TEST_TARGET_URL" "$bin" get observability.metrics_dir --config "$shared/flow.yml"
	[ "$output" = /home/app/.local/state/trellara/main-db/orders ]
	rm -rf "$shared"
}

@test "config get: a key without a value exits 1 and prints nothing" {
	write_flow "$FLOW"
	run -1 --separate-stderr trellara-config get environment --config "$FLOW"
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
	# shellcheck disable=SC1003 # the backslash at the end is the text's, not an escape
	escaped='odd\"key\nnext\u0001end\\'
	[[ $stderr == *"$escaped"* ]]
}

# example_values FILE [vary]: "key.path<TAB>value" for every scalar line of
# a block-style flow file such as configs/trellara.yml (comments dropped,
# list items and [flow] lists skipped).  With "vary", prints the file
# instead with every such value changed to another valid one: numbers + 1,
# booleans flipped, "x" appended to strings; config_version and the
# one-choice keys (stream.kind, stream.durability, dataset.mode) kept,
# stream.compression switched between none and zlib, dataset.contract
# between off and pinned,
# protocol_version 1 (streaming is flipped to false with it).
example_values() {
	awk -v vary="${2:-}" '
		function out(line) { if (vary != "") print line }
		{
			raw = $0
			line = $0
			sub(/[ \t]+#.*$/, "", line)
			if (line ~ /^[ \t]*(#.*)?$/) { out(raw); next }
			match(line, /^ */)
			ind = RLENGTH
			text = substr(line, ind + 1)
			if (skip >= 0 && ind > skip) { out(raw); next }
			skip = -1
			while (depth > 0 && ind <= indents[depth])
				depth--
			if (text ~ /^- /) { skip = indents[depth]; out(raw); next }
			key = text
			sub(/:.*/, "", key)
			value = text
			sub(/^[^:]*:[ ]*/, "", value)
			if (value == "") {
				depth++
				indents[depth] = ind
				names[depth] = key
				out(raw)
				next
			}
			path = ""
			for (i = 1; i <= depth; i++)
				path = path names[i] "."
			path = path key
			if (value ~ /^[[{]/) { out(raw); next }
			if (value ~ /^".*"$/)
				value = substr(value, 2, length(value) - 2)
			if (vary == "") {
				print path "\t" value
				next
			}
			new = value
			if (path == "source.pgoutput.protocol_version")
				new = 1
			else if (path ~ /^(config_version|stream\.kind|stream\.durability|dataset\.mode)$/)
				new = value
			else if (path == "stream.compression")
				new = value == "none" ? "zlib" : "none"
			else if (path == "dataset.contract")
				new = value == "off" ? "pinned" : "off"
			else if (value == "true")
				new = "false"
			else if (value == "false")
				new = "true"
			else if (value ~ /^[0-9]+$/)
				new = sprintf("%.0f", value + 1)
			else
				new = value "x"
			print substr(line, 1, ind) key ": " new
		}' "$1"
}

# man_scalar_keys KIND: the scalar keys of trellara.yml(5) (integer,
# string, name or boolean; not a list, a mapping or a secret reference)
# that a flow of stream.kind KIND takes: local (the example file's kind)
# leaves out the keys only a jetstream flow takes, jetstream lists those
JETSTREAM_KEYS='^stream\.(name|subject|replicas|duplicate_window_seconds|max_bytes|accept_loss_on_broker_crash)$'
man_scalar_keys() {
	sed -n 's/^\.BR \([a-z_.]*\) " (\(integer\|string\|name\|boolean\)[,)].*/\1/p' "$REPO/man/man5/trellara.yml.5" |
		if [[ ${1:-} == jetstream ]]; then grep -E "$JETSTREAM_KEYS"; else grep -Ev "$JETSTREAM_KEYS"; fi
}

@test "stream.compression: none or zlib, default from defaults.h, with either kind; anything else is refused at its line" {
	write_flow "$FLOW"
	run -0 --separate-stderr trellara-config get stream.compression --config "$FLOW"
	[ "$output" = "$(sed -n 's/^#define DEFAULT_STREAM_COMPRESSION "\([a-z]*\)"$/\1/p' "$REPO/include/trellara/defaults.h")" ]
	sed -i 's/^  segment_bytes: 131072$/&\n  compression: zlib/' "$FLOW"
	run -0 --separate-stderr trellara-config get stream.compression --config "$FLOW"
	[ "$output" = zlib ]
	sed -i 's/^  compression: zlib$/  compression: gzip/' "$FLOW"
	run -78 --separate-stderr trellara-config get stream.compression --config "$FLOW"
	[ -z "$output" ]
	line=$(grep -n '^  compression: gzip$' "$FLOW" | cut -d: -f1)
	[[ $stderr == *"line $line, column 16: key \"stream.compression\" must be \"none\" or \"zlib\", got \"gzip\""* ]]
	sed -i -e 's/^  compression: gzip$/  compression: zlib/' -e '/^  segment_bytes: /d' -e "s|^  path: .*|  servers: [nats://127.0.0.1:4222]\n  name: ORDERS\n  subject: trellara.orders|" \
		-e 's/^  kind: local$/  kind: jetstream/' "$FLOW"
	run -0 --separate-stderr trellara-config get stream.kind --config "$FLOW"
	[ "$output" = jetstream ]
	run -0 --separate-stderr trellara-config get stream.compression --config "$FLOW"
	[ "$output" = zlib ]
	# a jetstream flow without the key has the same default as a local one
	sed -i '/^  compression: zlib$/d' "$FLOW"
	run -0 --separate-stderr trellara-config get stream.compression --config "$FLOW"
	[ "$output" = "$(sed -n 's/^#define DEFAULT_STREAM_COMPRESSION "\([a-z]*\)"$/\1/p' "$REPO/include/trellara/defaults.h")" ]
	[ -n "$output" ]
}

@test "config get prints every scalar key of trellara.yml(5) as the example file sets it" {
	cp "$REPO/configs/trellara.yml" "$TEST_DIR/example.yml"
	example_values "$TEST_DIR/example.yml" vary >"$TEST_DIR/varied.yml"
	# the man page's scalar keys are exactly the example's (the secrets aside)
	run -0 man_scalar_keys local
	[ "${#lines[@]}" -ge 20 ]
	[ "$(man_scalar_keys local | sort)" = "$(example_values "$TEST_DIR/example.yml" | cut -f1 | grep -v 'database_url$' | sort)" ]
	for file in "$TEST_DIR/example.yml" "$TEST_DIR/varied.yml"; do
		n=0
		while IFS=$'\t' read -r key value; do
			if [[ $key == *.database_url ]]; then
				run -64 --separate-stderr trellara-config get "$key" --config "$file"
				[ -z "$output" ]
				continue
			fi
			run -0 --separate-stderr trellara-config get "$key" --config "$file"
			[ "$output" = "$value" ] || {
				echo "$file: $key printed \"$output\", the file has \"$value\"" >&2
				false
			}
			n=$((n + 1))
		done < <(example_values "$file")
		[ "$n" -eq "$(man_scalar_keys local | wc -l)" ]
	done
	# the variation changed the values it could
	[ "$(example_values "$TEST_DIR/varied.yml" | grep -c .)" -eq "$(example_values "$TEST_DIR/example.yml" | grep -c .)" ]
	[ "$(diff <(example_values "$TEST_DIR/example.yml") <(example_values "$TEST_DIR/varied.yml") | grep -c '^>')" -ge 20 ]
}

@test "config get prints the keys of a stream.kind jetstream flow, with their defaults" {
	cp "$REPO/configs/trellara.yml" "$TEST_DIR/js.yml"
	sed -i -e '/^  path: /d' -e '/^  durability: /d' -e '/^  segment_bytes: /d' -e '/^  min_free_bytes: /d' -e '/^  compression: /d' \
		-e 's/^  kind: local.*/  kind: jetstream\n  servers: [nats:\/\/127.0.0.1:4222]\n  name: ORDERS\n  subject: trellara.orders/' "$TEST_DIR/js.yml"
	run -0 --separate-stderr trellara-config get stream.kind --config "$TEST_DIR/js.yml"
	[ "$output" = jetstream ]
	run -0 man_scalar_keys jetstream
	[ "${#lines[@]}" -eq 6 ]
	local key want
	for key in "${lines[@]}"; do
		case $key in
		stream.name) want=ORDERS ;;
		stream.subject) want=trellara.orders ;;
		stream.replicas) want=3 ;;
		stream.duplicate_window_seconds) want=120 ;;
		stream.max_bytes) want=0 ;; # none
		stream.accept_loss_on_broker_crash) want=false ;;
		esac
		run -0 --separate-stderr trellara-config get "$key" --config "$TEST_DIR/js.yml"
		[ "$output" = "$want" ]
	done
}

@test "config with-url: the program gets the URL in libpq's variables, never on its command line" {
	write_flow "$FLOW"
	# a stale libpq variable of the caller's must not reach the program
	# (the sessions' pinned settings, PGOPTIONS and PGCLIENTENCODING, are
	# checked below)
	show='env | grep "^PG" | grep -v "^PGOPTIONS=\|^PGCLIENTENCODING=" | LC_ALL=C sort; printf "argv: %s\n" "$*"'
	PGAPPNAME=stale PGHOST=elsewhere PGOPTIONS='-c work_mem=1GB' run -0 --separate-stderr \
		trellara config with-url target.database_url --config "$FLOW" -- sh -c "$show" sh -X -c x
	[ "$output" = $'PGDATABASE=app\nPGHOST=db2\nPGPASSWORD=target-secret\nPGUSER=app\nargv: -X -c x' ]
	[ -z "$stderr" ]
	run -0 trellara-config with-url source.database_url --config "$FLOW" -- sh -c "$show" sh
	[ "$output" = $'PGDATABASE=app\nPGHOST=db1\nPGPASSWORD=source-secret\nPGUSER=replicator\nargv: ' ]
	# the program's sessions run under the pinned settings (DESIGN §15):
	# the caller's stale PGOPTIONS is gone, the URL's own options come first
	PGOPTIONS='-c work_mem=1GB' run -0 trellara-config with-url target.database_url --config "$FLOW" -- \
		sh -c 'printf "%s|%s\n" "$PGOPTIONS" "$PGCLIENTENCODING"'
	[ "$output" = "-c DateStyle=ISO,YMD -c IntervalStyle=postgres -c extra_float_digits=3 -c TimeZone=UTC -c bytea_output=hex -c lc_monetary=C -c search_path=|UTF8" ]
	TEST_TARGET_URL='postgresql://app:target-secret@db2/app?options=-c%20statement_timeout%3D5s' run -0 trellara-config with-url target.database_url --config "$FLOW" -- sh -c 'printf "%s\n" "$PGOPTIONS"'
	[ "$output" = "-c statement_timeout=5s -c DateStyle=ISO,YMD -c IntervalStyle=postgres -c extra_float_digits=3 -c TimeZone=UTC -c bytea_output=hex -c lc_monetary=C -c search_path=" ]
	# the program's exit status is the command's
	run -7 trellara-config with-url source.database_url --config "$FLOW" -- sh -c 'exit 7'
}

@test "config with-url: usage, a program that cannot run, a parameter libpq has no variable for" {
	write_flow "$FLOW"
	run -64 --separate-stderr trellara-config with-url stream.path --config "$FLOW" -- true
	[[ $stderr == *'"stream.path" is not source.database_url or target.database_url'* ]]
	run -64 trellara-config with-url target.database_url --config "$FLOW" --
	run -64 trellara-config with-url target.database_url -- true
	run -69 --separate-stderr trellara-config with-url target.database_url --config "$FLOW" -- "$TEST_DIR/none"
	[[ $stderr == *"cannot run \"$TEST_DIR/none\""* ]]
	TEST_TARGET_URL='postgresql://app:target-secret@db2/app?replication=database' \
		run -78 --separate-stderr trellara-config with-url target.database_url --config "$FLOW" -- true
	[[ $stderr == *'parameter "replication" of "target.database_url" has no libpq environment variable'* ]]
	[[ $stderr != *target-secret* ]]
}
