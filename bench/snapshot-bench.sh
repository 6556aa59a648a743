#!/usr/bin/env bash
# snapshot-bench.sh - trellara-snapshot's copy throughput (rows/s, MB/s)
# for one large table (split into ranges) and for two tables, each with 2
# workers, against the raw
# limit measured in the same run (psql COPY TO STDOUT | psql COPY FROM
# STDIN on the same data, binary and text, plus the primary key built
# after the load) and against pgcopydb clone where it installs.
#
#   bench/snapshot-bench.sh            (make bench runs it)
#
# Method.  Two throwaway clusters (tests/bats/helpers/pg.bash: copies of
# the cached initdb template, unix sockets only): a source (fsync off; it
# is only read) and a target (fsync on, autovacuum off, no checkpoint
# during a run).  The source holds pgbench -i -s SCALE's pgbench_accounts
# (SCALE x 100 000 rows; scale 20 ~ 260 MB of heap, 70 ~ 1 GB) and
# pgbench_accounts2, a copy of it; both VACUUMed (hint bits set, in the OS
# cache) and with their primary key on aid.  Every method copies into a
# fresh target database of its own, dropped after its run; the target is
# CHECKPOINTed and `sync` run before each run, so nothing left by the setup
# (the source runs with fsync off) or by one run is written out during the
# next.  Shapes: "1 table" = pgbench_accounts alone, one copy
# at a time; "2 tables" = pgbench_accounts + pgbench_accounts2, two at once.
#   raw binary  per table: psql -c 'COPY t TO STDOUT (FORMAT binary)' |
#               psql -c 'COPY t FROM STDIN (FORMAT binary)' into the table
#               created beforehand, untimed, without its primary key
#               (pg_dump --section=pre-data); then ALTER TABLE t ADD
#               CONSTRAINT t_pkey PRIMARY KEY (aid).  "2 tables": both pipes
#               at once, then both index builds at once: the limit.
#   raw text    the same without (FORMAT binary): the issue's
#               psql COPY | psql COPY.
#   trellara    trellara-snapshot --config F --create-tables into an empty
#               database, snapshot.workers 2 and snapshot.split_bytes at
#               its default (1 GiB: at scale 20 no table is split, so
#               "1 table" is one worker's copy and "2 tables" one table per
#               worker), a
#               fresh slot per run (dropped afterwards); timed from exec to
#               exit, so it includes its connections, checkpoint schema,
#               table creation (from the catalogs), slot and exported
#               snapshot, the copy (binary COPY for these types: checked in
#               its log), the indexes (each table's in a transaction of its
#               own, two tables at once) and the handoff.  "data s" is the
#               longest table copy in its log (a split table's: first range
#               to last), "index s" the post-data phase from its log
#               timestamps.
#   trellara split  the same with snapshot.split_bytes SPLIT_BYTES (1
#               table: pgbench_accounts in ranges copied two at a time;
#               2 tables: each table likewise): what splitting a table
#               costs or gains on this machine (on 2 cores one pipe already
#               keeps both busy, so the ranges' extra work shows).
#   pgcopydb    pgcopydb clone (text COPY) into an empty database, with a
#               filter file naming only the shape's tables, --table-jobs
#               and --index-jobs 2, --split-tables-larger-than SPLIT_BYTES
#               (its own split, by key ranges), --no-owner
#               --no-acl --skip-large-objects --skip-extensions; it also
#               runs VACUUM ANALYZE on each table (pgcopydb 0.10 has no
#               switch to skip it).  When pgcopydb is not on PATH, the
#               script tries `apt-get install -y pgcopydb` once (as root
#               only) and says so when that fails.
# Every copy is checked afterwards: row count of each table and its
# primary key present.  rows/s and MB/s = rows and source heap size
# (pg_relation_size) of the shape's tables / total seconds.  With REPEAT
# > 1 the methods alternate their order (every other round backwards) and
# the medians are shown, with every round's total.
# Goals (issue 17): 1 table (2 M rows at scale 20), 2 workers: trellara
# total <= 1.1 x (raw binary data + index) (aim 1.0: split copies can beat
# one pipe); 2 tables: <= 1.0 x (both raw pipes, then both builds, at
# once); pgcopydb total >= 1.5 x trellara total.  Judged for both trellara
# rows: the default configuration and the forced split.
#
# Environment: SNAPSHOT_BENCH_SCALE (pgbench scale, default 20; 70 for a
# ~1 GB table), SNAPSHOT_BENCH_REPEAT (default 3),
# SNAPSHOT_BENCH_SPLIT_BYTES (the "trellara split" rows' snapshot.split_bytes, default 67108864:
# scale 20's 260 MB table in 4 ranges),
# SNAPSHOT_BENCH_TARGET_FSYNC (on; "off" makes the target's flushes free),
# SNAPSHOT_BENCH_PGCOPYDB (auto: use it, installing it if possible;
# off: skip it), SNAPSHOT_BENCH_KEEP=1 keeps the directory (clusters stopped).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
# shellcheck source=bench/lib-cluster.sh
source bench/lib-cluster.sh
bench_init snapshot-bench SNAPSHOT_BENCH_KEEP

