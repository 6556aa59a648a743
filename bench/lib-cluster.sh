# lib-cluster.sh - the throwaway PostgreSQL clusters of the bench scripts
# (sourced, not run): the run directory in the bats harness layout, its
# cleanup on exit or signal, the ports and connection strings, die and
# the background-process bookkeeping.
#
# The caller sources this file from the repository's root (it sources
# tests/bats/helpers/pg.bash, the harness's cluster functions), and:
#   bench_init NAME KEEP_VAR [ON_EXIT]
#       NAME prefixes every message ("capture-bench: ..."); KEEP_VAR is the
#       name of the variable that, set non-empty, keeps the directory
#       (clusters stopped); ON_EXIT names a function of the caller run
#       first on exit (it may stop what is not in BG).  die works from here.
#   bench_dir
#       (after the caller's own checks) the directory, in the harness's
#       layout: mktemp under trellara_pg_tmp_root, an owner file and a
#       watchdog, so that if the script is SIGKILLed the watchdog, or the
#       next bats run's reaper, stops the clusters and removes it; sock/
#       and bench/ in it.  Installs the traps: EXIT runs bench_cleanup,
#       INT/TERM/HUP exit 130/143/129.  Sets FDIR, WORK (FDIR/bench), SOCK,
#       PORT (the source's), TPORT (the target's: PORT + 1), SRC_CONN and
#       SRC_URL (database postgres on the source).
#   bench_create SIDE... / bench_start SIDE...
#       create (from the cached initdb template) / start the clusters
#       FDIR/SIDE (source on PORT, target on TPORT), all at once.
# BG[name]=pid records a background process of the caller's; cleanup
# SIGKILLs every one still recorded (its children first) and reaps it.
# The caller sets PSQL (trellara_pg_psql_bin) before bench_psql runs.
# shellcheck shell=bash
# shellcheck disable=SC2034 # sets the caller's globals

# shellcheck source=tests/bats/helpers/pg.bash
source tests/bats/helpers/pg.bash

BENCH_NAME=bench BENCH_KEEP_VAR='' BENCH_ON_EXIT=''
FDIR=''
declare -A BG=() # name -> pid of a background process of the caller's

bench_init() { # NAME KEEP_VAR [ON_EXIT]
	BENCH_NAME=$1 BENCH_KEEP_VAR=$2 BENCH_ON_EXIT=${3:-}
}

die() {
	echo "$BENCH_NAME: $*" >&2
	exit 1
}

# bench_kill_bg: SIGKILL every process in BG (a pipeline's or a wrapper's
# children first), then reap them (not reported as "Killed"); BG is empty
# afterwards
bench_kill_bg() {
	local pid child
	for pid in "${BG[@]}"; do
		[[ -n $pid ]] || continue
		for child in $(ps -o pid= --ppid "$pid" 2>/dev/null); do
			kill -KILL "$child" 2>/dev/null
		done
		kill -KILL "$pid" 2>/dev/null
	done
	for pid in "${BG[@]}"; do
		[[ -n $pid ]] && wait "$pid" 2>/dev/null
	done
	BG=()
	return 0
}

bench_cleanup() {
	local status=$? wpid
	trap - EXIT INT TERM HUP
	set +e
	[[ -n $BENCH_ON_EXIT ]] && "$BENCH_ON_EXIT"
	bench_kill_bg
	[[ -n ${POLL_PID:-} ]] && kill "$POLL_PID" 2>/dev/null # a poll session (coproc POLL)
	if [[ -n $FDIR && -d $FDIR ]]; then
		if [[ -f $FDIR/watchdog.pid ]] && read -r wpid <"$FDIR/watchdog.pid" 2>/dev/null; then
			kill -KILL "$wpid" 2>/dev/null || true
		fi
		if [[ -n $BENCH_KEEP_VAR && -n ${!BENCH_KEEP_VAR:-} ]]; then
			trellara_pg_destroy_dir "$FDIR" keep
			echo "$BENCH_NAME: kept $FDIR" >&2
		else
			trellara_pg_destroy_dir "$FDIR"
		fi
	fi
	((status == 0)) || echo "$BENCH_NAME: FAILED (exit $status)" >&2
	exit "$status"
}

