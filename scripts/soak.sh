#!/usr/bin/env bash
#
# soak.sh - `make soak HOURS=N` (README "make soak"): the whole flow under
# `trellara run` for N hours (default 0.1; 24 is the release gate) under a
# steady mixed workload, with a large transaction every few minutes and
# periodic SIGKILLs of capture and applyd; samples every component and
# judges the trend of each series, then the end state.
#
#   make soak HOURS=1            (or SOAK_HOURS=1 scripts/soak.sh)
#
# What runs.  Two throwaway clusters of its own (tests/bats/helpers/pg.bash:
# copies of the cached initdb template, unix sockets only, fsync off,
# logical_decoding_work_mem 64kB so that large transactions are streamed).
# The source has customers (1000 rows), orders (a foreign key to
# customers), order_items (a foreign key to orders, ON DELETE CASCADE)
# and bulk; `trellara check --fix` makes the publication, `trellara run`
# (--create-tables) copies them and streams.
#   load         pgbench -c 2 -R SOAK_TPS (50) for the whole run, a custom
#                script: an order and its item inserted, the customer's
#                balance updated, an item updated, and in 4 of 10
#                transactions the customer's oldest order deleted (its
#                items by the cascade); --max-tries 5 (deadlocks retried)
#   large        every SOAK_BIG_EVERY_SECONDS one transaction deletes
#                bulk's rows and inserts SOAK_BIG_ROWS (200000) new ones
#   kills        every SOAK_KILL_EVERY_SECONDS SIGKILL to capture, then
#                applyd next time, ... (the pid in supervisor.state)
#   retention    every 60 s `trellara stream retention --apply`, as an
#                operator's timer would (4 MiB segments)
# Defaults for the intervals: min(300 s, the run / 4) for kills, min(300
# s, the run / 3) for large transactions, at least 30 and 45 s.
#
# Samples, every SOAK_SAMPLE_SECONDS (5): RSS of capture, applyd and the
# supervisor (/proc/PID/status VmRSS, the pids of supervisor.state; the
# pid is the sample's segment), and from `trellara status --format
# json`: the slot's retained WAL, the stream's bytes, the apply lag in
# bytes, the open quarantine count.
#
# Trends (scripts/soak-trend.sh, a pure function with its own test in
# tests/bats/71-drill.bats): after a warm-up of SOAK_WARMUP_SECONDS
# (min(600 s, the run / 5)), and for RSS also 30 s after each restart,
# the least-squares slope per hour (RSS: with an intercept per process
# lifetime, so that the kills' restarts cannot hide a leak) must be at
# most its bound:  bound = B + S / H  where H is the judged hours.
#   series                    B (per hour)  S (one step)
#   rss_capture, rss_applyd   2 MiB         32 MiB
#   rss_supervisor            1 MiB          4 MiB
#   slot_retained_wal_bytes  16 MiB        256 MiB
#   stream_bytes             16 MiB        256 MiB
#   lag_bytes                16 MiB        256 MiB
# Why: capture and applyd hold bounded buffers (a transaction past 8 MiB
# spills to disk, batches and pipelines have fixed limits), so their
# steady RSS has no reason to grow at all; what may happen once is a
# step: the first large transaction's buffers kept by the allocator (S).
# B is growth no steady process should show: 2 MiB/h is 48 MiB in the 24
# hours of the release gate, several times a capture's whole steady RSS
# would be a leak.  The WAL the slot keeps, the stream (trimmed by
# retention) and the lag are bounded by the flow keeping up: they rise
# with each large transaction and fall back; S allows one such rise
# more at the end than at the start, B a slow drift that 24 hours would
# turn into 384 MiB.  A short run (HOURS=0.1) divides S by a small H: its
# trend verdicts are weak by construction (it is a smoke run of the
# machinery); the invariants hold at any length.
#
# Invariants (each pass/fail): the load ran to its end (pgbench exit 0);
# the supervisor lived through the run and restarted each child exactly
# as many times as it was killed (no exit other than the kills); no
# transaction was ever quarantined; at the end, with the load stopped and
# the target caught up: `trellara sequences sync` (the stream does not
# carry sequences), then `trellara verify` CONVERGED and every table equal
# (sorted COPY output of both sides); `trellara run` drained on SIGTERM
# (exit 0).
#
# Result: target/soak/soak-<UTC YYYYmmddTHHMMSSZ>.json (SOAK_OUTPUT_DIR),
# format trellara-soak/1: settings, counts, each series' judgement (the
# trend judge's JSON, with B, S and the bound), each invariant, result
# pass|fail and the failures; the samples next to it (.samples.tsv: t,
# series, value, segment) and verify's JSON (.verify.json).  Exit status 0 pass, 1 any failure, 64 bad
# settings, 78 missing programs.
#
# Environment: SOAK_HOURS, SOAK_TPS, SOAK_SAMPLE_SECONDS,
# SOAK_KILL_EVERY_SECONDS, SOAK_BIG_EVERY_SECONDS, SOAK_BIG_ROWS,
# SOAK_WARMUP_SECONDS, SOAK_OUTPUT_DIR, SOAK_KEEP=1 (keep the clusters'
# directory, stopped).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 78
REPO=$PWD
# shellcheck source=tests/bats/helpers/pg.bash
source tests/bats/helpers/pg.bash