SCALE=${SNAPSHOT_BENCH_SCALE:-20}
REPEAT=${SNAPSHOT_BENCH_REPEAT:-3}
TARGET_FSYNC=${SNAPSHOT_BENCH_TARGET_FSYNC:-on}
PGCOPYDB_MODE=${SNAPSHOT_BENCH_PGCOPYDB:-auto}
SPLIT_BYTES=${SNAPSHOT_BENCH_SPLIT_BYTES:-67108864}
PUB=bench_pub
RAW_GOAL_1=1.1    # 1 table: trellara / (raw binary + index) <=
RAW_GOAL_2=1.0    # 2 tables: the same <=
PGCOPYDB_GOAL=1.5 # pgcopydb / trellara >=
WORKERS=2

[[ -x $REPO/bin/trellara-snapshot ]] || die "$REPO/bin/trellara-snapshot missing; run make first"
[[ $SCALE =~ ^[1-9][0-9]*$ && $REPEAT =~ ^[1-9][0-9]*$ ]] || die "SNAPSHOT_BENCH_SCALE and _REPEAT: positive integers"
[[ $SPLIT_BYTES =~ ^[0-9]+$ ]] || die "SNAPSHOT_BENCH_SPLIT_BYTES: a byte count (0: no split)"
[[ $TARGET_FSYNC == on || $TARGET_FSYNC == off ]] || die "SNAPSHOT_BENCH_TARGET_FSYNC: on or off"
[[ $PGCOPYDB_MODE == auto || $PGCOPYDB_MODE == off ]] || die "SNAPSHOT_BENCH_PGCOPYDB: auto or off"
trellara_pg_check_bindir "$PG_BINDIR"
PSQL=$(trellara_pg_psql_bin)
# The binaries themselves, not Debian's /usr/bin wrappers (a Perl start
# each); trellara-snapshot and pgcopydb find pg_dump and psql on PATH.
export PATH="$PG_BINDIR:$PATH"
for tool in pgbench pg_dump; do
	command -v "$tool" >/dev/null || die "$tool not found"
done

# ---------------------------------------------------------------- directory
#
# bench/lib-cluster.sh: the directory in the bats harness layout (owner
# file, watchdog, source/ and target/): if this script is SIGKILLed, the
# watchdog, or the next bats run's reaper, stops both clusters and removes
# it; cleanup ends every process in BG (a pipeline's psql processes first).
bench_dir

# ---------------------------------------------------------------- pgcopydb

PGCOPYDB=
PGCOPYDB_NOTE=
if [[ $PGCOPYDB_MODE == off ]]; then
	PGCOPYDB_NOTE="skipped (SNAPSHOT_BENCH_PGCOPYDB=off)"
elif PGCOPYDB=$(command -v pgcopydb); then
	:
elif _trellara_pg_is_root && command -v apt-get >/dev/null; then
	# one try, not timed
	if apt-get install -y -q pgcopydb >"$WORK/apt-pgcopydb.log" 2>&1 && PGCOPYDB=$(command -v pgcopydb); then
		PGCOPYDB_NOTE="installed by this run (apt-get install -y pgcopydb)"
	else
		PGCOPYDB=
		PGCOPYDB_NOTE="not available: apt-get install -y pgcopydb failed ($(tail -n 1 "$WORK/apt-pgcopydb.log"))"
	fi
