#!/usr/bin/env bash
#
# run-matrix.sh - run the end-to-end bats tests in lanes, each on its own
# pair of PostgreSQL servers (source major -> target major); `make
# check-matrix` runs every lane, `make bats-cross` (part of `make check`)
# the one lane 15 -> 18 with tests/bats/matrix/flow.bats and
# 42-snapshot-create-tables.bats only.
#
#   TRELLARA_MATRIX_LANES="16:16 15:18"   the lanes, SOURCE:TARGET majors
#                         (default: 16:16 17:17 18:18 15:18 16:17)
#   TRELLARA_MATRIX_FILES="a.bats b.bats" the test files of every lane
#                         (default: see below)
#   BATS_FILTER=regex     passed on to scripts/run-bats.sh
#
# It installs the majors the lanes need first (scripts/install-deps.sh
# --pg-majors: 15 is Debian's, 16-18 the embedded servers in its cache),
# then runs scripts/run-bats.sh once per lane with PG_SOURCE_BINDIR and
# PG_TARGET_BINDIR set.  The client tools (psql, pgbench, pg_dump) stay
# Debian's 15 (PG_BINDIR): the embedded servers come without them.
#
# The default files, in every lane: tests/bats/matrix/flow.bats (check,
# snapshot under pgbench load, applyd killed -9, verify, reseed,
# quarantine), 30-apply.bats (column types, exactly once across kills,
# quarantines, chunking), 40-snapshot.bats, 42-snapshot-create-tables.bats
# (tables built from the source's catalogs), 50-operate.bats,
# 60-verify.bats, 65-verify-interrupt.bats (verify across lost connections)
# and 64-failover.bats (its PostgreSQL 17+ tests, failover
# slots, run only in lanes whose source is 17 or later; its pg_basebackup
# standby only on a 15 source), and every tests/conformance/*.bats
# (PostgreSQL's own logical-replication scenarios, docs/CONFORMANCE.md).  BATS_JOBS (default 2) files run at once.
#
# Prints each lane's bats output, then a summary with each lane's result
# and wall time; exits non-zero when any lane fails.
set -uo pipefail
export LC_COLLATE=C

cd "$(dirname "$0")/.." || exit 1

lanes=${TRELLARA_MATRIX_LANES:-"16:16 17:17 18:18 15:18 16:17"}
client_major=15
default_files="tests/bats/matrix/flow.bats tests/bats/30-apply.bats tests/bats/40-snapshot.bats
	tests/bats/42-snapshot-create-tables.bats tests/bats/50-operate.bats tests/bats/60-verify.bats
	tests/bats/64-failover.bats tests/bats/65-verify-interrupt.bats tests/bats/05-secrets-in-errors.bats
	tests/bats/38-session-settings.bats tests/bats/39-planted-objects.bats
	$(printf '%s ' tests/conformance/*.bats)"
export BATS_JOBS=${BATS_JOBS:-2}

majors=""
for lane in $lanes; do
	[[ $lane =~ ^([0-9]+):([0-9]+)$ ]] || {
		echo "run-matrix: lane \"$lane\" is not SOURCE:TARGET (e.g. 15:18)" >&2
		exit 64
	}
	majors+=" ${BASH_REMATCH[1]} ${BASH_REMATCH[2]}"
done
majors=$(tr ' ' '\n' <<<"$majors" | sed '/^$/d' | sort -un | tr '\n' ' ')
scripts/install-deps.sh --pg-majors "$majors" || exit 1
declare -A bindir=()
for m in $majors; do
	bindir[$m]=$(scripts/install-deps.sh --bindir "$m") || {
		echo "run-matrix: PostgreSQL $m is not installed in ${bindir[$m]}" >&2
		exit 1
	}
done
export PG_BINDIR=${PG_BINDIR:-/usr/lib/postgresql/$client_major/bin}

declare -a summary=()
failed=0
for lane in $lanes; do
	src=${lane%%:*} tgt=${lane##*:}
	files=${TRELLARA_MATRIX_FILES:-$default_files}
	echo
	echo "==== lane $src -> $tgt: source ${bindir[$src]}, target ${bindir[$tgt]}"
	start=$EPOCHREALTIME
	PG_SOURCE_BINDIR=${bindir[$src]} PG_TARGET_BINDIR=${bindir[$tgt]} BATS_FILES=$files \
		scripts/run-bats.sh
	status=$?
	ms=$(((${EPOCHREALTIME/./} - ${start/./}) / 1000))
	result=ok
	((status == 0)) || { result=FAILED; failed=$((failed + 1)); }
	summary+=("$(printf '   %-9s %-7s %6d.%ds  %s' "$src -> $tgt" "$result" $((ms / 1000)) $((ms % 1000 / 100)) \
		"$(for f in $files; do printf '%s\n' "${f##*/}"; done | paste -sd ' ')")")
done

echo
echo "== matrix summary (lane: source -> target major, result, wall time, files)"
printf '%s\n' "${summary[@]}"
if ((failed > 0)); then
	echo "== $failed lane(s) failed"
	exit 1
fi
exit 0
