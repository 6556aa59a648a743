#!/usr/bin/env bash
#
# soak-trend.sh - the soak's trend judge (scripts/soak.sh, README "make
# soak"): a pure function of its input, no server, no clock.
#
#   scripts/soak-trend.sh --bound-per-hour B [--warmup-seconds W] <SAMPLES
#
# SAMPLES: one "T VALUE" line per sample (T seconds since the start,
# VALUE a number: bytes of RSS, of retained WAL, ...), in any order.
# Samples with T < W are the warm-up and left out (caches, connection
# pools and the first large transaction's buffers fill then).  Over the
# rest: the least-squares slope of VALUE against T, per hour.  The series
# passes when that slope is at most B: a leak or an unbounded backlog
# grows steadily and its slope stays above any fixed bound as the run
# gets longer, while a flat series with noise or a saw tooth (a large
# transaction's memory coming and going) has a slope that shrinks towards
# 0 with the length of the run.  Fewer than 3 samples after the warm-up
# is no trend at all: a failure (fail closed).
#
# Output: one JSON object on stdout:
#   {"samples": N, "warmup_seconds": W, "first_t": .., "last_t": ..,
#    "first": .., "last": .., "min": .., "max": .., "mean": ..,
#    "slope_per_hour": S, "bound_per_hour": B, "pass": true|false,
#    "reason": null | "..."}
# Exit status: 0 pass, 1 fail, 64 usage, 65 a line that is not "T VALUE"
# (named by its number on stderr).
set -u

usage() {
	cat <<'EOF'
usage: soak-trend.sh --bound-per-hour B [--warmup-seconds W] <SAMPLES

Least-squares slope per hour of "T VALUE" lines after W seconds (default 0);
passes (exit 0) when it is at most B, fails (exit 1) above it or with fewer
than 3 samples.  One JSON object on stdout.

options:
  --bound-per-hour B    the largest slope per hour that passes
  --warmup-seconds W    samples before T = W are left out (default 0)
  -h, --help            this help

exit codes: 0 pass, 1 fail, 64 usage, 65 a malformed line
EOF
}

NUMBER_RE='^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$'
bound='' warmup=0
while (($#)); do
	case $1 in
	--bound-per-hour) (($# >= 2)) || { usage >&2; exit 64; }; bound=$2; shift 2 ;;
	--warmup-seconds) (($# >= 2)) || { usage >&2; exit 64; }; warmup=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) printf 'soak-trend.sh: unexpected argument "%s"\n' "$1" >&2; usage >&2; exit 64 ;;
	esac
done
if [[ ! $bound =~ $NUMBER_RE ]]; then
	printf 'soak-trend.sh: --bound-per-hour needs a number\n' >&2
	exit 64
fi
if [[ ! $warmup =~ $NUMBER_RE ]]; then
	printf 'soak-trend.sh: --warmup-seconds needs a number\n' >&2
	exit 64
fi

awk -v bound="$bound" -v warmup="$warmup" '
	function num(s) { return s ~ /^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$/ }
	NF == 0 { next }
	NF != 2 || !num($1) || !num($2) {
		printf "soak-trend.sh: line %d: want \"T VALUE\" (two numbers), got \"%s\"\n", NR, $0 > "/dev/stderr"
		bad = 1
		exit 65
	}
	{
		t = $1 + 0; v = $2 + 0
		if (t < warmup) next
		n++
		st += t; sv += v; stt += t * t; stv += t * v
		if (n == 1 || t < first_t) { first_t = t; first = v }
		if (n == 1 || t > last_t) { last_t = t; last = v }
		if (n == 1 || v < min) min = v
		if (n == 1 || v > max) max = v
	}
	END {
		if (bad) exit 65
		reason = ""
		slope = "null"
		if (n < 3) {
			reason = sprintf("%d samples after a warm-up of %s s: a trend needs at least 3", n, warmup)
		} else {
			d = n * stt - st * st
			if (d <= 0) {
				reason = "every sample at one time: no trend"
			} else {
				s = (n * stv - st * sv) / d * 3600
				slope = sprintf("%.6g", s)
				if (s > bound + 0)
					reason = sprintf("slope %.6g per hour is above the bound %s per hour", s, bound)
			}
		}
		pass = (reason == "") ? "true" : "false"
		if (n == 0) {
			printf "{\"samples\":0,\"warmup_seconds\":%s,\"slope_per_hour\":null,\"bound_per_hour\":%s,\"pass\":false,\"reason\":\"%s\"}\n", warmup, bound, reason
			exit 1
		}
		printf "{\"samples\":%d,\"warmup_seconds\":%s,\"first_t\":%.6g,\"last_t\":%.6g,\"first\":%.6g,\"last\":%.6g,", n, warmup, first_t, last_t, first, last
		printf "\"min\":%.6g,\"max\":%.6g,\"mean\":%.6g,\"slope_per_hour\":%s,\"bound_per_hour\":%s,\"pass\":%s,\"reason\":%s}\n", min, max, sv / n, slope, bound, pass, (reason == "" ? "null" : "\"" reason "\"")
		exit (pass == "true") ? 0 : 1
	}'