else
	PGCOPYDB_NOTE="not available: not on PATH, and only root may apt-get install it"
fi
if [[ -n $PGCOPYDB ]]; then
	PGCOPYDB_VERSION=$("$PGCOPYDB" --version 2>&1 | grep -o 'pgcopydb version [^ ]*' | head -1) || PGCOPYDB_VERSION="pgcopydb"
	PGCOPYDB_NOTE="$PGCOPYDB_VERSION${PGCOPYDB_NOTE:+, $PGCOPYDB_NOTE}"
fi

# ---------------------------------------------------------------- clusters

bench_create source target
cat >>"$FDIR/source/postgresql.conf" <<EOF
# ---- bench/snapshot-bench.sh ----
autovacuum = off
max_wal_size = '16GB'
checkpoint_timeout = '1h'
EOF
cat >>"$FDIR/target/postgresql.conf" <<EOF
# ---- bench/snapshot-bench.sh ----
fsync = $TARGET_FSYNC                 # the copies' commits are really flushed
autovacuum = off              # the same work in every run
max_wal_size = '16GB'         # no checkpoint in the middle of a run
checkpoint_timeout = '1h'
EOF
bench_start source target

src() { bench_psql "$SRC_CONN" "$@"; }
tgt() { bench_psql "$(bench_tgt_conn "$1")" "${@:2}"; } # DB SQL...
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", b - a}'; }
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# ---------------------------------------------------------------- setup

T0=$EPOCHREALTIME
src -c "SELECT 1" >/dev/null
bench_run_bg init "$WORK/pgbench-init.log" pgbench -i -q -s "$SCALE" -d "$SRC_URL"
bench_wait_bg init || { cat "$WORK/pgbench-init.log" >&2; die "pgbench -i failed"; }
bench_run_bg copy2 "$WORK/accounts2.log" src \
	-c "CREATE TABLE pgbench_accounts2 (LIKE pgbench_accounts INCLUDING ALL EXCLUDING INDEXES)" \
	-c "INSERT INTO pgbench_accounts2 SELECT * FROM pgbench_accounts" \
	-c "ALTER TABLE pgbench_accounts2 ADD PRIMARY KEY (aid)" \
	-c "VACUUM ANALYZE pgbench_accounts2" -c "VACUUM ANALYZE pgbench_accounts" \
	-c "CREATE PUBLICATION $PUB FOR TABLE pgbench_accounts, pgbench_accounts2" -c "CHECKPOINT"
bench_wait_bg copy2 || { cat "$WORK/accounts2.log" >&2; die "cannot make pgbench_accounts2"; }
ROWS1=$(src -c "SELECT count(*) FROM pgbench_accounts")
ROWS2=$(src -c "SELECT count(*) FROM pgbench_accounts2")
BYTES1=$(src -c "SELECT pg_relation_size('pgbench_accounts')")
BYTES2=$(src -c "SELECT pg_relation_size('pgbench_accounts2')")
# the raw pipes' template: both tables, no primary key
tgt postgres -c "CREATE DATABASE tmpl_raw" >/dev/null
pg_dump --no-owner --no-privileges --schema-only --section=pre-data -t public.pgbench_accounts -t public.pgbench_accounts2 \
	-d "$SRC_URL" | tgt tmpl_raw >/dev/null || die "cannot create the raw pipes' template database"
printf '[include-only-table]\npublic.pgbench_accounts\n' >"$WORK/filter-1.ini"
printf '[include-only-table]\npublic.pgbench_accounts\npublic.pgbench_accounts2\n' >"$WORK/filter-2.ini"
SETUP_S=$(secs "$T0" "$EPOCHREALTIME")

# ---------------------------------------------------------------- the methods
#
# Each sets R_TOTAL, R_DATA, R_INDEX (seconds; "" when unknown).

tables_of() { # SHAPE (1 or 2)
	if (($1 == 1)); then echo pgbench_accounts; else echo pgbench_accounts pgbench_accounts2; fi
}

quiesce() { # DB CREATE-ARGS...: a fresh target database, nothing left to write
	local db=$1
	shift
	tgt postgres -c "CREATE DATABASE $db $*" -c "CHECKPOINT" >/dev/null
	sync
}

