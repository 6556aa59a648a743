#!/usr/bin/env bash
# compress-bench.sh - stream.compression zlib against none: stream bytes,
# capture catch-up and applyd catch-up on the same slot data, measured in
# the same run (DESIGN §4 took the default from what this prints).
#
#   bench/compress-bench.sh            (make bench runs it)
#
# Method.  One throwaway cluster (tests/bats/helpers/pg.bash: a copy of the
# cached initdb template, unix socket only, fsync off) holding the source
# database "src" (pgbench scale 10) and a template "tmpl" copied from it
# before any workload.  For each workload, 2 x REPEAT fresh pgoutput slots
# (REPEAT for each compression) are created BEFORE the workload, so every
# run gets exactly the same backlog; then the workload runs with no
# consumer attached:
#   pgbench   pgbench -c 4 -T SECONDS, built-in tpcb-like
#   big       one transaction inserting ROWS rows into pgbench_accounts
# each ending with a one-row marker transaction; END = the WAL insert
# position right after its commit.  Then, round by round, alternating
# which compression goes first:
#   capture   trellara-capture --start-now into a fresh stream with
#             stream.compression none or zlib (the flow file's other
#             defaults); timed from exec until the slot's
#             confirmed_flush_lsn >= END (polled every 10 ms)
#   apply     a fresh target database "tgt" copied from "tmpl", then
#             trellara-applyd on that stream; timed from exec until the
#             target's checkpoint has applied through END
# Stream bytes: inspect-local's valid bytes; write and read volume: the
# process's wchar / rchar (/proc/PID/io: bytes through write/read calls).
# ratio = none seconds / zlib seconds (> 1: zlib faster); medians of REPEAT.
#
# Environment: COMPRESS_BENCH_SECONDS (pgbench -T, default 20),
# COMPRESS_BENCH_ROWS (big transaction, default 1000000),
# COMPRESS_BENCH_REPEAT (default 3), COMPRESS_BENCH_KEEP=1 keeps the
# directory (cluster stopped).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
# shellcheck source=bench/lib-cluster.sh
source bench/lib-cluster.sh
bench_init compress-bench COMPRESS_BENCH_KEEP

SECONDS_PGBENCH=${COMPRESS_BENCH_SECONDS:-20}
BIG_ROWS=${COMPRESS_BENCH_ROWS:-1000000}
REPEAT=${COMPRESS_BENCH_REPEAT:-3}
SCALE=10
CLIENTS=4
PUB=bench_pub
MODES=(none zlib)

for prog in "$REPO/bin/trellara-capture" "$REPO/bin/trellara-applyd" "$REPO/bin/trellara-stream"; do
	[[ -x $prog ]] || die "$prog missing; run make first"
done
trellara_pg_check_bindir "$PG_BINDIR"
PSQL=$(trellara_pg_psql_bin)
PGBENCH=$PG_BINDIR/pgbench
[[ -x $PGBENCH ]] || PGBENCH=$(command -v pgbench) || PGBENCH=
for tool in "$PGBENCH" "$(command -v jq)"; do
	[[ -x $tool ]] || die "needs pgbench and jq"
done

# ---------------------------------------------------------------- cluster
#
# bench/lib-cluster.sh: the directory in the bats harness layout (owner
# file, watchdog, source/; cleanup on exit); BG[cur] is the capture or
# applyd running now.
bench_dir
PGDATA_DIR=$FDIR/source
SRC=$(bench_src_url src) TGT=$(bench_src_url tgt) ADMIN=$SRC_URL

bench_create source
cat >>"$PGDATA_DIR/postgresql.conf" <<EOF
# ---- bench/compress-bench.sh ----
autovacuum = off              # nothing but the workload writes WAL
max_wal_size = '8GB'          # no checkpoints in the middle of a measurement
EOF
bench_start source

sql() { bench_psql "$@"; } # URL ARGS...

# One long-lived psql session for the polls; \c moves it between databases.
coproc POLL { "$PSQL" -X -qAt -d "$ADMIN" 2>&1; }
poll_query() { # sets POLL_ANSWER
	printf '%s;\n' "$1" >&"${POLL[1]}"
	IFS= read -r -t 30 POLL_ANSWER <&"${POLL[0]}" || die "poll session: no answer to: $1"
}
poll_connect() {
	printf '\\c "%s"\n' "$1" >&"${POLL[1]}"
	poll_query "SELECT 'connected'"
	[[ $POLL_ANSWER == connected ]] || die "poll session: cannot connect to $1: $POLL_ANSWER"
}

elapsed() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", b - a}'; }
io_field() { awk -v f="$1:" '$1 == f {print $2}' "/proc/$2/io"; }
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# ---------------------------------------------------------------- setup

sql "$ADMIN" -c "CREATE DATABASE src" >/dev/null
bench_in_bg "$WORK/pgbench-init.log" "$PGBENCH" -i -q -s "$SCALE" -d "$SRC" ||
	{ cat "$WORK/pgbench-init.log" >&2; die "pgbench -i failed"; }
