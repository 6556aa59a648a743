#!/usr/bin/env bash
# apply-bench.sh - trellara-applyd's end-to-end apply throughput and lag
# against PostgreSQL's own logical replication (publication +
# subscription) on the same workloads, measured in the same run.
#
#   bench/apply-bench.sh            (make bench runs it)
#
# Workloads (APPLY_BENCH_WORKLOADS, default all, in this order):
#   tpcb      pgbench's built-in tpcb-like at scale SCALE: per transaction
#             3 updates (account, teller, branch) + 1 history insert
#   hotkey    the same at scale 1: every transaction updates the one branch
#             row (what compaction folds best)
#   inserts   inserts of distinct keys only: per transaction one INSERT of
#             4 new rows (client_id, a per-client counter) into bench_ins
#   updates   updates of distinct keys only: per transaction one UPDATE of
#             4 rows of bench_upd that no other transaction touches (keys:
#             client_id and a per-client counter, pre-loaded with
#             UPDATES_ROWS rows per client; the source is checked to hold
#             exactly 4 x transactions rows updated once and none twice)
#   conflict  every transaction touches the row the previous one did: one
#             UPDATE bench_counter SET n = n + 1 of its single row + one
#             insert of a distinct key into bench_conflict (the worst case
#             for parallel apply; nothing to fold but the counter)
# Each is checked on the source after its backlog (tpcb/hotkey: one
# history row per transaction; inserts: 4 rows per transaction; conflict:
# the counter equals the transactions).
#
# Method, per workload.  Two throwaway clusters (tests/bats/helpers/pg.bash:
# copies of the cached initdb template, unix sockets only): a source with
# a database per workload, and a target with a template database per
# workload and, per applier and round, a database created from it; every
# applier runs alone (one after the other, never two at once).  The
# workload's initial data is deterministic, so source and template start
# identical.  Before the backlog:
#   - publication bench_pub FOR the workload's tables + bench_heartbeat
#   - the slot trellara_W (pgoutput), for trellara-capture
#   - per round i, CREATE SUBSCRIPTION W_native_i in target database
#     W_native_i (create_slot = true, enabled = false, copy_data = false)
# Then the backlog: pgbench -n -c CLIENTS -j 2 -T SECONDS with no consumer
# attached, and a one-row marker transaction (into bench_heartbeat); END =
# pg_current_wal_insert_lsn() right after its commit, in the same session
# (autovacuum off: nothing else writes WAL).  txns = pgbench's transaction
# count + 1; rows = pgbench's count x the workload's changes per
# transaction + 1 (every transaction of each workload writes exactly that
# many rows; the checks above hold it).  trellara-capture then copies the
# slot into the workload's stream (timed for information, not part of the
# ratio); each Trellara configuration and round applies that same stream
# with a consumer group of its own into target database W_CONFIG_i.
# Trellara configurations: every APPLY_BENCH_VARIANTS x APPLY_BENCH_WORKERS
# (default: compaction with workers 1, 2 and 4):
#   compaction     the flow file says apply.compaction: true
#   nocompaction   apply.compaction: false
#   nocopy         apply.compaction: true, apply.copy_inserts: false (runs
#                  of inserts as multi-row INSERT instead of COPY)
#   default        no apply.compaction key (applyd's default; a build
#                  without the key can only run this one)
#   workers N      apply.workers: N (parallel apply: N target
#                  connections, batches committed in order), always
#                  written (applyd's default is 2); the configuration is
#                  named VARIANT_wN when N != 1, VARIANT for 1
# Every configuration's flow file is validated (trellara-config, the same
# parser as applyd's) before anything runs: a build that refuses a key
# stops the bench there, naming it.
# Rounds alternate which applier goes first (odd: the Trellara
# configurations in order, then native; even: native, then the Trellara
# configurations in reverse order); the target is CHECKPOINTed before each
# run.
#   trellara  trellara-applyd (apply.batch_transactions source transactions
#             per target transaction, synchronous_commit = on): timed from
#             exec until trellara.apply_checkpoint.applied_through_lsn >=
#             END (polled every 10 ms over one psql session).  That row is
#             committed with the batch, so END is then flushed on the target.
#   native    ALTER SUBSCRIPTION ENABLE (the apply worker commits each source
#             transaction with the subscription's default synchronous_commit
#             = off): timed until the origin's remote_lsn >= END *and* its
#             local_lsn <= pg_current_wal_flush_lsn() on the target, i.e.
#             every commit through END is flushed there - the same
#             durability as Trellara's.  Also recorded: "applied" (END
#             committed but maybe not flushed) and "confirmed" (the source
#             slot's confirmed_flush_lsn >= END; the apply worker reports its
#             flush position only when it wakes up, at least once a second).
# Target settings: fsync on (APPLY_BENCH_TARGET_FSYNC), autovacuum off (the
# same work in every round), shared_buffers 512MB, no checkpoint during a
# run, wal_retrieve_retry_interval 50ms (PostgreSQL 15's launcher starts
# apply workers at most once per that interval, 5 s by default: a native
# round right after another waited up to 5 s for its worker - the per-round
# line shows when the worker started); every round's database is a fresh
# copy, so every applier starts with its pages in the OS cache only.
# Printed per workload: txns/s and rows/s of every Trellara configuration
# and of native, ratio = trellara txns/s / native txns/s (native: flushed
# time; the ratios against its confirmed and applied times too), medians of
# REPEAT; then the configuration with workers 1 against native and the
# best configuration (highest ratio; its apply.workers named) against
# native, txns/s, rows/s and ratio; CPU per source transaction in microseconds: applyd + its target
# backend(s) (every backend with application_name trellara-applyd in the
# round's database) against the native apply worker, on-CPU seconds from
# /proc/PID/schedstat at the timed point, medians of REPEAT; per round the
# seconds and each process's on-CPU/waiting-for-a-CPU seconds (the rest of
# the wall time it was blocked: on its peer, I/O or fsync); applyd's
# counters, read after it exits from its metrics file
# (observability.metrics_dir/applyd.prom: the samples whose name holds
# "received", "statement" or "fold" and ends in _total) or else from its
# "applyd stopped:" or "applyd compaction:" log line ("N ... received",
# "N statements", "N ... folded"), "n/a" when neither has them; and the
# checkpoint's applied_changes; with workers > 1 also the parallel
# counters (batches overlapped, dependency waits, fall backs to one batch
# at a time: the metrics named overlapped, dependency_waits and
# serial_fallbacks, or the "applyd parallel apply:" log line).  Every target
# database is checked against the source at END afterwards: per table the
# row count and the sum of hashtext() of every row's text (all columns).
# A workload's databases, subscriptions, slots and stream are dropped when
# it is done.  At the end: one summary line per workload x configuration,
# and the total run time, with the best configuration per workload.
#
# Lag (tpcb only, the best configuration: the highest median ratio of the
# tpcb rounds).  After the tpcb rounds, with the last round's databases of
# that configuration and of native (caught up): pgbench -R RATE -T LAG_SECONDS
# on the source (RATE: 50% of native's median tpcb throughput, capped at
# 50% of what the source did unthrottled while building the backlog - it
# shares the cores with the appliers), capture + applyd running, then
# (alone) the native subscription enabled again.  A heartbeat row
# (clock_timestamp()) is inserted every 0.2 s into bench_heartbeat; the
# target is polled every 10 ms for max(id), so each heartbeat's lag is the
# time it became visible on the target minus its source timestamp (10 ms
# resolution; both clusters use the same clock).  p50, p99 (nearest rank)
# and max over the heartbeats during the load; catch-up = the lag of one
# heartbeat inserted right after pgbench ends.
#
# Time: the default run (5 workloads, 3 configurations, REPEAT 3, backlogs
# of 20 s tpcb, 15 s hotkey and 10 s each for inserts, updates and
# conflict - these write more rows per second, so their backlogs are of a
# similar size - and LAG_SECONDS 20) is meant to stay under about 20
# minutes on a 2-core machine (with 2 configurations it was about 15);
# each workload prints its own wall time.  Every extra configuration (a
# variant or an APPLY_BENCH_WORKERS value) adds a round per workload and
# REPEAT.
#
# Environment: APPLY_BENCH_WORKLOADS ("tpcb hotkey inserts updates
# conflict"), APPLY_BENCH_VARIANTS ("compaction"; also "nocompaction",
# "nocopy", "default"), APPLY_BENCH_WORKERS ("1 2 4"; 1..16 each), APPLY_BENCH_SECONDS
# (the backlog's pgbench -T for every workload; default per workload as
# above), APPLY_BENCH_SECONDS_TPCB, _HOTKEY, _INSERTS, _UPDATES, _CONFLICT
# (one workload's, over APPLY_BENCH_SECONDS), APPLY_BENCH_SCALE (tpcb's,
# 10), APPLY_BENCH_CLIENTS (4), APPLY_BENCH_REPEAT (3),
# APPLY_BENCH_UPDATES_ROWS (rows per client of the updates workload,
# default 20000 x its seconds: room for 5000 transactions per second per
# client; the bench stops, saying so, if a client ran out),
# APPLY_BENCH_LAG_SECONDS (20; 0 skips the lag measurement),
# APPLY_BENCH_LAG_RATE (tps; overrides the rule above),
# APPLY_BENCH_BATCH (apply.batch_transactions; default: applyd's, 1000),
# APPLY_BENCH_TARGET_FSYNC (on; "off" makes every flush free on the target),
# APPLY_BENCH_PERF=DIR (per workload one extra, uncounted round of the
# first configuration and of native under perf record -g: applyd, its
# target backend, the native apply worker; data and text reports in DIR,
# named after the workload),
# APPLY_BENCH_KEEP=1 keeps the directory (clusters stopped).
#
# Helpers: bench/lib-cluster.sh (the directory, the clusters, cleanup),
# bench/lib-apply.sh (polling, CPU arithmetic, counters, the lag run),
# bench/lib-apply-workloads.sh (the workloads).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
# shellcheck source=bench/lib-cluster.sh
source bench/lib-cluster.sh
bench_init apply-bench APPLY_BENCH_KEEP stop_heartbeats
# shellcheck source=bench/lib-apply.sh
source bench/lib-apply.sh

