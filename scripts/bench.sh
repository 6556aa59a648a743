#!/usr/bin/env bash
# make bench: every benchmark, each against a baseline measured in the
# same run.  BENCH_SECONDS sets the length of one stream_bench round; the
# scripts read their own variables (CAPTURE_BENCH_*, COMPRESS_BENCH_*, JETSTREAM_BENCH_*,
# APPLY_BENCH_*, ...;
# each script's header comment lists them): e.g.
#   APPLY_BENCH_WORKLOADS=tpcb APPLY_BENCH_WORKERS="1 4" make bench
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${BENCH_DIR:-./target/bench}"
mkdir -p "$dir"
echo "== stream ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, $(df -h "$dir" | awk 'NR==2{print $1" "$2}'))"
build/bench/stream_bench "$dir" "${BENCH_SECONDS:-1}"
bench/capture-bench.sh
bench/compress-bench.sh
bench/jetstream-bench.sh
bench/apply-bench.sh
bench/snapshot-bench.sh
bench/verify-bench.sh