sql "$SRC" -c "CREATE PUBLICATION $PUB FOR TABLE pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history" \
	-c "CHECKPOINT" >/dev/null
sql "$ADMIN" -c "CREATE DATABASE tmpl TEMPLATE src" >/dev/null

make_slots() { # WORKLOAD
	local q="" m i
	for m in "${MODES[@]}"; do
		for ((i = 1; i <= REPEAT; i++)); do
			q+="SELECT pg_create_logical_replication_slot('${1}_${m}_$i', 'pgoutput');"
		done
	done
	sql "$SRC" -c "$q" >/dev/null
}

end_marker() {
	sql "$SRC" -c "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (0, 0, 0, 0, now())" \
		-c "SELECT pg_current_wal_insert_lsn()"
}

write_flow() { # FLOW SLOT DIR MODE
	cat >"$1" <<EOF
config_version: 2
environment: bench
source:
  id: bench
  database_url: "$SRC"
  publication: $PUB
  slot: $2
  stream_spill_dir: "$3/spill"
dataset:
  id: pgbench
  tables:
    - {schema: public, name: pgbench_accounts}
    - {schema: public, name: pgbench_branches}
    - {schema: public, name: pgbench_tellers}
    - {schema: public, name: pgbench_history}
stream:
  kind: local
  path: "$3/stream"
  min_free_bytes: 268435456
  compression: $4
target:
  database_url: "$TGT"
EOF
}

# run_capture SLOT END DIR MODE: sets C_SECONDS C_BYTES C_FRAMES C_ZLIB C_WCHAR C_CPU
run_capture() {
	local slot=$1 end=$2 dir=$3 mode=$4 t0 t1 q
	mkdir -p "$dir"
	write_flow "$dir/trellara.yml" "$slot" "$dir" "$mode"
	q="SELECT CASE WHEN confirmed_flush_lsn >= '$end' THEN 't' ELSE 'f' END FROM pg_replication_slots WHERE slot_name = '$slot'"
	poll_connect "$SRC"
	t0=$EPOCHREALTIME
	"$REPO/bin/trellara-capture" --config "$dir/trellara.yml" --start-now 2>"$dir/capture.log" &
	BG[cur]=$!
	while :; do
		poll_query "$q"
		[[ $POLL_ANSWER == t ]] && break
		[[ $POLL_ANSWER == f ]] || die "poll: unexpected answer \"$POLL_ANSWER\""
		kill -0 "${BG[cur]}" 2>/dev/null || { cat "$dir/capture.log" >&2; die "trellara-capture exited early"; }
		sleep 0.01
	done
	t1=$EPOCHREALTIME
	C_WCHAR=$(io_field wchar "${BG[cur]}")
	C_CPU=$(awk '{printf "%.2f", ($14 + $15) / '"$(getconf CLK_TCK)"'}' "/proc/${BG[cur]}/stat")
	bench_term cur trellara-capture "$dir/capture.log"
	C_SECONDS=$(elapsed "$t0" "$t1")
	C_BYTES=$("$REPO/bin/trellara-stream" inspect-local --dir "$dir/stream" --format json | jq -r .bytes)
	C_FRAMES=$("$REPO/bin/trellara-stream" inspect-local --dir "$dir/stream" --format json | jq -r '.last_valid_offset + 1')
	C_ZLIB=$("$REPO/bin/trellara-stream" read --dir "$dir/stream" --raw --format json | jq -s '[.[] | select(.compression == "zlib")] | length')
}

# run_apply END DIR: a fresh target, applyd on DIR's stream; sets A_SECONDS A_RCHAR A_CPU
run_apply() {
	local end=$1 dir=$2 t0 t1 q
	poll_connect "$ADMIN"
	sql "$ADMIN" -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS tgt WITH (FORCE)" \
		-c "CREATE DATABASE tgt TEMPLATE tmpl" >/dev/null
	poll_connect "$TGT"
	q="SELECT coalesce((SELECT applied_through_lsn >= '$end' FROM trellara.apply_checkpoint), false)"
	t0=$EPOCHREALTIME
	"$REPO/bin/trellara-applyd" --config "$dir/trellara.yml" 2>"$dir/applyd.log" &
	BG[cur]=$!
	while :; do
		if [[ -n $(sql "$TGT" -c "SELECT 1 FROM pg_tables WHERE schemaname = 'trellara' AND tablename = 'apply_checkpoint'") ]]; then
			poll_query "$q"
			[[ $POLL_ANSWER == t ]] && break
			[[ $POLL_ANSWER == f ]] || die "poll: unexpected answer \"$POLL_ANSWER\""
		fi
		kill -0 "${BG[cur]}" 2>/dev/null || { cat "$dir/applyd.log" >&2; die "trellara-applyd exited early"; }
		sleep 0.01
	done
	t1=$EPOCHREALTIME
	A_RCHAR=$(io_field rchar "${BG[cur]}")
	A_CPU=$(awk '{printf "%.2f", ($14 + $15) / '"$(getconf CLK_TCK)"'}' "/proc/${BG[cur]}/stat")
	bench_term cur trellara-applyd "$dir/applyd.log"
	A_SECONDS=$(elapsed "$t0" "$t1")
	poll_connect "$ADMIN"
	rm -rf "$dir/stream" "$dir/spill"
}