# pipe TABLE DB FORMAT (text|binary): one raw COPY pipe
pipe() {
	local t=$1 db=$2 opt=''
	[[ $3 == binary ]] && opt=' (FORMAT binary)'
	"$PSQL" -X -q -v ON_ERROR_STOP=1 -d "$SRC_CONN" -c "COPY public.$t TO STDOUT$opt" |
		"$PSQL" -X -q -v ON_ERROR_STOP=1 -d "$(bench_tgt_conn "$db")" -c "COPY public.$t FROM STDIN$opt"
}

run_raw() { # SHAPE FORMAT DB
	local shape=$1 fmt=$2 db=$3 t t0 t1 t2 names=()
	quiesce "$db" TEMPLATE tmpl_raw
	t0=$EPOCHREALTIME
	for t in $(tables_of "$shape"); do
		bench_run_bg "pipe_$t" "$WORK/$db-$t.log" pipe "$t" "$db" "$fmt"
		names+=("pipe_$t")
	done
	bench_wait_bg "${names[@]}" || { cat "$WORK/$db"-*.log >&2; die "$db: a COPY pipe failed"; }
	t1=$EPOCHREALTIME
	names=()
	for t in $(tables_of "$shape"); do
		bench_run_bg "index_$t" "$WORK/$db-$t-index.log" tgt "$db" -c "ALTER TABLE public.$t ADD CONSTRAINT ${t}_pkey PRIMARY KEY (aid)"
		names+=("index_$t")
	done
	bench_wait_bg "${names[@]}" || { cat "$WORK/$db"-*-index.log >&2; die "$db: an index build failed"; }
	t2=$EPOCHREALTIME
	R_DATA=$(secs "$t0" "$t1") R_INDEX=$(secs "$t1" "$t2") R_TOTAL=$(secs "$t0" "$t2")
}

ts_epoch() { date -u -d "$1" +%s.%N; } # a log line's ISO time stamp

run_trellara() { # SHAPE DB [SPLIT_BYTES]
	local shape=$1 db=$2 split=${3:-} slot=snapbench_$2 flow=$WORK/$2.yml log=$WORK/$2.log t t0 t1 line
	{
		cat <<EOF
config_version: 2
environment: bench
source:
  id: bench
  database_url: "$SRC_URL"
  publication: $PUB
  slot: $slot
  stream_spill_dir: "$WORK/spill"
dataset:
  id: snapshot
  tables:
EOF
		for t in $(tables_of "$shape"); do echo "    - {schema: public, name: $t}"; done
		cat <<EOF
stream:
  kind: local
  path: "$WORK/stream-$db"
  min_free_bytes: 0
target:
  database_url: "$(bench_tgt_url "$db")"
snapshot:
  workers: $WORKERS
EOF
		[[ -z $split ]] || echo "  split_bytes: $split"
	} >"$flow"
	quiesce "$db"
	t0=$EPOCHREALTIME
	bench_run_bg snapshot "$log" "$REPO/bin/trellara-snapshot" --config "$flow" --create-tables
	bench_wait_bg snapshot || { cat "$log" >&2; die "trellara-snapshot failed"; }
	t1=$EPOCHREALTIME
	src -c "SELECT pg_drop_replication_slot('$slot')" >/dev/null
	grep -q 'stream_handoff_ready' "$log" || { cat "$log" >&2; die "$db: no handoff in trellara-snapshot's output"; }
	for t in $(tables_of "$shape"); do
		grep -q "table public\.$t: \(range [0-9]*/[0-9]*: \)\?[0-9]* rows copied (binary COPY" "$log" ||
			{ cat "$log" >&2; die "$db: $t was not copied with binary COPY"; }
	done
	# the longest table copy (a whole table's line, or a split table's
	# "copied in N ranges"), not the ranges' own lines; the post-data
	# phase: last copy logged -> last index created
	R_DATA=$(grep 'rows copied' "$log" | grep -v ': range [0-9]*/' | grep -o '[0-9.]* s)$' |
		awk '{s = $1 + 0; if (s > m) m = s} END {printf "%.2f", m}')
	local copied indexed
	copied=$(grep 'rows copied' "$log" | tail -n 1 | grep -o '^[^ ]*[0-9]Z') || copied=
	indexed=$(grep 'post-data created' "$log" | tail -n 1 | grep -o '^[^ ]*[0-9]Z') || indexed=
	R_INDEX=
	[[ -n $copied && -n $indexed ]] && R_INDEX=$(secs "$(ts_epoch "$copied")" "$(ts_epoch "$indexed")")
	R_TOTAL=$(secs "$t0" "$t1")
}