say() { printf '%s soak: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() {
	say "$*"
	exit 1
}
is_number() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?$ ]]; }
is_int() { [[ $1 =~ ^[0-9]+$ ]]; }

HOURS=${SOAK_HOURS:-0.1}
if ! is_number "$HOURS" || ! awk -v h="$HOURS" 'BEGIN { exit !(h > 0) }'; then
	echo "soak: SOAK_HOURS (HOURS) \"$HOURS\": want a positive number of hours" >&2
	exit 64
fi
DURATION_S=$(awk -v h="$HOURS" 'BEGIN { printf "%d", h * 3600 + 0.5 }')
((DURATION_S >= 60)) || { echo "soak: $HOURS hours is less than a minute" >&2; exit 64; }
clamp() { # VALUE MIN MAX
	local v=$1
	((v < $2)) && v=$2
	((v > $3)) && v=$3
	echo "$v"
}
TPS=${SOAK_TPS:-50}
SAMPLE_S=${SOAK_SAMPLE_SECONDS:-5}
KILL_EVERY_S=${SOAK_KILL_EVERY_SECONDS:-$(clamp $((DURATION_S / 4)) 30 300)}
BIG_EVERY_S=${SOAK_BIG_EVERY_SECONDS:-$(clamp $((DURATION_S / 3)) 45 300)}
BIG_ROWS=${SOAK_BIG_ROWS:-200000}
WARMUP_S=${SOAK_WARMUP_SECONDS:-$(clamp $((DURATION_S / 5)) 0 600)}
SEG_WARMUP_S=30
RETENTION_EVERY_S=60
OUT_DIR=${SOAK_OUTPUT_DIR:-$REPO/target/soak}
for v in TPS SAMPLE_S KILL_EVERY_S BIG_EVERY_S BIG_ROWS WARMUP_S; do
	if ! is_int "${!v}" || { [[ $v != WARMUP_S ]] && ((${!v} == 0)); }; then
		echo "soak: $v \"${!v}\": want a positive whole number" >&2
		exit 64
	fi
done
((WARMUP_S < DURATION_S)) || { echo "soak: the warm-up ($WARMUP_S s) is the whole run ($DURATION_S s)" >&2; exit 64; }

for prog in trellara-check trellara-snapshot trellara-capture trellara-applyd trellara-status trellara-verify trellara-stream trellara-config; do
	[[ -x $REPO/bin/$prog ]] || { echo "soak: bin/$prog missing: run make first" >&2; exit 78; }
done
trellara_pg_check_bindir "$PG_BINDIR" PG_BINDIR || exit 78
PSQL=$(trellara_pg_psql_bin) || exit 78
export PATH="$REPO/bin:$REPO/scripts:$PG_BINDIR:$PATH"
for tool in pgbench pg_dump jq flock; do
	command -v "$tool" >/dev/null || { echo "soak: $tool not found" >&2; exit 78; }
done

