#!/usr/bin/env bash
#
# source-info.sh - what the correctness report says it was built from.
#
#   sim/source-info.sh tree                  the source tree hash
#   sim/source-info.sh header OUT CC CFLAGS  write OUT (a C header with the
#                                            revision, tree hash, dirty flag,
#                                            compiler and flags), only when
#                                            its contents change
#
# "The source" is every file under common/, cmd/, include/ and sim/, and
# the Makefile, that git tracks or would add (untracked but not ignored),
# as it is in the working tree.  Its tree hash is the SHA-1 (git
# hash-object) of the sorted lines "<blob id> <path>" of those files, so
# it is the same for a clean checkout and for the same files uncommitted,
# and it does not change when only docs/, tests/, man/ or scripts/ do --
# committing docs/correctness-report.html does not make it stale.
# Outside a git checkout every value is "unknown" (and
# `make verify-correctness-report` fails).
set -euo pipefail
cd "$(dirname "$0")/.."

SOURCE_PATHS=(Makefile common cmd include sim)

in_git() {
	git rev-parse --is-inside-work-tree >/dev/null 2>&1
}

tree_hash() {
	in_git || { echo unknown; return; }
	local -a files=()
	local f
	while IFS= read -r -d '' f; do
		[[ -f $f ]] && files+=("$f")
	done < <(git ls-files -z --cached --others --exclude-standard -- "${SOURCE_PATHS[@]}" | LC_ALL=C sort -zu)
	((${#files[@]} > 0)) || { echo unknown; return; }
	paste -d ' ' <(printf '%s\n' "${files[@]}" | git hash-object --stdin-paths) <(printf '%s\n' "${files[@]}") |
		git hash-object --stdin
}

c_string() {
	local s=${1//\\/\\\\}
	printf '"%s"' "${s//\"/\\\"}"
}

case ${1:-} in
tree)
	tree_hash
	;;
header)
	(($# == 4)) || { echo "usage: $0 header OUT CC CFLAGS" >&2; exit 64; }
	out=$2
	revision=unknown dirty=0
	if in_git; then
		revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
		[[ -z $(git status --porcelain -- "${SOURCE_PATHS[@]}") ]] || dirty=1
	fi
	tmp=$out.tmp.$$
	mkdir -p "$(dirname "$out")"
	{
		echo "/* written by sim/source-info.sh: do not edit */"
		echo "#define TRELLARA_SOURCE_REVISION $(c_string "$revision")"
		echo "#define TRELLARA_SOURCE_TREE $(c_string "$(tree_hash)")"
		echo "#define TRELLARA_SOURCE_DIRTY $dirty"
		echo "#define TRELLARA_BUILD_CC $(c_string "$3")"
		echo "#define TRELLARA_BUILD_CFLAGS $(c_string "$4")"
	} >"$tmp"
	if cmp -s "$tmp" "$out"; then rm -f "$tmp"; else mv -f "$tmp" "$out"; fi
	;;
*)
	echo "usage: $0 tree | header OUT CC CFLAGS" >&2
	exit 64
	;;
esac
