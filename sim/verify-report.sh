#!/usr/bin/env bash
#
# verify-report.sh REPORT - `make verify-correctness-report`: exit 0 when
# REPORT (docs/correctness-report.html) was generated from a build of the
# current source, 1 with the reason and the fix otherwise.  The report
# names its source in its first comment,
#   <!-- trellara-chaos-report revision=SHA tree=TREEHASH -->
# and TREEHASH must equal `sim/source-info.sh tree` now.
set -uo pipefail
report=${1:?usage: verify-report.sh REPORT}
here=$(dirname "$0")
fix='hint: run "make correctness-report" and commit the report with the code it describes'

if [[ ! -f $report ]]; then
	printf 'verify-correctness-report: "%s" does not exist\n%s\n' "$report" "$fix" >&2
	exit 1
fi
line=$(grep -m1 '^<!-- trellara-chaos-report ' "$report" || true)
if [[ ! $line =~ ^'<!-- trellara-chaos-report revision='([0-9a-f]+|unknown)' tree='([0-9a-f]+|unknown)' -->'$ ]]; then
	printf 'verify-correctness-report: "%s" is not a trellara chaos report (no trellara-chaos-report comment)\n%s\n' \
		"$report" "$fix" >&2
	exit 1
fi
revision=${BASH_REMATCH[1]} embedded=${BASH_REMATCH[2]}
current=$("$here/source-info.sh" tree) || exit 1
if [[ $current == unknown ]]; then
	printf 'verify-correctness-report: cannot compute the source tree hash (not a git checkout?)\n' >&2
	exit 1
fi
if [[ $embedded != "$current" ]]; then
	printf 'verify-correctness-report: "%s" is stale: generated from source tree %s (revision %s), the source is now %s\n%s\n' \
		"$report" "$embedded" "$revision" "$current" "$fix" >&2
	exit 1
fi
printf 'verify-correctness-report: "%s" describes the current source (tree %s)\n' "$report" "$current"