WORKLOADS=${APPLY_BENCH_WORKLOADS:-tpcb hotkey inserts updates conflict}
VARIANTS=${APPLY_BENCH_VARIANTS:-compaction}
WORKERS_LIST=${APPLY_BENCH_WORKERS:-1 2 4}
SCALE=${APPLY_BENCH_SCALE:-10}
CLIENTS=${APPLY_BENCH_CLIENTS:-4}
REPEAT=${APPLY_BENCH_REPEAT:-3}
# pgbench -T of workload W's backlog: wl_seconds W
wl_seconds() {
	local v=APPLY_BENCH_SECONDS_${1^^} d
	case $1 in tpcb) d=20 ;; hotkey) d=15 ;; *) d=10 ;; esac
	echo "${!v:-${APPLY_BENCH_SECONDS:-$d}}"
}
UPDATES_ROWS=${APPLY_BENCH_UPDATES_ROWS:-$((20000 * $(wl_seconds updates)))}
LAG_SECONDS=${APPLY_BENCH_LAG_SECONDS:-20}
LAG_RATE=${APPLY_BENCH_LAG_RATE:-}
BATCH=${APPLY_BENCH_BATCH:-}
TARGET_FSYNC=${APPLY_BENCH_TARGET_FSYNC:-on}
PERF_DIR=${APPLY_BENCH_PERF:-}
PUB=bench_pub
LAG_GOAL_MS=50 # p99
TIMEOUT_S=600  # any single wait

for prog in "$REPO/bin/trellara-capture" "$REPO/bin/trellara-applyd" "$REPO/bin/trellara-stream" "$REPO/bin/trellara-config"; do
	[[ -x $prog ]] || die "$prog missing; run make first"
done
for tool in pgbench jq; do
	command -v "$tool" >/dev/null || die "$tool not on PATH"
done
if [[ -n $PERF_DIR ]]; then
	command -v perf >/dev/null || die "APPLY_BENCH_PERF needs perf"
	mkdir -p "$PERF_DIR"
	PERF_DIR=$(cd "$PERF_DIR" && pwd)
