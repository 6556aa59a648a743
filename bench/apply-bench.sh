#!/usr/bin/env bash
# apply-bench.sh - trellara-applyd's end-to-end apply throughput and lag
# against PostgreSQL's own logical replication (publication +
# subscription) on the same pgbench workload, measured in the same run.
#
#   bench/apply-bench.sh            (make bench runs it)
#
# Method.  Two throwaway clusters (tests/bats/helpers/pg.bash: copies of
# the cached initdb template, unix sockets only): a source, and one target
# holding a database per applier and round, each created from one template
# database; every applier runs alone (one after the other, never two at
# once).  pgbench -i -s SCALE is deterministic, so the source and the
# target template start identical.  Before the workload:
#   - publication bench_pub FOR the 4 pgbench tables + bench_heartbeat
#   - the slot trellara (pgoutput), for trellara-capture
#   - per round i, CREATE SUBSCRIPTION native_i in target database native_i
#     (create_slot = true, enabled = false, copy_data = false)
# Then the backlog: pgbench -n -c 4 -j 2 -T SECONDS (tpcb-like) with no
# consumer attached, and a one-row marker transaction; END =
# pg_current_wal_insert_lsn() right after its commit, in the same session
# (autovacuum off: nothing else writes WAL).  trellara-capture then copies
# the slot into the stream (timed for information, not part of the ratio);
# each Trellara round applies that same stream with a consumer group of its
# own (applyd_i) into target database trellara_i.  Rounds alternate which
# applier goes first; the target is CHECKPOINTed before each run.
#   trellara  trellara-applyd (apply.batch_transactions source transactions
#             per target transaction, synchronous_commit = on): timed from
#             exec until trellara.apply_checkpoint.applied_through_lsn >=
#             END (polled every 10 ms over one psql session).  That row is
#             committed with the batch, so END is then flushed on the target.
#   native    ALTER SUBSCRIPTION native_i ENABLE (the apply worker commits
#             each source transaction with the subscription's default
#             synchronous_commit = off): timed until the origin's remote_lsn
#             >= END *and* its local_lsn <= pg_current_wal_flush_lsn() on the
#             target, i.e. every commit through END is flushed there - the
#             same durability as Trellara's.  Also recorded: "applied" (END
#             committed but maybe not flushed) and "confirmed" (the source
#             slot's confirmed_flush_lsn >= END; the apply worker reports its
#             flush position only when it wakes up, at least once a second).
# Target settings: fsync on (APPLY_BENCH_TARGET_FSYNC), autovacuum off (the
# same work in every round), shared_buffers 512MB, no checkpoint during a
# run; every round's database is a fresh copy, so both appliers start with
# its pages in the OS cache only.  Per round the script also prints, for
# each process that does the work, seconds on a CPU / seconds runnable but
# waiting for one (/proc/PID/schedstat): the rest of the wall time it was
# blocked (on its peer, I/O or fsync).
# ratio = trellara txns/s / native txns/s (native: flushed time; the
# confirmed-time ratio is printed too), medians of REPEAT.  Every target
# database is checked against the source at END afterwards (row counts and
# sums of the 4 tables).
#
# Lag.  Then, with the last round's databases (caught up): pgbench -R RATE
# -T LAG_SECONDS on the source (RATE: 50% of native's median throughput,
# capped at 50% of what the source did unthrottled while building the
# backlog - it shares the cores with the appliers), capture + applyd
# running, then (alone) the native subscription enabled again.  A heartbeat
# row (clock_timestamp()) is inserted every 0.2 s into bench_heartbeat; the
# target is polled every 10 ms for max(id), so each heartbeat's lag is the
# time it became visible on the target minus its source timestamp (10 ms
# resolution; both clusters use the same clock).  p50 and max over the
# heartbeats during the load; catch-up = the lag of one heartbeat inserted
# right after pgbench ends.
#
# Environment: APPLY_BENCH_SECONDS (backlog pgbench -T, default 30),
# APPLY_BENCH_SCALE (10), APPLY_BENCH_CLIENTS (4), APPLY_BENCH_REPEAT (3),
# APPLY_BENCH_LAG_SECONDS (20; 0 skips the lag measurement),
# APPLY_BENCH_LAG_RATE (tps; overrides the rule above),
# APPLY_BENCH_BATCH (apply.batch_transactions; default: applyd's, 100),
# APPLY_BENCH_TARGET_FSYNC (on; "off" makes every flush free on the target),
# APPLY_BENCH_PERF=DIR (one extra, uncounted round of each applier under
# perf record -g: applyd, its target backend, the native apply worker;
# data and text reports in DIR),
# APPLY_BENCH_KEEP=1 keeps the directory (clusters stopped).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
# shellcheck source=tests/bats/helpers/pg.bash
source tests/bats/helpers/pg.bash

