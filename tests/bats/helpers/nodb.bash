# shellcheck shell=bash
#
# nodb.bash - for test files that need no PostgreSQL (the stream, the
# flow file):  load helpers/nodb
# Exports REPO and a PATH that starts with $REPO/bin:$REPO/scripts, and
# gives each test an empty TEST_DIR (0700) with STREAM_DIR inside it, and
# wait_for (helpers/wait.bash), as helpers/common does.

bats_require_minimum_version 1.5.0

# shellcheck source=tests/bats/helpers/wait.bash
source "${BASH_SOURCE[0]%/*}/wait.bash"

REPO="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
export REPO
export PATH="$REPO/bin:$REPO/scripts:$PATH"

setup() {
	TEST_DIR="$BATS_TEST_TMPDIR/t"
	mkdir -m 0700 "$TEST_DIR"
	STREAM_DIR="$TEST_DIR/stream"
	export TEST_DIR STREAM_DIR
}

# frames N [FIRST] [PAD]: N JSON lines for `trellara-stream append`, payloads
# "frame <i> <PAD x's>" for i = FIRST .. FIRST+N-1.
frames() {
	local n=$1 first=${2:-0} pad
	pad=$(printf '%*s' "${3:-100}" '' | tr ' ' x)
	for ((i = first; i < first + n; i++)); do
		printf '{"type":"txn","payload":"frame %d %s"}\n' "$i" "$pad"
	done
}

# payloads DIR: the payload of every frame, in order, one per line (read
# --raw: these test payloads are not transaction envelopes).
payloads() {
	trellara-stream read --dir "$1" --raw --format json | jq -r '.payload_base64 | @base64d'
}