fi
[[ $TARGET_FSYNC == on || $TARGET_FSYNC == off ]] || die "APPLY_BENCH_TARGET_FSYNC: on or off"
for n in "$(wl_seconds tpcb)" "$(wl_seconds hotkey)" "$(wl_seconds inserts)" "$(wl_seconds updates)" "$(wl_seconds conflict)" "$SCALE" "$CLIENTS" "$REPEAT" "$UPDATES_ROWS" "$LAG_SECONDS" ${LAG_RATE:+"$LAG_RATE"} ${BATCH:+"$BATCH"}; do
	[[ $n =~ ^[0-9]+$ ]] || die "not a whole number: \"$n\" (APPLY_BENCH_SECONDS[_W], _SCALE, _CLIENTS, _REPEAT, _UPDATES_ROWS, _LAG_SECONDS, _LAG_RATE, _BATCH)"
done
((REPEAT >= 1 && CLIENTS >= 1 && SCALE >= 1)) || die "APPLY_BENCH_REPEAT, _CLIENTS and _SCALE must be at least 1"
for w in tpcb hotkey inserts updates conflict; do
	(($(wl_seconds $w) >= 1)) || die "APPLY_BENCH_SECONDS, APPLY_BENCH_SECONDS_${w^^}: at least 1"
done
for w in $WORKLOADS; do
	case $w in
	tpcb | hotkey | inserts | updates | conflict) ;;
	*) die "APPLY_BENCH_WORKLOADS: unknown workload \"$w\" (tpcb hotkey inserts updates conflict)" ;;
	esac
