# lib-apply.sh - helpers of bench/apply-bench.sh (sourced, not run): the
# poll session, timing and CPU arithmetic, and the lag measurement.
# Uses the caller's globals: PSQL, SRC_CONN, SRC_URL, WORK, BG, TIMEOUT_S,
# CLIENTS, LAG_RATE, LAG_SECONDS, and its functions src, tgt, fingerprint;
# die and bench_tgt_conn from bench/lib-cluster.sh.
# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154 # sets and reads the caller's globals

# One long-lived psql session for every poll (a query per 10 ms without a
# process start and a backend fork each time); \c moves it between the
# clusters and databases.  start_poll_session starts it (a coproc: the
# cleanup of bench/lib-cluster.sh ends it, as EOF on its input would).
start_poll_session() {
	coproc POLL { "$PSQL" -X -qAt -d "$SRC_CONN" 2>&1; }
}
poll_query() { # sets POLL_ANSWER
	printf '%s;\n' "$1" >&"${POLL[1]}"
	IFS= read -r -t 30 POLL_ANSWER <&"${POLL[0]}" || die "poll session: no answer to: $1"
}
poll_connect() { # CONNINFO
	printf '\\c "%s"\n' "$1" >&"${POLL[1]}"
	poll_query "SELECT 'connected'"
	[[ $POLL_ANSWER == connected ]] || die "poll session: cannot connect to $1: $POLL_ANSWER"
}
# A process whose exit ends every wait: WATCH_PID (empty: none), its name
# and log in WATCH_WHAT / WATCH_LOG, and watch_failed, which the caller may
# override, says why.
WATCH_PID='' WATCH_WHAT='' WATCH_LOG=''
check_watched() {
	[[ -z $WATCH_PID ]] && return 0
	kill -0 "$WATCH_PID" 2>/dev/null && return 0
	local rc=0
	wait "$WATCH_PID" || rc=$?
	WATCH_PID=''
	[[ -n $WATCH_LOG && -f $WATCH_LOG ]] && tail -n 20 "$WATCH_LOG" >&2
	die "$WATCH_WHAT exited $rc before the bench was done with it (log: $WATCH_LOG)"
}
# poll_until SQL LIMIT_S: poll every 10 ms until SQL says t
poll_until() {
	local q=$1 limit=$2 t0=$EPOCHREALTIME
	while :; do
		poll_query "$q"
		[[ $POLL_ANSWER == t ]] && return 0
		[[ $POLL_ANSWER == f ]] || die "poll: unexpected answer \"$POLL_ANSWER\" to: $q"
		check_watched
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
# on-CPU seconds of PIDs together (schedstat's first field)
cpu_secs() {
	local pid sum=0 v
	for pid in "$@"; do
		v=$(awk '{printf "%.6f", $1 / 1e9}' "/proc/$pid/schedstat" 2>/dev/null) || v=0
		sum=$(awk -v a="$sum" -v b="${v:-0}" 'BEGIN{printf "%.6f", a + b}')
	done
	echo "$sum"
}
# median of the numbers in the arguments (each may hold several, space-separated)
median() { printf '%s\n' "$*" | awk '{for (i = 1; i <= NF; i++) print $i}' | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
f3() { awk -v v="$1" 'BEGIN{printf "%.3f", v}'; }
per_s() { awk -v n="$1" -v s="$2" 'BEGIN{printf "%.0f", n / s}'; }
# microseconds of CPU per source transaction: us_per SECONDS TXNS
us_per() { awk -v c="$1" -v n="$2" 'BEGIN{printf "%.1f", c * 1e6 / n}'; }

# counter SAMPLE_NAME_RE LOG_RE PROM LOG: one of applyd's counters, the
# sum of the samples of metrics file PROM whose name matches
# SAMPLE_NAME_RE and ends in _total (a counter), else the number before
# LOG_RE in LOG's last "applyd stopped:", "applyd compaction:" or
# "applyd parallel apply:" line
# that has it, else "n/a"
counter() {
	local v=''
	[[ -f $3 ]] && v=$(awk -v re="$1" '!/^#/ && NF >= 2 { name = $1; sub(/\{.*/, "", name); if (name ~ re && name ~ /_total$/) { s += $NF; n++ } }
		END { if (n) printf "%.0f", s }' "$3")
	if [[ -z $v && -f $4 ]]; then
		v=$(grep -aE 'applyd (stopped|compaction|parallel apply):' "$4" | grep -oE "[0-9]+ ($2)" | tail -n 1 | grep -oE '^[0-9]+' || true)
	fi
	echo "${v:-n/a}"
}

# ---------------------------------------------------------------- lag
#
# lag_run NAME DB: pgbench -R LAG_RATE -T LAG_SECONDS (tpcb-like) on the
# current workload's source database (SRC_CONN, SRC_URL) with heartbeats;
# the applier into target database DB must already be running.  Sets L_P50
# L_P99 L_MAX L_N L_CATCHUP L_TPS L_READY.
lag_run() {
	local name=$1 db=$2 t0 k0 kend pid seen=$WORK/lag-$1.seen hb=$WORK/lag-$1.hb last=-1
	poll_connect "$(bench_tgt_conn "$db")"
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
		check_watched
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
		check_watched
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
			j = 1
			for (h = 1; h <= nh; h++) {
				while (j <= ns && sid[j] < id[h]) j++
				if (j > ns) exit
				lag = (st[j] - ts[h]) * 1000
				if (id[h] == kend) printf "catchup %.1f\n", lag; else printf "lag %.1f\n", lag
			}
		}' "$seen" "$hb" >"$WORK/lag-$name.ms"
	L_CATCHUP=$(awk '$1 == "catchup" {printf "%.0f", $2}' "$WORK/lag-$name.ms")
	# p50 and p99: the nearest-rank percentiles (the ceil(p * N)-th smallest)
	read -r L_N L_P50 L_P99 L_MAX < <(awk '$1 == "lag" {print $2}' "$WORK/lag-$name.ms" | sort -g |
		awk 'function rank(p,  r) { r = int(p * NR); if (r < p * NR) r++; return r < 1 ? 1 : r }
			{v[NR] = $1} END {printf "%d %.0f %.0f %.0f\n", NR, v[rank(0.5)], v[rank(0.99)], v[NR]}')
	L_TPS=$(grep -o 'tps = [0-9.]*' "$WORK/lag-$name-pgbench.log" | head -1 | awk '{printf "%.0f", $3}')
	# the target ended where the source is (nothing else writes now)
	[[ $(tgt "$db" -c "$(fingerprint)") == "$(src -c "$(fingerprint)")" ]] ||
		die "$db differs from the source after the lag run"
}
