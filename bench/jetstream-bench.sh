#!/usr/bin/env bash
# jetstream-bench.sh - capture and apply through a NATS JetStream stream
# (stream.kind jetstream, a 3-node cluster on loopback, replicas 3) against
# the same through the local stream, on the same backlog, measured in the
# same run; and what bounds the JetStream figures.
#
#   bench/jetstream-bench.sh            (make bench runs it)
#
# Method.  Two throwaway PostgreSQL clusters (tests/bats/helpers/pg.bash:
# copies of the cached initdb template, unix sockets only): a source
# (fsync off) and a target (fsync on); and a 3-node JetStream cluster
# (tests/bats/helpers/nats.bash: nats-server -js on 127.0.0.1, file store
# under this run's directory, on the same file system as the local
# streams).  The source gets pgbench -i at scale SCALE and publication
# bench_pub on the four pgbench tables; the target a template database
# initialised the same way (pgbench -i is deterministic: source and
# template start identical) and, per stream kind and round, a database
# copied from it (jetstream_I, local_I).  Then the slots of every round
# I, jetstream_I and local_I (pgoutput), are created BEFORE the workload,
# so every consumer gets exactly the same backlog:
#   pgbench -n -c CLIENTS -j 2 -T SECONDS, built-in tpcb-like, no consumer
#   attached, then a one-row marker transaction; END =
#   pg_current_wal_insert_lsn() right after its commit, in the same
#   session (autovacuum off: nothing else writes WAL).  txns = pgbench's
#   transaction count + 1, checked against what capture and applyd count.
# Each round, every consumer runs alone, alternating which kind goes first
# (odd rounds: jetstream, then local; even rounds: local, then jetstream):
#   capture  trellara-capture --start-now on the kind's slot into a fresh
#            stream (jetstream: stream BENCH_JS_I, created beforehand with
#            trellara stream init, replicas 3; local: a new directory,
#            durability fsync); timed from exec until the slot's
#            confirmed_flush_lsn >= END (polled every 10 ms over one psql
#            session): capture confirms only what its stream stored (a
#            JetStream PubAck from the stream's quorum, an fdatasync)
#   apply    trellara-applyd (applyd's defaults: no apply key but the
#            consumer group) reading the stream that capture just wrote
#            into its own target database; timed from exec until
#            trellara.apply_checkpoint.applied_through_lsn >= END there
#            (the row is committed with the batch: END is then durable on
#            the target).  No snapshot: the target's rows are already the
#            source's at the slots' creation.  Each target database is then
#            compared with the source at END (per table: row count and the
#            sum of hashtext() of every row).
# ratio = jetstream txns/s / local txns/s (= local seconds / jetstream
# seconds: the same transactions); medians of REPEAT; goal >= 0.5 for
# each, reported (a ratio below it does not fail the script).
#
# What bounds the figures.  For every timed interval: each process's CPU
# from /proc (on-CPU seconds: utime + stime of /proc/PID/stat, every
# thread; waiting for a CPU: the sum over /proc/PID/task/*/schedstat)
# for the consumer (capture or applyd), its PostgreSQL side (capture's
# walsender; applyd's target backends, application_name trellara-applyd),
# and each nats-server; the consumer's main thread alone (/proc/PID/
# schedstat: on-CPU, waiting for a CPU, and blocked = the rest of the
# wall time); and the machine's busy CPU from /proc/stat (every process,
# others' included).  Printed as cores busy on average (CPU seconds /
# wall seconds) beside the machine's core count, and as CPU microseconds
# per transaction.  For capture on JetStream also the batch arithmetic:
# capture publishes a batch of at most stream.max_batch_transactions
# transactions (JetStream's publish window, 256 messages without a
# PubAck, holds a whole batch) and waits for every PubAck before it reads
# on: one PubAck round trip per batch; its main thread's blocked time per
# batch against the local stream's (the walsender's side is the same);
# and capture.prom's trellara_capture_broker_publish_seconds (first
# publish to last PubAck of the last stored batch, written once a second),
# sampled during the run.  For applyd, every change of
# apply_checkpoint.applied_transactions is a commit seen: the longest time
# between two (exec to the first included) shows a stall.  The "bound"
# lines apply the rule printed above them to the JetStream medians.
#
# Known limit: a message holds at most the servers' max_payload (1 MB by
# default): capture packs a large transaction into chunk frames that fit
# (max_payload less 4 KiB for headers), but a single change larger than
# that stops capture (exit 73).  The workload is pgbench's small
# transactions only: no big transaction (bench/capture-bench.sh's 1M-row
# one is not run on JetStream).
#
# Environment: JETSTREAM_BENCH_SECONDS (pgbench -T, default 15),
# JETSTREAM_BENCH_REPEAT (rounds, default 1; each round has its own slots,
# streams and target databases), JETSTREAM_BENCH_KEEP=1 keeps the
# directory (clusters stopped; the NATS store is removed, its server logs
# are copied into bench/).  With the defaults the whole run takes a few
# minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
# shellcheck source=bench/lib-cluster.sh
source bench/lib-cluster.sh
bench_init jetstream-bench JETSTREAM_BENCH_KEEP stop_nats
# shellcheck source=tests/bats/helpers/wait.bash
source tests/bats/helpers/wait.bash
# shellcheck source=tests/bats/helpers/nats.bash
source tests/bats/helpers/nats.bash
# the poll session, median, secs, per_s
# shellcheck source=bench/lib-apply.sh
source bench/lib-apply.sh