SECONDS_PGBENCH=${APPLY_BENCH_SECONDS:-30}
SCALE=${APPLY_BENCH_SCALE:-10}
CLIENTS=${APPLY_BENCH_CLIENTS:-4}
REPEAT=${APPLY_BENCH_REPEAT:-3}
LAG_SECONDS=${APPLY_BENCH_LAG_SECONDS:-20}
LAG_RATE=${APPLY_BENCH_LAG_RATE:-}
BATCH=${APPLY_BENCH_BATCH:-}
TARGET_FSYNC=${APPLY_BENCH_TARGET_FSYNC:-on}
PERF_DIR=${APPLY_BENCH_PERF:-}
PUB=bench_pub
SLOT=trellara
RATIO_GOAL=1.5
LAG_GOAL_MS=1000
TIMEOUT_S=600 # any single wait

for prog in "$REPO/bin/trellara-capture" "$REPO/bin/trellara-applyd" "$REPO/bin/trellara-stream"; do
	[[ -x $prog ]] || { echo "apply-bench: $prog missing; run make first" >&2; exit 1; }
done
for tool in pgbench jq; do
	command -v "$tool" >/dev/null || { echo "apply-bench: $tool not on PATH" >&2; exit 1; }
done
if [[ -n $PERF_DIR ]]; then
	command -v perf >/dev/null || { echo "apply-bench: APPLY_BENCH_PERF needs perf" >&2; exit 1; }
	mkdir -p "$PERF_DIR"
	PERF_DIR=$(cd "$PERF_DIR" && pwd)
fi
[[ $TARGET_FSYNC == on || $TARGET_FSYNC == off ]] || { echo "apply-bench: APPLY_BENCH_TARGET_FSYNC: on or off" >&2; exit 1; }
trellara_pg_check_bindir
PSQL=$(trellara_pg_psql_bin)