# ---------------------------------------------------------------- cleanup
#
# The harness layout (owner file, watchdog, source/ and target/): if this
# script is SIGKILLed, the watchdog, or the next bats run's reaper, stops
# both clusters and removes the directory.
FDIR=
declare -A BG=()
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	local status=$? pid wpid
	trap - EXIT INT TERM HUP
	set +e
	if [[ -n ${BG[run]:-} ]]; then
		kill -TERM "${BG[run]}" 2>/dev/null
		for _ in $(seq 1 300); do kill -0 "${BG[run]}" 2>/dev/null || break; sleep 0.1; done
	fi
	for pid in "${BG[@]}"; do
		[[ -n $pid ]] || continue
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	if [[ -n $FDIR && -d $FDIR ]]; then
		if [[ -f $FDIR/watchdog.pid ]] && read -r wpid <"$FDIR/watchdog.pid" 2>/dev/null; then
			kill -KILL "$wpid" 2>/dev/null
		fi
		if [[ -n ${SOAK_KEEP:-} ]]; then
			trellara_pg_destroy_dir "$FDIR" keep
			say "kept $FDIR"
		else
			trellara_pg_destroy_dir "$FDIR"
		fi
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

root=$(trellara_pg_tmp_root)
FDIR=$(mktemp -d "$root/trellara-bats.XXXXXX") || exit 73
chmod 0755 "$FDIR"
_trellara_pg_proc_identity "$$" >"$FDIR/owner"
trellara_pg_start_watchdog "$FDIR" "$(cat "$FDIR/owner")"
mkdir -m 0755 "$FDIR/sock"
mkdir -m 0700 "$FDIR/soak"
_trellara_pg_is_root && chown "$TRELLARA_PG_OS_USER:" "$FDIR/sock"
WORK=$FDIR/soak
SOCK=$FDIR/sock
PORT=$((50000 + ($$ % 7000) * 2))
TPORT=$((PORT + 1))
SRC_CONN="host=$SOCK port=$PORT dbname=postgres"
SRC_URL="postgresql:///postgres?host=$SOCK&port=$PORT"
TGT_CONN="host=$SOCK port=$TPORT dbname=soak"
TGT_URL="postgresql:///soak?host=$SOCK&port=$TPORT"
src() { "$PSQL" -X -qAt -v ON_ERROR_STOP=1 -d "$SRC_CONN" "$@"; }
tgt() { "$PSQL" -X -qAt -v ON_ERROR_STOP=1 -d "$TGT_CONN" "$@"; }
now_s() { echo "${EPOCHREALTIME%.*}"; }

trellara_pg_create "$FDIR/source" "$PORT" "$SOCK" soak-source || die "cannot create the source cluster"
trellara_pg_create "$FDIR/target" "$TPORT" "$SOCK" soak-target || die "cannot create the target cluster"
trellara_pg_start "$FDIR/source" || die "cannot start the source"
trellara_pg_start "$FDIR/target" || die "cannot start the target"
"$PSQL" -X -qAt -v ON_ERROR_STOP=1 -d "host=$SOCK port=$TPORT dbname=postgres" -c "CREATE DATABASE soak" >/dev/null ||
	die "cannot create the target database"

# ---------------------------------------------------------------- the flow

