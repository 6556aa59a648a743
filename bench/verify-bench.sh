#!/usr/bin/env bash
# verify-bench.sh - trellara-verify's time on one large table against a
# plain full scan of that table on both sides at once, measured in the same
# run: on an idle source, under a steady pgbench load, and what finding 10
# scattered divergent rows costs over a clean verify.
#
#   bench/verify-bench.sh            (make bench runs it)
#
# Method.  Two throwaway clusters (tests/bats/helpers/pg.bash: copies of
# the cached initdb template, unix sockets only, fsync off; autovacuum
# off).  The source holds pgbench -i -s SCALE's pgbench_accounts (SCALE x
# 100 000 rows: 20 = 2 million, 100 = the issue's 10 million) in
# publication bench_pub.  A flow with that one table is started the usual
# way: trellara-snapshot --create-tables copies it into an empty target
# database (timed, for information), then trellara-capture and
# trellara-applyd run in the background for the rest of the run, so the
# target follows the source and holds at verify's fence.  Capture runs
# with its default status interval (10 s): an idle source sends it
# nothing else.  One no-op UPDATE on the source gives applyd its
# checkpoint; then both tables are VACUUMed (hint bits and visibility map
# set: no scan below pays for them) and read once, so both sides start
# from the OS cache.
#   baseline  psql -c 'COPY pgbench_accounts TO STDOUT' > /dev/null on the
#             source and on the target at once; timed until both end
#   verify    trellara-verify --config F --format json, timed from exec to
#             exit (start to verdict): its temporary slot and exported
#             snapshot, the fence and the wait for applyd to hold there,
#             the bucket sums on both sides at once, the report.  Clean:
#             exit 0, CONVERGED, equal row counts.  Also split at the time
#             stamp of applyd's "held at fence" log line for verify's
#             fence: exec to fence (slot, snapshot, fence message, capture
#             and applyd) and the comparison (fence to exit).
# Rounds: REPEAT x (baseline + clean verify) on the idle source
# (alternating which goes first); then the same REPEAT rounds while
# pgbench -R LOAD_TPS (2 clients, TPC-B: it updates pgbench_accounts, so
# capture and applyd work throughout) runs on the source; then 10 rows of
# the target, one in each tenth of the key range, get abalance + 1 (an
# UPDATE on the target only; applyd never touches them again, the source
# being idle again) and REPEAT x (baseline + divergent verify): exit 1,
# DIVERGED, naming exactly those 10 keys as content_differs.  (The first
# divergent verify demotes the run from verified to failed_recoverable,
# so the later ones also report the handoff; the comparison is the
# same.)  Medians.  Goals (the issue): the comparison alone <= 1.2 x the
# baseline (clean, idle); start to verdict <= 2 x the baseline on the idle
# source and under load (each against the baselines of its own rounds);
# divergent <= 1.10 x clean, start to verdict.
#
# Environment: VERIFY_BENCH_SCALE (pgbench scale, default 20; 100 for the
# issue's 10 000 000 rows), VERIFY_BENCH_REPEAT (default 3),
# VERIFY_BENCH_LOAD_TPS (the load's rate, default 200 transactions/s),
# VERIFY_BENCH_KEEP=1 keeps the directory (clusters stopped).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
# shellcheck source=bench/lib-cluster.sh
source bench/lib-cluster.sh
bench_init verify-bench VERIFY_BENCH_KEEP

SCALE=${VERIFY_BENCH_SCALE:-20}
REPEAT=${VERIFY_BENCH_REPEAT:-3}
LOAD_TPS=${VERIFY_BENCH_LOAD_TPS:-200}
PUB=bench_pub
SLOT=verify_bench
DB=verify # the target database
COMPARE_GOAL=1.2 # the comparison alone / baseline, clean
START_GOAL=2.0   # start to verdict / baseline, idle and under load
DIVERGED_GOAL=1.10
TIMEOUT_S=300 # any single wait

for prog in "$REPO/bin/trellara-snapshot" "$REPO/bin/trellara-capture" "$REPO/bin/trellara-applyd" "$REPO/bin/trellara-verify"; do
	[[ -x $prog ]] || die "$prog missing; run make first"
done
[[ $SCALE =~ ^[1-9][0-9]*$ && $REPEAT =~ ^[1-9][0-9]*$ && $LOAD_TPS =~ ^[1-9][0-9]*$ ]] ||
	die "VERIFY_BENCH_SCALE, _REPEAT and _LOAD_TPS: positive integers"