done
[[ -n ${WORKLOADS// /} ]] || die "APPLY_BENCH_WORKLOADS is empty"
# the Trellara configurations: VARIANT or VARIANT_wN
CONFIGS=()
for v in $VARIANTS; do
	case $v in
	compaction | nocompaction | nocopy | default) ;;
	*) die "APPLY_BENCH_VARIANTS: unknown variant \"$v\" (compaction nocompaction nocopy default)" ;;
	esac
	for n in $WORKERS_LIST; do
		[[ $n =~ ^[1-9][0-9]*$ ]] || die "APPLY_BENCH_WORKERS: not a positive whole number: \"$n\""
		if ((n == 1)); then c=$v; else c=${v}_w$n; fi
		[[ " ${CONFIGS[*]} " == *" $c "* ]] && die "configuration \"$c\" named twice (APPLY_BENCH_VARIANTS, APPLY_BENCH_WORKERS)"
		CONFIGS+=("$c")
	done
done
((${#CONFIGS[@]} > 0)) || die "APPLY_BENCH_VARIANTS or APPLY_BENCH_WORKERS is empty"
trellara_pg_check_bindir "$PG_BINDIR"
PSQL=$(trellara_pg_psql_bin)

# ---------------------------------------------------------------- directory
#
# bench/lib-cluster.sh: the directory in the bats harness layout (owner
# file, watchdog, source/ and target/): if this script is SIGKILLed, the
# watchdog, or the next bats run's reaper, stops both clusters and removes
# it; cleanup ends every process in BG, the heartbeats first.
stop_heartbeats() { [[ -d $FDIR/bench ]] && touch "$FDIR/bench/hb.stop"; }
bench_dir
# SRC_CONN and SRC_URL: the current workload's source database (postgres
# until the first)

# Every configuration's flow file, validated before anything starts (the
# same schema as applyd's): a build that does not know apply.compaction or
# apply.workers, or a workers value out of its range, stops here.
write_flow_base() { # FILE DB GROUP: the flow for the current workload
	local t
	cat >"$1" <<EOF
config_version: 2
environment: bench
source:
  id: bench
  database_url: "$SRC_URL"
  publication: $PUB
  slot: ${W_SLOT:-trellara}
  stream_spill_dir: "$WORK/spill"
  pgoutput:
    protocol_version: 2
    streaming: true
dataset:
  id: ${W:-bench}
  mode: strict_transaction_order
  tables:
EOF
	for t in "${W_TABLES[@]}" bench_heartbeat; do
		echo "    - {schema: public, name: $t}" >>"$1"
	done
	cat >>"$1" <<EOF
stream:
  kind: local
  path: "${W_STREAM:-$WORK/stream}"
  durability: fsync
  min_free_bytes: 268435456
  protected_groups: [${W_GROUPS_YAML:-applyd}]
target:
  database_url: "$(bench_tgt_url "$2")"
apply:
  consumer_group: $3
EOF
	[[ -n $BATCH ]] && echo "  batch_transactions: $BATCH" >>"$1"
	return 0
}
# write_flow FILE DB GROUP CONFIG [METRICS_DIR]
write_flow() {
	local cfg=$4 variant workers=1
	variant=${cfg%_w*}
	[[ $cfg == *_w* ]] && workers=${cfg##*_w}
	write_flow_base "$1" "$2" "$3"
	case $variant in
	compaction) echo "  compaction: true" >>"$1" ;;
	nocompaction) echo "  compaction: false" >>"$1" ;;
	nocopy) printf '  compaction: true\n  copy_inserts: false\n' >>"$1" ;;
	esac
	echo "  workers: $workers" >>"$1" # always: applyd's default is not 1
	[[ -n ${5:-} ]] && printf 'observability:\n  metrics_dir: "%s"\n' "$5" >>"$1"
	return 0
}
# cfg_workers CONFIG: its apply.workers
cfg_workers() { if [[ $1 == *_w* ]]; then echo "${1##*_w}"; else echo 1; fi; }
W='' W_SLOT='' W_STREAM='' W_GROUPS_YAML='' W_TABLES=(pgbench_accounts)
for cfg in "${CONFIGS[@]}"; do
	write_flow "$WORK/check-$cfg.yml" check applyd "$cfg" "$WORK/metrics-check"
	if ! out=$("$REPO/bin/trellara-config" get stream.path --config "$WORK/check-$cfg.yml" 2>&1 >/dev/null); then
		echo "$out" >&2
		die "this build refuses the flow file of configuration \"$cfg\" (apply.compaction for the variants compaction/nocompaction, apply.copy_inserts for nocopy, apply.workers for APPLY_BENCH_WORKERS != 1): see the message above"
	fi
done

# ---------------------------------------------------------------- clusters

T0=$EPOCHREALTIME
bench_create source target
cat >>"$FDIR/source/postgresql.conf" <<EOF
# ---- bench/apply-bench.sh ----
logical_decoding_work_mem = '64MB'  # PostgreSQL's default
autovacuum = off              # nothing but the workload writes WAL
max_wal_size = '16GB'         # no checkpoints in the middle of a measurement
checkpoint_timeout = '1h'
max_replication_slots = 32    # a workload's: trellara + one per native round
max_wal_senders = 32
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
# PostgreSQL 15's launcher starts apply workers at most once per
# wal_retrieve_retry_interval (default 5 s): a subscription enabled right
# after another round's would wait for it, inside native's timed interval
wal_retrieve_retry_interval = '50ms'
EOF
bench_start source target

src() { bench_psql "$SRC_CONN" "$@"; }
tgt() { bench_psql "$(bench_tgt_conn "$1")" "${@:2}"; } # DB SQL...
start_poll_session

# ---------------------------------------------------------------- workloads

# shellcheck source=bench/lib-apply-workloads.sh
source bench/lib-apply-workloads.sh

# ---------------------------------------------------------------- the appliers

# run_trellara CONFIG ROUND: sets R_SECONDS R_TXNS R_CHANGES R_CPU
# R_DETAIL R_COUNTERS ("received statements folded")
run_trellara() {
	local cfg=$1 i=$2 db=${W}_$1_$2 flow=$WORK/$W/apply-$1-$2.yml log=$WORK/$W/applyd-$1-$2.log
	local mdir=$WORK/$W/metrics-$1-$2 t0 t1 pid bpids p cpu_a cpu_b
	local -a perfs=()
	write_flow "$flow" "$db" "applyd_${cfg}_$i" "$cfg" "$mdir"
	tgt "$db" -c "CHECKPOINT" >/dev/null
	poll_connect "$(bench_tgt_conn "$db")"
	t0=$EPOCHREALTIME
	"$REPO/bin/trellara-applyd" --config "$flow" 2>"$log" &
	pid=$!
	BG[applyd]=$pid
	WATCH_PID=$pid WATCH_WHAT="trellara-applyd ($W, $cfg, round $i)" WATCH_LOG=$log
	poll_until "SELECT to_regclass('trellara.apply_checkpoint') IS NOT NULL" 60
	if [[ -n $PERF_DIR && $i == "$ROUNDS" ]]; then
		poll_until "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE application_name = 'trellara-applyd' AND datname = '$db')" 60
		poll_query "SELECT min(pid) FROM pg_stat_activity WHERE application_name = 'trellara-applyd' AND datname = '$db'"
		perf record -q -F 999 -g -o "$PERF_DIR/$W-applyd.data" -p "$pid" 2>"$PERF_DIR/$W-perf-applyd.err" &
		perfs+=($!)
		BG[perf1]=$!
		perf record -q -F 999 -g -o "$PERF_DIR/$W-target-backend.data" -p "$POLL_ANSWER" 2>"$PERF_DIR/$W-perf-backend.err" &
		perfs+=($!)
		BG[perf2]=$!
	fi
	poll_until "SELECT coalesce(bool_and(applied_through_lsn >= '$END'), false) FROM trellara.apply_checkpoint" "$TIMEOUT_S"
	t1=$EPOCHREALTIME
	for p in "${perfs[@]}"; do kill -INT "$p" 2>/dev/null; done
	for p in "${perfs[@]}"; do wait "$p" || true; done
	BG[perf1]='' BG[perf2]=''
	poll_query "SELECT coalesce(string_agg(pid::text, ' '), '') FROM pg_stat_activity WHERE application_name = 'trellara-applyd' AND datname = '$db'"
	bpids=$POLL_ANSWER
	cpu_a=$(cpu_secs "$pid")
	# shellcheck disable=SC2086 # a list of pids
	cpu_b=$(cpu_secs $bpids)
	R_CPU=$(awk -v a="$cpu_a" -v b="$cpu_b" 'BEGIN{printf "%.6f", a + b}')
	R_DETAIL="applyd $(cpu_of "$pid")"
	for p in $bpids; do R_DETAIL+=", backend $(cpu_of "$p")"; done
	poll_query "SELECT applied_transactions || ' ' || applied_changes FROM trellara.apply_checkpoint"
	read -r R_TXNS R_CHANGES <<<"$POLL_ANSWER"
	WATCH_PID=''
	bench_term applyd "trellara-applyd ($W, $cfg, round $i)" "$log"
	R_SECONDS=$(secs "$t0" "$t1")
	R_COUNTERS="$(counter received 'changes? received|received' "$mdir/applyd.prom" "$log")"
	R_COUNTERS+=" $(counter statement 'statements?' "$mdir/applyd.prom" "$log")"
	R_COUNTERS+=" $(counter fold '(changes? )?folded' "$mdir/applyd.prom" "$log")"
	R_PARALLEL=''
	if (($(cfg_workers "$cfg") > 1)); then
		R_PARALLEL="$(counter overlapped 'batches committed while an earlier one was in flight' "$mdir/applyd.prom" "$log")"
		R_PARALLEL+=" $(counter dependency_waits 'waits for an earlier batch holding a key' "$mdir/applyd.prom" "$log")"
		R_PARALLEL+=" $(counter serial_fallbacks 'fall backs to one batch at a time' "$mdir/applyd.prom" "$log")"
	fi
}

# run_native ROUND: sets R_SECONDS (flushed) R_APPLIED_S R_CONFIRMED_S
# R_CPU (the apply worker's) R_DETAIL
run_native() {
	local i=$1 db=${W}_native_$1 sub=${W}_native_$1 t0 t_applied='' t_flushed t_confirmed t_started='' oid wpid spid
	tgt "$db" -c "CHECKPOINT" >/dev/null
	poll_connect "$(bench_tgt_conn "$db")"
	poll_query "SELECT oid FROM pg_subscription WHERE subname = '$sub'"
	oid=$POLL_ANSWER
	local q="SELECT format('%s %s %s', coalesce(bool_and(remote_lsn >= '$END'), false),
		coalesce(bool_and(remote_lsn >= '$END' AND local_lsn <= pg_current_wal_flush_lsn()), false),
		EXISTS (SELECT FROM pg_stat_subscription WHERE subname = '$sub' AND relid IS NULL AND pid IS NOT NULL))
		FROM pg_replication_origin_status WHERE external_id = 'pg_$oid'"
	local perf=''
	t0=$EPOCHREALTIME
	tgt "$db" -c "ALTER SUBSCRIPTION $sub ENABLE" >/dev/null
	if [[ -n $PERF_DIR && $i == "$ROUNDS" ]]; then
		poll_until "SELECT EXISTS (SELECT FROM pg_stat_subscription WHERE subname = '$sub' AND relid IS NULL AND pid IS NOT NULL)" 60
		poll_query "SELECT pid FROM pg_stat_subscription WHERE subname = '$sub' AND relid IS NULL"
		perf record -q -F 999 -g -o "$PERF_DIR/$W-native-apply-worker.data" -p "$POLL_ANSWER" 2>"$PERF_DIR/$W-perf-native.err" &
		perf=$!
		BG[perf1]=$perf
	fi
	while :; do
		poll_query "$q"
		[[ -z $t_started && $POLL_ANSWER == *" t" ]] && t_started=$EPOCHREALTIME
		case ${POLL_ANSWER% [tf]} in
		"t t") [[ -n $t_applied ]] || t_applied=$EPOCHREALTIME; t_flushed=$EPOCHREALTIME; break ;;
		"t f") [[ -n $t_applied ]] || t_applied=$EPOCHREALTIME ;;
		"f f") ;;
		*) die "poll: unexpected answer \"$POLL_ANSWER\" to: $q" ;;
		esac
		elapsed_gt "$t0" "$TIMEOUT_S" && die "$sub: timed out"
		sleep 0.01
	done
	if [[ -n $perf ]]; then
		kill -INT "$perf" 2>/dev/null
		wait "$perf" || true
		BG[perf1]=''
	fi
	poll_query "SELECT pid FROM pg_stat_subscription WHERE subname = '$sub' AND relid IS NULL"
	wpid=$POLL_ANSWER
	R_CPU=$(cpu_secs "$wpid")
	R_DETAIL="worker started after $(secs "$t0" "${t_started:-$EPOCHREALTIME}") s, apply worker $(cpu_of "$wpid")"
	poll_connect "$SRC_CONN"
	poll_until "SELECT coalesce((SELECT confirmed_flush_lsn >= '$END' FROM pg_replication_slots WHERE slot_name = '$sub'), false)" 60
	t_confirmed=$EPOCHREALTIME
	poll_query "SELECT active_pid FROM pg_replication_slots WHERE slot_name = '$sub'"
	spid=$POLL_ANSWER
	R_DETAIL+=", walsender $(cpu_of "$spid")"
	tgt "$db" -c "ALTER SUBSCRIPTION $sub DISABLE" >/dev/null
	R_SECONDS=$(secs "$t0" "$t_flushed")
	R_APPLIED_S=$(secs "$t0" "$t_applied")
	R_CONFIRMED_S=$(secs "$t0" "$t_confirmed")
}

