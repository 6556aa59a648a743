#!/usr/bin/env bash
# run.sh - build the fuzz targets with clang (libFuzzer + ASan + UBSan)
# into build/fuzz/, seed their corpora and run each for SECONDS (default
# 20).  Crashes land in build/fuzz/artifacts/ (named after the target).
#
#   tests/fuzz/run.sh [SECONDS] [TARGET]
#
# TARGET: pgoutput (the pgoutput decoder, relation cache and session;
# seeds from the recorded fixtures), envelope (the envelope codec and the
# JSON writer of every frame type; seeds written by the target's own
# -DENVELOPE_SEEDS build), or all (the default: each for SECONDS).
#
# make check runs it for 15 s a target (make fuzz-short); longer runs by hand
# (clang 14 and libclang-rt-14-dev, which scripts/install-deps.sh installs).
# Environment: CLANG (default clang), FUZZ_ARGS (extra libFuzzer options).
set -euo pipefail

cd "$(dirname "$0")/../.."
usage() {
	echo "usage: tests/fuzz/run.sh [SECONDS] [pgoutput|envelope|all]" >&2
	exit 64
}
seconds=${1:-20}
target=${2:-all}
case $seconds in '' | *[!0-9]*) usage ;; esac
case $target in pgoutput | envelope | all) ;; *) usage ;; esac
out=build/fuzz
mkdir -p "$out/artifacts"

CFLAGS=(-std=c11 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Werror -Iinclude -include include/trellara/banned.h)
SANITIZE=("-fsanitize=fuzzer,address,undefined" -fno-sanitize-recover=all)

# run NAME CORPUS SEEDS MAX_LEN: the target for $seconds
run() {
	# shellcheck disable=SC2086 # FUZZ_ARGS is a list of options
	"$out/fuzz_$1" -max_total_time="$seconds" -max_len="$4" -print_final_stats=1 \
		-artifact_prefix="$out/artifacts/$1-" ${FUZZ_ARGS:-} "$2" "$3"
}

fuzz_pgoutput() {
	mkdir -p "$out/corpus" "$out/seeds"
	${CLANG:-clang} "${CFLAGS[@]}" "${SANITIZE[@]}" \
		tests/fuzz/fuzz_pgoutput.c common/cdc/pgoutput*.c common/base/strbuf.c common/base/xalloc.c \
		-o "$out/fuzz_pgoutput"

	# Seeds: one per fixture, in the target's input format (flags byte, then
	# Int16 length + bytes per message): the first 60 messages and the last 20,
	# which keeps the big streamed fixtures small and still ends them properly.
	for fixture in tests/fixtures/pgoutput/*.hex; do
		name=$(basename "$fixture" .hex)
		awk '
			/^# proto_version / { proto = $3 }
			/^#/ || NF == 0 { next }
			{ msgs[n++] = $1 }
			END {
				printf "%02x", (proto == 1 ? 1 : 0)
				for (i = 0; i < n; i++) {
					if (n > 80 && i >= 60 && i < n - 20)
						continue
					printf "%04x%s", length(msgs[i]) / 2, msgs[i]
				}
				printf "\n"
			}' "$fixture" | xxd -r -p >"$out/seeds/$name"
	done
	run pgoutput "$out/corpus" "$out/seeds" 20000
}

fuzz_envelope() {
	local corpus=$out/envelope-corpus seeds=$out/envelope-seeds
	mkdir -p "$corpus" "$seeds"
	local sources=(tests/fuzz/fuzz_envelope.c common/cdc/envelope.c common/cdc/envelope_json.c common/base/jsonw.c common/base/textcodec.c common/base/lsn.c common/base/xalloc.c common/base/strbuf.c)
	${CLANG:-clang} "${CFLAGS[@]}" "${SANITIZE[@]}" "${sources[@]}" -o "$out/fuzz_envelope"
	# Seeds: an envelope with every change kind (as txn and as chunk), one
	# without origin, an empty one, a manifest, a commit marker, a
	# watermark and a ddl payload, each behind its frame-type byte.
	${CLANG:-clang} "${CFLAGS[@]}" -DENVELOPE_SEEDS "${sources[@]}" -o "$out/envelope-seeds-gen"
	"$out/envelope-seeds-gen" "$seeds"
	run envelope "$corpus" "$seeds" 8192
}

case $target in
pgoutput) fuzz_pgoutput ;;
envelope) fuzz_envelope ;;
all)
	# each in its own run, so a crash in one still lets the other run;
	# both at once (each is one process), their output one after the other
	rc=0
	"$0" "$seconds" pgoutput >"$out/pgoutput.log" 2>&1 &
	p1=$!
	"$0" "$seconds" envelope >"$out/envelope.log" 2>&1 &
	p2=$!
	wait "$p1" || rc=$?
	cat "$out/pgoutput.log"
	wait "$p2" || rc=$?
	cat "$out/envelope.log"
	exit "$rc"
	;;
esac
