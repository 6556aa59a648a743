# shellcheck shell=bash
#
# wait.bash - waiting on a condition, for both helpers (common.bash with
# PostgreSQL, nodb.bash without): a test waits for readiness (a file, a
# line in a log, a status query) with wait_for, never with sleep N.

# wait_for [-t SECONDS] [-m MESSAGE] CMD [ARG...]
# Runs CMD until it succeeds: every 0.1 s for the first 2 s, then every
# 0.25 s.  A single argument is shell code (wait_for '[ -s "$F" ]').
# Fails after SECONDS (default $WAIT_FOR_TIMEOUT or 30), printing what it
# waited for and the command's last output.  Its own variables are named
# _wf_*: shell code that it evaluates sees the caller's variables (an
# "$out" of the test), not wait_for's.
wait_for() {
	local _wf_timeout=${WAIT_FOR_TIMEOUT:-30} _wf_message=""
	while (($#)); do
		case $1 in
		-t) _wf_timeout=$2; shift 2 ;;
		-m) _wf_message=$2; shift 2 ;;
		--) shift; break ;;
		*) break ;;
		esac
	done
	(($#)) || { echo "wait_for: no command" >&2; return 64; }
	local _wf_start=$EPOCHREALTIME _wf_now _wf_elapsed _wf_out
	local -a _wf_cmd=("$@")
	while :; do
		if (($# == 1)); then
			_wf_out=$(eval "${_wf_cmd[0]}" 2>&1) && return 0
		else
			_wf_out=$("${_wf_cmd[@]}" 2>&1) && return 0
		fi
		_wf_now=$EPOCHREALTIME
		_wf_elapsed=$(((${_wf_now/./} - ${_wf_start/./}) / 1000)) # ms
		if ((_wf_elapsed >= _wf_timeout * 1000)); then
			printf 'wait_for: timed out after %ss waiting for: %s\n' "$_wf_timeout" "${_wf_message:-${_wf_cmd[*]}}" >&2
			[[ -n $_wf_out ]] && printf 'last output:\n%s\n' "$_wf_out" >&2
			return 1
		fi
		if ((_wf_elapsed < 2000)); then sleep 0.1; else sleep 0.25; fi
	done
}