trellara_pg_check_bindir "$PG_BINDIR"
PSQL=$(trellara_pg_psql_bin)
# the binaries themselves, not Debian's /usr/bin wrappers; --create-tables
# finds pg_dump and psql on PATH
export PATH="$PG_BINDIR:$PATH"
for tool in pgbench pg_dump jq; do
	command -v "$tool" >/dev/null || die "$tool not found"
done

# ---------------------------------------------------------------- clusters
#
# bench/lib-cluster.sh: the directory in the bats harness layout (owner
# file, watchdog, source/ and target/): if this script is SIGKILLed, the
# watchdog, or the next bats run's reaper, stops both clusters and removes
# it; cleanup ends every process in BG.
bench_dir
TGT_CONN=$(bench_tgt_conn "$DB")
TGT_URL=$(bench_tgt_url "$DB")

bench_create source target
for side in source target; do
	cat >>"$FDIR/$side/postgresql.conf" <<EOF
# ---- bench/verify-bench.sh ----
autovacuum = off              # the same work in every round
max_wal_size = '16GB'         # no checkpoint in the middle of a measurement
checkpoint_timeout = '1h'
EOF
done
bench_start source target

src() { bench_psql "$SRC_CONN" "$@"; }
tgt() { bench_psql "$TGT_CONN" "$@"; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", b - a}'; }
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
elapsed_gt() { # T0 (an $EPOCHREALTIME) LIMIT_S
	local now=${EPOCHREALTIME/./} t0=${1/./}
	((now - t0 > $2 * 1000000))
}
# wait_for SIDE SQL: poll (every 0.1 s) until SQL says t
wait_for() {
	local side=$1 q=$2 t0=$EPOCHREALTIME a p
	while :; do
		a=$("$side" -c "$q" 2>/dev/null) || a=
		[[ $a == t ]] && return 0
		elapsed_gt "$t0" "$TIMEOUT_S" && die "timed out after $TIMEOUT_S s waiting for: $q"
		for p in capture applyd; do
			kill -0 "${BG[$p]}" 2>/dev/null || { cat "$WORK/$p.log" >&2; die "trellara-$p exited"; }
		done
		sleep 0.1
	done
}

# ---------------------------------------------------------------- setup

T0=$EPOCHREALTIME
src -c "SELECT 1" >/dev/null
bench_psql "$(bench_tgt_conn postgres)" -c "CREATE DATABASE $DB" >/dev/null
pgbench -i -q -s "$SCALE" -d "$SRC_URL" >"$WORK/pgbench-init.log" 2>&1 &
BG[init]=$!
wait "${BG[init]}" || { cat "$WORK/pgbench-init.log" >&2; die "pgbench -i failed"; }
BG[init]=
src -c "CREATE PUBLICATION $PUB FOR TABLE pgbench_accounts" -c "CHECKPOINT" >/dev/null
ROWS=$(src -c "SELECT count(*) FROM pgbench_accounts")
MB=$(src -c "SELECT round(pg_relation_size('pgbench_accounts') / 1e6)")
FLOW=$WORK/trellara.yml
cat >"$FLOW" <<EOF
config_version: 2
environment: bench
source:
  id: bench
  database_url: "$SRC_URL"
  publication: $PUB
  slot: $SLOT
  stream_spill_dir: "$WORK/spill"
dataset:
  id: verify
  tables:
    - {schema: public, name: pgbench_accounts}
stream:
  kind: local
  path: "$WORK/stream"
  min_free_bytes: 268435456
target:
  database_url: "$TGT_URL"
snapshot:
  workers: 1
EOF
t0=$EPOCHREALTIME
"$REPO/bin/trellara-snapshot" --config "$FLOW" --create-tables >"$WORK/snapshot.log" 2>&1 &
BG[snapshot]=$!
wait "${BG[snapshot]}" || { cat "$WORK/snapshot.log" >&2; die "trellara-snapshot failed"; }
BG[snapshot]=
SNAPSHOT_S=$(secs "$t0" "$EPOCHREALTIME")
env -u TRELLARA_STATUS_INTERVAL_MS "$REPO/bin/trellara-capture" --config "$FLOW" >"$WORK/capture.log" 2>&1 &
BG[capture]=$!
"$REPO/bin/trellara-applyd" --config "$FLOW" >"$WORK/applyd.log" 2>&1 &
BG[applyd]=$!
# one change through the flow: applyd then has its checkpoint
NUDGE=$(src -c "UPDATE pgbench_accounts SET abalance = abalance WHERE aid = 1" -c "SELECT pg_current_wal_insert_lsn()")
wait_for tgt "SELECT to_regclass('trellara.apply_checkpoint') IS NOT NULL"
wait_for tgt "SELECT coalesce(bool_and(applied_through_lsn >= '$NUDGE'), false) FROM trellara.apply_checkpoint"
src -c "VACUUM ANALYZE pgbench_accounts" -c "CHECKPOINT" >/dev/null &
p1=$!
tgt -c "VACUUM ANALYZE pgbench_accounts" -c "CHECKPOINT" >/dev/null &
bench_wait_all "$p1" $! || die "VACUUM failed"
SETUP_S=$(secs "$T0" "$EPOCHREALTIME")

# ---------------------------------------------------------------- measurements

# baseline: sets R_S
baseline() {
	local t0 rc=0
	t0=$EPOCHREALTIME
	"$PSQL" -X -q -v ON_ERROR_STOP=1 -d "$SRC_CONN" -c "COPY pgbench_accounts TO STDOUT" >/dev/null 2>"$WORK/scan-source.err" &
	BG[scan_source]=$!
	"$PSQL" -X -q -v ON_ERROR_STOP=1 -d "$TGT_CONN" -c "COPY pgbench_accounts TO STDOUT" >/dev/null 2>"$WORK/scan-target.err" &
	BG[scan_target]=$!
	wait "${BG[scan_source]}" || rc=1
	wait "${BG[scan_target]}" || rc=1
	BG[scan_source]='' BG[scan_target]=''
	((rc == 0)) || { cat "$WORK"/scan-*.err >&2; die "a COPY TO STDOUT failed"; }
	R_S=$(secs "$t0" "$EPOCHREALTIME")
}

ts_epoch() { date -u -d "$1" +%s.%N; } # a log line's ISO time stamp

# verify TAG: sets R_S (exec to exit), R_FENCE (exec to applyd's "held at
# fence" log line for verify's fence), R_COMPARE (that line to exit), R_RC;
# its JSON in $WORK/verify-TAG.json
verify() {
	local tag=$1 t0 t1 lsn held
	t0=$EPOCHREALTIME
	"$REPO/bin/trellara-verify" --config "$FLOW" --format json >"$WORK/verify-$tag.json" 2>"$WORK/verify-$tag.log" &
	BG[verify]=$!
	R_RC=0
	wait "${BG[verify]}" || R_RC=$?
	BG[verify]=
	t1=$EPOCHREALTIME
	R_S=$(secs "$t0" "$t1")
	# the fence of its last attempt, and when applyd held there
	lsn=$(sed -n 's/.* at \([0-9A-F]*\/[0-9A-F]*\): waiting for the target to reach the fence.*/\1/p' "$WORK/verify-$tag.log" | tail -n 1)
	held=
	[[ -n $lsn ]] && held=$(grep -F "held at fence $lsn " "$WORK/applyd.log" | tail -n 1 | grep -o '^[^ ]*[0-9]Z') || held=
	if [[ -n $held ]]; then
		held=$(ts_epoch "$held")
		R_FENCE=$(secs "$t0" "$held") R_COMPARE=$(secs "$held" "$t1")
	else # applyd stood past the fence already: no wait
		R_FENCE=- R_COMPARE=-
	fi
}

# one warm-up read of both sides (not counted)
baseline
WARMUP_S=$R_S

declare -a BC=() VC=() BD=() VD=() FC=() CC=() FD=() CD=()
echo "== verify ($(date -u +%Y-%m-%dT%H:%M:%SZ), trellara $(git -C "$REPO" describe --always --dirty 2>/dev/null || echo '?'), $(nproc) cores," \
	"PostgreSQL $(trellara_pg_version | cut -d' ' -f1), load average $(cut -d' ' -f1-3 /proc/loadavg))"
clean_verify() {
	verify "clean-$1"
	local j="$WORK/verify-clean-$1.json"
	((R_RC == 0)) || { cat "$j" "$WORK/verify-clean-$1.log" >&2; die "clean verify $1 exited $R_RC, not 0"; }
	[[ $(jq -r '.result' "$j") == CONVERGED && $(jq -r '.tables[0].source_rows == .tables[0].target_rows and .tables[0].source_rows == '"$ROWS" "$j") == true ]] ||
		{ cat "$j" >&2; die "clean verify $1: not CONVERGED on $ROWS rows"; }
	VC+=("$R_S") FC+=("$R_FENCE") CC+=("$R_COMPARE")
}
for ((i = 1; i <= REPEAT; i++)); do
	if ((i % 2)); then
		baseline
		BC+=("$R_S")
		clean_verify "$i"
	else
		clean_verify "$i"
		baseline
		BC+=("$R_S")
	fi
done

# the same under load: pgbench on the source until the rounds end
"$PSQL" -X -qAt -d "$SRC_CONN" -c "SELECT 1" >/dev/null
pgbench -n -c 2 -j 2 -R "$LOAD_TPS" -T 100000 -d "$SRC_URL" >"$WORK/pgbench-load.log" 2>&1 &
BG[load]=$!
# the load reaches the target before the first round
LOAD_START=$(src -c "SELECT pg_current_wal_lsn()")
sleep 2
wait_for tgt "SELECT coalesce(bool_and(last_commit_lsn > '$LOAD_START'), false) FROM trellara.apply_checkpoint"
declare -a BL=() VL=() FL=() CL=()
load_verify() {
	verify "load-$1"
	local j="$WORK/verify-load-$1.json"
	kill -0 "${BG[load]}" 2>/dev/null || { cat "$WORK/pgbench-load.log" >&2; die "the pgbench load ended early"; }
	((R_RC == 0)) || { cat "$j" "$WORK/verify-load-$1.log" >&2; die "verify under load $1 exited $R_RC, not 0"; }
	[[ $(jq -r '.result' "$j") == CONVERGED ]] || { cat "$j" >&2; die "verify under load $1: not CONVERGED"; }
	VL+=("$R_S") FL+=("$R_FENCE") CL+=("$R_COMPARE")
}
for ((i = 1; i <= REPEAT; i++)); do
	if ((i % 2)); then
		baseline
		BL+=("$R_S")
		load_verify "$i"
	else
		load_verify "$i"
		baseline
		BL+=("$R_S")
	fi
done
kill -TERM "${BG[load]}" 2>/dev/null || true
wait "${BG[load]}" 2>/dev/null || true
BG[load]=
# idle again: everything the load wrote is applied before the divergence
IDLE_AT=$(src -c "SELECT pg_current_wal_lsn()")
wait_for tgt "SELECT coalesce(bool_and(applied_through_lsn >= '$IDLE_AT'), false) FROM trellara.apply_checkpoint"

# 10 rows, one in each tenth of the key range, changed on the target only
AIDS=()
for ((k = 0; k < 10; k++)); do AIDS+=($((k * ROWS / 10 + 1 + (k * 7919 + 4243) % (ROWS / 10)))); done
AID_LIST=$(IFS=,; echo "${AIDS[*]}")
CHANGED=$(tgt -c "WITH u AS (UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid IN ($AID_LIST) RETURNING 1) SELECT count(*) FROM u")
[[ $CHANGED == 10 ]] || die "the divergence UPDATE changed $CHANGED rows, not 10"
WANT_KEYS=$(printf '(%s)\n' "${AIDS[@]}" | sort)

divergent_verify() {
	verify "diverged-$1"
	local j="$WORK/verify-diverged-$1.json" keys
	((R_RC == 1)) || { cat "$j" "$WORK/verify-diverged-$1.log" >&2; die "divergent verify $1 exited $R_RC, not 1"; }
	[[ $(jq -r '.result' "$j") == DIVERGED ]] || { cat "$j" >&2; die "divergent verify $1: not DIVERGED"; }
	[[ $(jq -c '[.tables[0].divergences[] | [.kind, .count]]' "$j") == '[["content_differs",10]]' ]] ||
		{ cat "$j" >&2; die "divergent verify $1: not exactly 10 content_differs"; }
	keys=$(jq -r '.tables[0].divergences[0].keys[]' "$j" | sort)
	[[ $keys == "$WANT_KEYS" ]] || { cat "$j" >&2; die "divergent verify $1 names other keys than $AID_LIST"; }
	VD+=("$R_S") FD+=("$R_FENCE") CD+=("$R_COMPARE")
}
for ((i = 1; i <= REPEAT; i++)); do
	if ((i % 2)); then
		baseline
		BD+=("$R_S")
		divergent_verify "$i"
	else
		divergent_verify "$i"
		baseline
		BD+=("$R_S")
	fi
done

# stop the flow
for p in applyd capture; do
	bench_term "$p" "trellara-$p" "$WORK/$p.log"
done

# ---------------------------------------------------------------- report

MBC=$(median "${BC[@]}") MVC=$(median "${VC[@]}") MBD=$(median "${BD[@]}") MVD=$(median "${VD[@]}")
MBL=$(median "${BL[@]}") MVL=$(median "${VL[@]}")
# the comparison alone: rounds where applyd's hold was found in its log
med_known() { # VALUE... ("-" = unknown); "-" when none is known
	local v k=()
	for v; do [[ $v == - ]] || k+=("$v"); done
	if ((${#k[@]})); then median "${k[@]}"; else echo -; fi
}
MCC=$(med_known "${CC[@]}") MCD=$(med_known "${CD[@]}") MCL=$(med_known "${CL[@]}")
ratio() { if [[ $1 == - || $2 == - ]]; then echo -; else awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a / b}'; fi; }
met() { if [[ $1 == - ]]; then echo unknown; else awk -v v="$1" -v g="$2" 'BEGIN{print (v <= g) ? "met" : "NOT met"}'; fi; }
R_CLEAN=$(ratio "$MVC" "$MBC")
R_LOAD=$(ratio "$MVL" "$MBL")
R_DIV=$(ratio "$MVD" "$MVC")
R_CLEAN_CMP=$(ratio "$MCC" "$MBC")
R_LOAD_CMP=$(ratio "$MCL" "$MBL")
R_DIV_CMP=$(ratio "$MCD" "$MCC")
printf '%-52s %9s %10s  %s\n' measurement "median s" "rows/s" "per round, s"
row() {
	if [[ $2 == - ]]; then
		printf '%-52s %9s %10s  %s\n' "$1" - - "$3"
	else
		printf '%-52s %9.2f %10.0f  %s\n' "$1" "$2" "$(awk -v r="$ROWS" -v s="$2" 'BEGIN{print r / s}')" "$3"
	fi
}
row "baseline, idle source" "$MBC" "${BC[*]}"
row "verify, idle, CONVERGED: start to verdict" "$MVC" "${VC[*]}"
row "  of which the comparison (held to exit)" "$MCC" "${CC[*]}"
row "baseline, under load" "$MBL" "${BL[*]}"
row "verify, under load, CONVERGED: start to verdict" "$MVL" "${VL[*]}"
row "  of which the comparison (held to exit)" "$MCL" "${CL[*]}"
row "baseline (divergent rounds)" "$MBD" "${BD[*]}"
row "verify, 10 rows differ, DIVERGED: start to verdict" "$MVD" "${VD[*]}"
row "  of which the comparison (held to exit)" "$MCD" "${CD[*]}"
echo "table: pgbench_accounts, $ROWS rows, $MB MB heap on each side (pgbench scale $SCALE); baseline = COPY TO STDOUT > /dev/null" \
	"on source and target at once; load = pgbench -R $LOAD_TPS, 2 clients, on the source"
echo "start to fence (applyd's \"held at fence\" for verify's fence, from its log), s: idle ${FC[*]}; under load ${FL[*]};" \
	"divergent ${FD[*]}"
echo "comparison alone / baseline, idle = $R_CLEAN_CMP (goal <= $COMPARE_GOAL: $(met "$R_CLEAN_CMP" "$COMPARE_GOAL"));" \
	"under load = $R_LOAD_CMP (for information)"
echo "start to verdict / baseline, idle = $R_CLEAN (goal <= $START_GOAL: $(met "$R_CLEAN" "$START_GOAL"));" \
	"under load = $R_LOAD (goal <= $START_GOAL: $(met "$R_LOAD" "$START_GOAL"))"
echo "divergent / clean verify, start to verdict = $R_DIV (goal <= $DIVERGED_GOAL: $(met "$R_DIV" "$DIVERGED_GOAL")); comparison alone: $R_DIV_CMP" \
	"($(met "$R_DIV_CMP" "$DIVERGED_GOAL")); divergent verify / its rounds' baseline = $(ratio "$MVD" "$MBD")"
echo "every clean verify: exit 0, CONVERGED, $ROWS rows each side (under load: CONVERGED); every divergent one: exit 1, DIVERGED," \
	"exactly 10 content_differs naming aid $AID_LIST"
echo "setup $SETUP_S s (trellara-snapshot --create-tables $SNAPSHOT_S s; capture + applyd running since);" \
	"warm-up scan $WARMUP_S s; total $(secs "$T0" "$EPOCHREALTIME" | cut -d. -f1) s"
