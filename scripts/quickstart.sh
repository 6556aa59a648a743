#!/usr/bin/env bash
#
# quickstart.sh - `make quickstart`: from a fresh Debian 12 machine to a
# working Trellara in one command.  It installs the missing Debian
# packages (when run as root; otherwise it says which), builds every
# program, and then shows Trellara's durable local stream at work:
#
#   1. appends a few frames to a new stream in ./target/quickstart/stream
#      (each acknowledged offset is printed only after its fdatasync),
#   2. inspects the stream without touching it,
#   3. reads the frames back, as text and as JSON for jq.
#
# The demo grows with Trellara: once capture, snapshot and apply land, it
# will also start two throwaway PostgreSQL clusters, replicate a table
# between them and verify that the copy converged.
#
# Re-running starts the demo from scratch: ./target/quickstart is removed
# first (nothing else is touched).
set -euo pipefail

cd "$(dirname "$0")/.."

scripts/install-deps.sh
make -s all

demo=./target/quickstart
stream=$demo/stream
rm -rf "$demo"
mkdir -p "$demo"

bold='' plain=''
if [[ -t 1 ]]; then bold=$'\033[1m' plain=$'\033[0m'; fi
step() {
	printf '\n%s== %s%s\n' "$bold" "$1" "$plain"
	shift
	printf '$ %s\n' "$*"
}

# Plain-text payloads: until capture writes real transaction envelopes,
# `read` shows these frames with --raw (a txn frame's payload is decoded
# as an envelope otherwise).
frames='{"type":"txn","payload":"hello"}
{"type":"txn","payload":"from"}
{"type":"txn","payload":"trellara"}'

step "append three frames; each offset is printed once it is durable" \
	"printf '%s\\n' '{\"type\":\"txn\",\"payload\":\"hello\"}' ... | bin/trellara-stream append --dir $stream"
printf '%s\n' "$frames" | bin/trellara-stream append --dir "$stream"

step "inspect the stream (readers never modify it)" \
	"scripts/trellara stream inspect-local --dir $stream"
scripts/trellara stream inspect-local --dir "$stream"

step "read the frames back" \
	"scripts/trellara stream read --dir $stream --raw"
scripts/trellara stream read --dir "$stream" --raw

step "the same as JSON lines, for jq and friends" \
	"scripts/trellara stream read --dir $stream --raw --format json | jq -r '[.offset, .type, (.payload_base64 | @base64d)] | @tsv'"
scripts/trellara stream read --dir "$stream" --raw --format json |
	jq -r '[.offset, .type, (.payload_base64 | @base64d)] | @tsv'

cat <<MSG

Done.  The stream lives in $stream; see trellara-stream(1) and
trellara-stream(5) (man -l man/man1/trellara-stream.1) for what else it can do,
and README.md for the pipeline.  Next: make check
MSG