# results, by "WORKLOAD CONFIG" (native: CONFIG = native)
declare -A RS=() RCPU=() RDETAIL=() RCNT=() RCHG=() RPAR=() NAS=() NCS=() WTXNS=() WROWS=() WGOAL=() WBEST=() WLINE=()
PERF_DETAIL=''
trellara_round() { # CONFIG ROUND
	local k="$W $1"
	run_trellara "$1" "$2"
	[[ $R_TXNS == "$TXNS" ]] || die "$W, $1, round $2: applyd applied $R_TXNS transactions, the backlog holds $TXNS"
	if [[ -n $PERF_DIR && $2 == "$ROUNDS" ]]; then
		PERF_DETAIL="  profiled $1 round (perf record -g, reports in $PERF_DIR/$W-*): $R_SECONDS ($R_DETAIL)"
		return
	fi
	RS[$k]+="$R_SECONDS " RCPU[$k]+="$R_CPU "
	RDETAIL[$k]+=" $R_SECONDS ($R_DETAIL)"
	RCNT[$k]=$R_COUNTERS RCHG[$k]=$R_CHANGES RPAR[$k]=$R_PARALLEL
}
native_round() { # ROUND
	local k="$W native"
	run_native "$1"
	if [[ -n $PERF_DIR && $1 == "$ROUNDS" ]]; then
		PERF_DETAIL+="; native $R_SECONDS ($R_DETAIL)"
		return
	fi
	RS[$k]+="$R_SECONDS " RCPU[$k]+="$R_CPU " NAS[$k]+="$R_APPLIED_S " NCS[$k]+="$R_CONFIRMED_S "
	RDETAIL[$k]+=" $R_SECONDS (applied $R_APPLIED_S, confirmed $R_CONFIRMED_S; $R_DETAIL)"
}

ROUNDS=$REPEAT
[[ -n $PERF_DIR ]] && ROUNDS=$((REPEAT + 1)) # the last one is the profiled one
SUB_USER=$(id -un)                              # the clusters' bootstrap superuser
HEARTBEAT="CREATE TABLE bench_heartbeat (id bigserial PRIMARY KEY, ts timestamptz NOT NULL)"
TPCB_NATIVE_TPS='' TPCB_BACKLOG_TPS=''

echo "== apply ($(date -u +%Y-%m-%dT%H:%M:%SZ), trellara $(git -C "$REPO" describe --always --dirty 2>/dev/null || echo '?'), $(nproc) cores, PostgreSQL $(trellara_pg_version | cut -d' ' -f1), target fsync $TARGET_FSYNC, source fsync off, load average $(cut -d' ' -f1-3 /proc/loadavg))"
echo "workloads: $WORKLOADS; trellara configurations: ${CONFIGS[*]}; pgbench -c $CLIENTS -j 2 per backlog; medians of $REPEAT rounds"