TABLES=(customers orders order_items bulk)
src >/dev/null <<'EOF' || die "cannot create the source tables"
CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, balance bigint NOT NULL DEFAULT 0);
CREATE TABLE orders (id bigserial PRIMARY KEY, customer_id int NOT NULL REFERENCES customers,
	amount int NOT NULL, note text, created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE order_items (id bigserial PRIMARY KEY, order_id bigint NOT NULL REFERENCES orders ON DELETE CASCADE,
	sku int NOT NULL, qty int NOT NULL);
CREATE INDEX ON orders (customer_id);
CREATE INDEX ON order_items (order_id);
CREATE TABLE bulk (id int PRIMARY KEY, batch int NOT NULL, payload text NOT NULL);
INSERT INTO customers SELECT g, 'customer ' || g, 0 FROM generate_series(1, 1000) g;
EOF
cat >"$WORK/load.sql" <<'EOF'
\set cid random(1, 1000)
\set amount random(1, 1000)
\set sku random(1, 500)
\set r random(1, 10)
BEGIN;
INSERT INTO orders (customer_id, amount, note) VALUES (:cid, :amount, 'soak');
INSERT INTO order_items (order_id, sku, qty) VALUES (currval('orders_id_seq'), :sku, 1);
UPDATE customers SET balance = balance + :amount WHERE id = :cid;
UPDATE order_items SET qty = qty + 1 WHERE order_id = currval('orders_id_seq');
DELETE FROM orders WHERE id = (SELECT min(id) FROM orders WHERE customer_id = :cid) AND :r <= 4;
END;
EOF
FLOW=$WORK/trellara.yml
METRICS=$WORK/metrics
cat >"$FLOW" <<EOF
config_version: 2
environment: soak
source:
  id: soak
  database_url: "$SRC_URL"
  publication: soak_pub
  slot: soak_slot
  stream_spill_dir: "$WORK/spill"
dataset:
  id: soak
  tables:
    - {schema: public, name: customers}
    - {schema: public, name: orders}
    - {schema: public, name: order_items}
    - {schema: public, name: bulk}
stream:
  kind: local
  path: "$WORK/stream"
  segment_bytes: 4194304
  min_free_bytes: 268435456
target:
  database_url: "$TGT_URL"
observability:
  metrics_dir: "$METRICS"
EOF
trellara-check --config "$FLOW" --fix >"$WORK/check.log" 2>&1 || { cat "$WORK/check.log" >&2; die "trellara check --fix failed"; }

export TRELLARA_RUN_SNAPSHOT_ARGS=--create-tables TRELLARA_RUN_MAX_RESTARTS=1000 TRELLARA_RUN_BACKOFF_BASE_MS=500
trellara run --config "$FLOW" </dev/null >"$WORK/run.log" 2>&1 &
BG[run]=$!
state_value() { sed -n "s/^$1=//p" "$METRICS/supervisor.state" 2>/dev/null | head -n 1; }
is_program() { # PID NAME
	[[ $1 =~ ^[0-9]+$ ]] && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q "trellara-$2 --config $FLOW"
}
t0=$(now_s)
until [[ $(state_value state) == running ]] && is_program "$(state_value capture_pid)" capture &&
	is_program "$(state_value applyd_pid)" applyd; do
	kill -0 "${BG[run]}" 2>/dev/null || { tail -n 30 "$WORK/run.log" >&2; die "trellara run exited before streaming"; }
	(($(now_s) - t0 < 600)) || die "trellara run is not streaming after 600 s"
	sleep 0.5
done
say "streaming; $HOURS h ($DURATION_S s): load $TPS tps, a large transaction of $BIG_ROWS rows every $BIG_EVERY_S s, a kill every $KILL_EVERY_S s, a sample every $SAMPLE_S s, warm-up $WARMUP_S s"

# ---------------------------------------------------------------- the run

STARTED_AT=$(date -u +%Y-%m-%dT%H:%M:%SZ)
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
SAMPLES=$WORK/samples.tsv
: >"$SAMPLES"
pgbench -n -c 2 -j 2 -R "$TPS" -T "$DURATION_S" --max-tries=5 -f "$WORK/load.sql" "$SRC_URL" >"$WORK/pgbench.log" 2>&1 &
BG[load]=$!
START=$(now_s)
next_kill=$((START + KILL_EVERY_S)) next_big=$((START + BIG_EVERY_S)) next_retention=$((START + RETENTION_EVERY_S))
declare -A kills=([capture]=0 [applyd]=0)
kill_next=capture big_count=0 big_failed=0 supervisor_lost='' quarantine_max=0 sample_count=0 status_failures=0

rss_of() { # PID: bytes, or nothing
	local kb
	kb=$(awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null) || return 1
	[[ -n $kb ]] && echo $((kb * 1024))
}

sample() {
	local t=$1 name p v json
	for name in capture applyd; do
		p=$(state_value "${name}_pid")
		is_program "$p" "$name" || continue
		v=$(rss_of "$p") && printf '%s\trss_%s\t%s\t%s\n' "$t" "$name" "$v" "$p" >>"$SAMPLES"
	done
	p=$(state_value supervisor_pid)
	[[ -n $p ]] && v=$(rss_of "$p") && printf '%s\trss_supervisor\t%s\t%s\n' "$t" "$v" "$p" >>"$SAMPLES"
	if json=$(trellara-status --config "$FLOW" --format json --rate-seconds 0 2>/dev/null) || [[ -n $json ]]; then
		jq -r --arg t "$t" '
			[["slot_retained_wal_bytes", .source.slot.retained_wal_bytes], ["stream_bytes", .stream.bytes],
			 ["lag_bytes", .apply.lag_bytes], ["quarantine_open", .quarantine.open]][]
			| select(.[1] != null) | "\($t)\t\(.[0])\t\(.[1])\t-"' <<<"$json" >>"$SAMPLES" 2>/dev/null ||
			status_failures=$((status_failures + 1))
		v=$(jq -r '.quarantine.open // 0' <<<"$json" 2>/dev/null) || v=0
		((v > quarantine_max)) && quarantine_max=$v
	else
		status_failures=$((status_failures + 1))
	fi
	sample_count=$((sample_count + 1))
}

while :; do
	now=$(now_s)
	t=$((now - START))
	((t <= DURATION_S)) || break
	if ! kill -0 "${BG[run]}" 2>/dev/null; then
		supervisor_lost="trellara run exited during the run at t=${t}s"
		break
	fi
	sample "$t"
	if ((now >= next_kill)); then
		p=$(state_value "${kill_next}_pid")
		if is_program "$p" "$kill_next"; then
			kill -KILL "$p" && kills[$kill_next]=$((kills[$kill_next] + 1))
			say "t=${t}s: SIGKILL trellara-$kill_next (pid $p)"
			if [[ $kill_next == capture ]]; then kill_next=applyd; else kill_next=capture; fi
			next_kill=$((now + KILL_EVERY_S))
		fi # else: still restarting; the next round
	fi
	# (never kill -0 with an empty or 0 pid: 0 is our own process group)
	if ((now >= next_big)) && ! { [[ -n ${BG[big]:-} ]] && kill -0 "${BG[big]}" 2>/dev/null; }; then
		if [[ -n ${BG[big]:-} ]]; then wait "${BG[big]}" || big_failed=$((big_failed + 1)); fi
		big_count=$((big_count + 1))
		say "t=${t}s: large transaction $big_count ($BIG_ROWS rows)"
		src -c "BEGIN" -c "DELETE FROM bulk" \
			-c "INSERT INTO bulk SELECT g, $big_count, md5(g::text) || repeat('x', 60) FROM generate_series(1, $BIG_ROWS) g" \
			-c "COMMIT" >/dev/null 2>>"$WORK/large.log" &
		BG[big]=$!
		next_big=$((now + BIG_EVERY_S))
	fi
	if ((now >= next_retention)); then
		trellara-stream retention --config "$FLOW" --apply >>"$WORK/retention.log" 2>&1 ||
			say "t=${t}s: trellara stream retention failed (see $WORK/retention.log)"
		next_retention=$((now + RETENTION_EVERY_S))
	fi
	sleep "$SAMPLE_S"
done

# ---------------------------------------------------------------- the end

say "load stopping; waiting for the target to catch up"
pgbench_rc=0
wait "${BG[load]}" || pgbench_rc=$?
BG[load]=
if [[ -n ${BG[big]:-} ]]; then wait "${BG[big]}" || big_failed=$((big_failed + 1)); BG[big]=; fi
end_lsn=$(src -c "SELECT pg_current_xact_id()" -c "SELECT pg_current_wal_flush_lsn()" | tail -n 1)
caught_up=false
t0=$(now_s)
while (($(now_s) - t0 < 900)); do
	[[ $(tgt -c "SELECT coalesce((SELECT applied_through_lsn >= '$end_lsn' FROM trellara.apply_checkpoint), false)" 2>/dev/null) == t ]] &&
		{ caught_up=true; break; }
	kill -0 "${BG[run]}" 2>/dev/null || break
	sleep 1
done
sample "$(($(now_s) - START))"
verify_result=none verify_data=none verify_rc='' sequences_rc=''
if [[ $caught_up == true ]]; then
	# the stream does not carry sequences (orders' and order_items'
	# bigserial): synced first, as before a cutover, or verify names them
	trellara-sequences sync --config "$FLOW" >"$WORK/sequences.log" 2>&1
	sequences_rc=$?
	trellara-verify --config "$FLOW" --format json >"$WORK/verify.json" 2>"$WORK/verify.log"
	verify_rc=$?
	verify_result=$(jq -r '.result // "none"' "$WORK/verify.json" 2>/dev/null) || verify_result=none
	verify_data=$(jq -r '.data_result // "none"' "$WORK/verify.json" 2>/dev/null) || verify_data=none
fi
tables_differ=()
for table in "${TABLES[@]}"; do
	source_rows=$(src -c "COPY (SELECT * FROM $table) TO STDOUT" | LC_ALL=C sort | sha256sum)
	target_rows=$(tgt -c "COPY (SELECT * FROM $table) TO STDOUT" | LC_ALL=C sort | sha256sum)
	[[ $source_rows == "$target_rows" ]] || tables_differ+=("$table")
done
final_quarantine=$(tgt -c "SELECT count(*) FROM trellara.quarantine" 2>/dev/null) || final_quarantine=unknown
capture_restarts=$(state_value capture_restarts) applyd_restarts=$(state_value applyd_restarts)
run_rc=
if kill -0 "${BG[run]}" 2>/dev/null; then
	kill -TERM "${BG[run]}"
	run_rc=0
	wait "${BG[run]}" || run_rc=$?
else
	wait "${BG[run]}"
	run_rc=$?
fi
BG[run]=
pgbench_txns=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$WORK/pgbench.log")
FINISHED_AT=$(date -u +%Y-%m-%dT%H:%M:%SZ)

# ---------------------------------------------------------------- judgement

JUDGED_H=$(awk -v d="$DURATION_S" -v w="$WARMUP_S" 'BEGIN { printf "%.6f", (d - w) / 3600 }')
MIB=1048576
series_json='{}'
judge() { # NAME B S SEGMENTED
	local name=$1 base=$2 step=$3 segmented=$4 bound out
	bound=$(awk -v b="$base" -v s="$step" -v h="$JUDGED_H" 'BEGIN { printf "%.0f", b + s / h }')
	if ((segmented)); then
		out=$(awk -F'\t' -v n="$name" '$2 == n { print $1, $3, "p" $4 }' "$SAMPLES" |
			scripts/soak-trend.sh --bound-per-hour "$bound" --warmup-seconds "$WARMUP_S" --segment-warmup-seconds "$SEG_WARMUP_S")
	else
		out=$(awk -F'\t' -v n="$name" '$2 == n { print $1, $3 }' "$SAMPLES" |
			scripts/soak-trend.sh --bound-per-hour "$bound" --warmup-seconds "$WARMUP_S")
	fi
	[[ -n $out ]] || out='{"pass":false,"reason":"the trend judge failed"}'
	series_json=$(jq -c --arg n "$name" --argjson j "$out" --argjson b "$base" --argjson s "$step" \
		'.[$n] = ($j + {base_bound_per_hour: $b, step_allowance: $s})' <<<"$series_json")
}
judge rss_capture $((2 * MIB)) $((32 * MIB)) 1
judge rss_applyd $((2 * MIB)) $((32 * MIB)) 1
judge rss_supervisor $((1 * MIB)) $((4 * MIB)) 1
judge slot_retained_wal_bytes $((16 * MIB)) $((256 * MIB)) 0
judge stream_bytes $((16 * MIB)) $((256 * MIB)) 0
judge lag_bytes $((16 * MIB)) $((256 * MIB)) 0

invariants=$(jq -n \
	--argjson pgbench_rc "$pgbench_rc" --arg pgbench_txns "${pgbench_txns:-0}" --argjson big_failed "$big_failed" \
	--arg lost "$supervisor_lost" --arg cr "$capture_restarts" --arg ar "$applyd_restarts" \
	--argjson ck "${kills[capture]}" --argjson ak "${kills[applyd]}" \
	--argjson qmax "$quarantine_max" --arg qfinal "$final_quarantine" \
	--arg caught "$caught_up" --arg end_lsn "$end_lsn" --arg verify "$verify_result" --arg verify_rc "$verify_rc" \
	--arg verify_data "$verify_data" --arg sequences_rc "$sequences_rc" \
	--arg differ "${tables_differ[*]}" --arg run_rc "$run_rc" '
	{load_ran: {pass: ($pgbench_rc == 0 and ($pgbench_txns | tonumber) > 0 and $big_failed == 0),
	            detail: "pgbench exit \($pgbench_rc), \($pgbench_txns) transactions; \($big_failed) large transactions failed"},
	 no_exit_but_kills: {pass: ($lost == "" and $cr == ($ck | tostring) and $ar == ($ak | tostring)),
	            detail: (if $lost != "" then $lost else "capture restarted \($cr) times for \($ck) kills, applyd \($ar) for \($ak)" end)},
	 no_quarantine: {pass: ($qmax == 0 and $qfinal == "0"), detail: "at most \($qmax) open in the samples, \($qfinal) rows at the end"},
	 caught_up: {pass: ($caught == "true"), detail: "applied through \($end_lsn) within 900 s: \($caught)"},
	 verify_converged: {pass: ($verify == "CONVERGED"),
	            detail: "trellara sequences sync exit \($sequences_rc); trellara verify: \($verify), data \($verify_data) (exit \($verify_rc))"},
	 tables_equal: {pass: ($differ == ""), detail: (if $differ == "" then "sorted COPY of every table equal" else "differ: \($differ)" end)},
	 drained: {pass: ($run_rc == "0"), detail: "trellara run exit \($run_rc) on SIGTERM"}}')

mkdir -p "$OUT_DIR" || die "cannot create $OUT_DIR"
RESULT=$OUT_DIR/soak-$STAMP.json
cp "$SAMPLES" "$OUT_DIR/soak-$STAMP.samples.tsv"
[[ -s $WORK/verify.json ]] && cp "$WORK/verify.json" "$OUT_DIR/soak-$STAMP.verify.json"
jq -n --arg started "$STARTED_AT" --arg finished "$FINISHED_AT" --arg host "$(uname -n)" \
	--arg revision "$(git -C "$REPO" describe --always --dirty 2>/dev/null || echo unknown)" \
	--arg hours "$HOURS" --argjson duration "$DURATION_S" --argjson tps "$TPS" --argjson sample "$SAMPLE_S" \
	--argjson kill_every "$KILL_EVERY_S" --argjson big_every "$BIG_EVERY_S" --argjson big_rows "$BIG_ROWS" \
	--argjson warmup "$WARMUP_S" --argjson seg_warmup "$SEG_WARMUP_S" --arg judged "$JUDGED_H" \
	--argjson ck "${kills[capture]}" --argjson ak "${kills[applyd]}" --argjson big "$big_count" \
	--argjson samples "$sample_count" --argjson status_failures "$status_failures" --arg pgbench_txns "${pgbench_txns:-0}" \
	--argjson series "$series_json" --argjson invariants "$invariants" --arg samples_file "soak-$STAMP.samples.tsv" '
	([$series | to_entries[] | select(.value.pass != true) | "trend \(.key): \(.value.reason)"] +
	 [$invariants | to_entries[] | select(.value.pass != true) | "invariant \(.key): \(.value.detail)"]) as $failures |
	{format: "trellara-soak/1", started_at: $started, finished_at: $finished, host: $host, revision: $revision,
	 settings: {hours: ($hours | tonumber), duration_seconds: $duration, load_tps: $tps, sample_seconds: $sample,
	            kill_every_seconds: $kill_every, large_every_seconds: $big_every, large_rows: $big_rows,
	            warmup_seconds: $warmup, segment_warmup_seconds: $seg_warmup, judged_hours: ($judged | tonumber)},
	 counts: {kills: {capture: $ck, applyd: $ak}, large_transactions: $big, samples: $samples,
	          status_failures: $status_failures, load_transactions: ($pgbench_txns | tonumber)},
	 series: $series, invariants: $invariants, samples_file: $samples_file,
	 result: (if $failures == [] then "pass" else "fail" end), failures: $failures}' >"$RESULT.tmp" ||
	die "cannot write $RESULT.tmp"
mv -f "$RESULT.tmp" "$RESULT" || die "cannot write $RESULT"
jq -r '"soak \(.result): \(.settings.hours) h, \(.counts.kills.capture + .counts.kills.applyd) kills, \(.counts.large_transactions) large transactions, \(.counts.samples) samples",
	(.series | to_entries[] | "  \(.key): slope \(.value.slope_per_hour) per hour, bound \(.value.bound_per_hour): \(if .value.pass then "pass" else "FAIL" end)"),
	(.invariants | to_entries[] | "  \(.key): \(if .value.pass then "pass" else "FAIL" end) (\(.value.detail))")' "$RESULT"
say "result: $RESULT"
[[ $(jq -r .result "$RESULT") == pass ]] || exit 1
exit 0