# measure WORKLOAD END: REPEAT rounds of each compression; one row per mode
measure() {
	local w=$1 end=$2 i m order
	declare -A cs=() as=() bytes=() frames=() zl=() wch=() rch=() ccpu=() acpu=()
	for ((i = 1; i <= REPEAT; i++)); do
		if ((i % 2)); then order="none zlib"; else order="zlib none"; fi
		for m in $order; do
			run_capture "${w}_${m}_$i" "$end" "$WORK/$w-$m-$i" "$m"
			run_apply "$end" "$WORK/$w-$m-$i"
			cs[$m]+=" $C_SECONDS" as[$m]+=" $A_SECONDS" ccpu[$m]+=" $C_CPU" acpu[$m]+=" $A_CPU"
			bytes[$m]=$C_BYTES frames[$m]=$C_FRAMES zl[$m]=$C_ZLIB wch[$m]=$C_WCHAR rch[$m]=$A_RCHAR
		done
	done
	for m in "${MODES[@]}"; do
		# shellcheck disable=SC2086 # the lists of seconds split on purpose
		MED_C[$w-$m]=$(median ${cs[$m]}) MED_A[$w-$m]=$(median ${as[$m]})
		BYTES[$w-$m]=${bytes[$m]}
		printf '%-8s %-5s %7d %7d %10.1f %10.1f %10.1f %9.2f %9.2f\n' "$w" "$m" "${frames[$m]}" "${zl[$m]}" \
			"$(awk -v b="${bytes[$m]}" 'BEGIN{print b / 1e6}')" "$(awk -v b="${wch[$m]}" 'BEGIN{print b / 1e6}')" \
			"$(awk -v b="${rch[$m]}" 'BEGIN{print b / 1e6}')" "${MED_C[$w-$m]}" "${MED_A[$w-$m]}"
		DETAIL+=$(printf '  %-8s %-5s capture s%s  cpu%s | applyd s%s  cpu%s' "$w" "$m" "${cs[$m]}" "${ccpu[$m]}" \
			"${as[$m]}" "${acpu[$m]}")$'\n'
	done
}

# ---------------------------------------------------------------- workloads

T0=$EPOCHREALTIME
declare -A MED_C MED_A BYTES
DETAIL=''
echo "== compression ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, PostgreSQL $(trellara_pg_version | cut -d' ' -f1)," \
	"source and target fsync off; the stream fdatasyncs)"

make_slots pgbench
bench_in_bg "$WORK/pgbench.log" "$PGBENCH" -n -c "$CLIENTS" -j 2 -T "$SECONDS_PGBENCH" -d "$SRC" ||
	{ cat "$WORK/pgbench.log" >&2; die "pgbench failed"; }
END_PGBENCH=$(end_marker)
make_slots big
aid0=$((SCALE * 100000))
bench_in_bg "$WORK/big.log" sql "$SRC" -c "INSERT INTO pgbench_accounts (aid, bid, abalance, filler)
	SELECT g, 1, g % 1000, 'row ' || g FROM generate_series($aid0 + 1, $aid0 + $BIG_ROWS) g" ||
	{ cat "$WORK/big.log" >&2; die "the big transaction failed"; }
END_BIG=$(end_marker)

echo "catch-up on a backlog built with no consumer attached, the same slot data for each compression; median of $REPEAT"
printf '%-8s %-5s %7s %7s %10s %10s %10s %9s %9s\n' workload comp frames zlib "stream MB" "cap wr MB" "apd rd MB" \
	"capture s" "applyd s"
measure pgbench "$END_PGBENCH"
measure big "$END_BIG"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a / b}'; }
echo "pgbench: tpcb-like -c $CLIENTS -T $SECONDS_PGBENCH, scale $SCALE ($(grep -o 'tps = [0-9]*' "$WORK/pgbench.log" | head -1));" \
	"big: one INSERT of $BIG_ROWS rows into pgbench_accounts; each + a one-row marker transaction"
for w in pgbench big; do
	echo "$w: stream bytes none/zlib $(ratio "${BYTES[$w-none]}" "${BYTES[$w-zlib]}");" \
		"capture s none/zlib $(ratio "${MED_C[$w-none]}" "${MED_C[$w-zlib]}");" \
		"applyd s none/zlib $(ratio "${MED_A[$w-none]}" "${MED_A[$w-zlib]}") (> 1: zlib faster)"
done
echo "per round (cpu = user + system seconds):"
printf '%s' "$DETAIL"
echo "zlib = frames stored compressed; cap wr = capture's wchar, apd rd = applyd's rchar;" \
	"total $(elapsed "$T0" "$EPOCHREALTIME" | cut -d. -f1) s"
