# shellcheck shell=bash
#
# wait.bash - waiting on a condition, for both helpers (common.bash with
# PostgreSQL, nodb.bash without): a test waits for readiness (a file, a
# line in a log, a status query) with wait_for, never with sleep N.

# wait_for [-t SECONDS] [-m MESSAGE] CMD [ARG...]
# Runs CMD until it succeeds: every 0.1 s for the first 2 s, then every
# 0.25 s.  A single argument is shell code (wait_for '[ -s "$F" ]').
# Fails after SECONDS (default $WAIT_FOR_TIMEOUT or 30), printing what it
# waited for and the command's last output.
wait_for() {
	local timeout=${WAIT_FOR_TIMEOUT:-30} message=""
	while (($#)); do
		case $1 in
		-t) timeout=$2; shift 2 ;;
		-m) message=$2; shift 2 ;;
		--) shift; break ;;
		*) break ;;
		esac
	done
	(($#)) || { echo "wait_for: no command" >&2; return 64; }
	local start=$EPOCHREALTIME now elapsed out
	local -a cmd=("$@")
	while :; do
		if (($# == 1)); then
			out=$(eval "${cmd[0]}" 2>&1) && return 0
		else
			out=$("${cmd[@]}" 2>&1) && return 0
		fi
		now=$EPOCHREALTIME
		elapsed=$(((${now/./} - ${start/./}) / 1000)) # ms
		if ((elapsed >= timeout * 1000)); then
			printf 'wait_for: timed out after %ss waiting for: %s\n' "$timeout" "${message:-${cmd[*]}}" >&2
			[[ -n $out ]] && printf 'last output:\n%s\n' "$out" >&2
			return 1
		fi
		if ((elapsed < 2000)); then sleep 0.1; else sleep 0.25; fi
	done
}