run_pgcopydb() { # SHAPE DB
	local shape=$1 db=$2 t0 t1 split=()
	if ((SPLIT_BYTES > 0)); then split=(--split-tables-larger-than "$SPLIT_BYTES"); fi
	quiesce "$db"
	rm -rf "$WORK/pgcopydb-$db"
	t0=$EPOCHREALTIME
	bench_run_bg pgcopydb "$WORK/$db.log" "$PGCOPYDB" clone --source "$SRC_URL" --target "$(bench_tgt_url "$db")" \
		--dir "$WORK/pgcopydb-$db" --table-jobs "$WORKERS" --index-jobs "$WORKERS" --filters "$WORK/filter-$shape.ini" \
		"${split[@]}" \
		--no-owner --no-acl --skip-large-objects --skip-extensions
	bench_wait_bg pgcopydb || { tail -n 30 "$WORK/$db.log" >&2; die "pgcopydb clone failed"; }
	t1=$EPOCHREALTIME
	R_DATA='' R_INDEX='' R_TOTAL=$(secs "$t0" "$t1")
}

# check SHAPE DB: the copy is whole and has its primary keys; then drop it
check_and_drop() {
	local shape=$1 db=$2 t n want pk
	for t in $(tables_of "$shape"); do
		n=$(tgt "$db" -c "SELECT count(*) FROM public.$t")
		want=$ROWS1
		[[ $t == pgbench_accounts2 ]] && want=$ROWS2
		[[ $n == "$want" ]] || die "$db: public.$t has $n rows, the source $want"
		pk=$(tgt "$db" -c "SELECT count(*) FROM pg_constraint WHERE conrelid = 'public.$t'::regclass AND contype = 'p'")
		[[ $pk == 1 ]] || die "$db: public.$t has no primary key"
	done
	tgt postgres -c "DROP DATABASE $db" >/dev/null
	rm -rf "$WORK/pgcopydb-$db" "$WORK/stream-$db"
}

METHODS=("raw_binary" "raw_text" "trellara" "trellara_split")
[[ -n $PGCOPYDB ]] && METHODS+=("pgcopydb")
declare -A TOTAL=() DATA=() INDEX=()
measure() { # SHAPE METHOD ROUND
	local shape=$1 m=$2 db=${2}_${1}_$3
	case $m in
	raw_binary) run_raw "$shape" binary "$db" ;;
	raw_text) run_raw "$shape" text "$db" ;;
	trellara) run_trellara "$shape" "$db" ;;
	trellara_split) run_trellara "$shape" "$db" "$SPLIT_BYTES" ;;
	pgcopydb) run_pgcopydb "$shape" "$db" ;;
	esac
	check_and_drop "$shape" "$db"
	TOTAL[$shape,$m]+="$R_TOTAL " DATA[$shape,$m]+="${R_DATA:+$R_DATA }" INDEX[$shape,$m]+="${R_INDEX:+$R_INDEX }"
}

echo "== snapshot ($(date -u +%Y-%m-%dT%H:%M:%SZ), trellara $(git -C "$REPO" describe --always --dirty 2>/dev/null || echo '?'), $(nproc) cores," \
	"PostgreSQL $(trellara_pg_version | cut -d' ' -f1), target fsync $TARGET_FSYNC, load average $(cut -d' ' -f1-3 /proc/loadavg))"
