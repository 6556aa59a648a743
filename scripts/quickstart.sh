#!/usr/bin/env bash
#
# quickstart.sh - `make quickstart`: from a fresh Debian 12 machine to a
# replicated PostgreSQL flow that is cut over to its target, in one command
# (under a minute once built).
#
#   1. installs the missing Debian packages (scripts/install-deps.sh; when
#      not root it says which and stops) and builds every program;
#   2. starts two throwaway PostgreSQL 15 clusters, "source" and "target",
#      under ./target/quickstart/pg (unix sockets only, no TCP; when run as
#      root the data directories belong to the postgres user, as initdb
#      refuses root - everything under ./target/quickstart can still be
#      removed by root);
#   3. loads a sample dataset on the source (pgbench -i -s 5) and prepares
#      it for capture (trellara check --fix: publication, DDL trigger);
#   4. runs the flow - `trellara run` with --create-tables for the
#      snapshot - while pgbench writes to the source (-c 2 -T 15), so the
#      snapshot and the stream hand over under load;
#   5. once the load is done, cuts over: `trellara cutover --lock-source`
#      makes the source database read-only for new transactions, waits
#      until the target applied everything up to the final LSN, syncs the
#      sequences, runs verify there (must say CONVERGED), records the
#      cutover row in the target's checkpoint schema, stops `trellara run`
#      (capture and applyd drain) and prints the next steps; so no Trellara
#      process keeps running;
#   6. prints `trellara status` (the flow cut over).  The two clusters keep
#      running, so you can look at them; the source stays read-only for
#      new transactions until `trellara cutover --abort` unlocks it (the
#      last lines say how).  `make quickstart-stop`
#      (scripts/quickstart-stop.sh) stops the clusters and removes
#      ./target/quickstart.
#
# Re-running starts from scratch: a previous quickstart is stopped and
# removed first (scripts/quickstart-stop.sh; nothing else is touched).
#
# Exit status: 0 when the cutover finished with verify saying CONVERGED and
# `trellara run` exited 0, non-zero otherwise (on a failure the supervisor
# and pgbench are stopped - a failed cutover unlocks the source itself -
# and the clusters and logs are left in ./target/quickstart for a look;
# make quickstart-stop cleans up).
#
# Environment: QUICKSTART_SCALE (5) pgbench scale, QUICKSTART_LOAD_SECONDS
# (15) pgbench -T during the snapshot, QUICKSTART_TIMEOUT (300) seconds to
# wait for the snapshot to hand over and the flow to stream (the cutover
# waits for applyd with its own --apply-timeout, 300 s), PG_BINDIR
# (/usr/lib/postgresql/15/bin).
set -euo pipefail

cd "$(dirname "$0")/.." || exit 1
repo=$(pwd -P)
started=$EPOCHREALTIME

scale=${QUICKSTART_SCALE:-5}
load_seconds=${QUICKSTART_LOAD_SECONDS:-15}
timeout=${QUICKSTART_TIMEOUT:-300}

