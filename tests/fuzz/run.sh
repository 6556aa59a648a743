#!/usr/bin/env bash
# run.sh - build the pgoutput fuzz target with clang (libFuzzer + ASan +
# UBSan) into build/fuzz/, seed a corpus from the recorded fixtures and run
# it for SECONDS (default 20).  Crashes land in build/fuzz/artifacts/.
#
#   tests/fuzz/run.sh [SECONDS]
#
# Not part of the Makefile: run by hand (clang 14 and libclang-rt-14-dev).
# Environment: CLANG (default clang), FUZZ_ARGS (extra libFuzzer options).
set -euo pipefail

cd "$(dirname "$0")/../.."
seconds=${1:-20}
case $seconds in '' | *[!0-9]*) echo "usage: tests/fuzz/run.sh [SECONDS]" >&2; exit 64 ;; esac
out=build/fuzz
mkdir -p "$out/corpus" "$out/seeds" "$out/artifacts"

${CLANG:-clang} -std=c11 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Werror \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-Iinclude -include include/trellara/banned.h \
	tests/fuzz/fuzz_pgoutput.c common/pgoutput.c common/xalloc.c \
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

# shellcheck disable=SC2086 # FUZZ_ARGS is a list of options
"$out/fuzz_pgoutput" -max_total_time="$seconds" -max_len=20000 -print_final_stats=1 \
	-artifact_prefix="$out/artifacts/" ${FUZZ_ARGS:-} "$out/corpus" "$out/seeds"
