#!/usr/bin/env bash
#
# soak-trend.sh - the soak's trend judge (scripts/soak.sh, README "make
# soak"): a pure function of its input, no server, no clock.
#
#   scripts/soak-trend.sh --bound-per-hour B [--warmup-seconds W]
#                         [--segment-warmup-seconds SW] <SAMPLES
#
# SAMPLES: one "T VALUE [SEGMENT]" line per sample (T seconds since the
# start, VALUE a number: bytes of RSS, of retained WAL, ...; SEGMENT a
# word, e.g. the pid of the process measured), in any order.  Samples
# with T < W are the warm-up and left out (caches, connection pools and
# the first large transaction's buffers fill then), and so are those
# within SW seconds of their segment's first sample (a restarted
# process's own warm-up).  Over the rest: the least-squares slope of
# VALUE against T, per hour, with an intercept of its own per segment
# (the pooled within-segment slope): a process killed every few minutes
# starts again from a small RSS, which would hide a leak from a single
# line through all the samples, but not from the slope inside each
# lifetime.  Without a third column it is the ordinary slope.  The series
# passes when that slope is at most B: a leak or an unbounded backlog
# grows steadily and its slope stays above any fixed bound as the run
# gets longer, while a flat series with noise or a saw tooth (a large
# transaction's memory coming and going) has a slope that shrinks towards
# 0 with the length of the run.  Fewer than 3 samples after the warm-up
# is no trend at all: a failure (fail closed).
#
# Output: one JSON object on stdout:
#   {"samples": N, "segments": .., "warmup_seconds": W,
#    "segment_warmup_seconds": SW, "first_t": .., "last_t": ..,
#    "first": .., "last": .., "min": .., "max": .., "mean": ..,
#    "slope_per_hour": S, "bound_per_hour": B, "pass": true|false,
#    "reason": null | "..."}
# (first_t .. mean only with at least one sample.)
# Exit status: 0 pass, 1 fail, 64 usage, 65 a line that is not
# "T VALUE [SEGMENT]" (named by its number on stderr).
set -u

usage() {
	cat <<'EOF'
usage: soak-trend.sh --bound-per-hour B [--warmup-seconds W]
                     [--segment-warmup-seconds SW] <SAMPLES

Least-squares slope per hour of "T VALUE [SEGMENT]" lines after W seconds,
with an intercept per SEGMENT; passes (exit 0) when it is at most B, fails
(exit 1) above it or with fewer than 3 samples.  One JSON object on stdout.

options:
  --bound-per-hour B    the largest slope per hour that passes
  --warmup-seconds W    samples before T = W are left out (default 0)
  --segment-warmup-seconds SW
                        and those within SW of their segment's first (default 0)
  -h, --help            this help

exit codes: 0 pass, 1 fail, 64 usage, 65 a malformed line
EOF
}

NUMBER_RE='^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$'
bound='' warmup=0 seg_warmup=0
while (($#)); do
	case $1 in
	--bound-per-hour) (($# >= 2)) || { usage >&2; exit 64; }; bound=$2; shift 2 ;;
	--warmup-seconds) (($# >= 2)) || { usage >&2; exit 64; }; warmup=$2; shift 2 ;;
	--segment-warmup-seconds) (($# >= 2)) || { usage >&2; exit 64; }; seg_warmup=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) printf 'soak-trend.sh: unexpected argument "%s"\n' "$1" >&2; usage >&2; exit 64 ;;
	esac
done
if [[ ! $bound =~ $NUMBER_RE ]]; then
	printf 'soak-trend.sh: --bound-per-hour needs a number\n' >&2
	exit 64
fi
if [[ ! $warmup =~ $NUMBER_RE || ! $seg_warmup =~ $NUMBER_RE ]]; then
	printf 'soak-trend.sh: --warmup-seconds and --segment-warmup-seconds need a number\n' >&2
	exit 64
fi

awk -v bound="$bound" -v warmup="$warmup" -v seg_warmup="$seg_warmup" '
	function num(s) { return s ~ /^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$/ }
	NF == 0 { next }
	(NF != 2 && NF != 3) || !num($1) || !num($2) {
		printf "soak-trend.sh: line %d: want \"T VALUE [SEGMENT]\" (two numbers, a word), got \"%s\"\n", NR, $0 > "/dev/stderr"
		bad = 1
		exit 65
	}
	{
		m++
		T[m] = $1 + 0; V[m] = $2 + 0; S[m] = (NF == 3) ? $3 : "-"
		if (!(S[m] in start) || T[m] < start[S[m]]) start[S[m]] = T[m]
	}
	END {
		if (bad) exit 65
		for (i = 1; i <= m; i++) {
			t = T[i]; v = V[i]; g = S[i]
			if (t < warmup || t < start[g] + seg_warmup) continue
			n++
			k[g]++; st[g] += t; sv[g] += v; stt[g] += t * t; stv[g] += t * v
			if (n == 1 || t < first_t) { first_t = t; first = v }
			if (n == 1 || t > last_t) { last_t = t; last = v }
			if (n == 1 || v < min) min = v
			if (n == 1 || v > max) max = v
			sum += v
		}
		# the least-squares slope with an intercept of its own per
		# segment (one process lifetime: a restart resets its memory);
		# one segment: the ordinary least-squares slope
		num_ = 0; den = 0; segments = 0
		for (g in k) {
			segments++
			num_ += stv[g] - st[g] * sv[g] / k[g]
			den += stt[g] - st[g] * st[g] / k[g]
		}
		reason = ""
		slope = "null"
		if (n < 3) {
			reason = sprintf("%d samples after the warm-up: a trend needs at least 3", n)
		} else if (den <= 0) {
			reason = "no segment has samples at two times: no trend"
		} else {
			s = num_ / den * 3600
			slope = sprintf("%.6g", s)
			if (s > bound + 0)
				reason = sprintf("slope %.6g per hour is above the bound %s per hour", s, bound)
		}
		pass = (reason == "") ? "true" : "false"
		printf "{\"samples\":%d,\"segments\":%d,\"warmup_seconds\":%s,\"segment_warmup_seconds\":%s,", n, segments, warmup, seg_warmup
		if (n > 0)
			printf "\"first_t\":%.6g,\"last_t\":%.6g,\"first\":%.6g,\"last\":%.6g,\"min\":%.6g,\"max\":%.6g,\"mean\":%.6g,", first_t, last_t, first, last, min, max, sum / n
		printf "\"slope_per_hour\":%s,\"bound_per_hour\":%s,\"pass\":%s,\"reason\":%s}\n", slope, bound, pass, (reason == "" ? "null" : "\"" reason "\"")
		exit (pass == "true") ? 0 : 1
	}'