# run_workload W: everything for one workload, its lines printed
run_workload() {
	local w0=$EPOCHREALTIME i j cfg db dbs=() k p groups='' mt mn
	wl_define "$1"
	for ((i = 1; i <= ROUNDS; i++)); do
		for cfg in "${CONFIGS[@]}"; do groups+="applyd_${cfg}_$i, "; done
	done
	W_GROUPS_YAML=${groups%, }
	src -c "CREATE DATABASE w_$W" >/dev/null
	SRC_CONN=$(bench_src_conn "w_$W") SRC_URL=$(bench_src_url "w_$W")
	tgt postgres -c "CREATE DATABASE tmpl_$W" >/dev/null
	wl_init "$SRC_URL" >"$WORK/$W/init-source.log" 2>&1 &
	p=$!
	wl_init "$(bench_tgt_url "tmpl_$W")" >"$WORK/$W/init-target.log" 2>&1 &
	bench_wait_all "$p" $! || { cat "$WORK/$W"/init-*.log >&2; die "$W: creating the tables failed"; }
	local tables
	tables=$(printf '%s, ' "${W_TABLES[@]}")
	src -c "$HEARTBEAT" \
		-c "CREATE PUBLICATION $PUB FOR TABLE ${tables}bench_heartbeat" \
		-c "SELECT pg_create_logical_replication_slot('$W_SLOT', 'pgoutput')" \
		-c "CHECKPOINT" >/dev/null
	tgt "tmpl_$W" -c "$HEARTBEAT" -c "VACUUM ANALYZE" >/dev/null
	for ((i = 1; i <= ROUNDS; i++)); do
		for cfg in "${CONFIGS[@]}" native; do
			dbs+=(-c "CREATE DATABASE ${W}_${cfg}_$i TEMPLATE tmpl_$W STRATEGY file_copy")
		done
	done
	tgt postgres "${dbs[@]}" >/dev/null
	for ((i = 1; i <= ROUNDS; i++)); do
		tgt "${W}_native_$i" -c "SET client_min_messages = warning" -c "CREATE SUBSCRIPTION ${W}_native_$i CONNECTION '$SRC_CONN user=$SUB_USER' PUBLICATION $PUB
			WITH (enabled = false, create_slot = true, slot_name = '${W}_native_$i', copy_data = false)" >/dev/null
	done

	# the backlog
	pgbench -n -c "$CLIENTS" -j 2 -T "$(wl_seconds "$W")" "${W_PGBENCH[@]}" -d "$SRC_URL" >"$WORK/$W/pgbench.log" 2>&1 ||
		{ cat "$WORK/$W/pgbench.log" >&2; die "$W: pgbench failed"; }
	END=$(src -c "INSERT INTO bench_heartbeat (ts) VALUES (clock_timestamp())" -c "SELECT pg_current_wal_insert_lsn()")
	local n tps
	n=$(awk '/number of transactions actually processed/ {print $NF}' "$WORK/$W/pgbench.log")
	n=${n%%/*}
	tps=$(grep -o 'tps = [0-9.]*' "$WORK/$W/pgbench.log" | head -1 | awk '{printf "%.0f", $3}')
	[[ $n =~ ^[0-9]+$ ]] || die "$W: cannot read the transaction count from pgbench's log"
	wl_check_source "$n"
	TXNS=$((n + 1))                # + the marker
	ROWS=$((n * W_CHANGES + 1))
	WTXNS[$W]=$TXNS WROWS[$W]=$ROWS WGOAL[$W]=$W_GOAL
	[[ $W == tpcb ]] && TPCB_BACKLOG_TPS=$tps
	local source_print
	source_print=$(src -c "$(fingerprint)")

	# capture the backlog into the stream (not part of the measurement)
	write_flow_base "$WORK/$W/capture.yml" "${W}_${CONFIGS[0]}_1" "applyd_${CONFIGS[0]}_1"
	local t0 capture_s stream_mb
	t0=$EPOCHREALTIME
	"$REPO/bin/trellara-capture" --config "$WORK/$W/capture.yml" --start-now 2>"$WORK/$W/capture-backlog.log" &
	BG[capture]=$!
	WATCH_PID=${BG[capture]} WATCH_WHAT="trellara-capture ($W)" WATCH_LOG=$WORK/$W/capture-backlog.log
	poll_connect "$SRC_CONN"
	poll_until "SELECT coalesce((SELECT confirmed_flush_lsn >= '$END' FROM pg_replication_slots WHERE slot_name = '$W_SLOT'), false)" "$TIMEOUT_S"
	WATCH_PID=''
	capture_s=$(secs "$t0" "$EPOCHREALTIME")
	bench_term capture "trellara-capture ($W)" "$WORK/$W/capture-backlog.log"
	stream_mb=$("$REPO/bin/trellara-stream" inspect-local --config "$WORK/$W/capture.yml" --format json |
		jq -r '.bytes / 1e6 | floor')

	# the rounds
	PERF_DETAIL=''
	for ((i = 1; i <= ROUNDS; i++)); do
		if [[ -n $PERF_DIR && $i == "$ROUNDS" ]]; then
			trellara_round "${CONFIGS[0]}" "$i"
			native_round "$i"
		elif ((i % 2)); then
			for cfg in "${CONFIGS[@]}"; do trellara_round "$cfg" "$i"; done
			native_round "$i"
		else
			native_round "$i"
			for ((j = ${#CONFIGS[@]} - 1; j >= 0; j--)); do trellara_round "${CONFIGS[j]}" "$i"; done
		fi
	done
	if [[ -n $PERF_DIR ]]; then
		for f in applyd target-backend native-apply-worker; do
			perf report -i "$PERF_DIR/$W-$f.data" --no-children --sort dso,symbol --stdio -g none 2>/dev/null |
				grep -v '^#' | grep -v '^$' | head -60 >"$PERF_DIR/$W-$f.self.txt" || true
			perf report -i "$PERF_DIR/$W-$f.data" --children --sort symbol --stdio -g none 2>/dev/null |
				grep -v '^#' | grep -v '^$' | head -150 >"$PERF_DIR/$W-$f.children.txt" || true
		done
	fi

	# every target database holds what the source held at END
	for ((i = 1; i <= ROUNDS; i++)); do
		for cfg in "${CONFIGS[@]}" native; do
			[[ -n $PERF_DIR && $i == "$ROUNDS" && $cfg != native && $cfg != "${CONFIGS[0]}" ]] && continue
			db=${W}_${cfg}_$i
			p=$(tgt "$db" -c "$(fingerprint)")
			[[ $p == "$source_print" ]] || die "$db differs from the source at END: $p, source $source_print"
		done
	done

	# its lines
	mn=$(median "${RS["$W native"]}")
	local n_tps nrat
	n_tps=$(per_s "$TXNS" "$mn")
	[[ $W == tpcb ]] && TPCB_NATIVE_TPS=$n_tps
	echo
	echo "-- $W: $W_DESC; pgbench -c $CLIENTS -j 2 -T $(wl_seconds "$W"), no consumer attached ($tps tps):" \
		"$n + 1 marker = $TXNS transactions, $ROWS rows (rows = pgbench's transactions x $W_CHANGES + 1, checked on the source);" \
		"trellara-capture put it in the stream in $capture_s s ($stream_mb MB; not measured below)"
	printf '%-16s %9s %9s %10s %7s %10s  %s\n' applier seconds txns/s rows/s ratio "CPU us/txn" "applyd counters: received statements folded; checkpoint applied_changes"
	for cfg in "${CONFIGS[@]}"; do
		k="$W $cfg"
		mt=$(median "${RS[$k]}")
		read -r -a cnt <<<"${RCNT[$k]}"
		printf '%-16s %9.2f %9d %10d %7.2f %10s  %s %s %s; %s\n' "$cfg" "$mt" "$(per_s "$TXNS" "$mt")" "$(per_s "$ROWS" "$mt")" \
			"$(awk -v t="$mt" -v n="$mn" 'BEGIN{printf "%.2f", n / t}')" "$(us_per "$(median "${RCPU[$k]}")" "$TXNS")" \
			"${cnt[0]}" "${cnt[1]}" "${cnt[2]}" "${RCHG[$k]}$([[ ${RCHG[$k]} == "$ROWS" ]] || echo " (not the backlog's $ROWS rows)")"
	done
	printf '%-16s %9.2f %9d %10d %7s %10s  %s\n' native "$mn" "$n_tps" "$(per_s "$ROWS" "$mn")" 1.00 \
		"$(us_per "$(median "${RCPU["$W native"]}")" "$TXNS")" "(apply worker only)"
	nrat="native's source-confirmed time (confirmed_flush_lsn) $(f3 "$(median "${NCS["$W native"]}")") s, unflushed applied time $(f3 "$(median "${NAS["$W native"]}")") s"
	echo "ratio = trellara txns/s / native txns/s (native timed to the WAL flush covering END; $nrat);" \
		"trellara: synchronous_commit=on, one target commit per ${BATCH:-1000} source txns; CPU: applyd + target backend(s) / native apply worker, on-CPU s per source transaction"
	# workers 1 and the best configuration against native
	local one='' best='' best_r='' r line
	for cfg in "${CONFIGS[@]}"; do
		r=$(awk -v t="$(median "${RS["$W $cfg"]}")" -v n="$mn" 'BEGIN{printf "%.2f", n / t}')
		[[ -z $one && $(cfg_workers "$cfg") == 1 ]] && one=$cfg
		if [[ -z $best_r ]] || awk -v r="$r" -v b="$best_r" 'BEGIN{exit !(r > b)}'; then
			best=$cfg best_r=$r
		fi
	done
	WBEST[$W]=$best
	line=''
	for cfg in $one $best; do
		mt=$(median "${RS["$W $cfg"]}")
		[[ -n $line ]] && line+="; best: "
		line+="workers $(cfg_workers "$cfg") ($cfg) $(per_s "$TXNS" "$mt") txns/s, $(per_s "$ROWS" "$mt") rows/s,"
		line+=" ratio $(awk -v t="$mt" -v n="$mn" 'BEGIN{printf "%.2f", n / t}')"
	done
	[[ -z $one ]] && line="best: $line"
	line+=" (native $n_tps txns/s, $(per_s "$ROWS" "$mn") rows/s)"
	WLINE[$W]=$line
	echo "$W: $line"
	for cfg in "${CONFIGS[@]}"; do
		[[ -n ${RPAR["$W $cfg"]:-} ]] || continue
		read -r -a cnt <<<"${RPAR["$W $cfg"]}"
		echo "  $cfg parallel counters (last round): ${cnt[0]} batches overlapped, ${cnt[1]} dependency waits, ${cnt[2]} fall backs to one batch at a time"
	done
	echo "per round, seconds (process: on-CPU/waiting-for-a-CPU s):"
	for cfg in "${CONFIGS[@]}" native; do echo "  $cfg${RDETAIL["$W $cfg"]}"; done
	[[ -n $PERF_DETAIL ]] && echo "$PERF_DETAIL"
	echo "every target database checked equal to the source at END (per table: row count and hash sum of every column of $(printf '%s ' "${W_TABLES[@]}")bench_heartbeat)"

	if [[ $W == tpcb ]] && ((LAG_SECONDS > 0)); then
		measure_lag
	fi

	# drop what the workload leaves: its subscriptions (and their slots),
	# its slot, databases and stream; a walsender may outlive its consumer
	# for a moment
	poll_connect "$SRC_CONN"
	poll_until "SELECT NOT EXISTS (SELECT FROM pg_replication_slots WHERE database = current_database() AND active)" 60
	for ((i = 1; i <= ROUNDS; i++)); do
		tgt "${W}_native_$i" -c "SET client_min_messages = warning" -c "DROP SUBSCRIPTION ${W}_native_$i" >/dev/null
	done
	src -c "SELECT pg_drop_replication_slot('$W_SLOT')" >/dev/null
	poll_connect "$(bench_tgt_conn postgres)"
	dbs=()
	for ((i = 1; i <= ROUNDS; i++)); do
		for cfg in "${CONFIGS[@]}" native; do dbs+=(-c "DROP DATABASE ${W}_${cfg}_$i WITH (FORCE)"); done
	done
	tgt postgres "${dbs[@]}" -c "DROP DATABASE tmpl_$W" >/dev/null
	rm -rf "$W_STREAM" "$WORK/spill"
	echo "($W: $(awk -v a="$w0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.0f", b - a}') s)"
}

# ---------------------------------------------------------------- lag

LAG_LINES=()
measure_lag() {
	local why p cfg=${WBEST[$W]:-${CONFIGS[0]}} R=$REPEAT
	if [[ -z $LAG_RATE ]]; then
		LAG_RATE=$(awk -v n="$TPCB_NATIVE_TPS" -v s="$TPCB_BACKLOG_TPS" 'BEGIN{r = n / 2; c = s / 2; printf "%d", r < c ? r : c}')
		why="min(50% of native's $TPCB_NATIVE_TPS txns/s, 50% of the source's unthrottled $TPCB_BACKLOG_TPS tps)"
	else
		why="APPLY_BENCH_LAG_RATE"
	fi
	# trellara: capture (same stream and slot) + applyd, the last measured
	# round's database and group (caught up to END)
	"$REPO/bin/trellara-capture" --config "$WORK/$W/capture.yml" --start-now 2>"$WORK/capture-lag.log" &
	BG[capture]=$!
	write_flow "$WORK/apply-lag.yml" "${W}_${cfg}_$R" "applyd_${cfg}_$R" "$cfg"
	"$REPO/bin/trellara-applyd" --config "$WORK/apply-lag.yml" 2>"$WORK/applyd-lag.log" &
	BG[applyd]=$!
	WATCH_PID=${BG[applyd]} WATCH_WHAT="trellara-applyd (lag run)" WATCH_LOG=$WORK/applyd-lag.log
	lag_run trellara "${W}_${cfg}_$R"
	WATCH_PID=''
	local -a tl=("$L_N" "$L_P50" "$L_P99" "$L_MAX" "$L_CATCHUP" "$L_TPS" "$L_READY")
	for p in applyd capture; do
		bench_term "$p" "trellara-$p" "$WORK/$p-lag.log"
	done
	# native: the subscription again; it first catches up on Trellara's run
	tgt "${W}_native_$R" -c "ALTER SUBSCRIPTION ${W}_native_$R ENABLE" >/dev/null
	lag_run native "${W}_native_$R"
	local -a nl=("$L_N" "$L_P50" "$L_P99" "$L_MAX" "$L_CATCHUP" "$L_TPS" "$L_READY")
	tgt "${W}_native_$R" -c "ALTER SUBSCRIPTION ${W}_native_$R DISABLE" >/dev/null

	LAG_LINES+=("lag (tpcb, trellara $cfg: the best configuration, workers $(cfg_workers "$cfg")): pgbench -R $LAG_RATE -T $LAG_SECONDS (rate = $why), heartbeat every 0.2 s, target polled every 10 ms")
	LAG_LINES+=("$(printf '%-16s %9s %8s %8s %8s %8s %12s' applier "load tps" samples "p50 ms" "p99 ms" "max ms" "catch-up ms")")
	LAG_LINES+=("$(printf '%-16s %9s %8s %8s %8s %8s %12s' "$cfg" "${tl[5]}" "${tl[0]}" "${tl[1]}" "${tl[2]}" "${tl[3]}" "${tl[4]}")")
	LAG_LINES+=("$(printf '%-16s %9s %8s %8s %8s %8s %12s' native "${nl[5]}" "${nl[0]}" "${nl[1]}" "${nl[2]}" "${nl[3]}" "${nl[4]}")")
	LAG_LINES+=("goal: trellara p99 < $LAG_GOAL_MS ms: $(awk -v v="${tl[2]}" -v g="$LAG_GOAL_MS" 'BEGIN{print (v < g) ? "met" : "NOT met"}')" \
		"(trellara lag = source commit -> visible and flushed on the target through capture's fsynced stream and applyd;" \
		"native = visible, its flush may follow by up to wal_writer_delay; native first caught up on the trellara run in ${nl[6]} s)")
	printf '%s\n' "${LAG_LINES[@]}"
}

for w in $WORKLOADS; do
	run_workload "$w"
done

# ---------------------------------------------------------------- summary

echo
echo "== apply summary (medians of $REPEAT; ratio = trellara txns/s / native txns/s at the same durability;" \
	"goals: tpcb >= 2.0 (1.5 to resolve), hotkey inserts updates >= 1.5, every ratio >= 1.0; CPU in us per source transaction)"
printf '%-9s %-16s %8s %9s %9s %10s %9s %6s %-8s %9s %9s %11s %11s %11s\n' workload trellara txns rows txns/s rows/s native/s ratio goal \
	"cpu trel" "cpu nat" received statements folded
BEST=''
for w in $WORKLOADS; do
	best_ratio='' best_cfg=''
	mn=$(median "${RS["$w native"]}")
	goal=${WGOAL[$w]}
	ncpu=$(us_per "$(median "${RCPU["$w native"]}")" "${WTXNS[$w]}")
	for cfg in "${CONFIGS[@]}"; do
		mt=$(median "${RS["$w $cfg"]}")
		ratio=$(awk -v t="$mt" -v n="$mn" 'BEGIN{printf "%.2f", n / t}')
		verdict=$(awk -v r="$ratio" -v g="$goal" 'BEGIN{print (r < 1.0) ? "BELOW1" : (r >= g) ? "met" : "not met"}')
		read -r -a cnt <<<"${RCNT["$w $cfg"]}"
		printf '%-9s %-16s %8d %9d %9d %10d %9d %6.2f %-8s %9s %9s %11s %11s %11s\n' "$w" "$cfg" "${WTXNS[$w]}" "${WROWS[$w]}" \
			"$(per_s "${WTXNS[$w]}" "$mt")" "$(per_s "${WROWS[$w]}" "$mt")" "$(per_s "${WTXNS[$w]}" "$mn")" "$ratio" "$verdict" \
			"$(us_per "$(median "${RCPU["$w $cfg"]}")" "${WTXNS[$w]}")" "$ncpu" "${cnt[0]}" "${cnt[1]}" "${cnt[2]}"
		if [[ -z $best_ratio ]] || awk -v r="$ratio" -v b="$best_ratio" 'BEGIN{exit !(r > b)}'; then
			best_ratio=$ratio best_cfg=$cfg
		fi
	done
	BEST+="$w $best_cfg $best_ratio, "
done
echo "best configuration per workload (ratio): ${BEST%, }"
for w in $WORKLOADS; do echo "$w: ${WLINE[$w]}"; done
((${#LAG_LINES[@]} > 0)) && printf '%s\n' "${LAG_LINES[@]}"
echo "(total $(awk -v a="$T0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.0f", b - a}') s)"
