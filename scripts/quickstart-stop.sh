#!/usr/bin/env bash
#
# quickstart-stop.sh - `make quickstart-stop`: stop everything
# scripts/quickstart.sh started and remove ./target/quickstart.
#
#   * the supervisor (`trellara run`, by the pid in run.pid, checked against
#     its command line): SIGTERM, so capture and applyd drain; SIGKILL after
#     40 s; then any process still running with this flow file in its
#     command line (a child left by a killed supervisor) and the quickstart's
#     pgbench;
#   * the source and target clusters (pg_ctl stop -m immediate: the data
#     is about to be deleted);
#   * ./target/quickstart, and the /tmp directory the clusters were put in
#     when ./target/quickstart was not usable for them.
#
# Nothing else is touched.  Safe to run when nothing runs, or twice.
#   --quiet   say nothing when there is nothing to stop
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
repo=$(pwd -P)
demo=$repo/target/quickstart
flow=$demo/trellara.yml
quiet=0
[[ ${1:-} == --quiet ]] && quiet=1

if [[ ! -e $demo && ! -L $demo ]]; then
	((quiet)) || echo "quickstart-stop: nothing to stop (no ./target/quickstart)"
	exit 0
fi

# shellcheck disable=SC1091 # the bats tests' cluster helpers
source tests/bats/helpers/pg.bash

say() { printf 'quickstart-stop: %s\n' "$*"; }

# cmdline_has PID STRING: the process runs and its command line contains STRING
cmdline_has() {
	local cmd
	[[ $1 =~ ^[0-9]+$ ]] || return 1
	cmd=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) || return 1
	[[ $cmd == *"$2"* ]]
}

# stop_pid PID SECONDS: SIGTERM, wait, SIGKILL
stop_pid() {
	local pid=$1 i
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < $2 * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	say "pid $pid did not exit after ${2}s: SIGKILL"
	kill -KILL "$pid" 2>/dev/null
	return 0
}

# 1. the supervisor: capture and applyd drain with it
pid=$(cat "$demo/run.pid" 2>/dev/null)
if cmdline_has "$pid" "$flow"; then
	say "stopping trellara run (pid $pid)"
	stop_pid "$pid" 40
fi
# pgbench of an interrupted quickstart
pid=$(cat "$demo/pgbench.pid" 2>/dev/null)
if cmdline_has "$pid" pgbench; then
	stop_pid "$pid" 5
fi
# anything else of this flow: a child a killed supervisor left behind
for pid in $(pgrep -f -- "--config $flow" 2>/dev/null); do
	if [[ $pid == "$$" ]] || ! cmdline_has "$pid" "--config $flow"; then continue; fi
	say "stopping $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-60) (pid $pid)"
	stop_pid "$pid" 10
done

# 2. the clusters
pgroot=$(cat "$demo/pgroot" 2>/dev/null)
[[ -n $pgroot ]] || pgroot=$demo/pg
for d in "$pgroot/source" "$pgroot/target"; do
	if [[ -f $d/postmaster.pid ]]; then
		if ((quiet)); then
			say "stopping the previous quickstart's cluster ${d##*/}"
		else
			say "stopping cluster ${d##*/}"
		fi
		trellara_pg_stop "$d" &
	fi
done
wait

# 3. the files
if [[ $pgroot == /tmp/trellara-quickstart.* && -d $pgroot ]]; then
	rm -rf -- "$pgroot"
fi
rm -rf -- "$demo" || { say "could not remove $demo"; exit 1; }
((quiet)) || say "stopped; ./target/quickstart removed"
exit 0