bench_dir() {
	local root
	trap bench_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	trap 'exit 129' HUP
	root=$(trellara_pg_tmp_root)
	FDIR=$(mktemp -d "$root/trellara-bats.XXXXXX")
	chmod 0755 "$FDIR"
	_trellara_pg_proc_identity "$$" >"$FDIR/owner"
	trellara_pg_start_watchdog "$FDIR" "$(cat "$FDIR/owner")"
	mkdir -m 0755 "$FDIR/sock"
	mkdir -m 0700 "$FDIR/bench"
	if _trellara_pg_is_root; then
		chown "$TRELLARA_PG_OS_USER:" "$FDIR/sock"
	fi
	WORK=$FDIR/bench
	SOCK=$FDIR/sock
	PORT=$((50000 + ($$ % 7000) * 2))
	TPORT=$((PORT + 1))
	SRC_CONN=$(bench_src_conn postgres)
	SRC_URL=$(bench_src_url postgres)
}

# connection strings to database DB of the source or the target
bench_src_conn() { printf 'host=%s port=%s dbname=%s\n' "$SOCK" "$PORT" "$1"; }
bench_src_url() { printf 'postgresql:///%s?host=%s&port=%s\n' "$1" "$SOCK" "$PORT"; }
bench_tgt_conn() { printf 'host=%s port=%s dbname=%s\n' "$SOCK" "$TPORT" "$1"; }
bench_tgt_url() { printf 'postgresql:///%s?host=%s&port=%s\n' "$1" "$SOCK" "$TPORT"; }

# bench_psql CONN PSQL-ARGS...: one psql run, unaligned and quiet, stops
# at the first error
bench_psql() {
	local conn=$1
	shift
	"$PSQL" -X -qAt -v ON_ERROR_STOP=1 -d "$conn" "$@"
}

# bench_wait_all PID...: wait for each; fails if one failed
bench_wait_all() {
	local pid rc=0
	for pid; do
		wait "$pid" || rc=1
	done
	return $rc
}

# _bench_sides VERB SIDE...: trellara_pg_VERB of every FDIR/SIDE at once
_bench_sides() {
	local verb=$1 side port what=cluster pids=()
	shift
	(($# > 1)) && what=clusters
	for side; do
		port=$PORT
		[[ $side == target ]] && port=$TPORT
		if [[ $verb == create ]]; then
			trellara_pg_create "$FDIR/$side" "$port" "$SOCK" "$BENCH_NAME-$side" &
		else
			trellara_pg_start "$FDIR/$side" &
		fi
		pids+=($!)
	done
	bench_wait_all "${pids[@]}" || die "cannot $verb the $what"
}
bench_create() { _bench_sides create "$@"; }
bench_start() { _bench_sides start "$@"; }

# bench_run_bg NAME OUTPUT CMD...: CMD in the background (stdout and
# stderr to OUTPUT), its pid in BG[NAME], so that a signal to the script
# is handled at once (bash defers traps while a foreground child runs) and
# cleanup can end CMD.  (Not `bench_run_bg NAME CMD >OUTPUT`: the trap
# would run, and report, with that redirection in place.)
bench_run_bg() {
	local name=$1 out=$2
	shift 2
	"$@" >"$out" 2>&1 &
	BG[$name]=$!
}
# bench_wait_bg NAME...: wait for each; fails if one failed
bench_wait_bg() {
	local name rc=0
	for name; do
		wait "${BG[$name]}" || rc=1
		BG[$name]=
	done
	return $rc
}
# bench_in_bg OUTPUT CMD...: bench_run_bg, then wait for it
bench_in_bg() {
	bench_run_bg fg "$@"
	bench_wait_bg fg
}
# bench_term NAME WHAT LOG [LINES]: SIGTERM BG[NAME] and wait for it; if it
# exits other than 0, show LOG (its last LINES lines, if given) and die
# "WHAT exited N after SIGTERM"
bench_term() {
	local name=$1 what=$2 log=$3 lines=${4:-} rc=0
	kill -TERM "${BG[$name]}"
	wait "${BG[$name]}" || rc=$?
	BG[$name]=
	((rc == 0)) && return 0
	if [[ -n $lines ]]; then tail -n "$lines" "$log" >&2; else cat "$log" >&2; fi
	die "$what exited $rc after SIGTERM"
}