SECONDS_PGBENCH=${JETSTREAM_BENCH_SECONDS:-15}
REPEAT=${JETSTREAM_BENCH_REPEAT:-1}
SCALE=10
CLIENTS=4
PUB=bench_pub
GOAL=0.5
TIMEOUT_S=600 # any single wait
HZ=$(getconf CLK_TCK)
NCORES=$(nproc)
TABLES=(pgbench_accounts pgbench_branches pgbench_tellers pgbench_history)
KINDS=(jetstream local)

for n in "$SECONDS_PGBENCH" "$REPEAT"; do
	[[ $n =~ ^[1-9][0-9]*$ ]] || die "not a positive whole number: \"$n\" (JETSTREAM_BENCH_SECONDS, JETSTREAM_BENCH_REPEAT)"
done
for prog in trellara-capture trellara-applyd trellara-stream trellara-config; do
	[[ -x $REPO/bin/$prog ]] || die "bin/$prog missing; run make first"
done
trellara_pg_check_bindir "$PG_BINDIR"
PSQL=$(trellara_pg_psql_bin)
PGBENCH=$PG_BINDIR/pgbench
[[ -x $PGBENCH ]] || PGBENCH=$(command -v pgbench) || die "needs pgbench"
for tool in jq nats-server; do
	command -v "$tool" >/dev/null || die "needs $tool (hint: scripts/install-deps.sh as root)"
done

# ---------------------------------------------------------------- directory
#
# bench/lib-cluster.sh: the directory in the bats harness layout (owner
# file, watchdog, source/ and target/): if this script is SIGKILLed, the
# watchdog (or the next bats run's reaper) stops both clusters and removes
# the directory, and nats.bash's watchdog, seeing its directory gone, kills
# the nodes.  On exit, stop_nats ends every process in BG, then the nodes.
stop_nats() {
	local n
	bench_kill_bg
	if [[ -n ${JETSTREAM_BENCH_KEEP:-} && -n ${NATS_DIR:-} && -d ${NATS_DIR:-} ]]; then
		for n in "$NATS_DIR"/n*; do cp "$n/server.log" "$FDIR/bench/nats-${n##*/}.log" 2>/dev/null; done
	fi
	trellara_nats_cluster_stop
}
bench_dir
src() { bench_psql "$SRC_CONN" "$@"; }
tgt() { bench_psql "$(bench_tgt_conn "$1")" "${@:2}"; } # DB SQL...