bold='' plain=''
if [[ -t 1 ]]; then bold=$'\033[1m' plain=$'\033[0m'; fi
step() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }
say() { printf '%s\n' "$*"; }
die() {
	printf 'quickstart: %s\n' "$*" >&2
	exit 1
}
elapsed() {
	local now=$EPOCHREALTIME s
	s=$(((${now%.*} * 1000000 + 10#${now#*.}) - (${started%.*} * 1000000 + 10#${started#*.})))
	printf '%d.%01d' $((s / 1000000)) $((s % 1000000 / 100000))
}

# ---------------------------------------------------------------- 1. build

step "installing what is missing, building"
scripts/install-deps.sh
make -s all

# shellcheck disable=SC1091 # the bats tests' cluster helpers
source tests/bats/helpers/pg.bash
trellara_pg_check_bindir "$PG_BINDIR"

# A previous quickstart: stop it and remove its directory.
scripts/quickstart-stop.sh --quiet

demo=$repo/target/quickstart
mkdir -p "$repo/target"
mkdir -m 0755 "$demo"

# ---------------------------------------------------------- 2. clusters

# The clusters' directory must be traversable by the postgres user (when
# root) and short enough for a unix socket path (107 bytes); otherwise it
# goes to a private directory under /tmp, linked from ./target/quickstart/pg
# and removed by quickstart-stop.sh.
pgroot=$demo/pg
if ((${#pgroot} > 80)) ||
	{ [[ $(id -u) -eq 0 ]] && ! runuser -u "$TRELLARA_PG_OS_USER" -- test -x "$demo" 2>/dev/null; }; then
	pgroot=$(mktemp -d /tmp/trellara-quickstart.XXXXXX)
	chmod 0755 "$pgroot"
	ln -s "$pgroot" "$demo/pg"
else
	mkdir -m 0755 "$pgroot"
fi
printf '%s\n' "$pgroot" >"$demo/pgroot"
sock=$pgroot/sock
mkdir -m 0755 "$sock"
if [[ $(id -u) -eq 0 ]]; then chown "$TRELLARA_PG_OS_USER:" "$sock"; fi
sport=55432 tport=55433

# If anything below fails: stop what runs in the background (the clusters
# stay for a look at their logs; make quickstart-stop removes them).
run_pid='' load_pid=''
cleanup() {
	local rc=$?
	[[ -n $load_pid ]] && kill -TERM "$load_pid" 2>/dev/null
	if [[ -n $run_pid ]] && kill -0 "$run_pid" 2>/dev/null; then
		kill -TERM "$run_pid" 2>/dev/null
		wait "$run_pid" 2>/dev/null
	fi
	if ((rc != 0)); then
		printf '\nquickstart: failed after %ss; logs in %s (run.log, pgbench.log, cutover.txt, pg/*/server.log)\n' \
			"$(elapsed)" "./target/quickstart" >&2
		printf 'quickstart: make quickstart-stop stops the clusters and removes it\n' >&2
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

step "starting a source and a target PostgreSQL under ./target/quickstart/pg (unix sockets in $sock)"
trellara_pg_template >/dev/null
{ trellara_pg_create "$pgroot/source" "$sport" "$sock" quickstart-source &&
	trellara_pg_start "$pgroot/source"; } &
spid=$!
{ trellara_pg_create "$pgroot/target" "$tport" "$sock" quickstart-target &&
	trellara_pg_start "$pgroot/target"; } &
tpid=$!
status=0
wait "$spid" || status=1
wait "$tpid" || status=1
((status == 0)) || die "could not start the clusters"

psql_bin=$(trellara_pg_psql_bin)
src() { "$psql_bin" -X -q -At -v ON_ERROR_STOP=1 -h "$sock" -p "$sport" -d quickstart -c "$1"; }
tgt() { "$psql_bin" -X -q -At -v ON_ERROR_STOP=1 -h "$sock" -p "$tport" -d quickstart_copy -c "$1"; }
"$psql_bin" -X -q -v ON_ERROR_STOP=1 -h "$sock" -p "$sport" -d postgres -c 'CREATE DATABASE quickstart'
"$psql_bin" -X -q -v ON_ERROR_STOP=1 -h "$sock" -p "$tport" -d postgres -c 'CREATE DATABASE quickstart_copy'
say "source: postgresql:///quickstart?host=$sock&port=$sport"
say "target: postgresql:///quickstart_copy?host=$sock&port=$tport"

# ---------------------------------------------------------- 3. dataset

step "loading the sample dataset: pgbench -i -s $scale"
pgbench -q -i -s "$scale" -h "$sock" -p "$sport" quickstart >"$demo/pgbench-init.log" 2>&1 ||
	{ cat "$demo/pgbench-init.log" >&2; die "pgbench -i failed"; }
# pgbench_history has no primary key: capture needs the whole old row
src 'ALTER TABLE pgbench_history REPLICA IDENTITY FULL'
say "$(src 'SELECT count(*) FROM pgbench_accounts') rows in pgbench_accounts"

flow=$demo/trellara.yml
cat >"$flow" <<EOF
# Written by scripts/quickstart.sh; see configs/trellara.yml for every key.
config_version: 2
environment: quickstart

source:
  id: quickstart
  database_url: "postgresql:///quickstart?host=$sock&port=$sport"
  publication: quickstart_pub
  slot: quickstart_slot
  stream_spill_dir: "$demo/spill"

dataset:
  id: pgbench
  mode: strict_transaction_order
  tables:
    - {schema: public, name: pgbench_accounts}
    - {schema: public, name: pgbench_branches}
    - {schema: public, name: pgbench_tellers}
    - {schema: public, name: pgbench_history}

stream:
  kind: local
  path: "$demo/stream"
  durability: fsync
  min_free_bytes: 104857600

target:
  database_url: "postgresql:///quickstart_copy?host=$sock&port=$tport"
  checkpoint_schema: trellara

observability:
  metrics_dir: "$demo/metrics"
EOF
say "flow file: ./target/quickstart/trellara.yml"

step "preparing the source: trellara check --fix (publication quickstart_pub, DDL trigger)"
if ! scripts/trellara check --config "$flow" --fix >"$demo/check.log" 2>&1; then
	cat "$demo/check.log" >&2
	die "trellara check found blockers"
fi
grep -E '^(fixed|warn|result):' "$demo/check.log" || true
say "(the whole report: ./target/quickstart/check.log)"

# ---------------------------------------------------------- 4. the flow

step "running the flow while pgbench writes to the source for ${load_seconds}s"
say "\$ TRELLARA_RUN_SNAPSHOT_ARGS=--create-tables scripts/trellara run --config ./target/quickstart/trellara.yml &"
say "\$ pgbench -n -c 2 -T $load_seconds ... &"
TRELLARA_RUN_SNAPSHOT_ARGS=--create-tables \
	scripts/trellara run --config "$flow" </dev/null >"$demo/run.log" 2>&1 &
run_pid=$!
printf '%s\n' "$run_pid" >"$demo/run.pid"
pgbench -n -c 2 -T "$load_seconds" -h "$sock" -p "$sport" quickstart </dev/null >"$demo/pgbench.log" 2>&1 &
load_pid=$!
printf '%s\n' "$load_pid" >"$demo/pgbench.pid"

# wait_until SECONDS WHAT COMMAND...: poll every 0.2 s; fail when the
# supervisor exits or time runs out.
wait_until() {
	local limit=$1 what=$2 deadline
	shift 2
	deadline=$((SECONDS + limit))
	until "$@" 2>/dev/null; do
		if ! kill -0 "$run_pid" 2>/dev/null; then
			tail -n 30 "$demo/run.log" >&2
			die "trellara run exited while waiting for: $what (log: ./target/quickstart/run.log)"
		fi
		((SECONDS < deadline)) || {
			tail -n 30 "$demo/run.log" >&2
			die "timed out after ${limit}s waiting for: $what"
		}
		sleep 0.2
	done
}

snapshot_state() { tgt "SELECT state FROM trellara.snapshot_runs ORDER BY 1 LIMIT 1"; }
streaming() { [[ $(snapshot_state) =~ ^(streaming|verified)$ ]]; }
wait_until "$timeout" "the snapshot to hand over to the stream" streaming
say "snapshot handed over to the stream after $(elapsed)s: $(tgt 'SELECT count(*) FROM pgbench_accounts') rows in the target's pgbench_accounts"

if ! wait "$load_pid"; then
	load_pid=''
	cat "$demo/pgbench.log" >&2
	die "pgbench failed"
fi
load_pid=''
say "pgbench: $(grep -E '^number of transactions actually processed' "$demo/pgbench.log" || tail -n 1 "$demo/pgbench.log")"

# The cutover needs the flow streaming: the supervisor running (capture
# and applyd started) and capture on the slot.
flow_streams() {
	grep -qx 'state=running' "$demo/metrics/supervisor.state" &&
		[[ $(src "SELECT coalesce((SELECT active FROM pg_replication_slots WHERE slot_name = 'quickstart_slot'), false)") == t ]]
}
wait_until "$timeout" "the flow to stream (trellara run running, the slot active)" flow_streams

# ---------------------------------------------------------- 5. the cutover

# Run from the repository's top (this script cd'ed there): the relative
# path is what the cutover prints in its next steps, as a user would type it.
config=./target/quickstart/trellara.yml
step "cutting over: the source locked, the target caught up and verified, the flow stopped"
say "\$ scripts/trellara cutover --config $config --lock-source"
cutover_rc=0
scripts/trellara cutover --config "$config" --lock-source | tee "$demo/cutover.txt" || cutover_rc=${PIPESTATUS[0]}

# The cutover stopped trellara run (SIGTERM, drained) and waited for it;
# collect its exit status.
run_rc=0
if ((cutover_rc == 0)); then
	wait "$run_pid" || run_rc=$?
	run_pid=''
	rm -f "$demo/run.pid" "$demo/pgbench.pid"
fi

# ---------------------------------------------------------- 6. status

step "the flow, cut over"
say "\$ scripts/trellara status --config $config --rate-seconds 0"
scripts/trellara status --config "$config" --rate-seconds 0 || true

if ((cutover_rc != 0)); then
	die "trellara cutover failed (exit $cutover_rc; its output: ./target/quickstart/cutover.txt, the flow's log: ./target/quickstart/run.log)"
fi
if ! grep -qx 'result: CONVERGED' "$demo/cutover.txt"; then
	die "the cutover's verify did not say CONVERGED"
fi
if ((run_rc != 0)); then
	die "trellara run exited with $run_rc after the cutover (log: ./target/quickstart/run.log)"
fi

cat <<MSG

${bold}Done in $(elapsed)s: cut over; verify said CONVERGED.${plain}

The flow is cut over and no Trellara process runs; the target holds
everything the source committed.  The source and target clusters keep
running (sockets in $sock); everything lives in ./target/quickstart.
  the target, where the applications would now connect:
    psql -h $sock -p $tport quickstart_copy
  the source database "quickstart" is read-only for new transactions
  (--lock-source); to make it writable again (a fallback: what is written
  there is no longer replicated):
    scripts/trellara cutover --config $config --abort
  look at it:
    scripts/trellara status --config $config
  do not start trellara run for this flow again: it is cut over.
  stop everything and remove ./target/quickstart:
    make quickstart-stop
MSG
