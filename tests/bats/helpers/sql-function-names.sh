#!/usr/bin/env bash
# sql-function-names.sh DIR... - the names the programs' SQL may call as
# functions: every "word(" inside a C string literal of the .c files under
# DIRs, lower case, a "pg_catalog." prefix dropped, sorted, one line,
# space-separated.  Over-inclusive on purpose (words of messages come out
# too): 39-planted-objects.bats plants an object under each name, and a
# name no SQL calls costs only an unused function.
set -euo pipefail
(($#)) || { echo "usage: sql-function-names.sh DIR..." >&2; exit 64; }
find "$@" -name '*.c' -print0 | sort -z | xargs -0 grep -ohE '"([^"\\]|\\.)*"' |
	grep -oE '[A-Za-z_][A-Za-z0-9_.]*[[:space:]]*\(' |
	sed -E 's/[[:space:]]*\($//; s/^pg_catalog\.//' | tr '[:upper:]' '[:lower:]' |
	grep -E '^[a-z_][a-z0-9_]*$' | LC_ALL=C sort -u | paste -sd' '