# ---------------------------------------------------------------- /proc
#
# proc_cpu PID: "ON_NS WAIT_NS": on-CPU time of every thread, the dead
# ones included (utime + stime of /proc/PID/stat), and the time its live
# threads were runnable but waiting for a CPU (/proc/PID/task/*/schedstat)
proc_cpu() {
	local pid=$1 line t wait=0 w
	local -a f
	if ! read -r line 2>/dev/null <"/proc/$pid/stat"; then
		echo "0 0"
		return
	fi
	read -ra f <<<"${line##*) }"
	for t in "/proc/$pid/task"/*/schedstat; do
		read -r _ w _ 2>/dev/null <"$t" && wait=$((wait + w))
	done
	echo "$(((f[11] + f[12]) * 1000000000 / HZ)) $wait"
}
# box_busy: "BUSY_TICKS ALL_TICKS" of the whole machine (/proc/stat)
box_busy() {
	local u n s i io irq sirq steal
	read -r _ u n s i io irq sirq steal _ </proc/stat
	echo "$((u + n + s + irq + sirq + steal)) $((u + n + s + i + io + irq + sirq + steal))"
}
# nats_cpu: "ON_NS WAIT_NS" of each node, n1 first, one pair per line
nats_cpu() {
	local pid
	for pid in "${NATS_PIDS[@]}"; do proc_cpu "$pid"; done
}
# prom_value FILE NAME: sets PROM_VALUE to sample NAME of a metrics file
# (empty if none); builtins only, called from the 10 ms poll loop
prom_value() {
	local l
	PROM_VALUE=''
	[[ -r $1 ]] || return 0
	while IFS= read -r l; do
		case $l in "$2 "* | "$2{"*)
			PROM_VALUE=${l##* }
			return 0
			;;
		esac
	done <"$1"
}
ns_s() { awk -v n="$1" 'BEGIN{printf "%.2f", n / 1e9}'; }
cores() { awk -v n="$1" -v s="$2" 'BEGIN{printf "%.2f", n / 1e9 / s}'; } # NS WALL_S

# ---------------------------------------------------------------- clusters

T0=$EPOCHREALTIME
bench_create source target
cat >>"$FDIR/source/postgresql.conf" <<EOF
# ---- bench/jetstream-bench.sh ----
logical_decoding_work_mem = '64MB'  # PostgreSQL's default
autovacuum = off              # nothing but the workload writes WAL
max_wal_size = '8GB'          # no checkpoints in the middle of a measurement
checkpoint_timeout = '1h'
max_replication_slots = 32
max_wal_senders = 32
EOF
cat >>"$FDIR/target/postgresql.conf" <<EOF
# ---- bench/jetstream-bench.sh ----
fsync = on                    # applyd's commits are really flushed
autovacuum = off              # the same work in every round
max_wal_size = '8GB'
checkpoint_timeout = '1h'
shared_buffers = '512MB'
EOF
bench_start source target

export BATS_FILE_TMPDIR=$FDIR # nats.bash: the store and logs in $FDIR/nats
trellara_nats_cluster_start || die "cannot start the NATS cluster"
NATS_PIDS=()
for ((i = 1; i <= NATS_NODES; i++)); do
	p1=$(_nats_pid "$i") || die "nats-server n$i is not running"
	NATS_PIDS+=("$p1")
done

start_poll_session

# the tables, then the slots, then the backlog
"$PGBENCH" -i -q -s "$SCALE" -d "$SRC_URL" >"$WORK/pgbench-init-source.log" 2>&1 &
p1=$!
tgt postgres -c "CREATE DATABASE tmpl" >/dev/null
"$PGBENCH" -i -q -s "$SCALE" -d "$(bench_tgt_url tmpl)" >"$WORK/pgbench-init-target.log" 2>&1 &
bench_wait_all "$p1" $! || { cat "$WORK"/pgbench-init-*.log >&2; die "pgbench -i failed"; }
dbs=()
for ((i = 1; i <= REPEAT; i++)); do
	for kind in "${KINDS[@]}"; do dbs+=(-c "CREATE DATABASE ${kind}_$i TEMPLATE tmpl STRATEGY file_copy"); done
done
tgt postgres "${dbs[@]}" >/dev/null
q="CREATE PUBLICATION $PUB FOR TABLE $(printf '%s, ' "${TABLES[@]}")"
src -c "${q%, }" -c "CHECKPOINT" >/dev/null
q=''
for ((i = 1; i <= REPEAT; i++)); do
	for kind in "${KINDS[@]}"; do q+="SELECT pg_create_logical_replication_slot('${kind}_$i', 'pgoutput');"; done
done
src -c "$q" >/dev/null

# write_flow KIND ROUND: the flow file of one kind and round (capture's
# and applyd's); a JetStream one's stream is created here
write_flow() {
	local kind=$1 i=$2 ff=$WORK/$1-$2.yml t
	mkdir -p "$WORK/metrics-$kind-$i"
	cat >"$ff" <<EOF
config_version: 2
environment: bench
source:
  id: bench
  database_url: "$SRC_URL"
  publication: $PUB
  slot: ${kind}_$i
  stream_spill_dir: "$WORK/spill-$kind-$i"
  pgoutput:
    protocol_version: 2
    streaming: true
dataset:
  id: pgbench
  mode: strict_transaction_order
  tables:
EOF
	for t in "${TABLES[@]}"; do echo "    - {schema: public, name: $t}" >>"$ff"; done
	if [[ $kind == jetstream ]]; then
		cat >>"$ff" <<EOF
stream:
  kind: jetstream
  servers: $NATS_SERVERS_YAML
  name: BENCH_JS_$i
  subject: trellara.bench.js$i
  replicas: 3
EOF
	else
		cat >>"$ff" <<EOF
stream:
  kind: local
  path: "$WORK/stream-$kind-$i"
  durability: fsync
  min_free_bytes: 268435456
EOF
	fi
	cat >>"$ff" <<EOF
target:
  database_url: "$(bench_tgt_url "${kind}_$i")"
observability:
  metrics_dir: "$WORK/metrics-$kind-$i"
EOF
	if [[ $kind == jetstream ]]; then
		"$REPO/bin/trellara-stream" init --config "$ff" >"$WORK/stream-init-$i.log" 2>&1 ||
			{ cat "$WORK/stream-init-$i.log" >&2; die "trellara stream init failed for round $i"; }
	fi
}
for ((i = 1; i <= REPEAT; i++)); do
	for kind in "${KINDS[@]}"; do write_flow "$kind" "$i"; done
done
BATCH_TXNS=$("$REPO/bin/trellara-config" get stream.max_batch_transactions --config "$WORK/jetstream-1.yml")
APPLY_WORKERS=$("$REPO/bin/trellara-config" get apply.workers --config "$WORK/jetstream-1.yml" 2>/dev/null) || APPLY_WORKERS='?'
APPLY_BATCH=$("$REPO/bin/trellara-config" get apply.batch_transactions --config "$WORK/jetstream-1.yml" 2>/dev/null) || APPLY_BATCH='?'

echo "== jetstream ($(date -u +%Y-%m-%dT%H:%M:%SZ), trellara $(git -C "$REPO" describe --always --dirty 2>/dev/null || echo '?')," \
	"$NCORES cores, PostgreSQL $(trellara_pg_version | cut -d' ' -f1), nats-server $(nats-server --version | awk '{print $NF}')," \
	"load average $(cut -d' ' -f1-3 /proc/loadavg))"

"$PGBENCH" -n -c "$CLIENTS" -j 2 -T "$SECONDS_PGBENCH" -d "$SRC_URL" >"$WORK/pgbench.log" 2>&1 &
BG[pgbench]=$!
wait "${BG[pgbench]}" || { cat "$WORK/pgbench.log" >&2; die "pgbench failed"; }
BG[pgbench]=
END=$(src -c "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (0, 0, 0, 0, now())" \
	-c "SELECT pg_current_wal_insert_lsn()")
n=$(awk '/number of transactions actually processed/ {print $NF}' "$WORK/pgbench.log")
n=${n%%/*}
[[ $n =~ ^[0-9]+$ ]] || die "cannot read the transaction count from pgbench's log"
[[ $(src -c "SELECT count(*) = $n + 1 FROM pgbench_history") == t ]] || die "pgbench_history does not hold $n + 1 rows"
TXNS=$((n + 1))
BACKLOG_TPS=$(grep -o 'tps = [0-9.]*' "$WORK/pgbench.log" | head -1 | awk '{printf "%.0f", $3}')
fingerprint() {
	local t sep='' q="SELECT "
	for t in "${TABLES[@]}"; do
		q+="$sep(SELECT '$t ' || count(*) || ':' || coalesce(sum(hashtext(x::text)::bigint), 0) FROM $t x)"
		sep=" || ' ' || "
	done
	printf '%s' "$q"
}
SOURCE_PRINT=$(src -c "$(fingerprint)")
echo "backlog: pgbench tpcb-like -c $CLIENTS -j 2 -T $SECONDS_PGBENCH, scale $SCALE, no consumer attached ($BACKLOG_TPS tps):" \
	"$n + 1 marker = $TXNS transactions; slots made before it, one per consumer; streams and the NATS store on" \
	"$(df -P "$FDIR" | awk 'NR==2{print $1}'); medians of $REPEAT round(s)"

# ---------------------------------------------------------------- the runs
#
# Not in $( ): the poll session's descriptors exist only in this shell,
# and cleanup must know the pid of the process that is running.
#
# Results by "PHASE KIND ROUND": S (seconds), TX (transactions counted),
# CONS, PGS, NATS (on-CPU ns of the consumer, its PostgreSQL side, the
# nodes together), NODES ("n1 n2 n3" on-CPU ns), WAIT (ns waiting for a
# CPU, ours together), MAIN ("ON_NS WAIT_NS" of the consumer's main
# thread), BOX (the machine's busy cores), MB, EXTRA (text); capture on
# JetStream: PUBS (publish_seconds samples); apply: GAP (the longest
# time between two commits seen, from exec, seconds)
declare -A S=() TX=() CONS=() PGS=() NATS=() NODES=() WAIT=() MAIN=() BOX=() MB=() EXTRA=() GAP=() PUBS=()

# measure_begin / measure_end K: the /proc side of a timed interval
measure_begin() {
	mapfile -t M_NATS0 < <(nats_cpu)
	M_BOX0=$(box_busy)
	M_BOXT0=$EPOCHREALTIME
}
measure_end() { # K CONSUMER_PID PG_PIDS...
	local k=$1 pid=$2 on w on_sum=0 w_sum=0 nodes='' j b0 a0 b1 bt1
	local -a now
	shift 2
	read -r b1 _ <<<"$(box_busy)"
	bt1=$EPOCHREALTIME
	read -r on w _ 2>/dev/null <"/proc/$pid/schedstat" || on=0 w=0
	MAIN[$k]="$on $w"
	read -r on w <<<"$(proc_cpu "$pid")"
	CONS[$k]=$on
	w_sum=$w
	for pid in "$@"; do
		read -r on w <<<"$(proc_cpu "$pid")"
		on_sum=$((on_sum + on)) w_sum=$((w_sum + w))
	done
	PGS[$k]=$on_sum
	mapfile -t now < <(nats_cpu)
	on_sum=0
	for j in "${!now[@]}"; do
		read -r on w <<<"${now[j]}"
		read -r b0 a0 <<<"${M_NATS0[j]}"
		nodes+="$((on - b0)) "
		on_sum=$((on_sum + on)) w_sum=$((w_sum + w - a0))
		on_sum=$((on_sum - b0))
	done
	NATS[$k]=$on_sum NODES[$k]=${nodes% } WAIT[$k]=$w_sum
	read -r b0 _ <<<"$M_BOX0"
	# busy ticks (every CPU) over the seconds between the two reads
	BOX[$k]=$(awk -v b="$((b1 - b0))" -v hz="$HZ" -v a="$M_BOXT0" -v z="$bt1" 'BEGIN{printf "%.2f", b / hz / (z - a)}')
}

warnings() { # LOG: its warn and error lines, counted
	local w e
	w=$(grep -c ' warn ' "$1" || true)
	e=$(grep -c ' error ' "$1" || true)
	echo "$w warnings, $e errors in its log"
}

# run_capture KIND ROUND
run_capture() {
	local kind=$1 i=$2 k="capture $1 $2" flow=$WORK/$1-$2.yml log=$WORK/capture-$1-$2.log
	local prom=$WORK/metrics-$1-$2/capture.prom slot=${1}_$2 t0 t1 wpid='' pid polls=0 last='' line
	local -a pubs=()
	poll_connect "$SRC_CONN"
	local q="SELECT CASE WHEN confirmed_flush_lsn >= '$END' THEN 't' ELSE 'f' END || ' ' || coalesce(active_pid, 0)
		FROM pg_replication_slots WHERE slot_name = '$slot'"
	measure_begin
	t0=$EPOCHREALTIME
	"$REPO/bin/trellara-capture" --config "$flow" --start-now 2>"$log" &
	pid=$!
	BG[capture]=$pid
	WATCH_PID=$pid WATCH_WHAT="trellara-capture ($kind, round $i)" WATCH_LOG=$log
	while :; do
		poll_query "$q"
		[[ $POLL_ANSWER =~ ^([tf])\ ([0-9]+)$ ]] || die "poll: unexpected answer \"$POLL_ANSWER\""
		[[ ${BASH_REMATCH[2]} != 0 ]] && wpid=${BASH_REMATCH[2]}
		[[ ${BASH_REMATCH[1]} == t ]] && break
		check_watched
		elapsed_gt "$t0" "$TIMEOUT_S" && die "capture ($kind, round $i): timed out after $TIMEOUT_S s"
		if [[ $kind == jetstream ]] && ((++polls % 10 == 0)); then
			prom_value "$prom" trellara_capture_broker_publish_seconds
			if [[ -n $PROM_VALUE && $PROM_VALUE != "$last" ]]; then
				pubs+=("$PROM_VALUE")
				last=$PROM_VALUE
			fi
		fi
		sleep 0.01
	done
	t1=$EPOCHREALTIME
	WATCH_PID=''
	[[ -n $wpid ]] || die "capture ($kind, round $i): its walsender was never seen"
	measure_end "$k" "$pid" "$wpid"
	bench_term capture "trellara-capture ($kind, round $i)" "$log" 20
	S[$k]=$(secs "$t0" "$t1")
	line=$(grep -o 'capture stopped: [0-9]* transactions ([0-9]* changes, [0-9]* frames)' "$log") ||
		{ tail -n 20 "$log" >&2; die "no final line in the capture log ($kind, round $i)"; }
	[[ $line =~ ([0-9]+)\ transactions\ \(([0-9]+)\ changes,\ ([0-9]+)\ frames ]] || die "cannot parse: $line"
	TX[$k]=${BASH_REMATCH[1]}
	[[ ${TX[$k]} == "$TXNS" ]] || die "capture ($kind, round $i) captured ${TX[$k]} transactions, the backlog holds $TXNS"
	EXTRA[$k]="${BASH_REMATCH[2]} changes, ${BASH_REMATCH[3]} frames; $(warnings "$log")"
	if [[ $kind == jetstream ]]; then
		local js
		js=$("$REPO/bin/trellara-stream" inspect --config "$flow" --format json 2>>"$WORK/inspect.log") ||
			die "trellara stream inspect failed (round $i): $(tail -n 3 "$WORK/inspect.log")"
		MB[$k]=$(jq -r '.bytes / 1e6' <<<"$js")
		EXTRA[$k]+="; stream: $(jq -r '"\(.messages) messages, leader \(.leader // "none")"' <<<"$js")"
		prom_value "$prom" trellara_capture_broker_publish_seconds
		[[ -n $PROM_VALUE && $PROM_VALUE != "$last" ]] && pubs+=("$PROM_VALUE")
		PUBS[$k]=${pubs[*]}
	else
		MB[$k]=$("$REPO/bin/trellara-stream" inspect-local --config "$flow" --format json | jq -r '.bytes / 1e6')
	fi
}

# run_apply KIND ROUND
run_apply() {
	local kind=$1 i=$2 k="apply $1 $2" db=${1}_$2 flow=$WORK/$1-$2.yml log=$WORK/applyd-$1-$2.log t0 t1 pid p
	tgt "$db" -c "CHECKPOINT" >/dev/null
	poll_connect "$(bench_tgt_conn "$db")"
	measure_begin
	t0=$EPOCHREALTIME
	"$REPO/bin/trellara-applyd" --config "$flow" 2>"$log" &
	pid=$!
	BG[applyd]=$pid
	WATCH_PID=$pid WATCH_WHAT="trellara-applyd ($kind, round $i)" WATCH_LOG=$log
	poll_until "SELECT to_regclass('trellara.apply_checkpoint') IS NOT NULL" 60
	# every change of applied_transactions is a commit seen: the longest
	# time between two (from exec to the first) is where applyd stalled
	local q="SELECT CASE WHEN coalesce(bool_and(applied_through_lsn >= '$END'), false) THEN 't' ELSE 'f' END || ' ' || coalesce(sum(applied_transactions), 0)
		FROM trellara.apply_checkpoint" n_cur=0 t_cur=$t0 commits=0 gap=0 gap_at=0 gap_n=0 g now
	while :; do
		poll_query "$q"
		[[ $POLL_ANSWER =~ ^([tf])\ ([0-9]+)$ ]] || die "poll: unexpected answer \"$POLL_ANSWER\" to: $q"
		if [[ ${BASH_REMATCH[2]} != "$n_cur" ]]; then
			now=$EPOCHREALTIME
			g=$(((${now/./} - ${t_cur/./}) / 1000)) # ms
			((g > gap)) && gap=$g gap_at=$(secs "$t0" "$t_cur") gap_n=$n_cur
			n_cur=${BASH_REMATCH[2]} t_cur=$now
			commits=$((commits + 1))
		fi
		[[ ${BASH_REMATCH[1]} == t ]] && break
		check_watched
		elapsed_gt "$t0" "$TIMEOUT_S" && die "applyd ($kind, round $i): timed out after $TIMEOUT_S s"
		sleep 0.01
	done
	t1=$EPOCHREALTIME
	WATCH_PID=''
	poll_query "SELECT coalesce(string_agg(pid::text, ' '), '') FROM pg_stat_activity WHERE application_name = 'trellara-applyd' AND datname = '$db'"
	local -a bpids
	read -ra bpids <<<"$POLL_ANSWER"
	measure_end "$k" "$pid" "${bpids[@]}"
	poll_query "SELECT applied_transactions FROM trellara.apply_checkpoint"
	TX[$k]=$POLL_ANSWER
	bench_term applyd "trellara-applyd ($kind, round $i)" "$log" 20
	S[$k]=$(secs "$t0" "$t1")
	[[ ${TX[$k]} == "$TXNS" ]] || die "applyd ($kind, round $i) applied ${TX[$k]} transactions, the backlog holds $TXNS"
	p=$(tgt "$db" -c "$(fingerprint)")
	[[ $p == "$SOURCE_PRINT" ]] || die "target database $db differs from the source at END: $p, source $SOURCE_PRINT"
	GAP[$k]=$(awk -v g="$gap" 'BEGIN{printf "%.3f", g / 1000}')
	EXTRA[$k]="${#bpids[@]} target backend(s), $commits commits seen, the longest time between two ${GAP[$k]} s"
	EXTRA[$k]+=" (from $gap_at s, $gap_n transactions applied); $(warnings "$log")"
	MB[$k]=${MB["capture $kind $i"]}
}

for ((i = 1; i <= REPEAT; i++)); do
	if ((i % 2)); then order=(jetstream local); else order=(local jetstream); fi
	for kind in "${order[@]}"; do run_capture "$kind" "$i"; done
	for kind in "${order[@]}"; do run_apply "$kind" "$i"; done
done

# ---------------------------------------------------------------- results

med() { # PHASE KIND ARRAY: the median over the rounds of ARRAY["PHASE KIND i"]
	local -n a=$3
	local i v=''
	for ((i = 1; i <= REPEAT; i++)); do v+="${a["$1 $2 $i"]} "; done
	median "$v"
}
# med_blocked PHASE KIND: the median of the consumer main thread's blocked seconds
med_blocked() {
	local i on w v=''
	for ((i = 1; i <= REPEAT; i++)); do
		read -r on w <<<"${MAIN["$1 $2 $i"]}"
		v+="$(awk -v s="${S["$1 $2 $i"]}" -v o="$on" -v w="$w" 'BEGIN{printf "%.3f", s - (o + w) / 1e9}') "
	done
	median "$v"
}
gt() { awk -v a="$1" -v b="$2" 'BEGIN{exit !(a >= b)}'; } # A >= B
declare -A RATIO=()
echo
echo "throughput (each consumer alone on its own slot or stream; txns/s = $TXNS transactions / seconds):"
printf '%-8s %-10s %9s %9s %10s %10s %7s\n' phase stream seconds txns/s "stream MB" "MB/s" ratio
for phase in capture apply; do
	sl=$(med "$phase" local S)
	for kind in local jetstream; do
		s=$(med "$phase" "$kind" S)
		r=$(awk -v l="$sl" -v s="$s" 'BEGIN{printf "%.2f", l / s}')
		[[ $kind == jetstream ]] && RATIO[$phase]=$r
		mb=$(med "$phase" "$kind" MB)
		printf '%-8s %-10s %9.2f %9d %10.1f %10.1f %7s\n' "$phase" "$kind" "$s" "$(per_s "$TXNS" "$s")" "$mb" \
			"$(awk -v m="$mb" -v s="$s" 'BEGIN{print m / s}')" "$r"
	done
done
echo "ratio = jetstream txns/s / local txns/s; capture: exec until the slot's confirmed_flush_lsn >= END" \
	"(local: stream fdatasync per batch; jetstream: PubAcks from the stream's quorum, 3 replicas);" \
	"apply: exec until apply_checkpoint.applied_through_lsn >= END on the target (fsync on), applyd's defaults" \
	"(apply.workers $APPLY_WORKERS, apply.batch_transactions $APPLY_BATCH); every target database checked equal" \
	"to the source at END (row count and hash of every row, per table); stream MB: jetstream counts each" \
	"message's headers too"

echo
echo "where the time went: cores busy on average over each timed interval (on-CPU s / wall s, /proc/PID/stat," \
	"every thread; machine: /proc/stat, every process); consumer = capture or applyd; pg = capture's walsender" \
	"or applyd's target backend(s); others = machine - ours (processes not ours); wait = s our threads were" \
	"runnable but waiting for a CPU; us/txn = on-CPU microseconds per transaction, consumer + pg + nats"
printf '%-8s %-10s %5s %7s %8s %5s %-21s %5s %7s %6s %6s %s\n' phase stream round wall consumer pg \
	"nats (n1 n2 n3)" ours machine others wait "us/txn"
for phase in capture apply; do
	for kind in jetstream local; do
		for ((i = 1; i <= REPEAT; i++)); do
			k="$phase $kind $i"
			w=${S[$k]}
			read -r -a nd <<<"${NODES[$k]}"
			c=${CONS[$k]} pg=${PGS[$k]} nt=${NATS[$k]}
			ours=$(cores "$((c + pg + nt))" "$w")
			printf '%-8s %-10s %5d %7.2f %8s %5s %-21s %5s %7s %6s %6s %s\n' "$phase" "$kind" "$i" "$w" \
				"$(cores "$c" "$w")" "$(cores "$pg" "$w")" \
				"$(cores "$nt" "$w") ($(cores "${nd[0]}" "$w") $(cores "${nd[1]}" "$w") $(cores "${nd[2]}" "$w"))" \
				"$ours" "${BOX[$k]}/$NCORES" "$(awk -v b="${BOX[$k]}" -v o="$ours" 'BEGIN{printf "%.2f", b - o}')" \
				"$(ns_s "${WAIT[$k]}")" \
				"$(awk -v c="$c" -v p="$pg" -v n="$nt" -v t="$TXNS" 'BEGIN{printf "%.0f + %.0f + %.0f", c / 1e3 / t, p / 1e3 / t, n / 1e3 / t}')"
		done
	done
done
echo "per round (the consumer's main thread: on-CPU / waiting for a CPU / blocked = the rest of the wall time):"
for phase in capture apply; do
	for kind in jetstream local; do
		for ((i = 1; i <= REPEAT; i++)); do
			k="$phase $kind $i"
			read -r on w <<<"${MAIN[$k]}"
			echo "  $phase $kind $i: ${S[$k]} s, ${EXTRA[$k]}; main thread $(ns_s "$on")/$(ns_s "$w")/$(awk -v s="${S[$k]}" -v o="$on" -v w="$w" 'BEGIN{printf "%.2f", s - (o + w) / 1e9}') s"
		done
	done
done

# bound PHASE: the rule applied to the JetStream medians
bound() {
	local phase=$1 w box cons pg nats ours others main_on main_wait blocked samples='' nb pm verdict='' xshare=0
	local who=capture pgname=walsender on mw x y
	[[ $phase == apply ]] && who=applyd pgname="target backend(s)"
	w=$(med "$phase" jetstream S)
	box=$(med "$phase" jetstream BOX)
	cons=$(cores "$(med "$phase" jetstream CONS)" "$w")
	pg=$(cores "$(med "$phase" jetstream PGS)" "$w")
	nats=$(cores "$(med "$phase" jetstream NATS)" "$w")
	ours=$(awk -v c="$cons" -v p="$pg" -v n="$nats" 'BEGIN{printf "%.2f", c + p + n}')
	others=$(awk -v b="$box" -v o="$ours" 'BEGIN{printf "%.2f", b - o}')
	on='' mw=''
	for ((i = 1; i <= REPEAT; i++)); do
		read -r x y <<<"${MAIN["$phase jetstream $i"]}"
		on+="$x " mw+="$y "
	done
	main_on=$(cores "$(median "$on")" "$w")
	main_wait=$(cores "$(median "$mw")" "$w")
	blocked=$(awk -v a="$main_on" -v b="$main_wait" 'BEGIN{v = 1 - a - b; printf "%.0f", 100 * (v < 0 ? 0 : v)}')
	if [[ $phase == capture ]]; then
		for ((i = 1; i <= REPEAT; i++)); do samples+="${PUBS["capture jetstream $i"]} "; done
		nb=$(awk -v t="$TXNS" -v b="$BATCH_TXNS" 'BEGIN{printf "%d", (t + b - 1) / b}')
		local bj bl
		bj=$(med_blocked capture jetstream)
		bl=$(med_blocked capture local)
		xshare=$(awk -v j="$bj" -v l="$bl" -v w="$w" 'BEGIN{printf "%.0f", 100 * (j - l) / w}')
		echo "capture -> jetstream: about $nb batches ($TXNS transactions / stream.max_batch_transactions $BATCH_TXNS), each" \
			"published whole (the window, 256 messages without a PubAck, holds a batch) and then waited on until its last PubAck" \
			"before capture reads on: one PubAck round trip per batch, batches never overlap"
		echo "capture -> jetstream: capture's main thread was blocked $bj s, $(awk -v b="$bj" -v n="$nb" 'BEGIN{printf "%.1f", 1000 * b / n}')" \
			"ms per batch (local: $bl s, $(awk -v b="$bl" -v n="$nb" 'BEGIN{printf "%.1f", 1000 * b / n}') ms per batch); the walsender's" \
			"side being the same, the difference ($xshare% of the jetstream wall time) is PubAck round trips beyond an fdatasync"
		if [[ -n ${samples// /} ]]; then
			pm=$(median "$samples")
			echo "capture -> jetstream: first publish to last PubAck of the last batch (capture.prom's" \
				"trellara_capture_broker_publish_seconds, sampled, $(wc -w <<<"$samples") values): median" \
				"$(awk -v p="$pm" 'BEGIN{printf "%.1f", p * 1000}') ms, max $(tr ' ' '\n' <<<"$samples" | sort -g | tail -1 | awk '{printf "%.1f", $1 * 1000}') ms"
		fi
	else
		local gj gl
		gj=$(med apply jetstream GAP)
		gl=$(med apply local GAP)
		echo "apply <- jetstream: the longest time between two commits seen (from exec to the first included): $gj s" \
			"(local: $gl s; medians; per round above)"
		if gt "$(awk -v a="$gj" -v b="$gl" 'BEGIN{print a - b}')" 1 &&
			gt "$(awk -v a="$gj" -v b="$gl" -v w="$w" 'BEGIN{print (a - b) / w}')" 0.25; then
			verdict="a stall, not CPU - applyd went $gj s without a commit (local: $gl s), its main thread blocked $blocked% of the run"
		fi
	fi
	if [[ -z $verdict ]]; then
		if gt "$ours" "$(awk -v n="$NCORES" 'BEGIN{print 0.9 * n}')"; then
			verdict="CPU - our processes keep the $NCORES cores busy ($ours cores; the nats-servers $nats)"
		elif gt "$box" "$(awk -v n="$NCORES" 'BEGIN{print 0.9 * n}')"; then
			verdict="CPU, shared - the machine is saturated ($box of $NCORES cores busy: ours $ours, other processes $others); our threads waited $(ns_s "$(med "$phase" jetstream WAIT)") s for a CPU"
		elif gt "$main_on" 0.85; then
			verdict="$who's CPU ($main_on of a core on its main thread)"
		elif [[ $phase == capture ]] && gt "$pg" 0.85; then
			verdict="the walsender's CPU ($pg of a core)"
		elif [[ $phase == capture ]] && gt "$xshare" 50; then
			verdict="PubAck latency - CPU is left over and capture's main thread waits on PubAcks (blocked beyond local) $xshare% of the time"
		else
			verdict="waiting, not CPU - CPU is left over and $who's main thread was blocked $blocked% of the time"
		fi
	fi
	echo "bound ($phase, jetstream): $who $cons cores (main thread $main_on on-CPU, $main_wait waiting for a CPU," \
		"blocked $blocked%), $pgname $pg, nats-servers $nats, other processes $others; machine $box of $NCORES busy: $verdict"
}
echo
echo "what bounds the jetstream figures (medians; rules, first that holds: apply's longest time without a commit >= 1 s" \
	"and >= 25% of the wall time longer than local's -> a stall; ours >= 90% of the cores -> CPU; machine >= 90% busy ->" \
	"CPU, shared; the consumer's main thread or the walsender >= 0.85 cores -> its CPU; capture's main thread blocked" \
	"beyond local's >= 50% of the wall time -> PubAck latency; else waiting):"
bound capture
bound apply
echo "known limit: a message holds at most the servers' max_payload (1 MB by default) - a large transaction goes in" \
	"chunk frames that fit, but a single change larger than that stops capture (exit 73); this bench's workload is" \
	"pgbench's small transactions only (no big transaction)"
echo "(total $(awk -v a="$T0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.0f", b - a}') s)"
for phase in capture apply; do
	echo "jetstream-bench: $phase ratio ${RATIO[$phase]} (goal >= $GOAL): $(awk -v r="${RATIO[$phase]}" -v g="$GOAL" 'BEGIN{print (r >= g) ? "ok" : "BELOW GOAL"}')"
done
