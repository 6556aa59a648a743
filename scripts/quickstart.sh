#!/usr/bin/env bash
#
# quickstart.sh - `make quickstart`: from a fresh Debian 12 machine to a
# replicated, verified PostgreSQL flow in one command (about a minute).
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
#   5. waits until the load is done and the target has applied everything
#      the source wrote, then prints `trellara verify` (must say CONVERGED)
#      and `trellara status`;
#   6. stops the supervisor with SIGTERM (capture and applyd drain), so no
#      Trellara process keeps running.  The two clusters keep running, so
#      you can look at them and start the flow again; the last lines say
#      how.  `make quickstart-stop` (scripts/quickstart-stop.sh) stops the
#      clusters and removes ./target/quickstart.
#
# Re-running starts from scratch: a previous quickstart is stopped and
# removed first (scripts/quickstart-stop.sh; nothing else is touched).
#
# Exit status: 0 when verify said CONVERGED, non-zero otherwise (on a
# failure the supervisor and pgbench are stopped, the clusters and logs are
# left in ./target/quickstart for a look; make quickstart-stop cleans up).
#
# Environment: QUICKSTART_SCALE (5) pgbench scale, QUICKSTART_LOAD_SECONDS
# (15) pgbench -T during the snapshot, QUICKSTART_TIMEOUT (300) seconds to
# wait for the target to catch up, PG_BINDIR (/usr/lib/postgresql/15/bin).
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
		printf '\nquickstart: failed after %ss; logs in %s (run.log, pgbench.log, pg/*/server.log)\n' \
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

# Everything the source wrote: a committed transaction flushes the WAL
# (walsenders only send flushed WAL).
src 'SELECT pg_current_xact_id()' >/dev/null
lsn=$(src 'SELECT pg_current_wal_flush_lsn()')
caught_up() {
	[[ $(tgt "SELECT coalesce((SELECT applied_through_lsn >= '$lsn' FROM trellara.apply_checkpoint), false)") == t ]]
}
wait_until "$timeout" "the target to apply everything up to $lsn" caught_up
say "the target applied everything up to $lsn after $(elapsed)s"

# ---------------------------------------------------------- 5. verify, status

step "trellara verify --config ./target/quickstart/trellara.yml"
verify_rc=0
scripts/trellara verify --config "$flow" | tee "$demo/verify.txt" || verify_rc=${PIPESTATUS[0]}

step "trellara status --config ./target/quickstart/trellara.yml"
scripts/trellara status --config "$flow" --rate-seconds 0 || true

# ---------------------------------------------------------- 6. stop the flow

step "stopping the flow: SIGTERM to trellara run (capture and applyd drain)"
kill -TERM "$run_pid"
run_rc=0
wait "$run_pid" || run_rc=$?
run_pid=''
rm -f "$demo/run.pid" "$demo/pgbench.pid"
say "trellara run exited with $run_rc"

if ((verify_rc != 0)) || ! grep -qx 'result: CONVERGED' "$demo/verify.txt"; then
	die "verify did not say CONVERGED (exit $verify_rc)"
fi

cat <<MSG

${bold}Done in $(elapsed)s: verify said CONVERGED.${plain}

The source and target clusters keep running (sockets in $sock);
the flow is stopped.  Everything lives in ./target/quickstart.
  start the flow again (it resumes where it stopped; Ctrl-C drains it):
    scripts/trellara run --config ./target/quickstart/trellara.yml
  write more to the source:
    pgbench -n -c 2 -T 10 -h $sock -p $sport quickstart
  look at it:
    scripts/trellara status --config ./target/quickstart/trellara.yml
    scripts/trellara verify --config ./target/quickstart/trellara.yml   (needs the flow running)
    psql -h $sock -p $tport quickstart_copy
  stop everything and remove ./target/quickstart:
    make quickstart-stop
MSG
