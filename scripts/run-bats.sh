#!/usr/bin/env bash
#
# run-bats.sh - run the operator-workflow tests (tests/bats/*.bats, sorted)
# against real PostgreSQL servers; `make bats` calls it, and `make
# conformance` with BATS_FILES="tests/conformance/*.bats".
#
#   BATS_FILTER=regex     only tests whose name matches (bats --filter)
#   BATS_FILES="a b"      only these files (paths, anywhere, or names in tests/bats/)
#   PG_BINDIR=dir         PostgreSQL binaries (default /usr/lib/postgresql/15/bin);
#                         the client tools (psql, pgbench, pg_dump) come from it
#   PG_SOURCE_BINDIR=dir  the source cluster's server binaries (default PG_BINDIR)
#   PG_TARGET_BINDIR=dir  the target cluster's (default PG_BINDIR); other majors:
#                         scripts/install-deps.sh --pg-majors "16 17 18", and
#                         --bindir 18 prints where they are
#   TRELLARA_TEST_TMPDIR  where the test clusters live (default $TMPDIR or /tmp)
#   TRELLARA_KEEP_TMP=1   keep the clusters' directories (stopped) for a post-mortem
#   BATS_JOBS=n           run n test files at once (GNU parallel; the tests of
#                         one file always run in order, in one process)
#
# Prints bats' TAP output with timings, then a summary (counts, slowest
# tests, failures); exits non-zero when any test fails.
set -uo pipefail
export LC_COLLATE=C

cd "$(dirname "$0")/.." || exit 1

if ! command -v bats >/dev/null 2>&1; then
	echo "run-bats: bats is not installed (hint: scripts/install-deps.sh as root)" >&2
	exit 1
fi

if [[ -n ${BATS_FILES:-} ]]; then
	files=()
	for f in $BATS_FILES; do
		[[ -f $f ]] || [[ ! -f tests/bats/$f ]] || f=tests/bats/$f
		[[ -f $f ]] || { echo "run-bats: no such test file: $f" >&2; exit 64; }
		files+=("$f")
	done
else
	shopt -s nullglob
	files=(tests/bats/*.bats) # pathname expansion sorts (LC_ALL=C: bytewise)
	shopt -u nullglob
fi
# With BATS_JOBS, the longest files start first, longest first (each
# lists, roughly, a minute or more of tests; the order is the files'
# total times in a fresh-clone make check): the run then ends with short files
# running beside each other instead of one long file running alone.
if [[ ${BATS_JOBS:-1} != 1 ]] && ((${#files[@]} > 1)); then
	heavy=(68-jetstream-flow 40-snapshot 50-operate 72-pilot-package 60-verify 30-apply 41-snapshot-schemas 20-capture
		64-failover 63-cutover 22-capture-limits 67-jetstream-capture 35-apply-parallel 32-apply-chunks 43-snapshot-split
		31-apply-correctness 21-check 70-chaos-report 15-inspect-transaction flow 01-harness 09-docs 65-verify-interrupt 71-drill
		13-stream-compression)
	first=() rest=()
	for f in "${files[@]}"; do
		name=${f##*/}
		name=${name%.bats}
		if [[ " ${heavy[*]} " == *" $name "* ]]; then first+=("$f"); else rest+=("$f"); fi
	done
	ordered=()
	for h in "${heavy[@]}"; do
		for f in "${first[@]}"; do
			name=${f##*/}
			[[ ${name%.bats} == "$h" ]] && ordered+=("$f")
		done
	done
	files=("${ordered[@]}" "${rest[@]}")
fi
if ((${#files[@]} == 0)); then
	echo "run-bats: no tests/bats/*.bats files"
	exit 0
fi

# The clusters run as the postgres user when we are root: every directory
# on the way to theirs must be traversable by it.  The harness creates its
# own directories 0755 under TRELLARA_TEST_TMPDIR; make sure that one works
# (a private TMPDIR such as /root/tmp does not) or fall back to /tmp.
root=${TRELLARA_TEST_TMPDIR:-${TMPDIR:-/tmp}}
if [[ $(id -u) -eq 0 ]] && id postgres >/dev/null 2>&1 &&
	! runuser -u "${TRELLARA_PG_OS_USER:-postgres}" -- test -x "$root" 2>/dev/null; then
	echo "run-bats: $root is not traversable by ${TRELLARA_PG_OS_USER:-postgres}; using /tmp" >&2
	root=/tmp
fi
export TRELLARA_TEST_TMPDIR=$root

# Stop clusters that crashed or killed runs left behind.
bash tests/bats/helpers/pg.bash reap

args=(--timing --formatter tap --print-output-on-failure)
[[ -n ${BATS_FILTER:-} ]] && args+=(--filter "$BATS_FILTER")
if [[ ${BATS_JOBS:-1} != 1 ]]; then
	command -v parallel >/dev/null 2>&1 ||
		{ echo "run-bats: BATS_JOBS needs GNU parallel (hint: scripts/install-deps.sh as root)" >&2; exit 1; }
	args+=(--jobs "$BATS_JOBS" --no-parallelize-within-files)
fi

log=$(mktemp "${TMPDIR:-/tmp}/trellara-bats-log.XXXXXX")
trap 'rm -f "$log"' EXIT
start=$EPOCHREALTIME
bats "${args[@]}" "${files[@]}" | tee "$log"
status=${PIPESTATUS[0]}
elapsed=$(((${EPOCHREALTIME/./} - ${start/./}) / 1000))

# TAP: "ok 3 name in 120ms", "ok 4 name # skip reason", "not ok 5 name in 9ms"
passed=$(grep -c '^ok ' "$log" | tr -d ' ')
skipped=$(grep -Ec '^ok [0-9]+ .*# [Ss][Kk][Ii][Pp]' "$log" | tr -d ' ')
failed=$(grep -c '^not ok ' "$log" | tr -d ' ')
echo
echo "== bats summary: $((passed - skipped)) passed, $failed failed, $skipped skipped" \
	"in ${#files[@]} file(s), $((elapsed / 1000)).$(printf '%03d' $((elapsed % 1000)))s"
if grep -Eq '^(not )?ok [0-9]+ .* in [0-9]+ms$' "$log"; then
	echo "== slowest:"
	sed -nE 's/^(not )?ok [0-9]+ (.*) in ([0-9]+)ms$/\3 \2/p' "$log" | sort -rn | head -n 5 |
		while read -r ms name; do printf '   %6d ms  %s\n' "$ms" "$name"; done
fi
if ((failed > 0)); then
	echo "== failed:"
	sed -nE 's/^not ok [0-9]+ (.*)$/   \1/p' "$log"
fi
if ((status != 0 && failed == 0)); then
	echo "== bats exited with status $status (a setup_file, teardown_file or harness error?)"
fi
((status == 0 && failed == 0)) || exit 1
exit 0