# ---------------------------------------------------------------- cleanup
#
# The directory follows the bats harness layout (owner file, watchdog,
# source/ and target/): if this script is SIGKILLed, the watchdog, or the
# next bats run's reaper, stops both clusters and removes it.
FDIR=
declare -A BG=() # name -> pid of a background process of ours
cleanup() {
	local status=$? pid wpid
	trap - EXIT INT TERM HUP
	[[ -n ${FDIR:-} && -d $FDIR/bench ]] && touch "$FDIR/bench/hb.stop"
	for pid in "${BG[@]}"; do
		[[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null
	done
	if [[ -n $FDIR && -d $FDIR ]]; then
		if [[ -f $FDIR/watchdog.pid ]] && read -r wpid <"$FDIR/watchdog.pid" 2>/dev/null; then
			kill -KILL "$wpid" 2>/dev/null || true
		fi
		if [[ -n ${APPLY_BENCH_KEEP:-} ]]; then
			trellara_pg_destroy_dir "$FDIR" keep
			echo "apply-bench: kept $FDIR" >&2
		else
			trellara_pg_destroy_dir "$FDIR"
		fi
	fi
	((status == 0)) || echo "apply-bench: FAILED (exit $status)" >&2
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

die() {
	echo "apply-bench: $*" >&2
	exit 1
}

root=$(trellara_pg_tmp_root)
FDIR=$(mktemp -d "$root/trellara-bats.XXXXXX")
chmod 0755 "$FDIR"
_trellara_pg_proc_identity "$$" >"$FDIR/owner"
trellara_pg_start_watchdog "$FDIR" "$(cat "$FDIR/owner")"
mkdir -m 0755 "$FDIR/sock"
mkdir -m 0700 "$FDIR/bench"
_trellara_pg_is_root && chown "$TRELLARA_PG_OS_USER:" "$FDIR/sock"
WORK=$FDIR/bench
SOCK=$FDIR/sock
PORT=$((50000 + ($$ % 7000) * 2))
TPORT=$((PORT + 1))
SRC_CONN="host=$SOCK port=$PORT dbname=postgres"
SRC_URL="postgresql:///postgres?host=$SOCK&port=$PORT"
tgt_conn() { printf 'host=%s port=%s dbname=%s\n' "$SOCK" "$TPORT" "$1"; }
tgt_url() { printf 'postgresql:///%s?host=%s&port=%s\n' "$1" "$SOCK" "$TPORT"; }

# both at once: wait_both PID PID
wait_both() {
	local rc=0
	wait "$1" || rc=1
	wait "$2" || rc=1
	return $rc
}
trellara_pg_create "$FDIR/source" "$PORT" "$SOCK" apply-bench-source &
p1=$!
trellara_pg_create "$FDIR/target" "$TPORT" "$SOCK" apply-bench-target &
wait_both "$p1" $! || die "cannot create the clusters"
cat >>"$FDIR/source/postgresql.conf" <<EOF
# ---- bench/apply-bench.sh ----
logical_decoding_work_mem = '64MB'  # PostgreSQL's default
autovacuum = off              # nothing but the workload writes WAL
max_wal_size = '16GB'         # no checkpoints in the middle of a measurement
checkpoint_timeout = '1h'
EOF
cat >>"$FDIR/target/postgresql.conf" <<EOF
# ---- bench/apply-bench.sh ----
fsync = $TARGET_FSYNC                 # the appliers' commits are really flushed
autovacuum = off              # the same work in every round
max_wal_size = '16GB'
checkpoint_timeout = '1h'
shared_buffers = '512MB'
max_logical_replication_workers = 8
max_worker_processes = 16
EOF
trellara_pg_start "$FDIR/source" &
p1=$!
trellara_pg_start "$FDIR/target" &
wait_both "$p1" $! || die "cannot start the clusters"

src() { "$PSQL" -X -qAt -v ON_ERROR_STOP=1 -d "$SRC_CONN" "$@"; }
tgt() { # DB SQL...
	local db=$1
	shift
	"$PSQL" -X -qAt -v ON_ERROR_STOP=1 -d "$(tgt_conn "$db")" "$@"
}

# One long-lived psql session for every poll (a query per 10 ms without a
# process start and a backend fork each time); \c moves it between the
# clusters and databases.
# (It ends by itself: EOF on its input when this script exits.)
coproc POLL { "$PSQL" -X -qAt -d "$SRC_CONN" 2>&1; }
poll_query() { # sets POLL_ANSWER
	printf '%s;\n' "$1" >&"${POLL[1]}"
	IFS= read -r -t 30 POLL_ANSWER <&"${POLL[0]}" || die "poll session: no answer to: $1"
}
poll_connect() { # CONNINFO
	printf '\\c "%s"\n' "$1" >&"${POLL[1]}"
	poll_query "SELECT 'connected'"
	[[ $POLL_ANSWER == connected ]] || die "poll session: cannot connect to $1: $POLL_ANSWER"
}
# poll_until SQL LIMIT_S: poll every 10 ms until SQL says t
poll_until() {
	local q=$1 limit=$2 t0=$EPOCHREALTIME
	while :; do
		poll_query "$q"
		[[ $POLL_ANSWER == t ]] && return 0
		[[ $POLL_ANSWER == f ]] || die "poll: unexpected answer \"$POLL_ANSWER\" to: $q"
		elapsed_gt "$t0" "$limit" && die "timed out after $limit s waiting for: $q"
		sleep 0.01
	done
}
elapsed_gt() { # T0 (an $EPOCHREALTIME) LIMIT_S
	local now=${EPOCHREALTIME/./} t0=${1/./}
	((now - t0 > $2 * 1000000))
}
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", b - a}'; }
# "X/Y": seconds a process has run on a CPU / waited for one (runnable but
# not running), from /proc/PID/schedstat; whatever remains of its life it
# was blocked (waiting for input, a lock or I/O)
cpu_of() {
	awk '{printf "%.2f/%.2f", $1 / 1e9, $2 / 1e9}' "/proc/$1/schedstat" 2>/dev/null || echo "?"
}
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# ---------------------------------------------------------------- setup

T0=$EPOCHREALTIME
HEARTBEAT="CREATE TABLE bench_heartbeat (id bigserial PRIMARY KEY, ts timestamptz NOT NULL)"
src -c "SELECT 1" >/dev/null
tgt postgres -c "CREATE DATABASE tmpl" >/dev/null
pgbench -i -q -s "$SCALE" -d "$SRC_URL" >"$WORK/pgbench-init-source.log" 2>&1 &
p1=$!
pgbench -i -q -s "$SCALE" -d "$(tgt_url tmpl)" >"$WORK/pgbench-init-target.log" 2>&1 &
wait_both "$p1" $! || { cat "$WORK"/pgbench-init-*.log >&2; die "pgbench -i failed"; }
src -c "$HEARTBEAT" \
	-c "CREATE PUBLICATION $PUB FOR TABLE pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history, bench_heartbeat" \
	-c "SELECT pg_create_logical_replication_slot('$SLOT', 'pgoutput')" \
	-c "CHECKPOINT" >/dev/null
tgt tmpl -c "$HEARTBEAT" -c "VACUUM ANALYZE" >/dev/null

ROUNDS=$REPEAT
[[ -n $PERF_DIR ]] && ROUNDS=$((REPEAT + 1)) # the last one is the profiled one
SUB_USER=$(id -un) # the clusters' bootstrap superuser
dbs=()
for ((i = 1; i <= ROUNDS; i++)); do
	dbs+=(-c "CREATE DATABASE trellara_$i TEMPLATE tmpl STRATEGY file_copy" -c "CREATE DATABASE native_$i TEMPLATE tmpl STRATEGY file_copy")
done
tgt postgres "${dbs[@]}" >/dev/null
for ((i = 1; i <= ROUNDS; i++)); do
	tgt "native_$i" -c "SET client_min_messages = warning" -c "CREATE SUBSCRIPTION native_$i CONNECTION '$SRC_CONN user=$SUB_USER' PUBLICATION $PUB
		WITH (enabled = false, create_slot = true, slot_name = 'native_$i', copy_data = false)" >/dev/null
done

# Trellara's flow file for target database DB and consumer group GROUP
GROUPS_YAML=$(for ((i = 1; i <= ROUNDS; i++)); do printf 'applyd_%s, ' "$i"; done)
write_flow() { # FILE DB GROUP
	cat >"$1" <<EOF
config_version: 2
environment: bench
source:
  id: bench
  database_url: "$SRC_URL"
  publication: $PUB
  slot: $SLOT
  stream_spill_dir: "$WORK/spill"
  pgoutput:
    protocol_version: 2
    streaming: true
dataset:
  id: pgbench
  mode: strict_transaction_order
  tables:
    - {schema: public, name: pgbench_accounts}
    - {schema: public, name: pgbench_branches}
    - {schema: public, name: pgbench_tellers}
    - {schema: public, name: pgbench_history}
    - {schema: public, name: bench_heartbeat}
stream:
  kind: local
  path: "$WORK/stream"
  durability: fsync
  min_free_bytes: 268435456
  protected_groups: [${GROUPS_YAML%, }]
target:
  database_url: "$(tgt_url "$2")"
apply:
  consumer_group: $3
EOF
	[[ -n $BATCH ]] && echo "  batch_transactions: $BATCH" >>"$1"
	return 0
}

# ---------------------------------------------------------------- backlog

echo "== apply ($(date -u +%Y-%m-%dT%H:%M:%SZ), trellara $(git -C "$REPO" describe --always --dirty 2>/dev/null || echo '?'), $(nproc) cores, PostgreSQL $(trellara_pg_version | cut -d' ' -f1), target fsync $TARGET_FSYNC, source fsync off, load average $(cut -d' ' -f1-3 /proc/loadavg))"
pgbench -n -c "$CLIENTS" -j 2 -T "$SECONDS_PGBENCH" -d "$SRC_URL" >"$WORK/pgbench.log" 2>&1 ||
	{ cat "$WORK/pgbench.log" >&2; die "pgbench failed"; }
END=$(src -c "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (0, 0, 0, 0, now())" \
	-c "SELECT pg_current_wal_insert_lsn()")
BACKLOG_TXNS=$(awk '/number of transactions actually processed/ {print $NF}' "$WORK/pgbench.log")
BACKLOG_TXNS=${BACKLOG_TXNS%%/*}
BACKLOG_TPS=$(grep -o 'tps = [0-9.]*' "$WORK/pgbench.log" | head -1 | awk '{printf "%.0f", $3}')
[[ $BACKLOG_TXNS =~ ^[0-9]+$ ]] || die "cannot read the transaction count from pgbench's log"
TXNS=$((BACKLOG_TXNS + 1)) # + the marker
# what every target must hold at END
fingerprint() {
	printf '%s' "SELECT (SELECT count(*) || ':' || sum(abalance) FROM pgbench_accounts) || '/' ||
		(SELECT sum(bbalance) FROM pgbench_branches) || '/' || (SELECT sum(tbalance) FROM pgbench_tellers) || '/' ||
		(SELECT count(*) || ':' || coalesce(sum(delta), 0) FROM pgbench_history)"
}
SOURCE_PRINT=$(src -c "$(fingerprint)")

# capture the backlog into the stream (not part of the measurement)
write_flow "$WORK/capture.yml" trellara_1 applyd_1
t0=$EPOCHREALTIME
"$REPO/bin/trellara-capture" --config "$WORK/capture.yml" --start-now 2>"$WORK/capture-backlog.log" &
BG[capture]=$!
poll_until "SELECT coalesce((SELECT confirmed_flush_lsn >= '$END' FROM pg_replication_slots WHERE slot_name = '$SLOT'), false)" "$TIMEOUT_S"
CAPTURE_S=$(secs "$t0" "$EPOCHREALTIME")
kill -TERM "${BG[capture]}"
rc=0
wait "${BG[capture]}" || rc=$?
BG[capture]=
((rc == 0)) || { cat "$WORK/capture-backlog.log" >&2; die "trellara-capture exited $rc after SIGTERM"; }
STREAM_MB=$("$REPO/bin/trellara-stream" inspect-local --config "$WORK/capture.yml" --format json |
	jq -r '.bytes / 1e6 | floor')

# ---------------------------------------------------------------- the appliers

# run_trellara ROUND: sets R_SECONDS R_TXNS R_CHANGES R_CPU_APPLYD R_CPU_BACKEND
run_trellara() {
	local i=$1 db=trellara_$1 flow=$WORK/apply-$1.yml log=$WORK/applyd-$1.log t0 t1 rc=0 pid bpid
	local -a perfs=()
	write_flow "$flow" "$db" "applyd_$i"
	tgt "$db" -c "CHECKPOINT" >/dev/null
	poll_connect "$(tgt_conn "$db")"
	t0=$EPOCHREALTIME
	"$REPO/bin/trellara-applyd" --config "$flow" 2>"$log" &
	pid=$!
	BG[applyd]=$pid
	poll_until "SELECT to_regclass('trellara.apply_checkpoint') IS NOT NULL" 60
	if [[ -n $PERF_DIR && $i == "$ROUNDS" ]]; then
		poll_until "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE application_name = 'trellara-applyd' AND datname = '$db')" 60
		poll_query "SELECT pid FROM pg_stat_activity WHERE application_name = 'trellara-applyd' AND datname = '$db'"
		perf record -q -F 999 -g -o "$PERF_DIR/applyd.data" -p "$pid" 2>"$PERF_DIR/perf-applyd.err" &
		perfs+=($!)
		BG[perf1]=$!
		perf record -q -F 999 -g -o "$PERF_DIR/target-backend.data" -p "$POLL_ANSWER" 2>"$PERF_DIR/perf-backend.err" &
		perfs+=($!)
		BG[perf2]=$!
	fi
	poll_until "SELECT coalesce(bool_and(applied_through_lsn >= '$END'), false) FROM trellara.apply_checkpoint" "$TIMEOUT_S"
	t1=$EPOCHREALTIME
	for p in "${perfs[@]}"; do kill -INT "$p" 2>/dev/null; done
	for p in "${perfs[@]}"; do wait "$p" || true; done
	BG[perf1]='' BG[perf2]=''
	R_CPU_APPLYD=$(cpu_of "$pid")
	poll_query "SELECT pid FROM pg_stat_activity WHERE application_name = 'trellara-applyd' AND datname = '$db'"
	bpid=$POLL_ANSWER
	R_CPU_BACKEND=$(cpu_of "$bpid")
	poll_query "SELECT applied_transactions || ' ' || applied_changes FROM trellara.apply_checkpoint"
	read -r R_TXNS R_CHANGES <<<"$POLL_ANSWER"
	kill -TERM "$pid"
	wait "$pid" || rc=$?
	BG[applyd]=
	((rc == 0)) || { cat "$log" >&2; die "trellara-applyd exited $rc after SIGTERM"; }
	R_SECONDS=$(secs "$t0" "$t1")
}

# run_native ROUND: sets R_SECONDS (flushed) R_APPLIED_S R_CONFIRMED_S
# R_CPU_WORKER R_CPU_WALSENDER
run_native() {
	local i=$1 db=native_$1 sub=native_$1 t0 t_applied='' t_flushed t_confirmed oid wpid spid
	tgt "$db" -c "CHECKPOINT" >/dev/null
	poll_connect "$(tgt_conn "$db")"
	poll_query "SELECT oid FROM pg_subscription WHERE subname = '$sub'"
	oid=$POLL_ANSWER
	local q="SELECT format('%s %s', coalesce(bool_and(remote_lsn >= '$END'), false),
		coalesce(bool_and(remote_lsn >= '$END' AND local_lsn <= pg_current_wal_flush_lsn()), false))
		FROM pg_replication_origin_status WHERE external_id = 'pg_$oid'"
	local perf=''
	t0=$EPOCHREALTIME
	tgt "$db" -c "ALTER SUBSCRIPTION $sub ENABLE" >/dev/null
	if [[ -n $PERF_DIR && $i == "$ROUNDS" ]]; then
		poll_until "SELECT EXISTS (SELECT FROM pg_stat_subscription WHERE subname = '$sub' AND relid IS NULL AND pid IS NOT NULL)" 60
		poll_query "SELECT pid FROM pg_stat_subscription WHERE subname = '$sub' AND relid IS NULL"
		perf record -q -F 999 -g -o "$PERF_DIR/native-apply-worker.data" -p "$POLL_ANSWER" 2>"$PERF_DIR/perf-native.err" &
		perf=$!
		BG[perf1]=$perf
	fi
	while :; do
		poll_query "$q"
		case $POLL_ANSWER in
		"t t") [[ -n $t_applied ]] || t_applied=$EPOCHREALTIME; t_flushed=$EPOCHREALTIME; break ;;
		"t f") [[ -n $t_applied ]] || t_applied=$EPOCHREALTIME ;;
		"f f") ;;
		*) die "poll: unexpected answer \"$POLL_ANSWER\" to: $q" ;;
		esac
		elapsed_gt "$t0" "$TIMEOUT_S" && die "native_$i: timed out"
		sleep 0.01
	done
	if [[ -n $perf ]]; then
		kill -INT "$perf" 2>/dev/null
		wait "$perf" || true
		BG[perf1]=''
	fi
	poll_query "SELECT pid FROM pg_stat_subscription WHERE subname = '$sub' AND relid IS NULL"
	wpid=$POLL_ANSWER
	poll_connect "$SRC_CONN"
	poll_until "SELECT coalesce((SELECT confirmed_flush_lsn >= '$END' FROM pg_replication_slots WHERE slot_name = '$sub'), false)" 60
	t_confirmed=$EPOCHREALTIME
	poll_query "SELECT active_pid FROM pg_replication_slots WHERE slot_name = '$sub'"
	spid=$POLL_ANSWER
	R_CPU_WORKER=$(cpu_of "$wpid")
	R_CPU_WALSENDER=$(cpu_of "$spid")
	tgt "$db" -c "ALTER SUBSCRIPTION $sub DISABLE" >/dev/null
	R_SECONDS=$(secs "$t0" "$t_flushed")
	R_APPLIED_S=$(secs "$t0" "$t_applied")
	R_CONFIRMED_S=$(secs "$t0" "$t_confirmed")
}

declare -a TS=() NS=() NAS=() NCS=() TDETAIL=() NDETAIL=()
TR_CHANGES=
trellara_round() {
	run_trellara "$1"
	[[ $R_TXNS == "$TXNS" ]] || die "trellara round $1 applied $R_TXNS transactions, the backlog holds $TXNS"
	[[ -z $TR_CHANGES || $TR_CHANGES == "$R_CHANGES" ]] || die "trellara round $1 applied $R_CHANGES changes, round 1 $TR_CHANGES"
	TR_CHANGES=$R_CHANGES
	if [[ -n $PERF_DIR && $1 == "$ROUNDS" ]]; then
		PERF_DETAIL="profiled trellara round (perf record -g, reports in $PERF_DIR): $R_SECONDS (applyd $R_CPU_APPLYD, backend $R_CPU_BACKEND)"
		return
	fi
	TS+=("$R_SECONDS")
	TDETAIL+=("$R_SECONDS (applyd $R_CPU_APPLYD, backend $R_CPU_BACKEND)")
}
native_round() {
	run_native "$1"
	if [[ -n $PERF_DIR && $1 == "$ROUNDS" ]]; then
		PERF_DETAIL+="; native $R_SECONDS (apply worker $R_CPU_WORKER, walsender $R_CPU_WALSENDER)"
		return
	fi
	NS+=("$R_SECONDS") NAS+=("$R_APPLIED_S") NCS+=("$R_CONFIRMED_S")
	NDETAIL+=("$R_SECONDS (applied $R_APPLIED_S, confirmed $R_CONFIRMED_S; apply worker $R_CPU_WORKER, walsender $R_CPU_WALSENDER)")
}
for ((i = 1; i <= REPEAT; i++)); do
	if ((i % 2)); then
		trellara_round "$i"
		native_round "$i"
	else
		native_round "$i"
		trellara_round "$i"
	fi
done
if [[ -n $PERF_DIR ]]; then
	trellara_round "$ROUNDS"
	native_round "$ROUNDS"
	for f in applyd target-backend native-apply-worker; do
		perf report -i "$PERF_DIR/$f.data" --no-children --sort dso,symbol --stdio -g none 2>/dev/null |
			grep -v '^#' | grep -v '^$' | head -60 >"$PERF_DIR/$f.self.txt" || true
		perf report -i "$PERF_DIR/$f.data" --children --sort symbol --stdio -g none 2>/dev/null |
			grep -v '^#' | grep -v '^$' | head -150 >"$PERF_DIR/$f.children.txt" || true
	done
fi

# every target database holds what the source held at END
for ((i = 1; i <= ROUNDS; i++)); do
	for db in "trellara_$i" "native_$i"; do
		p=$(tgt "$db" -c "$(fingerprint)")
		[[ $p == "$SOURCE_PRINT" ]] || die "$db differs from the source at END: $p, source $SOURCE_PRINT"
	done
done

MT=$(median "${TS[@]}")
MN=$(median "${NS[@]}")
MNA=$(median "${NAS[@]}")
MNC=$(median "${NCS[@]}")
per_s() { awk -v n="$1" -v s="$2" 'BEGIN{printf "%.0f", n / s}'; }
T_TPS=$(per_s "$TXNS" "$MT")
N_TPS=$(per_s "$TXNS" "$MN")
RATIO=$(awk -v a="$T_TPS" -v b="$N_TPS" 'BEGIN{printf "%.2f", a / b}')
RATIO_CONFIRMED=$(awk -v t="$MT" -v n="$MNC" 'BEGIN{printf "%.2f", n / t}')
RATIO_APPLIED=$(awk -v t="$MT" -v n="$MNA" 'BEGIN{printf "%.2f", n / t}')

echo "backlog: pgbench tpcb-like -c $CLIENTS -j 2 -T $SECONDS_PGBENCH, scale $SCALE, no consumer attached ($BACKLOG_TPS tps)" \
	"+ 1 marker = $TXNS transactions, $TR_CHANGES rows; trellara-capture put it in the stream in $CAPTURE_S s ($STREAM_MB MB; not measured below)"
printf '%-9s %8s %9s %9s %9s %10s  %s\n' applier txns rows seconds txns/s rows/s "durability at the timed point"
printf '%-9s %8d %9d %9.2f %9d %10d  %s\n' trellara "$TXNS" "$TR_CHANGES" "$MT" "$T_TPS" "$(per_s "$TR_CHANGES" "$MT")" \
	"flushed: synchronous_commit=on, one target commit per ${BATCH:-100} source txns"
printf '%-9s %8d %9d %9.2f %9d %10d  %s\n' native "$TXNS" "$TR_CHANGES" "$MN" "$N_TPS" "$(per_s "$TR_CHANGES" "$MN")" \
	"flushed: synchronous_commit=off per source txn, timed to the WAL flush covering END"
echo "ratio = trellara txns/s / native txns/s: $RATIO (goal >= $RATIO_GOAL: $(awk -v r="$RATIO" -v g="$RATIO_GOAL" 'BEGIN{print (r >= g) ? "met" : "NOT met"}'));" \
	"against native's source-confirmed time (confirmed_flush_lsn, $MNC s): $RATIO_CONFIRMED; its unflushed applied time ($MNA s): $RATIO_APPLIED"
echo "per round, seconds (process: on-CPU/waiting-for-a-CPU s): trellara ${TDETAIL[*]}"
echo "  native ${NDETAIL[*]}"
[[ -n $PERF_DIR ]] && echo "  $PERF_DETAIL"
echo "every target database checked equal to the source at END (counts and sums of the 4 pgbench tables)"

# ---------------------------------------------------------------- lag

# lag_run NAME DB: pgbench -R LAG_RATE -T LAG_SECONDS with heartbeats;
# the applier must already be running.  Sets L_P50 L_MAX L_N L_CATCHUP
# L_TPS L_READY
lag_run() {
	local name=$1 db=$2 t0 k0 kend pid seen=$WORK/lag-$1.seen hb=$WORK/lag-$1.hb last=-1
	poll_connect "$(tgt_conn "$db")"
	# ready: a heartbeat inserted now is visible on the target
	t0=$EPOCHREALTIME
	k0=$(src -c "INSERT INTO bench_heartbeat (ts) VALUES (clock_timestamp()) RETURNING id")
	poll_until "SELECT coalesce(max(id), 0) >= $k0 FROM bench_heartbeat" "$TIMEOUT_S"
	L_READY=$(secs "$t0" "$EPOCHREALTIME")
	rm -f "$WORK/hb.stop" "$seen"
	{
		while [[ ! -e $WORK/hb.stop ]]; do
			echo "INSERT INTO bench_heartbeat (ts) VALUES (clock_timestamp());"
			sleep 0.2
		done
	} | "$PSQL" -X -q -v ON_ERROR_STOP=1 -d "$SRC_CONN" >/dev/null 2>"$WORK/lag-$name-hb.err" &
	BG[hb]=$!
	pgbench -n -c "$CLIENTS" -j 2 -R "$LAG_RATE" -T "$LAG_SECONDS" -d "$SRC_URL" >"$WORK/lag-$name-pgbench.log" 2>&1 &
	pid=$!
	BG[pgbench]=$pid
	while kill -0 "$pid" 2>/dev/null; do
		poll_query "SELECT coalesce(max(id), 0) || ' ' || extract(epoch from clock_timestamp()) FROM bench_heartbeat"
		[[ ${POLL_ANSWER%% *} != "$last" ]] && echo "$POLL_ANSWER" >>"$seen"
		last=${POLL_ANSWER%% *}
		sleep 0.01
	done
	wait "$pid" || { cat "$WORK/lag-$name-pgbench.log" >&2; die "pgbench -R failed"; }
	BG[pgbench]=
	kend=$(src -c "INSERT INTO bench_heartbeat (ts) VALUES (clock_timestamp()) RETURNING id")
	touch "$WORK/hb.stop"
	t0=$EPOCHREALTIME
	while :; do
		poll_query "SELECT coalesce(max(id), 0) || ' ' || extract(epoch from clock_timestamp()) FROM bench_heartbeat"
		[[ ${POLL_ANSWER%% *} != "$last" ]] && echo "$POLL_ANSWER" >>"$seen"
		last=${POLL_ANSWER%% *}
		((last >= kend)) && break
		elapsed_gt "$t0" "$TIMEOUT_S" && die "$name: the target did not catch up"
		sleep 0.01
	done
	wait "${BG[hb]}" || true
	BG[hb]=
	src -c "SELECT id || ' ' || extract(epoch from ts) FROM bench_heartbeat WHERE id > $k0 AND id <= $kend ORDER BY id" >"$hb"
	# lag of heartbeat k: first poll that saw max(id) >= k, minus its ts
	awk -v kend="$kend" '
		NR == FNR { sid[NR] = $1; st[NR] = $2; ns = NR; next }
		{ id[FNR] = $1; ts[FNR] = $2; nh = FNR }
		END {
			j = 1; n = 0
			for (h = 1; h <= nh; h++) {
				while (j <= ns && sid[j] < id[h]) j++
				if (j > ns) exit
				lag = (st[j] - ts[h]) * 1000
				if (id[h] == kend) printf "catchup %.1f\n", lag; else printf "lag %.1f\n", lag
			}
		}' "$seen" "$hb" >"$WORK/lag-$name.ms"
	L_CATCHUP=$(awk '$1 == "catchup" {printf "%.0f", $2}' "$WORK/lag-$name.ms")
	read -r L_N L_P50 L_MAX < <(awk '$1 == "lag" {print $2}' "$WORK/lag-$name.ms" | sort -g |
		awk '{v[NR] = $1} END {printf "%d %.0f %.0f\n", NR, v[int((NR + 1) / 2)], v[NR]}')
	L_TPS=$(grep -o 'tps = [0-9.]*' "$WORK/lag-$name-pgbench.log" | head -1 | awk '{printf "%.0f", $3}')
	# the target ended where the source is (nothing else writes now)
	[[ $(tgt "$db" -c "$(fingerprint)") == "$(src -c "$(fingerprint)")" ]] || die "$db differs from the source after the lag run"
}

if ((LAG_SECONDS > 0)); then
	if [[ -z $LAG_RATE ]]; then
		LAG_RATE=$(awk -v n="$N_TPS" -v s="$BACKLOG_TPS" 'BEGIN{r = n / 2; c = s / 2; printf "%d", r < c ? r : c}')
		LAG_WHY="min(50% of native's $N_TPS txns/s, 50% of the source's unthrottled $BACKLOG_TPS tps)"
	else
		LAG_WHY="APPLY_BENCH_LAG_RATE"
	fi
	R=$REPEAT # the last measured round's databases are caught up to END
	# trellara: capture (same stream and slot) + applyd (group applyd_R)
	"$REPO/bin/trellara-capture" --config "$WORK/capture.yml" --start-now 2>"$WORK/capture-lag.log" &
	BG[capture]=$!
	write_flow "$WORK/apply-lag.yml" "trellara_$R" "applyd_$R"
	"$REPO/bin/trellara-applyd" --config "$WORK/apply-lag.yml" 2>"$WORK/applyd-lag.log" &
	BG[applyd]=$!
	lag_run trellara "trellara_$R"
	TL=("$L_N" "$L_P50" "$L_MAX" "$L_CATCHUP" "$L_TPS" "$L_READY")
	for p in applyd capture; do
		rc=0
		kill -TERM "${BG[$p]}"
		wait "${BG[$p]}" || rc=$?
		BG[$p]=
		((rc == 0)) || { cat "$WORK/$p-lag.log" >&2; die "trellara-$p exited $rc after SIGTERM"; }
	done
	# native: the subscription again; it first catches up on Trellara's run
	tgt "native_$R" -c "ALTER SUBSCRIPTION native_$R ENABLE" >/dev/null
	lag_run native "native_$R"
	NL=("$L_N" "$L_P50" "$L_MAX" "$L_CATCHUP" "$L_TPS" "$L_READY")
	tgt "native_$R" -c "ALTER SUBSCRIPTION native_$R DISABLE" >/dev/null

	met() { awk -v v="$1" -v g="$LAG_GOAL_MS" 'BEGIN{print (v < g) ? "met" : "NOT met"}'; }
	echo "lag: pgbench -R $LAG_RATE -T $LAG_SECONDS (rate = $LAG_WHY), heartbeat every 0.2 s, target polled every 10 ms"
	printf '%-9s %9s %8s %8s %8s %12s\n' applier "load tps" "samples" "p50 ms" "max ms" "catch-up ms"
	printf '%-9s %9s %8s %8s %8s %12s\n' trellara "${TL[4]}" "${TL[0]}" "${TL[1]}" "${TL[2]}" "${TL[3]}"
	printf '%-9s %9s %8s %8s %8s %12s\n' native "${NL[4]}" "${NL[0]}" "${NL[1]}" "${NL[2]}" "${NL[3]}"
	echo "goal: trellara lag < $LAG_GOAL_MS ms: p50 $(met "${TL[1]}"), max $(met "${TL[2]}")" \
		"(trellara lag = source commit -> visible and flushed on the target through capture's fsynced stream and applyd;" \
		"native = visible, its flush may follow by up to wal_writer_delay; native first caught up on the trellara run in ${NL[5]} s)"
fi
echo "(total $(awk -v a="$T0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.0f", b - a}') s)"
