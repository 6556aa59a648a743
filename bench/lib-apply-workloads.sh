# lib-apply-workloads.sh - the workloads of bench/apply-bench.sh (sourced,
# not run; its header describes them): their tables, initial rows, pgbench
# scripts, the checks of the source after a backlog, and the fingerprint
# every target database is compared with.
# Uses the caller's globals: WORK, SCALE, CLIENTS, UPDATES_ROWS, PSQL, and
# its functions die, src.
# shellcheck shell=bash
# shellcheck disable=SC2034 # sets the caller's globals

# wl_define W: W_TABLES (published, besides bench_heartbeat), W_CHANGES
# (row changes per transaction), W_DESC, W_GOAL (the issue's ratio goal),
# W_PGBENCH (pgbench's workload arguments)
wl_define() {
	W=$1 W_SLOT=trellara_$1 W_STREAM=$WORK/$1/stream
	case $W in
	tpcb | hotkey)
		W_TABLES=(pgbench_accounts pgbench_branches pgbench_tellers pgbench_history)
		W_CHANGES=4 W_PGBENCH=()
		if [[ $W == tpcb ]]; then
			W_SCALE=$SCALE W_GOAL=2.0 W_DESC="pgbench tpcb-like, scale $SCALE (3 updates + 1 insert per transaction)"
		else
			W_SCALE=1 W_GOAL=1.5 W_DESC="pgbench tpcb-like, scale 1: every transaction updates the one branch row"
		fi
		;;
	inserts)
		W_TABLES=(bench_ins) W_CHANGES=4 W_GOAL=1.5 W_PGBENCH=(-D n=0 -f "$WORK/$W.sql")
		W_DESC="one INSERT of 4 distinct keys per transaction"
		cat >"$WORK/$W.sql" <<'EOF'
\set n :n + 1
\set v random(1, 1000000000)
INSERT INTO bench_ins (c, n, v, t) SELECT :client_id, (:n - 1) * 4 + g, :v + g, md5((:v + g)::text) FROM generate_series(1, 4) g;
EOF
		;;
	updates)
		W_TABLES=(bench_upd) W_CHANGES=4 W_GOAL=1.5 W_PGBENCH=(-D n=0 -f "$WORK/$W.sql")
		W_DESC="one UPDATE of 4 rows no other transaction touches per transaction ($UPDATES_ROWS rows per client)"
		cat >"$WORK/$W.sql" <<'EOF'
\set n :n + 1
\set u random(1, 1000000000)
UPDATE bench_upd SET v = v + 1, u = :u WHERE c = :client_id AND n BETWEEN (:n - 1) * 4 + 1 AND :n * 4;
EOF
		;;
	conflict)
		W_TABLES=(bench_counter bench_conflict) W_CHANGES=2 W_GOAL=1.0 W_PGBENCH=(-D n=0 -f "$WORK/$W.sql")
		W_DESC="UPDATE of the one counter row + INSERT of a distinct key per transaction"
		cat >"$WORK/$W.sql" <<'EOF'
\set n :n + 1
BEGIN;
UPDATE bench_counter SET n = n + 1 WHERE id = 1;
INSERT INTO bench_conflict (c, n, v) SELECT :client_id, :n, n FROM bench_counter WHERE id = 1;
END;
EOF
		;;
	esac
	mkdir -p "$WORK/$W"
}
# wl_init URL: the workload's tables and their initial rows (deterministic)
wl_init() {
	local sql
	case $W in
	tpcb | hotkey)
		pgbench -i -q -s "$W_SCALE" -d "$1"
		return
		;;
	inserts) sql="CREATE TABLE bench_ins (c int, n int, v bigint NOT NULL, t text NOT NULL, PRIMARY KEY (c, n))" ;;
	updates)
		sql="CREATE TABLE bench_upd (c int, n int, v int NOT NULL, u int NOT NULL, t text NOT NULL, PRIMARY KEY (c, n));
			INSERT INTO bench_upd SELECT c, n, 0, 0, md5(c || ':' || n) FROM generate_series(0, $CLIENTS - 1) c, generate_series(1, $UPDATES_ROWS) n"
		;;
	conflict)
		sql="CREATE TABLE bench_counter (id int PRIMARY KEY, n bigint NOT NULL);
			INSERT INTO bench_counter VALUES (1, 0);
			CREATE TABLE bench_conflict (c int, n int, v bigint NOT NULL, PRIMARY KEY (c, n))"
		;;
	esac
	"$PSQL" -X -qAt -v ON_ERROR_STOP=1 -d "$1" -c "$sql" -c "VACUUM ANALYZE"
}
# wl_check_source PGBENCH_TXNS: the backlog did what the workload says
wl_check_source() {
	local n=$1 q got
	case $W in
	tpcb | hotkey) q="SELECT count(*) = $n FROM pgbench_history" ;;
	inserts) q="SELECT count(*) = 4 * $n FROM bench_ins" ;;
	updates) q="SELECT count(*) FILTER (WHERE v = 1) = 4 * $n AND count(*) FILTER (WHERE v > 1) = 0 FROM bench_upd" ;;
	conflict) q="SELECT (SELECT n FROM bench_counter) = $n AND (SELECT count(*) FROM bench_conflict) = $n" ;;
	esac
	got=$(src -c "$q")
	[[ $got == t ]] && return 0
	[[ $W == updates ]] && src -c "SELECT max(n) = $UPDATES_ROWS FROM bench_upd WHERE v > 0" | grep -qx t &&
		die "updates: a client ran out of rows ($UPDATES_ROWS per client): raise APPLY_BENCH_UPDATES_ROWS"
	die "$W: the source does not hold what $n transactions of the workload write ($q)"
}
# what every target must hold at END: per table the row count and the sum
# of hashtext() of every row's text, i.e. of every column
fingerprint() {
	local t sep='' q="SELECT "
	for t in "${W_TABLES[@]}" bench_heartbeat; do
		q+="$sep(SELECT '$t ' || count(*) || ':' || coalesce(sum(hashtext(x::text)::bigint), 0) FROM $t x)"
		sep=" || ' ' || "
	done
	printf '%s' "$q"
}