for shape in 1 2; do
	for ((i = 1; i <= REPEAT; i++)); do
		order=("${METHODS[@]}")
		if ! ((i % 2)); then # every other round backwards
			order=()
			for ((k = ${#METHODS[@]} - 1; k >= 0; k--)); do order+=("${METHODS[k]}"); done
		fi
		for m in "${order[@]}"; do measure "$shape" "$m" "$i"; done
	done
done

# ---------------------------------------------------------------- report

med_or_dash() { # "v v v " or ""
	# shellcheck disable=SC2086
	if [[ -n ${1// /} ]]; then median $1; else echo -; fi
}
fmt() { if [[ $1 == - ]]; then echo -; else awk -v v="$1" 'BEGIN{printf "%.2f", v}'; fi; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a / b}'; }
met() { awk -v v="$1" -v g="$2" -v op="$3" 'BEGIN{ok = op == ">=" ? v >= g : v <= g; print ok ? "met" : "NOT met"}'; }
declare -A MED=()
printf '%-8s %-14s %9s %8s %7s %8s %8s %9s %7s\n' shape method rows MB "data s" "index s" "total s" rows/s MB/s
for shape in 1 2; do
	rows=$ROWS1 bytes=$BYTES1
	((shape == 2)) && rows=$((ROWS1 + ROWS2)) bytes=$((BYTES1 + BYTES2))
	label="1 table"
	((shape == 2)) && label="2 tables"
	for m in "${METHODS[@]}"; do
		tot=$(med_or_dash "${TOTAL[$shape,$m]}")
		MED[$shape,$m]=$tot
		printf '%-8s %-14s %9d %8.1f %7s %8s %8.2f %9.0f %7.1f\n' "$label" "${m/_/ }" "$rows" \
			"$(awk -v b="$bytes" 'BEGIN{print b / 1e6}')" "$(fmt "$(med_or_dash "${DATA[$shape,$m]}")")" \
			"$(fmt "$(med_or_dash "${INDEX[$shape,$m]}")")" "$tot" \
			"$(awk -v r="$rows" -v s="$tot" 'BEGIN{print r / s}')" "$(awk -v b="$bytes" -v s="$tot" 'BEGIN{print b / 1e6 / s}')"
	done
done
echo "MB = the source tables' heap (pg_relation_size); rows/s and MB/s over total s; raw: data = the COPY pipe(s)," \
	"index = ADD PRIMARY KEY after the load (2 tables: both pipes, then both builds, at once);" \
	"trellara: data = its longest table copy, index = its post-data phase (from its log), total = exec to exit"
for shape in 1 2; do
	for m in trellara trellara_split; do
		label="1 table, workers $WORKERS" goal=$RAW_GOAL_1
		((shape == 2)) && label="2 tables, workers $WORKERS" goal=$RAW_GOAL_2
		if [[ $m == trellara ]]; then label+=", split_bytes default (not split)"; else label+=", split_bytes $SPLIT_BYTES"; fi
		r=$(ratio "${MED[$shape,$m]}" "${MED[$shape,raw_binary]}")
		line="$label: ${m/_/ } / (raw binary + index) = $r (goal <= $goal: $(met "$r" "$goal" "<="));"
		line+=" ${m/_/ } / (raw text + index) = $(ratio "${MED[$shape,$m]}" "${MED[$shape,raw_text]}");"
		if [[ -n $PGCOPYDB ]]; then
			r=$(ratio "${MED[$shape,pgcopydb]}" "${MED[$shape,$m]}")
			line+=" pgcopydb / ${m/_/ } = $r (goal >= $PGCOPYDB_GOAL: $(met "$r" "$PGCOPYDB_GOAL" ">="))"
		else
			line+=" pgcopydb / ${m/_/ }: not measured"
		fi
		echo "$line"
	done
done
echo "pgcopydb: $PGCOPYDB_NOTE${PGCOPYDB:+ (clone, text COPY, --table-jobs/--index-jobs = workers, --split-tables-larger-than = split_bytes, includes its VACUUM ANALYZE)}"
if ((REPEAT > 1)); then
	echo "per round, total s:"
	for shape in 1 2; do
		label="1 table"
		((shape == 2)) && label="2 tables"
		for m in "${METHODS[@]}"; do echo "  $label, ${m/_/ }: ${TOTAL[$shape,$m]% }"; done
	done
fi
echo "source: pgbench scale $SCALE (+ pgbench_accounts2, a copy), set up in $SETUP_S s; every copy checked (row counts, primary key);" \
	"total $(secs "$T0" "$EPOCHREALTIME" | cut -d. -f1) s"
